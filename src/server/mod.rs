//! Server roles. Each role binds its gRPC port, prints `ready <role> <addr>` once it accepts
//! requests, serves until SIGINT/SIGTERM, then shuts down cleanly. Every role also serves the
//! SQL frontend, which talks to the cluster through the client library, and, with
//! `--http ADDR`, the HTTP API (announced first, as `ready http <addr>`).

mod dnode_svc;
mod mnode_svc;

pub use dnode_svc::DnodeService;
pub use mnode_svc::MnodeService;

use crate::frontend::SqlService;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use tidal_proto::v1::{
    dnode_server::DnodeServer, mnode_server::MnodeServer, sql_server::SqlServer,
};
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;

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
    data: PathBuf,
    listen: String,
    http: Option<String>,
) -> Result<ExitCode, BoxError> {
    std::fs::create_dir_all(&data).map_err(|e| format!("cannot create {}: {e}", data.display()))?;
    let mnode = tidal_mnode::Mnode::open(&data).map_err(|e| format!("open mnode catalog: {e}"))?;
    let (listener, addr) = bind(&listen).await?;
    let client = tidal_client::Client::connect(&addr).await?;
    let svc = MnodeService::new(Arc::new(mnode), client.clone());
    let sql = SqlService::new(client.clone());
    // The HTTP line comes before the role's line so that whoever waits for the role's line
    // has seen the HTTP address by then.
    if let Some(h) = http {
        crate::http::start(&h, client).await?;
    }
    announce("mnode", &addr);
    tonic::transport::Server::builder()
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
        .serve_with_incoming_shutdown(incoming(listener), shutdown_signal())
        .await?;
    Ok(ExitCode::SUCCESS)
}

/// Accepted connections with Nagle's algorithm off: requests and answers are small messages
/// that must not wait for the peer's delayed ACK (that costs ~40 ms per round trip).
fn incoming(
    listener: tokio::net::TcpListener,
) -> impl tokio_stream::Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    use tokio_stream::StreamExt;
    TcpListenerStream::new(listener).map(|r| {
        r.inspect(|s| {
            let _ = s.set_nodelay(true);
        })
    })
}

pub async fn run_dnode(
    data: PathBuf,
    listen: String,
    mnode: String,
    advertise: Option<String>,
    http: Option<String>,
) -> Result<ExitCode, BoxError> {
    std::fs::create_dir_all(&data).map_err(|e| format!("cannot create {}: {e}", data.display()))?;
    let (listener, addr) = bind(&listen).await?;
    let advertise = advertise.unwrap_or_else(|| addr.clone());
    let client = tidal_client::Client::connect(&mnode).await?;
    let svc = DnodeService::start(data, advertise, client.clone()).await?;
    let sql = SqlService::new(client.clone());
    if let Some(h) = http {
        crate::http::start(&h, client).await?;
    }
    announce("vnode", &addr);
    let result = tonic::transport::Server::builder()
        .add_service(
            DnodeServer::new(svc.clone())
                .max_decoding_message_size(GRPC_MESSAGE_BYTES_MAX)
                .max_encoding_message_size(GRPC_MESSAGE_BYTES_MAX),
        )
        .add_service(
            SqlServer::new(sql)
                .max_decoding_message_size(GRPC_MESSAGE_BYTES_MAX)
                .max_encoding_message_size(GRPC_MESSAGE_BYTES_MAX),
        )
        .serve_with_incoming_shutdown(incoming(listener), shutdown_signal())
        .await;
    svc.shutdown().await;
    result?;
    Ok(ExitCode::SUCCESS)
}
