//! Configuration of the server roles (`tidal mnode`, `tidal vnode` alias `tidal dnode`,
//! `tidal local`) and their logging.
//!
//! Each role's keys are the fields of one struct ([`MnodeConfig`], [`DnodeConfig`],
//! [`LocalConfig`]; [`CommonConfig`] holds the keys every role has). A field is at once a flag
//! (`--heartbeat-interval-ms`), an environment variable (`TIDAL_HEARTBEAT_INTERVAL_MS`, added
//! to every key by [`with_env_vars`]) and a key of the role's TOML file
//! (`heartbeat_interval_ms = 1000`, given with `--config FILE` or `TIDAL_CONFIG`).
//! Precedence: flag > environment > file > default. Adding a key is adding one field with
//! `#[arg(long)]` (and its default) to the role's struct; [`resolve`] finds it by its name.
//!
//! Errors name where the bad value came from: the file and line for file keys, the flag or
//! variable otherwise. Unknown file keys are detected against the role's flag list, not with
//! serde's `deny_unknown_fields`, which does not combine with the flattened key groups
//! ([`CommonConfig`], the security keys) and would lose the line number.

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, Command};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

/// Environment variable prefix of every configuration key.
pub const ENV_PREFIX: &str = "TIDAL_";
/// Arguments of a role command that are not configuration keys.
const NOT_KEYS: &[&str] = &["config", "print_config", "help"];
/// Largest configuration file read (a config file is a few hundred bytes).
const CONFIG_FILE_BYTES_MAX: u64 = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config file {path} is larger than {max} bytes")]
    TooLarge { path: PathBuf, max: u64 },
    #[error("config file {path}: {message}")]
    Syntax { path: PathBuf, message: String },
    #[error("config file {path}, line {line}: unknown key `{key}` for `tidal {role}` (known keys: {known})")]
    UnknownKey {
        path: PathBuf,
        line: usize,
        key: String,
        role: &'static str,
        known: String,
    },
    #[error("config file {path}, line {line}: bad value for `{key}`: {reason}")]
    BadValue {
        path: PathBuf,
        line: usize,
        key: String,
        reason: String,
    },
    #[error("`{key}` (from {origin}): {reason}")]
    Invalid {
        key: String,
        origin: String,
        reason: String,
    },
    #[error("`{key}` is required: pass --{flag}, set {env}, or put `{key} = ...` in the config file (--config)")]
    Missing {
        key: String,
        flag: String,
        env: String,
    },
    #[error("cannot open log file {path}: {source}")]
    LogFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("internal configuration error: {0}")]
    Internal(String),
}

/// Where a key's effective value came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    Flag,
    Env,
    File,
    Default,
}

#[derive(clap::ValueEnum, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// One human-readable line per event.
    Text,
    /// One JSON object per line (for log shippers).
    Json,
}

/// Keys every server role has.
#[derive(Args, Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct CommonConfig {
    /// Log filter: a level (error, warn, info, debug, trace, off) or directives such as
    /// `info,tidal_vnode=debug`. When left at its default, RUST_LOG is used if set.
    #[arg(long, default_value = "info")]
    pub log_level: String,
    /// Log line format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Write logs to `<log_dir>/tidal-<role>.log` (appending) instead of stderr.
    #[arg(long)]
    pub log_dir: Option<PathBuf>,
    /// On SIGTERM/SIGINT: how long to drain requests and flush before exiting anyway (the
    /// WAL keeps every acknowledged write either way).
    #[arg(long, default_value_t = 30_000)]
    pub shutdown_timeout_ms: u64,
    /// Default timeout of a query (SELECT, EXPLAIN, SHOW...) this node coordinates; 0 = none.
    /// A session may set its own (`Client::execute_with_timeout`).
    #[arg(long, default_value_t = crate::frontend::queries::DEFAULT_QUERY_TIMEOUT_MS)]
    pub query_timeout_ms: u64,
    /// Memory one query may hold on this node: as its coordinator (gathered results, group
    /// state, sort buffers, the collected result of a non-streaming Execute) and, on a data
    /// node, per query fragment. Past it the query fails with "query memory limit exceeded";
    /// 0 = no limit.
    #[arg(long, default_value_t = crate::frontend::queries::DEFAULT_QUERY_MEMORY_MAX_BYTES)]
    pub query_memory_max_bytes: u64,
}

/// `tidal mnode`: the catalog, data-node membership and routing map.
#[derive(Args, Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct MnodeConfig {
    /// Directory of the catalog (required).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// gRPC address to listen on.
    #[arg(long, default_value = "127.0.0.1:6030")]
    pub listen: String,
    /// Also serve the HTTP API on this address.
    #[arg(long)]
    pub http: Option<String>,
    /// A data node counts as down after this long without a heartbeat.
    #[arg(long, default_value_t = 10_000)]
    pub dnode_timeout_ms: u64,
    /// Snapshot the catalog and start a new log once the log holds this many records.
    #[arg(long, default_value_t = 1000)]
    pub snapshot_every_records: u64,
    /// root_password, TLS, max_connections (docs/SECURITY.md).
    #[command(flatten)]
    #[serde(flatten)]
    pub security: crate::server::net::MnodeSecurity,
    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonConfig,
}

/// `tidal vnode` (alias `tidal dnode`): a data node hosting the vnodes the mnode assigns it.
#[derive(Args, Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct DnodeConfig {
    /// Directory of this data node's vnodes (required).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// gRPC address to listen on (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: String,
    /// gRPC address of the mnode (required).
    #[arg(long)]
    pub mnode: Option<String>,
    /// Address other nodes and clients use to reach this one. Default: the bound listen
    /// address, or with a wildcard listen address (0.0.0.0) the local address of the route
    /// to the mnode.
    #[arg(long)]
    pub advertise: Option<String>,
    /// Also serve the HTTP API on this address.
    #[arg(long)]
    pub http: Option<String>,
    /// How often to heartbeat the mnode (keep well below the mnode's `dnode_timeout_ms`).
    #[arg(long, default_value_t = 1000)]
    pub heartbeat_interval_ms: u64,
    /// How long a starting data node keeps trying to register with the mnode.
    #[arg(long, default_value_t = 60_000)]
    pub register_timeout_ms: u64,
    /// Bound of the decoded-column cache that every vnode of this node shares: data-file and
    /// STT column chunks as queries decoded them, so repeated reads of the same hours skip the
    /// read and the decompression. 0 turns it off.
    #[arg(long, default_value_t = tidal_vnode::column_cache::DEFAULT_MAX_BYTES)]
    pub column_cache_max_bytes: u64,
    /// Join credentials, TLS, max_connections (docs/SECURITY.md).
    #[command(flatten)]
    #[serde(flatten)]
    pub security: crate::server::net::DnodeSecurity,
    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonConfig,
}

/// `tidal local`: an mnode and N data nodes on loopback, as child processes.
#[derive(Args, Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct LocalConfig {
    /// Directory of the cluster's data (required).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Number of data nodes.
    #[arg(long, default_value_t = 2)]
    pub vnodes: u32,
    /// gRPC address of the mnode.
    #[arg(long, default_value = "127.0.0.1:6030")]
    pub listen: String,
    /// HTTP API address; `off` disables it.
    #[arg(long, default_value = "127.0.0.1:6041")]
    pub http: String,
    /// root's password on the cluster's very first start (default `taosdata`).
    #[arg(long)]
    pub root_password: Option<String>,
    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonConfig,
}

/// The command line of a server role: the config file, `--print-config` and the role's keys.
#[derive(Args, Debug)]
pub struct RoleArgs<T: Args> {
    /// TOML configuration file; its keys are the flags' names in snake_case
    /// (`heartbeat_interval_ms = 1000`). Precedence: flag > TIDAL_<KEY> > file > default.
    #[arg(long, env = "TIDAL_CONFIG")]
    pub config: Option<PathBuf>,
    /// Print the effective configuration as TOML (with where each value came from) and exit.
    #[arg(long)]
    pub print_config: bool,
    #[command(flatten)]
    pub keys: T,
}

/// A server role's keys.
pub trait RoleKeys: Args + Serialize + DeserializeOwned + Clone {
    /// The subcommand, for messages and the log file name.
    const ROLE: &'static str;
    fn common(&self) -> &CommonConfig;
    /// Checks values beyond their types; `Err((key, reason))`.
    fn check(&self) -> Result<(), (&'static str, String)>;
}

fn check_common(c: &CommonConfig) -> Result<(), (&'static str, String)> {
    check_log_level(&c.log_level).map_err(|e| ("log_level", e))?;
    if c.shutdown_timeout_ms == 0 {
        return Err(("shutdown_timeout_ms", "must be at least 1".into()));
    }
    Ok(())
}

fn positive(key: &'static str, v: u64) -> Result<(), (&'static str, String)> {
    if v == 0 {
        Err((key, "must be at least 1".into()))
    } else {
        Ok(())
    }
}

fn non_empty(key: &'static str, v: &str) -> Result<(), (&'static str, String)> {
    if v.trim().is_empty() {
        Err((key, "must not be empty".into()))
    } else {
        Ok(())
    }
}

impl RoleKeys for MnodeConfig {
    const ROLE: &'static str = "mnode";
    fn common(&self) -> &CommonConfig {
        &self.common
    }
    fn check(&self) -> Result<(), (&'static str, String)> {
        non_empty("listen", &self.listen)?;
        positive("dnode_timeout_ms", self.dnode_timeout_ms)?;
        positive("snapshot_every_records", self.snapshot_every_records)?;
        self.security
            .server
            .check()
            .map_err(|e| ("max_connections", e))?;
        check_common(&self.common)
    }
}

impl RoleKeys for DnodeConfig {
    const ROLE: &'static str = "dnode";
    fn common(&self) -> &CommonConfig {
        &self.common
    }
    fn check(&self) -> Result<(), (&'static str, String)> {
        non_empty("listen", &self.listen)?;
        if let Some(a) = &self.advertise {
            check_host_port(a).map_err(|e| ("advertise", e))?;
        }
        positive("heartbeat_interval_ms", self.heartbeat_interval_ms)?;
        positive("register_timeout_ms", self.register_timeout_ms)?;
        self.security
            .server
            .check()
            .map_err(|e| ("max_connections", e))?;
        check_common(&self.common)
    }
}

impl RoleKeys for LocalConfig {
    const ROLE: &'static str = "local";
    fn common(&self) -> &CommonConfig {
        &self.common
    }
    fn check(&self) -> Result<(), (&'static str, String)> {
        non_empty("listen", &self.listen)?;
        if self.vnodes == 0 {
            return Err(("vnodes", "must be at least 1".into()));
        }
        check_common(&self.common)
    }
}

/// `host:port` with a non-empty host and a non-zero port (what other nodes dial).
fn check_host_port(a: &str) -> Result<(), String> {
    let Some((host, port)) = a.rsplit_once(':') else {
        return Err(format!("'{a}' is not host:port"));
    };
    match port.parse::<u16>() {
        Ok(p) if p > 0 && !host.is_empty() => Ok(()),
        _ => Err(format!("'{a}' is not host:port with a port in 1..65535")),
    }
}

const LEVELS: &[&str] = &["off", "error", "warn", "info", "debug", "trace"];

/// Accepts a level or `target=level` directives. `EnvFilter` alone would take a misspelt
/// level ("infi") as a target name and silently log nothing.
fn check_log_level(s: &str) -> Result<(), String> {
    if s.trim().is_empty() {
        return Err("must not be empty".into());
    }
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let level = match part.rsplit_once('=') {
            Some((_, l)) => l,
            None => part,
        };
        if !LEVELS.contains(&level.to_ascii_lowercase().as_str()) {
            return Err(format!(
                "'{part}' does not name a level (one of {})",
                LEVELS.join(", ")
            ));
        }
    }
    tracing_subscriber::EnvFilter::try_new(s)
        .map(|_| ())
        .map_err(|e| format!("'{s}': {e}"))
}

/// The environment variable of a key: `TIDAL_` + the key in upper case.
pub fn env_name(key: &str) -> String {
    format!("{ENV_PREFIX}{}", key.to_ascii_uppercase())
}

fn flag_name(key: &str) -> String {
    key.replace('_', "-")
}

/// Gives every key of every server role its environment variable (`TIDAL_<KEY>`), so that a
/// new field needs no attribute for it.
pub fn with_env_vars(cmd: Command) -> Command {
    let mut cmd = cmd;
    for role in ["mnode", "vnode", "local"] {
        cmd = cmd.mut_subcommand(role, |sub| {
            sub.mut_args(|a| {
                let id = a.get_id().as_str().to_string();
                if NOT_KEYS.contains(&id.as_str()) || a.get_env().is_some() {
                    a
                } else {
                    // `--help` shows a variable's value unless told not to.
                    a.env(env_name(&id)).hide_env_values(is_secret(&id))
                }
            })
        });
    }
    cmd
}

/// The key names of role `T`, in declaration order.
pub fn key_names<T: Args>() -> Vec<String> {
    T::augment_args(Command::new("keys"))
        .get_arguments()
        .map(|a| a.get_id().as_str().to_string())
        .filter(|id| !NOT_KEYS.contains(&id.as_str()))
        .collect()
}

/// A role's effective configuration and where each set key came from.
#[derive(Debug)]
pub struct Resolved<T> {
    pub keys: T,
    pub origins: BTreeMap<String, Origin>,
    pub file: Option<PathBuf>,
}

impl<T> Resolved<T> {
    fn describe(&self, key: &str) -> String {
        describe_origin(
            key,
            self.origins.get(key).copied().unwrap_or(Origin::Default),
            self.file.as_deref(),
        )
    }

    pub fn origin(&self, key: &str) -> Origin {
        self.origins.get(key).copied().unwrap_or(Origin::Default)
    }
}

fn describe_origin(key: &str, o: Origin, file: Option<&Path>) -> String {
    match (o, file) {
        (Origin::Flag, _) => format!("--{}", flag_name(key)),
        (Origin::Env, _) => env_name(key),
        (Origin::File, Some(f)) => f.display().to_string(),
        (Origin::File, None) => "the config file".into(),
        (Origin::Default, _) => "default".into(),
    }
}

fn to_table<T: Serialize>(v: &T) -> Result<toml::Table, ConfigError> {
    match toml::Value::try_from(v) {
        Ok(toml::Value::Table(t)) => Ok(t),
        Ok(_) => Err(ConfigError::Internal("keys are not a table".into())),
        Err(e) => Err(ConfigError::Internal(e.to_string())),
    }
}

fn from_table<T: DeserializeOwned>(t: toml::Table) -> Result<T, String> {
    T::deserialize(toml::Value::Table(t)).map_err(|e| e.message().to_string())
}

/// 1-based line of byte offset `at` in `text`.
fn line_of(text: &str, at: usize) -> usize {
    text.get(..at).map(|s| s.matches('\n').count()).unwrap_or(0) + 1
}

/// Reads and parses a config file: its top-level keys with their lines, in file order.
fn read_file(path: &Path) -> Result<Vec<(String, usize, toml::Value)>, ConfigError> {
    let read_err = |source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    };
    let len = std::fs::metadata(path).map_err(read_err)?.len();
    if len > CONFIG_FILE_BYTES_MAX {
        return Err(ConfigError::TooLarge {
            path: path.to_path_buf(),
            max: CONFIG_FILE_BYTES_MAX,
        });
    }
    let text = std::fs::read_to_string(path).map_err(read_err)?;
    let map: BTreeMap<toml::Spanned<String>, toml::Value> =
        toml::from_str(&text).map_err(|e| ConfigError::Syntax {
            path: path.to_path_buf(),
            message: e.to_string().trim_end().to_string(),
        })?;
    let mut keys: Vec<(String, usize, toml::Value)> = map
        .into_iter()
        .map(|(k, v)| {
            let line = line_of(&text, k.span().start);
            (k.into_inner(), line, v)
        })
        .collect();
    keys.sort_by_key(|(_, line, _)| *line);
    Ok(keys)
}

/// Merges the role's flags and environment (parsed by clap into `args`, with `m` telling
/// which were given) with its config file and defaults, then checks the values.
pub fn resolve<T: RoleKeys>(
    args: &RoleArgs<T>,
    m: &ArgMatches,
) -> Result<Resolved<T>, ConfigError> {
    let known = key_names::<T>();
    let mut merged = to_table(&args.keys)?;
    let mut origins = BTreeMap::new();
    for k in &known {
        let o = match m.value_source(k) {
            Some(ValueSource::CommandLine) => Origin::Flag,
            Some(ValueSource::EnvVariable) => Origin::Env,
            _ => Origin::Default,
        };
        if merged.contains_key(k) {
            origins.insert(k.clone(), o);
        }
    }
    if let Some(path) = &args.config {
        let base = merged.clone();
        for (key, line, value) in read_file(path)? {
            if !known.contains(&key) {
                return Err(ConfigError::UnknownKey {
                    path: path.clone(),
                    line,
                    key,
                    role: T::ROLE,
                    known: known.join(", "),
                });
            }
            // Type-check the file's value on its own, so a bad value is reported with its
            // line even when a flag overrides it.
            let mut probe = base.clone();
            probe.insert(key.clone(), value.clone());
            if let Err(reason) = from_table::<T>(probe) {
                return Err(ConfigError::BadValue {
                    path: path.clone(),
                    line,
                    key,
                    reason,
                });
            }
            let explicit = matches!(m.value_source(&key), Some(ValueSource::CommandLine))
                || matches!(m.value_source(&key), Some(ValueSource::EnvVariable));
            if !explicit {
                merged.insert(key.clone(), value);
                origins.insert(key, Origin::File);
            }
        }
    }
    let keys: T = from_table(merged).map_err(ConfigError::Internal)?;
    let resolved = Resolved {
        keys,
        origins,
        file: args.config.clone(),
    };
    if let Err((key, reason)) = resolved.keys.check() {
        return Err(ConfigError::Invalid {
            key: key.to_string(),
            origin: resolved.describe(key),
            reason,
        });
    }
    Ok(resolved)
}

/// Fails with a message naming every way to set `key` when it has no value.
pub fn required<'a, V: ?Sized>(key: &str, v: Option<&'a V>) -> Result<&'a V, ConfigError> {
    v.ok_or_else(|| ConfigError::Missing {
        key: key.to_string(),
        flag: flag_name(key),
        env: env_name(key),
    })
}

fn is_secret(key: &str) -> bool {
    key.contains("password") || key.contains("secret")
}

/// The effective configuration as TOML: one `key = value` line per set key with where it
/// came from, and unset keys as comments; secrets show only that they are set. The output
/// is itself a valid config file.
pub fn print_config<T: RoleKeys>(r: &Resolved<T>) -> Result<String, ConfigError> {
    let table = to_table(&r.keys)?;
    let mut out = format!(
        "# Effective configuration of `tidal {}` (precedence: flag > {ENV_PREFIX}<KEY> > file > default).\n",
        T::ROLE
    );
    for key in key_names::<T>() {
        match table.get(&key) {
            // Secrets are not echoed (the output ends up in terminals and tickets).
            Some(_) if is_secret(&key) => out.push_str(&format!(
                "# {key} is set (hidden)  # {}\n",
                r.describe(&key)
            )),
            Some(v) => {
                let mut one = toml::Table::new();
                one.insert(key.clone(), v.clone());
                let line =
                    toml::to_string(&one).map_err(|e| ConfigError::Internal(e.to_string()))?;
                out.push_str(&format!("{}  # {}\n", line.trim_end(), r.describe(&key)));
            }
            None => out.push_str(&format!("# {key} is not set\n")),
        }
    }
    Ok(out)
}

/// One configuration key as the running process uses it: a row of SHOW VARIABLES.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Variable {
    pub name: String,
    /// `None`: the key is not set (an optional key nobody gave). A secret shows only that it
    /// is set.
    pub value: Option<String>,
    /// Where the value came from: `default`, `--flag`, `TIDAL_KEY` or the config file's path.
    pub source: String,
    /// What the key is for (its `--help` text).
    pub info: String,
}

/// The scope of every key, in TDengine's terms: read by the server process (`tidal mnode`,
/// `tidal vnode`), not by clients (the shell takes its own flags).
pub const VARIABLE_SCOPE: &str = "server";

/// The value a secret key shows in place of its own.
pub const HIDDEN_VALUE: &str = "(hidden)";

/// Every key of role `T` with its effective value and where it came from, in declaration
/// order (the same values [`print_config`] prints).
pub fn variables<T: RoleKeys>(r: &Resolved<T>) -> Result<Vec<Variable>, ConfigError> {
    let table = to_table(&r.keys)?;
    let cmd = T::augment_args(Command::new("keys"));
    let mut out = Vec::new();
    for a in cmd.get_arguments() {
        let key = a.get_id().as_str();
        if NOT_KEYS.contains(&key) {
            continue;
        }
        let value = match table.get(key) {
            None => None,
            // Secrets are not echoed (the output ends up in terminals and tickets).
            Some(_) if is_secret(key) => Some(HIDDEN_VALUE.to_string()),
            Some(toml::Value::String(v)) => Some(v.clone()),
            Some(v) => Some(v.to_string()),
        };
        let info = a
            .get_help()
            .map(|h| h.to_string())
            .unwrap_or_default()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        out.push(Variable {
            name: key.to_string(),
            value,
            source: r.describe(key),
            info,
        });
    }
    Ok(out)
}

/// Installs the global tracing subscriber for a server role. An explicit `log_level` wins;
/// at its default, RUST_LOG (if set) chooses the filter.
pub fn init_logging<T: RoleKeys>(r: &Resolved<T>, log_name: &str) -> Result<(), ConfigError> {
    use tracing_subscriber::fmt::writer::BoxMakeWriter;
    let c = r.keys.common();
    let from_env = std::env::var("RUST_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty() && r.origin("log_level") == Origin::Default);
    let filter = match from_env {
        Some(v) => {
            tracing_subscriber::EnvFilter::try_new(&v).map_err(|e| ConfigError::Invalid {
                key: "log_level".into(),
                origin: "RUST_LOG".into(),
                reason: format!("'{v}': {e}"),
            })?
        }
        None => tracing_subscriber::EnvFilter::try_new(&c.log_level).map_err(|e| {
            ConfigError::Invalid {
                key: "log_level".into(),
                origin: r.describe("log_level"),
                reason: e.to_string(),
            }
        })?,
    };
    let (writer, ansi) = match &c.log_dir {
        Some(dir) => {
            let path = dir.join(format!("tidal-{log_name}.log"));
            let open = || {
                std::fs::create_dir_all(dir)?;
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
            };
            let file = open().map_err(|source| ConfigError::LogFile {
                path: path.clone(),
                source,
            })?;
            (BoxMakeWriter::new(std::sync::Mutex::new(file)), false)
        }
        None => (
            BoxMakeWriter::new(std::io::stderr),
            std::io::stderr().is_terminal(),
        ),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(writer);
    // A second subscriber (only possible in tests) keeps the first one.
    let _ = match c.log_format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{FromArgMatches, Parser, Subcommand};
    use std::io::Write;

    #[derive(Parser)]
    struct TestCli {
        #[command(subcommand)]
        cmd: TestCmd,
    }

    #[derive(Subcommand)]
    enum TestCmd {
        Mnode(RoleArgs<MnodeConfig>),
        Vnode(RoleArgs<DnodeConfig>),
        Local(RoleArgs<LocalConfig>),
    }

    /// Parses `argv` with `env` as the only environment variables of the keys.
    fn parse_dnode(
        argv: &[&str],
        env: &[(&str, &str)],
        file: Option<&str>,
    ) -> Result<Resolved<DnodeConfig>, ConfigError> {
        // clap reads the process environment; give each key a variable name unique to this
        // test instead (tests run in parallel) by rewriting `env` on the command.
        let tag = format!("T{}_", rand::random::<u32>());
        // Before the command is built: clap reads a variable when `Arg::env` names it.
        for (k, v) in env {
            std::env::set_var(format!("{tag}{k}"), v);
        }
        let mut cmd = with_env_vars(<TestCli as clap::CommandFactory>::command());
        cmd = cmd.mut_subcommand("vnode", |s| {
            s.mut_args(|a| match a.get_env() {
                Some(e) => {
                    let name = format!("{tag}{}", e.to_string_lossy());
                    a.env(name)
                }
                None => a,
            })
        });
        let dir = tempfile::tempdir().map_err(|e| ConfigError::Internal(e.to_string()))?;
        let mut args: Vec<String> = vec!["tidal".into(), "vnode".into()];
        args.extend(argv.iter().map(|s| s.to_string()));
        if let Some(text) = file {
            let p = dir.path().join("dnode.toml");
            let mut f =
                std::fs::File::create(&p).map_err(|e| ConfigError::Internal(e.to_string()))?;
            f.write_all(text.as_bytes())
                .map_err(|e| ConfigError::Internal(e.to_string()))?;
            args.push("--config".into());
            args.push(p.to_string_lossy().into_owned());
        }
        let m = cmd
            .try_get_matches_from(&args)
            .map_err(|e| ConfigError::Internal(e.to_string()))?;
        let cli =
            TestCli::from_arg_matches(&m).map_err(|e| ConfigError::Internal(e.to_string()))?;
        let sub = m.subcommand().map(|(_, s)| s.clone());
        for (k, _) in env {
            std::env::remove_var(format!("{tag}{k}"));
        }
        match (cli.cmd, sub) {
            (TestCmd::Vnode(a), Some(s)) => resolve(&a, &s),
            _ => Err(ConfigError::Internal("not vnode".into())),
        }
    }

    #[test]
    fn precedence_is_flag_then_env_then_file_then_default() {
        let file = "heartbeat_interval_ms = 300\nregister_timeout_ms = 400\nlisten = \"10.0.0.1:6030\"\nmnode = \"m:6030\"\n";
        let r = parse_dnode(
            &["--heartbeat-interval-ms", "100"],
            &[
                ("TIDAL_HEARTBEAT_INTERVAL_MS", "200"),
                ("TIDAL_REGISTER_TIMEOUT_MS", "250"),
            ],
            Some(file),
        )
        .expect("resolve");
        assert_eq!(r.keys.heartbeat_interval_ms, 100, "flag beats env and file");
        assert_eq!(r.origin("heartbeat_interval_ms"), Origin::Flag);
        assert_eq!(r.keys.register_timeout_ms, 250, "env beats file");
        assert_eq!(r.origin("register_timeout_ms"), Origin::Env);
        assert_eq!(r.keys.listen, "10.0.0.1:6030", "file beats default");
        assert_eq!(r.origin("listen"), Origin::File);
        assert_eq!(r.keys.common.shutdown_timeout_ms, 30_000, "default");
        assert_eq!(r.origin("shutdown_timeout_ms"), Origin::Default);
        assert_eq!(r.keys.mnode.as_deref(), Some("m:6030"));
    }

    #[test]
    fn unknown_key_names_file_line_and_key() {
        let e = parse_dnode(&[], &[], Some("listen = \"a:1\"\n\nheartbeat_ms = 5\n"))
            .expect_err("unknown key");
        let msg = e.to_string();
        assert!(
            matches!(e, ConfigError::UnknownKey { line: 3, .. }),
            "{msg}"
        );
        assert!(msg.contains("dnode.toml, line 3"), "{msg}");
        assert!(msg.contains("`heartbeat_ms`"), "{msg}");
        assert!(
            msg.contains("heartbeat_interval_ms"),
            "lists known keys: {msg}"
        );
    }

    #[test]
    fn bad_value_type_names_line_and_key_even_if_a_flag_overrides_it() {
        let e = parse_dnode(
            &["--heartbeat-interval-ms", "5"],
            &[],
            Some("# comment\nheartbeat_interval_ms = \"fast\"\n"),
        )
        .expect_err("bad value");
        let msg = e.to_string();
        assert!(matches!(e, ConfigError::BadValue { line: 2, .. }), "{msg}");
        assert!(msg.contains("`heartbeat_interval_ms`"), "{msg}");
        let e = parse_dnode(&[], &[], Some("log_format = \"xml\"\n")).expect_err("bad enum");
        assert!(e.to_string().contains("xml"), "{e}");
        let e = parse_dnode(&[], &[], Some("register_timeout_ms = -1\n")).expect_err("negative");
        assert!(matches!(e, ConfigError::BadValue { line: 1, .. }), "{e}");
    }

    #[test]
    fn syntax_errors_carry_the_file_position() {
        let e = parse_dnode(&[], &[], Some("listen = \"a:1\"\nmnode = \n")).expect_err("syntax");
        let msg = e.to_string();
        assert!(matches!(e, ConfigError::Syntax { .. }), "{msg}");
        assert!(msg.contains("line 2"), "{msg}");
    }

    #[test]
    fn nested_tables_are_unknown_keys() {
        let e = parse_dnode(&[], &[], Some("[log]\nlevel = \"info\"\n")).expect_err("table");
        assert!(matches!(e, ConfigError::UnknownKey { line: 1, .. }), "{e}");
    }

    #[test]
    fn semantic_checks_name_the_origin() {
        let e = parse_dnode(&[], &[("TIDAL_LOG_LEVEL", "infi")], None).expect_err("level");
        let msg = e.to_string();
        assert!(msg.contains("`log_level`"), "{msg}");
        assert!(msg.contains("TIDAL_LOG_LEVEL"), "{msg}");
        let e = parse_dnode(&[], &[], Some("heartbeat_interval_ms = 0\n")).expect_err("zero");
        assert!(e.to_string().contains("dnode.toml"), "{e}");
        let e = parse_dnode(&["--advertise", "0.0.0.0"], &[], None).expect_err("advertise");
        assert!(e.to_string().contains("--advertise"), "{e}");
        assert!(parse_dnode(&["--log-level", "info,tidal_vnode=debug"], &[], None).is_ok());
    }

    #[test]
    fn bad_env_value_is_an_error_naming_the_variable() {
        let e = parse_dnode(&[], &[("TIDAL_HEARTBEAT_INTERVAL_MS", "soon")], None)
            .expect_err("bad env");
        // clap names the flag the variable feeds; the variable itself is in `--help`.
        assert!(e.to_string().contains("soon"), "{e}");
    }

    #[test]
    fn print_config_round_trips_as_a_config_file() {
        let r = parse_dnode(
            &["--mnode", "10.77.0.1:6030", "--data", "/var/lib/tidal"],
            &[("TIDAL_LOG_FORMAT", "json")],
            Some("heartbeat_interval_ms = 700\n"),
        )
        .expect("resolve");
        let text = print_config(&r).expect("print");
        assert!(text.contains("heartbeat_interval_ms = 700  # "), "{text}");
        assert!(
            text.contains("mnode = \"10.77.0.1:6030\"  # --mnode"),
            "{text}"
        );
        assert!(
            text.contains("log_format = \"json\"  # TIDAL_LOG_FORMAT"),
            "{text}"
        );
        assert!(text.contains("# advertise is not set"), "{text}");
        for key in key_names::<DnodeConfig>().iter().filter(|k| is_secret(k)) {
            assert!(text.contains(&format!("# {key} is set (hidden)")), "{text}");
        }
        assert!(
            !text.contains("taosdata"),
            "no default password echoed: {text}"
        );
        let again = parse_dnode(&[], &[], Some(&text)).expect("reparse");
        assert_eq!(again.keys, r.keys);
    }

    #[test]
    fn variables_are_the_effective_values_with_their_source() {
        let r = parse_dnode(
            &["--data", "/d", "--heartbeat-interval-ms", "250"],
            &[("TIDAL_QUERY_TIMEOUT_MS", "9000")],
            Some("log_format = \"json\"\nregister_timeout_ms = 5\n"),
        )
        .expect("resolve");
        let vars = variables(&r).expect("variables");
        let names: Vec<&str> = vars.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, key_names::<DnodeConfig>());
        let get = |k: &str| vars.iter().find(|v| v.name == k).expect(k).clone();
        let hb = get("heartbeat_interval_ms");
        assert_eq!(hb.value.as_deref(), Some("250"));
        assert_eq!(hb.source, "--heartbeat-interval-ms");
        assert!(hb.info.contains("heartbeat"), "{}", hb.info);
        assert_eq!(get("data").value.as_deref(), Some("/d"));
        assert_eq!(get("query_timeout_ms").value.as_deref(), Some("9000"));
        assert!(get("query_timeout_ms").source.ends_with("QUERY_TIMEOUT_MS"));
        assert_eq!(get("log_format").value.as_deref(), Some("json"));
        assert!(get("log_format").source.ends_with("dnode.toml"));
        assert_eq!(get("register_timeout_ms").value.as_deref(), Some("5"));
        assert_eq!(get("listen").value.as_deref(), Some("127.0.0.1:0"));
        assert_eq!(get("listen").source, "default");
        assert_eq!(get("advertise").value, None, "unset, not invented");
        for v in vars.iter().filter(|v| is_secret(&v.name)) {
            assert!(
                v.value.is_none() || v.value.as_deref() == Some(HIDDEN_VALUE),
                "{v:?}"
            );
        }
    }

    #[test]
    fn every_key_has_a_flag_and_an_env_var() {
        let cmd = with_env_vars(<TestCli as clap::CommandFactory>::command());
        for role in ["mnode", "vnode", "local"] {
            let sub = cmd.find_subcommand(role).expect("role");
            for a in sub.get_arguments() {
                let id = a.get_id().as_str();
                if NOT_KEYS.contains(&id) {
                    continue;
                }
                assert_eq!(a.get_long(), Some(flag_name(id).as_str()), "{role} {id}");
                let env = a.get_env().map(|e| e.to_string_lossy().into_owned());
                assert_eq!(env, Some(env_name(id)), "{role} {id}");
            }
        }
        assert!(key_names::<MnodeConfig>().contains(&"log_dir".to_string()));
        assert!(!key_names::<LocalConfig>().contains(&"config".to_string()));
    }

    #[test]
    fn required_keys_say_how_to_set_them() {
        let r = parse_dnode(&[], &[], None).expect("resolve");
        let e = required("mnode", r.keys.mnode.as_deref()).expect_err("missing");
        let msg = e.to_string();
        assert!(
            msg.contains("--mnode") && msg.contains("TIDAL_MNODE"),
            "{msg}"
        );
    }
}
