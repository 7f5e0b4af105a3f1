//! UTC calendar formatting of epoch milliseconds for the text formats and query literals
//! (RFC 3339 for InfluxQL, `YYYY-MM-DD hh:mm:ss.mmm` for ClickHouse and PostgreSQL). Local to
//! this crate so that it needs no date library.

use std::fmt::Write as _;

/// (year, month 1-12, day 1-31) of a day count since 1970-01-01 (Hinnant's civil_from_days).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

struct Parts {
    y: i64,
    mo: u32,
    d: u32,
    h: i64,
    mi: i64,
    s: i64,
    ms: i64,
}

fn parts(ts_ms: i64) -> Parts {
    let days = ts_ms.div_euclid(86_400_000);
    let rem = ts_ms.rem_euclid(86_400_000);
    let (y, mo, d) = civil_from_days(days);
    Parts {
        y,
        mo,
        d,
        h: rem / 3_600_000,
        mi: rem / 60_000 % 60,
        s: rem / 1000 % 60,
        ms: rem % 1000,
    }
}

/// `2016-01-01T01:35:15Z`: RFC 3339 truncated to whole seconds, as TSBS's influx queries use.
pub fn rfc3339_seconds(ts_ms: i64) -> String {
    let p = parts(ts_ms);
    let mut s = String::with_capacity(20);
    let _ = write!(
        s,
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        p.y, p.mo, p.d, p.h, p.mi, p.s
    );
    s
}

/// `2016-01-01 01:35:15.646` (UTC, milliseconds).
pub fn sql_millis(ts_ms: i64) -> String {
    let mut s = String::with_capacity(23);
    push_sql_millis(&mut s, ts_ms);
    s
}

/// Appends `2016-01-01 01:35:15.646`.
pub fn push_sql_millis(s: &mut String, ts_ms: i64) {
    let p = parts(ts_ms);
    let _ = write!(
        s,
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{:03}",
        p.y, p.mo, p.d, p.h, p.mi, p.s, p.ms
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(rfc3339_seconds(1_451_612_115_646), "2016-01-01T01:35:15Z");
        assert_eq!(sql_millis(1_451_612_115_646), "2016-01-01 01:35:15.646");
        assert_eq!(sql_millis(0), "1970-01-01 00:00:00.000");
        assert_eq!(sql_millis(951_782_400_000), "2000-02-29 00:00:00.000");
        assert_eq!(rfc3339_seconds(1_456_790_399_999), "2016-02-29T23:59:59Z");
        assert_eq!(rfc3339_seconds(-1000), "1969-12-31T23:59:59Z");
    }
}
