//! `tidal demo`: the README's main job. It starts a local cluster (mnode + data nodes on
//! loopback, data in a temporary folder), creates the TSBS IoT schema, loads a generated truck
//! fleet through the client library, runs IoT queries, and prints results and rates.

use crate::local::Cluster;
use crate::server::BoxError;
use crate::shell::render_table;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;
use tidal_client::Client;
use tidal_tsbs::format::tidal::{self as tsbs, TableWriteBatches};
use tidal_tsbs::{Config, Generator};

#[derive(clap::Args)]
pub struct DemoArgs {
    /// Number of trucks.
    #[arg(long, default_value_t = 100)]
    trucks: usize,
    /// Hours of data at a 10 s interval.
    #[arg(long, default_value_t = 24)]
    hours: u64,
    /// Number of data nodes in the local cluster.
    #[arg(long, default_value_t = 2)]
    dnodes: u32,
    /// VGROUPS of the database.
    #[arg(long, default_value_t = 4)]
    vgroups: u32,
    /// Concurrent write batches in flight.
    #[arg(long, default_value_t = 4)]
    writers: usize,
    /// Random seed of the generator.
    #[arg(long, default_value_t = 123)]
    seed: u64,
    /// Data folder (default: a new temporary folder, removed at the end).
    #[arg(long)]
    data: Option<PathBuf>,
}

/// Rows per write batch: about half an hour of a 100-truck fleet.
const BATCH_ROWS: usize = 36_000;

pub async fn run(args: DemoArgs) -> Result<ExitCode, BoxError> {
    let (data, temp) = match &args.data {
        Some(d) => (d.clone(), false),
        None => (
            std::env::temp_dir().join(format!("tidal-demo-{}", std::process::id())),
            true,
        ),
    };
    println!(
        "== starting a local cluster: mnode + {} data nodes, data in {}",
        args.dnodes,
        data.display()
    );
    let cluster = Cluster::start(&data, args.dnodes, "127.0.0.1:0").await?;
    let result = job(&args, &cluster.addr).await;
    cluster.stop().await;
    if temp {
        let _ = std::fs::remove_dir_all(&data);
    }
    result.map(|_| ExitCode::SUCCESS)
}

async fn sql(client: &Client, stmt: &str) -> Result<(), BoxError> {
    let start = Instant::now();
    let r = client
        .execute(stmt, "iot")
        .await
        .map_err(|e| format!("{stmt}: {e}"))?;
    let ms = start.elapsed().as_secs_f64() * 1000.0;
    println!("\ntidal> {stmt}");
    match &r.batch {
        Some(b) => {
            print!("{}", render_table(b, r.precision));
            println!("{} row(s) in {ms:.2} ms", b.num_rows());
        }
        None => println!("OK in {ms:.2} ms"),
    }
    Ok(())
}

async fn job(args: &DemoArgs, addr: &str) -> Result<(), BoxError> {
    let client = Client::connect(addr).await?;
    client
        .execute(
            &format!(
                "CREATE DATABASE iot VGROUPS {} PRECISION 'ms' KEEP 36500d DURATION 10d",
                args.vgroups
            ),
            "",
        )
        .await?;
    client.execute(tsbs::READINGS_DDL, "iot").await?;
    client.execute(tsbs::DIAGNOSTICS_DDL, "iot").await?;
    let (readings, diagnostics) = tsbs::schemas("iot");
    let schemas = Arc::new(vec![readings, diagnostics]);

    // The TSBS IoT generator with its perturbations (missing, out-of-order and NULL points).
    let cfg = Config {
        scale: u32::try_from(args.trucks).map_err(|_| "--trucks is too large")?,
        end_ms: tidal_tsbs::TSBS_START_MS + args.hours as i64 * 3_600_000,
        seed: args.seed,
        ..Config::default()
    };
    println!(
        "== loading {} trucks x {} h (up to {} rows: readings + diagnostics) through the client library, {} batches in flight",
        args.trucks,
        args.hours,
        cfg.max_points(),
        args.writers
    );
    let mut batches = TableWriteBatches::new(Generator::new(cfg)?, BATCH_ROWS);
    let start = Instant::now();
    let mut gen_s = 0.0;
    let mut rows = 0u64;
    let mut inflight: tokio::task::JoinSet<
        Result<tidal_client::WriteOutcome, tidal_client::ClientError>,
    > = tokio::task::JoinSet::new();
    loop {
        let g = Instant::now();
        let Some(writes) = batches.next() else {
            break;
        };
        gen_s += g.elapsed().as_secs_f64();
        while inflight.len() >= args.writers.max(1) {
            if let Some(r) = inflight.join_next().await {
                rows += r??.rows;
            }
        }
        let (c, s) = (client.clone(), schemas.clone());
        inflight.spawn(async move { c.write("iot", &s, writes).await });
    }
    while let Some(r) = inflight.join_next().await {
        rows += r??.rows;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "== loaded {rows} rows in {secs:.2} s: {:.0} rows/s, {:.0} metrics/s (of which {gen_s:.2} s generating data)",
        rows as f64 / secs,
        (rows as f64 / 2.0) * 10.0 / secs
    );

    println!("\n== IoT queries");
    for q in [
        "SELECT COUNT(*) FROM readings",
        "SELECT COUNT(*) FROM diagnostics",
        "SHOW VGROUPS",
        "SELECT fleet, COUNT(*), AVG(velocity), MAX(velocity), MIN(ts) FROM readings GROUP BY fleet ORDER BY fleet",
        "SELECT last_row(ts), name, driver, latitude, longitude FROM readings WHERE fleet='South' and name IS NOT NULL PARTITION BY name, driver ORDER BY name",
        "SELECT last_row(ts), last_row(latitude), last_row(longitude) FROM readings WHERE name IN ('truck_5') GROUP BY name",
        "SELECT last_row(ts), name, driver, fuel_state FROM diagnostics WHERE fuel_state <= 0.1 AND fleet = 'South' and name IS NOT NULL GROUP BY name, driver ORDER BY name LIMIT 10",
        "select avg(fuel_consumption) as avg_fuel_consumption, avg(nominal_fuel_consumption) as nominal_fuel_consumption from readings where velocity > 1 group by fleet",
    ] {
        sql(&client, q).await?;
    }
    Ok(())
}
