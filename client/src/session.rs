//! The client's session: which token each call carries, logging in (and again before the
//! token runs out or after the server says it expired), and the channel settings (TLS).
//!
//! Stubs (`mnode()`, `dnode()`, `sql()`, `auth()`) capture the token when they are created;
//! the token comes from the credentials (see [`Credentials`]). Logging in is async, so the
//! high-level calls ensure a fresh token first ([`Client::authenticate`]); a stub created
//! while the token is close to expiry also starts a refresh in the background.

use crate::auth::{
    self, now_ms, Credentials, AUTH_METADATA_KEY, TOKEN_REFRESH_MARGIN_MS, USER_TOKEN_TTL_MS,
};
use crate::{Client, ClientError, OneFrame};
use parking_lot::RwLock;
use std::sync::Arc;
use tidal_common::StatusCode;
use tidal_proto::v1;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

/// A channel whose calls carry a token.
pub type AuthChannel = InterceptedService<OneFrame<Channel>, AuthInterceptor>;

/// Puts `authorization: Bearer <token>` on every call of a stub (nothing if it has no token:
/// the server then refuses the call as unauthenticated).
#[derive(Clone)]
pub struct AuthInterceptor {
    value: Option<tonic::metadata::MetadataValue<tonic::metadata::Ascii>>,
}

impl AuthInterceptor {
    /// Sends `token` (nothing without one).
    fn with_token(token: Option<Arc<str>>) -> AuthInterceptor {
        AuthInterceptor {
            value: token.and_then(|t| format!("Bearer {t}").parse().ok()),
        }
    }
}

impl tonic::service::Interceptor for AuthInterceptor {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(v) = &self.value {
            req.metadata_mut().insert(AUTH_METADATA_KEY, v.clone());
        }
        req.metadata_mut().insert(
            tidal_proto::WIRE_VERSION_KEY,
            tonic::metadata::MetadataValue::from(tidal_proto::WIRE_VERSION),
        );
        Ok(req)
    }
}

pub(crate) struct Session {
    credentials: RwLock<Credentials>,
    /// The current own token and its expiry (wall-clock ms).
    token: RwLock<Option<(Arc<str>, i64)>>,
    /// One login at a time; the others wait and reuse its token.
    login: tokio::sync::Mutex<()>,
}

impl Session {
    pub(crate) fn new(credentials: Credentials) -> Session {
        Session {
            credentials: RwLock::new(credentials),
            token: RwLock::new(None),
            login: tokio::sync::Mutex::new(()),
        }
    }
}

fn fresh(t: &Option<(Arc<str>, i64)>, now: i64) -> Option<Arc<str>> {
    t.as_ref()
        .filter(|(_, exp)| *exp - TOKEN_REFRESH_MARGIN_MS > now)
        .map(|(t, _)| t.clone())
}

impl Client {
    /// The token a call made now would carry.
    pub(crate) fn token_for_call(&self) -> Option<Arc<str>> {
        let s = &self.inner.session;
        let creds = s.credentials.read().clone();
        match creds {
            Credentials::Forward => auth::current_caller(),
            Credentials::ClusterSecret { name, secret } => {
                let now = now_ms();
                if let Some(t) = fresh(&s.token.read(), now) {
                    return Some(t);
                }
                let (t, exp) = auth::internal_token(&secret, &name);
                let t: Arc<str> = Arc::from(t);
                *s.token.write() = Some((t.clone(), exp));
                Some(t)
            }
            Credentials::Password { .. } => {
                let cur = s.token.read().clone();
                let now = now_ms();
                if fresh(&cur, now).is_none() {
                    // Refresh in the background; this call still uses the old token, which a
                    // stub only gets close to expiry (high-level calls refresh first).
                    if let Ok(rt) = tokio::runtime::Handle::try_current() {
                        let c = self.clone();
                        rt.spawn(async move {
                            if let Err(e) = c.authenticate().await {
                                tracing::debug!("background login failed: {e}");
                            }
                        });
                    }
                }
                cur.map(|(t, _)| t)
            }
        }
    }

    /// Whose lookups the metadata caches hold: "" for a client with its own identity, the
    /// caller's user for a forwarding client (each user's cached routes and schemas were
    /// fetched with that user's privileges). The token was verified by the server that
    /// set the caller scope, so its claims can be read without the secret here.
    pub(crate) fn cache_scope(&self) -> Arc<str> {
        if !matches!(
            &*self.inner.session.credentials.read(),
            Credentials::Forward
        ) {
            return Arc::from("");
        }
        match auth::current_caller() {
            Some(t) => Arc::from(auth::unverified_subject(&t).unwrap_or_default()),
            // No caller: every call will be refused anyway; keep such lookups apart.
            None => Arc::from("\0none"),
        }
    }

    pub(crate) fn interceptor(&self) -> AuthInterceptor {
        AuthInterceptor::with_token(self.token_for_call())
    }

    pub(crate) fn intercepted(&self, channel: Channel) -> AuthChannel {
        InterceptedService::new(OneFrame::new(channel), self.interceptor())
    }

    /// Like [`Client::intercepted`] with a token taken earlier (see
    /// [`Client::token_for_call`]).
    pub(crate) fn intercepted_with(
        &self,
        channel: Channel,
        token: Option<Arc<str>>,
    ) -> AuthChannel {
        InterceptedService::new(OneFrame::new(channel), AuthInterceptor::with_token(token))
    }

    /// Makes sure this client holds a token that is not about to expire, logging in if it
    /// authenticates with a password. A no-op for the other credentials.
    pub async fn authenticate(&self) -> Result<(), ClientError> {
        let s = &self.inner.session;
        let (user, password) = match &*s.credentials.read() {
            Credentials::Password { user, password } => (user.clone(), password.clone()),
            _ => return Ok(()),
        };
        if fresh(&s.token.read(), now_ms()).is_some() {
            return Ok(());
        }
        let _one = s.login.lock().await;
        if fresh(&s.token.read(), now_ms()).is_some() {
            return Ok(());
        }
        let mut auth = v1::auth_client::AuthClient::new(self.channel(self.mnode_addr())?);
        let resp = auth
            .login(versioned(v1::LoginRequest {
                user: user.clone(),
                password,
            }))
            .await
            .map_err(ClientError::from)?;
        check_server_version(resp.metadata())?;
        let resp = resp.into_inner();
        // A server whose clock is far behind would hand out already-stale expiries; never
        // trust one beyond the documented lifetime.
        let exp = resp.expires_ms.min(now_ms() + USER_TOKEN_TTL_MS);
        *s.token.write() = Some((Arc::from(resp.token), exp));
        Ok(())
    }

    /// Drops the own token and logs in again (after the server said it expired).
    pub(crate) async fn relogin(&self) -> Result<(), ClientError> {
        *self.inner.session.token.write() = None;
        self.authenticate().await
    }

    /// Whether `e` means the session ended and this client can start a new one itself.
    pub(crate) fn can_relogin(&self, e: &ClientError) -> bool {
        e.code == StatusCode::TokenExpired
            && matches!(
                &*self.inner.session.credentials.read(),
                Credentials::Password { .. }
            )
    }

    /// Switches to other credentials (a data node, once it has registered and received the
    /// cluster secret). Stubs created afterwards use them.
    pub fn set_credentials(&self, c: Credentials) {
        *self.inner.session.credentials.write() = c;
        *self.inner.session.token.write() = None;
    }

    /// The user this client logs in as (`None` for cluster or forwarding clients).
    pub fn user(&self) -> Option<String> {
        match &*self.inner.session.credentials.read() {
            Credentials::Password { user, .. } => Some(user.clone()),
            _ => None,
        }
    }

    /// A stub of the Auth service (login, user management) on the mnode.
    pub fn auth(&self) -> Result<v1::auth_client::AuthClient<AuthChannel>, ClientError> {
        Ok(v1::auth_client::AuthClient::new(
            self.intercepted(self.channel(self.mnode_addr())?),
        ))
    }

    /// Logs in as `user` with `password` and returns the session token and its expiry
    /// (wall-clock ms), without changing this client's own session. The HTTP API uses it to
    /// turn Basic credentials into a token it then forwards.
    pub async fn login_token(
        &self,
        user: &str,
        password: &str,
    ) -> Result<(Arc<str>, i64), ClientError> {
        let mut auth = v1::auth_client::AuthClient::new(self.channel(self.mnode_addr())?);
        let resp = auth
            .login(versioned(v1::LoginRequest {
                user: user.to_string(),
                password: password.to_string(),
            }))
            .await
            .map_err(ClientError::from)?;
        check_server_version(resp.metadata())?;
        let resp = resp.into_inner();
        Ok((
            Arc::from(resp.token),
            resp.expires_ms.min(now_ms() + USER_TOKEN_TTL_MS),
        ))
    }
}

/// `msg` as a request naming this client's wire version (the interceptor does so for every
/// other call).
fn versioned<T>(msg: T) -> tonic::Request<T> {
    let mut req = tonic::Request::new(msg);
    req.metadata_mut().insert(
        tidal_proto::WIRE_VERSION_KEY,
        tonic::metadata::MetadataValue::from(tidal_proto::WIRE_VERSION),
    );
    req
}

/// A server that names another wire version than this client's is refused at login (one that
/// names none predates the check and speaks version 1).
fn check_server_version(md: &tonic::metadata::MetadataMap) -> Result<(), ClientError> {
    let Some(v) = md.get(tidal_proto::WIRE_VERSION_KEY) else {
        return Ok(());
    };
    let text = v.to_str().unwrap_or("?").trim().to_string();
    if text.parse::<u32>() == Ok(tidal_proto::WIRE_VERSION) {
        return Ok(());
    }
    Err(ClientError::new(
        StatusCode::WireVersionMismatch,
        format!(
            "the server speaks Tidal wire version {text}, this client speaks {}: use a client \
             and server of matching versions",
            tidal_proto::WIRE_VERSION
        ),
    ))
}

#[cfg(test)]
mod version_tests {
    use super::*;

    #[test]
    fn a_server_of_another_wire_version_is_refused() {
        let mut md = tonic::metadata::MetadataMap::new();
        assert!(check_server_version(&md).is_ok(), "no key: an older server");
        md.insert(tidal_proto::WIRE_VERSION_KEY, "1".parse().unwrap());
        assert!(check_server_version(&md).is_ok());
        md.insert(tidal_proto::WIRE_VERSION_KEY, "7".parse().unwrap());
        let e = check_server_version(&md).unwrap_err();
        assert_eq!(e.code, StatusCode::WireVersionMismatch);
        assert!(
            e.message.contains("server speaks Tidal wire version 7"),
            "{}",
            e.message
        );
        let req = versioned(());
        assert_eq!(
            req.metadata().get(tidal_proto::WIRE_VERSION_KEY).unwrap(),
            "1"
        );
    }
}
