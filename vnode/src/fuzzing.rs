//! Entry points for the fuzz targets (`fuzz/fuzz_targets/vnode_*.rs`) and for replaying their
//! corpora in ordinary tests: each feeds arbitrary bytes to one on-disk decoder. None may panic
//! or allocate without bound, whatever the bytes; errors are the expected outcome.

use crate::{block, data_file, op, stt};
use std::path::{Path, PathBuf};
use tidal_common::{DataType, TableUid};

const TYPES: [DataType; 8] = [
    DataType::Timestamp,
    DataType::Double,
    DataType::VarChar(64),
    DataType::BigInt,
    DataType::Bool,
    DataType::Int,
    DataType::UBigInt,
    DataType::Float,
];

/// A scratch file per process (fuzzers run one input at a time per process).
fn scratch(tag: &str, bytes: &[u8]) -> Option<PathBuf> {
    let p = std::env::temp_dir().join(format!("tidal-fuzz-{}-{tag}", std::process::id()));
    std::fs::write(&p, bytes).ok()?;
    Some(p)
}

/// A WAL record payload (the operation encoding).
pub fn wal_record(data: &[u8]) {
    let _ = op::decode(data);
}

/// A whole WAL file: frames, checksums, torn tails.
pub fn wal_file(data: &[u8]) {
    let dir = std::env::temp_dir().join(format!("tidal-fuzz-wal-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    if std::fs::create_dir_all(&dir).is_err() {
        return;
    }
    let path = dir.join(format!("{:020}.log", 1));
    if std::fs::write(&path, data).is_err() {
        return;
    }
    if let Ok(files) = crate::wal::list_files(&dir) {
        let _ = crate::wal::replay(&files, |_, payload, _, _| {
            let _ = op::decode(payload);
            Ok(())
        });
    }
}

/// An STT file: open (header, footer, index) and read every block with every column type.
pub fn stt_file(data: &[u8]) {
    let Some(p) = scratch("stt", data) else {
        return;
    };
    if let Ok(f) = stt::open(&p, 1) {
        let uids: Vec<TableUid> = f.uids().collect();
        for uid in uids {
            for b in f.blocks(uid) {
                let n = b.ncols.min(8) as usize;
                let wanted: Vec<(usize, DataType)> =
                    (0..n).map(|i| (i, TYPES[i % TYPES.len()])).collect();
                let _ = f.read(b, &wanted);
            }
        }
    }
}

/// One column block: the first byte is the row count the index claims, the rest is the block.
pub fn data_block(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let Some(p) = scratch("block", rest) else {
        return;
    };
    let Ok(file) = std::fs::File::open(&p) else {
        return;
    };
    let ncols = rest
        .get(0..4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .unwrap_or(0);
    let loc = block::BlockLoc {
        offset: 0,
        len: rest.len() as u32,
        ncols,
        rows: u32::from(sel),
        ts_min: 0,
        ts_max: 0,
    };
    let wanted: Vec<(usize, DataType)> = (0..ncols.min(8) as usize)
        .map(|i| (i, TYPES[i % TYPES.len()]))
        .collect();
    let _ = block::read_columns(&file, Path::new("fuzz"), &loc, &wanted);
}

/// A head file (block index of a window).
pub fn head(data: &[u8]) {
    let _ = data_file::decode_head(data, Path::new("fuzz"), u64::MAX, u64::MAX);
}

/// One SMA record.
pub fn sma(data: &[u8]) {
    let _ = block::decode_sma(data, Path::new("fuzz"), 0);
}

/// The manifest.
pub fn manifest(data: &[u8]) {
    let Some(p) = scratch("manifest", data) else {
        return;
    };
    let _ = crate::manifest::read(&p);
}

/// Replays every file under `dir` (a corpus or artifacts folder) through `f`.
pub fn replay_dir(dir: &Path, f: fn(&[u8])) -> usize {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut n = 0;
    for e in rd.flatten() {
        if let Ok(bytes) = std::fs::read(e.path()) {
            f(&bytes);
            n += 1;
        }
    }
    n
}
