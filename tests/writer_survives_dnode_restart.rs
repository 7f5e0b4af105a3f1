//! The client library's batching `Writer` keeps going while a data node is killed and
//! restarted: batches to its vgroups are retried until acknowledged, and at the end every
//! subtable holds exactly the rows written — none lost, none duplicated.

mod common;

use common::{rows, Cluster, READINGS};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tidal_client::{Client, Writer, WriterConfig};
use tidal_common::Value;

const TABLES: usize = 16;
const ROWS_PER_TABLE: usize = 600;

#[test]
fn writer_retries_across_a_dnode_restart() {
    let mut c = Cluster::start(2);
    c.ok("", "CREATE DATABASE wr VGROUPS 4");
    c.ok("wr", READINGS);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = rt.block_on(Client::connect(&c.mnode_addr)).unwrap();
    let failed = Arc::new(AtomicU64::new(0));
    let mut cfg = WriterConfig::new("wr");
    cfg.batch_rows = 200;
    cfg.linger = Duration::from_millis(20);
    cfg.in_flight_per_vgroup = 2;
    let f = failed.clone();
    cfg.on_batch = Some(Arc::new(move |o| {
        if o.result.is_err() {
            f.fetch_add(o.rows, Ordering::Relaxed);
        }
    }));
    let writer = rt.block_on(async { Writer::new(client, cfg) });

    let w = writer.clone();
    let producer = rt.spawn(async move {
        for r in 0..ROWS_PER_TABLE {
            for t in 0..TABLES {
                let name = format!("r_truck_{t}");
                let tags = vec![
                    Value::Str(format!("truck_{t}")),
                    Value::Str("East".into()),
                    Value::Str("Seth".into()),
                    Value::Str("H-2".into()),
                    Value::Str("v1.0".into()),
                    Value::Float(1500.0),
                    Value::Float(150.0),
                    Value::Float(12.0),
                ];
                let mut row = vec![Value::Timestamp(1_451_606_400_000 + r as i64 * 10_000)];
                row.extend((0..7).map(|i| Value::Float((r * 7 + i) as f64)));
                w.write_row(&name, "readings", Some(tags), row)
                    .await
                    .unwrap();
            }
            // Spread the load over a few seconds so the restart happens mid-stream.
            if r % 50 == 0 {
                tokio::time::sleep(Duration::from_millis(150)).await;
            }
        }
    });
    std::thread::sleep(Duration::from_millis(700));
    c.kill_dnode(0);
    std::thread::sleep(Duration::from_millis(1500));
    c.restart_dnode(0);
    rt.block_on(producer).unwrap();
    rt.block_on(writer.flush())
        .expect("every batch acknowledged");
    let stats = writer.stats();
    rt.block_on(writer.close()).unwrap();
    assert_eq!(failed.load(Ordering::Relaxed), 0);
    assert_eq!(
        stats.rows_written,
        (TABLES * ROWS_PER_TABLE) as u64,
        "{stats:?}"
    );
    assert_eq!(stats.rows_failed, 0);
    assert!(
        stats.retries > 0,
        "the restart should have forced retries: {stats:?}"
    );

    let out = rows(&c.ok(
        "wr",
        "SELECT tbname, count(*), count(DISTINCT ts) FROM readings PARTITION BY tbname",
    ));
    assert_eq!(out.len(), TABLES, "{out:?}");
    for l in out {
        assert!(
            l.ends_with(&format!(",{ROWS_PER_TABLE},{ROWS_PER_TABLE}")),
            "{l}"
        );
    }
}
