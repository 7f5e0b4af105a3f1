//! A TSBS-IoT-shaped data set loaded three ways ends with exactly the expected number of rows
//! in every subtable: through the HTTP line protocol API (in several bodies), through
//! `tidal load --format influx` (gzip file) and `tidal load --format tdengine` (zstd file).
//! `tidal load --dry-run` parses without a server and reports the same counts.

mod common;

use common::{http_request, rows, tsbs_files, Cluster, BIN};
use std::io::Write;
use std::process::Command;

const TRUCKS: usize = 12;
const EPOCHS: usize = 150;

/// `name,count` per truck of a STABLE, sorted; every truck must have `expect` rows.
fn check_counts(c: &Cluster, db: &str, stable: &str, by: &str, expect: usize) {
    let out = rows(&c.ok(
        db,
        &format!("SELECT {by}, count(*) FROM {stable} PARTITION BY {by}"),
    ));
    assert_eq!(out.len(), TRUCKS, "{db}.{stable}: {out:?}");
    for line in &out {
        let n: usize = line.rsplit(',').next().unwrap().parse().unwrap();
        assert_eq!(n, expect, "{db}.{stable}: {line}");
    }
}

fn load(c: &Cluster, db: &str, format: &str, file: &std::path::Path, dry: bool) -> String {
    let mut cmd = Command::new(BIN);
    cmd.args([
        "load",
        "--host",
        &c.mnode_addr,
        "--db",
        db,
        "--format",
        format,
    ])
    .arg("--file")
    .arg(file)
    .args([
        "--workers",
        "3",
        "--batch-size",
        "500",
        "--progress-secs",
        "0",
    ]);
    if dry {
        cmd.arg("--dry-run");
    }
    let out = cmd.output().expect("run tidal load");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "tidal load failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn three_load_paths_give_exact_counts() {
    let c = Cluster::start_with_http(2);
    let http = c.http.clone().expect("http");
    let (influx, td, per_table) = tsbs_files(TRUCKS, EPOCHS);
    let total = TRUCKS * EPOCHS * 2;

    // 1. HTTP, in bodies of 1000 lines.
    c.ok("", "CREATE DATABASE viahttp PRECISION 'ms' VGROUPS 3");
    let lines: Vec<&str> = influx.lines().collect();
    for chunk in lines.chunks(1000) {
        let body = chunk.join("\n");
        let (s, b) = http_request(&http, "POST", "/write?db=viahttp", &[], body.as_bytes());
        assert_eq!(s, 204, "{b}");
    }
    check_counts(&c, "viahttp", "readings", "name", per_table);
    check_counts(&c, "viahttp", "diagnostics", "name", per_table);

    // 2. tidal load, influx format, gzip.
    let gz = c.data().join("iot.influx.gz");
    let mut e = flate2::write::GzEncoder::new(
        std::fs::File::create(&gz).unwrap(),
        flate2::Compression::fast(),
    );
    e.write_all(influx.as_bytes()).unwrap();
    e.finish().unwrap();
    let out = load(&c, "viainflux", "influx", &gz, false);
    assert!(out.contains(&format!("loaded {total} rows")), "{out}");
    check_counts(&c, "viainflux", "readings", "name", per_table);
    check_counts(&c, "viainflux", "diagnostics", "name", per_table);

    // 3. tidal load, TDengine format, zstd: subtables named as TSBS names them.
    let zst = c.data().join("iot.tdengine.zst");
    std::fs::write(&zst, zstd::encode_all(td.as_bytes(), 3).unwrap()).unwrap();
    let out = load(&c, "viatd", "tdengine", &zst, false);
    assert!(out.contains(&format!("loaded {total} rows")), "{out}");
    check_counts(&c, "viatd", "readings", "tbname", per_table);
    check_counts(&c, "viatd", "diagnostics", "tbname", per_table);
    // The `3,` lines' tags too.
    check_counts(&c, "viatd", "readings", "name", per_table);
    check_counts(&c, "viatd", "diagnostics", "name", per_table);
    assert_eq!(
        rows(&c.ok(
            "viatd",
            "SELECT DISTINCT fleet, model FROM readings WHERE tbname = 'r_truck_3'"
        )),
        rows(&c.ok(
            "viahttp",
            "SELECT DISTINCT fleet, model FROM readings WHERE name = 'truck_3'"
        ))
    );
    assert_eq!(
        rows(&c.ok("viatd", "SELECT count(*) FROM r_truck_3")),
        vec![per_table.to_string()]
    );
    // NULL fields came through as NULL: every 10th row has one field missing.
    let nulls: usize = rows(&c.ok(
        "viatd",
        "SELECT count(*) FROM diagnostics WHERE status IS NULL",
    ))[0]
        .parse()
        .unwrap();
    assert!(nulls > 0 && nulls < total / 10, "{nulls}");

    // The values too: every path stored the same numbers (NULLs included).
    let agg = |db: &str, sql: &str| rows(&c.ok(db, sql));
    for sql in [
        "SELECT count(*), count(velocity), sum(velocity), min(latitude), max(longitude), \
         sum(fuel_consumption), sum(elevation) FROM readings",
        "SELECT count(*), count(status), sum(fuel_state), sum(current_load), max(status) \
         FROM diagnostics",
    ] {
        // Sums of doubles differ in their last bits with the order rows are added in.
        let close = |a: &[String], b: &[String]| {
            let nums = |r: &[String]| -> Vec<f64> {
                r.join(",").split(',').map(|x| x.parse().unwrap()).collect()
            };
            let (a, b) = (nums(a), nums(b));
            a.len() == b.len()
                && a.iter()
                    .zip(&b)
                    .all(|(x, y)| (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0))
        };
        let want = agg("viahttp", sql);
        for db in ["viainflux", "viatd"] {
            let got = agg(db, sql);
            assert!(close(&got, &want), "{sql} in {db}: {got:?} != {want:?}");
        }
    }

    // Dry run: same counts, nothing written.
    let plain = c.data().join("iot.tdengine");
    std::fs::write(&plain, &td).unwrap();
    let out = load(&c, "unused", "tdengine", &plain, true);
    assert!(out.contains(&format!("parsed {total} rows")), "{out}");
    assert!(c.sql("", "USE unused").is_err());
}
