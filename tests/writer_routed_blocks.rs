//! Blocks queued with the vgroup their producer routed them to (`Writer::write_block_in`, the
//! loader's path): with the right vgroup every row lands once with its tags; with a wrong one
//! (a producer's bug) nothing is misplaced or lost: the data node refuses the subtables
//! outside its hash range, and the retry routes each subtable itself.

mod common;

use common::{rows, Cluster};
use std::sync::Arc;
use std::time::Duration;
use tidal_client::{Client, RouteTable, Writer, WriterConfig};
use tidal_common::{DataType, RowBlock, Value};

const ST: &str = "CREATE STABLE m (ts TIMESTAMP, v DOUBLE) TAGS (loc VARCHAR(20))";
const TABLES: usize = 60;
const ROUNDS: i64 = 5;
const T0: i64 = 1_451_606_400_000;

/// Round `round`'s rows of the subtables in vgroup `group`, one block; tags in round 0 only.
fn block(route: &RouteTable, group: usize, round: i64) -> RowBlock {
    let mut b = RowBlock::new("m", &[DataType::Timestamp, DataType::Double]);
    for t in (0..TABLES).filter(|t| route.index_of("wr", &format!("t_{t}")) == group) {
        let tags = (round == 0).then(|| vec![Value::Str(format!("loc_{t}"))]);
        let i = b.add_table(&format!("t_{t}"), tags);
        let row = [
            Value::Timestamp(T0 + round * 1000),
            Value::Float((round * 100 + t as i64) as f64),
        ];
        assert!(b.push_row(i, &row));
    }
    b
}

#[test]
fn routed_blocks_land_once_and_a_wrong_vgroup_is_rerouted() {
    let c = Cluster::start(2);
    c.ok("", "CREATE DATABASE wr VGROUPS 4");
    c.ok("wr", ST);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = rt.block_on(Client::connect(&c.mnode_addr)).unwrap();
    let route: Arc<RouteTable> = rt.block_on(client.route("wr")).unwrap();
    let groups = route.vgroups.len();
    assert_eq!(groups, 4);
    let mut cfg = WriterConfig::new("wr");
    cfg.linger = Duration::from_millis(10);
    let writer = rt.block_on(async { Writer::new(client, cfg) });
    rt.block_on(async {
        for round in 0..ROUNDS {
            for g in 0..groups {
                // Rounds 2 and 3 name the next vgroup instead of the block's own.
                let named = if round == 2 || round == 3 {
                    (g + 1) % groups
                } else {
                    g
                };
                let b = block(&route, g, round);
                writer
                    .write_block_in(b, route.clone(), named)
                    .await
                    .unwrap();
            }
            writer.flush().await.unwrap();
        }
    });
    let stats = writer.stats();
    assert_eq!(stats.rows_failed, 0, "{stats:?}");
    assert_eq!(stats.rows_written, (TABLES as i64 * ROUNDS) as u64);
    // Only the misrouted rounds were sent again.
    assert!(stats.retries > 0, "{stats:?}");
    let out = rows(&c.ok(
        "wr",
        "SELECT tbname, loc, count(*), sum(v) FROM m PARTITION BY tbname, loc ORDER BY tbname",
    ));
    assert_eq!(out.len(), TABLES, "{out:?}");
    for l in &out {
        let f: Vec<&str> = l.split(',').collect();
        let t: i64 = f[0].trim_start_matches("t_").parse().unwrap();
        assert_eq!(f[1], format!("loc_{t}"), "{l}");
        assert_eq!(f[2], ROUNDS.to_string(), "{l}");
        let sum: i64 = (0..ROUNDS).map(|r| r * 100 + t).sum();
        assert_eq!(f[3].parse::<f64>().unwrap(), sum as f64, "{l}");
    }
    // Each subtable is in the vgroup its name routes to, and in no other.
    let per_vgroup = rows(&c.ok(
        "wr",
        "SELECT count(*) FROM information_schema.ins_tables WHERE db_name = 'wr'",
    ));
    assert_eq!(per_vgroup, vec![TABLES.to_string()]);
    rt.block_on(writer.close()).unwrap();
}
