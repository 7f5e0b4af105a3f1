//! `GET /metrics` is well-formed Prometheus text (every sample's family declared once, before
//! its samples; histograms cumulative with `+Inf` = `_count`) and counts what happened: the
//! per-vnode rows-written counters add up to the rows written, WAL bytes and fsyncs follow
//! the writes, FLUSH shows in the flush summary, LAST_ROW in the cache counters, and the
//! frontend counts statements by kind with their latency.

mod common;

use common::{http_request, Cluster};
use std::collections::{HashMap, HashSet};

/// A series' labels (but `le`), sorted.
type LabelSet = Vec<(String, String)>;

/// One sample: metric name, labels, value.
#[derive(Debug, Clone)]
struct Sample {
    name: String,
    labels: HashMap<String, String>,
    value: f64,
}

fn valid_name(n: &str) -> bool {
    let mut chars = n.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// Parses `{k="v",...}` starting after `{`; returns the labels and the rest after `}`.
fn parse_labels(s: &str) -> (HashMap<String, String>, &str) {
    let mut labels = HashMap::new();
    let mut rest = s;
    loop {
        if let Some(r) = rest.strip_prefix('}') {
            return (labels, r);
        }
        let eq = rest.find('=').expect("label without =");
        let key = &rest[..eq];
        assert!(valid_name(key), "bad label name {key:?}");
        let mut chars = rest[eq + 1..].char_indices();
        assert_eq!(
            chars.next().map(|c| c.1),
            Some('"'),
            "label value not quoted"
        );
        let mut value = String::new();
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next().map(|c| c.1) {
                    Some('n') => value.push('\n'),
                    Some(e @ ('\\' | '"')) => value.push(e),
                    other => panic!("bad escape {other:?}"),
                },
                '"' => {
                    end = Some(eq + 1 + i + 1);
                    break;
                }
                c => value.push(c),
            }
        }
        let end = end.expect("unterminated label value");
        assert!(
            labels.insert(key.to_string(), value).is_none(),
            "duplicate label {key}"
        );
        rest = &rest[end..];
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
}

/// Parses and validates an exposition; returns the samples and each family's type.
fn parse(text: &str) -> (Vec<Sample>, HashMap<String, String>) {
    let mut types: HashMap<String, String> = HashMap::new();
    let mut helps = HashSet::new();
    let mut samples = Vec::new();
    for line in text.lines() {
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().expect("name");
            assert!(helps.insert(name.to_string()), "HELP twice for {name}");
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.split(' ');
            let (name, kind) = (parts.next().expect("name"), parts.next().expect("type"));
            assert!(valid_name(name));
            assert!(
                ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                "{line}"
            );
            assert!(
                types.insert(name.to_string(), kind.to_string()).is_none(),
                "TYPE twice for {name}"
            );
            continue;
        }
        assert!(!line.starts_with('#'), "unexpected comment {line}");
        let name_end = line.find(['{', ' ']).expect("sample without value");
        let name = &line[..name_end];
        assert!(valid_name(name), "bad metric name in {line}");
        let (labels, rest) = match line[name_end..].strip_prefix('{') {
            Some(r) => parse_labels(r),
            None => (HashMap::new(), &line[name_end..]),
        };
        let value_text = rest.strip_prefix(' ').expect("space before value");
        let value: f64 = match value_text {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("bad value in {line}")),
        };
        // The family must have been declared before its samples.
        let family = [
            name.strip_suffix("_bucket"),
            name.strip_suffix("_sum"),
            name.strip_suffix("_count"),
        ]
        .into_iter()
        .flatten()
        .find(|f| {
            matches!(
                types.get(*f).map(String::as_str),
                Some("histogram" | "summary")
            )
        })
        .unwrap_or(name);
        let kind = types
            .get(family)
            .unwrap_or_else(|| panic!("sample before its TYPE: {line}"));
        if kind == "counter" || name.ends_with("_count") || name.ends_with("_bucket") {
            assert!(value >= 0.0, "{line}");
        }
        samples.push(Sample {
            name: name.to_string(),
            labels,
            value,
        });
    }
    // Histograms: buckets cumulative, ending in +Inf equal to _count.
    for (family, kind) in &types {
        if kind != "histogram" {
            continue;
        }
        let mut series: HashMap<LabelSet, Vec<(f64, f64)>> = HashMap::new();
        for s in samples
            .iter()
            .filter(|s| s.name == format!("{family}_bucket"))
        {
            let le = s.labels.get("le").expect("bucket without le");
            let le: f64 = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().expect("le")
            };
            let mut key: LabelSet = s
                .labels
                .iter()
                .filter(|(k, _)| *k != "le")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            key.sort();
            series.entry(key).or_default().push((le, s.value));
        }
        for (key, buckets) in series {
            for w in buckets.windows(2) {
                assert!(w[0].0 < w[1].0, "{family} {key:?}: le not increasing");
                assert!(w[0].1 <= w[1].1, "{family} {key:?}: buckets not cumulative");
            }
            let last = buckets.last().expect("buckets");
            assert!(last.0.is_infinite(), "{family} {key:?}: no +Inf bucket");
            let count = samples
                .iter()
                .find(|s| {
                    s.name == format!("{family}_count") && {
                        let mut k: LabelSet = s
                            .labels
                            .iter()
                            .map(|(a, b)| (a.clone(), b.clone()))
                            .collect();
                        k.sort();
                        k == key
                    }
                })
                .unwrap_or_else(|| panic!("{family} {key:?}: no _count"));
            assert_eq!(count.value, last.1, "{family} {key:?}: +Inf != _count");
        }
    }
    (samples, types)
}

fn scrape(http: &str) -> (Vec<Sample>, HashMap<String, String>) {
    let (status, body) = http_request(http, "GET", "/metrics", &[], b"");
    assert_eq!(status, 200, "{body}");
    parse(&body)
}

fn sum(samples: &[Sample], name: &str, db: &str) -> f64 {
    samples
        .iter()
        .filter(|s| s.name == name && s.labels.get("db").map(String::as_str) == Some(db))
        .map(|s| s.value)
        .sum()
}

fn find<'a>(samples: &'a [Sample], name: &str, labels: &[(&str, &str)]) -> Option<&'a Sample> {
    samples.iter().find(|s| {
        s.name == name
            && labels
                .iter()
                .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
    })
}

fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    find(samples, name, labels)
        .unwrap_or_else(|| panic!("no {name} {labels:?}"))
        .value
}

#[test]
fn metrics_count_rows_wal_flushes_cache_and_statements() {
    let c = Cluster::start_with_http(2);
    let http = c.http.clone().expect("http");
    let (before, types) = scrape(&http);
    assert_eq!(types["tidal_vnode_rows_written_total"], "counter");
    assert_eq!(types["tidal_vnode_wal_fsync_duration_seconds"], "histogram");
    assert_eq!(types["tidal_sql_statement_duration_seconds"], "histogram");
    assert_eq!(value(&before, "tidal_mnode_up", &[]), 1.0);
    // A frontend reports only kinds it has seen: none yet is 0.
    let inserts_before = find(
        &before,
        "tidal_sql_statements_total",
        &[("role", "mnode"), ("kind", "insert"), ("result", "ok")],
    )
    .map_or(0.0, |s| s.value);

    c.ok(
        "",
        "CREATE DATABASE mx VGROUPS 4 WAL_LEVEL 2 CACHEMODEL 'last_row'",
    );
    c.ok(
        "mx",
        "CREATE STABLE m (ts TIMESTAMP, v DOUBLE) TAGS (dev VARCHAR(8))",
    );
    // 10 subtables × 25 rows, one INSERT per subtable, through the HTTP frontend.
    let mut rows = 0;
    for t in 0..10 {
        let values: String = (0..25)
            .map(|i| format!("({}, {i}.5) ", 1_451_606_400_000i64 + i * 1000))
            .collect();
        let stmt = format!("INSERT INTO m_{t} USING m TAGS ('d{t}') VALUES {values}");
        let (status, body) = http_request(&http, "POST", "/rest/sql/mx", &[], stmt.as_bytes());
        assert_eq!(status, 200, "{body}");
        rows += 25;
    }
    c.ok("mx", "FLUSH DATABASE mx");
    c.ok("mx", "SELECT LAST_ROW(*) FROM m PARTITION BY tbname");
    // A failing statement is counted as an error of its kind.
    let (status, _) = http_request(&http, "POST", "/rest/sql/mx", &[], b"SELECT nosuch FROM m");
    assert_eq!(status, 400);

    let (after, _) = scrape(&http);
    assert_eq!(
        sum(&after, "tidal_vnode_rows_written_total", "mx"),
        rows as f64,
        "the vnodes' rows-written counters add up to the rows written"
    );
    let vnodes: HashSet<String> = after
        .iter()
        .filter(|s| s.name == "tidal_vnode_rows_written_total" && s.labels["db"] == "mx")
        .map(|s| {
            assert!(s.labels.contains_key("dnode"), "{s:?}");
            s.labels["vgroup"].clone()
        })
        .collect();
    assert_eq!(vnodes.len(), 4, "one series per vnode");
    for d in after.iter().filter(|s| s.name == "tidal_dnode_up") {
        assert_eq!(d.value, 1.0, "{d:?}");
    }
    assert_eq!(
        after.iter().filter(|s| s.name == "tidal_dnode_up").count(),
        2
    );
    // Every vnode that got rows wrote WAL bytes and (WAL_LEVEL 2) fsynced them.
    for s in after
        .iter()
        .filter(|s| s.name == "tidal_vnode_rows_written_total" && s.labels["db"] == "mx")
        .filter(|s| s.value > 0.0)
    {
        let l: Vec<(&str, &str)> = s
            .labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert!(value(&after, "tidal_vnode_wal_written_bytes_total", &l) > 0.0);
        assert!(value(&after, "tidal_vnode_wal_fsync_duration_seconds_count", &l) >= 1.0);
        assert!(value(&after, "tidal_vnode_wal_fsync_duration_seconds_sum", &l) > 0.0);
        assert!(value(&after, "tidal_vnode_flush_duration_seconds_count", &l) >= 1.0);
        assert_eq!(
            value(&after, "tidal_vnode_memtable_bytes", &l),
            0.0,
            "flushed"
        );
    }
    let cache = sum(&after, "tidal_vnode_last_row_cache_hits_total", "mx")
        + sum(&after, "tidal_vnode_last_row_cache_misses_total", "mx");
    assert!(
        cache >= 10.0,
        "LAST_ROW of 10 subtables went through the cache: {cache}"
    );

    let inserts = value(
        &after,
        "tidal_sql_statements_total",
        &[("role", "mnode"), ("kind", "insert"), ("result", "ok")],
    );
    assert!(
        inserts - inserts_before >= 10.0,
        "{inserts_before} -> {inserts}"
    );
    assert!(
        value(
            &after,
            "tidal_sql_statements_total",
            &[("kind", "select"), ("result", "error")]
        ) >= 1.0
    );
    assert!(
        value(
            &after,
            "tidal_sql_statement_duration_seconds_count",
            &[("kind", "insert")]
        ) >= 10.0
    );
}
