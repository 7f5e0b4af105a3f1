//! A client with a stale routing map is told "wrong vgroup / vnode not found" by the data
//! node, refreshes its map from the mnode, and retries: no row is lost or duplicated.

mod common;

use common::{rows, Cluster, READINGS};
use tidal_common::{Column, DataType, StableSchema, TableWrite, Value};

fn writes(tables: &[&str], ts: i64) -> Vec<TableWrite> {
    tables
        .iter()
        .map(|t| {
            let mut cols = vec![Column::empty(DataType::Timestamp, 1)];
            cols[0].push(&Value::Timestamp(ts));
            for i in 0..7 {
                let mut c = Column::empty(DataType::Double, 1);
                c.push(&Value::Float(i as f64));
                cols.push(c);
            }
            TableWrite {
                table: t.to_string(),
                stable: "readings".into(),
                tags: Some(vec![
                    Value::Str(t.to_string()),
                    Value::Str("South".into()),
                    Value::Str("Seth".into()),
                    Value::Str("H-2".into()),
                    Value::Str("v1.0".into()),
                    Value::Float(1500.0),
                    Value::Float(150.0),
                    Value::Float(12.0),
                ]),
                columns: cols,
            }
        })
        .collect()
}

#[test]
fn stale_route_is_refreshed_and_retried() {
    let c = Cluster::start(2);
    c.ok("", "CREATE DATABASE iot VGROUPS 2");
    c.ok("iot", READINGS);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let client = tidal_client::Client::connect(&c.mnode_addr)
            .await
            .expect("connect");
        let schema: StableSchema = client.stable("iot", "readings").await.expect("schema");
        let tables: Vec<String> = (0..20).map(|i| format!("r_truck_{i}")).collect();
        let names: Vec<&str> = tables.iter().map(String::as_str).collect();
        let out = client
            .write("iot", std::slice::from_ref(&schema), writes(&names, 1_000))
            .await
            .expect("first write");
        assert_eq!(out.rows, 20);
        let old = client.route("iot").await.expect("route");
        assert_eq!(old.vgroups.len(), 2);

        // Recreate the database behind the client's back with a different vgroup layout:
        // its cached map now names vgroups that no longer exist.
        c.ok("", "DROP DATABASE iot");
        c.ok("", "CREATE DATABASE iot VGROUPS 3");
        c.ok("iot", READINGS);
        let schema = client.stable("iot", "readings").await.expect("schema");
        let out = client
            .write("iot", std::slice::from_ref(&schema), writes(&names, 2_000))
            .await
            .expect("write after stale route");
        assert_eq!(out.rows, 20);
        let new = client.route("iot").await.expect("route");
        assert_eq!(new.vgroups.len(), 3, "the client refreshed its map");

        // Sent straight to a vgroup that does not own the table, a write is refused with the
        // retryable WrongVgroup code, and nothing is written.
        let owner = new.index_of("iot", "r_truck_0");
        let wrong = &new.vgroups[(owner + 1) % new.vgroups.len()];
        let batch = tidal_common::WriteBatch {
            db: "iot".into(),
            vgroup: wrong.id,
            schemas: vec![schema.clone()],
            tables: writes(&["r_truck_0"], 3_000),
            blocks: Vec::new(),
        };
        let err = client
            .dnode(&wrong.addr)
            .expect("dnode client")
            .write(tidal_proto::convert::write_to_wire(&batch))
            .await
            .expect_err("write to the wrong vgroup");
        let code = tidal_proto::code_of(&err);
        assert_eq!(code, tidal_common::StatusCode::WrongVgroup, "{err:?}");
        assert!(code.is_stale_route());
        assert!(err.message().contains("r_truck_0"), "{}", err.message());
    });
    assert_eq!(
        rows(&c.ok("iot", "SELECT COUNT(*) FROM readings")),
        vec!["20"]
    );
    assert_eq!(rows(&c.ok("iot", "SELECT MIN(ts) FROM readings")).len(), 1);
}
