//! Merging sorted runs of one subtable's rows into one ordered, de-duplicated stream.
//!
//! Owns: the rule that decides which copy of a timestamp wins. Sources are runs (column sets
//! whose column 0 is the ts, sorted with unique ts) tagged with a priority: data-file blocks <
//! older STT files < newer STT files < the frozen memtable < the active memtable, i.e. the order
//! in which the rows were written. For equal ts the highest priority wins, so "the later write
//! wins" holds across every layer. Runs that do not overlap in time are concatenated without a
//! per-row comparison (the common case for in-order IoT data).

use crate::block::ts_slice;
use tidal_common::{Column, ColumnData};

pub struct Run {
    pub prio: u64,
    /// Same column layout in every run; column 0 = ts.
    pub cols: Vec<Column>,
}

impl Run {
    fn ts(&self) -> &[i64] {
        self.cols.first().map(ts_slice).unwrap_or(&[])
    }
}

/// The rows `s..e` of the sorted `ts` with `lo <= ts <= hi`; `None` when that is all of them.
fn rows_within(ts: &[i64], lo: i64, hi: i64) -> Option<(usize, usize)> {
    let s = ts.partition_point(|t| *t < lo);
    let e = ts.partition_point(|t| *t <= hi);
    (s > 0 || e < ts.len()).then_some((s, e))
}

/// Keeps the rows of `cols` with `lo <= ts <= hi` (ts sorted); the columns may be shared
/// with the decoded-column cache, so only the rows kept are copied (a column held by no one
/// else is moved).
pub fn trim_shared(cols: Vec<std::sync::Arc<Column>>, lo: i64, hi: i64) -> Vec<Column> {
    let ts = cols.first().map(|c| ts_slice(c)).unwrap_or(&[]);
    match rows_within(ts, lo, hi) {
        None => cols
            .into_iter()
            .map(std::sync::Arc::unwrap_or_clone)
            .collect(),
        Some((s, e)) => cols.iter().map(|c| c.slice(s, e)).collect(),
    }
}

/// Merges the runs; `ncols` is the column count of every run (used when there is none).
pub fn merge_runs(runs: Vec<Run>, empty: impl Fn() -> Vec<Column>) -> Vec<Column> {
    let mut runs: Vec<Run> = runs.into_iter().filter(|r| !r.ts().is_empty()).collect();
    if runs.is_empty() {
        return empty();
    }
    if runs.len() == 1 {
        return runs.pop().map(|r| r.cols).unwrap_or_default();
    }
    runs.sort_by_key(|r| (r.ts().first().copied().unwrap_or(0), r.prio));
    let disjoint = runs.windows(2).all(|w| {
        let a = w[0].ts().last().copied().unwrap_or(i64::MIN);
        let b = w[1].ts().first().copied().unwrap_or(i64::MAX);
        a < b
    });
    if disjoint {
        // Sized once for every run's rows: growing by doubling copied them again and, for a
        // scan's fresh memory, faulted in pages twice over.
        let more: usize = runs.iter().skip(1).map(|r| r.ts().len()).sum();
        let mut it = runs.into_iter();
        let mut out = it.next().map(|r| r.cols).unwrap_or_default();
        for o in &mut out {
            o.reserve(more);
        }
        for r in it {
            for (o, c) in out.iter_mut().zip(r.cols) {
                o.extend_owned(c);
            }
        }
        return out;
    }
    let picks = merge_picks(&runs);
    let ncols = runs.first().map(|r| r.cols.len()).unwrap_or(0);
    (0..ncols)
        .map(|j| {
            let srcs: Vec<&Column> = runs.iter().filter_map(|r| r.cols.get(j)).collect();
            gather(
                &srcs,
                picks.iter().map(|&(r, i)| (r as usize, i as usize)),
                picks.len(),
            )
        })
        .collect()
}

/// The (run, row) of each output row, in ts order, one per ts: the copy in the run of highest
/// priority. A linear k-way merge (each run is sorted): O(rows * log runs), not a sort of
/// every row. A run out of order (a contract breach) gives rows out of order, never a panic.
fn merge_picks(runs: &[Run]) -> Vec<(u32, u32)> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let total: usize = runs.iter().map(|r| r.ts().len()).sum();
    let mut picks: Vec<(u32, u32)> = Vec::with_capacity(total);
    let mut last: Option<i64> = None;
    let mut emit = |ts: i64, run: usize, row: usize| {
        if last != Some(ts) {
            last = Some(ts);
            picks.push((run as u32, row as u32));
        }
    };
    if let [a, b] = runs {
        // Two runs (a late batch and the rows it overlaps): a plain two-pointer merge.
        let (ta, tb) = (a.ts(), b.ts());
        let b_wins = b.prio > a.prio;
        let (mut i, mut j) = (0, 0);
        while i < ta.len() || j < tb.len() {
            let take_a = match (ta.get(i), tb.get(j)) {
                (Some(x), Some(y)) if x == y => !b_wins,
                (Some(x), Some(y)) => x < y,
                (Some(_), None) => true,
                _ => false,
            };
            if take_a {
                emit(ta[i], 0, i);
                i += 1;
            } else {
                emit(tb[j], 1, j);
                j += 1;
            }
        }
        return picks;
    }
    // (ts, higher priority first, run, row)
    type Head = (i64, Reverse<u64>, usize, usize);
    let mut heap: BinaryHeap<Reverse<Head>> = runs
        .iter()
        .enumerate()
        .filter_map(|(r, run)| Some(Reverse((*run.ts().first()?, Reverse(run.prio), r, 0))))
        .collect();
    while let Some(Reverse((ts, prio, r, i))) = heap.pop() {
        emit(ts, r, i);
        if let Some(next) = runs.get(r).and_then(|run| run.ts().get(i + 1)) {
            heap.push(Reverse((*next, prio, r, i + 1)));
        }
    }
    picks
}

/// Builds a column from (source, row) picks; all sources share one physical type.
fn gather(
    srcs: &[&Column],
    picks: impl Iterator<Item = (usize, usize)> + Clone,
    n: usize,
) -> Column {
    fn pick<T: Clone + Default>(
        srcs: &[&Column],
        picks: impl Iterator<Item = (usize, usize)>,
        n: usize,
        get: impl Fn(&ColumnData) -> Option<&Vec<T>>,
    ) -> Vec<T> {
        let mut v = Vec::with_capacity(n);
        for (s, i) in picks {
            v.push(
                srcs.get(s)
                    .and_then(|c| get(&c.data))
                    .and_then(|d| d.get(i).cloned())
                    .unwrap_or_default(),
            );
        }
        v
    }
    let Some(first) = srcs.first() else {
        return Column::new(ColumnData::Int(Vec::new()));
    };
    let data = match &first.data {
        ColumnData::Bool(_) => ColumnData::Bool(pick(srcs, picks.clone(), n, |d| match d {
            ColumnData::Bool(v) => Some(v),
            _ => None,
        })),
        ColumnData::Int(_) => ColumnData::Int(pick(srcs, picks.clone(), n, |d| match d {
            ColumnData::Int(v) => Some(v),
            _ => None,
        })),
        ColumnData::UInt(_) => ColumnData::UInt(pick(srcs, picks.clone(), n, |d| match d {
            ColumnData::UInt(v) => Some(v),
            _ => None,
        })),
        ColumnData::Float(_) => ColumnData::Float(pick(srcs, picks.clone(), n, |d| match d {
            ColumnData::Float(v) => Some(v),
            _ => None,
        })),
        ColumnData::Str(_) => ColumnData::Str(pick(srcs, picks.clone(), n, |d| match d {
            ColumnData::Str(v) => Some(v),
            _ => None,
        })),
        ColumnData::Timestamp(_) => {
            ColumnData::Timestamp(pick(srcs, picks.clone(), n, |d| match d {
                ColumnData::Timestamp(v) => Some(v),
                _ => None,
            }))
        }
    };
    let any_nulls = srcs.iter().any(|c| !c.nulls.is_empty());
    let nulls = if any_nulls {
        let v: Vec<bool> = picks
            .map(|(s, i)| srcs.get(s).is_some_and(|c| c.is_null(i)))
            .collect();
        if v.iter().any(|b| *b) {
            v
        } else {
            Vec::new()
        }
    } else {
        Vec::new()
    };
    Column { data, nulls }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tidal_common::Value;

    fn run(prio: u64, rows: &[(i64, i64)]) -> Run {
        Run {
            prio,
            cols: vec![
                Column::new(ColumnData::Timestamp(rows.iter().map(|r| r.0).collect())),
                Column::new(ColumnData::Int(rows.iter().map(|r| r.1).collect())),
            ],
        }
    }

    #[test]
    fn newest_copy_of_a_timestamp_wins_and_output_is_sorted() {
        let out = merge_runs(
            vec![
                run(0, &[(1, 10), (3, 30), (5, 50)]),
                run(2, &[(3, 33), (6, 66)]),
                run(1, &[(0, 0), (3, 31), (5, 55)]),
            ],
            Vec::new,
        );
        let ts: Vec<Value> = (0..out[0].len()).map(|i| out[0].get(i)).collect();
        let v: Vec<Value> = (0..out[1].len()).map(|i| out[1].get(i)).collect();
        assert_eq!(ts, [0, 1, 3, 5, 6].map(Value::Timestamp).to_vec());
        assert_eq!(v, [0, 10, 33, 55, 66].map(Value::Int).to_vec());
    }

    #[test]
    fn two_overlapping_runs_merge_with_the_higher_priority_winning() {
        for (pa, pb, winner) in [(0, 1, 2), (1, 0, 1)] {
            let out = merge_runs(
                vec![
                    run(pa, &[(1, 1), (2, 1), (4, 1), (7, 1)]),
                    run(pb, &[(2, 2), (3, 2), (7, 2), (9, 2)]),
                ],
                Vec::new,
            );
            let ts: Vec<Value> = (0..out[0].len()).map(|i| out[0].get(i)).collect();
            let v: Vec<Value> = (0..out[1].len()).map(|i| out[1].get(i)).collect();
            assert_eq!(ts, [1, 2, 3, 4, 7, 9].map(Value::Timestamp).to_vec());
            assert_eq!(
                v,
                [1, winner, 2, 1, winner, 2].map(Value::Int).to_vec(),
                "prio {pa} vs {pb}"
            );
        }
    }

    #[test]
    fn disjoint_runs_are_concatenated_in_time_order() {
        let out = merge_runs(
            vec![run(5, &[(10, 1)]), run(0, &[(1, 2), (2, 3)])],
            Vec::new,
        );
        assert_eq!(ts_slice(&out[0]), &[1, 2, 10]);
    }

    #[test]
    fn trim_keeps_the_inclusive_range() {
        let r = run(0, &[(1, 1), (2, 2), (3, 3), (4, 4)]);
        let cols = r.cols.into_iter().map(std::sync::Arc::new).collect();
        let t = trim_shared(cols, 2, 3);
        assert_eq!(ts_slice(&t[0]), &[2, 3]);
    }
}
