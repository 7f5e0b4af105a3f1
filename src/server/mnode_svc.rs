//! The Mnode gRPC service: a thin edge over `tidal_mnode::Mnode`. It converts wire types,
//! maps errors to status codes, and pushes vnode creation/removal to the data nodes so that
//! CREATE DATABASE returns with its vnodes already open (heartbeats reconcile any miss).
//!
//! Every call is authorized here against the request's principal (docs/SECURITY.md):
//! membership calls need a superuser or a cluster member, database DDL a superuser, STABLE
//! DDL WRITE on the database, lookups READ or WRITE; LIST DATABASES shows only the databases
//! the user holds a privilege on.

use super::auth::{principal, table_to_wire, Verifier};
use std::sync::Arc;
use tidal_common::{DnodeId, StatusCode};
use tidal_mnode::{DatabaseInfo, Mnode, MnodeError, VgroupAssignment};
use tidal_proto::convert::{
    column_defs_from_wire, options_from_wire, options_to_wire, schema_from_wire, schema_to_wire,
};
use tidal_proto::status_error;
use tidal_proto::v1::{self, mnode_server::Mnode as MnodeRpc};
use tonic::{Request, Response, Status};

pub struct MnodeService {
    mnode: Arc<Mnode>,
    client: tidal_client::Client,
    /// Refreshed when a catalog change alters privileges (DROP DATABASE revokes).
    verifier: Option<Arc<Verifier>>,
    /// The address this mnode serves on (the cluster's name in SHOW CLUSTER).
    endpoint: String,
    /// When this process started serving (the cluster's uptime).
    started: std::time::Instant,
}

/// Catalog mutations fsync before returning; run them where blocking is allowed.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

fn to_status(e: MnodeError) -> Status {
    status_error(e.status_code(), e.to_string())
}

impl MnodeService {
    pub fn new(mnode: Arc<Mnode>, client: tidal_client::Client, endpoint: &str) -> MnodeService {
        MnodeService {
            mnode,
            client,
            verifier: None,
            endpoint: endpoint.to_string(),
            started: std::time::Instant::now(),
        }
    }

    /// SHOW CLUSTER's row. The catalog keeps no cluster record of its own: the id is a hash of
    /// the cluster secret (set once at the first start, never changed, and not recoverable
    /// from the hash), the creation time that of the catalog's oldest user or data node.
    fn cluster_info(&self) -> v1::ClusterInfo {
        use sha2::{Digest, Sha256};
        let id = self.mnode.cluster_secret().map_or(0, |secret| {
            let mut h = Sha256::new();
            h.update(b"tidal cluster id\0");
            h.update(&secret);
            let d = h.finalize();
            let mut b = [0u8; 8];
            b.copy_from_slice(&d[..8]);
            // Positive, as TDengine's cluster ids are.
            (u64::from_le_bytes(b) >> 1) as i64
        });
        let created_ms = self
            .mnode
            .users()
            .iter()
            .map(|u| u.created_ms)
            .chain(self.mnode.dnodes().iter().map(|d| d.created_ms))
            .filter(|t| *t > 0)
            .min()
            .unwrap_or(0);
        v1::ClusterInfo {
            id,
            name: self.endpoint.clone(),
            created_ms,
            uptime_seconds: self.started.elapsed().as_secs(),
            version: env!("CARGO_PKG_VERSION").to_string(),
        }
    }

    /// The verifier of this mnode's requests, kept in step with the catalog.
    pub fn with_verifier(mut self, v: Arc<Verifier>) -> MnodeService {
        v.set_table(self.mnode.auth_table());
        if let Some(s) = self.mnode.cluster_secret() {
            v.set_secret(&s);
        }
        self.verifier = Some(v);
        self
    }

    fn dnode_addr(&self, id: DnodeId) -> String {
        self.mnode
            .dnodes()
            .into_iter()
            .find(|d| d.id == id)
            .map(|d| d.addr)
            .unwrap_or_default()
    }

    fn db_to_wire(&self, db: &DatabaseInfo) -> v1::DatabaseInfo {
        let dnodes = self.mnode.dnodes();
        v1::DatabaseInfo {
            name: db.name.clone(),
            options: Some(options_to_wire(&db.options)),
            created_ms: db.created_ms,
            vgroups: db
                .vgroups
                .iter()
                .map(|v| v1::VgroupInfo {
                    id: v.id.0,
                    hash_begin: v.range.begin,
                    hash_end: v.range.end,
                    dnode_id: v.dnode.0,
                    dnode_addr: dnodes
                        .iter()
                        .find(|d| d.id == v.dnode)
                        .map(|d| d.addr.clone())
                        .unwrap_or_default(),
                })
                .collect(),
        }
    }

    /// Sends each vgroup's assignment (options included) to its data node: CreateVnode opens
    /// a missing vnode or applies changed options to an open one. A node that cannot be
    /// reached picks the assignment up at its next heartbeat.
    async fn push_assignments(&self, db: &DatabaseInfo, what: &str) {
        let mut tasks = Vec::new();
        for v in &db.vgroups {
            let a = VgroupAssignment {
                db: db.name.clone(),
                options: db.options.clone(),
                vgroup: v.clone(),
            };
            let wire = self.assignment_to_wire(&a);
            let addr = self.dnode_addr(v.dnode);
            let client = self.client.clone();
            let what = what.to_string();
            tasks.push(tokio::spawn(async move {
                let mut d = client.dnode(&addr).map_err(|e| e.to_string())?;
                d.create_vnode(v1::CreateVnodeRequest {
                    assignment: Some(wire),
                })
                .await
                .map_err(|e| format!("{what} vnode on {addr}: {}", e.message()))
            }));
        }
        for t in tasks {
            match t.await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => {
                    tracing::warn!("{e}; the data node will pick it up at its next heartbeat")
                }
                Err(e) => tracing::warn!("{what} vnode task: {e}"),
            }
        }
    }

    fn assignment_to_wire(&self, a: &VgroupAssignment) -> v1::VgroupAssignment {
        v1::VgroupAssignment {
            db: a.db.clone(),
            options: Some(options_to_wire(&a.options)),
            vgroup: Some(v1::VgroupInfo {
                id: a.vgroup.id.0,
                hash_begin: a.vgroup.range.begin,
                hash_end: a.vgroup.range.end,
                dnode_id: a.vgroup.dnode.0,
                dnode_addr: self.dnode_addr(a.vgroup.dnode),
            }),
        }
    }
}

#[tonic::async_trait]
impl MnodeRpc for MnodeService {
    async fn register_dnode(
        &self,
        req: Request<v1::RegisterDnodeRequest>,
    ) -> Result<Response<v1::RegisterDnodeResponse>, Status> {
        principal(&req)?.require_superuser("register a data node")?;
        let r = req.into_inner();
        if r.addr.is_empty() {
            return Err(status_error(
                StatusCode::InvalidArgument,
                "a data node must give its address",
            ));
        }
        let id = blocking(|| self.mnode.register_dnode(&r.addr, r.known_id.map(DnodeId)))
            .map_err(to_status)?;
        Ok(Response::new(v1::RegisterDnodeResponse {
            dnode_id: id.0,
            // The data node verifies tokens and signs its own calls with it.
            cluster_secret: self.mnode.cluster_secret().unwrap_or_default(),
        }))
    }

    async fn heartbeat(
        &self,
        req: Request<v1::HeartbeatRequest>,
    ) -> Result<Response<v1::HeartbeatResponse>, Status> {
        principal(&req)?.require_superuser("heartbeat as a data node")?;
        let r = req.into_inner();
        let list = self
            .mnode
            .heartbeat(DnodeId(r.dnode_id))
            .map_err(to_status)?;
        // The user table only when the data node's copy is not the current one.
        let auth = (r.auth_epoch != self.mnode.auth_epoch())
            .then(|| table_to_wire(&self.mnode.auth_table()));
        Ok(Response::new(v1::HeartbeatResponse {
            assignments: list.iter().map(|a| self.assignment_to_wire(a)).collect(),
            auth,
        }))
    }

    async fn create_database(
        &self,
        req: Request<v1::CreateDatabaseRequest>,
    ) -> Result<Response<v1::DatabaseInfo>, Status> {
        principal(&req)?.require_superuser("create databases")?;
        let r = req.into_inner();
        let options = options_from_wire(r.options.as_ref())?;
        let existed = self.mnode.database(&r.name).is_some();
        let db = blocking(|| {
            self.mnode
                .create_database(&r.name, options, r.if_not_exists)
        })
        .map_err(to_status)?;
        if !existed {
            // Open the vnodes now so that the first write does not race the heartbeat.
            self.push_assignments(&db, "create").await;
        }
        Ok(Response::new(self.db_to_wire(&db)))
    }

    async fn alter_database(
        &self,
        req: Request<v1::AlterDatabaseRequest>,
    ) -> Result<Response<v1::DatabaseInfo>, Status> {
        principal(&req)?.require_superuser("alter databases")?;
        let r = req.into_inner();
        let options = options_from_wire(r.options.as_ref())?;
        let db = blocking(|| self.mnode.alter_database(&r.name, options)).map_err(to_status)?;
        // Apply on the data nodes now (a node that is down applies it at its next heartbeat),
        // so the statement returns with the change in force.
        self.push_assignments(&db, "alter").await;
        Ok(Response::new(self.db_to_wire(&db)))
    }

    async fn drop_database(
        &self,
        req: Request<v1::DropDatabaseRequest>,
    ) -> Result<Response<v1::DropDatabaseResponse>, Status> {
        principal(&req)?.require_superuser("drop databases")?;
        let r = req.into_inner();
        let dropped =
            blocking(|| self.mnode.drop_database(&r.name, r.if_exists)).map_err(to_status)?;
        // Privileges on the dropped database went with it.
        if let Some(v) = &self.verifier {
            v.set_table(self.mnode.auth_table());
        }
        let info = dropped.as_ref().map(|db| self.db_to_wire(db));
        if let Some(db) = &dropped {
            for v in &db.vgroups {
                let addr = self.dnode_addr(v.dnode);
                if let Ok(mut d) = self.client.dnode(&addr) {
                    if let Err(e) = d
                        .drop_vnode(v1::VnodeRef {
                            db: db.name.clone(),
                            vgroup_id: v.id.0,
                        })
                        .await
                    {
                        tracing::warn!(
                            "drop vnode {} on {addr}: {}; heartbeat will retry",
                            v.id,
                            e.message()
                        );
                    }
                }
            }
        }
        Ok(Response::new(v1::DropDatabaseResponse {
            dropped: dropped.is_some(),
            info,
        }))
    }

    async fn get_database(
        &self,
        req: Request<v1::GetDatabaseRequest>,
    ) -> Result<Response<v1::DatabaseInfo>, Status> {
        let p = principal(&req)?;
        let name = req.into_inner().name;
        p.require_any(&name)?;
        match self.mnode.database(&name) {
            Some(db) => Ok(Response::new(self.db_to_wire(&db))),
            None => Err(status_error(
                StatusCode::DatabaseNotFound,
                format!("database '{name}' does not exist"),
            )),
        }
    }

    async fn list_databases(
        &self,
        req: Request<v1::Empty>,
    ) -> Result<Response<v1::ListDatabasesResponse>, Status> {
        let p = principal(&req)?;
        Ok(Response::new(v1::ListDatabasesResponse {
            databases: self
                .mnode
                .databases()
                .iter()
                .filter(|d| p.can_see(&d.name))
                .map(|d| self.db_to_wire(d))
                .collect(),
        }))
    }

    async fn create_stable(
        &self,
        req: Request<v1::CreateStableRequest>,
    ) -> Result<Response<v1::StableSchema>, Status> {
        let p = principal(&req)?;
        let r = req.into_inner();
        let Some(schema) = r.schema.as_ref() else {
            return Err(status_error(StatusCode::InvalidArgument, "missing schema"));
        };
        p.require_write(&schema.db)?;
        let schema = schema_from_wire(schema)?;
        let created =
            blocking(|| self.mnode.create_stable(schema, r.if_not_exists)).map_err(to_status)?;
        Ok(Response::new(schema_to_wire(&created)))
    }

    async fn alter_stable(
        &self,
        req: Request<v1::AlterStableRequest>,
    ) -> Result<Response<v1::StableSchema>, Status> {
        let p = principal(&req)?;
        let r = req.into_inner();
        p.require_write(&r.db)?;
        let change = tidal_mnode::StableAlteration {
            add_columns: column_defs_from_wire(&r.add_columns)?,
            add_tags: column_defs_from_wire(&r.add_tags)?,
            modify_columns: column_defs_from_wire(&r.modify_columns)?,
            modify_tags: column_defs_from_wire(&r.modify_tags)?,
            rename_tags: r
                .rename_tags
                .iter()
                .map(|t| (t.from.clone(), t.to.clone()))
                .collect(),
        };
        let altered =
            blocking(|| self.mnode.alter_stable_with(&r.db, &r.name, change)).map_err(to_status)?;
        Ok(Response::new(schema_to_wire(&altered)))
    }

    async fn drop_stable(
        &self,
        req: Request<v1::DropStableRequest>,
    ) -> Result<Response<v1::DropStableResponse>, Status> {
        let p = principal(&req)?;
        let r = req.into_inner();
        p.require_write(&r.db)?;
        let dropped =
            blocking(|| self.mnode.drop_stable(&r.db, &r.name, r.if_exists)).map_err(to_status)?;
        Ok(Response::new(v1::DropStableResponse {
            dropped: dropped.is_some(),
        }))
    }

    async fn get_stable(
        &self,
        req: Request<v1::GetStableRequest>,
    ) -> Result<Response<v1::StableSchema>, Status> {
        let p = principal(&req)?;
        let r = req.into_inner();
        p.require_any(&r.db)?;
        if self.mnode.database(&r.db).is_none() {
            return Err(status_error(
                StatusCode::DatabaseNotFound,
                format!("database '{}' does not exist", r.db),
            ));
        }
        match self.mnode.stable(&r.db, &r.name) {
            Some(s) => Ok(Response::new(schema_to_wire(&s))),
            None => Err(status_error(
                StatusCode::StableNotFound,
                format!("STABLE '{}' does not exist in database '{}'", r.name, r.db),
            )),
        }
    }

    async fn list_stables(
        &self,
        req: Request<v1::ListStablesRequest>,
    ) -> Result<Response<v1::ListStablesResponse>, Status> {
        let p = principal(&req)?;
        let db = req.into_inner().db;
        p.require_any(&db)?;
        if self.mnode.database(&db).is_none() {
            return Err(status_error(
                StatusCode::DatabaseNotFound,
                format!("database '{db}' does not exist"),
            ));
        }
        Ok(Response::new(v1::ListStablesResponse {
            stables: self.mnode.stables(&db).iter().map(schema_to_wire).collect(),
        }))
    }

    async fn list_dnodes(
        &self,
        req: Request<v1::Empty>,
    ) -> Result<Response<v1::ListDnodesResponse>, Status> {
        // Any authenticated user may see the cluster's members (SHOW DNODES).
        principal(&req)?;
        Ok(Response::new(v1::ListDnodesResponse {
            dnodes: self
                .mnode
                .dnodes()
                .iter()
                .map(|d| v1::DnodeInfo {
                    id: d.id.0,
                    addr: d.addr.clone(),
                    vnodes: d.vnodes,
                    alive: d.alive,
                    created_ms: d.created_ms,
                    last_heartbeat_ms: d.last_heartbeat_ms,
                })
                .collect(),
        }))
    }

    async fn get_cluster(
        &self,
        req: Request<v1::Empty>,
    ) -> Result<Response<v1::ClusterInfo>, Status> {
        // Like SHOW DNODES: any authenticated user.
        principal(&req)?;
        Ok(Response::new(self.cluster_info()))
    }
}
