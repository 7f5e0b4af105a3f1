//! The same generated data in a database with VGROUPS 1 and one with VGROUPS 8 must give the
//! same answers to every query: partial aggregates merged from many vnodes, windows assigned
//! on the coordinator and row functions over gathered rows may not depend on the layout.
//! Values are multiples of 1/4 and timestamps are distinct per device, so sums are exact and
//! no result depends on the order in which vnode results arrive.

mod common;

use common::Cluster;

const DEVICES: usize = 12;
const ROWS: usize = 240;
/// 2024-01-01 00:00:00 UTC in ms.
const T0: i64 = 1_704_067_200_000;

fn setup(c: &Cluster, db: &str, vgroups: u32) {
    c.ok(
        "",
        &format!("CREATE DATABASE {db} VGROUPS {vgroups} PRECISION 'ms' KEEP 36500d DURATION 10d"),
    );
    c.ok(
        db,
        "CREATE STABLE m (ts TIMESTAMP, v DOUBLE, n BIGINT, s INT) TAGS (loc VARCHAR(16), gid INT)",
    );
    for d in 0..DEVICES {
        let mut sql = format!(
            "INSERT INTO d{d} USING m TAGS ('{}', {}) VALUES",
            ["north", "south", "east"][d % 3],
            d % 4
        );
        // a deterministic pseudo-random walk; every 13th value is NULL and every 50th row is
        // missing (gaps for FILL and SESSION)
        let mut x: u64 = 0x2545_F491_4F6C_DD1D ^ (d as u64 * 7919);
        for r in 0..ROWS {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if r % 50 == 49 {
                continue;
            }
            let ts = T0 + r as i64 * 10_000 + d as i64;
            let v = if (r + d) % 13 == 0 {
                "NULL".to_string()
            } else {
                format!("{}", (x % 400) as f64 / 4.0)
            };
            let n = (x >> 20) % 1000;
            let s = (x >> 40) % 3;
            sql.push_str(&format!(" ({ts}, {v}, {n}, {s})"));
        }
        c.ok(db, &sql);
    }
}

const QUERIES: &[&str] = &[
    "SELECT COUNT(*), COUNT(v), SUM(v), AVG(v), MIN(v), MAX(v), SUM(n) FROM m",
    "SELECT loc, COUNT(*), SUM(v), AVG(v), SPREAD(v), STDDEV(v), ELAPSED(ts) FROM m GROUP BY loc ORDER BY loc",
    "SELECT tbname, FIRST(v), LAST(v), LAST_ROW(v), MIN(n), MAX(n) FROM m PARTITION BY tbname ORDER BY tbname",
    "SELECT tbname, TWA(v), PERCENTILE(v, 90), APERCENTILE(v, 50), MODE(s), IRATE(v), LEASTSQUARES(v, 1, 1) FROM m PARTITION BY tbname ORDER BY tbname",
    "SELECT _wstart, COUNT(*), AVG(v), MAX(n) FROM m INTERVAL(5m) ORDER BY _wstart",
    "SELECT _wstart, loc, COUNT(*), SUM(v) FROM m PARTITION BY loc INTERVAL(7m, 1m) ORDER BY loc, _wstart",
    "SELECT _wstart, _wend, COUNT(*), SUM(v) FROM m INTERVAL(10m) SLIDING(5m) ORDER BY _wstart",
    "SELECT _wstart, tbname, COUNT(*) FROM m WHERE gid = 1 PARTITION BY tbname INTERVAL(2m) SLIDING(1m) ORDER BY tbname, _wstart",
    "SELECT _wstart, AVG(v), COUNT(*) FROM m WHERE ts >= 1704067200000 AND ts < 1704069600000 INTERVAL(3m) FILL(PREV) ORDER BY _wstart",
    "SELECT _wstart, loc, SUM(v) FROM m WHERE ts >= 1704067200000 AND ts < 1704069600000 PARTITION BY loc INTERVAL(3m) FILL(LINEAR) ORDER BY loc, _wstart",
    "SELECT _wstart, COUNT(*) FROM d3 WHERE ts >= 1704067200000 AND ts < 1704069600000 INTERVAL(40s) FILL(VALUE, -1)",
    "SELECT tbname, _wstart, _wend, COUNT(*), SUM(v), s FROM m PARTITION BY tbname STATE_WINDOW(s) ORDER BY tbname, _wstart",
    "SELECT tbname, _wstart, _wend, COUNT(*) FROM m PARTITION BY tbname SESSION(ts, 15s) ORDER BY tbname, _wstart",
    "SELECT tbname, _wstart, COUNT(*), MAX(v) FROM m PARTITION BY tbname EVENT_WINDOW START WITH v > 80 END WITH v < 20 ORDER BY tbname, _wstart",
    "SELECT tbname, _wstart, COUNT(*), AVG(n) FROM m PARTITION BY tbname COUNT_WINDOW(17, 5) ORDER BY tbname, _wstart",
    "SELECT _wstart, COUNT(*), MAX(c) FROM (SELECT _wstart AS w, COUNT(*) AS c FROM m INTERVAL(1m)) SESSION(w, 1m)",
    "SELECT tbname, ts, DIFF(v), CSUM(n) FROM m WHERE gid = 2 PARTITION BY tbname ORDER BY tbname, ts",
    "SELECT tbname, ts, DERIVATIVE(v, 1m, 0), MAVG(n, 3) FROM m WHERE gid = 3 PARTITION BY tbname ORDER BY tbname, ts",
    "SELECT tbname, ts, STATECOUNT(s, 'EQ', 1), STATEDURATION(s, 'EQ', 1, 1s) FROM m WHERE loc = 'east' PARTITION BY tbname ORDER BY tbname, ts",
    "SELECT tbname, ts, TOP(v, 3) FROM m PARTITION BY tbname ORDER BY tbname, ts",
    "SELECT tbname, ts, BOTTOM(n, 2) FROM m PARTITION BY tbname ORDER BY tbname, ts",
    "SELECT tbname, COUNT(*) FROM (SELECT tbname, SAMPLE(v, 5) FROM m PARTITION BY tbname) GROUP BY tbname ORDER BY tbname",
    "SELECT _irowts, tbname, INTERP(v) FROM m PARTITION BY tbname RANGE('2024-01-01 00:10:00.000', '2024-01-01 00:20:00.000') EVERY(30s) FILL(LINEAR) ORDER BY tbname, _irowts",
    "SELECT _irowts, INTERP(n) FROM d5 RANGE('2024-01-01 00:00:00.000', '2024-01-01 00:30:00.000') EVERY(7s) FILL(PREV)",
    "SELECT tbname, HISTOGRAM(v, 'log_bin', '{\"start\": 1, \"factor\": 3, \"count\": 4, \"infinity\": true}', 0) FROM m PARTITION BY tbname ORDER BY tbname",
    "SELECT tbname, _wstart, ts, BOTTOM(v, 2) FROM m PARTITION BY tbname INTERVAL(10m) ORDER BY tbname, ts",
    "SELECT _wstart, ts, TOP(n, 3) FROM m INTERVAL(15m)",
    "SELECT DISTINCT loc, gid FROM m ORDER BY loc, gid",
    "SELECT tbname, COUNT(*) FROM m PARTITION BY tbname SLIMIT 3 SOFFSET 2",
    "SELECT loc, SUM(CASE WHEN v > 50 THEN 1 ELSE 0 END), MAX(CONCAT(loc, '-', tbname)) FROM m GROUP BY loc ORDER BY loc",
    "SELECT tbname, _wstart, AVG(v) FROM m PARTITION BY tbname INTERVAL(10m) LIMIT 2",
    "SELECT loc, AVG(mv) FROM (SELECT loc, tbname, AVG(v) AS mv FROM m PARTITION BY loc, tbname INTERVAL(5m)) WHERE mv > 40 GROUP BY loc ORDER BY loc",
    "SELECT COUNT(*) FROM m WHERE ts < NOW - 1h AND v BETWEEN 10 AND 60 AND loc IN ('north', 'east')",
    "SELECT loc, COUNT(DISTINCT n), HYPERLOGLOG(n), HYPERLOGLOG(tbname) FROM m GROUP BY loc ORDER BY loc",
    "SELECT loc, MAX(v) FROM m GROUP BY loc UNION ALL SELECT 'all', MAX(v) FROM m UNION SELECT TAGS loc, gid FROM m ORDER BY 1, 2",
];

/// The same text, or numbers within a relative 1e-12: STDDEV merges its vgroups' partials
/// (count, mean, squared deviations), and another split of the rows may move a last digit.
fn same_answer(a: &str, b: &str) -> bool {
    let (la, lb): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    la.len() == lb.len()
        && la.iter().zip(&lb).all(|(x, y)| {
            let (fx, fy): (Vec<&str>, Vec<&str>) = (x.split(',').collect(), y.split(',').collect());
            fx.len() == fy.len()
                && fx.iter().zip(&fy).all(|(p, q)| {
                    p == q
                        || matches!((p.parse::<f64>(), q.parse::<f64>()),
                            (Ok(p), Ok(q)) if (p - q).abs() <= 1e-12 * p.abs().max(q.abs()))
                })
        })
}

#[test]
fn same_answers_1_vs_8_vgroups() {
    let c = Cluster::start(2);
    setup(&c, "one", 1);
    setup(&c, "eight", 8);
    let mut failures = Vec::new();
    for q in QUERIES {
        let a = c.ok("one", q);
        let b = c.ok("eight", q);
        if a.lines().count() < 2 {
            failures.push(format!("{q}: no rows\n{a}"));
        }
        if !same_answer(&a, &b) {
            failures.push(format!("{q}\n1 vgroup:\n{a}\n8 vgroups:\n{b}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // EXPLAIN ANALYZE runs the query: the fragment ran on all 8 vgroups, and every operator
    // reports its rows and time
    let text = c.ok(
        "eight",
        "EXPLAIN ANALYZE SELECT loc, AVG(v) FROM m PARTITION BY loc INTERVAL(10m)",
    );
    assert!(text.contains("Result: 12 rows"), "{text}");
    assert!(text.contains("(vgroups=8 rows="), "{text}");
    assert!(text.contains("Merge partial aggregate"), "{text}");
    assert!(text.contains("time="), "{text}");
    let text = c.ok(
        "one",
        "EXPLAIN SELECT tbname, COUNT(*) FROM m PARTITION BY tbname SESSION(ts, 1m)",
    );
    assert!(text.contains("Window session gap 60000"), "{text}");
    // INSERT INTO .. SELECT across databases of the same precision
    c.ok(
        "eight",
        "CREATE STABLE r (ts TIMESTAMP, c BIGINT) TAGS (loc VARCHAR(16))",
    );
    c.ok(
        "eight",
        "INSERT INTO r_all USING r TAGS ('all') SELECT _wstart, COUNT(*) FROM one.m INTERVAL(10m)",
    );
    assert_eq!(
        c.ok("eight", "SELECT SUM(c) FROM r"),
        c.ok("one", "SELECT COUNT(*) AS `sum(c)` FROM m")
    );
}
