//! `tidal bench prepare`: the CPU a frontend spends turning line-protocol bodies into row
//! blocks (`Schemaless::prepare`: parsing, series lookups, filling the blocks), measured alone
//! on one thread. A line-protocol write spends most of a frontend's CPU there, and end-to-end
//! runs on a shared 2-core machine vary by 10-20%, too much to see a change of a few percent;
//! this loop repeats the same bodies and keeps the best pass.
//!
//! It starts a local cluster in a temporary folder, writes the first bodies once (so that the
//! STABLEs exist; every subtable is taken as existing, as for a running feed), then times the
//! parser alone and the whole conversion over the bodies, `--passes` times each; then the
//! merge of the blocks of concurrent requests into one RPC per vgroup (`merge_blocks`,
//! another tenth of a frontend's CPU under the line-protocol benchmark where bodies share
//! subtables; where they share none, as at 100,000 trucks, only its check that they do not).

use crate::frontend::schemaless::{Known, KnownScope, Schemaless, SchemalessOptions};
use crate::frontend::write_merge::merge_blocks;
use crate::local::Cluster;
use crate::server::BoxError;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;
use tidal_client::Client;
use tidal_common::RowBlock;

#[derive(clap::Args)]
pub struct PrepareArgs {
    /// A line-protocol file (`tidal bench generate --format influx`), nanosecond timestamps.
    #[arg(long)]
    file: PathBuf,
    /// Lines per body (the line-protocol benchmark sends 10,000).
    #[arg(long, default_value_t = super::peers::LP_LINES_PER_REQUEST)]
    lines: usize,
    /// At most this many lines of the file are used.
    #[arg(long, default_value_t = 2_000_000)]
    lines_max: usize,
    /// Passes over the bodies; the best is reported.
    #[arg(long, default_value_t = 5)]
    passes: u32,
}

/// About the first `lines_max` lines of `path` (the files run to gigabytes).
fn read_lines(path: &std::path::Path, lines_max: usize) -> std::io::Result<Vec<u8>> {
    use std::io::BufRead;
    let mut r = std::io::BufReader::with_capacity(1 << 20, std::fs::File::open(path)?);
    let mut text = Vec::new();
    for _ in 0..lines_max {
        if r.read_until(b'\n', &mut text)? == 0 {
            break;
        }
    }
    Ok(text)
}

/// The file's first `lines_max` lines, cut into bodies of `lines` lines.
fn bodies(text: &[u8], lines: usize, lines_max: usize) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let (mut start, mut pos, mut n, mut total) = (0usize, 0usize, 0usize, 0usize);
    while pos < text.len() && total < lines_max {
        pos = text[pos..]
            .iter()
            .position(|&c| c == b'\n')
            .map_or(text.len(), |i| pos + i + 1);
        n += 1;
        total += 1;
        if n == lines {
            out.push(&text[start..pos]);
            start = pos;
            n = 0;
        }
    }
    if start < pos {
        out.push(&text[start..pos]);
    }
    out
}

pub async fn run(args: PrepareArgs) -> Result<ExitCode, BoxError> {
    let text = read_lines(&args.file, args.lines_max)
        .map_err(|e| format!("reading {}: {e}", args.file.display()))?;
    let bodies = bodies(&text, args.lines.max(1), args.lines_max);
    let lines: usize = bodies
        .iter()
        .map(|b| b.iter().filter(|&&c| c == b'\n').count())
        .sum();
    if lines == 0 {
        return Err(format!("{}: no lines", args.file.display()).into());
    }
    let dir = std::env::temp_dir().join(format!("tidal-bench-prepare-{}", std::process::id()));
    let cluster = Cluster::start(&dir, 1, "127.0.0.1:0").await?;
    let result = measure(&cluster.addr, &bodies, lines, args.passes).await;
    cluster.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
    result?;
    Ok(ExitCode::SUCCESS)
}

async fn measure(addr: &str, bodies: &[&[u8]], lines: usize, passes: u32) -> Result<(), BoxError> {
    let client = Client::connect(addr).await?;
    client
        .execute("CREATE DATABASE bench PRECISION 'ms' VGROUPS 4", "")
        .await?;
    let sl = Schemaless::new(client);
    let opts = SchemalessOptions::default();
    // The first bodies written once, so that the STABLEs exist with every key; every
    // subtable is then taken as existing (`contains`), as for a running feed.
    for b in bodies.iter().take(8) {
        sl.write("bench", std::slice::from_ref(b), &opts)
            .await
            .map_err(|e| e.message)?;
    }
    let contains = |_: &str| true;
    let generation = KnownScope::new_generation();
    let known = Known {
        contains: &contains,
        scope: Some(KnownScope::new(generation, "")),
    };
    // The parser alone over the same bodies (each line's series taken as known, as the
    // conversion asks it), for what the rest of the conversion adds.
    let mut parse_best = f64::INFINITY;
    for _ in 0..passes {
        let t = Instant::now();
        let mut fields = 0usize;
        for b in bodies {
            let mut lines = tidal_lineproto::parse_lines(b);
            let mut line = tidal_lineproto::Line::default();
            while let Some(r) = lines.next_into_known(&mut line, &mut |_| true) {
                if r.is_ok() {
                    fields += line.fields.len();
                }
            }
        }
        std::hint::black_box(fields);
        parse_best = parse_best.min(t.elapsed().as_nanos() as f64 / lines as f64);
    }
    let mut best = f64::INFINITY;
    for pass in 0..passes {
        let t = Instant::now();
        let mut rows = 0usize;
        for b in bodies {
            let p = sl
                .prepare("bench", std::slice::from_ref(b), &opts, &known)
                .await
                .map_err(|e| e.message)?;
            rows += p.blocks.iter().map(|b| b.num_rows()).sum::<usize>();
        }
        let ns = t.elapsed().as_nanos() as f64 / lines as f64;
        best = best.min(ns);
        eprintln!("pass {pass}: {ns:.1} ns/line ({rows} rows)");
    }
    let merge_best = measure_merge(&sl, bodies, lines, &opts, &known, passes).await?;
    println!(
        "prepare: {lines} lines in {} bodies, best {best:.1} ns/line ({:.2}M lines/s); \
         the parser alone {parse_best:.1} ns/line; the merge of {MERGED_BODIES} bodies per \
         vgroup {merge_best:.1} ns/line",
        bodies.len(),
        1e3 / best
    );
    Ok(())
}

/// Bodies whose blocks one merged RPC carries in [`measure_merge`]: the line-protocol
/// benchmark keeps 4 requests in flight, and the frontend's merger sends what they queued
/// for a vgroup together.
const MERGED_BODIES: usize = 4;

/// The best pass of [`merge_blocks`] over the converted bodies, as the merger sends them:
/// for each vgroup, the blocks of [`MERGED_BODIES`] consecutive bodies merged into one per
/// STABLE. In ns per line of the bodies.
async fn measure_merge(
    sl: &Schemaless,
    bodies: &[&[u8]],
    lines: usize,
    opts: &SchemalessOptions,
    known: &Known<'_>,
    passes: u32,
) -> Result<f64, BoxError> {
    // The blocks of each RPC, gathered before the clock starts (the merger gets them so).
    let mut rpcs: Vec<Vec<RowBlock>> = Vec::new();
    for group in bodies.chunks(MERGED_BODIES) {
        let mut by_vgroup: Vec<Vec<RowBlock>> = Vec::new();
        for b in group {
            let p = sl
                .prepare("bench", std::slice::from_ref(b), opts, known)
                .await
                .map_err(|e| e.message)?;
            let (_, vgroups) = p
                .vgroups
                .ok_or("a converted body without its blocks' vgroups")?;
            for (block, vg) in p.blocks.into_iter().zip(vgroups) {
                if by_vgroup.len() <= vg {
                    by_vgroup.resize_with(vg + 1, Vec::new);
                }
                by_vgroup[vg].push(block);
            }
        }
        rpcs.extend(by_vgroup.into_iter().filter(|b| !b.is_empty()));
    }
    let mut best = f64::INFINITY;
    for _ in 0..passes {
        let t = Instant::now();
        let mut rows = 0usize;
        for blocks in &rpcs {
            // Blocks sharing no subtable are sent as they are.
            let merged = merge_blocks(blocks);
            rows += merged
                .as_deref()
                .unwrap_or(blocks)
                .iter()
                .map(RowBlock::num_rows)
                .sum::<usize>();
        }
        std::hint::black_box(rows);
        best = best.min(t.elapsed().as_nanos() as f64 / lines.max(1) as f64);
    }
    Ok(best)
}
