//! Sends a call's request body as it stands once encoded, so HTTP/2 carries it with
//! END_STREAM on its last DATA frame.
//!
//! tonic encodes a unary request into a body stream that only learns it has ended when
//! polled again after its message: hyper then sends the message, and after it an empty DATA
//! frame to end the stream, each in its own write, and the server reads (and may wait for) a
//! third frame. Every request of this API is one message (no call streams its request), so
//! the body is read to its end first and replayed from memory with its end known: one write
//! less per call and one wakeup less on the server, for the fragments a query fans out to its
//! data nodes as for every other call. The chunks are kept as they are (no copy into one
//! buffer), so a large write batch costs nothing more. A call that streams its request (none
//! does today) must use a channel without this layer: it would wait for the stream's end.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http_body_util::BodyExt;
use tonic::body::Body;
use tonic::codegen::{Bytes, Service};

/// A service that hands `S` request bodies whose end is known (see the module doc).
#[derive(Clone, Debug)]
pub struct OneFrame<S> {
    inner: S,
}

impl<S> OneFrame<S> {
    pub fn new(inner: S) -> OneFrame<S> {
        OneFrame { inner }
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

impl<S> Service<http::Request<Body>> for OneFrame<S>
where
    S: Service<http::Request<Body>> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        // The service made ready is the one called (tower's contract); a clone takes its
        // place for the next call.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        Box::pin(async move {
            let (parts, body) = req.into_parts();
            let body = Replay::read(body).await;
            inner
                .call(http::Request::from_parts(parts, Body::new(body)))
                .await
        })
    }
}

/// A body read to its end: its data chunks, then its error if reading failed.
struct Replay {
    chunks: VecDeque<Bytes>,
    error: Option<tonic::Status>,
}

impl Replay {
    async fn read(mut body: Body) -> Replay {
        let mut chunks = VecDeque::new();
        let mut error = None;
        while let Some(frame) = body.frame().await {
            match frame {
                // A request body of this API has no trailers: data is all there is.
                Ok(f) => {
                    if let Ok(data) = f.into_data() {
                        if !data.is_empty() {
                            chunks.push_back(data);
                        }
                    }
                }
                Err(e) => {
                    error = Some(e);
                    break;
                }
            }
        }
        Replay { chunks, error }
    }
}

impl http_body::Body for Replay {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, tonic::Status>>> {
        if let Some(c) = self.chunks.pop_front() {
            return Poll::Ready(Some(Ok(http_body::Frame::data(c))));
        }
        Poll::Ready(self.error.take().map(Err))
    }

    fn is_end_stream(&self) -> bool {
        self.chunks.is_empty() && self.error.is_none()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        let n: usize = self.chunks.iter().map(Bytes::len).sum();
        if self.error.is_none() {
            http_body::SizeHint::with_exact(n as u64)
        } else {
            let mut h = http_body::SizeHint::new();
            h.set_lower(n as u64);
            h
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body::Body as _;

    #[tokio::test]
    async fn a_replayed_body_ends_with_its_last_chunk_and_keeps_errors() {
        let chunks: Vec<Result<http_body::Frame<Bytes>, tonic::Status>> = vec![
            Ok(http_body::Frame::data(Bytes::from_static(b"ab"))),
            Ok(http_body::Frame::data(Bytes::new())),
            Ok(http_body::Frame::data(Bytes::from_static(b"cde"))),
        ];
        let body = Body::new(http_body_util::StreamBody::new(futures::stream::iter(
            chunks,
        )));
        let mut r = Replay::read(body).await;
        assert_eq!(r.size_hint().exact(), Some(5));
        assert!(!r.is_end_stream());
        let first = r.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(&first[..], b"ab");
        assert!(!r.is_end_stream());
        let second = r.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(&second[..], b"cde");
        // the end is known as soon as the last chunk is out: hyper marks that frame the end
        assert!(r.is_end_stream());
        assert!(r.frame().await.is_none());

        let failing: Vec<Result<http_body::Frame<Bytes>, tonic::Status>> = vec![
            Ok(http_body::Frame::data(Bytes::from_static(b"x"))),
            Err(tonic::Status::invalid_argument("too big")),
        ];
        let body = Body::new(http_body_util::StreamBody::new(futures::stream::iter(
            failing,
        )));
        let mut r = Replay::read(body).await;
        assert_eq!(r.size_hint().exact(), None);
        assert_eq!(
            &r.frame().await.unwrap().unwrap().into_data().unwrap()[..],
            b"x"
        );
        assert!(!r.is_end_stream());
        let e = r.frame().await.unwrap().unwrap_err();
        assert_eq!(e.message(), "too big");
        assert!(r.is_end_stream());
    }
}
