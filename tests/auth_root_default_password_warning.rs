//! The first start creates root with `taosdata` and every start warns until it is changed;
//! `--root-password` on the first start sets another password (and no warning).

mod common;

use common::{shell_as, BIN};
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const WARNING: &str = "user root has the default password 'taosdata'";

/// Starts an mnode, waits for its ready line; returns it with its address.
fn start(data: &std::path::Path, extra: &[&str]) -> (Child, String) {
    let mut child = Command::new(BIN)
        .args([
            "mnode",
            "--data",
            &data.to_string_lossy(),
            "--listen",
            "127.0.0.1:0",
        ])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn mnode");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(a) = line.strip_prefix("ready mnode ") {
                let _ = tx.send(a.trim().to_string());
            }
        }
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("mnode ready");
    (child, addr)
}

/// Stops the mnode and returns what it logged.
fn stop(mut child: Child) -> String {
    let _ = child.kill();
    let _ = child.wait();
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    err
}

#[test]
fn root_default_password_warns_until_changed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("mnode");

    let (m, addr) = start(&data, &[]);
    shell_as(&addr, "root", "taosdata", "", "SHOW USERS").expect("default password works");
    let log = stop(m);
    assert!(log.contains(WARNING), "first start: {log}");

    // Warns at every start while unchanged.
    let (m, addr) = start(&data, &[]);
    shell_as(
        &addr,
        "root",
        "taosdata",
        "",
        "ALTER USER root PASS 'Changed-1'",
    )
    .expect("alter");
    let log = stop(m);
    assert!(log.contains(WARNING), "second start: {log}");

    // Changed: no more warning; the password is the new one.
    let (m, addr) = start(&data, &[]);
    shell_as(&addr, "root", "Changed-1", "", "SHOW USERS").expect("new password");
    let log = stop(m);
    assert!(!log.contains(WARNING), "after the change: {log}");
    assert!(
        !log.contains("Changed-1"),
        "the password must never be logged: {log}"
    );

    // --root-password on a first start.
    let other = dir.path().join("other");
    let (m, addr) = start(&other, &["--root-password", "Given-Pw-2"]);
    shell_as(&addr, "root", "Given-Pw-2", "", "SHOW USERS").expect("given password");
    let e = shell_as(&addr, "root", "taosdata", "", "SHOW USERS").unwrap_err();
    assert!(e.contains("Unauthenticated"), "{e}");
    let log = stop(m);
    assert!(!log.contains(WARNING), "{log}");
    assert!(
        !log.contains("Given-Pw-2"),
        "the password must never be logged: {log}"
    );
}
