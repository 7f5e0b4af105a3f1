//! The peer databases as benchmarked engines, driven through ../shared/peers (start.sh with
//! `--fresh`, stop.sh, size.sh) and their native bulk paths: InfluxDB and VictoriaMetrics take
//! line protocol over HTTP, ClickHouse CSV `INSERT`s over HTTP, PostgreSQL `COPY FROM STDIN`
//! through `psql`. Queries go over HTTP (InfluxQL, ClickHouse SQL) or through one `psql`
//! session per query type whose `\timing` lines give the latencies.
//!
//! Everything here is blocking; `bench run` calls it from `block_in_place`.

use super::answers::Answer;
use super::generate::DataFiles;
use super::http;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tidal_tsbs::format::sql::{columns, ddl, Peer as SqlPeer};
use tidal_tsbs::{Measurement, TAG_NAMES};

const HTTP_TIMEOUT: Duration = Duration::from_secs(600);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Influx,
    ClickHouse,
    Postgres,
    Victoria,
}

impl Kind {
    /// The name start.sh and the report use.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Influx => "influxdb",
            Kind::ClickHouse => "clickhouse",
            Kind::Postgres => "postgres",
            Kind::Victoria => "victoria",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        match s.trim() {
            "influxdb" | "influx" => Some(Kind::Influx),
            "clickhouse" => Some(Kind::ClickHouse),
            "postgres" | "postgresql" => Some(Kind::Postgres),
            "victoria" | "victoriametrics" => Some(Kind::Victoria),
            _ => None,
        }
    }

    fn package(self) -> &'static str {
        match self {
            Kind::Influx => "influxdb",
            Kind::ClickHouse => "clickhouse-server",
            Kind::Postgres => "postgresql-15",
            Kind::Victoria => "victoria-metrics",
        }
    }

    pub fn settings(self) -> &'static str {
        match self {
            Kind::Influx => "../shared/peers defaults: inmem index, cache-max-memory-size 1g, snapshot after 10 s cold, full compaction after 1 min cold, series limits off; line protocol (numeric tags as fields, as TSBS), 10,000 lines per request (TSBS's default batch), 4 requests in flight on keep-alive connections",
            Kind::ClickHouse => "max_threads 2, LZ4, mark cache 1 GiB; MergeTree `ORDER BY (ifNull(name, ''), time)`, `PARTITION BY toYYYYMM(time)`, `time DateTime('UTC')` (18.16 has no DateTime64; all points are on whole seconds), tags as Nullable(String)/Nullable(Float64); CSV, 250,000 rows per INSERT, 2 in flight on keep-alive connections",
            Kind::Postgres => "shared_buffers 2GB, work_mem 64MB, 2 parallel workers; wide tables, btree indexes (name, time DESC) and (fleet, time DESC) created before the load; one `COPY ... FROM STDIN (FORMAT csv)` per table, both tables at once",
            Kind::Victoria => "../shared/peers defaults (memory 60% of RAM, response cache off, 100y retention); line protocol, 10,000 lines per request (TSBS's default batch), 4 in flight on keep-alive connections; ms timestamps; ingest and size only",
        }
    }

    pub fn durability(self) -> &'static str {
        match self {
            Kind::Influx => "WAL fsynced on every write request (`wal-fsync-delay = 0s`)",
            Kind::ClickHouse => "none: each INSERT is written as a part without fsync (18.16)",
            Kind::Postgres => {
                "`fsync = on`, `synchronous_commit = on`: the WAL is fsynced when each COPY commits"
            }
            Kind::Victoria => "none: about 1 s buffered in memory, no fsync per request",
        }
    }

    /// Whether the benchmark runs the IoT queries on this peer.
    pub fn queries(self) -> bool {
        self != Kind::Victoria
    }
}

/// Parses a `--peers` list (comma-separated names, `none` for none) without repeats.
pub fn parse_list(s: &str) -> Result<Vec<Kind>, String> {
    let mut kinds = Vec::new();
    for p in s
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty() && *p != "none")
    {
        let k = Kind::parse(p).ok_or_else(|| {
            format!("--peers: unknown peer '{p}'; expected influxdb, clickhouse, postgres, victoria or none")
        })?;
        if !kinds.contains(&k) {
            kinds.push(k);
        }
    }
    Ok(kinds)
}

/// Where ../shared/peers is: `TIDAL_PEERS_DIR`, else a `shared/peers` next to an ancestor of
/// the working directory or of the binary.
pub fn scripts_dir() -> Option<PathBuf> {
    if let Ok(d) = std::env::var("TIDAL_PEERS_DIR") {
        return Some(PathBuf::from(d));
    }
    let mut starts = Vec::new();
    if let Ok(c) = std::env::current_dir() {
        starts.push(c);
    }
    if let Ok(e) = std::env::current_exe() {
        starts.push(e);
    }
    for s in starts {
        for a in s.ancestors() {
            let p = a.join("shared/peers/start.sh");
            if p.exists() {
                return Some(a.join("shared/peers"));
            }
        }
    }
    None
}

fn tail(text: &str, lines: usize) -> String {
    let v: Vec<&str> = text.lines().collect();
    v[v.len().saturating_sub(lines)..].join(" | ")
}

/// A started peer.
pub struct PeerServer {
    pub kind: Kind,
    scripts: PathBuf,
    root: PathBuf,
    pub pid: u32,
}

impl PeerServer {
    /// `start.sh NAME ROOT --fresh`: installs on first use, waits until the server answers.
    pub fn start(kind: Kind, scripts: &Path, root: &Path) -> Result<PeerServer, String> {
        let out = Command::new("bash")
            .arg(scripts.join("start.sh"))
            .arg(kind.name())
            .arg(root)
            .arg("--fresh")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("running {}/start.sh: {e}", scripts.display()))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            return Err(format!(
                "start.sh {} failed ({}): {}",
                kind.name(),
                out.status,
                tail(&String::from_utf8_lossy(&out.stderr), 4)
            ));
        }
        let pid = stdout
            .split_whitespace()
            .find_map(|w| w.strip_prefix("pid=")?.parse::<u32>().ok())
            .ok_or_else(|| format!("start.sh {} printed no pid: {stdout}", kind.name()))?;
        Ok(PeerServer {
            kind,
            scripts: scripts.to_path_buf(),
            root: root.to_path_buf(),
            pid,
        })
    }

    pub fn stop(&self) -> Result<(), String> {
        let out = Command::new("bash")
            .arg(self.scripts.join("stop.sh"))
            .arg(self.kind.name())
            .arg(&self.root)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("running stop.sh: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "stop.sh {} failed: {}",
                self.kind.name(),
                tail(&String::from_utf8_lossy(&out.stderr), 3)
            ))
        }
    }

    /// size.sh: settles, then the allocated bytes (`du_bytes`) and the script's whole line.
    pub fn size(&self) -> Result<(u64, String), String> {
        let out = Command::new("bash")
            .arg(self.scripts.join("size.sh"))
            .arg(self.kind.name())
            .arg(&self.root)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("running size.sh: {e}"))?;
        let line = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let bytes = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("du_bytes=")?.parse::<u64>().ok())
            .ok_or_else(|| {
                format!(
                    "size.sh {} gave no du_bytes: {line} {}",
                    self.kind.name(),
                    tail(&String::from_utf8_lossy(&out.stderr), 3)
                )
            })?;
        Ok((bytes, line))
    }

    pub fn version(&self) -> String {
        Command::new("dpkg-query")
            .args(["-W", "-f=${Version}", self.kind.package()])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_else(|| "unknown".into())
    }

    /// Creates the tables (the line-protocol peers need none).
    pub fn prepare(&self) -> Result<(), String> {
        match self.kind {
            Kind::ClickHouse => {
                for m in Measurement::ALL {
                    ch_exec(&clickhouse18_ddl(m))?;
                }
                Ok(())
            }
            Kind::Postgres => {
                for m in Measurement::ALL {
                    for stmt in ddl(SqlPeer::Postgres, m) {
                        psql_exec(&stmt)?;
                    }
                }
                Ok(())
            }
            Kind::Influx | Kind::Victoria => Ok(()),
        }
    }

    /// Loads the data set; returns the rows sent and a description of the method.
    pub fn load(&self, files: &DataFiles) -> Result<(u64, String), String> {
        let missing = || format!("no input file was generated for {}", self.kind.name());
        match self.kind {
            Kind::Influx | Kind::Victoria => {
                let f = files.influx.as_ref().ok_or_else(missing)?;
                let path = if self.kind == Kind::Influx {
                    "/write?db=bench&precision=ns"
                } else {
                    // No db parameter: VictoriaMetrics would add it as a label.
                    "/write?precision=ns"
                };
                let addr = if self.kind == Kind::Influx {
                    "127.0.0.1:18086"
                } else {
                    "127.0.0.1:18428"
                };
                let rows = post_line_protocol(f, addr, path, self.kind.name())?;
                Ok((rows, format!("line protocol over HTTP, {}", lp_batching())))
            }
            Kind::ClickHouse => {
                let [r, d] = files.clickhouse.as_ref().ok_or_else(missing)?;
                let mut rows = 0;
                for (m, f) in [(Measurement::Readings, r), (Measurement::Diagnostics, d)] {
                    let q = http::encode(&format!("INSERT INTO bench.{} FORMAT CSV", m.name()));
                    let path = format!("/?query={q}");
                    let conn = || http::Conn::new("127.0.0.1:18123", HTTP_TIMEOUT);
                    rows += post_chunks(f, 250_000, 2, conn, |c, body| {
                        // Not replayable: an INSERT sent twice would add its rows twice.
                        let r = c.request("POST", &path, body, false)?;
                        if r.ok() {
                            Ok(())
                        } else {
                            Err(format!(
                                "clickhouse insert: HTTP {}: {}",
                                r.status,
                                r.text()
                            ))
                        }
                    })?;
                }
                Ok((
                    rows,
                    "CSV INSERTs over HTTP, 250,000 rows each, 2 in flight (keep-alive connections)".into(),
                ))
            }
            Kind::Postgres => {
                let [r, d] = files.postgres.as_ref().ok_or_else(missing)?;
                let spawn = |m: Measurement, f: &PathBuf| -> Result<std::process::Child, String> {
                    let file = std::fs::File::open(f)
                        .map_err(|e| format!("opening {}: {e}", f.display()))?;
                    let sql = format!(
                        "COPY {} ({}) FROM STDIN WITH (FORMAT csv)",
                        m.name(),
                        columns(m).join(", ")
                    );
                    psql_command()
                        .arg("-c")
                        .arg(sql)
                        .stdin(file)
                        .stdout(Stdio::piped())
                        .stderr(Stdio::piped())
                        .spawn()
                        .map_err(|e| format!("starting psql: {e}"))
                };
                let children = [
                    spawn(Measurement::Readings, r)?,
                    spawn(Measurement::Diagnostics, d)?,
                ];
                let mut errors = Vec::new();
                for c in children {
                    let out = c.wait_with_output().map_err(|e| format!("psql: {e}"))?;
                    if !out.status.success() {
                        errors.push(tail(&String::from_utf8_lossy(&out.stderr), 3));
                    }
                }
                if !errors.is_empty() {
                    return Err(format!("postgres COPY failed: {}", errors.join("; ")));
                }
                // psql -q prints no "COPY n"; count what committed (a second or so at most,
                // inside the timed load, where a COPY's own count would be free).
                let count = psql_output(
                    "SELECT (SELECT count(*) FROM readings) + (SELECT count(*) FROM diagnostics)",
                )?;
                let rows = count.trim().parse::<u64>().unwrap_or(0);
                Ok((
                    rows,
                    "COPY FROM STDIN through psql, one per table, both at once".into(),
                ))
            }
        }
    }

    /// Runs the texts in order; per text its latency in ms or an error, and the first answer.
    pub fn run_queries(&self, texts: &[String]) -> QueryRun {
        match self.kind {
            Kind::Postgres => psql_session(texts),
            Kind::Influx | Kind::ClickHouse => {
                let mut run = QueryRun::default();
                for (i, t) in texts.iter().enumerate() {
                    // Timed to the whole response received; turning it into an `Answer`
                    // for the comparison is not the engine's work and is left out, as it is
                    // for Tidal and for psql's \timing.
                    let start = std::time::Instant::now();
                    let raw = if self.kind == Kind::Influx {
                        influx_fetch(t)
                    } else {
                        ch_fetch(t).map(String::into_bytes)
                    };
                    let ms = start.elapsed().as_secs_f64() * 1000.0;
                    let res = raw.and_then(|body| {
                        if self.kind == Kind::Influx {
                            influx_answer(&body)
                        } else {
                            Ok(Answer::from_tsv(&String::from_utf8_lossy(&body)))
                        }
                    });
                    match res {
                        Ok(a) => {
                            run.ms.push(ms);
                            if i == 0 {
                                run.first = Some(a);
                            }
                        }
                        Err(e) => {
                            run.error = Some(e);
                            break;
                        }
                    }
                }
                run
            }
            Kind::Victoria => QueryRun {
                error: Some("VictoriaMetrics is measured for ingest only".into()),
                ..QueryRun::default()
            },
        }
    }
}

/// Lines per request of every line-protocol load (InfluxDB, VictoriaMetrics, Tidal's HTTP
/// API): TSBS's default `--batch-size` (`defaultBatchSize` in its `load/loader.go`, shared by
/// every TSBS loader, `tsbs_load_influx` among them), as the Tidal client library and `tidal
/// load` batch 10,000 rows. (Until 2026-12-07 it was 5,000, the low end of ../shared/peers'
/// "5k-10k lines per request"; at 4,000 trucks Tidal's line protocol then ran about 13% slower.)
pub const LP_LINES_PER_REQUEST: usize = 10_000;
/// Requests in flight at once in a line-protocol load.
pub const LP_IN_FLIGHT: usize = 4;

/// How a line-protocol load batches, for the report: "10,000 lines per request, 4 in flight
/// (keep-alive connections)".
pub fn lp_batching() -> String {
    format!(
        "{} lines per request, {LP_IN_FLIGHT} in flight (keep-alive connections)",
        thousands(LP_LINES_PER_REQUEST as u64)
    )
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// POSTs the line-protocol `file` to `http://{addr}{path}` in requests of
/// [`LP_LINES_PER_REQUEST`] lines, [`LP_IN_FLIGHT`] at once; any status but 2xx stops the
/// load with an error naming `who`. Returns the lines sent. The one loader of InfluxDB,
/// VictoriaMetrics and Tidal's line-protocol variant, so they are loaded alike.
pub fn post_line_protocol(file: &Path, addr: &str, path: &str, who: &str) -> Result<u64, String> {
    let conn = || http::Conn::new(addr, HTTP_TIMEOUT);
    post_chunks(file, LP_LINES_PER_REQUEST, LP_IN_FLIGHT, conn, |c, body| {
        // Replayable: the same points written again replace themselves.
        let r = c.request("POST", path, body, true)?;
        if r.ok() {
            Ok(())
        } else {
            Err(format!(
                "{who} write: HTTP {}: {}",
                r.status,
                r.text().trim()
            ))
        }
    })
}

/// Latencies of one query type's runs and the first run's answer.
#[derive(Default)]
pub struct QueryRun {
    pub ms: Vec<f64>,
    pub first: Option<Answer>,
    pub error: Option<String>,
}

/// Reads `file` in chunks of `lines` lines and hands them to `threads` workers running `send`,
/// each with its own state from `init` (its connection, say). Returns the lines sent; the
/// first error stops the load.
fn post_chunks<S, I, F>(
    file: &Path,
    lines: usize,
    threads: usize,
    init: I,
    send: F,
) -> Result<u64, String>
where
    I: Fn() -> S + Sync,
    F: Fn(&mut S, &[u8]) -> Result<(), String> + Sync,
{
    let f = std::fs::File::open(file).map_err(|e| format!("opening {}: {e}", file.display()))?;
    let (tx, rx) = sync_channel::<Vec<u8>>(threads * 2);
    let rx: Arc<Mutex<Receiver<Vec<u8>>>> = Arc::new(Mutex::new(rx));
    let first_error: Mutex<Option<String>> = Mutex::new(None);
    let mut total = 0u64;
    std::thread::scope(|s| {
        for _ in 0..threads {
            let rx = rx.clone();
            let (send, init) = (&send, &init);
            let first_error = &first_error;
            s.spawn(move || {
                let mut state = init();
                loop {
                    let chunk = match rx.lock() {
                        Ok(r) => r.recv(),
                        Err(_) => return,
                    };
                    let Ok(chunk) = chunk else { return };
                    if let Err(e) = send(&mut state, &chunk) {
                        if let Ok(mut fe) = first_error.lock() {
                            fe.get_or_insert(e);
                        }
                        return;
                    }
                }
            });
        }
        // The workers hold the only receivers: once they have all stopped (the first error
        // stops each), a send fails instead of waiting forever for room.
        drop(rx);
        let lines = lines.max(1);
        let mut reader = BufReader::with_capacity(1 << 20, f);
        let mut chunk = Vec::with_capacity(lines * 200);
        let mut n = 0;
        loop {
            let read = match reader.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // The chunk's whole lines may still go; not the start of a line whose
                    // end could not be read.
                    let whole = chunk.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
                    chunk.truncate(whole);
                    if let Ok(mut fe) = first_error.lock() {
                        fe.get_or_insert(format!("reading {}: {e}", file.display()));
                    }
                    break;
                }
            };
            if read.is_empty() {
                break;
            }
            // The buffer's lines up to the chunk's last, found with one SIMD scan and
            // copied at once: a read and a copy per line were most of the sender's own CPU.
            let (mut end, mut found) = (read.len(), 0);
            for i in memchr::memchr_iter(b'\n', read) {
                found += 1;
                if n + found == lines {
                    end = i + 1;
                    break;
                }
            }
            chunk.extend_from_slice(&read[..end]);
            reader.consume(end);
            n += found;
            total += found as u64;
            if n == lines {
                // The first error stops the workers; the reader stops at the next chunk.
                if first_error.lock().map(|e| e.is_some()).unwrap_or(true)
                    || tx.send(std::mem::take(&mut chunk)).is_err()
                {
                    break;
                }
                chunk.reserve(lines * 200);
                n = 0;
            }
        }
        if !chunk.is_empty() {
            // A last line without its newline is a line too.
            if !chunk.ends_with(b"\n") {
                total += 1;
            }
            let _ = tx.send(chunk);
        }
        drop(tx);
    });
    match first_error.into_inner().ok().flatten() {
        Some(e) => Err(e),
        None => Ok(total),
    }
}

/// ClickHouse 18.16 DDL for the tsbs crate's wide tables (see [`Kind::settings`]).
pub fn clickhouse18_ddl(m: Measurement) -> String {
    let mut cols = vec!["time DateTime('UTC')".to_string()];
    for (i, t) in TAG_NAMES.iter().enumerate() {
        let ty = if i < 5 {
            "Nullable(String)"
        } else {
            "Nullable(Float64)"
        };
        cols.push(format!("{t} {ty}"));
    }
    for (i, f) in m.field_names().iter().enumerate() {
        let int = m == Measurement::Diagnostics && i == 2;
        cols.push(format!(
            "{f} {}",
            if int {
                "Nullable(Int64)"
            } else {
                "Nullable(Float64)"
            }
        ));
    }
    format!(
        "CREATE TABLE IF NOT EXISTS bench.{} ({}) ENGINE = MergeTree PARTITION BY toYYYYMM(time) ORDER BY (ifNull(name, ''), time)",
        m.name(),
        cols.join(", ")
    )
}

fn ch_exec(sql: &str) -> Result<String, String> {
    let r = http::request(
        "127.0.0.1:18123",
        "POST",
        "/?database=bench",
        sql.as_bytes(),
        HTTP_TIMEOUT,
    )?;
    if r.ok() {
        Ok(r.text())
    } else {
        Err(format!(
            "clickhouse: HTTP {}: {}",
            r.status,
            r.text().trim()
        ))
    }
}

/// A query's TabSeparated answer, as text.
fn ch_fetch(sql: &str) -> Result<String, String> {
    ch_exec(&format!(
        "{} FORMAT TabSeparated",
        sql.trim().trim_end_matches(';')
    ))
}

/// A query's `/query` response body.
fn influx_fetch(q: &str) -> Result<Vec<u8>, String> {
    // POST: avg-daily-driving-session's InfluxQL writes with SELECT ... INTO.
    let path = format!("/query?db=bench&epoch=ms&q={}", http::encode(q));
    let r = http::request("127.0.0.1:18086", "POST", &path, b"", HTTP_TIMEOUT)?;
    if !r.ok() {
        return Err(format!("influxdb: HTTP {}: {}", r.status, r.text().trim()));
    }
    Ok(r.body)
}

fn influx_answer(body: &[u8]) -> Result<Answer, String> {
    let v: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("influxdb: bad JSON: {e}"))?;
    Answer::from_influx_json(&v)
}

fn psql_command() -> Command {
    let mut c = Command::new("psql");
    c.args([
        "-X",
        "-q",
        "-At",
        "-h",
        "127.0.0.1",
        "-p",
        "15432",
        "-U",
        "postgres",
        "-d",
        "bench",
    ]);
    c.arg("-F").arg("\t");
    c
}

fn psql_exec(sql: &str) -> Result<(), String> {
    psql_output(sql).map(|_| ())
}

fn psql_output(sql: &str) -> Result<String, String> {
    let out = psql_command()
        .arg("-v")
        .arg("ON_ERROR_STOP=1")
        .arg("-c")
        .arg(sql)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running psql: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "postgres: {sql}: {}",
            tail(&String::from_utf8_lossy(&out.stderr), 3)
        ))
    }
}

/// One psql session for all texts of a type: `\timing` gives each query's round trip without
/// the cost of starting psql and connecting.
fn psql_session(texts: &[String]) -> QueryRun {
    let mut run = QueryRun::default();
    let mut script = String::from("SET statement_timeout = '600s';\n\\timing on\n");
    for (i, t) in texts.iter().enumerate() {
        script.push_str(&format!(
            "\\echo @@Q {i}\n{};\n",
            t.trim().trim_end_matches(';')
        ));
    }
    script.push_str("\\echo @@END\n");
    let child = psql_command()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            run.error = Some(format!("starting psql: {e}"));
            return run;
        }
    };
    if let Some(mut stdin) = child.stdin.take() {
        // psql reads the script as it runs; write it from a thread so a full pipe cannot
        // deadlock against our reading of stdout.
        std::thread::spawn(move || {
            let _ = stdin.write_all(script.as_bytes());
        });
    }
    let mut stderr_text = String::new();
    let stderr = child.stderr.take();
    let err_thread = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(mut e) = stderr {
            let _ = e.read_to_string(&mut s);
        }
        s
    });
    let mut current: Option<usize> = None;
    let mut rows = String::new();
    if let Some(out) = child.stdout.take() {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if let Some(rest) = line.strip_prefix("@@Q ") {
                current = rest.trim().parse().ok();
                continue;
            }
            if line == "@@END" {
                break;
            }
            if let Some(t) = line.strip_prefix("Time: ") {
                let ms = t
                    .split_whitespace()
                    .next()
                    .and_then(|x| x.parse::<f64>().ok());
                if let (Some(ms), Some(_)) = (ms, current) {
                    run.ms.push(ms);
                }
                continue;
            }
            if current == Some(0) {
                rows.push_str(&line);
                rows.push('\n');
            }
        }
    }
    let _ = child.wait();
    if let Ok(s) = err_thread.join() {
        stderr_text = s;
    }
    if let Some(l) = stderr_text.lines().find(|l| l.contains("ERROR")) {
        run.error = Some(format!("postgres: {l}"));
        run.ms.clear();
        return run;
    }
    run.first = Some(Answer::from_tsv(&rows));
    if run.ms.len() != texts.len() {
        run.error = Some(format!(
            "postgres: {} timings for {} queries: {}",
            run.ms.len(),
            texts.len(),
            tail(&stderr_text, 2)
        ));
    }
    run
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A failing peer stops the load with its error: the reader, blocked on a full queue
    /// when the last worker stops, gives up instead of waiting forever.
    #[test]
    fn a_failing_load_ends_with_its_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("lines");
        let text: String = (0..5_000).map(|i| format!("m v={i}i {i}\n")).collect();
        std::fs::write(&file, text).expect("write");
        let sent = std::sync::atomic::AtomicU64::new(0);
        let r = post_chunks(
            &file,
            10,
            2,
            || (),
            |_, _| {
                sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                std::thread::sleep(std::time::Duration::from_millis(5));
                Err("peer down".to_string())
            },
        );
        assert_eq!(r, Err("peer down".to_string()));
        assert!(
            sent.into_inner() <= 2,
            "each worker stops at its first error"
        );
        // and a healthy load sends every line
        let n = post_chunks(&file, 7, 3, || (), |_, _| Ok(())).expect("load");
        assert_eq!(n, 5_000);
    }

    #[test]
    fn names_round_trip() {
        for k in [
            Kind::Influx,
            Kind::ClickHouse,
            Kind::Postgres,
            Kind::Victoria,
        ] {
            assert_eq!(Kind::parse(k.name()), Some(k));
        }
        assert_eq!(Kind::parse("mysql"), None);
        assert_eq!(
            lp_batching(),
            "10,000 lines per request, 4 in flight (keep-alive connections)"
        );
        // The peers' settings, written out, say the batch the loader sends.
        let lines = format!(
            "{} lines per request",
            thousands(LP_LINES_PER_REQUEST as u64)
        );
        for k in [Kind::Influx, Kind::Victoria] {
            assert!(k.settings().contains(&lines), "{}", k.settings());
        }
        assert_eq!(thousands(250_000), "250,000");
        assert_eq!(thousands(1_000_000), "1,000,000");
        assert_eq!(thousands(999), "999");
        assert!(clickhouse18_ddl(Measurement::Diagnostics).contains("status Nullable(Int64)"));
    }

    /// The lines `post_chunks` counted and the chunks it sent, in the order sent.
    fn sent_chunks(f: &Path, lines: usize, threads: usize) -> (u64, Vec<Vec<u8>>) {
        let got = Mutex::new(Vec::new());
        let n = post_chunks(
            f,
            lines,
            threads,
            || (),
            |_, b| {
                got.lock().unwrap().push(b.to_vec());
                Ok(())
            },
        )
        .unwrap();
        (n, got.into_inner().unwrap())
    }

    #[test]
    fn chunks_are_sent_whole() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("x");
        let text: String = (0..1001).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&f, &text).unwrap();
        let (n, got) = sent_chunks(&f, 100, 3);
        assert_eq!(n, 1001);
        assert_eq!(got.len(), 11);
        assert_eq!(got.iter().map(|c| c.len()).sum::<usize>(), text.len());
        let err = post_chunks(&f, 100, 2, || (), |_, _| Err("boom".into()));
        assert_eq!(err.unwrap_err(), "boom");
    }

    /// Lines are cut at their newlines wherever the reader's buffer (1 MiB) ends: a file of
    /// several buffers in chunks of an odd number of lines comes out whole and in order, each
    /// chunk but the last with exactly its lines, and a last line without a newline counts.
    #[test]
    fn chunks_hold_whole_lines_across_reads() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("x");
        let mut text: String = (0..120_001)
            .map(|i| format!("m,host=h{} v={i}i {}\n", i % 977, 1_000_000 + i))
            .collect();
        text.push_str("m v=1i 2");
        assert!(text.len() > 3 << 20, "spans several reads");
        std::fs::write(&f, &text).unwrap();
        let (n, got) = sent_chunks(&f, 7, 1);
        assert_eq!(n, 120_002);
        assert_eq!(got.len(), 120_002_usize.div_ceil(7));
        let (last, whole) = got.split_last().unwrap();
        for c in whole {
            assert_eq!(c.iter().filter(|&&b| b == b'\n').count(), 7);
            assert!(c.ends_with(b"\n"));
        }
        assert_eq!(
            last.iter().filter(|&&b| b == b'\n').count(),
            120_002 % 7 - 1
        );
        assert_eq!(got.concat(), text.as_bytes());
    }
}
