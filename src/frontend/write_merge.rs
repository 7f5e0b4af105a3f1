//! Group commit of schemaless writes: concurrent HTTP requests that write to the same vgroup
//! share write RPCs. While one RPC to a vgroup is in flight, the blocks of other requests
//! for that vgroup queue up and go out together in the next one. A data node's cost per
//! RPC (decode, checks, one WAL record, one fsync at `WAL_LEVEL 2`) is largely independent of
//! its size, so a few big RPCs cost far less than many small ones.
//!
//! Invariants:
//! - A queue belongs to one (caller token, database, vgroup): rows only ever travel with
//!   the credentials of the request that sent them, and the sender runs in that caller's
//!   scope ([`tidal_client::auth::as_caller`]).
//! - A request's rows are acknowledged only when the RPC that carried them was; an RPC's
//!   error goes to every request whose rows it carried. A request never learns of another's
//!   data: when a merged RPC fails with an error that is not about the route or the node, each
//!   of its requests is sent again alone, so that one bad request does not fail the others.
//! - Bounded: an RPC carries at most [`RPC_ROWS_MAX`] rows and about [`RPC_BYTES_MAX`] bytes
//!   (but always at least one request), and a queue holds about [`QUEUE_BYTES_MAX`] bytes; a
//!   request that finds it full waits (back-pressure on the HTTP client).
//! - Requests whose schemas of one STABLE differ (one prepared before an ALTER, one after)
//!   never share an RPC: the data node checks every block against the RPC's schema.
//! - At most one RPC per queue is in flight; a queue with nothing pending or in flight is
//!   removed, so the map holds only active (caller, db, vgroup)s.

use parking_lot::Mutex;
use std::collections::hash_map::Entry as MapEntry;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use tidal_client::{Client, ClientError, RouteTable, WriteOutcome};
use tidal_common::{ColumnData, RowBlock, StableSchema, StatusCode};
use tokio::sync::{oneshot, Notify, OwnedSemaphorePermit, Semaphore};

/// Most rows one merged RPC carries (the first request of an RPC is always taken whole).
pub const RPC_ROWS_MAX: usize = 200_000;
/// About the most bytes of row data one merged RPC carries.
pub const RPC_BYTES_MAX: usize = 32 << 20;
/// About the most bytes of row data queued for one (caller, db, vgroup).
pub const QUEUE_BYTES_MAX: usize = 128 << 20;
/// How long a sender with fewer than [`LINGER_ROWS`] rows waits for bodies of the same caller
/// and database that are still being parsed (their rows would otherwise take RPCs of their
/// own): a little latency for far fewer RPCs when a client keeps several requests in flight.
pub const LINGER_MS: u64 = 5;
/// Rows at which a sender stops waiting for bodies still being parsed.
pub const LINGER_ROWS: u64 = 20_000;

/// (caller token, db, vgroup index in the route).
type QueueKey = (Arc<str>, String, usize);
/// (caller token, db).
type CallerKey = (Arc<str>, String);

/// One request's rows for one vgroup.
struct Entry {
    schemas: Vec<StableSchema>,
    blocks: Vec<RowBlock>,
    route: Arc<RouteTable>,
    rows: u64,
    bytes: usize,
    /// The oldest timestamp of its rows (`i64::MAX` for none): an RPC's requests go in this
    /// order ([`WriteMerger::send`]).
    oldest_ts: i64,
    done: oneshot::Sender<Result<WriteOutcome, ClientError>>,
    /// Its share of the queue's room, given back when the RPC carrying it ends.
    room: OwnedSemaphorePermit,
}

struct Queue {
    pending: VecDeque<Entry>,
    /// An RPC of this queue is in flight (its sender task takes the next batch).
    sending: bool,
    room: Arc<Semaphore>,
}

impl Queue {
    fn new() -> Queue {
        Queue {
            pending: VecDeque::new(),
            sending: false,
            room: Arc::new(Semaphore::new(QUEUE_BYTES_MAX)),
        }
    }
}

/// The merging write path of one frontend; cheap to clone.
#[derive(Clone)]
pub struct WriteMerger {
    client: Client,
    queues: Arc<Mutex<HashMap<QueueKey, Queue>>>,
    /// Bodies being parsed per (caller token, db) (see [`LINGER_MS`]).
    preparing: Arc<Mutex<HashMap<CallerKey, usize>>>,
    /// Woken when a request is queued or a body is done parsing.
    changed: Arc<Notify>,
}

/// A body of the current caller being parsed for a database: senders of that caller and
/// database may wait a little for its rows ([`WriteMerger::preparing`]).
pub struct Preparing {
    key: Option<CallerKey>,
    merger: WriteMerger,
}

impl Drop for Preparing {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            let mut p = self.merger.preparing.lock();
            if let Some(n) = p.get_mut(&key) {
                *n -= 1;
                if *n == 0 {
                    p.remove(&key);
                }
            }
            drop(p);
            self.merger.changed.notify_waiters();
        }
    }
}

/// About how many bytes a block's rows take (what bounds the RPCs and queues).
pub fn block_bytes(b: &RowBlock) -> usize {
    let (names, ends) = b.names();
    let cols: usize = b
        .columns()
        .iter()
        .map(|c| match &c.data {
            ColumnData::Str(v) => v.iter().map(|s| s.len() + 8).sum(),
            ColumnData::Bool(v) => v.len(),
            _ => 8 * c.len(),
        })
        .sum();
    names.len() + 4 * ends.len() + cols
}

/// The oldest timestamp of `b`'s rows.
fn oldest_ts(b: &RowBlock) -> Option<i64> {
    match &b.columns().first()?.data {
        ColumnData::Timestamp(v) => v.iter().min().copied(),
        _ => None,
    }
}

/// Whether `schemas` agree with every schema of the same STABLE in `taken`.
fn compatible(taken: &[StableSchema], schemas: &[StableSchema]) -> bool {
    schemas
        .iter()
        .all(|s| taken.iter().all(|t| t.name != s.name || t == s))
}

/// Errors that would be the same for every request of an RPC (the route, the node, the
/// caller): resending each request alone would only repeat them.
fn shared_error(code: StatusCode) -> bool {
    code.is_retryable()
        || matches!(
            code,
            StatusCode::Unauthenticated
                | StatusCode::PermissionDenied
                | StatusCode::TokenExpired
                | StatusCode::DatabaseNotFound
                | StatusCode::ResourceExhausted
                | StatusCode::Internal
        )
}

impl WriteMerger {
    pub fn new(client: Client) -> WriteMerger {
        WriteMerger {
            client,
            queues: Arc::new(Mutex::new(HashMap::new())),
            preparing: Arc::new(Mutex::new(HashMap::new())),
            changed: Arc::new(Notify::new()),
        }
    }

    /// Notes that the current caller is parsing a body for `db` until the guard drops (drop
    /// it before handing the rows to [`WriteMerger::write`]).
    pub fn preparing(&self, db: &str) -> Preparing {
        let key = tidal_client::auth::current_caller().map(|t| (t, db.to_string()));
        if let Some(k) = &key {
            *self.preparing.lock().entry(k.clone()).or_insert(0) += 1;
        }
        Preparing {
            key,
            merger: self.clone(),
        }
    }

    /// Writes `blocks` (all of vgroup `vgroup` of `route`) to `db` as the current caller,
    /// sharing an RPC with other requests of the same caller for that vgroup. Returns when
    /// the RPC carrying them has been acknowledged (or failed).
    pub async fn write(
        &self,
        db: &str,
        route: Arc<RouteTable>,
        vgroup: usize,
        schemas: Vec<StableSchema>,
        blocks: Vec<RowBlock>,
    ) -> Result<WriteOutcome, ClientError> {
        let Some(token) = tidal_client::auth::current_caller() else {
            // No forwarded caller (an in-process user of the frontend with its own
            // identity): nothing to key a queue by; write directly.
            return self
                .client
                .write_blocks(db, &schemas, &blocks, &|_| false, Some((&route, vgroup)))
                .await;
        };
        let rows: u64 = blocks.iter().map(|b| b.num_rows() as u64).sum();
        let bytes: usize = blocks.iter().map(block_bytes).sum();
        let oldest_ts = blocks
            .iter()
            .filter_map(oldest_ts)
            .min()
            .unwrap_or(i64::MAX);
        let key: QueueKey = (token.clone(), db.to_string(), vgroup);
        let room = self
            .queues
            .lock()
            .entry(key.clone())
            .or_insert_with(Queue::new)
            .room
            .clone();
        // A request larger than the whole queue still goes (alone once the queue drains).
        let want = bytes.clamp(1, QUEUE_BYTES_MAX) as u32;
        let permit = room
            .acquire_many_owned(want)
            .await
            .map_err(|_| ClientError::new(StatusCode::ShuttingDown, "write queue closed"))?;
        let (tx, rx) = oneshot::channel();
        let entry = Entry {
            schemas,
            blocks,
            route,
            rows,
            bytes,
            oldest_ts,
            done: tx,
            room: permit,
        };
        let start = {
            let mut queues = self.queues.lock();
            let q = queues.entry(key.clone()).or_insert_with(Queue::new);
            q.pending.push_back(entry);
            !std::mem::replace(&mut q.sending, true)
        };
        self.changed.notify_waiters();
        if start {
            let me = self.clone();
            tokio::spawn(tidal_client::auth::as_caller(token, me.drain(key)));
        }
        rx.await.map_err(|_| {
            ClientError::new(
                StatusCode::Internal,
                "the write's sender ended without an answer",
            )
        })?
    }

    /// Sends the queue's requests, as many per RPC as the bounds allow, until it is empty.
    async fn drain(self, key: QueueKey) {
        let caller = (key.0.clone(), key.1.clone());
        loop {
            let deadline =
                tokio::time::Instant::now() + std::time::Duration::from_millis(LINGER_MS);
            loop {
                let changed = self.changed.notified();
                tokio::pin!(changed);
                changed.as_mut().enable();
                let rows: u64 = match self.queues.lock().get(&key) {
                    Some(q) => q.pending.iter().map(|e| e.rows).sum(),
                    None => return,
                };
                let others = self.preparing.lock().get(&caller).copied().unwrap_or(0);
                if rows >= LINGER_ROWS || others == 0 {
                    break;
                }
                if tokio::time::timeout_at(deadline, changed).await.is_err() {
                    break;
                }
            }
            let batch = {
                let mut queues = self.queues.lock();
                let Some(q) = queues.get_mut(&key) else {
                    return;
                };
                let batch = take_batch(&mut q.pending);
                if batch.is_empty() {
                    queues.remove(&key);
                    return;
                }
                batch
            };
            self.send(&key.1, key.2, batch).await;
        }
    }

    /// One RPC for `batch`; every request gets its answer. The requests go oldest rows
    /// first: a feed's concurrent bodies are queued in whatever order their parsing ends,
    /// and a subtable whose rows then came newest first had the data node merge the older
    /// ones in as late rows (a fifth of its time in the line protocol at 4,000 trucks). Any
    /// order is one the callers may see: none of the batch's requests was acknowledged
    /// before another was sent, so none is before another (the sort is stable, so requests
    /// with the same oldest row keep their queue order).
    async fn send(&self, db: &str, vgroup: usize, mut batch: Vec<Entry>) {
        batch.sort_by_key(|e| e.oldest_ts);
        let mut schemas: Vec<StableSchema> = Vec::new();
        let mut blocks: Vec<RowBlock> = Vec::new();
        let mut parts = Vec::with_capacity(batch.len());
        let same_route = batch.iter().all(|e| Arc::ptr_eq(&e.route, &batch[0].route));
        let route = batch[0].route.clone();
        for e in batch {
            for s in e.schemas {
                if !schemas.iter().any(|t| t.name == s.name) {
                    schemas.push(s);
                }
            }
            let start = blocks.len();
            blocks.extend(e.blocks);
            parts.push((start..blocks.len(), e.rows, e.done, e.room));
        }
        let built_for = same_route.then_some((&route, vgroup));
        tracing::debug!(
            requests = parts.len(),
            blocks = blocks.len(),
            "merged write"
        );
        let res = match parts.len() {
            1 => {
                self.client
                    .write_blocks(db, &schemas, &blocks, &|_| false, built_for)
                    .await
            }
            _ => {
                let merged = merge_blocks(&blocks);
                let sent = merged.as_deref().unwrap_or(&blocks);
                self.client
                    .write_blocks(db, &schemas, sent, &|_| false, built_for)
                    .await
            }
        };
        match res {
            Ok(o) if parts.len() == 1 => {
                if let Some((_, _, done, _)) = parts.pop() {
                    let _ = done.send(Ok(o));
                }
            }
            Ok(o) => {
                for (_, rows, done, _) in parts {
                    let _ = done.send(Ok(WriteOutcome {
                        rows,
                        tables_created: 0,
                        attempts: o.attempts,
                    }));
                }
            }
            Err(e) if parts.len() == 1 || shared_error(e.code) => {
                for (_, _, done, _) in parts {
                    let _ = done.send(Err(e.clone()));
                }
            }
            // Maybe one request's rows were refused (the data node checks a whole RPC before
            // writing any of it): each request alone gets its own answer. Rows some vgroup
            // already took are written again, which replaces them with themselves.
            Err(_) => {
                for (range, _, done, _) in parts {
                    let one = schemas
                        .iter()
                        .filter(|s| blocks[range.clone()].iter().any(|b| b.stable() == s.name))
                        .cloned()
                        .collect::<Vec<_>>();
                    let r = self
                        .client
                        .write_blocks(db, &one, &blocks[range], &|_| false, built_for)
                        .await;
                    let _ = done.send(r);
                }
            }
        }
    }
}

/// Takes the next RPC's requests off the front of `pending`: in order, until a bound or a
/// request whose schemas disagree with those taken (the first request is always taken).
fn take_batch(pending: &mut VecDeque<Entry>) -> Vec<Entry> {
    let mut batch: Vec<Entry> = Vec::new();
    let mut schemas: Vec<StableSchema> = Vec::new();
    let (mut rows, mut bytes) = (0u64, 0usize);
    while let Some(e) = pending.front() {
        if !batch.is_empty()
            && (rows + e.rows > RPC_ROWS_MAX as u64
                || bytes + e.bytes > RPC_BYTES_MAX
                || !compatible(&schemas, &e.schemas))
        {
            break;
        }
        let Some(e) = pending.pop_front() else {
            break;
        };
        rows += e.rows;
        bytes += e.bytes;
        for s in &e.schemas {
            if !schemas.iter().any(|t| t.name == s.name) {
                schemas.push(s.clone());
            }
        }
        batch.push(e);
    }
    batch
}

/// The rows of `blocks` as one block per STABLE, each subtable listed once: a data node
/// looks each listed subtable up (by name, in its catalog) once per block, so with many
/// requests of the same devices one list costs it far less than one per request. The rows
/// are appended block by block, one copy per column, with their runs as they are: the data
/// node groups a block's runs by subtable as it appends them to its memtable, so regrouping
/// them here (as this did until 2026-12) copied every row once more for nothing. Blocks of
/// one STABLE that differ in shape (not expected: their schemas are the same) stay apart.
/// `None` when no subtable has rows in two of the blocks: merging would join no lists, only
/// copy every row (with 100,000s of devices, concurrent bodies hold different ones), so they
/// go as they are.
pub fn merge_blocks(blocks: &[RowBlock]) -> Option<Vec<RowBlock>> {
    if !shares_subtables(blocks) {
        return None;
    }
    let mut out: Vec<RowBlock> = Vec::new();
    let mut done = vec![false; blocks.len()];
    for i in 0..blocks.len() {
        if done[i] {
            continue;
        }
        let first = &blocks[i];
        let group: Vec<usize> = (i..blocks.len())
            .filter(|&j| {
                !done[j]
                    && blocks[j].stable() == first.stable()
                    && first.accepts(blocks[j].columns())
            })
            .collect();
        for &j in &group {
            done[j] = true;
        }
        if group.len() == 1 {
            out.push(first.clone());
            continue;
        }
        let listed: usize = group.iter().map(|&j| blocks[j].num_tables()).sum();
        // Subtable name -> its index in the merged block.
        let mut tables: HashMap<&str, u32, foldhash::fast::RandomState> =
            HashMap::with_capacity_and_hasher(listed, Default::default());
        let mut merged = RowBlock::like(
            first.stable(),
            first.columns(),
            group.iter().map(|&j| blocks[j].num_rows()).sum(),
        );
        let name_bytes = group.iter().map(|&j| blocks[j].names().0.len()).sum();
        merged.reserve_tables(listed, name_bytes);
        let mut appended = true;
        for &j in &group {
            let b = &blocks[j];
            let table_of: Vec<u32> = (0..b.num_tables())
                .map(|t| match tables.entry(b.table(t)) {
                    MapEntry::Occupied(o) => {
                        // Tags from whichever request sent them (the others knew the table).
                        let idx = *o.get();
                        if merged.tags(idx as usize).is_none() {
                            merged.offer_tags(idx, b.tags_shared(t).cloned());
                        }
                        idx
                    }
                    MapEntry::Vacant(v) => {
                        *v.insert(merged.add_table_shared(b.table(t), b.tags_shared(t).cloned()))
                    }
                })
                .collect();
            appended &= merged.append_block(b, &table_of);
        }
        if appended {
            out.push(merged);
        } else {
            // Not reached: the group's blocks all fit the first's shape (`accepts`). Sent
            // as they are rather than lost.
            out.extend(group.iter().map(|&j| blocks[j].clone()));
        }
    }
    Some(out)
}

/// Whether some subtable has rows in two of `blocks` (a block holds each of its subtables
/// once). Names are unique in a database, whatever their STABLE.
fn shares_subtables(blocks: &[RowBlock]) -> bool {
    let tables: usize = blocks.iter().map(RowBlock::num_tables).sum();
    let mut seen: HashSet<&str, foldhash::fast::RandomState> =
        HashSet::with_capacity_and_hasher(tables, Default::default());
    blocks
        .iter()
        .any(|b| (0..b.num_tables()).any(|t| !seen.insert(b.table(t))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tidal_common::{DataType, Value};

    fn block(rows: &[(&str, Option<i64>, i64)]) -> RowBlock {
        let rows: Vec<_> = rows
            .iter()
            .map(|(n, tag, ts)| (*n, *tag, *ts, ts * 10))
            .collect();
        block_with_values(&rows)
    }

    /// (subtable, tag, ts, value) per row.
    fn block_with_values(rows: &[(&str, Option<i64>, i64, i64)]) -> RowBlock {
        let mut b = RowBlock::new("st", &[DataType::Timestamp, DataType::BigInt]);
        let mut names: Vec<&str> = Vec::new();
        for (name, tag, ts, value) in rows {
            let t = match names.iter().position(|n| n == name) {
                Some(t) => t as u32,
                None => {
                    names.push(name);
                    b.add_table(name, tag.map(|v| vec![Value::Int(v)]))
                }
            };
            assert!(b.push_row(t, &[Value::Timestamp(*ts), Value::Int(*value)]));
        }
        b
    }

    /// (subtable, ts) of every row in block order.
    fn rows_of(b: &RowBlock) -> Vec<(String, i64)> {
        let ts = match &b.columns()[0].data {
            ColumnData::Timestamp(v) => v.clone(),
            _ => panic!("ts column"),
        };
        let mut out = Vec::new();
        let mut row = 0;
        for (t, n) in b.runs() {
            for _ in 0..*n {
                out.push((b.table(*t as usize).to_string(), ts[row]));
                row += 1;
            }
        }
        out
    }

    #[test]
    fn merged_blocks_list_each_subtable_once_and_hold_every_row_with_its_tags() {
        let a = block(&[("x", None, 1), ("y", Some(2), 2), ("x", None, 3)]);
        let b = block(&[("y", None, 4), ("z", Some(3), 5), ("x", Some(1), 6)]);
        let other = RowBlock::new("other", &[DataType::Timestamp, DataType::BigInt]);
        let merged = merge_blocks(&[a, other, b]).expect("x and y are in both");
        assert_eq!(merged.len(), 2);
        let m = &merged[0];
        assert_eq!(m.stable(), "st");
        assert_eq!(m.num_tables(), 3, "each subtable listed once");
        // Block by block, in their order (the data node groups the runs by subtable).
        assert_eq!(
            rows_of(m),
            [("x", 1), ("y", 2), ("x", 3), ("y", 4), ("z", 5), ("x", 6)]
                .map(|(n, t)| (n.to_string(), t))
        );
        // Values travel with their rows.
        let v: Vec<i64> = match &m.columns()[1].data {
            ColumnData::Int(v) => v.clone(),
            _ => panic!("value column"),
        };
        assert_eq!(v, vec![10, 20, 30, 40, 50, 60]);
        // A subtable's tags come from whichever block had them.
        assert_eq!(m.tags(0), Some(&[Value::Int(1)][..]));
        assert_eq!(m.tags(1), Some(&[Value::Int(2)][..]));
        assert_eq!(m.tags(2), Some(&[Value::Int(3)][..]));
        assert!(RowBlock::from_parts(m.clone().into_parts()).is_ok());
        assert_eq!(merged[1].stable(), "other");
    }

    #[test]
    fn blocks_sharing_no_subtable_are_not_merged() {
        let a = block(&[("x", None, 1), ("y", Some(2), 2)]);
        let b = block(&[("z", None, 3), ("w", Some(3), 4)]);
        let other = RowBlock::new("other", &[DataType::Timestamp, DataType::BigInt]);
        assert!(merge_blocks(&[a.clone(), other, b.clone()]).is_none());
        // One subtable in two blocks is enough to merge them all.
        let c = block(&[("v", None, 5), ("y", None, 6)]);
        let merged = merge_blocks(&[a, b, c]).expect("y is in two blocks");
        assert_eq!(merged.len(), 1);
        assert_eq!(merged[0].num_tables(), 5);
        assert_eq!(merged[0].runs().len(), 6);
        assert_eq!(merged[0].num_rows(), 6);
    }

    #[test]
    fn a_blocks_oldest_row_is_its_oldest_timestamp() {
        let b = block(&[("x", None, 30), ("y", None, 7), ("x", None, 12)]);
        assert_eq!(oldest_ts(&b), Some(7));
        let empty = RowBlock::new("st", &[DataType::Timestamp, DataType::BigInt]);
        assert_eq!(oldest_ts(&empty), None);
    }
}
