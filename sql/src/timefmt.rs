//! Calendar functions of the dialect: TO_CHAR / TO_TIMESTAMP formats, WEEKDAY, DAYOFWEEK,
//! WEEK and WEEKOFYEAR.
//!
//! Owns: the format language (TDengine's, Oracle-like: `yyyy-mm-dd hh24:mi:ss.ms`) and the
//! week numbering rules (MySQL's eight WEEK modes). Invariants: every time is UTC (as time
//! literals are read and timestamps printed); a timestamp is an epoch count in units of
//! `per_second` (1,000 / 1,000,000 / 1,000,000,000); nothing here panics on any input
//! (out-of-range values give `None`, which the caller turns into NULL).

use tidal_common::time::{civil_from_days, days_from_civil};

const NANOS_PER_SECOND: i64 = 1_000_000_000;

const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];
const DAYS: [&str; 7] = [
    "sunday",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
];

/// Longest format string accepted (its output is bounded by a small multiple of it).
pub const FORMAT_BYTES_MAX: usize = 256;

/// A timestamp split into calendar fields (UTC).
struct Civil {
    days: i64,
    year: i64,
    month: i64,
    day: i64,
    hour: i64,
    minute: i64,
    second: i64,
    nanos: i64,
}

fn civil(t: i64, per_second: i64) -> Option<Civil> {
    let per_second = per_second.clamp(1, NANOS_PER_SECOND);
    let secs = t.div_euclid(per_second);
    let frac = t.rem_euclid(per_second);
    let nanos = frac.checked_mul(NANOS_PER_SECOND / per_second)?;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    Some(Civil {
        days,
        year,
        month,
        day,
        hour: rem / 3600,
        minute: rem % 3600 / 60,
        second: rem % 60,
        nanos,
    })
}

/// Day of the week of a day number (days since 1970-01-01, a Thursday): 0 = Sunday.
fn sunday0(days: i64) -> i64 {
    (days + 4).rem_euclid(7)
}

/// WEEKDAY: 0 = Monday … 6 = Sunday.
pub fn weekday(t: i64, per_second: i64) -> Option<i64> {
    civil(t, per_second).map(|c| (sunday0(c.days) + 6) % 7)
}

/// DAYOFWEEK: 1 = Sunday … 7 = Saturday.
pub fn dayofweek(t: i64, per_second: i64) -> Option<i64> {
    civil(t, per_second).map(|c| sunday0(c.days) + 1)
}

/// WEEK(t, mode) with MySQL's modes 0-7: even modes start weeks on Sunday, odd on Monday;
/// modes 1, 3, 4, 6 count as week 1 the first week with 4 or more days in the year, the
/// others the first week that starts in the year; modes 2, 3, 6, 7 number 1-53 (a day
/// before week 1 belongs to the previous year's last week, and with the 4-day rule a late
/// December day can be week 1 of the next year), the others 0-53.
pub fn week(t: i64, per_second: i64, mode: i64) -> Option<i64> {
    let mode = mode.rem_euclid(8);
    let c = civil(t, per_second)?;
    let monday_first = mode % 2 == 1;
    let four_days = matches!(mode, 1 | 3 | 4 | 6);
    let wraps = matches!(mode, 2 | 3 | 6 | 7);
    // Days since the week's first day.
    let into_week = |d: i64| (sunday0(d) - i64::from(monday_first)).rem_euclid(7);
    let week1_start = |year: i64| {
        let jan1 = days_from_civil(year, 1, 1);
        if four_days {
            // the week holding January 4th has at least 4 days in the year
            let jan4 = jan1 + 3;
            jan4 - into_week(jan4)
        } else {
            jan1 + (7 - into_week(jan1)) % 7
        }
    };
    let start = week1_start(c.year);
    if c.days < start {
        if !wraps {
            return Some(0);
        }
        return Some((c.days - week1_start(c.year - 1)) / 7 + 1);
    }
    if wraps && four_days && c.days >= week1_start(c.year + 1) {
        return Some(1);
    }
    Some((c.days - start) / 7 + 1)
}

/// WEEKOFYEAR: the ISO 8601 week (1-53), i.e. WEEK mode 3.
pub fn weekofyear(t: i64, per_second: i64) -> Option<i64> {
    week(t, per_second, 3)
}

/// One element of a format string.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Item<'a> {
    Lit(&'a str),
    /// AM / PM marker; `dots`: A.M.; `upper`.
    Meridiem {
        dots: bool,
        upper: bool,
    },
    Year4,
    Year3,
    Year2,
    Year1,
    /// Month name: 0 lower, 1 capitalized, 2 upper; `short`: 3 letters.
    MonthName {
        case: u8,
        short: bool,
    },
    Month,
    Day,
    DayOfYear,
    /// Weekday name, as MonthName.
    DayName {
        case: u8,
        short: bool,
    },
    /// Day of week 1 (Sunday) … 7.
    DayOfWeek,
    Hour24,
    Hour12,
    Minute,
    Second,
    Millis,
    Micros,
    Nanos,
    /// Time-zone hours: always +00 (UTC).
    TzHours,
}

/// Splits a format into items: the longest specifier wins at each place (`HH24` before
/// `HH`, `MONTH` before `MON` before `MM`), text in double quotes is literal, anything else
/// is copied.
fn items(fmt: &str) -> Vec<Item<'_>> {
    // (spelling, item); case-insensitive unless the item depends on the spelling's case
    let mut out = Vec::new();
    let b = fmt.as_bytes();
    let mut i = 0;
    let mut lit_start = 0;
    while i < b.len() {
        if b[i] == b'"' {
            if lit_start < i {
                out.push(Item::Lit(&fmt[lit_start..i]));
            }
            let end = fmt[i + 1..].find('"').map_or(fmt.len(), |e| i + 1 + e);
            out.push(Item::Lit(&fmt[i + 1..end]));
            i = (end + 1).min(fmt.len());
            lit_start = i;
            continue;
        }
        let rest = &fmt[i..];
        let Some((len, item)) = specifier(rest) else {
            // step over one whole character
            i += rest.chars().next().map_or(1, char::len_utf8);
            continue;
        };
        if lit_start < i {
            out.push(Item::Lit(&fmt[lit_start..i]));
        }
        out.push(item);
        i += len;
        lit_start = i;
    }
    if lit_start < fmt.len() {
        out.push(Item::Lit(&fmt[lit_start..]));
    }
    out
}

/// Every specifier, lower-case, matched without regard to case; where one begins another
/// (`hh24` and `hh`, `month`, `mon` and `mm`) the longer comes first, so it wins.
const SPECIFIERS: [&str; 25] = [
    "a.m.", "p.m.", "am", "pm", "yyyy", "yyy", "yy", "y", "month", "mon", "mm", "ms", "mi", "ddd",
    "day", "dy", "dd", "d", "hh24", "hh12", "hh", "ss", "us", "ns", "tzh",
];

/// The specifier at the start of `s`: (its length, what it is).
fn specifier(s: &str) -> Option<(usize, Item<'static>)> {
    let starts =
        |p: &str| s.len() >= p.len() && s.as_bytes()[..p.len()].eq_ignore_ascii_case(p.as_bytes());
    // Case of a name from how the specifier is spelled: `MONTH`, `Month`, `month`.
    let case_of = |n: usize| {
        let w = &s[..n];
        if w.chars().all(|c| c.is_ascii_uppercase()) {
            2
        } else if w.starts_with(|c: char| c.is_ascii_uppercase()) {
            1
        } else {
            0
        }
    };
    let upper = s.starts_with(|c: char| c.is_ascii_uppercase());
    let spelling = SPECIFIERS.iter().copied().find(|p| starts(p))?;
    let n = spelling.len();
    let item = match spelling {
        "a.m." | "p.m." => Item::Meridiem { dots: true, upper },
        "am" | "pm" => Item::Meridiem { dots: false, upper },
        "yyyy" => Item::Year4,
        "yyy" => Item::Year3,
        "yy" => Item::Year2,
        "y" => Item::Year1,
        "month" | "mon" => Item::MonthName {
            case: case_of(n),
            short: spelling == "mon",
        },
        "mm" => Item::Month,
        "ms" => Item::Millis,
        "mi" => Item::Minute,
        "ddd" => Item::DayOfYear,
        "day" | "dy" => Item::DayName {
            case: case_of(n),
            short: spelling == "dy",
        },
        "dd" => Item::Day,
        "d" => Item::DayOfWeek,
        "hh24" => Item::Hour24,
        "hh12" | "hh" => Item::Hour12,
        "ss" => Item::Second,
        "us" => Item::Micros,
        "ns" => Item::Nanos,
        "tzh" => Item::TzHours,
        _ => return None,
    };
    Some((n, item))
}

fn cased(name: &str, case: u8, short: bool) -> String {
    let n = if short { &name[..3] } else { name };
    match case {
        2 => n.to_ascii_uppercase(),
        1 => {
            let mut c = n.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        }
        _ => n.to_string(),
    }
}

/// TO_CHAR(t, fmt).
pub fn to_char(t: i64, per_second: i64, fmt: &str) -> Option<String> {
    if fmt.len() > FORMAT_BYTES_MAX {
        return None;
    }
    let c = civil(t, per_second)?;
    let h12 = match c.hour % 12 {
        0 => 12,
        h => h,
    };
    let jan1 = days_from_civil(c.year, 1, 1);
    let mut out = String::with_capacity(fmt.len() * 2);
    for it in items(fmt) {
        match it {
            Item::Lit(s) => out.push_str(s),
            Item::Meridiem { dots, upper } => {
                let s = match (c.hour < 12, dots) {
                    (true, false) => "am",
                    (false, false) => "pm",
                    (true, true) => "a.m.",
                    (false, true) => "p.m.",
                };
                out.push_str(&if upper {
                    s.to_ascii_uppercase()
                } else {
                    s.to_string()
                });
            }
            Item::Year4 => out.push_str(&format!("{:04}", c.year)),
            Item::Year3 => out.push_str(&format!("{:03}", c.year.rem_euclid(1000))),
            Item::Year2 => out.push_str(&format!("{:02}", c.year.rem_euclid(100))),
            Item::Year1 => out.push_str(&format!("{}", c.year.rem_euclid(10))),
            Item::MonthName { case, short } => {
                let m = MONTHS.get((c.month - 1) as usize).copied().unwrap_or("");
                out.push_str(&cased(m, case, short));
            }
            Item::Month => out.push_str(&format!("{:02}", c.month)),
            Item::Day => out.push_str(&format!("{:02}", c.day)),
            Item::DayOfYear => out.push_str(&format!("{:03}", c.days - jan1 + 1)),
            Item::DayName { case, short } => {
                let d = DAYS.get(sunday0(c.days) as usize).copied().unwrap_or("");
                out.push_str(&cased(d, case, short));
            }
            Item::DayOfWeek => out.push_str(&format!("{}", sunday0(c.days) + 1)),
            Item::Hour24 => out.push_str(&format!("{:02}", c.hour)),
            Item::Hour12 => out.push_str(&format!("{h12:02}")),
            Item::Minute => out.push_str(&format!("{:02}", c.minute)),
            Item::Second => out.push_str(&format!("{:02}", c.second)),
            Item::Millis => out.push_str(&format!("{:03}", c.nanos / 1_000_000)),
            Item::Micros => out.push_str(&format!("{:06}", c.nanos / 1_000)),
            Item::Nanos => out.push_str(&format!("{:09}", c.nanos)),
            Item::TzHours => out.push_str("+00"),
        }
    }
    Some(out)
}

/// Reads up to `max` digits (at least one) at the start of `s`: (value, digits read).
fn digits(s: &str, max: usize) -> Option<(i64, usize)> {
    let n = s.bytes().take(max).take_while(u8::is_ascii_digit).count();
    if n == 0 {
        return None;
    }
    Some((s[..n].parse().ok()?, n))
}

/// TO_TIMESTAMP(s, fmt): the instant `s` spells in format `fmt` (fields it lacks: January,
/// the 1st, midnight; a year it lacks: 1970), as an epoch count in `per_second` units.
/// `None` when `s` does not match the format or names no valid date.
pub fn to_timestamp(s: &str, fmt: &str, per_second: i64) -> Option<i64> {
    if fmt.len() > FORMAT_BYTES_MAX {
        return None;
    }
    let (mut year, mut month, mut day) = (1970i64, 1i64, 1i64);
    let (mut hour, mut minute, mut second, mut nanos) = (0i64, 0i64, 0i64, 0i64);
    let mut pm: Option<bool> = None;
    let mut twelve = false;
    let mut rest = s;
    for it in items(fmt) {
        let take = |rest: &mut &str, max: usize| -> Option<i64> {
            let (v, n) = digits(rest, max)?;
            *rest = &rest[n..];
            Some(v)
        };
        match it {
            Item::Lit(l) => {
                // literal text must be there (spaces may differ in count)
                for ch in l.chars() {
                    if ch == ' ' {
                        rest = rest.trim_start();
                        continue;
                    }
                    rest = rest.strip_prefix(ch)?;
                }
            }
            Item::Meridiem { dots, .. } => {
                let n = if dots { 4 } else { 2 };
                let w = rest.get(..n)?.to_ascii_lowercase();
                pm = Some(w.starts_with('p'));
                rest = &rest[n..];
            }
            Item::Year4 => year = take(&mut rest, 4)?,
            Item::Year3 => year = 2000 + take(&mut rest, 3)? % 1000,
            Item::Year2 => year = 2000 + take(&mut rest, 2)?,
            Item::Year1 => year = 2020 + take(&mut rest, 1)?,
            Item::MonthName { short, .. } => {
                let lower = rest.to_ascii_lowercase();
                let (i, name) = MONTHS
                    .iter()
                    .enumerate()
                    .find(|(_, m)| lower.starts_with(if short { &m[..3] } else { m }))?;
                month = i as i64 + 1;
                rest = &rest[if short { 3 } else { name.len() }..];
            }
            Item::Month => month = take(&mut rest, 2)?,
            Item::Day => day = take(&mut rest, 2)?,
            Item::DayOfYear => {
                let doy = take(&mut rest, 3)?;
                let (_, m, d) = civil_from_days(days_from_civil(year, 1, 1) + doy - 1);
                (month, day) = (m, d);
            }
            Item::DayName { short, .. } => {
                let lower = rest.to_ascii_lowercase();
                let name = DAYS
                    .iter()
                    .find(|d| lower.starts_with(if short { &d[..3] } else { d }))?;
                rest = &rest[if short { 3 } else { name.len() }..];
            }
            Item::DayOfWeek => {
                take(&mut rest, 1)?;
            }
            Item::Hour24 => hour = take(&mut rest, 2)?,
            Item::Hour12 => {
                hour = take(&mut rest, 2)?;
                twelve = true;
            }
            Item::Minute => minute = take(&mut rest, 2)?,
            Item::Second => second = take(&mut rest, 2)?,
            Item::Millis => nanos = take(&mut rest, 3)? * 1_000_000,
            Item::Micros => nanos = take(&mut rest, 6)? * 1_000,
            Item::Nanos => nanos = take(&mut rest, 9)?,
            Item::TzHours => {
                // only UTC is meant; any offset shifts the instant back to UTC
                let sign = match rest.as_bytes().first() {
                    Some(b'-') => -1,
                    Some(b'+') => 1,
                    _ => return None,
                };
                rest = &rest[1..];
                hour -= sign * take(&mut rest, 2)?;
            }
        }
    }
    if !rest.trim().is_empty() {
        return None;
    }
    if twelve {
        if !(1..=12).contains(&hour) {
            return None;
        }
        hour %= 12;
    }
    if pm == Some(true) {
        hour += 12;
    }
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || !(-23..=47).contains(&hour)
        || !(0..=59).contains(&minute)
        || !(0..=59).contains(&second)
    {
        return None;
    }
    let days = days_from_civil(year, month, day);
    // a day that does not exist (February 30th) comes back as another date
    if civil_from_days(days) != (year, month, day) {
        return None;
    }
    let secs = days
        .checked_mul(86_400)?
        .checked_add(hour * 3600 + minute * 60 + second)?;
    // clamped: a precision finer than 1 ns (only a forged fragment can ask) must not divide
    // by zero
    let per_second = per_second.clamp(1, NANOS_PER_SECOND);
    secs.checked_mul(per_second)?
        .checked_add(nanos / (NANOS_PER_SECOND / per_second))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000;

    fn ms(y: i64, m: i64, d: i64, hh: i64, mi: i64, ss: i64, milli: i64) -> i64 {
        (days_from_civil(y, m, d) * 86_400 + hh * 3600 + mi * 60 + ss) * MS + milli
    }

    #[test]
    fn weekdays_and_days_of_week() {
        // 2024-01-01 was a Monday
        let t = ms(2024, 1, 1, 12, 0, 0, 0);
        assert_eq!(weekday(t, MS), Some(0));
        assert_eq!(dayofweek(t, MS), Some(2));
        let sun = ms(2023, 12, 31, 23, 59, 59, 999);
        assert_eq!(weekday(sun, MS), Some(6));
        assert_eq!(dayofweek(sun, MS), Some(1));
        // before the epoch
        assert_eq!(weekday(ms(1969, 12, 31, 0, 0, 0, 0), MS), Some(2));
    }

    #[test]
    fn week_modes_follow_their_rules() {
        // 2023-01-01 was a Sunday, 2021-01-01 a Friday, 2024-12-31 a Tuesday.
        let d = |y, m, dd| ms(y, m, dd, 0, 0, 0, 0);
        for (date, modes) in [
            (d(2023, 1, 1), [1, 0, 1, 52, 1, 0, 1, 52]),
            (d(2021, 1, 1), [0, 0, 52, 53, 0, 0, 53, 52]),
            (d(2021, 1, 4), [1, 1, 1, 1, 1, 1, 1, 1]),
            (d(2024, 12, 31), [52, 53, 52, 1, 53, 53, 1, 53]),
            (d(2016, 6, 15), [24, 24, 24, 24, 24, 24, 24, 24]),
        ] {
            for (mode, want) in modes.iter().enumerate() {
                assert_eq!(
                    week(date, MS, mode as i64),
                    Some(*want),
                    "{:?} mode {mode}",
                    civil_from_days(date.div_euclid(86_400_000))
                );
            }
        }
        assert_eq!(weekofyear(d(2021, 1, 1), MS), Some(53));
        assert_eq!(weekofyear(d(2024, 12, 30), MS), Some(1));
    }

    #[test]
    fn to_char_spells_every_specifier() {
        let t = ms(2016, 1, 5, 13, 4, 9, 7);
        let f = |fmt: &str| to_char(t, MS, fmt).unwrap_or_default();
        assert_eq!(f("yyyy-mm-dd hh24:mi:ss.ms"), "2016-01-05 13:04:09.007");
        assert_eq!(f("YY/MM/DD HH12 AM"), "16/01/05 01 PM");
        assert_eq!(
            f("Month MONTH month Mon MON mon"),
            "January JANUARY january Jan JAN jan"
        );
        assert_eq!(f("Day DAY dy D DDD"), "Tuesday TUESDAY tue 3 005");
        assert_eq!(f("us ns tzh a.m."), "007000 007000000 +00 p.m.");
        assert_eq!(f("\"at\" hh24\"h\""), "at 13h");
        assert_eq!(f("x—q"), "x—q", "text that is no specifier is copied");
        assert_eq!(to_char(t, MS, &"y".repeat(FORMAT_BYTES_MAX + 1)), None);
        // microsecond precision
        let us = t * 1000 + 123;
        assert_eq!(
            to_char(us, 1_000_000, "ss.us").as_deref(),
            Some("09.007123")
        );
    }

    #[test]
    fn to_timestamp_reads_what_to_char_writes() {
        let t = ms(2016, 1, 5, 13, 4, 9, 7);
        for fmt in [
            "yyyy-mm-dd hh24:mi:ss.ms",
            "YYYY/MM/DD HH12:MI:SS.MS AM",
            "dd Mon yyyy hh24 mi ss ms",
            "Day, dd Month yyyy hh24:mi:ss.ms",
        ] {
            let s = to_char(t, MS, fmt).unwrap_or_default();
            assert_eq!(to_timestamp(&s, fmt, MS), Some(t), "{fmt}: {s}");
        }
        assert_eq!(
            to_timestamp("2016-01-05", "yyyy-mm-dd", MS),
            Some(ms(2016, 1, 5, 0, 0, 0, 0))
        );
        assert_eq!(to_timestamp("2016-02-30", "yyyy-mm-dd", MS), None);
        assert_eq!(to_timestamp("2016-01-05x", "yyyy-mm-dd", MS), None);
        assert_eq!(to_timestamp("", "yyyy", MS), None);
        assert_eq!(to_timestamp("13 PM", "hh12 AM", MS), None);
        // precisions no database has do not fail
        for p in [0, -5, i64::MAX] {
            let _ = to_timestamp("2016-01-05 13", "yyyy-mm-dd hh24", p);
            let _ = to_char(i64::MIN, p, "yyyy-mm-dd hh24:mi:ss.ns");
            let _ = week(i64::MAX, p, 7);
        }
    }
}
