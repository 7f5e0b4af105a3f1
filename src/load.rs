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
//! cuts the file into chunks of nine tenths of `--batch-size` rows per vgroup on line boundaries; `--workers`
//! threads parse chunks into row blocks (one set of columns per STABLE and vgroup per chunk,
//! no allocation per row) and feed one batching [`Writer`], which groups rows per vgroup into
//! batches of `--batch-size` rows and keeps several in flight. A chunk spans every vgroup so
//! that its block for one vgroup is about a batch: a TSBS file is in time order, and with
//! thousands of trucks a block of a tenth of a batch held about one row per subtable, each of
//! which the data node then placed on its own (at 4,000 trucks: 2.4M rows/s with chunks of
//! `--batch-size` rows, 3.2M with chunks of a batch per vgroup). DDL lines (`2,` and `3,`) are handled by the reader before the chunk
//! that follows them is sent, so a row's subtable is always known to the worker that parses
//! it; each entry of the subtable map names the chunk it was handed over with, and a worker
//! takes only entries of its chunk or earlier, so the reader can add the next chunk's
//! declarations while workers parse (they yield the map every [`MAP_YIELD_LINES`] lines). The reader creates the subtables declared before a chunk itself (one write of blocks
//! without rows, carrying their tags, sent straight to the vgroups, not through the Writer),
//! and the chunk's rows go to the Writer only once those subtables exist: rows never carry
//! tags, and the Writer keeps none. Every queue is bounded (chunks: `2 × workers`), so a slow
//! cluster slows the reader instead of filling memory.
//!
//! Why not through the Writer: a Writer given tags keeps them for every batch until one
//! carrying them is acknowledged (a batch may overtake another), which costs a lookup per
//! subtable of every batch and a set of the subtables it knows. At 100,000 trucks a TSBS file
//! of 3 minutes has 16 rows per subtable, and that bookkeeping, with the tags' encoding and
//! freeing on the Writer's threads, was about a tenth of the loader's CPU.
//!
//! Counts: rows = points (influx lines / `1,` lines) parsed; metrics = field values (for
//! TDengine the `<n>` of each row, as TSBS counts them).

use crate::frontend::schemaless::{Known, KnownScope, NearCursor, Schemaless, SchemalessOptions};
use crate::server::BoxError;
use parking_lot::RwLock;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tidal_client::{Client, RouteTable, Writer, WriterConfig};
use tidal_common::{Column, ColumnData, DataType, RowBlock, RowBlockParts, StableSchema, Value};

/// Read buffer of the decompressing reader.
const READ_BUFFER_BYTES: usize = 1 << 20;
/// Most bytes reserved up front for one chunk of the file.
const CHUNK_RESERVE_BYTES_MAX: usize = 64 << 20;
/// Lines a worker parses between chances for the reader to add declared subtables to the
/// map it reads. Holding the map for a whole chunk made the reader wait for each chunk's
/// parse (10-28 ms) while every chunk declared new subtables (the first half second of a load
/// of 100,000 trucks): one chunk was parsed at a time.
const MAP_YIELD_LINES: usize = 256;
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
    /// Rows per writer batch per vgroup; a worker parses this many rows per vgroup at a time.
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
    /// Index of its vgroup in the database's routing map (which the writer checks again).
    group: usize,
    /// The first chunk whose rows may name it: the one it was handed over with. Workers
    /// still parsing earlier chunks can see the entry (they let the reader in while they
    /// parse) and must not take it, as they did not wait for its creation.
    from_chunk: u64,
}

type Subtables = Arc<RwLock<SubtableMap>>;

/// A unit of work: complete lines, and the number of the first.
struct Chunk {
    /// Position in the file (0, 1, ...): chunks reach the writer in this order.
    seq: u64,
    first_line: usize,
    text: Vec<u8>,
    /// The creation of the subtables declared since the previous chunk, which its rows may
    /// use (none in a dry run or when nothing was declared).
    creates: Option<Creates>,
}

/// The outcome of creating a chunk's declared subtables, awaited by the worker that writes
/// the chunk (each earlier chunk's worker awaited its own before passing the turn on).
type Creates = futures::future::Shared<futures::future::BoxFuture<'static, Result<(), Arc<str>>>>;

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
    let subtables: Subtables = Arc::new(RwLock::new(SubtableMap::default()));
    let rt = tokio::runtime::Handle::current();

    let (client, writer, route, vgroups) = if args.dry_run {
        // Rows are grouped as the database's default routing would place them.
        (None, None, None, args.vgroups.max(1) as usize)
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
        let route = client
            .route(&args.db)
            .await
            .map_err(|e| format!("routing map of {}: {e}", args.db))?;
        let vgroups = route.vgroups.len().max(1);
        (Some(client), Some(writer), Some(route), vgroups)
    };

    let start = Instant::now();
    let (tx, rx) = crossbeam_channel(workers * 2);
    let turns = Arc::new(Turns::default());
    let reader = {
        let ctx = ReaderCtx {
            subtables: subtables.clone(),
            client: client.clone(),
            db: args.db.clone(),
            rt: rt.clone(),
            totals: totals.clone(),
            schemas: HashMap::new(),
            declared: HashMap::new(),
            pending: Vec::new(),
            tag_slots: HashMap::new(),
            vgroups: vgroups as u32,
            spent: Default::default(),
            turns: turns.clone(),
        };
        let file = args.file.clone();
        let format = args.format;
        // A tenth short of a batch per vgroup: a chunk of one STABLE's rows (TSBS writes an
        // interval's readings, then its diagnostics) spreads over the vgroups within a few
        // percent of evenly, and a block just over a batch would be cut and copied by the
        // writer rather than queued whole.
        let chunk_rows = (batch.saturating_mul(vgroups) / 10)
            .saturating_mul(9)
            .max(1);
        std::thread::spawn(move || read_chunks(&file, format, chunk_rows, tx, ctx))
    };
    let known_scope = Arc::new(parking_lot::Mutex::new(None));
    let mut handles = Vec::with_capacity(workers);
    for _ in 0..workers {
        let rx = rx.clone();
        let ctx = WorkerCtx {
            format: args.format,
            db: args.db.clone(),
            totals: totals.clone(),
            subtables: subtables.clone(),
            writer: writer.clone(),
            schemaless: client.clone().map(Schemaless::new),
            rt: rt.clone(),
            tables_per_chunk: AtomicUsize::new(0),
            last_blocks: Default::default(),
            turns: turns.clone(),
            route: route.clone(),
            known_scope: known_scope.clone(),
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

/// Each tag a `3,` line names, and its place among its STABLE's tags (`None`: not one).
type TagSlots = Vec<(String, Option<usize>)>;

/// What the reader thread needs besides the file.
struct ReaderCtx {
    subtables: Subtables,
    /// None in a dry run.
    client: Option<Client>,
    db: String,
    rt: tokio::runtime::Handle,
    totals: Arc<Totals>,
    /// STABLEs created by `2,` lines.
    schemas: HashMap<String, Arc<StableSchema>>,
    /// Subtables declared since the last chunk, per STABLE and vgroup, with their tags and no
    /// rows.
    declared: HashMap<(String, usize), RowBlock>,
    /// Subtables declared since the last chunk, in order: they join `subtables` together
    /// before the chunk is sent (one write lock per chunk, not per line, while workers read).
    pending: Vec<(String, Subtable)>,
    /// Per STABLE, the tag list of its last `3,` line and the place of each of those tags in
    /// the STABLE (`None`: not one of its tags, ignored).
    tag_slots: HashMap<String, (String, TagSlots)>,
    /// Vgroups of the database: a subtable's group is computed once, when it is declared.
    vgroups: u32,
    /// Blocks of created subtables, handed back by their creation to be dropped here.
    spent: Arc<parking_lot::Mutex<Vec<Vec<RowBlock>>>>,
    /// The workers' turns: a re-declaration waits for the chunks before it to be written.
    turns: Arc<Turns>,
}

impl ReaderCtx {
    /// Makes the subtables declared since the last chunk known to the workers from chunk
    /// `seq` (the one about to be sent) on and starts creating them in the database (`IF NOT
    /// EXISTS`: a row-less write carrying their tags, retried as any write is); returns that
    /// creation, which chunk `seq` waits for before its rows are written.
    fn hand_over_declared(&mut self, seq: u64) -> Option<Creates> {
        // Dropped here, by the thread that allocated their tags, as what it frees itself
        // mimalloc takes back at once; freed by another thread, each of a subtable's tag
        // strings went through a cross-thread free list.
        drop(std::mem::take(&mut *self.spent.lock()));
        if !self.pending.is_empty() {
            // New entries are added while workers parse earlier chunks (they yield the lock
            // every `MAP_YIELD_LINES` lines; `from_chunk` keeps the entries from them). A
            // re-declaration replaces an entry those chunks may still read: it waits until
            // they are written (TSBS never re-declares).
            let mut again = Vec::new();
            {
                let mut map = self.subtables.write();
                for (name, mut sub) in self.pending.drain(..) {
                    sub.from_chunk = seq;
                    if let Some(sub) = map.insert_new(&name, sub) {
                        again.push((name, sub));
                    }
                }
            }
            if !again.is_empty() {
                self.turns.wait_for(seq);
                let mut map = self.subtables.write();
                for (name, sub) in again {
                    map.insert(&name, sub);
                }
            }
        }
        let Some(client) = &self.client else {
            self.declared.clear();
            return None;
        };
        if self.declared.is_empty() {
            return None;
        }
        let blocks: Vec<RowBlock> = self.declared.drain().map(|(_, b)| b).collect();
        let mut schemas: Vec<StableSchema> = Vec::new();
        for b in &blocks {
            if !schemas.iter().any(|s| s.name == b.stable()) {
                if let Some(s) = self.schemas.get(b.stable()) {
                    schemas.push(StableSchema::clone(s));
                }
            }
        }
        let (client, db, spent) = (client.clone(), self.db.clone(), self.spent.clone());
        let task = self.rt.spawn(async move {
            let tables: usize = blocks.iter().map(RowBlock::num_tables).sum();
            let res = client
                .write_blocks(&db, &schemas, &blocks, &|_| false, None)
                .await
                .map(|_| ())
                .map_err(|e| Arc::from(format!("creating {tables} subtables: {e}")));
            spent.lock().push(blocks);
            res
        });
        let creates = async move {
            task.await
                .unwrap_or_else(|e| Err(Arc::from(format!("creating subtables: {e}"))))
        };
        Some(futures::FutureExt::shared(futures::FutureExt::boxed(
            creates,
        )))
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
    // Room for a chunk of typical lines, bounded: a huge --batch-size grows it as it fills.
    let reserve = batch.saturating_mul(200).min(CHUNK_RESERVE_BYTES_MAX);
    let mut chunk = Vec::with_capacity(reserve);
    let mut rows_in_chunk = 0;
    let mut line_no = 0usize;
    let mut first_line = 1usize;
    let mut seq = 0u64;
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
            let creates = ctx.hand_over_declared(seq);
            let text = std::mem::replace(&mut chunk, Vec::with_capacity(reserve));
            if tx
                .send(Chunk {
                    seq,
                    first_line,
                    text,
                    creates,
                })
                .is_err()
            {
                return Err("all workers stopped".into());
            }
            rows_in_chunk = 0;
            seq += 1;
        }
    }
    let creates = ctx.hand_over_declared(seq);
    if !chunk.is_empty() {
        let _ = tx.send(Chunk {
            seq,
            first_line,
            text: chunk,
            creates,
        });
    } else if let Some(c) = creates {
        // Subtables declared after the last row: no worker waits for them.
        ctx.rt.block_on(c).map_err(|e| e.to_string())?;
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
            // The tags' places are the new schema's.
            ctx.tag_slots.remove(stable);
            let Some(client) = client else {
                // Dry run: the schema as the statement gives it, so rows are parsed into
                // columns of their types as in a load.
                let schema = dry_run_schema(db, stable, sql)?;
                ctx.schemas.insert(stable.to_string(), Arc::new(schema));
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
            let (names_text, values_text) = subtable_sql_parts(sql)?;
            let Some(schema) = ctx.schemas.get(stable).cloned() else {
                return Err(format!(
                    "subtable {table} uses STABLE {stable}, which was not created"
                ));
            };
            // Every `3,` line of a STABLE names the same tags: their places are looked up once.
            let slots = match ctx.tag_slots.get(stable) {
                Some((text, slots)) if text == names_text => slots,
                _ => {
                    let slots = names_text
                        .trim_start_matches('(')
                        .trim_end_matches(')')
                        .split(',')
                        .map(|n| (n.trim().to_string(), schema.tag_index(n.trim())))
                        .collect();
                    let e = (names_text.to_string(), slots);
                    &ctx.tag_slots
                        .entry(stable.to_string())
                        .insert_entry(e)
                        .into_mut()
                        .1
                }
            };
            let values = parse_tuple(values_text)?;
            if values.len() != slots.len() {
                return Err(format!(
                    "{} tag names but {} tag values in '{sql}'",
                    slots.len(),
                    values.len()
                ));
            }
            let mut tags = vec![Value::Null; schema.tags.len()];
            for ((n, slot), v) in slots.iter().zip(values) {
                if let Some(i) = *slot {
                    let def = &schema.tags[i];
                    tags[i] = def
                        .data_type
                        .coerce(v)
                        .map_err(|e| format!("tag '{n}' of {table}: {e}"))?;
                }
            }
            let group =
                tidal_common::vgroup_index(tidal_common::hash_table_name(db, table), ctx.vgroups);
            if ctx.client.is_some() {
                // One block per STABLE and vgroup: each is sent to its vgroup as it is.
                let types: Vec<_> = schema.columns.iter().map(|c| c.data_type).collect();
                ctx.declared
                    .entry((schema.name.clone(), group))
                    .or_insert_with(|| RowBlock::new(schema.name.clone(), &types))
                    .add_table(table, Some(tags));
            }
            let sub = Subtable {
                schema,
                group,
                from_chunk: 0,
            };
            ctx.pending.push((table.to_string(), sub));
            Ok(())
        }
        other => Err(format!("command type {other} is not supported")),
    }
}

/// The tag name list `(<names>)` and the tag values `(<values>)` of a `3,` line's
/// `create table <t> using <stable> (<names>) tags (<values>)` (keywords in any case).
fn subtable_sql_parts(sql: &str) -> Result<(&str, &str), String> {
    let using = find_word(sql, "using").ok_or_else(|| format!("no tag name list in '{sql}'"))?;
    let names_at = sql
        .get(using..)
        .and_then(|r| r.find('('))
        .map(|p| using + p)
        .ok_or_else(|| format!("no tag name list in '{sql}'"))?;
    let tags_kw = find_word(sql, "tags").ok_or_else(|| format!("no TAGS in '{sql}'"))?;
    let names_text = sql
        .get(names_at..tags_kw)
        .ok_or_else(|| format!("bad tag name list in '{sql}'"))?
        .trim();
    let values_text = sql.get(tags_kw + 4..).unwrap_or("").trim();
    Ok((names_text, values_text))
}

/// Where the first ` <word> ` or ` <word>(` (`word` in lower case, matched in any case)
/// starts in `s`, after its leading space.
fn find_word(s: &str, word: &str) -> Option<usize> {
    let b = s.as_bytes();
    let w = word.as_bytes();
    (0..b.len()).find_map(|i| {
        let at = i + 1;
        let after = b.get(at + w.len());
        (b[i] == b' '
            && b.get(at..at + w.len())?.eq_ignore_ascii_case(w)
            && (after == Some(&b' ') || (after == Some(&b'(') && word == "tags")))
            .then_some(at)
    })
}

/// The STABLE a `2,` line's `create table <stable> (<columns>) tags (<tags>)` defines, read
/// without a server (a dry run).
fn dry_run_schema(db: &str, stable: &str, sql: &str) -> Result<StableSchema, String> {
    let stmts = tidal_sql::parse(sql).map_err(|e| format!("{sql}: {e}"))?;
    match stmts.into_iter().next() {
        Some(tidal_sql::ast::Statement::CreateStable {
            name,
            columns,
            tags,
            ..
        }) if name == stable => {
            let schema = StableSchema {
                db: db.to_string(),
                name,
                version: tidal_common::SchemaVersion(1),
                columns,
                tags,
            };
            schema.validate().map_err(|e| format!("{sql}: {e}"))?;
            Ok(schema)
        }
        _ => Err(format!(
            "expected 'create table {stable} (...) tags (...)', got '{sql}'"
        )),
    }
}

/// Parses `(v1, v2, ...)`: single-quoted strings (`''` is a quote), `null`, integers and
/// floats (a `3,` line's tags).
fn parse_tuple(s: &str) -> Result<Vec<Value>, String> {
    let inner = s
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| format!("expected '(...)', got '{s}'"))?;
    let mut toks = Tokens::new(inner);
    let mut out = Vec::new();
    while let Some(t) = toks.next_token()? {
        out.push(match t {
            Token::Quoted(v) => Value::Str(v),
            Token::Bare(b) => scalar(b).ok_or_else(|| format!("bad value '{b}' in '{s}'"))?,
        });
    }
    Ok(out)
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
    db: String,
    totals: Arc<Totals>,
    subtables: Subtables,
    writer: Option<Writer>,
    schemaless: Option<Schemaless>,
    rt: tokio::runtime::Handle,
    /// Subtables in the last chunk, to size the next chunk's index.
    tables_per_chunk: AtomicUsize,
    /// Rows of each (STABLE, vgroup) block of the last chunk, to size the next chunk's.
    last_blocks: parking_lot::Mutex<Vec<BlockRows>>,
    turns: Arc<Turns>,
    /// As [`ReaderCtx::route`].
    route: Option<Arc<RouteTable>>,
    /// The writer's [`Writer::known_generation`] last seen and the [`KnownScope`]
    /// generation standing for it (shared by the workers).
    known_scope: Arc<parking_lot::Mutex<Option<(u64, u64)>>>,
}

/// Hands chunks to the writer in file order although workers finish them in any order.
///
/// Why: TSBS files are in time order, so a chunk's rows come after the previous chunk's for
/// every subtable. Handed over in that order, each subtable's rows reach its vnode in order
/// and are appended; out of order, every row of an overtaken chunk must be fitted in between
/// rows the vnode already holds. A worker waits only while the chunk before its own is still
/// being parsed, and the reader deals chunks out in order, so the chunk waited for is always
/// in a worker's hands.
#[derive(Default)]
struct Turns {
    next: parking_lot::Mutex<u64>,
    changed: parking_lot::Condvar,
}

impl Turns {
    /// The turn of chunk `seq`, taken when the chunk is received: it passes to `seq + 1` when
    /// the ticket is dropped, after [`Ticket::wait`] (which a drop does if the holder did not,
    /// except while unwinding, so that a panicking worker cannot stall the others).
    fn ticket(&self, seq: u64) -> Ticket<'_> {
        Ticket {
            turns: self,
            seq,
            waited: false,
        }
    }

    /// Blocks until every chunk before `seq` has been handed over.
    fn wait_for(&self, seq: u64) {
        let mut next = self.next.lock();
        while *next < seq {
            self.changed.wait(&mut next);
        }
    }
}

struct Ticket<'a> {
    turns: &'a Turns,
    seq: u64,
    waited: bool,
}

impl Ticket<'_> {
    /// Blocks until every chunk before this one has been handed over.
    fn wait(&mut self) {
        self.turns.wait_for(self.seq);
        self.waited = true;
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        if !self.waited && !std::thread::panicking() {
            self.wait();
        }
        let mut next = self.turns.next.lock();
        *next = (*next).max(self.seq + 1);
        self.turns.changed.notify_all();
    }
}

impl WorkerCtx {
    fn work(self, rx: ChunkRx) {
        loop {
            let chunk = match rx.lock().recv() {
                Ok(c) => c,
                Err(_) => return,
            };
            let ticket = self.turns.ticket(chunk.seq);
            match self.format {
                Format::Influx => self.influx(chunk, ticket),
                Format::Tdengine => self.tdengine(chunk, ticket),
            }
        }
    }

    fn influx(&self, chunk: Chunk, mut ticket: Ticket<'_>) {
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
        // Subtables the writer knows to exist need no tags (none are even converted). A
        // `true` answer holds until the writer forgets (its set full): the per-thread series
        // maps remember it until then, rather than ask the writer's lock for every line.
        let contains = |t: &str| writer.knows(t);
        let generation = {
            let seen = writer.known_generation();
            let mut scope = self.known_scope.lock();
            match *scope {
                Some((g, ours)) if g == seen => ours,
                _ => {
                    let ours = KnownScope::new_generation();
                    *scope = Some((seen, ours));
                    ours
                }
            }
        };
        let known = Known {
            contains: &contains,
            scope: Some(KnownScope::new(generation, "")),
        };
        let res = self.rt.block_on(async {
            let p = sl
                .prepare(&self.db, &[&chunk.text[..]], &opts, &known)
                .await?;
            let rows: usize = p.blocks.iter().map(RowBlock::num_rows).sum();
            ticket.wait();
            match p.vgroups {
                // Each block is in one vgroup of the map it was built with: not routed again.
                Some((route, groups)) if groups.len() == p.blocks.len() => {
                    for (b, g) in p.blocks.into_iter().zip(groups) {
                        writer.write_block_in(b, route.clone(), g).await?;
                    }
                }
                _ => {
                    for b in p.blocks {
                        writer.write_block(b).await?;
                    }
                }
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

    fn tdengine(&self, chunk: Chunk, mut ticket: Ticket<'_>) {
        let mut rows = 0u64;
        let mut metrics = 0u64;
        let mut acc = Blocks::with_capacity(
            self.tables_per_chunk.load(Ordering::Relaxed),
            std::mem::take(&mut *self.last_blocks.lock()),
        );
        let mut subtables = self.subtables.read();
        let mut cursor = NearCursor::default();
        for (i, raw) in chunk.text.split(|b| *b == b'\n').enumerate() {
            if raw.is_empty() {
                continue;
            }
            if i % MAP_YIELD_LINES == MAP_YIELD_LINES - 1 {
                parking_lot::RwLockReadGuard::bump(&mut subtables);
            }
            let line_no = chunk.first_line + i;
            match self.tdengine_row(raw, chunk.seq, &subtables, &mut cursor, &mut acc) {
                Ok(n) => {
                    rows += 1;
                    metrics += n;
                }
                Err(e) => self.totals.reject(|| format!("line {line_no}: {e}")),
            }
        }
        drop(subtables);
        self.tables_per_chunk
            .store(acc.index.len(), Ordering::Relaxed);
        *self.last_blocks.lock() = acc
            .targets
            .iter()
            .map(|t| (t.schema.clone(), t.group, t.runs_rows()))
            .collect();
        // Before any way out of this function: a later chunk's worker writes once this one
        // passes its turn on, and its rows may name the subtables created here.
        if let Some(c) = chunk.creates {
            if let Err(e) = self.rt.block_on(c) {
                self.totals
                    .reject(|| format!("lines from {}: {e}", chunk.first_line));
                return;
            }
        }
        let mut blocks = Vec::with_capacity(acc.targets.len());
        for t in acc.targets {
            let group = t.group;
            match t.into_block() {
                Ok(b) => blocks.push((b, group)),
                Err(e) => {
                    // The builder keeps RowBlock's invariants; this is a bug, not bad input.
                    self.totals
                        .reject(|| format!("lines from {}: {e}", chunk.first_line));
                    return;
                }
            }
        }
        if let Some(w) = &self.writer {
            ticket.wait();
            let res = self.rt.block_on(async {
                for (b, group) in blocks {
                    write_block(w, b, self.route.as_ref(), group).await?;
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
    /// The values are parsed straight into the columns of the subtable's (STABLE, vgroup)
    /// block; a bad line appends nothing.
    fn tdengine_row<'c>(
        &self,
        raw: &'c [u8],
        seq: u64,
        subtables: &SubtableMap,
        cursor: &mut NearCursor,
        acc: &mut Blocks<'c>,
    ) -> Result<u64, String> {
        let (table, n, values) = match plain_row(raw) {
            Some((table, n, at)) => (table, n, Values::Plain(at)),
            None => {
                let (table, n, values) = split_row(raw)?;
                (table, n, Values::Text(values))
            }
        };
        let h = name_hash(table);
        let targets = &acc.targets;
        let found = acc
            .index
            .get(h, table, |(ti, si)| targets[ti as usize].table(si));
        let (ti, si) = match found {
            Some(x) => x,
            None => {
                let sub = subtables.find(table, h, seq, cursor).ok_or_else(|| {
                    format!("table '{table}' was not declared by a '3,' line before its rows")
                })?;
                let ti = match acc
                    .targets
                    .iter()
                    .position(|t| t.group == sub.group && Arc::ptr_eq(&t.schema, &sub.schema))
                {
                    Some(ti) => ti,
                    None => {
                        let rows = acc.rows_hint(&sub.schema, sub.group);
                        acc.targets
                            .push(Target::new(sub.schema.clone(), sub.group, rows));
                        acc.targets.len() - 1
                    }
                };
                // No tags: the reader created the subtable before the chunk was written.
                let si = acc.targets[ti].add_table(table);
                acc.index.insert(h, table, (ti as u32, si));
                (ti as u32, si)
            }
        };
        let target = &mut acc.targets[ti as usize];
        let values = match values {
            Values::Plain(at) => {
                if target.push_row_plain(si, raw.get(at..).unwrap_or_default()) {
                    return Ok(n);
                }
                // Not the usual shape: the general parse, which explains what is wrong.
                split_row(raw)?.2
            }
            Values::Text(values) => values,
        };
        target
            .push_row(si, values)
            .map_err(|e| format!("{e} (table '{table}')"))?;
        Ok(n)
    }
}

/// Queues a block whose subtables are all in vgroup `group` (of `route`, when the loader has
/// one) on `w`.
async fn write_block(
    w: &Writer,
    b: RowBlock,
    route: Option<&Arc<RouteTable>>,
    group: usize,
) -> Result<(), tidal_client::ClientError> {
    match route {
        Some(r) => w.write_block_in(b, r.clone(), group).await,
        None => w.write_block(b).await,
    }
}

/// Where a row's values are: from byte `Plain(i)` of a line [`plain_row`] took, or the text
/// [`split_row`] found.
enum Values<'c> {
    Plain(usize),
    Text(&'c str),
}

/// `1,<table>,<n>,<values>` split as the loader reads any row: the line as text without its
/// trailing white space, `<n>` as a number.
fn split_row(raw: &[u8]) -> Result<(&str, u64, &str), String> {
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
    Ok((table, n, values))
}

/// The usual row, `1,<table>,<digits>,(` and the rest: its table, `<n>` and where its values
/// start (at the `(`), read without converting the line to text first. `None` for anything
/// else, which [`split_row`] then reads (a row this takes, it reads the same way).
///
/// Why: at 100,000 trucks the loader's own CPU is most of the machine's, and splitting each
/// line as text (a UTF-8 check, a trim, a `splitn`, a `parse`) took a third of its parse.
fn plain_row(raw: &[u8]) -> Option<(&str, u64, usize)> {
    let rest = raw.strip_prefix(b"1,")?;
    let name_len = rest.iter().position(|&b| b == b',')?;
    let table = std::str::from_utf8(rest.get(..name_len)?).ok()?;
    let digits = rest.get(name_len + 1..)?;
    let (n, len) = tidal_lineproto::integer_prefix(digits)?;
    if n < 0 || digits.get(len..len + 2) != Some(b",(".as_slice()) {
        return None;
    }
    Some((table, n as u64, 2 + name_len + 1 + len + 1))
}

/// Subtables by name, as declared by `3,` lines, in the order declared. With 100,000s of
/// subtables every row of a chunk looks its subtable up here (a chunk holds a row or two of
/// each), and a probe of a map of them was a cache miss per row, a fifth of the loader's CPU
/// at 100,000 trucks. A file lists its devices in much the same order every interval, the
/// order they were declared in, so a row's subtable is usually among the few declared after
/// (or just before) the last one found, or after the last late one probed for
/// ([`NearCursor`]): those are checked first, in memory order, by the names' hashes
/// (`hashes`, 8 bytes an entry, so the window can be 128 entries wide: TSBS's held-back
/// points move a device dozens of rows between intervals), and a hit is checked against the
/// name itself.
struct SubtableMap {
    /// [`name_hash`], but for tests of colliding hashes.
    hash: fn(&str) -> u64,
    /// The entries' names, packed: a window's names share cache lines (an entry holding its
    /// own name took a line or more each, and checking a hash hit against it was a cache miss
    /// a row).
    names: PackedNames,
    /// [`name_hash`] of each entry's name.
    hashes: Vec<u64>,
    subs: Vec<Subtable>,
    /// Name -> entry.
    index: NameIndex<String, u32>,
}

/// The hash of a subtable name that [`SubtableMap`] and a chunk's [`NameIndex`] share, so a
/// row's name is hashed once. Fixed, not random: both only ever compare hashes and then
/// names, and a collision costs a lookup, not a wrong answer.
fn name_hash(name: &str) -> u64 {
    std::hash::BuildHasher::hash_one(&foldhash::fast::FixedState::with_seed(0x7464_616c), name)
}

impl Default for SubtableMap {
    fn default() -> Self {
        SubtableMap {
            hash: name_hash,
            names: PackedNames::default(),
            hashes: Vec::new(),
            subs: Vec::new(),
            index: NameIndex::with_capacity(0),
        }
    }
}

impl SubtableMap {
    /// The entry of `name` (whose hash is `h`), from the index.
    fn position(&self, name: &str, h: u64) -> Option<usize> {
        let i = self.index.get(h, name, |i| self.names.get(i))?;
        Some(i as usize)
    }

    /// Declares `name` if it is new; else hands `sub` back.
    fn insert_new(&mut self, name: &str, sub: Subtable) -> Option<Subtable> {
        let h = (self.hash)(name);
        if self.position(name, h).is_some() {
            return Some(sub);
        }
        self.push(name, h, sub);
        None
    }

    /// Declares `name` (again: its entry is replaced in place).
    fn insert(&mut self, name: &str, sub: Subtable) {
        let h = (self.hash)(name);
        match self.position(name, h).and_then(|i| self.subs.get_mut(i)) {
            Some(e) => *e = sub,
            None => self.push(name, h, sub),
        }
    }

    /// Appends the entry of `name`, which has none, whose hash is `h`.
    fn push(&mut self, name: &str, h: u64, sub: Subtable) {
        let i = self.names.push(name);
        self.hashes.push(h);
        self.subs.push(sub);
        self.index.insert(h, name, i);
    }

    /// Subtable `name`, whose hash (`self.hash`, [`name_hash`]) is `h`, as the rows of chunk
    /// `seq` see it (declared before them), looked for first near `cursor` (which this
    /// updates).
    fn find(&self, name: &str, h: u64, seq: u64, cursor: &mut NearCursor) -> Option<&Subtable> {
        let is_name = |i| self.names.get(i as u32) == name;
        let probe = || self.position(name, h);
        let i = cursor.find_hash(&self.hashes, h, is_name, probe)?;
        self.subs.get(i).filter(|s| s.from_chunk <= seq)
    }
}

/// One chunk's rows being collected: a block per (STABLE, vgroup), so the writer queues each
/// block whole, and the chunk's subtables.
struct Blocks<'c> {
    targets: Vec<Target>,
    /// Subtable -> (index in `targets`, index of the subtable in that target).
    index: NameIndex<&'c str, (u32, u32)>,
    /// The last chunk's blocks ([`Blocks::rows_hint`]).
    last: Vec<BlockRows>,
}

/// A block's STABLE, vgroup and rows.
type BlockRows = (Arc<StableSchema>, usize, usize);

/// Subtable name -> a position `P`, keyed by the name's hash and checked against a copy of the
/// name the caller keeps (densely: a chunk's in its block, the subtable map's packed): a key
/// borrowed from the chunk would point back into text read long before, a cache miss per row.
/// Only names whose hash another name took first are kept here, as `K`.
struct NameIndex<K, P> {
    by_hash: HashMap<u64, P, foldhash::fast::RandomState>,
    /// Names whose hash another name took first.
    collided: HashMap<K, P, foldhash::fast::RandomState>,
}

impl<K: std::borrow::Borrow<str> + std::hash::Hash + Eq, P: Copy> NameIndex<K, P> {
    fn with_capacity(n: usize) -> Self {
        NameIndex {
            by_hash: HashMap::with_capacity_and_hasher(n, Default::default()),
            collided: HashMap::default(),
        }
    }

    fn len(&self) -> usize {
        self.by_hash.len() + self.collided.len()
    }

    /// The position of `name` (whose hash is `h`); `name_at` gives the name at a position.
    fn get<'a>(&self, h: u64, name: &str, name_at: impl Fn(P) -> &'a str) -> Option<P> {
        match self.by_hash.get(&h) {
            Some(&pos) if name_at(pos) == name => Some(pos),
            Some(_) => self.collided.get(name).copied(),
            None => None,
        }
    }

    /// Adds `name` (not present), whose hash is `h`.
    fn insert<'n>(&mut self, h: u64, name: &'n str, pos: P)
    where
        K: From<&'n str>,
    {
        match self.by_hash.entry(h) {
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(pos);
            }
            std::collections::hash_map::Entry::Occupied(_) => {
                self.collided.insert(K::from(name), pos);
            }
        }
    }
}

impl Blocks<'_> {
    /// Sized for `tables` subtables (the last chunk's count), so the index is not rehashed
    /// as it fills; `last`: the last chunk's blocks, whose sizes size this chunk's.
    fn with_capacity(tables: usize, last: Vec<BlockRows>) -> Self {
        Blocks {
            targets: Vec::new(),
            index: NameIndex::with_capacity(tables),
            last,
        }
    }

    /// Rows to make room for in a new block of `schema` for vgroup `group`: as many as the
    /// last chunk's block of that STABLE and vgroup had (chunks are of equal rows, and a
    /// file's mix of STABLEs changes slowly), so that its columns are not regrown and copied
    /// a dozen times as they fill (a twentieth of the loader's CPU at 100,000 trucks); none
    /// for a block the last chunk did not have.
    fn rows_hint(&self, schema: &Arc<StableSchema>, group: usize) -> usize {
        self.last
            .iter()
            .find(|(s, g, _)| *g == group && s.name == schema.name)
            .map_or(0, |(_, _, rows)| *rows)
    }
}

/// The rows of one STABLE bound for one vgroup, in the parts of a [`RowBlock`].
struct Target {
    schema: Arc<StableSchema>,
    group: usize,
    names: PackedNames,
    runs: Vec<(u32, u32)>,
    columns: Vec<Column>,
}

impl Target {
    /// Columns with room for `rows` rows.
    fn new(schema: Arc<StableSchema>, group: usize, rows: usize) -> Target {
        let columns = schema
            .columns
            .iter()
            .map(|c| Column::empty(c.data_type, rows))
            .collect();
        Target {
            schema,
            group,
            names: PackedNames::default(),
            runs: Vec::new(),
            columns,
        }
    }

    fn table(&self, i: u32) -> &str {
        self.names.get(i)
    }

    fn add_table(&mut self, name: &str) -> u32 {
        self.names.push(name)
    }

    /// Appends the row `(<v1>,...,<vn>)` of subtable `table`: every value parsed into its
    /// column, or nothing appended and the reason returned.
    fn push_row(&mut self, table: u32, tuple: &str) -> Result<(), String> {
        self.push_parsed(table, |t| t.parse_into(tuple))
    }

    /// Appends the row of subtable `table` that `parse` appends to the columns, or, if it
    /// fails, puts the columns back as they were.
    fn push_parsed<E>(
        &mut self,
        table: u32,
        parse: impl FnOnce(&mut Target) -> Result<(), E>,
    ) -> Result<(), E> {
        let len = self.runs_rows();
        if let Err(e) = parse(self) {
            for c in &mut self.columns {
                c.truncate(len);
            }
            return Err(e);
        }
        match self.runs.last_mut() {
            Some((t, n)) if *t == table => *n += 1,
            _ => self.runs.push((table, 1)),
        }
        Ok(())
    }

    /// [`Target::push_row`] for the usual row `(<v1>,...,<vn>)` (maybe followed by white
    /// space): every value a number of the plain shapes (`-?digits[.digits]`) or `null`, or a
    /// bare token without spaces or quotes, as bytes. `false` (nothing appended) for anything
    /// else, which `push_row` then parses; a row this takes, `push_row` reads the same way.
    fn push_row_plain(&mut self, table: u32, tuple: &[u8]) -> bool {
        let tuple = trim_ascii_end(tuple);
        self.push_parsed(table, |t| t.parse_plain(tuple).ok_or(()))
            .is_ok()
    }

    fn parse_plain(&mut self, tuple: &[u8]) -> Option<()> {
        let mut rest = tuple.strip_prefix(b"(")?.strip_suffix(b")")?;
        let ncols = self.columns.len();
        let columns = self.columns.iter_mut().zip(&self.schema.columns);
        for (i, (col, def)) in columns.enumerate() {
            let len = push_plain(col, def.data_type, rest)?;
            // Each value but the last ends at a comma, the last at the end.
            rest = match rest.get(len) {
                Some(b',') if i + 1 < ncols => rest.get(len + 1..)?,
                None if i + 1 == ncols => &[],
                _ => return None,
            };
        }
        Some(())
    }

    fn runs_rows(&self) -> usize {
        self.columns.first().map_or(0, Column::len)
    }

    fn parse_into(&mut self, tuple: &str) -> Result<(), String> {
        let inner = tuple
            .trim()
            .strip_prefix('(')
            .and_then(|r| r.strip_suffix(')'))
            .ok_or_else(|| format!("expected '(...)', got '{tuple}'"))?;
        let mut toks = Tokens::new(inner);
        let ncols = self.columns.len();
        for (i, (col, def)) in self
            .columns
            .iter_mut()
            .zip(self.schema.columns.iter())
            .enumerate()
        {
            let tok = match toks.next_token()? {
                Some(t) => t,
                None => {
                    return Err(format!(
                        "STABLE '{}' has {ncols} columns, the row has {i} values",
                        self.schema.name
                    ))
                }
            };
            push_token(col, def.data_type, tok)
                .map_err(|e| format!("column '{}': {e}", def.name))?;
        }
        if toks.next_token()?.is_some() {
            return Err(format!(
                "STABLE '{}' has {ncols} columns, the row has {} values",
                self.schema.name,
                ncols + 1 + toks.count_rest()?
            ));
        }
        Ok(())
    }

    /// The block, its rows grouped subtable by subtable (each subtable's rows in file order).
    ///
    /// Why: a TSBS file is in time order, so a chunk's rows cycle through the devices and
    /// nearly every run is one row. Sent so, the block carries a run per row, and the vnode
    /// decodes them and regroups the rows itself, on the server's CPU, before it appends them
    /// to its memtable. Grouped here (a counting sort, a gather per column), the block has a
    /// run per subtable, as TSBS's own loaders send a batch per table.
    fn into_block(mut self) -> Result<RowBlock, String> {
        let tables = self.names.ends.len();
        if self.runs.len() > tables {
            let (order, runs) = tidal_common::group_runs(&self.runs, tables, |t| t);
            let order: Vec<usize> = order.into_iter().map(|r| r as usize).collect();
            for c in &mut self.columns {
                *c = c.take(&order);
            }
            self.runs = runs;
        }
        RowBlock::from_parts(RowBlockParts {
            stable: self.schema.name.clone(),
            names: self.names.text,
            ends: self.names.ends,
            tags: vec![None; tables],
            runs: self.runs,
            columns: self.columns,
        })
    }
}

/// Names one after another in one string, name `i` ending at byte `ends[i]` (the layout of a
/// [`RowBlock`]'s subtable names).
#[derive(Default)]
struct PackedNames {
    text: String,
    ends: Vec<u32>,
}

impl PackedNames {
    /// Name `i` ("" past the end).
    fn get(&self, i: u32) -> &str {
        let i = i as usize;
        let start = match i.checked_sub(1) {
            Some(p) => self.ends.get(p).map_or(0, |&e| e as usize),
            None => 0,
        };
        let end = self.ends.get(i).map_or(0, |&e| e as usize);
        self.text.get(start..end).unwrap_or("")
    }

    /// Adds `name`; returns its index.
    fn push(&mut self, name: &str) -> u32 {
        self.text.push_str(name);
        self.ends.push(self.text.len() as u32);
        (self.ends.len() - 1) as u32
    }
}

/// A value of a row tuple: a bare token (number, `null`, `true`) or a quoted string.
enum Token<'a> {
    Bare(&'a str),
    Quoted(String),
}

/// Splits the inside of `(...)` into values: single-quoted strings (`''` is a quote, commas
/// inside are text) and bare tokens between commas, spaces around them ignored.
struct Tokens<'a> {
    s: &'a str,
    i: usize,
    done: bool,
}

impl<'a> Tokens<'a> {
    fn new(s: &'a str) -> Self {
        // `()` holds no value.
        let done = s.trim().is_empty();
        Tokens { s, i: 0, done }
    }

    fn next_token(&mut self) -> Result<Option<Token<'a>>, String> {
        if self.done {
            return Ok(None);
        }
        let bytes = self.s.as_bytes();
        let mut i = self.i;
        while bytes.get(i) == Some(&b' ') {
            i += 1;
        }
        let tok = if bytes.get(i) == Some(&b'\'') {
            let mut v = String::new();
            let mut j = i + 1;
            loop {
                match bytes.get(j) {
                    None => return Err(format!("unterminated string in '({})'", self.s)),
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
                        v.push_str(self.s.get(start..j).unwrap_or(""));
                    }
                }
            }
            i = j + 1;
            while bytes.get(i) == Some(&b' ') {
                i += 1;
            }
            Token::Quoted(v)
        } else {
            let end = memchr_comma(&bytes[i.min(bytes.len())..]).map_or(bytes.len(), |p| i + p);
            let tok = self.s.get(i..end).unwrap_or("").trim();
            i = end;
            Token::Bare(tok)
        };
        match bytes.get(i) {
            Some(b',') => self.i = i + 1,
            None => self.done = true,
            Some(_) => return Err(format!("expected ',' at byte {i} of '({})'", self.s)),
        }
        Ok(Some(tok))
    }

    /// How many values are left (for an error message).
    fn count_rest(&mut self) -> Result<usize, String> {
        let mut n = 0;
        while self.next_token()?.is_some() {
            n += 1;
        }
        Ok(n)
    }
}

fn memchr_comma(b: &[u8]) -> Option<usize> {
    b.iter().position(|c| *c == b',')
}

/// Appends one value to a column of type `t`. DOUBLE/FLOAT, BIGINT and TIMESTAMP values (all
/// of TSBS's) are parsed straight into the column; any other type goes through
/// [`DataType::coerce`] (range checks, string lengths), as SQL values do.
fn push_token(col: &mut Column, t: DataType, tok: Token<'_>) -> Result<(), String> {
    if let Token::Bare(b) = &tok {
        if b.eq_ignore_ascii_case("null") {
            push_null(col);
            return Ok(());
        }
        let fast = match (&mut col.data, t) {
            (ColumnData::Float(d), DataType::Double | DataType::Float) => match b.parse::<f64>() {
                Ok(f) if f.is_finite() => {
                    d.push(f);
                    true
                }
                _ => false,
            },
            (ColumnData::Int(d), DataType::BigInt) | (ColumnData::Timestamp(d), _) => {
                match b.parse::<i64>() {
                    Ok(x) => {
                        d.push(x);
                        true
                    }
                    Err(_) => false,
                }
            }
            _ => false,
        };
        if fast {
            if !col.nulls.is_empty() {
                col.nulls.push(false);
            }
            return Ok(());
        }
    }
    let v = match tok {
        Token::Quoted(s) => Value::Str(s),
        Token::Bare(b) => scalar(b).ok_or_else(|| format!("bad value '{b}'"))?,
    };
    let v = t.coerce(v)?;
    col.push(&v);
    Ok(())
}

/// Appends the value at the start of `s` to a column of type `t` if it is one
/// [`Target::push_row_plain`] takes; returns its length (the caller checks what follows).
fn push_plain(col: &mut Column, t: DataType, s: &[u8]) -> Option<usize> {
    if s.starts_with(b"null") {
        push_null(col);
        return Some(4);
    }
    let len = match (&mut col.data, t) {
        (ColumnData::Float(d), DataType::Double | DataType::Float) => {
            let (v, len) = tidal_lineproto::decimal_prefix(s)?;
            d.push(v);
            len
        }
        (ColumnData::Int(d), DataType::BigInt) | (ColumnData::Timestamp(d), _) => {
            let (v, len) = tidal_lineproto::integer_prefix(s)?;
            d.push(v);
            len
        }
        _ => {
            // Any other type: the bare token as the general parse would see it, converted
            // as it converts it.
            let len = s.iter().position(|&b| b == b',').unwrap_or(s.len());
            let tok = std::str::from_utf8(s.get(..len)?).ok()?;
            let plain = tok.bytes().all(|b| b.is_ascii_graphic() && b != b'\'');
            if !plain || tok.is_empty() || push_token(col, t, Token::Bare(tok)).is_err() {
                return None;
            }
            return Some(len);
        }
    };
    if !col.nulls.is_empty() {
        col.nulls.push(false);
    }
    Some(len)
}

fn trim_ascii_end(mut s: &[u8]) -> &[u8] {
    while let Some((last, rest)) = s.split_last() {
        if !last.is_ascii_whitespace() {
            break;
        }
        s = rest;
    }
    s
}

fn push_null(col: &mut Column) {
    col.push(&Value::Null);
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::seq::SliceRandom;
    use rand::{Rng, SeedableRng};
    use tidal_common::ColumnDef;

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

    fn schema(cols: &[(&str, DataType)]) -> Arc<StableSchema> {
        Arc::new(StableSchema {
            db: "db".into(),
            name: "st".into(),
            version: tidal_common::SchemaVersion(1),
            columns: cols
                .iter()
                .map(|(n, t)| tidal_common::ColumnDef {
                    name: n.to_string(),
                    data_type: *t,
                    codec: None,
                })
                .collect(),
            tags: Vec::new(),
        })
    }

    /// Rows parse straight into typed columns: NULLs, ints into DOUBLE, strings with quotes
    /// and commas, range-checked small ints; a bad row appends nothing and says why.
    #[test]
    fn rows_parse_into_typed_columns_and_bad_rows_append_nothing() {
        let s = schema(&[
            ("ts", DataType::Timestamp),
            ("f", DataType::Double),
            ("i", DataType::TinyInt),
            ("s", DataType::VarChar(8)),
            ("b", DataType::Bool),
        ]);
        let mut t = Target::new(s, 0, 0);
        let a = t.add_table("a");
        let b = t.add_table("b");
        t.push_row(a, "(1,0.5,3,'x,y',true)").unwrap();
        t.push_row(a, "(2, null ,NULL,'It''s',false)").unwrap();
        let bad = [
            ("(3,1.5,300,'z',true)", "column 'i'"),
            ("(3,abc,1,'z',true)", "bad value 'abc'"),
            ("(3,inf,1,'z',true)", "bad value 'inf'"),
            ("(3,1.5,1,'toolongvalue',true)", "VARCHAR(8)"),
            ("(3,1.5,1,'z')", "5 columns, the row has 4 values"),
            ("(3,1.5,1,'z',true,9,9)", "5 columns, the row has 7 values"),
            ("(3,1.5,1,'z,true)", "unterminated string"),
            ("3,1.5,1,'z',true", "expected '(...)'"),
        ];
        for (row, why) in bad {
            let e = t.push_row(b, row).unwrap_err();
            assert!(e.contains(why), "{row}: {e}");
        }
        t.push_row(b, "(3,7,-128,'',1)").unwrap();
        t.push_row(a, "(4,8,127,null,null)").unwrap();
        let block = t.into_block().unwrap();
        // Grouped by subtable: a's three rows (in their order), then b's.
        assert_eq!(block.runs(), &[(0, 3), (1, 1)]);
        let c = block.columns();
        let col = |i: usize| (0..4).map(|r| c[i].get(r)).collect::<Vec<_>>();
        assert_eq!(col(0), [1, 2, 4, 3].map(Value::Timestamp).to_vec());
        assert_eq!(
            col(1),
            vec![
                Value::Float(0.5),
                Value::Null,
                Value::Float(8.0),
                Value::Float(7.0)
            ]
        );
        assert_eq!(
            col(2),
            vec![
                Value::Int(3),
                Value::Null,
                Value::Int(127),
                Value::Int(-128)
            ]
        );
        assert_eq!(
            col(3),
            vec![
                Value::Str("x,y".into()),
                Value::Str("It's".into()),
                Value::Null,
                Value::Str("".into())
            ]
        );
        assert_eq!(
            col(4),
            vec![
                Value::Bool(true),
                Value::Bool(false),
                Value::Null,
                Value::Bool(true)
            ]
        );
    }

    /// The one-pass row reader takes only rows the general one reads, splits them and fills
    /// the columns as it does, and appends nothing when it declines: random rows of values of
    /// the columns' types with odd tokens mixed in, for a mixed schema and TSBS's numeric one.
    #[test]
    fn plain_rows_read_as_general_rows_do() {
        use DataType::*;
        let mixed: &[(&str, DataType)] = &[
            ("ts", Timestamp),
            ("f", Double),
            ("g", Float),
            ("i", BigInt),
            ("t", TinyInt),
            ("s", VarChar(8)),
            ("b", Bool),
        ];
        let typed_mixed = ["1451606400000", "-1.5", "3", "42", "-7", "null", "false"];
        let numeric: &[(&str, DataType)] = &[
            ("ts", Timestamp),
            ("a", Double),
            ("b", Double),
            ("c", Double),
            ("d", BigInt),
        ];
        let typed_numeric = ["1451606400000", "150.86775", "null", "-0.5", "25"];
        let toks = [
            "1451606400000",
            "-5",
            "0",
            "007",
            "12.5",
            "-0.25",
            ".5",
            "5.",
            "1e3",
            "null",
            "NULL",
            " 7",
            "7 ",
            "'x'",
            "'a,b'",
            "true",
            "abc",
            "",
            "300",
            "+3",
            "-",
            "1.2.3",
            "3-4",
            "1 2",
            "99999999999999999999",
            "9223372036854775808",
            "inf",
            "\u{e9}",
            "nul",
            "nullx",
            "null3",
        ];
        let trails = ["", " ", "\r", "\t", "\u{3000}", "x"];
        let heads = [
            "1,a,7,",
            "1,b,12,",
            "1,a,-1,",
            "1,a,+7,",
            "1,a,7, ",
            "2,a,7,",
            "1,\u{e9},7,",
        ];
        let mut rng = StdRng::seed_from_u64(7);
        for (cols, typed) in [(mixed, &typed_mixed[..]), (numeric, &typed_numeric[..])] {
            let s = schema(cols);
            let (mut plain, mut general) = (Target::new(s.clone(), 0, 0), Target::new(s, 0, 0));
            for t in ["a", "b"] {
                plain.add_table(t);
                general.add_table(t);
            }
            let (mut taken, mut declined) = (0, 0);
            for _ in 0..30_000 {
                let n = cols.len() + [0, 0, 0, 0, 1, 2][rng.random_range(0..6)] - 1;
                let vals: Vec<&str> = (0..n)
                    .map(|i| match rng.random_range(0..12) {
                        0..=10 => typed[i.min(typed.len() - 1)],
                        _ => toks[rng.random_range(0..toks.len())],
                    })
                    .collect();
                let head = heads[rng.random_range(0..heads.len())];
                let trail = trails[rng.random_range(0..trails.len())];
                let line = format!("{head}({}){trail}", vals.join(","));
                let raw = line.as_bytes();
                let Some((table, n, at)) = plain_row(raw) else {
                    continue;
                };
                let (t2, n2, values) = split_row(raw).expect("the general split takes it");
                assert_eq!((table, n), (t2, n2), "{line:?}");
                let si = u32::from(table == "b");
                let before = plain.runs_rows();
                let want = general.push_row(si, values);
                if plain.push_row_plain(si, &raw[at..]) {
                    taken += 1;
                    assert!(want.is_ok(), "{line:?}: {want:?}");
                    let read = std::str::from_utf8(trim_ascii_end(&raw[at..])).unwrap();
                    assert_eq!(values.trim(), read, "{line:?}");
                } else {
                    assert_eq!(plain.runs_rows(), before, "{line:?}");
                    if want.is_ok() {
                        declined += 1;
                        plain.push_row(si, values).expect("as the general path did");
                    }
                }
            }
            assert!(
                taken > 500 && declined > 100,
                "{taken} taken, {declined} declined"
            );
            assert_eq!(plain.runs, general.runs);
            let (p, g) = (plain.into_block().unwrap(), general.into_block().unwrap());
            assert_eq!(p.num_rows(), g.num_rows());
            for (a, b) in p.columns().iter().zip(g.columns()) {
                for r in 0..p.num_rows() {
                    let (x, y) = (format!("{:?}", a.get(r)), format!("{:?}", b.get(r)));
                    assert_eq!(x, y, "row {r}");
                }
            }
        }
    }

    /// A `3,` line's tag names and values are found with the keywords in any case, and a
    /// line without them says what is missing.
    #[test]
    fn subtable_lines_split_into_tag_names_and_values() {
        let tsbs = "create table r_truck_0 using readings (name,fleet) tags ('truck_0','North')";
        assert_eq!(
            subtable_sql_parts(tsbs),
            Ok(("(name,fleet)", "('truck_0','North')"))
        );
        assert_eq!(
            subtable_sql_parts("CREATE TABLE t USING st (a, b) TAGS(1, 'x y')"),
            Ok(("(a, b)", "(1, 'x y')"))
        );
        assert_eq!(
            subtable_sql_parts("create table t Using st(a) Tags (2)"),
            Ok(("(a)", "(2)"))
        );
        // A name that only contains a keyword is not one.
        assert_eq!(
            subtable_sql_parts("create table usingtags using st (a) tags (2)"),
            Ok(("(a)", "(2)"))
        );
        for (bad, why) in [
            ("create table t st (a) tags (1)", "no tag name list"),
            ("create table t using st tags (1)", "bad tag name list"),
            ("create table t using st (a) (1)", "no TAGS"),
        ] {
            let e = subtable_sql_parts(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    /// Names whose hashes collide are still told apart (every name given the same hash).
    #[test]
    fn name_index_tells_colliding_names_apart() {
        let names: Vec<String> = (0..50).map(|i| format!("t{i}")).collect();
        let mut idx: NameIndex<&str, (u32, u32)> = NameIndex::with_capacity(0);
        let at = |(a, _): (u32, u32)| names[a as usize].as_str();
        for (i, n) in names.iter().enumerate() {
            assert_eq!(idx.get(7, n, at), None);
            idx.insert(7, n, (i as u32, 0));
        }
        assert_eq!(idx.len(), 50);
        for (i, n) in names.iter().enumerate() {
            assert_eq!(idx.get(7, n, at), Some((i as u32, 0)));
        }
        assert_eq!(idx.get(7, "other", at), None);
        // Distinct hashes take the fast path.
        let mut idx: NameIndex<&str, (u32, u32)> = NameIndex::with_capacity(4);
        for (i, n) in names.iter().enumerate() {
            idx.insert(i as u64, n, (i as u32, 1));
        }
        assert_eq!(idx.get(3, "t3", at), Some((3, 1)));
        assert_eq!(idx.get(3, "t4", at), None);
    }

    /// Whatever order rows name their subtables in (declaration order with skips and late
    /// rows, backwards, at random), each finds its own, and a subtable declared again takes
    /// its new declaration; also when every name has the same hash (only names tell them
    /// apart) or a few do.
    #[test]
    fn subtables_are_found_in_any_order() {
        let schema = |n: &str| {
            Arc::new(StableSchema {
                db: "db".into(),
                name: n.into(),
                version: tidal_common::SchemaVersion(1),
                columns: vec![ColumnDef::new("ts", DataType::Timestamp)],
                tags: vec![],
            })
        };
        let (a, b) = (schema("a"), schema("b"));
        let names: Vec<String> = (0..100).map(|i| format!("truck_{i}")).collect();
        let mut rng = StdRng::seed_from_u64(3);
        let mut orders: Vec<Vec<usize>> = vec![(0..100).collect(), (0..100).rev().collect()];
        orders.push((0..100).filter(|_| rng.random_bool(0.8)).collect());
        let mut late: Vec<usize> = (0..100).collect();
        for i in (0..98).step_by(7) {
            late.swap(i, i + 2);
        }
        orders.push(late);
        let mut shuffled: Vec<usize> = (0..100).collect();
        shuffled.shuffle(&mut rng);
        orders.push(shuffled);
        let hashes: [fn(&str) -> u64; 3] = [name_hash, |_| 7, |n| name_hash(n) % 3];
        for hash in hashes {
            let mut m = SubtableMap {
                hash,
                ..SubtableMap::default()
            };
            for (i, n) in names.iter().enumerate() {
                let sub = Subtable {
                    schema: a.clone(),
                    group: i,
                    from_chunk: 0,
                };
                m.insert(n, sub);
            }
            for order in &orders {
                let mut cursor = NearCursor::default();
                for &i in order {
                    let sub = m.find(&names[i], hash(&names[i]), 0, &mut cursor);
                    assert_eq!(sub.expect("declared").group, i, "{}", names[i]);
                }
            }
            let mut cursor = NearCursor::default();
            for missing in ["truck_100", "truck_", ""] {
                assert!(m.find(missing, hash(missing), 0, &mut cursor).is_none());
            }
            let sub = Subtable {
                schema: b.clone(),
                group: 700,
                from_chunk: 0,
            };
            m.insert("truck_7", sub);
            let mut cursor = NearCursor::default();
            let sub = m.find("truck_7", hash("truck_7"), 0, &mut cursor);
            let sub = sub.expect("declared");
            assert_eq!((sub.group, sub.schema.name.as_str()), (700, "b"));
            assert_eq!(m.subs.len(), 100);
        }
    }

    /// A subtable handed over with chunk 5 is not there for the rows of chunk 4 (which did
    /// not wait for its creation) and is for those of chunks 5 and later; declaring a name
    /// again is left to the caller by `insert_new`, which keeps the entry earlier chunks see.
    #[test]
    fn a_subtable_is_seen_from_the_chunk_it_was_handed_over_with() {
        let schema = Arc::new(StableSchema {
            db: "d".into(),
            name: "a".into(),
            columns: vec![ColumnDef::new("ts", DataType::Timestamp)],
            tags: vec![],
            version: tidal_common::SchemaVersion(1),
        });
        let sub = |group, from_chunk| Subtable {
            schema: schema.clone(),
            group,
            from_chunk,
        };
        let mut m = SubtableMap::default();
        assert!(m.insert_new("t1", sub(1, 5)).is_none());
        let h = name_hash("t1");
        let mut cursor = NearCursor::default();
        assert!(m.find("t1", h, 4, &mut cursor).is_none());
        for seq in [5, 6, u64::MAX] {
            assert_eq!(m.find("t1", h, seq, &mut cursor).map(|s| s.group), Some(1));
        }
        let back = m.insert_new("t1", sub(2, 7));
        assert_eq!(back.map(|s| (s.group, s.from_chunk)), Some((2, 7)));
        assert_eq!(m.find("t1", h, 6, &mut cursor).map(|s| s.group), Some(1));
        m.insert("t1", sub(2, 7));
        assert!(m.find("t1", h, 6, &mut cursor).is_none());
        assert_eq!(m.find("t1", h, 7, &mut cursor).map(|s| s.group), Some(2));
        assert_eq!(m.subs.len(), 1);
    }

    /// A new block gets room for as many rows as the last chunk's block of its STABLE and
    /// vgroup (the same schema or a newer one of the same STABLE), none otherwise.
    #[test]
    fn blocks_are_sized_by_the_last_chunks() {
        let schema = |n: &str| {
            Arc::new(StableSchema {
                db: "db".into(),
                name: n.into(),
                version: tidal_common::SchemaVersion(1),
                columns: vec![
                    ColumnDef::new("ts", DataType::Timestamp),
                    ColumnDef::new("v", DataType::Double),
                ],
                tags: vec![],
            })
        };
        let (a, b) = (schema("a"), schema("b"));
        let acc = Blocks::with_capacity(0, vec![(a.clone(), 0, 900), (a.clone(), 1, 40)]);
        assert_eq!(acc.rows_hint(&a, 0), 900);
        assert_eq!(acc.rows_hint(&a, 1), 40);
        assert_eq!(
            acc.rows_hint(&schema("a"), 0),
            900,
            "a newer schema of the STABLE"
        );
        assert_eq!(acc.rows_hint(&a, 2), 0);
        assert_eq!(acc.rows_hint(&b, 0), 0);
        let t = Target::new(a.clone(), 0, acc.rows_hint(&a, 0));
        for c in &t.columns {
            assert_eq!(c.len(), 0);
            assert!(c.capacity() >= 900, "room for the last chunk's rows");
        }
    }
}
