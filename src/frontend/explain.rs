//! EXPLAIN [ANALYZE]: the plan as text (`tidal_sql::explain`); with ANALYZE the query runs
//! like a SELECT and each vnode fragment's vgroups are timed here, each coordinator operator
//! in `tidal_sql::finish_analyze`.

use super::{ExecError, ExecResult, Outcome, Snapshot, SqlService};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tidal_common::{Batch, Precision, StatusCode};
use tidal_proto::convert::batch_from_wire;
use tidal_proto::v1;
use tidal_sql::{FragmentStats, FragmentTarget};

impl SqlService {
    pub(super) async fn explain(
        &self,
        db: &str,
        q: &tidal_sql::Query,
        analyze: bool,
    ) -> ExecResult<Outcome> {
        let snapshot = Snapshot::load(self, db, q).await?;
        let default_db = (!db.is_empty()).then_some(db);
        let plan = tidal_sql::plan_query(q, default_db, &snapshot)?;
        if !analyze {
            return Ok(Outcome::rows(
                db,
                tidal_sql::explain(&plan),
                Precision::Millis,
            ));
        }
        let mut tasks = Vec::new();
        for spec in &plan.fragments {
            let route = self.client.route(&spec.db).await?;
            let targets: Vec<_> = match &spec.target {
                FragmentTarget::AllVgroups => route.vgroups.clone(),
                FragmentTarget::Table(t) => vec![route.vgroup_of(&spec.db, t).clone()],
            };
            let bytes = spec.fragment.to_bytes();
            for vg in targets {
                let mut d = self.client.dnode(&vg.addr)?;
                let req = v1::FragmentRequest {
                    vnode: Some(v1::VnodeRef {
                        db: spec.db.clone(),
                        vgroup_id: vg.id.0,
                    }),
                    fragment: bytes.clone(),
                };
                let id = spec.id;
                tasks.push(tokio::spawn(async move {
                    let start = Instant::now();
                    let r = d.exec_fragment(req).await;
                    (id, r, start.elapsed())
                }));
            }
        }
        let mut results: HashMap<u32, Vec<Batch>> = HashMap::new();
        let mut stats: HashMap<u32, FragmentStats> = HashMap::new();
        for t in tasks {
            let (id, res, took) = t
                .await
                .map_err(|e| ExecError::new(StatusCode::Internal, e.to_string()))?;
            let batch = batch_from_wire(res?.into_inner())?;
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
