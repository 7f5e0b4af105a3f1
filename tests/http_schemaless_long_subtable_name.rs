//! A line whose `child_table_tag` value names a subtable longer than 192 bytes (TDengine's
//! limit) is rejected on its own, with what is wrong, and the body's other lines are written:
//! on a STABLE's first body (the general path) and on later ones (the known-schema path).

mod common;

use common::{rows, write_lp, Cluster};

#[test]
fn an_overlong_child_table_name_rejects_only_its_line() {
    let c = Cluster::start_with_http(1);
    let http = c.http.clone().expect("http");
    c.ok("", "CREATE DATABASE ln PRECISION 'ms'");
    let q = "&precision=ms&child_table_tag=id";
    let long = "x".repeat(193);
    let fits = "y".repeat(192);
    for (i, first) in [(1, true), (2, false)] {
        let body =
            format!("m,id=dev1 v={i}i {i}\nm,id={long} v={i}i {i}\nm,id={fits} v={i}i {i}\n");
        let (s, b) = write_lp(&http, "ln", q, &body);
        assert_eq!(s, 400, "body {i} (first: {first}): {b}");
        assert!(b.contains("1 line(s) rejected, 2 row(s) written"), "{b}");
        assert!(
            b.contains("line 2: subtable name 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...' is 193 bytes long; the most is 192"),
            "{b}"
        );
    }
    assert_eq!(
        rows(&c.ok(
            "ln",
            "SELECT tbname, count(*) FROM m PARTITION BY tbname ORDER BY tbname"
        )),
        vec!["dev1,2".to_string(), format!("{fits},2")]
    );
}
