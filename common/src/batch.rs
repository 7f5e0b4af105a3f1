//! Column batches: the unit that scans produce, operators consume and the wire carries.

use crate::types::{DataType, PhysicalType, Value};
use serde::{Deserialize, Serialize};

/// The values of one column. Null slots hold a placeholder (0, false, "") and are marked in
/// [`Column::nulls`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ColumnData {
    Bool(Vec<bool>),
    Int(Vec<i64>),
    UInt(Vec<u64>),
    Float(Vec<f64>),
    Str(Vec<String>),
    Timestamp(Vec<i64>),
}

impl ColumnData {
    pub fn len(&self) -> usize {
        match self {
            ColumnData::Bool(v) => v.len(),
            ColumnData::Int(v) | ColumnData::Timestamp(v) => v.len(),
            ColumnData::UInt(v) => v.len(),
            ColumnData::Float(v) => v.len(),
            ColumnData::Str(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn empty(t: DataType, capacity: usize) -> ColumnData {
        match t.physical() {
            PhysicalType::Bool => ColumnData::Bool(Vec::with_capacity(capacity)),
            PhysicalType::Int => ColumnData::Int(Vec::with_capacity(capacity)),
            PhysicalType::UInt => ColumnData::UInt(Vec::with_capacity(capacity)),
            PhysicalType::Float => ColumnData::Float(Vec::with_capacity(capacity)),
            PhysicalType::Str => ColumnData::Str(Vec::with_capacity(capacity)),
            PhysicalType::Timestamp => ColumnData::Timestamp(Vec::with_capacity(capacity)),
        }
    }
}

/// One column: values plus a null mask (`nulls[i] == true` means row i is NULL).
/// An empty `nulls` vector means "no NULLs" so that dense columns cost nothing extra.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Column {
    pub data: ColumnData,
    pub nulls: Vec<bool>,
}

impl Column {
    pub fn new(data: ColumnData) -> Column {
        Column {
            data,
            nulls: Vec::new(),
        }
    }

    pub fn empty(t: DataType, capacity: usize) -> Column {
        Column::new(ColumnData::empty(t, capacity))
    }

    /// `n` rows of `v` as a column of type `t`: a value of another type is converted (numbers
    /// to the column's number type) or, where it cannot be, NULL.
    pub fn broadcast(v: &Value, t: DataType, n: usize) -> Column {
        let data = match (t.physical(), v) {
            (_, Value::Null) => {
                let mut c = Column::empty(t, n);
                for _ in 0..n {
                    c.push(&Value::Null);
                }
                return c;
            }
            (PhysicalType::Bool, Value::Bool(b)) => ColumnData::Bool(vec![*b; n]),
            (PhysicalType::Int, v) => ColumnData::Int(vec![v.as_i64().unwrap_or(0); n]),
            (PhysicalType::Timestamp, v) => ColumnData::Timestamp(vec![v.as_i64().unwrap_or(0); n]),
            (PhysicalType::UInt, Value::UInt(u)) => ColumnData::UInt(vec![*u; n]),
            (PhysicalType::UInt, v) => {
                ColumnData::UInt(vec![v.as_i64().unwrap_or(0).max(0) as u64; n])
            }
            (PhysicalType::Float, v) => ColumnData::Float(vec![v.as_f64().unwrap_or(0.0); n]),
            (PhysicalType::Str, Value::Str(s)) => ColumnData::Str(vec![s.clone(); n]),
            (_, v) => {
                let mut c = Column::empty(t, n);
                for _ in 0..n {
                    c.push(v);
                }
                return c;
            }
        };
        Column::new(data)
    }

    /// Appends a tag value to this column of the tag's type `t`, converted as
    /// [`Column::broadcast`] converts it (a tag keeps the value it was created with when its
    /// type is altered).
    pub fn push_tag(&mut self, t: DataType, v: &Value) {
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
            self.push(v);
        } else {
            self.extend(&Column::broadcast(v, t, 1));
        }
    }

    pub fn len(&self) -> usize {
        self.data.len()
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// `n` NULLs of type `t` (a column that did not exist when the rows were written).
    pub fn all_null(t: DataType, n: usize) -> Column {
        let data = match t.physical() {
            PhysicalType::Bool => ColumnData::Bool(vec![false; n]),
            PhysicalType::Int => ColumnData::Int(vec![0; n]),
            PhysicalType::UInt => ColumnData::UInt(vec![0; n]),
            PhysicalType::Float => ColumnData::Float(vec![0.0; n]),
            PhysicalType::Str => ColumnData::Str(vec![String::new(); n]),
            PhysicalType::Timestamp => ColumnData::Timestamp(vec![0; n]),
        };
        Column {
            data,
            nulls: vec![true; n],
        }
    }

    /// Rows `start..end` (clamped to the column's length).
    pub fn slice(&self, start: usize, end: usize) -> Column {
        let end = end.min(self.len());
        let start = start.min(end);
        fn cut<T: Clone>(v: &[T], s: usize, e: usize) -> Vec<T> {
            v.get(s..e).map(|x| x.to_vec()).unwrap_or_default()
        }
        let data = match &self.data {
            ColumnData::Bool(d) => ColumnData::Bool(cut(d, start, end)),
            ColumnData::Int(d) => ColumnData::Int(cut(d, start, end)),
            ColumnData::UInt(d) => ColumnData::UInt(cut(d, start, end)),
            ColumnData::Float(d) => ColumnData::Float(cut(d, start, end)),
            ColumnData::Str(d) => ColumnData::Str(cut(d, start, end)),
            ColumnData::Timestamp(d) => ColumnData::Timestamp(cut(d, start, end)),
        };
        let nulls = if self.nulls.is_empty() {
            Vec::new()
        } else {
            let n = cut(&self.nulls, start, end);
            if n.iter().any(|b| *b) {
                n
            } else {
                Vec::new()
            }
        };
        Column { data, nulls }
    }

    pub fn is_null(&self, i: usize) -> bool {
        self.nulls.get(i).copied().unwrap_or(false)
    }

    /// Cuts the column to its first `len` rows (a longer `len` leaves it as it is).
    pub fn truncate(&mut self, len: usize) {
        match &mut self.data {
            ColumnData::Bool(v) => v.truncate(len),
            ColumnData::Int(v) | ColumnData::Timestamp(v) => v.truncate(len),
            ColumnData::UInt(v) => v.truncate(len),
            ColumnData::Float(v) => v.truncate(len),
            ColumnData::Str(v) => v.truncate(len),
        }
        self.nulls.truncate(len);
    }

    pub fn null_count(&self) -> usize {
        self.nulls.iter().filter(|n| **n).count()
    }

    /// Appends a value that has already been coerced to this column's type; a value of another
    /// physical type is stored as NULL (callers coerce first, so this is a safety net, not a path).
    pub fn push(&mut self, v: &Value) {
        let len = self.len();
        let mut null = false;
        match (&mut self.data, v) {
            (ColumnData::Bool(d), Value::Bool(b)) => d.push(*b),
            (ColumnData::Int(d), Value::Int(i)) => d.push(*i),
            (ColumnData::Int(d), Value::Timestamp(i)) => d.push(*i),
            (ColumnData::UInt(d), Value::UInt(u)) => d.push(*u),
            (ColumnData::Float(d), Value::Float(f)) => d.push(*f),
            (ColumnData::Float(d), Value::Int(i)) => d.push(*i as f64),
            (ColumnData::Str(d), Value::Str(s)) => d.push(s.clone()),
            (ColumnData::Timestamp(d), Value::Timestamp(t)) => d.push(*t),
            (ColumnData::Timestamp(d), Value::Int(t)) => d.push(*t),
            (data, _) => {
                null = true;
                match data {
                    ColumnData::Bool(d) => d.push(false),
                    ColumnData::Int(d) | ColumnData::Timestamp(d) => d.push(0),
                    ColumnData::UInt(d) => d.push(0),
                    ColumnData::Float(d) => d.push(0.0),
                    ColumnData::Str(d) => d.push(String::new()),
                }
            }
        }
        if null {
            if self.nulls.is_empty() {
                self.start_nulls(len);
            }
            self.nulls.push(true);
        } else if !self.nulls.is_empty() {
            self.nulls.push(false);
        }
    }

    /// NULL flags for the first `len` rows, none set, with room for as many rows as the
    /// values have: a column's flags appear at its first NULL and then grow with every row
    /// appended, and grown from `len` they were reallocated and copied every few rows.
    pub fn start_nulls(&mut self, len: usize) {
        let mut nulls = Vec::with_capacity(self.capacity().max(len));
        nulls.resize(len, false);
        self.nulls = nulls;
    }

    pub fn get(&self, i: usize) -> Value {
        if self.is_null(i) {
            return Value::Null;
        }
        match &self.data {
            ColumnData::Bool(d) => d.get(i).map(|b| Value::Bool(*b)),
            ColumnData::Int(d) => d.get(i).map(|x| Value::Int(*x)),
            ColumnData::UInt(d) => d.get(i).map(|x| Value::UInt(*x)),
            ColumnData::Float(d) => d.get(i).map(|x| Value::Float(*x)),
            ColumnData::Str(d) => d.get(i).map(|x| Value::Str(x.clone())),
            ColumnData::Timestamp(d) => d.get(i).map(|x| Value::Timestamp(*x)),
        }
        .unwrap_or(Value::Null)
    }

    /// Keeps the rows whose index is listed in `idx` (in that order).
    pub fn take(&self, idx: &[usize]) -> Column {
        fn pick<T: Clone>(v: &[T], idx: &[usize]) -> Vec<T> {
            // Checked first, so that the gather itself is sized exactly and has no branch.
            if idx.iter().all(|&i| i < v.len()) {
                idx.iter().map(|&i| v[i].clone()).collect()
            } else {
                idx.iter().filter_map(|i| v.get(*i).cloned()).collect()
            }
        }
        let data = match &self.data {
            ColumnData::Bool(d) => ColumnData::Bool(pick(d, idx)),
            ColumnData::Int(d) => ColumnData::Int(pick(d, idx)),
            ColumnData::UInt(d) => ColumnData::UInt(pick(d, idx)),
            ColumnData::Float(d) => ColumnData::Float(pick(d, idx)),
            ColumnData::Str(d) => ColumnData::Str(pick(d, idx)),
            ColumnData::Timestamp(d) => ColumnData::Timestamp(pick(d, idx)),
        };
        let nulls = if self.nulls.is_empty() {
            Vec::new()
        } else {
            pick(&self.nulls, idx)
        };
        Column { data, nulls }
    }

    /// The physical type this column's data holds.
    pub fn physical(&self) -> PhysicalType {
        match &self.data {
            ColumnData::Bool(_) => PhysicalType::Bool,
            ColumnData::Int(_) => PhysicalType::Int,
            ColumnData::UInt(_) => PhysicalType::UInt,
            ColumnData::Float(_) => PhysicalType::Float,
            ColumnData::Str(_) => PhysicalType::Str,
            ColumnData::Timestamp(_) => PhysicalType::Timestamp,
        }
    }

    fn mark_null(&mut self, g: usize, null: bool) {
        if null {
            if self.nulls.is_empty() {
                self.nulls = vec![false; self.len()];
            }
            if let Some(n) = self.nulls.get_mut(g) {
                *n = true;
            }
        } else if let Some(n) = self.nulls.get_mut(g) {
            *n = false;
        }
    }

    /// Appends row `i` of `other` without going through [`Value`] when both hold the same
    /// physical type (otherwise the value is coerced as [`Column::push`] does).
    pub fn push_row(&mut self, other: &Column, i: usize) {
        if other.is_null(i) || i >= other.len() {
            self.push(&Value::Null);
            return;
        }
        let len = self.len();
        match (&mut self.data, &other.data) {
            (ColumnData::Bool(a), ColumnData::Bool(b)) => a.push(b[i]),
            (ColumnData::Int(a), ColumnData::Int(b)) => a.push(b[i]),
            (ColumnData::UInt(a), ColumnData::UInt(b)) => a.push(b[i]),
            (ColumnData::Float(a), ColumnData::Float(b)) => a.push(b[i]),
            (ColumnData::Str(a), ColumnData::Str(b)) => a.push(b[i].clone()),
            (ColumnData::Timestamp(a), ColumnData::Timestamp(b)) => a.push(b[i]),
            _ => {
                self.push(&other.get(i));
                return;
            }
        }
        if !self.nulls.is_empty() {
            self.nulls.push(false);
        }
        debug_assert_eq!(self.len(), len + 1);
    }

    /// Overwrites row `g` with `v` (coerced as [`Column::push`] does; a value of another
    /// physical type becomes NULL). Does nothing when `g` is out of range.
    pub fn set(&mut self, g: usize, v: &Value) {
        if g >= self.len() {
            return;
        }
        let ok = match (&mut self.data, v) {
            (_, Value::Null) => false,
            (ColumnData::Bool(d), Value::Bool(b)) => {
                d[g] = *b;
                true
            }
            (ColumnData::Int(d), Value::Int(x) | Value::Timestamp(x))
            | (ColumnData::Timestamp(d), Value::Int(x) | Value::Timestamp(x)) => {
                d[g] = *x;
                true
            }
            (ColumnData::UInt(d), Value::UInt(x)) => {
                d[g] = *x;
                true
            }
            (ColumnData::Float(d), Value::Float(x)) => {
                d[g] = *x;
                true
            }
            (ColumnData::Float(d), Value::Int(x)) => {
                d[g] = *x as f64;
                true
            }
            (ColumnData::Str(d), Value::Str(x)) => {
                d[g].clone_from(x);
                true
            }
            _ => false,
        };
        self.mark_null(g, !ok);
    }

    /// Overwrites row `g` with row `i` of `other` (see [`Column::push_row`]).
    pub fn set_row(&mut self, g: usize, other: &Column, i: usize) {
        if g >= self.len() {
            return;
        }
        if other.is_null(i) || i >= other.len() {
            self.mark_null(g, true);
            return;
        }
        match (&mut self.data, &other.data) {
            (ColumnData::Bool(a), ColumnData::Bool(b)) => a[g] = b[i],
            (ColumnData::Int(a), ColumnData::Int(b)) => a[g] = b[i],
            (ColumnData::UInt(a), ColumnData::UInt(b)) => a[g] = b[i],
            (ColumnData::Float(a), ColumnData::Float(b)) => a[g] = b[i],
            (ColumnData::Str(a), ColumnData::Str(b)) => a[g].clone_from(&b[i]),
            (ColumnData::Timestamp(a), ColumnData::Timestamp(b)) => a[g] = b[i],
            _ => {
                self.set(g, &other.get(i));
                return;
            }
        }
        self.mark_null(g, false);
    }

    /// This column with the physical type of `t`: itself when it already has it, otherwise
    /// its values converted one by one as [`Column::push`] coerces them (timestamps and
    /// integers into each other, integers into floats; anything else becomes NULL).
    pub fn conformed(self, t: DataType) -> Column {
        if self.physical() == t.physical() {
            return self;
        }
        let mut out = Column::empty(t, self.len());
        for i in 0..self.len() {
            let v = match (t.physical(), self.get(i)) {
                (PhysicalType::Timestamp, Value::Int(x)) => Value::Timestamp(x),
                (PhysicalType::Int, Value::Timestamp(x)) => Value::Int(x),
                (PhysicalType::Float, Value::Int(x)) => Value::Float(x as f64),
                (_, v) => v,
            };
            out.push(&v);
        }
        out
    }

    /// Makes room for `additional` more rows without reallocating (and for their NULL flags
    /// when the column has any).
    pub fn reserve(&mut self, additional: usize) {
        match &mut self.data {
            ColumnData::Bool(v) => v.reserve(additional),
            ColumnData::Int(v) | ColumnData::Timestamp(v) => v.reserve(additional),
            ColumnData::UInt(v) => v.reserve(additional),
            ColumnData::Float(v) => v.reserve(additional),
            ColumnData::Str(v) => v.reserve(additional),
        }
        if !self.nulls.is_empty() {
            self.nulls.reserve(additional);
        }
    }

    /// Rows the column holds room for.
    pub fn capacity(&self) -> usize {
        match &self.data {
            ColumnData::Bool(v) => v.capacity(),
            ColumnData::Int(v) | ColumnData::Timestamp(v) => v.capacity(),
            ColumnData::UInt(v) => v.capacity(),
            ColumnData::Float(v) => v.capacity(),
            ColumnData::Str(v) => v.capacity(),
        }
    }

    /// Appends all rows of `other` (same physical type; otherwise its rows become NULL).
    pub fn extend(&mut self, other: &Column) {
        let same = std::mem::discriminant(&self.data) == std::mem::discriminant(&other.data);
        if !same {
            for i in 0..other.len() {
                self.push(&Value::Null);
                let _ = i;
            }
            return;
        }
        let len = self.len();
        match (&mut self.data, &other.data) {
            (ColumnData::Bool(a), ColumnData::Bool(b)) => a.extend_from_slice(b),
            (ColumnData::Int(a), ColumnData::Int(b)) => a.extend_from_slice(b),
            (ColumnData::UInt(a), ColumnData::UInt(b)) => a.extend_from_slice(b),
            (ColumnData::Float(a), ColumnData::Float(b)) => a.extend_from_slice(b),
            (ColumnData::Str(a), ColumnData::Str(b)) => a.extend_from_slice(b),
            (ColumnData::Timestamp(a), ColumnData::Timestamp(b)) => a.extend_from_slice(b),
            _ => {}
        }
        self.extend_nulls(len, &other.nulls, other.len());
    }

    /// The null flags after `other_len` rows with flags `other_nulls` (empty: none NULL) were
    /// appended to the first `len` rows; kept empty while no row is NULL.
    fn extend_nulls(&mut self, len: usize, other_nulls: &[bool], other_len: usize) {
        if !other_nulls.is_empty() || !self.nulls.is_empty() {
            if self.nulls.is_empty() {
                self.start_nulls(len);
            }
            if other_nulls.is_empty() {
                self.nulls.extend(std::iter::repeat_n(false, other_len));
            } else {
                self.nulls.extend_from_slice(other_nulls);
            }
        }
    }
}

impl Column {
    /// [`Column::extend`] taking `other` by value: its strings move instead of being copied,
    /// and an empty column becomes `other` whole (gathering results moves every row once).
    pub fn extend_owned(&mut self, other: Column) {
        let same = std::mem::discriminant(&self.data) == std::mem::discriminant(&other.data);
        if !same {
            self.extend(&other);
            return;
        }
        // An empty column becomes `other` unless it was given room for more than `other`.
        if self.is_empty() && self.capacity() <= other.len() {
            *self = other;
            return;
        }
        let len = self.len();
        let other_len = other.len();
        match (&mut self.data, other.data) {
            (ColumnData::Str(a), ColumnData::Str(b)) => a.extend(b),
            (ColumnData::Bool(a), ColumnData::Bool(b)) => a.extend_from_slice(&b),
            (ColumnData::Int(a), ColumnData::Int(b))
            | (ColumnData::Timestamp(a), ColumnData::Timestamp(b)) => a.extend_from_slice(&b),
            (ColumnData::UInt(a), ColumnData::UInt(b)) => a.extend_from_slice(&b),
            (ColumnData::Float(a), ColumnData::Float(b)) => a.extend_from_slice(&b),
            _ => {}
        }
        self.extend_nulls(len, &other.nulls, other_len);
    }
}

/// A named, typed output column of a batch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Field {
    pub name: String,
    pub data_type: DataType,
}

impl Field {
    pub fn new(name: impl Into<String>, data_type: DataType) -> Field {
        Field {
            name: name.into(),
            data_type,
        }
    }
}

/// A set of equally long columns with their fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Batch {
    pub fields: Vec<Field>,
    pub columns: Vec<Column>,
}

impl Batch {
    pub fn new(fields: Vec<Field>, columns: Vec<Column>) -> Batch {
        debug_assert_eq!(fields.len(), columns.len());
        debug_assert!(columns.windows(2).all(|w| w[0].len() == w[1].len()));
        Batch { fields, columns }
    }

    pub fn empty(fields: Vec<Field>) -> Batch {
        let columns = fields
            .iter()
            .map(|f| Column::empty(f.data_type, 0))
            .collect();
        Batch { fields, columns }
    }

    pub fn num_rows(&self) -> usize {
        self.columns.first().map(Column::len).unwrap_or(0)
    }

    pub fn num_columns(&self) -> usize {
        self.columns.len()
    }

    pub fn row(&self, i: usize) -> Vec<Value> {
        self.columns.iter().map(|c| c.get(i)).collect()
    }

    /// Builds a batch from rows of already-coerced values.
    pub fn from_rows(fields: Vec<Field>, rows: &[Vec<Value>]) -> Batch {
        let mut columns: Vec<Column> = fields
            .iter()
            .map(|f| Column::empty(f.data_type, rows.len()))
            .collect();
        for r in rows {
            for (c, v) in columns.iter_mut().zip(r.iter()) {
                c.push(v);
            }
        }
        Batch { fields, columns }
    }

    /// Appends another batch with the same fields.
    pub fn append(&mut self, other: &Batch) {
        for (a, b) in self.columns.iter_mut().zip(other.columns.iter()) {
            a.extend(b);
        }
    }

    /// [`Batch::append`] taking `other` by value (see [`Column::extend_owned`]).
    pub fn append_owned(&mut self, other: Batch) {
        for (a, b) in self.columns.iter_mut().zip(other.columns) {
            a.extend_owned(b);
        }
    }

    pub fn take(&self, idx: &[usize]) -> Batch {
        Batch {
            fields: self.fields.clone(),
            columns: self.columns.iter().map(|c| c.take(idx)).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_row_push_row_and_conformed_keep_values_and_nulls() {
        let mut src = Column::empty(DataType::VarChar(8), 3);
        for v in [Value::Str("a".into()), Value::Null, Value::Str("c".into())] {
            src.push(&v);
        }
        let mut dst = Column::empty(DataType::VarChar(8), 0);
        dst.push_row(&src, 2);
        dst.push_row(&src, 1);
        assert_eq!(dst.get(0), Value::Str("c".into()));
        assert_eq!(dst.get(1), Value::Null);
        dst.set_row(1, &src, 0);
        dst.set_row(0, &src, 1);
        assert_eq!(
            (dst.get(0), dst.get(1)),
            (Value::Null, Value::Str("a".into()))
        );
        dst.set(0, &Value::Str("z".into()));
        assert_eq!(dst.get(0), Value::Str("z".into()));
        // out of range: nothing happens, nothing panics
        dst.set_row(9, &src, 0);
        dst.set_row(0, &src, 9);
        assert_eq!(dst.get(0), Value::Null);
        // another physical type is coerced as push does
        let mut f = Column::empty(DataType::Double, 0);
        f.push_row(&Column::new(ColumnData::Int(vec![3])), 0);
        assert_eq!(f.get(0), Value::Float(3.0));
        let ts = Column::new(ColumnData::Int(vec![5, 6])).conformed(DataType::Timestamp);
        assert_eq!(ts.data, ColumnData::Timestamp(vec![5, 6]));
        let same = Column::new(ColumnData::Float(vec![1.5])).conformed(DataType::Double);
        assert_eq!(same.get(0), Value::Float(1.5));
    }

    #[test]
    fn truncate_cuts_values_and_mask_together() {
        let mut c = Column::empty(DataType::Double, 4);
        for v in [Value::Float(1.0), Value::Null, Value::Float(3.0)] {
            c.push(&v);
        }
        c.truncate(5);
        assert_eq!(c.len(), 3);
        c.truncate(2);
        assert_eq!((c.len(), c.nulls.len()), (2, 2));
        assert_eq!(c.get(1), Value::Null);
        c.push(&Value::Float(4.0));
        assert_eq!(c.get(2), Value::Float(4.0));
        c.truncate(0);
        assert!(c.is_empty() && c.nulls.is_empty());
    }

    #[test]
    fn push_null_creates_mask_lazily() {
        let mut c = Column::empty(DataType::Double, 4);
        c.push(&Value::Float(1.0));
        assert!(c.nulls.is_empty());
        c.push(&Value::Null);
        c.push(&Value::Float(3.0));
        assert_eq!(c.nulls, vec![false, true, false]);
        assert_eq!(c.get(1), Value::Null);
        assert_eq!(c.get(2), Value::Float(3.0));
        assert_eq!(c.null_count(), 1);
    }

    #[test]
    fn extend_merges_masks() {
        let mut a = Column::empty(DataType::BigInt, 2);
        a.push(&Value::Int(1));
        let mut b = Column::empty(DataType::BigInt, 2);
        b.push(&Value::Null);
        a.extend(&b);
        assert_eq!(a.get(0), Value::Int(1));
        assert_eq!(a.get(1), Value::Null);
        let t = a.take(&[1, 0]);
        assert_eq!(t.get(0), Value::Null);
        assert_eq!(t.get(1), Value::Int(1));
    }
}
