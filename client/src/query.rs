//! Queries planned by the client itself and fanned out straight to the data nodes, as
//! TDengine's native client does: the SQL frontend of a server and [`Client::execute`] share
//! this code (catalog snapshot, fragment fan-out, route retries).
//!
//! Why: a small query (the last row of one truck, a ten-minute aggregate per truck) costs
//! little on the data nodes; most of its time was the extra hop through a frontend process
//! (its gRPC server, a second fan-out, the wakeups of one more process). Planned here, the
//! query goes client → data nodes → client.
//!
//! Which statements run here ([`Client::execute`]): a single SELECT of user tables whose plan
//! gathers every fragment result before it finishes (aggregates, windows, LAST_ROW, nested
//! queries). Everything else goes to the server as before: other statements, several
//! statements in one request, `information_schema`, plans that stream (a scan with LIMIT
//! stops its data nodes early there), any statement the client cannot plan (the server's
//! error message is the one the user sees), and all of them when the client is connected to
//! a data node (which serves SQL but no catalog). `ConnectOptions::plan_queries_locally(false)`
//! turns this off.
//!
//! Visibility: as TDengine's client does by heartbeat, the client reports the queries it runs
//! to the connected server every [`QUERY_REPORT_INTERVAL_MS`] while any runs
//! (`Sql.ReportQueries`); that server lists them in SHOW QUERIES as its own, and a KILL QUERY
//! of one reaches the client in the next report's answer, which stops it (its fragment calls
//! are dropped, which stops them on the data nodes). A query shorter than one interval is
//! never listed. Such queries are not counted by a frontend's metrics.
//!
//! Invariants:
//! - The planner, the fragments and the final merge are the same code as the frontend's
//!   (`tidal_sql`), so both give the same answers; the data nodes check each fragment's
//!   privileges and hash range as for any caller.
//! - Queries only read: a retry after a failure cannot change anything.

use crate::{frames, Client, ClientError, StatementResult};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tidal_common::{Batch, Precision, StableSchema, StatusCode, TableMeta, Value, VgroupId};
use tidal_proto::convert::{batch_from_wire, schema_from_wire, table_meta_from_wire};
use tidal_proto::v1::{self, dnode_client::DnodeClient};
use tidal_sql::{FragmentTarget, MemoryBudget, QueryPlan, Reservation, Statement};
use tonic::Request;

/// How often a client reports the queries it runs itself while any runs (see the module doc).
pub const QUERY_REPORT_INTERVAL_MS: u64 = 1_000;
/// Locally planned queries one client runs at once; past it a query goes to the server.
pub const LOCAL_QUERIES_MAX: usize = 256;

/// The queries this client plans and runs itself, for the report to the server.
#[derive(Default)]
pub(crate) struct LocalQueries {
    next: u64,
    running: std::collections::BTreeMap<u64, LocalQuery>,
    /// A report task runs (it ends, clearing this, once nothing runs).
    reporting: bool,
}

struct LocalQuery {
    sql: String,
    started: std::time::Instant,
    timeout_ms: u64,
    fragments: std::sync::Arc<std::sync::atomic::AtomicU32>,
    /// The server's id for the query once a KILL QUERY stopped it.
    killed: std::sync::Arc<tokio::sync::watch::Sender<Option<String>>>,
    /// The server lists it: when it ends, a report goes at once, not at the next interval.
    reported: bool,
}

/// Removes a local query from the report when it ends.
struct LocalQueryGuard {
    client: Client,
    seq: u64,
}

impl Drop for LocalQueryGuard {
    fn drop(&mut self) {
        let ended = self
            .client
            .inner
            .local_queries
            .lock()
            .running
            .remove(&self.seq);
        if ended.is_some_and(|q| q.reported) {
            self.client.inner.local_report_now.notify_one();
        }
    }
}

/// Counts a fragment call in flight until dropped.
struct InFlight(std::sync::Arc<std::sync::atomic::AtomicU32>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Partial rows up to which a gathered query's merge runs on the calling task; a larger one
/// runs on a blocking thread, off the async workers.
pub const INLINE_MERGE_ROWS_MAX: usize = 4096;

/// The limits a locally planned query runs under: the connected server's, so that it is
/// bounded as the server's frontend would bound it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueryLimits {
    /// `query_timeout_ms`: how long a query may run when the caller gives no timeout
    /// (0 = no limit).
    pub timeout_ms: u64,
    /// `query_memory_max_bytes`: memory the query may hold in this process (its gathered
    /// partial results and the merge) and, as on any frontend, per fragment on each data
    /// node (0 = no limit).
    pub memory_max_bytes: u64,
}

impl Default for QueryLimits {
    /// The servers' defaults, used when the server cannot say.
    fn default() -> QueryLimits {
        QueryLimits {
            timeout_ms: 300_000,
            memory_max_bytes: 1 << 30,
        }
    }
}

/// A table by name: a STABLE, or a subtable with its STABLE's schema.
pub enum Named {
    Stable(StableSchema),
    Subtable(TableMeta, StableSchema),
}

/// Errors that carry a Tidal status code, for [`Client::with_route_retries`].
pub trait Coded {
    fn code(&self) -> StatusCode;
}

impl Coded for ClientError {
    fn code(&self) -> StatusCode {
        self.code
    }
}

impl From<tidal_sql::SqlError> for ClientError {
    fn from(e: tidal_sql::SqlError) -> ClientError {
        ClientError::new(e.status_code(), e.to_string())
    }
}

/// A per-statement catalog snapshot for the planner: the STABLE and subtable metadata a
/// query names, fetched once (asynchronously) before planning, so planning itself is pure.
#[derive(Default)]
pub struct Snapshot {
    stables: HashMap<(String, String), StableSchema>,
    subtables: HashMap<(String, String), (TableMeta, StableSchema)>,
    precisions: HashMap<String, Precision>,
    /// `information_schema` tables by (db as written, name as written), added by a frontend.
    system: HashMap<(String, String), Batch>,
    /// The system tables' rows held against the statement's memory budget.
    held: Vec<Reservation>,
    /// The user the statement runs as (`CURRENT_USER()`), set by whoever knows it.
    user: Option<String>,
}

impl Snapshot {
    /// The metadata of every user table `q` names (`db`: the session's database). Names in
    /// `information_schema` are left out: a frontend adds them ([`Snapshot::add_system`]);
    /// unknown databases and tables are left for the planner to report.
    pub async fn load(
        client: &Client,
        db: &str,
        q: &tidal_sql::Query,
    ) -> Result<Snapshot, ClientError> {
        let mut s = Snapshot::default();
        let refs = tidal_sql::referenced_tables(q);
        if refs.is_empty() && !db.is_empty() {
            // A SELECT without FROM evaluates NOW() and TODAY() in the session database's
            // precision; a database that has gone leaves it at the default.
            if let Ok(r) = client.route(db).await {
                s.precisions.insert(db.to_string(), r.precision);
            }
        }
        for r in refs {
            let tdb = match &r.db {
                Some(d) => d.clone(),
                None if !db.is_empty() => db.to_string(),
                None => continue, // the planner reports "no database selected"
            };
            if tdb.eq_ignore_ascii_case(tidal_sql::INFORMATION_SCHEMA) {
                continue;
            }
            if !s.precisions.contains_key(&tdb) {
                match client.route(&tdb).await {
                    Ok(route) => {
                        s.precisions.insert(tdb.clone(), route.precision);
                    }
                    // the planner reports the unknown database, with its position
                    Err(e) if e.code == StatusCode::DatabaseNotFound => continue,
                    // no privilege on it, no mnode: that, not "not found"
                    Err(e) => return Err(e),
                }
            }
            match client.table_for_plan(&tdb, &r.name).await? {
                Some(Named::Stable(schema)) => {
                    s.stables.insert((tdb, r.name.clone()), schema);
                }
                Some(Named::Subtable(meta, schema)) => {
                    s.subtables.insert((tdb, r.name.clone()), (meta, schema));
                }
                None => {}
            }
        }
        Ok(s)
    }

    /// Adds system table `db.name` (as written in the query) with its rows, held against
    /// the statement's budget for as long as the snapshot lives.
    pub fn add_system(&mut self, db: String, name: String, rows: Batch, held: Reservation) {
        self.system.insert((db, name), rows);
        self.held.push(held);
    }

    /// The user the statement runs as: what `CURRENT_USER()` returns (unset, it does not
    /// plan, and a client sends the statement to the server instead).
    pub fn set_user(&mut self, user: String) {
        self.user = Some(user);
    }
}

impl tidal_sql::Catalog for Snapshot {
    fn stable(&self, db: &str, name: &str) -> Option<StableSchema> {
        self.stables
            .get(&(db.to_string(), name.to_string()))
            .cloned()
    }
    fn subtable(&self, db: &str, name: &str) -> Option<(TableMeta, StableSchema)> {
        self.subtables
            .get(&(db.to_string(), name.to_string()))
            .cloned()
    }
    fn precision(&self, db: &str) -> Option<Precision> {
        self.precisions.get(db).copied()
    }
    fn system_table(&self, db: &str, name: &str) -> Option<Batch> {
        self.system
            .get(&(db.to_string(), name.to_string()))
            .cloned()
    }
    fn session_user(&self) -> Option<String> {
        self.user.clone()
    }
}

/// What a fan-out runs under: the statement's memory budget, the data nodes' deadline, and
/// a hook called once per vgroup whose result it keeps until that vgroup's last part came
/// (a frontend counts fragments in flight with it).
pub struct FanOut {
    pub budget: MemoryBudget,
    pub timeout: Option<Duration>,
    pub on_start: Box<dyn Fn() -> Option<Box<dyn Send>> + Send + Sync>,
}

/// One vgroup's result of a gathered fan-out.
pub struct Gathered {
    /// The fragment's id in the plan.
    pub fragment: u32,
    pub batch: Batch,
    /// From the call's start to this vgroup's last part.
    pub took: Duration,
    /// Holds the batch's bytes against the statement's budget.
    pub held: Reservation,
}

/// One vgroup's share of an `ExecFragments` call being gathered.
struct Part {
    /// (fragment position in the plan, vgroup position in its targets): the output order.
    key: (usize, usize),
    batch: Batch,
    took: Option<Duration>,
    _in_flight: Option<Box<dyn Send>>,
}

impl Client {
    /// The table `name` of `db`: asked of the mnode as a STABLE (cached, as is a "no"), else
    /// of its vnode as a subtable; `None` when neither has it. The mnode is asked again
    /// before `None`, since its cached "no" may predate the STABLE.
    pub async fn table(&self, db: &str, name: &str) -> Result<Option<Named>, ClientError> {
        self.lookup(db, name, false).await
    }

    /// [`Client::table`] for a plan: a subtable's metadata may come from the cache (a vnode
    /// fails a plan whose subtable now belongs to another STABLE, and
    /// [`Client::forget_cached_tables`] lets the statement plan again).
    pub async fn table_for_plan(&self, db: &str, name: &str) -> Result<Option<Named>, ClientError> {
        self.lookup(db, name, true).await
    }

    async fn lookup(
        &self,
        db: &str,
        name: &str,
        cached: bool,
    ) -> Result<Option<Named>, ClientError> {
        match self.stable(db, name).await {
            Ok(schema) => return Ok(Some(Named::Stable(schema))),
            Err(e) if e.code == StatusCode::DatabaseNotFound => return Err(e),
            Err(_) => {}
        }
        if let Some(meta) = cached.then(|| self.cached_table(db, name)).flatten() {
            if let Ok(schema) = self.stable(db, &meta.stable).await {
                return Ok(Some(Named::Subtable(meta, schema)));
            }
        }
        if let Some((meta, schema)) = self.subtable(db, name).await? {
            self.cache_table(db, &meta);
            return Ok(Some(Named::Subtable(meta, schema)));
        }
        match self.refresh_stable(db, name).await {
            Ok(schema) => Ok(Some(Named::Stable(schema))),
            Err(e) if e.code == StatusCode::DatabaseNotFound => Err(e),
            Err(_) => Ok(None),
        }
    }

    /// The subtable `name` of `db` with its STABLE's schema, asked of the owning vnode.
    pub async fn subtable(
        &self,
        db: &str,
        name: &str,
    ) -> Result<Option<(TableMeta, StableSchema)>, ClientError> {
        // A data node that restarted on another address, or a vgroup that moved: ask the
        // mnode for the map again and retry, as a write does.
        let mut attempt = 0;
        let resp = loop {
            let route = match attempt {
                0 => self.route(db).await?,
                _ => self.refresh_route(db).await?,
            };
            let vg = route.vgroup_of(db, name).clone();
            let r = async {
                self.dnode(&vg.addr)?
                    .get_table(v1::TableRequest {
                        vnode: Some(v1::VnodeRef {
                            db: db.to_string(),
                            vgroup_id: vg.id.0,
                        }),
                        name: name.to_string(),
                    })
                    .await
                    .map_err(ClientError::from)
            }
            .await;
            match r {
                Ok(r) => break r.into_inner(),
                Err(e) if e.code.is_retryable() && attempt + 1 < crate::ATTEMPTS_MAX => {
                    attempt += 1;
                    let ms = (crate::BACKOFF_INITIAL_MS << attempt).min(1_000);
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                }
                Err(e) => return Err(e),
            }
        };
        if !resp.found {
            return Ok(None);
        }
        let (Some(meta), Some(schema)) = (resp.meta.as_ref(), resp.schema.as_ref()) else {
            return Err(ClientError::new(
                StatusCode::Internal,
                format!("vnode returned table {name} without its schema"),
            ));
        };
        // The vnode's copy of the schema may be older than the mnode's; prefer the mnode's.
        let schema = match self.stable(db, &meta.stable).await {
            Ok(s) => s,
            Err(_) => schema_from_wire(schema)
                .map_err(|e| ClientError::new(StatusCode::Internal, e.to_string()))?,
        };
        Ok(Some((table_meta_from_wire(meta), schema)))
    }

    /// Forgets the cached metadata of the subtables `q` reads; whether any was cached (then
    /// the statement may plan again with fresh metadata).
    pub fn forget_cached_tables(&self, db: &str, q: &tidal_sql::Query) -> bool {
        let mut any = false;
        for t in tidal_sql::referenced_tables(q) {
            any |= self.forget_table(t.db.as_deref().unwrap_or(db), &t.name);
        }
        any
    }

    /// Runs `run` (a query `q` with session database `db`) again, after refreshing the
    /// routes of the tables `q` reads, while it fails with a retryable error (up to 8
    /// attempts, backing off from 100 ms to 1 s); and once, at once, when it was planned with
    /// a subtable's cached metadata that no longer holds. Queries only read, so a retry
    /// cannot change anything.
    pub async fn with_route_retries<T, E, F, Fut>(
        &self,
        db: &str,
        q: &tidal_sql::Query,
        mut run: F,
    ) -> Result<T, E>
    where
        E: Coded,
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, E>>,
    {
        const ATTEMPTS: u32 = 8;
        let mut attempt = 0;
        let mut replanned = false;
        loop {
            match run().await {
                // Planned with a subtable's cached metadata that no longer holds (dropped, or
                // created again under another STABLE, which the vnode refuses or the planner
                // finds wrong): once more with fresh metadata.
                Err(e)
                    if matches!(
                        e.code(),
                        StatusCode::SchemaMismatch
                            | StatusCode::TableNotFound
                            | StatusCode::ColumnNotFound
                            | StatusCode::TypeMismatch
                            | StatusCode::PlanError
                            | StatusCode::InvalidArgument
                    ) && !replanned
                        && self.forget_cached_tables(db, q) =>
                {
                    replanned = true;
                }
                Err(e) if e.code().is_retryable() && attempt + 1 < ATTEMPTS => {
                    attempt += 1;
                    for t in tidal_sql::referenced_tables(q) {
                        self.invalidate(t.db.as_deref().unwrap_or(db));
                    }
                    let ms = (50u64 << attempt).min(1_000);
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                }
                r => return r,
            }
        }
    }

    /// Starts a fragment call to the data node at `addr`: over frames when this client
    /// uses them and the data node speaks them, else over gRPC. `timeout` is the data node's
    /// own deadline, in case the caller vanishes mid-query.
    async fn fragment_parts(
        &self,
        addr: &str,
        req: v1::FragmentsRequest,
        token: Option<Arc<str>>,
        timeout: Option<Duration>,
    ) -> Result<Parts<'_>, ClientError> {
        let mut req = req;
        if let Some(pool) = (self.inner.frames.as_ref())
            .filter(|p| self.inner.fragment_frames && !p.grpc_only(addr))
        {
            let exec = frames::Exec {
                timeout,
                token: token.as_deref().unwrap_or_default().to_string(),
                request: req,
            };
            match pool.start(addr, &exec).await {
                Ok(call) => return Ok(Parts::Frames(call)),
                Err(frames::Start::Failed(e)) => return Err(e),
                Err(frames::Start::NotSpoken | frames::Start::Busy) => req = exec.request,
            }
        }
        let mut d = DnodeClient::new(self.intercepted_with(self.channel(addr)?, token))
            .max_decoding_message_size(crate::MESSAGE_BYTES_MAX)
            .max_encoding_message_size(crate::MESSAGE_BYTES_MAX);
        let mut req = Request::new(req);
        if let Some(t) = timeout {
            req.set_timeout(t);
        }
        Ok(Parts::Grpc(d.exec_fragments(req).await?.into_inner()))
    }

    /// Sends every fragment of `plan` to its vgroups in parallel and gathers each vgroup's
    /// whole result, in the plan's fragment order and each fragment's vgroups in route order.
    ///
    /// The vgroups of one data node share one `ExecFragments` call (their parts interleave on
    /// it): a data node answers one call per fragment, not one per vgroup. Dropping the
    /// returned future drops the calls, which stops the data nodes.
    pub async fn gather_fragments(
        &self,
        plan: &QueryPlan,
        fan: &FanOut,
    ) -> Result<Vec<Gathered>, ClientError> {
        const WHAT: &str = "gathering the vnode results";
        // The calls are polled together on this task: decoding a few batches does not need
        // a thread hop per data node.
        let mut calls = Vec::new();
        for (si, spec) in plan.fragments.iter().enumerate() {
            let route = self.route(&spec.db).await?;
            let targets: Vec<_> = match &spec.target {
                FragmentTarget::AllVgroups => route.vgroups.clone(),
                FragmentTarget::Table(t) => vec![route.vgroup_of(&spec.db, t).clone()],
            };
            // (data node, [(position in targets, vgroup)]) in the order first seen
            let mut by_node: Vec<(String, Vec<(usize, VgroupId)>)> = Vec::new();
            for (k, vg) in targets.iter().enumerate() {
                match by_node.iter_mut().find(|(a, _)| *a == vg.addr) {
                    Some((_, v)) => v.push((k, vg.id)),
                    None => by_node.push((vg.addr.clone(), vec![(k, vg.id)])),
                }
            }
            let bytes = spec.fragment.to_bytes();
            let fields = spec.fragment.output_fields();
            for (addr, vgs) in by_node {
                let req = v1::FragmentsRequest {
                    vnodes: vgs
                        .iter()
                        .map(|(_, id)| v1::VnodeRef {
                            db: spec.db.clone(),
                            vgroup_id: id.0,
                        })
                        .collect(),
                    fragment: bytes.clone(),
                    memory_max_bytes: fan.budget.limit_bytes(),
                };
                // Taken here, in the caller's scope (a forwarding client sends the caller's).
                let token = self.token_for_call();
                let client = self.clone();
                let timeout = fan.timeout;
                // One in-flight fragment per vgroup, until its last part arrives.
                let mut parts: Vec<Part> = vgs
                    .iter()
                    .map(|(k, _)| Part {
                        key: (si, *k),
                        batch: Batch::empty(fields.clone()),
                        took: None,
                        _in_flight: (fan.on_start)(),
                    })
                    .collect();
                let (id, budget) = (spec.id, fan.budget.clone());
                calls.push(async move {
                    let start = std::time::Instant::now();
                    let mut held = budget.reserve(0, WHAT)?;
                    let mut s = client.fragment_parts(&addr, req, token, timeout).await?;
                    while let Some(p) = s.next().await? {
                        let n = parts.len();
                        let Some(slot) = parts.get_mut(p.index as usize) else {
                            return Err(ClientError::new(
                                StatusCode::Internal,
                                format!("{addr} answered for vnode #{} of {n}", p.index),
                            ));
                        };
                        if let Some(b) = p.batch {
                            let b = batch_from_wire(b).map_err(|e| {
                                ClientError::new(
                                    StatusCode::Internal,
                                    format!("{addr} sent a bad result batch: {e}"),
                                )
                            })?;
                            held.resize(held.bytes() + tidal_sql::memory::batch_bytes(&b), WHAT)?;
                            slot.batch.append_owned(b);
                        }
                        if p.end {
                            slot.took = Some(start.elapsed());
                            slot._in_flight = None;
                        }
                    }
                    if let Some(p) = parts.iter().find(|p| p.took.is_none()) {
                        return Err(ClientError::new(
                            StatusCode::Unavailable,
                            format!(
                                "{addr} ended the fragment call before vgroup #{} finished",
                                p.key.1
                            ),
                        ));
                    }
                    Ok::<_, ClientError>((id, parts, held))
                });
            }
        }
        let mut out = Vec::new();
        for (id, parts, held) in futures::future::try_join_all(calls).await? {
            let mut held = Some(held);
            for p in parts {
                // the call's reservation goes with its first vgroup's result
                let r = match held.take() {
                    Some(r) => r,
                    None => fan.budget.reserve(0, WHAT)?,
                };
                out.push((p.key, id, p.batch, p.took.unwrap_or_default(), r));
            }
        }
        out.sort_by_key(|o| o.0);
        Ok(out
            .into_iter()
            .map(|(_, fragment, batch, took, held)| Gathered {
                fragment,
                batch,
                took,
                held,
            })
            .collect())
    }

    /// Gathers `plan`'s fragment results and finishes it (the coordinator's merge, sort,
    /// fill, outer queries); the rows and their timestamps' precision. A large merge runs on
    /// a blocking thread.
    pub async fn finish_gathered(
        &self,
        plan: QueryPlan,
        fan: &FanOut,
    ) -> Result<Batch, ClientError> {
        let mut results: HashMap<u32, Vec<Batch>> = HashMap::new();
        let mut held = Vec::new();
        for g in self.gather_fragments(&plan, fan).await? {
            results.entry(g.fragment).or_default().push(g.batch);
            held.push(g.held);
        }
        let rows: usize = results.values().flatten().map(Batch::num_rows).sum();
        let budget = fan.budget.clone();
        let merge = move || {
            let out = tidal_sql::finish_with(&plan, results.into_iter().collect(), &budget);
            drop(held);
            out
        };
        // A small merge (a few thousand partial rows: LAST_ROW of one truck, a global COUNT)
        // runs here, where handing it to another thread would cost more than the merge.
        Ok(if rows <= INLINE_MERGE_ROWS_MAX {
            merge()?
        } else {
            tokio::task::spawn_blocking(merge)
                .await
                .map_err(|e| ClientError::new(StatusCode::Internal, e.to_string()))??
        })
    }

    /// The precision a gathered `plan`'s timestamps are in: its last fragment's database's,
    /// or, without fragments, the session database's (the default when there is none).
    pub async fn plan_precision(
        &self,
        db: &str,
        plan: &QueryPlan,
    ) -> Result<Precision, ClientError> {
        let mut precision = Precision::Millis;
        if plan.fragments.is_empty() && !db.is_empty() {
            // A SELECT without FROM computed its timestamps in the session database's
            // precision (see `Snapshot::load`).
            precision = self
                .route(db)
                .await
                .map(|r| r.precision)
                .unwrap_or(precision);
        }
        for spec in &plan.fragments {
            precision = self.route(&spec.db).await?.precision;
        }
        Ok(precision)
    }

    /// The connected server's query limits (SHOW VARIABLES), asked once; the defaults when
    /// it cannot say. `None` when the server holds no catalog (a data node: it serves SQL
    /// but not the mnode's calls), so that this client cannot plan.
    pub async fn query_limits(&self) -> Option<QueryLimits> {
        if let Some(l) = *self.inner.query_limits.lock() {
            return l;
        }
        let probe = async {
            match self.mnode() {
                Ok(mut m) => match m.get_cluster(v1::Empty {}).await {
                    Err(s) => ClientError::from(s).code != StatusCode::Unimplemented,
                    Ok(_) => true,
                },
                Err(_) => false,
            }
        };
        // both at once: a client's first query waits for the slower, not for the sum
        let (catalog, variables) =
            tokio::join!(probe, self.execute_on_server("SHOW VARIABLES", "", None));
        let mut limits = QueryLimits::default();
        match variables {
            Ok(StatementResult { batch: Some(b), .. }) => {
                for i in 0..b.num_rows() {
                    let row = b.row(i);
                    let (Some(Value::Str(name)), Some(Value::Str(value))) =
                        (row.first(), row.get(1))
                    else {
                        continue;
                    };
                    let Ok(v) = value.parse::<u64>() else {
                        continue;
                    };
                    match name.as_str() {
                        "query_timeout_ms" => limits.timeout_ms = v,
                        "query_memory_max_bytes" => limits.memory_max_bytes = v,
                        _ => {}
                    }
                }
            }
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(
                    "SHOW VARIABLES failed ({e}): local queries use the default limits"
                );
            }
        }
        let limits = catalog.then_some(limits);
        *self.inner.query_limits.lock() = Some(limits);
        limits
    }

    /// Enters a local query in the report (starting the report task if none runs): its
    /// guard, its count of fragment calls in flight, and what says it was killed. `None`
    /// when [`LOCAL_QUERIES_MAX`] run already (the query then goes to the server).
    #[allow(clippy::type_complexity)]
    fn register_local(
        &self,
        sql: &str,
        timeout: Option<Duration>,
    ) -> Option<(
        LocalQueryGuard,
        std::sync::Arc<std::sync::atomic::AtomicU32>,
        tokio::sync::watch::Receiver<Option<String>>,
    )> {
        let fragments = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let (killed, rx) = tokio::sync::watch::channel(None);
        let (seq, start) = {
            let mut l = self.inner.local_queries.lock();
            if l.running.len() >= LOCAL_QUERIES_MAX {
                return None;
            }
            l.next += 1;
            let seq = l.next;
            l.running.insert(
                seq,
                LocalQuery {
                    sql: sql.to_string(),
                    started: std::time::Instant::now(),
                    timeout_ms: timeout.map_or(0, |t| u64::try_from(t.as_millis()).unwrap_or(0)),
                    fragments: fragments.clone(),
                    killed: std::sync::Arc::new(killed),
                    reported: false,
                },
            );
            let start = !l.reporting;
            l.reporting = true;
            (seq, start)
        };
        if start {
            tokio::spawn(self.clone().report_queries());
        }
        let guard = LocalQueryGuard {
            client: self.clone(),
            seq,
        };
        Some((guard, fragments, rx))
    }

    /// The report task: every [`QUERY_REPORT_INTERVAL_MS`], the queries running here to the
    /// connected server, and a kill it answers with to its query; at once when a listed query
    /// ends (so SHOW QUERIES stops listing it). It ends once none runs (with an empty report
    /// if it had reported any, so the server forgets them at once).
    async fn report_queries(self) {
        let mut reported = false;
        loop {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(QUERY_REPORT_INTERVAL_MS)) => {}
                _ = self.inner.local_report_now.notified() => {}
            }
            let queries: Vec<v1::ClientQuery> = {
                let mut l = self.inner.local_queries.lock();
                if l.running.is_empty() {
                    l.reporting = false;
                }
                l.running
                    .iter()
                    .map(|(seq, q)| v1::ClientQuery {
                        seq: *seq,
                        sql: q.sql.clone(),
                        elapsed_us: u64::try_from(q.started.elapsed().as_micros())
                            .unwrap_or(u64::MAX),
                        timeout_ms: q.timeout_ms,
                        fragments: q.fragments.load(std::sync::atomic::Ordering::Relaxed),
                    })
                    .collect()
            };
            let last = queries.is_empty();
            if !last || reported {
                let req = v1::ReportQueriesRequest {
                    client_id: self.inner.client_id.clone(),
                    queries,
                };
                let answer = match self.sql() {
                    Ok(mut sql) => sql.report_queries(req).await.map_err(ClientError::from),
                    Err(e) => Err(e),
                };
                match answer {
                    Ok(a) => {
                        reported = true;
                        let mut l = self.inner.local_queries.lock();
                        for q in a.into_inner().queries {
                            if let Some(lq) = l.running.get_mut(&q.seq) {
                                lq.reported = true;
                                if q.killed {
                                    lq.killed.send_replace(Some(q.id));
                                }
                            }
                        }
                    }
                    // An older server, or none right now: the queries run on, unlisted.
                    Err(e) => tracing::debug!("reporting running queries: {e}"),
                }
            }
            if last {
                return;
            }
        }
    }

    /// `sql` run here when it is one SELECT of user tables whose plan gathers (see the
    /// module doc); `None` to send it to the server.
    pub(crate) async fn try_select_local(
        &self,
        sql: &str,
        db: &str,
        timeout_ms: Option<u64>,
    ) -> Option<Result<StatementResult, ClientError>> {
        let Ok(mut stmts) = tidal_sql::parse(sql) else {
            return None; // the server reports it, as for every client
        };
        let (1, Some(Statement::Select(q))) = (stmts.len(), stmts.pop()) else {
            return None;
        };
        // information_schema, or a table with no database to look it up in
        let server_only = tidal_sql::referenced_tables(&q)
            .iter()
            .any(|t| match &t.db {
                Some(d) => d.eq_ignore_ascii_case(tidal_sql::INFORMATION_SCHEMA),
                None => db.is_empty() || db.eq_ignore_ascii_case(tidal_sql::INFORMATION_SCHEMA),
            });
        if server_only {
            return None;
        }
        if let Err(e) = self.authenticate().await {
            return Some(Err(e));
        }
        let limits = self.query_limits().await?;
        let timeout = match timeout_ms.unwrap_or(limits.timeout_ms) {
            0 => None,
            ms => Some(Duration::from_millis(ms)),
        };
        let (guard, fragments, mut killed) = self.register_local(sql, timeout)?;
        let run = || async {
            let budget = MemoryBudget::new(limits.memory_max_bytes, "query_memory_max_bytes");
            let mut snapshot = Snapshot::load(self, db, &q).await?;
            // the name this client logged in with, as the server knows its session; a
            // client without one sends CURRENT_USER() to the server (it does not plan here)
            if let Some(user) = self.user() {
                snapshot.set_user(user);
            }
            let plan = tidal_sql::plan_query(&q, (!db.is_empty()).then_some(db), &snapshot)
                .map_err(|_| Fallback::Plan)?;
            if tidal_sql::pipeline(&plan, &budget)
                .map_err(|_| Fallback::Plan)?
                .is_some()
            {
                return Err(Fallback::Streams);
            }
            let precision = self.plan_precision(db, &plan).await?;
            let fan = FanOut {
                budget,
                timeout,
                on_start: Box::new({
                    let fragments = fragments.clone();
                    move || {
                        fragments.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        Some(Box::new(InFlight(fragments.clone())) as Box<dyn Send>)
                    }
                }),
            };
            let batch = self.finish_gathered(plan, &fan).await?;
            Ok(StatementResult {
                affected_rows: batch.num_rows() as u64,
                batch: Some(batch),
                precision,
                db: db.to_string(),
            })
        };
        let attempt = || async {
            let r = self.with_route_retries(db, &q, run);
            match timeout {
                None => r.await,
                Some(t) => match tokio::time::timeout(t, r).await {
                    Ok(r) => r,
                    Err(_) => Err(Fallback::Failed(ClientError::new(
                        StatusCode::Timeout,
                        format!("query timed out after {} ms", t.as_millis()),
                    ))),
                },
            }
        };
        let attempts = async {
            match attempt().await {
                Err(Fallback::Failed(e)) if self.can_relogin(&e) => match self.relogin().await {
                    Ok(()) => attempt().await,
                    Err(e) => Err(Fallback::Failed(e)),
                },
                r => r,
            }
        };
        let r = tokio::select! {
            r = attempts => r,
            id = killed.wait_for(Option::is_some) => {
                let id = id.ok().and_then(|id| id.clone()).unwrap_or_default();
                Err(Fallback::Failed(ClientError::new(
                    StatusCode::ExecutionError,
                    format!("query {id} was killed"),
                )))
            }
        };
        drop(guard);
        match r {
            Ok(r) => Some(Ok(r)),
            Err(Fallback::Failed(e)) => Some(Err(e)),
            Err(Fallback::Plan | Fallback::Streams) => None,
        }
    }
}

/// Why a local query stopped: the server should run it instead, or it failed.
enum Fallback {
    /// The client could not plan it: the server plans it and reports its own error.
    Plan,
    /// Its plan streams: the server runs it batch by batch.
    Streams,
    Failed(ClientError),
}

impl From<ClientError> for Fallback {
    fn from(e: ClientError) -> Fallback {
        Fallback::Failed(e)
    }
}

impl Coded for Fallback {
    fn code(&self) -> StatusCode {
        match self {
            // planning again cannot help, and nothing should be retried
            Fallback::Plan | Fallback::Streams => StatusCode::Ok,
            Fallback::Failed(e) => e.code,
        }
    }
}

/// The parts of one fragment call, over either transport.
enum Parts<'a> {
    Grpc(tonic::Streaming<v1::FragmentsPart>),
    Frames(frames::Call<'a>),
}

impl Parts<'_> {
    /// The next part; `None` once the call has ended well.
    async fn next(&mut self) -> Result<Option<v1::FragmentsPart>, ClientError> {
        match self {
            Parts::Grpc(s) => Ok(s.message().await?),
            Parts::Frames(c) => c.next().await,
        }
    }
}
