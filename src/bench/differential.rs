//! `tidal bench differential`: Tidal against an independent engine on the same data.
//!
//! The TSBS IoT data set goes into a local Tidal cluster (through the client library, then
//! flushed and compacted into data files, as the benchmark queries it) and into
//! DuckDB (PostgreSQL-dialect SQL, run by Python's `duckdb` module in a child process, loaded
//! from the same generator's PostgreSQL CSV). Then, on both:
//! - every one of the 13 IoT query types, `--queries` times with different parameters, in
//!   Tidal's TDengine form and in the PostgreSQL form;
//! - `--random` randomly generated aggregate and window queries (aggregates, filters on time,
//!   tags and fields, GROUP BY / PARTITION BY, INTERVAL windows, HAVING, arithmetic on
//!   aggregates, a nested level), each written in both dialects by the generator here.
//!
//! Answers are compared as multisets of rows, numbers within a relative 1e-4 of each other
//! (both sides are rounded to 6 significant digits first). Any disagreement is printed with
//! both statements and a differing row, and the command exits with status 1.

use super::answers::Answer;
use super::generate::write_files;
use super::tidal::TidalEngine;
use super::DataArgs;
use crate::server::BoxError;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitCode, Stdio};
use tidal_tsbs::format::sql::{columns, ddl, Peer as SqlPeer};
use tidal_tsbs::format::tidal::TableWriteBatches;
use tidal_tsbs::rng::Rng;
use tidal_tsbs::{Config, Generator, Measurement, QueryParams, QueryType};

#[derive(clap::Args)]
pub struct DiffArgs {
    #[command(flatten)]
    data: DataArgs,
    /// Parameter draws per IoT query type.
    #[arg(long, default_value_t = 3)]
    queries: u64,
    /// Randomly generated aggregate/window queries.
    #[arg(long, default_value_t = 60)]
    random: u64,
    /// Working folder (default: a temporary folder, removed at the end).
    #[arg(long)]
    work: Option<PathBuf>,
    /// The Python interpreter that has the `duckdb` module.
    #[arg(long, default_value = "python3")]
    python: String,
}

/// The DuckDB side: a Python child that reads one JSON request per line and answers one JSON
/// line, so the data is loaded once and each query costs no process start.
struct DuckDb {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

const DUCKDB_WORKER: &str = r#"
import sys, json, datetime
try:
    import duckdb
except ImportError as e:
    print(json.dumps({"error": "python module duckdb is missing (pip install duckdb): %s" % e}), flush=True)
    sys.exit(0)
con = duckdb.connect()
con.execute("SET TimeZone='UTC'")
print(json.dumps({"ok": duckdb.__version__}), flush=True)
def cell(v):
    if isinstance(v, datetime.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        return v.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    if isinstance(v, (int, float, str)) or v is None:
        return v
    return str(v)
for line in sys.stdin:
    req = json.loads(line)
    try:
        cur = con.execute(req["sql"])
        if req.get("rows"):
            out = {"rows": [[cell(v) for v in r] for r in cur.fetchall()]}
        else:
            out = {"ok": True}
    except Exception as e:
        out = {"error": str(e).replace("\n", " ")}
    print(json.dumps(out), flush=True)
"#;

impl DuckDb {
    fn start(python: &str) -> Result<(DuckDb, String), String> {
        let mut child = Command::new(python)
            .arg("-c")
            .arg(DUCKDB_WORKER)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("starting {python}: {e}"))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("the DuckDB worker has no stdin/stdout".into());
        };
        let mut d = DuckDb {
            child,
            stdin,
            stdout: BufReader::new(stdout),
        };
        let hello = d.read()?;
        if let Some(e) = hello.get("error").and_then(|e| e.as_str()) {
            return Err(e.to_string());
        }
        let version = hello
            .get("ok")
            .and_then(|v| v.as_str())
            .unwrap_or("?")
            .to_string();
        Ok((d, version))
    }

    fn read(&mut self) -> Result<serde_json::Value, String> {
        let mut line = String::new();
        match self.stdout.read_line(&mut line) {
            Ok(0) => Err("the DuckDB worker exited".into()),
            Ok(_) => serde_json::from_str(&line).map_err(|e| format!("DuckDB worker: {e}")),
            Err(e) => Err(format!("reading from the DuckDB worker: {e}")),
        }
    }

    fn call(&mut self, sql: &str, rows: bool) -> Result<serde_json::Value, String> {
        let req = serde_json::json!({ "sql": sql, "rows": rows });
        writeln!(self.stdin, "{req}").map_err(|e| format!("writing to the DuckDB worker: {e}"))?;
        self.stdin
            .flush()
            .map_err(|e| format!("writing to the DuckDB worker: {e}"))?;
        let v = self.read()?;
        match v.get("error").and_then(|e| e.as_str()) {
            Some(e) => Err(format!("DuckDB: {e}")),
            None => Ok(v),
        }
    }

    fn exec(&mut self, sql: &str) -> Result<(), String> {
        self.call(sql, false).map(|_| ())
    }

    fn query(&mut self, sql: &str) -> Result<Answer, String> {
        let v = self.call(sql, true)?;
        let rows = v
            .get("rows")
            .and_then(|r| r.as_array())
            .ok_or("DuckDB answered without rows")?;
        let rows: Vec<Vec<serde_json::Value>> = rows
            .iter()
            .map(|r| r.as_array().cloned().unwrap_or_default())
            .collect();
        Ok(Answer::from_json_rows(&rows))
    }

    /// Tables as PostgreSQL's, loaded from the CSV files.
    fn load(&mut self, files: &[PathBuf; 2]) -> Result<(), String> {
        for (m, f) in Measurement::ALL.iter().zip(files) {
            let create = ddl(SqlPeer::Postgres, *m)
                .into_iter()
                .next()
                .ok_or("no DDL")?;
            let table = m.name();
            // Loaded into `<table>_raw`, then kept as Tidal keeps it: one row per subtable and
            // timestamp, the last written winning. Subtables are named by truck, and the points
            // of null-name trucks share one subtable (as TSBS's TDengine loader names them), so
            // two of them at the same timestamp are one row.
            self.exec(&create.replacen(table, &format!("{table}_raw"), 1))?;
            self.exec(&format!(
                "COPY {table}_raw ({}) FROM '{}' (FORMAT csv)",
                columns(*m).join(", "),
                f.display().to_string().replace('\'', "''")
            ))?;
            self.exec(&format!(
                "CREATE TABLE {table} AS SELECT * EXCLUDE (rid, rn) FROM (SELECT *, row_number() OVER (PARTITION BY name, time ORDER BY rid DESC) AS rn FROM (SELECT *, rowid AS rid FROM {table}_raw)) WHERE rn = 1"
            ))?;
            self.exec(&format!("DROP TABLE {table}_raw"))?;
        }
        Ok(())
    }
}

impl Drop for DuckDb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether two normalised answers hold the same rows (in any order), numbers within a
/// relative 1e-4 (or an absolute 1e-12). On a difference: a row of one that the other lacks.
fn same_rows(want: &Answer, got: &Answer) -> Result<(), String> {
    if want.rows.len() != got.rows.len() {
        return Err(format!(
            "{} rows vs {} rows{}",
            want.rows.len(),
            got.rows.len(),
            match (want.rows.first(), got.rows.first()) {
                (Some(w), Some(g)) =>
                    format!("; first rows [{}] vs [{}]", w.join(", "), g.join(", ")),
                (Some(w), None) => format!("; Tidal's first row [{}]", w.join(", ")),
                (None, Some(g)) => format!("; DuckDB's first row [{}]", g.join(", ")),
                (None, None) => String::new(),
            }
        ));
    }
    // Exact matches first (a multiset), then the rest by tolerance.
    let mut pool: std::collections::HashMap<&Vec<String>, usize> = std::collections::HashMap::new();
    for r in &got.rows {
        *pool.entry(r).or_default() += 1;
    }
    let mut rest_want = Vec::new();
    for r in &want.rows {
        match pool.get_mut(r) {
            Some(n) if *n > 0 => *n -= 1,
            _ => rest_want.push(r),
        }
    }
    let mut rest_got: Vec<&Vec<String>> = got
        .rows
        .iter()
        .filter(|r| {
            let n = pool.get_mut(*r);
            match n {
                Some(n) if *n > 0 => {
                    *n -= 1;
                    true
                }
                _ => false,
            }
        })
        .collect();
    for w in rest_want {
        match rest_got.iter().position(|g| close_rows(w, g)) {
            Some(i) => {
                rest_got.swap_remove(i);
            }
            None => {
                return Err(format!(
                    "Tidal's row [{}] has no match in DuckDB's answer{}",
                    w.join(", "),
                    rest_got
                        .first()
                        .map(|g| format!(" (e.g. DuckDB [{}])", g.join(", ")))
                        .unwrap_or_default()
                ))
            }
        }
    }
    Ok(())
}

fn close_rows(a: &[String], b: &[String]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x == y
                || match (x.parse::<f64>(), y.parse::<f64>()) {
                    // or both within 1e-12 of zero: the data's values are O(1) to O(100),
                    // so a smaller difference is rounding (a STDDEV of values a bit apart)
                    (Ok(p), Ok(q)) => {
                        (p - q).abs() <= 1e-4 * p.abs().max(q.abs()) || (p - q).abs() <= 1e-12
                    }
                    _ => false,
                }
        })
}

/// One randomly generated query in both dialects.
struct RandomQuery {
    tidal: String,
    duckdb: String,
}

const READINGS_FIELDS: [&str; 7] = [
    "latitude",
    "longitude",
    "elevation",
    "velocity",
    "heading",
    "grade",
    "fuel_consumption",
];
const DIAG_FIELDS: [&str; 3] = ["fuel_state", "current_load", "status"];

fn pick<'a>(rng: &mut Rng, xs: &[&'a str]) -> &'a str {
    xs[rng.below(xs.len() as u64) as usize]
}

/// An aggregate over `f` in both dialects.
fn random_agg(rng: &mut Rng, f: &str) -> (String, String) {
    match rng.below(9) {
        8 => (
            format!("count(distinct {f})"),
            format!("count(DISTINCT {f})"),
        ),
        0 => ("count(*)".into(), "count(*)".into()),
        1 => (format!("count({f})"), format!("count({f})")),
        2 => (format!("sum({f})"), format!("sum({f})")),
        3 => (format!("avg({f})"), format!("avg({f})")),
        4 => (format!("min({f})"), format!("min({f})")),
        5 => (format!("max({f})"), format!("max({f})")),
        6 => (format!("spread({f})"), format!("(max({f}) - min({f}))")),
        _ => (format!("stddev({f})"), format!("stddev_pop({f})")),
    }
}

fn random_query(rng: &mut Rng, p: &QueryParams) -> RandomQuery {
    let (table, fields) = if rng.below(3) == 0 {
        ("diagnostics", &DIAG_FIELDS[..])
    } else {
        ("readings", &READINGS_FIELDS[..])
    };
    // Filters: a time range, a tag, a field.
    let mut t_where: Vec<String> = Vec::new();
    let mut d_where: Vec<String> = Vec::new();
    if rng.below(2) == 0 {
        let span = (p.end_ms - p.start_ms).max(1);
        let a = p.start_ms + rng.below(span as u64) as i64;
        let b = a + rng.below((p.end_ms - a).max(1) as u64) as i64;
        t_where.push(format!("ts >= {a} AND ts < {b}"));
        d_where.push(format!(
            "time >= '{}+00' AND time < '{}+00'",
            tidal_tsbs::time::sql_millis(a),
            tidal_tsbs::time::sql_millis(b)
        ));
    }
    if rng.below(3) == 0 {
        let fleet = pick(rng, &["East", "West", "North", "South", "Central"]);
        t_where.push(format!("fleet = '{fleet}'"));
        d_where.push(format!("fleet = '{fleet}'"));
    }
    if rng.below(3) == 0 {
        let f = pick(rng, fields);
        let k = rng.below(50);
        t_where.push(format!("{f} > {k}"));
        d_where.push(format!("{f} > {k}"));
    }
    let aggs: Vec<(String, String)> = (0..1 + rng.below(3))
        .map(|_| {
            let f = pick(rng, fields);
            let (t, d) = random_agg(rng, f);
            if rng.below(5) == 0 {
                (format!("{t} * 2 + 1"), format!("{d} * 2 + 1"))
            } else {
                (t, d)
            }
        })
        .collect();
    let t_aggs: Vec<&str> = aggs.iter().map(|a| a.0.as_str()).collect();
    let d_aggs: Vec<&str> = aggs.iter().map(|a| a.1.as_str()).collect();
    let wh = |w: &[String]| {
        if w.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", w.join(" AND "))
        }
    };
    let (tw, dw) = (wh(&t_where), wh(&d_where));
    match rng.below(6) {
        // Whole table.
        0 => RandomQuery {
            tidal: format!("SELECT {} FROM {table}{tw}", t_aggs.join(", ")),
            duckdb: format!("SELECT {} FROM {table}{dw}", d_aggs.join(", ")),
        },
        // GROUP BY tags, sometimes with HAVING.
        1 | 2 => {
            let keys = pick(rng, &["fleet", "model", "fleet, model", "driver", "name"]);
            let having = if rng.below(3) == 0 {
                let k = rng.below(20);
                (
                    format!(" HAVING count(*) > {k}"),
                    format!(" HAVING count(*) > {k}"),
                )
            } else {
                (String::new(), String::new())
            };
            RandomQuery {
                tidal: format!(
                    "SELECT {keys}, {} FROM {table}{tw} GROUP BY {keys}{}",
                    t_aggs.join(", "),
                    having.0
                ),
                duckdb: format!(
                    "SELECT {keys}, {} FROM {table}{dw} GROUP BY {keys}{}",
                    d_aggs.join(", "),
                    having.1
                ),
            }
        }
        // INTERVAL windows, optionally per partition.
        3 | 4 => {
            let (unit, secs) = match rng.below(4) {
                0 => ("10m", 600),
                1 => ("1h", 3600),
                2 => ("3h", 10_800),
                _ => ("1d", 86_400),
            };
            let part = rng.below(2) == 0;
            let bucket = format!("to_timestamp(floor(extract(epoch FROM time) / {secs}) * {secs})");
            if part {
                RandomQuery {
                    tidal: format!(
                        "SELECT _wstart, fleet, {} FROM {table}{tw} PARTITION BY fleet INTERVAL({unit})",
                        t_aggs.join(", ")
                    ),
                    duckdb: format!(
                        "SELECT {bucket} AS w, fleet, {} FROM {table}{dw} GROUP BY w, fleet",
                        d_aggs.join(", ")
                    ),
                }
            } else {
                RandomQuery {
                    tidal: format!(
                        "SELECT _wstart, {} FROM {table}{tw} INTERVAL({unit})",
                        t_aggs.join(", ")
                    ),
                    duckdb: format!(
                        "SELECT {bucket} AS w, {} FROM {table}{dw} GROUP BY w",
                        d_aggs.join(", ")
                    ),
                }
            }
        }
        // A nested level: per-truck aggregates, then over them.
        _ => {
            let f = pick(rng, fields);
            let k = rng.below(30);
            RandomQuery {
                tidal: format!(
                    "SELECT count(*), avg(m), max(m) FROM (SELECT name, avg({f}) AS m FROM {table}{tw} PARTITION BY name) WHERE m > {k}"
                ),
                duckdb: format!(
                    "SELECT count(*), avg(m), max(m) FROM (SELECT name, avg({f}) AS m FROM {table}{dw} GROUP BY name) AS t WHERE m > {k}"
                ),
            }
        }
    }
}

pub async fn run(args: DiffArgs) -> Result<ExitCode, BoxError> {
    let cfg = args.data.config()?;
    let (work, temp) = match &args.work {
        Some(w) => (w.clone(), false),
        None => (
            std::env::temp_dir().join(format!("tidal-differential-{}", std::process::id())),
            true,
        ),
    };
    std::fs::create_dir_all(&work).map_err(|e| format!("cannot create {}: {e}", work.display()))?;
    let r = differential(&args, &cfg, &work).await;
    if temp {
        let _ = std::fs::remove_dir_all(&work);
    }
    let failures = r?;
    if failures == 0 {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("{failures} disagreement(s)");
        Ok(ExitCode::from(1))
    }
}

async fn differential(args: &DiffArgs, cfg: &Config, work: &Path) -> Result<u64, BoxError> {
    eprintln!(
        "== data: {} trucks, {} .. {}",
        cfg.scale,
        tidal_tsbs::time::rfc3339_seconds(cfg.start_ms),
        tidal_tsbs::time::rfc3339_seconds(cfg.end_ms)
    );
    let files =
        tokio::task::block_in_place(|| write_files(cfg, work, false, false, false, true, true))?;
    let pg = files
        .postgres
        .clone()
        .ok_or("no PostgreSQL CSV was written")?;
    let (mut duck, version) = DuckDb::start(&args.python)?;
    tokio::task::block_in_place(|| duck.load(&pg))?;
    eprintln!("== DuckDB {version} loaded");

    let batches: Vec<_> = tokio::task::block_in_place(|| {
        Generator::new(cfg.clone())
            .map(|g| TableWriteBatches::new(g, super::tidal::BATCH_ROWS).collect::<Vec<_>>())
    })?;
    let engine = TidalEngine::start(&work.join("tidal")).await?;
    let r = compare_all(args, cfg, &engine, &mut duck, batches).await;
    engine.stop().await;
    r
}

async fn compare_all(
    args: &DiffArgs,
    cfg: &Config,
    engine: &TidalEngine,
    duck: &mut DuckDb,
    batches: Vec<Vec<tidal_common::TableWrite>>,
) -> Result<u64, BoxError> {
    engine.create().await?;
    let rows = engine.load(batches).await?;
    // Queried from its data files, as the benchmark queries it (and as a day's data mostly is):
    // the paths that read files, their block statistics and their newest-first searches.
    engine.settle().await?;
    eprintln!("== Tidal loaded {rows} rows (flushed and compacted)");
    let params = QueryParams::for_data(cfg);
    let mut failures = 0u64;
    let mut checked = 0u64;
    let mut report = |what: &str, tidal: &str, duckdb: &str, r: Result<(), String>| {
        checked += 1;
        if let Err(e) = r {
            failures += 1;
            eprintln!("DIFFERENT {what}:\n  tidal:  {tidal}\n  duckdb: {duckdb}\n  {e}");
        }
    };
    for q in QueryType::all() {
        for k in 0..args.queries.max(1) {
            let g = tidal_tsbs::queries::generate(*q, &params, k);
            let t = engine.query(&g.tidal).await;
            let d = tokio::task::block_in_place(|| duck.query(&g.postgres));
            let r = match (t, d) {
                (Ok(t), Ok(d)) => {
                    let t = super::answers::canonical_for("tidal", *q, &t);
                    let d = super::answers::canonical_for("postgres", *q, &d);
                    same_rows(&t, &d)
                }
                (Err(e), _) => Err(format!("Tidal failed: {e}")),
                (_, Err(e)) => Err(format!("DuckDB failed: {e}")),
            };
            report(&format!("{} #{k}", q.name()), &g.tidal, &g.postgres, r);
        }
    }
    let mut rng = Rng::new(cfg.seed ^ 0x5eed_d1ff);
    for k in 0..args.random {
        let q = random_query(&mut rng, &params);
        let t = engine.query(&q.tidal).await;
        let d = tokio::task::block_in_place(|| duck.query(&q.duckdb));
        let r = match (t, d) {
            (Ok(t), Ok(d)) => same_rows(&t, &d),
            (Err(e), _) => Err(format!("Tidal failed: {e}")),
            (_, Err(e)) => Err(format!("DuckDB failed: {e}")),
        };
        report(&format!("random #{k}"), &q.tidal, &q.duckdb, r);
    }
    eprintln!("== {checked} queries compared, {failures} disagreed");
    Ok(failures)
}
