//! A frontend remembers for a second that a name is not a STABLE (a query of a subtable asks
//! for it as a STABLE first). A STABLE created meanwhile through another server's frontend is
//! still found at once: before reporting a table missing, the frontend asks the mnode again.

mod common;

use common::{rows, shell, Cluster};

#[test]
fn a_stable_created_through_another_frontend_is_queryable_at_once() {
    let c = Cluster::start(1);
    let dnode = c.dnodes[0].as_ref().expect("dnode").addr.clone();
    c.ok("", "CREATE DATABASE elsewhere VGROUPS 2");
    // The mnode's frontend learns that `later` is no STABLE (and no subtable).
    let e = c.err("elsewhere", "SELECT * FROM later");
    assert!(e.contains("later"), "{e}");
    // Another server's frontend creates it, with a subtable and a row.
    for sql in [
        "CREATE STABLE later (ts TIMESTAMP, v INT) TAGS (t INT)",
        "INSERT INTO later_1 USING later TAGS (1) VALUES (1700000000000, 7)",
    ] {
        shell(&dnode, "elsewhere", sql, "csv").unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    // Within the second the mnode's frontend remembers its "no" for, it finds both.
    assert_eq!(
        rows(&c.ok("elsewhere", "SELECT COUNT(*) FROM later")),
        ["1"]
    );
    assert!(c.ok("elsewhere", "DESCRIBE later").contains("INT"));
    // A subtable, twice: the second time its "not a STABLE" comes from the cache.
    for _ in 0..2 {
        assert_eq!(rows(&c.ok("elsewhere", "SELECT v FROM later_1")), ["7"]);
    }
}
