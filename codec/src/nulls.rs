//! The NULL mask of a column block, present only when the block has at least one NULL, at the
//! start of the stage-1 payload: one mode byte, then either a bitmap (mode 0: bit i set = row i
//! is NULL, LSB-first) or the NULL row positions (mode 1: varint count, then the positions as
//! delta-i integers), whichever is smaller. Sparse NULLs (TSBS nulls ~1-10% of a field) cost a
//! few bits per NULL instead of one bit per row.
//!
//! Invariants: values of NULL rows are not stored at all (the value encodings see only the
//! non-NULL values, which keeps deltas of a series continuous across gaps); decoding puts the
//! type's placeholder (0, false, "") in NULL slots. A mask with no NULL decodes as "no NULLs"
//! (an empty `nulls` vector). Positions must be strictly increasing and below the row count.

use crate::bool::{get_bitmap, put_bitmap};
use crate::buf::{put_varint, varint_len, Reader};
use crate::int::{self, IntId};
use crate::CodecError;

const MODE_BITMAP: u8 = 0;
const MODE_POSITIONS: u8 = 1;

pub fn encode(nulls: &[bool], out: &mut Vec<u8>) {
    let bitmap_len = nulls.len().div_ceil(8);
    // A position list holds its count and, with a NULL, at least a byte of positions: it
    // cannot be smaller than a bitmap of that many bytes, which is then not sized.
    let list_len_min = if nulls.contains(&true) { 2 } else { 1 };
    if bitmap_len > list_len_min {
        let pos: Vec<i64> = nulls
            .iter()
            .enumerate()
            .filter(|(_, &n)| n)
            .map(|(i, _)| i as i64)
            .collect();
        let list_len = varint_len(pos.len() as u64) + int::encoded_len(&pos, IntId::DeltaI);
        if list_len < bitmap_len {
            out.push(MODE_POSITIONS);
            put_varint(out, pos.len() as u64);
            int::encode(&pos, IntId::DeltaI, out);
            return;
        }
    }
    out.push(MODE_BITMAP);
    put_bitmap(nulls.iter().copied(), out);
}

/// Reads the mask of `rows` rows; returns it (empty if no bit is set) and the NULL count.
pub fn decode(r: &mut Reader, rows: usize) -> Result<(Vec<bool>, usize), CodecError> {
    let mode = r.u8("null mask mode")?;
    let mut mask = Vec::with_capacity(rows);
    match mode {
        MODE_BITMAP => get_bitmap(r, rows, &mut mask)?,
        MODE_POSITIONS => {
            let count = r.varint_max(rows as u64, "null count")? as usize;
            let at = r.offset();
            let mut pos = Vec::with_capacity(count);
            int::decode(r, IntId::DeltaI, count, &mut pos)?;
            mask.resize(rows, false);
            let mut prev: i64 = -1;
            for p in pos {
                let slot = usize::try_from(p).ok().and_then(|i| mask.get_mut(i));
                match slot {
                    Some(s) if p > prev => *s = true,
                    _ => {
                        return Err(CodecError::Corrupt {
                            offset: at,
                            reason: format!("null position {p} out of order or beyond {rows} rows"),
                        })
                    }
                }
                prev = p;
            }
        }
        other => return Err(r.corrupt(format!("unknown null mask mode {other}"))),
    }
    let count = mask.iter().filter(|&&b| b).count();
    if count == 0 {
        mask = Vec::new();
    }
    Ok((mask, count))
}

/// Spreads `values` (the non-NULL ones, in order) over `mask`, filling NULL slots with `fill`.
pub fn expand<T: Clone>(values: Vec<T>, mask: &[bool], fill: T) -> Vec<T> {
    if mask.is_empty() {
        return values;
    }
    let mut it = values.into_iter();
    mask.iter()
        .map(|&null| {
            if null {
                fill.clone()
            } else {
                it.next().unwrap_or_else(|| fill.clone())
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_modes_roundtrip() {
        for rows in [1usize, 7, 100, 4096] {
            for every in [1usize, 2, 10, 70, 5000] {
                let m: Vec<bool> = (0..rows).map(|i| i % every == every / 2).collect();
                let mut b = Vec::new();
                encode(&m, &mut b);
                let mut r = Reader::new(&b, 0);
                let (back, count) = decode(&mut r, rows).unwrap();
                r.finish("t").unwrap();
                let want = m.iter().filter(|&&x| x).count();
                assert_eq!(count, want);
                if want == 0 {
                    assert!(back.is_empty());
                } else {
                    assert_eq!(back, m);
                }
            }
        }
        // Sparse masks use positions.
        let m: Vec<bool> = (0..4096).map(|i| i % 100 == 0).collect();
        let mut b = Vec::new();
        encode(&m, &mut b);
        assert!(b.len() < 80, "{}", b.len());
    }

    /// What [`encode`] wrote before it sized the position list instead of writing it: both
    /// modes built, the smaller kept.
    fn encode_by_building_both(nulls: &[bool], out: &mut Vec<u8>) {
        let pos: Vec<i64> = (0..nulls.len())
            .filter(|&i| nulls[i])
            .map(|i| i as i64)
            .collect();
        let mut list = Vec::new();
        put_varint(&mut list, pos.len() as u64);
        int::encode(&pos, IntId::DeltaI, &mut list);
        if list.len() < nulls.len().div_ceil(8) {
            out.push(MODE_POSITIONS);
            out.extend_from_slice(&list);
        } else {
            out.push(MODE_BITMAP);
            put_bitmap(nulls.iter().copied(), out);
        }
    }

    #[test]
    fn the_mode_is_the_smaller_of_the_two_built() {
        let mut rng = crate::test_util::Rng::new(41);
        for round in 0..3000 {
            let rows = match round % 3 {
                0 => rng.below(40) as usize,
                1 => rng.below(600) as usize,
                _ => 1 + rng.below(5000) as usize,
            };
            let per_mille = [0, 1, 5, 20, 100, 500, 1000][round % 7];
            let m: Vec<bool> = (0..rows).map(|_| rng.below(1000) < per_mille).collect();
            let (mut a, mut b) = (vec![9u8], vec![9u8]);
            encode(&m, &mut a);
            encode_by_building_both(&m, &mut b);
            assert_eq!(a, b, "round {round}: {rows} rows");
        }
    }

    #[test]
    fn bad_positions() {
        // positions mode, 2 nulls, delta-i: first 3, one block width 0 min 0 (repeat 3).
        let b = [MODE_POSITIONS, 2, 6, 0, 0];
        assert!(decode(&mut Reader::new(&b, 0), 10).is_err());
        // position 20 >= 10 rows
        let b = [MODE_POSITIONS, 1, 40];
        assert!(decode(&mut Reader::new(&b, 0), 10).is_err());
    }
}
