//! An arbitrary column, type and codec → encode → decode must give the column back bit-exactly
//! (NULL slots as placeholders), and encoding must succeed for every valid codec.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use tidal_codec::{decode_column, encode_column, ColumnCodec, Compression, Encoding, Level};
use tidal_common::batch::{Column, ColumnData};
use tidal_common::types::DataType;

#[derive(Arbitrary, Debug)]
enum Values {
    Bool(Vec<bool>),
    Int(Vec<i64>),
    /// Small deltas, so the delta codecs see realistic runs rather than noise.
    IntWalk(i64, Vec<i16>),
    UInt(Vec<u64>),
    Float(Vec<u64>),
    /// k-decimal values exercise the decimal codec and its exactness check.
    Decimal(u8, Vec<i32>),
    F32(Vec<u32>),
    Str(Vec<String>),
    Timestamp(i64, Vec<u16>),
}

#[derive(Arbitrary, Debug)]
struct Input {
    values: Values,
    nulls: Vec<bool>,
    encoding: u8,
    compression: u8,
    level: u8,
}

const ENCODINGS: [Encoding; 9] = [
    Encoding::Auto,
    Encoding::Disabled,
    Encoding::DeltaI,
    Encoding::DeltaD,
    Encoding::Simple8b,
    Encoding::BitPacking,
    Encoding::Decimal,
    Encoding::Gorilla,
    Encoding::ByteSplit,
];

fuzz_target!(|input: Input| {
    let (t, data) = match input.values {
        Values::Bool(v) => (DataType::Bool, ColumnData::Bool(v)),
        Values::Int(v) => (DataType::BigInt, ColumnData::Int(v)),
        Values::IntWalk(start, d) => {
            let mut acc = start;
            let v = d
                .into_iter()
                .map(|x| {
                    acc = acc.wrapping_add(i64::from(x));
                    acc
                })
                .collect();
            (DataType::BigInt, ColumnData::Int(v))
        }
        Values::UInt(v) => (DataType::UBigInt, ColumnData::UInt(v)),
        Values::Float(v) => (
            DataType::Double,
            ColumnData::Float(v.into_iter().map(f64::from_bits).collect()),
        ),
        Values::Decimal(k, v) => {
            let p = 10f64.powi(i32::from(k % 8));
            (
                DataType::Double,
                ColumnData::Float(v.into_iter().map(|m| f64::from(m) / p).collect()),
            )
        }
        Values::F32(v) => (
            DataType::Float,
            ColumnData::Float(
                v.into_iter()
                    .map(|b| f64::from(f32::from_bits(b)))
                    .collect(),
            ),
        ),
        Values::Str(v) => (DataType::VarChar(100), ColumnData::Str(v)),
        Values::Timestamp(start, d) => {
            let mut acc = start;
            let v = d
                .into_iter()
                .map(|x| {
                    acc = acc.wrapping_add(i64::from(x));
                    acc
                })
                .collect();
            (DataType::Timestamp, ColumnData::Timestamp(v))
        }
    };
    let n = data.len();
    let mut nulls = input.nulls;
    nulls.resize(n, false);
    let col = Column { data, nulls };
    let codec = ColumnCodec {
        encoding: ENCODINGS[usize::from(input.encoding) % ENCODINGS.len()],
        compression: [Compression::None, Compression::Lz4, Compression::Zstd]
            [usize::from(input.compression) % 3],
        level: [Level::Low, Level::Medium, Level::High][usize::from(input.level) % 3],
    };
    // Re-parse through the names so only codecs valid for the type are used; an invalid pair
    // must be refused by encode_column, not mis-encoded.
    let (e, c, l) = codec.names();
    let valid = ColumnCodec::parse(t, Some(e), Some(c), Some(l), 2).is_ok();
    let mut out = Vec::new();
    let res = encode_column(&col, t, &codec, &mut out);
    if !valid {
        assert!(res.is_err(), "{codec:?} accepted for {t:?}");
        return;
    }
    res.expect("encode of a valid column");
    let back = decode_column(&out, t, n).expect("decode of a fresh encoding");
    assert!(
        tidal_codec::fuzzing::same_after_roundtrip(&col, &back),
        "{col:?}\n{back:?}"
    );
});
