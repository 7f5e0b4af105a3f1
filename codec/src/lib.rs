//! Column codecs: pure encode/decode of one column of a storage block (no I/O).
//!
//! [`encode_column`] turns a [`Column`] into a self-describing byte string: a small header
//! (format version, physical type, stage-1 encoding id, stage-2 compression id, flags, row
//! count), then the stage-1 payload (NULL bitmap if any NULL, then the non-NULL values in the
//! chosen encoding), optionally compressed as a whole by stage 2 (LZ4 / zstd) when that makes it
//! smaller. [`decode_column`] needs only the bytes, the column type and the expected row count.
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
use tidal_common::batch::{Column, ColumnData};
use tidal_common::types::{DataType, PhysicalType};
use tidal_common::StatusCode;

/// Current format version (header byte 0). See FORMAT.md for the rule on changing it.
pub const FORMAT_VERSION: u8 = 1;

/// Header flag bit 0: a NULL bitmap starts the stage-1 payload.
const FLAG_NULLS: u8 = 1;

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

/// Appends the stage-1 values of the non-NULL rows; returns the stage-1 id.
fn encode_values(
    col: &Column,
    mask: &[bool],
    t: DataType,
    e: Encoding,
    allow_rle: bool,
    out: &mut Vec<u8>,
) -> Result<(u8, bool), CodecError> {
    let auto: &[IntId] = if allow_rle {
        &int::AUTO_CANDIDATES
    } else {
        &int::AUTO_NO_RLE
    };
    let ints = |v: Vec<i64>, out: &mut Vec<u8>| -> Result<(u8, bool), CodecError> {
        let plan = match e {
            Encoding::Auto => auto,
            _ => int_plan(e).ok_or_else(|| bad_encoding(e, t))?,
        };
        let id = int::encode_best(&v, plan, out);
        Ok((id as u8, id.is_rle()))
    };
    match &col.data {
        ColumnData::Int(v) | ColumnData::Timestamp(v) => {
            ints(present(v, mask).copied().collect(), out)
        }
        // Unsigned values are bit-cast: all integer codecs wrap, so order-free reinterpretation
        // round-trips.
        ColumnData::UInt(v) => ints(present(v, mask).map(|&x| x as i64).collect(), out),
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
            let vals: Vec<f64> = present(v, mask).copied().collect();
            let (id, iid) = float::encode(&vals, fe, auto, out);
            Ok((id, iid.is_some_and(IntId::is_rle)))
        }
        ColumnData::Bool(v) => {
            let bitmap = match e {
                Encoding::Auto | Encoding::BitPacking => true,
                Encoding::Disabled => false,
                _ => return Err(bad_encoding(e, t)),
            };
            let vals: Vec<bool> = present(v, mask).copied().collect();
            Ok((bool::encode(&vals, bitmap, out), false))
        }
        ColumnData::Str(v) => {
            let dict = match e {
                Encoding::Auto => true,
                Encoding::Disabled => false,
                _ => return Err(bad_encoding(e, t)),
            };
            let vals: Vec<&str> = present(v, mask).map(|s| s.as_str()).collect();
            Ok((string::encode(&vals, dict, out), false))
        }
    }
}

/// Appends the self-describing encoding of `col` (its physical type must match `t`) to `out`.
pub fn encode_column(
    col: &Column,
    t: DataType,
    codec: &ColumnCodec,
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

    let mut best = stage(col, mask, t, codec.encoding, true, codec, rows)?;
    // Run-length output is already dense: under stage 2 a bit-packed encoding may end up
    // smaller (regular timestamps with gaps do), so compare after stage 2.
    if best.used_rle && codec.compression != Compression::None {
        let alt = stage(col, mask, t, codec.encoding, false, codec, rows)?;
        if alt.body.len() < best.body.len() {
            best = alt;
        }
    }
    // Auto on non-decimal floats: Gorilla wins alone, but byte planes often compress better
    // under stage 2 (docs/bench/codecs.md, "raw walk"), so try both when stage 2 is on.
    if codec.encoding == Encoding::Auto
        && p == PhysicalType::Float
        && best.s1 != float::ID_DECIMAL
        && codec.compression != Compression::None
    {
        let alt = stage(col, mask, t, Encoding::ByteSplit, true, codec, rows)?;
        if alt.body.len() < best.body.len() {
            best = alt;
        }
    }
    let Staged {
        s1,
        s2,
        raw_len,
        body,
        ..
    } = best;

    out.push(FORMAT_VERSION);
    out.push(phys_code(p));
    out.push(s1);
    out.push(s2);
    out.push(if has_nulls { FLAG_NULLS } else { 0 });
    put_varint(out, rows as u64);
    if s2 != stage2::ID_NONE {
        put_varint(out, raw_len as u64);
    }
    out.extend_from_slice(&body);
    Ok(())
}

/// A column's payload after both stages.
struct Staged {
    s1: u8,
    s2: u8,
    /// Stage-1 length (what stage 2 decompresses to).
    raw_len: usize,
    /// Stage-2 output, or the stage-1 payload when `s2` is none.
    body: Vec<u8>,
    /// A run-length integer encoding was chosen (directly or inside decimal).
    used_rle: bool,
}

fn stage(
    col: &Column,
    mask: &[bool],
    t: DataType,
    e: Encoding,
    allow_rle: bool,
    codec: &ColumnCodec,
    rows: usize,
) -> Result<Staged, CodecError> {
    let mut raw = Vec::new();
    if !mask.is_empty() {
        nulls::encode(mask, &mut raw);
    }
    let (s1, used_rle) = encode_values(col, mask, t, e, allow_rle, &mut raw)?;
    // Stage 2 is kept only if it pays for its own length field and stays within the expansion
    // limit the decoder enforces.
    if let Some((id, c)) = stage2::compress(&raw, codec.compression, codec.level) {
        let worth = c.len() + buf::varint_len(raw.len() as u64) < raw.len();
        if worth && raw.len() <= stage2::stage1_len_max(rows, c.len()) {
            return Ok(Staged {
                s1,
                s2: id,
                raw_len: raw.len(),
                body: c,
                used_rle,
            });
        }
    }
    Ok(Staged {
        s1,
        s2: stage2::ID_NONE,
        raw_len: raw.len(),
        body: raw,
        used_rle,
    })
}

/// Decodes bytes produced by [`encode_column`]. `rows` is the row count the caller expects; a
/// mismatch is an error.
pub fn decode_column(bytes: &[u8], t: DataType, rows: usize) -> Result<Column, CodecError> {
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
    if flags & !FLAG_NULLS != 0 {
        return Err(CodecError::Corrupt {
            offset: 4,
            reason: format!("unknown flags {flags:#04x}"),
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
    if s2 == stage2::ID_NONE {
        let base = r.offset();
        let mut pr = Reader::new(r.rest(), base);
        decode_payload(&mut pr, t, s1, flags, rows)
    } else {
        let compressed_len = r.remaining();
        let raw_len = r.varint_max(
            stage2::stage1_len_max(rows, compressed_len) as u64,
            "stage-1 length",
        )?;
        let at = r.offset();
        let raw = stage2::decompress(s2, r.rest(), raw_len as usize, at)?;
        let mut pr = Reader::new(&raw, 0);
        decode_payload(&mut pr, t, s1, flags, rows).map_err(|e| match e {
            CodecError::Corrupt { offset, reason } => CodecError::Corrupt {
                offset,
                reason: format!("{reason} (offset within the decompressed stage-1 payload)"),
            },
            other => other,
        })
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
    let unknown = |r: &Reader| {
        r.corrupt(format!(
            "unknown stage-1 encoding {s1} for {}",
            t.sql_name()
        ))
    };
    let data = match t.physical() {
        p @ (PhysicalType::Int | PhysicalType::UInt | PhysicalType::Timestamp) => {
            let id = IntId::from_u8(s1).ok_or_else(|| unknown(r))?;
            let mut v = Vec::with_capacity(n);
            int::decode(r, id, n, &mut v)?;
            match p {
                PhysicalType::Int => ColumnData::Int(nulls::expand(v, &mask, 0)),
                PhysicalType::Timestamp => ColumnData::Timestamp(nulls::expand(v, &mask, 0)),
                _ => ColumnData::UInt(nulls::expand(
                    v.into_iter().map(|x| x as u64).collect(),
                    &mask,
                    0,
                )),
            }
        }
        PhysicalType::Float => {
            let mut v = Vec::with_capacity(n);
            float::decode(r, s1, n, &mut v)?;
            ColumnData::Float(nulls::expand(v, &mask, 0.0))
        }
        PhysicalType::Bool => {
            let mut v = Vec::with_capacity(n);
            bool::decode(r, s1, n, &mut v)?;
            ColumnData::Bool(nulls::expand(v, &mask, false))
        }
        PhysicalType::Str => {
            let mut v = Vec::with_capacity(n);
            string::decode(r, s1, n, &mut v)?;
            ColumnData::Str(nulls::expand(v, &mask, String::new()))
        }
    };
    r.finish("column values")?;
    Ok(Column { data, nulls: mask })
}
