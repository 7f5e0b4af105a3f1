//! VARCHAR/NCHAR encodings: length-prefixed plain (`disabled`) and dictionary.
//!
//! Plain: all lengths as varints, then all bytes. Lengths first keeps the text contiguous so the
//! stage-2 compressor (LZ4/zstd) sees one long run of similar text.
//! Dictionary: varint entry count, the entries in the plain layout (first-seen order), then the
//! per-row indices as FOR bit-packed integers (see [`crate::bitpack`]).
//!
//! Invariants: every decoded string is validated UTF-8; the total bytes decoded never exceed the
//! payload; dictionary indices are range-checked.

use std::collections::HashMap;

use crate::buf::{put_varint, Reader};
use crate::{bitpack, CodecError};

pub const ID_PLAIN: u8 = 0;
pub const ID_DICT: u8 = 9;

fn put_plain<'a>(values: impl Iterator<Item = &'a str> + Clone, out: &mut Vec<u8>) {
    for s in values.clone() {
        put_varint(out, s.len() as u64);
    }
    for s in values {
        out.extend_from_slice(s.as_bytes());
    }
}

fn get_plain(r: &mut Reader, n: usize, out: &mut Vec<String>) -> Result<(), CodecError> {
    let mut lens = Vec::with_capacity(n.min(r.remaining()));
    let mut total: u64 = 0;
    for _ in 0..n {
        // A length can never exceed what is left of the payload, which bounds the allocation.
        let len = r.varint_max(r.remaining() as u64, "string length")?;
        total = total.saturating_add(len);
        lens.push(len as usize);
    }
    if total > r.remaining() as u64 {
        return Err(r.corrupt(format!(
            "string lengths add up to {total} bytes, {} left",
            r.remaining()
        )));
    }
    out.reserve(n);
    for len in lens {
        let start = r.offset();
        let bytes = r.take(len, "string bytes")?;
        let s = std::str::from_utf8(bytes).map_err(|e| CodecError::Corrupt {
            offset: start + e.valid_up_to(),
            reason: "string is not valid UTF-8".to_string(),
        })?;
        out.push(s.to_string());
    }
    Ok(())
}

/// Appends the payload; `dict_allowed` lets the encoder pick a dictionary when it is smaller.
pub fn encode(values: &[&str], dict_allowed: bool, out: &mut Vec<u8>) -> u8 {
    if dict_allowed && values.len() >= 2 {
        let mut index: HashMap<&str, i64> = HashMap::new();
        let mut entries: Vec<&str> = Vec::new();
        let mut idx = Vec::with_capacity(values.len());
        for &s in values {
            let next = entries.len() as i64;
            let i = *index.entry(s).or_insert_with(|| {
                entries.push(s);
                next
            });
            idx.push(i);
        }
        if entries.len() * 2 <= values.len() {
            let mut dict = Vec::new();
            put_varint(&mut dict, entries.len() as u64);
            put_plain(entries.iter().copied(), &mut dict);
            bitpack::encode(&idx, &mut dict);
            let plain_len: usize = values
                .iter()
                .map(|s| s.len() + crate::buf::varint_len(s.len() as u64))
                .sum();
            if dict.len() < plain_len {
                out.extend_from_slice(&dict);
                return ID_DICT;
            }
        }
    }
    put_plain(values.iter().copied(), out);
    ID_PLAIN
}

pub fn decode(r: &mut Reader, id: u8, n: usize, out: &mut Vec<String>) -> Result<(), CodecError> {
    match id {
        ID_PLAIN => get_plain(r, n, out),
        ID_DICT => {
            let d = r.varint_max(n as u64, "dictionary size")? as usize;
            let mut entries = Vec::with_capacity(d);
            get_plain(r, d, &mut entries)?;
            let start = r.offset();
            let mut idx = Vec::with_capacity(n);
            bitpack::decode(r, n, &mut idx)?;
            out.reserve(n);
            for i in idx {
                let s = usize::try_from(i)
                    .ok()
                    .and_then(|i| entries.get(i))
                    .ok_or_else(|| CodecError::Corrupt {
                        offset: start,
                        reason: format!("dictionary index {i} out of range 0..{d}"),
                    })?;
                out.push(s.clone());
            }
            Ok(())
        }
        other => Err(r.corrupt(format!("unknown string encoding {other}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt(v: &[&str]) -> Vec<(u8, usize)> {
        let mut res = Vec::new();
        for dict in [false, true] {
            let mut b = Vec::new();
            let id = encode(v, dict, &mut b);
            let mut out = Vec::new();
            let mut r = Reader::new(&b, 0);
            decode(&mut r, id, v.len(), &mut out).unwrap();
            r.finish("t").unwrap();
            assert_eq!(out, v);
            for cut in 0..b.len() {
                let mut r = Reader::new(&b[..cut], 0);
                let res = decode(&mut r, id, v.len(), &mut Vec::new());
                assert!(res.is_err() || !r.is_empty());
            }
            res.push((id, b.len()));
        }
        res
    }

    #[test]
    fn roundtrips() {
        rt(&[]);
        rt(&[""]);
        rt(&["", "", "héllo wörld ✓ 日本語", "🦀"]);
        let many: Vec<String> = (0..500).map(|i| format!("truck_{}", i % 4)).collect();
        let many: Vec<&str> = many.iter().map(|s| s.as_str()).collect();
        let r = rt(&many);
        assert_eq!(r[1].0, ID_DICT);
        assert!(r[1].1 < 200, "{:?}", r);
    }

    #[test]
    fn bad_utf8_and_index() {
        let b = [1u8, 0xff];
        assert!(decode(&mut Reader::new(&b, 0), ID_PLAIN, 1, &mut Vec::new()).is_err());
        // dict of 1 entry "a", one index 1 (out of range): block header width 0, min 1.
        let b = [1u8, 1, b'a', 0, 2];
        assert!(decode(&mut Reader::new(&b, 0), ID_DICT, 1, &mut Vec::new()).is_err());
    }
}
