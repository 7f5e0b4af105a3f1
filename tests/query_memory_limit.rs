//! A query that would pass its memory limit fails with a clear error and the node stays
//! healthy: with `query_memory_max_bytes` at 4 MiB (TIDAL_QUERY_MEMORY_MAX_BYTES) a GROUP BY
//! with a group per row fails on the data nodes ("GROUP BY state needs more than ..."), a
//! full sort of 400,000 rows fails on the coordinator, both as RESOURCE_EXHAUSTED; queries
//! within the limit keep answering on the same nodes before and after, and a malformed
//! setting stops the server with an error that names the key.

mod common;

use common::{Cluster, BIN};
use std::process::{Command, Stdio};
use tidal_client::Client;
use tidal_common::{StatusCode, Value};

const SUBTABLES: usize = 4;
const ROWS_PER_SUBTABLE: usize = 100_000;
const WRITE_ROWS: usize = 25_000;
const MEMORY_MAX_BYTES: u64 = 4 << 20;

async fn count(c: &Client) -> Value {
    c.execute("SELECT COUNT(*), SUM(v) FROM m", "ml")
        .await
        .unwrap()
        .batch
        .unwrap()
        .row(0)[0]
        .clone()
}

#[test]
fn queries_past_the_memory_limit_fail_and_the_node_stays_healthy() {
    std::env::set_var("TIDAL_QUERY_MEMORY_MAX_BYTES", MEMORY_MAX_BYTES.to_string());
    let cluster = Cluster::start(2);
    std::env::remove_var("TIDAL_QUERY_MEMORY_MAX_BYTES");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let c = Client::connect(&cluster.mnode_addr).await.unwrap();
        common::load_scan_data(&c, "ml", SUBTABLES, ROWS_PER_SUBTABLE, WRITE_ROWS).await;
        let total = Value::Int((SUBTABLES * ROWS_PER_SUBTABLE) as i64);
        assert_eq!(count(&c).await, total);

        // A group per timestamp: 100,000 groups per vgroup, far more state than 4 MiB.
        let e = c
            .execute("SELECT ts, COUNT(*) FROM m GROUP BY ts", "ml")
            .await
            .expect_err("a GROUP BY past the limit");
        assert_eq!(e.code, StatusCode::ResourceExhausted, "{}", e.message);
        assert_eq!(
            e.message,
            format!(
                "query memory limit exceeded: GROUP BY state needs more than {MEMORY_MAX_BYTES} \
                 bytes (query_memory_max_bytes); add a filter or raise the limit"
            )
        );
        // The same node answers the next query.
        assert_eq!(count(&c).await, total);

        // A full sort gathers every row on the coordinator: refused there, streamed or not.
        let sort = "SELECT ts, v FROM m ORDER BY v DESC";
        let e = c
            .execute(sort, "ml")
            .await
            .expect_err("a sort past the limit");
        common::assert_memory_limit_error(&e, MEMORY_MAX_BYTES, "sort");
        let e = match c.query_stream(sort, "ml").await {
            Err(e) => e,
            Ok(mut s) => loop {
                match s.next_batch().await {
                    Err(e) => break e,
                    Ok(Some(_)) => {}
                    Ok(None) => panic!("a streamed sort past the limit succeeded"),
                }
            },
        };
        assert_eq!(e.code, StatusCode::ResourceExhausted, "{}", e.message);

        // Within the limit: the same sort over a filter, a top-k over everything, and the
        // GROUP BY over few groups.
        let b = c
            .execute(
                "SELECT ts, v FROM m WHERE v > 499 ORDER BY v DESC, ts",
                "ml",
            )
            .await
            .unwrap()
            .batch
            .unwrap();
        assert_eq!(b.num_rows(), SUBTABLES * ROWS_PER_SUBTABLE / 1000);
        assert_eq!(b.row(0)[1], Value::Float(499.5));
        let top = c
            .execute("SELECT ts, v FROM m ORDER BY v DESC, ts LIMIT 3", "ml")
            .await
            .unwrap()
            .batch
            .unwrap();
        assert_eq!(top.num_rows(), 3);
        assert!((0..3).all(|r| top.row(r)[1] == Value::Float(499.5)));
        let g = c
            .execute("SELECT k, COUNT(*) FROM m GROUP BY k ORDER BY k", "ml")
            .await
            .unwrap()
            .batch
            .unwrap();
        assert_eq!(g.num_rows(), SUBTABLES);
        assert_eq!(g.row(0)[1], Value::Int(ROWS_PER_SUBTABLE as i64));
        assert_eq!(count(&c).await, total);
    });

    // A malformed limit is refused at start, naming the key.
    let out = Command::new(BIN)
        .args([
            "mnode",
            "--data",
            "/nonexistent/x",
            "--listen",
            "127.0.0.1:0",
        ])
        .env("TIDAL_QUERY_MEMORY_MAX_BYTES", "lots")
        .stdin(Stdio::null())
        .output()
        .expect("run tidal");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("query-memory-max-bytes") || err.contains("QUERY_MEMORY_MAX_BYTES"),
        "{err}"
    );
}
