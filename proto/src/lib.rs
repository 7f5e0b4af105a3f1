//! The gRPC/protobuf contract of Tidal (generated from `proto/tidal.proto`) and the helpers
//! that carry [`tidal_common::StatusCode`] inside a gRPC status. Conversions between these
//! wire types and the internal types live in the `tidal` binary, at the edge.

#![allow(clippy::all)]

pub mod v1 {
    tonic::include_proto!("tidal.v1");
}

/// Metadata key that carries the numeric Tidal status code in every error status.
pub const STATUS_CODE_KEY: &str = "x-tidal-code";

pub mod convert;
pub use convert::{code_of, status_error, WireError};
