//! TSBS's `--format=TDengine` command stream, the input of `tsbs_load_tdengine`
//! (../shared/tsbs-iot.md §2.2, taosdata/tsbs `pkg/targets/tdengine/serializer.go`):
//!
//! * `2,<stable>,<first subtable>,create table <stable> (...) tags (...)` before the first point
//!   of a measurement;
//! * `3,<stable>,<subtable>,create table <subtable> using <stable> (<tag names>) tags (<values>)`
//!   the first time a subtable name is seen, with *that point's* tags (a NULL tag stays NULL
//!   for good, and the shared `r_truck_null`/`d_truck_null` take the first null-name point's);
//! * `1,<subtable>,<number of fields>,(<ts_ms>,<v1>,...)` for every point, NULL as `null`.
//!
//! Deviation: the supertable DDL is always the typed DDL below. TSBS derives the column types
//! from the first point and would write the invalid type `null` if that point had a NULL field
//! or tag; when it has none (seed 123) both are byte-identical.

use std::collections::HashSet;
use std::io::{self, Write};

use super::{push_f64, push_i64};
use crate::fields::Measurement;
use crate::generate::{Fields, Point};
use crate::truck::{TagValue, NUM_TAGS, TAG_NAMES};

/// The supertable DDLs TSBS emits for IoT (doc §2.2).
pub const READINGS_STABLE_DDL: &str = "create table readings (ts timestamp,latitude double,longitude double,elevation double,velocity double,heading double,grade double,fuel_consumption double) tags (name binary(30),fleet binary(30),driver binary(30),model binary(30),device_version binary(30),load_capacity double,fuel_capacity double,nominal_fuel_consumption double)";
pub const DIAGNOSTICS_STABLE_DDL: &str = "create table diagnostics (ts timestamp,fuel_state double,current_load double,status bigint) tags (name binary(30),fleet binary(30),driver binary(30),model binary(30),device_version binary(30),load_capacity double,fuel_capacity double,nominal_fuel_consumption double)";

pub fn stable_ddl(m: Measurement) -> &'static str {
    match m {
        Measurement::Readings => READINGS_STABLE_DDL,
        Measurement::Diagnostics => DIAGNOSTICS_STABLE_DDL,
    }
}

/// `r_truck_7` / `d_truck_7`, or the shared `r_truck_null` / `d_truck_null` for a point whose
/// name tag is NULL (TSBS's `tbRuleMap`).
pub fn subtable_name(m: Measurement, name: Option<&str>) -> String {
    match name {
        Some(n) => format!("{}{}", m.subtable_prefix(), n),
        None => format!("{}truck_null", m.subtable_prefix()),
    }
}

/// Appends [`subtable_name`] without allocating.
fn push_subtable(buf: &mut Vec<u8>, m: Measurement, name: Option<&str>) {
    buf.extend_from_slice(m.subtable_prefix().as_bytes());
    buf.extend_from_slice(name.unwrap_or("truck_null").as_bytes());
}

/// Appends a tag value as TDengine SQL: `'South'`, `1500`, `null`.
fn push_tag(buf: &mut Vec<u8>, v: Option<TagValue>) {
    match v {
        Some(TagValue::Str(s)) => {
            buf.push(b'\'');
            buf.extend_from_slice(s.as_bytes());
            buf.push(b'\'');
        }
        Some(TagValue::Num(x)) => push_f64(buf, x),
        None => buf.extend_from_slice(b"null"),
    }
}

fn push_opt_f64(buf: &mut Vec<u8>, v: Option<f64>) {
    match v {
        Some(x) => push_f64(buf, x),
        None => buf.extend_from_slice(b"null"),
    }
}

/// Streams points as TSBS's TDengine command lines. Remembers which supertables and subtables
/// it has declared (O(scale) memory).
pub struct TdengineWriter<W: Write> {
    w: W,
    buf: Vec<u8>,
    stables: [bool; 2],
    /// (measurement, truck) of declared subtables; `None` is the null-name subtable.
    subtables: HashSet<(Measurement, Option<u32>)>,
}

impl<W: Write> TdengineWriter<W> {
    pub fn new(w: W) -> TdengineWriter<W> {
        TdengineWriter {
            w,
            buf: Vec::with_capacity(512),
            stables: [false; 2],
            subtables: HashSet::new(),
        }
    }

    pub fn write_point(&mut self, p: &Point) -> io::Result<()> {
        let buf = &mut self.buf;
        buf.clear();
        let m = p.measurement;
        let name = p.name();
        if !self.stables[m.index()] {
            self.stables[m.index()] = true;
            let _ = write!(buf, "2,{},", m.name());
            push_subtable(buf, m, name);
            let _ = writeln!(buf, ",{}", stable_ddl(m));
        }
        if self
            .subtables
            .insert((m, name.is_some().then_some(p.truck)))
        {
            let _ = write!(buf, "3,{},", m.name());
            push_subtable(buf, m, name);
            buf.extend_from_slice(b",create table ");
            push_subtable(buf, m, name);
            let _ = write!(buf, " using {} ({}) tags (", m.name(), TAG_NAMES.join(","));
            for i in 0..NUM_TAGS {
                if i > 0 {
                    buf.push(b',');
                }
                push_tag(buf, p.tag(i));
            }
            buf.extend_from_slice(b")\n");
        }
        buf.extend_from_slice(b"1,");
        push_subtable(buf, m, name);
        buf.push(b',');
        push_i64(buf, m.num_fields() as i64);
        buf.extend_from_slice(b",(");
        push_i64(buf, p.ts_ms);
        match p.fields {
            Fields::Readings(values) => {
                for v in values {
                    buf.push(b',');
                    push_opt_f64(buf, v);
                }
            }
            Fields::Diagnostics {
                fuel_state,
                current_load,
                status,
            } => {
                for v in [fuel_state, current_load] {
                    buf.push(b',');
                    push_opt_f64(buf, v);
                }
                buf.push(b',');
                match status {
                    Some(s) => push_i64(buf, s),
                    None => buf.extend_from_slice(b"null"),
                }
            }
        }
        buf.extend_from_slice(b")\n");
        self.w.write_all(buf)
    }

    pub fn into_inner(self) -> W {
        self.w
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::RawPoint;
    use crate::truck::TruckTags;

    #[test]
    fn doc_lines() {
        let t = TruckTags {
            name: "truck_0".into(),
            fleet: "South",
            driver: "Trish",
            model: "H-2",
            device_version: "v2.3",
            load_capacity: 1500.0,
            fuel_capacity: 150.0,
            nominal_fuel_consumption: 12.0,
        };
        let r = RawPoint {
            measurement: Measurement::Readings,
            truck: 0,
            ts_ms: 1_451_606_400_000,
            null_fields: 0,
            null_tags: 0,
            values: [52.31854, 4.72037, 124.0, 0.0, 221.0, 0.0, 25.0],
        };
        let nulled = RawPoint {
            null_fields: 1 << 6,
            null_tags: 1,
            ts_ms: r.ts_ms + 10_000,
            ..r
        };
        let d = RawPoint {
            measurement: Measurement::Diagnostics,
            null_fields: 0b100,
            values: [0.9, 17.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            ..r
        };
        let mut w = TdengineWriter::new(Vec::new());
        for raw in [r, r, nulled, d] {
            w.write_point(&Point::new(&raw, &t)).unwrap();
        }
        let out = String::from_utf8(w.into_inner()).unwrap();
        let expected = [
            format!("2,readings,r_truck_0,{READINGS_STABLE_DDL}"),
            "3,readings,r_truck_0,create table r_truck_0 using readings (name,fleet,driver,model,device_version,load_capacity,fuel_capacity,nominal_fuel_consumption) tags ('truck_0','South','Trish','H-2','v2.3',1500,150,12)".into(),
            "1,r_truck_0,7,(1451606400000,52.31854,4.72037,124,0,221,0,25)".into(),
            "1,r_truck_0,7,(1451606400000,52.31854,4.72037,124,0,221,0,25)".into(),
            "3,readings,r_truck_null,create table r_truck_null using readings (name,fleet,driver,model,device_version,load_capacity,fuel_capacity,nominal_fuel_consumption) tags (null,'South','Trish','H-2','v2.3',1500,150,12)".into(),
            "1,r_truck_null,7,(1451606410000,52.31854,4.72037,124,0,221,0,null)".into(),
            format!("2,diagnostics,d_truck_0,{DIAGNOSTICS_STABLE_DDL}"),
            "3,diagnostics,d_truck_0,create table d_truck_0 using diagnostics (name,fleet,driver,model,device_version,load_capacity,fuel_capacity,nominal_fuel_consumption) tags ('truck_0','South','Trish','H-2','v2.3',1500,150,12)".into(),
            "1,d_truck_0,3,(1451606400000,0.9,17,null)".into(),
        ];
        assert_eq!(out.lines().collect::<Vec<_>>(), expected);
    }
}
