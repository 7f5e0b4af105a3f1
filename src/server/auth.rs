//! Who is calling, and may they: token verification, the principal of a request and the
//! privilege checks every service makes (docs/SECURITY.md).
//!
//! Owns:
//! - [`Verifier`]: the cluster secret and the user table a server verifies tokens against.
//!   The mnode refreshes its table from the catalog after every user change; a data node
//!   receives the secret when it registers and the table with its heartbeats whenever the
//!   mnode's auth epoch moved, so a GRANT, REVOKE, DROP USER or password change reaches every
//!   data node within one heartbeat interval (1 s by default).
//! - [`AuthLayer`]: a tower layer in front of every gRPC service. It lets `Auth/Login`
//!   through, refuses requests over the connection limit, verifies the token of every other
//!   request, and runs the request with its [`Principal`] as a request extension and its
//!   token as the caller (so the SQL frontend's calls to other nodes act as that user, and
//!   are authorized where the data is).
//! - [`Principal`]: the checks (`require_read` ...) the services make per request.

use parking_lot::RwLock;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::task::{Context, Poll};
use tidal_client::auth::{self as token, Claims, TokenError, TokenKind, AUTH_METADATA_KEY};
use tidal_common::StatusCode;
use tidal_mnode::{AuthTable, Privilege, UserAuth};
use tidal_proto::status_error;
use tidal_proto::v1;
use tonic::Status;

/// The gRPC path of the one call that needs no token.
pub const LOGIN_PATH: &str = "/tidal.v1.Auth/Login";

/// The identity a request runs as.
#[derive(Clone, Debug)]
pub enum Principal {
    /// A cluster member (token minted with the cluster secret): may do everything.
    Internal {
        name: String,
    },
    User(Arc<UserAuth>),
}

impl Principal {
    pub fn name(&self) -> &str {
        match self {
            Principal::Internal { name } => name,
            Principal::User(u) => &u.name,
        }
    }

    pub fn is_superuser(&self) -> bool {
        match self {
            Principal::Internal { .. } => true,
            Principal::User(u) => u.superuser,
        }
    }

    /// The user's privilege on `db` (its own grant combined with a grant on `*`).
    pub fn privilege(&self, db: &str) -> Privilege {
        match self {
            Principal::Internal { .. } => Privilege::ALL,
            Principal::User(u) if u.superuser => Privilege::ALL,
            Principal::User(u) => {
                let db = db.to_ascii_lowercase();
                let own = u.privileges.get(&db).copied().unwrap_or_default();
                own.with(u.privileges.get("*").copied().unwrap_or_default())
            }
        }
    }

    fn denied(&self, what: &str, db: &str) -> Status {
        status_error(
            StatusCode::PermissionDenied,
            format!(
                "PermissionDenied: user {} has no {what} on {}",
                self.name(),
                db.to_ascii_lowercase()
            ),
        )
    }

    /// SELECT, SHOW, DESCRIBE on `db`.
    pub fn require_read(&self, db: &str) -> Result<(), Status> {
        if self.privilege(db).read {
            Ok(())
        } else {
            Err(self.denied("READ", db))
        }
    }

    /// INSERT, DELETE, table DDL on `db`.
    pub fn require_write(&self, db: &str) -> Result<(), Status> {
        if self.privilege(db).write {
            Ok(())
        } else {
            Err(self.denied("WRITE", db))
        }
    }

    /// Metadata both readers and writers need (routes, schemas, table lookups).
    pub fn require_any(&self, db: &str) -> Result<(), Status> {
        if self.privilege(db).is_empty() {
            Err(self.denied("READ or WRITE privilege", db))
        } else {
            Ok(())
        }
    }

    pub fn can_see(&self, db: &str) -> bool {
        !self.privilege(db).is_empty()
    }

    /// User management, database DDL, cluster membership.
    pub fn require_superuser(&self, what: &str) -> Result<(), Status> {
        if self.is_superuser() {
            Ok(())
        } else {
            Err(status_error(
                StatusCode::PermissionDenied,
                format!(
                    "PermissionDenied: only a superuser may {what} (user {} is not one)",
                    self.name()
                ),
            ))
        }
    }

    /// Calls only cluster members make.
    pub fn require_internal(&self, what: &str) -> Result<(), Status> {
        match self {
            Principal::Internal { .. } => Ok(()),
            Principal::User(u) => Err(status_error(
                StatusCode::PermissionDenied,
                format!(
                    "PermissionDenied: {what} is for cluster members, not user {}",
                    u.name
                ),
            )),
        }
    }
}

/// The principal of a request (set by [`AuthLayer`]).
pub fn principal<T>(req: &tonic::Request<T>) -> Result<Principal, Status> {
    req.extensions().get::<Principal>().cloned().ok_or_else(|| {
        status_error(
            StatusCode::Unauthenticated,
            "Unauthenticated: the request carries no verified identity",
        )
    })
}

/// Runs `f` for a request of `token`'s user: forwarding clients send `token` on its calls.
pub async fn run_as<F: std::future::Future>(token: Arc<str>, f: F) -> F::Output {
    tidal_client::auth::as_caller(token, f).await
}

#[derive(Default)]
struct UserTable {
    epoch: u64,
    users: HashMap<String, Arc<UserAuth>>,
}

/// Most tokens a [`Verifier`] remembers as verified; when full it starts over.
pub const VERIFIED_TOKENS_MAX: usize = 4096;

/// What a server checks tokens against.
#[derive(Default)]
pub struct Verifier {
    secret: RwLock<Option<Arc<[u8]>>>,
    table: RwLock<Option<UserTable>>,
    /// Tokens whose signature checked out, with the secret they were checked against: a
    /// client sends the same token on every call, and the base64, HMAC and JSON of checking
    /// it again were an eighth of a data node's CPU on a point query. Only the signature and
    /// claims are remembered; expiry and the user table are checked on every call.
    verified: RwLock<VerifiedTokens>,
}

/// Token → (the secret it was verified against, its claims).
type VerifiedTokens = HashMap<Box<str>, (Arc<[u8]>, Claims), foldhash::fast::RandomState>;

fn unauthenticated(msg: impl std::fmt::Display) -> Status {
    status_error(
        StatusCode::Unauthenticated,
        format!("Unauthenticated: {msg}"),
    )
}

impl Verifier {
    pub fn new() -> Arc<Verifier> {
        Arc::new(Verifier::default())
    }

    /// Sets the cluster secret. A different secret means another cluster: the user table of
    /// the old one is dropped.
    pub fn set_secret(&self, secret: &[u8]) {
        let mut cur = self.secret.write();
        match cur.as_deref() {
            // The same secret (every heartbeat repeats it): tokens verified stay verified.
            Some(c) if c == secret => return,
            Some(_) => *self.table.write() = None,
            None => {}
        }
        self.verified.write().clear();
        *cur = Some(Arc::from(secret));
    }

    pub fn secret(&self) -> Option<Arc<[u8]>> {
        self.secret.read().clone()
    }

    /// Replaces the user table (the mnode after a change, a data node after a push or a
    /// heartbeat) unless the one held is newer: a heartbeat answer computed before a change
    /// may arrive after the push of that change.
    pub fn set_table(&self, t: AuthTable) {
        if self
            .table
            .read()
            .as_ref()
            .is_some_and(|cur| cur.epoch > t.epoch)
        {
            return;
        }
        let users = t
            .users
            .into_iter()
            .map(|u| (u.name.clone(), Arc::new(u)))
            .collect();
        *self.table.write() = Some(UserTable {
            epoch: t.epoch,
            users,
        });
    }

    /// The epoch of the table held (0 = none yet).
    pub fn epoch(&self) -> u64 {
        self.table.read().as_ref().map(|t| t.epoch).unwrap_or(0)
    }

    /// Signs a user session token.
    pub fn issue(&self, user: &UserAuth) -> Result<(String, i64), Status> {
        let secret = self.secret().ok_or_else(not_joined)?;
        let expires_ms = token::now_ms() + token::USER_TOKEN_TTL_MS;
        let t = token::sign(
            &secret,
            &Claims {
                subject: user.name.clone(),
                kind: TokenKind::User,
                version: user.version,
                expires_ms,
            },
        );
        Ok((t, expires_ms))
    }

    /// The principal a token speaks for, or why it does not verify.
    pub fn verify(&self, token: &str) -> Result<Principal, Status> {
        let secret = self.secret().ok_or_else(not_joined)?;
        let claims = self.checked_claims(&secret, token).map_err(|e| match e {
            TokenError::Expired(_) => status_error(
                StatusCode::TokenExpired,
                format!("Unauthenticated: session {e}"),
            ),
            e => unauthenticated(e),
        })?;
        match claims.kind {
            TokenKind::Internal => Ok(Principal::Internal {
                name: claims.subject,
            }),
            TokenKind::User => {
                let table = self.table.read();
                let Some(table) = table.as_ref() else {
                    return Err(status_error(
                        StatusCode::Unavailable,
                        "this server has not received the user table from the mnode yet; retry",
                    ));
                };
                let Some(u) = table.users.get(&claims.subject) else {
                    return Err(unauthenticated(format!(
                        "user {} does not exist (dropped?)",
                        claims.subject
                    )));
                };
                if u.version != claims.version {
                    return Err(status_error(
                        StatusCode::TokenExpired,
                        format!(
                            "Unauthenticated: the password of user {} changed; log in again",
                            u.name
                        ),
                    ));
                }
                Ok(Principal::User(u.clone()))
            }
        }
    }

    /// [`token::verify`] of `token` against `secret`, the signature checked once per secret.
    fn checked_claims(&self, secret: &Arc<[u8]>, token: &str) -> Result<Claims, TokenError> {
        let now = token::now_ms();
        let known = self
            .verified
            .read()
            .get(token)
            .filter(|(s, _)| Arc::ptr_eq(s, secret))
            .map(|(_, c)| c.clone());
        if let Some(claims) = known {
            token::unexpired(&claims, now)?;
            return Ok(claims);
        }
        let claims = token::verify(secret, token, now)?;
        let mut verified = self.verified.write();
        if verified.len() >= VERIFIED_TOKENS_MAX {
            verified.clear();
        }
        verified.insert(token.into(), (secret.clone(), claims.clone()));
        Ok(claims)
    }
}

fn not_joined() -> Status {
    status_error(
        StatusCode::Unavailable,
        "this server has not joined the cluster yet (no cluster secret); retry",
    )
}

/// The token of `authorization: Bearer <token>`.
pub fn bearer(headers: &http::HeaderMap) -> Result<&str, Status> {
    let v = headers.get(AUTH_METADATA_KEY).ok_or_else(|| {
        unauthenticated(
            "no credentials: log in (Auth/Login) and send `authorization: Bearer <token>`",
        )
    })?;
    let v = v
        .to_str()
        .map_err(|_| unauthenticated("the authorization header is not ASCII"))?;
    v.strip_prefix("Bearer ")
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| unauthenticated("the authorization header is not `Bearer <token>`"))
}

// ---------- wire conversions ----------

pub fn privileges_to_wire(p: &BTreeMap<String, Privilege>) -> Vec<v1::Privilege> {
    p.iter()
        .map(|(db, p)| v1::Privilege {
            db: db.clone(),
            read: p.read,
            write: p.write,
        })
        .collect()
}

pub fn privileges_from_wire(p: &[v1::Privilege]) -> BTreeMap<String, Privilege> {
    p.iter()
        .filter(|p| p.read || p.write)
        .map(|p| {
            (
                p.db.clone(),
                Privilege {
                    read: p.read,
                    write: p.write,
                },
            )
        })
        .collect()
}

pub fn table_to_wire(t: &AuthTable) -> v1::AuthTable {
    v1::AuthTable {
        epoch: t.epoch,
        users: t
            .users
            .iter()
            .map(|u| v1::UserAuth {
                name: u.name.clone(),
                version: u.version,
                superuser: u.superuser,
                privileges: privileges_to_wire(&u.privileges),
            })
            .collect(),
    }
}

pub fn table_from_wire(t: &v1::AuthTable) -> AuthTable {
    AuthTable {
        epoch: t.epoch,
        users: t
            .users
            .iter()
            .map(|u| UserAuth {
                name: u.name.clone(),
                version: u.version,
                superuser: u.superuser,
                privileges: privileges_from_wire(&u.privileges),
            })
            .collect(),
    }
}

// ---------- the layer ----------

/// Verifies every gRPC request but `Auth/Login` (see the module doc).
#[derive(Clone)]
pub struct AuthLayer {
    verifier: Arc<Verifier>,
}

impl AuthLayer {
    pub fn new(verifier: Arc<Verifier>) -> AuthLayer {
        AuthLayer { verifier }
    }
}

impl<S> tower::Layer<S> for AuthLayer {
    type Service = AuthService<S>;
    fn layer(&self, inner: S) -> AuthService<S> {
        AuthService {
            inner,
            verifier: self.verifier.clone(),
        }
    }
}

#[derive(Clone)]
pub struct AuthService<S> {
    inner: S,
    verifier: Arc<Verifier>,
}

type BoxFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>;

impl<S, B> tower::Service<http::Request<B>> for AuthService<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<tonic::body::Body>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        // The service that was polled ready is the one to call; leave a clone behind.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let verifier = &self.verifier;
        let answer = move || -> Self::Future {
            if let Some(refusal) = super::net::over_limit(req.extensions()) {
                return Box::pin(async move { Ok(refusal.into_http()) });
            }
            // Before the login too: a client of another version must not misread a token.
            if let Some(refusal) = req
                .headers()
                .get(tidal_proto::WIRE_VERSION_KEY)
                .and_then(|v| tidal_proto::wire_version_refusal(v.as_bytes()))
            {
                tracing::debug!(path = req.uri().path(), "refused: {}", refusal.message());
                return Box::pin(async move { Ok(refusal.into_http()) });
            }
            if req.uri().path() == LOGIN_PATH {
                return Box::pin(inner.call(req));
            }
            let checked = bearer(req.headers()).and_then(|t| {
                let p = verifier.verify(t)?;
                Ok((p, Arc::<str>::from(t)))
            });
            match checked {
                Ok((p, token)) => {
                    req.extensions_mut().insert(p);
                    let fut = inner.call(req);
                    Box::pin(run_as(token, fut))
                }
                Err(status) => {
                    tracing::debug!(path = req.uri().path(), "refused: {}", status.message());
                    Box::pin(async move { Ok(status.into_http()) })
                }
            }
        }();
        // Every answer names the wire version this server speaks (the client checks it at
        // login).
        Box::pin(async move {
            let mut r = answer.await?;
            r.headers_mut().insert(
                tidal_proto::WIRE_VERSION_KEY,
                http::HeaderValue::from(tidal_proto::WIRE_VERSION),
            );
            Ok(r)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str, version: u64, privs: &[(&str, Privilege)]) -> UserAuth {
        UserAuth {
            name: name.into(),
            version,
            superuser: false,
            privileges: privs.iter().map(|(d, p)| (d.to_string(), *p)).collect(),
        }
    }

    fn verifier(users: Vec<UserAuth>) -> Verifier {
        let v = Verifier::default();
        v.set_secret(b"0123456789abcdef");
        v.set_table(AuthTable { epoch: 3, users });
        v
    }

    #[test]
    fn tokens_verify_against_the_live_table() {
        let u = user("alice", 5, &[("db1", Privilege::READ)]);
        let v = verifier(vec![u.clone()]);
        let (t, _) = v.issue(&u).unwrap();
        let p = v.verify(&t).unwrap();
        assert!(p.require_read("db1").is_ok());
        assert!(p.require_read("DB1").is_ok());
        let e = p.require_write("db1").unwrap_err();
        assert_eq!(
            e.message(),
            "PermissionDenied: user alice has no WRITE on db1"
        );
        assert_eq!(tidal_proto::code_of(&e), StatusCode::PermissionDenied);
        assert!(p.require_read("db2").is_err());
        assert!(p.require_superuser("create users").is_err());
        // Password changed: version moved.
        v.set_table(AuthTable {
            epoch: 4,
            users: vec![user("alice", 6, &[])],
        });
        let e = v.verify(&t).unwrap_err();
        assert_eq!(tidal_proto::code_of(&e), StatusCode::TokenExpired);
        // Dropped.
        v.set_table(AuthTable {
            epoch: 5,
            users: vec![],
        });
        let e = v.verify(&t).unwrap_err();
        assert_eq!(tidal_proto::code_of(&e), StatusCode::Unauthenticated);
        assert!(e.message().contains("does not exist"), "{}", e.message());
    }

    #[test]
    fn wildcard_grants_combine() {
        let p = Principal::User(Arc::new(user(
            "u",
            1,
            &[("*", Privilege::READ), ("db", Privilege::WRITE)],
        )));
        assert_eq!(p.privilege("db"), Privilege::ALL);
        assert_eq!(p.privilege("other"), Privilege::READ);
    }

    #[test]
    fn foreign_and_internal_tokens() {
        let v = verifier(vec![]);
        let (t, _) = tidal_client::auth::internal_token(b"0123456789abcdef", "dnode-1");
        assert!(v.verify(&t).unwrap().is_superuser());
        let (t, _) = tidal_client::auth::internal_token(b"another cluster", "dnode-1");
        assert_eq!(
            tidal_proto::code_of(&v.verify(&t).unwrap_err()),
            StatusCode::Unauthenticated
        );
        // No secret yet: retryable, not a credential failure.
        let fresh = Verifier::default();
        assert_eq!(
            tidal_proto::code_of(&fresh.verify("x.y").unwrap_err()),
            StatusCode::Unavailable
        );
    }

    #[test]
    fn a_remembered_token_still_expires_and_dies_with_its_secret() {
        let u = user("bob", 1, &[("db", Privilege::READ)]);
        let v = verifier(vec![u.clone()]);
        let (t, _) = v.issue(&u).unwrap();
        assert!(v.verify(&t).is_ok());
        assert!(v.verify(&t).is_ok(), "the second check answers from memory");
        assert_eq!(v.verified.read().len(), 1);
        // The same secret again (as every heartbeat sends it) keeps what was verified.
        v.set_secret(b"0123456789abcdef");
        assert_eq!(v.verified.read().len(), 1);
        // A remembered token past its expiry (and the allowed skew) is refused as before.
        let secret = v.secret().unwrap();
        let mut expired = v.verified.read().get(t.as_str()).unwrap().1.clone();
        expired.expires_ms = token::now_ms() - token::CLOCK_SKEW_MS - 1_000;
        v.verified
            .write()
            .insert(t.as_str().into(), (secret, expired));
        let e = v.verify(&t).unwrap_err();
        assert_eq!(tidal_proto::code_of(&e), StatusCode::TokenExpired);
        // Another cluster's secret: nothing verified under the old one counts.
        v.set_secret(b"another secret!!");
        assert!(v.verified.read().is_empty());
        v.set_table(AuthTable {
            epoch: 9,
            users: vec![u],
        });
        let e = v.verify(&t).unwrap_err();
        assert_eq!(tidal_proto::code_of(&e), StatusCode::Unauthenticated);
        // Bad tokens are never remembered.
        assert!(v.verify("x.y").is_err());
        assert!(v.verified.read().is_empty());
    }

    #[test]
    fn bearer_header() {
        let mut h = http::HeaderMap::new();
        assert!(bearer(&h).is_err());
        h.insert("authorization", "Basic abc".parse().unwrap());
        assert!(bearer(&h).is_err());
        h.insert("authorization", "Bearer tok".parse().unwrap());
        assert_eq!(bearer(&h).unwrap(), "tok");
    }
}
