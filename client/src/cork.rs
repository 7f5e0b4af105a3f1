//! The client's TCP connections, with small writes corked until the end of the scheduler
//! turn so that one call's HTTP/2 frames leave in one write.
//!
//! h2 opens a new stream (writes its HEADERS) before it gives the stream any send capacity,
//! so the body of a call can only be queued after that first write has gone out: a 600-byte
//! query fragment left as two writes, HEADERS then DATA, and the server woke and read twice
//! for each call. [`Corked`] keeps writes that fit in [`CORK_BYTES_MAX`] in memory; the first
//! flush of a burst only yields (wakes its task and returns `Pending`), which lets the task
//! that was just given capacity queue its DATA; the next flush writes everything in one
//! syscall. A write that would pass the bound goes out at once with what is kept before it
//! (one vectored write), so a bulk upload is neither copied nor delayed.
//!
//! Invariant: bytes accepted by `poll_write*` are written, in order, before `poll_flush` or
//! `poll_shutdown` returns `Ready(Ok)`; a connection never holds more than `CORK_BYTES_MAX`
//! unsent bytes of its own.

use std::future::Future;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};

use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tonic::codegen::Service;

/// Writes up to this many bytes wait for the flush; a larger one goes out at once.
pub const CORK_BYTES_MAX: usize = 16 * 1024;

/// An IO whose small writes wait for the next scheduler turn (see the module doc).
#[derive(Debug)]
pub struct Corked<T> {
    io: T,
    /// Accepted bytes not written yet, from `start`.
    kept: Vec<u8>,
    start: usize,
    /// The current flush has already yielded once.
    yielded: bool,
}

impl<T> Corked<T> {
    pub fn new(io: T) -> Corked<T> {
        Corked {
            io,
            kept: Vec::new(),
            start: 0,
            yielded: false,
        }
    }

    fn kept(&self) -> &[u8] {
        &self.kept[self.start..]
    }

    fn consume(&mut self, n: usize) {
        self.start += n;
        if self.start == self.kept.len() {
            self.kept.clear();
            self.start = 0;
            // A burst ends when its bytes are out, however they left (a large write takes
            // them along): the next one yields again.
            self.yielded = false;
        }
    }
}

impl<T: AsyncWrite + Unpin> Corked<T> {
    /// Writes every kept byte.
    fn poll_write_kept(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.kept().is_empty() {
            let n =
                std::task::ready!(Pin::new(&mut self.io).poll_write(cx, &self.kept[self.start..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.consume(n);
        }
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Corked<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Corked<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let me = &mut *self;
        let len: usize = bufs.iter().map(|b| b.len()).sum();
        if me.kept().len() + len <= CORK_BYTES_MAX {
            if me.kept.is_empty() {
                me.kept.reserve(CORK_BYTES_MAX.min(4096));
            }
            for b in bufs {
                me.kept.extend_from_slice(b);
            }
            return Poll::Ready(Ok(len));
        }
        // Too large to keep: the kept bytes and this write go out together.
        loop {
            if me.kept().is_empty() {
                return Pin::new(&mut me.io).poll_write_vectored(cx, bufs);
            }
            let mut slices = Vec::with_capacity(bufs.len() + 1);
            slices.push(IoSlice::new(&me.kept[me.start..]));
            slices.extend(bufs.iter().map(|b| IoSlice::new(b)));
            let n = std::task::ready!(Pin::new(&mut me.io).poll_write_vectored(cx, &slices))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            let kept = me.kept().len();
            if n <= kept {
                me.consume(n);
                continue;
            }
            me.consume(kept);
            return Poll::Ready(Ok(n - kept));
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = &mut *self;
        if !me.kept().is_empty() && !me.yielded {
            // Let the tasks woken during this turn (a stream just given send capacity)
            // queue their frames before the write.
            me.yielded = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        std::task::ready!(me.poll_write_kept(cx))?;
        me.yielded = false;
        Pin::new(&mut me.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = &mut *self;
        std::task::ready!(me.poll_write_kept(cx))?;
        Pin::new(&mut me.io).poll_shutdown(cx)
    }
}

/// hyper-util's TCP connector (the one tonic uses: resolution, no delay), with the stream it
/// connects corked; tonic puts TLS on top when the endpoint has it.
#[derive(Clone, Debug)]
pub struct CorkedConnector {
    http: HttpConnector,
}

impl CorkedConnector {
    pub fn new() -> CorkedConnector {
        let mut http = HttpConnector::new();
        // The scheme is tonic's business (it adds TLS for https).
        http.enforce_http(false);
        http.set_nodelay(true);
        CorkedConnector { http }
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;
type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl Service<http::Uri> for CorkedConnector {
    type Response = TokioIo<Corked<TcpStream>>;
    type Error = BoxError;
    type Future = BoxFuture<Result<Self::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.http.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let connecting = self.http.call(uri);
        Box::pin(async move {
            let io = connecting.await?;
            Ok(TokioIo::new(Corked::new(io.into_inner())))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn small_writes_leave_together_at_the_flush_and_large_ones_at_once() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accept = tokio::spawn(async move { listener.accept().await.unwrap().0 });
        let mut c = Corked::new(TcpStream::connect(addr).await.unwrap());
        let mut s = accept.await.unwrap();

        c.write_all(b"head").await.unwrap();
        c.write_all(b"data").await.unwrap();
        // Nothing has left before the flush.
        let mut one = [0u8; 1];
        let early = tokio::time::timeout(std::time::Duration::from_millis(50), s.read(&mut one));
        assert!(early.await.is_err(), "a small write left before the flush");
        c.flush().await.unwrap();
        let mut got = [0u8; 8];
        s.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"headdata");

        // A write past the bound goes out with what was kept, in order, without a flush.
        c.write_all(b"kept").await.unwrap();
        let big = vec![7u8; CORK_BYTES_MAX + 1];
        c.write_all(&big).await.unwrap();
        let mut got = vec![0u8; 4 + big.len()];
        s.read_exact(&mut got).await.unwrap();
        assert_eq!(&got[..4], b"kept");
        assert!(got[4..].iter().all(|b| *b == 7));

        // Shutdown writes what is kept first.
        c.write_all(b"tail").await.unwrap();
        c.shutdown().await.unwrap();
        let mut rest = Vec::new();
        s.read_to_end(&mut rest).await.unwrap();
        assert_eq!(rest, b"tail");
    }
}
