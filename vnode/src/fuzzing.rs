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

/// An STT file: open (header, footer, index) and read every block with every column type; as
/// it is, and with the index checksum made to match, so that the fuzzer reaches the entries
/// (views of shared blocks) behind it.
pub fn stt_file(data: &[u8]) {
    stt_file_once(data);
    let Some(foot) = data.len().checked_sub(24) else {
        return;
    };
    let index_at = block::u64_at(data, foot) as usize;
    let index_len = block::u32_at(data, foot + 8) as usize;
    if index_at.checked_add(index_len) == Some(foot) {
        let mut sealed = data.to_vec();
        let crc = crc32c::crc32c(&sealed[index_at..foot]);
        sealed[foot + 12..foot + 16].copy_from_slice(&crc.to_le_bytes());
        stt_file_once(&sealed);
    }
}

fn stt_file_once(data: &[u8]) {
    let Some(p) = scratch("stt", data) else {
        return;
    };
    if let Ok(f) = stt::open(&p, 1) {
        let mut views = stt::ViewCache::default();
        let uids: Vec<TableUid> = f.uids().collect();
        for uid in uids {
            for b in f.blocks(uid) {
                let n = b.ncols.min(8) as usize;
                let wanted: Vec<(usize, DataType)> =
                    (0..n).map(|i| (i, TYPES[i % TYPES.len()])).collect();
                let _ = f.read(b, &wanted);
                // A shared block's views, also through the merge's cache and the query path.
                if b.view.is_some() {
                    let _ = f.read_with(b, &wanted, &mut views);
                    let _ = f.read_range(b, &wanted, i64::MIN, i64::MAX);
                }
            }
        }
    }
}

/// One column block: the first byte is the row count the index claims, the rest is the block.
pub fn data_block(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let Some((file, loc, wanted)) = block_file("block", rest, u32::from(sel), 0, 0) else {
        return;
    };
    let _ = block::read_columns(&file, Path::new("fuzz"), &loc, &wanted);
}

/// Columns to read: (index, type).
type Wanted = Vec<(usize, DataType)>;

/// `bytes` as a scratch file holding one block at offset 0, the index entry claiming `rows`
/// rows over `ts_min..=ts_max` and the column count the block starts with, and up to 8 of its
/// columns to read (types cycling through [`TYPES`]).
fn block_file(
    tag: &str,
    bytes: &[u8],
    rows: u32,
    ts_min: i64,
    ts_max: i64,
) -> Option<(std::fs::File, block::BlockLoc, Wanted)> {
    let p = scratch(tag, bytes)?;
    let file = std::fs::File::open(&p).ok()?;
    let ncols = bytes
        .get(0..4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .unwrap_or(0);
    let loc = block::BlockLoc {
        offset: 0,
        len: bytes.len() as u32,
        ncols,
        rows,
        ts_min,
        ts_max,
        view: None,
    };
    let wanted = (0..ncols.min(8) as usize)
        .map(|i| (i, TYPES[i % TYPES.len()]))
        .collect();
    Some((file, loc, wanted))
}

/// A time-range read of one column block (`block::read_columns_range`, which picks and
/// decodes segments): bytes 0-1 (LE) the row count the index claims, 2-9 and 10-17 (LE i64)
/// the range's ends, the rest the block; the index claims the block spans all of time, so
/// any range is a partial one.
pub fn block_range(data: &[u8]) {
    let (Some(r), Some(lo), Some(hi), Some(rest)) = (
        data.get(0..2),
        data.get(2..10),
        data.get(10..18),
        data.get(18..),
    ) else {
        return;
    };
    let rows = u32::from(u16::from_le_bytes([r[0], r[1]]));
    let i64_of = |b: &[u8]| b.try_into().map(i64::from_le_bytes).unwrap_or(0);
    let Some((file, loc, wanted)) = block_file("range", rest, rows, i64::MIN, i64::MAX) else {
        return;
    };
    // A fresh cache name per input: entries of one input never answer for another.
    let token = crate::column_cache::file_token();
    let (lo, hi) = (i64_of(lo), i64_of(hi));
    let path = Path::new("fuzz");
    if let Ok(cols) = block::read_columns_range(&file, path, token, &loc, &wanted, lo, hi) {
        let n = cols.first().map_or(0, |c| c.len());
        assert!(
            cols.iter().all(|c| c.len() == n),
            "columns of one range differ in length"
        );
        // Again, now through what the first read cached.
        let again = block::read_columns_range(&file, path, token, &loc, &wanted, lo, hi);
        assert!(
            again.is_ok_and(|c| c == cols),
            "a cached range reads differently"
        );
    }
}

/// Builds a [`block_range`] input.
pub fn block_range_input(rows: u16, lo: i64, hi: i64, block: &[u8]) -> Vec<u8> {
    let mut v = rows.to_le_bytes().to_vec();
    v.extend_from_slice(&lo.to_le_bytes());
    v.extend_from_slice(&hi.to_le_bytes());
    v.extend_from_slice(block);
    v
}

/// A head file (block index of a window): as it is, and with its checksum made to match, so
/// that the fuzzer reaches the decompression and the entries behind it (against committed
/// lengths of 1 MiB, which bound the body).
pub fn head(data: &[u8]) {
    let _ = data_file::decode_head(data, Path::new("fuzz"), u64::MAX, u64::MAX);
    let mut sealed = data.to_vec();
    if let Some(end) = sealed.len().checked_sub(12) {
        let crc = crc32c::crc32c(&sealed[..end]);
        sealed[end..end + 4].copy_from_slice(&crc.to_le_bytes());
        let _ = data_file::decode_head(&sealed, Path::new("fuzz"), 1 << 20, 1 << 20);
    }
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
    // Again with the checksum of the payload (after the 24-byte header) made to match, so that
    // the fuzzer reaches the decompression and the catalog behind it.
    if data.len() >= 24 {
        let mut sealed = data.to_vec();
        let crc = crc32c::crc32c(&sealed[24..]);
        sealed[12..16].copy_from_slice(&crc.to_le_bytes());
        if let Some(p) = scratch("manifest", &sealed) {
            let _ = crate::manifest::read(&p);
        }
    }
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
