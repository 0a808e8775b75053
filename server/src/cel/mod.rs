//! CEL, the expression language of CRD `x-kubernetes-validations` and of
//! ValidatingAdmissionPolicies: an expression is compiled once (parsed, its names checked,
//! its cost estimated against the shapes of its variables, see [`cost`]) into a [`Program`],
//! then evaluated per request with its variables bound to the request's objects.
//!
//! The interpreter is the `cel` crate (cel-rust), with kube's libraries added in [`library`].
//! What the crate lacks — a type checker and cost tracking — is made up for here where it
//! matters for safety: every evaluation is priced first on the actual values' sizes, and
//! refused when over kube's per-call limit or the caller's remaining budget, so a rule cannot
//! burn the CPU.

pub mod authz;
pub mod cost;
mod format;
mod library;
mod semver;
pub mod value;

use std::sync::{Arc, LazyLock};

use cel::common::value::Val;
use cel::{Context, Env, ExecutionError};

pub use cel::Value;
pub use cost::Shape;

/// kube's `PerCallLimit`: the most one evaluation may cost.
pub const PER_CALL_LIMIT: u64 = 1_000_000;

/// kube's `RuntimeCELCostBudget`: what all the rules of one object (or one policy's
/// expressions for one request) may cost together.
pub const RUNTIME_BUDGET: u64 = 10_000_000;

/// kube's `StaticEstimatedCostLimit`: the most one expression may be estimated to cost.
pub const STATIC_EXPRESSION_LIMIT: u64 = 10_000_000;

/// kube's `StaticEstimatedCRDCostLimit`: what all of a schema's rules, each times the most
/// values it may apply to, may be estimated to cost.
pub const STATIC_SCHEMA_LIMIT: u64 = 100_000_000;

/// Why an expression cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CompileError {
    /// It does not parse.
    #[error("compilation failed: {0}")]
    Syntax(String),
    /// It names a variable that does not exist.
    #[error("compilation failed: ERROR: <input>:{line}:{column}: undeclared reference to '{name}' (in container '')")]
    Undeclared {
        /// The name.
        name: String,
        /// Where (1-based).
        line: usize,
        /// Where (1-based).
        column: usize,
    },
    /// The environment could not be built (a library declaration clashes).
    #[error("rule compiler initialization error: {0}")]
    Environment(String),
}

/// Why an evaluation gave no value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EvalError {
    /// The evaluation would cost more than [`PER_CALL_LIMIT`].
    #[error("operation cancelled: actual cost limit exceeded")]
    CallCostExceeded,
    /// The evaluation would cost more than what is left of the caller's budget.
    #[error("operation cancelled: cost budget exhausted")]
    BudgetExhausted,
    /// A function or operator was applied to values of types it does not take.
    #[error("no such overload")]
    NoSuchOverload,
    /// Any other failure: a missing key, an index out of range, an overflow...
    #[error("{0}")]
    Failed(String),
}

impl From<ExecutionError> for EvalError {
    fn from(e: ExecutionError) -> Self {
        match e {
            ExecutionError::NoSuchOverload(_) => EvalError::NoSuchOverload,
            ExecutionError::NoSuchKey(k) => EvalError::Failed(format!("no such key: {k}")),
            // A library function's own message, as kube's functions report it.
            ExecutionError::FunctionError { message, .. } => EvalError::Failed(message),
            other => EvalError::Failed(other.to_string()),
        }
    }
}

static ENV: LazyLock<Result<Arc<Env>, String>> =
    LazyLock::new(|| library::env().map(Arc::new).map_err(|e| e.to_string()));

fn environment() -> Result<Arc<Env>, String> {
    ENV.clone()
}

/// The variables of a ValidatingAdmissionPolicy's expressions.
pub const POLICY_VARIABLES: [&str; 8] = [
    "object",
    "oldObject",
    "request",
    "params",
    "namespaceObject",
    "variables",
    AUTHORIZER,
    REQUEST_RESOURCE,
];

/// The variables of an admission webhook's `matchConditions`.
pub const WEBHOOK_CONDITION_VARIABLES: [&str; 5] =
    ["object", "oldObject", "request", AUTHORIZER, REQUEST_RESOURCE];

/// The authorization library's variable: what the request's user may do ([`authz`]).
pub const AUTHORIZER: &str = "authorizer";
/// A check of the request's own resource.
pub const REQUEST_RESOURCE: &str = "authorizer.requestResource";

/// kube's `RuntimeCELCostBudgetMatchConditions`: what a webhook's match conditions may cost
/// together for one request.
pub const MATCH_CONDITIONS_BUDGET: u64 = 2_500_000;

/// Compiles an admission policy's expression: its variables' shapes are unknown (no static
/// cost limit applies; the run-time bound does).
pub fn compile_policy_expression(source: &str) -> Result<Program, CompileError> {
    compile_admission_expression(source, &POLICY_VARIABLES)
}

/// Compiles an admission expression whose variables are `names`, of unknown shapes (no static
/// cost limit applies; the run-time bound does).
pub fn compile_admission_expression(source: &str, names: &[&str]) -> Result<Program, CompileError> {
    let vars: Vec<(&str, Shape)> = names.iter().map(|v| (*v, Shape::unbounded())).collect();
    compile(source, &vars)
}

/// A compiled expression.
#[derive(Debug)]
pub struct Program {
    program: cel::Program,
    cost: u64,
}

/// kube's `getCostErrorMessage`: how far `cost` is over `limit`.
pub fn cost_message(what: &str, cost: u64, limit: u64) -> String {
    let factor = cost as f64 / limit as f64;
    let factor = if factor > 100.0 {
        "more than 100x".to_string()
    } else if factor < 1.5 {
        format!("{factor:.6}x")
    } else {
        format!("{factor:.1}x")
    };
    format!(
        "{what} exceeds budget by factor of {factor} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )
}

/// Compiles `source` for an expression whose variables are `variables`, with the shape each
/// may have (for the cost estimate).
pub fn compile(source: &str, variables: &[(&str, Shape)]) -> Result<Program, CompileError> {
    let env = environment().map_err(CompileError::Environment)?;
    let program = env
        .compile(source)
        .map_err(|e| CompileError::Syntax(e.to_string()))?;
    let mut estimator = cost::Estimator::new(variables);
    let cost = estimator.cost(program.expression());
    if let Some((name, id)) = estimator.undeclared() {
        let offset = program
            .source_info()
            .offset_for(id)
            .map_or(0, |(start, _)| start as usize);
        let before: String = source.chars().take(offset).collect();
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        return Err(CompileError::Undeclared {
            name: name.to_string(),
            line,
            column,
        });
    }
    Ok(Program { program, cost })
}

impl Program {
    /// The estimated cost, from the shapes given to [`compile`].
    pub fn cost(&self) -> u64 {
        self.cost
    }

    /// Whether the expression's result can never be a bool (a literal, a list or map, an
    /// arithmetic operator or a conversion at the top): without a type checker, what is
    /// refused of kube's `must evaluate to bool`.
    pub fn never_bool(&self) -> bool {
        use cel::common::ast::{Expr, LiteralValue};
        const NOT_BOOL: [&str; 12] = [
            "_+_", "_-_", "_*_", "_/_", "_%_", "-_", "size", "string", "int", "uint", "double", "bytes",
        ];
        match &self.program.expression().expr {
            Expr::Literal(LiteralValue::Boolean(_)) => false,
            Expr::Literal(_) | Expr::List(_) | Expr::Map(_) | Expr::Struct(_) => true,
            Expr::Call(call) => NOT_BOOL.contains(&call.func_name.as_str()),
            _ => false,
        }
    }

    /// Whether the expression reads `variable`.
    pub fn uses(&self, variable: &str) -> bool {
        self.program.references().has_variable(variable)
    }

    /// Evaluates the expression with `variables` bound, charging `budget` with its cost
    /// (priced on the actual values before it runs: see the module doc).
    pub fn evaluate(&self, variables: &[(&str, Value)], budget: &mut u64) -> Result<Value, EvalError> {
        let shapes: Vec<(&str, Shape)> = variables.iter().map(|(n, v)| (*n, Shape::of_value(v))).collect();
        let cost = cost::Estimator::new(&shapes).cost(self.program.expression());
        if cost > PER_CALL_LIMIT {
            return Err(EvalError::CallCostExceeded);
        }
        if cost > *budget {
            *budget = 0;
            return Err(EvalError::BudgetExhausted);
        }
        *budget -= cost;
        let env = environment().map_err(EvalError::Failed)?;
        let mut ctx = Context::with_env(env);
        for (name, v) in variables {
            let val: Box<dyn Val> = v.clone().try_into()?;
            ctx.add_variable_as_val(*name, val);
        }
        Ok(self.program.execute(&ctx)?)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn run(source: &str, vars: &[(&str, serde_json::Value)]) -> Result<Value, EvalError> {
        let shapes: Vec<(&str, Shape)> = vars.iter().map(|(n, _)| (*n, Shape::unbounded())).collect();
        let program = compile(source, &shapes).expect("compiles");
        let values: Vec<(&str, Value)> = vars.iter().map(|(n, v)| (*n, value::from_json(v))).collect();
        let mut budget = RUNTIME_BUDGET;
        program.evaluate(&values, &mut budget)
    }

    fn yes(source: &str) {
        assert_eq!(run(source, &[]), Ok(Value::Bool(true)), "{source}");
    }

    #[test]
    fn kube_string_functions() {
        yes("'Hello'.lowerAscii() == 'hello' && 'Hello'.upperAscii() == 'HELLO'");
        yes("'a,b,c'.split(',') == ['a', 'b', 'c'] && ['a', 'b'].join('-') == 'a-b'");
        yes("'abc'.replace('b', 'x') == 'axc' && 'abc'.indexOf('c') == 2 && ' a '.trim() == 'a'");
        yes("'abcd'.substring(1, 3) == 'bc' && 'abc'.charAt(1) == 'b' && 'abc'.lastIndexOf('c') == 2");
    }

    #[test]
    fn kube_list_functions() {
        yes("[1, 2, 3].isSorted() && ![2, 1].isSorted() && [1, 2, 3].sum() == 6 && [].sum() == 0");
        yes("[3, 1, 2].min() == 1 && [3, 1, 2].max() == 3 && ['a', 'b', 'a'].indexOf('a') == 0");
        yes("['a', 'b', 'a'].lastIndexOf('a') == 2 && [1].indexOf(5) == -1");
        yes("[1, 2].slice(1, 2) == [2] && [[1], [2]].flatten() == [1, 2]");
        yes("sets.contains([1, 2, 3], [1, 2]) && sets.equivalent([1, 2], [2, 1]) && !sets.intersects([1], [2])");
        assert!(run("[].min()", &[]).is_err());
    }

    #[test]
    fn kube_regex_url_ip_and_quantity_functions() {
        yes("'abc 123 def 456'.find('[0-9]+') == '123' && 'abc 123 def 456'.findAll('[0-9]+') == ['123', '456']");
        yes("'a1b2c3'.findAll('[0-9]', 2) == ['1', '2'] && 'x'.find('[0-9]') == ''");
        yes("isURL('https://example.com:8443/a/b?x=1&x=2') && !isURL('not a url')");
        yes("url('https://example.com:8443/a/b?x=1&x=2').getHost() == 'example.com:8443'");
        yes("url('https://example.com:8443/a').getPort() == '8443' && url('https://example.com/a').getEscapedPath() == '/a'");
        yes("url('https://example.com/?x=1&x=2').getQuery() == {'x': ['1', '2']} && url('http://h').getScheme() == 'http'");
        yes("isIP('10.0.0.1') && !isIP('10.0.0.300') && ip('10.0.0.1').family() == 4 && ip('::1').isLoopback()");
        yes("cidr('10.0.0.0/8').containsIP('10.1.2.3') && !cidr('10.0.0.0/8').containsIP(ip('11.0.0.1'))");
        yes("cidr('10.0.0.0/8').containsCIDR('10.1.0.0/16') && cidr('10.0.0.0/8').prefixLength() == 8 && isCIDR('::/0')");
        yes("quantity('1Gi').isGreaterThan(quantity('1G')) && quantity('500m').isLessThan(quantity('1'))");
        yes("quantity('1k').add(24).asInteger() == 1024 && quantity('1.5').sub(quantity('2')).sign() == -1");
        yes("quantity('2').compareTo(quantity('2000m')) == 0 && !quantity('1.5').isInteger() && isQuantity('3Mi')");
        yes("quantity('1.5').asApproximateFloat() == 1.5 && !isQuantity('abc')");
    }

    #[test]
    fn kube_format_functions() {
        yes("!format.dns1123Label().validate('my-label-name').hasValue()");
        yes("!format.named('dns1123SubdomainPrefix').value().validate('mysubdomain.prefix.-').hasValue()");
        yes("format.dns1123Label().validate('contains a space').value() == [\"a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')\"]");
        yes("format.byte().validate('aGVsbG8').value() == ['invalid base64']");
        yes("format.uri().validate('x').value() == ['parse \"x\": invalid URI for request']");
        yes("!format.named('unknown').hasValue()");
        // The namespace leaves the strings extension's `format` method alone.
        yes("'%s-%d'.format(['a', 1]) == 'a-1'");
        let keys = [
            "dns1123Label",
            "dns1123Subdomain",
            "dns1035Label",
            "qualifiedName",
            "dns1123LabelPrefix",
            "dns1123SubdomainPrefix",
            "dns1035LabelPrefix",
            "labelValue",
            "uri",
            "uuid",
            "byte",
            "date",
            "datetime",
        ];
        for lhs in keys {
            yes(&format!(
                "format.named('{lhs}').hasValue() && format.named('{lhs}').value() == format.{lhs}()"
            ));
            for rhs in keys.iter().filter(|k| **k != lhs) {
                yes(&format!("format.{lhs}() != format.{rhs}()"));
            }
        }
    }

    #[test]
    fn kube_semver_functions() {
        yes("semver('1.2.3') == semver('1.2.3') && semver('v01.01', true) == semver('1.1.0')");
        yes("!(semver('1.2.3') == semver('1.0.0')) && isSemver('1.2.3-beta.1+build.1')");
        for bad in ["", "v1.0.0", " 1.0.0", "1. 0.0", "1.0.0 ", "01.01.01", "1", "1.1"] {
            yes(&format!("!isSemver('{bad}')"));
        }
        for bad in ["", " 1.0.0", "1. 0.0", "1.0.0 "] {
            yes(&format!("!isSemver('{bad}', true)"));
        }
        for good in ["v1.0.0", "01.01.01", "1", "1.1"] {
            yes(&format!("isSemver('{good}', true)"));
        }
        yes("semver('1.0.0').isLessThan(semver('1.2.3')) && !semver('1.0.0').isLessThan(semver('1.0.0'))");
        yes("semver('1.2.3').isGreaterThan(semver('1.0.0')) && !semver('1.0.0').isGreaterThan(semver('1.0.0'))");
        yes("semver('1.2.3').compareTo(semver('1.2.3')) == 0 && semver('1.0.0').compareTo(semver('1.2.3')) == -1");
        yes("semver('1.2.3').compareTo(semver('1.0.0')) == 1");
        yes("semver('1.2.3').major() == 1 && semver('1.2.3').minor() == 2 && semver('1.2.3').patch() == 3");
        assert_eq!(
            run("semver('v1.0')", &[]),
            Err(EvalError::Failed("No Major.Minor.Patch elements found".into()))
        );
        assert_eq!(
            run("semver('1.0.0-01')", &[]),
            Err(EvalError::Failed(
                "Numeric PreRelease version must not contain leading zeroes \"01\"".into()
            ))
        );
        yes("quantity('1Gi').isGreaterThan(quantity('1G')) && quantity('1').compareTo(quantity('2')) == -1");
    }

    #[test]
    fn ips_and_cidrs_convert_to_strings() {
        yes("string(ip('192.168.0.1')) == '192.168.0.1' && string(ip('2001:db8::68')) == '2001:db8::68'");
        yes("string(ip('2001:DB8:0:0::68')) == '2001:db8::68' && string(cidr('192.168.0.0/24')) == '192.168.0.0/24'");
        yes("string(cidr('2001:db8::/32')) == '2001:db8::/32' && string(cidr('192.168.0.1/24').masked()) == '192.168.0.0/24'");
        yes("string(cidr('10.0.0.0/8').ip()) == '10.0.0.0' && string(1) == '1'");
    }

    #[test]
    fn format_and_semver_costs_are_kubes() {
        let unbounded = [("self", Shape::unbounded())];
        let string = |max| [("self", Shape::Str { max })];
        let cost = |source: &str, vars: &[(&str, Shape)]| compile(source, vars).expect("compiles").cost();
        // kube: ceil(size / 10) * (128 / 4) for validate, ceil(size / 10) for semver.
        let validate = cost("format.dns1123Label().validate(self)", &string(100));
        assert_eq!(validate, 1 + 1 + 1 + 10 * 32, "{validate}");
        assert_eq!(cost("isSemver(self)", &string(100)), 1 + 1 + 10);
        assert_eq!(cost("semver(self).major()", &string(100)), 1 + 1 + 1 + 10);
        assert!(cost("format.uri().validate(self)", &unbounded) > STATIC_EXPRESSION_LIMIT);
        // Namespaced functions are priced by their qualified names.
        assert_eq!(cost("strings.quote(self)", &string(100)), 1 + 1 + 10);
    }

    #[test]
    fn variables_are_bound_and_missing_fields_are_errors() {
        let obj = json!({"spec": {"replicas": 3, "max": 5, "tags": ["a", "b"]}});
        assert_eq!(
            run("self.spec.replicas < self.spec.max", &[("self", obj.clone())]),
            Ok(Value::Bool(true))
        );
        assert_eq!(
            run("has(self.spec.min)", &[("self", obj.clone())]),
            Ok(Value::Bool(false))
        );
        assert_eq!(
            run("self.spec.min > 1", &[("self", obj.clone())]),
            Err(EvalError::Failed("no such key: min".into()))
        );
        assert_eq!(
            run("self.spec.tags > 1", &[("self", obj)]),
            Err(EvalError::NoSuchOverload)
        );
    }

    #[test]
    fn undeclared_names_and_syntax_errors_are_refused_at_compile_time() {
        assert_eq!(
            compile("self.a == 1 &&\n  other > 2", &[("self", Shape::unbounded())])
                .err()
                .map(|e| e.to_string()),
            Some(
                "compilation failed: ERROR: <input>:2:3: undeclared reference to 'other' (in container '')"
                    .to_string()
            )
        );
        let syntax = compile("self.a ==", &[("self", Shape::unbounded())]).err();
        assert!(
            matches!(&syntax, Some(CompileError::Syntax(m)) if m.starts_with("ERROR: <input>:1:")),
            "{syntax:?}"
        );
    }

    #[test]
    fn an_evaluation_over_the_per_call_limit_is_refused_before_it_runs() {
        let big: Vec<i64> = (0..2000).collect();
        let vars = [("self", json!(big))];
        assert_eq!(
            run("self.all(x, self.all(y, x != y || x == y))", &vars),
            Err(EvalError::CallCostExceeded)
        );
        assert_eq!(run("self.all(x, x >= 0)", &vars), Ok(Value::Bool(true)));
        let program = compile("self.all(x, x >= 0)", &[("self", Shape::unbounded())]).expect("compiles");
        let mut budget = 100;
        let self_value = [("self", value::from_json(&vars[0].1))];
        assert_eq!(
            program.evaluate(&self_value, &mut budget),
            Err(EvalError::BudgetExhausted)
        );
        assert_eq!(budget, 0);
    }

    #[test]
    fn the_cost_message_is_kubes() {
        assert_eq!(
            cost_message("estimated rule cost", 30_000_000, STATIC_EXPRESSION_LIMIT),
            "estimated rule cost exceeds budget by factor of 3.0x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
        );
        assert!(cost_message("x", 12_000_000, STATIC_EXPRESSION_LIMIT).contains("factor of 1.200000x"));
        assert!(cost_message("x", u64::MAX, STATIC_EXPRESSION_LIMIT).contains("more than 100x"));
    }
}
