//! Query latency loop: runs each SQL statement N times (after one unmeasured run) against a
//! cluster and prints p50 / p95 / mean in ms, as a client on the same machine sees them.
//! In a statement, `{S}` and `{E}` become a random 10-minute window of 2016-01-01 (epoch ms;
//! the TSBS IoT data set's first day) and `{F}` a random fleet, fresh for every run and the
//! same sequence on every invocation, so that two builds can be compared on equal draws.
//!
//! `QLOOP_SEED=N` draws another sequence. `QLOOP_SERVER=1` sends every statement to the server
//! to plan (the client library plans a gathered SELECT itself by default). With `QLOOP_EACH=1` it also prints
//! the unmeasured first run's time and every run's time in run order (warm-up effects).
//!
//! `cargo run --release --example qloop -- 127.0.0.1:6030 bench 300 "select ... ts > {S} AND ts <= {E} and fleet = '{F}' ..."`

use std::time::Instant;
use tidal_client::Client;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const DAY_START_MS: i64 = 1_451_606_400_000;
const DAY_MS: u64 = 86_400_000;
const WINDOW_MS: u64 = 600_000;
const FLEETS: [&str; 5] = ["East", "West", "North", "South", "Central"];

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [addr, db, runs, statements @ ..] = args.as_slice() else {
        return Err("usage: qloop ADDR DB RUNS SQL...".into());
    };
    let runs: usize = runs.parse().map_err(|e| format!("RUNS '{runs}': {e}"))?;
    if runs == 0 || statements.is_empty() {
        return Err("usage: qloop ADDR DB RUNS SQL... (RUNS > 0, at least one SQL)".into());
    }
    let local = std::env::var_os("QLOOP_SERVER").is_none();
    let options = tidal_client::ConnectOptions::default().plan_queries_locally(local);
    let client = Client::connect_with(addr, options).await?;
    // xorshift64: the same draws every time, no dependency
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15
        ^ std::env::var("QLOOP_SEED")
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(0)
            .wrapping_mul(0x2545_f491_4f6c_dd1d);
    let mut draw = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for sql in statements {
        let mut ms = Vec::with_capacity(runs);
        for run in 0..=runs {
            let start = DAY_START_MS + (draw() % (DAY_MS - WINDOW_MS)) as i64;
            let fleet = FLEETS[(draw() % FLEETS.len() as u64) as usize];
            let q = sql
                .replace("{S}", &start.to_string())
                .replace("{E}", &(start + WINDOW_MS as i64).to_string())
                .replace("{F}", fleet);
            let t = Instant::now();
            client.execute(&q, db).await?;
            if run == 0 && std::env::var_os("QLOOP_EACH").is_some() {
                println!(
                    "first (unmeasured) run: {:.2} ms",
                    t.elapsed().as_secs_f64() * 1e3
                );
            }
            if run > 0 {
                ms.push(t.elapsed().as_secs_f64() * 1e3);
                if std::env::var_os("QLOOP_DRAWS").is_some() {
                    println!("{:.2} ms  start {start} fleet {fleet}", ms[ms.len() - 1]);
                }
            }
        }
        if std::env::var_os("QLOOP_EACH").is_some() {
            let each: Vec<String> = ms.iter().map(|m| format!("{m:.2}")).collect();
            println!("each run (ms): {}", each.join(" "));
        }
        ms.sort_by(f64::total_cmp);
        let mean = ms.iter().sum::<f64>() / ms.len() as f64;
        let head: String = sql.chars().take(70).collect();
        println!(
            "p50 {:.3} p95 {:.3} mean {:.3}  {head}",
            ms[ms.len() / 2],
            ms[ms.len() * 95 / 100],
            mean
        );
    }
    Ok(())
}
