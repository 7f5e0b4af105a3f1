//! `tidal local`: an mnode and N data nodes on loopback, each a child process of this one.
//! Readiness is read from each child's `ready <role> <addr>` line. The HTTP API (default
//! 127.0.0.1:6041, `--http off` disables it) is served by this process itself. On SIGINT/SIGTERM (or when
//! a child dies) every child gets SIGTERM, then SIGKILL after a grace period.

use crate::server::BoxError;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// How long a child may take to print its ready line.
const READY_TIMEOUT_MS: u64 = 60_000;
/// How long children get to stop after SIGTERM before SIGKILL.
const STOP_GRACE_MS: u64 = 15_000;

pub struct Cluster {
    /// Children in start order: the mnode first.
    children: Vec<(String, Child)>,
    pub addr: String,
}

async fn spawn_ready(role: &str, args: &[String]) -> Result<(Child, String), BoxError> {
    let exe = std::env::current_exe()?;
    let mut child = Command::new(exe)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let Some(stdout) = child.stdout.take() else {
        return Err("child has no stdout".into());
    };
    let mut lines = BufReader::new(stdout).lines();
    let want = format!("ready {role} ");
    let addr = tokio::time::timeout(Duration::from_millis(READY_TIMEOUT_MS), async {
        while let Some(line) = lines.next_line().await? {
            if let Some(addr) = line.strip_prefix(&want) {
                return Ok::<_, std::io::Error>(Some(addr.trim().to_string()));
            }
        }
        Ok(None)
    })
    .await
    .map_err(|_| format!("{role} did not become ready within {READY_TIMEOUT_MS} ms"))??;
    let Some(addr) = addr else {
        return Err(format!("{role} exited before it was ready").into());
    };
    // Keep draining the child's stdout so it never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok((child, addr))
}

impl Cluster {
    pub async fn start(data: &Path, dnodes: u32, listen: &str) -> Result<Cluster, BoxError> {
        std::fs::create_dir_all(data)?;
        let d = |p: PathBuf| p.to_string_lossy().into_owned();
        let (mnode, addr) = spawn_ready(
            "mnode",
            &[
                "mnode".into(),
                "--data".into(),
                d(data.join("mnode")),
                "--listen".into(),
                listen.into(),
            ],
        )
        .await?;
        let mut cluster = Cluster {
            children: vec![("mnode".into(), mnode)],
            addr: addr.clone(),
        };
        for i in 1..=dnodes {
            let args = [
                "vnode".into(),
                "--data".into(),
                d(data.join(format!("dnode-{i}"))),
                "--listen".into(),
                "127.0.0.1:0".into(),
                "--mnode".into(),
                addr.clone(),
            ];
            match spawn_ready("vnode", &args).await {
                Ok((child, _)) => cluster.children.push((format!("dnode-{i}"), child)),
                Err(e) => {
                    cluster.stop().await;
                    return Err(e);
                }
            }
        }
        Ok(cluster)
    }

    /// Process ids of the children (mnode first), for resource accounting (`tidal bench`).
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().filter_map(|(_, c)| c.id()).collect()
    }

    /// Resolves when any child exits, naming it.
    pub async fn any_exit(&mut self) -> String {
        loop {
            for (name, child) in self.children.iter_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    return format!("{name} exited with {status}");
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// SIGTERM to every child (data nodes first, so they flush while the mnode is still up),
    /// then SIGKILL to any that have not exited after the grace period.
    pub async fn stop(mut self) {
        for (_, child) in self.children.iter().rev() {
            if let Some(pid) = child.id() {
                // SAFETY: kill(2) with a pid we spawned and still own; no memory is involved.
                unsafe {
                    libc::kill(pid as libc::pid_t, libc::SIGTERM);
                }
            }
        }
        let deadline = tokio::time::Instant::now() + Duration::from_millis(STOP_GRACE_MS);
        for (name, child) in self.children.iter_mut().rev() {
            match tokio::time::timeout_at(deadline, child.wait()).await {
                Ok(_) => {}
                Err(_) => {
                    eprintln!("{name} did not stop in time; killing it");
                    let _ = child.kill().await;
                }
            }
        }
    }
}

pub async fn run(
    data: PathBuf,
    vnodes: u32,
    listen: String,
    http: Option<String>,
) -> Result<ExitCode, BoxError> {
    let mut cluster = Cluster::start(&data, vnodes.max(1), &listen).await?;
    // The HTTP API runs in this process and reaches the cluster through the client library.
    let http_addr = match http {
        Some(h) => {
            let client = tidal_client::Client::connect(&cluster.addr).await?;
            match crate::http::start(&h, client).await {
                Ok(a) => Some(a),
                Err(e) => {
                    cluster.stop().await;
                    return Err(e);
                }
            }
        }
        None => None,
    };
    println!("ready local {}", cluster.addr);
    eprintln!(
        "Tidal local cluster: mnode + {} data node(s), data in {}. Connect with: tidal shell --host {}",
        vnodes.max(1),
        data.display(),
        cluster.addr
    );
    if let Some(h) = http_addr {
        eprintln!("HTTP API (InfluxDB line protocol): http://{h}/write?db=NAME");
    }
    let code = tokio::select! {
        _ = crate::server::shutdown_signal() => ExitCode::SUCCESS,
        why = cluster.any_exit() => {
            eprintln!("stopping: {why}");
            ExitCode::FAILURE
        }
    };
    cluster.stop().await;
    Ok(code)
}
