//! SIGTERM makes a data node flush every vnode's memtables to STT files and exit 0, so the
//! next start replays nothing from the WAL; every row is still there. The contrast (SIGKILL)
//! shows the replay check can fail: then the WAL has records to replay.

mod common;

use common::spawn;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};
use tidal_client::Client;

const VGROUPS: usize = 4;
const TABLES: usize = 16;
const ROWS_PER_TABLE: usize = 100;
/// Bytes of a WAL file header (vnode/src/wal/FORMAT.md): a file this size holds no record.
const WAL_HEADER_BYTES: u64 = 24;

fn signal(child: &Child, sig: libc::c_int) {
    // SAFETY: kill(2) on a child we spawned and have not reaped; no memory is involved.
    unsafe {
        libc::kill(child.id() as libc::pid_t, sig);
    }
}

fn wait_exit(child: &mut Child, within: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + within;
    loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "process did not exit within {within:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn vnode_dirs(dnode: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dnode.join("vnodes"))
        .expect("vnodes dir")
        .flatten()
        .map(|e| e.path())
        .collect();
    v.sort();
    v
}

fn files_with(dir: &Path, ext: &str) -> Vec<(PathBuf, u64)> {
    std::fs::read_dir(dir)
        .expect("read dir")
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == ext))
        .map(|e| (e.path(), e.metadata().expect("metadata").len()))
        .collect()
}

/// `records` of every "WAL replayed" event in the JSON log text.
fn replayed(log: &str) -> Vec<u64> {
    log.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|j| j["fields"]["message"] == "WAL replayed")
        .map(|j| {
            j["fields"]["records"]
                .as_u64()
                .expect("records is a number")
        })
        .collect()
}

fn log_since(path: &Path, offset: usize) -> String {
    let text = std::fs::read_to_string(path).expect("read log");
    text.get(offset..).unwrap_or("").to_string()
}

async fn count(client: &Client, sql: &str) -> i64 {
    let r = client.execute(sql, "g").await.expect("query");
    match r.batch.expect("rows").columns[0].get(0) {
        tidal_common::Value::Int(n) => n,
        other => panic!("{sql}: {other:?}"),
    }
}

#[test]
fn sigterm_flushes_memtables_and_restart_replays_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mnode = spawn(
        "mnode",
        &[
            "mnode".into(),
            "--data".into(),
            dir.path().join("mnode").to_string_lossy().into_owned(),
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--log-level".into(),
            "warn".into(),
        ],
    );
    let dnode_dir = dir.path().join("dnode");
    let logs = dir.path().join("logs");
    let log_file = logs.join("tidal-dnode.log");
    let dnode_args: Vec<String> = vec![
        "vnode".into(),
        "--data".into(),
        dnode_dir.to_string_lossy().into_owned(),
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--mnode".into(),
        mnode.addr.clone(),
        "--log-dir".into(),
        logs.to_string_lossy().into_owned(),
        "--log-format".into(),
        "json".into(),
        "--log-level".into(),
        "info".into(),
    ];
    let mut dnode = spawn("vnode", &dnode_args);

    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let client = rt.block_on(Client::connect(&mnode.addr)).expect("connect");
    rt.block_on(async {
        client
            .execute(&format!("CREATE DATABASE g VGROUPS {VGROUPS}"), "")
            .await
            .expect("create database");
        client
            .execute(
                "CREATE STABLE m (ts TIMESTAMP, v BIGINT) TAGS (id INT)",
                "g",
            )
            .await
            .expect("create stable");
        for t in 0..TABLES {
            let values: Vec<String> = (0..ROWS_PER_TABLE)
                .map(|r| format!("({}, {r})", 1_700_000_000_000i64 + r as i64 * 1000))
                .collect();
            client
                .execute(
                    &format!(
                        "INSERT INTO t{t} USING m TAGS ({t}) VALUES {}",
                        values.join(" ")
                    ),
                    "g",
                )
                .await
                .expect("insert");
        }
    });
    let total = (TABLES * ROWS_PER_TABLE) as i64;
    assert_eq!(rt.block_on(count(&client, "SELECT COUNT(*) FROM m")), total);
    let vnodes = vnode_dirs(&dnode_dir);
    assert_eq!(vnodes.len(), VGROUPS);
    let wal_bytes: u64 = vnodes
        .iter()
        .flat_map(|v| files_with(&v.join("wal"), "log"))
        .map(|(_, n)| n)
        .sum();
    assert!(
        wal_bytes > VGROUPS as u64 * WAL_HEADER_BYTES,
        "before the stop the WALs hold the rows ({wal_bytes} bytes)"
    );

    // Graceful stop.
    signal(&dnode.child, libc::SIGTERM);
    let status = wait_exit(&mut dnode.child, Duration::from_secs(60));
    assert!(status.success(), "a graceful stop exits 0, got {status}");
    for v in &vnodes {
        let wal = files_with(&v.join("wal"), "log");
        assert!(
            wal.iter().all(|(_, n)| *n == WAL_HEADER_BYTES),
            "{}: WAL trimmed to empty files after the flush: {wal:?}",
            v.display()
        );
        let stts = files_with(&v.join("tsdb"), "stt");
        assert!(
            !stts.is_empty(),
            "{}: the memtable became STT files",
            v.display()
        );
    }
    let log = log_since(&log_file, 0);
    assert!(log.contains("vnode flushed"), "{log}");
    assert!(log.contains("data node stopped"), "{log}");

    // Restart: nothing to replay, every row present.
    let offset = std::fs::metadata(&log_file).expect("log").len() as usize;
    dnode = spawn("vnode", &dnode_args);
    let after = replayed(&log_since(&log_file, offset));
    assert_eq!(
        after,
        vec![0; VGROUPS],
        "no WAL replay after a graceful stop"
    );
    let got = rt.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match client.execute("SELECT COUNT(*) FROM m", "g").await {
                Ok(_) => return count(&client, "SELECT COUNT(*) FROM m").await,
                Err(e) if Instant::now() > deadline => panic!("query after restart: {e}"),
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    });
    assert_eq!(got, total, "every row survives the graceful restart");

    // Contrast: rows written and then SIGKILL leave records for the next start to replay.
    rt.block_on(async {
        client
            .execute("INSERT INTO t0 VALUES (1700000500000, 1)", "g")
            .await
            .expect("insert");
    });
    let _ = dnode.child.kill();
    let _ = dnode.child.wait();
    let offset = std::fs::metadata(&log_file).expect("log").len() as usize;
    let _dnode = spawn("vnode", &dnode_args);
    let after = replayed(&log_since(&log_file, offset));
    assert_eq!(after.len(), VGROUPS, "{after:?}");
    assert!(
        after.iter().sum::<u64>() >= 1,
        "the unflushed write is replayed: {after:?}"
    );
}
