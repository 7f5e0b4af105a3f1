//! Flush: a frozen memtable becomes STT staging files, one per time window it has rows in.
//!
//! Owns: turning the frozen memtable into files. Invariants: the frozen memtable holds exactly
//! the effects of WAL records `<= upto` not yet in files, and is immutable while it is written;
//! the STT files are fsynced and renamed before the manifest that lists them (with
//! `flushed_seq = upto`) is committed, and the WAL before `upto` is deleted only after that
//! commit (see `../tsdb/FORMAT.md`, "Crash safety").

use crate::block::ts_slice;
use crate::block::ColumnCodec;
use crate::error::Result;
use crate::memtable::{Memtable, TableRows};
use crate::meta::Meta;
use crate::stt::{SttFile, SttWriter};
use crate::tsdb::{fid_of, window_bounds};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use tidal_common::{Column, DataType, StableSchema, TableUid};

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

/// Values (rows times the columns wanted) a flush gathers at once: bounds the columns it
/// holds beside the frozen memtable to about 9 MiB (8 bytes and a NULL flag a value).
/// Larger batches measured no faster (8M values, or all of a vnode's rows at once, at
/// 4,000 and 100,000 trucks).
const FLUSH_GATHER_VALUES_MAX: usize = 1 << 20;

/// Writes the frozen memtable; returns the new STT file per window. Allocates file ids from
/// `next_id`.
///
/// Subtables are written by ascending uid, their rows gathered a batch of subtables at a
/// time ([`Memtable::gather_all`], up to [`FLUSH_GATHER_VALUES_MAX`] values).
pub fn write_stts(
    dir: &Path,
    frozen: &Frozen,
    window_units: i64,
    maxrows: usize,
    minrows: usize,
    comp: u8,
    next_id: &mut u64,
) -> Result<BTreeMap<i64, Arc<SttFile>>> {
    let mut sink = Sink {
        dir,
        window_units,
        maxrows,
        minrows,
        next_id,
        writers: BTreeMap::new(),
    };
    // Each STABLE's types, codecs and wanted columns, made once rather than per subtable.
    let mut layouts: HashMap<&str, Arc<Layout>> = HashMap::new();
    let mut batch: Vec<(TableUid, TableRows<'_>, Arc<Layout>)> = Vec::new();
    let mut values = 0usize;
    for (uid, rows) in frozen.mem.tables_by_uid() {
        let Some(t) = frozen.meta.table_by_uid(uid) else {
            continue; // dropped before the freeze: its rows are dead
        };
        let Some(schema) = frozen.meta.stables.get(&t.stable) else {
            continue;
        };
        let l = layouts
            .entry(t.stable.as_str())
            .or_insert_with(|| Arc::new(Layout::of(schema, comp)))
            .clone();
        let v = rows.row_count().saturating_mul(l.wanted.len().max(1));
        if !batch.is_empty() && values.saturating_add(v) > FLUSH_GATHER_VALUES_MAX {
            sink.write_batch(&frozen.mem, &batch)?;
            batch.clear();
            values = 0;
        }
        values += v;
        batch.push((uid, rows, l));
    }
    sink.write_batch(&frozen.mem, &batch)?;
    let mut out = BTreeMap::new();
    for (fid, w) in sink.writers {
        out.insert(fid, Arc::new(w.finish()?));
    }
    Ok(out)
}

/// A STABLE's column types, codecs and the columns a flush wants of it (all, in order).
struct Layout {
    types: Vec<DataType>,
    codecs: Vec<ColumnCodec>,
    wanted: Vec<(usize, DataType)>,
}

impl Layout {
    fn of(schema: &StableSchema, comp: u8) -> Layout {
        // STT blocks use the column's real codec: a merge moves a block of MINROWS rows or
        // more into the data file unchanged (see compaction), so it must already be in its
        // final form (a smaller block never moves: it is encoded quickly and carries no SMA,
        // `SttWriter::add_table`).
        let (types, codecs) = layout(schema, comp);
        let wanted = types.iter().copied().enumerate().collect();
        Layout {
            types,
            codecs,
            wanted,
        }
    }
}

/// Where a flush writes: an STT file per window, created as rows for it come.
struct Sink<'a> {
    dir: &'a Path,
    window_units: i64,
    maxrows: usize,
    /// Blocks of fewer rows are encoded for speed ([`SttWriter::add_table`]).
    minrows: usize,
    /// The next file id to allocate.
    next_id: &'a mut u64,
    writers: BTreeMap<i64, SttWriter>,
}

impl Sink<'_> {
    /// Gathers the rows of `batch` from `mem` and adds each subtable's rows to the STT file
    /// of each window it has rows in.
    fn write_batch(
        &mut self,
        mem: &Memtable,
        batch: &[(TableUid, TableRows<'_>, Arc<Layout>)],
    ) -> Result<()> {
        let asks: Vec<(&TableRows<'_>, &[(usize, DataType)])> = batch
            .iter()
            .map(|(_, rows, l)| (rows, l.wanted.as_slice()))
            .collect();
        let gathered = mem.gather_all(&asks);
        for ((uid, _, l), cols) in batch.iter().zip(gathered) {
            let ts = match cols.first() {
                Some(c) => ts_slice(c),
                None => continue,
            };
            // The windows that hold rows (not every window between the first and last row:
            // a subtable may have one row in 1970 and one today), each a run of the rows.
            let mut start = 0;
            while let Some(&first) = ts.get(start) {
                let fid = fid_of(first, self.window_units);
                let (_, whi) = window_bounds(fid, self.window_units);
                let end = start
                    + ts.get(start..)
                        .unwrap_or(&[])
                        .partition_point(|t| *t <= whi);
                let window: Vec<Column>;
                let part = if start == 0 && end == ts.len() {
                    cols.as_slice()
                } else {
                    window = cols.iter().map(|c| c.slice(start, end)).collect();
                    window.as_slice()
                };
                let w = match self.writers.entry(fid) {
                    std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                    std::collections::btree_map::Entry::Vacant(v) => {
                        let id = *self.next_id;
                        *self.next_id += 1;
                        v.insert(SttWriter::create(self.dir, fid, id)?)
                    }
                };
                w.add_table(*uid, part, &l.types, &l.codecs, self.maxrows, self.minrows)?;
                start = end;
            }
        }
        Ok(())
    }
}
