//! SHOW CREATE DATABASE / STABLE / TABLE return SQL that, run on an empty cluster, recreates
//! the objects: the second cluster's SHOW CREATE output, DESCRIBE (types, ENCODE, COMPRESS,
//! LEVEL) and tag values equal the first's, for awkward names and every tag type.

mod common;

use common::Cluster;
use tidal_client::Client;
use tidal_common::{Batch, Value};

const SETUP: &[&str] = &[
    "CREATE DATABASE rt VGROUPS 3 PRECISION 'ns' KEEP 400d DURATION 36h BUFFER 48 WAL_LEVEL 1 \
     WAL_FSYNC_PERIOD 1500 CACHEMODEL 'both' CACHESIZE 3 STT_TRIGGER 5 MINROWS 64 MAXROWS 1024 COMP 0",
    "CREATE STABLE meters (ts TIMESTAMP ENCODE 'delta-d', current FLOAT ENCODE 'gorilla' \
     COMPRESS 'zstd' LEVEL 'high', voltage INT COMPRESS 'lz4', phase DOUBLE LEVEL 'low', \
     note VARCHAR(40) COMPRESS 'disabled', ok BOOL ENCODE 'bit-packing', big BIGINT UNSIGNED, \
     tiny TINYINT) TAGS (location VARCHAR(64), group_id INT, rating DOUBLE, since TIMESTAMP, \
     code NCHAR(8), active BOOL, serial BIGINT UNSIGNED, small SMALLINT, ratio FLOAT)",
    "CREATE STABLE `Mixed_Case` (ts TIMESTAMP, `select` DOUBLE) TAGS (`from` VARCHAR(10))",
    "CREATE TABLE d1 USING meters TAGS ('San Francisco, CA', 2, 1.5, 1700000000000000000, \
     'ab''c', true, 18446744073709551615, -32768, 0.1)",
    "CREATE TABLE d2 USING meters (location, group_id) TAGS ('it''s \\\\ a \"quote\"', -3)",
    "CREATE TABLE d3 USING meters TAGS ('Zürich ☃', -2147483648, -1e300, -5, 'ünï', false, 0, 7, 3.25)",
    "CREATE TABLE `Odd_Name` USING `Mixed_Case` TAGS ('x`y')",
];

async fn one_row(c: &Client, db: &str, sql: &str) -> Vec<Value> {
    let b = batch(c, db, sql).await;
    assert_eq!(b.num_rows(), 1, "{sql}");
    b.row(0)
}

async fn batch(c: &Client, db: &str, sql: &str) -> Batch {
    c.execute(sql, db)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .batch
        .unwrap_or_else(|| panic!("{sql} returned no rows"))
}

fn text(v: &Value) -> String {
    match v {
        Value::Str(s) => s.clone(),
        v => panic!("expected text, got {v:?}"),
    }
}

/// Everything that describes the objects: the SHOW CREATE statements, DESCRIBE of each
/// STABLE and the tags of every subtable.
async fn snapshot(c: &Client) -> (Vec<String>, Vec<Vec<Vec<Value>>>) {
    let mut ddl = vec![text(&one_row(c, "", "SHOW CREATE DATABASE rt").await[1])];
    for st in ["meters", "`Mixed_Case`"] {
        ddl.push(text(
            &one_row(c, "rt", &format!("SHOW CREATE STABLE {st}")).await[1],
        ));
    }
    for t in ["d1", "d2", "d3", "`Odd_Name`"] {
        ddl.push(text(
            &one_row(c, "rt", &format!("SHOW CREATE TABLE {t}")).await[1],
        ));
    }
    let mut described = Vec::new();
    for sql in [
        "DESCRIBE meters",
        "DESCRIBE `Mixed_Case`",
        "SHOW TABLE TAGS FROM meters",
        "SHOW TABLE TAGS FROM `Mixed_Case`",
    ] {
        let b = batch(c, "rt", sql).await;
        described.push((0..b.num_rows()).map(|r| b.row(r)).collect());
    }
    (ddl, described)
}

#[test]
fn show_create_recreates_the_objects_on_an_empty_cluster() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let a = Cluster::start(1);
    let (ddl, described) = rt.block_on(async {
        let c = Client::connect(&a.mnode_addr).await.unwrap();
        for (k, sql) in SETUP.iter().enumerate() {
            let db = if k == 0 { "" } else { "rt" };
            c.execute(sql, db)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
        snapshot(&c).await
    });
    // Spot checks: the statements carry what the round trip is meant to preserve.
    assert!(
        ddl[0].starts_with("CREATE DATABASE `rt` VGROUPS 3 "),
        "{}",
        ddl[0]
    );
    for opt in [
        "PRECISION 'ns'",
        "KEEP 400d",
        "DURATION 36h",
        "BUFFER 48",
        "WAL_LEVEL 1",
        "WAL_FSYNC_PERIOD 1500",
        "CACHEMODEL 'both'",
        "CACHESIZE 3",
        "STT_TRIGGER 5",
        "MINROWS 64",
        "MAXROWS 1024",
        "COMP 0",
    ] {
        assert!(ddl[0].contains(opt), "{opt} missing: {}", ddl[0]);
    }
    assert!(
        ddl[1].contains("`current` FLOAT ENCODE 'gorilla' COMPRESS 'zstd' LEVEL 'high'"),
        "{}",
        ddl[1]
    );
    assert!(
        ddl[1].contains("TAGS (`location` VARCHAR(64)"),
        "{}",
        ddl[1]
    );
    assert!(ddl[3].contains("'San Francisco, CA'"), "{}", ddl[3]);
    // d2 was created with two of nine tags: the rest come back as NULL.
    assert!(
        ddl[4].ends_with("NULL, NULL, NULL, NULL, NULL, NULL, NULL)"),
        "{}",
        ddl[4]
    );
    drop(a);

    let b = Cluster::start(1);
    let again = rt.block_on(async {
        let c = Client::connect(&b.mnode_addr).await.unwrap();
        c.execute(&ddl[0], "")
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", ddl[0]));
        for sql in &ddl[1..] {
            c.execute(sql, "rt")
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
        snapshot(&c).await
    });
    assert_eq!(again.0, ddl, "SHOW CREATE differs after the round trip");
    assert_eq!(
        again.1, described,
        "DESCRIBE or tags differ after the round trip"
    );
}
