//! Assembles a server role's security: the verifier, the clients it calls other nodes with
//! (its own identity for cluster calls, the caller's for the SQL frontend and the HTTP API),
//! TLS and the connection limit, and the gRPC server builder with the auth layer in front.

use super::auth::{AuthLayer, Verifier};
use super::auth_svc::{ForwardAuthService, MnodeAuthService};
use super::dnode_auth::DnodeAuth;
use super::net::{ConnLimit, DnodeSecurity, MnodeSecurity, ServerSecurity, ServerTls};
use super::BoxError;
use std::sync::Arc;
use tidal_client::{Client, ConnectOptions, Credentials};
use tidal_mnode::Mnode;
use tidal_proto::v1::auth_server::AuthServer;
use tokio::net::TcpListener;
use tonic::transport::server::Server;

/// One server process's security.
pub struct Secured {
    pub verifier: Arc<Verifier>,
    /// Calls made as this process (cluster membership, vnode placement).
    pub internal: Client,
    /// Calls made for a request: they carry the caller's token (SQL frontend, HTTP API).
    pub forward: Client,
    tls: Option<ServerTls>,
    limit: ConnLimit,
}

fn options(tls: &Option<ServerTls>, credentials: Credentials) -> ConnectOptions {
    ConnectOptions {
        credentials,
        tls_ca_pem: tls.as_ref().map(|t| t.ca_pem.clone()),
        tls_domain: None,
        // a server's own client never runs SQL for a user: its frontend plans
        plan_queries_locally: false,
        fragment_frames: true,
        write_frames: true,
    }
}

fn prepare(sec: &ServerSecurity) -> Result<(Option<ServerTls>, ConnLimit), BoxError> {
    sec.check()?;
    let tls = sec.tls()?;
    warn_if_fd_limit_is_low(sec.max_connections);
    Ok((tls, ConnLimit::new(sec.max_connections)))
}

/// Files a server keeps open besides its connections (vnode files, WALs, logs).
const FILES_RESERVED: u64 = 1024;

/// Over the open-file limit, `accept` fails and a client waits for its connect timeout
/// instead of getting the "too many connections" answer; say so at start.
fn warn_if_fd_limit_is_low(max_connections: usize) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass; no other memory is involved.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return;
    }
    // gRPC and HTTP each allow `max_connections`, plus refused ones held briefly.
    let needed =
        2 * (max_connections as u64 + super::net::REFUSED_CONNECTIONS_MAX as u64) + FILES_RESERVED;
    let limit: u64 = lim.rlim_cur;
    if limit < needed {
        tracing::warn!(
            open_files_limit = limit,
            max_connections,
            "the open-file limit (ulimit -n) is below what max_connections needs ({needed}); raise it or lower max_connections"
        );
    }
}

impl Secured {
    /// The mnode: creates root and the cluster secret on first start, warns while root has
    /// the default password.
    pub fn for_mnode(
        mnode: &Arc<Mnode>,
        sec: &MnodeSecurity,
        addr: &str,
    ) -> Result<Secured, BoxError> {
        let (tls, limit) = prepare(&sec.server)?;
        let init = mnode
            .init_auth(sec.root_password.as_deref())
            .map_err(|e| format!("initialize users: {e}"))?;
        if init.created {
            tracing::info!("first start: created the superuser root and the cluster secret");
        } else if sec.root_password.is_some() {
            tracing::warn!("root_password is ignored: root already exists (change its password with ALTER USER root PASS '...')");
        }
        if init.root_has_default_password {
            tracing::warn!("user root has the default password 'taosdata': change it with ALTER USER root PASS '<new password>'");
        }
        let secret = mnode
            .cluster_secret()
            .ok_or("the catalog has no cluster secret after initialization")?;
        let verifier = Verifier::new();
        verifier.set_secret(&secret);
        verifier.set_table(mnode.auth_table());
        let internal = Client::new_lazy(
            addr,
            options(
                &tls,
                Credentials::ClusterSecret {
                    name: "mnode".into(),
                    secret: Arc::from(secret),
                },
            ),
        )?;
        let forward = Client::new_lazy(addr, options(&tls, Credentials::Forward))?;
        Ok(Secured {
            verifier,
            internal,
            forward,
            tls,
            limit,
        })
    }

    /// A data node: loads the kept cluster secret; the internal client joins with the
    /// configured user until registration hands it the secret.
    pub fn for_dnode(
        data: &std::path::Path,
        sec: &DnodeSecurity,
        mnode_addr: &str,
    ) -> Result<(Secured, Arc<DnodeAuth>), BoxError> {
        let (tls, limit) = prepare(&sec.server)?;
        let verifier = Verifier::new();
        let join = Credentials::Password {
            user: sec.user.clone(),
            password: sec.password.clone(),
        };
        let auth = Arc::new(DnodeAuth::load(data, join.clone(), verifier.clone())?);
        let internal = Client::new_lazy(mnode_addr, options(&tls, join))?;
        let forward = Client::new_lazy(mnode_addr, options(&tls, Credentials::Forward))?;
        Ok((
            Secured {
                verifier,
                internal,
                forward,
                tls,
                limit,
            },
            auth,
        ))
    }

    /// A gRPC server builder with TLS (if configured) and the auth layer.
    pub fn server(
        &self,
    ) -> Result<Server<tower::layer::util::Stack<AuthLayer, tower::layer::util::Identity>>, BoxError>
    {
        let mut b = Server::builder();
        if let Some(t) = &self.tls {
            b = b
                .tls_config(t.grpc())
                .map_err(|e| format!("TLS configuration: {e}"))?;
        }
        Ok(b.layer(AuthLayer::new(self.verifier.clone())))
    }

    pub fn mnode_auth(&self, mnode: Arc<Mnode>) -> AuthServer<MnodeAuthService> {
        AuthServer::new(MnodeAuthService::new(
            mnode,
            self.verifier.clone(),
            self.internal.clone(),
        ))
    }

    pub fn forward_auth(&self) -> AuthServer<ForwardAuthService> {
        AuthServer::new(ForwardAuthService::new(self.forward.clone()))
    }

    /// Whether the data node serves fragment frames beside gRPC (not with TLS: see
    /// `frames.rs`).
    pub fn serves_frames(&self) -> bool {
        self.tls.is_none()
    }

    /// Accepted gRPC connections (connection limit applied).
    pub fn incoming(
        &self,
        listener: TcpListener,
    ) -> impl tokio_stream::Stream<Item = std::io::Result<super::net::Conn>> {
        super::net::incoming(listener, self.limit.clone())
    }

    /// What the HTTP API serves with: TLS and the connection limit.
    pub fn http(&self) -> Result<crate::http::auth::HttpSecurity, BoxError> {
        Ok(crate::http::auth::HttpSecurity {
            tls: match &self.tls {
                Some(t) => Some(t.rustls()?),
                None => None,
            },
            limit: ConnLimit::new(self.limit.limit()),
        })
    }
}
