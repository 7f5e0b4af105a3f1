//! `GET /metrics` with a data node that does not answer: a hung node (SIGSTOP) and then a
//! dead one (SIGKILL) are reported as `tidal_dnode_up{..} 0` within the per-node timeout, and
//! the live node's vnodes are still reported.

mod common;

use common::{http_request, Cluster};
use std::time::{Duration, Instant};

/// Scrapes and returns the body and how long it took.
fn scrape(http: &str) -> (String, Duration) {
    let start = Instant::now();
    let (status, body) = http_request(http, "GET", "/metrics", &[], b"");
    assert_eq!(status, 200, "{body}");
    (body, start.elapsed())
}

/// The value of `tidal_dnode_up` for the node at `addr`.
fn up(body: &str, addr: &str) -> &'static str {
    let needle = format!("endpoint=\"{addr}\"}} ");
    let line = body
        .lines()
        .find(|l| l.starts_with("tidal_dnode_up{") && l.contains(&needle))
        .unwrap_or_else(|| panic!("no tidal_dnode_up for {addr}:\n{body}"));
    match line.rsplit(' ').next() {
        Some("1") => "1",
        Some("0") => "0",
        other => panic!("bad value {other:?} in {line}"),
    }
}

/// Data nodes with at least one vnode of `db` reported.
fn vnode_series(body: &str, db: &str) -> usize {
    body.lines()
        .filter(|l| {
            l.starts_with("tidal_vnode_rows_written_total{") && l.contains(&format!("db=\"{db}\""))
        })
        .count()
}

#[test]
fn dead_and_hung_dnodes_are_down_and_the_scrape_still_answers() {
    let mut c = Cluster::start_with_http(2);
    let http = c.http.clone().expect("http");
    c.ok("", "CREATE DATABASE dd VGROUPS 2");
    let addrs: Vec<String> = c
        .dnodes
        .iter()
        .map(|p| p.as_ref().expect("dnode").addr.clone())
        .collect();
    let (body, _) = scrape(&http);
    assert_eq!(up(&body, &addrs[0]), "1");
    assert_eq!(up(&body, &addrs[1]), "1");
    assert_eq!(vnode_series(&body, "dd"), 2);

    // A hung node: connections are accepted by the kernel but nothing answers.
    let pid = c.dnodes[1].as_ref().expect("dnode").child.id() as libc::pid_t;
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    let (body, took) = scrape(&http);
    // Resume before asserting, so that a failure does not leave a stopped process behind.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    assert!(took < Duration::from_secs(10), "scrape took {took:?}");
    assert_eq!(up(&body, &addrs[1]), "0", "{body}");
    assert_eq!(up(&body, &addrs[0]), "1");
    let live = vnode_series(&body, "dd");
    assert!(
        live >= 1,
        "the live node's vnodes are still reported:\n{body}"
    );

    // A dead node.
    c.kill_dnode(1);
    let (body, took) = scrape(&http);
    assert!(took < Duration::from_secs(10), "scrape took {took:?}");
    assert_eq!(up(&body, &addrs[1]), "0");
    assert_eq!(up(&body, &addrs[0]), "1");
    assert_eq!(vnode_series(&body, "dd"), live);
}
