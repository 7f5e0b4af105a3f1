//! Frames: the lean transport of query fragments and row-block writes between a coordinator
//! and a data node (the protocol is in `FRAMES.md` beside this file).
//!
//! gRPC costs about 90 us of CPU per round trip on each side beyond TCP itself (HTTP/2
//! framing, hyper, tonic, a task per call). A short query (LAST_ROW of one truck) is a few
//! microseconds of work per vnode, so that overhead *was* its latency; a write of a
//! megabyte of row blocks paid it in copies into fresh buffers and HTTP/2 framing. Fragment
//! calls and row-block writes therefore go over plain TCP connections with length-prefixed
//! frames; every other call stays on gRPC.
//!
//! Owns the frame codec (shared with the server in `src/server/frames.rs`) and the client's
//! pool of idle frame connections.
//!
//! Invariants:
//! - One call at a time per connection; a connection goes back to the pool only after its
//!   call's last frame (END, WROTE) was read, so a pooled connection never holds unread
//!   frames.
//! - Dropping a fragment call closes its connection: that is how a call is cancelled (the
//!   server watches the socket while the fragment runs). A write is not cancelled: it runs
//!   to its end on the server, and a write whose answer was lost is sent again (a row is
//!   identified by its subtable and timestamp, so it is stored once).
//! - The token travels with each call, not with the connection: a forwarding client sends
//!   each caller's own token, and a revoked token stops at the next call.
//! - Frames are bounded by [`FRAME_BYTES_MAX`]; a decoder reserves at most
//!   [`RESERVE_AT_ONCE_BYTES_MAX`] ahead of what arrived, so a lying length costs no
//!   memory (room it reserves is only touched as bytes arrive).

use crate::ClientError;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use parking_lot::Mutex;
use prost::Message;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tidal_common::StatusCode;
use tidal_proto::v1;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What a frame connection starts with. The first byte is neither `P` (the HTTP/2 preface)
/// nor 0x16 (a TLS handshake), so a server tells the protocols apart by one byte.
pub const MAGIC: [u8; 4] = [0xF7, b'T', b'D', b'F'];
/// The preface: [`MAGIC`] then the wire version (u32 little-endian).
pub const PREFACE_BYTES: usize = 8;
/// Length (u32 LE, of the body) and kind (u8).
pub const HEADER_BYTES: usize = 5;
/// Largest frame body either side accepts (the gRPC message limit).
pub const FRAME_BYTES_MAX: usize = crate::MESSAGE_BYTES_MAX;
/// Longest token an EXEC frame may carry.
pub const TOKEN_BYTES_MAX: usize = crate::auth::TOKEN_BYTES_MAX;
/// How much a reader asks the socket for at a time.
const READ_CHUNK_BYTES: usize = 64 << 10;
/// Room a reader reserves for a frame as soon as its header is in, at most (see
/// [`decode`]).
pub const RESERVE_AT_ONCE_BYTES_MAX: usize = 4 << 20;
/// Idle connections kept per data node.
pub const IDLE_CONNECTIONS_MAX: usize = 16;
/// Frame calls in flight from one client to one data node, at most. Each holds a TCP
/// connection of its own; the calls beyond go over gRPC, which multiplexes them on one
/// connection, so a burst of queries never costs a data node thousands of sockets.
pub const CALLS_IN_FLIGHT_MAX: usize = 64;
/// How long a client keeps an idle connection (shorter than the server's
/// [`SERVER_IDLE_MS`], so the client is the one that closes).
pub const CLIENT_IDLE_MS: u64 = 30_000;
/// How long a server keeps a connection that carries no call.
pub const SERVER_IDLE_MS: u64 = 120_000;
/// After a data node did not speak frames, how long its fragments go over gRPC.
pub const GRPC_ONLY_MS: u64 = 60_000;
const CONNECT_TIMEOUT_MS: u64 = 3_000;
/// How long a call without a timeout may take, as the gRPC channel's timeout: a data node
/// that stops answering (frozen, or cut off without a reset) fails the call instead of
/// hanging it.
pub const CALL_TIMEOUT_MS_DEFAULT: u64 = 300_000;
/// How much longer than its timeout a client waits for a call: the data node's own deadline
/// error comes first, with its message.
const CALL_TIMEOUT_GRACE_MS: u64 = 1_000;
/// A connection's read buffer larger than this after a call (a large part) is replaced by a
/// small one, so that idle connections hold no large buffers.
pub const IDLE_BUFFER_BYTES_MAX: usize = 256 << 10;

/// A frame's kind (its fifth byte).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// client → server: run a fragment (`FragmentsRequest`).
    Exec = 1,
    /// server → client: one `FragmentsPart`.
    Part = 2,
    /// server → client: the call finished; the connection takes the next EXEC.
    End = 3,
    /// server → client: the call failed (status code and message).
    Error = 4,
    /// client → server: write rows (`WriteRequest`).
    Write = 5,
    /// server → client: the write is done (`WriteResponse`); the connection takes the next
    /// call.
    Wrote = 6,
}

impl Kind {
    fn from_u8(b: u8) -> Option<Kind> {
        Some(match b {
            1 => Kind::Exec,
            2 => Kind::Part,
            3 => Kind::End,
            4 => Kind::Error,
            5 => Kind::Write,
            6 => Kind::Wrote,
            _ => return None,
        })
    }
}

/// What is wrong with bytes read as frames.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("not a Tidal frame connection (preface {0:02x?})")]
    BadMagic([u8; 4]),
    #[error("the peer speaks Tidal wire version {got}, this process speaks {ours}: use a client and server of matching versions")]
    WireVersion { got: u32, ours: u32 },
    #[error("unknown frame kind {0}")]
    UnknownKind(u8),
    #[error("frame of {len} bytes is over the limit of {max}")]
    TooLarge { len: usize, max: usize },
    #[error("{0} frame is truncated")]
    Truncated(&'static str),
    #[error("{what} frame does not decode: {why}")]
    Decode { what: &'static str, why: String },
}

impl FrameError {
    pub fn code(&self) -> StatusCode {
        match self {
            FrameError::WireVersion { .. } => StatusCode::WireVersionMismatch,
            FrameError::TooLarge { .. } => StatusCode::ResourceExhausted,
            _ => StatusCode::InvalidArgument,
        }
    }
}

/// One decoded frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub kind: Kind,
    pub body: Bytes,
}

/// The preface a client sends first.
pub fn preface() -> [u8; PREFACE_BYTES] {
    let mut p = [0u8; PREFACE_BYTES];
    p[..4].copy_from_slice(&MAGIC);
    p[4..].copy_from_slice(&tidal_proto::WIRE_VERSION.to_le_bytes());
    p
}

/// Checks a preface a server read.
pub fn check_preface(p: &[u8; PREFACE_BYTES]) -> Result<(), FrameError> {
    let magic = [p[0], p[1], p[2], p[3]];
    if magic != MAGIC {
        return Err(FrameError::BadMagic(magic));
    }
    let got = u32::from_le_bytes([p[4], p[5], p[6], p[7]]);
    if got != tidal_proto::WIRE_VERSION {
        return Err(FrameError::WireVersion {
            got,
            ours: tidal_proto::WIRE_VERSION,
        });
    }
    Ok(())
}

/// Takes the next whole frame off the front of `buf`, `None` until one has arrived. Reserves
/// room for the rest of a frame up to [`RESERVE_AT_ONCE_BYTES_MAX`] as soon as its header
/// is in (a WRITE of row blocks, about a megabyte, is read into one buffer rather than
/// copied through a series of doubling ones), beyond that as it arrives: as much as has
/// arrived. So a lying length costs at most that much room (address space: pages are only
/// touched as bytes arrive), and a real large frame is copied a few times, not once per
/// chunk.
pub fn decode(buf: &mut BytesMut, max_bytes: usize) -> Result<Option<Frame>, FrameError> {
    if buf.len() < HEADER_BYTES {
        return Ok(None);
    }
    let len = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
    if len > max_bytes {
        return Err(FrameError::TooLarge {
            len,
            max: max_bytes,
        });
    }
    let kind = Kind::from_u8(buf[4]).ok_or(FrameError::UnknownKind(buf[4]))?;
    let want = HEADER_BYTES + len;
    if buf.len() < want {
        buf.reserve((want - buf.len()).min(RESERVE_AT_ONCE_BYTES_MAX.max(buf.len())));
        return Ok(None);
    }
    buf.advance(HEADER_BYTES);
    Ok(Some(Frame {
        kind,
        body: buf.split_to(len).freeze(),
    }))
}

/// Appends a frame whose body `body` writes.
fn put_frame(out: &mut Vec<u8>, kind: Kind, body: impl FnOnce(&mut Vec<u8>)) {
    let at = out.len();
    out.extend_from_slice(&[0, 0, 0, 0, kind as u8]);
    body(out);
    let len = (out.len() - at - HEADER_BYTES) as u32;
    out[at..at + 4].copy_from_slice(&len.to_le_bytes());
}

/// A run request: what an EXEC frame carries.
#[derive(Debug, Clone, PartialEq)]
pub struct Exec {
    /// The caller's deadline for the whole call (`None`: the server's own limits).
    pub timeout: Option<Duration>,
    pub token: String,
    pub request: v1::FragmentsRequest,
}

impl Exec {
    /// Body: timeout in us (u64 LE, 0 = none), token length (u16 LE), token (UTF-8), then
    /// the protobuf `FragmentsRequest`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        put_frame(out, Kind::Exec, |b| {
            let us = self
                .timeout
                .map(|t| (t.as_micros() as u64).max(1))
                .unwrap_or(0);
            b.put_u64_le(us);
            put_token(b, &self.token);
            self.request.encode_raw(b);
        });
    }

    pub fn decode(mut body: Bytes) -> Result<Exec, FrameError> {
        if body.len() < 10 {
            return Err(FrameError::Truncated("EXEC"));
        }
        let us = body.get_u64_le();
        let token = take_token(&mut body, "EXEC")?;
        let request = v1::FragmentsRequest::decode(body).map_err(|e| FrameError::Decode {
            what: "EXEC",
            why: e.to_string(),
        })?;
        Ok(Exec {
            timeout: (us > 0).then(|| Duration::from_micros(us)),
            token,
            request,
        })
    }
}

/// Appends a PART frame.
pub fn encode_part(out: &mut Vec<u8>, part: &v1::FragmentsPart) {
    put_frame(out, Kind::Part, |b| part.encode_raw(b));
}

/// Appends an END frame.
pub fn encode_end(out: &mut Vec<u8>) {
    put_frame(out, Kind::End, |_| {});
}

/// Appends an ERROR frame: the status code (u32 LE) and the message (UTF-8).
pub fn encode_error(out: &mut Vec<u8>, code: StatusCode, message: &str) {
    put_frame(out, Kind::Error, |b| {
        b.put_u32_le(code.as_u32());
        b.extend_from_slice(message.as_bytes());
    });
}

pub fn decode_error(mut body: Bytes) -> Result<ClientError, FrameError> {
    if body.len() < 4 {
        return Err(FrameError::Truncated("ERROR"));
    }
    let code = StatusCode::from_u32(body.get_u32_le());
    Ok(ClientError::new(
        code,
        String::from_utf8_lossy(&body).into_owned(),
    ))
}

/// The head of a WRITE frame: the frame header, token length (u16 LE) and token (UTF-8);
/// the protobuf `WriteRequest` (`request_bytes` long) follows it to the end of the body. The
/// request is not copied in here: it is written from its own buffer after this head.
pub fn write_head(out: &mut Vec<u8>, token: &str, request_bytes: usize) {
    let len = 2 + token.len().min(u16::MAX as usize) + request_bytes;
    out.put_u32_le(u32::try_from(len).unwrap_or(u32::MAX));
    out.put_u8(Kind::Write as u8);
    put_token(out, token);
}

/// A WRITE frame's body: the token and the protobuf `WriteRequest`, not decoded here (the
/// data node reads it straight into a batch).
pub fn decode_write(mut body: Bytes) -> Result<(String, Bytes), FrameError> {
    let token = take_token(&mut body, "WRITE")?;
    Ok((token, body))
}

/// Appends a call's token: its length (u16 LE), then its bytes. A longer token is cut, and
/// refused by the server as not a token.
fn put_token(out: &mut impl BufMut, token: &str) {
    let token = &token.as_bytes()[..token.len().min(u16::MAX as usize)];
    out.put_u16_le(token.len() as u16);
    out.put_slice(token);
}

/// Takes a token written by [`put_token`] off the front of `body`, a `what` frame's.
fn take_token(body: &mut Bytes, what: &'static str) -> Result<String, FrameError> {
    if body.len() < 2 {
        return Err(FrameError::Truncated(what));
    }
    let n = body.get_u16_le() as usize;
    if n > TOKEN_BYTES_MAX {
        return Err(FrameError::Decode {
            what,
            why: format!("token of {n} bytes is over the limit of {TOKEN_BYTES_MAX}"),
        });
    }
    if body.len() < n {
        return Err(FrameError::Truncated(what));
    }
    let token = std::str::from_utf8(&body[..n])
        .map_err(|_| FrameError::Decode {
            what,
            why: "the token is not UTF-8".into(),
        })?
        .to_string();
    body.advance(n);
    Ok(token)
}

/// Appends a WROTE frame.
pub fn encode_wrote(out: &mut Vec<u8>, resp: &v1::WriteResponse) {
    put_frame(out, Kind::Wrote, |b| resp.encode_raw(b));
}

pub fn decode_wrote(body: Bytes) -> Result<v1::WriteResponse, FrameError> {
    v1::WriteResponse::decode(body).map_err(|e| FrameError::Decode {
        what: "WROTE",
        why: e.to_string(),
    })
}

pub fn decode_part(body: Bytes) -> Result<v1::FragmentsPart, FrameError> {
    v1::FragmentsPart::decode(body).map_err(|e| FrameError::Decode {
        what: "PART",
        why: e.to_string(),
    })
}

/// A connection that has sent its preface.
struct Conn {
    io: TcpStream,
    buf: BytesMut,
}

impl Conn {
    /// The next frame; `Ok(None)` at a clean end of stream between frames.
    async fn read_frame(&mut self) -> std::io::Result<Result<Option<Frame>, FrameError>> {
        loop {
            match decode(&mut self.buf, FRAME_BYTES_MAX) {
                Ok(Some(f)) => return Ok(Ok(Some(f))),
                Ok(None) => {}
                Err(e) => return Ok(Err(e)),
            }
            if self.buf.capacity() - self.buf.len() < 1024 {
                self.buf.reserve(READ_CHUNK_BYTES);
            }
            if self.io.read_buf(&mut self.buf).await? == 0 {
                if self.buf.is_empty() {
                    return Ok(Ok(None));
                }
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
    }
}

/// Idle frame connections per data node, and the data nodes that did not speak frames.
#[derive(Default)]
pub(crate) struct Pool {
    idle: Mutex<HashMap<String, Vec<(Conn, Instant)>>>,
    grpc_only: Mutex<HashMap<String, Instant>>,
    /// Frame calls in flight per data node (see [`CALLS_IN_FLIGHT_MAX`]).
    in_flight: Mutex<HashMap<String, usize>>,
}

/// A frame call's place among its data node's [`CALLS_IN_FLIGHT_MAX`].
struct Slot<'a> {
    pool: &'a Pool,
    addr: String,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut m = self.pool.in_flight.lock();
        if let Some(n) = m.get_mut(&self.addr) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                m.remove(&self.addr);
            }
        }
    }
}

impl Pool {
    /// Whether fragments to `addr` go over gRPC for now.
    pub(crate) fn grpc_only(&self, addr: &str) -> bool {
        let mut g = self.grpc_only.lock();
        match g.get(addr) {
            Some(t) if t.elapsed() < Duration::from_millis(GRPC_ONLY_MS) => true,
            Some(_) => {
                g.remove(addr);
                false
            }
            None => false,
        }
    }

    /// A place for one more call to `addr`, `None` at [`CALLS_IN_FLIGHT_MAX`].
    fn admit(&self, addr: &str) -> Option<Slot<'_>> {
        let mut m = self.in_flight.lock();
        let n = m.entry(addr.to_string()).or_default();
        if *n >= CALLS_IN_FLIGHT_MAX {
            return None;
        }
        *n += 1;
        Some(Slot {
            pool: self,
            addr: addr.to_string(),
        })
    }

    /// An idle connection to `addr` (and true), or a new one (and false) whose preface is
    /// appended to `out`, to go out with the first frame; a new one reads into a buffer of
    /// `buf_bytes` to start with.
    async fn checkout(
        &self,
        addr: &str,
        buf_bytes: usize,
        out: &mut Vec<u8>,
    ) -> Result<(Conn, bool), ClientError> {
        if let Some(c) = self.take(addr) {
            return Ok((c, true));
        }
        let io = tokio::time::timeout(
            Duration::from_millis(CONNECT_TIMEOUT_MS),
            TcpStream::connect(addr),
        )
        .await
        .map_err(|_| unavailable(addr, "connect timed out"))?
        .map_err(|e| unavailable(addr, e))?;
        let _ = io.set_nodelay(true);
        out.extend_from_slice(&preface());
        let buf = BytesMut::with_capacity(buf_bytes);
        Ok((Conn { io, buf }, false))
    }

    fn take(&self, addr: &str) -> Option<Conn> {
        let mut idle = self.idle.lock();
        let v = idle.get_mut(addr)?;
        while let Some((c, since)) = v.pop() {
            if since.elapsed() < Duration::from_millis(CLIENT_IDLE_MS) {
                return Some(c);
            }
        }
        None
    }

    fn give_back(&self, addr: &str, mut c: Conn) {
        if c.buf.capacity() > IDLE_BUFFER_BYTES_MAX {
            c.buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
        }
        let mut idle = self.idle.lock();
        let v = idle.entry(addr.to_string()).or_default();
        // The oldest go first: they are the likeliest to have been closed by the server.
        v.retain(|(_, since)| since.elapsed() < Duration::from_millis(CLIENT_IDLE_MS));
        if v.len() < IDLE_CONNECTIONS_MAX {
            v.push((c, Instant::now()));
        }
    }
}

/// Why a call could not start over frames.
pub(crate) enum Start {
    /// The call failed (the data node answered, or could not be reached).
    Failed(ClientError),
    /// The data node does not speak frames (an older server): send it over gRPC.
    NotSpoken,
    /// [`CALLS_IN_FLIGHT_MAX`] calls to this data node are in flight: send this one over
    /// gRPC.
    Busy,
}

/// One fragment call over frames: its parts as they arrive.
pub(crate) struct Call<'a> {
    pool: &'a Pool,
    _slot: Slot<'a>,
    addr: String,
    conn: Option<Conn>,
    first: Option<Frame>,
    deadline: tokio::time::Instant,
}

/// `addr` did not answer a `call` ("fragment call", "write") in time.
fn timed_out(addr: &str, call: &str) -> ClientError {
    ClientError::new(
        StatusCode::Timeout,
        format!("{addr} did not answer the {call} in time"),
    )
}

fn unavailable(addr: &str, e: impl std::fmt::Display) -> ClientError {
    ClientError::new(
        StatusCode::Unavailable,
        format!("server unavailable: {addr}: {e}"),
    )
}

fn bad_frames(addr: &str, e: FrameError) -> ClientError {
    ClientError::new(
        StatusCode::Internal,
        format!("{addr} sent a bad fragment frame: {e}"),
    )
}

impl Pool {
    /// Sends `exec` to `addr` on an idle connection or a new one and waits for the first
    /// frame of the answer. A pooled connection the server has closed meanwhile is
    /// replaced by a new one (a query only reads, so sending it again is safe).
    pub(crate) async fn start<'a>(&'a self, addr: &str, exec: &Exec) -> Result<Call<'a>, Start> {
        let slot = self.admit(addr).ok_or(Start::Busy)?;
        let mut out = Vec::with_capacity(PREFACE_BYTES + 256 + exec.request.fragment.len());
        let deadline = tokio::time::Instant::now()
            + exec
                .timeout
                .unwrap_or(Duration::from_millis(CALL_TIMEOUT_MS_DEFAULT))
            + Duration::from_millis(CALL_TIMEOUT_GRACE_MS);
        loop {
            out.clear();
            let (mut conn, reused) = self
                .checkout(addr, READ_CHUNK_BYTES, &mut out)
                .await
                .map_err(Start::Failed)?;
            exec.encode(&mut out);
            let answer = tokio::time::timeout_at(deadline, async {
                conn.io.write_all(&out).await?;
                conn.read_frame().await
            })
            .await;
            let Ok(answer) = answer else {
                // Connected, and silent: not an older server (that closes or garbles).
                return Err(Start::Failed(timed_out(addr, "fragment call")));
            };
            match answer {
                Ok(Ok(Some(first))) => {
                    return Ok(Call {
                        pool: self,
                        _slot: slot,
                        addr: addr.to_string(),
                        conn: Some(conn),
                        first: Some(first),
                        deadline,
                    })
                }
                // A pooled connection the server closed while it was idle.
                Err(_) | Ok(Ok(None)) if reused => continue,
                // A new connection closed, reset or answered with something that is not a
                // frame: this server does not speak frames (or is failing, which its gRPC
                // answer will say).
                _ => {
                    tracing::debug!(addr, "data node does not speak fragment frames; using gRPC");
                    self.grpc_only
                        .lock()
                        .insert(addr.to_string(), Instant::now());
                    return Err(Start::NotSpoken);
                }
            }
        }
    }
}

impl Call<'_> {
    /// The next part, `None` once the call has ended well.
    pub(crate) async fn next(&mut self) -> Result<Option<v1::FragmentsPart>, ClientError> {
        let Some(conn) = self.conn.as_mut() else {
            return Ok(None);
        };
        let read = match self.first.take() {
            Some(f) => Ok(Ok(Some(f))),
            None => match tokio::time::timeout_at(self.deadline, conn.read_frame()).await {
                Err(_) => {
                    self.conn = None;
                    return Err(timed_out(&self.addr, "fragment call"));
                }
                Ok(r) => r,
            },
        };
        let frame = match read {
            Ok(Ok(Some(f))) => f,
            Ok(Ok(None)) => {
                self.conn = None;
                return Err(unavailable(
                    &self.addr,
                    "the data node closed the connection mid-call",
                ));
            }
            Ok(Err(e)) => {
                self.conn = None;
                return Err(bad_frames(&self.addr, e));
            }
            Err(e) => {
                self.conn = None;
                return Err(unavailable(&self.addr, e));
            }
        };
        match frame.kind {
            Kind::Part => match decode_part(frame.body) {
                Ok(p) => Ok(Some(p)),
                Err(e) => {
                    self.conn = None;
                    Err(bad_frames(&self.addr, e))
                }
            },
            Kind::End => {
                if let Some(c) = self.conn.take() {
                    if c.buf.is_empty() {
                        self.pool.give_back(&self.addr, c);
                    }
                }
                Ok(None)
            }
            Kind::Error => {
                self.conn = None;
                Err(decode_error(frame.body).unwrap_or_else(|e| bad_frames(&self.addr, e)))
            }
            k @ (Kind::Exec | Kind::Write | Kind::Wrote) => {
                self.conn = None;
                Err(bad_frames(
                    &self.addr,
                    FrameError::Decode {
                        what: "fragment answer",
                        why: format!("a {k:?} frame in a fragment call"),
                    },
                ))
            }
        }
    }
}

/// Writes `head` then `body` (one `writev` when the socket takes them).
async fn write_two(io: &mut TcpStream, head: &[u8], body: &[u8]) -> std::io::Result<()> {
    let (mut a, mut b) = (head, body);
    while !a.is_empty() || !b.is_empty() {
        let n = io
            .write_vectored(&[std::io::IoSlice::new(a), std::io::IoSlice::new(b)])
            .await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        let from_a = n.min(a.len());
        a = &a[from_a..];
        b = &b[(n - from_a).min(b.len())..];
    }
    Ok(())
}

/// How a write over frames ended, when it did not.
pub(crate) enum WriteStart {
    /// The write failed (the data node answered, or could not be reached).
    Failed(ClientError),
    /// The data node does not take writes as frames (an older server, or one that does not
    /// speak frames at all): send it over gRPC.
    NotSpoken,
    /// [`CALLS_IN_FLIGHT_MAX`] calls to this data node are in flight: send this one over
    /// gRPC.
    Busy,
}

/// The message with which a server refuses a frame kind it does not know (see
/// [`FrameError::UnknownKind`]): how a data node that predates WRITE frames answers one.
const UNKNOWN_KIND: &str = "unknown frame kind";

impl Pool {
    /// Sends one encoded `WriteRequest` to `addr` as a WRITE frame, on an idle connection or
    /// a new one, and waits for its answer. The request is written from `request` itself.
    /// A pooled connection the server closed while idle is replaced by a new one and the
    /// write sent again (a row is identified by its subtable and timestamp, so a write sent
    /// twice stores each row once).
    pub(crate) async fn write(
        &self,
        addr: &str,
        token: &str,
        request: &[u8],
    ) -> Result<v1::WriteResponse, WriteStart> {
        let _slot = self.admit(addr).ok_or(WriteStart::Busy)?;
        let deadline = tokio::time::Instant::now()
            + Duration::from_millis(CALL_TIMEOUT_MS_DEFAULT + CALL_TIMEOUT_GRACE_MS);
        let mut head = Vec::with_capacity(PREFACE_BYTES + HEADER_BYTES + 2 + token.len());
        loop {
            head.clear();
            // A write's answer is a small frame: no large read buffer for it.
            let (mut conn, reused) = self
                .checkout(addr, 1024, &mut head)
                .await
                .map_err(WriteStart::Failed)?;
            write_head(&mut head, token, request.len());
            let answer = tokio::time::timeout_at(deadline, async {
                write_two(&mut conn.io, &head, request).await?;
                conn.read_frame().await
            })
            .await;
            let Ok(answer) = answer else {
                return Err(WriteStart::Failed(timed_out(addr, "write")));
            };
            let frame = match answer {
                Ok(Ok(Some(f))) => f,
                // A pooled connection the server closed while it was idle.
                Err(_) | Ok(Ok(None)) if reused => continue,
                // A new connection closed, reset or answered with something that is not a
                // frame: this server does not speak frames (or is failing, which its gRPC
                // answer will say).
                _ => {
                    self.not_spoken(addr);
                    return Err(WriteStart::NotSpoken);
                }
            };
            return match frame.kind {
                Kind::Wrote => match decode_wrote(frame.body) {
                    Ok(r) => {
                        if conn.buf.is_empty() {
                            self.give_back(addr, conn);
                        }
                        Ok(r)
                    }
                    Err(e) => Err(WriteStart::Failed(bad_frames(addr, e))),
                },
                Kind::Error => match decode_error(frame.body) {
                    // A data node from before WRITE frames: it refused the kind and closed.
                    Ok(e)
                        if e.code == StatusCode::InvalidArgument
                            && e.message.starts_with(UNKNOWN_KIND) =>
                    {
                        self.not_spoken(addr);
                        Err(WriteStart::NotSpoken)
                    }
                    Ok(e) => Err(WriteStart::Failed(e)),
                    Err(e) => Err(WriteStart::Failed(bad_frames(addr, e))),
                },
                k => Err(WriteStart::Failed(bad_frames(
                    addr,
                    FrameError::Decode {
                        what: "write answer",
                        why: format!("a {k:?} frame answering a WRITE"),
                    },
                ))),
            };
        }
    }

    /// Sends `addr`'s calls over gRPC for [`GRPC_ONLY_MS`].
    fn not_spoken(&self, addr: &str) {
        tracing::debug!(addr, "data node does not speak frames; using gRPC");
        self.grpc_only
            .lock()
            .insert(addr.to_string(), Instant::now());
    }
}

/// Fuzzing entry (`fuzz/fuzz_targets/client_frames.rs`): reads `data` as either side reads a
/// connection. Byte 0 picks the size of the pieces the rest arrives in; the rest is a preface
/// and frames, each frame body going through every body decoder. Must never panic.
#[doc(hidden)]
pub fn fuzz_input(data: &[u8]) {
    let Some((&piece, rest)) = data.split_first() else {
        return;
    };
    if let Some(p) = rest.get(..PREFACE_BYTES) {
        if let Ok(p) = <[u8; PREFACE_BYTES]>::try_from(p) {
            let _ = check_preface(&p);
        }
    }
    let mut buf = BytesMut::new();
    for chunk in rest.chunks(usize::from(piece % 64) + 1) {
        buf.extend_from_slice(chunk);
        loop {
            match decode(&mut buf, FRAME_BYTES_MAX) {
                Ok(Some(f)) => {
                    let _ = Exec::decode(f.body.clone());
                    let _ = decode_part(f.body.clone());
                    let _ = decode_write(f.body.clone());
                    let _ = decode_wrote(f.body.clone());
                    let _ = decode_error(f.body);
                }
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
}

/// Seed inputs for the fuzz target: a whole call each way, in pieces of 1, 7 and 64 bytes.
#[doc(hidden)]
pub fn fuzz_seeds() -> Vec<(String, Vec<u8>)> {
    let mut conn = preface().to_vec();
    Exec {
        timeout: Some(Duration::from_millis(250)),
        token: "e30.c2ln".into(),
        request: v1::FragmentsRequest {
            vnodes: vec![v1::VnodeRef {
                db: "iot".into(),
                vgroup_id: 2,
            }],
            fragment: br#"{"stable":"readings"}"#.to_vec(),
            memory_max_bytes: 1 << 26,
        },
    }
    .encode(&mut conn);
    encode_part(
        &mut conn,
        &v1::FragmentsPart {
            index: 0,
            batch: Some(v1::Batch::default()),
            end: true,
            elapsed_us: 12,
        },
    );
    encode_error(&mut conn, StatusCode::VnodeNotFound, "no vgroup 9");
    encode_end(&mut conn);
    let request = v1::WriteRequest {
        db: "iot".into(),
        vgroup_id: 2,
        ..Default::default()
    }
    .encode_to_vec();
    write_head(&mut conn, "e30.c2ln", request.len());
    conn.extend_from_slice(&request);
    encode_wrote(
        &mut conn,
        &v1::WriteResponse {
            rows: 5000,
            tables_created: 12,
        },
    );
    let mut seeds = Vec::new();
    for piece in [0u8, 6, 63] {
        let mut d = vec![piece];
        d.extend_from_slice(&conn);
        seeds.push((format!("seed-call-{piece}"), d));
    }
    seeds.push(("seed-too-large".into(), vec![0, 0xff, 0xff, 0xff, 0xff, 1]));
    seeds
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exec() -> Exec {
        Exec {
            timeout: Some(Duration::from_millis(1500)),
            token: "tok.sig".into(),
            request: v1::FragmentsRequest {
                vnodes: vec![v1::VnodeRef {
                    db: "iot".into(),
                    vgroup_id: 3,
                }],
                fragment: b"{\"x\":1}".to_vec(),
                memory_max_bytes: 1 << 20,
            },
        }
    }

    #[test]
    fn frames_round_trip_whole_and_byte_by_byte() {
        let mut out = Vec::new();
        exec().encode(&mut out);
        let part = v1::FragmentsPart {
            index: 2,
            batch: None,
            end: true,
            elapsed_us: 17,
        };
        encode_part(&mut out, &part);
        encode_error(&mut out, StatusCode::Timeout, "too slow");
        encode_end(&mut out);
        // Whole.
        let mut buf = BytesMut::from(&out[..]);
        let f = decode(&mut buf, FRAME_BYTES_MAX).unwrap().unwrap();
        assert_eq!(f.kind, Kind::Exec);
        assert_eq!(Exec::decode(f.body).unwrap(), exec());
        let f = decode(&mut buf, FRAME_BYTES_MAX).unwrap().unwrap();
        assert_eq!(decode_part(f.body).unwrap(), part);
        let f = decode(&mut buf, FRAME_BYTES_MAX).unwrap().unwrap();
        let e = decode_error(f.body).unwrap();
        assert_eq!(
            (e.code, e.message.as_str()),
            (StatusCode::Timeout, "too slow")
        );
        let f = decode(&mut buf, FRAME_BYTES_MAX).unwrap().unwrap();
        assert_eq!((f.kind, f.body.len()), (Kind::End, 0));
        assert!(buf.is_empty());
        // One byte at a time: nothing is decoded before its last byte arrives.
        let mut buf = BytesMut::new();
        let mut kinds = Vec::new();
        for b in &out {
            buf.put_u8(*b);
            while let Some(f) = decode(&mut buf, FRAME_BYTES_MAX).unwrap() {
                kinds.push(f.kind);
            }
        }
        assert_eq!(kinds, [Kind::Exec, Kind::Part, Kind::Error, Kind::End]);
    }

    #[test]
    fn write_frames_round_trip() {
        let request = v1::WriteRequest {
            db: "iot".into(),
            vgroup_id: 7,
            ..Default::default()
        }
        .encode_to_vec();
        let mut out = Vec::new();
        write_head(&mut out, "tok.sig", request.len());
        out.extend_from_slice(&request);
        let resp = v1::WriteResponse {
            rows: 10_000,
            tables_created: 3,
        };
        encode_wrote(&mut out, &resp);
        let mut buf = BytesMut::from(&out[..]);
        let f = decode(&mut buf, FRAME_BYTES_MAX).unwrap().unwrap();
        assert_eq!(f.kind, Kind::Write);
        let (token, body) = decode_write(f.body).unwrap();
        assert_eq!((token.as_str(), &body[..]), ("tok.sig", &request[..]));
        let f = decode(&mut buf, FRAME_BYTES_MAX).unwrap().unwrap();
        assert_eq!(f.kind, Kind::Wrote);
        assert_eq!(decode_wrote(f.body).unwrap(), resp);
        assert!(buf.is_empty());
        // Cut anywhere in the token: truncated; a token over the limit; not UTF-8.
        for cut in [0, 1, 2, 5] {
            let body = Bytes::copy_from_slice(&out[HEADER_BYTES..HEADER_BYTES + cut]);
            assert_eq!(
                decode_write(body).unwrap_err(),
                FrameError::Truncated("WRITE"),
                "cut at {cut}"
            );
        }
        let long = vec![b'a'; TOKEN_BYTES_MAX + 1];
        let mut body = ((long.len()) as u16).to_le_bytes().to_vec();
        body.extend_from_slice(&long);
        assert!(matches!(
            decode_write(Bytes::from(body)),
            Err(FrameError::Decode { what: "WRITE", .. })
        ));
        assert!(matches!(
            decode_write(Bytes::from_static(&[2, 0, 0xff, 0xfe])),
            Err(FrameError::Decode { what: "WRITE", .. })
        ));
        assert!(decode_wrote(Bytes::from_static(&[0x08, 0xff])).is_err());
    }

    /// A one-connection fake data node: reads one frame after the preface, answers with
    /// `answer` and closes.
    async fn fake_node(answer: Vec<u8>) -> (String, tokio::task::JoinHandle<Frame>) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let task = tokio::spawn(async move {
            let (mut c, _) = l.accept().await.unwrap();
            let mut p = [0u8; PREFACE_BYTES];
            c.read_exact(&mut p).await.unwrap();
            check_preface(&p).unwrap();
            let mut buf = BytesMut::new();
            let f = loop {
                if let Some(f) = decode(&mut buf, FRAME_BYTES_MAX).unwrap() {
                    break f;
                }
                assert!(c.read_buf(&mut buf).await.unwrap() > 0);
            };
            c.write_all(&answer).await.unwrap();
            f
        });
        (addr, task)
    }

    /// A write is sent whole (head and request, the request as given) and its WROTE answer
    /// read; the connection goes back to the pool. A data node from before WRITE frames
    /// (it refuses the kind as unknown) is written to over gRPC instead; any other ERROR is
    /// the write's failure.
    #[tokio::test]
    async fn writes_and_servers_that_refuse_them() {
        let pool = Pool::default();
        let request: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let mut answer = Vec::new();
        let resp = v1::WriteResponse {
            rows: 42,
            tables_created: 1,
        };
        encode_wrote(&mut answer, &resp);
        let (addr, node) = fake_node(answer).await;
        let got = pool.write(&addr, "tok", &request).await;
        assert!(matches!(got, Ok(ref r) if *r == resp));
        let f = node.await.unwrap();
        assert_eq!(f.kind, Kind::Write);
        let (token, body) = decode_write(f.body).unwrap();
        assert_eq!((token.as_str(), &body[..]), ("tok", &request[..]));
        assert!(pool.take(&addr).is_some(), "the connection was pooled");

        let mut answer = Vec::new();
        encode_error(
            &mut answer,
            StatusCode::InvalidArgument,
            &FrameError::UnknownKind(Kind::Write as u8).to_string(),
        );
        let (addr, _node) = fake_node(answer).await;
        assert!(matches!(
            pool.write(&addr, "tok", b"x").await,
            Err(WriteStart::NotSpoken)
        ));
        assert!(pool.grpc_only(&addr));

        let mut answer = Vec::new();
        encode_error(
            &mut answer,
            StatusCode::InvalidArgument,
            "column v: not a DOUBLE",
        );
        let (addr, _node) = fake_node(answer).await;
        match pool.write(&addr, "tok", b"x").await {
            Err(WriteStart::Failed(e)) => {
                assert_eq!(e.code, StatusCode::InvalidArgument);
                assert_eq!(e.message, "column v: not a DOUBLE");
            }
            _ => panic!("an ERROR answer fails the write"),
        }
        assert!(!pool.grpc_only(&addr));
    }

    #[test]
    fn bad_frames_are_typed_errors() {
        let mut buf = BytesMut::from(&[9u8, 0, 0, 0, 7][..]);
        assert_eq!(decode(&mut buf, 100), Err(FrameError::UnknownKind(7)));
        let mut buf = BytesMut::from(&[0xff, 0xff, 0xff, 0x7f, 1][..]);
        assert!(matches!(
            decode(&mut buf, 1 << 20),
            Err(FrameError::TooLarge { .. })
        ));
        // A claimed length reserves a bounded room, not the length; a small frame its own.
        let mut buf = BytesMut::from(&[0xff, 0xff, 0xff, 0x0f, 1][..]);
        assert_eq!(decode(&mut buf, FRAME_BYTES_MAX), Ok(None));
        assert!(buf.capacity() < RESERVE_AT_ONCE_BYTES_MAX + READ_CHUNK_BYTES);
        let mut buf = BytesMut::from(&[0x00, 0x00, 0x10, 0x00, 1][..]);
        assert_eq!(decode(&mut buf, FRAME_BYTES_MAX), Ok(None));
        assert!(buf.capacity() >= HEADER_BYTES + (1 << 20));
        for cut in [0, 9, 10, 12] {
            let mut out = Vec::new();
            exec().encode(&mut out);
            let body = Bytes::copy_from_slice(&out[HEADER_BYTES..HEADER_BYTES + cut]);
            assert!(Exec::decode(body).is_err(), "cut at {cut}");
        }
        assert_eq!(
            decode_error(Bytes::from_static(&[1, 2])).unwrap_err(),
            FrameError::Truncated("ERROR")
        );
        let mut p = preface();
        assert_eq!(check_preface(&p), Ok(()));
        p[4] = 99;
        assert_eq!(
            check_preface(&p).unwrap_err().code(),
            StatusCode::WireVersionMismatch
        );
        assert!(matches!(
            check_preface(b"PRI * HT"),
            Err(FrameError::BadMagic(_))
        ));
    }

    /// A data node that accepts and never answers fails the call soon after its timeout
    /// instead of hanging it; one that closes at once is taken for an older server.
    #[tokio::test]
    async fn silent_and_closing_servers() {
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = silent.local_addr().unwrap().to_string();
        let keep = tokio::spawn(async move {
            let (c, _) = silent.accept().await.unwrap();
            tokio::time::sleep(Duration::from_secs(30)).await;
            drop(c);
        });
        let pool = Pool::default();
        let mut x = exec();
        x.timeout = Some(Duration::from_millis(100));
        let t = Instant::now();
        match pool.start(&addr, &x).await {
            Err(Start::Failed(e)) => assert_eq!(e.code, StatusCode::Timeout, "{}", e.message),
            _ => panic!("a silent server must fail the call"),
        }
        let took = t.elapsed();
        assert!(
            took >= Duration::from_millis(1_100) && took < Duration::from_secs(5),
            "{took:?}"
        );
        assert!(!pool.grpc_only(&addr));
        keep.abort();

        let closing = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = closing.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let (c, _) = closing.accept().await.unwrap();
            drop(c);
        });
        assert!(matches!(pool.start(&addr, &x).await, Err(Start::NotSpoken)));
        assert!(pool.grpc_only(&addr));
    }

    #[test]
    fn calls_in_flight_per_data_node_are_bounded() {
        let pool = Pool::default();
        let mut held: Vec<_> = (0..CALLS_IN_FLIGHT_MAX)
            .map(|_| pool.admit("a:1").expect("below the bound"))
            .collect();
        assert!(pool.admit("a:1").is_none());
        // Another data node has its own count.
        let other = pool.admit("b:1").expect("another node");
        held.pop();
        let again = pool.admit("a:1").expect("a place was freed");
        assert!(pool.admit("a:1").is_none());
        drop((again, other));
        assert_eq!(pool.in_flight.lock().get("b:1"), None);
        drop(held);
        assert!(pool.in_flight.lock().is_empty());
    }

    fn corpus_dir() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/client_frames")
    }

    /// Regenerates the committed seeds: `cargo test -p tidal-client write_frames_seed_corpus
    /// -- --ignored`.
    #[test]
    #[ignore]
    fn write_frames_seed_corpus() {
        std::fs::create_dir_all(corpus_dir()).unwrap();
        for (name, data) in fuzz_seeds() {
            std::fs::write(corpus_dir().join(name), data).unwrap();
        }
    }

    /// The committed corpus (seeds and any crash input added since) still decodes safely.
    #[test]
    fn replay_frames_corpus() {
        let mut n = 0;
        for e in std::fs::read_dir(corpus_dir()).unwrap() {
            fuzz_input(&std::fs::read(e.unwrap().path()).unwrap());
            n += 1;
        }
        assert!(n >= fuzz_seeds().len());
    }

    /// A cheap stand-in for `cargo fuzz` in every test run: the seeds and many byte flips,
    /// cuts and splices of them never panic the decoders.
    #[test]
    fn mutated_frames_never_panic() {
        let seeds = fuzz_seeds();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for (_, seed) in &seeds {
            fuzz_input(seed);
            for _ in 0..2_000 {
                let mut d = seed.clone();
                match next() % 3 {
                    0 => {
                        for _ in 0..1 + next() % 4 {
                            let i = (next() as usize) % d.len();
                            d[i] = next() as u8;
                        }
                    }
                    1 => d.truncate((next() as usize) % d.len()),
                    _ => {
                        let other = &seeds[(next() as usize) % seeds.len()].1;
                        let at = (next() as usize) % d.len();
                        d.splice(at.., other.iter().copied());
                    }
                }
                fuzz_input(&d);
            }
        }
    }
}
