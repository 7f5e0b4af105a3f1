//! Hash aggregation with partial states: vnodes compute partials over raw rows, the
//! coordinator merges partials (COUNT summed, MIN of mins, AVG from sum + count, SPREAD from
//! min + max, STDDEV from count + sum + sum of squares, ELAPSED from the first and last
//! timestamp, selectors by their row key) and finalizes. Aggregates that are not mergeable
//! ([`AggFunc::is_mergeable`]) collect their group's (ts, value) pairs and only run on the
//! coordinator.

use crate::error::SqlError;
use crate::expr::{eval, eval_cow, f64s, PExpr};
use crate::hll::{self, Hll};
use hashbrown::HashTable;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::cmp::Ordering;
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
    /// Population standard deviation (partials: count, mean, sum of squared deviations from
    /// the mean; merged with Chan's formula, so equal values give exactly 0, which a sum of
    /// squares minus the squared sum does not).
    Stddev,
    /// Last minus first timestamp of the argument (a timestamp), in `params[0]` units.
    Elapsed,
    /// The earliest / latest timestamp of the argument: `_wstart` / `_wend` of row-defined
    /// windows (state, session, event, count).
    TsMin,
    TsMax,
    /// Approximate count of distinct non-NULL values (partials: a HyperLogLog sketch).
    HyperLogLog,
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
    /// `COUNT(DISTINCT x)`: the exact number of distinct non-NULL values.
    CountDistinct,
    /// `GROUP_CONCAT(x, .., sep)`: the non-NULL values in time order (equal timestamps by
    /// value), joined by `params[0]`; at most [`GROUP_CONCAT_BYTES_MAX`] bytes of whole
    /// values.
    GroupConcat,
}

/// The longest GROUP_CONCAT result: a row of a result stays bounded (as REPEAT's).
pub const GROUP_CONCAT_BYTES_MAX: usize = 1 << 16;

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
                | AggFunc::CountDistinct
                | AggFunc::GroupConcat
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
                Field::new(n("mean"), DataType::Double),
                Field::new(n("m2"), DataType::Double),
            ],
            AggFunc::Elapsed | AggFunc::TsMin | AggFunc::TsMax => vec![
                Field::new(n("first"), DataType::Timestamp),
                Field::new(n("last"), DataType::Timestamp),
            ],
            AggFunc::HyperLogLog => vec![Field::new(
                n("hll"),
                DataType::VarChar(hll::ENCODED_BYTES_MAX),
            )],
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

/// The selected row of a selector aggregate (FIRST, LAST, LAST_ROW, MIN, MAX, ...) per
/// group, kept as columns so that partials are built and merged without per-row values.
/// A group without a selection (`has[g] == false`) holds NULLs.
struct SelState {
    has: Vec<bool>,
    ts: Vec<i64>,
    value: Column,
    carry: Vec<Column>,
}

impl SelState {
    fn new(value: DataType, carry: Vec<DataType>) -> SelState {
        SelState {
            has: Vec::new(),
            ts: Vec::new(),
            value: Column::empty(value, 0),
            carry: carry.into_iter().map(|t| Column::empty(t, 0)).collect(),
        }
    }

    fn push_empty(&mut self) {
        self.has.push(false);
        self.ts.push(0);
        self.value.push(&Value::Null);
        for c in &mut self.carry {
            c.push(&Value::Null);
        }
    }

    /// Selects row `i` of the candidate columns for group `g`.
    fn set(&mut self, g: usize, ts: i64, value: &Column, i: usize, carry: &[&Column]) {
        self.has[g] = true;
        self.ts[g] = ts;
        self.value.set_row(g, value, i);
        for (c, k) in self.carry.iter_mut().zip(carry) {
            c.set_row(g, k, i);
        }
    }

    /// Whether row `i` (time `cts`) of the candidate columns should replace group `g`'s
    /// selection: the selector's order, ties broken by value then carried values so that
    /// the answer does not depend on the order in which rows or partials arrive.
    fn better(
        &self,
        func: AggFunc,
        g: usize,
        cts: i64,
        value: &Column,
        i: usize,
        carry: &[&Column],
    ) -> bool {
        if !self.has[g] {
            return true;
        }
        better_sel(
            func,
            cts,
            self.ts[g],
            || cmp_cells(value, i, &self.value, g),
            || {
                for (a, b) in carry.iter().zip(self.carry.iter()) {
                    let o = cmp_cells(a, i, b, g);
                    if o != Ordering::Equal {
                        return o;
                    }
                }
                Ordering::Equal
            },
        )
    }
}

enum State {
    Count(Vec<i64>),
    SumI(Vec<i64>, Vec<bool>),
    SumF(Vec<f64>, Vec<bool>),
    Avg(Vec<f64>, Vec<i64>),
    Sel(SelState),
    /// Spread: min and max (NaN-free; None = no value yet).
    MinMax(Vec<Option<(f64, f64)>>),
    /// Stddev: count, mean, sum of squared deviations from the mean (Welford).
    Moments(Vec<(i64, f64, f64)>),
    /// Elapsed / TsMin / TsMax: first and last timestamp.
    Span(Vec<Option<(i64, i64)>>),
    /// Coordinator-only aggregates: every (ts, value) of the group.
    Collect(Vec<Vec<(i64, Value)>>),
    /// HyperLogLog: a sketch per group, and the bytes all of them hold.
    Hll(Vec<Hll>, usize),
    None,
}

/// Groups are found through a hash table of (hash, group id) over the key columns; the
/// keys themselves are stored as columns, one row per group, so that finding an existing
/// group allocates nothing and a partial's key columns are copies of them.
pub struct Aggregator {
    specs: Vec<AggSpec>,
    key_types: Vec<DataType>,
    table: HashTable<(u64, usize)>,
    keys: Vec<Column>,
    ngroups: usize,
    states: Vec<State>,
    seq: i64,
    /// Per group: the slot of the group in the batch being processed (`u32::MAX` = none);
    /// reset after each batch for the groups it touched only.
    scratch: Vec<u32>,
}

/// Whether a candidate (time `cts`) should replace the current selection (time `cur_ts`).
/// `cmp_v` compares the candidate's value with the current one, `cmp_carry` the carried
/// values (ties only).
fn better_sel(
    func: AggFunc,
    cts: i64,
    cur_ts: i64,
    cmp_v: impl Fn() -> Ordering,
    cmp_carry: impl Fn() -> Ordering,
) -> bool {
    let tie = || cmp_v().then_with(&cmp_carry);
    match func {
        AggFunc::First => cts < cur_ts || (cts == cur_ts && tie() == Ordering::Less),
        AggFunc::Last | AggFunc::LastRow => {
            cts > cur_ts || (cts == cur_ts && tie() == Ordering::Greater)
        }
        AggFunc::Min => match cmp_v() {
            Ordering::Less => true,
            Ordering::Equal => cts < cur_ts,
            Ordering::Greater => false,
        },
        AggFunc::Max => match cmp_v() {
            Ordering::Greater => true,
            Ordering::Equal => cts < cur_ts,
            Ordering::Less => false,
        },
        _ => false,
    }
}

/// `a[i]` against `b[j]` as [`Value::total_cmp`] orders them, without building values for
/// the common same-type cases.
fn cmp_cells(a: &Column, i: usize, b: &Column, j: usize) -> Ordering {
    let (na, nb) = (a.is_null(i), b.is_null(j));
    if na || nb {
        return nb.cmp(&na);
    }
    match (&a.data, &b.data) {
        (
            ColumnData::Int(x) | ColumnData::Timestamp(x),
            ColumnData::Int(y) | ColumnData::Timestamp(y),
        ) => x.get(i).cmp(&y.get(j)),
        (ColumnData::UInt(x), ColumnData::UInt(y)) => x.get(i).cmp(&y.get(j)),
        (ColumnData::Float(x), ColumnData::Float(y)) => match (x.get(i), y.get(j)) {
            (Some(p), Some(q)) => p.total_cmp(q),
            (p, q) => p.is_some().cmp(&q.is_some()),
        },
        (ColumnData::Str(x), ColumnData::Str(y)) => x.get(i).cmp(&y.get(j)),
        _ => a.get(i).total_cmp(&b.get(j)),
    }
}

const HASH_SEED: u64 = 0x243f_6a88_85a3_08d3;
/// What a NULL key contributes to a row's hash, whatever its column's type.
const NULL_KEY: u64 = 0x9e37_79b9_7f4a_7c15;

fn fmix(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

fn float_key(x: f64) -> u64 {
    // -0.0 and 0.0 are one group; NaNs group by their bits
    if x == 0.0 {
        0
    } else {
        x.to_bits()
    }
}

/// One hash per row over the key columns, consistent with [`key_eq`]: equal keys hash
/// equally (an integer and a timestamp with the same value are equal; NULLs equal NULLs).
///
/// A key column of one row when `n > 1` is a constant: its value holds on every row (see
/// [`Aggregator::update_with_constants`]), and is hashed once.
fn hash_keys(cols: &[&Column], n: usize) -> Vec<u64> {
    use std::hash::BuildHasher;
    let strings = foldhash::fast::FixedState::with_seed(HASH_SEED);
    // Leading constants fold into one seed, hashed once rather than once per row (the
    // partition keys of a subtable's rows usually lead, its window start follows).
    let lead = if n > 1 {
        cols.iter().take_while(|c| c.len() == 1).count()
    } else {
        0
    };
    let seed = match lead {
        0 => HASH_SEED,
        _ => hash_keys(&cols[..lead], 1)
            .first()
            .copied()
            .unwrap_or(HASH_SEED),
    };
    let mut h = vec![seed; n];
    let mut xs: Vec<u64> = vec![0; n];
    for c in &cols[lead..] {
        // A constant is folded in as its value, exactly as the same column varying would be:
        // one group's rows may come as constants in one batch and as values in another.
        let rows = if n > 1 && c.len() == 1 { 1 } else { n };
        let xs = &mut xs[..rows];
        match &c.data {
            ColumnData::Int(v) | ColumnData::Timestamp(v) => {
                for (x, y) in xs.iter_mut().zip(v) {
                    *x = *y as u64;
                }
            }
            ColumnData::UInt(v) => xs.iter_mut().zip(v).for_each(|(x, y)| *x = *y),
            ColumnData::Float(v) => xs.iter_mut().zip(v).for_each(|(x, y)| *x = float_key(*y)),
            ColumnData::Bool(v) => xs.iter_mut().zip(v).for_each(|(x, y)| *x = *y as u64 + 1),
            ColumnData::Str(v) => xs
                .iter_mut()
                .zip(v)
                .for_each(|(x, y)| *x = strings.hash_one(y.as_str())),
        }
        for (x, null) in xs.iter_mut().zip(&c.nulls) {
            if *null {
                *x = NULL_KEY;
            }
        }
        if rows == 1 && n > 1 {
            let x = xs[0];
            for hi in h.iter_mut() {
                *hi = fmix(hi.rotate_left(23) ^ x);
            }
        } else {
            for (hi, x) in h.iter_mut().zip(xs.iter()) {
                *hi = fmix(hi.rotate_left(23) ^ *x);
            }
        }
    }
    h
}

/// The row of key column `c` that holds row `i`'s value: 0 for a one-row constant column.
fn row_of(c: &Column, i: usize) -> usize {
    if c.len() == 1 {
        0
    } else {
        i
    }
}

/// Whether key `a[i]` equals key `b[j]` (NULLs equal NULLs; integers and timestamps compare
/// by value; values of other different types are different keys).
fn key_eq(a: &Column, i: usize, b: &Column, j: usize) -> bool {
    let (na, nb) = (a.is_null(i), b.is_null(j));
    if na || nb {
        return na && nb;
    }
    match (&a.data, &b.data) {
        (
            ColumnData::Int(x) | ColumnData::Timestamp(x),
            ColumnData::Int(y) | ColumnData::Timestamp(y),
        ) => x.get(i) == y.get(j),
        (ColumnData::UInt(x), ColumnData::UInt(y)) => x.get(i) == y.get(j),
        (ColumnData::Float(x), ColumnData::Float(y)) => {
            x.get(i).map(|v| float_key(*v)) == y.get(j).map(|v| float_key(*v))
        }
        (ColumnData::Bool(x), ColumnData::Bool(y)) => x.get(i) == y.get(j),
        (ColumnData::Str(x), ColumnData::Str(y)) => x.get(i) == y.get(j),
        _ => false,
    }
}

/// An empty column holding the same physical type as `c`.
fn empty_like(c: &Column) -> Column {
    Column::new(match &c.data {
        ColumnData::Bool(_) => ColumnData::Bool(Vec::new()),
        ColumnData::Int(_) => ColumnData::Int(Vec::new()),
        ColumnData::UInt(_) => ColumnData::UInt(Vec::new()),
        ColumnData::Float(_) => ColumnData::Float(Vec::new()),
        ColumnData::Str(_) => ColumnData::Str(Vec::new()),
        ColumnData::Timestamp(_) => ColumnData::Timestamp(Vec::new()),
    })
}

/// A column of `values` with NULL where `has` is false.
fn masked<T>(values: Vec<T>, has: &[bool], wrap: impl Fn(Vec<T>) -> ColumnData) -> Column {
    let nulls = if has.iter().all(|h| *h) {
        Vec::new()
    } else {
        has.iter().map(|h| !h).collect()
    };
    Column {
        data: wrap(values),
        nulls,
    }
}

/// The timestamp in row `i` of a selector's time column (`i64::MIN` when absent).
fn ts_at(c: &Column, i: usize) -> i64 {
    match &c.data {
        ColumnData::Int(v) | ColumnData::Timestamp(v) => v.get(i).copied().unwrap_or(i64::MIN),
        _ => c.get(i).as_i64().unwrap_or(i64::MIN),
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
                AggFunc::HyperLogLog => State::Hll(Vec::new(), 0),
                f if !f.is_mergeable() => State::Collect(Vec::new()),
                _ => State::Sel(SelState::new(
                    s.arg_type(),
                    s.carry.iter().map(PExpr::data_type).collect(),
                )),
            })
            .collect();
        Aggregator {
            specs,
            keys: key_types.iter().map(|t| Column::empty(*t, 0)).collect(),
            key_types,
            table: HashTable::new(),
            ngroups: 0,
            states,
            seq: 0,
            scratch: Vec::new(),
        }
    }

    /// The number of groups so far.
    pub fn groups(&self) -> usize {
        self.ngroups
    }

    fn push_states(&mut self) -> usize {
        let g = self.ngroups;
        self.ngroups += 1;
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
                State::Sel(v) => v.push_empty(),
                State::MinMax(v) => v.push(None),
                State::Moments(v) => v.push((0, 0.0, 0.0)),
                State::Span(v) => v.push(None),
                State::Collect(v) => v.push(Vec::new()),
                State::Hll(v, _) => v.push(Hll::default()),
                State::None => {}
            }
        }
        g
    }

    /// Bytes the group states hold beyond a fixed size per group (sketches), for the
    /// query's memory budget.
    pub fn state_heap_bytes(&self) -> usize {
        self.states
            .iter()
            .map(|s| match s {
                State::Hll(_, bytes) => *bytes,
                _ => 0,
            })
            .sum()
    }

    /// A new group whose key is row `i` of `key_cols`.
    fn add_group(&mut self, key_cols: &[&Column], i: usize) -> usize {
        if self.ngroups == 0 {
            // Keys are stored as they arrive (the declared types are applied on output),
            // so that the equality test compares like with like.
            for (k, c) in self.keys.iter_mut().zip(key_cols) {
                if k.physical() != c.physical() {
                    *k = empty_like(c);
                }
            }
        }
        for (k, c) in self.keys.iter_mut().zip(key_cols) {
            k.push_row(c, row_of(c, i));
        }
        self.push_states()
    }

    fn group_ids(&mut self, key_cols: &[&Column], n: usize) -> Vec<usize> {
        if key_cols.is_empty() {
            if self.ngroups == 0 && n > 0 {
                self.push_states();
            }
            return vec![0; n];
        }
        let hashes = hash_keys(key_cols, n);
        // Constant columns (one row standing for all, see `hash_keys`) never differ between
        // rows: only the others are compared.
        let varying: Vec<&Column> = key_cols
            .iter()
            .copied()
            .filter(|c| !(n > 1 && c.len() == 1))
            .collect();
        let mut out: Vec<usize> = Vec::with_capacity(n);
        for (i, &h) in hashes.iter().enumerate() {
            // rows of one subtable / one window come in runs: reuse the previous group
            if i > 0 && h == hashes[i - 1] && varying.iter().all(|c| eq_rows(c, i, i - 1)) {
                out.push(out[i - 1]);
                continue;
            }
            let keys = &self.keys;
            let found = self
                .table
                .find(h, |&(eh, g)| {
                    eh == h
                        && key_cols
                            .iter()
                            .zip(keys)
                            .all(|(c, k)| key_eq(c, row_of(c, i), k, g))
                })
                .map(|e| e.1);
            let g = match found {
                Some(g) => g,
                None => {
                    let g = self.add_group(key_cols, i);
                    self.table.insert_unique(h, (h, g), |e| e.0);
                    g
                }
            };
            out.push(g);
        }
        out
    }

    /// Feeds raw input rows.
    pub fn update(&mut self, keys: &[PExpr], cols: &[Column], n: usize) -> Result<(), SqlError> {
        self.update_with_constants(keys, &[], cols, n)
    }

    /// [`Aggregator::update`] where some keys have one value over all `n` rows, given as a
    /// one-row column in `constants` (by key position; `None` or missing: evaluate the key
    /// over `cols`). A subtable's tags and name are such keys: they are neither built for
    /// every row nor hashed and compared per row.
    pub fn update_with_constants(
        &mut self,
        keys: &[PExpr],
        constants: &[Option<Column>],
        cols: &[Column],
        n: usize,
    ) -> Result<(), SqlError> {
        if n == 0 {
            return Ok(());
        }
        let key_cols = keys
            .iter()
            .enumerate()
            .map(|(k, e)| match constants.get(k) {
                Some(Some(c)) if c.len() == 1 => Ok(Cow::Borrowed(c)),
                _ => eval_cow(e, cols, n),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let key_refs: Vec<&Column> = key_cols.iter().map(|c| &**c).collect();
        let gids = self.group_ids(&key_refs, n);
        let specs = self.specs.clone();
        for (si, spec) in specs.iter().enumerate() {
            let arg = match &spec.arg {
                Some(a) => Some(eval_cow(a, cols, n)?),
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
                            let d = x[i] - m.1;
                            m.1 += d / m.0 as f64;
                            m.2 += d * (x[i] - m.1);
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
                State::Hll(v, bytes) => {
                    let Some(c) = &arg else { continue };
                    for (i, g) in gids.iter().enumerate() {
                        if let Some(h) = hll::hash_value(c, i) {
                            let before = v[*g].heap_bytes();
                            v[*g].add(h);
                            *bytes = (*bytes + v[*g].heap_bytes()).saturating_sub(before);
                        }
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
                            let tc = eval_cow(t, cols, n)?;
                            (0..n).map(|i| ts_at(&tc, i)).collect()
                        }
                        None => (0..n as i64).map(|i| self.seq + i).collect(),
                    };
                    let carry_cols = spec
                        .carry
                        .iter()
                        .map(|e| eval_cow(e, cols, n))
                        .collect::<Result<Vec<_>, _>>()?;
                    let carry_refs: Vec<&Column> = carry_cols.iter().map(|c| &**c).collect();
                    let skip_null = !matches!(spec.func, AggFunc::LastRow | AggFunc::Any);
                    // Best row per group within this batch, then one comparison per group
                    // with its selection so far. Only the groups this batch touches are
                    // visited (the scratch slots are reset for them only): a pass over all
                    // groups per batch would be quadratic when every subtable is a group.
                    if self.scratch.len() < self.ngroups {
                        self.scratch.resize(self.ngroups, u32::MAX);
                    }
                    let mut best: Vec<(usize, usize)> = Vec::new();
                    for (i, &g) in gids.iter().enumerate() {
                        if skip_null && c.is_null(i) {
                            continue;
                        }
                        let slot = self.scratch[g];
                        if slot == u32::MAX {
                            self.scratch[g] = best.len() as u32;
                            best.push((g, i));
                            continue;
                        }
                        let j = best[slot as usize].1;
                        let replace = match spec.func {
                            AggFunc::First => ts[i] < ts[j],
                            AggFunc::Last | AggFunc::LastRow => {
                                ts[i] > ts[j]
                                    || (ts[i] == ts[j]
                                        && cmp_cells(c, i, c, j) == Ordering::Greater)
                            }
                            AggFunc::Min => cmp_in(c, i, j) == Ordering::Less,
                            AggFunc::Max => cmp_in(c, i, j) == Ordering::Greater,
                            _ => false,
                        };
                        if replace {
                            best[slot as usize].1 = i;
                        }
                    }
                    for &(g, _) in &best {
                        self.scratch[g] = u32::MAX;
                    }
                    let State::Sel(st) = &mut self.states[si] else {
                        continue;
                    };
                    for &(g, i) in &best {
                        if st.better(spec.func, g, ts[i], c, i, &carry_refs) {
                            st.set(g, ts[i], c, i, &carry_refs);
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
        // (With no aggregates there are no summaries, and a block of rows still makes its
        // group: the caller skips empty blocks.)
        if !sums.is_empty() && sums.iter().all(|s| s.rows == 0) {
            return Ok(true);
        }
        let first: Vec<Column> = key_cols.iter().map(|c| c.slice(0, 1)).collect();
        let first: Vec<&Column> = first.iter().collect();
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
                    let mut vc = empty_like(&st.value);
                    vc.push(&value);
                    if st.better(spec.func, g, s.ts, &vc, 0, &[]) {
                        // A summary carries no other columns: its selection's carried
                        // values are NULL, as they were before any row.
                        st.has[g] = true;
                        st.ts[g] = s.ts;
                        st.value.set_row(g, &vc, 0);
                        for c in &mut st.carry {
                            c.set(g, &Value::Null);
                        }
                    }
                }
                State::MinMax(_)
                | State::Moments(_)
                | State::Span(_)
                | State::Collect(_)
                | State::Hll(..) => {}
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
        let key_refs: Vec<&Column> = b.columns[..nk].iter().collect();
        let gids = self.group_ids(&key_refs, n);
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
                    let (c, mean, m2) = (col(at)?, col(at + 1)?, col(at + 2)?);
                    for (i, g) in gids.iter().enumerate() {
                        let nb = c.get(i).as_i64().unwrap_or(0);
                        if nb <= 0 {
                            continue;
                        }
                        let (mb, m2b) = (
                            mean.get(i).as_f64().unwrap_or(0.0),
                            m2.get(i).as_f64().unwrap_or(0.0),
                        );
                        let m = &mut v[*g];
                        let na = m.0;
                        let n = na + nb;
                        let d = mb - m.1;
                        m.1 += d * nb as f64 / n as f64;
                        m.2 += m2b + d * d * (na as f64 * nb as f64 / n as f64);
                        m.0 = n;
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
                State::Hll(v, bytes) => {
                    let c = col(at)?;
                    for (i, g) in gids.iter().enumerate() {
                        let Value::Str(text) = c.get(i) else { continue };
                        let other = Hll::decode(&text).map_err(|e| {
                            SqlError::Execution(format!("a HYPERLOGLOG partial is damaged: {e}"))
                        })?;
                        let before = v[*g].heap_bytes();
                        v[*g].merge(&other);
                        *bytes = (*bytes + v[*g].heap_bytes()).saturating_sub(before);
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
                    let carry = (0..spec.carry.len())
                        .map(|k| col(at + 2 + k))
                        .collect::<Result<Vec<_>, _>>()?;
                    for (i, &g) in gids.iter().enumerate() {
                        if tsc.is_null(i) {
                            continue; // the group had no selected row on that vnode
                        }
                        let ts = ts_at(tsc, i);
                        if st.better(spec.func, g, ts, vc, i, &carry) {
                            st.set(g, ts, vc, i, &carry);
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

    /// The key columns in their declared types.
    fn key_columns(&self) -> Vec<Column> {
        self.keys
            .iter()
            .zip(&self.key_types)
            .map(|(c, t)| c.clone().conformed(*t))
            .collect()
    }

    /// The partial states: key columns then each spec's partial columns.
    pub fn partial(&self) -> Batch {
        let mut fields = self.key_fields();
        let mut columns = self.key_columns();
        let n = self.ngroups;
        let all = vec![true; n];
        for (i, (st, spec)) in self.states.iter().zip(self.specs.iter()).enumerate() {
            let pf = spec.partial_fields(i);
            let cols: Vec<Column> = match st {
                State::Count(v) => vec![Column::new(ColumnData::Int(v.clone()))],
                State::SumI(v, h) => vec![masked(v.clone(), h, ColumnData::Int)],
                State::SumF(v, h) => vec![masked(v.clone(), h, ColumnData::Float)],
                State::Avg(v, c) => vec![
                    masked(v.clone(), &all, ColumnData::Float),
                    masked(c.clone(), &all, ColumnData::Int),
                ],
                State::MinMax(v) => {
                    let has: Vec<bool> = v.iter().map(Option::is_some).collect();
                    let lo = v.iter().map(|x| x.map(|p| p.0).unwrap_or(0.0)).collect();
                    let hi = v.iter().map(|x| x.map(|p| p.1).unwrap_or(0.0)).collect();
                    vec![
                        masked(lo, &has, ColumnData::Float),
                        masked(hi, &has, ColumnData::Float),
                    ]
                }
                State::Moments(v) => vec![
                    Column::new(ColumnData::Int(v.iter().map(|m| m.0).collect())),
                    Column::new(ColumnData::Float(v.iter().map(|m| m.1).collect())),
                    Column::new(ColumnData::Float(v.iter().map(|m| m.2).collect())),
                ],
                State::Span(v) => {
                    let has: Vec<bool> = v.iter().map(Option::is_some).collect();
                    let lo = v.iter().map(|x| x.map(|p| p.0).unwrap_or(0)).collect();
                    let hi = v.iter().map(|x| x.map(|p| p.1).unwrap_or(0)).collect();
                    vec![
                        masked(lo, &has, ColumnData::Timestamp),
                        masked(hi, &has, ColumnData::Timestamp),
                    ]
                }
                State::Hll(v, _) => {
                    let mut c = Column::empty(DataType::VarChar(hll::ENCODED_BYTES_MAX), n);
                    for h in v {
                        c.push(&if h.is_empty() {
                            Value::Null
                        } else {
                            Value::Str(h.encode())
                        });
                    }
                    vec![c]
                }
                State::Collect(_) | State::None => Vec::new(),
                State::Sel(s) => {
                    let mut v = vec![
                        masked(s.ts.clone(), &s.has, ColumnData::Timestamp),
                        s.value.clone(),
                    ];
                    v.extend(s.carry.iter().cloned());
                    v
                }
            };
            for (c, f) in cols.into_iter().zip(pf) {
                columns.push(c.conformed(f.data_type));
                fields.push(f);
            }
        }
        Batch::new(fields, columns)
    }

    /// Final results: key columns then one column per spec.
    pub fn finish(mut self, global_default_row: bool) -> Batch {
        if self.ngroups == 0
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
            self.push_states();
        }
        let mut fields = self.key_fields();
        let mut columns = self.key_columns();
        let n = self.ngroups;
        for (si, spec) in self.specs.iter().enumerate() {
            fields.push(Field::new(format!("_a{si}"), spec.out_type));
            let per_group = |f: &dyn Fn(usize) -> Value| -> Column {
                let mut c = Column::empty(spec.out_type, n);
                for g in 0..n {
                    c.push(&normalize(f(g), spec.out_type));
                }
                c
            };
            let col = match &self.states[si] {
                State::Count(v) => Column::new(ColumnData::Int(v.clone())),
                State::SumI(v, h) => masked(v.clone(), h, ColumnData::Int),
                State::SumF(v, h) => masked(v.clone(), h, ColumnData::Float),
                State::Avg(v, c) => {
                    let has: Vec<bool> = c.iter().map(|k| *k > 0).collect();
                    let avg = v
                        .iter()
                        .zip(c)
                        .map(|(s, k)| if *k > 0 { s / *k as f64 } else { 0.0 })
                        .collect();
                    masked(avg, &has, ColumnData::Float)
                }
                State::Sel(s) => s.value.clone(),
                State::MinMax(v) => per_group(&|g| match v[g] {
                    Some((a, b)) => Value::Float(b - a),
                    None => Value::Null,
                }),
                State::Moments(v) => per_group(&|g| {
                    let (c, _, m2) = v[g];
                    if c == 0 {
                        Value::Null
                    } else {
                        Value::Float((m2 / c as f64).max(0.0).sqrt())
                    }
                }),
                State::Span(v) => per_group(&|g| match (v[g], spec.func) {
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
                }),
                State::Collect(v) => per_group(&|g| finish_collected(spec, &v[g])),
                State::Hll(v, _) => {
                    per_group(&|g| Value::Int(i64::try_from(v[g].estimate()).unwrap_or(i64::MAX)))
                }
                State::None => match spec.carry_of {
                    Some((sel, k)) => match self.states.get(sel) {
                        Some(State::Sel(s)) => s
                            .carry
                            .get(k)
                            .cloned()
                            .unwrap_or_else(|| Column::all_null(spec.out_type, n)),
                        _ => Column::all_null(spec.out_type, n),
                    },
                    None => Column::all_null(spec.out_type, n),
                },
            };
            columns.push(col.conformed(spec.out_type));
        }
        Batch::new(fields, columns)
    }
}

/// Finalizes a coordinator-only aggregate over all of its group's (ts, value) pairs.
fn finish_collected(spec: &AggSpec, rows: &[(i64, Value)]) -> Value {
    if rows.is_empty() {
        return match spec.func {
            AggFunc::CountDistinct => Value::Int(0),
            _ => Value::Null,
        };
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
        AggFunc::CountDistinct => {
            let mut vals: Vec<Value> = rows.into_iter().map(|r| r.1).collect();
            vals.sort_by(|a, b| a.total_cmp(b));
            vals.dedup_by(|a, b| a.total_cmp(b) == Ordering::Equal);
            Value::Int(vals.len() as i64)
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
        AggFunc::GroupConcat => {
            let sep = match spec.params.first() {
                Some(Value::Str(s)) => s.as_str(),
                _ => "",
            };
            let mut out = String::new();
            for (i, (_, v)) in rows.iter().enumerate() {
                let v = match v {
                    Value::Str(s) => Cow::Borrowed(s.as_str()),
                    v => Cow::Owned(v.to_string()),
                };
                let add = if i == 0 { 0 } else { sep.len() } + v.len();
                if out.len() + add > GROUP_CONCAT_BYTES_MAX {
                    break;
                }
                if i > 0 {
                    out.push_str(sep);
                }
                out.push_str(&v);
            }
            Value::Str(out)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::PExpr;

    fn col_ref(i: usize, t: DataType) -> PExpr {
        PExpr::Input(i, t)
    }

    fn keys_of(b: &Batch, nkeys: usize) -> Vec<Vec<Value>> {
        let mut rows: Vec<Vec<Value>> = (0..b.num_rows())
            .map(|i| b.row(i).into_iter().take(nkeys).collect())
            .collect();
        rows.sort_by(|a, b| {
            a.iter()
                .zip(b)
                .map(|(x, y)| x.total_cmp(y))
                .find(|o| *o != Ordering::Equal)
                .unwrap_or(Ordering::Equal)
        });
        rows
    }

    #[test]
    fn a_constant_key_hashes_as_the_same_column_of_values() {
        // Constants (one row standing for n) lead, trail or sit between varying keys, with
        // NULLs: each row's hash equals that of the keys given row by row, so one group's
        // rows meet whether a batch brings its tags as constants or as values.
        let s = |x: &str| Column::new(ColumnData::Str(vec![x.to_string()]));
        let mut null_int = Column::new(ColumnData::Int(vec![0]));
        null_int.nulls = vec![true];
        let consts = [
            s("fleet"),
            null_int,
            Column::new(ColumnData::Float(vec![-0.0])),
        ];
        let ts = Column::new(ColumnData::Timestamp(vec![5, 5, 6, 7]));
        let n = 4;
        let broadcast = |c: &Column| {
            let mut out = Column::empty(
                match &c.data {
                    ColumnData::Str(_) => DataType::VarChar(8),
                    ColumnData::Int(_) => DataType::BigInt,
                    _ => DataType::Double,
                },
                n,
            );
            for _ in 0..n {
                out.push(&c.get(0));
            }
            out
        };
        let full: Vec<Column> = consts.iter().map(broadcast).collect();
        for order in [[0, 1, 2, 3], [3, 0, 1, 2], [0, 3, 1, 2], [1, 2, 3, 0]] {
            let pick = |k: usize, constant: bool| -> &Column {
                match (k, constant) {
                    (3, _) => &ts,
                    (k, true) => &consts[k],
                    (k, false) => &full[k],
                }
            };
            let as_consts: Vec<&Column> = order.iter().map(|k| pick(*k, true)).collect();
            let as_values: Vec<&Column> = order.iter().map(|k| pick(*k, false)).collect();
            assert_eq!(
                hash_keys(&as_consts, n),
                hash_keys(&as_values, n),
                "{order:?}"
            );
            let rows: Vec<u64> = (0..n)
                .map(|i| {
                    let one: Vec<Column> = as_values.iter().map(|c| c.take(&[i])).collect();
                    hash_keys(&one.iter().collect::<Vec<_>>(), 1)[0]
                })
                .collect();
            assert_eq!(hash_keys(&as_consts, n), rows, "{order:?} row by row");
        }
    }

    #[test]
    fn group_keys_follow_sql_equality_of_nulls_zeros_and_strings() {
        // key: (string, double); NULL equals NULL, -0.0 equals 0.0, NaN equals itself
        let mut a = Aggregator::new(
            vec![DataType::VarChar(8), DataType::Double],
            vec![AggSpec {
                func: AggFunc::CountStar,
                arg: None,
                ts: None,
                carry: vec![],
                carry_of: None,
                out_type: DataType::BigInt,
                params: vec![],
            }],
        );
        let s = Column::new(ColumnData::Str(
            ["a", "a", "b", "", "a", "a"].map(String::from).to_vec(),
        ));
        let mut s = s;
        s.nulls = vec![false, false, false, true, false, false];
        let mut f = Column::new(ColumnData::Float(vec![
            0.0,
            -0.0,
            0.0,
            0.0,
            f64::NAN,
            f64::NAN,
        ]));
        f.nulls = vec![false; 6];
        a.update(
            &[
                col_ref(0, DataType::VarChar(8)),
                col_ref(1, DataType::Double),
            ],
            &[s.clone(), f.clone()],
            6,
        )
        .unwrap();
        // a second batch in another order lands in the same groups
        let idx = [5, 3, 2, 1];
        a.update(
            &[
                col_ref(0, DataType::VarChar(8)),
                col_ref(1, DataType::Double),
            ],
            &[s.take(&idx), f.take(&idx)],
            4,
        )
        .unwrap();
        assert_eq!(a.groups(), 4);
        let out = a.finish(true);
        let mut counts: Vec<(String, i64)> = (0..out.num_rows())
            .map(|i| {
                let r = out.row(i);
                (format!("{}/{}", r[0], r[1]), r[2].as_i64().unwrap())
            })
            .collect();
        counts.sort();
        assert_eq!(
            counts,
            vec![
                ("NULL/0".to_string(), 2),
                ("a/0".to_string(), 3),
                ("a/NaN".to_string(), 3),
                ("b/0".to_string(), 2),
            ]
        );
    }

    #[test]
    fn last_row_partials_merge_to_the_newest_row_with_its_carried_values() {
        let spec = AggSpec {
            func: AggFunc::LastRow,
            arg: Some(col_ref(1, DataType::Double)),
            ts: Some(col_ref(0, DataType::Timestamp)),
            carry: vec![col_ref(2, DataType::VarChar(8))],
            carry_of: None,
            out_type: DataType::Double,
            params: vec![],
        };
        let carry = AggSpec {
            func: AggFunc::Carry,
            arg: None,
            ts: None,
            carry: vec![],
            carry_of: Some((0, 0)),
            out_type: DataType::VarChar(8),
            params: vec![],
        };
        let key = [col_ref(3, DataType::BigInt)];
        let part = |ts: Vec<i64>, v: Vec<Option<f64>>, c: Vec<&str>, k: Vec<i64>| {
            let n = ts.len();
            let mut a = Aggregator::new(vec![DataType::BigInt], vec![spec.clone(), carry.clone()]);
            let mut vc = Column::empty(DataType::Double, n);
            for x in &v {
                vc.push(&x.map(Value::Float).unwrap_or(Value::Null));
            }
            let cols = vec![
                Column::new(ColumnData::Timestamp(ts)),
                vc,
                Column::new(ColumnData::Str(c.into_iter().map(String::from).collect())),
                Column::new(ColumnData::Int(k)),
            ];
            a.update(&key, &cols, n).unwrap();
            a.partial()
        };
        // vnode 1: group 1 newest at 30 (NULL value: LAST_ROW keeps it), group 2 at 10
        let p1 = part(
            vec![10, 30, 20, 10],
            vec![Some(1.0), None, Some(2.0), Some(5.0)],
            vec!["x", "y", "z", "w"],
            vec![1, 1, 1, 2],
        );
        // vnode 2: group 2 newer at 40, group 3 only here
        let p2 = part(
            vec![40, 5],
            vec![Some(7.0), Some(9.0)],
            vec!["v", "u"],
            vec![2, 3],
        );
        let mut m = Aggregator::new(vec![DataType::BigInt], vec![spec.clone(), carry.clone()]);
        m.merge(&p2).unwrap();
        m.merge(&p1).unwrap();
        let out = m.finish(false);
        let mut rows: Vec<Vec<Value>> = (0..out.num_rows()).map(|i| out.row(i)).collect();
        rows.sort_by_key(|r| r[0].as_i64());
        assert_eq!(
            rows,
            vec![
                vec![Value::Int(1), Value::Null, Value::Str("y".into())],
                vec![Value::Int(2), Value::Float(7.0), Value::Str("v".into())],
                vec![Value::Int(3), Value::Float(9.0), Value::Str("u".into())],
            ]
        );
        assert_eq!(keys_of(&p1, 1).len(), 2);
    }

    #[test]
    fn group_concat_stops_at_the_last_whole_value_that_fits() {
        let spec = AggSpec {
            func: AggFunc::GroupConcat,
            arg: None,
            ts: None,
            carry: vec![],
            carry_of: None,
            out_type: DataType::VarChar(GROUP_CONCAT_BYTES_MAX as u32),
            params: vec![Value::Str(", ".into())],
        };
        // out of order and tied in time: by time, then by value
        let rows = vec![
            (2, Value::Str("c".into())),
            (1, Value::Str("b".into())),
            (1, Value::Str("a".into())),
        ];
        assert_eq!(
            super::finish_collected(&spec, &rows),
            Value::Str("a, b, c".into())
        );
        // 10-byte values: 5461 of them with their separators fit in 64 KiB, not 5462
        let rows: Vec<(i64, Value)> = (0..10_000)
            .map(|i| (i, Value::Str(format!("{i:010}"))))
            .collect();
        let Value::Str(out) = super::finish_collected(&spec, &rows) else {
            panic!("not a string");
        };
        assert!(out.len() <= GROUP_CONCAT_BYTES_MAX);
        assert_eq!(out.split(", ").count(), (GROUP_CONCAT_BYTES_MAX + 2) / 12);
        assert!(out.ends_with(&format!("{:010}", (GROUP_CONCAT_BYTES_MAX + 2) / 12 - 1)));
        assert_eq!(super::finish_collected(&spec, &[]), Value::Null);
    }
}
