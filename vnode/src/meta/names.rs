//! The catalog's index of subtable names, as the write path reads it: name -> (uid, STABLE).
//!
//! Owns: one entry per live subtable, keyed by a [`tidal_common::names::NameKey`] (the name
//! held in the entry itself when it is short, as TSBS's and schemaless writes' names are),
//! with the subtable's uid and its STABLE as a small id ([`StableId`]). Invariant: an
//! entry's name is exactly the subtable's name (lookups compare every byte, so no two names
//! ever share an entry).
//!
//! Why: the write path resolves every subtable of every batch by name. With 100,000s of
//! subtables, the former map of `String` keys to shared table entries read three places in
//! memory per lookup (its bucket, the key's bytes, the table entry for its STABLE's name),
//! each a cache miss; here it is the bucket alone (64 bytes: a 48-byte key, this 16-byte
//! slot).

use tidal_common::TableUid;

/// A STABLE as the name index holds it: its position in the catalog's list of STABLE names
/// seen (never reused while the catalog lives, so an id never changes meaning).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StableId(pub u32);

/// What the name index holds of a subtable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NameSlot {
    pub uid: TableUid,
    pub stable: StableId,
}
