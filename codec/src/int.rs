//! Integer sequence encodings, shared by BIGINT-family, unsigned (bit-cast to i64), TIMESTAMP
//! columns and the scaled integers of the decimal float codec.
//!
//! Owns: plain, FOR bit-packing of the values, delta (`delta-i`), delta-of-delta (`delta-d`, the
//! timestamp codec), zigzag-delta simple-8b, run-length of the values or of their deltas, plus the
//! `Auto` trial that keeps the smallest.
//!
//! Invariants: the value count is never stored here (the column header has it); all arithmetic
//! wraps, so i64::MIN/MAX and u64 bit patterns round-trip; a decoder produces exactly `n` values
//! or an error.

use crate::buf::{put_varint, unzigzag, varint_len, zigzag, Reader};
use crate::{bitpack, simple8b, CodecError};

/// Stage-1 ids of the integer encodings (stored in the column header and, for decimal floats, in
/// the float payload). Never renumber: files on disk carry them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum IntId {
    Plain = 0,
    BitPacking = 1,
    DeltaI = 2,
    DeltaD = 3,
    Simple8b = 4,
    /// Run-length: only chosen by `Auto` (no TDengine name); wins on lazily changing values.
    Rle = 5,
    /// Delta, then run-length of the deltas: only chosen by `Auto`; wins on regular clocks with
    /// occasional gaps (runs of equal deltas).
    DeltaRle = 6,
}

impl IntId {
    pub fn from_u8(b: u8) -> Option<IntId> {
        Some(match b {
            0 => IntId::Plain,
            1 => IntId::BitPacking,
            2 => IntId::DeltaI,
            3 => IntId::DeltaD,
            4 => IntId::Simple8b,
            5 => IntId::Rle,
            6 => IntId::DeltaRle,
            _ => return None,
        })
    }
}

/// What `Auto` tries, in order of preference on ties (cheapest decode first).
pub const AUTO_CANDIDATES: [IntId; 6] = [
    IntId::BitPacking,
    IntId::DeltaI,
    IntId::DeltaD,
    IntId::Simple8b,
    IntId::Rle,
    IntId::DeltaRle,
];

/// `Auto` without the run-length encodings: their output is already dense, so under stage 2 a
/// bit-packed alternative can end up smaller; the encoder compares both after stage 2.
pub const AUTO_NO_RLE: [IntId; 4] = [
    IntId::BitPacking,
    IntId::DeltaI,
    IntId::DeltaD,
    IntId::Simple8b,
];

impl IntId {
    pub fn is_rle(self) -> bool {
        matches!(self, IntId::Rle | IntId::DeltaRle)
    }
}

/// Encodings tried for the run values inside RLE (a nested RLE would never be smaller).
const RLE_VALUE_CANDIDATES: [IntId; 2] = [IntId::BitPacking, IntId::DeltaI];

fn deltas(values: &[i64]) -> impl Iterator<Item = i64> + '_ {
    values.windows(2).map(|w| w[1].wrapping_sub(w[0]))
}

/// Appends `values` in encoding `id`; returns the id actually used (simple-8b falls back to
/// delta-i when a delta needs more than 60 bits).
pub fn encode(values: &[i64], id: IntId, out: &mut Vec<u8>) -> IntId {
    let d: Vec<i64> = if uses_deltas(id) {
        deltas(values).collect()
    } else {
        Vec::new()
    };
    encode_with_deltas(values, &d, id, &[], out)
}

/// Whether encoding `id` is built on the values' deltas.
fn uses_deltas(id: IntId) -> bool {
    matches!(
        id,
        IntId::DeltaI | IntId::DeltaD | IntId::Simple8b | IntId::DeltaRle
    )
}

/// [`encode`] given `d`, the deltas of `values` (read only by the encodings that
/// [`uses_deltas`]): `Auto` tries several of them on one block, and computing the deltas
/// once for all (rather than into a new vector per try) is a visible part of a flush of many
/// small blocks. `frames` are the FOR frames of the sequence `id` bit-packs (the values, the
/// deltas or theirs) where the caller has them from sizing it, else empty.
fn encode_with_deltas(
    values: &[i64],
    d: &[i64],
    id: IntId,
    frames: &[bitpack::Frame],
    out: &mut Vec<u8>,
) -> IntId {
    match id {
        IntId::Plain => {
            out.reserve(values.len() * 8);
            for v in values {
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        IntId::BitPacking => bitpack::encode_framed(values, frames, out),
        IntId::DeltaI => {
            if let Some(&first) = values.first() {
                put_varint(out, zigzag(first));
                bitpack::encode_framed(d, frames, out);
            }
        }
        IntId::DeltaD => {
            if let Some(&first) = values.first() {
                put_varint(out, zigzag(first));
                if let Some(&d0) = d.first() {
                    put_varint(out, zigzag(d0));
                    let dd: Vec<i64> = deltas(d).collect();
                    bitpack::encode_framed(&dd, frames, out);
                }
            }
        }
        IntId::Simple8b => {
            if let Some(&first) = values.first() {
                let mark = out.len();
                put_varint(out, zigzag(first));
                let z: Vec<u64> = d.iter().map(|&x| zigzag(x)).collect();
                if !simple8b::encode(&z, out) {
                    out.truncate(mark);
                    return encode_with_deltas(values, d, IntId::DeltaI, &[], out);
                }
            }
        }
        // Nothing at all for no values, like every other encoding (the decoder reads nothing).
        IntId::Rle | IntId::DeltaRle if values.is_empty() => {}
        IntId::DeltaRle => {
            if let Some(&first) = values.first() {
                put_varint(out, zigzag(first));
                encode(d, IntId::Rle, out);
            }
        }
        IntId::Rle => {
            let mut vals: Vec<i64> = Vec::new();
            let mut lens: Vec<i64> = Vec::new();
            for &v in values {
                match (vals.last(), lens.last_mut()) {
                    (Some(&last), Some(len)) if last == v => *len += 1,
                    _ => {
                        vals.push(v);
                        lens.push(0); // stored as length - 1
                    }
                }
            }
            put_varint(out, vals.len() as u64);
            let mark = out.len();
            out.push(0);
            let vid = encode_best(&vals, &RLE_VALUE_CANDIDATES, out);
            if let Some(b) = out.get_mut(mark) {
                *b = vid as u8;
            }
            bitpack::encode(&lens, out);
        }
    }
    id
}

/// True if RLE could beat the others: there are long runs.
fn worth_rle(values: &[i64]) -> bool {
    let runs = 1 + values.windows(2).filter(|w| w[0] != w[1]).count();
    runs * 4 <= values.len()
}

/// The number of bytes [`encode`] appends for `values` in encoding `id` (found by encoding
/// them only for the run-length ones).
pub fn encoded_len(values: &[i64], id: IntId) -> usize {
    let d: Vec<i64> = if uses_deltas(id) {
        deltas(values).collect()
    } else {
        Vec::new()
    };
    match sized(
        values,
        &d,
        id,
        &mut Derived::default(),
        &mut bitpack::Frames::new(),
    ) {
        Some((_, len)) => len,
        None => {
            let mut out = Vec::new();
            encode_with_deltas(values, &d, id, &[], &mut out);
            out.len()
        }
    }
}

/// Sequences derived from a block's values while sizing candidates, each computed once.
#[derive(Default)]
struct Derived {
    /// The deltas of the deltas (delta-of-delta).
    dd: Option<Vec<i64>>,
    /// The deltas zigzagged (simple-8b).
    z: Option<Vec<u64>>,
}

/// The id [`encode_with_deltas`] would use for `id` and the number of bytes it would append,
/// found without writing them (the FOR frames it found into `frames`, emptied first);
/// `None` for the run-length encodings, which are measured by encoding.
fn sized(
    values: &[i64],
    d: &[i64],
    id: IntId,
    derived: &mut Derived,
    frames: &mut bitpack::Frames,
) -> Option<(IntId, usize)> {
    frames.clear();
    let first = || values.first().map_or(0, |&v| varint_len(zigzag(v)));
    let len = match id {
        IntId::Plain => values.len() * 8,
        IntId::BitPacking => bitpack::encoded_len(values, frames),
        _ if values.is_empty() => 0,
        IntId::DeltaI => first() + bitpack::encoded_len(d, frames),
        IntId::DeltaD => {
            first()
                + d.first().map_or(0, |&d0| {
                    let dd = derived.dd.get_or_insert_with(|| deltas(d).collect());
                    varint_len(zigzag(d0)) + bitpack::encoded_len(dd, frames)
                })
        }
        IntId::Simple8b => {
            let z = derived
                .z
                .get_or_insert_with(|| d.iter().map(|&x| zigzag(x)).collect());
            match simple8b::encoded_len(z) {
                Some(words) => first() + words,
                None => return sized(values, d, IntId::DeltaI, derived, frames),
            }
        }
        IntId::Rle | IntId::DeltaRle => return None,
    };
    Some((id, len))
}

/// The leader of an [`encode_best`] trial.
struct Leader {
    /// The id the candidate used and its length.
    used: IntId,
    len: usize,
    /// Whether the trial's `kept` buffer holds its bytes (run-length: measured by encoding).
    encoded: bool,
}

/// Sizes every candidate and writes the smallest (the first of equal sizes); returns the id
/// used. Only the winner is encoded, with the FOR frames found while sizing it (run-length
/// candidates, whose size is not known without encoding them, are encoded into a scratch
/// buffer and kept there while they lead), and the deltas are computed once: a flush
/// encodes a block per subtable and column, and packing every candidate's bits to compare
/// lengths was most of its encoding time.
pub fn encode_best(values: &[i64], candidates: &[IntId], out: &mut Vec<u8>) -> IntId {
    let d: Vec<i64> = if candidates.iter().any(|&c| uses_deltas(c)) {
        deltas(values).collect()
    } else {
        Vec::new()
    };
    let mut derived = Derived::default();
    let mut best: Option<Leader> = None;
    let (mut trial, mut kept) = (Vec::new(), Vec::new());
    let (mut frames, mut best_frames) = (bitpack::Frames::new(), bitpack::Frames::new());
    for &c in candidates {
        if candidates.len() > 1 {
            if c == IntId::Rle && !worth_rle(values) {
                continue;
            }
            if c == IntId::DeltaRle && !worth_rle(&d) {
                continue;
            }
        }
        let (used, len, encoded) = match sized(values, &d, c, &mut derived, &mut frames) {
            Some((used, len)) => (used, len, false),
            None => {
                trial.clear();
                let used = encode_with_deltas(values, &d, c, &[], &mut trial);
                (used, trial.len(), true)
            }
        };
        if best.as_ref().is_none_or(|b| len < b.len) {
            best = Some(Leader { used, len, encoded });
            if encoded {
                std::mem::swap(&mut trial, &mut kept);
            } else {
                std::mem::swap(&mut frames, &mut best_frames);
            }
        }
    }
    match best {
        Some(Leader {
            used,
            encoded: true,
            ..
        }) => {
            out.extend_from_slice(&kept);
            used
        }
        // Simple-8b that fell back to delta-i sized delta-i: encoded as such, with its frames.
        Some(Leader { used, .. }) => encode_with_deltas(values, &d, used, &best_frames, out),
        None => encode_with_deltas(values, &d, IntId::Plain, &[], out),
    }
}

/// Decodes `n` values of encoding `id`, appending them to `out`.
pub fn decode(r: &mut Reader, id: IntId, n: usize, out: &mut Vec<i64>) -> Result<(), CodecError> {
    out.reserve(n);
    if n == 0 {
        return Ok(());
    }
    match id {
        IntId::Plain => {
            let bytes = r.take(n.saturating_mul(8), "plain integers")?;
            out.extend(
                bytes
                    .chunks_exact(8)
                    .filter_map(|c| c.first_chunk::<8>())
                    .map(|c| i64::from_le_bytes(*c)),
            );
        }
        IntId::BitPacking => bitpack::decode(r, n, out)?,
        IntId::DeltaI => {
            let first = r.zigzag_varint("first value")?;
            let start = out.len();
            out.push(first);
            bitpack::decode(r, n - 1, out)?;
            prefix_sum(out.get_mut(start..).unwrap_or(&mut []));
        }
        IntId::DeltaD => {
            let first = r.zigzag_varint("first value")?;
            let start = out.len();
            out.push(first);
            if n >= 2 {
                let d0 = r.zigzag_varint("first delta")?;
                out.push(d0);
                bitpack::decode(r, n - 2, out)?;
                let s = out.get_mut(start + 1..).unwrap_or(&mut []);
                prefix_sum(s);
                let s = out.get_mut(start..).unwrap_or(&mut []);
                prefix_sum(s);
            }
        }
        IntId::Simple8b => {
            let first = r.zigzag_varint("first value")?;
            let mut z = Vec::with_capacity(n - 1);
            simple8b::decode(r, n - 1, &mut z)?;
            let mut acc = first;
            out.push(acc);
            for d in z {
                acc = acc.wrapping_add(unzigzag(d));
                out.push(acc);
            }
        }
        IntId::DeltaRle => {
            let first = r.zigzag_varint("first value")?;
            let start = out.len();
            out.push(first);
            if n >= 2 {
                decode(r, IntId::Rle, n - 1, out)?;
            }
            prefix_sum(out.get_mut(start..).unwrap_or(&mut []));
        }
        IntId::Rle => {
            let runs = r.varint_max(n as u64, "run count")? as usize;
            let vid = r.u8("run value encoding")?;
            let vid = match IntId::from_u8(vid) {
                Some(id) if id != IntId::Rle && id != IntId::DeltaRle => id,
                _ => return Err(r.corrupt(format!("invalid run value encoding {vid}"))),
            };
            let mut vals = Vec::with_capacity(runs);
            decode(r, vid, runs, &mut vals)?;
            let at = r.offset();
            let mut lens = Vec::with_capacity(runs);
            bitpack::decode(r, runs, &mut lens)?;
            let mut left = n;
            for (v, len) in vals.into_iter().zip(lens) {
                let len = u64::try_from(len)
                    .ok()
                    .and_then(|l| l.checked_add(1))
                    .filter(|&l| l <= left as u64)
                    .ok_or_else(|| CodecError::Corrupt {
                        offset: at,
                        reason: format!("run length {len} + 1 exceeds the {left} values left"),
                    })? as usize;
                out.extend(std::iter::repeat_n(v, len));
                left -= len;
            }
            if left != 0 {
                return Err(CodecError::Corrupt {
                    offset: at,
                    reason: format!("runs cover {} of {n} values", n - left),
                });
            }
        }
    }
    Ok(())
}

/// In-place running sum: turns [x0, d1, d2, ...] into [x0, x0+d1, x0+d1+d2, ...].
fn prefix_sum(s: &mut [i64]) {
    let mut acc: i64 = 0;
    for v in s.iter_mut() {
        acc = acc.wrapping_add(*v);
        *v = acc;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::Rng;

    const ALL: [IntId; 7] = [
        IntId::Plain,
        IntId::BitPacking,
        IntId::DeltaI,
        IntId::DeltaD,
        IntId::Simple8b,
        IntId::Rle,
        IntId::DeltaRle,
    ];

    fn rt(values: &[i64]) {
        for id in ALL {
            let mut b = Vec::new();
            let used = encode(values, id, &mut b);
            let mut r = Reader::new(&b, 0);
            let mut out = Vec::new();
            decode(&mut r, used, values.len(), &mut out).unwrap();
            r.finish("t").unwrap();
            assert_eq!(out, values, "{id:?}");
            for cut in 0..b.len() {
                let mut r = Reader::new(&b[..cut], 0);
                assert!(decode(&mut r, used, values.len(), &mut Vec::new()).is_err());
            }
        }
    }

    #[test]
    fn edges() {
        rt(&[]);
        rt(&[i64::MIN]);
        rt(&[i64::MIN, i64::MAX, i64::MIN, 0, i64::MAX]);
        rt(&[1, 2]);
        rt(&(0..5000)
            .map(|i| 1_600_000_000_000 + i * 10_000)
            .collect::<Vec<_>>());
    }

    #[test]
    fn random() {
        let mut rng = Rng::new(11);
        for _ in 0..50 {
            let n = rng.below(700) as usize;
            let shift = rng.below(64);
            let v: Vec<i64> = (0..n).map(|_| (rng.next_u64() >> shift) as i64).collect();
            rt(&v);
            let mut acc = 0i64;
            let w: Vec<i64> = (0..n)
                .map(|_| {
                    acc = acc.wrapping_add(rng.below(21) as i64 - 10);
                    acc
                })
                .collect();
            rt(&w);
        }
    }

    /// What [`encode_best`] wrote before it shared the deltas and one scratch buffer: each
    /// candidate into a buffer of its own, the smallest (first of equals) kept.
    fn encode_best_by_trial(values: &[i64], candidates: &[IntId], out: &mut Vec<u8>) -> IntId {
        let mut best: Option<(IntId, Vec<u8>)> = None;
        for &c in candidates {
            if candidates.len() > 1 {
                if c == IntId::Rle && !worth_rle(values) {
                    continue;
                }
                if c == IntId::DeltaRle && !worth_rle(&deltas(values).collect::<Vec<_>>()) {
                    continue;
                }
            }
            let mut buf = Vec::new();
            let used = encode(values, c, &mut buf);
            if best.as_ref().is_none_or(|(_, b)| buf.len() < b.len()) {
                best = Some((used, buf));
            }
        }
        match best {
            Some((id, buf)) => {
                out.extend_from_slice(&buf);
                id
            }
            None => encode(values, IntId::Plain, out),
        }
    }

    #[test]
    fn encode_best_writes_what_each_trial_alone_would() {
        let mut rng = Rng::new(29);
        let sets: [&[IntId]; 6] = [
            &AUTO_CANDIDATES,
            &AUTO_NO_RLE,
            &RLE_VALUE_CANDIDATES,
            &[IntId::Simple8b],
            &[IntId::DeltaRle, IntId::Rle],
            &[],
        ];
        for round in 0..400 {
            let n = rng.below(300) as usize;
            let v: Vec<i64> = match round % 4 {
                // A clock with gaps, runs, random walks and wide random values.
                0 => {
                    let mut t = 1_600_000_000_000i64;
                    (0..n)
                        .map(|_| {
                            t += if rng.below(10) == 0 { 20_000 } else { 10_000 };
                            t
                        })
                        .collect()
                }
                1 => (0..n)
                    .map(|i| (i / (1 + rng.below(9) as usize)) as i64)
                    .collect(),
                2 => {
                    let mut acc = 0i64;
                    (0..n)
                        .map(|_| {
                            acc = acc.wrapping_add(rng.below(21) as i64 - 10);
                            acc
                        })
                        .collect()
                }
                _ => (0..n)
                    .map(|_| (rng.next_u64() >> rng.below(64)) as i64)
                    .collect(),
            };
            for id in AUTO_CANDIDATES.into_iter().chain([IntId::Plain]) {
                let mut one = Vec::new();
                encode(&v, id, &mut one);
                assert_eq!(encoded_len(&v, id), one.len(), "round {round}, {id:?}");
            }
            for set in sets {
                let (mut a, mut b) = (vec![7u8], vec![7u8]);
                let ia = encode_best(&v, set, &mut a);
                let ib = encode_best_by_trial(&v, set, &mut b);
                assert_eq!((ia, &a), (ib, &b), "round {round}, {set:?}, {v:?}");
            }
        }
    }

    #[test]
    fn simple8b_falls_back() {
        let mut b = Vec::new();
        assert_eq!(
            encode(&[0, i64::MAX], IntId::Simple8b, &mut b),
            IntId::DeltaI
        );
    }
}
