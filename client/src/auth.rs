//! Credentials and session tokens (docs/SECURITY.md).
//!
//! Owns the token format that every Tidal process shares, the credentials a [`crate::Client`]
//! authenticates with, and the *caller* scope a server uses to act on behalf of the user whose
//! request it is serving.
//!
//! Token: `base64url(claims JSON) "." base64url(HMAC-SHA256(cluster secret, claims JSON))`.
//! The mnode issues user tokens at login; any process holding the cluster secret (the mnode
//! and registered data nodes) mints internal tokens for its own calls. Verification needs only
//! the secret and a clock, so no request ever hashes a password. What a user token may do is
//! not in the token: servers look the user up in their user table, so GRANT/REVOKE/DROP USER
//! apply to live sessions; `v` is the user's password version, so ALTER USER ... PASS ends
//! every session of that user.

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use std::sync::Arc;

/// gRPC metadata key of the token (`authorization: Bearer <token>`).
pub const AUTH_METADATA_KEY: &str = "authorization";
/// How long a user session token is valid; clients log in again before it runs out.
pub const USER_TOKEN_TTL_MS: i64 = 60 * 60 * 1000;
/// How long an internal (cluster secret) token is valid; minted locally, so short is cheap.
pub const INTERNAL_TOKEN_TTL_MS: i64 = 5 * 60 * 1000;
/// A token whose remaining validity is below this is replaced before it is used.
pub const TOKEN_REFRESH_MARGIN_MS: i64 = 60 * 1000;
/// Longest token accepted (a real one is ~150 bytes); bounds the work of a bad request.
pub const TOKEN_BYTES_MAX: usize = 1024;
/// Clock skew tolerated between the process that signed a token and the one verifying it.
pub const CLOCK_SKEW_MS: i64 = 60 * 1000;
/// The default user and password, as `taos` has them.
pub const DEFAULT_USER: &str = "root";
pub const DEFAULT_PASSWORD: &str = "taosdata";

type HmacSha256 = Hmac<Sha256>;

/// Who a token speaks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TokenKind {
    /// A user session (issued by the mnode at login).
    #[serde(rename = "u")]
    User,
    /// A cluster member's own call (minted with the cluster secret).
    #[serde(rename = "i")]
    Internal,
}

/// The signed content of a token.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// User name, or the cluster member's name for internal tokens (e.g. `dnode-3`).
    #[serde(rename = "u")]
    pub subject: String,
    #[serde(rename = "k")]
    pub kind: TokenKind,
    /// The user's password version (0 for internal tokens).
    #[serde(rename = "v")]
    pub version: u64,
    /// Expiry, wall-clock ms since the epoch.
    #[serde(rename = "e")]
    pub expires_ms: i64,
}

/// Why a token was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("malformed token: {0}")]
    Malformed(&'static str),
    #[error("token signature does not verify (signed by another cluster, or altered)")]
    BadSignature,
    #[error("token expired {0} ms ago: log in again")]
    Expired(i64),
}

/// Wall-clock ms since the epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn mac(secret: &[u8]) -> HmacSha256 {
    // HMAC takes a key of any length; `new_from_slice` cannot fail for it.
    match HmacSha256::new_from_slice(secret) {
        Ok(m) => m,
        Err(_) => unreachable!("HMAC accepts keys of every length"),
    }
}

/// Signs `claims` with the cluster secret.
pub fn sign(secret: &[u8], claims: &Claims) -> String {
    let body = serde_json::to_vec(claims).unwrap_or_default();
    let mut m = mac(secret);
    m.update(&body);
    let tag = m.finalize().into_bytes();
    format!("{}.{}", B64.encode(&body), B64.encode(tag))
}

/// Checks a token's signature and expiry; returns its claims.
pub fn verify(secret: &[u8], token: &str, now_ms: i64) -> Result<Claims, TokenError> {
    if token.len() > TOKEN_BYTES_MAX {
        return Err(TokenError::Malformed("longer than the limit"));
    }
    let (body, tag) = token
        .split_once('.')
        .ok_or(TokenError::Malformed("no signature part"))?;
    let body = B64
        .decode(body)
        .map_err(|_| TokenError::Malformed("claims are not base64url"))?;
    let tag = B64
        .decode(tag)
        .map_err(|_| TokenError::Malformed("signature is not base64url"))?;
    let mut m = mac(secret);
    m.update(&body);
    // Constant-time comparison.
    m.verify_slice(&tag).map_err(|_| TokenError::BadSignature)?;
    let claims: Claims =
        serde_json::from_slice(&body).map_err(|_| TokenError::Malformed("claims are not JSON"))?;
    unexpired(&claims, now_ms)?;
    Ok(claims)
}

/// Whether claims whose signature checked out are still valid at `now_ms` (with
/// [`CLOCK_SKEW_MS`] of grace): [`verify`]'s last step, for a server that remembers
/// verified claims.
pub fn unexpired(claims: &Claims, now_ms: i64) -> Result<(), TokenError> {
    if claims.expires_ms + CLOCK_SKEW_MS < now_ms {
        return Err(TokenError::Expired(now_ms - claims.expires_ms));
    }
    Ok(())
}

/// The subject of a token whose signature was already checked elsewhere (or does not
/// matter: used only to keep caches apart, never to grant anything).
pub fn unverified_subject(token: &str) -> Option<String> {
    let body = token.split_once('.')?.0;
    let body = B64.decode(body).ok()?;
    serde_json::from_slice::<Claims>(&body)
        .ok()
        .map(|c| c.subject)
}

/// An internal token for cluster member `name`, valid for [`INTERNAL_TOKEN_TTL_MS`].
pub fn internal_token(secret: &[u8], name: &str) -> (String, i64) {
    let expires_ms = now_ms() + INTERNAL_TOKEN_TTL_MS;
    let token = sign(
        secret,
        &Claims {
            subject: name.to_string(),
            kind: TokenKind::Internal,
            version: 0,
            expires_ms,
        },
    );
    (token, expires_ms)
}

/// How a [`crate::Client`] authenticates its calls.
#[derive(Clone)]
pub enum Credentials {
    /// Log in as a user (the default: root / taosdata).
    Password { user: String, password: String },
    /// A cluster member: mint internal tokens with the cluster secret.
    ClusterSecret { name: String, secret: Arc<[u8]> },
    /// No identity of its own: each call carries the token of the caller in whose scope
    /// ([`as_caller`]) it is made, and a call outside such a scope carries none (and is
    /// refused). Servers use this for the SQL frontend and the HTTP API, so that every
    /// request runs with exactly its user's privileges.
    Forward,
}

impl Default for Credentials {
    fn default() -> Self {
        Credentials::Password {
            user: DEFAULT_USER.to_string(),
            password: DEFAULT_PASSWORD.to_string(),
        }
    }
}

impl std::fmt::Debug for Credentials {
    // Never prints a password or the secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credentials::Password { user, .. } => write!(f, "Password {{ user: {user:?} }}"),
            Credentials::ClusterSecret { name, .. } => write!(f, "ClusterSecret {{ {name:?} }}"),
            Credentials::Forward => write!(f, "Forward"),
        }
    }
}

/// How to connect: credentials and, for TLS, the CA certificate(s) to trust; where queries
/// are planned.
#[derive(Clone, Debug)]
pub struct ConnectOptions {
    pub credentials: Credentials,
    /// PEM of the CA that signed the servers' certificates; `Some` switches to TLS.
    pub tls_ca_pem: Option<Vec<u8>>,
    /// The name to check the servers' certificates against (default: the host of each
    /// address).
    pub tls_domain: Option<String>,
    /// Whether [`crate::Client::execute`] plans a gathered SELECT itself and sends its
    /// fragments straight to the data nodes (default `true`; see [`crate::query`]). `false`
    /// sends every statement to the server, where SHOW QUERIES lists it and KILL QUERY
    /// reaches it.
    pub plan_queries_locally: bool,
    /// Whether query fragments go to the data nodes as frames on plain TCP connections
    /// (default `true`; see [`crate::frames`]) rather than over gRPC. Without TLS only: with
    /// TLS every call is gRPC.
    pub fragment_frames: bool,
    /// Whether row blocks ([`crate::Client::write_blocks`], the `Writer`) go to the data
    /// nodes as frames on plain TCP connections (default `true`; see [`crate::frames`])
    /// rather than over gRPC. Without TLS only.
    pub write_frames: bool,
}

impl Default for ConnectOptions {
    fn default() -> ConnectOptions {
        ConnectOptions {
            credentials: Credentials::default(),
            tls_ca_pem: None,
            tls_domain: None,
            plan_queries_locally: true,
            fragment_frames: true,
            write_frames: true,
        }
    }
}

impl ConnectOptions {
    pub fn user(user: &str, password: &str) -> ConnectOptions {
        ConnectOptions {
            credentials: Credentials::Password {
                user: user.to_string(),
                password: password.to_string(),
            },
            ..Default::default()
        }
    }

    pub fn with_credentials(mut self, c: Credentials) -> ConnectOptions {
        self.credentials = c;
        self
    }

    pub fn with_tls_ca(mut self, pem: Vec<u8>) -> ConnectOptions {
        self.tls_ca_pem = Some(pem);
        self
    }

    /// See [`ConnectOptions::plan_queries_locally`].
    pub fn plan_queries_locally(mut self, yes: bool) -> ConnectOptions {
        self.plan_queries_locally = yes;
        self
    }

    /// See [`ConnectOptions::fragment_frames`].
    pub fn fragment_frames(mut self, yes: bool) -> ConnectOptions {
        self.fragment_frames = yes;
        self
    }

    /// See [`ConnectOptions::write_frames`].
    pub fn write_frames(mut self, yes: bool) -> ConnectOptions {
        self.write_frames = yes;
        self
    }
}

tokio::task_local! {
    static CALLER: Arc<str>;
}

/// Runs `f` on behalf of the caller whose token is `token`: calls that [`Credentials::Forward`]
/// clients make inside it carry that token. (Client stubs capture the token when created, so
/// a stub created in the scope keeps it even if used from a spawned task.)
pub async fn as_caller<F: std::future::Future>(token: Arc<str>, f: F) -> F::Output {
    CALLER.scope(token, f).await
}

/// The token of the caller in whose scope this runs, if any.
pub fn current_caller() -> Option<Arc<str>> {
    CALLER.try_with(|t| t.clone()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(exp: i64) -> Claims {
        Claims {
            subject: "alice".into(),
            kind: TokenKind::User,
            version: 7,
            expires_ms: exp,
        }
    }

    #[test]
    fn sign_and_verify() {
        let secret = b"0123456789abcdef0123456789abcdef";
        let now = now_ms();
        let t = sign(secret, &claims(now + 1000));
        assert_eq!(verify(secret, &t, now).unwrap(), claims(now + 1000));
        assert_eq!(
            verify(b"another secret..", &t, now),
            Err(TokenError::BadSignature)
        );
        // Expired beyond the skew allowance.
        let old = sign(secret, &claims(now - CLOCK_SKEW_MS - 10));
        assert!(matches!(
            verify(secret, &old, now),
            Err(TokenError::Expired(_))
        ));
    }

    #[test]
    fn altered_or_garbage_tokens_are_refused() {
        let secret = b"s";
        let now = now_ms();
        let t = sign(secret, &claims(now + 1000));
        let (body, tag) = t.split_once('.').unwrap();
        // Claims changed to another user, signature kept.
        let mut forged = claims(now + 1000);
        forged.subject = "root".into();
        let forged_body = B64.encode(serde_json::to_vec(&forged).unwrap());
        assert_eq!(
            verify(secret, &format!("{forged_body}.{tag}"), now),
            Err(TokenError::BadSignature)
        );
        for bad in [
            "",
            ".",
            "abc",
            "!!!.???",
            &format!("{body}."),
            &"a".repeat(TOKEN_BYTES_MAX + 1),
        ] {
            assert!(verify(secret, bad, now).is_err(), "{bad}");
        }
    }

    #[test]
    fn subject_without_the_secret() {
        let t = sign(b"k", &claims(now_ms() + 1000));
        assert_eq!(unverified_subject(&t).as_deref(), Some("alice"));
        assert_eq!(unverified_subject("garbage"), None);
    }

    #[test]
    fn debug_never_prints_secrets() {
        let c = Credentials::Password {
            user: "u".into(),
            password: "hunter2".into(),
        };
        assert!(!format!("{c:?}").contains("hunter2"));
        let c = Credentials::ClusterSecret {
            name: "dnode-1".into(),
            secret: Arc::from(&b"topsecret"[..]),
        };
        assert!(!format!("{c:?}").contains("topsecret"));
    }

    #[tokio::test]
    async fn caller_scope() {
        assert!(current_caller().is_none());
        let t: Arc<str> = Arc::from("tok");
        let seen = as_caller(t, async { current_caller() }).await;
        assert_eq!(seen.as_deref(), Some("tok"));
    }
}
