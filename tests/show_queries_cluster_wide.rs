//! SHOW QUERIES and KILL QUERY cover the whole cluster: a long query coordinated by one data
//! node's frontend is listed by SHOW QUERIES on the mnode and on the other data node (with
//! its fragments in flight), KILL QUERY sent to the mnode stops it on that data node ("query
//! <id> was killed"), and afterwards no node lists it and killing it again says it is gone.

mod common;

use common::Cluster;
use std::time::{Duration, Instant};
use tidal_client::{Client, ConnectOptions};
use tidal_common::Value;

const SUBTABLES: usize = 8;
const ROWS_PER_SUBTABLE: usize = 250_000;
const WRITE_ROWS: usize = 25_000;
/// Every row is its own window and the filter defeats block statistics: seconds of work.
const LONG_QUERY: &str =
    "SELECT COUNT(*), AVG(v), STDDEV(v), SPREAD(v) FROM m WHERE v >= 0 INTERVAL(1a)";

/// The kill id and state of LONG_QUERY in SHOW QUERIES run through `c`, if listed.
async fn listed(c: &Client) -> Option<(String, String)> {
    let list = c.execute("SHOW QUERIES", "").await.unwrap().batch.unwrap();
    let col = |name: &str| list.fields.iter().position(|f| f.name == name).unwrap();
    (0..list.num_rows())
        .map(|r| list.row(r))
        .find(|row| row[col("sql")] == Value::Str(LONG_QUERY.into()))
        .map(|row| match (&row[col("kill_id")], &row[col("state")]) {
            (Value::Str(id), Value::Str(state)) => (id.clone(), state.clone()),
            other => panic!("row {other:?}"),
        })
}

#[test]
fn show_and_kill_queries_across_the_cluster() {
    let cluster = Cluster::start(2);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let c = Client::connect(&cluster.mnode_addr).await.unwrap();
        common::load_scan_data(&c, "sq", SUBTABLES, ROWS_PER_SUBTABLE, WRITE_ROWS).await;
        let dnode = |i: usize| cluster.dnodes[i].as_ref().unwrap().addr.clone();

        // The long query, coordinated by data node 0's frontend.
        let options = ConnectOptions::default().plan_queries_locally(false);
        let runner = Client::connect_with(&dnode(0), options).await.unwrap();
        let started = Instant::now();
        let query = tokio::spawn(async move {
            let r = runner.execute_with_timeout(LONG_QUERY, "sq", Some(0)).await;
            (r, Instant::now())
        });

        // The mnode's frontend lists it, running on the data node.
        let at_mnode = Client::connect(&cluster.mnode_addr).await.unwrap();
        let id = loop {
            assert!(!query.is_finished(), "the query ended before it was listed");
            assert!(started.elapsed() < Duration::from_secs(30), "never listed");
            if let Some((id, state)) = listed(&at_mnode).await {
                if state == "executing" {
                    break id;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        // So does the other data node's, with the same id.
        let at_dnode1 = Client::connect(&dnode(1)).await.unwrap();
        assert_eq!(listed(&at_dnode1).await.map(|(id, _)| id), Some(id.clone()));
        // The coordinating node's own list has it too (once, not once per address).
        let at_dnode0 = Client::connect(&dnode(0)).await.unwrap();
        let list = at_dnode0
            .execute("SHOW QUERIES", "")
            .await
            .unwrap()
            .batch
            .unwrap();
        let sql = list.fields.iter().position(|f| f.name == "sql").unwrap();
        let copies = (0..list.num_rows())
            .filter(|r| list.row(*r)[sql] == Value::Str(LONG_QUERY.into()))
            .count();
        assert_eq!(copies, 1);

        // KILL QUERY through the mnode stops it on data node 0.
        assert!(!query.is_finished(), "the query ended before the kill");
        let killed_at = Instant::now();
        at_mnode
            .execute(&format!("KILL QUERY '{id}'"), "")
            .await
            .unwrap();
        let (result, ended) = query.await.unwrap();
        let err = result.expect_err("a killed query fails");
        assert_eq!(err.message, format!("query {id} was killed"));
        assert!(
            ended - killed_at < Duration::from_secs(2),
            "ended {:?} after KILL",
            ended - killed_at
        );

        // Gone everywhere; a second KILL says so.
        assert!(listed(&at_mnode).await.is_none());
        assert!(listed(&at_dnode1).await.is_none());
        let again = at_dnode1
            .execute(&format!("KILL QUERY '{id}'"), "")
            .await
            .expect_err("killing a finished query");
        assert!(
            again.message.contains("no running query"),
            "{}",
            again.message
        );
        let bad = at_mnode
            .execute("KILL QUERY 'zz:1'", "")
            .await
            .expect_err("an unknown node");
        assert!(
            bad.message
                .contains("no running query 'zz:1' in the cluster"),
            "{}",
            bad.message
        );
    });
}
