//! Server roles. Each role binds its gRPC port, prints `ready <role> <addr>` once it accepts
//! requests, serves until SIGINT/SIGTERM, then shuts down gracefully. Every role also serves
//! the SQL frontend, which talks to the cluster through the client library, and, with
//! `--http ADDR`, the HTTP API (announced first, as `ready http <addr>`).
//!
//! Graceful shutdown, bounded by `shutdown_timeout_ms` (a second signal cuts it short; both
//! exit non-zero, the WAL keeping every acknowledged write):
//! - data node: new mutations get the retryable `ShuttingDown` status ([`gate`]), in-flight
//!   ones finish, every vnode flushes its memtables to STT files (trimming its WAL, so the
//!   next start replays nothing), then the gRPC server stops; exit 0.
//! - mnode: the gRPC server stops accepting and finishes in-flight requests, then the
//!   catalog is snapshotted (its log emptied); exit 0.

pub mod auth;
mod auth_svc;
mod dnode_auth;
mod dnode_svc;
mod frames;
mod gate;
mod mnode_svc;
pub mod net;
mod secure;
mod write_grpc;

pub use dnode_svc::{DnodeOptions, DnodeService};
pub use mnode_svc::MnodeService;

use crate::config::{DnodeConfig, MnodeConfig};
use crate::frontend::SqlService;
use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use tidal_proto::v1::{mnode_server::MnodeServer, sql_server::SqlServer};
use tokio::net::TcpListener;

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Largest gRPC message a server accepts or sends: large enough for a big write batch or
/// query result, small enough that one request cannot exhaust memory.
pub const GRPC_MESSAGE_BYTES_MAX: usize = 256 << 20;

async fn bind(listen: &str) -> Result<(TcpListener, String), BoxError> {
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
    let addr = listener.local_addr()?.to_string();
    Ok((listener, addr))
}

pub(crate) fn announce(role: &str, addr: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "ready {role} {addr}");
    let _ = out.flush();
}

/// SIGTERM and SIGINT, caught from the moment this is created: a signal that arrives before
/// anyone awaits [`Signals::recv`] (say, while the server is still starting) is kept instead
/// of killing the process by the default action.
pub struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Signals {
    pub fn install() -> Result<Signals, BoxError> {
        use tokio::signal::unix::{signal, SignalKind};
        let term = signal(SignalKind::terminate())
            .map_err(|e| format!("cannot install the SIGTERM handler: {e}"))?;
        let int = signal(SignalKind::interrupt())
            .map_err(|e| format!("cannot install the SIGINT handler: {e}"))?;
        Ok(Signals { term, int })
    }

    /// Resolves at the next SIGTERM or SIGINT (or one received since the last call).
    pub async fn recv(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}

/// Resolves when the process receives SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let term = signal(SignalKind::terminate());
    let int = signal(SignalKind::interrupt());
    match (term, int) {
        (Ok(mut t), Ok(mut i)) => {
            tokio::select! {
                _ = t.recv() => {}
                _ = i.recv() => {}
            }
        }
        _ => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

pub async fn run_mnode(
    cfg: MnodeConfig,
    variables: Vec<crate::config::Variable>,
) -> Result<ExitCode, BoxError> {
    let mut signals = Signals::install()?;
    let data = crate::config::required("data", cfg.data.as_ref())?.clone();
    std::fs::create_dir_all(&data).map_err(|e| format!("cannot create {}: {e}", data.display()))?;
    let mnode_cfg = tidal_mnode::MnodeConfig {
        dnode_timeout_ms: cfg.dnode_timeout_ms,
        snapshot_every: cfg.snapshot_every_records,
    };
    let mnode = Arc::new(
        tidal_mnode::Mnode::open_with(&data, mnode_cfg)
            .map_err(|e| format!("open mnode catalog: {e}"))?,
    );
    let (listener, addr) = bind(&cfg.listen).await?;
    let sec = secure::Secured::for_mnode(&mnode, &cfg.security, &addr)?;
    let svc = MnodeService::new(mnode.clone(), sec.internal.clone(), &addr)
        .with_verifier(sec.verifier.clone());
    let sql = SqlService::new(
        sec.forward.clone(),
        cfg.common.query_timeout_ms,
        cfg.common.query_memory_max_bytes,
    )
    .with_variables(Arc::new(variables));
    // The HTTP line comes before the role's line so that whoever waits for the role's line
    // has seen the HTTP address by then.
    if let Some(h) = &cfg.http {
        crate::http::start(h, sec.forward.clone(), sec.http()?).await?;
    }
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let mut server = tokio::spawn(
        sec.server()?
            .add_service(sec.mnode_auth(mnode.clone()))
            .add_service(
                MnodeServer::new(svc)
                    .max_decoding_message_size(GRPC_MESSAGE_BYTES_MAX)
                    .max_encoding_message_size(GRPC_MESSAGE_BYTES_MAX),
            )
            .add_service(
                SqlServer::new(sql)
                    .max_decoding_message_size(GRPC_MESSAGE_BYTES_MAX)
                    .max_encoding_message_size(GRPC_MESSAGE_BYTES_MAX),
            )
            .serve_with_incoming_shutdown(sec.incoming(listener), async {
                let _ = stop_rx.await;
            }),
    );
    announce("mnode", &addr);
    tracing::info!(listen = %addr, data = %data.display(), "mnode ready");
    let ended_by_itself = tokio::select! {
        _ = signals.recv() => None,
        r = &mut server => Some(r),
    };
    if let Some(r) = ended_by_itself {
        return Err(format!("gRPC server stopped: {}", join_error(r)).into());
    }
    tracing::info!("shutting down: finishing in-flight requests, then snapshotting the catalog");
    let graceful = async move {
        let _ = stop_tx.send(());
        let served = join_error(server.await);
        let m = mnode.clone();
        match tokio::task::spawn_blocking(move || m.checkpoint()).await {
            Ok(Ok(records)) => tracing::info!(records, "catalog snapshot written"),
            // Every catalog change is already fsynced in the log; the snapshot only saves
            // replaying it at the next start.
            Ok(Err(e)) => tracing::warn!("catalog snapshot at shutdown failed: {e}"),
            Err(e) => tracing::warn!("catalog snapshot at shutdown failed: {e}"),
        }
        if served.is_empty() {
            tracing::info!("mnode stopped");
            Ok(ExitCode::SUCCESS)
        } else {
            Err(format!("gRPC server: {served}").into())
        }
    };
    bounded_shutdown(cfg.common.shutdown_timeout_ms, &mut signals, graceful).await
}

/// The error of a finished server task, or "" if it ended cleanly.
fn join_error(r: Result<Result<(), tonic::transport::Error>, tokio::task::JoinError>) -> String {
    match r {
        Ok(Ok(())) => String::new(),
        Ok(Err(e)) => e.to_string(),
        Err(e) => format!("server task failed: {e}"),
    }
}

/// Runs a graceful shutdown for at most `timeout_ms`; a second SIGTERM/SIGINT cuts it short.
/// Either way the process then exits with a failure status; acknowledged writes are safe in
/// the WAL and replayed at the next start.
async fn bounded_shutdown(
    timeout_ms: u64,
    signals: &mut Signals,
    graceful: impl std::future::Future<Output = Result<ExitCode, BoxError>>,
) -> Result<ExitCode, BoxError> {
    tokio::select! {
        r = tokio::time::timeout(std::time::Duration::from_millis(timeout_ms), graceful) => match r {
            Ok(r) => r,
            Err(_) => {
                tracing::error!(
                    shutdown_timeout_ms = timeout_ms,
                    "graceful shutdown did not finish in time; exiting anyway (the WAL keeps every acknowledged write)"
                );
                Ok(ExitCode::FAILURE)
            }
        },
        _ = signals.recv() => {
            tracing::warn!("second signal: exiting without finishing the shutdown (the WAL keeps every acknowledged write)");
            Ok(ExitCode::FAILURE)
        }
    }
}

/// The address a data node announces when none is configured: the bound address, or for a
/// wildcard listen address (0.0.0.0 / ::) the local address of the route to the mnode, which
/// is the interface the other nodes can reach it on.
async fn default_advertise(bound: SocketAddr, mnode: &str) -> Result<String, BoxError> {
    if !bound.ip().is_unspecified() {
        return Ok(bound.to_string());
    }
    let target = tokio::net::lookup_host(mnode)
        .await
        .map_err(|e| format!("cannot resolve the mnode address {mnode}: {e}"))?
        .next()
        .ok_or_else(|| format!("the mnode address {mnode} resolves to nothing"))?;
    let any: SocketAddr = if target.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    // Connecting a UDP socket sends nothing; it only picks the route and source address.
    let probe = std::net::UdpSocket::bind(any)
        .and_then(|s| s.connect(target).map(|()| s))
        .and_then(|s| s.local_addr())
        .map_err(|e| {
            format!("listening on {bound}: cannot find the local address that reaches the mnode at {target} ({e}); set `advertise`")
        })?;
    let addr = SocketAddr::new(probe.ip(), bound.port()).to_string();
    tracing::info!(advertise = %addr, "advertising the address of the route to the mnode (set `advertise` to override)");
    Ok(addr)
}

pub async fn run_dnode(
    cfg: DnodeConfig,
    variables: Vec<crate::config::Variable>,
) -> Result<ExitCode, BoxError> {
    let variables = Arc::new(variables);
    let mut signals = Signals::install()?;
    let data = crate::config::required("data", cfg.data.as_ref())?.clone();
    let mnode = crate::config::required("mnode", cfg.mnode.as_ref())?.clone();
    std::fs::create_dir_all(&data).map_err(|e| format!("cannot create {}: {e}", data.display()))?;
    let (listener, addr) = bind(&cfg.listen).await?;
    let advertise = match &cfg.advertise {
        Some(a) => a.clone(),
        None => default_advertise(listener.local_addr()?, &mnode).await?,
    };
    let (sec, auth) = secure::Secured::for_dnode(&data, &cfg.security, &mnode)?;
    tidal_vnode::column_cache::configure(cfg.column_cache_max_bytes);
    let opts = DnodeOptions {
        heartbeat_interval_ms: cfg.heartbeat_interval_ms,
        register_timeout_ms: cfg.register_timeout_ms,
        query_memory_max_bytes: cfg.common.query_memory_max_bytes,
    };
    let svc = DnodeService::start(
        data.clone(),
        advertise.clone(),
        sec.internal.clone(),
        opts,
        auth,
        variables.clone(),
    )
    .await?;
    let sql = SqlService::new(
        sec.forward.clone(),
        cfg.common.query_timeout_ms,
        cfg.common.query_memory_max_bytes,
    )
    .with_variables(variables);
    if let Some(h) = &cfg.http {
        crate::http::start(h, sec.forward.clone(), sec.http()?).await?;
    }
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (frames_stop, frames_stop_rx) = tokio::sync::watch::channel(false);
    // Fragment frames share the gRPC port (told apart by the first byte); not with TLS.
    let incoming: std::pin::Pin<Box<dyn tokio_stream::Stream<Item = _> + Send>> =
        if sec.serves_frames() {
            let fs = frames::FrameServer::new(svc.clone(), sec.verifier.clone(), frames_stop_rx);
            Box::pin(frames::split(sec.incoming(listener), fs))
        } else {
            Box::pin(sec.incoming(listener))
        };
    let mut server = tokio::spawn(
        sec.server()?
            .add_service(sec.forward_auth())
            .add_service(write_grpc::DnodeGrpc::new(svc.clone()))
            .add_service(
                SqlServer::new(sql)
                    .max_decoding_message_size(GRPC_MESSAGE_BYTES_MAX)
                    .max_encoding_message_size(GRPC_MESSAGE_BYTES_MAX),
            )
            .serve_with_incoming_shutdown(incoming, async {
                let _ = stop_rx.await;
            }),
    );
    announce("vnode", &addr);
    tracing::info!(listen = %addr, %advertise, %mnode, data = %data.display(), "data node ready");
    let ended_by_itself = tokio::select! {
        _ = signals.recv() => None,
        r = &mut server => Some(join_error(r)),
    };
    if let Some(e) = ended_by_itself {
        // Still flush: the vnodes are intact even if the gRPC server failed.
        tracing::error!("gRPC server stopped: {e}; flushing the vnodes before exiting");
        let flush = async {
            svc.drain().await;
            svc.flush_and_close().await.map_err(BoxError::from)?;
            Ok(ExitCode::FAILURE)
        };
        bounded_shutdown(cfg.common.shutdown_timeout_ms, &mut signals, flush).await?;
        return Err(format!("gRPC server stopped: {e}").into());
    }
    tracing::info!(
        "shutting down: refusing new writes, finishing in-flight ones, flushing memtables"
    );
    let graceful = async move {
        svc.drain().await;
        let flushed = svc.flush_and_close().await;
        // Reads were served until the vnodes closed; now stop the server.
        let _ = stop_tx.send(());
        let _ = frames_stop.send(true);
        let served = join_error(server.await);
        match flushed {
            Ok(n) => tracing::info!(
                vnodes = n,
                "memtables flushed; the WAL has nothing to replay"
            ),
            Err(e) => {
                tracing::error!("flush at shutdown failed (the WAL keeps the data): {e}");
                return Ok(ExitCode::FAILURE);
            }
        }
        if !served.is_empty() {
            return Err(format!("gRPC server: {served}").into());
        }
        tracing::info!("data node stopped");
        Ok(ExitCode::SUCCESS)
    };
    bounded_shutdown(cfg.common.shutdown_timeout_ms, &mut signals, graceful).await
}
