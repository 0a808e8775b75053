//! What a CustomResourceDefinition declares about one served version of its resource, as
//! data every layer can read: the schema, printer columns, scale paths, selectable fields. How
//! a definition becomes this, and what is done with it (validation, defaulting, table cells),
//! is `apiextensions`' job; the methods on [`Column`] and [`Patterns`] live there.

use std::collections::HashMap;

use regex::Regex;
use serde_json::Value;

/// What a CustomResourceDefinition declares about one served version of its resource.
#[derive(Debug, PartialEq)]
pub struct CustomType {
    /// The name of the definition (`<plural>.<group>`).
    pub definition: String,
    /// The version objects are stored in (every served version reads and writes them, with
    /// only `apiVersion` converted under the `None` conversion strategy, through
    /// [`conversion`](Self::conversion) under `Webhook`).
    pub storage_version: String,
    /// The version's `openAPIV3Schema` as declared (defaults and value validations).
    pub declared: Value,
    /// The declared schema's `pattern`s, compiled.
    pub patterns: Patterns,
    /// The same schema as a whole object's: `apiVersion`, `kind` and the standard `metadata`
    /// added, for field validation, pruning and server-side apply.
    pub schema: Value,
    /// `additionalPrinterColumns`.
    pub columns: Vec<Column>,
    /// The scale subresource's paths, when the version has one.
    pub scale: Option<ScalePaths>,
    /// The version's `deprecationWarning` (or kube's default text) when it is deprecated.
    pub deprecation: Option<String>,
    /// The definition is being deleted: no new objects.
    pub terminating: bool,
    /// The version's `x-kubernetes-validations`, compiled once.
    pub rules: Rules,
    /// `selectableFields`: the paths field selectors may compare (`spec.color`), beyond
    /// `metadata.name` and `metadata.namespace`.
    pub selectable: Vec<String>,
    /// `conversion.strategy: Webhook`: the webhook that converts objects between versions
    /// (`None`: only `apiVersion` is converted).
    pub conversion: Option<ConversionWebhook>,
}

/// A definition's conversion webhook, as declared.
#[derive(Debug, Clone, PartialEq)]
pub struct ConversionWebhook {
    /// `conversion.webhook.clientConfig`.
    pub client_config: Value,
    /// `conversion.webhook.conversionReviewVersions`.
    pub review_versions: Vec<String>,
}

/// Where the scale subresource of a custom resource reads and writes its numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalePaths {
    /// `specReplicasPath`, as field names (`.spec.replicas` → `["spec", "replicas"]`).
    pub spec_replicas: Vec<String>,
    /// `statusReplicasPath`.
    pub status_replicas: Vec<String>,
    /// `labelSelectorPath`, when given.
    pub label_selector: Option<Vec<String>>,
}

/// One declared printer column.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    pub(crate) name: String,
    pub(crate) ty: String,
    pub(crate) format: String,
    pub(crate) description: String,
    pub(crate) priority: i64,
    pub(crate) json_path: String,
}

/// The `pattern`s of a schema, compiled once when its definition is read (not per object).
#[derive(Debug, Default)]
pub struct Patterns(pub(crate) HashMap<String, Regex>);

impl PartialEq for Patterns {
    fn eq(&self, other: &Self) -> bool {
        self.0.len() == other.0.len() && self.0.keys().all(|k| other.0.contains_key(k))
    }
}

/// A version's CEL validation rules (`x-kubernetes-validations`), compiled once when its
/// definition is read; `apiextensions` implements them.
pub trait ObjectRules: Send + Sync + std::fmt::Debug {
    /// The causes (field, message) that make `obj`, an update of `old` when given, fail the
    /// rules.
    fn validate(&self, obj: &Value, old: Option<&Value>) -> Vec<(String, String)>;
}

/// The compiled rules of a version.
#[derive(Debug)]
pub struct Rules(pub Box<dyn ObjectRules>);

/// Rules are compiled from the declared schema, which [`CustomType`] compares already.
impl PartialEq for Rules {
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}
