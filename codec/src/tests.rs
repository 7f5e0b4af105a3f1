//! Whole-column round-trip and corruption tests (per-encoding tests live beside each module).

use super::*;
use crate::fuzzing::same_after_roundtrip;
use crate::test_util::Rng;

const COMPRESSIONS: [Compression; 3] = [Compression::None, Compression::Lz4, Compression::Zstd];

fn encodings(p: PhysicalType) -> Vec<Encoding> {
    match p {
        PhysicalType::Int | PhysicalType::UInt | PhysicalType::Timestamp => vec![
            Encoding::Auto,
            Encoding::Disabled,
            Encoding::DeltaI,
            Encoding::DeltaD,
            Encoding::Simple8b,
            Encoding::BitPacking,
        ],
        PhysicalType::Float => vec![
            Encoding::Auto,
            Encoding::Disabled,
            Encoding::Decimal,
            Encoding::Gorilla,
            Encoding::ByteSplit,
        ],
        PhysicalType::Bool => vec![Encoding::Auto, Encoding::Disabled, Encoding::BitPacking],
        PhysicalType::Str => vec![Encoding::Auto, Encoding::Disabled],
    }
}

/// Every encoding that applies to `p` under every compression, at `level`.
fn codecs(p: PhysicalType, level: Level) -> Vec<ColumnCodec> {
    let mut out = Vec::new();
    for e in encodings(p) {
        for c in COMPRESSIONS {
            out.push(ColumnCodec {
                encoding: e,
                compression: c,
                level,
            });
        }
    }
    out
}

fn types() -> Vec<DataType> {
    vec![
        DataType::Timestamp,
        DataType::Bool,
        DataType::BigInt,
        DataType::TinyInt,
        DataType::UBigInt,
        DataType::Float,
        DataType::Double,
        DataType::VarChar(64),
        DataType::NChar(16),
    ]
}

fn edge_columns(t: DataType) -> Vec<Column> {
    let data: Vec<ColumnData> = match t.physical() {
        PhysicalType::Int | PhysicalType::Timestamp => {
            let mk = |v: Vec<i64>| {
                if t.physical() == PhysicalType::Int {
                    ColumnData::Int(v)
                } else {
                    ColumnData::Timestamp(v)
                }
            };
            vec![
                mk(vec![]),
                mk(vec![0]),
                mk(vec![i64::MIN, i64::MAX, i64::MIN, 0, -1, 1, i64::MAX]),
                mk((0..4096).map(|i| 1_451_606_400_000 + i * 10_000).collect()),
                mk(vec![7; 1000]),
            ]
        }
        PhysicalType::UInt => vec![
            ColumnData::UInt(vec![]),
            ColumnData::UInt(vec![u64::MAX, 0, u64::MAX, 1 << 63, (1 << 63) - 1]),
            ColumnData::UInt((0..300).collect()),
        ],
        PhysicalType::Float => vec![
            ColumnData::Float(vec![]),
            ColumnData::Float(vec![
                -0.0,
                0.0,
                f64::NAN,
                f64::from_bits(0x7ff4_0000_dead_beef),
                f64::from_bits(0xfff8_0000_0000_0001),
                f64::INFINITY,
                f64::NEG_INFINITY,
                f64::MIN_POSITIVE,
                5e-324,
                f64::MAX,
            ]),
            ColumnData::Float((0..1000).map(|i| (i % 97) as f64 / 100.0).collect()),
            ColumnData::Float(vec![
                f64::from(1.1f32),
                f64::from(-7.25f32),
                f64::from(f32::MIN),
            ]),
        ],
        PhysicalType::Bool => vec![
            ColumnData::Bool(vec![]),
            ColumnData::Bool(vec![true]),
            ColumnData::Bool((0..1001).map(|i| i % 3 == 1).collect()),
        ],
        PhysicalType::Str => vec![
            ColumnData::Str(vec![]),
            ColumnData::Str(vec![String::new()]),
            ColumnData::Str(
                ["", "a", "héllo ✓", "日本語テキスト", "🦀🦀", "", "a"]
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
            ),
            ColumnData::Str((0..700).map(|i| format!("v{}", i % 5)).collect()),
        ],
    };
    let mut cols = Vec::new();
    for d in data {
        let n = d.len();
        cols.push(Column::new(d.clone()));
        if n > 0 {
            cols.push(Column {
                data: d.clone(),
                nulls: (0..n).map(|i| i % 3 == 0).collect(),
            });
            cols.push(Column {
                data: d.clone(),
                nulls: vec![true; n],
            });
            cols.push(Column {
                data: d,
                nulls: vec![false; n],
            });
        }
    }
    cols
}

pub fn random_column(t: DataType, rng: &mut Rng, n: usize) -> Column {
    let mode = rng.below(4);
    let data = match t.physical() {
        PhysicalType::Int | PhysicalType::Timestamp | PhysicalType::UInt => {
            let mut acc = rng.next_u64() as i64;
            let shift = rng.below(64);
            let v: Vec<i64> = (0..n)
                .map(|_| match mode {
                    0 => (rng.next_u64() >> shift) as i64,
                    1 => {
                        acc = acc.wrapping_add((rng.next_u64() >> shift) as i64 - (1 << 20));
                        acc
                    }
                    2 => rng.below(6) as i64,
                    _ => {
                        acc = acc.wrapping_add(10_000 * (1 + (rng.below(10) == 0) as i64));
                        acc
                    }
                })
                .collect();
            match t.physical() {
                PhysicalType::Int => ColumnData::Int(v),
                PhysicalType::Timestamp => ColumnData::Timestamp(v),
                _ => ColumnData::UInt(v.into_iter().map(|x| x as u64).collect()),
            }
        }
        PhysicalType::Float => {
            let mut x = rng.f64() * 100.0;
            let p = 10f64.powi(rng.below(7) as i32);
            ColumnData::Float(
                (0..n)
                    .map(|_| match mode {
                        0 => f64::from_bits(rng.next_u64()),
                        1 => {
                            x += rng.f64() - 0.5;
                            (x * p).trunc() / p
                        }
                        2 => f64::from((x + rng.f64()) as f32),
                        _ => {
                            x += rng.f64() - 0.5;
                            x
                        }
                    })
                    .collect(),
            )
        }
        PhysicalType::Bool => ColumnData::Bool((0..n).map(|_| rng.below(3) == 0).collect()),
        PhysicalType::Str => ColumnData::Str(
            (0..n)
                .map(|_| {
                    let len = rng.below(if mode == 0 { 3 } else { 20 }) as usize;
                    (0..len)
                        .map(|_| char::from_u32(rng.below(0x800) as u32).unwrap_or('x'))
                        .collect()
                })
                .collect(),
        ),
    };
    let nulls = if rng.below(2) == 0 {
        Vec::new()
    } else {
        (0..n).map(|_| rng.below(10) == 0).collect()
    };
    Column { data, nulls }
}

/// Encodes `col` with both efforts, checks each decodes back to it, returns `Best`'s bytes.
fn roundtrip(col: &Column, t: DataType, codec: &ColumnCodec) -> Vec<u8> {
    let mut best = Vec::new();
    for effort in [Effort::Best, Effort::Quick] {
        let mut out = vec![0xAA]; // encode_column appends: prove it keeps what was there
        encode_column_with(col, t, codec, effort, &mut out).unwrap();
        assert_eq!(out.first(), Some(&0xAA));
        let bytes = out.split_off(1);
        let back = decode_column(&bytes, t, col.len())
            .unwrap_or_else(|e| panic!("{t:?} {codec:?} {effort:?}: {e}"));
        assert!(
            same_after_roundtrip(col, &back),
            "{t:?} {codec:?} {effort:?}\n{col:?}\n{back:?}"
        );
        if effort == Effort::Best {
            let mut plain = Vec::new();
            encode_column(col, t, codec, &mut plain).unwrap();
            assert_eq!(plain, bytes, "encode_column is the best effort");
            best = bytes;
        }
    }
    best
}

/// The stage-1 id in a column payload's header (FORMAT.md: version, type, stage-1 id, ...).
fn stage1_id(col: &Column, t: DataType, codec: &ColumnCodec, effort: Effort) -> u8 {
    let mut out = Vec::new();
    encode_column_with(col, t, codec, effort, &mut out).unwrap();
    out[2]
}

#[test]
fn quick_effort_encodes_by_delta_i_alone_and_keeps_explicit_encodings() {
    let codec = ColumnCodec::default_for(DataType::BigInt, 2);
    // Values that jump back and forth: frame of reference (bit-packing) beats delta-i.
    let jumpy = Column::new(ColumnData::Int(
        (0..64)
            .map(|i| if i % 2 == 0 { 0 } else { 1 << 20 })
            .collect(),
    ));
    assert_eq!(
        stage1_id(&jumpy, DataType::BigInt, &codec, Effort::Best),
        IntId::BitPacking as u8
    );
    assert_eq!(
        stage1_id(&jumpy, DataType::BigInt, &codec, Effort::Quick),
        IntId::DeltaI as u8
    );
    // Long runs: run-length wins under Best.
    let runs = Column::new(ColumnData::Int((0..64).map(|i| i / 32 * 1000).collect()));
    assert!(
        IntId::from_u8(stage1_id(&runs, DataType::BigInt, &codec, Effort::Best))
            .is_some_and(IntId::is_rle)
    );
    assert_eq!(
        stage1_id(&runs, DataType::BigInt, &codec, Effort::Quick),
        IntId::DeltaI as u8
    );
    // A decimal float column: decimal, its integers by delta-i.
    let dec = Column::new(ColumnData::Float(
        (0..64)
            .map(|i| if i % 2 == 0 { 0.5 } else { 1000.25 })
            .collect(),
    ));
    let none = ColumnCodec {
        compression: Compression::None,
        ..ColumnCodec::default_for(DataType::Double, 2)
    };
    let mut out = Vec::new();
    encode_column_with(&dec, DataType::Double, &none, Effort::Quick, &mut out).unwrap();
    assert_eq!(out[2], float::ID_DECIMAL);
    // Header (5 bytes, one-byte row count), then f32 flag, k, the integers' id.
    assert_eq!(out[8], IntId::DeltaI as u8, "{out:?}");
    // Not decimal: Gorilla, without the byte-split try Best makes under stage 2.
    let mut rng = Rng::new(7);
    let raw = Column::new(ColumnData::Float(
        (0..64)
            .map(|_| f64::from_bits(rng.next_u64() >> 2))
            .collect(),
    ));
    let zstd = ColumnCodec::default_for(DataType::Double, 2);
    assert_eq!(
        stage1_id(&raw, DataType::Double, &zstd, Effort::Quick),
        float::ID_GORILLA
    );
    // An explicit encoding is used as it is.
    let s8b = ColumnCodec {
        encoding: Encoding::Simple8b,
        ..codec
    };
    assert_eq!(
        stage1_id(&jumpy, DataType::BigInt, &s8b, Effort::Quick),
        IntId::Simple8b as u8
    );
}

#[test]
fn edge_cases_roundtrip_every_codec() {
    for t in types() {
        for col in edge_columns(t) {
            for level in [Level::Low, Level::High] {
                for codec in codecs(t.physical(), level) {
                    roundtrip(&col, t, &codec);
                }
            }
        }
    }
}

#[test]
fn random_roundtrip_every_codec() {
    let mut rng = Rng::new(42);
    for t in types() {
        for _ in 0..20 {
            let n = match rng.below(4) {
                0 => rng.below(10) as usize,
                1 => 4096,
                _ => rng.below(1500) as usize,
            };
            let col = random_column(t, &mut rng, n);
            for codec in codecs(t.physical(), Level::Medium) {
                roundtrip(&col, t, &codec);
            }
        }
    }
}

#[test]
fn type_and_row_mismatches_are_errors() {
    let col = Column::new(ColumnData::Int(vec![1, 2, 3]));
    let codec = ColumnCodec::default_for(DataType::BigInt, 2);
    let mut out = Vec::new();
    assert!(matches!(
        encode_column(&col, DataType::Double, &codec, &mut out),
        Err(CodecError::TypeMismatch { .. })
    ));
    let bad = Column {
        data: ColumnData::Int(vec![1, 2, 3]),
        nulls: vec![true],
    };
    assert!(encode_column(&bad, DataType::BigInt, &codec, &mut out).is_err());
    let gorilla = ColumnCodec {
        encoding: Encoding::Gorilla,
        ..codec
    };
    assert!(encode_column(&col, DataType::BigInt, &gorilla, &mut out).is_err());
    encode_column(&col, DataType::BigInt, &codec, &mut out).unwrap();
    assert!(decode_column(&out, DataType::BigInt, 4).is_err());
    assert!(matches!(
        decode_column(&out, DataType::Double, 3),
        Err(CodecError::TypeMismatch { .. })
    ));
    // Int and UInt share codecs but not the header's physical type.
    assert!(decode_column(&out, DataType::UBigInt, 3).is_err());
    let mut v3 = out.clone();
    v3[0] = FORMAT_VERSION + 1;
    assert!(matches!(
        decode_column(&v3, DataType::BigInt, 3),
        Err(CodecError::Version { .. })
    ));
    let mut extra = out.clone();
    extra.push(0);
    assert!(decode_column(&extra, DataType::BigInt, 3).is_err());
    assert_eq!(
        decode_column(&out, DataType::BigInt, 3).unwrap().data,
        ColumnData::Int(vec![1, 2, 3])
    );
}

#[test]
fn prefixes_and_bit_flips_never_panic() {
    let mut rng = Rng::new(1234);
    for t in types() {
        for round in 0..6 {
            let n = if round == 0 {
                4096
            } else {
                rng.below(600) as usize
            };
            let col = random_column(t, &mut rng, n);
            for codec in codecs(t.physical(), Level::Low) {
                let bytes = roundtrip(&col, t, &codec);
                // Every prefix in release builds; in debug builds (the CI suite) the first 64
                // and then a stride, which keeps the test to seconds.
                let stride = if cfg!(debug_assertions) {
                    (bytes.len() / 128).max(1)
                } else {
                    1
                };
                for cut in (0..bytes.len()).filter(|c| *c < 64 || c % stride == 0) {
                    let prefix = bytes.get(..cut).unwrap_or(&[]);
                    assert!(
                        decode_column(prefix, t, n).is_err(),
                        "{t:?} {codec:?} prefix {cut}/{}",
                        bytes.len()
                    );
                }
                for _ in 0..40 {
                    let mut b = bytes.clone();
                    for _ in 0..1 + rng.below(3) {
                        let i = (rng.next_u64() as usize) % b.len();
                        b[i] ^= 1 << rng.below(8);
                    }
                    if let Ok(back) = decode_column(&b, t, n) {
                        assert_eq!(back.len(), n);
                        assert!(back.nulls.is_empty() || back.nulls.len() == n);
                    }
                    // Any type and row count must fail cleanly too.
                    for other in [DataType::Bool, DataType::Double, DataType::VarChar(1)] {
                        let _ = decode_column(&b, other, n);
                    }
                    let _ = decode_column(&b, t, n + 1);
                }
            }
        }
    }
}

#[test]
fn garbage_never_panics() {
    let mut rng = Rng::new(99);
    for _ in 0..20_000 {
        let len = rng.below(64) as usize;
        let mut b: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        if let Some(v) = b.first_mut() {
            *v = 1; // get past the version check most of the time
        }
        if let Some(v) = b.get_mut(1) {
            *v %= 6;
        }
        if let Some(v) = b.get_mut(3) {
            *v %= 3;
        }
        if let Some(v) = b.get_mut(4) {
            *v %= 2;
        }
        for t in types() {
            let _ = decode_column(&b, t, rng.below(300) as usize);
        }
    }
}

#[test]
fn delta_d_on_floats_means_decimal() {
    // Found by fuzz/codec_roundtrip: parse maps 'delta-d' to Decimal for floats, so a codec
    // built by hand with DeltaD must be accepted for floats too.
    let col = Column {
        data: ColumnData::Float(vec![1.25, f64::from_bits(13174400771058770578)]),
        nulls: vec![true, false],
    };
    let codec = ColumnCodec {
        encoding: Encoding::DeltaD,
        compression: Compression::Zstd,
        level: Level::Low,
    };
    roundtrip(&col, DataType::Double, &codec);
}

#[test]
fn no_nulls_means_empty_mask() {
    let col = Column {
        data: ColumnData::Float(vec![1.0, 2.0]),
        nulls: vec![false, false],
    };
    let mut out = Vec::new();
    encode_column(
        &col,
        DataType::Double,
        &ColumnCodec::default_for(DataType::Double, 2),
        &mut out,
    )
    .unwrap();
    assert!(decode_column(&out, DataType::Double, 2)
        .unwrap()
        .nulls
        .is_empty());
}

#[test]
fn tsbs_like_columns_compress() {
    // 4096 rows at 10 s with 10% missing: timestamps must cost well under 1 byte per value,
    // a 5-decimal random walk under 2.
    let mut rng = Rng::new(5);
    let mut ts = Vec::new();
    let mut t = 1_451_606_400_000i64;
    while ts.len() < 4096 {
        t += 10_000;
        if rng.below(10) != 0 {
            ts.push(t);
        }
    }
    let col = Column::new(ColumnData::Timestamp(ts));
    let codec = ColumnCodec::default_for(DataType::Timestamp, 2);
    let b = roundtrip(&col, DataType::Timestamp, &codec);
    assert!(b.len() < 4096, "{}", b.len());
    let mut x = 45.0f64;
    let lat: Vec<f64> = (0..4096)
        .map(|_| {
            x += rng.f64() * 0.01 - 0.005;
            (x * 1e5).trunc() / 1e5
        })
        .collect();
    let col = Column::new(ColumnData::Float(lat));
    let b = roundtrip(
        &col,
        DataType::Double,
        &ColumnCodec::default_for(DataType::Double, 2),
    );
    assert!(b.len() < 2 * 4096, "{}", b.len());
}

#[test]
fn segments_decode_alone_as_in_the_whole() {
    let mut rng = Rng::new(512);
    for t in types() {
        for n in [SEGMENT_ROWS + 1, 1024, 1500, 4096] {
            let mut col = random_column(t, &mut rng, n);
            if rng.below(2) == 0 {
                // NULLs in one segment only: the others carry no mask.
                col.nulls = (0..n).map(|i| i == SEGMENT_ROWS + 3).collect();
            }
            if t.physical() == PhysicalType::Timestamp && rng.below(2) == 0 {
                col.nulls.clear();
            }
            for codec in codecs(t.physical(), Level::Medium) {
                let bytes = roundtrip(&col, t, &codec);
                assert_eq!(bytes[4] & FLAG_SEGMENTS, FLAG_SEGMENTS, "{t:?} {n}");
                let enc = open_column(&bytes, t, n).unwrap();
                assert_eq!(enc.segment_count(), n.div_ceil(SEGMENT_ROWS));
                let whole = crate::fuzzing::normalize(&col);
                for i in 0..enc.segment_count() {
                    let r = enc.segment_range(i);
                    let part = enc.decode_segments(i..i + 1).unwrap();
                    assert!(
                        same_after_roundtrip(&whole.slice(r.start, r.end), &part),
                        "{t:?} {codec:?} segment {i}"
                    );
                }
                let runs = enc.segments_of_rows(700..1100);
                let back = enc.decode_segments(runs.clone()).unwrap();
                let lo = enc.segment_range(runs.start).start;
                let hi = enc.segment_range(runs.end - 1).end;
                assert!(lo <= 700 && hi >= 1100.min(n), "{runs:?}");
                assert!(same_after_roundtrip(&whole.slice(lo, hi), &back));
                match (&col.data, col.nulls.iter().any(|&x| x)) {
                    (ColumnData::Timestamp(v), false) => {
                        let f = enc.first_values().unwrap();
                        let want: Vec<i64> = (0..enc.segment_count())
                            .map(|i| v[i * SEGMENT_ROWS])
                            .collect();
                        assert_eq!(f, want.as_slice());
                    }
                    _ => assert!(enc.first_values().is_none()),
                }
                assert!(enc.decode_segments(0..enc.segment_count() + 1).is_err());
            }
        }
    }
    // Up to SEGMENT_ROWS rows: one unsegmented run, as in version 1.
    let col = Column::new(ColumnData::Int((0..SEGMENT_ROWS as i64).collect()));
    let b = roundtrip(
        &col,
        DataType::BigInt,
        &ColumnCodec::default_for(DataType::BigInt, 2),
    );
    assert_eq!(b[4] & FLAG_SEGMENTS, 0);
    let enc = open_column(&b, DataType::BigInt, SEGMENT_ROWS).unwrap();
    assert_eq!(enc.segment_count(), 1);
    assert!(enc.first_values().is_none());
}

#[test]
fn segment_directory_is_checked() {
    // Uncompressed, so the directory sits right after the header.
    let ts: Vec<i64> = (0..1024).map(|i| 1_000 + i * 10).collect();
    let col = Column::new(ColumnData::Timestamp(ts));
    let codec = ColumnCodec {
        encoding: Encoding::DeltaI,
        compression: Compression::None,
        level: Level::Medium,
    };
    let good = roundtrip(&col, DataType::Timestamp, &codec);
    let payload = 5 + buf::varint_len(1024);
    // rows per segment (512: 2 bytes), two lengths, two first values
    assert_eq!(&good[payload..payload + 2], &[0x80, 0x04]);
    let mut r = buf::Reader::new(&good[payload + 2..], 0);
    r.varint("len").unwrap();
    r.varint("len").unwrap();
    let first_at = payload + 2 + r.offset();
    let mut bad = good.clone();
    // First value 1000 = zigzag 2000 = [0xD0, 0x0F]; 1001 = [0xD2, 0x0F]
    assert_eq!(&bad[first_at..first_at + 2], &[0xD0, 0x0F]);
    bad[first_at] = 0xD2;
    let e = decode_column(&bad, DataType::Timestamp, 1024).unwrap_err();
    assert!(e.to_string().contains("its directory says 1001"), "{e}");
    // A segment claimed longer than the payload holds.
    let mut bad = good.clone();
    bad[payload + 2] = bad[payload + 2].wrapping_add(1);
    assert!(open_column(&bad, DataType::Timestamp, 1024).is_err());
    // Zero rows per segment; and a segmented flag in a version-1 header.
    let mut bad = good.clone();
    bad[payload] = 0;
    bad.remove(payload + 1);
    assert!(open_column(&bad, DataType::Timestamp, 1024).is_err());
    let mut v1 = good.clone();
    v1[0] = 1;
    let e = open_column(&v1, DataType::Timestamp, 1024).err().unwrap();
    assert!(e.to_string().contains("unknown flags"), "{e}");
}

#[test]
fn stage2_is_tried_only_on_payloads_of_its_minimum_and_up() {
    // Payloads of plain integers: 8 bytes a value, all zero (what stage 2 shrinks best).
    let plain = ColumnCodec {
        encoding: Encoding::Disabled,
        compression: Compression::Zstd,
        level: Level::Medium,
    };
    for compression in [Compression::Zstd, Compression::Lz4] {
        let codec = ColumnCodec {
            compression,
            ..plain
        };
        for n in [1usize, 3, 4, 5, 64] {
            let col = Column::new(ColumnData::Int(vec![0; n]));
            let mut out = Vec::new();
            encode_column(&col, DataType::BigInt, &codec, &mut out).unwrap();
            // Header: format, type, stage-1 id, stage-2 id.
            let s2 = out[3];
            if 8 * n < STAGE2_PAYLOAD_BYTES_MIN {
                assert_eq!(s2, stage2::ID_NONE, "{compression:?}, {n} values");
            } else {
                assert_ne!(s2, stage2::ID_NONE, "{compression:?}, {n} values");
            }
            assert_eq!(decode_column(&out, DataType::BigInt, n).unwrap(), col);
        }
    }
}
