//! `Content-Encoding: gzip` bodies on both write endpoints (1.x `/write?db=` and 2.x
//! `/api/v2/write?bucket=`), with the precision parameter converting to the database's
//! precision; a corrupt gzip body is a 400 and an unknown encoding a 415.

mod common;

use common::{http_request, rows, Cluster};
use std::io::Write;

fn gzip(text: &str) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(text.as_bytes()).unwrap();
    e.finish().unwrap()
}

#[test]
fn gzip_bodies_are_accepted() {
    let c = Cluster::start_with_http(1);
    let http = c.http.clone().expect("http");
    c.ok("", "CREATE DATABASE gz PRECISION 'us'");
    let gz = [("Content-Encoding", "gzip")];

    let body: String = (0..1000)
        .map(|i| format!("m,dev=d{} v={i} {}\n", i % 10, 1_000_000_000_000i64 + i))
        .collect();
    let (s, b) = http_request(
        &http,
        "POST",
        "/write?db=gz&precision=ms",
        &gz,
        &gzip(&body),
    );
    assert_eq!(s, 204, "{b}");
    let (s, b) = http_request(
        &http,
        "POST",
        "/api/v2/write?bucket=gz/autogen&org=ignored&precision=ns",
        &gz,
        &gzip("m,dev=d0 v=-1 1000000000000123456\n"),
    );
    assert_eq!(s, 204, "{b}");
    assert_eq!(rows(&c.ok("gz", "SELECT count(*) FROM m")), vec!["1001"]);
    // ms → us multiplies; ns → us truncates toward the past.
    assert_eq!(
        rows(&c.ok(
            "gz",
            "SELECT cast(ts as bigint), v FROM m WHERE v < 1 ORDER BY ts"
        )),
        vec!["1000000000000000,0", "1000000000000123,-1"]
    );

    let (s, b) = http_request(&http, "POST", "/write?db=gz", &gz, b"not gzip at all");
    assert_eq!(s, 400, "{b}");
    assert!(b.contains("cannot decompress the gzip body"), "{b}");
    let (s, b) = http_request(
        &http,
        "POST",
        "/write?db=gz",
        &[("Content-Encoding", "br")],
        b"x",
    );
    assert_eq!(s, 415, "{b}");
}
