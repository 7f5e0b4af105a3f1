//! `tidal shell -s/-f`: `\G` ends a statement and prints its rows vertically, `;` and `\G`
//! mix in one script, csv and json keep working alongside, the timing lines read as taos's,
//! and a failure prints one `DB error: <message> (<seconds>s)` line and exits with code 1.

mod common;

use common::{shell_output, Cluster, BIN};
use std::process::Command;

fn shell(host: &str, args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .args(["shell", "--host", host])
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run shell")
}

/// `Query OK, N row(s) in set (0.001234s)` with a plausible duration.
fn assert_timing_line(line: &str, what: &str, n: usize) {
    let prefix = format!("Query OK, {n} row(s) {what} (");
    let rest = line
        .strip_prefix(&prefix)
        .unwrap_or_else(|| panic!("{line:?} does not start with {prefix:?}"));
    let text = rest.strip_suffix("s)").expect("ends with s)");
    let secs: f64 = text.parse().expect("seconds");
    assert!((0.0..60.0).contains(&secs), "{line}");
    assert_eq!(
        text.split_once('.').map(|(_, f)| f.len()),
        Some(6),
        "{line}"
    );
}

#[test]
fn vertical_rows_formats_and_error_lines() {
    let c = Cluster::start(1);
    c.ok("", "CREATE DATABASE sv");
    c.ok(
        "sv",
        "CREATE STABLE m (ts TIMESTAMP, velocity DOUBLE) TAGS (name VARCHAR(10))",
    );
    c.ok(
        "sv",
        "INSERT INTO m_1 USING m TAGS ('truck_1') VALUES (1451606400000, 20) (1451606410000, NULL)",
    );

    // \G: one block per row, names right-aligned, then the row count and timing.
    let out = shell(
        &c.mnode_addr,
        &["-d", "sv", "-s", "SELECT ts, velocity, name FROM m\\G"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<&str> = text.lines().collect();
    let stars = "*".repeat(27);
    assert_eq!(
        &lines[..7],
        &[
            format!("{stars} 1.row {stars}").as_str(),
            "      ts: 2016-01-01 00:00:00.000",
            "velocity: 20",
            "    name: truck_1",
            format!("{stars} 2.row {stars}").as_str(),
            "      ts: 2016-01-01 00:00:10.000",
            "velocity: NULL",
        ][..],
        "{text}"
    );
    assert_eq!(lines[7], "    name: truck_1");
    assert_timing_line(lines[8], "in set", 2);

    // A file mixing `;`, `\G`, comments and a statement over several lines.
    let dir = tempfile::tempdir().expect("tempdir");
    let f = dir.path().join("mixed.sql");
    std::fs::write(
        &f,
        "-- counts\nSELECT COUNT(*)\n  FROM m;\nSELECT name FROM m LIMIT 1\\G\nINSERT INTO m_1 VALUES (1451606420000, 1);\n",
    )
    .expect("write");
    let out = shell(
        &c.mnode_addr,
        &["-d", "sv", "-f", f.to_str().expect("path")],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
    assert!(lines[0].contains("count(*)"), "{text}");
    assert!(lines[1].starts_with("====="), "{text}");
    assert!(lines[2].contains(" 2 "), "{text}");
    assert_timing_line(lines[3], "in set", 1);
    assert_eq!(lines[4], format!("{stars} 1.row {stars}"));
    assert_eq!(lines[5], "name: truck_1");
    assert_timing_line(lines[6], "in set", 1);
    assert_timing_line(lines[7], "affected", 1);

    // csv ignores \G; json is the REST answer.
    let out = shell_output(&c.mnode_addr, "sv", "SELECT COUNT(*) FROM m\\G", "csv");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "count(*)\n3\n");
    let out = shell_output(
        &c.mnode_addr,
        "sv",
        "SELECT ts, velocity FROM m WHERE ts < 1451606420000",
        "json",
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json output");
    assert_eq!(
        v,
        serde_json::json!({
            "code": 0,
            "column_meta": [["ts", "TIMESTAMP", 8], ["velocity", "DOUBLE", 8]],
            "data": [["2016-01-01T00:00:00.000Z", 20.0], ["2016-01-01T00:00:10.000Z", null]],
            "rows": 2
        })
    );

    // The first failure: one error line on stderr, exit code 1, nothing after it runs.
    let out = shell(
        &c.mnode_addr,
        &[
            "-d",
            "sv",
            "-s",
            "SELECT COUNT(*) FROM m; SELECT nosuchcol FROM m; DROP DATABASE sv",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let err_lines: Vec<&str> = err.lines().collect();
    assert_eq!(err_lines.len(), 1, "{err}");
    let line = err_lines[0];
    assert!(
        line.starts_with("DB error: ") && line.contains("nosuchcol"),
        "{line}"
    );
    let secs = line
        .rsplit_once(" (")
        .and_then(|(_, t)| t.strip_suffix("s)"))
        .and_then(|t| t.parse::<f64>().ok());
    assert!(secs.is_some(), "{line}");
    assert!(
        c.ok("", "SHOW DATABASES").contains("sv"),
        "DROP did not run"
    );

    // An unknown database given with -d fails the same way.
    let out = shell(&c.mnode_addr, &["-d", "nosuchdb", "-s", "SELECT 1"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("DB error: ") && err.contains("nosuchdb"),
        "{err}"
    );
}
