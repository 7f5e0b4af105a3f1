//! Per-query memory accounting: a [`MemoryBudget`] is shared by everything one query (or one
//! fragment on a data node) holds — gathered fragment results, aggregation group state, sort
//! buffers, FILL and window output, result buffers — and refuses a reservation that would
//! take the total past the limit, so a query that would outgrow it fails with a clear error
//! instead of growing until the OOM killer ends the process.
//!
//! Sizes are estimates of the heap bytes of [`Batch`]es and states (vector payloads plus
//! per-string overhead), not allocator measurements: the limit bounds the order of magnitude
//! of what a query holds, which is what keeps a node alive.

use crate::error::SqlError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tidal_common::types::PhysicalType;
use tidal_common::{Batch, Column, ColumnData, DataType, Field};

/// Heap bytes a `String` costs beyond its characters (the `String` itself and allocator
/// rounding).
const STRING_OVERHEAD_BYTES: u64 = 32;

/// Memory one query may hold; cheap to clone (clones share the account).
#[derive(Clone, Debug)]
pub struct MemoryBudget {
    inner: Arc<Account>,
}

#[derive(Debug)]
struct Account {
    /// 0 = no limit.
    limit_bytes: u64,
    used: AtomicU64,
    peak: AtomicU64,
    /// The configuration key that sets the limit, named in the error.
    key: &'static str,
}

impl MemoryBudget {
    /// A budget of `limit_bytes` (0 = unlimited) set by the configuration key `key`.
    pub fn new(limit_bytes: u64, key: &'static str) -> MemoryBudget {
        MemoryBudget {
            inner: Arc::new(Account {
                limit_bytes,
                used: AtomicU64::new(0),
                peak: AtomicU64::new(0),
                key,
            }),
        }
    }

    /// A budget that accounts but never refuses.
    pub fn unlimited() -> MemoryBudget {
        MemoryBudget::new(0, "query_memory_max_bytes")
    }

    pub fn limit_bytes(&self) -> u64 {
        self.inner.limit_bytes
    }

    /// Bytes reserved now.
    pub fn used_bytes(&self) -> u64 {
        self.inner.used.load(Ordering::Relaxed)
    }

    /// The most bytes reserved at once so far.
    pub fn peak_bytes(&self) -> u64 {
        self.inner.peak.load(Ordering::Relaxed)
    }

    /// Reserves `bytes` for `what` (named in the error: "GROUP BY state", "sort buffer"...);
    /// released when the returned reservation drops.
    pub fn reserve(&self, bytes: u64, what: &str) -> Result<Reservation, SqlError> {
        let mut r = Reservation {
            budget: self.clone(),
            bytes: 0,
        };
        r.resize(bytes, what)?;
        Ok(r)
    }

    /// Whether `bytes` more would fit now, without reserving them.
    pub fn check(&self, bytes: u64, what: &str) -> Result<(), SqlError> {
        self.reserve(bytes, what).map(drop)
    }

    fn exceeded(&self, what: &str) -> SqlError {
        SqlError::ResourceExhausted(format!(
            "query memory limit exceeded: {what} needs more than {} bytes ({}); add a filter or raise the limit",
            self.inner.limit_bytes, self.inner.key
        ))
    }
}

/// Bytes held against a [`MemoryBudget`]; given back when dropped.
#[derive(Debug)]
pub struct Reservation {
    budget: MemoryBudget,
    bytes: u64,
}

impl Reservation {
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Changes the reservation to `bytes` (growing fails past the limit, and then leaves the
    /// reservation as it was).
    pub fn resize(&mut self, bytes: u64, what: &str) -> Result<(), SqlError> {
        let a = &self.budget.inner;
        if bytes <= self.bytes {
            a.used.fetch_sub(self.bytes - bytes, Ordering::Relaxed);
            self.bytes = bytes;
            return Ok(());
        }
        let more = bytes - self.bytes;
        let mut cur = a.used.load(Ordering::Relaxed);
        loop {
            let next = cur.saturating_add(more);
            if a.limit_bytes > 0 && next > a.limit_bytes {
                return Err(self.budget.exceeded(what));
            }
            match a
                .used
                .compare_exchange_weak(cur, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => {
                    a.peak.fetch_max(next, Ordering::Relaxed);
                    self.bytes = bytes;
                    return Ok(());
                }
                Err(seen) => cur = seen,
            }
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget
            .inner
            .used
            .fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

/// Estimated heap bytes of one column.
pub fn column_bytes(c: &Column) -> u64 {
    let n = c.len() as u64;
    let data = match &c.data {
        ColumnData::Bool(_) => n,
        ColumnData::Int(_) | ColumnData::UInt(_) | ColumnData::Float(_) => 8 * n,
        ColumnData::Timestamp(_) => 8 * n,
        ColumnData::Str(v) => v
            .iter()
            .map(|s| s.len() as u64 + STRING_OVERHEAD_BYTES)
            .sum(),
    };
    data + c.nulls.len() as u64
}

/// Estimated heap bytes of a batch's columns.
pub fn batch_bytes(b: &Batch) -> u64 {
    b.columns.iter().map(column_bytes).sum()
}

/// Estimated bytes of one value of type `t` held in a column (strings at their declared
/// length, capped: names and tags are short in practice).
pub fn type_bytes(t: DataType) -> u64 {
    match t.physical() {
        PhysicalType::Bool => 1,
        PhysicalType::Str => {
            let declared = match t {
                DataType::VarChar(n) | DataType::NChar(n) => u64::from(n),
                _ => 0,
            };
            STRING_OVERHEAD_BYTES + declared.min(32)
        }
        _ => 8,
    }
}

/// Estimated bytes of one row of `fields` (one group of an aggregation whose partial output
/// has these fields, for instance).
pub fn row_bytes(fields: &[Field]) -> u64 {
    fields.iter().map(|f| type_bytes(f.data_type) + 1).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_are_bounded_and_given_back() {
        let b = MemoryBudget::new(100, "query_memory_max_bytes");
        let r1 = b.reserve(60, "sort buffer").unwrap();
        let e = b.reserve(41, "GROUP BY state").unwrap_err();
        assert_eq!(
            e.to_string(),
            "query memory limit exceeded: GROUP BY state needs more than 100 bytes \
             (query_memory_max_bytes); add a filter or raise the limit"
        );
        assert_eq!(e.status_code(), tidal_common::StatusCode::ResourceExhausted);
        let mut r2 = b.reserve(40, "x").unwrap();
        assert_eq!(b.used_bytes(), 100);
        assert!(r2.resize(50, "x").is_err());
        assert_eq!(r2.bytes(), 40);
        r2.resize(10, "x").unwrap();
        assert_eq!(b.used_bytes(), 70);
        drop(r1);
        drop(r2);
        assert_eq!(b.used_bytes(), 0);
        assert_eq!(b.peak_bytes(), 100);
        // Unlimited budgets account without refusing.
        let u = MemoryBudget::unlimited();
        let big = u.reserve(u64::MAX / 2, "x").unwrap();
        assert_eq!(u.used_bytes(), u64::MAX / 2);
        drop(big);
        assert_eq!(u.used_bytes(), 0);
    }

    #[test]
    fn batch_sizes_count_payload_and_strings() {
        let b = Batch::new(
            vec![
                Field::new("a", DataType::BigInt),
                Field::new("s", DataType::VarChar(8)),
            ],
            vec![
                Column::new(ColumnData::Int(vec![1, 2, 3])),
                Column::new(ColumnData::Str(vec!["ab".into(), "".into(), "xyz".into()])),
            ],
        );
        assert_eq!(batch_bytes(&b), 24 + (5 + 3 * STRING_OVERHEAD_BYTES));
    }
}
