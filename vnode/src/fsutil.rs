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
