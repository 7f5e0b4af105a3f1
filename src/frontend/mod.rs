//! The SQL frontend: every server process serves it. It parses a statement, resolves names
//! against the catalog (STABLEs from the mnode, subtables from the vnode that owns them),
//! executes DDL through the mnode and data nodes, routes INSERT rows to their vgroups through
//! the client library, and runs queries by sending plan fragments to every vgroup in parallel
//! and merging the partial results (`tidal_sql::finish`).

mod alter;
mod catalog;
mod explain;
mod insert_select;
pub mod metrics;
pub mod queries;
pub mod schemaless;
mod show;
pub mod stream;
mod users;
pub mod write_merge;

pub use show::SYSTEM_TABLES;
use std::collections::HashMap;
use tidal_client::{Client, ClientError};
use tidal_common::{Batch, Precision, StableSchema, StatusCode, TableWrite, VgroupId};
use tidal_proto::convert::{options_to_wire, schema_to_wire, value_to_wire};
use tidal_proto::status_error;
use tidal_proto::v1::{self, sql_server::Sql};
use tidal_sql::{FragmentTarget, ObjectRef, Statement};
use tonic::{Request, Response, Status};

/// Subtables to create on one vgroup: data-node address, STABLE schema, definitions.
type PendingCreates = (String, StableSchema, Vec<v1::SubtableDef>);

pub struct SqlService {
    client: Client,
    /// The statements this node is running (SHOW QUERIES / KILL QUERY); one per process.
    queries: std::sync::Arc<queries::Registry>,
    /// Query timeout of sessions that do not set one; 0 = none.
    default_timeout_ms: u64,
    /// Memory one statement may hold here (`query_memory_max_bytes`); 0 = no limit.
    memory_max_bytes: u64,
    /// This process's configuration as it resolved it (SHOW VARIABLES).
    variables: std::sync::Arc<Vec<crate::config::Variable>>,
}

/// An error of one statement: a status code and a message for the user.
#[derive(Debug)]
pub struct ExecError {
    pub code: StatusCode,
    pub message: String,
}

impl ExecError {
    pub fn new(code: StatusCode, message: impl Into<String>) -> ExecError {
        ExecError {
            code,
            message: message.into(),
        }
    }
}

impl From<ClientError> for ExecError {
    fn from(e: ClientError) -> ExecError {
        ExecError {
            code: e.code,
            message: e.message,
        }
    }
}

impl tidal_client::query::Coded for ExecError {
    fn code(&self) -> StatusCode {
        self.code
    }
}

impl From<tidal_sql::SqlError> for ExecError {
    fn from(e: tidal_sql::SqlError) -> ExecError {
        ExecError {
            code: e.status_code(),
            message: e.to_string(),
        }
    }
}

impl From<Status> for ExecError {
    fn from(s: Status) -> ExecError {
        ClientError::from(s).into()
    }
}

impl From<tidal_proto::WireError> for ExecError {
    fn from(e: tidal_proto::WireError) -> ExecError {
        ExecError::new(StatusCode::Internal, e.to_string())
    }
}

pub type ExecResult<T> = Result<T, ExecError>;

/// What a statement produced.
pub struct Outcome {
    pub batch: Option<Batch>,
    pub affected_rows: u64,
    pub precision: Precision,
    pub db: String,
}

impl Outcome {
    fn none(db: &str) -> Outcome {
        Outcome {
            batch: None,
            affected_rows: 0,
            precision: Precision::Millis,
            db: db.to_string(),
        }
    }
    fn affected(db: &str, n: u64) -> Outcome {
        Outcome {
            affected_rows: n,
            ..Outcome::none(db)
        }
    }
    fn rows(db: &str, batch: Batch, precision: Precision) -> Outcome {
        Outcome {
            affected_rows: batch.num_rows() as u64,
            batch: Some(batch),
            precision,
            db: db.to_string(),
        }
    }
}

#[tonic::async_trait]
impl Sql for SqlService {
    async fn frontend_stats(
        &self,
        _req: Request<v1::Empty>,
    ) -> Result<Response<v1::FrontendStatsResponse>, Status> {
        Ok(Response::new(v1::FrontendStatsResponse {
            statements: metrics::to_wire(),
        }))
    }

    async fn execute(
        &self,
        req: Request<v1::ExecuteRequest>,
    ) -> Result<Response<v1::ExecuteResponse>, Status> {
        let mut session = session_of(&req);
        let r = req.into_inner();
        session.timeout_ms = r.timeout_ms;
        // A streamed result is collected here (against the statement's memory budget).
        let outcome = match self.execute_session(&r.sql, &r.db, &session).await {
            Ok(reply) => reply.collect().await,
            Err(e) => Err(e),
        };
        match outcome {
            Ok(o) => Ok(Response::new(v1::ExecuteResponse {
                has_rows: o.batch.is_some(),
                batch: o.batch.as_ref().map(tidal_proto::convert::batch_to_wire),
                affected_rows: o.affected_rows,
                precision: o.precision.as_str().to_string(),
                db: o.db,
            })),
            Err(e) => Err(status_error(e.code, e.message)),
        }
    }

    async fn list_queries(
        &self,
        req: Request<v1::Empty>,
    ) -> Result<Response<v1::ListQueriesResponse>, Status> {
        let s = session_of(&req);
        let caller_super = s.superuser || s.user.is_empty();
        Ok(Response::new(v1::ListQueriesResponse {
            node: self.queries.node().to_string(),
            queries: self
                .queries
                .visible_to_user(&caller_name(&s), caller_super)
                .iter()
                .map(|r| r.to_wire())
                .collect(),
        }))
    }

    async fn kill_query(
        &self,
        req: Request<v1::KillQueryRequest>,
    ) -> Result<Response<v1::KillQueryResponse>, Status> {
        let s = session_of(&req);
        let caller_super = s.superuser || s.user.is_empty();
        let id = req.into_inner().id;
        if !self.queries.owns(&id) {
            return Ok(Response::new(v1::KillQueryResponse { found: false }));
        }
        self.queries
            .kill_as(&id, Some((&caller_name(&s), caller_super)))
            .map_err(|e| status_error(e.code, e.message))?;
        Ok(Response::new(v1::KillQueryResponse { found: true }))
    }

    async fn report_queries(
        &self,
        req: Request<v1::ReportQueriesRequest>,
    ) -> Result<Response<v1::ReportQueriesResponse>, Status> {
        let s = session_of(&req);
        let r = req.into_inner();
        if r.client_id.is_empty() || r.client_id.len() > 64 {
            return Err(status_error(
                StatusCode::InvalidArgument,
                "ReportQueries: client_id must be 1 to 64 bytes",
            ));
        }
        Ok(Response::new(v1::ReportQueriesResponse {
            queries: self.queries.report(&s, &r.client_id, &r.queries),
        }))
    }

    type ExecuteStreamStream = stream::ResultMessages;

    async fn execute_stream(
        &self,
        req: Request<v1::ExecuteRequest>,
    ) -> Result<Response<stream::ResultMessages>, Status> {
        let session = session_of(&req);
        let r = req.into_inner();
        let session = queries::Session {
            timeout_ms: r.timeout_ms,
            ..session
        };
        match self.execute_session(&r.sql, &r.db, &session).await {
            Ok(reply) => Ok(Response::new(stream::messages(reply))),
            Err(e) => Err(status_error(e.code, e.message)),
        }
    }
}

/// `fut`'s result, or an Internal error when it panics. A bug that panics while a statement
/// is parsed, planned or run then fails that statement with an error its client can read
/// (the panic hook has logged where) instead of dropping the connection; the node and its
/// other sessions go on.
async fn fail_on_panic<T>(fut: impl std::future::Future<Output = ExecResult<T>>) -> ExecResult<T> {
    use futures::FutureExt;
    std::panic::AssertUnwindSafe(fut)
        .catch_unwind()
        .await
        .unwrap_or_else(|panic| {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            Err(ExecError::new(
                StatusCode::Internal,
                format!(
                    "internal error while running the statement (a bug: please report it with the statement): {what}"
                ),
            ))
        })
}

/// The user name statements of `s` are registered under.
fn caller_name(s: &queries::Session) -> String {
    if s.user.is_empty() {
        "root".to_string()
    } else {
        s.user.clone()
    }
}

/// Who sent an Execute request (the authenticated caller; without authentication, root).
fn session_of<T>(req: &Request<T>) -> queries::Session {
    let addr = |a: Option<std::net::SocketAddr>| a.map(|a| a.to_string()).unwrap_or_default();
    let principal = req.extensions().get::<crate::server::auth::Principal>();
    queries::Session {
        client: addr(req.remote_addr()),
        endpoint: addr(req.local_addr()),
        user: principal.map(|p| p.name().to_string()).unwrap_or_default(),
        superuser: principal.is_none_or(|p| p.is_superuser()),
        ..Default::default()
    }
}

impl SqlService {
    /// A frontend whose sessions default to `default_timeout_ms` (0 = none) and whose
    /// statements may hold `memory_max_bytes` (0 = no limit).
    pub fn new(client: Client, default_timeout_ms: u64, memory_max_bytes: u64) -> SqlService {
        SqlService {
            client,
            queries: queries::Registry::global(),
            default_timeout_ms,
            memory_max_bytes,
            variables: Default::default(),
        }
    }

    /// The configuration SHOW VARIABLES lists: the keys this process resolved at start.
    pub fn with_variables(
        mut self,
        variables: std::sync::Arc<Vec<crate::config::Variable>>,
    ) -> SqlService {
        self.variables = variables;
        self
    }

    /// Runs every statement of `sql` in order for `session` and returns the last one's
    /// outcome, a query's rows as a stream when they can come batch by batch. The request is
    /// listed by SHOW QUERIES while it runs (a stream: until it is read or dropped) and, when
    /// it holds only queries, can be killed and times out.
    pub async fn execute_session(
        &self,
        sql: &str,
        db: &str,
        session: &queries::Session,
    ) -> ExecResult<stream::Reply> {
        fail_on_panic(self.execute_session_unguarded(sql, db, session)).await
    }

    async fn execute_session_unguarded(
        &self,
        sql: &str,
        db: &str,
        session: &queries::Session,
    ) -> ExecResult<stream::Reply> {
        let start = std::time::Instant::now();
        let stmts = tidal_sql::parse(sql).inspect_err(|_| {
            metrics::record(metrics::StatementKind::Invalid, false, start.elapsed())
        })?;
        let killable = stmts.iter().all(queries::is_query);
        let timeout_ms = match (killable, session.timeout_ms) {
            (false, _) => 0,
            (true, Some(ms)) => ms,
            (true, None) => self.default_timeout_ms,
        };
        let reg =
            self.queries
                .register(sql, session, killable, timeout_ms, self.memory_max_bytes)?;
        let reply = reg.run(self.execute_statements(stmts, db)).await?;
        Ok(reply.held_by(reg))
    }

    async fn execute_statements(
        &self,
        stmts: Vec<Statement>,
        db: &str,
    ) -> ExecResult<stream::Reply> {
        let mut db = db.to_string();
        let mut last = stream::Reply::Done(Outcome::none(&db));
        let n = stmts.len();
        for (i, s) in stmts.into_iter().enumerate() {
            // Records the statement when it ends; if this future is dropped first (KILL
            // QUERY, timeout, the client went away), as failed.
            let timer = metrics::StatementTimer::start(metrics::StatementKind::of(&s));
            // Only the last statement's rows reach the caller: a query there may stream.
            let r = match s {
                Statement::Select(q) if i + 1 == n => self.select_stream(&db, &q).await,
                s => self
                    .execute_statement(s, &db)
                    .await
                    .map(stream::Reply::Done),
            };
            let r = match r {
                // A streamed query runs until its rows are read: the stream records it at
                // its end, with its whole duration.
                Ok(stream::Reply::Stream(rows)) => Ok(stream::Reply::Stream(rows.timed(timer))),
                r => {
                    timer.finish(r.is_ok());
                    r
                }
            };
            last = r?;
            db = last.db().to_string();
        }
        Ok(last)
    }

    fn db_of<'a>(&self, explicit: &'a Option<String>, session: &'a str) -> ExecResult<&'a str> {
        match explicit {
            Some(d) => Ok(d.as_str()),
            None if !session.is_empty() => Ok(session),
            None => Err(ExecError::new(
                StatusCode::NoDatabaseSelected,
                "no database selected: USE a database or qualify the name (db.table)",
            )),
        }
    }

    async fn execute_statement(&self, stmt: Statement, db: &str) -> ExecResult<Outcome> {
        match stmt {
            Statement::CreateDatabase {
                name,
                if_not_exists,
                options,
            } => {
                self.client
                    .mnode()?
                    .create_database(v1::CreateDatabaseRequest {
                        name: name.clone(),
                        if_not_exists,
                        options: Some(options_to_wire(&options)),
                    })
                    .await?;
                self.client.invalidate(&name);
                Ok(Outcome::none(db))
            }
            Statement::DropDatabase { name, if_exists } => {
                self.client
                    .mnode()?
                    .drop_database(v1::DropDatabaseRequest {
                        name: name.clone(),
                        if_exists,
                    })
                    .await?;
                self.client.invalidate(&name);
                let db = if db == name { "" } else { db };
                Ok(Outcome::none(db))
            }
            Statement::Use { db: name } => {
                // information_schema is no stored database: its tables are computed per query
                if !name.eq_ignore_ascii_case(tidal_sql::INFORMATION_SCHEMA) {
                    self.client
                        .mnode()?
                        .get_database(v1::GetDatabaseRequest { name: name.clone() })
                        .await?;
                }
                Ok(Outcome::none(&name))
            }
            Statement::CreateStable {
                db: sdb,
                name,
                if_not_exists,
                columns,
                tags,
            } => {
                let sdb = self.db_of(&sdb, db)?.to_string();
                let schema = StableSchema {
                    db: sdb.clone(),
                    name,
                    version: tidal_common::SchemaVersion(1),
                    columns,
                    tags,
                };
                self.client
                    .mnode()?
                    .create_stable(v1::CreateStableRequest {
                        schema: Some(schema_to_wire(&schema)),
                        if_not_exists,
                    })
                    .await?;
                Ok(Outcome::none(db))
            }
            Statement::AlterStable {
                db: sdb,
                name,
                change,
            } => {
                let sdb = self.db_of(&sdb, db)?.to_string();
                alter::alter_stable(self, db, &sdb, &name, change).await
            }
            Statement::AlterTableSetTags {
                table,
                table_pos,
                tags,
            } => alter::set_tags(self, db, &table, table_pos, &tags).await,
            Statement::CreateTables {
                if_not_exists,
                tables,
            } => self.create_tables(db, if_not_exists, tables).await,
            Statement::DropTable { if_exists, tables } => {
                self.drop_tables(db, if_exists, tables).await
            }
            Statement::DropStable { if_exists, name } => {
                self.drop_stable(db, if_exists, name).await
            }
            Statement::Insert { items } => self.insert(db, items).await,
            Statement::Select(q) => self.select(db, &q).await,
            Statement::Explain { analyze, query } => self.explain(db, &query, analyze).await,
            Statement::InsertSelect { target, query } => {
                self.insert_select(db, target, &query).await
            }
            Statement::ShowDatabases => show::databases(self, db).await,
            Statement::ShowStables { db: sdb, like } => {
                let sdb = self.db_of(&sdb, db)?.to_string();
                show::stables(self, db, &sdb, like.as_deref()).await
            }
            Statement::ShowTables { db: sdb, like } => {
                let sdb = self.db_of(&sdb, db)?.to_string();
                show::tables(self, db, &sdb, like.as_deref()).await
            }
            Statement::ShowVgroups { db: sdb } => {
                let sdb = self.db_of(&sdb, db)?.to_string();
                show::vgroups(self, db, &sdb).await
            }
            Statement::ShowDnodes => show::dnodes(self, db).await,
            Statement::ShowMnodes => show::mnodes(self, db).await,
            Statement::ShowTableTags { table } => show::table_tags(self, db, &table).await,
            Statement::ShowTags { table } => show::tags(self, db, &table).await,
            Statement::ShowTableDistributed { table } => {
                show::table_distributed(self, db, &table).await
            }
            Statement::ShowCreateDatabase { name } => show::create_database(self, db, &name).await,
            Statement::ShowCreateTable { table, stable } => {
                show::create_table(self, db, &table, stable).await
            }
            Statement::ShowQueries => {
                let by = queries::current();
                show::queries(db, &self.cluster_queries(by.as_deref()).await?)
            }
            Statement::ShowGrants => show::grants(db),
            Statement::ShowCluster => show::cluster(self, db).await,
            Statement::ShowVnodes { dnode } => show::vnodes(self, db, dnode.as_ref()).await,
            Statement::ShowVariables { dnode: None, like } => {
                show::variables(db, &self.variables, like.as_deref())
            }
            Statement::ShowVariables {
                dnode: Some(id),
                like,
            } => show::dnode_variables(self, db, id, like.as_deref()).await,
            Statement::KillQuery { id } => {
                self.kill_cluster_query(&id, queries::current().as_deref())
                    .await?;
                Ok(Outcome::none(db))
            }
            Statement::Describe { table } => show::describe(self, db, &table).await,
            Statement::User(u) => users::execute(self, u, db).await,
            Statement::AlterDatabase { name, options, set } => {
                let mut m = self.client.mnode()?;
                let cur = m
                    .get_database(v1::GetDatabaseRequest { name: name.clone() })
                    .await?
                    .into_inner();
                let mut o = tidal_proto::convert::options_from_wire(cur.options.as_ref())?;
                for k in &set {
                    match k.as_str() {
                        "cachemodel" => o.cache_model = options.cache_model.clone(),
                        "cachesize" => o.cache_size_mb = options.cache_size_mb,
                        "keep" => o.keep_minutes = options.keep_minutes,
                        "buffer" => o.buffer_mb = options.buffer_mb,
                        "stt_trigger" => o.stt_trigger = options.stt_trigger,
                        "minrows" => o.minrows = options.minrows,
                        _ => {}
                    }
                }
                o.validate()
                    .map_err(|e| ExecError::new(StatusCode::InvalidArgument, e))?;
                m.alter_database(v1::AlterDatabaseRequest {
                    name: name.clone(),
                    options: Some(tidal_proto::convert::options_to_wire(&o)),
                })
                .await?;
                self.client.invalidate(&name);
                Ok(Outcome::none(db))
            }
            Statement::Delete {
                table,
                table_pos,
                selection,
            } => self.delete(db, table, table_pos, selection).await,
            Statement::FlushDatabase { name } => self.flush_or_compact(db, &name, false).await,
            Statement::CompactDatabase { name } => self.flush_or_compact(db, &name, true).await,
        }
    }

    /// FLUSH / COMPACT DATABASE: every vgroup in parallel; returns when all are done.
    /// `DELETE FROM t [WHERE ...]`: planned as a scan of `t` so the time range, the subtable
    /// and the tag/tbname filter come out as they do for SELECT; a condition on any other
    /// column is refused. Each vgroup deletes what the fragment selects; the total is the
    /// affected row count.
    async fn delete(
        &self,
        db: &str,
        table: tidal_sql::ObjectRef,
        pos: tidal_sql::Pos,
        selection: Option<tidal_sql::Expr>,
    ) -> ExecResult<Outcome> {
        let q = tidal_sql::Query {
            distinct: false,
            tags: None,
            projection: vec![tidal_sql::SelectItem::Wildcard(pos)],
            from: tidal_sql::FromItem::Table {
                name: table.clone(),
                alias: None,
                pos,
            },
            selection,
            partition_by: Vec::new(),
            window: None,
            group_by: Vec::new(),
            having: None,
            order_by: Vec::new(),
            slimit: None,
            limit: None,
        };
        let snapshot = catalog::snapshot(self, db, &q).await?;
        let default_db = (!db.is_empty()).then_some(db);
        let plan = tidal_sql::plan_query(&q, default_db, &snapshot)?;
        let [spec] = plan.fragments.as_slice() else {
            return Err(ExecError::new(
                StatusCode::Internal,
                format!("DELETE planned into {} fragments", plan.fragments.len()),
            ));
        };
        if spec.fragment.filter.is_some() {
            return Err(ExecError::new(
                StatusCode::InvalidArgument,
                format!(
                    "DELETE FROM {} at {pos}: the WHERE clause may only use the timestamp, tags and tbname",
                    table.name
                ),
            ));
        }
        let route = self.client.route(&spec.db).await?;
        let targets: Vec<_> = match &spec.target {
            FragmentTarget::AllVgroups => route.vgroups.clone(),
            FragmentTarget::Table(t) => vec![route.vgroup_of(&spec.db, t).clone()],
        };
        let bytes = spec.fragment.to_bytes();
        let mut calls = Vec::with_capacity(targets.len());
        for vg in targets {
            let mut d = self.client.dnode(&vg.addr)?;
            let req = v1::FragmentRequest {
                vnode: Some(v1::VnodeRef {
                    db: spec.db.clone(),
                    vgroup_id: vg.id.0,
                }),
                fragment: bytes.clone(),
                ..Default::default()
            };
            calls.push(async move { d.delete(req).await });
        }
        let mut rows = 0;
        for r in futures::future::join_all(calls).await {
            rows += r?.into_inner().rows;
        }
        Ok(Outcome::affected(db, rows))
    }

    async fn flush_or_compact(&self, db: &str, name: &str, compact: bool) -> ExecResult<Outcome> {
        let route = self.client.refresh_route(name).await?;
        let mut calls = Vec::with_capacity(route.vgroups.len());
        for vg in &route.vgroups {
            let mut c = self.client.dnode(&vg.addr)?;
            let r = v1::VnodeRef {
                db: name.to_string(),
                vgroup_id: vg.id.0,
            };
            calls.push(async move {
                if compact {
                    c.compact(r).await
                } else {
                    c.flush(r).await
                }
            });
        }
        for r in futures::future::join_all(calls).await {
            r?;
        }
        Ok(Outcome::none(db))
    }

    async fn stable_schema(&self, db: &str, name: &str) -> ExecResult<StableSchema> {
        Ok(self.client.stable(db, name).await?)
    }

    async fn precision(&self, db: &str) -> ExecResult<Precision> {
        Ok(self.client.route(db).await?.precision)
    }

    async fn create_tables(
        &self,
        db: &str,
        if_not_exists: bool,
        tables: Vec<tidal_sql::CreateSubtable>,
    ) -> ExecResult<Outcome> {
        // Bind every table first so that a bad one changes nothing.
        let mut per_vgroup: HashMap<(String, VgroupId, String), PendingCreates> = HashMap::new();
        let mut count = 0u64;
        for t in tables {
            let tdb = self.db_of(&t.name.db, db)?.to_string();
            let sdb = self.db_of(&t.stable.db, &tdb)?.to_string();
            if sdb != tdb {
                return Err(ExecError::new(
                    StatusCode::InvalidArgument,
                    format!(
                        "table {}.{} cannot use STABLE {}.{} of another database",
                        tdb, t.name.name, sdb, t.stable.name
                    ),
                ));
            }
            let schema = self.stable_schema(&tdb, &t.stable.name).await?;
            if self.client.stable(&tdb, &t.name.name).await.is_ok() {
                return Err(ExecError::new(
                    StatusCode::TableExists,
                    format!("'{}' is already a STABLE in database '{tdb}'", t.name.name),
                ));
            }
            let route = self.client.route(&tdb).await?;
            let tags = tidal_sql::bind_create_subtable(&t, &schema, route.precision)?;
            let vg = route.vgroup_of(&tdb, &t.name.name).clone();
            let entry = per_vgroup
                .entry((tdb.clone(), vg.id, schema.name.clone()))
                .or_insert_with(|| (vg.addr.clone(), schema.clone(), Vec::new()));
            entry.2.push(v1::SubtableDef {
                name: t.name.name.clone(),
                tags: tags.iter().map(value_to_wire).collect(),
            });
            count += 1;
        }
        for ((tdb, vg, _), (addr, schema, defs)) in per_vgroup {
            self.client
                .dnode(&addr)?
                .create_tables(v1::CreateTablesRequest {
                    vnode: Some(v1::VnodeRef {
                        db: tdb,
                        vgroup_id: vg.0,
                    }),
                    schema: Some(schema_to_wire(&schema)),
                    tables: defs,
                    if_not_exists,
                })
                .await?;
        }
        Ok(Outcome::affected(db, count))
    }

    async fn drop_tables(
        &self,
        db: &str,
        if_exists: bool,
        tables: Vec<ObjectRef>,
    ) -> ExecResult<Outcome> {
        let mut n = 0;
        for t in tables {
            let tdb = self.db_of(&t.db, db)?.to_string();
            if self.client.stable(&tdb, &t.name).await.is_ok() {
                return Err(ExecError::new(
                    StatusCode::InvalidArgument,
                    format!("'{}' is a STABLE: use DROP STABLE {}", t.name, t.name),
                ));
            }
            let route = self.client.route(&tdb).await?;
            let vg = route.vgroup_of(&tdb, &t.name).clone();
            let dropped = self
                .client
                .dnode(&vg.addr)?
                .drop_table(v1::TableRequest {
                    vnode: Some(v1::VnodeRef {
                        db: tdb.clone(),
                        vgroup_id: vg.id.0,
                    }),
                    name: t.name.clone(),
                })
                .await?
                .into_inner()
                .dropped;
            if !dropped && !if_exists {
                return Err(ExecError::new(
                    StatusCode::TableNotFound,
                    format!("table '{}' does not exist in database '{tdb}'", t.name),
                ));
            }
            n += dropped as u64;
        }
        Ok(Outcome::affected(db, n))
    }

    async fn drop_stable(&self, db: &str, if_exists: bool, name: ObjectRef) -> ExecResult<Outcome> {
        let sdb = self.db_of(&name.db, db)?.to_string();
        let dropped = self
            .client
            .mnode()?
            .drop_stable(v1::DropStableRequest {
                db: sdb.clone(),
                name: name.name.clone(),
                if_exists,
            })
            .await?
            .into_inner()
            .dropped;
        self.client.invalidate(&sdb);
        if dropped {
            let route = self.client.route(&sdb).await?;
            for vg in &route.vgroups {
                self.client
                    .dnode(&vg.addr)?
                    .drop_stable(v1::DnodeDropStableRequest {
                        vnode: Some(v1::VnodeRef {
                            db: sdb.clone(),
                            vgroup_id: vg.id.0,
                        }),
                        stable: name.name.clone(),
                    })
                    .await?;
            }
        }
        Ok(Outcome::none(db))
    }

    async fn insert(&self, db: &str, items: Vec<tidal_sql::InsertItem>) -> ExecResult<Outcome> {
        let items = self.split_stable_inserts(db, items).await?;
        // Bind all items before writing anything: one bad row rejects the statement.
        let mut per_db: HashMap<String, (Vec<StableSchema>, Vec<TableWrite>)> = HashMap::new();
        for item in &items {
            let tdb = self.db_of(&item.table.db, db)?.to_string();
            let precision = self.precision(&tdb).await?;
            let schema = match &item.using {
                Some(u) => {
                    let sdb = self.db_of(&u.stable.db, &tdb)?;
                    if sdb != tdb {
                        return Err(ExecError::new(
                            StatusCode::InvalidArgument,
                            format!(
                                "table {tdb}.{} cannot use a STABLE of database {sdb}",
                                item.table.name
                            ),
                        ));
                    }
                    let schema = self.stable_schema(&tdb, &u.stable.name).await?;
                    match self.client.subtable(&tdb, &item.table.name).await? {
                        Some((meta, _)) if meta.stable != schema.name => {
                            return Err(ExecError::new(
                                StatusCode::SchemaMismatch,
                                format!(
                                    "table '{}' already exists and uses STABLE '{}', not '{}'",
                                    item.table.name, meta.stable, schema.name
                                ),
                            ));
                        }
                        Some(_) => {}
                        // As CREATE TABLE: a subtable may not take a STABLE's name.
                        None if self.client.stable(&tdb, &item.table.name).await.is_ok() => {
                            return Err(ExecError::new(
                                StatusCode::TableExists,
                                format!(
                                    "'{}' is already a STABLE in database '{tdb}'",
                                    item.table.name
                                ),
                            ));
                        }
                        None => {}
                    }
                    schema
                }
                None => match self.client.subtable(&tdb, &item.table.name).await? {
                    Some((_, schema)) => schema,
                    None => {
                        let hint = if self.client.stable(&tdb, &item.table.name).await.is_ok() {
                            format!(
                                "'{}' is a STABLE: insert into one of its subtables, or name \
                                 each row's subtable in a tbname column: INSERT INTO {} \
                                 (tbname, ts, ...) VALUES ('name', ...)",
                                item.table.name, item.table.name
                            )
                        } else {
                            format!(
                                "table '{}' does not exist in database '{tdb}' (use INSERT INTO {} USING <stable> TAGS (...) to create it)",
                                item.table.name, item.table.name
                            )
                        };
                        return Err(ExecError::new(StatusCode::TableNotFound, hint));
                    }
                },
            };
            let write = tidal_sql::bind_insert(item, &schema, precision)?;
            let entry = per_db.entry(tdb).or_default();
            if !entry.0.iter().any(|s| s.name == schema.name) {
                entry.0.push(schema);
            }
            entry.1.push(write);
        }
        let mut rows = 0;
        for (tdb, (schemas, writes)) in per_db {
            rows += self.client.write(&tdb, &schemas, writes).await?.rows;
        }
        Ok(Outcome::affected(db, rows))
    }

    /// The items of an INSERT with each `INSERT INTO stable (tbname, ...)` replaced by one
    /// item per subtable it names ([`tidal_sql::split_stable_insert`]).
    async fn split_stable_inserts(
        &self,
        db: &str,
        items: Vec<tidal_sql::InsertItem>,
    ) -> ExecResult<Vec<tidal_sql::InsertItem>> {
        if !items.iter().any(tidal_sql::names_tbname) {
            return Ok(items);
        }
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            if !tidal_sql::names_tbname(&item) {
                out.push(item);
                continue;
            }
            let tdb = self.db_of(&item.table.db, db)?.to_string();
            let schema = match self.client.stable(&tdb, &item.table.name).await {
                Ok(s) => s,
                Err(e) if e.code == StatusCode::StableNotFound => {
                    return Err(ExecError::new(
                        StatusCode::InvalidArgument,
                        format!(
                            "tbname names the subtable of a row only in an INSERT into a \
                             STABLE, and '{}' is not a STABLE of database '{tdb}'",
                            item.table.name
                        ),
                    ))
                }
                Err(e) => return Err(e.into()),
            };
            match tidal_sql::split_stable_insert(&item, &schema)? {
                Some(subs) => out.extend(subs),
                None => out.push(item),
            }
        }
        Ok(out)
    }

    /// Runs a query; when a data node is unreachable or no longer hosts a vgroup (it
    /// restarted, or the map changed), refreshes the routes and runs it again: queries only
    /// read, so a retry cannot change anything.
    async fn select(&self, db: &str, q: &tidal_sql::Query) -> ExecResult<Outcome> {
        self.client
            .with_route_retries(db, q, || self.select_once(db, q))
            .await
    }

    /// Sends every fragment of `plan` to its vgroups in parallel; returns (fragment id, the
    /// vgroup's batch, how long that vgroup took) for each.
    pub(crate) async fn run_fragments(
        &self,
        plan: &tidal_sql::QueryPlan,
    ) -> ExecResult<Vec<(u32, Batch, std::time::Duration)>> {
        Ok(self
            .client
            .gather_fragments(plan, &self.fan_out())
            .await?
            .into_iter()
            .map(|g| (g.fragment, g.batch, g.took))
            .collect())
    }

    async fn select_once(&self, db: &str, q: &tidal_sql::Query) -> ExecResult<Outcome> {
        let snapshot = catalog::snapshot(self, db, q).await?;
        let default_db = (!db.is_empty()).then_some(db);
        let plan = tidal_sql::plan_query(q, default_db, &snapshot)?;
        self.select_gathered(db, plan).await
    }

    /// Runs `plan` by gathering every fragment result, then finishing it on this node.
    async fn select_gathered(&self, db: &str, plan: tidal_sql::QueryPlan) -> ExecResult<Outcome> {
        let precision = self.client.plan_precision(db, &plan).await?;
        let fan = self.fan_out();
        let batch = self.client.finish_gathered(plan, &fan).await?;
        Ok(Outcome::rows(db, batch, precision))
    }

    /// What a fan-out of the statement running on this task runs under: its memory budget,
    /// its deadline, and its count of fragments in flight (SHOW QUERIES).
    fn fan_out(&self) -> tidal_client::query::FanOut {
        let running = queries::current();
        tidal_client::query::FanOut {
            budget: self.budget(),
            timeout: queries::fragment_timeout(),
            on_start: Box::new(move || {
                running
                    .as_ref()
                    .map(|r| Box::new(r.fragment_started()) as Box<dyn Send>)
            }),
        }
    }

    /// The memory budget of the statement running on this task (a fresh one at this node's
    /// limit outside a registered statement).
    fn budget(&self) -> tidal_sql::MemoryBudget {
        match queries::current() {
            Some(r) => r.memory.clone(),
            None => tidal_sql::MemoryBudget::new(self.memory_max_bytes, "query_memory_max_bytes"),
        }
    }
}

#[cfg(test)]
mod panic_tests {
    use super::*;

    #[tokio::test]
    async fn a_panicking_statement_fails_with_an_internal_error() {
        let v: Vec<u8> = Vec::new();
        let index = v.len() + 1;
        let r: ExecResult<u8> = fail_on_panic(async move { Ok(v[index]) }).await;
        let e = r.expect_err("the panic becomes an error");
        assert_eq!(e.code, StatusCode::Internal);
        assert!(
            e.message.contains("internal error") && e.message.contains("index out of bounds"),
            "{}",
            e.message
        );
        let ok: ExecResult<u8> = fail_on_panic(async { Ok(7) }).await;
        assert_eq!(ok.ok(), Some(7));
    }
}
