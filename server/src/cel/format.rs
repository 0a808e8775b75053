//! kube's `format` CEL library: named string formats (`format.dns1123Label()`,
//! `format.named('uuid')`, ...) whose `validate(string)` gives `optional.none()` for a valid
//! string, else kube's messages, so a rule's `messageExpression` can show them. The formats
//! are one table ([`FORMATS`]); the name formats reuse machinery's apimachinery validators,
//! the CRD formats follow kube-openapi's `strfmt` checks and Go's `url.ParseRequestURI`.

use std::sync::{Arc, LazyLock};

use cel::common::types::STRING_TYPE;
use cel::objects::{Opaque, OptionalValue, Value};
use cel::ExecutionError;

use super::library::{opaque, opaque_type, overload, str_arg, Call, Overload};
use super::value::string;
use crate::machinery::errors::go_quote;
use crate::machinery::meta::{
    dns1035_label_reasons, dns_label_reasons, dns_subdomain_reasons, label_value_reasons, mask_trailing_dash,
    qualified_name_reasons,
};

/// The CEL type name of a format.
const FORMAT: &str = "kubernetes.NamedFormat";

/// How a format checks a string.
#[derive(Debug, Clone, Copy)]
enum Rule {
    /// apimachinery's `IsDNS1123Label`.
    Dns1123Label,
    /// apimachinery's `IsDNS1123Subdomain`.
    Dns1123Subdomain,
    /// apimachinery's `IsDNS1035Label`.
    Dns1035Label,
    /// apimachinery's `IsQualifiedName`.
    QualifiedName,
    /// apimachinery's `IsValidLabelValue`.
    LabelValue,
    /// Go's `url.ParseRequestURI`.
    Uri,
    /// strfmt's `uuid`.
    Uuid,
    /// strfmt's `byte` (standard base64).
    Byte,
    /// strfmt's `date` (`2006-01-02`).
    Date,
    /// strfmt's `datetime` (RFC 3339).
    Datetime,
}

/// One of kube's named formats.
#[derive(Debug)]
struct NamedFormat {
    /// The CEL function returning it: `format.` and its name in `format.named`.
    function: &'static str,
    /// kube's name for it (what equality compares).
    name: &'static str,
    rule: Rule,
    /// Whether the string is a prefix (a generated name's base), checked as kube's
    /// `NameIsDNSLabel(s, true)` does: with a trailing dash masked.
    prefix: bool,
}

const fn named(function: &'static str, name: &'static str, rule: Rule, prefix: bool) -> NamedFormat {
    NamedFormat {
        function,
        name,
        rule,
        prefix,
    }
}

/// How many formats kube names.
const FORMAT_COUNT: usize = 13;

/// kube's `ConstantFormats`.
static FORMATS: [NamedFormat; FORMAT_COUNT] = [
    named("format.dns1123Label", "DNS1123Label", Rule::Dns1123Label, false),
    named(
        "format.dns1123Subdomain",
        "DNS1123Subdomain",
        Rule::Dns1123Subdomain,
        false,
    ),
    named("format.dns1035Label", "DNS1035Label", Rule::Dns1035Label, false),
    named(
        "format.qualifiedName",
        "QualifiedName",
        Rule::QualifiedName,
        false,
    ),
    named(
        "format.dns1123LabelPrefix",
        "DNS1123LabelPrefix",
        Rule::Dns1123Label,
        true,
    ),
    named(
        "format.dns1123SubdomainPrefix",
        "DNS1123SubdomainPrefix",
        Rule::Dns1123Subdomain,
        true,
    ),
    named(
        "format.dns1035LabelPrefix",
        "DNS1035LabelPrefix",
        Rule::Dns1035Label,
        true,
    ),
    named("format.labelValue", "LabelValue", Rule::LabelValue, false),
    named("format.uri", "URI", Rule::Uri, false),
    named("format.uuid", "uuid", Rule::Uuid, false),
    named("format.byte", "byte", Rule::Byte, false),
    named("format.date", "date", Rule::Date, false),
    named("format.datetime", "datetime", Rule::Datetime, false),
];

impl NamedFormat {
    /// Its name in `format.named`.
    fn key(&self) -> &'static str {
        self.function.trim_start_matches("format.")
    }

    /// Why `s` is not of this format: kube's messages, none when it is.
    fn validate(&self, s: &str) -> Vec<String> {
        let name = if self.prefix {
            mask_trailing_dash(s)
        } else {
            s.as_bytes().into()
        };
        let unless = |valid: bool, why: &str| if valid { Vec::new() } else { vec![why.to_string()] };
        match self.rule {
            Rule::Dns1123Label => dns_label_reasons(&name),
            Rule::Dns1123Subdomain => dns_subdomain_reasons(&name),
            Rule::Dns1035Label => dns1035_label_reasons(&name),
            Rule::QualifiedName => qualified_name_reasons(s),
            Rule::LabelValue => label_value_reasons(s),
            Rule::Uri => request_uri(s)
                .err()
                .map(|why| format!("parse {}: {why}", go_quote(s)))
                .into_iter()
                .collect(),
            Rule::Uuid => unless(is_uuid(s), "does not match the UUID format"),
            Rule::Byte => unless(is_base64(s), "invalid base64"),
            Rule::Date => unless(is_date(s), "invalid date"),
            Rule::Datetime => unless(is_datetime(s), "invalid datetime"),
        }
    }
}

/// A format as a CEL value; formats are equal when they are the same format.
#[derive(Debug)]
struct Format(&'static NamedFormat);

impl PartialEq for Format {
    fn eq(&self, other: &Self) -> bool {
        self.0.name == other.0.name
    }
}

impl Eq for Format {}

impl Opaque for Format {
    fn runtime_type_name(&self) -> &str {
        FORMAT
    }
}

fn format_value(f: &'static NamedFormat) -> Value {
    Value::Opaque(Arc::new(Format(f)))
}

/// `format.<name>()`: the `I`th format.
fn constant<const I: usize>(_: &[Value]) -> Result<Value, ExecutionError> {
    Ok(format_value(&FORMATS[I]))
}

/// The functions returning each format, by position in [`FORMATS`] (both hold
/// [`FORMAT_COUNT`]).
const CONSTANTS: [cel::common::functions::Function; FORMAT_COUNT] = [
    overload!(constant::<0>),
    overload!(constant::<1>),
    overload!(constant::<2>),
    overload!(constant::<3>),
    overload!(constant::<4>),
    overload!(constant::<5>),
    overload!(constant::<6>),
    overload!(constant::<7>),
    overload!(constant::<8>),
    overload!(constant::<9>),
    overload!(constant::<10>),
    overload!(constant::<11>),
    overload!(constant::<12>),
];

/// The `format` library's overloads, for the environment.
pub(super) fn functions() -> Vec<Overload> {
    let mut out: Vec<Overload> = FORMATS
        .iter()
        .zip(CONSTANTS)
        .map(|(f, call)| (f.function, f.function, Call::Global, vec![], call))
        .collect();
    out.push((
        "format.named",
        "format-named",
        Call::Global,
        vec![STRING_TYPE],
        overload!(format_named),
    ));
    out.push((
        "validate",
        "format-validate",
        Call::Member(opaque_type(FORMAT)),
        vec![STRING_TYPE],
        overload!(validate),
    ));
    out
}

/// `format.named(name)`: the format, or none for a name kube does not know.
fn format_named(args: &[Value]) -> Result<Value, ExecutionError> {
    let name = str_arg("format.named", args, 0)?;
    let found = FORMATS.iter().find(|f| f.key() == name);
    Ok(Value::Opaque(Arc::new(match found {
        Some(f) => OptionalValue::of(format_value(f)),
        None => OptionalValue::none(),
    })))
}

/// `<Format>.validate(s)`: none when `s` is valid, else the list of kube's messages.
fn validate(args: &[Value]) -> Result<Value, ExecutionError> {
    let f = opaque::<Format>("validate", args, 0)?;
    let reasons = f.0.validate(str_arg("validate", args, 1)?);
    Ok(Value::Opaque(Arc::new(if reasons.is_empty() {
        OptionalValue::none()
    } else {
        OptionalValue::of(Value::List(Arc::new(reasons.iter().map(|r| string(r)).collect())))
    })))
}

/// strfmt's `UUIDPattern`: 32 hex digits, in groups of 8, 4, 4, 4 and 12 optionally separated
/// by dashes, any case.
fn is_uuid(s: &str) -> bool {
    let mut rest = s.as_bytes();
    for (i, n) in [8, 4, 4, 4, 12].into_iter().enumerate() {
        if i > 0 {
            rest = rest.strip_prefix(b"-").unwrap_or(rest);
        }
        match rest.split_at_checked(n) {
            Some((group, after)) if group.iter().all(u8::is_ascii_hexdigit) => rest = after,
            _ => return false,
        }
    }
    rest.is_empty()
}

/// govalidator's `IsBase64`: standard-alphabet groups of four, the last padded with `=` or
/// `==`; never empty.
fn is_base64(s: &str) -> bool {
    let b = s.as_bytes();
    let body = b
        .strip_suffix(b"==")
        .or_else(|| b.strip_suffix(b"="))
        .unwrap_or(b);
    !b.is_empty()
        && b.len().is_multiple_of(4)
        && body
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/'))
}

fn digits(b: &[u8]) -> Option<u32> {
    b.iter().try_fold(0u32, |n, c| {
        c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0'))
    })
}

/// Go's `time.Parse("2006-01-02", s)`: a four-digit year, a two-digit month and day, the day
/// within the month.
fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let (Some(year), Some(month), Some(day)) = (digits(&b[..4]), digits(&b[5..7]), digits(&b[8..])) else {
        return false;
    };
    let leap = year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400));
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

/// strfmt's `DateTimePattern`, for the time after the `T`.
static TIME: LazyLock<Option<regex::Regex>> = LazyLock::new(|| {
    regex::Regex::new(r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$").ok()
});

/// strfmt's `IsDateTime`: a date, `T` (any case), and a time within the day, with a zone.
fn is_datetime(s: &str) -> bool {
    let lower = s.to_lowercase();
    let parts: Vec<&str> = lower.split('t').collect();
    let (Some(date), Some(time), Some(re)) = (parts.first(), parts.get(1), TIME.as_ref()) else {
        return false;
    };
    let within = |m: Option<regex::Match>, max: &str| m.is_some_and(|m| m.as_str() <= max);
    s.len() >= 4
        && is_date(date)
        && re
            .captures(time)
            .is_some_and(|c| within(c.get(1), "23") && within(c.get(2), "59") && within(c.get(3), "59"))
}

/// How a part of a URL is unescaped (Go's `encoding` modes that matter for parsing).
#[derive(Clone, Copy, PartialEq)]
enum Part {
    Host,
    Zone,
    Other,
}

/// Go's `shouldEscape` for a host or zone byte: what may not appear unescaped there.
fn host_byte_invalid(c: u8) -> bool {
    !(c.is_ascii_alphanumeric() || b"!$&'()*+,;=:[]<>\"-_.~".contains(&c))
}

/// Go's `unescape`: every `%` followed by two hex digits (in a host, only for non-ASCII bytes
/// or `%25`), and no byte a host may not hold.
fn unescape(s: &str, part: Part) -> Result<(), String> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let escape = || String::from_utf8_lossy(&b[i..(i + 3).min(b.len())]).into_owned();
                if i + 2 >= b.len() || !b[i + 1].is_ascii_hexdigit() || !b[i + 2].is_ascii_hexdigit() {
                    return Err(format!("invalid URL escape {}", go_quote(&escape())));
                }
                let hex = |c: u8| (c as char).to_digit(16).unwrap_or(0) as u8;
                let byte = hex(b[i + 1]) << 4 | hex(b[i + 2]);
                let percent = &b[i..i + 3] == b"%25";
                let refused = match part {
                    Part::Host => hex(b[i + 1]) < 8 && !percent,
                    Part::Zone => !percent && byte != b' ' && host_byte_invalid(byte),
                    Part::Other => false,
                };
                if refused {
                    return Err(format!("invalid URL escape {}", go_quote(&escape())));
                }
                i += 3;
            }
            c if part != Part::Other && c < 0x80 && host_byte_invalid(c) => {
                return Err(format!(
                    "invalid character {} in host name",
                    go_quote(&(c as char).to_string())
                ));
            }
            _ => i += 1,
        }
    }
    Ok(())
}

/// Go's `validOptionalPort`.
fn valid_optional_port(port: &str) -> bool {
    port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()))
}

/// Go's `parseHost`.
fn parse_host(host: &str) -> Result<(), String> {
    let invalid_port = |p: &str| format!("invalid port {} after host", go_quote(p));
    match host.rfind('[') {
        Some(0) => {
            let end = host.rfind(']').ok_or("missing ']' in host")?;
            let port = &host[end + 1..];
            if !valid_optional_port(port) {
                return Err(invalid_port(port));
            }
            let literal = &host[1..end];
            match literal.find("%25") {
                Some(zone) => {
                    unescape(&literal[..zone], Part::Host)?;
                    unescape(&literal[zone..], Part::Zone)?;
                }
                None => unescape(literal, Part::Host)?,
            }
            // Only an IPv6 address may be enclosed in brackets.
            if literal.parse::<std::net::Ipv4Addr>().is_ok() {
                return Err("invalid IP-literal".to_string());
            }
            return Ok(());
        }
        Some(_) => return Err("invalid IP-literal".to_string()),
        None => {}
    }
    if let Some(colon) = host.rfind(':') {
        let port = &host[colon..];
        if !valid_optional_port(port) {
            return Err(invalid_port(port));
        }
    }
    unescape(host, Part::Host)
}

/// Go's `parseAuthority`: `[userinfo@]host`.
fn parse_authority(authority: &str) -> Result<(), String> {
    let at = authority.rfind('@');
    parse_host(at.map_or(authority, |i| &authority[i + 1..]))?;
    let Some(i) = at else {
        return Ok(());
    };
    let userinfo = &authority[..i];
    let valid = userinfo
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || b"-._:~!$&'()*+,;=%@".contains(&c));
    if !valid {
        return Err("net/url: invalid userinfo".to_string());
    }
    let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
    unescape(user, Part::Other)?;
    unescape(password, Part::Other)
}

/// Go's `url.ParseRequestURI`: why `raw` is not an absolute URI or an absolute path, in Go's
/// words (without the `parse "..."` prefix).
fn request_uri(raw: &str) -> Result<(), String> {
    if raw.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return Err("net/url: invalid control character in URL".to_string());
    }
    if raw.is_empty() {
        return Err("empty url".to_string());
    }
    if raw == "*" {
        return Ok(());
    }
    let (scheme, rest) = scheme(raw)?;
    let rest = match rest.strip_suffix('?') {
        Some(r) if !r.contains('?') => r,
        _ => rest.split_once('?').map_or(rest, |(r, _)| r),
    };
    if !rest.starts_with('/') {
        return if scheme.is_empty() {
            Err("invalid URI for request".to_string())
        } else {
            Ok(())
        };
    }
    let path = match rest.strip_prefix("//").filter(|_| !scheme.is_empty()) {
        Some(after) => {
            let (authority, path) = after.split_at(after.find('/').unwrap_or(after.len()));
            parse_authority(authority)?;
            path
        }
        None => rest,
    };
    unescape(path, Part::Other)
}

/// Go's `getScheme`: the scheme (empty when there is none) and the rest.
fn scheme(raw: &str) -> Result<(&str, &str), String> {
    for (i, c) in raw.bytes().enumerate() {
        match c {
            b'a'..=b'z' | b'A'..=b'Z' => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' if i > 0 => {}
            b':' if i == 0 => return Err("missing protocol scheme".to_string()),
            b':' => return Ok((&raw[..i], &raw[i + 1..])),
            _ => return Ok(("", raw)),
        }
    }
    Ok(("", raw))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(key: &str, s: &str) -> Vec<String> {
        FORMATS
            .iter()
            .find(|f| f.key() == key)
            .map(|f| f.validate(s))
            .unwrap_or_else(|| vec![format!("no format {key}")])
    }

    const LABEL: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
    const SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    const DNS1035: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

    #[test]
    fn kubes_valid_examples_are_valid() {
        let valid = [
            ("dns1123Label", "my-label-name"),
            ("dns1123Subdomain", "apiextensions.k8s.io"),
            ("dns1123Subdomain", "example.com"),
            ("dns1035Label", "my-label-name"),
            ("qualifiedName", "apiextensions.k8s.io/v1beta1"),
            ("qualifiedName", "my.name"),
            ("dns1123LabelPrefix", "my-label-prefix-"),
            ("dns1123SubdomainPrefix", "mysubdomain.prefix.-"),
            ("dns1035LabelPrefix", "my-label-prefix-"),
            ("labelValue", "my-cool-label-Value"),
            ("uri", "http://example.com"),
            ("uuid", "123e4567-e89b-12d3-a456-426614174000"),
            ("byte", "aGVsbG8="),
            ("date", "2021-01-01"),
            ("date", "2020-01-01"),
            ("datetime", "2021-01-01T00:00:00Z"),
        ];
        for (key, s) in valid {
            assert_eq!(check(key, s), Vec::<String>::new(), "{key} {s}");
        }
    }

    #[test]
    fn kubes_invalid_examples_have_kubes_messages() {
        let invalid = [
            ("dns1123Label", "contains a space", LABEL),
            ("dns1123Subdomain", "contains a space", SUBDOMAIN),
            ("dns1035Label", "contains a space", DNS1035),
            ("qualifiedName", "contains a space", "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"),
            ("dns1123LabelPrefix", "contains a space-", LABEL),
            ("dns1123SubdomainPrefix", "contains a space-", SUBDOMAIN),
            ("dns1035LabelPrefix", "contains a space-", DNS1035),
            ("labelValue", "my-cool-label-Value!!\n\n!!!", "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"),
            ("byte", "aGVsbG8", "invalid base64"),
            ("date", "2020-01-32", "invalid date"),
            ("datetime", "2020-01-32T00:00:00Z", "invalid datetime"),
            ("uuid", "123e4567-e89b-12d3-a456-42661417400", "does not match the UUID format"),
        ];
        for (key, s, why) in invalid {
            assert_eq!(check(key, s), vec![why.to_string()], "{key} {s}");
        }
        assert_eq!(
            check("dns1123Label", &"a".repeat(64)),
            vec!["must be no more than 63 characters".to_string()]
        );
        assert_eq!(
            check("dns1123Label", "a.b"),
            vec!["must not contain dots".to_string()]
        );
    }

    #[test]
    fn uris_fail_with_gos_parse_request_uri_messages() {
        let cases = [
            ("not a url", "parse \"not a url\": invalid URI for request"),
            ("", "parse \"\": empty url"),
            (":foo", "parse \":foo\": missing protocol scheme"),
            (
                "http://a b.com/",
                "parse \"http://a b.com/\": invalid character \" \" in host name",
            ),
            (
                "http://host:port/",
                "parse \"http://host:port/\": invalid port \":port\" after host",
            ),
            ("http://[::1/", "parse \"http://[::1/\": missing ']' in host"),
            ("/a%zzb", "parse \"/a%zzb\": invalid URL escape \"%zz\""),
            (
                "http://a\u{7f}",
                "parse \"http://a\\x7f\": net/url: invalid control character in URL",
            ),
            (
                "http://us er@h/",
                "parse \"http://us er@h/\": net/url: invalid userinfo",
            ),
            (
                "https://[1.2.3.4]/",
                "parse \"https://[1.2.3.4]/\": invalid IP-literal",
            ),
            ("http://a[b]/", "parse \"http://a[b]/\": invalid IP-literal"),
            (
                "http://[fe80::1%25en 0]/",
                "parse \"http://[fe80::1%25en 0]/\": invalid character \" \" in host name",
            ),
        ];
        for (s, why) in cases {
            assert_eq!(check("uri", s), vec![why.to_string()], "{s}");
        }
        for ok in [
            "/path only",
            "mailto:someone",
            "https://[::1]:8443/x?y#z",
            "http://[fe80::1%25en0]/",
            "*",
            "http://u:p@h:80/",
        ] {
            assert_eq!(check("uri", ok), Vec::<String>::new(), "{ok}");
        }
    }

    #[test]
    fn dates_and_datetimes_are_strfmts() {
        assert!(is_date("2024-02-29") && !is_date("2023-02-29") && !is_date("2023-1-01"));
        assert!(is_datetime("2020-01-01t23:59:59.123+01:00") && !is_datetime("2020-01-01T24:00:00Z"));
        assert!(!is_datetime("2020-01-01") && !is_datetime("2020-01-01T00:00:00"));
        assert!(
            is_uuid("123E4567E89B12D3A456426614174000") && !is_uuid("123e4567-e89b-12d3-a456-4266141740000")
        );
        assert!(!is_base64("") && is_base64("aGVsbA==") && !is_base64("aGVs=bA="));
    }

    #[test]
    fn every_format_is_named_and_only_equal_to_itself() {
        for (i, f) in FORMATS.iter().enumerate() {
            assert!(FORMATS.iter().filter(|g| g.key() == f.key()).count() == 1);
            for (j, g) in FORMATS.iter().enumerate() {
                assert_eq!(Format(f) == Format(g), i == j);
            }
        }
    }
}
