//! Last-row cache benchmark: "where is every truck now" at 1,000, 100,000 and 1,000,000
//! subtables, with CACHEMODEL 'none' (answers computed from the data) and 'both' (from the
//! cache), end to end through the client library against a local cluster (`tidal local`,
//! 2 data nodes, VGROUPS 4). Reports p50/p95 latency of single-last-loc (one truck) and
//! last-loc (a whole fleet, a quarter of the trucks), and the cache's bytes per subtable.
//!
//! `cargo build --release && cargo run --release --example lastrow_bench -- [--tables 1000,100000]
//!  [--runs 50] [--models none,both] [--only single|last-loc] [--extra SQL]... [--out docs/bench/lastrow-cache.md]`

use std::process::{Command, Stdio};
use std::time::Instant;
use tidal_client::Client;
use tidal_common::{Column, DataType, TableWrite, Value};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const FLEETS: [&str; 4] = ["East", "West", "North", "South"];
const T0: i64 = 1_451_606_400_000;

fn truck(i: usize, rows: i64) -> TableWrite {
    let mut cols = vec![Column::empty(DataType::Timestamp, 2)];
    for _ in 0..3 {
        cols.push(Column::empty(DataType::Double, 2));
    }
    for r in 0..rows {
        cols[0].push(&Value::Timestamp(T0 + r * 10_000));
        cols[1].push(&Value::Float((i % 90) as f64 + r as f64 / 100.0));
        cols[2].push(&Value::Float((i % 180) as f64 + r as f64 / 100.0));
        cols[3].push(&Value::Float(r as f64));
    }
    TableWrite {
        table: format!("r_truck_{i}"),
        stable: "readings".into(),
        tags: Some(vec![
            Value::Str(format!("truck_{i}")),
            Value::Str(FLEETS[i % 4].into()),
            Value::Str(format!("driver_{}", i % 7)),
        ]),
        columns: cols,
    }
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v.get(i).copied().unwrap_or(f64::NAN)
}

async fn time_query(
    c: &Client,
    db: &str,
    sql: &str,
    runs: usize,
) -> Result<(f64, f64, f64, u64), BoxError> {
    let t = Instant::now();
    let first = c.execute(sql, db).await?;
    let cold = t.elapsed().as_secs_f64() * 1e3;
    let rows = first
        .batch
        .as_ref()
        .map(|b| b.num_rows() as u64)
        .unwrap_or(0);
    let mut ms = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        c.execute(sql, db).await?;
        ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok((cold, pct(&mut ms, 0.5), pct(&mut ms, 0.95), rows))
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let mut sizes = vec![1_000usize, 100_000, 1_000_000];
    let mut runs = 50usize;
    let mut out: Option<String> = None;
    let mut models = vec!["none".to_string(), "both".to_string()];
    let mut only: Option<String> = None;
    let mut extra: Vec<String> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(k) = args.next() {
        let v = args.next().ok_or(format!("{k} needs a value"))?;
        match k.as_str() {
            "--tables" => {
                sizes = v
                    .split(',')
                    .map(|x| x.trim().parse::<usize>())
                    .collect::<Result<_, _>>()?
            }
            "--runs" => runs = v.parse()?,
            "--out" => out = Some(v),
            "--only" => only = Some(v),
            "--extra" => extra.push(v),
            "--models" => models = v.split(',').map(|m| m.trim().to_string()).collect(),
            _ => return Err(format!("unknown option {k}").into()),
        }
    }
    let exe = std::env::current_exe()?;
    let bin = exe
        .parent()
        .and_then(|p| p.parent())
        .map(|p| p.join("tidal"))
        .ok_or("cannot locate the tidal binary")?;
    let mut md = String::from("## Last-row cache: LAST_ROW end to end (client library, local cluster of 2 data nodes, VGROUPS 4)\n\n");
    md.push_str(&format!(
        "Command: `cargo run --release --example lastrow_bench -- --tables {} --runs {runs}`. Each truck has 2 rows. Latencies in ms (cold = first query after the model is set).\n\n",
        sizes.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(",")
    ));
    md.push_str("| subtables | CACHEMODEL | query | rows | cold ms | p50 ms | p95 ms |\n|---|---|---|---|---|---|---|\n");
    let mut mem_lines = Vec::new();
    for &n in &sizes {
        let dir = tempfile::tempdir()?;
        let mut child = Command::new(&bin)
            .args(["local", "--data"])
            .arg(dir.path())
            .args(["--vnodes", "2", "--listen", "127.0.0.1:0", "--http", "off"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let addr = {
            use std::io::BufRead;
            let mut addr = None;
            for line in std::io::BufReader::new(stdout).lines() {
                let line = line?;
                if let Some(a) = line.strip_prefix("ready local ") {
                    addr = Some(a.trim().to_string());
                    break;
                }
            }
            addr.ok_or("tidal local did not start")?
        };
        let result = async {
            let c = Client::connect(&addr).await?;
            let db = "lr";
            c.execute("CREATE DATABASE lr VGROUPS 4 CACHEMODEL 'none' CACHESIZE 1024", "")
                .await?;
            c.execute("CREATE STABLE readings (ts TIMESTAMP, latitude DOUBLE, longitude DOUBLE, velocity DOUBLE) TAGS (name VARCHAR(30), fleet VARCHAR(30), driver VARCHAR(30))", db).await?;
            let s = c.stable(db, "readings").await?;
            let t = Instant::now();
            let chunk = 20_000;
            let mut i = 0;
            while i < n {
                let batch: Vec<TableWrite> = (i..(i + chunk).min(n)).map(|k| truck(k, 2)).collect();
                c.write(db, std::slice::from_ref(&s), batch).await?;
                i += chunk;
            }
            eprintln!("{n} subtables loaded in {:.1} s", t.elapsed().as_secs_f64());
            let single = format!(
                "SELECT last_row(ts), last_row(latitude), last_row(longitude) FROM readings WHERE name IN ('truck_{}') GROUP BY name",
                n / 2
            );
            let fleet = "SELECT last_row(ts), name, driver, latitude, longitude FROM readings WHERE fleet = 'East' and name IS NOT NULL PARTITION BY name, driver";
            for model in &models {
                c.execute(&format!("ALTER DATABASE lr CACHEMODEL '{model}'"), "").await?;
                for (label, q, r) in [("single-last-loc", single.as_str(), runs), ("last-loc (fleet)", fleet, runs.min(if n >= 1_000_000 { 10 } else { runs }))] {
                    if only.as_deref().is_some_and(|o| !label.starts_with(o)) {
                        continue;
                    }
                    let (cold, p50, p95, rows) = time_query(&c, db, q, r).await?;
                    eprintln!("{n} {model} {label}: cold {cold:.2} p50 {p50:.2} p95 {p95:.2} ms ({rows} rows)");
                    md.push_str(&format!("| {n} | {model} | {label} | {rows} | {cold:.2} | {p50:.2} | {p95:.2} |\n"));
                }
            }
            // Any other statements to time on the same data (stderr only).
            for q in &extra {
                let (cold, p50, p95, rows) = time_query(&c, db, q, runs).await?;
                eprintln!("{n} extra `{q}`: cold {cold:.2} p50 {p50:.2} p95 {p95:.2} ms ({rows} rows)");
            }
            // Where the fleet query's time goes (stderr only: it varies run to run).
            if let Ok(r) = c.execute(&format!("EXPLAIN ANALYZE {fleet}"), db).await {
                if let Some(b) = r.batch.as_ref() {
                    for i in 0..b.num_rows() {
                        let row: Vec<String> = b.row(i).iter().map(|v| v.to_string()).collect();
                        eprintln!("  {}", row.join(" | "));
                    }
                }
            }
            // Cache memory: every truck's entry is loaded by now (the fleet query loads a
            // quarter; a full last-loc over all fleets loads the rest).
            c.execute("SELECT last_row(ts), name FROM readings PARTITION BY name", db).await?;
            let route = c.route(db).await?;
            let (mut entries, mut bytes) = (0u64, 0u64);
            for vg in &route.vgroups {
                let st = c
                    .dnode(&vg.addr)?
                    .vnode_stats(tidal_proto::v1::VnodeStatsRequest {
                        db: db.into(),
                        vgroup_id: vg.id.0,
                        distribution_of: None,
                    })
                    .await?
                    .into_inner();
                entries += st.cache_entries;
                bytes += st.cache_bytes;
            }
            mem_lines.push(format!(
                "| {n} | {entries} | {bytes} | {:.0} |\n",
                bytes as f64 / entries.max(1) as f64
            ));
            Ok::<_, BoxError>(())
        }
        .await;
        let _ = Command::new("kill").arg(child.id().to_string()).status();
        let _ = child.wait();
        result?;
    }
    md.push_str("\nCache memory (CACHEMODEL 'both', every truck's entry loaded):\n\n| subtables | cached entries | cache bytes | bytes per subtable |\n|---|---|---|---|\n");
    for l in mem_lines {
        md.push_str(&l);
    }
    print!("{md}");
    if let Some(o) = out {
        std::fs::write(&o, &md)?;
        eprintln!("wrote {o}");
    }
    Ok(())
}
