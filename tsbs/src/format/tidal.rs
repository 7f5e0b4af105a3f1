//! The columnar adapter for Tidal's client library: the two STABLE schemas and their DDL, and
//! [`TableWriteBatcher`], which groups points per subtable into `TableWrite`s whose columns
//! follow the STABLE's column template (column 0 = `ts`).
//!
//! Subtables are named as TSBS's TDengine loader names them (`r_truck_7`, `d_truck_7`, and the
//! shared `r_truck_null` / `d_truck_null` for null-name points). Every `TableWrite` carries the
//! tags of the first point ever seen for its subtable, so that auto-creation gives the subtable
//! the same tags as in TDengine, including a NULL tag when that first point had one.

use std::collections::HashMap;

use tidal_common::{
    Column, ColumnData, ColumnDef, DataType, SchemaVersion, StableSchema, TableWrite, Value,
};

use super::tdengine::subtable_name;
use crate::fields::{Measurement, DIAGNOSTICS_FIELDS, READINGS_FIELDS};
use crate::generate::{Fields, Generator, Point};
use crate::truck::{TagValue, NUM_STRING_TAGS, NUM_TAGS, TAG_NAMES};

pub const READINGS_DDL: &str = "CREATE STABLE IF NOT EXISTS readings (ts TIMESTAMP, latitude DOUBLE, longitude DOUBLE, elevation DOUBLE, velocity DOUBLE, heading DOUBLE, grade DOUBLE, fuel_consumption DOUBLE) TAGS (name VARCHAR(30), fleet VARCHAR(30), driver VARCHAR(30), model VARCHAR(30), device_version VARCHAR(30), load_capacity DOUBLE, fuel_capacity DOUBLE, nominal_fuel_consumption DOUBLE)";
pub const DIAGNOSTICS_DDL: &str = "CREATE STABLE IF NOT EXISTS diagnostics (ts TIMESTAMP, fuel_state DOUBLE, current_load DOUBLE, status BIGINT) TAGS (name VARCHAR(30), fleet VARCHAR(30), driver VARCHAR(30), model VARCHAR(30), device_version VARCHAR(30), load_capacity DOUBLE, fuel_capacity DOUBLE, nominal_fuel_consumption DOUBLE)";

pub fn ddl(m: Measurement) -> &'static str {
    match m {
        Measurement::Readings => READINGS_DDL,
        Measurement::Diagnostics => DIAGNOSTICS_DDL,
    }
}

fn tag_defs() -> Vec<ColumnDef> {
    TAG_NAMES
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let t = if i < NUM_STRING_TAGS {
                DataType::VarChar(30)
            } else {
                DataType::Double
            };
            ColumnDef::new(*n, t)
        })
        .collect()
}

/// The schemas the DDL above creates (version 1): `(readings, diagnostics)`.
pub fn schemas(db: &str) -> (StableSchema, StableSchema) {
    let mut rc = vec![ColumnDef::new("ts", DataType::Timestamp)];
    rc.extend(
        READINGS_FIELDS
            .iter()
            .map(|n| ColumnDef::new(*n, DataType::Double)),
    );
    let dc = vec![
        ColumnDef::new("ts", DataType::Timestamp),
        ColumnDef::new(DIAGNOSTICS_FIELDS[0], DataType::Double),
        ColumnDef::new(DIAGNOSTICS_FIELDS[1], DataType::Double),
        ColumnDef::new(DIAGNOSTICS_FIELDS[2], DataType::BigInt),
    ];
    let mk = |name: &str, columns| StableSchema {
        db: db.to_string(),
        name: name.to_string(),
        version: SchemaVersion(1),
        columns,
        tags: tag_defs(),
    };
    (mk("readings", rc), mk("diagnostics", dc))
}

/// The point's tags as Tidal values (NULL tags as `Value::Null`).
pub fn tag_values(p: &Point) -> Vec<Value> {
    (0..NUM_TAGS)
        .map(|i| match p.tag(i) {
            Some(TagValue::Str(s)) => Value::Str(s.to_string()),
            Some(TagValue::Num(x)) => Value::Float(x),
            None => Value::Null,
        })
        .collect()
}

/// Rows of one subtable being accumulated.
struct TableBuf {
    measurement: Measurement,
    table: String,
    tags: Vec<Value>,
    ts: Vec<i64>,
    /// One vector per field; `status` is kept as f64 here and converted at flush.
    values: Vec<Vec<f64>>,
    /// Per field, `Some` once the field had a NULL (an empty mask costs nothing).
    nulls: Vec<Option<Vec<bool>>>,
}

impl TableBuf {
    fn push(&mut self, p: &Point) {
        let row = self.ts.len();
        self.ts.push(p.ts_ms);
        for (i, (vals, nulls)) in self.values.iter_mut().zip(&mut self.nulls).enumerate() {
            let v = match (&p.fields, i) {
                (Fields::Diagnostics { status, .. }, 2) => status.map(|s| s as f64),
                _ => p.field(i),
            };
            vals.push(v.unwrap_or(0.0));
            match (v, nulls.as_mut()) {
                (None, None) => {
                    let mut mask = vec![false; row];
                    mask.push(true);
                    *nulls = Some(mask);
                }
                (v, Some(mask)) => mask.push(v.is_none()),
                (Some(_), None) => {}
            }
        }
    }

    fn take(&mut self) -> TableWrite {
        let n = self.ts.len();
        let mut columns = Vec::with_capacity(self.values.len() + 1);
        columns.push(Column::new(ColumnData::Timestamp(std::mem::replace(
            &mut self.ts,
            Vec::with_capacity(n),
        ))));
        let bigint_col = match self.measurement {
            Measurement::Readings => usize::MAX,
            Measurement::Diagnostics => 2,
        };
        for (i, (vals, nulls)) in self.values.iter_mut().zip(&mut self.nulls).enumerate() {
            let vals = std::mem::replace(vals, Vec::with_capacity(n));
            let data = if i == bigint_col {
                ColumnData::Int(vals.into_iter().map(|v| v as i64).collect())
            } else {
                ColumnData::Float(vals)
            };
            columns.push(Column {
                data,
                nulls: nulls.take().unwrap_or_default(),
            });
        }
        TableWrite {
            table: self.table.clone(),
            stable: self.measurement.name().to_string(),
            tags: Some(self.tags.clone()),
            columns,
        }
    }
}

/// Groups points into per-subtable `TableWrite`s, emitted in batches of about `batch_rows`
/// rows. Within a batch, tables appear in the order of their first row in that batch, and rows
/// keep the stream's order (which may be out of time order, as TSBS's is).
pub struct TableWriteBatcher {
    batch_rows: usize,
    rows: usize,
    tables: Vec<TableBuf>,
    /// Subtable key → index in `tables`; lookups only, never iterated.
    index: HashMap<(Measurement, Option<u32>), usize>,
    /// Indices of `tables` that have rows in the current batch, in first-row order.
    active: Vec<usize>,
}

impl TableWriteBatcher {
    pub fn new(batch_rows: usize) -> TableWriteBatcher {
        TableWriteBatcher {
            batch_rows: batch_rows.max(1),
            rows: 0,
            tables: Vec::new(),
            index: HashMap::new(),
            active: Vec::new(),
        }
    }

    /// Adds a point; returns a full batch once `batch_rows` rows have accumulated.
    pub fn push(&mut self, p: &Point) -> Option<Vec<TableWrite>> {
        let key = (p.measurement, p.name().is_some().then_some(p.truck));
        let idx = match self.index.get(&key) {
            Some(i) => *i,
            None => {
                let n = p.measurement.num_fields();
                self.tables.push(TableBuf {
                    measurement: p.measurement,
                    table: subtable_name(p.measurement, p.name()),
                    tags: tag_values(p),
                    ts: Vec::new(),
                    values: vec![Vec::new(); n],
                    nulls: vec![None; n],
                });
                self.index.insert(key, self.tables.len() - 1);
                self.tables.len() - 1
            }
        };
        let t = &mut self.tables[idx];
        if t.ts.is_empty() {
            self.active.push(idx);
        }
        t.push(p);
        self.rows += 1;
        (self.rows >= self.batch_rows).then(|| self.flush())
    }

    /// Takes whatever has accumulated (empty when nothing has).
    pub fn flush(&mut self) -> Vec<TableWrite> {
        self.rows = 0;
        let active = std::mem::take(&mut self.active);
        active.iter().map(|i| self.tables[*i].take()).collect()
    }
}

/// The whole data set of a generator as batches of `TableWrite`s.
pub struct TableWriteBatches {
    gen: Generator,
    batcher: TableWriteBatcher,
    done: bool,
}

impl TableWriteBatches {
    pub fn new(gen: Generator, batch_rows: usize) -> TableWriteBatches {
        TableWriteBatches {
            gen,
            batcher: TableWriteBatcher::new(batch_rows),
            done: false,
        }
    }
}

impl Iterator for TableWriteBatches {
    type Item = Vec<TableWrite>;

    fn next(&mut self) -> Option<Vec<TableWrite>> {
        if self.done {
            return None;
        }
        while let Some(raw) = self.gen.next_raw() {
            let p = self.gen.view(&raw);
            if let Some(batch) = self.batcher.push(&p) {
                return Some(batch);
            }
        }
        self.done = true;
        let last = self.batcher.flush();
        (!last.is_empty()).then_some(last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::Config;

    #[test]
    fn batches_follow_the_schemas_and_keep_every_row() {
        let cfg = Config {
            scale: 5,
            end_ms: crate::TSBS_START_MS + 6 * 3_600_000,
            ..Config::default()
        };
        let (r, d) = schemas("iot");
        r.validate().unwrap();
        d.validate().unwrap();
        let mut total = 0;
        let mut nulls = 0;
        let mut null_name_rows = 0;
        let mut g = Generator::new(cfg.clone()).unwrap();
        let mut expected = 0;
        while g.next_raw().is_some() {
            expected += 1;
        }
        for batch in TableWriteBatches::new(Generator::new(cfg).unwrap(), 1000) {
            assert!(batch.iter().map(TableWrite::num_rows).sum::<usize>() <= 1000);
            for w in &batch {
                let schema = if w.stable == "readings" { &r } else { &d };
                assert_eq!(w.columns.len(), schema.columns.len());
                for (c, def) in w.columns.iter().zip(&schema.columns) {
                    assert_eq!(c.len(), w.num_rows());
                    assert!(c.nulls.is_empty() || c.nulls.len() == c.len());
                    let ok = matches!(
                        (&c.data, &def.data_type),
                        (ColumnData::Timestamp(_), DataType::Timestamp)
                            | (ColumnData::Float(_), DataType::Double)
                            | (ColumnData::Int(_), DataType::BigInt)
                    );
                    assert!(ok, "{} {:?}", def.name, def.data_type);
                }
                assert_eq!(w.columns[0].null_count(), 0);
                let tags = schema.coerce_tags(w.tags.clone().unwrap()).unwrap();
                assert_eq!(tags.len(), 8);
                if w.table.ends_with("truck_null") {
                    assert_eq!(tags[0], Value::Null);
                    null_name_rows += w.num_rows();
                } else {
                    assert_eq!(
                        Some(&Value::Str(w.table[2..].to_string())),
                        w.tags.as_ref().unwrap().first()
                    );
                }
                total += w.num_rows();
                nulls += w.columns.iter().map(Column::null_count).sum::<usize>();
            }
        }
        assert_eq!(total, expected);
        assert!(nulls > total / 20, "{nulls} NULL fields in {total} rows");
        assert!(null_name_rows < total / 100);
    }
}
