//! A line-protocol body with malformed lines and a type conflict: the HTTP API answers 400
//! with an InfluxDB-style JSON error naming each bad line (number, column, what was wrong),
//! and every good line is written. Also: unknown database → 404, missing db → 400,
//! `/ping` → 204, `/health` → 200.

mod common;

use common::{http_request, rows, write_lp, Cluster};

#[test]
fn bad_lines_are_reported_and_good_lines_written() {
    let c = Cluster::start_with_http(2);
    let http = c.http.clone().expect("mnode printed its HTTP address");
    assert_eq!(http_request(&http, "GET", "/ping", &[], b"").0, 204);
    let (status, body) = http_request(&http, "GET", "/health", &[], b"");
    assert_eq!(status, 200);
    assert!(body.contains("\"status\":\"pass\""), "{body}");

    let (status, body) = write_lp(&http, "nope", "", "m f=1 1\n");
    assert_eq!(status, 404, "{body}");
    assert!(body.contains(r#"database not found: \"nope\""#), "{body}");
    let (status, body) = http_request(&http, "POST", "/write", &[], b"m f=1");
    assert_eq!(status, 400);
    assert!(body.contains("?db=NAME"), "{body}");

    c.ok("", "CREATE DATABASE lp PRECISION 'ms'");
    let body = [
        "cpu,host=a usage=1.5 1000",   // 1 ok
        "cpu,host=a usage=",           // 2 missing value
        "# a comment",                 // 3 skipped
        "cpu,host=b usage=2 1000",     // 4 ok
        "cpu,host usage=3 1000",       // 5 tag without '='
        "cpu,host=a usage=\"x\" 2000", // 6 type conflict (usage is DOUBLE)
        "cpu,host=a usage=4 abc",      // 7 bad timestamp
        "",                            // 8 blank
        "cpu,host=c usage=5 3000",     // 9 ok
        "9cpu f=1 1000",               // 10 not a STABLE name
        "cpu,host=a usage=6 2000",     // 11 ok
    ]
    .join("\n");
    let (status, resp) = write_lp(&http, "lp", "&precision=ms", &body);
    assert_eq!(status, 400, "{resp}");
    let json: serde_json::Value = serde_json::from_str(&resp).expect("JSON error body");
    let msg = json["error"].as_str().expect("error string");
    assert!(
        msg.starts_with("partial write: 5 line(s) rejected, 4 row(s) written"),
        "{msg}"
    );
    let lines: Vec<(u64, String)> = json["line_errors"]
        .as_array()
        .expect("line_errors")
        .iter()
        .map(|e| {
            (
                e["line"].as_u64().unwrap(),
                e["error"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let numbers: Vec<u64> = lines.iter().map(|l| l.0).collect();
    assert_eq!(numbers, vec![2, 5, 6, 7, 10], "{lines:?}");
    assert!(
        lines[0]
            .1
            .contains("column 18: missing value for field 'usage'"),
        "{lines:?}"
    );
    assert!(
        lines[1].1.contains("missing '=' after tag key 'host'"),
        "{lines:?}"
    );
    assert!(
        lines[2]
            .1
            .contains("field 'usage' is string but the column is DOUBLE"),
        "{lines:?}"
    );
    assert!(lines[3].1.contains("invalid timestamp 'abc'"), "{lines:?}");
    assert!(
        lines[4]
            .1
            .contains("measurement '9cpu' cannot be a STABLE name"),
        "{lines:?}"
    );

    let out = rows(&c.ok("lp", "SELECT host, ts, usage FROM cpu ORDER BY host, ts"));
    assert_eq!(
        out,
        vec![
            "a,1970-01-01 00:00:01.000,1.5",
            "a,1970-01-01 00:00:02.000,6",
            "b,1970-01-01 00:00:01.000,2",
            "c,1970-01-01 00:00:03.000,5",
        ],
        "{out:?}"
    );
}
