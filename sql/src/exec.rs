//! Execution: the vnode side ([`execute_fragment`]) and the coordinator side ([`finish`]).

use crate::agg::{AggFunc, AggSpec, Aggregator, Summary};
use crate::error::SqlError;
use crate::expr::PExpr;
use crate::expr::{broadcast, eval, true_rows};
use crate::plan::{Fragment, FragmentOp, InputCol, Node, QueryPlan, ScanTarget, TBNAME_TYPE};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tidal_common::{
    types::PhysicalType, Batch, Column, ColumnData, DataType, StableSchema, TableMeta, TableUid,
    Value,
};

/// Implemented by the vnode server over its local storage.
pub trait ScanSource {
    fn schema(&self, stable: &str) -> Option<StableSchema>;
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
    fn find(e: &PExpr, layout: &[InputCol], out: &mut Vec<(usize, Vec<Value>)>) {
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
                        out.push((k, vec![v.clone()]));
                    }
                }
                _ => {}
            },
            PExpr::InList(x, vals, false) => {
                if let Some(k) = tag_of(x) {
                    out.push((k, vals.clone()));
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
    found.into_iter().min_by_key(|(k, _)| *k)
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
    pre: Option<&mut HashMap<TableUid, Option<Vec<Column>>>>,
) -> Result<(), SqlError> {
    let err = |e: String| SqlError::Execution(format!("scan of table {}: {e}", meta.name));
    match mode {
        LatestMode::LastRow => {
            let last = match pre.and_then(|p| p.remove(&meta.uid)) {
                Some(r) => r,
                None => src.last_row(meta.uid, scan_cols).map_err(err)?,
            };
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
            // The latest row does not qualify: the latest one that does, newest window first.
            for (lo, hi) in src.ranges_desc(meta.uid).map_err(err)? {
                let (lo, hi) = (lo.max(f.ts_min), hi.min(f.ts_max));
                if lo > hi {
                    continue;
                }
                let scanned = src.scan(meta.uid, lo, hi, scan_cols).map_err(err)?;
                let n = scanned.first().map(Column::len).unwrap_or(0);
                if n == 0 {
                    continue;
                }
                let keep = match &f.filter {
                    None => vec![n - 1],
                    Some(pred) => {
                        let mut by_idx: HashMap<usize, Column> =
                            scan_cols.iter().copied().zip(scanned.clone()).collect();
                        let cols = layout_columns(&f.layout, meta, schema, &mut by_idx, n)?;
                        true_rows(&eval(pred, &cols, n)?, n)
                            .last()
                            .map(|i| vec![*i])
                            .unwrap_or_default()
                    }
                };
                if !keep.is_empty() {
                    let row = scanned.iter().map(|c| c.take(&keep)).collect();
                    return process_rows(f, out, agg, meta, schema, scan_cols, row);
                }
            }
            Ok(())
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
            let v = m.tags.get(i).unwrap_or(&Value::Null);
            // The common case (the value has the tag's type) pushes directly; anything else
            // is converted as for a single subtable.
            let direct = matches!(
                (t.physical(), v),
                (_, Value::Null)
                    | (PhysicalType::Bool, Value::Bool(_))
                    | (PhysicalType::Int, Value::Int(_))
                    | (PhysicalType::UInt, Value::UInt(_))
                    | (PhysicalType::Float, Value::Float(_))
                    | (PhysicalType::Str, Value::Str(_))
                    | (PhysicalType::Timestamp, Value::Timestamp(_))
            );
            if direct {
                col.push(v);
            } else {
                col.extend(&broadcast(v, t, 1));
            }
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
    let metas = target_tables(f, src)?;
    let Some(tf) = &f.tag_filter else {
        return Ok(metas);
    };
    let mut schemas: HashMap<String, Option<StableSchema>> = HashMap::new();
    let mut keep = Vec::with_capacity(metas.len());
    for meta in metas {
        let schema = schemas
            .entry(meta.stable.clone())
            .or_insert_with(|| src.schema(&meta.stable));
        let Some(schema) = schema else {
            continue;
        };
        let cols = layout_columns(&f.tag_layout, &meta, schema, &mut HashMap::new(), 1)?;
        if !true_rows(&eval(tf, &cols, 1)?, 1).is_empty() {
            keep.push(meta);
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
        ScanTarget::Table(t) => vec![src.table(t).ok_or_else(|| {
            SqlError::TableNotFound(format!("table '{t}' not found on this vnode"))
        })?],
    })
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
    let metas = target_tables(f, src)?;
    let mut scan_cols: Vec<usize> = vec![0];
    let mut prefetched: Option<HashMap<TableUid, Option<Vec<Column>>>> = None;
    for c in &f.layout {
        if let InputCol::Col(i) = c {
            if !scan_cols.contains(i) {
                scan_cols.push(*i);
            }
        }
    }
    scan_cols.sort_unstable();
    let mut schemas: HashMap<String, StableSchema> = HashMap::new();
    let mut out = Batch::empty(f.output_fields());
    let mut agg = match &f.op {
        FragmentOp::PartialAgg { keys, aggs } => Some(BufferedAgg::new(Aggregator::new(
            keys.iter().map(|k| k.data_type()).collect(),
            aggs.clone(),
        ))),
        FragmentOp::Project { .. } => None,
    };
    let sma = match &f.op {
        FragmentOp::PartialAgg { keys, aggs } => sma_args(f, keys, aggs),
        FragmentOp::Project { .. } => None,
    };
    let latest = match &f.op {
        FragmentOp::PartialAgg { keys, aggs } => latest_mode(f, keys, aggs),
        FragmentOp::Project { .. } => None,
    };
    // LAST_ROW over many subtables of a STABLE: filter the subtables by tags, fetch every
    // last row in one call (the storage answers cache hits under one lock), and feed the ones
    // that qualify (time range, row filter) to the aggregation as one batch. A subtable whose
    // last row does not qualify goes through the per-subtable search below.
    let mut metas = metas;
    let mut tags_checked = false;
    if let (Some(LatestMode::LastRow), ScanTarget::Stable(stable), Some(a)) =
        (latest, &f.target, agg.as_mut())
    {
        if metas.len() > 1 && f.ts_min <= f.ts_max {
            let FragmentOp::PartialAgg { keys, .. } = &f.op else {
                return Err(SqlError::Execution("LAST_ROW without aggregation".into()));
            };
            let Some(schema) = src.schema(stable) else {
                return Ok(a.agg.partial());
            };
            if let Some(tf) = &f.tag_filter {
                let all: Vec<&TableMeta> = metas.iter().map(|m| &**m).collect();
                let cols = multi_table_layout(&f.tag_layout, &all, &schema, &mut HashMap::new())?;
                let keep = true_rows(&eval(tf, &cols, all.len())?, all.len());
                metas = keep.iter().filter_map(|i| metas.get(*i).cloned()).collect();
            }
            tags_checked = true;
            let uids: Vec<TableUid> = metas.iter().map(|m| m.uid).collect();
            let (pos, rows) = src
                .last_rows_columns(stable, &uids, &scan_cols)
                .map_err(|e| SqlError::Execution(format!("last rows: {e}")))?;
            let found: Vec<&TableMeta> = pos
                .iter()
                .filter_map(|k| metas.get(*k).map(|m| &**m))
                .collect();
            let n = found.len();
            let ts: Vec<i64> = match rows.first() {
                Some(c) => (0..c.len())
                    .map(|i| c.get(i).as_i64().unwrap_or(i64::MIN))
                    .collect(),
                None => Vec::new(),
            };
            let mut by_idx: HashMap<usize, Column> = scan_cols
                .iter()
                .copied()
                .zip(rows.iter().cloned())
                .collect();
            let cols = multi_table_layout(&f.layout, &found, &schema, &mut by_idx)?;
            let mut ok: Vec<bool> = ts
                .iter()
                .map(|t| *t >= f.ts_min && *t <= f.ts_max)
                .collect();
            if let Some(pred) = &f.filter {
                let pass = true_rows(&eval(pred, &cols, n)?, n);
                let mut m = vec![false; n];
                for i in pass {
                    m[i] = true;
                }
                for (o, p) in ok.iter_mut().zip(m) {
                    *o &= p;
                }
            }
            let good: Vec<usize> = (0..n).filter(|i| ok[*i]).collect();
            if good.len() == n {
                a.update(keys, cols, n)?;
            } else if !good.is_empty() {
                let cols = cols.iter().map(|c| c.take(&good)).collect();
                a.update(keys, cols, good.len())?;
            }
            let bad: Vec<usize> = (0..n).filter(|i| !ok[*i]).collect();
            prefetched = Some(
                bad.iter()
                    .map(|j| {
                        let row = rows.iter().map(|c| c.slice(*j, j + 1)).collect();
                        (found[*j].uid, Some(row))
                    })
                    .collect(),
            );
            let retry: Vec<Arc<TableMeta>> = bad
                .iter()
                .filter_map(|j| pos.get(*j).and_then(|k| metas.get(*k)).cloned())
                .collect();
            metas = retry;
        }
    }
    for meta in &metas {
        if f.limit.is_some_and(|l| out.num_rows() as u64 >= l) {
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
        if let Some(tf) = f.tag_filter.as_ref().filter(|_| !tags_checked) {
            let cols = layout_columns(&f.tag_layout, meta, schema, &mut HashMap::new(), 1)?;
            let r = eval(tf, &cols, 1)?;
            if true_rows(&r, 1).is_empty() {
                continue;
            }
        }
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
                &mut out,
                agg.as_mut(),
                prefetched.as_mut(),
            )?;
            continue;
        }
        let pieces = match &sma {
            Some(_) => src.scan_pieces(meta.uid, f.ts_min, f.ts_max, &scan_cols),
            None => src
                .scan(meta.uid, f.ts_min, f.ts_max, &scan_cols)
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
                &mut out,
                agg.as_mut(),
                meta,
                schema,
                &scan_cols,
                scanned,
                cancelled,
            )?;
        }
    }
    if let (Some(mut a), FragmentOp::PartialAgg { keys, .. }) = (agg, &f.op) {
        a.flush(keys)?;
        return Ok(a.agg.partial());
    }
    Ok(out)
}

/// Rows bound for the partial aggregation, gathered across subtables: many subtables hold a
/// few rows each (a last row, a short time range), and one update over thousands of rows is
/// far cheaper than thousands of one-row updates. Order is kept, so results are unchanged.
struct BufferedAgg {
    agg: Aggregator,
    buf: Vec<Column>,
    n: usize,
}

/// Rows gathered before the aggregator is fed.
const AGG_BATCH_ROWS: usize = 4096;

impl BufferedAgg {
    fn new(agg: Aggregator) -> BufferedAgg {
        BufferedAgg {
            agg,
            buf: Vec::new(),
            n: 0,
        }
    }

    fn update(&mut self, keys: &[PExpr], cols: Vec<Column>, n: usize) -> Result<(), SqlError> {
        if n >= AGG_BATCH_ROWS {
            self.flush(keys)?;
            return self.agg.update(keys, &cols, n);
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

    fn flush(&mut self, keys: &[PExpr]) -> Result<(), SqlError> {
        if self.n > 0 {
            let cols = std::mem::take(&mut self.buf);
            let n = std::mem::replace(&mut self.n, 0);
            self.agg.update(keys, &cols, n)?;
        }
        Ok(())
    }
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
    out: &mut Batch,
    mut agg: Option<&mut BufferedAgg>,
    meta: &TableMeta,
    schema: &StableSchema,
    scan_cols: &[usize],
    scanned: Vec<Column>,
    cancelled: &AtomicBool,
) -> Result<(), SqlError> {
    let n = scanned.first().map(Column::len).unwrap_or(0);
    if n <= CANCEL_CHECK_ROWS {
        return process_rows(f, out, agg, meta, schema, scan_cols, scanned);
    }
    let mut start = 0;
    while start < n {
        check_cancelled(cancelled)?;
        let end = (start + CANCEL_CHECK_ROWS).min(n);
        let chunk = scanned.iter().map(|c| c.slice(start, end)).collect();
        process_rows(f, out, agg.as_deref_mut(), meta, schema, scan_cols, chunk)?;
        start = end;
    }
    Ok(())
}

fn process_rows(
    f: &Fragment,
    out: &mut Batch,
    agg: Option<&mut BufferedAgg>,
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
            let mut cols = layout_columns(&f.layout, meta, schema, &mut by_idx, n)?;
            let mut n = n;
            if let Some(pred) = &f.filter {
                let keep = true_rows(&eval(pred, &cols, n)?, n);
                if keep.len() < n {
                    cols = cols.iter().map(|c| c.take(&keep)).collect();
                    n = keep.len();
                }
            }
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
    let mut by_id: HashMap<u32, Vec<Batch>> = HashMap::new();
    for (id, batches) in results {
        by_id.entry(id).or_default().extend(batches);
    }
    let mut b = run(&plan.root, &mut by_id)?;
    // the result carries the user-facing names
    if b.fields.len() == plan.fields.len() {
        b.fields = plan.fields.clone();
    }
    Ok(b)
}

/// Runs one coordinator node (recording rows and time for EXPLAIN ANALYZE).
fn run(node: &Node, inputs: &mut HashMap<u32, Vec<Batch>>) -> Result<Batch, SqlError> {
    let start = std::time::Instant::now();
    let r = run_inner(node, inputs);
    if let Ok(b) = &r {
        crate::explain::record(node, b.num_rows(), start.elapsed());
    }
    r
}

fn run_inner(node: &Node, inputs: &mut HashMap<u32, Vec<Batch>>) -> Result<Batch, SqlError> {
    match node {
        Node::Gather { fragment, fields } => {
            let mut out = Batch::empty(fields.clone());
            for b in inputs.remove(fragment).unwrap_or_default() {
                if b.columns.len() != fields.len() {
                    return Err(SqlError::Execution(format!(
                        "fragment {fragment} returned {} columns, expected {}",
                        b.columns.len(),
                        fields.len()
                    )));
                }
                out.append(&b);
            }
            Ok(out)
        }
        Node::Filter { input, pred } => {
            let b = run(input, inputs)?;
            let n = b.num_rows();
            let keep = true_rows(&eval(pred, &b.columns, n)?, n);
            Ok(if keep.len() == n { b } else { b.take(&keep) })
        }
        Node::Project {
            input,
            exprs,
            fields,
        } => {
            let b = run(input, inputs)?;
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
            let b = run(input, inputs)?;
            let mut a = Aggregator::new(keys.iter().map(|k| k.data_type()).collect(), aggs.clone());
            if *merge {
                a.merge(&b)?;
            } else {
                a.update(keys, &b.columns, b.num_rows())?;
            }
            Ok(a.finish(true))
        }
        // coordinator-only operators live in `coord`
        Node::RowFunc {
            input,
            partition,
            ts,
            funcs,
        } => crate::coord::row_funcs(run(input, inputs)?, partition, *ts, funcs),
        Node::SelectRows {
            input,
            partition,
            ts,
            col,
            k,
            mode,
        } => crate::coord::select_rows(run(input, inputs)?, partition, *ts, *col, *k, *mode),
        Node::Window {
            input,
            partition,
            ts,
            kind,
        } => crate::coord::window(run(input, inputs)?, partition, ts, kind),
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
            run(input, inputs)?,
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
            run(input, inputs)?,
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
        } => crate::coord::histogram(run(input, inputs)?, partition, *col, bins, *normalized),
        Node::SlidePanes {
            input,
            key,
            step,
            count,
        } => crate::coord::slide_panes(run(input, inputs)?, *key, *step, *count),
        Node::Distinct { input } => Ok(crate::coord::distinct(run(input, inputs)?)),
        Node::SLimit {
            input,
            partition,
            limit,
            offset,
        } => Ok(crate::coord::slimit(
            run(input, inputs)?,
            partition,
            *limit,
            *offset,
        )),
        Node::Sort { input, keys } => {
            let b = run(input, inputs)?;
            let n = b.num_rows();
            let kv: Vec<Vec<Value>> = (0..n)
                .map(|i| {
                    keys.iter()
                        .map(|(c, _)| {
                            b.columns
                                .get(*c)
                                .map(|col| col.get(i))
                                .unwrap_or(Value::Null)
                        })
                        .collect()
                })
                .collect();
            let mut idx: Vec<usize> = (0..n).collect();
            idx.sort_by(|&x, &y| {
                for (k, (_, asc)) in keys.iter().enumerate() {
                    let o = kv[x][k].total_cmp(&kv[y][k]);
                    let o = if *asc { o } else { o.reverse() };
                    if o != std::cmp::Ordering::Equal {
                        return o;
                    }
                }
                // ties by the whole row: the order of equal keys must not depend on the order
                // in which vnode results arrived (row functions and LIMIT see it)
                for c in &b.columns {
                    let o = c.get(x).total_cmp(&c.get(y));
                    if o != std::cmp::Ordering::Equal {
                        return o;
                    }
                }
                std::cmp::Ordering::Equal
            });
            Ok(b.take(&idx))
        }
        Node::Limit {
            input,
            limit,
            offset,
            partition,
        } => {
            let b = run(input, inputs)?;
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
