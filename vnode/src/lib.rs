//! `tidal-vnode`: the storage engine of one vgroup of one database.
//!
//! A [`Vnode`] owns the subtables whose `hash_table_name(db, table)` falls into its
//! [`HashRange`]: their catalog (STABLE schemas, subtables with tags, uids), a write-ahead log,
//! memtables, and per time window (`DURATION`) STT staging files and compressed column data
//! files with per-block SMA.
//!
//! Directory layout (one vnode):
//! ```text
//! <dir>/vnode.json                 configuration, written once at creation (atomic replace)
//! <dir>/wal/<seq:020>.log          WAL files (wal/FORMAT.md)
//! <dir>/meta/MANIFEST              committed file set + catalog snapshot + flushed WAL seq
//! <dir>/tsdb/f<fid>.<id>.stt       STT staging files, one per flush per window (tsdb/FORMAT.md)
//! <dir>/tsdb/f<fid>.<id>.data|.sma column blocks and their SMA of window fid (append-only)
//! <dir>/tsdb/f<fid>.<id>.head      per subtable block index of window fid (one per merge)
//! ```
//!
//! Write path: validate → one WAL record (group commit) → apply to the active memtable → ack.
//! When the active memtable passes `BUFFER` it is frozen (the WAL rotates) and a background
//! worker writes it as STT files and commits a manifest; a writer that finds the active memtable
//! full while a frozen one is still being written waits (back-pressure). When a window holds
//! `STT_TRIGGER` STT files the worker merges them into the window's data files.
//!
//! Invariants:
//! - Every mutation (write, create, drop, schema change) is validated completely, then becomes
//!   ONE WAL record, then is applied to memory; nothing is applied on a validation error.
//! - Mutations are serialised by the commit lock, so WAL order == apply order; fsyncs are shared
//!   by concurrent callers (group commit, see `wal`).
//! - An acknowledged mutation with wal_level 2 has been fsynced to the WAL before `Ok` is
//!   returned; with wal_level 1 it has been `write()`n (and a background thread fsyncs the WAL
//!   every `wal_fsync_period_ms` if that is > 0).
//! - State on disk = manifest (files + catalog up to `flushed_seq`) + WAL records after
//!   `flushed_seq`. Reopen reconstructs exactly the acknowledged state.
//! - File-set changes (flush, merge, compact, retention) are serialised by the background lock
//!   and published as a new immutable `FileSet`; readers keep the snapshot they started with and
//!   a replaced file is deleted when the last snapshot using it is dropped.
//! - Mutations are visible to readers once applied, which happens just before the group fsync
//!   (as in TDengine); a failed fsync poisons the vnode and the caller gets an error.

mod block;
mod cache;
mod codec;
pub mod column_cache;
mod compaction;
mod data_file;
mod distribution;
mod error;
mod flush;
mod fsutil;
#[doc(hidden)]
pub mod fuzzing;
mod manifest;
mod memtable;
mod merge;
mod meta;
mod op;
mod stt;
mod tsdb;
mod wal;

#[cfg(test)]
mod block_tests;
#[cfg(test)]
mod tests;

pub use block::{ColStats, SmaVal};
pub use distribution::TableDistribution;
pub use error::VnodeError;

use crate::cache::{CacheModel, Entry, LastRowCache};
use crate::error::Result;
use crate::flush::Frozen;
use crate::memtable::Memtable;
use crate::merge::{merge_runs, Run};
use crate::meta::{Meta, StableId};
use crate::op::{ApplyRef, BlockRef, Op};
use crate::tsdb::{FileSet, Window};
use crate::wal::Wal;
use parking_lot::{Condvar, Mutex, RwLock};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tidal_common::near::NearCursor;
use tidal_common::{
    hash_table_name, Column, ColumnData, DataType, DbOptions, HashRange, RowBlock, RowBlockParts,
    StableSchema, StableTables, TableMeta, TableUid, Tags, Value, VgroupId, WriteBatch,
};

const CONFIG_FILE: &str = "vnode.json";
const MANIFEST_FILE: &str = "MANIFEST";
const MIB: u64 = 1024 * 1024;
/// A merge rewrites a window into new files once replaced blocks make up this share of it.
const GARBAGE_REWRITE_RATIO: f64 = 0.5;
/// How often the worker checks retention (KEEP) when it has nothing else to do.
const RETENTION_CHECK_MS: u64 = 60_000;
/// Subtables a flush folds into the last-row cache per hold of the state lock: about 1 µs
/// each (a few cache misses), so a hold stays near 4 ms. Tests fold a few at a time.
const FLUSH_FOLD_TABLES: usize = if cfg!(test) { 4 } else { 4096 };

/// Identity and options of one vnode; persisted in `vnode.json` at creation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VnodeConfig {
    pub vgroup: VgroupId,
    pub db: String,
    pub range: HashRange,
    pub options: DbOptions,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteOutcome {
    pub rows: u64,
    pub tables_created: u32,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VnodeStats {
    pub tables: u64,
    /// Rows acknowledged since open.
    pub rows_written: u64,
    pub mem_bytes: u64,
    /// Bytes of the WAL files on disk now (shrinks when a flush trims the WAL).
    pub wal_bytes: u64,
    /// WAL record bytes written since open (a counter) and the latency of each WAL fsync.
    pub wal_bytes_written: u64,
    pub wal_fsync: tidal_common::HistogramSnapshot,
    /// Bytes of the committed files (STT, data, sma, head) plus the manifest.
    pub disk_bytes: u64,
    pub stt_files: u64,
    pub windows: u64,
    pub flushes: u64,
    pub merges: u64,
    /// DELETE statements applied and the rows they removed.
    pub deletes: u64,
    pub rows_deleted: u64,
    /// Writers that waited for a flush (back-pressure).
    pub write_stalls: u64,
    /// Bytes written and time spent by flushes (STT files) and merges (data + sma + head).
    pub flush_bytes: u64,
    pub flush_micros: u64,
    pub merge_bytes: u64,
    pub merge_micros: u64,
    pub cache_entries: u64,
    pub cache_bytes: u64,
    pub cache_hits: u64,
    pub cache_misses: u64,
}

/// One piece of a subtable's rows over a time range, for aggregation: either decoded rows or,
/// for a data block that lies wholly inside the range and that no newer row overlaps, just its
/// statistics (see [`Vnode::scan_pieces`]).
#[derive(Debug, Clone)]
pub enum ScanPiece {
    Rows(Vec<Column>),
    Sma {
        rows: u32,
        ts_min: i64,
        ts_max: i64,
        /// One per requested column.
        stats: Vec<ColStats>,
    },
}

/// Everything readers see; mutated only by holders of the commit lock (memtable, catalog) or
/// the background lock (file set).
struct State {
    /// Shared with the frozen memtable's and the last flush's snapshots (`Frozen::meta`,
    /// `flushed_meta`) until the catalog next changes (`Arc::make_mut`): a freeze used to
    /// copy the whole catalog, tens of MB per vnode with 100,000s of subtables, and the
    /// flushed snapshot kept that copy beside the live one.
    meta: Arc<Meta>,
    mem: Memtable,
    frozen: Option<Arc<Frozen>>,
    files: Arc<FileSet>,
    flushed_seq: u64,
    /// The catalog as of `flushed_seq` (what the manifest stores).
    flushed_meta: Arc<Meta>,
    next_file_id: u64,
    /// The last background failure; writers waiting for a flush return it.
    bg_error: Option<String>,
    cache: LastRowCache,
}

impl State {
    /// Applies `a`, taking its creates (the catalog keeps them: no copy of every new
    /// subtable's name and tags).
    fn apply(&mut self, a: &mut ApplyRef<'_>) {
        for s in &a.schemas {
            // Most writes carry the schema the catalog has: no copy of a shared catalog then.
            if self.meta.schema_is_newer(s) {
                Arc::make_mut(&mut self.meta).put_schema(s);
            }
        }
        for t in std::mem::take(&mut a.creates) {
            Arc::make_mut(&mut self.meta).insert_table(t);
        }
        for (uid, cols) in &a.rows {
            if self.meta.has_uid(*uid) {
                self.mem.insert(*uid, cols);
            }
        }
        for b in std::mem::take(&mut a.blocks) {
            self.apply_block(&b.uids, b.runs, b.columns);
        }
    }

    /// Inserts a row block (its runs stay in write order, so a later run's row replaces an
    /// earlier one with the same ts). Writes leave the last-row cache alone: a read folds the
    /// memtables into what it finds there (`cache/mod.rs`).
    fn apply_block(&mut self, uids: &[TableUid], runs: &[(u32, u32)], cols: Vec<Column>) {
        // Checked once per subtable, not per run (a subtable has several runs in a block).
        let live: Vec<bool> = uids.iter().map(|u| self.meta.has_uid(*u)).collect();
        let uid_of = |i: u32| {
            let i = i as usize;
            live.get(i).copied().unwrap_or(false).then(|| uids[i])
        };
        self.mem.insert_block_owned(runs, cols, uid_of);
    }

    /// Folds the rows of `uid` in the memtables (frozen, then active: the later write wins an
    /// equal ts) into a cache entry, which covers the files only; with `row_only`, just the
    /// last rows, and the entry's LAST values are dropped as no longer known.
    fn fold_memtables(&self, uid: TableUid, e: &mut Entry, row_only: bool) {
        if row_only {
            e.values_loaded = false;
            e.values.clear();
        }
        if let Some(f) = &self.frozen {
            f.mem.fold_into(uid, e, row_only);
        }
        self.mem.fold_into(uid, e, row_only);
    }

    /// Whether an entry of `uid` loaded while the file set was `files` may be cached: the
    /// files have not changed since (a flush's rows may otherwise have left the memtables
    /// after the load read them and before an entry was there to fold them into) and the
    /// subtable still exists.
    fn covers(&self, files: &Arc<FileSet>, uid: TableUid) -> bool {
        Arc::ptr_eq(&self.files, files) && self.meta.has_uid(uid)
    }

    /// Folds subtables `uids` of a memtable that is about to be published as files into the
    /// cache (one chunk per hold of the state lock, all before the swap), so that every entry
    /// still covers every row in the files once the swap lands. A subtable without an entry
    /// gets one when the memtable's newest row is newer than `files_max` (a bound of every ts
    /// in the files before this flush): its LAST_ROW, and its LAST values when all of its rows
    /// are newer and the values are complete (or it has no other rows).
    fn fold_flushed(&mut self, mem: &Memtable, uids: &[TableUid], files_max: Option<i64>) {
        if !self.cache.model.any() {
            return;
        }
        for &uid in uids {
            if self.cache.fold(uid, |e| mem.fold_into(uid, e, false)) {
                continue;
            }
            if !self.cache.fills() {
                continue;
            }
            let Some((first, last)) = mem.ts_bounds(uid) else {
                continue;
            };
            // The memtable's last row is the subtable's once every row in the files is older
            // than it; its LAST values only once every row of it is (a live feed's flush
            // often carries a few late rows, which must not keep its subtables uncached).
            let all_newer = files_max.is_none_or(|m| m < first);
            let last_newer = files_max.is_none_or(|m| m < last);
            if !(all_newer || (last_newer && self.cache.model.last_row)) {
                continue;
            }
            let mut e = Entry {
                row: None,
                values: Vec::new(),
                values_loaded: all_newer && self.cache.model.last_value,
            };
            let row_only = !e.values_loaded;
            mem.fold_into(uid, &mut e, row_only);
            if e.values_loaded {
                let width = schema_of(self, uid).map_or(0, |s| s.columns.len());
                e.values.resize(e.values.len().max(width), None);
                let complete = e.values.iter().skip(1).all(Option::is_some);
                if !(complete || files_max.is_none()) || e.values.len() != width {
                    e.values_loaded = false;
                    e.values.clear();
                }
            }
            let _ = self.cache.insert_if_room(uid, e);
        }
    }

    fn drop_table(&mut self, name: &str) -> bool {
        match Arc::make_mut(&mut self.meta).remove_table(name) {
            Some(t) => {
                self.mem.remove_table(t.uid);
                self.cache.remove(t.uid);
                true
            }
            None => false,
        }
    }

    fn drop_stable(&mut self, stable: &str) -> u32 {
        let names = self.meta.tables_of(stable);
        for n in &names {
            self.drop_table(n);
        }
        Arc::make_mut(&mut self.meta).remove_stable(stable);
        names.len() as u32
    }

    fn apply_op(&mut self, op: Op) {
        match op {
            Op::Apply {
                schemas,
                creates,
                rows,
                mut blocks,
            } => {
                let mut a = ApplyRef {
                    schemas: schemas.iter().collect(),
                    creates,
                    rows: rows.iter().map(|(u, c)| (*u, c.as_slice())).collect(),
                    blocks: blocks
                        .iter_mut()
                        .map(|b| BlockRef {
                            uids: std::mem::take(&mut b.uids),
                            runs: &b.runs,
                            columns: std::mem::take(&mut b.columns),
                        })
                        .collect(),
                };
                self.apply(&mut a);
            }
            Op::DropTable { name } => {
                self.drop_table(&name);
            }
            Op::DropStable { name } => {
                self.drop_stable(&name);
            }
            Op::SetTags { name, tags } => {
                // Records follow each other as they were applied, so the table exists; a
                // missing one would mean a damaged log that the checksums let through, and the
                // rest of the log is still worth replaying.
                Arc::make_mut(&mut self.meta).set_tags(&name, &tags);
            }
        }
    }
}

/// Rows per subtable, on average, that a window's files must hold for these subtables before
/// a newest-first search splits the window (see [`newest_first_ranges`]): below it a window
/// is a block or two per subtable, read whole at little cost, and every extra range is one
/// more pass over the subtables (a fleet-wide search asks about a hundred thousand).
const SEARCH_SPLIT_ROWS_PER_TABLE: u64 = 1024;

/// Ranges a newest-first search splits a dense window into, at most.
const SEARCH_SPLIT_RANGES_MAX: u32 = 6;

/// The (oldest, newest) ts of the rows of `uids` in window `w`'s files, when they hold at
/// least [`SEARCH_SPLIT_ROWS_PER_TABLE`] rows per subtable; `None` otherwise (or for a
/// damaged window, which is read whole and fails as such).
fn dense_extent(w: &tsdb::Window, uids: &[TableUid]) -> Option<(i64, i64)> {
    if w.damaged.is_some() || uids.is_empty() {
        return None;
    }
    let (mut lo, mut hi, mut rows) = (i64::MAX, i64::MIN, 0u64);
    let mut note = |b: &block::BlockLoc| {
        lo = lo.min(b.ts_min);
        hi = hi.max(b.ts_max);
        rows += u64::from(b.rows);
    };
    for uid in uids {
        if let Some(d) = &w.data {
            d.blocks(*uid).iter().for_each(|e| note(&e.loc));
        }
        for stt in &w.stts {
            stt.blocks(*uid).iter().for_each(&mut note);
        }
    }
    (rows >= SEARCH_SPLIT_ROWS_PER_TABLE.saturating_mul(uids.len() as u64) && lo < hi)
        .then_some((lo, hi))
}

/// Splits window `lo..=hi`, whose file rows span `extent`, into ranges for a newest-first
/// search, appended to `out` newest first: the newest 1/32 of the extent (and whatever is
/// newer: memtable rows), then ranges twice as long each time, the last one down to `lo`.
/// They cover the window without gap or overlap, so a search that stops at the first range
/// holding a match still finds the latest one.
///
/// Why: a LAST_ROW whose filter the newest rows fail (TSBS's low-fuel: fuel at 10% or less)
/// mostly finds its row in the last hours of a dense window of days, yet searched the window
/// whole, copying and filtering every row of it; with ranges it stops after a few of them.
/// Blocks that straddle two ranges are decoded once (the decoded-column cache) and only the
/// rows in range are copied.
fn newest_first_ranges(lo: i64, hi: i64, extent: (i64, i64), out: &mut Vec<(i64, i64)>) {
    let step0 = (extent.1.saturating_sub(extent.0) / 32).max(1);
    let mut top = hi;
    let mut cut = extent.1.saturating_sub(step0);
    let mut step = step0;
    for k in 1..=SEARCH_SPLIT_RANGES_MAX {
        let bottom = if k == SEARCH_SPLIT_RANGES_MAX || cut < lo || cut >= top {
            lo
        } else {
            cut.saturating_add(1)
        };
        out.push((bottom, top));
        if bottom <= lo {
            return;
        }
        top = bottom - 1;
        step = step.saturating_mul(2);
        cut = cut.saturating_sub(step);
    }
}

#[cfg(test)]
mod search_range_tests {
    use super::newest_first_ranges;

    /// The ranges cover the window exactly, newest first, at most SEARCH_SPLIT_RANGES_MAX of
    /// them, the newest one short when the extent fills the window; extents at the window's
    /// edges and tiny ones too.
    #[test]
    fn ranges_cover_the_window_newest_first_and_grow() {
        let cases = [
            (0, 86_399_999, (0, 86_390_000)),
            (0, 863_999_999, (3_600_000, 86_390_000)),
            (-100, 100, (-100, 100)),
            (0, 10, (4, 5)),
            (i64::MIN, i64::MAX, (i64::MIN, i64::MAX)),
            (i64::MIN, i64::MAX, (-5, 5)),
        ];
        for (lo, hi, extent) in cases {
            let mut out = Vec::new();
            newest_first_ranges(lo, hi, extent, &mut out);
            assert!(!out.is_empty() && out.len() <= super::SEARCH_SPLIT_RANGES_MAX as usize);
            assert_eq!(out[0].1, hi, "{out:?}");
            assert_eq!(out[out.len() - 1].0, lo, "{out:?}");
            for w in out.windows(2) {
                assert_eq!(w[1].1.checked_add(1), Some(w[0].0), "{out:?}");
            }
            for r in &out {
                assert!(r.0 <= r.1, "{out:?}");
            }
        }
        let mut day = Vec::new();
        newest_first_ranges(0, 86_399_999, (0, 86_390_000), &mut day);
        assert_eq!(
            day.len(),
            super::SEARCH_SPLIT_RANGES_MAX as usize,
            "{day:?}"
        );
        assert!(day[0].0 > 86_390_000 - 86_400_000 / 16, "{day:?}");
    }
}

/// The newest memtable row of `uid`: its ts, and the columns and index holding it (the
/// active memtable's wins an equal ts over the frozen one's).
fn mem_last_row<'m>(
    active: &'m Memtable,
    frozen: Option<&'m Memtable>,
    uid: TableUid,
) -> Option<(i64, &'m [Column], usize)> {
    let mut newest: Option<(i64, &[Column], usize)> = None;
    for m in [frozen, Some(active)].into_iter().flatten() {
        if let Some(v) = m.last_row_view(uid) {
            if newest.is_none_or(|n| v.0 >= n.0) {
                newest = Some(v);
            }
        }
    }
    newest
}

/// A row-only cache entry: row `i` of `cols`, at ts `t`.
fn row_entry(t: i64, cols: &[Column], i: usize) -> Entry {
    Entry {
        row: Some((t, cols.iter().map(|c| c.get(i)).collect())),
        values: Vec::new(),
        values_loaded: false,
    }
}

/// The greatest ts of subtable `uid`'s rows: from the block indexes of the newest window that
/// has any of its blocks and from the memtables' map entries, reading no block. `Some(None)`:
/// it has no rows; `None`: unknown (a damaged window at or after its newest rows).
fn newest_ts(st: &State, uid: TableUid) -> Option<Option<i64>> {
    let mut best: Option<i64> = None;
    for w in st.files.windows.values().rev() {
        if w.damaged.is_some() {
            return None;
        }
        let in_files = w
            .stts
            .iter()
            .flat_map(|s| s.blocks(uid).iter().map(|b| b.ts_max))
            .chain(
                w.data
                    .iter()
                    .flat_map(|d| d.blocks(uid).iter().map(|e| e.loc.ts_max)),
            )
            .max();
        if in_files.is_some() {
            // Windows are disjoint in time: older ones hold only older rows.
            best = in_files;
            break;
        }
    }
    if let Some((t, ..)) = mem_last_row(&st.mem, st.frozen.as_ref().map(|f| &f.mem), uid) {
        best = Some(best.map_or(t, |b| b.max(t)));
    }
    Some(best)
}

/// A vnode: the engine plus its background worker (stopped and joined on drop).
pub struct Vnode {
    core: Arc<VnodeCore>,
    worker: Option<std::thread::JoinHandle<()>>,
}

impl std::ops::Deref for Vnode {
    type Target = VnodeCore;
    fn deref(&self) -> &VnodeCore {
        &self.core
    }
}

impl Drop for Vnode {
    fn drop(&mut self) {
        {
            let mut s = self.core.signal.lock();
            s.stop = true;
        }
        self.core.signal_cv.notify_all();
        if let Some(h) = self.worker.take() {
            let _ = h.join();
        }
    }
}

/// The options ALTER DATABASE changes without reopening the vnode.
#[derive(Clone, Copy, Debug)]
struct LiveOptions {
    keep_minutes: u64,
    stt_trigger: u32,
    minrows: u32,
}

#[derive(Default)]
struct Signal {
    stop: bool,
    /// Work was handed to the worker (a freeze).
    pending: bool,
}

/// The engine shared by the [`Vnode`] handle and its background worker.
pub struct VnodeCore {
    dir: PathBuf,
    cfg: VnodeConfig,
    /// Serialises mutations: validate + WAL append + apply, and freezes. Holds where recent
    /// writes' runs of subtables left off in the catalog's name index: the next write's
    /// subtables are looked for just after those places first ([`Meta::lookup_near`]).
    commit: Mutex<NearCursor>,
    /// Serialises file-set changes: flush, merge, compact, retention.
    bg: Mutex<()>,
    state: RwLock<State>,
    /// The latest [`StableTables`] of each STABLE queried, rebuilt when its version moves.
    stable_tables: Mutex<HashMap<String, Arc<StableTables>>>,
    /// Notified whenever a frozen memtable has been flushed (or failed to).
    flushed_cv: Condvar,
    flushed_lock: Mutex<()>,
    signal: Mutex<Signal>,
    signal_cv: Condvar,
    wal: Arc<Wal>,
    rows_written: AtomicU64,
    flushes: AtomicU64,
    merges: AtomicU64,
    deletes: AtomicU64,
    rows_deleted: AtomicU64,
    write_stalls: AtomicU64,
    flush_bytes: AtomicU64,
    flush_micros: AtomicU64,
    merge_bytes: AtomicU64,
    merge_micros: AtomicU64,
    /// BUFFER in bytes (ALTER DATABASE changes it live).
    buffer_bytes_max: AtomicU64,
    /// Options ALTER DATABASE changes live (the rest of `cfg` is fixed at creation).
    live: RwLock<LiveOptions>,
    options_now: RwLock<DbOptions>,
    /// ts units per window (DURATION in the database precision).
    window_units: i64,
    comp: u8,
    /// wal_level 2: starts each record's group write and fsync while its writer applies it;
    /// wal_level 1 with wal_fsync_period_ms > 0: fsyncs the WAL periodically. Stopped on drop.
    committer: Option<wal::Committer>,
}

fn physical_name(d: &ColumnData) -> &'static str {
    match d {
        ColumnData::Bool(_) => "BOOL values",
        ColumnData::Int(_) => "signed integer values",
        ColumnData::UInt(_) => "unsigned integer values",
        ColumnData::Float(_) => "floating point values",
        ColumnData::Str(_) => "string values",
        ColumnData::Timestamp(_) => "TIMESTAMP values",
    }
}

fn physical_matches(d: &ColumnData, t: DataType) -> bool {
    use tidal_common::types::PhysicalType as P;
    matches!(
        (d, t.physical()),
        (ColumnData::Bool(_), P::Bool)
            | (ColumnData::Int(_), P::Int)
            | (ColumnData::UInt(_), P::UInt)
            | (ColumnData::Float(_), P::Float)
            | (ColumnData::Str(_), P::Str)
            | (ColumnData::Timestamp(_), P::Timestamp)
    )
}

fn check_columns(table: &str, schema: &StableSchema, cols: &[Column]) -> Result<()> {
    if cols.len() != schema.columns.len() {
        return Err(VnodeError::SchemaMismatch {
            table: table.to_string(),
            reason: format!(
                "STABLE '{}' (version {}) has {} columns but the write has {}",
                schema.name,
                schema.version,
                schema.columns.len(),
                cols.len()
            ),
        });
    }
    let rows = cols.first().map(Column::len).unwrap_or(0);
    for (c, def) in cols.iter().zip(&schema.columns) {
        if !physical_matches(&c.data, def.data_type) {
            return Err(VnodeError::TypeMismatch {
                table: table.to_string(),
                column: def.name.clone(),
                expected: def.data_type.to_string(),
                got: physical_name(&c.data).to_string(),
            });
        }
        if c.len() != rows {
            return Err(VnodeError::SchemaMismatch {
                table: table.to_string(),
                reason: format!(
                    "column '{}' has {} values but column '{}' has {rows}",
                    def.name,
                    c.len(),
                    schema
                        .columns
                        .first()
                        .map(|d| d.name.as_str())
                        .unwrap_or("ts"),
                ),
            });
        }
        if !c.nulls.is_empty() && c.nulls.len() != c.len() {
            return Err(VnodeError::SchemaMismatch {
                table: table.to_string(),
                reason: format!(
                    "column '{}' has {} values but a null mask of {}",
                    def.name,
                    c.len(),
                    c.nulls.len()
                ),
            });
        }
    }
    if let (Some(ts), Some(def)) = (cols.first(), schema.columns.first()) {
        if let Some(row) = ts.nulls.iter().position(|n| *n) {
            return Err(VnodeError::InvalidArgument(format!(
                "table '{table}': timestamp column '{}' is NULL in row {row}",
                def.name
            )));
        }
    }
    Ok(())
}

/// The subtable of row `row` of a block with these runs.
fn table_of_row(runs: &[(u32, u32)], row: usize) -> Option<usize> {
    let mut end = 0usize;
    for (t, n) in runs {
        end += *n as usize;
        if row < end {
            return Some(*t as usize);
        }
    }
    None
}

/// A request's row block inside the vnode, taken apart (names and runs read in place).
struct BlockIn {
    parts: RowBlockParts,
}

impl BlockIn {
    fn new(b: RowBlock) -> BlockIn {
        BlockIn {
            parts: b.into_parts(),
        }
    }

    fn stable(&self) -> &str {
        &self.parts.stable
    }

    fn num_tables(&self) -> usize {
        self.parts.ends.len()
    }

    /// Subtable `i`'s name ("" if out of range; `RowBlock` checked the bounds).
    fn table(&self, i: usize) -> &str {
        let p = &self.parts;
        let start = match i {
            0 => 0,
            _ => p.ends.get(i - 1).copied().unwrap_or(0) as usize,
        };
        let end = p.ends.get(i).copied().unwrap_or(0) as usize;
        p.names.get(start..end).unwrap_or("")
    }

    fn runs(&self) -> &[(u32, u32)] {
        &self.parts.runs
    }
}

/// What a write takes out of a block before planning it (the plan borrows the rest: names
/// and runs): a new subtable's tags move into the catalog, and the columns to the memtable,
/// which may keep the vectors as they are.
struct TakenParts {
    tags: Vec<Option<Tags>>,
    columns: Vec<Column>,
}

/// A new subtable's tag values, as a write carries them.
enum TagValues<'t> {
    /// A batch's that its caller keeps: copied.
    Borrowed(&'t [Value]),
    /// A decoded block's, taken out of it: when nothing else holds them (a block read off the
    /// wire holds the only reference) coerced where they are and kept as the subtable's, so
    /// that neither the values nor their strings are allocated again and the block's copy
    /// freed per new subtable (creating 200,000 subtables, copying the strings cost the data
    /// nodes 9% more CPU, most of it in fresh pages; the values' list, another 6%).
    Shared(Tags),
}

impl TagValues<'_> {
    /// The values as `schema` types its tags, or why they do not fit it.
    fn into_tags(self, schema: &StableSchema) -> std::result::Result<Tags, String> {
        let mut t = match self {
            TagValues::Borrowed(t) => return Ok(schema.coerce_tags(t.to_vec())?.into()),
            TagValues::Shared(t) => t,
        };
        if let Some(values) = Arc::get_mut(&mut t) {
            schema.coerce_tags_in_place(values)?;
            return Ok(t);
        }
        Ok(schema.coerce_tags(t.to_vec())?.into())
    }
}

/// Resolves the subtables of one write batch to uids, planning the creation of those that do
/// not exist yet (with their tags); nothing is changed until the plan is applied.
struct TablePlanner<'m, 'a> {
    meta: &'m Meta,
    /// Whether this vnode's hash range holds a table name. Asked only of tables that do not
    /// exist yet: every table in `meta` passed it when it was created (the range of a vnode
    /// never changes), and hashing every name of every write was 3% of a data node's CPU.
    owns: &'m dyn Fn(&str) -> Result<()>,
    creates: Vec<TableMeta>,
    /// Name -> index in `creates`.
    created: HashMap<&'a str, usize, foldhash::fast::RandomState>,
    next_uid: u64,
    cursor: &'m mut NearCursor,
}

impl<'m, 'a> TablePlanner<'m, 'a> {
    /// The uid of subtable `table` of STABLE `stable` (whose id in `meta` is `stable_id`,
    /// `None` if it has no subtable there yet), planning its creation with `tags` if it does
    /// not exist.
    fn uid_of(
        &mut self,
        table: &'a str,
        stable: &str,
        stable_id: Option<StableId>,
        tags: Option<TagValues<'_>>,
        schema: &StableSchema,
    ) -> Result<TableUid> {
        let mismatch = |owner: &str| VnodeError::SchemaMismatch {
            table: table.to_string(),
            reason: format!("the table belongs to STABLE '{owner}', the write names '{stable}'"),
        };
        // A subtable sent with tags is most likely new: a probe settles it at once, where a
        // look around the cursor first would scan its windows in vain (it has no place
        // among the existing subtables' runs yet).
        let found = match tags {
            Some(_) => self.meta.lookup(table),
            None => self.meta.lookup_near(table, self.cursor),
        };
        if let Some(slot) = found {
            if Some(slot.stable) != stable_id {
                return Err(mismatch(self.meta.stable_name(slot.stable)));
            }
            return Ok(slot.uid);
        }
        if let Some(t) = self.created.get(table).and_then(|i| self.creates.get(*i)) {
            if t.stable != stable {
                return Err(mismatch(&t.stable));
            }
            return Ok(t.uid);
        }
        (self.owns)(table)?;
        check_new_table_name(table)?;
        let Some(tags) = tags else {
            return Err(VnodeError::TableNotFound {
                table: table.to_string(),
            });
        };
        let tags = tags
            .into_tags(schema)
            .map_err(|reason| VnodeError::InvalidTags {
                table: table.to_string(),
                reason,
            })?;
        let uid = TableUid(self.next_uid);
        self.next_uid += 1;
        self.created.insert(table, self.creates.len());
        self.creates.push(TableMeta {
            uid,
            name: table.to_string(),
            stable: stable.to_string(),
            tags,
        });
        Ok(uid)
    }
}

/// A new subtable's name fits the `tbname` pseudo column (TDengine's limit).
fn check_new_table_name(table: &str) -> Result<()> {
    match tidal_common::schema::table_name_too_long(table) {
        Some(reason) => Err(VnodeError::InvalidArgument(reason)),
        None => Ok(()),
    }
}

/// Merges file runs with the frozen and active memtable rows (newest, so highest priority).
fn merge_with_memtables(
    mut runs: Vec<Run>,
    frozen: Option<Vec<Column>>,
    mem: Option<Vec<Column>>,
    wanted: &[(usize, DataType)],
) -> Vec<Column> {
    if let Some(cols) = frozen {
        runs.push(Run {
            prio: u64::MAX - 1,
            cols,
        });
    }
    if let Some(cols) = mem {
        runs.push(Run {
            prio: u64::MAX,
            cols,
        });
    }
    merge_runs(runs, || {
        wanted.iter().map(|(_, t)| Column::empty(*t, 0)).collect()
    })
}

/// Says from a block's row count and statistics whether it may hold a row passing a filter.
pub type MayMatch<'a> = dyn Fn(u32, &[ColStats]) -> bool + 'a;

/// Whether no row of `cols` (a data block's rows read for `wanted`) can pass a filter, by the
/// statistics of `stat_columns` over them, as an SMA record would say for the whole block;
/// `false` when a statistics column was not read.
fn fails_filter(
    cols: &[Column],
    wanted: &[(usize, DataType)],
    stat_columns: &[usize],
    may_match: &MayMatch<'_>,
) -> bool {
    let mut stats = Vec::with_capacity(stat_columns.len());
    for sc in stat_columns {
        match wanted.iter().position(|(ci, _)| ci == sc) {
            Some(p) => match cols.get(p) {
                Some(c) => stats.push(block::col_stats(c)),
                None => return false,
            },
            None => return false,
        }
    }
    let rows = cols.first().map_or(0, Column::len) as u32;
    !may_match(rows, &stats)
}

/// Calls of [`VnodeCore::scan_many`] answered without per-subtable work (the model test
/// asserts some were).
#[cfg(test)]
pub static SCAN_MANY_SHORT_CIRCUITS: AtomicU64 = AtomicU64::new(0);

/// [`VnodeCore::last_rows_columns`] over at most this many subtables moves their cache entries
/// to the front of the LRU order; a larger read (a fleet) leaves the order as it is.
const LAST_ROWS_PROMOTE_MAX: usize = 64;

/// Subtables whose memtable rows [`VnodeCore::scan_many`] copies under one state lock (writers
/// wait for it).
pub const SCAN_MANY_LOCK_TABLES: usize = 1024;

/// The STABLE schema of live subtable `uid`.
fn schema_of(st: &State, uid: TableUid) -> Result<&StableSchema> {
    let t = st
        .meta
        .table_by_uid(uid)
        .ok_or(VnodeError::TableUidNotFound { uid: uid.0 })?;
    st.meta
        .stables
        .get(&t.stable)
        .map(|s| &**s)
        .ok_or_else(|| VnodeError::StableNotFound {
            stable: t.stable.clone(),
            table: t.name.clone(),
        })
}

/// Flushes and merges run below the writers' priority (as RocksDB runs compactions): on a
/// small machine they then take the CPU writers leave idle instead of slowing acknowledged
/// writes. Back-pressure still bounds memory if they fall behind.
fn lower_priority() {
    // SAFETY: setpriority with who = 0 changes only the calling thread (Linux: a thread is a
    // task); no memory is shared with the call.
    #[cfg(target_os = "linux")]
    unsafe {
        let _ = libc::setpriority(libc::PRIO_PROCESS, 0, 5);
    }
}

impl Vnode {
    /// Creates the vnode directory if missing, or recovers: loads the manifest and the files it
    /// lists (a window whose files are damaged is kept aside, see `tsdb`), deletes orphans,
    /// replays the WAL after the manifest's `flushed_seq` (a torn tail is cut off; corruption
    /// elsewhere is [`VnodeError::Corruption`]). The configuration is persisted at creation;
    /// reopening uses the persisted one. Starts the background worker.
    pub fn open(dir: &Path, cfg: VnodeConfig) -> Result<Vnode, VnodeError> {
        let core = Arc::new(VnodeCore::open(dir, cfg)?);
        let c2 = core.clone();
        let worker = std::thread::Builder::new()
            .name("vnode-bg".into())
            .spawn(move || {
                lower_priority();
                c2.worker_loop()
            })
            .map_err(|e| VnodeError::io(dir, "start the background worker for", e))?;
        Ok(Vnode {
            core,
            worker: Some(worker),
        })
    }

    /// Deletes all files of the vnode (DROP DATABASE).
    pub fn destroy(self) -> Result<(), VnodeError> {
        let dir = self.core.dir.clone();
        drop(self);
        std::fs::remove_dir_all(&dir).map_err(|e| VnodeError::io(&dir, "remove", e))
    }
}

impl VnodeCore {
    fn open(dir: &Path, cfg: VnodeConfig) -> Result<VnodeCore, VnodeError> {
        fsutil::create_dir_all(dir)?;
        let cfg_path = dir.join(CONFIG_FILE);
        let cfg = if cfg_path.exists() {
            let bytes = fsutil::read_file(&cfg_path)?;
            let stored: VnodeConfig =
                serde_json::from_slice(&bytes).map_err(|e| VnodeError::Corruption {
                    file: cfg_path.clone(),
                    offset: 0,
                    reason: format!("invalid vnode config: {e}"),
                })?;
            if stored != cfg {
                tracing::warn!(dir = %dir.display(), "vnode reopened with a different config; using the persisted one");
            }
            stored
        } else {
            if cfg.range.begin > cfg.range.end {
                return Err(VnodeError::InvalidArgument(format!(
                    "empty hash range {}..={}",
                    cfg.range.begin, cfg.range.end
                )));
            }
            let json = serde_json::to_vec_pretty(&cfg)
                .map_err(|e| VnodeError::InvalidArgument(format!("config: {e}")))?;
            fsutil::write_atomic(&cfg_path, &json)?;
            cfg
        };
        let (wal_dir, meta_dir, tsdb_dir) = (dir.join("wal"), dir.join("meta"), dir.join("tsdb"));
        for d in [&wal_dir, &meta_dir, &tsdb_dir] {
            fsutil::create_dir_all(d)?;
        }
        fsutil::sync_dir(dir)?;

        let m = manifest::read(&meta_dir.join(MANIFEST_FILE))?;
        // Orphans: files of a flush or merge that crashed before its manifest commit.
        let live = FileSet::live_names(&m.windows);
        if let Ok(rd) = std::fs::read_dir(&tsdb_dir) {
            for ent in rd.flatten() {
                let name = ent.file_name().to_string_lossy().to_string();
                if !live.contains(&name) {
                    tracing::info!(file = %ent.path().display(), "deleting orphan file");
                    let _ = std::fs::remove_file(ent.path());
                }
            }
        }
        let files = FileSet::open(&tsdb_dir, &m.windows);
        let meta = Arc::new(m.meta);
        let flushed_meta = meta.clone();
        let mut state = State {
            meta,
            mem: Memtable::default(),
            frozen: None,
            files: Arc::new(files),
            flushed_seq: m.flushed_seq,
            flushed_meta,
            next_file_id: m.next_file_id,
            bg_error: None,
            cache: LastRowCache::new(
                CacheModel::parse(&cfg.options.cache_model),
                (cfg.options.cache_size_mb.max(1) as u64) * MIB,
            ),
        };
        let wal_files = wal::list_files(&wal_dir)?;
        let mut applied = m.flushed_seq;
        let last = wal::replay(&wal_files, |seq, payload, path, offset| {
            if seq <= state.flushed_seq {
                return Ok(());
            }
            if seq != applied + 1 {
                return Err(VnodeError::Corruption {
                    file: path.to_path_buf(),
                    offset,
                    reason: format!("WAL records {} to {} are missing", applied + 1, seq - 1),
                });
            }
            let op = op::decode(payload).map_err(|e| VnodeError::Corruption {
                file: path.to_path_buf(),
                offset: offset + (wal::FRAME_BYTES + e.offset) as u64,
                reason: format!("undecodable WAL record {seq}: {}", e.reason),
            })?;
            state.apply_op(op);
            applied = seq;
            Ok(())
        })?;
        let last_seq = last.max(state.flushed_seq);
        // After a graceful shutdown (memtables flushed) this is 0.
        tracing::info!(
            vnode = cfg.vgroup.0,
            db = %cfg.db,
            records = applied.saturating_sub(state.flushed_seq),
            "WAL replayed"
        );
        let wal = Arc::new(Wal::open(
            &wal_dir,
            cfg.options.wal_level,
            last_seq,
            wal_files,
        )?);
        let buffer_bytes_max = (cfg.options.buffer_mb.max(1) as u64) * MIB;
        let committer = if cfg.options.wal_level >= 2 {
            wal::Committer::on_kick(wal.clone())
        } else if cfg.options.wal_fsync_period_ms > 0 {
            wal::Committer::every(
                wal.clone(),
                std::time::Duration::from_millis(cfg.options.wal_fsync_period_ms as u64),
            )
        } else {
            None
        };
        let per_minute = cfg.options.precision.per_second().saturating_mul(60);
        let window_units = (cfg.options.duration_minutes.max(1) as i64).saturating_mul(per_minute);
        Ok(VnodeCore {
            dir: dir.to_path_buf(),
            comp: cfg.options.comp,
            window_units,
            cfg: cfg.clone(),
            commit: Mutex::new(NearCursor::default()),
            bg: Mutex::new(()),
            state: RwLock::new(state),
            stable_tables: Mutex::new(HashMap::new()),
            flushed_cv: Condvar::new(),
            flushed_lock: Mutex::new(()),
            signal: Mutex::new(Signal::default()),
            signal_cv: Condvar::new(),
            wal,
            rows_written: AtomicU64::new(0),
            flushes: AtomicU64::new(0),
            merges: AtomicU64::new(0),
            deletes: AtomicU64::new(0),
            rows_deleted: AtomicU64::new(0),
            write_stalls: AtomicU64::new(0),
            flush_bytes: AtomicU64::new(0),
            flush_micros: AtomicU64::new(0),
            merge_bytes: AtomicU64::new(0),
            merge_micros: AtomicU64::new(0),
            buffer_bytes_max: AtomicU64::new(buffer_bytes_max),
            options_now: RwLock::new(cfg.options.clone()),
            live: RwLock::new(LiveOptions {
                keep_minutes: cfg.options.keep_minutes,
                stt_trigger: cfg.options.stt_trigger,
                minrows: cfg.options.minrows,
            }),
            committer,
        })
    }

    pub fn config(&self) -> &VnodeConfig {
        &self.cfg
    }

    fn tsdb_dir(&self) -> PathBuf {
        self.dir.join("tsdb")
    }

    fn check_hash(&self, table: &str) -> Result<()> {
        let hash = hash_table_name(&self.cfg.db, table);
        if self.cfg.range.contains(hash) {
            Ok(())
        } else {
            Err(VnodeError::WrongVgroup {
                table: table.to_string(),
                hash,
                range: self.cfg.range,
            })
        }
    }

    /// Validates a whole batch against the catalog; returns the operation to log and apply.
    fn plan_write<'a>(
        &self,
        meta: &Meta,
        batch: &'a WriteBatch,
        blocks_in: &'a [BlockIn],
        taken: &mut [TakenParts],
        cursor: &mut NearCursor,
    ) -> Result<ApplyRef<'a>> {
        let mut newest: HashMap<&str, &'a StableSchema> = HashMap::new();
        for s in &batch.schemas {
            let e = newest.entry(s.name.as_str()).or_insert(s);
            if s.version > e.version {
                *e = s;
            }
        }
        let mut updates: HashMap<&str, &'a StableSchema> = HashMap::new();
        for (name, s) in newest {
            if meta.schema_is_news(s) {
                s.validate().map_err(VnodeError::InvalidArgument)?;
                updates.insert(name, s);
            }
        }
        let schema_of = |stable: &str, table: &str| -> Result<&StableSchema> {
            match updates.get(stable) {
                Some(s) => Ok(*s),
                None => meta.stables.get(stable).map(|s| &**s).ok_or_else(|| {
                    VnodeError::StableNotFound {
                        stable: stable.to_string(),
                        table: table.to_string(),
                    }
                }),
            }
        };
        let owns = |table: &str| self.check_hash(table);
        // Subtables sent with tags are the ones the sender thinks may be new: room for all.
        let tagged = batch.tables.iter().filter(|t| t.tags.is_some()).count()
            + taken
                .iter()
                .map(|b| b.tags.iter().filter(|t| t.is_some()).count())
                .sum::<usize>();
        let mut tables = TablePlanner {
            meta,
            owns: &owns,
            creates: Vec::with_capacity(tagged),
            created: HashMap::with_capacity_and_hasher(tagged, Default::default()),
            next_uid: meta.next_uid,
            cursor,
        };
        let mut rows = Vec::with_capacity(batch.tables.len());
        let oldest = self.oldest_writable_ts();
        for tw in &batch.tables {
            let schema = schema_of(&tw.stable, &tw.table)?;
            let uid = tables.uid_of(
                &tw.table,
                &tw.stable,
                meta.stable_id(&tw.stable),
                tw.tags.as_deref().map(TagValues::Borrowed),
                schema,
            )?;
            check_columns(&tw.table, schema, &tw.columns)?;
            if let Some(ts) = tw.columns.first().map(block::ts_slice) {
                if let Some(min) = ts.iter().min() {
                    if *min < oldest {
                        return Err(VnodeError::TimestampOutOfRange {
                            table: tw.table.clone(),
                            ts: *min,
                            keep_minutes: self.live.read().keep_minutes,
                        });
                    }
                }
            }
            if tw.num_rows() > 0 {
                rows.push((uid, tw.columns.as_slice()));
            }
        }
        let mut blocks = Vec::with_capacity(blocks_in.len());
        for (
            b,
            TakenParts {
                tags,
                columns: cols,
            },
        ) in blocks_in.iter().zip(taken)
        {
            // Errors about the block as a whole name its first subtable.
            let first = b.table(0);
            let schema = schema_of(b.stable(), first)?;
            let label = match b.num_tables() {
                0 | 1 => first.to_string(),
                n => format!("{first} (and {} more subtables)", n - 1),
            };
            check_columns(&label, schema, cols)?;
            let mut uids = Vec::with_capacity(b.num_tables());
            let stable_id = meta.stable_id(b.stable());
            for i in 0..b.num_tables() {
                let name = b.table(i);
                // Nothing reads a block's tags after planning.
                let t = tags
                    .get_mut(i)
                    .and_then(Option::take)
                    .map(TagValues::Shared);
                uids.push(tables.uid_of(name, b.stable(), stable_id, t, schema)?);
            }
            let ts = cols.first().map(block::ts_slice).unwrap_or(&[]);
            if let Some((at, min)) = ts.iter().enumerate().min_by_key(|(_, t)| **t) {
                if *min < oldest {
                    return Err(VnodeError::TimestampOutOfRange {
                        table: table_of_row(b.runs(), at)
                            .map(|t| b.table(t))
                            .unwrap_or(first)
                            .to_string(),
                        ts: *min,
                        keep_minutes: self.live.read().keep_minutes,
                    });
                }
            }
            if cols.first().is_some_and(|c| !c.is_empty()) {
                blocks.push(BlockRef {
                    uids,
                    runs: b.runs(),
                    columns: std::mem::take(cols),
                });
            }
        }
        let mut schemas: Vec<&'a StableSchema> = updates.into_values().collect();
        schemas.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(ApplyRef {
            schemas,
            creates: tables.creates,
            rows,
            blocks,
        })
    }

    /// Logs and applies one validated operation; returns its WAL seq. Caller holds the commit
    /// lock.
    /// Logs and applies `plan` (its creates are taken).
    fn commit_apply(&self, plan: &mut ApplyRef<'_>) -> Result<u64> {
        let payload = op::encode_apply_into(plan, self.wal.buffer());
        if payload.len() > wal::MAX_RECORD_BYTES as usize {
            return Err(VnodeError::InvalidArgument(format!(
                "the batch encodes to {} bytes, more than the {} bytes one WAL record may hold; split it",
                payload.len(),
                wal::MAX_RECORD_BYTES
            )));
        }
        let seq = self.wal.append(payload);
        // The record's group write and fsync run while its rows are applied.
        if let Some(c) = &self.committer {
            c.kick();
        }
        self.state.write().apply(plan);
        Ok(seq)
    }

    /// Back-pressure, with the commit lock held: when the active memtable is over `BUFFER`, it
    /// is frozen for the worker; if the previous frozen memtable is still being written, the
    /// writer waits for it first (so memory stays within about twice `BUFFER`).
    fn make_room(&self) -> Result<()> {
        if self.state.read().mem.bytes() <= self.buffer_bytes_max.load(Ordering::Relaxed) {
            return Ok(());
        }
        self.wait_no_frozen(true)?;
        self.freeze()
    }

    /// Waits (commit lock held) until no frozen memtable is pending. Fails with the flush's
    /// error if the worker could not write it.
    fn wait_no_frozen(&self, count_stall: bool) -> Result<()> {
        let mut stalled = false;
        loop {
            {
                let st = self.state.read();
                if st.frozen.is_none() {
                    return Ok(());
                }
                if let Some(e) = &st.bg_error {
                    return Err(VnodeError::Background { reason: e.clone() });
                }
            }
            if count_stall && !stalled {
                self.write_stalls.fetch_add(1, Ordering::Relaxed);
                stalled = true;
            }
            self.kick_worker();
            let mut g = self.flushed_lock.lock();
            if self.state.read().frozen.is_none() {
                return Ok(());
            }
            self.flushed_cv.wait_for(&mut g, Duration::from_millis(100));
        }
    }

    /// Freezes the active memtable (commit lock held, no frozen one pending) and hands it to
    /// the worker. A no-op when nothing was logged since the last flush.
    fn freeze(&self) -> Result<()> {
        let upto = self.wal.last_seq();
        if upto == self.state.read().flushed_seq {
            return Ok(());
        }
        self.wal.wait_durable(upto)?;
        // New mutations go to a new WAL file; the older ones become deletable once the
        // manifest of this flush is committed.
        self.wal.rotate()?;
        {
            let mut st = self.state.write();
            let mem = std::mem::take(&mut st.mem);
            let meta = st.meta.clone();
            st.frozen = Some(Arc::new(Frozen { mem, upto, meta }));
        }
        self.kick_worker();
        Ok(())
    }

    fn kick_worker(&self) {
        self.signal.lock().pending = true;
        self.signal_cv.notify_all();
    }

    /// Validates every table of the batch, appends one WAL record, applies it, waits for the
    /// group commit. All-or-nothing. (Copies the batch's row blocks; a server that owns the
    /// batch calls [`VnodeCore::write_owned`].)
    pub fn write(&self, batch: &WriteBatch) -> Result<WriteOutcome, VnodeError> {
        let blocks: Vec<BlockIn> = batch.blocks.iter().cloned().map(BlockIn::new).collect();
        self.write_blocks(batch, blocks)
    }

    /// [`VnodeCore::write`] of a batch the caller gives up: its row blocks' columns become
    /// memtable rows without a copy.
    pub fn write_owned(&self, mut batch: WriteBatch) -> Result<WriteOutcome, VnodeError> {
        let blocks: Vec<BlockIn> = std::mem::take(&mut batch.blocks)
            .into_iter()
            .map(BlockIn::new)
            .collect();
        self.write_blocks(&batch, blocks)
    }

    fn write_blocks(
        &self,
        batch: &WriteBatch,
        mut blocks: Vec<BlockIn>,
    ) -> Result<WriteOutcome, VnodeError> {
        if batch.db != self.cfg.db {
            return Err(VnodeError::WrongDatabase {
                expected: self.cfg.db.clone(),
                got: batch.db.clone(),
            });
        }
        let mut guard = self.commit.lock();
        self.wal.check_poisoned()?;
        self.make_room()?;
        let mut taken: Vec<TakenParts> = blocks
            .iter_mut()
            .map(|b| TakenParts {
                tags: std::mem::take(&mut b.parts.tags),
                columns: std::mem::take(&mut b.parts.columns),
            })
            .collect();
        let mut plan = {
            let st = self.state.read();
            self.plan_write(&st.meta, batch, &blocks, &mut taken, &mut guard)?
        };
        let outcome = WriteOutcome {
            rows: plan
                .rows
                .iter()
                .map(|(_, c)| c.first().map(Column::len).unwrap_or(0) as u64)
                .sum::<u64>()
                + plan
                    .blocks
                    .iter()
                    .map(|b| b.columns.first().map(Column::len).unwrap_or(0) as u64)
                    .sum::<u64>(),
            tables_created: plan.creates.len() as u32,
        };
        if plan.schemas.is_empty()
            && plan.creates.is_empty()
            && plan.rows.is_empty()
            && plan.blocks.is_empty()
        {
            return Ok(outcome);
        }
        let seq = self.commit_apply(&mut plan)?;
        {
            // Hand a full memtable to the worker now rather than at the next write, so a
            // quiet vnode does not sit on a full buffer.
            let st = self.state.read();
            let full = st.mem.bytes() > self.buffer_bytes_max.load(Ordering::Relaxed)
                && st.frozen.is_none();
            drop(st);
            if full {
                if let Err(e) = self.freeze() {
                    tracing::warn!(error = %e, "could not freeze a full memtable; the next write retries");
                }
            }
        }
        drop(guard);
        self.wal.wait_durable(seq)?;
        self.rows_written.fetch_add(outcome.rows, Ordering::Relaxed);
        Ok(outcome)
    }

    /// CREATE TABLE ... USING `schema` TAGS (...), durably. Existing tables are an error
    /// (TableExists) unless `if_not_exists`. Returns the number of tables created.
    pub fn create_tables(
        &self,
        schema: &StableSchema,
        tables: &[(String, Vec<Value>)],
        if_not_exists: bool,
    ) -> Result<u32, VnodeError> {
        schema.validate().map_err(VnodeError::InvalidArgument)?;
        let guard = self.commit.lock();
        self.wal.check_poisoned()?;
        let mut plan = {
            let st = self.state.read();
            let meta = &st.meta;
            let update = meta.schema_is_news(schema);
            let eff = match meta.stables.get(&schema.name) {
                Some(s) if !update => s,
                _ => schema,
            };
            let mut creates: Vec<TableMeta> = Vec::new();
            let mut seen: HashSet<&str> = HashSet::new();
            let mut next_uid = meta.next_uid;
            for (name, tags) in tables {
                self.check_hash(name)?;
                if meta.table(name).is_some() || seen.contains(name.as_str()) {
                    if if_not_exists {
                        continue;
                    }
                    return Err(VnodeError::TableExists {
                        table: name.clone(),
                    });
                }
                check_new_table_name(name)?;
                let tags =
                    eff.coerce_tags(tags.clone())
                        .map_err(|reason| VnodeError::InvalidTags {
                            table: name.clone(),
                            reason,
                        })?;
                seen.insert(name.as_str());
                creates.push(TableMeta {
                    uid: TableUid(next_uid),
                    name: name.clone(),
                    stable: schema.name.clone(),
                    tags: tags.into(),
                });
                next_uid += 1;
            }
            ApplyRef {
                schemas: if update { vec![schema] } else { Vec::new() },
                creates,
                rows: Vec::new(),
                blocks: Vec::new(),
            }
        };
        let n = plan.creates.len() as u32;
        if plan.schemas.is_empty() && plan.creates.is_empty() {
            return Ok(0);
        }
        let seq = self.commit_apply(&mut plan)?;
        drop(guard);
        self.wal.wait_durable(seq)?;
        Ok(n)
    }

    /// DROP TABLE: removes the table and (logically, at once; physically at the next merge)
    /// all its data, durably. `Ok(false)` if the table does not exist.
    pub fn drop_table(&self, name: &str) -> Result<bool, VnodeError> {
        let guard = self.commit.lock();
        self.wal.check_poisoned()?;
        if self.state.read().meta.table(name).is_none() {
            return Ok(false);
        }
        let seq = self.wal.append(op::encode_drop_table(name));
        self.state.write().drop_table(name);
        drop(guard);
        self.wal.wait_durable(seq)?;
        Ok(true)
    }

    /// DROP STABLE: removes all its subtables and its schema, durably. Returns the number of
    /// subtables dropped (0 if this vnode never saw the STABLE).
    pub fn drop_stable(&self, stable: &str) -> Result<u32, VnodeError> {
        let guard = self.commit.lock();
        self.wal.check_poisoned()?;
        {
            let st = self.state.read();
            if !st.meta.stables.contains_key(stable) && !st.meta.has_tables_of(stable) {
                return Ok(0);
            }
        }
        let seq = self.wal.append(op::encode_drop_stable(stable));
        let n = self.state.write().drop_stable(stable);
        drop(guard);
        self.wal.wait_durable(seq)?;
        Ok(n)
    }

    /// ALTER TABLE `name` SET TAG: gives the named tags of subtable `name` new values (coerced
    /// to the tags' types), durably, and returns the subtable as it now is. The tag index and
    /// the STABLE's [`StableTables`] follow at once (its version moves), so the next query
    /// filters and groups by the new values.
    pub fn set_tags(
        &self,
        name: &str,
        tags: &[(String, Value)],
    ) -> Result<Arc<TableMeta>, VnodeError> {
        if tags.is_empty() {
            return Err(VnodeError::InvalidArgument(format!(
                "ALTER TABLE {name} SET TAG needs at least one tag"
            )));
        }
        self.check_hash(name)?;
        let guard = self.commit.lock();
        self.wal.check_poisoned()?;
        let changes = {
            let st = self.state.read();
            let Some(t) = st.meta.table(name) else {
                return Err(VnodeError::SubtableNotFound {
                    table: name.to_string(),
                });
            };
            let Some(schema) = st.meta.stables.get(&t.stable) else {
                return Err(VnodeError::StableNotFound {
                    stable: t.stable.clone(),
                    table: name.to_string(),
                });
            };
            let mut changes: Vec<(usize, Value)> = Vec::with_capacity(tags.len());
            for (tag, v) in tags {
                let k = schema
                    .tag_index(tag)
                    .ok_or_else(|| VnodeError::TagNotFound {
                        table: name.to_string(),
                        stable: schema.name.clone(),
                        tag: tag.clone(),
                    })?;
                if changes.iter().any(|(i, _)| *i == k) {
                    return Err(VnodeError::InvalidArgument(format!(
                        "ALTER TABLE {name} SET TAG: tag '{tag}' is given twice"
                    )));
                }
                let def = &schema.tags[k];
                let v = def
                    .data_type
                    .coerce(v.clone())
                    .map_err(|e| VnodeError::InvalidTags {
                        table: name.to_string(),
                        reason: format!("tag '{}': {e}", def.name),
                    })?;
                changes.push((k, v));
            }
            changes
        };
        let seq = self.wal.append(op::encode_set_tags(name, &changes));
        let t = Arc::make_mut(&mut self.state.write().meta).set_tags(name, &changes);
        drop(guard);
        self.wal.wait_durable(seq)?;
        t.ok_or_else(|| VnodeError::SubtableNotFound {
            table: name.to_string(),
        })
    }

    pub fn table(&self, name: &str) -> Option<Arc<TableMeta>> {
        self.state.read().meta.table(name).cloned()
    }

    pub fn stable_schema(&self, stable: &str) -> Option<Arc<StableSchema>> {
        self.state.read().meta.stables.get(stable).cloned()
    }

    /// The subtables of `stable` whose tag `k` equals one of `values`, from the tag index
    /// (built for tag `k` on first use).
    pub fn tables_by_tag(&self, stable: &str, k: usize, values: &[Value]) -> Vec<Arc<TableMeta>> {
        {
            let st = self.state.read();
            if let Some(v) = st.meta.tables_by_tag(stable, k, values) {
                return v.into_iter().cloned().collect();
            }
        }
        let mut st = self.state.write();
        if !st.meta.has_tag_index(stable, k) {
            Arc::make_mut(&mut st.meta).build_tag_index(stable, k);
        }
        st.meta
            .tables_by_tag(stable, k, values)
            .unwrap_or_default()
            .into_iter()
            .cloned()
            .collect()
    }

    /// The subtables of `stable` with their names and tags as columns (see
    /// [`StableTables`]); `None` for a STABLE this vnode does not know. Built on first use after
    /// any change to the STABLE and kept until the next one, so that a query over many
    /// subtables neither lists nor reads every subtable's catalog entry.
    pub fn stable_tables(&self, stable: &str) -> Option<Arc<StableTables>> {
        let st = self.state.read();
        let schema = st.meta.stables.get(stable)?;
        let version = st.meta.version(stable);
        if let Some(t) = self.stable_tables.lock().get(stable) {
            if t.version == version {
                return Some(t.clone());
            }
        }
        let metas = st.meta.sorted_tables(Some(stable));
        let built = Arc::new(StableTables::build(schema, version, metas));
        let mut cache = self.stable_tables.lock();
        // Drop what belongs to STABLEs that are gone (the map is otherwise bounded by the
        // number of STABLEs).
        cache.retain(|s, _| st.meta.stables.contains_key(s));
        cache.insert(stable.to_string(), built.clone());
        Some(built)
    }

    /// The snapshot [`Vnode::stable_tables`] would give, if one is built and current; never
    /// builds one (for callers that must stay cheap).
    pub fn stable_tables_if_current(&self, stable: &str) -> Option<Arc<StableTables>> {
        let st = self.state.read();
        let version = st.meta.version(stable);
        self.stable_tables
            .lock()
            .get(stable)
            .filter(|t| t.version == version && st.meta.stables.contains_key(stable))
            .cloned()
    }

    /// All subtables, or those of one STABLE; sorted by name.
    pub fn tables(&self, stable: Option<&str>) -> Vec<Arc<TableMeta>> {
        self.state.read().meta.sorted_tables(stable)
    }

    /// The schema and requested column types of a live subtable.
    fn wanted_of(
        &self,
        st: &State,
        uid: TableUid,
        columns: &[usize],
    ) -> Result<Vec<(usize, DataType)>> {
        let schema = schema_of(st, uid)?;
        let mut wanted = Vec::with_capacity(columns.len() + 1);
        wanted.push((0, DataType::Timestamp));
        for &i in columns {
            match schema.columns.get(i) {
                Some(d) => wanted.push((i, d.data_type)),
                None => {
                    return Err(VnodeError::ColumnIndexOutOfRange {
                        stable: schema.name.clone(),
                        index: i,
                        columns: schema.columns.len(),
                    })
                }
            }
        }
        Ok(wanted)
    }

    /// The types of `columns` (indices into the STABLE's columns) of subtable `uid`.
    pub fn column_types(&self, uid: TableUid, columns: &[usize]) -> Result<Vec<DataType>> {
        let st = self.state.read();
        Ok(self
            .wanted_of(&st, uid, columns)?
            .into_iter()
            .skip(1)
            .map(|(_, t)| t)
            .collect())
    }

    /// What a scan of `uid` reads under the state lock: the columns to read (ts first), the
    /// file-set snapshot, and the rows of the frozen and active memtables in the range.
    #[allow(clippy::type_complexity)]
    fn snapshot(
        &self,
        uid: TableUid,
        ts_min: i64,
        ts_max: i64,
        columns: &[usize],
    ) -> Result<(
        Vec<(usize, DataType)>,
        Arc<FileSet>,
        Option<Vec<Column>>,
        Vec<Column>,
    )> {
        let st = self.state.read();
        let wanted = self.wanted_of(&st, uid, columns)?;
        let frozen = st
            .frozen
            .as_ref()
            .map(|f| f.mem.range_columns(uid, ts_min, ts_max, &wanted));
        let mem = st.mem.range_columns(uid, ts_min, ts_max, &wanted);
        Ok((wanted, st.files.clone(), frozen, mem))
    }

    /// Rows of one subtable with `ts_min <= ts <= ts_max`, ordered by ts, de-duplicated (the
    /// newest write of a ts wins, across data files, STT files and memtables), projected to
    /// `columns` (indices into the STABLE's columns, 0 = ts). Returns one Column per requested
    /// index. Only the blocks overlapping the range and only the requested columns are read.
    pub fn scan(
        &self,
        uid: TableUid,
        ts_min: i64,
        ts_max: i64,
        columns: &[usize],
    ) -> Result<Vec<Column>, VnodeError> {
        let (wanted, files, frozen_run, mem_run) = self.snapshot(uid, ts_min, ts_max, columns)?;
        let runs = files.runs(uid, ts_min, ts_max, self.window_units, &wanted)?;
        let merged = merge_with_memtables(runs, frozen_run, Some(mem_run), &wanted);
        Ok(merged.into_iter().skip(1).collect())
    }

    /// [`VnodeCore::scan_filtered`] (or [`VnodeCore::scan`] without `may_match`) for many
    /// subtables of one STABLE: returns the number of rows of each entry of `uids` and their
    /// rows concatenated in that order. The memtables are read under one lock per
    /// [`SCAN_MANY_LOCK_TABLES`] subtables, and the SMA records of the data blocks are read in
    /// runs of neighbours ([`data_file::DataSet::read_smas`]) instead of one read per block.
    #[allow(clippy::type_complexity)]
    pub fn scan_many(
        &self,
        uids: &[TableUid],
        ts_min: i64,
        ts_max: i64,
        columns: &[usize],
        stat_columns: &[usize],
        may_match: Option<&MayMatch<'_>>,
    ) -> Result<(Vec<usize>, Vec<Column>), VnodeError> {
        let mut counts = Vec::with_capacity(uids.len());
        let mut out: Vec<Column> = Vec::new();
        // Each subtable's merged columns (ts first), concatenated at the end.
        let mut pieces: Vec<Vec<Column>> = Vec::new();
        // With a filter: when every subtable is one STABLE's, its statistics per data set
        // can rule out a whole window at once.
        let group = match (may_match, uids.first()) {
            (Some(_), Some(first)) => {
                let stable = self
                    .state
                    .read()
                    .meta
                    .table_by_uid(*first)
                    .map(|t| t.stable.clone());
                stable
                    .and_then(|s| self.stable_tables(&s))
                    .filter(|st| uids.iter().all(|u| st.position(*u).is_some()))
            }
            _ => None,
        };
        for part in uids.chunks(SCAN_MANY_LOCK_TABLES) {
            let mut wanted: Option<Vec<(usize, DataType)>> = None;
            let (files, mems, no_mem) = {
                let st = self.state.read();
                let mut mems = Vec::with_capacity(part.len());
                // The columns come from the STABLE: looked up again only when it changes.
                let mut stable: Option<&str> = None;
                // Every subtable a member of the current snapshot: the STABLE's columns once,
                // and no catalog lookup per subtable.
                let current = group
                    .as_ref()
                    .filter(|g| st.meta.version(&g.stable) == g.version);
                if let (Some(_), Some(first)) = (current, part.first()) {
                    wanted = Some(self.wanted_of(&st, *first, columns)?);
                }
                for uid in part {
                    if current.is_none() {
                        let t = st
                            .meta
                            .table_by_uid(*uid)
                            .ok_or(VnodeError::TableUidNotFound { uid: uid.0 })?;
                        if stable != Some(t.stable.as_str()) {
                            let w = self.wanted_of(&st, *uid, columns)?;
                            if wanted.as_ref().is_some_and(|first| *first != w) {
                                return Err(VnodeError::InvalidArgument(format!(
                                "scan of many subtables: subtable uid {} has other column types than the first",
                                uid.0
                            )));
                            }
                            wanted = Some(w);
                            stable = Some(t.stable.as_str());
                        }
                    }
                    let w = wanted.as_deref().unwrap_or(&[]);
                    let frozen = st
                        .frozen
                        .as_ref()
                        .and_then(|f| f.mem.range_columns_if_any(*uid, ts_min, ts_max, w));
                    mems.push((frozen, st.mem.range_columns_if_any(*uid, ts_min, ts_max, w)));
                }
                let no_mem =
                    st.mem.is_empty() && st.frozen.as_ref().is_none_or(|f| f.mem.is_empty());
                (st.files.clone(), mems, no_mem)
            };
            let Some(wanted) = wanted else { continue };
            if out.is_empty() {
                out = wanted
                    .iter()
                    .skip(1)
                    .map(|(_, t)| Column::empty(*t, 0))
                    .collect();
            }
            let skipped = match may_match {
                Some(m) => files.pruned_blocks(
                    part,
                    (ts_min, ts_max),
                    self.window_units,
                    stat_columns,
                    m,
                    group.as_ref().map(|g| (g.stable.as_str(), &g.uids[..])),
                )?,
                None => tsdb::PrunedBlocks::default(),
            };
            // Nothing in memory and every window ruled out whole: none of these subtables
            // has a row to return (no per-subtable work at all).
            if no_mem
                && !skipped.is_empty()
                && files.all_pruned(ts_min, ts_max, self.window_units, &skipped)
            {
                #[cfg(test)]
                SCAN_MANY_SHORT_CIRCUITS.fetch_add(1, Ordering::Relaxed);
                counts.extend(std::iter::repeat_n(0, part.len()));
                continue;
            }
            let skip = |d: &data_file::DataSet,
                        e: &data_file::BlockEntry,
                        rows: Option<&[Column]>|
             -> Result<bool, VnodeError> {
                Ok(match (rows, may_match) {
                    (None, _) => tsdb::is_pruned(&skipped, d, e),
                    (Some(cols), Some(m)) => fails_filter(cols, &wanted, stat_columns, m),
                    (Some(_), None) => false,
                })
            };
            for (uid, (frozen, mem)) in part.iter().zip(mems) {
                let runs = files.runs_skipping(
                    *uid,
                    ts_min,
                    ts_max,
                    self.window_units,
                    &wanted,
                    (!skipped.is_empty() || may_match.is_some())
                        .then_some(&skip as &tsdb::SkipBlock<'_>),
                )?;
                if runs.is_empty() && frozen.is_none() && mem.is_none() {
                    counts.push(0);
                    continue;
                }
                let merged = merge_with_memtables(runs, frozen, mem, &wanted);
                let rows = merged.first().map(Column::len).unwrap_or(0);
                counts.push(rows);
                if rows > 0 {
                    pieces.push(merged);
                }
            }
        }
        // Concatenated once every subtable is read, into columns sized for all of them.
        let total: usize = counts.iter().sum();
        if let [only] = &mut pieces[..] {
            if only.len() == out.len() + 1 {
                return Ok((counts, only.drain(1..).collect()));
            }
        }
        for o in &mut out {
            o.reserve(total);
        }
        for merged in pieces {
            for (o, c) in out.iter_mut().zip(merged.into_iter().skip(1)) {
                o.extend_owned(c);
            }
        }
        Ok((counts, out))
    }

    /// [`VnodeCore::scan`] for a query with a row filter: a data block for which
    /// `may_match(rows, stats)` says no (`stats` holds one [`ColStats`] per entry of
    /// `stat_columns`, from the block's SMA, without reading the block) is left out. The result
    /// is the scan minus rows that fail the filter: a row of a skipped block fails it, and a
    /// newer write of the same ts lives in an STT file or a memtable, which are always read.
    pub fn scan_filtered(
        &self,
        uid: TableUid,
        ts_min: i64,
        ts_max: i64,
        columns: &[usize],
        stat_columns: &[usize],
        may_match: &MayMatch<'_>,
    ) -> Result<Vec<Column>, VnodeError> {
        let (wanted, files, frozen_run, mem_run) = self.snapshot(uid, ts_min, ts_max, columns)?;
        let skip = |d: &data_file::DataSet,
                    e: &data_file::BlockEntry,
                    rows: Option<&[Column]>|
         -> Result<bool, VnodeError> {
            if let Some(cols) = rows {
                return Ok(fails_filter(cols, &wanted, stat_columns, may_match));
            }
            // A block without an SMA record (a small one) is decided on its rows.
            let Some(all) = d.read_sma(e)? else {
                return Ok(false);
            };
            let stats = ColStats::project(&all, stat_columns, e.loc.rows);
            Ok(!may_match(e.loc.rows, &stats))
        };
        let runs =
            files.runs_skipping(uid, ts_min, ts_max, self.window_units, &wanted, Some(&skip))?;
        let merged = merge_with_memtables(runs, frozen_run, Some(mem_run), &wanted);
        Ok(merged.into_iter().skip(1).collect())
    }

    /// Like [`VnodeCore::scan`], for aggregation: data blocks that lie wholly inside the range and
    /// that no STT or memtable row overlaps come back as their SMA (one [`ColStats`] per
    /// requested column) without being read; everything else comes back as merged rows. The
    /// pieces are disjoint in time; their order is unspecified.
    pub fn scan_pieces(
        &self,
        uid: TableUid,
        ts_min: i64,
        ts_max: i64,
        columns: &[usize],
    ) -> Result<Vec<ScanPiece>, VnodeError> {
        let (wanted, files, frozen_run, mem_run) = self.snapshot(uid, ts_min, ts_max, columns)?;
        let mut pieces = Vec::new();
        if ts_min > ts_max {
            return Ok(pieces);
        }
        // Time extents of everything newer than data blocks.
        let mut newer: Vec<(i64, i64)> = Vec::new();
        for cols in frozen_run.iter().chain(std::iter::once(&mem_run)) {
            let ts = cols.first().map(block::ts_slice).unwrap_or(&[]);
            if let (Some(a), Some(b)) = (ts.first(), ts.last()) {
                newer.push((*a, *b));
            }
        }
        let (flo, fhi) = (
            tsdb::fid_of(ts_min, self.window_units),
            tsdb::fid_of(ts_max, self.window_units),
        );
        let mut runs = Vec::new();
        for (_, w) in files.windows.range(flo..=fhi) {
            if let Some(e) = &w.damaged {
                return Err(VnodeError::Corruption {
                    file: self.tsdb_dir(),
                    offset: 0,
                    reason: format!("a time window this query reads is damaged: {e}"),
                });
            }
            let mut win_newer = newer.clone();
            for (i, s) in w.stts.iter().enumerate() {
                for b in s.blocks(uid) {
                    if b.ts_max < ts_min || b.ts_min > ts_max {
                        continue;
                    }
                    win_newer.push((b.ts_min, b.ts_max));
                    runs.push(Run {
                        prio: 1 + i as u64,
                        cols: s.read_range(b, &wanted, ts_min, ts_max)?,
                    });
                }
            }
            let Some(d) = &w.data else { continue };
            for e in d.blocks(uid) {
                let (a, b) = (e.loc.ts_min, e.loc.ts_max);
                if b < ts_min || a > ts_max {
                    continue;
                }
                let inside = ts_min <= a && b <= ts_max;
                let shadowed = win_newer.iter().any(|(x, y)| *x <= b && *y >= a);
                // A block without an SMA record (a small one) is read as rows.
                let sma = if inside && !shadowed {
                    d.read_sma(e)?
                } else {
                    None
                };
                if let Some(all) = sma {
                    let stats = wanted
                        .iter()
                        .skip(1)
                        .map(|(ci, _)| {
                            all.get(*ci)
                                .copied()
                                .unwrap_or(ColStats::all_null(e.loc.rows))
                        })
                        .collect();
                    pieces.push(ScanPiece::Sma {
                        rows: e.loc.rows,
                        ts_min: a,
                        ts_max: b,
                        stats,
                    });
                } else {
                    runs.push(Run {
                        prio: 0,
                        cols: d.read_range(e, &wanted, ts_min, ts_max)?,
                    });
                }
            }
        }
        let merged = merge_with_memtables(runs, frozen_run, Some(mem_run), &wanted);
        if merged.first().is_some_and(|c| !c.is_empty()) {
            pieces.push(ScanPiece::Rows(merged.into_iter().skip(1).collect()));
        }
        Ok(pieces)
    }

    /// FLUSH DATABASE: writes the memtables to STT files now; returns when the manifest that
    /// lists them is committed and the WAL before them is deleted.
    pub fn flush(&self) -> Result<(), VnodeError> {
        {
            let _guard = self.commit.lock();
            self.wal.check_poisoned()?;
            self.wait_no_frozen(false)?;
            self.freeze()?;
        }
        let _bg = self.bg.lock();
        self.flush_frozen_locked()
    }

    /// COMPACT DATABASE: flushes, then merges every window's STT files into its data files,
    /// rewriting each window's files so no replaced block is left behind. Returns when done.
    pub fn compact(&self) -> Result<(), VnodeError> {
        self.flush()?;
        let _bg = self.bg.lock();
        let fids: Vec<i64> = {
            let st = self.state.read();
            st.files
                .windows
                .iter()
                .filter(|(_, w)| {
                    w.damaged.is_none()
                        && (!w.stts.is_empty()
                            || w.data.as_ref().is_some_and(|d| d.garbage_bytes > 0))
                })
                .map(|(f, _)| *f)
                .collect()
        };
        for fid in fids {
            self.merge_window_locked(fid, true, None)?;
        }
        self.apply_retention_locked()
    }

    /// DELETE: removes the rows of subtables `uids` with `ts_min <= ts <= ts_max` that were
    /// written before this call; returns how many rows it removed. Rows written while it runs
    /// may or may not be removed; rows written after it returns are kept.
    ///
    /// Every earlier row is first flushed to STT files; then, holding the background lock (so
    /// no later row reaches the files), each window that overlaps the range is merged without
    /// the deleted rows and committed. The cache entries of the subtables are dropped with the
    /// file swap. A crash part-way leaves some windows done and others not: the DELETE was not
    /// acknowledged and running it again finishes it.
    pub fn delete(&self, uids: &[TableUid], ts_min: i64, ts_max: i64) -> Result<u64> {
        if uids.is_empty() || ts_min > ts_max {
            return Ok(0);
        }
        let _bg = self.bg.lock();
        // Freeze the active memtable with the background lock held; a frozen one left by a
        // writer is flushed first (the worker cannot, as we hold its lock).
        loop {
            self.flush_frozen_locked()?;
            let _guard = self.commit.lock();
            self.wal.check_poisoned()?;
            if self.state.read().frozen.is_some() {
                continue;
            }
            self.freeze()?;
            break;
        }
        self.flush_frozen_locked()?;
        let range = compaction::DeleteRange {
            uids: uids.iter().copied().collect(),
            ts_min,
            ts_max,
        };
        let fids: Vec<i64> = {
            let st = self.state.read();
            st.files
                .windows
                .keys()
                .copied()
                .filter(|fid| {
                    let (lo, hi) = tsdb::window_bounds(*fid, self.window_units);
                    lo <= ts_max && hi >= ts_min
                })
                .collect()
        };
        let mut deleted = 0;
        for fid in fids {
            deleted += self.merge_window_locked(fid, false, Some(&range))?;
        }
        {
            let mut st = self.state.write();
            for uid in uids {
                st.cache.remove(*uid);
            }
        }
        self.deletes.fetch_add(1, Ordering::Relaxed);
        self.rows_deleted.fetch_add(deleted, Ordering::Relaxed);
        Ok(deleted)
    }

    fn worker_loop(&self) {
        let mut last_retention = std::time::Instant::now();
        let mut failing = false;
        loop {
            {
                let mut s = self.signal.lock();
                if s.stop {
                    return;
                }
                if !s.pending {
                    let wait = if failing { 1000 } else { 500 };
                    self.signal_cv.wait_for(&mut s, Duration::from_millis(wait));
                }
                if s.stop {
                    return;
                }
                s.pending = false;
            }
            let retention_due =
                last_retention.elapsed() >= Duration::from_millis(RETENTION_CHECK_MS);
            let r = (|| -> Result<()> {
                let _bg = self.bg.lock();
                self.flush_frozen_locked()?;
                self.merge_due_locked()?;
                if retention_due {
                    last_retention = std::time::Instant::now();
                    self.apply_retention_locked()?;
                }
                Ok(())
            })();
            match r {
                Ok(()) => failing = false,
                Err(e) => {
                    if !failing {
                        tracing::error!(dir = %self.dir.display(), error = %e, "background flush/merge failed; retrying");
                    }
                    failing = true;
                }
            }
        }
    }

    fn commit_manifest(
        &self,
        flushed_seq: u64,
        next_id: u64,
        fs: &FileSet,
        meta: &Meta,
    ) -> Result<()> {
        let bytes = manifest::encode(flushed_seq, next_id, &fs.recs(), meta);
        manifest::write(&self.dir.join("meta").join(MANIFEST_FILE), &bytes)
    }

    /// Writes the frozen memtable (if any) as STT files and commits them. Caller holds `bg`.
    fn flush_frozen_locked(&self) -> Result<()> {
        let (frozen, files, mut next_id) = {
            let st = self.state.read();
            match &st.frozen {
                Some(f) => (f.clone(), st.files.clone(), st.next_file_id),
                None => return Ok(()),
            }
        };
        let started = std::time::Instant::now();
        let r = (|| -> Result<(FileSet, u64)> {
            let new = flush::write_stts(
                &self.tsdb_dir(),
                &frozen,
                self.window_units,
                self.cfg.options.maxrows.max(1) as usize,
                self.live.read().minrows as usize,
                self.comp,
                &mut next_id,
            )?;
            let mut fs = (*files).clone();
            let bytes: u64 = new.values().map(|s| s.bytes).sum();
            self.flush_bytes.fetch_add(bytes, Ordering::Relaxed);
            for (fid, s) in new {
                fs.windows.entry(fid).or_default().stts.push(s);
            }
            self.commit_manifest(frozen.upto, next_id, &fs, &frozen.meta)?;
            Ok((fs, next_id))
        })();
        match r {
            Ok((fs, next_id)) => {
                // The files do not change meanwhile: the caller holds `bg`.
                let (files_max, folding) = {
                    let st = self.state.read();
                    (st.files.ts_max(), st.cache.model.any())
                };
                if folding {
                    let uids: Vec<TableUid> = frozen.mem.table_uids().collect();
                    for chunk in uids.chunks(FLUSH_FOLD_TABLES) {
                        self.state
                            .write()
                            .fold_flushed(&frozen.mem, chunk, files_max);
                    }
                }
                {
                    let mut st = self.state.write();
                    st.files = Arc::new(fs);
                    st.frozen = None;
                    st.flushed_seq = frozen.upto;
                    st.flushed_meta = frozen.meta.clone();
                    st.next_file_id = next_id;
                    st.bg_error = None;
                }
                self.wal.trim();
                self.flushes.fetch_add(1, Ordering::Relaxed);
                self.flush_micros
                    .fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
                let _g = self.flushed_lock.lock();
                self.flushed_cv.notify_all();
                Ok(())
            }
            Err(e) => {
                self.state.write().bg_error = Some(e.to_string());
                let _g = self.flushed_lock.lock();
                self.flushed_cv.notify_all();
                Err(e)
            }
        }
    }

    /// Merges every window that holds `STT_TRIGGER` STT files. Caller holds `bg`.
    fn merge_due_locked(&self) -> Result<()> {
        let trigger = self.live.read().stt_trigger.max(1) as usize;
        let due: Vec<i64> = {
            let st = self.state.read();
            st.files
                .windows
                .iter()
                .filter(|(_, w)| w.damaged.is_none() && w.stts.len() >= trigger)
                .map(|(f, _)| *f)
                .collect()
        };
        for fid in due {
            self.merge_window_locked(fid, false, None)?;
        }
        Ok(())
    }

    /// Merges window `fid`'s STT files into its data files, leaving out what `delete` covers,
    /// and commits. Returns the rows deleted. Caller holds `bg`.
    fn merge_window_locked(
        &self,
        fid: i64,
        full: bool,
        delete: Option<&compaction::DeleteRange>,
    ) -> Result<u64> {
        let (files, mut next_id, flushed_seq, flushed_meta) = {
            let st = self.state.read();
            (
                st.files.clone(),
                st.next_file_id,
                st.flushed_seq,
                st.flushed_meta.clone(),
            )
        };
        let Some(w) = files.windows.get(&fid) else {
            return Ok(0);
        };
        if let Some(reason) = &w.damaged {
            if delete.is_some() {
                return Err(VnodeError::Corruption {
                    file: self.tsdb_dir(),
                    offset: 0,
                    reason: format!("cannot DELETE in damaged time window {fid}: {reason}"),
                });
            }
            return Ok(0);
        }
        let full = full
            || w.data.as_ref().is_some_and(|d| {
                d.data_len > 0 && d.garbage_bytes as f64 > GARBAGE_REWRITE_RATIO * d.data_len as f64
            });
        let layout_of = |uid: TableUid| {
            let st = self.state.read();
            let t = st.meta.table_by_uid(uid)?;
            let s = st.meta.stables.get(&t.stable)?;
            Some(flush::layout(s, self.comp))
        };
        let tsdb = self.tsdb_dir();
        let params = compaction::MergeParams {
            dir: &tsdb,
            fid,
            full_rewrite: full,
            maxrows: self.cfg.options.maxrows.max(1) as usize,
            minrows: self.live.read().minrows as usize,
            layout_of: &layout_of,
            delete,
        };
        let started = std::time::Instant::now();
        let (new_data, stats) = compaction::merge_window(&params, w, &mut next_id)?;
        let written = match (&w.data, &new_data) {
            (Some(o), Some(n)) if o.data_id == n.data_id => {
                n.disk_bytes().saturating_sub(o.data_len + o.sma_len)
            }
            (_, Some(n)) => n.disk_bytes(),
            _ => 0,
        };
        let mut fs = (*files).clone();
        let old = fs.windows.remove(&fid).unwrap_or_default();
        let new_data = new_data.map(Arc::new);
        let rewrote = match (&old.data, &new_data) {
            (Some(o), Some(n)) => o.data_id != n.data_id,
            _ => true,
        };
        if new_data.is_some() {
            fs.windows.insert(
                fid,
                Window {
                    stts: Vec::new(),
                    data: new_data,
                    damaged: None,
                    rec: None,
                },
            );
        }
        self.commit_manifest(flushed_seq, next_id, &fs, &flushed_meta)?;
        {
            let mut st = self.state.write();
            st.files = Arc::new(fs);
            st.next_file_id = next_id;
            // In the same critical section as the file swap, so no reader re-caches a deleted
            // row (a load that began before the swap sees the file set changed and skips it).
            if let Some(d) = delete {
                for uid in &d.uids {
                    st.cache.remove(*uid);
                }
            }
        }
        for s in &old.stts {
            s.mark_obsolete();
        }
        if let Some(d) = &old.data {
            d.mark_obsolete(rewrote);
        }
        self.merges.fetch_add(1, Ordering::Relaxed);
        self.merge_bytes.fetch_add(written, Ordering::Relaxed);
        self.merge_micros
            .fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
        Ok(stats.rows_deleted)
    }

    /// KEEP: drops whole windows that ended before `now - KEEP`. Caller holds `bg`.
    fn apply_retention_locked(&self) -> Result<()> {
        let cutoff = self.oldest_writable_ts();
        let (files, next_id, flushed_seq, flushed_meta) = {
            let st = self.state.read();
            (
                st.files.clone(),
                st.next_file_id,
                st.flushed_seq,
                st.flushed_meta.clone(),
            )
        };
        let expired: Vec<i64> = files
            .windows
            .keys()
            .copied()
            .filter(|fid| tsdb::window_bounds(*fid, self.window_units).1 < cutoff)
            .collect();
        if expired.is_empty() {
            return Ok(());
        }
        let mut fs = (*files).clone();
        let mut gone = Vec::new();
        for fid in &expired {
            if let Some(w) = fs.windows.remove(fid) {
                gone.push(w);
            }
        }
        self.commit_manifest(flushed_seq, next_id, &fs, &flushed_meta)?;
        {
            let mut st = self.state.write();
            st.files = Arc::new(fs);
            // A cached row or value of an expired window is gone from the data.
            if let Some(end) = expired
                .iter()
                .map(|f| tsdb::window_bounds(*f, self.window_units).1)
                .max()
            {
                st.cache.remove_up_to(end);
            }
        }
        for w in gone {
            for s in &w.stts {
                s.mark_obsolete();
            }
            if let Some(d) = &w.data {
                d.mark_obsolete(true);
            }
        }
        tracing::info!(windows = expired.len(), "dropped time windows past KEEP");
        Ok(())
    }

    /// The oldest ts a write may carry (KEEP).
    fn oldest_writable_ts(&self) -> i64 {
        let per_minute = self.cfg.options.precision.per_second().saturating_mul(60);
        let keep = (self.live.read().keep_minutes as i64).saturating_mul(per_minute);
        self.cfg.options.precision.now().saturating_sub(keep)
    }

    /// All column types of subtable `uid`'s STABLE (index 0 = ts).
    fn all_columns(&self, st: &State, uid: TableUid) -> Result<Vec<(usize, DataType)>> {
        Ok(schema_of(st, uid)?
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| (i, c.data_type))
            .collect())
    }

    /// The time windows that hold rows of `uid` (files and memtables), newest first, each as
    /// an inclusive ts range.
    pub fn ranges_desc(&self, uid: TableUid) -> Result<Vec<(i64, i64)>> {
        let st = self.state.read();
        st.meta
            .table_by_uid(uid)
            .ok_or(VnodeError::TableUidNotFound { uid: uid.0 })?;
        Ok(self.ranges_desc_locked(&st, &[uid]))
    }

    /// The time windows that hold rows of any of `uids`, newest first (one state lock for
    /// all). A uid the catalog does not know (a subtable dropped since the caller listed it)
    /// holds no rows; nothing is looked up per uid beyond the files and memtables, since a
    /// fleet-wide LAST_ROW search asks this for a hundred thousand subtables.
    /// For each of `uids`, at most how many rows a scan of `lo..=hi` returns: the rows of its
    /// data and STT blocks overlapping the range and all its memtable rows (newer copies of a
    /// ts counted twice). From the block indexes and memtable counts, nothing is read: what a
    /// caller sizes a read of many subtables by.
    pub fn rows_upper_bound(&self, uids: &[TableUid], lo: i64, hi: i64) -> Vec<u64> {
        let st = self.state.read();
        let (flo, fhi) = (
            tsdb::fid_of(lo, self.window_units),
            tsdb::fid_of(hi, self.window_units),
        );
        let windows: Vec<&tsdb::Window> = if lo > hi {
            Vec::new()
        } else {
            st.files.windows.range(flo..=fhi).map(|(_, w)| w).collect()
        };
        let overlapping = |b: &block::BlockLoc| b.ts_max >= lo && b.ts_min <= hi;
        uids.iter()
            .map(|uid| {
                let mut n = st.mem.rows_of(*uid);
                if let Some(f) = &st.frozen {
                    n += f.mem.rows_of(*uid);
                }
                for w in &windows {
                    if let Some(d) = &w.data {
                        n += d
                            .blocks(*uid)
                            .iter()
                            .filter(|e| overlapping(&e.loc))
                            .map(|e| u64::from(e.loc.rows))
                            .sum::<u64>();
                    }
                    for s in &w.stts {
                        n += s
                            .blocks(*uid)
                            .iter()
                            .filter(|b| overlapping(b))
                            .map(|b| u64::from(b.rows))
                            .sum::<u64>();
                    }
                }
                n
            })
            .collect()
    }

    pub fn ranges_desc_many(&self, uids: &[TableUid]) -> Vec<(i64, i64)> {
        let st = self.state.read();
        self.ranges_desc_locked(&st, uids)
    }

    fn ranges_desc_locked(&self, st: &State, uids: &[TableUid]) -> Vec<(i64, i64)> {
        let mut fids: Vec<i64> = Vec::new();
        for (fid, w) in &st.files.windows {
            let has = w.damaged.is_some()
                || uids.iter().any(|uid| {
                    w.stts.iter().any(|s| !s.blocks(*uid).is_empty())
                        || w.data.as_ref().is_some_and(|d| !d.blocks(*uid).is_empty())
                });
            if has {
                fids.push(*fid);
            }
        }
        let mems = [Some(&st.mem), st.frozen.as_ref().map(|f| &f.mem)];
        for m in mems.into_iter().flatten().filter(|m| !m.is_empty()) {
            for uid in uids {
                if let Some((lo, hi)) = m.ts_bounds(*uid) {
                    let (a, b) = (
                        tsdb::fid_of(lo, self.window_units),
                        tsdb::fid_of(hi, self.window_units),
                    );
                    if b.saturating_sub(a) > 4096 {
                        // Very sparse memtable rows: one range covers them.
                        return vec![(i64::MIN, i64::MAX)];
                    }
                    fids.extend(a..=b);
                }
            }
        }
        fids.sort_unstable_by(|a, b| b.cmp(a));
        fids.dedup();
        let mut out = Vec::with_capacity(fids.len());
        for f in fids {
            let (lo, hi) = tsdb::window_bounds(f, self.window_units);
            match st.files.windows.get(&f).and_then(|w| dense_extent(w, uids)) {
                Some(extent) => newest_first_ranges(lo, hi, extent, &mut out),
                None => out.push((lo, hi)),
            }
        }
        out
    }

    /// Computes subtable `uid`'s cache entry from its data (memtables and files); `values` too
    /// when `with_values`.
    fn load_entry(&self, uid: TableUid, with_values: bool) -> Result<Entry> {
        let (all, newest) = {
            let st = self.state.read();
            let all: Vec<usize> = self
                .all_columns(&st, uid)?
                .into_iter()
                .map(|(i, _)| i)
                .collect();
            (all, newest_ts(&st, uid))
        };
        let mut entry = Entry {
            row: None,
            values: vec![None; all.len()],
            values_loaded: with_values,
        };
        if !with_values {
            // The last row is the one at the greatest ts any block or memtable holds: read
            // just that ts (the blocks around it) rather than the whole newest window.
            match newest {
                Some(None) => return Ok(entry),
                Some(Some(t)) => {
                    let cols = self.scan(uid, t, t, &all)?;
                    let ts = cols.first().map(block::ts_slice).unwrap_or(&[]);
                    if let Some(last) = ts.len().checked_sub(1) {
                        entry.row = Some((ts[last], cols.iter().map(|c| c.get(last)).collect()));
                        return Ok(entry);
                    }
                }
                None => {}
            }
        }
        let rest: Vec<usize> = all.iter().copied().skip(1).collect();
        let mut missing: Vec<usize> = if with_values {
            rest.clone()
        } else {
            Vec::new()
        };
        for (lo, hi) in self.ranges_desc(uid)? {
            let cols = self.scan(uid, lo, hi, &all)?;
            let ts = cols.first().map(block::ts_slice).unwrap_or(&[]);
            let Some(last) = ts.len().checked_sub(1) else {
                continue;
            };
            if entry.row.is_none() {
                entry.row = Some((ts[last], cols.iter().map(|c| c.get(last)).collect()));
                if let Some(v) = entry.values.first_mut() {
                    *v = Some((ts[last], Value::Timestamp(ts[last])));
                }
            }
            missing.retain(|ci| {
                let Some(c) = cols.get(*ci) else { return true };
                match (0..c.len()).rev().find(|i| !c.is_null(*i)) {
                    Some(i) => {
                        if let Some(slot) = entry.values.get_mut(*ci) {
                            *slot = Some((ts[i], c.get(i)));
                        }
                        false
                    }
                    None => true,
                }
            });
            if missing.is_empty() {
                break;
            }
        }
        Ok(entry)
    }

    /// The cache entry of `uid`: from the cache when CACHEMODEL keeps what is asked for,
    /// otherwise loaded from the data (and cached when the model allows).
    fn entry(&self, uid: TableUid, want_values: bool) -> Result<Entry> {
        let model = {
            let mut st = self.state.write();
            let model = st.cache.model;
            let usable = if want_values {
                model.last_value
            } else {
                model.last_row
            };
            if usable {
                if let Some(mut e) = st.cache.get(uid) {
                    if e.values_loaded || !want_values {
                        st.fold_memtables(uid, &mut e, !want_values);
                        // Unless a memtable row replaced a cached value with a NULL: then only
                        // the data knows the value before it.
                        if e.values_loaded || !want_values {
                            return Ok(e);
                        }
                    }
                }
            }
            if !want_values {
                // A memtable row newer than every row in the files is the last row, and (as
                // a row-only entry) covers the files from now on.
                let files_max = st.files.ts_max();
                let made = mem_last_row(&st.mem, st.frozen.as_ref().map(|f| &f.mem), uid)
                    .filter(|(t, ..)| files_max.is_none_or(|m| *t > m))
                    .map(|(t, cols, i)| row_entry(t, cols, i));
                if let Some(e) = made {
                    if model.last_row {
                        st.cache.insert(uid, e.clone());
                    }
                    return Ok(e);
                }
            }
            model
        };
        let files = self.state.read().files.clone();
        // A LAST_ROW miss loads the row only: LAST values can take many more windows to find
        // (a column NULL for long), and a LAST query loads them when it first asks.
        let e = self.load_entry(uid, want_values)?;
        if model.any() {
            let mut st = self.state.write();
            // Only cache an entry that covers the files: if the file set changed while
            // loading, a flush's rows may have left the memtables after this load read them
            // and before the entry was there to fold them into.
            if st.covers(&files, uid) {
                st.cache.insert(uid, e.clone());
            }
        }
        Ok(e)
    }

    /// Every subtable's uid, ascending (what [`VnodeCore::warm_last_rows`] walks).
    pub fn table_uids(&self) -> Vec<TableUid> {
        let mut uids: Vec<TableUid> = self.state.read().meta.uids().collect();
        uids.sort_unstable();
        uids
    }

    /// Loads the LAST_ROW cache entry of each of `uids` that has none, as a miss would, so
    /// that the first queries after an open (which starts the cache empty) hit it. Never
    /// evicts: an entry that does not fit ends the warm-up, and entries that reads made meanwhile
    /// stay. Counts neither hits nor misses. Returns the entries made, or `None` once the
    /// cache takes no more (full, or CACHEMODEL without `last_row`): the caller stops there.
    pub fn warm_last_rows(&self, uids: &[TableUid]) -> Result<Option<usize>> {
        let mut made = 0;
        for &uid in uids {
            let files = {
                let st = self.state.read();
                if !st.cache.model.last_row || !st.cache.fills() {
                    return Ok(None);
                }
                if st.cache.contains(uid) || !st.meta.has_uid(uid) {
                    continue;
                }
                st.files.clone()
            };
            let e = match self.load_entry(uid, false) {
                Ok(e) => e,
                // Dropped since the list was taken.
                Err(_) if !self.state.read().meta.has_uid(uid) => continue,
                Err(e) => return Err(e),
            };
            let mut st = self.state.write();
            // As a miss caches an entry: only one that covers the files as they are now.
            if st.covers(&files, uid) && !st.cache.contains(uid) {
                if !st.cache.insert_if_room(uid, e) {
                    return Ok(None);
                }
                made += 1;
            }
        }
        Ok(Some(made))
    }

    /// LAST_ROW: subtable `uid`'s last row (NULLs included) projected to `columns`, as 1-row
    /// columns; `None` when it has no rows. Served from the last-row cache when CACHEMODEL
    /// includes `last_row`, with the same answer a full scan gives.
    pub fn last_row(&self, uid: TableUid, columns: &[usize]) -> Result<Option<Vec<Column>>> {
        let e = self.entry(uid, false)?;
        let Some((_, row)) = e.row else {
            return Ok(None);
        };
        let types: Vec<(usize, DataType)> = {
            let st = self.state.read();
            self.wanted_of(&st, uid, columns)?
                .into_iter()
                .skip(1)
                .collect()
        };
        Ok(Some(
            types
                .iter()
                .map(|(ci, t)| {
                    let mut c = Column::empty(*t, 1);
                    c.push(row.get(*ci).unwrap_or(&Value::Null));
                    c
                })
                .collect(),
        ))
    }

    /// [`VnodeCore::last_row`] for many subtables at once (one lock for all cache hits).
    pub fn last_rows(
        &self,
        uids: &[TableUid],
        columns: &[usize],
    ) -> Result<Vec<Option<Vec<Column>>>> {
        let mut out: Vec<Option<Option<Vec<Column>>>> = vec![None; uids.len()];
        {
            let mut st = self.state.write();
            if st.cache.model.last_row {
                let mut types_of: HashMap<String, Vec<DataType>> = HashMap::new();
                for (k, uid) in uids.iter().enumerate() {
                    let Some(mut e) = st.cache.get(*uid) else {
                        continue;
                    };
                    st.fold_memtables(*uid, &mut e, true);
                    let Some(t) = st.meta.table_by_uid(*uid) else {
                        continue;
                    };
                    if !types_of.contains_key(&t.stable) {
                        let Some(s) = st.meta.stables.get(&t.stable) else {
                            continue;
                        };
                        let mut ts = Vec::with_capacity(columns.len());
                        for c in columns {
                            match s.columns.get(*c) {
                                Some(d) => ts.push(d.data_type),
                                None => {
                                    return Err(VnodeError::ColumnIndexOutOfRange {
                                        stable: s.name.clone(),
                                        index: *c,
                                        columns: s.columns.len(),
                                    })
                                }
                            }
                        }
                        types_of.insert(t.stable.clone(), ts);
                    }
                    let Some(types) = types_of.get(&t.stable) else {
                        continue;
                    };
                    out[k] = Some(e.row.map(|(_, row)| {
                        columns
                            .iter()
                            .zip(types)
                            .map(|(ci, t)| {
                                let mut c = Column::empty(*t, 1);
                                c.push(row.get(*ci).unwrap_or(&Value::Null));
                                c
                            })
                            .collect()
                    }));
                }
            }
        }
        uids.iter()
            .zip(out)
            .map(|(uid, hit)| match hit {
                Some(r) => Ok(r),
                None => self.last_row(*uid, columns),
            })
            .collect()
    }

    /// LAST_ROW of many subtables of STABLE `stable`, as columns: the positions (into `uids`,
    /// ascending) of the subtables that have rows, and one column per entry of `columns` with
    /// their last rows in that order. Cache hits are read under one lock without copying the
    /// entries; misses are loaded as [`VnodeCore::last_row`] does.
    pub fn last_rows_columns(
        &self,
        stable: &str,
        uids: &[TableUid],
        columns: &[usize],
    ) -> Result<(Vec<usize>, Vec<Column>)> {
        let mut guard = self.state.write();
        let st = &mut *guard;
        let schema = st
            .meta
            .stables
            .get(stable)
            .ok_or_else(|| VnodeError::InvalidArgument(format!("unknown STABLE '{stable}'")))?;
        let mut types = Vec::with_capacity(columns.len());
        for c in columns {
            match schema.columns.get(*c) {
                Some(d) => types.push(d.data_type),
                None => {
                    return Err(VnodeError::ColumnIndexOutOfRange {
                        stable: schema.name.clone(),
                        index: *c,
                        columns: schema.columns.len(),
                    })
                }
            }
        }
        let mut out: Vec<Column> = types
            .iter()
            .map(|t| Column::empty(*t, uids.len()))
            .collect();
        let mut positions = Vec::with_capacity(uids.len());
        let mut misses = Vec::new();
        let use_cache = st.cache.model.last_row;
        let files_max = st.files.ts_max();
        let mut made: Vec<(TableUid, Entry)> = Vec::new();
        // A few subtables' lookups count as uses; a fleet's read leaves the LRU order alone.
        let promote = uids.len() <= LAST_ROWS_PROMOTE_MAX;
        // A current snapshot of the STABLE's subtables answers "is this one of them" from a
        // compact map, without reading every subtable's catalog entry.
        let members = self
            .stable_tables
            .lock()
            .get(stable)
            .filter(|t| t.version == st.meta.version(stable))
            .cloned();
        for (k, uid) in uids.iter().enumerate() {
            // The catalog is probed only for a subtable the snapshot does not list: a probe
            // per candidate missed the cache on every one and was most of a fleet's lookup.
            if members.as_ref().is_none_or(|m| m.position(*uid).is_none()) {
                match st.meta.table_by_uid(*uid) {
                    None => continue,
                    Some(t) if t.stable == stable && members.is_none() => {}
                    Some(t) => {
                        return Err(VnodeError::InvalidArgument(format!(
                            "table '{}' belongs to STABLE '{}', not '{stable}'",
                            t.name, t.stable
                        )))
                    }
                }
            }
            let hit = if use_cache {
                st.cache.get_ref(*uid, promote)
            } else {
                None
            };
            // A memtable's last row at or after the entry's ts is newer than the entry, which
            // covers the files (the active memtable's wins an equal ts over the frozen one's).
            let newest = mem_last_row(&st.mem, st.frozen.as_ref().map(|f| &f.mem), *uid);
            // The memtable's row answers when it is at or after the entry's (which covers the
            // files), or, with no entry, when it is newer than every row in the files (and
            // then, as a row-only entry, covers the files from now on).
            let from_mem = newest.filter(|(t, ..)| match hit {
                Some(e) => e.row.as_ref().is_none_or(|(ct, _)| *t >= *ct),
                None => files_max.is_none_or(|m| *t > m),
            });
            if let Some((t, cols, i)) = from_mem {
                if hit.is_none() && use_cache {
                    made.push((*uid, row_entry(t, cols, i)));
                }
                for (c, ci) in out.iter_mut().zip(columns) {
                    match cols.get(*ci) {
                        Some(src) => c.push(&src.get(i)),
                        None => c.push(&Value::Null),
                    }
                }
                positions.push(k);
            } else if let Some(e) = hit {
                if let Some((_, row)) = &e.row {
                    for (c, ci) in out.iter_mut().zip(columns) {
                        c.push(row.get(*ci).unwrap_or(&Value::Null));
                    }
                    positions.push(k);
                }
            } else {
                misses.push(k);
            }
        }
        for (uid, e) in made {
            st.cache.insert(uid, e);
        }
        drop(guard);
        if misses.is_empty() {
            return Ok((positions, out));
        }
        for k in misses {
            if let Some(row) = self.last_row(uids[k], columns)? {
                for (c, r) in out.iter_mut().zip(&row) {
                    c.extend(r);
                }
                positions.push(k);
            }
        }
        // Misses were appended after the hits: restore the order of `uids`.
        let mut order: Vec<usize> = (0..positions.len()).collect();
        order.sort_by_key(|i| positions[*i]);
        positions.sort_unstable();
        Ok((positions, out.iter().map(|c| c.take(&order)).collect()))
    }

    /// LAST(col) for each of `columns`: the (ts, value) of its last non-NULL value, if any.
    pub fn last_values(
        &self,
        uid: TableUid,
        columns: &[usize],
    ) -> Result<Vec<Option<(i64, Value)>>> {
        let e = self.entry(uid, true)?;
        Ok(columns
            .iter()
            .map(|c| e.values.get(*c).cloned().flatten())
            .collect())
    }

    /// ALTER DATABASE: applies the options that can change while the vnode runs (CACHEMODEL,
    /// CACHESIZE, KEEP, BUFFER, STT_TRIGGER, MINROWS) and persists them in `vnode.json`. The
    /// others (VGROUPS, PRECISION, DURATION, MAXROWS, COMP, WAL_*) must be unchanged.
    pub fn set_options(&self, o: &DbOptions) -> Result<()> {
        let cur = self.current_options();
        let fixed = |a: &DbOptions| {
            (
                a.vgroups,
                a.replica,
                a.precision,
                a.duration_minutes,
                a.maxrows,
                a.comp,
                a.wal_level,
                a.wal_fsync_period_ms,
            )
        };
        if fixed(o) != fixed(&cur) {
            return Err(VnodeError::InvalidArgument(
                "only CACHEMODEL, CACHESIZE, KEEP, BUFFER, STT_TRIGGER and MINROWS can change on a running vnode".into(),
            ));
        }
        o.validate().map_err(VnodeError::InvalidArgument)?;
        if *o == cur {
            return Ok(());
        }
        let mut persisted = self.cfg.clone();
        persisted.options = o.clone();
        let json = serde_json::to_vec_pretty(&persisted)
            .map_err(|e| VnodeError::InvalidArgument(format!("config: {e}")))?;
        fsutil::write_atomic(&self.dir.join(CONFIG_FILE), &json)?;
        *self.live.write() = LiveOptions {
            keep_minutes: o.keep_minutes,
            stt_trigger: o.stt_trigger,
            minrows: o.minrows,
        };
        self.buffer_bytes_max
            .store((o.buffer_mb.max(1) as u64) * MIB, Ordering::Relaxed);
        self.set_cache(&o.cache_model, o.cache_size_mb);
        *self.options_now.write() = o.clone();
        self.kick_worker();
        Ok(())
    }

    /// The options in force (creation options plus ALTER DATABASE changes).
    pub fn current_options(&self) -> DbOptions {
        self.options_now.read().clone()
    }

    /// Changes CACHEMODEL / CACHESIZE live; a model change empties the cache.
    fn set_cache(&self, model: &str, size_mb: u32) {
        let mut st = self.state.write();
        let m = CacheModel::parse(model);
        if m != st.cache.model {
            st.cache.clear();
            st.cache.model = m;
        }
        st.cache.bytes_max = (size_mb.max(1) as u64) * MIB;
    }

    pub fn stats(&self) -> VnodeStats {
        let wal_stats = self.wal.stats();
        let st = self.state.read();
        let manifest_bytes = std::fs::metadata(self.dir.join("meta").join(MANIFEST_FILE))
            .map(|m| m.len())
            .unwrap_or(0);
        VnodeStats {
            tables: st.meta.num_tables() as u64,
            rows_written: self.rows_written.load(Ordering::Relaxed),
            mem_bytes: st.mem.bytes() + st.frozen.as_ref().map(|f| f.mem.bytes()).unwrap_or(0),
            wal_bytes: self.wal.bytes(),
            wal_bytes_written: wal_stats.bytes_written,
            wal_fsync: wal_stats.fsync,
            disk_bytes: st.files.disk_bytes() + manifest_bytes,
            stt_files: st.files.windows.values().map(|w| w.stts.len() as u64).sum(),
            windows: st.files.windows.len() as u64,
            flushes: self.flushes.load(Ordering::Relaxed),
            merges: self.merges.load(Ordering::Relaxed),
            deletes: self.deletes.load(Ordering::Relaxed),
            rows_deleted: self.rows_deleted.load(Ordering::Relaxed),
            write_stalls: self.write_stalls.load(Ordering::Relaxed),
            flush_bytes: self.flush_bytes.load(Ordering::Relaxed),
            flush_micros: self.flush_micros.load(Ordering::Relaxed),
            merge_bytes: self.merge_bytes.load(Ordering::Relaxed),
            merge_micros: self.merge_micros.load(Ordering::Relaxed),
            cache_entries: st.cache.len() as u64,
            cache_bytes: st.cache.bytes(),
            cache_hits: st.cache.hits,
            cache_misses: st.cache.misses,
        }
    }
}

#[cfg(test)]
mod engine_tests;
