//! `tidal bench generate`: streams the TSBS IoT data set in one of the formats the engines load
//! (influx line protocol, TSBS's TDengine command stream, ClickHouse or PostgreSQL CSV), plain
//! or compressed, to a file or stdout, and prints the data set's statistics on stderr.
//!
//! Also owns the file writers `bench run` uses to prepare the peers' input ([`write_files`]).

use super::DataArgs;
use crate::server::BoxError;
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use tidal_tsbs::format::influx::InfluxWriter;
use tidal_tsbs::format::sql::{append_csv_row, Peer};
use tidal_tsbs::format::tdengine::TdengineWriter;
use tidal_tsbs::stats::StatsCollector;
use tidal_tsbs::{Config, Generator, Measurement, Point};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// InfluxDB line protocol as TSBS writes it (also VictoriaMetrics and Tidal's HTTP API).
    Influx,
    /// TSBS's `--format=TDengine` command stream (`tidal load` reads it).
    Tdengine,
    /// ClickHouse CSV (NULL as \N), one file per table.
    ClickhouseCsv,
    /// PostgreSQL CSV for COPY (NULL as an empty cell), one file per table.
    PostgresCsv,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Table {
    Readings,
    Diagnostics,
}

impl Table {
    fn measurement(self) -> Measurement {
        match self {
            Table::Readings => Measurement::Readings,
            Table::Diagnostics => Measurement::Diagnostics,
        }
    }
}

#[derive(clap::Args)]
pub struct GenerateArgs {
    #[command(flatten)]
    data: DataArgs,
    #[arg(long, value_enum, default_value = "influx")]
    format: Format,
    /// Output file (default: stdout). For the CSV formats, without --table, two files are
    /// written, the table name inserted before the first dot: iot.csv → iot.readings.csv.
    #[arg(long)]
    out: Option<PathBuf>,
    /// CSV formats: write only this table's rows.
    #[arg(long, value_enum)]
    table: Option<Table>,
    /// Compress with gzip.
    #[arg(long, conflicts_with = "zstd")]
    gzip: bool,
    /// Compress with zstd.
    #[arg(long)]
    zstd: bool,
}

/// A (possibly compressing) output stream that must be finished to flush its trailer.
pub enum Sink {
    Plain(Box<dyn Write>),
    Gzip(flate2::write::GzEncoder<Box<dyn Write>>),
    Zstd(zstd::Encoder<'static, Box<dyn Write>>),
}

impl Sink {
    pub fn new(inner: Box<dyn Write>, gzip: bool, zstd: bool) -> io::Result<Sink> {
        Ok(if gzip {
            Sink::Gzip(flate2::write::GzEncoder::new(
                inner,
                flate2::Compression::default(),
            ))
        } else if zstd {
            Sink::Zstd(zstd::Encoder::new(inner, 3)?)
        } else {
            Sink::Plain(inner)
        })
    }

    pub fn finish(self) -> io::Result<()> {
        match self {
            Sink::Plain(mut w) => w.flush(),
            Sink::Gzip(e) => e.finish()?.flush(),
            Sink::Zstd(e) => e.finish()?.flush(),
        }
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sink::Plain(w) => w.write(buf),
            Sink::Gzip(w) => w.write(buf),
            Sink::Zstd(w) => w.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::Plain(w) => w.flush(),
            Sink::Gzip(w) => w.flush(),
            Sink::Zstd(w) => w.flush(),
        }
    }
}

fn open(path: Option<&Path>, gzip: bool, zstd: bool) -> Result<Sink, String> {
    let inner: Box<dyn Write> = match path {
        Some(p) => Box::new(BufWriter::with_capacity(
            1 << 20,
            File::create(p).map_err(|e| format!("cannot create {}: {e}", p.display()))?,
        )),
        None => Box::new(BufWriter::with_capacity(1 << 20, io::stdout().lock())),
    };
    Sink::new(inner, gzip, zstd).map_err(|e| format!("cannot start the compressor: {e}"))
}

/// `iot.csv.gz` + `readings` → `iot.readings.csv.gz`.
pub fn table_path(out: &Path, table: &str) -> PathBuf {
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let new = match name.find('.') {
        Some(i) => format!("{}.{table}{}", &name[..i], &name[i..]),
        None => format!("{name}.{table}"),
    };
    out.with_file_name(new)
}

/// A ClickHouse 18.16 CSV row: the tsbs crate writes `DateTime64` text with milliseconds,
/// which the old release's `DateTime` does not parse; every generated timestamp is on the
/// 10 s grid, so dropping the always-zero `.000` is exact.
pub fn append_clickhouse18_row(buf: &mut Vec<u8>, p: &Point) {
    let start = buf.len();
    append_csv_row(buf, Peer::ClickHouse, p);
    // "YYYY-MM-DD HH:MM:SS.mmm," — remove ".mmm".
    if buf.len() >= start + 23 && buf[start + 19] == b'.' {
        buf.drain(start + 19..start + 23);
    }
}

pub fn run(args: GenerateArgs) -> Result<ExitCode, BoxError> {
    let cfg = args.data.config()?;
    let started = std::time::Instant::now();
    let mut stats = StatsCollector::new(&cfg);
    let mut gen = Generator::new(cfg.clone())?;
    let write_err = |e: io::Error| -> BoxError {
        if e.kind() == io::ErrorKind::BrokenPipe {
            // `tidal bench generate | head`: the reader has all it wanted.
            std::process::exit(0);
        }
        format!("writing the data set: {e}").into()
    };
    match args.format {
        Format::Influx | Format::Tdengine => {
            if args.table.is_some() {
                return Err("--table applies to the CSV formats only".into());
            }
            let sink = open(args.out.as_deref(), args.gzip, args.zstd)?;
            let sink = if args.format == Format::Influx {
                let mut w = InfluxWriter::new(sink);
                while let Some(p) = gen.next_point() {
                    stats.observe(&p);
                    w.write_point(&p).map_err(write_err)?;
                }
                w.into_inner()
            } else {
                let mut w = TdengineWriter::new(sink);
                while let Some(p) = gen.next_point() {
                    stats.observe(&p);
                    w.write_point(&p).map_err(write_err)?;
                }
                w.into_inner()
            };
            sink.finish().map_err(write_err)?;
        }
        Format::ClickhouseCsv | Format::PostgresCsv => {
            let peer = if args.format == Format::ClickhouseCsv {
                Peer::ClickHouse
            } else {
                Peer::Postgres
            };
            let tables: Vec<Table> = match args.table {
                Some(t) => vec![t],
                None => vec![Table::Readings, Table::Diagnostics],
            };
            let mut sinks: Vec<Option<Sink>> = vec![None, None];
            for t in &tables {
                let path = match (&args.out, args.table) {
                    (Some(o), None) => Some(table_path(o, t.measurement().name())),
                    (Some(o), Some(_)) => Some(o.clone()),
                    (None, Some(_)) => None,
                    (None, None) => {
                        return Err("stdout takes one table: pass --table readings or --table diagnostics, or --out FILE for both".into())
                    }
                };
                sinks[t.measurement() as usize] =
                    Some(open(path.as_deref(), args.gzip, args.zstd)?);
            }
            let mut buf = Vec::with_capacity(512);
            while let Some(p) = gen.next_point() {
                stats.observe(&p);
                if let Some(s) = sinks[p.measurement as usize].as_mut() {
                    buf.clear();
                    append_csv_row(&mut buf, peer, &p);
                    s.write_all(&buf).map_err(write_err)?;
                }
            }
            for s in sinks.into_iter().flatten() {
                s.finish().map_err(write_err)?;
            }
        }
    }
    print_summary(&cfg, stats.finish(), started.elapsed().as_secs_f64());
    Ok(ExitCode::SUCCESS)
}

fn print_summary(cfg: &Config, s: tidal_tsbs::Stats, secs: f64) {
    eprintln!(
        "generated {} points ({} readings, {} diagnostics) for {} trucks over {:.2} days, seed {}, in {secs:.1} s",
        s.points, s.per_measurement[0], s.per_measurement[1], cfg.scale, s.days, cfg.seed
    );
    eprintln!(
        "rows per truck per day: readings {:.1}, diagnostics {:.1} (8640 without perturbations); missing {:.2}%, NULL-field points {:.2}%, NULL-tag points {:.2}%, out of order {:.2}%",
        s.rows_per_truck_per_day[0],
        s.rows_per_truck_per_day[1],
        s.missing_rate * 100.0,
        s.null_field_rate * 100.0,
        s.null_tag_rate * 100.0,
        s.out_of_order_rate * 100.0
    );
}

/// The peers' input files for one data set, in `dir`.
#[derive(Clone, Debug, Default)]
pub struct DataFiles {
    /// Influx line protocol (InfluxDB and VictoriaMetrics).
    pub influx: Option<PathBuf>,
    /// TSBS's TDengine command stream (`tidal load --format tdengine`).
    pub tdengine: Option<PathBuf>,
    /// `1,` rows written to it per measurement (readings, diagnostics).
    pub tdengine_rows: [u64; 2],
    /// ClickHouse 18.16 CSV: readings, diagnostics.
    pub clickhouse: Option<[PathBuf; 2]>,
    /// PostgreSQL CSV: readings, diagnostics.
    pub postgres: Option<[PathBuf; 2]>,
    /// Points generated (rows across both tables).
    pub points: u64,
    /// Lines of line protocol written (TSBS skips points whose every field is NULL).
    pub influx_lines: u64,
}

/// Writes the requested files in one pass over the generator.
///
/// With `subtable_tags`, every point carries the tags of its Tidal/TDengine subtable (those of
/// the first point seen for it; the null-name points share one subtable) instead of its own,
/// and of the null-name points at one timestamp only the last is written (Tidal keeps one row
/// per subtable and timestamp, the later write winning): then the peers hold the same logical
/// data as Tidal, and their answers can be compared row for row. Without it the files are TSBS's, where a point's NULL tag is its own.
pub fn write_files(
    cfg: &Config,
    dir: &Path,
    influx: bool,
    tdengine: bool,
    clickhouse: bool,
    postgres: bool,
    subtable_tags: bool,
) -> Result<DataFiles, String> {
    let create = |name: &str| -> Result<(PathBuf, BufWriter<File>), String> {
        let p = dir.join(name);
        let f = File::create(&p).map_err(|e| format!("cannot create {}: {e}", p.display()))?;
        Ok((p, BufWriter::with_capacity(1 << 20, f)))
    };
    let mut files = DataFiles::default();
    let mut lp = if influx {
        let (p, w) = create("data.lp")?;
        files.influx = Some(p);
        Some(InfluxWriter::new(w))
    } else {
        None
    };
    let mut td = if tdengine {
        let (p, w) = create("data.tdengine")?;
        files.tdengine = Some(p);
        Some(TdengineWriter::new(w))
    } else {
        None
    };
    let mut ch = Vec::new();
    if clickhouse {
        let (r, rw) = create("clickhouse.readings.csv")?;
        let (d, dw) = create("clickhouse.diagnostics.csv")?;
        files.clickhouse = Some([r, d]);
        ch = vec![rw, dw];
    }
    let mut pg = Vec::new();
    if postgres {
        let (r, rw) = create("postgres.readings.csv")?;
        let (d, dw) = create("postgres.diagnostics.csv")?;
        files.postgres = Some([r, d]);
        pg = vec![rw, dw];
    }
    let err = |e: io::Error| format!("writing the data files in {}: {e}", dir.display());
    let mut gen = Generator::new(cfg.clone()).map_err(|e| e.to_string())?;
    let mut buf = Vec::with_capacity(512);
    // Subtable key (measurement, truck or None for the null-name subtable) → the truck and
    // NULL-tag mask of its first point.
    let mut first: HashMap<(Measurement, Option<u32>), (u32, u8)> = HashMap::new();
    // The null-name subtable holds one row per timestamp, the last written winning: count
    // its points per (measurement, ts) first, then write only the last of each.
    let mut shared: HashMap<(Measurement, i64), u32> = HashMap::new();
    if subtable_tags {
        let mut pre = Generator::new(cfg.clone()).map_err(|e| e.to_string())?;
        while let Some(raw) = pre.next_raw() {
            if pre.view(&raw).name().is_none() {
                *shared.entry((raw.measurement, raw.ts_ms)).or_default() += 1;
            }
        }
    }
    while let Some(raw) = gen.next_raw() {
        let mut p = gen.view(&raw);
        if subtable_tags && p.name().is_none() {
            if let Some(n) = shared.get_mut(&(raw.measurement, raw.ts_ms)) {
                *n -= 1;
                if *n > 0 {
                    continue;
                }
            }
        }
        if subtable_tags {
            let key = (raw.measurement, p.name().is_some().then_some(raw.truck));
            let (truck, null_tags) = *first.entry(key).or_insert((raw.truck, raw.null_tags));
            if let Some(tags) = gen.trucks().get(truck as usize) {
                p.tags = tags;
                p.null_tags = null_tags;
            }
        }
        files.points += 1;
        let m = p.measurement as usize;
        if let Some(w) = lp.as_mut() {
            w.write_point(&p).map_err(err)?;
        }
        if let Some(w) = td.as_mut() {
            w.write_point(&p).map_err(err)?;
            files.tdengine_rows[m] += 1;
        }
        if let Some(w) = ch.get_mut(m) {
            buf.clear();
            append_clickhouse18_row(&mut buf, &p);
            w.write_all(&buf).map_err(err)?;
        }
        if let Some(w) = pg.get_mut(m) {
            buf.clear();
            append_csv_row(&mut buf, Peer::Postgres, &p);
            w.write_all(&buf).map_err(err)?;
        }
    }
    if let Some(w) = lp {
        files.influx_lines = w.lines();
        w.into_inner().flush().map_err(err)?;
    }
    if let Some(w) = td {
        w.into_inner().flush().map_err(err)?;
    }
    for mut w in ch.into_iter().chain(pg) {
        w.flush().map_err(err)?;
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_paths() {
        assert_eq!(
            table_path(Path::new("/x/iot.csv.gz"), "readings"),
            PathBuf::from("/x/iot.readings.csv.gz")
        );
        assert_eq!(
            table_path(Path::new("iot"), "diagnostics"),
            PathBuf::from("iot.diagnostics")
        );
    }

    #[test]
    fn clickhouse18_rows_have_whole_seconds() {
        let cfg = Config {
            scale: 2,
            end_ms: tidal_tsbs::TSBS_START_MS + 60_000,
            ..Config::default()
        };
        let mut g = Generator::new(cfg).unwrap();
        let p = g.next_point().unwrap();
        let mut buf = Vec::new();
        append_clickhouse18_row(&mut buf, &p);
        let line = String::from_utf8(buf).unwrap();
        assert!(line.starts_with("2016-01-01 00:00:00,truck_0,"), "{line}");
    }
}
