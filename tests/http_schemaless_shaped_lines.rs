//! Lines of known series read by their STABLE's field shape (the keys its lines had last, in
//! order, each a number of its column's type): what the general parse would store, for lines
//! with all of the shape's fields, some of them (NULL in the others), and, parsed in full,
//! lines in another order, with other numbers or with a value of the wrong kind.

mod common;

use common::{rows, write_lp, Cluster};

#[test]
fn shaped_lines_store_what_the_general_parse_would() {
    let c = Cluster::start_with_http(2);
    let http = c.http.clone().expect("http");
    c.ok("", "CREATE DATABASE sh PRECISION 'ms' VGROUPS 4");
    // The STABLE, its columns and both subtables exist before the body below.
    let first = "m,host=h1 a=1,b=2,c=3i,d=4 1\nm,host=h2 a=1,b=2,c=3i,d=4 1\n";
    let (s, b) = write_lp(&http, "sh", "&precision=s", first);
    assert_eq!(s, 204, "{b}");
    let body = [
        // The shape is taken from these.
        "m,host=h1 a=10,b=20,c=30i,d=40 2",
        "m,host=h2 a=11,b=21,c=31i,d=41 2",
        // Some of its fields, in its order.
        "m,host=h1 a=12,c=32i 3",
        "m,host=h2 d=43 3",
        // Another order; then the shape again.
        "m,host=h1 b=24,a=14 4",
        "m,host=h2 a=15,b=25,c=35i,d=45 4",
        "m,host=h1 a=16,b=26,c=36i,d=46 5",
        // Numbers the shape's reader leaves to the general parse.
        "m,host=h1 a=-1.5,b=0.25,c=-7i,d=1234567890123456 6",
        "m,host=h2 a=1e3,b=2,c=3i,d=4 6",
        // A float for the BIGINT column: rejected, as by the general parse.
        "m,host=h1 a=17,b=27,c=37,d=47 7",
        // A timestamp after two spaces (the general parse), then the shape again.
        "m,host=h2 a=18,b=28,c=38i,d=48  8",
        "m,host=h1 a=19,b=29,c=39i,d=49 9",
    ]
    .join("\n");
    let (s, b) = write_lp(&http, "sh", "&precision=s", &body);
    assert_eq!(s, 400, "{b}");
    assert!(b.contains("1 line(s) rejected, 11 row(s) written"), "{b}");
    assert!(
        b.contains("line 10: field 'c' is float but the column is BIGINT"),
        "{b}"
    );
    let out = rows(&c.ok(
        "sh",
        "SELECT host, ts, a, b, c, d FROM m WHERE ts > 1000 ORDER BY host, ts",
    ));
    assert_eq!(
        out,
        vec![
            "h1,1970-01-01 00:00:02.000,10,20,30,40",
            "h1,1970-01-01 00:00:03.000,12,NULL,32,NULL",
            "h1,1970-01-01 00:00:04.000,14,24,NULL,NULL",
            "h1,1970-01-01 00:00:05.000,16,26,36,46",
            "h1,1970-01-01 00:00:06.000,-1.5,0.25,-7,1234567890123456",
            "h1,1970-01-01 00:00:09.000,19,29,39,49",
            "h2,1970-01-01 00:00:02.000,11,21,31,41",
            "h2,1970-01-01 00:00:03.000,NULL,NULL,NULL,43",
            "h2,1970-01-01 00:00:04.000,15,25,35,45",
            "h2,1970-01-01 00:00:06.000,1000,2,3,4",
            "h2,1970-01-01 00:00:08.000,18,28,38,48",
        ],
        "{out:?}"
    );
}
