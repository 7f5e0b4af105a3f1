//! `tidal`: one binary for every role of a Tidal cluster.
//!
//! - `tidal mnode`  the catalog and routing map (also serves SQL)
//! - `tidal vnode`  a data node hosting the vnodes the mnode assigns to it (also serves SQL)
//! - `tidal local`  an mnode plus N data nodes on loopback, as child processes
//! - `tidal shell`  the SQL shell
//! - `tidal demo`   the README's main job: a local cluster, TSBS-IoT-style data, IoT queries
//! - `tidal load`   load a TSBS IoT file (influx or TDengine format) and report the rate
//! - `tidal bench`  the TSBS IoT benchmark: generate data and queries, run Tidal vs the peers

mod bench;
mod demo;
mod frontend;
mod http;
mod load;
mod local;
mod server;
mod shell;

// Servers make many small per-subtable allocations; mimalloc keeps them cheap (measured: the
// storage benchmark at 4,000 trucks doubled its rows/s against glibc malloc).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
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
    Mnode {
        #[arg(long)]
        data: PathBuf,
        #[arg(long, default_value = "127.0.0.1:6030")]
        listen: String,
        /// Also serve the HTTP API (InfluxDB line protocol writes) on this address.
        #[arg(long)]
        http: Option<String>,
    },
    /// Run a data node that hosts the vnodes the mnode assigns to it.
    Vnode {
        #[arg(long)]
        data: PathBuf,
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: String,
        /// gRPC address of the mnode.
        #[arg(long)]
        mnode: String,
        /// Address other nodes use to reach this one (default: the bound listen address).
        #[arg(long)]
        advertise: Option<String>,
        /// Also serve the HTTP API (InfluxDB line protocol writes) on this address.
        #[arg(long)]
        http: Option<String>,
    },
    /// Run an mnode and N data nodes on loopback as child processes.
    Local {
        #[arg(long)]
        data: PathBuf,
        /// Number of data nodes.
        #[arg(long, default_value_t = 2)]
        vnodes: u32,
        #[arg(long, default_value = "127.0.0.1:6030")]
        listen: String,
        /// HTTP API address (InfluxDB line protocol writes); `off` disables it.
        #[arg(long, default_value = "127.0.0.1:6041")]
        http: String,
    },
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_env("TIDAL_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
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
    let result = rt.block_on(async move {
        match cli.command {
            Command::Mnode { data, listen, http } => server::run_mnode(data, listen, http).await,
            Command::Vnode {
                data,
                listen,
                mnode,
                advertise,
                http,
            } => server::run_dnode(data, listen, mnode, advertise, http).await,
            Command::Local {
                data,
                vnodes,
                listen,
                http,
            } => {
                let http = Some(http).filter(|h| !matches!(h.as_str(), "off" | "none" | ""));
                local::run(data, vnodes, listen, http).await
            }
            Command::Load(args) => load::run(args).await,
            Command::Shell(args) => shell::run(args).await,
            Command::Demo(args) => demo::run(args).await,
            Command::Bench(args) => bench::run(args).await,
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
