//! Types shared by every Tidal crate: ids, data types and values, column batches, schemas,
//! database options, write batches, the routing hash and the wire status codes.
//!
//! Invariants owned here:
//! - A [`StableSchema`]'s first column is always the `TIMESTAMP` primary key named by the user.
//! - A [`Column`]'s data vector and its null mask have the same length; a null slot holds a
//!   placeholder value (zero / empty) that readers must ignore.
//! - [`vgroup_index`] is the single definition of routing: client, frontend and vnode all call it.
//!
//! This crate does no I/O and depends on neither tonic nor the generated protobuf types.

pub mod batch;
pub mod histogram;
pub mod ids;
pub mod names;
pub mod near;
pub mod route;
pub mod schema;
pub mod status;
pub mod time;
pub mod types;
pub mod write;

pub use batch::{Batch, Column, ColumnData, Field};
pub use histogram::{HistogramSnapshot, LatencyHistogram, LATENCY_BOUNDS_SECONDS};
pub use ids::{DnodeId, SchemaVersion, TableUid, UidHash, VgroupId};
pub use route::{hash_table_name, split_hash_space, vgroup_index, HashRange};
pub use schema::{ColumnCodecSpec, ColumnDef, DbOptions, StableSchema, StableTables, TableMeta};
pub use status::StatusCode;
pub use time::{parse_duration, Precision};
pub use types::{DataType, Value};
pub use write::{group_runs, RowBlock, RowBlockParts, TableWrite, Tags, WriteBatch};
