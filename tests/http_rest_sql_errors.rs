//! `POST /rest/sql` failures: `{"code": <nonzero>, "desc": <message>}` with an HTTP status
//! that says what went wrong (a syntax error names its position), for bad statements, unknown
//! names, empty or multi-statement bodies, bodies over the statement limit and non-UTF-8 text.

mod common;

use common::{http_request, Cluster};
use serde_json::Value;

fn post(http: &str, path: &str, body: &[u8]) -> (u16, Value) {
    let (status, text) = http_request(http, "POST", path, &[], body);
    let v = serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    (status, v)
}

/// Sends only the headers of a POST whose `Content-Length` is `len`, and reads the answer.
fn declared_length_only(http: &str, path: &str, len: usize) -> (u16, Value) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(http).expect("connect");
    s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .expect("timeout");
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: {http}\r\nConnection: close\r\nAuthorization: {}\r\nContent-Length: {len}\r\n\r\n",
        common::ROOT_BASIC_AUTH
    );
    s.write_all(req.as_bytes()).expect("write");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    let status = out
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("status");
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// Checks the error shape and returns (status, code, desc).
fn error(http: &str, path: &str, body: &[u8]) -> (u16, u64, String) {
    let (status, v) = post(http, path, body);
    let obj = v.as_object().expect("object");
    assert_eq!(obj.len(), 2, "only code and desc: {v}");
    let code = v["code"].as_u64().expect("code");
    assert_ne!(code, 0, "{v}");
    let desc = v["desc"].as_str().expect("desc").to_string();
    assert!(!desc.is_empty());
    (status, code, desc)
}

#[test]
fn rest_sql_errors_are_clear() {
    let c = Cluster::start_with_http(1);
    let http = c.http.clone().expect("http");
    c.ok("", "CREATE DATABASE e");
    c.ok(
        "e",
        "CREATE STABLE m (ts TIMESTAMP, v DOUBLE) TAGS (loc VARCHAR(8))",
    );

    // A syntax error names line and column.
    let (status, _, desc) = error(&http, "/rest/sql/e", b"SELECT * FORM m");
    assert_eq!(status, 400);
    assert!(desc.contains("syntax error at 1:"), "{desc}");

    // Unknown names.
    let (status, _, desc) = error(&http, "/rest/sql/e", b"SELECT * FROM nosuch");
    assert_eq!(status, 404, "{desc}");
    assert!(desc.contains("nosuch"), "{desc}");
    let (status, _, desc) = error(&http, "/rest/sql/nodb", b"SELECT * FROM m");
    assert_eq!(status, 404, "{desc}");
    assert!(desc.contains("nodb"), "{desc}");
    let (status, _, desc) = error(&http, "/rest/sql/e", b"SELECT nosuchcol FROM m");
    assert_eq!(status, 400, "{desc}");
    assert!(desc.contains("nosuchcol"), "{desc}");

    // Bodies that are not one statement.
    let (status, _, desc) = error(&http, "/rest/sql", b"  -- only a comment\n ;");
    assert_eq!(status, 400);
    assert!(desc.contains("empty"), "{desc}");
    let (status, _, desc) = error(&http, "/rest/sql/e", b"SELECT 1 FROM m; SELECT 2 FROM m");
    assert_eq!(status, 400);
    assert!(desc.contains("2 statements"), "{desc}");
    let (status, _, desc) = error(&http, "/rest/sql/e", b"SELECT '\xff' FROM m");
    assert_eq!(status, 400);
    assert!(desc.contains("UTF-8"), "{desc}");

    // A statement over the limit (1 MiB) is refused from its declared length, before any of
    // it is read (the body is not even sent: a server that waited for it would hang here).
    let (status, v) = declared_length_only(&http, "/rest/sql/e", (1 << 20) + 1);
    assert_eq!(status, 413, "{v}");
    assert!(
        v["desc"].as_str().unwrap_or("").contains("1048576 bytes"),
        "{v}"
    );
    // Exactly at the limit is read (and then answered as SQL, not refused for its size).
    let mut big = b"SELECT COUNT(*) FROM m".to_vec();
    big.resize(1 << 20, b' ');
    let (status, v) = post(&http, "/rest/sql/e", &big);
    assert_eq!(status, 200, "{v}");

    // The server is still fine afterwards.
    let (status, v) = post(&http, "/rest/sql/e", b"SELECT COUNT(*) FROM m");
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["data"][0][0], 0);
}
