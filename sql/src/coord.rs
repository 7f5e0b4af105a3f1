//! Coordinator-only operators over gathered batches: row-defined windows (state, session,
//! event, count, sliding INTERVAL), FILL, row functions (DIFF, DERIVATIVE, CSUM, MAVG,
//! STATECOUNT, STATEDURATION), the multi-row selectors TOP/BOTTOM/SAMPLE, DISTINCT and
//! SLIMIT. They need all rows of a partition in time order, which only the coordinator has.

use crate::agg::normalize;
use crate::ast::BinOp;
use crate::error::SqlError;
use crate::expr::{eval, true_rows, PExpr};
use crate::plan::{FillMode, RowFn, SelectMode, WindowKind};
use std::cmp::Ordering;
use tidal_common::types::PhysicalType;
use tidal_common::{Batch, Column, ColumnData, DataType, Field, Value};

/// Fill never produces more rows than this (a tiny INTERVAL over a long range would).
const FILL_ROWS_MAX: i64 = 10_000_000;

/// Whether rows i and j of a column hold equal values, without allocating for strings.
fn eq_at(c: &Column, i: usize, j: usize) -> bool {
    if c.is_null(i) || c.is_null(j) {
        return c.is_null(i) && c.is_null(j);
    }
    match &c.data {
        ColumnData::Str(v) => v.get(i) == v.get(j),
        ColumnData::Int(v) | ColumnData::Timestamp(v) => v.get(i) == v.get(j),
        ColumnData::UInt(v) => v.get(i) == v.get(j),
        ColumnData::Float(v) => v.get(i).map(|x| x.to_bits()) == v.get(j).map(|x| x.to_bits()),
        ColumnData::Bool(v) => v.get(i) == v.get(j),
    }
}

/// Runs of equal values in `cols` (the batch is sorted by them): `(start, end)` pairs.
fn runs(b: &Batch, cols: &[usize]) -> Vec<(usize, usize)> {
    let n = b.num_rows();
    let mut out = Vec::new();
    let mut start = 0;
    while start < n {
        let mut end = start + 1;
        while end < n
            && cols
                .iter()
                .all(|c| b.columns.get(*c).is_some_and(|col| eq_at(col, end, start)))
        {
            end += 1;
        }
        out.push((start, end));
        start = end;
    }
    out
}

/// Sorts row indices by (partition values, ts), then by the whole row: rows of different
/// subtables with the same timestamp must not be ordered by vnode arrival.
fn sorted_order(parts: &[Column], ts: &Column, all: &[Column], n: usize) -> Vec<usize> {
    // keys extracted once: comparisons must not allocate
    let pk: Vec<Vec<Value>> = (0..n)
        .map(|i| parts.iter().map(|c| c.get(i)).collect())
        .collect();
    let tk: Vec<i64> = (0..n)
        .map(|i| ts.get(i).as_i64().unwrap_or(i64::MIN))
        .collect();
    let mut idx: Vec<usize> = (0..n).collect();
    idx.sort_by(|&x, &y| {
        for (a, b) in pk[x].iter().zip(&pk[y]) {
            let o = a.total_cmp(b);
            if o != Ordering::Equal {
                return o;
            }
        }
        let o = tk[x].cmp(&tk[y]);
        if o != Ordering::Equal {
            return o;
        }
        for c in all {
            let o = c.get(x).total_cmp(&c.get(y));
            if o != Ordering::Equal {
                return o;
            }
        }
        Ordering::Equal
    });
    idx
}

/// [`crate::plan::Node::Window`]: appends the window id, repeating rows per window.
pub fn window(
    b: Batch,
    partition: &[PExpr],
    ts: &PExpr,
    kind: &WindowKind,
) -> Result<Batch, SqlError> {
    let n = b.num_rows();
    let parts = partition
        .iter()
        .map(|p| eval(p, &b.columns, n))
        .collect::<Result<Vec<_>, _>>()?;
    let tsc = eval(ts, &b.columns, n)?;
    let order = sorted_order(&parts, &tsc, &b.columns, n);
    let t = |i: usize| tsc.get(i).as_i64().unwrap_or(i64::MIN);
    let (c1, c2) = match kind {
        WindowKind::State(e) => (Some(eval(e, &b.columns, n)?), None),
        WindowKind::Event(s, e) => (Some(eval(s, &b.columns, n)?), Some(eval(e, &b.columns, n)?)),
        _ => (None, None),
    };
    // EVENT_WINDOW conditions per row (NULL counts as false)
    let holds = |c: &Option<Column>| -> Vec<bool> {
        let mut v = vec![false; n];
        if let Some(c) = c {
            for i in true_rows(c, n) {
                v[i] = true;
            }
        }
        v
    };
    let (h1, h2) = match kind {
        WindowKind::Event(..) => (holds(&c1), holds(&c2)),
        _ => (Vec::new(), Vec::new()),
    };
    let same_part = |i: usize, j: usize| parts.iter().all(|c| eq_at(c, i, j));
    let mut rows: Vec<usize> = Vec::new();
    let mut wids: Vec<i64> = Vec::new();
    let mut next_id = 0i64;
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        while end < order.len() && same_part(order[end], order[start]) {
            end += 1;
        }
        let run = &order[start..end];
        match kind {
            WindowKind::Sliding {
                interval,
                sliding,
                offset,
            } => {
                for &r in run {
                    let tr = t(r);
                    let last = tr.saturating_sub(tr.saturating_sub(*offset).rem_euclid(*sliding));
                    // every window [s, s + interval) on the sliding grid holding tr, oldest
                    // first so that ids stay in time order
                    let mut s = last;
                    let mut starts = Vec::new();
                    while s > tr.saturating_sub(*interval) {
                        starts.push(s);
                        s = s.saturating_sub(*sliding);
                    }
                    for s in starts.into_iter().rev() {
                        rows.push(r);
                        wids.push(s);
                    }
                }
            }
            WindowKind::State(_) => {
                let col = c1.as_ref();
                let mut prev: Option<Value> = None;
                for &r in run {
                    let Some(c) = col else { break };
                    if c.is_null(r) {
                        continue;
                    }
                    let v = c.get(r);
                    if prev.as_ref() != Some(&v) {
                        next_id += 1;
                        prev = Some(v);
                    }
                    rows.push(r);
                    wids.push(next_id);
                }
            }
            WindowKind::Session(gap) => {
                let mut prev: Option<i64> = None;
                for &r in run {
                    let tr = t(r);
                    if prev.is_none_or(|p| tr.saturating_sub(p) > *gap) {
                        next_id += 1;
                    }
                    prev = Some(tr);
                    rows.push(r);
                    wids.push(next_id);
                }
            }
            WindowKind::Event(..) => {
                let mut open: Vec<usize> = Vec::new();
                let mut is_open = false;
                for &r in run {
                    if !is_open && h1.get(r).copied().unwrap_or(false) {
                        is_open = true;
                        open.clear();
                    }
                    if is_open {
                        open.push(r);
                        if h2.get(r).copied().unwrap_or(false) {
                            next_id += 1;
                            for &o in &open {
                                rows.push(o);
                                wids.push(next_id);
                            }
                            is_open = false;
                        }
                    }
                }
            }
            WindowKind::Count(size, step) => {
                let (size, step) = (*size as usize, (*step as usize).max(1));
                let mut w = 0;
                while w * step < run.len() {
                    next_id += 1;
                    let from = w * step;
                    for &r in &run[from..(from + size).min(run.len())] {
                        rows.push(r);
                        wids.push(next_id);
                    }
                    if from + size >= run.len() {
                        break;
                    }
                    w += 1;
                }
            }
        }
        start = end;
    }
    let mut out = b.take(&rows);
    let (data, t) = match kind {
        WindowKind::Sliding { .. } => (ColumnData::Timestamp(wids), DataType::Timestamp),
        _ => (ColumnData::Int(wids), DataType::BigInt),
    };
    out.fields.push(Field::new("_wid", t));
    out.columns.push(Column::new(data));
    Ok(out)
}

/// [`crate::plan::Node::Fill`].
#[allow(clippy::too_many_arguments)]
pub fn fill(
    b: Batch,
    npart: usize,
    step: i64,
    offset: i64,
    range: Option<(i64, i64)>,
    mode: &FillMode,
    cols: &[usize],
    consts: &[usize],
) -> Result<Batch, SqlError> {
    let step = step.max(1);
    let align = |t: i64| t.saturating_sub(t.saturating_sub(offset).rem_euclid(step));
    let key = npart;
    let part_cols: Vec<usize> = (0..npart).collect();
    let mut out: Vec<Vec<Value>> = Vec::new();
    let mut budget = FILL_ROWS_MAX;
    for (s, e) in runs(&b, &part_cols) {
        let win = |i: usize| b.columns[key].get(i).as_i64().unwrap_or(0);
        let (first, last) = match range {
            Some((lo, hi)) => (align(lo).min(win(s)), align(hi).max(win(e - 1))),
            None => (win(s), win(e - 1)),
        };
        budget -= (last.saturating_sub(first) / step).saturating_add(1);
        if budget < 0 {
            return Err(SqlError::Execution(format!(
                "FILL would produce more than {FILL_ROWS_MAX} rows: use a larger INTERVAL or a narrower time range"
            )));
        }
        let mut i = s;
        let mut prev: Option<usize> = None;
        let mut w = first;
        while w <= last {
            // rows before the grid position (other alignment) pass through
            while i < e && win(i) < w {
                out.push(b.row(i));
                prev = Some(i);
                i += 1;
            }
            if i < e && win(i) == w {
                out.push(b.row(i));
                prev = Some(i);
                i += 1;
            } else {
                let next = (i < e).then_some(i);
                let mut row = b.row(s);
                row[key] = Value::Timestamp(w);
                for &c in consts {
                    row[c] = b.columns[c].get(s);
                }
                let mut vi = 0;
                for &c in cols {
                    let t = b.fields[c].data_type;
                    let v = match mode {
                        FillMode::Null => Value::Null,
                        FillMode::Prev => prev.map(|p| b.columns[c].get(p)).unwrap_or(Value::Null),
                        FillMode::Next => next.map(|p| b.columns[c].get(p)).unwrap_or(Value::Null),
                        FillMode::Value(vals) => {
                            let v = vals.get(vi).cloned().unwrap_or(Value::Null);
                            vi += 1;
                            cast_value(v, t)
                        }
                        FillMode::Linear => match (prev, next) {
                            (Some(p), Some(q)) => {
                                let (a, bb) = (b.columns[c].get(p), b.columns[c].get(q));
                                match (a.as_f64(), bb.as_f64()) {
                                    (Some(y0), Some(y1)) if t.is_numeric() => {
                                        let (x0, x1) = (win(p) as f64, win(q) as f64);
                                        let y = y0 + (y1 - y0) * (w as f64 - x0) / (x1 - x0);
                                        cast_value(Value::Float(y), t)
                                    }
                                    _ => Value::Null,
                                }
                            }
                            _ => Value::Null,
                        },
                    };
                    row[c] = v;
                }
                out.push(row);
            }
            w += step;
        }
        while i < e {
            out.push(b.row(i));
            i += 1;
        }
    }
    Ok(Batch::from_rows(b.fields.clone(), &out))
}

/// Converts a fill value to the column's type (integers truncate).
fn cast_value(v: Value, t: DataType) -> Value {
    match (t.physical(), &v) {
        (_, Value::Null) => Value::Null,
        (PhysicalType::Int, _) => v.as_f64().map(|f| Value::Int(f as i64)).unwrap_or(v),
        (PhysicalType::UInt, _) => v
            .as_f64()
            .map(|f| Value::UInt(f.max(0.0) as u64))
            .unwrap_or(v),
        (PhysicalType::Float, _) => v.as_f64().map(Value::Float).unwrap_or(v),
        (PhysicalType::Str, Value::Str(_)) => v,
        (PhysicalType::Str, _) => Value::Str(v.to_string()),
        _ => normalize(v, t),
    }
}

fn cmp_holds(op: BinOp, x: f64, v: f64) -> bool {
    match op {
        BinOp::Lt => x < v,
        BinOp::Gt => x > v,
        BinOp::LtEq => x <= v,
        BinOp::GtEq => x >= v,
        BinOp::NotEq => x != v,
        _ => x == v,
    }
}

/// [`crate::plan::Node::RowFunc`]: the input is sorted by (partition, ts).
// row indices address the input column, the timestamps and the output at once
#[allow(clippy::needless_range_loop)]
pub fn row_funcs(
    b: Batch,
    partition: &[usize],
    ts: usize,
    funcs: &[(usize, RowFn)],
) -> Result<Batch, SqlError> {
    let n = b.num_rows();
    let t = |i: usize| {
        b.columns
            .get(ts)
            .and_then(|c| c.get(i).as_i64())
            .unwrap_or(0)
    };
    // per function: the output value of each row, None = the row has no output
    let mut outs: Vec<Vec<Option<Value>>> = Vec::with_capacity(funcs.len());
    let mut types = Vec::with_capacity(funcs.len());
    for (col, f) in funcs {
        let c = b
            .columns
            .get(*col)
            .ok_or_else(|| SqlError::Execution(format!("row function input {col} missing")))?;
        let float = matches!(c.data, ColumnData::Float(_));
        let ty = match f {
            RowFn::Lag => b
                .fields
                .get(*col)
                .map(|f| f.data_type)
                .unwrap_or(DataType::Double),
            RowFn::Diff | RowFn::Csum if !float => DataType::BigInt,
            RowFn::StateCount(..) | RowFn::StateDuration(..) => DataType::BigInt,
            _ => DataType::Double,
        };
        types.push(ty);
        let mut o: Vec<Option<Value>> = vec![None; n];
        for (s, e) in runs(&b, partition) {
            match f {
                RowFn::Diff => {
                    for i in s + 1..e {
                        let (cur, prev) = (c.get(i), c.get(i - 1));
                        o[i] = Some(match (cur, prev) {
                            (Value::Null, _) | (_, Value::Null) => Value::Null,
                            (x, p) if float => {
                                Value::Float(x.as_f64().unwrap_or(0.0) - p.as_f64().unwrap_or(0.0))
                            }
                            (x, p) => Value::Int(
                                x.as_i64()
                                    .unwrap_or(0)
                                    .wrapping_sub(p.as_i64().unwrap_or(0)),
                            ),
                        });
                    }
                }
                RowFn::Derivative {
                    unit,
                    ignore_negative,
                } => {
                    let mut prev: Option<(i64, f64)> = None;
                    for i in s..e {
                        let Some(v) = c.get(i).as_f64() else { continue };
                        if let Some((pt, pv)) = prev {
                            if t(i) > pt {
                                let d = (v - pv) / (t(i) as f64 - pt as f64) * *unit as f64;
                                if !(*ignore_negative && d < 0.0) {
                                    o[i] = Some(Value::Float(d));
                                }
                            }
                        }
                        prev = Some((t(i), v));
                    }
                }
                RowFn::Lag => {
                    let mut last = Value::Null;
                    for i in s..e {
                        let v = c.get(i);
                        if !v.is_null() {
                            last = v;
                        }
                        o[i] = Some(last.clone());
                    }
                }
                RowFn::Csum => {
                    let (mut fi, mut ii) = (0.0f64, 0i64);
                    for i in s..e {
                        let v = c.get(i);
                        if v.is_null() {
                            continue;
                        }
                        o[i] = Some(if float {
                            fi += v.as_f64().unwrap_or(0.0);
                            Value::Float(fi)
                        } else {
                            ii = ii.wrapping_add(v.as_i64().unwrap_or(0));
                            Value::Int(ii)
                        });
                    }
                }
                RowFn::Mavg(k) => {
                    let mut win: std::collections::VecDeque<f64> = Default::default();
                    let mut sum = 0.0;
                    for i in s..e {
                        let Some(v) = c.get(i).as_f64() else { continue };
                        win.push_back(v);
                        sum += v;
                        if win.len() > *k {
                            sum -= win.pop_front().unwrap_or(0.0);
                        }
                        if win.len() == *k {
                            o[i] = Some(Value::Float(sum / *k as f64));
                        }
                    }
                }
                RowFn::StateCount(op, v) => {
                    let mut cnt = 0i64;
                    for i in s..e {
                        o[i] = Some(match c.get(i).as_f64() {
                            None => Value::Null,
                            Some(x) if cmp_holds(*op, x, *v) => {
                                cnt += 1;
                                Value::Int(cnt)
                            }
                            Some(_) => {
                                cnt = 0;
                                Value::Int(-1)
                            }
                        });
                    }
                }
                RowFn::StateDuration(op, v, unit) => {
                    let mut since: Option<i64> = None;
                    for i in s..e {
                        o[i] = Some(match c.get(i).as_f64() {
                            None => Value::Null,
                            Some(x) if cmp_holds(*op, x, *v) => {
                                let st = *since.get_or_insert(t(i));
                                Value::Int(t(i).saturating_sub(st) / (*unit).max(1))
                            }
                            Some(_) => {
                                since = None;
                                Value::Int(-1)
                            }
                        });
                    }
                }
            }
        }
        outs.push(o);
    }
    let keep: Vec<usize> = (0..n)
        .filter(|&i| outs.iter().all(|o| o[i].is_some()))
        .collect();
    let mut out = b.take(&keep);
    for (k, (col, _)) in funcs.iter().enumerate() {
        let mut c = Column::empty(types[k], keep.len());
        for &i in &keep {
            c.push(outs[k][i].as_ref().unwrap_or(&Value::Null));
        }
        if let Some(slot) = out.columns.get_mut(*col) {
            *slot = c;
        }
        if let Some(f) = out.fields.get_mut(*col) {
            f.data_type = types[k];
        }
    }
    Ok(out)
}

/// [`crate::plan::Node::SelectRows`]: the input is sorted by (partition, ts).
pub fn select_rows(
    b: Batch,
    partition: &[usize],
    ts: usize,
    col: usize,
    k: usize,
    mode: SelectMode,
) -> Result<Batch, SqlError> {
    let c = b
        .columns
        .get(col)
        .ok_or_else(|| SqlError::Execution(format!("selector input {col} missing")))?;
    let mut keep = Vec::new();
    for (s, e) in runs(&b, partition) {
        let mut cand: Vec<usize> = (s..e).filter(|i| !c.is_null(*i)).collect();
        match mode {
            SelectMode::Top | SelectMode::Bottom => {
                // stable sort: among equal values the earlier row wins
                cand.sort_by(|&x, &y| {
                    let o = c.get(x).total_cmp(&c.get(y));
                    if mode == SelectMode::Top {
                        o.reverse()
                    } else {
                        o
                    }
                });
                cand.truncate(k);
            }
            SelectMode::Sample => {
                // reservoir sampling with a fixed seed: repeatable answers for the same data
                let mut rng: u64 = 0x9E37_79B9_7F4A_7C15;
                let mut res: Vec<usize> = Vec::with_capacity(k);
                for (j, &r) in cand.iter().enumerate() {
                    if j < k {
                        res.push(r);
                    } else {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        let x = (rng % (j as u64 + 1)) as usize;
                        if x < k {
                            res[x] = r;
                        }
                    }
                }
                cand = res;
            }
            SelectMode::Unique => {
                // equal values side by side, each run's earliest row first (the sort is
                // stable and the rows are in time order); NULL is one value of its own
                let mut all: Vec<usize> = (s..e).collect();
                all.sort_by(|&x, &y| match (c.is_null(x), c.is_null(y)) {
                    (true, true) => Ordering::Equal,
                    (true, false) => Ordering::Less,
                    (false, true) => Ordering::Greater,
                    (false, false) => c.get(x).total_cmp(&c.get(y)),
                });
                cand = Vec::new();
                for (j, &r) in all.iter().enumerate() {
                    let same = j > 0 && {
                        let p = all[j - 1];
                        match (c.is_null(p), c.is_null(r)) {
                            (true, true) => true,
                            (false, false) => c.get(p).total_cmp(&c.get(r)) == Ordering::Equal,
                            _ => false,
                        }
                    };
                    if !same {
                        cand.push(r);
                    }
                }
            }
            SelectMode::Tail { offset } => {
                let end = e.saturating_sub(offset).max(s);
                cand = (end.saturating_sub(k).max(s)..end).collect();
            }
        }
        cand.sort_by_key(|&i| (b.columns.get(ts).and_then(|t| t.get(i).as_i64()), i));
        keep.extend(cand);
    }
    Ok(b.take(&keep))
}

/// [`crate::plan::Node::Distinct`].
pub fn distinct(b: Batch) -> Batch {
    let n = b.num_rows();
    let mut seen = std::collections::HashSet::new();
    let keep: Vec<usize> = (0..n)
        .filter(|&i| seen.insert(format!("{:?}", b.row(i))))
        .collect();
    if keep.len() == n {
        b
    } else {
        b.take(&keep)
    }
}

/// [`crate::plan::Node::SLimit`].
pub fn slimit(b: Batch, partition: &[usize], limit: u64, offset: u64) -> Batch {
    let mut keep = Vec::new();
    for (k, (s, e)) in runs(&b, partition).into_iter().enumerate() {
        let k = k as u64;
        if k >= offset && k - offset < limit {
            keep.extend(s..e);
        }
    }
    b.take(&keep)
}

/// [`crate::plan::Node::Interp`]: the input is sorted by (partition, ts).
#[allow(clippy::too_many_arguments)]
pub fn interp(
    b: Batch,
    partition: &[usize],
    ts: usize,
    cols: &[usize],
    start: i64,
    end: i64,
    every: i64,
    fill: Option<&FillMode>,
) -> Result<Batch, SqlError> {
    let every = every.max(1);
    let t = |i: usize| {
        b.columns
            .get(ts)
            .and_then(|c| c.get(i).as_i64())
            .unwrap_or(i64::MIN)
    };
    let mut out: Vec<Vec<Value>> = Vec::new();
    let width = b.columns.len();
    for (s, e) in runs(&b, partition) {
        // per interp column: its non-NULL (ts, value) points in time order
        let pts: Vec<Vec<(i64, Value)>> = cols
            .iter()
            .map(|c| {
                (s..e)
                    .filter(|i| !b.columns[*c].is_null(*i))
                    .map(|i| (t(i), b.columns[*c].get(i)))
                    .collect()
            })
            .collect();
        let mut p = start;
        while p <= end {
            let mut row = vec![Value::Null; width];
            for &k in partition {
                row[k] = b.columns[k].get(s);
            }
            row[ts] = Value::Timestamp(p);
            let mut any = false;
            for (j, &c) in cols.iter().enumerate() {
                let v = &pts[j];
                let at = v.partition_point(|x| x.0 < p);
                let exact = v.get(at).filter(|x| x.0 == p).map(|x| x.1.clone());
                let ty = b.fields[c].data_type;
                let val = match (exact, fill) {
                    (Some(x), _) => Some(x),
                    (None, None) => None,
                    (None, Some(FillMode::Null)) => Some(Value::Null),
                    (None, Some(FillMode::Value(vals))) => {
                        Some(cast_value(vals.get(j).cloned().unwrap_or(Value::Null), ty))
                    }
                    (None, Some(FillMode::Prev)) => at.checked_sub(1).map(|k| v[k].1.clone()),
                    (None, Some(FillMode::Next)) => v.get(at).map(|x| x.1.clone()),
                    (None, Some(FillMode::Linear)) => match (at.checked_sub(1), v.get(at)) {
                        (Some(k), Some(n)) => {
                            let (t0, y0) = (v[k].0, v[k].1.as_f64());
                            match (y0, n.1.as_f64()) {
                                (Some(y0), Some(y1)) if ty.is_numeric() => {
                                    let y = y0
                                        + (y1 - y0) * (p as f64 - t0 as f64)
                                            / (n.0 as f64 - t0 as f64);
                                    Some(cast_value(Value::Float(y), ty))
                                }
                                _ => None,
                            }
                        }
                        _ => None,
                    },
                };
                if let Some(x) = val {
                    any = true;
                    row[c] = x;
                }
            }
            if any {
                out.push(row);
            }
            p = match p.checked_add(every) {
                Some(n) => n,
                None => break,
            };
        }
    }
    Ok(Batch::from_rows(b.fields.clone(), &out))
}

/// [`crate::plan::Node::Histogram`].
pub fn histogram(
    b: Batch,
    partition: &[usize],
    col: usize,
    bins: &[f64],
    normalized: bool,
) -> Result<Batch, SqlError> {
    let c = b
        .columns
        .get(col)
        .ok_or_else(|| SqlError::Execution(format!("histogram input {col} missing")))?;
    let mut fields = b.fields.clone();
    if let Some(f) = fields.get_mut(col) {
        f.data_type = DataType::VarChar(128);
    }
    let mut out = Vec::new();
    for (s, e) in runs(&b, partition) {
        let mut counts = vec![0u64; bins.len().saturating_sub(1)];
        for i in s..e {
            let Some(x) = c.get(i).as_f64() else { continue };
            // bins are (lower, upper]: the first boundary >= x closes x's bin
            let k = bins.partition_point(|u| *u < x);
            if k >= 1 && k < bins.len() {
                counts[k - 1] += 1;
            }
        }
        let total: u64 = counts.iter().sum();
        for (k, n) in counts.iter().enumerate() {
            let mut row = b.row(s);
            let count = if normalized {
                let f = if total == 0 {
                    0.0
                } else {
                    *n as f64 / total as f64
                };
                format!("{f}")
            } else {
                n.to_string()
            };
            row[col] = Value::Str(format!(
                "{{\"lower_bin\":{}, \"upper_bin\":{}, \"count\":{count}}}",
                bins[k],
                bins[k + 1]
            ));
            out.push(row);
        }
    }
    Ok(Batch::from_rows(fields, &out))
}

/// [`crate::plan::Node::SlidePanes`].
pub fn slide_panes(b: Batch, key: usize, step: i64, count: i64) -> Result<Batch, SqlError> {
    let n = b.num_rows();
    let kc = b
        .columns
        .get(key)
        .ok_or_else(|| SqlError::Execution(format!("pane key {key} missing")))?;
    let count = count.max(1) as usize;
    let mut rows = Vec::with_capacity(n * count);
    let mut starts = Vec::with_capacity(n * count);
    for i in 0..n {
        let Some(p) = kc.get(i).as_i64() else {
            continue;
        };
        for j in 0..count {
            rows.push(i);
            starts.push(p.saturating_sub(step.saturating_mul(j as i64)));
        }
    }
    let mut out = b.take(&rows);
    if let Some(c) = out.columns.get_mut(key) {
        *c = Column::new(ColumnData::Timestamp(starts));
    }
    Ok(out)
}
