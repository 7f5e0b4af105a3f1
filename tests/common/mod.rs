//! Test harness: a real cluster of `tidal` processes (one mnode, N data nodes) on ephemeral
//! loopback ports with data in a temporary folder. Processes can be killed with SIGKILL and
//! restarted on the same data (and, for the mnode, the same port).

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

pub const BIN: &str = env!("CARGO_BIN_EXE_tidal");

pub struct Proc {
    pub child: Child,
    pub addr: String,
    pub args: Vec<String>,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `tidal <args>` and waits for its `ready <role> <addr>` line.
pub fn spawn(role: &str, args: &[String]) -> Proc {
    let mut child = Command::new(BIN)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn tidal");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    let want = format!("ready {role} ");
    std::thread::spawn(move || {
        let mut sent = false;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if !sent {
                if let Some(a) = line.strip_prefix(&want) {
                    let _ = tx.send(a.trim().to_string());
                    sent = true;
                }
            }
        }
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("{role} did not print its ready line: {args:?}"));
    Proc {
        child,
        addr,
        args: args.to_vec(),
    }
}

pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub mnode: Option<Proc>,
    pub dnodes: Vec<Option<Proc>>,
    pub mnode_addr: String,
}

impl Cluster {
    pub fn start(dnodes: usize) -> Cluster {
        let dir = tempfile::tempdir().expect("tempdir");
        let mnode = spawn("mnode", &mnode_args(dir.path(), "127.0.0.1:0"));
        let mnode_addr = mnode.addr.clone();
        let mut c = Cluster {
            dir,
            mnode: Some(mnode),
            dnodes: Vec::new(),
            mnode_addr,
        };
        for i in 0..dnodes {
            let p = spawn("vnode", &c.dnode_args(i));
            c.dnodes.push(Some(p));
        }
        c
    }

    pub fn dnode_args(&self, i: usize) -> Vec<String> {
        vec![
            "vnode".into(),
            "--data".into(),
            self.dir
                .path()
                .join(format!("dnode-{i}"))
                .to_string_lossy()
                .into_owned(),
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--mnode".into(),
            self.mnode_addr.clone(),
        ]
    }

    pub fn data(&self) -> &Path {
        self.dir.path()
    }

    /// SIGKILL a data node (no shutdown path runs).
    pub fn kill_dnode(&mut self, i: usize) {
        if let Some(mut p) = self.dnodes[i].take() {
            let _ = p.child.kill();
            let _ = p.child.wait();
        }
    }

    pub fn restart_dnode(&mut self, i: usize) {
        self.kill_dnode(i);
        let p = spawn("vnode", &self.dnode_args(i));
        self.dnodes[i] = Some(p);
    }

    pub fn kill_mnode(&mut self) {
        if let Some(mut p) = self.mnode.take() {
            let _ = p.child.kill();
            let _ = p.child.wait();
        }
    }

    /// Restarts the mnode on the same data and the same port.
    pub fn restart_mnode(&mut self) {
        self.kill_mnode();
        let args = mnode_args(self.dir.path(), &self.mnode_addr);
        // The port was just released; retry briefly in case the kernel is slow to free it.
        for attempt in 0..50 {
            let mut child = Command::new(BIN)
                .args(&args)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .stdin(Stdio::null())
                .spawn()
                .expect("spawn mnode");
            let stdout = child.stdout.take().expect("stdout");
            let mut first = String::new();
            let _ = BufReader::new(stdout).read_line(&mut first);
            if first.starts_with("ready mnode ") {
                self.mnode = Some(Proc {
                    child,
                    addr: self.mnode_addr.clone(),
                    args: args.clone(),
                });
                return;
            }
            let _ = child.kill();
            let _ = child.wait();
            assert!(attempt < 49, "mnode did not restart on {}", self.mnode_addr);
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Runs `tidal shell -s SQL --format csv`; Ok(stdout) or Err(stderr).
    pub fn sql(&self, db: &str, sql: &str) -> Result<String, String> {
        shell(&self.mnode_addr, db, sql, "csv")
    }

    /// Like `sql` but panics with the server's message on failure.
    pub fn ok(&self, db: &str, sql: &str) -> String {
        self.sql(db, sql)
            .unwrap_or_else(|e| panic!("{sql}\nfailed: {e}"))
    }

    /// Expects failure and returns the error text.
    pub fn err(&self, db: &str, sql: &str) -> String {
        match self.sql(db, sql) {
            Ok(out) => panic!("{sql}\nunexpectedly succeeded:\n{out}"),
            Err(e) => e,
        }
    }
}

fn mnode_args(dir: &Path, listen: &str) -> Vec<String> {
    vec![
        "mnode".into(),
        "--data".into(),
        dir.join("mnode").to_string_lossy().into_owned(),
        "--listen".into(),
        listen.into(),
    ]
}

pub fn shell_output(host: &str, db: &str, sql: &str, format: &str) -> Output {
    let mut args = vec![
        "shell".to_string(),
        "--host".into(),
        host.into(),
        "--format".into(),
        format.into(),
        "-s".into(),
        sql.into(),
    ];
    if !db.is_empty() {
        args.push("-d".into());
        args.push(db.into());
    }
    Command::new(BIN)
        .args(&args)
        .stdin(Stdio::null())
        .output()
        .expect("run shell")
}

pub fn shell(host: &str, db: &str, sql: &str, format: &str) -> Result<String, String> {
    let out = shell_output(host, db, sql, format);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(stderr)
    }
}

/// CSV lines of a result without the header.
pub fn rows(csv: &str) -> Vec<String> {
    csv.lines().skip(1).map(str::to_string).collect()
}

pub const READINGS: &str = "CREATE STABLE readings (ts TIMESTAMP, latitude DOUBLE, longitude DOUBLE, elevation DOUBLE, velocity DOUBLE, heading DOUBLE, grade DOUBLE, fuel_consumption DOUBLE) TAGS (name VARCHAR(30), fleet VARCHAR(30), driver VARCHAR(30), model VARCHAR(30), device_version VARCHAR(30), load_capacity DOUBLE, fuel_capacity DOUBLE, nominal_fuel_consumption DOUBLE)";
pub const DIAGNOSTICS: &str = "CREATE STABLE diagnostics (ts TIMESTAMP, fuel_state DOUBLE, current_load DOUBLE, status BIGINT) TAGS (name VARCHAR(30), fleet VARCHAR(30), driver VARCHAR(30), model VARCHAR(30), device_version VARCHAR(30), load_capacity DOUBLE, fuel_capacity DOUBLE, nominal_fuel_consumption DOUBLE)";

pub fn tempdir_path(c: &Cluster, name: &str) -> PathBuf {
    c.dir.path().join(name)
}
