//! The TSBS IoT workload for Tidal and its peers (../shared/tsbs-iot.md).
//!
//! * Data: [`Generator`] streams the trucks' `readings` and `diagnostics` points for a
//!   [`Config`] in TSBS order, with TSBS's distributions (clamped random walks on a 10 s grid)
//!   and perturbations (missing batches and entries, out-of-order batches and entries, NULL
//!   fields, NULL tags). Deterministic for a seed, O(scale) memory, no formatting cost.
//! * Writers ([`format`]): influx line protocol as TSBS writes it, TSBS's TDengine command
//!   stream, Tidal `TableWrite` batches with the STABLE schemas and DDL, and ClickHouse /
//!   PostgreSQL DDL, CSV rows and INSERT statements.
//! * [`stats`]: the figures a data set should show (rows per truck per day, NULL, missing and
//!   out-of-order rates, value ranges), used by the tests to hold the generator to the doc.
//! * [`queries`]: the 13 IoT query types with seeded parameters, rendered for Tidal/TDengine
//!   (the doc's templates verbatim), InfluxQL, ClickHouse and PostgreSQL.
//!
//! ```
//! use tidal_tsbs::{Config, Generator};
//! # fn main() -> Result<(), tidal_tsbs::Error> {
//! let mut g = Generator::new(Config { scale: 2, ..Config::default() })?;
//! let mut out = Vec::new();
//! let mut w = tidal_tsbs::format::influx::InfluxWriter::new(&mut out);
//! while let Some(p) = g.next_point() {
//!     w.write_point(&p)?;
//! }
//! # Ok(())
//! # }
//! ```
//!
//! Examples: `throughput` (generation and formatting speed, and the data set's statistics) and
//! `peer_files` (a data set, DDL and the 13 queries for PostgreSQL or ClickHouse).
//!
//! Not byte-identical to TSBS's own output: TSBS draws from Go's `math/rand`, we from our own
//! portable generator ([`rng`]); the draw order and every probability are TSBS's.

pub mod fields;
pub mod format;
pub mod generate;
pub mod queries;
pub mod rng;
pub mod stats;
pub mod time;
pub mod truck;

pub use fields::{Measurement, DIAGNOSTICS_FIELDS, READINGS_FIELDS};
pub use generate::{Config, Error, Fields, Generator, Point, RawPoint, DAY_MS, TSBS_START_MS};
pub use queries::{generate as generate_query, Query, QueryParams, QueryType};
pub use stats::Stats;
pub use truck::{TagValue, TruckTags, TAG_NAMES};
