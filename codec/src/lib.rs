//! Column codecs: pure encode/decode of one column of a storage block (no I/O).
//!
//! [`encode_column`] turns a [`Column`] into a self-describing byte string: a small header
//! (format version, physical type, stage-1 encoding id, stage-2 compression id, flags, row
//! count), then the stage-1 payload (NULL bitmap if any NULL, then the non-NULL values in the
//! chosen encoding), optionally compressed as a whole by stage 2 (LZ4 / zstd) when that makes it
//! smaller. [`decode_column`] needs only the bytes, the column type and the expected row count.
//! A column of more than [`SEGMENT_ROWS`] rows is cut into segments encoded on their own, so
//! that [`open_column`] + [`EncodedColumn::decode_segments`] decode only the rows a reader needs
//! (a timestamp column's directory names each segment's first value).
//! The byte layout is specified in `codec/FORMAT.md`.
//!
//! Invariants:
//! - Round-trips are bit-exact for every value (NaN payloads, -0.0, i64::MIN/MAX, any UTF-8);
//!   the values of NULL rows are not kept: they decode as the type's placeholder (0/false/"").
//! - Decoding never panics, and allocates O(rows + bytes.len()) whatever the bytes are.
//! - A decoded column's `nulls` is empty when it has no NULL.

mod bitpack;
mod bool;
mod buf;
mod float;
#[doc(hidden)]
pub mod fuzzing;
mod gorilla;
mod int;
mod nulls;
mod options;
mod simple8b;
mod stage2;
mod string;
#[doc(hidden)]
pub mod test_util;
#[cfg(test)]
mod tests;

pub use options::{ColumnCodec, Compression, Encoding, Level, DEFAULT_COMP};

use buf::{put_varint, Reader};
use float::FloatEnc;
use int::IntId;
use std::borrow::Cow;
use std::ops::Range;
use tidal_common::batch::{Column, ColumnData};
use tidal_common::types::{DataType, PhysicalType};
use tidal_common::StatusCode;

/// Current format version (header byte 0). See FORMAT.md for the rule on changing it.
pub const FORMAT_VERSION: u8 = 2;

/// Header flag bit 0: a NULL bitmap starts the stage-1 payload (of a segmented column: some
/// segment has NULLs).
const FLAG_NULLS: u8 = 1;

/// Header flag bit 1 (version 2): the stage-1 payload is segmented.
const FLAG_SEGMENTS: u8 = 2;

/// Segment flag bit 0: a NULL mask of the segment's rows starts the segment.
const SEG_FLAG_NULLS: u8 = 1;

/// Rows per segment of the columns this build writes; a column of at most this many rows is
/// written unsegmented. Readers take the count from each column, so it may change.
pub const SEGMENT_ROWS: usize = 512;

#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("corrupt column block at byte {offset}: {reason}")]
    Corrupt { offset: usize, reason: String },
    #[error("column type mismatch: expected {expected}, found {found}")]
    TypeMismatch { expected: String, found: String },
    #[error("unsupported column block format version {found} (this build reads 1..={max})")]
    Version { found: u8, max: u8 },
    #[error("invalid column for encoding: {reason}")]
    InvalidColumn { reason: String },
}

impl CodecError {
    pub fn status_code(&self) -> StatusCode {
        match self {
            CodecError::Corrupt { .. } | CodecError::Version { .. } => StatusCode::Corruption,
            CodecError::TypeMismatch { .. } => StatusCode::TypeMismatch,
            CodecError::InvalidColumn { .. } => StatusCode::InvalidArgument,
        }
    }
}

/// Stable code of a physical type in the header. Never renumber.
fn phys_code(p: PhysicalType) -> u8 {
    match p {
        PhysicalType::Bool => 0,
        PhysicalType::Int => 1,
        PhysicalType::UInt => 2,
        PhysicalType::Float => 3,
        PhysicalType::Str => 4,
        PhysicalType::Timestamp => 5,
    }
}

/// The physical type an encoded column says it holds (its header's second byte), without
/// checking anything else: `None` for bytes too short or an unknown code. What a reader that
/// does not know the column's SQL type (statistics computed from a block) decodes it as.
pub fn stored_physical(bytes: &[u8]) -> Option<PhysicalType> {
    bytes.get(1).copied().and_then(phys_from_code)
}

fn phys_from_code(c: u8) -> Option<PhysicalType> {
    Some(match c {
        0 => PhysicalType::Bool,
        1 => PhysicalType::Int,
        2 => PhysicalType::UInt,
        3 => PhysicalType::Float,
        4 => PhysicalType::Str,
        5 => PhysicalType::Timestamp,
        _ => return None,
    })
}

fn data_phys(d: &ColumnData) -> PhysicalType {
    match d {
        ColumnData::Bool(_) => PhysicalType::Bool,
        ColumnData::Int(_) => PhysicalType::Int,
        ColumnData::UInt(_) => PhysicalType::UInt,
        ColumnData::Float(_) => PhysicalType::Float,
        ColumnData::Str(_) => PhysicalType::Str,
        ColumnData::Timestamp(_) => PhysicalType::Timestamp,
    }
}

/// The non-NULL values of `v` (all of them when `mask` is empty).
fn present<'a, T>(v: &'a [T], mask: &'a [bool]) -> impl Iterator<Item = &'a T> + Clone + 'a {
    v.iter()
        .enumerate()
        .filter(move |(i, _)| !mask.get(*i).copied().unwrap_or(false))
        .map(|(_, x)| x)
}

/// The non-NULL values of `v`, mapped by `f`, in one allocation: collected from the filter
/// of [`present`], which gives no size, the vector grew from 4 values by doubling (most of
/// the allocator's work on a flush of many small blocks).
fn present_vec<'a, T, U>(v: &'a [T], mask: &'a [bool], f: impl Fn(&'a T) -> U) -> Vec<U> {
    let mut out = Vec::with_capacity(v.len());
    if mask.is_empty() {
        out.extend(v.iter().map(f));
    } else {
        out.extend(present(v, mask).map(f));
    }
    out
}

fn int_plan(e: Encoding) -> Option<&'static [IntId]> {
    Some(match e {
        Encoding::Auto => &int::AUTO_CANDIDATES,
        Encoding::Disabled => &[IntId::Plain],
        Encoding::DeltaI => &[IntId::DeltaI],
        Encoding::DeltaD => &[IntId::DeltaD],
        Encoding::Simple8b => &[IntId::Simple8b],
        Encoding::BitPacking => &[IntId::BitPacking],
        _ => return None,
    })
}

fn bad_encoding(e: Encoding, t: DataType) -> CodecError {
    CodecError::InvalidColumn {
        reason: format!(
            "encoding '{}' does not apply to {} columns",
            ColumnCodec {
                encoding: e,
                compression: Compression::None,
                level: Level::Medium
            }
            .names()
            .0,
            t.sql_name()
        ),
    }
}

/// Appends the stage-1 values of the non-NULL rows of `range`; returns the stage-1 id. `mask`
/// covers exactly `range` (or is empty: no NULL there).
fn encode_values(
    col: &Column,
    range: Range<usize>,
    mask: &[bool],
    t: DataType,
    e: Encoding,
    auto: &[IntId],
    out: &mut Vec<u8>,
) -> Result<(u8, bool), CodecError> {
    let ints = |v: Vec<i64>, out: &mut Vec<u8>| -> Result<(u8, bool), CodecError> {
        let plan = match e {
            Encoding::Auto => auto,
            _ => int_plan(e).ok_or_else(|| bad_encoding(e, t))?,
        };
        let id = int::encode_best(&v, plan, out);
        Ok((id as u8, id.is_rle()))
    };
    fn part<T>(v: &[T], range: Range<usize>) -> &[T] {
        v.get(range).unwrap_or(&[])
    }
    match &col.data {
        ColumnData::Int(v) | ColumnData::Timestamp(v) => {
            ints(present_vec(part(v, range), mask, |&x| x), out)
        }
        // Unsigned values are bit-cast: all integer codecs wrap, so order-free reinterpretation
        // round-trips.
        ColumnData::UInt(v) => ints(present_vec(part(v, range), mask, |&x| x as i64), out),
        ColumnData::Float(v) => {
            let fe = match e {
                // 'delta-d' is TDengine's float default; for floats it means decimal (parse maps
                // it so too, this keeps a hand-built codec meaning the same).
                Encoding::Auto | Encoding::Decimal | Encoding::DeltaD => FloatEnc::Decimal,
                Encoding::Disabled => FloatEnc::Plain,
                Encoding::Gorilla => FloatEnc::Gorilla,
                Encoding::ByteSplit => FloatEnc::ByteSplit,
                _ => return Err(bad_encoding(e, t)),
            };
            let vals: Vec<f64> = present_vec(part(v, range), mask, |&x| x);
            let (id, iid) = float::encode(&vals, fe, auto, out);
            Ok((id, iid.is_some_and(IntId::is_rle)))
        }
        ColumnData::Bool(v) => {
            let bitmap = match e {
                Encoding::Auto | Encoding::BitPacking => true,
                Encoding::Disabled => false,
                _ => return Err(bad_encoding(e, t)),
            };
            let vals: Vec<bool> = present_vec(part(v, range), mask, |&x| x);
            Ok((bool::encode(&vals, bitmap, out), false))
        }
        ColumnData::Str(v) => {
            let dict = match e {
                Encoding::Auto => true,
                Encoding::Disabled => false,
                _ => return Err(bad_encoding(e, t)),
            };
            let vals: Vec<&str> = present_vec(part(v, range), mask, |s| s.as_str());
            Ok((string::encode(&vals, dict, out), false))
        }
    }
}

/// How hard [`encode_column_with`] looks for a column's smallest form under `auto`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effort {
    /// Every candidate of the type (see [`Encoding::Auto`]): for blocks that are kept.
    Best,
    /// Integers, timestamps and a decimal float's integers by delta-i alone (one pass, and
    /// what the other candidates usually lose to by a few bytes on short runs), no second try
    /// without run-length or with byte split: for a staging block that will be decoded and
    /// encoded again before it is kept (an STT block too small to move into a data file).
    /// An encoding other than `auto` is used as it is.
    Quick,
}

/// Integer candidates of [`Effort::Quick`] under `auto`.
const QUICK_CANDIDATES: [IntId; 1] = [IntId::DeltaI];

/// Appends the self-describing encoding of `col` (its physical type must match `t`) to `out`.
/// A column of more than [`SEGMENT_ROWS`] rows is written in segments (FORMAT.md, "Segments").
pub fn encode_column(
    col: &Column,
    t: DataType,
    codec: &ColumnCodec,
    out: &mut Vec<u8>,
) -> Result<(), CodecError> {
    encode_column_with(col, t, codec, Effort::Best, out)
}

/// [`encode_column`] with the given effort; the payload is decoded alike either way.
pub fn encode_column_with(
    col: &Column,
    t: DataType,
    codec: &ColumnCodec,
    effort: Effort,
    out: &mut Vec<u8>,
) -> Result<(), CodecError> {
    let p = t.physical();
    let found = data_phys(&col.data);
    if found != p {
        return Err(CodecError::TypeMismatch {
            expected: format!("{p:?} ({})", t.sql_name()),
            found: format!("{found:?}"),
        });
    }
    let rows = col.len();
    if !col.nulls.is_empty() && col.nulls.len() != rows {
        return Err(CodecError::InvalidColumn {
            reason: format!("null mask has {} entries for {rows} rows", col.nulls.len()),
        });
    }
    let has_nulls = col.nulls.iter().any(|&n| n);
    let mask: &[bool] = if has_nulls { &col.nulls } else { &[] };

    let quick = effort == Effort::Quick;
    let auto: &[IntId] = if quick {
        &QUICK_CANDIDATES
    } else {
        &int::AUTO_CANDIDATES
    };
    let mut best = stage(col, mask, t, codec.encoding, auto, codec, rows)?;
    // Run-length output is already dense: under stage 2 a bit-packed encoding may end up
    // smaller (regular timestamps with gaps do), so compare after stage 2.
    if best.used_rle && codec.compression != Compression::None {
        let alt = stage(col, mask, t, codec.encoding, &int::AUTO_NO_RLE, codec, rows)?;
        if alt.body.len() < best.body.len() {
            best = alt;
        }
    }
    // Auto on non-decimal floats: Gorilla wins alone, but byte planes often compress better
    // under stage 2 (docs/bench/codecs.md, "raw walk"), so try both when stage 2 is on.
    if codec.encoding == Encoding::Auto
        && !quick
        && p == PhysicalType::Float
        && best.s1 != float::ID_DECIMAL
        && codec.compression != Compression::None
    {
        let alt = stage(col, mask, t, Encoding::ByteSplit, auto, codec, rows)?;
        if alt.body.len() < best.body.len() {
            best = alt;
        }
    }
    let Staged {
        s1,
        s2,
        raw_len,
        body,
        segmented,
        ..
    } = best;

    out.push(FORMAT_VERSION);
    out.push(phys_code(p));
    // A segmented chunk names its stage-1 encodings per segment.
    out.push(if segmented { 0 } else { s1 });
    out.push(s2);
    let mut flags = if has_nulls { FLAG_NULLS } else { 0 };
    if segmented {
        flags |= FLAG_SEGMENTS;
    }
    out.push(flags);
    put_varint(out, rows as u64);
    if s2 != stage2::ID_NONE {
        put_varint(out, raw_len as u64);
    }
    out.extend_from_slice(&body);
    Ok(())
}

/// A column's payload after both stages.
struct Staged {
    /// The stage-1 id; of a segmented payload, the id every segment shares, or
    /// [`MIXED_IDS`].
    s1: u8,
    s2: u8,
    /// Stage-1 length (what stage 2 decompresses to).
    raw_len: usize,
    /// Stage-2 output, or the stage-1 payload when `s2` is none.
    body: Vec<u8>,
    /// A run-length integer encoding was chosen (directly or inside decimal).
    used_rle: bool,
    segmented: bool,
}

/// [`Staged::s1`] of a segmented payload whose segments use different encodings.
const MIXED_IDS: u8 = u8::MAX;

/// The smallest stage-1 payload stage 2 is tried on. Below it, stage 1 has left too little
/// for LZ4 or zstd to save their own framing (zstd's is at least 9 bytes): of about a million
/// payloads under 48 bytes in a flush of 100,000 subtables of 16 rows each, zstd made none
/// smaller, while each try cost a compression context's reset, 15% of that flush.
pub const STAGE2_PAYLOAD_BYTES_MIN: usize = 32;

fn stage(
    col: &Column,
    mask: &[bool],
    t: DataType,
    e: Encoding,
    auto: &[IntId],
    codec: &ColumnCodec,
    rows: usize,
) -> Result<Staged, CodecError> {
    let mut raw = Vec::new();
    let segmented = rows > SEGMENT_ROWS;
    let (s1, used_rle) = if segmented {
        encode_segments(col, mask, t, e, auto, &mut raw)?
    } else {
        if !mask.is_empty() {
            nulls::encode(mask, &mut raw);
        }
        encode_values(col, 0..rows, mask, t, e, auto, &mut raw)?
    };
    // Stage 2 is kept only if it pays for its own length field and stays within the expansion
    // limit the decoder enforces. It is not tried on a payload under
    // [`STAGE2_PAYLOAD_BYTES_MIN`].
    let tried = (raw.len() >= STAGE2_PAYLOAD_BYTES_MIN)
        .then(|| stage2::compress(&raw, codec.compression, codec.level))
        .flatten();
    if let Some((id, c)) = tried {
        let worth = c.len() + buf::varint_len(raw.len() as u64) < raw.len();
        if worth && raw.len() <= stage2::stage1_len_max(rows, c.len()) {
            return Ok(Staged {
                s1,
                s2: id,
                raw_len: raw.len(),
                body: c,
                used_rle,
                segmented,
            });
        }
    }
    Ok(Staged {
        s1,
        s2: stage2::ID_NONE,
        raw_len: raw.len(),
        body: raw,
        used_rle,
        segmented,
    })
}

/// Appends the segmented stage-1 payload of `col` (FORMAT.md, "Segments"): the directory, then
/// each segment of [`SEGMENT_ROWS`] rows encoded on its own (its own NULL mask and, under
/// `auto`, its own choice of encoding). Returns the id the segments share ([`MIXED_IDS`] if
/// they differ) and whether any used run-length.
fn encode_segments(
    col: &Column,
    mask: &[bool],
    t: DataType,
    e: Encoding,
    auto: &[IntId],
    out: &mut Vec<u8>,
) -> Result<(u8, bool), CodecError> {
    let rows = col.len();
    let nseg = rows.div_ceil(SEGMENT_ROWS);
    let mut body = Vec::new();
    let mut lens = Vec::with_capacity(nseg);
    let mut common: Option<u8> = None;
    let mut used_rle = false;
    for s in 0..nseg {
        let range = s * SEGMENT_ROWS..((s + 1) * SEGMENT_ROWS).min(rows);
        let m = mask.get(range.clone()).unwrap_or(&[]);
        let has_nulls = m.iter().any(|&n| n);
        let start = body.len();
        body.push(0);
        body.push(if has_nulls { SEG_FLAG_NULLS } else { 0 });
        let m = if has_nulls {
            nulls::encode(m, &mut body);
            m
        } else {
            &[]
        };
        let (id, rle) = encode_values(col, range, m, t, e, auto, &mut body)?;
        body[start] = id;
        used_rle |= rle;
        common = match common {
            None => Some(id),
            Some(c) if c == id => Some(c),
            Some(_) => Some(MIXED_IDS),
        };
        lens.push(body.len() - start);
    }
    put_varint(out, SEGMENT_ROWS as u64);
    for l in &lens {
        put_varint(out, *l as u64);
    }
    if let (ColumnData::Timestamp(v), true) = (&col.data, mask.is_empty()) {
        let mut prev = 0i64;
        for s in 0..nseg {
            let first = v.get(s * SEGMENT_ROWS).copied().unwrap_or(prev);
            put_varint(out, buf::zigzag(first.wrapping_sub(prev)));
            prev = first;
        }
    }
    out.extend_from_slice(&body);
    Ok((common.unwrap_or(MIXED_IDS), used_rle))
}

/// Decodes bytes produced by [`encode_column`]. `rows` is the row count the caller expects; a
/// mismatch is an error.
pub fn decode_column(bytes: &[u8], t: DataType, rows: usize) -> Result<Column, CodecError> {
    let chunk = open_column(bytes, t, rows)?;
    chunk.decode_segments(0..chunk.segment_count())
}

/// One encoded column opened for reading: header checked, stage 2 undone, the segment
/// directory read and checked. Decodes all rows, or only the rows of a run of segments (a
/// query that needs ten minutes of an eleven-hour block decodes one or two segments).
/// An unsegmented column is one segment of all its rows.
pub struct EncodedColumn<'a> {
    t: DataType,
    rows: usize,
    flags: u8,
    /// The header's stage-1 id (of an unsegmented column).
    s1: u8,
    /// The stage-1 payload.
    payload: Cow<'a, [u8]>,
    /// Where `payload` starts in the input, for error offsets; `None` when it was decompressed.
    base: Option<usize>,
    segment_rows: usize,
    /// (offset in `payload`, length) of each segment.
    segments: Vec<(usize, usize)>,
    /// First value of each segment (segmented timestamp columns without NULLs), else empty.
    firsts: Vec<i64>,
}

/// Opens bytes produced by [`encode_column`]: checks the header (version, type, flags, that it
/// holds `rows` rows), undoes stage 2 and reads the segment directory. Costs a decompression
/// but no value decoding.
pub fn open_column(
    bytes: &[u8],
    t: DataType,
    rows: usize,
) -> Result<EncodedColumn<'_>, CodecError> {
    let mut r = Reader::new(bytes, 0);
    let version = r.u8("format version")?;
    if version == 0 || version > FORMAT_VERSION {
        return Err(CodecError::Version {
            found: version,
            max: FORMAT_VERSION,
        });
    }
    let p = t.physical();
    let code = r.u8("physical type")?;
    match phys_from_code(code) {
        Some(found) if found == p => {}
        Some(found) => {
            return Err(CodecError::TypeMismatch {
                expected: format!("{p:?} ({})", t.sql_name()),
                found: format!("{found:?}"),
            })
        }
        None => {
            return Err(CodecError::Corrupt {
                offset: 1,
                reason: format!("unknown physical type code {code}"),
            })
        }
    }
    let s1 = r.u8("stage-1 encoding")?;
    let s2 = r.u8("stage-2 compression")?;
    let flags = r.u8("flags")?;
    let known = if version >= 2 {
        FLAG_NULLS | FLAG_SEGMENTS
    } else {
        FLAG_NULLS
    };
    if flags & !known != 0 {
        return Err(CodecError::Corrupt {
            offset: 4,
            reason: format!("unknown flags {flags:#04x} for format version {version}"),
        });
    }
    let rows_at = r.offset();
    let block_rows = r.varint("row count")?;
    if block_rows != rows as u64 {
        return Err(CodecError::Corrupt {
            offset: rows_at,
            reason: format!("block has {block_rows} rows, expected {rows}"),
        });
    }
    let (payload, base) = if s2 == stage2::ID_NONE {
        let base = r.offset();
        (Cow::Borrowed(r.rest()), Some(base))
    } else {
        let compressed_len = r.remaining();
        let raw_len = r.varint_max(
            stage2::stage1_len_max(rows, compressed_len) as u64,
            "stage-1 length",
        )?;
        let at = r.offset();
        let raw = stage2::decompress(s2, r.rest(), raw_len as usize, at)?;
        (Cow::Owned(raw), None)
    };
    let mut col = EncodedColumn {
        t,
        rows,
        flags,
        s1,
        payload,
        base,
        segment_rows: rows,
        segments: Vec::new(),
        firsts: Vec::new(),
    };
    if flags & FLAG_SEGMENTS == 0 {
        col.segments.push((0, col.payload.len()));
        return Ok(col);
    }
    if s1 != 0 {
        return Err(CodecError::Corrupt {
            offset: 2,
            reason: format!("a segmented column has stage-1 id {s1} in its header (must be 0)"),
        });
    }
    let mut d = Reader::new(&col.payload, base.unwrap_or(0));
    let segment_rows = d.varint_max(rows as u64, "rows per segment")? as usize;
    if segment_rows == 0 {
        return Err(col.corrupt(0, "a segmented column has 0 rows per segment".into()));
    }
    let nseg = rows.div_ceil(segment_rows);
    // Each segment takes at least its length byte: refuse a count the bytes cannot hold before
    // allocating for it.
    if nseg > d.remaining() {
        return Err(col.corrupt(
            0,
            format!(
                "{nseg} segments of {segment_rows} rows do not fit in {} bytes",
                d.remaining()
            ),
        ));
    }
    let mut lens = Vec::with_capacity(nseg);
    for _ in 0..nseg {
        lens.push(d.varint_max(d.remaining() as u64, "segment length")? as usize);
    }
    let mut firsts = Vec::new();
    if p == PhysicalType::Timestamp && flags & FLAG_NULLS == 0 {
        firsts.reserve(nseg);
        let mut prev = 0i64;
        for _ in 0..nseg {
            prev = prev.wrapping_add(d.zigzag_varint("segment first value")?);
            firsts.push(prev);
        }
    }
    let body_len = d.remaining();
    let mut at = col.payload.len() - body_len;
    let mut segments = Vec::with_capacity(nseg);
    for len in lens {
        segments.push((at, len));
        at = at.saturating_add(len);
    }
    if at != col.payload.len() {
        return Err(col.corrupt(
            0,
            format!(
                "the segments' lengths add up to {} bytes, the payload holds {body_len}",
                at.saturating_sub(col.payload.len() - body_len)
            ),
        ));
    }
    col.segment_rows = segment_rows;
    col.segments = segments;
    col.firsts = firsts;
    Ok(col)
}

impl EncodedColumn<'_> {
    /// The same column, owning its payload (copied only if it was not decompressed), so that
    /// it outlives the bytes it was opened from.
    pub fn into_owned(self) -> EncodedColumn<'static> {
        EncodedColumn {
            t: self.t,
            rows: self.rows,
            flags: self.flags,
            s1: self.s1,
            payload: Cow::Owned(self.payload.into_owned()),
            base: self.base,
            segment_rows: self.segment_rows,
            segments: self.segments,
            firsts: self.firsts,
        }
    }

    /// The physical type it was opened as (the one its header names).
    pub fn physical(&self) -> PhysicalType {
        self.t.physical()
    }

    /// Heap bytes held (the payload when owned, the directory).
    pub fn heap_bytes(&self) -> usize {
        let payload = match &self.payload {
            Cow::Owned(v) => v.capacity(),
            Cow::Borrowed(_) => 0,
        };
        payload + 16 * self.segments.capacity() + 8 * self.firsts.capacity()
    }

    /// Segments (1 for an unsegmented column).
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// Rows per segment (the last may hold fewer).
    pub fn segment_rows(&self) -> usize {
        self.segment_rows
    }

    /// The rows of segment `i` (empty past the end).
    pub fn segment_range(&self, i: usize) -> Range<usize> {
        let lo = i.saturating_mul(self.segment_rows).min(self.rows);
        let hi = (i.saturating_add(1))
            .saturating_mul(self.segment_rows)
            .min(self.rows);
        lo..hi
    }

    /// The segments that hold rows `rows` (clamped to the column).
    pub fn segments_of_rows(&self, rows: Range<usize>) -> Range<usize> {
        let step = self.segment_rows.max(1);
        let lo = (rows.start / step).min(self.segments.len());
        let hi = rows.end.div_ceil(step).min(self.segments.len());
        lo..hi.max(lo)
    }

    /// The first value of each segment of a segmented timestamp column without NULLs (the
    /// directory stores them, so a reader picks the segments of a time range without decoding
    /// any); `None` for other columns.
    pub fn first_values(&self) -> Option<&[i64]> {
        (!self.firsts.is_empty()).then_some(self.firsts.as_slice())
    }

    fn corrupt(&self, offset: usize, reason: String) -> CodecError {
        match self.base {
            Some(b) => CodecError::Corrupt {
                offset: b + offset,
                reason,
            },
            None => CodecError::Corrupt {
                offset,
                reason: format!("{reason} (offset within the decompressed stage-1 payload)"),
            },
        }
    }

    /// An error from a reader over the payload, with the decompressed-payload note.
    fn payload_error(&self, e: CodecError) -> CodecError {
        match (e, self.base) {
            (CodecError::Corrupt { offset, reason }, None) => CodecError::Corrupt {
                offset,
                reason: format!("{reason} (offset within the decompressed stage-1 payload)"),
            },
            (e, _) => e,
        }
    }

    /// Decodes the rows of segments `segs` (`0..segment_count()` for all rows) into one column.
    pub fn decode_segments(&self, segs: Range<usize>) -> Result<Column, CodecError> {
        if segs.start > segs.end || segs.end > self.segments.len() {
            return Err(CodecError::InvalidColumn {
                reason: format!(
                    "segments {}..{} asked of a column of {}",
                    segs.start,
                    segs.end,
                    self.segments.len()
                ),
            });
        }
        let base = self.base.unwrap_or(0);
        let bytes = |(off, len): (usize, usize)| self.payload.get(off..off + len).unwrap_or(&[]);
        if self.flags & FLAG_SEGMENTS == 0 {
            if segs.is_empty() {
                return Ok(Column::new(ColumnData::empty(self.t, 0)));
            }
            let mut r = Reader::new(&self.payload, base);
            return decode_payload(&mut r, self.t, self.s1, self.flags, self.rows)
                .map_err(|e| self.payload_error(e));
        }
        let p = self.t.physical();
        let lo = self.segment_range(segs.start).start;
        let total = self.segment_range(segs.end.saturating_sub(1)).end.max(lo) - lo;
        let mut values = Values::with_capacity(p, total);
        let mut mask: Vec<bool> = Vec::new();
        let mut any_null = false;
        let mut done = 0usize;
        for i in segs {
            let seg = self.segments.get(i).copied().unwrap_or((0, 0));
            let n = self.segment_range(i).len();
            let mut r = Reader::new(bytes(seg), base + seg.0);
            let run =
                |r: &mut Reader, values: &mut Values| -> Result<(Vec<bool>, usize), CodecError> {
                    let s1 = r.u8("segment stage-1 encoding")?;
                    let sf = r.u8("segment flags")?;
                    if sf & !SEG_FLAG_NULLS != 0
                        || (sf & SEG_FLAG_NULLS != 0 && self.flags & FLAG_NULLS == 0)
                    {
                        return Err(r.corrupt(format!("segment {i} has flags {sf:#04x}")));
                    }
                    let (m, nulls) = if sf & SEG_FLAG_NULLS != 0 {
                        nulls::decode(r, n)?
                    } else {
                        (Vec::new(), 0)
                    };
                    let before = values.len();
                    values.decode(r, self.t, s1, n - nulls)?;
                    r.finish("segment values")?;
                    if let (Some(&want), Some(got)) = (self.firsts.get(i), values.int_at(before)) {
                        if want != got {
                            return Err(r.corrupt(format!(
                                "segment {i} starts at {got}, its directory says {want}"
                            )));
                        }
                    }
                    Ok((m, nulls))
                };
            let (m, nulls) = run(&mut r, &mut values).map_err(|e| self.payload_error(e))?;
            if nulls > 0 {
                if !any_null {
                    mask.resize(done, false);
                    any_null = true;
                }
                mask.extend_from_slice(&m);
            } else if any_null {
                mask.resize(done + n, false);
            }
            done += n;
        }
        Ok(Column {
            data: values.into_data(p, &mask),
            nulls: mask,
        })
    }
}

/// Decoded non-NULL values of one physical type, appended segment by segment.
enum Values {
    Int(Vec<i64>),
    Float(Vec<f64>),
    Bool(Vec<bool>),
    Str(Vec<String>),
}

impl Values {
    fn with_capacity(p: PhysicalType, n: usize) -> Values {
        match p {
            PhysicalType::Int | PhysicalType::UInt | PhysicalType::Timestamp => {
                Values::Int(Vec::with_capacity(n))
            }
            PhysicalType::Float => Values::Float(Vec::with_capacity(n)),
            PhysicalType::Bool => Values::Bool(Vec::with_capacity(n)),
            PhysicalType::Str => Values::Str(Vec::with_capacity(n)),
        }
    }

    fn len(&self) -> usize {
        match self {
            Values::Int(v) => v.len(),
            Values::Float(v) => v.len(),
            Values::Bool(v) => v.len(),
            Values::Str(v) => v.len(),
        }
    }

    fn int_at(&self, i: usize) -> Option<i64> {
        match self {
            Values::Int(v) => v.get(i).copied(),
            _ => None,
        }
    }

    /// Appends `n` values of stage-1 id `s1`.
    fn decode(&mut self, r: &mut Reader, t: DataType, s1: u8, n: usize) -> Result<(), CodecError> {
        let unknown = |r: &Reader| {
            r.corrupt(format!(
                "unknown stage-1 encoding {s1} for {}",
                t.sql_name()
            ))
        };
        match self {
            Values::Int(v) => {
                let id = IntId::from_u8(s1).ok_or_else(|| unknown(r))?;
                int::decode(r, id, n, v)
            }
            Values::Float(v) => float::decode(r, s1, n, v),
            Values::Bool(v) => bool::decode(r, s1, n, v),
            Values::Str(v) => string::decode(r, s1, n, v),
        }
    }

    /// The column data: the values spread over `mask` (NULL slots get the placeholder).
    fn into_data(self, p: PhysicalType, mask: &[bool]) -> ColumnData {
        match self {
            Values::Int(v) => match p {
                PhysicalType::Int => ColumnData::Int(nulls::expand(v, mask, 0)),
                PhysicalType::Timestamp => ColumnData::Timestamp(nulls::expand(v, mask, 0)),
                _ => ColumnData::UInt(nulls::expand(
                    v.into_iter().map(|x| x as u64).collect(),
                    mask,
                    0,
                )),
            },
            Values::Float(v) => ColumnData::Float(nulls::expand(v, mask, 0.0)),
            Values::Bool(v) => ColumnData::Bool(nulls::expand(v, mask, false)),
            Values::Str(v) => ColumnData::Str(nulls::expand(v, mask, String::new())),
        }
    }
}

fn decode_payload(
    r: &mut Reader,
    t: DataType,
    s1: u8,
    flags: u8,
    rows: usize,
) -> Result<Column, CodecError> {
    let (mask, null_count) = if flags & FLAG_NULLS != 0 {
        nulls::decode(r, rows)?
    } else {
        (Vec::new(), 0)
    };
    let n = rows - null_count;
    let p = t.physical();
    let mut values = Values::with_capacity(p, n);
    values.decode(r, t, s1, n)?;
    r.finish("column values")?;
    Ok(Column {
        data: values.into_data(p, &mask),
        nulls: mask,
    })
}
