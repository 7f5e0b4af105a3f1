//! STT staging files `tsdb/f<fid>.<id>.stt`: what one flush wrote for one time window
//! (layout in `../tsdb/FORMAT.md`).
//!
//! Owns: writing a flush's rows of one window as column blocks sorted by (uid, ts), durably, and
//! reading them back. Invariants: a file is written under a temp name, fsynced and renamed
//! before any manifest lists it, and never modified afterwards; per subtable its blocks are
//! sorted by ts, do not overlap and hold unique ts; the footer's index is checksummed and every
//! block it lists lies inside the block area (checked at open, so a damaged file is refused
//! before a reader relies on it).

use crate::block::{self, BlockLoc, ColumnCodec};
use crate::error::{Result, VnodeError};
use crate::fsutil::{self, FileRef};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use tidal_common::{Column, DataType, TableUid};

pub const STT_MAGIC: &[u8; 8] = b"TIDALSTT";
pub const FOOTER_MAGIC: &[u8; 8] = b"TIDALEND";
/// Version 3 adds blocks shared by several small subtables (entries of 56 bytes, naming
/// each subtable's rows in its block); version 2 (each block's SMA record right after it,
/// 48-byte entries) and version 1 (44-byte entries, no SMA) files are still read.
pub const STT_VERSION: u32 = 3;
const HEADER_BYTES: u64 = 16;
const FOOTER_BYTES: u64 = 24;
const ENTRY_BYTES_V1: usize = 44;
const ENTRY_BYTES_V2: usize = 48;
const ENTRY_BYTES: usize = 56;
/// Column layouts (STABLEs) whose small subtables a writer gathers at once; a flush names
/// subtables by uid, and TSBS's two STABLEs' subtables alternate in uid order.
const SHARED_LAYOUTS_MAX: usize = 16;

pub fn file_name(fid: i64, id: u64) -> String {
    format!("f{fid}.{id}.stt")
}

pub struct SttFile {
    pub id: u64,
    pub bytes: u64,
    file: FileRef,
    index: HashMap<TableUid, Vec<BlockLoc>>,
    /// Per block (keyed by its offset): the length of the SMA record that follows it.
    sma_len: HashMap<u64, u32>,
    /// The greatest ts of any block (`None`: no blocks).
    pub ts_max: Option<i64>,
}

/// Writes one STT file: `tables` yields, per subtable (ascending uid), its rows in this window
/// sorted by ts with unique ts, plus the column types and codecs.
pub struct SttWriter {
    path: PathBuf,
    tmp: PathBuf,
    file: std::io::BufWriter<std::fs::File>,
    at: u64,
    index: Vec<(TableUid, BlockLoc, u32)>,
    buf: Vec<u8>,
    id: u64,
    /// Small subtables' rows waiting to share a block, per column layout (oldest first).
    shared: Vec<Shared>,
}

/// Rows of small subtables of one column layout, gathered into one block.
struct Shared {
    types: Vec<DataType>,
    codecs: Vec<ColumnCodec>,
    cols: Vec<Column>,
    /// Per subtable, in order: uid, first row in `cols`, rows, ts_min, ts_max.
    views: Vec<(TableUid, u32, u32, i64, i64)>,
}

impl Shared {
    fn rows(&self) -> usize {
        self.cols.first().map(Column::len).unwrap_or(0)
    }

    /// Whether `cols` can join: same layout, and each column of the same physical form
    /// (rows gathered before a type was widened keep their own form; those go alone).
    fn takes(&self, cols: &[Column], types: &[DataType], codecs: &[ColumnCodec]) -> bool {
        self.types == types
            && self.codecs == codecs
            && self.cols.len() == cols.len()
            && self
                .cols
                .iter()
                .zip(cols)
                .all(|(a, b)| std::mem::discriminant(&a.data) == std::mem::discriminant(&b.data))
    }
}

impl SttWriter {
    pub fn create(dir: &Path, fid: i64, id: u64) -> Result<SttWriter> {
        let path = dir.join(file_name(fid, id));
        let tmp = path.with_extension("stt.tmp");
        let f = fsutil::create(&tmp)?;
        let mut file = std::io::BufWriter::with_capacity(1 << 20, f);
        let mut head = Vec::with_capacity(HEADER_BYTES as usize);
        head.extend_from_slice(STT_MAGIC);
        head.extend_from_slice(&STT_VERSION.to_le_bytes());
        head.extend_from_slice(&0u32.to_le_bytes());
        file.write_all(&head)
            .map_err(|e| VnodeError::io(&tmp, "write", e))?;
        Ok(SttWriter {
            path,
            tmp,
            file,
            at: HEADER_BYTES,
            index: Vec::new(),
            buf: Vec::new(),
            id,
            shared: Vec::new(),
        })
    }

    /// Adds the rows of one subtable, split into blocks of at most `maxrows` rows. A block of
    /// fewer than `minrows` rows is encoded with [`block::Effort::Quick`] and has no SMA
    /// record: a merge never moves such a block into a data file as it is (compaction), it
    /// decodes it and encodes its rows again there, so the search for the smallest encoding
    /// would be spent twice, and the SMA (only ever read by that move) not at all; with a
    /// row or two per subtable it was about half of the file.
    ///
    /// A subtable with fewer than `minrows` rows in all shares a block with the other such
    /// subtables of its column layout (up to `maxrows` rows, subtable after subtable): at
    /// 100,000 trucks a flush held a few rows per subtable, and a block per subtable spent
    /// more on each block's directory, codec headers, index entry and encoder calls than on
    /// its rows.
    pub fn add_table(
        &mut self,
        uid: TableUid,
        cols: &[Column],
        types: &[DataType],
        codecs: &[ColumnCodec],
        maxrows: usize,
        minrows: usize,
    ) -> Result<()> {
        let n = cols.first().map(Column::len).unwrap_or(0);
        let maxrows = maxrows.max(1);
        if n > 0 && n < minrows && n <= maxrows {
            return self.add_shared(uid, cols, types, codecs, maxrows);
        }
        let mut s = 0;
        while s < n {
            let e = (s + maxrows).min(n);
            let sliced: Vec<Column>;
            let part: &[Column] = if s == 0 && e == n {
                cols
            } else {
                sliced = cols.iter().map(|c| c.slice(s, e)).collect();
                &sliced
            };
            let effort = block::effort_for(e - s, minrows);
            let small = effort == block::Effort::Quick;
            let (ts_min, ts_max) = first_last_ts(part);
            self.buf.clear();
            block::encode_block(part, types, codecs, effort, &mut self.buf)?;
            let block_len = self.buf.len();
            // The SMA goes with the block so that a merge can move both without decoding.
            if !small {
                block::encode_sma(&block::compute_sma(part), &mut self.buf);
            }
            let sma_len = (self.buf.len() - block_len) as u32;
            self.file
                .write_all(&self.buf)
                .map_err(|e| VnodeError::io(&self.tmp, "write", e))?;
            self.index.push((
                uid,
                BlockLoc {
                    offset: self.at,
                    len: block_len as u32,
                    ncols: part.len() as u32,
                    rows: (e - s) as u32,
                    ts_min,
                    ts_max,
                    view: None,
                },
                sma_len,
            ));
            self.at += self.buf.len() as u64;
            s = e;
        }
        Ok(())
    }

    /// Adds a small subtable's rows (`0 < n < minrows`, `n <= maxrows`) to the shared block
    /// of its layout, first writing that block when they would take it past `maxrows`.
    fn add_shared(
        &mut self,
        uid: TableUid,
        cols: &[Column],
        types: &[DataType],
        codecs: &[ColumnCodec],
        maxrows: usize,
    ) -> Result<()> {
        let n = cols.first().map(Column::len).unwrap_or(0);
        let at = match self
            .shared
            .iter()
            .position(|p| p.takes(cols, types, codecs))
        {
            Some(i) if self.shared.get(i).is_some_and(|p| p.rows() + n <= maxrows) => Some(i),
            Some(i) => {
                let full = self.shared.remove(i);
                self.write_shared(full)?;
                None
            }
            None => None,
        };
        let at = match at {
            Some(i) => i,
            None => {
                if self.shared.len() >= SHARED_LAYOUTS_MAX {
                    let oldest = self.shared.remove(0);
                    self.write_shared(oldest)?;
                }
                self.shared.push(Shared {
                    types: types.to_vec(),
                    codecs: codecs.to_vec(),
                    cols: cols.iter().map(|c| c.slice(0, 0)).collect(),
                    views: Vec::new(),
                });
                self.shared.len() - 1
            }
        };
        let Some(p) = self.shared.get_mut(at) else {
            return Ok(());
        };
        let (ts_min, ts_max) = first_last_ts(cols);
        let start = p.rows() as u32;
        for (dst, src) in p.cols.iter_mut().zip(cols) {
            dst.extend(src);
        }
        p.views.push((uid, start, n as u32, ts_min, ts_max));
        Ok(())
    }

    /// Writes a shared block: one index entry per subtable in it, each naming its rows. A
    /// block that one subtable ended up alone in is written as that subtable's own.
    fn write_shared(&mut self, p: Shared) -> Result<()> {
        let block_rows = p.rows();
        if block_rows == 0 {
            return Ok(());
        }
        self.buf.clear();
        block::encode_block(
            &p.cols,
            &p.types,
            &p.codecs,
            block::Effort::Quick,
            &mut self.buf,
        )?;
        self.file
            .write_all(&self.buf)
            .map_err(|e| VnodeError::io(&self.tmp, "write", e))?;
        let alone = p.views.len() == 1;
        for (uid, start, rows, ts_min, ts_max) in p.views {
            self.index.push((
                uid,
                BlockLoc {
                    offset: self.at,
                    len: self.buf.len() as u32,
                    ncols: p.cols.len() as u32,
                    rows,
                    ts_min,
                    ts_max,
                    view: (!alone).then_some(block::RowView {
                        start,
                        block_rows: block_rows as u32,
                    }),
                },
                0,
            ));
        }
        self.at += self.buf.len() as u64;
        Ok(())
    }

    /// Writes the index and footer, fsyncs, renames into place and opens the result.
    pub fn finish(mut self) -> Result<SttFile> {
        for p in std::mem::take(&mut self.shared) {
            self.write_shared(p)?;
        }
        let mut ib = Vec::with_capacity(4 + self.index.len() * ENTRY_BYTES);
        ib.extend_from_slice(&(self.index.len() as u32).to_le_bytes());
        for (uid, b, sma_len) in &self.index {
            ib.extend_from_slice(&uid.0.to_le_bytes());
            ib.extend_from_slice(&b.ts_min.to_le_bytes());
            ib.extend_from_slice(&b.ts_max.to_le_bytes());
            ib.extend_from_slice(&b.rows.to_le_bytes());
            ib.extend_from_slice(&b.ncols.to_le_bytes());
            ib.extend_from_slice(&b.offset.to_le_bytes());
            ib.extend_from_slice(&b.len.to_le_bytes());
            ib.extend_from_slice(&sma_len.to_le_bytes());
            let (start, block_rows) = match b.view {
                Some(v) => (v.start, v.block_rows),
                None => (0, b.rows),
            };
            ib.extend_from_slice(&start.to_le_bytes());
            ib.extend_from_slice(&block_rows.to_le_bytes());
        }
        let mut foot = Vec::with_capacity(FOOTER_BYTES as usize);
        foot.extend_from_slice(&self.at.to_le_bytes());
        foot.extend_from_slice(&(ib.len() as u32).to_le_bytes());
        foot.extend_from_slice(&crc32c::crc32c(&ib).to_le_bytes());
        foot.extend_from_slice(FOOTER_MAGIC);
        self.file
            .write_all(&ib)
            .and_then(|_| self.file.write_all(&foot))
            .map_err(|e| VnodeError::io(&self.tmp, "write", e))?;
        let f = self
            .file
            .into_inner()
            .map_err(|e| VnodeError::io(&self.tmp, "write", e.into_error()))?;
        fsutil::publish(f, &self.tmp, &self.path)?;
        open(&self.path, self.id)
    }
}

/// The first and last ts of sorted rows (column 0), 0 for none: an index entry's range.
fn first_last_ts(cols: &[Column]) -> (i64, i64) {
    let ts = cols.first().map(block::ts_slice).unwrap_or(&[]);
    (
        ts.first().copied().unwrap_or(0),
        ts.last().copied().unwrap_or(0),
    )
}

use crate::block::{corrupt, u32_at, u64_at};

/// Opens an STT file and verifies its header, footer and index.
pub fn open(path: &Path, id: u64) -> Result<SttFile> {
    let file = FileRef::open(path)?;
    let bytes = file.len()?;
    if bytes < HEADER_BYTES + FOOTER_BYTES {
        return Err(corrupt(
            path,
            0,
            format!("STT file of {bytes} bytes is too short"),
        ));
    }
    let head = block::read_at(&file.file, path, 0, HEADER_BYTES as usize)?;
    if head.get(0..8) != Some(&STT_MAGIC[..]) {
        return Err(corrupt(path, 0, "bad magic, not a Tidal STT file".into()));
    }
    let version = u32_at(&head, 8);
    let entry_bytes = match version {
        1 => ENTRY_BYTES_V1,
        2 => ENTRY_BYTES_V2,
        3 => ENTRY_BYTES,
        _ => 0,
    };
    if entry_bytes == 0 {
        return Err(corrupt(
            path,
            8,
            format!("unsupported STT version {version}"),
        ));
    }
    let footer_at = bytes - FOOTER_BYTES;
    let foot = block::read_at(&file.file, path, footer_at, FOOTER_BYTES as usize)?;
    if foot.get(16..24) != Some(&FOOTER_MAGIC[..]) {
        return Err(corrupt(
            path,
            footer_at + 16,
            "bad footer magic (truncated file?)".into(),
        ));
    }
    let index_at = u64_at(&foot, 0);
    let index_len = u32_at(&foot, 8) as u64;
    let index_crc = u32_at(&foot, 12);
    if index_at < HEADER_BYTES || index_at.saturating_add(index_len) != footer_at {
        return Err(corrupt(
            path,
            footer_at,
            format!("index at {index_at} of {index_len} bytes does not end at the footer"),
        ));
    }
    let ib = block::read_at(&file.file, path, index_at, index_len as usize)?;
    let actual = crc32c::crc32c(&ib);
    if actual != index_crc {
        return Err(corrupt(
            path,
            index_at,
            format!("index checksum mismatch (stored {index_crc:#010x}, computed {actual:#010x})"),
        ));
    }
    let n = u32_at(&ib, 0) as usize;
    if 4 + n.saturating_mul(entry_bytes) != ib.len() {
        return Err(corrupt(
            path,
            index_at,
            format!("index of {} bytes cannot hold {n} entries", ib.len()),
        ));
    }
    let mut index: HashMap<TableUid, Vec<BlockLoc>> = HashMap::new();
    let mut sma: HashMap<u64, u32> = HashMap::new();
    // Per shared block (by offset): its length, columns and rows, and where the last view
    // of it seen ends (views are listed in row order and do not overlap).
    let mut shared: HashMap<u64, (u32, u32, u32, u32)> = HashMap::new();
    // Blocks listed as a subtable's own: (offset, where their entry is).
    let mut own: Vec<(u64, u64)> = Vec::new();
    for i in 0..n {
        let o = 4 + i * entry_bytes;
        let at = index_at + o as u64;
        let uid = TableUid(u64_at(&ib, o));
        let mut b = BlockLoc {
            ts_min: u64_at(&ib, o + 8) as i64,
            ts_max: u64_at(&ib, o + 16) as i64,
            rows: u32_at(&ib, o + 24),
            ncols: u32_at(&ib, o + 28),
            offset: u64_at(&ib, o + 32),
            len: u32_at(&ib, o + 40),
            view: None,
        };
        let sma_len = if version >= 2 { u32_at(&ib, o + 44) } else { 0 };
        if b.offset < HEADER_BYTES
            || b.offset.saturating_add(b.len as u64 + sma_len as u64) > index_at
        {
            return Err(corrupt(
                path,
                at,
                format!("block of table uid {uid} lies outside the block area"),
            ));
        }
        if version >= 3 {
            let (start, block_rows) = (u32_at(&ib, o + 48), u32_at(&ib, o + 52));
            if start != 0 || block_rows != b.rows {
                b.view = Some(view_of(
                    path,
                    at,
                    uid,
                    &b,
                    sma_len,
                    start,
                    block_rows,
                    &mut shared,
                )?);
            }
        }
        if sma_len > 0 {
            sma.insert(b.offset, sma_len);
        }
        if b.view.is_none() {
            own.push((b.offset, at));
        }
        index.entry(uid).or_default().push(b);
    }
    // A block is either one subtable's or shared, never both: a view of a block another
    // entry calls its own would hand that entry the other subtables' rows (or a merge would
    // move the shared block whole under one subtable's SMA).
    if let Some((off, at)) = own.iter().find(|(off, _)| shared.contains_key(off)) {
        return Err(corrupt(
            path,
            *at,
            format!("the block at {off} is listed both as one subtable's own and as shared"),
        ));
    }
    let ts_max = index.values().flatten().map(|b| b.ts_max).max();
    Ok(SttFile {
        id,
        bytes,
        file,
        index,
        sma_len: sma,
        ts_max,
    })
}

/// Checks one subtable's view of a shared block against the block's other views: the rows
/// lie inside the block, follow the previous view's, and every view agrees on the block's
/// length, columns and rows; a shared block has no SMA record.
#[allow(clippy::too_many_arguments)]
fn view_of(
    path: &Path,
    at: u64,
    uid: TableUid,
    b: &BlockLoc,
    sma_len: u32,
    start: u32,
    block_rows: u32,
    shared: &mut HashMap<u64, (u32, u32, u32, u32)>,
) -> Result<block::RowView> {
    let end = start.checked_add(b.rows).filter(|&e| e <= block_rows);
    let bad = |why: String| {
        corrupt(
            path,
            at,
            format!("table uid {uid}'s rows in the block at {}: {why}", b.offset),
        )
    };
    let Some(end) = end.filter(|_| b.rows > 0) else {
        return Err(bad(format!(
            "rows {start}..+{} do not lie inside its {block_rows} rows",
            b.rows
        )));
    };
    if sma_len != 0 {
        return Err(bad("a shared block has no SMA record".into()));
    }
    let seen = shared
        .entry(b.offset)
        .or_insert((b.len, b.ncols, block_rows, 0));
    if (seen.0, seen.1, seen.2) != (b.len, b.ncols, block_rows) {
        return Err(bad(format!(
            "the block is {} bytes, {} columns and {} rows by one entry and {} bytes, {} columns and {block_rows} rows by this one",
            seen.0, seen.1, seen.2, b.len, b.ncols
        )));
    }
    if start < seen.3 {
        return Err(bad(format!(
            "rows from {start} overlap another subtable's, which end at {}",
            seen.3
        )));
    }
    seen.3 = end;
    Ok(block::RowView { start, block_rows })
}

/// Decoded shared blocks a reader of many subtables keeps while it walks them (a merge,
/// by uid): a shared block holds many subtables' runs, and each would otherwise decode it
/// whole again. Holds at most [`ViewCache::BLOCKS`] blocks.
#[derive(Default)]
pub struct ViewCache {
    blocks: std::collections::VecDeque<DecodedShared>,
}

/// A shared block's offset, the columns asked of it and those columns decoded whole.
type DecodedShared = (u64, Vec<(usize, DataType)>, Vec<Column>);

impl ViewCache {
    /// One per column layout whose subtables a uid order interleaves (TSBS: two).
    const BLOCKS: usize = 4;
}

impl SttFile {
    /// [`SttFile::read`], decoding a shared block once for all its views read through
    /// `cache`.
    pub fn read_with(
        &self,
        loc: &BlockLoc,
        wanted: &[(usize, DataType)],
        cache: &mut ViewCache,
    ) -> Result<Vec<Column>> {
        if loc.view.is_none() {
            return self.read(loc, wanted);
        }
        let hit = cache
            .blocks
            .iter()
            .find(|(off, w, _)| *off == loc.offset && w.as_slice() == wanted);
        if let Some((_, _, cols)) = hit {
            return Ok(loc.view_slice(cols));
        }
        let cols = self.read(&loc.whole_block(), wanted)?;
        let out = loc.view_slice(&cols);
        if cache.blocks.len() >= ViewCache::BLOCKS {
            cache.blocks.pop_front();
        }
        cache.blocks.push_back((loc.offset, wanted.to_vec(), cols));
        Ok(out)
    }

    pub fn blocks(&self, uid: TableUid) -> &[BlockLoc] {
        self.index.get(&uid).map(Vec::as_slice).unwrap_or(&[])
    }

    pub fn uids(&self) -> impl Iterator<Item = TableUid> + '_ {
        self.index.keys().copied()
    }

    pub fn read(&self, loc: &BlockLoc, wanted: &[(usize, DataType)]) -> Result<Vec<Column>> {
        block::read_columns(&self.file.file, &self.file.path, loc, wanted)
    }

    /// The rows of `lo..=hi` of a block for a query, through the decoded-column cache, which it
    /// fills (see [`block::read_columns_range`]). An STT file is written whole before it is
    /// opened and never changes after, so its blocks are as safe to cache as a data file's
    /// committed ones; until compaction merges them away, every query on recent data would
    /// otherwise decode them again.
    pub fn read_range(
        &self,
        loc: &BlockLoc,
        wanted: &[(usize, DataType)],
        lo: i64,
        hi: i64,
    ) -> Result<Vec<Column>> {
        block::read_columns_range(
            &self.file.file,
            &self.file.path,
            self.file.token,
            loc,
            wanted,
            lo,
            hi,
        )
    }

    /// The raw bytes of a block and of its SMA record (version 2 files), for a merge that
    /// moves the block into a data file unchanged. `None` when the block has no SMA.
    pub fn raw_block(&self, loc: &BlockLoc) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let Some(&sma_len) = self.sma_len.get(&loc.offset).filter(|_| loc.view.is_none()) else {
            return Ok(None);
        };
        let all = block::read_at(
            &self.file.file,
            &self.file.path,
            loc.offset,
            loc.len as usize + sma_len as usize,
        )?;
        let (b, s) = all.split_at(loc.len as usize);
        // Checked here so that a damaged SMA never reaches a data file.
        block::decode_sma(s, &self.file.path, loc.offset + loc.len as u64)?;
        Ok(Some((b.to_vec(), s.to_vec())))
    }

    pub fn mark_obsolete(&self) {
        self.file.mark_obsolete();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tidal_common::ColumnData;

    #[test]
    fn blocks_under_minrows_are_encoded_quickly_without_sma_and_read_back_alike() {
        let dir = tempfile::tempdir().unwrap();
        let types = [DataType::Timestamp, DataType::BigInt];
        let codecs: Vec<ColumnCodec> = types
            .iter()
            .map(|&t| ColumnCodec::default_for(t, 2))
            .collect();
        // Values jumping back and forth, which frame of reference packs smaller than delta-i.
        let cols = |n: i64| {
            vec![
                Column::new(ColumnData::Timestamp((0..n).map(|i| i * 10).collect())),
                Column::new(ColumnData::Int(
                    (0..n)
                        .map(|i| if i % 2 == 0 { 0 } else { 1 << 20 })
                        .collect(),
                )),
            ]
        };
        let mut w = SttWriter::create(dir.path(), 0, 1).unwrap();
        // Subtable 1: 10 rows. Subtable 2: 250 rows in blocks of 120, 120 and 10.
        w.add_table(TableUid(1), &cols(10), &types, &codecs, 120, 100)
            .unwrap();
        w.add_table(TableUid(2), &cols(250), &types, &codecs, 120, 100)
            .unwrap();
        let f = w.finish().unwrap();
        let wanted: Vec<(usize, DataType)> = types.iter().copied().enumerate().collect();
        let mut seen = Vec::new();
        for (uid, n) in [(1u64, 10i64), (2, 250)] {
            let mut back: Vec<i64> = Vec::new();
            for loc in f.blocks(TableUid(uid)) {
                let c = f.read(loc, &wanted).unwrap();
                // A small block has no SMA, so a merge cannot move it (it never would).
                let has_sma = f.raw_block(loc).unwrap().is_some();
                let raw = block::read_at(&f.file.file, &f.file.path, loc.offset, loc.len as usize)
                    .unwrap();
                seen.push((uid, loc.rows, block::stage1_id_of(&raw, 1), has_sma));
                let ColumnData::Int(v) = &c[1].data else {
                    panic!("{c:?}")
                };
                back.extend(v);
            }
            let ColumnData::Int(want) = &cols(n)[1].data else {
                unreachable!()
            };
            assert_eq!(&back, want, "subtable {uid}");
        }
        // Stage-1 ids of codec/FORMAT.md.
        let (delta_i, bit_packing) = (2u8, 1u8);
        assert_eq!(
            seen,
            vec![
                (1, 10, delta_i, false),
                (2, 120, bit_packing, true),
                (2, 120, bit_packing, true),
                (2, 10, delta_i, false)
            ]
        );
    }

    /// Two layouts (a TSBS-like pair of STABLEs whose subtables alternate by uid).
    fn layouts() -> [(Vec<DataType>, Vec<ColumnCodec>); 2] {
        let mk = |types: Vec<DataType>| {
            let codecs = types
                .iter()
                .map(|&t| ColumnCodec::default_for(t, 2))
                .collect();
            (types, codecs)
        };
        [
            mk(vec![DataType::Timestamp, DataType::BigInt]),
            mk(vec![
                DataType::Timestamp,
                DataType::Double,
                DataType::Double,
            ]),
        ]
    }

    /// Subtable `uid`'s `n` rows under layout `types`: ts from `uid`, values from both.
    fn rows_of(uid: u64, n: usize, types: &[DataType]) -> Vec<Column> {
        let ts: Vec<i64> = (0..n as i64)
            .map(|i| 1_000 + i * 10 + uid as i64 % 3)
            .collect();
        let mut cols = vec![Column::new(ColumnData::Timestamp(ts))];
        for (k, t) in types.iter().enumerate().skip(1) {
            cols.push(Column::new(match t {
                DataType::BigInt => {
                    ColumnData::Int((0..n as i64).map(|i| uid as i64 * 100 + i).collect())
                }
                _ => ColumnData::Float(
                    (0..n)
                        .map(|i| uid as f64 + i as f64 / 8.0 + k as f64)
                        .collect(),
                ),
            }));
        }
        cols
    }

    fn write_small_tables(dir: &Path, maxrows: usize) -> (SttFile, Vec<(u64, usize)>) {
        let ls = layouts();
        let mut w = SttWriter::create(dir, 0, 1).unwrap();
        let mut tables = Vec::new();
        for uid in 1..=300u64 {
            // 1..=7 rows each, and every 50th subtable a big one of its own blocks.
            let n = if uid % 50 == 0 {
                130
            } else {
                1 + (uid as usize * 5) % 7
            };
            let (types, codecs) = &ls[(uid % 2) as usize];
            w.add_table(
                TableUid(uid),
                &rows_of(uid, n, types),
                types,
                codecs,
                maxrows,
                100,
            )
            .unwrap();
            tables.push((uid, n));
        }
        (w.finish().unwrap(), tables)
    }

    #[test]
    fn small_subtables_share_blocks_and_each_reads_back_its_own_rows() {
        let dir = tempfile::tempdir().unwrap();
        let ls = layouts();
        let (f, tables) = write_small_tables(dir.path(), 120);
        let mut cache = ViewCache::default();
        let mut shared_blocks = std::collections::HashSet::new();
        let mut own_blocks = 0;
        for reopened in [false, true] {
            let f = if reopened {
                open(&dir.path().join(file_name(0, 1)), 1).unwrap()
            } else {
                open(&f.file.path, 1).unwrap()
            };
            for &(uid, n) in &tables {
                let types = &ls[(uid % 2) as usize].0;
                let wanted: Vec<(usize, DataType)> = types.iter().copied().enumerate().collect();
                let want = rows_of(uid, n, types);
                let mut back: Vec<Column> = Vec::new();
                for loc in f.blocks(TableUid(uid)) {
                    let cols = f.read(loc, &wanted).unwrap();
                    assert_eq!(
                        f.read_with(loc, &wanted, &mut cache).unwrap(),
                        cols,
                        "uid {uid}"
                    );
                    assert_eq!(
                        f.read_range(loc, &wanted, i64::MIN, i64::MAX).unwrap(),
                        cols,
                        "uid {uid}"
                    );
                    let ts = block::ts_slice(&cols[0]);
                    assert_eq!((ts[0], ts[ts.len() - 1]), (loc.ts_min, loc.ts_max));
                    match loc.view {
                        Some(v) => {
                            assert!(n < 100 && v.block_rows <= 120, "uid {uid}: {loc:?}");
                            assert_eq!(f.raw_block(loc).unwrap(), None);
                            shared_blocks.insert(loc.offset);
                        }
                        None => own_blocks += 1,
                    }
                    if back.is_empty() {
                        back = cols;
                    } else {
                        for (b, c) in back.iter_mut().zip(&cols) {
                            b.extend(c);
                        }
                    }
                }
                assert_eq!(back, want, "uid {uid}");
            }
        }
        // 294 small subtables of 4 rows on average in two layouts, 120 rows a block: about
        // 10 shared blocks instead of 294; the six big subtables have two blocks each.
        assert!(
            (8..=14).contains(&shared_blocks.len()),
            "{}",
            shared_blocks.len()
        );
        assert_eq!(own_blocks, 2 * 6 * 2);
    }

    /// The index entry of `uid`'s first block: (entry's offset in the file, its bytes).
    fn entry_at(path: &Path, uid: u64) -> usize {
        let b = std::fs::read(path).unwrap();
        let foot = b.len() - FOOTER_BYTES as usize;
        let index_at = u64_at(&b, foot) as usize;
        let n = u32_at(&b, index_at) as usize;
        (0..n)
            .map(|i| index_at + 4 + i * ENTRY_BYTES)
            .find(|&o| u64_at(&b, o) == uid)
            .unwrap()
    }

    /// Rewrites `path` with `edit` applied to its bytes and the index checksum made to match.
    fn edit_index(path: &Path, edit: impl FnOnce(&mut Vec<u8>)) {
        let mut b = std::fs::read(path).unwrap();
        edit(&mut b);
        let foot = b.len() - FOOTER_BYTES as usize;
        let index_at = u64_at(&b, foot) as usize;
        let crc = crc32c::crc32c(&b[index_at..foot]);
        b[foot + 12..foot + 16].copy_from_slice(&crc.to_le_bytes());
        std::fs::write(path, b).unwrap();
    }

    #[test]
    fn a_view_outside_its_block_or_over_another_is_a_corruption_error() {
        let dir = tempfile::tempdir().unwrap();
        let (f, _) = write_small_tables(dir.path(), 120);
        let path = f.file.path.clone();
        drop(f);
        let good = std::fs::read(&path).unwrap();
        // Subtables 1 and 3 share a block (layout 1, uids in order): 1's rows come first.
        let (e1, e3) = (entry_at(&path, 1), entry_at(&path, 3));
        assert_eq!(u64_at(&good, e1 + 32), u64_at(&good, e3 + 32));
        type Edit = Box<dyn Fn(&mut Vec<u8>)>;
        let cases: [(&str, Edit); 4] = [
            (
                "do not lie inside",
                Box::new(move |b| b[e3 + 48..e3 + 52].copy_from_slice(&500u32.to_le_bytes())),
            ),
            (
                "overlap another",
                Box::new(move |b| b[e3 + 48..e3 + 52].copy_from_slice(&0u32.to_le_bytes())),
            ),
            (
                "bytes",
                Box::new(move |b| b[e3 + 52..e3 + 56].copy_from_slice(&119u32.to_le_bytes())),
            ),
            (
                "no SMA",
                Box::new(move |b| b[e3 + 44..e3 + 48].copy_from_slice(&8u32.to_le_bytes())),
            ),
        ];
        // A big subtable's own block listed at a shared block's offset.
        let (e50, shared_at) = (entry_at(&path, 50), u64_at(&good, e1 + 32));
        let both: (&str, Edit) = (
            "both as one subtable's own and as shared",
            Box::new(move |b| b[e50 + 32..e50 + 40].copy_from_slice(&shared_at.to_le_bytes())),
        );
        for (want, edit) in cases.into_iter().chain([both]) {
            std::fs::write(&path, &good).unwrap();
            edit_index(&path, |b| edit(b));
            match open(&path, 1) {
                Err(VnodeError::Corruption { reason, .. }) => {
                    assert!(reason.contains(want), "{want}: {reason}")
                }
                Err(e) => panic!("{want}: {e}"),
                Ok(_) => panic!("{want}: opened"),
            }
        }
    }

    #[test]
    fn a_version_2_file_is_still_read() {
        let dir = tempfile::tempdir().unwrap();
        let ls = layouts();
        let (types, codecs) = &ls[0];
        let mut w = SttWriter::create(dir.path(), 0, 1).unwrap();
        for uid in 1..=3u64 {
            w.add_table(
                TableUid(uid),
                &rows_of(uid, 150, types),
                types,
                codecs,
                100,
                10,
            )
            .unwrap();
        }
        let path = w.finish().unwrap().file.path.clone();
        // The same file as version 2 wrote it: 48-byte entries, no view fields.
        let b = std::fs::read(&path).unwrap();
        let foot = b.len() - FOOTER_BYTES as usize;
        let index_at = u64_at(&b, foot) as usize;
        let n = u32_at(&b, index_at) as usize;
        let mut v2 = b[..index_at].to_vec();
        v2[8..12].copy_from_slice(&2u32.to_le_bytes());
        let mut ib = (n as u32).to_le_bytes().to_vec();
        for i in 0..n {
            let o = index_at + 4 + i * ENTRY_BYTES;
            ib.extend_from_slice(&b[o..o + ENTRY_BYTES_V2]);
        }
        v2.extend_from_slice(&ib);
        v2.extend_from_slice(&(index_at as u64).to_le_bytes());
        v2.extend_from_slice(&(ib.len() as u32).to_le_bytes());
        v2.extend_from_slice(&crc32c::crc32c(&ib).to_le_bytes());
        v2.extend_from_slice(FOOTER_MAGIC);
        let p2 = dir.path().join(file_name(0, 2));
        std::fs::write(&p2, v2).unwrap();
        let (f3, f2) = (open(&path, 1).unwrap(), open(&p2, 2).unwrap());
        let wanted: Vec<(usize, DataType)> = types.iter().copied().enumerate().collect();
        for uid in 1..=3u64 {
            let (a, b) = (f3.blocks(TableUid(uid)), f2.blocks(TableUid(uid)));
            assert_eq!(a, b);
            assert_eq!(a.len(), 2);
            for loc in a {
                assert_eq!(
                    f2.read(loc, &wanted).unwrap(),
                    f3.read(loc, &wanted).unwrap()
                );
                assert!(f2.raw_block(loc).unwrap().is_some());
            }
        }
    }
}
