//! Flush: a frozen memtable becomes STT staging files, one per time window it has rows in.
//!
//! Owns: turning the frozen memtable into files. Invariants: the frozen memtable holds exactly
//! the effects of WAL records `<= upto` not yet in files, and is immutable while it is written;
//! the STT files are fsynced and renamed before the manifest that lists them (with
//! `flushed_seq = upto`) is committed, and the WAL before `upto` is deleted only after that
//! commit (see `../tsdb/FORMAT.md`, "Crash safety").

use crate::block::ColumnCodec;
use crate::error::Result;
use crate::memtable::Memtable;
use crate::meta::Meta;
use crate::stt::{SttFile, SttWriter};
use crate::tsdb::{fid_of, window_bounds};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use tidal_common::{DataType, StableSchema};

/// A memtable that no longer takes writes and waits to be flushed.
pub struct Frozen {
    pub mem: Memtable,
    /// The WAL seq whose effects it completes.
    pub upto: u64,
    /// The catalog as of `upto`, committed with the flush.
    pub meta: Arc<Meta>,
}

/// Types and codecs of a STABLE's columns under database option `comp`.
pub fn layout(schema: &StableSchema, comp: u8) -> (Vec<DataType>, Vec<ColumnCodec>) {
    let types: Vec<DataType> = schema.columns.iter().map(|c| c.data_type).collect();
    // A spec was validated when the STABLE was created; should one not parse (a newer build's
    // name), the type's default still stores the data losslessly.
    let codecs = schema
        .columns
        .iter()
        .map(|c| match &c.codec {
            Some(s) => ColumnCodec::parse(
                c.data_type,
                s.encode.as_deref(),
                s.compress.as_deref(),
                s.level.as_deref(),
                comp,
            )
            .unwrap_or_else(|_| ColumnCodec::default_for(c.data_type, comp)),
            None => ColumnCodec::default_for(c.data_type, comp),
        })
        .collect();
    (types, codecs)
}

/// Writes the frozen memtable; returns the new STT file per window. Allocates file ids from
/// `next_id`.
pub fn write_stts(
    dir: &Path,
    frozen: &Frozen,
    window_units: i64,
    maxrows: usize,
    comp: u8,
    next_id: &mut u64,
) -> Result<BTreeMap<i64, Arc<SttFile>>> {
    let mut writers: BTreeMap<i64, SttWriter> = BTreeMap::new();
    for (uid, rows) in frozen.mem.tables_by_uid() {
        let Some(t) = frozen.meta.table_by_uid(uid) else {
            continue; // dropped before the freeze: its rows are dead
        };
        let Some(schema) = frozen.meta.stables.get(&t.stable) else {
            continue;
        };
        // STT blocks use the column's real codec: a merge usually moves them into the data
        // file unchanged (see compaction), so they must already be in their final form.
        let (types, codecs) = layout(schema, comp);
        let wanted: Vec<(usize, DataType)> = types.iter().copied().enumerate().collect();
        let Some((lo, hi)) = rows.ts_bounds() else {
            continue;
        };
        // Walk the windows that hold rows (not every window between lo and hi: a subtable
        // may have one row in 1970 and one today).
        let mut cur = Some(lo);
        while let Some(c) = cur {
            let fid = fid_of(c, window_units);
            let (_, whi) = window_bounds(fid, window_units);
            cur = if whi >= hi {
                None
            } else {
                rows.next_ts(whi + 1)
            };
            let cols = rows.range_columns(c, whi.min(hi), &wanted);
            if cols.first().is_none_or(|c| c.is_empty()) {
                continue;
            }
            let w = match writers.entry(fid) {
                std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::btree_map::Entry::Vacant(v) => {
                    let id = *next_id;
                    *next_id += 1;
                    v.insert(SttWriter::create(dir, fid, id)?)
                }
            };
            w.add_table(uid, &cols, &types, &codecs, maxrows)?;
        }
    }
    let mut out = BTreeMap::new();
    for (fid, w) in writers {
        out.insert(fid, Arc::new(w.finish()?));
    }
    Ok(out)
}
