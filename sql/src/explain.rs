//! EXPLAIN [ANALYZE]: renders a [`QueryPlan`] as text lines, the vnode fragments (what runs
//! on every vgroup: scan, time range, tag and row filters, projection or partial aggregate)
//! and the coordinator operator tree. With ANALYZE the query runs and each line also shows
//! the rows it produced and the time it took (coordinator operators: inclusive of their
//! inputs; fragments: as measured by the caller, the slowest vgroup).

use crate::agg::AggSpec;
use crate::error::SqlError;
use crate::plan::{
    FillMode, Fragment, FragmentOp, FragmentTarget, InputCol, Node, QueryPlan, RowFn, ScanTarget,
};
use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Duration;
use tidal_common::{Batch, DataType, Field, Value};

/// What the caller measured for one fragment: over how many vgroups it ran, the rows they
/// returned in total, and the slowest vgroup's time.
#[derive(Clone, Debug, Default)]
pub struct FragmentStats {
    pub fragment: u32,
    pub vgroups: usize,
    pub rows: u64,
    pub max_time: Duration,
}

thread_local! {
    /// Per coordinator node (by address): rows out and inclusive time; active during
    /// [`finish_analyze`] only.
    static STATS: RefCell<Option<HashMap<usize, (u64, Duration)>>> = const { RefCell::new(None) };
}

/// Called by the coordinator executor after each node.
pub(crate) fn record(node: &Node, rows: usize, took: Duration) {
    STATS.with(|s| {
        if let Some(m) = s.borrow_mut().as_mut() {
            let e = m.entry(node as *const Node as usize).or_default();
            e.0 += rows as u64;
            e.1 += took;
        }
    });
}

/// Like [`crate::finish`], also returning the EXPLAIN ANALYZE text.
pub fn finish_analyze(
    plan: &QueryPlan,
    results: Vec<(u32, Vec<Batch>)>,
    fragments: &[FragmentStats],
) -> Result<Batch, SqlError> {
    STATS.with(|s| *s.borrow_mut() = Some(HashMap::new()));
    let r = crate::finish(plan, results);
    let stats = STATS.with(|s| s.borrow_mut().take()).unwrap_or_default();
    let out = r?;
    let mut lines = Vec::new();
    lines.push(format!("Result: {} rows", out.num_rows()));
    lines.extend(render(plan, Some((&stats, fragments))));
    Ok(text_batch(lines))
}

/// The EXPLAIN text of a plan (without running it).
pub fn explain(plan: &QueryPlan) -> Batch {
    text_batch(render(plan, None))
}

fn text_batch(lines: Vec<String>) -> Batch {
    let width = lines.iter().map(|l| l.len()).max().unwrap_or(1).max(1) as u32;
    let rows: Vec<Vec<Value>> = lines.into_iter().map(|l| vec![Value::Str(l)]).collect();
    Batch::from_rows(
        vec![Field::new("QUERY PLAN", DataType::VarChar(width))],
        &rows,
    )
}

type Analysis<'a> = (&'a HashMap<usize, (u64, Duration)>, &'a [FragmentStats]);

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

fn render(plan: &QueryPlan, an: Option<Analysis>) -> Vec<String> {
    let mut out = vec!["Coordinator:".to_string()];
    node_lines(&plan.root, 1, an, &mut out);
    for spec in &plan.fragments {
        let target = match &spec.target {
            FragmentTarget::AllVgroups => format!("every vgroup of database {}", spec.db),
            FragmentTarget::Table(t) => format!("the vgroup of table {}.{t}", spec.db),
        };
        let mut head = format!("Vnode fragment {} on {target}:", spec.id);
        if let Some((_, frags)) = an {
            if let Some(f) = frags.iter().find(|f| f.fragment == spec.id) {
                head.push_str(&format!(
                    "  (vgroups={} rows={} slowest={})",
                    f.vgroups,
                    f.rows,
                    ms(f.max_time)
                ));
            }
        }
        out.push(head);
        fragment_lines(&spec.fragment, &mut out);
    }
    out
}

fn fragment_lines(f: &Fragment, out: &mut Vec<String>) {
    let scan = match &f.target {
        ScanTarget::Stable(s) => format!("every subtable of STABLE {s}"),
        ScanTarget::Table(t) => format!("table {t}"),
    };
    let range = match (f.ts_min, f.ts_max) {
        (i64::MIN, i64::MAX) => "all time".to_string(),
        (a, i64::MAX) => format!("ts >= {a}"),
        (i64::MIN, b) => format!("ts <= {b}"),
        (a, b) => format!("{a} <= ts <= {b}"),
    };
    let cols: Vec<String> = f
        .layout
        .iter()
        .map(|c| match c {
            InputCol::Col(i) => format!("c{i}"),
            InputCol::Tag(i) => format!("tag{i}"),
            InputCol::Tbname => "tbname".into(),
        })
        .collect();
    out.push(format!(
        "  Scan {scan}; {range}; columns {}",
        cols.join(" ")
    ));
    if f.tag_filter.is_some() {
        out.push("  Tag filter (once per subtable, before scanning)".into());
    }
    if f.filter.is_some() {
        out.push("  Row filter".into());
    }
    match &f.op {
        FragmentOp::Project { exprs } => {
            let lim = f
                .limit
                .map(|l| format!(", stops after {l} rows"))
                .unwrap_or_default();
            out.push(format!("  Project {} columns{lim}", exprs.len()));
        }
        FragmentOp::PartialAgg { keys, aggs } => out.push(format!(
            "  Partial aggregate: {} group keys; {}",
            keys.len(),
            agg_names(aggs)
        )),
        FragmentOp::Tags { exprs } => out.push(format!(
            "  Tags: {} column(s) per subtable, no data read",
            exprs.len()
        )),
    }
}

fn agg_names(aggs: &[AggSpec]) -> String {
    let v: Vec<String> = aggs.iter().map(|a| format!("{:?}", a.func)).collect();
    v.join(" ")
}

fn node_lines(n: &Node, depth: usize, an: Option<Analysis>, out: &mut Vec<String>) {
    let pad = "  ".repeat(depth);
    let (text, inputs): (String, Vec<&Node>) = match n {
        Node::Gather { fragment, .. } => (format!("Gather vnode fragment {fragment}"), vec![]),
        Node::Values { batch } => (format!("Values: {} rows", batch.num_rows()), vec![]),
        Node::Filter { input, .. } => ("Filter".into(), vec![input]),
        Node::Project { input, fields, .. } => (
            format!(
                "Project {}",
                fields
                    .iter()
                    .map(|f| f.name.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            vec![input],
        ),
        Node::Aggregate {
            input,
            keys,
            aggs,
            merge,
        } => (
            format!(
                "{} aggregate: {} group keys; {}",
                if *merge {
                    "Merge partial"
                } else {
                    "Coordinator"
                },
                keys.len(),
                agg_names(aggs)
            ),
            vec![input],
        ),
        Node::RowFunc { input, funcs, .. } => (
            format!(
                "Row functions {}",
                funcs
                    .iter()
                    .map(|f| row_fn_name(&f.1))
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
            vec![input],
        ),
        Node::SelectRows { input, k, mode, .. } => {
            (format!("{mode:?} {k} rows per partition"), vec![input])
        }
        Node::Window { input, kind, .. } => (format!("Window {}", window_name(kind)), vec![input]),
        Node::Fill { input, mode, .. } => {
            let m = match mode {
                FillMode::Null => "NULL",
                FillMode::Prev => "PREV",
                FillMode::Next => "NEXT",
                FillMode::Linear => "LINEAR",
                FillMode::Value(_) => "VALUE",
            };
            (format!("Fill {m}"), vec![input])
        }
        Node::Interp {
            input,
            start,
            end,
            every,
            ..
        } => (
            format!("Interp from {start} to {end} every {every}"),
            vec![input],
        ),
        Node::Histogram { input, bins, .. } => (
            format!(
                "Histogram {} bins per partition",
                bins.len().saturating_sub(1)
            ),
            vec![input],
        ),
        Node::SlidePanes { input, count, .. } => (
            format!("Slide: each pane into {count} windows"),
            vec![input],
        ),
        Node::Distinct { input } => ("Distinct".into(), vec![input]),
        Node::Union { inputs, .. } => ("Union all".into(), inputs.iter().collect()),
        Node::SLimit {
            input,
            limit,
            offset,
            ..
        } => (
            format!("SLimit {limit} partitions from {offset}"),
            vec![input],
        ),
        Node::Sort { input, keys } => (
            format!(
                "Sort by {}",
                keys.iter()
                    .map(|(c, asc)| format!("column {c} {}", if *asc { "asc" } else { "desc" }))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            vec![input],
        ),
        Node::Limit {
            input,
            limit,
            offset,
            partition,
        } => (
            format!(
                "Limit {}{}{}",
                limit.map(|l| l.to_string()).unwrap_or("all".into()),
                if *offset > 0 {
                    format!(" offset {offset}")
                } else {
                    String::new()
                },
                if partition.is_empty() {
                    ""
                } else {
                    " per partition"
                }
            ),
            vec![input],
        ),
    };
    let stats = an
        .and_then(|(m, _)| m.get(&(n as *const Node as usize)))
        .map(|(rows, t)| format!("  (rows={rows} time={})", ms(*t)))
        .unwrap_or_default();
    out.push(format!("{pad}{text}{stats}"));
    for i in inputs {
        node_lines(i, depth + 1, an, out);
    }
}

fn window_name(k: &crate::plan::WindowKind) -> String {
    use crate::plan::WindowKind::*;
    match k {
        Sliding {
            interval, sliding, ..
        } => format!("sliding interval {interval} every {sliding}"),
        State(_) => "state".into(),
        Session(g) => format!("session gap {g}"),
        Event(..) => "event".into(),
        Count(n, s) => format!("count {n} step {s}"),
    }
}

fn row_fn_name(f: &RowFn) -> &'static str {
    match f {
        RowFn::Diff => "diff",
        RowFn::Derivative { .. } => "derivative",
        RowFn::Csum => "csum",
        RowFn::Mavg(_) => "mavg",
        RowFn::StateCount(..) => "statecount",
        RowFn::StateDuration(..) => "stateduration",
        RowFn::Lag => "lag",
    }
}
