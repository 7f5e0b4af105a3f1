//! The `Writer` queues a block wholly in one vgroup as it is and copies other blocks' rows into
//! per-vgroup parts; either way the vnode gets the rows in the order they were written, so the
//! last write of a (subtable, ts) wins even when whole blocks and copied rows share a batch.

mod common;

use common::{rows, Cluster};
use std::time::Duration;
use tidal_client::{Client, Writer, WriterConfig};
use tidal_common::{DataType, RowBlock, Value};

const T0: i64 = 1_451_606_400_000;
const ROUNDS: i64 = 12;
const TS_PER_BLOCK: i64 = 5;

/// A block of subtables `tables`, each with rows at T0 + 0..TS_PER_BLOCK s, all of value `v`.
fn block(tables: &[&str], v: i64) -> RowBlock {
    let mut b = RowBlock::new("m", &[DataType::Timestamp, DataType::Double]);
    for t in tables {
        let i = b.add_table(t, Some(vec![Value::Str(format!("at_{t}"))]));
        for k in 0..TS_PER_BLOCK {
            assert!(b.push_row(
                i,
                &[Value::Timestamp(T0 + k * 1000), Value::Float(v as f64)]
            ));
        }
    }
    b
}

#[test]
fn later_writes_win_across_whole_and_copied_blocks() {
    let c = Cluster::start(2);
    c.ok("", "CREATE DATABASE wo VGROUPS 4");
    c.ok(
        "wo",
        "CREATE STABLE m (ts TIMESTAMP, v DOUBLE) TAGS (loc VARCHAR(20))",
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = rt.block_on(Client::connect(&c.mnode_addr)).unwrap();
    let route = rt.block_on(client.route("wo")).unwrap();
    // Two subtables of one vgroup, and one of another.
    let names: Vec<String> = (0..200).map(|i| format!("s_{i}")).collect();
    let g = |n: &str| route.index_of("wo", n);
    let a = names[0].as_str();
    let b = names
        .iter()
        .find(|n| *n != a && g(n) == g(a))
        .unwrap()
        .as_str();
    let other = names.iter().find(|n| g(n) != g(a)).unwrap().as_str();

    let mut cfg = WriterConfig::new("wo");
    // Everything in one batch per vgroup: order inside the batch decides the winner.
    cfg.batch_rows = 100_000;
    cfg.linger = Duration::from_secs(30);
    let writer = rt.block_on(async { Writer::new(client, cfg) });
    rt.block_on(async {
        for r in 0..ROUNDS {
            // Wholly in a's vgroup: queued whole.
            writer
                .write_block(block(&[a, b], r * 10 + 1))
                .await
                .unwrap();
            // Across two vgroups: a's rows are copied into a part.
            writer
                .write_block(block(&[a, other], r * 10 + 2))
                .await
                .unwrap();
            if r % 3 == 0 {
                writer.write_block(block(&[a], r * 10 + 3)).await.unwrap();
            }
        }
        // The last write of a is a whole block again.
        writer.write_block(block(&[a], 999)).await.unwrap();
        // Then b's last write is copied (a block spanning vgroups).
        writer.write_block(block(&[b, other], 777)).await.unwrap();
        writer.close().await.unwrap();
    });
    // b's last write was copied rows queued after whole blocks holding b: sent before
    // them, as the writer once did, the whole blocks' older value would win.
    for (t, want) in [(a, 999), (b, 777), (other, 777)] {
        let got = rows(&c.ok("wo", &format!("SELECT count(*), min(v), max(v) FROM {t}")));
        assert_eq!(got, vec![format!("{TS_PER_BLOCK},{want},{want}")], "{t}");
    }
}
