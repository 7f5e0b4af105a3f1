//! DROP USER ends the user's open sessions everywhere at once and refuses new logins; the
//! superuser cannot be dropped; a user may change its own password but no one else's.

mod common;

use common::{shell_as, Cluster};
use tidal_common::StatusCode;

#[test]
fn dropped_user_is_locked_out() {
    let c = Cluster::start(1);
    c.ok("", "CREATE DATABASE db1");
    c.ok("db1", "CREATE STABLE st (ts TIMESTAMP, v INT) TAGS (g INT)");
    c.ok("db1", "INSERT INTO t1 USING st TAGS (1) VALUES (1000, 1)");
    c.ok("", "CREATE USER gone PASS 'pw'");
    c.ok("", "CREATE USER other PASS 'pw'");
    c.ok("", "GRANT ALL ON db1 TO gone");

    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let u = tidal_client::Client::connect_user(&c.mnode_addr, "gone", "pw")
            .await
            .expect("login");
        u.execute("SELECT COUNT(*) FROM db1.st", "")
            .await
            .expect("reads");
        let route = u.route("db1").await.expect("route");

        // Its own password: yes; someone else's: no.
        u.execute("ALTER USER other PASS 'hacked'", "")
            .await
            .expect_err("not a superuser");
        let e = u
            .execute("DROP USER root", "")
            .await
            .expect_err("not a superuser");
        assert_eq!(e.code, StatusCode::PermissionDenied, "{e}");

        c.ok("", "DROP USER gone");
        let e = u
            .execute("SELECT COUNT(*) FROM db1.st", "")
            .await
            .expect_err("dropped");
        assert_eq!(e.code, StatusCode::Unauthenticated, "{e}");
        assert!(e.message.contains("user gone does not exist"), "{e}");
        // Straight to the data node, with the route it had.
        let e = u
            .dnode(&route.vgroups[0].addr)
            .expect("stub")
            .dnode_stats(tidal_proto::v1::Empty {})
            .await
            .expect_err("dropped on the data node too");
        assert_eq!(e.code(), tonic::Code::Unauthenticated);
        let e = match tidal_client::Client::connect_user(&c.mnode_addr, "gone", "pw").await {
            Ok(_) => panic!("a dropped user logged in"),
            Err(e) => e,
        };
        assert_eq!(e.code, StatusCode::Unauthenticated);
    });

    // Re-created with the same name and password: a new user, without the old privileges.
    c.ok("", "CREATE USER gone PASS 'pw'");
    let e = shell_as(
        &c.mnode_addr,
        "gone",
        "pw",
        "",
        "SELECT COUNT(*) FROM db1.st",
    )
    .unwrap_err();
    assert!(e.contains("PermissionDenied"), "{e}");
    let e = c.err("", "DROP USER root");
    assert!(e.contains("superuser and cannot be dropped"), "{e}");
    let e = c.err("", "DROP USER nobody");
    assert!(e.contains("user 'nobody' does not exist"), "{e}");
    shell_as(&c.mnode_addr, "other", "pw", "", "SHOW USERS").expect("other unchanged");
}
