//! Concurrent line-protocol requests share write RPCs per vgroup (`src/frontend/write_merge.rs`),
//! and each still gets its own outcome: every acknowledged row is stored exactly once, a
//! request to a missing database fails alone, and a user without WRITE is refused even while
//! its rows queue next to another user's (rows never travel with someone else's token).

mod common;

use common::{basic_auth, http_request, rows, write_lp, Cluster};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const THREADS: u64 = 16;
const REQUESTS: u64 = 6;
const LINES: u64 = 2000;
const SERIES: u64 = 200;

/// The body of request `r` of thread `t`: `LINES` lines over `SERIES` subtables, each line a
/// (subtable, ts) no other request writes, with `v` = a unique id.
fn body(t: u64, r: u64) -> (String, u64) {
    let mut s = String::new();
    let mut sum = 0;
    for i in 0..LINES {
        let id = (t * REQUESTS + r) * LINES + i;
        sum += id;
        let ts = 1_700_000_000_000 + (r * LINES + i) as i64;
        s.push_str(&format!("m,w=t{t},host=h{} v={id}i {ts}\n", i % SERIES));
    }
    (s, sum)
}

#[test]
fn concurrent_requests_keep_their_own_outcomes() {
    let c = Cluster::start_with_http(2);
    let http = c.http.clone().expect("http");
    c.ok(
        "",
        "CREATE DATABASE wm PRECISION 'ms' VGROUPS 4 WAL_LEVEL 2",
    );
    c.ok("", "CREATE USER reader PASS 'rpw'");
    c.ok("", "GRANT READ ON wm TO reader");
    // The STABLE exists with every key, so the reader's bodies get as far as the write RPC.
    let (s, b) = write_lp(&http, "wm", "&precision=ms", "m,w=x,host=x v=0i 1\n");
    assert_eq!(s, 204, "{b}");

    let acked_rows = Arc::new(AtomicU64::new(0));
    let acked_sum = Arc::new(AtomicU64::new(0));
    let reader_auth = basic_auth("reader", "rpw");
    let mut handles = Vec::new();
    for t in 0..THREADS {
        let http = http.clone();
        let (rows_n, sum) = (acked_rows.clone(), acked_sum.clone());
        let reader_auth = reader_auth.clone();
        handles.push(std::thread::spawn(move || {
            for r in 0..REQUESTS {
                let (text, s) = body(t, r);
                match t % 4 {
                    // A user who may read but not write: refused, whoever writes meanwhile.
                    3 => {
                        let (status, b) = http_request(
                            &http,
                            "POST",
                            "/write?db=wm&precision=ms",
                            &[("Authorization", reader_auth.as_str())],
                            text.as_bytes(),
                        );
                        assert_eq!(status, 403, "reader's write: {b}");
                    }
                    // Every other request of thread 2 goes to a database that does not exist.
                    2 if r % 2 == 1 => {
                        let (status, b) = write_lp(&http, "nosuch", "&precision=ms", &text);
                        assert!((400..500).contains(&status), "{status} {b}");
                    }
                    _ => {
                        let (status, b) = write_lp(&http, "wm", "&precision=ms", &text);
                        assert_eq!(status, 204, "{b}");
                        rows_n.fetch_add(LINES, Ordering::Relaxed);
                        sum.fetch_add(s, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    for h in handles {
        h.join().expect("writer thread");
    }
    let expected_rows = acked_rows.load(Ordering::Relaxed);
    let expected_sum = acked_sum.load(Ordering::Relaxed);
    assert!(expected_rows > 0);
    let out = rows(&c.ok("wm", "SELECT COUNT(*), SUM(v) FROM m WHERE w <> 'x'"));
    assert_eq!(out, vec![format!("{expected_rows},{expected_sum}")]);
    // None of the reader's rows (threads 3, 7, 11, 15) got in.
    let out = rows(&c.ok(
        "wm",
        "SELECT COUNT(*) FROM m WHERE w = 't3' OR w = 't7' OR w = 't11' OR w = 't15'",
    ));
    assert_eq!(out, vec!["0"]);
    // Each acknowledged request's subtables hold exactly its rows.
    let per = rows(&c.ok(
        "wm",
        "SELECT w, COUNT(*) FROM m WHERE w <> 'x' GROUP BY w ORDER BY w",
    ));
    for line in per {
        let (w, n) = line.split_once(',').expect("w,count");
        let t: u64 = w.trim_start_matches('t').parse().expect("thread");
        let requests = if t % 4 == 2 { REQUESTS / 2 } else { REQUESTS };
        assert_eq!(n, (requests * LINES).to_string(), "{line}");
    }
}

/// Tags are left out for subtables this frontend has written before; a subtable dropped since
/// is created again from the same body, with its tags.
#[test]
fn a_known_subtable_dropped_since_is_created_again_with_its_tags() {
    let c = Cluster::start_with_http(1);
    let http = c.http.clone().expect("http");
    c.ok("", "CREATE DATABASE kn PRECISION 'ms' VGROUPS 2");
    let q = "&precision=ms&child_table_tag=id";
    let (s, b) = write_lp(&http, "kn", q, "m,id=dev1,site=a v=1i 1\n");
    assert_eq!(s, 204, "{b}");
    let (s, b) = write_lp(&http, "kn", q, "m,id=dev1,site=a v=2i 2\n");
    assert_eq!(s, 204, "{b}");
    c.ok("kn", "DROP TABLE dev1");
    let (s, b) = write_lp(&http, "kn", q, "m,id=dev1,site=b v=3i 3\n");
    assert_eq!(s, 204, "{b}");
    let out = rows(&c.ok("kn", "SELECT ts, v, id, site FROM m"));
    assert_eq!(out, vec!["1970-01-01 00:00:00.003,3,dev1,b"], "{out:?}");
}
