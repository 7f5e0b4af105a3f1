//! LAST_ROW and LAST answered from the last-row cache equal the answers computed here from the
//! written data: with writes out of order, repeated timestamps, NULLs, a column filter (the
//! latest matching row), after FLUSH, COMPACT, and a kill -9 + restart of the data node
//! (the cache is rebuilt lazily), with CACHEMODEL 'both' and 'none'.

mod common;

use common::{rows, Cluster};
use std::collections::BTreeMap;

const T0: i64 = 1_451_606_400_000;

type Row = (Option<f64>, Option<i64>);

/// (table, ts, v, n) rows: out of order, with repeats and NULLs.
fn data() -> Vec<(usize, i64, Row)> {
    let mut out = Vec::new();
    let mut x: u64 = 7;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..600 {
        let t = (next() % 6) as usize;
        let ts = T0 + (next() % 400) as i64 * 1000;
        let v = (next() % 5 != 0).then(|| (next() % 1000) as f64 / 10.0);
        let n = (next() % 4 != 0).then(|| (next() % 100) as i64);
        out.push((t, ts, (v, n)));
    }
    out
}

fn fmt_v(v: Option<f64>) -> String {
    v.map(|x| format!("{x}")).unwrap_or_else(|| "NULL".into())
}
fn fmt_n(v: Option<i64>) -> String {
    v.map(|x| x.to_string()).unwrap_or_else(|| "NULL".into())
}
fn fmt_ts(ts: i64) -> String {
    tidal_common::Precision::Millis.format_timestamp(ts)
}

fn expected(
    model: &BTreeMap<usize, BTreeMap<i64, Row>>,
) -> (Vec<String>, Vec<String>, Vec<String>) {
    let mut last_row = Vec::new();
    let mut last = Vec::new();
    let mut filtered = Vec::new();
    for (t, rows) in model {
        if let Some((ts, (v, n))) = rows.iter().next_back() {
            last_row.push(format!("t{t},{},{},{}", fmt_ts(*ts), fmt_v(*v), fmt_n(*n)));
        }
        let lv = rows.values().rev().find_map(|r| r.0);
        let ln = rows.values().rev().find_map(|r| r.1);
        last.push(format!("t{t},{},{}", fmt_v(lv), fmt_n(ln)));
        if let Some((ts, (v, _))) = rows.iter().rev().find(|(_, r)| r.1.is_some_and(|n| n < 20)) {
            filtered.push(format!("t{t},{},{}", fmt_ts(*ts), fmt_v(*v)));
        }
    }
    (last_row, last, filtered)
}

fn check(c: &Cluster, db: &str, model: &BTreeMap<usize, BTreeMap<i64, Row>>, when: &str) {
    let (want_row, want_last, want_filtered) = expected(model);
    let q = "SELECT tbname, last_row(ts), v, n FROM m PARTITION BY tbname ORDER BY tbname";
    assert_eq!(rows(&c.ok(db, q)), want_row, "{db} {when}: {q}");
    let q = "SELECT tbname, last(v), last(n) FROM m PARTITION BY tbname ORDER BY tbname";
    assert_eq!(rows(&c.ok(db, q)), want_last, "{db} {when}: {q}");
    let q =
        "SELECT tbname, last_row(ts), v FROM m WHERE n < 20 PARTITION BY tbname ORDER BY tbname";
    assert_eq!(rows(&c.ok(db, q)), want_filtered, "{db} {when}: {q}");
    // One subtable, as single-last-loc asks.
    let q = "SELECT last_row(ts), last_row(v), last_row(n) FROM m WHERE loc IN ('l3') GROUP BY loc";
    let want: Vec<String> = want_row
        .iter()
        .filter(|l| l.starts_with("t3,"))
        .map(|l| l.trim_start_matches("t3,").to_string())
        .collect();
    assert_eq!(rows(&c.ok(db, q)), want, "{db} {when}: {q}");
}

#[test]
fn last_row_and_last_from_the_cache_match_the_data() {
    let mut c = Cluster::start(1);
    for (db, model) in [("cboth", "both"), ("cnone", "none")] {
        c.ok(
            "",
            &format!("CREATE DATABASE {db} VGROUPS 2 CACHEMODEL '{model}' STT_TRIGGER 2"),
        );
        c.ok(
            db,
            "CREATE STABLE m (ts TIMESTAMP, v DOUBLE, n BIGINT) TAGS (loc VARCHAR(8))",
        );
    }
    let mut model: BTreeMap<usize, BTreeMap<i64, Row>> = BTreeMap::new();
    let all = data();
    for (k, chunk) in all.chunks(100).enumerate() {
        for db in ["cboth", "cnone"] {
            let mut sql = String::from("INSERT INTO");
            for (t, ts, (v, n)) in chunk {
                sql.push_str(&format!(
                    " t{t} USING m TAGS ('l{t}') VALUES ({ts}, {}, {})",
                    fmt_v(*v),
                    fmt_n(*n)
                ));
            }
            c.ok(db, &sql);
        }
        for (t, ts, r) in chunk {
            model.entry(*t).or_default().insert(*ts, *r);
        }
        for db in ["cboth", "cnone"] {
            check(&c, db, &model, &format!("after chunk {k}"));
            if k % 2 == 1 {
                c.ok("", &format!("FLUSH DATABASE {db}"));
                check(&c, db, &model, &format!("after flush {k}"));
            }
            if k == 3 {
                c.ok("", &format!("COMPACT DATABASE {db}"));
                check(&c, db, &model, "after compact");
            }
        }
        if k == 4 {
            c.kill_dnode(0);
            c.restart_dnode(0);
            for db in ["cboth", "cnone"] {
                // The restarted node may take a moment to report its vnodes.
                for attempt in 0..100 {
                    match c.sql(db, "SELECT COUNT(*) FROM m") {
                        Ok(_) => break,
                        Err(e) => assert!(attempt < 99, "data node did not come back: {e}"),
                    }
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
                check(&c, db, &model, "after kill -9 and restart");
            }
        }
    }
}
