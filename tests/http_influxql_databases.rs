//! InfluxDB 1.x's `/query` for the database statements clients send around their writes:
//! Telegraf's flow (a write to a missing database answers "database not found", Telegraf
//! sends `CREATE DATABASE` as a form body and writes again) works unchanged, the database
//! keeps nanoseconds, `SHOW DATABASES` and `DROP DATABASE` answer in InfluxDB's shape, and
//! everything else gets a clear error without running.

mod common;

use common::{basic_auth, http_request, rows, write_lp, Cluster};

const FORM: (&str, &str) = ("Content-Type", "application/x-www-form-urlencoded");

fn form_q(q: &str) -> String {
    let mut s = String::from("q=");
    for b in q.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' | b'.' => s.push(b as char),
            b' ' => s.push('+'),
            _ => s.push_str(&format!("%{b:02X}")),
        }
    }
    s
}

/// `q=...` for a URL.
fn url_q(q: &str) -> String {
    form_q(q).replace('+', "%20")
}

#[test]
fn telegraf_creates_its_database_and_writes() {
    let c = Cluster::start_with_http(1);
    let http = c.http.clone().expect("http");
    let line = "cpu,host=h1 usage=0.5 1700000000000000123\n";

    // The write names a database that does not exist yet: InfluxDB's words, which Telegraf
    // looks for before it creates the database.
    let (s, b) = write_lp(&http, "telegraf", "", line);
    assert_eq!(s, 404, "{b}");
    assert!(b.contains(r#"database not found: \"telegraf\""#), "{b}");

    let create = form_q(r#"CREATE DATABASE "telegraf""#);
    let (s, b) = http_request(&http, "POST", "/query", &[FORM], create.as_bytes());
    assert_eq!(s, 200, "{b}");
    assert_eq!(b.trim(), r#"{"results":[{"statement_id":0}]}"#);
    // Creating it again is no error (Telegraf sends it at every start).
    let (s, b) = http_request(&http, "POST", "/query", &[FORM], create.as_bytes());
    assert_eq!(s, 200, "{b}");
    assert_eq!(b.trim(), r#"{"results":[{"statement_id":0}]}"#);

    let (s, b) = write_lp(&http, "telegraf", "", line);
    assert_eq!(s, 204, "{b}");
    // Nanoseconds are kept as written.
    assert_eq!(
        rows(&c.ok("telegraf", "SELECT cast(ts as bigint), usage FROM cpu")),
        vec!["1700000000000000123,0.5"]
    );

    // SHOW DATABASES over GET, `q` in the URL.
    let path = format!("/query?{}", url_q("SHOW DATABASES"));
    let (s, b) = http_request(&http, "GET", &path, &[], b"");
    assert_eq!(s, 200, "{b}");
    let v: serde_json::Value = serde_json::from_str(&b).expect("json");
    let series = &v["results"][0]["series"][0];
    assert_eq!(series["name"], "databases");
    assert_eq!(series["columns"], serde_json::json!(["name"]));
    assert!(
        series["values"]
            .as_array()
            .is_some_and(|vs| vs.contains(&serde_json::json!(["telegraf"]))),
        "{b}"
    );

    // Several statements run in order; DROP of a missing database is no error.
    let q = form_q("DROP DATABASE telegraf; drop database never_was; SHOW DATABASES");
    let (s, b) = http_request(&http, "POST", "/query", &[FORM], q.as_bytes());
    assert_eq!(s, 200, "{b}");
    let v: serde_json::Value = serde_json::from_str(&b).expect("json");
    let results = v["results"].as_array().expect("results");
    assert_eq!(results.len(), 3, "{b}");
    assert_eq!(results[1], serde_json::json!({"statement_id": 1}));
    assert!(!b.contains(r#"["telegraf"]"#), "{b}");
    let (s, b) = write_lp(&http, "telegraf", "", line);
    assert_eq!(s, 404, "{b}");
}

#[test]
fn other_statements_and_bad_requests_get_clear_errors() {
    let c = Cluster::start_with_http(1);
    let http = c.http.clone().expect("http");
    let post = |q: &str| http_request(&http, "POST", "/query", &[FORM], form_q(q).as_bytes());

    let (s, b) = post("SELECT * FROM cpu");
    assert_eq!(s, 400, "{b}");
    assert!(
        b.contains("not supported") && b.contains("POST /rest/sql"),
        "{b}"
    );
    // A statement that cannot be parsed stops the request before anything runs.
    let (s, b) = post("CREATE DATABASE a1; CREATE DATABASE a2 WITH DURATION 1d");
    assert_eq!(s, 400, "{b}");
    assert!(b.contains("retention policies are not supported"), "{b}");
    let (s, b) = post(r#"CREATE DATABASE "my-db""#);
    assert_eq!(s, 400, "{b}");
    assert!(b.contains(r#"invalid database name \"my-db\""#), "{b}");
    assert!(!c.ok("", "SHOW DATABASES").contains("a1"));

    // A change needs POST; `q` is required.
    let path = format!("/query?{}", url_q("CREATE DATABASE a3"));
    let (s, b) = http_request(&http, "GET", &path, &[], b"");
    assert_eq!(s, 405, "{b}");
    assert!(b.contains("send it with POST"), "{b}");
    let (s, b) = http_request(&http, "GET", "/query", &[], b"");
    assert_eq!(s, 400, "{b}");
    assert!(b.contains(r#"missing required parameter \"q\""#), "{b}");
    // Credentials are needed as everywhere else.
    let (s, _) = http_request(
        &http,
        "POST",
        "/query",
        &[FORM, ("Authorization", &basic_auth("root", "wrong"))],
        form_q("SHOW DATABASES").as_bytes(),
    );
    assert_eq!(s, 401);

    // A statement that fails ends the request: its error is in its result, the rest do not
    // run.
    c.ok("", "CREATE USER reader PASS 'rpw'");
    let (s, b) = http_request(
        &http,
        "POST",
        "/query",
        &[FORM, ("Authorization", &basic_auth("reader", "rpw"))],
        form_q("CREATE DATABASE r1; CREATE DATABASE r2").as_bytes(),
    );
    assert_eq!(s, 200, "{b}");
    let v: serde_json::Value = serde_json::from_str(&b).expect("json");
    let results = v["results"].as_array().expect("results");
    assert_eq!(results.len(), 1, "{b}");
    assert!(
        results[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("PermissionDenied")),
        "{b}"
    );
    let dbs = c.ok("", "SHOW DATABASES");
    assert!(!dbs.contains("r1") && !dbs.contains("r2"), "{dbs}");
}
