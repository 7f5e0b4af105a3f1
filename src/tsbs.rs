//! A compact, seeded generator of TSBS-IoT-shaped data (../shared/tsbs-iot.md §1): trucks with
//! the 8 tags, the 7 `readings` and 3 `diagnostics` fields as clamped random walks on a 10 s
//! grid, and about 10% NULL fields. It feeds the demo; the full generator with TSBS's
//! perturbations (missing and out-of-order batches, NULL tags) is `tidal bench generate`'s job.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tidal_common::{Column, ColumnDef, DataType, SchemaVersion, StableSchema, TableWrite, Value};

pub const READINGS_DDL: &str = "CREATE STABLE IF NOT EXISTS readings (ts TIMESTAMP, latitude DOUBLE, longitude DOUBLE, elevation DOUBLE, velocity DOUBLE, heading DOUBLE, grade DOUBLE, fuel_consumption DOUBLE) TAGS (name VARCHAR(30), fleet VARCHAR(30), driver VARCHAR(30), model VARCHAR(30), device_version VARCHAR(30), load_capacity DOUBLE, fuel_capacity DOUBLE, nominal_fuel_consumption DOUBLE)";
pub const DIAGNOSTICS_DDL: &str = "CREATE STABLE IF NOT EXISTS diagnostics (ts TIMESTAMP, fuel_state DOUBLE, current_load DOUBLE, status BIGINT) TAGS (name VARCHAR(30), fleet VARCHAR(30), driver VARCHAR(30), model VARCHAR(30), device_version VARCHAR(30), load_capacity DOUBLE, fuel_capacity DOUBLE, nominal_fuel_consumption DOUBLE)";

const FLEETS: [&str; 4] = ["East", "West", "North", "South"];
const DRIVERS: [&str; 6] = ["Derek", "Rodney", "Albert", "Andy", "Seth", "Trish"];
const MODELS: [(&str, f64, f64, f64); 3] = [
    ("F-150", 2000.0, 200.0, 15.0),
    ("G-2000", 5000.0, 300.0, 19.0),
    ("H-2", 1500.0, 150.0, 12.0),
];
const VERSIONS: [&str; 4] = ["v1.0", "v1.5", "v2.0", "v2.3"];
/// Chance that one field of a point is NULL (TSBS `zeroFieldChance`).
const NULL_FIELD_CHANCE: f64 = 0.1;

fn tag_defs() -> Vec<ColumnDef> {
    let mut t: Vec<ColumnDef> = ["name", "fleet", "driver", "model", "device_version"]
        .iter()
        .map(|n| ColumnDef::new(*n, DataType::VarChar(30)))
        .collect();
    for n in ["load_capacity", "fuel_capacity", "nominal_fuel_consumption"] {
        t.push(ColumnDef::new(n, DataType::Double));
    }
    t
}

/// The schemas the DDL above creates (version 1), for the client library's writes.
pub fn schemas(db: &str) -> (StableSchema, StableSchema) {
    let mut rc = vec![ColumnDef::new("ts", DataType::Timestamp)];
    for n in [
        "latitude",
        "longitude",
        "elevation",
        "velocity",
        "heading",
        "grade",
        "fuel_consumption",
    ] {
        rc.push(ColumnDef::new(n, DataType::Double));
    }
    let dc = vec![
        ColumnDef::new("ts", DataType::Timestamp),
        ColumnDef::new("fuel_state", DataType::Double),
        ColumnDef::new("current_load", DataType::Double),
        ColumnDef::new("status", DataType::BigInt),
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

struct Walk {
    state: f64,
    step: f64,
    min: f64,
    max: f64,
    decimals: i32,
}

impl Walk {
    fn new(state: f64, step: f64, min: f64, max: f64, decimals: i32) -> Walk {
        Walk {
            state,
            step,
            min,
            max,
            decimals,
        }
    }
    fn tick(&mut self, rng: &mut StdRng) {
        self.state =
            (self.state + rng.random_range(-self.step..self.step)).clamp(self.min, self.max);
    }
    fn value(&self) -> f64 {
        let p = 10f64.powi(self.decimals);
        (self.state * p).trunc() / p
    }
}

pub struct Truck {
    pub tags: Vec<Value>,
    readings: Vec<Walk>,
    fuel: Walk,
    load: f64,
    status: Walk,
}

/// A seeded fleet; `next_epoch` advances every truck by one interval.
pub struct Fleet {
    rng: StdRng,
    pub trucks: Vec<Truck>,
}

impl Fleet {
    pub fn new(scale: usize, seed: u64) -> Fleet {
        let mut rng = StdRng::seed_from_u64(seed);
        let trucks = (0..scale)
            .map(|i| {
                let readings = vec![
                    Walk::new(rng.random::<f64>() * 90.0, 0.005, -90.0, 90.0, 5),
                    Walk::new(rng.random::<f64>() * 180.0, 0.005, -180.0, 180.0, 5),
                    Walk::new(rng.random::<f64>() * 500.0, 10.0, 0.0, 5000.0, 0),
                    Walk::new(0.0, 10.0, 0.0, 100.0, 0),
                    Walk::new(rng.random::<f64>() * 360.0, 5.0, 0.0, 360.0, 0),
                    Walk::new(0.0, 5.0, 0.0, 100.0, 0),
                    Walk::new(25.0, 5.0, 0.0, 50.0, 1),
                ];
                let (model, load_cap, fuel_cap, nominal) =
                    MODELS[rng.random_range(0..MODELS.len())];
                let tags = vec![
                    Value::Str(format!("truck_{i}")),
                    Value::Str(FLEETS[rng.random_range(0..FLEETS.len())].to_string()),
                    Value::Str(DRIVERS[rng.random_range(0..DRIVERS.len())].to_string()),
                    Value::Str(model.to_string()),
                    Value::Str(VERSIONS[rng.random_range(0..VERSIONS.len())].to_string()),
                    Value::Float(load_cap),
                    Value::Float(fuel_cap),
                    Value::Float(nominal),
                ];
                Truck {
                    tags,
                    readings,
                    fuel: Walk::new(1.0, 0.0005, 0.0, 1.0, 1),
                    load: 0.0,
                    status: Walk::new(0.0, 1.0, 0.0, 5.0, 0),
                }
            })
            .collect();
        Fleet { rng, trucks }
    }

    /// Rows for `epochs` consecutive intervals from `start_ms`, one TableWrite per subtable
    /// (`r_truck_i` and `d_truck_i`), carrying tags for auto-creation.
    pub fn chunk(&mut self, start_ms: i64, interval_ms: i64, epochs: usize) -> Vec<TableWrite> {
        let n = self.trucks.len();
        let mut rcols: Vec<Vec<Column>> = (0..n)
            .map(|_| {
                let mut v = vec![Column::empty(DataType::Timestamp, epochs)];
                v.extend((0..7).map(|_| Column::empty(DataType::Double, epochs)));
                v
            })
            .collect();
        let mut dcols: Vec<Vec<Column>> = (0..n)
            .map(|_| {
                vec![
                    Column::empty(DataType::Timestamp, epochs),
                    Column::empty(DataType::Double, epochs),
                    Column::empty(DataType::Double, epochs),
                    Column::empty(DataType::BigInt, epochs),
                ]
            })
            .collect();
        for e in 0..epochs {
            let ts = start_ms + e as i64 * interval_ms;
            for (t, truck) in self.trucks.iter_mut().enumerate() {
                let rng = &mut self.rng;
                let null_r =
                    (rng.random::<f64>() < NULL_FIELD_CHANCE).then(|| rng.random_range(0..7usize));
                let cols = &mut rcols[t];
                cols[0].push(&Value::Timestamp(ts));
                for (f, w) in truck.readings.iter().enumerate() {
                    let v = if null_r == Some(f) {
                        Value::Null
                    } else {
                        Value::Float(w.value())
                    };
                    cols[f + 1].push(&v);
                }
                let null_d =
                    (rng.random::<f64>() < NULL_FIELD_CHANCE).then(|| rng.random_range(0..3usize));
                let cols = &mut dcols[t];
                cols[0].push(&Value::Timestamp(ts));
                let vals = [
                    Value::Float(truck.fuel.value()),
                    Value::Float(truck.load.trunc()),
                    Value::Int(truck.status.value() as i64),
                ];
                for (f, v) in vals.iter().enumerate() {
                    cols[f + 1].push(if null_d == Some(f) { &Value::Null } else { v });
                }
                for w in truck.readings.iter_mut() {
                    w.tick(rng);
                }
                truck.fuel.state -= rng.random_range(0.0..0.001);
                if truck.fuel.state <= 0.0 {
                    truck.fuel.state = 1.0;
                }
                if rng.random::<f64>() >= 0.95 {
                    truck.load = rng.random_range(0.0..5000.0);
                }
                truck.status.state = (truck.status.state + normal(rng)).clamp(0.0, 5.0);
            }
        }
        let mut out = Vec::with_capacity(2 * n);
        for (t, (rc, dc)) in rcols.into_iter().zip(dcols).enumerate() {
            let Some(Value::Str(name)) = self.trucks[t].tags.first() else {
                continue;
            };
            out.push(TableWrite {
                table: format!("r_{name}"),
                stable: "readings".into(),
                tags: Some(self.trucks[t].tags.clone()),
                columns: rc,
            });
            out.push(TableWrite {
                table: format!("d_{name}"),
                stable: "diagnostics".into(),
                tags: Some(self.trucks[t].tags.clone()),
                columns: dc,
            });
        }
        out
    }
}

/// A standard normal draw (Box-Muller).
fn normal(rng: &mut StdRng) -> f64 {
    let u1: f64 = rng.random::<f64>().max(f64::MIN_POSITIVE);
    let u2: f64 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_shapes_ranges_and_determinism() {
        let mut a = Fleet::new(5, 7);
        let mut b = Fleet::new(5, 7);
        let wa = a.chunk(0, 10_000, 100);
        let wb = b.chunk(0, 10_000, 100);
        assert_eq!(wa, wb, "same seed, same data");
        assert_eq!(wa.len(), 10);
        let (r, d) = schemas("iot");
        for w in &wa {
            let schema = if w.stable == "readings" { &r } else { &d };
            assert_eq!(w.columns.len(), schema.columns.len());
            assert!(w.columns.iter().all(|c| c.len() == 100));
            assert_eq!(w.columns[0].null_count(), 0);
        }
        let velocity = &wa[0].columns[4];
        for i in 0..100 {
            if let Value::Float(v) = velocity.get(i) {
                assert!((0.0..=100.0).contains(&v));
            }
        }
        let nulls: usize = wa
            .iter()
            .flat_map(|w| w.columns.iter().skip(1))
            .map(Column::null_count)
            .sum();
        // About 10% of points have one NULL field: 10 tables x 100 points.
        assert!((40..=200).contains(&nulls), "nulls {nulls}");
    }
}
