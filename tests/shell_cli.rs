//! `tidal shell`: -s and -f run statements in order; csv/json/table formats; -d selects the
//! database; the first failing statement stops the run with a non-zero exit and the server's
//! message on stderr.

mod common;

use common::{shell_output, Cluster, BIN, READINGS};
use std::process::Command;

#[test]
fn shell_formats_files_and_errors() {
    let c = Cluster::start(2);
    // -s with several statements, USE carried across them.
    let out = shell_output(&c.mnode_addr, "", &format!("CREATE DATABASE iot VGROUPS 2; USE iot; {READINGS}; INSERT INTO r_truck_1 USING readings TAGS ('truck_1', 'South', 'Albert', 'F-150', 'v1.5', 2000, 200, 15) VALUES (1451606400000, 1.5, 2.5, 100, 20, 90, 5, 25)"), "csv");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "",
        "csv prints nothing for statements without rows"
    );

    // csv: a header and one line per row; -d selects the database.
    let out = shell_output(
        &c.mnode_addr,
        "iot",
        "SELECT ts, velocity, name FROM r_truck_1",
        "csv",
    );
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "ts,velocity,name\n2016-01-01 00:00:00.000,20,truck_1\n"
    );

    // json
    let out = shell_output(
        &c.mnode_addr,
        "iot",
        "SELECT COUNT(*) FROM readings",
        "json",
    );
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(text.trim()).expect("json output");
    assert_eq!(v["rows"], 1);
    assert_eq!(v["data"][0][0], 1);

    // table
    let out = shell_output(
        &c.mnode_addr,
        "iot",
        "SELECT COUNT(*) FROM readings",
        "table",
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("count(*)") && text.contains("1 row(s) in set"),
        "{text}"
    );

    // -f runs a file; the first failure stops it with a non-zero exit code.
    let dir = tempfile::tempdir().expect("tempdir");
    let f = dir.path().join("script.sql");
    std::fs::write(&f, "SELECT COUNT(*) FROM readings;\nSELECT nosuchcol FROM readings;\nSELECT 1 FROM readings;\n").expect("write");
    let out = Command::new(BIN)
        .args([
            "shell",
            "--host",
            &c.mnode_addr,
            "-d",
            "iot",
            "--format",
            "csv",
            "-f",
        ])
        .arg(&f)
        .output()
        .expect("run shell");
    assert!(!out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "count(*)\n1\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nosuchcol"), "{err}");

    // Interactive mode reads statements from stdin until EOF.
    use std::io::Write;
    let mut child = Command::new(BIN)
        .args(["shell", "--host", &c.mnode_addr, "--format", "csv"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn shell");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"USE iot;\nSELECT COUNT(*)\n  FROM readings;\nquit\n")
        .expect("write stdin");
    let out = child.wait_with_output().expect("shell output");
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "count(*)\n1\n");
}
