//! Small durable-file helpers: atomic replace (temp file, fsync, rename, fsync dir) and
//! directory fsync. Invariant: after `write_atomic` returns Ok, a crash leaves either the old
//! or the new content under the final name, never a mix.

use crate::error::{Result, VnodeError};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;

pub fn sync_dir(dir: &Path) -> Result<()> {
    let d = File::open(dir).map_err(|e| VnodeError::io(dir, "open directory", e))?;
    d.sync_all()
        .map_err(|e| VnodeError::io(dir, "fsync directory", e))
}

pub fn create_dir_all(dir: &Path) -> Result<()> {
    fs::create_dir_all(dir).map_err(|e| VnodeError::io(dir, "create directory", e))
}

/// Writes `bytes` to `path` atomically and durably.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    {
        let mut f = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(&tmp)
            .map_err(|e| VnodeError::io(&tmp, "create", e))?;
        f.write_all(bytes)
            .map_err(|e| VnodeError::io(&tmp, "write", e))?;
        f.sync_all().map_err(|e| VnodeError::io(&tmp, "fsync", e))?;
    }
    fs::rename(&tmp, path).map_err(|e| VnodeError::io(path, "rename temp file onto", e))?;
    if let Some(parent) = path.parent() {
        sync_dir(parent)?;
    }
    Ok(())
}

pub fn read_file(path: &Path) -> Result<Vec<u8>> {
    fs::read(path).map_err(|e| VnodeError::io(path, "read", e))
}

/// An open file that the vnode's file sets share. Dropping the last reference to a file marked
/// obsolete deletes it: a file leaves the disk only once no reader's snapshot uses it.
pub struct FileRef {
    pub path: std::path::PathBuf,
    pub file: File,
    /// Names this open file in the decoded-column cache (`crate::column_cache`).
    pub token: u64,
    obsolete: std::sync::atomic::AtomicBool,
}

impl FileRef {
    pub fn open(path: &Path) -> Result<FileRef> {
        let file = File::open(path).map_err(|e| VnodeError::io(path, "open", e))?;
        Ok(FileRef {
            path: path.to_path_buf(),
            file,
            token: crate::column_cache::file_token(),
            obsolete: std::sync::atomic::AtomicBool::new(false),
        })
    }

    pub fn len(&self) -> Result<u64> {
        Ok(self
            .file
            .metadata()
            .map_err(|e| VnodeError::io(&self.path, "stat", e))?
            .len())
    }

    /// The file is no longer part of the committed file set; delete it when unused.
    pub fn mark_obsolete(&self) {
        self.obsolete
            .store(true, std::sync::atomic::Ordering::Release);
    }
}

impl Drop for FileRef {
    fn drop(&mut self) {
        if self.obsolete.load(std::sync::atomic::Ordering::Acquire) {
            if let Err(e) = fs::remove_file(&self.path) {
                tracing::warn!(file = %self.path.display(), error = %e, "could not delete an obsolete file");
            }
        }
    }
}

/// Creates `path` for writing (truncating), for files published later by rename.
pub fn create(path: &Path) -> Result<File> {
    OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(path)
        .map_err(|e| VnodeError::io(path, "create", e))
}

/// Writes, fsyncs and renames `tmp` onto `path`, then fsyncs the directory.
pub fn publish(mut f: File, tmp: &Path, path: &Path) -> Result<()> {
    f.flush().map_err(|e| VnodeError::io(tmp, "write", e))?;
    f.sync_all().map_err(|e| VnodeError::io(tmp, "fsync", e))?;
    drop(f);
    fs::rename(tmp, path).map_err(|e| VnodeError::io(path, "rename temp file onto", e))?;
    if let Some(parent) = path.parent() {
        sync_dir(parent)?;
    }
    Ok(())
}
