//! ServiceAccount tokens: JWTs signed (ES256) with the cluster's service-account key, issued by
//! the `serviceaccounts/token` subresource (TokenRequest) and accepted as bearer tokens while
//! they are current, meant for this API server (audience), and the ServiceAccount — and the Pod
//! or Secret a token is bound to — still exist with the same uid. The claims are kube's, so
//! other verifiers read them through `/.well-known/openid-configuration` and `/openid/v1/jwks`.

use std::collections::BTreeMap;
use std::path::Path;

use base64::Engine;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::Digest;

use super::user::{UserInfo, AUTHENTICATED, SERVICE_ACCOUNTS, SERVICE_ACCOUNT_PREFIX};
use crate::store::cacher::WatchCache;
use crate::store::keys;

/// The issuer (and default audience) of every token, as a kubeadm cluster names itself.
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// The issuer of legacy tokens, those kept in `kubernetes.io/service-account-token` Secrets.
pub const LEGACY_ISSUER: &str = "kubernetes/serviceaccount";
/// The Secret type that holds a legacy token.
pub const LEGACY_SECRET_TYPE: &str = "kubernetes.io/service-account-token";
/// The shortest lifetime a TokenRequest may ask for (kube's ten minutes).
pub const MIN_EXPIRATION_SECONDS: i64 = 600;
/// The longest (kube's 2^32 seconds).
pub const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;
/// What a TokenRequest gets without `expirationSeconds`.
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;

/// Why the signing key is unusable.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The file cannot be read.
    #[error("service-account key {file}: {why}")]
    Read {
        /// The file.
        file: String,
        /// What went wrong.
        why: String,
    },
}

/// The object a token is bound to: its deletion ends the token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoundObject {
    /// Its name.
    pub name: String,
    /// Its uid.
    pub uid: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Ref {
    name: String,
    uid: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct KubeClaims {
    namespace: String,
    serviceaccount: Ref,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pod: Option<Ref>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    secret: Option<Ref>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Claims {
    aud: Vec<String>,
    exp: i64,
    iat: i64,
    nbf: i64,
    iss: String,
    jti: String,
    sub: String,
    #[serde(rename = "kubernetes.io")]
    kubernetes: KubeClaims,
}

/// The claims of a legacy token: no audience and no expiry; good while its Secret holds it and
/// its ServiceAccount exists.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct LegacyClaims {
    iss: String,
    #[serde(rename = "kubernetes.io/serviceaccount/namespace")]
    namespace: String,
    #[serde(rename = "kubernetes.io/serviceaccount/secret.name")]
    secret_name: String,
    #[serde(rename = "kubernetes.io/serviceaccount/service-account.name")]
    service_account_name: String,
    #[serde(rename = "kubernetes.io/serviceaccount/service-account.uid")]
    service_account_uid: String,
    sub: String,
}

/// What a TokenRequest asks for.
#[derive(Debug, Clone)]
pub struct TokenSpec<'a> {
    /// The ServiceAccount's namespace.
    pub namespace: &'a str,
    /// Its name.
    pub name: &'a str,
    /// Its uid.
    pub uid: &'a str,
    /// Who the token is for.
    pub audiences: &'a [String],
    /// Its lifetime.
    pub expiration_seconds: i64,
    /// A Pod it is bound to.
    pub pod: Option<BoundObject>,
    /// A Secret it is bound to.
    pub secret: Option<BoundObject>,
}

/// Issues and verifies ServiceAccount tokens.
#[derive(Clone)]
pub struct ServiceAccountTokens {
    encoding: EncodingKey,
    decoding: DecodingKey,
    kid: String,
    jwk: Value,
}

impl std::fmt::Debug for ServiceAccountTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceAccountTokens")
            .field("kid", &self.kid)
            .finish()
    }
}

fn b64url(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

impl ServiceAccountTokens {
    /// Loads the ECDSA P-256 signing key (PKCS#8 PEM) at `path`.
    pub fn load(path: &Path) -> Result<ServiceAccountTokens, KeyError> {
        let err = |why: String| KeyError::Read {
            file: path.display().to_string(),
            why,
        };
        let pem = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        let pair = rcgen::KeyPair::from_pem(&pem).map_err(|e| err(e.to_string()))?;
        if pair.algorithm() != &rcgen::PKCS_ECDSA_P256_SHA256 {
            return Err(err("not an ECDSA P-256 key".into()));
        }
        let encoding = EncodingKey::from_ec_pem(pem.as_bytes()).map_err(|e| err(e.to_string()))?;
        let decoding =
            DecodingKey::from_ec_pem(pair.public_key_pem().as_bytes()).map_err(|e| err(e.to_string()))?;
        // The raw public key is the uncompressed point 0x04 || X || Y.
        let point = pair.public_key_raw();
        if point.len() != 65 {
            return Err(err("unexpected public key encoding".into()));
        }
        let kid = b64url(&sha2::Sha256::digest(
            rcgen::PublicKeyData::subject_public_key_info(&pair),
        ));
        let jwk = json!({
            "use": "sig",
            "kty": "EC",
            "kid": kid,
            "crv": "P-256",
            "alg": "ES256",
            "x": b64url(&point[1..33]),
            "y": b64url(&point[33..65]),
        });
        Ok(ServiceAccountTokens {
            encoding,
            decoding,
            kid,
            jwk,
        })
    }

    /// The public key as a JSON Web Key Set (`/openid/v1/jwks`).
    pub fn jwks(&self) -> Value {
        json!({"keys": [self.jwk]})
    }

    /// A signed token for `spec`, and when it expires (Unix seconds).
    pub fn issue(&self, spec: &TokenSpec<'_>) -> Result<(String, i64), String> {
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        let exp = now + spec.expiration_seconds;
        let claims = Claims {
            aud: spec.audiences.to_vec(),
            exp,
            iat: now,
            nbf: now,
            iss: ISSUER.to_string(),
            jti: uuid::Uuid::new_v4().to_string(),
            sub: format!("{SERVICE_ACCOUNT_PREFIX}{}:{}", spec.namespace, spec.name),
            kubernetes: KubeClaims {
                namespace: spec.namespace.to_string(),
                serviceaccount: Ref {
                    name: spec.name.to_string(),
                    uid: spec.uid.to_string(),
                },
                pod: spec.pod.as_ref().map(|p| Ref {
                    name: p.name.clone(),
                    uid: p.uid.clone(),
                }),
                secret: spec.secret.as_ref().map(|s| Ref {
                    name: s.name.clone(),
                    uid: s.uid.clone(),
                }),
            },
        };
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        let token = jsonwebtoken::encode(&header, &claims, &self.encoding).map_err(|e| e.to_string())?;
        Ok((token, exp))
    }

    /// A legacy token for the ServiceAccount `namespace/name` (uid `uid`), to be kept in the
    /// Secret `secret_name`, as kube-controller-manager's tokens controller signs them.
    pub fn issue_legacy(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        secret_name: &str,
    ) -> Result<String, String> {
        let claims = LegacyClaims {
            iss: LEGACY_ISSUER.to_string(),
            namespace: namespace.to_string(),
            secret_name: secret_name.to_string(),
            service_account_name: name.to_string(),
            service_account_uid: uid.to_string(),
            sub: format!("{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"),
        };
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, &claims, &self.encoding).map_err(|e| e.to_string())
    }

    /// The user a token names: `None` when it is not one of ours (another authenticator may
    /// know it), `Some(Err)` when it is ours and no longer good.
    pub fn verify(&self, token: &str, cache: &WatchCache) -> Option<Result<UserInfo, String>> {
        let header = jsonwebtoken::decode_header(token).ok()?;
        if header.kid.as_deref().is_some_and(|k| k != self.kid) {
            return None;
        }
        if issuer(token).as_deref() == Some(LEGACY_ISSUER) {
            return Some(self.verify_legacy(token, cache));
        }
        let mut validation = Validation::new(Algorithm::ES256);
        validation.set_issuer(&[ISSUER]);
        validation.set_audience(&[ISSUER]);
        validation.validate_nbf = true;
        let claims = match jsonwebtoken::decode::<Claims>(token, &self.decoding, &validation) {
            Ok(data) => data.claims,
            Err(e) => return Some(Err(format!("service account token: {e}"))),
        };
        Some(self.still_bound(&claims, cache))
    }

    /// A legacy token is good while it is signed by our key, its Secret (not being deleted)
    /// still holds exactly it, and its ServiceAccount exists with the uid it names.
    fn verify_legacy(&self, token: &str, cache: &WatchCache) -> Result<UserInfo, String> {
        let mut validation = Validation::new(Algorithm::ES256);
        validation.set_issuer(&[LEGACY_ISSUER]);
        validation.validate_aud = false;
        validation.validate_exp = false;
        validation.required_spec_claims.clear();
        let claims = jsonwebtoken::decode::<LegacyClaims>(token, &self.decoding, &validation)
            .map_err(|e| format!("service account token: {e}"))?
            .claims;
        let ns = claims.namespace.as_str();
        let read = |plural: &str, name: &str| -> Result<Value, String> {
            cache
                .get(&keys::object("", plural, Some(ns), name))
                .map_err(|e| e.to_string())?
                .map(|o| o.value())
                .ok_or_else(|| format!("{plural} {ns}/{name} has been deleted"))
        };
        let secret = read("secrets", &claims.secret_name)?;
        if secret["metadata"].get("deletionTimestamp").is_some() {
            return Err("Token has been invalidated".into());
        }
        let held = secret["data"]["token"]
            .as_str()
            .and_then(|t| base64::engine::general_purpose::STANDARD.decode(t).ok());
        if held.as_deref() != Some(token.as_bytes()) {
            return Err("Token does not match server's copy".into());
        }
        let account = read("serviceaccounts", &claims.service_account_name)?;
        if account["metadata"]["uid"].as_str() != Some(claims.service_account_uid.as_str()) {
            return Err(format!(
                "ServiceAccount UID ({}) does not match claim ({})",
                account["metadata"]["uid"].as_str().unwrap_or_default(),
                claims.service_account_uid
            ));
        }
        if account["metadata"].get("deletionTimestamp").is_some() {
            return Err("Token has been invalidated".into());
        }
        Ok(UserInfo {
            name: claims.sub,
            uid: claims.service_account_uid,
            groups: vec![
                SERVICE_ACCOUNTS.to_string(),
                format!("{SERVICE_ACCOUNTS}:{ns}"),
                AUTHENTICATED.to_string(),
            ],
            extra: BTreeMap::new(),
        })
    }

    fn still_bound(&self, claims: &Claims, cache: &WatchCache) -> Result<UserInfo, String> {
        let k = &claims.kubernetes;
        let ns = k.namespace.as_str();
        let alive = |plural: &str, r: &Ref| -> Result<(), String> {
            let key = keys::object("", plural, Some(ns), &r.name);
            let obj = cache
                .get(&key)
                .map_err(|e| e.to_string())?
                .ok_or_else(|| format!("{plural} {ns}/{} has been deleted", r.name))?;
            let uid = obj.value()["metadata"]["uid"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            if uid == r.uid {
                Ok(())
            } else {
                Err(format!(
                    "{plural} {ns}/{} has been deleted (its uid changed)",
                    r.name
                ))
            }
        };
        alive("serviceaccounts", &k.serviceaccount)?;
        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        if let Some(pod) = &k.pod {
            alive("pods", pod)?;
            extra.insert(
                "authentication.kubernetes.io/pod-name".into(),
                vec![pod.name.clone()],
            );
            extra.insert(
                "authentication.kubernetes.io/pod-uid".into(),
                vec![pod.uid.clone()],
            );
        }
        if let Some(secret) = &k.secret {
            alive("secrets", secret)?;
        }
        extra.insert(
            "authentication.kubernetes.io/credential-id".into(),
            vec![format!("JTI={}", claims.jti)],
        );
        Ok(UserInfo {
            name: format!("{SERVICE_ACCOUNT_PREFIX}{ns}:{}", k.serviceaccount.name),
            uid: k.serviceaccount.uid.clone(),
            groups: vec![
                SERVICE_ACCOUNTS.to_string(),
                format!("{SERVICE_ACCOUNTS}:{ns}"),
                AUTHENTICATED.to_string(),
            ],
            extra,
        })
    }
}

/// The `iss` claim of a JWT, read without checking it (only to choose how to check it).
fn issuer(token: &str) -> Option<String> {
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .ok()?;
    let claims: Value = serde_json::from_slice(&bytes).ok()?;
    claims["iss"].as_str().map(str::to_string)
}

/// The OpenID discovery document (`/.well-known/openid-configuration`); `host` is the
/// address the client used.
pub fn openid_configuration(host: &str) -> Value {
    json!({
        "issuer": ISSUER,
        "jwks_uri": format!("https://{host}/openid/v1/jwks"),
        "response_types_supported": ["id_token"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["ES256"],
    })
}
