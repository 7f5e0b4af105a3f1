//! Schemaless writes, as TDengine does them for InfluxDB line protocol: the measurement is a
//! STABLE (created on first use), the tag set names a subtable (created on first use), new
//! fields and tags extend the STABLE (ALTER STABLE ADD COLUMN/TAG), and rows go through the
//! client library's routed, retried write path.
//!
//! Mapping (fixed so that every frontend derives the same schema from the same lines):
//! - STABLE = the measurement, lower-cased; first column `ts TIMESTAMP`.
//! - float → DOUBLE, integer → BIGINT, unsigned → BIGINT UNSIGNED, boolean → BOOL,
//!   string → VARCHAR(STRING_COLUMN_BYTES). Tags are VARCHAR(TAG_BYTES). A STABLE without
//!   any tag gets the tag `_tag_null` (a STABLE needs one tag), as TDengine does.
//! - Subtable name: the value of the tag named by `child_table_tag` when set and present
//!   (TDengine's `smlChildTableName`); otherwise `t_` + 32 hex digits of a 128-bit FNV-1a hash
//!   of the measurement and the tag set sorted by key. The hash is length-prefixed so that
//!   different tag sets never serialize to the same bytes.
//!
//! Invariants:
//! - One bad line never fails the body: syntax errors, type conflicts with the STABLE,
//!   oversized values and unconvertible timestamps become [`LineError`]s naming the line,
//!   and every other line is written.
//! - Schema changes only append (columns and tags), so a STABLE version is always a prefix of
//!   the next; a concurrent writer adding the same column is resolved by re-reading the schema.
//! - The schema sent with a write is the newest this frontend knows, so each vnode learns new
//!   columns from the write itself (`WriteBatch.schemas`).
//! - Two ways to the same result: a body whose STABLEs already hold all its keys (nearly
//!   every body of a running feed) is converted in one pass into a block per STABLE and
//!   vgroup (`prepare_known_schemas`); any other body is parsed whole, the schemas are
//!   reconciled, then converted (`prepare_reconciling`). The first gives up, having done
//!   nothing, wherever the second would change a schema.
//! - A block lists each subtable once; its rows are in line order, so a subtable whose lines
//!   are interleaved with others' has several runs (the vnode groups a block's runs by
//!   subtable as it appends them to its memtable: grouping them here too copied every row
//!   once more).

use super::write_merge::WriteMerger;
use super::{ExecError, ExecResult};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tidal_client::{Client, RouteTable};
pub(crate) use tidal_common::near::NearCursor;
use tidal_common::route::{hash_table_name, vgroup_index};
use tidal_common::{
    Column, ColumnData, ColumnDef, DataType, RowBlock, SchemaVersion, StableSchema, StatusCode,
    Value,
};
use tidal_lineproto::{Ask, FieldValue, Line, Number, Precision, Shape};

/// Width of VARCHAR columns created for string fields. Values are stored at their own length;
/// the width only bounds them. Roomy because the width cannot be changed later (no MODIFY).
pub const STRING_COLUMN_BYTES: u32 = 16 * 1024;
/// Width of VARCHAR tags created for line protocol tags.
pub const TAG_BYTES: u32 = 1024;
/// Name of the timestamp column of a STABLE created by a schemaless write.
pub const TS_COLUMN: &str = "ts";
/// Tag given to a STABLE whose lines carry no tags.
pub const NULL_TAG: &str = "_tag_null";
/// How many times schema reconciliation re-reads a schema changed under it.
const SCHEMA_ATTEMPTS_MAX: u32 = 4;
/// Most per-line errors kept in an outcome; the count of the rest is still reported.
pub const LINE_ERRORS_MAX: usize = 1000;

/// One rejected line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    pub line: usize,
    pub message: String,
}

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// The result of a schemaless write of one body.
#[derive(Debug, Default)]
pub struct SchemalessOutcome {
    /// Rows acknowledged by the data nodes.
    pub rows: u64,
    /// Rejected lines in line order (at most [`LINE_ERRORS_MAX`]).
    pub errors: Vec<LineError>,
    /// Rejected lines in total (may exceed `errors.len()`).
    pub rejected: usize,
    /// Field values of the accepted lines (TSBS's "metrics").
    pub fields: u64,
}

impl SchemalessOutcome {
    fn reject(&mut self, line: usize, message: impl Into<String>) {
        self.rejected += 1;
        if self.errors.len() < LINE_ERRORS_MAX {
            self.errors.push(LineError {
                line,
                message: message.into(),
            });
        }
    }
}

/// A body converted to row blocks, one per STABLE (see [`Schemaless::prepare`]).
pub struct Prepared {
    /// Rejected lines (`rows` is 0: nothing is written yet).
    pub outcome: SchemalessOutcome,
    /// The schema of every STABLE the blocks use, as the writes must carry them.
    pub schemas: Vec<StableSchema>,
    pub blocks: Vec<RowBlock>,
    /// The routing map the blocks were built with and the index of each block's vgroup in
    /// it, when each block holds the subtables of one vgroup (the fast path builds them so):
    /// the write then need not hash every subtable name again to find out.
    pub vgroups: Option<(Arc<RouteTable>, Vec<usize>)>,
}

/// Options of a schemaless write.
#[derive(Debug, Clone)]
pub struct SchemalessOptions {
    /// Precision of the timestamps in the body.
    pub precision: Precision,
    /// A tag whose value names the subtable (TDengine's `smlChildTableName`).
    pub child_table_tag: Option<String>,
}

impl Default for SchemalessOptions {
    fn default() -> Self {
        SchemalessOptions {
            precision: Precision::Nanos,
            child_table_tag: None,
        }
    }
}

/// The schemaless write path; cheap to clone (shares the client and the merging writer).
#[derive(Clone)]
pub struct Schemaless {
    client: Client,
    /// Concurrent bodies of one caller share write RPCs per vgroup (see `write_merge`).
    merger: WriteMerger,
    known: Arc<KnownSubtables>,
}

/// Most subtables [`KnownSubtables`] remembers; when full it starts over (16 bytes each).
pub const KNOWN_SUBTABLES_MAX: usize = 1 << 20;

/// Subtables this frontend has written (so they existed then), per user and database: a
/// later body leaves their tags out, sparing the conversion, the wire and the data node's
/// check of the tags (TDengine ignores the tags of a write to an existing subtable anyway).
/// A subtable dropped since makes the write fail with `TableNotFound`; the body is then
/// written again with every tag and the set starts over. Keyed by a 128-bit hash: a false
/// hit costs only that retry.
struct KnownSubtables {
    set: parking_lot::Mutex<HashSet<u128, foldhash::fast::RandomState>>,
    /// Changes whenever the set forgets (from one process-wide counter, so that no two sets
    /// ever share a value): a subtable found in the set stays there until it changes, which
    /// lets the per-thread series maps remember the answer ([`KnownScope`]).
    generation: AtomicU64,
}

/// Source of [`KnownSubtables::generation`].
static NEXT_KNOWN_GENERATION: AtomicU64 = AtomicU64::new(1);

impl Default for KnownSubtables {
    fn default() -> Self {
        KnownSubtables {
            set: parking_lot::Mutex::default(),
            generation: AtomicU64::new(NEXT_KNOWN_GENERATION.fetch_add(1, Ordering::Relaxed)),
        }
    }
}

impl KnownSubtables {
    /// Two 64-bit foldhashes with fixed, different seeds: the key lives only in this
    /// process's memory, so it need not be stable across builds (unlike a subtable name),
    /// only cheap and wide.
    fn key(user: &str, db: &str, table: &str) -> u128 {
        use std::hash::BuildHasher;
        let parts = (user, db, table);
        let a = foldhash::fast::FixedState::with_seed(0x7469_6461_6c5f_6b6e).hash_one(parts);
        let b = foldhash::fast::FixedState::with_seed(0x6f77_6e5f_7375_6274).hash_one(parts);
        (u128::from(a) << 64) | u128::from(b)
    }

    fn contains(&self, user: &str, db: &str, table: &str) -> bool {
        self.set.lock().contains(&Self::key(user, db, table))
    }

    fn insert_all(&self, keys: &[u128]) {
        let mut set = self.set.lock();
        if set.len() + keys.len() > KNOWN_SUBTABLES_MAX {
            set.clear();
            self.forgot();
        }
        set.extend(keys.iter().copied());
    }

    fn clear(&self) {
        let mut set = self.set.lock();
        set.clear();
        self.forgot();
    }

    /// A new generation, taken with the set's lock held.
    fn forgot(&self) {
        let g = NEXT_KNOWN_GENERATION.fetch_add(1, Ordering::Relaxed);
        self.generation.store(g, Ordering::Release);
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }
}

/// The subtables [`Schemaless::prepare`] may write without tags.
pub struct Known<'a> {
    /// Whether the subtable of this name exists.
    pub contains: &'a (dyn Fn(&str) -> bool + Sync),
    /// What `contains` answers from, when a `true` answer holds until the scope changes:
    /// the per-thread series maps then remember it. `None`: ask every time.
    pub scope: Option<KnownScope<'a>>,
}

/// A generation of a [`KnownSubtables`] set and the user whose subtables it answers for
/// (the database is the write's).
#[derive(Clone, Copy)]
pub struct KnownScope<'a> {
    generation: u64,
    user: &'a str,
}

impl<'a> KnownScope<'a> {
    /// The scope of another set of known subtables (a `Writer`'s, say) for `user`:
    /// `generation` must come from [`KnownScope::new_generation`], and a new one be taken
    /// whenever that set forgets a subtable.
    pub fn new(generation: u64, user: &'a str) -> KnownScope<'a> {
        KnownScope { generation, user }
    }

    /// A generation no other set of this process has or will have.
    pub fn new_generation() -> u64 {
        NEXT_KNOWN_GENERATION.fetch_add(1, Ordering::Relaxed)
    }
}

/// Most bytes the [`SeriesKeys`] maps of a process hold together (about 150 bytes per series,
/// [`SeriesKeys::ENTRY_BYTES`]: the keys are held as hashes, not as written): each thread's
/// map gets an equal share of it (at least [`SERIES_KEYS_THREAD_BYTES_MIN`]) and starts over
/// when that is full. (The [`SeriesJournal`] they share holds at most 12 MiB more.)
pub const SERIES_KEYS_BYTES_MAX: usize = 128 << 20;
/// The least a thread's [`SeriesKeys`] map may hold, however many threads share the total.
pub const SERIES_KEYS_THREAD_BYTES_MIN: usize = 8 << 20;

/// The 128-bit identity of a series key as written (measurement and tags, escapes
/// included): XXH3-128 with a seed drawn once per process, so that keys from outside cannot
/// be aimed at one value. The write path's maps hold this instead of the key's bytes: a
/// lookup is one hash of the bytes, which are in cache as the line is parsed, and no
/// comparison of a ~100-byte key stored elsewhere in memory (the cache miss that made the
/// series maps a quarter of the line protocol's CPU with thousands of devices). Two series
/// with one identity would share a subtable; at 2^-128 per pair that is not a practical
/// concern (the subtable names themselves are 128-bit hashes).
fn series_hash(series: &[u8]) -> u128 {
    static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let seed = *SEED.get_or_init(rand::random);
    twox_hash::XxHash3_128::oneshot_with_seed(seed, series)
}

/// A [`std::hash::Hasher`] for keys that are already uniform hashes ([`series_hash`]): the
/// map's hash is the key's two halves folded, no further mixing.
#[derive(Default, Clone, Copy)]
struct Prehashed(u64);

impl std::hash::Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only reached for keys other than u128; a plain fold keeps it correct.
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }

    fn write_u128(&mut self, v: u128) {
        self.0 = (v as u64) ^ ((v >> 64) as u64);
    }
}

type PrehashedState = std::hash::BuildHasherDefault<Prehashed>;

/// The subtables of series keys ([`series_hash`] of the key as written; [`subtable_key`],
/// without `child_table_tag`), across bodies. A feed repeats its series in every body, and
/// with thousands of devices a body of a few thousand lines sees most of its series once:
/// sorting and FNV-hashing each line's tags, spelling the name, hashing it for its vgroup and
/// asking the shared set of known subtables (a lock and two hashes) were most of the fast
/// path's cost after parsing. The subtable key and name are functions of the series key
/// alone (the measurement and the tags, escapes included), so they never go stale; the
/// vgroup hash holds for one database and a known answer for one [`KnownScope`] and
/// database, each checked against the map's current one by an epoch. A series known to
/// exist lets the parser skip its tags altogether ([`SeriesKeys::thread_series`]). One map
/// per thread needs no lock (a shared one cost a contended atomic per line).
struct SeriesKeys {
    /// Series key ([`series_hash`]) -> index of its entry in `entries`.
    index: HashMap<u128, u32, PrehashedState>,
    /// The entries in the order their series were first seen. A feed writes its series in
    /// much the same order every interval, so a line's series is often among the entries
    /// around the one last looked up (`cursor`; about two lines in three of TSBS's locally
    /// shuffled file at 4,000 trucks): checked first, in memory order, they spare the probe
    /// of `index` (with 1,000s of series a probe of a map was a cache miss per line).
    entries: Vec<SeriesEntry>,
    /// The low 64 bits of each entry's series key, in `entries`' order: the window around
    /// the cursor is scanned here, 8 bytes an entry instead of a 64-byte entry each, so it
    /// can be 128 entries wide ([`NearCursor::AHEAD`], [`NearCursor::BEHIND`]: TSBS's
    /// held-back points move a series dozens of lines between intervals).
    series_lo: Vec<u64>,
    cursor: NearCursor,
    /// Subtable key -> the first entry with it: two spellings of one series (tags in
    /// another order, say) share a subtable, and their entries are marked
    /// ([`SeriesEntry::shared`]).
    subtables: HashMap<u128, u32, foldhash::fast::RandomState>,
    /// How many times the map started over (when full).
    clears: u64,
    /// The STABLE (lower-cased name) of entries, by [`SeriesEntry::stable`].
    stables: Vec<String>,
    bytes: usize,
    bytes_max: usize,
    /// The database whose name hashes entries hold when their epoch is `route_epoch`.
    route_db: String,
    route_epoch: u32,
    /// The scope and database whose known answers entries hold at `known_epoch`.
    known_scope: (u64, String, String),
    known_epoch: u32,
    /// The epochs as the last body asked for them: one body keeps its database and scope,
    /// so its lines need not compare their names again (string comparisons were a tenth of
    /// the conversion at 4,000 trucks).
    body_epochs: BodyEpochs,
    /// This map's id in the [`SeriesJournal`] (its own entries are not read back).
    id: u32,
    /// The sequence number of the next journal entry this map has not read.
    journal_next: u64,
    /// Series this map resolved itself since it last wrote to the journal: (series key,
    /// subtable key, index in `stables`).
    fresh: Vec<(u128, u128, u32)>,
}

/// Series keys with their subtables as the threads' [`SeriesKeys`] maps resolved them, for
/// the other threads' maps: a series is written by bodies that land on any thread, so with
/// 100,000s of series each thread met each one first (its tags parsed and sorted, its
/// subtable key hashed, the line converted the slow way: a quarter of the frontend's CPU at
/// 100,000 trucks). A map writes what it resolved and reads what others did once per body
/// (one lock per body, none per line); an entry is a function of the series key alone, so it
/// holds for every database and caller (whether the subtable exists is still asked per map).
/// Bounded: the oldest entries go first, and a map that fell behind only misses them.
struct SeriesJournal {
    /// Sequence number of `entries[0]`.
    first: u64,
    entries: std::collections::VecDeque<Journaled>,
    /// STABLE names, by [`Journaled::stable`].
    stables: Vec<String>,
}

#[derive(Clone, Copy)]
struct Journaled {
    series: u128,
    key: u128,
    /// Index in the journal's `stables`.
    stable: u32,
    /// The [`SeriesKeys::id`] of the map that wrote it.
    from: u32,
}

/// Most entries the [`SeriesJournal`] holds (48 bytes each).
const SERIES_JOURNAL_ENTRIES_MAX: usize = 1 << 18;
/// Most STABLE names the [`SeriesJournal`] holds; past it, it starts over.
const SERIES_JOURNAL_STABLES_MAX: usize = 1 << 12;

static SERIES_JOURNAL: std::sync::Mutex<SeriesJournal> =
    std::sync::Mutex::new(SeriesJournal::new());

/// Source of [`SeriesKeys::id`].
static NEXT_SERIES_KEYS_ID: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);

impl SeriesJournal {
    const fn new() -> SeriesJournal {
        SeriesJournal {
            first: 0,
            entries: std::collections::VecDeque::new(),
            stables: Vec::new(),
        }
    }

    /// Appends `(series, subtable key, STABLE)`s written by map `from`, dropping the oldest
    /// past [`SERIES_JOURNAL_ENTRIES_MAX`].
    fn write<'a>(&mut self, from: u32, fresh: impl IntoIterator<Item = (u128, u128, &'a str)>) {
        for (series, key, stable) in fresh {
            let stable = match self.stables.iter().position(|s| s == stable) {
                Some(i) => i,
                None => {
                    if self.stables.len() >= SERIES_JOURNAL_STABLES_MAX {
                        self.first += self.entries.len() as u64;
                        self.entries.clear();
                        self.stables.clear();
                    }
                    self.stables.push(stable.to_string());
                    self.stables.len() - 1
                }
            };
            if self.entries.len() >= SERIES_JOURNAL_ENTRIES_MAX {
                self.entries.pop_front();
                self.first += 1;
            }
            self.entries.push_back(Journaled {
                series,
                key,
                stable: stable as u32,
                from,
            });
        }
    }

    /// The entries from sequence number `next` on (or from the oldest held, if those are
    /// gone) that map `reader` did not write, with their STABLE names; and the sequence
    /// number to read from next time.
    fn read(&self, reader: u32, next: u64) -> (Vec<Journaled>, Vec<String>, u64) {
        let skip = (next.saturating_sub(self.first) as usize).min(self.entries.len());
        // A range, not a skip: a reader that is up to date starts at the end, found at once
        // rather than by stepping over every entry held.
        let new: Vec<Journaled> = self
            .entries
            .range(skip..)
            .filter(|e| e.from != reader)
            .copied()
            .collect();
        let stables = if new.is_empty() {
            Vec::new()
        } else {
            self.stables.clone()
        };
        (new, stables, self.first + self.entries.len() as u64)
    }
}

/// [`SeriesKeys::route_epoch`] and [`SeriesKeys::known_epoch`] for one body, its database
/// and its scope (the same strings: a body's are the same for all its lines).
#[derive(Default, Clone, Copy)]
struct BodyEpochs {
    /// 0: none held.
    body: u64,
    generation: u64,
    db: (usize, usize),
    user: (usize, usize),
    route_epoch: u32,
    known_epoch: u32,
}

impl BodyEpochs {
    fn asks(body: u64, db: &str, scope: KnownScope<'_>) -> BodyEpochs {
        BodyEpochs {
            body,
            generation: scope.generation,
            db: (db.as_ptr() as usize, db.len()),
            user: (scope.user.as_ptr() as usize, scope.user.len()),
            route_epoch: 0,
            known_epoch: 0,
        }
    }

    /// Whether these are the epochs `ask` asks for.
    fn answer(&self, ask: &BodyEpochs) -> bool {
        self.body != 0
            && (self.body, self.generation, self.db, self.user)
                == (ask.body, ask.generation, ask.db, ask.user)
    }
}

/// What [`SeriesKeys`] remembers of a series. The name is not kept: it is spelled from the
/// key on the stack when needed, which costs less than reading it from the heap (a cache
/// miss per line with 100,000s of series).
///
/// One cache line each (64 bytes, aligned): a line's lookup reads the entry and its
/// placement writes the body's slot in it, which with an 80-byte entry were often two lines
/// (with 100,000s of series, two misses).
#[repr(align(64))]
struct SeriesEntry {
    /// The subtable key ([`subtable_key`]).
    key: u128,
    /// The high half of the series key ([`series_hash`]); the low half is the entry's in
    /// the map's `series_lo`.
    series_hi: u64,
    /// (epoch, `hash_table_name(db, name)`), valid at the map's `route_epoch`.
    route: (u32, u32),
    /// The map's `known_epoch` at which the subtable was known to exist (0: never).
    known: u32,
    /// Index of its STABLE in the map's `stables`.
    stable: u32,
    /// Where the body being converted on this thread put the series' rows
    /// ([`SeriesEntry::body`]), held as its fields so that the entry packs into 64 bytes.
    body_id: u64,
    body_at: [u32; 3],
    /// Another entry has the same subtable (see [`SeriesKeys::subtables`]).
    shared: bool,
}

const _: () = assert!(std::mem::size_of::<SeriesEntry>() == 64);

/// Where one body put a series' rows: the body ([`next_body`]), the index of the STABLE
/// among the body's, the block and the subtable in it. A series repeats in a body as often
/// as the body spans its interval, so the next line finds its place from the thread's
/// series entry, which it looks up anyway (and which is then in cache), rather than from a
/// map of the body's own that every new series would have to be inserted into first.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
struct BodySlot {
    body: u64,
    stable: u32,
    block: u32,
    table: u32,
}

/// Source of body ids for [`BodySlot`] (0 is no body).
static NEXT_BODY: AtomicU64 = AtomicU64::new(1);

fn next_body() -> u64 {
    NEXT_BODY.fetch_add(1, Ordering::Relaxed)
}

/// What this thread's series map knows of a line's series ([`SeriesKeys::thread_series`]).
enum ThreadLook {
    /// The body being converted already put the series' rows here.
    InBody(BodySlot),
    /// The subtable exists, with the index of its STABLE among the body's, of the series'
    /// entry in the map (for [`SeriesKeys::note_body`]), and whether another series of the
    /// map has the same subtable.
    Known(Resolved, usize, usize, bool),
    /// The map holds the series (its entry's index), but neither answer applies: its
    /// subtable is not known to exist, or its STABLE is not yet among the body's.
    Held(usize),
    /// The map (with this [`SeriesKeys::id`]) does not hold the series.
    Absent(u32),
}

/// Where [`SeriesKeys::resolve`] finds a series' entry, as the line's lookup
/// ([`SeriesKeys::thread_series`]) left it. An index holds only until the map starts over,
/// so it is checked against the entry; "absent" holds only for the map that said it (an
/// `await` between lookup and resolve may move the body to another thread), and an entry
/// another body added there meanwhile is still found when the series is inserted.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum MapHint {
    /// Not looked up: search the map.
    Search,
    /// The entry was at this index.
    At(usize),
    /// The series was not in the map of the thread that looked (`SeriesKeys::id`).
    Absent(u32),
}

/// A line's subtable: its key, name, routing hash and whether it is known to exist.
struct Resolved {
    key: u128,
    name: SubtableName,
    route_hash: u32,
    known: bool,
}

thread_local! {
    static SERIES_KEYS: std::cell::RefCell<SeriesKeys> =
        std::cell::RefCell::new(SeriesKeys::new(SeriesKeys::thread_share()));
}

impl SeriesKeys {
    /// Bytes per entry: the entry (64), its key's low half in `series_lo` (8) and its slots
    /// in `index` and `subtables` (key, position, control byte and spare room).
    const ENTRY_BYTES: usize = 152;

    /// One thread's share of [`SERIES_KEYS_BYTES_MAX`]: the async runtime runs a worker per
    /// core, and a body is parsed on one of them.
    fn thread_share() -> usize {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        (SERIES_KEYS_BYTES_MAX / threads).max(SERIES_KEYS_THREAD_BYTES_MIN)
    }

    fn new(bytes_max: usize) -> SeriesKeys {
        SeriesKeys {
            index: HashMap::default(),
            entries: Vec::new(),
            series_lo: Vec::new(),
            cursor: NearCursor::default(),
            subtables: HashMap::default(),
            clears: 0,
            stables: Vec::new(),
            bytes: 0,
            bytes_max,
            route_db: String::new(),
            route_epoch: 0,
            known_scope: (0, String::new(), String::new()),
            known_epoch: 0,
            body_epochs: BodyEpochs::default(),
            id: NEXT_SERIES_KEYS_ID.fetch_add(1, Ordering::Relaxed),
            journal_next: 0,
            fresh: Vec::new(),
        }
    }

    /// Writes the series this map resolved since the last exchange to `journal` and
    /// remembers those the other maps wrote meanwhile (in their order, which is the feed's:
    /// the cursor finds them as it finds this map's own).
    fn exchange(&mut self, journal: &std::sync::Mutex<SeriesJournal>) {
        let fresh = std::mem::take(&mut self.fresh);
        let (new, names, next) = {
            // A panic while it was held left nothing half-written that matters: each entry
            // is whole, and a reader takes only whole entries.
            let mut j = journal.lock().unwrap_or_else(|e| e.into_inner());
            let stables = &self.stables;
            j.write(
                self.id,
                fresh.iter().filter_map(|&(series, key, st)| {
                    Some((series, key, stables.get(st as usize)?.as_str()))
                }),
            );
            j.read(self.id, self.journal_next)
        };
        self.journal_next = next;
        self.fresh = fresh;
        self.fresh.clear();
        let cursor = self.cursor;
        for e in new {
            // Only what fits: a map that started over for others' series would lose its own
            // (with many cores a thread's share is smaller than the journal).
            if self.bytes + 2 * Self::ENTRY_BYTES > self.bytes_max {
                break;
            }
            if let Some(stable) = names.get(e.stable as usize) {
                self.insert(e.series, e.key, stable);
            }
        }
        // What was read is not what the next line is near.
        self.cursor = cursor;
    }

    #[cfg(test)]
    fn get(&self, series: u128) -> Option<&SeriesEntry> {
        let i = *self.index.get(&series)?;
        self.entries.get(i as usize)
    }

    /// The index of series `series`' entry: one of the few after or before the last found
    /// if it is there, else from `index`. A feed's order varies a little between intervals
    /// (a device skips one, a late point comes a few lines on), so the guess is a window.
    fn find(&mut self, series: u128) -> Option<usize> {
        let (index, entries) = (&self.index, &self.entries);
        let lo = series as u64;
        // The whole key decides: an entry whose low half is the same is another series.
        let hi = (series >> 64) as u64;
        let is_series = |i: usize| entries.get(i).is_some_and(|e| e.series_hi == hi);
        let probe = || index.get(&series).map(|&i| i as usize);
        let at = self
            .cursor
            .find_hash(&self.series_lo, lo, is_series, probe)?;
        // The next line's series is most often the next entry: its 64 bytes are fetched
        // while this line is converted and the next one parsed.
        tidal_common::near::prefetch(&self.entries, at + 1);
        Some(at)
    }

    /// Whether the entry at `at` is series `series`' (an index handed out earlier: the map
    /// may have started over since).
    fn holds_at(&self, at: usize, series: u128) -> bool {
        self.entries
            .get(at)
            .is_some_and(|e| e.series_hi == (series >> 64) as u64)
            && self.series_lo.get(at) == Some(&(series as u64))
    }

    /// The entry at `at` if it is series `series`' ([`SeriesKeys::holds_at`]), else the
    /// series' entry wherever it is.
    fn entry_at(&mut self, at: usize, series: u128) -> Option<&mut SeriesEntry> {
        let i = if self.holds_at(at, series) {
            at
        } else {
            *self.index.get(&series)? as usize
        };
        self.entries.get_mut(i)
    }

    /// Remembers subtable key `key` of `series` in STABLE `stable` (an entry never changes
    /// once made). A full map starts over.
    fn insert(&mut self, series: u128, key: u128, stable: &str) -> usize {
        if let Some(&i) = self.index.get(&series) {
            return i as usize;
        }
        let known_stable = self.stables.iter().position(|s| s == stable);
        let cost = Self::ENTRY_BYTES + known_stable.map_or(stable.len() + Self::ENTRY_BYTES, |_| 0);
        let full = self.bytes + cost > self.bytes_max || self.entries.len() >= u32::MAX as usize;
        let known_stable = if full {
            self.index.clear();
            self.entries.clear();
            self.series_lo.clear();
            self.subtables.clear();
            self.clears += 1;
            self.stables.clear();
            self.fresh.clear();
            self.bytes = 0;
            self.cursor = NearCursor::default();
            None
        } else {
            known_stable
        };
        let stable = match known_stable {
            Some(i) => i,
            None => {
                self.bytes += stable.len() + Self::ENTRY_BYTES;
                self.stables.push(stable.to_string());
                self.stables.len() - 1
            }
        };
        let at = self.entries.len();
        let shared = match self.subtables.entry(key) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(at as u32);
                false
            }
            std::collections::hash_map::Entry::Occupied(o) => {
                if let Some(first) = self.entries.get_mut(*o.get() as usize) {
                    first.shared = true;
                }
                true
            }
        };
        self.series_lo.push(series as u64);
        self.entries.push(SeriesEntry {
            key,
            series_hi: (series >> 64) as u64,
            route: (0, 0),
            known: 0,
            stable: stable as u32,
            body_id: 0,
            body_at: [0; 3],
            shared,
        });
        self.index.insert(series, at as u32);
        self.bytes += Self::ENTRY_BYTES;
        self.cursor.at(at);
        at
    }

    /// [`SeriesKeys::insert`] of a series this map resolved itself, noted for the journal
    /// ([`SeriesKeys::exchange`]).
    fn remember(&mut self, series: u128, key: u128, stable: &str) -> usize {
        let at = self.insert(series, key, stable);
        if self.fresh.len() < SERIES_JOURNAL_ENTRIES_MAX {
            if let Some(e) = self.entries.get(at) {
                self.fresh.push((series, key, e.stable));
            }
        }
        at
    }

    /// The epoch of routing hashes for `db`: a new one when the database changes.
    fn route_epoch_for(&mut self, db: &str) -> u32 {
        if self.route_epoch == 0 || self.route_db != db {
            self.route_db = db.to_string();
            self.route_epoch = next_epoch(self.route_epoch);
            self.body_epochs.body = 0;
        }
        self.route_epoch
    }

    /// The epoch of known answers for `scope` and `db`: a new one when either changes.
    fn known_epoch_for(&mut self, scope: KnownScope<'_>, db: &str) -> u32 {
        let (g, u, d) = &self.known_scope;
        if self.known_epoch == 0 || *g != scope.generation || u != scope.user || d != db {
            self.known_scope = (scope.generation, scope.user.to_string(), db.to_string());
            self.known_epoch = next_epoch(self.known_epoch);
            self.body_epochs.body = 0;
        }
        self.known_epoch
    }

    /// The subtable of the series `series` of `line` (no `child_table_tag`) written to
    /// `db`, from this thread's map (where `hint` says, when that still holds) or computed
    /// from `line`'s tags and remembered.
    ///
    /// A series new to a map that never started over is taken to have no subtable yet (its
    /// tags are sent) without asking `known`: this frontend writes a subtable only for a
    /// series some thread's map resolved, and the journal hands every such series to the
    /// other maps, so a series new here is new to the frontend, but for one the journal has
    /// not brought (met by another thread since this map's last exchange, or dropped by the
    /// bounded journal before this map read it): its tags then go once more, which costs
    /// only their bytes. With 100,000s of new series the ask was a lock and a cache miss
    /// each.
    fn resolve(
        series: u128,
        hint: MapHint,
        line: &Line<'_>,
        stable: &str,
        db: &str,
        known: &Known<'_>,
    ) -> (Resolved, usize) {
        SERIES_KEYS.with(|k| {
            let mut k = k.borrow_mut();
            let route_epoch = k.route_epoch_for(db);
            let known_epoch = known.scope.map(|s| k.known_epoch_for(s, db));
            let held = match hint {
                MapHint::At(at) if k.holds_at(at, series) => Some(at),
                MapHint::Absent(id) if id == k.id => None,
                _ => k.find(series),
            };
            let (at, new) = match held {
                Some(at) => (at, false),
                None => {
                    let (key, _) = subtable_key(line, stable, None);
                    (k.remember(series, key, stable), k.clears == 0)
                }
            };
            match k.entries.get_mut(at) {
                Some(e) if new => (e.resolved_unasked(db, route_epoch), at),
                Some(e) => (e.resolved(db, route_epoch, known_epoch, known), at),
                // Not reached (`insert` always keeps the entry it is given, starting over
                // when full); computed afresh rather than trusted.
                None => (resolved_now(line, stable, None, db, known), usize::MAX),
            }
        })
    }

    /// What this thread's map knows of series `series`: where body `body` put its rows,
    /// or else its subtable when that is known to exist in `known`'s scope for `db` and its
    /// STABLE is one `in_body` accepts (by name, giving back its index in the body). Either
    /// lets a line skip its tags. An entry not yet known to exist in the scope is asked of
    /// `known` here (and a yes remembered): a series' second line on a thread, once the
    /// first has created its subtable, is then not converted the slow way (with 100,000s of
    /// series a thread sees each only a few times). Only a subtable the fast path once
    /// resolved is in the map, and it did so only with every tag key of the series already
    /// in the STABLE's schema (which only grows), so nothing the tags would have told is
    /// missed; a subtable dropped since fails the write, which is then sent again with every
    /// tag ([`Schemaless::write`]).
    fn thread_series(
        series: u128,
        db: &str,
        known: &Known<'_>,
        body: u64,
        in_body: impl FnOnce(&str) -> Option<usize>,
    ) -> ThreadLook {
        SERIES_KEYS.with(|k| {
            let mut k = k.borrow_mut();
            // The usual answer first, before any epoch is brought up to date.
            let Some(at) = k.find(series) else {
                return ThreadLook::Absent(k.id);
            };
            let Some(e) = k.entries.get(at) else {
                return ThreadLook::Held(at);
            };
            let slot = e.body();
            if slot.body == body {
                return ThreadLook::InBody(slot);
            }
            let Some(scope) = known.scope else {
                return ThreadLook::Held(at);
            };
            let mut ask = BodyEpochs::asks(body, db, scope);
            if !k.body_epochs.answer(&ask) {
                ask.route_epoch = k.route_epoch_for(db);
                ask.known_epoch = k.known_epoch_for(scope, db);
                k.body_epochs = ask;
            }
            let (route_epoch, known_epoch) = (k.body_epochs.route_epoch, k.body_epochs.known_epoch);
            let k = &mut *k;
            let Some(e) = k.entries.get_mut(at) else {
                return ThreadLook::Held(at);
            };
            let Some(si) = k.stables.get(e.stable as usize).and_then(|s| in_body(s)) else {
                return ThreadLook::Held(at);
            };
            let shared = e.shared;
            let sub = e.resolved(db, route_epoch, Some(known_epoch), known);
            if sub.known {
                ThreadLook::Known(sub, si, at, shared)
            } else {
                ThreadLook::Held(at)
            }
        })
    }

    /// How many times this thread's map has started over.
    fn clears() -> u64 {
        SERIES_KEYS.with(|k| k.borrow().clears)
    }

    /// Whether a line of series `series` (its entry at `at`) may be placed in body `body`
    /// without the body's map of subtables: its entry is there, no other series shares its
    /// subtable, the body has not placed it, and the map has not started over since it
    /// had started over `clears` times (which would have dropped the slots of series the
    /// body placed). Then no other line of the body has placed its subtable.
    fn alone_in_body(at: usize, series: u128, body: u64, clears: u64) -> bool {
        SERIES_KEYS.with(|k| {
            let mut k = k.borrow_mut();
            if k.clears != clears {
                return false;
            }
            k.entry_at(at, series)
                .is_some_and(|e| !e.shared && e.body_id != body)
        })
    }

    /// Records where the current body put series `series`' rows (its entry was at `at`
    /// when looked up); false when this thread's map does not hold the series (it started
    /// over, or the body moved to this thread).
    fn note_body(at: usize, series: u128, slot: BodySlot) -> bool {
        SERIES_KEYS.with(|k| match k.borrow_mut().entry_at(at, series) {
            Some(e) => {
                e.set_body(slot);
                true
            }
            None => false,
        })
    }
}

impl SeriesEntry {
    /// Where the body being converted on this thread put the series' rows.
    fn body(&self) -> BodySlot {
        let [stable, block, table] = self.body_at;
        BodySlot {
            body: self.body_id,
            stable,
            block,
            table,
        }
    }

    fn set_body(&mut self, slot: BodySlot) {
        self.body_id = slot.body;
        self.body_at = [slot.stable, slot.block, slot.table];
    }

    /// The entry as a [`Resolved`] of a subtable not known to exist (see
    /// [`SeriesKeys::resolve`]), its routing hash brought up to the map's epoch.
    fn resolved_unasked(&mut self, db: &str, route_epoch: u32) -> Resolved {
        fn none(_: &str) -> bool {
            false
        }
        let unasked = Known {
            contains: &none,
            scope: None,
        };
        self.resolved(db, route_epoch, None, &unasked)
    }

    /// The entry as a [`Resolved`], its routing hash and known answer brought up to the
    /// map's epochs.
    fn resolved(
        &mut self,
        db: &str,
        route_epoch: u32,
        known_epoch: Option<u32>,
        known: &Known<'_>,
    ) -> Resolved {
        let name = SubtableName::Hex(HexName::of(self.key));
        if self.route.0 != route_epoch {
            self.route = (route_epoch, hash_table_name(db, name.as_str()));
        }
        let is_known = match known_epoch {
            Some(epoch) if self.known == epoch => true,
            Some(epoch) => {
                let yes = (known.contains)(name.as_str());
                if yes {
                    self.known = epoch;
                }
                yes
            }
            None => (known.contains)(name.as_str()),
        };
        Resolved {
            key: self.key,
            name,
            route_hash: self.route.1,
            known: is_known,
        }
    }
}

/// The next epoch after `e` (never 0, which entries start with).
fn next_epoch(e: u32) -> u32 {
    e.wrapping_add(1).max(1)
}

/// A line's subtable computed from scratch.
fn resolved_now(
    line: &Line<'_>,
    stable: &str,
    child_table_tag: Option<&str>,
    db: &str,
    known: &Known<'_>,
) -> Resolved {
    let (key, named) = subtable_key(line, stable, child_table_tag);
    let name = match named {
        Some(n) => SubtableName::Named(n.to_string()),
        None => SubtableName::Hex(HexName::of(key)),
    };
    Resolved {
        key,
        route_hash: hash_table_name(db, name.as_str()),
        known: (known.contains)(name.as_str()),
        name,
    }
}

/// A subtable's name: spelled from its key, or the value of `child_table_tag`.
enum SubtableName {
    Hex(HexName),
    Named(String),
}

impl SubtableName {
    fn as_str(&self) -> &str {
        match self {
            SubtableName::Hex(h) => h.as_str(),
            SubtableName::Named(n) => n,
        }
    }
}

/// Bytes of a [`HexName`].
const HEX_NAME_BYTES: usize = 34;

/// `t_` + the 32 lower-case hex digits of a subtable key, on the stack.
struct HexName([u8; HEX_NAME_BYTES]);

impl HexName {
    fn of(key: u128) -> HexName {
        // Two digits per byte from a table: a shift of the 128-bit key per digit was 2% of
        // the line protocol's CPU with 1,000s of series (a name is spelled per line).
        const PAIRS: [[u8; 2]; 256] = {
            const DIGITS: &[u8; 16] = b"0123456789abcdef";
            let mut t = [[0u8; 2]; 256];
            let mut i = 0;
            while i < 256 {
                t[i] = [DIGITS[i >> 4], DIGITS[i & 0xf]];
                i += 1;
            }
            t
        };
        let mut b = [0u8; 34];
        b[0] = b't';
        b[1] = b'_';
        for (d, byte) in b[2..].chunks_exact_mut(2).zip(key.to_be_bytes()) {
            d.copy_from_slice(&PAIRS[usize::from(byte)]);
        }
        HexName(b)
    }

    fn as_str(&self) -> &str {
        debug_assert!(self.0.is_ascii());
        // SAFETY: `of` is the only constructor and writes only `t`, `_` and the hex digits
        // of `PAIRS`, all ASCII, so the bytes are UTF-8. Checking them (`str::from_utf8`)
        // was 3% of the line protocol's CPU with 100,000s of series: a name is spelled and
        // read at each series' first line on a thread and in each body.
        unsafe { std::str::from_utf8_unchecked(&self.0) }
    }
}

/// Most series the per-body maps of the fast path reserve room for up front.
const SERIES_PER_BODY_RESERVE_MAX: usize = 1 << 16;

/// What a line needs of its STABLE: the type of each field and the tag keys.
#[derive(Default)]
struct Needs {
    columns: Vec<ColumnDef>,
    tags: Vec<ColumnDef>,
}

/// A line's column type.
fn column_type(v: &FieldValue<'_>) -> DataType {
    match v {
        FieldValue::Float(_) => DataType::Double,
        FieldValue::Int(_) => DataType::BigInt,
        FieldValue::UInt(_) => DataType::UBigInt,
        FieldValue::Str(_) => DataType::VarChar(STRING_COLUMN_BYTES),
        FieldValue::Bool(_) => DataType::Bool,
    }
}

/// The field as a value of column type `t`, or why it does not fit.
fn field_to_value(v: &FieldValue<'_>, t: DataType) -> Result<Value, String> {
    use tidal_common::types::PhysicalType as P;
    let fits = matches!(
        (v, t.physical()),
        (FieldValue::Float(_), P::Float)
            | (FieldValue::Int(_), P::Int)
            | (FieldValue::UInt(_), P::UInt)
            | (FieldValue::Str(_), P::Str)
            | (FieldValue::Bool(_), P::Bool)
    );
    if !fits {
        return Err(format!("is {} but the column is {t}", v.type_name()));
    }
    // The types schemaless writes create take their values as they are (what `coerce` would
    // return anyway); only other column types need converting and range checks.
    match (v, t) {
        (FieldValue::Float(f), DataType::Double) => return Ok(Value::Float(*f)),
        (FieldValue::Int(i), DataType::BigInt) => return Ok(Value::Int(*i)),
        (FieldValue::UInt(u), DataType::UBigInt) => return Ok(Value::UInt(*u)),
        (FieldValue::Bool(b), DataType::Bool) => return Ok(Value::Bool(*b)),
        _ => {}
    }
    let value = match v {
        FieldValue::Float(f) => Value::Float(*f),
        FieldValue::Int(i) => Value::Int(*i),
        FieldValue::UInt(u) => Value::UInt(*u),
        FieldValue::Str(s) => Value::Str(s.to_string()),
        FieldValue::Bool(b) => Value::Bool(*b),
    };
    t.coerce(value)
}

/// [`fnv128_lanes`] in hex.
#[cfg(test)]
fn fnv128(parts: &[&[u8]]) -> String {
    fnv128_hex(fnv128_lanes(parts.iter().copied()))
}

/// 128-bit FNV-1a of length-prefixed parts, as two 64-bit lanes with different offsets:
/// deterministic across builds and platforms (unlike `std`'s hasher), which the subtable name
/// requires.
fn fnv128_lanes<'p>(parts: impl IntoIterator<Item = &'p [u8]>) -> u128 {
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut a: u64 = 0xcbf2_9ce4_8422_2325;
    let mut b: u64 = 0x6c62_272e_07bb_0142;
    for p in parts {
        let len = (p.len() as u64).to_le_bytes();
        for byte in len.iter().chain(p.iter()) {
            a = (a ^ u64::from(*byte)).wrapping_mul(PRIME);
            b = (b ^ u64::from(*byte)).wrapping_mul(PRIME).rotate_left(5);
        }
    }
    (u128::from(a) << 64) | u128::from(b)
}

/// `h` as 32 lower-case hex digits (what `format!("{h:032x}")` gives, without the formatter,
/// which was 5% of the line-protocol path: a new subtable key per line at 4,000 trucks).
fn fnv128_hex(h: u128) -> String {
    HexName::of(h).as_str()[2..].to_string()
}

/// A line's tags as written, as a map key (see `prepare`).
struct TagSet<'l>(&'l [(Cow<'l, str>, Cow<'l, str>)]);

impl std::hash::Hash for TagSet<'_> {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        for (k, v) in self.0 {
            h.write(k.as_bytes());
            h.write_u8(0xff);
            h.write(v.as_bytes());
            h.write_u8(0xff);
        }
    }
}

impl PartialEq for TagSet<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl Eq for TagSet<'_> {}

/// Identifies a line's subtable without building its name: `(key, Some(name))` when
/// `child_table_tag` names it, else `(hash, None)` where the name is `t_` + the hash in hex
/// (the same as [`subtable_name`]). Lines of one body with equal keys go to one subtable.
fn subtable_key<'l>(
    line: &'l Line<'_>,
    stable: &str,
    child_table_tag: Option<&str>,
) -> (u128, Option<&'l str>) {
    if let Some(tag) = child_table_tag {
        if let Some((_, v)) = line.tags.iter().find(|(k, _)| k == tag) {
            let key = fnv128_lanes([b"\0child".as_slice(), v.as_bytes()]);
            return (key, Some(v.as_ref()));
        }
    }
    // Sorted by (key, value) as `subtable_name` sorts them, without allocating for the usual
    // handful of tags.
    const STACK_TAGS: usize = 32;
    let n = line.tags.len();
    let mut stack = [0usize; STACK_TAGS];
    let mut heap = Vec::new();
    let order: &mut [usize] = if n <= STACK_TAGS {
        &mut stack[..n]
    } else {
        heap.resize(n, 0);
        &mut heap
    };
    for (i, o) in order.iter_mut().enumerate() {
        *o = i;
    }
    let tags = &line.tags;
    order.sort_unstable_by(|x, y| {
        (tags[*x].0.as_ref(), tags[*x].1.as_ref()).cmp(&(tags[*y].0.as_ref(), tags[*y].1.as_ref()))
    });
    let parts = std::iter::once(stable.as_bytes()).chain(
        order
            .iter()
            .flat_map(|i| [tags[*i].0.as_bytes(), tags[*i].1.as_bytes()]),
    );
    (fnv128_lanes(parts), None)
}

/// The subtable name of a line (see the module doc), spelled out: the reference that
/// [`subtable_key`], which the write path uses, is tested against.
#[cfg(test)]
pub fn subtable_name(line: &Line<'_>, stable: &str, child_table_tag: Option<&str>) -> String {
    if let Some(tag) = child_table_tag {
        if let Some((_, v)) = line.tags.iter().find(|(k, _)| k == tag) {
            return v.to_string();
        }
    }
    let mut tags: Vec<(&str, &str)> = line
        .tags
        .iter()
        .map(|(k, v)| (k.as_ref(), v.as_ref()))
        .collect();
    tags.sort_unstable();
    let mut parts: Vec<&[u8]> = Vec::with_capacity(1 + tags.len() * 2);
    parts.push(stable.as_bytes());
    for (k, v) in &tags {
        parts.push(k.as_bytes());
        parts.push(v.as_bytes());
    }
    format!("t_{}", fnv128(&parts))
}

/// A STABLE as [`Schemaless::prepare_known_schemas`] uses it: the lower-cased measurement,
/// the schema with its name lookups, and the STABLE's block for each vgroup.
struct FastStable {
    name: String,
    index: SchemaIndex,
    /// Empty columns of the schema's types, for new blocks.
    template: Vec<Column>,
    /// Index into the body's blocks of this STABLE's block for vgroup i, once it has one.
    blocks: Vec<Option<usize>>,
    /// The column of the field key last seen at each position of a line: lines of one
    /// STABLE repeat their keys in one order, so a string comparison usually replaces the
    /// hash lookup.
    recent: Vec<(String, usize)>,
    /// A line's row before its subtable is known (one row at most between lines).
    scratch: Vec<Column>,
    /// The stamp of the line that last set each column, and the current line's.
    stamps: Vec<u32>,
    stamp: u32,
    /// The field set this STABLE's lines had last, when the parser can read it by its shape.
    shape: Option<RowShape>,
    /// Lines of this STABLE to convert before a field set that made no shape is tried again.
    shape_pause: u32,
    /// Lines asked by the shape in a row that it did not fit.
    shape_misses: u32,
}

/// A field set of a STABLE's lines as the parser reads it by its shape
/// ([`tidal_lineproto::Lines::next_into_shaped`]), and where its values go: a feed writes the
/// same fields line after line, and a line read so goes into the block without its field list,
/// a lookup of each key's column or a check of each value's type.
struct RowShape {
    parse: Shape,
    /// The column of each of the shape's fields, in its order, and whether it holds integers.
    columns: Vec<(usize, bool)>,
    /// The columns (not the timestamp's) that the shape has no field for: NULL in its rows.
    nulls: Vec<usize>,
}

impl RowShape {
    /// `line`'s field set as a shape of `index`'s STABLE: every field a number of its column's
    /// type (DOUBLE or BIGINT), each column at most once. `None` for any other.
    fn of(index: &SchemaIndex, line: &Line<'_>) -> Option<RowShape> {
        let columns = &index.schema.columns;
        let mut fields = Vec::with_capacity(line.fields.len());
        let mut at = Vec::with_capacity(line.fields.len());
        for (k, v) in &line.fields {
            let i = index.column(k)?;
            let number = match (v, columns.get(i)?.data_type) {
                (FieldValue::Float(_), DataType::Double) => Number::Float,
                (FieldValue::Int(_), DataType::BigInt) => Number::Int,
                _ => return None,
            };
            // The timestamp column is never a field; a column named twice is the general
            // path's (the later key wins).
            if i == 0 || at.iter().any(|&(c, _)| c == i) {
                return None;
            }
            fields.push((k.as_ref(), number));
            at.push((i, number == Number::Int));
        }
        let parse = Shape::new(fields)?;
        let nulls = (1..columns.len())
            .filter(|i| !at.iter().any(|&(c, _)| c == *i))
            .collect();
        Some(RowShape {
            parse,
            columns: at,
            nulls,
        })
    }

    /// Appends the row of a line read by this shape (`values` in its order, the fields it
    /// has as the bits of `present`, timestamp `ts`) to `cols`, a block's columns of the
    /// STABLE: `Ok(true)`, or `Ok(false)` if they are not of its types (which the block
    /// then puts back).
    fn push(
        &self,
        values: &[u64],
        present: u64,
        ts: i64,
        cols: &mut [Column],
    ) -> Result<bool, String> {
        if values.len() != self.columns.len() {
            return Ok(false);
        }
        match cols.first_mut() {
            Some(Column {
                data: ColumnData::Timestamp(d),
                nulls,
            }) if nulls.is_empty() => d.push(ts),
            _ => return Ok(false),
        }
        for (j, (&(i, int), &v)) in self.columns.iter().zip(values).enumerate() {
            let Some(col) = cols.get_mut(i) else {
                return Ok(false);
            };
            if present & (1 << j) == 0 {
                col.push(&Value::Null);
                continue;
            }
            // Pushed here rather than through `push_field`: building and matching a
            // `FieldValue` per value made the whole conversion 6-8% slower.
            match (&mut col.data, int) {
                (ColumnData::Float(d), false) => d.push(f64::from_bits(v)),
                (ColumnData::Int(d), true) => d.push(v as i64),
                _ => return Ok(false),
            }
            if !col.nulls.is_empty() {
                col.nulls.push(false);
            }
        }
        for &i in &self.nulls {
            if let Some(col) = cols.get_mut(i) {
                col.push(&Value::Null);
            }
        }
        Ok(true)
    }
}

impl FastStable {
    fn new(name: String, schema: StableSchema, vgroups: usize) -> FastStable {
        let template: Vec<Column> = schema
            .columns
            .iter()
            .map(|c| Column::empty(c.data_type, 0))
            .collect();
        FastStable {
            name,
            scratch: template.clone(),
            template,
            index: SchemaIndex::new(schema),
            blocks: vec![None; vgroups],
            recent: Vec::new(),
            stamps: Vec::new(),
            stamp: 0,
            shape: None,
            shape_pause: 0,
            shape_misses: 0,
        }
    }

    /// After a line of this STABLE converted: `shaped` if it was read by the shape, else
    /// `asked` if the shape did not fit it. Without a shape, the line's field set becomes
    /// the shape if it makes one, else the next try waits [`FastStable::SHAPE_PAUSE`] lines
    /// (a feed whose lines make none pays the try seldom); a shape that did not fit
    /// [`FastStable::SHAPE_MISSES`] lines in a row is replaced (a feed whose field set
    /// changed), one line unlike the rest is not.
    fn reshape(&mut self, line: &Line<'_>, shaped: bool, asked: bool) {
        if shaped {
            self.shape_misses = 0;
            return;
        }
        if asked {
            self.shape_misses += 1;
            if self.shape_misses < Self::SHAPE_MISSES {
                return;
            }
        } else if self.shape.is_some() {
            return;
        }
        if self.shape_pause > 0 {
            self.shape_pause -= 1;
            return;
        }
        self.shape_misses = 0;
        self.shape = RowShape::of(&self.index, line);
        if self.shape.is_none() {
            self.shape_pause = Self::SHAPE_PAUSE;
        }
    }

    const SHAPE_PAUSE: u32 = 256;
    const SHAPE_MISSES: u32 = 2;

    /// [`SchemaIndex::column`] of the field key at position `pos` of a line.
    fn column(&mut self, pos: usize, k: &str) -> Option<usize> {
        if let Some((name, i)) = self.recent.get(pos) {
            if tidal_lineproto::same_bytes(name.as_bytes(), k.as_bytes()) {
                return Some(*i);
            }
        }
        let i = self.index.column(k)?;
        let known = self.recent.len();
        match self.recent.get_mut(pos) {
            Some(slot) => {
                slot.0.clear();
                slot.0.push_str(k);
                slot.1 = i;
            }
            None if pos == known => self.recent.push((k.to_string(), i)),
            None => {}
        }
        Some(i)
    }
}

/// What a series key (as written) resolved to in one body: its STABLE and, once a line of it
/// was converted, its (block, subtable) — `None` while its lines are all rejected.
#[derive(Clone, Copy)]
struct Series {
    stable: usize,
    table: Option<(usize, u32)>,
}

impl Series {
    /// A series of STABLE `stable` with no row placed yet.
    fn unplaced(stable: usize) -> Series {
        Series {
            stable,
            table: None,
        }
    }
}

/// What the fast path found for a line's series (each variant holds its [`series_hash`]):
/// the series as this body resolved it, a subtable this thread knows to exist (with the
/// index of its STABLE in the body), or nothing yet (with where the thread's map has it).
enum Looked {
    Body(u128, Series),
    /// With the index of its STABLE in the body, of its entry in the thread's map, and
    /// whether another series there has the same subtable.
    Thread(u128, Resolved, usize, usize, bool),
    Miss(u128, MapHint),
}

impl Looked {
    /// The index of the series' STABLE among the body's (past the end for a miss).
    fn stable(&self) -> usize {
        match self {
            Looked::Body(_, s) => s.stable,
            Looked::Thread(_, _, si, _, _) => *si,
            Looked::Miss(..) => usize::MAX,
        }
    }

    /// Whether the line's tags are not needed (see [`SeriesKeys::thread_series`]).
    fn skips_tags(&self) -> bool {
        match self {
            Looked::Body(_, s) => s.table.is_some(),
            Looked::Thread(..) => true,
            Looked::Miss(..) => false,
        }
    }
}

/// What the fast path knows of the series `h` of a line: from this thread's map when
/// `thread` (db, known scope, body id) is given, where this body put it or that its subtable
/// exists; else from the body's own map `series`.
fn look_up(
    h: u128,
    series: &HashMap<u128, Series, PrehashedState>,
    stables: &[FastStable],
    thread: Option<(&str, &Known<'_>, u64)>,
) -> Looked {
    let from_thread = thread.map(|(db, known, body)| {
        SeriesKeys::thread_series(h, db, known, body, |name| {
            stables.iter().position(|s| s.name == name)
        })
    });
    match (from_thread, series.get(&h)) {
        (Some(ThreadLook::InBody(slot)), _) => Looked::Body(
            h,
            Series {
                stable: slot.stable as usize,
                table: Some((slot.block as usize, slot.table)),
            },
        ),
        (_, Some(s)) => Looked::Body(h, *s),
        (Some(ThreadLook::Known(sub, si, at, shared)), None) => {
            Looked::Thread(h, sub, si, at, shared)
        }
        (Some(ThreadLook::Held(at)), None) => Looked::Miss(h, MapHint::At(at)),
        (Some(ThreadLook::Absent(id)), None) => Looked::Miss(h, MapHint::Absent(id)),
        (None, None) => Looked::Miss(h, MapHint::Search),
    }
}

/// Whether `Schemaless::prepare` parses the next line with
/// [`tidal_lineproto::Lines::next_into_known`]: in windows of [`SkipTags::WINDOW`] lines,
/// each decided by the one before (at least a quarter of its lines skipped their tags);
/// after a window that did not pay, [`SkipTags::PAUSE`] lines without, then a new try.
#[derive(Default)]
struct SkipTags {
    asked: u32,
    skipped: u32,
    paused: u32,
}

impl SkipTags {
    const WINDOW: u32 = 64;
    const PAUSE: u32 = 256;

    fn ask(&mut self) -> bool {
        if self.paused == 0 {
            return true;
        }
        self.paused -= 1;
        false
    }

    /// Counts a line parsed with the question, and whether it skipped its tags.
    fn asked(&mut self, skipped: bool) {
        self.asked += 1;
        self.skipped += u32::from(skipped);
        if self.asked == Self::WINDOW {
            if self.skipped * 4 < self.asked {
                self.paused = Self::PAUSE;
            }
            self.asked = 0;
            self.skipped = 0;
        }
    }
}

fn bad_stable_name(measurement: &str) -> String {
    format!(
        "measurement '{measurement}' cannot be a STABLE name: use letters, digits and '_', not starting with a digit"
    )
}

/// A line's timestamp in the database precision (`now` when it has none), or why the line is
/// rejected: a timestamp out of range, or a field named like the timestamp column.
fn line_ts(line: &Line<'_>, from: Precision, to: Precision, now: i64) -> Result<i64, String> {
    let ts = match line.timestamp {
        Some(t) => from.convert(t, to),
        None => Some(now),
    };
    let Some(ts) = ts else {
        return Err(bad_timestamp(line, from, to));
    };
    if let Some(bad) = line
        .fields
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(TS_COLUMN))
    {
        return Err(ts_collision(&bad.0));
    }
    Ok(ts)
}

fn bad_timestamp(line: &Line<'_>, from: Precision, to: Precision) -> String {
    format!(
        "timestamp {} ({from}) does not fit the database precision {to}",
        line.timestamp.unwrap_or_default(),
    )
}

fn ts_collision(field: &str) -> String {
    format!("field '{field}' collides with the timestamp column '{TS_COLUMN}'")
}

/// A body's subtables by key: (STABLE, block, index in it) ([`Schemaless::prepare_known_schemas`]).
type SubtableMap = HashMap<u128, (usize, usize, u32), foldhash::fast::RandomState>;

/// Enters the subtables placed without the map into it, once; from then on every subtable
/// placed goes into it (`mapped`). Sized then, for the series the body is expected to hold.
fn map_placed(
    subtables: &mut SubtableMap,
    unmapped: &mut Vec<(u128, (usize, usize, u32))>,
    mapped: &mut bool,
    series_est: usize,
) {
    if *mapped {
        return;
    }
    subtables.reserve(series_est.max(unmapped.len()));
    for (key, place) in unmapped.drain(..) {
        subtables.entry(key).or_insert(place);
    }
    *mapped = true;
}

/// Rows to reserve in a new block of STABLE `st`: its vgroup's share of the body, so that
/// its columns seldom grow. A guess (a line taken as three times its series key of
/// `key_bytes`), capped so that no block reserves more bytes than the body holds.
fn block_rows_est(
    body_bytes: usize,
    key_bytes: usize,
    route: &RouteTable,
    st: &FastStable,
) -> usize {
    let lines_est = body_bytes / (3 * key_bytes.max(1));
    (lines_est / route.vgroups.len().max(1)).min(body_bytes / (8 * st.template.len().max(1)))
}

/// The index in `blocks` of STABLE `st`'s block for vgroup `vg`, made (with room for
/// `rows(st)`) if it has none yet; `None` for a vgroup out of range.
fn block_for(
    st: &mut FastStable,
    blocks: &mut Vec<RowBlock>,
    vg: usize,
    rows: impl FnOnce(&FastStable) -> usize,
) -> Option<usize> {
    if let Some(b) = st.blocks.get(vg).copied()? {
        return Some(b);
    }
    let rows = rows(st);
    let mut block = RowBlock::like(st.index.schema.name.clone(), &st.template, rows);
    // A subtable per row at most, named by its key's 34 hex bytes (`HexName`) unless a tag
    // names it.
    block.reserve_tables(rows, rows * HEX_NAME_BYTES);
    blocks.push(block);
    *st.blocks.get_mut(vg)? = Some(blocks.len() - 1);
    Some(blocks.len() - 1)
}

/// Whether `name` is usable as a STABLE name (the mnode's rule: `[a-z_][a-z0-9_]*`).
fn valid_stable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && name.len() <= 192
}

impl Schemaless {
    pub fn new(client: Client) -> Schemaless {
        Schemaless {
            merger: WriteMerger::new(client.clone()),
            known: Arc::default(),
            client,
        }
    }

    /// Parses `body` (in the parts [`tidal_lineproto::parse_parts`] reads) and writes its
    /// points into `db`. Errors of the whole request (unknown database, cluster unavailable)
    /// are `Err`; bad lines are listed in the outcome.
    pub async fn write(
        &self,
        db: &str,
        body: &[&[u8]],
        opts: &SchemalessOptions,
    ) -> ExecResult<SchemalessOutcome> {
        // Whose subtables these are (the user of the forwarded token, verified by the layer
        // that set it; "" for a frontend writing with its own identity).
        let user = tidal_client::auth::current_caller()
            .and_then(|t| tidal_client::auth::unverified_subject(&t))
            .unwrap_or_default();
        let mut use_known = true;
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self
                .write_once(db, body, opts, use_known.then_some(user.as_str()))
                .await
            {
                // A subtable written without tags is gone (dropped since): forget what we
                // knew and write the body again with every tag.
                Err(e) if e.code == StatusCode::TableNotFound && use_known => {
                    tracing::debug!(e.message, "schemaless write: a known subtable is gone");
                    self.known.clear();
                    use_known = false;
                    attempt -= 1;
                }
                // A vnode knows a newer schema than our cache (another frontend altered the
                // STABLE): re-read the schemas and convert again. Re-sending rows that some
                // vgroups already took is harmless: a repeated (table, ts) overwrites.
                Err(e) if e.code == StatusCode::SchemaMismatch && attempt < SCHEMA_ATTEMPTS_MAX => {
                    tracing::debug!(e.message, "schemaless write: schema changed; retrying");
                    self.client.invalidate(db);
                }
                other => return other,
            }
        }
    }

    async fn write_once(
        &self,
        db: &str,
        body: &[&[u8]],
        opts: &SchemalessOptions,
        user: Option<&str>,
    ) -> ExecResult<SchemalessOutcome> {
        let contains = |t: &str| user.is_some_and(|u| self.known.contains(u, db, t));
        let known = Known {
            contains: &contains,
            scope: user.map(|user| KnownScope {
                generation: self.known.generation(),
                user,
            }),
        };
        let preparing = self.merger.preparing(db);
        let p = self.prepare(db, body, opts, &known).await?;
        let mut out = p.outcome;
        if p.blocks.is_empty() {
            return Ok(out);
        }
        // Per vgroup, for the merging writer: the map `prepare` routed with (cached, so the
        // same one unless it was refreshed meanwhile; the writer re-routes if it is stale).
        let route = self.client.route(db).await?;
        let mut groups: BTreeMap<usize, Vec<RowBlock>> = BTreeMap::new();
        let placed = p
            .vgroups
            .filter(|(r, vgs)| Arc::ptr_eq(r, &route) && vgs.len() == p.blocks.len());
        match placed {
            Some((_, vgs)) => {
                for (b, vg) in p.blocks.into_iter().zip(vgs) {
                    groups.entry(vg).or_default().push(b);
                }
            }
            None => {
                for b in p.blocks {
                    for (vg, part) in b.split_by(|t| route.index_of(db, t)) {
                        groups.entry(vg).or_default().push(part);
                    }
                }
            }
        }
        let writes = groups.into_iter().map(|(vg, blocks)| {
            // The subtables this write creates (or finds): those sent with tags.
            let fresh: Vec<u128> = match user {
                Some(u) => blocks
                    .iter()
                    .flat_map(|b| {
                        (0..b.num_tables())
                            .filter(|&i| b.tags(i).is_some())
                            .map(move |i| KnownSubtables::key(u, db, b.table(i)))
                    })
                    .collect(),
                None => Vec::new(),
            };
            let schemas: Vec<StableSchema> = p
                .schemas
                .iter()
                .filter(|s| blocks.iter().any(|b| b.stable() == s.name))
                .cloned()
                .collect();
            let write = self.merger.write(db, route.clone(), vg, schemas, blocks);
            async move {
                let r = write.await;
                if r.is_ok() {
                    self.known.insert_all(&fresh);
                }
                r
            }
        });
        // Senders stop waiting for this body: its rows are about to be queued (the futures
        // above queue them in their first poll).
        drop(preparing);
        // Every vgroup's write runs to its end (none is left half-sent by an early return);
        // the first error is the body's.
        for r in futures::future::join_all(writes).await {
            out.rows += r?.rows;
        }
        Ok(out)
    }

    /// Parses `body` (in parts, as for [`Schemaless::write`]), creates or extends the STABLEs
    /// it needs, and returns its rows as one row block per STABLE (not yet written) with the
    /// rejected lines. `tidal load` hands the blocks to a batching [`tidal_client::Writer`]
    /// instead of writing them at once. A subtable for which `known(name)` holds exists
    /// already: its tags are left out (not even converted; TDengine ignores the tags of a
    /// write to an existing subtable).
    pub async fn prepare(
        &self,
        db: &str,
        body: &[&[u8]],
        opts: &SchemalessOptions,
        known: &Known<'_>,
    ) -> ExecResult<Prepared> {
        let route = self.client.route(db).await?;
        let p = match self
            .prepare_known_schemas(db, &route, body, opts, known)
            .await
        {
            Some((mut p, vgroups)) => {
                p.vgroups = Some((route.clone(), vgroups));
                p
            }
            None => {
                self.prepare_reconciling(db, &route, body, opts, known)
                    .await?
            }
        };
        Ok(p)
    }

    /// [`Schemaless::prepare`] for a body whose every STABLE exists with every key it uses,
    /// as nearly every body of a running feed does: one pass, each line parsed into one
    /// reused [`Line`] and converted at once, rows going straight into a block per STABLE and
    /// vgroup (so the write path has nothing to split). `None` as soon as the body needs a
    /// schema change (or anything else this path does not handle); nothing has been done
    /// then, and [`Schemaless::prepare_reconciling`] starts over. When it returns a result,
    /// it is the one `prepare_reconciling` would give: the same rows and the same rejected
    /// lines with the same messages. Each block holds the subtables of one vgroup: returned
    /// with the index in `route` of each block's.
    async fn prepare_known_schemas(
        &self,
        db: &str,
        route: &RouteTable,
        body: &[&[u8]],
        opts: &SchemalessOptions,
        known: &Known<'_>,
    ) -> Option<(Prepared, Vec<usize>)> {
        let db_precision = Precision::from(route.precision);
        let now = route.precision.now();
        let child_table_tag = opts.child_table_tag.as_deref();
        let mut out = SchemalessOutcome::default();
        let mut stables: Vec<FastStable> = Vec::new();
        let mut blocks: Vec<RowBlock> = Vec::new();
        // Series key ([`series_hash`]) -> its STABLE and, once resolved, its subtable, for
        // the series this thread's map does not hold (with `child_table_tag`, every series;
        // otherwise those whose lines were all rejected, or left out of a full map): one
        // hash of a byte string per line instead of sorting and hashing the tags; different
        // spellings of one series meet again in `subtables`.
        // The maps are sized up front (growing them was 2% of the line protocol's CPU at
        // 4,000 trucks): for the series this thread has seen, or a line per series at about
        // 128 bytes a line if that is fewer.
        if child_table_tag.is_none() {
            SERIES_KEYS.with(|k| k.borrow_mut().exchange(&SERIES_JOURNAL));
        }
        let seen = SERIES_KEYS.with(|k| k.borrow().entries.len());
        let body_len: usize = body.iter().map(|p| p.len()).sum();
        let lines_est = (body_len / 128).min(SERIES_PER_BODY_RESERVE_MAX);
        let series_est = lines_est.min(seen);
        let mut series: HashMap<u128, Series, PrehashedState> = HashMap::with_capacity_and_hasher(
            if child_table_tag.is_some() {
                lines_est
            } else {
                0
            },
            Default::default(),
        );
        // Subtable key (see `subtable_key`) -> (STABLE, block, index in it), of every
        // subtable the body placed once `mapped` is true. Until then, a line whose series'
        // entry in this thread's map shares its subtable with no other entry is placed
        // without it (with 1,000s of series its inserts were cache misses, 6% of the CPU)
        // and noted in `unmapped`: the body's slot in that entry is then the only way another
        // line reaches the subtable. Anything else (a shared subtable, `child_table_tag`, a
        // map that started over, another thread after an `await`) maps them first
        // (`map_placed`).
        let mut subtables: SubtableMap = HashMap::default();
        let mut mapped = child_table_tag.is_some();
        if mapped {
            subtables.reserve(series_est);
        }
        let mut unmapped: Vec<(u128, (usize, usize, u32))> = Vec::new();
        let this_thread = SERIES_KEYS.with(|k| k as *const _ as usize);
        let clears = SeriesKeys::clears();
        let mut line = Line::default();
        let mut lines = tidal_lineproto::parse_parts(body);
        // A line whose series key this body has already resolved to a subtable, or whose
        // subtable this thread knows to exist (`SeriesKeys::thread_series`), needs no tags:
        // the parser is asked to skip them (`Lines::next_into_known`) where that pays, i.e.
        // while at least one line in four skips them. Where none does (a new feed), the
        // extra scan for the key's end is dropped for a while.
        let mut skip_tags = SkipTags::default();
        // This thread's series map serves the lines of this body (not with
        // `child_table_tag`, which names subtables otherwise).
        let body_id = next_body();
        let thread = (child_table_tag.is_none()).then_some((db, known, body_id));
        // A line read by its STABLE's shape: the keys it has (bits) and its values.
        let mut shaped_values: Vec<u64> = Vec::new();
        loop {
            let mut looked_up: Option<Looked> = None;
            let mut asked_shape = false;
            let parsed = if skip_tags.ask() {
                lines.next_into_shaped(&mut line, &mut shaped_values, &mut |k| {
                    let look = look_up(series_hash(k), &series, &stables, thread);
                    let ask = if !look.skips_tags() {
                        Ask::Parse
                    } else {
                        let shape = stables.get(look.stable()).and_then(|st| st.shape.as_ref());
                        match shape {
                            Some(shape) => {
                                asked_shape = true;
                                Ask::Shaped(&shape.parse)
                            }
                            None => Ask::Skip,
                        }
                    };
                    looked_up = Some(look);
                    ask
                })
            } else {
                lines.next_into(&mut line).map(|r| r.map(|k| (k, None)))
            };
            let Some(parsed) = parsed else { break };
            let (key, shaped) = match parsed {
                Ok(k) => k,
                Err(e) => {
                    out.reject(
                        e.line,
                        format!("column {}: {} (in '{}')", e.column, e.kind, e.snippet),
                    );
                    continue;
                }
            };
            if let Some(l) = &looked_up {
                skip_tags.asked(l.skips_tags());
            }
            let look = match looked_up {
                Some(l) => l,
                None => look_up(series_hash(key), &series, &stables, thread),
            };
            let (h, hit, thread_hit, hint) = match look {
                Looked::Body(h, s) => (h, Some(s), None, MapHint::Search),
                Looked::Thread(h, sub, si, at, shared) => {
                    (h, None, Some((sub, si, at, shared)), MapHint::Search)
                }
                Looked::Miss(h, hint) => (h, None, None, hint),
            };
            let si = match (hit, &thread_hit) {
                (Some(s), _) => s.stable,
                (None, Some((_, si, _, _))) => *si,
                (None, None) => {
                    let name = lower_case(&line.measurement);
                    if !valid_stable_name(&name) {
                        out.reject(line.line_no, bad_stable_name(&line.measurement));
                        continue;
                    }
                    match stables.iter().position(|s| s.name == name) {
                        Some(i) => i,
                        None => {
                            // Cached by the client; a STABLE that does not exist yet is the
                            // slow path's to create.
                            let schema = self.client.stable(db, &name).await.ok()?;
                            if SERIES_KEYS.with(|k| k as *const _ as usize) != this_thread {
                                // Another thread's map holds no slots of this body.
                                map_placed(&mut subtables, &mut unmapped, &mut mapped, series_est);
                            }
                            stables.push(FastStable::new(
                                name.into_owned(),
                                schema,
                                route.vgroups.len(),
                            ));
                            stables.len() - 1
                        }
                    }
                }
            };
            let ts = match line_ts(&line, opts.precision, db_precision, now) {
                Ok(ts) => ts,
                Err(e) => {
                    out.reject(line.line_no, e);
                    continue;
                }
            };
            let st = stables.get_mut(si)?;
            // From here on the slow path would count the line's keys into the schema it
            // needs: a key the schema lacks sends the body there.
            if let Some(Series {
                table: Some((b, t)),
                ..
            }) = hit
            {
                // A series this body has a subtable for: its row goes straight into the block
                // (which puts its columns back itself if the line does not convert).
                let fill = fill_of(st, &line, &shaped_values, shaped, ts);
                let pushed = blocks.get_mut(b)?.push_row_with(t, fill);
                match pushed {
                    Ok(true) => {
                        out.fields += fields_of(&line, shaped);
                        st.reshape(&line, shaped.is_some(), asked_shape);
                    }
                    // A key the schema lacks (or a block out of shape, which cannot be).
                    Ok(false) => return None,
                    Err(msg) => out.reject(line.line_no, msg),
                }
                continue;
            }
            if let Some((sub, _, at, shared)) = &thread_hit {
                // A series new to this body whose subtable exists: its row goes straight onto
                // its vgroup's block, which lists the subtable once the row has converted.
                if *shared {
                    map_placed(&mut subtables, &mut unmapped, &mut mapped, series_est);
                }
                let found = subtables.get(&sub.key).filter(|_| mapped);
                let (b, existing) = match found {
                    Some((s, b, t)) if *s == si => (*b, Some(*t)),
                    Some(_) => return None,
                    None => {
                        let vg = vgroup_index(sub.route_hash, route.vgroups.len() as u32);
                        let rows = |st: &FastStable| block_rows_est(body_len, key.len(), route, st);
                        (block_for(st, &mut blocks, vg, rows)?, None)
                    }
                };
                let block = blocks.get_mut(b)?;
                let fill = fill_of(st, &line, &shaped_values, shaped, ts);
                let pushed = match existing {
                    Some(t) => block.push_row_with(t, fill).map(|ok| ok.then_some(t)),
                    None => block.push_row_with_new_table(sub.name.as_str(), None, fill),
                };
                match pushed {
                    Ok(Some(t)) => {
                        if existing.is_none() {
                            if mapped {
                                subtables.insert(sub.key, (si, b, t));
                            } else {
                                unmapped.push((sub.key, (si, b, t)));
                            }
                        }
                        let slot = BodySlot {
                            body: body_id,
                            stable: si as u32,
                            block: b as u32,
                            table: t,
                        };
                        if !SeriesKeys::note_body(*at, h, slot) {
                            series.insert(
                                h,
                                Series {
                                    stable: si,
                                    table: Some((b, t)),
                                },
                            );
                        }
                        out.fields += fields_of(&line, shaped);
                        st.reshape(&line, shaped.is_some(), asked_shape);
                    }
                    // A key the schema lacks (or a block out of shape, which cannot be).
                    Ok(None) => return None,
                    Err(msg) => {
                        // The series' STABLE, for its next line, as below.
                        series.insert(h, Series::unplaced(si));
                        out.reject(line.line_no, msg);
                    }
                }
                continue;
            }
            // Otherwise the row waits in the STABLE's scratch columns until its subtable is
            // known (a line that fails to convert must not list one).
            let mut scratch = std::mem::take(&mut st.scratch);
            for c in &mut scratch {
                c.truncate(0);
            }
            let converted = row_if_known(st, &line, ts, &mut scratch);
            st.scratch = scratch;
            let converted = converted?;
            if hit.is_none() && thread_hit.is_none() {
                let all_known = line
                    .tags
                    .iter()
                    .all(|(k, _)| st.index.tag(k).is_some() || st.index.column(k).is_some());
                if !all_known {
                    return None;
                }
            }
            if let Err(msg) = converted {
                if hit.is_none() {
                    // The series' STABLE, for its next line; a line that converts enters
                    // it once, below, with its subtable.
                    series.insert(h, Series::unplaced(si));
                }
                out.reject(line.line_no, msg);
                continue;
            }
            let (sub, at) = match child_table_tag {
                None => SeriesKeys::resolve(h, hint, &line, &st.name, db, known),
                Some(_) => (
                    resolved_now(&line, &st.name, child_table_tag, db, known),
                    usize::MAX,
                ),
            };
            if let Some(msg) = tidal_common::schema::table_name_too_long(sub.name.as_str()) {
                if hit.is_none() {
                    series.insert(h, Series::unplaced(si));
                }
                out.reject(line.line_no, msg);
                continue;
            }
            let alone = thread.is_some() && SeriesKeys::alone_in_body(at, h, body_id, clears);
            if !alone {
                map_placed(&mut subtables, &mut unmapped, &mut mapped, series_est);
            }
            let found = subtables.get(&sub.key).filter(|_| mapped);
            let (b, t) = match found {
                Some((s, b, t)) if *s == si => (*b, *t),
                // A subtable named by `child_table_tag` for two STABLEs: which line wins
                // depends on the slow path's order of STABLEs, so let it decide.
                Some(_) => return None,
                None => {
                    let tags = if sub.known {
                        None
                    } else {
                        match tags_of(&st.index, &line) {
                            Ok(t) => Some(t),
                            Err(msg) => {
                                out.reject(line.line_no, msg);
                                continue;
                            }
                        }
                    };
                    let vg = vgroup_index(sub.route_hash, route.vgroups.len() as u32);
                    let st = stables.get_mut(si)?;
                    let rows = |st: &FastStable| block_rows_est(body_len, key.len(), route, st);
                    let b = block_for(st, &mut blocks, vg, rows)?;
                    let t = blocks.get_mut(b)?.add_table(sub.name.as_str(), tags);
                    if mapped {
                        subtables.insert(sub.key, (si, b, t));
                    } else {
                        unmapped.push((sub.key, (si, b, t)));
                    }
                    (b, t)
                }
            };
            let slot = BodySlot {
                body: body_id,
                stable: si as u32,
                block: b as u32,
                table: t,
            };
            if thread.is_none() || !SeriesKeys::note_body(at, h, slot) {
                series.insert(
                    h,
                    Series {
                        stable: si,
                        table: Some((b, t)),
                    },
                );
            }
            let st = stables.get_mut(si)?;
            if !blocks.get_mut(b)?.push_rows(t, &st.scratch, 0, 1) {
                return None;
            }
            out.fields += line.fields.len() as u64;
            st.reshape(&line, false, false);
        }
        let mut vgroup_of = vec![usize::MAX; blocks.len()];
        for st in &stables {
            for (vg, b) in st.blocks.iter().enumerate() {
                if let Some(slot) = b.and_then(|b| vgroup_of.get_mut(b)) {
                    *slot = vg;
                }
            }
        }
        let (blocks, vgroups): (Vec<RowBlock>, Vec<usize>) = blocks
            .into_iter()
            .zip(vgroup_of)
            .filter(|(b, _)| b.num_tables() > 0)
            .unzip();
        // Every block was made for a vgroup (`block_for`).
        if vgroups.contains(&usize::MAX) {
            return None;
        }
        out.errors.sort_by_key(|e| e.line);
        let p = Prepared {
            outcome: out,
            schemas: stables.into_iter().map(|s| s.index.schema).collect(),
            blocks,
            vgroups: None,
        };
        Some((p, vgroups))
    }

    /// [`Schemaless::prepare`] in full: every line parsed and kept, the STABLEs created or
    /// extended for the keys they use, then the rows converted, one block per STABLE.
    async fn prepare_reconciling(
        &self,
        db: &str,
        route: &RouteTable,
        body: &[&[u8]],
        opts: &SchemalessOptions,
        known: &Known<'_>,
    ) -> ExecResult<Prepared> {
        let db_precision = Precision::from(route.precision);
        let mut out = SchemalessOutcome::default();
        // Parse, convert timestamps and group lines by STABLE, keeping line order.
        let now = route.precision.now();
        let mut by_stable: BTreeMap<Cow<'_, str>, Vec<(Line<'_>, i64)>> = BTreeMap::new();
        for r in tidal_lineproto::parse_parts(body) {
            let line = match r {
                Ok(l) => l,
                Err(e) => {
                    out.reject(
                        e.line,
                        format!("column {}: {} (in '{}')", e.column, e.kind, e.snippet),
                    );
                    continue;
                }
            };
            let stable = lower_case(&line.measurement);
            if !valid_stable_name(&stable) {
                out.reject(line.line_no, bad_stable_name(&line.measurement));
                continue;
            }
            let ts = match line_ts(&line, opts.precision, db_precision, now) {
                Ok(ts) => ts,
                Err(e) => {
                    out.reject(line.line_no, e);
                    continue;
                }
            };
            by_stable.entry(stable).or_default().push((line, ts));
        }
        let mut schemas: Vec<StableSchema> = Vec::new();
        let mut blocks: Vec<RowBlock> = Vec::new();
        // Subtable key -> (block, index in it): the lines of one tag set share one subtable,
        // named once per body.
        let mut subtables: HashMap<u128, (usize, u32)> = HashMap::new();
        // One row, reused for every line.
        let mut row: Vec<Value> = Vec::new();
        for (stable, lines) in by_stable {
            let schema = match self.reconcile(db, &stable, &lines).await {
                Ok(s) => s,
                Err(e) => {
                    // The STABLE cannot take these lines at all (for example a column limit):
                    // reject them, keep the other STABLEs.
                    for (l, _) in &lines {
                        out.reject(l.line_no, format!("STABLE '{stable}': {}", e.message));
                    }
                    continue;
                }
            };
            let types: Vec<DataType> = schema.columns.iter().map(|c| c.data_type).collect();
            let bi = blocks.len();
            blocks.push(RowBlock::new(schema.name.clone(), &types));
            let index = SchemaIndex::new(schema);
            // Tag sets as written -> subtable: the lines of one series repeat their tags in
            // one order, so most lines find their subtable with one fast hash of their tags
            // instead of the sorted, length-prefixed FNV hash that names it.
            let mut series: HashMap<TagSet<'_>, u32, foldhash::fast::RandomState> =
                HashMap::default();
            for (line, ts) in &lines {
                if let Err(msg) = cols_into(&index, line, *ts, &mut row) {
                    out.reject(line.line_no, msg);
                    continue;
                }
                if let Some(ti) = series.get(&TagSet(&line.tags)) {
                    blocks[bi].push_row(*ti, &row);
                    out.fields += line.fields.len() as u64;
                    continue;
                }
                let (key, named) = subtable_key(line, &stable, opts.child_table_tag.as_deref());
                if let Some(msg) = named.and_then(tidal_common::schema::table_name_too_long) {
                    out.reject(line.line_no, msg);
                    continue;
                }
                let ti = match subtables.get(&key) {
                    Some((b, t)) if *b == bi => *t,
                    Some((b, t)) => {
                        let (table, owner) = blocks
                            .get(*b)
                            .map(|o| (o.table(*t as usize), o.stable()))
                            .unwrap_or_default();
                        out.reject(
                            line.line_no,
                            format!("subtable '{table}' already takes rows of STABLE '{owner}'"),
                        );
                        continue;
                    }
                    None => {
                        let name = match named {
                            Some(n) => n.to_string(),
                            None => format!("t_{}", fnv128_hex(key)),
                        };
                        // Lines with the same tag set name the same subtable, so the tags
                        // of the first line stand for all of them.
                        let tags = if (known.contains)(&name) {
                            None
                        } else {
                            match tags_of(&index, line) {
                                Ok(t) => Some(t),
                                Err(msg) => {
                                    out.reject(line.line_no, msg);
                                    continue;
                                }
                            }
                        };
                        let t = blocks[bi].add_table(&name, tags);
                        subtables.insert(key, (bi, t));
                        t
                    }
                };
                series.insert(TagSet(&line.tags), ti);
                blocks[bi].push_row(ti, &row);
                out.fields += line.fields.len() as u64;
            }
            schemas.push(index.schema);
        }
        blocks.retain(|b| b.num_tables() > 0);
        out.errors.sort_by_key(|e| e.line);
        Ok(Prepared {
            outcome: out,
            schemas,
            blocks,
            vgroups: None,
        })
    }

    /// Makes sure STABLE `stable` exists with a column for every field and a tag for every
    /// tag key of `lines` (first type seen wins for a new column); returns its schema.
    async fn reconcile(
        &self,
        db: &str,
        stable: &str,
        lines: &[(Line<'_>, i64)],
    ) -> ExecResult<StableSchema> {
        let mut needs = Needs::default();
        // Exact keys already considered: most lines repeat the keys of the line before, and
        // this keeps the per-line cost to hash lookups.
        let mut seen: std::collections::HashSet<&str, foldhash::fast::RandomState> =
            std::collections::HashSet::default();
        for (l, _) in lines {
            if l.fields.iter().all(|(k, _)| seen.contains(k.as_ref()))
                && l.tags.iter().all(|(k, _)| seen.contains(k.as_ref()))
            {
                continue;
            }
            // A key used both as a field and as a tag in one body: the first use wins and
            // the other lines are rejected by `row_of`.
            let known = |needs: &Needs, k: &str| {
                needs
                    .columns
                    .iter()
                    .chain(needs.tags.iter())
                    .any(|c| c.name.eq_ignore_ascii_case(k))
            };
            for (k, v) in &l.fields {
                if !known(&needs, k) {
                    needs
                        .columns
                        .push(ColumnDef::new(k.as_ref(), column_type(v)));
                }
                seen.insert(k.as_ref());
            }
            for (k, _) in &l.tags {
                if !known(&needs, k) {
                    needs
                        .tags
                        .push(ColumnDef::new(k.as_ref(), DataType::VarChar(TAG_BYTES)));
                }
                seen.insert(k.as_ref());
            }
        }
        let mut attempt = 0;
        loop {
            attempt += 1;
            let schema = match self.client.stable(db, stable).await {
                Ok(s) => s,
                Err(e) if e.code == StatusCode::StableNotFound => {
                    let mut tags = needs.tags.clone();
                    if tags.is_empty() {
                        tags.push(ColumnDef::new(NULL_TAG, DataType::VarChar(1)));
                    }
                    let mut columns = vec![ColumnDef::new(TS_COLUMN, DataType::Timestamp)];
                    columns.extend(needs.columns.iter().cloned());
                    let fresh = StableSchema {
                        db: db.to_string(),
                        name: stable.to_string(),
                        version: SchemaVersion(1),
                        columns,
                        tags,
                    };
                    // IF NOT EXISTS: a concurrent creator wins and we extend its schema below.
                    self.client.create_stable(&fresh, true).await?
                }
                Err(e) => return Err(e.into()),
            };
            let add_columns: Vec<ColumnDef> = needs
                .columns
                .iter()
                .filter(|c| schema.column_index(&c.name).is_none())
                .filter(|c| schema.tag_index(&c.name).is_none())
                .cloned()
                .collect();
            let add_tags: Vec<ColumnDef> = needs
                .tags
                .iter()
                .filter(|c| schema.tag_index(&c.name).is_none())
                .filter(|c| schema.column_index(&c.name).is_none())
                .cloned()
                .collect();
            if add_columns.is_empty() && add_tags.is_empty() {
                return Ok(schema);
            }
            match self
                .client
                .alter_stable(db, stable, &add_columns, &add_tags)
                .await
            {
                Ok(s) => {
                    self.client.publish_schema(db, &s).await?;
                    return Ok(s);
                }
                Err(e) if attempt < SCHEMA_ATTEMPTS_MAX => {
                    // Most likely another writer added the same column first: re-read.
                    tracing::debug!(%e, stable, "ALTER STABLE failed; re-reading the schema");
                    self.client.refresh_stable(db, stable).await?;
                }
                Err(e) => return Err(ExecError::from(e)),
            }
        }
    }
}

/// Name → position lookups of one schema. Exact names hit the maps; other spellings fall
/// back to the schema's case-insensitive search.
struct SchemaIndex {
    schema: StableSchema,
    columns: HashMap<String, usize, foldhash::fast::RandomState>,
    tags: HashMap<String, usize, foldhash::fast::RandomState>,
}

impl SchemaIndex {
    fn new(schema: StableSchema) -> SchemaIndex {
        SchemaIndex {
            columns: schema
                .columns
                .iter()
                .enumerate()
                .map(|(i, c)| (c.name.clone(), i))
                .collect(),
            tags: schema
                .tags
                .iter()
                .enumerate()
                .map(|(i, c)| (c.name.clone(), i))
                .collect(),
            schema,
        }
    }

    fn column(&self, k: &str) -> Option<usize> {
        self.columns
            .get(k)
            .copied()
            .or_else(|| self.schema.column_index(k))
    }

    fn tag(&self, k: &str) -> Option<usize> {
        self.tags
            .get(k)
            .copied()
            .or_else(|| self.schema.tag_index(k))
    }
}

/// The measurement lower-cased, borrowed when it already is (the usual case).
fn lower_case<'a>(s: &Cow<'a, str>) -> Cow<'a, str> {
    if s.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(s.to_ascii_lowercase())
    } else {
        s.clone()
    }
}

/// A line as one row of the schema: the column values (NULL where the line has no field);
/// an error names the first field that does not fit.
#[cfg(test)]
fn cols_of(index: &SchemaIndex, line: &Line<'_>, ts: i64) -> Result<Vec<Value>, String> {
    let mut cols = Vec::new();
    cols_into(index, line, ts, &mut cols)?;
    Ok(cols)
}

/// [`cols_of`] into `cols` (resized to the schema's width), so that one vector serves every
/// line of a body.
fn cols_into(
    index: &SchemaIndex,
    line: &Line<'_>,
    ts: i64,
    cols: &mut Vec<Value>,
) -> Result<(), String> {
    let schema = &index.schema;
    cols.clear();
    cols.resize(schema.columns.len(), Value::Null);
    if let Some(c) = cols.first_mut() {
        *c = Value::Timestamp(ts);
    }
    for (k, v) in &line.fields {
        let Some((i, def)) = index
            .column(k)
            .and_then(|i| schema.columns.get(i).map(|d| (i, d)))
        else {
            return Err(format!(
                "field '{k}' is a tag of STABLE '{}', not a column",
                schema.name
            ));
        };
        let value = field_to_value(v, def.data_type).map_err(|e| {
            format!(
                "field '{k}' {e}: type conflict with column '{}' {} of STABLE '{}'",
                def.name, def.data_type, schema.name
            )
        })?;
        if let Some(slot) = cols.get_mut(i) {
            *slot = value;
        }
    }
    Ok(())
}

/// [`cols_into`] for a schema that may lack some of the line's keys, pushed straight onto
/// `cols` (columns of the STABLE's types): `None` when a field is neither a column nor a tag
/// (the schema must grow first), else what `cols_into` gives: the row, one value pushed onto
/// each column (NULL where the line has no field), or the error of the first field that does
/// not fit. Anything but a row leaves `cols` as it was.
fn row_if_known(
    st: &mut FastStable,
    line: &Line<'_>,
    ts: i64,
    cols: &mut [Column],
) -> Option<Result<(), String>> {
    let len = cols.first().map_or(0, Column::len);
    let converted = push_if_known(st, line, ts, cols, len);
    if !matches!(converted, Some(Ok(()))) {
        for c in cols.iter_mut() {
            c.truncate(len);
        }
    }
    converted
}

/// The row of a line as [`RowBlock::push_row_with`] takes it: read by `st`'s shape when
/// `shaped` (the fields it has, its values in `values`), else from `line`'s fields
/// ([`row_of`]).
fn fill_of<'a>(
    st: &'a mut FastStable,
    line: &'a Line<'_>,
    values: &'a [u64],
    shaped: Option<u64>,
    ts: i64,
) -> impl FnOnce(&mut [Column]) -> Result<bool, String> + 'a {
    move |cols| match (shaped, &st.shape) {
        (Some(present), Some(shape)) => shape.push(values, present, ts, cols),
        // Not reached: a line is read by the shape its STABLE has. Sent to the slow path.
        (Some(_), None) => Ok(false),
        (None, _) => row_of(st, line, ts)(cols),
    }
}

/// Fields of a line: those it has of its shape when read by one, else its field list's.
fn fields_of(line: &Line<'_>, shaped: Option<u64>) -> u64 {
    match shaped {
        Some(present) => u64::from(present.count_ones()),
        None => line.fields.len() as u64,
    }
}

/// `line`'s row as [`RowBlock::push_row_with`] takes it ([`push_if_known`] onto the block's
/// columns): `Ok(false)` for a key the schema lacks, which sends the body to the slow path.
fn row_of<'a>(
    st: &'a mut FastStable,
    line: &'a Line<'_>,
    ts: i64,
) -> impl FnOnce(&mut [Column]) -> Result<bool, String> + 'a {
    move |cols| {
        let len = cols.first().map_or(0, Column::len);
        match push_if_known(st, line, ts, cols, len) {
            Some(Ok(())) => Ok(true),
            Some(Err(msg)) => Err(msg),
            None => Ok(false),
        }
    }
}

/// [`row_if_known`] without putting `cols` (`len` rows long) back on failure.
fn push_if_known(
    st: &mut FastStable,
    line: &Line<'_>,
    ts: i64,
    cols: &mut [Column],
    len: usize,
) -> Option<Result<(), String>> {
    if cols.len() != st.index.schema.columns.len() {
        return Some(Err(format!(
            "{} columns for the {} of STABLE '{}'",
            cols.len(),
            st.index.schema.columns.len(),
            st.index.schema.name
        )));
    }
    // Which columns this line has set: a column whose stamp is not this line's gets NULL.
    st.stamp = st.stamp.wrapping_add(1);
    if st.stamp == 0 || st.stamps.len() != cols.len() {
        st.stamps.clear();
        st.stamps.resize(cols.len(), 0);
        st.stamp = 1;
    }
    let stamp = st.stamp;
    if let (Some(c), Some(s)) = (cols.first_mut(), st.stamps.first_mut()) {
        c.push(&Value::Timestamp(ts));
        *s = stamp;
    }
    // Every key is looked at, even after an error: a line the slow path rejects still
    // adds its keys to the schema there.
    let mut first_error: Option<String> = None;
    for (pos, (k, v)) in line.fields.iter().enumerate() {
        let column = st.column(pos, k);
        let index = &st.index;
        let schema = &index.schema;
        match column.and_then(|i| schema.columns.get(i).map(|d| (i, d))) {
            Some((i, def)) => {
                if first_error.is_some() {
                    continue;
                }
                let (Some(col), Some(s)) = (cols.get_mut(i), st.stamps.get_mut(i)) else {
                    continue;
                };
                // Two keys of one column (spelled apart only by case): the later one wins.
                if *s == stamp {
                    col.truncate(len);
                }
                match push_field(col, v, def.data_type) {
                    Ok(()) => *s = stamp,
                    Err(e) => {
                        first_error = Some(format!(
                            "field '{k}' {e}: type conflict with column '{}' {} of STABLE '{}'",
                            def.name, def.data_type, schema.name
                        ))
                    }
                }
            }
            None => {
                index.tag(k)?;
                first_error.get_or_insert_with(|| {
                    format!(
                        "field '{k}' is a tag of STABLE '{}', not a column",
                        schema.name
                    )
                });
            }
        }
    }
    if let Some(e) = first_error {
        return Some(Err(e));
    }
    for (c, s) in cols.iter_mut().zip(&st.stamps) {
        if *s != stamp {
            c.push(&Value::Null);
        }
    }
    Some(Ok(()))
}

/// `field_to_value(v, t)` pushed onto `col`: the types schemaless writes create take their
/// values without a `Value` in between.
fn push_field(col: &mut Column, v: &FieldValue<'_>, t: DataType) -> Result<(), String> {
    let pushed = match (v, t, &mut col.data) {
        (FieldValue::Float(f), DataType::Double, ColumnData::Float(d)) => {
            d.push(*f);
            true
        }
        (FieldValue::Int(i), DataType::BigInt, ColumnData::Int(d)) => {
            d.push(*i);
            true
        }
        (FieldValue::UInt(u), DataType::UBigInt, ColumnData::UInt(d)) => {
            d.push(*u);
            true
        }
        (FieldValue::Bool(b), DataType::Bool, ColumnData::Bool(d)) => {
            d.push(*b);
            true
        }
        _ => false,
    };
    if pushed {
        if !col.nulls.is_empty() {
            col.nulls.push(false);
        }
        return Ok(());
    }
    col.push(&field_to_value(v, t)?);
    Ok(())
}

/// The tag values of a line in the schema's tag order (NULL for tags it does not have).
fn tags_of(index: &SchemaIndex, line: &Line<'_>) -> Result<Vec<Value>, String> {
    let schema = &index.schema;
    let mut tags = vec![Value::Null; schema.tags.len()];
    for (k, v) in &line.tags {
        let Some((i, def)) = index
            .tag(k)
            .and_then(|i| schema.tags.get(i).map(|d| (i, d)))
        else {
            return Err(format!(
                "tag '{k}' is a column of STABLE '{}', not a tag",
                schema.name
            ));
        };
        let value = def
            .data_type
            .coerce(Value::Str(v.to_string()))
            .map_err(|e| format!("tag '{k}': {e}"))?;
        if let Some(slot) = tags.get_mut(i) {
            *slot = value;
        }
    }
    Ok(tags)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tidal_lineproto::{parse_line, parse_lines};

    fn line(s: &str) -> Line<'_> {
        parse_line(s.as_bytes()).unwrap().unwrap()
    }

    #[test]
    fn subtable_keys_name_subtables_as_subtable_name_does() {
        for l in [
            "m f=1",
            "m,a=1,b=2 f=1",
            "m,b=2,a=1 f=1",
            "m,ab=c f=1",
            "m,a=bc f=1",
            "m,tname=dev1,a=1 f=1",
        ] {
            let l = line(l);
            let (key, named) = subtable_key(&l, "m", None);
            assert!(named.is_none());
            assert_eq!(
                format!("t_{}", fnv128_hex(key)),
                subtable_name(&l, "m", None)
            );
        }
        let l = line("m,tname=dev1,a=1 f=1");
        assert_eq!(subtable_key(&l, "m", Some("tname")).1, Some("dev1"));
        let many: String = (0..40).map(|i| format!(",k{i}=v{i}")).collect();
        let text = format!("m{many} f=1");
        let l = line(&text);
        assert_eq!(
            format!("t_{}", fnv128_hex(subtable_key(&l, "m", None).0)),
            subtable_name(&l, "m", None)
        );
    }

    #[test]
    fn known_subtables_keys_name_user_database_and_table() {
        let known = KnownSubtables::default();
        known.insert_all(&[KnownSubtables::key("u", "db", "t1")]);
        assert!(known.contains("u", "db", "t1"));
        assert!(!known.contains("u", "db2", "t1"));
        assert!(!known.contains("u2", "db", "t1"));
        assert!(!known.contains("u", "db", "t2"));
        known.clear();
        assert!(!known.contains("u", "db", "t1"));
    }

    #[test]
    fn hex_names_match_the_formatter() {
        let mut x: u128 = 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210;
        for _ in 0..100 {
            assert_eq!(fnv128_hex(x), format!("{x:032x}"));
            x = x.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835) ^ (x >> 7);
        }
        assert_eq!(fnv128_hex(0), "0".repeat(32));
        assert_eq!(fnv128_hex(u128::MAX), "f".repeat(32));
    }

    #[test]
    fn series_keys_remember_series_and_start_over_when_full() {
        // Room for one STABLE name and three entries.
        let mut keys = SeriesKeys::new(4 * SeriesKeys::ENTRY_BYTES + 1);
        let series: Vec<u128> = (0..4)
            .map(|i| series_hash(format!("m,a=val{i}").as_bytes()))
            .collect();
        for (i, k) in series.iter().take(3).enumerate() {
            keys.insert(*k, i as u128, "m");
        }
        let key_of = |k: &SeriesKeys, s: u128| k.get(s).map(|e| e.key);
        assert_eq!(key_of(&keys, series[1]), Some(1));
        assert_eq!(
            key_of(&keys, series_hash(b"m,a=val")),
            None,
            "a prefix is another series"
        );
        assert_eq!(
            keys.insert(series[1], 99, "m"),
            1,
            "its entry is where it was"
        );
        assert_eq!(key_of(&keys, series[1]), Some(1), "an entry never changes");
        assert_eq!(keys.stables, ["m"], "a STABLE is kept once");
        assert_eq!(keys.insert(series[3], 3, "m"), 0, "full: started over");
        assert_eq!(key_of(&keys, series[3]), Some(3));
        assert_eq!(key_of(&keys, series[0]), None);
        assert_eq!(keys.find(series[0]), None);
        assert_eq!(keys.entries.len(), 1);
        assert!(keys.bytes <= keys.bytes_max);
        // Entries name their STABLE.
        let mut keys = SeriesKeys::new(1 << 20);
        keys.insert(series[0], 7, "m");
        keys.insert(series[1], 8, "n");
        keys.insert(series[2], 9, "m");
        assert_eq!(keys.stables, ["m", "n"]);
        let stable_of = |k: &SeriesKeys, s: u128| k.get(s).map(|e| e.stable);
        assert_eq!(stable_of(&keys, series[1]), Some(1));
        assert_eq!(stable_of(&keys, series[2]), Some(0));
        assert_eq!(keys.series_lo.len(), keys.entries.len());
    }

    /// Series one map resolved are found by another after both exchanged with the journal,
    /// with the same subtable key and STABLE; a map does not read its own entries back, and
    /// what it read is not written again.
    #[test]
    fn series_resolved_by_one_map_are_read_by_the_others() {
        let journal = std::sync::Mutex::new(SeriesJournal::new());
        let (mut a, mut b) = (SeriesKeys::new(1 << 20), SeriesKeys::new(1 << 20));
        let series: Vec<u128> = (0..10)
            .map(|i| series_hash(format!("m,a={i}").as_bytes()))
            .collect();
        for (i, s) in series.iter().enumerate() {
            a.remember(*s, 100 + i as u128, if i % 2 == 0 { "m" } else { "n" });
        }
        assert!(b.find(series[3]).is_none());
        b.exchange(&journal);
        assert!(b.entries.is_empty(), "nothing written yet");
        a.exchange(&journal);
        assert!(a.fresh.is_empty());
        b.exchange(&journal);
        for (i, s) in series.iter().enumerate() {
            let at = b.find(*s).expect("read from the journal");
            let e = &b.entries[at];
            assert_eq!(e.key, 100 + i as u128);
            assert_eq!(
                b.stables[e.stable as usize],
                if i % 2 == 0 { "m" } else { "n" }
            );
        }
        assert!(b.fresh.is_empty(), "what was read is not written again");
        let other = series_hash(b"m,a=other");
        b.remember(other, 7, "m");
        b.exchange(&journal);
        a.exchange(&journal);
        assert_eq!(a.entries.len(), 11, "its own entries are not read back");
        assert_eq!(a.find(other).map(|at| a.entries[at].key), Some(7));
        assert_eq!(
            journal.lock().map(|j| j.entries.len()).unwrap_or(0),
            11,
            "each series written once"
        );
        // A map takes only what fits, rather than starting over.
        let mut small = SeriesKeys::new(6 * SeriesKeys::ENTRY_BYTES);
        small.remember(series_hash(b"m,a=own"), 1, "m");
        small.exchange(&journal);
        assert_eq!(small.clears, 0);
        assert!(small.find(series_hash(b"m,a=own")).is_some());
        assert!(small.entries.len() > 1 && small.bytes <= small.bytes_max);
    }

    /// The journal keeps the newest entries: a reader that fell behind reads those held and
    /// goes on from the end.
    #[test]
    fn the_series_journal_is_bounded() {
        let mut j = SeriesJournal::new();
        let n = SERIES_JOURNAL_ENTRIES_MAX + 10;
        j.write(1, (0..n as u128).map(|i| (i, i, "m")));
        assert_eq!(j.entries.len(), SERIES_JOURNAL_ENTRIES_MAX);
        let (new, names, next) = j.read(2, 0);
        assert_eq!(new.len(), SERIES_JOURNAL_ENTRIES_MAX);
        assert_eq!(new[0].series, 10, "the oldest went first");
        assert_eq!(names, ["m"]);
        assert_eq!(next, n as u64);
        let (new, _, next) = j.read(2, next);
        assert!(new.is_empty());
        assert_eq!(next, n as u64);
        assert!(
            j.read(1, 0).0.is_empty(),
            "the writer reads none of its own"
        );
        // Past the most STABLE names it starts over.
        for i in 1..SERIES_JOURNAL_STABLES_MAX {
            j.write(1, [(1, 1, format!("s{i}").as_str())]);
        }
        assert_eq!(j.stables.len(), SERIES_JOURNAL_STABLES_MAX);
        j.write(1, [(2, 2, "another")]);
        assert_eq!(j.stables, ["another"]);
        let (new, names, _) = j.read(2, 0);
        assert_eq!(new.len(), 1);
        assert_eq!(names[new[0].stable as usize], "another");
    }

    /// `SeriesKeys::find` scans the low halves of the keys near its cursor but answers by
    /// the whole key: series that share a low half, in any order, each find their own entry,
    /// and a series not there is not found.
    #[test]
    fn series_sharing_a_low_half_find_their_own_entries() {
        let mut keys = SeriesKeys::new(1 << 20);
        let twins: Vec<u128> = (1..=4u128).map(|hi| (hi << 64) | 0xabcd).collect();
        let others: Vec<u128> = (0..100)
            .map(|i| series_hash(format!("m,a={i}").as_bytes()))
            .collect();
        for (i, s) in twins.iter().chain(&others).enumerate() {
            assert_eq!(keys.insert(*s, i as u128, "m"), i);
        }
        for order in [[0, 1, 2, 3], [3, 2, 1, 0], [1, 3, 0, 2]] {
            for i in order {
                assert_eq!(keys.find(twins[i]), Some(i), "twin {i}");
                assert_eq!(keys.find(others[i]), Some(4 + i));
            }
        }
        assert_eq!(keys.find((5u128 << 64) | 0xabcd), None);
        for (i, s) in others.iter().enumerate().rev() {
            assert_eq!(keys.find(*s), Some(4 + i));
        }
    }

    #[test]
    fn series_are_found_in_order_and_out_of_it() {
        let mut keys = SeriesKeys::new(1 << 20);
        let series: Vec<u128> = (0..50)
            .map(|i| series_hash(format!("m,a=val{i}").as_bytes()))
            .collect();
        for (i, s) in series.iter().enumerate() {
            assert_eq!(keys.insert(*s, i as u128, "m"), i);
        }
        let key_found = |k: &mut SeriesKeys, s: u128| {
            let at = k.find(s)?;
            k.entries.get(at).map(|e| (at, e.key))
        };
        // In the order they were made (the guess hits), backwards and skipping (it misses),
        // and the first again after the last: every series is its own.
        let orders: [Vec<usize>; 3] = [
            (0..50).collect(),
            (0..50).rev().collect(),
            (0..50).step_by(3).chain([0, 1, 49, 0]).collect(),
        ];
        for order in orders {
            for i in order {
                assert_eq!(key_found(&mut keys, series[i]), Some((i, i as u128)));
            }
        }
        assert_eq!(key_found(&mut keys, series_hash(b"m,a=val50")), None);
        // An entry handed out earlier is checked against the series asked for.
        assert_eq!(keys.entry_at(3, series[3]).map(|e| e.key), Some(3));
        assert_eq!(keys.entry_at(3, series[4]).map(|e| e.key), Some(4));
        assert_eq!(keys.entry_at(usize::MAX, series[5]).map(|e| e.key), Some(5));
        assert!(keys.entry_at(3, series_hash(b"m,a=val50")).is_none());
    }

    #[test]
    fn series_sharing_a_subtable_are_marked() {
        let mut keys = SeriesKeys::new(1 << 20);
        let s: Vec<u128> = (0..4)
            .map(|i| series_hash(format!("m,a={i}").as_bytes()))
            .collect();
        keys.insert(s[0], 10, "m");
        keys.insert(s[1], 11, "m");
        assert!(!keys.get(s[0]).is_some_and(|e| e.shared));
        // A second spelling of subtable 10: both are marked, the other series not.
        keys.insert(s[2], 10, "m");
        let shared = |k: &SeriesKeys, x: u128| k.get(x).map(|e| e.shared);
        assert_eq!(shared(&keys, s[0]), Some(true));
        assert_eq!(shared(&keys, s[2]), Some(true));
        assert_eq!(shared(&keys, s[1]), Some(false));
        // Starting over forgets them.
        let mut small = SeriesKeys::new(2 * SeriesKeys::ENTRY_BYTES + 1);
        small.insert(s[0], 10, "m");
        small.insert(s[2], 10, "m");
        assert_eq!(shared(&small, s[0]), None, "started over");
        assert_eq!(shared(&small, s[2]), Some(false));
    }

    #[test]
    fn series_hashes_tell_series_apart() {
        let keys = [
            "m",
            "m,a=1",
            "m,a=1 ",
            "m,a=2",
            "n,a=1",
            "m,a=1,b=2",
            "m,b=2,a=1",
        ];
        let hashes: HashSet<u128> = keys.iter().map(|k| series_hash(k.as_bytes())).collect();
        assert_eq!(hashes.len(), keys.len());
        assert_eq!(series_hash(b"m,a=1"), series_hash(b"m,a=1"));
    }

    #[test]
    fn remembered_series_keys_are_the_computed_ones() {
        // Twice each: the second answer comes from this thread's map.
        let body = "m,b=2,a=1 f=1\nm,a=1,b=2 f=2\nm,b=2,a=1 f=3\nm,a=1,b=2 f=4\nm f=1\nm f=2\n";
        let mut lines = parse_lines(body.as_bytes());
        let mut l = Line::default();
        let mut seen = Vec::new();
        let nothing = |_: &str| false;
        let known = Known {
            contains: &nothing,
            scope: None,
        };
        while let Some(r) = lines.next_into(&mut l) {
            let series = series_hash(r.expect("parses"));
            let (sub, _) = SeriesKeys::resolve(series, MapHint::Search, &l, "m", "db", &known);
            assert_eq!(sub.key, subtable_key(&l, "m", None).0);
            assert_eq!(sub.name.as_str(), subtable_name(&l, "m", None));
            assert_eq!(sub.route_hash, hash_table_name("db", sub.name.as_str()));
            // The hash follows the database of the write.
            let (other, _) = SeriesKeys::resolve(series, MapHint::Search, &l, "m", "db2", &known);
            assert_eq!(other.route_hash, hash_table_name("db2", sub.name.as_str()));
            seen.push(sub.key);
        }
        assert_eq!(seen.len(), 6);
        assert!(
            seen[..4].iter().all(|k| *k == seen[0]),
            "tag order does not matter"
        );
        assert_ne!(seen[4], seen[0]);
        assert_eq!(seen[4], seen[5]);
    }

    /// What a line's lookup tells `resolve` about the thread's map is checked before use:
    /// an index that is not the series' (the map started over since), or "absent" from
    /// another thread's map, leads to a search, never to a wrong or a second entry.
    #[test]
    fn resolve_checks_the_lookups_hint() {
        let nothing = |_: &str| false;
        let known = Known {
            contains: &nothing,
            scope: None,
        };
        let mut l = Line::default();
        let mut keys = Vec::new();
        for text in ["m,a=1 f=1\n", "m,a=2 f=1\n"] {
            let mut lines = parse_lines(text.as_bytes());
            let series = series_hash(lines.next_into(&mut l).expect("a line").expect("parses"));
            let hint = match SeriesKeys::thread_series(series, "db", &known, 1, |_| Some(0)) {
                ThreadLook::Absent(id) => MapHint::Absent(id),
                _ => panic!("a new series is absent from the map"),
            };
            let (sub, at) = SeriesKeys::resolve(series, hint, &l, "m", "db", &known);
            assert_eq!(sub.key, subtable_key(&l, "m", None).0);
            keys.push((series, sub.key, at, l.clone()));
        }
        let entries = || SERIES_KEYS.with(|k| k.borrow().entries.len());
        assert_eq!(entries(), 2);
        let (series, key, at, line) = &keys[0];
        let other_at = keys[1].2;
        assert!(matches!(
            SeriesKeys::thread_series(*series, "db", &known, 1, |_| Some(0)),
            ThreadLook::Held(a) if a == *at
        ));
        for hint in [
            MapHint::At(*at),
            MapHint::At(other_at),
            MapHint::At(usize::MAX),
            MapHint::Absent(u32::MAX),
            MapHint::Search,
        ] {
            let (sub, found) = SeriesKeys::resolve(*series, hint, line, "m", "db", &known);
            assert_eq!((sub.key, found), (*key, *at), "{hint:?}");
        }
        assert_eq!(entries(), 2, "no second entry");
    }

    #[test]
    fn known_answers_are_remembered_per_scope_and_database() {
        use std::sync::atomic::AtomicUsize;
        let set = KnownSubtables::default();
        let asked = AtomicUsize::new(0);
        let body = "known_m,a=1 f=1\n";
        let mut lines = parse_lines(body.as_bytes());
        let mut l = Line::default();
        let series = series_hash(lines.next_into(&mut l).expect("a line").expect("parses"));
        let name = subtable_name(&l, "known_m", None);
        let resolve = |user: &str, db: &str| {
            let contains = |t: &str| {
                asked.fetch_add(1, Ordering::Relaxed);
                set.contains(user, db, t)
            };
            let known = Known {
                contains: &contains,
                scope: Some(KnownScope {
                    generation: set.generation(),
                    user,
                }),
            };
            SeriesKeys::resolve(series, MapHint::Search, &l, "known_m", db, &known).0
        };
        assert!(
            !resolve("u", "db").known,
            "a series new to the map is not asked: its subtable is taken to be new"
        );
        assert_eq!(asked.load(Ordering::Relaxed), 0);
        assert!(!resolve("u", "db").known, "not in the set yet");
        assert!(!resolve("u", "db").known, "a no is asked again");
        assert_eq!(asked.load(Ordering::Relaxed), 2);
        set.insert_all(&[KnownSubtables::key("u", "db", &name)]);
        assert!(resolve("u", "db").known);
        assert!(resolve("u", "db").known);
        assert_eq!(asked.load(Ordering::Relaxed), 3, "a yes is remembered");
        // Another user or database asks (and answers) for itself.
        assert!(!resolve("u2", "db").known);
        assert!(!resolve("u", "db2").known);
        assert_eq!(asked.load(Ordering::Relaxed), 5);
        assert!(resolve("u", "db").known);
        assert_eq!(
            asked.load(Ordering::Relaxed),
            6,
            "asked again after another scope"
        );
        assert!(resolve("u", "db").known);
        assert_eq!(asked.load(Ordering::Relaxed), 6);
        // A remembered yes lets a line skip its tags, when its STABLE is in the body.
        let scope = |user| {
            Some(KnownScope {
                generation: set.generation(),
                user,
            })
        };
        let in_body = |name: &str| (name == "known_m").then_some(5usize);
        let look_as = |series,
                       db,
                       scope: Option<KnownScope<'_>>,
                       body,
                       in_body: &dyn Fn(&str) -> Option<usize>| {
            let user = scope.map_or("", |s| s.user);
            let contains = |t: &str| {
                asked.fetch_add(1, Ordering::Relaxed);
                set.contains(user, db, t)
            };
            let known = Known {
                contains: &contains,
                scope,
            };
            SeriesKeys::thread_series(series, db, &known, body, in_body)
        };
        let look = |series, db, scope, body| look_as(series, db, scope, body, &in_body);
        let ThreadLook::Known(sub, si, at, shared) = look(series, "db", scope("u"), 1) else {
            panic!("known");
        };
        assert_eq!(asked.load(Ordering::Relaxed), 6, "remembered, not asked");
        assert_eq!(si, 5);
        assert!(!shared, "one spelling of its subtable");
        assert!(sub.known);
        assert_eq!(sub.name.as_str(), name);
        assert_eq!(sub.route_hash, hash_table_name("db", &name));
        assert!(
            matches!(look_as(series, "db", scope("u"), 1, &|_| None), ThreadLook::Held(a) if a == at),
            "its STABLE is not in the body"
        );
        let other = series_hash(b"known_m,a=2");
        assert!(
            matches!(look(other, "db", scope("u"), 1), ThreadLook::Absent(_)),
            "not in the map"
        );
        assert_eq!(asked.load(Ordering::Relaxed), 6);
        // Other scopes are asked, and answer no.
        assert!(matches!(
            look(series, "db", scope("u2"), 1),
            ThreadLook::Held(_)
        ));
        assert!(matches!(
            look(series, "db2", scope("u"), 1),
            ThreadLook::Held(_)
        ));
        assert_eq!(asked.load(Ordering::Relaxed), 8);
        assert!(
            matches!(look(series, "db", None, 1), ThreadLook::Held(_)),
            "no scope: never remembered"
        );
        // Where a body put the series' rows is that body's alone.
        let slot = BodySlot {
            body: 7,
            stable: 1,
            block: 2,
            table: 3,
        };
        assert!(SeriesKeys::note_body(at, series, slot));
        assert!(!SeriesKeys::note_body(at, other, slot), "not in the map");
        assert!(
            SeriesKeys::note_body(usize::MAX, series, slot),
            "found by its key when not where it was"
        );
        assert!(matches!(look(series, "db", None, 7), ThreadLook::InBody(s) if s == slot));
        // Other scopes asked meanwhile: the yes is asked for again, then remembered.
        assert!(matches!(
            look(series, "db", scope("u"), 8),
            ThreadLook::Known(..)
        ));
        assert_eq!(asked.load(Ordering::Relaxed), 9);
        assert!(matches!(
            look(series, "db", scope("u"), 8),
            ThreadLook::Known(..)
        ));
        assert!(resolve("u", "db").known);
        assert_eq!(asked.load(Ordering::Relaxed), 9);
        // The set forgot (a known subtable was gone): the remembered yes no longer holds.
        set.clear();
        assert!(matches!(
            look(series, "db", scope("u"), 8),
            ThreadLook::Held(_)
        ));
        assert!(!resolve("u", "db").known);
        assert_eq!(asked.load(Ordering::Relaxed), 11);
        // Known again: the thread's map learns it on the next look, without a resolve.
        set.insert_all(&[KnownSubtables::key("u", "db", &name)]);
        assert!(matches!(
            look(series, "db", scope("u"), 9),
            ThreadLook::Known(..)
        ));
        assert_eq!(asked.load(Ordering::Relaxed), 12);
    }

    #[test]
    fn subtable_name_is_independent_of_tag_order() {
        let a = subtable_name(&line("m,a=1,b=2 f=1"), "m", None);
        let b = subtable_name(&line("m,b=2,a=1 f=1"), "m", None);
        assert_eq!(a, b);
        assert!(a.starts_with("t_") && a.len() == 34, "{a}");
        assert_ne!(a, subtable_name(&line("m,a=1,b=3 f=1"), "m", None));
        assert_ne!(a, subtable_name(&line("n,a=1,b=2 f=1"), "n", None));
        // Length prefixes: moving a byte between key and value changes the name.
        assert_ne!(
            subtable_name(&line("m,ab=c f=1"), "m", None),
            subtable_name(&line("m,a=bc f=1"), "m", None)
        );
        // Stable across builds: a fixed expected value.
        assert_eq!(
            subtable_name(&line("m f=1"), "m", None),
            subtable_name(&line("m f=2"), "m", None)
        );
        assert_eq!(
            subtable_name(&line("m,tname=dev1,a=1 f=1"), "m", Some("tname")),
            "dev1"
        );
        assert!(subtable_name(&line("m,a=1 f=1"), "m", Some("tname")).starts_with("t_"));
    }

    fn schema() -> StableSchema {
        StableSchema {
            db: "d".into(),
            name: "m".into(),
            version: SchemaVersion(1),
            columns: vec![
                ColumnDef::new("ts", DataType::Timestamp),
                ColumnDef::new("f", DataType::Double),
                ColumnDef::new("n", DataType::BigInt),
                ColumnDef::new("s", DataType::VarChar(4)),
            ],
            tags: vec![ColumnDef::new("host", DataType::VarChar(3))],
        }
    }

    #[test]
    fn rows_follow_the_schema_and_conflicts_are_named() {
        let s = schema();
        let ix = SchemaIndex::new(s);
        let l = line("m,host=a n=3i,f=1.5");
        let (cols, tags) = (cols_of(&ix, &l, 7).unwrap(), tags_of(&ix, &l).unwrap());
        assert_eq!(
            cols,
            vec![
                Value::Timestamp(7),
                Value::Float(1.5),
                Value::Int(3),
                Value::Null
            ]
        );
        assert_eq!(tags, vec![Value::Str("a".into())]);
        let e = cols_of(&ix, &line("m f=1i"), 0).unwrap_err();
        assert!(
            e.contains("field 'f' is integer but the column is DOUBLE"),
            "{e}"
        );
        let e = cols_of(&ix, &line("m s=\"toolong\""), 0).unwrap_err();
        assert!(e.contains("longer than VARCHAR(4)"), "{e}");
        let e = tags_of(&ix, &line("m,host=abcd f=1")).unwrap_err();
        assert!(e.contains("tag 'host'"), "{e}");
        let e = tags_of(&ix, &line("m,f=x n=1i")).unwrap_err();
        assert!(e.contains("not a tag"), "{e}");
    }

    /// The fast path's rows, pushed straight onto columns, are the rows `cols_of` gives, and
    /// a line that does not convert leaves the columns as they were.
    #[test]
    fn rows_pushed_onto_columns_are_the_rows_of_the_schema() {
        let ix = SchemaIndex::new(schema());
        let mut st = FastStable::new("m".into(), schema(), 4);
        let mut cols = st.template.clone();
        let mut want = RowBlock::like("m", &st.template, 0);
        let t = want.add_table("x", None);
        let lines = [
            "m f=1.5,n=3i",
            "m s=\"ab\"",
            "m n=4i,f=2,s=\"cd\"",
            "m f=1i",
            "m F=7,f=8",
            "m s=\"toolong\",f=1",
            "m f=9,host=\"x\"",
            "m n=5i",
            "m f=1,n=2.5",
            "m f=3",
        ];
        for (i, text) in lines.iter().enumerate() {
            let l = line(text);
            let ts = i as i64;
            let before = cols.clone();
            let got = row_if_known(&mut st, &l, ts, &mut cols).expect("known keys");
            match cols_of(&ix, &l, ts) {
                Ok(row) => {
                    assert_eq!(got, Ok(()), "{text}");
                    assert!(want.push_row(t, &row));
                }
                Err(e) => {
                    assert_eq!(got, Err(e), "{text}");
                    assert_eq!(cols, before, "{text}: a rejected line leaves no trace");
                }
            }
            assert_eq!(cols, want.columns(), "{text}");
        }
        let before = cols.clone();
        assert!(row_if_known(&mut st, &line("m f=1,zz=2"), 0, &mut cols).is_none());
        assert_eq!(cols, before, "an unknown key leaves no trace");
    }

    #[test]
    fn field_key_memo_follows_reordered_keys() {
        let mut st = FastStable::new("m".into(), schema(), 4);
        let ix = SchemaIndex::new(schema());
        for keys in [
            vec!["f", "n", "s"],
            vec!["n", "f"],
            vec!["s", "n", "f"],
            vec!["F", "x", "n"],
            vec!["f"],
        ] {
            for (pos, k) in keys.iter().enumerate() {
                assert_eq!(st.column(pos, k), ix.column(k), "{keys:?} at {pos}");
            }
        }
    }

    #[test]
    fn stable_names() {
        assert!(valid_stable_name("readings"));
        assert!(valid_stable_name("_x1"));
        assert!(!valid_stable_name("1x"));
        assert!(!valid_stable_name("cpu-load"));
        assert!(!valid_stable_name(""));
    }
}
