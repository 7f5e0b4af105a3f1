//! Schemas: STABLE definitions, subtable metadata and database options.

use crate::batch::Column;
use crate::ids::{SchemaVersion, TableUid};
use crate::time::Precision;
use crate::types::{DataType, Value};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ColumnDef {
    pub name: String,
    pub data_type: DataType,
    /// `ENCODE '..' COMPRESS '..' LEVEL '..'` as given in CREATE STABLE (TDengine 3.3);
    /// `None` = the defaults for the type and the database's COMP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub codec: Option<ColumnCodecSpec>,
}

/// A column's compression choice as written in SQL; each part may be left to its default.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnCodecSpec {
    pub encode: Option<String>,
    pub compress: Option<String>,
    pub level: Option<String>,
}

impl ColumnDef {
    pub fn new(name: impl Into<String>, data_type: DataType) -> ColumnDef {
        ColumnDef {
            name: name.into(),
            data_type,
            codec: None,
        }
    }
}

/// A supertable: the column template (first column = TIMESTAMP key) and the tag template.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StableSchema {
    pub db: String,
    pub name: String,
    pub version: SchemaVersion,
    pub columns: Vec<ColumnDef>,
    pub tags: Vec<ColumnDef>,
}

impl StableSchema {
    /// Validates the template: a leading TIMESTAMP column, at least one more column, at least
    /// one tag, no duplicate names, no TIMESTAMP tag length issues. Returns a clear message.
    pub fn validate(&self) -> Result<(), String> {
        match self.columns.first() {
            Some(c) if c.data_type == DataType::Timestamp => {}
            Some(c) => {
                return Err(format!(
                    "the first column of STABLE {} must be TIMESTAMP, not {} {}",
                    self.name, c.name, c.data_type
                ))
            }
            None => return Err(format!("STABLE {} has no columns", self.name)),
        }
        if self.columns.len() < 2 {
            return Err(format!(
                "STABLE {} needs at least one column besides the timestamp",
                self.name
            ));
        }
        if self.tags.is_empty() {
            return Err(format!("STABLE {} needs at least one tag", self.name));
        }
        let mut seen = std::collections::HashSet::new();
        for c in self.columns.iter().chain(self.tags.iter()) {
            let lower = c.name.to_ascii_lowercase();
            if !seen.insert(lower) {
                return Err(format!(
                    "duplicate column or tag name '{}' in STABLE {}",
                    c.name, self.name
                ));
            }
            if let DataType::VarChar(0) | DataType::NChar(0) = c.data_type {
                return Err(format!("column '{}' has length 0", c.name));
            }
        }
        Ok(())
    }

    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns
            .iter()
            .position(|c| c.name.eq_ignore_ascii_case(name))
    }

    pub fn tag_index(&self, name: &str) -> Option<usize> {
        self.tags
            .iter()
            .position(|c| c.name.eq_ignore_ascii_case(name))
    }

    /// Coerces a full tag vector against the tag template; errors name the tag.
    pub fn coerce_tags(&self, mut tags: Vec<Value>) -> Result<Vec<Value>, String> {
        self.coerce_tags_in_place(&mut tags)?;
        Ok(tags)
    }

    /// [`StableSchema::coerce_tags`] of values held elsewhere (a subtable's shared tags),
    /// each replaced by its coerced form; on an error some may be replaced already.
    pub fn coerce_tags_in_place(&self, tags: &mut [Value]) -> Result<(), String> {
        if tags.len() != self.tags.len() {
            return Err(format!(
                "STABLE {} has {} tags but {} tag values were given",
                self.name,
                self.tags.len(),
                tags.len()
            ));
        }
        for (v, def) in tags.iter_mut().zip(self.tags.iter()) {
            let taken = std::mem::replace(v, Value::Null);
            *v = def
                .data_type
                .coerce(taken)
                .map_err(|e| format!("tag '{}': {e}", def.name))?;
        }
        Ok(())
    }
}

/// A subtable as its vnode knows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TableMeta {
    pub uid: TableUid,
    pub name: String,
    pub stable: String,
    pub tags: Arc<[Value]>,
}

/// Options of a database (`CREATE DATABASE ... VGROUPS 4 PRECISION 'ms' ...`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DbOptions {
    pub vgroups: u32,
    pub replica: u32,
    pub precision: Precision,
    /// Time span of one file set, in minutes (TDengine's unit for DURATION).
    pub duration_minutes: u64,
    /// Retention, in minutes.
    pub keep_minutes: u64,
    /// Memtable budget per vnode, in MiB.
    pub buffer_mb: u32,
    pub wal_level: u8,
    pub wal_fsync_period_ms: u32,
    pub cache_model: String,
    pub cache_size_mb: u32,
    pub stt_trigger: u32,
    pub minrows: u32,
    pub maxrows: u32,
    /// Second-stage compression of column blocks: 0 none, 1 lz4, 2 zstd (TDengine's COMP).
    #[serde(default = "default_comp")]
    pub comp: u8,
}

fn default_comp() -> u8 {
    2
}

impl Default for DbOptions {
    fn default() -> Self {
        DbOptions {
            vgroups: 2,
            replica: 1,
            precision: Precision::Millis,
            duration_minutes: 10 * 24 * 60,
            keep_minutes: 36500 * 24 * 60,
            buffer_mb: 256,
            wal_level: 2,
            wal_fsync_period_ms: 0,
            cache_model: "none".to_string(),
            cache_size_mb: 1,
            stt_trigger: 2,
            minrows: 100,
            maxrows: 4096,
            comp: default_comp(),
        }
    }
}

impl DbOptions {
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=1024).contains(&self.vgroups) {
            return Err(format!("VGROUPS must be 1..1024, got {}", self.vgroups));
        }
        if self.replica != 1 && self.replica != 3 {
            return Err(format!("REPLICA must be 1 or 3, got {}", self.replica));
        }
        if self.replica != 1 {
            return Err("REPLICA 3 is not supported yet".to_string());
        }
        if !(1..=2).contains(&self.wal_level) {
            return Err(format!("WAL_LEVEL must be 1 or 2, got {}", self.wal_level));
        }
        if self.duration_minutes == 0 {
            return Err("DURATION must be positive".to_string());
        }
        if self.keep_minutes < self.duration_minutes {
            return Err(format!(
                "KEEP ({}m) must be at least DURATION ({}m)",
                self.keep_minutes, self.duration_minutes
            ));
        }
        if !["none", "last_row", "last_value", "both"].contains(&self.cache_model.as_str()) {
            return Err(format!(
                "CACHEMODEL must be 'none', 'last_row', 'last_value' or 'both', got '{}'",
                self.cache_model
            ));
        }
        if self.buffer_mb == 0 {
            return Err("BUFFER must be positive".to_string());
        }
        if self.comp > 2 {
            return Err(format!(
                "COMP must be 0 (none), 1 (lz4) or 2 (zstd), got {}",
                self.comp
            ));
        }
        if self.minrows == 0 || self.maxrows < self.minrows {
            return Err(format!(
                "MINROWS ({}) must be positive and not above MAXROWS ({})",
                self.minrows, self.maxrows
            ));
        }
        Ok(())
    }
}

/// Longest subtable name, in bytes (TDengine's limit): what the `tbname` pseudo column holds.
pub const TABLE_NAME_BYTES_MAX: usize = 192;

/// Why `name` cannot name a new subtable: it is longer than [`TABLE_NAME_BYTES_MAX`]. `None`
/// when it fits.
pub fn table_name_too_long(name: &str) -> Option<String> {
    (name.len() > TABLE_NAME_BYTES_MAX).then(|| {
        format!(
            "subtable name '{}...' is {} bytes long; the most is {TABLE_NAME_BYTES_MAX}",
            name.chars().take(32).collect::<String>(),
            name.len()
        )
    })
}

/// The type of the `tbname` pseudo column.
pub const TBNAME_TYPE: DataType = DataType::VarChar(TABLE_NAME_BYTES_MAX as u32);

/// The subtables of one STABLE on one vnode, in listing order (by name), with their names and tags also
/// held as columns (one row per subtable, tags in the STABLE's tag types). A query over
/// 100,000s of subtables filters and projects tags from these columns instead of chasing
/// every subtable's own allocation (the tag filter, the key columns of `PARTITION BY` tags).
/// A snapshot: the vnode builds a new one after any change to the STABLE's subtables or
/// schema, identified by `version`.
#[derive(Debug)]
pub struct StableTables {
    /// The STABLE's name.
    pub stable: String,
    pub version: u64,
    pub metas: Vec<Arc<TableMeta>>,
    pub uids: Vec<TableUid>,
    /// `tbname`, as a column.
    pub names: Column,
    /// One column per tag of the schema.
    pub tags: Vec<Column>,
    /// Position of each subtable by uid.
    positions: UidPositions,
    /// Per tag, built on the first equality lookup (the first tag's with the snapshot).
    eq_index: Vec<OnceLock<EqIndex>>,
}

/// A tag's equality index: value hash -> the positions holding it.
type EqIndex = HashMap<u64, Bucket, foldhash::fast::FixedState>;

fn eq_index_of(col: &Column) -> EqIndex {
    let mut idx: EqIndex = HashMap::default();
    for i in 0..col.len() {
        let v = col.get(i);
        let b = idx.entry(value_hash(&v)).or_insert_with(|| Bucket {
            positions: Vec::new(),
            uniform: true,
        });
        if let (true, Some(first)) = (b.uniform, b.positions.first()) {
            b.uniform = index_eq(&col.get(*first as usize), &v);
        }
        b.positions.push(i as u32);
    }
    idx
}

impl StableTables {
    /// `metas`: the STABLE's subtables, in the order queries list them (a vnode's: by name).
    pub fn build(schema: &StableSchema, version: u64, metas: Vec<Arc<TableMeta>>) -> StableTables {
        let n = metas.len();
        let mut names = Column::empty(TBNAME_TYPE, n);
        let mut tags: Vec<Column> = schema
            .tags
            .iter()
            .map(|d| Column::empty(d.data_type, n))
            .collect();
        let mut uids = Vec::with_capacity(n);
        for m in &metas {
            names.push(&Value::Str(m.name.clone()));
            for (k, (col, def)) in tags.iter_mut().zip(&schema.tags).enumerate() {
                col.push_tag(def.data_type, m.tags.get(k).unwrap_or(&Value::Null));
            }
            uids.push(m.uid);
        }
        let positions = UidPositions::new(&uids);
        let eq_index: Vec<OnceLock<EqIndex>> = tags.iter().map(|_| OnceLock::new()).collect();
        // The first tag is indexed with the snapshot, as TDengine indexes it from the start:
        // it names the device in most schemas, so the first lookup of one device finds the
        // index built (and may run as a point lookup) instead of building it then.
        if let (Some(cell), Some(col)) = (eq_index.first(), tags.first()) {
            let _ = cell.set(eq_index_of(col));
        }
        StableTables {
            stable: schema.name.clone(),
            version,
            metas,
            uids,
            names,
            tags,
            positions,
            eq_index,
        }
    }

    /// Positions (ascending) of the subtables whose tag `k` may equal one of `values` (given
    /// in the tag's type): every one that does, and possibly a few more (values are found by
    /// hash), so the caller still applies its filter. `None` for an unknown tag.
    pub fn candidates_eq(&self, k: usize, values: &[Value]) -> Option<Vec<usize>> {
        self.candidates_eq_exact(k, values).map(|(c, _)| c)
    }

    /// [`StableTables::candidates_eq`], and whether the candidates are exactly the subtables
    /// whose tag `k` equals one of `values` as SQL's `=` says (then a filter need not test
    /// that equality again): true when no value is NULL or NaN and every bucket looked up
    /// holds one value, the one asked for.
    pub fn candidates_eq_exact(&self, k: usize, values: &[Value]) -> Option<(Vec<usize>, bool)> {
        let col = self.tags.get(k)?;
        let index = self.eq_index.get(k)?.get_or_init(|| eq_index_of(col));
        let mut out: Vec<usize> = Vec::new();
        let mut exact = true;
        for v in values {
            exact &= !v.is_null() && !matches!(v, Value::Float(f) if f.is_nan());
            if let Some(b) = index.get(&value_hash(v)) {
                exact &= b.uniform
                    && b.positions
                        .first()
                        .is_some_and(|p| index_eq(&col.get(*p as usize), v));
                out.extend(b.positions.iter().map(|i| *i as usize));
            }
        }
        if values.len() > 1 {
            out.sort_unstable();
            out.dedup();
        }
        Some((out, exact))
    }

    /// How many candidates [`StableTables::candidates_eq`] would give, if tag `k`'s index is
    /// already built; `None` otherwise (or for an unknown tag). Never builds the index, so a
    /// caller can ask it on a thread that must not wait for a scan of every subtable.
    /// Whether tag `k`'s equality index is built (a lookup then builds nothing).
    pub fn is_indexed(&self, k: usize) -> bool {
        self.eq_index.get(k).is_some_and(|c| c.get().is_some())
    }

    pub fn candidates_eq_count_if_indexed(&self, k: usize, values: &[Value]) -> Option<usize> {
        let index = self.eq_index.get(k)?.get()?;
        Some(
            values
                .iter()
                .map(|v| index.get(&value_hash(v)).map_or(0, |b| b.positions.len()))
                .sum(),
        )
    }

    pub fn len(&self) -> usize {
        self.metas.len()
    }

    pub fn is_empty(&self) -> bool {
        self.metas.is_empty()
    }

    /// The position of the subtable with `uid`, if it is one of these.
    pub fn position(&self, uid: TableUid) -> Option<usize> {
        self.positions.get(uid)
    }
}

/// Subtable uid -> position. A vnode hands out uids from a counter, so one STABLE's uids are
/// usually compact: then a flat array indexed by uid, where a lookup is one read and nearby
/// uids share cache lines (LAST_ROW over a fleet asks it for every candidate, and a hash
/// probe per candidate was a quarter of such a query). Sparse uids (a small STABLE among many
/// tables) keep a hash map, so memory stays proportional to the subtables.
#[derive(Debug)]
enum UidPositions {
    /// `slots[uid - base]` = position + 1, 0 = not a member.
    Dense {
        base: u64,
        slots: Vec<u32>,
    },
    Sparse(HashMap<TableUid, u32, foldhash::fast::FixedState>),
}

impl UidPositions {
    /// Array slots allowed per member before the map is used instead.
    const DENSE_SLOTS_PER_MEMBER: u64 = 4;
    /// Spans up to this many slots are always dense (16 KiB).
    const DENSE_SLOTS_MIN: u64 = 4096;

    fn new(uids: &[TableUid]) -> UidPositions {
        let (Some(lo), Some(hi)) = (
            uids.iter().map(|u| u.0).min(),
            uids.iter().map(|u| u.0).max(),
        ) else {
            return UidPositions::Sparse(HashMap::default());
        };
        let span = hi - lo;
        let limit = (uids.len() as u64)
            .saturating_mul(Self::DENSE_SLOTS_PER_MEMBER)
            .max(Self::DENSE_SLOTS_MIN);
        // Positions are stored + 1 in a u32: more members than that go to the map too.
        if span < limit && uids.len() < u32::MAX as usize {
            let mut slots = vec![0u32; span as usize + 1];
            for (i, u) in uids.iter().enumerate() {
                slots[(u.0 - lo) as usize] = i as u32 + 1;
            }
            return UidPositions::Dense { base: lo, slots };
        }
        let mut map = HashMap::with_capacity_and_hasher(uids.len(), Default::default());
        for (i, u) in uids.iter().enumerate() {
            map.insert(*u, i as u32);
        }
        UidPositions::Sparse(map)
    }

    fn get(&self, uid: TableUid) -> Option<usize> {
        match self {
            UidPositions::Dense { base, slots } => {
                let k = usize::try_from(uid.0.checked_sub(*base)?).ok()?;
                match slots.get(k) {
                    Some(&p) if p > 0 => Some(p as usize - 1),
                    _ => None,
                }
            }
            UidPositions::Sparse(map) => map.get(&uid).map(|p| *p as usize),
        }
    }
}

/// The subtables whose tag values share one hash.
#[derive(Debug)]
struct Bucket {
    positions: Vec<u32>,
    /// Every position holds the same value ([`index_eq`]): no two values collided here.
    uniform: bool,
}

/// Equality as the index sees it: [`value_hash`]'s (-0.0 as 0.0, floats otherwise by bits).
fn index_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Float(x), Value::Float(y)) => x == y || x.to_bits() == y.to_bits(),
        _ => a == b,
    }
}

/// A hash under which equal values of one type meet (-0.0 as 0.0).
fn value_hash(v: &Value) -> u64 {
    use std::hash::{BuildHasher, Hash, Hasher};
    let mut h = foldhash::fast::FixedState::default().build_hasher();
    match v {
        Value::Null => 0u8.hash(&mut h),
        Value::Bool(b) => (1u8, *b).hash(&mut h),
        Value::Int(i) | Value::Timestamp(i) => (2u8, *i).hash(&mut h),
        Value::UInt(u) => (3u8, *u).hash(&mut h),
        Value::Float(f) => (4u8, if *f == 0.0 { 0 } else { f.to_bits() }).hash(&mut h),
        Value::Str(s) => (5u8, s.as_str()).hash(&mut h),
    }
    h.finish()
}

#[cfg(test)]
mod stable_tables_tests {
    use super::*;

    #[test]
    fn columns_hold_tags_in_the_tag_types_and_the_index_finds_every_match() {
        let schema = StableSchema {
            db: "db".into(),
            name: "s".into(),
            version: SchemaVersion(1),
            columns: vec![ColumnDef::new("ts", DataType::Timestamp)],
            tags: vec![
                ColumnDef::new("name", DataType::VarChar(16)),
                ColumnDef::new("w", DataType::Double),
                ColumnDef::new("k", DataType::Int),
            ],
        };
        let tags = [
            (Value::Str("a".into()), Value::Float(-0.0), Value::Int(1)),
            (Value::Null, Value::Float(0.0), Value::Int(2)),
            // stored in another type than the tag's (a tag type altered later)
            (Value::Str("a".into()), Value::Int(3), Value::Float(1.0)),
            (Value::Str("b".into()), Value::Null, Value::Null),
        ];
        let metas: Vec<Arc<TableMeta>> = tags
            .iter()
            .enumerate()
            .map(|(i, (a, b, c))| {
                Arc::new(TableMeta {
                    uid: TableUid(10 + i as u64),
                    name: format!("t{i}"),
                    stable: "s".into(),
                    tags: vec![a.clone(), b.clone(), c.clone()].into(),
                })
            })
            .collect();
        let st = StableTables::build(&schema, 7, metas);
        assert_eq!(st.len(), 4);
        assert_eq!(st.position(TableUid(12)), Some(2));
        assert_eq!(st.position(TableUid(99)), None);
        assert_eq!(st.names.get(3), Value::Str("t3".into()));
        assert_eq!(st.tags[1].get(2), Value::Float(3.0));
        assert_eq!(st.tags[2].get(2), Value::Int(1));
        assert!(st.tags[0].is_null(1));
        let s = |x: &str| Value::Str(x.into());
        // The first tag is indexed with the snapshot; counting never builds another tag's
        // index; once built, it counts what candidates_eq gives.
        assert!(st.is_indexed(0));
        assert!(!st.is_indexed(1) && !st.is_indexed(2));
        assert_eq!(st.candidates_eq(0, &[s("a")]), Some(vec![0, 2]));
        assert_eq!(st.candidates_eq_count_if_indexed(0, &[s("a")]), Some(2));
        assert_eq!(
            st.candidates_eq_count_if_indexed(0, &[s("a"), s("zz")]),
            Some(2)
        );
        assert_eq!(
            st.candidates_eq_count_if_indexed(1, &[Value::Float(0.0)]),
            None
        );
        assert_eq!(
            st.candidates_eq(0, &[s("b"), s("a"), s("a")]),
            Some(vec![0, 2, 3])
        );
        assert_eq!(st.candidates_eq(0, &[s("zz")]), Some(vec![]));
        // -0.0 and 0.0 are one value
        assert_eq!(st.candidates_eq(1, &[Value::Float(0.0)]), Some(vec![0, 1]));
        assert!(st.is_indexed(1), "built by its first lookup");
        assert_eq!(st.candidates_eq(1, &[Value::Float(3.0)]), Some(vec![2]));
        assert_eq!(st.candidates_eq(2, &[Value::Int(1)]), Some(vec![0, 2]));
        assert_eq!(st.candidates_eq(3, &[Value::Int(1)]), None);
        // Exact: no NULL or NaN asked for, and no bucket shared by two values.
        let ex = |k: usize, v: &[Value]| st.candidates_eq_exact(k, v);
        assert_eq!(ex(0, &[s("a")]), Some((vec![0, 2], true)));
        assert_eq!(ex(0, &[s("b"), s("zz")]), Some((vec![3], true)));
        assert_eq!(ex(0, &[s("a"), Value::Null]), Some((vec![0, 1, 2], false)));
        assert_eq!(ex(1, &[Value::Float(-0.0)]), Some((vec![0, 1], true)));
        assert_eq!(ex(1, &[Value::Float(f64::NAN)]), Some((vec![], false)));
        assert_eq!(ex(2, &[Value::Int(1)]), Some((vec![0, 2], true)));
    }

    #[test]
    fn uid_positions_dense_or_sparse_find_exactly_the_members() {
        let cases: Vec<(Vec<u64>, bool)> = vec![
            (vec![], false),
            (vec![7], true),
            // a STABLE's uids interleaved with another's: dense
            ((0..3000u64).map(|i| 10 + 2 * i).collect(), true),
            // out of order, as names sort
            (vec![12, 3, 100, 45, 4, 5], true),
            // two far apart: a map
            (vec![1, 1_000_000], false),
            (vec![5, u64::MAX - 1, u64::MAX], false),
            ((0..100u64).map(|i| u64::MAX - 3 * i).collect(), true),
        ];
        for (uids, dense) in cases {
            let uids: Vec<TableUid> = uids.into_iter().map(TableUid).collect();
            let p = UidPositions::new(&uids);
            assert_eq!(matches!(p, UidPositions::Dense { .. }), dense, "{uids:?}");
            let model: HashMap<u64, usize> =
                uids.iter().enumerate().map(|(i, u)| (u.0, i)).collect();
            let mut probes: Vec<u64> = vec![0, 1, 2, u64::MAX, u64::MAX - 2, 999_999];
            for u in &uids {
                probes.extend([u.0, u.0.wrapping_add(1), u.0.wrapping_sub(1)]);
            }
            for q in probes {
                assert_eq!(
                    p.get(TableUid(q)),
                    model.get(&q).copied(),
                    "uid {q} of {uids:?}"
                );
            }
        }
    }
}
