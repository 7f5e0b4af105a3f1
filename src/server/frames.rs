//! A data node's side of frames (protocol: `client/src/FRAMES.md`): the lean transport of
//! `ExecFragments` and of row-block writes on plain TCP, served on the gRPC port.
//!
//! Owns telling the two protocols apart by a connection's first byte and serving frame
//! connections, one call at a time each.
//!
//! Invariants:
//! - A fragment call is the `ExecFragments` gRPC call, and a write the `Write` call: the same
//!   token check, the same `DnodeService::fragments_call` / `DnodeService::write_as`, the same
//!   request reader. Only the framing differs.
//! - A call's parts are written as they come, through the call's bounded channel: a client
//!   that stops reading stops the fragment (TCP back-pressure), it never fills memory.
//! - Anything the client sends while its fragment call runs, or its closing the connection,
//!   cancels the call. A write, once read, runs to its end (as over gRPC).
//! - A write's request is a slice of the connection's read buffer, dropped once read into a
//!   batch: the buffer is kept while calls keep coming, so the next request lands in memory
//!   already mapped, and replaced after [`BUFFER_IDLE_MS`] without a call.
//! - No input ends the process: every bad frame gets an ERROR frame and the connection
//!   closes.
//! - With TLS, frames are not served (every connection goes to gRPC, whose TLS the
//!   clients use).

use super::auth::{Principal, Verifier};
use super::net::Conn;
use super::DnodeService;
use bytes::{Bytes, BytesMut};
use futures::{FutureExt, Stream, StreamExt};
use std::io;
use std::sync::Arc;
use std::time::Duration;
use tidal_client::frames::{self, Exec, Frame, FrameError, Kind};
use tidal_common::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long a new connection may stay silent before it is handed to gRPC anyway (which has
/// its own timeouts).
const SNIFF_TIMEOUT_MS: u64 = 10_000;
/// How long a frame connection has to send its preface.
const PREFACE_TIMEOUT_MS: u64 = 10_000;
/// Sniffed gRPC connections waiting for the gRPC server to take them.
const SNIFFED_QUEUE: usize = 64;
/// Parts already produced are written together up to this many bytes.
const CORK_BYTES_MAX: usize = 1 << 20;
/// How long a connection keeps a read buffer larger than
/// [`frames::IDLE_BUFFER_BYTES_MAX`] without a call.
const BUFFER_IDLE_MS: u64 = 1_000;

/// Serves frame connections for one data node.
pub struct FrameServer {
    svc: DnodeService,
    verifier: Arc<Verifier>,
    /// Turns true at shutdown: idle connections close.
    stop: tokio::sync::watch::Receiver<bool>,
}

impl FrameServer {
    pub fn new(
        svc: DnodeService,
        verifier: Arc<Verifier>,
        stop: tokio::sync::watch::Receiver<bool>,
    ) -> Arc<FrameServer> {
        Arc::new(FrameServer {
            svc,
            verifier,
            stop,
        })
    }
}

/// The connections of `incoming` that speak gRPC; frame connections are served by `server`
/// on tasks of their own. Each connection is looked at on its own task, so a silent one
/// delays no other. Stops accepting once the returned stream is dropped.
pub fn split<S>(incoming: S, server: Arc<FrameServer>) -> impl Stream<Item = io::Result<Conn>>
where
    S: Stream<Item = io::Result<Conn>> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel::<io::Result<Conn>>(SNIFFED_QUEUE);
    tokio::spawn(async move {
        let mut incoming = std::pin::pin!(incoming);
        loop {
            let next = tokio::select! {
                n = incoming.next() => n,
                _ = tx.closed() => return,
            };
            match next {
                None => return,
                Some(Err(e)) => {
                    if tx.send(Err(e)).await.is_err() {
                        return;
                    }
                }
                Some(Ok(conn)) => {
                    let (tx, server) = (tx.clone(), server.clone());
                    tokio::spawn(async move {
                        let first = tokio::time::timeout(
                            Duration::from_millis(SNIFF_TIMEOUT_MS),
                            conn.first_byte(),
                        )
                        .await;
                        match first {
                            Ok(Ok(Some(b))) if b == frames::MAGIC[0] => server.serve(conn).await,
                            // Closed or failed before saying anything.
                            Ok(Ok(None)) | Ok(Err(_)) => {}
                            _ => {
                                let _ = tx.send(Ok(conn)).await;
                            }
                        }
                    });
                }
            }
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

enum ReadError {
    Io,
    Frame(FrameError),
}

/// The next frame; `Ok(None)` at a clean end of stream between frames.
async fn read_frame(conn: &mut Conn, buf: &mut BytesMut) -> Result<Option<Frame>, ReadError> {
    loop {
        if let Some(f) = frames::decode(buf, frames::FRAME_BYTES_MAX).map_err(ReadError::Frame)? {
            return Ok(Some(f));
        }
        if buf.capacity() - buf.len() < 1024 {
            buf.reserve(64 << 10);
        }
        match conn.read_buf(buf).await {
            Ok(0) if buf.is_empty() => return Ok(None),
            Ok(0) | Err(_) => return Err(ReadError::Io),
            Ok(_) => {}
        }
    }
}

/// Writes an ERROR frame (the connection is closed after it by the caller).
async fn refuse(conn: &mut Conn, code: StatusCode, message: &str) {
    let mut out = Vec::new();
    frames::encode_error(&mut out, code, message);
    let _ = conn.write_all(&out).await;
    let _ = conn.shutdown().await;
}

impl FrameServer {
    async fn serve(self: Arc<Self>, mut conn: Conn) {
        let mut preface = [0u8; frames::PREFACE_BYTES];
        let read = tokio::time::timeout(
            Duration::from_millis(PREFACE_TIMEOUT_MS),
            conn.read_exact(&mut preface),
        )
        .await;
        if !matches!(read, Ok(Ok(_))) {
            return;
        }
        if let Err(e) = frames::check_preface(&preface) {
            return refuse(&mut conn, e.code(), &e.to_string()).await;
        }
        if let Some(s) = conn.refusal() {
            return refuse(&mut conn, tidal_proto::code_of(&s), s.message()).await;
        }
        let _open = self.svc.frame_connection();
        let mut buf = BytesMut::with_capacity(8 << 10);
        let mut out = Vec::new();
        let mut stop = self.stop.clone();
        loop {
            if *stop.borrow() {
                return;
            }
            // A large read buffer is kept while calls keep coming: a WRITE's body is read
            // from the socket into it, and once the write has been read out of it (the body
            // dropped) the next one lands in the same, already mapped, memory rather than
            // in fresh pages. An idle connection holds no large buffer.
            let large = buf.capacity() > frames::IDLE_BUFFER_BYTES_MAX;
            let frame = tokio::select! {
                f = read_frame(&mut conn, &mut buf) => f,
                _ = stop.changed() => return,
                _ = tokio::time::sleep(Duration::from_millis(frames::SERVER_IDLE_MS)) => return,
                _ = tokio::time::sleep(Duration::from_millis(BUFFER_IDLE_MS)), if large => {
                    if buf.is_empty() {
                        buf = BytesMut::with_capacity(8 << 10);
                    }
                    continue;
                }
            };
            let frame = match frame {
                Ok(Some(f)) => f,
                Ok(None) | Err(ReadError::Io) => return,
                Err(ReadError::Frame(e)) => {
                    return refuse(&mut conn, e.code(), &e.to_string()).await
                }
            };
            let go_on = match frame.kind {
                Kind::Exec => match Exec::decode(frame.body) {
                    Ok(x) => self.call(&mut conn, x, &mut out).await,
                    Err(e) => return refuse(&mut conn, e.code(), &e.to_string()).await,
                },
                Kind::Write => match frames::decode_write(frame.body) {
                    Ok((token, request)) => self.write(&mut conn, &token, request, &mut out).await,
                    Err(e) => return refuse(&mut conn, e.code(), &e.to_string()).await,
                },
                k => {
                    let e = format!("expected an EXEC or WRITE frame, got {k:?}");
                    return refuse(&mut conn, StatusCode::InvalidArgument, &e).await;
                }
            };
            if !go_on {
                return;
            }
            if out.capacity() > frames::IDLE_BUFFER_BYTES_MAX {
                out = Vec::new();
            }
        }
    }

    /// The caller a `call` ("write", "fragment call") carries the token of, as its gRPC
    /// form would be authenticated.
    fn caller(&self, token: &str, call: &str) -> Result<Principal, tonic::Status> {
        if token.is_empty() {
            return Err(tidal_proto::status_error(
                StatusCode::Unauthenticated,
                format!("no credentials: log in (Auth/Login) and send a token with each {call}"),
            ));
        }
        self.verifier.verify(token)
    }

    /// Runs one write and writes its answer; `false` when the connection must close. The
    /// write runs to its end even if the client goes away meanwhile, as over gRPC.
    async fn write(&self, conn: &mut Conn, token: &str, request: Bytes, out: &mut Vec<u8>) -> bool {
        out.clear();
        self.svc.count_frame_write();
        let done = async {
            let p = self.caller(token, "write")?;
            // The request is read out of `request` into a batch here, and `request` (a
            // slice of the connection's read buffer) dropped with it.
            let input = super::write_grpc::decode_write(request)?;
            self.svc.write_as(&p, input).await
        }
        .await;
        match done {
            Ok(r) => frames::encode_wrote(out, &r),
            Err(s) => frames::encode_error(out, tidal_proto::code_of(&s), s.message()),
        }
        conn.write_all(out).await.is_ok()
    }

    /// Runs one call and writes its answer; `false` when the connection must close (the
    /// client cancelled or went away).
    async fn call(&self, conn: &mut Conn, exec: Exec, out: &mut Vec<u8>) -> bool {
        out.clear();
        self.svc.count_frame_call();
        let started = self
            .caller(&exec.token, "fragment call")
            .and_then(|p| self.svc.fragments_call(&p, exec.request, exec.timeout));
        let mut parts = match started {
            Ok(parts) => parts,
            Err(s) => {
                frames::encode_error(out, tidal_proto::code_of(&s), s.message());
                return conn.write_all(out).await.is_ok();
            }
        };
        let mut probe = [0u8; 1];
        loop {
            let item = tokio::select! {
                biased;
                item = parts.next() => item,
                // A client sends nothing while its call runs: this is its closing (cancel).
                _ = conn.read(&mut probe) => return false,
            };
            out.clear();
            let mut end = put(out, item);
            // What is ready already goes in the same write.
            while !end && out.len() < CORK_BYTES_MAX {
                match parts.next().now_or_never() {
                    Some(item) => end = put(out, item),
                    None => break,
                }
            }
            if conn.write_all(out).await.is_err() {
                return false;
            }
            if end {
                return true;
            }
        }
    }
}

/// Appends the frame of a stream item; whether it ends the call.
fn put(
    out: &mut Vec<u8>,
    item: Option<Result<tidal_proto::v1::FragmentsPart, tonic::Status>>,
) -> bool {
    match item {
        Some(Ok(p)) => {
            frames::encode_part(out, &p);
            false
        }
        Some(Err(s)) => {
            frames::encode_error(out, tidal_proto::code_of(&s), s.message());
            true
        }
        None => {
            frames::encode_end(out);
            true
        }
    }
}
