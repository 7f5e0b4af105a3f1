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
pub use tidal_codec::Effort;

/// The effort for a block of `rows` rows when blocks under `minrows` are written again before
/// they are kept (an STT block under `MINROWS` never moves into a data file; a data file's
/// small last block is folded into the next merge): those get [`Effort::Quick`], since the
/// full search would be spent again on the same rows. `minrows` 0: every block is kept.
pub fn effort_for(rows: usize, minrows: usize) -> Effort {
    if rows < minrows {
        Effort::Quick
    } else {
        Effort::Best
    }
}

/// Directory bytes of a block with `ncols` columns: count, per column (len, crc), own crc.
pub fn dir_bytes(ncols: u32) -> u64 {
    4 + 8 * ncols as u64 + 4
}

/// Refuses absurd column counts before anything is allocated from them.
pub const MAX_COLUMNS: u32 = 4096;

/// Appends the encoding of one block (all columns the same length) to `out`, its columns
/// encoded with `effort` (decoded alike either way).
pub fn encode_block(
    cols: &[Column],
    types: &[DataType],
    codecs: &[ColumnCodec],
    effort: Effort,
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
        tidal_codec::encode_column_with(c, t, &codec, effort, &mut chunk).map_err(|e| {
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
    /// The rows this location names: the block's, or with `view` one subtable's run in it.
    pub rows: u32,
    pub ts_min: i64,
    pub ts_max: i64,
    /// Set when the block is shared by several subtables (STT version 3) and this location
    /// names one subtable's rows in it; `None`: the location is the whole block.
    pub view: Option<RowView>,
}

/// One subtable's rows in a block shared by several: rows `start..start + rows` of the
/// block's `block_rows`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowView {
    pub start: u32,
    pub block_rows: u32,
}

impl BlockLoc {
    /// The whole block a view is in (itself when it is not a view). Its ts range is unknown
    /// (a shared block's runs each start again), so it is given as everything.
    pub fn whole_block(&self) -> BlockLoc {
        match self.view {
            None => *self,
            Some(v) => BlockLoc {
                rows: v.block_rows,
                ts_min: i64::MIN,
                ts_max: i64::MAX,
                view: None,
                ..*self
            },
        }
    }

    /// A view's rows out of its whole block's decoded columns (everything when the location
    /// is not a view). The bounds were checked when the index was read; a slice past the end
    /// is cut short, never a panic.
    pub fn view_slice<C: std::borrow::Borrow<Column>>(&self, cols: &[C]) -> Vec<Column> {
        let (s, e) = match self.view {
            None => (0, usize::MAX),
            Some(v) => (
                v.start as usize,
                (v.start as usize).saturating_add(self.rows as usize),
            ),
        };
        cols.iter().map(|c| c.borrow().slice(s, e)).collect()
    }
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
    if loc.view.is_some() {
        return Ok(loc.view_slice(&read_columns(file, path, &loc.whole_block(), wanted)?));
    }
    if loc.len <= WHOLE_READ_BYTES_MAX {
        // One read for the directory and every chunk: a merge of many small subtables made
        // a read call per chunk, a sixth of its CPU at 100,000 trucks.
        let (block, chunks) = read_whole(file, path, loc)?;
        return wanted
            .iter()
            .map(|&(ci, t)| match chunks.get(ci) {
                None => Ok(Column::all_null(t, loc.rows as usize)),
                Some(&c) => decode_chunk(chunk_bytes(&block, loc, c), path, loc, ci, c, t),
            })
            .collect();
    }
    let chunks = read_directory(file, path, loc)?;
    wanted
        .iter()
        .map(|&(ci, t)| match chunks.get(ci) {
            None => Ok(Column::all_null(t, loc.rows as usize)),
            Some(c) => decode_chunk(
                &read_at(file, path, c.0, c.1 as usize)?,
                path,
                loc,
                ci,
                *c,
                t,
            ),
        })
        .collect()
}

/// A whole block in one read, with its checked directory.
fn read_whole(file: &File, path: &Path, loc: &BlockLoc) -> Result<(Vec<u8>, Vec<Chunk>)> {
    check_dir_size(path, loc)?;
    let block = read_at(file, path, loc.offset, loc.len as usize)?;
    let chunks = parse_directory(&block, path, loc)?;
    Ok((block, chunks))
}

/// The bytes of chunk `c` in a block read whole (`parse_directory` checked it lies inside).
fn chunk_bytes<'a>(block: &'a [u8], loc: &BlockLoc, c: Chunk) -> &'a [u8] {
    let at = (c.0 - loc.offset) as usize;
    block.get(at..at + c.1 as usize).unwrap_or(&[])
}

/// The stage-1 encoding id of column `i` of an encoded block (the block layout above; the
/// column payload's header in `codec/FORMAT.md`: version, type, stage-1 id, ...).
#[cfg(test)]
pub(crate) fn stage1_id_of(block: &[u8], i: usize) -> u8 {
    let n = u32_at(block, 0);
    let mut at = dir_bytes(n) as usize;
    for c in 0..i {
        at += u32_at(block, 4 + 8 * c) as usize;
    }
    block[at + 2]
}

/// Blocks up to this size are read whole by [`read_columns`] (one read call instead of one
/// per chunk); bigger ones chunk by chunk, so that a query for a few columns of a large block
/// reads only those.
const WHOLE_READ_BYTES_MAX: u32 = 16 << 10;

/// [`read_columns`] through the process's decoded-column cache (`crate::column_cache`): a
/// chunk found there is neither read nor decoded, and a block whose wanted chunks are all
/// there is not touched at all. `token` names the open data file. Blocks shorter than
/// `column_cache::BLOCK_ROWS_MIN` rows go around the cache, but for shared blocks (a view
/// names one subtable's rows in one), which it holds whole whatever their rows.
pub fn read_columns_cached(
    file: &File,
    path: &Path,
    token: u64,
    loc: &BlockLoc,
    wanted: &[(usize, DataType)],
) -> Result<Vec<Arc<Column>>> {
    if loc.view.is_some() {
        // The shared block is decoded and cached whole, however few its rows: the other
        // subtables' views of it are then slices of what is cached, not decodes of it all.
        let whole = cached(file, path, token, &loc.whole_block(), wanted)?;
        return Ok(loc.view_slice(&whole).into_iter().map(Arc::new).collect());
    }
    if loc.rows < crate::column_cache::BLOCK_ROWS_MIN {
        return Ok(read_columns(file, path, loc, wanted)?
            .into_iter()
            .map(Arc::new)
            .collect());
    }
    cached(file, path, token, loc, wanted)
}

/// [`read_columns_cached`] of a whole block, whatever its rows.
fn cached(
    file: &File,
    path: &Path,
    token: u64,
    loc: &BlockLoc,
    wanted: &[(usize, DataType)],
) -> Result<Vec<Arc<Column>>> {
    let cache = crate::column_cache::global();
    let rows = loc.rows as usize;
    let key = |ci: usize| crate::column_cache::Key {
        file: token,
        block_offset: loc.offset,
        column: ci as u32,
        part: WHOLE,
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
                Some(c) => decode_chunk(
                    &read_at(file, path, c.0, c.1 as usize)?,
                    path,
                    loc,
                    ci,
                    *c,
                    t,
                )?,
            });
            if on {
                cache.insert(key(ci), col.clone());
            }
            *slot = Some(col);
        }
    }
    Ok(out.into_iter().flatten().collect())
}

/// The rows of `lo..=hi` of one block's columns `wanted` (column 0, the ts key, first), read
/// through the decoded-column cache. When the range covers only part of a block whose columns
/// are segmented (codec FORMAT.md, "Segments"), only the segments holding it are decoded (and
/// cached, per segment): a ten-minute window of an eleven-hour block decodes one or two
/// segments of 512 rows instead of 4,096 rows. The segments are picked from the first values
/// the ts column's directory stores, cached as the block's segment index; an opened chunk is
/// cached too (its decompressed stage-1 payload), so that another range of the block decodes
/// its segments without reading and decompressing the chunk again.
pub fn read_columns_range(
    file: &File,
    path: &Path,
    token: u64,
    loc: &BlockLoc,
    wanted: &[(usize, DataType)],
    lo: i64,
    hi: i64,
) -> Result<Vec<Column>> {
    read_range(file, path, token, loc, wanted, lo, hi, true)
}

/// [`read_columns_range`]; `segments_cached` false decodes segments without caching them.
#[allow(clippy::too_many_arguments)]
fn read_range(
    file: &File,
    path: &Path,
    token: u64,
    loc: &BlockLoc,
    wanted: &[(usize, DataType)],
    lo: i64,
    hi: i64,
    segments_cached: bool,
) -> Result<Vec<Column>> {
    let whole = || -> Result<Vec<Column>> {
        Ok(crate::merge::trim_shared(
            read_columns_cached(file, path, token, loc, wanted)?,
            lo,
            hi,
        ))
    };
    let rows = loc.rows as usize;
    // A view's segments are the shared block's, not its own: it is read whole.
    if (lo <= loc.ts_min && hi >= loc.ts_max)
        || loc.view.is_some()
        || rows <= tidal_codec::SEGMENT_ROWS
        || wanted.first().map(|w| w.0) != Some(0)
    {
        return whole();
    }
    let cache = crate::column_cache::global();
    let on = segments_cached && cache.enabled() && loc.rows >= crate::column_cache::BLOCK_ROWS_MIN;
    let key = |ci: usize, part: u32| crate::column_cache::Key {
        file: token,
        block_offset: loc.offset,
        column: ci as u32,
        part,
    };
    // Columns decoded whole earlier are cheaper to slice than segments are to decode.
    if on
        && wanted
            .iter()
            .all(|&(ci, _)| ci as u64 >= u64::from(loc.ncols) || cache.contains(&key(ci, WHOLE)))
    {
        return whole();
    }
    let mut dir: Option<Vec<Chunk>> = None;
    // The ts chunk when the index had to be read from it: its segments are decoded from it
    // below rather than read and decompressed a second time.
    let mut opened_ts: Option<(Chunk, tidal_codec::EncodedColumn<'static>)> = None;
    // The segment index: rows per segment, then each segment's first ts.
    let index = match on.then(|| cache.get(&key(0, SEGMENT_INDEX))).flatten() {
        Some(ix) => ix,
        None => {
            let Some(c) = chunk_of(&mut dir, file, path, loc, 0)? else {
                return whole();
            };
            let bytes = read_chunk_bytes(file, path, 0, c)?;
            let enc = tidal_codec::open_column(&bytes, DataType::Timestamp, rows)
                .map_err(|e| corrupt(path, c.0, format!("column 0: {e}")))?;
            let Some(firsts) = enc.first_values() else {
                return whole();
            };
            let mut v = Vec::with_capacity(firsts.len() + 1);
            v.push(enc.segment_rows() as i64);
            v.extend_from_slice(firsts);
            let ix = Arc::new(Column::new(ColumnData::Timestamp(v)));
            if on {
                cache.insert(key(0, SEGMENT_INDEX), ix.clone());
            }
            opened_ts = Some((c, enc.into_owned()));
            ix
        }
    };
    let (seg_rows, firsts) = match ts_slice(&index).split_first() {
        Some((&n, f)) if n > 0 && !f.is_empty() => (n as usize, f),
        _ => return whole(),
    };
    // The segment holding `lo` through the last one starting at or before `hi`.
    let a = firsts.partition_point(|&f| f <= lo).saturating_sub(1);
    let b = firsts.partition_point(|&f| f <= hi).max(a + 1);
    let (ra, rb) = ((a * seg_rows).min(rows), (b * seg_rows).min(rows));
    let mut out: Vec<Vec<(usize, Arc<Column>)>> = Vec::with_capacity(wanted.len());
    for &(ci, t) in wanted {
        if ci as u64 >= u64::from(loc.ncols) {
            out.push(vec![(ra, Arc::new(Column::all_null(t, rb - ra)))]);
            continue;
        }
        if on {
            if let Some(w) = cache
                .get(&key(ci, WHOLE))
                .filter(|c| c.len() == rows && c.physical() == t.physical())
            {
                out.push(vec![(0, w)]);
                continue;
            }
        }
        let mut parts: Vec<(usize, Option<Arc<Column>>)> = (a..b)
            .map(|i| {
                let hit = on
                    .then(|| cache.get(&key(ci, i as u32)))
                    .flatten()
                    .filter(|c| c.physical() == t.physical());
                (i * seg_rows, hit)
            })
            .collect();
        if parts.iter().any(|p| p.1.is_none()) {
            // The chunk opened: the ts chunk the index came from, one a query opened before
            // (cached), or read, checked and decompressed now.
            let (off, enc) = match if ci == 0 { opened_ts.take() } else { None } {
                Some((c, enc)) => {
                    let enc = Arc::new(enc);
                    if on {
                        cache.insert_encoded(key(ci, ENCODED), enc.clone());
                    }
                    (c.0, enc)
                }
                // Same physical type, same decoding (a type widened by ALTER reads the same
                // chunk), as for decoded columns.
                None => match on
                    .then(|| cache.get_encoded(&key(ci, ENCODED)))
                    .flatten()
                    .filter(|e| e.physical() == t.physical())
                {
                    Some(enc) => (loc.offset, enc),
                    None => {
                        let Some(c) = chunk_of(&mut dir, file, path, loc, ci)? else {
                            return whole();
                        };
                        let bytes = read_chunk_bytes(file, path, ci, c)?;
                        let enc = tidal_codec::open_column(&bytes, t, rows)
                            .map_err(|e| corrupt(path, c.0, format!("column {ci}: {e}")))?;
                        let enc = Arc::new(enc.into_owned());
                        if on {
                            cache.insert_encoded(key(ci, ENCODED), enc.clone());
                        }
                        (c.0, enc)
                    }
                },
            };
            let bad = |e: tidal_codec::CodecError| corrupt(path, off, format!("column {ci}: {e}"));
            if !on || enc.segment_rows() != seg_rows || enc.segment_count() != firsts.len() {
                // Nothing to cache per segment (the cache is off), or not cut like the ts
                // column: decode in one go the segments of its own that hold the rows.
                let segs = enc.segments_of_rows(ra..rb);
                let start = enc.segment_range(segs.start).start;
                let col = enc.decode_segments(segs).map_err(bad)?;
                out.push(vec![(start, Arc::new(col))]);
                continue;
            }
            for (i, slot) in (a..b).zip(parts.iter_mut()) {
                if slot.1.is_some() {
                    continue;
                }
                let col = enc.decode_segments(i..i + 1).map_err(bad)?;
                if col.len() != enc.segment_range(i).len() {
                    return Err(corrupt(
                        path,
                        off,
                        format!("column {ci} segment {i} holds {} rows", col.len()),
                    ));
                }
                let col = Arc::new(col);
                if on {
                    cache.insert(key(ci, i as u32), col.clone());
                }
                slot.1 = Some(col);
            }
        }
        out.push(
            parts
                .into_iter()
                .filter_map(|(at, c)| c.map(|c| (at, c)))
                .collect(),
        );
    }
    // Rows of `lo..=hi`, from the ts parts.
    let ts_parts = out.first().map(Vec::as_slice).unwrap_or(&[]);
    let mut s = rb;
    let mut e = ra;
    for (at, c) in ts_parts {
        let ts = ts_slice(c);
        let (from, to) = (ra.max(*at), rb.min(at + ts.len()));
        let Some(seg) = ts.get(from - at..to.max(from) - at) else {
            continue;
        };
        let first = seg.partition_point(|&x| x < lo);
        let last = seg.partition_point(|&x| x <= hi);
        if first < last {
            s = s.min(from + first);
            e = e.max(from + last);
        }
    }
    Ok(out
        .iter()
        .zip(wanted)
        .map(|(parts, &(_, t))| concat_rows(parts, s, e, t))
        .collect())
}

/// Chunk `ci` of the block, reading and checking the directory on first use.
fn chunk_of(
    dir: &mut Option<Vec<Chunk>>,
    file: &File,
    path: &Path,
    loc: &BlockLoc,
    ci: usize,
) -> Result<Option<Chunk>> {
    if dir.is_none() {
        *dir = Some(read_directory(file, path, loc)?);
    }
    Ok(dir.as_ref().and_then(|d| d.get(ci).copied()))
}

/// Rows `s..e` (block row numbers) of a column held in parts that start at the given rows.
fn concat_rows(parts: &[(usize, Arc<Column>)], s: usize, e: usize, t: DataType) -> Column {
    let mut out: Option<Column> = None;
    for (at, c) in parts {
        let (from, to) = (s.max(*at), e.min(at + c.len()));
        if from >= to {
            continue;
        }
        let piece = c.slice(from - at, to - at);
        match &mut out {
            None => {
                let mut o = piece;
                o.reserve(e - s - (to - from));
                out = Some(o);
            }
            Some(o) => o.extend_owned(piece),
        }
    }
    out.unwrap_or_else(|| Column::empty(t, 0))
}

/// Cache part of a whole decoded column.
const WHOLE: u32 = u32::MAX;
/// Cache part of a block's segment index (under column 0).
const SEGMENT_INDEX: u32 = u32::MAX - 1;
/// Cache part of a chunk opened for segment reads (its decompressed stage-1 payload), so that
/// the next range of the same block decodes its segments without reading the chunk again.
const ENCODED: u32 = u32::MAX - 2;

/// One column chunk of a block: (offset in the file, length, checksum).
type Chunk = (u64, u64, u32);

/// The block's directory, checked: its checksum, its column count, every chunk inside the
/// block.
fn read_directory(file: &File, path: &Path, loc: &BlockLoc) -> Result<Vec<Chunk>> {
    check_dir_size(path, loc)?;
    let dir = read_at(file, path, loc.offset, dir_bytes(loc.ncols) as usize)?;
    parse_directory(&dir, path, loc)
}

fn check_dir_size(path: &Path, loc: &BlockLoc) -> Result<()> {
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
    Ok(())
}

/// [`read_directory`] of the block's first bytes `dir`, read after [`check_dir_size`] passed
/// (so they hold the whole directory).
fn parse_directory(dir: &[u8], path: &Path, loc: &BlockLoc) -> Result<Vec<Chunk>> {
    let n = loc.ncols as usize;
    let stored_crc = u32_at(dir, 4 + 8 * n);
    let actual = crc32c::crc32c(dir.get(..4 + 8 * n).unwrap_or(&[]));
    if stored_crc != actual {
        return Err(corrupt(
            path,
            loc.offset,
            format!("block directory fails its checksum (stored {stored_crc:#010x}, computed {actual:#010x})"),
        ));
    }
    if u32_at(dir, 0) != loc.ncols {
        return Err(corrupt(
            path,
            loc.offset,
            format!(
                "block has {} columns, its index says {}",
                u32_at(dir, 0),
                loc.ncols
            ),
        ));
    }
    // Chunk offsets, checked to lie inside the block.
    let mut offs = Vec::with_capacity(n);
    let mut at = loc.offset + dir_bytes(loc.ncols);
    let end = loc.offset + loc.len as u64;
    for i in 0..n {
        let len = u32_at(dir, 4 + 8 * i) as u64;
        let crc = u32_at(dir, 8 + 8 * i);
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

/// The bytes of one column chunk, checked against its checksum.
fn read_chunk_bytes(
    file: &File,
    path: &Path,
    ci: usize,
    (off, len, crc): Chunk,
) -> Result<Vec<u8>> {
    let bytes = read_at(file, path, off, len as usize)?;
    check_chunk(&bytes, path, ci, (off, len, crc))?;
    Ok(bytes)
}

fn check_chunk(bytes: &[u8], path: &Path, ci: usize, (off, len, crc): Chunk) -> Result<()> {
    if bytes.len() as u64 != len {
        return Err(corrupt(
            path,
            off,
            format!("column {ci} is cut short ({} of {len} bytes)", bytes.len()),
        ));
    }
    let actual = crc32c::crc32c(bytes);
    if actual != crc {
        return Err(corrupt(
            path,
            off,
            format!("column {ci} fails its checksum (stored {crc:#010x}, computed {actual:#010x})"),
        ));
    }
    Ok(())
}

/// Checks a chunk's bytes (read alone or with the whole block) and decodes them.
fn decode_chunk(
    bytes: &[u8],
    path: &Path,
    loc: &BlockLoc,
    ci: usize,
    chunk: Chunk,
    t: DataType,
) -> Result<Column> {
    check_chunk(bytes, path, ci, chunk)?;
    let off = chunk.0;
    let rows = loc.rows as usize;
    let col = tidal_codec::decode_column(bytes, t, rows)
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

/// The statistics of every column of a block written without an SMA record (one under
/// `MINROWS`), computed by decoding it: each chunk as the physical type its header names,
/// since only that decides the statistics. Checked as [`read_columns`] checks a block.
pub fn block_sma(file: &File, path: &Path, loc: &BlockLoc) -> Result<Vec<ColStats>> {
    let (block, chunks) = read_whole(file, path, loc)?;
    chunks
        .iter()
        .enumerate()
        .map(|(ci, &c)| {
            let bytes = chunk_bytes(&block, loc, c);
            let t = match tidal_codec::stored_physical(bytes) {
                Some(PhysicalType::Bool) => DataType::Bool,
                Some(PhysicalType::Int) => DataType::BigInt,
                Some(PhysicalType::UInt) => DataType::UBigInt,
                Some(PhysicalType::Float) => DataType::Double,
                Some(PhysicalType::Str) => DataType::VarChar(u32::MAX),
                Some(PhysicalType::Timestamp) => DataType::Timestamp,
                // Decoding as any type reports the bad header with the chunk's offset.
                None => DataType::BigInt,
            };
            Ok(col_stats(&decode_chunk(bytes, path, loc, ci, c, t)?))
        })
        .collect()
}

/// The statistics of one column's values (its NULL flags counted, NULL slots ignored).
pub fn col_stats(c: &Column) -> ColStats {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::column_cache::{self, Key};

    const ROWS: usize = 4096;

    /// The columns as decoding gives them back (NULL slots hold the placeholder).
    fn columns() -> (Vec<Column>, Vec<DataType>) {
        let (c, t) = raw_columns();
        (c.iter().map(tidal_codec::fuzzing::normalize).collect(), t)
    }

    fn raw_columns() -> (Vec<Column>, Vec<DataType>) {
        let ts: Vec<i64> = (0..ROWS as i64).map(|i| 1_000 + i * 10).collect();
        let v = Column {
            data: ColumnData::Float((0..ROWS).map(|i| i as f64 * 0.5).collect()),
            nulls: (0..ROWS)
                .map(|i| (1500..1600).contains(&i) && i % 2 == 0)
                .collect(),
        };
        let s = Column::new(ColumnData::Str(
            (0..ROWS).map(|i| format!("r{}", i % 9)).collect(),
        ));
        (
            vec![Column::new(ColumnData::Timestamp(ts)), v, s],
            vec![DataType::Timestamp, DataType::Double, DataType::VarChar(8)],
        )
    }

    /// A file holding one 4,096-row block after 7 bytes of something else.
    fn block_file(dir: &Path) -> (File, std::path::PathBuf, BlockLoc) {
        let (cols, types) = raw_columns();
        let path = dir.join("b.data");
        let (file, loc) = write_block(&path, &cols, &types, Effort::Best);
        (file, path, loc)
    }

    /// Writes `cols` (column 0 the ts) as one block after 7 bytes of something else.
    fn write_block(
        path: &Path,
        cols: &[Column],
        types: &[DataType],
        effort: Effort,
    ) -> (File, BlockLoc) {
        let codecs: Vec<ColumnCodec> = types
            .iter()
            .map(|t| ColumnCodec::default_for(*t, 2))
            .collect();
        let mut out = vec![7u8; 7];
        encode_block(cols, types, &codecs, effort, &mut out).unwrap();
        std::fs::write(path, &out).unwrap();
        let ts = ts_slice(&cols[0]);
        let loc = BlockLoc {
            offset: 7,
            len: (out.len() - 7) as u32,
            ncols: cols.len() as u32,
            rows: ts.len() as u32,
            ts_min: ts[0],
            ts_max: ts[ts.len() - 1],
            view: None,
        };
        (File::open(path).unwrap(), loc)
    }

    #[test]
    fn a_narrow_range_decodes_and_caches_only_its_segments() {
        let d = tempfile::tempdir().unwrap();
        let (file, path, loc) = block_file(d.path());
        let (cols, types) = columns();
        let token = column_cache::file_token();
        let wanted: Vec<(usize, DataType)> = types.iter().copied().enumerate().collect();
        let key = |column: u32, part: u32| Key {
            file: token,
            block_offset: loc.offset,
            column,
            part,
        };
        // Rows 1530..=1560 lie in segment 2 (rows 1024..1536) and 3 (1536..2048).
        let (lo, hi) = (1_000 + 1530 * 10, 1_000 + 1560 * 10 + 5);
        for pass in 0..2 {
            let got = read_columns_range(&file, &path, token, &loc, &wanted, lo, hi).unwrap();
            for (g, c) in got.iter().zip(&cols) {
                assert_eq!(*g, c.slice(1530, 1561), "pass {pass}");
            }
        }
        let cache = column_cache::global();
        if cache.enabled() {
            assert!(cache.contains(&key(0, SEGMENT_INDEX)));
            for c in 0..3 {
                assert!(
                    cache.contains(&key(c, 2)) && cache.contains(&key(c, 3)),
                    "column {c}"
                );
                assert!(cache.contains(&key(c, ENCODED)), "column {c} opened");
                for other in [0, 1, 4, 7, WHOLE] {
                    assert!(!cache.contains(&key(c, other)), "column {c} part {other}");
                }
            }
        }
        // Without the cache: the same rows, decoded in one go.
        let t2 = column_cache::file_token();
        let got = read_range(&file, &path, t2, &loc, &wanted, lo, hi, false).unwrap();
        for (g, c) in got.iter().zip(&cols) {
            assert_eq!(*g, c.slice(1530, 1561), "uncached");
        }
        let got = read_range(&file, &path, t2, &loc, &wanted, 0, 1_000 + 700 * 10, false).unwrap();
        assert_eq!(got[2], cols[2].slice(0, 701));
        let uncached = Key {
            file: t2,
            ..key(0, SEGMENT_INDEX)
        };
        assert!(!column_cache::global().contains(&uncached));
        // A range covering the block reads it whole; ranges then come from the whole columns.
        let all = read_columns_range(&file, &path, token, &loc, &wanted, 0, i64::MAX).unwrap();
        assert_eq!(all, cols);
        let got = read_columns_range(
            &file,
            &path,
            token,
            &loc,
            &wanted,
            1_000 + 4000 * 10,
            1_000 + 4000 * 10,
        )
        .unwrap();
        assert_eq!(got[1], cols[1].slice(4000, 4001));
        // A column the block lacks reads as NULLs over exactly the rows of the range.
        let more = [(0, DataType::Timestamp), (5, DataType::BigInt)];
        let got = read_columns_range(
            &file,
            &path,
            column_cache::file_token(),
            &loc,
            &more,
            lo,
            hi,
        )
        .unwrap();
        assert_eq!(got[1], Column::all_null(DataType::BigInt, 31));
    }

    #[test]
    fn a_damaged_chunk_is_corruption_for_a_narrow_range_too() {
        let d = tempfile::tempdir().unwrap();
        let (_, path, loc) = block_file(d.path());
        let mut bytes = std::fs::read(&path).unwrap();
        let n = bytes.len();
        bytes[n - 3] ^= 0x10; // inside the last column's chunk
        std::fs::write(&path, &bytes).unwrap();
        let file = File::open(&path).unwrap();
        let wanted = [(0, DataType::Timestamp), (2, DataType::VarChar(8))];
        let e = read_columns_range(
            &file,
            &path,
            column_cache::file_token(),
            &loc,
            &wanted,
            1_000,
            1_100,
        )
        .unwrap_err();
        assert!(
            matches!(&e, VnodeError::Corruption { reason, .. } if reason.contains("checksum")),
            "{e}"
        );
    }

    #[test]
    fn statistics_computed_from_a_block_are_its_sma() {
        let d = tempfile::tempdir().unwrap();
        let n = 40;
        let nulls = |k: usize| (0..n).map(|i| i % k == 1).collect::<Vec<bool>>();
        // One column of every physical type, with NULLs, and an integer sum that overflows.
        let cols = vec![
            Column::new(ColumnData::Timestamp(
                (0..n as i64).map(|i| 5 + i).collect(),
            )),
            Column {
                data: ColumnData::Bool((0..n).map(|i| i % 3 == 0).collect()),
                nulls: nulls(4),
            },
            Column {
                data: ColumnData::Int((0..n as i64).map(|i| i64::MAX / 8 - i).collect()),
                nulls: nulls(5),
            },
            Column::new(ColumnData::Int((0..n as i64).map(|i| -i * 3).collect())),
            Column::new(ColumnData::UInt((0..n as u64).map(|i| i * 7 + 1).collect())),
            Column {
                data: ColumnData::Float((0..n).map(|i| i as f64 * -0.25).collect()),
                nulls: nulls(6),
            },
            Column {
                data: ColumnData::Str((0..n).map(|i| format!("s{}", i % 4)).collect()),
                nulls: nulls(7),
            },
        ];
        let types = [
            DataType::Timestamp,
            DataType::Bool,
            DataType::BigInt,
            DataType::SmallInt,
            DataType::UInt,
            DataType::Float,
            DataType::NChar(4),
        ];
        let path = d.path().join("s.data");
        let (file, loc) = write_block(&path, &cols, &types, Effort::Quick);
        let got = block_sma(&file, &path, &loc).unwrap();
        assert_eq!(got, compute_sma(&cols));
        assert_eq!(got[2].sum, SmaVal::None, "the overflowed sum is not kept");
        assert_eq!(got[3].sum, SmaVal::Int(-3 * (0..n as i64).sum::<i64>()));
        // A damaged chunk is a corruption error, as for any read of the block.
        let mut bad = std::fs::read(&path).unwrap();
        let last = bad.len() - 1;
        bad[last] ^= 0x40;
        std::fs::write(&path, &bad).unwrap();
        let file = File::open(&path).unwrap();
        let e = block_sma(&file, &path, &loc).unwrap_err();
        assert!(matches!(e, VnodeError::Corruption { .. }), "{e}");
    }
}
