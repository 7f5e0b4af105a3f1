//! The committed file set of a vnode: per time window (`DURATION`), its STT staging files and
//! the current version of its data files (formats in `FORMAT.md` beside this file).
//!
//! Owns: the in-memory view of what the manifest lists, opening it at start, and collecting the
//! sorted runs a scan of one subtable needs from it. Invariants: a `FileSet` is immutable once
//! published (readers hold an `Arc` to it: their snapshot); a change builds a new one, commits
//! it through the manifest and only then swaps it in; windows are disjoint in time, so rows of a
//! window's files never compete with another window's; within a window, data blocks are older
//! than every STT file and a later STT file is newer than an earlier one.

use crate::block::{BlockLoc, ColStats};
use crate::data_file::{BlockEntry, DataSet};
use crate::error::{Result, VnodeError};
use crate::manifest::{DataRec, WindowRec};
use crate::merge::Run;
use crate::stt::{self, SttFile};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use tidal_common::{Column, DataType, TableUid};

#[derive(Clone, Default)]
pub struct Window {
    /// Oldest first.
    pub stts: Vec<Arc<SttFile>>,
    pub data: Option<Arc<DataSet>>,
    /// Set when the window's files could not be opened: its data is unreadable (every read of
    /// it returns this error) while the rest of the vnode keeps serving.
    pub damaged: Option<Arc<String>>,
    /// The manifest record (kept so a damaged window is carried over unchanged).
    pub rec: Option<WindowRec>,
}

#[derive(Clone, Default)]
pub struct FileSet {
    pub windows: BTreeMap<i64, Window>,
}

/// The window holding `ts`, for windows `window_units` long.
pub fn fid_of(ts: i64, window_units: i64) -> i64 {
    ts.div_euclid(window_units.max(1))
}

/// First and last ts of window `fid`.
pub fn window_bounds(fid: i64, window_units: i64) -> (i64, i64) {
    let w = window_units.max(1);
    let lo = fid.saturating_mul(w);
    (lo, lo.saturating_add(w - 1))
}

/// Data blocks left out of a scan: (the address of their data set, their offset in its
/// `.data` file).
pub type PrunedBlocks = HashSet<(usize, u64), foldhash::fast::RandomState>;

/// The offset under which [`PrunedBlocks`] marks a whole data set as left out.
const WHOLE_DATA_SET: u64 = u64::MAX;

/// Data sets [`FileSet::pruned_blocks`] left out whole (the model test asserts some were).
#[cfg(test)]
pub static WHOLE_DATA_SETS_PRUNED: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(0);

/// Whether `p` leaves out block `e` of data set `d`.
pub fn is_pruned(p: &PrunedBlocks, d: &DataSet, e: &BlockEntry) -> bool {
    let addr = std::ptr::from_ref(d) as usize;
    p.contains(&(addr, WHOLE_DATA_SET)) || p.contains(&(addr, e.loc.offset))
}

/// Says whether a data block (of the given data set) can be left out of a scan: asked before
/// it is read (`None`), and, for a block without an SMA record, again with the rows read of
/// it (`Some`), which are then dropped as a skipped block's are.
pub type SkipBlock<'a> = dyn Fn(&DataSet, &BlockEntry, Option<&[Column]>) -> Result<bool> + 'a;

impl FileSet {
    /// Opens every file the manifest lists. A window whose files fail to open is kept as
    /// damaged (logged, reads of it fail with the error) instead of failing the whole vnode.
    pub fn open(dir: &Path, recs: &[WindowRec]) -> FileSet {
        let mut windows = BTreeMap::new();
        for rec in recs {
            let opened = (|| -> Result<Window> {
                let mut stts = Vec::with_capacity(rec.stts.len());
                for id in &rec.stts {
                    stts.push(Arc::new(stt::open(
                        &dir.join(stt::file_name(rec.fid, *id)),
                        *id,
                    )?));
                }
                let data = match &rec.data {
                    None => None,
                    Some(d) => Some(Arc::new(DataSet::open(
                        dir,
                        rec.fid,
                        d.data_id,
                        d.head_id,
                        d.data_len,
                        d.sma_len,
                        d.garbage_bytes,
                    )?)),
                };
                Ok(Window {
                    stts,
                    data,
                    damaged: None,
                    rec: None,
                })
            })();
            let w = match opened {
                Ok(w) => w,
                Err(e) => {
                    tracing::error!(window = rec.fid, error = %e, "time window is damaged; its rows are unreadable until it is repaired");
                    Window {
                        damaged: Some(Arc::new(e.to_string())),
                        rec: Some(rec.clone()),
                        ..Window::default()
                    }
                }
            };
            windows.insert(rec.fid, w);
        }
        FileSet { windows }
    }

    /// An upper bound of every row's ts in the files (`None`: they hold no rows). Windows are
    /// disjoint in time, so the newest window with rows holds the greatest ts; a damaged
    /// window's rows are of unknown ts, so it bounds nothing (`i64::MAX`).
    pub fn ts_max(&self) -> Option<i64> {
        for w in self.windows.values().rev() {
            if w.damaged.is_some() {
                return Some(i64::MAX);
            }
            let m = w
                .stts
                .iter()
                .filter_map(|s| s.ts_max)
                .chain(w.data.as_ref().and_then(|d| d.ts_max))
                .max();
            if m.is_some() {
                return m;
            }
        }
        None
    }

    /// The manifest records of this file set.
    pub fn recs(&self) -> Vec<WindowRec> {
        self.windows
            .iter()
            .map(|(fid, w)| match (&w.damaged, &w.rec) {
                (Some(_), Some(r)) => {
                    // Flushes after the damage still add STT files to the window.
                    let mut r = r.clone();
                    r.stts.extend(w.stts.iter().map(|s| s.id));
                    r
                }
                _ => WindowRec {
                    fid: *fid,
                    stts: w.stts.iter().map(|s| s.id).collect(),
                    data: w.data.as_ref().map(|d| DataRec {
                        data_id: d.data_id,
                        head_id: d.head_id,
                        data_len: d.data_len,
                        sma_len: d.sma_len,
                        garbage_bytes: d.garbage_bytes,
                    }),
                },
            })
            .collect()
    }

    /// File names the manifest refers to (everything else in tsdb/ is an orphan).
    pub fn live_names(recs: &[WindowRec]) -> HashSet<String> {
        let mut s = HashSet::new();
        for r in recs {
            for id in &r.stts {
                s.insert(stt::file_name(r.fid, *id));
            }
            if let Some(d) = &r.data {
                s.insert(crate::data_file::data_name(r.fid, d.data_id));
                s.insert(crate::data_file::sma_name(r.fid, d.data_id));
                s.insert(crate::data_file::head_name(r.fid, d.head_id));
            }
        }
        s
    }

    pub fn disk_bytes(&self) -> u64 {
        self.windows
            .values()
            .map(|w| {
                w.stts.iter().map(|s| s.bytes).sum::<u64>()
                    + w.data.as_ref().map(|d| d.disk_bytes()).unwrap_or(0)
            })
            .sum()
    }

    /// The runs of subtable `uid` with rows in `lo..=hi`, reading the columns `wanted`
    /// (`wanted[0]` must be the ts column). Data blocks get priority 0, the i-th STT file of a
    /// window priority 1 + i.
    pub fn runs(
        &self,
        uid: TableUid,
        lo: i64,
        hi: i64,
        window_units: i64,
        wanted: &[(usize, DataType)],
    ) -> Result<Vec<Run>> {
        self.runs_skipping(uid, lo, hi, window_units, wanted, None)
    }

    /// The data blocks of `uids` in `lo..=hi` for which `may_match` says no (from their SMA,
    /// one [`ColStats`] per entry of `stat_columns`), each as (its data set's address, its
    /// offset): the keys a [`SkipBlock`] over this file set looks up. The SMA records of each
    /// window are read in runs of neighbours; a block without one is not in the set (the scan
    /// decides it on the rows it reads of it).
    pub fn pruned_blocks(
        &self,
        uids: &[TableUid],
        (lo, hi): (i64, i64),
        window_units: i64,
        stat_columns: &[usize],
        may_match: &crate::MayMatch<'_>,
        stable: Option<(&str, &[TableUid])>,
    ) -> Result<PrunedBlocks> {
        let mut out = PrunedBlocks::default();
        if lo > hi {
            return Ok(out);
        }
        let (flo, fhi) = (fid_of(lo, window_units), fid_of(hi, window_units));
        for (_, w) in self.windows.range(flo..=fhi) {
            // A damaged window fails the scan that reads it (see `runs`).
            let Some(d) = &w.data else { continue };
            // `uids` all belong to `stable`: when no block of the whole STABLE in this data
            // set can match, none of theirs can (one check for the window instead of one per
            // block; a filter no truck passes in this window costs no SMA reads).
            if let Some((name, all)) = stable {
                if let Some(g) = d.group_stats(name, all, stat_columns)? {
                    if !may_match(g.rows, &g.cols) {
                        #[cfg(test)]
                        WHOLE_DATA_SETS_PRUNED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        out.insert((std::ptr::from_ref(d.as_ref()) as usize, WHOLE_DATA_SET));
                        continue;
                    }
                }
            }
            let entries: Vec<&BlockEntry> = uids
                .iter()
                .flat_map(|u| d.blocks(*u))
                .filter(|e| e.loc.ts_max >= lo && e.loc.ts_min <= hi)
                .collect();
            let smas = d.read_smas(&entries)?;
            // A block without an SMA record (a small one) is not left out: its rows are read.
            for (e, all) in entries.iter().zip(smas) {
                let Some(all) = all else { continue };
                let stats = ColStats::project(&all, stat_columns, e.loc.rows);
                if !may_match(e.loc.rows, &stats) {
                    out.insert((std::ptr::from_ref(d.as_ref()) as usize, e.loc.offset));
                }
            }
        }
        Ok(out)
    }

    /// Whether every window overlapping `lo..=hi` has nothing `pruned` does not leave out:
    /// no STT file, no damage, and a data set (if any) left out whole.
    pub fn all_pruned(&self, lo: i64, hi: i64, window_units: i64, pruned: &PrunedBlocks) -> bool {
        if lo > hi {
            return true;
        }
        let (flo, fhi) = (fid_of(lo, window_units), fid_of(hi, window_units));
        self.windows.range(flo..=fhi).all(|(_, w)| {
            w.stts.is_empty()
                && w.damaged.is_none()
                && w.data.as_ref().is_none_or(|d| {
                    pruned.contains(&(std::ptr::from_ref(d.as_ref()) as usize, WHOLE_DATA_SET))
                })
        })
    }

    /// [`FileSet::runs`], leaving out the data blocks for which `skip` says yes (given the
    /// window's data set and the block). Only data blocks, the oldest level, can be skipped:
    /// a row of one that was later rewritten lives in an STT file or memtable, always read.
    pub fn runs_skipping(
        &self,
        uid: TableUid,
        lo: i64,
        hi: i64,
        window_units: i64,
        wanted: &[(usize, DataType)],
        skip: Option<&SkipBlock<'_>>,
    ) -> Result<Vec<Run>> {
        let mut runs = Vec::new();
        if lo > hi {
            return Ok(runs);
        }
        let (flo, fhi) = (fid_of(lo, window_units), fid_of(hi, window_units));
        let overlaps = |b: &BlockLoc| b.ts_max >= lo && b.ts_min <= hi;
        for (_, w) in self.windows.range(flo..=fhi) {
            if let Some(e) = &w.damaged {
                return Err(VnodeError::Corruption {
                    file: Path::new("tsdb").to_path_buf(),
                    offset: 0,
                    reason: format!("a time window this query reads is damaged: {e}"),
                });
            }
            if let Some(d) = &w.data {
                for e in d.blocks(uid).iter().filter(|e| overlaps(&e.loc)) {
                    if let Some(skip) = skip {
                        if skip(d, e, None)? {
                            continue;
                        }
                    }
                    let cols = d.read_range(e, wanted, lo, hi)?;
                    // A small block has no statistics to skip it by; its rows do as well, and
                    // spare the caller rows that cannot pass its filter.
                    if let Some(skip) = skip.filter(|_| !e.has_sma()) {
                        if skip(d, e, Some(&cols))? {
                            continue;
                        }
                    }
                    runs.push(Run { prio: 0, cols });
                }
            }
            for (i, s) in w.stts.iter().enumerate() {
                for b in s.blocks(uid).iter().filter(|b| overlaps(b)) {
                    runs.push(Run {
                        prio: 1 + i as u64,
                        cols: s.read_range(b, wanted, lo, hi)?,
                    });
                }
            }
        }
        Ok(runs)
    }
}
