//! `tidal`: one binary for every role of a Tidal cluster.
//!
//! - `tidal mnode`  the catalog and routing map (also serves SQL)
//! - `tidal vnode`  (alias `tidal dnode`) a data node hosting the vnodes the mnode assigns to
//!   it (also serves SQL)
//! - `tidal local`  an mnode plus N data nodes on loopback, as child processes
//! - `tidal shell`  the SQL shell
//! - `tidal demo`   the README's main job: a local cluster, TSBS-IoT-style data, IoT queries
//! - `tidal load`   load a TSBS IoT file (influx or TDengine format) and report the rate
//! - `tidal bench`  the TSBS IoT benchmark: generate data and queries, run Tidal vs the peers

mod auth;
mod bench;
mod config;
mod demo;
mod frontend;
mod http;
mod load;
mod local;
mod mem;
mod server;
mod shell;

// Servers make many small per-subtable allocations; mimalloc keeps them cheap (measured: the
// storage benchmark at 4,000 trucks doubled its rows/s against glibc malloc).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "tidal",
    version,
    about = "Tidal: a distributed time-series database for IoT"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the mnode: catalog, data-node membership and routing map.
    // Server roles take their keys from `config.rs` (flag > TIDAL_<KEY> > --config file >
    // default): a new server option is a field of the role's struct there, not a flag here.
    Mnode(config::RoleArgs<config::MnodeConfig>),
    /// Run a data node that hosts the vnodes the mnode assigns to it.
    #[command(visible_alias = "dnode")]
    Vnode(config::RoleArgs<config::DnodeConfig>),
    /// Run an mnode and N data nodes on loopback as child processes.
    Local(config::RoleArgs<config::LocalConfig>),
    /// The SQL shell: interactive, or one-shot with -s / -f.
    Shell(shell::ShellArgs),
    /// The main job: start a local cluster in a temp folder, load a generated truck fleet
    /// through the client library, run IoT queries, print results and rates.
    Demo(demo::DemoArgs),
    /// Load a TSBS IoT file (influx or TDengine format; plain, .gz or .zst) into a database
    /// and print rows/s and metrics/s as the TSBS loaders do.
    Load(load::LoadArgs),
    /// The TSBS IoT benchmark: `generate` data, print `queries`, `run` Tidal against the
    /// peers and write docs/BENCHMARKS.md.
    Bench(bench::BenchArgs),
}

/// Resolves a server role's configuration and installs its logging; `Ok(None)` when
/// `--print-config` printed it and the process should exit. The keys come with their
/// effective values as SHOW VARIABLES lists them.
fn server_config<T: config::RoleKeys>(
    args: &config::RoleArgs<T>,
    matches: &clap::ArgMatches,
    log_name: &str,
) -> Result<Option<(T, Vec<config::Variable>)>, config::ConfigError> {
    let resolved = config::resolve(args, matches)?;
    if args.print_config {
        print!("{}", config::print_config(&resolved)?);
        return Ok(None);
    }
    config::init_logging(&resolved, log_name)?;
    let variables = config::variables(&resolved)?;
    Ok(Some((resolved.keys, variables)))
}

/// The CLI commands (shell, demo, load, bench) log warnings to stderr; TIDAL_LOG or RUST_LOG
/// changes the filter.
fn init_cli_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("TIDAL_LOG")
        .or_else(|_| tracing_subscriber::EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

enum Job {
    Mnode(config::MnodeConfig, Vec<config::Variable>),
    Dnode(config::DnodeConfig, Vec<config::Variable>),
    Local(config::LocalConfig),
    Cli(Command),
}

fn main() -> ExitCode {
    let matches = config::with_env_vars(Cli::command()).get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    let empty = clap::ArgMatches::default();
    let sub = matches.subcommand().map(|(_, m)| m).unwrap_or(&empty);
    let job = match cli.command {
        Command::Mnode(a) => {
            server_config(&a, sub, "mnode").map(|c| c.map(|(c, v)| Job::Mnode(c, v)))
        }
        Command::Vnode(a) => {
            server_config(&a, sub, "dnode").map(|c| c.map(|(c, v)| Job::Dnode(c, v)))
        }
        // `tidal local` runs its roles as child processes, each with its own variables.
        Command::Local(a) => server_config(&a, sub, "local").map(|c| c.map(|(c, _)| Job::Local(c))),
        other => {
            init_cli_logging();
            Ok(Some(Job::Cli(other)))
        }
    };
    let job = match job {
        Ok(Some(job)) => job,
        Ok(None) => return ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    mem::start_purge_thread();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Errors go to stderr; a server logging to a file also records them there.
    let log_to_file = match &job {
        Job::Mnode(c, _) => c.common.log_dir.is_some(),
        Job::Dnode(c, _) => c.common.log_dir.is_some(),
        Job::Local(c) => c.common.log_dir.is_some(),
        Job::Cli(_) => false,
    };
    let result = rt.block_on(async move {
        match job {
            Job::Mnode(c, v) => server::run_mnode(c, v).await,
            Job::Dnode(c, v) => server::run_dnode(c, v).await,
            Job::Local(c) => local::run(c).await,
            Job::Cli(Command::Load(args)) => load::run(args).await,
            Job::Cli(Command::Shell(args)) => shell::run(args).await,
            Job::Cli(Command::Demo(args)) => demo::run(args).await,
            Job::Cli(Command::Bench(args)) => bench::run(args).await,
            Job::Cli(Command::Mnode(_) | Command::Vnode(_) | Command::Local(_)) => {
                Err("server roles are resolved before the runtime starts".into())
            }
        }
    });
    // A shutdown that timed out may leave a flush running on a blocking thread: do not wait
    // for it (the WAL still holds its data).
    rt.shutdown_timeout(std::time::Duration::from_millis(100));
    match result {
        Ok(code) => code,
        Err(e) => {
            if log_to_file {
                tracing::error!("{e}");
            }
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
