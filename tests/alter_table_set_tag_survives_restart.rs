//! ALTER TABLE .. SET TAG changes a subtable's tags (a truck gets a new driver): a tag filter,
//! PARTITION BY the tag and a query of the subtable itself see the new value at once, even
//! though each had already read the old one (tag index, per-STABLE snapshot, the frontend's
//! subtable cache); and they still see it after the data node is killed and restarted (WAL
//! replay) and after a flush and another restart (the manifest's catalog snapshot).

mod common;

use common::{rows, Cluster, READINGS};
use std::time::Duration;

const DB: &str = "settag";

/// Waits until the restarted data node serves its vnodes again.
fn wait_until_served(c: &Cluster) {
    for attempt in 0..100 {
        match c.sql(DB, "SELECT COUNT(*) FROM readings") {
            Ok(_) => return,
            Err(e) => assert!(attempt < 99, "data node did not come back: {e}"),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn check_new_drivers(c: &Cluster, when: &str) {
    assert_eq!(
        rows(&c.ok(
            DB,
            "SELECT tbname, driver FROM readings WHERE driver = 'new' ORDER BY tbname"
        )),
        ["r_truck_1,new", "r_truck_2,new"],
        "{when}"
    );
    assert_eq!(
        rows(&c.ok(
            DB,
            "SELECT driver, count(*) FROM readings PARTITION BY driver ORDER BY driver"
        )),
        ["new,2", "old,2"],
        "{when}"
    );
    assert_eq!(
        rows(&c.ok(DB, "SELECT driver, fleet FROM r_truck_2")),
        ["new,North"],
        "{when}"
    );
    assert_eq!(
        rows(&c.ok(
            DB,
            "SELECT tbname FROM readings WHERE fleet = 'North' AND driver = 'new'"
        )),
        ["r_truck_2"],
        "{when}"
    );
}

#[test]
fn set_tag_is_seen_by_queries_and_survives_restarts() {
    let mut c = Cluster::start(1);
    c.ok("", &format!("CREATE DATABASE {DB} VGROUPS 2"));
    c.ok(DB, READINGS);
    for t in 0..4 {
        c.ok(
            DB,
            &format!(
                "INSERT INTO r_truck_{t} USING readings TAGS ('truck_{t}', 'South', 'old', 'H-2', 'v1.0', 1500, 150, 12) VALUES (1451606400000, 1, 2, 3, 4, 5, 6, 7)"
            ),
        );
    }
    // Read the old values first, so that every cache that holds them is filled.
    assert_eq!(
        rows(&c.ok(DB, "SELECT count(*) FROM readings WHERE driver = 'old'")),
        ["4"]
    );
    assert_eq!(
        rows(&c.ok(
            DB,
            "SELECT driver, count(*) FROM readings PARTITION BY driver"
        )),
        ["old,4"]
    );
    assert_eq!(
        rows(&c.ok(DB, "SELECT driver, fleet FROM r_truck_2")),
        ["old,South"]
    );

    c.ok(DB, "ALTER TABLE r_truck_1 SET TAG driver = 'new'");
    c.ok(
        DB,
        &format!("ALTER TABLE {DB}.r_truck_2 SET TAG driver = 'new', fleet = 'North'"),
    );
    check_new_drivers(&c, "at once");
    // The rows stay with their subtables.
    assert_eq!(
        rows(&c.ok(
            DB,
            "SELECT tbname, velocity FROM readings WHERE driver = 'new' ORDER BY tbname"
        )),
        ["r_truck_1,4", "r_truck_2,4"]
    );

    // Errors are typed and change nothing.
    let e = c.err(DB, "ALTER TABLE readings SET TAG driver = 'x'");
    assert!(e.contains("is a STABLE"), "{e}");
    let e = c.err(DB, "ALTER TABLE r_truck_9 SET TAG driver = 'x'");
    assert!(
        e.contains("'r_truck_9'") && e.contains("does not exist"),
        "{e}"
    );
    let e = c.err(DB, "ALTER TABLE r_truck_1 SET TAG drivr = 'x'");
    assert!(e.contains("'drivr'") && e.contains("readings"), "{e}");
    let e = c.err(
        DB,
        "ALTER TABLE r_truck_1 SET TAG driver = 'x', load_capacity = 'heavy'",
    );
    assert!(e.contains("load_capacity"), "{e}");
    let e = c.err(DB, "ALTER TABLE r_truck_1 SET TAG");
    assert!(e.contains("at 1:30") && e.contains("a tag name"), "{e}");
    check_new_drivers(&c, "after the errors");

    // Replayed from the WAL.
    c.restart_dnode(0);
    wait_until_served(&c);
    check_new_drivers(&c, "after a kill -9 and restart");

    // From the manifest's catalog snapshot once the WAL is trimmed.
    c.ok(DB, "ALTER TABLE r_truck_3 SET TAG model = 'later'");
    c.ok("", &format!("FLUSH DATABASE {DB}"));
    c.restart_dnode(0);
    wait_until_served(&c);
    check_new_drivers(&c, "after a flush and restart");
    assert_eq!(
        rows(&c.ok(DB, "SELECT tbname FROM readings WHERE model = 'later'")),
        ["r_truck_3"]
    );
}
