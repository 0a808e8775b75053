//! Authentication: who a request is from. The authenticators are tried in kube-apiserver's
//! order — a client certificate verified against the cluster CA (`x509`), then a bearer token
//! (`token_file`) — and the first that recognises the request names its [`UserInfo`]. A
//! request with no credentials is anonymous (`system:anonymous` in `system:unauthenticated`)
//! on the public paths only and refused (`401`) elsewhere, as kube-apiserver's anonymous
//! authenticator limited to `/livez`, `/readyz`, `/healthz` and `/version`; so is a request
//! whose credentials are all refused.
//!
//! *Invariant:* never sees the request body and never writes; it reads only the local watch
//! cache (does a token's ServiceAccount still exist). What it decides is final for the request
//! (the authorization filter only reads the user it sets).

pub mod service_account;
pub mod token_file;
pub mod user;
pub mod x509;

use std::sync::{Arc, OnceLock};

use axum::http::{header, HeaderMap};
use rustls_pki_types::CertificateDer;

use crate::pki::tls::ApiTls;
use crate::store::cacher::WatchCache;
pub use service_account::ServiceAccountTokens;
pub use token_file::TokenFile;
pub use user::UserInfo;
use user::{AUTHENTICATED, SYSTEM_MASTERS};

/// What a request knows about its connection: the client's certificate chain (unverified, leaf
/// first; empty without one) and the verdict on it, computed once per connection.
#[derive(Debug, Clone, Default)]
pub struct ClientConnection {
    /// The certificates the client presented in its TLS handshake.
    pub chain: Arc<Vec<CertificateDer<'static>>>,
    verdict: Arc<OnceLock<Result<UserInfo, String>>>,
}

impl ClientConnection {
    /// A connection whose client presented `chain`.
    pub fn new(chain: Vec<CertificateDer<'static>>) -> ClientConnection {
        ClientConnection {
            chain: Arc::new(chain),
            verdict: Arc::default(),
        }
    }
}

/// The paths a request without credentials may reach (then as `system:anonymous`, still
/// subject to authorization), with their sub-paths (`/livez/ping`).
pub const ANONYMOUS_PATHS: &[&str] = &["/livez", "/readyz", "/healthz", "/version"];

/// The user of every request to a replica started with `--insecure`, as kube-apiserver's
/// former insecure port: a member of `system:masters`.
pub fn insecure_superuser() -> UserInfo {
    UserInfo {
        name: "system:unsecured".into(),
        groups: vec![SYSTEM_MASTERS.into(), AUTHENTICATED.into()],
        ..UserInfo::default()
    }
}

/// The replica's authenticators.
#[derive(Clone)]
pub enum Authenticator {
    /// `--insecure`: every request is [`insecure_superuser`].
    Insecure,
    /// Certificates and tokens.
    Secure(Box<Authenticators>),
}

/// The authenticators of a secure replica.
#[derive(Clone)]
pub struct Authenticators {
    /// Verifies client certificates.
    pub tls: ApiTls,
    /// The static token file, if configured.
    pub tokens: Option<TokenFile>,
    /// ServiceAccount tokens, if a signing key is configured.
    pub service_accounts: Option<ServiceAccountTokens>,
    /// Where a token's ServiceAccount (and bound Pod or Secret) is looked up.
    pub cache: WatchCache,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Authenticator::Insecure => f.write_str("Authenticator::Insecure"),
            Authenticator::Secure(a) => f
                .debug_struct("Authenticator::Secure")
                .field("tokens", &a.tokens.is_some())
                .field("service_accounts", &a.service_accounts.is_some())
                .finish(),
        }
    }
}

impl Authenticator {
    /// The user `headers` and `conn` prove, or why the request is `401`.
    pub fn authenticate(
        &self,
        headers: &HeaderMap,
        conn: Option<&ClientConnection>,
        path: &str,
    ) -> Result<UserInfo, String> {
        let tls = match self {
            Authenticator::Insecure => return Ok(insecure_superuser()),
            Authenticator::Secure(a) => &a.tls,
        };
        let mut refused = None;
        if let Some(conn) = conn.filter(|c| !c.chain.is_empty()) {
            match conn.verdict.get_or_init(|| x509::authenticate(tls, &conn.chain)) {
                Ok(user) => return Ok(user.clone()),
                Err(e) => refused = Some(format!("client certificate: {e}")),
            }
        }
        if let Some(token) = bearer(headers) {
            match self.authenticate_token(token) {
                Ok(Some(user)) => return Ok(user),
                Ok(None) => refused = Some("invalid bearer token".into()),
                Err(e) => refused = Some(e),
            }
        }
        match refused {
            Some(why) => Err(why),
            None if is_anonymous_path(path) => Ok(UserInfo::anonymous()),
            None => Err("no credentials".into()),
        }
    }
}

impl Authenticator {
    /// The user a bearer token names (a TokenReview's question): `Ok(None)` when no
    /// authenticator knows it, `Err` when one knows it and refuses it (an expired
    /// ServiceAccount token, one whose ServiceAccount was deleted).
    pub fn authenticate_token(&self, token: &str) -> Result<Option<UserInfo>, String> {
        let Authenticator::Secure(a) = self else {
            return Ok(None);
        };
        if let Some(user) = a.tokens.as_ref().and_then(|t| t.user(token)) {
            return Ok(Some(user));
        }
        match a
            .service_accounts
            .as_ref()
            .and_then(|sa| sa.verify(token, &a.cache))
        {
            Some(verdict) => verdict.map(Some),
            None => Ok(None),
        }
    }

    /// The ServiceAccount token issuer, when one is configured.
    pub fn service_accounts(&self) -> Option<&ServiceAccountTokens> {
        match self {
            Authenticator::Secure(a) => a.service_accounts.as_ref(),
            Authenticator::Insecure => None,
        }
    }
}

/// The bearer token of an `Authorization: Bearer ...` header.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

fn is_anonymous_path(path: &str) -> bool {
    ANONYMOUS_PATHS.iter().any(|p| {
        path.strip_prefix(p)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    })
}
