//! The TDengine SQL dialect for Tidal: parser, binder, planner, vnode fragment executor and
//! coordinator merge. Pure: no I/O, no networking.
//!
//! Flow of a query: [`parse`] -> [`referenced_tables`] (the frontend prefetches their metadata)
//! -> [`plan_query`] with a [`Catalog`] -> each [`FragmentSpec`] is shipped to its vnodes as
//! [`Fragment::to_bytes`] -> [`execute_fragment`] on each vnode over its [`ScanSource`] ->
//! [`finish`] on the coordinator with one batch per vgroup and fragment.
//!
//! Layers:
//! - `lexer` + `parser`: a hand-written tokenizer and recursive-descent parser (sqlparser cannot
//!   parse the TDengine extensions, see DESIGN.md §10). Errors carry `line:col`; nesting is
//!   bounded so that no input can overflow the stack.
//! - `bind`: INSERT items and `CREATE TABLE .. USING` against a resolved schema.
//! - `plan`: resolves columns/tags/`tbname`, splits WHERE into a time range (scan bounds), a tag
//!   filter (once per subtable, before scanning) and a row filter; builds one fragment for the
//!   level that reads a table and a coordinator [`Node`] tree for the rest (final aggregate,
//!   HAVING, projection, `diff`, sort, per-partition or global LIMIT). Subqueries in FROM plan
//!   recursively; outer levels run on the coordinator over the merged inner result.
//! - `expr`: compiled expressions ([`PExpr`]) evaluated column-at-a-time over [`tidal_common::Column`]s.
//! - `agg`: hash aggregation with mergeable partial states (COUNT summed, SUM summed, AVG as
//!   sum + count, MIN/MAX/FIRST/LAST/LAST_ROW as selectors carrying their row's timestamp and
//!   the plain columns of the single-selector rule).
//! - `exec`: the vnode side and the coordinator side.
//! - `coord`: coordinator-only operators (row-defined and sliding windows, FILL, row
//!   functions, TOP/BOTTOM/SAMPLE, DISTINCT, SLIMIT).
//! - `explain`: EXPLAIN [ANALYZE] text.
//! - `memory`: per-query memory accounting ([`MemoryBudget`]).
//! - `prune`: which blocks can hold a row passing a row filter, from their statistics.
//! - `stream`: the coordinator part of plans that stream batch by batch ([`RowPipeline`]).

pub mod agg;
pub mod ast;
pub mod bind;
mod coord;
pub mod error;
pub mod exec;
pub mod explain;
pub mod expr;
pub mod fuzzing;
mod hll;
pub mod lexer;
pub mod memory;
pub mod parser;
pub mod plan;
pub mod prune;
pub mod stream;
pub mod timefmt;

pub use agg::{AggFunc, AggSpec};
pub use ast::*;
pub use bind::{
    bind_create_subtable, bind_insert, bind_set_tags, names_tbname, split_stable_insert,
};
pub use error::{Pos, SqlError};
pub use exec::{
    batch_rows, check_target, execute_fragment, execute_fragment_stream, execute_fragment_until,
    execute_fragment_with, finds_lookups_built, finish, finish_with, fragment_tables,
    is_point_lookup, slice_batch, ColSummary, ScanPiece, ScanSource, POINT_LOOKUP_TABLES_MAX,
    STREAM_BATCH_BYTES, STREAM_BATCH_ROWS,
};
pub use explain::{explain, finish_analyze, FragmentStats};
pub use expr::PExpr;
pub use memory::{MemoryBudget, Reservation};
pub use parser::{parse, SQL_BYTES_MAX};
pub use plan::{
    plan_query, referenced_tables, Catalog, FillMode, Fragment, FragmentOp, FragmentSpec,
    FragmentTarget, InputCol, Node, QueryPlan, RowFn, ScanTarget, SelectMode, WindowKind,
    INFORMATION_SCHEMA,
};
pub use stream::{pipeline, RowPipeline};

#[cfg(test)]
mod tests;
