//! Lines of series the frontend already knows (their rows go straight onto their vgroup's
//! block, `prepare_known_schemas` in `src/frontend/schemaless.rs`) that fail to convert are
//! rejected one by one, with the reconciling path's messages, and leave nothing behind: no
//! empty subtable listed, no half row. The series' other lines in the same body, before and
//! after the bad one, are written.

mod common;

use common::{rows, write_lp, Cluster};

const SERIES: usize = 40;

/// Line `round` of series `s`: `v` is BIGINT, `w` DOUBLE, `s` a string (NCHAR).
fn good(s: usize, round: usize) -> String {
    format!(
        "m,dev=d{s:02},site=s{} v={round}i,w={s}.5,s=\"r{round}\" {}\n",
        s % 3,
        round + 1
    )
}

/// A bad line of series `s`: a string for the BIGINT column, or a float for it.
fn bad(s: usize, round: usize) -> String {
    let v = if s % 2 == 0 { "\"x\"" } else { "1.5" };
    format!("m,dev=d{s:02},site=s{} v={v},w=1.5 {}\n", s % 3, round + 1)
}

#[test]
fn bad_lines_of_known_series_are_rejected_alone() {
    let c = Cluster::start_with_http(2);
    let http = c.http.clone().expect("http");
    c.ok("", "CREATE DATABASE kb PRECISION 'ms' VGROUPS 4");
    // Round 0 creates the STABLE and every subtable; rounds 1-2 are written by series the
    // frontend knows (its thread map), in orders unlike round 0's.
    let first: String = (0..SERIES).map(|s| good(s, 0)).collect();
    let (st, b) = write_lp(&http, "kb", "&precision=s", &first);
    assert_eq!(st, 204, "{b}");
    let mut want_rejected = Vec::new();
    for round in 1..=2 {
        let mut body = String::new();
        let mut line = 0;
        for i in 0..SERIES {
            let s = (i * 7 + round * 11) % SERIES;
            // Every fifth series: a bad line first (the series' first line in the body),
            // then its good line. Every seventh: a good line, then a bad one at a later ts.
            if s % 5 == 0 {
                body.push_str(&bad(s, round + 10));
                line += 1;
                want_rejected.push((round, line));
            }
            body.push_str(&good(s, round));
            line += 1;
            if s % 7 == 3 {
                body.push_str(&bad(s, round + 20));
                line += 1;
                want_rejected.push((round, line));
            }
        }
        let (st, resp) = write_lp(&http, "kb", "&precision=s", &body);
        assert_eq!(st, 400, "round {round}: {resp}");
        let json: serde_json::Value = serde_json::from_str(&resp).expect("JSON error body");
        let errors = json["line_errors"].as_array().expect("line_errors");
        let got: Vec<(usize, usize)> = errors
            .iter()
            .map(|e| (round, e["line"].as_u64().expect("line") as usize))
            .collect();
        let want: Vec<(usize, usize)> = want_rejected
            .iter()
            .copied()
            .filter(|(r, _)| *r == round)
            .collect();
        assert_eq!(got, want, "{resp}");
        for e in errors {
            let msg = e["error"].as_str().expect("error");
            assert!(
                msg.contains("field 'v' is string but the column is BIGINT")
                    || msg.contains("field 'v' is float but the column is BIGINT"),
                "{msg}"
            );
        }
        let head = json["error"].as_str().expect("error");
        let written = format!("{} row(s) written", SERIES);
        assert!(head.contains(&written), "{head}");
    }
    // Each series: its three good rows, with its tags, and nothing of the bad lines.
    assert_eq!(rows(&c.ok("kb", "SHOW TABLES")).len(), SERIES);
    let per = rows(&c.ok(
        "kb",
        "SELECT dev, site, COUNT(*), SUM(v), MIN(w), MAX(w), LAST(s) FROM m GROUP BY dev, site ORDER BY dev",
    ));
    let want: Vec<String> = (0..SERIES)
        .map(|s| format!("d{s:02},s{},3,3,{s}.5,{s}.5,r2", s % 3))
        .collect();
    assert_eq!(per, want);
}
