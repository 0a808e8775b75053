//! The strategies of what `apiextensions` serves: custom resources (validated and defaulted by
//! their version's structural schema, stored in the storage version (converted by the
//! definition's conversion webhook when it has one), a generation for every
//! change outside `metadata` and `status`) and CustomResourceDefinitions themselves (checked
//! to stay servable, defaulted, their status conditions derived).

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use crate::apiextensions::{conversion, definition, structural};
use crate::machinery::errors::{ApiError, ApiResult};
use crate::machinery::meta::meta_str;
use crate::registry::strategy::Strategy;
use crate::scheme::ResourceType;
use crate::store::Store;

/// Every custom resource type (what differs between them is in the type's `custom` data).
pub struct CustomResource;

impl Strategy for CustomResource {
    fn webhook_conversion<'a>(
        &'a self,
        store: &'a Store,
        rt: &'a ResourceType,
        objects: &'a [Value],
        api_version: &'a str,
        list: bool,
    ) -> Option<BoxFuture<'a, ApiResult<Vec<Value>>>> {
        let custom = rt.custom.as_ref()?;
        let hook = custom.conversion.as_ref()?;
        Some(Box::pin(conversion::convert(
            store,
            &custom.definition,
            hook,
            objects,
            api_version,
            list,
        )))
    }

    fn tracks_generation(&self, _rt: &ResourceType) -> bool {
        true
    }

    /// Everything but `metadata` (and `status` when it is a subresource).
    fn spec_changed(&self, rt: &ResourceType, old: &Value, new: &Value) -> bool {
        let content = |v: &Value| -> Map<String, Value> {
            v.as_object()
                .map(|o| {
                    o.iter()
                        .filter(|(k, _)| {
                            k.as_str() != "metadata" && !(rt.has_status && k.as_str() == "status")
                        })
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect()
                })
                .unwrap_or_default()
        };
        content(old) != content(new)
    }

    fn prepare_for_create(&self, rt: &ResourceType, obj: &mut Value) {
        if let Some(o) = obj.as_object_mut().filter(|_| rt.has_status) {
            o.remove("status");
        }
        if let Some(custom) = &rt.custom {
            structural::apply_defaults(&custom.declared, obj);
        }
    }

    fn prepare_for_update(&self, rt: &ResourceType, _old: &Value, new: &mut Value) -> ApiResult<()> {
        if let Some(custom) = &rt.custom {
            structural::apply_defaults(&custom.declared, new);
        }
        Ok(())
    }

    /// Against the version's schema; no new objects while the definition is being deleted.
    fn validate(&self, rt: &ResourceType, old: Option<&Value>, obj: &Value) -> ApiResult<()> {
        let Some(custom) = &rt.custom else {
            return Ok(());
        };
        if old.is_none() && custom.terminating {
            return Err(ApiError::method_not_allowed_because(
                "create not allowed while custom resource definition is terminating",
            ));
        }
        let mut causes = structural::validate(&custom.declared, &custom.patterns, obj);
        if causes
            .iter()
            .any(|(_, m)| m.contains(" in body must be of type "))
        {
            // kube's `hasBlockingErr`: rules are not run on values of the wrong type.
            causes.push((
                "<nil>".to_string(),
                "Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation".to_string(),
            ));
        } else {
            causes.extend(custom.rules.0.validate(obj, old));
        }
        invalid_if_any(rt, obj, causes)
    }
}

/// CustomResourceDefinitions.
pub struct Definition;

impl Strategy for Definition {
    fn tracks_generation(&self, _rt: &ResourceType) -> bool {
        true
    }

    fn prepare_for_create(&self, _rt: &ResourceType, obj: &mut Value) {
        definition::apply_defaults(obj, true);
        let status = definition::status(obj, None);
        obj["status"] = status;
    }

    fn prepare_for_update(&self, _rt: &ResourceType, old: &Value, new: &mut Value) -> ApiResult<()> {
        definition::apply_defaults(new, false);
        let status = definition::status(new, old.get("status"));
        new["status"] = status;
        Ok(())
    }

    /// The rules that keep a definition servable (and, on update, what may not change).
    fn validate(&self, rt: &ResourceType, old: Option<&Value>, obj: &Value) -> ApiResult<()> {
        let causes = match old {
            Some(old) => definition::validate_update(old, obj),
            None => definition::validate(obj),
        };
        invalid_if_any(rt, obj, causes)
    }
}

/// A `422` naming every cause, or nothing when there are none.
fn invalid_if_any(rt: &ResourceType, obj: &Value, causes: Vec<(String, String)>) -> ApiResult<()> {
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid(
        &rt.group,
        &rt.kind,
        meta_str(obj, "name").unwrap_or_default(),
        &causes,
    ))
}
