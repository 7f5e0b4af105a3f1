//! SHOW DNODES, MNODES, VGROUPS, VNODES and DATABASES (and the information_schema tables over
//! the same catalog) describe the running cluster: the columns are there, the vgroups' hash
//! ranges tile the hash space, their table and (deduplicated) row counts add up to what was
//! written, flushed data shows as bytes on disk, and every data node heartbeats. The values vary from run to run (ports, times, sizes), so this checks
//! structure and sums instead of a golden transcript.

mod common;

use common::Cluster;
use std::time::{SystemTime, UNIX_EPOCH};
use tidal_client::Client;
use tidal_common::{Batch, Value};

struct Rows {
    batch: Batch,
}

impl Rows {
    fn names(&self) -> Vec<&str> {
        self.batch.fields.iter().map(|f| f.name.as_str()).collect()
    }
    fn len(&self) -> usize {
        self.batch.num_rows()
    }
    fn get(&self, row: usize, col: &str) -> Value {
        let k = self
            .batch
            .fields
            .iter()
            .position(|f| f.name == col)
            .unwrap_or_else(|| panic!("no column {col} in {:?}", self.names()));
        self.batch.columns[k].get(row)
    }
    fn int(&self, row: usize, col: &str) -> i64 {
        match self.get(row, col) {
            Value::Int(n) | Value::Timestamp(n) => n,
            Value::UInt(n) => n as i64,
            v => panic!("{col} of row {row} is {v:?}, not a number"),
        }
    }
    fn str(&self, row: usize, col: &str) -> String {
        match self.get(row, col) {
            Value::Str(s) => s,
            v => panic!("{col} of row {row} is {v:?}, not a string"),
        }
    }
}

async fn show(c: &Client, db: &str, sql: &str) -> Rows {
    let r = c
        .execute(sql, db)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    Rows {
        batch: r.batch.unwrap_or_else(|| panic!("{sql} returned no rows")),
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[test]
fn show_describes_the_running_cluster() {
    let cluster = Cluster::start(2);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let c = Client::connect(&cluster.mnode_addr).await.unwrap();
        c.execute("CREATE DATABASE iot VGROUPS 4", "").await.unwrap();
        c.execute(
            "CREATE STABLE m (ts TIMESTAMP, v DOUBLE) TAGS (k INT)",
            "iot",
        )
        .await
        .unwrap();
        c.execute("CREATE STABLE other (ts TIMESTAMP, n INT) TAGS (k INT)", "iot")
            .await
            .unwrap();
        // 12 subtables with 1..=12 rows: 78 rows of m, plus 5 rows of `other`.
        let mut expected_rows = 0;
        for t in 1..=12 {
            let values: Vec<String> = (0..t)
                .map(|r| format!("({}, {r}.5)", 1_700_000_000_000i64 + r * 1000))
                .collect();
            c.execute(
                &format!(
                    "INSERT INTO t{t} USING m TAGS ({t}) VALUES {}",
                    values.join(" ")
                ),
                "iot",
            )
            .await
            .unwrap();
            expected_rows += t;
        }
        c.execute(
            "INSERT INTO o1 USING other TAGS (1) VALUES (1700000000000, 1) (1700000001000, 2) (1700000002000, 3) (1700000003000, 4) (1700000004000, 5)",
            "iot",
        )
        .await
        .unwrap();
        expected_rows += 5;
        c.execute("FLUSH DATABASE iot", "").await.unwrap();
        // Rewriting existing timestamps replaces rows: the counts must not grow.
        c.execute(
            "INSERT INTO t12 VALUES (1700000000000, 99) (1700000001000, 98)",
            "iot",
        )
        .await
        .unwrap();

        let dnodes = show(&c, "", "SHOW DNODES").await;
        assert_eq!(
            dnodes.names(),
            ["id", "endpoint", "vnodes", "status", "create_time", "last_heartbeat"]
        );
        assert_eq!(dnodes.len(), 2);
        let mut endpoints = Vec::new();
        let mut vnodes = 0;
        for r in 0..dnodes.len() {
            assert_eq!(dnodes.str(r, "status"), "ready");
            endpoints.push(dnodes.str(r, "endpoint"));
            vnodes += dnodes.int(r, "vnodes");
            let hb = dnodes.int(r, "last_heartbeat");
            assert!(
                (now_ms() - hb).abs() < 10_000,
                "last heartbeat {hb} is not recent"
            );
            assert!(dnodes.int(r, "create_time") <= hb);
        }
        assert_eq!(vnodes, 4);

        let mnodes = show(&c, "", "SHOW MNODES").await;
        assert_eq!(mnodes.names(), ["id", "endpoint", "role", "status"]);
        assert_eq!(mnodes.len(), 1);
        assert_eq!(mnodes.str(0, "endpoint"), cluster.mnode_addr);
        assert_eq!(mnodes.str(0, "role"), "leader");
        assert_eq!(mnodes.str(0, "status"), "ready");

        let vg = show(&c, "iot", "SHOW VGROUPS").await;
        assert_eq!(
            vg.names(),
            [
                "vgroup_id",
                "db_name",
                "hash_begin",
                "hash_end",
                "dnode_id",
                "dnode_endpoint",
                "status",
                "tables",
                "rows",
                "disk_bytes",
                "wal_bytes",
                "mem_bytes"
            ]
        );
        assert_eq!(vg.len(), 4);
        let (mut tables, mut rows, mut disk) = (0, 0, 0);
        let mut next_begin = 0i64;
        for r in 0..vg.len() {
            assert_eq!(vg.str(r, "db_name"), "iot");
            assert_eq!(vg.str(r, "status"), "ready");
            assert!(endpoints.contains(&vg.str(r, "dnode_endpoint")));
            assert_eq!(vg.int(r, "hash_begin"), next_begin, "ranges must tile");
            next_begin = vg.int(r, "hash_end") + 1;
            tables += vg.int(r, "tables");
            rows += vg.int(r, "rows");
            disk += vg.int(r, "disk_bytes");
            assert!(vg.int(r, "wal_bytes") >= 0 && vg.int(r, "mem_bytes") >= 0);
        }
        assert_eq!(next_begin, 1 << 32, "the last range ends at 2^32-1");
        assert_eq!(tables, 13);
        assert_eq!(rows, expected_rows);
        assert!(disk > 0, "flushed data shows as bytes on disk");
        // `db.VGROUPS` needs no current database.
        assert_eq!(show(&c, "", "SHOW iot.VGROUPS").await.len(), 4);

        // SHOW VNODES: the same placement from the data nodes' side, every vnode open.
        let vn = show(&c, "", "SHOW VNODES").await;
        assert_eq!(
            vn.names(),
            ["dnode_id", "vgroup_id", "db_name", "status", "dnode_endpoint"]
        );
        assert_eq!(vn.len(), 4);
        for r in 0..vn.len() {
            let k = (0..vg.len())
                .find(|k| vg.int(*k, "vgroup_id") == vn.int(r, "vgroup_id"))
                .expect("a vnode of a known vgroup");
            assert_eq!(vn.int(r, "dnode_id"), vg.int(k, "dnode_id"));
            assert_eq!(vn.str(r, "dnode_endpoint"), vg.str(k, "dnode_endpoint"));
            assert_eq!(vn.str(r, "db_name"), "iot");
            assert_eq!(vn.str(r, "status"), "leader");
        }
        for d in 0..dnodes.len() {
            let (id, ep) = (dnodes.int(d, "id"), dnodes.str(d, "endpoint"));
            let expect: Vec<i64> = (0..vn.len())
                .filter(|r| vn.int(*r, "dnode_id") == id)
                .map(|r| vn.int(r, "vgroup_id"))
                .collect();
            assert_eq!(expect.len() as i64, dnodes.int(d, "vnodes"));
            for sql in [
                format!("SHOW VNODES ON DNODE {id}"),
                format!("SHOW {id} VNODES"),
                format!("SHOW VNODES '{ep}'"),
            ] {
                let on = show(&c, "", &sql).await;
                let got: Vec<i64> = (0..on.len()).map(|r| on.int(r, "vgroup_id")).collect();
                assert_eq!(got, expect, "{sql}");
            }
        }

        let dbs = show(&c, "", "SHOW DATABASES").await;
        assert_eq!(dbs.len(), 1);
        for col in [
            "name",
            "create_time",
            "vgroups",
            "ntables",
            "replica",
            "duration",
            "keep",
            "buffer",
            "minrows",
            "maxrows",
            "comp",
            "precision",
            "status",
            "cachemodel",
            "cachesize",
            "wal_level",
            "wal_fsync_period",
            "stt_trigger",
        ] {
            assert!(dbs.names().contains(&col), "SHOW DATABASES lacks {col}");
        }
        assert_eq!(dbs.str(0, "name"), "iot");
        assert_eq!(dbs.int(0, "vgroups"), 4);
        assert_eq!(dbs.int(0, "ntables"), 13);
        assert_eq!(dbs.str(0, "status"), "ready");
        assert_eq!(dbs.str(0, "precision"), "ms");
        assert!((now_ms() - dbs.int(0, "create_time")).abs() < 120_000);

        // information_schema: the same catalog as tables. ins_vgroups is SHOW VGROUPS over
        // every database.
        let ivg = show(&c, "", "SELECT * FROM information_schema.ins_vgroups").await;
        assert_eq!(ivg.names(), vg.names());
        assert_eq!(ivg.len(), 4);
        let (mut itables, mut irows) = (0, 0);
        for r in 0..ivg.len() {
            itables += ivg.int(r, "tables");
            irows += ivg.int(r, "rows");
        }
        assert_eq!((itables, irows), (13, expected_rows));
        // One tag each: a row per subtable.
        let tags = show(&c, "", "SELECT * FROM information_schema.ins_tags").await;
        assert_eq!(
            tags.names(),
            ["table_name", "db_name", "stable_name", "tag_name", "tag_type", "tag_value"]
        );
        assert_eq!(tags.len(), 13);
        for r in 0..tags.len() {
            let name = tags.str(r, "table_name");
            let expect = if name == "o1" { "1".to_string() } else { name[1..].to_string() };
            assert_eq!(tags.str(r, "tag_value"), expect, "{name}");
        }
        // Two columns per STABLE and per subtable, tags left out.
        let cols = show(&c, "", "SELECT * FROM information_schema.ins_columns").await;
        for col in ["table_name", "db_name", "table_type", "col_name", "col_type", "col_length"] {
            assert!(cols.names().contains(&col), "ins_columns lacks {col}");
        }
        assert_eq!(cols.len(), 2 * (2 + 13));
        let supers = (0..cols.len())
            .filter(|r| cols.str(*r, "table_type") == "SUPER_TABLE")
            .count();
        assert_eq!(supers, 4);
        assert!((0..cols.len()).all(|r| cols.str(r, "col_name") != "k"));
        // SHOW TABLE DISTRIBUTED: the rows of m are in STT files since the FLUSH, but for the
        // two rewritten after it, which the memtable holds as well (layers count rows as
        // stored); a row per vgroup holding a subtable of m, then their total.
        let dist = |r: &Rows, k: usize| {
            (
                r.int(k, "block_rows"),
                r.int(k, "stt_rows"),
                r.int(k, "in_mem_rows"),
            )
        };
        let d = show(&c, "iot", "SHOW TABLE DISTRIBUTED m").await;
        for col in [
            "db_name",
            "table_name",
            "vgroup_id",
            "total_tables",
            "total_blocks",
            "total_size",
            "block_rows",
            "min_rows",
            "max_rows",
            "avg_rows",
            "stt_rows",
            "in_mem_rows",
        ] {
            assert!(d.names().contains(&col), "SHOW TABLE DISTRIBUTED lacks {col}");
        }
        let total = d.len() - 1;
        assert_eq!(d.get(total, "vgroup_id"), Value::Null, "the last row is the total");
        let holding = (0..vg.len()).filter(|k| vg.int(*k, "tables") > 0).count();
        assert!(total >= 1 && total <= holding, "{total} of {holding}");
        let (mut sum, mut tables) = ((0, 0, 0), 0);
        for k in 0..total {
            assert_eq!(d.str(k, "table_name"), "m");
            assert_eq!(d.int(k, "total_vgroups"), total as i64);
            let (b, s, m) = dist(&d, k);
            sum = (sum.0 + b, sum.1 + s, sum.2 + m);
            tables += d.int(k, "total_tables");
        }
        assert_eq!(dist(&d, total), sum, "the total row adds the vgroups up");
        assert_eq!((tables, d.int(total, "total_tables")), (12, 12));
        assert_eq!(sum, (0, 78, 2), "flushed to STT; two rewritten rows in memory");
        // COMPACT merges everything into data blocks, each timestamp once.
        c.execute("COMPACT DATABASE iot", "").await.unwrap();
        let d = show(&c, "iot", "SHOW TABLE DISTRIBUTED iot.m").await;
        let total = d.len() - 1;
        assert_eq!(dist(&d, total), (78, 0, 0));
        let count = show(&c, "iot", "SELECT COUNT(*) FROM m").await.int(0, "count(*)");
        assert_eq!(count, 78);
        for k in 0..=total {
            let blocks = d.int(k, "total_blocks");
            assert!(blocks >= 1 && d.int(k, "total_size") > 0);
            let (min, max) = (d.int(k, "min_rows"), d.int(k, "max_rows"));
            let Value::Float(avg) = d.get(k, "avg_rows") else {
                panic!("avg_rows")
            };
            assert!(1 <= min && min as f64 <= avg && avg <= max as f64 && max <= 4096);
            assert!((avg * blocks as f64 - d.int(k, "block_rows") as f64).abs() < 1e-6);
        }
        // A subtable: its vgroup only (as SHOW TABLES places it), no total row.
        let t12 = show(&c, "iot", "SHOW TABLE DISTRIBUTED t12").await;
        assert_eq!(t12.len(), 1);
        let tabs = show(&c, "iot", "SHOW TABLES LIKE 't12'").await;
        assert_eq!(t12.int(0, "vgroup_id"), tabs.int(0, "vgroup_id"));
        assert_eq!((t12.int(0, "total_tables"), t12.int(0, "total_vgroups")), (1, 1));
        assert_eq!(dist(&t12, 0), (12, 0, 0));
        let e = c
            .execute("SHOW TABLE DISTRIBUTED nosuch", "iot")
            .await
            .expect_err("no such table");
        assert!(e.message.contains("table 'nosuch' does not exist"), "{e}");

        // Users: no password or hash, whatever the column is called.
        let users = show(&c, "", "SELECT * FROM information_schema.ins_users").await;
        assert_eq!(users.len(), 1);
        assert_eq!(users.str(0, "name"), "root");
        for name in users.names() {
            assert!(!name.contains("pass") && !name.contains("hash"), "{name}");
        }
        for k in 0..users.batch.num_columns() {
            if let Value::Str(v) = users.batch.columns[k].get(0) {
                assert!(!v.starts_with("$argon2"), "a hash in ins_users: {v}");
            }
        }
    });

    // A data node that stops answering shows as such instead of failing the SHOW.
    let mut cluster = cluster;
    cluster.kill_dnode(0);
    rt.block_on(async {
        let c = Client::connect(&cluster.mnode_addr).await.unwrap();
        let vg = show(&c, "iot", "SHOW VGROUPS").await;
        let offline: Vec<usize> = (0..vg.len())
            .filter(|r| vg.str(*r, "status") == "offline")
            .collect();
        assert!(!offline.is_empty() && offline.len() < 4, "{offline:?}");
        let offline_count = offline.len();
        for r in offline {
            assert_eq!(vg.get(r, "rows"), Value::Null);
            assert_eq!(vg.get(r, "tables"), Value::Null);
        }
        // Its vnodes show as offline; the other node's still lead their vgroups.
        let vn = show(&c, "", "SHOW VNODES").await;
        assert_eq!(vn.len(), 4);
        let down: Vec<String> = (0..vn.len())
            .filter(|r| vn.str(*r, "status") == "offline")
            .map(|r| vn.str(r, "dnode_endpoint"))
            .collect();
        assert_eq!(down.len(), offline_count, "{down:?}");
        assert!(
            down.iter().all(|e| *e == down[0]),
            "one node is down: {down:?}"
        );
        assert!((0..vn.len())
            .all(|r| vn.str(r, "status") == "leader" || vn.str(r, "dnode_endpoint") == down[0]));
        let dbs = show(&c, "", "SHOW DATABASES").await;
        assert!(dbs.str(0, "status").contains("vgroups offline"));
        assert_eq!(dbs.get(0, "ntables"), Value::Null);
    });
}

/// SHOW CLUSTER: the id and creation time belong to the cluster (the same after the mnode
/// restarts), the uptime to the running mnode, the name is the mnode's endpoint.
#[test]
fn show_cluster_is_the_mnodes_view() {
    let mut cluster = Cluster::start(1);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let before = rt.block_on(async {
        let c = Client::connect(&cluster.mnode_addr).await.unwrap();
        let r = show(&c, "", "SHOW CLUSTER").await;
        assert_eq!(
            r.names(),
            [
                "id",
                "name",
                "uptime",
                "create_time",
                "version",
                "expire_time"
            ]
        );
        assert_eq!(r.len(), 1);
        assert!(r.int(0, "id") > 0);
        assert_eq!(r.str(0, "name"), cluster.mnode_addr);
        assert!((0..600).contains(&r.int(0, "uptime")));
        let created = r.int(0, "create_time");
        assert!((now_ms() - created).abs() < 120_000, "{created}");
        assert_eq!(r.str(0, "version"), env!("CARGO_PKG_VERSION"));
        assert_eq!(r.get(0, "expire_time"), Value::Null, "nothing expires");
        let same = show(&c, "", "SELECT * FROM information_schema.ins_cluster").await;
        assert_eq!(same.int(0, "id"), r.int(0, "id"));
        (r.int(0, "id"), created)
    });
    // The uptime counts from this mnode's start; identity and age are the catalog's.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    rt.block_on(async {
        let c = Client::connect(&cluster.mnode_addr).await.unwrap();
        assert!(show(&c, "", "SHOW CLUSTER").await.int(0, "uptime") >= 1);
    });
    cluster.restart_mnode();
    rt.block_on(async {
        let c = Client::connect(&cluster.mnode_addr).await.unwrap();
        let r = show(&c, "", "SHOW CLUSTER").await;
        assert_eq!((r.int(0, "id"), r.int(0, "create_time")), before);
        assert!(r.int(0, "uptime") < 60);
    });
}

/// SHOW VARIABLES is the configuration of the node that runs it, SHOW DNODE n VARIABLES that
/// of data node n, each as the process resolved it (values and their source), secrets
/// hidden, superusers only (an ordinary user sees only the query limits of SHOW VARIABLES).
#[test]
fn show_variables_are_each_nodes_configuration() {
    let cluster = Cluster::start(2);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let c = Client::connect(&cluster.mnode_addr).await.unwrap();
        let value = |r: &Rows, name: &str| -> (Value, String) {
            let k = (0..r.len())
                .find(|k| r.str(*k, "name") == name)
                .unwrap_or_else(|| panic!("no variable {name}"));
            (r.get(k, "value"), r.str(k, "source"))
        };
        let m = show(&c, "", "SHOW VARIABLES").await;
        assert_eq!(m.names(), ["name", "value", "scope", "source", "info"]);
        let data = cluster.data().join("mnode").to_string_lossy().into_owned();
        assert_eq!(value(&m, "data"), (Value::Str(data), "--data".into()));
        assert_eq!(
            value(&m, "dnode_timeout_ms"),
            (Value::Str("10000".into()), "default".into())
        );
        // An mnode key, not a data node's.
        assert!((0..m.len()).all(|k| m.str(k, "name") != "heartbeat_interval_ms"));
        for k in 0..m.len() {
            assert_eq!(m.str(k, "scope"), "server");
            assert!(!m.str(k, "info").is_empty(), "{}", m.str(k, "name"));
            if let Value::Str(v) = m.get(k, "value") {
                assert!(!v.contains("taosdata"), "a password in SHOW VARIABLES");
            }
        }
        let (pw, _) = value(&m, "root_password");
        assert!(
            pw == Value::Null || pw == Value::Str("(hidden)".into()),
            "{pw:?}"
        );
        assert_eq!(
            show(&c, "", "SHOW VARIABLES LIKE 'query%'").await.len(),
            2,
            "query_timeout_ms and query_memory_max_bytes"
        );

        let dnodes = show(&c, "", "SHOW DNODES").await;
        assert_eq!(dnodes.len(), 2);
        for r in 0..dnodes.len() {
            let id = dnodes.int(r, "id");
            let d = show(&c, "", &format!("SHOW DNODE {id} VARIABLES")).await;
            assert_eq!(
                d.names(),
                ["dnode_id", "name", "value", "scope", "source", "info"]
            );
            assert!((0..d.len()).all(|k| d.int(k, "dnode_id") == id));
            assert_eq!(
                value(&d, "mnode"),
                (Value::Str(cluster.mnode_addr.clone()), "--mnode".into())
            );
            // Each data node has its own directory: the variables are that node's.
            let (dir, _) = value(&d, "data");
            let Value::Str(dir) = dir else {
                panic!("data is {dir:?}")
            };
            let i = (id - 1) as usize;
            assert!(dir.ends_with(&format!("dnode-{i}")), "dnode {id}: {dir}");
            assert_eq!(value(&d, "advertise").0, Value::Null, "unset stays unset");
        }
        let e = c
            .execute("SHOW DNODE 99 VARIABLES", "")
            .await
            .expect_err("no data node 99");
        assert!(e.message.contains("data node 99 does not exist"), "{e}");

        // An ordinary user sees only the limits of their own statements, and no data
        // node's configuration.
        c.execute("CREATE USER plain PASS 'plain_pw'", "")
            .await
            .unwrap();
        let u = Client::connect_user(&cluster.mnode_addr, "plain", "plain_pw")
            .await
            .unwrap();
        let mine = show(&u, "", "SHOW VARIABLES").await;
        let mut names: Vec<String> = (0..mine.len()).map(|k| mine.str(k, "name")).collect();
        names.sort();
        assert_eq!(names, ["query_memory_max_bytes", "query_timeout_ms"]);
        let e = u
            .execute("SHOW DNODE 1 VARIABLES", "")
            .await
            .expect_err("SHOW DNODE 1 VARIABLES");
        assert!(e.message.contains("superuser"), "{e}");
    });
}
