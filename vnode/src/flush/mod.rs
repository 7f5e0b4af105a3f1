//! Flushed data files `tsdb/<file_id:010>.dat`: one immutable file per flush, one block per
//! subtable holding all its flushed rows as columns (layout in `FORMAT.md` beside this file).
//!
//! Owns: writing a file durably (temp file, fsync, rename, fsync dir) and reading blocks back
//! with checksums verified. Invariants: a file is never modified after its rename; within a file
//! a block's rows are sorted by ts with unique ts; a file becomes part of the vnode only when a
//! manifest listing it is committed (files not listed are orphans and deleted at open).
//! This is the foundation-stage format; STT files, compressed column blocks and SMA replace it.

use crate::codec::{Reader, Writer};
use crate::error::{Result, VnodeError};
use crate::fsutil;
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use tidal_common::{Column, ColumnData, TableUid};

pub const DATA_MAGIC: &[u8; 8] = b"TIDALDAT";
pub const FOOTER_MAGIC: &[u8; 8] = b"TIDALEND";
pub const DATA_VERSION: u32 = 1;
const HEADER_BYTES: u64 = 16;
const FOOTER_BYTES: u64 = 24;
const INDEX_ENTRY_BYTES: usize = 44;

pub fn file_name(id: u64) -> String {
    format!("{id:010}.dat")
}

/// Where one subtable's block lives.
#[derive(Clone, Copy, Debug)]
pub struct BlockRef {
    pub offset: u64,
    pub len: u32,
    pub crc: u32,
    pub rows: u32,
    pub ts_min: i64,
    pub ts_max: i64,
}

/// An open, immutable data file with its block index in memory.
pub struct DataFile {
    pub id: u64,
    pub path: PathBuf,
    pub bytes: u64,
    file: File,
    index: HashMap<TableUid, BlockRef>,
}

fn ts_range(cols: &[Column]) -> (i64, i64) {
    match cols.first().map(|c| &c.data) {
        Some(ColumnData::Timestamp(v)) | Some(ColumnData::Int(v)) => (
            v.iter().copied().min().unwrap_or(0),
            v.iter().copied().max().unwrap_or(0),
        ),
        _ => (0, 0),
    }
}

/// Writes a new data file block by block (one block per subtable), then commits it durably.
pub struct DataFileWriter {
    dir: PathBuf,
    id: u64,
    path: PathBuf,
    tmp: PathBuf,
    out: std::io::BufWriter<File>,
    offset: u64,
    index: Writer,
    blocks: usize,
}

impl DataFileWriter {
    pub fn create(dir: &Path, id: u64) -> Result<DataFileWriter> {
        let path = dir.join(file_name(id));
        let tmp = path.with_extension("tmp");
        let f = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(&tmp)
            .map_err(|e| VnodeError::io(&tmp, "create", e))?;
        let mut w = DataFileWriter {
            dir: dir.to_path_buf(),
            id,
            path,
            tmp,
            out: std::io::BufWriter::with_capacity(1 << 20, f),
            offset: 0,
            index: Writer::new(),
            blocks: 0,
        };
        let mut head = Vec::with_capacity(HEADER_BYTES as usize);
        head.extend_from_slice(DATA_MAGIC);
        head.extend_from_slice(&DATA_VERSION.to_le_bytes());
        head.extend_from_slice(&0u32.to_le_bytes());
        w.put(&head)?;
        Ok(w)
    }

    fn put(&mut self, b: &[u8]) -> Result<()> {
        self.out
            .write_all(b)
            .map_err(|e| VnodeError::io(&self.tmp, "write", e))?;
        self.offset += b.len() as u64;
        Ok(())
    }

    /// Appends the block of one subtable: equally long columns, rows sorted by unique ts.
    pub fn add_block(&mut self, uid: TableUid, cols: &[Column]) -> Result<()> {
        let mut w = Writer::new();
        w.len_u32(cols.len());
        for c in cols {
            w.column(c);
        }
        let crc = crc32c::crc32c(&w.buf);
        let rows = cols.first().map(Column::len).unwrap_or(0);
        let (ts_min, ts_max) = ts_range(cols);
        self.index.u64(uid.0);
        self.index.u64(self.offset);
        self.index.len_u32(w.buf.len());
        self.index.u32(crc);
        self.index.len_u32(rows);
        self.index.i64(ts_min);
        self.index.i64(ts_max);
        self.blocks += 1;
        self.put(&w.buf)
    }

    /// Writes index and footer, fsyncs, renames into place, fsyncs the directory, reopens.
    pub fn finish(mut self) -> Result<DataFile> {
        let mut index = Writer::new();
        index.len_u32(self.blocks);
        index.buf.extend_from_slice(&self.index.buf);
        let index_offset = self.offset;
        let index_crc = crc32c::crc32c(&index.buf);
        let mut tail = index.buf;
        let index_len = tail.len() as u32;
        tail.extend_from_slice(&index_offset.to_le_bytes());
        tail.extend_from_slice(&index_len.to_le_bytes());
        tail.extend_from_slice(&index_crc.to_le_bytes());
        tail.extend_from_slice(FOOTER_MAGIC);
        self.put(&tail)?;
        let f = self
            .out
            .into_inner()
            .map_err(|e| VnodeError::io(&self.tmp, "write", e.into_error()))?;
        f.sync_all()
            .map_err(|e| VnodeError::io(&self.tmp, "fsync", e))?;
        drop(f);
        std::fs::rename(&self.tmp, &self.path)
            .map_err(|e| VnodeError::io(&self.path, "rename temp file onto", e))?;
        fsutil::sync_dir(&self.dir)?;
        open(&self.path, self.id)
    }
}

/// Opens a data file and verifies its header, footer and index.
pub fn open(path: &Path, id: u64) -> Result<DataFile> {
    let file = File::open(path).map_err(|e| VnodeError::io(path, "open", e))?;
    let bytes = file
        .metadata()
        .map_err(|e| VnodeError::io(path, "stat", e))?
        .len();
    let corrupt = |offset: u64, reason: String| VnodeError::Corruption {
        file: path.to_path_buf(),
        offset,
        reason,
    };
    let read_at = |offset: u64, len: usize| -> Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        file.read_exact_at(&mut buf, offset)
            .map_err(|e| VnodeError::io(path, "read", e))?;
        Ok(buf)
    };
    if bytes < HEADER_BYTES + FOOTER_BYTES {
        return Err(corrupt(0, format!("file of {bytes} bytes is too short")));
    }
    let head = read_at(0, HEADER_BYTES as usize)?;
    if head.get(0..8) != Some(&DATA_MAGIC[..]) {
        return Err(corrupt(0, "bad magic, not a Tidal data file".into()));
    }
    let mut r = Reader::new(&head);
    let _ = r.bytes(8);
    let version = r.u32().map_err(|e| corrupt(e.offset as u64, e.reason))?;
    if version != DATA_VERSION {
        return Err(corrupt(
            8,
            format!("unsupported data file version {version}"),
        ));
    }
    let footer_at = bytes - FOOTER_BYTES;
    let foot = read_at(footer_at, FOOTER_BYTES as usize)?;
    if foot.get(16..24) != Some(&FOOTER_MAGIC[..]) {
        return Err(corrupt(
            footer_at + 16,
            "bad footer magic (truncated file?)".into(),
        ));
    }
    let mut r = Reader::new(&foot);
    let fe = |e: crate::codec::DecodeError| corrupt(footer_at + e.offset as u64, e.reason);
    let index_offset = r.u64().map_err(fe)?;
    let index_len = r.u32().map_err(fe)? as u64;
    let index_crc = r.u32().map_err(fe)?;
    if index_offset < HEADER_BYTES || index_offset.saturating_add(index_len) != footer_at {
        return Err(corrupt(
            footer_at,
            format!("index at {index_offset} of {index_len} bytes does not end at the footer"),
        ));
    }
    let ib = read_at(index_offset, index_len as usize)?;
    let actual = crc32c::crc32c(&ib);
    if actual != index_crc {
        return Err(corrupt(
            index_offset,
            format!("index checksum mismatch (stored {index_crc:#010x}, computed {actual:#010x})"),
        ));
    }
    let mut r = Reader::new(&ib);
    let ie = |e: crate::codec::DecodeError| corrupt(index_offset + e.offset as u64, e.reason);
    let n = r.count(INDEX_ENTRY_BYTES).map_err(ie)?;
    let mut index = HashMap::with_capacity(n);
    for _ in 0..n {
        let at = index_offset + r.pos() as u64;
        let uid = TableUid(r.u64().map_err(ie)?);
        let b = BlockRef {
            offset: r.u64().map_err(ie)?,
            len: r.u32().map_err(ie)?,
            crc: r.u32().map_err(ie)?,
            rows: r.u32().map_err(ie)?,
            ts_min: r.i64().map_err(ie)?,
            ts_max: r.i64().map_err(ie)?,
        };
        if b.offset < HEADER_BYTES || b.offset.saturating_add(b.len as u64) > index_offset {
            return Err(corrupt(
                at,
                format!("block of table uid {uid} lies outside the data area"),
            ));
        }
        index.insert(uid, b);
    }
    Ok(DataFile {
        id,
        path: path.to_path_buf(),
        bytes,
        file,
        index,
    })
}

impl DataFile {
    pub fn block_ref(&self, uid: TableUid) -> Option<BlockRef> {
        self.index.get(&uid).copied()
    }

    /// Reads and verifies the block of `uid`, if this file has one.
    pub fn read_block(&self, uid: TableUid) -> Result<Option<Vec<Column>>> {
        let Some(b) = self.index.get(&uid) else {
            return Ok(None);
        };
        let corrupt = |offset: u64, reason: String| VnodeError::Corruption {
            file: self.path.clone(),
            offset,
            reason,
        };
        let mut buf = vec![0u8; b.len as usize];
        self.file
            .read_exact_at(&mut buf, b.offset)
            .map_err(|e| VnodeError::io(&self.path, "read", e))?;
        let actual = crc32c::crc32c(&buf);
        if actual != b.crc {
            return Err(corrupt(
                b.offset,
                format!(
                    "block of table uid {uid} fails its checksum (stored {:#010x}, computed {actual:#010x})",
                    b.crc
                ),
            ));
        }
        let mut r = Reader::new(&buf);
        let de = |e: crate::codec::DecodeError| corrupt(b.offset + e.offset as u64, e.reason);
        let n = r.count(6).map_err(de)?;
        let mut cols = Vec::with_capacity(n);
        for _ in 0..n {
            let c = r.column().map_err(de)?;
            if c.len() != b.rows as usize {
                return Err(corrupt(
                    b.offset,
                    format!("column has {} rows, index says {}", c.len(), b.rows),
                ));
            }
            cols.push(c);
        }
        Ok(Some(cols))
    }
}
