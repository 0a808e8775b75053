//! Encryption at rest: the values of chosen resources (Secrets, as `cluster up` configures it)
//! are encrypted before they are proposed, so the Raft log, the state machine and snapshots
//! only ever hold ciphertext, and decrypted when a replica reads them back.
//!
//! The configuration is kube-apiserver's `EncryptionConfiguration`
//! (`apiserver.config.k8s.io/v1`): rules of resources and an ordered provider list; the first
//! provider encrypts, every provider may decrypt, `identity` reads (or, first, writes)
//! plaintext. The `aesgcm` provider is kube's: AES-GCM with a random 96-bit nonce, the value
//! stored as `k8s:enc:aesgcm:v1:<key name>:` + nonce + ciphertext and tag, the storage key as
//! additional authenticated data (a value copied under another key does not decrypt).
//!
//! *Invariant:* encryption happens where a value is made for a write (the proposing replica);
//! applying a log entry never encrypts, so apply stays deterministic. A value that no provider
//! of the list can read is an error, which the store reports as a corrupt object.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use base64::Engine;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_128_GCM, AES_256_GCM, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};
use serde::Deserialize;

use crate::store::keys::{INTERNAL_PREFIX, ROOT};

/// The prefix every encrypted value starts with, whatever its provider.
const ENCRYPTED: &[u8] = b"k8s:enc:";

/// Why an encryption configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum EncryptionError {
    /// The file cannot be read.
    #[error("cannot read encryption config {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a valid `EncryptionConfiguration`.
    #[error("encryption config {path}: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// Encrypting a value failed.
    #[error("encrypting {key} failed")]
    Seal {
        /// The storage key.
        key: String,
    },
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConfigFile {
    api_version: String,
    kind: String,
    #[serde(default)]
    resources: Vec<RuleFile>,
}

#[derive(Debug, Deserialize)]
struct RuleFile {
    resources: Vec<String>,
    providers: Vec<yaml_serde::Mapping>,
}

#[derive(Debug, Deserialize)]
struct AesGcmFile {
    keys: Vec<KeyFile>,
}

#[derive(Debug, Deserialize)]
struct KeyFile {
    name: String,
    secret: String,
}

/// One named AES-GCM key.
struct AesKey {
    name: String,
    prefix: Vec<u8>,
    key: LessSafeKey,
}

/// One provider of a rule's list.
enum Provider {
    /// AES-GCM with its keys, the first of which encrypts.
    AesGcm(Vec<AesKey>),
    /// Plaintext.
    Identity,
}

/// Which resources a rule covers: `secrets` (core), `deployments.apps`, `*.apps`, `*.` (every
/// core resource) or `*.*` (everything).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Resource {
    /// `None`: every resource of the group.
    resource: Option<String>,
    /// `None`: every group.
    group: Option<String>,
}

impl Resource {
    fn parse(text: &str) -> Result<Resource, String> {
        let (resource, group) = text.split_once('.').unwrap_or((text, ""));
        let resource = match resource {
            "" => return Err(format!("resource {text:?} has no name")),
            "*" => None,
            r => Some(r.to_string()),
        };
        let group = match group {
            "*" if resource.is_none() => None,
            "*" => return Err(format!("resource {text:?}: a group wildcard needs `*.*`")),
            g => Some(g.to_string()),
        };
        Ok(Resource { resource, group })
    }

    fn covers(&self, group: &str, resource: &str) -> bool {
        self.group.as_deref().is_none_or(|g| g == group)
            && self.resource.as_deref().is_none_or(|r| r == resource)
    }
}

struct Rule {
    resources: Vec<Resource>,
    providers: Vec<Provider>,
}

/// The rules of one `EncryptionConfiguration`.
#[derive(Default)]
struct Rules(Vec<Rule>);

/// The encryption of one replica: the rules of its `EncryptionConfiguration`, or none at all
/// (every value stored as it is). A configuration read from a file follows the file
/// ([`Encryption::follow`]), as kube-apiserver's automatic reload does: the rules in force
/// are swapped whole, so a write is sealed and a read opened under one configuration.
pub struct Encryption {
    rules: RwLock<Arc<Rules>>,
    source: Option<PathBuf>,
}

/// How often a followed configuration file is read for changes.
const RELOAD_EVERY: Duration = Duration::from_secs(1);

impl std::fmt::Debug for Encryption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let rules = self.rules();
        let keys: Vec<Vec<&str>> = rules
            .0
            .iter()
            .map(|r| {
                r.providers
                    .iter()
                    .flat_map(|p| match p {
                        Provider::AesGcm(keys) => keys.iter().map(|k| k.name.as_str()).collect(),
                        Provider::Identity => vec!["identity"],
                    })
                    .collect()
            })
            .collect();
        f.debug_struct("Encryption").field("keys", &keys).finish()
    }
}

/// The random generator nonces and new keys come from.
fn random() -> &'static SystemRandom {
    static RANDOM: std::sync::OnceLock<SystemRandom> = std::sync::OnceLock::new();
    RANDOM.get_or_init(SystemRandom::new)
}

/// A new random 256-bit AES key, base64 as an `EncryptionConfiguration` holds it.
pub fn new_key_secret() -> Result<String, ring::error::Unspecified> {
    let mut key = [0u8; 32];
    random().fill(&mut key)?;
    Ok(base64::engine::general_purpose::STANDARD.encode(key))
}

/// The `EncryptionConfiguration` `cluster up` writes: Secrets encrypted with one AES-GCM key
/// named `key_name`, plaintext still readable (a cluster that had no encryption before).
pub fn config_yaml(key_name: &str, secret: &str) -> String {
    format!(
        "apiVersion: apiserver.config.k8s.io/v1\n\
         kind: EncryptionConfiguration\n\
         resources:\n\
         - resources:\n  \
           - secrets\n  \
           providers:\n  \
           - aesgcm:\n      \
               keys:\n      \
               - name: {key_name}\n        \
                 secret: {secret}\n  \
           - identity: {{}}\n"
    )
}

/// The (group, resource) a storage key belongs to; `None` for kuberaft's own records.
fn resource_of(key: &str) -> Option<(&str, &str)> {
    if key.starts_with(INTERNAL_PREFIX) {
        return None;
    }
    let mut parts = key.strip_prefix(ROOT)?.splitn(3, '/');
    let group = match parts.next()? {
        "core" => "",
        g => g,
    };
    Some((group, parts.next()?))
}

impl Encryption {
    /// No encryption: every value is stored as it is.
    pub fn none() -> Encryption {
        Encryption::with(Rules::default(), None)
    }

    fn with(rules: Rules, source: Option<PathBuf>) -> Encryption {
        Encryption {
            rules: RwLock::new(Arc::new(rules)),
            source,
        }
    }

    /// The rules in force now.
    fn rules(&self) -> Arc<Rules> {
        self.rules.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Reads and checks an `EncryptionConfiguration` file.
    pub fn load(path: &Path) -> Result<Encryption, EncryptionError> {
        let rules = read_rules(path)?;
        Ok(Encryption::with(rules, Some(path.to_path_buf())))
    }

    /// Parses an `EncryptionConfiguration`; the error says what is wrong.
    pub fn parse(text: &str) -> Result<Encryption, String> {
        parse_rules(text).map(|rules| Encryption::with(rules, None))
    }

    /// Follows the file the configuration was loaded from, as kube-apiserver's
    /// `--encryption-provider-config-automatic-reload` does: a changed file that is valid
    /// replaces the rules at once; one that is not keeps the last good rules and says why in
    /// the log. Each attempt is counted in kube's
    /// `apiserver_encryption_config_controller_automatic_reloads_total{status}` (with the
    /// time of the last in `..._automatic_reload_last_timestamp_seconds`), labelled with
    /// `apiserver_id_hash` of `server_id`. A configuration not read from a file, or no tokio
    /// runtime, follows nothing.
    pub fn follow(self: &Arc<Self>, server_id: &str) {
        let (Some(path), Ok(runtime)) = (self.source.clone(), tokio::runtime::Handle::try_current()) else {
            return;
        };
        let digest = ring::digest::digest(&ring::digest::SHA256, server_id.as_bytes());
        let id_hash = format!(
            "sha256:{}",
            digest
                .as_ref()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        );
        let this = Arc::downgrade(self);
        runtime.spawn(async move {
            let mut seen = std::fs::read(&path).ok();
            loop {
                tokio::time::sleep(RELOAD_EVERY).await;
                let Some(encryption) = this.upgrade() else {
                    return;
                };
                let now = std::fs::read(&path).ok();
                if now == seen {
                    continue;
                }
                seen = now;
                let status = match read_rules(&path) {
                    Ok(rules) => {
                        *encryption.rules.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(rules);
                        tracing::info!(file = %path.display(), "encryption config reloaded");
                        "success"
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "encryption config not reloaded; keeping the last good one");
                        "failure"
                    }
                };
                let labels = [("apiserver_id_hash", id_hash.clone()), ("status", status.to_string())];
                metrics::counter!("apiserver_encryption_config_controller_automatic_reloads_total", &labels)
                    .increment(1);
                let at = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0.0, |d| d.as_secs_f64());
                metrics::gauge!("apiserver_encryption_config_controller_automatic_reload_last_timestamp_seconds", &labels)
                    .set(at);
            }
        });
    }
}

/// Reads and checks an `EncryptionConfiguration` file.
fn read_rules(path: &Path) -> Result<Rules, EncryptionError> {
    let text = std::fs::read_to_string(path).map_err(|source| EncryptionError::Read {
        path: path.display().to_string(),
        source,
    })?;
    parse_rules(&text).map_err(|message| EncryptionError::Invalid {
        path: path.display().to_string(),
        message,
    })
}

/// Parses an `EncryptionConfiguration`; the error says what is wrong.
fn parse_rules(text: &str) -> Result<Rules, String> {
    let file: ConfigFile = yaml_serde::from_str(text).map_err(|e| e.to_string())?;
    if file.api_version != "apiserver.config.k8s.io/v1" || file.kind != "EncryptionConfiguration" {
        return Err(format!(
            "expected apiVersion apiserver.config.k8s.io/v1 and kind EncryptionConfiguration, got {} {}",
            file.api_version, file.kind
        ));
    }
    let mut seen: Vec<Resource> = Vec::new();
    let mut rules = Vec::new();
    for (i, rule) in file.resources.into_iter().enumerate() {
        if rule.resources.is_empty() {
            return Err(format!(
                "resources[{i}].resources: at least one resource is required"
            ));
        }
        if rule.providers.is_empty() {
            return Err(format!(
                "resources[{i}].providers: at least one provider is required"
            ));
        }
        let resources = rule
            .resources
            .iter()
            .map(|r| Resource::parse(r).map_err(|e| format!("resources[{i}].resources: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(dup) = resources.iter().find(|r| seen.contains(r)) {
            return Err(format!(
                "resources[{i}].resources: {dup:?} is already covered by an earlier rule"
            ));
        }
        seen.extend(resources.iter().cloned());
        let providers = rule
            .providers
            .iter()
            .enumerate()
            .map(|(j, p)| provider(p).map_err(|e| format!("resources[{i}].providers[{j}]: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        rules.push(Rule { resources, providers });
    }
    Ok(Rules(rules))
}

impl Rules {
    fn rule_for(&self, key: &str) -> Option<&Rule> {
        let (group, resource) = resource_of(key)?;
        self.0
            .iter()
            .find(|r| r.resources.iter().any(|res| res.covers(group, resource)))
    }
}

impl Encryption {
    /// The value to store under `key`: encrypted by the first provider of the key's rule,
    /// unchanged when no rule covers it or the first provider is `identity`.
    pub fn seal(&self, key: &str, value: Vec<u8>) -> Result<Vec<u8>, EncryptionError> {
        let rules = self.rules();
        let Some(Provider::AesGcm(keys)) = rules.rule_for(key).and_then(|r| r.providers.first()) else {
            return Ok(value);
        };
        let Some(first) = keys.first() else {
            return Ok(value);
        };
        let seal_error = || EncryptionError::Seal { key: key.to_string() };
        let mut nonce = [0u8; NONCE_LEN];
        random().fill(&mut nonce).map_err(|_| seal_error())?;
        let mut body = value;
        first
            .key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(key.as_bytes()),
                &mut body,
            )
            .map_err(|_| seal_error())?;
        let mut out = Vec::with_capacity(first.prefix.len() + NONCE_LEN + body.len());
        out.extend_from_slice(&first.prefix);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&body);
        Ok(out)
    }

    /// Whether [`Encryption::seal`] encrypts what is stored under `key` (a merge computed by
    /// the state machine, which holds no keys, cannot be stored there).
    pub fn encrypts(&self, key: &str) -> bool {
        matches!(
            self.rules().rule_for(key).and_then(|r| r.providers.first()),
            Some(Provider::AesGcm(keys)) if !keys.is_empty()
        )
    }

    /// Whether the value stored under `key` is in another form than [`Encryption::seal`]
    /// would write now: encrypted with a key that is not the first, encrypted where the first
    /// provider is `identity` (or nothing covers the key), or plaintext where it encrypts.
    /// kube-apiserver calls such a value stale and rewrites it even when the object is unchanged.
    pub fn stale(&self, key: &str, stored: &[u8]) -> bool {
        match self.rules().rule_for(key).and_then(|r| r.providers.first()) {
            Some(Provider::AesGcm(keys)) if !keys.is_empty() => {
                keys.first().is_none_or(|k| !stored.starts_with(&k.prefix))
            }
            _ => stored.starts_with(ENCRYPTED),
        }
    }

    /// The plaintext of the value stored under `key`, or why no provider can read it.
    pub fn open<'a>(&self, key: &str, stored: &'a [u8]) -> Result<Cow<'a, [u8]>, String> {
        let rules = self.rules();
        let Some(rule) = rules.rule_for(key) else {
            return Ok(Cow::Borrowed(stored));
        };
        let encrypted = stored.starts_with(ENCRYPTED);
        for p in &rule.providers {
            match p {
                Provider::Identity if !encrypted => return Ok(Cow::Borrowed(stored)),
                Provider::Identity => {}
                Provider::AesGcm(keys) => {
                    if let Some((k, rest)) = keys
                        .iter()
                        .find_map(|k| Some((k, stored.strip_prefix(k.prefix.as_slice())?)))
                    {
                        return open_aes(k, key, rest).map(Cow::Owned);
                    }
                }
            }
        }
        Err(if encrypted {
            let name = stored
                .strip_prefix(ENCRYPTED)
                .and_then(|r| r.splitn(4, |b| *b == b':').nth(2))
                .map(String::from_utf8_lossy)
                .unwrap_or_default();
            format!(
                "no encryption key of this replica's encryption config decrypts it (it names key {name:?})"
            )
        } else {
            "it is stored unencrypted and the encryption config has no identity provider to read it"
                .to_string()
        })
    }
}

fn open_aes(k: &AesKey, key: &str, rest: &[u8]) -> Result<Vec<u8>, String> {
    let fail = || format!("key {:?} does not decrypt it", k.name);
    let (nonce, sealed) = rest.split_at_checked(NONCE_LEN).ok_or_else(fail)?;
    let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| fail())?;
    let mut body = sealed.to_vec();
    let plain = k
        .key
        .open_in_place(nonce, Aad::from(key.as_bytes()), &mut body)
        .map_err(|_| fail())?;
    let len = plain.len();
    body.truncate(len);
    Ok(body)
}

fn provider(p: &yaml_serde::Mapping) -> Result<Provider, String> {
    if p.len() != 1 {
        return Err("a provider has exactly one of aesgcm or identity".into());
    }
    let Some((name, body)) = p.iter().next() else {
        return Err("empty provider".into());
    };
    match name.as_str().unwrap_or_default() {
        "identity" => Ok(Provider::Identity),
        "aesgcm" => {
            let file: AesGcmFile =
                yaml_serde::from_value(body.clone()).map_err(|e| format!("aesgcm: {e}"))?;
            if file.keys.is_empty() {
                return Err("aesgcm.keys: at least one key is required".into());
            }
            let mut keys: Vec<AesKey> = Vec::new();
            for (i, k) in file.keys.into_iter().enumerate() {
                if k.name.is_empty() || k.name.contains(':') {
                    return Err(format!(
                        "aesgcm.keys[{i}].name: must be non-empty and must not contain ':'"
                    ));
                }
                if keys.iter().any(|o| o.name == k.name) {
                    return Err(format!("aesgcm.keys[{i}].name: duplicate key name {:?}", k.name));
                }
                let raw = base64::engine::general_purpose::STANDARD
                    .decode(k.secret.trim())
                    .map_err(|e| format!("aesgcm.keys[{i}].secret: not base64: {e}"))?;
                let algorithm = match raw.len() {
                    16 => &AES_128_GCM,
                    32 => &AES_256_GCM,
                    n => {
                        return Err(format!(
                            "aesgcm.keys[{i}].secret: a key of {n} bytes; AES-GCM keys are 16 or 32 bytes"
                        ))
                    }
                };
                let unbound = UnboundKey::new(algorithm, &raw)
                    .map_err(|_| format!("aesgcm.keys[{i}].secret: unusable key"))?;
                keys.push(AesKey {
                    prefix: format!("k8s:enc:aesgcm:v1:{}:", k.name).into_bytes(),
                    name: k.name,
                    key: LessSafeKey::new(unbound),
                });
            }
            Ok(Provider::AesGcm(keys))
        }
        other @ ("aescbc" | "secretbox" | "kms") => Err(format!(
            "the {other} provider is not supported by kuberaft; use aesgcm or identity"
        )),
        other => Err(format!("unknown provider {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET_KEY: &str = "/registry/core/secrets/shop/db";

    fn config(providers: &str) -> Encryption {
        let text = format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers:\n{providers}"
        );
        Encryption::parse(&text).unwrap()
    }

    fn aes(names: &[(&str, u8)]) -> String {
        let keys: String = names
            .iter()
            .map(|(n, b)| {
                let secret = base64::engine::general_purpose::STANDARD.encode([*b; 32]);
                format!("      - name: {n}\n        secret: {secret}\n")
            })
            .collect();
        format!("  - aesgcm:\n      keys:\n{keys}")
    }

    #[test]
    fn secrets_are_sealed_with_the_first_key_and_opened_again() {
        let enc = config(&(aes(&[("k1", 1)]) + "  - identity: {}\n"));
        let sealed = enc
            .seal(SECRET_KEY, b"{\"data\":{\"pw\":\"aHVudGVyMg==\"}}".to_vec())
            .unwrap();
        assert!(sealed.starts_with(b"k8s:enc:aesgcm:v1:k1:"));
        assert!(!sealed.windows(8).any(|w| w == b"aHVudGVy"));
        let plain = enc.open(SECRET_KEY, &sealed).unwrap();
        assert_eq!(&*plain, b"{\"data\":{\"pw\":\"aHVudGVyMg==\"}}");
        // Two seals of one value differ (random nonces).
        assert_ne!(
            sealed,
            enc.seal(SECRET_KEY, b"{\"data\":{\"pw\":\"aHVudGVyMg==\"}}".to_vec())
                .unwrap()
        );
    }

    #[test]
    fn other_resources_and_internal_records_stay_plain() {
        let enc = config(&aes(&[("k1", 1)]));
        for key in [
            "/registry/core/configmaps/shop/a",
            "/registry/kuberaft/servicenodeports/x",
            "/registry/apps/secrets/shop/a",
        ] {
            assert_eq!(enc.seal(key, b"{}".to_vec()).unwrap(), b"{}");
        }
    }

    #[test]
    fn a_value_moved_to_another_key_does_not_open() {
        let enc = config(&aes(&[("k1", 1)]));
        let sealed = enc.seal(SECRET_KEY, b"{}".to_vec()).unwrap();
        assert!(enc.open("/registry/core/secrets/shop/other", &sealed).is_err());
        let mut tampered = sealed.clone();
        if let Some(last) = tampered.last_mut() {
            *last ^= 1;
        }
        assert!(enc.open(SECRET_KEY, &tampered).is_err());
    }

    #[test]
    fn rotation_reads_old_keys_and_plaintext_and_writes_with_the_new_key() {
        let old = config(&aes(&[("k1", 1)]));
        let sealed_old = old.seal(SECRET_KEY, b"{}".to_vec()).unwrap();
        let rotated = config(&(aes(&[("k2", 2), ("k1", 1)]) + "  - identity: {}\n"));
        assert_eq!(&*rotated.open(SECRET_KEY, &sealed_old).unwrap(), b"{}");
        assert_eq!(&*rotated.open(SECRET_KEY, b"{}").unwrap(), b"{}");
        assert!(rotated
            .seal(SECRET_KEY, b"{}".to_vec())
            .unwrap()
            .starts_with(b"k8s:enc:aesgcm:v1:k2:"));
    }

    #[test]
    fn values_not_written_as_a_write_would_write_them_now_are_stale() {
        let old = config(&aes(&[("k1", 1)]));
        let sealed_old = old.seal(SECRET_KEY, b"{}".to_vec()).unwrap();
        assert!(!old.stale(SECRET_KEY, &sealed_old));
        assert!(
            old.stale(SECRET_KEY, b"{}"),
            "plaintext where the first provider encrypts"
        );
        let rotated = config(&(aes(&[("k2", 2), ("k1", 1)]) + "  - identity: {}\n"));
        assert!(
            rotated.stale(SECRET_KEY, &sealed_old),
            "sealed with a key that is not the first"
        );
        let sealed_new = rotated.seal(SECRET_KEY, b"{}".to_vec()).unwrap();
        assert!(!rotated.stale(SECRET_KEY, &sealed_new));
        let decrypting = config(&("  - identity: {}\n".to_string() + &aes(&[("k2", 2)])));
        assert!(
            decrypting.stale(SECRET_KEY, &sealed_new),
            "encrypted where identity comes first"
        );
        assert!(!decrypting.stale(SECRET_KEY, b"{}"));
        assert!(
            !old.stale("/registry/core/configmaps/shop/a", b"{}"),
            "not covered, plain"
        );
    }

    #[test]
    fn unknown_keys_and_plaintext_without_identity_are_errors() {
        let a = config(&aes(&[("k1", 1)]));
        let b = config(&aes(&[("k9", 9)]));
        let err = b
            .open(SECRET_KEY, &a.seal(SECRET_KEY, b"{}".to_vec()).unwrap())
            .unwrap_err();
        assert!(err.contains("\"k1\""), "{err}");
        assert!(b.open(SECRET_KEY, b"{}").unwrap_err().contains("identity"));
        // The same key name with another secret fails to decrypt rather than returning garbage.
        let c = config(&aes(&[("k1", 7)]));
        assert!(c
            .open(SECRET_KEY, &a.seal(SECRET_KEY, b"{}".to_vec()).unwrap())
            .is_err());
    }

    #[test]
    fn resource_patterns_follow_kube() {
        let covers = |pattern: &str, group: &str, resource: &str| {
            Resource::parse(pattern).unwrap().covers(group, resource)
        };
        assert!(covers("secrets", "", "secrets"));
        assert!(!covers("secrets", "apps", "secrets"));
        assert!(covers("deployments.apps", "apps", "deployments"));
        assert!(covers("*.apps", "apps", "replicasets"));
        assert!(covers("*.", "", "configmaps"));
        assert!(!covers("*.", "apps", "deployments"));
        assert!(covers("*.*", "example.com", "widgets"));
        assert!(Resource::parse("secrets.*").is_err());
    }

    #[test]
    fn bad_configs_say_what_is_wrong() {
        let bad = |providers: &str| {
            match Encryption::parse(&format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers:\n{providers}"
        )) {
            Ok(_) => String::new(),
            Err(e) => e,
        }
        };
        assert!(bad("  - aescbc:\n      keys: []\n").contains("not supported"));
        assert!(
            bad("  - aesgcm:\n      keys:\n      - name: a\n        secret: c2hvcnQ=\n")
                .contains("16 or 32 bytes")
        );
        assert!(bad("  - aesgcm:\n      keys: []\n").contains("at least one key"));
        assert!(
            bad("  - aesgcm:\n      keys:\n      - name: a\n        secret: '%%'\n").contains("not base64")
        );
        assert!(Encryption::parse("apiVersion: v1\nkind: ConfigMap\n").is_err());
        let generated = config_yaml("key1", &new_key_secret().unwrap());
        let enc = Encryption::parse(&generated).unwrap();
        assert!(enc
            .seal(SECRET_KEY, b"{}".to_vec())
            .unwrap()
            .starts_with(b"k8s:enc:aesgcm:v1:key1:"));
    }
}
