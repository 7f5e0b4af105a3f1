//! Two spellings of one series (its tags in another order) name one subtable. When the
//! frontend knows both from earlier bodies, their lines in a later body still go to that one
//! subtable in line order, so of two rows with one timestamp the later line's wins
//! (`SeriesEntry::shared` in `src/frontend/schemaless.rs`).

mod common;

use common::{rows, write_lp, Cluster};

const ROUNDS: usize = 12;

/// Round `r`: three lines at ts `r + 1` of one subtable, spelled a, b, a; the last wins.
/// Other series around them, so that the body looks like a feed.
fn body(r: usize) -> String {
    let mut out = String::new();
    for d in 0..20 {
        out.push_str(&format!("m,dev=o{d:02},site=x v={r} {}\n", r + 1));
    }
    let ts = r + 1;
    out.push_str(&format!("m,dev=one,site=y v={} {ts}\n", 10 * r + 1));
    out.push_str(&format!("m,site=y,dev=one v={} {ts}\n", 10 * r + 2));
    out.push_str(&format!("m,dev=one,site=y v={} {ts}\n", 10 * r + 3));
    out
}

#[test]
fn spellings_of_one_series_write_one_subtable_in_line_order() {
    let c = Cluster::start_with_http(2);
    let http = c.http.clone().expect("http");
    c.ok("", "CREATE DATABASE sp PRECISION 'ms' VGROUPS 4");
    for r in 0..ROUNDS {
        let (s, b) = write_lp(&http, "sp", "&precision=s", &body(r));
        assert_eq!(s, 204, "round {r}: {b}");
    }
    assert_eq!(rows(&c.ok("sp", "SHOW TABLES")).len(), 21);
    let got = rows(&c.ok(
        "sp",
        "SELECT COUNT(DISTINCT tbname) FROM m WHERE dev = 'one'",
    ));
    assert_eq!(got, vec!["1".to_string()]);
    let got = rows(&c.ok("sp", "SELECT v FROM m WHERE dev = 'one' ORDER BY ts"));
    let want: Vec<String> = (0..ROUNDS).map(|r| format!("{}", 10 * r + 3)).collect();
    assert_eq!(got, want);
}
