//! EXPLAIN [ANALYZE]: the plan as text (`tidal_sql::explain`); with ANALYZE the query runs
//! like a SELECT and each vnode fragment's vgroups are timed here, each coordinator operator
//! in `tidal_sql::finish_analyze`.

use super::{catalog, ExecResult, Outcome, SqlService};
use std::collections::HashMap;
use std::time::Duration;
use tidal_common::{Batch, Precision};
use tidal_sql::FragmentStats;

impl SqlService {
    pub(super) async fn explain(
        &self,
        db: &str,
        q: &tidal_sql::Query,
        analyze: bool,
    ) -> ExecResult<Outcome> {
        let snapshot = catalog::snapshot(self, db, q).await?;
        let default_db = (!db.is_empty()).then_some(db);
        let plan = tidal_sql::plan_query(q, default_db, &snapshot)?;
        if !analyze {
            return Ok(Outcome::rows(
                db,
                tidal_sql::explain(&plan),
                Precision::Millis,
            ));
        }
        let mut results: HashMap<u32, Vec<Batch>> = HashMap::new();
        let mut stats: HashMap<u32, FragmentStats> = HashMap::new();
        for (id, batch, took) in self.run_fragments(&plan).await? {
            let s = stats.entry(id).or_insert_with(|| FragmentStats {
                fragment: id,
                vgroups: 0,
                rows: 0,
                max_time: Duration::ZERO,
            });
            s.vgroups += 1;
            s.rows += batch.num_rows() as u64;
            s.max_time = s.max_time.max(took);
            results.entry(id).or_default().push(batch);
        }
        let stats: Vec<FragmentStats> = stats.into_values().collect();
        let text = tidal_sql::finish_analyze(&plan, results.into_iter().collect(), &stats)?;
        Ok(Outcome::rows(db, text, Precision::Millis))
    }
}
