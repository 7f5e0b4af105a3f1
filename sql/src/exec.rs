//! Execution: the vnode side ([`execute_fragment`]) and the coordinator side ([`finish`]).

use crate::agg::{AggFunc, AggSpec, Aggregator, Summary};
use crate::ast::BinOp;
use crate::error::SqlError;
use crate::expr::PExpr;
use crate::expr::{broadcast, eval, true_rows};
use crate::memory::{batch_bytes, column_bytes, row_bytes, type_bytes, MemoryBudget, Reservation};
use crate::plan::{Fragment, FragmentOp, InputCol, Node, QueryPlan, ScanTarget, TBNAME_TYPE};
use crate::prune::BlockPred;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tidal_common::{
    types::PhysicalType, Batch, Column, ColumnData, DataType, Field, StableSchema, StableTables,
    TableMeta, TableUid, Value,
};

/// Most rows in one batch a fragment or a query result streams.
pub const STREAM_BATCH_ROWS: usize = 4096;
/// Bytes one streamed batch stays under (at the rows' declared widths, see [`batch_rows`]).
pub const STREAM_BATCH_BYTES: u64 = 1 << 20;

/// Implemented by the vnode server over its local storage.
pub trait ScanSource {
    fn schema(&self, stable: &str) -> Option<Arc<StableSchema>>;
    /// This vnode's subtables of the stable.
    fn tables(&self, stable: &str) -> Vec<Arc<TableMeta>>;
    fn table(&self, name: &str) -> Option<Arc<TableMeta>>;
    /// Rows with ts_min <= ts <= ts_max ordered by ts, deduplicated, one Column per requested
    /// stable column index (0 = ts).
    fn scan(
        &self,
        uid: TableUid,
        ts_min: i64,
        ts_max: i64,
        columns: &[usize],
    ) -> Result<Vec<Column>, String>;

    /// `scan` for a fragment with a row filter: storage may leave out the blocks for which
    /// `prune` says, from their statistics, that no row passes the filter. The default reads
    /// every row.
    fn scan_filtered(
        &self,
        uid: TableUid,
        ts_min: i64,
        ts_max: i64,
        columns: &[usize],
        prune: &BlockPred,
    ) -> Result<Vec<Column>, String> {
        let _ = prune;
        self.scan(uid, ts_min, ts_max, columns)
    }

    /// Like `scan`, for aggregation: storage may answer whole blocks with their statistics
    /// (one [`ColSummary`] per requested column) instead of their rows. Pieces are disjoint in
    /// time. The default reads rows only.
    fn scan_pieces(
        &self,
        uid: TableUid,
        ts_min: i64,
        ts_max: i64,
        columns: &[usize],
    ) -> Result<Vec<ScanPiece>, String> {
        Ok(vec![ScanPiece::Rows(
            self.scan(uid, ts_min, ts_max, columns)?,
        )])
    }

    /// The subtable's last row (NULLs included) projected to `columns`, as 1-row columns;
    /// `None` when it has no rows. Storage may answer it from its last-row cache.
    fn last_row(&self, uid: TableUid, columns: &[usize]) -> Result<Option<Vec<Column>>, String> {
        let cols = self.scan(uid, i64::MIN, i64::MAX, columns)?;
        let n = cols.first().map(Column::len).unwrap_or(0);
        Ok(n.checked_sub(1)
            .map(|last| cols.iter().map(|c| c.slice(last, last + 1)).collect()))
    }

    /// `last_row` for many subtables (storage may answer them under one lock).
    fn last_rows(
        &self,
        uids: &[TableUid],
        columns: &[usize],
    ) -> Result<Vec<Option<Vec<Column>>>, String> {
        uids.iter().map(|u| self.last_row(*u, columns)).collect()
    }

    /// `last_row` for many subtables of `stable`, as columns: the positions (into `uids`,
    /// ascending) of the subtables that have rows and one column per entry of `columns`
    /// holding their last rows in that order.
    fn last_rows_columns(
        &self,
        stable: &str,
        uids: &[TableUid],
        columns: &[usize],
    ) -> Result<(Vec<usize>, Vec<Column>), String> {
        let schema = self
            .schema(stable)
            .ok_or_else(|| format!("STABLE '{stable}' not found"))?;
        let mut out = Vec::with_capacity(columns.len());
        for c in columns {
            let d = schema
                .columns
                .get(*c)
                .ok_or_else(|| format!("STABLE '{stable}' has no column {c}"))?;
            out.push(Column::empty(d.data_type, uids.len()));
        }
        let mut positions = Vec::new();
        for (k, row) in self.last_rows(uids, columns)?.into_iter().enumerate() {
            if let Some(row) = row {
                for (o, r) in out.iter_mut().zip(&row) {
                    o.extend(r);
                }
                positions.push(k);
            }
        }
        Ok((positions, out))
    }

    /// For each of `columns`: the (ts, value) of its last non-NULL value (LAST()).
    fn last_values(
        &self,
        uid: TableUid,
        columns: &[usize],
    ) -> Result<Vec<Option<(i64, Value)>>, String> {
        let mut scan_cols = vec![0];
        scan_cols.extend_from_slice(columns);
        let cols = self.scan(uid, i64::MIN, i64::MAX, &scan_cols)?;
        let ts = cols.first();
        Ok((1..cols.len())
            .map(|k| {
                let c = &cols[k];
                (0..c.len())
                    .rev()
                    .find(|i| !c.is_null(*i))
                    .and_then(|i| Some((ts?.get(i).as_i64()?, c.get(i))))
            })
            .collect())
    }

    /// The subtables of `stable` with their names and tags as columns; `None` when the source
    /// keeps no such snapshot (the caller then works from [`ScanSource::tables`]).
    fn stable_tables(&self, stable: &str) -> Option<Arc<StableTables>> {
        let _ = stable;
        None
    }

    /// [`ScanSource::stable_tables`] if the snapshot is already built and current; `None`
    /// otherwise. Must not build one.
    fn stable_tables_if_current(&self, stable: &str) -> Option<Arc<StableTables>> {
        let _ = stable;
        None
    }

    /// The subtables of `stable` whose tag `k` equals one of `values`, from a tag index;
    /// `None` when the source has no index (the caller then filters every subtable).
    fn tables_by_tag(
        &self,
        stable: &str,
        k: usize,
        values: &[Value],
    ) -> Option<Vec<Arc<TableMeta>>> {
        let _ = (stable, k, values);
        None
    }

    /// Inclusive time ranges that hold the subtable's rows, newest first (searches for the
    /// latest matching row stop at the first range that has one).
    fn ranges_desc(&self, uid: TableUid) -> Result<Vec<(i64, i64)>, String> {
        let _ = uid;
        Ok(vec![(i64::MIN, i64::MAX)])
    }

    /// `ranges_desc` over many subtables: the time ranges holding rows of any of them.
    fn ranges_desc_many(&self, uids: &[TableUid]) -> Result<Vec<(i64, i64)>, String> {
        let _ = uids;
        Ok(vec![(i64::MIN, i64::MAX)])
    }

    /// For each of `uids`, at most how many rows `scan` returns for `ts_min..=ts_max`, known
    /// without reading them (block indexes, memtable counts); `None` when the source cannot
    /// tell, and then the executor reads subtables one at a time.
    fn rows_upper_bound(
        &self,
        uids: &[TableUid],
        ts_min: i64,
        ts_max: i64,
    ) -> Result<Option<Vec<u64>>, String> {
        let _ = (uids, ts_min, ts_max);
        Ok(None)
    }

    /// The rows in `ts_min..=ts_max` of many subtables of one STABLE (as `scan`, or as
    /// `scan_filtered` with `prune`), concatenated in `uids` order, with each one's row count.
    /// Storage may read them under one snapshot and their block statistics in bulk.
    fn scan_many(
        &self,
        uids: &[TableUid],
        ts_min: i64,
        ts_max: i64,
        columns: &[usize],
        prune: Option<&BlockPred>,
    ) -> Result<(Vec<usize>, Vec<Column>), String> {
        let mut counts = Vec::with_capacity(uids.len());
        let mut out: Vec<Column> = Vec::new();
        for uid in uids {
            let cols = match prune {
                Some(p) => self.scan_filtered(*uid, ts_min, ts_max, columns, p)?,
                None => self.scan(*uid, ts_min, ts_max, columns)?,
            };
            counts.push(cols.first().map(Column::len).unwrap_or(0));
            if out.is_empty() {
                out = cols;
            } else {
                for (o, c) in out.iter_mut().zip(&cols) {
                    o.extend(c);
                }
            }
        }
        Ok((counts, out))
    }
}

fn check_cancelled(cancelled: &AtomicBool) -> Result<(), SqlError> {
    if cancelled.load(Ordering::Relaxed) {
        return Err(SqlError::Execution(
            "fragment cancelled: its query was killed, timed out or its coordinator went away"
                .into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
thread_local! {
    /// Subtable runs aggregated with their constant keys evaluated once (this thread's).
    pub(crate) static CONSTANT_KEY_RUNS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Blocks answered from summaries (tests check the path is taken).
#[cfg(test)]
pub(crate) static SUMMARY_HITS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Part of one subtable's rows over a time range.
#[derive(Clone, Debug)]
pub enum ScanPiece {
    Rows(Vec<Column>),
    /// A block of `rows` rows with `ts_min..=ts_max`, summarised per requested column.
    Summary {
        rows: u64,
        ts_min: i64,
        ts_max: i64,
        cols: Vec<ColSummary>,
    },
}

/// Statistics of one column over a block: non-NULL count, min, max (NULL when none) and sum
/// (NULL when not available, e.g. an integer sum that overflowed).
#[derive(Clone, Debug, PartialEq)]
pub struct ColSummary {
    pub count: u64,
    pub min: Value,
    pub max: Value,
    pub sum: Value,
}

/// What each aggregate of a fragment reads when it is answered from block statistics.
#[derive(Clone, Copy, Debug)]
enum SumArg {
    /// COUNT(*): the row count.
    Rows,
    /// A STABLE column (index into the scanned columns).
    Col(usize),
    /// A tag or tbname (layout index): constant over the subtable.
    Const(usize),
}

fn collect_inputs(e: &PExpr, out: &mut Vec<usize>) {
    e.inputs(out)
}

/// A tag and the values a tag filter requires of it (`tag = v`, `tag IN (..)`, either as the
/// whole filter or as one conjunct of an AND; the first tag is preferred), so the subtables
/// can come from a tag index.
fn indexed_tag_values(f: &Fragment) -> Option<(usize, Vec<Value>)> {
    indexed_tag_conjunct(f).map(|(k, vals, _)| (k, vals))
}

/// [`indexed_tag_values`], with the conjunct of the tag filter they come from.
fn indexed_tag_conjunct(f: &Fragment) -> Option<(usize, Vec<Value>, &PExpr)> {
    fn find<'a>(e: &'a PExpr, layout: &[InputCol], out: &mut Vec<(usize, Vec<Value>, &'a PExpr)>) {
        let tag_of = |x: &PExpr| match x {
            PExpr::Input(i, _) => match layout.get(*i) {
                Some(InputCol::Tag(k)) => Some(*k),
                _ => None,
            },
            _ => None,
        };
        match e {
            PExpr::Bin(crate::ast::BinOp::Eq, a, b, _) => match (a.as_ref(), b.as_ref()) {
                (x, PExpr::Lit(v, _)) | (PExpr::Lit(v, _), x) if !v.is_null() => {
                    if let Some(k) = tag_of(x) {
                        out.push((k, vec![v.clone()], e));
                    }
                }
                _ => {}
            },
            PExpr::InList(x, vals, false) => {
                if let Some(k) = tag_of(x) {
                    out.push((k, vals.values().to_vec(), e));
                }
            }
            PExpr::Bin(crate::ast::BinOp::And, a, b, _) => {
                find(a, layout, out);
                find(b, layout, out);
            }
            _ => {}
        }
    }
    let mut found = Vec::new();
    find(f.tag_filter.as_ref()?, &f.tag_layout, &mut found);
    found.into_iter().min_by_key(|(k, _, _)| *k)
}

/// Filter `e` with its conjunct `done` (a node of `e`, reached through ANDs) taken out, as
/// when that conjunct is known to be true; `None` when nothing is left to test.
fn without_conjunct(e: &PExpr, done: &PExpr) -> Option<PExpr> {
    if std::ptr::eq(e, done) {
        return None;
    }
    match e {
        PExpr::Bin(crate::ast::BinOp::And, a, b, pos) => {
            match (without_conjunct(a, done), without_conjunct(b, done)) {
                (None, None) => None,
                (Some(x), None) | (None, Some(x)) => Some(x),
                (Some(x), Some(y)) => Some(PExpr::Bin(
                    crate::ast::BinOp::And,
                    Box::new(x),
                    Box::new(y),
                    *pos,
                )),
            }
        }
        _ => Some(e.clone()),
    }
}

/// The most subtables a [`is_point_lookup`] fragment reads on one vnode.
pub const POINT_LOOKUP_TABLES_MAX: usize = 16;

/// Whether `f` is a point lookup on `src`: the last rows of at most
/// [`POINT_LOOKUP_TABLES_MAX`] subtables (one named table, or a tag equality whose index is
/// built), with no row filter and no time range. Its work is a few last-row cache lookups, at
/// worst each table's newest rows, so a server may run it on the thread that received it:
/// handing it to a blocking pool and back costs more than running it. The answer is decided
/// from what is already built (the STABLE's snapshot and the tag's index), never by building
/// it; a fragment that would need either is not a point lookup.
pub fn is_point_lookup(f: &Fragment, src: &dyn ScanSource) -> bool {
    let FragmentOp::PartialAgg { keys, aggs } = &f.op else {
        return false;
    };
    if f.filter.is_some()
        || f.ts_min != i64::MIN
        || f.ts_max != i64::MAX
        || latest_mode(f, keys, aggs) != Some(LatestMode::LastRow)
    {
        return false;
    }
    match &f.target {
        ScanTarget::Table(_) => true,
        ScanTarget::Stable(s) => {
            let Some((k, vals)) = indexed_tag_values(f) else {
                return false;
            };
            let (Some(st), Some(schema)) = (src.stable_tables_if_current(s), src.schema(s)) else {
                return false;
            };
            let Some(t) = schema.tags.get(k).map(|t| t.data_type) else {
                return false;
            };
            let Some(vals) = vals
                .into_iter()
                .map(|v| t.coerce(v).ok())
                .collect::<Option<Vec<Value>>>()
            else {
                return false;
            };
            st.candidates_eq_count_if_indexed(k, &vals)
                .is_some_and(|n| n <= POINT_LOOKUP_TABLES_MAX)
        }
    }
}

/// Whether running `f` on `src` finds built everything it looks subtables up in: the STABLE's
/// snapshot of its subtables and, for a tag equality, that tag's index. Building either costs
/// time in proportion to the vnode's subtables, so a server that runs small fragments on the
/// thread that received them leaves a fragment that would build one to its pool.
pub fn finds_lookups_built(f: &Fragment, src: &dyn ScanSource) -> bool {
    match &f.target {
        ScanTarget::Table(_) => true,
        ScanTarget::Stable(s) => {
            let Some(st) = src.stable_tables_if_current(s) else {
                return false;
            };
            indexed_tag_values(f).is_none_or(|(k, _)| st.is_indexed(k))
        }
    }
}

/// How a fragment can be answered from each subtable's latest rows instead of a scan.
#[derive(Clone, Copy, Debug, PartialEq)]
enum LatestMode {
    /// Only LAST_ROW (with columns carried from its row, and tags): the last row, or with a
    /// row filter or time range the latest matching row, found newest window first.
    LastRow,
    /// Only LAST(col) over plain columns (and tags), no filter, the whole time range.
    Last,
}

fn latest_mode(f: &Fragment, keys: &[PExpr], aggs: &[AggSpec]) -> Option<LatestMode> {
    let is_const = |i: usize| matches!(f.layout.get(i), Some(InputCol::Tag(_) | InputCol::Tbname));
    for k in keys {
        let mut ins = Vec::new();
        collect_inputs(k, &mut ins);
        if !ins.iter().all(|i| is_const(*i)) {
            return None;
        }
    }
    let const_arg = |a: &AggSpec| {
        let mut ins = Vec::new();
        if let Some(e) = &a.arg {
            collect_inputs(e, &mut ins);
        }
        ins.iter().all(|i| is_const(*i))
    };
    let last_rows = aggs.iter().filter(|a| a.func == AggFunc::LastRow).count();
    if last_rows > 0
        && aggs.iter().all(|a| {
            matches!(a.func, AggFunc::LastRow | AggFunc::Carry)
                || (a.func == AggFunc::Any && const_arg(a))
        })
    {
        return Some(LatestMode::LastRow);
    }
    let plain = |a: &AggSpec| matches!(&a.arg, Some(PExpr::Input(i, _)) if matches!(f.layout.get(*i), Some(InputCol::Col(_))));
    let full_range = f.ts_min == i64::MIN && f.ts_max == i64::MAX;
    if full_range
        && f.filter.is_none()
        && aggs.iter().any(|a| a.func == AggFunc::Last)
        && aggs.iter().all(|a| {
            (a.func == AggFunc::Last && a.carry.is_empty() && plain(a))
                || (a.func == AggFunc::Any && const_arg(a))
        })
    {
        return Some(LatestMode::Last);
    }
    None
}

/// Answers one subtable for a [`LatestMode`] fragment: feeds the rows that decide the result.
#[allow(clippy::too_many_arguments)]
fn latest_rows(
    f: &Fragment,
    mode: LatestMode,
    src: &dyn ScanSource,
    meta: &TableMeta,
    schema: &StableSchema,
    scan_cols: &[usize],
    out: &mut Batch,
    agg: Option<&mut BufferedAgg>,
    prune: Option<&BlockPred>,
    cancelled: &AtomicBool,
) -> Result<(), SqlError> {
    let err = |e: String| SqlError::Execution(format!("scan of table {}: {e}", meta.name));
    match mode {
        LatestMode::LastRow => {
            let last = src.last_row(meta.uid, scan_cols).map_err(err)?;
            if let Some(row) = last {
                let ts = row
                    .first()
                    .map(|c| c.get(0).as_i64().unwrap_or(i64::MIN))
                    .unwrap_or(i64::MIN);
                let in_range = ts >= f.ts_min && ts <= f.ts_max;
                let passes = match &f.filter {
                    None => true,
                    Some(pred) => {
                        let mut by_idx: HashMap<usize, Column> =
                            scan_cols.iter().copied().zip(row.clone()).collect();
                        let cols = layout_columns(&f.layout, meta, schema, &mut by_idx, 1)?;
                        !true_rows(&eval(pred, &cols, 1)?, 1).is_empty()
                    }
                };
                if in_range && passes {
                    return process_rows(f, out, agg, meta, schema, scan_cols, row);
                }
            } else {
                return Ok(());
            }
            // The latest row does not qualify: the latest one that does, searched as for many
            // subtables.
            let (Some(a), FragmentOp::PartialAgg { keys, .. }) = (agg, &f.op) else {
                return Ok(());
            };
            latest_matching(
                f,
                src,
                schema,
                scan_cols,
                keys,
                a,
                &[meta],
                prune,
                cancelled,
            )
        }
        LatestMode::Last => {
            let value_cols: Vec<usize> = scan_cols.iter().copied().filter(|c| *c != 0).collect();
            let vals = src.last_values(meta.uid, &value_cols).map_err(err)?;
            let Some(last) = src.last_row(meta.uid, &[0]).map_err(err)? else {
                return Ok(());
            };
            // One row per column's last value (other columns NULL), plus the last row's ts, so
            // each LAST(col) picks its own value and LAST(ts) the latest ts.
            let mut rows: Vec<(i64, Option<(usize, Value)>)> = Vec::new();
            if let Some(t) = last.first().and_then(|c| c.get(0).as_i64()) {
                rows.push((t, None));
            }
            for (k, v) in vals.into_iter().enumerate() {
                if let Some((t, v)) = v {
                    rows.push((t, Some((k, v))));
                }
            }
            let types: Vec<DataType> = scan_cols
                .iter()
                .map(|c| {
                    schema
                        .columns
                        .get(*c)
                        .map(|d| d.data_type)
                        .unwrap_or(DataType::Timestamp)
                })
                .collect();
            let mut cols: Vec<Column> = types
                .iter()
                .map(|t| Column::empty(*t, rows.len()))
                .collect();
            for (t, cell) in &rows {
                for (j, c) in scan_cols.iter().enumerate() {
                    let v = if *c == 0 {
                        Value::Timestamp(*t)
                    } else {
                        match cell {
                            Some((k, v)) if value_cols.get(*k) == Some(c) => v.clone(),
                            _ => Value::Null,
                        }
                    };
                    cols[j].push(&v);
                }
            }
            process_rows(f, out, agg, meta, schema, scan_cols, cols)
        }
    }
}

/// Subtables searched together by [`latest_matching`]: one storage call and one filter
/// evaluation per group and time window.
const LATEST_SEARCH_TABLES: usize = 4096;

/// LAST_ROW with a time range or row filter over subtables whose last row does not qualify:
/// the latest qualifying row of each, searched newest time window first across all of them
/// at once (one storage call, one filter evaluation per window), each subtable leaving the
/// search at the first window where it has one. Blocks whose statistics rule the filter out
/// are not read.
#[allow(clippy::too_many_arguments)]
fn latest_matching(
    f: &Fragment,
    src: &dyn ScanSource,
    schema: &StableSchema,
    scan_cols: &[usize],
    keys: &[PExpr],
    a: &mut BufferedAgg,
    metas: &[&TableMeta],
    prune: Option<&BlockPred>,
    cancelled: &AtomicBool,
) -> Result<(), SqlError> {
    let err = |e: String| SqlError::Execution(format!("LAST_ROW search: {e}"));
    let filter_reads_tags = f
        .filter
        .as_ref()
        .is_some_and(|p| filter_reads_tags(p, &f.layout));
    for group in metas.chunks(LATEST_SEARCH_TABLES) {
        let mut pending: Vec<&TableMeta> = group.to_vec();
        let uids: Vec<TableUid> = pending.iter().map(|m| m.uid).collect();
        for (lo, hi) in src.ranges_desc_many(&uids).map_err(err)? {
            let (lo, hi) = (lo.max(f.ts_min), hi.min(f.ts_max));
            if lo > hi {
                continue;
            }
            if pending.is_empty() {
                break;
            }
            check_cancelled(cancelled)?;
            let uids: Vec<TableUid> = pending.iter().map(|m| m.uid).collect();
            let (counts, mut rows) = src
                .scan_many(&uids, lo, hi, scan_cols, prune)
                .map_err(err)?;
            let n: usize = counts.iter().sum();
            if n == 0 {
                continue;
            }
            let pass = match &f.filter {
                None => vec![true; n],
                Some(pred) => {
                    // The scanned columns move into the filter's input and back out of it
                    // (the rows taken below come from them): no copy of every row.
                    let mut by_idx: HashMap<usize, Column> =
                        scan_cols.iter().copied().zip(rows.drain(..)).collect();
                    let cols = if filter_reads_tags {
                        // The subtable of each row, for its tags and tbname.
                        let mut row_metas: Vec<&TableMeta> = Vec::with_capacity(n);
                        for (m, c) in pending.iter().zip(&counts) {
                            row_metas.extend(std::iter::repeat_n(*m, *c));
                        }
                        multi_table_layout(&f.layout, &row_metas, schema, &mut by_idx)?
                    } else {
                        // Only the selected rows get their tags (below).
                        untagged_layout(&f.layout, schema, &mut by_idx)?
                    };
                    let pass = pass_mask(pred, &cols, n)?;
                    for (c, col) in f.layout.iter().zip(cols) {
                        if let InputCol::Col(i) = c {
                            by_idx.insert(*i, col);
                        }
                    }
                    for i in scan_cols {
                        rows.push(by_idx.remove(i).ok_or_else(|| {
                            SqlError::Execution(format!("column {i} was not scanned"))
                        })?);
                    }
                    pass
                }
            };
            // Rows are in ts order within each subtable: its last passing row is the answer.
            let mut take = Vec::new();
            let mut taken: Vec<&TableMeta> = Vec::new();
            let mut still = Vec::new();
            let mut start = 0;
            for (m, c) in pending.iter().zip(&counts) {
                let end = start + c;
                match (start..end).rev().find(|i| pass[*i]) {
                    Some(i) => {
                        take.push(i);
                        taken.push(m);
                    }
                    None => still.push(*m),
                }
                start = end;
            }
            if !take.is_empty() {
                let mut by_idx: HashMap<usize, Column> = scan_cols
                    .iter()
                    .copied()
                    .zip(rows.iter().map(|c| c.take(&take)))
                    .collect();
                let picked = multi_table_layout(&f.layout, &taken, schema, &mut by_idx)?;
                a.update(keys, picked, take.len())?;
            }
            pending = still;
        }
    }
    Ok(())
}

/// The fragment's input columns with its tags and tbname left empty: enough for a filter that
/// reads neither ([`filter_reads_tags`]), before deciding which rows need them.
fn untagged_layout(
    layout: &[InputCol],
    schema: &StableSchema,
    scanned: &mut HashMap<usize, Column>,
) -> Result<Vec<Column>, SqlError> {
    layout_with(
        layout,
        schema,
        scanned,
        |_, t| Column::empty(t, 0),
        || Column::empty(TBNAME_TYPE, 0),
    )
}

/// Which of `n` rows filter `pred` passes (NULL does not).
fn pass_mask(pred: &PExpr, cols: &[Column], n: usize) -> Result<Vec<bool>, SqlError> {
    let mut m = vec![false; n];
    for i in true_rows(&eval(pred, cols, n)?, n) {
        m[i] = true;
    }
    Ok(m)
}

/// Whether row filter `pred` reads a tag or tbname (otherwise it can run before they are built).
fn filter_reads_tags(pred: &PExpr, layout: &[InputCol]) -> bool {
    let mut ins = Vec::new();
    collect_inputs(pred, &mut ins);
    ins.iter()
        .any(|i| matches!(layout.get(*i), Some(InputCol::Tag(_) | InputCol::Tbname)))
}

/// One subtable's rows in `lo..=hi`; with a row filter that block statistics can decide,
/// blocks none of whose rows pass it are left out.
fn scan_rows(
    src: &dyn ScanSource,
    uid: TableUid,
    lo: i64,
    hi: i64,
    columns: &[usize],
    prune: Option<&BlockPred>,
) -> Result<Vec<Column>, String> {
    match prune {
        Some(p) => src.scan_filtered(uid, lo, hi, columns, p),
        None => src.scan(uid, lo, hi, columns),
    }
}

/// Whether a fragment's partial aggregation can take block statistics, and what each aggregate
/// reads: no row filter; group keys over tags, tbname or the INTERVAL window of the ts (a block
/// inside one window is checked per block); aggregates COUNT/SUM/AVG/MIN/MAX over plain columns
/// (MIN/MAX without carried columns) or tags.
fn sma_args(f: &Fragment, keys: &[PExpr], aggs: &[AggSpec]) -> Option<Vec<SumArg>> {
    if f.filter.is_some() {
        return None;
    }
    let is_const = |i: usize| matches!(f.layout.get(i), Some(InputCol::Tag(_) | InputCol::Tbname));
    for k in keys {
        let ok = match k {
            PExpr::WinStart(a, _, _) => {
                matches!(a.as_ref(), PExpr::Input(i, _) if matches!(f.layout.get(*i), Some(InputCol::Col(0))))
            }
            _ => {
                let mut ins = Vec::new();
                collect_inputs(k, &mut ins);
                ins.iter().all(|i| is_const(*i))
            }
        };
        if !ok {
            return None;
        }
    }
    aggs.iter()
        .map(|a| {
            let input = match &a.arg {
                None => None,
                Some(PExpr::Input(i, _)) => Some(*i),
                Some(_) => return None,
            };
            match (a.func, input) {
                (AggFunc::CountStar, _) => Some(SumArg::Rows),
                (AggFunc::Any, Some(i)) if is_const(i) => Some(SumArg::Const(i)),
                (AggFunc::Count | AggFunc::Sum | AggFunc::Avg, Some(i))
                | (AggFunc::Min | AggFunc::Max, Some(i))
                    if a.carry.is_empty() || !matches!(a.func, AggFunc::Min | AggFunc::Max) =>
                {
                    match f.layout.get(i) {
                        Some(InputCol::Col(c)) => Some(SumArg::Col(*c)),
                        Some(_) => Some(SumArg::Const(i)),
                        None => None,
                    }
                }
                _ => None,
            }
        })
        .collect()
}

/// The fragment's input columns: scanned columns taken from `scanned`, tag and tbname columns
/// built by `tag(i, type)` and `tbname()`.
fn layout_with(
    layout: &[InputCol],
    schema: &StableSchema,
    scanned: &mut HashMap<usize, Column>,
    tag: impl Fn(usize, DataType) -> Column,
    tbname: impl Fn() -> Column,
) -> Result<Vec<Column>, SqlError> {
    layout
        .iter()
        .map(|c| match c {
            InputCol::Col(i) => scanned
                .remove(i)
                .ok_or_else(|| SqlError::Execution(format!("column {i} was not scanned"))),
            InputCol::Tag(i) => {
                let def = schema.tags.get(*i).ok_or_else(|| {
                    SqlError::Execution(format!("STABLE {} has no tag {i}", schema.name))
                })?;
                Ok(tag(*i, def.data_type))
            }
            InputCol::Tbname => Ok(tbname()),
        })
        .collect()
}

/// [`layout_columns`] for one row from each of several subtables of one STABLE: `scanned`
/// holds one row per entry of `metas`, in order.
fn multi_table_layout(
    layout: &[InputCol],
    metas: &[&TableMeta],
    schema: &StableSchema,
    scanned: &mut HashMap<usize, Column>,
) -> Result<Vec<Column>, SqlError> {
    let n = metas.len();
    let tag = |i: usize, t: DataType| {
        let mut col = Column::empty(t, n);
        for m in metas {
            col.push_tag(t, m.tags.get(i).unwrap_or(&Value::Null));
        }
        col
    };
    let tbname = || {
        let mut col = Column::empty(TBNAME_TYPE, n);
        for m in metas {
            col.push(&Value::Str(m.name.clone()));
        }
        col
    };
    layout_with(layout, schema, scanned, tag, tbname)
}

fn layout_columns(
    layout: &[InputCol],
    meta: &TableMeta,
    schema: &StableSchema,
    scanned: &mut HashMap<usize, Column>,
    n: usize,
) -> Result<Vec<Column>, SqlError> {
    layout_with(
        layout,
        schema,
        scanned,
        |i, t| broadcast(meta.tags.get(i).unwrap_or(&Value::Null), t, n),
        || broadcast(&Value::Str(meta.name.clone()), TBNAME_TYPE, n),
    )
}

/// The subtables of this vnode that a fragment selects: its target, then its tag filter
/// (DELETE uses this to find what to delete).
pub fn fragment_tables(
    f: &Fragment,
    src: &dyn ScanSource,
) -> Result<Vec<Arc<TableMeta>>, SqlError> {
    tag_filtered(f, src, target_tables(f, src)?, false)
}

/// The subtables a fragment reads on this vnode, after its target and tag filter.
enum Selected {
    /// Positions (ascending) into the STABLE's subtables as columns.
    Columnar(Arc<StableTables>, Vec<usize>),
    Metas(Vec<Arc<TableMeta>>),
}

impl Selected {
    fn len(&self) -> usize {
        match self {
            Selected::Columnar(_, p) => p.len(),
            Selected::Metas(m) => m.len(),
        }
    }

    /// The uids of entries `range`.
    fn uids_in(&self, range: std::ops::Range<usize>) -> Vec<TableUid> {
        match self {
            Selected::Columnar(st, p) => p
                .get(range)
                .unwrap_or(&[])
                .iter()
                .map(|i| st.uids[*i])
                .collect(),
            Selected::Metas(m) => m.get(range).unwrap_or(&[]).iter().map(|m| m.uid).collect(),
        }
    }

    fn meta(&self, i: usize) -> Option<&TableMeta> {
        match self {
            Selected::Columnar(st, p) => p.get(i).and_then(|j| st.metas.get(*j)).map(|m| &**m),
            Selected::Metas(m) => m.get(i).map(|m| &**m),
        }
    }

    /// The fragment's input columns for entries `idx` (one row each): scanned columns from
    /// `scanned` (one row per entry of `idx`, in order), tags and tbname built here.
    fn layout(
        &self,
        layout: &[InputCol],
        idx: &[usize],
        schema: &StableSchema,
        scanned: &mut HashMap<usize, Column>,
    ) -> Result<Vec<Column>, SqlError> {
        match self {
            Selected::Columnar(st, p) => {
                let rows: Vec<usize> = idx.iter().filter_map(|i| p.get(*i).copied()).collect();
                columnar_layout(layout, st, &rows, schema, scanned)
            }
            Selected::Metas(m) => {
                let metas: Vec<&TableMeta> =
                    idx.iter().filter_map(|i| m.get(*i)).map(|m| &**m).collect();
                multi_table_layout(layout, &metas, schema, scanned)
            }
        }
    }

    fn into_metas(self) -> Vec<Arc<TableMeta>> {
        match self {
            Selected::Columnar(st, p) => p.iter().map(|i| st.metas[*i].clone()).collect(),
            Selected::Metas(m) => m,
        }
    }
}

/// [`multi_table_layout`] for rows `rows` of a STABLE's subtables as columns.
fn columnar_layout(
    layout: &[InputCol],
    st: &StableTables,
    rows: &[usize],
    schema: &StableSchema,
    scanned: &mut HashMap<usize, Column>,
) -> Result<Vec<Column>, SqlError> {
    layout_with(
        layout,
        schema,
        scanned,
        |i, t| match st.tags.get(i) {
            Some(c) => c.take(rows),
            // a tag added after the snapshot was taken
            None => broadcast(&Value::Null, t, rows.len()),
        },
        || st.names.take(rows),
    )
}

/// The subtables a fragment reads: for a STABLE whose subtables the source keeps as columns,
/// positions into them, found from the tag index when the filter has an indexed equality and
/// kept where the tag filter passes; otherwise [`tag_filtered`] over [`target_tables`].
fn select_tables(f: &Fragment, src: &dyn ScanSource) -> Result<Selected, SqlError> {
    let columnar = match &f.target {
        ScanTarget::Stable(s) => src
            .stable_tables(s)
            .and_then(|st| Some((st, src.schema(s)?))),
        ScanTarget::Table(_) => None,
    };
    let Some((st, schema)) = columnar else {
        return Ok(Selected::Metas(tag_filtered(
            f,
            src,
            target_tables(f, src)?,
            true,
        )?));
    };
    // `tag IN (..)` / `tag = ..`: the snapshot's own index of that tag gives the candidates.
    // The filter still runs on them, without that conjunct when the index says they are
    // exactly the matches: testing it again reads every candidate's tag value, a cache miss
    // each (a fifth of a fleet's LAST_ROW).
    let indexed = indexed_tag_conjunct(f).and_then(|(k, vals, conjunct)| {
        let t = schema.tags.get(k)?.data_type;
        let coerced: Option<Vec<Value>> = vals.iter().map(|v| t.coerce(v.clone()).ok()).collect();
        let coerced = coerced?;
        // a literal the tag's type changed (1.5 for an INT tag) compares as the filter says
        let unchanged = coerced == vals;
        let (candidates, exact) = st.candidates_eq_exact(k, &coerced)?;
        Some((candidates, (exact && unchanged).then_some(conjunct)))
    });
    let (candidates, done) = match indexed {
        Some((c, done)) => (c, done),
        None => ((0..st.len()).collect(), None),
    };
    let reduced;
    let tf = match (&f.tag_filter, done) {
        (None, _) => return Ok(Selected::Columnar(st, candidates)),
        (Some(tf), None) => tf,
        (Some(tf), Some(done)) => match without_conjunct(tf, done) {
            None => return Ok(Selected::Columnar(st, candidates)),
            Some(rest) => {
                reduced = rest;
                &reduced
            }
        },
    };
    if let Some(p) = TagPred::compile(tf, &f.tag_layout, &schema) {
        let mut keep = Vec::with_capacity(candidates.len());
        let mut readable = true;
        for &i in &candidates {
            match p.eval(&(&*st, i)) {
                Ok(Some(true)) => keep.push(i),
                Ok(_) => {}
                Err(Unreadable) => {
                    readable = false;
                    break;
                }
            }
        }
        if readable {
            return Ok(Selected::Columnar(st, keep));
        }
    }
    let mut keep = Vec::new();
    for chunk in candidates.chunks(TAG_FILTER_CHUNK) {
        let cols = columnar_layout(&f.tag_layout, &st, chunk, &schema, &mut HashMap::new())?;
        for i in true_rows(&eval(tf, &cols, chunk.len())?, chunk.len()) {
            if let Some(p) = chunk.get(i) {
                keep.push(*p);
            }
        }
    }
    Ok(Selected::Columnar(st, keep))
}

/// Subtables whose tags are evaluated by one call of the tag filter: one evaluation over many
/// subtables builds an IN list's set once, where one per subtable would make a long list
/// (`name IN (<100,000 names>)`) quadratic.
const TAG_FILTER_CHUNK: usize = 4096;

/// A tag filter of the simple forms tag predicates take (comparisons of a tag or tbname with
/// a constant, IS [NOT] NULL, IN lists, AND/OR/NOT), evaluated on each subtable's tag values
/// in place: no tag column is built and no tag string copied. It gives what [`eval`] gives
/// over the layout's columns (SQL's three-valued logic; `None` = NULL).
enum TagPred {
    And(Box<TagPred>, Box<TagPred>),
    Or(Box<TagPred>, Box<TagPred>),
    Not(Box<TagPred>),
    IsNull(TagSrc, bool),
    /// `input op constant`
    Cmp(BinOp, TagSrc, Value),
    In(TagSrc, crate::expr::ValueList, bool),
}

/// Where a filter input comes from, and the physical type its values must have to be read in
/// place (a value stored in another type is converted on the column path instead).
#[derive(Clone)]
struct TagSrc {
    col: InputCol,
    phys: PhysicalType,
}

/// A subtable whose tag value is not stored in the tag's type: evaluate it on columns.
struct Unreadable;

/// A subtable's tags as [`TagPred`] reads them: its catalog entry, or its row of a
/// [`StableTables`].
trait TagRow {
    fn value(&self, c: &TagSrc) -> Result<TagVal<'_>, Unreadable>;
}

impl TagRow for TableMeta {
    fn value(&self, c: &TagSrc) -> Result<TagVal<'_>, Unreadable> {
        let v = match &c.col {
            InputCol::Tbname => return Ok(TagVal::Str(&self.name)),
            InputCol::Tag(k) => self.tags.get(*k),
            InputCol::Col(_) => return Err(Unreadable),
        };
        Ok(match (c.phys, v) {
            (_, None | Some(Value::Null)) => TagVal::Null,
            (
                PhysicalType::Int | PhysicalType::Timestamp,
                Some(Value::Int(x) | Value::Timestamp(x)),
            ) => TagVal::Int(*x),
            (PhysicalType::Float, Some(Value::Float(x))) => TagVal::Float(*x),
            (PhysicalType::Str, Some(Value::Str(s))) => TagVal::Str(s),
            _ => return Err(Unreadable),
        })
    }
}

/// Row `.1` of the subtables `.0`. Their tag columns hold every value in its tag's type
/// already (converted as the column path converts it), so a value is unreadable here only
/// for a type the filter does not read in place.
impl TagRow for (&StableTables, usize) {
    fn value(&self, c: &TagSrc) -> Result<TagVal<'_>, Unreadable> {
        let (st, i) = *self;
        let col = match &c.col {
            InputCol::Tbname => &st.names,
            InputCol::Tag(k) => match st.tags.get(*k) {
                Some(col) => col,
                None => return Ok(TagVal::Null),
            },
            InputCol::Col(_) => return Err(Unreadable),
        };
        if col.is_null(i) {
            return Ok(TagVal::Null);
        }
        Ok(match (c.phys, &col.data) {
            (PhysicalType::Int | PhysicalType::Timestamp, ColumnData::Int(v))
            | (PhysicalType::Int | PhysicalType::Timestamp, ColumnData::Timestamp(v)) => {
                v.get(i).map_or(TagVal::Null, |x| TagVal::Int(*x))
            }
            (PhysicalType::Float, ColumnData::Float(v)) => {
                v.get(i).map_or(TagVal::Null, |x| TagVal::Float(*x))
            }
            (PhysicalType::Str, ColumnData::Str(v)) => {
                v.get(i).map_or(TagVal::Null, |x| TagVal::Str(x))
            }
            _ => return Err(Unreadable),
        })
    }
}

/// A tag or tbname value as the filter sees it.
enum TagVal<'a> {
    Null,
    Int(i64),
    Float(f64),
    Str(&'a str),
}

impl TagPred {
    /// `None` when `e` has another form (the caller evaluates it on columns instead).
    fn compile(e: &PExpr, layout: &[InputCol], schema: &StableSchema) -> Option<TagPred> {
        let input = |e: &PExpr| -> Option<TagSrc> {
            let PExpr::Input(i, _) = e else { return None };
            let col = layout.get(*i)?.clone();
            let phys = match &col {
                InputCol::Tag(k) => schema.tags.get(*k)?.data_type.physical(),
                InputCol::Tbname => PhysicalType::Str,
                InputCol::Col(_) => return None,
            };
            matches!(
                phys,
                PhysicalType::Int
                    | PhysicalType::Timestamp
                    | PhysicalType::Float
                    | PhysicalType::Str
            )
            .then_some(TagSrc { col, phys })
        };
        let constant = |e: &PExpr| -> Option<Value> {
            let PExpr::Lit(v, t) = e else { return None };
            // as `eval` sees it: the literal in its planned type
            let v = broadcast(v, *t, 1).get(0);
            matches!(
                v,
                Value::Null | Value::Int(_) | Value::Timestamp(_) | Value::Float(_) | Value::Str(_)
            )
            .then_some(v)
        };
        Some(match e {
            PExpr::Bin(op @ (BinOp::And | BinOp::Or), a, b, _) => {
                let (a, b) = (
                    Box::new(TagPred::compile(a, layout, schema)?),
                    Box::new(TagPred::compile(b, layout, schema)?),
                );
                if *op == BinOp::And {
                    TagPred::And(a, b)
                } else {
                    TagPred::Or(a, b)
                }
            }
            PExpr::Bin(
                op @ (BinOp::Eq | BinOp::NotEq | BinOp::Lt | BinOp::LtEq | BinOp::Gt | BinOp::GtEq),
                a,
                b,
                _,
            ) => match (input(a), constant(b), constant(a), input(b)) {
                (Some(i), Some(v), _, _) => TagPred::Cmp(*op, i, v),
                (_, _, Some(v), Some(i)) => TagPred::Cmp(op.flip(), i, v),
                _ => return None,
            },
            PExpr::Not(a) => TagPred::Not(Box::new(TagPred::compile(a, layout, schema)?)),
            PExpr::IsNull(a, negated) => TagPred::IsNull(input(a)?, *negated),
            PExpr::InList(a, list, negated) => TagPred::In(input(a)?, list.clone(), *negated),
            _ => return None,
        })
    }

    fn eval<R: TagRow + ?Sized>(&self, m: &R) -> Result<Option<bool>, Unreadable> {
        Ok(match self {
            TagPred::And(a, b) => match (a.eval(m)?, b.eval(m)?) {
                (Some(false), _) | (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            },
            TagPred::Or(a, b) => match (a.eval(m)?, b.eval(m)?) {
                (Some(true), _) | (_, Some(true)) => Some(true),
                (Some(false), Some(false)) => Some(false),
                _ => None,
            },
            TagPred::Not(a) => a.eval(m)?.map(|b| !b),
            TagPred::IsNull(c, negated) => Some(matches!(m.value(c)?, TagVal::Null) != *negated),
            TagPred::Cmp(op, c, lit) => {
                let o = match (m.value(c)?, lit) {
                    (TagVal::Null, _) | (_, Value::Null) => return Ok(None),
                    (TagVal::Str(a), Value::Str(b)) => a.cmp(b.as_str()),
                    (TagVal::Int(a), Value::Int(b) | Value::Timestamp(b)) => a.cmp(b),
                    // NaN compares false either way, as `eval` does
                    (TagVal::Int(a), Value::Float(b)) => match (a as f64).partial_cmp(b) {
                        Some(o) => o,
                        None => return Ok(Some(*op == BinOp::NotEq)),
                    },
                    (TagVal::Float(a), Value::Float(b)) => match a.partial_cmp(b) {
                        Some(o) => o,
                        None => return Ok(Some(*op == BinOp::NotEq)),
                    },
                    (TagVal::Float(a), Value::Int(b) | Value::Timestamp(b)) => {
                        match a.partial_cmp(&(*b as f64)) {
                            Some(o) => o,
                            None => return Ok(Some(*op == BinOp::NotEq)),
                        }
                    }
                    // a string against a number: leave it to the column path
                    _ => return Err(Unreadable),
                };
                Some(match op {
                    BinOp::Eq => o.is_eq(),
                    BinOp::NotEq => o.is_ne(),
                    BinOp::Lt => o.is_lt(),
                    BinOp::LtEq => o.is_le(),
                    BinOp::Gt => o.is_gt(),
                    _ => o.is_ge(),
                })
            }
            TagPred::In(c, list, negated) => match m.value(c)? {
                TagVal::Null => None,
                TagVal::Str(s) => Some(list.contains_str(s) != *negated),
                TagVal::Int(x) => Some(list.contains_f64(x as f64) != *negated),
                TagVal::Float(x) => Some(list.contains_f64(x) != *negated),
            },
        })
    }
}

/// `metas` without the subtables the fragment's tag filter rejects, in order. A subtable whose
/// STABLE this vnode does not know is kept when `keep_unknown` (the scan then reports it) and
/// dropped otherwise.
fn tag_filtered(
    f: &Fragment,
    src: &dyn ScanSource,
    metas: Vec<Arc<TableMeta>>,
    keep_unknown: bool,
) -> Result<Vec<Arc<TableMeta>>, SqlError> {
    let Some(tf) = &f.tag_filter else {
        return Ok(metas);
    };
    let mut schemas: HashMap<String, Option<Arc<StableSchema>>> = HashMap::new();
    let mut keep = Vec::with_capacity(metas.len());
    let mut start = 0;
    while start < metas.len() {
        let stable = &metas[start].stable;
        let mut end = start + 1;
        while end < metas.len() && end - start < TAG_FILTER_CHUNK && metas[end].stable == *stable {
            end += 1;
        }
        let chunk = &metas[start..end];
        start = end;
        let schema = schemas
            .entry(stable.clone())
            .or_insert_with(|| src.schema(stable));
        let Some(schema) = schema else {
            if keep_unknown {
                keep.extend(chunk.iter().cloned());
            }
            continue;
        };
        if let Some(p) = TagPred::compile(tf, &f.tag_layout, schema) {
            let before = keep.len();
            let mut unreadable = false;
            for m in chunk {
                match p.eval(&**m) {
                    Ok(Some(true)) => keep.push(m.clone()),
                    Ok(_) => {}
                    Err(Unreadable) => {
                        unreadable = true;
                        break;
                    }
                }
            }
            if !unreadable {
                continue;
            }
            // Some value needs the column path: redo this chunk there.
            keep.truncate(before);
        }
        let refs: Vec<&TableMeta> = chunk.iter().map(|m| &**m).collect();
        let cols = multi_table_layout(&f.tag_layout, &refs, schema, &mut HashMap::new())?;
        for i in true_rows(&eval(tf, &cols, refs.len())?, refs.len()) {
            if let Some(m) = chunk.get(i) {
                keep.push(m.clone());
            }
        }
    }
    Ok(keep)
}

/// The fragment's target subtables on this vnode, before its tag filter.
fn target_tables(f: &Fragment, src: &dyn ScanSource) -> Result<Vec<Arc<TableMeta>>, SqlError> {
    Ok(match &f.target {
        // A vnode learns a STABLE's schema with its first subtable; one that never saw the
        // STABLE holds none of its subtables and contributes an empty partial result.
        ScanTarget::Stable(s) => {
            // `tag IN (..)` / `tag = ..`: ask the tag index instead of
            // looking at every subtable's tags (the filter still runs on what comes back).
            let indexed = indexed_tag_values(f).and_then(|(k, vals)| {
                let t = src.schema(s)?.tags.get(k)?.data_type;
                let vals: Option<Vec<Value>> = vals.into_iter().map(|v| t.coerce(v).ok()).collect();
                src.tables_by_tag(s, k, &vals?)
            });
            match indexed {
                Some(m) => m,
                None => src.tables(s),
            }
        }
        ScanTarget::Table(t) => vec![target_table(f, t, src)?],
    })
}

/// Subtable `t` of a fragment that targets it, if it is on this vnode and still belongs to
/// the STABLE the fragment was planned for.
fn target_table(f: &Fragment, t: &str, src: &dyn ScanSource) -> Result<Arc<TableMeta>, SqlError> {
    let m = src
        .table(t)
        .ok_or_else(|| SqlError::TableNotFound(format!("table '{t}' not found on this vnode")))?;
    if let Some(s) = f.stable.as_ref().filter(|s| **s != m.stable) {
        return Err(SqlError::StalePlan(format!(
            "table '{t}' belongs to STABLE '{}' on this vnode, not '{s}': it was created again since the query was planned",
            m.stable
        )));
    }
    Ok(m)
}

/// The checks of a fragment's target that need no scan: a subtable target exists and belongs
/// to the planned STABLE. A streaming server runs them before it answers, so that a stale
/// plan fails the call itself (and is planned again) rather than its stream.
pub fn check_target(f: &Fragment, src: &dyn ScanSource) -> Result<(), SqlError> {
    match &f.target {
        ScanTarget::Table(t) => target_table(f, t, src).map(|_| ()),
        ScanTarget::Stable(_) => Ok(()),
    }
}

/// Runs a fragment over this vnode's data.
pub fn execute_fragment(f: &Fragment, src: &dyn ScanSource) -> Result<Batch, SqlError> {
    execute_fragment_until(f, src, &AtomicBool::new(false))
}

/// [`execute_fragment`] that gives up, with an error, at the first subtable or block after
/// `cancelled` is set (its query was killed, timed out or its coordinator went away).
pub fn execute_fragment_until(
    f: &Fragment,
    src: &dyn ScanSource,
    cancelled: &AtomicBool,
) -> Result<Batch, SqlError> {
    execute_fragment_with(f, src, cancelled, &MemoryBudget::unlimited())
}

/// [`execute_fragment_until`] returning the whole result as one batch, which counts against
/// `budget` with everything else the fragment holds.
pub fn execute_fragment_with(
    f: &Fragment,
    src: &dyn ScanSource,
    cancelled: &AtomicBool,
    budget: &MemoryBudget,
) -> Result<Batch, SqlError> {
    let mut all = Batch::empty(f.output_fields());
    let mut held = budget.reserve(0, "the fragment result")?;
    execute_fragment_stream(f, src, cancelled, budget, &mut |b| {
        held.resize(held.bytes() + batch_bytes(&b), "the fragment result")?;
        all.append_owned(b);
        Ok(())
    })?;
    Ok(all)
}

/// Runs a fragment and hands its result to `sink` in order, in batches of at most
/// [`STREAM_BATCH_ROWS`] rows and about [`STREAM_BATCH_BYTES`] bytes, as it is produced: a
/// projection's rows leave as soon as a batch is full (a subtable is read one storage
/// window at a time), so the fragment holds O(batch) rows however large its result;
/// a partial aggregation sends its groups at the end. What it holds (scanned rows, group
/// state) counts against `budget`. An error from `sink` (its receiver went away) stops it.
pub fn execute_fragment_stream(
    f: &Fragment,
    src: &dyn ScanSource,
    cancelled: &AtomicBool,
    budget: &MemoryBudget,
    sink: &mut dyn FnMut(Batch) -> Result<(), SqlError>,
) -> Result<(), SqlError> {
    let mut em = Emitter::new(f.output_fields(), sink);
    run_fragment(f, src, cancelled, budget, &mut em)?;
    em.flush()
}

/// A fragment's output on its way to the sink: rows gather in `buf` until they make a batch.
struct Emitter<'a> {
    buf: Batch,
    /// Rows per batch for these fields (see [`batch_rows`]).
    cap: usize,
    sink: &'a mut dyn FnMut(Batch) -> Result<(), SqlError>,
    emitted: u64,
}

impl<'a> Emitter<'a> {
    fn new(fields: Vec<Field>, sink: &'a mut dyn FnMut(Batch) -> Result<(), SqlError>) -> Self {
        Emitter {
            cap: batch_rows(&fields),
            buf: Batch::empty(fields),
            sink,
            emitted: 0,
        }
    }

    /// Rows produced so far (sent and buffered).
    fn rows(&self) -> u64 {
        self.emitted + self.buf.num_rows() as u64
    }

    /// Sends the full batches the buffer holds; keeps the rest.
    fn send_full(&mut self) -> Result<(), SqlError> {
        let n = self.buf.num_rows();
        if n < self.cap {
            return Ok(());
        }
        let full = n - n % self.cap;
        let empty = Batch::empty(self.buf.fields.clone());
        let b = std::mem::replace(&mut self.buf, empty);
        self.buf = slice_batch(&b, full, n);
        self.send(&slice_batch(&b, 0, full))
    }

    /// Sends everything buffered.
    fn flush(&mut self) -> Result<(), SqlError> {
        if self.buf.num_rows() == 0 {
            return Ok(());
        }
        let empty = Batch::empty(self.buf.fields.clone());
        let b = std::mem::replace(&mut self.buf, empty);
        self.send(&b)
    }

    /// Sends `b` in batches of at most `cap` rows.
    fn send(&mut self, b: &Batch) -> Result<(), SqlError> {
        let n = b.num_rows();
        let mut start = 0;
        while start < n {
            let end = (start + self.cap).min(n);
            let piece = if start == 0 && end == n {
                b.clone()
            } else {
                slice_batch(b, start, end)
            };
            (self.sink)(piece)?;
            self.emitted += (end - start) as u64;
            start = end;
        }
        Ok(())
    }
}

/// Rows `start..end` of `b`.
pub fn slice_batch(b: &Batch, start: usize, end: usize) -> Batch {
    Batch {
        fields: b.fields.clone(),
        columns: b.columns.iter().map(|c| c.slice(start, end)).collect(),
    }
}

/// Rows per streamed batch of `fields`: [`STREAM_BATCH_ROWS`], fewer when rows at their
/// declared widths would pass [`STREAM_BATCH_BYTES`] (strings never exceed their declared
/// length, so no batch does).
pub fn batch_rows(fields: &[Field]) -> usize {
    let row: u64 = fields
        .iter()
        .map(|f| match f.data_type {
            DataType::VarChar(n) => u64::from(n) + 8,
            DataType::NChar(n) => 4 * u64::from(n) + 8,
            _ => 9,
        })
        .sum::<u64>()
        .max(1);
    ((STREAM_BATCH_BYTES / row) as usize).clamp(1, STREAM_BATCH_ROWS)
}

/// The subtable's storage windows inside `lo..=hi`, oldest first: a projection reads one at a
/// time, so it holds one window of one subtable, not the subtable's whole time range.
fn windows_asc(
    src: &dyn ScanSource,
    meta: &TableMeta,
    lo: i64,
    hi: i64,
) -> Result<Vec<(i64, i64)>, SqlError> {
    let mut w: Vec<(i64, i64)> = src
        .ranges_desc(meta.uid)
        .map_err(|e| SqlError::Execution(format!("scan of table {}: {e}", meta.name)))?
        .into_iter()
        .map(|(a, b)| (a.max(lo), b.min(hi)))
        .filter(|(a, b)| a <= b)
        .collect();
    w.reverse();
    // Windows are disjoint; anything else (a source without windows) is read in one go.
    if w.windows(2).any(|p| p[0].1 >= p[1].0) {
        return Ok(vec![(lo, hi)]);
    }
    Ok(w)
}

/// Candidates whose cached last rows are fetched before [`run_fragment`] decides, from how
/// many of them qualify, whether the rest are worth fetching too (2 in unit tests, whose
/// vnodes hold a few subtables, so that both ways are taken).
const LATEST_PROBE_TABLES: usize = if cfg!(test) { 2 } else { 1024 };

/// One step of a fleet's LAST_ROW: the last rows of the candidates `range` of `sel` (from the
/// storage's last-row cache), those that qualify (time range, row filter) fed to the
/// aggregation. Gives how many qualified, how many had rows, and the subtables whose last
/// row did not qualify (to be searched).
#[allow(clippy::too_many_arguments)]
fn last_rows_step<'a>(
    f: &Fragment,
    src: &dyn ScanSource,
    stable: &str,
    sel: &'a Selected,
    range: std::ops::Range<usize>,
    scan_cols: &[usize],
    schema: &StableSchema,
    keys: &[PExpr],
    a: &mut BufferedAgg,
) -> Result<(usize, usize, Vec<&'a TableMeta>), SqlError> {
    let uids = sel.uids_in(range.clone());
    let (pos, rows) = src
        .last_rows_columns(stable, &uids, scan_cols)
        .map_err(|e| SqlError::Execution(format!("last rows: {e}")))?;
    let pos: Vec<usize> = pos.into_iter().map(|p| p + range.start).collect();
    let n = pos.len();
    let ts: Vec<i64> = match rows.first() {
        Some(c) => (0..c.len())
            .map(|i| c.get(i).as_i64().unwrap_or(i64::MIN))
            .collect(),
        None => Vec::new(),
    };
    let mut ok: Vec<bool> = ts
        .iter()
        .map(|t| *t >= f.ts_min && *t <= f.ts_max)
        .collect();
    // The tags and tbname of a row are built only once it passes, unless the filter
    // reads them: a filter that few last rows pass (low-fuel) would otherwise copy
    // every candidate's tag strings for nothing.
    let mut full: Option<Vec<Column>> = None;
    if let Some(pred) = &f.filter {
        let mut by_idx: HashMap<usize, Column> = scan_cols
            .iter()
            .copied()
            .zip(rows.iter().cloned())
            .collect();
        let cols = if filter_reads_tags(pred, &f.layout) {
            full.insert(sel.layout(&f.layout, &pos, schema, &mut by_idx)?)
        } else {
            &untagged_layout(&f.layout, schema, &mut by_idx)?
        };
        for (o, p) in ok.iter_mut().zip(pass_mask(pred, cols, n)?) {
            *o &= p;
        }
    }
    let good: Vec<usize> = (0..n).filter(|i| ok[*i]).collect();
    let good_n = good.len();
    if !good.is_empty() {
        let cols = match full {
            Some(cols) if good.len() == n => cols,
            Some(cols) => cols.iter().map(|c| c.take(&good)).collect(),
            None => {
                let mut by_idx: HashMap<usize, Column> = if good.len() == n {
                    scan_cols.iter().copied().zip(rows).collect()
                } else {
                    scan_cols
                        .iter()
                        .copied()
                        .zip(rows.iter().map(|c| c.take(&good)))
                        .collect()
                };
                let at: Vec<usize> = good.iter().map(|i| pos[*i]).collect();
                sel.layout(&f.layout, &at, schema, &mut by_idx)?
            }
        };
        a.update(keys, cols, good.len())?;
    }
    let retry: Vec<&'a TableMeta> = (0..n)
        .filter(|i| !ok[*i])
        .filter_map(|j| pos.get(j).and_then(|k| sel.meta(*k)))
        .collect();
    Ok((good_n, n, retry))
}

/// The body of [`execute_fragment_stream`].
/// [`FragmentOp::Tags`]: `exprs` over each selected subtable's tags, one row each, in
/// chunks; no data is read.
fn tag_rows(
    f: &Fragment,
    exprs: &[PExpr],
    src: &dyn ScanSource,
    selected: Selected,
    cancelled: &AtomicBool,
    out: &mut Emitter,
) -> Result<(), SqlError> {
    let stable = match &f.target {
        ScanTarget::Stable(s) => Some(s.clone()),
        ScanTarget::Table(t) => src.table(t).map(|m| m.stable.clone()),
    };
    let Some(schema) = stable.and_then(|s| src.schema(&s)) else {
        return Ok(());
    };
    let n = selected.len();
    let mut start = 0;
    while start < n {
        check_cancelled(cancelled)?;
        let end = (start + TAG_FILTER_CHUNK).min(n);
        let idx: Vec<usize> = (start..end).collect();
        let cols = selected.layout(&f.layout, &idx, &schema, &mut HashMap::new())?;
        let mut columns = Vec::with_capacity(exprs.len());
        for e in exprs {
            columns.push(eval(e, &cols, idx.len())?.conformed(e.data_type()));
        }
        out.buf
            .append_owned(Batch::new(out.buf.fields.clone(), columns));
        out.send_full()?;
        start = end;
    }
    Ok(())
}

fn run_fragment(
    f: &Fragment,
    src: &dyn ScanSource,
    cancelled: &AtomicBool,
    budget: &MemoryBudget,
    out: &mut Emitter,
) -> Result<(), SqlError> {
    let selected = select_tables(f, src)?;
    if let FragmentOp::Tags { exprs } = &f.op {
        return tag_rows(f, exprs, src, selected, cancelled, out);
    }
    let mut scan_cols: Vec<usize> = vec![0];
    for c in &f.layout {
        if let InputCol::Col(i) = c {
            if !scan_cols.contains(i) {
                scan_cols.push(*i);
            }
        }
    }
    scan_cols.sort_unstable();
    let mut schemas: HashMap<String, Arc<StableSchema>> = HashMap::new();
    let mut agg = match &f.op {
        FragmentOp::PartialAgg { keys, aggs } => Some(BufferedAgg::new(
            Aggregator::new(keys.iter().map(|k| k.data_type()).collect(), aggs.clone()),
            budget.reserve(0, "GROUP BY state")?,
            row_bytes(&f.output_fields()) + GROUP_OVERHEAD_BYTES,
            constant_keys(f, keys, aggs),
        )),
        FragmentOp::Project { .. } | FragmentOp::Tags { .. } => None,
    };
    let sma = match &f.op {
        FragmentOp::PartialAgg { keys, aggs } => sma_args(f, keys, aggs),
        FragmentOp::Project { .. } | FragmentOp::Tags { .. } => None,
    };
    let latest = match &f.op {
        FragmentOp::PartialAgg { keys, aggs } => latest_mode(f, keys, aggs),
        FragmentOp::Project { .. } | FragmentOp::Tags { .. } => None,
    };
    let prune = f
        .filter
        .as_ref()
        .and_then(|p| BlockPred::compile(p, &f.layout));
    // LAST_ROW over many subtables of a STABLE (tag-filtered above): fetch every
    // last row in one call (the storage answers cache hits under one lock), and feed the ones
    // that qualify (time range, row filter) to the aggregation as one batch. The subtables
    // whose last row does not qualify are searched together ([`latest_matching`]).
    let mut selected = Some(selected);
    if let (Some(LatestMode::LastRow), ScanTarget::Stable(stable), Some(a), Some(sel)) =
        (latest, &f.target, agg.as_mut(), selected.as_ref())
    {
        if sel.len() > 1 && f.ts_min <= f.ts_max {
            let FragmentOp::PartialAgg { keys, .. } = &f.op else {
                return Err(SqlError::Execution("LAST_ROW without aggregation".into()));
            };
            let Some(schema) = src.schema(stable) else {
                return out.send(&a.agg.partial());
            };
            // With a row filter or a time range, the cached last rows may mostly not qualify
            // (low-fuel: a fuel level few trucks are at right now), and then every candidate
            // is searched anyway: a first slice of the candidates measures how many qualify,
            // and when fewer than half do, the rest are searched directly, which costs less
            // than looking up their last rows first.
            let all = sel.len();
            let conditional = f.filter.is_some() || f.ts_min > i64::MIN || f.ts_max < i64::MAX;
            let probe = if conditional {
                LATEST_PROBE_TABLES.min(all)
            } else {
                all
            };
            let (qualified, had_rows, mut retry) =
                last_rows_step(f, src, stable, sel, 0..probe, &scan_cols, &schema, keys, a)?;
            if probe < all {
                if qualified * 2 >= had_rows {
                    let (_, _, more) = last_rows_step(
                        f,
                        src,
                        stable,
                        sel,
                        probe..all,
                        &scan_cols,
                        &schema,
                        keys,
                        a,
                    )?;
                    retry.extend(more);
                } else {
                    retry.extend((probe..all).filter_map(|k| sel.meta(k)));
                }
            }
            latest_matching(
                f,
                src,
                &schema,
                &scan_cols,
                keys,
                a,
                &retry,
                prune.as_ref(),
                cancelled,
            )?;
            selected = None;
        }
    }
    let metas = selected.map(Selected::into_metas).unwrap_or_default();
    // Row bounds of the subtables from `bounds.0` on (see `ROWS_PER_SCAN_MAX`).
    let mut bounds: (usize, Vec<u64>) = (0, Vec::new());
    let mut next = 0;
    while let Some(meta) = metas.get(next) {
        next += 1;
        if f.limit.is_some_and(|l| out.rows() >= l) {
            break;
        }
        check_cancelled(cancelled)?;
        if !schemas.contains_key(&meta.stable) {
            let s = src.schema(&meta.stable).ok_or_else(|| {
                SqlError::StableNotFound(format!(
                    "STABLE '{}' not found on this vnode",
                    meta.stable
                ))
            })?;
            schemas.insert(meta.stable.clone(), s);
        }
        let Some(schema) = schemas.get(&meta.stable) else {
            continue;
        };
        if f.ts_min > f.ts_max {
            continue;
        }
        if let Some(mode) = latest {
            latest_rows(
                f,
                mode,
                src,
                meta,
                schema,
                &scan_cols,
                &mut out.buf,
                agg.as_mut(),
                prune.as_ref(),
                cancelled,
            )?;
            continue;
        }
        if agg.is_none() {
            // A projection: one storage window at a time, sending full batches as it goes.
            for (lo, hi) in windows_asc(src, meta, f.ts_min, f.ts_max)? {
                if f.limit.is_some_and(|l| out.rows() >= l) {
                    break;
                }
                check_cancelled(cancelled)?;
                let scanned = scan_rows(src, meta.uid, lo, hi, &scan_cols, prune.as_ref())
                    .map_err(|e| {
                        SqlError::Execution(format!("scan of table {}: {e}", meta.name))
                    })?;
                process_rows_until(
                    f, out, None, meta, schema, &scan_cols, scanned, cancelled, budget,
                )?;
            }
            continue;
        }
        let group_end = match sma {
            Some(_) => next,
            None => rows_group_end(src, &metas, next - 1, f, &mut bounds)?,
        };
        if group_end > next {
            // This subtable and the next ones of its STABLE, read together.
            let from = next - 1;
            let to = group_end;
            let group = metas.get(from..to).unwrap_or(&[]);
            next = to;
            let uids: Vec<TableUid> = group.iter().map(|m| m.uid).collect();
            let (counts, cols) = src
                .scan_many(&uids, f.ts_min, f.ts_max, &scan_cols, prune.as_ref())
                .map_err(|e| {
                    SqlError::Execution(format!(
                        "scan of {} subtables of {}: {e}",
                        uids.len(),
                        meta.stable
                    ))
                })?;
            let total: usize = counts.iter().sum();
            if counts.len() != group.len()
                || cols.iter().any(|c| c.len() != total)
                || (total > 0 && cols.len() != scan_cols.len())
            {
                return Err(SqlError::Execution(format!(
                    "scan of {} subtables of {} returned {} counts for {} rows in {} columns",
                    group.len(),
                    meta.stable,
                    counts.len(),
                    cols.first().map_or(0, Column::len),
                    cols.len()
                )));
            }
            let mut at = 0;
            for (m, n) in group.iter().zip(counts) {
                check_cancelled(cancelled)?;
                if n == 0 {
                    continue; // no rows: nothing to aggregate
                }
                let rows = cols.iter().map(|c| c.slice(at, at + n)).collect();
                at += n;
                process_rows_until(
                    f,
                    out,
                    agg.as_mut(),
                    m,
                    schema,
                    &scan_cols,
                    rows,
                    cancelled,
                    budget,
                )?;
            }
            continue;
        }
        let pieces = match &sma {
            Some(_) => src.scan_pieces(meta.uid, f.ts_min, f.ts_max, &scan_cols),
            None => scan_rows(
                src,
                meta.uid,
                f.ts_min,
                f.ts_max,
                &scan_cols,
                prune.as_ref(),
            )
            .map(|c| vec![ScanPiece::Rows(c)]),
        }
        .map_err(|e| SqlError::Execution(format!("scan of table {}: {e}", meta.name)))?;
        for piece in pieces {
            check_cancelled(cancelled)?;
            let scanned = match piece {
                ScanPiece::Rows(c) => c,
                ScanPiece::Summary {
                    rows,
                    ts_min,
                    ts_max,
                    cols: sums,
                } => {
                    let (Some(args), Some(a), FragmentOp::PartialAgg { keys, .. }) =
                        (&sma, agg.as_mut(), &f.op)
                    else {
                        continue;
                    };
                    let used = summary_update(
                        &mut a.agg, keys, args, &f.layout, meta, schema, &scan_cols, rows, ts_min,
                        ts_max, &sums,
                    )?;
                    a.account()?;
                    if used {
                        #[cfg(test)]
                        SUMMARY_HITS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        continue;
                    }
                    // The block straddles a window or lacks a statistic: read its rows (no
                    // other source overlaps it, so its time range holds exactly them).
                    src.scan(meta.uid, ts_min, ts_max, &scan_cols)
                        .map_err(|e| {
                            SqlError::Execution(format!("scan of table {}: {e}", meta.name))
                        })?
                }
            };
            process_rows_until(
                f,
                out,
                agg.as_mut(),
                meta,
                schema,
                &scan_cols,
                scanned,
                cancelled,
                budget,
            )?;
        }
    }
    if let (Some(mut a), FragmentOp::PartialAgg { keys, .. }) = (agg, &f.op) {
        a.flush(keys)?;
        let partial = a.agg.partial();
        // The partial's columns are a second copy of the group keys and states.
        let _held = budget.reserve(batch_bytes(&partial), "GROUP BY state")?;
        return out.send(&partial);
    }
    Ok(())
}

/// Rows bound for the partial aggregation, gathered across subtables: many subtables hold a
/// few rows each (a last row, a short time range), and one update over thousands of rows is
/// far cheaper than thousands of one-row updates. Order is kept, so results are unchanged.
struct BufferedAgg {
    agg: Aggregator,
    buf: Vec<Column>,
    n: usize,
    /// The group keys constant within one subtable (see [`constant_keys`]).
    constant_keys: Option<ConstantKeys>,
    /// The group state's estimated bytes, held against the fragment's budget.
    mem: Reservation,
    group_bytes: u64,
}

/// Bytes a group costs beyond its key and state values (hash table slot, bookkeeping).
const GROUP_OVERHEAD_BYTES: u64 = 32;

/// Rows gathered before the aggregator is fed.
const AGG_BATCH_ROWS: usize = 4096;

/// An aggregation over rows reads a run of subtables of one STABLE with one storage call when
/// their rows in the range, by the storage's upper bound, come to at most this many: subtables
/// of a few rows each (100,000 trucks over minutes) are read many at a time, under one
/// snapshot and with their block statistics read in bulk, instead of paying a storage call
/// each; a subtable of more rows is read alone, as before (fewer rows held, none copied).
const ROWS_PER_SCAN_MAX: u64 = 8192;
/// Most subtables one such call reads, and how many row bounds are asked for at once.
const SCAN_TABLES_MAX: usize = 1024;

/// Where the run of subtables read with `metas[from]` ends (exclusive): past `from` only when
/// the source bounds their rows and the run of the same STABLE fits [`ROWS_PER_SCAN_MAX`].
/// `bounds` keeps the bounds asked for (from its first index on) for the next calls.
fn rows_group_end(
    src: &dyn ScanSource,
    metas: &[Arc<TableMeta>],
    from: usize,
    f: &Fragment,
    bounds: &mut (usize, Vec<u64>),
) -> Result<usize, SqlError> {
    let Some(first) = metas.get(from) else {
        return Ok(from);
    };
    let have = bounds.0 <= from && from < bounds.0 + bounds.1.len();
    if !have {
        let end = (from + SCAN_TABLES_MAX).min(metas.len());
        let uids: Vec<TableUid> = metas
            .get(from..end)
            .unwrap_or(&[])
            .iter()
            .map(|m| m.uid)
            .collect();
        let got = src
            .rows_upper_bound(&uids, f.ts_min, f.ts_max)
            .map_err(|e| SqlError::Execution(format!("row counts of {}: {e}", first.stable)))?;
        // No bounds: every subtable of the stretch is read alone, without asking again.
        let none = || vec![u64::MAX; uids.len()];
        *bounds = (
            from,
            got.filter(|b| b.len() == uids.len()).unwrap_or_else(none),
        );
    }
    let bound = |k: usize| bounds.1.get(k.wrapping_sub(bounds.0)).copied();
    let mut rows = 0u64;
    let mut to = from;
    while to < metas.len()
        && to - from < SCAN_TABLES_MAX
        && metas.get(to).is_some_and(|m| m.stable == first.stable)
    {
        let Some(n) = bound(to) else { break };
        if rows.saturating_add(n) > ROWS_PER_SCAN_MAX {
            break;
        }
        rows += n;
        to += 1;
    }
    // A run of one (or none that fits) is read alone.
    Ok(if to > from + 1 { to } else { from + 1 })
}

impl BufferedAgg {
    fn new(
        agg: Aggregator,
        mem: Reservation,
        group_bytes: u64,
        constant_keys: Option<ConstantKeys>,
    ) -> BufferedAgg {
        BufferedAgg {
            agg,
            buf: Vec::new(),
            n: 0,
            constant_keys,
            mem,
            group_bytes,
        }
    }

    /// Brings the group state's reservation up to date (fails past the budget: a GROUP BY
    /// with too many groups stops within one batch of rows of the limit).
    fn account(&mut self) -> Result<(), SqlError> {
        let groups = self.agg.groups() as u64;
        let sketches = self.agg.state_heap_bytes() as u64;
        self.mem.resize(
            groups
                .saturating_mul(self.group_bytes)
                .saturating_add(sketches),
            "GROUP BY state",
        )
    }

    fn update(&mut self, keys: &[PExpr], cols: Vec<Column>, n: usize) -> Result<(), SqlError> {
        if n >= AGG_BATCH_ROWS {
            self.flush(keys)?;
            self.agg.update(keys, &cols, n)?;
            return self.account();
        }
        if self.buf.is_empty() {
            self.buf = cols;
        } else {
            for (b, c) in self.buf.iter_mut().zip(&cols) {
                b.extend(c);
            }
        }
        self.n += n;
        if self.n >= AGG_BATCH_ROWS {
            self.flush(keys)?;
        }
        Ok(())
    }

    /// Feeds one subtable's rows whose constant keys are given as one-row columns (the rows
    /// buffered so far go first, keeping arrival order).
    fn update_with_constants(
        &mut self,
        keys: &[PExpr],
        constants: &[Option<Column>],
        cols: Vec<Column>,
        n: usize,
    ) -> Result<(), SqlError> {
        self.flush(keys)?;
        self.agg.update_with_constants(keys, constants, &cols, n)?;
        self.account()
    }

    fn flush(&mut self, keys: &[PExpr]) -> Result<(), SqlError> {
        if self.n > 0 {
            let cols = std::mem::take(&mut self.buf);
            let n = std::mem::replace(&mut self.n, 0);
            self.agg.update(keys, &cols, n)?;
            self.account()?;
        }
        Ok(())
    }
}

/// Rows of one subtable from which its constant group keys are evaluated once instead of
/// built for every row (below it, buffering small runs across subtables is cheaper).
const CONSTANT_KEYS_MIN_ROWS: usize = 256;

/// Which group keys of a partial aggregation are constant within one subtable (they read only
/// tags and the subtable name), and which tags and whether the name the fragment reads per row
/// (row filter, the other keys, aggregate arguments, carried values, selector order): rows can
/// then be processed with only those built as columns, the constant keys evaluated once.
#[derive(Clone, Debug)]
struct ConstantKeys {
    /// Per group key.
    constant: Vec<bool>,
    /// Tags (by index) read per row.
    row_tags: Vec<usize>,
    row_tbname: bool,
}

fn constant_keys(f: &Fragment, keys: &[PExpr], aggs: &[AggSpec]) -> Option<ConstantKeys> {
    let only_tags = |e: &PExpr| {
        let mut ins = Vec::new();
        collect_inputs(e, &mut ins);
        ins.iter()
            .all(|i| matches!(f.layout.get(*i), Some(InputCol::Tag(_) | InputCol::Tbname)))
    };
    let constant: Vec<bool> = keys.iter().map(only_tags).collect();
    if !constant.iter().any(|c| *c) {
        return None;
    }
    let mut per_row: Vec<&PExpr> = f.filter.iter().collect();
    per_row.extend(
        keys.iter()
            .zip(&constant)
            .filter(|(_, c)| !**c)
            .map(|(k, _)| k),
    );
    for a in aggs {
        per_row.extend(a.arg.iter().chain(a.ts.iter()).chain(a.carry.iter()));
    }
    let mut ins = Vec::new();
    for e in per_row {
        collect_inputs(e, &mut ins);
    }
    let mut row_tags = Vec::new();
    let mut row_tbname = false;
    for i in ins {
        match f.layout.get(i) {
            Some(InputCol::Tag(t)) if !row_tags.contains(t) => row_tags.push(*t),
            Some(InputCol::Tbname) => row_tbname = true,
            _ => {}
        }
    }
    Some(ConstantKeys {
        constant,
        row_tags,
        row_tbname,
    })
}

/// Feeds one scanned run of rows through layout, filter and the fragment's operator.
/// Rows processed between two cancellation checks: an abandoned query stops within one
/// chunk of a long scan, not at the end of the subtable.
const CANCEL_CHECK_ROWS: usize = 16_384;

/// [`process_rows`] in chunks of [`CANCEL_CHECK_ROWS`], checking `cancelled` before each
/// (rows are independent here, so chunking changes no result).
#[allow(clippy::too_many_arguments)]
fn process_rows_until(
    f: &Fragment,
    out: &mut Emitter,
    mut agg: Option<&mut BufferedAgg>,
    meta: &TableMeta,
    schema: &StableSchema,
    scan_cols: &[usize],
    scanned: Vec<Column>,
    cancelled: &AtomicBool,
    budget: &MemoryBudget,
) -> Result<(), SqlError> {
    let n = scanned.first().map(Column::len).unwrap_or(0);
    // The scanned rows are held until the last chunk is processed.
    let _held = budget.reserve(
        scanned.iter().map(column_bytes).sum(),
        "reading one subtable window",
    )?;
    if n <= CANCEL_CHECK_ROWS {
        process_rows(f, &mut out.buf, agg, meta, schema, scan_cols, scanned)?;
        return out.send_full();
    }
    let mut start = 0;
    while start < n {
        check_cancelled(cancelled)?;
        let end = (start + CANCEL_CHECK_ROWS).min(n);
        let chunk = scanned.iter().map(|c| c.slice(start, end)).collect();
        process_rows(
            f,
            &mut out.buf,
            agg.as_deref_mut(),
            meta,
            schema,
            scan_cols,
            chunk,
        )?;
        out.send_full()?;
        start = end;
    }
    Ok(())
}

fn process_rows(
    f: &Fragment,
    out: &mut Batch,
    mut agg: Option<&mut BufferedAgg>,
    meta: &TableMeta,
    schema: &StableSchema,
    scan_cols: &[usize],
    scanned: Vec<Column>,
) -> Result<(), SqlError> {
    {
        {
            if scanned.len() != scan_cols.len() {
                return Err(SqlError::Execution(format!(
                    "scan of table {} returned {} columns, expected {}",
                    meta.name,
                    scanned.len(),
                    scan_cols.len()
                )));
            }
            let n = scanned.first().map(Column::len).unwrap_or(0);
            if n == 0 {
                return Ok(());
            }
            let mut by_idx: HashMap<usize, Column> =
                scan_cols.iter().copied().zip(scanned).collect();
            if let (FragmentOp::PartialAgg { keys, .. }, Some(a)) = (&f.op, agg.as_deref_mut()) {
                if let Some(plan) = a.constant_keys.clone() {
                    if n >= CONSTANT_KEYS_MIN_ROWS {
                        return constant_key_rows(f, a, keys, &plan, meta, schema, by_idx, n);
                    }
                }
            }
            let cols = layout_columns(&f.layout, meta, schema, &mut by_idx, n)?;
            let (cols, n) = filter_rows(f, cols, n)?;
            if n == 0 {
                return Ok(());
            }
            match (&f.op, agg) {
                (FragmentOp::PartialAgg { keys, .. }, Some(a)) => a.update(keys, cols, n)?,
                (FragmentOp::Project { exprs }, _) => {
                    let res = exprs
                        .iter()
                        .map(|e| eval(e, &cols, n))
                        .collect::<Result<Vec<_>, _>>()?;
                    out.append(&Batch {
                        fields: out.fields.clone(),
                        columns: res,
                    });
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// The rows of `cols` (`n` of them) that pass the fragment's row filter.
fn filter_rows(
    f: &Fragment,
    cols: Vec<Column>,
    n: usize,
) -> Result<(Vec<Column>, usize), SqlError> {
    let Some(pred) = &f.filter else {
        return Ok((cols, n));
    };
    let keep = true_rows(&eval(pred, &cols, n)?, n);
    if keep.len() == n {
        return Ok((cols, n));
    }
    let m = keep.len();
    Ok((cols.iter().map(|c| c.take(&keep)).collect(), m))
}

/// [`process_rows`] for a partial aggregation whose constant keys (see [`constant_keys`]) are
/// evaluated once over the subtable's tags; only the tags read per row are built as columns.
#[allow(clippy::too_many_arguments)]
fn constant_key_rows(
    f: &Fragment,
    a: &mut BufferedAgg,
    keys: &[PExpr],
    plan: &ConstantKeys,
    meta: &TableMeta,
    schema: &StableSchema,
    mut by_idx: HashMap<usize, Column>,
    n: usize,
) -> Result<(), SqlError> {
    // Empty columns stand in for the tags and name nothing reads per row.
    let cols = layout_with(
        &f.layout,
        schema,
        &mut by_idx,
        |i, t| {
            if plan.row_tags.contains(&i) {
                broadcast(meta.tags.get(i).unwrap_or(&Value::Null), t, n)
            } else {
                Column::empty(t, 0)
            }
        },
        || {
            if plan.row_tbname {
                broadcast(&Value::Str(meta.name.clone()), TBNAME_TYPE, n)
            } else {
                Column::empty(TBNAME_TYPE, 0)
            }
        },
    )?;
    let (cols, n) = filter_rows(f, cols, n)?;
    if n == 0 {
        return Ok(());
    }
    // One row of the subtable's tags and name (the columns' values are never read here).
    let one: Vec<Column> = f
        .layout
        .iter()
        .map(|c| match c {
            InputCol::Tag(i) => {
                let t = schema
                    .tags
                    .get(*i)
                    .map(|d| d.data_type)
                    .unwrap_or(TBNAME_TYPE);
                broadcast(meta.tags.get(*i).unwrap_or(&Value::Null), t, 1)
            }
            InputCol::Tbname => broadcast(&Value::Str(meta.name.clone()), TBNAME_TYPE, 1),
            InputCol::Col(_) => Column::empty(DataType::Timestamp, 1),
        })
        .collect();
    #[cfg(test)]
    CONSTANT_KEY_RUNS.with(|c| c.set(c.get() + 1));
    let constants = keys
        .iter()
        .zip(&plan.constant)
        .map(|(k, c)| {
            if *c {
                eval(k, &one, 1).map(Some)
            } else {
                Ok(None)
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    a.update_with_constants(keys, &constants, cols, n)
}

/// Feeds a block's statistics to the aggregator; `false` when this block cannot be (it spans
/// two windows, or a needed sum is missing) and its rows must be read instead.
#[allow(clippy::too_many_arguments)]
fn summary_update(
    a: &mut Aggregator,
    keys: &[PExpr],
    args: &[SumArg],
    layout: &[InputCol],
    meta: &TableMeta,
    schema: &StableSchema,
    scan_cols: &[usize],
    rows: u64,
    ts_min: i64,
    ts_max: i64,
    sums: &[ColSummary],
) -> Result<bool, SqlError> {
    if rows == 0 {
        return Ok(true);
    }
    // Key and constant columns for a 2-row input: the block's first and last ts.
    let mut scanned: HashMap<usize, Column> = HashMap::new();
    for &c in scan_cols {
        let t = if c == 0 {
            DataType::Timestamp
        } else {
            schema
                .columns
                .get(c)
                .map(|d| d.data_type)
                .unwrap_or(DataType::BigInt)
        };
        let col = if c == 0 {
            Column::new(ColumnData::Timestamp(vec![ts_min, ts_max]))
        } else {
            Column::all_null(t, 2)
        };
        scanned.insert(c, col);
    }
    let cols = layout_columns(layout, meta, schema, &mut scanned, 2)?;
    let key_cols = keys
        .iter()
        .map(|k| eval(k, &cols, 2))
        .collect::<Result<Vec<_>, _>>()?;
    if key_cols.iter().any(|k| k.get(0) != k.get(1)) {
        return Ok(false);
    }
    let mut out = Vec::with_capacity(args.len());
    for arg in args {
        let s = match *arg {
            SumArg::Rows => Summary {
                rows,
                count: rows,
                min: Value::Null,
                max: Value::Null,
                sum: Value::Null,
                any: Value::Null,
                ts: ts_min,
            },
            SumArg::Const(i) => {
                let v = cols.get(i).map(|c| c.get(0)).unwrap_or(Value::Null);
                Summary {
                    rows,
                    count: if v.is_null() { 0 } else { rows },
                    min: v.clone(),
                    max: v.clone(),
                    sum: Value::Null,
                    any: v,
                    ts: ts_min,
                }
            }
            SumArg::Col(c) => {
                let Some(k) = scan_cols.iter().position(|x| *x == c) else {
                    return Ok(false);
                };
                let Some(cs) = sums.get(k) else {
                    return Ok(false);
                };
                if c == 0 {
                    // The ts column: never NULL, min/max are the block bounds.
                    Summary {
                        rows,
                        count: rows,
                        min: Value::Timestamp(ts_min),
                        max: Value::Timestamp(ts_max),
                        sum: Value::Null,
                        any: Value::Null,
                        ts: ts_min,
                    }
                } else {
                    Summary {
                        rows,
                        count: cs.count,
                        min: cs.min.clone(),
                        max: cs.max.clone(),
                        sum: cs.sum.clone(),
                        any: Value::Null,
                        ts: ts_min,
                    }
                }
            }
        };
        out.push(s);
    }
    a.update_summary(keys.len(), &key_cols, &out)
}

/// Runs the coordinator part of a plan over the vnode results:
/// `results[i] = (fragment id, one Batch per vgroup)`.
pub fn finish(plan: &QueryPlan, results: Vec<(u32, Vec<Batch>)>) -> Result<Batch, SqlError> {
    finish_with(plan, results, &MemoryBudget::unlimited())
}

/// [`finish`] holding what its operators build (gathered rows, group state, sort buffers,
/// FILL and window output) against `budget`: past it, the query fails instead of growing.
/// The caller accounts `results` itself (they are already in memory).
pub fn finish_with(
    plan: &QueryPlan,
    results: Vec<(u32, Vec<Batch>)>,
    budget: &MemoryBudget,
) -> Result<Batch, SqlError> {
    let mut by_id: HashMap<u32, Vec<Batch>> = HashMap::new();
    for (id, batches) in results {
        by_id.entry(id).or_default().extend(batches);
    }
    let mut cx = RunCtx {
        inputs: by_id,
        budget: budget.clone(),
        live: Vec::new(),
    };
    let mut b = run(&plan.root, &mut cx)?;
    // the result carries the user-facing names
    if b.fields.len() == plan.fields.len() {
        b.fields = plan.fields.clone();
    }
    Ok(b)
}

/// State of one run of a coordinator tree.
struct RunCtx {
    /// Fragment results by fragment id.
    inputs: HashMap<u32, Vec<Batch>>,
    budget: MemoryBudget,
    /// Reservations of the node outputs not consumed yet (a stack: a node's inputs are on
    /// top while it runs).
    live: Vec<Reservation>,
}

/// What a coordinator node's output is called in a memory-limit error.
fn held_by(node: &Node) -> &'static str {
    match node {
        Node::Gather { .. } => "gathering the vnode results",
        Node::Aggregate { .. } => "GROUP BY state",
        Node::Sort { .. } => "the sort buffer",
        Node::Fill { .. } => "FILL output",
        Node::Interp { .. } => "INTERP output",
        Node::Window { .. } | Node::SlidePanes { .. } => "window rows",
        Node::Distinct { .. } => "DISTINCT rows",
        _ => "the query result",
    }
}

/// Runs one coordinator node (recording rows and time for EXPLAIN ANALYZE). Its output is
/// reserved while its inputs are still held, so the check sees the node's peak; the inputs'
/// reservations end with it.
fn run(node: &Node, cx: &mut RunCtx) -> Result<Batch, SqlError> {
    let start = std::time::Instant::now();
    let mark = cx.live.len();
    let b = run_inner(node, cx)?;
    let held = cx.budget.reserve(batch_bytes(&b), held_by(node))?;
    cx.live.truncate(mark);
    cx.live.push(held);
    crate::explain::record(node, b.num_rows(), start.elapsed());
    Ok(b)
}

fn run_inner(node: &Node, cx: &mut RunCtx) -> Result<Batch, SqlError> {
    match node {
        Node::Gather { fragment, fields } => {
            let mut out = Batch::empty(fields.clone());
            for b in cx.inputs.remove(fragment).unwrap_or_default() {
                if b.columns.len() != fields.len() {
                    return Err(SqlError::Execution(format!(
                        "fragment {fragment} returned {} columns, expected {}",
                        b.columns.len(),
                        fields.len()
                    )));
                }
                out.append_owned(b);
            }
            Ok(out)
        }
        Node::Values { batch } => Ok(batch.clone()),
        Node::Union { inputs, fields } => {
            let mut out = Batch::empty(fields.clone());
            for input in inputs {
                let b = run(input, cx)?;
                if b.columns.len() != fields.len() {
                    return Err(SqlError::Execution(format!(
                        "a UNION member returned {} columns, expected {}",
                        b.columns.len(),
                        fields.len()
                    )));
                }
                out.append_owned(Batch::new(fields.clone(), b.columns));
            }
            Ok(out)
        }
        Node::Filter { input, pred } => {
            let b = run(input, cx)?;
            let n = b.num_rows();
            let keep = true_rows(&eval(pred, &b.columns, n)?, n);
            Ok(if keep.len() == n { b } else { b.take(&keep) })
        }
        Node::Project {
            input,
            exprs,
            fields,
        } => {
            let b = run(input, cx)?;
            let n = b.num_rows();
            let columns = exprs
                .iter()
                .map(|e| eval(e, &b.columns, n))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Batch {
                fields: fields.clone(),
                columns,
            })
        }
        Node::Aggregate {
            input,
            keys,
            aggs,
            merge,
        } => {
            let b = run(input, cx)?;
            let mut a = Aggregator::new(keys.iter().map(|k| k.data_type()).collect(), aggs.clone());
            if *merge {
                a.merge(&b)?;
            } else {
                a.update(keys, &b.columns, b.num_rows())?;
            }
            let mut fields: Vec<Field> = keys
                .iter()
                .map(|k| Field::new("k", k.data_type()))
                .collect();
            for (i, spec) in aggs.iter().enumerate() {
                fields.extend(spec.partial_fields(i));
            }
            let group_bytes = row_bytes(&fields) + GROUP_OVERHEAD_BYTES;
            let _state = cx.budget.reserve(
                (a.groups() as u64)
                    .saturating_mul(group_bytes)
                    .saturating_add(a.state_heap_bytes() as u64),
                "GROUP BY state",
            )?;
            Ok(a.finish(true))
        }
        // coordinator-only operators live in `coord`
        Node::RowFunc {
            input,
            partition,
            ts,
            funcs,
        } => crate::coord::row_funcs(run(input, cx)?, partition, *ts, funcs),
        Node::SelectRows {
            input,
            partition,
            ts,
            col,
            k,
            mode,
        } => crate::coord::select_rows(run(input, cx)?, partition, *ts, *col, *k, *mode),
        Node::Window {
            input,
            partition,
            ts,
            kind,
        } => crate::coord::window(run(input, cx)?, partition, ts, kind),
        Node::Fill {
            input,
            npart,
            step,
            offset,
            range,
            mode,
            cols,
            consts,
        } => crate::coord::fill(
            run(input, cx)?,
            *npart,
            *step,
            *offset,
            *range,
            mode,
            cols,
            consts,
        ),
        Node::Interp {
            input,
            partition,
            ts,
            cols,
            start,
            end,
            every,
            fill,
        } => crate::coord::interp(
            run(input, cx)?,
            partition,
            *ts,
            cols,
            *start,
            *end,
            *every,
            fill.as_ref(),
        ),
        Node::Histogram {
            input,
            partition,
            col,
            bins,
            normalized,
        } => crate::coord::histogram(run(input, cx)?, partition, *col, bins, *normalized),
        Node::SlidePanes {
            input,
            key,
            step,
            count,
        } => crate::coord::slide_panes(run(input, cx)?, *key, *step, *count),
        Node::Distinct { input } => Ok(crate::coord::distinct(run(input, cx)?)),
        Node::SLimit {
            input,
            partition,
            limit,
            offset,
        } => Ok(crate::coord::slimit(
            run(input, cx)?,
            partition,
            *limit,
            *offset,
        )),
        Node::Sort { input, keys } => {
            let b = run(input, cx)?;
            sort_batch(b, keys, &cx.budget)
        }
        Node::Limit {
            input,
            limit,
            offset,
            partition,
        } => {
            let b = run(input, cx)?;
            let n = b.num_rows();
            let lim = limit.unwrap_or(u64::MAX).min(n as u64) as usize;
            let off = (*offset).min(n as u64) as usize;
            let mut idx = Vec::new();
            let mut start = 0usize;
            while start < n {
                // one run of equal partition values (the whole batch when not partitioned)
                let mut end = start + 1;
                if partition.is_empty() {
                    end = n;
                } else {
                    while end < n
                        && partition.iter().all(|c| {
                            b.columns
                                .get(*c)
                                .is_some_and(|col| col.get(end) == col.get(start))
                        })
                    {
                        end += 1;
                    }
                }
                let from = start.saturating_add(off).min(end);
                let to = from.saturating_add(lim).min(end);
                idx.extend(from..to);
                start = end;
            }
            if idx.len() == n {
                return Ok(b);
            }
            Ok(b.take(&idx))
        }
    }
}

/// Bytes the sort holds per row beyond the rows themselves: the index and the key values.
const SORT_ROW_OVERHEAD_BYTES: u64 = 8 + 24;

/// Rows `x` and `y` of one column in [`Value::total_cmp`]'s order (NULL first), compared in
/// place: a sort makes O(n log n) of these, and building `Value`s for them (a string copy
/// each) cost more than the sort itself.
fn cmp_rows(c: &Column, x: usize, y: usize) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    match (c.is_null(x), c.is_null(y)) {
        (true, true) => return Ordering::Equal,
        (true, false) => return Ordering::Less,
        (false, true) => return Ordering::Greater,
        (false, false) => {}
    }
    fn at<T: Ord + Copy>(d: &[T], x: usize, y: usize) -> Ordering {
        match (d.get(x), d.get(y)) {
            (Some(a), Some(b)) => a.cmp(b),
            (a, b) => a.is_some().cmp(&b.is_some()),
        }
    }
    match &c.data {
        ColumnData::Bool(d) => at(d, x, y),
        ColumnData::Int(d) | ColumnData::Timestamp(d) => at(d, x, y),
        ColumnData::UInt(d) => at(d, x, y),
        ColumnData::Float(d) => match (d.get(x), d.get(y)) {
            (Some(a), Some(b)) => a.total_cmp(b),
            (a, b) => a.is_some().cmp(&b.is_some()),
        },
        ColumnData::Str(d) => match (d.get(x), d.get(y)) {
            (Some(a), Some(b)) => a.cmp(b),
            (a, b) => a.is_some().cmp(&b.is_some()),
        },
    }
}

/// Per row of `c`, a number whose order is [`cmp_rows`]' order: NULL is 0, values count
/// from 1 (a string by its rank among the column's distinct values). A sort compares these
/// instead of the values: one integer comparison per key, whatever the type.
fn order_codes(c: &Column) -> Vec<u128> {
    let n = c.len();
    let mut codes: Vec<u128> = match &c.data {
        ColumnData::Bool(d) => d.iter().map(|v| u128::from(*v) + 1).collect(),
        ColumnData::Int(d) | ColumnData::Timestamp(d) => d
            .iter()
            .map(|v| u128::from((*v as u64) ^ (1 << 63)) + 1)
            .collect(),
        ColumnData::UInt(d) => d.iter().map(|v| u128::from(*v) + 1).collect(),
        ColumnData::Float(d) => d
            .iter()
            .map(|v| {
                let bits = v.to_bits();
                // f64::total_cmp's order as an unsigned integer
                let key = if bits >> 63 == 1 {
                    !bits
                } else {
                    bits | (1 << 63)
                };
                u128::from(key) + 1
            })
            .collect(),
        ColumnData::Str(d) => {
            // distinct values numbered in order of appearance, then ranked
            let mut ids: HashMap<&str, u32> = HashMap::new();
            let mut values: Vec<&str> = Vec::new();
            let row_ids: Vec<u32> = d
                .iter()
                .map(|v| {
                    *ids.entry(v.as_str()).or_insert_with(|| {
                        values.push(v.as_str());
                        (values.len() - 1) as u32
                    })
                })
                .collect();
            let mut order: Vec<u32> = (0..values.len() as u32).collect();
            order.sort_unstable_by(|a, b| values[*a as usize].cmp(values[*b as usize]));
            let mut rank = vec![0u32; values.len()];
            for (r, id) in order.iter().enumerate() {
                rank[*id as usize] = r as u32;
            }
            row_ids
                .iter()
                .map(|id| u128::from(rank[*id as usize]) + 1)
                .collect()
        }
    };
    codes.resize(n, 0);
    for (code, null) in codes.iter_mut().zip(&c.nulls) {
        if *null {
            *code = 0;
        }
    }
    codes
}

/// `b` sorted by `keys` (column, ascending), ties broken by the whole row so that the order
/// never depends on the order in which vnode results arrived (row functions and LIMIT see it).
pub(crate) fn sort_batch(
    b: Batch,
    keys: &[(usize, bool)],
    budget: &MemoryBudget,
) -> Result<Batch, SqlError> {
    let n = b.num_rows();
    let per_row = SORT_ROW_OVERHEAD_BYTES
        + keys
            .iter()
            .map(|(c, _)| {
                b.fields
                    .get(*c)
                    .map(|f| type_bytes(f.data_type) + 16)
                    .unwrap_or(16)
            })
            .sum::<u64>();
    let _buffer = budget.reserve((n as u64).saturating_mul(per_row), "the sort buffer")?;
    let key_codes: Vec<(Vec<u128>, bool)> = keys
        .iter()
        .filter_map(|(c, asc)| Some((order_codes(b.columns.get(*c)?), *asc)))
        .collect();
    let mut idx: Vec<usize> = (0..n).collect();
    idx.sort_by(|&x, &y| {
        for (codes, asc) in &key_codes {
            let o = codes[x].cmp(&codes[y]);
            let o = if *asc { o } else { o.reverse() };
            if o != std::cmp::Ordering::Equal {
                return o;
            }
        }
        for c in &b.columns {
            let o = cmp_rows(c, x, y);
            if o != std::cmp::Ordering::Equal {
                return o;
            }
        }
        std::cmp::Ordering::Equal
    });
    Ok(b.take(&idx))
}

#[cfg(test)]
mod order_code_tests {
    use super::*;

    #[test]
    fn order_codes_order_rows_as_cmp_rows_does() {
        let mut x: u64 = 42;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let n = 300;
        let floats = [
            f64::NAN,
            -f64::NAN,
            -0.0,
            0.0,
            1.5,
            -1.5,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MIN_POSITIVE,
        ];
        let ints = [i64::MIN, i64::MIN + 1, -1, 0, 1, i64::MAX - 1, i64::MAX];
        let strs = [
            "", "a", "ab", "b", "truck_1", "truck_10", "truck_2", "é", "Z",
        ];
        let mut cols = vec![
            Column::new(ColumnData::Float(
                (0..n)
                    .map(|_| floats[next() as usize % floats.len()])
                    .collect(),
            )),
            Column::new(ColumnData::Int(
                (0..n).map(|_| ints[next() as usize % ints.len()]).collect(),
            )),
            Column::new(ColumnData::Timestamp(
                (0..n).map(|_| ints[next() as usize % ints.len()]).collect(),
            )),
            Column::new(ColumnData::UInt(
                (0..n)
                    .map(|_| [0, 1, u64::MAX][next() as usize % 3])
                    .collect(),
            )),
            Column::new(ColumnData::Bool((0..n).map(|_| next() % 2 == 0).collect())),
            Column::new(ColumnData::Str(
                (0..n)
                    .map(|_| strs[next() as usize % strs.len()].to_string())
                    .collect(),
            )),
        ];
        for c in cols.iter_mut() {
            c.nulls = (0..n).map(|_| next() % 7 == 0).collect();
        }
        for c in &cols {
            let codes = order_codes(c);
            for i in 0..n {
                for j in 0..n {
                    assert_eq!(
                        codes[i].cmp(&codes[j]),
                        cmp_rows(c, i, j),
                        "{:?} {:?}",
                        c.get(i),
                        c.get(j)
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tag_pred_tests {
    use super::*;
    use tidal_common::{ColumnDef, SchemaVersion, TableUid};

    fn def(name: &str, t: DataType) -> ColumnDef {
        ColumnDef {
            name: name.into(),
            data_type: t,
            codec: None,
        }
    }

    /// Every predicate form, on subtables with NULL and odd tag values, gives what `eval`
    /// gives on the tag columns; a value stored in another type than its tag's is left to the
    /// column path.
    #[test]
    fn in_place_tag_filters_agree_with_column_evaluation() {
        let schema = StableSchema {
            db: "d".into(),
            name: "s".into(),
            version: SchemaVersion(1),
            columns: vec![def("ts", DataType::Timestamp), def("v", DataType::Double)],
            tags: vec![
                def("name", DataType::VarChar(16)),
                def("load", DataType::Double),
                def("n", DataType::BigInt),
            ],
        };
        let names = [Some("a"), Some("b"), None, Some("truck_10"), Some("")];
        let loads = [Some(1.5), None, Some(f64::NAN), Some(-0.0), Some(4000.0)];
        let ns = [Some(3), Some(-7), None, Some(0), Some(4000)];
        let mut metas = Vec::new();
        for (i, ((a, b), c)) in names.iter().zip(loads).zip(ns).enumerate() {
            let v = |x: Option<Value>| x.unwrap_or(Value::Null);
            metas.push(TableMeta {
                uid: TableUid(i as u64),
                name: format!("t{i}"),
                stable: "s".into(),
                tags: vec![
                    v(a.map(|s| Value::Str(s.into()))),
                    v(b.map(Value::Float)),
                    v(c.map(Value::Int)),
                ]
                .into(),
            });
        }
        let layout = vec![
            InputCol::Tag(0),
            InputCol::Tag(1),
            InputCol::Tag(2),
            InputCol::Tbname,
        ];
        let types = [
            DataType::VarChar(16),
            DataType::Double,
            DataType::BigInt,
            TBNAME_TYPE,
        ];
        let inp = |i: usize| Box::new(PExpr::Input(i, types[i]));
        let lit = |v: Value, t: DataType| Box::new(PExpr::Lit(v, t));
        let cmp = |op: BinOp, a: Box<PExpr>, b: Box<PExpr>| PExpr::Bin(op, a, b, DataType::Bool);
        let ops = BinOp::COMPARISONS;
        let mut preds = Vec::new();
        for op in ops {
            preds.push(cmp(
                op,
                inp(0),
                lit(Value::Str("b".into()), DataType::VarChar(16)),
            ));
            preds.push(cmp(
                op,
                lit(Value::Str("b".into()), DataType::VarChar(16)),
                inp(0),
            ));
            preds.push(cmp(op, inp(1), lit(Value::Float(1.5), DataType::Double)));
            preds.push(cmp(op, inp(1), lit(Value::Int(0), DataType::BigInt)));
            preds.push(cmp(op, inp(2), lit(Value::Float(0.5), DataType::Double)));
            preds.push(cmp(op, lit(Value::Int(0), DataType::BigInt), inp(2)));
            preds.push(cmp(op, inp(3), lit(Value::Str("t2".into()), TBNAME_TYPE)));
            preds.push(cmp(op, inp(0), lit(Value::Null, DataType::VarChar(16))));
        }
        for neg in [false, true] {
            preds.push(PExpr::IsNull(inp(0), neg));
            preds.push(PExpr::IsNull(inp(1), neg));
            let strs: Vec<Value> = ["a", "truck_10", "zz"]
                .map(|s| Value::Str(s.into()))
                .to_vec();
            preds.push(PExpr::InList(inp(0), strs.into(), neg));
            let many: Vec<Value> = (0..100).map(|i| Value::Int(i - 10)).collect();
            preds.push(PExpr::InList(inp(2), many.into(), neg));
            preds.push(PExpr::InList(
                inp(1),
                vec![Value::Float(1.5), Value::Int(0)].into(),
                neg,
            ));
        }
        let n = preds.len();
        for i in 0..n {
            let (a, b) = (preds[i].clone(), preds[(i * 7 + 3) % n].clone());
            preds.push(cmp(BinOp::And, Box::new(a.clone()), Box::new(b.clone())));
            preds.push(cmp(BinOp::Or, Box::new(a.clone()), Box::new(b)));
            preds.push(PExpr::Not(Box::new(a)));
        }
        let refs: Vec<&TableMeta> = metas.iter().collect();
        let cols = multi_table_layout(&layout, &refs, &schema, &mut HashMap::new()).unwrap();
        for p in &preds {
            let want = true_rows(&eval(p, &cols, refs.len()).unwrap(), refs.len());
            let compiled = TagPred::compile(p, &layout, &schema)
                .unwrap_or_else(|| panic!("{p:?} has a simple form"));
            let got: Vec<usize> = (0..metas.len())
                .filter(|i| matches!(compiled.eval(&metas[*i]), Ok(Some(true))))
                .collect();
            assert_eq!(got, want, "{p:?}");
        }
        // a Float tag holding an integer value: not read in place
        let odd = TableMeta {
            tags: vec![Value::Str("a".into()), Value::Int(2), Value::Int(1)].into(),
            ..metas[0].clone()
        };
        let p = cmp(BinOp::Gt, inp(1), lit(Value::Float(1.0), DataType::Double));
        let compiled = TagPred::compile(&p, &layout, &schema).unwrap();
        assert!(compiled.eval(&odd).is_err());
    }
}
