//! GRANT and REVOKE apply to sessions that are already open, on the mnode and on the data
//! nodes, by the time the statement returns (the mnode pushes the user table to the data
//! nodes); a password change ends the user's sessions.

mod common;

use common::{rows, Cluster};
use tidal_common::{Column, DataType, StatusCode, TableWrite, Value};

fn row(ts: i64) -> TableWrite {
    let mut t = Column::empty(DataType::Timestamp, 1);
    t.push(&Value::Timestamp(ts));
    let mut v = Column::empty(DataType::Int, 1);
    v.push(&Value::Int(1));
    TableWrite {
        table: "t1".into(),
        stable: "st".into(),
        tags: Some(vec![Value::Int(1)]),
        columns: vec![t, v],
    }
}

#[test]
fn grant_and_revoke_apply_to_open_sessions() {
    let c = Cluster::start(2);
    c.ok("", "CREATE DATABASE db1 VGROUPS 2");
    c.ok("db1", "CREATE STABLE st (ts TIMESTAMP, v INT) TAGS (g INT)");
    c.ok("db1", "INSERT INTO t1 USING st TAGS (1) VALUES (1000, 1)");
    c.ok("", "CREATE USER u PASS 'pw1'");

    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let root = tidal_client::Client::connect(&c.mnode_addr)
            .await
            .expect("root");
        let u = tidal_client::Client::connect_user(&c.mnode_addr, "u", "pw1")
            .await
            .expect("u logs in");
        let select = "SELECT COUNT(*) FROM db1.st";

        // Nothing granted yet: the database is invisible to u.
        let e = u.execute(select, "").await.expect_err("no READ yet");
        assert!(
            matches!(
                e.code,
                StatusCode::PermissionDenied | StatusCode::DatabaseNotFound
            ),
            "{e}"
        );

        // GRANT READ: the open session can read at once (the fragments run on the data
        // nodes, which check the privilege themselves).
        root.execute("GRANT READ ON db1 TO u", "")
            .await
            .expect("grant");
        let r = u.execute(select, "").await.expect("READ granted");
        assert_eq!(r.batch.expect("rows").row(0)[0], Value::Int(1));
        let schema = u.stable("db1", "st").await.expect("schema");
        let e = u
            .write("db1", std::slice::from_ref(&schema), vec![row(2000)])
            .await
            .expect_err("no WRITE yet");
        assert_eq!(e.code, StatusCode::PermissionDenied, "{e}");

        // GRANT WRITE: direct writes to the data nodes are accepted at once.
        root.execute("GRANT WRITE ON db1.* TO u", "")
            .await
            .expect("grant");
        u.write("db1", std::slice::from_ref(&schema), vec![row(2000)])
            .await
            .expect("WRITE granted");

        // REVOKE READ: reading stops, writing goes on.
        root.execute("REVOKE READ ON db1 FROM u", "")
            .await
            .expect("revoke");
        let e = u.execute(select, "").await.expect_err("READ revoked");
        assert_eq!(e.code, StatusCode::PermissionDenied, "{e}");
        u.write("db1", std::slice::from_ref(&schema), vec![row(3000)])
            .await
            .expect("WRITE kept");

        // REVOKE ALL: nothing left, not even the database's metadata.
        root.execute("REVOKE ALL ON db1 FROM u", "")
            .await
            .expect("revoke");
        let e = u
            .write("db1", std::slice::from_ref(&schema), vec![row(4000)])
            .await
            .expect_err("WRITE revoked");
        assert_eq!(e.code, StatusCode::PermissionDenied, "{e}");
        let e = u.refresh_route("db1").await.expect_err("no metadata");
        assert_eq!(e.code, StatusCode::PermissionDenied, "{e}");

        // A grant on every database.
        root.execute("GRANT READ ON * TO u", "")
            .await
            .expect("grant *");
        u.execute(select, "").await.expect("READ on *");

        // A password change ends the session: the client cannot log in again with the
        // old password and says so.
        root.execute("ALTER USER u PASS 'pw2'", "")
            .await
            .expect("alter");
        let e = u.execute(select, "").await.expect_err("old session");
        assert_eq!(e.code, StatusCode::Unauthenticated, "{e}");
        let u2 = tidal_client::Client::connect_user(&c.mnode_addr, "u", "pw2")
            .await
            .expect("new password");
        u2.execute(select, "").await.expect("new session reads");
    });
    assert_eq!(rows(&c.ok("db1", "SELECT COUNT(*) FROM st")), vec!["3"]);
}
