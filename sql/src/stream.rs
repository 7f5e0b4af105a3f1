//! Streaming coordinator execution: a query whose coordinator part works batch by batch —
//! filters, projections and LIMIT/OFFSET over the rows of one fragment, and ORDER BY with a
//! LIMIT as a bounded top-k — runs as a [`RowPipeline`] over the fragment's batches as they
//! arrive, so the coordinator holds O(batch) rows (O(offset + limit) for a top-k), not the
//! whole result. Every other plan (aggregation merges, windows, FILL, a full sort...) is
//! finished over the gathered results by [`crate::finish_with`].

use crate::error::SqlError;
use crate::exec::{slice_batch, sort_batch};
use crate::expr::{eval, true_rows, PExpr};
use crate::memory::{batch_bytes, MemoryBudget, Reservation};
use crate::plan::{Node, QueryPlan};
use tidal_common::{Batch, Field};

/// Rows a top-k buffers before it sorts and cuts back to k (when k is smaller).
const TOPK_BUFFER_ROWS: usize = 4096;

/// The coordinator part of a streamable plan, fed one fragment batch at a time.
pub struct RowPipeline {
    fragment: u32,
    input_fields: Vec<Field>,
    /// Applied in order (the operator next to the fragment first).
    steps: Vec<Step>,
    fields: Vec<Field>,
}

enum Step {
    Filter(PExpr),
    Project(Vec<PExpr>, Vec<Field>),
    /// LIMIT/OFFSET over the whole result: rows still to skip, rows still to pass.
    Limit {
        skip: u64,
        left: Option<u64>,
    },
    /// ORDER BY + LIMIT: keeps the first `offset + limit` rows in sort order.
    TopK {
        keys: Vec<(usize, bool)>,
        k: u64,
        buf: Option<Batch>,
        held: Reservation,
    },
}

/// The pipeline of `plan` when its coordinator part can stream, with its buffers held
/// against `budget`; `None` when it needs the whole fragment result at once.
pub fn pipeline(plan: &QueryPlan, budget: &MemoryBudget) -> Result<Option<RowPipeline>, SqlError> {
    let [spec] = plan.fragments.as_slice() else {
        return Ok(None);
    };
    let mut chain: Vec<&Node> = Vec::new();
    let mut node = &plan.root;
    let (fragment, input_fields) = loop {
        match node {
            Node::Gather { fragment, fields } => break (*fragment, fields.clone()),
            Node::Filter { input, .. } | Node::Project { input, .. } | Node::Sort { input, .. } => {
                chain.push(node);
                node = input;
            }
            Node::Limit {
                input, partition, ..
            } if partition.is_empty() => {
                chain.push(node);
                node = input;
            }
            _ => return Ok(None),
        }
    };
    if fragment != spec.id {
        return Ok(None);
    }
    // Root first in `chain`; steps go leaf first. A Sort streams only as the top-k of the
    // LIMIT right above it.
    let mut steps = Vec::new();
    let mut i = chain.len();
    while i > 0 {
        i -= 1;
        match chain[i] {
            Node::Filter { pred, .. } => steps.push(Step::Filter(pred.clone())),
            Node::Project { exprs, fields, .. } => {
                steps.push(Step::Project(exprs.clone(), fields.clone()))
            }
            Node::Limit { limit, offset, .. } => steps.push(Step::Limit {
                skip: *offset,
                left: *limit,
            }),
            Node::Sort { keys, .. } => {
                let Some(Node::Limit {
                    limit: Some(limit),
                    offset,
                    ..
                }) = i.checked_sub(1).map(|p| chain[p])
                else {
                    return Ok(None);
                };
                steps.push(Step::TopK {
                    keys: keys.clone(),
                    k: offset.saturating_add(*limit),
                    buf: None,
                    held: budget.reserve(0, "the sort buffer")?,
                });
                // The LIMIT itself still applies (OFFSET) after the top-k.
            }
            _ => return Ok(None),
        }
    }
    Ok(Some(RowPipeline {
        fragment,
        input_fields,
        steps,
        fields: plan.fields.clone(),
    }))
}

impl RowPipeline {
    /// The fragment whose batches feed the pipeline.
    pub fn fragment(&self) -> u32 {
        self.fragment
    }

    /// The result columns.
    pub fn fields(&self) -> &[Field] {
        &self.fields
    }

    /// Whether the result is complete whatever else arrives (a LIMIT is reached): the caller
    /// stops reading the fragment.
    pub fn done(&self) -> bool {
        self.steps
            .iter()
            .any(|s| matches!(s, Step::Limit { left: Some(0), .. }))
    }

    /// Feeds one fragment batch; returns the result rows it completes (possibly none).
    pub fn push(&mut self, b: Batch) -> Result<Option<Batch>, SqlError> {
        if b.columns.len() != self.input_fields.len() {
            return Err(SqlError::Execution(format!(
                "fragment {} returned {} columns, expected {}",
                self.fragment,
                b.columns.len(),
                self.input_fields.len()
            )));
        }
        let b = Batch {
            fields: self.input_fields.clone(),
            columns: b.columns,
        };
        let out = push_from(&mut self.steps, 0, b)?;
        Ok(out.map(|b| self.named(b)))
    }

    /// At the end of the input: the rows the operators held back (a top-k's).
    pub fn finish(&mut self) -> Result<Vec<Batch>, SqlError> {
        let mut out = Vec::new();
        for i in 0..self.steps.len() {
            let held = match &mut self.steps[i] {
                Step::TopK { keys, k, buf, held } => match buf.take() {
                    None => None,
                    Some(b) => {
                        let b = top_k(b, keys, *k)?;
                        held.resize(0, "the sort buffer")?;
                        Some(b)
                    }
                },
                _ => None,
            };
            if let Some(b) = held {
                if let Some(b) = push_from(&mut self.steps, i + 1, b)? {
                    out.push(self.named(b));
                }
            }
        }
        Ok(out)
    }

    fn named(&self, mut b: Batch) -> Batch {
        if b.fields.len() == self.fields.len() {
            b.fields = self.fields.clone();
        }
        b
    }
}

/// Runs `b` through `steps[from..]`.
fn push_from(steps: &mut [Step], from: usize, b: Batch) -> Result<Option<Batch>, SqlError> {
    let mut cur = b;
    for step in steps.iter_mut().skip(from) {
        if cur.num_rows() == 0 {
            return Ok(None);
        }
        cur = match step {
            Step::Filter(pred) => {
                let n = cur.num_rows();
                let keep = true_rows(&eval(pred, &cur.columns, n)?, n);
                if keep.len() == n {
                    cur
                } else {
                    cur.take(&keep)
                }
            }
            Step::Project(exprs, fields) => {
                let n = cur.num_rows();
                let columns = exprs
                    .iter()
                    .map(|e| eval(e, &cur.columns, n))
                    .collect::<Result<Vec<_>, _>>()?;
                Batch {
                    fields: fields.clone(),
                    columns,
                }
            }
            Step::Limit { skip, left } => {
                let n = cur.num_rows() as u64;
                let from = (*skip).min(n);
                *skip -= from;
                let take = left.unwrap_or(u64::MAX).min(n - from);
                if let Some(l) = left {
                    *l -= take;
                }
                if from == 0 && take == n {
                    cur
                } else {
                    slice_batch(&cur, from as usize, (from + take) as usize)
                }
            }
            Step::TopK { keys, k, buf, held } => {
                let mut all = match buf.take() {
                    None => cur,
                    Some(mut b) => {
                        b.append(&cur);
                        b
                    }
                };
                let limit = usize::try_from(*k).unwrap_or(usize::MAX);
                if all.num_rows() > limit.saturating_mul(2).max(TOPK_BUFFER_ROWS) {
                    all = top_k(all, keys, *k)?;
                }
                held.resize(batch_bytes(&all), "the sort buffer")?;
                *buf = Some(all);
                return Ok(None);
            }
        };
    }
    Ok((cur.num_rows() > 0).then_some(cur))
}

/// The first `k` rows of `b` in `keys` order.
/// The buffer it sorts is already held by the top-k's reservation (at most twice k rows, or
/// [`TOPK_BUFFER_ROWS`]), so the sort's own index is not accounted again.
fn top_k(b: Batch, keys: &[(usize, bool)], k: u64) -> Result<Batch, SqlError> {
    let sorted = sort_batch(b, keys, &MemoryBudget::unlimited())?;
    let n = sorted.num_rows();
    let k = usize::try_from(k).unwrap_or(usize::MAX).min(n);
    Ok(if k == n {
        sorted
    } else {
        slice_batch(&sorted, 0, k)
    })
}
