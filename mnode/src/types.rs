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
    /// Wall-clock ms of its last heartbeat or registration; 0 = none since the mnode opened.
    #[serde(default)]
    pub last_heartbeat_ms: i64,
}

/// What a user may do on one database (or on every database, under the key `*`).
/// A superuser may do everything regardless.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Privilege {
    /// SELECT, SHOW, DESCRIBE, USE.
    pub read: bool,
    /// INSERT, line protocol, DELETE, CREATE/ALTER/DROP STABLE and TABLE, FLUSH, COMPACT.
    pub write: bool,
}

impl Privilege {
    pub const READ: Privilege = Privilege {
        read: true,
        write: false,
    };
    pub const WRITE: Privilege = Privilege {
        read: false,
        write: true,
    };
    pub const ALL: Privilege = Privilege {
        read: true,
        write: true,
    };

    pub fn is_empty(self) -> bool {
        !self.read && !self.write
    }

    pub fn with(self, o: Privilege) -> Privilege {
        Privilege {
            read: self.read || o.read,
            write: self.write || o.write,
        }
    }

    pub fn without(self, o: Privilege) -> Privilege {
        Privilege {
            read: self.read && !o.read,
            write: self.write && !o.write,
        }
    }

    /// `READ`, `WRITE`, `ALL` (or `NONE`), as GRANT spells them.
    pub fn name(self) -> &'static str {
        match (self.read, self.write) {
            (true, true) => "ALL",
            (true, false) => "READ",
            (false, true) => "WRITE",
            (false, false) => "NONE",
        }
    }
}

/// A user as SHOW USERS shows it (no password hash).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UserInfo {
    pub name: String,
    pub superuser: bool,
    pub created_ms: i64,
    pub privileges: std::collections::BTreeMap<String, Privilege>,
}

/// What a server needs to authorize a user's requests: identity, the password version its
/// tokens must carry, and privileges. Never the password hash.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UserAuth {
    pub name: String,
    pub version: u64,
    pub superuser: bool,
    pub privileges: std::collections::BTreeMap<String, Privilege>,
}

/// Every user's [`UserAuth`], with the catalog's auth epoch (which changes whenever any of
/// them does).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AuthTable {
    pub epoch: u64,
    pub users: Vec<UserAuth>,
}
