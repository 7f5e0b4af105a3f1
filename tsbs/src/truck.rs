//! Trucks and their 8 tags (../shared/tsbs-iot.md §1.1, TSBS `usecases/iot/truck.go`): the
//! choice lists, the three models, the tag order every output format follows, and the draw that
//! fixes a truck's tags when it is created.

use crate::rng::Rng;

pub const FLEETS: [&str; 4] = ["East", "West", "North", "South"];
pub const DRIVERS: [&str; 6] = ["Derek", "Rodney", "Albert", "Andy", "Seth", "Trish"];
pub const DEVICE_VERSIONS: [&str; 4] = ["v1.0", "v1.5", "v2.0", "v2.3"];

/// A truck model and the three numeric tags it implies.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Model {
    pub name: &'static str,
    pub load_capacity: f64,
    pub fuel_capacity: f64,
    pub nominal_fuel_consumption: f64,
}

pub const MODELS: [Model; 3] = [
    Model {
        name: "F-150",
        load_capacity: 2000.0,
        fuel_capacity: 200.0,
        nominal_fuel_consumption: 15.0,
    },
    Model {
        name: "G-2000",
        load_capacity: 5000.0,
        fuel_capacity: 300.0,
        nominal_fuel_consumption: 19.0,
    },
    Model {
        name: "H-2",
        load_capacity: 1500.0,
        fuel_capacity: 150.0,
        nominal_fuel_consumption: 12.0,
    },
];

/// Tag keys in TSBS order. Indices into this array are the bits of `Point::null_tags`.
pub const TAG_NAMES: [&str; 8] = [
    "name",
    "fleet",
    "driver",
    "model",
    "device_version",
    "load_capacity",
    "fuel_capacity",
    "nominal_fuel_consumption",
];
pub const NUM_TAGS: usize = TAG_NAMES.len();
/// The first 5 tags are strings; the last 3 are numbers (float32 in TSBS, DOUBLE in TDengine,
/// *fields* in influx line protocol).
pub const NUM_STRING_TAGS: usize = 5;

/// One tag value, borrowed from the truck.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TagValue<'a> {
    Str(&'a str),
    Num(f64),
}

/// The tags of one truck, fixed at creation. A point may hide some of them (NULL tags); see
/// `Point::tag`.
#[derive(Clone, Debug, PartialEq)]
pub struct TruckTags {
    pub name: String,
    pub fleet: &'static str,
    pub driver: &'static str,
    pub model: &'static str,
    pub device_version: &'static str,
    pub load_capacity: f64,
    pub fuel_capacity: f64,
    pub nominal_fuel_consumption: f64,
}

impl TruckTags {
    /// Draws the tags of truck `i` in TSBS's order: model, fleet, driver, device version.
    pub(crate) fn draw(i: u32, rng: &mut Rng) -> TruckTags {
        let m = MODELS[rng.below(MODELS.len() as u64) as usize];
        let fleet = FLEETS[rng.below(FLEETS.len() as u64) as usize];
        let driver = DRIVERS[rng.below(DRIVERS.len() as u64) as usize];
        let device_version = DEVICE_VERSIONS[rng.below(DEVICE_VERSIONS.len() as u64) as usize];
        TruckTags {
            name: truck_name(i),
            fleet,
            driver,
            model: m.name,
            device_version,
            load_capacity: m.load_capacity,
            fuel_capacity: m.fuel_capacity,
            nominal_fuel_consumption: m.nominal_fuel_consumption,
        }
    }

    /// Tag `i` in [`TAG_NAMES`] order.
    pub fn get(&self, i: usize) -> Option<TagValue<'_>> {
        Some(match i {
            0 => TagValue::Str(&self.name),
            1 => TagValue::Str(self.fleet),
            2 => TagValue::Str(self.driver),
            3 => TagValue::Str(self.model),
            4 => TagValue::Str(self.device_version),
            5 => TagValue::Num(self.load_capacity),
            6 => TagValue::Num(self.fuel_capacity),
            7 => TagValue::Num(self.nominal_fuel_consumption),
            _ => return None,
        })
    }
}

/// `truck_<i>`, TSBS's `truckNameFmt`.
pub fn truck_name(i: u32) -> String {
    format!("truck_{i}")
}
