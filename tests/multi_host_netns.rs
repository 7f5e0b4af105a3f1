//! A cluster across network namespaces, so the multi-host path is exercised and not only
//! 127.0.0.1: one namespace per node, each with a veth to a bridge in the root namespace on a
//! private subnet (10.77.N.0/24, N and every name derived from the test's pid so parallel runs
//! do not clash). The mnode and three data nodes each listen on their own 10.77.N.x address
//! (one data node on the wildcard 0.0.0.0, which must advertise its namespace address, not
//! 0.0.0.0 or 127.0.0.1); a client in the root namespace creates a database with several
//! vgroups, writes and queries; then one data node is killed (its vgroups fail clearly,
//! the others keep answering) and restarted in its namespace (every row is back).
//!
//! Needs root and `ip netns` (CI runs as root). Otherwise it prints why and passes without
//! running. The namespaces, veths and bridge are removed by a Drop guard, even on failure.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tidal_client::Client;

const DNODES: usize = 3;
const TABLES: usize = 24;
const ROWS_PER_TABLE: usize = 50;
const PORT: u16 = 6030;

/// Runs `ip ARGS`; the error names the command and its stderr.
fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run `ip {}`: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Why this test cannot run here, if it cannot.
fn skip_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions and touches no memory.
    let uid = unsafe { libc::geteuid() };
    if uid != 0 {
        return Some(format!(
            "needs root to create network namespaces (running as uid {uid})"
        ));
    }
    if let Err(e) = ip(&["netns", "list"]) {
        return Some(format!("`ip netns` is unavailable: {e}"));
    }
    None
}

/// The namespaces, veths and bridge of one run; removed on drop.
struct Net {
    /// `10.77.N`
    prefix: String,
    bridge: String,
    namespaces: Vec<String>,
    host_veths: Vec<String>,
}

impl Net {
    /// Namespace `i` (0 = mnode) gets address `<prefix>.<i+1>`; the bridge `<prefix>.254`.
    fn create(nodes: usize) -> Result<Net, String> {
        let pid = std::process::id();
        let mut net = Net {
            prefix: format!("10.77.{}", 20 + pid % 200),
            bridge: format!("tbr{pid}"),
            namespaces: Vec::new(),
            host_veths: Vec::new(),
        };
        // Every object is recorded before it is created, so a failure half-way is cleaned up.
        ip(&["link", "add", &net.bridge, "type", "bridge"])?;
        // Bridged frames must not be subject to the host's iptables FORWARD policy (Docker
        // sets it to DROP); older kernels lack this switch, which then does not matter.
        let _ = ip(&[
            "link",
            "set",
            &net.bridge,
            "type",
            "bridge",
            "nf_call_iptables",
            "0",
        ]);
        ip(&[
            "addr",
            "add",
            &format!("{}.254/24", net.prefix),
            "dev",
            &net.bridge,
        ])?;
        ip(&["link", "set", &net.bridge, "up"])?;
        for i in 0..nodes {
            let ns = format!("tdl{pid}n{i}");
            let host = format!("tv{pid}{i}");
            let peer = format!("tp{pid}{i}");
            net.namespaces.push(ns.clone());
            ip(&["netns", "add", &ns])?;
            net.host_veths.push(host.clone());
            ip(&["link", "add", &host, "type", "veth", "peer", "name", &peer])?;
            ip(&["link", "set", &peer, "netns", &ns])?;
            ip(&["link", "set", &host, "master", &net.bridge])?;
            ip(&["link", "set", &host, "up"])?;
            let addr = format!("{}/24", net.addr(i));
            ip(&[
                "netns", "exec", &ns, "ip", "addr", "add", &addr, "dev", &peer,
            ])?;
            ip(&["netns", "exec", &ns, "ip", "link", "set", &peer, "up"])?;
            ip(&["netns", "exec", &ns, "ip", "link", "set", "lo", "up"])?;
        }
        Ok(net)
    }

    fn addr(&self, i: usize) -> String {
        format!("{}.{}", self.prefix, i + 1)
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for ns in &self.namespaces {
            if let Err(e) = ip(&["netns", "del", ns]) {
                eprintln!("cleanup: {e}");
            }
        }
        // A veth goes with its peer's namespace; delete explicitly in case that failed.
        for v in &self.host_veths {
            let _ = ip(&["link", "del", v]);
        }
        if let Err(e) = ip(&["link", "del", &self.bridge]) {
            eprintln!("cleanup: {e}");
        }
    }
}

/// A `tidal` process in a namespace; killed on drop.
struct NsProc {
    child: Child,
    addr: String,
}

impl Drop for NsProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `tidal ARGS` inside namespace `ns` and waits for its `ready <role> <addr>` line.
/// (`ip netns exec` execs the program, so the child is the `tidal` process itself.)
fn spawn_in(ns: &str, role: &str, args: &[String]) -> NsProc {
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns, common::BIN])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn ip netns exec tidal");
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
        .unwrap_or_else(|_| panic!("{role} in {ns} did not print its ready line: {args:?}"));
    NsProc { child, addr }
}

fn dnode_args(dir: &std::path::Path, i: usize, listen: &str, mnode: &str) -> Vec<String> {
    vec![
        "vnode".into(),
        "--data".into(),
        dir.join(format!("dnode-{i}"))
            .to_string_lossy()
            .into_owned(),
        "--listen".into(),
        listen.into(),
        "--mnode".into(),
        mnode.into(),
        "--log-level".into(),
        "warn".into(),
    ]
}

/// The single integer of a one-row, one-column result.
async fn count(client: &Client, db: &str, sql: &str) -> Result<i64, String> {
    let r = client.execute(sql, db).await.map_err(|e| e.to_string())?;
    let batch = r.batch.ok_or_else(|| format!("{sql}: no rows"))?;
    let col = batch
        .columns
        .first()
        .ok_or_else(|| format!("{sql}: no column"))?;
    match col.get(0) {
        tidal_common::Value::Int(n) => Ok(n),
        tidal_common::Value::UInt(n) => Ok(n as i64),
        other => Err(format!("{sql}: unexpected value {other:?}")),
    }
}

#[test]
fn cluster_across_network_namespaces() {
    if let Some(why) = skip_reason() {
        eprintln!("SKIPPED multi_host_netns: {why}");
        return;
    }
    // Declared first so it is dropped last: processes die before their namespaces go.
    let net = Net::create(1 + DNODES).unwrap_or_else(|e| panic!("network setup: {e}"));
    let dir = tempfile::tempdir().expect("tempdir");
    let mnode_addr = format!("{}:{PORT}", net.addr(0));
    let _mnode = spawn_in(
        &net.namespaces[0],
        "mnode",
        &[
            "mnode".into(),
            "--data".into(),
            dir.path().join("mnode").to_string_lossy().into_owned(),
            "--listen".into(),
            mnode_addr.clone(),
            "--log-level".into(),
            "warn".into(),
        ],
    );
    // Data node 1 listens on the wildcard address: it must work out its advertised address.
    let listen_of = |i: usize| {
        if i == 1 {
            format!("0.0.0.0:{PORT}")
        } else {
            format!("{}:{PORT}", net.addr(i))
        }
    };
    let mut dnodes: Vec<Option<NsProc>> = (1..=DNODES)
        .map(|i| {
            let args = dnode_args(dir.path(), i, &listen_of(i), &mnode_addr);
            Some(spawn_in(&net.namespaces[i], "vnode", &args))
        })
        .collect();
    for (i, d) in dnodes.iter().enumerate() {
        let d = d.as_ref().expect("running");
        assert!(!d.addr.is_empty(), "dnode {} bound {}", i + 1, d.addr);
    }

    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let client = rt
        .block_on(Client::connect(&mnode_addr))
        .unwrap_or_else(|e| panic!("connect from the root namespace to {mnode_addr}: {e}"));

    // Every data node registered with the address of its own namespace.
    let registered: Vec<String> = rt.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let list = client
                .mnode()
                .expect("mnode client")
                .list_dnodes(tidal_proto::v1::Empty {})
                .await
                .expect("list dnodes")
                .into_inner()
                .dnodes;
            if list.iter().filter(|d| d.alive).count() == DNODES || Instant::now() > deadline {
                let mut addrs: Vec<String> = list.into_iter().map(|d| d.addr).collect();
                addrs.sort();
                return addrs;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    let mut want: Vec<String> = (1..=DNODES)
        .map(|i| format!("{}:{PORT}", net.addr(i)))
        .collect();
    want.sort();
    assert_eq!(
        registered, want,
        "each data node advertises its namespace address (dnode 1 via the route to the mnode)"
    );

    rt.block_on(async {
        client
            .execute("CREATE DATABASE nsdb VGROUPS 6", "")
            .await
            .expect("create database");
        client
            .execute(
                "CREATE STABLE m (ts TIMESTAMP, v BIGINT) TAGS (id INT)",
                "nsdb",
            )
            .await
            .expect("create stable");
        for t in 0..TABLES {
            let values: Vec<String> = (0..ROWS_PER_TABLE)
                .map(|r| {
                    format!(
                        "({}, {})",
                        1_700_000_000_000i64 + r as i64 * 1000,
                        t * 1000 + r
                    )
                })
                .collect();
            let sql = format!(
                "INSERT INTO t{t} USING m TAGS ({t}) VALUES {}",
                values.join(" ")
            );
            client
                .execute(&sql, "nsdb")
                .await
                .unwrap_or_else(|e| panic!("insert t{t}: {e}"));
        }
    });
    let total = (TABLES * ROWS_PER_TABLE) as i64;
    let got = rt
        .block_on(count(&client, "nsdb", "SELECT COUNT(*) FROM m"))
        .expect("count");
    assert_eq!(
        got, total,
        "every row written across the namespaces is read back"
    );

    // The vgroups are spread over the data nodes, addressed by their namespace addresses.
    let route = rt.block_on(client.refresh_route("nsdb")).expect("route");
    let mut hosts: Vec<String> = route.vgroups.iter().map(|v| v.addr.clone()).collect();
    hosts.sort();
    hosts.dedup();
    assert_eq!(hosts, want, "the 6 vgroups are placed on all 3 data nodes");

    // Kill data node 2: tables on its vgroups fail with a clear error, the others answer.
    let victim = format!("{}:{PORT}", net.addr(2));
    dnodes[1] = None;
    let (mut on_victim, mut elsewhere) = (Vec::new(), Vec::new());
    for t in 0..TABLES {
        let name = format!("t{t}");
        let idx = route.index_of("nsdb", &name);
        if route.vgroups[idx].addr == victim {
            on_victim.push(name);
        } else {
            elsewhere.push(name);
        }
    }
    assert!(
        !on_victim.is_empty() && !elsewhere.is_empty(),
        "{on_victim:?} {elsewhere:?}"
    );
    let alive_table = &elsewhere[0];
    let n = rt
        .block_on(count(
            &client,
            "nsdb",
            &format!("SELECT COUNT(*) FROM {alive_table}"),
        ))
        .expect("a table on a live data node still answers");
    assert_eq!(n, ROWS_PER_TABLE as i64);
    let started = Instant::now();
    let e = rt
        .block_on(count(
            &client,
            "nsdb",
            &format!("SELECT COUNT(*) FROM {}", on_victim[0]),
        ))
        .expect_err("a table on the killed data node cannot answer (REPLICA 1)");
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "the failure is reported, not hung: {e}"
    );
    assert!(!e.is_empty());

    // Restart it in its namespace on the same data: every row is back.
    let args = dnode_args(dir.path(), 2, &listen_of(2), &mnode_addr);
    dnodes[1] = Some(spawn_in(&net.namespaces[2], "vnode", &args));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match rt.block_on(count(&client, "nsdb", "SELECT COUNT(*) FROM m")) {
            Ok(n) if n == total => break,
            other if Instant::now() > deadline => {
                panic!("after restarting data node 2: {other:?}, want {total}")
            }
            _ => std::thread::sleep(Duration::from_millis(300)),
        }
    }
    drop(dnodes);
    drop(_mnode);
    drop(net);
}
