//! The statement and query AST of the TDengine dialect.

use crate::error::Pos;
use serde::{Deserialize, Serialize};
use std::fmt;
use tidal_common::{ColumnDef, DataType, DbOptions, Value};

/// `db.name` or `name`. Unquoted identifiers are lower-cased, `backquoted` ones kept.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ObjectRef {
    pub db: Option<String>,
    pub name: String,
}

impl ObjectRef {
    pub fn new(db: Option<&str>, name: &str) -> ObjectRef {
        ObjectRef {
            db: db.map(str::to_string),
            name: name.to_string(),
        }
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.db {
            Some(db) => write!(f, "{db}.{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// A data node named in a statement: by id or by endpoint (`host:port`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DnodeRef {
    Id(u32),
    Endpoint(String),
}

/// The change an ALTER STABLE makes.
#[derive(Clone, Debug, PartialEq)]
pub enum AlterStable {
    AddColumn(ColumnDef),
    AddTag(ColumnDef),
    /// A VARCHAR/NCHAR column or tag gets a larger width (the definition's new type).
    ModifyColumn(ColumnDef),
    ModifyTag(ColumnDef),
    DropColumn(String),
    DropTag(String),
    RenameTag {
        from: String,
        to: String,
    },
}

/// One `tag = value` of ALTER TABLE .. SET TAG, with where the tag's name stood.
#[derive(Clone, Debug, PartialEq)]
pub struct TagAssignment {
    pub tag: String,
    pub pos: Pos,
    /// A literal, or `NOW` / `TODAY()` (read when the statement is bound, as for a row).
    pub value: InsertValue,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Statement {
    CreateDatabase {
        name: String,
        if_not_exists: bool,
        options: DbOptions,
    },
    /// ALTER DATABASE: `options` holds the parsed values of the option names in `set`.
    AlterDatabase {
        name: String,
        options: DbOptions,
        set: Vec<String>,
    },
    DropDatabase {
        name: String,
        if_exists: bool,
    },
    Use {
        db: String,
    },
    CreateStable {
        db: Option<String>,
        name: String,
        if_not_exists: bool,
        columns: Vec<ColumnDef>,
        tags: Vec<ColumnDef>,
    },
    /// ALTER STABLE: one change.
    AlterStable {
        db: Option<String>,
        name: String,
        change: AlterStable,
    },
    /// `ALTER TABLE [db.]subtable SET TAG t = v [, t2 = v2 ...]`: new tag values for one
    /// subtable (TDengine 3), all applied or none.
    AlterTableSetTags {
        table: ObjectRef,
        table_pos: Pos,
        tags: Vec<TagAssignment>,
    },
    CreateTables {
        if_not_exists: bool,
        tables: Vec<CreateSubtable>,
    },
    DropTable {
        if_exists: bool,
        tables: Vec<ObjectRef>,
    },
    DropStable {
        if_exists: bool,
        name: ObjectRef,
    },
    Insert {
        items: Vec<InsertItem>,
    },
    Select(Box<Query>),
    /// `INSERT INTO t [USING ..] [(cols)] SELECT ...`: `target.rows` is empty; the frontend
    /// fills it with the query's result.
    InsertSelect {
        target: InsertItem,
        query: Box<Query>,
    },
    /// `EXPLAIN [ANALYZE] SELECT ...`
    Explain {
        analyze: bool,
        query: Box<Query>,
    },
    ShowDatabases,
    ShowStables {
        db: Option<String>,
        like: Option<String>,
    },
    ShowTables {
        db: Option<String>,
        like: Option<String>,
    },
    ShowVgroups {
        db: Option<String>,
    },
    ShowDnodes,
    ShowMnodes,
    /// `SHOW TABLE TAGS FROM t [FROM db]`: one row per subtable (of a STABLE, or the one
    /// subtable) with its tag values as columns.
    ShowTableTags {
        table: ObjectRef,
    },
    /// `SHOW TABLE DISTRIBUTED [db.]t`: where the rows of a STABLE or subtable are stored
    /// (blocks, rows per block, STT and memtable rows), per vgroup.
    ShowTableDistributed {
        table: ObjectRef,
    },
    /// `SHOW TAGS FROM subtable [FROM db]`: one row per tag of the subtable.
    ShowTags {
        table: ObjectRef,
    },
    ShowCreateDatabase {
        name: String,
    },
    /// `SHOW CREATE STABLE st` (`stable`) or `SHOW CREATE TABLE t` (a STABLE or a subtable).
    ShowCreateTable {
        table: ObjectRef,
        stable: bool,
    },
    /// The statements running on the node that coordinates them.
    ShowQueries,
    /// `SHOW GRANTS` / `SHOW LICENCES`: TDengine's licence view; Tidal has no licensing.
    ShowGrants,
    /// `SHOW CLUSTER`: the cluster's id, name, uptime and creation time.
    ShowCluster,
    /// `SHOW [CLUSTER] VARIABLES [LIKE 'p']` (`dnode` = None: the node that runs the
    /// statement) or `SHOW DNODE n VARIABLES [LIKE 'p']`: a node's configuration keys.
    ShowVariables {
        dnode: Option<u32>,
        like: Option<String>,
    },
    /// `SHOW VNODES [ON DNODE n | n | 'endpoint']` or `SHOW n VNODES`: which vgroups live on
    /// which data node (`None`: every data node).
    ShowVnodes {
        dnode: Option<DnodeRef>,
    },
    /// `KILL QUERY 'id'` with an id from SHOW QUERIES.
    KillQuery {
        id: String,
    },
    Describe {
        table: ObjectRef,
    },
    /// `DELETE FROM t [WHERE ...]`: the condition may use the timestamp, tags and tbname only.
    Delete {
        table: ObjectRef,
        table_pos: Pos,
        selection: Option<Expr>,
    },
    FlushDatabase {
        name: String,
    },
    CompactDatabase {
        name: String,
    },
    /// CREATE/ALTER/DROP USER, SHOW USERS, GRANT, REVOKE.
    User(UserStatement),
}

/// Statements about users and privileges (executed by the mnode, superuser only except a
/// user changing its own password).
#[derive(Clone, Debug, PartialEq)]
pub enum UserStatement {
    /// `CREATE USER name PASS 'password'`
    Create { name: String, password: String },
    /// `ALTER USER name PASS 'password'`
    AlterPassword { name: String, password: String },
    /// `DROP USER name`
    Drop { name: String },
    /// `SHOW USERS`
    Show,
    /// `GRANT READ|WRITE|ALL ON db|db.*|*|*.* TO user` (`revoke`: `REVOKE ... FROM user`);
    /// `db` is `*` for every database.
    Grant {
        read: bool,
        write: bool,
        db: String,
        user: String,
        revoke: bool,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct CreateSubtable {
    pub name: ObjectRef,
    pub stable: ObjectRef,
    pub tag_names: Option<Vec<String>>,
    /// Literals, or `NOW` / `TODAY()` for a TIMESTAMP tag (read when the statement is bound).
    pub tags: Vec<InsertValue>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct InsertUsing {
    pub stable: ObjectRef,
    pub tag_names: Option<Vec<String>>,
    /// As [`CreateSubtable::tags`].
    pub tags: Vec<InsertValue>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct InsertItem {
    pub table: ObjectRef,
    pub using: Option<InsertUsing>,
    pub columns: Option<Vec<String>>,
    pub rows: Vec<Vec<InsertValue>>,
    /// The statement's number (1-based) of each row, when it is not the row's position
    /// here: an INSERT into a STABLE is split per subtable ([`crate::split_stable_insert`])
    /// and its errors name the statement's rows. Empty: row `i` is the statement's `i + 1`.
    pub row_numbers: Vec<usize>,
}

/// One value of an INSERT row.
#[derive(Clone, Debug, PartialEq)]
pub enum InsertValue {
    /// A literal: `Str` for quoted strings (also time strings), `Int`/`UInt`/`Float`/`Bool`/`Null`.
    Value(Value),
    /// `NOW`, `NOW + 1s`, `NOW - 10m`, or with `midnight` `TODAY()`, `TODAY() + 8h` (midnight
    /// UTC of the current day): offset in nanoseconds.
    Now { offset_ns: i64, midnight: bool },
}

impl InsertValue {
    /// How the statement spelled a time function (`NOW`, `TODAY()`), for errors that say
    /// where it may not stand; `None` for a literal.
    pub fn time_function(&self) -> Option<&'static str> {
        match self {
            InsertValue::Now {
                midnight: false, ..
            } => Some("NOW"),
            InsertValue::Now { midnight: true, .. } => Some("TODAY()"),
            InsertValue::Value(_) => None,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Queries

#[derive(Clone, Debug, PartialEq)]
pub struct Query {
    /// `SELECT DISTINCT`
    pub distinct: bool,
    /// `SELECT TAGS`: one row per subtable, from its tags, whether it holds data or not;
    /// where the keyword stood.
    pub tags: Option<Pos>,
    pub projection: Vec<SelectItem>,
    pub from: FromItem,
    pub selection: Option<Expr>,
    pub partition_by: Vec<Expr>,
    pub window: Option<WindowClause>,
    pub group_by: Vec<Expr>,
    pub having: Option<Expr>,
    pub order_by: Vec<OrderItem>,
    pub slimit: Option<Limit>,
    pub limit: Option<Limit>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Limit {
    pub limit: u64,
    pub offset: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub enum FromItem {
    Table {
        name: ObjectRef,
        alias: Option<String>,
        pos: Pos,
    },
    Subquery {
        query: Box<Query>,
        alias: Option<String>,
        pos: Pos,
    },
    /// No FROM clause (`SELECT NOW()`, `SELECT SERVER_VERSION()`): one row of no columns,
    /// evaluated by the coordinator alone. `pos` is where FROM would have stood.
    None { pos: Pos },
    /// `m0 UNION [ALL] m1 UNION [ALL] m2 ...`: `all[i]` joins `members[i + 1]` (ALL keeps
    /// duplicates); the parser wraps it as `SELECT * FROM (<union>)` carrying the ORDER BY
    /// and LIMIT written after the last member. `pos` is the first UNION's.
    Union {
        members: Vec<Query>,
        all: Vec<bool>,
        pos: Pos,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub enum SelectItem {
    /// `*`
    Wildcard(Pos),
    Expr {
        expr: Expr,
        alias: Option<String>,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct OrderItem {
    pub expr: Expr,
    pub asc: bool,
}

/// Window clauses. Durations are in nanoseconds (converted to the db precision by the planner).
#[derive(Clone, Debug, PartialEq)]
pub enum WindowClause {
    Interval {
        interval_ns: i64,
        offset_ns: Option<i64>,
        sliding_ns: Option<i64>,
        fill: Option<Fill>,
        pos: Pos,
    },
    StateWindow {
        expr: Expr,
        pos: Pos,
    },
    Session {
        column: Expr,
        gap_ns: i64,
        pos: Pos,
    },
    /// `EVENT_WINDOW START WITH cond END WITH cond`
    Event {
        start: Expr,
        end: Expr,
        pos: Pos,
    },
    /// `RANGE(start [, end]) [EVERY(d)] [FILL(..)]` of INTERP queries.
    Interp {
        start: Expr,
        end: Option<Expr>,
        every_ns: Option<i64>,
        fill: Option<Fill>,
        pos: Pos,
    },
    /// `COUNT_WINDOW(n [, step])`
    Count {
        n: u64,
        step: Option<u64>,
        pos: Pos,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub enum Fill {
    None,
    Null,
    Prev,
    Next,
    Linear,
    Value(Vec<Value>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Eq,
    NotEq,
    Lt,
    LtEq,
    Gt,
    GtEq,
    And,
    Or,
}

impl BinOp {
    /// The six comparison operators.
    pub const COMPARISONS: [BinOp; 6] = [
        BinOp::Eq,
        BinOp::NotEq,
        BinOp::Lt,
        BinOp::LtEq,
        BinOp::Gt,
        BinOp::GtEq,
    ];

    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Mod => "%",
            BinOp::Eq => "=",
            BinOp::NotEq => "!=",
            BinOp::Lt => "<",
            BinOp::LtEq => "<=",
            BinOp::Gt => ">",
            BinOp::GtEq => ">=",
            BinOp::And => "and",
            BinOp::Or => "or",
        }
    }

    /// The comparison with its operands swapped (`a < b` is `b > a`); other operators are
    /// returned as they are.
    pub fn flipped(self) -> BinOp {
        match self {
            BinOp::Lt => BinOp::Gt,
            BinOp::LtEq => BinOp::GtEq,
            BinOp::Gt => BinOp::Lt,
            BinOp::GtEq => BinOp::LtEq,
            other => other,
        }
    }

    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinOp::Eq | BinOp::NotEq | BinOp::Lt | BinOp::LtEq | BinOp::Gt | BinOp::GtEq
        )
    }

    pub fn is_arithmetic(self) -> bool {
        matches!(
            self,
            BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Mod
        )
    }

    /// The operator with its operands swapped (`a < b` == `b > a`).
    pub fn flip(self) -> BinOp {
        match self {
            BinOp::Lt => BinOp::Gt,
            BinOp::LtEq => BinOp::GtEq,
            BinOp::Gt => BinOp::Lt,
            BinOp::GtEq => BinOp::LtEq,
            o => o,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// A column, tag or pseudo column (`tbname`, `_wstart`, `_rowts`), lower-cased unless quoted.
    Column {
        name: String,
        pos: Pos,
    },
    Literal(Value),
    /// A duration literal (`1h`) in nanoseconds, used in `NOW - 1h` and `ts + 10m`.
    Duration(i64),
    Now,
    Binary {
        op: BinOp,
        left: Box<Expr>,
        right: Box<Expr>,
    },
    Not(Box<Expr>),
    Neg(Box<Expr>),
    IsNull {
        expr: Box<Expr>,
        negated: bool,
    },
    InList {
        expr: Box<Expr>,
        list: Vec<Expr>,
        negated: bool,
    },
    Between {
        expr: Box<Expr>,
        low: Box<Expr>,
        high: Box<Expr>,
        negated: bool,
    },
    Like {
        expr: Box<Expr>,
        pattern: Box<Expr>,
        negated: bool,
    },
    /// `expr MATCH 'regex'` (`negated`: NMATCH): a regular-expression search, unanchored.
    Match {
        expr: Box<Expr>,
        pattern: String,
        negated: bool,
        pos: Pos,
    },
    /// A function call; `name` is lower-cased; `star` for `f(*)`; `distinct` for
    /// `f(DISTINCT x)`.
    Function {
        name: String,
        args: Vec<Expr>,
        star: bool,
        distinct: bool,
        pos: Pos,
    },
    Cast {
        expr: Box<Expr>,
        data_type: DataType,
    },
    /// `CASE [operand] WHEN a THEN b ... [ELSE c] END`
    Case {
        operand: Option<Box<Expr>>,
        whens: Vec<(Expr, Expr)>,
        else_: Option<Box<Expr>>,
    },
}

impl Expr {
    pub fn position(&self) -> Option<Pos> {
        match self {
            Expr::Column { pos, .. } | Expr::Function { pos, .. } => Some(*pos),
            Expr::Binary { left, right, .. } => left.position().or_else(|| right.position()),
            Expr::Not(e) | Expr::Neg(e) => e.position(),
            Expr::IsNull { expr, .. }
            | Expr::InList { expr, .. }
            | Expr::Between { expr, .. }
            | Expr::Like { expr, .. }
            | Expr::Match { expr, .. }
            | Expr::Cast { expr, .. } => expr.position(),
            Expr::Case { whens, .. } => whens.first().and_then(|w| w.0.position()),
            _ => None,
        }
    }

    /// Calls `f` on this expression and every sub-expression.
    pub fn walk(&self, f: &mut dyn FnMut(&Expr)) {
        f(self);
        match self {
            Expr::Binary { left, right, .. } => {
                left.walk(f);
                right.walk(f);
            }
            Expr::Not(e) | Expr::Neg(e) | Expr::Cast { expr: e, .. } => e.walk(f),
            Expr::IsNull { expr, .. } | Expr::Match { expr, .. } => expr.walk(f),
            Expr::InList { expr, list, .. } => {
                expr.walk(f);
                for e in list {
                    e.walk(f);
                }
            }
            Expr::Between {
                expr, low, high, ..
            } => {
                expr.walk(f);
                low.walk(f);
                high.walk(f);
            }
            Expr::Like { expr, pattern, .. } => {
                expr.walk(f);
                pattern.walk(f);
            }
            Expr::Function { args, .. } => {
                for a in args {
                    a.walk(f);
                }
            }
            Expr::Case {
                operand,
                whens,
                else_,
            } => {
                if let Some(o) = operand {
                    o.walk(f);
                }
                for (a, b) in whens {
                    a.walk(f);
                    b.walk(f);
                }
                if let Some(e) = else_ {
                    e.walk(f);
                }
            }
            Expr::Column { .. } | Expr::Literal(_) | Expr::Duration(_) | Expr::Now => {}
        }
    }
}

fn fmt_value(v: &Value, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match v {
        Value::Str(s) => write!(f, "'{}'", s.replace('\'', "''")),
        v => write!(f, "{v}"),
    }
}

/// Canonical text of an expression; used as the output column name (`avg(velocity)`).
impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Column { name, .. } => f.write_str(name),
            Expr::Literal(v) => fmt_value(v, f),
            Expr::Duration(ns) => {
                // the largest unit that divides it, as it is usually written (`1s`, `10m`)
                const UNITS: [(i64, &str); 7] = [
                    (86_400_000_000_000, "d"),
                    (3_600_000_000_000, "h"),
                    (60_000_000_000, "m"),
                    (1_000_000_000, "s"),
                    (1_000_000, "a"),
                    (1_000, "u"),
                    (1, "b"),
                ];
                let (k, u) = UNITS
                    .iter()
                    .find(|(k, _)| *ns != 0 && ns % k == 0)
                    .copied()
                    .unwrap_or((1, "b"));
                write!(f, "{}{u}", ns / k)
            }
            Expr::Now => f.write_str("now()"),
            Expr::Binary { op, left, right } => {
                if matches!(op, BinOp::And | BinOp::Or) {
                    write!(f, "{left} {} {right}", op.symbol())
                } else {
                    write!(f, "{left}{}{right}", op.symbol())
                }
            }
            Expr::Not(e) => write!(f, "not {e}"),
            Expr::Neg(e) => write!(f, "-{e}"),
            Expr::IsNull { expr, negated } => {
                write!(f, "{expr} is {}null", if *negated { "not " } else { "" })
            }
            Expr::InList {
                expr,
                list,
                negated,
            } => {
                write!(f, "{expr} {}in (", if *negated { "not " } else { "" })?;
                for (i, e) in list.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{e}")?;
                }
                f.write_str(")")
            }
            Expr::Between {
                expr,
                low,
                high,
                negated,
            } => write!(
                f,
                "{expr} {}between {low} and {high}",
                if *negated { "not " } else { "" }
            ),
            Expr::Like {
                expr,
                pattern,
                negated,
            } => write!(
                f,
                "{expr} {}like {pattern}",
                if *negated { "not " } else { "" }
            ),
            Expr::Match {
                expr,
                pattern,
                negated,
                ..
            } => write!(
                f,
                "{expr} {}match '{}'",
                if *negated { "n" } else { "" },
                pattern.replace('\'', "''")
            ),
            Expr::Function {
                name,
                args,
                star,
                distinct,
                ..
            } => {
                if let ("position", [needle, hay]) = (name.as_str(), args.as_slice()) {
                    return write!(f, "position({needle} in {hay})");
                }
                write!(f, "{name}(")?;
                if *star {
                    f.write_str("*")?;
                }
                if *distinct {
                    f.write_str("distinct ")?;
                }
                for (i, a) in args.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{a}")?;
                }
                f.write_str(")")
            }
            Expr::Cast { expr, data_type } => {
                write!(
                    f,
                    "cast({expr} as {})",
                    data_type.to_string().to_lowercase()
                )
            }
            Expr::Case {
                operand,
                whens,
                else_,
            } => {
                f.write_str("case")?;
                if let Some(o) = operand {
                    write!(f, " {o}")?;
                }
                for (a, b) in whens {
                    write!(f, " when {a} then {b}")?;
                }
                if let Some(e) = else_ {
                    write!(f, " else {e}")?;
                }
                f.write_str(" end")
            }
        }
    }
}
