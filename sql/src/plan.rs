//! The planner: resolves tables, columns and tags, splits WHERE into a time range, a tag filter
//! (evaluated once per subtable on the vnode, before scanning) and a row filter, and builds
//! a vnode fragment (scan -> filter -> project | partial aggregate) plus a coordinator tree
//! (gather -> final aggregate -> having -> project -> sort -> limit). Subqueries in FROM plan
//! recursively: the innermost level that reads a table becomes the fragment and the outer
//! levels run on the coordinator over the merged inner result.

use crate::agg::{AggFunc, AggSpec};
use crate::ast::*;
use crate::error::{Pos, SqlError};
use crate::expr::{eval, PExpr, ScalarFunc};
use serde::{Deserialize, Serialize};
use tidal_common::types::PhysicalType;
use tidal_common::{DataType, Field, Precision, StableSchema, TableMeta, Value};

/// What the planner needs to know about the catalog.
pub trait Catalog {
    fn stable(&self, db: &str, name: &str) -> Option<StableSchema>;
    fn subtable(&self, db: &str, name: &str) -> Option<(TableMeta, StableSchema)>;
    fn precision(&self, db: &str) -> Option<Precision>;
}

/// The type of the `tbname` pseudo column.
pub const TBNAME_TYPE: DataType = DataType::VarChar(192);

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
            FragmentOp::Project { exprs } => exprs
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
    /// Row function `diff()`: the input is sorted by (partition columns, ts); each column in
    /// `cols` is replaced by its difference to the previous row of the same partition, and the
    /// first row of each partition is dropped (TDengine's `diff`).
    Diff {
        input: Box<Node>,
        partition: Vec<usize>,
        cols: Vec<usize>,
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

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueryPlan {
    pub fragments: Vec<FragmentSpec>,
    pub root: Node,
    /// The result columns.
    pub fields: Vec<Field>,
}

/// Every table or STABLE named in FROM, at any depth.
pub fn referenced_tables(q: &Query) -> Vec<ObjectRef> {
    let mut out = Vec::new();
    let mut cur = q;
    loop {
        match &cur.from {
            FromItem::Table { name, .. } => {
                out.push(name.clone());
                return out;
            }
            FromItem::Subquery { query, .. } => cur = query,
        }
    }
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
    "count", "sum", "avg", "min", "max", "first", "last", "last_row",
];

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
        schema: StableSchema,
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
    /// INTERVAL: the window-start expression over the input, and the interval length.
    window: Option<(PExpr, i64)>,
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
        if matches!(name, "_wstart" | "_wend" | "_wduration") {
            let Some((ws, iv)) = self.window.clone() else {
                return Err(SqlError::Plan(format!(
                    "'{name}' needs an INTERVAL window at {pos}"
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
                let schema = schema.clone();
                if name.eq_ignore_ascii_case("tbname") {
                    return Ok(self.input(InputCol::Tbname, TBNAME_TYPE));
                }
                if name.eq_ignore_ascii_case("_rowts") || name.eq_ignore_ascii_case("_c0") {
                    return Ok(self.input(InputCol::Col(0), DataType::Timestamp));
                }
                if let Some(i) = schema.column_index(name) {
                    return Ok(self.input(InputCol::Col(i), schema.columns[i].data_type));
                }
                if let Some(i) = schema.tag_index(name) {
                    return Ok(self.input(InputCol::Tag(i), schema.tags[i].data_type));
                }
            }
            ScopeKind::Derived { fields } => {
                if let Some(i) = fields
                    .iter()
                    .position(|f| f.name.eq_ignore_ascii_case(name))
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
        }
        Ok(None)
    }
    fn column(&mut self, name: &str, pos: Pos) -> Result<PExpr, SqlError> {
        self.scope.resolve(name, pos)
    }
    fn precision(&self) -> Precision {
        self.scope.precision
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
            PExpr::InList(Box::new(p), vals, *negated)
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
        Expr::Cast { expr, data_type } => PExpr::Cast(Box::new(compile(expr, ctx)?), *data_type),
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
        let func = match name {
            "count" if star || args.is_empty() => AggFunc::CountStar,
            "count" => AggFunc::Count,
            "sum" => AggFunc::Sum,
            "avg" => AggFunc::Avg,
            "min" => AggFunc::Min,
            "max" => AggFunc::Max,
            "first" => AggFunc::First,
            "last" => AggFunc::Last,
            _ => AggFunc::LastRow,
        };
        if func == AggFunc::CountStar {
            return Ok(self.add(AggSpec {
                func,
                arg: None,
                ts: None,
                carry: vec![],
                carry_of: None,
                out_type: DataType::BigInt,
            }));
        }
        if star || args.len() != 1 {
            return Err(SqlError::Plan(format!(
                "function '{name}' takes exactly one argument at {pos}"
            )));
        }
        let arg = compile(&args[0], &mut ScalarCtx { scope: self.scope })?;
        let at = arg.data_type();
        let numeric = at.is_numeric() || at == DataType::Bool;
        let out_type = match func {
            AggFunc::Count => DataType::BigInt,
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
        let ts = if func.is_selector() {
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
        }))
    }
}

impl Ctx for AggCtx<'_> {
    fn leaf(&mut self, e: &Expr) -> Result<Option<PExpr>, SqlError> {
        if let Expr::Column { name, .. } = e {
            if name == "_wend" || name == "_wduration" {
                if let Some((ws, iv)) = self.scope.window.clone() {
                    let ivl = PExpr::Lit(Value::Int(iv), DataType::BigInt);
                    if name == "_wduration" {
                        return Ok(Some(ivl));
                    }
                    if let Some(k) = self.keys.iter().position(|k| *k == ws) {
                        return Ok(Some(PExpr::Bin(
                            BinOp::Add,
                            Box::new(PExpr::Input(k, DataType::Timestamp)),
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
            pos,
        } = e
        {
            if AGG_FUNCS.contains(&name.as_str()) {
                return self.agg_call(name, args, *star, *pos).map(Some);
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
}

fn contains_row_func(e: &Expr) -> bool {
    let mut found = false;
    e.walk(&mut |x| {
        if matches!(x, Expr::Function { name, .. } if name == "diff") {
            found = true
        }
    });
    found
}

/// Row-function context: `diff(x)` becomes a reference to a pre-projected column that the Diff
/// node replaces by differences; other column expressions are pre-projected as they are.
struct RowCtx<'a> {
    scope: &'a mut Scope,
    pre: Vec<PExpr>,
    diffs: Vec<usize>,
}

impl RowCtx<'_> {
    fn pre_index(&mut self, p: PExpr) -> usize {
        match self.pre.iter().position(|x| *x == p) {
            Some(i) if !self.diffs.contains(&i) => i,
            _ => {
                self.pre.push(p);
                self.pre.len() - 1
            }
        }
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
                    "aggregate function '{name}' cannot be mixed with diff() at {pos}"
                )));
            }
            if name == "diff" {
                if args.len() != 1 || contains_row_func(&args[0]) {
                    return Err(SqlError::Plan(format!(
                        "diff() takes one argument (not another diff) at {pos}"
                    )));
                }
                let a = compile(&args[0], &mut ScalarCtx { scope: self.scope })?;
                let t = match a.data_type().physical() {
                    PhysicalType::Float => DataType::Double,
                    PhysicalType::Str => {
                        return Err(SqlError::TypeMismatch(format!(
                            "diff() needs a numeric argument at {pos}"
                        )))
                    }
                    _ => DataType::BigInt,
                };
                self.pre.push(a);
                let i = self.pre.len() - 1;
                self.diffs.push(i);
                return Ok(Some(PExpr::Input(i, t)));
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
                        schema,
                        subtable,
                        layout: Vec::new(),
                    },
                    precision,
                    from_name: name.name.clone(),
                    window: None,
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
                }
            }
        };
        if let Some(w) = &q.window {
            match w {
                WindowClause::Interval {
                    interval_ns,
                    offset_ns,
                    sliding_ns,
                    fill,
                    pos,
                } => {
                    if sliding_ns.is_some_and(|s| s != *interval_ns) {
                        return Err(SqlError::Unsupported(format!(
                            "SLIDING different from the INTERVAL is not supported yet at {pos}"
                        )));
                    }
                    if fill.as_ref().is_some_and(|f| *f != Fill::None) {
                        return Err(SqlError::Unsupported(format!(
                            "FILL is not supported yet at {pos}"
                        )));
                    }
                    let iv = scope.precision.from_nanos(*interval_ns);
                    let off = scope.precision.from_nanos(offset_ns.unwrap_or(0));
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
                    let ts = scope.ts_expr().ok_or_else(|| {
                        SqlError::Plan(format!(
                            "INTERVAL needs a timestamp column in its input at {pos}"
                        ))
                    })?;
                    scope.window = Some((PExpr::WinStart(Box::new(ts), iv, off), iv));
                }
                WindowClause::StateWindow { pos, .. } | WindowClause::Session { pos, .. } => {
                    return Err(SqlError::Unsupported(format!(
                        "STATE_WINDOW and SESSION are not supported yet at {pos}"
                    )));
                }
            }
        }
        if q.slimit.is_some() {
            return Err(SqlError::Unsupported("SLIMIT is not supported yet".into()));
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

        // ---- aggregation or projection
        let agg_mode = !q.group_by.is_empty()
            || scope.window.is_some()
            || items.iter().any(|i| contains_agg(&i.expr))
            || q.having.as_ref().is_some_and(contains_agg);
        if q.having.is_some() && !agg_mode {
            return Err(SqlError::Plan(
                "HAVING needs GROUP BY or an aggregate function".into(),
            ));
        }
        let names: Vec<String> = items.iter().map(|i| i.name.clone()).collect();
        let nvis = items.len();

        if !agg_mode && items.iter().any(|i| contains_row_func(&i.expr)) {
            let mut rctx = RowCtx {
                scope: &mut scope,
                pre: Vec::new(),
                diffs: Vec::new(),
            };
            let mut part = Vec::new();
            for k in &q.partition_by {
                let p = compile(k, &mut ScalarCtx { scope: rctx.scope })?;
                part.push(rctx.pre_index(p));
            }
            let ts = rctx.scope.ts_expr().ok_or_else(|| {
                SqlError::Plan("diff() needs a timestamp column in its input".into())
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
            let RowCtx { pre, diffs, .. } = rctx;
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
            let node = Node::Diff {
                input: Box::new(Node::Sort {
                    input: Box::new(node),
                    keys,
                }),
                partition: part,
                cols: diffs,
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
            if let (false, Some(l)) = (q.partition_by.is_empty(), &q.limit) {
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
                part_limit = Some((keys, part, l.clone()));
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
                        limit: match (&q.limit, q.order_by.is_empty() && part_limit.is_none()) {
                            (Some(l), true) => Some(l.limit.saturating_add(l.offset)),
                            _ => None,
                        },
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
                Some((keys, part, l)) => (
                    Node::Limit {
                        input: Box::new(Node::Sort {
                            input: Box::new(node),
                            keys: keys.into_iter().map(|k| (k, true)).collect(),
                        }),
                        limit: Some(l.limit),
                        offset: l.offset,
                        partition: part,
                    },
                    None,
                ),
                None => (node, q.limit.as_ref()),
            };
            return Ok(finish_level(node, fields, nvis, sort_keys, limit));
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
            Some((ws, _)) => {
                keys.push(ws.clone());
                Some(keys.len() - 1)
            }
            None => None,
        };
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
        let agg_node = match inner {
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
                };
                let gf = frag.output_fields();
                let id = self.push_fragment(db, target, frag);
                Node::Aggregate {
                    input: Box::new(Node::Gather {
                        fragment: id,
                        fields: gf,
                    }),
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
        };
        let mut node = match having {
            Some(pred) => Node::Filter {
                input: Box::new(agg_node),
                pred,
            },
            None => agg_node,
        };
        // windows come out ordered by partition, then window start; with PARTITION BY,
        // LIMIT applies per partition (TDengine 3)
        if let Some(wk) = win_key {
            let mut keys: Vec<(usize, bool)> = (0..npart).map(|i| (i, true)).collect();
            keys.push((wk, true));
            node = Node::Sort {
                input: Box::new(node),
                keys,
            };
        } else if npart > 0 && q.limit.is_some() && !q.partition_by.is_empty() {
            node = Node::Sort {
                input: Box::new(node),
                keys: (0..npart).map(|i| (i, true)).collect(),
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
        Ok(finish_level(node, fields, nvis, sort_keys, limit))
    }

    fn inner_precision(&self, q: &Query) -> Precision {
        let refs = referenced_tables(q);
        refs.first()
            .and_then(|r| r.db.as_deref().or(self.default_db))
            .and_then(|db| self.cat.precision(db))
            .unwrap_or(Precision::Millis)
    }

    fn push_fragment(&mut self, db: String, target: FragmentTarget, fragment: Fragment) -> u32 {
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
) -> (Node, Vec<Field>) {
    let mut node = node;
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
