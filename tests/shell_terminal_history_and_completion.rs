//! The interactive `tidal shell` on a terminal (a pseudo-terminal here): Tab completes keywords
//! and database names, a statement continues over lines with the `    -> ` prompt until its
//! `;`, Ctrl-C drops the statement being typed, Ctrl-D leaves, and the history is written to
//! the history file and recalled (Up arrow) by the next session, which finds the file through
//! `TIDAL_HISTORY`.

mod common;

use common::{Cluster, BIN};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

struct Terminal {
    master: File,
    child: Child,
    output: Arc<Mutex<String>>,
    /// How much of the output has been matched so far.
    seen: usize,
}

impl Terminal {
    fn spawn(args: &[&str], envs: &[(&str, &Path)]) -> Terminal {
        let (mut master, mut slave) = (0, 0);
        let size = libc::winsize {
            ws_row: 40,
            ws_col: 200,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: openpty writes two descriptors into the given ints; the other pointers are
        // null (no name, default termios) or point to a valid winsize.
        let rc = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                &size,
            )
        };
        assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
        // SAFETY: both descriptors were just returned by openpty and are owned here.
        let (master, slave) = unsafe { (File::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
        let mut cmd = Command::new(BIN);
        cmd.args(args)
            .env("TERM", "xterm")
            .env_remove("TIDAL_HISTORY")
            .stdin(Stdio::from(slave.try_clone().expect("dup")))
            .stdout(Stdio::from(slave.try_clone().expect("dup")))
            .stderr(Stdio::from(slave));
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("spawn shell");
        // `cmd` holds the parent's copies of the slave side: drop them so that reading the
        // master ends when the shell exits.
        drop(cmd);
        let output = Arc::new(Mutex::new(String::new()));
        let mut reader = master.try_clone().expect("dup master");
        let out = output.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                out.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Terminal {
            master,
            child,
            output,
            seen: 0,
        }
    }

    /// Waits until `needle` appears in the output after what was matched before.
    fn expect(&mut self, needle: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            {
                let out = self.output.lock().unwrap();
                if let Some(i) = out[self.seen..].find(needle) {
                    self.seen += i + needle.len();
                    return;
                }
                assert!(
                    Instant::now() < deadline,
                    "no {needle:?} in the terminal output after:\n{}",
                    &out[self.seen..]
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn send(&mut self, keys: &str) {
        self.master.write_all(keys.as_bytes()).expect("type");
        self.master.flush().expect("flush");
    }

    fn all_output(&self) -> String {
        self.output.lock().unwrap().clone()
    }

    fn wait_exit(&mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(s) = self.child.try_wait().expect("wait") {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "shell did not exit:\n{}",
                self.all_output()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn terminal_completion_continuation_interrupt_and_history() {
    let c = Cluster::start(1);
    c.ok("", "CREATE DATABASE shtdb");
    c.ok(
        "shtdb",
        "CREATE STABLE readings (ts TIMESTAMP, velocity DOUBLE) TAGS (name VARCHAR(10))",
    );
    c.ok(
        "shtdb",
        "INSERT INTO r_1 USING readings TAGS ('t1') VALUES (1451606400000, 20)",
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let history = dir.path().join("history");
    let history_arg = history.to_str().expect("path");

    let mut t = Terminal::spawn(
        &[
            "shell",
            "--host",
            &c.mnode_addr,
            "--history-file",
            history_arg,
        ],
        &[],
    );
    t.expect("tidal> ");
    // The catalog for completion is fetched in the background at start.
    std::thread::sleep(Duration::from_millis(1500));
    // Tab completes a keyword in the case it was typed, then a database name.
    t.send("sho\t databases;\r");
    t.expect("shtdb");
    t.expect("row(s) in set");
    t.expect("tidal> ");
    t.send("use sht\t;\r");
    t.expect("Query OK, 0 row(s) affected");
    t.expect("tidal> ");
    // A statement over two lines.
    std::thread::sleep(Duration::from_millis(1000));
    t.send("select count(*)\r");
    t.expect("    -> ");
    t.send("from readi\t;\r");
    t.expect("1 row(s) in set");
    t.expect("tidal> ");
    // Ctrl-C forgets the unfinished statement: the next one runs on its own.
    t.send("select nonsense\r");
    t.expect("    -> ");
    t.send("\x03");
    t.expect("tidal> ");
    t.send("show databases;\r");
    t.expect("row(s) in set");
    t.expect("tidal> ");
    // Ctrl-D leaves.
    t.send("\x04");
    let status = t.wait_exit();
    let out = t.all_output();
    assert!(status.success(), "{out}");
    assert!(!out.contains("DB error"), "{out}");

    let saved = std::fs::read_to_string(&history).expect("history file written");
    for entry in ["show databases;", "use shtdb;", "from readings;"] {
        assert!(saved.contains(entry), "{entry:?} not in history:\n{saved}");
    }

    // The next session finds the file through TIDAL_HISTORY; Up recalls the last statement.
    let mut t = Terminal::spawn(
        &["shell", "--host", &c.mnode_addr],
        &[("TIDAL_HISTORY", history.as_path())],
    );
    t.expect("tidal> ");
    t.send("\x1b[A");
    t.expect("show databases;");
    t.send("\r");
    t.expect("shtdb");
    t.expect("row(s) in set");
    t.expect("tidal> ");
    t.send("quit\r");
    let status = t.wait_exit();
    assert!(status.success(), "{}", t.all_output());
}
