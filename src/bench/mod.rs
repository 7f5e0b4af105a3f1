//! `tidal bench`: the TSBS IoT benchmark harness (issue 7).
//!
//! - `tidal bench generate` streams the deterministic TSBS IoT data set ([`generate`]).
//! - `tidal bench queries` prints the 13 IoT query types for one engine ([`queries`]).
//! - `tidal bench run` loads the same data into Tidal and the peers, measures ingest, size,
//!   CPU, memory and query latency, checks the answers agree, and writes the report
//!   ([`run`], with the engines in [`tidal`] and [`peers`], the figures in [`report`] and
//!   the PNG charts in [`chart`]).
//! - `tidal bench report` re-renders the report and charts from a run's results.json.
//! - `tidal bench lastrow` measures the last-point queries with the last-row cache off and on
//!   against the peers at 1,000 to 1,000,000 trucks ([`lastrow`]).
//!
//! This module owns the subcommand's arguments and the data-set options shared by all three.

pub mod answers;
pub mod chart;
pub mod differential;
pub mod generate;
pub mod http;
pub mod lastrow;
pub mod peers;
pub mod prepare;
pub mod procfs;
pub mod queries;
pub mod report;
pub mod run;
pub mod tidal;

use crate::server::BoxError;
use std::process::ExitCode;
use tidal_common::Precision;
use tidal_tsbs::Config;

#[derive(clap::Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(clap::Subcommand)]
enum BenchCommand {
    /// Stream the TSBS IoT data set (influx line protocol, TDengine, ClickHouse or PostgreSQL
    /// CSV) to a file or stdout; print a summary on stderr.
    Generate(generate::GenerateArgs),
    /// Print the IoT queries of one type (or all) for one engine, with seeded parameters.
    Queries(queries::QueriesArgs),
    /// Load the data set into Tidal and the peers, measure, and write docs/BENCHMARKS.md.
    Run(run::RunArgs),
    /// Re-render the report and charts from a run's results.json (no measuring).
    Report(run::ReportArgs),
    /// Load the same data into Tidal and DuckDB (via Python's duckdb module), run the 13 IoT
    /// query types and random aggregate/window queries on both, and report disagreements
    /// (exit status 1 if any).
    Differential(differential::DiffArgs),
    /// The last-point queries at 1,000 / 100,000 / 1,000,000 trucks: Tidal with the last-row
    /// cache off and on, and the peers on the same data; writes docs/bench/lastrow.md.
    Lastrow(lastrow::LastRowArgs),
    /// The frontend's CPU per line to turn line-protocol bodies into row blocks, on one
    /// thread, without writing them (for work on that path; not part of `run`).
    #[command(hide = true)]
    Prepare(prepare::PrepareArgs),
}

pub async fn run(args: BenchArgs) -> Result<ExitCode, BoxError> {
    match args.command {
        BenchCommand::Generate(a) => generate::run(a),
        BenchCommand::Queries(a) => queries::run(a),
        BenchCommand::Run(a) => run::run(a).await,
        BenchCommand::Report(a) => run::rerender(a),
        BenchCommand::Differential(a) => differential::run(a).await,
        BenchCommand::Lastrow(a) => lastrow::run(a).await,
        BenchCommand::Prepare(a) => prepare::run(a).await,
    }
}

/// The data set: TSBS's `--scale`, `--timestamp-start`, `--timestamp-end` and `--seed`.
#[derive(clap::Args, Clone, Debug)]
pub struct DataArgs {
    /// Number of trucks.
    #[arg(long, default_value_t = 100)]
    pub scale: u32,
    /// First timestamp (ISO 8601, UTC unless an offset is given).
    #[arg(long, default_value = "2016-01-01T00:00:00Z")]
    pub start: String,
    /// End of the range, exclusive (ISO 8601). Default: start + --duration.
    #[arg(long, conflicts_with = "duration")]
    pub end: Option<String>,
    /// Length of the range (`30m`, `12h`, `1d`, `3d`), when --end is not given. Default 1d.
    #[arg(long)]
    pub duration: Option<String>,
    /// Seed of the generator (and of the query parameters).
    #[arg(long, default_value_t = 123)]
    pub seed: u64,
}

impl DataArgs {
    /// The generator configuration, or a message naming the bad option.
    pub fn config(&self) -> Result<Config, String> {
        let start_ms = parse_time("--start", &self.start)?;
        let end_ms = match (&self.end, &self.duration) {
            (Some(e), _) => parse_time("--end", e)?,
            (None, d) => {
                let d = d.as_deref().unwrap_or("1d");
                start_ms + parse_duration_ms("--duration", d)?
            }
        };
        let cfg = Config {
            scale: self.scale,
            start_ms,
            end_ms,
            seed: self.seed,
            ..Config::default()
        };
        cfg.validate().map_err(|e| e.to_string())?;
        if cfg.epochs() == 0 {
            return Err(format!(
                "the range {} .. {} holds no 10 s interval",
                self.start,
                self.end.as_deref().unwrap_or("start + duration")
            ));
        }
        Ok(cfg)
    }
}

pub fn parse_time(option: &str, s: &str) -> Result<i64, String> {
    Precision::Millis.parse_timestamp(s).ok_or_else(|| {
        format!("{option}: '{s}' is not a timestamp (expected e.g. 2016-01-01T00:00:00Z)")
    })
}

pub fn parse_duration_ms(option: &str, s: &str) -> Result<i64, String> {
    match tidal_common::time::parse_duration(s, 1_000_000_000) {
        Some(ns) if ns > 0 => Ok(ns / 1_000_000),
        _ => Err(format!(
            "{option}: '{s}' is not a positive duration (expected e.g. 30m, 12h, 1d)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(end: Option<&str>, duration: Option<&str>) -> DataArgs {
        DataArgs {
            scale: 4,
            start: "2016-01-01T00:00:00Z".into(),
            end: end.map(String::from),
            duration: duration.map(String::from),
            seed: 1,
        }
    }

    #[test]
    fn ranges() {
        let c = args(None, None).config().unwrap();
        assert_eq!(c.end_ms - c.start_ms, 86_400_000);
        let c = args(None, Some("30m")).config().unwrap();
        assert_eq!(c.end_ms - c.start_ms, 1_800_000);
        let c = args(Some("2016-01-02"), None).config().unwrap();
        assert_eq!(c.end_ms - c.start_ms, 86_400_000);
        assert!(args(None, Some("soon")).config().is_err());
        assert!(args(Some("2015-01-01"), None).config().is_err());
        assert!(args(None, Some("5s")).config().is_err());
    }
}
