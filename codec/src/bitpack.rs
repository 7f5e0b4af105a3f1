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

use crate::buf::{put_varint, varint_len, zigzag, Reader};
use crate::CodecError;

/// Values per FOR block: small enough that one outlier only widens 128 values, large enough that
/// the 2-12 byte block header costs < 1 bit per value.
pub const BLOCK_VALUES: usize = 128;

/// Block header flag: a GCD > 1 follows the minimum.
const FLAG_GCD: u8 = 0x80;

/// Binary GCD (Stein): shifts and subtractions rather than a 64-bit division per step, which
/// costs tens of cycles and ran once per value of every block sized or encoded.
fn gcd(a: u64, b: u64) -> u64 {
    if a == 0 {
        return b;
    }
    if b == 0 {
        return a;
    }
    let shift = (a | b).trailing_zeros();
    let mut a = a >> a.trailing_zeros();
    let mut b = b;
    loop {
        b >>= b.trailing_zeros();
        if a > b {
            std::mem::swap(&mut a, &mut b);
        }
        b -= a;
        if b == 0 {
            return a << shift;
        }
    }
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

/// Unpacks `out.len()` values of `width` bits from the start of `src`. `src` may run on past
/// the packed values (the rest of the column: loads that reach into it are masked off); a load
/// past its end reads zeros.
fn unpack_block(src: &[u8], width: u32, out: &mut [u64]) {
    // One loop per width: with the width a constant, every value of a group of eight has a
    // constant byte offset and shift, and the loop unrolls (measured 1.6x faster than one
    // loop with the width in a register, on the decode path of every integer and float).
    macro_rules! by_width {
        ($($w:literal)*) => {
            match width {
                0 => out.fill(0),
                $($w => unpack_fixed::<$w>(src, out),)*
                _ => unpack_from(src, width, out, 0),
            }
        };
    }
    by_width!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28
        29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56);
}

/// [`unpack_block`] for a width `W` of 1 to 56 bits: eight values take exactly `W` bytes,
/// and each one is an 8-byte load, shifted and masked.
#[inline(always)]
fn unpack_fixed<const W: usize>(src: &[u8], out: &mut [u64]) {
    let mask = (1u64 << W) - 1;
    let mut done = 0;
    for (gi, group) in out.chunks_exact_mut(8).enumerate() {
        // The group's W bytes and the 8 that its last load may reach past them.
        let Some(s) = src.get(gi * W..gi * W + W + 8) else {
            break;
        };
        for (j, o) in group.iter_mut().enumerate() {
            let bit = j * W;
            let word = s
                .get(bit >> 3..)
                .and_then(|x| x.first_chunk::<8>())
                .map_or(0, |c| u64::from_le_bytes(*c));
            *o = (word >> (bit & 7)) & mask;
        }
        done += 8;
    }
    unpack_from(src, W as u32, out, done);
}

/// Values `from..` of [`unpack_block`], one at a time through a zero-padded copy: a block's
/// last values that do not fill a group of eight (or whose loads would run past the end of
/// the column) and widths above 56 bits.
fn unpack_from(src: &[u8], width: u32, out: &mut [u64], from: usize) {
    let mask: u64 = if width >= 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    };
    let w = width as usize;
    for (i, o) in out.iter_mut().enumerate().skip(from) {
        let bit = i * w;
        let avail = src.get(bit >> 3..).unwrap_or(&[]);
        let k = avail.len().min(16);
        let mut b = [0u8; 16];
        if let (Some(d), Some(s)) = (b.get_mut(..k), avail.get(..k)) {
            d.copy_from_slice(s);
        }
        *o = ((u128::from_le_bytes(b) >> (bit & 7)) as u64) & mask;
    }
}

/// A FOR block's frame, as [`frame`] finds it.
pub type Frame = (i64, u64, u64);

/// The frames of a sequence's blocks, in order.
pub type Frames = Vec<Frame>;

/// A block's frame: its minimum, the GCD of the offsets from it (0 when every offset is 0;
/// used as a divisor only when above 1) and the largest offset divided by that divisor.
fn frame(block: &[i64]) -> Frame {
    let Some(&first) = block.first() else {
        return (0, 0, 0);
    };
    // One pass for both bounds; the largest offset is the largest value's (offsets from the
    // true minimum keep the values' order).
    let (mut min, mut max) = (first, first);
    for &v in block {
        min = min.min(v);
        max = max.max(v);
    }
    let max_off = max.wrapping_sub(min) as u64;
    if max_off == 0 {
        return (min, 0, 0);
    }
    // The divisor usually falls to 1 within a few values (then no other value can raise it).
    let mut g: u64 = 0;
    for &v in block {
        g = gcd(g, v.wrapping_sub(min) as u64);
        if g == 1 {
            return (min, 1, max_off);
        }
    }
    (min, g, max_off / g)
}

/// The bytes of a block's header and packed values, given its length and frame.
fn block_len(len: usize, (min, g, max_off): Frame) -> usize {
    let divisor = if g > 1 { varint_len(g) } else { 0 };
    1 + varint_len(zigzag(min)) + divisor + packed_len(len, width_of(max_off))
}

/// The number of bytes [`encode`] appends for `values`, found without writing them, and the
/// blocks' frames (into `frames`, emptied first) for [`encode_framed`]: the `Auto` trial
/// sizes every candidate this way and encodes only the smallest, with the frames it found.
pub fn encoded_len(values: &[i64], frames: &mut Frames) -> usize {
    frames.clear();
    values
        .chunks(BLOCK_VALUES)
        .map(|block| {
            let f = frame(block);
            frames.push(f);
            block_len(block.len(), f)
        })
        .sum()
}

/// Appends the FOR blocks of `values`; the count is not stored (the caller knows it).
pub fn encode(values: &[i64], out: &mut Vec<u8>) {
    encode_framed(values, &[], out);
}

/// [`encode`] given the blocks' frames as [`encoded_len`] found them (any block without one
/// has it computed here).
pub fn encode_framed(values: &[i64], frames: &[Frame], out: &mut Vec<u8>) {
    let mut offs = [0u64; BLOCK_VALUES];
    for (i, block) in values.chunks(BLOCK_VALUES).enumerate() {
        let (min, g, max_off) = frames.get(i).copied().unwrap_or_else(|| frame(block));
        let offs = &mut offs[..block.len()];
        for (o, &v) in offs.iter_mut().zip(block) {
            *o = v.wrapping_sub(min) as u64;
        }
        let mut flags = 0u8;
        if g > 1 {
            flags = FLAG_GCD;
            for o in offs.iter_mut() {
                *o /= g;
            }
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
        let src = r.peek_rest();
        let packed = r.take(packed_len(len, width), "packed values")?.len();
        let offs = &mut offs[..len];
        // Loads may reach past the packed bytes into the rest of `src`; those bits are masked
        // off. Only the packed ones are read when nothing follows them.
        unpack_block(src.get(..packed + 8).unwrap_or(src), width, offs);
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
        let mut frames = Frames::new();
        assert_eq!(encoded_len(values, &mut frames), b.len(), "{values:?}");
        let mut framed = Vec::new();
        encode_framed(values, &frames, &mut framed);
        assert_eq!(framed, b);
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

    fn gcd_by_division(mut a: u64, mut b: u64) -> u64 {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    }

    #[test]
    fn binary_gcd_agrees_with_euclid() {
        let mut rng = Rng::new(5);
        for i in 0..20_000u64 {
            let (a, b) = match i % 4 {
                0 => (rng.next_u64(), rng.next_u64()),
                1 => (
                    rng.next_u64() >> rng.below(64),
                    rng.next_u64() >> rng.below(64),
                ),
                2 => (10_000 * rng.below(1000), 10_000 * rng.below(1000)),
                _ => (i % 7, rng.below(3) << rng.below(64)),
            };
            assert_eq!(gcd(a, b), gcd_by_division(a, b), "gcd({a}, {b})");
        }
        assert_eq!(gcd(0, 0), 0);
        assert_eq!(gcd(u64::MAX, u64::MAX), u64::MAX);
        assert_eq!(gcd(1 << 63, 1 << 62), 1 << 62);
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

    /// Every width and every length of a last group, with the packed values alone in the
    /// buffer and followed by set bits (the loads of the fast path reach past a block).
    #[test]
    fn every_width_and_tail_length_round_trips_whatever_follows() {
        let mut rng = Rng::new(11);
        for w in 1..=64u32 {
            for n in (0..=40usize).chain([127, 128, 129, 255, 256, 300]) {
                let mask = if w == 64 { u64::MAX } else { (1u64 << w) - 1 };
                // The first value is 0 and one is the mask, so every block packs at width w.
                let v: Vec<i64> = (0..n)
                    .map(|i| match i % 128 {
                        0 => 0,
                        1 => mask as i64,
                        _ => (rng.next_u64() & mask) as i64,
                    })
                    .collect();
                let mut b = Vec::new();
                encode(&v, &mut b);
                for tail in [&[][..], &[0xFF; 24][..]] {
                    let mut buf = b.clone();
                    buf.extend_from_slice(tail);
                    let mut out = Vec::new();
                    let mut r = Reader::new(&buf, 0);
                    decode(&mut r, n, &mut out).unwrap();
                    assert_eq!(out, v, "width {w} n {n} tail {}", tail.len());
                    assert_eq!(r.remaining(), tail.len(), "width {w} n {n}");
                }
            }
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
