//! The two measurements and their fields (../shared/tsbs-iot.md §1.2-1.3, TSBS
//! `usecases/iot/{readings,diagnostics}.go` and `usecases/common/distribution.go`): the clamped
//! random walks, their initial states, one tick, and the truncated values a point reports.
//!
//! The arithmetic follows TSBS step by step (step = u·(hi−lo)+lo, then clamp max before min, then
//! truncate with `int(x·10^p)/10^p`) so that the value sets match TSBS's: e.g. `fuel_state` only
//! takes the values 0, 0.1, …, 0.9 after the start.

use crate::rng::Rng;

/// The two TSBS IoT measurements (TDengine/Tidal STABLEs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Measurement {
    Readings,
    Diagnostics,
}

pub const READINGS_FIELDS: [&str; 7] = [
    "latitude",
    "longitude",
    "elevation",
    "velocity",
    "heading",
    "grade",
    "fuel_consumption",
];
pub const DIAGNOSTICS_FIELDS: [&str; 3] = ["fuel_state", "current_load", "status"];
/// TSBS's `maxFieldCount`: the zero-field draw is `Intn(7) % len(fields)`.
pub(crate) const MAX_FIELD_COUNT: u64 = 7;

impl Measurement {
    pub const ALL: [Measurement; 2] = [Measurement::Readings, Measurement::Diagnostics];

    pub fn name(self) -> &'static str {
        match self {
            Measurement::Readings => "readings",
            Measurement::Diagnostics => "diagnostics",
        }
    }

    pub fn field_names(self) -> &'static [&'static str] {
        match self {
            Measurement::Readings => &READINGS_FIELDS,
            Measurement::Diagnostics => &DIAGNOSTICS_FIELDS,
        }
    }

    pub fn num_fields(self) -> usize {
        self.field_names().len()
    }

    /// TDengine subtable prefix (`tbRuleMap` in taosdata/tsbs).
    pub fn subtable_prefix(self) -> &'static str {
        match self {
            Measurement::Readings => "r_",
            Measurement::Diagnostics => "d_",
        }
    }

    pub(crate) fn index(self) -> usize {
        match self {
            Measurement::Readings => 0,
            Measurement::Diagnostics => 1,
        }
    }
}

/// A readings walk: CWD(UD(lo, hi), min, max, init) truncated to `scale` (10^decimals).
struct WalkSpec {
    lo: f64,
    hi: f64,
    min: f64,
    max: f64,
    scale: f64,
}

const READINGS_WALKS: [WalkSpec; 7] = [
    // latitude
    WalkSpec {
        lo: -0.005,
        hi: 0.005,
        min: -90.0,
        max: 90.0,
        scale: 1e5,
    },
    // longitude
    WalkSpec {
        lo: -0.005,
        hi: 0.005,
        min: -180.0,
        max: 180.0,
        scale: 1e5,
    },
    // elevation
    WalkSpec {
        lo: -10.0,
        hi: 10.0,
        min: 0.0,
        max: 5000.0,
        scale: 1.0,
    },
    // velocity
    WalkSpec {
        lo: -10.0,
        hi: 10.0,
        min: 0.0,
        max: 100.0,
        scale: 1.0,
    },
    // heading
    WalkSpec {
        lo: -5.0,
        hi: 5.0,
        min: 0.0,
        max: 360.0,
        scale: 1.0,
    },
    // grade
    WalkSpec {
        lo: -5.0,
        hi: 5.0,
        min: 0.0,
        max: 100.0,
        scale: 1.0,
    },
    // fuel_consumption
    WalkSpec {
        lo: -5.0,
        hi: 5.0,
        min: 0.0,
        max: 50.0,
        scale: 10.0,
    },
];

/// TSBS `FP`: `float64(int(x*p))/p`, truncation toward zero.
#[inline]
fn truncate(x: f64, scale: f64) -> f64 {
    (x * scale) as i64 as f64 / scale
}

#[inline]
fn clamp(mut x: f64, min: f64, max: f64) -> f64 {
    if x > max {
        x = max;
    }
    if x < min {
        x = min;
    }
    x
}

/// The random-walk states of one truck.
#[derive(Clone, Debug)]
pub(crate) struct TruckSim {
    readings: [f64; 7],
    fuel: f64,
    status: f64,
}

/// State shared by all trucks. TSBS's `current_load` is `LD(loadSaddleUD, loadUD, 0.95)` where
/// `loadUD` is one package-level distribution, so every truck reports the value of the most
/// recent load change of *any* truck: in one epoch all trucks show the same `current_load`.
/// Kept because queries such as high-load and avg-load see exactly that in TSBS data.
#[derive(Clone, Debug, Default)]
pub(crate) struct SharedState {
    pub(crate) load: f64,
}

impl TruckSim {
    /// Initial states in TSBS's draw order: latitude, longitude, elevation, heading (the others
    /// start at fixed values, and diagnostics draw nothing).
    pub(crate) fn new(rng: &mut Rng) -> TruckSim {
        let lat = rng.float64() * 90.0;
        let lon = rng.float64() * 180.0;
        let elev = rng.float64() * 500.0;
        let heading = rng.float64() * 360.0;
        TruckSim {
            readings: [lat, lon, elev, 0.0, heading, 0.0, 25.0],
            fuel: 1.0,
            status: 0.0,
        }
    }

    /// One interval: readings' walks in field order, then fuel, load, status (TSBS `TickAll`).
    #[inline]
    pub(crate) fn tick(&mut self, rng: &mut Rng, shared: &mut SharedState) {
        for (state, w) in self.readings.iter_mut().zip(READINGS_WALKS.iter()) {
            let mut step = rng.float64();
            step *= w.hi - w.lo;
            step += w.lo;
            *state = clamp(*state + step, w.min, w.max);
        }
        // fuel_state: CWD(UD(-0.001, 0), 0, 1, 1), refuelled to 1 when it hits exactly 0.
        let mut step = rng.float64();
        step *= 0.0 - -0.001;
        step += -0.001;
        self.fuel = clamp(self.fuel + step, 0.0, 1.0);
        if self.fuel == 0.0 {
            self.fuel = 1.0;
        }
        // current_load: a new uniform load only when the motive reaches 0.95.
        if rng.float64() >= 0.95 {
            shared.load = rng.float64() * 5000.0;
        }
        // status: CWD(ND(0, 1), 0, 5, 0).
        self.status = clamp(self.status + rng.norm(), 0.0, 5.0);
    }

    pub(crate) fn readings(&self) -> [f64; 7] {
        let mut out = [0.0; 7];
        for ((o, s), w) in out.iter_mut().zip(self.readings).zip(READINGS_WALKS.iter()) {
            *o = truncate(s, w.scale);
        }
        out
    }

    /// `[fuel_state, current_load, status]`; status is an exact integer 0..=5.
    pub(crate) fn diagnostics(&self, shared: &SharedState) -> [f64; 3] {
        [
            truncate(self.fuel, 10.0),
            truncate(shared.load, 1.0),
            truncate(self.status, 1.0),
        ]
    }
}
