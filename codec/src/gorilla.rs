//! Gorilla XOR float compression (Pelkonen et al., VLDB 2015; TDengine's `tsz`), plus the bit
//! stream it is written in.
//!
//! Payload: one mode byte (0: 64-bit doubles; 1: every value is an f32 widened to f64, and the
//! f32 bits are coded in the top half of the word so meaningful-bit runs stay at most 32 long),
//! then an LSB-first bit stream padded with zero bits to a whole byte:
//! first value raw (64 or 32 bits); then per value: `0` if equal to the previous; `1 0` + the
//! meaningful bits inside the previous leading/trailing-zero window; `1 1` + 6-bit leading-zero
//! count + 6-bit (length - 1) + `length` meaningful bits.
//!
//! Invariants: bit-exact for every f64 bit pattern (NaN payloads, -0.0) because it works on the
//! raw bits; the decoder rejects a window that does not fit in 64 bits and a `1 0` before any
//! window has been set.

use crate::buf::Reader;
use crate::CodecError;

pub struct BitWriter<'a> {
    out: &'a mut Vec<u8>,
    acc: u128,
    nbits: u32,
}

impl<'a> BitWriter<'a> {
    pub fn new(out: &'a mut Vec<u8>) -> BitWriter<'a> {
        BitWriter {
            out,
            acc: 0,
            nbits: 0,
        }
    }

    /// Writes the low `bits` (<= 64) bits of `v`.
    #[inline]
    pub fn write(&mut self, v: u64, bits: u32) {
        if bits == 0 {
            return;
        }
        let v = if bits == 64 {
            v
        } else {
            v & ((1u64 << bits) - 1)
        };
        self.acc |= u128::from(v) << self.nbits;
        self.nbits += bits;
        if self.nbits >= 64 {
            self.out.extend_from_slice(&(self.acc as u64).to_le_bytes());
            self.acc >>= 64;
            self.nbits -= 64;
        }
    }

    pub fn finish(mut self) {
        while self.nbits > 0 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.nbits = self.nbits.saturating_sub(8);
        }
    }
}

pub struct BitReader<'a> {
    bytes: &'a [u8],
    /// Next byte of `bytes` to load into `acc`.
    next: usize,
    acc: u128,
    nbits: u32,
    base: usize,
}

impl<'a> BitReader<'a> {
    pub fn new(bytes: &'a [u8], base: usize) -> BitReader<'a> {
        BitReader {
            bytes,
            next: 0,
            acc: 0,
            nbits: 0,
            base,
        }
    }

    fn corrupt(&self, reason: &str) -> CodecError {
        CodecError::Corrupt {
            offset: self.base + self.next,
            reason: reason.to_string(),
        }
    }

    /// Reads `bits` (<= 64) bits.
    #[inline]
    pub fn read(&mut self, bits: u32) -> Result<u64, CodecError> {
        if bits == 0 {
            return Ok(0);
        }
        while self.nbits < bits {
            if let Some(c) = self
                .bytes
                .get(self.next..)
                .and_then(|s| s.first_chunk::<8>())
            {
                // Load whole words while we can; `nbits < 64` here so 64 more fit in the u128.
                self.acc |= u128::from(u64::from_le_bytes(*c)) << self.nbits;
                self.nbits += 64;
                self.next += 8;
            } else if let Some(&b) = self.bytes.get(self.next) {
                self.acc |= u128::from(b) << self.nbits;
                self.nbits += 8;
                self.next += 1;
            } else {
                return Err(self.corrupt("truncated bit stream"));
            }
        }
        let v = if bits == 64 {
            self.acc as u64
        } else {
            (self.acc as u64) & ((1u64 << bits) - 1)
        };
        self.acc >>= bits;
        self.nbits -= bits;
        Ok(v)
    }

    /// Succeeds if only the zero padding of the last byte is left.
    pub fn finish(&self) -> Result<(), CodecError> {
        if self.next != self.bytes.len() || self.nbits >= 8 || self.acc != 0 {
            return Err(self.corrupt("trailing data after bit stream"));
        }
        Ok(())
    }
}

/// Appends the Gorilla payload of `bits` (f64 bit patterns, or f32 patterns if `f32_mode`).
pub fn encode(values: &[f64], f32_mode: bool, out: &mut Vec<u8>) {
    out.push(u8::from(f32_mode));
    let word = |v: f64| -> u64 {
        if f32_mode {
            u64::from((v as f32).to_bits()) << 32
        } else {
            v.to_bits()
        }
    };
    let mut w = BitWriter::new(out);
    let mut it = values.iter().map(|&v| word(v));
    let Some(first) = it.next() else {
        w.finish();
        return;
    };
    if f32_mode {
        w.write(first >> 32, 32);
    } else {
        w.write(first, 64);
    }
    let mut prev = first;
    // (leading, trailing) zeros of the current window; None until the first full header.
    let mut window: Option<(u32, u32)> = None;
    for cur in it {
        let x = cur ^ prev;
        prev = cur;
        if x == 0 {
            w.write(0, 1);
            continue;
        }
        let lz = x.leading_zeros();
        let tz = x.trailing_zeros();
        match window {
            Some((plz, ptz)) if lz >= plz && tz >= ptz => {
                w.write(0b01, 2);
                w.write(x >> ptz, 64 - plz - ptz);
            }
            _ => {
                let len = 64 - lz - tz;
                w.write(0b11, 2);
                w.write(u64::from(lz), 6);
                w.write(u64::from(len - 1), 6);
                w.write(x >> tz, len);
                window = Some((lz, tz));
            }
        }
    }
    w.finish();
}

/// Decodes `n` values from the rest of `r`.
pub fn decode(r: &mut Reader, n: usize, out: &mut Vec<f64>) -> Result<(), CodecError> {
    let mode = r.u8("gorilla mode")?;
    if mode > 1 {
        return Err(r.corrupt(format!("unknown gorilla mode {mode}")));
    }
    let f32_mode = mode == 1;
    let base = r.offset();
    let mut br = BitReader::new(r.rest(), base);
    out.reserve(n);
    let to_f64 = |w: u64| -> f64 {
        if f32_mode {
            f64::from(f32::from_bits((w >> 32) as u32))
        } else {
            f64::from_bits(w)
        }
    };
    if n > 0 {
        let mut prev = if f32_mode {
            br.read(32)? << 32
        } else {
            br.read(64)?
        };
        out.push(to_f64(prev));
        let mut window: Option<(u32, u32)> = None;
        for _ in 1..n {
            if br.read(1)? == 1 {
                let (lz, tz) = if br.read(1)? == 0 {
                    window.ok_or_else(|| br.corrupt("window reuse before any window"))?
                } else {
                    let lz = br.read(6)? as u32;
                    let len = br.read(6)? as u32 + 1;
                    if lz + len > 64 {
                        return Err(br.corrupt("xor window exceeds 64 bits"));
                    }
                    window = Some((lz, 64 - lz - len));
                    (lz, 64 - lz - len)
                };
                let x = br.read(64 - lz - tz)? << tz;
                prev ^= x;
            }
            out.push(to_f64(prev));
        }
    }
    br.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::Rng;

    fn rt(v: &[f64], f32_mode: bool) -> usize {
        let mut b = Vec::new();
        encode(v, f32_mode, &mut b);
        let mut out = Vec::new();
        decode(&mut Reader::new(&b, 0), v.len(), &mut out).unwrap();
        let a: Vec<u64> = v.iter().map(|x| x.to_bits()).collect();
        let o: Vec<u64> = out.iter().map(|x| x.to_bits()).collect();
        assert_eq!(a, o);
        for cut in 0..b.len() {
            assert!(decode(&mut Reader::new(&b[..cut], 0), v.len(), &mut Vec::new()).is_err());
        }
        b.len()
    }

    #[test]
    fn edges() {
        rt(&[], false);
        rt(&[f64::NAN], false);
        rt(
            &[
                0.0,
                -0.0,
                f64::from_bits(0x7ff0_0000_0000_0001),
                f64::INFINITY,
                f64::MIN_POSITIVE,
                f64::MAX,
                1.0,
                1.0,
                f64::from_bits(1),
            ],
            false,
        );
        rt(&[1.5, -0.0, 3.25, f64::INFINITY], true);
        assert!(rt(&[42.0; 1000], false) < 140);
    }

    #[test]
    fn random() {
        let mut rng = Rng::new(5);
        for _ in 0..30 {
            let n = rng.below(600) as usize;
            let v: Vec<f64> = (0..n).map(|_| f64::from_bits(rng.next_u64())).collect();
            rt(&v, false);
            let mut x = 50.0f64;
            let w: Vec<f64> = (0..n)
                .map(|_| {
                    x += rng.below(1000) as f64 / 1000.0 - 0.5;
                    x as f32 as f64
                })
                .collect();
            rt(&w, true);
            rt(&w, false);
        }
    }
}
