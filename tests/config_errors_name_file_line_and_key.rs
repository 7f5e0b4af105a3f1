//! Bad configuration stops a server role before it starts, with one error line naming the
//! file and line (or the flag / variable), the key and the problem.

mod common;

use std::process::{Command, Stdio};

/// Runs `tidal ARGS` (with only `env` among TIDAL_* variables); returns (exit code, stderr).
fn run(args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let mut cmd = Command::new(common::BIN);
    for (k, _) in std::env::vars() {
        if k.starts_with("TIDAL_") || k == "RUST_LOG" {
            cmd.env_remove(k);
        }
    }
    let out = cmd
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("run tidal");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let p = dir.path().join(name);
    std::fs::write(&p, text).expect("write config");
    p.to_string_lossy().into_owned()
}

fn assert_all(err: &str, wants: &[&str]) {
    for w in wants {
        assert!(err.contains(w), "missing `{w}` in: {err}");
    }
    assert_eq!(err.trim().lines().count(), 1, "one error line: {err}");
}

#[test]
fn bad_configuration_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");

    let f = write(
        &dir,
        "unknown.toml",
        "listen = \"127.0.0.1:0\"\nmnode = \"127.0.0.1:1\"\nheartbeat = 5\n",
    );
    let (code, err) = run(&["dnode", "--config", &f, "--data", "/nonexistent"], &[]);
    assert_eq!(code, 1);
    assert_all(
        &err,
        &[
            &f,
            "line 3",
            "unknown key `heartbeat`",
            "heartbeat_interval_ms",
        ],
    );

    let f = write(
        &dir,
        "type.toml",
        "data = \"/x\"\n\ndnode_timeout_ms = \"ten\"\n",
    );
    let (code, err) = run(&["mnode", "--config", &f], &[]);
    assert_eq!(code, 1);
    assert_all(&err, &[&f, "line 3", "`dnode_timeout_ms`", "ten"]);

    let f = write(&dir, "enum.toml", "data = \"/x\"\nlog_format = \"xml\"\n");
    let (code, err) = run(&["local", "--config", &f], &[]);
    assert_eq!(code, 1);
    assert_all(&err, &[&f, "line 2", "`log_format`", "xml"]);

    let f = write(&dir, "syntax.toml", "data = \"/x\"\nlisten = \n");
    let (code, err) = run(&["mnode", "--config", &f], &[]);
    assert_eq!(code, 1);
    assert!(err.contains(&f) && err.contains("line 2"), "{err}");

    let f = write(
        &dir,
        "zero.toml",
        "data = \"/x\"\nshutdown_timeout_ms = 0\n",
    );
    let (code, err) = run(&["mnode", "--config", &f], &[]);
    assert_eq!(code, 1);
    assert_all(&err, &["`shutdown_timeout_ms`", &f, "at least 1"]);

    let (code, err) = run(
        &["mnode", "--data", "/x"],
        &[("TIDAL_LOG_LEVEL", "verbose")],
    );
    assert_eq!(code, 1);
    assert_all(&err, &["`log_level`", "TIDAL_LOG_LEVEL", "verbose"]);

    let (code, err) = run(&["mnode", "--listen", "127.0.0.1:0"], &[]);
    assert_eq!(code, 1);
    assert_all(&err, &["`data` is required", "--data", "TIDAL_DATA"]);

    let missing = dir.path().join("nope.toml");
    let (code, err) = run(&["mnode", "--config", &missing.to_string_lossy()], &[]);
    assert_eq!(code, 1);
    assert_all(
        &err,
        &["cannot read config file", &missing.to_string_lossy()],
    );

    let (code, err) = run(
        &["mnode", "--data", "/x", "--print-config"],
        &[("TIDAL_SNAPSHOT_EVERY_RECORDS", "many")],
    );
    assert_eq!(code, 2, "clap's usage error status");
    assert!(err.contains("many"), "{err}");
}
