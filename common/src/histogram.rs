//! Latency histograms with fixed bucket bounds, shared by the vnode (WAL fsync latency) and the
//! SQL frontend (statement latency) and exposed by `GET /metrics` in Prometheus form.
//!
//! Every histogram uses the same bounds ([`LATENCY_BOUNDS_SECONDS`]) so that a snapshot is a
//! fixed-size array that travels over the wire as a plain list of counts; recording is a couple
//! of relaxed atomic increments, cheap enough for the write path.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds (inclusive, seconds) of the buckets; one more bucket counts everything above the
/// last bound (`+Inf`). From 50 µs (a page-cache fsync, a cached LAST_ROW) to 10 s.
pub const LATENCY_BOUNDS_SECONDS: [f64; 16] = [
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 10.0,
];

/// Number of buckets including the `+Inf` one.
pub const LATENCY_BUCKETS: usize = LATENCY_BOUNDS_SECONDS.len() + 1;

/// A histogram of durations; shareable between threads.
#[derive(Debug)]
pub struct LatencyHistogram {
    /// Per-bucket (not cumulative) counts; the last one is `+Inf`.
    counts: [AtomicU64; LATENCY_BUCKETS],
    sum_nanos: AtomicU64,
}

/// A point-in-time copy of a [`LatencyHistogram`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HistogramSnapshot {
    /// Per-bucket (not cumulative) counts, one per bound of [`LATENCY_BOUNDS_SECONDS`] plus `+Inf`.
    pub counts: [u64; LATENCY_BUCKETS],
    pub sum_nanos: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram::new()
    }
}

impl LatencyHistogram {
    pub const fn new() -> LatencyHistogram {
        LatencyHistogram {
            counts: [const { AtomicU64::new(0) }; LATENCY_BUCKETS],
            sum_nanos: AtomicU64::new(0),
        }
    }

    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        let i = LATENCY_BOUNDS_SECONDS
            .iter()
            .position(|b| secs <= *b)
            .unwrap_or(LATENCY_BOUNDS_SECONDS.len());
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot {
            counts: std::array::from_fn(|i| self.counts[i].load(Ordering::Relaxed)),
            sum_nanos: self.sum_nanos.load(Ordering::Relaxed),
        }
    }
}

impl HistogramSnapshot {
    /// Number of observations.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Rebuilds a snapshot from per-bucket counts received over the wire; `None` when their
    /// number does not match [`LATENCY_BUCKETS`] (a peer built with other bounds).
    pub fn from_counts(counts: &[u64], sum_nanos: u64) -> Option<HistogramSnapshot> {
        Some(HistogramSnapshot {
            counts: counts.try_into().ok()?,
            sum_nanos,
        })
    }

    /// Adds another snapshot's observations to this one.
    pub fn merge(&mut self, other: &HistogramSnapshot) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
        self.sum_nanos += other.sum_nanos;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_land_in_the_first_bucket_whose_bound_holds_them() {
        let h = LatencyHistogram::new();
        h.observe(Duration::from_micros(50)); // exactly the first bound: inclusive
        h.observe(Duration::from_micros(51));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(60));
        let s = h.snapshot();
        assert_eq!(s.counts[0], 1);
        assert_eq!(s.counts[1], 1);
        assert_eq!(s.counts[6], 1, "3 ms is in (2.5 ms, 5 ms]");
        assert_eq!(s.counts[LATENCY_BUCKETS - 1], 1, "60 s is +Inf");
        assert_eq!(s.count(), 4);
        assert_eq!(s.sum_nanos, 50_000 + 51_000 + 3_000_000 + 60_000_000_000);
    }

    #[test]
    fn wire_counts_must_match_the_bounds() {
        let s = HistogramSnapshot::from_counts(&[1; LATENCY_BUCKETS], 7).unwrap();
        assert_eq!(s.count(), LATENCY_BUCKETS as u64);
        assert!(HistogramSnapshot::from_counts(&[1, 2], 7).is_none());
        let mut m = s;
        m.merge(&s);
        assert_eq!(m.count(), 2 * LATENCY_BUCKETS as u64);
        assert_eq!(m.sum_nanos, 14);
    }
}
