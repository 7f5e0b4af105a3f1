//! `tidal local`: an mnode and N data nodes on loopback, each a child process of this one.
//! Readiness is read from each child's `ready <role> <addr>` line. The HTTP API (default
//! 127.0.0.1:6041, `--http off` disables it) is served by this process itself. On
//! SIGINT/SIGTERM (or when a child dies) every child gets SIGTERM (a graceful shutdown, data
//! nodes first), then SIGKILL if it has not exited within its `shutdown_timeout_ms` and a
//! margin. Children get their settings as flags, never from this process's TIDAL_* variables:
//! every key `tidal local` shares with the server roles ([`CommonConfig`]: logging, shutdown,
//! query timeout and memory limit) is passed on to every child.

use crate::config::{CommonConfig, LocalConfig, LogFormat};
use crate::server::BoxError;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// How long a child may take to print its ready line.
const READY_TIMEOUT_MS: u64 = 60_000;
/// Added to the children's `shutdown_timeout_ms` before they are killed: they need a moment
/// to exit after their own deadline.
const STOP_MARGIN_MS: u64 = 5_000;

/// Logging, shutdown and query settings given to every child.
#[derive(Clone, Debug)]
pub struct ChildOptions {
    pub log_level: String,
    pub log_format: LogFormat,
    /// Each child logs to `<log_dir>/<child>/tidal-<role>.log`.
    pub log_dir: Option<PathBuf>,
    pub shutdown_timeout_ms: u64,
    pub query_timeout_ms: u64,
    /// Memory one query may hold on each child (0 = no limit).
    pub query_memory_max_bytes: u64,
    /// root's password on the mnode's first start (given to it in its environment, so that
    /// it does not show in the process list).
    pub root_password: Option<String>,
}

impl ChildOptions {
    /// For clusters embedded in user-facing commands (demo, bench): warnings only, or
    /// TIDAL_LOG if set, so that server logs do not interleave with the command's output.
    pub fn quiet() -> ChildOptions {
        ChildOptions {
            log_level: std::env::var("TIDAL_LOG").unwrap_or_else(|_| "warn".into()),
            log_format: LogFormat::Text,
            log_dir: None,
            shutdown_timeout_ms: 30_000,
            query_timeout_ms: crate::frontend::queries::DEFAULT_QUERY_TIMEOUT_MS,
            query_memory_max_bytes: crate::frontend::queries::DEFAULT_QUERY_MEMORY_MAX_BYTES,
            root_password: None,
        }
    }

    fn from_common(c: &CommonConfig) -> ChildOptions {
        ChildOptions {
            log_level: c.log_level.clone(),
            log_format: c.log_format,
            log_dir: c.log_dir.clone(),
            shutdown_timeout_ms: c.shutdown_timeout_ms,
            query_timeout_ms: c.query_timeout_ms,
            query_memory_max_bytes: c.query_memory_max_bytes,
            root_password: None,
        }
    }

    fn args(&self, child: &str) -> Vec<String> {
        let format = match self.log_format {
            LogFormat::Text => "text",
            LogFormat::Json => "json",
        };
        let mut a = vec![
            "--log-level".to_string(),
            self.log_level.clone(),
            "--log-format".into(),
            format.into(),
            "--shutdown-timeout-ms".into(),
            self.shutdown_timeout_ms.to_string(),
            "--query-timeout-ms".into(),
            self.query_timeout_ms.to_string(),
            "--query-memory-max-bytes".into(),
            self.query_memory_max_bytes.to_string(),
        ];
        if let Some(d) = &self.log_dir {
            a.push("--log-dir".into());
            a.push(d.join(child).to_string_lossy().into_owned());
        }
        a
    }
}

pub struct Cluster {
    /// Children in start order: the mnode first.
    children: Vec<(String, Child)>,
    pub addr: String,
    stop_grace_ms: u64,
}

async fn spawn_ready(
    role: &str,
    args: &[String],
    env: &[(&str, &str)],
) -> Result<(Child, String), BoxError> {
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    // A child must not pick up this process's configuration (TIDAL_CONFIG, TIDAL_HTTP...).
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with(crate::config::ENV_PREFIX) {
            cmd.env_remove(k);
        }
    }
    cmd.envs(env.iter().copied());
    let mut child = cmd
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
    /// A cluster whose children only log warnings (see [`ChildOptions::quiet`]).
    pub async fn start(data: &Path, dnodes: u32, listen: &str) -> Result<Cluster, BoxError> {
        Cluster::start_with(data, dnodes, listen, &ChildOptions::quiet()).await
    }

    pub async fn start_with(
        data: &Path,
        dnodes: u32,
        listen: &str,
        opts: &ChildOptions,
    ) -> Result<Cluster, BoxError> {
        std::fs::create_dir_all(data)?;
        let d = |p: PathBuf| p.to_string_lossy().into_owned();
        let mut args = vec![
            "mnode".into(),
            "--data".into(),
            d(data.join("mnode")),
            "--listen".into(),
            listen.into(),
        ];
        args.extend(opts.args("mnode"));
        let env: Vec<(&str, &str)> = opts
            .root_password
            .as_deref()
            .map(|p| ("TIDAL_ROOT_PASSWORD", p))
            .into_iter()
            .collect();
        let (mnode, addr) = spawn_ready("mnode", &args, &env).await?;
        let mut cluster = Cluster {
            children: vec![("mnode".into(), mnode)],
            addr: addr.clone(),
            stop_grace_ms: opts.shutdown_timeout_ms.saturating_add(STOP_MARGIN_MS),
        };
        for i in 1..=dnodes {
            let name = format!("dnode-{i}");
            let mut args = vec![
                "vnode".into(),
                "--data".into(),
                d(data.join(&name)),
                "--listen".into(),
                "127.0.0.1:0".into(),
                "--mnode".into(),
                addr.clone(),
            ];
            args.extend(opts.args(&name));
            // A data node joins as root: with the password root was created with.
            let env: Vec<(&str, &str)> = opts
                .root_password
                .as_deref()
                .map(|p| ("TIDAL_PASSWORD", p))
                .into_iter()
                .collect();
            match spawn_ready("vnode", &args, &env).await {
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
        let deadline = tokio::time::Instant::now() + Duration::from_millis(self.stop_grace_ms);
        for (name, child) in self.children.iter_mut().rev() {
            match tokio::time::timeout_at(deadline, child.wait()).await {
                Ok(Ok(status)) if !status.success() => {
                    tracing::warn!(child = %name, %status, "child exited with a failure status");
                }
                Ok(_) => {}
                Err(_) => {
                    tracing::warn!(child = %name, "did not stop in time; killing it");
                    let _ = child.kill().await;
                }
            }
        }
    }
}

pub async fn run(cfg: LocalConfig) -> Result<ExitCode, BoxError> {
    let mut signals = crate::server::Signals::install()?;
    let data = crate::config::required("data", cfg.data.as_ref())?.clone();
    let vnodes = cfg.vnodes.max(1);
    let http = Some(cfg.http.clone()).filter(|h| !matches!(h.as_str(), "off" | "none" | ""));
    let mut opts = ChildOptions::from_common(&cfg.common);
    opts.root_password = cfg.root_password.clone();
    let mut cluster = Cluster::start_with(&data, vnodes, &cfg.listen, &opts).await?;
    // The HTTP API runs in this process and reaches the cluster through the client library.
    let http_addr = match http {
        Some(h) => {
            // Forwarding: every HTTP request runs as the user it authenticates (http/auth.rs).
            let client = tidal_client::Client::new_lazy(
                &cluster.addr,
                tidal_client::ConnectOptions::default()
                    .with_credentials(tidal_client::Credentials::Forward),
            )?;
            match crate::http::start(&h, client, Default::default()).await {
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
    // These lines are for the person who ran `tidal local`, not log events.
    eprintln!(
        "Tidal local cluster: mnode + {vnodes} data node(s), data in {}. Connect with: tidal shell --host {}",
        data.display(),
        cluster.addr
    );
    if let Some(h) = http_addr {
        eprintln!("HTTP API (InfluxDB line protocol): http://{h}/write?db=NAME");
    }
    let code = tokio::select! {
        _ = signals.recv() => ExitCode::SUCCESS,
        why = cluster.any_exit() => {
            tracing::error!("stopping: {why}");
            ExitCode::FAILURE
        }
    };
    tracing::info!("stopping the cluster");
    cluster.stop().await;
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key added to [`CommonConfig`] must reach the children too: they never see this
    /// process's TIDAL_* variables or config file.
    #[test]
    fn every_common_key_is_passed_to_the_children() {
        let mut opts = ChildOptions::quiet();
        opts.log_dir = Some(PathBuf::from("/var/log/tidal"));
        opts.query_memory_max_bytes = 12_345;
        opts.query_timeout_ms = 678;
        let args = opts.args("dnode-1");
        for key in crate::config::key_names::<CommonConfig>() {
            let flag = format!("--{}", key.replace('_', "-"));
            assert!(args.contains(&flag), "{flag} is not passed on: {args:?}");
        }
        let value_of = |flag: &str| {
            let at = args.iter().position(|a| a == flag).expect(flag);
            args[at + 1].clone()
        };
        assert_eq!(value_of("--query-memory-max-bytes"), "12345");
        assert_eq!(value_of("--query-timeout-ms"), "678");
        assert_eq!(value_of("--log-dir"), "/var/log/tidal/dnode-1");
    }
}
