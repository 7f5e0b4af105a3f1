//! The WAL's background thread: at wal_level 2 it makes the WAL durable up to its last
//! record whenever a writer kicks it; at wal_level 1 (with `wal_fsync_period_ms`) it fsyncs
//! the WAL every period.
//!
//! Why the kick (wal_level 2): a write appends its record under the vnode's commit lock,
//! applies its rows to the memtable, and only then waits for the record to be durable. Led by
//! the writer, the group write and `fdatasync` (about 2 ms for a record of a megabyte with the
//! line protocol at 4,000 trucks) started after the apply (about 1 ms); kicked here right
//! after the append, they run during it, and the writer's [`Wal::wait_durable`] joins that
//! group. A client that keeps few requests in flight waits that much less for each, and the
//! CPU it would have left idle meanwhile goes to the next request.
//!
//! Invariants:
//! - Correct whichever comes first: a writer that finds no group running leads one itself
//!   (as without this thread), and the thread then finds the records durable and returns.
//! - A kick while a group is running is dropped: the records appended meanwhile wait for the
//!   next group, which the first of their writers to finish applying leads, so that the
//!   writers queued behind the commit lock can still join it (several writes in flight to
//!   one vgroup keep sharing syncs). A periodic thread ignores kicks.
//! - A failed write or sync poisons the WAL (logged there); the thread keeps waiting, and
//!   every writer sees the error from its own `wait_durable`.
//! - Dropping the committer stops and joins the thread.

use super::Wal;
use parking_lot::{Condvar, Mutex};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

pub struct Committer {
    wal: Arc<Wal>,
    /// `Some`: a periodic fsync, which kicks do not drive.
    period: Option<Duration>,
    shared: Arc<(Mutex<Signal>, Condvar)>,
    handle: Option<JoinHandle<()>>,
}

#[derive(Default)]
struct Signal {
    kicked: bool,
    stop: bool,
}

impl Committer {
    /// wal_level 2: leads a group write and fsync when kicked. `None` (writers then lead
    /// every group themselves) if the thread cannot be started.
    pub fn on_kick(wal: Arc<Wal>) -> Option<Committer> {
        Self::start(wal, None)
    }

    /// wal_level 1: fsyncs the WAL every `period`. `None` if the thread cannot be started.
    pub fn every(wal: Arc<Wal>, period: Duration) -> Option<Committer> {
        Self::start(wal, Some(period))
    }

    fn start(wal: Arc<Wal>, period: Option<Duration>) -> Option<Committer> {
        let shared = Arc::new((Mutex::new(Signal::default()), Condvar::new()));
        let (wal2, shared2) = (wal.clone(), shared.clone());
        let name = match period {
            Some(_) => "vnode-wal-sync",
            None => "vnode-wal-commit",
        };
        let handle = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || run(&wal2, &shared2, period))
            .map_err(|e| tracing::warn!(error = %e, "could not start the {name} thread"))
            .ok()?;
        Some(Committer {
            wal,
            period,
            shared,
            handle: Some(handle),
        })
    }

    /// Asks for the records appended so far to be made durable now, unless a group is
    /// already being written or the thread is a periodic one (see the module doc).
    pub fn kick(&self) {
        if self.period.is_some() || self.wal.is_syncing() {
            return;
        }
        let mut s = self.shared.0.lock();
        if !s.kicked {
            s.kicked = true;
            self.shared.1.notify_one();
        }
    }
}

fn run(wal: &Wal, shared: &(Mutex<Signal>, Condvar), period: Option<Duration>) {
    let (lock, cv) = shared;
    loop {
        {
            let mut s = lock.lock();
            loop {
                if s.stop {
                    return;
                }
                if std::mem::take(&mut s.kicked) {
                    break;
                }
                match period {
                    Some(p) => {
                        if cv.wait_for(&mut s, p).timed_out() {
                            break;
                        }
                    }
                    None => cv.wait(&mut s),
                }
            }
        }
        match period {
            Some(_) => {
                if let Err(e) = wal.sync_current() {
                    tracing::warn!(error = %e, "periodic WAL fsync failed");
                }
            }
            None => {
                let _ = wal.wait_durable(wal.last_seq());
            }
        }
    }
}

impl Drop for Committer {
    fn drop(&mut self) {
        self.shared.0.lock().stop = true;
        self.shared.1.notify_all();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn wait_for(what: &str, cond: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !cond() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn a_kick_makes_the_appended_records_durable_without_a_waiting_writer() {
        let d = tempfile::tempdir().unwrap();
        let wal = Arc::new(Wal::open(d.path(), 2, 0, Vec::new()).unwrap());
        let c = Committer::on_kick(wal.clone()).unwrap();
        wal.append(vec![1; 100]);
        wal.append(vec![2; 100]);
        assert_eq!(wal.group_writes(), 0, "appending alone writes nothing");
        c.kick();
        wait_for("the commit thread's group write", || {
            wal.group_writes() == 1
        });
        // The writer's own wait finds its record durable: no second group.
        wal.wait_durable(2).unwrap();
        assert_eq!(wal.group_writes(), 1);
        // Both records are in the file (replayed as a restart would).
        let mut seqs = Vec::new();
        super::super::replay(
            &super::super::list_files(d.path()).unwrap(),
            |seq, _, _, _| {
                seqs.push(seq);
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(seqs, [1, 2]);
        // Dropping stops and joins the thread (the test would hang otherwise).
        drop(c);
        assert_eq!(Arc::strong_count(&wal), 1);
    }

    #[test]
    fn a_writer_leads_its_own_group_and_a_kick_with_nothing_new_writes_none() {
        let d = tempfile::tempdir().unwrap();
        let wal = Arc::new(Wal::open(d.path(), 2, 0, Vec::new()).unwrap());
        let c = Committer::on_kick(wal.clone()).unwrap();
        let seq = wal.append(vec![3; 100]);
        // No kick: the writer writes and syncs its record itself.
        wal.wait_durable(seq).unwrap();
        assert_eq!(wal.group_writes(), 1);
        // Nothing new: this kick finds every record durable and writes no group.
        c.kick();
        wal.append(vec![4; 100]);
        c.kick();
        wait_for("the second record's group write", || {
            wal.group_writes() >= 2
        });
        wal.wait_durable(2).unwrap();
        assert_eq!(wal.group_writes(), 2, "one group per record, none empty");
        drop(c);
    }
}
