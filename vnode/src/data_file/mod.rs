//! The data files of one time window (`DURATION`): `f<fid>.<data_id>.data` (column blocks of one
//! subtable each, up to `MAXROWS` rows), `f<fid>.<data_id>.sma` (per block of `MINROWS` rows or
//! more, per column: min, max, sum, count, NULL count) and `f<fid>.<head_id>.head` (per
//! subtable, its blocks in ts order with their time range, row count and offsets; compressed).
//! Layout in `../tsdb/FORMAT.md`.
//!
//! Owns: appending merged blocks to a window and publishing a new head. Invariants: `.data` and
//! `.sma` only grow (append-only); bytes past the lengths the committed manifest records are
//! garbage from an interrupted merge and are cut off before the next append, so a reader of an
//! older snapshot never sees a byte it relies on change. A head file is written once (temp file,
//! fsync, rename) and lists, per subtable, non-overlapping blocks sorted by ts; every entry lies
//! inside the committed lengths (checked at open). Blocks a merge replaced stay in `.data` as
//! garbage until `COMPACT` rewrites the window into a new `data_id`.

use crate::block::{self, BlockLoc, ColStats, ColumnCodec};
use crate::error::{Result, VnodeError};
use crate::fsutil::{self, FileRef};
use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tidal_common::{Column, DataType, TableUid};

pub const HEAD_MAGIC: &[u8; 8] = b"TIDALHED";
pub const FOOTER_MAGIC: &[u8; 8] = b"TIDALEND";
/// Version 2 compresses the body with zstd and lets a block have no SMA record (`sma_len`
/// 0); version 1 heads are still read.
pub const HEAD_VERSION: u32 = 2;
/// Fast: a merge writes the whole head again, and level 1 already takes a head of many
/// small blocks to a fifth.
const HEAD_ZSTD_LEVEL: i32 = 1;
const HEADER_BYTES: usize = 16;
const FOOTER_BYTES: usize = 12;
const ENTRY_BYTES: usize = 48;

pub fn data_name(fid: i64, data_id: u64) -> String {
    format!("f{fid}.{data_id}.data")
}
pub fn sma_name(fid: i64, data_id: u64) -> String {
    format!("f{fid}.{data_id}.sma")
}
pub fn head_name(fid: i64, head_id: u64) -> String {
    format!("f{fid}.{head_id}.head")
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockEntry {
    pub loc: BlockLoc,
    pub sma_off: u64,
    /// 0: the block has no SMA record (it has fewer than `MINROWS` rows).
    pub sma_len: u32,
}

impl BlockEntry {
    pub fn has_sma(&self) -> bool {
        self.sma_len > 0
    }
}

/// Unread bytes between two SMA records that [`DataSet::read_smas`] still reads through
/// rather than issuing a second read.
pub const SMA_READ_GAP_BYTES: u64 = 4096;
/// Most bytes one read of [`DataSet::read_smas`] covers.
pub const SMA_READ_SPAN_BYTES: u64 = 1 << 20;

/// One committed version of a window's data files.
pub struct DataSet {
    pub data_id: u64,
    pub head_id: u64,
    pub data_len: u64,
    pub sma_len: u64,
    /// Bytes of `.data` no head entry refers to any more.
    pub garbage_bytes: u64,
    data: Arc<FileRef>,
    sma: Arc<FileRef>,
    head: FileRef,
    pub head_bytes: u64,
    index: BTreeMap<TableUid, Vec<BlockEntry>>,
    /// Statistics over every block of a set of subtables (one STABLE's), by (its key,
    /// columns): see [`DataSet::group_stats`]. The data set never changes, so neither do
    /// they; bounded by [`GROUP_STATS_MAX`].
    group_stats: parking_lot::Mutex<GroupStatsCache>,
    /// The greatest ts of any block (`None`: no blocks).
    pub ts_max: Option<i64>,
}

/// [`DataSet::group_stats`] by (STABLE, columns).
type GroupStatsCache = HashMap<(String, Vec<usize>), Option<GroupStats>>;

/// A set of subtables' statistics over all their blocks in one data set: rows, and per
/// column what [`ColStats`] says of one block (a minimum or maximum only where every block
/// with values has one; sums are not kept).
#[derive(Clone, Debug)]
pub struct GroupStats {
    pub rows: u32,
    pub cols: Vec<ColStats>,
}

/// Most entries of one data set's [`DataSet::group_stats`] cache (STABLEs x column sets
/// filtered on); past it the cache starts over.
pub const GROUP_STATS_MAX: usize = 64;

use crate::block::{corrupt, u32_at, u64_at};

/// Encodes a head file (version 2: the body zstd-compressed).
pub fn encode_head(index: &BTreeMap<TableUid, Vec<BlockEntry>>) -> Vec<u8> {
    let blocks: usize = index.values().map(Vec::len).sum();
    let mut body = Vec::with_capacity(4 + index.len() * 12 + blocks * ENTRY_BYTES);
    body.extend_from_slice(&(index.len() as u32).to_le_bytes());
    for (uid, es) in index {
        body.extend_from_slice(&uid.0.to_le_bytes());
        body.extend_from_slice(&(es.len() as u32).to_le_bytes());
        for e in es {
            body.extend_from_slice(&e.loc.ts_min.to_le_bytes());
            body.extend_from_slice(&e.loc.ts_max.to_le_bytes());
            body.extend_from_slice(&e.loc.rows.to_le_bytes());
            body.extend_from_slice(&e.loc.ncols.to_le_bytes());
            body.extend_from_slice(&e.loc.offset.to_le_bytes());
            body.extend_from_slice(&e.loc.len.to_le_bytes());
            body.extend_from_slice(&e.sma_off.to_le_bytes());
            body.extend_from_slice(&e.sma_len.to_le_bytes());
        }
    }
    let mut b = Vec::with_capacity(HEADER_BYTES + 8 + body.len() / 4 + FOOTER_BYTES);
    b.extend_from_slice(HEAD_MAGIC);
    b.extend_from_slice(&HEAD_VERSION.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    crate::codec::put_compressed(&mut b, &body, HEAD_ZSTD_LEVEL);
    let crc = crc32c::crc32c(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    b.extend_from_slice(FOOTER_MAGIC);
    b
}

/// Decodes and checks a head file (version 1 or 2) against the committed data/sma lengths.
pub fn decode_head(
    b: &[u8],
    path: &Path,
    data_len: u64,
    sma_len: u64,
) -> Result<BTreeMap<TableUid, Vec<BlockEntry>>> {
    if b.len() < HEADER_BYTES + 4 + FOOTER_BYTES {
        return Err(corrupt(
            path,
            0,
            format!("head file of {} bytes is too short", b.len()),
        ));
    }
    if b.get(0..8) != Some(&HEAD_MAGIC[..]) {
        return Err(corrupt(path, 0, "bad magic, not a Tidal head file".into()));
    }
    let version = u32_at(b, 8);
    if version != 1 && version != HEAD_VERSION {
        return Err(corrupt(
            path,
            8,
            format!("unsupported head version {version}"),
        ));
    }
    let body_end = b.len() - FOOTER_BYTES;
    if b.get(body_end + 4..) != Some(&FOOTER_MAGIC[..]) {
        return Err(corrupt(
            path,
            body_end as u64,
            "bad footer magic (truncated file?)".into(),
        ));
    }
    let stored = u32_at(b, body_end);
    let actual = crc32c::crc32c(b.get(..body_end).unwrap_or(&[]));
    if stored != actual {
        return Err(corrupt(
            path,
            body_end as u64,
            format!("head checksum mismatch (stored {stored:#010x}, computed {actual:#010x})"),
        ));
    }
    if version == 1 {
        let body = b.get(HEADER_BYTES..body_end).unwrap_or(&[]);
        return parse_head_body(body, HEADER_BYTES as u64, path, data_len, sma_len);
    }
    let compressed = b.get(HEADER_BYTES..body_end).unwrap_or(&[]);
    let raw_len = crate::codec::compressed_len(compressed).unwrap_or(0);
    // Each block takes at least a directory and a one-byte chunk in `.data`, so a head of
    // the committed data can list no more blocks than that; the bound keeps a damaged length
    // from asking for memory the data could never need.
    let blocks_max = data_len / (block::dir_bytes(1) + 1);
    let raw_max = 4u64.saturating_add(blocks_max.saturating_mul(12 + ENTRY_BYTES as u64));
    if raw_len > raw_max {
        return Err(corrupt(
            path,
            HEADER_BYTES as u64,
            format!("head body of {raw_len} bytes is more than {data_len} bytes of data can index"),
        ));
    }
    let body = crate::codec::get_compressed(compressed)
        .map_err(|e| corrupt(path, (HEADER_BYTES + 8) as u64, format!("head body {e}")))?;
    parse_head_body(&body, 0, path, data_len, sma_len)
}

/// The block index of a head's (decompressed) body; `base` is the body's offset in the file
/// for error messages (0: offsets are into the decompressed body).
fn parse_head_body(
    b: &[u8],
    base: u64,
    path: &Path,
    data_len: u64,
    sma_len: u64,
) -> Result<BTreeMap<TableUid, Vec<BlockEntry>>> {
    let at = |o: usize| base + o as u64;
    if b.len() < 4 {
        return Err(corrupt(path, at(0), "head body is too short".into()));
    }
    let body_end = b.len();
    let ntables = u32_at(b, 0) as usize;
    let mut o = 4;
    let mut index = BTreeMap::new();
    for _ in 0..ntables {
        if o + 12 > body_end {
            return Err(corrupt(
                path,
                at(o),
                "head ends inside a table entry".into(),
            ));
        }
        let uid = TableUid(u64_at(b, o));
        let n = u32_at(b, o + 8) as usize;
        o += 12;
        if n.saturating_mul(ENTRY_BYTES) > body_end - o {
            return Err(corrupt(
                path,
                at(o),
                format!("table uid {uid} claims {n} blocks, more than the file holds"),
            ));
        }
        let mut es = Vec::with_capacity(n);
        let mut prev_max: Option<i64> = None;
        for _ in 0..n {
            let e = BlockEntry {
                loc: BlockLoc {
                    ts_min: u64_at(b, o) as i64,
                    ts_max: u64_at(b, o + 8) as i64,
                    rows: u32_at(b, o + 16),
                    ncols: u32_at(b, o + 20),
                    offset: u64_at(b, o + 24),
                    len: u32_at(b, o + 32),
                    view: None,
                },
                sma_off: u64_at(b, o + 36),
                sma_len: u32_at(b, o + 44),
            };
            let bad = e.loc.offset.saturating_add(e.loc.len as u64) > data_len
                || e.sma_off.saturating_add(e.sma_len as u64) > sma_len
                || e.loc.ts_min > e.loc.ts_max
                || prev_max.is_some_and(|p| p >= e.loc.ts_min);
            if bad {
                return Err(corrupt(
                    path,
                    at(o),
                    format!("block entry of table uid {uid} is out of bounds or out of order"),
                ));
            }
            prev_max = Some(e.loc.ts_max);
            es.push(e);
            o += ENTRY_BYTES;
        }
        index.insert(uid, es);
    }
    if o != body_end {
        return Err(corrupt(
            path,
            at(o),
            "trailing bytes after the last table entry".into(),
        ));
    }
    Ok(index)
}

impl DataSet {
    /// Opens a committed window version.
    pub fn open(
        dir: &Path,
        fid: i64,
        data_id: u64,
        head_id: u64,
        data_len: u64,
        sma_len: u64,
        garbage_bytes: u64,
    ) -> Result<DataSet> {
        let data = FileRef::open(&dir.join(data_name(fid, data_id)))?;
        let sma = FileRef::open(&dir.join(sma_name(fid, data_id)))?;
        let head = FileRef::open(&dir.join(head_name(fid, head_id)))?;
        for (f, need) in [(&data, data_len), (&sma, sma_len)] {
            let have = f.len()?;
            if have < need {
                return Err(corrupt(
                    &f.path,
                    have,
                    format!("file holds {have} bytes but the manifest committed {need}"),
                ));
            }
        }
        Self::with_files(
            data_id,
            head_id,
            (data_len, sma_len, garbage_bytes),
            Arc::new(data),
            Arc::new(sma),
            head,
        )
    }

    fn with_files(
        data_id: u64,
        head_id: u64,
        (data_len, sma_len, garbage_bytes): (u64, u64, u64),
        data: Arc<FileRef>,
        sma: Arc<FileRef>,
        head: FileRef,
    ) -> Result<DataSet> {
        let head_bytes = head.len()?;
        let hb = block::read_at(&head.file, &head.path, 0, head_bytes as usize)?;
        let index = decode_head(&hb, &head.path, data_len, sma_len)?;
        Ok(DataSet {
            data_id,
            head_id,
            data_len,
            sma_len,
            garbage_bytes,
            data,
            sma,
            head,
            head_bytes,
            ts_max: index.values().flatten().map(|e| e.loc.ts_max).max(),
            index,
            group_stats: parking_lot::Mutex::new(HashMap::new()),
        })
    }

    /// The statistics of `columns` over every block of `uids` (the subtables of the STABLE
    /// named by `key`: the caller passes all of them, so that one computation serves every
    /// query on that STABLE), computed from the SMA records on first use and then kept.
    /// `None` when they cannot be summed up (more than `u32::MAX` rows).
    pub fn group_stats(
        &self,
        key: &str,
        uids: &[TableUid],
        columns: &[usize],
    ) -> Result<Option<GroupStats>> {
        let k = (key.to_string(), columns.to_vec());
        if let Some(g) = self.group_stats.lock().get(&k) {
            return Ok(g.clone());
        }
        let entries: Vec<&BlockEntry> = uids.iter().flat_map(|u| self.blocks(*u)).collect();
        let smas = self.read_smas(&entries)?;
        let mut rows: u32 = 0;
        let mut acc: Vec<Option<ColStats>> = vec![None; columns.len()];
        let mut fits = true;
        for (e, sma) in entries.iter().zip(smas) {
            // A small block's statistics are computed once here and kept with the rest.
            let all = match sma {
                Some(all) => all,
                None => block::block_sma(&self.data.file, &self.data.path, &e.loc)?,
            };
            let Some(r) = rows.checked_add(e.loc.rows) else {
                fits = false;
                break;
            };
            rows = r;
            for (a, s) in acc
                .iter_mut()
                .zip(ColStats::project(&all, columns, e.loc.rows))
            {
                *a = Some(match a.take() {
                    None => s,
                    Some(t) => match t.combine(&s) {
                        Some(c) => c,
                        None => {
                            fits = false;
                            break;
                        }
                    },
                });
            }
        }
        let g = fits.then(|| GroupStats {
            rows,
            cols: acc
                .into_iter()
                .map(|a| a.unwrap_or(ColStats::all_null(0)))
                .collect(),
        });
        let mut cache = self.group_stats.lock();
        if cache.len() >= GROUP_STATS_MAX {
            cache.clear();
        }
        cache.insert(k, g.clone());
        Ok(g)
    }

    /// The encoded bytes of a block, as written.
    #[cfg(test)]
    pub fn raw_block(&self, e: &BlockEntry) -> Result<Vec<u8>> {
        block::read_at(
            &self.data.file,
            &self.data.path,
            e.loc.offset,
            e.loc.len as usize,
        )
    }

    pub fn blocks(&self, uid: TableUid) -> &[BlockEntry] {
        self.index.get(&uid).map(Vec::as_slice).unwrap_or(&[])
    }

    pub fn index(&self) -> &BTreeMap<TableUid, Vec<BlockEntry>> {
        &self.index
    }

    pub fn read(&self, e: &BlockEntry, wanted: &[(usize, DataType)]) -> Result<Vec<Column>> {
        block::read_columns(&self.data.file, &self.data.path, &e.loc, wanted)
    }

    /// The rows of `lo..=hi` of a block for a query (see [`block::read_columns_range`]).
    pub fn read_range(
        &self,
        e: &BlockEntry,
        wanted: &[(usize, DataType)],
        lo: i64,
        hi: i64,
    ) -> Result<Vec<Column>> {
        block::read_columns_range(
            &self.data.file,
            &self.data.path,
            self.data.token,
            &e.loc,
            wanted,
            lo,
            hi,
        )
    }

    /// The block's SMA record; `None` when it has none (see [`BlockEntry::sma_len`]).
    pub fn read_sma(&self, e: &BlockEntry) -> Result<Option<Vec<ColStats>>> {
        if !e.has_sma() {
            return Ok(None);
        }
        let b = block::read_at(
            &self.sma.file,
            &self.sma.path,
            e.sma_off,
            e.sma_len as usize,
        )?;
        block::decode_sma(&b, &self.sma.path, e.sma_off).map(Some)
    }

    /// [`DataSet::read_sma`] for many blocks, in the order given. Records that lie close
    /// together in the SMA file (the blocks of neighbouring subtables are written side by side)
    /// are read with one read per run of at most [`SMA_READ_SPAN_BYTES`].
    pub fn read_smas(&self, entries: &[&BlockEntry]) -> Result<Vec<Option<Vec<ColStats>>>> {
        let mut order: Vec<usize> = (0..entries.len())
            .filter(|i| entries.get(*i).is_some_and(|e| e.has_sma()))
            .collect();
        order.sort_unstable_by_key(|i| entries.get(*i).map(|e| e.sma_off));
        let mut out: Vec<Option<Vec<ColStats>>> = vec![None; entries.len()];
        let mut k = 0;
        while k < order.len() {
            let first = entries[order[k]];
            let start = first.sma_off;
            let mut end = start + u64::from(first.sma_len);
            let mut j = k + 1;
            while let Some(e) = order.get(j).map(|i| entries[*i]) {
                let e_end = e.sma_off + u64::from(e.sma_len);
                if e.sma_off > end + SMA_READ_GAP_BYTES || e_end - start > SMA_READ_SPAN_BYTES {
                    break;
                }
                end = end.max(e_end);
                j += 1;
            }
            let buf = block::read_at(
                &self.sma.file,
                &self.sma.path,
                start,
                (end - start) as usize,
            )?;
            for i in &order[k..j] {
                let e = entries[*i];
                let at = (e.sma_off - start) as usize;
                let rec = buf.get(at..at + e.sma_len as usize).ok_or_else(|| {
                    block::corrupt(
                        &self.sma.path,
                        e.sma_off,
                        "SMA record outside its read".into(),
                    )
                })?;
                out[*i] = Some(block::decode_sma(rec, &self.sma.path, e.sma_off)?);
            }
            k = j;
        }
        Ok(out)
    }

    pub fn disk_bytes(&self) -> u64 {
        self.data_len + self.sma_len + self.head_bytes
    }

    /// This version is replaced: its head goes when unused; with `with_data` (the window was
    /// rewritten into a new data_id, or dropped) its data and sma files go too.
    pub fn mark_obsolete(&self, with_data: bool) {
        self.head.mark_obsolete();
        if with_data {
            self.data.mark_obsolete();
            self.sma.mark_obsolete();
        }
    }
}

/// Appends blocks to a window's data and sma files and publishes a new head.
pub struct DataAppender {
    dir: PathBuf,
    fid: i64,
    data_id: u64,
    data_path: PathBuf,
    sma_path: PathBuf,
    data: std::io::BufWriter<File>,
    sma: std::io::BufWriter<File>,
    data_at: u64,
    sma_at: u64,
    refs: Option<(Arc<FileRef>, Arc<FileRef>)>,
    buf: Vec<u8>,
    smabuf: Vec<u8>,
    pub blocks_written: u64,
}

fn open_append(path: &Path, valid: u64, create: bool) -> Result<File> {
    let f = OpenOptions::new()
        .create(create)
        .truncate(create)
        .append(!create)
        .write(true)
        .open(path)
        .map_err(|e| VnodeError::io(path, "open for append", e))?;
    if !create {
        // Cut the garbage an interrupted merge left after the committed length.
        f.set_len(valid)
            .map_err(|e| VnodeError::io(path, "truncate to the committed length", e))?;
    }
    Ok(f)
}

impl DataAppender {
    /// Appends to `base`'s files, or starts new files `data_id` when `base` is None.
    pub fn start(
        dir: &Path,
        fid: i64,
        base: Option<&DataSet>,
        data_id: u64,
    ) -> Result<DataAppender> {
        let (data_id, data_at, sma_at, refs) = match base {
            Some(b) => (
                b.data_id,
                b.data_len,
                b.sma_len,
                Some((b.data.clone(), b.sma.clone())),
            ),
            None => (data_id, 0, 0, None),
        };
        let data_path = dir.join(data_name(fid, data_id));
        let sma_path = dir.join(sma_name(fid, data_id));
        let create = base.is_none();
        let data = open_append(&data_path, data_at, create)?;
        let sma = open_append(&sma_path, sma_at, create)?;
        Ok(DataAppender {
            dir: dir.to_path_buf(),
            fid,
            data_id,
            data_path,
            sma_path,
            data: std::io::BufWriter::with_capacity(1 << 20, data),
            sma: std::io::BufWriter::with_capacity(1 << 16, sma),
            data_at,
            sma_at,
            refs,
            buf: Vec::new(),
            smabuf: Vec::new(),
            blocks_written: 0,
        })
    }

    /// Appends one block (all columns the same length, ts sorted and unique), its columns
    /// encoded with `effort`, and its SMA record when it has `sma_rows_min` rows or more (a
    /// smaller block's statistics cost more bytes than its data; readers decode it instead).
    pub fn add_block(
        &mut self,
        cols: &[Column],
        types: &[DataType],
        codecs: &[ColumnCodec],
        effort: block::Effort,
        sma_rows_min: usize,
    ) -> Result<BlockEntry> {
        let ts = cols.first().map(block::ts_slice).unwrap_or(&[]);
        let (ts_min, ts_max) = (
            ts.first().copied().unwrap_or(0),
            ts.last().copied().unwrap_or(0),
        );
        let rows = ts.len() as u32;
        self.buf.clear();
        block::encode_block(cols, types, codecs, effort, &mut self.buf)?;
        self.smabuf.clear();
        if ts.len() >= sma_rows_min {
            block::encode_sma(&block::compute_sma(cols), &mut self.smabuf);
        }
        self.data
            .write_all(&self.buf)
            .map_err(|e| VnodeError::io(&self.data_path, "write", e))?;
        self.sma
            .write_all(&self.smabuf)
            .map_err(|e| VnodeError::io(&self.sma_path, "write", e))?;
        let e = BlockEntry {
            loc: BlockLoc {
                offset: self.data_at,
                len: self.buf.len() as u32,
                ncols: cols.len() as u32,
                rows,
                ts_min,
                ts_max,
                view: None,
            },
            sma_off: self.sma_at,
            sma_len: self.smabuf.len() as u32,
        };
        self.data_at += self.buf.len() as u64;
        self.sma_at += self.smabuf.len() as u64;
        self.blocks_written += 1;
        Ok(e)
    }

    /// Appends an already encoded block and its SMA record unchanged (a merge moving an STT
    /// block whose rows need no merging). `loc` describes the block (its offset is replaced).
    pub fn append_raw(&mut self, block: &[u8], sma: &[u8], loc: &BlockLoc) -> Result<BlockEntry> {
        self.data
            .write_all(block)
            .map_err(|e| VnodeError::io(&self.data_path, "write", e))?;
        self.sma
            .write_all(sma)
            .map_err(|e| VnodeError::io(&self.sma_path, "write", e))?;
        let e = BlockEntry {
            loc: BlockLoc {
                offset: self.data_at,
                len: block.len() as u32,
                view: None,
                ..*loc
            },
            sma_off: self.sma_at,
            sma_len: sma.len() as u32,
        };
        self.data_at += block.len() as u64;
        self.sma_at += sma.len() as u64;
        self.blocks_written += 1;
        Ok(e)
    }

    /// Makes the appended bytes durable, publishes the head `head_id` for `index`, and returns
    /// the new (not yet committed) version. `garbage_bytes` carries over the window's garbage.
    pub fn finish(
        self,
        index: BTreeMap<TableUid, Vec<BlockEntry>>,
        head_id: u64,
        garbage_bytes: u64,
    ) -> Result<DataSet> {
        let DataAppender {
            dir,
            fid,
            data_id,
            data_path,
            sma_path,
            data,
            sma,
            data_at,
            sma_at,
            refs,
            ..
        } = self;
        for (w, p) in [(data, &data_path), (sma, &sma_path)] {
            let f = w
                .into_inner()
                .map_err(|e| VnodeError::io(p, "write", e.into_error()))?;
            f.sync_all().map_err(|e| VnodeError::io(p, "fsync", e))?;
        }
        let (data_ref, sma_ref) = match refs {
            Some(r) => r,
            None => {
                fsutil::sync_dir(&dir)?;
                (
                    Arc::new(FileRef::open(&data_path)?),
                    Arc::new(FileRef::open(&sma_path)?),
                )
            }
        };
        let head_path = dir.join(head_name(fid, head_id));
        let tmp = head_path.with_extension("head.tmp");
        let mut f = fsutil::create(&tmp)?;
        f.write_all(&encode_head(&index))
            .map_err(|e| VnodeError::io(&tmp, "write", e))?;
        fsutil::publish(f, &tmp, &head_path)?;
        let head = FileRef::open(&head_path)?;
        DataSet::with_files(
            data_id,
            head_id,
            (data_at, sma_at, garbage_bytes),
            data_ref,
            sma_ref,
            head,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index() -> BTreeMap<TableUid, Vec<BlockEntry>> {
        let mut index = BTreeMap::new();
        let mut at = 0u64;
        for uid in 1..=300u64 {
            let blocks = (0..(uid % 3 + 1) as i64)
                .map(|k| {
                    let e = BlockEntry {
                        loc: BlockLoc {
                            ts_min: k * 100,
                            ts_max: k * 100 + 99,
                            rows: if k == 0 { 18 } else { 100 },
                            ncols: 9,
                            offset: at,
                            len: 200,
                            view: None,
                        },
                        sma_off: at,
                        sma_len: if k == 0 { 0 } else { 314 },
                    };
                    at += 200;
                    e
                })
                .collect();
            index.insert(TableUid(uid), blocks);
        }
        index
    }

    fn v1_of(v2: &[u8]) -> Vec<u8> {
        let body =
            zstd::stream::decode_all(&v2[HEADER_BYTES + 8..v2.len() - FOOTER_BYTES]).unwrap();
        let mut b = HEAD_MAGIC.to_vec();
        b.extend_from_slice(&1u32.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&body);
        let crc = crc32c::crc32c(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b.extend_from_slice(FOOTER_MAGIC);
        b
    }

    /// `b` with its checksum made to match again.
    fn resealed(mut b: Vec<u8>) -> Vec<u8> {
        let end = b.len() - FOOTER_BYTES;
        let crc = crc32c::crc32c(&b[..end]);
        b[end..end + 4].copy_from_slice(&crc.to_le_bytes());
        b
    }

    #[test]
    fn a_head_is_written_compressed_and_a_version_1_head_reads_the_same() {
        let index = index();
        let path = Path::new("f0.1.head");
        let (data_len, sma_len) = (1 << 20, 1 << 20);
        let v2 = encode_head(&index);
        assert_eq!(u32_at(&v2, 8), 2);
        let v1 = v1_of(&v2);
        assert!(v2.len() * 3 < v1.len(), "{} vs {}", v2.len(), v1.len());
        assert_eq!(decode_head(&v2, path, data_len, sma_len).unwrap(), index);
        assert_eq!(decode_head(&v1, path, data_len, sma_len).unwrap(), index);
        // Entries still checked against the committed lengths.
        let e = decode_head(&v2, path, 100_000, sma_len).unwrap_err();
        assert!(e.to_string().contains("out of bounds"), "{e}");
    }

    #[test]
    fn a_head_whose_body_length_is_wrong_is_a_corruption_error() {
        let path = Path::new("f0.1.head");
        let v2 = encode_head(&index());
        let set_len = |n: u64| {
            let mut b = v2.clone();
            b[HEADER_BYTES..HEADER_BYTES + 8].copy_from_slice(&n.to_le_bytes());
            resealed(b)
        };
        let raw = u64_at(&v2, HEADER_BYTES);
        for (bad, says) in [
            (set_len(raw - 1), "decompresses to"),
            (set_len(raw + 1), "decompresses to"),
            (set_len(u64::MAX), "can index"),
        ] {
            let e = decode_head(&bad, path, 1 << 20, 1 << 20).unwrap_err();
            assert!(
                matches!(&e, VnodeError::Corruption { reason, .. } if reason.contains(says)),
                "{e}"
            );
        }
        // A frame cut short (checksum made to match) does not decompress.
        let mut b = v2.clone();
        b.drain(b.len() - FOOTER_BYTES - 5..b.len() - FOOTER_BYTES);
        let e = decode_head(&resealed(b), path, 1 << 20, 1 << 20).unwrap_err();
        assert!(
            matches!(&e, VnodeError::Corruption { reason, .. } if reason.contains("decompress")),
            "{e}"
        );
        // Any flipped bit fails the checksum first.
        let mut b = v2.clone();
        b[HEADER_BYTES + 3] ^= 1;
        let e = decode_head(&b, path, 1 << 20, 1 << 20).unwrap_err();
        assert!(e.to_string().contains("checksum"), "{e}");
    }
}
