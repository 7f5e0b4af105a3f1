//! The data node's gRPC service with its `Write` method read straight into a batch.
//!
//! The generated `DnodeServer` decodes a request with prost reading through tonic's
//! `DecodeBuf`, a `Buf` over the connection's receive buffer: every varint byte and every
//! advance went through several layers of `Buf` adapters, and a write batch is mostly packed
//! varints (subtable name ends, runs) and length-delimited fields. Profiled during a load of
//! 100,000 trucks, decoding and converting a batch was a quarter of the data nodes' CPU.
//! Here the message is first split off the receive buffer as one `Bytes` (no copy: tonic has
//! already buffered the whole message), then read into a batch by
//! [`tidal_proto::write_read`], which answers only for what it reads exactly as prost and the
//! conversion would; any other message is decoded by prost from that `Bytes` and converted
//! by the handler as before.
//!
//! Invariant: a request gives the batch (or the error) it gave with the generated server.
//! Every other method goes to the generated server unchanged.

use super::{DnodeService, GRPC_MESSAGE_BYTES_MAX};
use bytes::{Buf, Bytes};
use prost::Message;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tidal_proto::v1;
use tidal_proto::v1::dnode_server::DnodeServer;
use tonic::codec::{Codec, DecodeBuf, Decoder};
use tonic::server::NamedService;

/// The `Write` method's path.
const WRITE_PATH: &str = "/tidal.v1.Dnode/Write";

type BoxFuture<T> = Pin<Box<dyn Future<Output = Result<T, Infallible>> + Send + 'static>>;

/// [`DnodeServer`] with `Write` decoded by [`WriteCodec`].
#[derive(Clone)]
pub struct DnodeGrpc {
    generated: DnodeServer<DnodeService>,
    svc: DnodeService,
}

impl DnodeGrpc {
    pub fn new(svc: DnodeService) -> DnodeGrpc {
        DnodeGrpc {
            generated: DnodeServer::new(svc.clone())
                .max_decoding_message_size(GRPC_MESSAGE_BYTES_MAX)
                .max_encoding_message_size(GRPC_MESSAGE_BYTES_MAX),
            svc,
        }
    }
}

impl NamedService for DnodeGrpc {
    const NAME: &'static str = <DnodeServer<DnodeService> as NamedService>::NAME;
}

impl<B> tower::Service<http::Request<B>> for DnodeGrpc
where
    B: tonic::codegen::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<tonic::codegen::StdError> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        if req.uri().path() != WRITE_PATH {
            return self.generated.call(req);
        }
        let method = WriteMethod(self.svc.clone());
        Box::pin(async move {
            // As the generated server is configured: the same message limits, no compression.
            let mut grpc = tonic::server::Grpc::new(WriteCodec).apply_max_message_size_config(
                Some(GRPC_MESSAGE_BYTES_MAX),
                Some(GRPC_MESSAGE_BYTES_MAX),
            );
            Ok(grpc.unary(method, req).await)
        })
    }
}

/// A `Write` request as read: a batch, or the wire message for the handler to convert.
#[derive(Debug)]
pub enum WriteIn {
    Read(tidal_common::WriteBatch),
    Wire(v1::WriteRequest),
}

/// `Write`, through [`DnodeService::write_in`].
struct WriteMethod(DnodeService);

impl tonic::server::UnaryService<WriteIn> for WriteMethod {
    type Response = v1::WriteResponse;
    type Future = Pin<
        Box<
            dyn Future<Output = Result<tonic::Response<v1::WriteResponse>, tonic::Status>>
                + Send
                + 'static,
        >,
    >;

    fn call(&mut self, request: tonic::Request<WriteIn>) -> Self::Future {
        let svc = self.0.clone();
        Box::pin(async move { svc.write_in(request).await })
    }
}

/// prost's codec for `Write`, but reading the message split off as one [`Bytes`].
#[derive(Default)]
struct WriteCodec;

type ProstWrite = tonic_prost::ProstCodec<v1::WriteResponse, v1::WriteRequest>;

impl Codec for WriteCodec {
    type Encode = v1::WriteResponse;
    type Decode = WriteIn;
    type Encoder = <ProstWrite as Codec>::Encoder;
    type Decoder = WriteDecoder;

    fn encoder(&mut self) -> Self::Encoder {
        ProstWrite::default().encoder()
    }

    fn decoder(&mut self) -> Self::Decoder {
        WriteDecoder
    }
}

struct WriteDecoder;

impl Decoder for WriteDecoder {
    type Item = WriteIn;
    type Error = tonic::Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<WriteIn>, tonic::Status> {
        // The receive buffer holds the whole message: this takes it without a copy.
        decode_write(src.copy_to_bytes(src.remaining())).map(Some)
    }
}

/// A `Write` request from its bytes; a malformed one is the status prost's codec gives.
pub(crate) fn decode_write(msg: Bytes) -> Result<WriteIn, tonic::Status> {
    if let Some(batch) = tidal_proto::write_read::read_write_request(&msg) {
        return Ok(WriteIn::Read(batch));
    }
    v1::WriteRequest::decode(msg)
        .map(WriteIn::Wire)
        .map_err(|e| tonic::Status::internal(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tidal_common::{DataType, RowBlock, Value};
    use tidal_proto::convert::write_from_wire;
    use tidal_proto::write_wire::encode_write_request;

    /// What the write path sends (a block with tags, NULLs and several runs) is read into
    /// the batch prost and the conversion give; a request with a `TableWrite` (SQL inserts)
    /// is left to them; malformed bytes are an `INTERNAL` status as with the generated
    /// server, whichever way they are broken.
    #[test]
    fn reads_as_the_generated_server_and_refuses_malformed_bytes() {
        let mut b = RowBlock::new("m", &[DataType::Timestamp, DataType::Double]);
        for t in 0..50i64 {
            let tags = (t % 3 == 0).then(|| vec![Value::Str(format!("loc_{t}")), Value::Int(t)]);
            let i = b.add_table(&format!("t_{t}"), tags);
            for r in 0..(t % 4 + 1) {
                let v = if (t + r) % 5 == 0 {
                    Value::Null
                } else {
                    Value::Float(r as f64)
                };
                assert!(b.push_row(i, &[Value::Timestamp(1_000 + r), v]));
            }
        }
        let bytes = encode_write_request("db", 3, &[], &[&b], |_| true);
        let mut reader: &[u8] = &bytes;
        let want = write_from_wire(v1::WriteRequest::decode(&mut reader).unwrap()).unwrap();
        match decode_write(Bytes::from(bytes.clone())).unwrap() {
            WriteIn::Read(got) => assert_eq!(got, want),
            WriteIn::Wire(_) => panic!("a batch of row blocks is read directly"),
        }
        let sql = v1::WriteRequest {
            db: "db".into(),
            tables: vec![v1::TableWrite::default()],
            ..v1::WriteRequest::default()
        };
        match decode_write(Bytes::from(sql.encode_to_vec())).unwrap() {
            WriteIn::Wire(w) => assert_eq!(w, sql),
            WriteIn::Read(_) => panic!("a TableWrite is left to prost"),
        }

        // Cut anywhere inside the first block, or with a wire type no field has.
        for cut in [1, 5, bytes.len() / 2, bytes.len() - 1] {
            let e = decode_write(Bytes::copy_from_slice(&bytes[..cut])).unwrap_err();
            assert_eq!(e.code(), tonic::Code::Internal, "cut at {cut}: {e:?}");
        }
        let e = decode_write(Bytes::from_static(&[0x2f, 0x01])).unwrap_err();
        assert_eq!(e.code(), tonic::Code::Internal, "{e:?}");
    }
}
