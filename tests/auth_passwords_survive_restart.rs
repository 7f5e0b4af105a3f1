//! Users, password changes and grants survive a SIGKILL of the mnode, the catalog files hold
//! only salted hashes (never a password), and data nodes rejoin with the cluster secret they
//! kept even after root's password changed.

mod common;

use common::{rows, shell_as, Cluster};

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn passwords_survive_restart_and_are_stored_hashed() {
    let mut c = Cluster::start(1);
    c.ok("", "CREATE DATABASE db1");
    c.ok("db1", "CREATE STABLE st (ts TIMESTAMP, v INT) TAGS (g INT)");
    c.ok("db1", "INSERT INTO t1 USING st TAGS (1) VALUES (1000, 1)");
    c.ok("", "CREATE USER alice PASS 'first-Secret-1'");
    c.ok("", "ALTER USER alice PASS 'second-Secret-2'");
    c.ok("", "GRANT READ ON db1 TO alice");
    c.ok("", "ALTER USER root PASS 'new-Root-Pw'");

    // SIGKILL the mnode (no snapshot at shutdown) and start it on the same data and port.
    c.restart_mnode();
    let addr = c.mnode_addr.clone();
    let as_root = |sql: &str| shell_as(&addr, "root", "new-Root-Pw", "db1", sql);
    let q = "SELECT COUNT(*) FROM st";
    assert_eq!(
        rows(&shell_as(&c.mnode_addr, "alice", "second-Secret-2", "db1", q).expect("alice")),
        vec!["1"]
    );
    let e = shell_as(&c.mnode_addr, "alice", "first-Secret-1", "db1", q).unwrap_err();
    assert!(e.contains("Unauthenticated"), "{e}");
    let e = shell_as(&c.mnode_addr, "root", "taosdata", "", "SHOW USERS").unwrap_err();
    assert!(e.contains("Unauthenticated"), "{e}");
    let users = as_root("SHOW USERS").expect("root with the new password");
    assert!(
        users.contains("alice") && users.contains("READ on db1"),
        "{users}"
    );

    // The data node restarts and rejoins without the (changed) root password: it kept the
    // cluster secret when it first registered.
    c.restart_dnode(0);
    // The restarted node may take a moment to report its vnodes (and the route to move).
    for attempt in 0..100 {
        match as_root(q) {
            Ok(_) => break,
            Err(e) => {
                assert!(attempt < 99, "data node did not come back: {e}");
                assert!(!e.contains("Unauthenticated"), "{e}");
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        }
    }
    as_root("INSERT INTO t2 USING st TAGS (2) VALUES (2000, 2)").expect("write after restarts");
    assert_eq!(rows(&as_root(q).expect("count")), vec!["2"]);
    let key = c.data().join("dnode-0").join("cluster.key");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&key).expect("key").permissions(),
    );
    assert_eq!(mode & 0o777, 0o600, "the cluster secret is private");

    // No password, old or new, in any catalog file; Argon2id hashes instead.
    let mut hashes = 0;
    for e in std::fs::read_dir(c.data().join("mnode")).expect("mnode dir") {
        let bytes = std::fs::read(e.expect("entry").path()).expect("read");
        for pw in [
            "first-Secret-1",
            "second-Secret-2",
            "new-Root-Pw",
            "taosdata",
        ] {
            assert!(!contains(&bytes, pw.as_bytes()), "{pw} stored in clear");
        }
        if contains(&bytes, b"$argon2id$") {
            hashes += 1;
        }
    }
    assert!(hashes > 0, "no password hash found in the catalog");
}
