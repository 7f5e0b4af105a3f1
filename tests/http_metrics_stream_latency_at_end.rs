//! A streamed SELECT is counted in the statement metrics when its stream ends, with its whole
//! duration: while its reader pauses mid-result it is not counted yet; once drained, the
//! `select` count has grown by one and the latency histogram's sum by at least the time the
//! stream took. A stream its reader drops half-way is counted as a failed SELECT, also with
//! its duration until then.

mod common;

use common::{http_request, Cluster};
use std::time::{Duration, Instant};
use tidal_client::Client;

const SUBTABLES: usize = 4;
const ROWS_PER_SUBTABLE: usize = 100_000;
const WRITE_ROWS: usize = 25_000;
/// Far more than the buffers between the data nodes and the reader (a few batches and the
/// HTTP/2 windows): the stream cannot end before its reader reads.
const SCAN: &str = "SELECT * FROM m";
const PAUSE: Duration = Duration::from_millis(1500);

/// The mnode frontend's SELECT metrics: (ok, errors, latency count, latency sum in seconds).
fn select_metrics(http: &str) -> (f64, f64, f64, f64) {
    let (status, body) = http_request(http, "GET", "/metrics", &[], b"");
    assert_eq!(status, 200, "{body}");
    let sample = |name: &str, extra: &str| {
        body.lines()
            .find(|l| {
                l.starts_with(&format!("{name}{{"))
                    && l.contains("role=\"mnode\"")
                    && l.contains("kind=\"select\"")
                    && l.contains(extra)
            })
            .and_then(|l| l.rsplit(' ').next())
            .map_or(0.0, |v| v.parse::<f64>().expect("a number"))
    };
    (
        sample("tidal_sql_statements_total", "result=\"ok\""),
        sample("tidal_sql_statements_total", "result=\"error\""),
        sample("tidal_sql_statement_duration_seconds_count", ""),
        sample("tidal_sql_statement_duration_seconds_sum", ""),
    )
}

#[test]
fn a_streamed_select_is_counted_at_its_end_with_its_duration() {
    let cluster = Cluster::start_with_http(2);
    let http = cluster.http.clone().expect("http");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let c = Client::connect(&cluster.mnode_addr).await.unwrap();
        common::load_scan_data(&c, "ms", SUBTABLES, ROWS_PER_SUBTABLE, WRITE_ROWS).await;
        let total = SUBTABLES * ROWS_PER_SUBTABLE;

        let (ok0, err0, count0, sum0) = select_metrics(&http);
        let opened = Instant::now();
        let mut rows = c.query_stream(SCAN, "ms").await.unwrap();
        let mut n = rows
            .next_batch()
            .await
            .unwrap()
            .expect("a first batch")
            .num_rows();
        tokio::time::sleep(PAUSE).await;
        assert_eq!(
            select_metrics(&http),
            (ok0, err0, count0, sum0),
            "a stream still being read is not counted yet"
        );
        while let Some(b) = rows.next_batch().await.unwrap() {
            n += b.num_rows();
        }
        let took = opened.elapsed();
        assert_eq!(n, total);
        let (ok1, err1, count1, sum1) = select_metrics(&http);
        assert_eq!((ok1, err1, count1), (ok0 + 1.0, err0, count0 + 1.0));
        assert!(
            sum1 - sum0 >= PAUSE.as_secs_f64(),
            "the SELECT's latency ({} s) covers the paused stream ({took:?})",
            sum1 - sum0
        );
        assert!(
            sum1 - sum0 <= took.as_secs_f64() + 1.0,
            "{} s for a stream of {took:?}",
            sum1 - sum0
        );

        // Dropped half-way: counted as failed once the coordinator sees the reader gone.
        let mut partial = c.query_stream(SCAN, "ms").await.unwrap();
        partial.next_batch().await.unwrap().expect("a batch");
        tokio::time::sleep(PAUSE).await;
        assert_eq!(select_metrics(&http).1, err1, "not counted while open");
        drop(partial);
        let start = Instant::now();
        let (ok2, err2, count2, sum2) = loop {
            let m = select_metrics(&http);
            if m.1 > err1 {
                break m;
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "a dropped stream was never counted"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!((ok2, err2, count2), (ok1, err1 + 1.0, count1 + 1.0));
        assert!(sum2 - sum1 >= PAUSE.as_secs_f64(), "{} s", sum2 - sum1);
    });
}
