//! Write batches: rows for many subtables of one vgroup, columnar per subtable
//! ([`TableWrite`]) or per STABLE ([`RowBlock`]).

use crate::batch::{Column, ColumnData};
use crate::ids::VgroupId;
use crate::schema::StableSchema;
use crate::types::{DataType, Value};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// A subtable's tag values as a [`RowBlock`] holds them: shared, because a writer keeps the
/// tags of a new subtable for every batch until one is acknowledged, and a block that is
/// split or merged hands them on; with 100,000s of new subtables, copying each list (a
/// string per tag) at every hand-over was a tenth of a loader's CPU.
pub type Tags = Arc<[Value]>;

/// The rows of a block's `runs` (table index, row count), regrouped so that each group's rows
/// lie together: the order to gather the rows in (groups in index order, each group's rows
/// in block order, so a later row of a ts still wins) and the runs (group, rows) over that
/// order. `group_of` names a run's group; a run whose group is not below `groups` is left
/// out of both. The runs must hold fewer than 2^32 rows in all (a block's rows are numbered
/// in `u32`; both callers' blocks are far smaller).
///
/// Why one counting sort for writer and server: a time-ordered source (a TSBS file, any log)
/// cycles through its devices, so nearly every run of its blocks is one row. The loader
/// groups a block by subtable before sending it; the memtable groups what other writers
/// send by subtable uid before appending it.
pub fn group_runs(
    runs: &[(u32, u32)],
    groups: usize,
    group_of: impl Fn(u32) -> u32,
) -> (Vec<u32>, Vec<(u32, u32)>) {
    let mut count = vec![0usize; groups];
    for &(t, n) in runs {
        if let Some(c) = count.get_mut(group_of(t) as usize) {
            *c += n as usize;
        }
    }
    let mut next = Vec::with_capacity(groups);
    let mut grouped = Vec::new();
    let mut at = 0usize;
    for (g, &c) in count.iter().enumerate() {
        next.push(at);
        at += c;
        if c > 0 {
            grouped.push((g as u32, c as u32));
        }
    }
    let mut order = vec![0u32; at];
    let mut row = 0u32;
    for &(t, n) in runs {
        if let Some(slot) = next.get_mut(group_of(t) as usize) {
            // Always in range: the counts came from these runs.
            if let Some(dst) = order.get_mut(*slot..*slot + n as usize) {
                for (o, r) in dst.iter_mut().zip(row..) {
                    *o = r;
                }
            }
            *slot += n as usize;
        }
        row = row.wrapping_add(n);
    }
    (order, grouped)
}

/// Rows for one subtable. `columns` follows the STABLE's column template exactly
/// (`columns[0]` is the TIMESTAMP key and has no NULLs); values are already coerced to the
/// column types. Rows need not be ordered; a repeated ts means the later row wins.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TableWrite {
    pub table: String,
    pub stable: String,
    /// Tag values for auto-creation (`INSERT ... USING st TAGS (...)`, line protocol). Ignored
    /// when the table already exists, as TDengine does.
    pub tags: Option<Vec<Value>>,
    pub columns: Vec<Column>,
}

impl TableWrite {
    pub fn num_rows(&self) -> usize {
        self.columns.first().map(Column::len).unwrap_or(0)
    }
}

/// One write request to one vgroup. `schemas` carries the schema of every STABLE that the
/// tables reference so that the vnode can validate without calling the mnode.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WriteBatch {
    pub db: String,
    pub vgroup: VgroupId,
    pub schemas: Vec<StableSchema>,
    pub tables: Vec<TableWrite>,
    /// Rows of many subtables per STABLE (the Writer's form); applied after `tables`.
    #[serde(default)]
    pub blocks: Vec<RowBlock>,
}

impl WriteBatch {
    pub fn num_rows(&self) -> usize {
        self.tables.iter().map(TableWrite::num_rows).sum::<usize>()
            + self.blocks.iter().map(RowBlock::num_rows).sum::<usize>()
    }
}

/// Rows of many subtables of one STABLE as ONE set of columns: the batching Writer's unit and
/// its wire form. A batch that holds a few rows of each of thousands of subtables then costs
/// per row (a few column appends) rather than per subtable (a `TableWrite` with its own
/// vectors), on the client, on the wire and in the vnode.
///
/// The subtables are listed once each (names concatenated in one string); the rows come in
/// runs, each run the consecutive rows of one subtable, in write order (a later run's row
/// replaces an earlier one with the same ts, as for repeated `TableWrite`s).
///
/// Invariants (kept by the methods, checked by [`RowBlock::from_parts`]): `ends` is
/// non-decreasing and ends at `names.len()` on char boundaries, every name is non-empty;
/// `tags` has one slot per subtable; every run names a subtable of the block and holds at
/// least one row; the runs' rows sum to the length of every column.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RowBlock {
    stable: String,
    names: String,
    ends: Vec<u32>,
    tags: Vec<Option<Tags>>,
    runs: Vec<(u32, u32)>,
    columns: Vec<Column>,
}

/// The parts of a [`RowBlock`], for encoders and decoders.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RowBlockParts {
    pub stable: String,
    /// Subtable names, concatenated; name i is `names[ends[i-1]..ends[i]]` (`ends[-1]` = 0).
    pub names: String,
    pub ends: Vec<u32>,
    /// Tags for auto-creation, one slot per subtable.
    pub tags: Vec<Option<Tags>>,
    /// (subtable index, rows).
    pub runs: Vec<(u32, u32)>,
    pub columns: Vec<Column>,
}

/// Appends rows `start..end` of `src` (same physical type) to `dst`.
fn extend_range(dst: &mut Column, src: &Column, start: usize, end: usize) {
    let len = dst.len();
    match (&mut dst.data, &src.data) {
        (ColumnData::Bool(a), ColumnData::Bool(b)) => a.extend_from_slice(&b[start..end]),
        (ColumnData::Int(a), ColumnData::Int(b)) => a.extend_from_slice(&b[start..end]),
        (ColumnData::UInt(a), ColumnData::UInt(b)) => a.extend_from_slice(&b[start..end]),
        (ColumnData::Float(a), ColumnData::Float(b)) => a.extend_from_slice(&b[start..end]),
        (ColumnData::Str(a), ColumnData::Str(b)) => a.extend_from_slice(&b[start..end]),
        (ColumnData::Timestamp(a), ColumnData::Timestamp(b)) => a.extend_from_slice(&b[start..end]),
        // Callers check the kinds first ([`RowBlock::accepts`]); rows of another kind are
        // NULL rather than a panic.
        (_, _) => {
            for _ in start..end {
                dst.push(&Value::Null);
            }
            return;
        }
    }
    if !src.nulls.is_empty() || !dst.nulls.is_empty() {
        if dst.nulls.is_empty() {
            dst.start_nulls(len);
        }
        match src.nulls.get(start..end) {
            Some(n) => dst.nulls.extend_from_slice(n),
            None => dst.nulls.resize(len + (end - start), false),
        }
    }
}

/// An empty column of the same physical type as `c`.
fn empty_like(c: &Column, capacity: usize) -> Column {
    Column::new(match &c.data {
        ColumnData::Bool(_) => ColumnData::Bool(Vec::with_capacity(capacity)),
        ColumnData::Int(_) => ColumnData::Int(Vec::with_capacity(capacity)),
        ColumnData::UInt(_) => ColumnData::UInt(Vec::with_capacity(capacity)),
        ColumnData::Float(_) => ColumnData::Float(Vec::with_capacity(capacity)),
        ColumnData::Str(_) => ColumnData::Str(Vec::with_capacity(capacity)),
        ColumnData::Timestamp(_) => ColumnData::Timestamp(Vec::with_capacity(capacity)),
    })
}

impl RowBlock {
    /// An empty block for `stable` whose columns have the types `types` (the STABLE's
    /// columns in order, `types[0]` = TIMESTAMP).
    pub fn new(stable: impl Into<String>, types: &[DataType]) -> RowBlock {
        RowBlock {
            stable: stable.into(),
            columns: types.iter().map(|t| Column::empty(*t, 0)).collect(),
            ..RowBlock::default()
        }
    }

    /// An empty block for `stable` whose columns have the physical types of `template`.
    pub fn like(stable: impl Into<String>, template: &[Column], capacity: usize) -> RowBlock {
        RowBlock {
            stable: stable.into(),
            columns: template.iter().map(|c| empty_like(c, capacity)).collect(),
            ..RowBlock::default()
        }
    }

    /// Checks the invariants of `p` and builds the block; the error says what is wrong.
    pub fn from_parts(p: RowBlockParts) -> Result<RowBlock, String> {
        let mut at = 0u32;
        for (i, e) in p.ends.iter().enumerate() {
            if *e <= at || *e as usize > p.names.len() || !p.names.is_char_boundary(*e as usize) {
                return Err(format!(
                    "subtable name {i} ends at byte {e}, after {at}, of {} name bytes",
                    p.names.len()
                ));
            }
            at = *e;
        }
        if at as usize != p.names.len() {
            return Err(format!(
                "the subtable names use {at} of {} name bytes",
                p.names.len()
            ));
        }
        if p.tags.len() != p.ends.len() {
            return Err(format!(
                "{} tag slots for {} subtables",
                p.tags.len(),
                p.ends.len()
            ));
        }
        let mut rows = 0usize;
        for (t, n) in &p.runs {
            if *t as usize >= p.ends.len() || *n == 0 {
                return Err(format!(
                    "a run of {n} rows of subtable {t}, but the block has {} subtables",
                    p.ends.len()
                ));
            }
            rows += *n as usize;
        }
        for (i, c) in p.columns.iter().enumerate() {
            if c.len() != rows {
                return Err(format!(
                    "column {i} has {} values but the runs hold {rows} rows",
                    c.len()
                ));
            }
            if !c.nulls.is_empty() && c.nulls.len() != c.len() {
                return Err(format!(
                    "column {i} has {} values and a null mask of {}",
                    c.len(),
                    c.nulls.len()
                ));
            }
        }
        if p.columns.is_empty() && rows > 0 {
            return Err(format!("{rows} rows but no columns"));
        }
        Ok(RowBlock {
            stable: p.stable,
            names: p.names,
            ends: p.ends,
            tags: p.tags,
            runs: p.runs,
            columns: p.columns,
        })
    }

    pub fn into_parts(self) -> RowBlockParts {
        RowBlockParts {
            stable: self.stable,
            names: self.names,
            ends: self.ends,
            tags: self.tags,
            runs: self.runs,
            columns: self.columns,
        }
    }

    pub fn stable(&self) -> &str {
        &self.stable
    }

    pub fn num_tables(&self) -> usize {
        self.ends.len()
    }

    pub fn num_rows(&self) -> usize {
        self.columns.first().map(Column::len).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// The name of subtable `i` ("" if out of range).
    pub fn table(&self, i: usize) -> &str {
        let start = match i {
            0 => 0,
            _ => self.ends.get(i - 1).copied().unwrap_or(0) as usize,
        };
        let end = self.ends.get(i).copied().unwrap_or(0) as usize;
        self.names.get(start..end).unwrap_or("")
    }

    /// The subtable names, concatenated (see [`RowBlockParts::names`]).
    pub fn names(&self) -> (&str, &[u32]) {
        (&self.names, &self.ends)
    }

    pub fn tags(&self, i: usize) -> Option<&[Value]> {
        self.tags.get(i).and_then(|t| t.as_deref())
    }

    /// Subtable `i`'s tags as shared (a clone is a reference count, not a copy).
    pub fn tags_shared(&self, i: usize) -> Option<&Tags> {
        self.tags.get(i).and_then(Option::as_ref)
    }

    pub fn runs(&self) -> &[(u32, u32)] {
        &self.runs
    }

    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// Lists a new subtable (the caller keeps names unique) and returns its index.
    pub fn add_table(&mut self, name: &str, tags: Option<Vec<Value>>) -> u32 {
        self.add_table_shared(name, tags.map(Tags::from))
    }

    /// Room for `tables` more subtables with `name_bytes` more bytes of names, and as many
    /// runs, so that a block filled a subtable at a time (a body of thousands of devices,
    /// a merge of several) does not grow those lists by reallocation.
    pub fn reserve_tables(&mut self, tables: usize, name_bytes: usize) {
        self.names.reserve(name_bytes);
        self.ends.reserve(tables);
        self.tags.reserve(tables);
        self.runs.reserve(tables);
    }

    /// [`RowBlock::add_table`] with tags already shared.
    pub fn add_table_shared(&mut self, name: &str, tags: Option<Tags>) -> u32 {
        self.names.push_str(name);
        self.ends.push(self.names.len() as u32);
        self.tags.push(tags);
        (self.ends.len() - 1) as u32
    }

    /// Gives subtable `i` tags if it has none yet.
    pub fn offer_tags(&mut self, i: u32, tags: Option<Tags>) {
        if let (Some(slot @ None), Some(t)) = (self.tags.get_mut(i as usize), tags) {
            *slot = Some(t);
        }
    }

    /// Whether rows shaped like `cols` can be appended: same column count and physical types.
    pub fn accepts(&self, cols: &[Column]) -> bool {
        cols.len() == self.columns.len()
            && cols
                .iter()
                .zip(&self.columns)
                .all(|(a, b)| std::mem::discriminant(&a.data) == std::mem::discriminant(&b.data))
    }

    fn note_run(&mut self, table: u32, rows: u32) {
        match self.runs.last_mut() {
            Some((t, n)) if *t == table => *n += rows,
            _ => self.runs.push((table, rows)),
        }
    }

    /// Appends rows `start..end` of `cols` (which [`RowBlock::accepts`]) as rows of subtable
    /// `table`. Returns false, appending nothing, when the shapes differ or the range is bad.
    pub fn push_rows(&mut self, table: u32, cols: &[Column], start: usize, end: usize) -> bool {
        let len = cols.first().map(Column::len).unwrap_or(0);
        if (table as usize) >= self.ends.len()
            || start > end
            || end > len
            || !self.accepts(cols)
            || cols.iter().any(|c| c.len() != len)
        {
            return false;
        }
        if start == end {
            return true;
        }
        for (d, s) in self.columns.iter_mut().zip(cols) {
            extend_range(d, s, start, end);
        }
        self.note_run(table, (end - start) as u32);
        true
    }

    /// Appends every row of `src` (whose columns this block [`RowBlock::accepts`]), its
    /// subtable `t` being this block's `table_of[t]`: one copy per column, and `src`'s runs
    /// as they are, so a subtable may have several runs (the data node groups a block's runs
    /// by subtable as it appends them to its memtable). Returns false, appending nothing,
    /// when the shapes differ or `table_of` does not name one of this block's subtables for
    /// each of `src`'s.
    pub fn append_block(&mut self, src: &RowBlock, table_of: &[u32]) -> bool {
        let len = src.num_rows();
        if !self.accepts(&src.columns)
            || src.columns.iter().any(|c| c.len() != len)
            || table_of.len() != src.num_tables()
            || table_of.iter().any(|&t| t as usize >= self.ends.len())
            || src.runs.iter().any(|&(t, _)| t as usize >= table_of.len())
        {
            return false;
        }
        for (d, s) in self.columns.iter_mut().zip(&src.columns) {
            extend_range(d, s, 0, len);
        }
        for &(t, n) in &src.runs {
            if let Some(&to) = table_of.get(t as usize) {
                self.note_run(to, n);
            }
        }
        true
    }

    /// Appends one row of subtable `table`: `values` are the STABLE's columns in order, already
    /// coerced to the column types (a value of another physical type is stored as NULL, as
    /// [`Column::push`] does). Returns false, appending nothing, on a wrong value count.
    pub fn push_row(&mut self, table: u32, values: &[Value]) -> bool {
        if values.len() != self.columns.len() || (table as usize) >= self.ends.len() {
            return false;
        }
        let len = self.num_rows();
        for (c, v) in self.columns.iter_mut().zip(values) {
            c.push(v);
        }
        if self.columns.iter().any(|c| c.len() != len + 1) {
            for c in &mut self.columns {
                c.truncate(len);
            }
            return false;
        }
        self.note_run(table, 1);
        true
    }

    /// Appends one row of subtable `table` that `fill` writes straight into the columns (no
    /// `Value` per cell): `fill` pushes one value onto every column and returns `Ok(true)`, or
    /// returns `Ok(false)` or an error. Unless it returned `Ok(true)` with every column one row
    /// longer, the columns are put back as they were and `Ok(false)` or the error is returned.
    pub fn push_row_with<E>(
        &mut self,
        table: u32,
        fill: impl FnOnce(&mut [Column]) -> Result<bool, E>,
    ) -> Result<bool, E> {
        if (table as usize) >= self.ends.len() || !self.fill_row(fill)? {
            return Ok(false);
        }
        self.note_run(table, 1);
        Ok(true)
    }

    /// Runs `fill` on the columns; true if it returned `Ok(true)` with every column one row
    /// longer, else the columns are put back as they were (and its error returned).
    fn fill_row<E>(
        &mut self,
        fill: impl FnOnce(&mut [Column]) -> Result<bool, E>,
    ) -> Result<bool, E> {
        let len = self.num_rows();
        let filled = fill(&mut self.columns);
        if !matches!(filled, Ok(true)) || self.columns.iter().any(|c| c.len() != len + 1) {
            for c in &mut self.columns {
                c.truncate(len);
            }
            return filled.map(|_| false);
        }
        Ok(true)
    }

    /// [`RowBlock::push_row_with`] for a subtable not yet in the block: it is listed (with
    /// `tags`) only once `fill` has pushed its row, so a row that fails to convert leaves
    /// the block as it was. Returns the subtable's index, or `None` (an empty name, or
    /// `fill` gave `Ok(false)` or pushed a wrong count) or the error, the columns put back.
    pub fn push_row_with_new_table<E>(
        &mut self,
        name: &str,
        tags: Option<Vec<Value>>,
        fill: impl FnOnce(&mut [Column]) -> Result<bool, E>,
    ) -> Result<Option<u32>, E> {
        if name.is_empty() || self.ends.len() >= u32::MAX as usize || !self.fill_row(fill)? {
            return Ok(None);
        }
        let table = self.add_table(name, tags);
        self.note_run(table, 1);
        Ok(Some(table))
    }

    /// Splits the block by a group of each subtable (a vgroup): one block per group, in order
    /// of first appearance, rows kept in order. A block wholly in one group is returned as is.
    pub fn split_by(self, mut group: impl FnMut(&str) -> usize) -> Vec<(usize, RowBlock)> {
        let groups: Vec<usize> = (0..self.num_tables())
            .map(|i| group(self.table(i)))
            .collect();
        match groups.first() {
            None => return vec![(0, self)],
            Some(g) if groups.iter().all(|x| x == g) => return vec![(*g, self)],
            _ => {}
        }
        let mut out: Vec<(usize, RowBlock, Vec<u32>)> = Vec::new();
        let mut row = 0usize;
        for (t, n) in &self.runs {
            let g = groups[*t as usize];
            let k = match out.iter().position(|(x, _, _)| *x == g) {
                Some(k) => k,
                None => {
                    let b = RowBlock::like(self.stable.clone(), &self.columns, 0);
                    out.push((g, b, vec![u32::MAX; self.num_tables()]));
                    out.len() - 1
                }
            };
            let (_, b, map) = &mut out[k];
            let local = match map[*t as usize] {
                u32::MAX => {
                    let tags = self.tags[*t as usize].clone();
                    let i = b.add_table_shared(self.table(*t as usize), tags);
                    map[*t as usize] = i;
                    i
                }
                i => i,
            };
            let end = row + *n as usize;
            b.push_rows(local, &self.columns, row, end);
            row = end;
        }
        out.into_iter().map(|(g, b, _)| (g, b)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_runs_puts_each_groups_rows_together_in_block_order() {
        // Rows 0..7: table 2 (rows 0-1), 0 (2), 2 (3), 1 (4-5), 0 (6).
        let runs = [(2, 2), (0, 1), (2, 1), (1, 2), (0, 1)];
        let (order, grouped) = group_runs(&runs, 3, |t| t);
        assert_eq!(order, vec![2, 6, 4, 5, 0, 1, 3]);
        assert_eq!(grouped, vec![(0, 2), (1, 2), (2, 3)]);
        // Tables 0 and 2 name one group (the same subtable); group 1 stays empty.
        let (order, grouped) = group_runs(&runs, 3, |t| if t == 2 { 0 } else { t });
        assert_eq!(order, vec![0, 1, 2, 3, 6, 4, 5]);
        assert_eq!(grouped, vec![(0, 5), (1, 2)]);
        // A run whose group is out of range is left out; the rows after it keep their numbers.
        let (order, grouped) = group_runs(&runs, 2, |t| t);
        assert_eq!(order, vec![2, 6, 4, 5]);
        assert_eq!(grouped, vec![(0, 2), (1, 2)]);
        assert_eq!(group_runs(&[], 0, |t| t), (vec![], vec![]));
    }

    fn cols(ts: &[i64], v: &[Option<f64>]) -> Vec<Column> {
        let mut c = Column::empty(DataType::Double, v.len());
        for x in v {
            c.push(&x.map(Value::Float).unwrap_or(Value::Null));
        }
        vec![Column::new(ColumnData::Timestamp(ts.to_vec())), c]
    }

    #[test]
    fn a_new_subtable_is_listed_only_with_a_row() {
        let mut b = RowBlock::new("st", &[DataType::Timestamp, DataType::Double]);
        let push = |ts: i64, v: f64| {
            move |c: &mut [Column]| -> Result<bool, String> {
                c[0].push(&Value::Timestamp(ts));
                c[1].push(&Value::Float(v));
                Ok(true)
            }
        };
        assert_eq!(
            b.push_row_with_new_table("a", None, push(1, 1.0)),
            Ok(Some(0))
        );
        // A failed row (after a partial push), a short row and an empty name leave no trace.
        let failed = b.push_row_with_new_table("b", None, |c: &mut [Column]| {
            c[0].push(&Value::Timestamp(2));
            Err("bad".to_string())
        });
        assert_eq!(failed, Err("bad".to_string()));
        let short =
            b.push_row_with_new_table("b", None, |c: &mut [Column]| -> Result<bool, String> {
                c[0].push(&Value::Timestamp(2));
                Ok(true)
            });
        assert_eq!(short, Ok(None));
        assert_eq!(b.push_row_with_new_table("", None, push(2, 2.0)), Ok(None));
        assert_eq!(b.num_tables(), 1);
        assert_eq!(b.num_rows(), 1);
        let t = b.push_row_with_new_table("b", Some(vec![Value::Int(7)]), push(3, 3.0));
        assert_eq!(t, Ok(Some(1)));
        assert_eq!(b.runs(), &[(0, 1), (1, 1)]);
        assert_eq!(b.table(1), "b");
        assert_eq!(b.tags(1), Some(&[Value::Int(7)][..]));
        assert!(RowBlock::from_parts(b.into_parts()).is_ok());
    }

    #[test]
    fn runs_merge_and_split_keeps_rows_tags_and_order() {
        let mut b = RowBlock::new("st", &[DataType::Timestamp, DataType::Double]);
        let a = b.add_table("a", Some(vec![Value::Int(1)]));
        let c = b.add_table("c", None);
        let src = cols(&[1, 2, 3], &[Some(1.0), None, Some(3.0)]);
        assert!(b.push_rows(a, &src, 0, 2));
        assert!(b.push_rows(a, &src, 2, 3)); // same subtable: one run
        assert!(b.push_row(c, &[Value::Timestamp(9), Value::Float(9.0)]));
        assert!(!b.push_row(c, &[Value::Timestamp(9)]));
        assert!(!b.push_rows(c, &src[..1], 0, 1));
        assert!(!b.push_rows(7, &src, 0, 1));
        assert_eq!(b.runs(), &[(0, 3), (1, 1)]);
        assert_eq!(b.num_rows(), 4);
        assert_eq!(b.columns()[1].nulls, vec![false, true, false, false]);
        assert_eq!(b.table(1), "c");
        let parts = b.clone().into_parts();
        assert_eq!(RowBlock::from_parts(parts).unwrap(), b);

        let one = b.clone().split_by(|_| 3);
        assert_eq!(one, vec![(3, b.clone())]);
        let two = b.split_by(|n| if n == "a" { 0 } else { 1 });
        assert_eq!(two.len(), 2);
        assert_eq!(
            (two[0].0, two[0].1.table(0), two[0].1.num_rows()),
            (0, "a", 3)
        );
        assert_eq!(two[0].1.tags(0), Some(&[Value::Int(1)][..]));
        assert_eq!(
            (two[1].0, two[1].1.table(0), two[1].1.num_rows()),
            (1, "c", 1)
        );
        assert_eq!(two[1].1.columns()[1].get(0), Value::Float(9.0));
    }

    /// A block appended whole lists its rows under the subtables `table_of` names, with its
    /// runs as they were (a subtable may then have several), its values, NULLs and strings;
    /// a block of another shape or a bad `table_of` appends nothing.
    #[test]
    fn blocks_append_whole_under_mapped_subtables() {
        let types = [DataType::Timestamp, DataType::Double, DataType::VarChar(8)];
        let block = |rows: &[(&str, i64, Option<f64>, &str)]| {
            let mut b = RowBlock::new("st", &types);
            let mut names: Vec<&str> = Vec::new();
            for (name, ts, v, s) in rows {
                let t = match names.iter().position(|n| n == name) {
                    Some(t) => t as u32,
                    None => {
                        names.push(name);
                        b.add_table(name, None)
                    }
                };
                let v = v.map_or(Value::Null, Value::Float);
                assert!(b.push_row(t, &[Value::Timestamp(*ts), v, Value::Str(s.to_string())]));
            }
            b
        };
        let a = block(&[
            ("x", 1, Some(1.0), "a"),
            ("y", 2, Some(2.0), "b"),
            ("x", 3, Some(3.0), "c"),
        ]);
        let b = block(&[("y", 4, None, "d"), ("z", 5, Some(5.0), "e")]);
        let fresh = || {
            let mut m = RowBlock::like("st", a.columns(), 5);
            for name in ["x", "y", "z"] {
                m.add_table(name, None);
            }
            m
        };
        let mut m = fresh();
        assert!(m.append_block(&a, &[0, 1]));
        assert!(m.append_block(&b, &[1, 2]));
        // y's rows of the two blocks follow each other: one run.
        assert_eq!(m.runs(), &[(0, 1), (1, 1), (0, 1), (1, 1), (2, 1)]);
        assert_eq!(m.num_rows(), 5);
        assert_eq!(m.columns()[1].nulls, vec![false, false, false, true, false]);
        assert_eq!(m.columns()[2].get(4), Value::Str("e".into()));
        assert!(RowBlock::from_parts(m.clone().into_parts()).is_ok());
        // From blocks without NULLs, no NULL flags.
        let mut plain = fresh();
        assert!(plain.append_block(&a, &[2, 0]));
        assert!(plain.columns().iter().all(|c| c.nulls.is_empty()));
        assert_eq!(plain.runs(), &[(2, 1), (0, 1), (2, 1)]);
        // Refused, appending nothing: a subtable this block lacks, too few or too many
        // names, another shape.
        let other = RowBlock::new("st", &[DataType::Timestamp, DataType::BigInt]);
        for (src, map) in [
            (&a, &[0, 3][..]),
            (&a, &[0][..]),
            (&a, &[0, 1, 2][..]),
            (&other, &[][..]),
        ] {
            let mut m = fresh();
            assert!(!m.append_block(src, map), "{map:?}");
            assert_eq!(m, fresh());
        }
    }

    #[test]
    fn malformed_parts_are_errors() {
        let ok = RowBlockParts {
            stable: "st".into(),
            names: "ab".into(),
            ends: vec![1, 2],
            tags: vec![None, None],
            runs: vec![(0, 1), (1, 1)],
            columns: cols(&[1, 2], &[Some(1.0), Some(2.0)]),
        };
        assert!(RowBlock::from_parts(ok.clone()).is_ok());
        let bad = [
            RowBlockParts {
                ends: vec![1, 3],
                ..ok.clone()
            },
            RowBlockParts {
                ends: vec![1, 1, 2],
                tags: vec![None; 3],
                ..ok.clone()
            },
            RowBlockParts {
                ends: vec![1],
                tags: vec![None],
                ..ok.clone()
            },
            RowBlockParts {
                tags: vec![None],
                ..ok.clone()
            },
            RowBlockParts {
                runs: vec![(0, 1), (2, 1)],
                ..ok.clone()
            },
            RowBlockParts {
                runs: vec![(0, 2), (1, 1)],
                ..ok.clone()
            },
            RowBlockParts {
                runs: vec![(0, 0), (1, 2)],
                ..ok.clone()
            },
            RowBlockParts {
                names: "aé".into(),
                ends: vec![2, 3],
                ..ok.clone()
            },
        ];
        for p in bad {
            assert!(RowBlock::from_parts(p.clone()).is_err(), "{p:?}");
        }
    }
}
