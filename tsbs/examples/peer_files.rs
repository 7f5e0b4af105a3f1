//! Writes a small data set and the 13 queries for a SQL peer, to check them on a real engine.
//!
//! `cargo run -p tidal-tsbs --example peer_files -- <dir> <postgres|clickhouse> [scale] [hours]`
//! writes `<dir>/ddl.sql`, `<dir>/readings.csv`, `<dir>/diagnostics.csv` and
//! `<dir>/queries.sql` (one query per line, preceded by a `-- <type>` line), and
//! `<dir>/inserts.sql` (the first 100 points as INSERT statements).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use tidal_tsbs::format::sql::{append_csv_row, ddl, insert_statement, Peer};
use tidal_tsbs::queries::{generate, QueryParams, QueryType};
use tidal_tsbs::{Config, Generator, Measurement, TSBS_START_MS};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = PathBuf::from(
        args.first()
            .ok_or("usage: peer_files <dir> <peer> [scale] [hours]")?,
    );
    let peer = match args.get(1).map(String::as_str) {
        Some("clickhouse") => Peer::ClickHouse,
        _ => Peer::Postgres,
    };
    let scale: u32 = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(10);
    let hours: i64 = args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(24);
    let cfg = Config {
        scale,
        end_ms: TSBS_START_MS + hours * 3_600_000,
        ..Config::default()
    };
    std::fs::create_dir_all(&dir)?;
    let mut d = BufWriter::new(File::create(dir.join("ddl.sql"))?);
    for m in Measurement::ALL {
        for stmt in ddl(peer, m) {
            writeln!(d, "{stmt};")?;
        }
    }
    d.flush()?;
    let mut files = [
        BufWriter::new(File::create(dir.join("readings.csv"))?),
        BufWriter::new(File::create(dir.join("diagnostics.csv"))?),
    ];
    let mut g = Generator::new(cfg.clone())?;
    let mut buf = Vec::new();
    while let Some(p) = g.next_point() {
        buf.clear();
        append_csv_row(&mut buf, peer, &p);
        let i = usize::from(p.measurement == Measurement::Diagnostics);
        files[i].write_all(&buf)?;
    }
    for f in &mut files {
        f.flush()?;
    }
    let mut q = BufWriter::new(File::create(dir.join("queries.sql"))?);
    let params = QueryParams::for_data(&cfg);
    for t in QueryType::all() {
        let x = generate(*t, &params, 0);
        let text = match peer {
            Peer::ClickHouse => x.clickhouse,
            Peer::Postgres => x.postgres,
        };
        writeln!(q, "-- {}\n{text};", t.name())?;
    }
    q.flush()?;
    // The first 100 points again, as INSERT statements.
    let mut g = Generator::new(cfg)?;
    let raws: Vec<_> = std::iter::from_fn(|| g.next_raw()).take(100).collect();
    let points: Vec<_> = raws.iter().map(|r| g.view(r)).collect();
    let mut ins = BufWriter::new(File::create(dir.join("inserts.sql"))?);
    for m in Measurement::ALL {
        if let Some(stmt) = insert_statement(peer, m, &points) {
            writeln!(ins, "{stmt};")?;
        }
    }
    ins.flush()?;
    Ok(())
}
