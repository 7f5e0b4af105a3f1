//! Measures generation speed and prints the data set's statistics.
//!
//! `cargo run --release -p tidal-tsbs --example throughput -- [scale] [hours] [seed]`
//! (defaults: 100 trucks, 24 hours, seed 123: the doc's reference set).

use std::io::{self, BufWriter, Write};
use std::time::Instant;

use tidal_tsbs::format::{influx::InfluxWriter, tdengine::TdengineWriter};
use tidal_tsbs::stats::StatsCollector;
use tidal_tsbs::{Config, Generator, TSBS_START_MS};

/// Counts bytes without storing them, so formatting speed is not I/O speed.
struct Sink(u64);

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let scale: u32 = args.first().map(|s| s.parse()).transpose()?.unwrap_or(100);
    let hours: i64 = args.get(1).map(|s| s.parse()).transpose()?.unwrap_or(24);
    let seed: u64 = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(123);
    let cfg = Config {
        scale,
        end_ms: TSBS_START_MS + hours * 3_600_000,
        seed,
        ..Config::default()
    };

    let t = Instant::now();
    let mut g = Generator::new(cfg.clone())?;
    let mut n = 0u64;
    let mut checksum = 0.0;
    while let Some(p) = g.next_raw() {
        n += 1;
        checksum += p.values[0];
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "generate:  {n} points in {secs:.3} s = {:.2} M points/s (checksum {checksum:.1})",
        n as f64 / secs / 1e6
    );

    let t = Instant::now();
    let mut g = Generator::new(cfg.clone())?;
    let mut w = InfluxWriter::new(BufWriter::new(Sink(0)));
    while let Some(p) = g.next_point() {
        w.write_point(&p)?;
    }
    let secs = t.elapsed().as_secs_f64();
    let bytes = w.into_inner().into_inner().map_err(|e| e.into_error())?.0;
    println!(
        "influx:    {bytes} bytes in {secs:.3} s = {:.2} M points/s",
        n as f64 / secs / 1e6
    );

    let t = Instant::now();
    let mut g = Generator::new(cfg.clone())?;
    let mut w = TdengineWriter::new(BufWriter::new(Sink(0)));
    while let Some(p) = g.next_point() {
        w.write_point(&p)?;
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "tdengine:  {:.3} s = {:.2} M points/s",
        secs,
        n as f64 / secs / 1e6
    );

    let mut g = Generator::new(cfg.clone())?;
    let mut c = StatsCollector::new(&cfg);
    while let Some(p) = g.next_point() {
        c.observe(&p);
    }
    println!("{:#?}", c.finish());
    Ok(())
}
