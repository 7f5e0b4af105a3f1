//! The admission gate of a server's mutating requests during a graceful shutdown: once
//! closed, new mutations are refused with the retryable `ShuttingDown` status while the ones
//! already admitted run to completion; [`WriteGate::wait_idle`] resolves when none is left.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use tidal_common::StatusCode;
use tidal_proto::status_error;

#[derive(Default)]
struct State {
    closed: AtomicBool,
    in_flight: AtomicUsize,
    idle: tokio::sync::Notify,
}

#[derive(Clone, Default)]
pub struct WriteGate {
    state: Arc<State>,
}

/// Held while an admitted request runs; dropping it lets a waiting shutdown proceed.
pub struct Admitted {
    state: Arc<State>,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        if self.state.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.state.idle.notify_waiters();
        }
    }
}

impl WriteGate {
    /// Admits a request, or refuses it with `ShuttingDown` naming `server`.
    pub fn admit(&self, server: &str) -> Result<Admitted, tonic::Status> {
        // Count first, then check: `close` sets the flag before it reads the count, so a
        // request either sees the flag or is seen by `wait_idle` (SeqCst on both sides).
        self.state.in_flight.fetch_add(1, Ordering::SeqCst);
        let admitted = Admitted {
            state: self.state.clone(),
        };
        if self.state.closed.load(Ordering::SeqCst) {
            drop(admitted);
            return Err(status_error(
                StatusCode::ShuttingDown,
                format!("{server} is shutting down; retry later"),
            ));
        }
        Ok(admitted)
    }

    pub fn close(&self) {
        self.state.closed.store(true, Ordering::SeqCst);
    }

    pub fn is_closed(&self) -> bool {
        self.state.closed.load(Ordering::SeqCst)
    }

    pub fn in_flight(&self) -> usize {
        self.state.in_flight.load(Ordering::SeqCst)
    }

    /// Resolves once the gate is closed and no admitted request is running.
    pub async fn wait_idle(&self) {
        loop {
            let idle = self.state.idle.notified();
            tokio::pin!(idle);
            // Register before checking, so a notification between the check and the await
            // is not lost.
            idle.as_mut().enable();
            if self.is_closed() && self.in_flight() == 0 {
                return;
            }
            idle.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn closed_gate_refuses_and_waits_for_admitted_requests() {
        let gate = WriteGate::default();
        let a = gate.admit("node").expect("open gate admits");
        let b = gate.admit("node").expect("open gate admits");
        gate.close();
        let e = gate.admit("node").err().expect("closed gate refuses");
        assert_eq!(tidal_proto::code_of(&e), StatusCode::ShuttingDown);
        assert!(
            e.message().contains("node is shutting down"),
            "{}",
            e.message()
        );
        assert!(StatusCode::ShuttingDown.is_retryable());
        let g = gate.clone();
        let waiter = tokio::spawn(async move { g.wait_idle().await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "two requests still run");
        drop(a);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "one request still runs");
        drop(b);
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("idle once the last request ends")
            .expect("join");
        assert_eq!(gate.in_flight(), 0);
    }
}
