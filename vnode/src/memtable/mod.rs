//! The in-memory write buffer: per subtable, rows ordered by timestamp.
//!
//! Owns: rows written since the last committed flush. Invariants: at most one row per
//! (uid, ts): a later insert of the same ts replaces the whole row (inserts are applied in WAL
//! sequence order, so "later" == higher WAL sequence); `bytes` is an estimate of the heap used
//! and is what the flush trigger compares against `buffer_bytes_max`.

use std::collections::{BTreeMap, HashMap};
use tidal_common::{Column, DataType, TableUid, Value};

/// One row: values in the STABLE's column order (index 0 = ts).
pub type Row = Vec<Value>;

/// Fixed per-row overhead estimate (B-tree slot, key, vector header).
const ROW_OVERHEAD_BYTES: u64 = 64;

#[derive(Default)]
pub struct Memtable {
    tables: HashMap<TableUid, BTreeMap<i64, Row>>,
    bytes: u64,
    rows: u64,
}

fn row_bytes(r: &Row) -> u64 {
    let strings: usize = r
        .iter()
        .map(|v| match v {
            Value::Str(s) => s.len(),
            _ => 0,
        })
        .sum();
    ROW_OVERHEAD_BYTES + (r.len() * std::mem::size_of::<Value>() + strings) as u64
}

impl Memtable {
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Inserts validated columns (equal lengths, column 0 = non-null timestamps).
    pub fn insert(&mut self, uid: TableUid, cols: &[Column]) {
        let Some(ts_col) = cols.first() else { return };
        let n = ts_col.len();
        let t = self.tables.entry(uid).or_default();
        for i in 0..n {
            let ts = match ts_col.get(i) {
                Value::Timestamp(t) | Value::Int(t) => t,
                _ => continue,
            };
            let row: Row = cols.iter().map(|c| c.get(i)).collect();
            self.bytes += row_bytes(&row);
            match t.insert(ts, row) {
                Some(old) => self.bytes = self.bytes.saturating_sub(row_bytes(&old)),
                None => self.rows += 1,
            }
        }
    }

    pub fn remove_table(&mut self, uid: TableUid) {
        if let Some(t) = self.tables.remove(&uid) {
            for r in t.values() {
                self.bytes = self.bytes.saturating_sub(row_bytes(r));
            }
            self.rows = self.rows.saturating_sub(t.len() as u64);
        }
    }

    /// The rows of `uid` with `lo <= ts <= hi` as columns `wanted` (index into the row, type);
    /// index 0 is the ts. Values a row lacks (written before a column was added) are NULL.
    pub fn range_columns(
        &self,
        uid: TableUid,
        lo: i64,
        hi: i64,
        wanted: &[(usize, DataType)],
    ) -> Vec<Column> {
        let mut out: Vec<Column> = wanted.iter().map(|(_, t)| Column::empty(*t, 0)).collect();
        let Some(t) = self.tables.get(&uid) else {
            return out;
        };
        if lo > hi {
            return out;
        }
        for (ts, row) in t.range(lo..=hi) {
            for (c, (i, _)) in out.iter_mut().zip(wanted) {
                if *i == 0 {
                    c.push(&Value::Timestamp(*ts));
                } else {
                    c.push(row.get(*i).unwrap_or(&Value::Null));
                }
            }
        }
        out
    }

    /// Newest ts of `uid` (for window splitting and stats).
    pub fn ts_bounds(&self, uid: TableUid) -> Option<(i64, i64)> {
        let t = self.tables.get(&uid)?;
        Some((*t.keys().next()?, *t.keys().next_back()?))
    }

    /// The first ts of `uid` at or after `from`.
    pub fn next_ts(&self, uid: TableUid, from: i64) -> Option<i64> {
        self.tables.get(&uid)?.range(from..).next().map(|(k, _)| *k)
    }

    /// The subtables with rows, sorted by uid.
    pub fn uids(&self) -> Vec<TableUid> {
        let mut v: Vec<TableUid> = self.tables.keys().copied().collect();
        v.sort();
        v
    }
}
