//! Time precision, duration literals (`10m`, `1d`) and timestamp strings.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Precision {
    Millis,
    Micros,
    Nanos,
}

impl Precision {
    pub fn parse(s: &str) -> Option<Precision> {
        match s.to_ascii_lowercase().as_str() {
            "ms" => Some(Precision::Millis),
            "us" => Some(Precision::Micros),
            "ns" => Some(Precision::Nanos),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Precision::Millis => "ms",
            Precision::Micros => "us",
            Precision::Nanos => "ns",
        }
    }

    /// Units of this precision per second.
    pub fn per_second(self) -> i64 {
        match self {
            Precision::Millis => 1_000,
            Precision::Micros => 1_000_000,
            Precision::Nanos => 1_000_000_000,
        }
    }

    /// Converts a duration in nanoseconds to this precision (truncating).
    pub fn from_nanos(self, ns: i64) -> i64 {
        ns / (1_000_000_000 / self.per_second())
    }

    /// The current time in this precision.
    pub fn now(self) -> i64 {
        let ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as i64)
            .unwrap_or(0);
        self.from_nanos(ns)
    }

    /// Midnight (UTC) of the current day in this precision: TODAY().
    pub fn today(self) -> i64 {
        let per_day = self.per_second() * 86_400;
        self.now().div_euclid(per_day) * per_day
    }

    /// Parses `YYYY-MM-DD[ T]HH:MM:SS[.fraction][Z|+HH:MM]` (or a bare date) as UTC unless
    /// an offset is given, into this precision. Returns `None` if the string is not a timestamp.
    pub fn parse_timestamp(self, s: &str) -> Option<i64> {
        let ns = parse_timestamp_nanos(s.trim())?;
        Some(self.from_nanos(ns))
    }

    /// Formats an epoch value of this precision as `YYYY-MM-DD HH:MM:SS.fff` (UTC), with as
    /// many fraction digits as the precision has.
    pub fn format_timestamp(self, t: i64) -> String {
        let per = self.per_second();
        let secs = t.div_euclid(per);
        let frac = t.rem_euclid(per);
        let days = secs.div_euclid(86_400);
        let rem = secs.rem_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        let (hh, mm, ss) = (rem / 3600, (rem % 3600) / 60, rem % 60);
        let digits = match self {
            Precision::Millis => 3,
            Precision::Micros => 6,
            Precision::Nanos => 9,
        };
        format!("{y:04}-{m:02}-{d:02} {hh:02}:{mm:02}:{ss:02}.{frac:0digits$}")
    }
}

/// Days since 1970-01-01 for a civil date (proleptic Gregorian).
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Civil date for days since 1970-01-01.
pub fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn parse_timestamp_nanos(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let num = |from: usize, len: usize| -> Option<i64> {
        let part = s.get(from..from + len)?;
        if !part.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        part.parse().ok()
    };
    if b.len() < 10 || b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') {
        return None;
    }
    let (y, mo, d) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) {
        return None;
    }
    let mut secs = days_from_civil(y, mo, d) * 86_400;
    let mut nanos = 0i64;
    let mut i = 10;
    if i < b.len() {
        if b[i] != b' ' && b[i] != b'T' {
            return None;
        }
        i += 1;
        let (h, mi) = (num(i, 2)?, num(i + 3, 2)?);
        if b.get(i + 2) != Some(&b':') || h > 23 || mi > 59 {
            return None;
        }
        secs += h * 3600 + mi * 60;
        i += 5;
        if b.get(i) == Some(&b':') {
            let sec = num(i + 1, 2)?;
            if sec > 60 {
                return None;
            }
            secs += sec;
            i += 3;
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            let start = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            let digits = &s[start..i];
            if digits.is_empty() || digits.len() > 9 {
                return None;
            }
            let mut v: i64 = digits.parse().ok()?;
            for _ in digits.len()..9 {
                v *= 10;
            }
            nanos = v;
        }
        match b.get(i) {
            None => {}
            Some(b'Z') if i + 1 == b.len() => {}
            Some(c @ (b'+' | b'-')) => {
                let sign = if *c == b'+' { 1 } else { -1 };
                let oh = num(i + 1, 2)?;
                let om = if b.get(i + 3) == Some(&b':') {
                    num(i + 4, 2)?
                } else {
                    num(i + 3, 2).unwrap_or(0)
                };
                secs -= sign * (oh * 3600 + om * 60);
            }
            _ => return None,
        }
    }
    secs.checked_mul(1_000_000_000)?.checked_add(nanos)
}

/// Parses a duration literal (`10m`, `1d`, `500a`, `3650d`, `2h`, `1w`, `30s`, `10u`, `5b`)
/// into nanoseconds. Units: b (ns), u (us), a (ms), s, m, h, d, w. A bare number is
/// interpreted in `default_unit_ns`.
pub fn parse_duration(s: &str, default_unit_ns: i64) -> Option<i64> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: i64 = n.parse().ok()?;
    let unit_ns = match unit.to_ascii_lowercase().as_str() {
        "" => default_unit_ns,
        "b" | "ns" => 1,
        "u" | "us" => 1_000,
        "a" | "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        "d" => 86_400_000_000_000,
        "w" => 7 * 86_400_000_000_000,
        _ => return None,
    };
    n.checked_mul(unit_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// TODAY() is a whole number of days in every precision, at most a day before NOW.
    #[test]
    fn today_is_midnight_of_now() {
        for p in [Precision::Millis, Precision::Micros, Precision::Nanos] {
            let day = p.per_second() * 86_400;
            let today = p.today();
            let now = p.now();
            assert_eq!(today.rem_euclid(day), 0, "{p:?}");
            assert!(today <= now && now - today < day + p.per_second(), "{p:?}");
        }
    }

    #[test]
    fn timestamps_round_trip() {
        let p = Precision::Millis;
        assert_eq!(
            p.parse_timestamp("2016-01-01 00:00:00.000"),
            Some(1451606400000)
        );
        assert_eq!(
            p.parse_timestamp("2016-01-01T00:00:10Z"),
            Some(1451606410000)
        );
        assert_eq!(
            p.parse_timestamp("2016-01-01 08:00:00+08:00"),
            Some(1451606400000)
        );
        assert_eq!(p.parse_timestamp("2016-01-01"), Some(1451606400000));
        assert_eq!(p.format_timestamp(1451606410123), "2016-01-01 00:00:10.123");
        assert_eq!(p.parse_timestamp("hello"), None);
        assert_eq!(p.parse_timestamp("2016-13-01"), None);
        assert_eq!(
            Precision::Nanos.format_timestamp(-1),
            "1969-12-31 23:59:59.999999999"
        );
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10m", 1), Some(600_000_000_000));
        assert_eq!(parse_duration("1d", 1), Some(86_400_000_000_000));
        assert_eq!(parse_duration("10x", 1), None);
        assert_eq!(
            parse_duration("7", 86_400_000_000_000),
            Some(7 * 86_400_000_000_000)
        );
    }
}
