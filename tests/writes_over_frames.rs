//! Row blocks written through the `Writer` go to the data nodes as WRITE frames
//! (client/src/FRAMES.md) by default and over gRPC with `write_frames(false)`: the data nodes
//! count which transport each write came by, and both store exactly the rows sent. Bad WRITE
//! frames on a data node's port get a typed ERROR frame, never a dead server, and a refused
//! write leaves the connection usable for the next one.

mod common;

use common::raw_frames::{error_of, raw, read_frame, root_token};
use common::{rows, Cluster};
use std::io::Write;
use std::time::Duration;
use tidal_client::frames::{self, Kind};
use tidal_client::{Client, ConnectOptions, Writer, WriterConfig};
use tidal_common::{DataType, RowBlock, StatusCode, Value};

const TABLES: usize = 24;
const ROUNDS: i64 = 40;
const T0: i64 = 1_600_000_000_000;

fn writes(c: &Cluster, transport: &str) -> u64 {
    common::metric_sum(
        c,
        "tidal_dnode_write_calls_total{",
        &format!("transport=\"{transport}\"}}"),
    )
}

/// One row per subtable at `round`, `v` = round * 100 + subtable.
fn block(first_table: usize, round: i64) -> RowBlock {
    let mut b = RowBlock::new("m", &[DataType::Timestamp, DataType::Double]);
    for t in first_table..first_table + TABLES {
        let i = b.add_table(
            &format!("t_{t}"),
            Some(vec![Value::Str(format!("loc_{t}"))]),
        );
        let v = (round * 100 + t as i64) as f64;
        assert!(b.push_row(i, &[Value::Timestamp(T0 + round * 1000), Value::Float(v)]));
    }
    b
}

/// Writes `ROUNDS` blocks of subtables `first_table..` with a Writer of `client`.
fn write_all(rt: &tokio::runtime::Runtime, client: Client, first_table: usize) {
    let mut cfg = WriterConfig::new("wf");
    cfg.batch_rows = 3 * TABLES;
    cfg.linger = Duration::from_millis(5);
    let writer = rt.block_on(async { Writer::new(client, cfg) });
    rt.block_on(async {
        for round in 0..ROUNDS {
            writer.write_block(block(first_table, round)).await.unwrap();
        }
        writer.flush().await.unwrap();
    });
    let stats = writer.stats();
    assert_eq!(stats.rows_failed, 0, "{stats:?}");
    assert_eq!(stats.rows_written, (TABLES as i64 * ROUNDS) as u64);
    rt.block_on(writer.close()).unwrap();
}

/// Every subtable of `first_table..` holds its `ROUNDS` rows, their sum and its tag.
fn check(c: &Cluster, first_table: usize) {
    let out = rows(&c.ok(
        "wf",
        &format!(
            "SELECT tbname, loc, count(*), sum(v) FROM m WHERE loc >= 'loc_{first_table:02}' \
             AND loc < 'loc_{:02}' PARTITION BY tbname, loc ORDER BY tbname",
            first_table + TABLES
        ),
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
}

fn write_frame(token: &str, request: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    frames::write_head(&mut out, token, request.len());
    out.extend_from_slice(request);
    out
}

/// Raw WRITE frames on data node `addr`: `token` is root's, `request` a valid encoded
/// `WriteRequest` for one of the node's vgroups.
fn bad_writes(addr: &str, token: &str, request: &[u8]) {
    let mut s = raw(addr);
    s.write_all(&frames::preface()).unwrap();
    // No token, a forged one, then bytes that are not a WriteRequest: an ERROR each, and
    // the connection takes the next call.
    for (tok, req, code) in [
        ("", request, StatusCode::Unauthenticated),
        ("e30.Zm9yZ2Vk", request, StatusCode::Unauthenticated),
        (token, &[0x0a, 0xff, 0x01][..], StatusCode::Internal),
    ] {
        s.write_all(&write_frame(tok, req)).unwrap();
        let e = error_of(read_frame(&mut s).expect("an ERROR frame"));
        assert_eq!(e.code, code, "{}", e.message);
    }
    s.write_all(&write_frame(token, request)).unwrap();
    let f = read_frame(&mut s).expect("a WROTE frame");
    assert_eq!(f.kind, Kind::Wrote);
    let r = frames::decode_wrote(f.body).unwrap();
    assert_eq!(r.rows, 1);

    // A WRITE too short for its token length: ERROR, then the connection closes.
    let mut s = raw(addr);
    s.write_all(&frames::preface()).unwrap();
    s.write_all(&[3, 0, 0, 0, Kind::Write as u8, 200, 0, b'x'])
        .unwrap();
    let e = error_of(read_frame(&mut s).expect("an ERROR frame"));
    assert_eq!(e.code, StatusCode::InvalidArgument);
    assert!(
        e.message.contains("WRITE frame is truncated"),
        "{}",
        e.message
    );
    assert!(read_frame(&mut s).is_none(), "the connection closes");

    // A client does not send WROTE.
    let mut s = raw(addr);
    s.write_all(&frames::preface()).unwrap();
    s.write_all(&[0, 0, 0, 0, Kind::Wrote as u8]).unwrap();
    let e = error_of(read_frame(&mut s).expect("an ERROR frame"));
    assert_eq!(e.code, StatusCode::InvalidArgument);
    assert!(read_frame(&mut s).is_none());
}

#[test]
fn writes_go_as_frames_and_land_exactly_once() {
    let c = Cluster::start_with_http(2);
    c.ok("", "CREATE DATABASE wf VGROUPS 4");
    c.ok(
        "wf",
        "CREATE STABLE m (ts TIMESTAMP, v DOUBLE) TAGS (loc VARCHAR(20))",
    );
    let rt = tokio::runtime::Runtime::new().unwrap();

    let (f0, g0) = (writes(&c, "frames"), writes(&c, "grpc"));
    let framed = rt.block_on(Client::connect(&c.mnode_addr)).unwrap();
    write_all(&rt, framed.clone(), 10);
    let (f1, g1) = (writes(&c, "frames"), writes(&c, "grpc"));
    assert!(
        f1 >= f0 + 4,
        "the default client writes frames ({f0} -> {f1})"
    );
    assert_eq!(g1, g0, "and no gRPC write");
    check(&c, 10);

    let grpc = rt
        .block_on(Client::connect_with(
            &c.mnode_addr,
            ConnectOptions::default().write_frames(false),
        ))
        .unwrap();
    write_all(&rt, grpc, 50);
    let (f2, g2) = (writes(&c, "frames"), writes(&c, "grpc"));
    assert_eq!(f2, f1, "write_frames(false) sends no WRITE frame");
    assert!(g2 >= g1 + 4, "it writes over gRPC ({g1} -> {g2})");
    check(&c, 50);

    // Raw frames against data node 0, with a request the client library would send.
    let addr = c.dnodes[0].as_ref().unwrap().addr.clone();
    let (token, request) = rt.block_on(async {
        let route = framed.route("wf").await.unwrap();
        let vg = route
            .vgroups
            .iter()
            .position(|v| v.addr == addr)
            .expect("data node 0 hosts a vgroup of wf");
        let table = (0..)
            .map(|i| format!("raw_{i}"))
            .find(|t| route.index_of("wf", t) == vg)
            .unwrap();
        let mut b = RowBlock::new("m", &[DataType::Timestamp, DataType::Double]);
        let i = b.add_table(&table, Some(vec![Value::Str("raw".into())]));
        b.push_row(i, &[Value::Timestamp(T0), Value::Float(7.0)]);
        let schema = framed.stable("wf", "m").await.unwrap();
        let request = tidal_proto::write_wire::encode_write_request(
            "wf",
            route.vgroups[vg].id.0,
            &[tidal_proto::convert::schema_to_wire(&schema)],
            &[&b],
            |_| true,
        );
        let token = root_token(&c.mnode_addr).await;
        (token, request)
    });
    bad_writes(&addr, &token, &request);
    assert_eq!(
        rows(&c.ok(
            "wf",
            "SELECT loc, count(*), sum(v) FROM m WHERE loc = 'raw' PARTITION BY loc"
        )),
        vec!["raw,1,7".to_string()]
    );
    // The data node still takes writes both ways.
    check(&c, 10);
    write_all(&rt, framed, 10);
    check(&c, 10);
}
