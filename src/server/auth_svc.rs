//! The Auth gRPC service: login on every server, user management on the mnode.
//!
//! - On the mnode, [`MnodeAuthService`] checks passwords against the catalog (Argon2, at most
//!   [`LOGINS_IN_FLIGHT_MAX`] at once: each hash takes ~19 MiB and tens of ms, so a flood of
//!   logins is bounded in memory and CPU) and signs session tokens; user changes are
//!   superuser-only (a user may change its own password) and refresh the verifier's table at
//!   once.
//! - On a data node, [`ForwardAuthService`] passes every call to the mnode: a client that
//!   connected to a data node logs in there like anywhere else.

use super::auth::{principal, privileges_to_wire, Verifier};
use std::sync::Arc;
use std::time::Duration;
use tidal_common::StatusCode;
use tidal_mnode::{Mnode, MnodeError, Privilege};
use tidal_proto::status_error;
use tidal_proto::v1::{self, auth_server::Auth};
use tokio::sync::Semaphore;
use tonic::{Request, Response, Status};

/// Password checks running at once on the mnode.
pub const LOGINS_IN_FLIGHT_MAX: usize = 4;
/// How long a login waits for a slot before it is refused.
pub const LOGIN_QUEUE_WAIT_MS: u64 = 10_000;

fn to_status(e: MnodeError) -> Status {
    status_error(e.status_code(), e.to_string())
}

/// Runs a catalog call that hashes or fsyncs on the blocking pool.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, MnodeError> + Send + 'static,
) -> Result<T, Status> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| status_error(StatusCode::Internal, format!("catalog task failed: {e}")))?
        .map_err(to_status)
}

fn peer<T>(req: &Request<T>) -> String {
    req.extensions()
        .get::<super::net::ConnInfo>()
        .and_then(|c| c.remote)
        .or_else(|| req.remote_addr())
        .map(|a| a.to_string())
        .unwrap_or_else(|| "?".into())
}

pub struct MnodeAuthService {
    mnode: Arc<Mnode>,
    verifier: Arc<Verifier>,
    logins: Arc<Semaphore>,
    /// The mnode's own client, to push the user table to the data nodes.
    internal: tidal_client::Client,
}

/// How long the push of a user change waits for one data node.
const PUSH_TIMEOUT_MS: u64 = 2_000;

impl MnodeAuthService {
    pub fn new(
        mnode: Arc<Mnode>,
        verifier: Arc<Verifier>,
        internal: tidal_client::Client,
    ) -> MnodeAuthService {
        MnodeAuthService {
            mnode,
            verifier,
            logins: Arc::new(Semaphore::new(LOGINS_IN_FLIGHT_MAX)),
            internal,
        }
    }

    /// After a user change: the mnode's verifier at once, then every live data node (in
    /// parallel, each bounded by [`PUSH_TIMEOUT_MS`]), so that the change is in force
    /// cluster-wide when the statement returns. A node that misses the push gets the table
    /// with its next heartbeat.
    async fn refresh(&self) {
        let table = self.mnode.auth_table();
        self.verifier.set_table(table.clone());
        let wire = super::auth::table_to_wire(&table);
        let pushes = self.mnode.dnodes().into_iter().filter(|d| d.alive).map(|d| {
            let stub = self.internal.dnode(&d.addr);
            let wire = wire.clone();
            async move {
                let r = tokio::time::timeout(Duration::from_millis(PUSH_TIMEOUT_MS), async {
                    let mut d = stub.map_err(|e| e.to_string())?;
                    d.update_auth(wire)
                        .await
                        .map_err(|s| s.message().to_string())
                })
                .await;
                match r {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => tracing::warn!(addr = %d.addr, "user table push: {e}; the next heartbeat delivers it"),
                    Err(_) => tracing::warn!(addr = %d.addr, "user table push timed out; the next heartbeat delivers it"),
                }
            }
        });
        futures::future::join_all(pushes).await;
    }
}

#[tonic::async_trait]
impl Auth for MnodeAuthService {
    async fn login(
        &self,
        req: Request<v1::LoginRequest>,
    ) -> Result<Response<v1::LoginResponse>, Status> {
        let from = peer(&req);
        let r = req.into_inner();
        let _slot = tokio::time::timeout(
            Duration::from_millis(LOGIN_QUEUE_WAIT_MS),
            self.logins.clone().acquire_owned(),
        )
        .await
        .map_err(|_| {
            status_error(
                StatusCode::ResourceExhausted,
                format!("ResourceExhausted: too many logins in progress ({LOGINS_IN_FLIGHT_MAX} at once); retry"),
            )
        })?
        .map_err(|_| status_error(StatusCode::ShuttingDown, "the server is shutting down"))?;
        let m = self.mnode.clone();
        let user = r.user.clone();
        let auth = match blocking(move || m.login(&r.user, &r.password)).await {
            Ok(a) => a,
            Err(e) => {
                // Never the password; the user name helps spot a misconfigured client.
                tracing::warn!(user = %user, from = %from, "login failed");
                return Err(e);
            }
        };
        let (token, expires_ms) = self.verifier.issue(&auth)?;
        tracing::debug!(user = %auth.name, from = %from, "login");
        Ok(Response::new(v1::LoginResponse {
            token,
            expires_ms,
            superuser: auth.superuser,
        }))
    }

    async fn create_user(
        &self,
        req: Request<v1::CreateUserRequest>,
    ) -> Result<Response<v1::Empty>, Status> {
        principal(&req)?.require_superuser("create users")?;
        let r = req.into_inner();
        let m = self.mnode.clone();
        blocking(move || m.create_user(&r.name, &r.password)).await?;
        self.refresh().await;
        Ok(Response::new(v1::Empty {}))
    }

    async fn alter_user(
        &self,
        req: Request<v1::AlterUserRequest>,
    ) -> Result<Response<v1::Empty>, Status> {
        let p = principal(&req)?;
        let r = req.into_inner();
        if !r.name.eq_ignore_ascii_case(p.name()) {
            p.require_superuser("change another user's password")?;
        }
        let m = self.mnode.clone();
        blocking(move || m.alter_user_password(&r.name, &r.password)).await?;
        self.refresh().await;
        Ok(Response::new(v1::Empty {}))
    }

    async fn drop_user(
        &self,
        req: Request<v1::DropUserRequest>,
    ) -> Result<Response<v1::Empty>, Status> {
        principal(&req)?.require_superuser("drop users")?;
        let r = req.into_inner();
        let m = self.mnode.clone();
        blocking(move || m.drop_user(&r.name)).await?;
        self.refresh().await;
        Ok(Response::new(v1::Empty {}))
    }

    async fn grant(&self, req: Request<v1::GrantRequest>) -> Result<Response<v1::Empty>, Status> {
        principal(&req)?.require_superuser("grant or revoke privileges")?;
        let r = req.into_inner();
        let privilege = Privilege {
            read: r.read,
            write: r.write,
        };
        let m = self.mnode.clone();
        blocking(move || m.grant(&r.user, &r.db, privilege, r.revoke)).await?;
        self.refresh().await;
        Ok(Response::new(v1::Empty {}))
    }

    async fn list_users(
        &self,
        req: Request<v1::Empty>,
    ) -> Result<Response<v1::ListUsersResponse>, Status> {
        let p = principal(&req)?;
        let users = self
            .mnode
            .users()
            .into_iter()
            // A user who is not a superuser sees only itself.
            .filter(|u| p.is_superuser() || u.name == p.name())
            .map(|u| v1::UserInfo {
                name: u.name,
                superuser: u.superuser,
                created_ms: u.created_ms,
                privileges: privileges_to_wire(&u.privileges),
            })
            .collect();
        Ok(Response::new(v1::ListUsersResponse { users }))
    }

    async fn check_privilege(
        &self,
        req: Request<v1::CheckPrivilegeRequest>,
    ) -> Result<Response<v1::Empty>, Status> {
        let p = principal(&req)?;
        let r = req.into_inner();
        if r.read {
            p.require_read(&r.db)?;
        }
        if r.write {
            p.require_write(&r.db)?;
        }
        Ok(Response::new(v1::Empty {}))
    }
}

/// A data node's Auth service: every call goes to the mnode (user calls with the caller's
/// token, through the forwarding client).
pub struct ForwardAuthService {
    client: tidal_client::Client,
}

impl ForwardAuthService {
    pub fn new(forwarding_client: tidal_client::Client) -> ForwardAuthService {
        ForwardAuthService {
            client: forwarding_client,
        }
    }
}

fn client_status(e: tidal_client::ClientError) -> Status {
    status_error(e.code, e.message)
}

#[tonic::async_trait]
impl Auth for ForwardAuthService {
    async fn login(
        &self,
        req: Request<v1::LoginRequest>,
    ) -> Result<Response<v1::LoginResponse>, Status> {
        let r = req.into_inner();
        let mut a = v1::auth_client::AuthClient::new(
            self.client
                .channel(self.client.mnode_addr())
                .map_err(client_status)?,
        );
        let resp = a.login(r).await?;
        Ok(Response::new(resp.into_inner()))
    }

    async fn create_user(
        &self,
        req: Request<v1::CreateUserRequest>,
    ) -> Result<Response<v1::Empty>, Status> {
        let mut a = self.client.auth().map_err(client_status)?;
        Ok(Response::new(
            a.create_user(req.into_inner()).await?.into_inner(),
        ))
    }

    async fn alter_user(
        &self,
        req: Request<v1::AlterUserRequest>,
    ) -> Result<Response<v1::Empty>, Status> {
        let mut a = self.client.auth().map_err(client_status)?;
        Ok(Response::new(
            a.alter_user(req.into_inner()).await?.into_inner(),
        ))
    }

    async fn drop_user(
        &self,
        req: Request<v1::DropUserRequest>,
    ) -> Result<Response<v1::Empty>, Status> {
        let mut a = self.client.auth().map_err(client_status)?;
        Ok(Response::new(
            a.drop_user(req.into_inner()).await?.into_inner(),
        ))
    }

    async fn grant(&self, req: Request<v1::GrantRequest>) -> Result<Response<v1::Empty>, Status> {
        let mut a = self.client.auth().map_err(client_status)?;
        Ok(Response::new(a.grant(req.into_inner()).await?.into_inner()))
    }

    async fn list_users(
        &self,
        req: Request<v1::Empty>,
    ) -> Result<Response<v1::ListUsersResponse>, Status> {
        let mut a = self.client.auth().map_err(client_status)?;
        Ok(Response::new(
            a.list_users(req.into_inner()).await?.into_inner(),
        ))
    }

    async fn check_privilege(
        &self,
        req: Request<v1::CheckPrivilegeRequest>,
    ) -> Result<Response<v1::Empty>, Status> {
        let mut a = self.client.auth().map_err(client_status)?;
        Ok(Response::new(
            a.check_privilege(req.into_inner()).await?.into_inner(),
        ))
    }
}
