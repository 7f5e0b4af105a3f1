//! Query fragments sent as frames (client/src/FRAMES.md) give the same answers and the same
//! errors as over gRPC, for point lookups, windows, aggregates and multi-batch scans; the data
//! nodes count which transport each call came by, and a burst of queries past the per-node
//! bound of frame calls spills over to gRPC. Bad frames on a data node's port get a
//! typed ERROR frame and a closed connection, never a dead server; a pooled connection that a
//! data node restart closed is replaced without the query noticing.

mod common;

use common::raw_frames::{error_of, raw, read_frame, root_token};
use common::{Cluster, BIN};
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;
use tidal_client::frames::{self, Exec};
use tidal_client::{Client, ConnectOptions};
use tidal_common::StatusCode;
use tidal_proto::v1;

const SUBTABLES: usize = 4;
const ROWS_PER_SUBTABLE: usize = 60_000;

const QUERIES: &[&str] = &[
    "SELECT LAST_ROW(ts), LAST_ROW(v) FROM m WHERE k IN (2) GROUP BY k",
    "SELECT LAST_ROW(*) FROM t1",
    "SELECT COUNT(*), SUM(v), MIN(v), MAX(v) FROM m",
    "SELECT _wstart, AVG(v), SPREAD(v) FROM m PARTITION BY k INTERVAL(10s) ORDER BY k, _wstart",
    "SELECT k, COUNT(*) FROM m WHERE ts >= 1600000030000 GROUP BY k ORDER BY k",
    // Every row: many parts per vnode.
    "SELECT ts, v, k FROM m ORDER BY k, ts",
];

fn fetch(cluster: &Cluster, what: &str) -> u64 {
    common::metric_sum(cluster, what, "")
}

fn calls(cluster: &Cluster, transport: &str) -> u64 {
    common::metric_sum(
        cluster,
        "tidal_dnode_fragment_calls_total{",
        &format!("transport=\"{transport}\"}}"),
    )
}

fn exec_bytes(token: &str, vgroup_id: u32, fragment: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    Exec {
        timeout: None,
        token: token.into(),
        request: v1::FragmentsRequest {
            vnodes: vec![v1::VnodeRef {
                db: "ff".into(),
                vgroup_id,
            }],
            fragment: fragment.to_vec(),
            memory_max_bytes: 0,
        },
    }
    .encode(&mut out);
    out
}

/// Bad input on a data node's port, byte by byte as a broken or hostile client sends it.
/// `token` is root's; `vgroup` is one of the node's vgroups.
fn bad_frames(addr: &str, token: &str, vgroup: u32) {
    // Another wire version.
    let mut s = raw(addr);
    let mut p = frames::preface();
    p[4..].copy_from_slice(&99u32.to_le_bytes());
    s.write_all(&p).unwrap();
    let e = error_of(read_frame(&mut s).expect("an ERROR frame"));
    assert_eq!(e.code, StatusCode::WireVersionMismatch, "{}", e.message);
    assert!(e.message.contains("99"), "{}", e.message);
    assert!(read_frame(&mut s).is_none(), "the connection closes");

    // A frame kind no client sends.
    let mut s = raw(addr);
    s.write_all(&frames::preface()).unwrap();
    s.write_all(&[0, 0, 0, 0, 3]).unwrap();
    let e = error_of(read_frame(&mut s).expect("an ERROR frame"));
    assert_eq!(e.code, StatusCode::InvalidArgument);
    assert!(
        e.message.contains("expected an EXEC or WRITE frame"),
        "{}",
        e.message
    );
    assert!(read_frame(&mut s).is_none());

    // An unknown kind, and a length over the limit.
    for (header, code) in [
        ([0u8, 0, 0, 0, 77], StatusCode::InvalidArgument),
        ([0xff, 0xff, 0xff, 0xff, 1], StatusCode::ResourceExhausted),
    ] {
        let mut s = raw(addr);
        s.write_all(&frames::preface()).unwrap();
        s.write_all(&header).unwrap();
        let e = error_of(read_frame(&mut s).expect("an ERROR frame"));
        assert_eq!(e.code, code, "{}", e.message);
        assert!(read_frame(&mut s).is_none());
    }

    // An EXEC whose body does not decode.
    let mut s = raw(addr);
    s.write_all(&frames::preface()).unwrap();
    s.write_all(&[3, 0, 0, 0, 1, 1, 2, 3]).unwrap();
    let e = error_of(read_frame(&mut s).expect("an ERROR frame"));
    assert_eq!(e.code, StatusCode::InvalidArgument);
    assert!(
        e.message.contains("EXEC frame is truncated"),
        "{}",
        e.message
    );

    // No token, a forged one, a vgroup the node does not have, a fragment that does not
    // decode: each call is refused with its own error and the connection takes the next.
    let mut s = raw(addr);
    s.write_all(&frames::preface()).unwrap();
    for (exec, code, says) in [
        (
            exec_bytes("", vgroup, b"{}"),
            StatusCode::Unauthenticated,
            "no credentials",
        ),
        (
            exec_bytes("eyJ1IjoiYWRtaW4ifQ.Zm9yZ2Vk", vgroup, b"{}"),
            StatusCode::Unauthenticated,
            "",
        ),
        (
            exec_bytes(token, 9_999, b"{}"),
            StatusCode::VnodeNotFound,
            "9999",
        ),
        (
            exec_bytes(token, vgroup, b"not json"),
            StatusCode::InvalidArgument,
            "bad query fragment",
        ),
    ] {
        s.write_all(&exec).unwrap();
        let e = error_of(read_frame(&mut s).expect("an ERROR frame"));
        assert_eq!(e.code, code, "{}", e.message);
        assert!(e.message.contains(says), "{}", e.message);
    }

    // A preface cut short, and a connection that says nothing: the server just closes.
    let mut s = raw(addr);
    s.write_all(&frames::MAGIC[..2]).unwrap();
    drop(s);
    drop(raw(addr));
}

/// Restarts data node `i` on the address it had (retrying while the port is released).
fn restart_same_port(cluster: &mut Cluster, i: usize) {
    let addr = cluster.dnodes[i].as_ref().unwrap().addr.clone();
    cluster.kill_dnode(i);
    let mut args = cluster.dnode_args(i);
    let at = args.iter().position(|a| a == "127.0.0.1:0").unwrap();
    args[at] = addr.clone();
    for _ in 0..50 {
        let mut child = Command::new(BIN)
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(300));
        if child.try_wait().unwrap().is_none() {
            cluster.dnodes[i] = Some(common::Proc {
                child,
                addr,
                args,
                http: None,
            });
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("data node {i} did not restart on {addr}");
}

#[test]
fn fragment_frames_answer_as_grpc() {
    let mut cluster = Cluster::start_with_http(2);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let framed = Client::connect(&cluster.mnode_addr).await.unwrap();
        let grpc = Client::connect_with(
            &cluster.mnode_addr,
            ConnectOptions::default().fragment_frames(false),
        )
        .await
        .unwrap();
        common::load_scan_data(&framed, "ff", SUBTABLES, ROWS_PER_SUBTABLE, 20_000).await;
        framed.execute("FLUSH DATABASE ff", "").await.unwrap();

        for q in QUERIES {
            let (f0, g0) = (calls(&cluster, "frames"), calls(&cluster, "grpc"));
            let a = framed.execute(q, "ff").await.unwrap().batch.unwrap();
            let (f1, g1) = (calls(&cluster, "frames"), calls(&cluster, "grpc"));
            let b = grpc.execute(q, "ff").await.unwrap().batch.unwrap();
            let (f2, g2) = (calls(&cluster, "frames"), calls(&cluster, "grpc"));
            assert!(a.num_rows() > 0, "{q}");
            assert_eq!(a, b, "{q}");
            assert!(f1 > f0 && g1 == g0, "{q}: the default client sends frames");
            assert!(f2 == f1 && g2 > g1, "{q}: frames off sends gRPC");
        }
        let all = framed
            .execute("SELECT COUNT(*) FROM (SELECT ts, v FROM m)", "ff")
            .await
            .unwrap()
            .batch
            .unwrap();
        assert_eq!(
            all.columns[0].get(0),
            tidal_common::Value::Int((SUBTABLES * ROWS_PER_SUBTABLE) as i64)
        );
        assert!(fetch(&cluster, "tidal_dnode_frame_connections{") >= 1);

        // A burst of queries from one client: up to CALLS_IN_FLIGHT_MAX calls per data node
        // take a connection each, the rest share gRPC's; every answer is the same.
        let want = framed.execute(QUERIES[2], "ff").await.unwrap().batch;
        let (f0, g0) = (calls(&cluster, "frames"), calls(&cluster, "grpc"));
        let burst = (0..3 * frames::CALLS_IN_FLIGHT_MAX).map(|_| framed.execute(QUERIES[2], "ff"));
        for r in futures::future::join_all(burst).await {
            assert_eq!(r.unwrap().batch, want);
        }
        let (f1, g1) = (calls(&cluster, "frames"), calls(&cluster, "grpc"));
        assert!(
            f1 - f0 >= frames::CALLS_IN_FLIGHT_MAX as u64,
            "{f0} -> {f1}"
        );
        assert!(
            g1 > g0,
            "calls beyond the bound go over gRPC ({g0} -> {g1})"
        );

        let addr = cluster.dnodes[0].as_ref().unwrap().addr.clone();
        let vgroup = framed
            .route("ff")
            .await
            .unwrap()
            .vgroups
            .iter()
            .find(|v| v.addr == addr)
            .expect("data node 0 hosts a vgroup of ff")
            .id
            .0;
        let token = root_token(&cluster.mnode_addr).await;
        tokio::task::spawn_blocking(move || bad_frames(&addr, &token, vgroup))
            .await
            .unwrap();
        // The data node still serves both transports.
        for c in [&framed, &grpc] {
            let r = c.execute(QUERIES[2], "ff").await.unwrap();
            assert_eq!(r.batch.unwrap().num_rows(), 1);
        }
    });

    // A data node restarted on its address: the pooled connections to it are dead; the
    // next query replaces them and answers.
    let before = rt.block_on(async {
        let c = Client::connect(&cluster.mnode_addr).await.unwrap();
        for _ in 0..3 {
            c.execute(QUERIES[2], "ff").await.unwrap();
        }
        (c.clone(), c.execute(QUERIES[2], "ff").await.unwrap().batch)
    });
    restart_same_port(&mut cluster, 0);
    rt.block_on(async {
        let (c, want) = before;
        let got = c.execute(QUERIES[2], "ff").await.unwrap().batch;
        assert_eq!(got, want);
    });
}
