//! Column codec benchmark on TSBS-IoT-like columns (see /work/shared/tsbs-iot.md §1).
//!
//! Run: `cargo run --release -p tidal-codec --example codec_bench > docs/bench/codecs.md`
//!
//! Each column kind is one truck's series, cut into blocks of 1000 and 4096 rows as the storage
//! engine would write them, with ~10% NULLs in every value column. Sizes include every header
//! byte; MB/s are of raw data (8 bytes per row) on one thread.

use std::hint::black_box;
use std::time::Instant;

use tidal_codec::test_util::Rng;
use tidal_codec::{decode_column, encode_column, ColumnCodec, Compression, Encoding, Level};
use tidal_common::batch::{Column, ColumnData};
use tidal_common::types::DataType;

/// Rows generated per column kind (about 4.7 days at 10 s).
const SERIES_ROWS: usize = 40_960;
/// Minimum measuring time per figure so that small blocks are not dominated by timer noise.
const MEASURE_SECS: f64 = 0.15;

/// TSBS `FP`: truncate toward zero to `d` decimals.
fn fp(x: f64, d: i32) -> f64 {
    let p = 10f64.powi(d);
    ((x * p) as i64) as f64 / p
}

/// TSBS `CWD`: clamped random walk with uniform steps in [lo, hi).
struct Walk {
    x: f64,
    lo: f64,
    hi: f64,
    min: f64,
    max: f64,
}

impl Walk {
    fn next(&mut self, rng: &mut Rng) -> f64 {
        let v = self.x;
        self.x = (self.x + self.lo + rng.f64() * (self.hi - self.lo)).clamp(self.min, self.max);
        v
    }
}

/// Which ticks a truck emits: 10% of entries and 1% of 10-entry batches are dropped.
fn emitted(rng: &mut Rng) -> Vec<usize> {
    let mut keep = Vec::with_capacity(SERIES_ROWS);
    let mut tick = 0usize;
    while keep.len() < SERIES_ROWS {
        let batch_dropped = rng.f64() < 0.01;
        for k in 0..10 {
            if !batch_dropped && rng.f64() >= 0.1 {
                keep.push(tick + k);
            }
        }
        tick += 10;
    }
    keep.truncate(SERIES_ROWS);
    keep
}

fn nulls(rng: &mut Rng) -> Vec<bool> {
    (0..SERIES_ROWS).map(|_| rng.f64() < 0.1).collect()
}

fn walk_column(rng: &mut Rng, keep: &[usize], mut w: Walk, d: Option<i32>) -> Column {
    let mut vals = Vec::with_capacity(SERIES_ROWS);
    let mut tick = 0;
    for &k in keep {
        let mut v = w.next(rng);
        while tick < k {
            v = w.next(rng);
            tick += 1;
        }
        tick += 1;
        vals.push(d.map_or(v, |d| fp(v, d)));
    }
    let mask = nulls(rng);
    for (v, &n) in vals.iter_mut().zip(&mask) {
        if n {
            *v = 0.0;
        }
    }
    Column {
        data: ColumnData::Float(vals),
        nulls: mask,
    }
}

pub struct Kind {
    pub name: &'static str,
    pub t: DataType,
    pub col: Column,
}

pub fn kinds() -> Vec<Kind> {
    let mut rng = Rng::new(2016);
    let keep = emitted(&mut rng);
    let t0 = 1_451_606_400_000i64; // 2016-01-01T00:00:00Z
    let ts: Vec<i64> = keep.iter().map(|&k| t0 + k as i64 * 10_000).collect();
    let jitter: Vec<i64> = keep
        .iter()
        .map(|&k| t0 + k as i64 * 10_000 + rng.below(1000) as i64)
        .collect();
    let mut ks = vec![
        Kind {
            name: "ts (10 s grid, gaps)",
            t: DataType::Timestamp,
            col: Column::new(ColumnData::Timestamp(ts)),
        },
        Kind {
            name: "ts (10 s + 0-999 ms jitter)",
            t: DataType::Timestamp,
            col: Column::new(ColumnData::Timestamp(jitter)),
        },
    ];
    let mut walk = |name, lo, hi, min, max, init, d| {
        let w = Walk {
            x: init,
            lo,
            hi,
            min,
            max,
        };
        Kind {
            name,
            t: DataType::Double,
            col: walk_column(&mut rng, &keep, w, d),
        }
    };
    let lat0 = 45.0;
    ks.push(walk(
        "latitude (5 dec)",
        -0.005,
        0.005,
        -90.0,
        90.0,
        lat0,
        Some(5),
    ));
    ks.push(walk(
        "longitude (5 dec)",
        -0.005,
        0.005,
        -180.0,
        180.0,
        120.0,
        Some(5),
    ));
    ks.push(walk(
        "elevation (0 dec)",
        -10.0,
        10.0,
        0.0,
        5000.0,
        250.0,
        Some(0),
    ));
    ks.push(walk(
        "velocity (0 dec)",
        -10.0,
        10.0,
        0.0,
        100.0,
        0.0,
        Some(0),
    ));
    ks.push(walk(
        "heading (0 dec)",
        -5.0,
        5.0,
        0.0,
        360.0,
        180.0,
        Some(0),
    ));
    ks.push(walk("grade (0 dec)", -5.0, 5.0, 0.0, 100.0, 0.0, Some(0)));
    ks.push(walk(
        "fuel_consumption (1 dec)",
        -5.0,
        5.0,
        0.0,
        50.0,
        25.0,
        Some(1),
    ));
    ks.push(walk(
        "raw walk (full precision)",
        -0.5,
        0.5,
        -1e9,
        1e9,
        50.0,
        None,
    ));

    // fuel_state: CWD(UD(-0.001, 0), 0, 1, 1), refuels to 1 at 0, 1 decimal.
    let mut fs = 1.0f64;
    let mut cl = 0.0f64;
    let mut st = 0.0f64;
    let (mut fsv, mut clv, mut stv) = (Vec::new(), Vec::new(), Vec::new());
    let mut tick = 0;
    for &k in &keep {
        while tick <= k {
            fs -= rng.f64() * 0.001;
            if fs <= 0.0 {
                fs = 1.0;
            }
            if rng.f64() >= 0.95 {
                cl = (rng.f64() * 5000.0).trunc();
            }
            // N(0,1) by Box-Muller.
            let n = (-2.0 * (1.0 - rng.f64()).ln()).sqrt()
                * (2.0 * std::f64::consts::PI * rng.f64()).cos();
            st = (st + n).clamp(0.0, 5.0);
            tick += 1;
        }
        fsv.push(fp(fs, 1));
        clv.push(cl);
        stv.push(st.trunc() as i64);
    }
    let mut masked = |mut c: Column| {
        c.nulls = nulls(&mut rng);
        c
    };
    ks.push(Kind {
        name: "fuel_state (1 dec)",
        t: DataType::Double,
        col: masked(Column::new(ColumnData::Float(fsv))),
    });
    ks.push(Kind {
        name: "current_load (0 dec, lazy)",
        t: DataType::Double,
        col: masked(Column::new(ColumnData::Float(clv))),
    });
    ks.push(Kind {
        name: "status (bigint 0-5)",
        t: DataType::BigInt,
        col: masked(Column::new(ColumnData::Int(stv))),
    });
    ks
}

pub fn blocks(col: &Column, rows: usize) -> Vec<Column> {
    let n = col.len();
    let mut out = Vec::new();
    let mut start = 0;
    while start < n {
        let idx: Vec<usize> = (start..(start + rows).min(n)).collect();
        out.push(col.take(&idx));
        start += rows;
    }
    out
}

struct Figures {
    bytes_per_value: f64,
    enc_mbs: f64,
    dec_mbs: f64,
}

fn measure(bl: &[Column], t: DataType, codec: &ColumnCodec) -> Figures {
    let rows: usize = bl.iter().map(|b| b.len()).sum();
    let mut enc: Vec<Vec<u8>> = Vec::new();
    for b in bl {
        let mut out = Vec::new();
        encode_column(b, t, codec, &mut out).expect("encode");
        let back = decode_column(&out, t, b.len()).expect("decode");
        assert_eq!(back.len(), b.len());
        enc.push(out);
    }
    let bytes: usize = enc.iter().map(|e| e.len()).sum();
    let raw_mb = (rows * 8) as f64 / 1e6;

    let mut reps = 0u32;
    let start = Instant::now();
    while start.elapsed().as_secs_f64() < MEASURE_SECS {
        for b in bl {
            let mut out = Vec::new();
            encode_column(black_box(b), t, codec, &mut out).expect("encode");
            black_box(out);
        }
        reps += 1;
    }
    let enc_mbs = raw_mb * f64::from(reps) / start.elapsed().as_secs_f64();

    let mut reps = 0u32;
    let start = Instant::now();
    while start.elapsed().as_secs_f64() < MEASURE_SECS {
        for (e, b) in enc.iter().zip(bl) {
            black_box(decode_column(black_box(e), t, b.len()).expect("decode"));
        }
        reps += 1;
    }
    let dec_mbs = raw_mb * f64::from(reps) / start.elapsed().as_secs_f64();
    Figures {
        bytes_per_value: bytes as f64 / rows as f64,
        enc_mbs,
        dec_mbs,
    }
}

fn encodings(t: DataType) -> Vec<Encoding> {
    if t == DataType::Double {
        vec![
            Encoding::Auto,
            Encoding::Gorilla,
            Encoding::ByteSplit,
            Encoding::Disabled,
        ]
    } else {
        vec![
            Encoding::Auto,
            Encoding::DeltaI,
            Encoding::DeltaD,
            Encoding::Simple8b,
            Encoding::BitPacking,
            Encoding::Disabled,
        ]
    }
}

fn row(kind: &str, codec: &ColumnCodec, f: &Figures) {
    let (e, c, l) = codec.names();
    let c = if codec.compression == Compression::Zstd {
        format!("{c} ({l})")
    } else {
        c.to_string()
    };
    println!(
        "| {kind} | {e} | {c} | {:.3} | {:.1}x | {:.0} | {:.0} |",
        f.bytes_per_value,
        8.0 / f.bytes_per_value,
        f.enc_mbs,
        f.dec_mbs
    );
}

const HEADER: &str = "| column | encode | compress | bytes/value | ratio vs 8 B | encode MB/s | decode MB/s |\n|---|---|---|---:|---:|---:|---:|";

fn main() {
    let only_summary = std::env::args().any(|a| a == "--summary");
    let ks = kinds();
    println!("# Column codec benchmark (TSBS IoT-like columns)\n");
    println!(
        "Produced by `cargo run --release -p tidal-codec --example codec_bench > docs/bench/codecs.md` \
         (codec/examples/codec_bench.rs). One truck's series of {SERIES_ROWS} rows per column kind \
         (10% of entries and 1% of 10-entry batches dropped, as TSBS does), ~10% NULLs in every value \
         column, cut into blocks; sizes include all headers; MB/s count 8 raw bytes per row, one \
         thread on a shared 2-core machine (expect ±20% noise).\n"
    );
    for rows in [1000usize, 4096] {
        println!("## Default codec (ColumnCodec::default_for) by database COMP 0/1/2, plus LEVEL high, {rows}-row blocks\n");
        println!("{HEADER}");
        for k in &ks {
            let bl = blocks(&k.col, rows);
            for comp in [0u8, 1, 2] {
                let codec = ColumnCodec::default_for(k.t, comp);
                row(k.name, &codec, &measure(&bl, k.t, &codec));
            }
            let high = ColumnCodec {
                level: Level::High,
                ..ColumnCodec::default_for(k.t, 2)
            };
            row(k.name, &high, &measure(&bl, k.t, &high));
        }
        println!();
    }
    if only_summary {
        return;
    }
    for rows in [1000usize, 4096] {
        println!("## Every alternative, {rows}-row blocks\n");
        println!("{HEADER}");
        for k in &ks {
            let bl = blocks(&k.col, rows);
            for e in encodings(k.t) {
                for c in [Compression::None, Compression::Lz4, Compression::Zstd] {
                    let codec = ColumnCodec {
                        encoding: e,
                        compression: c,
                        level: Level::Medium,
                    };
                    row(k.name, &codec, &measure(&bl, k.t, &codec));
                }
            }
        }
        println!();
    }
}
