//! The write-ahead log: numbered files `wal/<first_seq:020>.log` of checksummed records
//! (layout in `FORMAT.md` beside this file) and group commit.
//!
//! Owns: the WAL files, record sequence numbers, the durable watermark.
//! Invariants:
//! - Records are appended under the vnode's commit lock, so file order == sequence order and
//!   sequence numbers increase by exactly one.
//! - [`Wal::append`] only buffers; [`Wal::wait_durable`] makes a record durable. One caller at a
//!   time (the leader) writes everything buffered with one `writev` and (wal_level 2) one
//!   `fdatasync`; the others wait on a condvar and share that sync (group commit). A record's
//!   payload is kept as the caller encoded it, never copied into a shared buffer: a batch's
//!   record is megabytes, and copying it (into a buffer regrown for every group) cost a tenth
//!   of a data node's write CPU. At wal_level 2 the vnode's [`Committer`] thread leads a
//!   group as soon as a record is appended, while its writer applies it.
//! - Only the newest file is appended to. Older files are deleted by [`Wal::trim`] once a
//!   manifest that covers all their records has been committed.
//! - After a failed write or sync the WAL is poisoned: every later append fails until the vnode
//!   is reopened (the file content after the failure is unknown; replay decides).

mod committer;

pub use committer::Committer;

use crate::error::{Result, VnodeError};
use crate::fsutil;
use parking_lot::{Condvar, Mutex};
use std::fs::{self, File, OpenOptions};
use std::io::{IoSlice, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tidal_common::{HistogramSnapshot, LatencyHistogram};

pub const WAL_MAGIC: &[u8; 8] = b"TIDALWAL";
pub const WAL_VERSION: u32 = 1;
pub const HEADER_BYTES: usize = 24;
pub const FRAME_BYTES: usize = 16;
/// Largest record payload accepted on replay (a sanity bound on the length field).
pub const MAX_RECORD_BYTES: u32 = 1 << 30;

pub fn file_name(first_seq: u64) -> String {
    format!("{first_seq:020}.log")
}

fn header(first_seq: u64) -> [u8; HEADER_BYTES] {
    let mut h = [0u8; HEADER_BYTES];
    h[0..8].copy_from_slice(WAL_MAGIC);
    h[8..12].copy_from_slice(&WAL_VERSION.to_le_bytes());
    h[16..24].copy_from_slice(&first_seq.to_le_bytes());
    h
}

/// The frame header of record `seq` with `payload`: length, crc32c of seq and payload, seq.
fn frame_header(seq: u64, payload: &[u8]) -> [u8; FRAME_BYTES] {
    let mut crc = crc32c::crc32c(&seq.to_le_bytes());
    crc = crc32c::crc32c_append(crc, payload);
    let mut h = [0u8; FRAME_BYTES];
    h[0..4].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    h[4..8].copy_from_slice(&crc.to_le_bytes());
    h[8..16].copy_from_slice(&seq.to_le_bytes());
    h
}

/// Appends one framed record to `out` (tests build WAL files with it).
#[cfg(test)]
fn frame(out: &mut Vec<u8>, seq: u64, payload: &[u8]) {
    out.extend_from_slice(&frame_header(seq, payload));
    out.extend_from_slice(payload);
}

/// Writes the framed `records` in order, all of them or an error (a short `writev` goes on
/// from where it stopped).
fn write_records(mut file: &File, records: &[([u8; FRAME_BYTES], Vec<u8>)]) -> std::io::Result<()> {
    let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(2 * records.len());
    for (h, p) in records {
        slices.push(IoSlice::new(h));
        if !p.is_empty() {
            slices.push(IoSlice::new(p));
        }
    }
    let mut bufs = &mut slices[..];
    while !bufs.is_empty() {
        match file.write_vectored(bufs) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut bufs, n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A WAL file found on disk.
#[derive(Debug, Clone)]
pub struct WalFile {
    pub first_seq: u64,
    pub path: PathBuf,
    pub bytes: u64,
}

/// Lists the WAL files of `dir`, sorted by first sequence number. Stray `.tmp` files are ignored.
pub fn list_files(dir: &Path) -> Result<Vec<WalFile>> {
    let mut out = Vec::new();
    let rd = fs::read_dir(dir).map_err(|e| VnodeError::io(dir, "list", e))?;
    for ent in rd {
        let ent = ent.map_err(|e| VnodeError::io(dir, "list", e))?;
        let name = ent.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(stem) = name.strip_suffix(".log") else {
            continue;
        };
        let Ok(first_seq) = stem.parse::<u64>() else {
            continue;
        };
        let bytes = ent.metadata().map(|m| m.len()).unwrap_or(0);
        out.push(WalFile {
            first_seq,
            path: ent.path(),
            bytes,
        });
    }
    out.sort_by_key(|f| f.first_seq);
    Ok(out)
}

/// Replays every record of every WAL file in order, calling `f(seq, payload)`. A torn tail of
/// the newest file is cut off (the file is truncated so that appends can never follow
/// garbage); anything else that does not check out is [`VnodeError::Corruption`] naming the file
/// and offset. Returns the last sequence number seen (0 if none).
pub fn replay(
    files: &[WalFile],
    mut f: impl FnMut(u64, &[u8], &Path, u64) -> Result<()>,
) -> Result<u64> {
    let mut last_seq = 0u64;
    for (fi, wf) in files.iter().enumerate() {
        let is_last = fi + 1 == files.len();
        let bytes = fsutil::read_file(&wf.path)?;
        let corrupt = |offset: usize, reason: String| VnodeError::Corruption {
            file: wf.path.clone(),
            offset: offset as u64,
            reason,
        };
        if bytes.len() < HEADER_BYTES {
            if is_last {
                // Crash while creating the file: nothing in it was ever acknowledged.
                truncate_to_header(&wf.path, wf.first_seq)?;
                continue;
            }
            return Err(corrupt(0, "file is shorter than the WAL header".into()));
        }
        if bytes.get(0..8) != Some(&WAL_MAGIC[..]) {
            return Err(corrupt(0, "bad magic, not a Tidal WAL file".into()));
        }
        let version = u32::from_le_bytes(arr4(&bytes, 8));
        if version != WAL_VERSION {
            return Err(corrupt(
                8,
                format!("unsupported WAL format version {version}"),
            ));
        }
        let first = u64::from_le_bytes(arr8(&bytes, 16));
        if first != wf.first_seq {
            return Err(corrupt(
                16,
                format!(
                    "header says first seq {first}, file name says {}",
                    wf.first_seq
                ),
            ));
        }
        let mut pos = HEADER_BYTES;
        let mut expect_seq = wf.first_seq;
        while pos < bytes.len() {
            let rest = bytes.get(pos..).unwrap_or(&[]);
            let tail_is_zero = rest.iter().all(|b| *b == 0);
            if rest.len() < FRAME_BYTES || tail_is_zero {
                if is_last {
                    break; // torn append in the newest file
                }
                return Err(corrupt(pos, "incomplete record frame".into()));
            }
            let len = u32::from_le_bytes(arr4(&bytes, pos));
            let crc = u32::from_le_bytes(arr4(&bytes, pos + 4));
            let seq = u64::from_le_bytes(arr8(&bytes, pos + 8));
            if len > MAX_RECORD_BYTES {
                return Err(corrupt(pos, format!("implausible record length {len}")));
            }
            let end = pos + FRAME_BYTES + len as usize;
            if end > bytes.len() {
                if is_last {
                    break; // torn append in the newest file
                }
                return Err(corrupt(
                    pos,
                    format!("record of {len} bytes runs past the end of the file"),
                ));
            }
            let payload = bytes.get(pos + FRAME_BYTES..end).unwrap_or(&[]);
            let actual = crc32c::crc32c_append(crc32c::crc32c(&seq.to_le_bytes()), payload);
            if actual != crc {
                let after_zero = bytes.get(end..).unwrap_or(&[]).iter().all(|b| *b == 0);
                if is_last && after_zero {
                    // The final record of the newest file was only partly persisted.
                    break;
                }
                return Err(corrupt(
                    pos,
                    format!("checksum mismatch (stored {crc:#010x}, computed {actual:#010x})"),
                ));
            }
            if seq != expect_seq {
                return Err(corrupt(
                    pos,
                    format!("record has seq {seq}, expected {expect_seq}"),
                ));
            }
            f(seq, payload, &wf.path, pos as u64)?;
            last_seq = seq;
            expect_seq = seq + 1;
            pos = end;
        }
        if pos < bytes.len() {
            tracing::warn!(
                file = %wf.path.display(),
                offset = pos,
                dropped_bytes = bytes.len() - pos,
                "cutting off torn WAL tail"
            );
            let file = OpenOptions::new()
                .write(true)
                .open(&wf.path)
                .map_err(|e| VnodeError::io(&wf.path, "open", e))?;
            file.set_len(pos as u64)
                .map_err(|e| VnodeError::io(&wf.path, "truncate torn tail of", e))?;
            file.sync_all()
                .map_err(|e| VnodeError::io(&wf.path, "fsync", e))?;
        }
    }
    Ok(last_seq)
}

fn truncate_to_header(path: &Path, first_seq: u64) -> Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .map_err(|e| VnodeError::io(path, "open", e))?;
    file.write_all(&header(first_seq))
        .map_err(|e| VnodeError::io(path, "write header of", e))?;
    file.sync_all()
        .map_err(|e| VnodeError::io(path, "fsync", e))
}

fn arr4(b: &[u8], at: usize) -> [u8; 4] {
    let mut a = [0u8; 4];
    if let Some(s) = b.get(at..at + 4) {
        a.copy_from_slice(s);
    }
    a
}

fn arr8(b: &[u8], at: usize) -> [u8; 8] {
    let mut a = [0u8; 8];
    if let Some(s) = b.get(at..at + 8) {
        a.copy_from_slice(s);
    }
    a
}

struct Inner {
    file: Arc<File>,
    path: PathBuf,
    first_seq: u64,
    /// Records appended but not yet handed to the OS: frame header and payload.
    pending: Vec<([u8; FRAME_BYTES], Vec<u8>)>,
    /// Sequence number of the last appended record.
    last_seq: u64,
    /// Bytes of the current file including pending ones.
    file_bytes: u64,
    /// Older files, kept until a manifest covers them.
    old: Vec<WalFile>,
}

struct SyncState {
    /// Every record with seq <= done_seq has been written (and fsynced at wal_level 2).
    done_seq: u64,
    leader_busy: bool,
    poisoned: Option<String>,
}

pub struct Wal {
    dir: PathBuf,
    fsync: bool,
    inner: Mutex<Inner>,
    sync: Mutex<SyncState>,
    cv: Condvar,
    /// Number of group writes (each one `write` + at level 2 one fsync) done so far.
    group_writes: AtomicU64,
    /// Record bytes handed to the OS since open (a counter; `bytes` is what is on disk now).
    bytes_written: AtomicU64,
    /// Latency of every fsync of WAL records (group commit, periodic sync, rotation).
    fsync_latency: LatencyHistogram,
    /// Record buffers given back after their group write, for the next records to be
    /// encoded into ([`Wal::buffer`]): a record of a large batch is about a megabyte, and
    /// encoding each into fresh memory cost a page fault per 4 KiB and the zeroing of the
    /// page (a few percent of a data node's CPU during a load). At most
    /// [`SPARE_BUFFER_BYTES_MAX`] per WAL and [`SPARE_BUFFER_BYTES_PROCESS_MAX`] in all;
    /// emptied when the WAL rotates.
    spare: Mutex<Spare>,
}

/// Bytes of record buffers a WAL keeps for reuse, at most.
pub const SPARE_BUFFER_BYTES_MAX: usize = 4 << 20;
/// Bytes of record buffers all the WALs of a process keep, at most: a data node may host
/// many vnodes, and an idle one keeps its buffers until its WAL next rotates.
pub const SPARE_BUFFER_BYTES_PROCESS_MAX: usize = 64 << 20;
/// Bytes held in every WAL's [`Spare`].
static SPARE_BYTES: AtomicUsize = AtomicUsize::new(0);

/// A WAL's spare record buffers, counted in [`SPARE_BYTES`].
#[derive(Default)]
struct Spare {
    buffers: Vec<Vec<u8>>,
    bytes: usize,
}

impl Spare {
    fn pop(&mut self) -> Option<Vec<u8>> {
        let b = self.buffers.pop()?;
        self.bytes -= b.capacity();
        SPARE_BYTES.fetch_sub(b.capacity(), Ordering::Relaxed);
        Some(b)
    }

    /// Keeps `b` if both bounds allow.
    fn push(&mut self, b: Vec<u8>) {
        let n = b.capacity();
        if self.bytes + n > SPARE_BUFFER_BYTES_MAX {
            return;
        }
        let room = SPARE_BYTES.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |all| {
            (all + n <= SPARE_BUFFER_BYTES_PROCESS_MAX).then_some(all + n)
        });
        if room.is_ok() {
            self.bytes += n;
            self.buffers.push(b);
        }
    }

    fn clear(&mut self) {
        SPARE_BYTES.fetch_sub(self.bytes, Ordering::Relaxed);
        self.bytes = 0;
        self.buffers.clear();
    }
}

impl Drop for Spare {
    fn drop(&mut self) {
        self.clear();
    }
}

/// Counters of one WAL since it was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WalStats {
    pub bytes_written: u64,
    pub fsync: HistogramSnapshot,
}

/// Creates (or empties) the WAL file `path` whose first record will be `first_seq`, writes its
/// header and makes both the file and its directory entry durable before any record goes in,
/// so that replay never finds a record in a file whose header or name could be lost.
fn create_file(dir: &Path, path: &Path, first_seq: u64) -> Result<File> {
    let mut file = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(path)
        .map_err(|e| VnodeError::io(path, "create", e))?;
    file.write_all(&header(first_seq))
        .map_err(|e| VnodeError::io(path, "write header of", e))?;
    file.sync_all()
        .map_err(|e| VnodeError::io(path, "fsync", e))?;
    fsutil::sync_dir(dir)?;
    Ok(file)
}

impl Wal {
    /// Starts a new WAL file whose first record will be `last_seq + 1`; `old` are the existing
    /// files (already replayed). An existing file of the same name holds no valid record (replay
    /// would have advanced `last_seq`) and is overwritten.
    pub fn open(dir: &Path, wal_level: u8, last_seq: u64, mut old: Vec<WalFile>) -> Result<Wal> {
        let first_seq = last_seq + 1;
        let path = dir.join(file_name(first_seq));
        old.retain(|f| f.path != path);
        let file = create_file(dir, &path, first_seq)?;
        Ok(Wal {
            dir: dir.to_path_buf(),
            fsync: wal_level >= 2,
            inner: Mutex::new(Inner {
                file: Arc::new(file),
                path,
                first_seq,
                pending: Vec::new(),
                last_seq,
                file_bytes: HEADER_BYTES as u64,
                old,
            }),
            sync: Mutex::new(SyncState {
                done_seq: last_seq,
                leader_busy: false,
                poisoned: None,
            }),
            cv: Condvar::new(),
            group_writes: AtomicU64::new(0),
            bytes_written: AtomicU64::new(0),
            fsync_latency: LatencyHistogram::new(),
            spare: Mutex::new(Spare::default()),
        })
    }

    pub fn check_poisoned(&self) -> Result<()> {
        match &self.sync.lock().poisoned {
            Some(reason) => Err(VnodeError::Poisoned {
                dir: self.dir.clone(),
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    /// A buffer to encode the next record into: one a group write gave back, or a new one.
    pub fn buffer(&self) -> Vec<u8> {
        self.spare.lock().pop().unwrap_or_default()
    }

    /// Keeps `records`' buffers for [`Wal::buffer`], within the bounds.
    fn give_back(&self, records: Vec<([u8; FRAME_BYTES], Vec<u8>)>) {
        let mut spare = self.spare.lock();
        for (_, p) in records {
            spare.push(p);
        }
    }

    /// Buffers one record and returns its sequence number. Callers hold the commit lock.
    pub fn append(&self, payload: Vec<u8>) -> u64 {
        let mut i = self.inner.lock();
        i.last_seq += 1;
        let seq = i.last_seq;
        i.file_bytes += (FRAME_BYTES + payload.len()) as u64;
        // The crc is taken under the lock because it covers the seq; it runs at memory speed,
        // well below the copy it replaces.
        let h = frame_header(seq, &payload);
        i.pending.push((h, payload));
        seq
    }

    #[cfg(test)]
    pub fn group_writes(&self) -> u64 {
        self.group_writes.load(Ordering::Relaxed)
    }

    pub fn last_seq(&self) -> u64 {
        self.inner.lock().last_seq
    }

    /// Whether a group write (and sync) is running now: records appended meanwhile go in
    /// the next group, led by whoever waits for them first.
    pub fn is_syncing(&self) -> bool {
        self.sync.lock().leader_busy
    }

    pub fn stats(&self) -> WalStats {
        WalStats {
            bytes_written: self.bytes_written.load(Ordering::Relaxed),
            fsync: self.fsync_latency.snapshot(),
        }
    }

    /// fsyncs `file` (data only, or with metadata), recording the latency.
    fn timed_sync(&self, file: &File, path: &Path, all: bool) -> Result<()> {
        let start = Instant::now();
        let r = if all {
            file.sync_all()
        } else {
            file.sync_data()
        };
        self.fsync_latency.observe(start.elapsed());
        r.map_err(|e| VnodeError::io(path, "fsync", e))
    }

    pub fn bytes(&self) -> u64 {
        let i = self.inner.lock();
        i.file_bytes + i.old.iter().map(|f| f.bytes).sum::<u64>()
    }

    /// Blocks until record `seq` is written (and at wal_level 2 fsynced). Group commit: the
    /// first waiter to find no sync in progress becomes the leader and writes + syncs everything
    /// buffered so far on behalf of all waiters.
    pub fn wait_durable(&self, seq: u64) -> Result<()> {
        let mut s = self.sync.lock();
        loop {
            if let Some(reason) = &s.poisoned {
                return Err(VnodeError::Poisoned {
                    dir: self.dir.clone(),
                    reason: reason.clone(),
                });
            }
            if s.done_seq >= seq {
                return Ok(());
            }
            if s.leader_busy {
                self.cv.wait(&mut s);
                continue;
            }
            s.leader_busy = true;
            drop(s);
            let (records, upto, file, path) = {
                let mut i = self.inner.lock();
                (
                    std::mem::take(&mut i.pending),
                    i.last_seq,
                    i.file.clone(),
                    i.path.clone(),
                )
            };
            let mut res =
                write_records(&file, &records).map_err(|e| VnodeError::io(&path, "append to", e));
            if res.is_ok() {
                let bytes: usize = records.iter().map(|(h, p)| h.len() + p.len()).sum();
                self.bytes_written
                    .fetch_add(bytes as u64, Ordering::Relaxed);
            }
            self.give_back(records);
            if res.is_ok() && self.fsync {
                res = self.timed_sync(&file, &path, false);
            }
            self.group_writes.fetch_add(1, Ordering::Relaxed);
            s = self.sync.lock();
            s.leader_busy = false;
            match res {
                Ok(()) => s.done_seq = s.done_seq.max(upto),
                Err(e) => {
                    tracing::error!(error = %e, "WAL write failed; vnode poisoned");
                    s.poisoned = Some(e.to_string());
                    self.cv.notify_all();
                    return Err(e);
                }
            }
            self.cv.notify_all();
        }
    }

    /// fsyncs the current file (the wal_level 1 background syncer, every wal_fsync_period_ms).
    pub fn sync_current(&self) -> Result<()> {
        let (file, path) = {
            let i = self.inner.lock();
            (i.file.clone(), i.path.clone())
        };
        self.timed_sync(&file, &path, false)
    }

    /// Starts a new file for records after the current last one, and fsyncs the current file.
    /// Callers hold the commit lock and have called `wait_durable(last_seq)`.
    pub fn rotate(&self) -> Result<()> {
        // A memtable was frozen: writes may pause here, so the spare buffers go.
        self.spare.lock().clear();
        let mut i = self.inner.lock();
        let first_seq = i.last_seq + 1;
        if first_seq == i.first_seq {
            return Ok(()); // the current file is still empty
        }
        self.timed_sync(&i.file, &i.path, true)?;
        let path = self.dir.join(file_name(first_seq));
        let file = create_file(&self.dir, &path, first_seq)?;
        let old = WalFile {
            first_seq: i.first_seq,
            path: std::mem::replace(&mut i.path, path),
            bytes: i.file_bytes,
        };
        i.old.push(old);
        i.file = Arc::new(file);
        i.first_seq = first_seq;
        i.file_bytes = HEADER_BYTES as u64;
        Ok(())
    }

    /// Deletes the files before the current one (a committed manifest covers their records).
    pub fn trim(&self) {
        let old = std::mem::take(&mut self.inner.lock().old);
        for f in old {
            if let Err(e) = fs::remove_file(&f.path) {
                tracing::warn!(file = %f.path.display(), error = %e, "could not delete trimmed WAL file");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_group_write_covers_every_buffered_record() {
        let d = tempfile::tempdir().unwrap();
        let wal = Wal::open(d.path(), 2, 0, Vec::new()).unwrap();
        let seqs: Vec<u64> = (0..3).map(|i| wal.append(vec![i as u8; 10])).collect();
        assert_eq!(seqs, [1, 2, 3]);
        wal.wait_durable(3).unwrap();
        assert_eq!(wal.group_writes(), 1);
        wal.wait_durable(1).unwrap(); // already durable: no new write
        assert_eq!(wal.group_writes(), 1);
        let files = list_files(d.path()).unwrap();
        let mut got = Vec::new();
        let last = replay(&files, |seq, p, _, _| {
            got.push((seq, p.to_vec()));
            Ok(())
        })
        .unwrap();
        assert_eq!(last, 3);
        assert_eq!(got[2], (3, vec![2u8; 10]));
        // Rotation starts a new file; trim removes the old one.
        wal.rotate().unwrap();
        wal.append(b"x".to_vec());
        wal.wait_durable(4).unwrap();
        assert_eq!(list_files(d.path()).unwrap().len(), 2);
        wal.trim();
        let files = list_files(d.path()).unwrap();
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].first_seq, 4);
    }

    /// Record buffers come back after their group write for the next records, within the
    /// bound, and go when the WAL rotates; a reused buffer holds only the new record.
    #[test]
    fn record_buffers_are_reused_within_the_bound() {
        let d = tempfile::tempdir().unwrap();
        let wal = Wal::open(d.path(), 2, 0, Vec::new()).unwrap();
        assert_eq!(wal.buffer().capacity(), 0, "none given back yet");
        let big = SPARE_BUFFER_BYTES_MAX / 3;
        for i in 0..4u8 {
            let mut b = wal.buffer();
            b.clear();
            b.resize(big, i);
            wal.append(b);
        }
        wal.wait_durable(4).unwrap();
        let spare = wal.spare.lock().buffers.clone();
        assert_eq!(
            spare.len(),
            3,
            "three fit in the bound, the fourth is dropped"
        );
        assert!(spare.iter().map(Vec::capacity).sum::<usize>() <= SPARE_BUFFER_BYTES_MAX);
        assert!(SPARE_BYTES.load(Ordering::Relaxed) >= 3 * big);
        let reused = wal.buffer();
        assert!(reused.capacity() >= big);
        let mut w = crate::codec::Writer::from_buf(reused, 16);
        w.u8(7);
        assert_eq!(w.buf, [7], "the old bytes are gone");
        wal.rotate().unwrap();
        assert!(wal.spare.lock().buffers.is_empty());
        assert_eq!(wal.spare.lock().bytes, 0);
        // What was written is each record as appended.
        let mut got = Vec::new();
        replay(&list_files(d.path()).unwrap(), |_, p, _, _| {
            got.push((p.len(), p.first().copied()));
            Ok(())
        })
        .unwrap();
        assert_eq!(got, (0..4u8).map(|i| (big, Some(i))).collect::<Vec<_>>());
    }

    #[test]
    fn stats_count_written_bytes_and_fsyncs() {
        let d = tempfile::tempdir().unwrap();
        let wal = Wal::open(d.path(), 2, 0, Vec::new()).unwrap();
        assert_eq!(wal.stats(), WalStats::default());
        wal.append(vec![1u8; 10]);
        wal.append(vec![2u8; 20]);
        wal.wait_durable(2).unwrap();
        let s = wal.stats();
        assert_eq!(s.bytes_written, (2 * FRAME_BYTES + 30) as u64);
        assert_eq!(s.fsync.count(), 1, "one group commit, one fsync");
        wal.rotate().unwrap();
        assert_eq!(wal.stats().fsync.count(), 2, "rotation syncs the old file");
        // wal_level 1 writes without fsync; the periodic syncer's fsyncs are counted.
        let d1 = tempfile::tempdir().unwrap();
        let wal1 = Wal::open(d1.path(), 1, 0, Vec::new()).unwrap();
        wal1.append(b"abc".to_vec());
        wal1.wait_durable(1).unwrap();
        assert_eq!(wal1.stats().fsync.count(), 0);
        assert_eq!(wal1.stats().bytes_written, (FRAME_BYTES + 3) as u64);
        wal1.sync_current().unwrap();
        assert_eq!(wal1.stats().fsync.count(), 1);
    }

    /// A group of more records than one `writev` takes (the kernel's limit is 1024 slices,
    /// two per record) is written whole, in order, and replays so.
    #[test]
    fn a_group_larger_than_one_writev_is_written_whole() {
        let d = tempfile::tempdir().unwrap();
        let wal = Wal::open(d.path(), 2, 0, Vec::new()).unwrap();
        let n = 1500u32;
        for k in 0..n {
            // Every fifth payload is empty: a record with no payload slice.
            let len = if k % 5 == 0 { 0 } else { (k % 37) as usize + 1 };
            wal.append(vec![(k % 251) as u8; len]);
        }
        wal.wait_durable(u64::from(n)).unwrap();
        assert_eq!(wal.group_writes(), 1);
        drop(wal);
        let mut got = Vec::new();
        replay(&list_files(d.path()).unwrap(), |seq, payload, _, _| {
            got.push((seq, payload.to_vec()));
            Ok(())
        })
        .unwrap();
        assert_eq!(got.len(), n as usize);
        for (k, (seq, payload)) in got.iter().enumerate() {
            let len = if k % 5 == 0 { 0 } else { k % 37 + 1 };
            assert_eq!(*seq, k as u64 + 1);
            assert_eq!(payload, &vec![(k % 251) as u8; len]);
        }
    }

    #[test]
    fn garbage_files_never_panic() {
        let d = tempfile::tempdir().unwrap();
        let mut bytes = header(1).to_vec();
        frame(&mut bytes, 1, b"hello");
        frame(&mut bytes, 2, b"world");
        for cut in 0..bytes.len() {
            for flip in [None, Some(cut)] {
                let mut b = bytes[..cut].to_vec();
                if let Some(i) = flip {
                    if let Some(x) = b.get_mut(i.saturating_sub(1)) {
                        *x ^= 0x5a;
                    }
                }
                let p = d.path().join(file_name(1));
                std::fs::write(&p, &b).unwrap();
                let files = list_files(d.path()).unwrap();
                let _ = replay(&files, |_, _, _, _| Ok(()));
            }
        }
    }
}
