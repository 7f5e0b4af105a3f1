//! `tidal bench lastrow`: the last-point queries ("where is every truck now") at 1,000,
//! 100,000 and 1,000,000 trucks, on Tidal with its last-row cache off (`CACHEMODEL 'none'`,
//! answers computed from the data files) and on (`'both'`), and on InfluxDB, ClickHouse and
//! PostgreSQL loaded with the same generated TSBS IoT data.
//!
//! Per size: the data set is generated once (`--duration` of TSBS IoT data, a few points per
//! truck), Tidal loads it through the client library, flushes and compacts, then each engine
//! runs the four TSBS last-point types (single-last-loc, last-loc, low-fuel, high-load), a cold
//! run then `--runs` warm runs with fresh parameters. The peers are started with
//! ../shared/peers one at a time, loaded through their bulk paths and queried the same way
//! `tidal bench run` does. The report gives p50/p95 per engine, the ratio to the best peer, the
//! cache's bytes per subtable and whether the answers agree.

use super::answers::{self, Answer};
use super::generate::write_files;
use super::peers::{self, Kind, PeerServer};
use super::queries::Engine;
use super::tidal::{self as tidal_engine, TidalEngine, DB};
use super::DataArgs;
use crate::server::BoxError;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tidal_tsbs::format::tidal::TableWriteBatches;
use tidal_tsbs::{Config, Generator, QueryParams, QueryType};

#[derive(clap::Args)]
pub struct LastRowArgs {
    /// Numbers of trucks (each is one subtable of `readings` and one of `diagnostics`).
    #[arg(long, default_value = "1000,100000,1000000")]
    tables: String,
    /// Length of each data set: a few 10 s points per truck.
    #[arg(long, default_value = "30s")]
    duration: String,
    #[arg(long, default_value_t = 123)]
    seed: u64,
    /// Peers to compare with, comma-separated: influxdb,clickhouse,postgres, or none.
    #[arg(long, default_value = "influxdb,clickhouse,postgres")]
    peers: String,
    /// Warm runs per query type and engine (each with its own parameters), after the cold run.
    #[arg(long, default_value_t = 20)]
    runs: u64,
    /// An engine stops running a query type once its runs have taken this long (a peer that
    /// needs minutes per fleet query at a million trucks reports the runs it finished).
    #[arg(long, default_value_t = 60)]
    budget_s: u64,
    /// InfluxDB is loaded only at up to this many trucks and reported as skipped above it:
    /// InfluxDB 1.x with the ../shared/peers settings stops making progress while loading a
    /// million series (its write cache fills; requests hang or fail with HTTP 500 "timeout").
    #[arg(long, default_value_t = 100_000)]
    influx_tables_max: u32,
    /// The report.
    #[arg(long, default_value = "docs/bench/lastrow.md")]
    out: PathBuf,
    /// Working folder for data files and engine data (default: a temporary folder, removed).
    #[arg(long)]
    work: Option<PathBuf>,
}

/// The TSBS IoT types that read the newest row of each truck.
const TYPES: [QueryType; 4] = [
    QueryType::SingleLastLoc,
    QueryType::LastLoc,
    QueryType::LowFuel,
    QueryType::HighLoad,
];

/// One engine's runs of one query type.
#[derive(Default, Clone)]
struct Cell {
    /// Latencies in ms, cold run first.
    ms: Vec<f64>,
    rows: Option<usize>,
    error: Option<String>,
}

impl Cell {
    fn warm_sorted(&self) -> Vec<f64> {
        let mut w: Vec<f64> = self.ms.iter().skip(1).copied().collect();
        w.sort_by(|a, b| a.total_cmp(b));
        w
    }

    fn p(&self, pct: f64) -> Option<f64> {
        let w = self.warm_sorted();
        if w.is_empty() {
            // only the cold run finished within the budget
            return self.ms.first().copied();
        }
        let rank = ((pct / 100.0) * w.len() as f64).ceil() as usize;
        w.get(rank.clamp(1, w.len()) - 1).copied()
    }

    fn show(&self) -> String {
        match (&self.error, self.p(50.0), self.p(95.0)) {
            (Some(e), None, _) => format!("error: {}", first_line(e)),
            (_, Some(p50), Some(p95)) if self.ms.len() > 1 => {
                format!("{} / {}", ms(p50), ms(p95))
            }
            (_, Some(p50), _) => format!("{} (cold only)", ms(p50)),
            _ => "-".into(),
        }
    }
}

fn first_line(s: &str) -> String {
    let l = s.lines().next().unwrap_or("").trim();
    l.chars().take(80).collect()
}

fn ms(v: f64) -> String {
    if v < 10.0 {
        format!("{v:.2}")
    } else if v < 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

struct EngineRuns {
    label: String,
    cells: Vec<Cell>,
    skipped: Option<String>,
}

struct SizeResult {
    trucks: u32,
    points: u64,
    load_s: f64,
    engines: Vec<EngineRuns>,
    cache_entries: u64,
    cache_bytes: u64,
    agreement: Vec<String>,
}

pub async fn run(args: LastRowArgs) -> Result<ExitCode, BoxError> {
    let sizes: Vec<u32> = args
        .tables
        .split(',')
        .map(|s| {
            s.trim()
                .parse::<u32>()
                .map_err(|_| format!("--tables: '{s}' is not a number of trucks"))
        })
        .collect::<Result<_, _>>()?;
    let kinds = peers::parse_list(&args.peers)?;
    if let Some(k) = kinds.iter().find(|k| !k.queries()) {
        return Err(format!("--peers: {} is measured for ingest only", k.name()).into());
    }
    let scripts = if kinds.is_empty() {
        None
    } else {
        Some(peers::scripts_dir().ok_or(
            "../shared/peers (start.sh) was not found; set TIDAL_PEERS_DIR or pass --peers none",
        )?)
    };
    let (work, temp) = match &args.work {
        Some(w) => (w.clone(), false),
        None => (
            std::env::temp_dir().join(format!("tidal-lastrow-{}", std::process::id())),
            true,
        ),
    };
    std::fs::create_dir_all(&work).map_err(|e| format!("cannot create {}: {e}", work.display()))?;
    let started = super::run::now_iso();
    let load_start = super::run::loadavg();
    let mut results = Vec::new();
    let mut failure = None;
    for &n in &sizes {
        let dir = work.join(format!("n{n}"));
        let r = one_size(&args, n, &kinds, scripts.as_deref(), &dir).await;
        let _ = std::fs::remove_dir_all(&dir);
        match r {
            Ok(r) => results.push(r),
            Err(e) => {
                failure = Some(format!("{n} trucks: {e}"));
                break;
            }
        }
    }
    if temp {
        let _ = std::fs::remove_dir_all(&work);
    }
    if let Some(e) = failure {
        return Err(e.into());
    }
    let md = render(&args, &results, &started, &load_start);
    if let Some(p) = args.out.parent() {
        std::fs::create_dir_all(p).map_err(|e| format!("cannot create {}: {e}", p.display()))?;
    }
    std::fs::write(&args.out, &md)
        .map_err(|e| format!("cannot write {}: {e}", args.out.display()))?;
    print!("{md}");
    eprintln!("wrote {}", args.out.display());
    Ok(ExitCode::SUCCESS)
}

fn config(args: &LastRowArgs, n: u32) -> Result<Config, String> {
    DataArgs {
        scale: n,
        start: "2016-01-01T00:00:00Z".into(),
        end: None,
        duration: Some(args.duration.clone()),
        seed: args.seed,
    }
    .config()
}

fn texts(engine: Engine, q: QueryType, params: &QueryParams, runs: u64) -> Option<Vec<String>> {
    (0..=runs)
        .map(|k| engine.text(&tidal_tsbs::generate_query(q, params, k)))
        .collect()
}

async fn one_size(
    args: &LastRowArgs,
    n: u32,
    kinds: &[Kind],
    scripts: Option<&Path>,
    dir: &Path,
) -> Result<SizeResult, BoxError> {
    let cfg = config(args, n)?;
    let params = QueryParams::for_data(&cfg);
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    eprintln!("== {n} trucks: generating {} of data", args.duration);
    let files = tokio::task::block_in_place(|| {
        write_files(
            &cfg,
            dir,
            kinds.contains(&Kind::Influx),
            false,
            kinds.contains(&Kind::ClickHouse),
            kinds.contains(&Kind::Postgres),
            true,
        )
    })?;
    let budget = Duration::from_secs(args.budget_s.max(1));
    let mut first: Vec<(QueryType, String, Answer)> = Vec::new();

    // Tidal, cache off then on.
    eprintln!("== {n} trucks: tidal");
    let blocks: Vec<_> = tokio::task::block_in_place(|| {
        Generator::new(cfg.clone())
            .map(|g| tidal_engine::row_blocks(TableWriteBatches::new(g, tidal_engine::BATCH_ROWS)))
    })?;
    let engine = TidalEngine::start(&dir.join("tidal")).await?;
    let outcome = async {
        engine.create().await?;
        let t = Instant::now();
        let rows = engine.load_blocks(blocks).await?;
        let load_s = t.elapsed().as_secs_f64();
        eprintln!("   loaded {rows} rows in {load_s:.1} s");
        engine.settle().await?;
        let mut engines = Vec::new();
        for model in ["none", "both"] {
            engine
                .query(&format!("ALTER DATABASE {DB} CACHEMODEL '{model}'"))
                .await?;
            let mut cells = Vec::new();
            for q in TYPES {
                let Some(texts) = texts(Engine::Tidal, q, &params, args.runs) else {
                    cells.push(Cell {
                        error: Some("not supported".into()),
                        ..Cell::default()
                    });
                    continue;
                };
                let mut cell = Cell::default();
                let t0 = Instant::now();
                for (i, text) in texts.iter().enumerate() {
                    match engine.query_timed(text).await {
                        Ok((t_ms, a)) => {
                            cell.ms.push(t_ms);
                            if i == 0 {
                                cell.rows = Some(a.len());
                                if model == "both" {
                                    first.push((q, "tidal".into(), a));
                                }
                            }
                        }
                        Err(e) => {
                            cell.error = Some(e);
                            break;
                        }
                    }
                    if t0.elapsed() > budget {
                        break;
                    }
                }
                eprintln!("   CACHEMODEL '{model}' {}: {}", q.name(), cell.show());
                cells.push(cell);
            }
            engines.push(EngineRuns {
                label: format!("Tidal, CACHEMODEL '{model}'"),
                cells,
                skipped: None,
            });
        }
        // Every truck's entry is loaded by now: last-loc covers one fleet per run, low-fuel and
        // high-load every truck of diagnostics; a whole-STABLE LAST_ROW loads the rest.
        engine
            .query("SELECT last_row(ts), name FROM readings PARTITION BY name")
            .await?;
        let (entries, bytes) = engine.cache_stats().await?;
        Ok::<_, BoxError>((rows, load_s, engines, entries, bytes))
    }
    .await;
    engine.stop().await;
    let (points, load_s, mut engines, cache_entries, cache_bytes) = outcome?;

    // The peers, one at a time.
    for &k in kinds {
        let Some(scripts) = scripts else { break };
        eprintln!("== {n} trucks: {}", k.name());
        if k == Kind::Influx && n > args.influx_tables_max {
            let why = format!(
                "not loaded above {} trucks (`--influx-tables-max`): InfluxDB 1.x with the ../shared/peers settings stops making progress while loading a million series (2026-12-01: no progress after 20 minutes at 2.6 GB RSS; an earlier run failed with HTTP 500 \"timeout\" and \"cache-max-memory-size exceeded\")",
                args.influx_tables_max
            );
            eprintln!("   skipped: {why}");
            engines.push(EngineRuns {
                label: peer_label(k).into(),
                cells: Vec::new(),
                skipped: Some(why),
            });
            continue;
        }
        let root = dir.join(k.name());
        let r = tokio::task::block_in_place(|| {
            run_peer(
                k, scripts, &root, &files, &params, args.runs, budget, &mut first,
            )
        });
        let _ = std::fs::remove_dir_all(&root);
        engines.push(match r {
            Ok(cells) => EngineRuns {
                label: peer_label(k).into(),
                cells,
                skipped: None,
            },
            Err(why) => {
                eprintln!("   skipped: {why}");
                EngineRuns {
                    label: peer_label(k).into(),
                    cells: Vec::new(),
                    skipped: Some(why),
                }
            }
        });
    }
    let mut agreement = Vec::new();
    for q in TYPES {
        let answers: Vec<(String, Answer)> = first
            .iter()
            .filter(|(t, _, _)| *t == q)
            .map(|(_, e, a)| (e.clone(), a.clone()))
            .collect();
        if answers.len() < 2 {
            continue;
        }
        if let Some(c) = answers::compare(q, &answers) {
            let engines: Vec<String> = c
                .engines
                .iter()
                .map(|(e, same)| format!("{e} {}", if *same { "agrees" } else { "DIFFERS" }))
                .collect();
            let mut line = format!("{}: {}", q.name(), engines.join(", "));
            for note in &c.notes {
                let _ = write!(line, "; {note}");
            }
            agreement.push(line);
        }
    }
    Ok(SizeResult {
        trucks: n,
        points,
        load_s,
        engines,
        cache_entries,
        cache_bytes,
        agreement,
    })
}

fn peer_label(k: Kind) -> &'static str {
    match k {
        Kind::Influx => "InfluxDB",
        Kind::ClickHouse => "ClickHouse",
        Kind::Postgres => "PostgreSQL",
        Kind::Victoria => "VictoriaMetrics",
    }
}

#[allow(clippy::too_many_arguments)]
fn run_peer(
    kind: Kind,
    scripts: &Path,
    root: &Path,
    files: &super::generate::DataFiles,
    params: &QueryParams,
    runs: u64,
    budget: Duration,
    first: &mut Vec<(QueryType, String, Answer)>,
) -> Result<Vec<Cell>, String> {
    std::fs::create_dir_all(root).map_err(|e| format!("cannot create {}: {e}", root.display()))?;
    let server = PeerServer::start(kind, scripts, root)?;
    let outcome = (|| {
        server.prepare()?;
        let t = Instant::now();
        let (rows, _) = server.load(files)?;
        eprintln!(
            "   loaded {rows} rows in {:.1} s",
            t.elapsed().as_secs_f64()
        );
        let engine = match kind {
            Kind::Influx => Engine::Influx,
            Kind::ClickHouse => Engine::Clickhouse18,
            _ => Engine::Postgres,
        };
        let mut cells = Vec::new();
        for q in TYPES {
            let Some(texts) = texts(engine, q, params, runs) else {
                cells.push(Cell {
                    error: Some("not supported".into()),
                    ..Cell::default()
                });
                continue;
            };
            let mut cell = Cell::default();
            let t0 = Instant::now();
            // One text at a time, so that a slow engine stops at the budget.
            for (i, text) in texts.iter().enumerate() {
                let run = server.run_queries(std::slice::from_ref(text));
                if let Some(e) = run.error {
                    cell.error = Some(e);
                    break;
                }
                cell.ms.extend(run.ms);
                if i == 0 {
                    cell.rows = run.first.as_ref().map(Answer::len);
                    if let Some(a) = run.first {
                        first.push((q, kind.name().into(), a));
                    }
                }
                if t0.elapsed() > budget {
                    break;
                }
            }
            eprintln!("   {}: {}", q.name(), cell.show());
            cells.push(cell);
        }
        Ok(cells)
    })();
    if let Err(e) = server.stop() {
        eprintln!("warning: {e}");
    }
    outcome
}

fn render(args: &LastRowArgs, results: &[SizeResult], started: &str, load_start: &str) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# Last-point queries: Tidal's last-row cache against the peers\n"
    );
    let sizes: Vec<String> = results.iter().map(|r| r.trucks.to_string()).collect();
    let _ = writeln!(
        md,
        "Command: `tidal bench lastrow --tables {} --duration {} --seed {} --peers {} --runs {} --budget-s {} --influx-tables-max {}` (started {started}; load average at the start {load_start}, at the end {}).\n",
        sizes.join(","),
        args.duration,
        args.seed,
        args.peers,
        args.runs,
        args.budget_s,
        args.influx_tables_max,
        super::run::loadavg(),
    );
    let _ = writeln!(
        md,
        "Each size is its own TSBS IoT data set ({} of points per truck, seed {}), loaded into every engine: Tidal through the client library (then FLUSH + COMPACT, so that with the cache off the answers come from the data files), the peers through their bulk paths as in `tidal bench run` (see [BENCHMARKS.md](../BENCHMARKS.md) for their settings). Every engine runs the four TSBS last-point types, one cold run then {} warm runs each with fresh parameters, end to end from a client on the same machine; an engine stops a type once its runs took {} s. Figures are p50 / p95 of the warm runs in ms. \"vs best peer\" divides the best peer's p50 by Tidal's with the cache on: above 1× Tidal is faster.\n",
        args.duration, args.seed, args.runs, args.budget_s
    );
    for r in results {
        let _ = writeln!(
            md,
            "## {} trucks ({} points loaded into Tidal in {:.1} s)\n",
            r.trucks, r.points, r.load_s
        );
        let mut header = String::from("| query | rows |");
        let mut rule = String::from("|---|---:|");
        for e in &r.engines {
            let _ = write!(header, " {} |", e.label);
            rule.push_str("---:|");
        }
        header.push_str(" vs best peer |");
        rule.push_str("---:|");
        let _ = writeln!(md, "{header}\n{rule}");
        for (qi, q) in TYPES.iter().enumerate() {
            let rows = r
                .engines
                .first()
                .and_then(|e| e.cells.get(qi))
                .and_then(|c| c.rows)
                .map(|n| n.to_string())
                .unwrap_or_else(|| "-".into());
            let mut line = format!("| {} | {rows} |", q.name());
            for e in &r.engines {
                match (&e.skipped, e.cells.get(qi)) {
                    (Some(_), _) => line.push_str(" skipped |"),
                    (None, Some(c)) => {
                        let _ = write!(line, " {} |", c.show());
                    }
                    (None, None) => line.push_str(" - |"),
                }
            }
            let tidal_on = r
                .engines
                .iter()
                .find(|e| e.label.ends_with("'both'"))
                .and_then(|e| e.cells.get(qi))
                .filter(|c| c.error.is_none())
                .and_then(|c| c.p(50.0));
            let best_peer = r
                .engines
                .iter()
                .filter(|e| !e.label.starts_with("Tidal") && e.skipped.is_none())
                .filter_map(|e| e.cells.get(qi))
                .filter(|c| c.error.is_none())
                .filter_map(|c| c.p(50.0))
                .min_by(|a, b| a.total_cmp(b));
            match (tidal_on, best_peer) {
                (Some(t), Some(p)) if t > 0.0 => {
                    let _ = write!(line, " {:.1}× |", p / t);
                }
                _ => line.push_str(" - |"),
            }
            let _ = writeln!(md, "{line}");
        }
        let _ = writeln!(md);
        for e in &r.engines {
            if let Some(why) = &e.skipped {
                let _ = writeln!(md, "- {} skipped: {}", e.label, first_line(why));
            }
        }
        let _ = writeln!(
            md,
            "- Last-row cache (CACHEMODEL 'both', every subtable of both STABLEs loaded): {} entries, {} bytes, {:.0} bytes per subtable.",
            r.cache_entries,
            r.cache_bytes,
            r.cache_bytes as f64 / r.cache_entries.max(1) as f64
        );
        for a in &r.agreement {
            let _ = writeln!(md, "- Answers, {a}");
        }
        let _ = writeln!(md);
    }
    md
}
