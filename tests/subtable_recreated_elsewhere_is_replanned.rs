//! A frontend plans a subtable query from metadata it cached up to a second before. When the
//! subtable was dropped and created again under another STABLE meanwhile (through another
//! server's frontend), the vnode refuses the stale plan and the query is planned again: the
//! answer is the new subtable's, never its rows read with the old STABLE's columns.

mod common;

use common::{rows, shell, Cluster};

#[test]
fn a_subtable_recreated_under_another_stable_is_read_with_its_new_columns() {
    let c = Cluster::start(1);
    let dnode = c.dnodes[0].as_ref().expect("dnode").addr.clone();
    let elsewhere = |sql: &str| {
        shell(&dnode, "re", sql, "csv").unwrap_or_else(|e| panic!("{sql}: {e}"));
    };
    c.ok("", "CREATE DATABASE re VGROUPS 2");
    c.ok("re", "CREATE STABLE a (ts TIMESTAMP, v INT) TAGS (t INT)");
    c.ok(
        "re",
        "CREATE STABLE b (ts TIMESTAMP, w DOUBLE, x VARCHAR(8)) TAGS (u INT)",
    );
    c.ok(
        "re",
        "INSERT INTO s1 USING a TAGS (1) VALUES (1700000000000, 5)",
    );
    // The mnode's frontend plans (and caches) s1 as a subtable of `a`.
    assert_eq!(rows(&c.ok("re", "SELECT v FROM s1")), ["5"]);
    elsewhere("DROP TABLE s1");
    elsewhere("INSERT INTO s1 USING b TAGS (2) VALUES (1700000001000, 1.5, 'new')");
    // Valid for both STABLEs: only the vnode can tell that the plan's columns are `a`'s.
    let all = rows(&c.ok("re", "SELECT * FROM s1"));
    assert_eq!(all.len(), 1, "{all:?}");
    assert!(all[0].ends_with(",1.5,new"), "{all:?}");
    assert_eq!(rows(&c.ok("re", "SELECT w, x FROM s1")), ["1.5,new"]);
    let e = c.err("re", "SELECT v FROM s1");
    assert!(e.contains("'v'") || e.contains(" v "), "{e}");
    assert_eq!(rows(&c.ok("re", "SELECT LAST_ROW(x) FROM s1")), ["new"]);
    // Dropped for good: a clear "not found", planned again from fresh metadata.
    elsewhere("DROP TABLE s1");
    let e = c.err("re", "SELECT * FROM s1");
    assert!(e.contains("s1") && e.contains("not found"), "{e}");
}
