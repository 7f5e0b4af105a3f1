//! `GET /metrics`: the cluster's counters in Prometheus text exposition format 0.0.4.
//!
//! Per vnode (labels `db`, `vgroup`, `dnode`): rows written, WAL bytes and fsync latency,
//! memtable bytes, flushes and merges with their durations, last-row cache hits, misses and
//! bytes. They are gathered at scrape time from every data node the mnode lists, with one
//! `DnodeStats` call per node, all at once, each bounded by [`DNODE_TIMEOUT_MS`]: a node that
//! does not answer in time is reported as `tidal_dnode_up{..} 0` and the scrape still answers.
//! Statement counts and latency (label `kind`) come from the SQL frontend of every server
//! process (labels `role`, `endpoint`; [`crate::frontend::metrics`]): the mnode's through the
//! Sql service's `FrontendStats`, each data node's with its `DnodeStats`.

use super::AppState;
use axum::extract::State;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;
use tidal_client::Client;
use tidal_common::{HistogramSnapshot, LATENCY_BOUNDS_SECONDS};
use tidal_proto::v1;

/// How long one data node (and the mnode's node list) may take to answer a scrape.
pub const DNODE_TIMEOUT_MS: u64 = 2_000;

pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// One data node as the scrape saw it.
#[derive(Debug)]
pub struct DnodeScrape {
    pub id: u32,
    pub addr: String,
    /// The node's vnodes and frontend counters, or why it did not answer in time.
    pub result: Result<v1::DnodeStatsResponse, String>,
}

/// What one scrape gathered.
#[derive(Debug)]
pub struct Scrape {
    /// `Err` when the mnode could not list the data nodes.
    pub mnode: Result<(), String>,
    pub mnode_addr: String,
    /// The mnode's frontend counters (empty when it did not answer).
    pub mnode_statements: Vec<v1::StatementStats>,
    pub dnodes: Vec<DnodeScrape>,
}

pub(super) async fn metrics(State(st): State<Arc<AppState>>) -> Response {
    let scrape = gather(&st.client).await;
    let mut resp = render(&scrape).into_response();
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    resp
}

async fn with_timeout<T, E: std::fmt::Display>(
    f: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, String> {
    match tokio::time::timeout(Duration::from_millis(DNODE_TIMEOUT_MS), f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {DNODE_TIMEOUT_MS} ms")),
    }
}

pub async fn gather(client: &Client) -> Scrape {
    let list = with_timeout(async {
        let mut m = client.mnode().map_err(|e| e.to_string())?;
        m.list_dnodes(v1::Empty {})
            .await
            .map_err(|s| tidal_client::ClientError::from(s).to_string())
    });
    let frontend = with_timeout(async {
        let mut sql = client.sql().map_err(|e| e.to_string())?;
        sql.frontend_stats(v1::Empty {})
            .await
            .map_err(|s| tidal_client::ClientError::from(s).to_string())
    });
    let (list, frontend) = tokio::join!(list, frontend);
    let mnode_statements = match frontend {
        Ok(r) => r.into_inner().statements,
        Err(e) => {
            tracing::debug!(error = %e, "metrics: no frontend counters from the mnode");
            Vec::new()
        }
    };
    let mnode_addr = client.mnode_addr().to_string();
    let dnodes = match list {
        Ok(r) => r.into_inner().dnodes,
        Err(e) => {
            tracing::warn!(error = %e, "metrics: cannot list the data nodes");
            return Scrape {
                mnode: Err(e),
                mnode_addr,
                mnode_statements,
                dnodes: Vec::new(),
            };
        }
    };
    let scrapes = dnodes.into_iter().map(|d| async move {
        let result = with_timeout(async {
            let mut c = client.dnode(&d.addr).map_err(|e| e.to_string())?;
            c.dnode_stats(v1::Empty {})
                .await
                .map_err(|s| tidal_client::ClientError::from(s).to_string())
        })
        .await
        .map(|r| r.into_inner());
        if let Err(e) = &result {
            tracing::debug!(dnode = d.id, addr = %d.addr, error = %e, "metrics: data node did not answer");
        }
        DnodeScrape {
            id: d.id,
            addr: d.addr,
            result,
        }
    });
    let mut dnodes = futures::future::join_all(scrapes).await;
    dnodes.sort_by_key(|d| d.id);
    Scrape {
        mnode: Ok(()),
        mnode_addr,
        mnode_statements,
        dnodes,
    }
}

/// Escapes a label value (backslash, double quote and newline, as the format requires).
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Writes the `# HELP` and `# TYPE` lines of a family.
/// A counter family with one sample per data node and value of `key` (two values, as
/// `values` gives them).
fn dnode_family_by(
    out: &mut String,
    scrape: &Scrape,
    name: &str,
    help: &str,
    key: &str,
    values: fn(&v1::DnodeStatsResponse) -> [(&'static str, u64); 2],
) {
    family(out, name, "counter", help);
    for d in &scrape.dnodes {
        if let Ok(r) = &d.result {
            for (value, n) in values(r) {
                let _ = writeln!(
                    out,
                    "{name}{{dnode=\"{}\",endpoint=\"{}\",{key}=\"{value}\"}} {n}",
                    d.id,
                    label(&d.addr),
                );
            }
        }
    }
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// Writes the samples of one histogram: cumulative `_bucket{le=..}`, `_sum` (seconds), `_count`.
/// `labels` is the label list without braces (may be empty).
fn histogram_samples(out: &mut String, name: &str, labels: &str, h: &HistogramSnapshot) {
    let sep = if labels.is_empty() { "" } else { "," };
    let mut cumulative = 0u64;
    for (bound, n) in LATENCY_BOUNDS_SECONDS.iter().zip(h.counts.iter()) {
        cumulative += n;
        let _ = writeln!(
            out,
            "{name}_bucket{{{labels}{sep}le=\"{bound}\"}} {cumulative}"
        );
    }
    let total = h.count();
    let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {total}");
    let _ = writeln!(out, "{name}_sum{{{labels}}} {}", h.sum_nanos as f64 / 1e9);
    let _ = writeln!(out, "{name}_count{{{labels}}} {total}");
}

/// A vnode's statistics with its label list.
struct VnodeSample<'a> {
    labels: String,
    s: &'a v1::VnodeStatsResponse,
}

type Getter = fn(&v1::VnodeStatsResponse) -> u64;

/// Plain per-vnode counters and gauges: name, type, help, value.
const VNODE_SERIES: &[(&str, &str, &str, Getter)] = &[
    (
        "tidal_vnode_rows_written_total",
        "counter",
        "Rows acknowledged by the vnode since it opened.",
        |s| s.rows_written,
    ),
    (
        "tidal_vnode_tables",
        "gauge",
        "Subtables in the vnode.",
        |s| s.tables,
    ),
    (
        "tidal_vnode_memtable_bytes",
        "gauge",
        "Bytes of the active and the frozen memtable.",
        |s| s.mem_bytes,
    ),
    (
        "tidal_vnode_wal_bytes",
        "gauge",
        "Bytes of the WAL files on disk (shrinks when a flush trims the WAL).",
        |s| s.wal_bytes,
    ),
    (
        "tidal_vnode_wal_written_bytes_total",
        "counter",
        "WAL record bytes written since the vnode opened.",
        |s| s.wal_bytes_written,
    ),
    (
        "tidal_vnode_disk_bytes",
        "gauge",
        "Bytes of the committed STT, data, sma and head files and the manifest.",
        |s| s.disk_bytes,
    ),
    (
        "tidal_vnode_stt_files",
        "gauge",
        "STT staging files waiting to be merged.",
        |s| s.stt_files,
    ),
    (
        "tidal_vnode_time_windows",
        "gauge",
        "Time windows (DURATION) holding files.",
        |s| s.windows,
    ),
    (
        "tidal_vnode_flush_written_bytes_total",
        "counter",
        "Bytes of STT files written by flushes.",
        |s| s.flush_bytes,
    ),
    (
        "tidal_vnode_merge_written_bytes_total",
        "counter",
        "Bytes of data, sma and head files written by merges.",
        |s| s.merge_bytes,
    ),
    (
        "tidal_vnode_write_stalls_total",
        "counter",
        "Writers that waited for a flush (back-pressure).",
        |s| s.write_stalls,
    ),
    (
        "tidal_vnode_last_row_cache_hits_total",
        "counter",
        "LAST_ROW/LAST lookups answered by the last-row cache.",
        |s| s.cache_hits,
    ),
    (
        "tidal_vnode_last_row_cache_misses_total",
        "counter",
        "LAST_ROW/LAST lookups that had to load the row from storage.",
        |s| s.cache_misses,
    ),
    (
        "tidal_vnode_last_row_cache_bytes",
        "gauge",
        "Bytes held by the last-row cache.",
        |s| s.cache_bytes,
    ),
    (
        "tidal_vnode_last_row_cache_entries",
        "gauge",
        "Subtables with an entry in the last-row cache.",
        |s| s.cache_entries,
    ),
];

/// The exposition text of a scrape.
pub fn render(scrape: &Scrape) -> String {
    let mut out = String::new();
    family(
        &mut out,
        "tidal_mnode_up",
        "gauge",
        "Whether the mnode listed the data nodes for this scrape.",
    );
    let _ = writeln!(out, "tidal_mnode_up {}", u8::from(scrape.mnode.is_ok()));
    family(
        &mut out,
        "tidal_dnode_up",
        "gauge",
        "Whether the data node answered this scrape in time.",
    );
    for d in &scrape.dnodes {
        let _ = writeln!(
            out,
            "tidal_dnode_up{{dnode=\"{}\",endpoint=\"{}\"}} {}",
            d.id,
            label(&d.addr),
            u8::from(d.result.is_ok())
        );
    }
    dnode_family_by(
        &mut out,
        scrape,
        "tidal_dnode_fragments_total",
        "Query fragments the data node ran on one vnode, by thread: `request` for point lookups run where the call arrived, `pool` for the blocking pool.",
        "thread",
        |r| [("request", r.fragments_inline), ("pool", r.fragments_pooled)],
    );
    dnode_family_by(
        &mut out,
        scrape,
        "tidal_dnode_fragment_calls_total",
        "ExecFragments calls the data node received, by transport: `frames` (fragment frames on plain TCP) or `grpc`.",
        "transport",
        |r| {
            [
                ("frames", r.fragment_calls_frames),
                ("grpc", r.fragment_calls_grpc),
            ]
        },
    );
    dnode_family_by(
        &mut out,
        scrape,
        "tidal_dnode_write_calls_total",
        "Write calls the data node received, by transport: `frames` (WRITE frames on plain TCP) or `grpc`.",
        "transport",
        |r| {
            [
                ("frames", r.write_calls_frames),
                ("grpc", r.write_calls_grpc),
            ]
        },
    );
    for (name, kind, help, get) in [
        (
            "tidal_dnode_frame_connections",
            "gauge",
            "Frame connections (fragment calls and writes) open on the data node.",
            (|r| r.frame_connections) as fn(&v1::DnodeStatsResponse) -> u64,
        ),
        (
            "tidal_dnode_column_cache_bytes",
            "gauge",
            "Bytes held by the data node's decoded-column cache.",
            |r| r.column_cache_bytes,
        ),
        (
            "tidal_dnode_column_cache_max_bytes",
            "gauge",
            "Bound of the decoded-column cache (column_cache_max_bytes; 0: off).",
            |r| r.column_cache_max_bytes,
        ),
        (
            "tidal_dnode_column_cache_hits_total",
            "counter",
            "Column chunks queries found decoded in the cache.",
            |r| r.column_cache_hits,
        ),
        (
            "tidal_dnode_column_cache_misses_total",
            "counter",
            "Column chunks queries had to read and decode.",
            |r| r.column_cache_misses,
        ),
    ] {
        family(&mut out, name, kind, help);
        for d in &scrape.dnodes {
            if let Ok(r) = &d.result {
                let _ = writeln!(
                    out,
                    "{name}{{dnode=\"{}\",endpoint=\"{}\"}} {}",
                    d.id,
                    label(&d.addr),
                    get(r)
                );
            }
        }
    }
    let vnodes: Vec<VnodeSample> = scrape
        .dnodes
        .iter()
        .filter_map(|d| d.result.as_ref().ok().map(|r| (d.id, &r.vnodes)))
        .flat_map(|(id, list)| {
            list.iter().filter_map(move |e| {
                e.stats.as_ref().map(|s| VnodeSample {
                    labels: format!(
                        "db=\"{}\",vgroup=\"{}\",dnode=\"{id}\"",
                        label(&e.db),
                        e.vgroup_id
                    ),
                    s,
                })
            })
        })
        .collect();
    for (name, kind, help, get) in VNODE_SERIES {
        family(&mut out, name, kind, help);
        for v in &vnodes {
            let _ = writeln!(out, "{name}{{{}}} {}", v.labels, get(v.s));
        }
    }
    family(
        &mut out,
        "tidal_vnode_wal_fsync_duration_seconds",
        "histogram",
        "Latency of each WAL fsync (group commit at WAL_LEVEL 2, periodic sync at 1, rotation).",
    );
    for v in &vnodes {
        match HistogramSnapshot::from_counts(&v.s.wal_fsync_buckets, v.s.wal_fsync_nanos_sum) {
            Some(h) => histogram_samples(
                &mut out,
                "tidal_vnode_wal_fsync_duration_seconds",
                &v.labels,
                &h,
            ),
            // A data node built with other bucket bounds: its histogram cannot be merged into
            // this family's buckets, so it is left out rather than misreported.
            None => {
                tracing::debug!(labels = %v.labels, "metrics: WAL fsync buckets of another layout")
            }
        }
    }
    for (name, help, count, micros) in [
        (
            "tidal_vnode_flush_duration_seconds",
            "Memtable flushes to STT files: how many and the time they took.",
            (|s| s.flushes) as Getter,
            (|s| s.flush_micros) as Getter,
        ),
        (
            "tidal_vnode_merge_duration_seconds",
            "Merges of STT files into data files: how many and the time they took.",
            |s| s.merges,
            |s| s.merge_micros,
        ),
    ] {
        family(&mut out, name, "summary", help);
        for v in &vnodes {
            let _ = writeln!(
                out,
                "{name}_sum{{{}}} {}",
                v.labels,
                micros(v.s) as f64 / 1e6
            );
            let _ = writeln!(out, "{name}_count{{{}}} {}", v.labels, count(v.s));
        }
    }
    // Frontends: the mnode's, then each data node's that answered.
    let frontends: Vec<(String, &[v1::StatementStats])> = std::iter::once((
        format!("role=\"mnode\",endpoint=\"{}\"", label(&scrape.mnode_addr)),
        scrape.mnode_statements.as_slice(),
    ))
    .chain(scrape.dnodes.iter().filter_map(|d| {
        d.result.as_ref().ok().map(|r| {
            (
                format!("role=\"dnode\",endpoint=\"{}\"", label(&d.addr)),
                r.statements.as_slice(),
            )
        })
    }))
    .collect();
    family(
        &mut out,
        "tidal_sql_statements_total",
        "counter",
        "SQL statements a node's frontend coordinated, by kind and result.",
    );
    for (node, stats) in &frontends {
        for k in stats.iter() {
            for (result, n) in [("ok", k.ok), ("error", k.errors)] {
                let _ = writeln!(
                    out,
                    "tidal_sql_statements_total{{{node},kind=\"{}\",result=\"{result}\"}} {n}",
                    label(&k.kind)
                );
            }
        }
    }
    family(
        &mut out,
        "tidal_sql_statement_duration_seconds",
        "histogram",
        "Latency of the SQL statements a node's frontend coordinated (failed ones included), by kind.",
    );
    for (node, stats) in &frontends {
        for k in stats.iter() {
            if let Some(h) = HistogramSnapshot::from_counts(&k.latency_buckets, k.latency_nanos_sum)
            {
                histogram_samples(
                    &mut out,
                    "tidal_sql_statement_duration_seconds",
                    &format!("{node},kind=\"{}\"", label(&k.kind)),
                    &h,
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(rows: u64) -> v1::VnodeStatsResponse {
        let mut buckets = vec![0u64; LATENCY_BOUNDS_SECONDS.len() + 1];
        buckets[0] = 2;
        buckets[5] = 1;
        v1::VnodeStatsResponse {
            rows_written: rows,
            wal_fsync_buckets: buckets,
            wal_fsync_nanos_sum: 3_000_000,
            flushes: 2,
            flush_micros: 1_500_000,
            ..Default::default()
        }
    }

    fn statements(kind: &str, ok: u64, errors: u64, slow: u64) -> v1::StatementStats {
        let mut latency_buckets = vec![0u64; LATENCY_BOUNDS_SECONDS.len() + 1];
        latency_buckets[LATENCY_BOUNDS_SECONDS.len()] = slow;
        v1::StatementStats {
            kind: kind.into(),
            ok,
            errors,
            latency_buckets,
            latency_nanos_sum: slow * 20_000_000_000,
        }
    }

    #[test]
    fn renders_vnodes_dead_nodes_and_histograms() {
        let scrape = Scrape {
            mnode: Ok(()),
            mnode_addr: "127.0.0.1:7000".into(),
            mnode_statements: vec![statements("select", 4, 1, 1)],
            dnodes: vec![
                DnodeScrape {
                    id: 1,
                    addr: "127.0.0.1:7001".into(),
                    result: Ok(v1::DnodeStatsResponse {
                        dnode_id: 1,
                        vnodes: vec![v1::VnodeStatsEntry {
                            db: "i\"ot".into(),
                            vgroup_id: 3,
                            stats: Some(stats(42)),
                        }],
                        statements: vec![statements("insert", 7, 0, 0)],
                        fragments_inline: 5,
                        fragments_pooled: 9,
                        fragment_calls_grpc: 2,
                        fragment_calls_frames: 7,
                        frame_connections: 1,
                        write_calls_grpc: 4,
                        write_calls_frames: 6,
                        column_cache_bytes: 4096,
                        column_cache_max_bytes: 65536,
                        column_cache_hits: 12,
                        column_cache_misses: 3,
                    }),
                },
                DnodeScrape {
                    id: 2,
                    addr: "127.0.0.1:7002".into(),
                    result: Err("refused".into()),
                },
            ],
        };
        let text = render(&scrape);
        let has = |line: &str| assert!(text.lines().any(|l| l == line), "{line}\n{text}");
        let labels = r#"db="i\"ot",vgroup="3",dnode="1""#;
        has(r#"tidal_dnode_up{dnode="1",endpoint="127.0.0.1:7001"} 1"#);
        has(r#"tidal_dnode_up{dnode="2",endpoint="127.0.0.1:7002"} 0"#);
        has(
            r#"tidal_dnode_fragments_total{dnode="1",endpoint="127.0.0.1:7001",thread="request"} 5"#,
        );
        has(r#"tidal_dnode_fragments_total{dnode="1",endpoint="127.0.0.1:7001",thread="pool"} 9"#);
        has(
            r#"tidal_dnode_fragment_calls_total{dnode="1",endpoint="127.0.0.1:7001",transport="frames"} 7"#,
        );
        has(
            r#"tidal_dnode_fragment_calls_total{dnode="1",endpoint="127.0.0.1:7001",transport="grpc"} 2"#,
        );
        has(
            r#"tidal_dnode_write_calls_total{dnode="1",endpoint="127.0.0.1:7001",transport="frames"} 6"#,
        );
        has(
            r#"tidal_dnode_write_calls_total{dnode="1",endpoint="127.0.0.1:7001",transport="grpc"} 4"#,
        );
        has(r#"tidal_dnode_frame_connections{dnode="1",endpoint="127.0.0.1:7001"} 1"#);
        has(r#"tidal_dnode_column_cache_bytes{dnode="1",endpoint="127.0.0.1:7001"} 4096"#);
        has(r#"tidal_dnode_column_cache_hits_total{dnode="1",endpoint="127.0.0.1:7001"} 12"#);
        has(r#"tidal_dnode_column_cache_misses_total{dnode="1",endpoint="127.0.0.1:7001"} 3"#);
        has(&format!("tidal_vnode_rows_written_total{{{labels}}} 42"));
        has(&format!(
            "tidal_vnode_wal_fsync_duration_seconds_bucket{{{labels},le=\"0.00005\"}} 2"
        ));
        has(&format!(
            "tidal_vnode_wal_fsync_duration_seconds_bucket{{{labels},le=\"0.0025\"}} 3"
        ));
        has(&format!(
            "tidal_vnode_wal_fsync_duration_seconds_bucket{{{labels},le=\"+Inf\"}} 3"
        ));
        has(&format!(
            "tidal_vnode_wal_fsync_duration_seconds_sum{{{labels}}} 0.003"
        ));
        has(&format!(
            "tidal_vnode_flush_duration_seconds_sum{{{labels}}} 1.5"
        ));
        has(&format!(
            "tidal_vnode_flush_duration_seconds_count{{{labels}}} 2"
        ));
        let mnode = r#"role="mnode",endpoint="127.0.0.1:7000""#;
        has(&format!(
            "tidal_sql_statements_total{{{mnode},kind=\"select\",result=\"error\"}} 1"
        ));
        has(&format!(
            "tidal_sql_statement_duration_seconds_bucket{{{mnode},kind=\"select\",le=\"10\"}} 0"
        ));
        has(&format!(
            "tidal_sql_statement_duration_seconds_bucket{{{mnode},kind=\"select\",le=\"+Inf\"}} 1"
        ));
        has(&format!(
            "tidal_sql_statement_duration_seconds_sum{{{mnode},kind=\"select\"}} 20"
        ));
        has(
            r#"tidal_sql_statements_total{role="dnode",endpoint="127.0.0.1:7001",kind="insert",result="ok"} 7"#,
        );
        // Every family is declared once, before its samples.
        let types = text.lines().filter(|l| l.starts_with("# TYPE ")).count();
        let helps = text.lines().filter(|l| l.starts_with("# HELP ")).count();
        assert_eq!(types, helps);
        assert_eq!(types, VNODE_SERIES.len() + 15);
    }

    #[test]
    fn a_dead_mnode_still_renders() {
        let text = render(&Scrape {
            mnode: Err("down".into()),
            mnode_addr: "127.0.0.1:7000".into(),
            mnode_statements: Vec::new(),
            dnodes: Vec::new(),
        });
        assert!(text.contains("\ntidal_mnode_up 0\n"), "{text}");
    }
}
