//! A per-statement catalog snapshot for the planner: the STABLE and subtable metadata that a
//! query names, fetched once (asynchronously) before planning, so planning itself is pure.

use super::{ExecError, ExecResult, SqlService};
use std::collections::HashMap;
use tidal_common::{Batch, Precision, StableSchema, StatusCode, TableMeta};

#[derive(Default)]
pub struct Snapshot {
    stables: HashMap<(String, String), StableSchema>,
    subtables: HashMap<(String, String), (TableMeta, StableSchema)>,
    precisions: HashMap<String, Precision>,
    /// `information_schema` tables by (db as written, name as written).
    system: HashMap<(String, String), Batch>,
    /// The system tables' rows held against the statement's memory budget (a catalog view
    /// over every subtable can be large).
    held: Vec<tidal_sql::Reservation>,
}

impl Snapshot {
    pub async fn load(svc: &SqlService, db: &str, q: &tidal_sql::Query) -> ExecResult<Snapshot> {
        let mut s = Snapshot::default();
        let refs = tidal_sql::referenced_tables(q);
        if refs.is_empty() && !db.is_empty() {
            // A SELECT without FROM evaluates NOW() and TODAY() in the session database's
            // precision; a database that has gone leaves it at the default.
            if let Ok(p) = svc.precision(db).await {
                s.precisions.insert(db.to_string(), p);
            }
        }
        for r in refs {
            let tdb = match &r.db {
                Some(d) => d.clone(),
                None if !db.is_empty() => db.to_string(),
                None => continue, // the planner reports "no database selected"
            };
            if tdb.eq_ignore_ascii_case(tidal_sql::INFORMATION_SCHEMA) {
                let Some(b) = super::show::system_table(svc, &r.name).await? else {
                    return Err(ExecError::new(
                        StatusCode::TableNotFound,
                        format!(
                            "information_schema has no table '{}'; it has {}",
                            r.name,
                            super::show::SYSTEM_TABLES.join(", ")
                        ),
                    ));
                };
                let bytes = tidal_sql::memory::batch_bytes(&b);
                s.held.push(
                    svc.budget()
                        .reserve(bytes, &format!("information_schema.{}", r.name))?,
                );
                s.system.insert((tdb, r.name.clone()), b);
                continue;
            }
            if !s.precisions.contains_key(&tdb) {
                match svc.precision(&tdb).await {
                    Ok(p) => {
                        s.precisions.insert(tdb.clone(), p);
                    }
                    Err(_) => continue, // the planner reports the unknown database
                }
            }
            match svc.table_for_plan(&tdb, &r.name).await? {
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
}

/// A table by name: a STABLE, or a subtable with its STABLE's schema.
pub enum Named {
    Stable(StableSchema),
    Subtable(TableMeta, StableSchema),
}

impl SqlService {
    /// The table `name` of `db`: asked of the mnode as a STABLE (cached, as is a "no"), else
    /// of its vnode as a subtable; `None` when neither has it. The mnode is asked again
    /// before `None`, since its cached "no" may predate the STABLE.
    pub async fn table(&self, db: &str, name: &str) -> ExecResult<Option<Named>> {
        self.lookup(db, name, false).await
    }

    /// [`SqlService::table`] for a plan: a subtable's metadata may come from the client's
    /// cache (a vnode fails a plan whose subtable now belongs to another STABLE, and
    /// [`SqlService::forget_cached_tables`] lets the statement plan again).
    pub async fn table_for_plan(&self, db: &str, name: &str) -> ExecResult<Option<Named>> {
        self.lookup(db, name, true).await
    }

    async fn lookup(&self, db: &str, name: &str, cached: bool) -> ExecResult<Option<Named>> {
        match self.client.stable(db, name).await {
            Ok(schema) => return Ok(Some(Named::Stable(schema))),
            Err(e) if e.code == StatusCode::DatabaseNotFound => return Err(e.into()),
            Err(_) => {}
        }
        if let Some(meta) = cached.then(|| self.client.cached_table(db, name)).flatten() {
            if let Ok(schema) = self.client.stable(db, &meta.stable).await {
                return Ok(Some(Named::Subtable(meta, schema)));
            }
        }
        if let Some((meta, schema)) = self.subtable(db, name).await? {
            self.client.cache_table(db, &meta);
            return Ok(Some(Named::Subtable(meta, schema)));
        }
        match self.client.refresh_stable(db, name).await {
            Ok(schema) => Ok(Some(Named::Stable(schema))),
            Err(e) if e.code == StatusCode::DatabaseNotFound => Err(e.into()),
            Err(_) => Ok(None),
        }
    }

    /// Forgets the cached metadata of the subtables `q` reads; whether any was cached (then
    /// the statement may plan again with fresh metadata).
    pub fn forget_cached_tables(&self, db: &str, q: &tidal_sql::Query) -> bool {
        let mut any = false;
        for t in tidal_sql::referenced_tables(q) {
            any |= self
                .client
                .forget_table(t.db.as_deref().unwrap_or(db), &t.name);
        }
        any
    }
}
