//! The client library plans a gathered SELECT itself and sends its fragments straight to the
//! data nodes: the answers (rows, column names, precision) and the errors are the server's,
//! and the server's frontend runs none of those statements. Statements the client does not
//! plan (streaming scans, information_schema, several statements, anything it cannot plan)
//! go to the server as before, and so does every statement of a client connected to a data
//! node.

mod common;

use common::Cluster;
use tidal_client::{Client, ConnectOptions, StatementResult};
use tidal_proto::v1;

/// Gathered plans: aggregates, windows with FILL, PARTITION BY tags, nested queries,
/// LAST_ROW, a subtable, ORDER BY, a SELECT without FROM, and a query no row matches.
const LOCAL: &[&str] = &[
    "SELECT COUNT(*), SUM(v), AVG(v), MIN(v), MAX(v), SPREAD(v) FROM m",
    "SELECT _wstart, COUNT(*), AVG(v) FROM m WHERE ts >= 1700000000000 AND ts < 1700000060000 INTERVAL(10s) FILL(NULL)",
    "SELECT site, COUNT(*), LAST(v) FROM m PARTITION BY site ORDER BY site",
    "SELECT tbname, LAST_ROW(v) FROM m PARTITION BY tbname ORDER BY tbname",
    "SELECT LAST_ROW(ts), LAST_ROW(v) FROM m WHERE site IN ('s1') GROUP BY site",
    "SELECT site FROM (SELECT site, AVG(v) AS a FROM m PARTITION BY site INTERVAL(1m)) WHERE a > 100 GROUP BY site HAVING COUNT(*) > 0 ORDER BY site",
    "SELECT COUNT(*), MAX(v) FROM t3",
    "SELECT 1 + 2, 'x'",
    "SELECT COUNT(*) FROM m WHERE v > 1e9",
    "SELECT COUNT(*) FROM m WHERE site = 'nowhere'",
    "SELECT CURRENT_USER(), USER(), DATABASE(), COUNT(*) FROM m",
];

/// Sent to the server: a scan that streams, information_schema, two statements, and an
/// unknown column (whose error the server words).
const SERVER: &[&str] = &[
    "SELECT ts, v FROM m ORDER BY ts LIMIT 5",
    "SELECT COUNT(*) FROM information_schema.ins_tables WHERE db_name = 'lp'",
    "SELECT COUNT(*) FROM m; SELECT MAX(v) FROM m",
];

/// Fail on both paths with the same error.
const ERRORS: &[&str] = &[
    "SELECT AVG(velocty) FROM m",
    "SELECT COUNT(*) FROM nope",
    "SELECT COUNT(*) FROM other.m",
    "SELECT COUNT(* FROM m",
];

async fn selects_ok(c: &Client) -> u64 {
    let stats = c
        .sql()
        .unwrap()
        .frontend_stats(v1::Empty {})
        .await
        .unwrap()
        .into_inner();
    stats
        .statements
        .iter()
        .filter(|s| s.kind == "select")
        .map(|s| s.ok + s.errors)
        .sum()
}

fn same(sql: &str, local: &StatementResult, server: &StatementResult) {
    let (Some(a), Some(b)) = (&local.batch, &server.batch) else {
        panic!("{sql}: no rows ({:?} / {:?})", local.batch, server.batch);
    };
    assert_eq!(a.fields, b.fields, "{sql}: columns");
    assert_eq!(a.num_rows(), b.num_rows(), "{sql}: rows");
    for i in 0..a.num_rows() {
        assert_eq!(a.row(i), b.row(i), "{sql}: row {i}");
    }
    assert_eq!(local.precision, server.precision, "{sql}: precision");
    assert_eq!(local.affected_rows, server.affected_rows, "{sql}");
    assert_eq!(local.db, server.db, "{sql}: session database");
}

#[test]
fn client_plans_gathered_selects_and_agrees_with_the_server() {
    let cluster = Cluster::start(2);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let server = Client::connect_with(
            &cluster.mnode_addr,
            ConnectOptions::default().plan_queries_locally(false),
        )
        .await
        .unwrap();
        let local = Client::connect(&cluster.mnode_addr).await.unwrap();
        for sql in [
            "CREATE DATABASE lp VGROUPS 4 PRECISION 'ms'",
            "CREATE STABLE lp.m (ts TIMESTAMP, v DOUBLE) TAGS (site VARCHAR(16))",
        ] {
            server.execute(sql, "").await.unwrap();
        }
        let mut insert = String::from("INSERT INTO");
        for t in 0..8 {
            insert.push_str(&format!(" lp.t{t} USING lp.m TAGS ('s{}') VALUES", t % 3));
            for k in 0..50i64 {
                let v = if k % 7 == 3 {
                    "NULL".to_string()
                } else {
                    format!("{}", t as i64 * 100 + k)
                };
                insert.push_str(&format!(" ({}, {v})", 1_700_000_000_000 + k * 1_000));
            }
        }
        server.execute(&insert, "").await.unwrap();

        let before = selects_ok(&server).await;
        let mut results = Vec::new();
        for sql in LOCAL {
            let r = local
                .execute(sql, "lp")
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
            results.push(r);
        }
        assert_eq!(
            selects_ok(&server).await,
            before,
            "the client planned these itself: the frontend ran none"
        );
        for (sql, r) in LOCAL.iter().zip(&results) {
            let s = server.execute(sql, "lp").await.unwrap();
            same(sql, r, &s);
        }
        // A sanity check of the data itself, so that two equally wrong paths cannot agree.
        let n = &results[0].batch.as_ref().unwrap().row(0)[0];
        assert_eq!(*n, tidal_common::Value::Int(400));

        let before = selects_ok(&server).await;
        for sql in SERVER {
            let r = local.execute(sql, "lp").await.unwrap();
            let s = server.execute(sql, "lp").await.unwrap();
            same(sql, &r, &s);
        }
        assert!(
            selects_ok(&server).await >= before + SERVER.len() as u64,
            "these ran on the server"
        );

        for sql in ERRORS {
            let a = local.execute(sql, "lp").await.expect_err(sql);
            let b = server.execute(sql, "lp").await.expect_err(sql);
            assert_eq!((a.code, &a.message), (b.code, &b.message), "{sql}");
        }

        // A client connected to a data node (it serves SQL, but no catalog) sends every
        // statement there.
        let at_dnode = Client::connect(&cluster.dnodes[0].as_ref().unwrap().addr)
            .await
            .unwrap();
        let before = selects_ok(&at_dnode).await;
        let r = at_dnode.execute(LOCAL[0], "lp").await.unwrap();
        same(LOCAL[0], &r, &results[0]);
        assert_eq!(
            selects_ok(&at_dnode).await,
            before + 1,
            "run by the data node"
        );

        // The data nodes check the caller's privileges: a user without READ on the database
        // is refused as through the server.
        server
            .execute("CREATE USER reader PASS 'reader_pw1'", "")
            .await
            .unwrap();
        let as_user = |local: bool| {
            let options = ConnectOptions::user("reader", "reader_pw1").plan_queries_locally(local);
            Client::connect_with(&cluster.mnode_addr, options)
        };
        let (u_local, u_server) = (as_user(true).await.unwrap(), as_user(false).await.unwrap());
        let sql = "SELECT COUNT(*) FROM m";
        let a = u_local.execute(sql, "lp").await.expect_err("no READ");
        let b = u_server.execute(sql, "lp").await.expect_err("no READ");
        assert_eq!(a.code, b.code, "{a} / {b}");
        server
            .execute("GRANT READ ON lp TO reader", "")
            .await
            .unwrap();
        let a = u_local.execute(sql, "lp").await.unwrap();
        let b = u_server.execute(sql, "lp").await.unwrap();
        same(sql, &a, &b);

        // CURRENT_USER() is the session's user whichever side plans the query.
        let sql = "SELECT CURRENT_USER(), USER(), COUNT(*) FROM m";
        let before = selects_ok(&server).await;
        let a = u_local.execute(sql, "lp").await.unwrap();
        assert_eq!(selects_ok(&server).await, before, "planned by the client");
        let b = u_server.execute(sql, "lp").await.unwrap();
        same(sql, &a, &b);
        let row = a.batch.as_ref().unwrap().row(0);
        assert_eq!(row[0], tidal_common::Value::Str("reader".into()));
        assert_eq!(row[1], tidal_common::Value::Str("reader".into()));
        let sql = "SELECT CURRENT_USER()";
        let a = u_local.execute(sql, "").await.unwrap();
        let b = u_server.execute(sql, "").await.unwrap();
        same(sql, &a, &b);
        let row = a.batch.as_ref().unwrap().row(0);
        assert_eq!(row[0], tidal_common::Value::Str("reader".into()));
    });
}
