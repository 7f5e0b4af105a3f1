//! `tidal load --format tdengine` creates every subtable its `3,` lines declare, with their
//! tags, before writing any row of it: subtables declared among the rows of a later chunk
//! and subtables declared after the last row (no chunk waits for those) exist afterwards,
//! and every row lands in its subtable. A `3,` line whose tag value does not fit its type is
//! rejected with its line number, and the load says it failed, while every other line loads.

mod common;

use common::tdengine::{self, STABLE};
use common::{rows, Cluster, BIN};
use std::fmt::Write as _;
use std::process::Command;

/// Runs `tidal load` on `text`; returns (succeeded, stdout, stderr).
fn load(c: &Cluster, db: &str, text: &str) -> (bool, String, String) {
    let file = c.data().join(format!("{db}.tdengine"));
    std::fs::write(&file, text).unwrap();
    let out = Command::new(BIN)
        .args(["load", "--host", &c.mnode_addr, "--db", db])
        .args(["--format", "tdengine", "--vgroups", "3"])
        .arg("--file")
        .arg(&file)
        // Chunks of a few rows: declarations fall before, among and after many chunks.
        .args([
            "--workers",
            "3",
            "--batch-size",
            "2",
            "--progress-secs",
            "0",
        ])
        .output()
        .expect("run tidal load");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn declare(out: &mut String, t: usize) {
    tdengine::declare(out, t, &format!("site{t}"));
}

#[test]
fn declared_subtables_exist_with_their_tags_and_rows() {
    let c = Cluster::start(2);
    let mut text = STABLE.to_string();
    let mut expect_rows = vec![0usize; 40];
    // Subtables 0..20 declared up front; 20..30 declared one by one among the rows (each
    // just before its first row); 30..40 declared after the last row.
    for t in 0..20 {
        declare(&mut text, t);
    }
    let mut live = 20;
    for step in 0..60usize {
        if step % 6 == 0 && live < 30 {
            declare(&mut text, live);
            live += 1;
        }
        for t in (0..live).filter(|t| (t + step) % 3 == 0) {
            let ts = 1_700_000_000_000i64 + step as i64 * 1000;
            writeln!(text, "1,t{t},1,({ts},{}.5)", t * 100 + step).unwrap();
            expect_rows[t] += 1;
        }
    }
    for t in 30..40 {
        declare(&mut text, t);
    }
    let total: usize = expect_rows.iter().sum();

    let (ok, out, err) = load(&c, "lc", &text);
    assert!(ok, "tidal load failed: {out}\n{err}");
    assert!(out.contains(&format!("loaded {total} rows")), "{out}");

    let tags = rows(&c.ok("lc", "SELECT TAGS tbname, loc, gid FROM m ORDER BY gid"));
    let want: Vec<String> = (0..40).map(|t| format!("t{t},site{t},{t}")).collect();
    assert_eq!(tags, want);
    let counts = rows(&c.ok(
        "lc",
        "SELECT gid, count(*), sum(v) FROM m PARTITION BY gid ORDER BY gid",
    ));
    let want: Vec<String> = (0..30)
        .map(|t| {
            let sum: f64 = (0..60usize)
                .filter(|s| (t + s) % 3 == 0 && (t < 20 || *s >= (t - 20) * 6))
                .map(|s| (t * 100 + s) as f64 + 0.5)
                .sum();
            format!("{t},{},{sum}", expect_rows[t])
        })
        .collect();
    assert_eq!(counts, want);
}

#[test]
fn a_bad_declaration_is_rejected_by_line_and_the_rest_loads() {
    let c = Cluster::start(1);
    let mut text = STABLE.to_string();
    declare(&mut text, 1);
    // Line 3: gid is an INT.
    text.push_str("3,m,t2,create table t2 using m (loc,gid) tags ('site2','many')\n");
    declare(&mut text, 3);
    for step in 0..5 {
        let ts = 1_700_000_000_000i64 + step * 1000;
        writeln!(text, "1,t1,1,({ts},1.0)").unwrap();
        writeln!(text, "1,t3,1,({ts},3.0)").unwrap();
    }
    let (ok, out, err) = load(&c, "lb", &text);
    assert!(!ok, "a rejected line must fail the load: {out}");
    assert!(err.contains("line 3:") && err.contains("gid"), "{err}");
    assert!(out.contains("loaded 10 rows"), "{out}");
    assert_eq!(
        rows(&c.ok("lb", "SELECT TAGS tbname FROM m ORDER BY tbname")),
        vec!["t1", "t3"]
    );
    assert_eq!(rows(&c.ok("lb", "SELECT count(*) FROM m")), vec!["10"]);
}
