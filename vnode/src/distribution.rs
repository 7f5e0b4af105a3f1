//! The storage layout of one table's rows in a vnode (SHOW TABLE DISTRIBUTED): how many data
//! blocks hold them and how full those are, and how many rows still wait in STT files and
//! memtables.
//!
//! Everything comes from the block indexes (head and STT) and the memtables' per-subtable
//! maps: no block is read. Rows are counted per layer as stored, before newest-wins merging:
//! a timestamp written again before a merge counts once per layer that holds it (COUNT(*) is
//! the exact number). A damaged window (set aside at open) cannot be indexed; it is counted
//! apart and its rows are not.

use crate::VnodeCore;
use tidal_common::TableUid;

/// Where the rows of a set of subtables (one STABLE's, or one subtable) are in one vnode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableDistribution {
    /// Subtables counted.
    pub tables: u64,
    /// Time windows (file sets) holding any of their rows in files.
    pub windows: u64,
    /// Windows that could not be opened, whose rows are not counted.
    pub damaged_windows: u64,
    /// Data blocks (merged `.data` files) and their rows.
    pub blocks: u64,
    pub block_rows: u64,
    /// Fewest and most rows in one of those blocks (0 without blocks).
    pub min_block_rows: u32,
    pub max_block_rows: u32,
    /// Bytes of those blocks and of their SMA records.
    pub block_bytes: u64,
    /// Blocks, rows and bytes in STT staging files (not merged yet).
    pub stt_blocks: u64,
    pub stt_rows: u64,
    pub stt_bytes: u64,
    /// Rows in the active and the frozen (being flushed) memtables.
    pub mem_rows: u64,
}

impl VnodeCore {
    /// The distribution of the rows of subtables `uids` (a uid this vnode does not hold
    /// counts nothing). Reads one snapshot: the files and the memtables as of one hold of the
    /// state lock (shared: writers wait for it, readers do not; counting is a map lookup per
    /// subtable and memtable).
    pub fn distribution(&self, uids: &[TableUid]) -> TableDistribution {
        let (files, mem_rows) = {
            let st = self.state.read();
            let frozen = st.frozen.as_ref().map(|f| &f.mem);
            let mem_rows: u64 = uids
                .iter()
                .map(|u| st.mem.rows_of(*u) + frozen.map_or(0, |m| m.rows_of(*u)))
                .sum();
            (st.files.clone(), mem_rows)
        };
        let mut d = TableDistribution {
            tables: uids.len() as u64,
            mem_rows,
            ..TableDistribution::default()
        };
        let mut min_rows = u32::MAX;
        let mut shared: std::collections::HashSet<(u64, u64)> = std::collections::HashSet::new();
        for w in files.windows.values() {
            if w.damaged.is_some() {
                d.damaged_windows += 1;
                continue;
            }
            let mut any = false;
            for uid in uids {
                for s in &w.stts {
                    for b in s.blocks(*uid) {
                        any = true;
                        d.stt_rows += u64::from(b.rows);
                        // A block shared by several subtables counts once.
                        if b.view.is_none() || shared.insert((s.id, b.offset)) {
                            d.stt_blocks += 1;
                            d.stt_bytes += u64::from(b.len);
                        }
                    }
                }
                if let Some(data) = &w.data {
                    for e in data.blocks(*uid) {
                        any = true;
                        d.blocks += 1;
                        d.block_rows += u64::from(e.loc.rows);
                        d.block_bytes += u64::from(e.loc.len) + u64::from(e.sma_len);
                        min_rows = min_rows.min(e.loc.rows);
                        d.max_block_rows = d.max_block_rows.max(e.loc.rows);
                    }
                }
            }
            d.windows += u64::from(any);
        }
        if d.blocks > 0 {
            d.min_block_rows = min_rows;
        }
        d
    }
}
