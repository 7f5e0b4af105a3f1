//! A server role takes its configuration from a TOML file, TIDAL_<KEY> variables and flags,
//! in that order of increasing precedence; `--print-config` shows the effective values and
//! where each came from, and the server runs with the file's settings (here: JSON logs).

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// `tidal ARGS` with no TIDAL_* variables from the test's environment except `env`.
fn tidal(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(common::BIN);
    for (k, _) in std::env::vars() {
        if k.starts_with("TIDAL_") || k == "RUST_LOG" {
            cmd.env_remove(k);
        }
    }
    cmd.args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null());
    cmd
}

#[test]
fn file_env_and_flags_merge_in_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("mnode");
    let file = dir.path().join("mnode.toml");
    std::fs::write(
        &file,
        format!(
            "# mnode test config\ndata = {:?}\nlisten = \"127.0.0.1:0\"\ndnode_timeout_ms = 3000\nsnapshot_every_records = 5\nlog_format = \"json\"\n",
            data.to_string_lossy()
        ),
    )
    .expect("write config");
    let f = file.to_string_lossy().into_owned();

    let out = tidal(
        &[
            "mnode",
            "--config",
            &f,
            "--print-config",
            "--snapshot-every-records",
            "9",
        ],
        &[
            ("TIDAL_DNODE_TIMEOUT_MS", "4000"),
            ("TIDAL_SNAPSHOT_EVERY_RECORDS", "7"),
        ],
    )
    .output()
    .expect("run print-config");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for want in [
        "snapshot_every_records = 9  # --snapshot-every-records".to_string(),
        "dnode_timeout_ms = 4000  # TIDAL_DNODE_TIMEOUT_MS".to_string(),
        format!("listen = \"127.0.0.1:0\"  # {f}"),
        format!("log_format = \"json\"  # {f}"),
        "shutdown_timeout_ms = 30000  # default".to_string(),
        "# http is not set".to_string(),
    ] {
        assert!(text.contains(&want), "missing `{want}` in:\n{text}");
    }
    assert!(!data.exists(), "--print-config only prints");

    // The printed configuration is itself a valid config file giving the same result.
    let printed = dir.path().join("printed.toml");
    std::fs::write(&printed, text.as_bytes()).expect("write printed");
    let again = tidal(
        &[
            "mnode",
            "--config",
            &printed.to_string_lossy(),
            "--print-config",
        ],
        &[],
    )
    .output()
    .expect("reprint");
    let again_text = String::from_utf8_lossy(&again.stdout);
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert!(
        again_text.contains("snapshot_every_records = 9  #"),
        "{again_text}"
    );
    assert!(
        again_text.contains("dnode_timeout_ms = 4000  #"),
        "{again_text}"
    );

    // Run it: the file's listen address, data directory and JSON log format apply.
    let mut child = tidal(&["mnode", "--config", &f], &[("TIDAL_LOG_LEVEL", "info")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn mnode");
    let stdout = child.stdout.take().expect("stdout");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut first = String::new();
    BufReader::new(stdout)
        .read_line(&mut first)
        .expect("ready line");
    assert!(first.starts_with("ready mnode 127.0.0.1:"), "{first}");
    let ready = loop {
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("a JSON log line announcing readiness");
        let j: serde_json::Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("log line is not JSON ({e}): {line}"));
        if j["fields"]["message"] == "mnode ready" {
            break j;
        }
    };
    assert_eq!(ready["level"], "INFO");
    assert!(
        data.join("mnode.log").exists(),
        "the file's data directory is used"
    );
    // SAFETY: kill(2) on our own child; no memory is involved.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
    }
    let status = child.wait().expect("wait");
    assert!(status.success(), "graceful stop exits 0: {status}");
}
