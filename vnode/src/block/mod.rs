//! Column blocks and their SMA (small materialized aggregates): the unit both STT staging files
//! and window data files store (layout in `../tsdb/FORMAT.md`).
//!
//! Owns: turning up to `MAXROWS` rows of ONE subtable (as columns, column 0 = the ts key) into
//! bytes and back, column by column, and the per-block per-column statistics
//! (min, max, sum, non-NULL count, NULL count) that let readers answer aggregates over whole
//! blocks without decoding them.
//!
//! Invariants: a block's rows are sorted by ts with unique ts; every column chunk and the block
//! directory carry a crc32c, checked before anything is decoded; decoding never panics and never
//! allocates more than the block's row count allows, whatever the bytes are. A reader asks for the
//! columns it needs and only those chunks are read and decoded. Columns a block lacks (added to the
//! STABLE after the block was written) read as all NULL.

use crate::error::{Result, VnodeError};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;
use tidal_common::types::PhysicalType;
use tidal_common::{Column, ColumnData, DataType, Value};

/// How columns are encoded; one per column of the STABLE (see `tidal_codec`).
pub type ColumnCodec = tidal_codec::ColumnCodec;

/// Directory bytes of a block with `ncols` columns: count, per column (len, crc), own crc.
pub fn dir_bytes(ncols: u32) -> u64 {
    4 + 8 * ncols as u64 + 4
}

/// Refuses absurd column counts before anything is allocated from them.
pub const MAX_COLUMNS: u32 = 4096;

/// Appends the encoding of one block (all columns the same length) to `out`.
pub fn encode_block(
    cols: &[Column],
    types: &[DataType],
    codecs: &[ColumnCodec],
    out: &mut Vec<u8>,
) -> Result<()> {
    let start = out.len();
    let n = cols.len();
    out.extend_from_slice(&(n as u32).to_le_bytes());
    out.resize(start + dir_bytes(n as u32) as usize, 0);
    let mut chunk = Vec::new();
    for (i, c) in cols.iter().enumerate() {
        let t = types
            .get(i)
            .copied()
            .ok_or_else(|| VnodeError::InvalidArgument(format!("block column {i} has no type")))?;
        let codec = codecs
            .get(i)
            .copied()
            .unwrap_or_else(|| ColumnCodec::default_for(t, 2));
        chunk.clear();
        tidal_codec::encode_column(c, t, &codec, &mut chunk).map_err(|e| {
            VnodeError::InvalidArgument(format!("cannot encode column {i} as {t}: {e}"))
        })?;
        let at = start + 4 + 8 * i;
        out[at..at + 4].copy_from_slice(&(chunk.len() as u32).to_le_bytes());
        out[at + 4..at + 8].copy_from_slice(&crc32c::crc32c(&chunk).to_le_bytes());
        out.extend_from_slice(&chunk);
    }
    let dir_end = start + 4 + 8 * n;
    let crc = crc32c::crc32c(&out[start..dir_end]);
    out[dir_end..dir_end + 4].copy_from_slice(&crc.to_le_bytes());
    Ok(())
}

/// Where a block lives in a file and what it holds (from a head file or an STT index).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockLoc {
    pub offset: u64,
    pub len: u32,
    pub ncols: u32,
    pub rows: u32,
    pub ts_min: i64,
    pub ts_max: i64,
}

pub(crate) fn corrupt(path: &Path, offset: u64, reason: String) -> VnodeError {
    VnodeError::Corruption {
        file: path.to_path_buf(),
        offset,
        reason,
    }
}

pub fn read_at(file: &File, path: &Path, offset: u64, len: usize) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    file.read_exact_at(&mut buf, offset).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            corrupt(
                path,
                offset,
                format!("file ends inside a {len}-byte region"),
            )
        } else {
            VnodeError::io(path, "read", e)
        }
    })?;
    Ok(buf)
}

/// Little-endian u32 at `at` (0 past the end: callers check lengths first).
pub(crate) fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    if let Some(s) = b.get(at..at + 4) {
        a.copy_from_slice(s);
    }
    u32::from_le_bytes(a)
}

/// Little-endian u64 at `at` (0 past the end: callers check lengths first).
pub(crate) fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    if let Some(s) = b.get(at..at + 8) {
        a.copy_from_slice(s);
    }
    u64::from_le_bytes(a)
}

/// Reads the columns `wanted` (indices into the STABLE's columns, with their types) of one block.
/// Returns one column per wanted index, in order.
pub fn read_columns(
    file: &File,
    path: &Path,
    loc: &BlockLoc,
    wanted: &[(usize, DataType)],
) -> Result<Vec<Column>> {
    let chunks = read_directory(file, path, loc)?;
    wanted
        .iter()
        .map(|&(ci, t)| match chunks.get(ci) {
            None => Ok(Column::all_null(t, loc.rows as usize)),
            Some(c) => read_chunk(file, path, loc, ci, *c, t),
        })
        .collect()
}

/// [`read_columns`] through the process's decoded-column cache (`crate::column_cache`): a
/// chunk found there is neither read nor decoded, and a block whose wanted chunks are all
/// there is not touched at all. `token` names the open data file. Blocks shorter than
/// `column_cache::BLOCK_ROWS_MIN` rows go around the cache.
pub fn read_columns_cached(
    file: &File,
    path: &Path,
    token: u64,
    loc: &BlockLoc,
    wanted: &[(usize, DataType)],
) -> Result<Vec<Arc<Column>>> {
    if loc.rows < crate::column_cache::BLOCK_ROWS_MIN {
        return Ok(read_columns(file, path, loc, wanted)?
            .into_iter()
            .map(Arc::new)
            .collect());
    }
    let cache = crate::column_cache::global();
    let rows = loc.rows as usize;
    let key = |ci: usize| crate::column_cache::Key {
        file: token,
        block_offset: loc.offset,
        column: ci as u32,
    };
    let on = cache.enabled();
    let mut out: Vec<Option<Arc<Column>>> = Vec::with_capacity(wanted.len());
    let mut missing = false;
    for &(ci, t) in wanted {
        let hit = if ci as u64 >= u64::from(loc.ncols) {
            Some(Arc::new(Column::all_null(t, rows)))
        } else if !on {
            None
        } else {
            // Same physical type, same decoding: a type widened by ALTER reads the same chunk.
            cache
                .get(&key(ci))
                .filter(|c| c.len() == rows && c.physical() == t.physical())
        };
        missing |= hit.is_none();
        out.push(hit);
    }
    if missing {
        let chunks = read_directory(file, path, loc)?;
        for (slot, &(ci, t)) in out.iter_mut().zip(wanted) {
            if slot.is_some() {
                continue;
            }
            let col = Arc::new(match chunks.get(ci) {
                None => Column::all_null(t, rows),
                Some(c) => read_chunk(file, path, loc, ci, *c, t)?,
            });
            if on {
                cache.insert(key(ci), col.clone());
            }
            *slot = Some(col);
        }
    }
    Ok(out.into_iter().flatten().collect())
}

/// One column chunk of a block: (offset in the file, length, checksum).
type Chunk = (u64, u64, u32);

/// The block's directory, checked: its checksum, its column count, every chunk inside the
/// block.
fn read_directory(file: &File, path: &Path, loc: &BlockLoc) -> Result<Vec<Chunk>> {
    if loc.ncols > MAX_COLUMNS || dir_bytes(loc.ncols) > loc.len as u64 {
        return Err(corrupt(
            path,
            loc.offset,
            format!(
                "block index says {} columns in {} bytes",
                loc.ncols, loc.len
            ),
        ));
    }
    let dir = read_at(file, path, loc.offset, dir_bytes(loc.ncols) as usize)?;
    let n = loc.ncols as usize;
    let stored_crc = u32_at(&dir, 4 + 8 * n);
    let actual = crc32c::crc32c(dir.get(..4 + 8 * n).unwrap_or(&[]));
    if stored_crc != actual {
        return Err(corrupt(
            path,
            loc.offset,
            format!("block directory fails its checksum (stored {stored_crc:#010x}, computed {actual:#010x})"),
        ));
    }
    if u32_at(&dir, 0) != loc.ncols {
        return Err(corrupt(
            path,
            loc.offset,
            format!(
                "block has {} columns, its index says {}",
                u32_at(&dir, 0),
                loc.ncols
            ),
        ));
    }
    // Chunk offsets, checked to lie inside the block.
    let mut offs = Vec::with_capacity(n);
    let mut at = loc.offset + dir_bytes(loc.ncols);
    let end = loc.offset + loc.len as u64;
    for i in 0..n {
        let len = u32_at(&dir, 4 + 8 * i) as u64;
        let crc = u32_at(&dir, 8 + 8 * i);
        if at + len > end {
            return Err(corrupt(
                path,
                loc.offset,
                format!("column {i} of the block runs past the block's end"),
            ));
        }
        offs.push((at, len, crc));
        at += len;
    }
    Ok(offs)
}

fn read_chunk(
    file: &File,
    path: &Path,
    loc: &BlockLoc,
    ci: usize,
    (off, len, crc): Chunk,
    t: DataType,
) -> Result<Column> {
    let rows = loc.rows as usize;
    let bytes = read_at(file, path, off, len as usize)?;
    let actual = crc32c::crc32c(&bytes);
    if actual != crc {
        return Err(corrupt(
            path,
            off,
            format!("column {ci} fails its checksum (stored {crc:#010x}, computed {actual:#010x})"),
        ));
    }
    let col = tidal_codec::decode_column(&bytes, t, rows)
        .map_err(|e| corrupt(path, off, format!("column {ci}: {e}")))?;
    if col.len() != rows {
        return Err(corrupt(
            path,
            off,
            format!(
                "column {ci} holds {} rows, the index says {rows}",
                col.len()
            ),
        ));
    }
    Ok(col)
}

/// One column's statistics over one block.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ColStats {
    /// Non-NULL values.
    pub count: u32,
    pub nulls: u32,
    pub min: SmaVal,
    pub max: SmaVal,
    /// `None` when the column is not summable or an integer sum overflowed.
    pub sum: SmaVal,
}

impl ColStats {
    /// The statistics of a column that is NULL in all `rows` rows (one added to the STABLE
    /// after the block was written).
    pub fn all_null(rows: u32) -> ColStats {
        ColStats {
            count: 0,
            nulls: rows,
            min: SmaVal::None,
            max: SmaVal::None,
            sum: SmaVal::None,
        }
    }

    /// The statistics of two blocks' values together; `None` when the counts overflow. A
    /// minimum (maximum) is kept only when both blocks that have values have one of the same
    /// kind (otherwise nothing is known of it); the sum is not kept.
    pub fn combine(&self, o: &ColStats) -> Option<ColStats> {
        fn pick(a: SmaVal, b: SmaVal, a_has: bool, b_has: bool, lower: bool) -> SmaVal {
            match (a_has, b_has) {
                (false, false) => SmaVal::None,
                (true, false) => a,
                (false, true) => b,
                (true, true) => match (a, b) {
                    (SmaVal::Int(x), SmaVal::Int(y)) => {
                        SmaVal::Int(if lower { x.min(y) } else { x.max(y) })
                    }
                    (SmaVal::UInt(x), SmaVal::UInt(y)) => {
                        SmaVal::UInt(if lower { x.min(y) } else { x.max(y) })
                    }
                    (SmaVal::Float(x), SmaVal::Float(y)) if !x.is_nan() && !y.is_nan() => {
                        SmaVal::Float(if lower { x.min(y) } else { x.max(y) })
                    }
                    _ => SmaVal::None,
                },
            }
        }
        let (a_has, b_has) = (self.count > 0, o.count > 0);
        Some(ColStats {
            count: self.count.checked_add(o.count)?,
            nulls: self.nulls.checked_add(o.nulls)?,
            min: pick(self.min, o.min, a_has, b_has, true),
            max: pick(self.max, o.max, a_has, b_has, false),
            sum: SmaVal::None,
        })
    }

    /// The statistics of `columns` (STABLE column indices) out of a block's SMA `all`, for a
    /// block of `rows` rows: a column the block predates is all NULL.
    pub fn project(all: &[ColStats], columns: &[usize], rows: u32) -> Vec<ColStats> {
        columns
            .iter()
            .map(|ci| all.get(*ci).copied().unwrap_or(ColStats::all_null(rows)))
            .collect()
    }
}

/// A statistic in its column's physical domain.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SmaVal {
    None,
    Int(i64),
    UInt(u64),
    Float(f64),
}

impl SmaVal {
    pub fn to_value(self, t: DataType) -> Value {
        match self {
            SmaVal::None => Value::Null,
            SmaVal::Int(v) if t.physical() == PhysicalType::Timestamp => Value::Timestamp(v),
            SmaVal::Int(v) => Value::Int(v),
            SmaVal::UInt(v) => Value::UInt(v),
            SmaVal::Float(v) => Value::Float(v),
        }
    }
}

pub const SMA_ENTRY_BYTES: usize = 34;

/// Computes the statistics of every column of a block.
pub fn compute_sma(cols: &[Column]) -> Vec<ColStats> {
    cols.iter().map(col_stats).collect()
}

fn col_stats(c: &Column) -> ColStats {
    let n = c.len();
    let is_null = |i: usize| c.nulls.get(i).copied().unwrap_or(false);
    let nulls = if c.nulls.is_empty() {
        0
    } else {
        c.nulls.iter().filter(|b| **b).count()
    };
    let count = (n - nulls) as u32;
    let mut s = ColStats {
        count,
        nulls: nulls as u32,
        min: SmaVal::None,
        max: SmaVal::None,
        sum: SmaVal::None,
    };
    match &c.data {
        ColumnData::Int(v) | ColumnData::Timestamp(v) => {
            let it = v
                .iter()
                .enumerate()
                .filter(|(i, _)| !is_null(*i))
                .map(|(_, x)| *x);
            let (mut mn, mut mx, mut sum, mut ok, mut any) =
                (i64::MAX, i64::MIN, 0i64, true, false);
            for x in it {
                any = true;
                mn = mn.min(x);
                mx = mx.max(x);
                match sum.checked_add(x) {
                    Some(v) => sum = v,
                    None => ok = false,
                }
            }
            if any {
                s.min = SmaVal::Int(mn);
                s.max = SmaVal::Int(mx);
                if ok && matches!(c.data, ColumnData::Int(_)) {
                    s.sum = SmaVal::Int(sum);
                }
            }
        }
        ColumnData::UInt(v) => {
            let (mut mn, mut mx, mut sum, mut ok, mut any) = (u64::MAX, 0u64, 0u64, true, false);
            for (_, x) in v.iter().enumerate().filter(|(i, _)| !is_null(*i)) {
                any = true;
                mn = mn.min(*x);
                mx = mx.max(*x);
                match sum.checked_add(*x) {
                    Some(v) => sum = v,
                    None => ok = false,
                }
            }
            if any {
                s.min = SmaVal::UInt(mn);
                s.max = SmaVal::UInt(mx);
                if ok {
                    s.sum = SmaVal::UInt(sum);
                }
            }
        }
        ColumnData::Float(v) => {
            let (mut mn, mut mx, mut sum, mut any) =
                (f64::INFINITY, f64::NEG_INFINITY, 0f64, false);
            for (_, x) in v.iter().enumerate().filter(|(i, _)| !is_null(*i)) {
                any = true;
                // NaN never wins a comparison, matching the executor's MIN/MAX.
                if *x < mn {
                    mn = *x;
                }
                if *x > mx {
                    mx = *x;
                }
                sum += *x;
            }
            if any {
                s.min = SmaVal::Float(mn);
                s.max = SmaVal::Float(mx);
                s.sum = SmaVal::Float(sum);
            }
        }
        ColumnData::Bool(_) | ColumnData::Str(_) => {}
    }
    s
}

fn put_val(out: &mut Vec<u8>, v: SmaVal) {
    let bits = match v {
        SmaVal::None => 0u64,
        SmaVal::Int(x) => x as u64,
        SmaVal::UInt(x) => x,
        SmaVal::Float(x) => x.to_bits(),
    };
    out.extend_from_slice(&bits.to_le_bytes());
}

fn kind_of(s: &ColStats) -> u8 {
    match s.min {
        SmaVal::None => 0,
        SmaVal::Int(_) => 1,
        SmaVal::UInt(_) => 2,
        SmaVal::Float(_) => 3,
    }
}

/// Appends one block's SMA record: u32 ncols, ncols entries, crc32c.
pub fn encode_sma(stats: &[ColStats], out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&(stats.len() as u32).to_le_bytes());
    for s in stats {
        out.push(kind_of(s));
        out.push(u8::from(s.sum != SmaVal::None));
        put_val(out, s.min);
        put_val(out, s.max);
        put_val(out, s.sum);
        out.extend_from_slice(&s.count.to_le_bytes());
        out.extend_from_slice(&s.nulls.to_le_bytes());
    }
    let crc = crc32c::crc32c(&out[start..]);
    out.extend_from_slice(&crc.to_le_bytes());
}

pub fn sma_bytes(ncols: u32) -> usize {
    4 + SMA_ENTRY_BYTES * ncols as usize + 4
}

/// Decodes one SMA record (as written by [`encode_sma`]); `at` is its file offset for errors.
pub fn decode_sma(b: &[u8], path: &Path, at: u64) -> Result<Vec<ColStats>> {
    let n = u32_at(b, 0) as usize;
    if n as u32 > MAX_COLUMNS || b.len() != sma_bytes(n as u32) {
        return Err(corrupt(
            path,
            at,
            format!("SMA record of {} bytes cannot hold {n} columns", b.len()),
        ));
    }
    let body = 4 + SMA_ENTRY_BYTES * n;
    let stored = u32_at(b, body);
    let actual = crc32c::crc32c(b.get(..body).unwrap_or(&[]));
    if stored != actual {
        return Err(corrupt(
            path,
            at,
            format!(
                "SMA record fails its checksum (stored {stored:#010x}, computed {actual:#010x})"
            ),
        ));
    }
    let u64_at = |o: usize| u64_at(b, o);
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let o = 4 + SMA_ENTRY_BYTES * i;
        let kind = b.get(o).copied().unwrap_or(0);
        let has_sum = b.get(o + 1).copied().unwrap_or(0) != 0;
        let val = |bits: u64| match kind {
            1 => Ok(SmaVal::Int(bits as i64)),
            2 => Ok(SmaVal::UInt(bits)),
            3 => Ok(SmaVal::Float(f64::from_bits(bits))),
            0 => Ok(SmaVal::None),
            k => Err(corrupt(
                path,
                at + o as u64,
                format!("unknown SMA kind {k}"),
            )),
        };
        let min = val(u64_at(o + 2))?;
        let max = val(u64_at(o + 10))?;
        let sum = if has_sum {
            val(u64_at(o + 18))?
        } else {
            SmaVal::None
        };
        out.push(ColStats {
            count: u32_at(b, o + 26),
            nulls: u32_at(b, o + 30),
            min,
            max,
            sum,
        });
    }
    Ok(out)
}

/// The ts column of a block as a slice (column 0 is always TIMESTAMP).
pub fn ts_slice(c: &Column) -> &[i64] {
    match &c.data {
        ColumnData::Timestamp(v) | ColumnData::Int(v) => v,
        _ => &[],
    }
}
