//! Bad input gets a clear error that names the problem, and changes nothing.

mod common;

use common::{rows, Cluster, READINGS};

fn assert_mentions(err: &str, words: &[&str]) {
    let lower = err.to_ascii_lowercase();
    for w in words {
        assert!(
            lower.contains(&w.to_ascii_lowercase()),
            "error {err:?} should mention {w:?}"
        );
    }
}

#[test]
fn bad_statements_fail_clearly_and_change_nothing() {
    let c = Cluster::start(2);
    c.ok("", "CREATE DATABASE iot VGROUPS 2");
    c.ok("iot", READINGS);
    c.ok("iot", "CREATE TABLE r_truck_1 USING readings TAGS ('truck_1', 'South', 'Albert', 'F-150', 'v1.5', 2000, 200, 15)");
    c.ok(
        "iot",
        "INSERT INTO r_truck_1 VALUES (1451606400000, 1.5, 2.5, 100, 20, 90, 5, 25)",
    );

    // unknown database
    let e = c.err("", "USE nosuchdb");
    assert_mentions(&e, &["nosuchdb"]);
    let e = c.err("", "SELECT * FROM nosuchdb.readings");
    assert_mentions(&e, &["nosuchdb"]);
    // no database selected
    let e = c.err("", "SELECT * FROM readings");
    assert_mentions(&e, &["database"]);
    // unknown table / stable
    let e = c.err("iot", "SELECT * FROM r_truck_99");
    assert_mentions(&e, &["r_truck_99"]);
    let e = c.err(
        "iot",
        "INSERT INTO r_truck_99 VALUES (1451606400000, 1, 2, 3, 4, 5, 6, 7)",
    );
    assert_mentions(&e, &["r_truck_99"]);
    let e = c.err(
        "iot",
        "CREATE TABLE r_truck_5 USING nosuchstable TAGS ('a', 'b', 'c', 'd', 'e', 1, 2, 3)",
    );
    assert_mentions(&e, &["nosuchstable"]);
    // unknown column
    let e = c.err("iot", "SELECT velocty FROM readings");
    assert_mentions(&e, &["velocty"]);
    let e = c.err(
        "iot",
        "INSERT INTO r_truck_1 (ts, velocty) VALUES (1451606500000, 1)",
    );
    assert_mentions(&e, &["velocty"]);
    // wrong value count
    let e = c.err(
        "iot",
        "INSERT INTO r_truck_1 VALUES (1451606500000, 1.5, 2.5)",
    );
    assert_mentions(&e, &["value"]);
    // type mismatch
    let e = c.err(
        "iot",
        "INSERT INTO r_truck_1 VALUES (1451606500000, 'abc', 2.5, 100, 20, 90, 5, 25)",
    );
    assert_mentions(&e, &["latitude"]);
    // tag count mismatch
    let e = c.err(
        "iot",
        "CREATE TABLE r_truck_7 USING readings TAGS ('truck_7', 'South')",
    );
    assert_mentions(&e, &["tag"]);
    let e = c.err("iot", "INSERT INTO r_truck_8 USING readings TAGS ('truck_8') VALUES (1451606500000, 1, 2, 3, 4, 5, 6, 7)");
    assert_mentions(&e, &["tag"]);
    // malformed SQL
    let e = c.err("iot", "SELEKT * FROM readings");
    assert!(!e.trim().is_empty());
    let e = c.err("iot", "SELECT * FROM readings WHERE");
    assert!(!e.trim().is_empty());
    // duplicate CREATE
    let e = c.err("", "CREATE DATABASE iot");
    assert_mentions(&e, &["iot", "exist"]);
    let e = c.err("iot", READINGS);
    assert_mentions(&e, &["readings", "exist"]);
    let e = c.err("iot", "CREATE TABLE r_truck_1 USING readings TAGS ('truck_1', 'South', 'Albert', 'F-150', 'v1.5', 2000, 200, 15)");
    assert_mentions(&e, &["r_truck_1", "exist"]);
    // IF NOT EXISTS makes the duplicates no-ops
    c.ok("", "CREATE DATABASE IF NOT EXISTS iot");
    c.ok("iot", "CREATE TABLE IF NOT EXISTS r_truck_1 USING readings TAGS ('truck_1', 'South', 'Albert', 'F-150', 'v1.5', 2000, 200, 15)");

    // A multi-table INSERT with one bad row writes nothing.
    let e = c.err(
        "iot",
        "INSERT INTO r_truck_1 VALUES (1451606600000, 1, 2, 3, 4, 5, 6, 7) r_truck_9 USING readings TAGS ('truck_9', 'East', 'Seth', 'H-2', 'v1.0', 1500, 150, 12) VALUES (1451606600000, 'x', 2, 3, 4, 5, 6, 7)",
    );
    assert_mentions(&e, &["latitude"]);

    // Nothing changed: still one table, one row, one stable, one database.
    assert_eq!(
        rows(&c.ok("iot", "SELECT COUNT(*) FROM readings")),
        vec!["1"]
    );
    assert_eq!(rows(&c.ok("iot", "SHOW TABLES")).len(), 1);
    assert_eq!(rows(&c.ok("iot", "SHOW STABLES")).len(), 1);
    assert_eq!(rows(&c.ok("", "SHOW DATABASES")).len(), 1);
}
