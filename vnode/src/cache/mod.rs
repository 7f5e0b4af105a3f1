//! The last-row cache: per subtable, its last row (`LAST_ROW`, NULLs included) and the last
//! non-NULL value of each column (`LAST`), in an LRU bounded in bytes (`CACHESIZE`).
//!
//! Owns: the cached entries only; it never reads files or memtables (the vnode loads a missing
//! entry and folds rows in). Invariant, kept under the vnode's state lock: an entry covers
//! every row of its subtable in the files, so folding the frozen and then the active memtable
//! into it ([`Entry::update_range`], ">= wins", which also notices a cached value whose row
//! was rewritten with a NULL) gives what a full scan would. Hence:
//! - writes never touch the cache: an ingest pays nothing for it, however many subtables are
//!   cached; a read folds the memtables (for LAST_ROW only their last rows, O(1) each);
//! - a flush folds the memtable it publishes into the entries present before it swaps the
//!   files in, a chunk of subtables per hold of the state lock (a million subtables take
//!   hundreds of ms: too long to stall writes and reads for). Until the swap, reads still fold
//!   that memtable in as the frozen one, and folding rows twice changes nothing; an entry a
//!   read makes meanwhile was read from the memtables as well as the files, so it covers the
//!   flushed rows without a fold. A subtable without an entry gets one there, while the cache
//!   has room (never evicting for it), when its newest flushed row is newer than every row
//!   already in the files (late rows beside it do not matter for LAST_ROW). Its LAST values
//!   count as known only when every flushed row is that new and they give every column one,
//!   or the files held no rows at all;
//! - a miss whose memtable row is newer than every row in the files answers from it and
//!   caches it as a row-only entry; any other miss loads from the data (a LAST_ROW miss only
//!   the row at the subtable's greatest ts), and is cached only if the file set did not change
//!   meanwhile;
//! - DELETE and DROP remove entries; an expired window removes the entries that refer to its
//!   rows; a reopened vnode starts empty, and a data node then warms it up in the background
//!   (`Vnode::warm_last_rows`: each subtable's LAST_ROW loaded as a miss would, while it fits
//!   without evicting).

use lru::LruCache;
use tidal_common::{Column, TableUid, Value};

/// What the cache keeps, by database option CACHEMODEL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheModel {
    pub last_row: bool,
    pub last_value: bool,
}

impl CacheModel {
    pub fn parse(s: &str) -> CacheModel {
        match s {
            "last_row" => CacheModel {
                last_row: true,
                last_value: false,
            },
            "last_value" => CacheModel {
                last_row: false,
                last_value: true,
            },
            "both" => CacheModel {
                last_row: true,
                last_value: true,
            },
            _ => CacheModel {
                last_row: false,
                last_value: false,
            },
        }
    }

    pub fn any(self) -> bool {
        self.last_row || self.last_value
    }
}

/// One subtable's cached answers. `row` holds every column of the STABLE at load time (later
/// added columns read as NULL); `values[i]` is column i's last non-NULL (ts, value).
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub row: Option<(i64, Vec<Value>)>,
    pub values: Vec<Option<(i64, Value)>>,
    /// `values` was loaded (CACHEMODEL last_value or both); otherwise writes leave it alone.
    pub values_loaded: bool,
}

fn value_bytes(v: &Value) -> u64 {
    32 + match v {
        Value::Str(s) => s.len() as u64,
        _ => 0,
    }
}

impl Entry {
    fn bytes(&self) -> u64 {
        let row: u64 = self
            .row
            .as_ref()
            .map(|(_, r)| r.iter().map(value_bytes).sum())
            .unwrap_or(0);
        let vals: u64 = self
            .values
            .iter()
            .map(|v| 16 + v.as_ref().map(|(_, x)| value_bytes(x)).unwrap_or(0))
            .sum();
        // Key, LRU node and vector headers.
        96 + row + vals
    }

    /// Folds a batch of rows (columns, column 0 = ts) into the entry with the ">= wins" rule.
    #[cfg(test)]
    pub fn update(&mut self, cols: &[Column]) {
        let n = cols.first().map(Column::len).unwrap_or(0);
        self.update_range(cols, 0, n);
    }

    /// [`Entry::update`] with rows `s..e` of `cols` only (one run of a row block), read in
    /// place.
    pub fn update_range(&mut self, cols: &[Column], s: usize, e: usize) {
        let Some(ts_col) = cols.first() else { return };
        let all = crate::block::ts_slice(ts_col);
        let e = e.min(all.len());
        let s = s.min(e);
        let ts = &all[s..e];
        // The batch is in WAL order; for equal ts the later row wins, so scan forwards.
        // (Indexes below are into `ts`; row i of the batch is row s + i of `cols`.)
        let mut best: Option<usize> = None;
        for (i, t) in ts.iter().enumerate() {
            if best.is_none_or(|b| *t >= ts[b]) {
                best = Some(i);
            }
        }
        if let Some(b) = best {
            match &mut self.row {
                // Overwritten in place: every write of a cached subtable comes here.
                Some((cts, row)) if ts[b] >= *cts => {
                    *cts = ts[b];
                    // A batch of an older schema version is narrower: keep the width.
                    if row.len() < cols.len() {
                        row.resize(cols.len(), Value::Null);
                    }
                    for (k, slot) in row.iter_mut().enumerate() {
                        *slot = cols.get(k).map_or(Value::Null, |c| c.get(s + b));
                    }
                }
                Some(_) => {}
                None => self.row = Some((ts[b], cols.iter().map(|c| c.get(s + b)).collect())),
            }
        }
        if !self.values_loaded {
            return;
        }
        if self.values.len() < cols.len() {
            self.values.resize(cols.len(), None);
        }
        // A row whose ts comes again later in the batch is replaced by that later copy, NULLs
        // and all, so only the last copy of each ts can hold a column's last value.
        let replaced: Vec<bool> = if ts.windows(2).all(|w| w[0] < w[1]) {
            Vec::new()
        } else {
            let mut seen = std::collections::HashSet::with_capacity(ts.len());
            let mut r: Vec<bool> = ts.iter().rev().map(|t| !seen.insert(*t)).collect();
            r.reverse();
            r
        };
        for (ci, c) in cols.iter().enumerate().skip(1) {
            let mut best: Option<usize> = None;
            for (i, t) in ts.iter().enumerate() {
                if !c.is_null(s + i)
                    && !replaced.get(i).copied().unwrap_or(false)
                    && best.is_none_or(|b| *t >= ts[b])
                {
                    best = Some(i);
                }
            }
            let cached_ts = self.values[ci].as_ref().map(|(t, _)| *t);
            if let Some(b) = best {
                if cached_ts.is_none_or(|cts| ts[b] >= cts) {
                    self.values[ci] = Some((ts[b], c.get(s + b)));
                    continue;
                }
            }
            // The row holding the cached value was rewritten with a NULL there (the last copy
            // of that ts in the batch wins): the previous non-NULL value is now the answer,
            // and only the data knows it.
            if let Some(cts) = cached_ts {
                let last_copy = ts.iter().rposition(|t| *t == cts);
                if last_copy.is_some_and(|i| c.is_null(s + i)) {
                    self.values_loaded = false;
                    self.values.clear();
                    return;
                }
            }
        }
        if let (Some(first), Some((t, _))) = (self.values.first_mut(), &self.row) {
            *first = Some((*t, Value::Timestamp(*t)));
        }
    }
}

pub struct LastRowCache {
    /// foldhash: the uid is hashed on every lookup of a fleet-wide LAST_ROW.
    lru: LruCache<TableUid, Entry, foldhash::fast::RandomState>,
    bytes: u64,
    pub bytes_max: u64,
    pub model: CacheModel,
    pub hits: u64,
    pub misses: u64,
}

impl LastRowCache {
    pub fn new(model: CacheModel, bytes_max: u64) -> LastRowCache {
        LastRowCache {
            lru: LruCache::unbounded_with_hasher(foldhash::fast::RandomState::default()),
            bytes: 0,
            bytes_max,
            model,
            hits: 0,
            misses: 0,
        }
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn len(&self) -> usize {
        self.lru.len()
    }

    pub fn get(&mut self, uid: TableUid) -> Option<Entry> {
        match self.lru.get(&uid) {
            Some(e) => {
                self.hits += 1;
                Some(e.clone())
            }
            None => {
                self.misses += 1;
                None
            }
        }
    }

    /// Like [`LastRowCache::get`], without copying the entry. With `promote` false the entry
    /// keeps its place in the LRU order: a read of a whole fleet touches every entry, so
    /// moving each to the front would change nothing useful about which are evicted first,
    /// while relinking costs two more cache misses per entry (a third of a fleet's lookup).
    /// Only a hit is counted: the caller loads a missing entry through [`LastRowCache::get`],
    /// which counts the miss (counting it here too made every miss count twice).
    pub fn get_ref(&mut self, uid: TableUid, promote: bool) -> Option<&Entry> {
        let found = if promote {
            self.lru.get(&uid)
        } else {
            self.lru.peek(&uid)
        };
        if found.is_some() {
            self.hits += 1;
        }
        found
    }

    pub fn insert(&mut self, uid: TableUid, e: Entry) {
        if !self.model.any() {
            return;
        }
        let b = e.bytes();
        if let Some(old) = self.lru.put(uid, e) {
            self.bytes = self.bytes.saturating_sub(old.bytes());
        }
        self.bytes += b;
        while self.bytes > self.bytes_max {
            match self.lru.pop_lru() {
                Some((_, old)) => self.bytes = self.bytes.saturating_sub(old.bytes()),
                None => break,
            }
        }
    }

    /// Whether a write may create entries now: the model keeps something and there is room.
    pub fn fills(&self) -> bool {
        self.model.any() && self.bytes < self.bytes_max
    }

    /// Inserts an entry a flush or a warm-up made, if it fits without evicting anything (the
    /// caller has checked that it equals what the data would give); whether it did.
    pub fn insert_if_room(&mut self, uid: TableUid, e: Entry) -> bool {
        if self.model.any() && self.bytes + e.bytes() <= self.bytes_max {
            self.insert(uid, e);
            return true;
        }
        false
    }

    /// Whether `uid` has an entry (neither counted nor moved in the LRU order).
    pub fn contains(&self, uid: TableUid) -> bool {
        self.lru.contains(&uid)
    }

    /// Applies `f` (a fold of rows) to a present entry, keeping the byte count; false when
    /// there is none.
    pub fn fold(&mut self, uid: TableUid, f: impl FnOnce(&mut Entry)) -> bool {
        match self.lru.peek_mut(&uid) {
            Some(entry) => {
                let before = entry.bytes();
                f(entry);
                let after = entry.bytes();
                self.bytes = self.bytes - before.min(self.bytes) + after;
                true
            }
            None => false,
        }
    }

    /// Every entry, in no particular order (tests compare them with the data).
    #[cfg(test)]
    pub fn entries(&self) -> Vec<(TableUid, Entry)> {
        self.lru.iter().map(|(u, e)| (*u, e.clone())).collect()
    }

    /// Drops every entry holding a row or value at or before `ts` (windows up to it expired).
    pub fn remove_up_to(&mut self, ts: i64) {
        let stale: Vec<TableUid> = self
            .lru
            .iter()
            .filter(|(_, e)| {
                e.row.as_ref().is_some_and(|(t, _)| *t <= ts)
                    || e.values.iter().flatten().any(|(t, _)| *t <= ts)
            })
            .map(|(u, _)| *u)
            .collect();
        for u in stale {
            self.remove(u);
        }
    }

    pub fn remove(&mut self, uid: TableUid) {
        if let Some(old) = self.lru.pop(&uid) {
            self.bytes = self.bytes.saturating_sub(old.bytes());
        }
    }

    pub fn clear(&mut self) {
        self.lru.clear();
        self.bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tidal_common::ColumnData;

    fn batch(rows: &[(i64, Option<i64>)]) -> Vec<Column> {
        let mut v = Column::empty(tidal_common::DataType::BigInt, 0);
        for r in rows {
            v.push(&r.1.map(Value::Int).unwrap_or(Value::Null));
        }
        vec![
            Column::new(ColumnData::Timestamp(rows.iter().map(|r| r.0).collect())),
            v,
        ]
    }

    #[test]
    fn older_writes_never_replace_equal_ts_does_nulls_kept_apart() {
        let mut e = Entry {
            row: None,
            values: Vec::new(),
            values_loaded: true,
        };
        e.update(&batch(&[(10, Some(1)), (5, Some(2))]));
        assert_eq!(e.row.as_ref().unwrap().0, 10);
        e.update(&batch(&[(7, Some(9))])); // older: ignored
        assert_eq!(e.row.as_ref().unwrap().1[1], Value::Int(1));
        e.update(&batch(&[(12, None), (11, Some(4))]));
        // LAST keeps the last non-NULL value, LAST_ROW the NULL
        assert_eq!(e.row.as_ref().unwrap().1[1], Value::Null);
        assert_eq!(e.row.as_ref().unwrap().0, 12);
        assert_eq!(e.values[1], Some((11, Value::Int(4))));
        // Rewriting the row of the cached LAST value with NULL leaves only the data knowing
        // the answer: the values must be reloaded.
        e.update(&batch(&[(11, None)]));
        assert!(!e.values_loaded);
        // Same ts replaces the row, NULL included.
        e.update(&batch(&[(12, Some(5))]));
        assert_eq!(e.row.as_ref().unwrap().1[1], Value::Int(5));
    }

    #[test]
    fn a_value_replaced_later_in_the_same_batch_is_not_the_last() {
        let mut e = Entry {
            row: Some((3, vec![Value::Timestamp(3), Value::Int(30)])),
            values: vec![Some((3, Value::Timestamp(3))), Some((3, Value::Int(30)))],
            values_loaded: true,
        };
        // ts 10 is written twice; the second copy (NULL) is the row that stays.
        e.update(&batch(&[(10, Some(1)), (8, Some(2)), (10, None)]));
        assert_eq!(e.row.as_ref().unwrap().1[1], Value::Null);
        assert_eq!(e.values[1], Some((8, Value::Int(2))));
    }

    #[test]
    fn lru_stays_within_its_byte_budget() {
        let mut c = LastRowCache::new(CacheModel::parse("both"), 2_000);
        for u in 0..100u64 {
            let mut e = Entry {
                row: None,
                values: Vec::new(),
                values_loaded: true,
            };
            e.update(&batch(&[(u as i64, Some(1))]));
            c.insert(TableUid(u), e);
            assert!(c.bytes() <= 2_000);
        }
        assert!(c.len() > 1 && c.len() < 100);
        assert!(c.get(TableUid(99)).is_some());
        assert!(c.get(TableUid(0)).is_none());
    }

    #[test]
    fn a_read_without_promotion_keeps_the_eviction_order() {
        let entry = |u: i64| {
            let mut e = Entry {
                row: None,
                values: Vec::new(),
                values_loaded: false,
            };
            e.update(&batch(&[(u, Some(1))]));
            e
        };
        let one = entry(0).bytes();
        let mut c = LastRowCache::new(CacheModel::parse("last_row"), 3 * one);
        for u in 0..3 {
            c.insert(TableUid(u), entry(u as i64));
        }
        // 0 is the least recently used: read without promotion, it is still evicted first
        assert!(c.get_ref(TableUid(0), false).is_some());
        c.insert(TableUid(3), entry(3));
        assert!(c.get_ref(TableUid(0), false).is_none());
        // 1 is now the oldest: promoted by a read, 2 goes instead
        assert!(c.get_ref(TableUid(1), true).is_some());
        c.insert(TableUid(4), entry(4));
        assert!(c.get_ref(TableUid(1), false).is_some());
        assert!(c.get_ref(TableUid(2), false).is_none());
        assert_eq!((c.hits, c.misses), (3, 0));
    }

    #[test]
    fn a_range_updates_as_its_slice_does() {
        // Pseudo-random rows with repeated ts and NULLs; every range of a batch, folded in
        // place, must give the entry that folding a copy of those rows gives.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        for _ in 0..200 {
            let n = 1 + next(12) as usize;
            let rows: Vec<(i64, Option<i64>)> = (0..n)
                .map(|_| (next(6) as i64, (next(3) > 0).then(|| next(100) as i64)))
                .collect();
            let cols = batch(&rows);
            let s = next(n as u64) as usize;
            let e = s + next((n - s) as u64 + 1) as usize;
            let start = Entry {
                row: Some((2, vec![Value::Timestamp(2), Value::Int(-1)])),
                values: vec![Some((2, Value::Timestamp(2))), Some((2, Value::Int(-1)))],
                values_loaded: true,
            };
            let mut in_place = start.clone();
            in_place.update_range(&cols, s, e);
            let mut copied = start;
            let sliced: Vec<Column> = cols.iter().map(|c| c.slice(s, e)).collect();
            copied.update(&sliced);
            assert_eq!(in_place, copied, "{rows:?} {s}..{e}");
        }
    }
}
