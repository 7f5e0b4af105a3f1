//! Table names as hash-map keys that hold a short name in the key itself: a map of
//! 100,000s of subtables probed by name per row reads its bucket and nothing else for a name
//! of up to [`INLINE_BYTES`] bytes (TSBS's `truck_123`, every `t_<32 hex digits>` name a
//! schemaless write makes), where a `String` key also reads the name's bytes elsewhere in
//! memory: a second cache miss per lookup. A key hashes and compares as the name's bytes,
//! so a map of them is probed with a `&[u8]` ([`Borrow`]).

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};

/// Longest name held inline: with its length byte and the variant's, a key is 48 bytes (with
/// a 16-byte value, a 64-byte map entry).
pub const INLINE_BYTES: usize = 46;

/// A subtable name as a key of the index: inline up to [`INLINE_BYTES`], else on the heap.
#[derive(Clone)]
pub enum NameKey {
    Inline { len: u8, bytes: [u8; INLINE_BYTES] },
    Heap(Box<[u8]>),
}

impl NameKey {
    pub fn new(name: &str) -> NameKey {
        let b = name.as_bytes();
        match u8::try_from(b.len()) {
            Ok(len) if b.len() <= INLINE_BYTES => {
                let mut bytes = [0u8; INLINE_BYTES];
                if let Some(dst) = bytes.get_mut(..b.len()) {
                    dst.copy_from_slice(b);
                }
                NameKey::Inline { len, bytes }
            }
            _ => NameKey::Heap(b.into()),
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        match self {
            NameKey::Inline { len, bytes } => bytes.get(..usize::from(*len)).unwrap_or(&[]),
            NameKey::Heap(b) => b,
        }
    }
}

impl PartialEq for NameKey {
    fn eq(&self, other: &NameKey) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for NameKey {}

/// Hashes as the name's bytes do, so that a `&[u8]` finds its key ([`Borrow`]).
impl Hash for NameKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl Borrow<[u8]> for NameKey {
    fn borrow(&self) -> &[u8] {
        self.as_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn names_short_and_long_are_found_by_their_bytes_only() {
        let mut m: HashMap<NameKey, u32, foldhash::fast::RandomState> = HashMap::default();
        let long = "x".repeat(INLINE_BYTES + 1);
        let edge = "y".repeat(INLINE_BYTES);
        let names = ["", "a", "t_0123456789abcdef0123456789abcdef", &edge, &long];
        for (i, n) in names.iter().enumerate() {
            m.insert(NameKey::new(n), i as u32);
        }
        assert!(matches!(NameKey::new(&edge), NameKey::Inline { .. }));
        assert!(matches!(NameKey::new(&long), NameKey::Heap(_)));
        for (i, n) in names.iter().enumerate() {
            assert_eq!(m.get(n.as_bytes()), Some(&(i as u32)), "{n:?}");
            assert_eq!(NameKey::new(n).as_bytes(), n.as_bytes());
        }
        // A prefix, an extension and a name differing in its last byte are other names.
        for other in ["t_0123456789abcdef0123456789abcde", "ab", &edge[1..], "x"] {
            assert_eq!(m.get(other.as_bytes()), None, "{other:?}");
        }
        let near_long = format!("{}z", &long[..INLINE_BYTES]);
        assert_eq!(m.get(near_long.as_bytes()), None);
        assert_eq!(std::mem::size_of::<NameKey>(), 48);
        assert_eq!(std::mem::size_of::<(NameKey, [u64; 2])>(), 64);
    }
}
