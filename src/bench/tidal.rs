//! Tidal as a benchmarked engine: a local cluster (mnode + 2 data nodes as child processes,
//! data in the run's folder), the `bench` database with WAL_LEVEL 2 and VGROUPS 4, the load
//! through the client library's batching [`Writer`] with several batches in flight per vgroup,
//! the settle step (FLUSH + COMPACT DATABASE) and SQL queries. The generated points are
//! turned into the Writer's columnar form ([`row_blocks`]) before the clock starts, as the
//! peers' input files are written before theirs.
//!
//! The line-protocol variant ([`TidalEngine::start_with_http`]) runs `tidal local` as one
//! child instead: it serves the HTTP API in its own process and runs the same mnode and data
//! nodes as its children, so the HTTP parsing and schemaless conversion are counted as server
//! work, as they are in InfluxDB. The same database is created (no STABLEs: the schemaless
//! write creates them), the InfluxDB peer's file is POSTed by the peers' loader, and
//! [`expected_rows`] says what `SELECT COUNT(*)` must then find.

use super::answers::Answer;
use crate::local::Cluster;
use crate::server::BoxError;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tidal_client::{Client, Writer, WriterConfig};
use tidal_common::{RowBlock, TableWrite, Value};
use tidal_lineproto::Precision as LpPrecision;
use tidal_tsbs::format::tidal::{DIAGNOSTICS_DDL, READINGS_DDL};
use tokio::io::AsyncBufReadExt;

pub const DB: &str = "bench";
pub const DNODES: u32 = 2;
pub const VGROUPS: u32 = 4;
/// The Writer's defaults (10,000 rows per batch, 4 in flight per vgroup) suit bulk loading.
pub const BATCH_ROWS: usize = 10_000;
pub const IN_FLIGHT_PER_VGROUP: usize = 4;
const QUERY_TIMEOUT: Duration = Duration::from_secs(300);
/// The database's precision (`PRECISION 'ms'` in [`create_database_sql`]): the line-protocol
/// timestamps (ns) are converted to it, so [`expected_rows`] keys points by it.
const DB_PRECISION: LpPrecision = LpPrecision::Millis;
/// The report's name of the line-protocol variant, and `--peers`' name for it.
pub const LP_NAME: &str = "tidal (line protocol)";
pub const LP_SELECTOR: &str = "tidal-lp";
/// The report's name of the `tidal load` variant, and `--peers`' name for it.
pub const LOAD_NAME: &str = "tidal (tidal load)";
pub const LOAD_SELECTOR: &str = "tidal-load";
/// `tidal load`'s workers and rows per batch in the benchmark (its defaults).
const LOAD_WORKERS: usize = 4;
/// How long `tidal local` may take to print its ready lines (it waits for its own children).
const LOCAL_READY_TIMEOUT: Duration = Duration::from_secs(90);
/// How long `tidal local` may take to stop after SIGTERM: its children's default
/// `shutdown_timeout_ms` (30 s, flushing every memtable) plus the margin it gives them.
const LOCAL_STOP_TIMEOUT: Duration = Duration::from_secs(40);

/// The one CREATE DATABASE of both Tidal runs, so their durability and layout are identical.
fn create_database_sql() -> String {
    format!(
        "CREATE DATABASE {DB} VGROUPS {VGROUPS} PRECISION 'ms' KEEP 36500d DURATION 10d WAL_LEVEL 2 CACHEMODEL 'both' CACHESIZE 512"
    )
}

pub fn settings() -> String {
    format!(
        "mnode + {DNODES} data nodes on loopback; `CREATE DATABASE {DB} VGROUPS {VGROUPS} PRECISION 'ms' WAL_LEVEL 2 CACHEMODEL 'both' CACHESIZE 512` (the last-row cache on and large enough for every subtable, as a fleet dashboard would run it); client library `Writer` fed row blocks of {BATCH_ROWS} points, {BATCH_ROWS} rows per batch, {IN_FLIGHT_PER_VGROUP} batches in flight per vgroup"
    )
}

/// Settings of the `tidal load` variant.
pub fn load_settings() -> String {
    format!(
        "the same cluster and `CREATE DATABASE` as \"tidal\", a fresh one; `tidal load --format tdengine` (its own process, not counted as server) reads TSBS's TDengine command stream (`2,` STABLE, `3,` subtable with its tags, `1,` one row per line): {LOAD_WORKERS} workers parse it into row blocks per STABLE and vgroup, {BATCH_ROWS} rows per batch, {IN_FLIGHT_PER_VGROUP} batches in flight per vgroup; ingest and size only"
    )
}

/// Settings of the line-protocol variant.
pub fn lp_settings() -> String {
    format!(
        "`tidal local`: the same mnode + {DNODES} data nodes (its children) and the same `CREATE DATABASE`, with the HTTP API served by the `tidal local` process itself (counted with them); no STABLE created beforehand: `POST /write?db={DB}&precision=ns` creates them schemaless (measurement → STABLE, tag set → subtable; TSBS's numeric truck tags are line-protocol fields, so columns here); the InfluxDB peer's file and loader, {}; ingest and size only (peak RSS over load and settle)",
        super::peers::lp_batching()
    )
}

pub const DURABILITY: &str = "WAL_LEVEL 2: the WAL is fsynced before a write is acknowledged, with group commit across concurrent writes";

pub const LP_DURABILITY: &str = "WAL_LEVEL 2, as above: a request is answered 204 only after each of its rows is in its vnode's WAL, fsynced (group commit across concurrent requests); the STABLEs and columns the schemaless write creates are fsynced mnode catalog records before they take effect";

/// What [`TidalEngine::settle`] measured.
pub struct Settled {
    /// Allocated bytes of the cluster's folder, and what they cover.
    pub bytes: u64,
    pub detail: String,
    /// Wall and server CPU seconds of the `FLUSH DATABASE`.
    pub flush_s: f64,
    pub flush_cpu_s: f64,
}

impl Settled {
    /// The flush's figures against the `rows` loaded.
    pub fn flush(&self, rows: u64) -> super::report::Flush {
        super::report::Flush {
            seconds: self.flush_s,
            cpu_s_per_million_rows: self.flush_cpu_s / (rows.max(1) as f64 / 1e6),
        }
    }
}

/// The server processes: the mnode and data nodes as children of this process, or `tidal
/// local` (which serves HTTP and runs them as its children) as the one child.
enum Servers {
    Cluster(Cluster),
    Local {
        child: tokio::process::Child,
        pid: u32,
    },
}

pub struct TidalEngine {
    servers: Servers,
    client: Client,
    dir: PathBuf,
    /// The HTTP API's address (`host:port`), when the servers serve it.
    http: Option<String>,
    /// The gRPC address clients connect to.
    addr: String,
}

impl TidalEngine {
    pub async fn start(dir: &Path) -> Result<TidalEngine, BoxError> {
        let cluster = Cluster::start(dir, DNODES, "127.0.0.1:0")
            .await
            .map_err(|e| format!("starting the local Tidal cluster in {}: {e}", dir.display()))?;
        let client = match Client::connect(&cluster.addr).await {
            Ok(c) => c,
            Err(e) => {
                cluster.stop().await;
                return Err(format!("connecting to the local cluster: {e}").into());
            }
        };
        Ok(TidalEngine {
            addr: cluster.addr.clone(),
            servers: Servers::Cluster(cluster),
            client,
            dir: dir.to_path_buf(),
            http: None,
        })
    }

    /// Runs `tidal local --http` with its data in `dir`: the same cluster as [`start`], plus
    /// the HTTP API in the `tidal local` process.
    ///
    /// [`start`]: TidalEngine::start
    pub async fn start_with_http(dir: &Path) -> Result<TidalEngine, BoxError> {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let exe = std::env::current_exe()
            .map_err(|e| format!("cannot find the tidal executable: {e}"))?;
        let mut cmd = tokio::process::Command::new(exe);
        // As `local::Cluster` does for its children: none of this process's TIDAL_* settings
        // may change the cluster under test (flags carry everything it needs).
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with(crate::config::ENV_PREFIX) {
                cmd.env_remove(k);
            }
        }
        let log_level = std::env::var("TIDAL_LOG").unwrap_or_else(|_| "warn".into());
        let mut child = cmd
            .arg("local")
            .arg("--data")
            .arg(dir)
            .args(["--vnodes", &DNODES.to_string()])
            .args(["--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"])
            .args(["--log-level", &log_level])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("starting `tidal local`: {e}"))?;
        let (Some(pid), Some(stdout)) = (child.id(), child.stdout.take()) else {
            return Err("`tidal local` started without a pid or stdout".into());
        };
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        // `ready http ADDR` comes before `ready local ADDR` (local.rs starts HTTP first).
        let ready = tokio::time::timeout(LOCAL_READY_TIMEOUT, async {
            let mut http = None;
            while let Some(line) = lines.next_line().await? {
                if let Some(a) = line.strip_prefix("ready http ") {
                    http = Some(a.trim().to_string());
                } else if let Some(a) = line.strip_prefix("ready local ") {
                    return Ok::<_, std::io::Error>(Some((a.trim().to_string(), http)));
                }
            }
            Ok(None)
        })
        .await;
        let (addr, http) = match ready {
            Ok(Ok(Some((addr, Some(http))))) => (addr, http),
            other => {
                let why = match other {
                    Err(_) => format!("not ready within {} s", LOCAL_READY_TIMEOUT.as_secs()),
                    Ok(Err(e)) => format!("reading its output: {e}"),
                    Ok(Ok(None)) => "exited before it was ready".into(),
                    Ok(Ok(Some(_))) => "printed no HTTP address".into(),
                };
                // SIGTERM first: it may have started children that only it can stop.
                Servers::Local { child, pid }.stop().await;
                return Err(format!("`tidal local` in {}: {why}", dir.display()).into());
            }
        };
        // Keep draining its stdout so that it never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let servers = Servers::Local { child, pid };
        let client = match Client::connect(&addr).await {
            Ok(c) => c,
            Err(e) => {
                servers.stop().await;
                return Err(format!("connecting to `tidal local` at {addr}: {e}").into());
            }
        };
        Ok(TidalEngine {
            servers,
            client,
            dir: dir.to_path_buf(),
            http: Some(http),
            addr,
        })
    }

    /// The server processes (mnode and data nodes, and `tidal local` when it runs them).
    pub fn pids(&self) -> Vec<u32> {
        match &self.servers {
            Servers::Cluster(c) => c.pids(),
            Servers::Local { pid, .. } => super::procfs::with_descendants(&[*pid]),
        }
    }

    /// The database, and the STABLEs the client-library load writes into.
    pub async fn create(&self) -> Result<(), BoxError> {
        self.create_database().await?;
        for sql in [READINGS_DDL, DIAGNOSTICS_DDL] {
            self.client
                .execute(sql, DB)
                .await
                .map_err(|e| format!("Tidal: {sql}: {e}"))?;
        }
        Ok(())
    }

    /// The database only: the line-protocol write needs it to exist (an unknown `db` is a
    /// 404, as in InfluxDB 1.x) and creates the STABLEs itself.
    pub async fn create_database(&self) -> Result<(), BoxError> {
        let sql = create_database_sql();
        self.client
            .execute(&sql, "")
            .await
            .map_err(|e| format!("Tidal: {sql}: {e}"))?;
        Ok(())
    }

    /// POSTs the line-protocol `file` (ns timestamps) to `/write` with the peers' loader;
    /// returns the lines sent. Blocking: call it from `block_in_place`.
    pub fn load_line_protocol(&self, file: &Path) -> Result<u64, String> {
        let addr = self
            .http
            .as_deref()
            .ok_or("this Tidal cluster serves no HTTP API")?;
        let path = format!(
            "/write?db={DB}&precision=ns&u={}&p={}",
            super::http::encode(tidal_client::auth::DEFAULT_USER),
            super::http::encode(tidal_client::auth::DEFAULT_PASSWORD)
        );
        super::peers::post_line_protocol(file, addr, &path, "Tidal (line protocol)")
    }

    /// Runs `tidal load --format tdengine` on `file` into the database; returns the rows it
    /// loaded and the seconds it reports (first line read to last batch acknowledged).
    /// Blocking: call it from `block_in_place`.
    pub fn load_tdengine(&self, file: &Path) -> Result<(u64, f64), String> {
        run_loader(file, Some(&self.addr))
    }

    /// `SELECT COUNT(*)` of a STABLE.
    pub async fn count(&self, stable: &str) -> Result<u64, String> {
        let sql = format!("SELECT COUNT(*) FROM {stable}");
        let r = tokio::time::timeout(QUERY_TIMEOUT, self.client.execute(&sql, DB))
            .await
            .map_err(|_| format!("Tidal: {sql}: timed out"))?
            .map_err(|e| format!("Tidal: {sql}: {e}"))?;
        let b = r
            .batch
            .as_ref()
            .filter(|b| b.num_rows() == 1)
            .ok_or_else(|| format!("Tidal: {sql}: no single-row answer"))?;
        match b.row(0).first() {
            Some(Value::Int(n)) if *n >= 0 => Ok(*n as u64),
            Some(Value::UInt(n)) => Ok(*n),
            other => Err(format!("Tidal: {sql}: the answer {other:?} is not a count")),
        }
    }

    fn writer(&self) -> Writer {
        let mut cfg = WriterConfig::new(DB);
        cfg.batch_rows = BATCH_ROWS;
        cfg.in_flight_per_vgroup = IN_FLIGHT_PER_VGROUP;
        Writer::new(self.client.clone(), cfg)
    }

    /// Writes every batch through one [`Writer`]; returns the rows acknowledged.
    pub async fn load(&self, batches: Vec<Vec<TableWrite>>) -> Result<u64, BoxError> {
        let writer = self.writer();
        for batch in batches {
            writer
                .write_many(batch)
                .await
                .map_err(|e| format!("Tidal write: {e}"))?;
        }
        Self::close(writer).await
    }

    /// Writes every row block through one [`Writer`]; returns the rows acknowledged.
    pub async fn load_blocks(&self, blocks: Vec<RowBlock>) -> Result<u64, BoxError> {
        let writer = self.writer();
        for b in blocks {
            writer
                .write_block(b)
                .await
                .map_err(|e| format!("Tidal write: {e}"))?;
        }
        Self::close(writer).await
    }

    async fn close(writer: Writer) -> Result<u64, BoxError> {
        // A clone keeps the shared counters readable after `close` consumes the writer.
        let counters = writer.clone();
        writer
            .close()
            .await
            .map_err(|e| format!("Tidal write (flush): {e}"))?;
        let stats = counters.stats();
        if stats.rows_failed > 0 {
            return Err(format!("Tidal: {} rows failed to write", stats.rows_failed).into());
        }
        Ok(stats.rows_written)
    }

    /// FLUSH + COMPACT DATABASE, then the allocated bytes of every file of the cluster and
    /// the flush's wall and server CPU seconds.
    pub async fn settle(&self) -> Result<Settled, BoxError> {
        let pids = self.pids();
        let mut flush = (0.0, 0.0);
        for (i, sql) in [
            format!("FLUSH DATABASE {DB}"),
            format!("COMPACT DATABASE {DB}"),
        ]
        .into_iter()
        .enumerate()
        {
            let cpu0 = super::procfs::cpu_seconds(&pids);
            let t = std::time::Instant::now();
            self.client
                .execute(&sql, DB)
                .await
                .map_err(|e| format!("Tidal: {sql}: {e}"))?;
            if i == 0 {
                flush = (
                    t.elapsed().as_secs_f64(),
                    super::procfs::cpu_seconds(&pids) - cpu0,
                );
            }
        }
        let total = super::procfs::du_bytes(&self.dir);
        let mnode = super::procfs::du_bytes(&self.dir.join("mnode"));
        Ok(Settled {
            bytes: total,
            detail: format!(
                "whole cluster folder after FLUSH + COMPACT (mnode catalog {})",
                super::report::human_bytes(mnode)
            ),
            flush_s: flush.0,
            flush_cpu_s: flush.1,
        })
    }

    pub async fn query(&self, sql: &str) -> Result<Answer, String> {
        self.query_timed(sql).await.map(|(_, a)| a)
    }

    /// [`TidalEngine::query`] with its latency in ms: to the whole result received and decoded
    /// by the client library, before it is turned into an `Answer` for the comparison (the
    /// peers are timed to their response in the same way).
    pub async fn query_timed(&self, sql: &str) -> Result<(f64, Answer), String> {
        let t = std::time::Instant::now();
        match tokio::time::timeout(QUERY_TIMEOUT, self.client.execute(sql, DB)).await {
            Err(_) => Err(format!("timed out after {} s", QUERY_TIMEOUT.as_secs())),
            Ok(Err(e)) => Err(e.to_string()),
            Ok(Ok(r)) => {
                let ms = t.elapsed().as_secs_f64() * 1e3;
                Ok((
                    ms,
                    r.batch.as_ref().map(Answer::from_batch).unwrap_or_default(),
                ))
            }
        }
    }

    /// The last-row cache's entries and bytes, summed over the database's vnodes.
    pub async fn cache_stats(&self) -> Result<(u64, u64), BoxError> {
        let route = self.client.route(DB).await?;
        let (mut entries, mut bytes) = (0, 0);
        for vg in &route.vgroups {
            let st = self
                .client
                .dnode(&vg.addr)?
                .vnode_stats(tidal_proto::v1::VnodeStatsRequest {
                    db: DB.into(),
                    vgroup_id: vg.id.0,
                    distribution_of: None,
                })
                .await?
                .into_inner();
            entries += st.cache_entries;
            bytes += st.cache_bytes;
        }
        Ok((entries, bytes))
    }

    pub async fn stop(self) {
        self.servers.stop().await;
    }
}

impl Servers {
    async fn stop(self) {
        match self {
            Servers::Cluster(c) => c.stop().await,
            Servers::Local { mut child, pid } => {
                // SIGTERM: `tidal local` stops its data nodes gracefully (they flush), then
                // the mnode, and exits; SIGKILL only if that takes too long.
                // SAFETY: kill(2) on the pid of a child we spawned and have not yet reaped.
                unsafe {
                    libc::kill(pid as libc::pid_t, libc::SIGTERM);
                }
                match tokio::time::timeout(LOCAL_STOP_TIMEOUT, child.wait()).await {
                    Ok(Ok(status)) if !status.success() => {
                        eprintln!("warning: `tidal local` exited with {status}");
                    }
                    Ok(_) => {}
                    Err(_) => {
                        eprintln!(
                            "warning: `tidal local` did not stop within {} s; killing it",
                            LOCAL_STOP_TIMEOUT.as_secs()
                        );
                        let _ = child.kill().await;
                    }
                }
            }
        }
    }
}

/// What Tidal must hold after the line-protocol load of a file.
#[derive(Debug, Default, PartialEq)]
pub struct LpExpectation {
    /// Lines the loader sends (one point each).
    pub lines: u64,
    /// Per STABLE, the distinct (subtable, timestamp) keys of its lines: Tidal keeps one row
    /// per subtable and timestamp, a repeated one replacing the earlier.
    pub rows: BTreeMap<String, u64>,
}

impl LpExpectation {
    pub fn total_rows(&self) -> u64 {
        self.rows.values().sum()
    }
}

/// Reads the line-protocol `file` (ns timestamps) as the schemaless write maps it: STABLE =
/// the measurement lower-cased, subtable = the tag set whatever its order, timestamp in the
/// database's precision. Parsed with the server's own parser, so a line the server would
/// reject is an error here, before any clock starts.
pub fn expected_rows(file: &Path) -> Result<LpExpectation, String> {
    let f = std::fs::File::open(file).map_err(|e| format!("opening {}: {e}", file.display()))?;
    let mut reader = std::io::BufReader::with_capacity(1 << 20, f);
    // Series key (STABLE, then the sorted tags, NUL-separated) → its timestamps; 8 bytes a
    // point, so a data set of tens of millions of points fits.
    let mut series: HashMap<String, Vec<i64>> = HashMap::new();
    let mut out = LpExpectation::default();
    let (mut buf, mut key) = (Vec::new(), String::new());
    let mut line_no = 0u64;
    loop {
        buf.clear();
        let n = reader
            .read_until(b'\n', &mut buf)
            .map_err(|e| format!("reading {}: {e}", file.display()))?;
        if n == 0 {
            break;
        }
        line_no += 1;
        // The loader sends every line, blank or not.
        out.lines += 1;
        let line = match tidal_lineproto::parse_line(&buf) {
            Ok(Some(l)) => l,
            Ok(None) => continue,
            Err(e) => {
                return Err(format!(
                    "{} line {line_no}: column {}: {} (in '{}')",
                    file.display(),
                    e.column,
                    e.kind,
                    e.snippet
                ))
            }
        };
        let ts = line
            .timestamp
            .and_then(|t| LpPrecision::Nanos.convert(t, DB_PRECISION))
            .ok_or_else(|| {
                format!(
                    "{} line {line_no}: no timestamp, or one out of range (the count check needs every point's)",
                    file.display()
                )
            })?;
        let mut tags: Vec<(&str, &str)> = line
            .tags
            .iter()
            .map(|(k, v)| (k.as_ref(), v.as_ref()))
            .collect();
        tags.sort_unstable();
        key.clear();
        key.push_str(&line.measurement.to_lowercase());
        for (k, v) in tags {
            key.push('\0');
            key.push_str(k);
            key.push('\0');
            key.push_str(v);
        }
        match series.get_mut(key.as_str()) {
            Some(v) => v.push(ts),
            None => {
                series.insert(key.clone(), vec![ts]);
            }
        }
    }
    for (k, mut ts) in series {
        ts.sort_unstable();
        ts.dedup();
        let stable = k.split('\0').next().unwrap_or_default().to_string();
        *out.rows.entry(stable).or_default() += ts.len() as u64;
    }
    Ok(out)
}

/// The generated batches as row blocks, one per STABLE per batch (the form the [`Writer`]
/// buffers). A subtable's tags travel with its first rows only, as a loader that knows which
/// subtables it has written sends them; the Writer resends them if the subtable is missing.
pub fn row_blocks(batches: impl IntoIterator<Item = Vec<TableWrite>>) -> Vec<RowBlock> {
    let mut seen: HashSet<String> = HashSet::new();
    let mut out = Vec::new();
    for batch in batches {
        let mut blocks: Vec<(RowBlock, HashMap<String, u32>)> = Vec::new();
        for t in batch {
            let rows = t.num_rows();
            let k = match blocks
                .iter()
                .position(|(b, _)| b.stable() == t.stable && b.accepts(&t.columns))
            {
                Some(k) => k,
                None => {
                    blocks.push((
                        RowBlock::like(&t.stable, &t.columns, BATCH_ROWS),
                        HashMap::new(),
                    ));
                    blocks.len() - 1
                }
            };
            let (b, index) = &mut blocks[k];
            let tags = if seen.contains(&t.table) {
                None
            } else {
                seen.insert(t.table.clone());
                t.tags
            };
            let i = match index.get(&t.table) {
                Some(i) => *i,
                None => {
                    let i = b.add_table(&t.table, tags);
                    index.insert(t.table, i);
                    i
                }
            };
            b.push_rows(i, &t.columns, 0, rows);
        }
        out.extend(blocks.into_iter().map(|(b, _)| b));
    }
    out
}

/// `tidal load --format tdengine` on `file`: into the cluster at `host`, or with `None` as
/// `--dry-run` (parse into blocks, send nothing: the loader's parse-only rate). Returns the
/// rows and seconds of its summary line.
pub fn run_loader(file: &Path, host: Option<&str>) -> Result<(u64, f64), String> {
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find the tidal executable: {e}"))?;
    let mut cmd = std::process::Command::new(exe);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with(crate::config::ENV_PREFIX) {
            cmd.env_remove(k);
        }
    }
    cmd.args([
        "load",
        "--db",
        DB,
        "--format",
        "tdengine",
        "--progress-secs",
        "0",
    ])
    .args(["--workers", &LOAD_WORKERS.to_string()])
    .args(["--batch-size", &BATCH_ROWS.to_string()])
    .arg("--file")
    .arg(file);
    match host {
        Some(h) => cmd.args(["--host", h]),
        None => cmd.arg("--dry-run"),
    };
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running `tidal load`: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "`tidal load` failed ({}): {}{}",
            out.status,
            stdout.trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    parse_loader_summary(&stdout).ok_or_else(|| {
        format!(
            "no rows summary in `tidal load`'s output: {}",
            stdout.trim()
        )
    })
}

/// `<loaded|parsed> N rows in S.SSSsec ...` of `tidal load`'s summary.
fn parse_loader_summary(out: &str) -> Option<(u64, f64)> {
    out.lines().find_map(|l| {
        let rest = l
            .strip_prefix("loaded ")
            .or_else(|| l.strip_prefix("parsed "))?;
        let (rows, rest) = rest.split_once(" rows in ")?;
        let secs = rest.split_once("sec")?.0;
        Some((rows.parse().ok()?, secs.parse().ok()?))
    })
}

#[cfg(test)]
mod tests {

    #[test]
    fn loader_summaries_are_read() {
        let out = "Summary:\nloaded 80 metrics in 1.500sec with 4 workers (mean rate 53.33 metrics/sec)\nloaded 16 rows in 1.500sec with 4 workers (mean rate 10.67 rows/sec)\n";
        assert_eq!(parse_loader_summary(out), Some((16, 1.5)));
        let dry = "parsed 3243307 rows in 1.857sec with 4 workers (mean rate 1746314.28 rows/sec)";
        assert_eq!(parse_loader_summary(dry), Some((3243307, 1.857)));
        assert_eq!(parse_loader_summary("loaded x rows in 1sec"), None);
        assert_eq!(parse_loader_summary(""), None);
    }

    use super::*;

    #[test]
    fn expected_rows_count_distinct_subtable_and_timestamp() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("x.lp");
        let lines = [
            // Two trucks, one point each at t0.
            "readings,name=truck_0,fleet=South velocity=1 1451606400000000000",
            "readings,name=truck_1,fleet=South velocity=1 1451606400000000000",
            // truck_0 again at t0 with its tags in another order: the same subtable and
            // timestamp, so one row.
            "readings,fleet=South,name=truck_0 velocity=2 1451606400000000000",
            // A different nanosecond within the same millisecond: the same row at 'ms'.
            "readings,name=truck_0,fleet=South velocity=3 1451606400000000001",
            // A later timestamp: a new row.
            "readings,name=truck_0,fleet=South velocity=4 1451606410000000000",
            // Other measurement, upper case: the lower-cased STABLE.
            "Diagnostics,name=truck_0 status=1i 1451606400000000000",
            // No tags at all: one subtable.
            "diagnostics status=2i 1451606400000000000",
        ];
        std::fs::write(&f, lines.join("\n") + "\n").unwrap();
        let e = expected_rows(&f).unwrap();
        assert_eq!(e.lines, 7);
        assert_eq!(e.rows.get("readings"), Some(&3));
        assert_eq!(e.rows.get("diagnostics"), Some(&2));
        assert_eq!(e.total_rows(), 5);

        std::fs::write(
            &f,
            "readings,name=a velocity=1 1\nreadings,name=a velocity=\n",
        )
        .unwrap();
        let err = expected_rows(&f).unwrap_err();
        assert!(err.contains("line 2"), "{err}");
        std::fs::write(&f, "readings,name=a velocity=1\n").unwrap();
        assert!(expected_rows(&f).unwrap_err().contains("timestamp"));
        assert!(expected_rows(&dir.path().join("missing")).is_err());
    }
}
