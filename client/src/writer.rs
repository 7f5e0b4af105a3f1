//! [`Writer`]: a batching writer for high ingest rates. It takes rows for any subtable of one
//! database, buffers them per vgroup, sends a buffer when it reaches a row, byte or age
//! threshold, keeps several batches in flight per vgroup, and retries a batch on a stale route
//! or a transient failure until it is acknowledged or its retry time runs out. Each batch's
//! outcome is reported to an optional callback and summed in [`WriterStats`].
//!
//! A vgroup's buffer holds one [`RowBlock`] per STABLE: the subtables listed once, the rows
//! appended column by column. With thousands of subtables and a few rows each per batch, a
//! row then costs a few appends and a batch one columnar message, instead of a `TableWrite`
//! per subtable on the client, the wire and the vnode. [`Writer::write_block`] takes rows in
//! that form directly (the cheapest way in; [`Writer::write_block_in`] for a block whose
//! vgroup its producer already knows); [`Writer::write`] and [`Writer::write_many`] take
//! `TableWrite`s.
//!
//! Tags: a subtable's tags are needed until it exists. The writer remembers the tags it was
//! given (shared with the blocks, not copied) and adds them to every batch holding the
//! subtable until one such batch is acknowledged (batches in flight may reach the vnode in
//! any order); after that it leaves them off the wire, and if the subtable turns out to be
//! gone (dropped meanwhile) it resends the batch with its tags. Both memories are bounded
//! (`TABLES_REMEMBERED_MAX`) and hold subtables by a 128-bit hash of their name.
//!
//! Invariants:
//! - **Bounded memory.** Rows wait in a bounded command queue (`queue_depth` commands), in at
//!   most one open buffer per vgroup (flushed at `batch_rows`/`batch_bytes`; a `RowBlock` fills
//!   and sends buffers on its way, so one of any size is fine), and in at most
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

use crate::{Client, ClientError, RouteTable};
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tidal_common::{
    Column, ColumnData, RowBlock, StableSchema, StatusCode, TableWrite, Tags, Value, VgroupId,
};
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio::task::JoinSet;

type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// Subtables remembered as existing (whose tags then stay off the wire), and tags remembered
/// for subtables not yet known to exist. Past this many of either, that set is cleared, so
/// memory stays bounded (forgetting only costs sending tags again).
const TABLES_REMEMBERED_MAX: usize = 1 << 20;

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
    /// Commands (a row, a `TableWrite`, a list of them or a `RowBlock`) waiting for the
    /// writer task.
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
    Tables(Vec<TableWrite>),
    /// A block, and the vgroup its producer routed all of its subtables to (the index in
    /// that routing map).
    Block(RowBlock, Option<(Arc<RouteTable>, usize)>),
    Flush(oneshot::Sender<Result<(), ClientError>>),
}

/// Rows of one STABLE (one column layout) buffered for one vgroup: one [`RowBlock`], so that a
/// row costs a few column appends however many subtables the batch spans, plus the index of
/// its subtables.
struct Part {
    block: RowBlock,
    /// Hash of a subtable name -> its index in `block` (the name itself is checked there, so
    /// no name is copied per subtable and batch); names whose hash is taken by another name
    /// go to `collided`.
    index: FastMap<u64, u32>,
    collided: FastMap<String, u32>,
}

impl Part {
    /// The block's index of subtable `table`, listed (with `tags`) if new; a listed subtable
    /// without tags takes `tags`.
    fn slot(
        &mut self,
        hasher: &foldhash::fast::RandomState,
        table: &str,
        tags: Option<Tags>,
    ) -> u32 {
        let h = std::hash::BuildHasher::hash_one(hasher, table);
        let found = match self.index.get(&h) {
            Some(i) if self.block.table(*i as usize) == table => Some(*i),
            Some(_) => self.collided.get(table).copied(),
            None => None,
        };
        if let Some(i) = found {
            self.block.offer_tags(i, tags);
            return i;
        }
        let i = self.block.add_table_shared(table, tags);
        match self.index.entry(h) {
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(i);
            }
            std::collections::hash_map::Entry::Occupied(_) => {
                self.collided.insert(table.to_string(), i);
            }
        }
        i
    }
}

/// A [`Buffer`]'s rows in order: one of its parts (by index), or a block of one vgroup kept
/// whole.
enum Entry {
    Part(usize),
    Whole(RowBlock),
}

/// Rows buffered for one vgroup: parts that rows are copied into and blocks kept whole, in
/// the order the rows came, which is the order the vnode applies them in (so a later write of
/// a (subtable, ts) replaces an earlier one however each was queued).
struct Buffer {
    parts: Vec<Part>,
    entries: Vec<Entry>,
    /// Parts before this index are closed: a block kept whole came after their rows, so
    /// later rows may not join them.
    open_from: usize,
    rows: usize,
    bytes: usize,
    since: Instant,
    /// The routing map every row was placed with (`None` once rows were placed with two).
    route: Option<Arc<RouteTable>>,
}

impl Buffer {
    fn new(route: &Arc<RouteTable>) -> Buffer {
        Buffer {
            parts: Vec::new(),
            entries: Vec::new(),
            open_from: 0,
            rows: 0,
            bytes: 0,
            since: Instant::now(),
            route: Some(route.clone()),
        }
    }

    /// Notes that rows were placed with `route`.
    fn placed_with(&mut self, route: &Arc<RouteTable>) {
        if self.route.as_ref().is_some_and(|r| !Arc::ptr_eq(r, route)) {
            self.route = None;
        }
    }

    fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The open part holding rows of `stable` shaped like `cols` (a write of another schema
    /// version of the same STABLE gets a part of its own).
    fn part(&mut self, stable: &str, cols: &[Column]) -> &mut Part {
        if self.is_empty() {
            self.since = Instant::now();
        }
        let found = self.parts[self.open_from..]
            .iter()
            .position(|p| p.block.stable() == stable && p.block.accepts(cols));
        let i = match found {
            Some(i) => self.open_from + i,
            None => {
                self.parts.push(Part {
                    block: RowBlock::like(stable, cols, 0),
                    index: FastMap::default(),
                    collided: FastMap::default(),
                });
                self.entries.push(Entry::Part(self.parts.len() - 1));
                self.parts.len() - 1
            }
        };
        &mut self.parts[i]
    }

    /// Queues a block as it is, after every row queued so far.
    fn push_whole(&mut self, b: RowBlock) {
        if self.is_empty() {
            self.since = Instant::now();
        }
        self.entries.push(Entry::Whole(b));
        self.open_from = self.parts.len();
    }

    /// The blocks to send, in the order their rows came.
    fn into_blocks(self) -> Vec<RowBlock> {
        let mut parts: Vec<Option<RowBlock>> =
            self.parts.into_iter().map(|p| Some(p.block)).collect();
        self.entries
            .into_iter()
            .filter_map(|e| match e {
                Entry::Part(i) => parts.get_mut(i).and_then(Option::take),
                Entry::Whole(b) => Some(b),
            })
            .collect()
    }

    fn full(&self, c: &WriterConfig) -> bool {
        self.rows >= c.batch_rows || self.bytes >= c.batch_bytes
    }
}

/// Estimated bytes of rows `s..e` of `cols`.
fn estimate_bytes(cols: &[Column], s: usize, e: usize) -> usize {
    cols.iter()
        .map(|c| match &c.data {
            ColumnData::Str(v) => v
                .get(s..e)
                .map(|v| v.iter().map(|x| x.len() + 8).sum())
                .unwrap_or(0),
            _ => (e - s) * 8,
        })
        .sum()
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
    tables: Arc<Mutex<Tables>>,
    task: Arc<Mutex<Option<tokio::task::JoinHandle<()>>>>,
}

impl Writer {
    /// Starts the writer's background task on the current tokio runtime.
    pub fn new(client: Client, config: WriterConfig) -> Writer {
        let (tx, rx) = mpsc::channel(config.queue_depth.max(1));
        let counters = Arc::new(Counters::default());
        let tables = Arc::new(Mutex::new(Tables::default()));
        let db = config.db.clone();
        let task = tokio::spawn(run(
            client.clone(),
            config,
            rx,
            counters.clone(),
            tables.clone(),
        ));
        Writer {
            client,
            db,
            tx,
            counters,
            tables,
            task: Arc::new(Mutex::new(Some(task))),
        }
    }

    /// Whether subtable `table` is known to exist: a batch of this writer that carried its
    /// tags was acknowledged. A producer may then leave its tags out (and skip converting
    /// them); until then, every row of a new subtable should come with tags or follow rows
    /// that did.
    pub fn knows(&self, table: &str) -> bool {
        self.tables.lock().knows(table)
    }

    /// Changes whenever this writer forgets subtables it knew ([`Writer::knows`]): a `true`
    /// answer holds until then, so a producer may remember it (as the line-protocol
    /// converter's per-thread series maps do) instead of asking for every row.
    pub fn known_generation(&self) -> u64 {
        self.tables.lock().generation
    }

    async fn send(&self, cmd: Cmd) -> Result<(), ClientError> {
        self.tx
            .send(cmd)
            .await
            .map_err(|_| ClientError::new(StatusCode::Internal, "the writer is closed"))
    }

    /// Queues rows for one subtable (columns in the STABLE's order, `columns[0]` = ts; `tags`
    /// for auto-creation). Waits while the writer is full.
    pub async fn write(&self, table: TableWrite) -> Result<(), ClientError> {
        self.send(Cmd::Table(table)).await
    }

    /// Queues rows for many subtables as one command (cheaper than one [`Writer::write`] per
    /// subtable). Waits while the writer is full.
    pub async fn write_many(&self, tables: Vec<TableWrite>) -> Result<(), ClientError> {
        if tables.is_empty() {
            return Ok(());
        }
        self.send(Cmd::Tables(tables)).await
    }

    /// Queues rows of many subtables of one STABLE as one [`RowBlock`] (columns in the STABLE's
    /// order, column 0 = ts, values coerced to the column types; tags for auto-creation, needed
    /// only until the subtable exists): the cheapest way to feed the writer, as its rows are
    /// appended to the per-vgroup buffers column by column. The block is split over the
    /// vgroups; a buffer that fills up on the way is sent, so a block may be of any size.
    /// A block whose subtables all route to one vgroup and that fits in one batch is queued
    /// without copying its rows: callers that know the routing (`Client::route`) and group
    /// rows per vgroup themselves save the writer's task that work.
    pub async fn write_block(&self, block: RowBlock) -> Result<(), ClientError> {
        if block.num_tables() == 0 {
            return Ok(());
        }
        self.send(Cmd::Block(block, None)).await
    }

    /// [`Writer::write_block`] for a block whose subtables all belong to vgroup `idx` of the
    /// routing map `route` (from [`Client::route`]; `route.index_of` of each subtable): while
    /// that map is still the one the writer uses, the block is queued for that vgroup without
    /// routing its subtables again, a hash of every name (a few percent of a loader's CPU
    /// with 100,000s of subtables). A wrong `idx` costs a retry, not a misplaced row: a data
    /// node refuses a subtable outside its hash range as a stale route, and the retry routes
    /// every subtable itself.
    pub async fn write_block_in(
        &self,
        block: RowBlock,
        route: Arc<RouteTable>,
        idx: usize,
    ) -> Result<(), ClientError> {
        if block.num_tables() == 0 {
            return Ok(());
        }
        self.send(Cmd::Block(block, Some((route, idx)))).await
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
        self.send(Cmd::Flush(tx)).await?;
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
    tables: Arc<Mutex<Tables>>,
}

/// What the writer knows of subtables across batches: a caller may give a subtable's tags with
/// its first rows only, while several batches are in flight and may reach the vnode in any
/// order, so every batch carries the tags of its subtables until one is acknowledged; after
/// that they stay off the wire.
///
/// Subtables are held by a 128-bit hash of their name ([`TableKey`]), not by name: a loader
/// may declare 100,000s of subtables, and a name copied into each set and compared on every
/// lookup was most of this bookkeeping's cost. Two names with one key would share an entry
/// (one could be taken as existing, or be given the other's tags); the seeds are drawn per
/// writer, so names cannot be chosen to collide, and at 2^-128 per pair that is not a
/// practical concern (as for the frontend's series keys). A subtable wrongly taken as
/// existing only costs a resend: the data node answers `TableNotFound`, and
/// [`Client::write_blocks`] sends the batch again with every tag.
#[derive(Default)]
struct Tables {
    keys: TableKeys,
    /// Acknowledged in a batch that carried their tags (so they exist).
    known: HashSet<TableKey, foldhash::fast::RandomState>,
    /// The tags given for subtables not yet known to exist (shared with the blocks that carry
    /// them, not copied).
    tags: FastMap<TableKey, Tags>,
    /// Counts the times `known` was emptied ([`Writer::known_generation`]).
    generation: u64,
}

/// A subtable name's key in [`Tables`].
type TableKey = u128;

/// Two 64-bit hashes of a name with seeds drawn per writer, so that names from outside
/// cannot be chosen to share a key.
#[derive(Default)]
struct TableKeys(foldhash::fast::RandomState, foldhash::fast::RandomState);

impl TableKeys {
    fn of(&self, table: &str) -> TableKey {
        use std::hash::BuildHasher;
        (u128::from(self.0.hash_one(table)) << 64) | u128::from(self.1.hash_one(table))
    }
}

impl Tables {
    fn knows(&self, table: &str) -> bool {
        self.known.contains(&self.keys.of(table))
    }

    /// Remembers `tags` for `table` unless it is known or already has tags remembered.
    fn offer(&mut self, table: &str, tags: &Tags) {
        let key = self.keys.of(table);
        if self.known.contains(&key) || self.tags.contains_key(&key) {
            return;
        }
        if self.tags.len() >= TABLES_REMEMBERED_MAX {
            self.tags.clear();
        }
        self.tags.insert(key, tags.clone());
    }

    /// Gives the subtables of `blocks` (one batch, applied in order) that have no tags the
    /// remembered ones, unless an earlier block of the batch carries them: the vnode creates
    /// the subtable there, before it reaches the later block.
    ///
    /// Why the exception: a caller that declares subtables in a block of their own queues
    /// their rows right after it, usually into the same batch, and every tag list then went
    /// out, was decoded and was checked twice. (`tidal load` did so; it now creates its
    /// subtables itself before their rows reach the writer, so it gives none.)
    fn complete(&self, blocks: &mut [RowBlock]) {
        if self.tags.is_empty() {
            return;
        }
        // (block, subtable, its tags), found first, given after.
        let mut todo: Vec<(usize, u32, &Tags)> = Vec::new();
        let mut carried: HashSet<TableKey, foldhash::fast::RandomState> = HashSet::default();
        for (k, b) in blocks.iter().enumerate() {
            let first_todo = todo.len();
            for i in 0..b.num_tables() {
                let key = self.keys.of(b.table(i));
                if b.tags(i).is_some() {
                    carried.insert(key);
                } else if !carried.contains(&key) {
                    if let Some(t) = self.tags.get(&key) {
                        todo.push((k, i as u32, t));
                    }
                }
            }
            // Given here, so carried into the later blocks.
            for (_, i, _) in todo.get(first_todo..).unwrap_or_default() {
                carried.insert(self.keys.of(b.table(*i as usize)));
            }
        }
        for (k, i, t) in todo {
            if let Some(b) = blocks.get_mut(k) {
                b.offer_tags(i, Some(t.clone()));
            }
        }
    }

    /// After an acknowledged batch: its subtables that carried tags exist.
    fn acknowledged(&mut self, blocks: &[RowBlock]) {
        let tagged = blocks
            .iter()
            .map(|b| (0..b.num_tables()).filter(|i| b.tags(*i).is_some()).count())
            .sum::<usize>();
        if self.known.len() + tagged > TABLES_REMEMBERED_MAX {
            self.known.clear();
            self.generation += 1;
        }
        for b in blocks {
            for i in 0..b.num_tables() {
                if b.tags(i).is_some() {
                    let key = self.keys.of(b.table(i));
                    if self.known.insert(key) {
                        self.tags.remove(&key);
                    }
                }
            }
        }
    }
}

/// The writer task's state: the open buffers and the batches in flight.
struct Task {
    shared: Arc<Shared>,
    /// The database's routing map, re-read from the client's cache at every tick (a stale
    /// map only misplaces rows in buffers; sends split them by the current map).
    route: Option<Arc<RouteTable>>,
    buffers: FastMap<usize, Buffer>,
    permits: FastMap<usize, Arc<Semaphore>>,
    in_flight: JoinSet<()>,
    /// Hashes subtable names for the parts' indexes.
    hasher: foldhash::fast::RandomState,
}

impl Task {
    async fn route(&mut self) -> Result<Arc<RouteTable>, ClientError> {
        if let Some(r) = &self.route {
            return Ok(r.clone());
        }
        let r = self.shared.client.route(&self.shared.config.db).await?;
        self.route = Some(r.clone());
        Ok(r)
    }

    async fn push_table(&mut self, t: TableWrite) {
        let rows = t.num_rows();
        let route = match self.route().await {
            Ok(r) => r,
            Err(e) => return fail(&self.shared, VgroupId(0), rows as u64, 1, 0, e),
        };
        if t.columns.iter().any(|c| c.len() != rows) {
            let e = ClientError::new(
                StatusCode::SchemaMismatch,
                format!("table '{}': its columns differ in length", t.table),
            );
            return fail(&self.shared, VgroupId(0), rows as u64, 1, 0, e);
        }
        let tags = t.tags.map(Tags::from);
        if let Some(tags) = &tags {
            self.shared.tables.lock().offer(&t.table, tags);
        }
        let idx = route.index_of(&self.shared.config.db, &t.table);
        let buf = self
            .buffers
            .entry(idx)
            .or_insert_with(|| Buffer::new(&route));
        buf.placed_with(&route);
        let part = buf.part(&t.stable, &t.columns);
        let slot = part.slot(&self.hasher, &t.table, tags);
        part.block.push_rows(slot, &t.columns, 0, rows);
        buf.rows += rows;
        buf.bytes += estimate_bytes(&t.columns, 0, rows) + t.table.len() + 16;
        if buf.full(&self.shared.config) {
            self.send(idx).await;
        }
    }

    async fn push_block(&mut self, b: RowBlock, routed: Option<(Arc<RouteTable>, usize)>) {
        let route = match self.route().await {
            Ok(r) => r,
            Err(e) => {
                let (rows, tables) = (b.num_rows() as u64, b.num_tables());
                return fail(&self.shared, VgroupId(0), rows, tables, 0, e);
            }
        };
        let db = &self.shared.config.db;
        let groups: Vec<usize> = match routed.filter(|(r, _)| Arc::ptr_eq(r, &route)) {
            Some((_, idx)) if idx < route.vgroups.len() => vec![idx; b.num_tables()],
            _ => (0..b.num_tables())
                .map(|i| route.index_of(db, b.table(i)))
                .collect(),
        };
        {
            let mut tables = self.shared.tables.lock();
            for i in 0..b.num_tables() {
                if let Some(tags) = b.tags_shared(i) {
                    tables.offer(b.table(i), tags);
                }
            }
        }
        // A block wholly in one vgroup and within one batch (what a caller that groups its
        // rows by vgroup sends) is queued as it is: copying its rows into the part would only
        // cost time. A larger one is cut at batch bounds below.
        let config = &self.shared.config;
        let one_group = groups.first().filter(|g| groups.iter().all(|x| x == *g));
        if let Some(&g) = one_group.filter(|_| b.num_rows() <= config.batch_rows) {
            let bytes = estimate_bytes(b.columns(), 0, b.num_rows());
            if bytes <= config.batch_bytes {
                let buf = self.buffers.entry(g).or_insert_with(|| Buffer::new(&route));
                buf.placed_with(&route);
                buf.rows += b.num_rows();
                buf.bytes += bytes;
                buf.push_whole(b);
                if buf.full(&self.shared.config) {
                    self.send(g).await;
                }
                return;
            }
        }
        // The subtable's index in its group's open block (u32::MAX: not listed there yet).
        let mut slots = vec![u32::MAX; b.num_tables()];
        let mut has_rows = vec![false; b.num_tables()];
        let mut row = 0usize;
        for (t, n) in b.runs() {
            let (t, end) = (*t as usize, row + *n as usize);
            let g = groups[t];
            has_rows[t] = true;
            let buf = self.buffers.entry(g).or_insert_with(|| Buffer::new(&route));
            buf.placed_with(&route);
            let part = buf.part(b.stable(), b.columns());
            if slots[t] == u32::MAX {
                // Copied, not taken: a later buffer of this block may need them too.
                slots[t] = part.slot(&self.hasher, b.table(t), b.tags_shared(t).cloned());
            }
            part.block.push_rows(slots[t], b.columns(), row, end);
            buf.rows += end - row;
            buf.bytes += estimate_bytes(b.columns(), row, end);
            row = end;
            if buf.full(&self.shared.config) {
                self.send(g).await;
                for (s, grp) in slots.iter_mut().zip(&groups) {
                    if *grp == g {
                        *s = u32::MAX;
                    }
                }
            }
        }
        // Subtables listed with tags but without rows are still created.
        for (t, g) in groups.iter().enumerate() {
            if !has_rows[t] && b.tags(t).is_some() {
                let buf = self
                    .buffers
                    .entry(*g)
                    .or_insert_with(|| Buffer::new(&route));
                buf.placed_with(&route);
                buf.part(b.stable(), b.columns()).slot(
                    &self.hasher,
                    b.table(t),
                    b.tags_shared(t).cloned(),
                );
            }
        }
    }

    /// Sends vgroup `idx`'s buffer once the vgroup has a free in-flight slot (waiting for one
    /// is the back-pressure point).
    async fn send(&mut self, idx: usize) {
        let Some(buf) = self.buffers.remove(&idx) else {
            return;
        };
        if buf.is_empty() {
            return;
        }
        let shared = self.shared.clone();
        let sem = self
            .permits
            .entry(idx)
            .or_insert_with(|| Arc::new(Semaphore::new(shared.config.in_flight_per_vgroup.max(1))))
            .clone();
        let Ok(permit) = sem.acquire_owned().await else {
            return;
        };
        self.in_flight.spawn(async move {
            let _permit = permit;
            send_batch(&shared, idx, buf).await;
        });
    }

    async fn send_all(&mut self) {
        let all: Vec<usize> = self.buffers.keys().copied().collect();
        for idx in all {
            self.send(idx).await;
        }
    }

    async fn tick(&mut self) {
        self.route = None;
        let linger = self.shared.config.linger;
        let old: Vec<usize> = self
            .buffers
            .iter()
            .filter(|(_, b)| b.since.elapsed() >= linger)
            .map(|(i, _)| *i)
            .collect();
        for idx in old {
            self.send(idx).await;
        }
        // Reap finished sends so the set does not grow.
        while self.in_flight.try_join_next().is_some() {}
    }
}

async fn run(
    client: Client,
    config: WriterConfig,
    mut rx: mpsc::Receiver<Cmd>,
    counters: Arc<Counters>,
    tables: Arc<Mutex<Tables>>,
) {
    let tick = (config.linger / 2).max(Duration::from_millis(1));
    let mut task = Task {
        shared: Arc::new(Shared {
            client,
            config,
            counters,
            first_error: Mutex::new(None),
            tables,
        }),
        route: None,
        buffers: FastMap::default(),
        permits: FastMap::default(),
        in_flight: JoinSet::new(),
        hasher: foldhash::fast::RandomState::default(),
    };
    let mut ticker = tokio::time::interval(tick);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            cmd = rx.recv() => match cmd {
                Some(Cmd::Table(t)) => task.push_table(t).await,
                Some(Cmd::Tables(ts)) => {
                    for t in ts {
                        task.push_table(t).await;
                    }
                }
                Some(Cmd::Block(b, routed)) => task.push_block(b, routed).await,
                Some(Cmd::Flush(reply)) => {
                    task.send_all().await;
                    while task.in_flight.join_next().await.is_some() {}
                    let err = task.shared.first_error.lock().take();
                    let _ = reply.send(err.map_or(Ok(()), Err));
                }
                None => {
                    // Every handle is gone: send what is buffered, then stop.
                    task.send_all().await;
                    while task.in_flight.join_next().await.is_some() {}
                    return;
                }
            },
            _ = ticker.tick() => task.tick().await,
        }
    }
}

async fn send_batch(shared: &Shared, idx: usize, buf: Buffer) {
    let db = &shared.config.db;
    let rows = buf.rows as u64;
    let built_with = buf.route.clone();
    let mut blocks = buf.into_blocks();
    shared.tables.lock().complete(&mut blocks);
    let tables = blocks.iter().map(RowBlock::num_tables).sum();
    let vgroup = match shared.client.route(db).await {
        Ok(r) => r.vgroups.get(idx).map(|v| v.id).unwrap_or(VgroupId(0)),
        Err(_) => VgroupId(0),
    };
    let started = Instant::now();
    let mut attempts = 0u32;
    let mut backoff = Duration::from_millis(100);
    let known = |t: &str| shared.tables.lock().knows(t);
    loop {
        attempts += 1;
        let result = match schemas_for(shared, &blocks).await {
            // The client retries internally too; count its extra rounds as this batch's.
            Ok(schemas) => shared
                .client
                .write_blocks(
                    db,
                    &schemas,
                    &blocks,
                    &known,
                    built_with.as_ref().map(|r| (r, idx)),
                )
                .await
                .map(|o| attempts += o.attempts.saturating_sub(1)),
            Err(e) => Err(e),
        };
        match result {
            Ok(()) => {
                shared.tables.lock().acknowledged(&blocks);
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

/// The current schema of every STABLE the blocks use (cached by the client).
async fn schemas_for(
    shared: &Shared,
    blocks: &[RowBlock],
) -> Result<Vec<StableSchema>, ClientError> {
    let mut names: Vec<&str> = blocks.iter().map(RowBlock::stable).collect();
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

    pub fn write_many(&self, tables: Vec<TableWrite>) -> Result<(), ClientError> {
        self.rt.block_on(self.writer.write_many(tables))
    }

    pub fn write_block(&self, block: RowBlock) -> Result<(), ClientError> {
        self.rt.block_on(self.writer.write_block(block))
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

#[cfg(test)]
mod tests {
    use super::*;
    use tidal_common::DataType;

    fn block(tables: &[(&str, Option<i64>)]) -> RowBlock {
        let mut b = RowBlock::new("st", &[DataType::Timestamp]);
        for (n, tag) in tables {
            let i = b.add_table(n, tag.map(|t| vec![Value::Int(t)]));
            assert!(b.push_row(i, &[Value::Timestamp(1)]));
        }
        b
    }

    fn tags(b: &RowBlock) -> Vec<Option<i64>> {
        (0..b.num_tables())
            .map(|i| b.tags(i).map(|t| t[0].as_i64().unwrap_or(-1)))
            .collect()
    }

    /// A batch's subtables get their remembered tags, except where an earlier block of the
    /// batch carries (or was just given) them; a block before the one carrying them still
    /// gets them, and tags a block has are kept.
    #[test]
    fn complete_gives_tags_unless_an_earlier_block_carries_them() {
        let mut t = Tables::default();
        for (n, v) in [("a", 1), ("b", 2), ("c", 3), ("d", 4)] {
            t.offer(n, &Tags::from(vec![Value::Int(v)]));
        }
        let mut blocks = vec![
            block(&[("d", None)]),
            block(&[("a", None), ("b", Some(20))]),
            block(&[("c", None), ("b", None), ("a", None), ("d", Some(40))]),
            block(&[("c", None), ("e", None)]),
        ];
        t.complete(&mut blocks);
        let got: Vec<_> = blocks.iter().map(tags).collect();
        assert_eq!(
            got,
            vec![
                vec![Some(4)],
                vec![Some(1), Some(20)],
                vec![Some(3), None, None, Some(40)],
                vec![None, None],
            ]
        );
        // Nothing remembered: nothing given.
        let mut blocks = vec![block(&[("a", None)])];
        Tables::default().complete(&mut blocks);
        assert_eq!(tags(&blocks[0]), vec![None]);
    }

    /// The generation changes exactly when the set of known subtables is emptied (full), so
    /// a `true` answer of `knows` holds while it stays.
    #[test]
    fn the_known_generation_changes_when_the_set_forgets() {
        let mut t = Tables::default();
        t.acknowledged(&[block(&[("a", Some(1)), ("b", None)])]);
        assert!(t.knows("a") && !t.knows("b"));
        assert_eq!(t.generation, 0);
        t.known
            .extend((0..TABLES_REMEMBERED_MAX as u128 - 2).map(|k| k << 64));
        t.acknowledged(&[block(&[("c", Some(3))])]);
        assert_eq!(t.generation, 0, "room for one more: nothing forgotten");
        assert!(t.knows("a") && t.knows("c"));
        t.acknowledged(&[block(&[("d", Some(4))])]);
        assert_eq!(t.generation, 1, "full: forgotten");
        assert!(!t.knows("a") && !t.knows("c") && t.knows("d"));
    }
}
