//! `tidal load --format tdengine` gives a row only the subtables declared before it, while
//! the reader adds later declarations as workers parse: a row naming a subtable that a later
//! `3,` line declares is rejected with its line number (and the rows of that subtable after
//! its declaration load), and declaring a subtable again neither stalls the load nor loses a
//! row (the subtable keeps its first tags: creation is `IF NOT EXISTS`). Chunks of a few
//! rows and three workers, so that declarations fall among many chunks. Whether a worker
//! still parsing an earlier chunk sees a later declaration is up to timing here; the rule
//! that it must not is `load::tests::a_subtable_is_seen_from_the_chunk_it_was_handed_over_with`.

mod common;

use common::tdengine::{declare, STABLE};
use common::{rows, Cluster, BIN};
use std::fmt::Write as _;
use std::process::Command;

#[test]
fn rows_see_only_the_declarations_before_them() {
    let c = Cluster::start(2);
    let mut text = STABLE.to_string();
    for t in 0..10 {
        declare(&mut text, t, &format!("site{t}"));
    }
    let mut expect = vec![0usize; 51];
    let mut early_line = 0;
    for step in 0..40usize {
        let ts = 1_700_000_000_000i64 + step as i64 * 1000;
        if step == 10 {
            // Names t50 before its `3,` line: rejected.
            writeln!(text, "1,t50,1,({ts},0.5)").unwrap();
            early_line = text.lines().count();
        }
        if step == 12 {
            declare(&mut text, 50, "site50");
        }
        if step == 20 {
            declare(&mut text, 3, "moved");
        }
        for t in (0..10).filter(|t| (t + step) % 2 == 0) {
            writeln!(text, "1,t{t},1,({ts},{}.5)", t * 100 + step).unwrap();
            expect[t] += 1;
        }
        if step > 12 {
            writeln!(text, "1,t50,1,({ts},{step}.25)").unwrap();
            expect[50] += 1;
        }
    }
    let total: usize = expect.iter().sum();

    let file = c.data().join("early.tdengine");
    std::fs::write(&file, &text).unwrap();
    let out = Command::new(BIN)
        .args(["load", "--host", &c.mnode_addr, "--db", "early"])
        .args(["--format", "tdengine", "--vgroups", "3"])
        .arg("--file")
        .arg(&file)
        .args(["--workers", "3", "--batch-size", "2"])
        .args(["--progress-secs", "0"])
        .output()
        .expect("run tidal load");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        !out.status.success(),
        "a rejected line fails the load: {stdout}"
    );
    let said = format!("line {early_line}: table 't50' was not declared by a '3,' line");
    assert!(stderr.contains(&said), "want {said:?} in {stderr}");
    assert_eq!(stderr.matches("rejected:").count(), 1, "{stderr}");
    assert!(stdout.contains(&format!("loaded {total} rows")), "{stdout}");

    let counts = rows(&c.ok(
        "early",
        "SELECT gid, loc, count(*) FROM m PARTITION BY gid, loc ORDER BY gid",
    ));
    let want: Vec<String> = (0..10)
        .chain([50])
        .map(|t| format!("{t},site{t},{}", expect[t]))
        .collect();
    assert_eq!(counts, want);
}
