//! A data node stopped with SIGTERM in the middle of a write stream exits 0 and loses
//! nothing: the batching Writer retries the batches it refused (`ShuttingDown`) or could not
//! deliver while it was down, and after a restart every subtable holds exactly the rows
//! written, none lost, none duplicated.

mod common;

use common::{rows, spawn, Cluster, READINGS};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tidal_client::{Client, Writer, WriterConfig};
use tidal_common::Value;

const TABLES: usize = 16;
const ROWS_PER_TABLE: usize = 600;

#[test]
fn writer_survives_a_graceful_dnode_restart() {
    let mut c = Cluster::start(1);
    c.ok("", "CREATE DATABASE gw VGROUPS 4");
    c.ok("gw", READINGS);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let client = rt
        .block_on(Client::connect(&c.mnode_addr))
        .expect("connect");
    let failed = Arc::new(AtomicU64::new(0));
    let mut cfg = WriterConfig::new("gw");
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
                w.write_row(&format!("r_truck_{t}"), "readings", Some(tags), row)
                    .await
                    .expect("queue row");
            }
            if r % 50 == 0 {
                tokio::time::sleep(Duration::from_millis(150)).await;
            }
        }
    });
    std::thread::sleep(Duration::from_millis(700));

    // Graceful stop mid-stream.
    let mut dnode = c.dnodes[0].take().expect("dnode running");
    // SAFETY: kill(2) on a child we spawned and have not reaped; no memory is involved.
    unsafe {
        libc::kill(dnode.child.id() as libc::pid_t, libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = dnode.child.try_wait().expect("try_wait") {
            break s;
        }
        assert!(Instant::now() < deadline, "data node did not stop");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        status.success(),
        "graceful stop under load exits 0: {status}"
    );
    std::thread::sleep(Duration::from_millis(500));
    c.dnodes[0] = Some(spawn("vnode", &c.dnode_args(0)));

    rt.block_on(producer).expect("producer");
    rt.block_on(writer.flush())
        .expect("every batch acknowledged");
    let stats = writer.stats();
    rt.block_on(writer.close()).expect("close");
    assert_eq!(failed.load(Ordering::Relaxed), 0, "{stats:?}");
    assert_eq!(
        stats.rows_written,
        (TABLES * ROWS_PER_TABLE) as u64,
        "{stats:?}"
    );
    assert_eq!(stats.rows_failed, 0, "{stats:?}");
    assert!(stats.retries > 0, "the stop forced retries: {stats:?}");

    let out = rows(&c.ok(
        "gw",
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
