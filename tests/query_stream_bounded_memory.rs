//! A large scan streams with bounded memory: on a cluster whose nodes may hold only 8 MiB per
//! query, `SELECT * FROM m` over 2,000,000 rows (about 50 MB) arrives through
//! `Client::query_stream` in batches of at most 4096 rows, complete and in order. While the
//! reader pauses after the first batch the query stays in SHOW QUERIES with its fragments in
//! flight: the coordinator and the data nodes wait for the reader instead of finishing into
//! memory. The same result through the collecting `Execute` passes the 8 MiB limit and fails
//! with the memory-limit error, and the coordinator's peak RSS grows by a fraction of the
//! result while streaming it.

mod common;

use common::Cluster;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tidal_client::Client;
use tidal_common::{StatusCode, Value};

const SUBTABLES: usize = 8;
const ROWS_PER_SUBTABLE: usize = 250_000;
const WRITE_ROWS: usize = 25_000;
const MEMORY_MAX_BYTES: u64 = 8 << 20;
const SCAN: &str = "SELECT * FROM m";

/// The row of SHOW QUERIES for `sql`, as (state, fragments in flight).
async fn listed(c: &Client, sql: &str) -> Option<(String, i64)> {
    let list = c.execute("SHOW QUERIES", "").await.unwrap().batch.unwrap();
    let col = |name: &str| list.fields.iter().position(|f| f.name == name).unwrap();
    (0..list.num_rows()).map(|r| list.row(r)).find_map(|row| {
        (row[col("sql")] == Value::Str(sql.into())).then(|| {
            let state = match &row[col("state")] {
                Value::Str(s) => s.clone(),
                v => panic!("state {v:?}"),
            };
            (state, row[col("sub_num")].as_i64().unwrap_or(-1))
        })
    })
}

/// The peak resident memory of a process (VmHWM), in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .expect("VmHWM");
    let kb: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("VmHWM kB");
    kb * 1024
}

#[test]
fn a_large_scan_streams_with_bounded_memory() {
    std::env::set_var("TIDAL_QUERY_MEMORY_MAX_BYTES", MEMORY_MAX_BYTES.to_string());
    let cluster = Cluster::start(2);
    std::env::remove_var("TIDAL_QUERY_MEMORY_MAX_BYTES");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let c = Client::connect(&cluster.mnode_addr).await.unwrap();
        common::load_scan_data(&c, "qs", SUBTABLES, ROWS_PER_SUBTABLE, WRITE_ROWS).await;
        let total = SUBTABLES * ROWS_PER_SUBTABLE;
        let coordinator = cluster.mnode.as_ref().unwrap().child.id();
        let rss_before = peak_rss(coordinator);

        let reader = Client::connect(&cluster.mnode_addr).await.unwrap();
        let mut rows = reader
            .query_stream_with_timeout(SCAN, "qs", Some(0))
            .await
            .unwrap();
        let names: Vec<&str> = rows.fields().iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["ts", "v", "k"]);
        let first_at = Instant::now();
        let first = rows.next_batch().await.unwrap().expect("a first batch");
        assert!(first.num_rows() > 0 && first.num_rows() <= 4096);

        // The reader pauses: the query waits for it, still running with its fragments open.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let observer = Client::connect(&cluster.mnode_addr).await.unwrap();
        let (state, fragments) = listed(&observer, SCAN)
            .await
            .expect("a paused stream is still a running query");
        assert_eq!(state, "executing", "fragments in flight: {fragments}");
        assert!(fragments >= 1, "{fragments}");

        // Everything arrives, in bounded batches, each subtable's rows in time order.
        let mut n = first.num_rows();
        let mut batches = 1;
        let mut last_ts: HashMap<i64, i64> = HashMap::new();
        let mut check = |b: &tidal_common::Batch| {
            for r in 0..b.num_rows() {
                let row = b.row(r);
                let (Value::Timestamp(ts), Value::Int(k)) = (&row[0], &row[2]) else {
                    panic!("row {row:?}");
                };
                if let Some(prev) = last_ts.insert(*k, *ts) {
                    assert!(*ts > prev, "subtable {k}: {ts} after {prev}");
                }
            }
        };
        check(&first);
        while let Some(b) = rows.next_batch().await.unwrap() {
            assert!(b.num_rows() <= 4096, "a batch of {} rows", b.num_rows());
            check(&b);
            n += b.num_rows();
            batches += 1;
        }
        let rss_after = peak_rss(coordinator);
        eprintln!(
            "{n} rows in {batches} batches, {:?} after the first batch; coordinator peak RSS \
             {} MB before, {} MB after",
            first_at.elapsed(),
            rss_before >> 20,
            rss_after >> 20
        );
        assert_eq!(n, total);
        assert_eq!(rows.affected_rows(), Some(total as u64));
        // The result as batches is about 48 MB (ts, v, k: 8 bytes each per row), more on
        // the wire; the coordinator's peak grew by a fraction of it.
        assert!(
            rss_after.saturating_sub(rss_before) < 32 << 20,
            "the coordinator's peak RSS grew from {rss_before} to {rss_after} bytes"
        );
        assert_eq!(last_ts.len(), SUBTABLES);
        assert!(
            listed(&observer, SCAN).await.is_none(),
            "still listed after its end"
        );

        // Dropping a stream half-way ends the query.
        let mut partial = reader.query_stream(SCAN, "qs").await.unwrap();
        partial.next_batch().await.unwrap().expect("a batch");
        drop(partial);
        let start = Instant::now();
        while listed(&observer, SCAN).await.is_some() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "a dropped stream still runs"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }

        // Collecting the same result needs more than the limit: the stream never held it.
        let e = c
            .execute(SCAN, "qs")
            .await
            .expect_err("a collected 50 MB result");
        assert_eq!(e.code, StatusCode::ResourceExhausted, "{}", e.message);
        assert!(
            e.message.starts_with("query memory limit exceeded: ")
                && e.message.contains(&format!(
                    "{MEMORY_MAX_BYTES} bytes (query_memory_max_bytes)"
                )),
            "{}",
            e.message
        );

        // A LIMIT stops the scan early; streamed and collected answers agree.
        let limited = "SELECT ts, v FROM m WHERE k = 3 LIMIT 5 OFFSET 2";
        let streamed = c
            .query_stream(limited, "qs")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let collected = c.execute(limited, "qs").await.unwrap();
        let (s, b) = (streamed.batch.unwrap(), collected.batch.unwrap());
        assert_eq!(s.num_rows(), 5);
        assert_eq!(
            (0..5).map(|r| s.row(r)).collect::<Vec<_>>(),
            (0..5).map(|r| b.row(r)).collect::<Vec<_>>()
        );
        assert_eq!(s.row(0)[0], Value::Timestamp(1_600_000_000_002));

        // Statements without rows come through the stream too.
        let r = c
            .query_stream("CREATE DATABASE IF NOT EXISTS qs2", "")
            .await
            .unwrap();
        assert!(!r.has_rows());
        let r = r.collect().await.unwrap();
        assert!(r.batch.is_none());
    });
}
