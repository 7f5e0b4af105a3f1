//! Tidal's client library: connects to the mnode, caches each database's routing map
//! (vgroup → hash range → data node address), sends each write straight to the vnode that owns
//! its tables, and retries on a stale route (refreshing the map) or a transient failure.
//!
//! Invariants:
//! - Routing uses [`tidal_common::vgroup_index`] over the database's ranges, the same function
//!   the mnode used to create them, so client and server agree on ownership.
//! - A retried write is idempotent: a row is identified by (table, ts) and a repeated write of
//!   the same row replaces it, so a retry after an unknown outcome never duplicates rows.
//!
//! ```no_run
//! # async fn demo() -> Result<(), tidal_client::ClientError> {
//! let client = tidal_client::Client::connect("127.0.0.1:6030").await?;
//! let r = client.execute("SELECT COUNT(*) FROM readings", "iot").await?;
//! println!("{:?}", r.batch.map(|b| b.num_rows()));
//! // Large results: batch by batch, as the cluster produces them.
//! let mut rows = client.query_stream("SELECT * FROM readings", "iot").await?;
//! while let Some(batch) = rows.next_batch().await? {
//!     println!("{} rows", batch.num_rows());
//! }
//! # Ok(()) }
//! ```

pub mod auth;
mod cork;
mod error;
pub mod frames;
mod one_frame;
pub mod query;
mod route;
mod session;
mod stream;
pub mod writer;

pub use auth::{ConnectOptions, Credentials};
pub use error::ClientError;
pub use one_frame::OneFrame;
pub use route::{RouteTable, VgroupRoute};
pub use session::{AuthChannel, AuthInterceptor};
pub use stream::ResultStream;
pub use writer::{BatchOutcome, BlockingWriter, OnBatch, Writer, WriterConfig, WriterStats};

use bytes::Bytes;
use parking_lot::Mutex;
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tidal_common::{
    Batch, ColumnDef, Precision, RowBlock, StableSchema, StatusCode, TableMeta, TableWrite,
    WriteBatch,
};
use tidal_proto::convert::{
    batch_from_wire, column_defs_to_wire, schema_from_wire, schema_to_wire, write_to_wire,
};
use tidal_proto::v1::{
    self, dnode_client::DnodeClient, mnode_client::MnodeClient, sql_client::SqlClient,
};
use tidal_proto::write_wire::{encode_write_request, EncodedWrite};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

/// Largest gRPC message the client sends or accepts (the servers' default limit).
pub const MESSAGE_BYTES_MAX: usize = 256 << 20;
/// How many times a write or query is attempted before its error is returned.
const ATTEMPTS_MAX: u32 = 8;
/// How long a cached STABLE schema is trusted. Another process may ALTER the STABLE (a
/// schemaless write adding a column); after this long every frontend sees the new schema.
/// Short, because a refetch is one small mnode call per STABLE.
pub const SCHEMA_CACHE_TTL_MS: u64 = 1_000;
/// First back-off after a transient failure; doubled per attempt.
const BACKOFF_INITIAL_MS: u64 = 50;
/// HTTP/2 receive window of one call. A coordinator reads the fragment streams of a query one
/// vgroup after another while the others stay open: each unread stream holds at most this
/// much of its connection's window, so the stream being read never starves (with the
/// connection window below, up to a thousand unread streams share one data node's
/// connection). It also bounds what a stream buffers: about one result batch.
pub const STREAM_WINDOW_BYTES: u32 = 1 << 20;
/// HTTP/2 receive window of one connection: credit, not memory (see [`STREAM_WINDOW_BYTES`]).
pub const CONNECTION_WINDOW_BYTES: u32 = 1 << 30;

/// The result of one SQL statement.
#[derive(Debug, Clone)]
pub struct StatementResult {
    /// Rows for a query or SHOW; `None` for statements that return no rows.
    pub batch: Option<Batch>,
    pub affected_rows: u64,
    pub precision: Precision,
    /// The session's current database after the statement (`USE` changes it).
    pub db: String,
}

/// Totals of a write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteOutcome {
    pub rows: u64,
    pub tables_created: u32,
    /// Rounds of sending this write took (1 if no group had to be retried).
    pub attempts: u32,
}

/// (cache scope, db).
type RouteKey = (Arc<str>, String);
/// (cache scope, db, STABLE name).
type SchemaKey = (Arc<str>, String, String);

/// A connection to a Tidal cluster. Cheap to clone; share one per process.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    mnode_addr: String,
    session: session::Session,
    /// `Some` when the servers speak TLS: the CA to trust and the name to check (None: the
    /// host of each address).
    tls: Option<(Certificate, Option<String>)>,
    channels: Mutex<HashMap<String, Channel>>,
    /// Keyed by (cache scope, db): a forwarding client keeps each user's lookups apart, so
    /// that one user's cached metadata never answers another (see `cache_scope`).
    routes: Mutex<HashMap<RouteKey, Arc<RouteTable>>>,
    /// STABLE schemas with the time they were fetched (see [`SCHEMA_CACHE_TTL_MS`]).
    schemas: Mutex<HashMap<SchemaKey, (StableSchema, std::time::Instant)>>,
    /// Names the mnode said are not STABLEs, with when it said so (for as long as a schema
    /// is cached): a query of a subtable asks for it as a STABLE first, and that round trip
    /// was a third of a subtable LAST_ROW's latency. Bounded by [`NOT_STABLES_MAX`].
    not_stables: Mutex<HashMap<SchemaKey, std::time::Instant>>,
    /// Subtables' metadata as a vnode gave it, with when (see [`Client::cached_table`]).
    tables: Mutex<HashMap<SchemaKey, (TableMeta, std::time::Instant)>>,
    /// See [`ConnectOptions::plan_queries_locally`].
    plan_queries_locally: bool,
    /// Idle frame connections; `None` when every call goes over gRPC (TLS, or both
    /// [`ConnectOptions::fragment_frames`] and [`ConnectOptions::write_frames`] off).
    frames: Option<frames::Pool>,
    /// See [`ConnectOptions::fragment_frames`].
    fragment_frames: bool,
    /// See [`ConnectOptions::write_frames`].
    write_frames: bool,
    /// The connected server's `query_timeout_ms` and `query_memory_max_bytes`, asked once,
    /// for the queries this client plans itself (see [`query`]).
    /// `Some(None)`: the server has no catalog, and this client plans nothing itself.
    query_limits: Mutex<Option<Option<query::QueryLimits>>>,
    /// Names this client in its reports of the queries it runs (random).
    client_id: String,
    local_queries: Mutex<query::LocalQueries>,
    /// Wakes the report task when a query the server lists ends.
    local_report_now: tokio::sync::Notify,
}

/// Most names [`Client::stable`] remembers as not being STABLEs, and most subtables
/// [`Client::cache_table`] keeps.
pub const NOT_STABLES_MAX: usize = 65_536;

/// Inserts `key` into a map of entries stamped when made, bounded at [`NOT_STABLES_MAX`]:
/// when full, the entries older than `ttl` go, and if that frees nothing, all.
fn insert_bounded<V>(
    map: &mut HashMap<SchemaKey, V>,
    key: SchemaKey,
    value: V,
    ttl: Duration,
    made: impl Fn(&V) -> std::time::Instant,
) {
    if map.len() >= NOT_STABLES_MAX {
        map.retain(|_, v| made(v).elapsed() < ttl);
        if map.len() >= NOT_STABLES_MAX {
            map.clear();
        }
    }
    map.insert(key, value);
}

impl Client {
    /// Connects to the mnode at `addr` (`host:port`) as root with the default password
    /// (`taosdata`), as `taos` does. See [`Client::connect_with`].
    pub async fn connect(addr: &str) -> Result<Client, ClientError> {
        Client::connect_with(addr, ConnectOptions::default()).await
    }

    /// Connects to the mnode at `addr` as `user`.
    pub async fn connect_user(
        addr: &str,
        user: &str,
        password: &str,
    ) -> Result<Client, ClientError> {
        Client::connect_with(addr, ConnectOptions::user(user, password)).await
    }

    /// Connects to the mnode at `addr` with `options` (credentials, TLS). With a password,
    /// logs in at once, so wrong credentials fail here with `Unauthenticated`. Connections
    /// are re-established on failure.
    pub async fn connect_with(addr: &str, options: ConnectOptions) -> Result<Client, ClientError> {
        let client = Client::new_lazy(addr, options)?;
        client.authenticate().await?;
        if client.inner.plan_queries_locally {
            // The first locally planned query needs the server's query limits: asked now,
            // in the background, that query does not wait for two more round trips.
            let c = client.clone();
            tokio::spawn(async move {
                c.query_limits().await;
            });
        }
        Ok(client)
    }

    /// Like [`Client::connect_with`] without contacting any server: the login (if any)
    /// happens at the first call that needs it (servers use this while the mnode may still
    /// be starting).
    pub fn new_lazy(addr: &str, options: ConnectOptions) -> Result<Client, ClientError> {
        let tls = match &options.tls_ca_pem {
            None => None,
            Some(pem) => Some((Certificate::from_pem(pem), options.tls_domain.clone())),
        };
        let client = Client {
            inner: Arc::new(Inner {
                mnode_addr: addr.to_string(),
                session: session::Session::new(options.credentials),
                tls,
                channels: Mutex::new(HashMap::new()),
                routes: Mutex::new(HashMap::new()),
                schemas: Mutex::new(HashMap::new()),
                not_stables: Mutex::new(HashMap::new()),
                tables: Mutex::new(HashMap::new()),
                plan_queries_locally: options.plan_queries_locally,
                frames: ((options.fragment_frames || options.write_frames)
                    && options.tls_ca_pem.is_none())
                .then(frames::Pool::default),
                fragment_frames: options.fragment_frames,
                write_frames: options.write_frames,
                query_limits: Mutex::new(None),
                client_id: random_client_id(),
                local_queries: Mutex::new(Default::default()),
                local_report_now: tokio::sync::Notify::new(),
            }),
        };
        client.channel(addr)?;
        Ok(client)
    }

    pub fn client_id(&self) -> &str {
        &self.inner.client_id
    }

    pub fn mnode_addr(&self) -> &str {
        &self.inner.mnode_addr
    }

    /// A (lazily connected, cached) channel to `addr`.
    pub fn channel(&self, addr: &str) -> Result<Channel, ClientError> {
        let mut channels = self.inner.channels.lock();
        if let Some(c) = channels.get(addr) {
            return Ok(c.clone());
        }
        let bad = |e: &dyn std::fmt::Display| {
            ClientError::new(
                StatusCode::InvalidArgument,
                format!("bad address '{addr}': {e}"),
            )
        };
        let scheme = if self.inner.tls.is_some() {
            "https"
        } else {
            "http"
        };
        let mut endpoint =
            Endpoint::from_shared(format!("{scheme}://{addr}")).map_err(|e| bad(&e))?;
        if let Some((ca, domain)) = &self.inner.tls {
            let domain = domain.clone().unwrap_or_else(|| host_of(addr).to_string());
            endpoint = endpoint
                .tls_config(
                    ClientTlsConfig::new()
                        .ca_certificate(ca.clone())
                        .domain_name(domain),
                )
                .map_err(|e| bad(&e))?;
        }
        let endpoint = endpoint
            .connect_timeout(Duration::from_secs(3))
            .tcp_nodelay(true)
            .initial_stream_window_size(STREAM_WINDOW_BYTES)
            .initial_connection_window_size(CONNECTION_WINDOW_BYTES)
            .timeout(Duration::from_secs(300));
        let channel = endpoint.connect_with_connector_lazy(cork::CorkedConnector::new());
        channels.insert(addr.to_string(), channel.clone());
        Ok(channel)
    }

    /// A stub of the mnode's catalog service; its calls carry this client's token (or,
    /// for a forwarding client, the current caller's), fixed when the stub is created.
    pub fn mnode(&self) -> Result<MnodeClient<AuthChannel>, ClientError> {
        Ok(
            MnodeClient::new(self.intercepted(self.channel(&self.inner.mnode_addr)?))
                .max_decoding_message_size(MESSAGE_BYTES_MAX),
        )
    }

    pub fn dnode(&self, addr: &str) -> Result<DnodeClient<AuthChannel>, ClientError> {
        Ok(DnodeClient::new(self.intercepted(self.channel(addr)?))
            .max_decoding_message_size(MESSAGE_BYTES_MAX)
            .max_encoding_message_size(MESSAGE_BYTES_MAX))
    }

    pub fn sql(&self) -> Result<SqlClient<AuthChannel>, ClientError> {
        self.sql_at(&self.inner.mnode_addr)
    }

    /// A stub of the SQL frontend of the server at `addr` (every server process has one).
    pub fn sql_at(&self, addr: &str) -> Result<SqlClient<AuthChannel>, ClientError> {
        Ok(SqlClient::new(self.intercepted(self.channel(addr)?))
            .max_decoding_message_size(MESSAGE_BYTES_MAX)
            .max_encoding_message_size(MESSAGE_BYTES_MAX))
    }

    /// The cached routing map of `db`, fetched from the mnode on first use.
    pub async fn route(&self, db: &str) -> Result<Arc<RouteTable>, ClientError> {
        let key = (self.cache_scope(), db.to_string());
        if let Some(r) = self.inner.routes.lock().get(&key) {
            return Ok(r.clone());
        }
        self.refresh_route(db).await
    }

    /// Fetches `db`'s routing map from the mnode, replacing the cached one.
    pub async fn refresh_route(&self, db: &str) -> Result<Arc<RouteTable>, ClientError> {
        self.authenticate().await?;
        let get = || async {
            self.mnode()?
                .get_database(v1::GetDatabaseRequest {
                    name: db.to_string(),
                })
                .await
                .map_err(ClientError::from)
        };
        let info = match get().await {
            Err(e) if self.can_relogin(&e) => {
                self.relogin().await?;
                get().await
            }
            r => r,
        }?
        .into_inner();
        let table = Arc::new(RouteTable::from_wire(&info)?);
        self.inner
            .routes
            .lock()
            .insert((self.cache_scope(), db.to_string()), table.clone());
        Ok(table)
    }

    /// Forgets every cached route and schema (after DROP DATABASE, for example).
    pub fn invalidate(&self, db: &str) {
        self.inner.routes.lock().retain(|(_, d), _| d != db);
        self.inner.schemas.lock().retain(|(_, d, _), _| d != db);
        self.inner.not_stables.lock().retain(|(_, d, _), _| d != db);
        self.inner.tables.lock().retain(|(_, d, _), _| d != db);
    }

    /// Subtable `name` of `db` as last given to [`Client::cache_table`], if that was within
    /// [`SCHEMA_CACHE_TTL_MS`]. For planning only: a vnode checks a plan's subtable against
    /// its STABLE, so a subtable created again under another STABLE fails the plan instead of
    /// being misread; its tags may be a second old.
    pub fn cached_table(&self, db: &str, name: &str) -> Option<TableMeta> {
        let key = (self.cache_scope(), db.to_string(), name.to_string());
        let tables = self.inner.tables.lock();
        let (meta, at) = tables.get(&key)?;
        (at.elapsed() < Duration::from_millis(SCHEMA_CACHE_TTL_MS)).then(|| meta.clone())
    }

    /// Remembers subtable `meta` of `db` (see [`Client::cached_table`]).
    pub fn cache_table(&self, db: &str, meta: &TableMeta) {
        let key = (self.cache_scope(), db.to_string(), meta.name.clone());
        let ttl = Duration::from_millis(SCHEMA_CACHE_TTL_MS);
        let mut tables = self.inner.tables.lock();
        insert_bounded(
            &mut tables,
            key,
            (meta.clone(), std::time::Instant::now()),
            ttl,
            |(_, at)| *at,
        );
    }

    /// Forgets the cached metadata of subtable `name` of `db`; whether there was any.
    pub fn forget_table(&self, db: &str, name: &str) -> bool {
        let key = (self.cache_scope(), db.to_string(), name.to_string());
        self.inner.tables.lock().remove(&key).is_some()
    }

    /// The schema of a STABLE, cached, as is the mnode's answer that `name` is none
    /// (`StableNotFound`; [`Client::refresh_stable`] asks again).
    pub async fn stable(&self, db: &str, name: &str) -> Result<StableSchema, ClientError> {
        let key = (self.cache_scope(), db.to_string(), name.to_string());
        let ttl = Duration::from_millis(SCHEMA_CACHE_TTL_MS);
        if let Some((s, at)) = self.inner.schemas.lock().get(&key) {
            if at.elapsed() < ttl {
                return Ok(s.clone());
            }
        }
        if let Some(at) = self.inner.not_stables.lock().get(&key) {
            if at.elapsed() < ttl {
                return Err(ClientError::new(
                    StatusCode::StableNotFound,
                    format!("STABLE '{name}' does not exist in database '{db}'"),
                ));
            }
        }
        self.authenticate().await?;
        let get = || async {
            self.mnode()?
                .get_stable(v1::GetStableRequest {
                    db: db.to_string(),
                    name: name.to_string(),
                })
                .await
                .map_err(ClientError::from)
        };
        let got = match get().await {
            Err(e) if self.can_relogin(&e) => {
                self.relogin().await?;
                get().await
            }
            r => r,
        };
        let wire = match got {
            Ok(w) => w.into_inner(),
            Err(e) => {
                if e.code == StatusCode::StableNotFound {
                    let mut not = self.inner.not_stables.lock();
                    insert_bounded(&mut not, key, std::time::Instant::now(), ttl, |at| *at);
                }
                return Err(e);
            }
        };
        let schema = schema_from_wire(&wire)
            .map_err(|e| ClientError::new(StatusCode::Internal, e.to_string()))?;
        self.inner.not_stables.lock().remove(&key);
        self.inner
            .schemas
            .lock()
            .insert(key, (schema.clone(), std::time::Instant::now()));
        Ok(schema)
    }

    /// Fetches a STABLE's schema from the mnode, bypassing and replacing the cached copy
    /// (after an ALTER by another process, or a schema mismatch).
    pub async fn refresh_stable(&self, db: &str, name: &str) -> Result<StableSchema, ClientError> {
        let key = (self.cache_scope(), db.to_string(), name.to_string());
        self.inner.schemas.lock().remove(&key);
        self.inner.not_stables.lock().remove(&key);
        self.stable(db, name).await
    }

    /// CREATE STABLE; with `if_not_exists` an existing STABLE of that name is returned as is.
    /// The returned schema is cached.
    pub async fn create_stable(
        &self,
        schema: &StableSchema,
        if_not_exists: bool,
    ) -> Result<StableSchema, ClientError> {
        self.authenticate().await?;
        let wire = self
            .mnode()?
            .create_stable(v1::CreateStableRequest {
                schema: Some(schema_to_wire(schema)),
                if_not_exists,
            })
            .await
            .map_err(ClientError::from)?
            .into_inner();
        self.cache_schema(&wire)
    }

    /// ALTER STABLE ADD COLUMN / ADD TAG (appends; bumps the schema version). The returned
    /// schema is cached.
    pub async fn alter_stable(
        &self,
        db: &str,
        name: &str,
        add_columns: &[ColumnDef],
        add_tags: &[ColumnDef],
    ) -> Result<StableSchema, ClientError> {
        self.authenticate().await?;
        let wire = self
            .mnode()?
            .alter_stable(v1::AlterStableRequest {
                db: db.to_string(),
                name: name.to_string(),
                add_columns: column_defs_to_wire(add_columns),
                add_tags: column_defs_to_wire(add_tags),
                ..Default::default()
            })
            .await
            .map_err(ClientError::from)?
            .into_inner();
        self.cache_schema(&wire)
    }

    /// ALTER STABLE with any change the mnode supports (see `v1::AlterStableRequest`); the
    /// returned schema is cached.
    pub async fn alter_stable_request(
        &self,
        req: v1::AlterStableRequest,
    ) -> Result<StableSchema, ClientError> {
        self.authenticate().await?;
        let wire = self
            .mnode()?
            .alter_stable(req)
            .await
            .map_err(ClientError::from)?
            .into_inner();
        self.cache_schema(&wire)
    }

    /// Sends `schema` to every vnode of `db` (a write with no rows), so that each vnode knows
    /// the newest version even before it receives rows that use it: readers on a vnode scan
    /// with the vnode's schema, and an ALTERed STABLE must not be newer than that.
    pub async fn publish_schema(&self, db: &str, schema: &StableSchema) -> Result<(), ClientError> {
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let route = self.route(db).await?;
            let mut result = Ok(());
            for vg in &route.vgroups {
                let batch = WriteBatch {
                    db: db.to_string(),
                    vgroup: vg.id,
                    schemas: vec![schema.clone()],
                    tables: Vec::new(),
                    blocks: Vec::new(),
                };
                if let Err(e) = self.write_vgroup(&vg.addr, &batch).await {
                    result = Err(e);
                    break;
                }
            }
            match result {
                Err(e) if e.code.is_retryable() && attempt < ATTEMPTS_MAX => {
                    let _ = self.refresh_route(db).await;
                    tokio::time::sleep(Duration::from_millis(BACKOFF_INITIAL_MS << attempt.min(6)))
                        .await;
                }
                other => return other,
            }
        }
    }

    fn cache_schema(&self, wire: &v1::StableSchema) -> Result<StableSchema, ClientError> {
        let schema = schema_from_wire(wire)
            .map_err(|e| ClientError::new(StatusCode::Internal, e.to_string()))?;
        let key = (self.cache_scope(), schema.db.clone(), schema.name.clone());
        self.inner.not_stables.lock().remove(&key);
        self.inner
            .schemas
            .lock()
            .insert(key, (schema.clone(), std::time::Instant::now()));
        Ok(schema)
    }

    /// Writes rows for any tables of `db`: groups them per vgroup, sends the groups in
    /// parallel, and retries a group whose route was stale (after refreshing the map) or
    /// whose node was briefly unavailable. Returns when every row is acknowledged.
    pub async fn write(
        &self,
        db: &str,
        schemas: &[StableSchema],
        tables: Vec<TableWrite>,
    ) -> Result<WriteOutcome, ClientError> {
        self.authenticate().await?;
        let mut pending = tables;
        let mut total = WriteOutcome::default();
        let mut attempt = 0u32;
        let mut relogged = false;
        loop {
            attempt += 1;
            let route = self.route(db).await?;
            let mut groups: HashMap<usize, Vec<TableWrite>> = HashMap::new();
            for t in pending.drain(..) {
                groups
                    .entry(route.index_of(db, &t.table))
                    .or_default()
                    .push(t);
            }
            let mut tasks = Vec::with_capacity(groups.len());
            for (idx, tables) in groups {
                let Some(vg) = route.vgroups.get(idx).cloned() else {
                    return Err(ClientError::new(
                        StatusCode::Internal,
                        "route index out of range",
                    ));
                };
                let needed: Vec<StableSchema> = schemas
                    .iter()
                    .filter(|s| tables.iter().any(|t| t.stable == s.name))
                    .cloned()
                    .collect();
                let batch = WriteBatch {
                    db: db.to_string(),
                    vgroup: vg.id,
                    schemas: needed,
                    tables,
                    blocks: Vec::new(),
                };
                // The stub is made here, in the caller's task, so that a forwarding client's
                // call carries the caller's token.
                let stub = self.dnode(&vg.addr);
                tasks.push(tokio::spawn(async move {
                    let res = match stub {
                        Ok(mut d) => write_vgroup(&mut d, &batch).await,
                        Err(e) => Err(e),
                    };
                    (batch, res)
                }));
            }
            let mut retry_err: Option<ClientError> = None;
            let mut stale = false;
            let mut expired = false;
            for t in tasks {
                let (batch, res) = t.await.map_err(|e| {
                    ClientError::new(StatusCode::Internal, format!("write task failed: {e}"))
                })?;
                match res {
                    Ok(o) => {
                        total.rows += o.rows;
                        total.tables_created += o.tables_created;
                    }
                    Err(e) if e.code.is_retryable() && attempt < ATTEMPTS_MAX => {
                        stale |= e.code.is_stale_route();
                        pending.extend(batch.tables);
                        retry_err = Some(e);
                    }
                    // The session ended (password changed, token expired): nothing of this
                    // group was written; log in again once and resend it.
                    Err(e) if !relogged && self.can_relogin(&e) => {
                        expired = true;
                        pending.extend(batch.tables);
                        retry_err = Some(e);
                    }
                    Err(e) => return Err(e),
                }
            }
            if pending.is_empty() {
                total.attempts = attempt;
                return Ok(total);
            }
            if expired {
                self.relogin().await?;
                relogged = true;
                continue;
            }
            tracing::debug!(?retry_err, attempt, "retrying write");
            if stale || attempt > 1 {
                // A stale map or a moved vnode: fetch the current map before retrying.
                let _ = self.refresh_route(db).await;
            }
            if !stale {
                tokio::time::sleep(Duration::from_millis(BACKOFF_INITIAL_MS << attempt.min(6)))
                    .await;
            }
        }
    }

    /// Writes row blocks (rows of many subtables per STABLE, the batching Writer's form) to
    /// `db`: a block whose subtables all belong to one vgroup is sent as is, others are split
    /// per vgroup; the groups go out in parallel and are retried like [`Client::write`]'s.
    /// `known(table)` says a subtable is known to exist: its tags stay off the wire. If one
    /// turns out to be missing (dropped meanwhile), its group is sent again with every tag.
    ///
    /// `built_for`: the blocks were split for vgroup `idx` of that routing map; while it is
    /// still the current map, their subtables are not routed again.
    pub async fn write_blocks(
        &self,
        db: &str,
        schemas: &[StableSchema],
        blocks: &[RowBlock],
        known: &(dyn Fn(&str) -> bool + Sync),
        built_for: Option<(&Arc<RouteTable>, usize)>,
    ) -> Result<WriteOutcome, ClientError> {
        self.authenticate().await?;
        let mut pending: Vec<Cow<'_, RowBlock>> = blocks.iter().map(Cow::Borrowed).collect();
        let mut total = WriteOutcome::default();
        let mut attempt = 0u32;
        let mut relogged = false;
        let mut all_tags = false;
        loop {
            attempt += 1;
            let route = self.route(db).await?;
            let mut groups: HashMap<usize, Vec<Cow<'_, RowBlock>>> = HashMap::new();
            let as_built = built_for
                .filter(|(r, _)| attempt == 1 && Arc::ptr_eq(r, &route))
                .map(|(_, idx)| idx);
            if let Some(idx) = as_built {
                groups.insert(idx, std::mem::take(&mut pending));
            }
            for b in pending.drain(..) {
                let first = route.index_of(db, b.table(0));
                let one_group =
                    (1..b.num_tables()).all(|i| route.index_of(db, b.table(i)) == first);
                if one_group {
                    groups.entry(first).or_default().push(b);
                } else {
                    for (idx, part) in b.into_owned().split_by(|t| route.index_of(db, t)) {
                        groups.entry(idx).or_default().push(Cow::Owned(part));
                    }
                }
            }
            let mut tasks = Vec::with_capacity(groups.len());
            for (idx, blocks) in groups {
                let Some(vg) = route.vgroups.get(idx).cloned() else {
                    return Err(ClientError::new(
                        StatusCode::Internal,
                        "route index out of range",
                    ));
                };
                let mut omitted = false;
                let schemas: Vec<v1::StableSchema> = schemas
                    .iter()
                    .filter(|s| blocks.iter().any(|b| b.stable() == s.name))
                    .map(schema_to_wire)
                    .collect();
                let refs: Vec<&RowBlock> = blocks.iter().map(|b| b.as_ref()).collect();
                let req = encode_write_request(db, vg.id.0, &schemas, &refs, |t| {
                    let send = all_tags || !known(t);
                    omitted |= !send;
                    send
                });
                // The token is taken here, in the caller's task, so that a forwarding
                // client's call carries the caller's token.
                let token = self.token_for_call();
                let client = self.clone();
                let task =
                    tokio::spawn(
                        async move { client.send_write(&vg.addr, token, req.into()).await },
                    );
                tasks.push((task, blocks, omitted));
            }
            let mut retry_err: Option<ClientError> = None;
            let mut stale = false;
            let mut expired = false;
            for (t, blocks, omitted) in tasks {
                let res = t.await.map_err(|e| {
                    ClientError::new(StatusCode::Internal, format!("write task failed: {e}"))
                })?;
                match res {
                    Ok(o) => {
                        total.rows += o.rows;
                        total.tables_created += o.tables_created;
                    }
                    Err(e) if e.code.is_retryable() && attempt < ATTEMPTS_MAX => {
                        stale |= e.code.is_stale_route();
                        pending.extend(blocks);
                        retry_err = Some(e);
                    }
                    // A subtable sent without tags is gone: send its group again with tags.
                    Err(e) if e.code == StatusCode::TableNotFound && omitted && !all_tags => {
                        all_tags = true;
                        pending.extend(blocks);
                        retry_err = Some(e);
                    }
                    Err(e) if !relogged && self.can_relogin(&e) => {
                        expired = true;
                        pending.extend(blocks);
                        retry_err = Some(e);
                    }
                    Err(e) => return Err(e),
                }
            }
            if pending.is_empty() {
                total.attempts = attempt;
                return Ok(total);
            }
            if expired {
                self.relogin().await?;
                relogged = true;
                continue;
            }
            tracing::debug!(?retry_err, attempt, "retrying row blocks");
            if stale || attempt > 1 {
                let _ = self.refresh_route(db).await;
            }
            if !stale && retry_err.as_ref().is_some_and(|e| e.code.is_retryable()) {
                tokio::time::sleep(Duration::from_millis(BACKOFF_INITIAL_MS << attempt.min(6)))
                    .await;
            }
        }
    }

    /// Sends one encoded `WriteRequest` to the data node at `addr`: as a WRITE frame when
    /// this client uses frames ([`ConnectOptions::write_frames`]) and the data node takes
    /// them, else over gRPC.
    async fn send_write(
        &self,
        addr: &str,
        token: Option<Arc<str>>,
        req: Bytes,
    ) -> Result<WriteOutcome, ClientError> {
        let pool = self
            .inner
            .frames
            .as_ref()
            .filter(|p| self.inner.write_frames && !p.grpc_only(addr));
        // Without a token there is nothing to send in the frame: gRPC says why.
        if let (Some(pool), Some(token)) = (pool, token.as_deref()) {
            match pool.write(addr, token, &req).await {
                Ok(r) => return Ok(outcome_of(r)),
                Err(frames::WriteStart::Failed(e)) => return Err(e),
                Err(frames::WriteStart::NotSpoken | frames::WriteStart::Busy) => {}
            }
        }
        let channel = self.intercepted_with(self.channel(addr)?, token);
        send_encoded_write(channel, EncodedWrite(req)).await
    }

    async fn write_vgroup(
        &self,
        addr: &str,
        batch: &WriteBatch,
    ) -> Result<WriteOutcome, ClientError> {
        write_vgroup(&mut self.dnode(addr)?, batch).await
    }

    /// Runs one SQL statement with `db` as the session's current database ("" for none),
    /// and returns its whole result at once (see [`Client::query_stream`] for large ones).
    pub async fn execute(&self, sql: &str, db: &str) -> Result<StatementResult, ClientError> {
        self.execute_with_timeout(sql, db, None).await
    }

    /// `execute` with the session's query timeout: `None` = the server's default, `Some(0)` =
    /// none; a query that runs longer fails with "query timed out after N ms".
    pub async fn execute_with_timeout(
        &self,
        sql: &str,
        db: &str,
        timeout_ms: Option<u64>,
    ) -> Result<StatementResult, ClientError> {
        if self.inner.plan_queries_locally {
            if let Some(r) = self.try_select_local(sql, db, timeout_ms).await {
                return r;
            }
        }
        self.execute_on_server(sql, db, timeout_ms).await
    }

    /// [`Client::execute_with_timeout`] planned and run by the server the client connected
    /// to, whatever the statement.
    pub async fn execute_on_server(
        &self,
        sql: &str,
        db: &str,
        timeout_ms: Option<u64>,
    ) -> Result<StatementResult, ClientError> {
        self.authenticate().await?;
        let run = || async {
            self.sql()?
                .execute(v1::ExecuteRequest {
                    sql: sql.to_string(),
                    db: db.to_string(),
                    timeout_ms,
                })
                .await
                .map_err(ClientError::from)
        };
        let resp = match run().await {
            Err(e) if self.can_relogin(&e) => {
                self.relogin().await?;
                run().await
            }
            r => r,
        }?
        .into_inner();
        let batch = match (resp.has_rows, resp.batch) {
            (true, Some(b)) => Some(
                batch_from_wire(b)
                    .map_err(|e| ClientError::new(StatusCode::Internal, e.to_string()))?,
            ),
            _ => None,
        };
        Ok(StatementResult {
            batch,
            affected_rows: resp.affected_rows,
            precision: Precision::parse(&resp.precision).unwrap_or(Precision::Millis),
            db: resp.db,
        })
    }
}

async fn write_vgroup(
    d: &mut DnodeClient<AuthChannel>,
    batch: &WriteBatch,
) -> Result<WriteOutcome, ClientError> {
    send_write(d, write_to_wire(batch)).await
}

async fn send_write(
    d: &mut DnodeClient<AuthChannel>,
    req: v1::WriteRequest,
) -> Result<WriteOutcome, ClientError> {
    let resp = d.write(req).await.map_err(ClientError::from)?.into_inner();
    Ok(outcome_of(resp))
}

/// One attempt's outcome as the data node reports it.
fn outcome_of(resp: v1::WriteResponse) -> WriteOutcome {
    WriteOutcome {
        rows: resp.rows,
        tables_created: resp.tables_created,
        attempts: 1,
    }
}

/// [`send_write`] of a request already encoded ([`encode_write_request`]): the same call,
/// through tonic's prost codec as the generated stub makes it.
async fn send_encoded_write(
    channel: AuthChannel,
    req: EncodedWrite,
) -> Result<WriteOutcome, ClientError> {
    let mut grpc = tonic::client::Grpc::new(channel)
        .max_decoding_message_size(MESSAGE_BYTES_MAX)
        .max_encoding_message_size(MESSAGE_BYTES_MAX);
    grpc.ready().await.map_err(|e| {
        ClientError::from(tonic::Status::unknown(format!(
            "Service was not ready: {e}"
        )))
    })?;
    let codec = tonic_prost::ProstCodec::<EncodedWrite, v1::WriteResponse>::default();
    let path = http::uri::PathAndQuery::from_static("/tidal.v1.Dnode/Write");
    let mut req = tonic::Request::new(req);
    req.extensions_mut()
        .insert(tonic::GrpcMethod::new("tidal.v1.Dnode", "Write"));
    let resp = grpc
        .unary(req, path, codec)
        .await
        .map_err(ClientError::from)?
        .into_inner();
    Ok(outcome_of(resp))
}

/// The host part of `host:port` (`[v6]:port` gives `v6`).
fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map(|(h, _)| h).unwrap_or(addr);
    host.trim_start_matches('[').trim_end_matches(']')
}

/// 64 random bits in hex, from the std hasher's per-process random keys, the time and the
/// process id (no dependency for a name that only needs to differ between clients).
fn random_client_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.write_u32(std::process::id());
    format!("{:016x}", h.finish())
}
