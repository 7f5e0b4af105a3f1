//! Hash aggregation with partial states: vnodes compute partials over raw rows, the
//! coordinator merges partials (COUNT summed, MIN of mins, AVG from sum + count, SPREAD from
//! min + max, STDDEV from count + sum + sum of squares, ELAPSED from the first and last
//! timestamp, selectors by their row key) and finalizes. Aggregates that are not mergeable
//! ([`AggFunc::is_mergeable`]) collect their group's (ts, value) pairs and only run on the
//! coordinator.

use crate::error::SqlError;
use crate::expr::{eval, f64s, PExpr};
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::collections::HashMap;
use tidal_common::types::PhysicalType;
use tidal_common::{Batch, Column, ColumnData, DataType, Field, Value};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AggFunc {
    CountStar,
    Count,
    Sum,
    Avg,
    Min,
    Max,
    First,
    Last,
    LastRow,
    /// Any value of the group (tags when the group is a single table).
    Any,
    /// A plain column next to a single selector: the value of the selected row.
    Carry,
    /// MAX - MIN as a DOUBLE (partials: min and max).
    Spread,
    /// Population standard deviation (partials: count, sum, sum of squares).
    Stddev,
    /// Last minus first timestamp of the argument (a timestamp), in `params[0]` units.
    Elapsed,
    /// The earliest / latest timestamp of the argument: `_wstart` / `_wend` of row-defined
    /// windows (state, session, event, count).
    TsMin,
    TsMax,
    // The following need all of a group's rows in one place: the planner runs them on the
    // coordinator over gathered rows, never as vnode partials.
    /// Time-weighted average (trapezoids between consecutive rows, divided by the span).
    Twa,
    /// Exact percentile `params[0]` (0..=100), linear between the closest ranks.
    Percentile,
    /// Approximate percentile; computed exactly here (a valid approximation).
    Apercentile,
    /// `{slop:.., intercept:..}` of the least-squares line through (start + i * step, value).
    Leastsquares,
    /// The most frequent non-NULL value (the smallest one on ties).
    Mode,
    /// Per-second rate between the last two rows (a counter reset counts from zero).
    Irate,
}

impl AggFunc {
    pub fn is_selector(self) -> bool {
        matches!(
            self,
            AggFunc::Min
                | AggFunc::Max
                | AggFunc::First
                | AggFunc::Last
                | AggFunc::LastRow
                | AggFunc::Any
        )
    }

    /// Whether vnodes can compute partial states that the coordinator merges.
    pub fn is_mergeable(self) -> bool {
        !matches!(
            self,
            AggFunc::Twa
                | AggFunc::Percentile
                | AggFunc::Apercentile
                | AggFunc::Leastsquares
                | AggFunc::Mode
                | AggFunc::Irate
        )
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AggSpec {
    pub func: AggFunc,
    /// The argument over the input (None for COUNT(*)).
    pub arg: Option<PExpr>,
    /// Selectors: the row order key (the timestamp); None = arrival order.
    pub ts: Option<PExpr>,
    /// Selectors: values carried from the selected row (single-selector rule).
    pub carry: Vec<PExpr>,
    /// Carry: (index of the selector spec, position in its `carry`).
    pub carry_of: Option<(usize, usize)>,
    /// Result type.
    pub out_type: DataType,
    /// Constant arguments after the first (PERCENTILE's p, ELAPSED's unit, ...).
    #[serde(default)]
    pub params: Vec<Value>,
}

impl AggSpec {
    fn arg_type(&self) -> DataType {
        self.arg
            .as_ref()
            .map(PExpr::data_type)
            .unwrap_or(DataType::BigInt)
    }

    /// Types of the partial-state columns this aggregate contributes.
    pub fn partial_fields(&self, idx: usize) -> Vec<Field> {
        let n = |s: &str| format!("_p{idx}_{s}");
        match self.func {
            AggFunc::CountStar | AggFunc::Count => vec![Field::new(n("count"), DataType::BigInt)],
            AggFunc::Sum => vec![Field::new(n("sum"), self.out_type)],
            AggFunc::Avg => vec![
                Field::new(n("sum"), DataType::Double),
                Field::new(n("count"), DataType::BigInt),
            ],
            AggFunc::Carry => vec![],
            AggFunc::Spread => vec![
                Field::new(n("min"), DataType::Double),
                Field::new(n("max"), DataType::Double),
            ],
            AggFunc::Stddev => vec![
                Field::new(n("count"), DataType::BigInt),
                Field::new(n("sum"), DataType::Double),
                Field::new(n("sumsq"), DataType::Double),
            ],
            AggFunc::Elapsed | AggFunc::TsMin | AggFunc::TsMax => vec![
                Field::new(n("first"), DataType::Timestamp),
                Field::new(n("last"), DataType::Timestamp),
            ],
            f if !f.is_mergeable() => vec![],
            _ => {
                let mut v = vec![
                    Field::new(n("ts"), DataType::Timestamp),
                    Field::new(n("value"), self.arg_type()),
                ];
                for (k, c) in self.carry.iter().enumerate() {
                    v.push(Field::new(n(&format!("carry{k}")), c.data_type()));
                }
                v
            }
        }
    }
}

/// Statistics of one aggregate's argument over a block of rows (from the storage's SMA):
/// `rows` in the block, `count` non-NULL values, min/max/sum (NULL when unknown), `any` = the
/// value of a constant argument (a tag), `ts` = the block's first timestamp (the row key MIN
/// and MAX report; only their values are observable since they carry no columns here).
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub rows: u64,
    pub count: u64,
    pub min: Value,
    pub max: Value,
    pub sum: Value,
    pub any: Value,
    pub ts: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum HKey {
    Null,
    B(bool),
    I(i64),
    U(u64),
    F(u64),
    S(String),
}

fn hkey(v: Value) -> HKey {
    match v {
        Value::Null => HKey::Null,
        Value::Bool(b) => HKey::B(b),
        Value::Int(i) | Value::Timestamp(i) => HKey::I(i),
        Value::UInt(u) => HKey::U(u),
        Value::Float(f) => HKey::F(if f == 0.0 { 0 } else { f.to_bits() }),
        Value::Str(s) => HKey::S(s),
    }
}

#[derive(Clone, Debug)]
struct Sel {
    ts: i64,
    value: Value,
    carry: Vec<Value>,
}

enum State {
    Count(Vec<i64>),
    SumI(Vec<i64>, Vec<bool>),
    SumF(Vec<f64>, Vec<bool>),
    Avg(Vec<f64>, Vec<i64>),
    Sel(Vec<Option<Sel>>),
    /// Spread: min and max (NaN-free; None = no value yet).
    MinMax(Vec<Option<(f64, f64)>>),
    /// Stddev: count, sum, sum of squares.
    Moments(Vec<(i64, f64, f64)>),
    /// Elapsed / TsMin / TsMax: first and last timestamp.
    Span(Vec<Option<(i64, i64)>>),
    /// Coordinator-only aggregates: every (ts, value) of the group.
    Collect(Vec<Vec<(i64, Value)>>),
    None,
}

pub struct Aggregator {
    specs: Vec<AggSpec>,
    key_types: Vec<DataType>,
    map: HashMap<Vec<HKey>, usize>,
    keys: Vec<Vec<Value>>,
    states: Vec<State>,
    seq: i64,
}

/// Whether candidate (ts, value, carry) should replace the current selection.
fn better(func: AggFunc, cts: i64, cv: &Value, ccarry: &[Value], cur: &Sel) -> bool {
    let tie = || {
        cv.total_cmp(&cur.value).then_with(|| {
            for (a, b) in ccarry.iter().zip(cur.carry.iter()) {
                let o = a.total_cmp(b);
                if o != Ordering::Equal {
                    return o;
                }
            }
            Ordering::Equal
        })
    };
    match func {
        AggFunc::First => cts < cur.ts || (cts == cur.ts && tie() == Ordering::Less),
        AggFunc::Last | AggFunc::LastRow => {
            cts > cur.ts || (cts == cur.ts && tie() == Ordering::Greater)
        }
        AggFunc::Min => match cv.total_cmp(&cur.value) {
            Ordering::Less => true,
            Ordering::Equal => cts < cur.ts,
            Ordering::Greater => false,
        },
        AggFunc::Max => match cv.total_cmp(&cur.value) {
            Ordering::Greater => true,
            Ordering::Equal => cts < cur.ts,
            Ordering::Less => false,
        },
        _ => false,
    }
}

/// Whether rows i and j of a column hold the same value (NULLs equal each other).
fn eq_rows(c: &Column, i: usize, j: usize) -> bool {
    let (ni, nj) = (c.is_null(i), c.is_null(j));
    if ni || nj {
        return ni && nj;
    }
    match &c.data {
        ColumnData::Float(v) => v.get(i).map(|x| x.to_bits()) == v.get(j).map(|x| x.to_bits()),
        ColumnData::Int(v) | ColumnData::Timestamp(v) => v.get(i) == v.get(j),
        ColumnData::UInt(v) => v.get(i) == v.get(j),
        ColumnData::Bool(v) => v.get(i) == v.get(j),
        ColumnData::Str(v) => v.get(i) == v.get(j),
    }
}

/// Compares rows i and j of one column (no NULLs expected).
fn cmp_in(c: &Column, i: usize, j: usize) -> Ordering {
    match &c.data {
        ColumnData::Float(v) => v[i].total_cmp(&v[j]),
        ColumnData::Int(v) | ColumnData::Timestamp(v) => v[i].cmp(&v[j]),
        ColumnData::UInt(v) => v[i].cmp(&v[j]),
        ColumnData::Bool(v) => v[i].cmp(&v[j]),
        ColumnData::Str(v) => v[i].cmp(&v[j]),
    }
}

impl Aggregator {
    pub fn new(key_types: Vec<DataType>, specs: Vec<AggSpec>) -> Aggregator {
        let states = specs
            .iter()
            .map(|s| match s.func {
                AggFunc::CountStar | AggFunc::Count => State::Count(Vec::new()),
                AggFunc::Sum if s.out_type.physical() == PhysicalType::Float => {
                    State::SumF(Vec::new(), Vec::new())
                }
                AggFunc::Sum => State::SumI(Vec::new(), Vec::new()),
                AggFunc::Avg => State::Avg(Vec::new(), Vec::new()),
                AggFunc::Carry => State::None,
                AggFunc::Spread => State::MinMax(Vec::new()),
                AggFunc::Stddev => State::Moments(Vec::new()),
                AggFunc::Elapsed | AggFunc::TsMin | AggFunc::TsMax => State::Span(Vec::new()),
                f if !f.is_mergeable() => State::Collect(Vec::new()),
                _ => State::Sel(Vec::new()),
            })
            .collect();
        Aggregator {
            specs,
            key_types,
            map: HashMap::new(),
            keys: Vec::new(),
            states,
            seq: 0,
        }
    }

    fn add_group(&mut self, key: Vec<Value>) -> usize {
        let g = self.keys.len();
        self.keys.push(key);
        for s in &mut self.states {
            match s {
                State::Count(v) => v.push(0),
                State::SumI(v, h) => {
                    v.push(0);
                    h.push(false)
                }
                State::SumF(v, h) => {
                    v.push(0.0);
                    h.push(false)
                }
                State::Avg(v, c) => {
                    v.push(0.0);
                    c.push(0)
                }
                State::Sel(v) => v.push(None),
                State::MinMax(v) => v.push(None),
                State::Moments(v) => v.push((0, 0.0, 0.0)),
                State::Span(v) => v.push(None),
                State::Collect(v) => v.push(Vec::new()),
                State::None => {}
            }
        }
        g
    }

    fn group_ids(&mut self, key_cols: &[Column], n: usize) -> Vec<usize> {
        if key_cols.is_empty() {
            if self.keys.is_empty() && n > 0 {
                self.add_group(Vec::new());
            }
            return vec![0; n];
        }
        let mut out: Vec<usize> = Vec::with_capacity(n);
        for i in 0..n {
            // rows of one subtable / one window come in runs: reuse the previous group
            if i > 0 && key_cols.iter().all(|c| eq_rows(c, i, i - 1)) {
                out.push(out[i - 1]);
                continue;
            }
            let vals: Vec<Value> = key_cols.iter().map(|c| c.get(i)).collect();
            let hk: Vec<HKey> = vals.iter().cloned().map(hkey).collect();
            let g = match self.map.get(&hk) {
                Some(g) => *g,
                None => {
                    let g = self.add_group(vals);
                    self.map.insert(hk, g);
                    g
                }
            };
            out.push(g);
        }
        out
    }

    /// Feeds raw input rows.
    pub fn update(&mut self, keys: &[PExpr], cols: &[Column], n: usize) -> Result<(), SqlError> {
        if n == 0 {
            return Ok(());
        }
        let key_cols = keys
            .iter()
            .map(|k| eval(k, cols, n))
            .collect::<Result<Vec<_>, _>>()?;
        let gids = self.group_ids(&key_cols, n);
        let specs = self.specs.clone();
        for (si, spec) in specs.iter().enumerate() {
            let arg = match &spec.arg {
                Some(a) => Some(eval(a, cols, n)?),
                None => None,
            };
            match &mut self.states[si] {
                State::Count(v) => match &arg {
                    Some(c) if spec.func == AggFunc::Count => {
                        for (i, g) in gids.iter().enumerate() {
                            if !c.is_null(i) {
                                v[*g] += 1;
                            }
                        }
                    }
                    _ => {
                        for g in &gids {
                            v[*g] += 1;
                        }
                    }
                },
                State::SumI(v, h) => {
                    if let Some(c) = &arg {
                        for (i, g) in gids.iter().enumerate() {
                            if !c.is_null(i) {
                                v[*g] = v[*g].wrapping_add(c.get(i).as_i64().unwrap_or(0));
                                h[*g] = true;
                            }
                        }
                    }
                }
                State::SumF(v, h) => {
                    if let Some(c) = &arg {
                        let x = f64s(c).ok_or_else(|| {
                            SqlError::TypeMismatch("SUM needs a numeric argument".into())
                        })?;
                        for (i, g) in gids.iter().enumerate() {
                            if !c.is_null(i) {
                                v[*g] += x[i];
                                h[*g] = true;
                            }
                        }
                    }
                }
                State::Avg(v, cnt) => {
                    if let Some(c) = &arg {
                        let x = f64s(c).ok_or_else(|| {
                            SqlError::TypeMismatch("AVG needs a numeric argument".into())
                        })?;
                        for (i, g) in gids.iter().enumerate() {
                            if !c.is_null(i) {
                                v[*g] += x[i];
                                cnt[*g] += 1;
                            }
                        }
                    }
                }
                State::MinMax(v) => {
                    let Some(c) = &arg else { continue };
                    let x = f64s(c).ok_or_else(|| {
                        SqlError::TypeMismatch("SPREAD needs a numeric argument".into())
                    })?;
                    for (i, g) in gids.iter().enumerate() {
                        if !c.is_null(i) {
                            v[*g] = Some(match v[*g] {
                                None => (x[i], x[i]),
                                Some((lo, hi)) => (lo.min(x[i]), hi.max(x[i])),
                            });
                        }
                    }
                }
                State::Moments(v) => {
                    let Some(c) = &arg else { continue };
                    let x = f64s(c).ok_or_else(|| {
                        SqlError::TypeMismatch("STDDEV needs a numeric argument".into())
                    })?;
                    for (i, g) in gids.iter().enumerate() {
                        if !c.is_null(i) {
                            let m = &mut v[*g];
                            m.0 += 1;
                            m.1 += x[i];
                            m.2 += x[i] * x[i];
                        }
                    }
                }
                State::Span(v) => {
                    let Some(c) = &arg else { continue };
                    for (i, g) in gids.iter().enumerate() {
                        let Some(t) = c.get(i).as_i64() else { continue };
                        v[*g] = Some(match v[*g] {
                            None => (t, t),
                            Some((lo, hi)) => (lo.min(t), hi.max(t)),
                        });
                    }
                }
                State::Collect(v) => {
                    let Some(c) = &arg else { continue };
                    let ts = match &spec.ts {
                        Some(t) => Some(eval(t, cols, n)?),
                        None => None,
                    };
                    for (i, g) in gids.iter().enumerate() {
                        if c.is_null(i) {
                            continue;
                        }
                        let t = match &ts {
                            Some(tc) => tc.get(i).as_i64().unwrap_or(i64::MIN),
                            None => self.seq + i as i64,
                        };
                        v[*g].push((t, c.get(i)));
                    }
                }
                State::Sel(_) => {
                    let Some(c) = &arg else { continue };
                    let ts: Vec<i64> = match &spec.ts {
                        Some(t) => {
                            let tc = eval(t, cols, n)?;
                            (0..n)
                                .map(|i| tc.get(i).as_i64().unwrap_or(i64::MIN))
                                .collect()
                        }
                        None => (0..n as i64).map(|i| self.seq + i).collect(),
                    };
                    let carry_cols = spec
                        .carry
                        .iter()
                        .map(|e| eval(e, cols, n))
                        .collect::<Result<Vec<_>, _>>()?;
                    let skip_null = !matches!(spec.func, AggFunc::LastRow | AggFunc::Any);
                    // Best row per group within this batch. Only the groups this batch
                    // touches are visited: a per-group array would cost O(all groups) per
                    // batch, quadratic when every subtable is its own group.
                    let mut slot: HashMap<usize, usize> = HashMap::new();
                    let mut best: Vec<(usize, Option<usize>)> = Vec::new();
                    for (i, g) in gids.iter().enumerate() {
                        if skip_null && c.is_null(i) {
                            continue;
                        }
                        let k = *slot.entry(*g).or_insert_with(|| {
                            best.push((*g, None));
                            best.len() - 1
                        });
                        let replace = match best[k].1 {
                            None => true,
                            Some(j) => match spec.func {
                                AggFunc::First => ts[i] < ts[j],
                                AggFunc::Last | AggFunc::LastRow => {
                                    ts[i] > ts[j]
                                        || (ts[i] == ts[j]
                                            && (c.get(i).total_cmp(&c.get(j)) == Ordering::Greater))
                                }
                                AggFunc::Min => cmp_in(c, i, j) == Ordering::Less,
                                AggFunc::Max => cmp_in(c, i, j) == Ordering::Greater,
                                _ => false,
                            },
                        };
                        if replace {
                            best[k].1 = Some(i);
                        }
                    }
                    let State::Sel(st) = &mut self.states[si] else {
                        continue;
                    };
                    for &(g, b) in &best {
                        let Some(i) = b else { continue };
                        let cv = c.get(i);
                        let cc: Vec<Value> = carry_cols.iter().map(|k| k.get(i)).collect();
                        let take = match &st[g] {
                            None => true,
                            Some(cur) => better(spec.func, ts[i], &cv, &cc, cur),
                        };
                        if take {
                            st[g] = Some(Sel {
                                ts: ts[i],
                                value: cv,
                                carry: cc,
                            });
                        }
                    }
                }
                State::None => {}
            }
        }
        self.seq += n as i64;
        Ok(())
    }

    /// Feeds the statistics of a block of rows that all fall into the group of row 0 of
    /// `key_cols` (one [`Summary`] per aggregate). Returns `false`, changing nothing, when an
    /// aggregate needs a statistic the summary lacks (the caller then feeds the rows).
    pub fn update_summary(
        &mut self,
        nkeys: usize,
        key_cols: &[Column],
        sums: &[Summary],
    ) -> Result<bool, SqlError> {
        if sums.len() != self.specs.len() || key_cols.len() != nkeys {
            return Ok(false);
        }
        let known = |f: AggFunc| {
            matches!(
                f,
                AggFunc::CountStar
                    | AggFunc::Count
                    | AggFunc::Sum
                    | AggFunc::Avg
                    | AggFunc::Min
                    | AggFunc::Max
                    | AggFunc::First
                    | AggFunc::Last
                    | AggFunc::LastRow
                    | AggFunc::Any
                    | AggFunc::Carry
            )
        };
        if !self.specs.iter().all(|s| known(s.func)) {
            return Ok(false);
        }
        for (spec, s) in self.specs.iter().zip(sums) {
            let needs_sum = matches!(spec.func, AggFunc::Sum | AggFunc::Avg);
            if needs_sum && s.count > 0 && s.sum.is_null() {
                return Ok(false);
            }
        }
        if sums.iter().all(|s| s.rows == 0) {
            return Ok(true);
        }
        let first: Vec<Column> = key_cols.iter().map(|c| c.slice(0, 1)).collect();
        let g = self.group_ids(&first, 1).first().copied().unwrap_or(0);
        let specs = self.specs.clone();
        for (si, spec) in specs.iter().enumerate() {
            let Some(s) = sums.get(si) else { continue };
            match &mut self.states[si] {
                State::Count(v) => v[g] += s.count as i64,
                State::SumI(v, h) => {
                    if s.count > 0 {
                        v[g] = v[g].wrapping_add(s.sum.as_i64().unwrap_or(0));
                        h[g] = true;
                    }
                }
                State::SumF(v, h) => {
                    if s.count > 0 {
                        v[g] += s.sum.as_f64().unwrap_or(0.0);
                        h[g] = true;
                    }
                }
                State::Avg(v, c) => {
                    if s.count > 0 {
                        v[g] += s.sum.as_f64().unwrap_or(0.0);
                        c[g] += s.count as i64;
                    }
                }
                State::Sel(st) => {
                    let value = match spec.func {
                        AggFunc::Min => s.min.clone(),
                        AggFunc::Max => s.max.clone(),
                        _ => s.any.clone(),
                    };
                    if value.is_null() && spec.func != AggFunc::Any {
                        continue;
                    }
                    let take = match &st[g] {
                        None => true,
                        Some(cur) => better(spec.func, s.ts, &value, &[], cur),
                    };
                    if take {
                        st[g] = Some(Sel {
                            ts: s.ts,
                            value,
                            carry: Vec::new(),
                        });
                    }
                }
                State::MinMax(_) | State::Moments(_) | State::Span(_) | State::Collect(_) => {}
                State::None => {}
            }
        }
        Ok(true)
    }

    /// Merges a batch of partial states (key columns first, then each spec's partial columns).
    pub fn merge(&mut self, b: &Batch) -> Result<(), SqlError> {
        let n = b.num_rows();
        if n == 0 {
            return Ok(());
        }
        let nk = self.key_types.len();
        if b.columns.len() < nk {
            return Err(SqlError::Execution(
                "partial batch has too few columns".into(),
            ));
        }
        let gids = self.group_ids(&b.columns[..nk], n);
        let mut at = nk;
        let specs = self.specs.clone();
        let col = |k: usize| -> Result<&Column, SqlError> {
            b.columns
                .get(k)
                .ok_or_else(|| SqlError::Execution("partial batch has too few columns".into()))
        };
        for (si, spec) in specs.iter().enumerate() {
            let width = spec.partial_fields(si).len();
            match &mut self.states[si] {
                State::Count(v) => {
                    let c = col(at)?;
                    for (i, g) in gids.iter().enumerate() {
                        v[*g] += c.get(i).as_i64().unwrap_or(0);
                    }
                }
                State::SumI(v, h) => {
                    let c = col(at)?;
                    for (i, g) in gids.iter().enumerate() {
                        if !c.is_null(i) {
                            v[*g] = v[*g].wrapping_add(c.get(i).as_i64().unwrap_or(0));
                            h[*g] = true;
                        }
                    }
                }
                State::SumF(v, h) => {
                    let c = col(at)?;
                    for (i, g) in gids.iter().enumerate() {
                        if !c.is_null(i) {
                            v[*g] += c.get(i).as_f64().unwrap_or(0.0);
                            h[*g] = true;
                        }
                    }
                }
                State::Avg(v, cnt) => {
                    let (s, c) = (col(at)?, col(at + 1)?);
                    for (i, g) in gids.iter().enumerate() {
                        v[*g] += s.get(i).as_f64().unwrap_or(0.0);
                        cnt[*g] += c.get(i).as_i64().unwrap_or(0);
                    }
                }
                State::MinMax(v) => {
                    let (lo, hi) = (col(at)?, col(at + 1)?);
                    for (i, g) in gids.iter().enumerate() {
                        let (Some(a), Some(b)) = (lo.get(i).as_f64(), hi.get(i).as_f64()) else {
                            continue;
                        };
                        v[*g] = Some(match v[*g] {
                            None => (a, b),
                            Some((x, y)) => (x.min(a), y.max(b)),
                        });
                    }
                }
                State::Moments(v) => {
                    let (c, s1, s2) = (col(at)?, col(at + 1)?, col(at + 2)?);
                    for (i, g) in gids.iter().enumerate() {
                        let m = &mut v[*g];
                        m.0 += c.get(i).as_i64().unwrap_or(0);
                        m.1 += s1.get(i).as_f64().unwrap_or(0.0);
                        m.2 += s2.get(i).as_f64().unwrap_or(0.0);
                    }
                }
                State::Span(v) => {
                    let (lo, hi) = (col(at)?, col(at + 1)?);
                    for (i, g) in gids.iter().enumerate() {
                        let (Some(a), Some(b)) = (lo.get(i).as_i64(), hi.get(i).as_i64()) else {
                            continue;
                        };
                        v[*g] = Some(match v[*g] {
                            None => (a, b),
                            Some((x, y)) => (x.min(a), y.max(b)),
                        });
                    }
                }
                State::Collect(_) => {
                    return Err(SqlError::Execution(format!(
                        "{:?} cannot be merged from vnode partials",
                        spec.func
                    )))
                }
                State::Sel(st) => {
                    let tsc = col(at)?;
                    let vc = col(at + 1)?;
                    for (i, g) in gids.iter().enumerate() {
                        if tsc.is_null(i) {
                            continue; // the group had no selected row on that vnode
                        }
                        let ts = tsc.get(i).as_i64().unwrap_or(i64::MIN);
                        let cv = vc.get(i);
                        let mut cc = Vec::with_capacity(spec.carry.len());
                        for k in 0..spec.carry.len() {
                            cc.push(col(at + 2 + k)?.get(i));
                        }
                        let take = match &st[*g] {
                            None => true,
                            Some(cur) => better(spec.func, ts, &cv, &cc, cur),
                        };
                        if take {
                            st[*g] = Some(Sel {
                                ts,
                                value: cv,
                                carry: cc,
                            });
                        }
                    }
                }
                State::None => {}
            }
            at += width;
        }
        Ok(())
    }

    fn key_fields(&self) -> Vec<Field> {
        self.key_types
            .iter()
            .enumerate()
            .map(|(i, t)| Field::new(format!("_k{i}"), *t))
            .collect()
    }

    /// The partial states: key columns then each spec's partial columns.
    pub fn partial(&self) -> Batch {
        let mut fields = self.key_fields();
        for (i, s) in self.specs.iter().enumerate() {
            fields.extend(s.partial_fields(i));
        }
        let rows: Vec<Vec<Value>> = (0..self.keys.len())
            .map(|g| {
                let mut r = self.keys[g].clone();
                for (st, spec) in self.states.iter().zip(self.specs.iter()) {
                    match st {
                        State::Count(v) => r.push(Value::Int(v[g])),
                        State::SumI(v, h) => {
                            r.push(if h[g] { Value::Int(v[g]) } else { Value::Null })
                        }
                        State::SumF(v, h) => r.push(if h[g] {
                            Value::Float(v[g])
                        } else {
                            Value::Null
                        }),
                        State::Avg(v, c) => {
                            r.push(Value::Float(v[g]));
                            r.push(Value::Int(c[g]));
                        }
                        State::MinMax(v) => match v[g] {
                            Some((a, b)) => {
                                r.push(Value::Float(a));
                                r.push(Value::Float(b));
                            }
                            None => r.extend([Value::Null, Value::Null]),
                        },
                        State::Moments(v) => {
                            r.push(Value::Int(v[g].0));
                            r.push(Value::Float(v[g].1));
                            r.push(Value::Float(v[g].2));
                        }
                        State::Span(v) => match v[g] {
                            Some((a, b)) => {
                                r.push(Value::Timestamp(a));
                                r.push(Value::Timestamp(b));
                            }
                            None => r.extend([Value::Null, Value::Null]),
                        },
                        State::Collect(_) => {}
                        State::Sel(v) => match &v[g] {
                            Some(s) => {
                                r.push(Value::Timestamp(s.ts));
                                r.push(s.value.clone());
                                r.extend(s.carry.iter().cloned());
                            }
                            None => {
                                let width = 2 + spec.carry.len();
                                r.extend(std::iter::repeat_n(Value::Null, width));
                            }
                        },
                        State::None => {}
                    }
                }
                r
            })
            .collect();
        Batch::from_rows(fields, &rows)
    }

    /// Final results: key columns then one column per spec.
    pub fn finish(mut self, global_default_row: bool) -> Batch {
        if self.keys.is_empty()
            && self.key_types.is_empty()
            && global_default_row
            // As TDengine 3: COUNT of nothing is 0 and MIN/MAX/SUM/AVG... are NULL, in one
            // row; FIRST/LAST/LAST_ROW (and plain columns beside them) of nothing is no row.
            && !self.specs.iter().any(|s| {
                matches!(
                    s.func,
                    AggFunc::First | AggFunc::Last | AggFunc::LastRow | AggFunc::Any
                )
            })
        {
            self.add_group(Vec::new());
        }
        let mut fields = self.key_fields();
        for (i, s) in self.specs.iter().enumerate() {
            fields.push(Field::new(format!("_a{i}"), s.out_type));
        }
        let rows: Vec<Vec<Value>> = (0..self.keys.len())
            .map(|g| {
                let mut r = self.keys[g].clone();
                for (si, spec) in self.specs.iter().enumerate() {
                    let v = match &self.states[si] {
                        State::Count(v) => Value::Int(v[g]),
                        State::SumI(v, h) => {
                            if h[g] {
                                Value::Int(v[g])
                            } else {
                                Value::Null
                            }
                        }
                        State::SumF(v, h) => {
                            if h[g] {
                                Value::Float(v[g])
                            } else {
                                Value::Null
                            }
                        }
                        State::Avg(v, c) => {
                            if c[g] > 0 {
                                Value::Float(v[g] / c[g] as f64)
                            } else {
                                Value::Null
                            }
                        }
                        State::Sel(v) => v[g]
                            .as_ref()
                            .map(|s| s.value.clone())
                            .unwrap_or(Value::Null),
                        State::MinMax(v) => match v[g] {
                            Some((a, b)) => Value::Float(b - a),
                            None => Value::Null,
                        },
                        State::Moments(v) => {
                            let (c, s1, s2) = v[g];
                            if c == 0 {
                                Value::Null
                            } else {
                                let mean = s1 / c as f64;
                                Value::Float((s2 / c as f64 - mean * mean).max(0.0).sqrt())
                            }
                        }
                        State::Span(v) => match (v[g], spec.func) {
                            (None, _) => Value::Null,
                            (Some((a, _)), AggFunc::TsMin) => Value::Timestamp(a),
                            (Some((_, b)), AggFunc::TsMax) => Value::Timestamp(b),
                            (Some((a, b)), _) => {
                                let unit = spec
                                    .params
                                    .first()
                                    .and_then(Value::as_f64)
                                    .filter(|u| *u > 0.0)
                                    .unwrap_or(1.0);
                                Value::Float((b - a) as f64 / unit)
                            }
                        },
                        State::Collect(v) => finish_collected(spec, &v[g]),
                        State::None => match spec.carry_of {
                            Some((sel, k)) => match self.states.get(sel) {
                                Some(State::Sel(v)) => v[g]
                                    .as_ref()
                                    .and_then(|s| s.carry.get(k).cloned())
                                    .unwrap_or(Value::Null),
                                _ => Value::Null,
                            },
                            None => Value::Null,
                        },
                    };
                    r.push(normalize(v, spec.out_type));
                }
                r
            })
            .collect();
        Batch::from_rows(fields, &rows)
    }
}

/// Finalizes a coordinator-only aggregate over all of its group's (ts, value) pairs.
fn finish_collected(spec: &AggSpec, rows: &[(i64, Value)]) -> Value {
    if rows.is_empty() {
        return Value::Null;
    }
    let mut rows: Vec<(i64, Value)> = rows.to_vec();
    // by time; equal timestamps (rows of different subtables) by value, so that the answer
    // does not depend on the order in which vnode results arrived
    rows.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.total_cmp(&b.1)));
    let nums = || -> Vec<(i64, f64)> {
        rows.iter()
            .filter_map(|(t, v)| v.as_f64().map(|f| (*t, f)))
            .collect()
    };
    let param = |k: usize| spec.params.get(k).and_then(Value::as_f64);
    match spec.func {
        AggFunc::Twa => {
            let x = nums();
            let (Some(first), Some(last)) = (x.first(), x.last()) else {
                return Value::Null;
            };
            if last.0 == first.0 {
                return Value::Float(first.1);
            }
            let area: f64 = x
                .windows(2)
                .map(|w| (w[1].0 - w[0].0) as f64 * (w[0].1 + w[1].1) / 2.0)
                .sum();
            Value::Float(area / (last.0 - first.0) as f64)
        }
        AggFunc::Percentile | AggFunc::Apercentile => {
            let mut v: Vec<f64> = nums().into_iter().map(|p| p.1).collect();
            if v.is_empty() {
                return Value::Null;
            }
            v.sort_by(|a, b| a.total_cmp(b));
            let p = param(0).unwrap_or(50.0).clamp(0.0, 100.0) / 100.0;
            let pos = p * (v.len() - 1) as f64;
            let lo = pos.floor() as usize;
            let hi = pos.ceil() as usize;
            let (a, b) = (v[lo], v[hi.min(v.len() - 1)]);
            Value::Float(a + (b - a) * (pos - lo as f64))
        }
        AggFunc::Leastsquares => {
            let (start, step) = (param(0).unwrap_or(1.0), param(1).unwrap_or(1.0));
            let ys: Vec<f64> = nums().into_iter().map(|p| p.1).collect();
            let n = ys.len() as f64;
            let (mut sx, mut sy, mut sxx, mut sxy) = (0.0, 0.0, 0.0, 0.0);
            for (i, y) in ys.iter().enumerate() {
                let x = start + step * i as f64;
                sx += x;
                sy += y;
                sxx += x * x;
                sxy += x * y;
            }
            let d = n * sxx - sx * sx;
            if d == 0.0 {
                return Value::Null;
            }
            let slop = (n * sxy - sx * sy) / d;
            let intercept = (sy - slop * sx) / n;
            Value::Str(format!("{{slop:{slop:.6}, intercept:{intercept:.6}}}"))
        }
        AggFunc::Mode => {
            let mut vals: Vec<Value> = rows.into_iter().map(|r| r.1).collect();
            vals.sort_by(|a, b| a.total_cmp(b));
            let mut best: Option<(usize, Value)> = None;
            let mut i = 0;
            while i < vals.len() {
                let mut j = i + 1;
                while j < vals.len() && vals[j].total_cmp(&vals[i]) == Ordering::Equal {
                    j += 1;
                }
                if best.as_ref().is_none_or(|b| j - i > b.0) {
                    best = Some((j - i, vals[i].clone()));
                }
                i = j;
            }
            best.map(|b| b.1).unwrap_or(Value::Null)
        }
        AggFunc::Irate => {
            let x = nums();
            if x.len() < 2 {
                return Value::Float(0.0);
            }
            let (a, b) = (x[x.len() - 2], x[x.len() - 1]);
            let unit = param(0).unwrap_or(1000.0).max(1.0);
            let dt = (b.0 - a.0) as f64 / unit;
            if dt <= 0.0 {
                return Value::Float(0.0);
            }
            let delta = if b.1 < a.1 { b.1 } else { b.1 - a.1 };
            Value::Float(delta / dt)
        }
        _ => Value::Null,
    }
}

/// Makes a value match the physical type of its column.
pub fn normalize(v: Value, t: DataType) -> Value {
    match (t.physical(), v) {
        (PhysicalType::Timestamp, Value::Int(x)) => Value::Timestamp(x),
        (PhysicalType::Int, Value::Timestamp(x)) => Value::Int(x),
        (PhysicalType::Float, Value::Int(x)) => Value::Float(x as f64),
        (_, v) => v,
    }
}
