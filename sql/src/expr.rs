//! Physical (compiled) expressions and their vectorized evaluation over columns.

use crate::ast::BinOp;
use crate::error::SqlError;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::{Arc, OnceLock};
use tidal_common::types::PhysicalType;
use tidal_common::{Column, ColumnData, DataType, Value};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ScalarFunc {
    Floor,
    Ceil,
    Round,
    Abs,
}

/// Multi-argument scalar functions, evaluated row by row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CallFunc {
    Concat,
    ConcatWs,
    Lower,
    Upper,
    Length,
    CharLength,
    /// SUBSTR(s, pos [, len]) with a 1-based pos (negative counts from the end).
    Substr,
    Trim,
    Ltrim,
    Rtrim,
    Sqrt,
    Pow,
    Log,
    Greatest,
    Least,
    Exp,
    Ln,
    Sin,
    Cos,
    Tan,
    Sign,
    /// REPLACE(s, from, to)
    Replace,
    /// TIMETRUNCATE(ts, unit): the start of `unit` (db precision units) holding ts (UTC).
    TimeTruncate,
    /// TIMEDIFF(a, b [, unit]): (a - b) / unit.
    TimeDiff,
    /// TO_ISO8601(ts, units per second): the planner appends the precision.
    ToIso8601,
    /// TO_UNIXTIMESTAMP(string, units per second).
    ToUnixTimestamp,
    /// MOD(a, b): the remainder of a / b with the sign of a (NULL when b is 0).
    Mod,
    /// TRUNCATE(x, d): x cut (toward zero) to d decimals.
    Truncate,
    /// RAND(): a uniform double in [0, 1), drawn per row.
    Rand,
    /// WEEKDAY(ts, units per second): 0 = Monday.
    Weekday,
    /// DAYOFWEEK(ts, units per second): 1 = Sunday.
    Dayofweek,
    /// WEEK(ts, mode, units per second): the planner supplies mode 0 when it is left out.
    Week,
    /// WEEKOFYEAR(ts, units per second): the ISO week.
    Weekofyear,
    /// TO_CHAR(ts, format, units per second), see [`crate::timefmt`].
    ToChar,
    /// TO_TIMESTAMP(string, format, units per second).
    ToTimestamp,
    Acos,
    Asin,
    Atan,
    Pi,
    Degrees,
    Radians,
    /// REPEAT(s, n): s n times (NULL past [`REPEAT_BYTES_MAX`]).
    Repeat,
    /// ASCII(s): the first byte of s (0 for an empty string).
    Ascii,
    /// CHAR(n, ...): the characters of these code points (invalid ones skipped).
    Char,
    /// COALESCE(a, b, ...) / IFNULL(a, b) / NVL(a, b): the first argument that is not NULL.
    Coalesce,
    /// NVL2(a, b, c): b when a is not NULL, else c.
    Nvl2,
    /// NULLIF(a, b): NULL when a = b, else a.
    NullIf,
    /// IF(cond, a, b): a when cond is true (non-zero), else b (also when cond is NULL).
    If,
    /// POSITION(a IN b): the 1-based character position of a's first occurrence in b, 0
    /// when there is none (1 for an empty a).
    Position,
}

/// The longest string REPEAT builds: a row of a result stays bounded.
pub const REPEAT_BYTES_MAX: usize = 1 << 16;

/// IN lists up to this long are searched element by element; longer ones (generated lists
/// of thousands of names) through an index built on first use.
const IN_LIST_SCAN_MAX: usize = 16;

/// The constants of an IN list. A long list is indexed on first use and the index stays with
/// the expression (and its clones): a fragment evaluates its filters once per subtable, and
/// indexing the list each time would make a long list over many subtables quadratic.
/// Serialized as the plain list.
#[derive(Clone, Default, Serialize, Deserialize)]
#[serde(from = "Vec<Value>", into = "Vec<Value>")]
pub struct ValueList {
    values: Vec<Value>,
    strs: Arc<OnceLock<HashSet<String>>>,
    /// The numeric values, sorted, -0.0 as 0.0, without NaN (which equals nothing).
    nums: Arc<OnceLock<Vec<f64>>>,
}

impl ValueList {
    pub fn values(&self) -> &[Value] {
        &self.values
    }

    /// Whether the list holds the string `s` (non-string elements never match a string).
    pub fn contains_str(&self, s: &str) -> bool {
        if self.values.len() <= IN_LIST_SCAN_MAX {
            return self
                .values
                .iter()
                .any(|v| matches!(v, Value::Str(x) if x == s));
        }
        self.strs
            .get_or_init(|| {
                self.values
                    .iter()
                    .filter_map(|v| match v {
                        Value::Str(x) => Some(x.clone()),
                        _ => None,
                    })
                    .collect()
            })
            .contains(s)
    }

    /// Whether the list holds a number equal (`==`) to `x`.
    pub fn contains_f64(&self, x: f64) -> bool {
        if self.values.len() <= IN_LIST_SCAN_MAX {
            return self.values.iter().any(|v| v.as_f64() == Some(x));
        }
        if x.is_nan() {
            return false;
        }
        let sorted = self.nums.get_or_init(|| {
            let mut v: Vec<f64> = self
                .values
                .iter()
                .filter_map(Value::as_f64)
                .filter(|f| !f.is_nan())
                .map(|f| f + 0.0)
                .collect();
            v.sort_unstable_by(f64::total_cmp);
            v
        });
        let x = x + 0.0;
        sorted.binary_search_by(|y| y.total_cmp(&x)).is_ok()
    }
}

impl From<Vec<Value>> for ValueList {
    fn from(values: Vec<Value>) -> ValueList {
        ValueList {
            values,
            ..Default::default()
        }
    }
}

impl From<ValueList> for Vec<Value> {
    fn from(l: ValueList) -> Vec<Value> {
        l.values
    }
}

impl PartialEq for ValueList {
    fn eq(&self, other: &ValueList) -> bool {
        self.values == other.values
    }
}

impl std::fmt::Debug for ValueList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.values.fmt(f)
    }
}

/// An expression compiled against an input layout: `Input(i)` is the i-th input column.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum PExpr {
    Input(usize, DataType),
    Lit(Value, DataType),
    Bin(BinOp, Box<PExpr>, Box<PExpr>, DataType),
    Not(Box<PExpr>),
    Neg(Box<PExpr>, DataType),
    IsNull(Box<PExpr>, bool),
    InList(Box<PExpr>, ValueList, bool),
    Like(Box<PExpr>, String, bool),
    /// MATCH (`false`) / NMATCH (`true`) with a regular expression (see [`regex_for`]).
    Regex(Box<PExpr>, String, bool),
    Func(ScalarFunc, Box<PExpr>, DataType),
    Cast(Box<PExpr>, DataType),
    /// The start of the INTERVAL window holding the timestamp: `(interval, offset)` in the
    /// db precision; windows are aligned to the epoch (UTC) plus the offset.
    WinStart(Box<PExpr>, i64, i64),
    /// `CASE WHEN c THEN v ... ELSE e END` (the operand form is compiled to equalities).
    Case(Vec<(PExpr, PExpr)>, Option<Box<PExpr>>, DataType),
    Call(CallFunc, Vec<PExpr>, DataType),
}

impl PExpr {
    pub fn data_type(&self) -> DataType {
        match self {
            PExpr::Input(_, t)
            | PExpr::Lit(_, t)
            | PExpr::Bin(_, _, _, t)
            | PExpr::Neg(_, t)
            | PExpr::Func(_, _, t)
            | PExpr::Case(_, _, t)
            | PExpr::Call(_, _, t)
            | PExpr::Cast(_, t) => *t,
            PExpr::WinStart(..) => DataType::Timestamp,
            PExpr::Not(_)
            | PExpr::IsNull(..)
            | PExpr::InList(..)
            | PExpr::Like(..)
            | PExpr::Regex(..) => DataType::Bool,
        }
    }

    /// Calls `f` on every input index, allowing it to be rewritten.
    pub fn for_each_input_mut(&mut self, f: &mut dyn FnMut(&mut usize)) {
        match self {
            PExpr::Input(i, _) => f(i),
            PExpr::Lit(..) => {}
            PExpr::Bin(_, a, b, _) => {
                a.for_each_input_mut(f);
                b.for_each_input_mut(f);
            }
            PExpr::Not(a)
            | PExpr::Neg(a, _)
            | PExpr::IsNull(a, _)
            | PExpr::InList(a, _, _)
            | PExpr::Like(a, _, _)
            | PExpr::Regex(a, _, _)
            | PExpr::Func(_, a, _)
            | PExpr::Cast(a, _)
            | PExpr::WinStart(a, _, _) => a.for_each_input_mut(f),
            PExpr::Case(w, e, _) => {
                for (a, b) in w {
                    a.for_each_input_mut(f);
                    b.for_each_input_mut(f);
                }
                if let Some(e) = e {
                    e.for_each_input_mut(f);
                }
            }
            PExpr::Call(_, args, _) => {
                for a in args {
                    a.for_each_input_mut(f);
                }
            }
        }
    }

    /// Every input index referenced.
    pub fn inputs(&self, out: &mut Vec<usize>) {
        match self {
            PExpr::Input(i, _) => out.push(*i),
            PExpr::Lit(..) => {}
            PExpr::Bin(_, a, b, _) => {
                a.inputs(out);
                b.inputs(out);
            }
            PExpr::Not(a)
            | PExpr::Neg(a, _)
            | PExpr::IsNull(a, _)
            | PExpr::InList(a, _, _)
            | PExpr::Like(a, _, _)
            | PExpr::Regex(a, _, _)
            | PExpr::Func(_, a, _)
            | PExpr::Cast(a, _)
            | PExpr::WinStart(a, _, _) => a.inputs(out),
            PExpr::Case(w, e, _) => {
                for (a, b) in w {
                    a.inputs(out);
                    b.inputs(out);
                }
                if let Some(e) = e {
                    e.inputs(out);
                }
            }
            PExpr::Call(_, args, _) => {
                for a in args {
                    a.inputs(out);
                }
            }
        }
    }
}

/// Broadcasts a scalar to a column of `n` rows of type `t`.
pub fn broadcast(v: &Value, t: DataType, n: usize) -> Column {
    Column::broadcast(v, t, n)
}

fn null_at(c: &Column, i: usize) -> bool {
    c.is_null(i)
}

fn merge_nulls(a: &Column, b: &Column, n: usize) -> Vec<bool> {
    match (a.nulls.is_empty(), b.nulls.is_empty()) {
        (true, true) => Vec::new(),
        (false, true) if a.nulls.len() == n => a.nulls.clone(),
        (true, false) if b.nulls.len() == n => b.nulls.clone(),
        _ => (0..n).map(|i| null_at(a, i) || null_at(b, i)).collect(),
    }
}

/// Numeric view of a column as f64 (borrowed for DOUBLE columns).
pub fn f64s(c: &Column) -> Option<Cow<'_, [f64]>> {
    Some(match &c.data {
        ColumnData::Float(v) => Cow::Borrowed(v.as_slice()),
        ColumnData::Int(v) | ColumnData::Timestamp(v) => {
            Cow::Owned(v.iter().map(|x| *x as f64).collect())
        }
        ColumnData::UInt(v) => Cow::Owned(v.iter().map(|x| *x as f64).collect()),
        ColumnData::Bool(v) => Cow::Owned(v.iter().map(|x| *x as i64 as f64).collect()),
        ColumnData::Str(_) => return None,
    })
}

fn i64s(c: &Column) -> Option<&[i64]> {
    match &c.data {
        ColumnData::Int(v) | ColumnData::Timestamp(v) => Some(v.as_slice()),
        _ => None,
    }
}

/// [`eval`] that borrows an input column instead of copying it.
pub fn eval_cow<'a>(
    e: &PExpr,
    cols: &'a [Column],
    n: usize,
) -> Result<std::borrow::Cow<'a, Column>, SqlError> {
    match e {
        PExpr::Input(i, _) => cols
            .get(*i)
            .map(std::borrow::Cow::Borrowed)
            .ok_or_else(|| SqlError::Execution(format!("input column {i} missing"))),
        _ => eval(e, cols, n).map(std::borrow::Cow::Owned),
    }
}

/// Evaluates `e` over `n` rows of `cols`.
pub fn eval(e: &PExpr, cols: &[Column], n: usize) -> Result<Column, SqlError> {
    match e {
        PExpr::Input(i, _) => cols
            .get(*i)
            .cloned()
            .ok_or_else(|| SqlError::Execution(format!("input column {i} missing"))),
        PExpr::Lit(v, t) => Ok(broadcast(v, *t, n)),
        PExpr::Bin(op, a, b, t) => {
            if op.is_comparison() {
                // A column against a constant (nearly every filter): compared with the
                // constant itself, not with a column of n copies of it.
                let against_lit = match (&**a, &**b) {
                    (x, PExpr::Lit(v, vt)) => Some((*op, x, v, *vt)),
                    (PExpr::Lit(v, vt), x) => Some((op.flipped(), x, v, *vt)),
                    _ => None,
                };
                if let Some((op, x, v, vt)) = against_lit {
                    let cx = eval_cow(x, cols, n)?;
                    if let Some(c) = compare_to_scalar(op, &cx, v, vt, n) {
                        return Ok(c);
                    }
                    return Ok(compare(op, &cx, &broadcast(v, vt, n), n));
                }
            }
            let ca = eval_cow(a, cols, n)?;
            let cb = eval_cow(b, cols, n)?;
            match op {
                BinOp::And | BinOp::Or => Ok(logic(*op, &ca, &cb, n)),
                _ if op.is_comparison() => Ok(compare(*op, &ca, &cb, n)),
                _ => Ok(arith(*op, &ca, &cb, n, *t)),
            }
        }
        PExpr::Not(a) => {
            let c = eval(a, cols, n)?;
            let (v, nulls) = bools(&c, n);
            Ok(Column {
                data: ColumnData::Bool(v.iter().map(|b| !b).collect()),
                nulls,
            })
        }
        PExpr::Neg(a, t) => {
            let c = eval(a, cols, n)?;
            let zero = broadcast(&Value::Int(0), DataType::BigInt, n);
            Ok(arith(BinOp::Sub, &zero, &c, n, *t))
        }
        PExpr::IsNull(a, negated) => {
            let c = eval(a, cols, n)?;
            Ok(Column::new(ColumnData::Bool(
                (0..n).map(|i| c.is_null(i) != *negated).collect(),
            )))
        }
        PExpr::InList(a, list, negated) => {
            let c = eval(a, cols, n)?;
            let mut out = Vec::with_capacity(n);
            let mut nulls = Vec::new();
            if let ColumnData::Str(v) = &c.data {
                for s in v {
                    out.push(list.contains_str(s) != *negated);
                }
            } else {
                let f = f64s(&c).unwrap_or(Cow::Owned(vec![f64::NAN; n]));
                for x in f.iter() {
                    out.push(list.contains_f64(*x) != *negated);
                }
            }
            if !c.nulls.is_empty() {
                nulls = c.nulls.clone();
            }
            Ok(Column {
                data: ColumnData::Bool(out),
                nulls,
            })
        }
        PExpr::Regex(a, pat, negated) => {
            let c = eval(a, cols, n)?;
            let re = regex_for(pat)?;
            let out = match &c.data {
                ColumnData::Str(v) => v.iter().map(|s| re.is_match(s) != *negated).collect(),
                _ => (0..n)
                    .map(|i| re.is_match(&c.get(i).to_string()) != *negated)
                    .collect(),
            };
            Ok(Column {
                data: ColumnData::Bool(out),
                nulls: c.nulls.clone(),
            })
        }
        PExpr::Like(a, pat, negated) => {
            let c = eval(a, cols, n)?;
            let pat: Vec<char> = pat.chars().collect();
            let out = match &c.data {
                ColumnData::Str(v) => v
                    .iter()
                    .map(|s| like(&s.chars().collect::<Vec<_>>(), &pat) != *negated)
                    .collect(),
                _ => (0..n)
                    .map(|i| {
                        let s: Vec<char> = c.get(i).to_string().chars().collect();
                        like(&s, &pat) != *negated
                    })
                    .collect(),
            };
            Ok(Column {
                data: ColumnData::Bool(out),
                nulls: c.nulls.clone(),
            })
        }
        PExpr::Func(f, a, _) => {
            let c = eval(a, cols, n)?;
            let x = f64s(&c)
                .ok_or_else(|| SqlError::TypeMismatch(format!("{f:?} needs a numeric argument")))?;
            let g: fn(f64) -> f64 = match f {
                ScalarFunc::Floor => f64::floor,
                ScalarFunc::Ceil => f64::ceil,
                ScalarFunc::Round => f64::round,
                ScalarFunc::Abs => f64::abs,
            };
            Ok(Column {
                data: ColumnData::Float(x.iter().map(|v| g(*v)).collect()),
                nulls: c.nulls.clone(),
            })
        }
        PExpr::Cast(a, t) => {
            let c = eval(a, cols, n)?;
            cast(&c, *t, n)
        }
        PExpr::Case(whens, else_, t) => {
            let mut out: Vec<Option<Value>> = vec![None; n];
            for (c, v) in whens {
                let hit = true_rows(&eval(c, cols, n)?, n);
                if hit.iter().all(|i| out[*i].is_some()) {
                    continue;
                }
                let vc = eval(v, cols, n)?;
                for i in hit {
                    if out[i].is_none() {
                        out[i] = Some(vc.get(i));
                    }
                }
            }
            let ec = match else_ {
                Some(e) => Some(eval(e, cols, n)?),
                None => None,
            };
            let mut c = Column::empty(*t, n);
            for (i, v) in out.into_iter().enumerate() {
                let v = v.unwrap_or_else(|| ec.as_ref().map(|e| e.get(i)).unwrap_or(Value::Null));
                c.push(&conform(v, *t));
            }
            Ok(c)
        }
        PExpr::Call(f, args, t) => {
            let a = args
                .iter()
                .map(|x| eval(x, cols, n))
                .collect::<Result<Vec<_>, _>>()?;
            let mut c = Column::empty(*t, n);
            for i in 0..n {
                let vals: Vec<Value> = a.iter().map(|col| col.get(i)).collect();
                c.push(&conform(call(*f, &vals), *t));
            }
            Ok(c)
        }
        PExpr::WinStart(a, interval, offset) => {
            let c = eval(a, cols, n)?;
            let out = match &c.data {
                ColumnData::Int(ts) | ColumnData::Timestamp(ts) => {
                    window_starts(ts.iter().copied(), *interval, *offset)
                }
                _ => window_starts(
                    (0..n).map(|i| c.get(i).as_i64().unwrap_or(0)),
                    *interval,
                    *offset,
                ),
            };
            Ok(Column {
                data: ColumnData::Timestamp(out),
                nulls: c.nulls.clone(),
            })
        }
    }
}

/// The start of the `interval` window (shifted by `offset`) of each timestamp. A scan's rows
/// come in time order, so most share the previous row's window: that one is reused while the
/// timestamp stays inside it, and the division is paid once per window, not per row.
fn window_starts(ts: impl Iterator<Item = i64>, interval: i64, offset: i64) -> Vec<i64> {
    let iv = interval.max(1);
    let start = |t: i64| t.saturating_sub(t.saturating_sub(offset).rem_euclid(iv));
    // [lo, hi): the last window computed without saturation (empty at first).
    let (mut lo, mut hi) = (i64::MAX, i64::MIN);
    ts.map(|t| {
        if t >= lo && t < hi {
            return lo;
        }
        // Reused only where nothing saturates, for any timestamp of [w, w + iv) (both ends
        // checked: `t - offset` is monotonic in t): then each of them has window w.
        let exact = t
            .checked_sub(offset)
            .and_then(|d| t.checked_sub(d.rem_euclid(iv)))
            .and_then(|w| {
                let end = w.checked_add(iv)?;
                w.checked_sub(offset)?;
                (end - 1).checked_sub(offset)?;
                Some((w, end))
            });
        (lo, hi) = exact.unwrap_or((i64::MAX, i64::MIN));
        start(t)
    })
    .collect()
}

/// Converts a value to the physical type of a column of type `t` (NULL when it cannot be).
fn conform(v: Value, t: DataType) -> Value {
    match (t.physical(), v) {
        (_, Value::Null) => Value::Null,
        (PhysicalType::Float, v) => v.as_f64().map(Value::Float).unwrap_or(Value::Null),
        (PhysicalType::Int, Value::Float(f)) => Value::Int(f as i64),
        (PhysicalType::Int, v) => v.as_i64().map(Value::Int).unwrap_or(Value::Null),
        (PhysicalType::Timestamp, v) => v.as_i64().map(Value::Timestamp).unwrap_or(Value::Null),
        (PhysicalType::Str, Value::Str(s)) => Value::Str(s),
        (PhysicalType::Str, v) => Value::Str(v.to_string()),
        (PhysicalType::Bool, Value::Bool(b)) => Value::Bool(b),
        (PhysicalType::Bool, v) => v
            .as_f64()
            .map(|f| Value::Bool(f != 0.0))
            .unwrap_or(Value::Null),
        (_, v) => v,
    }
}

fn precision_of(per_second: i64) -> tidal_common::Precision {
    match per_second {
        1_000_000 => tidal_common::Precision::Micros,
        1_000_000_000 => tidal_common::Precision::Nanos,
        _ => tidal_common::Precision::Millis,
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::Str(s) => s.clone(),
        v => v.to_string(),
    }
}

/// One row of a [`CallFunc`]; NULL in, NULL out (CONCAT_WS and CHAR skip NULL values; the NULL
/// handling functions decide for themselves).
fn call(f: CallFunc, a: &[Value]) -> Value {
    match f {
        CallFunc::Coalesce => {
            return a
                .iter()
                .find(|v| !v.is_null())
                .cloned()
                .unwrap_or(Value::Null);
        }
        CallFunc::Nvl2 => {
            let k = if a.first().is_some_and(|v| !v.is_null()) {
                1
            } else {
                2
            };
            return a.get(k).cloned().unwrap_or(Value::Null);
        }
        CallFunc::NullIf => {
            return match (a.first(), a.get(1)) {
                (Some(x), Some(y)) if !x.is_null() && !y.is_null() && x.total_cmp(y).is_eq() => {
                    Value::Null
                }
                (Some(x), _) => x.clone(),
                _ => Value::Null,
            };
        }
        CallFunc::If => {
            let yes = match a.first() {
                Some(Value::Bool(b)) => *b,
                Some(v) => v.as_f64().is_some_and(|x| x != 0.0),
                None => false,
            };
            return a
                .get(if yes { 1 } else { 2 })
                .cloned()
                .unwrap_or(Value::Null);
        }
        CallFunc::Pi => return Value::Float(std::f64::consts::PI),
        // NULL code points are skipped, as TDengine does
        CallFunc::Char => {
            return Value::Str(
                a.iter()
                    .filter_map(|v| v.as_i64())
                    .filter_map(|c| u32::try_from(c).ok().and_then(char::from_u32))
                    .collect(),
            )
        }
        _ => {}
    }
    if f == CallFunc::ConcatWs {
        let Some(sep) = a.first().filter(|v| !v.is_null()) else {
            return Value::Null;
        };
        let parts: Vec<String> = a[1..].iter().filter(|v| !v.is_null()).map(text).collect();
        return Value::Str(parts.join(&text(sep)));
    }
    if a.iter().any(Value::is_null) {
        return Value::Null;
    }
    let s0 = || a.first().map(text).unwrap_or_default();
    let num = |k: usize| a.get(k).and_then(Value::as_f64);
    match f {
        CallFunc::Concat => Value::Str(a.iter().map(text).collect()),
        CallFunc::Lower => Value::Str(s0().to_lowercase()),
        CallFunc::Upper => Value::Str(s0().to_uppercase()),
        CallFunc::Length => Value::Int(s0().len() as i64),
        CallFunc::CharLength => Value::Int(s0().chars().count() as i64),
        CallFunc::Position => {
            let (needle, hay) = (s0(), a.get(1).map(text).unwrap_or_default());
            Value::Int(
                hay.find(needle.as_str())
                    .map_or(0, |at| hay[..at].chars().count() as i64 + 1),
            )
        }
        CallFunc::Trim => Value::Str(s0().trim().to_string()),
        CallFunc::Ltrim => Value::Str(s0().trim_start().to_string()),
        CallFunc::Rtrim => Value::Str(s0().trim_end().to_string()),
        CallFunc::Substr => {
            let chars: Vec<char> = s0().chars().collect();
            let len = chars.len() as i64;
            let pos = a.get(1).and_then(Value::as_i64).unwrap_or(1);
            let start = if pos > 0 { pos - 1 } else { (len + pos).max(0) };
            let count = a.get(2).and_then(Value::as_i64).unwrap_or(len).max(0);
            let start = start.clamp(0, len) as usize;
            let end = (start as i64).saturating_add(count).min(len) as usize;
            Value::Str(chars[start..end.max(start)].iter().collect())
        }
        CallFunc::Sqrt => num(0)
            .filter(|x| *x >= 0.0)
            .map(|x| Value::Float(x.sqrt()))
            .unwrap_or(Value::Null),
        CallFunc::Pow => match (num(0), num(1)) {
            (Some(x), Some(y)) => Value::Float(x.powf(y)),
            _ => Value::Null,
        },
        CallFunc::Log => match (num(0), num(1)) {
            (Some(x), Some(b)) if x > 0.0 && b > 0.0 && b != 1.0 => Value::Float(x.log(b)),
            (Some(x), None) if x > 0.0 => Value::Float(x.ln()),
            _ => Value::Null,
        },
        CallFunc::Greatest | CallFunc::Least => {
            let Some(mut best) = a.first().cloned() else {
                return Value::Null;
            };
            for v in a.iter().skip(1) {
                let o = v.total_cmp(&best);
                if (f == CallFunc::Greatest && o.is_gt()) || (f == CallFunc::Least && o.is_lt()) {
                    best = v.clone();
                }
            }
            best
        }
        CallFunc::Exp => num(0).map(|x| Value::Float(x.exp())).unwrap_or(Value::Null),
        CallFunc::Acos | CallFunc::Asin => num(0)
            .filter(|x| (-1.0..=1.0).contains(x))
            .map(|x| {
                Value::Float(if f == CallFunc::Acos {
                    x.acos()
                } else {
                    x.asin()
                })
            })
            .unwrap_or(Value::Null),
        CallFunc::Atan => num(0)
            .map(|x| Value::Float(x.atan()))
            .unwrap_or(Value::Null),
        CallFunc::Degrees => num(0)
            .map(|x| Value::Float(x.to_degrees()))
            .unwrap_or(Value::Null),
        CallFunc::Radians => num(0)
            .map(|x| Value::Float(x.to_radians()))
            .unwrap_or(Value::Null),
        CallFunc::Repeat => {
            let s = s0();
            match a.get(1).and_then(Value::as_i64) {
                Some(k) if k <= 0 => Value::Str(String::new()),
                Some(k) if (k as u128) * (s.len() as u128) <= REPEAT_BYTES_MAX as u128 => {
                    Value::Str(s.repeat(k as usize))
                }
                _ => Value::Null,
            }
        }
        CallFunc::Ascii => Value::Int(s0().bytes().next().map_or(0, i64::from)),
        CallFunc::Ln => num(0)
            .filter(|x| *x > 0.0)
            .map(|x| Value::Float(x.ln()))
            .unwrap_or(Value::Null),
        CallFunc::Sin => num(0).map(|x| Value::Float(x.sin())).unwrap_or(Value::Null),
        CallFunc::Cos => num(0).map(|x| Value::Float(x.cos())).unwrap_or(Value::Null),
        CallFunc::Tan => num(0).map(|x| Value::Float(x.tan())).unwrap_or(Value::Null),
        CallFunc::Sign => num(0)
            .map(|x| {
                Value::Int(if x > 0.0 {
                    1
                } else if x < 0.0 {
                    -1
                } else {
                    0
                })
            })
            .unwrap_or(Value::Null),
        CallFunc::Replace => {
            let from = a.get(1).map(text).unwrap_or_default();
            if from.is_empty() {
                return Value::Str(s0());
            }
            Value::Str(s0().replace(&from, &a.get(2).map(text).unwrap_or_default()))
        }
        CallFunc::TimeTruncate => {
            let (Some(t), Some(u)) = (a[0].as_i64(), a.get(1).and_then(Value::as_i64)) else {
                return Value::Null;
            };
            let u = u.max(1);
            Value::Timestamp(t.saturating_sub(t.rem_euclid(u)))
        }
        CallFunc::TimeDiff => {
            let (Some(x), Some(y)) = (a[0].as_i64(), a.get(1).and_then(Value::as_i64)) else {
                return Value::Null;
            };
            let u = a.get(2).and_then(Value::as_i64).unwrap_or(1).max(1);
            Value::Int(x.saturating_sub(y) / u)
        }
        CallFunc::ToIso8601 => {
            let (Some(t), Some(p)) = (a[0].as_i64(), a.get(1).and_then(Value::as_i64)) else {
                return Value::Null;
            };
            Value::Str(precision_of(p).format_timestamp(t).replacen(' ', "T", 1) + "+00:00")
        }
        CallFunc::ToUnixTimestamp => {
            let p = a.get(1).and_then(Value::as_i64).unwrap_or(1000);
            precision_of(p)
                .parse_timestamp(&s0())
                .map(Value::Int)
                .unwrap_or(Value::Null)
        }
        CallFunc::Mod => match (num(0), num(1)) {
            (Some(x), Some(y)) if y != 0.0 => Value::Float(x % y),
            _ => Value::Null,
        },
        CallFunc::Truncate => match (num(0), a.get(1).and_then(Value::as_i64)) {
            (Some(x), Some(d)) => {
                let p = 10f64.powi(d.clamp(-308, 308) as i32);
                let t = (x * p).trunc() / p;
                Value::Float(if t.is_finite() { t } else { x.trunc() })
            }
            _ => Value::Null,
        },
        CallFunc::Rand => Value::Float(rand_unit()),
        CallFunc::Weekday | CallFunc::Dayofweek | CallFunc::Weekofyear => {
            let (Some(t), Some(p)) = (a[0].as_i64(), a.get(1).and_then(Value::as_i64)) else {
                return Value::Null;
            };
            let v = match f {
                CallFunc::Weekday => crate::timefmt::weekday(t, p),
                CallFunc::Dayofweek => crate::timefmt::dayofweek(t, p),
                _ => crate::timefmt::weekofyear(t, p),
            };
            v.map(Value::Int).unwrap_or(Value::Null)
        }
        CallFunc::Week => match (
            a[0].as_i64(),
            a.get(1).and_then(Value::as_i64),
            a.get(2).and_then(Value::as_i64),
        ) {
            (Some(t), Some(mode), Some(p)) => crate::timefmt::week(t, p, mode)
                .map(Value::Int)
                .unwrap_or(Value::Null),
            _ => Value::Null,
        },
        CallFunc::ToChar => match (a[0].as_i64(), a.get(2).and_then(Value::as_i64)) {
            (Some(t), Some(p)) => {
                crate::timefmt::to_char(t, p, &a.get(1).map(text).unwrap_or_default())
                    .map(Value::Str)
                    .unwrap_or(Value::Null)
            }
            _ => Value::Null,
        },
        CallFunc::ToTimestamp => {
            let p = a.get(2).and_then(Value::as_i64).unwrap_or(1000);
            crate::timefmt::to_timestamp(&s0(), &a.get(1).map(text).unwrap_or_default(), p)
                .map(Value::Timestamp)
                .unwrap_or(Value::Null)
        }
        // answered before the NULL check
        CallFunc::ConcatWs
        | CallFunc::Pi
        | CallFunc::Char
        | CallFunc::Coalesce
        | CallFunc::Nvl2
        | CallFunc::NullIf
        | CallFunc::If => Value::Null,
    }
}

thread_local! {
    static RAND_STATE: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// A uniform double in [0, 1) from a per-thread xorshift64*, seeded from the clock and the
/// thread on first use (RAND is not for secrets).
fn rand_unit() -> f64 {
    RAND_STATE.with(|s| {
        let mut x = s.get();
        if x == 0 {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            let here = &x as *const u64 as u64;
            x = (now ^ here.rotate_left(32)) | 1;
        }
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        s.set(x);
        (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    })
}

fn bools(c: &Column, n: usize) -> (Vec<bool>, Vec<bool>) {
    let v = match &c.data {
        ColumnData::Bool(v) => v.clone(),
        ColumnData::Str(v) => v.iter().map(|s| !s.is_empty()).collect(),
        _ => f64s(c)
            .map(|x| x.iter().map(|f| *f != 0.0).collect())
            .unwrap_or_else(|| vec![false; n]),
    };
    (v, c.nulls.clone())
}

/// Rows where `c` is TRUE (not NULL).
pub fn true_rows(c: &Column, n: usize) -> Vec<usize> {
    let (v, nulls) = bools(c, n);
    (0..n)
        .filter(|&i| v.get(i).copied().unwrap_or(false) && !nulls.get(i).copied().unwrap_or(false))
        .collect()
}

fn logic(op: BinOp, a: &Column, b: &Column, n: usize) -> Column {
    let (av, an) = bools(a, n);
    let (bv, bn) = bools(b, n);
    let mut out = Vec::with_capacity(n);
    let mut nulls = Vec::new();
    let any_null = !an.is_empty() || !bn.is_empty();
    if any_null {
        nulls.reserve(n);
    }
    for i in 0..n {
        let x = if an.get(i).copied().unwrap_or(false) {
            None
        } else {
            Some(av[i])
        };
        let y = if bn.get(i).copied().unwrap_or(false) {
            None
        } else {
            Some(bv[i])
        };
        let r = match op {
            BinOp::And => match (x, y) {
                (Some(false), _) | (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            },
            _ => match (x, y) {
                (Some(true), _) | (_, Some(true)) => Some(true),
                (Some(false), Some(false)) => Some(false),
                _ => None,
            },
        };
        out.push(r.unwrap_or(false));
        if any_null {
            nulls.push(r.is_none());
        }
    }
    Column {
        data: ColumnData::Bool(out),
        nulls,
    }
}

fn cmp_result<T: PartialOrd>(op: BinOp, a: T, b: T) -> bool {
    match op {
        BinOp::Eq => a == b,
        BinOp::NotEq => a != b,
        BinOp::Lt => a < b,
        BinOp::LtEq => a <= b,
        BinOp::Gt => a > b,
        _ => a >= b,
    }
}

/// `x[i] op y[i]` for every i, the operator chosen once rather than per row.
fn cmp_all<T: PartialOrd>(op: BinOp, x: &[T], y: &[T]) -> Vec<bool> {
    let z = x.iter().zip(y);
    match op {
        BinOp::Eq => z.map(|(p, q)| p == q).collect(),
        BinOp::NotEq => z.map(|(p, q)| p != q).collect(),
        BinOp::Lt => z.map(|(p, q)| p < q).collect(),
        BinOp::LtEq => z.map(|(p, q)| p <= q).collect(),
        BinOp::Gt => z.map(|(p, q)| p > q).collect(),
        _ => z.map(|(p, q)| p >= q).collect(),
    }
}

/// `x[i] op y` for every i, the operator chosen once rather than per row.
fn cmp_each<T: PartialOrd>(op: BinOp, x: &[T], y: &T) -> Vec<bool> {
    let it = x.iter();
    match op {
        BinOp::Eq => it.map(|p| p == y).collect(),
        BinOp::NotEq => it.map(|p| p != y).collect(),
        BinOp::Lt => it.map(|p| p < y).collect(),
        BinOp::LtEq => it.map(|p| p <= y).collect(),
        BinOp::Gt => it.map(|p| p > y).collect(),
        _ => it.map(|p| p >= y).collect(),
    }
}

/// [`compare`] of `a` with a column of `n` copies of the constant `v` (of type `t`), without
/// building that column: the same conversions, so the same answers. `None` for the cases it
/// does not cover (a NULL or non-numeric constant, a string or boolean column), which
/// [`compare`] then handles.
fn compare_to_scalar(op: BinOp, a: &Column, v: &Value, t: DataType, n: usize) -> Option<Column> {
    if a.len() != n || matches!(a.data, ColumnData::Str(_) | ColumnData::Bool(_)) {
        return None;
    }
    // The constant as `compare` would see it: one row of its broadcast column.
    let one = Column::broadcast(v, t, 1);
    if !one.nulls.is_empty() {
        return None;
    }
    let out = match (&a.data, &one.data) {
        (
            ColumnData::Int(x) | ColumnData::Timestamp(x),
            ColumnData::Int(y) | ColumnData::Timestamp(y),
        ) => cmp_each(op, x, y.first()?),
        (_, ColumnData::Float(y)) => cmp_each(op, &f64s(a)?, y.first()?),
        (_, ColumnData::Int(y) | ColumnData::Timestamp(y)) => {
            cmp_each(op, &f64s(a)?, &(*y.first()? as f64))
        }
        (_, ColumnData::UInt(y)) => cmp_each(op, &f64s(a)?, &(*y.first()? as f64)),
        _ => return None,
    };
    Some(Column {
        data: ColumnData::Bool(out),
        nulls: a.nulls.clone(),
    })
}

fn compare(op: BinOp, a: &Column, b: &Column, n: usize) -> Column {
    let nulls = merge_nulls(a, b, n);
    let out: Vec<bool> = match (&a.data, &b.data) {
        (ColumnData::Str(x), ColumnData::Str(y)) => x
            .iter()
            .zip(y.iter())
            .map(|(p, q)| cmp_result(op, p, q))
            .collect(),
        _ => match (i64s(a), i64s(b)) {
            (Some(x), Some(y)) => cmp_all(op, x, y),
            _ => match (f64s(a), f64s(b)) {
                (Some(x), Some(y)) => cmp_all(op, &x, &y),
                _ => (0..n)
                    .map(|i| {
                        let o = a.get(i).total_cmp(&b.get(i));
                        cmp_result(op, o, std::cmp::Ordering::Equal)
                    })
                    .collect(),
            },
        },
    };
    Column {
        data: ColumnData::Bool(out),
        nulls,
    }
}

fn arith(op: BinOp, a: &Column, b: &Column, n: usize, t: DataType) -> Column {
    let mut nulls = merge_nulls(a, b, n);
    if t == DataType::Timestamp || t.physical() == PhysicalType::Int {
        let x: Vec<i64> = (0..n).map(|i| a.get(i).as_i64().unwrap_or(0)).collect();
        let y: Vec<i64> = (0..n).map(|i| b.get(i).as_i64().unwrap_or(0)).collect();
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let r = match op {
                BinOp::Add => Some(x[i].wrapping_add(y[i])),
                BinOp::Sub => Some(x[i].wrapping_sub(y[i])),
                BinOp::Mul => Some(x[i].wrapping_mul(y[i])),
                BinOp::Div => x[i].checked_div(y[i]),
                _ => x[i].checked_rem(y[i]),
            };
            if r.is_none() {
                if nulls.is_empty() {
                    nulls = vec![false; n];
                }
                nulls[i] = true;
            }
            out.push(r.unwrap_or(0));
        }
        let data = if t == DataType::Timestamp {
            ColumnData::Timestamp(out)
        } else {
            ColumnData::Int(out)
        };
        return Column { data, nulls };
    }
    let (Some(x), Some(y)) = (f64s(a), f64s(b)) else {
        return broadcast(&Value::Null, DataType::Double, n);
    };
    let f: fn(f64, f64) -> f64 = match op {
        BinOp::Add => |p, q| p + q,
        BinOp::Sub => |p, q| p - q,
        BinOp::Mul => |p, q| p * q,
        BinOp::Div => |p, q| p / q,
        _ => |p, q| p % q,
    };
    let mut out: Vec<f64> = x.iter().zip(y.iter()).map(|(p, q)| f(*p, *q)).collect();
    // division by zero yields NULL, as in TDengine
    for (i, v) in out.iter_mut().enumerate() {
        if !v.is_finite() && matches!(op, BinOp::Div | BinOp::Mod) && y[i] == 0.0 {
            if nulls.is_empty() {
                nulls = vec![false; n];
            }
            nulls[i] = true;
            *v = 0.0;
        }
    }
    Column {
        data: ColumnData::Float(out),
        nulls,
    }
}

fn cast(c: &Column, t: DataType, n: usize) -> Result<Column, SqlError> {
    let mut out = Column::empty(t, n);
    for i in 0..n {
        let v = c.get(i);
        let v = match (t.physical(), v) {
            (_, Value::Null) => Value::Null,
            (PhysicalType::Bool, v) => match v {
                Value::Str(s) => {
                    Value::Bool(!s.is_empty() && s != "0" && !s.eq_ignore_ascii_case("false"))
                }
                v => Value::Bool(v.as_f64().map(|f| f != 0.0).unwrap_or(false)),
            },
            (PhysicalType::Int, v) | (PhysicalType::Timestamp, v) => match v {
                Value::Str(s) => s
                    .trim()
                    .parse::<i64>()
                    .map(Value::Int)
                    .unwrap_or(Value::Null),
                Value::Float(f) => Value::Int(f as i64),
                v => Value::Int(v.as_i64().unwrap_or(0)),
            },
            (PhysicalType::UInt, v) => match v {
                Value::Str(s) => s
                    .trim()
                    .parse::<u64>()
                    .map(Value::UInt)
                    .unwrap_or(Value::Null),
                Value::UInt(u) => Value::UInt(u),
                Value::Float(f) => Value::UInt(f.max(0.0) as u64),
                v => Value::UInt(v.as_i64().unwrap_or(0) as u64),
            },
            (PhysicalType::Float, v) => match v {
                Value::Str(s) => s
                    .trim()
                    .parse::<f64>()
                    .map(Value::Float)
                    .unwrap_or(Value::Null),
                v => v.as_f64().map(Value::Float).unwrap_or(Value::Null),
            },
            (PhysicalType::Str, v) => Value::Str(v.to_string()),
        };
        let v = match (t, v) {
            (DataType::Timestamp, Value::Int(x)) => Value::Timestamp(x),
            (_, v) => v,
        };
        out.push(&v);
    }
    Ok(out)
}

/// Longest MATCH / NMATCH pattern accepted, in bytes.
pub const REGEX_PATTERN_BYTES_MAX: usize = 4096;
/// Most memory one compiled pattern may take (the regex crate's size limits): a pattern that
/// would compile to more is refused instead of taking the node's memory.
const REGEX_COMPILED_BYTES_MAX: usize = 1 << 20;
/// Compiled patterns kept per thread; past it the cache starts over.
const REGEX_CACHE_MAX: usize = 64;

thread_local! {
    static REGEXES: std::cell::RefCell<std::collections::HashMap<String, Arc<regex::Regex>>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

/// The compiled regular expression of a MATCH / NMATCH pattern (Rust `regex` syntax, which
/// takes TDengine's POSIX extended patterns: `^truck_1[0-9]$`, `(a|b)`, classes). Searches
/// anywhere in the value, as TDengine's does. Compiled once per thread and pattern, since a
/// fragment evaluates its filter once per batch.
pub fn regex_for(pattern: &str) -> Result<Arc<regex::Regex>, SqlError> {
    if pattern.len() > REGEX_PATTERN_BYTES_MAX {
        return Err(SqlError::Plan(format!(
            "regular expression of {} bytes; at most {REGEX_PATTERN_BYTES_MAX} are accepted",
            pattern.len()
        )));
    }
    if let Some(re) = REGEXES.with(|c| c.borrow().get(pattern).cloned()) {
        return Ok(re);
    }
    let re = regex::RegexBuilder::new(pattern)
        .size_limit(REGEX_COMPILED_BYTES_MAX)
        .dfa_size_limit(REGEX_COMPILED_BYTES_MAX)
        .build()
        .map(Arc::new)
        .map_err(|e| {
            let why = match e {
                regex::Error::CompiledTooBig(_) => {
                    "it would compile to more than 1 MiB".to_string()
                }
                // The crate's syntax errors draw the pattern with a caret over several
                // lines; the last line says what is wrong, and the message stays one line.
                e => {
                    let text = e.to_string();
                    let last = text.lines().map(str::trim).rfind(|l| !l.is_empty());
                    last.unwrap_or_default()
                        .trim_start_matches("error: ")
                        .to_string()
                }
            };
            SqlError::Plan(format!("invalid regular expression '{pattern}': {why}"))
        })?;
    REGEXES.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() >= REGEX_CACHE_MAX {
            c.clear();
        }
        c.insert(pattern.to_string(), re.clone());
    });
    Ok(re)
}

/// SQL LIKE with `%` and `_` (and `\` escapes).
pub fn like(s: &[char], p: &[char]) -> bool {
    // iterative matcher with backtracking on the last '%'
    let (mut si, mut pi) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if pi < p.len() && p[pi] == '\\' && pi + 1 < p.len() && p[pi + 1] == s[si] {
            si += 1;
            pi += 2;
        } else if pi < p.len()
            && (p[pi] == '_' || (p[pi] == s[si] && p[pi] != '%' && p[pi] != '\\'))
        {
            si += 1;
            pi += 1;
        } else if pi < p.len() && p[pi] == '%' {
            star = Some((pi, si));
            pi += 1;
        } else if let Some((sp, ss)) = star {
            pi = sp + 1;
            si = ss + 1;
            star = Some((sp, ss + 1));
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '%' {
        pi += 1;
    }
    pi == p.len()
}

#[cfg(test)]
mod window_start_tests {
    use super::window_starts;

    #[test]
    fn reused_windows_match_the_formula_everywhere() {
        let formula = |t: i64, iv: i64, off: i64| {
            let iv = iv.max(1);
            t.saturating_sub(t.saturating_sub(off).rem_euclid(iv))
        };
        let mut ts: Vec<i64> = vec![
            i64::MIN,
            i64::MIN + 1,
            i64::MIN + 599,
            -1_000_001,
            -601,
            -600,
            -599,
            -1,
            0,
            1,
            599,
            600,
            601,
            1_451_606_400_000,
            1_451_606_400_599,
            1_451_606_400_600,
            i64::MAX - 600,
            i64::MAX - 1,
            i64::MAX,
        ];
        // in order, out of order and repeated, as scans and subqueries give them
        let mut x: u64 = 99;
        for _ in 0..2000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ts.push(match x % 3 {
                0 => (x >> 2) as i64,
                1 => 1_451_606_400_000 + (x % 100_000) as i64,
                _ => *ts.last().unwrap_or(&0),
            });
        }
        let mut sorted = ts.clone();
        sorted.sort_unstable();
        for (iv, off) in [
            (600, 0),
            (600, 17),
            (600, -17),
            (1, 0),
            (0, 0),
            (7, i64::MIN),
            (i64::MAX, 3),
        ] {
            for input in [&ts, &sorted] {
                let got = window_starts(input.iter().copied(), iv, off);
                for (i, t) in input.iter().enumerate() {
                    assert_eq!(
                        got[i],
                        formula(*t, iv, off),
                        "ts {t} interval {iv} offset {off}"
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod scalar_compare_tests {
    use super::*;

    /// A comparison with a constant answers as the comparison with a column of copies of it:
    /// every operator, column type (with NULLs and NaN) and numeric constant type; the cases
    /// it leaves to `compare` are left there.
    #[test]
    fn comparing_with_a_constant_answers_as_with_its_broadcast_column() {
        let with_nulls = |data: ColumnData| {
            let n = data.len();
            Column {
                data,
                nulls: (0..n).map(|i| i % 3 == 2).collect(),
            }
        };
        let columns = [
            Column::new(ColumnData::Float(vec![0.05, 0.1, 0.2, f64::NAN, -1.0, 3.0])),
            with_nulls(ColumnData::Float(vec![0.05, 0.1, 0.2, 0.1, -1.0, 3.0])),
            Column::new(ColumnData::Int(vec![-3, 0, 1, 2, 3, i64::MAX])),
            with_nulls(ColumnData::Timestamp(vec![5, 6, 7, 8, 9, 10])),
            Column::new(ColumnData::UInt(vec![0, 1, 2, 3, u64::MAX, 7])),
            Column::new(ColumnData::Bool(vec![true, false, true, false, true, true])),
        ];
        let constants = [
            (Value::Float(0.1), DataType::Double),
            (Value::Int(2), DataType::BigInt),
            (Value::Int(2), DataType::Double),
            (Value::Timestamp(7), DataType::Timestamp),
            (Value::UInt(3), DataType::UBigInt),
            (Value::Bool(true), DataType::Bool),
            (Value::Null, DataType::Double),
        ];
        let mut covered = 0;
        for a in &columns {
            let n = a.len();
            for (v, t) in &constants {
                for op in BinOp::COMPARISONS {
                    let want = compare(op, a, &broadcast(v, *t, n), n);
                    if let Some(got) = compare_to_scalar(op, a, v, *t, n) {
                        assert_eq!(got, want, "{a:?} {op:?} {v:?} as {t:?}");
                        covered += 1;
                    }
                    // The constant on the left: the flipped comparison.
                    let lit = PExpr::Lit(v.clone(), *t);
                    let e = PExpr::Bin(
                        op,
                        Box::new(lit),
                        Box::new(PExpr::Input(0, DataType::Double)),
                        DataType::Bool,
                    );
                    let left = eval(&e, std::slice::from_ref(a), n).unwrap();
                    let want = compare(op, &broadcast(v, *t, n), a, n);
                    assert_eq!(left, want, "{v:?} {op:?} {a:?}");
                }
            }
        }
        // Five numeric columns by five numeric constants by six operators: the fast path; the
        // boolean column and the boolean and NULL constants: `compare`.
        assert_eq!(covered, 150);
    }
}
