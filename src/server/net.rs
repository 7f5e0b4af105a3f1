//! What a server accepts on its sockets: TLS (rustls), the limit on concurrent connections,
//! and the security settings of the server roles (docs/SECURITY.md).
//!
//! Connection limit: each accepted connection takes a permit; over the limit a connection is
//! still accepted (so the client gets an answer rather than a hang or a reset), every request
//! on it is refused with `ResourceExhausted: too many connections`, and it is closed after
//! [`REFUSED_LINGER_MS`]. At most [`REFUSED_CONNECTIONS_MAX`] such connections are kept; beyond
//! that new connections are closed at once.

use clap::Args;
use serde::{Deserialize, Serialize};
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tidal_common::StatusCode;
use tidal_proto::status_error;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::transport::server::{Connected, TlsConnectInfo};

/// Default limit of concurrent connections per server (gRPC and HTTP each).
pub const CONNECTIONS_MAX: usize = 4096;
/// Connections over the limit that are kept open to answer with a clear refusal.
pub const REFUSED_CONNECTIONS_MAX: usize = 64;
/// How long a refused connection stays open (for its requests to get their answer).
pub const REFUSED_LINGER_MS: u64 = 2_000;
/// Largest certificate or key file read.
const PEM_BYTES_MAX: u64 = 1 << 20;

/// Keys every server role has (flags `--tls-cert`, ...; see `config.rs` for env and file).
#[derive(Args, Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ServerSecurity {
    /// Serve gRPC and HTTP over TLS with this certificate chain (PEM); needs `tls_key`.
    #[arg(long)]
    pub tls_cert: Option<PathBuf>,
    /// The private key of `tls_cert` (PEM).
    #[arg(long)]
    pub tls_key: Option<PathBuf>,
    /// CA certificate (PEM) this server trusts when it calls other nodes over TLS (default:
    /// `tls_cert` itself, which suits one self-signed certificate shared by the cluster).
    #[arg(long)]
    pub tls_ca: Option<PathBuf>,
    /// Concurrent connections accepted (gRPC and HTTP each); more are refused with
    /// "too many connections".
    #[arg(long, default_value_t = CONNECTIONS_MAX)]
    pub max_connections: usize,
}

/// The mnode's security keys.
#[derive(Args, Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct MnodeSecurity {
    /// root's password on the very first start (default `taosdata`; later starts ignore it:
    /// use ALTER USER root PASS '...').
    #[arg(long)]
    pub root_password: Option<String>,
    #[command(flatten)]
    #[serde(flatten)]
    pub server: ServerSecurity,
}

/// A data node's security keys.
#[derive(Args, Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct DnodeSecurity {
    /// Superuser a new data node joins the cluster as (once joined it keeps the cluster
    /// secret in its data directory and needs no password).
    #[arg(long, default_value = tidal_client::auth::DEFAULT_USER)]
    pub user: String,
    /// Password of `user`.
    #[arg(long, default_value = tidal_client::auth::DEFAULT_PASSWORD)]
    pub password: String,
    #[command(flatten)]
    #[serde(flatten)]
    pub server: ServerSecurity,
}

fn read_pem(what: &str, path: &Path) -> Result<Vec<u8>, String> {
    let len = std::fs::metadata(path)
        .map_err(|e| format!("cannot read the {what} {}: {e}", path.display()))?
        .len();
    if len > PEM_BYTES_MAX {
        return Err(format!(
            "the {what} {} is larger than {PEM_BYTES_MAX} bytes",
            path.display()
        ));
    }
    let bytes = std::fs::read(path)
        .map_err(|e| format!("cannot read the {what} {}: {e}", path.display()))?;
    if !bytes.windows(10).any(|w| w == b"-----BEGIN") {
        return Err(format!("the {what} {} is not PEM", path.display()));
    }
    Ok(bytes)
}

/// A CA file for clients (`--tls-ca`).
pub fn read_ca(path: &Path) -> Result<Vec<u8>, String> {
    read_pem("CA certificate (tls_ca)", path)
}

/// Certificate and key of a TLS server, read and checked at start.
#[derive(Clone)]
pub struct ServerTls {
    pub cert_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
    /// What this server's own client trusts.
    pub ca_pem: Vec<u8>,
}

impl std::fmt::Debug for ServerTls {
    // Never prints the private key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ServerTls {{ cert: {} bytes }}", self.cert_pem.len())
    }
}

impl ServerTls {
    pub fn grpc(&self) -> tonic::transport::ServerTlsConfig {
        tonic::transport::ServerTlsConfig::new().identity(tonic::transport::Identity::from_pem(
            &self.cert_pem,
            &self.key_pem,
        ))
    }

    /// rustls configuration for the HTTP API.
    pub fn rustls(&self) -> Result<Arc<tokio_rustls::rustls::ServerConfig>, String> {
        use tokio_rustls::rustls;
        use tokio_rustls::rustls::pki_types::pem::PemObject;
        use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&self.cert_pem)
            .collect::<Result<_, _>>()
            .map_err(|e| format!("tls_cert: {e}"))?;
        if certs.is_empty() {
            return Err("tls_cert holds no certificate".into());
        }
        let key =
            PrivateKeyDer::from_pem_slice(&self.key_pem).map_err(|e| format!("tls_key: {e}"))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|e| format!("tls_cert/tls_key do not form a valid identity: {e}"))?;
        cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(cfg))
    }
}

impl ServerSecurity {
    /// Reads the certificate files (`None` without `tls_cert`).
    pub fn tls(&self) -> Result<Option<ServerTls>, String> {
        match (&self.tls_cert, &self.tls_key) {
            (None, None) => {
                if self.tls_ca.is_some() {
                    return Err("tls_ca is set without tls_cert/tls_key: a server needs its own certificate to serve TLS".into());
                }
                Ok(None)
            }
            (Some(_), None) => Err("tls_cert is set without tls_key".into()),
            (None, Some(_)) => Err("tls_key is set without tls_cert".into()),
            (Some(c), Some(k)) => {
                let cert_pem = read_pem("certificate (tls_cert)", c)?;
                let key_pem = read_pem("private key (tls_key)", k)?;
                let ca_pem = match &self.tls_ca {
                    Some(p) => read_ca(p)?,
                    None => cert_pem.clone(),
                };
                let tls = ServerTls {
                    cert_pem,
                    key_pem,
                    ca_pem,
                };
                // Fail at start, not at the first handshake.
                tls.rustls()?;
                Ok(Some(tls))
            }
        }
    }

    pub fn check(&self) -> Result<(), String> {
        if self.max_connections == 0 {
            return Err("max_connections must be at least 1".into());
        }
        Ok(())
    }
}

/// Per-connection information tonic puts in every request's extensions.
#[derive(Clone, Debug)]
pub struct ConnInfo {
    pub remote: Option<std::net::SocketAddr>,
    /// `Some(limit)` if this connection was accepted over the limit (refused).
    pub over_limit: Option<usize>,
}

/// The refusal for a request on a connection accepted over the limit.
pub fn over_limit(ext: &http::Extensions) -> Option<tonic::Status> {
    let info = ext
        .get::<ConnInfo>()
        .or_else(|| ext.get::<TlsConnectInfo<ConnInfo>>().map(|t| t.get_ref()))?;
    info.over_limit.map(refusal)
}

fn refusal(limit: usize) -> tonic::Status {
    status_error(
        StatusCode::ResourceExhausted,
        format!("ResourceExhausted: too many connections to this server (limit {limit}); close idle clients or raise max_connections"),
    )
}

/// The message an HTTP client gets over the limit.
pub fn refusal_message(limit: usize) -> String {
    refusal(limit).message().to_string()
}

/// Admission of connections.
#[derive(Clone)]
pub struct ConnLimit {
    limit: usize,
    permits: Arc<Semaphore>,
    refused: Arc<Semaphore>,
}

/// What [`ConnLimit::admit`] decided.
pub enum Admission {
    Admitted(OwnedSemaphorePermit),
    /// Over the limit: answer with a refusal (holding this permit), then close.
    Refused(OwnedSemaphorePermit),
    /// Over the limit and too many refusals pending: close at once.
    Drop,
}

impl ConnLimit {
    pub fn new(limit: usize) -> ConnLimit {
        ConnLimit {
            limit: limit.max(1),
            permits: Arc::new(Semaphore::new(limit.max(1))),
            refused: Arc::new(Semaphore::new(REFUSED_CONNECTIONS_MAX)),
        }
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    pub fn admit(&self) -> Admission {
        if let Ok(p) = self.permits.clone().try_acquire_owned() {
            return Admission::Admitted(p);
        }
        match self.refused.clone().try_acquire_owned() {
            Ok(p) => Admission::Refused(p),
            Err(_) => Admission::Drop,
        }
    }
}

/// An accepted gRPC connection: the socket plus its admission.
pub struct Conn {
    io: TcpStream,
    _permit: OwnedSemaphorePermit,
    info: ConnInfo,
    /// For a refused connection: when it is closed.
    linger: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Conn {
    /// The first byte the peer sent, left in the socket; `None` if it closed first.
    pub async fn first_byte(&self) -> io::Result<Option<u8>> {
        let mut b = [0u8; 1];
        let n = self.io.peek(&mut b).await?;
        Ok((n == 1).then_some(b[0]))
    }

    /// The refusal every request on this connection gets, if it was accepted over the limit.
    pub fn refusal(&self) -> Option<tonic::Status> {
        self.info.over_limit.map(refusal)
    }
}

impl Connected for Conn {
    type ConnectInfo = ConnInfo;
    fn connect_info(&self) -> ConnInfo {
        self.info.clone()
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if let Some(l) = self.linger.as_mut() {
            if l.as_mut().poll(cx).is_ready() {
                // End of stream: the server closes the refused connection.
                return Poll::Ready(Ok(()));
            }
        }
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

/// The accepted connections of a gRPC listener, with Nagle's algorithm off (requests and
/// answers are small messages that must not wait for the peer's delayed ACK) and the
/// connection limit applied.
pub fn incoming(
    listener: TcpListener,
    limit: ConnLimit,
) -> impl tokio_stream::Stream<Item = io::Result<Conn>> {
    futures::stream::unfold((listener, limit), |(listener, limit)| async move {
        loop {
            let (io, remote) = match listener.accept().await {
                Ok(x) => x,
                // Per-connection failures (the peer reset before accept, out of file
                // descriptors) must not end the server: report and keep accepting.
                Err(e) => return Some((Err(e), (listener, limit))),
            };
            let _ = io.set_nodelay(true);
            let (permit, over, linger) = match limit.admit() {
                Admission::Admitted(p) => (p, None, None),
                Admission::Refused(p) => {
                    tracing::warn!(%remote, limit = limit.limit(), "refusing a connection: too many connections");
                    (
                        p,
                        Some(limit.limit()),
                        Some(Box::pin(tokio::time::sleep(Duration::from_millis(
                            REFUSED_LINGER_MS,
                        )))),
                    )
                }
                Admission::Drop => {
                    drop(io);
                    continue;
                }
            };
            let conn = Conn {
                io,
                _permit: permit,
                info: ConnInfo {
                    remote: Some(remote),
                    over_limit: over,
                },
                linger,
            };
            return Some((Ok(conn), (listener, limit)));
        }
    })
}

/// How long an HTTP client has to complete the TLS handshake.
const TLS_HANDSHAKE_TIMEOUT_MS: u64 = 10_000;

/// Serves `app` (the HTTP API) on `listener` until `shutdown` resolves, with TLS if `tls` is
/// set and at most `limit` connections: over it a client gets `503` with a JSON message and
/// the connection is closed. On shutdown, stops accepting and lets open connections finish.
pub async fn serve_http(
    listener: TcpListener,
    app: axum::Router,
    tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    limit: ConnLimit,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use hyper_util::server::conn::auto::Builder;
    use hyper_util::service::TowerToHyperService;
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (io, remote) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!("HTTP accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let _ = io.set_nodelay(true);
        let (permit, refused) = match limit.admit() {
            Admission::Admitted(p) => (p, false),
            Admission::Refused(p) => (p, true),
            Admission::Drop => continue,
        };
        let acceptor = acceptor.clone();
        let app = app.clone();
        let limit_n = limit.limit();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let _permit = permit;
            let stream: Box<dyn HttpIo> = match acceptor {
                None => Box::new(io),
                Some(a) => {
                    let hs = tokio::time::timeout(
                        Duration::from_millis(TLS_HANDSHAKE_TIMEOUT_MS),
                        a.accept(io),
                    )
                    .await;
                    match hs {
                        Ok(Ok(s)) => Box::new(s),
                        Ok(Err(e)) => {
                            tracing::debug!(%remote, "HTTP TLS handshake failed: {e}");
                            return;
                        }
                        Err(_) => {
                            tracing::debug!(%remote, "HTTP TLS handshake timed out");
                            return;
                        }
                    }
                }
            };
            if refused {
                tracing::warn!(%remote, limit = limit_n, "refusing an HTTP connection: too many connections");
                refuse_http(stream, limit_n).await;
                return;
            }
            let svc = TowerToHyperService::new(app);
            let builder = Builder::new(TokioExecutor::new());
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), svc);
            if let Err(e) = watcher.watch(conn.into_owned()).await {
                tracing::debug!(%remote, "HTTP connection ended: {e}");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// A byte stream an HTTP connection runs on (plain TCP or TLS).
trait HttpIo: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> HttpIo for T {}

async fn refuse_http(mut s: Box<dyn HttpIo>, limit: usize) {
    use tokio::io::AsyncWriteExt;
    let body = serde_json::json!({
        "code": StatusCode::ResourceExhausted.as_u32(),
        "error": refusal_message(limit),
        "desc": refusal_message(limit),
    })
    .to_string();
    let resp = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\nRetry-After: 1\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(Duration::from_millis(REFUSED_LINGER_MS), async {
        let _ = s.write_all(resp.as_bytes()).await;
        let _ = s.shutdown().await;
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admission_counts_permits_and_refusals() {
        let l = ConnLimit::new(1);
        let a = l.admit();
        assert!(matches!(a, Admission::Admitted(_)));
        let mut refused = Vec::new();
        for _ in 0..REFUSED_CONNECTIONS_MAX {
            match l.admit() {
                Admission::Refused(p) => refused.push(p),
                _ => panic!("expected a refusal"),
            }
        }
        assert!(matches!(l.admit(), Admission::Drop));
        drop(a);
        assert!(matches!(l.admit(), Admission::Admitted(_)));
    }

    #[test]
    fn tls_settings_are_checked() {
        let none = ServerSecurity {
            tls_cert: None,
            tls_key: None,
            tls_ca: None,
            max_connections: 1,
        };
        assert!(none.tls().unwrap().is_none());
        let half = ServerSecurity {
            tls_cert: Some("/nonexistent.pem".into()),
            ..none.clone()
        };
        assert!(half.tls().unwrap_err().contains("without tls_key"));
        let missing = ServerSecurity {
            tls_key: Some("/nonexistent.key".into()),
            ..half
        };
        assert!(missing.tls().unwrap_err().contains("cannot read"));
        assert!(ServerSecurity {
            max_connections: 0,
            ..none
        }
        .check()
        .is_err());
    }
}
