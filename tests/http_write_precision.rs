//! The `precision` parameter of `/write`: every unit InfluxDB 1.x takes (`n`/`ns`, `u`/`us`,
//! `ms`, `s`, `m`, `h`) converts to the database's precision; an unknown unit is a 400 that
//! lists the units, and a timestamp the database's precision cannot hold is that line's error.

mod common;

use common::{rows, write_lp, Cluster};

#[test]
fn every_influxdb_unit_converts_to_the_database_precision() {
    let c = Cluster::start_with_http(1);
    let http = c.http.clone().expect("http");
    c.ok("", "CREATE DATABASE pr PRECISION 'ms'");
    for (unit, ts, v) in [
        ("h", "2", 1),
        ("m", "3", 2),
        ("s", "4", 3),
        ("ms", "5", 4),
        ("u", "6000", 5),
        ("n", "7000000", 6),
    ] {
        let (s, b) = write_lp(
            &http,
            "pr",
            &format!("&precision={unit}"),
            &format!("m,k={unit} v={v}i {ts}\n"),
        );
        assert_eq!(s, 204, "{unit}: {b}");
    }
    assert_eq!(
        rows(&c.ok("pr", "SELECT cast(ts as bigint), v FROM m ORDER BY ts")),
        vec!["5,4", "6,5", "7,6", "4000,3", "180000,2", "7200000,1"]
    );

    let (s, b) = write_lp(&http, "pr", "&precision=d", "m,k=d v=1i 1\n");
    assert_eq!(s, 400, "{b}");
    assert!(
        b.contains("invalid precision 'd': use ns, u, us, ms, s, m or h"),
        "{b}"
    );

    c.ok("", "CREATE DATABASE prn PRECISION 'ns'");
    let (s, b) = write_lp(
        &http,
        "prn",
        "&precision=h",
        "m,k=a v=1i 1\nm,k=b v=2i 3000000\n",
    );
    assert_eq!(s, 400, "{b}");
    assert!(b.contains("1 line(s) rejected, 1 row(s) written"), "{b}");
    assert!(
        b.contains("line 2: timestamp 3000000 (h) does not fit the database precision ns"),
        "{b}"
    );
    assert_eq!(
        rows(&c.ok("prn", "SELECT cast(ts as bigint) FROM m")),
        vec!["3600000000000"]
    );
}
