//! The streaming data generator: TSBS's base simulator (epochs of `readings` for trucks
//! 0..N-1, then `diagnostics` for trucks 0..N-1, then one tick of every truck) wrapped in the IoT
//! simulator's perturbations (../shared/tsbs-iot.md §1.4-1.5, TSBS `usecases/common/simulator.go`,
//! `usecases/iot/{simulator,batch_config}.go`).
//!
//! Owns: [`Config`], [`Generator`], the point types ([`RawPoint`], [`Point`], [`Fields`]).
//!
//! The perturbation logic mirrors TSBS's control flow, including its draw order and its quirks,
//! because the shape of the stream (which points go missing, how far held-back points travel,
//! where NULLs land) is what loaders and storage engines are benchmarked on:
//! * batches of 10; a batch config is drawn even when the batch then replays a held-back batch;
//! * entry-level flags are indexed by `slot + offset`, so after a dropped or held entry the
//!   remaining slots read the flags of later slots, and slots past 10 have no flags;
//! * the zero-field/zero-tag flags are indexed by the *output* position, and may hit a
//!   held-back entry that is being replayed (so a point can carry two NULLs).
//!
//! One deliberate difference: TSBS may pull a few points past the end of the time range out of
//! the base simulator while the last batch is being assembled (it checks "finished" only between
//! entries) and emits them with timestamp `end`. We draw them identically but do not emit them,
//! so every timestamp lies on the grid in [start, end).
//!
//! Memory is O(scale): the trucks' states plus the held-back points (a few dozen on average).

use std::collections::VecDeque;

use crate::fields::{Measurement, SharedState, TruckSim, MAX_FIELD_COUNT};
use crate::rng::Rng;
use crate::truck::{TagValue, TruckTags, NUM_TAGS};

/// 2016-01-01T00:00:00Z, TSBS's customary start.
pub const TSBS_START_MS: i64 = 1_451_606_400_000;
pub const DAY_MS: i64 = 86_400_000;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid TSBS configuration: {0}")]
    Config(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// What to generate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Number of trucks.
    pub scale: u32,
    pub start_ms: i64,
    /// Exclusive: the last timestamp is the last grid point before `end_ms`.
    pub end_ms: i64,
    /// TSBS `--log-interval`, 10 s by default.
    pub interval_ms: i64,
    pub seed: u64,
    /// TSBS's missing/out-of-order/NULL perturbations (on in TSBS; off gives the clean grid).
    pub perturbations: bool,
}

impl Default for Config {
    /// The reference set of the doc: scale 100, 2016-01-01 for one day, 10 s, seed 123.
    fn default() -> Config {
        Config {
            scale: 100,
            start_ms: TSBS_START_MS,
            end_ms: TSBS_START_MS + DAY_MS,
            interval_ms: 10_000,
            seed: 123,
            perturbations: true,
        }
    }
}

impl Config {
    pub fn validate(&self) -> Result<(), Error> {
        if self.scale == 0 {
            return Err(Error::Config("scale must be at least 1".into()));
        }
        if self.interval_ms <= 0 {
            return Err(Error::Config(format!(
                "interval must be positive, got {} ms",
                self.interval_ms
            )));
        }
        if self.end_ms < self.start_ms {
            return Err(Error::Config(format!(
                "end ({}) is before start ({})",
                self.end_ms, self.start_ms
            )));
        }
        Ok(())
    }

    /// Number of time steps: (end − start) / interval, rounded down as TSBS does.
    pub fn epochs(&self) -> u64 {
        if self.interval_ms <= 0 || self.end_ms <= self.start_ms {
            return 0;
        }
        ((self.end_ms - self.start_ms) / self.interval_ms) as u64
    }

    /// Points of the unperturbed grid: epochs × scale × 2.
    pub fn max_points(&self) -> u64 {
        self.epochs() * self.scale as u64 * 2
    }
}

/// One generated point without its truck's tags (cheap to copy and to queue).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RawPoint {
    pub measurement: Measurement,
    pub truck: u32,
    pub ts_ms: i64,
    /// Bit i set: field i (in `Measurement::field_names` order) is NULL.
    pub null_fields: u8,
    /// Bit i set: tag i (in `TAG_NAMES` order) is NULL for this point only.
    pub null_tags: u8,
    /// Field values; only the first `num_fields()` are meaningful. Diagnostics' `status` is an
    /// exact integer stored as f64.
    pub values: [f64; 7],
}

/// Field values of a point; `None` is a NULL field.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fields {
    Readings([Option<f64>; 7]),
    Diagnostics {
        fuel_state: Option<f64>,
        current_load: Option<f64>,
        status: Option<i64>,
    },
}

/// A point as the writers see it: the raw point plus its truck's tags.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point<'a> {
    pub measurement: Measurement,
    pub truck: u32,
    pub ts_ms: i64,
    pub tags: &'a TruckTags,
    /// Bit i set: tag i is NULL for this point (TSBS `zeroTagChance`); see [`Point::tag`].
    pub null_tags: u8,
    pub fields: Fields,
}

impl<'a> Point<'a> {
    pub fn new(raw: &RawPoint, tags: &'a TruckTags) -> Point<'a> {
        let v = |i: usize| (raw.null_fields & (1 << i) == 0).then_some(raw.values[i]);
        let fields = match raw.measurement {
            Measurement::Readings => Fields::Readings([v(0), v(1), v(2), v(3), v(4), v(5), v(6)]),
            Measurement::Diagnostics => Fields::Diagnostics {
                fuel_state: v(0),
                current_load: v(1),
                status: v(2).map(|s| s as i64),
            },
        };
        Point {
            measurement: raw.measurement,
            truck: raw.truck,
            ts_ms: raw.ts_ms,
            tags,
            null_tags: raw.null_tags,
            fields,
        }
    }

    /// Tag `i` in `TAG_NAMES` order, `None` when nulled for this point.
    pub fn tag(&self, i: usize) -> Option<TagValue<'a>> {
        if self.null_tags & (1 << i) != 0 {
            return None;
        }
        self.tags.get(i)
    }

    /// The `name` tag, `None` for TSBS's null-name points.
    pub fn name(&self) -> Option<&'a str> {
        (self.null_tags & 1 == 0).then_some(self.tags.name.as_str())
    }

    /// Field `i` as f64 (`status` converted), `None` when NULL or out of range.
    pub fn field(&self, i: usize) -> Option<f64> {
        match (&self.fields, i) {
            (Fields::Readings(v), _) => v.get(i).copied().flatten(),
            (Fields::Diagnostics { fuel_state, .. }, 0) => *fuel_state,
            (Fields::Diagnostics { current_load, .. }, 1) => *current_load,
            (Fields::Diagnostics { status, .. }, 2) => status.map(|s| s as f64),
            _ => None,
        }
    }
}

const BATCH_SIZE: usize = 10;
const B_MISSING_CHANCE: f64 = 0.01;
const B_OUT_OF_ORDER_CHANCE: f64 = 0.05;
const B_INSERT_PREVIOUS_CHANCE: f64 = 0.5;
const E_MISSING_CHANCE: f64 = 0.1;
const E_OUT_OF_ORDER_CHANCE: f64 = 0.3;
const E_INSERT_PREVIOUS_CHANCE: f64 = 0.5;
const ZERO_TAG_CHANCE: f64 = 0.01;
const ZERO_FIELD_CHANCE: f64 = 0.1;

/// TSBS `batchConfig`; the per-slot maps are bit masks and small arrays (slots 0..10).
#[derive(Default)]
struct BatchConfig {
    insert_previous: bool,
    missing: bool,
    out_of_order: bool,
    insert_previous_entry: u16,
    missing_entries: u16,
    out_of_order_entries: u16,
    zero_fields: [Option<u8>; BATCH_SIZE],
    zero_tags: [Option<u8>; BATCH_SIZE],
}

#[inline]
fn bit(mask: u16, slot: usize) -> bool {
    slot < BATCH_SIZE && mask & (1 << slot) != 0
}

impl BatchConfig {
    /// TSBS `newBatchConfig`, draw for draw.
    fn draw(rng: &mut Rng, held_batches: usize, mut held_entries: usize) -> BatchConfig {
        let mut bc = BatchConfig::default();
        if rng.float64() < B_MISSING_CHANCE {
            bc.missing = true;
            return bc;
        }
        bc.out_of_order = rng.float64() < B_OUT_OF_ORDER_CHANCE;
        if held_batches > 0 {
            bc.insert_previous = rng.float64() < B_INSERT_PREVIOUS_CHANCE;
        }
        for i in 0..BATCH_SIZE {
            if held_entries > 0 && rng.float64() < E_INSERT_PREVIOUS_CHANCE {
                bc.insert_previous_entry |= 1 << i;
                held_entries -= 1;
            }
            if rng.float64() < E_MISSING_CHANCE {
                bc.missing_entries |= 1 << i;
                continue;
            }
            if rng.float64() < ZERO_FIELD_CHANCE {
                bc.zero_fields[i] = Some(rng.below(MAX_FIELD_COUNT) as u8);
            }
            if rng.float64() < ZERO_TAG_CHANCE {
                bc.zero_tags[i] = Some(rng.below(NUM_TAGS as u64) as u8);
            }
            if rng.float64() < E_OUT_OF_ORDER_CHANCE {
                bc.out_of_order_entries |= 1 << i;
            }
        }
        bc
    }
}

/// The deterministic TSBS IoT point stream for one [`Config`].
///
/// `next_raw`/`next_point` yield points in TSBS order; the same config gives the same stream
/// on every run and machine.
pub struct Generator {
    cfg: Config,
    rng: Rng,
    tags: Vec<TruckTags>,
    sims: Vec<TruckSim>,
    shared: SharedState,
    epochs: u64,
    // Base simulator.
    made: u64,
    max_points: u64,
    gen_index: usize,
    meas_index: usize,
    epoch: u64,
    // IoT simulator.
    curr: Vec<RawPoint>,
    cursor: usize,
    held_batches: VecDeque<Vec<RawPoint>>,
    held_entries: VecDeque<RawPoint>,
}

impl Generator {
    pub fn new(cfg: Config) -> Result<Generator, Error> {
        cfg.validate()?;
        let mut rng = Rng::new(cfg.seed);
        let mut tags = Vec::with_capacity(cfg.scale as usize);
        let mut sims = Vec::with_capacity(cfg.scale as usize);
        for i in 0..cfg.scale {
            // TSBS creates the measurements' distributions before drawing the tags.
            sims.push(TruckSim::new(&mut rng));
            tags.push(TruckTags::draw(i, &mut rng));
        }
        Ok(Generator {
            epochs: cfg.epochs(),
            max_points: cfg.max_points(),
            cfg,
            rng,
            tags,
            sims,
            shared: SharedState::default(),
            made: 0,
            gen_index: 0,
            meas_index: 0,
            epoch: 0,
            curr: Vec::with_capacity(BATCH_SIZE),
            cursor: 0,
            held_batches: VecDeque::new(),
            held_entries: VecDeque::new(),
        })
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Tags of every truck, indexed by truck number.
    pub fn trucks(&self) -> &[TruckTags] {
        &self.tags
    }

    /// Attaches the truck's tags to a raw point.
    pub fn view(&self, raw: &RawPoint) -> Point<'_> {
        Point::new(raw, &self.tags[raw.truck as usize])
    }

    /// The next point with its tags.
    pub fn next_point(&mut self) -> Option<Point<'_>> {
        let raw = self.next_raw()?;
        Some(self.view(&raw))
    }

    /// The next point, tags by truck number (see [`Generator::trucks`]).
    pub fn next_raw(&mut self) -> Option<RawPoint> {
        let end_ts = self.cfg.start_ms + self.epochs as i64 * self.cfg.interval_ms;
        loop {
            let p = if !self.cfg.perturbations {
                if self.base_finished() {
                    return None;
                }
                self.base_next()
            } else if self.cursor < self.curr.len() {
                self.cursor += 1;
                self.curr[self.cursor - 1]
            } else if self.simulate_next_batch() {
                continue;
            } else {
                return None;
            };
            // Points TSBS pulls past the end of the range (see the module doc).
            if p.ts_ms < end_ts {
                return Some(p);
            }
        }
    }

    fn base_finished(&self) -> bool {
        self.made >= self.max_points
    }

    /// TSBS `BaseSimulator.Next`: ticks lazily when the first point of a new epoch is asked for.
    fn base_next(&mut self) -> RawPoint {
        if self.gen_index == self.sims.len() {
            self.gen_index = 0;
            self.meas_index += 1;
        }
        if self.meas_index == Measurement::ALL.len() {
            self.meas_index = 0;
            for s in &mut self.sims {
                s.tick(&mut self.rng, &mut self.shared);
            }
            self.epoch += 1;
        }
        let sim = &self.sims[self.gen_index];
        let measurement = Measurement::ALL[self.meas_index];
        let mut values = [0.0; 7];
        match measurement {
            Measurement::Readings => values = sim.readings(),
            Measurement::Diagnostics => values[..3].copy_from_slice(&sim.diagnostics(&self.shared)),
        }
        let p = RawPoint {
            measurement,
            truck: self.gen_index as u32,
            ts_ms: self.cfg.start_ms + self.epoch as i64 * self.cfg.interval_ms,
            null_fields: 0,
            null_tags: 0,
            values,
        };
        self.made += 1;
        self.gen_index += 1;
        p
    }

    /// TSBS `simulateNextBatch` (its tail recursion as a loop). Fills `curr`; false when done.
    fn simulate_next_batch(&mut self) -> bool {
        self.curr.clear();
        self.cursor = 0;
        loop {
            if self.base_finished() {
                // TSBS `batchPending`: held batches first, then held entries 10 at a time.
                if let Some(b) = self.held_batches.pop_front() {
                    self.curr = b;
                    return true;
                }
                if self.held_entries.is_empty() {
                    return false;
                }
                let n = self.held_entries.len().min(BATCH_SIZE);
                self.curr.extend(self.held_entries.drain(..n));
                return true;
            }
            let bc = BatchConfig::draw(
                &mut self.rng,
                self.held_batches.len(),
                self.held_entries.len(),
            );
            if bc.insert_previous {
                if let Some(b) = self.held_batches.pop_front() {
                    self.curr = b;
                    return true;
                }
            }
            if bc.missing {
                // TSBS `flushBatch`: 10 base points generated and dropped.
                for _ in 0..BATCH_SIZE {
                    self.base_next();
                }
                continue;
            }
            let mut batch = Vec::with_capacity(BATCH_SIZE);
            self.generate_batch(&bc, &mut batch);
            if bc.out_of_order {
                if !batch.is_empty() {
                    self.held_batches.push_back(batch);
                }
                continue;
            }
            if batch.is_empty() {
                continue;
            }
            self.curr = batch;
            return true;
        }
    }

    /// TSBS `generateBatch`.
    fn generate_batch(&mut self, bc: &BatchConfig, out: &mut Vec<RawPoint>) {
        let mut offset = 0;
        for i in 0..BATCH_SIZE {
            if self.base_finished() {
                break;
            }
            let mut entry = self.next_entry(i, &mut offset, bc);
            if let Some(f) = bc.zero_fields[i] {
                let n = entry.measurement.num_fields() as u8;
                entry.null_fields |= 1 << (f % n);
            }
            if let Some(t) = bc.zero_tags[i] {
                entry.null_tags |= 1 << t;
            }
            out.push(entry);
        }
    }

    /// TSBS `getNextEntry`: replays or generates entries until one is neither dropped nor held.
    fn next_entry(&mut self, index: usize, offset: &mut usize, bc: &BatchConfig) -> RawPoint {
        loop {
            let slot = index + *offset;
            let entry = if bit(bc.insert_previous_entry, slot) {
                // The config never asks for more replays than there are held entries.
                match self.held_entries.pop_front() {
                    Some(e) => e,
                    None => self.base_next(),
                }
            } else {
                self.base_next()
            };
            if bit(bc.missing_entries, slot) {
                *offset += 1;
                continue;
            }
            if bit(bc.out_of_order_entries, slot) {
                self.held_entries.push_back(entry);
                *offset += 1;
                continue;
            }
            return entry;
        }
    }
}

/// The raw points in TSBS order; see [`Generator::view`] for their tags.
impl Iterator for Generator {
    type Item = RawPoint;

    fn next(&mut self) -> Option<RawPoint> {
        self.next_raw()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(perturbations: bool) -> Config {
        Config {
            scale: 3,
            end_ms: TSBS_START_MS + 3_600_000,
            perturbations,
            ..Config::default()
        }
    }

    #[test]
    fn clean_stream_is_the_full_grid_in_tsbs_order() {
        let cfg = small(false);
        let mut g = Generator::new(cfg.clone()).unwrap();
        let mut n = 0u64;
        for p in g.by_ref() {
            let epoch = n / 6;
            let k = (n % 6) as u32;
            assert_eq!(p.ts_ms, cfg.start_ms + epoch as i64 * 10_000);
            assert_eq!(p.measurement, Measurement::ALL[(k / 3) as usize]);
            assert_eq!(p.truck, k % 3);
            assert_eq!((p.null_fields, p.null_tags), (0, 0));
            n += 1;
        }
        assert_eq!(n, cfg.max_points());
    }

    #[test]
    fn first_epoch_reports_initial_states() {
        let mut g = Generator::new(small(false)).unwrap();
        for _ in 0..3 {
            let p = g.next_point().unwrap();
            let Fields::Readings(v) = p.fields else {
                panic!("readings first")
            };
            assert_eq!((v[3], v[5], v[6]), (Some(0.0), Some(0.0), Some(25.0)));
        }
        for _ in 0..3 {
            let p = g.next_point().unwrap();
            assert_eq!(
                p.fields,
                Fields::Diagnostics {
                    fuel_state: Some(1.0),
                    current_load: Some(0.0),
                    status: Some(0)
                }
            );
        }
    }

    #[test]
    fn perturbed_stream_keeps_every_point_once_at_most() {
        let cfg = Config {
            scale: 7,
            ..small(true)
        };
        let mut g = Generator::new(cfg.clone()).unwrap();
        let mut seen = std::collections::HashSet::new();
        while let Some(p) = g.next_raw() {
            assert!(p.ts_ms >= cfg.start_ms && p.ts_ms < cfg.end_ms);
            assert!(
                seen.insert((p.measurement, p.truck, p.ts_ms)),
                "duplicate {p:?}"
            );
        }
        let rate = seen.len() as f64 / cfg.max_points() as f64;
        assert!((0.85..0.95).contains(&rate), "{rate}");
    }

    #[test]
    fn invalid_configs_are_rejected() {
        for cfg in [
            Config {
                scale: 0,
                ..Config::default()
            },
            Config {
                interval_ms: 0,
                ..Config::default()
            },
            Config {
                end_ms: 0,
                ..Config::default()
            },
        ] {
            assert!(Generator::new(cfg).is_err());
        }
    }
}
