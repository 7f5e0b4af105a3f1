//! A per-statement catalog snapshot for the planner: the client library's
//! [`tidal_client::query::Snapshot`] of the user tables a query names, plus the
//! `information_schema` tables only a frontend can build.

use super::{ExecError, ExecResult, SqlService};
pub use tidal_client::query::{Named, Snapshot};
use tidal_common::StatusCode;

/// The snapshot `q` (run with session database `db`) plans with.
pub async fn snapshot(svc: &SqlService, db: &str, q: &tidal_sql::Query) -> ExecResult<Snapshot> {
    let mut s = Snapshot::load(&svc.client, db, q).await?;
    // CURRENT_USER(): the statement's registered user (every statement runs registered)
    if let Some(r) = super::queries::current() {
        s.set_user(r.user.clone());
    }
    for r in tidal_sql::referenced_tables(q) {
        let tdb = match &r.db {
            Some(d) => d.clone(),
            None if !db.is_empty() => db.to_string(),
            None => continue,
        };
        if !tdb.eq_ignore_ascii_case(tidal_sql::INFORMATION_SCHEMA) {
            continue;
        }
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
        let held = svc
            .budget()
            .reserve(bytes, &format!("information_schema.{}", r.name))?;
        s.add_system(tdb, r.name.clone(), b, held);
    }
    Ok(s)
}

impl SqlService {
    /// The table `name` of `db` (see [`tidal_client::Client::table`]).
    pub async fn table(&self, db: &str, name: &str) -> ExecResult<Option<Named>> {
        Ok(self.client.table(db, name).await?)
    }
}
