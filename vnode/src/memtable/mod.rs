//! The in-memory write buffer: per subtable, its rows as columns sorted by timestamp.
//!
//! Owns: rows written since the last freeze. Invariants: per subtable the columns hold unique,
//! ascending timestamps (column 0); a later insert of a ts replaces the whole row (inserts are
//! applied in WAL order, so "later" == higher WAL sequence); all columns of a subtable have the
//! same length. `bytes` estimates the heap used and is what the freeze trigger compares
//! against `BUFFER`.
//!
//! Why columns and not a row map: IoT batches arrive mostly in time order, so the common insert
//! is a `Vec::extend` per column; an out-of-order batch is merged in one linear pass
//! (`merge::merge_runs`), and flushes and scans slice columns instead of rebuilding them.

use crate::block::ts_slice;
use crate::merge::{merge_runs, Run};
use std::collections::HashMap;
use tidal_common::{Column, ColumnData, DataType, TableUid};

#[derive(Default)]
pub struct Memtable {
    tables: HashMap<TableUid, TableMem>,
    bytes: u64,
}

#[derive(Default)]
struct TableMem {
    cols: Vec<Column>,
    bytes: u64,
}

fn col_bytes(c: &Column) -> u64 {
    let data = match &c.data {
        ColumnData::Bool(v) => v.len() as u64,
        ColumnData::Str(v) => v.iter().map(|s| 24 + s.len() as u64).sum(),
        d => 8 * d.len() as u64,
    };
    data + c.nulls.len() as u64
}

/// An all-NULL column of `c`'s physical type and `n` rows.
fn null_like(c: &Column, n: usize) -> Column {
    let t = match &c.data {
        ColumnData::Bool(_) => DataType::Bool,
        ColumnData::Int(_) => DataType::BigInt,
        ColumnData::UInt(_) => DataType::UBigInt,
        ColumnData::Float(_) => DataType::Double,
        ColumnData::Str(_) => DataType::VarChar(1),
        ColumnData::Timestamp(_) => DataType::Timestamp,
    };
    Column::all_null(t, n)
}

/// Sorts a batch by ts, keeping the last copy of a repeated ts.
fn sort_batch(cols: &[Column]) -> Vec<Column> {
    let ts = cols.first().map(ts_slice).unwrap_or(&[]);
    if ts.windows(2).all(|w| w[0] < w[1]) {
        return cols.to_vec();
    }
    let mut idx: Vec<usize> = (0..ts.len()).collect();
    // Stable: equal timestamps keep arrival order, and the last of each run wins below.
    idx.sort_by_key(|i| ts[*i]);
    let mut keep: Vec<usize> = Vec::with_capacity(idx.len());
    for i in idx {
        match keep.last_mut() {
            Some(last) if ts[*last] == ts[i] => *last = i,
            _ => keep.push(i),
        }
    }
    cols.iter().map(|c| c.take(&keep)).collect()
}

impl TableMem {
    fn recount(&mut self) {
        self.bytes = self.cols.iter().map(col_bytes).sum::<u64>() + 64;
    }

    fn rows(&self) -> usize {
        self.cols.first().map(Column::len).unwrap_or(0)
    }

    /// Pads the narrower of (self, batch) with NULL columns (a newer schema version added
    /// columns), so both have the same width.
    fn align(&mut self, batch: &mut Vec<Column>) {
        let (n, m) = (self.rows(), batch.first().map(Column::len).unwrap_or(0));
        while self.cols.len() < batch.len() {
            let c = null_like(&batch[self.cols.len()], n);
            self.cols.push(c);
        }
        while batch.len() < self.cols.len() {
            let c = null_like(&self.cols[batch.len()], m);
            batch.push(c);
        }
    }

    fn insert(&mut self, cols: &[Column]) {
        // Fast path, no copy of the batch: sorted, after everything held, same width.
        let ts = cols.first().map(ts_slice).unwrap_or(&[]);
        let last = self.cols.first().and_then(|c| ts_slice(c).last().copied());
        if !ts.is_empty()
            && cols.len() == self.cols.len()
            && last.is_some_and(|l| ts[0] > l)
            && ts.windows(2).all(|w| w[0] < w[1])
        {
            for (a, b) in self.cols.iter_mut().zip(cols) {
                a.extend(b);
            }
            self.bytes += cols.iter().map(col_bytes).sum::<u64>();
            return;
        }
        let mut batch = sort_batch(cols);
        let m = batch.first().map(Column::len).unwrap_or(0);
        if m == 0 {
            return;
        }
        if self.cols.is_empty() {
            self.cols = batch;
            self.recount();
            return;
        }
        self.align(&mut batch);
        let last = ts_slice(&self.cols[0]).last().copied();
        let first_new = ts_slice(&batch[0]).first().copied();
        match (last, first_new) {
            (Some(l), Some(f)) if f > l => {
                // In-order append: the common IoT case.
                for (a, b) in self.cols.iter_mut().zip(&batch) {
                    a.extend(b);
                }
                self.bytes += batch.iter().map(col_bytes).sum::<u64>();
            }
            _ => {
                let old = std::mem::take(&mut self.cols);
                self.cols = merge_runs(
                    vec![
                        Run { prio: 0, cols: old },
                        Run {
                            prio: 1,
                            cols: batch,
                        },
                    ],
                    Vec::new,
                );
                self.recount();
            }
        }
    }
}

impl Memtable {
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Inserts validated columns (equal lengths, column 0 = non-null timestamps), in WAL order.
    pub fn insert(&mut self, uid: TableUid, cols: &[Column]) {
        let t = self.tables.entry(uid).or_default();
        let before = t.bytes;
        t.insert(cols);
        self.bytes = self.bytes - before + t.bytes;
    }

    pub fn remove_table(&mut self, uid: TableUid) {
        if let Some(t) = self.tables.remove(&uid) {
            self.bytes = self.bytes.saturating_sub(t.bytes);
        }
    }

    /// The rows of `uid` with `lo <= ts <= hi` as columns `wanted` (column index, type); index
    /// 0 is the ts. Columns a row lacks (written before a column was added) are NULL.
    pub fn range_columns(
        &self,
        uid: TableUid,
        lo: i64,
        hi: i64,
        wanted: &[(usize, DataType)],
    ) -> Vec<Column> {
        let empty = || wanted.iter().map(|(_, t)| Column::empty(*t, 0)).collect();
        let Some(t) = self.tables.get(&uid) else {
            return empty();
        };
        if lo > hi || t.cols.is_empty() {
            return empty();
        }
        let ts = ts_slice(&t.cols[0]);
        let s = ts.partition_point(|x| *x < lo);
        let e = ts.partition_point(|x| *x <= hi);
        if s >= e {
            return empty();
        }
        wanted
            .iter()
            .map(|(i, ty)| match t.cols.get(*i) {
                Some(c) if s == 0 && e == c.len() => c.clone(),
                Some(c) => c.slice(s, e),
                None => Column::all_null(*ty, e - s),
            })
            .collect()
    }

    /// First and last ts of `uid`.
    pub fn ts_bounds(&self, uid: TableUid) -> Option<(i64, i64)> {
        let ts = ts_slice(self.tables.get(&uid)?.cols.first()?);
        Some((*ts.first()?, *ts.last()?))
    }

    /// The first ts of `uid` at or after `from`.
    pub fn next_ts(&self, uid: TableUid, from: i64) -> Option<i64> {
        let ts = ts_slice(self.tables.get(&uid)?.cols.first()?);
        ts.get(ts.partition_point(|x| *x < from)).copied()
    }

    /// The subtables with rows, sorted by uid.
    pub fn uids(&self) -> Vec<TableUid> {
        let mut v: Vec<TableUid> = self
            .tables
            .iter()
            .filter(|(_, t)| t.rows() > 0)
            .map(|(k, _)| *k)
            .collect();
        v.sort();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tidal_common::Value;

    fn cols(rows: &[(i64, i64)]) -> Vec<Column> {
        vec![
            Column::new(ColumnData::Timestamp(rows.iter().map(|r| r.0).collect())),
            Column::new(ColumnData::Int(rows.iter().map(|r| r.1).collect())),
        ]
    }

    fn all(m: &Memtable) -> Vec<(i64, Value)> {
        let c = m.range_columns(
            TableUid(1),
            i64::MIN,
            i64::MAX,
            &[
                (0, DataType::Timestamp),
                (1, DataType::BigInt),
                (2, DataType::Double),
            ],
        );
        assert!((0..c[2].len()).all(|i| c[2].get(i) == Value::Null));
        (0..c[0].len())
            .map(|i| (ts_slice(&c[0])[i], c[1].get(i)))
            .collect()
    }

    #[test]
    fn appends_merges_and_last_write_wins() {
        let mut m = Memtable::default();
        m.insert(TableUid(1), &cols(&[(1, 10), (3, 30)]));
        m.insert(TableUid(1), &cols(&[(5, 50), (4, 40), (5, 55)])); // unsorted, repeated ts
        m.insert(TableUid(1), &cols(&[(0, 0), (3, 33)])); // out of order, replaces 3
        assert_eq!(
            all(&m),
            [(0, 0), (1, 10), (3, 33), (4, 40), (5, 55)]
                .map(|(t, v)| (t, Value::Int(v)))
                .to_vec()
        );
        assert_eq!(m.ts_bounds(TableUid(1)), Some((0, 5)));
        assert_eq!(m.next_ts(TableUid(1), 2), Some(3));
        assert!(m.bytes() > 0);
        m.remove_table(TableUid(1));
        assert_eq!(m.bytes(), 0);
    }
}
