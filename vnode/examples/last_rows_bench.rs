//! The storage side of "where is every truck now": loads a few minutes of TSBS IoT data for
//! many trucks into one vnode, then times listing the readings subtables and fetching every
//! subtable's last row (cache cold, then warm). The SQL and network layers are left out, so
//! this shows what the vnode contributes to the fleet LAST_ROW query.
//!
//! `cargo run --release -p tidal-vnode --example last_rows_bench -- [--scale 100000] [--minutes 1]
//!  [--iters 20]`

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::time::Instant;
use tidal_common::{DbOptions, HashRange, VgroupId, WriteBatch};
use tidal_tsbs::format::tidal::{schemas, TableWriteBatches};
use tidal_tsbs::{Config, Generator};
use tidal_vnode::{Vnode, VnodeConfig};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut scale = 100_000u32;
    let mut minutes = 1i64;
    let mut iters = 20usize;
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let v = it.next().ok_or_else(|| format!("{k} needs a value"))?;
        match k.as_str() {
            "--scale" => scale = v.parse()?,
            "--minutes" => minutes = v.parse()?,
            "--iters" => iters = v.parse()?,
            _ => return Err(format!("unknown option {k}").into()),
        }
    }
    let cfg = Config {
        scale,
        end_ms: Config::default().start_ms + minutes * 60_000,
        ..Config::default()
    };
    let gen = Generator::new(cfg)?;
    let dir = tempfile::tempdir()?;
    let v = Vnode::open(
        dir.path(),
        VnodeConfig {
            vgroup: VgroupId(1),
            db: "bench".into(),
            range: HashRange {
                begin: 0,
                end: u32::MAX,
            },
            options: DbOptions {
                cache_model: "both".into(),
                cache_size_mb: 1024,
                ..DbOptions::default()
            },
        },
    )?;
    let (rs, ds) = schemas("bench");
    let t = Instant::now();
    let mut rows = 0;
    for tables in TableWriteBatches::new(gen, 20_000) {
        rows += tables.iter().map(|t| t.num_rows()).sum::<usize>();
        v.write(&WriteBatch {
            db: "bench".into(),
            vgroup: VgroupId(1),
            schemas: vec![rs.clone(), ds.clone()],
            tables,
            blocks: Vec::new(),
        })?;
    }
    v.flush()?;
    println!("loaded {rows} rows in {:.1} s", t.elapsed().as_secs_f64());
    // ts, latitude, longitude of readings (the last-loc columns).
    let cols = [0usize, 3, 4];
    let mut list = Vec::new();
    let mut fetch = Vec::new();
    for i in 0..iters {
        let t = Instant::now();
        let metas = v.tables(Some("readings"));
        let t1 = t.elapsed();
        let uids: Vec<_> = metas.iter().map(|m| m.uid).collect();
        let t = Instant::now();
        let (pos, _got) = v.last_rows_columns("readings", &uids, &cols)?;
        let t2 = t.elapsed();
        let n = pos.len();
        if i == 0 {
            println!(
                "cold: {} subtables, {n} last rows: list {:.1} ms, last_rows {:.1} ms",
                metas.len(),
                t1.as_secs_f64() * 1e3,
                t2.as_secs_f64() * 1e3
            );
        } else {
            list.push(t1.as_secs_f64() * 1e3);
            fetch.push(t2.as_secs_f64() * 1e3);
        }
    }
    list.sort_by(f64::total_cmp);
    fetch.sort_by(f64::total_cmp);
    if !list.is_empty() {
        println!(
            "warm p50: list {:.2} ms, last_rows {:.2} ms",
            list[list.len() / 2],
            fetch[fetch.len() / 2]
        );
    }
    Ok(())
}
