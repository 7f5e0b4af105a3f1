//! The planner: resolves tables, columns and tags, splits WHERE into a time range, a tag filter
//! (evaluated once per subtable on the vnode, before scanning) and a row filter, and builds
//! a vnode fragment (scan -> filter -> project | partial aggregate) plus a coordinator tree
//! (gather -> final aggregate -> having -> project -> sort -> limit). Subqueries in FROM plan
//! recursively: the innermost level that reads a table becomes the fragment and the outer
//! levels run on the coordinator over the merged inner result.
//!
//! Where work runs:
//! - tumbling INTERVAL windows and mergeable aggregates (COUNT, SUM, AVG, MIN/MAX, selectors,
//!   SPREAD, STDDEV, ELAPSED) are partial aggregates on the vnodes, merged on the coordinator;
//! - windows defined by rows in time order (STATE_WINDOW, SESSION, EVENT_WINDOW,
//!   COUNT_WINDOW), sliding INTERVALs and aggregates that need every row of a group (TWA,
//!   PERCENTILE, APERCENTILE, MODE, IRATE, LEASTSQUARES) gather the filtered rows with a
//!   Project fragment and aggregate on the coordinator ([`Node::Window`] assigns window ids);
//! - FILL, row functions, TOP/BOTTOM/SAMPLE, HISTOGRAM, INTERP, DISTINCT and SLIMIT are
//!   coordinator operators (`coord`).

use crate::agg::{AggFunc, AggSpec};
use crate::ast::*;
use crate::error::{Pos, SqlError};
use crate::expr::{eval, CallFunc, PExpr, ScalarFunc};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Arc;
use tidal_common::types::PhysicalType;
use tidal_common::{DataType, Field, Precision, StableSchema, TableMeta, Value};

/// What the planner needs to know about the catalog.
pub trait Catalog {
    fn stable(&self, db: &str, name: &str) -> Option<StableSchema>;
    fn subtable(&self, db: &str, name: &str) -> Option<(TableMeta, StableSchema)>;
    fn precision(&self, db: &str) -> Option<Precision>;
    /// The rows of a table the frontend computes itself (`information_schema.ins_*`),
    /// fetched before planning; the query reads them like a subquery's result.
    fn system_table(&self, db: &str, name: &str) -> Option<tidal_common::Batch> {
        let _ = (db, name);
        None
    }
    /// The user the statement runs as (what `CURRENT_USER()` returns), when the planner's
    /// caller knows it; without it `CURRENT_USER()` is a planning error.
    fn session_user(&self) -> Option<String> {
        None
    }
}

/// The database whose tables describe the cluster (TDengine's `information_schema`).
pub const INFORMATION_SCHEMA: &str = "information_schema";

pub use tidal_common::schema::TBNAME_TYPE;

/// A column of the per-subtable input batch built on the vnode.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum InputCol {
    /// A STABLE column by index (0 = the timestamp).
    Col(usize),
    /// A tag by index (the same value on every row of one subtable).
    Tag(usize),
    /// The subtable name.
    Tbname,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ScanTarget {
    /// Every subtable of the STABLE on the vnode.
    Stable(String),
    /// One subtable.
    Table(String),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum FragmentOp {
    /// Evaluate these expressions per row (output fields `_c0`, `_c1`, ...).
    Project { exprs: Vec<PExpr> },
    /// Partial hash aggregation: output = key columns + partial states.
    PartialAgg {
        keys: Vec<PExpr>,
        aggs: Vec<AggSpec>,
    },
    /// `SELECT TAGS`: these expressions over tags and tbname, one row per subtable that
    /// passes the tag filter; no data is read (output fields as `Project`'s).
    Tags { exprs: Vec<PExpr> },
}

/// The part of a query that runs on each vnode. Shipped as opaque bytes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fragment {
    pub target: ScanTarget,
    pub ts_min: i64,
    pub ts_max: i64,
    /// Input columns of each subtable's batch; `PExpr::Input(i)` refers to `layout[i]`.
    pub layout: Vec<InputCol>,
    /// A predicate over tags/tbname only, evaluated once per subtable over `tag_layout`.
    pub tag_layout: Vec<InputCol>,
    pub tag_filter: Option<PExpr>,
    /// Row filter over `layout`.
    pub filter: Option<PExpr>,
    pub op: FragmentOp,
    /// Project only: the vnode may stop after this many output rows (LIMIT + OFFSET of a query
    /// without ORDER BY).
    #[serde(default)]
    pub limit: Option<u64>,
    /// For a subtable target: the STABLE the plan was made for. A vnode whose subtable of
    /// that name belongs to another STABLE (dropped and created again since the coordinator
    /// looked it up) fails the fragment rather than read it with the wrong columns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stable: Option<String>,
}

impl Fragment {
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    pub fn from_bytes(b: &[u8]) -> Result<Fragment, SqlError> {
        serde_json::from_slice(b)
            .map_err(|e| SqlError::InvalidArgument(format!("malformed query fragment: {e}")))
    }

    /// Fields of the batch a vnode returns for this fragment.
    pub fn output_fields(&self) -> Vec<Field> {
        match &self.op {
            FragmentOp::Project { exprs } | FragmentOp::Tags { exprs } => exprs
                .iter()
                .enumerate()
                .map(|(i, e)| Field::new(format!("_c{i}"), e.data_type()))
                .collect(),
            FragmentOp::PartialAgg { keys, aggs } => {
                let mut f: Vec<Field> = keys
                    .iter()
                    .enumerate()
                    .map(|(i, k)| Field::new(format!("_k{i}"), k.data_type()))
                    .collect();
                for (i, a) in aggs.iter().enumerate() {
                    f.extend(a.partial_fields(i));
                }
                f
            }
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum FragmentTarget {
    AllVgroups,
    /// Only the vgroup owning this subtable.
    Table(String),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FragmentSpec {
    pub id: u32,
    pub db: String,
    pub target: FragmentTarget,
    pub fragment: Fragment,
}

/// The coordinator-side operator tree.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Node {
    /// The concatenated vnode results of one fragment.
    Gather {
        fragment: u32,
        fields: Vec<Field>,
    },
    /// Rows known when planning: a system table ([`Catalog::system_table`]), or the one row
    /// of one column that no name reaches ([`DUAL_FIELD`]) that a SELECT without FROM
    /// evaluates its constants over.
    Values {
        batch: tidal_common::Batch,
    },
    Filter {
        input: Box<Node>,
        pred: PExpr,
    },
    Project {
        input: Box<Node>,
        exprs: Vec<PExpr>,
        fields: Vec<Field>,
    },
    /// Hash aggregation; `merge` = the input holds partial states (from a PartialAgg fragment),
    /// otherwise raw rows. Output: key columns then one column per aggregate.
    Aggregate {
        input: Box<Node>,
        keys: Vec<PExpr>,
        aggs: Vec<AggSpec>,
        merge: bool,
    },
    /// Row functions (`diff`, `derivative`, `csum`, `mavg`, `statecount`, `stateduration`):
    /// the input is sorted by (partition columns, ts); each listed column is replaced by the
    /// function's value over the rows of its partition so far. A row is kept only when every
    /// function has a value for it (`diff` has none for a partition's first row).
    RowFunc {
        input: Box<Node>,
        partition: Vec<usize>,
        ts: usize,
        funcs: Vec<(usize, RowFn)>,
    },
    /// Multi-row selectors TOP/BOTTOM/SAMPLE/UNIQUE/TAIL: per partition, keeps `k` rows
    /// chosen by column `col`, in time order (column `ts`).
    SelectRows {
        input: Box<Node>,
        partition: Vec<usize>,
        ts: usize,
        col: usize,
        k: usize,
        mode: SelectMode,
    },
    /// Assigns rows to windows defined by the rows themselves (or sliding INTERVALs): sorts by
    /// (partition, ts) and appends a window id column (the window start for sliding
    /// intervals), repeating a row for each window that holds it and dropping rows in none.
    Window {
        input: Box<Node>,
        partition: Vec<PExpr>,
        ts: PExpr,
        kind: WindowKind,
    },
    /// FILL over INTERVAL results sorted by (partition columns `0..npart`, window start
    /// `npart`): inserts the missing windows every `step` within the query's time range (or
    /// between a partition's first and last window) and fills `cols`; `consts` are copied.
    Fill {
        input: Box<Node>,
        npart: usize,
        step: i64,
        offset: i64,
        range: Option<(i64, i64)>,
        mode: FillMode,
        cols: Vec<usize>,
        consts: Vec<usize>,
    },
    /// INTERP: per partition (input sorted by partition columns, then `ts`), one row per
    /// point start, start + every, ..., end: `cols` hold the value at that instant or, when no
    /// row has it, per `fill` (None = FILL(NONE): no row); `ts` becomes the point.
    Interp {
        input: Box<Node>,
        partition: Vec<usize>,
        ts: usize,
        cols: Vec<usize>,
        start: i64,
        end: i64,
        every: i64,
        fill: Option<FillMode>,
    },
    /// HISTOGRAM: per partition, one row per bin (lower, upper] of `bins` with column `col`
    /// replaced by `{"lower_bin":.., "upper_bin":.., "count":..}`; the other columns come
    /// from the partition's first row.
    Histogram {
        input: Box<Node>,
        partition: Vec<usize>,
        col: usize,
        bins: Vec<f64>,
        normalized: bool,
    },
    /// Sliding INTERVAL from panes: each partial row of the pane starting at `key` also
    /// belongs to the `count - 1` windows that start up to `(count - 1) * step` earlier; emits
    /// one copy per window with `key` set to the window start, for a merging Aggregate.
    SlidePanes {
        input: Box<Node>,
        key: usize,
        step: i64,
        count: i64,
    },
    /// Removes duplicate rows (SELECT DISTINCT), keeping the first of each.
    Distinct {
        input: Box<Node>,
    },
    /// UNION ALL: the inputs' rows one after the other (the inputs have `fields`' types).
    Union {
        inputs: Vec<Node>,
        fields: Vec<Field>,
    },
    /// SLIMIT/SOFFSET: keeps the partitions (runs of equal values in `partition`, the input is
    /// sorted by them) numbered offset..offset+limit.
    SLimit {
        input: Box<Node>,
        partition: Vec<usize>,
        limit: u64,
        offset: u64,
    },
    /// Sort by output columns (index, ascending).
    Sort {
        input: Box<Node>,
        keys: Vec<(usize, bool)>,
    },
    /// LIMIT/OFFSET; when `partition` lists columns, it applies to each run of rows with
    /// equal values in them (per-partition LIMIT of TDengine 3; the input is sorted by them).
    Limit {
        input: Box<Node>,
        limit: Option<u64>,
        offset: u64,
        partition: Vec<usize>,
    },
}

/// A row function of [`Node::RowFunc`]; durations are in the database precision.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum RowFn {
    Diff,
    /// `(v - prev) / (t - prev_t) * unit`; negative results dropped when `ignore_negative`.
    Derivative {
        unit: i64,
        ignore_negative: bool,
    },
    Csum,
    Mavg(usize),
    /// Consecutive rows satisfying `value <op> val` (-1 when not satisfied).
    StateCount(BinOp, f64),
    /// Time since the first of the consecutive rows satisfying the condition, in `unit`.
    StateDuration(BinOp, f64, i64),
    /// TDengine's LAG(x): x, or where x is NULL the partition's last non-NULL value before
    /// it (NULL when there is none); one output row per input row.
    Lag,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum SelectMode {
    Top,
    Bottom,
    Sample,
    /// The first row (in time order) of each distinct value, NULL being one value.
    Unique,
    /// The last `k` rows after skipping the last `offset` (NULLs kept).
    Tail {
        offset: usize,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum WindowKind {
    /// A sliding INTERVAL: the windows [s, s + interval) with s on the `sliding` grid.
    Sliding {
        interval: i64,
        sliding: i64,
        offset: i64,
    },
    /// A new window whenever the value changes (NULL rows belong to no window).
    State(PExpr),
    /// A new window when the gap to the previous row exceeds `gap`.
    Session(i64),
    /// Opens at a row satisfying `start`, closes at the next row satisfying `end`; a window
    /// still open at the end of the partition is not reported.
    Event(PExpr, PExpr),
    /// Windows of `n` rows starting every `step` rows.
    Count(u64, u64),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum FillMode {
    Null,
    Prev,
    Next,
    Linear,
    Value(Vec<Value>),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueryPlan {
    pub fragments: Vec<FragmentSpec>,
    pub root: Node,
    /// The result columns.
    pub fields: Vec<Field>,
}

/// The name of the column of a SELECT without FROM's one row: not an identifier, so no
/// query can name it.
pub const DUAL_FIELD: &str = "\u{0}dual";

/// Every table or STABLE named in FROM, at any depth (in every member of a UNION).
pub fn referenced_tables(q: &Query) -> Vec<ObjectRef> {
    let mut out = Vec::new();
    let mut stack = vec![q];
    while let Some(cur) = stack.pop() {
        match &cur.from {
            FromItem::Table { name, .. } => out.push(name.clone()),
            FromItem::Subquery { query, .. } => stack.push(query),
            FromItem::None { .. } => {}
            FromItem::Union { members, .. } => stack.extend(members.iter().rev()),
        }
    }
    out
}

pub fn plan_query(
    q: &Query,
    default_db: Option<&str>,
    cat: &dyn Catalog,
) -> Result<QueryPlan, SqlError> {
    let mut p = Planner {
        cat,
        default_db,
        fragments: Vec::new(),
        depth: 0,
        subtable_stables: HashMap::new(),
    };
    let (root, fields) = p.level(q)?;
    Ok(QueryPlan {
        fragments: p.fragments,
        root,
        fields,
    })
}

// ---------------------------------------------------------------------------------------------

const AGG_FUNCS: &[&str] = &[
    "count",
    "sum",
    "avg",
    "min",
    "max",
    "first",
    "last",
    "last_row",
    "spread",
    "stddev",
    "stddev_pop",
    "var_pop",
    "twa",
    "elapsed",
    "percentile",
    "apercentile",
    "leastsquares",
    "mode",
    "irate",
    "hyperloglog",
    "group_concat",
];

/// Row functions: one value per input row, computed in time order per partition.
const ROW_FUNCS: &[&str] = &[
    "diff",
    "derivative",
    "csum",
    "mavg",
    "statecount",
    "stateduration",
    "top",
    "bottom",
    "sample",
    "unique",
    "tail",
    "histogram",
    "lag",
];

/// Placeholder input index of the window id column a coordinator [`Node::Window`] appends;
/// replaced by the real index once the input width is known.
const WID: usize = usize::MAX / 2;

/// Overlapping windows (SLIDING, COUNT_WINDOW with a step) copy each row into this many
/// windows at most.
const WINDOWS_PER_ROW_MAX: i64 = 10_000;

/// RANGE/EVERY points per partition of an INTERP query (each becomes a row).
const INTERP_POINTS_MAX: i64 = 10_000_000;

/// TDengine's limits: MAVG's window, TOP/BOTTOM/SAMPLE/TAIL's k, TAIL's offset, HISTOGRAM's
/// generated bins.
const MAVG_WINDOW_MAX: i64 = 1000;
const SELECT_K_MAX: i64 = 100;
const TAIL_OFFSET_MAX: i64 = 100;
const HISTOGRAM_BINS_MAX: f64 = 1000.0;

fn is_agg_call(e: &Expr) -> bool {
    matches!(e, Expr::Function { name, .. } if AGG_FUNCS.contains(&name.as_str()))
}

fn contains_agg(e: &Expr) -> bool {
    let mut found = false;
    e.walk(&mut |x| {
        if is_agg_call(x) {
            found = true
        }
    });
    found
}

/// `SELECT DISTINCT e1, e2 ... FROM x` as `SELECT e1, e2 ... FROM x GROUP BY e1, e2 ...`,
/// which gives the same rows: grouping runs on the vnodes, so each returns its distinct
/// values instead of every row, and keys that read only tags and tbname are evaluated once
/// per subtable, from block statistics rather than decoded rows (`SELECT DISTINCT fleet`
/// went from a scan of every row to a look at each subtable). `None` when the query has
/// anything grouping would change: windows, partitions, groups, aggregates, row functions
/// or selectors, `*`, or an ORDER BY that is not by an output column.
fn distinct_as_group_by(q: &Query) -> Option<Query> {
    if !q.distinct
        || q.tags.is_some()
        || q.window.is_some()
        || !q.partition_by.is_empty()
        || !q.group_by.is_empty()
        || q.having.is_some()
        || q.slimit.is_some()
    {
        return None;
    }
    let mut keys = Vec::with_capacity(q.projection.len());
    let mut aliases = Vec::new();
    for item in &q.projection {
        let SelectItem::Expr { expr, alias } = item else {
            return None;
        };
        let mut scalar = true;
        expr.walk(&mut |x| match x {
            Expr::Function { name, .. } => {
                scalar &= call_func(name).is_some()
                    || system_func(name).is_some()
                    || matches!(name.as_str(), "floor" | "ceil" | "round" | "abs")
            }
            // pseudo-columns of windows and INTERP mean nothing without them
            Expr::Column { name, .. } if name.starts_with('_') => scalar = false,
            _ => {}
        });
        if !scalar {
            return None;
        }
        keys.push(expr.clone());
        aliases.extend(alias.clone());
    }
    let by_output = |e: &Expr| match e {
        Expr::Literal(Value::Int(_)) => true,
        Expr::Column { name, .. } if aliases.iter().any(|a| a.eq_ignore_ascii_case(name)) => true,
        // positions differ between the two spellings: compare the text
        e => {
            let text = e.to_string();
            keys.iter()
                .any(|k| k.to_string().eq_ignore_ascii_case(&text))
        }
    };
    if !q.order_by.iter().all(|o| by_output(&o.expr)) {
        return None;
    }
    let mut g = q.clone();
    g.distinct = false;
    g.group_by = keys;
    Some(g)
}

fn has_columns(e: &Expr) -> bool {
    let mut found = false;
    e.walk(&mut |x| {
        if matches!(x, Expr::Column { .. }) {
            found = true
        }
    });
    found
}

fn lit_type(v: &Value) -> DataType {
    match v {
        Value::Null => DataType::BigInt,
        Value::Bool(_) => DataType::Bool,
        Value::Int(_) => DataType::BigInt,
        Value::UInt(_) => DataType::UBigInt,
        Value::Float(_) => DataType::Double,
        Value::Str(s) => DataType::VarChar(s.len().max(1) as u32),
        Value::Timestamp(_) => DataType::Timestamp,
    }
}

enum ScopeKind {
    Stable {
        /// Shared: every column reference and WHERE conjunct consults it.
        schema: Arc<StableSchema>,
        subtable: bool,
        layout: Vec<InputCol>,
    },
    Derived {
        fields: Vec<Field>,
    },
}

struct Scope {
    kind: ScopeKind,
    precision: Precision,
    from_name: String,
    window: Option<WinScope>,
    /// The session's database (what `DATABASE()` returns).
    session_db: Option<String>,
    /// The session's user (what `CURRENT_USER()` returns), if known.
    session_user: Option<String>,
    /// `[_qstart, _qend]`: the time range the WHERE clause gives the primary timestamp of
    /// the table this level reads, once its WHERE clause has been planned.
    query_range: Option<(i64, i64)>,
}

#[derive(Clone)]
enum WinScope {
    /// A tumbling INTERVAL computed per row (pushed to the vnodes): window start, length.
    Interval(PExpr, i64),
    /// Windows assigned by a coordinator [`Node::Window`] (id column `WID`); `Some(length)`
    /// for sliding intervals, whose id is the window start.
    Keyed(Option<i64>),
}

impl WinScope {
    /// The group key of the window and the window length, if fixed.
    fn key(&self) -> (PExpr, Option<i64>) {
        match self {
            WinScope::Interval(ws, iv) => (ws.clone(), Some(*iv)),
            WinScope::Keyed(Some(iv)) => (PExpr::Input(WID, DataType::Timestamp), Some(*iv)),
            WinScope::Keyed(None) => (PExpr::Input(WID, DataType::BigInt), None),
        }
    }
}

impl Scope {
    fn input(&mut self, c: InputCol, t: DataType) -> PExpr {
        if let ScopeKind::Stable { layout, .. } = &mut self.kind {
            let i = match layout.iter().position(|x| *x == c) {
                Some(i) => i,
                None => {
                    layout.push(c);
                    layout.len() - 1
                }
            };
            return PExpr::Input(i, t);
        }
        PExpr::Input(0, t)
    }

    fn resolve(&mut self, name: &str, pos: Pos) -> Result<PExpr, SqlError> {
        if matches!(name, "_qstart" | "_qend") {
            let Some((lo, hi)) = self.query_range else {
                return Err(SqlError::Plan(format!(
                    "'{name}' is the time range the WHERE clause gives a query over a table; it is not known here at {pos}"
                )));
            };
            let t = if name == "_qstart" { lo } else { hi };
            return Ok(PExpr::Lit(Value::Timestamp(t), DataType::Timestamp));
        }
        if matches!(name, "_wstart" | "_wend" | "_wduration") {
            let Some(w) = self.window.clone() else {
                return Err(SqlError::Plan(format!(
                    "'{name}' needs an INTERVAL window at {pos}"
                )));
            };
            let (ws, Some(iv)) = w.key() else {
                return Err(SqlError::Plan(format!(
                    "'{name}' of this window is only available next to aggregates at {pos}"
                )));
            };
            return Ok(match name {
                "_wstart" => ws,
                "_wend" => PExpr::Bin(
                    BinOp::Add,
                    Box::new(ws),
                    Box::new(PExpr::Lit(Value::Int(iv), DataType::BigInt)),
                    DataType::Timestamp,
                ),
                _ => PExpr::Lit(Value::Int(iv), DataType::BigInt),
            });
        }
        match &self.kind {
            ScopeKind::Stable { schema, .. } => {
                let found = if name.eq_ignore_ascii_case("tbname") {
                    Some((InputCol::Tbname, TBNAME_TYPE))
                } else if name.eq_ignore_ascii_case("_rowts") || name.eq_ignore_ascii_case("_c0") {
                    Some((InputCol::Col(0), DataType::Timestamp))
                } else if let Some(i) = schema.column_index(name) {
                    Some((InputCol::Col(i), schema.columns[i].data_type))
                } else {
                    schema
                        .tag_index(name)
                        .map(|i| (InputCol::Tag(i), schema.tags[i].data_type))
                };
                if let Some((col, t)) = found {
                    return Ok(self.input(col, t));
                }
            }
            ScopeKind::Derived { fields } => {
                if let Some(i) = fields
                    .iter()
                    .position(|f| f.name != DUAL_FIELD && f.name.eq_ignore_ascii_case(name))
                {
                    return Ok(PExpr::Input(i, fields[i].data_type));
                }
                if name.eq_ignore_ascii_case("_rowts") || name.eq_ignore_ascii_case("_c0") {
                    if let Some(e) = self.ts_expr() {
                        return Ok(e);
                    }
                }
            }
        }
        Err(SqlError::ColumnNotFound(format!(
            "unknown column '{name}' in {} at {pos}",
            self.from_name
        )))
    }

    /// The row-order key: the timestamp column.
    fn ts_expr(&mut self) -> Option<PExpr> {
        match &self.kind {
            ScopeKind::Stable { .. } => Some(self.input(InputCol::Col(0), DataType::Timestamp)),
            ScopeKind::Derived { fields } => fields
                .iter()
                .position(|f| f.data_type == DataType::Timestamp)
                .map(|i| PExpr::Input(i, DataType::Timestamp)),
        }
    }

    fn is_tag_or_tbname(&self, name: &str) -> bool {
        match &self.kind {
            ScopeKind::Stable { schema, .. } => {
                name.eq_ignore_ascii_case("tbname") || schema.tag_index(name).is_some()
            }
            ScopeKind::Derived { .. } => false,
        }
    }

    /// The types of the input columns (the layout, or the derived table's fields).
    fn layout_types(&self) -> Vec<DataType> {
        match &self.kind {
            ScopeKind::Stable { schema, layout, .. } => layout
                .iter()
                .map(|c| match c {
                    InputCol::Col(i) => schema
                        .columns
                        .get(*i)
                        .map(|d| d.data_type)
                        .unwrap_or(DataType::BigInt),
                    InputCol::Tag(i) => schema
                        .tags
                        .get(*i)
                        .map(|d| d.data_type)
                        .unwrap_or(DataType::BigInt),
                    InputCol::Tbname => TBNAME_TYPE,
                })
                .collect(),
            ScopeKind::Derived { fields } => fields.iter().map(|f| f.data_type).collect(),
        }
    }

    fn width(&self) -> usize {
        self.layout_types().len()
    }

    fn layout(&self) -> Vec<InputCol> {
        match &self.kind {
            ScopeKind::Stable { layout, .. } => layout.clone(),
            ScopeKind::Derived { .. } => Vec::new(),
        }
    }

    /// The columns `*` expands to.
    fn star(&self) -> Vec<String> {
        match &self.kind {
            ScopeKind::Stable {
                schema, subtable, ..
            } => {
                let mut v: Vec<String> = schema.columns.iter().map(|c| c.name.clone()).collect();
                if !subtable {
                    v.extend(schema.tags.iter().map(|c| c.name.clone()));
                }
                v
            }
            ScopeKind::Derived { fields } => fields.iter().map(|f| f.name.clone()).collect(),
        }
    }

    /// The data columns `last_row(*)` expands to.
    fn star_columns(&self) -> Vec<String> {
        match &self.kind {
            ScopeKind::Stable { schema, .. } => {
                schema.columns.iter().map(|c| c.name.clone()).collect()
            }
            ScopeKind::Derived { fields } => fields.iter().map(|f| f.name.clone()).collect(),
        }
    }
}

/// Compilation context: how leaves (columns, aggregates) are resolved.
trait Ctx {
    fn leaf(&mut self, e: &Expr) -> Result<Option<PExpr>, SqlError>;
    fn column(&mut self, name: &str, pos: Pos) -> Result<PExpr, SqlError>;
    fn precision(&self) -> Precision;
    fn session_db(&self) -> Option<&str>;
    fn session_user(&self) -> Option<&str>;
}

struct ScalarCtx<'a> {
    scope: &'a mut Scope,
}

impl Ctx for ScalarCtx<'_> {
    fn leaf(&mut self, e: &Expr) -> Result<Option<PExpr>, SqlError> {
        if let Expr::Function { name, pos, .. } = e {
            if AGG_FUNCS.contains(&name.as_str()) {
                return Err(SqlError::Plan(format!(
                    "aggregate function '{name}' is not allowed here at {pos}"
                )));
            }
            if name == "interp" {
                return Err(SqlError::Plan(format!(
                    "interp() needs RANGE(start [, end]) [EVERY(..)] [FILL(..)] at {pos}"
                )));
            }
            if ROW_FUNCS.contains(&name.as_str()) {
                return Err(SqlError::Plan(format!(
                    "row function '{name}' is not allowed here at {pos}"
                )));
            }
        }
        Ok(None)
    }
    fn column(&mut self, name: &str, pos: Pos) -> Result<PExpr, SqlError> {
        self.scope.resolve(name, pos)
    }
    fn precision(&self) -> Precision {
        self.scope.precision
    }
    fn session_db(&self) -> Option<&str> {
        self.scope.session_db.as_deref()
    }
    fn session_user(&self) -> Option<&str> {
        self.scope.session_user.as_deref()
    }
}

fn const_value(e: &PExpr) -> Option<Value> {
    let mut ins = Vec::new();
    e.inputs(&mut ins);
    if !ins.is_empty() {
        return None;
    }
    eval(e, &[], 1).ok().map(|c| c.get(0))
}

/// Converts a string literal compared with a TIMESTAMP to a timestamp literal.
fn ts_literal(other: &PExpr, lit: PExpr, precision: Precision) -> Result<PExpr, SqlError> {
    if other.data_type() == DataType::Timestamp {
        if let PExpr::Lit(Value::Str(s), _) = &lit {
            return match precision.parse_timestamp(s) {
                Some(t) => Ok(PExpr::Lit(Value::Timestamp(t), DataType::Timestamp)),
                None => Err(SqlError::TypeMismatch(format!(
                    "'{s}' is not a valid timestamp"
                ))),
            };
        }
    }
    Ok(lit)
}

fn compile(e: &Expr, ctx: &mut dyn Ctx) -> Result<PExpr, SqlError> {
    if let Some(p) = ctx.leaf(e)? {
        return Ok(p);
    }
    let precision = ctx.precision();
    Ok(match e {
        Expr::Function {
            name,
            distinct: true,
            pos,
            ..
        } => {
            return Err(SqlError::Unsupported(format!(
                "DISTINCT is not allowed inside '{name}()' (only COUNT(DISTINCT expr)) at {pos}"
            )))
        }
        Expr::Column { name, pos } => ctx.column(name, *pos)?,
        Expr::Literal(v) => PExpr::Lit(v.clone(), lit_type(v)),
        Expr::Duration(ns) => PExpr::Lit(Value::Int(precision.from_nanos(*ns)), DataType::BigInt),
        Expr::Now => PExpr::Lit(Value::Timestamp(precision.now()), DataType::Timestamp),
        Expr::Binary { op, left, right } => {
            let l = compile(left, ctx)?;
            let r = compile(right, ctx)?;
            if op.is_comparison() {
                let r = ts_literal(&l, r, precision)?;
                let l = ts_literal(&r, l, precision)?;
                PExpr::Bin(*op, Box::new(l), Box::new(r), DataType::Bool)
            } else if matches!(op, BinOp::And | BinOp::Or) {
                PExpr::Bin(*op, Box::new(l), Box::new(r), DataType::Bool)
            } else {
                let (lt, rt) = (l.data_type(), r.data_type());
                for t in [lt, rt] {
                    if t.physical() == PhysicalType::Str {
                        return Err(SqlError::TypeMismatch(format!(
                            "operator '{}' cannot be applied to a string in '{e}'{}",
                            op.symbol(),
                            e.position().map(|p| format!(" at {p}")).unwrap_or_default()
                        )));
                    }
                }
                let int_like = |t: DataType| {
                    matches!(
                        t.physical(),
                        PhysicalType::Int | PhysicalType::UInt | PhysicalType::Bool
                    )
                };
                let t = if matches!(op, BinOp::Add | BinOp::Sub)
                    && ((lt == DataType::Timestamp && int_like(rt))
                        || (rt == DataType::Timestamp && int_like(lt) && *op == BinOp::Add))
                {
                    DataType::Timestamp
                } else {
                    DataType::Double
                };
                PExpr::Bin(*op, Box::new(l), Box::new(r), t)
            }
        }
        Expr::Not(x) => PExpr::Not(Box::new(compile(x, ctx)?)),
        Expr::Neg(x) => {
            let p = compile(x, ctx)?;
            let t = match p.data_type().physical() {
                PhysicalType::Int => DataType::BigInt,
                PhysicalType::Str => {
                    return Err(SqlError::TypeMismatch(format!(
                        "cannot negate a string in '{e}'"
                    )))
                }
                _ => DataType::Double,
            };
            PExpr::Neg(Box::new(p), t)
        }
        Expr::IsNull { expr, negated } => PExpr::IsNull(Box::new(compile(expr, ctx)?), *negated),
        Expr::InList {
            expr,
            list,
            negated,
        } => {
            let p = compile(expr, ctx)?;
            let mut vals = Vec::new();
            for x in list {
                let lit = ts_literal(&p, compile(x, ctx)?, precision)?;
                match const_value(&lit) {
                    Some(v) => vals.push(v),
                    None => {
                        return Err(SqlError::Plan(format!(
                            "IN (...) accepts only constants, found '{x}'"
                        )))
                    }
                }
            }
            PExpr::InList(Box::new(p), vals.into(), *negated)
        }
        Expr::Between {
            expr,
            low,
            high,
            negated,
        } => {
            let p = compile(expr, ctx)?;
            let lo = ts_literal(&p, compile(low, ctx)?, precision)?;
            let hi = ts_literal(&p, compile(high, ctx)?, precision)?;
            let b = PExpr::Bin(
                BinOp::And,
                Box::new(PExpr::Bin(
                    BinOp::GtEq,
                    Box::new(p.clone()),
                    Box::new(lo),
                    DataType::Bool,
                )),
                Box::new(PExpr::Bin(
                    BinOp::LtEq,
                    Box::new(p),
                    Box::new(hi),
                    DataType::Bool,
                )),
                DataType::Bool,
            );
            if *negated {
                PExpr::Not(Box::new(b))
            } else {
                b
            }
        }
        Expr::Match {
            expr,
            pattern,
            negated,
            pos,
        } => {
            let p = compile(expr, ctx)?;
            if p.data_type().physical() != PhysicalType::Str {
                return Err(SqlError::TypeMismatch(format!(
                    "{} needs a string, '{expr}' is {} at {pos}",
                    if *negated { "NMATCH" } else { "MATCH" },
                    p.data_type()
                )));
            }
            // Checked here, so that a bad pattern is a planning error with its place.
            crate::expr::regex_for(pattern).map_err(|e| SqlError::Plan(format!("{e} at {pos}")))?;
            PExpr::Regex(Box::new(p), pattern.clone(), *negated)
        }
        Expr::Like {
            expr,
            pattern,
            negated,
        } => {
            let p = compile(expr, ctx)?;
            match pattern.as_ref() {
                Expr::Literal(Value::Str(s)) => PExpr::Like(Box::new(p), s.clone(), *negated),
                other => {
                    return Err(SqlError::Plan(format!(
                        "LIKE needs a quoted pattern, found '{other}'"
                    )))
                }
            }
        }
        Expr::Case {
            operand,
            whens,
            else_,
        } => {
            let op = match operand {
                Some(o) => Some(compile(o, ctx)?),
                None => None,
            };
            let mut arms = Vec::new();
            let mut types = Vec::new();
            for (c, v) in whens {
                let c = compile(c, ctx)?;
                let c = match &op {
                    Some(o) => {
                        let c = ts_literal(o, c, precision)?;
                        PExpr::Bin(BinOp::Eq, Box::new(o.clone()), Box::new(c), DataType::Bool)
                    }
                    None => c,
                };
                let v = compile(v, ctx)?;
                if !matches!(v, PExpr::Lit(Value::Null, _)) {
                    types.push(v.data_type());
                }
                arms.push((c, v));
            }
            let e = match else_ {
                Some(x) => {
                    let x = compile(x, ctx)?;
                    if !matches!(x, PExpr::Lit(Value::Null, _)) {
                        types.push(x.data_type());
                    }
                    Some(Box::new(x))
                }
                None => None,
            };
            PExpr::Case(arms, e, common_type(&types))
        }
        Expr::Function {
            name, args, pos, ..
        } if system_func(name).is_some() => {
            if !args.is_empty() {
                return Err(SqlError::Plan(format!(
                    "function '{name}' takes no arguments, got {} at {pos}",
                    args.len()
                )));
            }
            match system_func(name) {
                Some(SystemFunc::Today) => PExpr::Lit(
                    Value::Timestamp(precision.today()),
                    DataType::Timestamp,
                ),
                Some(SystemFunc::Database) => match ctx.session_db() {
                    Some(db) => PExpr::Lit(
                        Value::Str(db.to_string()),
                        DataType::VarChar(db.len().max(1) as u32),
                    ),
                    None => PExpr::Lit(Value::Null, DataType::VarChar(1)),
                },
                Some(SystemFunc::ServerVersion | SystemFunc::ClientVersion) => PExpr::Lit(
                    Value::Str(VERSION.to_string()),
                    DataType::VarChar(VERSION.len() as u32),
                ),
                Some(SystemFunc::User) => match ctx.session_user() {
                    Some(u) => PExpr::Lit(
                        Value::Str(u.to_string()),
                        DataType::VarChar(u.len().max(1) as u32),
                    ),
                    None => {
                        return Err(SqlError::Plan(format!(
                            "function '{name}' needs the session's user, which this planner was not given at {pos}"
                        )))
                    }
                },
                Some(SystemFunc::ServerStatus) => PExpr::Lit(Value::Int(1), DataType::Int),
                Some(SystemFunc::Timezone) => PExpr::Lit(
                    Value::Str(TIMEZONE.to_string()),
                    DataType::VarChar(TIMEZONE.len() as u32),
                ),
                None => return Err(SqlError::Unsupported(format!("function '{name}' at {pos}"))),
            }
        }
        Expr::Function {
            name, args, pos, ..
        } if call_func(name).is_some() => {
            let Some((f, lo, hi)) = call_func(name) else {
                return Err(SqlError::Unsupported(format!("function '{name}' at {pos}")));
            };
            if args.len() < lo || args.len() > hi {
                return Err(SqlError::Plan(format!(
                    "function '{name}' takes {} arguments, got {} at {pos}",
                    if lo == hi {
                        lo.to_string()
                    } else if hi == usize::MAX {
                        format!("at least {lo}")
                    } else {
                        format!("{lo} to {hi}")
                    },
                    args.len()
                )));
            }
            let mut a = Vec::new();
            for x in args {
                a.push(compile(x, ctx)?);
            }
            // A NULL literal is NULL of whatever type its place takes (NULL in, NULL out, as
            // in TDengine), so `LENGTH(NULL)` passes the type checks below as a string.
            for (k, x) in a.iter_mut().enumerate() {
                if matches!(x, PExpr::Lit(Value::Null, _)) && takes_string(f, k) {
                    *x = PExpr::Lit(Value::Null, DataType::VarChar(1));
                }
            }
            let calendar = matches!(
                f,
                CallFunc::Weekday
                    | CallFunc::Dayofweek
                    | CallFunc::Week
                    | CallFunc::Weekofyear
                    | CallFunc::ToChar
            );
            if matches!(f, CallFunc::TimeDiff) || calendar {
                // timestamp strings count as timestamps here too
                let ts = PExpr::Input(0, DataType::Timestamp);
                let n = if calendar { 1 } else { 2 };
                for x in a.iter_mut().take(n) {
                    *x = ts_literal(&ts, x.clone(), precision)?;
                }
            }
            if f == CallFunc::Week && a.len() == 1 {
                a.push(PExpr::Lit(Value::Int(0), DataType::BigInt));
            }
            if f == CallFunc::Week && !a.get(1).is_some_and(|m| m.data_type().is_numeric()) {
                return Err(SqlError::TypeMismatch(format!(
                    "function 'week' needs a numeric mode (0-7) as its second argument at {pos}"
                )));
            }
            if let (CallFunc::ToChar | CallFunc::ToTimestamp, Some(fmt)) = (f, a.get(1)) {
                if fmt.data_type().physical() != PhysicalType::Str {
                    return Err(SqlError::TypeMismatch(format!(
                        "function '{name}' needs a format string as its second argument, '{}' is {} at {pos}",
                        args[1],
                        fmt.data_type()
                    )));
                }
                if let PExpr::Lit(Value::Str(fmt), _) = fmt {
                    if fmt.len() > crate::timefmt::FORMAT_BYTES_MAX {
                        return Err(SqlError::Plan(format!(
                            "the format of '{name}' has {} bytes; at most {} are accepted at {pos}",
                            fmt.len(),
                            crate::timefmt::FORMAT_BYTES_MAX
                        )));
                    }
                }
            }
            if (matches!(
                f,
                CallFunc::TimeTruncate | CallFunc::TimeDiff | CallFunc::ToIso8601
            ) || calendar)
                && !matches!(
                    a[0].data_type().physical(),
                    PhysicalType::Timestamp | PhysicalType::Int
                )
            {
                return Err(SqlError::TypeMismatch(format!(
                    "function '{name}' needs a timestamp, '{}' is {} at {pos}",
                    args[0],
                    a[0].data_type()
                )));
            }
            if matches!(
                f,
                CallFunc::ToIso8601 | CallFunc::ToUnixTimestamp | CallFunc::ToTimestamp
            ) || calendar
            {
                a.push(PExpr::Lit(
                    Value::Int(precision.per_second()),
                    DataType::BigInt,
                ));
            }
            let numeric_args = matches!(
                f,
                CallFunc::Sqrt
                    | CallFunc::Pow
                    | CallFunc::Log
                    | CallFunc::Exp
                    | CallFunc::Ln
                    | CallFunc::Sin
                    | CallFunc::Cos
                    | CallFunc::Tan
                    | CallFunc::Sign
                    | CallFunc::Mod
                    | CallFunc::Truncate
                    | CallFunc::Acos
                    | CallFunc::Asin
                    | CallFunc::Atan
                    | CallFunc::Degrees
                    | CallFunc::Radians
                    | CallFunc::Char
            );
            let string_args = matches!(
                f,
                CallFunc::Lower
                    | CallFunc::Upper
                    | CallFunc::Length
                    | CallFunc::CharLength
                    | CallFunc::Position
                    | CallFunc::Substr
                    | CallFunc::Trim
                    | CallFunc::Ltrim
                    | CallFunc::Rtrim
                    | CallFunc::Replace
                    | CallFunc::ToUnixTimestamp
                    | CallFunc::ToTimestamp
                    | CallFunc::Repeat
                    | CallFunc::Ascii
            );
            if numeric_args
                && a.iter()
                    .any(|x| !(x.data_type().is_numeric() || x.data_type() == DataType::Bool))
            {
                return Err(SqlError::TypeMismatch(format!(
                    "function '{name}' needs numeric arguments at {pos}"
                )));
            }
            if string_args && a[0].data_type().physical() != PhysicalType::Str {
                return Err(SqlError::TypeMismatch(format!(
                    "function '{name}' needs a string argument, '{}' is {} at {pos}",
                    args[0],
                    a[0].data_type()
                )));
            }
            let str_len = |xs: &[PExpr]| -> u32 {
                xs.iter()
                    .map(|x| match x.data_type() {
                        DataType::VarChar(l) | DataType::NChar(l) => l,
                        _ => 32,
                    })
                    .sum::<u32>()
                    .max(1)
            };
            let t = match f {
                CallFunc::Concat => DataType::VarChar(str_len(&a)),
                CallFunc::ConcatWs => DataType::VarChar(str_len(&a).saturating_mul(2)),
                CallFunc::Lower
                | CallFunc::Upper
                | CallFunc::Substr
                | CallFunc::Trim
                | CallFunc::Ltrim
                | CallFunc::Rtrim => DataType::VarChar(str_len(&a[..1])),
                CallFunc::Length | CallFunc::CharLength | CallFunc::Position => DataType::BigInt,
                CallFunc::Sqrt
                | CallFunc::Pow
                | CallFunc::Log
                | CallFunc::Exp
                | CallFunc::Ln
                | CallFunc::Sin
                | CallFunc::Cos
                | CallFunc::Tan
                | CallFunc::Mod
                | CallFunc::Truncate
                | CallFunc::Rand
                | CallFunc::Acos
                | CallFunc::Asin
                | CallFunc::Atan
                | CallFunc::Pi
                | CallFunc::Degrees
                | CallFunc::Radians => DataType::Double,
                CallFunc::Ascii => DataType::BigInt,
                CallFunc::Char => DataType::VarChar((a.len() as u32).saturating_mul(4)),
                CallFunc::Repeat => {
                    let n = match a.get(1) {
                        Some(PExpr::Lit(v, _)) => v.as_i64().unwrap_or(1).clamp(1, 1 << 16),
                        _ => 16,
                    } as u32;
                    DataType::VarChar(
                        str_len(&a[..1])
                            .saturating_mul(n)
                            .min(crate::expr::REPEAT_BYTES_MAX as u32),
                    )
                }
                CallFunc::Coalesce => {
                    common_type(&a.iter().map(PExpr::data_type).collect::<Vec<_>>())
                }
                CallFunc::Nvl2 | CallFunc::If => {
                    common_type(&a[1..].iter().map(PExpr::data_type).collect::<Vec<_>>())
                }
                CallFunc::NullIf => a[0].data_type(),
                CallFunc::Weekday | CallFunc::Dayofweek | CallFunc::Week | CallFunc::Weekofyear => {
                    DataType::BigInt
                }
                CallFunc::ToChar => DataType::VarChar(str_len(&a[1..2]).saturating_mul(4).max(64)),
                CallFunc::ToTimestamp => DataType::Timestamp,
                CallFunc::Sign | CallFunc::TimeDiff | CallFunc::ToUnixTimestamp => DataType::BigInt,
                CallFunc::Replace => DataType::VarChar(str_len(&a[..1]).saturating_mul(2)),
                CallFunc::TimeTruncate => DataType::Timestamp,
                CallFunc::ToIso8601 => DataType::VarChar(40),
                CallFunc::Greatest | CallFunc::Least => {
                    common_type(&a.iter().map(PExpr::data_type).collect::<Vec<_>>())
                }
            };
            // CONCAT_WS skips NULL values, but a NULL literal argument makes it NULL, as
            // TDengine does (its NULL-typed argument nulls the whole result).
            if f == CallFunc::ConcatWs && a.iter().any(|x| matches!(x, PExpr::Lit(Value::Null, _)))
            {
                return Ok(PExpr::Lit(Value::Null, t));
            }
            PExpr::Call(f, a, t)
        }
        Expr::Function {
            name, args, pos, ..
        } => {
            let f = match name.as_str() {
                "floor" => ScalarFunc::Floor,
                "ceil" => ScalarFunc::Ceil,
                "round" => ScalarFunc::Round,
                "abs" => ScalarFunc::Abs,
                _ => {
                    return Err(SqlError::Unsupported(format!(
                        "function '{name}' is not supported yet at {pos}"
                    )))
                }
            };
            if args.len() != 1 {
                return Err(SqlError::Plan(format!(
                    "function '{name}' takes 1 argument, got {} at {pos}",
                    args.len()
                )));
            }
            let a = compile(&args[0], ctx)?;
            if !a.data_type().is_numeric() && a.data_type() != DataType::Bool {
                return Err(SqlError::TypeMismatch(format!(
                    "function '{name}' needs a numeric argument at {pos}"
                )));
            }
            PExpr::Func(f, Box::new(a), DataType::Double)
        }
        Expr::Cast { expr, data_type } => {
            let inner = compile(expr, ctx)?;
            match (&inner, data_type) {
                // A time literal in the database's precision ('2024-01-01 00:00:00'), as in a
                // comparison with a timestamp; digits stay a raw epoch value.
                (PExpr::Lit(Value::Str(s), _), DataType::Timestamp)
                    if s.trim().parse::<i64>().is_err() =>
                {
                    match precision.parse_timestamp(s) {
                        Some(t) => PExpr::Lit(Value::Timestamp(t), DataType::Timestamp),
                        None => {
                            return Err(SqlError::TypeMismatch(format!(
                                "'{s}' is not a valid timestamp in '{e}'"
                            )))
                        }
                    }
                }
                _ => PExpr::Cast(Box::new(inner), *data_type),
            }
        }
    })
}

/// Aggregation context: aggregate calls become references to the aggregate output
/// (`keys ++ aggs`), group-key expressions become key references, other column expressions
/// become values carried from the single selector's row.
struct AggCtx<'a> {
    scope: &'a mut Scope,
    keys: Vec<PExpr>,
    aggs: Vec<AggSpec>,
    /// For each Carry spec: its position and text, for error messages.
    carry_info: Vec<(usize, String, Option<Pos>)>,
}

impl AggCtx<'_> {
    fn add(&mut self, spec: AggSpec) -> PExpr {
        let nk = self.keys.len();
        let t = spec.out_type;
        if let Some(i) = self.aggs.iter().position(|a| *a == spec) {
            return PExpr::Input(nk + i, t);
        }
        self.aggs.push(spec);
        PExpr::Input(nk + self.aggs.len() - 1, t)
    }

    fn agg_call(
        &mut self,
        name: &str,
        args: &[Expr],
        star: bool,
        pos: Pos,
    ) -> Result<PExpr, SqlError> {
        if args.iter().any(contains_agg) {
            return Err(SqlError::Plan(format!(
                "aggregate functions cannot be nested in '{name}' at {pos}"
            )));
        }
        // STDDEV is the population standard deviation already; VAR_POP is its square.
        match name {
            "stddev_pop" => return self.agg_call("stddev", args, star, pos),
            "var_pop" => {
                let sd = self.agg_call("stddev", args, star, pos)?;
                return Ok(PExpr::Bin(
                    BinOp::Mul,
                    Box::new(sd.clone()),
                    Box::new(sd),
                    DataType::Double,
                ));
            }
            _ => {}
        }
        if name == "group_concat" {
            return self.group_concat(args, star, pos);
        }
        let func = match name {
            "count" if star || args.is_empty() => AggFunc::CountStar,
            "count" => AggFunc::Count,
            "sum" => AggFunc::Sum,
            "avg" => AggFunc::Avg,
            "min" => AggFunc::Min,
            "max" => AggFunc::Max,
            "first" => AggFunc::First,
            "last" => AggFunc::Last,
            "spread" => AggFunc::Spread,
            "stddev" => AggFunc::Stddev,
            "twa" => AggFunc::Twa,
            "elapsed" => AggFunc::Elapsed,
            "percentile" => AggFunc::Percentile,
            "apercentile" => AggFunc::Apercentile,
            "leastsquares" => AggFunc::Leastsquares,
            "mode" => AggFunc::Mode,
            "irate" => AggFunc::Irate,
            "hyperloglog" => AggFunc::HyperLogLog,
            "count_distinct" => AggFunc::CountDistinct,
            _ => AggFunc::LastRow,
        };
        let precision = self.scope.precision;
        // (min, max) number of arguments
        let arity = match func {
            AggFunc::Elapsed => (1, 2),
            AggFunc::Percentile => (2, 2),
            AggFunc::Apercentile => (2, 3),
            AggFunc::Leastsquares => (3, 3),
            _ => (1, 1),
        };
        if func == AggFunc::CountStar {
            return Ok(self.add(AggSpec {
                func,
                arg: None,
                ts: None,
                carry: vec![],
                carry_of: None,
                out_type: DataType::BigInt,
                params: vec![],
            }));
        }
        if star || args.len() < arity.0 || args.len() > arity.1 {
            return Err(SqlError::Plan(format!(
                "function '{name}' takes {} at {pos}",
                match arity {
                    (1, 1) => "exactly one argument".to_string(),
                    (a, b) if a == b => format!("{a} arguments"),
                    (a, b) => format!("{a} to {b} arguments"),
                }
            )));
        }
        let arg = compile(&args[0], &mut ScalarCtx { scope: self.scope })?;
        let mut params = Vec::new();
        for a in &args[1..] {
            params.push(const_arg(a, precision, name, pos)?);
        }
        match func {
            AggFunc::Percentile | AggFunc::Apercentile => {
                let p = params.first().and_then(Value::as_f64).unwrap_or(-1.0);
                if !(0.0..=100.0).contains(&p) {
                    return Err(SqlError::InvalidArgument(format!(
                        "{name}: the percentile must be between 0 and 100 at {pos}"
                    )));
                }
            }
            AggFunc::Elapsed if arg.data_type() != DataType::Timestamp => {
                return Err(SqlError::TypeMismatch(format!(
                    "elapsed() needs the timestamp column at {pos}"
                )));
            }
            AggFunc::Irate => params = vec![Value::Int(precision.from_nanos(1_000_000_000))],
            _ => {}
        }
        let at = arg.data_type();
        let numeric = at.is_numeric() || at == DataType::Bool;
        let out_type = match func {
            AggFunc::Count | AggFunc::HyperLogLog | AggFunc::CountDistinct => DataType::BigInt,
            AggFunc::Spread
            | AggFunc::Stddev
            | AggFunc::Twa
            | AggFunc::Percentile
            | AggFunc::Apercentile
            | AggFunc::Leastsquares
            | AggFunc::Irate
                if !(numeric || at == DataType::Timestamp) =>
            {
                return Err(SqlError::TypeMismatch(format!(
                    "function '{name}' needs a numeric argument, '{}' is {at} at {pos}",
                    args[0]
                )))
            }
            AggFunc::Leastsquares => DataType::VarChar(64),
            AggFunc::Spread
            | AggFunc::Stddev
            | AggFunc::Twa
            | AggFunc::Percentile
            | AggFunc::Apercentile
            | AggFunc::Irate
            | AggFunc::Elapsed => DataType::Double,
            AggFunc::Sum | AggFunc::Avg if !numeric => {
                return Err(SqlError::TypeMismatch(format!(
                    "function '{name}' needs a numeric argument, '{}' is {at} at {pos}",
                    args[0]
                )))
            }
            AggFunc::Sum if at.physical() == PhysicalType::Float => DataType::Double,
            AggFunc::Sum => DataType::BigInt,
            AggFunc::Avg => DataType::Double,
            _ => at,
        };
        let ts = if func.is_selector() || !func.is_mergeable() {
            self.scope.ts_expr()
        } else {
            None
        };
        Ok(self.add(AggSpec {
            func,
            arg: Some(arg),
            ts,
            carry: vec![],
            carry_of: None,
            out_type,
            params,
        }))
    }
}

impl AggCtx<'_> {
    /// `GROUP_CONCAT(x [, y ...], sep)`: each row's value is `CONCAT(x, y, ...)` (NULL when
    /// one of them is), NULL values are skipped, and the rest are joined by the constant
    /// string `sep` in time order. It needs all of a group's rows, so it runs on the
    /// coordinator over the gathered rows, which makes the order independent of how the
    /// rows are spread over vnodes.
    fn group_concat(&mut self, args: &[Expr], star: bool, pos: Pos) -> Result<PExpr, SqlError> {
        let (Some((sep, values)), false) = (args.split_last(), star) else {
            return Err(SqlError::Plan(format!(
                "function 'group_concat' takes the values and a separator, got {} arguments at {pos}",
                args.len()
            )));
        };
        if values.is_empty() {
            return Err(SqlError::Plan(format!(
                "function 'group_concat' takes the values and a separator, got 1 argument at {pos}"
            )));
        }
        let Value::Str(sep) = const_arg(sep, self.scope.precision, "group_concat", pos)? else {
            return Err(SqlError::TypeMismatch(format!(
                "the separator of 'group_concat' must be a string, '{sep}' is not one at {pos}"
            )));
        };
        let mut parts = Vec::with_capacity(values.len());
        for v in values {
            let p = compile(v, &mut ScalarCtx { scope: self.scope })?;
            if p.data_type().physical() != PhysicalType::Str {
                return Err(SqlError::TypeMismatch(format!(
                    "function 'group_concat' needs string values, '{v}' is {} at {pos}",
                    p.data_type()
                )));
            }
            parts.push(p);
        }
        let arg = if parts.len() == 1 {
            parts.remove(0)
        } else {
            let len = parts
                .iter()
                .map(|p| match p.data_type() {
                    DataType::VarChar(l) | DataType::NChar(l) => l,
                    _ => 1,
                })
                .fold(0u32, u32::saturating_add);
            PExpr::Call(CallFunc::Concat, parts, DataType::VarChar(len.max(1)))
        };
        let ts = self.scope.ts_expr();
        Ok(self.add(AggSpec {
            func: AggFunc::GroupConcat,
            arg: Some(arg),
            ts,
            carry: vec![],
            carry_of: None,
            out_type: DataType::VarChar(crate::agg::GROUP_CONCAT_BYTES_MAX as u32),
            params: vec![Value::Str(sep)],
        }))
    }
}

impl Ctx for AggCtx<'_> {
    fn leaf(&mut self, e: &Expr) -> Result<Option<PExpr>, SqlError> {
        if let Expr::Column { name, pos } = e {
            if matches!(name.as_str(), "_qstart" | "_qend") {
                // a constant of the query, not a value carried from a selected row
                return self.scope.resolve(name, *pos).map(Some);
            }
            if matches!(name.as_str(), "_wstart" | "_wend" | "_wduration") {
                if let Some(w) = self.scope.window.clone() {
                    let (ws, iv) = w.key();
                    let Some(iv) = iv else {
                        // row-defined windows: first and last row of the window
                        let ts = self.scope.ts_expr().ok_or_else(|| {
                            SqlError::Plan(format!("'{name}' needs a timestamp column at {pos}"))
                        })?;
                        let mut span = |func| {
                            self.add(AggSpec {
                                func,
                                arg: Some(ts.clone()),
                                ts: None,
                                carry: vec![],
                                carry_of: None,
                                out_type: DataType::Timestamp,
                                params: vec![],
                            })
                        };
                        let lo = span(AggFunc::TsMin);
                        let hi = span(AggFunc::TsMax);
                        return Ok(Some(match name.as_str() {
                            "_wstart" => lo,
                            "_wend" => hi,
                            _ => {
                                PExpr::Bin(BinOp::Sub, Box::new(hi), Box::new(lo), DataType::BigInt)
                            }
                        }));
                    };
                    let ivl = PExpr::Lit(Value::Int(iv), DataType::BigInt);
                    if name == "_wduration" {
                        return Ok(Some(ivl));
                    }
                    if let Some(k) = self.keys.iter().position(|k| *k == ws) {
                        let kr = PExpr::Input(k, DataType::Timestamp);
                        if name == "_wstart" {
                            return Ok(Some(kr));
                        }
                        return Ok(Some(PExpr::Bin(
                            BinOp::Add,
                            Box::new(kr),
                            Box::new(ivl),
                            DataType::Timestamp,
                        )));
                    }
                }
            }
        }
        if let Expr::Function {
            name,
            args,
            star,
            distinct,
            pos,
        } = e
        {
            if *distinct && AGG_FUNCS.contains(&name.as_str()) {
                if name != "count" || *star || args.len() != 1 {
                    return Err(SqlError::Unsupported(format!(
                        "DISTINCT inside an aggregate is supported as COUNT(DISTINCT expr) only, not in '{e}' at {pos}"
                    )));
                }
                return self.agg_call("count_distinct", args, false, *pos).map(Some);
            }
            if AGG_FUNCS.contains(&name.as_str()) {
                return self.agg_call(name, args, *star, *pos).map(Some);
            }
            if ROW_FUNCS.contains(&name.as_str()) || name == "interp" {
                return Err(SqlError::Unsupported(format!(
                    "'{name}' cannot be combined with aggregates, GROUP BY or windows yet at {pos}"
                )));
            }
        }
        if contains_agg(e) || !has_columns(e) {
            return Ok(None);
        }
        let p = compile(e, &mut ScalarCtx { scope: self.scope })?;
        if let Some(k) = self.keys.iter().position(|k| *k == p) {
            return Ok(Some(PExpr::Input(k, p.data_type())));
        }
        if !matches!(e, Expr::Column { .. }) {
            // compile the parts: each column becomes a key reference or a carried value
            return Ok(None);
        }
        let t = p.data_type();
        let spec = AggSpec {
            func: AggFunc::Carry,
            arg: Some(p),
            ts: None,
            carry: vec![],
            carry_of: None,
            out_type: t,
            params: vec![],
        };
        let before = self.aggs.len();
        let r = self.add(spec);
        if self.aggs.len() > before {
            self.carry_info.push((before, e.to_string(), e.position()));
        }
        Ok(Some(r))
    }
    fn column(&mut self, name: &str, pos: Pos) -> Result<PExpr, SqlError> {
        Err(SqlError::Plan(format!(
            "column '{name}' is not allowed here at {pos}"
        )))
    }
    fn precision(&self) -> Precision {
        self.scope.precision
    }
    fn session_db(&self) -> Option<&str> {
        self.scope.session_db.as_deref()
    }
    fn session_user(&self) -> Option<&str> {
        self.scope.session_user.as_deref()
    }
}

/// Functions of the session and the server, constant within a statement.
#[derive(Clone, Copy, Debug, PartialEq)]
enum SystemFunc {
    /// Midnight (UTC, the zone every time literal is read in) of the statement's day.
    Today,
    Database,
    ServerVersion,
    /// The client's version as this server knows it: the protocol does not carry the
    /// client's own, and a client of this build speaks this version's protocol.
    ClientVersion,
    /// CURRENT_USER() / USER(): the user the statement runs as. TDengine appends
    /// `@<fqdn of the host that parsed it>`; Tidal plans on a frontend or in the client
    /// library, so the host would depend on where the plan ran: the name alone is the same
    /// answer on both paths.
    User,
    /// 1 whenever the statement runs (TDengine's "the server is up").
    ServerStatus,
    Timezone,
}

fn system_func(name: &str) -> Option<SystemFunc> {
    Some(match name {
        "today" => SystemFunc::Today,
        "database" => SystemFunc::Database,
        "server_version" => SystemFunc::ServerVersion,
        "client_version" => SystemFunc::ClientVersion,
        "server_status" => SystemFunc::ServerStatus,
        "current_user" | "user" => SystemFunc::User,
        "timezone" => SystemFunc::Timezone,
        _ => return None,
    })
}

/// What `SERVER_VERSION()` returns.
const VERSION: &str = env!("CARGO_PKG_VERSION");
/// What `TIMEZONE()` returns: time literals are read, and timestamps printed, in UTC.
const TIMEZONE: &str = "UTC (UTC, +0000)";

/// Multi-argument scalar functions: (function, min args, max args).
fn call_func(name: &str) -> Option<(CallFunc, usize, usize)> {
    Some(match name {
        "concat" => (CallFunc::Concat, 1, usize::MAX),
        "concat_ws" => (CallFunc::ConcatWs, 2, usize::MAX),
        "lower" => (CallFunc::Lower, 1, 1),
        "upper" => (CallFunc::Upper, 1, 1),
        "length" => (CallFunc::Length, 1, 1),
        "char_length" => (CallFunc::CharLength, 1, 1),
        "position" => (CallFunc::Position, 2, 2),
        "substr" | "substring" => (CallFunc::Substr, 2, 3),
        "trim" => (CallFunc::Trim, 1, 1),
        "ltrim" => (CallFunc::Ltrim, 1, 1),
        "rtrim" => (CallFunc::Rtrim, 1, 1),
        "sqrt" => (CallFunc::Sqrt, 1, 1),
        "pow" => (CallFunc::Pow, 2, 2),
        "log" => (CallFunc::Log, 1, 2),
        "greatest" => (CallFunc::Greatest, 2, usize::MAX),
        "least" => (CallFunc::Least, 2, usize::MAX),
        "exp" => (CallFunc::Exp, 1, 1),
        "ln" => (CallFunc::Ln, 1, 1),
        "sin" => (CallFunc::Sin, 1, 1),
        "cos" => (CallFunc::Cos, 1, 1),
        "tan" => (CallFunc::Tan, 1, 1),
        "sign" => (CallFunc::Sign, 1, 1),
        "replace" => (CallFunc::Replace, 3, 3),
        "timetruncate" => (CallFunc::TimeTruncate, 2, 2),
        "timediff" => (CallFunc::TimeDiff, 2, 3),
        "to_iso8601" => (CallFunc::ToIso8601, 1, 1),
        "to_unixtimestamp" => (CallFunc::ToUnixTimestamp, 1, 1),
        "mod" => (CallFunc::Mod, 2, 2),
        "truncate" => (CallFunc::Truncate, 2, 2),
        "rand" => (CallFunc::Rand, 0, 0),
        "weekday" => (CallFunc::Weekday, 1, 1),
        "dayofweek" => (CallFunc::Dayofweek, 1, 1),
        "week" => (CallFunc::Week, 1, 2),
        "weekofyear" => (CallFunc::Weekofyear, 1, 1),
        "to_char" => (CallFunc::ToChar, 2, 2),
        "to_timestamp" => (CallFunc::ToTimestamp, 2, 2),
        "acos" => (CallFunc::Acos, 1, 1),
        "asin" => (CallFunc::Asin, 1, 1),
        "atan" => (CallFunc::Atan, 1, 1),
        "pi" => (CallFunc::Pi, 0, 0),
        "degrees" => (CallFunc::Degrees, 1, 1),
        "radians" => (CallFunc::Radians, 1, 1),
        "repeat" => (CallFunc::Repeat, 2, 2),
        "ascii" => (CallFunc::Ascii, 1, 1),
        "char" => (CallFunc::Char, 1, usize::MAX),
        "coalesce" => (CallFunc::Coalesce, 1, usize::MAX),
        "ifnull" | "nvl" => (CallFunc::Coalesce, 2, 2),
        "nvl2" => (CallFunc::Nvl2, 3, 3),
        "nullif" => (CallFunc::NullIf, 2, 2),
        "if" => (CallFunc::If, 3, 3),
        _ => return None,
    })
}

/// Whether argument `k` of `f` is a string (where a NULL literal stands for a NULL string).
fn takes_string(f: CallFunc, k: usize) -> bool {
    match f {
        CallFunc::Concat | CallFunc::ConcatWs | CallFunc::Position | CallFunc::Replace => true,
        CallFunc::Lower
        | CallFunc::Upper
        | CallFunc::Length
        | CallFunc::CharLength
        | CallFunc::Substr
        | CallFunc::Trim
        | CallFunc::Ltrim
        | CallFunc::Rtrim
        | CallFunc::ToUnixTimestamp
        | CallFunc::Repeat
        | CallFunc::Ascii => k == 0,
        CallFunc::ToTimestamp => k <= 1,
        CallFunc::ToChar => k == 1,
        _ => false,
    }
}

/// The result type of values of these types (CASE arms, GREATEST): strings win, then
/// doubles; integers stay BIGINT.
fn common_type(types: &[DataType]) -> DataType {
    if types.is_empty() {
        return DataType::BigInt;
    }
    if types.iter().any(|t| t.physical() == PhysicalType::Str) {
        let len = types
            .iter()
            .map(|t| match t {
                DataType::VarChar(l) | DataType::NChar(l) => *l,
                _ => 32,
            })
            .max()
            .unwrap_or(1);
        return DataType::VarChar(len);
    }
    if types.iter().all(|t| *t == types[0]) {
        return types[0];
    }
    if types.iter().any(|t| t.physical() == PhysicalType::Float) {
        return DataType::Double;
    }
    DataType::BigInt
}

/// Bin boundaries of HISTOGRAM: `user_input` '[b0, b1, ...]', `linear_bin`
/// '{"start": s, "width": w, "count": n, "infinity": bool}', `log_bin`
/// '{"start": s, "factor": f, "count": n, "infinity": bool}'.
fn histogram_bins(kind: &str, desc: &str) -> Result<Vec<f64>, String> {
    let json: serde_json::Value =
        serde_json::from_str(desc).map_err(|e| format!("bin description is not JSON: {e}"))?;
    let b: Vec<f64> = match kind.to_ascii_lowercase().as_str() {
        "user_input" => json
            .as_array()
            .ok_or("user_input needs an array of boundaries")?
            .iter()
            .map(|v| v.as_f64().ok_or("boundaries must be numbers"))
            .collect::<Result<_, _>>()?,
        k @ ("linear_bin" | "log_bin") => {
            let num = |f: &str| {
                json.get(f)
                    .and_then(serde_json::Value::as_f64)
                    .ok_or(format!("{k} needs a numeric \"{f}\""))
            };
            let start = num("start")?;
            let count = num("count")?;
            if !(1.0..=HISTOGRAM_BINS_MAX).contains(&count) {
                return Err(format!("count must be between 1 and {HISTOGRAM_BINS_MAX}"));
            }
            let step = num(if k == "linear_bin" { "width" } else { "factor" })?;
            let mut v: Vec<f64> = (0..=count as usize)
                .map(|i| {
                    if k == "linear_bin" {
                        start + step * i as f64
                    } else {
                        start * step.powi(i as i32)
                    }
                })
                .collect();
            if json
                .get("infinity")
                .and_then(serde_json::Value::as_bool)
                .unwrap_or(false)
            {
                v.insert(0, f64::NEG_INFINITY);
                v.push(f64::INFINITY);
            }
            v
        }
        other => return Err(format!("unknown bin type '{other}'")),
    };
    if b.len() < 2
        || b.windows(2)
            .any(|w| w[0].partial_cmp(&w[1]) != Some(std::cmp::Ordering::Less))
    {
        return Err("bin boundaries must be at least two increasing numbers".into());
    }
    if b.len() as f64 > HISTOGRAM_BINS_MAX + 3.0 {
        return Err(format!("at most {HISTOGRAM_BINS_MAX} bins"));
    }
    Ok(b)
}

/// A constant argument of a function: a number, string, or duration (in the db precision).
fn const_arg(e: &Expr, precision: Precision, fname: &str, pos: Pos) -> Result<Value, SqlError> {
    match e {
        Expr::Duration(ns) => Ok(Value::Int(precision.from_nanos(*ns))),
        Expr::Literal(v) => Ok(v.clone()),
        Expr::Neg(x) => match const_arg(x, precision, fname, pos)? {
            Value::Int(i) => Ok(Value::Int(-i)),
            Value::Float(f) => Ok(Value::Float(-f)),
            _ => Err(SqlError::InvalidArgument(format!(
                "{fname}: '{e}' is not a number at {pos}"
            ))),
        },
        _ => Err(SqlError::InvalidArgument(format!(
            "{fname}: argument '{e}' must be a constant at {pos}"
        ))),
    }
}

fn contains_row_func(e: &Expr) -> bool {
    let mut found = false;
    e.walk(&mut |x| {
        if matches!(x, Expr::Function { name, .. } if ROW_FUNCS.contains(&name.as_str())) {
            found = true
        }
    });
    found
}

/// Row-function context: each row function's argument becomes a pre-projected column that
/// the RowFunc node replaces by the function's values; TOP/BOTTOM/SAMPLE pick rows by theirs;
/// other column expressions are pre-projected as they are.
struct RowCtx<'a> {
    scope: &'a mut Scope,
    pre: Vec<PExpr>,
    funcs: Vec<(usize, RowFn)>,
    select: Option<(usize, usize, SelectMode)>,
    /// HISTOGRAM: (column, bin boundaries, normalized)
    histogram: Option<(usize, Vec<f64>, bool)>,
}

impl RowCtx<'_> {
    fn pre_index(&mut self, p: PExpr) -> usize {
        let taken = |i: usize, me: &Self| {
            me.funcs.iter().any(|(c, _)| *c == i) || me.select.is_some_and(|s| s.0 == i)
        };
        match self.pre.iter().position(|x| *x == p) {
            Some(i) if !taken(i, self) => i,
            _ => {
                self.pre.push(p);
                self.pre.len() - 1
            }
        }
    }

    fn row_func(&mut self, name: &str, args: &[Expr], pos: Pos) -> Result<PExpr, SqlError> {
        let precision = self.scope.precision;
        let arity = match name {
            "diff" | "csum" | "unique" | "lag" => (1, 1),
            "tail" => (2, 3),
            "derivative" => (3, 3),
            "mavg" | "top" | "bottom" | "sample" => (2, 2),
            "histogram" => (4, 4),
            "statecount" => (3, 3),
            _ => (3, 4),
        };
        if args.len() < arity.0 || args.len() > arity.1 || args.iter().any(contains_row_func) {
            return Err(SqlError::Plan(format!(
                "{name}() takes {} argument(s), none of them another row function, at {pos}",
                if arity.0 == arity.1 {
                    arity.0.to_string()
                } else {
                    format!("{} to {}", arity.0, arity.1)
                }
            )));
        }
        let a = compile(&args[0], &mut ScalarCtx { scope: self.scope })?;
        let at = a.data_type();
        // UNIQUE and TAIL pick rows without computing on values: any type will do
        let any_type = matches!(name, "unique" | "tail");
        // LAG carries values forward: numbers and strings, as TDengine documents
        let lag_type = name == "lag" && (at.is_numeric() || at.physical() == PhysicalType::Str);
        if !(any_type || lag_type || at.is_numeric() || at == DataType::Bool) {
            return Err(SqlError::TypeMismatch(format!(
                "{name}() needs a numeric{} argument, '{}' is {at} at {pos}",
                if name == "lag" { " or string" } else { "" },
                args[0]
            )));
        }
        let mut params = Vec::new();
        for x in &args[1..] {
            params.push(const_arg(x, precision, name, pos)?);
        }
        let int = |k: usize| params.get(k).and_then(Value::as_i64);
        let num = |k: usize| params.get(k).and_then(Value::as_f64);
        let positive = |k: usize, what: &str| -> Result<i64, SqlError> {
            match int(k) {
                Some(v) if v > 0 => Ok(v),
                _ => Err(SqlError::InvalidArgument(format!(
                    "{name}(): {what} must be a positive integer at {pos}"
                ))),
            }
        };
        let cmp_op = |k: usize| -> Result<BinOp, SqlError> {
            let op = match params.get(k) {
                Some(Value::Str(s)) => s.to_ascii_uppercase(),
                _ => String::new(),
            };
            Ok(match op.as_str() {
                "LT" => BinOp::Lt,
                "GT" => BinOp::Gt,
                "LE" => BinOp::LtEq,
                "GE" => BinOp::GtEq,
                "NE" => BinOp::NotEq,
                "EQ" => BinOp::Eq,
                _ => {
                    return Err(SqlError::InvalidArgument(format!(
                        "{name}(): the operator must be one of 'LT', 'GT', 'LE', 'GE', 'NE', 'EQ' at {pos}"
                    )))
                }
            })
        };
        let float_in = at.physical() == PhysicalType::Float;
        let (f, t) = match name {
            "diff" => (
                RowFn::Diff,
                if float_in {
                    DataType::Double
                } else {
                    DataType::BigInt
                },
            ),
            "lag" => (RowFn::Lag, at),
            "csum" => (
                RowFn::Csum,
                if float_in {
                    DataType::Double
                } else {
                    DataType::BigInt
                },
            ),
            "derivative" => (
                RowFn::Derivative {
                    unit: positive(0, "the time interval")?,
                    ignore_negative: int(1).unwrap_or(0) != 0,
                },
                DataType::Double,
            ),
            "mavg" => {
                let k = positive(0, "the window size")?;
                if k > MAVG_WINDOW_MAX {
                    return Err(SqlError::InvalidArgument(format!(
                        "mavg(): the window size must be at most {MAVG_WINDOW_MAX} at {pos}"
                    )));
                }
                (RowFn::Mavg(k as usize), DataType::Double)
            }
            "statecount" => (
                RowFn::StateCount(cmp_op(0)?, num(1).unwrap_or(0.0)),
                DataType::BigInt,
            ),
            "stateduration" => {
                let unit = match params.get(2) {
                    None => 1,
                    Some(_) => positive(2, "the time unit")?,
                };
                (
                    RowFn::StateDuration(cmp_op(0)?, num(1).unwrap_or(0.0), unit),
                    DataType::BigInt,
                )
            }
            "histogram" => {
                if self.histogram.is_some() || self.select.is_some() || !self.funcs.is_empty() {
                    return Err(SqlError::Plan(format!(
                        "histogram() cannot be combined with other row functions at {pos}"
                    )));
                }
                let (Some(Value::Str(kind)), Some(Value::Str(desc))) =
                    (params.first(), params.get(1))
                else {
                    return Err(SqlError::InvalidArgument(format!(
                        "histogram(): bin type and description must be strings at {pos}"
                    )));
                };
                let bins = histogram_bins(kind, desc)
                    .map_err(|m| SqlError::InvalidArgument(format!("histogram(): {m} at {pos}")))?;
                let normalized = match int(2) {
                    Some(0) => false,
                    Some(1) => true,
                    _ => {
                        return Err(SqlError::InvalidArgument(format!(
                            "histogram(): normalized must be 0 or 1 at {pos}"
                        )))
                    }
                };
                self.pre.push(a);
                let i = self.pre.len() - 1;
                self.histogram = Some((i, bins, normalized));
                return Ok(PExpr::Input(i, DataType::VarChar(128)));
            }
            _ => {
                // top / bottom / sample / unique / tail: a row selector over the argument
                let k = if name == "unique" {
                    usize::MAX
                } else {
                    let k = positive(0, "k")?;
                    if k > SELECT_K_MAX {
                        return Err(SqlError::InvalidArgument(format!(
                            "{name}(): k must be between 1 and {SELECT_K_MAX} at {pos}"
                        )));
                    }
                    k as usize
                };
                if self.select.is_some() {
                    return Err(SqlError::Plan(format!(
                        "only one of top/bottom/sample/unique/tail per query, at {pos}"
                    )));
                }
                let mode = match name {
                    "top" => SelectMode::Top,
                    "bottom" => SelectMode::Bottom,
                    "unique" => SelectMode::Unique,
                    "tail" => {
                        let offset = match params.get(1) {
                            None => 0,
                            Some(_) => match int(1) {
                                Some(o) if (0..=TAIL_OFFSET_MAX).contains(&o) => o as usize,
                                _ => {
                                    return Err(SqlError::InvalidArgument(format!(
                                        "tail(): the offset must be an integer between 0 and {TAIL_OFFSET_MAX} at {pos}"
                                    )))
                                }
                            },
                        };
                        SelectMode::Tail { offset }
                    }
                    _ => SelectMode::Sample,
                };
                self.pre.push(a);
                let i = self.pre.len() - 1;
                self.select = Some((i, k, mode));
                return Ok(PExpr::Input(i, at));
            }
        };
        self.pre.push(a);
        let i = self.pre.len() - 1;
        self.funcs.push((i, f));
        Ok(PExpr::Input(i, t))
    }
}

impl Ctx for RowCtx<'_> {
    fn leaf(&mut self, e: &Expr) -> Result<Option<PExpr>, SqlError> {
        if let Expr::Function {
            name, args, pos, ..
        } = e
        {
            if AGG_FUNCS.contains(&name.as_str()) {
                return Err(SqlError::Plan(format!(
                    "aggregate function '{name}' cannot be mixed with row functions at {pos}"
                )));
            }
            if ROW_FUNCS.contains(&name.as_str()) {
                return self.row_func(name, args, *pos).map(Some);
            }
        }
        if contains_row_func(e) || !has_columns(e) {
            return Ok(None);
        }
        let p = compile(e, &mut ScalarCtx { scope: self.scope })?;
        let t = p.data_type();
        Ok(Some(PExpr::Input(self.pre_index(p), t)))
    }
    fn column(&mut self, name: &str, pos: Pos) -> Result<PExpr, SqlError> {
        Err(SqlError::Plan(format!(
            "column '{name}' is not allowed here at {pos}"
        )))
    }
    fn precision(&self) -> Precision {
        self.scope.precision
    }
    fn session_db(&self) -> Option<&str> {
        self.scope.session_db.as_deref()
    }
    fn session_user(&self) -> Option<&str> {
        self.scope.session_user.as_deref()
    }
}

/// INTERP context: `interp(x)` becomes a pre-projected column the Interp node fills at each
/// RANGE point, `_irowts` the point itself; other expressions must be PARTITION BY keys.
struct InterpCtx<'a> {
    scope: &'a mut Scope,
    /// Pre-projected columns: 0 = the timestamp, then partition keys, then interp arguments.
    pre: Vec<PExpr>,
    part: Vec<usize>,
    cols: Vec<usize>,
}

impl Ctx for InterpCtx<'_> {
    fn leaf(&mut self, e: &Expr) -> Result<Option<PExpr>, SqlError> {
        match e {
            Expr::Function {
                name, args, pos, ..
            } if name == "interp" => {
                if args.len() != 1 || contains_agg(&args[0]) || contains_row_func(&args[0]) {
                    return Err(SqlError::Plan(format!(
                        "interp() takes one column expression at {pos}"
                    )));
                }
                let a = compile(&args[0], &mut ScalarCtx { scope: self.scope })?;
                let t = a.data_type();
                self.pre.push(a);
                self.cols.push(self.pre.len() - 1);
                Ok(Some(PExpr::Input(self.pre.len() - 1, t)))
            }
            Expr::Function { name, pos, .. }
                if AGG_FUNCS.contains(&name.as_str()) || ROW_FUNCS.contains(&name.as_str()) =>
            {
                Err(SqlError::Plan(format!(
                    "'{name}' cannot be used with RANGE/EVERY at {pos}"
                )))
            }
            Expr::Column { name, .. } if name == "_irowts" => {
                Ok(Some(PExpr::Input(0, DataType::Timestamp)))
            }
            e if has_columns(e) => {
                let p = compile(e, &mut ScalarCtx { scope: self.scope })?;
                match self.part.iter().find(|i| self.pre[**i] == p) {
                    Some(i) => Ok(Some(PExpr::Input(*i, p.data_type()))),
                    None if !matches!(e, Expr::Column { .. }) => Ok(None),
                    None => Err(SqlError::Plan(format!(
                        "'{e}' must be a PARTITION BY key to be selected with INTERP{}",
                        e.position().map(|p| format!(" at {p}")).unwrap_or_default()
                    ))),
                }
            }
            _ => Ok(None),
        }
    }
    fn column(&mut self, name: &str, pos: Pos) -> Result<PExpr, SqlError> {
        Err(SqlError::Plan(format!(
            "column '{name}' is not allowed here at {pos}"
        )))
    }
    fn precision(&self) -> Precision {
        self.scope.precision
    }
    fn session_db(&self) -> Option<&str> {
        self.scope.session_db.as_deref()
    }
    fn session_user(&self) -> Option<&str> {
        self.scope.session_user.as_deref()
    }
}

fn conjuncts(e: &Expr, out: &mut Vec<Expr>) {
    match e {
        Expr::Binary {
            op: BinOp::And,
            left,
            right,
        } => {
            conjuncts(left, out);
            conjuncts(right, out);
        }
        e => out.push(e.clone()),
    }
}

fn and_all(mut v: Vec<PExpr>) -> Option<PExpr> {
    let first = v.pop()?;
    Some(v.into_iter().rev().fold(first, |acc, x| {
        PExpr::Bin(BinOp::And, Box::new(x), Box::new(acc), DataType::Bool)
    }))
}

struct Planner<'a> {
    cat: &'a dyn Catalog,
    default_db: Option<&'a str>,
    fragments: Vec<FragmentSpec>,
    depth: usize,
    /// Subtable -> the STABLE it was planned as a member of (see [`Fragment::stable`]).
    subtable_stables: HashMap<String, String>,
}

struct OutItem {
    expr: Expr,
    name: String,
}

impl Planner<'_> {
    fn level(&mut self, q: &Query) -> Result<(Node, Vec<Field>), SqlError> {
        self.depth += 1;
        if self.depth > 32 {
            return Err(SqlError::Plan("subqueries nested too deeply".into()));
        }
        let grouped;
        let q = match distinct_as_group_by(q) {
            Some(g) => {
                grouped = g;
                &grouped
            }
            None => q,
        };
        // ---- scope
        let mut stable_src: Option<(String, FragmentTarget, ScanTarget)> = None;
        let mut inner: Option<Node> = None;
        let mut scope = match &q.from {
            FromItem::Table { name, pos, .. } => {
                let db = name
                    .db
                    .as_deref()
                    .or(self.default_db)
                    .ok_or(SqlError::NoDatabaseSelected)?
                    .to_string();
                if let Some(batch) = self.cat.system_table(&db, &name.name) {
                    let fields = batch.fields.clone();
                    inner = Some(Node::Values { batch });
                    Scope {
                        kind: ScopeKind::Derived { fields },
                        precision: Precision::Millis,
                        from_name: name.name.clone(),
                        window: None,
                        session_db: self.default_db.map(str::to_string),
                        session_user: self.cat.session_user(),
                        query_range: None,
                    }
                } else {
                    let precision = self.cat.precision(&db).ok_or_else(|| {
                        SqlError::DatabaseNotFound(format!("database '{db}' not found at {pos}"))
                    })?;
                    let (schema, subtable) = if let Some(s) = self.cat.stable(&db, &name.name) {
                        stable_src = Some((
                            db.clone(),
                            FragmentTarget::AllVgroups,
                            ScanTarget::Stable(s.name.clone()),
                        ));
                        (s, false)
                    } else if let Some((meta, s)) = self.cat.subtable(&db, &name.name) {
                        self.subtable_stables
                            .insert(meta.name.clone(), meta.stable.clone());
                        stable_src = Some((
                            db.clone(),
                            FragmentTarget::Table(meta.name.clone()),
                            ScanTarget::Table(meta.name.clone()),
                        ));
                        (s, true)
                    } else {
                        return Err(SqlError::TableNotFound(format!(
                            "table '{}' not found in database '{db}' at {pos}",
                            name.name
                        )));
                    };
                    Scope {
                        kind: ScopeKind::Stable {
                            schema: Arc::new(schema),
                            subtable,
                            layout: Vec::new(),
                        },
                        precision,
                        from_name: name.name.clone(),
                        window: None,
                        session_db: self.default_db.map(str::to_string),
                        session_user: self.cat.session_user(),
                        query_range: None,
                    }
                }
            }
            FromItem::None { pos } => {
                for item in &q.projection {
                    match item {
                        SelectItem::Wildcard(p) => {
                            return Err(SqlError::Plan(format!(
                                "SELECT * needs a FROM clause at {p} (none at {pos})"
                            )))
                        }
                        SelectItem::Expr {
                            expr:
                                Expr::Function {
                                    name,
                                    star: true,
                                    pos: p,
                                    ..
                                },
                            ..
                        } if name != "count" => {
                            return Err(SqlError::Plan(format!(
                                "{name}(*) needs a FROM clause at {p} (none at {pos})"
                            )))
                        }
                        _ => {}
                    }
                }
                inner = Some(Node::Values {
                    batch: tidal_common::Batch::new(
                        vec![Field::new(DUAL_FIELD, DataType::BigInt)],
                        vec![tidal_common::Column::new(tidal_common::ColumnData::Int(
                            vec![0],
                        ))],
                    ),
                });
                Scope {
                    kind: ScopeKind::Derived {
                        fields: vec![Field::new(DUAL_FIELD, DataType::BigInt)],
                    },
                    // NOW() in the session database's precision, as it would compare there
                    precision: self
                        .default_db
                        .and_then(|db| self.cat.precision(db))
                        .unwrap_or(Precision::Millis),
                    from_name: "a SELECT without FROM".to_string(),
                    window: None,
                    session_db: self.default_db.map(str::to_string),
                    session_user: self.cat.session_user(),
                    query_range: None,
                }
            }
            FromItem::Union { members, all, pos } => {
                let (node, fields) = self.union(members, all, *pos)?;
                inner = Some(node);
                let precision = self.inner_precision(q);
                Scope {
                    kind: ScopeKind::Derived { fields },
                    precision,
                    from_name: "a UNION".to_string(),
                    window: None,
                    session_db: self.default_db.map(str::to_string),
                    session_user: self.cat.session_user(),
                    query_range: None,
                }
            }
            FromItem::Subquery { query, alias, .. } => {
                let (node, fields) = self.level(query)?;
                inner = Some(node);
                let precision = self.inner_precision(query);
                Scope {
                    kind: ScopeKind::Derived { fields },
                    precision,
                    from_name: alias.clone().unwrap_or_else(|| "subquery".to_string()),
                    window: None,
                    session_db: self.default_db.map(str::to_string),
                    session_user: self.cat.session_user(),
                    query_range: None,
                }
            }
        };
        if let Some(tags_pos) = q.tags {
            return self.tags_level(q, scope, stable_src, tags_pos);
        }
        // windows run on the coordinator when they need rows in time order per partition
        let mut coord_window: Option<(WindowKind, PExpr)> = None;
        // sliding INTERVAL as panes: (sliding, panes per window, the row-window fallback, ts)
        let mut panes: Option<(i64, i64, WindowKind, PExpr)> = None;
        // INTERP's RANGE: (start, end, every, fill, ts)
        let mut interp: Option<(i64, i64, i64, Option<FillMode>, PExpr)> = None;
        let mut fill: Option<(FillMode, i64, i64)> = None;
        if let Some(w) = &q.window {
            let ts = scope.ts_expr().ok_or_else(|| {
                SqlError::Plan(format!(
                    "windows need a timestamp column in their input at {}",
                    window_pos(w)
                ))
            })?;
            match w {
                WindowClause::Interval {
                    interval_ns,
                    offset_ns,
                    sliding_ns,
                    fill: f,
                    pos,
                } => {
                    let iv = scope.precision.from_nanos(*interval_ns);
                    let off = scope.precision.from_nanos(offset_ns.unwrap_or(0));
                    let sl = sliding_ns
                        .map(|s| scope.precision.from_nanos(s))
                        .unwrap_or(iv);
                    if iv <= 0 {
                        return Err(SqlError::Plan(format!(
                            "INTERVAL must be at least one time unit of the database precision at {pos}"
                        )));
                    }
                    if off < 0 || off >= iv {
                        return Err(SqlError::Plan(format!(
                            "the INTERVAL offset must be smaller than the interval at {pos}"
                        )));
                    }
                    if sl <= 0 || sl > iv {
                        return Err(SqlError::Plan(format!(
                            "SLIDING must be positive and at most the INTERVAL at {pos}"
                        )));
                    }
                    // every row lands in interval / sliding windows
                    if iv / sl > WINDOWS_PER_ROW_MAX {
                        return Err(SqlError::Plan(format!(
                            "INTERVAL / SLIDING may be at most {WINDOWS_PER_ROW_MAX} at {pos}"
                        )));
                    }
                    if sl == iv {
                        scope.window = Some(WinScope::Interval(
                            PExpr::WinStart(Box::new(ts), iv, off),
                            iv,
                        ));
                    } else if iv % sl == 0 {
                        // panes of one SLIDING step are partial aggregates on the vnodes; the
                        // coordinator merges interval / sliding consecutive panes per window
                        // (or, for aggregates that cannot merge, assigns rows to windows)
                        scope.window = Some(WinScope::Interval(
                            PExpr::WinStart(Box::new(ts.clone()), sl, off % sl),
                            iv,
                        ));
                        panes = Some((
                            sl,
                            iv / sl,
                            WindowKind::Sliding {
                                interval: iv,
                                sliding: sl,
                                offset: off % sl,
                            },
                            ts,
                        ));
                    } else {
                        scope.window = Some(WinScope::Keyed(Some(iv)));
                        coord_window = Some((
                            WindowKind::Sliding {
                                interval: iv,
                                sliding: sl,
                                offset: off % sl,
                            },
                            ts,
                        ));
                    }
                    let grid = (sl, off % sl);
                    fill = match f {
                        None | Some(Fill::None) => None,
                        Some(Fill::Null) => Some((FillMode::Null, grid.0, grid.1)),
                        Some(Fill::Prev) => Some((FillMode::Prev, grid.0, grid.1)),
                        Some(Fill::Next) => Some((FillMode::Next, grid.0, grid.1)),
                        Some(Fill::Linear) => Some((FillMode::Linear, grid.0, grid.1)),
                        Some(Fill::Value(v)) => Some((FillMode::Value(v.clone()), grid.0, grid.1)),
                    };
                }
                WindowClause::StateWindow { expr, pos } => {
                    if contains_agg(expr) {
                        return Err(SqlError::Plan(format!(
                            "STATE_WINDOW takes a column expression, not an aggregate, at {pos}"
                        )));
                    }
                    let e = compile(expr, &mut ScalarCtx { scope: &mut scope })?;
                    let t = e.data_type();
                    if !matches!(
                        t.physical(),
                        PhysicalType::Int
                            | PhysicalType::UInt
                            | PhysicalType::Bool
                            | PhysicalType::Str
                    ) {
                        return Err(SqlError::TypeMismatch(format!(
                            "STATE_WINDOW needs an integer, bool or string expression, '{expr}' is {t} at {pos}"
                        )));
                    }
                    scope.window = Some(WinScope::Keyed(None));
                    coord_window = Some((WindowKind::State(e), ts));
                }
                WindowClause::Session {
                    column,
                    gap_ns,
                    pos,
                } => {
                    let c = compile(column, &mut ScalarCtx { scope: &mut scope })?;
                    if c != ts {
                        return Err(SqlError::Plan(format!(
                            "SESSION needs the timestamp column as its first argument, not '{column}', at {pos}"
                        )));
                    }
                    let gap = scope.precision.from_nanos(*gap_ns);
                    if gap <= 0 {
                        return Err(SqlError::Plan(format!(
                            "the SESSION gap must be at least one time unit at {pos}"
                        )));
                    }
                    scope.window = Some(WinScope::Keyed(None));
                    coord_window = Some((WindowKind::Session(gap), ts));
                }
                WindowClause::Event { start, end, pos } => {
                    if contains_agg(start) || contains_agg(end) {
                        return Err(SqlError::Plan(format!(
                            "EVENT_WINDOW conditions cannot use aggregates at {pos}"
                        )));
                    }
                    let a = compile(start, &mut ScalarCtx { scope: &mut scope })?;
                    let b = compile(end, &mut ScalarCtx { scope: &mut scope })?;
                    scope.window = Some(WinScope::Keyed(None));
                    coord_window = Some((WindowKind::Event(a, b), ts));
                }
                WindowClause::Count { n, step, pos } => {
                    let step = step.unwrap_or(*n);
                    if *n == 0 || step == 0 || step > *n {
                        return Err(SqlError::Plan(format!(
                            "COUNT_WINDOW needs 0 < step <= count at {pos}"
                        )));
                    }
                    if n.div_ceil(step) > WINDOWS_PER_ROW_MAX as u64 {
                        return Err(SqlError::Plan(format!(
                            "COUNT_WINDOW count / step may be at most {WINDOWS_PER_ROW_MAX} at {pos}"
                        )));
                    }
                    scope.window = Some(WinScope::Keyed(None));
                    coord_window = Some((WindowKind::Count(*n, step), ts));
                }
                WindowClause::Interp {
                    start,
                    end,
                    every_ns,
                    fill,
                    pos,
                } => {
                    let mut point = |e: &Expr| -> Result<i64, SqlError> {
                        let p = compile(e, &mut ScalarCtx { scope: &mut scope })?;
                        let p = ts_literal(&ts, p, scope.precision)?;
                        match const_value(&p) {
                            Some(Value::Timestamp(t)) | Some(Value::Int(t)) => Ok(t),
                            _ => Err(SqlError::Plan(format!(
                                "RANGE needs constant timestamps, found '{e}' at {pos}"
                            ))),
                        }
                    };
                    let a = point(start)?;
                    let b = match end {
                        Some(e) => point(e)?,
                        None => a,
                    };
                    let every = match every_ns {
                        Some(ns) => scope.precision.from_nanos(*ns),
                        None if a == b => 1,
                        None => {
                            return Err(SqlError::Plan(format!(
                                "RANGE with two bounds needs EVERY(..) at {pos}"
                            )))
                        }
                    };
                    if b < a || every <= 0 || b.saturating_sub(a) / every > INTERP_POINTS_MAX {
                        return Err(SqlError::Plan(format!(
                            "RANGE needs start <= end and EVERY of at least one time unit, at most {INTERP_POINTS_MAX} points, at {pos}"
                        )));
                    }
                    let mode = match fill {
                        None | Some(Fill::None) => None,
                        Some(Fill::Null) => Some(FillMode::Null),
                        Some(Fill::Prev) => Some(FillMode::Prev),
                        Some(Fill::Next) => Some(FillMode::Next),
                        Some(Fill::Linear) => Some(FillMode::Linear),
                        Some(Fill::Value(v)) => Some(FillMode::Value(v.clone())),
                    };
                    interp = Some((a, b, every, mode, ts));
                }
            }
        }

        if q.slimit.is_some() && q.partition_by.is_empty() {
            return Err(SqlError::Plan(
                "SLIMIT/SOFFSET limit the partitions of PARTITION BY, which this query lacks"
                    .into(),
            ));
        }

        // ---- projection list with * expanded
        let mut items: Vec<OutItem> = Vec::new();
        for it in &q.projection {
            match it {
                SelectItem::Wildcard(pos) => {
                    for c in scope.star() {
                        items.push(OutItem {
                            expr: Expr::Column {
                                name: c.clone(),
                                pos: *pos,
                            },
                            name: c,
                        });
                    }
                }
                SelectItem::Expr {
                    expr:
                        Expr::Function {
                            name,
                            star: true,
                            pos,
                            ..
                        },
                    alias: None,
                } if matches!(name.as_str(), "last_row" | "first" | "last" | "min" | "max") => {
                    for c in scope.star_columns() {
                        let e = Expr::Function {
                            name: name.clone(),
                            args: vec![Expr::Column {
                                name: c.clone(),
                                pos: *pos,
                            }],
                            star: false,
                            distinct: false,
                            pos: *pos,
                        };
                        items.push(OutItem {
                            name: e.to_string(),
                            expr: e,
                        });
                    }
                }
                SelectItem::Expr { expr, alias } => items.push(OutItem {
                    name: alias.clone().unwrap_or_else(|| expr.to_string()),
                    expr: expr.clone(),
                }),
            }
        }

        // ---- WHERE: time range, tag filter, row filter
        let mut ts_min = i64::MIN;
        let mut ts_max = i64::MAX;
        let mut tag_filter = None;
        let mut tag_layout = Vec::new();
        let mut row_preds = Vec::new();
        if let Some(w) = &q.selection {
            if contains_agg(w) {
                return Err(SqlError::Plan(format!(
                    "aggregate functions are not allowed in WHERE{}",
                    w.position().map(|p| format!(" at {p}")).unwrap_or_default()
                )));
            }
            let mut cs = Vec::new();
            conjuncts(w, &mut cs);
            let mut tag_preds = Vec::new();
            for c in cs {
                if let ScopeKind::Stable { schema, .. } = &scope.kind {
                    let schema = schema.clone();
                    let mut only_tags = true;
                    c.walk(&mut |x| {
                        if let Expr::Column { name, .. } = x {
                            if !scope.is_tag_or_tbname(name) {
                                only_tags = false;
                            }
                        }
                    });
                    if only_tags && has_columns(&c) {
                        let mut ts = Scope {
                            kind: ScopeKind::Stable {
                                schema: schema.clone(),
                                subtable: false,
                                layout: std::mem::take(&mut tag_layout),
                            },
                            precision: scope.precision,
                            from_name: scope.from_name.clone(),
                            window: None,
                            session_db: scope.session_db.clone(),
                            session_user: scope.session_user.clone(),
                            query_range: None,
                        };
                        let p = compile(&c, &mut ScalarCtx { scope: &mut ts })?;
                        tag_layout = ts.layout();
                        tag_preds.push(p);
                        continue;
                    }
                    if self.ts_bound(&c, &schema, &mut scope, &mut ts_min, &mut ts_max)? {
                        continue;
                    }
                }
                row_preds.push(compile(&c, &mut ScalarCtx { scope: &mut scope })?);
            }
            tag_filter = and_all(tag_preds);
        }
        let filter = and_all(row_preds);
        if matches!(scope.kind, ScopeKind::Stable { .. }) {
            // TDengine's _qstart/_qend: the closed range of the primary timestamp the WHERE
            // clause allows, [i64::MIN, i64::MAX] where it sets no bound
            scope.query_range = Some((ts_min, ts_max));
        }

        // ---- aggregation or projection
        // row functions and multi-row selectors per tumbling INTERVAL window (`top(v, 2) ..
        // interval(1h)`): the window start is one more partition key
        let rows_per_window = items.iter().any(|i| contains_row_func(&i.expr))
            && !items.iter().any(|i| contains_agg(&i.expr))
            && q.group_by.is_empty()
            && q.having.is_none()
            && fill.is_none()
            && panes.is_none()
            && coord_window.is_none()
            && matches!(scope.window, Some(WinScope::Interval(..)));
        let agg_mode = !rows_per_window
            && (!q.group_by.is_empty()
                || scope.window.is_some()
                || items.iter().any(|i| contains_agg(&i.expr))
                || q.having.as_ref().is_some_and(contains_agg));
        if q.having.is_some() && !agg_mode {
            return Err(SqlError::Plan(
                "HAVING needs GROUP BY or an aggregate function".into(),
            ));
        }
        let names: Vec<String> = items.iter().map(|i| i.name.clone()).collect();
        let nvis = items.len();
        if q.distinct {
            // a hidden sort column would take part in the duplicate check
            for o in &q.order_by {
                if order_index(&o.expr, &names)?.is_none() {
                    return Err(SqlError::Plan(format!(
                        "with DISTINCT, ORDER BY '{}' must be one of the selected columns{}",
                        o.expr,
                        o.expr
                            .position()
                            .map(|p| format!(" at {p}"))
                            .unwrap_or_default()
                    )));
                }
            }
        }

        if let Some((start, end, every, fill, ts)) = interp {
            if agg_mode {
                return Err(SqlError::Plan(
                    "INTERP (RANGE/EVERY) cannot be combined with aggregates or GROUP BY".into(),
                ));
            }
            let mut ictx = InterpCtx {
                scope: &mut scope,
                pre: vec![ts],
                part: Vec::new(),
                cols: Vec::new(),
            };
            for k in &q.partition_by {
                let p = compile(k, &mut ScalarCtx { scope: ictx.scope })?;
                ictx.pre.push(p);
                ictx.part.push(ictx.pre.len() - 1);
            }
            let mut post = Vec::new();
            for it in &items {
                post.push(compile(&it.expr, &mut ictx)?);
            }
            let mut sort_keys = Vec::new();
            for o in &q.order_by {
                let idx = match order_index(&o.expr, &names)? {
                    Some(i) => i,
                    None => {
                        post.push(compile(&o.expr, &mut ictx)?);
                        post.len() - 1
                    }
                };
                sort_keys.push((idx, o.asc));
            }
            let InterpCtx {
                pre, part, cols, ..
            } = ictx;
            if cols.is_empty() {
                return Err(SqlError::Plan(
                    "RANGE/EVERY need INTERP(..) in the select list".into(),
                ));
            }
            let node = self.row_source(
                inner,
                stable_src,
                &scope,
                (ts_min, ts_max),
                (tag_layout, tag_filter, filter),
                pre,
            )?;
            let mut keys: Vec<(usize, bool)> = part.iter().map(|i| (*i, true)).collect();
            keys.push((0, true));
            let node = Node::Interp {
                input: Box::new(Node::Sort {
                    input: Box::new(node),
                    keys,
                }),
                partition: part,
                ts: 0,
                cols,
                start,
                end,
                every,
                fill,
            };
            let fields = out_fields(&names, &post);
            let node = Node::Project {
                input: Box::new(node),
                exprs: post,
                fields: fields.clone(),
            };
            return Ok(finish_level(
                node,
                fields,
                nvis,
                sort_keys,
                q.limit.as_ref(),
                q.distinct,
            ));
        }

        if !agg_mode && items.iter().any(|i| contains_row_func(&i.expr)) {
            let mut rctx = RowCtx {
                scope: &mut scope,
                pre: Vec::new(),
                funcs: Vec::new(),
                select: None,
                histogram: None,
            };
            let mut part = Vec::new();
            for k in &q.partition_by {
                let p = compile(k, &mut ScalarCtx { scope: rctx.scope })?;
                part.push(rctx.pre_index(p));
            }
            if let Some(WinScope::Interval(ws, _)) = rctx.scope.window.clone() {
                part.push(rctx.pre_index(ws));
            }
            let ts = rctx.scope.ts_expr().ok_or_else(|| {
                SqlError::Plan("row functions need a timestamp column in their input".into())
            })?;
            let ts_idx = rctx.pre_index(ts);
            let mut post = Vec::new();
            for it in &items {
                post.push(compile(&it.expr, &mut rctx)?);
            }
            let mut sort_keys = Vec::new();
            for o in &q.order_by {
                let idx = match order_index(&o.expr, &names)? {
                    Some(i) => i,
                    None => {
                        post.push(compile(&o.expr, &mut rctx)?);
                        post.len() - 1
                    }
                };
                sort_keys.push((idx, o.asc));
            }
            let RowCtx {
                pre,
                funcs,
                select,
                histogram,
                ..
            } = rctx;
            let pre_fields = out_fields(&[], &pre);
            let node = match inner {
                None => {
                    let (db, target, scan) =
                        stable_src.ok_or_else(|| SqlError::Plan("query has no source".into()))?;
                    let frag = Fragment {
                        target: scan,
                        ts_min,
                        ts_max,
                        layout: scope.layout(),
                        tag_layout,
                        tag_filter,
                        filter,
                        op: FragmentOp::Project { exprs: pre },
                        limit: None,
                        stable: None,
                    };
                    let gf = frag.output_fields();
                    let id = self.push_fragment(db, target, frag);
                    Node::Gather {
                        fragment: id,
                        fields: gf,
                    }
                }
                Some(input) => {
                    let input = match filter {
                        Some(pred) => Node::Filter {
                            input: Box::new(input),
                            pred,
                        },
                        None => input,
                    };
                    Node::Project {
                        input: Box::new(input),
                        exprs: pre,
                        fields: pre_fields,
                    }
                }
            };
            let mut keys: Vec<(usize, bool)> = part.iter().map(|i| (*i, true)).collect();
            keys.push((ts_idx, true));
            let mut node = Node::Sort {
                input: Box::new(node),
                keys,
            };
            if let Some((col, k, mode)) = select {
                node = Node::SelectRows {
                    input: Box::new(node),
                    partition: part.clone(),
                    ts: ts_idx,
                    col,
                    k,
                    mode,
                };
            }
            if let Some((col, bins, normalized)) = histogram {
                node = Node::Histogram {
                    input: Box::new(node),
                    partition: part.clone(),
                    col,
                    bins,
                    normalized,
                };
            }
            if !funcs.is_empty() {
                node = Node::RowFunc {
                    input: Box::new(node),
                    partition: part,
                    ts: ts_idx,
                    funcs,
                };
            }
            let fields = out_fields(&names, &post);
            let node = Node::Project {
                input: Box::new(node),
                exprs: post,
                fields: fields.clone(),
            };
            return Ok(finish_level(
                node,
                fields,
                nvis,
                sort_keys,
                q.limit.as_ref(),
                q.distinct,
            ));
        }
        if !agg_mode {
            let mut exprs = Vec::new();
            for it in &items {
                exprs.push(compile(&it.expr, &mut ScalarCtx { scope: &mut scope })?);
            }
            let mut sort_keys = Vec::new();
            for o in &q.order_by {
                let idx = match order_index(&o.expr, &names)? {
                    Some(i) => i,
                    None => {
                        exprs.push(compile(&o.expr, &mut ScalarCtx { scope: &mut scope })?);
                        exprs.len() - 1
                    }
                };
                sort_keys.push((idx, o.asc));
            }
            // PARTITION BY + LIMIT: the limit applies per partition, rows in time order
            let mut part_limit = None;
            if !q.partition_by.is_empty() && (q.limit.is_some() || q.slimit.is_some()) {
                let mut keys = Vec::new();
                for k in &q.partition_by {
                    exprs.push(compile(k, &mut ScalarCtx { scope: &mut scope })?);
                    keys.push(exprs.len() - 1);
                }
                let part = keys.clone();
                if let Some(ts) = scope.ts_expr() {
                    exprs.push(ts);
                    keys.push(exprs.len() - 1);
                }
                part_limit = Some((keys, part, q.limit.clone()));
            }
            let fields = out_fields(&names, &exprs);
            let node = match inner {
                None => {
                    let (db, target, scan) =
                        stable_src.ok_or_else(|| SqlError::Plan("query has no source".into()))?;
                    let frag = Fragment {
                        target: scan,
                        ts_min,
                        ts_max,
                        layout: scope.layout(),
                        tag_layout,
                        tag_filter,
                        filter,
                        op: FragmentOp::Project { exprs },
                        limit: match (
                            &q.limit,
                            q.order_by.is_empty() && part_limit.is_none() && !q.distinct,
                        ) {
                            (Some(l), true) => Some(l.limit.saturating_add(l.offset)),
                            _ => None,
                        },
                        stable: None,
                    };
                    let gf = frag.output_fields();
                    let id = self.push_fragment(db, target, frag);
                    Node::Gather {
                        fragment: id,
                        fields: gf,
                    }
                }
                Some(input) => {
                    let input = match filter {
                        Some(pred) => Node::Filter {
                            input: Box::new(input),
                            pred,
                        },
                        None => input,
                    };
                    Node::Project {
                        input: Box::new(input),
                        exprs,
                        fields: fields.clone(),
                    }
                }
            };
            let (node, limit) = match part_limit {
                Some((keys, part, l)) => {
                    let mut node = Node::Sort {
                        input: Box::new(node),
                        keys: keys.into_iter().map(|k| (k, true)).collect(),
                    };
                    if let Some(sl) = &q.slimit {
                        node = Node::SLimit {
                            input: Box::new(node),
                            partition: part.clone(),
                            limit: sl.limit,
                            offset: sl.offset,
                        };
                    }
                    if let Some(l) = l {
                        node = Node::Limit {
                            input: Box::new(node),
                            limit: Some(l.limit),
                            offset: l.offset,
                            partition: part,
                        };
                    }
                    (node, None)
                }
                None => (node, q.limit.as_ref()),
            };
            return Ok(finish_level(
                node, fields, nvis, sort_keys, limit, q.distinct,
            ));
        }

        // aggregation: keys = PARTITION BY ++ GROUP BY
        let mut keys = Vec::new();
        for k in q.partition_by.iter().chain(q.group_by.iter()) {
            if contains_agg(k) {
                return Err(SqlError::Plan(format!(
                    "aggregate functions are not allowed in GROUP BY / PARTITION BY: '{k}'"
                )));
            }
            let p = match k {
                Expr::Literal(Value::Int(i)) if *i >= 1 && (*i as usize) <= items.len() => compile(
                    &items[*i as usize - 1].expr,
                    &mut ScalarCtx { scope: &mut scope },
                )?,
                k => compile(k, &mut ScalarCtx { scope: &mut scope })?,
            };
            if !keys.contains(&p) {
                keys.push(p);
            }
        }
        let npart = keys.len();
        let win_key = match &scope.window {
            Some(w) => {
                keys.push(w.key().0);
                Some(keys.len() - 1)
            }
            None => None,
        };
        // the state of a STATE_WINDOW is constant per window: selectable next to aggregates
        if let Some((WindowKind::State(e), _)) = &coord_window {
            keys.push(e.clone());
        }
        let mut actx = AggCtx {
            scope: &mut scope,
            keys,
            aggs: Vec::new(),
            carry_info: Vec::new(),
        };
        let mut post = Vec::new();
        for it in &items {
            post.push(compile(&it.expr, &mut actx)?);
        }
        let having = match &q.having {
            Some(h) => Some(compile(h, &mut actx)?),
            None => None,
        };
        let mut sort_keys = Vec::new();
        for o in &q.order_by {
            let idx = match order_index(&o.expr, &names)? {
                Some(i) => i,
                None => {
                    post.push(compile(&o.expr, &mut actx)?);
                    post.len() - 1
                }
            };
            sort_keys.push((idx, o.asc));
        }
        let AggCtx {
            keys,
            mut aggs,
            carry_info,
            ..
        } = actx;
        // single-selector rule
        let selector = aggs
            .iter()
            .position(|a| a.func.is_selector() && a.func != AggFunc::Any);
        for (ci, text, pos) in carry_info {
            match selector {
                Some(s) => {
                    let arg = aggs[ci].arg.clone();
                    if let Some(arg) = arg {
                        aggs[s].carry.push(arg);
                        let k = aggs[s].carry.len() - 1;
                        aggs[ci].carry_of = Some((s, k));
                    }
                }
                None => {
                    // tags are constant per subtable: allowed when grouping by tbname
                    let layout = scope.layout();
                    let by_tbname = keys.iter().any(|k| {
                        matches!(k, PExpr::Input(i, _) if layout.get(*i) == Some(&InputCol::Tbname))
                    });
                    let mut ins = Vec::new();
                    if let Some(a) = &aggs[ci].arg {
                        a.inputs(&mut ins);
                    }
                    let tag_only = !layout.is_empty()
                        && ins.iter().all(|i| {
                            matches!(
                                layout.get(*i),
                                Some(InputCol::Tag(_)) | Some(InputCol::Tbname)
                            )
                        });
                    if by_tbname && tag_only {
                        aggs[ci].func = AggFunc::Any;
                        aggs[ci].ts = None;
                    } else {
                        return Err(SqlError::Plan(format!(
                            "'{text}' must appear in GROUP BY / PARTITION BY or be used in an aggregate function{}",
                            pos.map(|p| format!(" at {p}")).unwrap_or_default()
                        )));
                    }
                }
            }
        }
        let fields = out_fields(&names, &post);
        let agg_specs = aggs.clone();
        // Row-defined windows and aggregates that need all of a group's rows aggregate on the
        // coordinator over the gathered (filtered) rows.
        let mut raw = coord_window.is_some() || aggs.iter().any(|a| !a.func.is_mergeable());
        let mut keys = keys;
        if let Some((_, _, kind, ts)) = &panes {
            if raw || inner.is_some() {
                // no partials to merge: assign the rows to their windows instead
                raw = true;
                if let Some(wk) = win_key {
                    keys[wk] = PExpr::Input(WID, DataType::Timestamp);
                }
                coord_window = Some((kind.clone(), ts.clone()));
                panes = None;
            }
        }
        let agg_node = if raw {
            let (source, width) = match inner {
                None => {
                    let (db, target, scan) =
                        stable_src.ok_or_else(|| SqlError::Plan("query has no source".into()))?;
                    let types = scope.layout_types();
                    let frag = Fragment {
                        target: scan,
                        ts_min,
                        ts_max,
                        layout: scope.layout(),
                        tag_layout,
                        tag_filter,
                        filter,
                        op: FragmentOp::Project {
                            exprs: types
                                .iter()
                                .enumerate()
                                .map(|(i, t)| PExpr::Input(i, *t))
                                .collect(),
                        },
                        limit: None,
                        stable: None,
                    };
                    let gf = frag.output_fields();
                    let id = self.push_fragment(db, target, frag);
                    (
                        Node::Gather {
                            fragment: id,
                            fields: gf,
                        },
                        types.len(),
                    )
                }
                Some(input) => {
                    let width = scope.width();
                    let input = match filter {
                        Some(pred) => Node::Filter {
                            input: Box::new(input),
                            pred,
                        },
                        None => input,
                    };
                    (input, width)
                }
            };
            let mut keys = keys;
            let mut aggs = aggs;
            for k in keys.iter_mut() {
                remap_wid(k, width);
            }
            for a in aggs.iter_mut() {
                for e in a
                    .arg
                    .iter_mut()
                    .chain(a.ts.iter_mut())
                    .chain(a.carry.iter_mut())
                {
                    remap_wid(e, width);
                }
            }
            let source = match coord_window {
                Some((kind, ts)) => Node::Window {
                    input: Box::new(source),
                    partition: keys[..npart].to_vec(),
                    ts,
                    kind,
                },
                None => source,
            };
            Node::Aggregate {
                input: Box::new(source),
                keys,
                aggs,
                merge: false,
            }
        } else {
            match inner {
                None => {
                    let (db, target, scan) =
                        stable_src.ok_or_else(|| SqlError::Plan("query has no source".into()))?;
                    let frag = Fragment {
                        target: scan,
                        ts_min,
                        ts_max,
                        layout: scope.layout(),
                        tag_layout,
                        tag_filter,
                        filter,
                        op: FragmentOp::PartialAgg {
                            keys: keys.clone(),
                            aggs: aggs.clone(),
                        },
                        limit: None,
                        stable: None,
                    };
                    let gf = frag.output_fields();
                    let id = self.push_fragment(db, target, frag);
                    let mut input = Node::Gather {
                        fragment: id,
                        fields: gf,
                    };
                    if let (Some((step, count, ..)), Some(key)) = (&panes, win_key) {
                        input = Node::SlidePanes {
                            input: Box::new(input),
                            key,
                            step: *step,
                            count: *count,
                        };
                    }
                    Node::Aggregate {
                        input: Box::new(input),
                        keys,
                        aggs,
                        merge: true,
                    }
                }
                Some(input) => {
                    let input = match filter {
                        Some(pred) => Node::Filter {
                            input: Box::new(input),
                            pred,
                        },
                        None => input,
                    };
                    Node::Aggregate {
                        input: Box::new(input),
                        keys,
                        aggs,
                        merge: false,
                    }
                }
            }
        };
        let mut node = agg_node;
        if let Some(wk) = win_key {
            let mut keys: Vec<(usize, bool)> = (0..npart).map(|i| (i, true)).collect();
            keys.push((wk, true));
            node = Node::Sort {
                input: Box::new(node),
                keys,
            };
            if let Some((mode, step, offset)) = fill {
                let nk = wk + 1;
                let (mut cols, mut consts) = (Vec::new(), Vec::new());
                for (i, a) in agg_specs.iter().enumerate() {
                    if matches!(a.func, AggFunc::Any) {
                        consts.push(nk + i);
                    } else {
                        cols.push(nk + i);
                    }
                }
                node = Node::Fill {
                    input: Box::new(node),
                    npart,
                    step,
                    offset,
                    range: (ts_min != i64::MIN && ts_max != i64::MAX).then_some((ts_min, ts_max)),
                    mode,
                    cols,
                    consts,
                };
            }
        }
        let mut node = match having {
            Some(pred) => Node::Filter {
                input: Box::new(node),
                pred,
            },
            None => node,
        };
        // windows come out ordered by partition, then window start (sorted above); with
        // PARTITION BY, LIMIT applies per partition (TDengine 3)
        if win_key.is_none()
            && npart > 0
            && (q.limit.is_some() || q.slimit.is_some())
            && !q.partition_by.is_empty()
        {
            node = Node::Sort {
                input: Box::new(node),
                keys: (0..npart).map(|i| (i, true)).collect(),
            };
        }
        if let (Some(sl), false) = (&q.slimit, q.partition_by.is_empty()) {
            node = Node::SLimit {
                input: Box::new(node),
                partition: (0..npart).collect(),
                limit: sl.limit,
                offset: sl.offset,
            };
        }
        let mut limit = q.limit.as_ref();
        if let (Some(l), false) = (limit, q.partition_by.is_empty()) {
            node = Node::Limit {
                input: Box::new(node),
                limit: Some(l.limit),
                offset: l.offset,
                partition: (0..npart).collect(),
            };
            limit = None;
        }
        let node = Node::Project {
            input: Box::new(node),
            exprs: post,
            fields: fields.clone(),
        };
        Ok(finish_level(
            node, fields, nvis, sort_keys, limit, q.distinct,
        ))
    }

    /// The per-row input of a coordinator operator: a Project fragment over the table, or
    /// the filtered subquery result, evaluating `exprs`.
    fn row_source(
        &mut self,
        inner: Option<Node>,
        stable_src: Option<(String, FragmentTarget, ScanTarget)>,
        scope: &Scope,
        (ts_min, ts_max): (i64, i64),
        (tag_layout, tag_filter, filter): (Vec<InputCol>, Option<PExpr>, Option<PExpr>),
        exprs: Vec<PExpr>,
    ) -> Result<Node, SqlError> {
        Ok(match inner {
            None => {
                let (db, target, scan) =
                    stable_src.ok_or_else(|| SqlError::Plan("query has no source".into()))?;
                let frag = Fragment {
                    target: scan,
                    ts_min,
                    ts_max,
                    layout: scope.layout(),
                    tag_layout,
                    tag_filter,
                    filter,
                    op: FragmentOp::Project { exprs },
                    limit: None,
                    stable: None,
                };
                let gf = frag.output_fields();
                let id = self.push_fragment(db, target, frag);
                Node::Gather {
                    fragment: id,
                    fields: gf,
                }
            }
            Some(input) => {
                let fields = out_fields(&[], &exprs);
                let input = match filter {
                    Some(pred) => Node::Filter {
                        input: Box::new(input),
                        pred,
                    },
                    None => input,
                };
                Node::Project {
                    input: Box::new(input),
                    exprs,
                    fields,
                }
            }
        })
    }

    /// The members of a UNION, each planned as a subquery, their columns brought to common
    /// types (named as the first member names them); duplicates removed up to the last
    /// UNION without ALL, as SQL's left-to-right reading has it.
    fn union(
        &mut self,
        members: &[Query],
        all: &[bool],
        pos: Pos,
    ) -> Result<(Node, Vec<Field>), SqlError> {
        let mut planned = Vec::with_capacity(members.len());
        for m in members {
            planned.push(self.level(m)?);
        }
        let width = planned.first().map(|p| p.1.len()).unwrap_or(0);
        if let Some((k, p)) = planned.iter().enumerate().find(|(_, p)| p.1.len() != width) {
            return Err(SqlError::Plan(format!(
                "each SELECT of a UNION must have the same number of columns: the first has {width}, SELECT {} has {} (UNION at {pos})",
                k + 1,
                p.1.len()
            )));
        }
        let fields: Vec<Field> = (0..width)
            .map(|c| {
                let types: Vec<DataType> = planned.iter().map(|p| p.1[c].data_type).collect();
                let name = planned
                    .first()
                    .map(|p| p.1[c].name.clone())
                    .unwrap_or_default();
                Field::new(name, common_type(&types))
            })
            .collect();
        let inputs: Vec<Node> = planned
            .into_iter()
            .map(|(node, f)| {
                if f.iter()
                    .zip(&fields)
                    .all(|(a, b)| a.data_type == b.data_type)
                {
                    return node;
                }
                Node::Project {
                    input: Box::new(node),
                    exprs: f
                        .iter()
                        .zip(&fields)
                        .enumerate()
                        .map(|(i, (a, b))| {
                            let x = PExpr::Input(i, a.data_type);
                            if a.data_type == b.data_type {
                                x
                            } else {
                                PExpr::Cast(Box::new(x), b.data_type)
                            }
                        })
                        .collect(),
                    fields: fields.clone(),
                }
            })
            .collect();
        // `a UNION ALL b UNION c` is `(a UNION ALL b) UNION c`: the last UNION without ALL
        // removes the duplicates of everything before it
        let node = match all.iter().rposition(|a| !a) {
            None => Node::Union {
                inputs,
                fields: fields.clone(),
            },
            Some(j) => {
                let mut inputs = inputs;
                let rest = inputs.split_off((j + 2).min(inputs.len()));
                let deduped = Node::Distinct {
                    input: Box::new(Node::Union {
                        inputs,
                        fields: fields.clone(),
                    }),
                };
                if rest.is_empty() {
                    deduped
                } else {
                    let mut all_inputs = vec![deduped];
                    all_inputs.extend(rest);
                    Node::Union {
                        inputs: all_inputs,
                        fields: fields.clone(),
                    }
                }
            }
        };
        Ok((node, fields))
    }

    fn inner_precision(&self, q: &Query) -> Precision {
        let refs = referenced_tables(q);
        refs.first()
            .and_then(|r| r.db.as_deref().or(self.default_db))
            .and_then(|db| self.cat.precision(db))
            .unwrap_or(Precision::Millis)
    }

    /// `SELECT TAGS e1, e2 ... FROM x [WHERE tag predicates]`: one row per subtable of `x`
    /// that passes the filter, whether it holds data or not, computed by each vnode from its
    /// subtables' tags alone (no data is read).
    fn tags_level(
        &mut self,
        q: &Query,
        mut scope: Scope,
        src: Option<(String, FragmentTarget, ScanTarget)>,
        tags_pos: Pos,
    ) -> Result<(Node, Vec<Field>), SqlError> {
        let Some((db, target, scan)) = src else {
            return Err(SqlError::Plan(format!(
                "SELECT TAGS reads a STABLE or a subtable, not {} at {tags_pos}",
                scope.from_name
            )));
        };
        let clause = if q.window.is_some() {
            Some("a window")
        } else if !q.partition_by.is_empty() {
            Some("PARTITION BY")
        } else if !q.group_by.is_empty() {
            Some("GROUP BY")
        } else if q.having.is_some() {
            Some("HAVING")
        } else if q.slimit.is_some() {
            Some("SLIMIT")
        } else {
            None
        };
        if let Some(c) = clause {
            return Err(SqlError::Plan(format!(
                "SELECT TAGS cannot have {c} (it makes one row per subtable) at {tags_pos}"
            )));
        }
        // every column named must be a tag or tbname: the vnodes read no data
        let tags_only = |e: &Expr, scope: &Scope, what: &str| -> Result<(), SqlError> {
            let mut bad: Option<(String, Pos)> = None;
            e.walk(&mut |x| match x {
                Expr::Column { name, pos } if bad.is_none() && !scope.is_tag_or_tbname(name) => {
                    bad = Some((name.clone(), *pos))
                }
                Expr::Function { name, pos, .. }
                    if bad.is_none()
                        && (AGG_FUNCS.contains(&name.as_str())
                            || ROW_FUNCS.contains(&name.as_str())) =>
                {
                    bad = Some((format!("{name}()"), *pos))
                }
                _ => {}
            });
            match bad {
                Some((name, pos)) => Err(SqlError::Plan(format!(
                    "SELECT TAGS {what} tags and tbname only, not '{name}' at {pos}"
                ))),
                None => Ok(()),
            }
        };
        let mut names = Vec::new();
        let mut exprs = Vec::new();
        for item in &q.projection {
            let (expr, alias) = match item {
                SelectItem::Wildcard(pos) => {
                    return Err(SqlError::Plan(format!(
                        "SELECT TAGS lists tags and tbname by name, not * at {pos}"
                    )))
                }
                SelectItem::Expr { expr, alias } => (expr, alias),
            };
            tags_only(expr, &scope, "selects")?;
            names.push(alias.clone().unwrap_or_else(|| expr.to_string()));
            exprs.push(compile(expr, &mut ScalarCtx { scope: &mut scope })?);
        }
        let nvis = exprs.len();
        let mut tag_preds = Vec::new();
        if let Some(w) = &q.selection {
            let mut cs = Vec::new();
            conjuncts(w, &mut cs);
            for c in cs {
                tags_only(&c, &scope, "filters on")?;
                tag_preds.push(compile(&c, &mut ScalarCtx { scope: &mut scope })?);
            }
        }
        let mut sort_keys = Vec::new();
        for o in &q.order_by {
            let idx = match order_index(&o.expr, &names)? {
                Some(i) => i,
                None => {
                    tags_only(&o.expr, &scope, "orders by")?;
                    exprs.push(compile(&o.expr, &mut ScalarCtx { scope: &mut scope })?);
                    exprs.len() - 1
                }
            };
            sort_keys.push((idx, o.asc));
        }
        let layout = scope.layout();
        let fields = out_fields(&names, &exprs);
        let frag = Fragment {
            target: scan,
            ts_min: i64::MIN,
            ts_max: i64::MAX,
            layout: layout.clone(),
            tag_layout: layout,
            tag_filter: and_all(tag_preds),
            filter: None,
            op: FragmentOp::Tags { exprs },
            limit: None,
            stable: None,
        };
        let gathered_fields = frag.output_fields();
        let gathered = Node::Gather {
            fragment: self.push_fragment(db, target, frag),
            fields: gathered_fields,
        };
        let node = Node::Project {
            input: Box::new(gathered),
            exprs: fields
                .iter()
                .enumerate()
                .map(|(i, f)| PExpr::Input(i, f.data_type))
                .collect(),
            fields: fields.clone(),
        };
        Ok(finish_level(
            node,
            fields,
            nvis,
            sort_keys,
            q.limit.as_ref(),
            q.distinct,
        ))
    }

    fn push_fragment(&mut self, db: String, target: FragmentTarget, mut fragment: Fragment) -> u32 {
        if let ScanTarget::Table(t) = &fragment.target {
            fragment.stable = self.subtable_stables.get(t).cloned();
        }
        let id = self.fragments.len() as u32;
        self.fragments.push(FragmentSpec {
            id,
            db,
            target,
            fragment,
        });
        id
    }

    /// Narrows [ts_min, ts_max] with a conjunct `ts <op> const` (either side) or
    /// `ts BETWEEN a AND b`. Returns true when the range now expresses the conjunct exactly, so
    /// it need not be evaluated per row (which lets whole blocks be answered from their SMA).
    fn ts_bound(
        &self,
        c: &Expr,
        schema: &StableSchema,
        scope: &mut Scope,
        lo: &mut i64,
        hi: &mut i64,
    ) -> Result<bool, SqlError> {
        let is_ts = |e: &Expr| match e {
            Expr::Column { name, .. } => {
                schema
                    .columns
                    .first()
                    .is_some_and(|c| c.name.eq_ignore_ascii_case(name))
                    || name.eq_ignore_ascii_case("_rowts")
            }
            _ => false,
        };
        let konst = |e: &Expr, scope: &mut Scope| -> Option<i64> {
            if has_columns(e) {
                return None;
            }
            let p = compile(e, &mut ScalarCtx { scope }).ok()?;
            let ts = PExpr::Input(0, DataType::Timestamp);
            let p = ts_literal(&ts, p, scope.precision).ok()?;
            match const_value(&p)? {
                Value::Int(i) | Value::Timestamp(i) => Some(i),
                Value::Float(f) if f.is_finite() => Some(f as i64),
                _ => None,
            }
        };
        match c {
            Expr::Binary { op, left, right } if op.is_comparison() => {
                let (op, v) = if is_ts(left) {
                    (*op, konst(right, scope))
                } else if is_ts(right) {
                    (op.flip(), konst(left, scope))
                } else {
                    return Ok(false);
                };
                let Some(v) = v else { return Ok(false) };
                match op {
                    BinOp::Gt => *lo = (*lo).max(v.saturating_add(1)),
                    BinOp::GtEq => *lo = (*lo).max(v),
                    BinOp::Lt => *hi = (*hi).min(v.saturating_sub(1)),
                    BinOp::LtEq => *hi = (*hi).min(v),
                    BinOp::Eq => {
                        *lo = (*lo).max(v);
                        *hi = (*hi).min(v);
                    }
                    _ => return Ok(false),
                }
                return Ok(true);
            }
            Expr::Between {
                expr,
                low,
                high,
                negated: false,
            } if is_ts(expr) => {
                let (a, b) = (konst(low, scope), konst(high, scope));
                if let Some(v) = a {
                    *lo = (*lo).max(v);
                }
                if let Some(v) = b {
                    *hi = (*hi).min(v);
                }
                return Ok(a.is_some() && b.is_some());
            }
            _ => {}
        }
        Ok(false)
    }
}

/// ORDER BY target: a 1-based position, or an output column name / alias / expression text.
fn order_index(e: &Expr, names: &[String]) -> Result<Option<usize>, SqlError> {
    if let Expr::Literal(Value::Int(i)) = e {
        if *i < 1 || *i as usize > names.len() {
            return Err(SqlError::Plan(format!(
                "ORDER BY position {i} is out of range (1..{})",
                names.len()
            )));
        }
        return Ok(Some(*i as usize - 1));
    }
    let text = match e {
        Expr::Column { name, .. } => name.clone(),
        e => e.to_string(),
    };
    Ok(names.iter().position(|n| n.eq_ignore_ascii_case(&text)))
}

fn out_fields(names: &[String], exprs: &[PExpr]) -> Vec<Field> {
    exprs
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let name = names
                .get(i)
                .cloned()
                .unwrap_or_else(|| format!("_hidden{i}"));
            Field::new(name, e.data_type())
        })
        .collect()
}

/// Sort -> limit -> drop hidden sort columns.
fn finish_level(
    node: Node,
    fields: Vec<Field>,
    nvis: usize,
    sort_keys: Vec<(usize, bool)>,
    limit: Option<&Limit>,
    distinct: bool,
) -> (Node, Vec<Field>) {
    let mut node = node;
    if distinct {
        node = Node::Distinct {
            input: Box::new(node),
        };
    }
    if !sort_keys.is_empty() {
        node = Node::Sort {
            input: Box::new(node),
            keys: sort_keys,
        };
    }
    if let Some(l) = limit {
        node = Node::Limit {
            input: Box::new(node),
            limit: Some(l.limit),
            offset: l.offset,
            partition: Vec::new(),
        };
    }
    if fields.len() > nvis {
        let vis: Vec<Field> = fields[..nvis].to_vec();
        node = Node::Project {
            input: Box::new(node),
            exprs: vis
                .iter()
                .enumerate()
                .map(|(i, f)| PExpr::Input(i, f.data_type))
                .collect(),
            fields: vis.clone(),
        };
        return (node, vis);
    }
    (node, fields)
}

fn window_pos(w: &WindowClause) -> Pos {
    match w {
        WindowClause::Interval { pos, .. }
        | WindowClause::StateWindow { pos, .. }
        | WindowClause::Session { pos, .. }
        | WindowClause::Event { pos, .. }
        | WindowClause::Count { pos, .. }
        | WindowClause::Interp { pos, .. } => *pos,
    }
}

/// Replaces the window id placeholder `WID` by the real input index.
fn remap_wid(e: &mut PExpr, to: usize) {
    e.for_each_input_mut(&mut |i| {
        if *i == WID {
            *i = to;
        }
    });
}
