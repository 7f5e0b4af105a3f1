//! The statements this node's SQL frontend is running: the registry behind SHOW QUERIES and
//! KILL QUERY, and the per-statement deadline.
//!
//! Every Execute request is registered for as long as it runs (bounded: a node refuses new
//! statements past [`RUNNING_MAX`]). Requests made only of queries (SELECT, EXPLAIN, SHOW,
//! DESCRIBE, INSERT ... SELECT) can be killed and time out; abandoning them changes nothing.
//! DDL and INSERT VALUES are listed but run to completion: stopping one half-way could leave
//! the mnode and the data nodes disagreeing.
//!
//! Stopping a query drops its future: the fragment calls it has in flight are dropped with it,
//! which resets their HTTP/2 streams, which drops the data nodes' handlers, which raise the
//! cancellation flag their fragment executors poll between subtables and blocks.

use super::{ExecError, ExecResult};
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tidal_common::StatusCode;
use tidal_sql::Statement;

/// Statements one node runs at once; past it a new one fails with ResourceExhausted.
pub const RUNNING_MAX: usize = 1024;
/// SHOW QUERIES shows at most this many characters of a statement's text.
pub const SQL_TEXT_MAX_CHARS: usize = 512;
/// The default of the `query_timeout_ms` key (TIDAL_QUERY_TIMEOUT_MS): the client library's
/// own RPC timeout, so that the server gives up no later than its callers do.
pub const DEFAULT_QUERY_TIMEOUT_MS: u64 = 300_000;
/// The default of the `query_memory_max_bytes` key (TIDAL_QUERY_MEMORY_MAX_BYTES): 1 GiB.
pub const DEFAULT_QUERY_MEMORY_MAX_BYTES: u64 = 1 << 30;
/// Extra time a fragment call gets past the statement's deadline: the coordinator stops the
/// statement first; the data node's own deadline only matters if the coordinator vanished.
const FRAGMENT_DEADLINE_SLACK_MS: u64 = 1_000;

/// Who runs a statement and with which limits (from the Execute request).
#[derive(Clone, Debug, Default)]
pub struct Session {
    /// The session's query timeout; `None` = the server's default, `Some(0)` = none.
    pub timeout_ms: Option<u64>,
    /// The client's address, when known.
    pub client: String,
    /// This node's address as the client reached it, when known.
    pub endpoint: String,
    /// The authenticated user ("" = root).
    pub user: String,
    /// Whether the user may see and kill every user's statements.
    pub superuser: bool,
}

/// Whether abandoning the statement half-way leaves nothing inconsistent.
pub fn is_query(s: &Statement) -> bool {
    matches!(
        s,
        Statement::Select(_)
            | Statement::Explain { .. }
            | Statement::InsertSelect { .. }
            | Statement::ShowDatabases
            | Statement::ShowStables { .. }
            | Statement::ShowTables { .. }
            | Statement::ShowVgroups { .. }
            | Statement::ShowDnodes
            | Statement::ShowMnodes
            | Statement::ShowTableTags { .. }
            | Statement::ShowTags { .. }
            | Statement::ShowCreateDatabase { .. }
            | Statement::ShowCreateTable { .. }
            | Statement::ShowQueries
            | Statement::ShowGrants
            | Statement::ShowCluster
            | Statement::ShowVariables { .. }
            | Statement::ShowVnodes { .. }
            | Statement::ShowTableDistributed { .. }
            | Statement::Describe { .. }
    )
}

/// One running Execute request.
pub struct Running {
    pub id: String,
    pub sql: String,
    pub user: String,
    pub superuser: bool,
    pub client: String,
    pub endpoint: String,
    /// Wall-clock start, ms since the epoch.
    pub started_ms: i64,
    pub started: Instant,
    pub killable: bool,
    /// 0 = none.
    pub timeout_ms: u64,
    /// Fragment calls to data nodes in flight.
    fragments: AtomicU32,
    kill: tokio::sync::watch::Sender<bool>,
    /// What the statement holds on this node (`query_memory_max_bytes`).
    pub memory: tidal_sql::MemoryBudget,
}

impl Running {
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    pub fn fragments_in_flight(&self) -> u32 {
        self.fragments.load(Ordering::Relaxed)
    }

    pub fn is_killed(&self) -> bool {
        *self.kill.borrow()
    }

    pub fn state(&self) -> &'static str {
        if self.is_killed() {
            "killed"
        } else if self.fragments_in_flight() > 0 {
            "executing"
        } else {
            "running"
        }
    }

    /// When the statement must have finished, if it has a timeout.
    pub fn deadline(&self) -> Option<Instant> {
        (self.timeout_ms > 0).then(|| self.started + Duration::from_millis(self.timeout_ms))
    }

    /// This statement as another node lists it (Sql.ListQueries).
    pub fn to_wire(&self) -> tidal_proto::v1::RunningQuery {
        tidal_proto::v1::RunningQuery {
            id: self.id.clone(),
            user: self.user.clone(),
            client: self.client.clone(),
            endpoint: self.endpoint.clone(),
            started_ms: self.started_ms,
            elapsed_us: u64::try_from(self.elapsed().as_micros()).unwrap_or(u64::MAX),
            killable: self.killable,
            timeout_ms: self.timeout_ms,
            fragments: self.fragments_in_flight(),
            killed: self.is_killed(),
            sql: self.sql.chars().take(SQL_TEXT_MAX_CHARS + 3).collect(),
        }
    }

    /// A statement another node runs, as its ListQueries answer described it (for SHOW
    /// QUERIES; it cannot be stopped through this value).
    pub fn from_wire(q: tidal_proto::v1::RunningQuery) -> Running {
        let elapsed = Duration::from_micros(q.elapsed_us);
        let (kill, _) = tokio::sync::watch::channel(q.killed);
        Running {
            id: q.id,
            sql: q.sql.chars().take(SQL_TEXT_MAX_CHARS + 3).collect(),
            user: q.user,
            superuser: false,
            client: q.client,
            endpoint: q.endpoint,
            started_ms: q.started_ms,
            started: Instant::now()
                .checked_sub(elapsed)
                .unwrap_or_else(Instant::now),
            killable: q.killable,
            timeout_ms: q.timeout_ms,
            fragments: AtomicU32::new(q.fragments),
            kill,
            memory: tidal_sql::MemoryBudget::unlimited(),
        }
    }

    /// Counts a fragment call as in flight until the returned guard drops.
    pub fn fragment_started(self: &Arc<Self>) -> FragmentGuard {
        self.fragments.fetch_add(1, Ordering::Relaxed);
        FragmentGuard(self.clone())
    }

    /// Resolves when the statement is killed or passes its deadline, with the error it then
    /// fails with; never for a statement that cannot be stopped.
    pub async fn stopped(&self) -> ExecError {
        if !self.killable {
            return std::future::pending().await;
        }
        let mut killed = self.kill.subscribe();
        let deadline = self.deadline();
        let timeout = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = killed.wait_for(|k| *k) => ExecError::new(
                StatusCode::ExecutionError,
                format!("query {} was killed", self.id),
            ),
            _ = timeout => ExecError::new(
                StatusCode::Timeout,
                format!("query timed out after {} ms", self.timeout_ms),
            ),
        }
    }

    /// Runs `work` until it finishes or the statement is stopped (which drops `work`).
    pub async fn until_stopped<T>(
        &self,
        work: impl Future<Output = ExecResult<T>>,
    ) -> ExecResult<T> {
        tokio::select! {
            out = work => out,
            e = self.stopped() => Err(e),
        }
    }
}

/// Spawned tasks that are aborted when this is dropped (a dropped JoinHandle alone lets its
/// task run on).
pub struct AbortOnDrop<T>(pub Vec<tokio::task::JoinHandle<T>>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        for h in &self.0 {
            h.abort();
        }
    }
}

pub struct FragmentGuard(Arc<Running>);

impl Drop for FragmentGuard {
    fn drop(&mut self) {
        self.0.fragments.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The running statements of one node.
pub struct Registry {
    /// Distinguishes this process's ids from other nodes' (`<node>:<seq>`).
    node: String,
    seq: AtomicU64,
    running: Mutex<BTreeMap<u64, Arc<Running>>>,
    max: usize,
    /// Queries client libraries run themselves and report here ([`Registry::report`]), by
    /// (user, client id). Lock order: `clients`, then `running`.
    clients: Mutex<HashMap<(String, String), ReportingClient>>,
}

/// How long a client's reported queries stay listed after its last report: a few of the
/// client library's report intervals, so that one late report does not hide them.
pub const CLIENT_REPORT_TTL_MS: u64 = 5_000;
/// Clients whose queries one node lists at once; a report past it is answered but listed
/// nothing (the node's own statements come first).
pub const REPORTING_CLIENTS_MAX: usize = 1024;
/// Queries of one client a node lists.
pub const CLIENT_QUERIES_MAX: usize = 256;

/// The queries one client reported last, and when.
struct ReportingClient {
    last: Instant,
    /// The client's seq -> the registry's.
    queries: HashMap<u64, u64>,
}

/// Removes its statement from the registry when dropped (finished, failed, killed or the
/// client went away).
pub struct Registration {
    registry: Arc<Registry>,
    seq: u64,
    pub running: Arc<Running>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.registry.running.lock().remove(&self.seq);
    }
}

tokio::task_local! {
    static CURRENT: Arc<Running>;
}

/// The statement the current task runs for, if any (fragment calls report to it).
pub fn current() -> Option<Arc<Running>> {
    CURRENT.try_with(|r| r.clone()).ok()
}

/// How long a fragment call of the current statement may take on the data node.
pub fn fragment_timeout() -> Option<Duration> {
    let deadline = current()?.deadline()?;
    Some(
        deadline.saturating_duration_since(Instant::now())
            + Duration::from_millis(FRAGMENT_DEADLINE_SLACK_MS),
    )
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl Registry {
    pub fn new(max: usize) -> Arc<Registry> {
        // A per-process tag: ids stay unique across restarts and across the nodes a user
        // talks to, so a KILL sent to the wrong node cannot hit another statement.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let tag = (std::process::id().wrapping_mul(2_654_435_761) ^ nanos) & 0x00ff_ffff;
        Registry::with_node(format!("{tag:06x}"), max)
    }

    fn with_node(node: String, max: usize) -> Arc<Registry> {
        Arc::new(Registry {
            node,
            seq: AtomicU64::new(0),
            running: Mutex::new(BTreeMap::new()),
            max,
            clients: Mutex::new(HashMap::new()),
        })
    }

    /// The registry shared by every SQL entry point of this process (gRPC, HTTP).
    pub fn global() -> Arc<Registry> {
        static GLOBAL: OnceLock<Arc<Registry>> = OnceLock::new();
        GLOBAL.get_or_init(|| Registry::new(RUNNING_MAX)).clone()
    }

    /// Registers a statement that may hold `memory_max_bytes` on this node (0 = no limit).
    pub fn register(
        self: &Arc<Self>,
        sql: &str,
        session: &Session,
        killable: bool,
        timeout_ms: u64,
        memory_max_bytes: u64,
    ) -> ExecResult<Registration> {
        let mut running = self.running.lock();
        let (seq, r) = self.insert(
            &mut running,
            sql,
            session,
            killable,
            timeout_ms,
            memory_max_bytes,
            Duration::ZERO,
        )?;
        Ok(Registration {
            registry: self.clone(),
            seq,
            running: r,
        })
    }

    /// Adds a statement that started `elapsed` ago.
    #[allow(clippy::too_many_arguments)]
    fn insert(
        &self,
        running: &mut BTreeMap<u64, Arc<Running>>,
        sql: &str,
        session: &Session,
        killable: bool,
        timeout_ms: u64,
        memory_max_bytes: u64,
        elapsed: Duration,
    ) -> ExecResult<(u64, Arc<Running>)> {
        if running.len() >= self.max {
            return Err(ExecError::new(
                StatusCode::ResourceExhausted,
                format!(
                    "too many statements running on this node (limit {}); retry when some finish",
                    self.max
                ),
            ));
        }
        let seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
        let mut text: String = sql.trim().chars().take(SQL_TEXT_MAX_CHARS).collect();
        if text.len() < sql.trim().len() {
            text.push_str("...");
        }
        let (kill, _) = tokio::sync::watch::channel(false);
        let r = Arc::new(Running {
            id: format!("{}:{seq}", self.node),
            sql: text,
            user: if session.user.is_empty() {
                "root".to_string()
            } else {
                session.user.clone()
            },
            // The default user is root.
            superuser: session.superuser || session.user.is_empty(),
            client: session.client.clone(),
            endpoint: session.endpoint.clone(),
            started_ms: now_ms().saturating_sub(i64::try_from(elapsed.as_millis()).unwrap_or(0)),
            started: Instant::now()
                .checked_sub(elapsed)
                .unwrap_or_else(Instant::now),
            killable,
            timeout_ms,
            fragments: AtomicU32::new(0),
            kill,
            memory: tidal_sql::MemoryBudget::new(memory_max_bytes, "query_memory_max_bytes"),
        });
        running.insert(seq, r.clone());
        Ok((seq, r))
    }

    /// A client library's report of the queries it runs itself (`queries`: all of them; an
    /// empty list ends its report). They are listed as this node's statements, under the
    /// reporting session's user and address, until a report leaves them out or reports stop
    /// for [`CLIENT_REPORT_TTL_MS`]. A KILL QUERY of one marks it killed; the answer tells
    /// the client, which stops it. Bounded by [`REPORTING_CLIENTS_MAX`] and
    /// [`CLIENT_QUERIES_MAX`]; a query the registry has no room for is left unlisted.
    pub fn report(
        &self,
        session: &Session,
        client_id: &str,
        queries: &[tidal_proto::v1::ClientQuery],
    ) -> Vec<tidal_proto::v1::ReportedQuery> {
        self.expire_clients();
        let key = (session.user.clone(), client_id.to_string());
        let mut clients = self.clients.lock();
        let mut running = self.running.lock();
        if queries.is_empty() {
            if let Some(c) = clients.remove(&key) {
                for seq in c.queries.values() {
                    running.remove(seq);
                }
            }
            return Vec::new();
        }
        if !clients.contains_key(&key) && clients.len() >= REPORTING_CLIENTS_MAX {
            return Vec::new();
        }
        let client = clients.entry(key).or_insert_with(|| ReportingClient {
            last: Instant::now(),
            queries: HashMap::new(),
        });
        client.last = Instant::now();
        // Those the client no longer runs leave the list.
        client.queries.retain(|cseq, seq| {
            let still = queries.iter().any(|q| q.seq == *cseq);
            if !still {
                running.remove(seq);
            }
            still
        });
        let mut out = Vec::new();
        for q in queries.iter().take(CLIENT_QUERIES_MAX) {
            let r = match client.queries.get(&q.seq).and_then(|s| running.get(s)) {
                Some(r) => r.clone(),
                None => {
                    let Ok((seq, r)) = self.insert(
                        &mut running,
                        &q.sql,
                        session,
                        true,
                        q.timeout_ms,
                        0,
                        Duration::from_micros(q.elapsed_us),
                    ) else {
                        continue;
                    };
                    client.queries.insert(q.seq, seq);
                    r
                }
            };
            r.fragments.store(q.fragments, Ordering::Relaxed);
            out.push(tidal_proto::v1::ReportedQuery {
                seq: q.seq,
                id: r.id.clone(),
                killed: r.is_killed(),
            });
        }
        out
    }

    /// Forgets the queries of clients that stopped reporting.
    fn expire_clients(&self) {
        let ttl = Duration::from_millis(CLIENT_REPORT_TTL_MS);
        let mut clients = self.clients.lock();
        if clients.is_empty() {
            return;
        }
        let mut running = self.running.lock();
        clients.retain(|_, c| {
            let live = c.last.elapsed() < ttl;
            if !live {
                for seq in c.queries.values() {
                    running.remove(seq);
                }
            }
            live
        });
    }

    /// The running statements, oldest first.
    pub fn list(&self) -> Vec<Arc<Running>> {
        self.expire_clients();
        self.running.lock().values().cloned().collect()
    }

    /// The running statements `by` may see: all for a superuser (or no caller), else its own.
    pub fn visible_to(&self, by: Option<&Running>) -> Vec<Arc<Running>> {
        match by {
            Some(b) => self.visible_to_user(&b.user, b.superuser),
            None => self.list(),
        }
    }

    /// The running statements `user` may see: all for a superuser, else the user's own.
    pub fn visible_to_user(&self, user: &str, superuser: bool) -> Vec<Arc<Running>> {
        let mut all = self.list();
        if !superuser {
            all.retain(|r| r.user == user);
        }
        all
    }

    /// The NODE part of this process's statement ids.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// Whether `id` (NODE:SEQ) names a statement of this process, running or not.
    pub fn owns(&self, id: &str) -> bool {
        id.rsplit_once(':')
            .is_some_and(|(node, _)| node == self.node)
    }

    /// KILL QUERY by `by` (the caller's own statement; `None` = internal): stops the
    /// statement `id`, which fails with "query <id> was killed". A user who is not a
    /// superuser may only kill their own statements.
    pub fn kill(&self, id: &str, by: Option<&Running>) -> ExecResult<()> {
        self.kill_as(id, by.map(|b| (b.user.as_str(), b.superuser)))
    }

    /// [`Registry::kill`] by `(user, superuser)` (`None` = internal).
    pub fn kill_as(&self, id: &str, by: Option<(&str, bool)>) -> ExecResult<()> {
        let (node, seq) = id.rsplit_once(':').unwrap_or(("", id));
        let not_found = || {
            ExecError::new(
                StatusCode::InvalidArgument,
                format!("no running query '{id}' on this node (SHOW QUERIES lists them)"),
            )
        };
        let Ok(seq) = seq.trim().parse::<u64>() else {
            return Err(ExecError::new(
                StatusCode::InvalidArgument,
                format!("'{id}' is not a query id: expected NODE:SEQ as SHOW QUERIES shows it"),
            ));
        };
        if node != self.node {
            return Err(ExecError::new(
                StatusCode::InvalidArgument,
                format!(
                    "query '{id}' was not started on this node (this node's queries are {}:N): \
                     run KILL QUERY on the node whose SHOW QUERIES lists it",
                    self.node
                ),
            ));
        }
        let r = self
            .running
            .lock()
            .get(&seq)
            .cloned()
            .ok_or_else(not_found)?;
        // Another user's statement is reported like a missing one: it is not visible either.
        if by.is_some_and(|(user, superuser)| !superuser && user != r.user) {
            return Err(not_found());
        }
        if !r.killable {
            return Err(ExecError::new(
                StatusCode::InvalidArgument,
                format!(
                    "statement '{id}' is not a query (DDL or INSERT) and cannot be killed safely; \
                     it runs to completion"
                ),
            ));
        }
        r.kill.send_replace(true);
        Ok(())
    }
}

impl Registration {
    /// Runs `work` for this statement: as the task's current statement, until it finishes,
    /// is killed or passes its deadline (the last two drop `work`).
    pub async fn run<T>(&self, work: impl Future<Output = ExecResult<T>>) -> ExecResult<T> {
        let r = self.running.clone();
        let work = CURRENT.scope(r.clone(), work);
        if !r.killable {
            return work.await;
        }
        r.until_stopped(work).await
    }
}

// ---------------------------------------------------------------------------------------
// The cluster's statements: every server process has a frontend, so SHOW QUERIES asks each
// (the mnode and every live data node) for the statements its caller may see, and KILL
// QUERY asks each to stop the id if it is one of its own. Calls carry the caller's token, so
// every node applies the caller's own visibility and rights.

/// How long SHOW QUERIES and KILL QUERY wait for another node; one that does not answer in
/// time is left out (SHOW) or cannot be reached (KILL).
const PEER_TIMEOUT_MS: u64 = 2_000;

impl super::SqlService {
    /// The SQL frontends of the cluster other than this process's: the mnode and the live
    /// data nodes, by address.
    async fn peer_frontends(&self) -> ExecResult<Vec<String>> {
        let mut addrs = vec![self.client.mnode_addr().to_string()];
        let dnodes = self
            .client
            .mnode()?
            .list_dnodes(tidal_proto::v1::Empty {})
            .await?
            .into_inner()
            .dnodes;
        addrs.extend(dnodes.into_iter().filter(|d| d.alive).map(|d| d.addr));
        addrs.sort();
        addrs.dedup();
        Ok(addrs)
    }

    /// SHOW QUERIES: this node's statements `by` may see, then every other node's.
    pub(super) async fn cluster_queries(
        &self,
        by: Option<&Running>,
    ) -> ExecResult<Vec<Arc<Running>>> {
        let mut all = self.queries.visible_to(by);
        // Without the node list (the mnode is down) this node's own statements still show.
        let peers = self.peer_frontends().await.unwrap_or_else(|e| {
            tracing::warn!("SHOW QUERIES lists this node only: {}", e.message);
            Vec::new()
        });
        let mut calls = Vec::new();
        for addr in peers {
            let mut sql = self.client.sql_at(&addr)?;
            calls.push(async move {
                let mut req = tonic::Request::new(tidal_proto::v1::Empty {});
                req.set_timeout(Duration::from_millis(PEER_TIMEOUT_MS));
                (addr, sql.list_queries(req).await)
            });
        }
        for (addr, r) in futures::future::join_all(calls).await {
            match r {
                // This process, reached through its own address: already listed.
                Ok(resp) if resp.get_ref().node == self.queries.node() => {}
                Ok(resp) => all.extend(
                    resp.into_inner()
                        .queries
                        .into_iter()
                        .map(|q| Arc::new(Running::from_wire(q))),
                ),
                Err(e) => tracing::debug!("SHOW QUERIES: {addr} did not answer: {e}"),
            }
        }
        all.sort_by_key(|r| r.started_ms);
        Ok(all)
    }

    /// KILL QUERY: stops `id` on whichever node runs it.
    pub(super) async fn kill_cluster_query(
        &self,
        id: &str,
        by: Option<&Running>,
    ) -> ExecResult<()> {
        if self.queries.owns(id) || !id.contains(':') {
            return self.queries.kill(id, by);
        }
        let mut calls = Vec::new();
        for addr in self.peer_frontends().await? {
            let mut sql = self.client.sql_at(&addr)?;
            let id = id.to_string();
            calls.push(async move {
                let mut req = tonic::Request::new(tidal_proto::v1::KillQueryRequest { id });
                req.set_timeout(Duration::from_millis(PEER_TIMEOUT_MS));
                sql.kill_query(req).await
            });
        }
        let mut unreachable = 0;
        for r in futures::future::join_all(calls).await {
            match r {
                Ok(resp) if resp.get_ref().found => return Ok(()),
                Ok(_) => {}
                Err(e) => {
                    let e = ExecError::from(e);
                    if e.code == StatusCode::Unavailable || e.code == StatusCode::Timeout {
                        unreachable += 1;
                    } else {
                        return Err(e);
                    }
                }
            }
        }
        let hint = if unreachable > 0 {
            format!(" ({unreachable} node(s) did not answer)")
        } else {
            String::new()
        };
        Err(ExecError::new(
            StatusCode::InvalidArgument,
            format!("no running query '{id}' in the cluster{hint} (SHOW QUERIES lists them)"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> Session {
        Session::default()
    }

    #[test]
    fn registry_is_bounded_and_entries_leave_on_drop() {
        let reg = Registry::with_node("ab".into(), 2);
        let a = reg.register("select 1", &session(), true, 0, 0).unwrap();
        let b = reg.register("select 2", &session(), true, 0, 0).unwrap();
        let e = reg
            .register("select 3", &session(), true, 0, 0)
            .err()
            .unwrap();
        assert_eq!(e.code, StatusCode::ResourceExhausted);
        assert!(e.message.contains("limit 2"), "{}", e.message);
        assert_eq!(reg.list().len(), 2);
        assert_eq!(a.running.id, "ab:1");
        assert_eq!(a.running.user, "root");
        drop(a);
        assert_eq!(reg.list().len(), 1);
        assert_eq!(reg.list()[0].id, "ab:2");
        drop(b);
        assert!(reg.list().is_empty());
    }

    fn cq(seq: u64, sql: &str) -> tidal_proto::v1::ClientQuery {
        tidal_proto::v1::ClientQuery {
            seq,
            sql: sql.into(),
            elapsed_us: 2_000_000,
            timeout_ms: 0,
            fragments: 3,
        }
    }

    #[test]
    fn reported_client_queries_are_listed_killed_and_forgotten() {
        let reg = Registry::with_node("ab".into(), 8);
        let alice = Session {
            user: "alice".into(),
            client: "10.0.0.1:5000".into(),
            ..Session::default()
        };
        let got = reg.report(&alice, "c1", &[cq(1, "select 1"), cq(2, "select 2")]);
        assert_eq!(got.len(), 2);
        let list = reg.list();
        assert_eq!(list.len(), 2);
        let one = list.iter().find(|r| r.sql == "select 1").unwrap();
        assert_eq!(one.user, "alice");
        assert_eq!(one.client, "10.0.0.1:5000");
        assert_eq!(one.fragments_in_flight(), 3);
        assert!(
            one.elapsed() >= Duration::from_secs(2),
            "{:?}",
            one.elapsed()
        );
        assert_eq!(one.state(), "executing");
        // The same report again lists the same statements under the same ids.
        let again = reg.report(&alice, "c1", &[cq(1, "select 1"), cq(2, "select 2")]);
        assert_eq!(again, got);
        // Another user cannot kill it; its owner can, and the next report says so.
        let e = reg.kill_as(&one.id, Some(("bob", false))).unwrap_err();
        assert!(e.message.contains("no running query"), "{}", e.message);
        reg.kill_as(&one.id, Some(("alice", false))).unwrap();
        let after = reg.report(&alice, "c1", &[cq(1, "select 1"), cq(2, "select 2")]);
        let killed: Vec<u64> = after.iter().filter(|q| q.killed).map(|q| q.seq).collect();
        assert_eq!(killed, vec![1]);
        // The same client id of another user is another client.
        let bob = Session {
            user: "bob".into(),
            ..Session::default()
        };
        reg.report(&bob, "c1", &[cq(1, "select 3")]);
        assert_eq!(reg.list().len(), 3);
        assert_eq!(reg.visible_to_user("bob", false).len(), 1);
        // A query left out of a report leaves the list; an empty report ends the client's.
        reg.report(&alice, "c1", &[cq(2, "select 2")]);
        assert_eq!(reg.visible_to_user("alice", false).len(), 1);
        reg.report(&alice, "c1", &[]);
        assert!(reg.visible_to_user("alice", false).is_empty());
        assert_eq!(reg.list().len(), 1);
        // The registry's bound holds for reports too.
        let many: Vec<_> = (10..30).map(|i| cq(i, "select x")).collect();
        let listed = reg.report(&alice, "c2", &many);
        assert_eq!(listed.len(), 7, "8 places, bob's query holds one");
        assert_eq!(reg.list().len(), 8);
    }

    #[test]
    fn long_text_is_truncated() {
        let reg = Registry::with_node("ab".into(), 2);
        let sql = format!("select {}", "x".repeat(2 * SQL_TEXT_MAX_CHARS));
        let r = reg.register(&sql, &session(), true, 0, 0).unwrap();
        assert_eq!(r.running.sql.chars().count(), SQL_TEXT_MAX_CHARS + 3);
        assert!(r.running.sql.ends_with("..."));
    }

    #[test]
    fn kill_errors_name_the_problem() {
        let reg = Registry::with_node("ab".into(), 4);
        let ddl = reg
            .register("create database x", &session(), false, 0, 0)
            .unwrap();
        for (id, want) in [
            ("ab:x", "is not a query id"),
            ("cd:1", "was not started on this node"),
            ("ab:99", "no running query 'ab:99'"),
            ("ab:1", "cannot be killed safely"),
        ] {
            let e = reg.kill(id, None).err().unwrap();
            assert!(e.message.contains(want), "{id}: {}", e.message);
        }
        drop(ddl);
    }

    #[test]
    fn users_see_and_kill_only_their_own_statements() {
        let reg = Registry::with_node("ab".into(), 4);
        let as_user = |user: &str, superuser: bool| Session {
            user: user.into(),
            superuser,
            ..Session::default()
        };
        let alice = reg
            .register("select a", &as_user("alice", false), true, 0, 0)
            .unwrap();
        let bob = reg
            .register("select b", &as_user("bob", false), true, 0, 0)
            .unwrap();
        let root = reg
            .register("show queries", &as_user("", true), true, 0, 0)
            .unwrap();
        let seen: Vec<String> = reg
            .visible_to(Some(&bob.running))
            .iter()
            .map(|r| r.sql.clone())
            .collect();
        assert_eq!(seen, ["select b"]);
        assert_eq!(reg.visible_to(Some(&root.running)).len(), 3);
        assert_eq!(root.running.user, "root");
        let e = reg
            .kill(&alice.running.id, Some(&bob.running))
            .err()
            .unwrap();
        assert!(e.message.contains("no running query"), "{}", e.message);
        assert!(!alice.running.is_killed());
        reg.kill(&alice.running.id, Some(&alice.running)).unwrap();
        assert!(alice.running.is_killed());
        reg.kill(&bob.running.id, Some(&root.running)).unwrap();
        assert!(bob.running.is_killed());
    }

    #[tokio::test]
    async fn kill_stops_the_statement() {
        let reg = Registry::with_node("ab".into(), 4);
        let q = reg.register("select slow", &session(), true, 0, 0).unwrap();
        let id = q.running.id.clone();
        let reg2 = reg.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            reg2.kill(&id, None).unwrap();
        });
        let start = Instant::now();
        let e = q
            .run(async {
                assert!(current().is_some());
                tokio::time::sleep(Duration::from_secs(30)).await;
                Ok(())
            })
            .await
            .err()
            .unwrap();
        assert_eq!(e.message, "query ab:1 was killed");
        assert!(start.elapsed() < Duration::from_secs(5));
        assert_eq!(reg.list()[0].state(), "killed");
    }

    #[tokio::test]
    async fn deadline_fails_the_statement() {
        let reg = Registry::with_node("ab".into(), 4);
        let q = reg
            .register("select slow", &session(), true, 100, 0)
            .unwrap();
        let e = q
            .run(async {
                let t = fragment_timeout().unwrap();
                assert!(t > Duration::from_millis(FRAGMENT_DEADLINE_SLACK_MS));
                tokio::time::sleep(Duration::from_secs(30)).await;
                Ok(())
            })
            .await
            .err()
            .unwrap();
        assert_eq!(e.code, StatusCode::Timeout);
        assert_eq!(e.message, "query timed out after 100 ms");
        // Not killable: runs to completion whatever its timeout says.
        let d = reg.register("create x", &session(), false, 1, 0).unwrap();
        let out = d
            .run(async {
                tokio::time::sleep(Duration::from_millis(50)).await;
                Ok(7)
            })
            .await;
        assert_eq!(out.unwrap(), 7);
    }
}
