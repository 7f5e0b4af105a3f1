//! Routing: which vgroup owns a table. `vgroup = range_of(hash32(db + "." + table))`; the
//! 2^32 hash space is split into equal contiguous ranges, one per vgroup, at CREATE DATABASE.

use serde::{Deserialize, Serialize};

/// An inclusive range of the 32-bit hash space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HashRange {
    pub begin: u32,
    pub end: u32,
}

impl HashRange {
    pub fn contains(&self, h: u32) -> bool {
        self.begin <= h && h <= self.end
    }
}

/// MurmurHash3 (x86, 32-bit) of `db.table`, seed 0x12345678. Table names are case-sensitive
/// as stored; the SQL layer lower-cases unquoted identifiers before they get here.
pub fn hash_table_name(db: &str, table: &str) -> u32 {
    // Every written row of a batch is routed by this hash: short keys (all real names) are
    // assembled on the stack instead of in a heap allocation.
    const STACK_KEY_BYTES: usize = 256;
    let n = db.len() + 1 + table.len();
    if n <= STACK_KEY_BYTES {
        let mut key = [0u8; STACK_KEY_BYTES];
        key[..db.len()].copy_from_slice(db.as_bytes());
        key[db.len()] = b'.';
        key[db.len() + 1..n].copy_from_slice(table.as_bytes());
        return murmur3_32(&key[..n], 0x1234_5678);
    }
    let mut key = Vec::with_capacity(n);
    key.extend_from_slice(db.as_bytes());
    key.push(b'.');
    key.extend_from_slice(table.as_bytes());
    murmur3_32(&key, 0x1234_5678)
}

fn murmur3_32(data: &[u8], seed: u32) -> u32 {
    const C1: u32 = 0xcc9e_2d51;
    const C2: u32 = 0x1b87_3593;
    let mut h = seed;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
        h ^= k;
        h = h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64);
    }
    let tail = chunks.remainder();
    let mut k = 0u32;
    for (i, b) in tail.iter().enumerate() {
        k |= (*b as u32) << (8 * i);
    }
    if !tail.is_empty() {
        k = k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
        h ^= k;
    }
    h ^= data.len() as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^= h >> 16;
    h
}

/// Splits the hash space into `n` equal contiguous inclusive ranges (the last takes the rest).
pub fn split_hash_space(n: u32) -> Vec<HashRange> {
    let n = n.max(1) as u64;
    let step = (1u64 << 32) / n;
    (0..n)
        .map(|i| {
            let begin = i * step;
            let end = if i + 1 == n {
                u32::MAX as u64
            } else {
                (i + 1) * step - 1
            };
            HashRange {
                begin: begin as u32,
                end: end as u32,
            }
        })
        .collect()
}

/// The index (0-based, in range order) of the vgroup owning `hash` among `n` equal ranges.
pub fn vgroup_index(hash: u32, n: u32) -> usize {
    let n = n.max(1) as u64;
    let step = (1u64 << 32) / n;
    ((hash as u64 / step).min(n - 1)) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur_known_vectors() {
        assert_eq!(murmur3_32(b"", 0), 0);
        assert_eq!(murmur3_32(b"hello", 0), 0x248b_fa47);
        assert_eq!(
            murmur3_32(b"The quick brown fox jumps over the lazy dog", 0x9747_b28c),
            0x2fa8_26cd
        );
    }

    #[test]
    fn long_and_short_names_hash_the_same_way() {
        let long = "t".repeat(300);
        let mut key = b"db.".to_vec();
        key.extend_from_slice(long.as_bytes());
        assert_eq!(hash_table_name("db", &long), murmur3_32(&key, 0x1234_5678));
        assert_eq!(
            hash_table_name("db", "t_1"),
            murmur3_32(b"db.t_1", 0x1234_5678)
        );
    }

    #[test]
    fn ranges_cover_space_and_agree_with_index() {
        for n in [1u32, 2, 3, 4, 7, 64] {
            let r = split_hash_space(n);
            assert_eq!(r.len(), n as usize);
            assert_eq!(r[0].begin, 0);
            assert_eq!(r[r.len() - 1].end, u32::MAX);
            for w in r.windows(2) {
                assert_eq!(w[0].end as u64 + 1, w[1].begin as u64);
            }
            for h in [0u32, 1, 12345, u32::MAX / 2, u32::MAX - 1, u32::MAX] {
                assert!(r[vgroup_index(h, n)].contains(h), "n={n} h={h}");
            }
        }
    }
}
