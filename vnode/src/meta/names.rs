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
//! each a cache miss. Here an entry (64 bytes: a 48-byte key, a 16-byte slot) holds all of
//! it, and the entries are kept in the order the subtables were created, which is the order
//! batches name them in, so most lookups read the entries just after the last one found
//! rather than a random bucket ([`NameIndex`]).

use hashbrown::HashTable;
use std::hash::BuildHasher;
use tidal_common::names::NameKey;
use tidal_common::near::NearCursor;
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

/// Subtable name -> its [`NameSlot`], the entries kept in the order their names were added
/// (a removal moves the last entry into the hole; a catalog read back from disk adds them by
/// uid, which is creation order, so a restart keeps the order). A batch names its subtables in
/// much the order they were created in (the first batches of a feed created them, and a feed
/// names its devices in the same order every interval), so [`NameIndex::get_near`] finds most
/// of them just after where a recent run of lookups left off, in memory order: with 100,000s
/// of subtables a probe of a hash map of them was a cache miss per subtable per batch, a
/// sixth of a data node's write CPU at 100,000 trucks.
#[derive(Clone)]
pub struct NameIndex {
    entries: Vec<(NameKey, NameSlot)>,
    /// The hash (`state`) of each entry's name, in `entries`' order: the window around a
    /// cursor is scanned here, 8 bytes an entry instead of the entry's 64.
    hashes: Vec<u64>,
    /// Positions in `entries`, by their names' hashes.
    table: HashTable<u32>,
    state: foldhash::fast::RandomState,
    /// `state`'s hash of a name, but for tests of colliding hashes.
    hash_with: fn(&foldhash::fast::RandomState, &[u8]) -> u64,
}

impl Default for NameIndex {
    fn default() -> Self {
        NameIndex {
            entries: Vec::new(),
            hashes: Vec::new(),
            table: HashTable::new(),
            state: Default::default(),
            hash_with: |state, name| state.hash_one(name),
        }
    }
}

impl NameIndex {
    fn hash(&self, name: &[u8]) -> u64 {
        (self.hash_with)(&self.state, name)
    }

    fn name_at(&self, i: usize) -> Option<&[u8]> {
        self.entries.get(i).map(|(k, _)| k.as_bytes())
    }

    /// The position of `name`, whose hash is `h`.
    fn position(&self, name: &[u8], h: u64) -> Option<usize> {
        let i = self
            .table
            .find(h, |&i| self.name_at(i as usize) == Some(name))?;
        Some(*i as usize)
    }

    pub fn contains(&self, name: &[u8]) -> bool {
        self.position(name, self.hash(name)).is_some()
    }

    pub fn get(&self, name: &[u8]) -> Option<NameSlot> {
        let i = self.position(name, self.hash(name))?;
        self.entries.get(i).map(|(_, s)| *s)
    }

    /// [`NameIndex::get`], looking first near `cursor` (which this moves to the entry found).
    pub fn get_near(&self, name: &[u8], cursor: &mut NearCursor) -> Option<NameSlot> {
        let h = self.hash(name);
        let is_name = |i| self.name_at(i) == Some(name);
        let probe = || self.position(name, h);
        let i = cursor.find_hash(&self.hashes, h, is_name, probe)?;
        // A batch's next subtables are most often the next entries: the one after next is
        // fetched while this one's and the next one's rows are planned.
        tidal_common::near::prefetch(&self.entries, i + 2);
        self.entries.get(i).map(|(_, s)| *s)
    }

    /// Adds `name` with `slot`, or gives the entry of `name` `slot` (keeping its place).
    pub fn insert(&mut self, name: &str, slot: NameSlot) {
        let b = name.as_bytes();
        let h = self.hash(b);
        if let Some(i) = self.position(b, h) {
            if let Some(e) = self.entries.get_mut(i) {
                e.1 = slot;
            }
            return;
        }
        let at = self.entries.len() as u32;
        self.entries.push((NameKey::new(name), slot));
        self.hashes.push(h);
        let hashes = &self.hashes;
        self.table
            .insert_unique(h, at, |&i| hashes.get(i as usize).copied().unwrap_or(0));
    }

    /// Removes `name`'s entry, giving back its slot.
    pub fn remove(&mut self, name: &[u8]) -> Option<NameSlot> {
        let h = self.hash(name);
        let i = self.position(name, h)?;
        if let Ok(e) = self.table.find_entry(h, |&j| j as usize == i) {
            e.remove();
        }
        let last = self.entries.len() - 1;
        if i != last {
            // The last entry moves into the hole: its table slot follows it.
            let hl = self.hashes.get(last).copied().unwrap_or(0);
            if let Some(j) = self.table.find_mut(hl, |&j| j as usize == last) {
                *j = i as u32;
            }
        }
        self.hashes.swap_remove(i);
        Some(self.entries.swap_remove(i).1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use std::collections::HashMap;

    /// Random adds, replacements and removals, looked up near a cursor in feed-like orders
    /// (runs, late names, names never added), against a plain map: with the real hash, with
    /// every name hashing alike (every window hit is another name) and with three hashes.
    #[test]
    fn finds_what_a_map_finds_in_any_order_and_with_colliding_hashes() {
        let hashes: [fn(&foldhash::fast::RandomState, &[u8]) -> u64; 3] = [
            |state, name| state.hash_one(name),
            |_, _| 7,
            |_, name| name.len() as u64 % 3,
        ];
        for (k, hash_with) in hashes.into_iter().enumerate() {
            let mut rng = rand::rngs::StdRng::seed_from_u64(k as u64);
            let mut ix = NameIndex {
                hash_with,
                ..NameIndex::default()
            };
            let mut model: HashMap<String, NameSlot> = HashMap::new();
            let names: Vec<String> = (0..600).map(|i| format!("t_{i}")).collect();
            let long = "x".repeat(tidal_common::names::INLINE_BYTES + 5);
            let mut cursor = NearCursor::default();
            // Half the names added in order first, as a feed's first batches create them.
            for (i, n) in names.iter().enumerate().step_by(2) {
                let slot = NameSlot {
                    uid: TableUid(1_000_000 + i as u64),
                    stable: StableId(0),
                };
                ix.insert(n, slot);
                model.insert(n.clone(), slot);
            }
            for step in 0..20_000u64 {
                let name = match rng.random_range(0..50) {
                    0 => long.as_str(),
                    _ => names[rng.random_range(0..names.len())].as_str(),
                };
                match rng.random_range(0..10) {
                    0..=2 => {
                        let slot = NameSlot {
                            uid: TableUid(step),
                            stable: StableId(rng.random_range(0..3)),
                        };
                        ix.insert(name, slot);
                        model.insert(name.to_string(), slot);
                    }
                    3 => {
                        assert_eq!(ix.remove(name.as_bytes()), model.remove(name), "{name}");
                    }
                    _ => {
                        // A run of names in order, as a batch names them.
                        let from = rng.random_range(0..names.len());
                        for n in names.iter().skip(from).take(rng.random_range(1..40)) {
                            let want = model.get(n).copied();
                            assert_eq!(ix.get_near(n.as_bytes(), &mut cursor), want, "{n}");
                            assert_eq!(ix.get(n.as_bytes()), want, "{n}");
                            assert_eq!(ix.contains(n.as_bytes()), want.is_some());
                        }
                    }
                }
            }
            assert_eq!(ix.entries.len(), model.len());
            for (n, slot) in &model {
                assert_eq!(ix.get_near(n.as_bytes(), &mut cursor), Some(*slot));
            }
        }
    }
}
