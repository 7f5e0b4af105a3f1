//! PNG charts of a `bench run` (the plotters crate, bitmap backend only): ingest rate, bytes
//! on disk, and warm p50 latency per query type. Text goes through plotters' `ab_glyph`
//! renderer with a TrueType font read at run time (DejaVu Sans or Liberation Sans from the
//! usual system paths, or the file named by `TIDAL_BENCH_FONT`), so no font library is linked;
//! without a font the charts are drawn without text and the report says so.

use super::report::{human_bytes, Results};
use plotters::prelude::*;
use plotters::style::FontStyle;
use std::path::Path;
use std::sync::OnceLock;

const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation-sans/LiberationSans-Regular.ttf",
];

/// Registers a font for the "sans-serif" family once; false when none could be loaded.
fn font_ready() -> bool {
    static READY: OnceLock<bool> = OnceLock::new();
    *READY.get_or_init(|| {
        let mut candidates: Vec<String> = std::env::var("TIDAL_BENCH_FONT").into_iter().collect();
        candidates.extend(FONT_PATHS.iter().map(|s| s.to_string()));
        for p in candidates {
            if let Ok(bytes) = std::fs::read(&p) {
                // plotters keeps fonts for the life of the process; leaking one file is fine.
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    return true;
                }
            }
        }
        false
    })
}

const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// A horizontal bar chart: one group per row, one bar per series in each group.
struct Bars<'a> {
    title: &'a str,
    series: &'a [String],
    rows: Vec<(String, Vec<Option<f64>>)>,
    /// Log scale (latencies spanning orders of magnitude).
    log: bool,
    fmt: &'a dyn Fn(f64) -> String,
}

fn draw(path: &Path, b: &Bars) -> Result<(), String> {
    let text = font_ready();
    let per_group = b.series.len().max(1) as i32;
    let bar_h = 14;
    let group_h = per_group * bar_h + 10;
    let top = 60;
    let (w, h) = (1000i32, top + b.rows.len() as i32 * group_h + 20);
    let err = |e: DrawingAreaErrorKind<_>| format!("drawing {}: {e:?}", path.display());
    let root = BitMapBackend::new(path, (w as u32, h as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let label_w = 260;
    let plot_w = w - label_w - 130;
    let values: Vec<f64> = b
        .rows
        .iter()
        .flat_map(|(_, v)| v.iter().flatten().copied())
        .filter(|v| *v > 0.0)
        .collect();
    let max = values.iter().copied().fold(0.0, f64::max);
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let scale = |v: f64| -> i32 {
        if v <= 0.0 || max <= 0.0 {
            return 0;
        }
        if b.log {
            let lo = (min / 2.0).log10();
            let hi = max.log10();
            let f = if hi > lo {
                (v.log10() - lo) / (hi - lo)
            } else {
                1.0
            };
            (f.clamp(0.0, 1.0) * plot_w as f64) as i32
        } else {
            (v / max * plot_w as f64) as i32
        }
    };
    let font = |size: i32| ("sans-serif", size).into_font();
    if text {
        root.draw(&Text::new(b.title.to_string(), (10, 10), font(20)))
            .map_err(err)?;
        let mut x = 10;
        for (i, s) in b.series.iter().enumerate() {
            let c = COLORS[i % COLORS.len()];
            root.draw(&Rectangle::new([(x, 40), (x + 12, 52)], c.filled()))
                .map_err(err)?;
            root.draw(&Text::new(s.clone(), (x + 16, 39), font(14)))
                .map_err(err)?;
            x += 30 + 9 * s.len() as i32;
        }
    }
    for (g, (label, vals)) in b.rows.iter().enumerate() {
        let y0 = top + g as i32 * group_h;
        if text {
            root.draw(&Text::new(
                label.clone(),
                (10, y0 + group_h / 2 - 9),
                font(14),
            ))
            .map_err(err)?;
        }
        for (i, v) in vals.iter().enumerate() {
            let y = y0 + i as i32 * bar_h;
            let c = COLORS[i % COLORS.len()];
            let Some(v) = v else { continue };
            let len = scale(*v).max(1);
            root.draw(&Rectangle::new(
                [(label_w, y), (label_w + len, y + bar_h - 2)],
                c.filled(),
            ))
            .map_err(err)?;
            if text {
                root.draw(&Text::new((b.fmt)(*v), (label_w + len + 4, y), font(12)))
                    .map_err(err)?;
            }
        }
    }
    root.present().map_err(err)?;
    Ok(())
}

/// Writes the charts into `dir`; returns their file names and whether text was rendered.
pub fn write_all(r: &Results, dir: &Path) -> Result<(Vec<String>, bool), String> {
    let mut out = Vec::new();
    let one = vec!["".to_string()];
    let ingest: Vec<(String, Vec<Option<f64>>)> = r
        .engines
        .iter()
        .filter_map(|e| {
            e.ingest
                .as_ref()
                .map(|i| (e.name.clone(), vec![Some(i.rows_per_s)]))
        })
        .collect();
    if !ingest.is_empty() {
        draw(
            &dir.join("ingest.png"),
            &Bars {
                title: "Ingest rate, rows/s (higher is better)",
                series: &one,
                rows: ingest,
                log: false,
                fmt: &|v| format!("{v:.0} rows/s"),
            },
        )?;
        out.push("ingest.png".to_string());
    }
    let disk: Vec<(String, Vec<Option<f64>>)> = r
        .engines
        .iter()
        .filter_map(|e| e.disk_bytes.map(|b| (e.name.clone(), vec![Some(b as f64)])))
        .collect();
    if !disk.is_empty() {
        draw(
            &dir.join("disk.png"),
            &Bars {
                title: "Bytes on disk after settling (lower is better)",
                series: &one,
                rows: disk,
                log: false,
                fmt: &|v| human_bytes(v as u64),
            },
        )?;
        out.push("disk.png".to_string());
    }
    let engines: Vec<&super::report::EngineResult> =
        r.engines.iter().filter(|e| !e.queries.is_empty()).collect();
    if !engines.is_empty() {
        let series: Vec<String> = engines.iter().map(|e| e.name.clone()).collect();
        let rows = tidal_tsbs::QueryType::all()
            .iter()
            .map(|t| {
                let vals = engines
                    .iter()
                    .map(|e| {
                        e.queries
                            .iter()
                            .find(|x| x.query == t.name() && x.error.is_none())
                            .and_then(|x| x.p50_ms)
                    })
                    .collect();
                (t.name().to_string(), vals)
            })
            .collect();
        draw(
            &dir.join("queries_p50.png"),
            &Bars {
                title: "Warm p50 query latency, ms, log scale (lower is better)",
                series: &series,
                rows,
                log: true,
                fmt: &|v| format!("{v:.1} ms"),
            },
        )?;
        out.push("queries_p50.png".to_string());
    }
    Ok((out, font_ready()))
}
