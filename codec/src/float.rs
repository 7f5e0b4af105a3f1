//! FLOAT/DOUBLE encodings: decimal scaling (`delta-d` for floats), Gorilla XOR (`tsz`, in
//! [`crate::gorilla`]), byte-stream split, and plain.
//!
//! Decimal: sensor values are usually k-decimal numbers (TSBS truncates to 0-5 decimals), i.e.
//! the f64 nearest to m / 10^k. Such a block is stored as k plus the integers m, coded by the best
//! integer encoding (delta + FOR usually), which beats XOR codecs by 3-10x on random walks.
//! The encoder accepts a k only if *decoding* every m gives back the identical bit pattern, so
//! -0.0, NaN, infinities and non-decimal values make it fall back to Gorilla; exactness never
//! rests on reasoning about rounding.
//!
//! f32 mode: a FLOAT column holds f32 values widened to f64. When every value of a block is an
//! f32 (and not NaN, whose payload a cast need not keep), codecs work on the f32 instead: decimal
//! rounds its quotient to f32 (so 1.1f32 is m=11, k=1, not a 16-digit integer) and Gorilla codes
//! 32-bit words.
//!
//! Invariants: decoding is deterministic IEEE arithmetic (exact integer / exact power of ten,
//! then an optional cast), so a block decodes to the same bits on every platform.

use crate::buf::Reader;
use crate::int::{self, IntId};
use crate::{gorilla, CodecError};

/// Stage-1 ids owned by this module (the integer ids 0-4 are in [`crate::int`]; 0 = plain).
pub const ID_PLAIN: u8 = 0;
pub const ID_DECIMAL: u8 = 5;
pub const ID_GORILLA: u8 = 6;
pub const ID_BYTE_SPLIT: u8 = 7;

/// Largest decimal exponent tried. Beyond 15 digits scaled values leave the 2^53 exact range
/// for most magnitudes, and the scan cost grows with k for non-decimal data.
pub const DECIMAL_K_MAX: usize = 15;

/// Powers of ten that are exact in f64 (all up to 10^22 are).
const POW10: [f64; DECIMAL_K_MAX + 1] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
];

/// From 2^52 on, every f64 is an integer.
const TWO_POW_52: f64 = 4_503_599_627_370_496.0;

/// Integers up to 2^53 convert to f64 exactly.
const EXACT_INT_MAX: f64 = 9_007_199_254_740_992.0;

/// What the float codecs may do with a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloatEnc {
    Plain,
    /// Decimal if exact, else Gorilla.
    Decimal,
    Gorilla,
    ByteSplit,
}

/// True if every value is an f32 (widened) and none is NaN.
pub fn all_f32(values: &[f64]) -> bool {
    values
        .iter()
        .all(|&v| !v.is_nan() && f64::from(v as f32).to_bits() == v.to_bits())
}

#[inline]
fn decimal_value(m: i64, k: usize, f32_mode: bool) -> f64 {
    decimal_value_by(m, POW10.get(k).copied().unwrap_or(1.0), f32_mode)
}

/// The value a decoder gives `m` at 10^k = `p`: what the encoder's exactness check compares.
#[inline(always)]
fn decimal_value_by(m: i64, p: f64, f32_mode: bool) -> f64 {
    let x = m as f64 / p;
    if f32_mode {
        f64::from(x as f32)
    } else {
        x
    }
}

#[inline]
fn scaled(v: f64, k: usize, f32_mode: bool) -> Option<i64> {
    scaled_by(v, *POW10.get(k)?, f32_mode)
}

/// [`scaled`] with 10^k given: the loop over a block's values at a settled k takes it once.
#[inline(always)]
fn scaled_by(v: f64, p: f64, f32_mode: bool) -> Option<i64> {
    let s = v * p;
    // NaN fails this comparison too.
    if s.abs().partial_cmp(&EXACT_INT_MAX) != Some(std::cmp::Ordering::Less) {
        return None;
    }
    // Rounded half away from zero by adding a half and truncating: `f64::round` is a call
    // into software rounding on the baseline x86-64 target (no SSE4.1), a tenth of encoding
    // a block of decimals. The two differ only where `s` is within an ulp of a half, and
    // there no `m` passes the exactness check below (an exact k-decimal scales to within an
    // ulp of its integer), so the outcome is the same.
    let m = if s.abs() < TWO_POW_52 {
        (s + 0.5f64.copysign(s)) as i64
    } else {
        // Already an integer (and a half would round the sum to even).
        s as i64
    };
    (decimal_value_by(m, p, f32_mode).to_bits() == v.to_bits()).then_some(m)
}

/// The scaled integers and k if every value is an exact k-decimal, else None.
pub fn to_decimal(values: &[f64], f32_mode: bool) -> Option<(usize, Vec<i64>)> {
    // One pass: the values are scaled at the k so far until one needs a larger k; then k
    // becomes the smallest at which that one scales and the values before it are scaled
    // again (k settles within the first few values of a block). This is the k the two
    // passes of `to_decimal_by_passes` find; should a value before scale at a smaller k and
    // not at the new one (only near the 2^53 bound), the two passes decide.
    let mut k = 0;
    let mut ms = Vec::with_capacity(values.len());
    loop {
        let p = POW10.get(k).copied()?;
        let done = ms.len();
        let rest = values.get(done..).unwrap_or(&[]);
        ms.extend(rest.iter().map_while(|&u| scaled_by(u, p, f32_mode)));
        let i = ms.len();
        let Some(&v) = values.get(i) else {
            return Some((k, ms));
        };
        loop {
            k += 1;
            if k > DECIMAL_K_MAX {
                return None;
            }
            if scaled(v, k, f32_mode).is_some() {
                break;
            }
        }
        ms.clear();
        for &u in values.get(..i).unwrap_or(&[]) {
            match scaled(u, k, f32_mode) {
                Some(m) => ms.push(m),
                None => return to_decimal_by_passes(values, f32_mode),
            }
        }
    }
}

/// [`to_decimal`] in two passes: the smallest k at which each value in turn scales, then
/// every value scaled at the last of those k.
fn to_decimal_by_passes(values: &[f64], f32_mode: bool) -> Option<(usize, Vec<i64>)> {
    let mut k = 0;
    for &v in values {
        while scaled(v, k, f32_mode).is_none() {
            k += 1;
            if k > DECIMAL_K_MAX {
                return None;
            }
        }
    }
    let ms: Option<Vec<i64>> = values.iter().map(|&v| scaled(v, k, f32_mode)).collect();
    ms.map(|m| (k, m))
}

/// Appends the payload for `values` and returns the stage-1 id used and, for decimal, the
/// integer encoding of the scaled values (chosen among `int_candidates`).
pub fn encode(
    values: &[f64],
    enc: FloatEnc,
    int_candidates: &[IntId],
    out: &mut Vec<u8>,
) -> (u8, Option<IntId>) {
    let f32_mode = all_f32(values);
    let id = match enc {
        FloatEnc::Plain => {
            out.reserve(values.len() * 8);
            for v in values {
                out.extend_from_slice(&v.to_bits().to_le_bytes());
            }
            ID_PLAIN
        }
        FloatEnc::Decimal => match to_decimal(values, f32_mode) {
            Some((k, ms)) => {
                out.push(u8::from(f32_mode));
                out.push(k as u8);
                let mark = out.len();
                out.push(0);
                let id = int::encode_best(&ms, int_candidates, out);
                if let Some(b) = out.get_mut(mark) {
                    *b = id as u8;
                }
                return (ID_DECIMAL, Some(id));
            }
            None => {
                gorilla::encode(values, f32_mode, out);
                ID_GORILLA
            }
        },
        FloatEnc::Gorilla => {
            gorilla::encode(values, f32_mode, out);
            ID_GORILLA
        }
        FloatEnc::ByteSplit => {
            // Byte planes, most significant first: sign/exponent bytes of a smooth series are
            // nearly constant and compress to almost nothing in stage 2.
            let width = if f32_mode { 4 } else { 8 };
            out.push(width as u8);
            out.reserve(values.len() * width);
            for plane in (0..width).rev() {
                for &v in values {
                    let bits = if f32_mode {
                        u64::from((v as f32).to_bits())
                    } else {
                        v.to_bits()
                    };
                    out.push((bits >> (plane * 8)) as u8);
                }
            }
            ID_BYTE_SPLIT
        }
    };
    (id, None)
}

/// Decodes `n` values of stage-1 id `id`.
pub fn decode(r: &mut Reader, id: u8, n: usize, out: &mut Vec<f64>) -> Result<(), CodecError> {
    out.reserve(n);
    match id {
        ID_PLAIN => {
            let bytes = r.take(n.saturating_mul(8), "plain floats")?;
            out.extend(
                bytes
                    .chunks_exact(8)
                    .filter_map(|c| c.first_chunk::<8>())
                    .map(|c| f64::from_bits(u64::from_le_bytes(*c))),
            );
        }
        ID_DECIMAL => {
            let flags = r.u8("decimal flags")?;
            if flags > 1 {
                return Err(r.corrupt(format!("unknown decimal flags {flags:#x}")));
            }
            let k = usize::from(r.u8("decimal exponent")?);
            if k > DECIMAL_K_MAX {
                return Err(r.corrupt(format!("decimal exponent {k} > {DECIMAL_K_MAX}")));
            }
            let iid = r.u8("decimal integer encoding")?;
            let iid = IntId::from_u8(iid)
                .ok_or_else(|| r.corrupt(format!("unknown integer encoding {iid}")))?;
            let mut ms = Vec::with_capacity(n);
            int::decode(r, iid, n, &mut ms)?;
            let f32_mode = flags == 1;
            out.extend(ms.into_iter().map(|m| decimal_value(m, k, f32_mode)));
        }
        ID_GORILLA => gorilla::decode(r, n, out)?,
        ID_BYTE_SPLIT => {
            let width = usize::from(r.u8("byte-split width")?);
            if width != 4 && width != 8 {
                return Err(r.corrupt(format!("byte-split width {width} is not 4 or 8")));
            }
            let bytes = r.take(n.saturating_mul(width), "byte planes")?;
            let mut bits = vec![0u64; n];
            for (p, plane) in bytes.chunks_exact(n.max(1)).enumerate() {
                let shift = (width - 1 - p) * 8;
                for (b, &x) in bits.iter_mut().zip(plane) {
                    *b |= u64::from(x) << shift;
                }
            }
            if width == 4 {
                out.extend(
                    bits.into_iter()
                        .map(|b| f64::from(f32::from_bits(b as u32))),
                );
            } else {
                out.extend(bits.into_iter().map(f64::from_bits));
            }
        }
        other => return Err(r.corrupt(format!("unknown float encoding {other}"))),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::Rng;

    /// `scaled` as it was, with `f64::round`.
    fn scaled_by_round(v: f64, k: usize, f32_mode: bool) -> Option<i64> {
        let s = v * POW10.get(k).copied()?;
        if s.abs().partial_cmp(&EXACT_INT_MAX) != Some(std::cmp::Ordering::Less) {
            return None;
        }
        let m = s.round() as i64;
        (decimal_value(m, k, f32_mode).to_bits() == v.to_bits()).then_some(m)
    }

    #[test]
    fn one_pass_decimal_scaling_agrees_with_two_passes() {
        let mut rng = Rng::new(8);
        for round in 0..3000 {
            let n = rng.below(40) as usize;
            let v: Vec<f64> = (0..n)
                .map(|_| {
                    let k = rng.below(8) as i32;
                    let m = (rng.next_u64() >> (11 + rng.below(53))) as f64;
                    match rng.below(20) {
                        0 => f64::from_bits(rng.next_u64()),
                        1 => -0.0,
                        2 => m * 1e9,
                        _ => m / 10f64.powi(k),
                    }
                })
                .collect();
            for f32_mode in [false, true] {
                let v: Vec<f64> = if f32_mode {
                    v.iter().map(|&x| f64::from(x as f32)).collect()
                } else {
                    v.clone()
                };
                assert_eq!(
                    to_decimal(&v, f32_mode),
                    to_decimal_by_passes(&v, f32_mode),
                    "round {round} {v:?}"
                );
            }
        }
    }

    #[test]
    fn scaled_agrees_with_rounding_by_round() {
        let mut rng = Rng::new(5);
        let mut values: Vec<f64> = vec![
            0.0,
            -0.0,
            0.5,
            -0.5,
            1.5,
            2.5,
            -2.5,
            0.49999999999999994,
            -0.49999999999999994,
            4_503_599_627_370_495.5,
            4_503_599_627_370_496.0,
            4_503_599_627_370_497.0,
            -4_503_599_627_370_497.0,
            9_007_199_254_740_991.0,
            f64::NAN,
            f64::INFINITY,
            f64::MIN_POSITIVE,
            1e-300,
        ];
        for _ in 0..20_000 {
            let k = rng.below(7) as i32;
            let m = rng.next_u64() >> rng.below(64);
            let sign = if rng.below(2) == 0 { 1.0 } else { -1.0 };
            let x = sign * m as f64 / 10f64.powi(k);
            values.push(x);
            values.push(f64::from_bits(x.to_bits() + 1));
            values.push(sign * (m as f64 + 0.5));
            values.push(f64::from_bits(rng.next_u64()));
        }
        for v in values {
            for k in 0..=DECIMAL_K_MAX {
                for f32_mode in [false, true] {
                    assert_eq!(
                        scaled(v, k, f32_mode),
                        scaled_by_round(v, k, f32_mode),
                        "{v:e} k={k} f32={f32_mode}"
                    );
                }
            }
        }
    }

    fn rt(v: &[f64]) {
        for enc in [
            FloatEnc::Plain,
            FloatEnc::Decimal,
            FloatEnc::Gorilla,
            FloatEnc::ByteSplit,
        ] {
            let mut b = Vec::new();
            let (id, _) = encode(v, enc, &int::AUTO_CANDIDATES, &mut b);
            let mut out = Vec::new();
            let mut r = Reader::new(&b, 0);
            decode(&mut r, id, v.len(), &mut out).unwrap();
            r.finish("t").unwrap();
            let a: Vec<u64> = v.iter().map(|x| x.to_bits()).collect();
            let o: Vec<u64> = out.iter().map(|x| x.to_bits()).collect();
            assert_eq!(a, o, "{enc:?}");
            for cut in 0..b.len() {
                let mut r = Reader::new(&b[..cut], 0);
                let res = decode(&mut r, id, v.len(), &mut Vec::new());
                assert!(res.is_err() || !r.is_empty(), "{enc:?} cut {cut}");
            }
        }
    }

    #[test]
    fn decimal_detection() {
        let v = [1.5, 2.25, -3.125, 0.0];
        assert_eq!(to_decimal(&v, false).unwrap().0, 3);
        assert!(to_decimal(&[-0.0], false).is_none());
        assert!(to_decimal(&[f64::NAN], false).is_none());
        assert!(to_decimal(&[0.1 + 0.2], false).is_none());
        assert_eq!(
            to_decimal(&[f64::from(1.1f32)], true).unwrap(),
            (1, vec![11])
        );
        assert_eq!(to_decimal(&[12.34567], false).unwrap(), (5, vec![1234567]));
    }

    #[test]
    fn edges() {
        rt(&[]);
        rt(&[0.0]);
        rt(&[
            -0.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MIN,
            f64::MAX,
        ]);
        rt(&[f64::from_bits(0xfff8_dead_beef_0001), 1.0]);
        rt(&[f64::from(1.1f32), f64::from(-2.5f32), f64::from(f32::MAX)]);
        rt(&[
            9_007_199_254_740_992.0,
            -9_007_199_254_740_992.0,
            1e300,
            5e-324,
        ]);
    }

    #[test]
    fn random_walks() {
        let mut rng = Rng::new(9);
        for decimals in 0..=6 {
            let n = 1 + rng.below(900) as usize;
            let p = 10f64.powi(decimals);
            let mut x = 45.0f64;
            let v: Vec<f64> = (0..n)
                .map(|_| {
                    x += rng.below(1000) as f64 / 100_000.0 - 0.005;
                    (x * p).trunc() / p
                })
                .collect();
            rt(&v);
            let mut b = Vec::new();
            let (id, _) = encode(&v, FloatEnc::Decimal, &int::AUTO_CANDIDATES, &mut b);
            assert_eq!(id, ID_DECIMAL);
        }
        let v: Vec<f64> = (0..300).map(|_| f64::from_bits(rng.next_u64())).collect();
        rt(&v);
    }
}
