//! A per-statement catalog snapshot for the planner: the STABLE and subtable metadata that a
//! query names, fetched once (asynchronously) before planning, so planning itself is pure.

use super::{ExecResult, SqlService};
use std::collections::HashMap;
use tidal_common::{Precision, StableSchema, TableMeta};

#[derive(Default)]
pub struct Snapshot {
    stables: HashMap<(String, String), StableSchema>,
    subtables: HashMap<(String, String), (TableMeta, StableSchema)>,
    precisions: HashMap<String, Precision>,
}

impl Snapshot {
    pub async fn load(svc: &SqlService, db: &str, q: &tidal_sql::Query) -> ExecResult<Snapshot> {
        let mut s = Snapshot::default();
        for r in tidal_sql::referenced_tables(q) {
            let tdb = match &r.db {
                Some(d) => d.clone(),
                None if !db.is_empty() => db.to_string(),
                None => continue, // the planner reports "no database selected"
            };
            if !s.precisions.contains_key(&tdb) {
                match svc.precision(&tdb).await {
                    Ok(p) => {
                        s.precisions.insert(tdb.clone(), p);
                    }
                    Err(_) => continue, // the planner reports the unknown database
                }
            }
            match svc.client.stable(&tdb, &r.name).await {
                Ok(schema) => {
                    s.stables.insert((tdb, r.name.clone()), schema);
                }
                Err(_) => {
                    if let Some(t) = svc.subtable(&tdb, &r.name).await? {
                        s.subtables.insert((tdb, r.name.clone()), t);
                    }
                }
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
}
