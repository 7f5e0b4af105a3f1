//! A 100,000-element IN list (a statement of about 1 MiB) plans and runs in linear time on a
//! real cluster: `name IN (...)` over 20,000 subtables (half of them listed), its NOT IN, and
//! a projection, each answered in a few seconds in a debug build. Tokenizing (positions were
//! recounted from the line start per token), evaluating the list (a linear search per row)
//! and the per-subtable tag filter (the list searched once per subtable) made this quadratic:
//! minutes, not seconds.

mod common;

use common::Cluster;
use std::time::{Duration, Instant};
use tidal_client::Client;
use tidal_common::{Column, ColumnData, TableWrite, Value};

const ELEMENTS: usize = 100_000;
const SUBTABLES: usize = 20_000;
const WRITE_TABLES: usize = 5_000;
/// Generous for a debug build on a shared machine; the quadratic code took over a minute.
const BOUND: Duration = Duration::from_secs(20);

async fn timed(c: &Client, sql: &str) -> (tidal_common::Batch, Duration) {
    let start = Instant::now();
    let r = c.execute(sql, "il").await.unwrap_or_else(|e| panic!("{e}"));
    (r.batch.unwrap(), start.elapsed())
}

#[test]
fn in_list_of_100k_names_plans_and_runs_in_linear_time() {
    let cluster = Cluster::start(2);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let c = Client::connect(&cluster.mnode_addr).await.unwrap();
        c.execute("CREATE DATABASE il VGROUPS 2", "").await.unwrap();
        c.execute(
            "CREATE STABLE m (ts TIMESTAMP, v DOUBLE) TAGS (name VARCHAR(16))",
            "il",
        )
        .await
        .unwrap();
        let schema = c.stable("il", "m").await.unwrap();
        // Subtable s_i is tagged `t_i` and holds one row with v = i.
        for start in (0..SUBTABLES).step_by(WRITE_TABLES) {
            let writes = (start..start + WRITE_TABLES)
                .map(|i| TableWrite {
                    table: format!("s_{i}"),
                    stable: "m".into(),
                    tags: Some(vec![Value::Str(format!("t_{i}"))]),
                    columns: vec![
                        Column::new(ColumnData::Timestamp(vec![1_000 + i as i64])),
                        Column::new(ColumnData::Float(vec![i as f64])),
                    ],
                })
                .collect();
            c.write("il", std::slice::from_ref(&schema), writes)
                .await
                .unwrap();
        }

        // Every even name up to 2 x ELEMENTS: half the subtables, and names that match none.
        let list: Vec<String> = (0..ELEMENTS).map(|i| format!("'t_{}'", 2 * i)).collect();
        let list = list.join(",");
        let count = format!("SELECT COUNT(*), SUM(v) FROM m WHERE name IN ({list})");
        assert!(
            count.len() > 1_000_000 && count.len() <= 1 << 20,
            "{}",
            count.len()
        );
        let (b, took) = timed(&c, &count).await;
        eprintln!("{} bytes: IN took {took:?}", count.len());
        let even = (SUBTABLES / 2) as i64;
        let even_sum: f64 = (0..SUBTABLES).step_by(2).map(|i| i as f64).sum();
        assert_eq!(b.row(0), vec![Value::Int(even), Value::Float(even_sum)]);
        assert!(took < BOUND, "IN over {ELEMENTS} names took {took:?}");

        let not_in = format!("SELECT COUNT(*) FROM m WHERE name NOT IN ({list})");
        let (b, took) = timed(&c, &not_in).await;
        eprintln!("NOT IN took {took:?}");
        assert_eq!(b.row(0)[0], Value::Int(even));
        assert!(took < BOUND, "NOT IN over {ELEMENTS} names took {took:?}");

        // A row filter with the list (numbers) and a projection of the rows.
        let nums: Vec<String> = (0..ELEMENTS).map(|i| (3 * i).to_string()).collect();
        let rows = format!(
            "SELECT tbname, v FROM m WHERE v IN ({}) ORDER BY v LIMIT 5",
            nums.join(",")
        );
        let (b, took) = timed(&c, &rows).await;
        eprintln!("v IN took {took:?}");
        let got: Vec<Value> = (0..b.num_rows()).map(|r| b.row(r)[1].clone()).collect();
        let want: Vec<Value> = [0.0, 3.0, 6.0, 9.0, 12.0].map(Value::Float).to_vec();
        assert_eq!(got, want);
        assert!(took < BOUND, "v IN over {ELEMENTS} numbers took {took:?}");
    });
}
