//! Helpers shared by the fuzz targets (fuzz/) and the corpus replay test, so both read fuzz
//! inputs the same way. Not part of the storage API.
//!
//! Invariant: [`decode_input`] must never panic for any input; the fuzz target asserts exactly
//! that.

use tidal_common::batch::{Column, ColumnData};
use tidal_common::types::DataType;

use crate::{decode_column, open_column};

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
            check_segments(block, t, &col);
            true
        }
        Err(_) => false,
    }
}

/// Every segment of a column that decoded whole decodes alone to its rows of the whole, and a
/// timestamp directory's first values are the segments' first rows.
fn check_segments(block: &[u8], t: DataType, whole: &Column) {
    let Ok(enc) = open_column(block, t, whole.len()) else {
        panic!("a column that decodes whole must open");
    };
    let n = enc.segment_count();
    for i in 0..n {
        let rows = enc.segment_range(i);
        let Ok(part) = enc.decode_segments(i..i + 1) else {
            panic!("segment {i} of a column that decodes whole must decode");
        };
        let want = whole.slice(rows.start, rows.end);
        assert!(same_after_roundtrip(&want, &part), "segment {i} differs");
        if let (Some(f), ColumnData::Timestamp(v)) = (enc.first_values(), &whole.data) {
            assert_eq!(f.get(i), v.get(rows.start), "first value of segment {i}");
        }
    }
    if n > 2 {
        let (Ok(mid), r) = (enc.decode_segments(1..n - 1), enc.segment_range(1)) else {
            panic!("a run of segments must decode");
        };
        let end = enc.segment_range(n - 2).end;
        assert!(same_after_roundtrip(&whole.slice(r.start, end), &mid));
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
