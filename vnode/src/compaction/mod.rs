//! Merging a window's STT staging files into its data files (when the window holds
//! `STT_TRIGGER` of them, or on `COMPACT DATABASE`).
//!
//! Owns: building the next version of one window's data files. Invariants: per subtable, the
//! result holds exactly the merged rows of the window's data blocks and STT files (newest copy of
//! each ts), in non-overlapping blocks of at most `MAXROWS` rows sorted by ts; subtables that no
//! longer exist are left out. An incremental merge appends to the window's `.data`/`.sma` and
//! keeps the blocks that end before the subtable's first new row (so in-order ingest rewrites at
//! most the subtable's last, small block); a full rewrite (`COMPACT`, or when garbage passes half
//! the file) writes new files and leaves no garbage. A subtable's merged rows under `MINROWS`
//! (its last, small block, which the next merge that touches it folds in) are encoded with the
//! quick effort unless the merge is a full rewrite, which encodes every block with the full
//! search. Nothing here is visible until the caller
//! commits the manifest naming the new head. Unless the data's last block is small (waiting to
//! be folded), a subtable's STT blocks, in ts order, move as they are (block and SMA bytes
//! copied, not decoded) while each is full, full width and clear of the data and of the next
//! block; the merge decodes only the blocks after the last one moved.
//!
//! DELETE runs through the same merge: rows of the listed subtables inside the deleted range
//! are left out of the result (the caller has flushed every row written before the DELETE
//! into the window's files, and holds the background lock so no later row can be among them).

use crate::block::{self, BlockLoc, ColumnCodec};
use crate::data_file::{BlockEntry, DataAppender, DataSet};
use crate::error::Result;
use crate::merge::{merge_runs, Run};
use crate::stt::ViewCache;
use crate::tsdb::Window;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use tidal_common::{Column, DataType, TableUid};

/// The column layout of a live subtable; `None` for a dropped one.
pub type LayoutOf<'a> = dyn Fn(TableUid) -> Option<(Vec<DataType>, Vec<ColumnCodec>)> + 'a;

pub struct MergeParams<'a> {
    pub dir: &'a Path,
    pub fid: i64,
    pub full_rewrite: bool,
    pub maxrows: usize,
    pub minrows: usize,
    pub layout_of: &'a LayoutOf<'a>,
    /// Rows to leave out (DELETE).
    pub delete: Option<&'a DeleteRange>,
}

/// `DELETE FROM ... WHERE ts BETWEEN ts_min AND ts_max` over some subtables.
#[derive(Debug, Clone)]
pub struct DeleteRange {
    pub uids: std::collections::HashSet<TableUid>,
    /// Inclusive.
    pub ts_min: i64,
    /// Inclusive.
    pub ts_max: i64,
}

impl DeleteRange {
    fn hits(&self, uid: TableUid, ts_min: i64, ts_max: i64) -> bool {
        self.uids.contains(&uid) && ts_min <= self.ts_max && ts_max >= self.ts_min
    }
}

#[derive(Default, Debug, Clone, Copy)]
pub struct MergeStats {
    pub rows_written: u64,
    pub blocks_written: u64,
    /// Rows left out because a DELETE covered them.
    pub rows_deleted: u64,
}

/// Builds the window's next data version from `window` (its data and all its STT files).
/// Returns `None` when nothing live is left in the window.
pub fn merge_window(
    p: &MergeParams<'_>,
    window: &Window,
    next_id: &mut u64,
) -> Result<(Option<DataSet>, MergeStats)> {
    let old = window.data.as_deref();
    let base = if p.full_rewrite { None } else { old };
    let new_data_id = *next_id;
    if base.is_none() {
        *next_id += 1;
    }
    let mut app = DataAppender::start(p.dir, p.fid, base, new_data_id)?;
    let mut garbage = base.map(|b| b.garbage_bytes).unwrap_or(0);
    let mut uids: BTreeSet<TableUid> = BTreeSet::new();
    if let Some(d) = old {
        uids.extend(d.index().keys().copied());
    }
    for s in &window.stts {
        uids.extend(s.uids());
    }
    let mut index: BTreeMap<TableUid, Vec<BlockEntry>> = BTreeMap::new();
    let mut stats = MergeStats::default();
    let maxrows = p.maxrows.max(1);
    // Subtables go by uid, as the STT files' shared blocks hold them: each shared block is
    // decoded once for all its subtables.
    let mut views: Vec<ViewCache> = window.stts.iter().map(|_| ViewCache::default()).collect();
    for uid in uids {
        let old_blocks: &[BlockEntry] = old.map(|d| d.blocks(uid)).unwrap_or(&[]);
        let Some((types, codecs)) = (p.layout_of)(uid) else {
            if base.is_some() {
                garbage += old_blocks.iter().map(|e| e.loc.len as u64).sum::<u64>();
            }
            continue;
        };
        let wanted: Vec<(usize, DataType)> = types.iter().copied().enumerate().collect();
        // The subtable's STT blocks, in ts order: (STT index, block).
        let mut blocks: Vec<(usize, BlockLoc)> = window
            .stts
            .iter()
            .enumerate()
            .flat_map(|(i, s)| s.blocks(uid).iter().map(move |b| (i, *b)))
            .collect();
        blocks.sort_by_key(|(_, b)| b.ts_min);
        let deleting = p.delete.filter(|d| {
            old_blocks
                .iter()
                .map(|e| (e.loc.ts_min, e.loc.ts_max))
                .chain(blocks.iter().map(|(_, b)| (b.ts_min, b.ts_max)))
                .any(|(lo, hi)| d.hits(uid, lo, hi))
        });
        // Fast path (in-order ingest): the subtable's STT blocks that do not overlap each
        // other or the window's data, are full width and not tiny, and need no small block of
        // the data folded into them, move with their SMA as they are (no decode, no encode);
        // only what follows the last of them (a flush's few newest rows, late rows) is merged.
        let mut moved: Option<Vec<BlockEntry>> = None;
        let mut merge_from = 0;
        if !p.full_rewrite && deleting.is_none() {
            if let Some((entries, n)) = move_blocks(
                p,
                window,
                &blocks,
                old_blocks,
                types.len(),
                &mut app,
                &mut stats,
            )? {
                if n == blocks.len() {
                    index.insert(uid, entries);
                    continue;
                }
                moved = Some(entries);
                merge_from = n;
            }
        }
        let mut runs = Vec::new();
        let mut new_min = i64::MAX;
        for (i, b) in blocks.get(merge_from..).unwrap_or(&[]) {
            new_min = new_min.min(b.ts_min);
            let cols = match (window.stts.get(*i), views.get_mut(*i)) {
                (Some(s), Some(cache)) => s.read_with(b, &wanted, cache)?,
                _ => continue,
            };
            runs.push(Run {
                prio: 1 + *i as u64,
                cols,
            });
        }
        if let Some(d) = deleting {
            new_min = new_min.min(d.ts_min);
        }
        if runs.is_empty() && !p.full_rewrite && deleting.is_none() {
            if !old_blocks.is_empty() {
                index.insert(uid, old_blocks.to_vec());
            }
            continue;
        }
        // With blocks moved, every data block ends before them: all are kept.
        let mut keep = if p.full_rewrite {
            0
        } else if moved.is_some() {
            old_blocks.len()
        } else {
            old_blocks.partition_point(|e| e.loc.ts_max < new_min)
        };
        // Fold a small last block into the rewrite so in-order ingest grows full blocks.
        if keep > 0
            && moved.is_none()
            && old_blocks
                .get(keep - 1)
                .is_some_and(|e| (e.loc.rows as usize) < p.minrows)
        {
            keep -= 1;
        }
        if let Some(d) = old {
            for e in old_blocks.get(keep..).unwrap_or(&[]) {
                runs.push(Run {
                    prio: 0,
                    cols: d.read(e, &wanted)?,
                });
                if base.is_some() {
                    garbage += e.loc.len as u64;
                }
            }
        }
        let mut merged = merge_runs(runs, || {
            types.iter().map(|t| Column::empty(*t, 0)).collect()
        });
        if let Some(d) = deleting {
            let (kept, gone) = cut_range(merged, d.ts_min, d.ts_max);
            merged = kept;
            stats.rows_deleted += gone as u64;
        }
        let n = merged.first().map(Column::len).unwrap_or(0);
        let mut entries: Vec<BlockEntry> = match moved {
            Some(entries) => entries,
            None => old_blocks.get(..keep).unwrap_or(&[]).to_vec(),
        };
        // A subtable's rows, under MINROWS, end its data in a block the next merge that
        // touches it folds in and encodes again; a full rewrite (COMPACT) keeps every block.
        let effort = block::effort_for(n, if p.full_rewrite { 0 } else { p.minrows });
        if n > 0 {
            let chunks = n.div_ceil(maxrows);
            let per = n.div_ceil(chunks);
            let mut s = 0;
            while s < n {
                let e = (s + per).min(n);
                let sliced: Vec<Column>;
                let part: &[Column] = if s == 0 && e == n {
                    &merged
                } else {
                    sliced = merged.iter().map(|c| c.slice(s, e)).collect();
                    &sliced
                };
                entries.push(app.add_block(part, &types, &codecs, effort, p.minrows)?);
                stats.rows_written += (e - s) as u64;
                s = e;
            }
        }
        if !entries.is_empty() {
            index.insert(uid, entries);
        }
    }
    stats.blocks_written = app.blocks_written;
    if index.is_empty() {
        // Nothing live: the appended bytes (if any) are garbage the manifest never references.
        return Ok((None, stats));
    }
    let head_id = *next_id;
    *next_id += 1;
    Ok((Some(app.finish(index, head_id, garbage)?), stats))
}

/// Removes the rows with `ts_min <= ts <= ts_max` from sorted columns (column 0 = ts);
/// returns what is left and how many rows were removed.
fn cut_range(cols: Vec<Column>, ts_min: i64, ts_max: i64) -> (Vec<Column>, usize) {
    let ts = match cols.first() {
        Some(c) => crate::block::ts_slice(c),
        None => return (cols, 0),
    };
    let a = ts.partition_point(|t| *t < ts_min);
    let b = ts.partition_point(|t| *t <= ts_max);
    if a >= b {
        return (cols, 0);
    }
    let n = ts.len();
    let out = cols
        .iter()
        .map(|c| {
            let mut head = c.slice(0, a);
            head.extend(&c.slice(b, n));
            head
        })
        .collect();
    (out, b - a)
}

/// The move-as-is path of [`merge_window`] for one subtable, given its STT blocks in ts
/// order: the data's blocks and, after them, the longest run of those STT blocks from the
/// first that can move as they are, appended raw, with the run's length (the blocks after it,
/// all later than those moved, are left to merge). `None` when no block can move.
///
/// A block moves when it is full width, holds at least `MINROWS` rows (or `MAXROWS`, if
/// smaller), starts after everything before it and ends before the next block starts (so
/// nothing left to merge overlaps it), and the data's last block is not a small one waiting
/// to be folded. Why a run and not all or nothing: a flush during a load often leaves each
/// subtable a full block in one STT file and a few rows in the next, and merging those rows
/// decoded and re-encoded the full block too (the bulk of a flush's CPU in the line-protocol
/// benchmark at 4,000 trucks).
fn move_blocks(
    p: &MergeParams<'_>,
    window: &Window,
    blocks: &[(usize, BlockLoc)],
    old_blocks: &[BlockEntry],
    width: usize,
    app: &mut DataAppender,
    stats: &mut MergeStats,
) -> Result<Option<(Vec<BlockEntry>, usize)>> {
    let last_old = old_blocks.last();
    if last_old.is_some_and(|e| (e.loc.rows as usize) < p.minrows) {
        return Ok(None);
    }
    let mut prev = last_old.map(|e| e.loc.ts_max).unwrap_or(i64::MIN);
    let mut movable = 0usize;
    for (k, (_, b)) in blocks.iter().enumerate() {
        let next_min = blocks.get(k + 1).map_or(i64::MAX, |(_, n)| n.ts_min);
        let ok = b.ts_min > prev
            && b.ts_max < next_min
            && b.ncols as usize == width
            && (b.rows as usize) >= p.minrows.min(p.maxrows);
        if !ok {
            break;
        }
        prev = b.ts_max;
        movable = k + 1;
    }
    if movable == 0 {
        return Ok(None);
    }
    let mut raws = Vec::with_capacity(movable);
    for (i, b) in blocks.iter().take(movable) {
        match window.stts.get(*i).map(|s| s.raw_block(b)).transpose()? {
            Some(Some(raw)) => raws.push((raw, *b)),
            _ => return Ok(None),
        }
    }
    let mut entries = old_blocks.to_vec();
    for ((block, sma), loc) in raws {
        entries.push(app.append_raw(&block, &sma, &loc)?);
        stats.rows_written += loc.rows as u64;
    }
    Ok(Some((entries, movable)))
}
