//! SIGTERM makes the mnode finish, snapshot its catalog (emptying the log) and exit 0; a
//! restart serves the same catalog.

mod common;

use common::spawn;
use std::process::Child;
use std::time::{Duration, Instant};

/// Bytes of the catalog log's file header (mnode/src/sdb/FORMAT.md).
const LOG_HEADER_BYTES: u64 = 16;

fn sigterm(child: &Child) {
    // SAFETY: kill(2) on a child we spawned and have not reaped; no memory is involved.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
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

#[test]
fn sigterm_snapshots_the_catalog_and_exits_zero() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mdir = dir.path().join("mnode");
    let logs = dir.path().join("logs");
    let mnode_args = |listen: &str| -> Vec<String> {
        vec![
            "mnode".into(),
            "--data".into(),
            mdir.to_string_lossy().into_owned(),
            "--listen".into(),
            listen.into(),
            "--log-dir".into(),
            logs.to_string_lossy().into_owned(),
        ]
    };
    let mut mnode = spawn("mnode", &mnode_args("127.0.0.1:0"));
    let addr = mnode.addr.clone();
    let mut dnode = spawn(
        "vnode",
        &[
            "vnode".into(),
            "--data".into(),
            dir.path().join("dnode").to_string_lossy().into_owned(),
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--mnode".into(),
            addr.clone(),
            "--log-level".into(),
            "warn".into(),
        ],
    );
    common::shell(&addr, "", "CREATE DATABASE s1 VGROUPS 2", "csv").expect("create s1");
    common::shell(
        &addr,
        "s1",
        "CREATE STABLE st (ts TIMESTAMP, v INT) TAGS (k INT)",
        "csv",
    )
    .expect("create stable");
    let log = mdir.join("mnode.log");
    assert!(
        std::fs::metadata(&log).expect("catalog log").len() > LOG_HEADER_BYTES,
        "the catalog changes are in the log before the stop"
    );

    sigterm(&dnode.child);
    assert!(wait_exit(&mut dnode.child, Duration::from_secs(60)).success());
    sigterm(&mnode.child);
    let status = wait_exit(&mut mnode.child, Duration::from_secs(60));
    assert!(status.success(), "a graceful stop exits 0, got {status}");
    assert_eq!(
        std::fs::metadata(&log).expect("catalog log").len(),
        LOG_HEADER_BYTES,
        "the snapshot absorbed the log"
    );
    assert!(mdir.join("mnode.snap").exists(), "snapshot written");
    let text = std::fs::read_to_string(logs.join("tidal-mnode.log")).expect("mnode log file");
    assert!(text.contains("catalog snapshot written"), "{text}");
    assert!(text.contains("mnode stopped"), "{text}");

    // Same catalog after a restart (on the same port, as the data node knows it).
    let mut restarted = None;
    for _ in 0..50 {
        let mut cmd = std::process::Command::new(common::BIN);
        cmd.args(mnode_args(&addr))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null());
        let mut child = cmd.spawn().expect("spawn mnode");
        let mut first = String::new();
        let stdout = child.stdout.take().expect("stdout");
        let _ = std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut first);
        if first.starts_with("ready mnode ") {
            restarted = Some(child);
            break;
        }
        let _ = child.kill();
        let _ = child.wait();
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut restarted = restarted.expect("mnode restarts on its port");
    let out = common::shell(&addr, "s1", "SHOW STABLES", "csv");
    let _ = restarted.kill();
    let _ = restarted.wait();
    let out = out.expect("show stables");
    assert!(out.contains("st"), "{out}");
}
