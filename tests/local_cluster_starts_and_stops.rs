//! `tidal local` starts an mnode and N data nodes, prints `ready local ADDR`, serves SQL, and
//! stops every child cleanly on SIGTERM.

mod common;

use common::{rows, shell, spawn};
use std::time::{Duration, Instant};

#[test]
fn local_cluster_serves_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("cluster");
    let mut p = spawn(
        "local",
        &[
            "local".into(),
            "--data".into(),
            data.to_string_lossy().into_owned(),
            "--vnodes".into(),
            "3".into(),
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--http".into(),
            "127.0.0.1:0".into(),
        ],
    );
    assert!(p.http.is_some(), "tidal local printed no `ready http` line");
    let dnodes = rows(&shell(&p.addr, "", "SHOW DNODES", "csv").expect("show dnodes"));
    assert_eq!(dnodes.len(), 3, "{dnodes:?}");
    shell(&p.addr, "", "CREATE DATABASE iot VGROUPS 3", "csv").expect("create database");

    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(p.child.id() as libc::pid_t, libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = p.child.try_wait().expect("wait") {
            assert!(status.success(), "tidal local exited with {status}");
            break;
        }
        assert!(Instant::now() < deadline, "tidal local did not stop");
        std::thread::sleep(Duration::from_millis(100));
    }
    // No child is left serving.
    assert!(shell(&p.addr, "", "SHOW DNODES", "csv").is_err());
}
