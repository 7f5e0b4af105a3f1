//! Crash loop: concurrent writers keep writing while the data nodes are killed with SIGKILL at
//! random moments and restarted, 20 times. The database has a 1 MiB write buffer and an STT
//! trigger of 2, so kills land during background flushes and merges too. Afterwards every
//! acknowledged row is present exactly once, before and after a COMPACT.

mod common;

use common::{rows, Cluster, READINGS};
use rand::Rng;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tidal_common::{Column, DataType, Precision, TableWrite, Value};

const WRITERS: usize = 4;
const TABLES_PER_WRITER: usize = 5;
const KILLS: usize = 20;

fn row_batch(table: &str, ts: &[i64]) -> TableWrite {
    let mut cols = vec![Column::empty(DataType::Timestamp, ts.len())];
    for t in ts {
        cols[0].push(&Value::Timestamp(*t));
    }
    for f in 0..7 {
        let mut c = Column::empty(DataType::Double, ts.len());
        for t in ts {
            c.push(&Value::Float((*t % 1000) as f64 + f as f64));
        }
        cols.push(c);
    }
    TableWrite {
        table: table.to_string(),
        stable: "readings".into(),
        tags: Some(vec![
            Value::Str(table.to_string()),
            Value::Str("East".into()),
            Value::Str("Andy".into()),
            Value::Str("F-150".into()),
            Value::Str("v2.3".into()),
            Value::Float(2000.0),
            Value::Float(200.0),
            Value::Float(15.0),
        ]),
        columns: cols,
    }
}

#[test]
fn acknowledged_rows_survive_dnode_kill9() {
    let mut c = Cluster::start(2);
    c.ok(
        "",
        "CREATE DATABASE iot VGROUPS 4 WAL_LEVEL 2 BUFFER 1 STT_TRIGGER 2 MAXROWS 500 DURATION 1d",
    );
    c.ok("iot", READINGS);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let stop = Arc::new(AtomicBool::new(false));
    let client = rt
        .block_on(tidal_client::Client::connect(&c.mnode_addr))
        .expect("connect");
    let schema = rt
        .block_on(client.stable("iot", "readings"))
        .expect("schema");
    let mut handles = Vec::new();
    for w in 0..WRITERS {
        let (client, schema, stop) = (client.clone(), schema.clone(), stop.clone());
        handles.push(rt.spawn(async move {
            let mut acked: HashMap<String, BTreeSet<i64>> = HashMap::new();
            let mut next_ts = 1_451_606_400_000i64;
            while !stop.load(Ordering::Relaxed) {
                let ts: Vec<i64> = (0..10).map(|i| next_ts + i * 1000).collect();
                next_ts += 10_000;
                let tables: Vec<String> = (0..TABLES_PER_WRITER)
                    .map(|t| format!("t_{w}_{t}"))
                    .collect();
                let batch: Vec<TableWrite> = tables.iter().map(|t| row_batch(t, &ts)).collect();
                if client
                    .write("iot", std::slice::from_ref(&schema), batch)
                    .await
                    .is_ok()
                {
                    for t in tables {
                        acked.entry(t).or_default().extend(ts.iter().copied());
                    }
                }
            }
            acked
        }));
    }
    let mut rng = rand::rng();
    for k in 0..KILLS {
        std::thread::sleep(Duration::from_millis(rng.random_range(50..600)));
        let victim = k % 2;
        c.kill_dnode(victim);
        std::thread::sleep(Duration::from_millis(rng.random_range(0..200)));
        c.restart_dnode(victim);
    }
    std::thread::sleep(Duration::from_millis(400));
    stop.store(true, Ordering::Relaxed);
    let mut acked: HashMap<String, BTreeSet<i64>> = HashMap::new();
    for h in handles {
        for (t, ts) in rt.block_on(h).expect("writer") {
            acked.entry(t).or_default().extend(ts);
        }
    }
    let total: usize = acked.values().map(BTreeSet::len).sum();
    assert!(total > 0, "no write was acknowledged");
    verify(&c, &acked);
    c.ok("", "COMPACT DATABASE iot");
    verify(&c, &acked);
    eprintln!("{total} acknowledged rows verified across {KILLS} kill -9 of a data node");
}

fn verify(c: &Cluster, acked: &HashMap<String, BTreeSet<i64>>) {
    for (table, want) in acked {
        let got: Vec<i64> = rows(&c.ok("iot", &format!("SELECT ts FROM {table}")))
            .iter()
            .map(|l| {
                Precision::Millis
                    .parse_timestamp(l)
                    .unwrap_or_else(|| panic!("bad ts line {l:?}"))
            })
            .collect();
        let distinct: BTreeSet<i64> = got.iter().copied().collect();
        assert_eq!(distinct.len(), got.len(), "{table}: duplicate rows");
        let missing: Vec<&i64> = want.difference(&distinct).collect();
        assert!(
            missing.is_empty(),
            "{table}: {} acknowledged rows lost, e.g. {:?}",
            missing.len(),
            &missing[..missing.len().min(5)]
        );
    }
}
