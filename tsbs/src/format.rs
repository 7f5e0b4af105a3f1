//! Writers of generated points: one submodule per target format. Text writers take any
//! `std::io::Write` (wrap it in a compressor or a `BufWriter` as needed); the Tidal adapter
//! builds the client library's columnar `TableWrite`s.

pub mod influx;
pub mod sql;
pub mod tdengine;
pub mod tidal;

use std::io::Write;

/// Appends `v` as Go's `strconv.FormatFloat(v, 'f', -1, 64)` does: the shortest digits that
/// read back to `v`, never an exponent (`25`, `36.3`, `0.0001`). Rust's `Display` for f64 has
/// exactly this contract; it is the fallback. The generator's values are all k / 10^5 for an
/// integer k (whole numbers, 1 or 5 decimals), and for those the shortest form is k's digits
/// with the point inserted and trailing zeros dropped (any shorter decimal is at least 10^-5
/// away, far more than an ulp below 10^9), which we print without the formatting machinery.
#[inline]
pub(crate) fn push_f64(buf: &mut Vec<u8>, v: f64) {
    const SCALE: f64 = 1e5;
    if v.abs() < 1e9 && !(v == 0.0 && v.is_sign_negative()) {
        let k = (v * SCALE).round();
        if k / SCALE == v {
            let k = k as i64;
            if k < 0 {
                buf.push(b'-');
            }
            let k = k.unsigned_abs();
            push_u64(buf, k / 100_000);
            let mut frac = k % 100_000;
            if frac != 0 {
                let mut digits = 5;
                while frac % 10 == 0 {
                    frac /= 10;
                    digits -= 1;
                }
                buf.push(b'.');
                let mut tmp = [b'0'; 5];
                for d in tmp[..digits].iter_mut().rev() {
                    *d = b'0' + (frac % 10) as u8;
                    frac /= 10;
                }
                buf.extend_from_slice(&tmp[..digits]);
            }
            return;
        }
    }
    let _ = write!(buf, "{v}");
}

#[inline]
pub(crate) fn push_i64(buf: &mut Vec<u8>, v: i64) {
    if v < 0 {
        buf.push(b'-');
    }
    push_u64(buf, v.unsigned_abs());
}

#[inline]
fn push_u64(buf: &mut Vec<u8>, mut v: u64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    buf.extend_from_slice(&tmp[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    fn fast(v: f64) -> String {
        let mut b = Vec::new();
        push_f64(&mut b, v);
        String::from_utf8(b).unwrap()
    }

    #[test]
    fn fast_float_format_matches_display() {
        let mut r = Rng::new(3);
        let mut cases = vec![
            0.0,
            -0.0,
            1.0,
            -1.0,
            25.0,
            0.1,
            0.9,
            36.3,
            52.31854,
            4.72037,
            -89.99999,
            1e-5,
            -1e-5,
            0.00001,
            1e-7,
            123456.78901,
            999_999_999.999_99,
            1e9,
            1e21,
            0.3,
            2.5e-10,
            f64::MAX,
            f64::MIN_POSITIVE,
            4999.0,
            5000.0,
        ];
        for _ in 0..200_000 {
            let k = (r.below(4_000_000_000) as i64 - 2_000_000_000) as f64;
            cases.push(k / 1e5);
            cases.push((r.float64() * 180.0 * 1e5) as i64 as f64 / 1e5);
            cases.push((r.float64() * 50.0 * 10.0) as i64 as f64 / 10.0);
            cases.push(r.float64() * 1000.0);
        }
        for v in cases {
            assert_eq!(fast(v), format!("{v}"), "{v:?}");
        }
        let mut b = Vec::new();
        for v in [0, -7, i64::MIN, i64::MAX, 1_451_606_400_000_000_000] {
            b.clear();
            push_i64(&mut b, v);
            assert_eq!(String::from_utf8(b.clone()).unwrap(), v.to_string());
        }
    }
}
