//! The public catalog types that the mnode hands out (and the gRPC layer converts).
//! They are plain data: every value returned is a copy, never a view into the catalog.

use serde::{Deserialize, Serialize};
use tidal_common::{DbOptions, DnodeId, HashRange, VgroupId};

/// Configuration of an [`crate::Mnode`].
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MnodeConfig {
    /// A data node counts as alive if it heartbeated (or registered) within this many
    /// milliseconds. Default 10 000.
    pub dnode_timeout_ms: u64,
    /// Write a snapshot and start a new log once the log holds this many records.
    /// Default 1000.
    pub snapshot_every: u64,
}

impl Default for MnodeConfig {
    fn default() -> Self {
        MnodeConfig {
            dnode_timeout_ms: 10_000,
            snapshot_every: 1000,
        }
    }
}

/// A database as the catalog holds it. `vgroups` are ordered by hash range; their ranges are
/// `split_hash_space(options.vgroups)` in order, so together they cover the 32-bit hash space.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DatabaseInfo {
    pub name: String,
    pub options: DbOptions,
    pub created_ms: i64,
    pub vgroups: Vec<VgroupInfo>,
}

/// One vgroup: a hash shard of one database, hosted (REPLICA 1) by one data node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VgroupInfo {
    pub id: VgroupId,
    pub range: HashRange,
    pub dnode: DnodeId,
}

/// What a heartbeat answers: a vgroup the data node must host, with what it needs to open it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VgroupAssignment {
    pub db: String,
    pub options: DbOptions,
    pub vgroup: VgroupInfo,
}

/// A data node as `SHOW DNODES` shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DnodeInfo {
    pub id: DnodeId,
    pub addr: String,
    /// Number of vnodes (vgroup replicas) placed on this data node.
    pub vnodes: u32,
    /// Whether it heartbeated within `dnode_timeout_ms`.
    pub alive: bool,
    pub created_ms: i64,
}
