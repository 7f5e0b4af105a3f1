//! A user with READ on a database can SELECT, SHOW and DESCRIBE it, but INSERT (SQL, the
//! client's direct write to a data node, and HTTP line protocol) is PermissionDenied, and
//! databases it holds nothing on are invisible and refused.

mod common;

use common::{basic_auth, http_request, rows, shell_as, Cluster};
use tidal_common::{Column, DataType, StatusCode, TableWrite, Value};

#[test]
fn read_user_selects_but_cannot_insert() {
    let c = Cluster::start_with_http(2);
    let http = c.http.clone().expect("http address");
    c.ok("", "CREATE DATABASE db1 VGROUPS 2");
    c.ok("", "CREATE DATABASE secret");
    c.ok("db1", "CREATE STABLE st (ts TIMESTAMP, v INT) TAGS (g INT)");
    c.ok(
        "db1",
        "INSERT INTO t1 USING st TAGS (1) VALUES (1000, 1) (2000, 2)",
    );
    c.ok("", "CREATE USER reader PASS 'rpw'");
    c.ok("", "GRANT READ ON db1 TO reader");

    let q = |sql: &str| shell_as(&c.mnode_addr, "reader", "rpw", "db1", sql);
    assert_eq!(
        rows(&q("SELECT COUNT(*) FROM st").expect("select")),
        vec!["2"]
    );
    q("DESCRIBE st").expect("describe");
    q("SHOW STABLES").expect("show stables");
    let dbs = q("SHOW DATABASES").expect("show databases");
    assert!(dbs.contains("db1") && !dbs.contains("secret"), "{dbs}");

    let e = q("INSERT INTO t1 USING st TAGS (1) VALUES (3000, 3)").unwrap_err();
    assert!(
        e.contains("PermissionDenied: user reader has no WRITE on db1"),
        "{e}"
    );
    let e = q("CREATE STABLE st2 (ts TIMESTAMP, v INT) TAGS (g INT)").unwrap_err();
    assert!(
        e.contains("PermissionDenied: user reader has no WRITE on db1"),
        "{e}"
    );
    let e = q("DELETE FROM st").unwrap_err();
    assert!(e.contains("PermissionDenied"), "{e}");
    let e = q("DROP DATABASE db1").unwrap_err();
    assert!(e.contains("PermissionDenied: only a superuser"), "{e}");
    let e = q("CREATE USER x PASS 'x'").unwrap_err();
    assert!(
        e.contains("PermissionDenied: only a superuser may create users"),
        "{e}"
    );
    // A database the user holds nothing on is invisible: refused or "not found", never read.
    c.ok(
        "secret",
        "CREATE STABLE st (ts TIMESTAMP, v INT) TAGS (g INT)",
    );
    let e = shell_as(
        &c.mnode_addr,
        "reader",
        "rpw",
        "",
        "SELECT * FROM secret.st",
    )
    .unwrap_err();
    assert!(
        e.contains("PermissionDenied") || e.contains("not found"),
        "{e}"
    );
    let e = shell_as(&c.mnode_addr, "reader", "rpw", "", "USE secret").unwrap_err();
    assert!(
        e.contains("PermissionDenied: user reader has no READ or WRITE privilege on secret"),
        "{e}"
    );

    // The client library writing straight to the data nodes.
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let client = tidal_client::Client::connect_user(&c.mnode_addr, "reader", "rpw")
            .await
            .expect("login");
        let schema = client.stable("db1", "st").await.expect("schema");
        let mut ts = Column::empty(DataType::Timestamp, 1);
        ts.push(&Value::Timestamp(5000));
        let mut v = Column::empty(DataType::Int, 1);
        v.push(&Value::Int(5));
        let w = TableWrite {
            table: "t1".into(),
            stable: "st".into(),
            tags: Some(vec![Value::Int(1)]),
            columns: vec![ts, v],
        };
        let e = client
            .write("db1", &[schema], vec![w])
            .await
            .expect_err("write must be refused");
        assert_eq!(e.code, StatusCode::PermissionDenied, "{e}");
        assert_eq!(
            e.message,
            "PermissionDenied: user reader has no WRITE on db1"
        );
    });

    // HTTP: the same user over REST and line protocol.
    let auth = basic_auth("reader", "rpw");
    let h = [("Authorization", auth.as_str())];
    let (st, body) = http_request(
        &http,
        "POST",
        "/rest/sql/db1",
        &h,
        b"SELECT COUNT(*) FROM st",
    );
    assert_eq!(st, 200, "{body}");
    assert!(body.contains("[[2]]"), "{body}");
    let (st, body) = http_request(
        &http,
        "POST",
        "/write?db=db1&precision=ms",
        &h,
        b"m2,host=a v=9i 9000",
    );
    assert_eq!(st, 403, "{body}");
    assert!(
        body.contains("PermissionDenied: user reader has no WRITE on db1"),
        "{body}"
    );
    let (st, body) = http_request(
        &http,
        "POST",
        "/rest/sql",
        &h,
        b"INSERT INTO db1.t1 USING db1.st TAGS (1) VALUES (9000, 9)",
    );
    assert!(st == 403, "{st} {body}");

    // Nothing was written by any of the refused attempts.
    assert_eq!(rows(&c.ok("db1", "SELECT COUNT(*) FROM st")), vec!["2"]);
}
