//! A feed that sends each series once per body (thousands of devices, a body per interval)
//! lets the frontend skip the tags of series whose subtables it has written before
//! (`SeriesKeys::thread_series` in `src/frontend/schemaless.rs`): the rows still land in their
//! own subtables with their tags, and a subtable dropped since is created again, with its
//! tags, from the next body that names it.

mod common;

use common::{rows, write_lp, Cluster};

const SERIES: usize = 60;
const BODIES: usize = 12;

/// One line per series, series in a different order in each body (so the lines of a
/// series never repeat within a body).
fn body(round: usize) -> String {
    let mut out = String::new();
    for i in 0..SERIES {
        let s = (i * 7 + round * 13) % SERIES;
        out.push_str(&format!(
            "m,dev=d{s:02},site=s{} v={round}i,w={}.5 {}\n",
            s % 3,
            s * 10,
            round + 1
        ));
    }
    out
}

#[test]
fn series_known_across_bodies_keep_their_rows_and_tags() {
    let c = Cluster::start_with_http(2);
    let http = c.http.clone().expect("http");
    c.ok("", "CREATE DATABASE ks PRECISION 'ms' VGROUPS 4");
    for round in 0..BODIES {
        let (s, b) = write_lp(&http, "ks", "&precision=s", &body(round));
        assert_eq!(s, 204, "round {round}: {b}");
    }
    assert_eq!(rows(&c.ok("ks", "SHOW TABLES")).len(), SERIES);
    let per = rows(&c.ok(
        "ks",
        "SELECT dev, site, COUNT(*), SUM(v), MIN(w), MAX(w) FROM m GROUP BY dev, site ORDER BY dev",
    ));
    let sum_v: usize = (0..BODIES).sum();
    let want: Vec<String> = (0..SERIES)
        .map(|s| {
            format!(
                "d{s:02},s{},{BODIES},{sum_v},{}.5,{}.5",
                s % 3,
                s * 10,
                s * 10
            )
        })
        .collect();
    assert_eq!(per, want);

    // Drop two subtables the frontend knows. A body with the first one's line fails as a
    // write to a missing table, and is sent again with every tag; that also makes the
    // frontend forget which subtables exist, so the next body, with the second one's line
    // among the others, sends its tags from the start.
    for dev in ["d07", "d08"] {
        let table = rows(&c.ok(
            "ks",
            &format!("SELECT DISTINCT tbname FROM m WHERE dev = '{dev}'"),
        ));
        assert_eq!(table.len(), 1, "{table:?}");
        c.ok("ks", &format!("DROP TABLE {}", table[0]));
    }
    let full = body(BODIES);
    let d07: String = full.lines().filter(|l| l.contains("dev=d07")).collect();
    let (s, b) = write_lp(&http, "ks", "&precision=s", &d07);
    assert_eq!(s, 204, "{b}");
    let (s, b) = write_lp(&http, "ks", "&precision=s", &full);
    assert_eq!(s, 204, "{b}");
    assert_eq!(rows(&c.ok("ks", "SHOW TABLES")).len(), SERIES);
    let dropped = rows(&c.ok(
        "ks",
        "SELECT dev, site, COUNT(*), SUM(v) FROM m WHERE dev IN ('d07', 'd08') GROUP BY dev, site ORDER BY dev",
    ));
    assert_eq!(
        dropped,
        vec![format!("d07,s1,1,{BODIES}"), format!("d08,s2,1,{BODIES}")]
    );
    let others = rows(&c.ok(
        "ks",
        "SELECT COUNT(*), COUNT(DISTINCT dev), COUNT(site) FROM m WHERE dev NOT IN ('d07', 'd08')",
    ));
    let n = (SERIES - 2) * (BODIES + 1);
    assert_eq!(others, vec![format!("{n},{},{n}", SERIES - 2)]);
}
