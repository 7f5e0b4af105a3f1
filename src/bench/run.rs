//! `tidal bench run`: the side-by-side benchmark. Generates the data set once (deterministic),
//! then for Tidal and each available peer in turn: start it fresh, load the same points,
//! settle and measure the bytes on disk, run the 13 IoT query types (cold, then warm runs with
//! other random parameters), record CPU and peak memory, and stop it. Finally it checks the
//! answers agree, and writes the report, the JSON figures and the charts.
//!
//! One engine runs at a time so that each gets the whole machine (as ../shared/peers advises);
//! a peer that fails to start or load is skipped and the report says why.
//!
//! Tidal is loaded twice: through the client library (the run that is then queried) and, as
//! the `tidal-lp` entry of `--peers`, through its InfluxDB line-protocol HTTP API with the
//! InfluxDB peer's file and loader into a fresh cluster (ingest, size and a count check).

use super::answers::{self, Answer};
use super::generate::write_files;
use super::peers::{self, Kind, PeerServer};
use super::procfs::{self, PeakSampler};
use super::queries::Engine;
use super::report::{self, DataSet, EngineResult, Ingest, Machine, QueryFigures, Results};
use super::tidal::{self as tidal_engine, TidalEngine};
use super::DataArgs;
use crate::server::BoxError;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;
use tidal_tsbs::format::tidal::TableWriteBatches;
use tidal_tsbs::{Config, Generator, QueryParams, QueryType};

#[derive(clap::Args)]
pub struct RunArgs {
    /// Number of trucks.
    #[arg(long, default_value_t = 100)]
    scale: u32,
    /// Length of the data set (`30m`, `12h`, `1d`).
    #[arg(long, default_value = "1d")]
    duration: String,
    /// First timestamp of the data set.
    #[arg(long, default_value = "2016-01-01T00:00:00Z")]
    start: String,
    #[arg(long, default_value_t = 123)]
    seed: u64,
    /// Peers to compare with, comma-separated: influxdb,clickhouse,postgres,victoria, or none;
    /// `tidal-lp` adds Tidal loaded through its line-protocol HTTP API (the InfluxDB file and
    /// loader, ingest only), `tidal-load` Tidal loaded by `tidal load` from TSBS's TDengine
    /// file (ingest only, with the loader's parse-only rate). Tidal through the client library
    /// always runs.
    #[arg(
        long,
        default_value = "tidal-lp,tidal-load,influxdb,clickhouse,postgres,victoria"
    )]
    peers: String,
    /// Warm runs per query type (each with its own random parameters), after the cold run;
    /// ten times as many for the four last-point types (sub-millisecond on the faster engines).
    #[arg(long, default_value_t = 20)]
    queries: u64,
    /// The report; charts and results.json go to a `bench` folder beside it. Default
    /// docs/BENCHMARKS.md, or with --small a file in the temporary folder (so a smoke run
    /// never overwrites the committed report).
    #[arg(long)]
    out: Option<PathBuf>,
    /// The test suite's configuration, seconds long: scale 4, 30 minutes, Tidal through the
    /// client library, the line protocol and `tidal load`, no peers, 1 run.
    #[arg(long)]
    small: bool,
    /// Measure ingest, CPU, memory and bytes on disk only (no queries): for large scales,
    /// where some peers take minutes per IoT query.
    #[arg(long)]
    ingest_only: bool,
    /// Give the peers TSBS's per-point tags (a point's NULL tag is its own) instead of each
    /// point's subtable tags, which Tidal stores and which make the answers comparable.
    #[arg(long)]
    row_tags: bool,
    /// Working folder for the data files and the engines' data (default: a temporary folder,
    /// removed at the end).
    #[arg(long)]
    work: Option<PathBuf>,
}

pub(super) fn now_iso() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    tidal_tsbs::time::rfc3339_seconds(ms)
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

pub(super) fn loadavg() -> String {
    read("/proc/loadavg")
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn machine() -> Machine {
    let cpuinfo = read("/proc/cpuinfo");
    let cpu = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    let ram_bytes = read("/proc/meminfo")
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap_or(0)
        * 1024;
    let os = read("/etc/os-release")
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|s| s.trim_matches('"').to_string())
        .unwrap_or_default();
    Machine {
        cpu,
        cores: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        ram_bytes,
        kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
        os,
        load_start: loadavg(),
        load_end: String::new(),
    }
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Figures of one query type from its latencies (first = cold).
fn figures(q: QueryType, ms: &[f64], error: Option<String>, rows: Option<usize>) -> QueryFigures {
    let mut warm: Vec<f64> = ms.iter().skip(1).copied().collect();
    warm.sort_by(|a, b| a.total_cmp(b));
    let mean = (!warm.is_empty()).then(|| warm.iter().sum::<f64>() / warm.len() as f64);
    QueryFigures {
        query: q.name().to_string(),
        supported: true,
        error,
        cold_ms: ms.first().copied(),
        mean_ms: mean,
        p50_ms: percentile(&warm, 50.0),
        p95_ms: percentile(&warm, 95.0),
        runs: ms.len(),
        rows,
    }
}

/// Warm runs of each last-point type per `--queries`: they take well under a millisecond on
/// the faster engines, where a few runs' percentiles are mostly noise (the machine is shared),
/// and many runs cost a second or two. Every engine runs the same draws.
pub const LAST_POINT_RUNS_FACTOR: u64 = 10;

/// The last-point types (latest row per truck): last-loc, single-last-loc, low-fuel, high-load.
pub fn is_last_point(q: QueryType) -> bool {
    matches!(
        q,
        QueryType::LastLoc | QueryType::SingleLastLoc | QueryType::LowFuel | QueryType::HighLoad
    )
}

/// Warm runs of type `q` for `--queries warm`.
pub fn warm_runs(q: QueryType, warm: u64) -> u64 {
    if is_last_point(q) {
        warm.saturating_mul(LAST_POINT_RUNS_FACTOR)
    } else {
        warm
    }
}

fn texts(engine: Engine, q: QueryType, params: &QueryParams, warm: u64) -> Option<Vec<String>> {
    (0..=warm_runs(q, warm))
        .map(|k| engine.text(&tidal_tsbs::generate_query(q, params, k)))
        .collect()
}

fn unsupported(q: QueryType) -> QueryFigures {
    QueryFigures {
        query: q.name().to_string(),
        supported: false,
        ..QueryFigures::default()
    }
}

/// Answers of query 0 per type, per engine, for the agreement check.
type FirstAnswers = Vec<(QueryType, String, Answer)>;

/// What `--peers` selects: the peers, and whether Tidal's line-protocol variant runs.
#[derive(Debug, PartialEq)]
struct Selection {
    tidal_lp: bool,
    tidal_load: bool,
    peers: Vec<Kind>,
}

impl Selection {
    fn parse(s: &str) -> Result<Selection, String> {
        let mut tidal_lp = false;
        let mut tidal_load = false;
        let mut rest = Vec::new();
        for p in s.split(',').map(str::trim) {
            if p == tidal_engine::LP_SELECTOR {
                tidal_lp = true;
            } else if p == tidal_engine::LOAD_SELECTOR {
                tidal_load = true;
            } else if p.is_empty() || p == "none" || Kind::parse(p).is_some() {
                rest.push(p);
            } else {
                // Checked here so that the message names every choice of `bench run`
                // (`bench lastrow` shares `parse_list`, without the Tidal variant).
                return Err(format!(
                    "--peers: unknown peer '{p}'; expected {}, {}, influxdb, clickhouse, postgres, victoria or none",
                    tidal_engine::LP_SELECTOR,
                    tidal_engine::LOAD_SELECTOR
                ));
            }
        }
        Ok(Selection {
            tidal_lp,
            tidal_load,
            peers: peers::parse_list(&rest.join(","))?,
        })
    }

    /// The list as `--peers` takes it, for the report's command line.
    fn spelled(&self) -> String {
        let mut v: Vec<&str> = Vec::new();
        if self.tidal_lp {
            v.push(tidal_engine::LP_SELECTOR);
        }
        if self.tidal_load {
            v.push(tidal_engine::LOAD_SELECTOR);
        }
        v.extend(self.peers.iter().map(|k| k.name()));
        if v.is_empty() {
            "none".into()
        } else {
            v.join(",")
        }
    }
}

pub async fn run(mut args: RunArgs) -> Result<ExitCode, BoxError> {
    if args.small {
        args.scale = 4;
        args.duration = "30m".into();
        // The line-protocol and loader variants need nothing installed and cost a second or
        // two at this size, so the smoke run covers them.
        args.peers = format!(
            "{},{}",
            tidal_engine::LP_SELECTOR,
            tidal_engine::LOAD_SELECTOR
        );
        args.queries = 1;
    }
    let data = DataArgs {
        scale: args.scale,
        start: args.start.clone(),
        end: None,
        duration: Some(args.duration.clone()),
        seed: args.seed,
    };
    let cfg = data.config()?;
    let selection = Selection::parse(&args.peers)?;
    let out = args.out.clone().unwrap_or_else(|| {
        if args.small {
            std::env::temp_dir()
                .join("tidal-bench-small")
                .join("BENCHMARKS.md")
        } else {
            PathBuf::from("docs/BENCHMARKS.md")
        }
    });
    let out_dir = out.parent().map(Path::to_path_buf).unwrap_or_default();
    let chart_dir = out_dir.join("bench");
    std::fs::create_dir_all(&chart_dir)
        .map_err(|e| format!("cannot create {}: {e}", chart_dir.display()))?;
    let (work, temp) = match &args.work {
        Some(w) => (w.clone(), false),
        None => (
            std::env::temp_dir().join(format!("tidal-bench-{}", std::process::id())),
            true,
        ),
    };
    std::fs::create_dir_all(&work).map_err(|e| format!("cannot create {}: {e}", work.display()))?;
    let command = if args.small {
        "tidal bench run --small".to_string()
    } else {
        format!(
            "tidal bench run --scale {} --duration {} --seed {} --peers {} --queries {}{}{}",
            args.scale,
            args.duration,
            args.seed,
            selection.spelled(),
            args.queries,
            if args.row_tags { " --row-tags" } else { "" },
            if args.ingest_only {
                " --ingest-only"
            } else {
                ""
            }
        )
    };
    let result = bench(&args, &cfg, &selection, &work, command).await;
    if temp {
        let _ = std::fs::remove_dir_all(&work);
    }
    write_outputs(result?, &out, &chart_dir)?;
    Ok(ExitCode::SUCCESS)
}

#[derive(clap::Args)]
pub struct ReportArgs {
    /// The figures of a run.
    #[arg(long, default_value = "docs/bench/results.json")]
    json: PathBuf,
    /// The report to write; charts go to a `bench` folder beside it.
    #[arg(long, default_value = "docs/BENCHMARKS.md")]
    out: PathBuf,
}

/// `tidal bench report`: the report and charts again from saved figures, so a change to the
/// report's layout needs no new measurement.
pub fn rerender(args: ReportArgs) -> Result<ExitCode, BoxError> {
    let text = std::fs::read_to_string(&args.json)
        .map_err(|e| format!("cannot read {}: {e}", args.json.display()))?;
    let results: Results = serde_json::from_str(&text)
        .map_err(|e| format!("{} is not a bench results file: {e}", args.json.display()))?;
    let chart_dir = args
        .out
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
        .join("bench");
    std::fs::create_dir_all(&chart_dir)
        .map_err(|e| format!("cannot create {}: {e}", chart_dir.display()))?;
    write_outputs(results, &args.out, &chart_dir)?;
    Ok(ExitCode::SUCCESS)
}

/// Charts, results.json and the report.
fn write_outputs(mut results: Results, out: &Path, chart_dir: &Path) -> Result<(), BoxError> {
    let (charts, text) = super::chart::write_all(&results, chart_dir).unwrap_or_else(|e| {
        eprintln!("warning: charts not written: {e}");
        (Vec::new(), false)
    });
    results.charts = charts;
    if !text && !results.charts.is_empty() {
        const NOTE: &str = "no TrueType font was found (DejaVu Sans / Liberation Sans, or TIDAL_BENCH_FONT), so the charts have no text";
        for e in results.engines.iter_mut().take(1) {
            if !e.notes.iter().any(|n| n == NOTE) {
                e.notes.push(NOTE.into());
            }
        }
    }
    // Other benchmarks keep their reports in the same folder; link them.
    results.other_reports = std::fs::read_dir(chart_dir)
        .map(|rd| {
            let mut v: Vec<String> = rd
                .flatten()
                .filter_map(|e| {
                    let name = e.file_name().to_str().map(String::from)?;
                    if name.ends_with(".md") {
                        return Some(name);
                    }
                    // Runs at other scales: `scale-4000x4h/BENCHMARKS.md`.
                    let nested = format!("{name}/BENCHMARKS.md");
                    chart_dir.join(&nested).exists().then_some(nested)
                })
                .collect();
            v.sort();
            v
        })
        .unwrap_or_default();
    results.lastrow_report = std::fs::read_to_string(chart_dir.join("lastrow.md")).ok();
    let json = serde_json::to_string_pretty(&results)?;
    let json_path = chart_dir.join("results.json");
    std::fs::write(&json_path, json)
        .map_err(|e| format!("cannot write {}: {e}", json_path.display()))?;
    let md = report::markdown(&results, "bench");
    std::fs::write(out, md).map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    eprintln!(
        "wrote {}, {} and {} chart(s) in {}",
        out.display(),
        json_path.display(),
        results.charts.len(),
        chart_dir.display()
    );
    Ok(())
}

async fn bench(
    args: &RunArgs,
    cfg: &Config,
    selection: &Selection,
    work: &Path,
    command: String,
) -> Result<Results, BoxError> {
    let kinds = &selection.peers;
    let mut results = Results {
        format: 1,
        started_at: now_iso(),
        command,
        small: args.small,
        machine: machine(),
        queries_per_type: args.queries,
        ..Results::default()
    };
    let params = QueryParams::for_data(cfg);

    // The data set, once: the statistics, then the peers' input files.
    eprintln!(
        "== generating the data set: {} trucks, {} from {}",
        cfg.scale, args.duration, args.start
    );
    let t = Instant::now();
    let stats = tokio::task::block_in_place(|| tidal_tsbs::stats::collect(cfg))?;
    let scripts = if kinds.is_empty() {
        None
    } else {
        peers::scripts_dir()
    };
    let mut kinds: Vec<Kind> = kinds.to_vec();
    if !kinds.is_empty() && scripts.is_none() {
        for k in &kinds {
            results.skipped.push((
                k.name().into(),
                "../shared/peers (start.sh) was not found; set TIDAL_PEERS_DIR".into(),
            ));
        }
        kinds.clear();
    }
    let files = tokio::task::block_in_place(|| {
        write_files(
            cfg,
            work,
            selection.tidal_lp
                || kinds
                    .iter()
                    .any(|k| matches!(k, Kind::Influx | Kind::Victoria)),
            selection.tidal_load,
            kinds.contains(&Kind::ClickHouse),
            kinds.contains(&Kind::Postgres),
            !args.row_tags,
        )
    })?;
    results.data = DataSet {
        scale: cfg.scale,
        start: tidal_tsbs::time::rfc3339_seconds(cfg.start_ms),
        end: tidal_tsbs::time::rfc3339_seconds(cfg.end_ms),
        seed: cfg.seed,
        points: stats.points,
        readings: stats.per_measurement[0],
        diagnostics: stats.per_measurement[1],
        rows_per_truck_per_day: stats.rows_per_truck_per_day,
        generate_seconds: t.elapsed().as_secs_f64(),
        subtable_tags: !args.row_tags,
    };
    let mut first: FirstAnswers = Vec::new();

    // Tidal.
    eprintln!("== tidal");
    write_back();
    let tidal = run_tidal(args, cfg, &params, work, &mut first).await?;
    results.engines.push(tidal);

    // Tidal again, through the line protocol. A failure is reported like a peer's, so that
    // the rest of a long run is not lost, and says so loudly on stderr.
    if selection.tidal_lp {
        eprintln!("== {}", tidal_engine::LP_NAME);
        write_back();
        match run_tidal_lp(&files, work).await {
            Ok(e) => results.engines.push(e),
            Err(why) => {
                eprintln!("error: {} failed: {why}", tidal_engine::LP_NAME);
                results
                    .skipped
                    .push((tidal_engine::LP_NAME.into(), format!("failed: {why}")));
            }
        }
    }

    // And through `tidal load`, reported the same way.
    if selection.tidal_load {
        eprintln!("== {}", tidal_engine::LOAD_NAME);
        write_back();
        match run_tidal_load(&files, work, !args.row_tags).await {
            Ok(e) => results.engines.push(e),
            Err(why) => {
                eprintln!("error: {} failed: {why}", tidal_engine::LOAD_NAME);
                results
                    .skipped
                    .push((tidal_engine::LOAD_NAME.into(), format!("failed: {why}")));
            }
        }
    }

    // The peers, one at a time.
    let peer_root = work.join("peers");
    if let Some(scripts) = scripts {
        for k in kinds {
            eprintln!("== {}", k.name());
            write_back();
            let r = tokio::task::block_in_place(|| {
                run_peer(
                    k,
                    &scripts,
                    &peer_root,
                    &files,
                    (!args.ingest_only).then_some(args.queries),
                    &params,
                    &mut first,
                )
            });
            match r {
                Ok(e) => results.engines.push(e),
                Err(why) => {
                    eprintln!("skipping {}: {why}", k.name());
                    results.skipped.push((k.name().into(), why));
                }
            }
        }
    }

    for q in QueryType::all() {
        let answers: Vec<(String, Answer)> = first
            .iter()
            .filter(|(t, _, _)| t == q)
            .map(|(_, e, a)| (e.clone(), a.clone()))
            .collect();
        match answers::compare(*q, &answers) {
            Some(c) => results.checks.push(c),
            None => results.unchecked.push(q.name().to_string()),
        }
    }
    results.machine.load_end = loadavg();
    results.finished_at = now_iso();
    Ok(results)
}

async fn run_tidal(
    args: &RunArgs,
    cfg: &Config,
    params: &QueryParams,
    work: &Path,
    first: &mut FirstAnswers,
) -> Result<EngineResult, BoxError> {
    let mut r = EngineResult {
        name: "tidal".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        settings: tidal_engine::settings(),
        durability: tidal_engine::DURABILITY.into(),
        ..EngineResult::default()
    };
    // The columnar batches are built before the clock starts, as the peers' files are.
    let batches: Vec<_> = tokio::task::block_in_place(|| {
        Generator::new(cfg.clone())
            .map(|g| tidal_engine::row_blocks(TableWriteBatches::new(g, tidal_engine::BATCH_ROWS)))
    })?;
    let engine = TidalEngine::start(&work.join("tidal")).await?;
    let warm = (!args.ingest_only).then_some(args.queries);
    let outcome = tidal_phases(&engine, &mut r, batches, warm, params, first).await;
    engine.stop().await;
    outcome?;
    Ok(r)
}

async fn tidal_phases(
    engine: &TidalEngine,
    r: &mut EngineResult,
    batches: Vec<tidal_common::RowBlock>,
    warm: Option<u64>,
    params: &QueryParams,
    first: &mut FirstAnswers,
) -> Result<(), BoxError> {
    let pids = engine.pids();
    engine.create().await?;
    let sampler = PeakSampler::start(pids.clone());
    let cpu0 = procfs::cpu_seconds(&pids);
    let t = Instant::now();
    let rows = engine.load_blocks(batches).await?;
    let secs = t.elapsed().as_secs_f64();
    let cpu = procfs::cpu_seconds(&pids) - cpu0;
    r.ingest = Some(ingest(
        rows,
        secs,
        cpu,
        "client library Writer (row blocks: columns per STABLE over gRPC)",
    ));
    eprintln!("   loaded {rows} rows in {secs:.1} s");
    let settled = engine.settle().await?;
    r.flush = Some(settled.flush(rows));
    r.disk_bytes = Some(settled.bytes);
    r.disk_detail = settled.detail;
    let Some(warm) = warm else {
        r.peak_rss_bytes = Some(sampler.finish());
        return Ok(());
    };
    let qcpu0 = procfs::cpu_seconds(&pids);
    for q in QueryType::all() {
        let Some(texts) = texts(Engine::Tidal, *q, params, warm) else {
            r.queries.push(unsupported(*q));
            continue;
        };
        let mut ms = Vec::new();
        let mut error = None;
        let mut rows = None;
        for (i, text) in texts.iter().enumerate() {
            match engine.query_timed(text).await {
                Ok((t_ms, a)) => {
                    ms.push(t_ms);
                    if i == 0 {
                        rows = Some(a.len());
                        first.push((*q, "tidal".into(), a));
                    }
                }
                Err(e) => {
                    error = Some(e);
                    break;
                }
            }
        }
        r.queries.push(figures(*q, &ms, error, rows));
    }
    r.query_cpu_s = Some(procfs::cpu_seconds(&pids) - qcpu0);
    r.peak_rss_bytes = Some(sampler.finish());
    Ok(())
}

/// Tidal through its line-protocol HTTP API: a fresh cluster with the same database, the
/// InfluxDB file POSTed by the peers' loader, then every STABLE's `COUNT(*)` checked against
/// the distinct points sent, then the settle step for the size. No queries.
async fn run_tidal_lp(
    files: &super::generate::DataFiles,
    work: &Path,
) -> Result<EngineResult, String> {
    let file = files
        .influx
        .as_deref()
        .ok_or("no line-protocol file was generated")?;
    // Read before the clock starts, as the file itself is written before.
    let expected = tokio::task::block_in_place(|| tidal_engine::expected_rows(file))?;
    let mut r = EngineResult {
        name: tidal_engine::LP_NAME.into(),
        variant_of: Some("tidal".into()),
        version: env!("CARGO_PKG_VERSION").into(),
        settings: tidal_engine::lp_settings(),
        durability: tidal_engine::LP_DURABILITY.into(),
        ..EngineResult::default()
    };
    let engine = TidalEngine::start_with_http(&work.join("tidal-lp"))
        .await
        .map_err(|e| e.to_string())?;
    let outcome = tidal_lp_phases(&engine, &mut r, file, &expected, files.points).await;
    engine.stop().await;
    outcome?;
    Ok(r)
}

async fn tidal_lp_phases(
    engine: &TidalEngine,
    r: &mut EngineResult,
    file: &Path,
    expected: &tidal_engine::LpExpectation,
    points: u64,
) -> Result<(), String> {
    let (rows, secs, cpu, sampler) = measured_load(engine, || {
        let t = Instant::now();
        engine
            .load_line_protocol(file)
            .map(|rows| (rows, t.elapsed().as_secs_f64()))
    })
    .await?;
    r.ingest = Some(ingest(
        rows,
        secs,
        cpu,
        &format!(
            "line protocol over HTTP (`POST /write`, schemaless), {}",
            peers::lp_batching()
        ),
    ));
    eprintln!("   loaded {rows} rows in {secs:.1} s");
    if let Err(e) = lp_checks(engine, r, rows, expected, points).await {
        sampler.finish();
        return Err(e);
    }
    settle_variant(engine, r, sampler).await
}

/// The line-protocol load's checks: every line sent, every STABLE's count as expected.
async fn lp_checks(
    engine: &TidalEngine,
    r: &mut EngineResult,
    rows: u64,
    expected: &tidal_engine::LpExpectation,
    points: u64,
) -> Result<(), String> {
    if rows != expected.lines {
        return Err(format!(
            "{rows} lines sent, but the file holds {}",
            expected.lines
        ));
    }
    let mut counts = Vec::new();
    for (stable, want) in &expected.rows {
        counts.push((stable, *want, engine.count(stable).await));
    }
    if let Some(msg) = count_mismatch(&counts) {
        return Err(msg);
    }
    if rows != points {
        r.notes.push(format!(
            "{rows} rows sent of {points} points generated (line protocol omits points whose every field is NULL, as TSBS does)"
        ));
    }
    let distinct = expected.total_rows();
    if distinct != rows {
        r.notes.push(format!(
            "{} of the lines sent repeat a subtable and timestamp sent before; Tidal keeps one row for each, so it holds {distinct} rows",
            rows - distinct
        ));
    }
    r.notes.push(format!(
        "after the load, `SELECT COUNT(*)` found the rows expected: {}",
        expected
            .rows
            .iter()
            .map(|(s, n)| format!("{s} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    Ok(())
}

/// Writes every dirty page of the machine back before an engine starts. Why: the kernel
/// writes a page back about 30 s after it was dirtied, so in a run of several engines each
/// one's load shared the disk and the CPU with the writeback of the files generated before
/// it and of the engine before it (its data files and log), and the later an engine ran the
/// more of that it was charged with.
fn write_back() {
    tokio::task::block_in_place(|| {
        // SAFETY: sync(2) takes no arguments and cannot fail.
        unsafe { libc::sync() }
    });
}

/// Creates a Tidal variant's database, then runs `load` (blocking; it returns the rows and
/// seconds) with the server processes' CPU measured and their memory sampled. Returns rows,
/// seconds, CPU seconds and the sampler, which keeps sampling through the checks and the
/// settle that follow.
async fn measured_load(
    engine: &TidalEngine,
    load: impl FnOnce() -> Result<(u64, f64), String>,
) -> Result<(u64, f64, f64, PeakSampler), String> {
    engine.create_database().await.map_err(|e| e.to_string())?;
    let pids = engine.pids();
    let sampler = PeakSampler::start(pids.clone());
    let cpu0 = procfs::cpu_seconds(&pids);
    let loaded = tokio::task::block_in_place(load);
    let cpu = procfs::cpu_seconds(&pids) - cpu0;
    match loaded {
        Ok((rows, secs)) => Ok((rows, secs, cpu, sampler)),
        Err(e) => {
            sampler.finish();
            Err(format!("load failed: {e}"))
        }
    }
}

/// A Tidal variant's last step: settle, then its size on disk and peak memory.
async fn settle_variant(
    engine: &TidalEngine,
    r: &mut EngineResult,
    sampler: PeakSampler,
) -> Result<(), String> {
    let settled = engine.settle().await;
    r.peak_rss_bytes = Some(sampler.finish());
    let settled = settled.map_err(|e| e.to_string())?;
    let rows = r.ingest.as_ref().map_or(0, |i| i.rows);
    r.flush = Some(settled.flush(rows));
    r.disk_bytes = Some(settled.bytes);
    r.disk_detail = settled.detail;
    Ok(())
}

/// Tidal through `tidal load` (TSBS's TDengine file): first its parse-only rate (`--dry-run`,
/// no server), then a fresh cluster with the same database loaded by it, every STABLE's
/// `COUNT(*)` checked against the rows of the file, and the settle step for the size. No
/// queries.
async fn run_tidal_load(
    files: &super::generate::DataFiles,
    work: &Path,
    subtable_tags: bool,
) -> Result<EngineResult, String> {
    let file = files
        .tdengine
        .as_deref()
        .ok_or("no TDengine-format file was generated")?;
    let mut r = EngineResult {
        name: tidal_engine::LOAD_NAME.into(),
        variant_of: Some("tidal".into()),
        version: env!("CARGO_PKG_VERSION").into(),
        settings: tidal_engine::load_settings(),
        durability: tidal_engine::DURABILITY.into(),
        ..EngineResult::default()
    };
    let (parsed, parse_secs) =
        tokio::task::block_in_place(|| tidal_engine::run_loader(file, None))?;
    r.parse_only_rows_per_s = Some(parsed as f64 / parse_secs.max(1e-9));
    eprintln!("   parse-only: {parsed} rows in {parse_secs:.1} s");
    let engine = TidalEngine::start(&work.join("tidal-load"))
        .await
        .map_err(|e| e.to_string())?;
    let outcome = tidal_load_phases(&engine, &mut r, file, files, subtable_tags).await;
    engine.stop().await;
    outcome?;
    Ok(r)
}

async fn tidal_load_phases(
    engine: &TidalEngine,
    r: &mut EngineResult,
    file: &Path,
    files: &super::generate::DataFiles,
    subtable_tags: bool,
) -> Result<(), String> {
    let (rows, secs, cpu, sampler) = measured_load(engine, || engine.load_tdengine(file)).await?;
    r.ingest = Some(ingest(
        rows,
        secs,
        cpu,
        "`tidal load --format tdengine` (row blocks per STABLE and vgroup through the client library)",
    ));
    eprintln!("   loaded {rows} rows in {secs:.1} s");
    if let Err(e) = load_checks(engine, r, rows, files.tdengine_rows, subtable_tags).await {
        sampler.finish();
        return Err(e);
    }
    settle_variant(engine, r, sampler).await
}

/// `tidal load`'s checks: every row of the file loaded and, when every row is a distinct
/// (subtable, ts), every STABLE's count equal to its rows in the file.
async fn load_checks(
    engine: &TidalEngine,
    r: &mut EngineResult,
    rows: u64,
    want: [u64; 2],
    subtable_tags: bool,
) -> Result<(), String> {
    if rows != want.iter().sum::<u64>() {
        return Err(format!(
            "{rows} rows loaded, but the file holds {}",
            want.iter().sum::<u64>()
        ));
    }
    // Every row of the file is a distinct (subtable, ts) when the null-name points share
    // their subtable's one row per ts (the default); with --row-tags they may repeat one.
    if subtable_tags {
        let stables = [String::from("readings"), String::from("diagnostics")];
        let mut counts = Vec::new();
        for (stable, n) in stables.iter().zip(want) {
            counts.push((stable, n, engine.count(stable).await));
        }
        if let Some(msg) = count_mismatch(&counts) {
            return Err(msg);
        }
        r.notes.push(format!(
            "after the load, `SELECT COUNT(*)` found the rows of the file: readings {}, diagnostics {}",
            want[0], want[1]
        ));
    }
    Ok(())
}

/// The first STABLE whose count is not the expected one (or could not be read), as the
/// variant's failure message.
fn count_mismatch(counts: &[(&String, u64, Result<u64, String>)]) -> Option<String> {
    counts.iter().find_map(|(stable, want, got)| match got {
        Ok(n) if n == want => None,
        Ok(n) => Some(format!(
            "after the load Tidal holds {n} rows in {stable}, expected {want} (the distinct subtable and timestamp keys sent)"
        )),
        Err(e) => Some(format!("counting the rows of {stable}: {e}")),
    })
}

fn ingest(rows: u64, secs: f64, cpu: f64, method: &str) -> Ingest {
    Ingest {
        rows,
        seconds: secs,
        rows_per_s: if secs > 0.0 { rows as f64 / secs } else { 0.0 },
        cpu_s: cpu,
        cpu_s_per_million_rows: if rows > 0 {
            cpu / (rows as f64 / 1e6)
        } else {
            0.0
        },
        method: method.into(),
    }
}

fn run_peer(
    kind: Kind,
    scripts: &Path,
    root: &Path,
    files: &super::generate::DataFiles,
    warm: Option<u64>,
    params: &QueryParams,
    first: &mut FirstAnswers,
) -> Result<EngineResult, String> {
    std::fs::create_dir_all(root).map_err(|e| format!("cannot create {}: {e}", root.display()))?;
    let server = PeerServer::start(kind, scripts, root)?;
    let outcome = peer_phases(&server, files, warm, params, first);
    if let Err(e) = server.stop() {
        eprintln!("warning: {e}");
    }
    outcome
}

fn peer_phases(
    server: &PeerServer,
    files: &super::generate::DataFiles,
    warm: Option<u64>,
    params: &QueryParams,
    first: &mut FirstAnswers,
) -> Result<EngineResult, String> {
    let kind = server.kind;
    let mut r = EngineResult {
        name: kind.name().into(),
        version: server.version(),
        settings: kind.settings().into(),
        durability: kind.durability().into(),
        ..EngineResult::default()
    };
    server.prepare()?;
    let pids = || procfs::with_descendants(&[server.pid]);
    let sampler = PeakSampler::start(vec![server.pid]);
    let cpu0 = procfs::cpu_seconds(&pids());
    let t = Instant::now();
    let loaded = server.load(files);
    let secs = t.elapsed().as_secs_f64();
    let (rows, method) = match loaded {
        Ok(x) => x,
        Err(e) => {
            sampler.finish();
            return Err(format!("load failed: {e}"));
        }
    };
    let cpu = procfs::cpu_seconds(&pids()) - cpu0;
    r.ingest = Some(ingest(rows, secs, cpu, &method));
    eprintln!("   loaded {rows} rows in {secs:.1} s");
    if rows != files.points {
        r.notes.push(format!(
            "{rows} rows sent of {} points generated{}",
            files.points,
            if matches!(kind, Kind::Influx | Kind::Victoria) {
                " (line protocol omits points whose every field is NULL, as TSBS does)"
            } else {
                ""
            }
        ));
    }
    match server.size() {
        Ok((b, line)) => {
            r.disk_bytes = Some(b);
            r.disk_detail = format!("size.sh: `{line}`");
        }
        Err(e) => r.notes.push(format!("size not measured: {e}")),
    }
    if let (true, Some(warm)) = (kind.queries(), warm) {
        let engine = match kind {
            Kind::Influx => Engine::Influx,
            Kind::ClickHouse => Engine::Clickhouse18,
            _ => Engine::Postgres,
        };
        let qcpu0 = procfs::cpu_seconds(&pids());
        for q in QueryType::all() {
            let Some(texts) = texts(engine, *q, params, warm) else {
                r.queries.push(unsupported(*q));
                continue;
            };
            let run = server.run_queries(&texts);
            let rows = run.first.as_ref().map(Answer::len);
            if let Some(a) = run.first {
                if run.error.is_none() {
                    first.push((*q, kind.name().into(), a));
                }
            }
            r.queries.push(figures(*q, &run.ms, run.error, rows));
        }
        r.query_cpu_s = Some(procfs::cpu_seconds(&pids()) - qcpu0);
    }
    r.peak_rss_bytes = Some(sampler.finish());
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_and_figures() {
        let v = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0];
        assert_eq!(percentile(&v, 50.0), Some(5.0));
        assert_eq!(percentile(&v, 95.0), Some(10.0));
        assert_eq!(percentile(&[], 50.0), None);
        let f = figures(QueryType::AvgLoad, &[100.0, 2.0, 4.0], None, Some(3));
        assert_eq!(f.cold_ms, Some(100.0));
        assert_eq!(f.mean_ms, Some(3.0));
        assert_eq!(f.p50_ms, Some(2.0));
        assert_eq!(f.runs, 3);
    }

    #[test]
    fn peers_select_the_line_protocol_variant() {
        let s = Selection::parse("tidal-lp,influxdb").unwrap();
        assert_eq!(
            s,
            Selection {
                tidal_lp: true,
                tidal_load: false,
                peers: vec![Kind::Influx]
            }
        );
        assert_eq!(s.spelled(), "tidal-lp,influxdb");
        let s = Selection::parse("none").unwrap();
        assert!(!s.tidal_lp && s.peers.is_empty());
        assert_eq!(s.spelled(), "none");
        let s = Selection::parse(" tidal-lp ").unwrap();
        assert!(s.tidal_lp && s.peers.is_empty());
        let err = Selection::parse("tidal-lp,mysql").unwrap_err();
        assert!(err.contains("'mysql'") && err.contains("tidal-lp"), "{err}");
        // The default list parses and includes both variants.
        let s =
            Selection::parse("tidal-lp,tidal-load,influxdb,clickhouse,postgres,victoria").unwrap();
        assert!(s.tidal_lp && s.tidal_load && s.peers.len() == 4);
        assert_eq!(
            s.spelled(),
            "tidal-lp,tidal-load,influxdb,clickhouse,postgres,victoria"
        );
        let s = Selection::parse("tidal-load").unwrap();
        assert!(s.tidal_load && !s.tidal_lp && s.peers.is_empty());
    }

    #[test]
    fn count_mismatches_name_the_stable() {
        let (r, d) = ("readings".to_string(), "diagnostics".to_string());
        assert_eq!(count_mismatch(&[(&r, 5, Ok(5)), (&d, 2, Ok(2))]), None);
        let m = count_mismatch(&[(&r, 5, Ok(5)), (&d, 2, Ok(1))]).unwrap();
        assert!(m.contains("1 rows in diagnostics, expected 2"), "{m}");
        let m = count_mismatch(&[(&r, 5, Err("boom".into()))]).unwrap();
        assert!(m.contains("readings") && m.contains("boom"), "{m}");
    }
}
