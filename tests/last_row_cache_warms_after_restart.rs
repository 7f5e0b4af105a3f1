//! A data node that restarts warms its vnodes' last-row caches in the background: once the
//! warm-up has run, the first LAST_ROW queries after the restart are all cache hits, and they
//! give the rows written before the crash (flushed ones and ones only in the WAL).

mod common;

use common::{metric_sum, rows, Cluster, READINGS};
use std::time::{Duration, Instant};

const TABLES: usize = 12;

/// Sum over the data nodes of a per-vgroup metric of database `lw`.
fn metric(c: &Cluster, name: &str) -> u64 {
    metric_sum(c, &format!("{name}{{db=\"lw\""), "")
}

#[test]
fn the_first_last_row_queries_after_a_restart_hit_a_warmed_cache() {
    let mut c = Cluster::start_with_http(1);
    c.ok("", "CREATE DATABASE lw VGROUPS 2 CACHEMODEL 'last_row'");
    c.ok("lw", READINGS);
    for t in 0..TABLES {
        c.ok(
            "lw",
            &format!(
                "INSERT INTO r_truck_{t} USING readings TAGS ('truck_{t}', 'South', 'd', 'H-2', 'v1.0', 1500, 150, 12) VALUES (1451606400000, {t}, 1, 1, 1, 1, 1, 1) (1451606410000, {t}.5, 2, 2, 2, 2, 2, 2)"
            ),
        );
    }
    c.ok("lw", "FLUSH DATABASE lw");
    // The newest row of half the subtables is only in the WAL when the node dies.
    for t in (0..TABLES).step_by(2) {
        c.ok(
            "lw",
            &format!("INSERT INTO r_truck_{t} VALUES (1451606420000, {t}.25, NULL, 3, 3, 3, 3, 3)"),
        );
    }
    c.restart_dnode(0);

    let deadline = Instant::now() + Duration::from_secs(30);
    while metric(&c, "tidal_vnode_last_row_cache_entries") < TABLES as u64 {
        assert!(
            Instant::now() < deadline,
            "the restarted node warmed {} of {TABLES} subtables' entries",
            metric(&c, "tidal_vnode_last_row_cache_entries")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(metric(&c, "tidal_vnode_last_row_cache_misses_total"), 0);

    let got = rows(&c.ok(
        "lw",
        "SELECT tbname, LAST_ROW(ts), LAST_ROW(latitude), LAST_ROW(longitude) FROM readings PARTITION BY tbname ORDER BY tbname",
    ));
    let mut want: Vec<(String, String)> = (0..TABLES)
        .map(|t| {
            let row = if t % 2 == 0 {
                format!("2016-01-01 00:00:20.000,{t}.25,NULL")
            } else {
                format!("2016-01-01 00:00:10.000,{t}.5,2")
            };
            (format!("r_truck_{t}"), row)
        })
        .collect();
    want.sort();
    let want: Vec<String> = want.into_iter().map(|(n, r)| format!("{n},{r}")).collect();
    assert_eq!(got, want);
    assert_eq!(
        metric(&c, "tidal_vnode_last_row_cache_misses_total"),
        0,
        "every subtable's LAST_ROW came from the warmed cache"
    );
    assert!(metric(&c, "tidal_vnode_last_row_cache_hits_total") >= TABLES as u64);
}
