//! Replays the committed fuzz corpus (fuzz/corpus/codec_decode) and any crash artifacts
//! (fuzz/artifacts/codec_decode) through `decode_column`, once per data type, so a fuzz finding
//! stays fixed without needing a nightly toolchain. `write_seed_corpus` (ignored) regenerates the
//! seeds: `cargo test -p tidal-codec --test fuzz_corpus -- --ignored`.

use std::path::{Path, PathBuf};

use tidal_codec::fuzzing::{decode_input, make_input, TYPES};
use tidal_codec::test_util::Rng;
use tidal_codec::{encode_column, ColumnCodec, Compression, Encoding, Level};
use tidal_common::batch::{Column, ColumnData};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

fn files(dir: &Path) -> Vec<PathBuf> {
    tidal_codec::fuzzing::corpus_files(dir)
}

#[test]
fn replay_decode_corpus_and_artifacts() {
    let mut n = 0;
    let mut decoded = 0;
    for sub in ["corpus/codec_decode", "artifacts/codec_decode"] {
        for f in files(&fuzz_dir().join(sub)) {
            let data = std::fs::read(&f).unwrap();
            for ti in 0..TYPES.len() as u8 {
                let mut d = data.clone();
                if let Some(b) = d.first_mut() {
                    *b = ti;
                }
                if decode_input(&d) {
                    decoded += 1;
                }
            }
            n += 1;
        }
    }
    assert!(n >= 10, "seed corpus missing: {n} files");
    assert!(
        decoded >= n / 2,
        "seeds should mostly decode as their own type: {decoded}/{n}"
    );
}

fn seed_columns() -> Vec<(u8, Column)> {
    let mut rng = Rng::new(77);
    let mut out = Vec::new();
    let ts: Vec<i64> = (0..40)
        .map(|i| 1_451_606_400_000 + i * 10_000 + (i % 7 == 0) as i64 * 10_000)
        .collect();
    out.push((0, Column::new(ColumnData::Timestamp(ts))));
    let b: Vec<bool> = (0..30).map(|i| i % 3 == 0).collect();
    out.push((
        1,
        Column {
            data: ColumnData::Bool(b),
            nulls: (0..30).map(|i| i == 4).collect(),
        },
    ));
    let st: Vec<i64> = (0..50).map(|_| rng.below(6) as i64).collect();
    out.push((
        5,
        Column {
            data: ColumnData::Int(st),
            nulls: (0..50).map(|i| i % 10 == 3).collect(),
        },
    ));
    out.push((
        5,
        Column::new(ColumnData::Int(vec![i64::MIN, i64::MAX, 0, -1])),
    ));
    // A regular clock with rare gaps: Auto picks delta run-length.
    let clock: Vec<i64> = (0..80)
        .map(|i| 1_451_606_400_000 + (i + i / 20) * 10_000)
        .collect();
    out.push((0, Column::new(ColumnData::Timestamp(clock))));
    // Long runs, so that Auto picks run-length (integers and decimal floats).
    let runs: Vec<i64> = (0..60).map(|i| (i / 15) * 1000).collect();
    let run_floats: Vec<f64> = runs.iter().map(|&x| x as f64 / 10.0).collect();
    out.push((5, Column::new(ColumnData::Int(runs))));
    out.push((11, Column::new(ColumnData::Float(run_floats))));
    out.push((9, Column::new(ColumnData::UInt(vec![u64::MAX, 0, 1 << 63]))));
    let mut x = 45.0f64;
    let lat: Vec<f64> = (0..40)
        .map(|_| {
            x += rng.f64() * 0.01 - 0.005;
            (x * 1e5).trunc() / 1e5
        })
        .collect();
    out.push((
        11,
        Column {
            data: ColumnData::Float(lat),
            nulls: (0..40).map(|i| i % 9 == 2).collect(),
        },
    ));
    out.push((
        11,
        Column::new(ColumnData::Float(vec![
            -0.0,
            f64::NAN,
            f64::INFINITY,
            1e300,
            0.1,
        ])),
    ));
    out.push((
        10,
        Column::new(ColumnData::Float(vec![
            f64::from(1.1f32),
            f64::from(2.5f32),
            3.0,
        ])),
    ));
    let s: Vec<String> = (0..30).map(|i| format!("truck_{}", i % 3)).collect();
    out.push((12, Column::new(ColumnData::Str(s))));
    out.push((
        13,
        Column::new(ColumnData::Str(vec![
            "".into(),
            "héllo ✓".into(),
            "🦀".into(),
        ])),
    ));
    out
}

#[test]
#[ignore]
fn write_seed_corpus() {
    let dir = fuzz_dir().join("corpus/codec_decode");
    std::fs::create_dir_all(&dir).unwrap();
    let encs = [
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
    let mut count = 0;
    for (ti, col) in seed_columns() {
        let t = TYPES[ti as usize];
        for e in encs {
            for c in [Compression::None, Compression::Lz4, Compression::Zstd] {
                let codec = ColumnCodec {
                    encoding: e,
                    compression: c,
                    level: Level::Medium,
                };
                let mut out = Vec::new();
                if encode_column(&col, t, &codec, &mut out).is_err() {
                    continue;
                }
                // Auto and Zstd only for a few, to keep the corpus at a few dozen files.
                if c != Compression::None && e != Encoding::Auto {
                    continue;
                }
                let name = format!(
                    "seed-{}-{}-{}-{}",
                    ti,
                    count,
                    codec.names().0,
                    codec.names().1
                );
                std::fs::write(dir.join(name), make_input(ti, col.len() as u16, &out)).unwrap();
                count += 1;
            }
        }
    }
    let rt = fuzz_dir().join("corpus/codec_roundtrip");
    std::fs::create_dir_all(&rt).unwrap();
    let mut rng = Rng::new(5);
    for i in 0..12 {
        let len = 16 + rng.below(200) as usize;
        let b: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        std::fs::write(rt.join(format!("seed-{i}")), b).unwrap();
    }
}

/// Segmented columns (more than `SEGMENT_ROWS` rows; codec FORMAT.md, "Segments") for the
/// decode corpus: `cargo test -p tidal-codec --test fuzz_corpus write_segmented_seeds -- --ignored`.
#[test]
#[ignore]
fn write_segmented_seeds() {
    let dir = fuzz_dir().join("corpus/codec_decode");
    std::fs::create_dir_all(&dir).unwrap();
    let n = tidal_codec::SEGMENT_ROWS + 100;
    let ts: Vec<i64> = (0..n as i64)
        .map(|i| 1_451_606_400_000 + i * 10_000 + (i % 97 == 0) as i64 * 10_000)
        .collect();
    let floats = Column {
        data: ColumnData::Float((0..n).map(|i| (i % 50) as f64 / 4.0).collect()),
        nulls: (0..n).map(|i| i > 520 && i % 7 == 0).collect(),
    };
    let ints = Column::new(ColumnData::Int(
        (0..n as i64).map(|i| i * i % 1000).collect(),
    ));
    let strs = Column::new(ColumnData::Str(
        (0..n).map(|i| format!("truck_{}", i % 4)).collect(),
    ));
    let cols = [
        (0u8, Column::new(ColumnData::Timestamp(ts))),
        (11, floats),
        (5, ints),
        (12, strs),
    ];
    for (ti, col) in cols {
        let t = TYPES[ti as usize];
        for c in [Compression::None, Compression::Zstd] {
            let codec = ColumnCodec {
                encoding: Encoding::Auto,
                compression: c,
                level: Level::Medium,
            };
            let mut out = Vec::new();
            encode_column(&col, t, &codec, &mut out).unwrap();
            let name = format!("seg-{ti}-{}", codec.names().1);
            std::fs::write(dir.join(name), make_input(ti, col.len() as u16, &out)).unwrap();
        }
    }
}
