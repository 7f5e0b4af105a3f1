//! Execution: the vnode side ([`execute_fragment`]) and the coordinator side ([`finish`]).

use crate::agg::Aggregator;
use crate::error::SqlError;
use crate::expr::{broadcast, eval, true_rows};
use crate::plan::{Fragment, FragmentOp, InputCol, Node, QueryPlan, ScanTarget, TBNAME_TYPE};
use std::collections::HashMap;
use tidal_common::{Batch, Column, ColumnData, DataType, StableSchema, TableMeta, TableUid, Value};

/// Implemented by the vnode server over its local storage.
pub trait ScanSource {
    fn schema(&self, stable: &str) -> Option<StableSchema>;
    /// This vnode's subtables of the stable.
    fn tables(&self, stable: &str) -> Vec<TableMeta>;
    fn table(&self, name: &str) -> Option<TableMeta>;
    /// Rows with ts_min <= ts <= ts_max ordered by ts, deduplicated, one Column per requested
    /// stable column index (0 = ts).
    fn scan(
        &self,
        uid: TableUid,
        ts_min: i64,
        ts_max: i64,
        columns: &[usize],
    ) -> Result<Vec<Column>, String>;
}

fn layout_columns(
    layout: &[InputCol],
    meta: &TableMeta,
    schema: &StableSchema,
    scanned: &mut HashMap<usize, Column>,
    n: usize,
) -> Result<Vec<Column>, SqlError> {
    layout
        .iter()
        .map(|c| match c {
            InputCol::Col(i) => scanned
                .remove(i)
                .ok_or_else(|| SqlError::Execution(format!("column {i} was not scanned"))),
            InputCol::Tag(i) => {
                let def = schema.tags.get(*i).ok_or_else(|| {
                    SqlError::Execution(format!("STABLE {} has no tag {i}", schema.name))
                })?;
                Ok(broadcast(
                    meta.tags.get(*i).unwrap_or(&Value::Null),
                    def.data_type,
                    n,
                ))
            }
            InputCol::Tbname => Ok(broadcast(&Value::Str(meta.name.clone()), TBNAME_TYPE, n)),
        })
        .collect()
}

/// Runs a fragment over this vnode's data.
pub fn execute_fragment(f: &Fragment, src: &dyn ScanSource) -> Result<Batch, SqlError> {
    let metas: Vec<TableMeta> = match &f.target {
        // A vnode learns a STABLE's schema with its first subtable; one that never saw the
        // STABLE holds none of its subtables and contributes an empty partial result.
        ScanTarget::Stable(s) => src.tables(s),
        ScanTarget::Table(t) => vec![src.table(t).ok_or_else(|| {
            SqlError::TableNotFound(format!("table '{t}' not found on this vnode"))
        })?],
    };
    let mut scan_cols: Vec<usize> = vec![0];
    for c in &f.layout {
        if let InputCol::Col(i) = c {
            if !scan_cols.contains(i) {
                scan_cols.push(*i);
            }
        }
    }
    scan_cols.sort_unstable();
    let mut schemas: HashMap<String, StableSchema> = HashMap::new();
    let mut out = Batch::empty(f.output_fields());
    let mut agg = match &f.op {
        FragmentOp::PartialAgg { keys, aggs } => Some(Aggregator::new(
            keys.iter().map(|k| k.data_type()).collect(),
            aggs.clone(),
        )),
        FragmentOp::Project { .. } => None,
    };
    for meta in &metas {
        if f.limit.is_some_and(|l| out.num_rows() as u64 >= l) {
            break;
        }
        if !schemas.contains_key(&meta.stable) {
            let s = src.schema(&meta.stable).ok_or_else(|| {
                SqlError::StableNotFound(format!(
                    "STABLE '{}' not found on this vnode",
                    meta.stable
                ))
            })?;
            schemas.insert(meta.stable.clone(), s);
        }
        let Some(schema) = schemas.get(&meta.stable) else {
            continue;
        };
        if let Some(tf) = &f.tag_filter {
            let cols = layout_columns(&f.tag_layout, meta, schema, &mut HashMap::new(), 1)?;
            let r = eval(tf, &cols, 1)?;
            if true_rows(&r, 1).is_empty() {
                continue;
            }
        }
        if f.ts_min > f.ts_max {
            continue;
        }
        let scanned = src
            .scan(meta.uid, f.ts_min, f.ts_max, &scan_cols)
            .map_err(|e| SqlError::Execution(format!("scan of table {}: {e}", meta.name)))?;
        if scanned.len() != scan_cols.len() {
            return Err(SqlError::Execution(format!(
                "scan of table {} returned {} columns, expected {}",
                meta.name,
                scanned.len(),
                scan_cols.len()
            )));
        }
        let n = scanned.first().map(Column::len).unwrap_or(0);
        if n == 0 {
            continue;
        }
        let mut by_idx: HashMap<usize, Column> = scan_cols.iter().copied().zip(scanned).collect();
        let mut cols = layout_columns(&f.layout, meta, schema, &mut by_idx, n)?;
        let mut n = n;
        if let Some(pred) = &f.filter {
            let keep = true_rows(&eval(pred, &cols, n)?, n);
            if keep.len() < n {
                cols = cols.iter().map(|c| c.take(&keep)).collect();
                n = keep.len();
            }
        }
        if n == 0 {
            continue;
        }
        match (&f.op, agg.as_mut()) {
            (FragmentOp::PartialAgg { keys, .. }, Some(a)) => a.update(keys, &cols, n)?,
            (FragmentOp::Project { exprs }, _) => {
                let res = exprs
                    .iter()
                    .map(|e| eval(e, &cols, n))
                    .collect::<Result<Vec<_>, _>>()?;
                out.append(&Batch {
                    fields: out.fields.clone(),
                    columns: res,
                });
            }
            _ => {}
        }
    }
    if let Some(a) = agg {
        return Ok(a.partial());
    }
    Ok(out)
}

/// Runs the coordinator part of a plan over the vnode results:
/// `results[i] = (fragment id, one Batch per vgroup)`.
pub fn finish(plan: &QueryPlan, results: Vec<(u32, Vec<Batch>)>) -> Result<Batch, SqlError> {
    let mut by_id: HashMap<u32, Vec<Batch>> = HashMap::new();
    for (id, batches) in results {
        by_id.entry(id).or_default().extend(batches);
    }
    let mut b = run(&plan.root, &mut by_id)?;
    // the result carries the user-facing names
    if b.fields.len() == plan.fields.len() {
        b.fields = plan.fields.clone();
    }
    Ok(b)
}

fn run(node: &Node, inputs: &mut HashMap<u32, Vec<Batch>>) -> Result<Batch, SqlError> {
    match node {
        Node::Gather { fragment, fields } => {
            let mut out = Batch::empty(fields.clone());
            for b in inputs.remove(fragment).unwrap_or_default() {
                if b.columns.len() != fields.len() {
                    return Err(SqlError::Execution(format!(
                        "fragment {fragment} returned {} columns, expected {}",
                        b.columns.len(),
                        fields.len()
                    )));
                }
                out.append(&b);
            }
            Ok(out)
        }
        Node::Filter { input, pred } => {
            let b = run(input, inputs)?;
            let n = b.num_rows();
            let keep = true_rows(&eval(pred, &b.columns, n)?, n);
            Ok(if keep.len() == n { b } else { b.take(&keep) })
        }
        Node::Project {
            input,
            exprs,
            fields,
        } => {
            let b = run(input, inputs)?;
            let n = b.num_rows();
            let columns = exprs
                .iter()
                .map(|e| eval(e, &b.columns, n))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Batch {
                fields: fields.clone(),
                columns,
            })
        }
        Node::Aggregate {
            input,
            keys,
            aggs,
            merge,
        } => {
            let b = run(input, inputs)?;
            let mut a = Aggregator::new(keys.iter().map(|k| k.data_type()).collect(), aggs.clone());
            if *merge {
                a.merge(&b)?;
            } else {
                a.update(keys, &b.columns, b.num_rows())?;
            }
            Ok(a.finish(true))
        }
        Node::Diff {
            input,
            partition,
            cols,
        } => {
            let b = run(input, inputs)?;
            let n = b.num_rows();
            let same_part = |i: usize, j: usize| {
                partition.iter().all(|c| {
                    b.columns
                        .get(*c)
                        .is_some_and(|col| col.get(i) == col.get(j))
                })
            };
            let keep: Vec<usize> = (1..n).filter(|&i| same_part(i, i - 1)).collect();
            let mut columns = Vec::with_capacity(b.columns.len());
            let mut fields = b.fields.clone();
            for (ci, col) in b.columns.iter().enumerate() {
                if !cols.contains(&ci) {
                    columns.push(col.take(&keep));
                    continue;
                }
                let float = matches!(col.data, ColumnData::Float(_));
                let t = if float {
                    DataType::Double
                } else {
                    DataType::BigInt
                };
                let mut out = Column::empty(t, keep.len());
                for &i in &keep {
                    let (cur, prev) = (col.get(i), col.get(i - 1));
                    let v = match (cur, prev) {
                        (Value::Null, _) | (_, Value::Null) => Value::Null,
                        (c, p) if float => {
                            Value::Float(c.as_f64().unwrap_or(0.0) - p.as_f64().unwrap_or(0.0))
                        }
                        (c, p) => Value::Int(
                            c.as_i64()
                                .unwrap_or(0)
                                .wrapping_sub(p.as_i64().unwrap_or(0)),
                        ),
                    };
                    out.push(&v);
                }
                if let Some(f) = fields.get_mut(ci) {
                    f.data_type = t;
                }
                columns.push(out);
            }
            Ok(Batch { fields, columns })
        }
        Node::Sort { input, keys } => {
            let b = run(input, inputs)?;
            let n = b.num_rows();
            let kv: Vec<Vec<Value>> = (0..n)
                .map(|i| {
                    keys.iter()
                        .map(|(c, _)| {
                            b.columns
                                .get(*c)
                                .map(|col| col.get(i))
                                .unwrap_or(Value::Null)
                        })
                        .collect()
                })
                .collect();
            let mut idx: Vec<usize> = (0..n).collect();
            idx.sort_by(|&x, &y| {
                for (k, (_, asc)) in keys.iter().enumerate() {
                    let o = kv[x][k].total_cmp(&kv[y][k]);
                    let o = if *asc { o } else { o.reverse() };
                    if o != std::cmp::Ordering::Equal {
                        return o;
                    }
                }
                std::cmp::Ordering::Equal
            });
            Ok(b.take(&idx))
        }
        Node::Limit {
            input,
            limit,
            offset,
            partition,
        } => {
            let b = run(input, inputs)?;
            let n = b.num_rows();
            let lim = limit.unwrap_or(u64::MAX).min(n as u64) as usize;
            let off = (*offset).min(n as u64) as usize;
            let mut idx = Vec::new();
            let mut start = 0usize;
            while start < n {
                // one run of equal partition values (the whole batch when not partitioned)
                let mut end = start + 1;
                if partition.is_empty() {
                    end = n;
                } else {
                    while end < n
                        && partition.iter().all(|c| {
                            b.columns
                                .get(*c)
                                .is_some_and(|col| col.get(end) == col.get(start))
                        })
                    {
                        end += 1;
                    }
                }
                let from = start.saturating_add(off).min(end);
                let to = from.saturating_add(lim).min(end);
                idx.extend(from..to);
                start = end;
            }
            if idx.len() == n {
                return Ok(b);
            }
            Ok(b.take(&idx))
        }
    }
}
