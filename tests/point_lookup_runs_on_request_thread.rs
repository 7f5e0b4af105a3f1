//! A point lookup (LAST_ROW of a few subtables picked by a tag equality, no row filter, no
//! time range) runs on the data node's request thread, and answers exactly what the blocking
//! pool answers: after newer and older writes, a same-timestamp overwrite, and a DROP. A tag
//! value shared by many subtables, a time range and a column filter stay on the pool. Which
//! thread ran what is read from `tidal_dnode_fragments_total` in GET /metrics.

mod common;

use common::{dnode_fragments as fragments, rows, Cluster};

const T0: i64 = 1_451_606_400_000;
const TABLES: usize = 120;

fn fmt_ts(ts: i64) -> String {
    tidal_common::Precision::Millis.format_timestamp(ts)
}

#[test]
fn point_lookups_run_inline_and_answer_as_the_pool_does() {
    let c = Cluster::start_with_http(2);
    c.ok("", "CREATE DATABASE pl VGROUPS 4 CACHEMODEL 'both'");
    c.ok(
        "pl",
        "CREATE STABLE m (ts TIMESTAMP, v DOUBLE, n INT) TAGS (name VARCHAR(16), fleet VARCHAR(8))",
    );
    // Every table gets rows 0..5 written newest first; table i's last value is i + 0.5.
    for chunk in (0..TABLES).collect::<Vec<_>>().chunks(40) {
        let mut sql = String::from("INSERT INTO");
        for &i in chunk {
            sql.push_str(&format!(" t{i} USING m TAGS ('n{i}', 'big') VALUES"));
            for k in (0..5).rev() {
                sql.push_str(&format!(
                    " ({}, {}, {k})",
                    T0 + k * 1000,
                    i as f64 + k as f64 / 8.0
                ));
            }
        }
        c.ok("pl", &sql);
    }
    let one =
        "SELECT last_row(ts), last_row(v), last_row(n) FROM m WHERE name IN ('n7') GROUP BY name";
    let want = |ts: i64, v: &str, n: i64| vec![format!("{},{v},{n}", fmt_ts(ts))];
    // The first lookup builds the STABLE's snapshot (and with it the first tag's index) on
    // the pool.
    assert_eq!(rows(&c.ok("pl", one)), want(T0 + 4000, "7.5", 4));
    let (inline0, pooled0) = (fragments(&c, "request"), fragments(&c, "pool"));
    for _ in 0..3 {
        assert_eq!(rows(&c.ok("pl", one)), want(T0 + 4000, "7.5", 4));
    }
    let (inline1, pooled1) = (fragments(&c, "request"), fragments(&c, "pool"));
    // Four vnodes, each asked three times, all where the call arrived.
    assert_eq!(inline1 - inline0, 12, "point lookups on the request thread");
    assert_eq!(pooled1, pooled0, "no point lookup went to the pool");

    // A newer row, an older one and a same-timestamp overwrite, each seen at once.
    c.ok(
        "pl",
        &format!("INSERT INTO t7 VALUES ({}, 70.0, 9)", T0 + 9000),
    );
    assert_eq!(rows(&c.ok("pl", one)), want(T0 + 9000, "70", 9));
    c.ok(
        "pl",
        &format!("INSERT INTO t7 VALUES ({}, 71.0, 1)", T0 + 8000),
    );
    assert_eq!(rows(&c.ok("pl", one)), want(T0 + 9000, "70", 9));
    c.ok(
        "pl",
        &format!("INSERT INTO t7 VALUES ({}, 72.0, NULL)", T0 + 9000),
    );
    assert_eq!(
        rows(&c.ok("pl", one)),
        vec![format!("{},72,NULL", fmt_ts(T0 + 9000))]
    );
    let two = "SELECT name, last_row(ts), last_row(v) FROM m WHERE name IN ('n3', 'n9') GROUP BY name ORDER BY name";
    assert_eq!(
        rows(&c.ok("pl", two)),
        vec![
            format!("n3,{},3.5", fmt_ts(T0 + 4000)),
            format!("n9,{},9.5", fmt_ts(T0 + 4000)),
        ]
    );
    let inline2 = fragments(&c, "request");
    assert!(inline2 > inline1, "the later lookups ran inline");

    // Not point lookups: many subtables share the tag value, a time range, a column filter.
    let pooled2 = fragments(&c, "pool");
    let fleet =
        "SELECT count(*) FROM (SELECT last_row(ts), name FROM m WHERE fleet = 'big' GROUP BY name)";
    assert_eq!(rows(&c.ok("pl", fleet)), vec![TABLES.to_string()]);
    let ranged = format!(
        "SELECT last_row(ts), last_row(v) FROM m WHERE name IN ('n7') AND ts < {} GROUP BY name",
        T0 + 3500
    );
    assert_eq!(
        rows(&c.ok("pl", &ranged)),
        vec![format!("{},7.375", fmt_ts(T0 + 3000))]
    );
    let filtered =
        "SELECT last_row(ts), last_row(v) FROM m WHERE name IN ('n5') AND n < 2 GROUP BY name";
    assert_eq!(
        rows(&c.ok("pl", filtered)),
        vec![format!("{},5.125", fmt_ts(T0 + 1000))]
    );
    assert_eq!(
        fragments(&c, "request"),
        inline2,
        "none of these ran inline"
    );
    assert_eq!(
        fragments(&c, "pool") - pooled2,
        12,
        "each ran on the pool of every vnode"
    );

    // A dropped table is gone from the next lookup (a new snapshot, built on the pool).
    c.ok("pl", "DROP TABLE t7");
    assert_eq!(rows(&c.ok("pl", one)), Vec::<String>::new());
    for _ in 0..2 {
        assert_eq!(rows(&c.ok("pl", one)), Vec::<String>::new());
    }
    assert!(
        fragments(&c, "request") > inline2,
        "lookups after the drop ran inline again"
    );
}
