//! `sdb`: the mnode's durable store, a log of opaque records plus a snapshot.
//! See `FORMAT.md` beside this file for the byte layout and the crash argument.
//!
//! Owns the files of the mnode directory:
//! - `mnode.log`  — file header, then records with consecutive sequence numbers;
//! - `mnode.snap` — file header, then ONE record whose seq is the last op the snapshot holds;
//! - `LOCK`       — held with an exclusive OS file lock while an `Sdb` is open;
//! - `*.tmp`      — leftovers of an interrupted snapshot or log switch; deleted on open.
//!
//! Invariants:
//! - A record is durable (written and `fdatasync`ed) before [`Sdb::append`] returns `Ok`.
//! - Records in the log have consecutive seqs; the records with `seq > snapshot seq`
//!   continue the snapshot without a gap. Records at or below the snapshot seq are skipped.
//! - Both files are only ever replaced by a fsynced temp file + rename + directory fsync,
//!   and the snapshot is always renamed into place before the log it makes redundant is.
//! - After a failed fsync (or a failed cleanup of a failed write) the store is poisoned:
//!   every later `append` fails, since what is on disk is no longer known.
//!
//! The store does not interpret payloads; the catalog layer serializes ops and state.

pub mod frame;

use crate::error::MnodeError;
use frame::{
    check_file_header, decode_record, encode_file_header, encode_record, valid_record_after,
    FILE_HEADER_LEN, LOG_MAGIC, MAX_PAYLOAD, SNAP_MAGIC,
};
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

pub const LOG_FILE: &str = "mnode.log";
pub const SNAP_FILE: &str = "mnode.snap";
const LOCK_FILE: &str = "LOCK";

/// One log record recovered on open.
#[derive(Debug, Clone, PartialEq)]
pub struct LogRecord {
    pub seq: u64,
    /// Byte offset of the record in the log file (for error messages).
    pub offset: u64,
    pub payload: Vec<u8>,
}

/// What [`Sdb::open`] found on disk.
#[derive(Debug, Default)]
pub struct Recovered {
    /// `(seq, payload)` of the snapshot, if there is one.
    pub snapshot: Option<(u64, Vec<u8>)>,
    /// Log records after the snapshot, in order.
    pub records: Vec<LogRecord>,
    /// Bytes cut off the end of the log as a torn tail (0 if none), and why.
    pub truncated: Option<(u64, String)>,
}

pub struct Sdb {
    dir: PathBuf,
    log_path: PathBuf,
    snap_path: PathBuf,
    log: File,
    log_len: u64,
    log_records: u64,
    last_seq: u64,
    poisoned: Option<String>,
    _lock: File,
}

fn sync_dir(dir: &Path) -> Result<(), MnodeError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| MnodeError::io("fsync directory", dir, e))
}

fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, MnodeError> {
    match fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(MnodeError::io("read", path, e)),
    }
}

/// Writes `bytes` to `tmp`, fsyncs it, renames it over `dst` and fsyncs the directory.
/// Returns the open handle of the new file (opened for appending). On an error before the
/// rename, the temp file is removed and `dst` is untouched. `Err((renamed, e))`.
fn replace_file(
    dir: &Path,
    tmp: &Path,
    dst: &Path,
    bytes: &[u8],
) -> Result<File, (bool, MnodeError)> {
    let pre = (|| {
        let mut f = OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(tmp)
            .map_err(|e| MnodeError::io("create", tmp, e))?;
        f.write_all(bytes)
            .map_err(|e| MnodeError::io("write", tmp, e))?;
        f.sync_all().map_err(|e| MnodeError::io("fsync", tmp, e))?;
        drop(f);
        let f = OpenOptions::new()
            .append(true)
            .open(tmp)
            .map_err(|e| MnodeError::io("open", tmp, e))?;
        fs::rename(tmp, dst).map_err(|e| MnodeError::io("rename", tmp, e))?;
        Ok(f)
    })();
    match pre {
        Ok(f) => {
            sync_dir(dir).map_err(|e| (true, e))?;
            Ok(f)
        }
        Err(e) => {
            let _ = fs::remove_file(tmp);
            Err((false, e))
        }
    }
}

impl Sdb {
    /// Opens (creating if needed) the store in `dir`, loads the snapshot, scans the log,
    /// truncates a torn tail and returns the records to replay.
    pub fn open(dir: &Path) -> Result<(Sdb, Recovered), MnodeError> {
        fs::create_dir_all(dir).map_err(|e| MnodeError::io("create directory", dir, e))?;
        let lock_path = dir.join(LOCK_FILE);
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| MnodeError::io("open", &lock_path, e))?;
        lock.try_lock().map_err(|e| {
            let e = match e {
                fs::TryLockError::WouldBlock => std::io::Error::new(
                    ErrorKind::WouldBlock,
                    "the directory is in use by another mnode",
                ),
                fs::TryLockError::Error(e) => e,
            };
            MnodeError::io("lock", &lock_path, e)
        })?;
        let log_path = dir.join(LOG_FILE);
        let snap_path = dir.join(SNAP_FILE);
        for tmp in [
            log_path.with_extension("log.tmp"),
            snap_path.with_extension("snap.tmp"),
        ] {
            match fs::remove_file(&tmp) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(MnodeError::io("remove", &tmp, e)),
            }
        }

        let mut rec = Recovered::default();
        // Snapshot: written atomically, so any damage is corruption.
        let mut snap_seq = 0u64;
        if let Some(buf) = read_optional(&snap_path)? {
            check_file_header(&buf, &SNAP_MAGIC)
                .map_err(|r| MnodeError::corruption(&snap_path, 0, r))?;
            let f = decode_record(&buf, FILE_HEADER_LEN)
                .map_err(|r| MnodeError::corruption(&snap_path, FILE_HEADER_LEN as u64, r))?;
            if f.end != buf.len() {
                return Err(MnodeError::corruption(
                    &snap_path,
                    f.end as u64,
                    format!("{} unexpected bytes after the snapshot", buf.len() - f.end),
                ));
            }
            snap_seq = f.seq;
            rec.snapshot = Some((f.seq, f.payload.to_vec()));
        }

        // Log.
        let header = encode_file_header(&LOG_MAGIC);
        let buf = read_optional(&log_path)?;
        let fresh = match &buf {
            None => true,
            // A file shorter than its header that is a prefix of a valid header holds no
            // record; start it over. (Log files are created by rename, so this is defensive.)
            Some(b) => b.len() < FILE_HEADER_LEN && header.starts_with(b),
        };
        let mut last_seq = snap_seq;
        let mut log_records = 0u64;
        let (log, log_len) = if fresh {
            let tmp = log_path.with_extension("log.tmp");
            let f = replace_file(dir, &tmp, &log_path, &header).map_err(|(_, e)| e)?;
            (f, FILE_HEADER_LEN as u64)
        } else {
            let buf = buf.unwrap_or_default();
            check_file_header(&buf, &LOG_MAGIC)
                .map_err(|r| MnodeError::corruption(&log_path, 0, r))?;
            let mut off = FILE_HEADER_LEN;
            let mut prev: Option<u64> = None;
            while off < buf.len() {
                match decode_record(&buf, off) {
                    Ok(f) => {
                        if let Some(p) = prev {
                            if f.seq != p.wrapping_add(1) {
                                return Err(MnodeError::corruption(
                                    &log_path,
                                    off as u64,
                                    format!("record seq {} does not follow seq {p}", f.seq),
                                ));
                            }
                        }
                        if f.seq > snap_seq {
                            if f.seq != last_seq + 1 {
                                return Err(MnodeError::corruption(
                                    &log_path,
                                    off as u64,
                                    format!(
                                        "record seq {} leaves a gap after seq {last_seq}",
                                        f.seq
                                    ),
                                ));
                            }
                            last_seq = f.seq;
                            rec.records.push(LogRecord {
                                seq: f.seq,
                                offset: off as u64,
                                payload: f.payload.to_vec(),
                            });
                        }
                        prev = Some(f.seq);
                        log_records += 1;
                        off = f.end;
                    }
                    Err(reason) => {
                        let min_seq = prev.map_or(0, |p| p.saturating_add(1));
                        if let Some(next) = valid_record_after(&buf, off + 1, min_seq) {
                            return Err(MnodeError::corruption(
                                &log_path,
                                off as u64,
                                format!("{reason}; a valid record follows at offset {next}"),
                            ));
                        }
                        rec.truncated = Some(((buf.len() - off) as u64, reason));
                        break;
                    }
                }
            }
            let f = OpenOptions::new()
                .append(true)
                .open(&log_path)
                .map_err(|e| MnodeError::io("open", &log_path, e))?;
            if off < buf.len() {
                f.set_len(off as u64)
                    .and_then(|_| f.sync_all())
                    .map_err(|e| MnodeError::io("truncate torn tail of", &log_path, e))?;
            }
            (f, off as u64)
        };
        Ok((
            Sdb {
                dir: dir.to_path_buf(),
                log_path,
                snap_path,
                log,
                log_len,
                log_records,
                last_seq,
                poisoned: None,
                _lock: lock,
            },
            rec,
        ))
    }

    /// Appends one record and fsyncs it. Returns its seq.
    pub fn append(&mut self, payload: &[u8]) -> Result<u64, MnodeError> {
        if let Some(p) = &self.poisoned {
            return Err(MnodeError::Poisoned(p.clone()));
        }
        if payload.len() > MAX_PAYLOAD {
            return Err(MnodeError::InvalidArgument(format!(
                "catalog record of {} bytes exceeds the {MAX_PAYLOAD}-byte limit",
                payload.len()
            )));
        }
        let seq = self.last_seq + 1;
        let bytes = encode_record(seq, payload);
        if let Err(e) = self.log.write_all(&bytes) {
            // Cut off whatever part was written so that the next record follows a valid one.
            if let Err(e2) = self
                .log
                .set_len(self.log_len)
                .and_then(|_| self.log.sync_all())
            {
                self.poisoned = Some(format!(
                    "could not cut a failed write off {}: {e2}",
                    self.log_path.display()
                ));
            }
            return Err(MnodeError::io("append to", &self.log_path, e));
        }
        if let Err(e) = self.log.sync_data() {
            self.poisoned = Some(format!("fsync of {} failed: {e}", self.log_path.display()));
            return Err(MnodeError::io("fsync", &self.log_path, e));
        }
        self.log_len += bytes.len() as u64;
        self.log_records += 1;
        self.last_seq = seq;
        Ok(seq)
    }

    /// Records in the current log file (including any at or below the snapshot seq).
    pub fn log_records(&self) -> u64 {
        self.log_records
    }

    /// Seq of the last durable op.
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// Writes `state` (the whole catalog after op `last_seq`) as the new snapshot, then
    /// replaces the log by an empty one. On an error the old log stays in use (still
    /// consistent with either snapshot), unless the log switch was half done: then the store
    /// is poisoned.
    pub fn write_snapshot(&mut self, state: &[u8]) -> Result<(), MnodeError> {
        if let Some(p) = &self.poisoned {
            return Err(MnodeError::Poisoned(p.clone()));
        }
        if state.len() > MAX_PAYLOAD {
            return Err(MnodeError::InvalidArgument(format!(
                "catalog snapshot of {} bytes exceeds the {MAX_PAYLOAD}-byte limit",
                state.len()
            )));
        }
        let mut bytes = encode_file_header(&SNAP_MAGIC).to_vec();
        bytes.extend_from_slice(&encode_record(self.last_seq, state));
        let tmp = self.snap_path.with_extension("snap.tmp");
        // Whether or not the new snapshot's rename became durable, the old log still holds
        // every op, so the old log stays valid with either snapshot.
        replace_file(&self.dir, &tmp, &self.snap_path, &bytes).map_err(|(_, e)| e)?;

        let tmp = self.log_path.with_extension("log.tmp");
        match replace_file(
            &self.dir,
            &tmp,
            &self.log_path,
            &encode_file_header(&LOG_MAGIC),
        ) {
            Ok(f) => {
                self.log = f;
                self.log_len = FILE_HEADER_LEN as u64;
                self.log_records = 0;
                Ok(())
            }
            Err((false, e)) => Err(e),
            Err((true, e)) => {
                // The new log is in place but its name may not be durable: appending to it
                // could lose ops on a crash, appending to the old one certainly would.
                self.poisoned = Some(format!("log switch not durable: {e}"));
                Err(e)
            }
        }
    }

    /// Refuses all later writes (used when memory and disk may have diverged).
    pub fn poison(&mut self, reason: impl Into<String>) {
        self.poisoned.get_or_insert(reason.into());
    }

    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    pub fn snapshot_path(&self) -> &Path {
        &self.snap_path
    }
}
