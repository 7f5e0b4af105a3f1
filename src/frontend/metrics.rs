//! Statement counters and latency histograms of this process's SQL frontend (the node that
//! coordinates a statement), exposed by `GET /metrics`. Process-wide: every `SqlService` of
//! the process records here.
//!
//! A statement is recorded when it ends, by a [`StatementTimer`]: a streamed query when its
//! last row has been read (or it failed, or its reader dropped it), not when its stream opens.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tidal_common::{HistogramSnapshot, LatencyHistogram};
use tidal_proto::v1;
use tidal_sql::Statement;

/// The kinds statements are counted by (the `kind` label of the metrics).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatementKind {
    Select,
    Insert,
    Create,
    Drop,
    Alter,
    Show,
    Describe,
    Use,
    Delete,
    Explain,
    /// FLUSH / COMPACT DATABASE, KILL QUERY.
    Admin,
    /// Statements of kinds added since this list was written.
    Other,
    /// Text that did not parse.
    Invalid,
}

impl StatementKind {
    pub const ALL: [StatementKind; 13] = [
        StatementKind::Select,
        StatementKind::Insert,
        StatementKind::Create,
        StatementKind::Drop,
        StatementKind::Alter,
        StatementKind::Show,
        StatementKind::Describe,
        StatementKind::Use,
        StatementKind::Delete,
        StatementKind::Explain,
        StatementKind::Admin,
        StatementKind::Other,
        StatementKind::Invalid,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            StatementKind::Select => "select",
            StatementKind::Insert => "insert",
            StatementKind::Create => "create",
            StatementKind::Drop => "drop",
            StatementKind::Alter => "alter",
            StatementKind::Show => "show",
            StatementKind::Describe => "describe",
            StatementKind::Use => "use",
            StatementKind::Delete => "delete",
            StatementKind::Explain => "explain",
            StatementKind::Admin => "admin",
            StatementKind::Other => "other",
            StatementKind::Invalid => "invalid",
        }
    }

    pub fn of(s: &Statement) -> StatementKind {
        match s {
            Statement::Select(_) => StatementKind::Select,
            Statement::Insert { .. } | Statement::InsertSelect { .. } => StatementKind::Insert,
            Statement::CreateDatabase { .. }
            | Statement::CreateStable { .. }
            | Statement::CreateTables { .. } => StatementKind::Create,
            Statement::DropDatabase { .. }
            | Statement::DropTable { .. }
            | Statement::DropStable { .. } => StatementKind::Drop,
            Statement::AlterDatabase { .. }
            | Statement::AlterStable { .. }
            | Statement::AlterTableSetTags { .. } => StatementKind::Alter,
            Statement::ShowDatabases
            | Statement::ShowStables { .. }
            | Statement::ShowTables { .. }
            | Statement::ShowVgroups { .. }
            | Statement::ShowDnodes
            | Statement::ShowMnodes
            | Statement::ShowTableTags { .. }
            | Statement::ShowTags { .. }
            | Statement::ShowCreateDatabase { .. }
            | Statement::ShowCreateTable { .. }
            | Statement::ShowQueries
            | Statement::ShowGrants
            | Statement::ShowCluster
            | Statement::ShowVariables { .. }
            | Statement::ShowVnodes { .. }
            | Statement::ShowTableDistributed { .. } => StatementKind::Show,
            Statement::Describe { .. } => StatementKind::Describe,
            Statement::Use { .. } => StatementKind::Use,
            Statement::Delete { .. } => StatementKind::Delete,
            Statement::Explain { .. } => StatementKind::Explain,
            Statement::FlushDatabase { .. }
            | Statement::CompactDatabase { .. }
            | Statement::KillQuery { .. } => StatementKind::Admin,
            #[allow(unreachable_patterns)]
            _ => StatementKind::Other,
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

struct KindMetrics {
    ok: AtomicU64,
    errors: AtomicU64,
    latency: LatencyHistogram,
}

/// Counters of one statement kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KindSnapshot {
    pub kind: StatementKind,
    pub ok: u64,
    pub errors: u64,
    /// Latency of every statement of this kind, failed ones included.
    pub latency: HistogramSnapshot,
}

static STATEMENTS: [KindMetrics; StatementKind::ALL.len()] = [const {
    KindMetrics {
        ok: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        latency: LatencyHistogram::new(),
    }
}; StatementKind::ALL.len()];

/// Records one statement's outcome and duration.
pub fn record(kind: StatementKind, ok: bool, elapsed: Duration) {
    let m = &STATEMENTS[kind.index()];
    if ok {
        m.ok.fetch_add(1, Ordering::Relaxed);
    } else {
        m.errors.fetch_add(1, Ordering::Relaxed);
    }
    m.latency.observe(elapsed);
}

/// Records one statement when it ends. [`StatementTimer::finish`] records its outcome; a
/// timer dropped unfinished records a failure, because the statement did not deliver its
/// result: it was killed or timed out (its future dropped), its client went away mid-request,
/// or the reader of its stream dropped it before the end.
#[derive(Debug)]
pub struct StatementTimer {
    kind: StatementKind,
    start: Instant,
    recorded: bool,
}

impl StatementTimer {
    /// Starts timing a statement of `kind` now.
    pub fn start(kind: StatementKind) -> StatementTimer {
        StatementTimer {
            kind,
            start: Instant::now(),
            recorded: false,
        }
    }

    /// Records the statement as succeeded (`ok`) or failed, with its duration until now.
    pub fn finish(mut self, ok: bool) {
        self.record(ok);
    }

    fn record(&mut self, ok: bool) {
        if !self.recorded {
            self.recorded = true;
            record(self.kind, ok, self.start.elapsed());
        }
    }
}

impl Drop for StatementTimer {
    fn drop(&mut self) {
        self.record(false);
    }
}

/// The counters of every kind, in [`StatementKind::ALL`] order.
pub fn snapshot() -> Vec<KindSnapshot> {
    StatementKind::ALL
        .iter()
        .map(|k| {
            let m = &STATEMENTS[k.index()];
            KindSnapshot {
                kind: *k,
                ok: m.ok.load(Ordering::Relaxed),
                errors: m.errors.load(Ordering::Relaxed),
                latency: m.latency.snapshot(),
            }
        })
        .collect()
}

/// This process's counters as they travel to `GET /metrics` (kinds without statements are
/// left out).
pub fn to_wire() -> Vec<v1::StatementStats> {
    snapshot()
        .into_iter()
        .filter(|k| k.ok + k.errors > 0)
        .map(|k| v1::StatementStats {
            kind: k.kind.as_str().to_string(),
            ok: k.ok,
            errors: k.errors,
            latency_buckets: k.latency.counts.to_vec(),
            latency_nanos_sum: k.latency.sum_nanos,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_indexed_in_order_and_classified() {
        for (i, k) in StatementKind::ALL.iter().enumerate() {
            assert_eq!(k.index(), i);
        }
        let kind = |sql: &str| StatementKind::of(&tidal_sql::parse(sql).unwrap()[0]);
        assert_eq!(kind("SELECT * FROM t"), StatementKind::Select);
        assert_eq!(kind("SHOW DATABASES"), StatementKind::Show);
        assert_eq!(kind("CREATE DATABASE d"), StatementKind::Create);
        assert_eq!(kind("USE d"), StatementKind::Use);
    }

    /// The counters are process-wide and other tests record too: only this test uses the
    /// `Other` kind, so its counts move only by what the timers below record.
    #[test]
    fn timers_record_once_at_the_end_with_their_duration() {
        let of = || {
            let k = snapshot()[StatementKind::Other.index()];
            (k.ok, k.errors, k.latency.sum_nanos)
        };
        let (ok0, err0, sum0) = of();
        let t = StatementTimer::start(StatementKind::Other);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(
            of(),
            (ok0, err0, sum0),
            "nothing is recorded before the end"
        );
        t.finish(true);
        let (ok1, err1, sum1) = of();
        assert_eq!((ok1, err1), (ok0 + 1, err0));
        assert!(
            sum1 - sum0 >= 20_000_000,
            "the whole duration: {}",
            sum1 - sum0
        );
        // Dropped before its end: a failure, recorded once.
        drop(StatementTimer::start(StatementKind::Other));
        assert_eq!(of().0, ok1);
        assert_eq!(of().1, err1 + 1);
    }
}
