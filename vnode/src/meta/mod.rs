//! The vnode's catalog: STABLE schemas it has seen, its subtables with their tags, and the
//! next subtable uid.
//!
//! Owns: name -> table, uid -> table, stable -> schema. Invariants: `by_uid` holds every live
//! subtable once (shared `Arc`s, so a lookup by uid — the hot path of LAST_ROW over many
//! subtables — is one hash probe and listing tables copies no names or tags) and `by_name`
//! exactly the same tables, each one's uid and STABLE (see [`names`]); listings sort by name
//! when asked ([`Meta::sorted_tables`]); every STABLE a table names has an id in
//! `stable_ids`, never reused; every table's stable is in `stables`; `next_uid` is greater
//! than every uid ever handed out (also of dropped tables), so uids are never reused. The
//! catalog is made durable by the WAL (creates/drops/schema records) and by the snapshot in
//! the manifest.

mod names;

use crate::codec::{DResult, Reader, Writer};
pub use names::{NameIndex, NameSlot, StableId};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tidal_common::near::NearCursor;
use tidal_common::{StableSchema, TableMeta, TableUid, UidHash, Value};

#[derive(Default, Clone)]
pub struct Meta {
    /// Shared (`Arc`): every query fragment reads its STABLE's schema.
    pub stables: BTreeMap<String, Arc<StableSchema>>,
    /// The same tables hashed by name, to their uid and STABLE: the write path resolves every
    /// subtable of a batch by name, and with 100,000s of subtables a tree walk of string
    /// compares per subtable cost more than the rest of its write (see [`names`] for why the
    /// entries hold the names themselves and are kept in creation order).
    by_name: NameIndex,
    by_uid: HashMap<TableUid, Arc<TableMeta>, UidHash>,
    /// STABLE name -> its id in `by_name`'s entries, and the names by id: ids are handed out
    /// on first sight and never taken back (a catalog sees few STABLEs).
    stable_ids: HashMap<String, StableId, Fast>,
    stable_names: Vec<String>,
    pub next_uid: u64,
    /// Tag indexes: (stable, tag position) -> value -> its subtables with that value, by name
    /// (the same `Arc`s as `tables`, so a lookup returns them without another search).
    /// The first tag of every STABLE is always indexed (as TDengine does); another tag gets an
    /// index the first time a query filters on it by equality. Every index is kept exactly in
    /// step with `tables`.
    /// Keyed by STABLE, then the indexed tag positions: a new subtable visits only its own
    /// STABLE's indexes, and finding them hashes the name it already has.
    tag_index: HashMap<String, Vec<(usize, TagIndex)>, Fast>,
    /// Per STABLE, a number that changes with every change to its schema or its subtables
    /// (taken from one process-wide counter, so that it never repeats, even across a catalog
    /// rebuilt from disk): a [`tidal_common::StableTables`] built at one version is current
    /// while the version is unchanged.
    versions: HashMap<String, u64, Fast>,
}

/// foldhash: the catalog is probed per subtable created, with keys no client chooses to
/// collide (table names that did would only slow their own creation).
type Fast = foldhash::fast::RandomState;

/// One tag's index: value -> its subtables.
type TagIndex = HashMap<TagKey, TagSet, Fast>;

/// Source of [`Meta`]'s STABLE versions.
static NEXT_VERSION: AtomicU64 = AtomicU64::new(1);

/// The subtables with one tag value, by name. The first tag, always indexed, usually names
/// the device, so most of its values have one subtable: held without a tree then (a tree's
/// node was about 400 bytes and an allocation per subtable created).
#[derive(Clone)]
enum TagSet {
    One(Arc<TableMeta>),
    Many(BTreeMap<String, Arc<TableMeta>>),
}

impl TagSet {
    /// Adds `t`, replacing a subtable of its name.
    fn insert(&mut self, t: Arc<TableMeta>) {
        match self {
            TagSet::One(x) if x.name == t.name => *x = t,
            TagSet::One(x) => {
                let mut m = BTreeMap::new();
                m.insert(x.name.clone(), x.clone());
                m.insert(t.name.clone(), t);
                *self = TagSet::Many(m);
            }
            TagSet::Many(m) => {
                m.insert(t.name.clone(), t);
            }
        }
    }

    /// Removes subtable `name`; true when the set is empty then.
    fn remove(&mut self, name: &str) -> bool {
        match self {
            TagSet::One(x) => x.name == name,
            TagSet::Many(m) => {
                m.remove(name);
                m.is_empty()
            }
        }
    }

    /// The subtables, by name.
    fn tables(&self) -> Box<dyn Iterator<Item = &Arc<TableMeta>> + '_> {
        match self {
            TagSet::One(x) => Box::new(std::iter::once(x)),
            TagSet::Many(m) => Box::new(m.values()),
        }
    }
}

/// A tag value as a hashable key (floats by their bits, -0.0 as 0.0).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TagKey {
    Null,
    B(bool),
    I(i64),
    U(u64),
    F(u64),
    S(String),
}

impl TagKey {
    pub fn of(v: &Value) -> TagKey {
        match v {
            Value::Null => TagKey::Null,
            Value::Bool(b) => TagKey::B(*b),
            Value::Int(i) | Value::Timestamp(i) => TagKey::I(*i),
            Value::UInt(u) => TagKey::U(*u),
            Value::Float(f) => TagKey::F(if *f == 0.0 { 0 } else { f.to_bits() }),
            Value::Str(s) => TagKey::S(s.clone()),
        }
    }
}

impl Meta {
    pub fn new() -> Meta {
        Meta {
            next_uid: 1,
            ..Meta::default()
        }
    }

    /// Stores `s` unless a schema of the same or a newer version is already stored.
    /// Whether [`Meta::put_schema`] would change the catalog: `s` is a STABLE it lacks or a
    /// later version of one it has.
    pub fn schema_is_newer(&self, s: &StableSchema) -> bool {
        self.stables
            .get(&s.name)
            .is_none_or(|old| old.version < s.version)
    }

    pub fn put_schema(&mut self, s: &StableSchema) {
        if self.schema_is_newer(s) {
            self.stables.insert(s.name.clone(), Arc::new(s.clone()));
            self.bump(&s.name);
        }
    }

    /// Forgets STABLE `stable` (its subtables must be removed first).
    pub fn remove_stable(&mut self, stable: &str) {
        self.stables.remove(stable);
        self.tag_index.remove(stable);
        self.bump(stable);
    }

    fn bump(&mut self, stable: &str) {
        let v = NEXT_VERSION.fetch_add(1, Ordering::Relaxed);
        match self.versions.get_mut(stable) {
            Some(old) => *old = v,
            None => {
                self.versions.insert(stable.to_string(), v);
            }
        }
    }

    /// The version of `stable`'s schema and subtables (see `versions`); 0 for one never seen.
    pub fn version(&self, stable: &str) -> u64 {
        self.versions.get(stable).copied().unwrap_or(0)
    }

    /// Whether `s` would change the stored schemas.
    pub fn schema_is_news(&self, s: &StableSchema) -> bool {
        self.stables
            .get(&s.name)
            .is_none_or(|old| old.version < s.version)
    }

    pub fn insert_table(&mut self, t: TableMeta) {
        self.next_uid = self.next_uid.max(t.uid.0 + 1);
        // A hash probe rules out the tree walk of a removal for a new name.
        if self.by_name.contains(t.name.as_bytes()) {
            self.remove_table(&t.name);
        }
        let t = Arc::new(t);
        self.bump(&t.stable);
        let stable = self.intern_stable(&t.stable);
        self.by_uid.insert(t.uid, t.clone());
        self.by_name
            .insert(&t.name, NameSlot { uid: t.uid, stable });
        let indexes = match self.tag_index.get_mut(t.stable.as_str()) {
            Some(v) => v,
            None => self.tag_index.entry(t.stable.clone()).or_default(),
        };
        if !indexes.iter().any(|(k, _)| *k == 0) {
            indexes.push((0, TagIndex::default()));
        }
        for (k, idx) in indexes.iter_mut() {
            add_to_set(idx, tag_key(&t, *k), &t);
        }
    }

    pub fn remove_table(&mut self, name: &str) -> Option<Arc<TableMeta>> {
        let slot = self.by_name.remove(name.as_bytes())?;
        let t = self.by_uid.remove(&slot.uid)?;
        self.bump(&t.stable);
        for (k, idx) in self
            .tag_index
            .get_mut(t.stable.as_str())
            .into_iter()
            .flatten()
        {
            let key = tag_key(&t, *k);
            if idx.get_mut(&key).is_some_and(|set| set.remove(name)) {
                idx.remove(&key);
            }
        }
        Some(t)
    }

    /// ALTER TABLE .. SET TAG: subtable `name` takes `tags` (position, value) as its new tag
    /// values, keeping its uid. Returns the new entry; `None` when there is no such table.
    /// Positions past its STABLE's tags are skipped: the live path checks them against the
    /// same schema, so only a damaged record could name one, and it must not allocate for it.
    pub fn set_tags(&mut self, name: &str, tags: &[(usize, Value)]) -> Option<Arc<TableMeta>> {
        let old = self.table(name)?;
        let width = self.stables.get(&old.stable).map_or(0, |s| s.tags.len());
        let mut t = TableMeta::clone(old);
        let mut values = t.tags.to_vec();
        // A subtable created before an ADD TAG holds fewer values than its schema has tags.
        if values.len() < width {
            values.resize(width, Value::Null);
        }
        for (k, v) in tags {
            if let Some(slot) = values.get_mut(*k) {
                *slot = v.clone();
            }
        }
        t.tags = values.into();
        // Replacing the entry moves it between the buckets of every tag index of its STABLE
        // and bumps the STABLE's version, so cached `StableTables` are rebuilt.
        self.insert_table(t);
        self.table(name).cloned()
    }

    /// Whether tag `k` of `stable` has an index.
    pub fn has_tag_index(&self, stable: &str, k: usize) -> bool {
        self.tag_index_of(stable, k).is_some()
    }

    fn tag_index_of(&self, stable: &str, k: usize) -> Option<&TagIndex> {
        let indexes = self.tag_index.get(stable)?;
        indexes.iter().find(|(i, _)| *i == k).map(|(_, idx)| idx)
    }

    /// Builds the index of tag `k` of `stable` (kept up to date from then on).
    pub fn build_tag_index(&mut self, stable: &str, k: usize) {
        let mut idx = TagIndex::default();
        for t in self.by_uid.values().filter(|t| t.stable == stable) {
            add_to_set(&mut idx, tag_key(t, k), t);
        }
        let indexes = self.tag_index.entry(stable.to_string()).or_default();
        match indexes.iter_mut().find(|(i, _)| *i == k) {
            Some((_, old)) => *old = idx,
            None => indexes.push((k, idx)),
        }
    }

    /// The subtables of `stable` whose tag `k` is one of `values`, sorted by name; `None` when
    /// tag `k` has no index.
    pub fn tables_by_tag(
        &self,
        stable: &str,
        k: usize,
        values: &[Value],
    ) -> Option<Vec<&Arc<TableMeta>>> {
        let idx = self.tag_index_of(stable, k)?;
        let sets: Vec<&TagSet> = values
            .iter()
            .filter_map(|v| idx.get(&TagKey::of(v)))
            .collect();
        if let [one] = sets.as_slice() {
            return Some(one.tables().collect());
        }
        // Several values: each set is sorted by name; a value listed twice is one set.
        let mut names: BTreeMap<&String, &Arc<TableMeta>> = BTreeMap::new();
        for set in sets {
            names.extend(set.tables().map(|t| (&t.name, t)));
        }
        Some(names.into_values().collect())
    }

    /// The live subtable named `name`.
    pub fn table(&self, name: &str) -> Option<&Arc<TableMeta>> {
        let slot = self.by_name.get(name.as_bytes())?;
        self.by_uid.get(&slot.uid)
    }

    /// The uid and STABLE of the live subtable named `name`.
    pub fn lookup(&self, name: &str) -> Option<NameSlot> {
        self.by_name.get(name.as_bytes())
    }

    /// The uid and STABLE of the live subtable named `name`, looked for first just after
    /// where `cursor`'s recent runs of lookups left off: a batch names its subtables in much
    /// the order they were created in ([`NameIndex`]).
    pub fn lookup_near(&self, name: &str, cursor: &mut NearCursor) -> Option<NameSlot> {
        self.by_name.get_near(name.as_bytes(), cursor)
    }

    /// The id [`Meta::lookup_near`] gives the subtables of STABLE `stable`; `None` if no
    /// subtable of it was ever listed here.
    pub fn stable_id(&self, stable: &str) -> Option<StableId> {
        self.stable_ids.get(stable).copied()
    }

    /// The STABLE of id `id` (empty for an id this catalog did not hand out).
    pub fn stable_name(&self, id: StableId) -> &str {
        self.stable_names
            .get(id.0 as usize)
            .map_or("", String::as_str)
    }

    fn intern_stable(&mut self, stable: &str) -> StableId {
        if let Some(id) = self.stable_ids.get(stable) {
            return *id;
        }
        let id = StableId(self.stable_names.len() as u32);
        self.stable_names.push(stable.to_string());
        self.stable_ids.insert(stable.to_string(), id);
        id
    }

    /// Every subtable's uid, in no order.
    pub fn uids(&self) -> impl Iterator<Item = TableUid> + '_ {
        self.by_uid.keys().copied()
    }

    pub fn has_uid(&self, uid: TableUid) -> bool {
        self.by_uid.contains_key(&uid)
    }

    pub fn num_tables(&self) -> usize {
        self.by_uid.len()
    }

    pub fn table_by_uid(&self, uid: TableUid) -> Option<&TableMeta> {
        self.by_uid.get(&uid).map(|t| &**t)
    }

    pub fn has_tables_of(&self, stable: &str) -> bool {
        self.by_uid.values().any(|t| t.stable == stable)
    }

    pub fn tables_of(&self, stable: &str) -> Vec<String> {
        self.sorted_tables(Some(stable))
            .iter()
            .map(|t| t.name.clone())
            .collect()
    }

    /// Every subtable, or those of STABLE `stable`, sorted by name (the order listings and
    /// queries give). Sorted when asked rather than kept in a tree: a tree of names cost a
    /// walk of string compares, cache misses each, per subtable created (7% of a data node's
    /// CPU at 100,000 trucks), and listings are rare and cached ([`tidal_common::StableTables`]).
    pub fn sorted_tables(&self, stable: Option<&str>) -> Vec<Arc<TableMeta>> {
        let mut out: Vec<Arc<TableMeta>> = self
            .by_uid
            .values()
            .filter(|t| stable.is_none_or(|s| t.stable == s))
            .cloned()
            .collect();
        out.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        out
    }

    pub fn encode(&self, w: &mut Writer) {
        w.u64(self.next_uid);
        w.len_u32(self.stables.len());
        for s in self.stables.values() {
            w.schema(s);
        }
        // By uid: the same catalog always encodes to the same bytes.
        let mut tables: Vec<&Arc<TableMeta>> = self.by_uid.values().collect();
        tables.sort_unstable_by_key(|t| t.uid);
        w.len_u32(tables.len());
        for t in tables {
            w.table_meta(t);
        }
    }

    pub fn decode(r: &mut Reader<'_>) -> DResult<Meta> {
        let mut m = Meta::new();
        let next_uid = r.u64()?;
        let n = r.count(1)?;
        for _ in 0..n {
            let s = r.schema()?;
            m.stables.insert(s.name.clone(), Arc::new(s));
        }
        let n = r.count(1)?;
        for _ in 0..n {
            let t = r.table_meta()?;
            m.insert_table(t);
        }
        m.next_uid = m.next_uid.max(next_uid);
        Ok(m)
    }
}

fn add_to_set(idx: &mut TagIndex, key: TagKey, t: &Arc<TableMeta>) {
    match idx.entry(key) {
        std::collections::hash_map::Entry::Occupied(mut o) => o.get_mut().insert(t.clone()),
        std::collections::hash_map::Entry::Vacant(v) => {
            v.insert(TagSet::One(t.clone()));
        }
    }
}

fn tag_key(t: &TableMeta, k: usize) -> TagKey {
    TagKey::of(t.tags.get(k).unwrap_or(&Value::Null))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(uid: u64, name: &str, stable: &str, tags: &[&str]) -> TableMeta {
        TableMeta {
            uid: TableUid(uid),
            name: name.to_string(),
            stable: stable.to_string(),
            tags: tags.iter().map(|t| Value::Str(t.to_string())).collect(),
        }
    }

    fn names(m: &Meta, stable: &str, k: usize, v: &str) -> Option<Vec<String>> {
        m.tables_by_tag(stable, k, &[Value::Str(v.to_string())])
            .map(|ts| ts.iter().map(|t| t.name.clone()).collect())
    }

    #[test]
    fn tag_indexes_follow_creates_replacements_and_drops_per_stable() {
        let mut m = Meta::new();
        m.insert_table(table(1, "a1", "a", &["x", "north"]));
        m.insert_table(table(2, "a2", "a", &["y", "north"]));
        m.insert_table(table(3, "b1", "b", &["x", "north"]));
        // The first tag is always indexed, per STABLE.
        assert_eq!(names(&m, "a", 0, "x"), Some(vec!["a1".to_string()]));
        assert_eq!(names(&m, "b", 0, "x"), Some(vec!["b1".to_string()]));
        assert!(!m.has_tag_index("a", 1));
        assert_eq!(names(&m, "a", 1, "north"), None, "no index on tag 1 yet");
        m.build_tag_index("a", 1);
        assert!(m.has_tag_index("a", 1));
        assert!(!m.has_tag_index("b", 1), "built for one STABLE only");
        assert_eq!(
            names(&m, "a", 1, "north"),
            Some(vec!["a1".into(), "a2".into()])
        );
        // Kept up to date: a new subtable, one replaced with other tags, one removed.
        m.insert_table(table(4, "a0", "a", &["z", "north"]));
        m.insert_table(table(5, "a2", "a", &["y", "south"]));
        m.remove_table("a1");
        assert_eq!(names(&m, "a", 1, "north"), Some(vec!["a0".to_string()]));
        assert_eq!(names(&m, "a", 1, "south"), Some(vec!["a2".to_string()]));
        assert_eq!(names(&m, "a", 0, "x"), Some(vec![]));
        assert_eq!(m.table("a2").map(|t| t.uid), Some(TableUid(5)));
        assert_eq!(m.next_uid, 6);
        // A value shared by two subtables, then by one again; sets of several values merge
        // by name.
        m.insert_table(table(6, "a9", "a", &["z", "east"]));
        assert_eq!(names(&m, "a", 0, "z"), Some(vec!["a0".into(), "a9".into()]));
        let both = m
            .tables_by_tag("a", 0, &[Value::Str("z".into()), Value::Str("y".into())])
            .map(|ts| ts.iter().map(|t| t.name.clone()).collect::<Vec<_>>());
        assert_eq!(both, Some(vec!["a0".into(), "a2".into(), "a9".into()]));
        m.remove_table("a9");
        assert_eq!(names(&m, "a", 0, "z"), Some(vec!["a0".to_string()]));
        assert_eq!(
            names(&m, "a", 1, "east"),
            Some(vec![]),
            "a9's value went with it"
        );
        // Building again gives the same sets; a dropped STABLE's indexes go with it.
        m.build_tag_index("a", 1);
        assert_eq!(names(&m, "a", 1, "north"), Some(vec!["a0".to_string()]));
        for t in ["a0", "a2"] {
            m.remove_table(t);
        }
        m.remove_stable("a");
        assert!(!m.has_tag_index("a", 1));
        assert_eq!(names(&m, "b", 0, "x"), Some(vec!["b1".to_string()]));
    }

    #[test]
    fn lookups_follow_creates_replacements_and_drops() {
        let mut m = Meta::new();
        let long = "l".repeat(tidal_common::names::INLINE_BYTES + 10);
        for (uid, name, stable) in [(1, "t1", "s"), (2, "t2", "s"), (3, long.as_str(), "r")] {
            m.insert_table(table(uid, name, stable, &["x"]));
        }
        let (s, r) = (m.stable_id("s").unwrap(), m.stable_id("r").unwrap());
        assert_ne!(s, r);
        assert_eq!((m.stable_name(s), m.stable_name(r)), ("s", "r"));
        assert_eq!(m.stable_id("q"), None);
        let slot = |m: &Meta, name: &str| m.lookup(name).map(|n| (n.uid.0, n.stable));
        assert_eq!(slot(&m, "t2"), Some((2, s)));
        assert_eq!(slot(&m, &long), Some((3, r)));
        assert_eq!(slot(&m, "t"), None);
        assert_eq!(slot(&m, &long[1..]), None);
        assert_eq!(m.table(&long).map(|t| t.uid.0), Some(3));
        // t2 dropped and created again in another STABLE: the name is uid 4 of "r".
        m.insert_table(table(4, "t2", "r", &["y"]));
        assert_eq!(slot(&m, "t2"), Some((4, r)));
        assert!(!m.has_uid(TableUid(2)));
        m.remove_table(&long);
        assert_eq!(slot(&m, &long), None);
        assert_eq!(m.table(&long).map(|t| t.uid.0), None);
        // A STABLE dropped and created again keeps its id.
        m.remove_table("t1");
        m.remove_table("t2");
        m.remove_stable("s");
        m.insert_table(table(5, "t5", "s", &["z"]));
        assert_eq!(slot(&m, "t5"), Some((5, s)));
        assert_eq!(m.num_tables(), 1);
    }
}
