//! Stage 2: general-purpose compression (LZ4 or zstd) of the whole stage-1 payload.
//!
//! Invariants: decompression writes into a buffer of exactly the declared stage-1 length, which
//! the header caps (see [`stage1_len_max`]), so garbage can never make it allocate more than
//! O(rows + compressed bytes); a result of any other length is an error. zstd contexts are reused
//! per thread because creating one costs more than compressing a small block.

use std::cell::RefCell;

use crate::{CodecError, Compression, Level};

pub const ID_NONE: u8 = 0;
pub const ID_LZ4: u8 = 1;
pub const ID_ZSTD: u8 = 2;

/// Upper bound on stage-1 bytes per row for every fixed-width type (Gorilla's worst case is
/// under 10 bytes per value; FOR and simple-8b are at most 8 plus block headers).
const STAGE1_BYTES_PER_ROW_MAX: usize = 16;
/// Fixed slack for block and payload headers.
const STAGE1_SLACK_BYTES: usize = 1024;
/// Highest expansion a stage-2 block may declare. LZ4 cannot exceed about 255x; zstd can, and an
/// encoder that would need more keeps the block uncompressed instead.
const EXPANSION_MAX: usize = 255;

/// The largest stage-1 length a block of `rows` rows with `compressed` stage-2 bytes may declare.
pub fn stage1_len_max(rows: usize, compressed: usize) -> usize {
    rows.saturating_mul(STAGE1_BYTES_PER_ROW_MAX)
        .saturating_add(STAGE1_SLACK_BYTES)
        .saturating_add(compressed.saturating_mul(EXPANSION_MAX))
}

/// zstd level for each [`Level`] (measured in docs/bench/codecs.md: above 9 the gain on encoded
/// columns is tiny and encoding slows several-fold; decoding speed does not depend on it).
pub fn zstd_level(level: Level) -> i32 {
    match level {
        Level::Low => 1,
        Level::Medium => 3,
        Level::High => 9,
    }
}

thread_local! {
    static ZSTD_C: RefCell<Option<zstd::bulk::Compressor<'static>>> = const { RefCell::new(None) };
    static ZSTD_D: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
}

/// Compresses `raw`; None if the compressor failed (the caller then stores stage 1 as is).
pub fn compress(raw: &[u8], c: Compression, level: Level) -> Option<(u8, Vec<u8>)> {
    match c {
        Compression::None => None,
        Compression::Lz4 => Some((ID_LZ4, lz4_flex::block::compress(raw))),
        Compression::Zstd => ZSTD_C.with(|cell| {
            let mut slot = cell.borrow_mut();
            if slot.is_none() {
                *slot = zstd::bulk::Compressor::new(0).ok();
            }
            let comp = slot.as_mut()?;
            comp.set_compression_level(zstd_level(level)).ok()?;
            comp.compress(raw).ok().map(|b| (ID_ZSTD, b))
        }),
    }
}

/// Decompresses stage-2 block `data` (starting at absolute `offset`) of kind `id` into exactly
/// `raw_len` bytes.
pub fn decompress(
    id: u8,
    data: &[u8],
    raw_len: usize,
    offset: usize,
) -> Result<Vec<u8>, CodecError> {
    let corrupt = |reason: String| CodecError::Corrupt { offset, reason };
    match id {
        ID_LZ4 => {
            let mut out = vec![0u8; raw_len];
            let n = lz4_flex::block::decompress_into(data, &mut out)
                .map_err(|e| corrupt(format!("lz4: {e}")))?;
            if n != raw_len {
                return Err(corrupt(format!(
                    "lz4 produced {n} bytes, header says {raw_len}"
                )));
            }
            Ok(out)
        }
        ID_ZSTD => {
            let out = ZSTD_D.with(|cell| {
                let mut slot = cell.borrow_mut();
                if slot.is_none() {
                    *slot = zstd::bulk::Decompressor::new().ok();
                }
                match slot.as_mut() {
                    Some(d) => d
                        .decompress(data, raw_len)
                        .map_err(|e| corrupt(format!("zstd: {e}"))),
                    None => zstd::bulk::decompress(data, raw_len)
                        .map_err(|e| corrupt(format!("zstd: {e}"))),
                }
            })?;
            if out.len() != raw_len {
                return Err(corrupt(format!(
                    "zstd produced {} bytes, header says {raw_len}",
                    out.len()
                )));
            }
            Ok(out)
        }
        other => Err(corrupt(format!("unknown stage-2 compression {other}"))),
    }
}
