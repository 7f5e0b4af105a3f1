//! The figures of a `bench run` ([`Results`], saved as JSON next to the report so later runs
//! can be compared) and their rendering as docs/BENCHMARKS.md ([`markdown`]): the machine,
//! the engines' versions and durability settings, one table per figure with the ratio to the
//! best peer, the answer check, what was skipped, and links to the charts.

use super::answers::Check;
use serde::{Deserialize, Serialize};
use std::fmt::Write;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Machine {
    pub cpu: String,
    pub cores: usize,
    pub ram_bytes: u64,
    pub kernel: String,
    pub os: String,
    /// `/proc/loadavg` at the start and at the end of the run.
    pub load_start: String,
    pub load_end: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct DataSet {
    pub scale: u32,
    pub start: String,
    pub end: String,
    pub seed: u64,
    pub points: u64,
    pub readings: u64,
    pub diagnostics: u64,
    pub rows_per_truck_per_day: [f64; 2],
    pub generate_seconds: f64,
    /// The peers' points carry their subtable's tags (see `generate::write_files`).
    pub subtable_tags: bool,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Ingest {
    pub rows: u64,
    pub seconds: f64,
    pub rows_per_s: f64,
    pub cpu_s: f64,
    pub cpu_s_per_million_rows: f64,
    pub method: String,
}

/// Tidal's `FLUSH DATABASE` right after a load: the rows acknowledged into WAL and memtables
/// encoded into column files, the work a peer that encodes as it loads has in its ingest CPU.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Flush {
    pub seconds: f64,
    /// Server CPU seconds of the flush per million rows loaded.
    pub cpu_s_per_million_rows: f64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct QueryFigures {
    pub query: String,
    /// `None` when the engine cannot express the type; otherwise the figures or an error.
    pub supported: bool,
    pub error: Option<String>,
    pub cold_ms: Option<f64>,
    pub mean_ms: Option<f64>,
    pub p50_ms: Option<f64>,
    pub p95_ms: Option<f64>,
    pub runs: usize,
    /// Rows of the cold run's answer.
    pub rows: Option<usize>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct EngineResult {
    pub name: String,
    /// Set on another way into an engine already in the run (Tidal through the line
    /// protocol: `Some("tidal")`): compared with the peers as that engine is, never counted
    /// as a peer. Absent from older results.json files.
    #[serde(default)]
    pub variant_of: Option<String>,
    pub version: String,
    pub settings: String,
    pub durability: String,
    pub ingest: Option<Ingest>,
    pub disk_bytes: Option<u64>,
    pub disk_detail: String,
    /// Peak summed RSS of the server processes over load, settle and queries.
    pub peak_rss_bytes: Option<u64>,
    pub query_cpu_s: Option<f64>,
    pub queries: Vec<QueryFigures>,
    pub notes: Vec<String>,
    /// A loader's parse-only rate on the same file (`tidal load --dry-run`), beside its load.
    #[serde(default)]
    pub parse_only_rows_per_s: Option<f64>,
    /// Tidal's flush right after the load (absent from older results.json files).
    #[serde(default)]
    pub flush: Option<Flush>,
}

/// Warm runs of the last-point types as the results record them (a run made before they
/// got more runs than the others records as many).
fn last_point_warm_runs(r: &Results) -> u64 {
    r.engines
        .iter()
        .flat_map(|e| &e.queries)
        .filter(|q| q.query == "single-last-loc" && q.runs > 0)
        .map(|q| q.runs as u64 - 1)
        .max()
        .unwrap_or(r.queries_per_type)
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Results {
    pub format: u32,
    pub started_at: String,
    pub finished_at: String,
    pub command: String,
    pub small: bool,
    pub machine: Machine,
    pub data: DataSet,
    pub queries_per_type: u64,
    pub engines: Vec<EngineResult>,
    /// (engine, why it is not in the tables).
    pub skipped: Vec<(String, String)>,
    pub checks: Vec<Check>,
    /// Query types with no check (no comparable engine answered).
    pub unchecked: Vec<String>,
    pub charts: Vec<String>,
    /// Other benchmarks' reports in the charts' folder (docs/bench/*.md), linked at the end.
    #[serde(default)]
    pub other_reports: Vec<String>,
    /// The last-point benchmark's report (`tidal bench lastrow`, docs/bench/lastrow.md) as it
    /// was when this report was written: shown in full, its headings one level down.
    #[serde(default)]
    pub lastrow_report: Option<String>,
}

pub fn human_bytes(b: u64) -> String {
    let b = b as f64;
    if b >= 1e9 {
        format!("{:.2} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.1} MB", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.1} kB", b / 1e3)
    } else {
        format!("{b:.0} B")
    }
}

fn ms(x: Option<f64>) -> String {
    match x {
        Some(v) if v >= 100.0 => format!("{v:.0}"),
        Some(v) if v >= 10.0 => format!("{v:.1}"),
        Some(v) => format!("{v:.2}"),
        None => "-".into(),
    }
}

/// `tidal / best peer` for a figure, `higher` when bigger is better; the ratio is written so
/// that > 1 always means Tidal is better.
fn ratio(tidal: Option<f64>, peers: &[Option<f64>], higher: bool) -> String {
    let best =
        peers
            .iter()
            .flatten()
            .copied()
            .filter(|v| *v > 0.0)
            .fold(None, |acc: Option<f64>, v| match acc {
                None => Some(v),
                Some(a) => Some(if higher { a.max(v) } else { a.min(v) }),
            });
    match (tidal, best) {
        (Some(t), Some(b)) if t > 0.0 => {
            let r = if higher { t / b } else { b / t };
            format!("{r:.2}×")
        }
        _ => "-".into(),
    }
}

fn q<'a>(e: &'a EngineResult, name: &str) -> Option<&'a QueryFigures> {
    e.queries.iter().find(|x| x.query == name)
}

/// Renders the report. `chart_dir` is the charts' folder relative to the report.
pub fn markdown(r: &Results, chart_dir: &str) -> String {
    let mut s = String::new();
    let tidal = r.engines.iter().find(|e| e.name == "tidal");
    // Tidal and its variants (the line-protocol load) are compared with the peers; a variant
    // is never a peer of Tidal.
    let is_tidal = |e: &EngineResult| e.name == "tidal" || e.variant_of.as_deref() == Some("tidal");
    let peers: Vec<&EngineResult> = r.engines.iter().filter(|e| !is_tidal(e)).collect();
    let _ = writeln!(s, "# Benchmarks: the TSBS IoT workload\n");
    let _ = writeln!(
        s,
        "Tidal and its peers on the same generated TSBS IoT data set, loaded and queried on the same machine in one run of `{}` ({} → {}). The raw figures are in [`{chart_dir}/results.json`]({chart_dir}/results.json); rerun the command to reproduce them (see the README, \"Benchmarks\").\n",
        r.command, r.started_at, r.finished_at
    );
    if r.small {
        let _ = writeln!(s, "**This is the `--small` smoke configuration** (seconds, for the test suite): its figures say nothing about performance.\n");
    }
    let _ = writeln!(
        s,
        "{}\n",
        load_caveat(&r.machine.load_start, &r.machine.load_end)
    );
    let _ = writeln!(s, "Ratios: every \"vs best peer\" column divides so that a value above 1× means Tidal is better (faster, smaller, less CPU or memory) than the best peer on that figure, below 1× that the best peer is better.\n");

    let _ = writeln!(s, "## Machine\n");
    let m = &r.machine;
    let _ = writeln!(s, "| | |\n| --- | --- |");
    let _ = writeln!(s, "| CPU | {} |", m.cpu);
    let _ = writeln!(s, "| cores | {} |", m.cores);
    let _ = writeln!(s, "| RAM | {} |", human_bytes(m.ram_bytes));
    let _ = writeln!(s, "| kernel | {} |", m.kernel);
    let _ = writeln!(s, "| OS | {} |", m.os);
    let _ = writeln!(s, "| date | {} |", r.started_at);
    let _ = writeln!(
        s,
        "| pinning | none: the load generator (this process) and the servers share all cores |\n"
    );

    let _ = writeln!(s, "## Data set\n");
    let d = &r.data;
    let _ = writeln!(s, "TSBS IoT (`tidal bench generate`, the `tidal-tsbs` crate): {} trucks, {} → {}, 10 s interval, seed {}, with TSBS's perturbations (missing and out-of-order batches and entries, NULL fields and tags).\n", d.scale, d.start, d.end, d.seed);
    let _ = writeln!(s, "| points | readings | diagnostics | rows per truck per day (readings / diagnostics) | generated in |\n| ---: | ---: | ---: | ---: | ---: |");
    let _ = writeln!(
        s,
        "| {} | {} | {} | {:.1} / {:.1} | {:.1} s |\n",
        d.points,
        d.readings,
        d.diagnostics,
        d.rows_per_truck_per_day[0],
        d.rows_per_truck_per_day[1],
        d.generate_seconds
    );
    // Tidal's other ways in: through the line protocol, through `tidal load`.
    let lp_row = r
        .engines
        .iter()
        .find(|e| e.variant_of.is_some() && e.parse_only_rows_per_s.is_none());
    let load_row = r
        .engines
        .iter()
        .find(|e| e.variant_of.is_some() && e.parse_only_rows_per_s.is_some());
    let mut ways = String::new();
    if let Some(e) = lp_row {
        ways += &format!(", as \"{}\", the InfluxDB file through its HTTP API (a fresh cluster, ingest and size only)", e.name);
    }
    if let Some(e) = load_row {
        ways += &format!(", as \"{}\", TSBS's TDengine file through `tidal load` (a fresh cluster, ingest and size only)", e.name);
    }
    let _ = writeln!(s, "Each engine gets the same points: Tidal as columnar `TableWrite`s through the client library{ways}, InfluxDB and VictoriaMetrics as line protocol, ClickHouse and PostgreSQL as CSV. The files are written before any clock starts; one engine runs at a time (start, load, settle, query, stop), each after every dirty page of the machine was written back (`sync`), so that none shares its load with the writeback of the files or of the engine before it.\n");
    if d.subtable_tags {
        let _ = writeln!(s, "Tags: Tidal, like TDengine, keeps a subtable's tags from its first point (TSBS's NULL tags then hold for the whole subtable, and the null-name points share one subtable). The peers' points carry those same subtable tags, so every engine holds the same logical data and the answers can be compared row for row; `--row-tags` gives the peers TSBS's per-point tags instead (about 1% of the points differ).\n");
    } else {
        let _ = writeln!(s, "Tags: the peers got TSBS's per-point tags (`--row-tags`): a point's NULL tag is its own, where Tidal keeps its subtable's tags, so tag-filtered and tag-grouped answers differ by construction.\n");
    }

    let _ = writeln!(s, "## Engines, versions and settings\n");
    let _ = writeln!(
        s,
        "| engine | version | settings | durability (what is fsynced before a write is acknowledged) |\n| --- | --- | --- | --- |"
    );
    for e in &r.engines {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} |",
            e.name, e.version, e.settings, e.durability
        );
    }
    let _ = writeln!(s);
    if !r.skipped.is_empty() {
        let _ = writeln!(s, "Skipped:\n");
        for (e, why) in &r.skipped {
            let _ = writeln!(s, "- **{e}**: {why}");
        }
        let _ = writeln!(s);
    }

    let figure = |s: &mut String,
                  title: &str,
                  unit: &str,
                  higher: bool,
                  get: &dyn Fn(&EngineResult) -> Option<f64>,
                  fmt: &dyn Fn(f64) -> String| {
        let _ = writeln!(s, "### {title}\n");
        let _ = writeln!(
            s,
            "| engine | {unit} | vs best peer |\n| --- | ---: | ---: |"
        );
        let peer_vals: Vec<Option<f64>> = peers.iter().map(|e| get(e)).collect();
        for e in &r.engines {
            let v = get(e);
            // A variant measures only some figures (ingest and size): no row for the others.
            if v.is_none() && e.variant_of.is_some() {
                continue;
            }
            let rt = if is_tidal(e) {
                ratio(v, &peer_vals, higher)
            } else {
                ratio(tidal.and_then(get), &[v], higher)
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} |",
                e.name,
                v.map(fmt).unwrap_or_else(|| "-".into()),
                if is_tidal(e) {
                    rt
                } else {
                    format!("(Tidal {rt})")
                }
            );
        }
        let _ = writeln!(s);
    };

    let _ = writeln!(s, "## Ingest\n");
    let _ = writeln!(s, "Rows/s = points acknowledged / wall time from the first write to the last acknowledgement. CPU = user + system seconds of the server processes (and their children) during the load, read from /proc as ../shared/peers/stats.sh does, per million rows. Memory = the highest summed RSS of the server processes, sampled every 0.5 s over load, settle and queries.\n");
    if let Some(e) = load_row {
        let _ = writeln!(s, "\"{}\" is TSBS's loader workflow: `tidal load` reads the TDengine command stream and writes through the client library, in its own process (its CPU is not counted as server CPU, as no peer's loader is). The issue's target is a load rate of at least half the loader's own parse-only rate (`--dry-run`: the same file, workers and row blocks, nothing sent).\n", e.name);
    }
    if let Some(e) = lp_row {
        let _ = writeln!(s, "Each way into Tidal loads a fresh cluster with the same database; only the client library's (\"tidal\") then answers the queries. \"{}\" is loaded through the InfluxDB line protocol over HTTP (the very file and loader of the InfluxDB row, written schemaless; its server CPU and memory include the `tidal local` process that parses the requests, as InfluxDB's include its own parsing). After that load every STABLE's `COUNT(*)` was checked against the distinct points sent. Its ratios compare it with the best peer as Tidal's do.\n", e.name);
    }
    for e in &r.engines {
        if let Some(i) = &e.ingest {
            let _ = writeln!(
                s,
                "- {}: {} rows in {:.1} s via {}",
                e.name, i.rows, i.seconds, i.method
            );
        }
    }
    let _ = writeln!(s);
    figure(
        &mut s,
        "Ingest rate",
        "rows/s",
        true,
        &|e| e.ingest.as_ref().map(|i| i.rows_per_s),
        &|v| format!("{v:.0}"),
    );
    if let (Some(e), Some(parse)) = (load_row, load_row.and_then(|e| e.parse_only_rows_per_s)) {
        if let Some(i) = &e.ingest {
            let _ = writeln!(s, "### `tidal load` against its parse-only rate\n");
            let _ = writeln!(
                s,
                "| parse-only (`--dry-run`) rows/s | load rows/s | load / parse-only | target |"
            );
            let _ = writeln!(s, "| ---: | ---: | ---: | ---: |");
            let _ = writeln!(
                s,
                "| {parse:.0} | {:.0} | {:.2}× | ≥ 0.50× |\n",
                i.rows_per_s,
                i.rows_per_s / parse.max(1e-9)
            );
        }
    }
    figure(
        &mut s,
        "Server CPU per million rows ingested",
        "CPU s / M rows",
        false,
        &|e| e.ingest.as_ref().map(|i| i.cpu_s_per_million_rows),
        &|v| format!("{v:.2}"),
    );
    let flushed: Vec<(&EngineResult, &Flush, &Ingest)> = r
        .engines
        .iter()
        .filter_map(|e| Some((e, e.flush.as_ref()?, e.ingest.as_ref()?)))
        .collect();
    if !flushed.is_empty() {
        let _ = writeln!(
            s,
            "### Tidal: the flush after the load
"
        );
        let _ = writeln!(s, "A Tidal load ends when the last write is acknowledged: its rows are then in the WAL (fsynced) and in the vnodes' memtables, and only the memtables that reached `BUFFER` during the load were encoded into column files. The rest is encoded by the flush that follows, timed here as the `FLUSH DATABASE` of the settle step (server CPU, as above). A peer that encodes as it loads (ClickHouse's parts, VictoriaMetrics) has that work in its ingest CPU; a sustained feed pays both, so \"ingest + flush\" is the figure to set beside the peers' CPU.\n");
        let _ = writeln!(
            s,
            "| way in | flush s | flush CPU s / M rows | ingest + flush CPU s / M rows |"
        );
        let _ = writeln!(s, "| --- | ---: | ---: | ---: |");
        for (e, f, i) in &flushed {
            let _ = writeln!(
                s,
                "| {} | {:.1} | {:.2} | {:.2} |",
                e.name,
                f.seconds,
                f.cpu_s_per_million_rows,
                i.cpu_s_per_million_rows + f.cpu_s_per_million_rows
            );
        }
        let _ = writeln!(s);
    }
    figure(
        &mut s,
        "Peak server memory",
        "peak RSS",
        false,
        &|e| e.peak_rss_bytes.map(|b| b as f64),
        &|v| human_bytes(v as u64),
    );

    let _ = writeln!(s, "## Bytes on disk\n");
    let _ = writeln!(s, "After settling: Tidal `FLUSH DATABASE` + `COMPACT DATABASE`{}, then every file under its data folder (mnode, WAL, data files); the peers through ../shared/peers/size.sh (InfluxDB: WAL empty and TSM set unchanged for 75 s; ClickHouse: `OPTIMIZE ... FINAL`; VictoriaMetrics: force flush + merge; PostgreSQL: `CHECKPOINT`, heap + indexes, WAL not counted). Allocated bytes (`du -B1`).\n", if lp_row.is_some() || load_row.is_some() { " (after each of its loads)" } else { "" });
    figure(
        &mut s,
        "On-disk size",
        "bytes",
        false,
        &|e| e.disk_bytes.map(|b| b as f64),
        &|v| format!("{} ({})", v as u64, human_bytes(v as u64)),
    );
    for e in &r.engines {
        if !e.disk_detail.is_empty() {
            let _ = writeln!(s, "- {}: {}", e.name, e.disk_detail);
        }
    }
    let _ = writeln!(s);

    let _ = writeln!(s, "## Query latency\n");
    let _ = writeln!(s, "Each of the 13 IoT query types, on the settled data: **cold** is the first run of the type (parameters of query 0; no cache dropped, but that query's data has not been read by a query before), **warm** the next {} runs with different random parameters (TSBS's draws; {} for the four last-point types last-loc, single-last-loc, low-fuel and high-load, whose sub-millisecond times need more samples for stable percentiles). Client-observed wall time in ms: Tidal through the client library (as TDengine's native client, it plans a query whose results it gathers itself and sends the fragments straight to the data nodes, `client/src/query.rs`, as fragment frames on plain TCP, `client/src/FRAMES.md`; the catalog over gRPC), InfluxDB and ClickHouse over HTTP, PostgreSQL as `psql`'s `\\timing` in one session per type. \"-\" = not run; \"n/s\" = the engine's dialect cannot express the type; \"err\" = it failed (see below).\n", r.queries_per_type, last_point_warm_runs(r));
    let names: Vec<String> = tidal_tsbs::QueryType::all()
        .iter()
        .map(|x| x.name().to_string())
        .collect();
    let qengines: Vec<&EngineResult> = r.engines.iter().filter(|e| !e.queries.is_empty()).collect();
    let cell = |f: Option<&QueryFigures>, get: &dyn Fn(&QueryFigures) -> Option<f64>| match f {
        None => "-".to_string(),
        Some(x) if !x.supported => "n/s".into(),
        Some(x) if x.error.is_some() => "err".into(),
        Some(x) => ms(get(x)),
    };
    let table = |s: &mut String, title: &str, get: &dyn Fn(&QueryFigures) -> Option<f64>| {
        let _ = writeln!(s, "### {title}\n");
        let _ = write!(s, "| query |");
        for e in &qengines {
            let _ = write!(s, " {} |", e.name);
        }
        let _ = writeln!(s, " Tidal vs best peer |");
        let _ = write!(s, "| --- |");
        for _ in &qengines {
            let _ = write!(s, " ---: |");
        }
        let _ = writeln!(s, " ---: |");
        for n in &names {
            let _ = write!(s, "| {n} |");
            for e in &qengines {
                let _ = write!(s, " {} |", cell(q(e, n), get));
            }
            let ok = |f: Option<&QueryFigures>| {
                f.filter(|x| x.supported && x.error.is_none()).and_then(get)
            };
            let t = tidal.and_then(|e| ok(q(e, n)));
            let p: Vec<Option<f64>> = peers.iter().map(|e| ok(q(e, n))).collect();
            let _ = writeln!(s, " {} |", ratio(t, &p, false));
        }
        let _ = writeln!(s);
    };
    table(&mut s, "Warm p50 (ms)", &|x| x.p50_ms);
    table(&mut s, "Warm mean (ms)", &|x| x.mean_ms);
    table(&mut s, "Warm p95 (ms)", &|x| x.p95_ms);
    table(&mut s, "Cold, first run (ms)", &|x| x.cold_ms);
    figure(
        &mut s,
        "Server CPU over all query runs (every type, cold + warm; fewer types ran on ClickHouse)",
        "CPU s",
        false,
        &|e| e.query_cpu_s,
        &|v| format!("{v:.1}"),
    );
    let mut errors = Vec::new();
    for e in &r.engines {
        for x in &e.queries {
            if let Some(err) = &x.error {
                let short: String = err.chars().take(300).collect();
                errors.push(format!(
                    "- {} {}: {}",
                    e.name,
                    x.query,
                    short.replace('\n', " ")
                ));
            }
        }
    }
    if !errors.is_empty() {
        let _ = writeln!(s, "Errors:\n\n{}\n", errors.join("\n"));
    }
    let _ = writeln!(s, "Not supported: ClickHouse 18.16 has no window functions, so the ClickHouse forms of avg-daily-driving-session and breakdown-frequency (`lagInFrame ... OVER`) cannot run there; VictoriaMetrics is measured for ingest and size only (PromQL/MetricsQL cannot express these queries).\n");

    let _ = writeln!(s, "## Do the engines agree?\n");
    let _ = writeln!(s, "The answers of query 0 of each type (the cold run, same parameters everywhere), normalised (timestamps to epoch ms, numbers to 6 significant digits, rows sorted), compared with Tidal's. PostgreSQL and ClickHouse run forms written to compute what the TDengine forms compute (Tidal partitions by subtable where they group by `name`, which is the same grouping). InfluxDB is compared on avg-vs-projected-fuel-consumption only: TSBS's InfluxQL forms compute something else for the other types (last-loc returns the first point, etc.).{}\n", if r.data.subtable_tags { "" } else { " With `--row-tags` the peers' tags are per point, so tag-filtered answers differ by construction." });
    if r.checks.is_empty() {
        let _ = writeln!(s, "No comparable answers (no peer ran).\n");
    } else {
        let _ = writeln!(s, "| query | result |\n| --- | --- |");
        for c in &r.checks {
            let parts: Vec<String> = c
                .engines
                .iter()
                .map(|(e, ok)| format!("{e} {}", if *ok { "agrees" } else { "**differs**" }))
                .collect();
            let peers = match c.peers_agree {
                Some(true) => "; the differing peers agree with one another",
                Some(false) => "; the differing peers also differ from one another",
                None => "",
            };
            let _ = writeln!(s, "| {} | {}{peers} |", c.query, parts.join(", "));
        }
        let _ = writeln!(s);
        let notes: Vec<String> = r
            .checks
            .iter()
            .flat_map(|c| c.notes.iter().map(move |n| format!("- {}: {n}", c.query)))
            .collect();
        if !notes.is_empty() {
            let _ = writeln!(s, "Differences:\n\n{}\n", notes.join("\n"));
            let _ = writeln!(s, "A known cause: Tidal (like TDengine) keeps one row per (subtable, timestamp) and InfluxDB one per (series, timestamp), the later write winning. Null-name points of different trucks all go to the shared null-name subtable, so two of them with the same timestamp are stored once there, where ClickHouse and PostgreSQL keep both rows; a query that includes the null-name rows (no `name IS NOT NULL` filter) can differ by that. Which of the two wins depends on the order concurrent batches arrive in, so Tidal and InfluxDB can also differ from each other in the last digits.\n");
        }
    }
    if !r.unchecked.is_empty() {
        let _ = writeln!(
            s,
            "Not checked (no comparable pair of answers): {}.\n",
            r.unchecked.join(", ")
        );
    }

    if !r.charts.is_empty() {
        let _ = writeln!(s, "## Charts\n");
        for c in &r.charts {
            let _ = writeln!(s, "![{c}]({chart_dir}/{c})\n");
        }
    }
    if let Some(text) = &r.lastrow_report {
        let _ = writeln!(
            s,
            "## Last-point queries at 1,000 to 1,000,000 trucks\n\nFrom [{chart_dir}/lastrow.md]({chart_dir}/lastrow.md) (`tidal bench lastrow`, its own run and command below), included here as it was when this report was written.\n"
        );
        for line in text.lines() {
            if line.starts_with("# ") {
                // its title: the section heading above stands for it
                continue;
            }
            // Its links are relative to the charts' folder, one level below this report.
            let line = line.replace("](../", "](");
            if line.starts_with('#') {
                let _ = writeln!(s, "#{line}");
            } else {
                let _ = writeln!(s, "{line}");
            }
        }
        let _ = writeln!(s);
    }
    if !r.other_reports.is_empty() {
        let _ = writeln!(s, "## Other benchmarks\n");
        for f in &r.other_reports {
            let _ = writeln!(s, "- [{chart_dir}/{f}]({chart_dir}/{f})");
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(s, "## Notes\n");
    for e in &r.engines {
        for n in &e.notes {
            let _ = writeln!(s, "- {}: {n}", e.name);
        }
    }
    let _ = writeln!(s, "- Nothing is pinned to a core; the load generator shares the machine with the server under test. Fairer figures pin the server and the client apart (see ../shared/peers/README.md, \"Fair settings\").");
    s
}

/// The machine's load over the run: always given, with a warning when the 1-minute load
/// average was already at 1 or more at the start (another job, or the previous benchmark of
/// a chain, still running), which slows every engine.
fn load_caveat(start: &str, end: &str) -> String {
    let first = |l: &str| {
        l.split_whitespace()
            .next()
            .and_then(|x| x.parse::<f64>().ok())
    };
    match first(start) {
        Some(l) if l >= 1.0 => format!("**Caveat: the machine was not idle at the start** (load average {start} at the start, {end} at the end, over 1, 5 and 15 minutes). Every engine ran under the same conditions, so ratios between engines are more telling than absolute numbers."),
        _ => format!("Load average {start} at the start, {end} at the end (over 1, 5 and 15 minutes; the run itself is most of it)."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_read_as_tidal_better_above_one() {
        assert_eq!(
            ratio(Some(200.0), &[Some(100.0), Some(50.0)], true),
            "2.00×"
        );
        assert_eq!(ratio(Some(50.0), &[Some(100.0), None], false), "2.00×");
        assert_eq!(ratio(None, &[Some(1.0)], false), "-");
        assert_eq!(ratio(Some(1.0), &[None], false), "-");
    }

    fn engine(name: &str, rows_per_s: f64, variant_of: Option<&str>) -> EngineResult {
        EngineResult {
            name: name.into(),
            variant_of: variant_of.map(String::from),
            ingest: Some(Ingest {
                rows: 1000,
                seconds: 1.0,
                rows_per_s,
                cpu_s: 1.0,
                cpu_s_per_million_rows: 1000.0,
                method: "m".into(),
            }),
            disk_bytes: Some(1000),
            peak_rss_bytes: Some(1000),
            ..EngineResult::default()
        }
    }

    /// The line-protocol row is compared with the best peer as Tidal is, never counted as a
    /// peer itself, and left out of the figures it has none of.
    #[test]
    fn variant_rows_compare_with_the_peers() {
        let mut tidal = engine("tidal", 400.0, None);
        tidal.query_cpu_s = Some(3.0);
        let mut influx = engine("influxdb", 100.0, None);
        influx.query_cpu_s = Some(6.0);
        let r = Results {
            engines: vec![
                tidal,
                engine("tidal (line protocol)", 200.0, Some("tidal")),
                influx,
            ],
            ..Results::default()
        };
        let md = markdown(&r, "bench");
        // Ingest rate: Tidal 4× the only peer, the variant 2×; InfluxDB's ratio is against
        // Tidal's client-library figure, not the variant's.
        assert!(md.contains("| tidal | 400 | 4.00× |"), "{md}");
        assert!(
            md.contains("| tidal (line protocol) | 200 | 2.00× |"),
            "{md}"
        );
        assert!(md.contains("| influxdb | 100 | (Tidal 4.00×) |"), "{md}");
        assert!(
            md.contains("as \"tidal (line protocol)\", the InfluxDB file"),
            "{md}"
        );
        // No query CPU for the variant: no row in that table.
        let qcpu = md.split("Server CPU over all query runs").nth(1).unwrap();
        let qcpu = qcpu.split("\n\n").nth(1).unwrap();
        assert!(!qcpu.contains("line protocol"), "{qcpu}");
        assert!(qcpu.contains("| tidal | 3.0 | 2.00× |"), "{qcpu}");
    }

    /// Each Tidal way in with a measured flush gets its row, with ingest + flush CPU; no
    /// table without any.
    #[test]
    fn the_flush_after_a_load_is_reported_beside_its_ingest_cpu() {
        let mut tidal = engine("tidal", 400.0, None);
        tidal.flush = Some(Flush {
            seconds: 2.5,
            cpu_s_per_million_rows: 750.0,
        });
        let r = Results {
            engines: vec![tidal, engine("influxdb", 100.0, None)],
            ..Results::default()
        };
        let md = markdown(&r, "bench");
        assert!(md.contains("### Tidal: the flush after the load"), "{md}");
        assert!(md.contains("| tidal | 2.5 | 750.00 | 1750.00 |"), "{md}");
        assert!(!md.contains("| influxdb | 2.5"), "{md}");
        let plain = Results {
            engines: vec![engine("tidal", 400.0, None)],
            ..Results::default()
        };
        assert!(!markdown(&plain, "bench").contains("flush after the load"));
    }

    /// The last-point report is shown in full under its own section, headings one level down.
    #[test]
    fn lastrow_report_is_included() {
        let r = Results {
            lastrow_report: Some("# Last-point queries\n\n## 1000 trucks\n\n| a |\n".into()),
            ..Results::default()
        };
        let md = markdown(&r, "bench");
        assert!(
            md.contains("## Last-point queries at 1,000 to 1,000,000 trucks"),
            "{md}"
        );
        assert!(!md.contains("\n## Last-point queries\n"), "{md}");
        assert!(md.contains("\n### 1000 trucks\n\n| a |\n"), "{md}");
        assert!(!markdown(&Results::default(), "bench").contains("Last-point"));
    }

    #[test]
    fn the_load_is_given_and_a_busy_start_is_a_caveat() {
        let idle = load_caveat("0.12 0.30 0.50", "1.80 1.10 0.70");
        assert!(
            idle.starts_with("Load average 0.12 0.30 0.50 at the start"),
            "{idle}"
        );
        assert!(!idle.contains("Caveat"), "{idle}");
        let busy = load_caveat("1.75 1.77 1.65", "2.13 1.57 1.62");
        assert!(
            busy.contains("Caveat") && busy.contains("1.75 1.77 1.65"),
            "{busy}"
        );
        assert!(!load_caveat("", "").contains("Caveat"));
    }

    /// results.json files written before the variant existed still load.
    #[test]
    fn old_results_files_load() {
        let old = r#"{"format":1,"started_at":"","finished_at":"","command":"c","small":true,
            "machine":{"cpu":"","cores":1,"ram_bytes":0,"kernel":"","os":"","load_start":"","load_end":""},
            "data":{"scale":1,"start":"","end":"","seed":1,"points":1,"readings":1,"diagnostics":0,
                "rows_per_truck_per_day":[1.0,0.0],"generate_seconds":0.0,"subtable_tags":true},
            "queries_per_type":1,
            "engines":[{"name":"tidal","version":"0","settings":"","durability":"","ingest":null,
                "disk_bytes":null,"disk_detail":"","peak_rss_bytes":null,"query_cpu_s":null,
                "queries":[],"notes":[]}],
            "skipped":[],"checks":[],"unchecked":[],"charts":[]}"#;
        let r: Results = serde_json::from_str(old).unwrap();
        assert_eq!(r.engines[0].variant_of, None);
        assert!(markdown(&r, "bench").contains("## Ingest"));
    }
}
