//! Simple-8b word packing of u64 values below 2^60 (Anh & Moffat), as TDengine's `simple8b`.
//!
//! Each little-endian u64 word holds a 4-bit selector in its top bits and 60 payload bits split
//! into equal slots. Selectors 0 and 1 are runs of 240 and 120 zeros (zigzag deltas of a steady
//! series are mostly 0, so this variant runs zeros rather than the original's ones).
//!
//! Invariants: the value count is stored by the caller; the last word may be only partly used
//! (the decoder stops at the count, unused slots must be zero-filled by the encoder but are not
//! checked). Values >= 2^60 cannot be represented: [`encode`] returns `false` and the caller
//! picks another encoding.

use crate::buf::Reader;
use crate::CodecError;

/// (values per word, bits per value) for each selector.
const SELECTORS: [(usize, u32); 16] = [
    (240, 0),
    (120, 0),
    (60, 1),
    (30, 2),
    (20, 3),
    (15, 4),
    (12, 5),
    (10, 6),
    (8, 7),
    (7, 8),
    (6, 10),
    (5, 12),
    (4, 15),
    (3, 20),
    (2, 30),
    (1, 60),
];

pub const VALUE_MAX: u64 = (1 << 60) - 1;

/// For each bit width 0..=60, the first selector whose slots are that wide or wider: no
/// selector before it can hold a value of that width.
const FIRST_SELECTOR_OF_WIDTH: [u8; 61] = {
    let mut t = [0u8; 61];
    let mut w = 0;
    while w < 61 {
        let mut s = 0;
        while SELECTORS[s].1 < w as u32 {
            s += 1;
        }
        t[w] = s as u8;
        w += 1;
    }
    t
};

/// The selector, value count and bit width of the word that starts `rest` (not empty), or
/// `None` if its first value is too large for 60 bits. The search starts at the first
/// selector wide enough for the first value (those before it fail on that value): typical
/// deltas need 8-20 bits, and trying the narrow selectors first was most of the search.
fn choose(rest: &[u64]) -> Option<(usize, usize, u32)> {
    let first = *rest.first()?;
    let from = *FIRST_SELECTOR_OF_WIDTH.get((64 - first.leading_zeros()) as usize)?;
    SELECTORS
        .iter()
        .enumerate()
        .skip(usize::from(from))
        .find_map(|(sel, &(count, bits))| {
            // At the tail a selector may be only partly used: the count is stored elsewhere.
            let take = count.min(rest.len());
            let limit = if bits == 0 {
                0
            } else {
                VALUE_MAX >> (60 - bits)
            };
            rest.iter()
                .take(take)
                .all(|&v| v <= limit)
                .then_some((sel, take, bits))
        })
}

/// The number of bytes [`encode`] appends for `values`, or `None` where it refuses them;
/// found without writing the words.
pub fn encoded_len(values: &[u64]) -> Option<usize> {
    let mut i = 0;
    let mut words = 0;
    while let Some(rest) = values.get(i..).filter(|r| !r.is_empty()) {
        let (_, take, _) = choose(rest)?;
        words += 1;
        i += take;
    }
    Some(words * 8)
}

/// Appends the words for `values`; returns false (and leaves `out` as it was) if a value is too
/// large for 60 bits.
pub fn encode(values: &[u64], out: &mut Vec<u8>) -> bool {
    let start_len = out.len();
    let mut i = 0;
    while let Some(rest) = values.get(i..).filter(|r| !r.is_empty()) {
        let Some((sel, take, bits)) = choose(rest) else {
            out.truncate(start_len);
            return false;
        };
        let mut word = (sel as u64) << 60;
        for (k, &v) in rest.iter().take(take).enumerate() {
            word |= v << (k as u32 * bits);
        }
        out.extend_from_slice(&word.to_le_bytes());
        i += take;
    }
    true
}

/// Decodes `n` values and appends them to `out`.
pub fn decode(r: &mut Reader, n: usize, out: &mut Vec<u64>) -> Result<(), CodecError> {
    let mut left = n;
    while left > 0 {
        let bytes = r.take(8, "simple8b word")?;
        let word = bytes
            .first_chunk::<8>()
            .map_or(0, |c| u64::from_le_bytes(*c));
        let sel = (word >> 60) as usize;
        let (count, bits) = SELECTORS.get(sel).copied().unwrap_or((1, 60));
        let take = count.min(left);
        if bits == 0 {
            out.extend(std::iter::repeat_n(0, take));
        } else {
            let mask = (1u64 << bits) - 1;
            out.extend((0..take).map(|k| (word >> (k as u32 * bits)) & mask));
        }
        left -= take;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::Rng;

    fn rt(v: &[u64]) -> usize {
        let mut b = Vec::new();
        assert!(encode(v, &mut b));
        assert_eq!(encoded_len(v), Some(b.len()));
        let mut r = Reader::new(&b, 0);
        let mut out = Vec::new();
        decode(&mut r, v.len(), &mut out).unwrap();
        r.finish("t").unwrap();
        assert_eq!(out, v);
        for cut in 0..b.len() {
            assert!(decode(&mut Reader::new(&b[..cut], 0), v.len(), &mut Vec::new()).is_err());
        }
        b.len()
    }

    #[test]
    fn roundtrips() {
        rt(&[]);
        rt(&[0]);
        rt(&[VALUE_MAX]);
        assert_eq!(rt(&[0; 480]), 16);
        rt(&[0, 0, 0, 1, 0, 0, 5, 1 << 40, 3]);
        let mut rng = Rng::new(3);
        for bits in 0..=60u32 {
            let v: Vec<u64> = (0..rng.below(500))
                .map(|_| {
                    if bits == 0 {
                        0
                    } else {
                        rng.next_u64() >> (64 - bits)
                    }
                })
                .collect();
            rt(&v);
        }
    }

    /// The words [`encode`] wrote when its search tried every selector from the first.
    fn encode_trying_every_selector(values: &[u64]) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < values.len() {
            let rest = &values[i..];
            let (sel, take, bits) =
                SELECTORS
                    .iter()
                    .enumerate()
                    .find_map(|(sel, &(count, bits))| {
                        let take = count.min(rest.len());
                        let limit = if bits == 0 {
                            0
                        } else {
                            VALUE_MAX >> (60 - bits)
                        };
                        rest[..take]
                            .iter()
                            .all(|&v| v <= limit)
                            .then_some((sel, take, bits))
                    })?;
            let mut word = (sel as u64) << 60;
            for (k, &v) in rest[..take].iter().enumerate() {
                word |= v << (k as u32 * bits);
            }
            out.extend_from_slice(&word.to_le_bytes());
            i += take;
        }
        Some(out)
    }

    #[test]
    fn the_search_from_the_first_wide_enough_selector_writes_the_same_words() {
        let mut rng = Rng::new(17);
        for round in 0..2000 {
            let n = rng.below(300) as usize;
            let v: Vec<u64> = (0..n)
                .map(|_| match rng.below(6) {
                    0 => 0,
                    1 => rng.below(4),
                    2 => rng.next_u64() >> (4 + rng.below(60)),
                    3 => VALUE_MAX,
                    4 if round % 50 == 0 => VALUE_MAX + 1,
                    _ => rng.below(1 << 12),
                })
                .collect();
            let mut got = Vec::new();
            let ok = encode(&v, &mut got);
            let want = encode_trying_every_selector(&v);
            assert_eq!(ok.then_some(got), want, "round {round}: {v:?}");
        }
        for w in 0..=60u32 {
            let v = if w == 0 { 0 } else { 1u64 << (w - 1) };
            let s = usize::from(FIRST_SELECTOR_OF_WIDTH[w as usize]);
            assert!(
                SELECTORS[s].1 >= w && (s == 0 || SELECTORS[s - 1].1 < w),
                "width {w}"
            );
            assert!(
                choose(&[v]).is_some_and(|(sel, _, _)| sel == s),
                "width {w}"
            );
        }
    }

    #[test]
    fn too_large_is_refused() {
        let mut b = vec![1u8];
        assert!(!encode(&[1, VALUE_MAX + 1], &mut b));
        assert_eq!(encoded_len(&[1, VALUE_MAX + 1]), None);
        assert_eq!(b, vec![1u8]);
    }
}
