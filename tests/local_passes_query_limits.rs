//! `tidal local` passes its query keys on to every child it starts: with
//! TIDAL_QUERY_MEMORY_MAX_BYTES at 1 MiB in `tidal local`'s environment (which its children
//! never see: they get their settings as flags), a GROUP BY over 100,000 groups fails with the
//! RESOURCE_EXHAUSTED memory-limit error whichever node coordinates it, the mnode or either
//! data node, while a GROUP BY over few groups answers.

mod common;

use common::{rows, shell, spawn, Proc};
use std::time::{Duration, Instant};
use tidal_client::Client;
use tidal_common::Value;

const SUBTABLES: usize = 2;
const ROWS_PER_SUBTABLE: usize = 100_000;
const WRITE_ROWS: usize = 25_000;
const MEMORY_MAX_BYTES: u64 = 1 << 20;

/// `tidal local`, stopped with SIGTERM (so that it stops its children) when dropped: a
/// SIGKILL would leave them running.
struct Local(Proc);

impl Drop for Local {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.0.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

#[test]
fn local_passes_the_query_memory_limit_to_every_child() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("cluster");
    std::env::set_var("TIDAL_QUERY_MEMORY_MAX_BYTES", MEMORY_MAX_BYTES.to_string());
    let local = Local(spawn(
        "local",
        &[
            "local".into(),
            "--data".into(),
            data.to_string_lossy().into_owned(),
            "--vnodes".into(),
            "2".into(),
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--http".into(),
            "off".into(),
        ],
    ));
    std::env::remove_var("TIDAL_QUERY_MEMORY_MAX_BYTES");
    let mnode = local.0.addr.clone();
    // Every data node serves SQL too, coordinating with its own limit.
    let dnodes: Vec<String> = rows(&shell(&mnode, "", "SHOW DNODES", "csv").expect("dnodes"))
        .iter()
        .map(|r| r.split(',').nth(1).expect("endpoint").to_string())
        .collect();
    assert_eq!(dnodes.len(), 2, "{dnodes:?}");

    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let c = Client::connect(&mnode).await.unwrap();
        common::load_scan_data(&c, "ql", SUBTABLES, ROWS_PER_SUBTABLE, WRITE_ROWS).await;
        for node in std::iter::once(&mnode).chain(&dnodes) {
            let c = Client::connect(node).await.unwrap();
            // A group per timestamp: 100,000 groups, far more state than 1 MiB.
            let e = c
                .execute("SELECT ts, COUNT(*) FROM m GROUP BY ts", "ql")
                .await
                .expect_err("a GROUP BY past the limit");
            common::assert_memory_limit_error(&e, MEMORY_MAX_BYTES, node);
            // Within the limit, the same node answers.
            let g = c
                .execute("SELECT k, COUNT(*) FROM m GROUP BY k ORDER BY k", "ql")
                .await
                .unwrap()
                .batch
                .unwrap();
            assert_eq!(g.num_rows(), SUBTABLES, "{node}");
            assert_eq!(g.row(0)[1], Value::Int(ROWS_PER_SUBTABLE as i64), "{node}");
        }
    });
    drop(local);
}
