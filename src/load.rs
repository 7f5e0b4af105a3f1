//! `tidal load`: loads a TSBS IoT file (../shared/tsbs-iot.md §2) into a database and reports
//! rows/s and metrics/s as the TSBS loaders do.
//!
//! - `--format influx`: line protocol, written schemaless (STABLE per measurement, subtable
//!   per tag set) exactly as the HTTP API writes it.
//! - `--format tdengine`: the typed command stream of `tsbs_load_tdengine`: `2,` creates a
//!   STABLE, `3,` declares a subtable with its tags, `1,` is one row
//!   `1,<subtable>,<n>,(<ts_ms>,<v1>,...,<vn>)`.
//!
//! Pipeline: one reader thread decompresses (`.gz`, `.zst` or plain, chosen by extension) and
//! cuts the file into chunks of `--batch-size` rows on line boundaries; `--workers` threads
//! parse chunks into row blocks (one set of columns per STABLE per chunk, no allocation per
//! row) and feed one batching [`Writer`], which groups rows per vgroup and keeps several
//! batches in flight. DDL lines (`2,` and `3,`) are handled by the reader before the chunk
//! that follows them is sent, so a row's subtable is always known to the worker that parses
//! it; the reader hands each declared subtable's tags to the Writer (in a block without rows)
//! before that chunk, so the rows themselves carry no tags. Every queue is bounded (chunks:
//! `2 × workers`), so a slow cluster slows the reader instead of filling memory.
//!
//! Counts: rows = points (influx lines / `1,` lines) parsed; metrics = field values (for
//! TDengine the `<n>` of each row, as TSBS counts them).

use crate::frontend::schemaless::{Schemaless, SchemalessOptions};
use crate::server::BoxError;
use parking_lot::RwLock;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tidal_client::{Client, Writer, WriterConfig};
use tidal_common::{RowBlock, StableSchema, Value};

/// Read buffer of the decompressing reader.
const READ_BUFFER_BYTES: usize = 1 << 20;
/// Rejected lines printed in full; the rest are only counted.
const ERRORS_PRINTED_MAX: usize = 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Influx,
    Tdengine,
}

#[derive(clap::Args, Debug)]
pub struct LoadArgs {
    /// gRPC address of any server of the cluster.
    #[arg(long, default_value = "127.0.0.1:6030")]
    host: String,
    /// Database to load into (created with PRECISION 'ms' if missing).
    #[arg(long)]
    db: String,
    #[arg(long, value_enum)]
    format: Format,
    /// Input file: plain, `.gz` or `.zst`.
    #[arg(long)]
    file: PathBuf,
    /// Parallel parsing workers.
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Rows per worker batch (and per writer batch per vgroup).
    #[arg(long, default_value_t = 10_000)]
    batch_size: usize,
    /// Vgroups of the database if it is created.
    #[arg(long, default_value_t = 4)]
    vgroups: u32,
    /// Only read and parse: reports the parse-only rate (no server needed).
    #[arg(long)]
    dry_run: bool,
    /// Seconds between progress lines on stderr (0: none).
    #[arg(long, default_value_t = 1)]
    progress_secs: u64,
    /// -u USER, -p PASSWORD, --tls-ca (crate::auth).
    #[command(flatten)]
    pub auth: crate::auth::ClientAuthArgs,
}

/// Totals shared by the workers and the progress reporter.
#[derive(Default)]
struct Totals {
    rows: AtomicU64,
    metrics: AtomicU64,
    rejected: AtomicU64,
    printed: AtomicUsize,
}

impl Totals {
    fn reject(&self, what: impl FnOnce() -> String) {
        self.rejected.fetch_add(1, Ordering::Relaxed);
        if self.printed.fetch_add(1, Ordering::Relaxed) < ERRORS_PRINTED_MAX {
            eprintln!("rejected: {}", what());
        }
    }
}

/// A subtable declared by a `3,` line.
struct Subtable {
    schema: Arc<StableSchema>,
}

type Subtables = Arc<RwLock<HashMap<String, Arc<Subtable>>>>;

/// A unit of work: complete lines, and the number of the first.
struct Chunk {
    first_line: usize,
    text: Vec<u8>,
}

fn open(path: &Path) -> Result<Box<dyn BufRead + Send>, BoxError> {
    let f =
        std::fs::File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let name = path.to_string_lossy();
    let r: Box<dyn Read + Send> = if name.ends_with(".gz") {
        Box::new(flate2::read::MultiGzDecoder::new(BufReader::new(f)))
    } else if name.ends_with(".zst") || name.ends_with(".zstd") {
        Box::new(zstd::Decoder::new(f).map_err(|e| format!("{}: {e}", path.display()))?)
    } else {
        Box::new(f)
    };
    Ok(Box::new(BufReader::with_capacity(READ_BUFFER_BYTES, r)))
}

pub async fn run(args: LoadArgs) -> Result<ExitCode, BoxError> {
    let workers = args.workers.max(1);
    let batch = args.batch_size.max(1);
    let totals = Arc::new(Totals::default());
    let subtables: Subtables = Arc::new(RwLock::new(HashMap::new()));
    let rt = tokio::runtime::Handle::current();

    let (client, writer) = if args.dry_run {
        (None, None)
    } else {
        let client = args.auth.connect(&args.host).await?;
        let ddl = format!(
            "CREATE DATABASE IF NOT EXISTS {} VGROUPS {} PRECISION 'ms'",
            args.db, args.vgroups
        );
        client
            .execute(&ddl, "")
            .await
            .map_err(|e| format!("{ddl}: {e}"))?;
        let mut cfg = WriterConfig::new(&args.db);
        cfg.batch_rows = batch;
        let writer = Writer::new(client.clone(), cfg);
        (Some(client), Some(writer))
    };

    let start = Instant::now();
    let (tx, rx) = crossbeam_channel(workers * 2);
    let reader = {
        let ctx = ReaderCtx {
            subtables: subtables.clone(),
            client: client.clone(),
            writer: writer.clone(),
            db: args.db.clone(),
            rt: rt.clone(),
            totals: totals.clone(),
            schemas: HashMap::new(),
            declared: HashMap::new(),
        };
        let file = args.file.clone();
        let format = args.format;
        std::thread::spawn(move || read_chunks(&file, format, batch, tx, ctx))
    };
    let mut handles = Vec::with_capacity(workers);
    for _ in 0..workers {
        let rx = rx.clone();
        let ctx = WorkerCtx {
            format: args.format,
            dry_run: args.dry_run,
            db: args.db.clone(),
            totals: totals.clone(),
            subtables: subtables.clone(),
            writer: writer.clone(),
            schemaless: client.clone().map(Schemaless::new),
            rt: rt.clone(),
        };
        handles.push(std::thread::spawn(move || ctx.work(rx)));
    }
    drop(rx);

    let progress = {
        let totals = totals.clone();
        let every = args.progress_secs;
        tokio::spawn(async move {
            if every == 0 {
                return;
            }
            let mut last = 0u64;
            let mut tick = tokio::time::interval(Duration::from_secs(every));
            tick.tick().await;
            loop {
                tick.tick().await;
                let rows = totals.rows.load(Ordering::Relaxed);
                let secs = start.elapsed().as_secs_f64();
                eprintln!(
                    "[{secs:7.1}s] {rows} rows, {:.0} rows/s now, {:.0} rows/s overall",
                    (rows - last) as f64 / every as f64,
                    rows as f64 / secs.max(1e-9)
                );
                last = rows;
            }
        })
    };

    let read_result = tokio::task::spawn_blocking(move || reader.join())
        .await
        .map_err(|e| format!("reader task: {e}"))?
        .map_err(|_| "the reader thread panicked")?;
    for h in handles {
        let _ = tokio::task::spawn_blocking(move || h.join()).await;
    }
    let mut failed = 0;
    if let Some(w) = writer {
        let handle = w.clone();
        let res = w.close().await;
        failed = handle.stats().rows_failed;
        if let Err(e) = res {
            eprintln!("error: some batches were not written: {e}");
        }
    }
    progress.abort();
    read_result?;
    let took = start.elapsed().as_secs_f64().max(1e-9);
    let rows = totals.rows.load(Ordering::Relaxed);
    let metrics = totals.metrics.load(Ordering::Relaxed);
    let rejected = totals.rejected.load(Ordering::Relaxed);
    let what = if args.dry_run { "parsed" } else { "loaded" };
    println!("Summary:");
    println!(
        "{what} {metrics} metrics in {took:.3}sec with {workers} workers (mean rate {:.2} metrics/sec)",
        metrics as f64 / took
    );
    println!(
        "{what} {rows} rows in {took:.3}sec with {workers} workers (mean rate {:.2} rows/sec)",
        rows as f64 / took
    );
    if rejected > 0 || failed > 0 {
        println!("rejected {rejected} lines; {failed} rows failed to write");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// A bounded multi-consumer channel (std's mpsc receiver cannot be shared).
fn crossbeam_channel(cap: usize) -> (ChunkTx, ChunkRx) {
    let (tx, rx) = std::sync::mpsc::sync_channel(cap);
    (tx, Arc::new(parking_lot::Mutex::new(rx)))
}
type ChunkTx = std::sync::mpsc::SyncSender<Chunk>;
type ChunkRx = Arc<parking_lot::Mutex<std::sync::mpsc::Receiver<Chunk>>>;

/// What the reader thread needs besides the file.
struct ReaderCtx {
    subtables: Subtables,
    client: Option<Client>,
    writer: Option<Writer>,
    db: String,
    rt: tokio::runtime::Handle,
    totals: Arc<Totals>,
    /// STABLEs created by `2,` lines.
    schemas: HashMap<String, Arc<StableSchema>>,
    /// Subtables declared since the last chunk, per STABLE, with their tags and no rows.
    declared: HashMap<String, RowBlock>,
}

impl ReaderCtx {
    /// Hands the subtables declared since the last chunk to the writer, ahead of the chunk
    /// that uses them (the writer keeps their tags for every batch until one is acknowledged).
    fn hand_over_declared(&mut self) -> Result<(), BoxError> {
        let Some(w) = &self.writer else {
            self.declared.clear();
            return Ok(());
        };
        for (_, b) in self.declared.drain() {
            self.rt
                .block_on(w.write_block(b))
                .map_err(|e| format!("writer: {e}"))?;
        }
        Ok(())
    }
}

fn read_chunks(
    path: &Path,
    format: Format,
    batch: usize,
    tx: ChunkTx,
    mut ctx: ReaderCtx,
) -> Result<(), BoxError> {
    let mut r = open(path)?;
    let mut line = Vec::with_capacity(1024);
    let mut chunk = Vec::with_capacity(batch * 200);
    let mut rows_in_chunk = 0;
    let mut line_no = 0usize;
    let mut first_line = 1usize;
    loop {
        line.clear();
        let n = r
            .read_until(b'\n', &mut line)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        if n == 0 {
            break;
        }
        line_no += 1;
        if format == Format::Tdengine {
            match line.first() {
                Some(b'2') | Some(b'3') | Some(b'4') => {
                    if let Err(e) = ddl_line(&line, &mut ctx) {
                        ctx.totals.reject(|| format!("line {line_no}: {e}"));
                    }
                    continue;
                }
                _ => {}
            }
        }
        if rows_in_chunk == 0 {
            first_line = line_no;
        }
        chunk.extend_from_slice(&line);
        if line.last() != Some(&b'\n') {
            chunk.push(b'\n');
        }
        rows_in_chunk += 1;
        if rows_in_chunk >= batch {
            ctx.hand_over_declared()?;
            let text = std::mem::replace(&mut chunk, Vec::with_capacity(batch * 200));
            if tx.send(Chunk { first_line, text }).is_err() {
                return Err("all workers stopped".into());
            }
            rows_in_chunk = 0;
        }
    }
    ctx.hand_over_declared()?;
    if !chunk.is_empty() {
        let _ = tx.send(Chunk {
            first_line,
            text: chunk,
        });
    }
    Ok(())
}

/// Handles a TDengine-format `2,` (create STABLE) or `3,` (declare subtable) line.
fn ddl_line(line: &[u8], ctx: &mut ReaderCtx) -> Result<(), String> {
    let (client, db, rt) = (ctx.client.as_ref(), ctx.db.as_str(), &ctx.rt);
    let text = std::str::from_utf8(line).map_err(|_| "line is not valid UTF-8".to_string())?;
    let text = text.trim_end();
    let mut parts = text.splitn(4, ',');
    let (Some(kind), Some(stable), Some(table), Some(sql)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(format!(
            "expected '<type>,<stable>,<table>,<sql>', got '{text}'"
        ));
    };
    match kind {
        "2" => {
            let Some(client) = client else {
                // Dry run: remember that the STABLE exists, with no schema to check against.
                return Ok(());
            };
            let lower = sql.trim_start().to_ascii_lowercase();
            // The STABLE may exist from an earlier (partial) load.
            let sql = match lower.strip_prefix("create table ") {
                Some(_) => format!(
                    "CREATE TABLE IF NOT EXISTS {}",
                    sql.trim_start().get(13..).unwrap_or("")
                ),
                None => sql.to_string(),
            };
            let schema = rt.block_on(async {
                client
                    .execute(&sql, db)
                    .await
                    .map_err(|e| format!("{sql}: {e}"))?;
                client
                    .refresh_stable(db, stable)
                    .await
                    .map_err(|e| format!("STABLE {stable}: {e}"))
            })?;
            ctx.schemas.insert(stable.to_string(), Arc::new(schema));
            Ok(())
        }
        "3" => {
            // create table <t> using <stable> (<tag names>) tags (<values>)
            let lower = sql.to_ascii_lowercase();
            let names_at = lower
                .find(" using ")
                .and_then(|u| lower[u..].find('(').map(|p| u + p))
                .ok_or_else(|| format!("no tag name list in '{sql}'"))?;
            let tags_kw = lower
                .find(" tags ")
                .or_else(|| lower.find(" tags("))
                .ok_or_else(|| format!("no TAGS in '{sql}'"))?;
            let names_text = sql
                .get(names_at..tags_kw)
                .ok_or_else(|| format!("bad tag name list in '{sql}'"))?
                .trim();
            let names: Vec<String> = names_text
                .trim_start_matches('(')
                .trim_end_matches(')')
                .split(',')
                .map(|s| s.trim().to_string())
                .collect();
            let values_text = sql.get(tags_kw + 5..).unwrap_or("").trim();
            let values = parse_tuple(values_text)?;
            if values.len() != names.len() {
                return Err(format!(
                    "{} tag names but {} tag values in '{sql}'",
                    names.len(),
                    values.len()
                ));
            }
            let Some(schema) = ctx.schemas.get(stable).cloned().or_else(|| {
                client.is_none().then(|| {
                    Arc::new(StableSchema {
                        db: db.to_string(),
                        name: stable.to_string(),
                        version: tidal_common::SchemaVersion(1),
                        columns: Vec::new(),
                        tags: Vec::new(),
                    })
                })
            }) else {
                return Err(format!(
                    "subtable {table} uses STABLE {stable}, which was not created"
                ));
            };
            let mut tags = vec![Value::Null; schema.tags.len()];
            for (n, v) in names.iter().zip(values) {
                if let Some(i) = schema.tag_index(n) {
                    let def = &schema.tags[i];
                    tags[i] = def
                        .data_type
                        .coerce(v)
                        .map_err(|e| format!("tag '{n}' of {table}: {e}"))?;
                }
            }
            if ctx.writer.is_some() {
                let types: Vec<_> = schema.columns.iter().map(|c| c.data_type).collect();
                ctx.declared
                    .entry(schema.name.clone())
                    .or_insert_with(|| RowBlock::new(schema.name.clone(), &types))
                    .add_table(table, Some(tags));
            }
            ctx.subtables
                .write()
                .insert(table.to_string(), Arc::new(Subtable { schema }));
            Ok(())
        }
        other => Err(format!("command type {other} is not supported")),
    }
}

/// Parses `(v1, v2, ...)`: single-quoted strings (`''` is a quote), `null`, integers and
/// floats.
fn parse_tuple(s: &str) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    parse_tuple_into(s, &mut out)?;
    Ok(out)
}

/// [`parse_tuple`] into `out` (cleared first), so that a worker reuses one vector for every
/// row: numbers and NULLs then cost no allocation.
fn parse_tuple_into(s: &str, out: &mut Vec<Value>) -> Result<(), String> {
    out.clear();
    let inner = s
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| format!("expected '(...)', got '{s}'"))?;
    if inner.trim().is_empty() {
        return Ok(());
    }
    let bytes = inner.as_bytes();
    let mut i = 0;
    while i <= bytes.len() {
        while bytes.get(i) == Some(&b' ') {
            i += 1;
        }
        if bytes.get(i) == Some(&b'\'') {
            let mut v = String::new();
            let mut j = i + 1;
            loop {
                match bytes.get(j) {
                    None => return Err(format!("unterminated string in '{s}'")),
                    Some(b'\'') if bytes.get(j + 1) == Some(&b'\'') => {
                        v.push('\'');
                        j += 2;
                    }
                    Some(b'\'') => break,
                    Some(_) => {
                        let start = j;
                        while bytes.get(j).is_some_and(|b| *b != b'\'') {
                            j += 1;
                        }
                        v.push_str(inner.get(start..j).unwrap_or(""));
                    }
                }
            }
            out.push(Value::Str(v));
            i = j + 1;
            while bytes.get(i) == Some(&b' ') {
                i += 1;
            }
        } else {
            let end = inner[i..].find(',').map_or(bytes.len(), |p| i + p);
            let tok = inner.get(i..end).unwrap_or("").trim();
            out.push(scalar(tok).ok_or_else(|| format!("bad value '{tok}' in '{s}'"))?);
            i = end;
        }
        match bytes.get(i) {
            Some(b',') => i += 1,
            None => break,
            Some(_) => return Err(format!("expected ',' at byte {i} of '{inner}'")),
        }
    }
    Ok(())
}

fn scalar(tok: &str) -> Option<Value> {
    if tok.eq_ignore_ascii_case("null") {
        return Some(Value::Null);
    }
    if tok.eq_ignore_ascii_case("true") {
        return Some(Value::Bool(true));
    }
    if tok.eq_ignore_ascii_case("false") {
        return Some(Value::Bool(false));
    }
    if let Ok(i) = tok.parse::<i64>() {
        return Some(Value::Int(i));
    }
    tok.parse::<f64>()
        .ok()
        .filter(|f| f.is_finite())
        .map(Value::Float)
}

struct WorkerCtx {
    format: Format,
    dry_run: bool,
    db: String,
    totals: Arc<Totals>,
    subtables: Subtables,
    writer: Option<Writer>,
    schemaless: Option<Schemaless>,
    rt: tokio::runtime::Handle,
}

impl WorkerCtx {
    fn work(self, rx: ChunkRx) {
        loop {
            let chunk = match rx.lock().recv() {
                Ok(c) => c,
                Err(_) => return,
            };
            match self.format {
                Format::Influx => self.influx(chunk),
                Format::Tdengine => self.tdengine(chunk),
            }
        }
    }

    fn influx(&self, chunk: Chunk) {
        let (Some(sl), Some(writer)) = (&self.schemaless, &self.writer) else {
            let mut rows = 0u64;
            let mut metrics = 0u64;
            for r in tidal_lineproto::parse_lines(&chunk.text) {
                match r {
                    Ok(l) => {
                        rows += 1;
                        metrics += l.fields.len() as u64;
                    }
                    Err(e) => self
                        .totals
                        .reject(|| format!("line {}: {e}", e.line + chunk.first_line - 1)),
                }
            }
            self.totals.rows.fetch_add(rows, Ordering::Relaxed);
            self.totals.metrics.fetch_add(metrics, Ordering::Relaxed);
            return;
        };
        let opts = SchemalessOptions::default();
        // Subtables the writer knows to exist need no tags (none are even converted).
        let known = |t: &str| writer.knows(t);
        let res = self.rt.block_on(async {
            let p = sl.prepare(&self.db, &chunk.text, &opts, &known).await?;
            let rows: usize = p.blocks.iter().map(RowBlock::num_rows).sum();
            for b in p.blocks {
                writer.write_block(b).await?;
            }
            Ok::<_, crate::frontend::ExecError>((rows, p.outcome))
        });
        match res {
            Ok((rows, outcome)) => {
                for e in &outcome.errors {
                    self.totals.reject(|| {
                        format!("line {}: {}", e.line + chunk.first_line - 1, e.message)
                    });
                }
                self.totals.rows.fetch_add(rows as u64, Ordering::Relaxed);
                self.totals
                    .metrics
                    .fetch_add(outcome.fields, Ordering::Relaxed);
            }
            Err(e) => self
                .totals
                .reject(|| format!("lines from {}: {}", chunk.first_line, e.message)),
        }
    }

    fn tdengine(&self, chunk: Chunk) {
        let mut rows = 0u64;
        let mut metrics = 0u64;
        let mut acc = Blocks::default();
        let subtables = self.subtables.read();
        for (i, raw) in chunk.text.split(|b| *b == b'\n').enumerate() {
            if raw.is_empty() {
                continue;
            }
            let line_no = chunk.first_line + i;
            match self.tdengine_row(raw, &subtables, &mut acc) {
                Ok(n) => {
                    rows += 1;
                    metrics += n;
                }
                Err(e) => self.totals.reject(|| format!("line {line_no}: {e}")),
            }
        }
        drop(subtables);
        if let Some(w) = &self.writer {
            let res = self.rt.block_on(async {
                for (_, b) in acc.blocks {
                    w.write_block(b).await?;
                }
                Ok::<_, tidal_client::ClientError>(())
            });
            if let Err(e) = res {
                self.totals
                    .reject(|| format!("lines from {}: {e}", chunk.first_line));
                return;
            }
        }
        self.totals.rows.fetch_add(rows, Ordering::Relaxed);
        self.totals.metrics.fetch_add(metrics, Ordering::Relaxed);
    }

    /// One `1,<subtable>,<n>,(<ts>,<v1>,...)` line into the chunk's blocks; returns `<n>`.
    fn tdengine_row<'c>(
        &self,
        raw: &'c [u8],
        subtables: &HashMap<String, Arc<Subtable>>,
        acc: &mut Blocks<'c>,
    ) -> Result<u64, String> {
        let text = std::str::from_utf8(raw).map_err(|_| "line is not valid UTF-8".to_string())?;
        let text = text.trim_end();
        let mut parts = text.splitn(4, ',');
        let (Some("1"), Some(table), Some(n), Some(values)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(format!("expected '1,<table>,<n>,(<values>)', got '{text}'"));
        };
        let n: u64 = n
            .parse()
            .map_err(|_| format!("bad field count '{n}' in '{text}'"))?;
        parse_tuple_into(values, &mut acc.values)?;
        if self.dry_run {
            return Ok(n);
        }
        let (bi, ti) = match acc.index.get(table) {
            Some(x) => *x,
            None => {
                let sub = subtables.get(table).ok_or_else(|| {
                    format!("table '{table}' was not declared by a '3,' line before its rows")
                })?;
                let bi = match acc
                    .blocks
                    .iter()
                    .position(|(s, _)| Arc::ptr_eq(s, &sub.schema))
                {
                    Some(bi) => bi,
                    None => {
                        let types: Vec<_> =
                            sub.schema.columns.iter().map(|c| c.data_type).collect();
                        acc.blocks.push((
                            sub.schema.clone(),
                            RowBlock::new(sub.schema.name.clone(), &types),
                        ));
                        acc.blocks.len() - 1
                    }
                };
                // No tags: the reader handed them to the writer when the subtable was declared.
                let ti = acc.blocks[bi].1.add_table(table, None);
                acc.index.insert(table, (bi, ti));
                (bi, ti)
            }
        };
        let (schema, block) = &mut acc.blocks[bi];
        if acc.values.len() != schema.columns.len() {
            return Err(format!(
                "STABLE '{}' has {} columns, the row of '{table}' has {} values",
                schema.name,
                schema.columns.len(),
                acc.values.len()
            ));
        }
        acc.coerced.clear();
        for (v, def) in acc.values.drain(..).zip(schema.columns.iter()) {
            acc.coerced.push(
                def.data_type
                    .coerce(v)
                    .map_err(|e| format!("column '{}' of '{table}': {e}", def.name))?,
            );
        }
        block.push_row(ti, &acc.coerced);
        Ok(n)
    }
}

/// One chunk's rows being collected: a block per STABLE, the chunk's subtables (names borrowed
/// from the chunk's text) and two row vectors reused for every line.
#[derive(Default)]
struct Blocks<'c> {
    blocks: Vec<(Arc<StableSchema>, RowBlock)>,
    /// Subtable -> (index in `blocks`, index in that block).
    index: HashMap<&'c str, (usize, u32), foldhash::fast::RandomState>,
    values: Vec<Value>,
    coerced: Vec<Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tuples() {
        assert_eq!(
            parse_tuple("(1451606400000,52.31854,null,0)").unwrap(),
            vec![
                Value::Int(1451606400000),
                Value::Float(52.31854),
                Value::Null,
                Value::Int(0)
            ]
        );
        assert_eq!(
            parse_tuple("('truck_0','It''s', 'a,b',1500)").unwrap(),
            vec![
                Value::Str("truck_0".into()),
                Value::Str("It's".into()),
                Value::Str("a,b".into()),
                Value::Int(1500)
            ]
        );
        assert!(parse_tuple("(1,").is_err());
        assert!(parse_tuple("('x)").is_err());
        assert!(parse_tuple("(abc)").is_err());
        assert_eq!(parse_tuple("()").unwrap(), vec![]);
    }
}
