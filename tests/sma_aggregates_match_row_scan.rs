//! Aggregates answered from block statistics (SMA) equal the same aggregates computed from
//! rows: the same queries run while the rows are in memtables, after FLUSH (STT files), and
//! after COMPACT (data files whose whole blocks are answered from the SMA). COUNT/SUM/MIN/MAX
//! are also checked against values computed here from the generated data.

mod common;

use common::Cluster;

const TABLES: usize = 4;
const ROWS: i64 = 1500;
const T0: i64 = 1_451_606_400_000; // 2016-01-01

/// Deterministic rows: every 7th `v` NULL, `n` an integer, timestamps every 10 s.
fn value(t: usize, i: i64) -> (Option<f64>, i64) {
    let v = if i % 7 == 3 {
        None
    } else {
        Some(((i * 37 + t as i64 * 11) % 1000) as f64 / 4.0)
    };
    (v, (i * 13 + t as i64) % 500 - 250)
}

const QUERIES: &[&str] = &[
    "SELECT COUNT(*), COUNT(v), SUM(v), MIN(v), MAX(v), AVG(v), SUM(n), MIN(n), MAX(n) FROM m",
    "SELECT tbname, COUNT(*), SUM(n), MAX(v) FROM m PARTITION BY tbname ORDER BY tbname",
    "SELECT loc, COUNT(v), MIN(n), AVG(n) FROM m GROUP BY loc ORDER BY loc",
    "SELECT _wstart, COUNT(*), SUM(n), MIN(v), MAX(v) FROM m INTERVAL(1h) ORDER BY _wstart",
    "SELECT _wstart, COUNT(*), MAX(n) FROM m WHERE ts >= '2016-01-01 01:00:05.000' AND ts < '2016-01-01 03:30:00.000' INTERVAL(30m) ORDER BY _wstart",
    "SELECT COUNT(*), SUM(n) FROM m WHERE ts > '2016-01-01 00:10:00.000'",
    "SELECT COUNT(*), SUM(n) FROM m WHERE n > 0",
];

fn run_all(c: &Cluster) -> Vec<String> {
    QUERIES.iter().map(|q| c.ok("sma", q)).collect()
}

#[test]
fn sma_answers_equal_row_answers() {
    let c = Cluster::start(1);
    c.ok(
        "",
        "CREATE DATABASE sma VGROUPS 2 DURATION 1d MAXROWS 200 MINROWS 50 STT_TRIGGER 4",
    );
    c.ok(
        "sma",
        "CREATE STABLE m (ts TIMESTAMP, v DOUBLE, n BIGINT) TAGS (loc VARCHAR(8))",
    );
    for t in 0..TABLES {
        let mut sql = format!("INSERT INTO t{t} USING m TAGS ('l{}') VALUES ", t % 2);
        for i in 0..ROWS {
            let (v, n) = value(t, i);
            let v = v.map(|x| x.to_string()).unwrap_or_else(|| "NULL".into());
            sql.push_str(&format!("({}, {v}, {n}) ", T0 + i * 10_000));
        }
        c.ok("sma", &sql);
    }
    let in_memory = run_all(&c);
    c.ok("", "FLUSH DATABASE sma");
    let in_stt = run_all(&c);
    c.ok("", "COMPACT DATABASE sma");
    let in_data = run_all(&c);
    for (k, q) in QUERIES.iter().enumerate() {
        assert_eq!(in_memory[k], in_stt[k], "after FLUSH: {q}");
        assert_eq!(in_memory[k], in_data[k], "after COMPACT: {q}");
    }
    // Independent check of the first query.
    let mut vals = Vec::new();
    let mut ns = Vec::new();
    for t in 0..TABLES {
        for i in 0..ROWS {
            let (v, n) = value(t, i);
            vals.extend(v);
            ns.push(n);
        }
    }
    let line = in_data[0].lines().nth(1).expect("one row");
    let f: Vec<&str> = line.split(',').collect();
    assert_eq!(f[0], (TABLES as i64 * ROWS).to_string(), "{line}");
    assert_eq!(f[1], vals.len().to_string(), "{line}");
    let sum: f64 = vals.iter().sum();
    assert!((f[2].parse::<f64>().unwrap() - sum).abs() < 1e-6, "{line}");
    let min = vals.iter().copied().fold(f64::INFINITY, f64::min);
    let max = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    assert_eq!(f[3].parse::<f64>().unwrap(), min, "{line}");
    assert_eq!(f[4].parse::<f64>().unwrap(), max, "{line}");
    assert_eq!(f[6], ns.iter().sum::<i64>().to_string(), "{line}");
    assert_eq!(f[7], ns.iter().min().unwrap().to_string(), "{line}");
    assert_eq!(f[8], ns.iter().max().unwrap().to_string(), "{line}");
}
