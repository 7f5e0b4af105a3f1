//! `tidal bench queries`: prints the 13 TSBS IoT query types with seeded parameters for one
//! engine, and owns the per-engine query text `bench run` sends ([`Engine::text`]), including
//! the rewrite of the tsbs crate's modern ClickHouse SQL for the ClickHouse 18.16 peer.

use super::DataArgs;
use crate::server::BoxError;
use std::process::ExitCode;
use tidal_tsbs::{Query, QueryParams, QueryType};

/// Query dialects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Engine {
    /// Tidal SQL (TDengine's forms).
    Tidal,
    /// InfluxQL (InfluxDB 1.x).
    Influx,
    /// ClickHouse SQL for a current release (DateTime64, toStartOfInterval, window functions).
    Clickhouse,
    /// ClickHouse SQL rewritten for the 18.16 peer; types it cannot run are left out.
    Clickhouse18,
    /// PostgreSQL SQL.
    Postgres,
}

impl Engine {
    /// The text of `q` for this engine; `None` when the engine cannot run this type.
    pub fn text(self, q: &Query) -> Option<String> {
        match self {
            Engine::Tidal => Some(q.tidal.clone()),
            Engine::Influx => Some(q.influxql.clone()),
            Engine::Clickhouse => Some(q.clickhouse.clone()),
            Engine::Clickhouse18 => clickhouse18(&q.clickhouse),
            Engine::Postgres => Some(q.postgres.clone()),
        }
    }
}

#[derive(clap::Args)]
pub struct QueriesArgs {
    #[command(flatten)]
    data: DataArgs,
    /// A query type (`last-loc`, `avg-load`, ...) or `all`.
    #[arg(long = "type", default_value = "all")]
    kind: String,
    #[arg(long, value_enum, default_value = "tidal")]
    engine: Engine,
    /// Queries per type, each with its own random parameters.
    #[arg(long, default_value_t = 1)]
    count: u64,
}

/// Parses `--type`: one name or `all`.
pub fn parse_types(s: &str) -> Result<Vec<QueryType>, String> {
    if s.trim() == "all" {
        return Ok(QueryType::all().to_vec());
    }
    s.split(',')
        .map(|name| {
            QueryType::parse(name).ok_or_else(|| {
                let names: Vec<&str> = QueryType::all().iter().map(|q| q.name()).collect();
                format!(
                    "unknown query type '{name}'; expected all or one of {}",
                    names.join(", ")
                )
            })
        })
        .collect()
}

pub fn run(args: QueriesArgs) -> Result<ExitCode, BoxError> {
    let cfg = args.data.config()?;
    let types = parse_types(&args.kind)?;
    let params = QueryParams::for_data(&cfg);
    for q in types {
        for k in 0..args.count {
            let query = tidal_tsbs::generate_query(q, &params, k);
            println!("-- {}", query.description);
            match args.engine.text(&query) {
                Some(t) => println!("{};", t.trim().trim_end_matches(';')),
                None => println!("-- not supported by this engine"),
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Rewrites the tsbs crate's ClickHouse SQL for ClickHouse 18.16 (December 2018), which has no
/// `DateTime64`, no `toStartOfInterval` and no window functions: millisecond literals become
/// whole-second `toDateTime` (exact, since every point is on the 10 s grid and the bounds are
/// `>`/`<=`/`<` comparisons), 10-minute buckets become integer arithmetic on the epoch, and
/// the two types that need `lagInFrame ... OVER` are reported unsupported.
pub fn clickhouse18(sql: &str) -> Option<String> {
    if sql.contains(" OVER ") || sql.contains("lagInFrame") {
        return None;
    }
    let mut out = String::with_capacity(sql.len());
    let mut rest = sql;
    const TS: &str = "toDateTime64('";
    while let Some(i) = rest.find(TS) {
        out.push_str(&rest[..i]);
        let after = &rest[i + TS.len()..];
        // 'YYYY-MM-DD HH:MM:SS.mmm', 3, 'UTC')
        let end = after.find(')')?;
        let literal = after.get(..19)?;
        out.push_str(&format!("toDateTime('{literal}', 'UTC')"));
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    let mut sql = out;
    const B10: &str = "toStartOfInterval(";
    while let Some(i) = sql.find(B10) {
        let after = &sql[i + B10.len()..];
        let comma = after.find(',')?;
        let col = after[..comma].to_string();
        let close = after.find(')')?;
        let replaced = format!("toDateTime(intDiv(toUInt32({col}), 600) * 600)");
        sql = format!("{}{replaced}{}", &sql[..i], &after[close + 1..]);
    }
    Some(sql)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clickhouse18_rewrites() {
        let p = QueryParams {
            start_ms: 1_451_606_400_000,
            end_ms: 1_451_692_801_000,
            scale: 10,
            seed: 1,
        };
        let mut unsupported = 0;
        for q in QueryType::all() {
            let x = tidal_tsbs::generate_query(*q, &p, 3);
            match clickhouse18(&x.clickhouse) {
                Some(s) => {
                    assert!(!s.contains("DateTime64"), "{s}");
                    assert!(!s.contains("toStartOfInterval"), "{s}");
                    assert_eq!(s.matches('(').count(), s.matches(')').count(), "{s}");
                }
                None => unsupported += 1,
            }
        }
        assert_eq!(unsupported, 2);
        let s = clickhouse18("SELECT toStartOfInterval(time, INTERVAL 10 MINUTE) AS b FROM t WHERE time > toDateTime64('2016-01-01 00:10:00.123', 3, 'UTC')").unwrap();
        assert_eq!(s, "SELECT toDateTime(intDiv(toUInt32(time), 600) * 600) AS b FROM t WHERE time > toDateTime('2016-01-01 00:10:00', 'UTC')");
    }

    #[test]
    fn types_parse() {
        assert_eq!(parse_types("all").unwrap().len(), 13);
        assert_eq!(
            parse_types("last-loc,avg-load").unwrap(),
            vec![QueryType::LastLoc, QueryType::AvgLoad]
        );
        assert!(parse_types("cpu-max-all-1").is_err());
    }
}
