//! Frame-of-reference (FOR) bit-packing of i64 sequences in blocks of [`BLOCK_VALUES`].
//!
//! Each block stores its minimum, an optional common divisor (GCD) of the offsets from that
//! minimum, and the offsets divided by the GCD packed at the smallest bit width that holds the
//! largest. The GCD matters for time series: deltas of a 10 s / ms-precision clock are multiples
//! of 10 000, which turns a 15-bit width into 1-2 bits.
//!
//! Invariants: all arithmetic is wrapping (offsets are `v - min` mod 2^64, which is exact because
//! `min` is the true minimum), so every i64 (and every u64 bit-cast to i64) round-trips; a block
//! never holds more than [`BLOCK_VALUES`] values, which bounds the stack buffer the decoder uses.

use crate::buf::{put_varint, zigzag, Reader};
use crate::CodecError;

/// Values per FOR block: small enough that one outlier only widens 128 values, large enough that
/// the 2-12 byte block header costs < 1 bit per value.
pub const BLOCK_VALUES: usize = 128;

/// Block header flag: a GCD > 1 follows the minimum.
const FLAG_GCD: u8 = 0x80;

/// Room for one block of 64-bit values plus the 16 bytes an unaligned u128 load may touch.
const UNPACK_BUF_BYTES: usize = BLOCK_VALUES * 8 + 16;

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        let t = a % b;
        a = b;
        b = t;
    }
    a
}

/// Bits needed to hold `v` (0 for 0).
#[inline]
pub fn width_of(v: u64) -> u32 {
    64 - v.leading_zeros()
}

/// Packs the low `width` bits of each value, LSB first, into ceil(len * width / 8) bytes.
pub fn pack(values: &[u64], width: u32, out: &mut Vec<u8>) {
    if width == 0 {
        return;
    }
    let mut acc: u128 = 0;
    let mut nbits: u32 = 0;
    let mask: u64 = if width == 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    };
    for &v in values {
        acc |= u128::from(v & mask) << nbits;
        nbits += width;
        if nbits >= 64 {
            out.extend_from_slice(&(acc as u64).to_le_bytes());
            acc >>= 64;
            nbits -= 64;
        }
    }
    while nbits > 0 {
        out.push(acc as u8);
        acc >>= 8;
        nbits = nbits.saturating_sub(8);
    }
}

pub fn packed_len(n: usize, width: u32) -> usize {
    (n * width as usize).div_ceil(8)
}

/// Unpacks `out.len()` (at most [`BLOCK_VALUES`]) values of `width` bits from `bytes`, which must
/// be exactly `packed_len(out.len(), width)` long (the caller checked it).
fn unpack_block(bytes: &[u8], width: u32, out: &mut [u64]) {
    let mut buf = [0u8; UNPACK_BUF_BYTES];
    let n = bytes.len().min(BLOCK_VALUES * 8);
    if let (Some(dst), Some(src)) = (buf.get_mut(..n), bytes.get(..n)) {
        dst.copy_from_slice(src);
    }
    if width == 0 {
        out.fill(0);
        return;
    }
    let mask: u64 = if width == 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    };
    let w = width as usize;
    // Bit offsets stay below BLOCK_VALUES * 64, so `byte + 16 <= UNPACK_BUF_BYTES` and the
    // chunk lookups below always succeed; the fallbacks exist only to avoid a panic path.
    if width <= 56 {
        for (i, o) in out.iter_mut().enumerate() {
            let bit = i * w;
            let word = buf
                .get(bit >> 3..)
                .and_then(|s| s.first_chunk::<8>())
                .map_or(0, |c| u64::from_le_bytes(*c));
            *o = (word >> (bit & 7)) & mask;
        }
    } else {
        for (i, o) in out.iter_mut().enumerate() {
            let bit = i * w;
            let word = buf
                .get(bit >> 3..)
                .and_then(|s| s.first_chunk::<16>())
                .map_or(0, |c| u128::from_le_bytes(*c));
            *o = ((word >> (bit & 7)) as u64) & mask;
        }
    }
}

/// Appends the FOR blocks of `values`; the count is not stored (the caller knows it).
pub fn encode(values: &[i64], out: &mut Vec<u8>) {
    let mut offs = [0u64; BLOCK_VALUES];
    for block in values.chunks(BLOCK_VALUES) {
        let min = block.iter().copied().min().unwrap_or(0);
        let mut g: u64 = 0;
        let mut max_off: u64 = 0;
        for (o, &v) in offs.iter_mut().zip(block) {
            let off = v.wrapping_sub(min) as u64;
            *o = off;
            max_off = max_off.max(off);
            if g != 1 {
                g = gcd(g, off);
            }
        }
        let offs = &mut offs[..block.len()];
        let mut flags = 0u8;
        if g > 1 {
            flags = FLAG_GCD;
            for o in offs.iter_mut() {
                *o /= g;
            }
            max_off /= g;
        }
        let width = width_of(max_off);
        out.push(width as u8 | flags);
        put_varint(out, zigzag(min));
        if g > 1 {
            put_varint(out, g);
        }
        pack(offs, width, out);
    }
}

/// Decodes `n` values written by [`encode`] and appends them to `out`.
pub fn decode(r: &mut Reader, n: usize, out: &mut Vec<i64>) -> Result<(), CodecError> {
    let mut offs = [0u64; BLOCK_VALUES];
    let mut left = n;
    while left > 0 {
        let len = left.min(BLOCK_VALUES);
        let head = r.u8("bit-packing block header")?;
        let width = u32::from(head & !FLAG_GCD);
        if width > 64 {
            return Err(r.corrupt(format!("bit width {width} > 64")));
        }
        let min = r.zigzag_varint("block minimum")?;
        let g = if head & FLAG_GCD != 0 {
            let g = r.varint("block divisor")?;
            if g < 2 {
                return Err(r.corrupt(format!("block divisor {g} < 2")));
            }
            g
        } else {
            1
        };
        let bytes = r.take(packed_len(len, width), "packed values")?;
        let offs = &mut offs[..len];
        unpack_block(bytes, width, offs);
        out.extend(
            offs.iter()
                .map(|&o| min.wrapping_add(o.wrapping_mul(g) as i64)),
        );
        left -= len;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::Rng;

    fn rt(values: &[i64]) {
        let mut b = Vec::new();
        encode(values, &mut b);
        let mut out = Vec::new();
        let mut r = Reader::new(&b, 0);
        decode(&mut r, values.len(), &mut out).unwrap();
        r.finish("test").unwrap();
        assert_eq!(out, values);
        for cut in 0..b.len() {
            let mut r = Reader::new(&b[..cut], 0);
            assert!(decode(&mut r, values.len(), &mut Vec::new()).is_err());
        }
    }

    #[test]
    fn edges() {
        rt(&[]);
        rt(&[0]);
        rt(&[i64::MIN, i64::MAX]);
        rt(&[i64::MAX, i64::MIN, 0, -1, 1]);
        rt(&[5; 300]);
        rt(&(0..1000).map(|i| i * 10_000).collect::<Vec<_>>());
        rt(&(0..1000).map(|i| -i * 7 + 3).collect::<Vec<_>>());
    }

    #[test]
    fn random_widths() {
        let mut rng = Rng::new(7);
        for w in 0..=64u32 {
            let n = rng.below(400) as usize;
            let v: Vec<i64> = (0..n)
                .map(|_| {
                    let x = rng.next_u64();
                    (if w == 64 { x } else { x & ((1u64 << w) - 1) }) as i64
                })
                .collect();
            rt(&v);
        }
    }

    #[test]
    fn gcd_shrinks_width() {
        let v: Vec<i64> = (0..128).map(|i| 1_000_000 + (i % 3) * 10_000).collect();
        let mut b = Vec::new();
        encode(&v, &mut b);
        assert!(b.len() < 48, "{}", b.len());
    }
}
