//! Newtypes for identifiers, so that a vgroup id is never passed where a dnode id is expected.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A vgroup (hash shard of one database). Unique across the cluster, assigned by the mnode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct VgroupId(pub u32);

/// A data node (one `tidal vnode` process). Assigned by the mnode at first registration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DnodeId(pub u32);

/// A subtable's id inside its vnode. Never reused within a vnode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TableUid(pub u64);

/// Version of a STABLE schema; bumped by every ALTER.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SchemaVersion(pub u32);

macro_rules! display_inner {
    ($($t:ty),*) => {$(
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    )*};
}
display_inner!(VgroupId, DnodeId, TableUid, SchemaVersion);
