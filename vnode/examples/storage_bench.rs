//! Storage-engine benchmark: loads the TSBS IoT data set straight into one vnode (no network),
//! then reports ingest rows/s (overall and per tenth of the load, to show whether ingest slows
//! down as data accumulates), flush and merge counts, and bytes on disk per row and per value
//! after COMPACT.
//!
//! `cargo run --release -p tidal-vnode --example storage_bench -- [--scale 100] [--hours 24]
//!  [--writers 2] [--batch-rows 10000] [--buffer-mb 64] [--comp 2] [--out docs/bench/storage.md]`

// The server binary uses mimalloc too: small per-subtable allocations dominate otherwise.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::sync::mpsc::sync_channel;
use std::sync::Arc;
use std::time::Instant;
use tidal_common::{DbOptions, HashRange, VgroupId, WriteBatch};
use tidal_tsbs::format::tidal::{schemas, TableWriteBatches};
use tidal_tsbs::{Config, Generator};
use tidal_vnode::{Vnode, VnodeConfig};

struct Args {
    scale: u32,
    hours: i64,
    writers: usize,
    batch_rows: usize,
    buffer_mb: u32,
    comp: u8,
    out: Option<String>,
    gen_only: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        scale: 100,
        hours: 24,
        writers: 2,
        batch_rows: 10_000,
        buffer_mb: 64,
        comp: 2,
        out: None,
        gen_only: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        if k == "--gen-only" {
            a.gen_only = true;
            continue;
        }
        let v = it.next().ok_or_else(|| format!("{k} needs a value"))?;
        let num = |v: &str| v.parse::<u64>().map_err(|e| format!("{k} {v}: {e}"));
        match k.as_str() {
            "--scale" => a.scale = num(&v)? as u32,
            "--hours" => a.hours = num(&v)? as i64,
            "--writers" => a.writers = num(&v)?.max(1) as usize,
            "--batch-rows" => a.batch_rows = num(&v)?.max(1) as usize,
            "--buffer-mb" => a.buffer_mb = num(&v)?.max(1) as u32,
            "--comp" => a.comp = num(&v)? as u8,
            "--out" => a.out = Some(v),
            _ => return Err(format!("unknown option {k}")),
        }
    }
    Ok(a)
}

fn dir_bytes(p: &std::path::Path) -> u64 {
    let mut n = 0;
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => n += dir_bytes(&e.path()),
                Ok(m) => n += m.len(),
                Err(_) => {}
            }
        }
    }
    n
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a = parse_args()?;
    let cfg = Config {
        scale: a.scale,
        end_ms: Config::default().start_ms + a.hours * 3_600_000,
        ..Config::default()
    };
    let gen = Generator::new(cfg.clone())?;
    if a.gen_only {
        // The generator's own rate, to tell whether it limits the load.
        let t = Instant::now();
        let rows: usize = TableWriteBatches::new(gen, a.batch_rows)
            .map(|b| b.iter().map(|t| t.num_rows()).sum::<usize>())
            .sum();
        let s = t.elapsed().as_secs_f64();
        println!(
            "generated {rows} rows in {s:.2} s: {:.0} rows/s",
            rows as f64 / s
        );
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let v = Arc::new(Vnode::open(
        dir.path(),
        VnodeConfig {
            vgroup: VgroupId(1),
            db: "bench".into(),
            range: HashRange {
                begin: 0,
                end: u32::MAX,
            },
            options: DbOptions {
                buffer_mb: a.buffer_mb,
                comp: a.comp,
                ..DbOptions::default()
            },
        },
    )?);
    let (rs, ds) = schemas("bench");
    // Generate ahead on another thread (bounded), so the figures are the engine's.
    let (tx, rx) = sync_channel::<Vec<tidal_common::TableWrite>>(8);
    let producer = std::thread::spawn(move || {
        for b in TableWriteBatches::new(gen, a.batch_rows) {
            if tx.send(b).is_err() {
                break;
            }
        }
    });
    let rx = Arc::new(parking_lot::Mutex::new(rx));
    let marks = Arc::new(parking_lot::Mutex::new(Vec::<(Instant, u64)>::new()));
    let start = Instant::now();
    let total = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let workers: Vec<_> = (0..a.writers)
        .map(|_| {
            let (v, rx, marks, total) = (v.clone(), rx.clone(), marks.clone(), total.clone());
            let schemas = vec![rs.clone(), ds.clone()];
            std::thread::spawn(move || -> Result<(), String> {
                loop {
                    let tables = match rx.lock().recv() {
                        Ok(t) => t,
                        Err(_) => return Ok(()),
                    };
                    let rows: u64 = tables.iter().map(|t| t.num_rows() as u64).sum();
                    v.write(&WriteBatch {
                        db: "bench".into(),
                        vgroup: VgroupId(1),
                        schemas: schemas.clone(),
                        tables,
                        blocks: Vec::new(),
                    })
                    .map_err(|e| e.to_string())?;
                    let n = total.fetch_add(rows, std::sync::atomic::Ordering::Relaxed) + rows;
                    marks.lock().push((Instant::now(), n));
                }
            })
        })
        .collect();
    for w in workers {
        w.join().map_err(|_| "writer panicked")??;
    }
    let _ = producer.join();
    let load_s = start.elapsed().as_secs_f64();
    let rows = total.load(std::sync::atomic::Ordering::Relaxed);
    let t0 = Instant::now();
    v.flush()?;
    let flush_s = t0.elapsed().as_secs_f64();
    let t0 = Instant::now();
    v.compact()?;
    let compact_s = t0.elapsed().as_secs_f64();
    let st = v.stats();
    let disk = dir_bytes(&dir.path().join("tsdb")) + dir_bytes(&dir.path().join("meta"));
    // Rate per tenth of the rows.
    let mut marks = marks.lock().clone();
    marks.sort_by_key(|m| m.1);
    let mut tenths = Vec::new();
    let mut prev = (start, 0u64);
    for k in 1..=10u64 {
        let goal = rows * k / 10;
        if let Some(m) = marks.iter().find(|m| m.1 >= goal) {
            let dt = m.0.duration_since(prev.0).as_secs_f64().max(1e-9);
            tenths.push((m.1 - prev.1) as f64 / dt);
            prev = *m;
        }
    }
    // 7 readings fields or 3 diagnostics fields per row: half the rows each.
    let values = rows / 2 * 7 + rows / 2 * 3;
    let mut md = String::new();
    md.push_str("## Storage engine: TSBS IoT straight into one vnode\n\n");
    md.push_str(&format!(
        "Command: `cargo run --release -p tidal-vnode --example storage_bench -- --scale {} --hours {} --writers {} --batch-rows {} --buffer-mb {} --comp {}` ({} cores).\n\n",
        a.scale, a.hours, a.writers, a.batch_rows, a.buffer_mb, a.comp,
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
    ));
    md.push_str("| figure | value |\n|---|---|\n");
    md.push_str(&format!("| rows loaded | {rows} |\n"));
    md.push_str(&format!(
        "| ingest (WAL_LEVEL 2, fsync per group commit) | {:.0} rows/s ({load_s:.2} s) |\n",
        rows as f64 / load_s
    ));
    if let (Some(f), Some(l)) = (tenths.first(), tenths.last()) {
        md.push_str(&format!(
            "| first / last tenth of the load | {f:.0} / {l:.0} rows/s (last/first = {:.2}) |\n",
            l / f
        ));
    }
    md.push_str(&format!(
        "| flushes / merges during the load | {} / {} (writer stalls: {}) |\n",
        st.flushes, st.merges, st.write_stalls
    ));
    let mbps = |b: u64, us: u64| b as f64 / 1e6 / (us.max(1) as f64 / 1e6);
    md.push_str(&format!(
        "| flush throughput (STT bytes written) | {:.1} MB in {:.2} s = {:.1} MB/s |\n",
        st.flush_bytes as f64 / 1e6,
        st.flush_micros as f64 / 1e6,
        mbps(st.flush_bytes, st.flush_micros)
    ));
    md.push_str(&format!(
        "| merge throughput (data + sma + head written) | {:.1} MB in {:.2} s = {:.1} MB/s |\n",
        st.merge_bytes as f64 / 1e6,
        st.merge_micros as f64 / 1e6,
        mbps(st.merge_bytes, st.merge_micros)
    ));
    md.push_str(&format!(
        "| final FLUSH / COMPACT | {flush_s:.2} s / {compact_s:.2} s |\n"
    ));
    md.push_str(&format!("| bytes on disk after COMPACT | {disk} |\n"));
    md.push_str(&format!(
        "| bytes per row / per value | {:.2} / {:.2} |\n\n",
        disk as f64 / rows.max(1) as f64,
        disk as f64 / values.max(1) as f64
    ));
    md.push_str("Rate per tenth of the load (rows/s): ");
    md.push_str(
        &tenths
            .iter()
            .map(|r| format!("{r:.0}"))
            .collect::<Vec<_>>()
            .join(", "),
    );
    md.push('\n');
    print!("{md}");
    if let Some(out) = a.out {
        std::fs::write(&out, &md)?;
        eprintln!("wrote {out}");
    }
    Ok(())
}
