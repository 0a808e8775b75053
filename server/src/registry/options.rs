//! The verbs' options, kube's `GetOptions`, `ListOptions`, `CreateOptions`/`UpdateOptions` and
//! `PatchOptions` (`DeleteOptions`, which also comes in a body, is in [`super::delete`]):
//! parsed once from the query by the endpoint, with kube-apiserver's `400`s for bad values
//! before the body is read, or built by a controller — so no verb reads a query.

use crate::machinery::errors::{ApiError, ApiResult};
use crate::machinery::field_validation::Directive;
use crate::machinery::managed;
use crate::machinery::query::{flag, Query};
use crate::machinery::selector::{FieldSelector, LabelSelector};
use crate::scheme::{field_selectors, ResourceType};
use crate::store::plans::{self, ListPlan, ReadAt};

/// The manager of writes that name none: the server's own (controllers, the garbage
/// collector) and clients that send neither `fieldManager` nor a user agent.
pub const SERVER_MANAGER: &str = "kuberaft";

/// A GET's options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GetOptions {
    /// The read class its resourceVersion asks for.
    pub at: ReadAt,
}

impl GetOptions {
    /// Reads `resourceVersion`.
    pub fn parse(q: &Query) -> ApiResult<Self> {
        Ok(GetOptions {
            at: plans::get_plan(q)?,
        })
    }
}

/// A LIST's (and a collection DELETE's) options: the read plan and the selectors.
#[derive(Debug, Clone, PartialEq)]
pub struct ListOptions {
    /// Revision, paging and limit.
    pub plan: ListPlan,
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `fieldSelector`, over the fields `rt` can be selected by.
    pub fields: FieldSelector,
}

impl ListOptions {
    /// Reads the plan and the selectors of a list of `rt`.
    pub fn parse(rt: &ResourceType, q: &Query) -> ApiResult<Self> {
        let (labels, fields) = selectors(rt, q)?;
        Ok(ListOptions {
            plan: plans::list_plan(q)?,
            labels,
            fields,
        })
    }
}

/// The label and field selectors of a request for a collection of `rt`.
pub fn selectors(rt: &ResourceType, q: &Query) -> ApiResult<(LabelSelector, FieldSelector)> {
    let labels = LabelSelector::parse(q.get("labelSelector").map_or("", String::as_str))?;
    let text = q.get("fieldSelector").map_or("", String::as_str);
    let fields = match &rt.custom {
        Some(custom) => FieldSelector::parse_custom(text, &custom.selectable)?,
        None => FieldSelector::parse(text, field_selectors(&rt.group, &rt.plural))?,
    };
    Ok((labels, fields))
}

/// A create's or an update's options (kube's `CreateOptions` and `UpdateOptions`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteOptions {
    /// `dryRun=All`: everything but the write.
    pub dry_run: bool,
    /// Who the write is recorded under in `managedFields`.
    pub field_manager: String,
    /// What to do about unknown and duplicate fields.
    pub field_validation: Directive,
}

impl WriteOptions {
    /// Reads `dryRun`, `fieldManager` (the server's own when absent) and `fieldValidation`.
    pub fn parse(q: &Query) -> ApiResult<Self> {
        let field_manager = match q.get("fieldManager") {
            Some(m) => {
                managed::check_manager(m)?;
                m.clone()
            }
            None => SERVER_MANAGER.to_string(),
        };
        Ok(WriteOptions {
            dry_run: dry_run(q)?,
            field_manager,
            field_validation: Directive::from_query(q)?,
        })
    }

    /// A real write recorded under `manager`, fields checked as by default.
    pub fn by(manager: &str) -> Self {
        WriteOptions {
            dry_run: false,
            field_manager: manager.to_string(),
            field_validation: Directive::Warn,
        }
    }
}

/// A PATCH's options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchOptions {
    /// `dryRun=All`: everything but the write.
    pub dry_run: bool,
    /// Who the write is recorded under; an apply must name itself.
    pub field_manager: String,
    /// What to do about unknown and duplicate fields.
    pub field_validation: Directive,
    /// An apply takes over the fields other managers own instead of conflicting.
    pub force: bool,
}

impl PatchOptions {
    /// Reads the options of a patch, an apply when `applying`: `force` is only for applies,
    /// and an apply must name its `fieldManager`.
    pub fn parse(q: &Query, applying: bool) -> ApiResult<Self> {
        let force = match flag(q, "force") {
            Some(true) if !applying => {
                return Err(ApiError::bad_request(
                    "force: Forbidden: may not be specified for non-apply patch",
                ))
            }
            set => set.unwrap_or(false),
        };
        let field_manager = match q.get("fieldManager") {
            Some(m) if !m.is_empty() || !applying => {
                managed::check_manager(m)?;
                m.clone()
            }
            _ if applying => {
                return Err(ApiError::bad_request(
                    "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
                ))
            }
            _ => SERVER_MANAGER.to_string(),
        };
        Ok(PatchOptions {
            dry_run: dry_run(q)?,
            field_manager,
            field_validation: Directive::from_query(q)?,
            force,
        })
    }
}

/// Whether `dryRun` asks for a dry run (`All`); any other value is a 400.
fn dry_run(q: &Query) -> ApiResult<bool> {
    match q.get("dryRun").map(String::as_str) {
        None | Some("") => Ok(false),
        Some("All") => Ok(true),
        Some(other) => Err(ApiError::bad_request(format!(
            "dryRun: Unsupported value: {other:?}: supported values: \"All\""
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machinery::query::pairs as q;

    #[test]
    fn force_is_only_for_applies_and_an_apply_names_its_manager() {
        let with = |force: &str| q(&[("force", force), ("fieldManager", "me")]);
        assert!(PatchOptions::parse(&with("true"), true).unwrap().force);
        assert_eq!(PatchOptions::parse(&with("true"), false).unwrap_err().code, 400);
        assert!(PatchOptions::parse(&with("True"), true).unwrap().force);
        assert!(!PatchOptions::parse(&with("False"), false).unwrap().force);
        assert_eq!(PatchOptions::parse(&q(&[]), true).unwrap_err().code, 400);
        assert_eq!(
            PatchOptions::parse(&q(&[("fieldManager", "")]), true)
                .unwrap_err()
                .code,
            400
        );
        assert_eq!(
            PatchOptions::parse(&q(&[]), false).unwrap().field_manager,
            SERVER_MANAGER
        );
    }

    #[test]
    fn writes_read_dry_run_manager_and_field_validation() {
        let opts = WriteOptions::parse(&q(&[
            ("dryRun", "All"),
            ("fieldManager", "kubectl"),
            ("fieldValidation", "Strict"),
        ]))
        .unwrap();
        assert_eq!(
            opts,
            WriteOptions {
                dry_run: true,
                field_manager: "kubectl".into(),
                field_validation: Directive::Strict,
            }
        );
        assert_eq!(
            WriteOptions::parse(&q(&[])).unwrap(),
            WriteOptions::by(SERVER_MANAGER)
        );
        assert_eq!(
            WriteOptions::parse(&q(&[("dryRun", "Some")])).unwrap_err().code,
            400
        );
        assert_eq!(
            WriteOptions::parse(&q(&[("fieldValidation", "Loud")]))
                .unwrap_err()
                .code,
            400
        );
    }
}
