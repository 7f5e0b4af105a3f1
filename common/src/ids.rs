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

/// The hasher of maps keyed by [`TableUid`] that a write probes once per subtable.
///
/// A vnode hands uids out consecutively, and a client lists a batch's subtables in the order it
/// first saw them, which is their creation order. Keeping the uid's low bits as the hash keeps
/// such a batch walking neighbouring buckets of the table in order (which the CPU prefetches)
/// instead of jumping to a random, cold one per subtable: with 25,000 subtables per vnode the
/// jump was a cache miss per row. The top 7 bits, which hashbrown compares before the key,
/// come from a multiply so that neighbouring uids do not share them. Uids are the vnode's own,
/// so no client can choose them to collide.
#[derive(Clone, Copy, Debug, Default)]
pub struct UidHash;

impl std::hash::BuildHasher for UidHash {
    type Hasher = UidHasher;
    fn build_hasher(&self) -> UidHasher {
        UidHasher(0)
    }
}

/// See [`UidHash`].
#[derive(Clone, Copy, Debug, Default)]
pub struct UidHasher(u64);

impl std::hash::Hasher for UidHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Not the path of a `TableUid` (that is `write_u64`); any other key still hashes.
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = self.0.rotate_left(29) ^ v;
    }

    fn finish(&self) -> u64 {
        const LOW: u64 = u64::MAX >> 7;
        let v = self.0;
        (v & LOW) | (v.wrapping_mul(0x9E37_79B9_7F4A_7C15) & !LOW)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn neighbouring_uids_get_neighbouring_buckets_and_varied_tags() {
        let h = |u: u64| UidHash.hash_one(TableUid(u));
        for u in 1..1000u64 {
            // hashbrown takes the bucket from the low bits ...
            assert_eq!(h(u) & 0xFFFF, u & 0xFFFF);
        }
        // ... and its 7-bit tag from the top ones: 128 consecutive uids use most tags.
        let tags: std::collections::HashSet<u64> = (0..128u64).map(|u| h(u) >> 57).collect();
        assert!(tags.len() > 64, "{} tags", tags.len());
    }
}
