//! The admission configuration file (kube-apiserver's `--admission-control-config-file`): an
//! `apiserver.config.k8s.io/v1` `AdmissionConfiguration` whose `plugins` entries each give a
//! plugin's configuration inline (`configuration`) or in a file of its own (`path`, relative
//! to the admission configuration's directory). kuberaft's configurable plugin is
//! `PodSecurity` (its `PodSecurityConfiguration`: default levels and exemptions,
//! [`pod_security`](super::pod_security)). The file is read once, when a replica starts; a
//! configuration that does not parse stops it with the file and the reason.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::Value;

use super::pod_security::PodSecurityConfig;

/// Why the admission configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigurationError {
    /// A file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file is not YAML or JSON of the expected shape.
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, as kube words it where it can.
        message: String,
    },
    /// The configuration was set twice in one process.
    #[error("the admission configuration is already set")]
    AlreadySet,
}

/// The plugins' configurations this replica runs with.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct AdmissionConfig {
    /// PodSecurity's defaults and exemptions.
    pub pod_security: PodSecurityConfig,
}

static CONFIG: OnceLock<AdmissionConfig> = OnceLock::new();

/// The configuration in force (kube's defaults when none was loaded).
pub fn current() -> &'static AdmissionConfig {
    CONFIG.get_or_init(AdmissionConfig::default)
}

/// Loads `path` and makes it the configuration in force; called once, before serving.
pub fn install(path: &Path) -> Result<(), ConfigurationError> {
    let config = load(path)?;
    CONFIG.set(config).map_err(|_| ConfigurationError::AlreadySet)
}

fn read_yaml(path: &Path) -> Result<Value, ConfigurationError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigurationError::Read {
        path: path.to_owned(),
        source,
    })?;
    yaml_serde::from_str(&text).map_err(|e| ConfigurationError::Invalid {
        path: path.to_owned(),
        message: e.to_string(),
    })
}

/// Reads an `AdmissionConfiguration` and the plugin files it names.
pub fn load(path: &Path) -> Result<AdmissionConfig, ConfigurationError> {
    let doc = read_yaml(path)?;
    let invalid = |message: String| ConfigurationError::Invalid {
        path: path.to_owned(),
        message,
    };
    let kind = (doc["apiVersion"].as_str(), doc["kind"].as_str());
    if !matches!(
        kind,
        (
            Some("apiserver.config.k8s.io/v1" | "apiserver.k8s.io/v1alpha1"),
            Some("AdmissionConfiguration")
        )
    ) {
        return Err(invalid(format!(
            "expected apiserver.config.k8s.io/v1 AdmissionConfiguration, got {}/{}",
            kind.0.unwrap_or_default(),
            kind.1.unwrap_or_default()
        )));
    }
    let mut config = AdmissionConfig::default();
    for plugin in doc["plugins"].as_array().into_iter().flatten() {
        let name = plugin["name"].as_str().unwrap_or_default();
        if name != "PodSecurity" {
            continue;
        }
        let (configuration, from) = match plugin["path"].as_str() {
            Some(p) if !p.is_empty() => {
                let file = path.parent().unwrap_or(Path::new(".")).join(p);
                (read_yaml(&file)?, file)
            }
            _ => (plugin["configuration"].clone(), path.to_owned()),
        };
        config.pod_security = PodSecurityConfig::parse(&configuration)
            .map_err(|message| ConfigurationError::Invalid { path: from, message })?;
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_security_is_read_inline_or_from_its_own_file() {
        let dir = tempfile::tempdir().unwrap();
        let pod_security = "apiVersion: pod-security.admission.config.k8s.io/v1\nkind: PodSecurityConfiguration\ndefaults: {enforce: restricted, warn: baseline, warn-version: v1.30}\nexemptions: {namespaces: [kube-system], usernames: [ci]}\n";
        std::fs::write(dir.path().join("ps.yaml"), pod_security).unwrap();
        let by_path = dir.path().join("by-path.yaml");
        std::fs::write(
            &by_path,
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- {name: LimitRanger}\n- {name: PodSecurity, path: ps.yaml}\n",
        )
        .unwrap();
        let inline = dir.path().join("inline.yaml");
        let indented: String = pod_security.lines().map(|l| format!("    {l}\n")).collect();
        std::fs::write(
            &inline,
            format!("apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: PodSecurity\n  configuration:\n{indented}"),
        )
        .unwrap();
        let a = load(&by_path).unwrap();
        assert_eq!(a, load(&inline).unwrap());
        assert_ne!(a, AdmissionConfig::default());
    }

    #[test]
    fn what_does_not_parse_is_named_with_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [
            ("apiVersion: v1\nkind: ConfigMap\n", "expected apiserver.config.k8s.io/v1 AdmissionConfiguration, got v1/ConfigMap"),
            (
                "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: PodSecurity\n  configuration: {apiVersion: pod-security.admission.config.k8s.io/v1, kind: PodSecurityConfiguration, defaults: {audit-version: v2.0}}\n",
                "defaults.audit-version: Invalid value: \"v2.0\": must be \"latest\" or \"v1.x\"",
            ),
            (
                "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: PodSecurity\n  configuration: {apiVersion: pod-security.admission.config.k8s.io/v1, kind: PodSecurityConfiguration, exemptions: {namespaces: kube-system}}\n",
                "exemptions.namespaces: expected a list",
            ),
            (
                "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- {name: PodSecurity, path: missing.yaml}\n",
                "missing.yaml",
            ),
        ];
        for (i, (text, expected)) in cases.iter().enumerate() {
            let file = dir.path().join(format!("case-{i}.yaml"));
            std::fs::write(&file, text).unwrap();
            let err = load(&file).unwrap_err().to_string();
            assert!(err.contains(expected), "case {i}: {err}");
        }
    }
}
