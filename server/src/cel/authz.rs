//! kube's CEL authorization library: the `authorizer` variable of admission webhooks'
//! `matchConditions` and of ValidatingAdmissionPolicies, with which an expression asks what the
//! request's user (or a service account) may do —
//! `authorizer.group('apps').resource('deployments').namespace('ns').check('create').allowed()`,
//! `authorizer.path('/healthz').check('get')`, `authorizer.serviceAccount('ns', 'sa')`, and
//! `authorizer.requestResource`, the request's own resource.
//!
//! The checks are values built step by step (each call returns a new one), as kube's are; the
//! decision comes from an [`Authorize`] the caller binds, so this module knows nothing of RBAC
//! or of users. A check is priced as kube prices it (see [`CHECK_COST`]).

use std::sync::Arc;

use cel::common::types::{DYN_TYPE, STRING_TYPE};
use cel::objects::{Opaque, Value};
use cel::ExecutionError;

use super::library::{opaque, overload, str_arg, Call, Overload};
use super::value::string;
use crate::machinery::meta::{dns_label_error, dns_subdomain_error};

/// What one authorization check costs, as kube's estimator and run-time cost price it.
pub const CHECK_COST: u64 = 350_000;

/// A question to the authorizer (kube's `authorizer.AttributesRecord` as the library fills it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// A non-resource path and an HTTP verb (`get`, `post`, ...).
    Path {
        /// The path.
        path: String,
        /// The verb.
        verb: String,
    },
    /// An API verb on a resource.
    Resource {
        /// The API group (`""`: core).
        group: String,
        /// The resource (plural).
        resource: String,
        /// The subresource, `""` for none.
        subresource: String,
        /// The namespace, `""` for the cluster scope.
        namespace: String,
        /// The object's name, `""` for any.
        name: String,
        /// The verb.
        verb: String,
    },
}

/// The authorizer's answer to a check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// The decision is "allow" (not "deny", nor "no opinion").
    pub allowed: bool,
    /// The reason the authorizer gave.
    pub reason: String,
    /// The error the authorizer met, if any.
    pub error: Option<String>,
}

/// Who the checks are made for, and what answers them.
pub trait Authorize: Send + Sync + std::fmt::Debug {
    /// The decision on `check` for this principal.
    fn authorize(&self, check: &Check) -> Verdict;
    /// The same authorizer for the service account `namespace`/`name` instead.
    fn service_account(&self, namespace: &str, name: &str) -> Arc<dyn Authorize>;
}

/// `authorizer`.
#[derive(Debug)]
struct Authorizer(Arc<dyn Authorize>);

/// `authorizer.path(...)`.
#[derive(Debug)]
struct PathCheck {
    authz: Arc<dyn Authorize>,
    path: String,
}

/// `authorizer.group(...)`.
#[derive(Debug)]
struct GroupCheck {
    authz: Arc<dyn Authorize>,
    group: String,
}

/// `authorizer.group(...).resource(...)` and its refinements.
#[derive(Debug, Clone)]
struct ResourceCheck {
    authz: Arc<dyn Authorize>,
    group: String,
    resource: String,
    subresource: String,
    namespace: String,
    name: String,
}

/// A check's result.
#[derive(Debug, PartialEq, Eq)]
struct Decision(Verdict);

macro_rules! authz_type {
    ($t:ty, $name:literal) => {
        impl Opaque for $t {
            fn runtime_type_name(&self) -> &str {
                $name
            }
        }
    };
}

authz_type!(Authorizer, "kubernetes.authorization.Authorizer");
authz_type!(PathCheck, "kubernetes.authorization.PathCheck");
authz_type!(GroupCheck, "kubernetes.authorization.GroupCheck");
authz_type!(ResourceCheck, "kubernetes.authorization.ResourceCheck");
authz_type!(Decision, "kubernetes.authorization.Decision");

impl Eq for Authorizer {}

impl PartialEq for Authorizer {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for PathCheck {}

impl PartialEq for PathCheck {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.authz, &other.authz) && self.path == other.path
    }
}

impl Eq for GroupCheck {}

impl PartialEq for GroupCheck {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.authz, &other.authz) && self.group == other.group
    }
}

impl Eq for ResourceCheck {}

impl PartialEq for ResourceCheck {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.authz, &other.authz)
            && (
                &self.group,
                &self.resource,
                &self.subresource,
                &self.namespace,
                &self.name,
            ) == (
                &other.group,
                &other.resource,
                &other.subresource,
                &other.namespace,
                &other.name,
            )
    }
}

/// The value of the `authorizer` variable for `authz`.
pub fn authorizer(authz: Arc<dyn Authorize>) -> Value {
    Value::Opaque(Arc::new(Authorizer(authz)))
}

/// The value of `authorizer.requestResource`: a check of the request's own resource.
pub fn request_resource(
    authz: Arc<dyn Authorize>,
    group: &str,
    resource: &str,
    subresource: &str,
    namespace: &str,
    name: &str,
) -> Value {
    Value::Opaque(Arc::new(ResourceCheck {
        authz,
        group: group.to_string(),
        resource: resource.to_string(),
        subresource: subresource.to_string(),
        namespace: namespace.to_string(),
        name: name.to_string(),
    }))
}

/// The library's functions. Each is a method of `dyn` that dispatches on its receiver, as the
/// environment has no static types to tell `PathCheck.check` from `ResourceCheck.check`.
pub(super) fn functions() -> Vec<Overload> {
    let member = || Call::Member(DYN_TYPE);
    vec![
        (
            "path",
            "authorizer_path",
            member(),
            vec![STRING_TYPE],
            overload!(path),
        ),
        (
            "group",
            "authorizer_group",
            member(),
            vec![STRING_TYPE],
            overload!(group),
        ),
        (
            "serviceAccount",
            "authorizer_serviceaccount",
            member(),
            vec![STRING_TYPE, STRING_TYPE],
            overload!(service_account),
        ),
        (
            "resource",
            "groupcheck_resource",
            member(),
            vec![STRING_TYPE],
            overload!(resource),
        ),
        (
            "subresource",
            "resourcecheck_subresource",
            member(),
            vec![STRING_TYPE],
            overload!(subresource),
        ),
        (
            "namespace",
            "resourcecheck_namespace",
            member(),
            vec![STRING_TYPE],
            overload!(namespace),
        ),
        (
            "name",
            "resourcecheck_name",
            member(),
            vec![STRING_TYPE],
            overload!(name),
        ),
        (
            "fieldSelector",
            "authorizer_fieldselector",
            member(),
            vec![STRING_TYPE],
            overload!(selector),
        ),
        (
            "labelSelector",
            "authorizer_labelselector",
            member(),
            vec![STRING_TYPE],
            overload!(selector),
        ),
        (
            "check",
            "authz_check",
            member(),
            vec![STRING_TYPE],
            overload!(check),
        ),
        (
            "allowed",
            "decision_allowed",
            member(),
            vec![],
            overload!(allowed),
        ),
        ("reason", "decision_reason", member(), vec![], overload!(reason)),
        (
            "errored",
            "decision_errored",
            member(),
            vec![],
            overload!(errored),
        ),
        ("error", "decision_error", member(), vec![], overload!(error)),
    ]
}

fn failure(function: &str, message: &str) -> ExecutionError {
    ExecutionError::function_error(function, message)
}

fn path(args: &[Value]) -> Result<Value, ExecutionError> {
    let authz = &opaque::<Authorizer>("path", args, 0)?.0;
    let path = str_arg("path", args, 1)?;
    if path.trim().is_empty() {
        return Err(failure("path", "path must not be empty"));
    }
    Ok(Value::Opaque(Arc::new(PathCheck {
        authz: authz.clone(),
        path: path.to_string(),
    })))
}

fn group(args: &[Value]) -> Result<Value, ExecutionError> {
    let authz = &opaque::<Authorizer>("group", args, 0)?.0;
    Ok(Value::Opaque(Arc::new(GroupCheck {
        authz: authz.clone(),
        group: str_arg("group", args, 1)?.to_string(),
    })))
}

/// kube checks the name as a DNS subdomain first, then the namespace as a DNS label.
fn service_account(args: &[Value]) -> Result<Value, ExecutionError> {
    let authz = &opaque::<Authorizer>("serviceAccount", args, 0)?.0;
    let namespace = str_arg("serviceAccount", args, 1)?;
    let name = str_arg("serviceAccount", args, 2)?;
    if dns_subdomain_error(name).is_some() {
        return Err(failure("serviceAccount", "Invalid service account name"));
    }
    if dns_label_error(namespace).is_some() {
        return Err(failure("serviceAccount", "Invalid service account namespace"));
    }
    Ok(authorizer(authz.service_account(namespace, name)))
}

fn resource(args: &[Value]) -> Result<Value, ExecutionError> {
    let g = opaque::<GroupCheck>("resource", args, 0)?;
    let resource = str_arg("resource", args, 1)?;
    if resource.trim().is_empty() {
        return Err(failure("resource", "resource must not be empty"));
    }
    Ok(request_resource(g.authz.clone(), &g.group, resource, "", "", ""))
}

/// A copy of the receiver with one part set by `set`.
fn refine(
    function: &str,
    args: &[Value],
    set: fn(&mut ResourceCheck, String),
) -> Result<Value, ExecutionError> {
    let mut r = opaque::<ResourceCheck>(function, args, 0)?.clone();
    set(&mut r, str_arg(function, args, 1)?.to_string());
    Ok(Value::Opaque(Arc::new(r)))
}

fn subresource(args: &[Value]) -> Result<Value, ExecutionError> {
    refine("subresource", args, |r, v| r.subresource = v)
}

fn namespace(args: &[Value]) -> Result<Value, ExecutionError> {
    refine("namespace", args, |r, v| r.namespace = v)
}

fn name(args: &[Value]) -> Result<Value, ExecutionError> {
    refine("name", args, |r, v| r.name = v)
}

/// `fieldSelector` and `labelSelector`: accepted, and not part of the check, as kube's RBAC
/// authorizer (the only one kuberaft has) ignores selectors.
fn selector(args: &[Value]) -> Result<Value, ExecutionError> {
    let r = opaque::<ResourceCheck>("selector", args, 0)?.clone();
    str_arg("selector", args, 1)?;
    Ok(Value::Opaque(Arc::new(r)))
}

fn check(args: &[Value]) -> Result<Value, ExecutionError> {
    let verb = str_arg("check", args, 1)?.to_string();
    let (authz, question) = match args.first() {
        Some(Value::Opaque(o)) => {
            if let Some(p) = o.downcast_ref::<PathCheck>() {
                let question = Check::Path {
                    path: p.path.clone(),
                    verb,
                };
                (&p.authz, question)
            } else if let Some(r) = o.downcast_ref::<ResourceCheck>() {
                let question = Check::Resource {
                    group: r.group.clone(),
                    resource: r.resource.clone(),
                    subresource: r.subresource.clone(),
                    namespace: r.namespace.clone(),
                    name: r.name.clone(),
                    verb,
                };
                (&r.authz, question)
            } else {
                return Err(super::library::no_overload("check", args));
            }
        }
        _ => return Err(super::library::no_overload("check", args)),
    };
    Ok(Value::Opaque(Arc::new(Decision(authz.authorize(&question)))))
}

fn decision<'a>(function: &str, args: &'a [Value]) -> Result<&'a Verdict, ExecutionError> {
    Ok(&opaque::<Decision>(function, args, 0)?.0)
}

fn allowed(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(decision("allowed", args)?.allowed))
}

fn reason(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(string(&decision("reason", args)?.reason))
}

fn errored(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(decision("errored", args)?.error.is_some()))
}

fn error(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(string(
        decision("error", args)?.error.as_deref().unwrap_or_default(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cel::cost::Shape;
    use crate::cel::{compile, EvalError, RUNTIME_BUDGET};
    use std::sync::Mutex;

    /// Allows `get` of anything and nothing else; `sa:NS:NAME` after `serviceAccount`. Records
    /// what it was asked.
    #[derive(Debug, Default)]
    struct Recorder {
        principal: String,
        asked: Arc<Mutex<Vec<(String, Check)>>>,
    }

    impl Authorize for Recorder {
        fn authorize(&self, check: &Check) -> Verdict {
            self.asked
                .lock()
                .unwrap()
                .push((self.principal.clone(), check.clone()));
            let verb = match check {
                Check::Path { verb, .. } | Check::Resource { verb, .. } => verb,
            };
            Verdict {
                allowed: verb == "get",
                reason: format!("{} may {verb}", self.principal),
                error: None,
            }
        }

        fn service_account(&self, namespace: &str, name: &str) -> Arc<dyn Authorize> {
            Arc::new(Recorder {
                principal: format!("sa:{namespace}:{name}"),
                asked: self.asked.clone(),
            })
        }
    }

    fn run(source: &str, recorder: &Recorder) -> Result<Value, EvalError> {
        let names = ["authorizer", "authorizer.requestResource"];
        let shapes: Vec<(&str, Shape)> = names.iter().map(|n| (*n, Shape::unbounded())).collect();
        let program = compile(source, &shapes).expect("compiles");
        let authz: Arc<dyn Authorize> = Arc::new(Recorder {
            principal: recorder.principal.clone(),
            asked: recorder.asked.clone(),
        });
        let vars = [
            ("authorizer", authorizer(authz.clone())),
            (
                "authorizer.requestResource",
                request_resource(authz, "apps", "deployments", "scale", "ns", "web"),
            ),
        ];
        let mut budget = RUNTIME_BUDGET;
        program.evaluate(&vars, &mut budget)
    }

    fn alice() -> Recorder {
        Recorder {
            principal: "alice".into(),
            ..Recorder::default()
        }
    }

    #[test]
    fn resource_checks_are_built_step_by_step_and_asked_once_checked() {
        let a = alice();
        let yes = "authorizer.group('apps').resource('deployments').subresource('scale').namespace('ns').name('web').check('get').allowed()";
        assert_eq!(run(yes, &a), Ok(Value::Bool(true)));
        let no = "authorizer.group('').resource('pods').labelSelector('a=b').check('create')";
        assert_eq!(run(&format!("{no}.allowed()"), &a), Ok(Value::Bool(false)));
        assert_eq!(
            run(&format!("{no}.reason()"), &a),
            Ok(Value::String(Arc::new("alice may create".into())))
        );
        assert_eq!(
            run(&format!("{no}.errored() || {no}.error() != ''"), &a),
            Ok(Value::Bool(false))
        );
        let asked = a.asked.lock().unwrap().clone();
        assert_eq!(
            asked[0],
            (
                "alice".to_string(),
                Check::Resource {
                    group: "apps".into(),
                    resource: "deployments".into(),
                    subresource: "scale".into(),
                    namespace: "ns".into(),
                    name: "web".into(),
                    verb: "get".into(),
                }
            )
        );
        // Nothing is asked before `check`.
        let before = asked.len();
        run(
            "authorizer.group('').resource('pods') == authorizer.group('').resource('pods')",
            &a,
        )
        .unwrap();
        assert_eq!(a.asked.lock().unwrap().len(), before);
    }

    #[test]
    fn paths_service_accounts_and_the_request_resource() {
        let a = alice();
        assert_eq!(
            run("authorizer.path('/healthz').check('get').allowed()", &a),
            Ok(Value::Bool(true))
        );
        assert_eq!(
            run("authorizer.requestResource.check('update').allowed()", &a),
            Ok(Value::Bool(false))
        );
        assert_eq!(
            run(
                "authorizer.serviceAccount('ns', 'builder').group('').resource('secrets').check('get').reason()",
                &a
            ),
            Ok(Value::String(Arc::new("sa:ns:builder may get".into())))
        );
        let asked = a.asked.lock().unwrap().clone();
        assert_eq!(
            asked[0].1,
            Check::Path {
                path: "/healthz".into(),
                verb: "get".into()
            }
        );
        assert!(
            matches!(&asked[1].1, Check::Resource { resource, subresource, name, .. }
            if resource == "deployments" && subresource == "scale" && name == "web")
        );
    }

    #[test]
    fn empty_and_invalid_arguments_are_kubes_errors() {
        let a = alice();
        for (source, message) in [
            ("authorizer.path(' ')", "path must not be empty"),
            ("authorizer.group('').resource('')", "resource must not be empty"),
            (
                "authorizer.serviceAccount('ns', 'Bad_Name')",
                "Invalid service account name",
            ),
            (
                "authorizer.serviceAccount('Bad.Ns', 'sa')",
                "Invalid service account namespace",
            ),
        ] {
            let err = run(source, &a).expect_err(source).to_string();
            assert!(err.contains(message), "{source}: {err}");
        }
    }

    #[test]
    fn a_check_costs_what_kube_charges() {
        let shapes = [("authorizer", Shape::unbounded())];
        let one = compile("authorizer.path('/a').check('get').allowed()", &shapes).unwrap();
        let two = compile(
            "authorizer.path('/a').check('get').allowed() && authorizer.path('/b').check('get').allowed()",
            &shapes,
        )
        .unwrap();
        assert!(
            one.cost() >= CHECK_COST && one.cost() < 2 * CHECK_COST,
            "{}",
            one.cost()
        );
        assert!(two.cost() >= 2 * CHECK_COST, "{}", two.cost());
    }
}
