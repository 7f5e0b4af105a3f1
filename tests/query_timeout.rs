//! Queries time out: a session's timeout (the Execute request's `timeout_ms`) and the
//! server's default (TIDAL_QUERY_TIMEOUT_MS) fail a long query with "query timed out after
//! N ms" soon after N ms, whether the server or the client library plans the query;
//! `timeout_ms = 0` means none; short queries and DDL are unaffected;
//! a malformed server setting stops the server with an error that names it.

mod common;

use common::{Cluster, BIN};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tidal_client::{Client, ConnectOptions};
use tidal_common::{StatusCode, Value};

const SUBTABLES: usize = 8;
const ROWS_PER_SUBTABLE: usize = 300_000;
const WRITE_ROWS: usize = 25_000;
/// Every row is its own window, and the filter formats each value four times and defeats
/// block statistics: seconds of work in any build (a plain per-row window scan of these rows
/// ends in under half a second in a release build).
const LONG_QUERY: &str = concat!(
    "SELECT COUNT(*), AVG(v), STDDEV(v), SPREAD(v) FROM m WHERE ",
    "LENGTH(CONCAT(CAST(v*1 AS VARCHAR(24)), CAST(v*3 AS VARCHAR(24)), ",
    "CAST(v*5 AS VARCHAR(24)), CAST(v*7 AS VARCHAR(24)))) > 0 INTERVAL(1a)",
);
/// The server default the cluster runs with.
const SERVER_TIMEOUT_MS: u64 = 700;

/// Runs LONG_QUERY with `timeout_ms` and returns its error and how long it took.
async fn timed_out(c: &Client, timeout_ms: Option<u64>) -> (tidal_client::ClientError, Duration) {
    let start = Instant::now();
    let r = c.execute_with_timeout(LONG_QUERY, "qt", timeout_ms).await;
    let took = start.elapsed();
    let Err(e) = r else {
        panic!("the long query must time out ({timeout_ms:?} ms)");
    };
    (e, took)
}

#[test]
fn queries_time_out() {
    // The cluster's processes inherit the server default.
    std::env::set_var("TIDAL_QUERY_TIMEOUT_MS", SERVER_TIMEOUT_MS.to_string());
    let cluster = Cluster::start(2);
    std::env::remove_var("TIDAL_QUERY_TIMEOUT_MS");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let c = Client::connect(&cluster.mnode_addr).await.unwrap();
        common::load_scan_data(&c, "qt", SUBTABLES, ROWS_PER_SUBTABLE, WRITE_ROWS).await;

        // With no timeout the query runs to its end: it is long enough to time out below.
        let start = Instant::now();
        let full = c
            .execute_with_timeout(LONG_QUERY, "qt", Some(0))
            .await
            .unwrap_or_else(|e| panic!("without a timeout: {e}"));
        let full_took = start.elapsed();
        eprintln!("the long query takes {full_took:?} without a timeout");
        assert!(full.batch.unwrap().num_rows() == ROWS_PER_SUBTABLE);
        assert!(
            full_took >= Duration::from_millis(SERVER_TIMEOUT_MS + 500),
            "the long query took only {full_took:?}: make the data set larger"
        );

        // Planned by the server's frontend, and by the client itself (which asks the server
        // for its default): the same limits, the same error.
        for local in [false, true] {
            let options = ConnectOptions::default().plan_queries_locally(local);
            let c = Client::connect_with(&cluster.mnode_addr, options)
                .await
                .unwrap();
            // The session's timeout.
            let (e, took) = timed_out(&c, Some(300)).await;
            assert_eq!(e.code, StatusCode::Timeout);
            assert_eq!(e.message, "query timed out after 300 ms");
            assert!(
                took >= Duration::from_millis(300) && took < Duration::from_millis(1_500),
                "timed out after {took:?}"
            );

            // The server's default when the session sets none.
            let (e, took) = timed_out(&c, None).await;
            assert_eq!(
                e.message,
                format!("query timed out after {SERVER_TIMEOUT_MS} ms")
            );
            assert!(
                took >= Duration::from_millis(SERVER_TIMEOUT_MS)
                    && took < Duration::from_millis(SERVER_TIMEOUT_MS + 1_500),
                "timed out after {took:?}"
            );
        }

        // Short queries and statements that are not queries are unaffected.
        let n = c
            .execute("SELECT COUNT(*) FROM m", "qt")
            .await
            .unwrap()
            .batch
            .unwrap();
        assert_eq!(
            n.row(0)[0],
            Value::Int((SUBTABLES * ROWS_PER_SUBTABLE) as i64)
        );
        c.execute_with_timeout("CREATE DATABASE other VGROUPS 2", "", Some(1))
            .await
            .unwrap();

        // A timed-out query leaves nothing running behind (one the client ran is listed
        // until its report that it ended, sent when it ends, reaches the server).
        let listed_until = Instant::now() + Duration::from_secs(2);
        loop {
            let list = c.execute("SHOW QUERIES", "").await.unwrap().batch.unwrap();
            if list.num_rows() == 1 {
                break;
            }
            assert!(
                Instant::now() < listed_until,
                "only SHOW QUERIES itself is running: {} listed",
                list.num_rows()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });

    // A malformed server default is refused at start, naming the setting.
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["mnode", "--listen", "127.0.0.1:0", "--data"])
        .arg(dir.path())
        .env("TIDAL_QUERY_TIMEOUT_MS", "soon")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    // The environment variable sets the `query_timeout_ms` key; the error names the key.
    assert!(
        err.contains("query-timeout-ms") || err.contains("TIDAL_QUERY_TIMEOUT_MS"),
        "{err}"
    );
}
