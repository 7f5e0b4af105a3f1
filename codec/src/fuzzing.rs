//! Helpers shared by the fuzz targets (fuzz/) and the corpus replay test, so both read fuzz
//! inputs the same way. Not part of the storage API.
//!
//! Invariant: [`decode_input`] must never panic for any input; the fuzz target asserts exactly
//! that.

use tidal_common::batch::{Column, ColumnData};
use tidal_common::types::DataType;

use crate::decode_column;

/// Every data type, in their stable code order; a fuzz input's first byte indexes it (mod 14).
pub const TYPES: [DataType; 14] = [
    DataType::Timestamp,
    DataType::Bool,
    DataType::TinyInt,
    DataType::SmallInt,
    DataType::Int,
    DataType::BigInt,
    DataType::UTinyInt,
    DataType::USmallInt,
    DataType::UInt,
    DataType::UBigInt,
    DataType::Float,
    DataType::Double,
    DataType::VarChar(64),
    DataType::NChar(64),
];

/// Rows a fuzz input may ask for: u16 range, so allocation stays small.
pub const FUZZ_ROWS_MAX: usize = u16::MAX as usize;

/// Builds a fuzz input for `decode_input`.
pub fn make_input(type_index: u8, rows: u16, block: &[u8]) -> Vec<u8> {
    let mut v = vec![type_index];
    v.extend_from_slice(&rows.to_le_bytes());
    v.extend_from_slice(block);
    v
}

/// Byte 0 picks the type, bytes 1-2 (LE) the expected row count, the rest is the block.
/// Returns the decode result's success (for tests), never panics.
pub fn decode_input(data: &[u8]) -> bool {
    let (Some(&ty), Some(r0), Some(r1)) = (data.first(), data.get(1), data.get(2)) else {
        return false;
    };
    let t = TYPES[usize::from(ty) % TYPES.len()];
    let rows = usize::from(u16::from_le_bytes([*r0, *r1]));
    let block = data.get(3..).unwrap_or(&[]);
    match decode_column(block, t, rows) {
        Ok(col) => {
            assert_eq!(col.len(), rows, "decoded row count");
            assert!(
                col.nulls.is_empty() || col.nulls.len() == rows,
                "mask length"
            );
            assert!(
                col.nulls.is_empty() || col.nulls.iter().any(|&n| n),
                "a mask without NULLs must be empty"
            );
            true
        }
        Err(_) => false,
    }
}

/// What decoding must give back: NULL slots hold the placeholder, no mask when no NULL.
pub fn normalize(col: &Column) -> Column {
    let mut c = col.clone();
    if !c.nulls.iter().any(|&n| n) {
        c.nulls.clear();
        return c;
    }
    let m = c.nulls.clone();
    fn blank<T>(v: &mut [T], m: &[bool], f: impl Fn(&mut T)) {
        v.iter_mut().zip(m).filter(|p| *p.1).for_each(|p| f(p.0));
    }
    match &mut c.data {
        ColumnData::Bool(v) => blank(v, &m, |x| *x = false),
        ColumnData::Int(v) | ColumnData::Timestamp(v) => blank(v, &m, |x| *x = 0),
        ColumnData::UInt(v) => blank(v, &m, |x| *x = 0),
        ColumnData::Float(v) => blank(v, &m, |x| *x = 0.0),
        ColumnData::Str(v) => blank(v, &m, |x| x.clear()),
    }
    c
}

/// True if `back` is what decoding `orig` must give: [`normalize`]d, floats compared by bits
/// (PartialEq would fail on NaN and accept -0.0 == 0.0).
pub fn same_after_roundtrip(orig: &Column, back: &Column) -> bool {
    let want = normalize(orig);
    match (&want.data, &back.data) {
        (ColumnData::Float(x), ColumnData::Float(y)) => {
            want.nulls == back.nulls
                && x.len() == y.len()
                && x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits())
        }
        _ => want == *back,
    }
}

/// The files directly in `dir`, sorted (none when it does not exist): a fuzz corpus or crash
/// artifact directory, as the corpus replay tests of every crate read them.
pub fn corpus_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<std::path::PathBuf> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    v
}
