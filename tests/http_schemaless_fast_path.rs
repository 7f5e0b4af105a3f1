//! Schemaless writes of bodies whose STABLEs already have every key (converted in one pass,
//! with per-body caches of series keys and field positions) against bodies that need a schema
//! change on the way (which take the reconciling path): the same rows either way.

mod common;

use common::{rows, write_lp, Cluster};

/// A body that starts with known keys and later brings a new field and a new tag is written
/// in full: the STABLE grows and every line's values land in their columns.
#[test]
fn a_new_key_mid_body_extends_the_stable_for_the_whole_body() {
    let c = Cluster::start_with_http(2);
    let http = c.http.clone().expect("http");
    c.ok("", "CREATE DATABASE fp PRECISION 'ms' VGROUPS 4");
    let (s, b) = write_lp(&http, "fp", "&precision=s", "m,host=a x=1 1\n");
    assert_eq!(s, 204, "{b}");
    let body = "m,host=a x=2 2\nm,host=b x=3 2\nm,host=a x=4,y=5i 3\nm,host=c,rack=r1 x=6 3\n";
    let (s, b) = write_lp(&http, "fp", "&precision=s", body);
    assert_eq!(s, 204, "{b}");
    std::thread::sleep(std::time::Duration::from_millis(1100)); // schema cache TTL
    let out = rows(&c.ok("fp", "SELECT host, ts, x, y, rack FROM m ORDER BY host, ts"));
    assert_eq!(
        out,
        vec![
            "a,1970-01-01 00:00:01.000,1,NULL,NULL",
            "a,1970-01-01 00:00:02.000,2,NULL,NULL",
            "a,1970-01-01 00:00:03.000,4,5,NULL",
            "b,1970-01-01 00:00:02.000,3,NULL,NULL",
            "c,1970-01-01 00:00:03.000,6,NULL,r1",
        ],
        "{out:?}"
    );
}

/// Lines of one series whose fields come in different orders and numbers put each value in
/// its own column (the field-position memo must not carry a column over to another key).
#[test]
fn reordered_fields_land_in_their_columns() {
    let c = Cluster::start_with_http(2);
    let http = c.http.clone().expect("http");
    c.ok("", "CREATE DATABASE fp PRECISION 'ms' VGROUPS 4");
    let (s, b) = write_lp(&http, "fp", "&precision=s", "m,host=a x=0,y=0,z=0 1\n");
    assert_eq!(s, 204, "{b}");
    let body =
        "m,host=a x=1,y=2,z=3 2\nm,host=a z=6,x=4 3\nm,host=a y=8 4\nm,host=a y=11,z=12,x=10 5\n";
    let (s, b) = write_lp(&http, "fp", "&precision=s", body);
    assert_eq!(s, 204, "{b}");
    let out = rows(&c.ok("fp", "SELECT x, y, z FROM m ORDER BY ts"));
    assert_eq!(
        out,
        vec!["0,0,0", "1,2,3", "4,NULL,6", "NULL,8,NULL", "10,11,12"],
        "{out:?}"
    );
}

/// One series spelled two ways in a body (tag order, measurement case) is one subtable, and
/// of two lines with one timestamp the later wins, however the body interleaves series.
#[test]
fn one_series_spelled_two_ways_is_one_subtable_and_the_later_row_wins() {
    let c = Cluster::start_with_http(2);
    let http = c.http.clone().expect("http");
    c.ok("", "CREATE DATABASE fp PRECISION 'ms' VGROUPS 4");
    let (s, b) = write_lp(&http, "fp", "&precision=s", "m,a=1,b=2 v=0 1\n");
    assert_eq!(s, 204, "{b}");
    let body =
        "m,a=1,b=2 v=1 2\nm,a=9,b=9 v=100 2\nm,b=2,a=1 v=2 2\nM,a=1,b=2 v=3 3\nm,a=9,b=9 v=101 3\n";
    let (s, b) = write_lp(&http, "fp", "&precision=s", body);
    assert_eq!(s, 204, "{b}");
    assert_eq!(rows(&c.ok("fp", "SHOW TABLES")).len(), 2);
    let out = rows(&c.ok("fp", "SELECT ts, v FROM m WHERE a = '1' ORDER BY ts"));
    assert_eq!(
        out,
        vec![
            "1970-01-01 00:00:01.000,0",
            "1970-01-01 00:00:02.000,2",
            "1970-01-01 00:00:03.000,3",
        ],
        "{out:?}"
    );
}

/// With every key known, bad lines are still rejected one by one with the reconciling
/// path's messages, and the rest are written.
#[test]
fn known_schema_bodies_reject_bad_lines_only() {
    let c = Cluster::start_with_http(2);
    let http = c.http.clone().expect("http");
    c.ok("", "CREATE DATABASE fp PRECISION 'ms' VGROUPS 4");
    let (s, b) = write_lp(&http, "fp", "&precision=s", "m,host=a x=1,n=1i 1\n");
    assert_eq!(s, 204, "{b}");
    let body =
        "m,host=a x=2 2\nm,host=a n=1.5 3\nm,host=a host=1 4\nm,host=b x=oops 5\nm,host=b x=5 6\n";
    let (s, b) = write_lp(&http, "fp", "&precision=s", body);
    assert_eq!(s, 400, "{b}");
    assert!(b.contains("3 line(s) rejected, 2 row(s) written"), "{b}");
    assert!(
        b.contains("line 2: field 'n' is float but the column is BIGINT"),
        "{b}"
    );
    assert!(
        b.contains("line 3: field 'host' is a tag of STABLE 'm', not a column"),
        "{b}"
    );
    assert!(b.contains("line 4: column"), "{b}");
    assert_eq!(rows(&c.ok("fp", "SELECT count(*) FROM m")), vec!["3"]);
}
