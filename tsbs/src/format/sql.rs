//! Row formats for the SQL peers, ClickHouse and PostgreSQL (TimescaleDB works the same with
//! `SELECT create_hypertable('readings', 'time')` after the DDL).
//!
//! Table layout assumed by these writers and by `queries` (one wide table per measurement,
//! tags denormalised into every row, as a row store without a tags table needs):
//!
//! ```text
//! readings    (time, name, fleet, driver, model, device_version,
//!              load_capacity, fuel_capacity, nominal_fuel_consumption,
//!              latitude, longitude, elevation, velocity, heading, grade, fuel_consumption)
//! diagnostics (time, <the same 8 tag columns>, fuel_state, current_load, status)
//! ```
//!
//! `time` is UTC with millisecond precision; tags and fields are nullable, and a NULL tag of a
//! point is NULL in that row only (as in influx, unlike TDengine where the subtable's tags win).
//! `status` is a 64-bit integer, every other number a double.

use std::io::{self, Write};

use super::{push_f64, push_i64};
use crate::fields::Measurement;
use crate::generate::{Fields, Point};
use crate::time::push_sql_millis;
use crate::truck::{TagValue, NUM_STRING_TAGS, NUM_TAGS, TAG_NAMES};

/// A SQL peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    ClickHouse,
    Postgres,
}

fn field_type(peer: Peer, m: Measurement, i: usize) -> &'static str {
    let int = m == Measurement::Diagnostics && i == 2;
    match (peer, int) {
        (Peer::ClickHouse, true) => "Nullable(Int64)",
        (Peer::ClickHouse, false) => "Nullable(Float64)",
        (Peer::Postgres, true) => "BIGINT",
        (Peer::Postgres, false) => "DOUBLE PRECISION",
    }
}

/// The column names of a measurement's table, in row order.
pub fn columns(m: Measurement) -> Vec<&'static str> {
    let mut c = vec!["time"];
    c.extend(TAG_NAMES);
    c.extend(m.field_names());
    c
}

/// `CREATE TABLE` statements (and PostgreSQL's indexes) for one measurement. ClickHouse orders
/// by (name, time), which serves the per-truck and per-fleet scans of the IoT queries;
/// `allow_nullable_key` is needed because `name` can be NULL.
pub fn ddl(peer: Peer, m: Measurement) -> Vec<String> {
    let mut cols = Vec::new();
    match peer {
        Peer::ClickHouse => cols.push("time DateTime64(3, 'UTC')".to_string()),
        Peer::Postgres => cols.push("time TIMESTAMPTZ NOT NULL".to_string()),
    }
    for (i, t) in TAG_NAMES.iter().enumerate() {
        let ty = match (peer, i < NUM_STRING_TAGS) {
            (Peer::ClickHouse, true) => "LowCardinality(Nullable(String))",
            (Peer::ClickHouse, false) => "Nullable(Float64)",
            (Peer::Postgres, true) => "TEXT",
            (Peer::Postgres, false) => "DOUBLE PRECISION",
        };
        cols.push(format!("{t} {ty}"));
    }
    for (i, f) in m.field_names().iter().enumerate() {
        cols.push(format!("{f} {}", field_type(peer, m, i)));
    }
    let table = m.name();
    let cols = cols.join(", ");
    match peer {
        Peer::ClickHouse => vec![format!(
            "CREATE TABLE IF NOT EXISTS {table} ({cols}) ENGINE = MergeTree ORDER BY (name, time) SETTINGS allow_nullable_key = 1"
        )],
        Peer::Postgres => vec![
            format!("CREATE TABLE IF NOT EXISTS {table} ({cols})"),
            format!("CREATE INDEX IF NOT EXISTS {table}_name_time_idx ON {table} (name, time DESC)"),
            format!("CREATE INDEX IF NOT EXISTS {table}_fleet_time_idx ON {table} (fleet, time DESC)"),
        ],
    }
}

/// The CSV header line of a measurement's table (without newline).
pub fn csv_header(m: Measurement) -> String {
    columns(m).join(",")
}

fn push_time(buf: &mut Vec<u8>, peer: Peer, ts_ms: i64) {
    let mut s = String::with_capacity(26);
    push_sql_millis(&mut s, ts_ms);
    if peer == Peer::Postgres {
        s.push_str("+00");
    }
    buf.extend_from_slice(s.as_bytes());
}

/// Calls `f` with each value of the row after `time`: tags then fields.
fn for_each_value(p: &Point, mut f: impl FnMut(Value)) {
    for i in 0..NUM_TAGS {
        f(match p.tag(i) {
            Some(TagValue::Str(s)) => Value::Str(s),
            Some(TagValue::Num(x)) => Value::F64(x),
            None => Value::Null,
        });
    }
    match p.fields {
        Fields::Readings(v) => v
            .iter()
            .for_each(|x| f(x.map(Value::F64).unwrap_or(Value::Null))),
        Fields::Diagnostics {
            fuel_state,
            current_load,
            status,
        } => {
            for x in [fuel_state, current_load] {
                f(x.map(Value::F64).unwrap_or(Value::Null));
            }
            f(status.map(Value::I64).unwrap_or(Value::Null));
        }
    }
}

enum Value<'a> {
    Str(&'a str),
    F64(f64),
    I64(i64),
    Null,
}

/// Appends one CSV row (with `\n`) for `COPY ... FORMAT csv` (PostgreSQL: NULL is an empty
/// cell) or `INSERT ... FORMAT CSV` (ClickHouse: NULL is `\N`). No value needs quoting.
pub fn append_csv_row(buf: &mut Vec<u8>, peer: Peer, p: &Point) {
    push_time(buf, peer, p.ts_ms);
    for_each_value(p, |v| {
        buf.push(b',');
        match v {
            Value::Str(s) => buf.extend_from_slice(s.as_bytes()),
            Value::F64(x) => push_f64(buf, x),
            Value::I64(x) => push_i64(buf, x),
            Value::Null => {
                if peer == Peer::ClickHouse {
                    buf.extend_from_slice(b"\\N");
                }
            }
        }
    });
    buf.push(b'\n');
}

/// Writes one CSV row to `w`.
pub fn write_csv_row<W: Write>(w: &mut W, peer: Peer, p: &Point) -> io::Result<()> {
    let mut buf = Vec::with_capacity(256);
    append_csv_row(&mut buf, peer, p);
    w.write_all(&buf)
}

/// `INSERT INTO <m> (<columns>) VALUES (...), ...` for the points of measurement `m` among
/// `points` (others are skipped); `None` when there are none.
pub fn insert_statement(peer: Peer, m: Measurement, points: &[Point]) -> Option<String> {
    let mut buf = Vec::with_capacity(64 + points.len() * 200);
    let _ = write!(
        buf,
        "INSERT INTO {} ({}) VALUES ",
        m.name(),
        columns(m).join(", ")
    );
    let mut any = false;
    for p in points.iter().filter(|p| p.measurement == m) {
        if any {
            buf.extend_from_slice(b", ");
        }
        any = true;
        buf.extend_from_slice(b"('");
        push_time(&mut buf, peer, p.ts_ms);
        buf.push(b'\'');
        for_each_value(p, |v| {
            buf.extend_from_slice(b", ");
            match v {
                Value::Str(s) => {
                    buf.push(b'\'');
                    buf.extend_from_slice(s.as_bytes());
                    buf.push(b'\'');
                }
                Value::F64(x) => push_f64(&mut buf, x),
                Value::I64(x) => push_i64(&mut buf, x),
                Value::Null => buf.extend_from_slice(b"NULL"),
            }
        });
        buf.push(b')');
    }
    any.then(|| String::from_utf8_lossy(&buf).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::RawPoint;
    use crate::truck::TruckTags;

    fn tags() -> TruckTags {
        TruckTags {
            name: "truck_3".into(),
            fleet: "East",
            driver: "Seth",
            model: "G-2000",
            device_version: "v1.0",
            load_capacity: 5000.0,
            fuel_capacity: 300.0,
            nominal_fuel_consumption: 19.0,
        }
    }

    fn diag() -> RawPoint {
        RawPoint {
            measurement: Measurement::Diagnostics,
            truck: 3,
            ts_ms: 1_451_606_410_000,
            null_fields: 0b010,
            null_tags: 0b100,
            values: [0.7, 0.0, 2.0, 0.0, 0.0, 0.0, 0.0],
        }
    }

    #[test]
    fn csv_rows_parse_back() {
        let t = tags();
        let p = Point::new(&diag(), &t);
        let mut ch = Vec::new();
        append_csv_row(&mut ch, Peer::ClickHouse, &p);
        assert_eq!(
            String::from_utf8(ch).unwrap(),
            "2016-01-01 00:00:10.000,truck_3,East,\\N,G-2000,v1.0,5000,300,19,0.7,\\N,2\n"
        );
        let mut pg = Vec::new();
        write_csv_row(&mut pg, Peer::Postgres, &p).unwrap();
        let line = String::from_utf8(pg).unwrap();
        let cells: Vec<&str> = line.trim_end().split(',').collect();
        let header = csv_header(Measurement::Diagnostics);
        assert_eq!(cells.len(), header.split(',').count());
        assert_eq!(cells[0], "2016-01-01 00:00:10.000+00");
        assert_eq!(cells[3], "");
        assert_eq!(cells[9].parse::<f64>().unwrap(), 0.7);
        assert_eq!(cells[10], "");
        assert_eq!(cells[11].parse::<i64>().unwrap(), 2);
    }

    #[test]
    fn insert_and_ddl() {
        let t = tags();
        let d = Point::new(&diag(), &t);
        let r = Point::new(
            &RawPoint {
                measurement: Measurement::Readings,
                null_fields: 0,
                null_tags: 0,
                ..diag()
            },
            &t,
        );
        let sql = insert_statement(Peer::Postgres, Measurement::Diagnostics, &[r, d, d]).unwrap();
        assert_eq!(
            sql,
            "INSERT INTO diagnostics (time, name, fleet, driver, model, device_version, load_capacity, fuel_capacity, nominal_fuel_consumption, fuel_state, current_load, status) VALUES ('2016-01-01 00:00:10.000+00', 'truck_3', 'East', NULL, 'G-2000', 'v1.0', 5000, 300, 19, 0.7, NULL, 2), ('2016-01-01 00:00:10.000+00', 'truck_3', 'East', NULL, 'G-2000', 'v1.0', 5000, 300, 19, 0.7, NULL, 2)"
        );
        assert!(insert_statement(Peer::ClickHouse, Measurement::Diagnostics, &[r]).is_none());
        let ch = ddl(Peer::ClickHouse, Measurement::Diagnostics);
        assert!(ch[0].contains("status Nullable(Int64)"), "{}", ch[0]);
        let pg = ddl(Peer::Postgres, Measurement::Readings);
        assert!(pg[0].starts_with(
            "CREATE TABLE IF NOT EXISTS readings (time TIMESTAMPTZ NOT NULL, name TEXT,"
        ));
        assert_eq!(pg.len(), 3);
    }
}
