//! [`Writer`]: a batching writer for high ingest rates. It takes rows for any subtable of one
//! database, buffers them per vgroup, sends a buffer when it reaches a row, byte or age
//! threshold, keeps several batches in flight per vgroup, and retries a batch on a stale route
//! or a transient failure until it is acknowledged or its retry time runs out. Each batch's
//! outcome is reported to an optional callback and summed in [`WriterStats`].
//!
//! Invariants:
//! - **Bounded memory.** Rows wait in a bounded command queue (`queue_depth` commands), in at
//!   most one open buffer per vgroup (flushed at `batch_rows`/`batch_bytes`), and in at most
//!   `in_flight_per_vgroup` batches per vgroup. When all are full, [`Writer::write`] waits:
//!   back-pressure reaches the producer instead of memory growing.
//! - **No duplicates from retries.** A batch is re-sent as is; a row is identified by
//!   (table, ts) and a repeated row overwrites itself, so an unknown outcome followed by a
//!   retry never duplicates rows.
//! - **`flush` is a barrier.** When [`Writer::flush`] returns `Ok`, every row written before it
//!   was acknowledged (durable under the database's WAL level); otherwise it returns the first
//!   batch error since the previous flush.
//!
//! ```no_run
//! # async fn demo() -> Result<(), tidal_client::ClientError> {
//! use tidal_client::{Client, Writer, WriterConfig};
//! use tidal_common::Value;
//! let client = Client::connect("127.0.0.1:6030").await?;
//! let writer = Writer::new(client, WriterConfig::new("iot"));
//! // Rows of subtable r_truck_0 of STABLE readings (auto-created with these tags).
//! let tags = Some(vec![Value::Str("truck_0".into())]);
//! writer
//!     .write_row("r_truck_0", "readings", tags, vec![Value::Timestamp(1_451_606_400_000), Value::Float(52.3)])
//!     .await?;
//! writer.close().await?;
//! # Ok(()) }
//! ```

use crate::{Client, ClientError};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tidal_common::{Column, StableSchema, StatusCode, TableWrite, Value, VgroupId};
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio::task::JoinSet;

/// A per-batch outcome callback.
pub type OnBatch = Arc<dyn Fn(&BatchOutcome) + Send + Sync>;

/// Settings of a [`Writer`]. The defaults suit bulk loading on one machine.
#[derive(Clone)]
pub struct WriterConfig {
    /// The database every row goes to.
    pub db: String,
    /// A vgroup's buffer is sent when it holds this many rows.
    pub batch_rows: usize,
    /// ... or this many bytes (estimated from the values).
    pub batch_bytes: usize,
    /// ... or when its oldest row is this old.
    pub linger: Duration,
    /// Batches sent and not yet acknowledged, per vgroup.
    pub in_flight_per_vgroup: usize,
    /// Commands (rows or tables) waiting for the writer task.
    pub queue_depth: usize,
    /// How long one batch is retried (stale routes, unavailable nodes) before it fails.
    pub retry_for: Duration,
    /// Called once per batch with its outcome, from the writer's tasks.
    pub on_batch: Option<OnBatch>,
}

impl WriterConfig {
    pub fn new(db: impl Into<String>) -> WriterConfig {
        WriterConfig {
            db: db.into(),
            batch_rows: 10_000,
            batch_bytes: 4 << 20,
            linger: Duration::from_millis(100),
            in_flight_per_vgroup: 4,
            queue_depth: 1024,
            retry_for: Duration::from_secs(60),
            on_batch: None,
        }
    }
}

/// What happened to one batch.
#[derive(Debug, Clone)]
pub struct BatchOutcome {
    /// The vgroup the batch was built for (its tables may have moved by the time it was sent).
    pub vgroup: VgroupId,
    pub rows: u64,
    pub tables: usize,
    /// Sends of this batch (1 if the first send was acknowledged).
    pub attempts: u32,
    pub result: Result<(), ClientError>,
}

/// Totals since the writer started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriterStats {
    pub rows_written: u64,
    pub rows_failed: u64,
    pub batches: u64,
    /// Sends beyond the first, over all batches.
    pub retries: u64,
}

#[derive(Default)]
struct Counters {
    rows_written: AtomicU64,
    rows_failed: AtomicU64,
    batches: AtomicU64,
    retries: AtomicU64,
}

enum Cmd {
    Table(TableWrite),
    Flush(oneshot::Sender<Result<(), ClientError>>),
}

/// Rows buffered for one vgroup.
struct Buffer {
    tables: Vec<TableWrite>,
    index: HashMap<String, usize>,
    rows: usize,
    bytes: usize,
    since: Instant,
}

impl Buffer {
    fn new() -> Buffer {
        Buffer {
            tables: Vec::new(),
            index: HashMap::new(),
            rows: 0,
            bytes: 0,
            since: Instant::now(),
        }
    }

    fn push(&mut self, t: TableWrite) {
        if self.tables.is_empty() {
            self.since = Instant::now();
        }
        self.rows += t.num_rows();
        self.bytes += estimate_bytes(&t);
        match self
            .index
            .get(&t.table)
            .and_then(|i| self.tables.get_mut(*i))
        {
            // Same table, same column count: append columns. A different column count means
            // a schema change between the two writes; keep them as separate entries.
            Some(e) if e.columns.len() == t.columns.len() && e.stable == t.stable => {
                for (a, b) in e.columns.iter_mut().zip(t.columns.iter()) {
                    a.extend(b);
                }
                if e.tags.is_none() {
                    e.tags = t.tags;
                }
            }
            _ => {
                self.index.insert(t.table.clone(), self.tables.len());
                self.tables.push(t);
            }
        }
    }
}

fn estimate_bytes(t: &TableWrite) -> usize {
    use tidal_common::ColumnData as D;
    let cols: usize = t
        .columns
        .iter()
        .map(|c| match &c.data {
            D::Str(v) => v.iter().map(|s| s.len() + 8).sum(),
            d => d.len() * 8,
        })
        .sum();
    cols + t.table.len() + 16
}

/// A batching, retrying writer for one database. Cheap to clone; all clones feed the same
/// background task, which stops when [`Writer::close`] is called or every clone is dropped
/// (dropping without `close` still sends buffered rows, but nobody learns the outcome).
#[derive(Clone)]
pub struct Writer {
    client: Client,
    db: String,
    tx: mpsc::Sender<Cmd>,
    counters: Arc<Counters>,
    task: Arc<Mutex<Option<tokio::task::JoinHandle<()>>>>,
}

impl Writer {
    /// Starts the writer's background task on the current tokio runtime.
    pub fn new(client: Client, config: WriterConfig) -> Writer {
        let (tx, rx) = mpsc::channel(config.queue_depth.max(1));
        let counters = Arc::new(Counters::default());
        let db = config.db.clone();
        let task = tokio::spawn(run(client.clone(), config, rx, counters.clone()));
        Writer {
            client,
            db,
            tx,
            counters,
            task: Arc::new(Mutex::new(Some(task))),
        }
    }

    /// Queues rows for one subtable (columns in the STABLE's order, `columns[0]` = ts; `tags`
    /// for auto-creation). Waits while the writer is full.
    pub async fn write(&self, table: TableWrite) -> Result<(), ClientError> {
        self.tx
            .send(Cmd::Table(table))
            .await
            .map_err(|_| ClientError::new(StatusCode::Internal, "the writer is closed"))
    }

    /// Queues one row: `values` are the STABLE's columns in order, the first the timestamp
    /// (`Value::Timestamp` or `Value::Int` in the database's precision). Values are coerced
    /// to the column types here, so a bad value is reported to this caller, naming the column.
    pub async fn write_row(
        &self,
        table: &str,
        stable: &str,
        tags: Option<Vec<Value>>,
        values: Vec<Value>,
    ) -> Result<(), ClientError> {
        let schema = self.client.stable(&self.db, stable).await?;
        if values.len() != schema.columns.len() {
            return Err(ClientError::new(
                StatusCode::SchemaMismatch,
                format!(
                    "STABLE '{stable}' has {} columns but the row for '{table}' has {} values",
                    schema.columns.len(),
                    values.len()
                ),
            ));
        }
        let mut columns = Vec::with_capacity(values.len());
        for (v, def) in values.into_iter().zip(schema.columns.iter()) {
            let v = def.data_type.coerce(v).map_err(|e| {
                ClientError::new(
                    StatusCode::TypeMismatch,
                    format!("table '{table}', column '{}': {e}", def.name),
                )
            })?;
            let mut c = Column::empty(def.data_type, 1);
            c.push(&v);
            columns.push(c);
        }
        self.write(TableWrite {
            table: table.to_string(),
            stable: stable.to_string(),
            tags,
            columns,
        })
        .await
    }

    /// Sends every buffered row and waits until all batches sent so far are settled. Returns
    /// the first batch error since the previous flush, if any.
    pub async fn flush(&self) -> Result<(), ClientError> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(Cmd::Flush(tx))
            .await
            .map_err(|_| ClientError::new(StatusCode::Internal, "the writer is closed"))?;
        rx.await
            .map_err(|_| ClientError::new(StatusCode::Internal, "the writer task stopped"))?
    }

    /// Flushes, then stops the background task (for every clone).
    pub async fn close(self) -> Result<(), ClientError> {
        let res = self.flush().await;
        let task = self.task.lock().take();
        drop(self.tx);
        if let Some(t) = task {
            // Other clones may still hold senders; the task then ends when they are dropped.
            t.abort();
            let _ = t.await;
        }
        res
    }

    pub fn stats(&self) -> WriterStats {
        let c = &self.counters;
        WriterStats {
            rows_written: c.rows_written.load(Ordering::Relaxed),
            rows_failed: c.rows_failed.load(Ordering::Relaxed),
            batches: c.batches.load(Ordering::Relaxed),
            retries: c.retries.load(Ordering::Relaxed),
        }
    }
}

struct Shared {
    client: Client,
    config: WriterConfig,
    counters: Arc<Counters>,
    /// The first error since the last flush.
    first_error: Mutex<Option<ClientError>>,
}

async fn run(
    client: Client,
    config: WriterConfig,
    mut rx: mpsc::Receiver<Cmd>,
    counters: Arc<Counters>,
) {
    let shared = Arc::new(Shared {
        client,
        config,
        counters,
        first_error: Mutex::new(None),
    });
    let mut buffers: HashMap<usize, Buffer> = HashMap::new();
    let mut permits: HashMap<usize, Arc<Semaphore>> = HashMap::new();
    let mut in_flight: JoinSet<()> = JoinSet::new();
    let tick = (shared.config.linger / 2).max(Duration::from_millis(1));
    let mut ticker = tokio::time::interval(tick);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            cmd = rx.recv() => match cmd {
                Some(Cmd::Table(t)) => {
                    let idx = match shared.client.route(&shared.config.db).await {
                        Ok(r) => r.index_of(&shared.config.db, &t.table),
                        Err(e) => {
                            fail(&shared, VgroupId(0), t.num_rows() as u64, 1, 0, e);
                            continue;
                        }
                    };
                    let buf = buffers.entry(idx).or_insert_with(Buffer::new);
                    buf.push(t);
                    if buf.rows >= shared.config.batch_rows || buf.bytes >= shared.config.batch_bytes {
                        if let Some(b) = buffers.remove(&idx) {
                            send(&shared, &mut permits, &mut in_flight, idx, b).await;
                        }
                    }
                }
                Some(Cmd::Flush(reply)) => {
                    let all: Vec<(usize, Buffer)> = buffers.drain().collect();
                    for (idx, b) in all {
                        send(&shared, &mut permits, &mut in_flight, idx, b).await;
                    }
                    while in_flight.join_next().await.is_some() {}
                    let err = shared.first_error.lock().take();
                    let _ = reply.send(err.map_or(Ok(()), Err));
                }
                None => {
                    // Every handle is gone: send what is buffered, then stop.
                    let all: Vec<(usize, Buffer)> = buffers.drain().collect();
                    for (idx, b) in all {
                        send(&shared, &mut permits, &mut in_flight, idx, b).await;
                    }
                    while in_flight.join_next().await.is_some() {}
                    return;
                }
            },
            _ = ticker.tick() => {
                let old: Vec<usize> = buffers
                    .iter()
                    .filter(|(_, b)| b.since.elapsed() >= shared.config.linger)
                    .map(|(i, _)| *i)
                    .collect();
                for idx in old {
                    if let Some(b) = buffers.remove(&idx) {
                        send(&shared, &mut permits, &mut in_flight, idx, b).await;
                    }
                }
                // Reap finished sends so the set does not grow.
                while in_flight.try_join_next().is_some() {}
            }
        }
    }
}

/// Starts sending one buffer once its vgroup has a free in-flight slot (waiting for one is
/// the back-pressure point).
async fn send(
    shared: &Arc<Shared>,
    permits: &mut HashMap<usize, Arc<Semaphore>>,
    in_flight: &mut JoinSet<()>,
    idx: usize,
    buf: Buffer,
) {
    if buf.tables.is_empty() {
        return;
    }
    let sem = permits
        .entry(idx)
        .or_insert_with(|| Arc::new(Semaphore::new(shared.config.in_flight_per_vgroup.max(1))))
        .clone();
    let Ok(permit) = sem.acquire_owned().await else {
        return;
    };
    let shared = shared.clone();
    in_flight.spawn(async move {
        let _permit = permit;
        send_batch(&shared, idx, buf).await;
    });
}

async fn send_batch(shared: &Shared, idx: usize, buf: Buffer) {
    let db = &shared.config.db;
    let rows = buf.rows as u64;
    let tables = buf.tables.len();
    let vgroup = match shared.client.route(db).await {
        Ok(r) => r.vgroups.get(idx).map(|v| v.id).unwrap_or(VgroupId(0)),
        Err(_) => VgroupId(0),
    };
    let started = Instant::now();
    let mut attempts = 0u32;
    let mut backoff = Duration::from_millis(100);
    loop {
        attempts += 1;
        let result = match schemas_for(shared, &buf.tables).await {
            // The client retries internally too; count its extra rounds as this batch's.
            Ok(schemas) => shared
                .client
                .write(db, &schemas, buf.tables.clone())
                .await
                .map(|o| attempts += o.attempts.saturating_sub(1)),
            Err(e) => Err(e),
        };
        match result {
            Ok(()) => {
                let c = &shared.counters;
                c.rows_written.fetch_add(rows, Ordering::Relaxed);
                c.batches.fetch_add(1, Ordering::Relaxed);
                c.retries
                    .fetch_add(u64::from(attempts - 1), Ordering::Relaxed);
                report(
                    shared,
                    BatchOutcome {
                        vgroup,
                        rows,
                        tables,
                        attempts,
                        result: Ok(()),
                    },
                );
                return;
            }
            Err(e) if e.code.is_retryable() && started.elapsed() < shared.config.retry_for => {
                tracing::debug!(%e, attempts, "writer: retrying batch");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(2));
                let _ = shared.client.refresh_route(db).await;
            }
            Err(e) => {
                fail(shared, vgroup, rows, tables, attempts, e);
                return;
            }
        }
    }
}

/// The current schema of every STABLE the tables use (cached by the client).
async fn schemas_for(
    shared: &Shared,
    tables: &[TableWrite],
) -> Result<Vec<StableSchema>, ClientError> {
    let mut names: Vec<&str> = tables.iter().map(|t| t.stable.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let mut out = Vec::with_capacity(names.len());
    for n in names {
        out.push(shared.client.stable(&shared.config.db, n).await?);
    }
    Ok(out)
}

fn fail(
    shared: &Shared,
    vgroup: VgroupId,
    rows: u64,
    tables: usize,
    attempts: u32,
    e: ClientError,
) {
    let c = &shared.counters;
    c.rows_failed.fetch_add(rows, Ordering::Relaxed);
    c.batches.fetch_add(1, Ordering::Relaxed);
    c.retries
        .fetch_add(u64::from(attempts.saturating_sub(1)), Ordering::Relaxed);
    shared.first_error.lock().get_or_insert_with(|| e.clone());
    report(
        shared,
        BatchOutcome {
            vgroup,
            rows,
            tables,
            attempts,
            result: Err(e),
        },
    );
}

fn report(shared: &Shared, o: BatchOutcome) {
    if let Some(cb) = &shared.config.on_batch {
        cb(&o);
    }
}

/// A [`Writer`] for synchronous code: owns a small tokio runtime and blocks on each call.
/// Do not use it from inside an async runtime (blocking there would stall it).
///
/// ```no_run
/// # fn demo() -> Result<(), tidal_client::ClientError> {
/// use tidal_client::{BlockingWriter, WriterConfig};
/// use tidal_common::Value;
/// let w = BlockingWriter::connect("127.0.0.1:6030", WriterConfig::new("iot"))?;
/// let row = vec![Value::Timestamp(0), Value::Float(0.5), Value::Float(0.0), Value::Int(0)];
/// w.write_row("d_truck_0", "diagnostics", None, row)?;
/// w.close()?;
/// # Ok(()) }
/// ```
pub struct BlockingWriter {
    rt: tokio::runtime::Runtime,
    writer: Writer,
}

impl BlockingWriter {
    pub fn connect(addr: &str, config: WriterConfig) -> Result<BlockingWriter, ClientError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| {
                ClientError::new(StatusCode::Internal, format!("cannot start a runtime: {e}"))
            })?;
        let writer = rt.block_on(async {
            let client = Client::connect(addr).await?;
            Ok::<_, ClientError>(Writer::new(client, config))
        })?;
        Ok(BlockingWriter { rt, writer })
    }

    pub fn write(&self, table: TableWrite) -> Result<(), ClientError> {
        self.rt.block_on(self.writer.write(table))
    }

    pub fn write_row(
        &self,
        table: &str,
        stable: &str,
        tags: Option<Vec<Value>>,
        values: Vec<Value>,
    ) -> Result<(), ClientError> {
        self.rt
            .block_on(self.writer.write_row(table, stable, tags, values))
    }

    pub fn flush(&self) -> Result<(), ClientError> {
        self.rt.block_on(self.writer.flush())
    }

    pub fn stats(&self) -> WriterStats {
        self.writer.stats()
    }

    pub fn close(self) -> Result<(), ClientError> {
        let BlockingWriter { rt, writer } = self;
        rt.block_on(writer.close())
    }
}
