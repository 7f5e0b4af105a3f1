//! Authentication of the HTTP API: every endpoint except `/ping` and `/health` needs
//! credentials (docs/SECURITY.md), given as
//! - `Authorization: Basic base64(user:password)` (TDengine's REST API, curl `-u`),
//! - `Authorization: Token user:password` (InfluxDB 2.x clients and Telegraf, whose token is
//!   `user:password` for a 1.x-compatible server), or
//! - the query parameters `u` and `p` (InfluxDB 1.x).
//!
//! The layer logs the user in once (through the mnode) and caches the session token under a
//! keyed hash of the credentials, so a request costs no password hash. It then runs the
//! request as that user: the HTTP API's client forwards the token on every call, and the
//! servers check the user's privileges (READ for queries, WRITE for writes) themselves.
//! Missing or wrong credentials get `401` with `WWW-Authenticate`.

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tidal_client::auth::{now_ms, TOKEN_REFRESH_MARGIN_MS};
use tidal_client::Client;
use tidal_common::StatusCode as Code;
use tokio::sync::Semaphore;

/// Paths served without credentials (load balancers and probes call them).
pub const PUBLIC_PATHS: &[&str] = &["/ping", "/health"];
/// Cached sessions at most (the cache is emptied when full).
const SESSIONS_MAX: usize = 4096;
/// Logins through the mnode at once; more wait up to [`LOGIN_WAIT_MS`].
const LOGINS_IN_FLIGHT_MAX: usize = 8;
const LOGIN_WAIT_MS: u64 = 10_000;
/// Longest user name or password accepted from a request.
const CREDENTIAL_BYTES_MAX: usize = 256;

/// TLS and the connection limit of an HTTP listener.
#[derive(Clone)]
pub struct HttpSecurity {
    pub tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    pub limit: crate::server::net::ConnLimit,
}

impl Default for HttpSecurity {
    fn default() -> Self {
        HttpSecurity {
            tls: None,
            limit: crate::server::net::ConnLimit::new(crate::server::net::CONNECTIONS_MAX),
        }
    }
}

/// A cached login: the session token and its expiry (wall-clock ms).
type Session = (Arc<str>, i64);

pub struct HttpAuth {
    client: Client,
    /// Keys the cache's hashes, so the cache never holds anything a password can be
    /// recovered from by a plain dictionary attack.
    key: [u8; 32],
    sessions: Mutex<HashMap<[u8; 32], Session>>,
    logins: Semaphore,
}

impl HttpAuth {
    pub fn new(client: Client) -> Arc<HttpAuth> {
        Arc::new(HttpAuth {
            client,
            key: rand::random(),
            sessions: Mutex::new(HashMap::new()),
            logins: Semaphore::new(LOGINS_IN_FLIGHT_MAX),
        })
    }

    fn cache_key(&self, user: &str, password: &str) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(self.key);
        h.update((user.len() as u64).to_le_bytes());
        h.update(user.as_bytes());
        h.update(password.as_bytes());
        h.finalize().into()
    }

    /// The session token of these credentials, logging in if none is cached.
    async fn token(&self, user: &str, password: &str) -> Result<Arc<str>, Response> {
        let k = self.cache_key(user, password);
        if let Some((t, exp)) = self.sessions.lock().get(&k) {
            if *exp - TOKEN_REFRESH_MARGIN_MS > now_ms() {
                return Ok(t.clone());
            }
        }
        let _slot =
            tokio::time::timeout(Duration::from_millis(LOGIN_WAIT_MS), self.logins.acquire())
                .await
                .map_err(|_| {
                    error(
                        StatusCode::SERVICE_UNAVAILABLE,
                        Code::ResourceExhausted,
                        "too many logins in progress; retry",
                    )
                })?
                .map_err(|_| {
                    error(
                        StatusCode::SERVICE_UNAVAILABLE,
                        Code::ShuttingDown,
                        "the server is shutting down",
                    )
                })?;
        let (t, exp) = self
            .client
            .login_token(user, password)
            .await
            .map_err(|e| match e.code {
                Code::Unauthenticated | Code::TokenExpired => unauthorized(&e.message),
                Code::ResourceExhausted => {
                    error(StatusCode::SERVICE_UNAVAILABLE, e.code, e.message)
                }
                _ => error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    e.code,
                    format!("cannot log in: {}", e.message),
                ),
            })?;
        let mut s = self.sessions.lock();
        if s.len() >= SESSIONS_MAX {
            s.clear();
        }
        s.insert(k, (t.clone(), exp));
        Ok(t)
    }
}

fn error(status: StatusCode, code: Code, msg: impl Into<String>) -> Response {
    let msg = msg.into();
    // TDengine's REST shape (code, desc) and InfluxDB's (error, message) at once.
    let body = serde_json::json!({
        "code": code.as_u32(),
        "desc": msg,
        "error": msg,
        "message": msg,
    });
    (status, axum::Json(body)).into_response()
}

fn unauthorized(msg: &str) -> Response {
    let msg = if msg.starts_with("Unauthenticated") {
        msg.to_string()
    } else {
        format!("Unauthenticated: {msg}")
    };
    let mut r = error(StatusCode::UNAUTHORIZED, Code::Unauthenticated, msg);
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"tidal\""),
    );
    r
}

/// The `(user, password)` a request carries; `Ok(None)` if none.
pub fn credentials(req: &Request) -> Result<Option<(String, String)>, String> {
    let found = if let Some(v) = req.headers().get(header::AUTHORIZATION) {
        let v = v
            .to_str()
            .map_err(|_| "the Authorization header is not ASCII".to_string())?
            .trim();
        let (scheme, rest) = v.split_once(' ').unwrap_or((v, ""));
        let rest = rest.trim();
        let pair = if scheme.eq_ignore_ascii_case("basic") {
            let raw = base64::engine::general_purpose::STANDARD
                .decode(rest)
                .map_err(|_| "malformed Basic credentials: not base64".to_string())?;
            String::from_utf8(raw)
                .map_err(|_| "malformed Basic credentials: not UTF-8".to_string())?
        } else if scheme.eq_ignore_ascii_case("token") {
            rest.to_string()
        } else {
            return Err(format!(
                "unsupported Authorization scheme '{scheme}': use Basic (user:password) or Token user:password"
            ));
        };
        let (u, p) = pair
            .split_once(':')
            .ok_or_else(|| "credentials must be user:password".to_string())?;
        Some((u.to_string(), p.to_string()))
    } else {
        let q = req.uri().query().unwrap_or("");
        let mut user = None;
        let mut pass = None;
        for (k, v) in form_urlencoded(q) {
            match k.as_str() {
                "u" => user = Some(v),
                "p" => pass = Some(v),
                _ => {}
            }
        }
        match (user, pass) {
            (Some(u), Some(p)) => Some((u, p)),
            (None, None) => None,
            _ => return Err("give both u and p (user and password)".to_string()),
        }
    };
    if let Some((u, p)) = &found {
        if u.is_empty() {
            return Err("the user name is empty".to_string());
        }
        if u.len() > CREDENTIAL_BYTES_MAX || p.len() > CREDENTIAL_BYTES_MAX {
            return Err(format!(
                "user name or password longer than {CREDENTIAL_BYTES_MAX} bytes"
            ));
        }
    }
    Ok(found)
}

/// `k=v&...` pairs with `+` and `%XX` decoded (invalid escapes are kept as they are).
fn form_urlencoded(q: &str) -> Vec<(String, String)> {
    fn decode(s: &str) -> String {
        let b = s.as_bytes();
        let mut out = Vec::with_capacity(b.len());
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'+' => out.push(b' '),
                b'%' if i + 2 < b.len() => {
                    match std::str::from_utf8(&b[i + 1..i + 3])
                        .ok()
                        .and_then(|h| u8::from_str_radix(h, 16).ok())
                    {
                        Some(v) => {
                            out.push(v);
                            i += 2;
                        }
                        None => out.push(b'%'),
                    }
                }
                c => out.push(c),
            }
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    }
    q.split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (decode(k), decode(v))
        })
        .collect()
}

/// The middleware (wired around the whole router, so every handler is covered).
pub async fn require_auth(State(auth): State<Arc<HttpAuth>>, req: Request, next: Next) -> Response {
    if PUBLIC_PATHS.contains(&req.uri().path()) {
        return next.run(req).await;
    }
    let (user, password) = match credentials(&req) {
        Ok(Some(c)) => c,
        Ok(None) => {
            return unauthorized(
                "no credentials: use HTTP Basic auth (curl -u user:password), `Authorization: Token user:password`, or ?u=USER&p=PASSWORD",
            )
        }
        Err(e) => return unauthorized(&e),
    };
    let token = match auth.token(&user, &password).await {
        Ok(t) => t,
        Err(r) => return r,
    };
    tidal_client::auth::as_caller(token, async move {
        // A line protocol write needs WRITE on the whole database: refuse it as a whole (403)
        // rather than line by line.
        if let Some(db) = write_target(&req) {
            if let Err(r) = auth.check_write(&db).await {
                return r;
            }
        }
        next.run(req).await
    })
    .await
}

/// The database a line protocol write goes to (`/write?db=`, `/api/v2/write?bucket=db[/rp]`).
fn write_target(req: &Request) -> Option<String> {
    let key = match req.uri().path() {
        "/write" => "db",
        "/api/v2/write" => "bucket",
        _ => return None,
    };
    form_urlencoded(req.uri().query().unwrap_or(""))
        .into_iter()
        .find(|(k, v)| k == key && !v.is_empty())
        .map(|(_, v)| v.split('/').next().unwrap_or_default().to_string())
}

impl HttpAuth {
    /// PERMISSION_DENIED (and unknown-session) answers become 403 / 401; anything else is
    /// left for the handler to report.
    async fn check_write(&self, db: &str) -> Result<(), Response> {
        let mut a = match self.client.auth() {
            Ok(a) => a,
            Err(_) => return Ok(()),
        };
        let r = a
            .check_privilege(tidal_proto::v1::CheckPrivilegeRequest {
                db: db.to_string(),
                read: false,
                write: true,
            })
            .await;
        match r {
            Ok(_) => Ok(()),
            Err(s) => match tidal_proto::code_of(&s) {
                Code::PermissionDenied => Err(error(
                    StatusCode::FORBIDDEN,
                    Code::PermissionDenied,
                    s.message(),
                )),
                Code::Unauthenticated | Code::TokenExpired => Err(unauthorized(s.message())),
                _ => Ok(()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(uri: &str, auth: Option<&str>) -> Request {
        let mut b = axum::http::Request::builder().uri(uri);
        if let Some(a) = auth {
            b = b.header("authorization", a);
        }
        b.body(axum::body::Body::empty()).unwrap()
    }

    #[test]
    fn credential_forms() {
        let basic = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode("alice:pa:ss")
        );
        assert_eq!(
            credentials(&req("/rest/sql", Some(&basic))).unwrap(),
            Some(("alice".into(), "pa:ss".into()))
        );
        assert_eq!(
            credentials(&req("/api/v2/write", Some("Token bob:secret"))).unwrap(),
            Some(("bob".into(), "secret".into()))
        );
        assert_eq!(
            credentials(&req("/write?db=x&u=carol&p=a%20b%2B", None)).unwrap(),
            Some(("carol".into(), "a b+".into()))
        );
        assert_eq!(credentials(&req("/write?db=x", None)).unwrap(), None);
        for bad in ["Basic !!!", "Bearer xyz", "Token nocolon", "Basic"] {
            assert!(credentials(&req("/x", Some(bad))).is_err(), "{bad}");
        }
        assert!(credentials(&req("/write?u=only", None)).is_err());
        assert!(credentials(&req("/write?u=&p=x", None)).is_err());
        assert!(credentials(&req("/write?u=x&p=%", None)).is_ok());
    }
}
