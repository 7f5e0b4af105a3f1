//! A fragment over a short time range (at most an hour) runs on the data node's request
//! thread within a time budget, and one that runs out of it starts again on the blocking
//! pool: both answer exactly. Which thread ran what is read from `tidal_dnode_fragments_total`
//! in GET /metrics.

mod common;

use common::{dnode_fragments as fragments, Cluster};
use tidal_client::{Client, ConnectOptions};
use tidal_common::Value;

const SUBTABLES: usize = 8;
/// 1 ms apart: 100 s of rows per subtable, all inside one short range.
const ROWS_PER_SUBTABLE: usize = 100_000;
const T0: i64 = 1_600_000_000_000;

fn ints(c: &tidal_common::Batch) -> Vec<Vec<Value>> {
    (0..c.num_rows()).map(|i| c.row(i)).collect()
}

#[test]
fn short_fragments_run_inline_and_long_ones_move_to_the_pool() {
    let cluster = Cluster::start_with_http(2);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        // Server-planned, so that each statement is one fragment call per data node.
        let options = ConnectOptions::default().plan_queries_locally(false);
        let c = Client::connect_with(&cluster.mnode_addr, options)
            .await
            .unwrap();
        common::load_scan_data(&c, "sf", SUBTABLES, ROWS_PER_SUBTABLE, 25_000).await;
        let run = |sql: String| {
            let c = c.clone();
            async move {
                c.execute(&sql, "sf")
                    .await
                    .unwrap_or_else(|e| panic!("{sql}: {e}"))
                    .batch
                    .expect("rows")
            }
        };

        // 100 ms of each subtable: a few hundred rows per vnode.
        let small = format!(
            "SELECT k, COUNT(*), SUM(v) FROM m WHERE ts >= {T0} AND ts < {} PARTITION BY k ORDER BY k",
            T0 + 100
        );
        // The same rows, read over a range longer than an hour: always on the pool.
        let wide = format!(
            "SELECT k, COUNT(*), SUM(v) FROM m WHERE ts >= {} AND ts < {} PARTITION BY k ORDER BY k",
            T0 - 7_200_000,
            T0 + 100
        );
        let want = run(wide.clone()).await;
        assert_eq!(want.num_rows(), SUBTABLES);
        for r in ints(&want) {
            // rows 0..100: v = r * 0.5, summing to 0.5 * 4950
            assert_eq!(r[1..], [Value::Int(100), Value::Float(2475.0)], "{r:?}");
        }
        let (inline0, pooled0) = (fragments(&cluster, "request"), fragments(&cluster, "pool"));
        for _ in 0..10 {
            assert_eq!(ints(&run(small.clone()).await), ints(&want));
        }
        let (inline1, pooled1) = (fragments(&cluster, "request"), fragments(&cluster, "pool"));
        // Each run is a call per vgroup; on a busy machine a run may pass its budget.
        assert!(
            inline1 > inline0,
            "short fragments ran on the request thread ({inline0} → {inline1}, pool {pooled0} → {pooled1})"
        );

        // Every row of the 100 s, with a filter that block statistics cannot answer: far
        // more than the budget's work, so it moves to the pool and answers in full.
        let long = format!(
            "SELECT COUNT(*), SUM(v) FROM m WHERE ts >= {T0} AND ts < {} AND v * 2 >= 0",
            T0 + ROWS_PER_SUBTABLE as i64
        );
        let b = run(long).await;
        // v cycles through 0, 0.5 .. 499.5 (sum 249750 per 1000 rows)
        let sum = 249_750.0 * (ROWS_PER_SUBTABLE / 1000 * SUBTABLES) as f64;
        assert_eq!(
            b.row(0),
            [
                Value::Int((SUBTABLES * ROWS_PER_SUBTABLE) as i64),
                Value::Float(sum)
            ]
        );
        assert_eq!(
            fragments(&cluster, "request"),
            inline1,
            "the long fragment did not end on the request thread"
        );
        assert_eq!(
            fragments(&cluster, "pool") - pooled1,
            2,
            "it ran again on the pool of each vgroup"
        );
    });
}
