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
/// Version 2 adds each block's SMA record right after the block (entries of 48 bytes);
/// version 1 files (44-byte entries, no SMA) are still read.
pub const STT_VERSION: u32 = 2;
const HEADER_BYTES: u64 = 16;
const FOOTER_BYTES: u64 = 24;
const ENTRY_BYTES_V1: usize = 44;
const ENTRY_BYTES: usize = 48;

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
        })
    }

    /// Adds the rows of one subtable, split into blocks of at most `maxrows` rows. A block of
    /// fewer than `minrows` rows is encoded with [`block::Effort::Quick`] and has no SMA
    /// record: a merge never moves such a block into a data file as it is (compaction), it
    /// decodes it and encodes its rows again there, so the search for the smallest encoding
    /// would be spent twice, and the SMA (only ever read by that move) not at all; with a
    /// row or two per subtable it was about half of the file.
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
            let ts = part.first().map(block::ts_slice).unwrap_or(&[]);
            let (ts_min, ts_max) = (
                ts.first().copied().unwrap_or(0),
                ts.last().copied().unwrap_or(0),
            );
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
                },
                sma_len,
            ));
            self.at += self.buf.len() as u64;
            s = e;
        }
        Ok(())
    }

    /// Writes the index and footer, fsyncs, renames into place and opens the result.
    pub fn finish(mut self) -> Result<SttFile> {
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
        2 => ENTRY_BYTES,
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
    for i in 0..n {
        let o = 4 + i * entry_bytes;
        let uid = TableUid(u64_at(&ib, o));
        let b = BlockLoc {
            ts_min: u64_at(&ib, o + 8) as i64,
            ts_max: u64_at(&ib, o + 16) as i64,
            rows: u32_at(&ib, o + 24),
            ncols: u32_at(&ib, o + 28),
            offset: u64_at(&ib, o + 32),
            len: u32_at(&ib, o + 40),
        };
        let sma_len = if version >= 2 { u32_at(&ib, o + 44) } else { 0 };
        if b.offset < HEADER_BYTES
            || b.offset.saturating_add(b.len as u64 + sma_len as u64) > index_at
        {
            return Err(corrupt(
                path,
                index_at + o as u64,
                format!("block of table uid {uid} lies outside the block area"),
            ));
        }
        if sma_len > 0 {
            sma.insert(b.offset, sma_len);
        }
        index.entry(uid).or_default().push(b);
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

impl SttFile {
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
        let Some(&sma_len) = self.sma_len.get(&loc.offset) else {
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
}
