//! The CEL environment kube-apiserver gives expressions, as far as the `cel` crate allows:
//! the standard library, the crate's strings, lists and encoders extensions (cel-go's
//! `ext.Strings`, `ext.Lists`, `ext.Encoders`), and kube's own libraries registered here as
//! overloads — lists (`isSorted`, `sum`, `min`, `max`, `indexOf`, `lastIndexOf`), regex
//! (`find`, `findAll`), sets (`sets.contains`, `sets.equivalent`, `sets.intersects`), URLs
//! (`isURL`, `url` and its getters), IP addresses and CIDRs (`isIP`, `ip`, `isCIDR`, `cidr`
//! and their methods, `string()` of both) and quantities (`isQuantity`, `quantity` and its
//! arithmetic and comparisons); the `format` and `semver` libraries are in [`super::format`]
//! and [`super::semver`], registered here with the rest. Opaque values that share method
//! names (a quantity's and a version's `compareTo`) are told apart by their overloads' types.

use std::cmp::Ordering;
use std::net::IpAddr;
use std::sync::Arc;

use cel::common::types::{Type, DYN_TYPE, INT_TYPE, LIST_TYPE, STRING_TYPE};
use cel::common::value::CowVal;
use cel::objects::{Opaque, Value};
use cel::{extensions, DeclarationError, Env, ExecutionError};
use ipnet::IpNet;

use super::value::{map, string};
use super::{format, semver};
use crate::machinery::net::is_global_unicast;
use crate::machinery::qos::parse_quantity;

/// The most matches `findAll` returns when no limit is given (bounded by the string anyway).
const FIND_ALL_UNLIMITED: i64 = -1;

/// A function over values: the receiver first for a method.
pub(super) type ValueFn = fn(&[Value]) -> Result<Value, ExecutionError>;

/// Runs `f` on the arguments as [`Value`]s.
pub(super) fn lift<'b, 'v>(args: Vec<CowVal<'b, 'v>>, f: ValueFn) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let values = args
        .iter()
        .map(|a| Value::try_from(a.as_ref()))
        .collect::<Result<Vec<_>, _>>()?;
    let out: Box<dyn cel::common::value::Val> = f(&values)?.try_into()?;
    Ok(CowVal::Owned(out))
}

/// Declares `$f` (a [`ValueFn`]) as an overload function the environment can call.
macro_rules! overload {
    ($f:path) => {{
        fn call<'b, 'v>(
            args: Vec<::cel::common::value::CowVal<'b, 'v>>,
        ) -> Result<::cel::common::value::CowVal<'b, 'v>, ::cel::ExecutionError> {
            $crate::cel::library::lift(args, $f)
        }
        call
    }};
}
pub(super) use overload;

/// How an overload is called.
pub(super) enum Call {
    /// `name(args...)`.
    Global,
    /// `target.name(args...)`.
    Member(Type),
}

/// An overload: function name, overload id, how it is called, argument types, implementation.
pub(super) type Overload = (
    &'static str,
    &'static str,
    Call,
    Vec<Type>,
    cel::common::functions::Function,
);

/// The type of the opaque values whose runtime type name is `name`, for overloads that take
/// only them.
pub(super) fn opaque_type(name: &'static str) -> Type {
    Type::new_opaque_type(name)
}

/// kube's additions: name, overload id, how it is called, argument types, implementation.
fn kube_functions() -> Vec<Overload> {
    use Call::{Global, Member};
    let quantity_type = || opaque_type(QUANTITY);
    vec![
        (
            "isSorted",
            "list_is_sorted",
            Member(LIST_TYPE),
            vec![],
            overload!(is_sorted),
        ),
        ("sum", "list_sum", Member(LIST_TYPE), vec![], overload!(sum)),
        ("min", "list_min", Member(LIST_TYPE), vec![], overload!(min)),
        ("max", "list_max", Member(LIST_TYPE), vec![], overload!(max)),
        (
            "indexOf",
            "list_index_of",
            Member(LIST_TYPE),
            vec![DYN_TYPE],
            overload!(index_of),
        ),
        (
            "lastIndexOf",
            "list_last_index_of",
            Member(LIST_TYPE),
            vec![DYN_TYPE],
            overload!(last_index_of),
        ),
        (
            "find",
            "string_find",
            Member(STRING_TYPE),
            vec![STRING_TYPE],
            overload!(find),
        ),
        (
            "findAll",
            "string_find_all",
            Member(STRING_TYPE),
            vec![STRING_TYPE],
            overload!(find_all),
        ),
        (
            "findAll",
            "string_find_all_n",
            Member(STRING_TYPE),
            vec![STRING_TYPE, INT_TYPE],
            overload!(find_all),
        ),
        (
            "sets.contains",
            "sets_contains",
            Global,
            vec![LIST_TYPE, LIST_TYPE],
            overload!(sets_contains),
        ),
        (
            "sets.equivalent",
            "sets_equivalent",
            Global,
            vec![LIST_TYPE, LIST_TYPE],
            overload!(sets_equivalent),
        ),
        (
            "sets.intersects",
            "sets_intersects",
            Global,
            vec![LIST_TYPE, LIST_TYPE],
            overload!(sets_intersects),
        ),
        ("isURL", "is_url", Global, vec![STRING_TYPE], overload!(is_url)),
        ("url", "string_to_url", Global, vec![STRING_TYPE], overload!(url)),
        (
            "getScheme",
            "url_get_scheme",
            Member(DYN_TYPE),
            vec![],
            overload!(url_scheme),
        ),
        (
            "getHost",
            "url_get_host",
            Member(DYN_TYPE),
            vec![],
            overload!(url_host),
        ),
        (
            "getHostname",
            "url_get_hostname",
            Member(DYN_TYPE),
            vec![],
            overload!(url_hostname),
        ),
        (
            "getPort",
            "url_get_port",
            Member(DYN_TYPE),
            vec![],
            overload!(url_port),
        ),
        (
            "getEscapedPath",
            "url_get_escaped_path",
            Member(DYN_TYPE),
            vec![],
            overload!(url_path),
        ),
        (
            "getQuery",
            "url_get_query",
            Member(DYN_TYPE),
            vec![],
            overload!(url_query),
        ),
        ("isIP", "is_ip", Global, vec![STRING_TYPE], overload!(is_ip)),
        ("ip", "string_to_ip", Global, vec![STRING_TYPE], overload!(ip)),
        ("ip", "cidr_ip", Member(DYN_TYPE), vec![], overload!(cidr_ip)),
        (
            "family",
            "ip_family",
            Member(DYN_TYPE),
            vec![],
            overload!(ip_family),
        ),
        (
            "isLoopback",
            "ip_is_loopback",
            Member(DYN_TYPE),
            vec![],
            overload!(ip_is_loopback),
        ),
        (
            "isUnspecified",
            "ip_is_unspecified",
            Member(DYN_TYPE),
            vec![],
            overload!(ip_is_unspecified),
        ),
        (
            "isGlobalUnicast",
            "ip_is_global_unicast",
            Member(DYN_TYPE),
            vec![],
            overload!(ip_is_global_unicast),
        ),
        ("isCIDR", "is_cidr", Global, vec![STRING_TYPE], overload!(is_cidr)),
        (
            "cidr",
            "string_to_cidr",
            Global,
            vec![STRING_TYPE],
            overload!(cidr),
        ),
        (
            "containsIP",
            "cidr_contains_ip",
            Member(DYN_TYPE),
            vec![DYN_TYPE],
            overload!(cidr_contains_ip),
        ),
        (
            "containsCIDR",
            "cidr_contains_cidr",
            Member(DYN_TYPE),
            vec![DYN_TYPE],
            overload!(cidr_contains_cidr),
        ),
        (
            "prefixLength",
            "cidr_prefix_length",
            Member(DYN_TYPE),
            vec![],
            overload!(cidr_prefix_length),
        ),
        (
            "masked",
            "cidr_masked",
            Member(DYN_TYPE),
            vec![],
            overload!(cidr_masked),
        ),
        (
            "string",
            "ip_to_string",
            Global,
            vec![opaque_type(IP)],
            overload!(ip_to_string),
        ),
        (
            "string",
            "cidr_to_string",
            Global,
            vec![opaque_type(CIDR)],
            overload!(cidr_to_string),
        ),
        (
            "isQuantity",
            "is_quantity",
            Global,
            vec![STRING_TYPE],
            overload!(is_quantity),
        ),
        (
            "quantity",
            "string_to_quantity",
            Global,
            vec![STRING_TYPE],
            overload!(quantity),
        ),
        (
            "isGreaterThan",
            "quantity_is_greater_than",
            Member(quantity_type()),
            vec![DYN_TYPE],
            overload!(q_greater),
        ),
        (
            "isLessThan",
            "quantity_is_less_than",
            Member(quantity_type()),
            vec![DYN_TYPE],
            overload!(q_less),
        ),
        (
            "compareTo",
            "quantity_compare_to",
            Member(quantity_type()),
            vec![DYN_TYPE],
            overload!(q_compare),
        ),
        (
            "add",
            "quantity_add",
            Member(quantity_type()),
            vec![DYN_TYPE],
            overload!(q_add),
        ),
        (
            "sub",
            "quantity_sub",
            Member(quantity_type()),
            vec![DYN_TYPE],
            overload!(q_sub),
        ),
        (
            "sign",
            "quantity_sign",
            Member(quantity_type()),
            vec![],
            overload!(q_sign),
        ),
        (
            "isInteger",
            "quantity_is_integer",
            Member(quantity_type()),
            vec![],
            overload!(q_is_integer),
        ),
        (
            "asInteger",
            "quantity_as_integer",
            Member(quantity_type()),
            vec![],
            overload!(q_as_integer),
        ),
        (
            "asApproximateFloat",
            "quantity_as_float",
            Member(quantity_type()),
            vec![],
            overload!(q_as_float),
        ),
    ]
}

/// The environment every kuberaft CEL expression is compiled and run in.
pub fn env() -> Result<Env, DeclarationError> {
    let mut env = Env::stdlib();
    env.add_extension(extensions::strings)?;
    env.add_extension(extensions::lists)?;
    env.add_extension(extensions::encoders)?;
    let libraries = [
        kube_functions(),
        format::functions(),
        semver::functions(),
        super::authz::functions(),
    ];
    for (name, id, call, args, f) in libraries.into_iter().flatten() {
        match call {
            Call::Global => env.add_overload(name, id, args, f)?,
            Call::Member(target) => env.add_member_overload(name, id, target, args, f)?,
        }
    }
    Ok(env)
}

pub(super) fn no_overload(name: &str, args: &[Value]) -> ExecutionError {
    ExecutionError::no_such_overload(name, args.iter().map(|a| a.type_of().to_string()).collect())
}

fn list<'a>(name: &str, args: &'a [Value]) -> Result<&'a [Value], ExecutionError> {
    match args.first() {
        Some(Value::List(items)) => Ok(items.as_slice()),
        _ => Err(no_overload(name, args)),
    }
}

pub(super) fn str_arg<'a>(name: &str, args: &'a [Value], i: usize) -> Result<&'a str, ExecutionError> {
    match args.get(i) {
        Some(Value::String(s)) => Ok(s.as_str()),
        _ => Err(no_overload(name, args)),
    }
}

fn compare(name: &str, a: &Value, b: &Value) -> Result<Ordering, ExecutionError> {
    a.partial_cmp(b).ok_or_else(|| {
        ExecutionError::function_error(
            name,
            format!("cannot compare {} and {}", a.type_of(), b.type_of()),
        )
    })
}

fn is_sorted(args: &[Value]) -> Result<Value, ExecutionError> {
    let items = list("isSorted", args)?;
    for pair in items.windows(2) {
        if compare("isSorted", &pair[0], &pair[1])? == Ordering::Greater {
            return Ok(Value::Bool(false));
        }
    }
    Ok(Value::Bool(true))
}

fn sum(args: &[Value]) -> Result<Value, ExecutionError> {
    let items = list("sum", args)?;
    let overflow = || ExecutionError::function_error("sum", "integer overflow");
    let mut total = match items.first() {
        None | Some(Value::Int(_)) => Value::Int(0),
        Some(Value::UInt(_)) => Value::UInt(0),
        Some(Value::Float(_)) => Value::Float(0.0),
        Some(other) => return Err(no_overload("sum", std::slice::from_ref(other))),
    };
    for item in items {
        total = match (&total, item) {
            (Value::Int(a), Value::Int(b)) => Value::Int(a.checked_add(*b).ok_or_else(overflow)?),
            (Value::UInt(a), Value::UInt(b)) => Value::UInt(a.checked_add(*b).ok_or_else(overflow)?),
            (Value::Float(a), Value::Float(b)) => Value::Float(a + b),
            _ => return Err(no_overload("sum", &[total.clone(), item.clone()])),
        };
    }
    Ok(total)
}

fn extreme(name: &str, args: &[Value], keep: Ordering) -> Result<Value, ExecutionError> {
    let items = list(name, args)?;
    let mut best = items
        .first()
        .ok_or_else(|| ExecutionError::function_error(name, format!("{name} called on empty list")))?;
    for item in &items[1..] {
        if compare(name, item, best)? == keep {
            best = item;
        }
    }
    Ok(best.clone())
}

fn min(args: &[Value]) -> Result<Value, ExecutionError> {
    extreme("min", args, Ordering::Less)
}

fn max(args: &[Value]) -> Result<Value, ExecutionError> {
    extreme("max", args, Ordering::Greater)
}

fn position(name: &str, args: &[Value], last: bool) -> Result<Value, ExecutionError> {
    let items = list(name, args)?;
    let needle = args.get(1).ok_or_else(|| no_overload(name, args))?;
    let found = if last {
        items.iter().rposition(|i| i == needle)
    } else {
        items.iter().position(|i| i == needle)
    };
    Ok(Value::Int(found.map_or(-1, |i| i as i64)))
}

fn index_of(args: &[Value]) -> Result<Value, ExecutionError> {
    position("indexOf", args, false)
}

fn last_index_of(args: &[Value]) -> Result<Value, ExecutionError> {
    position("lastIndexOf", args, true)
}

fn regex(name: &str, pattern: &str) -> Result<regex::Regex, ExecutionError> {
    regex::Regex::new(pattern).map_err(|e| ExecutionError::function_error(name, e))
}

fn find(args: &[Value]) -> Result<Value, ExecutionError> {
    let s = str_arg("find", args, 0)?;
    let re = regex("find", str_arg("find", args, 1)?)?;
    Ok(string(re.find(s).map_or("", |m| m.as_str())))
}

fn find_all(args: &[Value]) -> Result<Value, ExecutionError> {
    let s = str_arg("findAll", args, 0)?;
    let re = regex("findAll", str_arg("findAll", args, 1)?)?;
    let limit = match args.get(2) {
        Some(Value::Int(n)) => *n,
        _ => FIND_ALL_UNLIMITED,
    };
    let matches = re.find_iter(s).map(|m| string(m.as_str()));
    let found: Vec<Value> = match usize::try_from(limit) {
        Ok(n) => matches.take(n).collect(),
        Err(_) => matches.collect(),
    };
    Ok(Value::List(Arc::new(found)))
}

fn two_lists<'a>(name: &str, args: &'a [Value]) -> Result<(&'a [Value], &'a [Value]), ExecutionError> {
    match (args.first(), args.get(1)) {
        (Some(Value::List(a)), Some(Value::List(b))) => Ok((a.as_slice(), b.as_slice())),
        _ => Err(no_overload(name, args)),
    }
}

fn sets_contains(args: &[Value]) -> Result<Value, ExecutionError> {
    let (a, b) = two_lists("sets.contains", args)?;
    Ok(Value::Bool(b.iter().all(|x| a.contains(x))))
}

fn sets_equivalent(args: &[Value]) -> Result<Value, ExecutionError> {
    let (a, b) = two_lists("sets.equivalent", args)?;
    Ok(Value::Bool(
        b.iter().all(|x| a.contains(x)) && a.iter().all(|x| b.contains(x)),
    ))
}

fn sets_intersects(args: &[Value]) -> Result<Value, ExecutionError> {
    let (a, b) = two_lists("sets.intersects", args)?;
    Ok(Value::Bool(b.iter().any(|x| a.contains(x))))
}

/// A parsed URL (`url('https://example.com/a?b=c')`).
#[derive(Debug, PartialEq, Eq)]
struct Url(reqwest::Url);

impl Opaque for Url {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.URL"
    }
}

/// kube accepts absolute URLs and absolute paths (Go's `url.ParseRequestURI`).
fn parse_url(s: &str) -> Option<reqwest::Url> {
    if s.starts_with('/') {
        return reqwest::Url::parse("http://placeholder.invalid")
            .ok()?
            .join(s)
            .ok();
    }
    reqwest::Url::parse(s).ok()
}

fn is_url(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(parse_url(str_arg("isURL", args, 0)?).is_some()))
}

fn url(args: &[Value]) -> Result<Value, ExecutionError> {
    let s = str_arg("url", args, 0)?;
    let u = parse_url(s).ok_or_else(|| {
        ExecutionError::function_error(
            "url",
            format!("URL parse error during conversion from string: parse {s:?}: invalid URI for request"),
        )
    })?;
    Ok(Value::Opaque(Arc::new(Url(u))))
}

pub(super) fn opaque<'a, T: 'static>(
    name: &str,
    args: &'a [Value],
    i: usize,
) -> Result<&'a T, ExecutionError> {
    match args.get(i) {
        Some(Value::Opaque(o)) => o.downcast_ref::<T>().ok_or_else(|| no_overload(name, args)),
        _ => Err(no_overload(name, args)),
    }
}

fn url_scheme(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(string(opaque::<Url>("getScheme", args, 0)?.0.scheme()))
}

fn url_host(args: &[Value]) -> Result<Value, ExecutionError> {
    let u = &opaque::<Url>("getHost", args, 0)?.0;
    let host = u.host_str().unwrap_or_default();
    Ok(string(&match u.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    }))
}

fn url_hostname(args: &[Value]) -> Result<Value, ExecutionError> {
    let host = opaque::<Url>("getHostname", args, 0)?
        .0
        .host_str()
        .unwrap_or_default();
    Ok(string(host.trim_start_matches('[').trim_end_matches(']')))
}

fn url_port(args: &[Value]) -> Result<Value, ExecutionError> {
    let port = opaque::<Url>("getPort", args, 0)?.0.port();
    Ok(string(&port.map(|p| p.to_string()).unwrap_or_default()))
}

fn url_path(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(string(opaque::<Url>("getEscapedPath", args, 0)?.0.path()))
}

fn url_query(args: &[Value]) -> Result<Value, ExecutionError> {
    let u = &opaque::<Url>("getQuery", args, 0)?.0;
    let mut out: std::collections::BTreeMap<String, Vec<Value>> = std::collections::BTreeMap::new();
    for (k, v) in u.query_pairs() {
        out.entry(k.into_owned()).or_default().push(string(&v));
    }
    Ok(map(out
        .iter()
        .map(|(k, v)| (k.as_str(), Value::List(Arc::new(v.clone()))))))
}

/// An IP address (`ip('10.0.0.1')`).
#[derive(Debug, PartialEq, Eq)]
struct Ip(IpAddr);

/// The CEL type name of an IP address.
const IP: &str = "net.IP";

impl Opaque for Ip {
    fn runtime_type_name(&self) -> &str {
        IP
    }
}

/// A CIDR (`cidr('10.0.0.0/8')`): the address as written and its prefix.
#[derive(Debug, PartialEq, Eq)]
struct Cidr(IpNet);

/// The CEL type name of a CIDR.
const CIDR: &str = "net.CIDR";

impl Opaque for Cidr {
    fn runtime_type_name(&self) -> &str {
        CIDR
    }
}

/// kube's IP parsing: no zones, no IPv4-mapped IPv6 addresses.
fn parse_ip(s: &str) -> Option<IpAddr> {
    let ip: IpAddr = s.parse().ok()?;
    match ip {
        IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some() => None,
        _ => Some(ip),
    }
}

fn is_ip(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(parse_ip(str_arg("isIP", args, 0)?).is_some()))
}

fn ip(args: &[Value]) -> Result<Value, ExecutionError> {
    let s = str_arg("ip", args, 0)?;
    let ip = parse_ip(s).ok_or_else(|| {
        ExecutionError::function_error(
            "ip",
            format!("IP Address {s:?} parse error during conversion from string"),
        )
    })?;
    Ok(Value::Opaque(Arc::new(Ip(ip))))
}

fn ip_of(name: &str, args: &[Value]) -> Result<IpAddr, ExecutionError> {
    opaque::<Ip>(name, args, 0).map(|i| i.0)
}

fn ip_family(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Int(if ip_of("family", args)?.is_ipv4() { 4 } else { 6 }))
}

fn ip_is_loopback(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(ip_of("isLoopback", args)?.is_loopback()))
}

fn ip_is_unspecified(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(ip_of("isUnspecified", args)?.is_unspecified()))
}

/// Go's `IsGlobalUnicast`: not unspecified, loopback, multicast, link-local or broadcast.
fn ip_is_global_unicast(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(is_global_unicast(ip_of("isGlobalUnicast", args)?)))
}

fn parse_cidr(s: &str) -> Option<IpNet> {
    let net: IpNet = s.parse().ok()?;
    parse_ip(&net.addr().to_string())?;
    Some(net)
}

fn is_cidr(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(parse_cidr(str_arg("isCIDR", args, 0)?).is_some()))
}

fn cidr(args: &[Value]) -> Result<Value, ExecutionError> {
    let s = str_arg("cidr", args, 0)?;
    let net = parse_cidr(s).ok_or_else(|| {
        ExecutionError::function_error(
            "cidr",
            format!("network address {s:?} parse error during conversion from string"),
        )
    })?;
    Ok(Value::Opaque(Arc::new(Cidr(net))))
}

/// `string(ip)`: Go's `netip.Addr.String()`, the canonical form (RFC 5952 for IPv6).
fn ip_to_string(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(string(&ip_of("string", args)?.to_string()))
}

/// `string(cidr)`: the address as written, `/`, the prefix length (Go's
/// `netip.Prefix.String()`).
fn cidr_to_string(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(string(&cidr_of("string", args)?.to_string()))
}

fn cidr_of(name: &str, args: &[Value]) -> Result<IpNet, ExecutionError> {
    opaque::<Cidr>(name, args, 0).map(|c| c.0)
}

fn cidr_ip(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Opaque(Arc::new(Ip(cidr_of("ip", args)?.addr()))))
}

fn cidr_contains_ip(args: &[Value]) -> Result<Value, ExecutionError> {
    let net = cidr_of("containsIP", args)?;
    let ip = match args.get(1) {
        Some(Value::String(s)) => parse_ip(s).ok_or_else(|| {
            ExecutionError::function_error("containsIP", format!("IP Address {s:?} parse error"))
        })?,
        _ => opaque::<Ip>("containsIP", args, 1)?.0,
    };
    Ok(Value::Bool(net.trunc().contains(&ip)))
}

fn cidr_contains_cidr(args: &[Value]) -> Result<Value, ExecutionError> {
    let net = cidr_of("containsCIDR", args)?;
    let other = match args.get(1) {
        Some(Value::String(s)) => parse_cidr(s).ok_or_else(|| {
            ExecutionError::function_error("containsCIDR", format!("network address {s:?} parse error"))
        })?,
        _ => opaque::<Cidr>("containsCIDR", args, 1)?.0,
    };
    Ok(Value::Bool(net.trunc().contains(&other.trunc())))
}

fn cidr_prefix_length(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Int(i64::from(cidr_of("prefixLength", args)?.prefix_len())))
}

fn cidr_masked(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Opaque(Arc::new(Cidr(cidr_of("masked", args)?.trunc()))))
}

/// A resource quantity (`quantity('1.5Gi')`), in billionths of its unit.
#[derive(Debug, PartialEq, Eq)]
struct Quantity(i128);

/// The CEL type name of a quantity.
const QUANTITY: &str = "kubernetes.Quantity";

impl Opaque for Quantity {
    fn runtime_type_name(&self) -> &str {
        QUANTITY
    }
}

/// Billionths in a unit.
const NANO: i128 = 1_000_000_000;

fn is_quantity(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(
        parse_quantity(str_arg("isQuantity", args, 0)?).is_some(),
    ))
}

fn quantity(args: &[Value]) -> Result<Value, ExecutionError> {
    let s = str_arg("quantity", args, 0)?;
    let q = parse_quantity(s).ok_or_else(|| {
        ExecutionError::function_error(
            "quantity",
            "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
        )
    })?;
    Ok(Value::Opaque(Arc::new(Quantity(q))))
}

fn quantity_of(name: &str, args: &[Value], i: usize) -> Result<i128, ExecutionError> {
    match args.get(i) {
        Some(Value::Int(n)) => Ok(i128::from(*n) * NANO),
        _ => opaque::<Quantity>(name, args, i).map(|q| q.0),
    }
}

fn q_pair(name: &str, args: &[Value]) -> Result<(i128, i128), ExecutionError> {
    Ok((quantity_of(name, args, 0)?, quantity_of(name, args, 1)?))
}

fn q_greater(args: &[Value]) -> Result<Value, ExecutionError> {
    let (a, b) = q_pair("isGreaterThan", args)?;
    Ok(Value::Bool(a > b))
}

fn q_less(args: &[Value]) -> Result<Value, ExecutionError> {
    let (a, b) = q_pair("isLessThan", args)?;
    Ok(Value::Bool(a < b))
}

fn q_compare(args: &[Value]) -> Result<Value, ExecutionError> {
    let (a, b) = q_pair("compareTo", args)?;
    Ok(Value::Int(match a.cmp(&b) {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    }))
}

fn q_add(args: &[Value]) -> Result<Value, ExecutionError> {
    let (a, b) = q_pair("add", args)?;
    let sum = a
        .checked_add(b)
        .ok_or_else(|| ExecutionError::function_error("add", "quantity overflow"))?;
    Ok(Value::Opaque(Arc::new(Quantity(sum))))
}

fn q_sub(args: &[Value]) -> Result<Value, ExecutionError> {
    let (a, b) = q_pair("sub", args)?;
    let diff = a
        .checked_sub(b)
        .ok_or_else(|| ExecutionError::function_error("sub", "quantity overflow"))?;
    Ok(Value::Opaque(Arc::new(Quantity(diff))))
}

fn q_sign(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Int(quantity_of("sign", args, 0)?.signum() as i64))
}

fn q_is_integer(args: &[Value]) -> Result<Value, ExecutionError> {
    let q = quantity_of("isInteger", args, 0)?;
    Ok(Value::Bool(q % NANO == 0 && i64::try_from(q / NANO).is_ok()))
}

fn q_as_integer(args: &[Value]) -> Result<Value, ExecutionError> {
    let q = quantity_of("asInteger", args, 0)?;
    if q % NANO != 0 {
        return Err(ExecutionError::function_error(
            "asInteger",
            "cannot convert value to integer",
        ));
    }
    let n = i64::try_from(q / NANO)
        .map_err(|_| ExecutionError::function_error("asInteger", "cannot convert value to integer"))?;
    Ok(Value::Int(n))
}

fn q_as_float(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Float(
        quantity_of("asApproximateFloat", args, 0)? as f64 / NANO as f64,
    ))
}
