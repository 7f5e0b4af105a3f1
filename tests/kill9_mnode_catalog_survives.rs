//! The mnode is killed with SIGKILL and restarted on the same data and port: the catalog
//! (databases, STABLEs, vgroup map) survives, the data nodes reconnect, and data written
//! before the crash is still served.

mod common;

use common::{rows, Cluster, DIAGNOSTICS, READINGS};
use std::time::{Duration, Instant};

#[test]
fn catalog_survives_mnode_kill9() {
    let mut c = Cluster::start(2);
    c.ok("", "CREATE DATABASE iot VGROUPS 4");
    c.ok("iot", READINGS);
    c.ok("iot", DIAGNOSTICS);
    c.ok("iot", "INSERT INTO r_truck_1 USING readings TAGS ('truck_1', 'South', 'Albert', 'F-150', 'v1.5', 2000, 200, 15) VALUES (1451606400000, 1, 2, 3, 4, 5, 6, 7) (1451606410000, 1, 2, 3, 4, 5, 6, 7)");
    let vgroups_before = rows(&c.ok("iot", "SHOW VGROUPS"));

    c.kill_mnode();
    c.restart_mnode();

    let dbs = rows(&c.ok("", "SHOW DATABASES"));
    assert_eq!(dbs.len(), 1);
    assert!(dbs[0].starts_with("iot,"), "{dbs:?}");
    assert_eq!(rows(&c.ok("iot", "SHOW STABLES")).len(), 2);
    assert_eq!(
        rows(&c.ok("iot", "SELECT COUNT(*) FROM readings")),
        vec!["2"]
    );
    // The vgroup map is unchanged (same ids, ranges and data nodes).
    let strip = |v: &[String]| -> Vec<String> {
        v.iter()
            .map(|l| l.split(',').take(5).collect::<Vec<_>>().join(","))
            .collect()
    };
    assert_eq!(
        strip(&rows(&c.ok("iot", "SHOW VGROUPS"))),
        strip(&vgroups_before)
    );

    // Writes continue, and the data nodes heartbeat again so new databases can be placed.
    c.ok(
        "iot",
        "INSERT INTO r_truck_1 VALUES (1451606420000, 1, 2, 3, 4, 5, 6, 7)",
    );
    assert_eq!(
        rows(&c.ok("iot", "SELECT COUNT(*) FROM readings")),
        vec!["3"]
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match c.sql("", "CREATE DATABASE second VGROUPS 2") {
            Ok(_) => break,
            Err(e) if Instant::now() < deadline => {
                eprintln!("retrying CREATE DATABASE after mnode restart: {e}");
                std::thread::sleep(Duration::from_millis(500));
            }
            Err(e) => panic!("CREATE DATABASE after mnode restart: {e}"),
        }
    }
    let dnodes = rows(&c.ok("", "SHOW DNODES"));
    assert_eq!(dnodes.len(), 2);
    assert!(dnodes.iter().all(|d| d.contains(",ready,")), "{dnodes:?}");
}
