//! Schemaless writes over HTTP: the first line of a measurement creates its STABLE (ts
//! first, float → DOUBLE, integer → BIGINT, unsigned → BIGINT UNSIGNED, string → VARCHAR,
//! bool → BOOL, tags → VARCHAR); later bodies with new fields and tags extend it (ALTER
//! STABLE ADD COLUMN/TAG), old rows read the new columns and tags as NULL, and the same tag
//! set always lands in the same subtable.

mod common;

use common::{rows, write_lp, Cluster};

#[test]
fn stables_are_created_and_extended() {
    let c = Cluster::start_with_http(2);
    let http = c.http.clone().expect("http");
    c.ok("", "CREATE DATABASE sl PRECISION 'ms' VGROUPS 4");

    let (s, b) = write_lp(
        &http,
        "sl",
        "&precision=s",
        "weather,city=Oslo,station=1 temp=-3.5,hum=80i,count=7u,ok=true,note=\"cold\" 1\n",
    );
    assert_eq!(s, 204, "{b}");
    let desc = rows(&c.ok("sl", "DESCRIBE weather"));
    let desc: Vec<String> = desc
        .iter()
        .map(|l| l.split(',').take(2).collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(
        desc,
        vec![
            "ts TIMESTAMP",
            "temp DOUBLE",
            "hum BIGINT",
            "count BIGINT UNSIGNED",
            "ok BOOL",
            "note VARCHAR",
            "city VARCHAR",
            "station VARCHAR",
        ]
    );

    // Same tag set in another order: same subtable. New field and new tag: ALTER.
    let (s, b) = write_lp(
        &http,
        "sl",
        "&precision=s",
        "weather,station=1,city=Oslo temp=-4,wind=12.5 2\nweather,city=Bergen,station=2,country=NO temp=6 2\n",
    );
    assert_eq!(s, 204, "{b}");
    let tables = rows(&c.ok("sl", "SHOW TABLES"));
    assert_eq!(tables.len(), 2, "{tables:?}");
    std::thread::sleep(std::time::Duration::from_millis(1100)); // schema cache TTL
    let out = rows(&c.ok(
        "sl",
        "SELECT city, ts, temp, wind, hum, country FROM weather ORDER BY city, ts",
    ));
    assert_eq!(
        out,
        vec![
            "Bergen,1970-01-01 00:00:02.000,6,NULL,NULL,NO",
            "Oslo,1970-01-01 00:00:01.000,-3.5,NULL,80,NULL",
            "Oslo,1970-01-01 00:00:02.000,-4,12.5,NULL,NULL",
        ],
        "{out:?}"
    );

    // A conflicting type for an existing column is rejected for that line only.
    let (s, b) = write_lp(
        &http,
        "sl",
        "&precision=s",
        "weather,city=Oslo,station=1 hum=1.5 3\nweather,city=Oslo,station=1 hum=2i 4\n",
    );
    assert_eq!(s, 400, "{b}");
    assert!(
        b.contains("line 1: field 'hum' is float but the column is BIGINT"),
        "{b}"
    );
    assert_eq!(rows(&c.ok("sl", "SELECT count(*) FROM weather")), vec!["4"]);

    // A measurement without tags gets the placeholder tag.
    let (s, b) = write_lp(&http, "sl", "", "notags value=1\n");
    assert_eq!(s, 204, "{b}");
    assert_eq!(rows(&c.ok("sl", "SELECT count(*) FROM notags")), vec!["1"]);
}
