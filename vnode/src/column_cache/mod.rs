//! The decoded-column cache: column chunks of data-file and STT blocks as queries decoded
//! them, so that a dashboard asking about the same hours again (another fleet, a shifted
//! window) reads them from memory instead of reading, checking and decompressing them once
//! more.
//!
//! Owns: decoded chunks, by (data or STT file, block offset, column index, part: the whole
//! chunk, one segment, or the chunk opened for segment reads), in one LRU per
//! process (every vnode of a data node shares it), bounded in bytes ([`configure`], the data
//! node's `column_cache_max_bytes`; 0 turns it off). Invariants:
//! - an entry is exactly what decoding the committed chunk gives: an STT file is written whole
//!   before it is opened, a data file is append-only, and a committed block never changes
//!   (bytes past the committed length, which a later append may overwrite, are never read by
//!   a query, so never cached);
//! - the file is named by a token drawn once per opened file ([`file_token`]), never by
//!   its path: a file that is reopened (a restart, a database dropped and created again under
//!   the same name) gets a new token, so no entry outlives the bytes it was decoded from;
//! - only query reads of blocks of at least [`BLOCK_ROWS_MIN`] rows use it (a compaction's
//!   reads of whole windows would evict what queries use, and short blocks are cheap to
//!   decode), and of STT blocks shared by several subtables whatever their rows (each
//!   subtable's read of one would otherwise decode all of it); entries of replaced files are
//!   never looked up again and age out.

use lru::LruCache;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use tidal_codec::EncodedColumn;
use tidal_common::{Column, ColumnData};

/// Default bound of the cache per process.
pub const DEFAULT_MAX_BYTES: u64 = 32 * 1024 * 1024;

/// A chunk larger than this share of the bound is not kept: one huge block must not flush
/// everything else.
const ENTRY_SHARE_MAX: u64 = 16;

/// Blocks of fewer rows are read around the cache. Decoding a few rows costs about what
/// keeping them does, and such blocks come by the hundred thousand (a million subtables with
/// a few rows each per window): a fleet-wide read would churn the whole cache for nothing
/// (measured: the cache-off last-loc at 1,000,000 trucks took 2.2 s through the cache, 1.2 s
/// around it). Long blocks of dense series are where decoding is the cost.
pub const BLOCK_ROWS_MIN: u32 = 512;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    pub file: u64,
    pub block_offset: u64,
    pub column: u32,
    /// Which part of the column: the whole chunk, one of its segments, or (under column 0)
    /// the block's segment index; the block reader (`crate::block`) numbers them.
    pub part: u32,
}

/// Counters of the process-wide cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ColumnCacheStats {
    pub entries: u64,
    pub bytes: u64,
    pub max_bytes: u64,
    pub hits: u64,
    pub misses: u64,
}

pub struct ColumnCache {
    inner: Mutex<Inner>,
    /// `Inner::max_bytes`, readable without the lock (a read checks it before every block).
    max_bytes: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
}

struct Inner {
    lru: LruCache<Key, Entry, foldhash::fast::RandomState>,
    bytes: u64,
    max_bytes: u64,
}

static TOKENS: AtomicU64 = AtomicU64::new(1);
static CACHE: OnceLock<ColumnCache> = OnceLock::new();

/// A token for a file just opened, unique in this process.
pub fn file_token() -> u64 {
    TOKENS.fetch_add(1, Ordering::Relaxed)
}

/// The process's cache (created with [`DEFAULT_MAX_BYTES`] on first use).
pub fn global() -> &'static ColumnCache {
    CACHE.get_or_init(|| ColumnCache::new(DEFAULT_MAX_BYTES))
}

/// Sets the bound of the process's cache (evicting down to it); 0 turns it off.
pub fn configure(max_bytes: u64) {
    global().set_max_bytes(max_bytes);
}

/// What the cache keeps under a key.
#[derive(Clone)]
enum Entry {
    /// A decoded chunk or segment (or a block's segment index).
    Column(Arc<Column>),
    /// A chunk opened for segment reads: its stage-1 payload, decompressed, and its
    /// directory; decoding a segment from it needs no read, checksum or decompression.
    Encoded(Arc<EncodedColumn<'static>>),
}

impl Entry {
    fn bytes(&self) -> u64 {
        match self {
            Entry::Column(c) => column_bytes(c),
            Entry::Encoded(e) => e.heap_bytes() as u64 + 96,
        }
    }
}

/// Estimated heap bytes of a decoded column.
pub fn column_bytes(c: &Column) -> u64 {
    let values = match &c.data {
        ColumnData::Bool(v) => v.len() as u64,
        ColumnData::Str(v) => v.iter().map(|s| 24 + s.len() as u64).sum(),
        ColumnData::Int(v) | ColumnData::Timestamp(v) => 8 * v.len() as u64,
        ColumnData::UInt(v) => 8 * v.len() as u64,
        ColumnData::Float(v) => 8 * v.len() as u64,
    };
    // the NULL mask, and the entry's own keeping
    values + c.nulls.len() as u64 + 96
}

impl ColumnCache {
    pub fn new(max_bytes: u64) -> ColumnCache {
        ColumnCache {
            inner: Mutex::new(Inner {
                lru: LruCache::unbounded_with_hasher(foldhash::fast::RandomState::default()),
                bytes: 0,
                max_bytes,
            }),
            max_bytes: AtomicU64::new(max_bytes),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    pub fn set_max_bytes(&self, max_bytes: u64) {
        let mut g = self.inner.lock();
        g.max_bytes = max_bytes;
        self.max_bytes.store(max_bytes, Ordering::Relaxed);
        g.evict();
    }

    pub fn enabled(&self) -> bool {
        self.max_bytes.load(Ordering::Relaxed) > 0
    }

    pub fn get(&self, key: &Key) -> Option<Arc<Column>> {
        self.lookup(key, |e| match e {
            Entry::Column(c) => Some(c.clone()),
            Entry::Encoded(_) => None,
        })
    }

    /// What `pick` takes of the entry under `key`, counted as a hit or a miss.
    fn lookup<T>(&self, key: &Key, pick: impl FnOnce(&Entry) -> Option<T>) -> Option<T> {
        let found = self.inner.lock().lru.get(key).and_then(pick);
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Whether `key` is cached, without counting a hit or a miss or refreshing it.
    pub fn contains(&self, key: &Key) -> bool {
        self.inner.lock().lru.contains(key)
    }

    pub fn insert(&self, key: Key, col: Arc<Column>) {
        self.put(key, Entry::Column(col));
    }

    /// An opened chunk (see [`Entry::Encoded`]), counted as a hit or a miss.
    pub fn get_encoded(&self, key: &Key) -> Option<Arc<EncodedColumn<'static>>> {
        self.lookup(key, |e| match e {
            Entry::Encoded(e) => Some(e.clone()),
            Entry::Column(_) => None,
        })
    }

    pub fn insert_encoded(&self, key: Key, enc: Arc<EncodedColumn<'static>>) {
        self.put(key, Entry::Encoded(enc));
    }

    fn put(&self, key: Key, entry: Entry) {
        let b = entry.bytes();
        let mut g = self.inner.lock();
        if b > g.max_bytes / ENTRY_SHARE_MAX {
            return;
        }
        if let Some(old) = g.lru.put(key, entry) {
            g.bytes = g.bytes.saturating_sub(old.bytes());
        }
        g.bytes += b;
        g.evict();
    }

    pub fn stats(&self) -> ColumnCacheStats {
        let g = self.inner.lock();
        ColumnCacheStats {
            entries: g.lru.len() as u64,
            bytes: g.bytes,
            max_bytes: g.max_bytes,
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
        }
    }
}

impl Inner {
    fn evict(&mut self) {
        while self.bytes > self.max_bytes {
            match self.lru.pop_lru() {
                Some((_, old)) => self.bytes = self.bytes.saturating_sub(old.bytes()),
                None => {
                    self.bytes = 0;
                    break;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(n: usize) -> Arc<Column> {
        Arc::new(Column::new(ColumnData::Int((0..n as i64).collect())))
    }

    fn key(i: u64) -> Key {
        Key {
            file: 1,
            block_offset: i,
            column: 0,
            part: 0,
        }
    }

    #[test]
    fn bounded_in_bytes_least_recently_used_first() {
        let one = column_bytes(&col(100));
        let c = ColumnCache::new(20 * one);
        for i in 0..20 {
            c.insert(key(i), col(100));
        }
        assert!(c.get(&key(0)).is_some()); // 0 is now the most recent
        c.insert(key(20), col(100));
        assert!(
            c.get(&key(1)).is_none(),
            "the least recently used goes first"
        );
        assert!(c.get(&key(0)).is_some() && c.get(&key(20)).is_some());
        let s = c.stats();
        assert_eq!((s.entries, s.bytes), (20, 20 * one));
        assert_eq!((s.hits, s.misses), (3, 1));
        c.set_max_bytes(16 * one);
        assert_eq!(c.stats().entries, 16);
        assert!(c.get(&key(0)).is_some() && c.get(&key(2)).is_none());
        c.set_max_bytes(0);
        assert!(!c.enabled());
        assert_eq!(c.stats().bytes, 0);
        c.insert(key(5), col(1));
        assert_eq!(c.stats().bytes, 0, "a cache of 0 bytes keeps nothing");
    }

    #[test]
    fn a_chunk_too_large_for_its_share_is_not_kept() {
        let c = ColumnCache::new(ENTRY_SHARE_MAX * column_bytes(&col(100)));
        c.insert(key(0), col(1000));
        assert!(c.get(&key(0)).is_none());
        c.insert(key(0), col(100));
        assert!(c.get(&key(0)).is_some());
    }

    #[test]
    fn tokens_are_unique() {
        let a = file_token();
        let b = file_token();
        assert_ne!(a, b);
    }
}
