//! The data node: hosts the vnodes the mnode assigns to it and serves the Dnode gRPC service.
//!
//! Membership: at start the data node registers with the mnode (keeping the id it persisted in
//! `dnode.json` across restarts), then heartbeats every second. Each heartbeat answer is the
//! authoritative list of vgroups this node hosts: missing vnodes are opened (created on first
//! use, recovered from their WAL otherwise) and vnodes no longer assigned are removed.
//! Until a vnode is open, requests for it fail with the retryable `VnodeNotFound`.
//!
//! Vnode calls do blocking file I/O (fsync), so they run on tokio's blocking pool.

use super::auth::{principal, Principal};
use super::dnode_auth::DnodeAuth;
use parking_lot::RwLock;
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tidal_common::{
    Column, DataType, DnodeId, StableSchema, StatusCode, TableMeta, TableUid, Value, VgroupId,
};
use tidal_proto::convert::{
    batch_to_wire, options_from_wire, range_of, schema_from_wire, schema_to_wire,
    table_meta_to_wire, value_from_wire, write_from_wire,
};
use tidal_proto::status_error;
use tidal_proto::v1::{self, dnode_server::Dnode as DnodeRpc};
use tidal_vnode::{Vnode, VnodeConfig, VnodeError};
use tonic::{Request, Response, Status};

/// Timing of a data node's membership (the `heartbeat_interval_ms` and `register_timeout_ms`
/// configuration keys) and its query limits.
#[derive(Clone, Copy, Debug)]
pub struct DnodeOptions {
    pub heartbeat_interval_ms: u64,
    /// How long a starting data node keeps trying to reach the mnode before giving up.
    pub register_timeout_ms: u64,
    /// Memory one query fragment may hold (`query_memory_max_bytes`); 0 = no limit.
    pub query_memory_max_bytes: u64,
}

/// Batches a fragment stream buffers ahead of its reader: the executor blocks (back-pressure)
/// once the reader is this far behind, so a fragment holds O(this x batch) rows in flight.
const FRAGMENT_STREAM_BUFFER: usize = 2;

#[derive(Clone)]
pub struct DnodeService {
    inner: Arc<Inner>,
}

struct Inner {
    data: PathBuf,
    addr: String,
    client: tidal_client::Client,
    id: RwLock<DnodeId>,
    vnodes: RwLock<HashMap<VgroupId, Arc<Vnode>>>,
    /// Serialises opening and dropping vnodes (heartbeat reconcile vs explicit RPCs).
    membership: tokio::sync::Mutex<()>,
    stop: tokio::sync::watch::Sender<bool>,
    /// Cluster secret and user table (authorization of every request, docs/SECURITY.md).
    auth: Arc<DnodeAuth>,
    /// Mutating requests; closed at the start of a graceful shutdown.
    gate: super::gate::WriteGate,
    query_memory_max_bytes: u64,
    /// Vnode fragments run on the thread that received the call / on the blocking pool.
    fragments_inline: AtomicU64,
    fragments_pooled: AtomicU64,
    /// `ExecFragments` calls by transport, and the frame connections open now.
    calls_grpc: AtomicU64,
    writes_grpc: AtomicU64,
    writes_frames: AtomicU64,
    calls_frames: AtomicU64,
    frame_connections: AtomicU64,
    /// This process's configuration as it resolved it (SHOW DNODE n VARIABLES).
    variables: Arc<Vec<crate::config::Variable>>,
}

fn vnode_err(e: VnodeError) -> Status {
    status_error(e.status_code(), e.to_string())
}

fn internal(e: impl std::fmt::Display) -> Status {
    status_error(StatusCode::Internal, e.to_string())
}

#[derive(serde::Serialize, serde::Deserialize)]
struct DnodeFile {
    id: u32,
}

impl DnodeService {
    pub async fn start(
        data: PathBuf,
        addr: String,
        client: tidal_client::Client,
        opts: DnodeOptions,
        auth: Arc<DnodeAuth>,
        variables: Arc<Vec<crate::config::Variable>>,
    ) -> Result<DnodeService, super::BoxError> {
        let id_path = data.join("dnode.json");
        let known = match std::fs::read(&id_path) {
            Ok(b) => Some(
                serde_json::from_slice::<DnodeFile>(&b)
                    .map_err(|e| format!("{} is corrupt: {e}", id_path.display()))?
                    .id,
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(format!("read {}: {e}", id_path.display()).into()),
        };
        let id = auth
            .register(&client, &addr, known, opts.register_timeout_ms)
            .await?;
        if known != Some(id.0) {
            write_atomic(&id_path, &serde_json::to_vec(&DnodeFile { id: id.0 })?)?;
        }
        let (stop, _) = tokio::sync::watch::channel(false);
        let svc = DnodeService {
            inner: Arc::new(Inner {
                data,
                addr,
                client,
                id: RwLock::new(id),
                vnodes: RwLock::new(HashMap::new()),
                membership: tokio::sync::Mutex::new(()),
                stop,
                auth,
                gate: Default::default(),
                query_memory_max_bytes: opts.query_memory_max_bytes,
                fragments_inline: AtomicU64::new(0),
                fragments_pooled: AtomicU64::new(0),
                calls_grpc: AtomicU64::new(0),
                writes_grpc: AtomicU64::new(0),
                writes_frames: AtomicU64::new(0),
                calls_frames: AtomicU64::new(0),
                frame_connections: AtomicU64::new(0),
                variables,
            }),
        };
        // First reconcile before announcing readiness, so recovered vnodes serve at once.
        if let Err(e) = svc.heartbeat_once().await {
            tracing::warn!("first heartbeat: {e}");
        }
        let bg = svc.clone();
        let mut stop_rx = svc.inner.stop.subscribe();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(opts.heartbeat_interval_ms)) => {}
                    _ = stop_rx.changed() => return,
                }
                if let Err(e) = bg.heartbeat_once().await {
                    tracing::warn!("heartbeat: {e}");
                }
            }
        });
        Ok(svc)
    }

    /// Graceful shutdown, step 1: refuses new mutations with `ShuttingDown` (reads still
    /// serve), stops heartbeating, and resolves when the mutations in flight have finished.
    pub async fn drain(&self) {
        self.inner.gate.close();
        let _ = self.inner.stop.send(true);
        let n = self.inner.gate.in_flight();
        if n > 0 {
            tracing::info!(in_flight = n, "waiting for in-flight writes");
        }
        self.inner.gate.wait_idle().await;
    }

    /// Graceful shutdown, step 2: flushes every vnode's memtables to STT files (which trims
    /// its WAL, so the next start replays nothing) and closes the vnodes. Returns how many
    /// vnodes were flushed, or the failures (their data stays safe in the WAL).
    pub async fn flush_and_close(&self) -> Result<usize, String> {
        let _guard = self.inner.membership.lock().await;
        let vnodes: Vec<Arc<Vnode>> = self.inner.vnodes.write().drain().map(|(_, v)| v).collect();
        let tasks: Vec<_> = vnodes
            .into_iter()
            .map(|v| {
                let id = v.config().vgroup;
                let task = tokio::task::spawn_blocking(move || {
                    let started = std::time::Instant::now();
                    let r = v.flush();
                    // The last reference joins the vnode's worker: off the async threads.
                    drop(v);
                    r.map(|()| started.elapsed())
                });
                (id, task)
            })
            .collect();
        let mut failed = Vec::new();
        let mut flushed = 0;
        for (id, task) in tasks {
            match task.await {
                Ok(Ok(took)) => {
                    flushed += 1;
                    tracing::info!(
                        vgroup = id.0,
                        took_ms = took.as_millis() as u64,
                        "vnode flushed"
                    );
                }
                Ok(Err(e)) => failed.push(format!("vnode {id}: {e}")),
                Err(e) => failed.push(format!("vnode {id}: flush task failed: {e}")),
            }
        }
        if failed.is_empty() {
            Ok(flushed)
        } else {
            Err(failed.join("; "))
        }
    }

    /// Admits a mutating request unless the node is shutting down.
    fn admit(&self) -> Result<super::gate::Admitted, Status> {
        self.inner
            .gate
            .admit(&format!("data node {}", self.inner.addr))
    }

    /// A `Write` call, its request read by the generated decoder or already read into a
    /// batch ([`super::write_grpc`]).
    pub(crate) async fn write_in(
        &self,
        req: Request<super::write_grpc::WriteIn>,
    ) -> Result<Response<v1::WriteResponse>, Status> {
        self.inner.writes_grpc.fetch_add(1, Ordering::Relaxed);
        let p = principal(&req)?;
        self.write_as(&p, req.into_inner()).await.map(Response::new)
    }

    pub(crate) fn count_frame_write(&self) {
        self.inner.writes_frames.fetch_add(1, Ordering::Relaxed);
    }

    /// A write by `p`, over gRPC ([`DnodeService::write_in`]) or as a WRITE frame
    /// ([`super::frames`]).
    pub(crate) async fn write_as(
        &self,
        p: &Principal,
        input: super::write_grpc::WriteIn,
    ) -> Result<v1::WriteResponse, Status> {
        let _admitted = self.admit()?;
        let batch = match input {
            super::write_grpc::WriteIn::Read(b) => b,
            super::write_grpc::WriteIn::Wire(w) => write_from_wire(w)?,
        };
        let vnode = self.vnode(&batch.db, batch.vgroup.0)?;
        authorize(p, &vnode, Need::Write)?;
        let out = blocking(move || vnode.write_owned(batch).map_err(vnode_err)).await?;
        Ok(v1::WriteResponse {
            rows: out.rows,
            tables_created: out.tables_created,
        })
    }

    async fn heartbeat_once(&self) -> Result<(), String> {
        let id = *self.inner.id.read();
        let mut m = self.inner.client.mnode().map_err(|e| e.to_string())?;
        let resp = match m
            .heartbeat(v1::HeartbeatRequest {
                dnode_id: id.0,
                addr: self.inner.addr.clone(),
                auth_epoch: self.inner.auth.epoch(),
            })
            .await
        {
            Ok(r) => r.into_inner(),
            Err(s)
                if tidal_proto::code_of(&s) == StatusCode::InvalidArgument
                    || tidal_proto::code_of(&s) == StatusCode::Unauthenticated
                    || s.code() == tonic::Code::NotFound =>
            {
                // The mnode does not know us or our secret (its catalog was reset): register
                // again.
                let new_id = self
                    .inner
                    .auth
                    .register(&self.inner.client, &self.inner.addr, Some(id.0), 0)
                    .await
                    .map_err(|e| e.to_string())?;
                *self.inner.id.write() = new_id;
                return Ok(());
            }
            Err(s) => return Err(s.message().to_string()),
        };
        self.inner.auth.on_heartbeat(resp.auth.as_ref());
        self.reconcile(resp.assignments).await
    }

    async fn reconcile(&self, assignments: Vec<v1::VgroupAssignment>) -> Result<(), String> {
        let _guard = self.inner.membership.lock().await;
        let mut wanted = HashMap::new();
        for a in assignments {
            let cfg = assignment_config(&a).map_err(|e| e.message().to_string())?;
            wanted.insert(cfg.vgroup, cfg);
        }
        let open: Vec<VgroupId> = self.inner.vnodes.read().keys().copied().collect();
        for id in open {
            if !wanted.contains_key(&id) {
                self.remove_vnode(id).await;
            }
        }
        for (id, cfg) in wanted {
            let open = self.inner.vnodes.read().get(&id).cloned();
            match open {
                Some(v) => {
                    // ALTER DATABASE made while this node was unreachable.
                    if v.current_options() != cfg.options {
                        let o = cfg.options.clone();
                        let r = tokio::task::spawn_blocking(move || v.set_options(&o)).await;
                        if let Ok(Err(e)) = r {
                            tracing::error!("apply options to vnode {id}: {e}");
                        }
                    }
                }
                None => {
                    if let Err(e) = self.open_vnode(cfg).await {
                        tracing::error!("open vnode {id}: {}", e.message());
                    }
                }
            }
        }
        // Remove directories of vnodes that are neither open nor assigned (dropped while down).
        if let Ok(entries) = std::fs::read_dir(self.vnodes_dir()) {
            for e in entries.flatten() {
                let Some(id) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                    continue;
                };
                if !self.inner.vnodes.read().contains_key(&VgroupId(id)) {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
        Ok(())
    }

    fn vnodes_dir(&self) -> PathBuf {
        self.inner.data.join("vnodes")
    }

    async fn open_vnode(&self, cfg: VnodeConfig) -> Result<(), Status> {
        let id = cfg.vgroup;
        let dir = self.vnodes_dir().join(id.0.to_string());
        let vnode = tokio::task::spawn_blocking(move || Vnode::open(&dir, cfg))
            .await
            .map_err(internal)?
            .map_err(vnode_err)?;
        let vnode = Arc::new(vnode);
        self.inner.vnodes.write().insert(id, vnode.clone());
        tracing::info!("vnode {id} open");
        warm_in_background(id, &vnode);
        Ok(())
    }

    async fn remove_vnode(&self, id: VgroupId) {
        let Some(mut v) = self.inner.vnodes.write().remove(&id) else {
            return;
        };
        // Wait briefly for in-flight requests to release the vnode, then delete its files.
        for _ in 0..50 {
            match Arc::try_unwrap(v) {
                Ok(vnode) => {
                    let _ = tokio::task::spawn_blocking(move || vnode.destroy()).await;
                    tracing::info!("vnode {id} dropped");
                    return;
                }
                Err(back) => {
                    v = back;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
        let dir = self.vnodes_dir().join(id.0.to_string());
        let _ = std::fs::remove_dir_all(dir);
    }

    fn vnode(&self, db: &str, id: u32) -> Result<Arc<Vnode>, Status> {
        let v = self.inner.vnodes.read().get(&VgroupId(id)).cloned();
        match v {
            Some(v) if v.config().db == db || db.is_empty() => Ok(v),
            Some(v) => Err(status_error(
                StatusCode::WrongVgroup,
                format!(
                    "vgroup {id} belongs to database '{}', not '{db}'",
                    v.config().db
                ),
            )),
            None => Err(status_error(
                StatusCode::VnodeNotFound,
                format!(
                    "data node {} does not host vgroup {id} of database '{db}'",
                    self.inner.addr
                ),
            )),
        }
    }

    fn vnode_ref(&self, r: Option<&v1::VnodeRef>) -> Result<Arc<Vnode>, Status> {
        let Some(r) = r else {
            return Err(status_error(
                StatusCode::InvalidArgument,
                "missing vnode reference",
            ));
        };
        self.vnode(&r.db, r.vgroup_id)
    }
}

fn assignment_config(a: &v1::VgroupAssignment) -> Result<VnodeConfig, Status> {
    let Some(vg) = a.vgroup.as_ref() else {
        return Err(status_error(
            StatusCode::InvalidArgument,
            "assignment without vgroup",
        ));
    };
    Ok(VnodeConfig {
        vgroup: VgroupId(vg.id),
        db: a.db.clone(),
        range: range_of(vg),
        options: options_from_wire(a.options.as_ref())?,
    })
}

/// Writes a small file atomically: temp file, fsync, rename, fsync of the directory.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// Adapts a vnode to the SQL executor's scan interface. With a deadline (a fragment tried on
/// the thread that received it), each storage call first checks it and, once it has passed,
/// fails and sets `spent`, so that the fragment stops and runs again on the blocking pool.
struct VnodeSource<'a> {
    vnode: &'a Vnode,
    until: Option<std::time::Instant>,
    spent: std::cell::Cell<bool>,
}

impl<'a> VnodeSource<'a> {
    fn new(vnode: &'a Vnode) -> VnodeSource<'a> {
        VnodeSource::until(vnode, None)
    }

    fn until(vnode: &'a Vnode, until: Option<std::time::Instant>) -> VnodeSource<'a> {
        VnodeSource {
            vnode,
            until,
            spent: std::cell::Cell::new(false),
        }
    }

    /// Whether a storage call may start (see the type's doc).
    fn check(&self) -> Result<(), String> {
        let past = self.until.is_some_and(|u| std::time::Instant::now() >= u);
        if past || self.spent.get() {
            self.spent.set(true);
            return Err(INLINE_SPENT.to_string());
        }
        Ok(())
    }
}

impl tidal_sql::ScanSource for VnodeSource<'_> {
    fn schema(&self, stable: &str) -> Option<Arc<StableSchema>> {
        self.vnode.stable_schema(stable)
    }
    fn tables(&self, stable: &str) -> Vec<Arc<TableMeta>> {
        self.vnode.tables(Some(stable))
    }
    fn stable_tables(&self, stable: &str) -> Option<Arc<tidal_common::StableTables>> {
        self.vnode.stable_tables(stable)
    }
    fn stable_tables_if_current(&self, stable: &str) -> Option<Arc<tidal_common::StableTables>> {
        self.vnode.stable_tables_if_current(stable)
    }
    fn table(&self, name: &str) -> Option<Arc<TableMeta>> {
        self.vnode.table(name)
    }
    fn scan(
        &self,
        uid: TableUid,
        ts_min: i64,
        ts_max: i64,
        columns: &[usize],
    ) -> Result<Vec<Column>, String> {
        self.check()?;
        self.vnode
            .scan(uid, ts_min, ts_max, columns)
            .map_err(|e| e.to_string())
    }
    fn last_row(&self, uid: TableUid, columns: &[usize]) -> Result<Option<Vec<Column>>, String> {
        self.check()?;
        self.vnode.last_row(uid, columns).map_err(|e| e.to_string())
    }
    fn last_rows(
        &self,
        uids: &[TableUid],
        columns: &[usize],
    ) -> Result<Vec<Option<Vec<Column>>>, String> {
        self.check()?;
        self.vnode
            .last_rows(uids, columns)
            .map_err(|e| e.to_string())
    }
    fn last_rows_columns(
        &self,
        stable: &str,
        uids: &[TableUid],
        columns: &[usize],
    ) -> Result<(Vec<usize>, Vec<Column>), String> {
        self.check()?;
        self.vnode
            .last_rows_columns(stable, uids, columns)
            .map_err(|e| e.to_string())
    }
    fn last_values(
        &self,
        uid: TableUid,
        columns: &[usize],
    ) -> Result<Vec<Option<(i64, Value)>>, String> {
        self.check()?;
        self.vnode
            .last_values(uid, columns)
            .map_err(|e| e.to_string())
    }
    fn tables_by_tag(
        &self,
        stable: &str,
        k: usize,
        values: &[Value],
    ) -> Option<Vec<Arc<TableMeta>>> {
        Some(self.vnode.tables_by_tag(stable, k, values))
    }
    fn ranges_desc(&self, uid: TableUid) -> Result<Vec<(i64, i64)>, String> {
        self.check()?;
        self.vnode.ranges_desc(uid).map_err(|e| e.to_string())
    }
    fn scan_filtered(
        &self,
        uid: TableUid,
        ts_min: i64,
        ts_max: i64,
        columns: &[usize],
        prune: &tidal_sql::prune::BlockPred,
    ) -> Result<Vec<Column>, String> {
        self.check()?;
        let types = self
            .vnode
            .column_types(uid, prune.columns())
            .map_err(|e| e.to_string())?;
        let may_match = sma_matcher(prune, &types);
        self.vnode
            .scan_filtered(uid, ts_min, ts_max, columns, prune.columns(), &may_match)
            .map_err(|e| e.to_string())
    }
    fn ranges_desc_many(&self, uids: &[TableUid]) -> Result<Vec<(i64, i64)>, String> {
        self.check()?;
        Ok(self.vnode.ranges_desc_many(uids))
    }
    fn rows_upper_bound(
        &self,
        uids: &[TableUid],
        ts_min: i64,
        ts_max: i64,
    ) -> Result<Option<Vec<u64>>, String> {
        self.check()?;
        Ok(Some(self.vnode.rows_upper_bound(uids, ts_min, ts_max)))
    }
    fn scan_many(
        &self,
        uids: &[TableUid],
        ts_min: i64,
        ts_max: i64,
        columns: &[usize],
        prune: Option<&tidal_sql::prune::BlockPred>,
    ) -> Result<(Vec<usize>, Vec<Column>), String> {
        self.check()?;
        let Some(prune) = prune else {
            return self
                .vnode
                .scan_many(uids, ts_min, ts_max, columns, &[], None)
                .map_err(|e| e.to_string());
        };
        let Some(first) = uids.first() else {
            return Ok((Vec::new(), Vec::new()));
        };
        let types = self
            .vnode
            .column_types(*first, prune.columns())
            .map_err(|e| e.to_string())?;
        let may_match = sma_matcher(prune, &types);
        self.vnode
            .scan_many(
                uids,
                ts_min,
                ts_max,
                columns,
                prune.columns(),
                Some(&may_match),
            )
            .map_err(|e| e.to_string())
    }
    fn scan_pieces(
        &self,
        uid: TableUid,
        ts_min: i64,
        ts_max: i64,
        columns: &[usize],
    ) -> Result<Vec<tidal_sql::ScanPiece>, String> {
        self.check()?;
        let types = self
            .vnode
            .column_types(uid, columns)
            .map_err(|e| e.to_string())?;
        let pieces = self
            .vnode
            .scan_pieces(uid, ts_min, ts_max, columns)
            .map_err(|e| e.to_string())?;
        Ok(pieces
            .into_iter()
            .map(|p| match p {
                tidal_vnode::ScanPiece::Rows(c) => tidal_sql::ScanPiece::Rows(c),
                tidal_vnode::ScanPiece::Sma {
                    rows,
                    ts_min,
                    ts_max,
                    stats,
                } => tidal_sql::ScanPiece::Summary {
                    rows: rows as u64,
                    ts_min,
                    ts_max,
                    cols: stats
                        .iter()
                        .zip(&types)
                        .map(|(s, t)| col_summary(s, *t))
                        .collect(),
                },
            })
            .collect())
    }
}

/// The storage's block test for a row filter: converts a block's SMA to the executor's
/// summaries (`types`: of the filter's columns) and asks `prune`.
fn sma_matcher<'a>(
    prune: &'a tidal_sql::prune::BlockPred,
    types: &'a [DataType],
) -> impl Fn(u32, &[tidal_vnode::ColStats]) -> bool + 'a {
    move |rows, stats| {
        let sums: Vec<tidal_sql::ColSummary> = stats
            .iter()
            .zip(types)
            .map(|(s, t)| col_summary(s, *t))
            .collect();
        prune.may_match(u64::from(rows), &sums)
    }
}

/// A block's statistics of one column as the SQL executor takes them.
fn col_summary(s: &tidal_vnode::ColStats, t: DataType) -> tidal_sql::ColSummary {
    tidal_sql::ColSummary {
        count: u64::from(s.count),
        min: s.min.to_value(t),
        max: s.max.to_value(t),
        sum: s.sum.to_value(t),
    }
}

/// Sets its flag when dropped: tells blocking work that its request was abandoned.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// A fragment's batches on their way to the coordinator. Dropping it (the call ended or was
/// reset) stops the executor: its next send fails, and the flag stops a scan that sends
/// nothing. Past the caller's grpc-timeout it ends with `Timeout` (a coordinator that hangs
/// without closing the connection).
pub struct FragmentBatches<T = v1::Batch> {
    rx: tokio::sync::mpsc::Receiver<Result<T, Status>>,
    deadline: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
    _cancel: CancelOnDrop,
}

impl<T> futures::Stream for FragmentBatches<T> {
    type Item = Result<T, Status>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        use std::future::Future;
        if let Some(d) = self.deadline.as_mut() {
            if d.as_mut().poll(cx).is_ready() {
                self.deadline = None;
                self._cancel.0.store(true, Ordering::Relaxed);
                self.rx.close();
                return std::task::Poll::Ready(Some(Err(status_error(
                    StatusCode::Timeout,
                    "fragment timed out: its query's deadline passed",
                ))));
            }
        }
        self.rx.poll_recv(cx)
    }
}

/// The `grpc-timeout` a caller set (`<digits><unit>`, unit one of H M S m u n).
fn grpc_timeout(m: &tonic::metadata::MetadataMap) -> Option<Duration> {
    let v = m.get("grpc-timeout")?.to_str().ok()?;
    let (digits, unit) = v.split_at(v.len().checked_sub(1)?);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.saturating_mul(3600)),
        "M" => Duration::from_secs(n.saturating_mul(60)),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

impl DnodeService {
    /// Runs a fragment on each of `r`'s vnodes of this data node for the principal `p` (the
    /// `ExecFragments` call, over gRPC or frames), its parts as they come. `timeout` is the
    /// caller's deadline.
    #[allow(clippy::result_large_err)]
    pub(crate) fn fragments_call(
        &self,
        p: &Principal,
        r: v1::FragmentsRequest,
        timeout: Option<Duration>,
    ) -> Result<FragmentBatches<v1::FragmentsPart>, Status> {
        let deadline = timeout.map(|t| {
            Box::pin(tokio::time::sleep_until(
                (std::time::Instant::now() + t).into(),
            ))
        });
        if r.vnodes.is_empty() || r.vnodes.len() > u32::MAX as usize {
            return Err(status_error(
                StatusCode::InvalidArgument,
                format!(
                    "ExecFragments needs 1 or more vnodes, got {}",
                    r.vnodes.len()
                ),
            ));
        }
        // Every vnode is checked before any runs: a call either runs everywhere or nowhere.
        let mut vnodes = Vec::with_capacity(r.vnodes.len());
        for v in &r.vnodes {
            let vnode = self.vnode_ref(Some(v))?;
            authorize(p, &vnode, Need::Read)?;
            vnodes.push(vnode);
        }
        let fragment = Arc::new(decode_fragment(&r.fragment, "query")?);
        let cancel = CancelOnDrop(Arc::new(AtomicBool::new(false)));
        // A point lookup runs here whatever it costs (a few cache lookups); a fragment over
        // a short time range is tried here within a time budget and moves to the pool if
        // it runs out (see `VnodeSource`).
        let point = vnodes
            .iter()
            .all(|v| tidal_sql::is_point_lookup(&fragment, &VnodeSource::new(v)));
        let short = point
            || vnodes.iter().all(|v| {
                short_range(&fragment, v)
                    && tidal_sql::finds_lookups_built(&fragment, &VnodeSource::new(v))
            });
        if short {
            let until = (!point).then(|| std::time::Instant::now() + INLINE_RUN_MAX);
            let budget = self.fragment_budget(r.memory_max_bytes);
            if let Some(parts) = run_here(&fragment, &vnodes, &cancel.0, &budget, until) {
                self.count_fragments(true, vnodes.len());
                let (tx, rx) = tokio::sync::mpsc::channel(parts.len().max(1));
                for p in parts {
                    // cannot fail: the channel has room for every part and its reader is here
                    let _ = tx.try_send(p);
                }
                return Ok(FragmentBatches {
                    rx,
                    deadline,
                    _cancel: cancel,
                });
            }
        }
        self.count_fragments(false, vnodes.len());
        let (tx, rx) = tokio::sync::mpsc::channel(FRAGMENT_STREAM_BUFFER * vnodes.len());
        for (index, vnode) in vnodes.into_iter().enumerate() {
            let (tx, flag, fragment) = (tx.clone(), cancel.0.clone(), fragment.clone());
            let budget = self.fragment_budget(r.memory_max_bytes);
            let index = index as u32;
            tokio::task::spawn_blocking(move || {
                let start = std::time::Instant::now();
                let r = tidal_sql::execute_fragment_stream(
                    &fragment,
                    &VnodeSource::new(&vnode),
                    &flag,
                    &budget,
                    &mut |b| {
                        // Blocks while the reader is behind; fails once it has gone.
                        tx.blocking_send(Ok(data_part(index, &b))).map_err(|_| {
                            tidal_sql::SqlError::Execution(
                                "fragment cancelled: its reader went away".into(),
                            )
                        })
                    },
                );
                let _ = tx.blocking_send(end_part(index, r, start));
            });
        }
        Ok(FragmentBatches {
            rx,
            deadline,
            _cancel: cancel,
        })
    }

    /// The vnode, the decoded fragment and the memory budget of a fragment call, after the
    /// caller's READ privilege is checked.
    #[allow(clippy::result_large_err)]
    fn fragment_call(
        &self,
        req: Request<v1::FragmentRequest>,
    ) -> Result<(Arc<Vnode>, tidal_sql::Fragment, tidal_sql::MemoryBudget), Status> {
        let p = principal(&req)?;
        let r = req.into_inner();
        let vnode = self.vnode_ref(r.vnode.as_ref())?;
        authorize(&p, &vnode, Need::Read)?;
        let fragment = decode_fragment(&r.fragment, "query")?;
        Ok((vnode, fragment, self.fragment_budget(r.memory_max_bytes)))
    }

    /// Counts a fragment call that arrived as frames.
    pub(crate) fn count_frame_call(&self) {
        self.inner.calls_frames.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts an open frame connection until the guard is dropped.
    pub(crate) fn frame_connection(&self) -> impl Drop {
        struct Open(DnodeService);
        impl Drop for Open {
            fn drop(&mut self) {
                self.0
                    .inner
                    .frame_connections
                    .fetch_sub(1, Ordering::Relaxed);
            }
        }
        self.inner.frame_connections.fetch_add(1, Ordering::Relaxed);
        Open(self.clone())
    }

    fn count_fragments(&self, inline: bool, n: usize) {
        let c = match inline {
            true => &self.inner.fragments_inline,
            false => &self.inner.fragments_pooled,
        };
        c.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// A fragment's memory budget: the smaller of this node's limit and the coordinating
    /// query's (0 = none).
    fn fragment_budget(&self, query_max_bytes: u64) -> tidal_sql::MemoryBudget {
        let own = self.inner.query_memory_max_bytes;
        let limit = match (own, query_max_bytes) {
            (0, q) => q,
            (o, 0) => o,
            (o, q) => o.min(q),
        };
        tidal_sql::MemoryBudget::new(limit, "query_memory_max_bytes")
    }
}

/// Subtables a warm-up loads per hold of its vnode.
const WARM_TABLES_PER_STEP: usize = 256;

/// Vnodes waiting for their warm-up, and whether a thread is draining them. One warm-up at
/// a time per process: each reads every subtable's newest block, and a node that opens many
/// vnodes at once should neither read them all at once nor start a thread per vnode.
static WARM_QUEUE: parking_lot::Mutex<WarmQueue> = parking_lot::Mutex::new(WarmQueue {
    vnodes: VecDeque::new(),
    draining: false,
});

struct WarmQueue {
    vnodes: VecDeque<(VgroupId, Weak<Vnode>)>,
    draining: bool,
}

/// Queues the warm-up of a vnode just opened ([`Vnode::warm_last_rows`]), run on a thread of
/// its own so that the first dashboard queries after a restart hit the LAST_ROW cache. The
/// queue holds the vnode weakly and the warm-up a step at a time: a vnode dropped meanwhile
/// goes away, and its warm-up with it.
fn warm_in_background(id: VgroupId, vnode: &Arc<Vnode>) {
    let mut q = WARM_QUEUE.lock();
    q.vnodes.push_back((id, Arc::downgrade(vnode)));
    if q.draining {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("cache-warm".into())
        .spawn(|| loop {
            let next = {
                let mut q = WARM_QUEUE.lock();
                let next = q.vnodes.pop_front();
                q.draining = next.is_some();
                next
            };
            let Some((id, weak)) = next else { return };
            warm(id, &weak);
        });
    match spawned {
        Ok(_) => q.draining = true,
        Err(e) => {
            q.vnodes.clear();
            tracing::warn!("no last-row cache warm-up: {e}");
        }
    }
}

fn warm(id: VgroupId, weak: &Weak<Vnode>) {
    let started = std::time::Instant::now();
    let Some(uids) = weak.upgrade().map(|v| v.table_uids()) else {
        return;
    };
    let mut made = 0;
    for step in uids.chunks(WARM_TABLES_PER_STEP) {
        let Some(v) = weak.upgrade() else { return };
        match v.warm_last_rows(step) {
            Ok(Some(n)) => made += n,
            Ok(None) => break,
            Err(e) => {
                tracing::warn!("vnode {id}: last-row cache warm-up stopped: {e}");
                break;
            }
        }
    }
    if made > 0 {
        tracing::info!(
            "vnode {id}: last-row cache warmed with {made} subtables in {:.0?}",
            started.elapsed()
        );
    }
}

/// A fragment from the wire; `what` names it in the error ("query", "DELETE").
#[allow(clippy::result_large_err)]
fn decode_fragment(bytes: &[u8], what: &str) -> Result<tidal_sql::Fragment, Status> {
    tidal_sql::Fragment::from_bytes(bytes).map_err(|e| {
        status_error(
            StatusCode::InvalidArgument,
            format!("bad {what} fragment: {e}"),
        )
    })
}

/// Runs a point-lookup fragment (see [`tidal_sql::is_point_lookup`]) on each of `vnodes`
/// on the calling thread: a few cached rows each, cheaper than two thread hand-offs per
/// vnode. Gives the parts an `ExecFragments` stream carries, in order; an error ends them.
fn run_here(
    fragment: &tidal_sql::Fragment,
    vnodes: &[Arc<Vnode>],
    cancel: &AtomicBool,
    budget: &tidal_sql::MemoryBudget,
    until: Option<std::time::Instant>,
) -> Option<Vec<Result<v1::FragmentsPart, Status>>> {
    let mut parts = Vec::new();
    for (index, vnode) in vnodes.iter().enumerate() {
        let index = index as u32;
        let start = std::time::Instant::now();
        let src = VnodeSource::until(vnode, until);
        let r = tidal_sql::execute_fragment_stream(fragment, &src, cancel, budget, &mut |b| {
            parts.push(Ok(data_part(index, &b)));
            Ok(())
        });
        if src.spent.get() {
            return None;
        }
        let end = end_part(index, r, start);
        let failed = end.is_err();
        parts.push(end);
        if failed {
            break;
        }
    }
    Some(parts)
}

/// How long an `ExecFragments` call may run on the thread that received it before it moves
/// to the blocking pool and starts again there. On this 2-core class of machine handing a
/// call to the pool (a thread wakeup per vnode, another per result batch) cost about as much
/// CPU as a ten-minute aggregate over a hundred trucks itself; the work thrown away when the
/// budget runs out is at most this plus one storage call.
const INLINE_RUN_MAX: Duration = Duration::from_millis(1);

/// The widest time range a fragment may read to be tried on the receiving thread: it bounds
/// the one storage call that may run past [`INLINE_RUN_MAX`] (a dashboard's last minutes or
/// hour, not a year of one subtable).
const INLINE_RANGE_MAX_SECONDS: i64 = 3_600;

/// Whether `f` reads at most [`INLINE_RANGE_MAX_SECONDS`] of `vnode`'s time.
fn short_range(f: &tidal_sql::Fragment, vnode: &Vnode) -> bool {
    let per_second = vnode.config().options.precision.per_second();
    f.ts_max
        .checked_sub(f.ts_min)
        .is_some_and(|d| d <= INLINE_RANGE_MAX_SECONDS.saturating_mul(per_second))
}

/// The message of the error a storage call returns once a [`VnodeSource`]'s deadline has
/// passed (the fragment then runs again on the pool; no caller sees it).
const INLINE_SPENT: &str = "inline time budget spent";

/// A batch of vnode `index` in an `ExecFragments` stream.
fn data_part(index: u32, b: &tidal_common::Batch) -> v1::FragmentsPart {
    v1::FragmentsPart {
        index,
        batch: Some(batch_to_wire(b)),
        end: false,
        elapsed_us: 0,
    }
}

/// The last part of vnode `index` in an `ExecFragments` stream: its end with the time it
/// took since `start`, or its error.
fn end_part(
    index: u32,
    r: Result<(), tidal_sql::SqlError>,
    start: std::time::Instant,
) -> Result<v1::FragmentsPart, Status> {
    match r {
        Ok(()) => Ok(v1::FragmentsPart {
            index,
            batch: None,
            end: true,
            elapsed_us: start.elapsed().as_micros() as u64,
        }),
        Err(e) => Err(status_error(e.status_code(), e.to_string())),
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Status> + Send + 'static,
) -> Result<T, Status> {
    tokio::task::spawn_blocking(f).await.map_err(internal)?
}

#[tonic::async_trait]
impl DnodeRpc for DnodeService {
    async fn create_vnode(
        &self,
        req: Request<v1::CreateVnodeRequest>,
    ) -> Result<Response<v1::Empty>, Status> {
        principal(&req)?.require_superuser("create vnodes")?;
        let _admitted = self.admit()?;
        let Some(a) = req.into_inner().assignment else {
            return Err(status_error(
                StatusCode::InvalidArgument,
                "missing assignment",
            ));
        };
        let cfg = assignment_config(&a)?;
        let _guard = self.inner.membership.lock().await;
        let open = self.inner.vnodes.read().get(&cfg.vgroup).cloned();
        match open {
            // Already open: the assignment may carry ALTER DATABASE changes.
            Some(v) => {
                let o = cfg.options.clone();
                blocking(move || v.set_options(&o).map_err(vnode_err)).await?;
            }
            None => self.open_vnode(cfg).await?,
        }
        Ok(Response::new(v1::Empty {}))
    }

    async fn drop_vnode(&self, req: Request<v1::VnodeRef>) -> Result<Response<v1::Empty>, Status> {
        principal(&req)?.require_superuser("drop vnodes")?;
        let _admitted = self.admit()?;
        let r = req.into_inner();
        let _guard = self.inner.membership.lock().await;
        self.remove_vnode(VgroupId(r.vgroup_id)).await;
        Ok(Response::new(v1::Empty {}))
    }

    async fn write(
        &self,
        req: Request<v1::WriteRequest>,
    ) -> Result<Response<v1::WriteResponse>, Status> {
        self.write_in(req.map(super::write_grpc::WriteIn::Wire))
            .await
    }

    async fn create_tables(
        &self,
        req: Request<v1::CreateTablesRequest>,
    ) -> Result<Response<v1::CreateTablesResponse>, Status> {
        let p = principal(&req)?;
        let _admitted = self.admit()?;
        let r = req.into_inner();
        let vnode = self.vnode_ref(r.vnode.as_ref())?;
        authorize(&p, &vnode, Need::Write)?;
        let Some(schema) = r.schema.as_ref() else {
            return Err(status_error(StatusCode::InvalidArgument, "missing schema"));
        };
        let schema = schema_from_wire(schema)?;
        let tables: Vec<(String, Vec<tidal_common::Value>)> = r
            .tables
            .iter()
            .map(|t| (t.name.clone(), t.tags.iter().map(value_from_wire).collect()))
            .collect();
        let ine = r.if_not_exists;
        let created = blocking(move || {
            vnode
                .create_tables(&schema, &tables, ine)
                .map_err(vnode_err)
        })
        .await?;
        Ok(Response::new(v1::CreateTablesResponse { created }))
    }

    async fn drop_table(
        &self,
        req: Request<v1::TableRequest>,
    ) -> Result<Response<v1::DropTableResponse>, Status> {
        let p = principal(&req)?;
        let _admitted = self.admit()?;
        let r = req.into_inner();
        let vnode = self.vnode_ref(r.vnode.as_ref())?;
        authorize(&p, &vnode, Need::Write)?;
        let dropped = blocking(move || vnode.drop_table(&r.name).map_err(vnode_err)).await?;
        Ok(Response::new(v1::DropTableResponse { dropped }))
    }

    async fn set_tags(
        &self,
        req: Request<v1::SetTagsRequest>,
    ) -> Result<Response<v1::SetTagsResponse>, Status> {
        let p = principal(&req)?;
        let _admitted = self.admit()?;
        let r = req.into_inner();
        let vnode = self.vnode_ref(r.vnode.as_ref())?;
        authorize(&p, &vnode, Need::Write)?;
        let tags: Vec<(String, tidal_common::Value)> = r
            .tags
            .iter()
            // An absent value is NULL, as an absent oneof inside a Value is.
            .map(|t| {
                let v = t
                    .value
                    .as_ref()
                    .map_or(tidal_common::Value::Null, value_from_wire);
                (t.tag.clone(), v)
            })
            .collect();
        let meta = blocking(move || vnode.set_tags(&r.name, &tags).map_err(vnode_err)).await?;
        Ok(Response::new(v1::SetTagsResponse {
            meta: Some(table_meta_to_wire(&meta)),
        }))
    }

    async fn drop_stable(
        &self,
        req: Request<v1::DnodeDropStableRequest>,
    ) -> Result<Response<v1::DnodeDropStableResponse>, Status> {
        let p = principal(&req)?;
        let _admitted = self.admit()?;
        let r = req.into_inner();
        let vnode = self.vnode_ref(r.vnode.as_ref())?;
        authorize(&p, &vnode, Need::Write)?;
        let n = blocking(move || vnode.drop_stable(&r.stable).map_err(vnode_err)).await?;
        Ok(Response::new(v1::DnodeDropStableResponse {
            tables_dropped: n,
        }))
    }

    async fn get_table(
        &self,
        req: Request<v1::TableRequest>,
    ) -> Result<Response<v1::GetTableResponse>, Status> {
        let p = principal(&req)?;
        let r = req.into_inner();
        let vnode = self.vnode_ref(r.vnode.as_ref())?;
        authorize(&p, &vnode, Need::Any)?;
        let resp = match vnode.table(&r.name) {
            Some(meta) => v1::GetTableResponse {
                found: true,
                schema: vnode
                    .stable_schema(&meta.stable)
                    .map(|s| schema_to_wire(&s)),
                meta: Some(table_meta_to_wire(&meta)),
            },
            None => v1::GetTableResponse {
                found: false,
                meta: None,
                schema: None,
            },
        };
        Ok(Response::new(resp))
    }

    async fn list_tables(
        &self,
        req: Request<v1::ListTablesRequest>,
    ) -> Result<Response<v1::ListTablesResponse>, Status> {
        let p = principal(&req)?;
        let r = req.into_inner();
        let vnode = self.vnode_ref(r.vnode.as_ref())?;
        authorize(&p, &vnode, Need::Any)?;
        let tables = vnode.tables(r.stable.as_deref());
        Ok(Response::new(v1::ListTablesResponse {
            tables: tables.iter().map(|t| table_meta_to_wire(t)).collect(),
        }))
    }

    async fn exec_fragment(
        &self,
        req: Request<v1::FragmentRequest>,
    ) -> Result<Response<v1::Batch>, Status> {
        let (vnode, fragment, budget) = self.fragment_call(req)?;
        if tidal_sql::is_point_lookup(&fragment, &VnodeSource::new(&vnode)) {
            self.count_fragments(true, 1);
            let never = AtomicBool::new(false);
            let batch = tidal_sql::execute_fragment_with(
                &fragment,
                &VnodeSource::new(&vnode),
                &never,
                &budget,
            )
            .map_err(|e| status_error(e.status_code(), e.to_string()))?;
            return Ok(Response::new(batch_to_wire(&batch)));
        }
        self.count_fragments(false, 1);
        // This future is dropped when the caller abandons the call (query killed or timed
        // out, coordinator gone, grpc-timeout passed); the blocking executor cannot be
        // aborted, so the guard raises the flag it polls between subtables and blocks.
        let cancel = CancelOnDrop(Arc::new(AtomicBool::new(false)));
        let flag = cancel.0.clone();
        let batch = blocking(move || {
            tidal_sql::execute_fragment_with(&fragment, &VnodeSource::new(&vnode), &flag, &budget)
                .map_err(|e| status_error(e.status_code(), e.to_string()))
        })
        .await?;
        drop(cancel);
        Ok(Response::new(batch_to_wire(&batch)))
    }

    type ExecFragmentStreamStream = FragmentBatches;

    async fn exec_fragment_stream(
        &self,
        req: Request<v1::FragmentRequest>,
    ) -> Result<Response<FragmentBatches>, Status> {
        let deadline = grpc_timeout(req.metadata()).map(|t| {
            Box::pin(tokio::time::sleep_until(
                (std::time::Instant::now() + t).into(),
            ))
        });
        let (vnode, fragment, budget) = self.fragment_call(req)?;
        tidal_sql::check_target(&fragment, &VnodeSource::new(&vnode))
            .map_err(|e| status_error(e.status_code(), e.to_string()))?;
        self.count_fragments(false, 1);
        let cancel = CancelOnDrop(Arc::new(AtomicBool::new(false)));
        let flag = cancel.0.clone();
        let (tx, rx) = tokio::sync::mpsc::channel(FRAGMENT_STREAM_BUFFER);
        tokio::task::spawn_blocking(move || {
            let r = tidal_sql::execute_fragment_stream(
                &fragment,
                &VnodeSource::new(&vnode),
                &flag,
                &budget,
                &mut |b| {
                    // Blocks while the reader is behind; fails once it has gone.
                    tx.blocking_send(Ok(batch_to_wire(&b))).map_err(|_| {
                        tidal_sql::SqlError::Execution(
                            "fragment cancelled: its reader went away".into(),
                        )
                    })
                },
            );
            if let Err(e) = r {
                let _ = tx.blocking_send(Err(status_error(e.status_code(), e.to_string())));
            }
        });
        Ok(Response::new(FragmentBatches {
            rx,
            deadline,
            _cancel: cancel,
        }))
    }

    type ExecFragmentsStream = FragmentBatches<v1::FragmentsPart>;

    async fn exec_fragments(
        &self,
        req: Request<v1::FragmentsRequest>,
    ) -> Result<Response<FragmentBatches<v1::FragmentsPart>>, Status> {
        let timeout = grpc_timeout(req.metadata());
        let p = principal(&req)?;
        self.inner.calls_grpc.fetch_add(1, Ordering::Relaxed);
        self.fragments_call(&p, req.into_inner(), timeout)
            .map(Response::new)
    }

    async fn delete(
        &self,
        req: Request<v1::FragmentRequest>,
    ) -> Result<Response<v1::DeleteResponse>, Status> {
        let p = principal(&req)?;
        let _admitted = self.admit()?;
        let r = req.into_inner();
        let vnode = self.vnode_ref(r.vnode.as_ref())?;
        authorize(&p, &vnode, Need::Write)?;
        let fragment = decode_fragment(&r.fragment, "DELETE")?;
        if fragment.filter.is_some() {
            return Err(status_error(
                StatusCode::InvalidArgument,
                "DELETE fragment carries a row filter: only the timestamp, tags and tbname may be used",
            ));
        }
        let rows = blocking(move || {
            let tables = tidal_sql::fragment_tables(&fragment, &VnodeSource::new(&vnode))
                .map_err(|e| status_error(e.status_code(), e.to_string()))?;
            let uids: Vec<_> = tables.iter().map(|t| t.uid).collect();
            vnode
                .delete(&uids, fragment.ts_min, fragment.ts_max)
                .map_err(vnode_err)
        })
        .await?;
        Ok(Response::new(v1::DeleteResponse { rows }))
    }

    async fn flush(&self, req: Request<v1::VnodeRef>) -> Result<Response<v1::Empty>, Status> {
        let p = principal(&req)?;
        let _admitted = self.admit()?;
        let r = req.into_inner();
        let vnode = self.vnode(&r.db, r.vgroup_id)?;
        authorize(&p, &vnode, Need::Write)?;
        blocking(move || vnode.flush().map_err(vnode_err)).await?;
        Ok(Response::new(v1::Empty {}))
    }

    async fn compact(&self, req: Request<v1::VnodeRef>) -> Result<Response<v1::Empty>, Status> {
        let p = principal(&req)?;
        let _admitted = self.admit()?;
        let r = req.into_inner();
        let vnode = self.vnode(&r.db, r.vgroup_id)?;
        authorize(&p, &vnode, Need::Write)?;
        blocking(move || vnode.compact().map_err(vnode_err)).await?;
        Ok(Response::new(v1::Empty {}))
    }

    async fn vnode_stats(
        &self,
        req: Request<v1::VnodeStatsRequest>,
    ) -> Result<Response<v1::VnodeStatsResponse>, Status> {
        let p = principal(&req)?;
        let r = req.into_inner();
        let vnode = self.vnode(&r.db, r.vgroup_id)?;
        authorize(&p, &vnode, Need::Any)?;
        // `stats` reads the manifest's size from disk, a STABLE's distribution walks every
        // subtable's block index entries: off the async workers.
        let stats = blocking(move || {
            let mut stats = stats_to_wire(&vnode.stats());
            if let Some(of) = r.distribution_of {
                let uids: Vec<TableUid> = if of.stable {
                    vnode
                        .tables(Some(&of.table))
                        .iter()
                        .map(|t| t.uid)
                        .collect()
                } else {
                    vnode.table(&of.table).map(|t| t.uid).into_iter().collect()
                };
                stats.distribution = Some(distribution_to_wire(&vnode.distribution(&uids)));
            }
            Ok(stats)
        })
        .await?;
        Ok(Response::new(stats))
    }

    async fn dnode_stats(
        &self,
        req: Request<v1::Empty>,
    ) -> Result<Response<v1::DnodeStatsResponse>, Status> {
        // Operational counters (GET /metrics): any authenticated user.
        principal(&req)?;
        let mut vnodes: Vec<Arc<Vnode>> = self.inner.vnodes.read().values().cloned().collect();
        vnodes.sort_by_key(|v| v.config().vgroup);
        // `stats` reads the manifest's size from disk: off the async workers.
        let entries = blocking(move || {
            Ok(vnodes
                .iter()
                .map(|v| v1::VnodeStatsEntry {
                    db: v.config().db.clone(),
                    vgroup_id: v.config().vgroup.0,
                    stats: Some(stats_to_wire(&v.stats())),
                })
                .collect::<Vec<_>>())
        })
        .await?;
        let columns = tidal_vnode::column_cache::global().stats();
        Ok(Response::new(v1::DnodeStatsResponse {
            dnode_id: self.inner.id.read().0,
            vnodes: entries,
            statements: crate::frontend::metrics::to_wire(),
            fragments_inline: self.inner.fragments_inline.load(Ordering::Relaxed),
            fragments_pooled: self.inner.fragments_pooled.load(Ordering::Relaxed),
            fragment_calls_grpc: self.inner.calls_grpc.load(Ordering::Relaxed),
            fragment_calls_frames: self.inner.calls_frames.load(Ordering::Relaxed),
            frame_connections: self.inner.frame_connections.load(Ordering::Relaxed),
            write_calls_grpc: self.inner.writes_grpc.load(Ordering::Relaxed),
            write_calls_frames: self.inner.writes_frames.load(Ordering::Relaxed),
            column_cache_bytes: columns.bytes,
            column_cache_max_bytes: columns.max_bytes,
            column_cache_hits: columns.hits,
            column_cache_misses: columns.misses,
        }))
    }

    async fn variables(
        &self,
        req: Request<v1::Empty>,
    ) -> Result<Response<v1::VariablesResponse>, Status> {
        // Paths and addresses of the node: superusers only (secrets are hidden anyway).
        principal(&req)?.require_superuser("read a data node's configuration")?;
        Ok(Response::new(v1::VariablesResponse {
            dnode_id: self.inner.id.read().0,
            variables: self.inner.variables.iter().map(variable_to_wire).collect(),
        }))
    }

    async fn update_auth(
        &self,
        req: Request<v1::AuthTable>,
    ) -> Result<Response<v1::Empty>, Status> {
        super::auth::principal(&req)?.require_internal("pushing the user table")?;
        self.inner.auth.on_heartbeat(Some(req.get_ref()));
        Ok(Response::new(v1::Empty {}))
    }
}

/// What a request needs on the vnode's database.
enum Need {
    Read,
    Write,
    /// Metadata that readers and writers both need.
    Any,
}

/// Checks `p` against the database the vnode belongs to (not the one the request names, which
/// may be empty).
fn authorize(p: &Principal, vnode: &Vnode, need: Need) -> Result<(), Status> {
    let db = &vnode.config().db;
    match need {
        Need::Read => p.require_read(db),
        Need::Write => p.require_write(db),
        Need::Any => p.require_any(db),
    }
}

pub fn variable_to_wire(v: &crate::config::Variable) -> v1::Variable {
    v1::Variable {
        name: v.name.clone(),
        value: v.value.clone(),
        scope: crate::config::VARIABLE_SCOPE.to_string(),
        source: v.source.clone(),
        info: v.info.clone(),
    }
}

fn distribution_to_wire(d: &tidal_vnode::TableDistribution) -> v1::TableDistribution {
    v1::TableDistribution {
        tables: d.tables,
        windows: d.windows,
        damaged_windows: d.damaged_windows,
        blocks: d.blocks,
        block_rows: d.block_rows,
        min_block_rows: d.min_block_rows,
        max_block_rows: d.max_block_rows,
        block_bytes: d.block_bytes,
        stt_blocks: d.stt_blocks,
        stt_rows: d.stt_rows,
        stt_bytes: d.stt_bytes,
        mem_rows: d.mem_rows,
    }
}

fn stats_to_wire(s: &tidal_vnode::VnodeStats) -> v1::VnodeStatsResponse {
    v1::VnodeStatsResponse {
        tables: s.tables,
        rows_written: s.rows_written,
        mem_bytes: s.mem_bytes,
        wal_bytes: s.wal_bytes,
        disk_bytes: s.disk_bytes,
        cache_entries: s.cache_entries,
        cache_bytes: s.cache_bytes,
        cache_hits: s.cache_hits,
        cache_misses: s.cache_misses,
        stt_files: s.stt_files,
        flushes: s.flushes,
        merges: s.merges,
        write_stalls: s.write_stalls,
        flush_bytes: s.flush_bytes,
        flush_micros: s.flush_micros,
        merge_bytes: s.merge_bytes,
        merge_micros: s.merge_micros,
        wal_bytes_written: s.wal_bytes_written,
        wal_fsync_buckets: s.wal_fsync.counts.to_vec(),
        wal_fsync_nanos_sum: s.wal_fsync.sum_nanos,
        windows: s.windows,
        distribution: None,
    }
}
