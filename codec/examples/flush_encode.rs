//! Encoding speed on blocks of the sizes a flush writes: nanoseconds per value of
//! `encode_column` (the database default codec, COMP 2) on TSBS-like DOUBLE columns (random
//! walks of 0-5 decimals, 9% NULLs), in blocks of 1,440 rows (a subtable's 4 hours at 4,000
//! trucks) and of 16 rows (a subtable's 3 minutes at 100,000 trucks). The best of ITER
//! rounds (default 15); ROWS=1440 or ROWS=16 runs one size.
//!
//! Run: `cargo run --release -p tidal-codec --example flush_encode`
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::hint::black_box;
use std::time::Instant;
use tidal_codec::test_util::Rng;
use tidal_codec::{encode_column, ColumnCodec};
use tidal_common::batch::{Column, ColumnData};
use tidal_common::types::DataType;

/// TSBS's truncation to `d` decimals.
fn fp(x: f64, d: i32) -> f64 {
    let p = 10f64.powi(d);
    ((x * p) as i64) as f64 / p
}

fn main() {
    let mut rng = Rng::new(1);
    // (step low, step high, clamp low, clamp high, decimals): latitude, velocity, fuel, elevation.
    let kinds: [(f64, f64, f64, f64, i32); 4] = [
        (-0.01, 0.01, -90.0, 90.0, 5),
        (-1.0, 1.0, 0.0, 100.0, 0),
        (-0.1, 0.1, 0.0, 10.0, 1),
        (-10.0, 10.0, 0.0, 5000.0, 0),
    ];
    let only: Option<usize> = std::env::var("ROWS").ok().and_then(|s| s.parse().ok());
    for rows in [1440usize, 16]
        .into_iter()
        .filter(|r| only.is_none_or(|o| o == *r))
    {
        let mut cols = Vec::new();
        for _ in 0..(20_000 / rows).max(4) {
            for &(lo, hi, min, max, d) in &kinds {
                let mut x = min + (max - min) * rng.f64();
                let mut v = Vec::with_capacity(rows);
                let mut nulls = Vec::with_capacity(rows);
                for _ in 0..rows {
                    x = (x + lo + rng.f64() * (hi - lo)).clamp(min, max);
                    let null = rng.below(100) < 9;
                    nulls.push(null);
                    v.push(if null { 0.0 } else { fp(x, d) });
                }
                let mut c = Column::new(ColumnData::Float(v));
                c.nulls = nulls;
                cols.push(c);
            }
        }
        let codec = ColumnCodec::default_for(DataType::Double, 2);
        let values: usize = cols.iter().map(|c| c.len()).sum();
        let mut best = f64::MAX;
        let mut bytes = 0;
        for _ in 0..std::env::var("ITER")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(15)
        {
            let t = Instant::now();
            let mut out = Vec::new();
            for c in &cols {
                out.clear();
                encode_column(black_box(c), DataType::Double, &codec, &mut out).unwrap();
                bytes += out.len();
            }
            best = best.min(t.elapsed().as_secs_f64() * 1e9 / values as f64);
        }
        println!("rows {rows}: {best:.1} ns/value ({} bytes)", bytes / 15);
    }
}
