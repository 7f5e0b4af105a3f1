//! Query answers in a form the engines can be compared on: rows of normalised cells
//! (timestamps as epoch ms, numbers to 6 significant digits, NULL spelled one way), and the
//! cross-engine check of `bench run` ([`compare`]): which query types' answers agree, and how
//! they differ when they do not.
//!
//! Where the engines' result columns differ (PostgreSQL and ClickHouse return `name` in
//! single-last-loc, and `fleet` in avg-vs-projected-fuel-consumption, where Tidal's TDengine
//! forms do not), those columns are dropped before comparing. InfluxQL's TSBS forms compute
//! something else for most types (last-loc returns the *first* point, and so on: see the
//! tsbs crate's `queries` module), so InfluxDB is compared on avg-vs-projected-fuel-consumption
//! only, where the semantics agree.

use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use tidal_common::{Batch, Precision, Value};
use tidal_tsbs::QueryType;

/// A normalised result set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    pub rows: Vec<Vec<String>>,
}

impl Answer {
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn from_batch(b: &Batch) -> Answer {
        let rows = (0..b.num_rows())
            .map(|r| b.row(r).iter().map(value_cell).collect())
            .collect();
        Answer { rows }
    }

    /// Tab-separated text, one row a line (ClickHouse TSV with `\N`, psql -At with `\t`).
    pub fn from_tsv(text: &str) -> Answer {
        let rows = text
            .lines()
            .filter(|l| !l.is_empty())
            .map(|l| l.split('\t').map(text_cell).collect())
            .collect();
        Answer { rows }
    }

    /// InfluxDB 1.x `/query` JSON (epoch=ms): per series, the tag values (sorted by key) then
    /// the values of every column but `time`.
    pub fn from_influx_json(v: &serde_json::Value) -> Result<Answer, String> {
        let mut rows = Vec::new();
        let results = v
            .get("results")
            .and_then(|r| r.as_array())
            .ok_or("no results in the InfluxDB response")?;
        for res in results {
            if let Some(e) = res.get("error").and_then(|e| e.as_str()) {
                return Err(format!("InfluxDB: {e}"));
            }
            let Some(series) = res.get("series").and_then(|s| s.as_array()) else {
                continue;
            };
            for s in series {
                let mut tags: Vec<(String, String)> = s
                    .get("tags")
                    .and_then(|t| t.as_object())
                    .map(|o| o.iter().map(|(k, v)| (k.clone(), json_cell(v))).collect())
                    .unwrap_or_default();
                tags.sort();
                let cols: Vec<String> = s
                    .get("columns")
                    .and_then(|c| c.as_array())
                    .map(|c| {
                        c.iter()
                            .map(|x| x.as_str().unwrap_or("").to_string())
                            .collect()
                    })
                    .unwrap_or_default();
                for vals in s
                    .get("values")
                    .and_then(|v| v.as_array())
                    .into_iter()
                    .flatten()
                {
                    let mut row: Vec<String> = tags.iter().map(|(_, v)| v.clone()).collect();
                    for (c, x) in cols.iter().zip(vals.as_array().into_iter().flatten()) {
                        if c != "time" {
                            row.push(json_cell(x));
                        }
                    }
                    rows.push(row);
                }
            }
        }
        Ok(Answer { rows })
    }
}

fn num_cell(x: f64) -> String {
    if x == 0.0 {
        return "0".into();
    }
    format!("{x:.5e}")
}

fn value_cell(v: &Value) -> String {
    match v {
        Value::Null => "NULL".into(),
        Value::Bool(b) => num_cell(*b as i64 as f64),
        Value::Int(i) => num_cell(*i as f64),
        Value::UInt(u) => num_cell(*u as f64),
        Value::Float(f) => num_cell(*f),
        Value::Str(s) => s.clone(),
        Value::Timestamp(t) => format!("t:{t}"),
    }
}

fn text_cell(s: &str) -> String {
    let s = s.trim();
    if s.is_empty() || s == "\\N" {
        return "NULL".into();
    }
    if s.len() >= 19 && s.as_bytes().get(4) == Some(&b'-') && s.as_bytes().get(10) == Some(&b' ') {
        if let Some(t) = Precision::Millis.parse_timestamp(s) {
            return format!("t:{t}");
        }
    }
    match s.parse::<f64>() {
        Ok(x) if s.bytes().any(|b| b.is_ascii_digit()) => num_cell(x),
        _ => s.to_string(),
    }
}

fn json_cell(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => "NULL".into(),
        serde_json::Value::Number(n) => n.as_f64().map(num_cell).unwrap_or_default(),
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Bool(b) => num_cell(*b as i64 as f64),
        other => other.to_string(),
    }
}

/// Columns an engine returns beyond Tidal's, dropped before comparing.
fn extra_column(engine: &str, q: QueryType) -> Option<usize> {
    if engine == "tidal" {
        return None;
    }
    match q {
        QueryType::SingleLastLoc => Some(1),
        QueryType::AvgVsProjectedFuelConsumption => Some(0),
        _ => None,
    }
}

impl Answer {
    /// Rows of JSON cells (numbers, strings, timestamps as `YYYY-MM-DD HH:MM:SS[.fff]`, null).
    pub fn from_json_rows(rows: &[Vec<serde_json::Value>]) -> Answer {
        let rows = rows
            .iter()
            .map(|r| {
                r.iter()
                    .map(|v| match v {
                        serde_json::Value::String(s) => text_cell(s),
                        other => json_cell(other),
                    })
                    .collect()
            })
            .collect();
        Answer { rows }
    }
}

/// `engine`'s answer to `q` with the columns Tidal's form lacks dropped, rows sorted.
pub fn canonical_for(engine: &str, q: QueryType, a: &Answer) -> Answer {
    Answer {
        rows: canonical(engine, q, a),
    }
}

/// Whether `engine`'s form of `q` computes what Tidal's does.
pub fn comparable(engine: &str, q: QueryType) -> bool {
    match engine {
        "influxdb" => q == QueryType::AvgVsProjectedFuelConsumption,
        "victoria" => false,
        _ => true,
    }
}

fn canonical(engine: &str, q: QueryType, a: &Answer) -> Vec<Vec<String>> {
    let mut rows: Vec<Vec<String>> = a
        .rows
        .iter()
        .map(|r| {
            let mut r = r.clone();
            if let Some(i) = extra_column(engine, q) {
                if i < r.len() {
                    r.remove(i);
                }
            }
            r
        })
        .collect();
    rows.sort();
    rows
}

/// The check of one query type across the engines that answered it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Check {
    pub query: String,
    /// Engines compared with the reference (Tidal), and whether each agreed.
    pub engines: Vec<(String, bool)>,
    /// What differed, per disagreeing engine.
    pub notes: Vec<String>,
    /// Whether the peers that differ from Tidal agree with one another (then the difference
    /// is one of semantics, e.g. per-row vs per-subtable tags, rather than a wrong answer).
    pub peers_agree: Option<bool>,
}

/// Compares every engine's answer with Tidal's (`answers`: engine name → answer).
pub fn compare(q: QueryType, answers: &[(String, Answer)]) -> Option<Check> {
    let (_, reference) = answers.iter().find(|(e, _)| e == "tidal")?;
    let want = canonical("tidal", q, reference);
    let mut check = Check {
        query: q.name().to_string(),
        engines: Vec::new(),
        notes: Vec::new(),
        peers_agree: None,
    };
    let mut peer_answers: Vec<Vec<Vec<String>>> = Vec::new();
    for (engine, a) in answers {
        if engine == "tidal" || !comparable(engine, q) {
            continue;
        }
        let got = canonical(engine, q, a);
        let same = got == want;
        if !same && engine != "influxdb" {
            peer_answers.push(got.clone());
        }
        check.engines.push((engine.clone(), same));
        if !same {
            // Sets: answers run to 100,000s of rows at a million trucks.
            let (got_set, want_set): (HashSet<&Vec<String>>, HashSet<&Vec<String>>) =
                (got.iter().collect(), want.iter().collect());
            let missing: Vec<&Vec<String>> = want.iter().filter(|r| !got_set.contains(r)).collect();
            let extra: Vec<&Vec<String>> = got.iter().filter(|r| !want_set.contains(r)).collect();
            let mut note = format!(
                "{engine}: {} rows vs Tidal's {}; {} of Tidal's rows not in {engine}'s, {} of {engine}'s not in Tidal's",
                got.len(),
                want.len(),
                missing.len(),
                extra.len()
            );
            if let Some(r) = missing.first() {
                note.push_str(&format!("; e.g. Tidal [{}]", r.join(", ")));
            }
            if let Some(r) = extra.first() {
                note.push_str(&format!(", {engine} [{}]", r.join(", ")));
            }
            check.notes.push(note);
        }
    }
    if peer_answers.len() >= 2 {
        check.peers_agree = Some(peer_answers.windows(2).all(|w| w[0] == w[1]));
    }
    (!check.engines.is_empty()).then_some(check)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_normalise_across_engines() {
        let tsv = Answer::from_tsv("2016-01-01 23:59:50\ttruck_1\t\\N\t0.1000\n");
        let pg = Answer::from_tsv("2016-01-01 23:59:50+00\ttruck_1\t\t0.1\n");
        assert_eq!(tsv, pg);
        assert_eq!(tsv.rows[0][0], format!("t:{}", 1_451_692_790_000i64));
        assert_eq!(value_cell(&Value::Int(3)), text_cell("3.0"));
        let json: serde_json::Value = serde_json::from_str(
            r#"{"results":[{"series":[{"name":"readings","tags":{"fleet":"East"},"columns":["time","a","b"],"values":[[0,1.5,2]]}]}]}"#,
        )
        .unwrap();
        let a = Answer::from_influx_json(&json).unwrap();
        assert_eq!(
            a.rows,
            vec![vec!["East".to_string(), num_cell(1.5), num_cell(2.0)]]
        );
    }

    #[test]
    fn compare_drops_extra_columns_and_reports_differences() {
        let q = QueryType::AvgVsProjectedFuelConsumption;
        let tidal = Answer {
            rows: vec![vec!["1".into(), "2".into()]],
        };
        let pg = Answer {
            rows: vec![vec!["East".into(), "1".into(), "2".into()]],
        };
        let ch = Answer {
            rows: vec![vec!["East".into(), "1".into(), "3".into()]],
        };
        let c = compare(
            q,
            &[
                ("tidal".into(), tidal),
                ("postgres".into(), pg),
                ("clickhouse".into(), ch),
            ],
        )
        .unwrap();
        assert_eq!(
            c.engines,
            vec![("postgres".into(), true), ("clickhouse".into(), false)]
        );
        assert_eq!(c.notes.len(), 1);
    }
}
