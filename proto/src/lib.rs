//! The gRPC/protobuf contract of Tidal (generated from `proto/tidal.proto`) and the helpers
//! that carry [`tidal_common::StatusCode`] inside a gRPC status. Conversions between these
//! wire types and the internal types live in the `tidal` binary, at the edge.

#![allow(clippy::all)]

pub mod v1 {
    tonic::include_proto!("tidal.v1");
}

/// Metadata key that carries the numeric Tidal status code in every error status.
pub const STATUS_CODE_KEY: &str = "x-tidal-code";

/// Metadata key of the wire version a Tidal client or server speaks, on every request the
/// client library sends and every response a server sends.
pub const WIRE_VERSION_KEY: &str = "tidal-wire-version";
/// The version of this contract. It changes only when a message or call changes meaning in
/// a way an older peer would misread (new fields and calls do not change it: protobuf and
/// gRPC let an older peer skip or refuse those clearly). A server refuses a request that
/// carries another version with WIRE_VERSION_MISMATCH, naming both, instead of
/// misreading it; a request without the key (grpcurl, other gRPC tools) is taken as this
/// version.
pub const WIRE_VERSION: u32 = 1;

/// The refusal of a request whose `tidal-wire-version` is `got` (the raw header value), or
/// `None` when it is this version.
pub fn wire_version_refusal(got: &[u8]) -> Option<tonic::Status> {
    let text = String::from_utf8_lossy(got);
    match text.trim().parse::<u32>() {
        Ok(WIRE_VERSION) => None,
        Ok(v) => Some(status_error(
            tidal_common::StatusCode::WireVersionMismatch,
            format!(
                "the client speaks Tidal wire version {v}, this server speaks {WIRE_VERSION}: \
                 use a client and server of matching versions"
            ),
        )),
        Err(_) => Some(status_error(
            tidal_common::StatusCode::WireVersionMismatch,
            format!(
                "the {WIRE_VERSION_KEY} header '{text}' is not a version number (this server \
                 speaks {WIRE_VERSION})"
            ),
        )),
    }
}

pub mod convert;
pub mod write_read;
pub mod write_wire;
pub use convert::{code_of, status_error, WireError};
