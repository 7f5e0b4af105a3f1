//! The manifest `meta/MANIFEST`: which files make up the vnode (per time window: its STT staging
//! files and the committed version of its data files), the catalog snapshot, and the WAL
//! sequence number up to which both are complete (layout in `FORMAT.md` beside this file).
//!
//! Owns: the committed file set. Invariants: replaced only atomically (temp file, fsync, rename,
//! fsync dir); every listed file was fsynced (and, if named by rename, renamed) before the
//! manifest listing it was written; every WAL record with seq <= `flushed_seq` is fully reflected
//! in the listed files and the catalog snapshot, so replay starts after `flushed_seq`.

use crate::codec::{Reader, Writer};
use crate::error::{Result, VnodeError};
use crate::fsutil;
use crate::meta::Meta;
use std::path::Path;

pub const MANIFEST_MAGIC: &[u8; 8] = b"TIDALMAN";
/// Version 3 compresses the payload with zstd (the catalog of many subtables is megabytes
/// of names and tags, rewritten at every flush and merge); version 2 is still read.
pub const MANIFEST_VERSION: u32 = 3;
const HEADER_BYTES: usize = 24;
/// Fast: a flush or merge writes the whole manifest again; level 1 already takes the catalog
/// of a vnode of 50,000 TSBS subtables from 6 MB to under 1.
const MANIFEST_ZSTD_LEVEL: i32 = 1;

/// The committed version of one window's data files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataRec {
    pub data_id: u64,
    pub head_id: u64,
    pub data_len: u64,
    pub sma_len: u64,
    pub garbage_bytes: u64,
}

/// One time window: its STT files (oldest first; a newer file wins per ts) and data files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WindowRec {
    pub fid: i64,
    pub stts: Vec<u64>,
    pub data: Option<DataRec>,
}

pub struct Manifest {
    pub flushed_seq: u64,
    pub next_file_id: u64,
    pub windows: Vec<WindowRec>,
    pub meta: Meta,
}

impl Manifest {
    pub fn empty() -> Manifest {
        Manifest {
            flushed_seq: 0,
            next_file_id: 1,
            windows: Vec::new(),
            meta: Meta::new(),
        }
    }
}

pub fn encode(flushed_seq: u64, next_file_id: u64, windows: &[WindowRec], meta: &Meta) -> Vec<u8> {
    let mut w = Writer::new();
    w.u64(flushed_seq);
    w.u64(next_file_id);
    w.len_u32(windows.len());
    for win in windows {
        w.i64(win.fid);
        w.len_u32(win.stts.len());
        for id in &win.stts {
            w.u64(*id);
        }
        match &win.data {
            None => w.u8(0),
            Some(d) => {
                w.u8(1);
                w.u64(d.data_id);
                w.u64(d.head_id);
                w.u64(d.data_len);
                w.u64(d.sma_len);
                w.u64(d.garbage_bytes);
            }
        }
    }
    meta.encode(&mut w);
    let raw = w.buf;
    // The header's room first, filled in at the end.
    let mut out = Vec::with_capacity(HEADER_BYTES + 8 + raw.len() / 4);
    out.resize(HEADER_BYTES, 0);
    crate::codec::put_compressed(&mut out, &raw, MANIFEST_ZSTD_LEVEL);
    let payload = out.get(HEADER_BYTES..).unwrap_or(&[]);
    let (crc, len) = (crc32c::crc32c(payload), payload.len() as u64);
    let mut head = Vec::with_capacity(HEADER_BYTES);
    head.extend_from_slice(MANIFEST_MAGIC);
    head.extend_from_slice(&MANIFEST_VERSION.to_le_bytes());
    head.extend_from_slice(&crc.to_le_bytes());
    head.extend_from_slice(&len.to_le_bytes());
    out[..HEADER_BYTES].copy_from_slice(&head);
    out
}

pub fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    fsutil::write_atomic(path, bytes)
}

/// Reads the manifest; a missing file is the empty state of a new vnode.
pub fn read(path: &Path) -> Result<Manifest> {
    if !path.exists() {
        return Ok(Manifest::empty());
    }
    let bytes = fsutil::read_file(path)?;
    let corrupt = |offset: usize, reason: String| VnodeError::Corruption {
        file: path.to_path_buf(),
        offset: offset as u64,
        reason,
    };
    let mut r = Reader::new(&bytes);
    let de = |e: crate::codec::DecodeError| corrupt(e.offset, e.reason);
    let magic = r.bytes(8).map_err(de)?;
    if magic != MANIFEST_MAGIC {
        return Err(corrupt(0, "bad magic, not a Tidal manifest".into()));
    }
    let version = r.u32().map_err(de)?;
    if version != 2 && version != MANIFEST_VERSION {
        return Err(corrupt(
            8,
            format!(
                "unsupported manifest version {version} (this build reads versions 2 and {MANIFEST_VERSION}; \
                 version 1 vnodes from the foundation release must be reloaded)"
            ),
        ));
    }
    let crc = r.u32().map_err(de)?;
    let len = r.u64().map_err(de)?;
    if len != r.remaining() as u64 {
        return Err(corrupt(
            16,
            format!("payload length {len} but {} bytes follow", r.remaining()),
        ));
    }
    let payload = r.bytes(r.remaining()).map_err(de)?;
    let actual = crc32c::crc32c(payload);
    if actual != crc {
        return Err(corrupt(
            HEADER_BYTES,
            format!("checksum mismatch (stored {crc:#010x}, computed {actual:#010x})"),
        ));
    }
    let raw;
    // Version 3: offsets in errors past this point are into the decompressed payload.
    let (payload, base) = if version == 2 {
        (payload, HEADER_BYTES)
    } else {
        raw = decompress(payload).map_err(|e| corrupt(HEADER_BYTES, e))?;
        (&raw[..], 0)
    };
    let mut r = Reader::new(payload);
    let pe = |e: crate::codec::DecodeError| corrupt(base + e.offset, e.reason);
    let flushed_seq = r.u64().map_err(pe)?;
    let next_file_id = r.u64().map_err(pe)?;
    let n = r.count(13).map_err(pe)?;
    let mut windows = Vec::with_capacity(n);
    for _ in 0..n {
        let fid = r.i64().map_err(pe)?;
        let ns = r.count(8).map_err(pe)?;
        let mut stts = Vec::with_capacity(ns);
        for _ in 0..ns {
            stts.push(r.u64().map_err(pe)?);
        }
        let data = match r.u8().map_err(pe)? {
            0 => None,
            1 => Some(DataRec {
                data_id: r.u64().map_err(pe)?,
                head_id: r.u64().map_err(pe)?,
                data_len: r.u64().map_err(pe)?,
                sma_len: r.u64().map_err(pe)?,
                garbage_bytes: r.u64().map_err(pe)?,
            }),
            k => {
                return Err(corrupt(
                    base + r.pos(),
                    format!("window {fid}: invalid data flag {k}"),
                ))
            }
        };
        windows.push(WindowRec { fid, stts, data });
    }
    let meta = Meta::decode(&mut r).map_err(pe)?;
    Ok(Manifest {
        flushed_seq,
        next_file_id,
        windows,
        meta,
    })
}

/// Most bytes a version 3 payload may decompress to, per byte of it: far above what a catalog
/// compresses by (about 10 to 1), far below what a crafted frame could claim.
const RAW_BYTES_PER_BYTE_MAX: u64 = 1024;

/// A version 3 payload (`raw_len u64` and a zstd frame) decompressed, its length checked
/// against [`RAW_BYTES_PER_BYTE_MAX`] first (read only after the checksum passed).
fn decompress(payload: &[u8]) -> std::result::Result<Vec<u8>, String> {
    let raw_len = crate::codec::compressed_len(payload)
        .ok_or_else(|| "payload too short for its length".to_string())?;
    let raw_max = (payload.len() as u64).saturating_mul(RAW_BYTES_PER_BYTE_MAX);
    if raw_len > raw_max {
        return Err(format!(
            "payload of {} bytes claims to decompress to {raw_len}, more than {RAW_BYTES_PER_BYTE_MAX} times its size",
            payload.len()
        ));
    }
    crate::codec::get_compressed(payload).map_err(|e| format!("payload {e}"))
}
