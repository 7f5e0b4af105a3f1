//! Statistics of a generated data set, the figures ../shared/tsbs-iot.md quotes for TSBS's own
//! output (rows per truck per day, missing, NULL-field, NULL-tag and out-of-order rates, value
//! ranges). The tests hold the generator to them; `examples/throughput.rs` prints them.

use crate::fields::Measurement;
use crate::generate::{Config, Error, Generator, Point};

/// Figures of one data set. Rates are fractions of emitted points unless stated.
#[derive(Clone, Debug, PartialEq)]
pub struct Stats {
    pub scale: u32,
    pub days: f64,
    /// Points of the unperturbed grid (epochs × scale × 2).
    pub possible_points: u64,
    pub points: u64,
    /// Emitted points per measurement: `[readings, diagnostics]`.
    pub per_measurement: [u64; 2],
    /// Emitted rows per truck per day, per measurement (TSBS without perturbations: 8640).
    pub rows_per_truck_per_day: [f64; 2],
    /// 1 − points / possible_points.
    pub missing_rate: f64,
    /// Points with at least one NULL field.
    pub null_field_points: u64,
    pub null_field_rate: f64,
    /// NULL field values / all field values.
    pub null_value_rate: f64,
    /// Points with at least one NULL tag.
    pub null_tag_points: u64,
    pub null_tag_rate: f64,
    /// Points whose `name` is NULL, per measurement (TSBS scale 100 × 1 day: 813 and 889).
    pub null_name_points: [u64; 2],
    /// Points whose timestamp is lower than the previous point's (TSBS: 15,594 of 1,554,681).
    pub out_of_order_points: u64,
    pub out_of_order_rate: f64,
    /// Points older than the newest point already emitted for the same (measurement, truck).
    pub series_regressions: u64,
    /// Points not on the interval grid or outside [start, end).
    pub off_grid_points: u64,
    pub min_ts: i64,
    pub max_ts: i64,
    /// Min and max of every field (NULLs excluded), in `field_names()` order.
    pub readings_min: [f64; 7],
    pub readings_max: [f64; 7],
    pub diagnostics_min: [f64; 3],
    pub diagnostics_max: [f64; 3],
    /// Distribution of `status` values 0..=5.
    pub status_counts: [u64; 6],
    /// Non-integer `status` values or `fuel_state` values off the 0.1 grid.
    pub bad_values: u64,
}

/// Accumulates [`Stats`] over a point stream in O(scale) memory.
pub struct StatsCollector {
    cfg: Config,
    s: Stats,
    null_values: u64,
    field_values: u64,
    last_ts: Option<i64>,
    series_last: Vec<i64>,
}

impl StatsCollector {
    pub fn new(cfg: &Config) -> StatsCollector {
        let days = (cfg.epochs() as f64 * cfg.interval_ms as f64) / crate::DAY_MS as f64;
        StatsCollector {
            cfg: cfg.clone(),
            s: Stats {
                scale: cfg.scale,
                days,
                possible_points: cfg.max_points(),
                points: 0,
                per_measurement: [0; 2],
                rows_per_truck_per_day: [0.0; 2],
                missing_rate: 0.0,
                null_field_points: 0,
                null_field_rate: 0.0,
                null_value_rate: 0.0,
                null_tag_points: 0,
                null_tag_rate: 0.0,
                null_name_points: [0; 2],
                out_of_order_points: 0,
                out_of_order_rate: 0.0,
                series_regressions: 0,
                off_grid_points: 0,
                min_ts: i64::MAX,
                max_ts: i64::MIN,
                readings_min: [f64::INFINITY; 7],
                readings_max: [f64::NEG_INFINITY; 7],
                diagnostics_min: [f64::INFINITY; 3],
                diagnostics_max: [f64::NEG_INFINITY; 3],
                status_counts: [0; 6],
                bad_values: 0,
            },
            null_values: 0,
            field_values: 0,
            last_ts: None,
            series_last: vec![i64::MIN; cfg.scale as usize * 2],
        }
    }

    pub fn observe(&mut self, p: &Point) {
        let s = &mut self.s;
        let mi = p.measurement.index();
        s.points += 1;
        s.per_measurement[mi] += 1;
        if p.null_tags != 0 {
            s.null_tag_points += 1;
        }
        if p.name().is_none() {
            s.null_name_points[mi] += 1;
        }
        if self.last_ts.is_some_and(|t| p.ts_ms < t) {
            s.out_of_order_points += 1;
        }
        self.last_ts = Some(p.ts_ms);
        if let Some(last) = self.series_last.get_mut(p.truck as usize * 2 + mi) {
            if p.ts_ms < *last {
                s.series_regressions += 1;
            } else {
                *last = p.ts_ms;
            }
        }
        let rel = p.ts_ms - self.cfg.start_ms;
        if p.ts_ms >= self.cfg.end_ms || rel < 0 || rel % self.cfg.interval_ms != 0 {
            s.off_grid_points += 1;
        }
        s.min_ts = s.min_ts.min(p.ts_ms);
        s.max_ts = s.max_ts.max(p.ts_ms);
        let n = p.measurement.num_fields();
        let (mins, maxs): (&mut [f64], &mut [f64]) = match p.measurement {
            Measurement::Readings => (&mut s.readings_min, &mut s.readings_max),
            Measurement::Diagnostics => (&mut s.diagnostics_min, &mut s.diagnostics_max),
        };
        let mut any_null = false;
        for i in 0..n {
            self.field_values += 1;
            match p.field(i) {
                None => {
                    any_null = true;
                    self.null_values += 1;
                }
                Some(v) => {
                    mins[i] = mins[i].min(v);
                    maxs[i] = maxs[i].max(v);
                }
            }
        }
        if any_null {
            s.null_field_points += 1;
        }
        if p.measurement == Measurement::Diagnostics {
            if let Some(st) = p.field(2) {
                match s.status_counts.get_mut(st as usize) {
                    Some(c) if st.fract() == 0.0 => *c += 1,
                    _ => s.bad_values += 1,
                }
            }
            if let Some(f) = p.field(0) {
                let tenths = f * 10.0;
                if (tenths - tenths.round()).abs() > 1e-9 {
                    s.bad_values += 1;
                }
            }
        }
    }

    pub fn finish(self) -> Stats {
        let mut s = self.s;
        let pts = s.points.max(1) as f64;
        let truck_days = s.scale as f64 * s.days;
        for i in 0..2 {
            s.rows_per_truck_per_day[i] = if truck_days > 0.0 {
                s.per_measurement[i] as f64 / truck_days
            } else {
                0.0
            };
        }
        s.missing_rate = if s.possible_points > 0 {
            1.0 - s.points as f64 / s.possible_points as f64
        } else {
            0.0
        };
        s.null_field_rate = s.null_field_points as f64 / pts;
        s.null_value_rate = self.null_values as f64 / self.field_values.max(1) as f64;
        s.null_tag_rate = s.null_tag_points as f64 / pts;
        s.out_of_order_rate = s.out_of_order_points as f64 / pts;
        s
    }
}

/// Generates the whole data set of `cfg` and returns its statistics.
pub fn collect(cfg: &Config) -> Result<Stats, Error> {
    let mut g = Generator::new(cfg.clone())?;
    let mut c = StatsCollector::new(cfg);
    while let Some(p) = g.next_point() {
        c.observe(&p);
    }
    Ok(c.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{DAY_MS, TSBS_START_MS};

    fn within(name: &str, v: f64, lo: f64, hi: f64) {
        assert!((lo..=hi).contains(&v), "{name} = {v}, expected {lo}..={hi}");
    }

    /// Scale 100 for 6 hours: 432,000 possible points, the doc's per-epoch density (200 points
    /// per epoch) so that its scale-100 figures apply.
    #[test]
    fn perturbed_set_matches_the_doc() {
        let cfg = Config {
            scale: 100,
            end_ms: TSBS_START_MS + DAY_MS / 4,
            ..Config::default()
        };
        let s = collect(&cfg).unwrap();
        // Doc: 1,554,681 of 1,728,000 points emitted (10.03% missing); 777,613 readings and
        // 777,068 diagnostics, i.e. 7776 and 7771 rows per truck per day.
        within("missing_rate", s.missing_rate, 0.09, 0.11);
        for rows in s.rows_per_truck_per_day {
            within("rows/truck/day", rows, 8640.0 * 0.89, 8640.0 * 0.91);
        }
        // 10% zero-field draws on the 90% of slots that are not dropped.
        within("null_field_rate", s.null_field_rate, 0.08, 0.10);
        // 1% zero-tag draws on 90% of slots; 1/8 of them hit `name` (doc: 813/777,613 and
        // 889/777,068 = 0.10% and 0.11%).
        within("null_tag_rate", s.null_tag_rate, 0.007, 0.011);
        for n in s.null_name_points {
            within(
                "null_name_rate",
                n as f64 / s.per_measurement[0] as f64,
                0.0007,
                0.0016,
            );
        }
        // Doc: 15,594 of 1,554,681 lines (1.00%) are older than the line before.
        within("out_of_order_rate", s.out_of_order_rate, 0.007, 0.013);
        // Doc: 0 per-series regressions at 200 points per epoch.
        assert!(s.series_regressions <= 3, "{}", s.series_regressions);
        assert_eq!(s.off_grid_points, 0);
        assert_eq!(s.bad_values, 0);
        assert_eq!(s.min_ts, cfg.start_ms);
        assert_eq!(s.max_ts, cfg.end_ms - cfg.interval_ms);
        check_ranges(&s);
        // Status: 0 is the most common value, about a quarter (doc §1.3).
        let total: u64 = s.status_counts.iter().sum();
        let zero = s.status_counts[0] as f64 / total as f64;
        within("status=0 share", zero, 0.18, 0.32);
        assert!(s.status_counts.iter().all(|c| *c <= s.status_counts[0]));
    }

    fn check_ranges(s: &Stats) {
        let clamps = [
            (-90.0, 90.0),
            (-180.0, 180.0),
            (0.0, 5000.0),
            (0.0, 100.0),
            (0.0, 360.0),
            (0.0, 100.0),
            (0.0, 50.0),
        ];
        for (i, (lo, hi)) in clamps.iter().enumerate() {
            within("readings min", s.readings_min[i], *lo, *hi);
            within("readings max", s.readings_max[i], *lo, *hi);
        }
        // Velocity, grade and fuel consumption random-walk between their clamps within hours.
        assert_eq!((s.readings_min[3], s.readings_max[3]), (0.0, 100.0));
        assert_eq!((s.readings_min[5], s.readings_max[5]), (0.0, 100.0));
        assert_eq!((s.readings_min[6], s.readings_max[6]), (0.0, 50.0));
        within("fuel_state min", s.diagnostics_min[0], 0.0, 0.9);
        assert_eq!(s.diagnostics_max[0], 1.0);
        within("current_load", s.diagnostics_min[1], 0.0, 0.0);
        within("current_load max", s.diagnostics_max[1], 4000.0, 4999.0);
        assert_eq!((s.diagnostics_min[2], s.diagnostics_max[2]), (0.0, 5.0));
    }

    #[test]
    fn clean_set_is_complete() {
        let cfg = Config {
            scale: 10,
            end_ms: TSBS_START_MS + DAY_MS,
            perturbations: false,
            ..Config::default()
        };
        let s = collect(&cfg).unwrap();
        assert_eq!(s.points, 10 * 8640 * 2);
        assert_eq!(s.rows_per_truck_per_day, [8640.0, 8640.0]);
        assert_eq!(s.missing_rate, 0.0);
        assert_eq!(s.null_field_points + s.null_tag_points, 0);
        assert_eq!(s.out_of_order_points, 0);
        assert_eq!(s.series_regressions, 0);
        check_ranges(&s);
    }

    #[test]
    fn small_scales_reorder_a_truck_s_own_series() {
        // Doc: with fewer than ~50 points per epoch, per-series out-of-order points occur.
        let cfg = Config {
            scale: 2,
            end_ms: TSBS_START_MS + DAY_MS / 4,
            ..Config::default()
        };
        let s = collect(&cfg).unwrap();
        assert!(s.series_regressions > 0);
        assert_eq!(s.off_grid_points, 0);
    }
}
