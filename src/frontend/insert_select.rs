//! `INSERT INTO t [USING ..] [(cols)] SELECT ...`: runs the query like a SELECT and writes
//! its rows through the ordinary INSERT path (binding, routing, auto-create with USING).
//! Timestamps are converted from the source database's precision to the target's.

use super::{ExecResult, Outcome, SqlService};
use tidal_common::{Precision, Value};
use tidal_sql::{InsertItem, InsertValue};

impl SqlService {
    pub(super) async fn insert_select(
        &self,
        db: &str,
        mut target: InsertItem,
        q: &tidal_sql::Query,
    ) -> ExecResult<Outcome> {
        let out = self.select(db, q).await?;
        let Some(batch) = out.batch else {
            return Ok(Outcome {
                batch: None,
                affected_rows: 0,
                precision: out.precision,
                db: db.to_string(),
            });
        };
        let tdb = self.db_of(&target.table.db, db)?.to_string();
        let to = self.precision(&tdb).await?;
        let convert =
            |t: i64| -> i64 { to.from_nanos(t.saturating_mul(nanos_per_unit(out.precision))) };
        target.rows = (0..batch.num_rows())
            .map(|i| {
                batch
                    .row(i)
                    .into_iter()
                    .map(|v| {
                        InsertValue::Value(match v {
                            Value::Timestamp(t) => Value::Timestamp(convert(t)),
                            v => v,
                        })
                    })
                    .collect()
            })
            .collect();
        if target.rows.is_empty() {
            return Ok(Outcome {
                batch: None,
                affected_rows: 0,
                precision: to,
                db: db.to_string(),
            });
        }
        self.insert(db, vec![target]).await
    }
}

fn nanos_per_unit(p: Precision) -> i64 {
    1_000_000_000 / p.per_second()
}
