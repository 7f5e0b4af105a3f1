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
    /// The HTTP API address, if the process printed `ready http <addr>` (before its role's
    /// ready line, which is how the servers order them).
    pub http: Option<String>,
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
        let mut http = None;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if !sent {
                if let Some(a) = line.strip_prefix("ready http ") {
                    http = Some(a.trim().to_string());
                } else if let Some(a) = line.strip_prefix(&want) {
                    let _ = tx.send((a.trim().to_string(), http.clone()));
                    sent = true;
                }
            }
        }
    });
    let (addr, http) = rx
        .recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("{role} did not print its ready line: {args:?}"));
    Proc {
        child,
        addr,
        args: args.to_vec(),
        http,
    }
}

pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub mnode: Option<Proc>,
    pub dnodes: Vec<Option<Proc>>,
    pub mnode_addr: String,
    /// The mnode's HTTP API address (clusters started with [`Cluster::start_with_http`]).
    pub http: Option<String>,
}

impl Cluster {
    pub fn start(dnodes: usize) -> Cluster {
        Cluster::start_inner(dnodes, false)
    }

    /// Like [`Cluster::start`], with the mnode also serving the HTTP API on an ephemeral port.
    pub fn start_with_http(dnodes: usize) -> Cluster {
        Cluster::start_inner(dnodes, true)
    }

    fn start_inner(dnodes: usize, http: bool) -> Cluster {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut args = mnode_args(dir.path(), "127.0.0.1:0");
        if http {
            args.push("--http".into());
            args.push("127.0.0.1:0".into());
        }
        let mnode = spawn("mnode", &args);
        let mnode_addr = mnode.addr.clone();
        let http = mnode.http.clone();
        let mut c = Cluster {
            dir,
            mnode: Some(mnode),
            dnodes: Vec::new(),
            mnode_addr,
            http,
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
                    http: None,
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

/// `tidal shell -u USER -p PASSWORD -s SQL --format csv` against `host`; Ok(stdout) or
/// Err(stderr).
pub fn shell_as(
    host: &str,
    user: &str,
    password: &str,
    db: &str,
    sql: &str,
) -> Result<String, String> {
    let mut args = vec![
        "shell".to_string(),
        "--host".into(),
        host.into(),
        "-u".into(),
        user.into(),
        "-p".into(),
        password.into(),
        "--format".into(),
        "csv".into(),
        "-s".into(),
        sql.into(),
    ];
    if !db.is_empty() {
        args.push("-d".into());
        args.push(db.into());
    }
    let out = Command::new(BIN)
        .args(&args)
        .stdin(Stdio::null())
        .output()
        .expect("run shell");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// `Authorization: Basic ...` for `user:password`.
pub fn basic_auth(user: &str, password: &str) -> String {
    const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let raw = format!("{user}:{password}");
    let mut out = String::new();
    for chunk in raw.as_bytes().chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(B64[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    format!("Basic {out}")
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

/// `Authorization` value of the default user (root / taosdata) for the HTTP API.
pub const ROOT_BASIC_AUTH: &str = "Basic cm9vdDp0YW9zZGF0YQ==";

/// A minimal HTTP/1.1 client for the HTTP API tests: one request per connection, as root
/// unless `headers` carry their own `Authorization`. Returns (status, body).
pub fn http_request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, String) {
    let mut h: Vec<(&str, &str)> = headers.to_vec();
    if !h
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("authorization"))
    {
        h.push(("Authorization", ROOT_BASIC_AUTH));
    }
    http_request_raw(addr, method, path, &h, body)
}

/// [`http_request`] with exactly the given headers (no default credentials).
pub fn http_request_raw(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect http");
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).expect("write request");
    s.write_all(body).expect("write body");
    let mut out = Vec::new();
    s.read_to_end(&mut out).expect("read response");
    let text = String::from_utf8_lossy(&out).into_owned();
    let status: u16 = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("bad HTTP response: {text}"));
    let body = match text.find("\r\n\r\n") {
        Some(i) => text[i + 4..].to_string(),
        None => String::new(),
    };
    (status, body)
}

/// POSTs line protocol to `/write?db=DB` (plus `extra` query parameters).
pub fn write_lp(http: &str, db: &str, extra: &str, body: &str) -> (u16, String) {
    http_request(
        http,
        "POST",
        &format!("/write?db={db}{extra}"),
        &[],
        body.as_bytes(),
    )
}

/// A TSBS-IoT-shaped data set (../shared/tsbs-iot.md §2) in both file formats, small and
/// deterministic: `trucks` trucks, `epochs` 10-second epochs, every 10th row with one field
/// missing (NULL). Returns (influx text, tdengine text, rows per subtable).
pub fn tsbs_files(trucks: usize, epochs: usize) -> (String, String, usize) {
    let t0_ms: i64 = 1_451_606_400_000;
    let fleets = ["East", "West", "North", "South"];
    let mut influx = String::new();
    let mut td = String::new();
    td.push_str("2,readings,r_truck_0,create table readings (ts timestamp,latitude double,longitude double,elevation double,velocity double,heading double,grade double,fuel_consumption double) tags (name binary(30),fleet binary(30),driver binary(30),model binary(30),device_version binary(30),load_capacity double,fuel_capacity double,nominal_fuel_consumption double)\n");
    td.push_str("2,diagnostics,d_truck_0,create table diagnostics (ts timestamp,fuel_state double,current_load double,status bigint) tags (name binary(30),fleet binary(30),driver binary(30),model binary(30),device_version binary(30),load_capacity double,fuel_capacity double,nominal_fuel_consumption double)\n");
    let mut n = 0usize;
    for e in 0..epochs {
        let ts = t0_ms + e as i64 * 10_000;
        for (m, prefix) in [("readings", "r_"), ("diagnostics", "d_")] {
            for t in 0..trucks {
                let name = format!("truck_{t}");
                let fleet = fleets[t % 4];
                let table = format!("{prefix}{name}");
                if e == 0 {
                    td.push_str(&format!("3,{m},{table},create table {table} using {m} (name,fleet,driver,model,device_version,load_capacity,fuel_capacity,nominal_fuel_consumption) tags ('{name}','{fleet}','Seth','H-2','v2.3',1500,150,12)\n"));
                }
                let (names, values): (Vec<&str>, Vec<String>) = if m == "readings" {
                    (
                        vec![
                            "latitude",
                            "longitude",
                            "elevation",
                            "velocity",
                            "heading",
                            "grade",
                            "fuel_consumption",
                        ],
                        vec![
                            format!("{}.{:05}", t % 90, e % 100000),
                            "4.72037".into(),
                            format!("{}", e % 500),
                            "0".into(),
                            "221".into(),
                            "0".into(),
                            "25".into(),
                        ],
                    )
                } else {
                    (
                        vec!["fuel_state", "current_load", "status"],
                        vec!["0.9".into(), format!("{}", e % 5000), format!("{}", e % 6)],
                    )
                };
                n += 1;
                let null_at = if n % 10 == 0 {
                    Some(n % names.len())
                } else {
                    None
                };
                let mut fields = Vec::new();
                let mut tvals = Vec::new();
                for (i, (k, v)) in names.iter().zip(values.iter()).enumerate() {
                    if Some(i) == null_at {
                        tvals.push("null".to_string());
                        continue;
                    }
                    let suffix = if *k == "status" { "i" } else { "" };
                    fields.push(format!("{k}={v}{suffix}"));
                    tvals.push(v.clone());
                }
                influx.push_str(&format!(
                    "{m},name={name},fleet={fleet},driver=Seth,model=H-2,device_version=v2.3 load_capacity=1500,fuel_capacity=150,nominal_fuel_consumption=12,{} {}\n",
                    fields.join(","),
                    ts * 1_000_000
                ));
                td.push_str(&format!(
                    "1,{table},{},({ts},{})\n",
                    names.len(),
                    tvals.join(",")
                ));
            }
        }
    }
    (influx, td, epochs)
}

/// Creates database `db` (VGROUPS 2) with STABLE `m (ts, v DOUBLE) TAGS (k INT)` and loads
/// `subtables` x `rows_per_subtable` rows (1 ms apart) through the client library, in writes of
/// `write_rows` rows: data for queries that run long enough to be killed or time out.
pub async fn load_scan_data(
    c: &tidal_client::Client,
    db: &str,
    subtables: usize,
    rows_per_subtable: usize,
    write_rows: usize,
) {
    use tidal_common::{Column, DataType, StableSchema, TableWrite, Value};
    c.execute(&format!("CREATE DATABASE {db} VGROUPS 2"), "")
        .await
        .unwrap();
    c.execute("CREATE STABLE m (ts TIMESTAMP, v DOUBLE) TAGS (k INT)", db)
        .await
        .unwrap();
    let schema: StableSchema = c.stable(db, "m").await.unwrap();
    for t in 0..subtables {
        for start in (0..rows_per_subtable).step_by(write_rows) {
            let mut ts = Column::empty(DataType::Timestamp, write_rows);
            let mut v = Column::empty(DataType::Double, write_rows);
            for r in start..start + write_rows {
                ts.push(&Value::Timestamp(1_600_000_000_000 + r as i64));
                v.push(&Value::Float((r % 1000) as f64 * 0.5));
            }
            let w = TableWrite {
                table: format!("t{t}"),
                stable: "m".into(),
                tags: Some(vec![Value::Int(t as i64)]),
                columns: vec![ts, v],
            };
            c.write(db, std::slice::from_ref(&schema), vec![w])
                .await
                .unwrap();
        }
    }
}

/// Asserts that `e` is the per-query memory-limit error for a limit of `max_bytes`
/// (RESOURCE_EXHAUSTED, naming the key and what to do); `ctx` prefixes the failure message.
pub fn assert_memory_limit_error(e: &tidal_client::ClientError, max_bytes: u64, ctx: &str) {
    assert_eq!(
        e.code,
        tidal_common::StatusCode::ResourceExhausted,
        "{ctx}: {}",
        e.message
    );
    assert!(
        e.message.starts_with("query memory limit exceeded: ")
            && e.message.ends_with(&format!(
                "needs more than {max_bytes} bytes (query_memory_max_bytes); \
                 add a filter or raise the limit"
            )),
        "{ctx}: {}",
        e.message
    );
}

/// Sum of `tidal_dnode_fragments_total{..,thread="<thread>"}` over the data nodes (GET
/// /metrics of a cluster started with HTTP): which thread ran the fragment calls.
pub fn dnode_fragments(c: &Cluster, thread: &str) -> u64 {
    metric_sum(
        c,
        "tidal_dnode_fragments_total{",
        &format!("thread=\"{thread}\"}}"),
    )
}

/// Sum of the samples in GET /metrics (of a cluster started with HTTP) whose line starts
/// with `prefix` and contains `contains`, all integers.
pub fn metric_sum(c: &Cluster, prefix: &str, contains: &str) -> u64 {
    let http = c.http.as_deref().expect("http");
    let (status, body) = http_request(http, "GET", "/metrics", &[], b"");
    assert_eq!(status, 200, "{body}");
    body.lines()
        .filter(|l| l.starts_with(prefix) && l.contains(contains))
        .map(|l| {
            l.rsplit(' ')
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or_else(|| panic!("bad sample {l}"))
        })
        .sum()
}

/// Raw connections to a data node's frame port, for the tests of the frame protocol itself.
pub mod raw_frames {
    use std::io::Read;
    use std::net::TcpStream;
    use std::time::Duration;
    use tidal_client::frames::{self, Kind};

    /// A blocking connection to `addr` that gives up reading after 10 s.
    pub fn raw(addr: &str) -> TcpStream {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s
    }

    /// Reads one frame (blocking), `None` at end of stream.
    pub fn read_frame(s: &mut TcpStream) -> Option<frames::Frame> {
        let mut buf = bytes::BytesMut::new();
        let mut chunk = [0u8; 4096];
        loop {
            if let Some(f) = frames::decode(&mut buf, frames::FRAME_BYTES_MAX).unwrap() {
                return Some(f);
            }
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => return None,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    /// A session token of root (default password), logged in at the mnode `mnode_addr`: a
    /// frame carries its caller's token.
    pub async fn root_token(mnode_addr: &str) -> String {
        use tidal_proto::v1;
        v1::auth_client::AuthClient::connect(format!("http://{mnode_addr}"))
            .await
            .unwrap()
            .login(v1::LoginRequest {
                user: "root".into(),
                password: "taosdata".into(),
            })
            .await
            .unwrap()
            .into_inner()
            .token
    }

    /// The error an ERROR frame carries.
    pub fn error_of(f: frames::Frame) -> tidal_client::ClientError {
        assert_eq!(f.kind, Kind::Error);
        frames::decode_error(f.body).unwrap()
    }
}

/// TSBS's TDengine command stream for `tidal load --format tdengine`: a STABLE `m` with one
/// DOUBLE column and two tags, and its subtables' `3,` lines.
pub mod tdengine {
    use std::fmt::Write as _;

    pub const STABLE: &str =
        "2,m,m,create table m (ts timestamp, v double) tags (loc binary(16), gid int)\n";

    /// Declares subtable `t{t}` of `m` with tags (`loc`, `t`).
    pub fn declare(out: &mut String, t: usize, loc: &str) {
        writeln!(
            out,
            "3,m,t{t},create table t{t} using m (loc,gid) tags ('{loc}',{t})"
        )
        .expect("writing to a String");
    }
}
