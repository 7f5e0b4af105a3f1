//! Row blocks through the batching `Writer` (the bench's and loader's path): blocks spanning
//! every vgroup, with a subtable's tags only in its first block and rows repeated across
//! blocks, end with exactly the expected rows and tags per subtable; a subtable dropped while
//! the writer remembers it as existing is re-created from the tags of the next rows.

mod common;

use common::{rows, Cluster};
use std::time::Duration;
use tidal_client::{Client, Writer, WriterConfig};
use tidal_common::{DataType, RowBlock, TableWrite, Value};

const ST: &str = "CREATE STABLE m (ts TIMESTAMP, v DOUBLE, n BIGINT) TAGS (loc VARCHAR(20))";
const TABLES: usize = 40;
const BLOCKS: i64 = 30;
const T0: i64 = 1_451_606_400_000;

fn block(round: i64, with_tags: bool) -> RowBlock {
    let mut b = RowBlock::new(
        "m",
        &[DataType::Timestamp, DataType::Double, DataType::BigInt],
    );
    for t in 0..TABLES {
        let tags = with_tags.then(|| vec![Value::Str(format!("loc_{t}"))]);
        let i = b.add_table(&format!("t_{t}"), tags);
        // Two rows per subtable and block; the second repeats the previous block's last
        // ts with a new value (the later write wins, no duplicate).
        for ts in [round * 2 - 1, round * 2] {
            if ts < 0 {
                continue;
            }
            let row = [
                Value::Timestamp(T0 + ts * 1000),
                Value::Float((round * 1000 + t as i64) as f64),
                if t % 7 == 0 {
                    Value::Null
                } else {
                    Value::Int(ts)
                },
            ];
            assert!(b.push_row(i, &row));
        }
    }
    b
}

#[test]
fn row_blocks_land_exactly_once_with_their_tags() {
    let c = Cluster::start(2);
    c.ok("", "CREATE DATABASE rb VGROUPS 4");
    c.ok("rb", ST);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = rt.block_on(Client::connect(&c.mnode_addr)).unwrap();
    let mut cfg = WriterConfig::new("rb");
    // Small batches: a block fills several buffers on its way.
    cfg.batch_rows = 25;
    cfg.linger = Duration::from_millis(10);
    let writer = rt.block_on(async { Writer::new(client, cfg) });
    rt.block_on(async {
        for round in 0..BLOCKS {
            writer.write_block(block(round, round == 0)).await.unwrap();
        }
        writer.flush().await.unwrap();
    });
    let stats = writer.stats();
    assert_eq!(stats.rows_failed, 0, "{stats:?}");
    // Every row of every block was sent (repeats included): 1 + 2 per later round.
    assert_eq!(
        stats.rows_written,
        (TABLES as i64 * (1 + 2 * (BLOCKS - 1))) as u64
    );
    let out = rows(&c.ok(
        "rb",
        "SELECT tbname, loc, count(*), count(DISTINCT ts), last(v), sum(n) FROM m PARTITION BY tbname, loc ORDER BY tbname",
    ));
    assert_eq!(out.len(), TABLES, "{out:?}");
    let distinct = 2 * (BLOCKS - 1) + 1;
    for l in &out {
        let f: Vec<&str> = l.split(',').collect();
        let t: i64 = f[0].trim_start_matches("t_").parse().unwrap();
        assert_eq!(f[1], format!("loc_{t}"), "{l}");
        assert_eq!(f[2], distinct.to_string(), "{l}");
        assert_eq!(f[3], distinct.to_string(), "{l}");
        // The last ts was last written by the last block.
        assert_eq!(
            f[4].parse::<f64>().unwrap(),
            ((BLOCKS - 1) * 1000 + t) as f64,
            "{l}"
        );
        let sum: i64 = (0..distinct).sum();
        if t % 7 == 0 {
            assert!(f[5].is_empty() || f[5] == "NULL", "{l}");
        } else {
            assert_eq!(f[5], sum.to_string(), "{l}");
        }
    }

    // t_3 is known to the writer; drop it, then write rows with tags: the writer leaves the
    // tags out, learns the table is gone and sends them.
    c.ok("rb", "DROP TABLE t_3");
    let tw = TableWrite {
        table: "t_3".into(),
        stable: "m".into(),
        tags: Some(vec![Value::Str("again".into())]),
        columns: {
            let mut b = RowBlock::new(
                "m",
                &[DataType::Timestamp, DataType::Double, DataType::BigInt],
            );
            let i = b.add_table("x", None);
            b.push_row(i, &[Value::Timestamp(T0), Value::Float(1.0), Value::Int(1)]);
            b.into_parts().columns
        },
    };
    rt.block_on(async {
        writer.write_many(vec![tw]).await.unwrap();
        writer.flush().await.unwrap();
    });
    assert_eq!(
        rows(&c.ok("rb", "SELECT loc, count(*) FROM t_3 PARTITION BY loc")),
        vec!["again,1".to_string()]
    );
    rt.block_on(writer.close()).unwrap();
}
