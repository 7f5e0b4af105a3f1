//! `tidal-vnode`: the storage engine of one vgroup of one database.
//!
//! A [`Vnode`] owns the subtables whose `hash_table_name(db, table)` falls into its
//! [`HashRange`]: their catalog (STABLE schemas, subtables with tags, uids), a write-ahead log,
//! an in-memory memtable and immutable flushed data files.
//!
//! Directory layout (one vnode):
//! ```text
//! <dir>/vnode.json          configuration, written once at creation (atomic replace)
//! <dir>/wal/<seq:020>.log   WAL files (wal/FORMAT.md)
//! <dir>/meta/MANIFEST       committed file set + catalog snapshot + flushed WAL seq (manifest/FORMAT.md)
//! <dir>/tsdb/<id:010>.dat   flushed data files (flush/FORMAT.md)
//! ```
//!
//! Invariants:
//! - Every mutation (write, create, drop, schema change) is validated completely, then becomes
//!   ONE WAL record, then is applied to memory; nothing is applied on a validation error.
//! - Mutations are serialised by the commit lock, so WAL order == apply order; fsyncs are shared
//!   by concurrent callers (group commit, see `wal`).
//! - An acknowledged mutation with wal_level 2 has been fsynced to the WAL (or to a data file and
//!   manifest) before `Ok` is returned; with wal_level 1 it has been `write()`n (and a
//!   background thread fsyncs the WAL every `wal_fsync_period_ms` if that is > 0).
//! - State on disk = manifest (files + catalog up to `flushed_seq`) + WAL records after
//!   `flushed_seq`. Reopen reconstructs exactly the acknowledged state.
//! - Mutations are visible to readers once applied, which happens just before the group fsync
//!   (as in TDengine); a failed fsync poisons the vnode and the caller gets an error.

mod codec;
mod error;
mod flush;
mod fsutil;
mod manifest;
mod memtable;
mod meta;
mod op;
mod wal;

#[cfg(test)]
mod tests;

pub use error::VnodeError;

use crate::error::Result;
use crate::flush::{DataFile, DataFileWriter};
use crate::memtable::{Memtable, Row};
use crate::meta::Meta;
use crate::op::{ApplyRef, Op};
use crate::wal::Wal;
use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tidal_common::{
    hash_table_name, Column, ColumnData, DataType, DbOptions, HashRange, StableSchema, TableMeta,
    TableUid, Value, VgroupId, WriteBatch,
};

const CONFIG_FILE: &str = "vnode.json";
const MANIFEST_FILE: &str = "MANIFEST";
/// When a flush would leave more data files than this, it merges them all into one instead
/// (dropping the rows of dropped tables).
const MAX_DATA_FILES: usize = 8;
const MIB: u64 = 1024 * 1024;

/// Identity and options of one vnode; persisted in `vnode.json` at creation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VnodeConfig {
    pub vgroup: VgroupId,
    pub db: String,
    pub range: HashRange,
    pub options: DbOptions,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteOutcome {
    pub rows: u64,
    pub tables_created: u32,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VnodeStats {
    pub tables: u64,
    /// Rows acknowledged since open.
    pub rows_written: u64,
    pub mem_bytes: u64,
    pub wal_bytes: u64,
    pub disk_bytes: u64,
}

/// Everything readers see; mutated only by holders of the commit lock.
struct State {
    meta: Meta,
    mem: Memtable,
    files: Vec<Arc<DataFile>>,
    flushed_seq: u64,
    next_file_id: u64,
}

impl State {
    fn apply(&mut self, a: &ApplyRef<'_>) {
        for s in &a.schemas {
            self.meta.put_schema(s);
        }
        for t in &a.creates {
            self.meta.insert_table(t.clone());
        }
        for (uid, cols) in &a.rows {
            if self.meta.by_uid.contains_key(uid) {
                self.mem.insert(*uid, cols);
            }
        }
    }

    fn drop_table(&mut self, name: &str) -> bool {
        match self.meta.remove_table(name) {
            Some(t) => {
                self.mem.remove_table(t.uid);
                true
            }
            None => false,
        }
    }

    fn drop_stable(&mut self, stable: &str) -> u32 {
        let names = self.meta.tables_of(stable);
        for n in &names {
            self.drop_table(n);
        }
        self.meta.stables.remove(stable);
        names.len() as u32
    }

    fn apply_op(&mut self, op: Op) {
        match op {
            Op::Apply {
                schemas,
                creates,
                rows,
            } => {
                let a = ApplyRef {
                    schemas: schemas.iter().collect(),
                    creates,
                    rows: rows.iter().map(|(u, c)| (*u, c.as_slice())).collect(),
                };
                self.apply(&a);
            }
            Op::DropTable { name } => {
                self.drop_table(&name);
            }
            Op::DropStable { name } => {
                self.drop_stable(&name);
            }
        }
    }
}

pub struct Vnode {
    dir: PathBuf,
    cfg: VnodeConfig,
    /// Serialises mutations: validate + WAL append + apply, and flushes.
    commit: Mutex<()>,
    state: RwLock<State>,
    wal: Arc<Wal>,
    rows_written: AtomicU64,
    buffer_bytes_max: u64,
    /// wal_level 1 with wal_fsync_period_ms > 0: fsyncs the WAL periodically. Stopped on drop.
    _syncer: Option<Syncer>,
}

/// A background thread that fsyncs the WAL every period until dropped.
struct Syncer {
    stop: Arc<(Mutex<bool>, parking_lot::Condvar)>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Syncer {
    fn start(wal: Arc<Wal>, period: std::time::Duration) -> Syncer {
        let stop = Arc::new((Mutex::new(false), parking_lot::Condvar::new()));
        let stop2 = stop.clone();
        let handle = std::thread::Builder::new()
            .name("vnode-wal-sync".into())
            .spawn(move || {
                let (lock, cv) = &*stop2;
                let mut stopped = lock.lock();
                while !*stopped {
                    cv.wait_for(&mut stopped, period);
                    if *stopped {
                        break;
                    }
                    if let Err(e) = wal.sync_current() {
                        tracing::warn!(error = %e, "periodic WAL fsync failed");
                    }
                }
            })
            .ok();
        Syncer { stop, handle }
    }
}

impl Drop for Syncer {
    fn drop(&mut self) {
        *self.stop.0.lock() = true;
        self.stop.1.notify_all();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn physical_name(d: &ColumnData) -> &'static str {
    match d {
        ColumnData::Bool(_) => "BOOL values",
        ColumnData::Int(_) => "signed integer values",
        ColumnData::UInt(_) => "unsigned integer values",
        ColumnData::Float(_) => "floating point values",
        ColumnData::Str(_) => "string values",
        ColumnData::Timestamp(_) => "TIMESTAMP values",
    }
}

fn physical_matches(d: &ColumnData, t: DataType) -> bool {
    use tidal_common::types::PhysicalType as P;
    matches!(
        (d, t.physical()),
        (ColumnData::Bool(_), P::Bool)
            | (ColumnData::Int(_), P::Int)
            | (ColumnData::UInt(_), P::UInt)
            | (ColumnData::Float(_), P::Float)
            | (ColumnData::Str(_), P::Str)
            | (ColumnData::Timestamp(_), P::Timestamp)
    )
}

fn check_columns(table: &str, schema: &StableSchema, cols: &[Column]) -> Result<()> {
    if cols.len() != schema.columns.len() {
        return Err(VnodeError::SchemaMismatch {
            table: table.to_string(),
            reason: format!(
                "STABLE '{}' (version {}) has {} columns but the write has {}",
                schema.name,
                schema.version,
                schema.columns.len(),
                cols.len()
            ),
        });
    }
    let rows = cols.first().map(Column::len).unwrap_or(0);
    for (c, def) in cols.iter().zip(&schema.columns) {
        if !physical_matches(&c.data, def.data_type) {
            return Err(VnodeError::TypeMismatch {
                table: table.to_string(),
                column: def.name.clone(),
                expected: def.data_type.to_string(),
                got: physical_name(&c.data).to_string(),
            });
        }
        if c.len() != rows {
            return Err(VnodeError::SchemaMismatch {
                table: table.to_string(),
                reason: format!(
                    "column '{}' has {} values but column '{}' has {rows}",
                    def.name,
                    c.len(),
                    schema
                        .columns
                        .first()
                        .map(|d| d.name.as_str())
                        .unwrap_or("ts"),
                ),
            });
        }
        if !c.nulls.is_empty() && c.nulls.len() != c.len() {
            return Err(VnodeError::SchemaMismatch {
                table: table.to_string(),
                reason: format!(
                    "column '{}' has {} values but a null mask of {}",
                    def.name,
                    c.len(),
                    c.nulls.len()
                ),
            });
        }
    }
    if let (Some(ts), Some(def)) = (cols.first(), schema.columns.first()) {
        if let Some(row) = ts.nulls.iter().position(|n| *n) {
            return Err(VnodeError::InvalidArgument(format!(
                "table '{table}': timestamp column '{}' is NULL in row {row}",
                def.name
            )));
        }
    }
    Ok(())
}

/// Builds columns of the given types from rows sorted by ts (column 0 = the ts key).
fn rows_to_columns<'a>(
    types: &[DataType],
    rows: impl Iterator<Item = (i64, &'a Row)> + Clone,
) -> Vec<Column> {
    types
        .iter()
        .enumerate()
        .map(|(j, t)| {
            let mut c = Column::empty(*t, 0);
            for (ts, row) in rows.clone() {
                if j == 0 {
                    c.push(&Value::Timestamp(ts));
                } else {
                    c.push(row.get(j).unwrap_or(&Value::Null));
                }
            }
            c
        })
        .collect()
}

fn ts_at(c: &Column, i: usize) -> Option<i64> {
    match &c.data {
        ColumnData::Timestamp(v) | ColumnData::Int(v) => v.get(i).copied(),
        _ => None,
    }
}

fn block_rows(cols: &[Column]) -> impl Iterator<Item = (i64, Row)> + '_ {
    let n = cols.first().map(Column::len).unwrap_or(0);
    (0..n).filter_map(move |i| {
        let ts = ts_at(cols.first()?, i)?;
        Some((ts, cols.iter().map(|c| c.get(i)).collect()))
    })
}

impl Vnode {
    /// Creates the vnode directory if missing, or recovers: loads the manifest and the data
    /// files it lists, deletes orphans, replays the WAL after the manifest's `flushed_seq` (a
    /// torn tail is cut off; corruption elsewhere is [`VnodeError::Corruption`]).
    /// The configuration is persisted at creation; reopening uses the persisted one.
    pub fn open(dir: &Path, cfg: VnodeConfig) -> Result<Vnode, VnodeError> {
        fsutil::create_dir_all(dir)?;
        let cfg_path = dir.join(CONFIG_FILE);
        let cfg = if cfg_path.exists() {
            let bytes = fsutil::read_file(&cfg_path)?;
            let stored: VnodeConfig =
                serde_json::from_slice(&bytes).map_err(|e| VnodeError::Corruption {
                    file: cfg_path.clone(),
                    offset: 0,
                    reason: format!("invalid vnode config: {e}"),
                })?;
            if stored != cfg {
                tracing::warn!(dir = %dir.display(), "vnode reopened with a different config; using the persisted one");
            }
            stored
        } else {
            if cfg.range.begin > cfg.range.end {
                return Err(VnodeError::InvalidArgument(format!(
                    "empty hash range {}..={}",
                    cfg.range.begin, cfg.range.end
                )));
            }
            let json = serde_json::to_vec_pretty(&cfg)
                .map_err(|e| VnodeError::InvalidArgument(format!("config: {e}")))?;
            fsutil::write_atomic(&cfg_path, &json)?;
            cfg
        };
        let (wal_dir, meta_dir, tsdb_dir) = (dir.join("wal"), dir.join("meta"), dir.join("tsdb"));
        for d in [&wal_dir, &meta_dir, &tsdb_dir] {
            fsutil::create_dir_all(d)?;
        }
        fsutil::sync_dir(dir)?;

        let m = manifest::read(&meta_dir.join(MANIFEST_FILE))?;
        let mut files = Vec::with_capacity(m.files.len());
        let listed: HashSet<String> = m.files.iter().map(|id| flush::file_name(*id)).collect();
        for id in &m.files {
            files.push(Arc::new(flush::open(
                &tsdb_dir.join(flush::file_name(*id)),
                *id,
            )?));
        }
        // Orphans: files of a flush or compaction that crashed before its manifest commit.
        if let Ok(rd) = std::fs::read_dir(&tsdb_dir) {
            for ent in rd.flatten() {
                let name = ent.file_name().to_string_lossy().to_string();
                if !listed.contains(&name) {
                    tracing::info!(file = %ent.path().display(), "deleting orphan data file");
                    let _ = std::fs::remove_file(ent.path());
                }
            }
        }
        let mut state = State {
            meta: m.meta,
            mem: Memtable::default(),
            files,
            flushed_seq: m.flushed_seq,
            next_file_id: m.next_file_id,
        };
        let wal_files = wal::list_files(&wal_dir)?;
        let mut applied = m.flushed_seq;
        let last = wal::replay(&wal_files, |seq, payload, path, offset| {
            if seq <= state.flushed_seq {
                return Ok(());
            }
            if seq != applied + 1 {
                return Err(VnodeError::Corruption {
                    file: path.to_path_buf(),
                    offset,
                    reason: format!("WAL records {} to {} are missing", applied + 1, seq - 1),
                });
            }
            let op = op::decode(payload).map_err(|e| VnodeError::Corruption {
                file: path.to_path_buf(),
                offset: offset + (wal::FRAME_BYTES + e.offset) as u64,
                reason: format!("undecodable WAL record {seq}: {}", e.reason),
            })?;
            state.apply_op(op);
            applied = seq;
            Ok(())
        })?;
        let last_seq = last.max(state.flushed_seq);
        let wal = Arc::new(Wal::open(
            &wal_dir,
            cfg.options.wal_level,
            last_seq,
            wal_files,
        )?);
        let buffer_bytes_max = (cfg.options.buffer_mb.max(1) as u64) * MIB;
        let syncer =
            (cfg.options.wal_level < 2 && cfg.options.wal_fsync_period_ms > 0).then(|| {
                Syncer::start(
                    wal.clone(),
                    std::time::Duration::from_millis(cfg.options.wal_fsync_period_ms as u64),
                )
            });
        Ok(Vnode {
            dir: dir.to_path_buf(),
            cfg,
            commit: Mutex::new(()),
            state: RwLock::new(state),
            wal,
            rows_written: AtomicU64::new(0),
            buffer_bytes_max,
            _syncer: syncer,
        })
    }

    pub fn config(&self) -> &VnodeConfig {
        &self.cfg
    }

    fn check_hash(&self, table: &str) -> Result<()> {
        let hash = hash_table_name(&self.cfg.db, table);
        if self.cfg.range.contains(hash) {
            Ok(())
        } else {
            Err(VnodeError::WrongVgroup {
                table: table.to_string(),
                hash,
                range: self.cfg.range,
            })
        }
    }

    /// Validates a whole batch against the catalog; returns the operation to log and apply.
    fn plan_write<'a>(&self, meta: &Meta, batch: &'a WriteBatch) -> Result<ApplyRef<'a>> {
        let mut newest: HashMap<&str, &'a StableSchema> = HashMap::new();
        for s in &batch.schemas {
            let e = newest.entry(s.name.as_str()).or_insert(s);
            if s.version > e.version {
                *e = s;
            }
        }
        let mut updates: HashMap<&str, &'a StableSchema> = HashMap::new();
        for (name, s) in newest {
            if meta.schema_is_news(s) {
                s.validate().map_err(VnodeError::InvalidArgument)?;
                updates.insert(name, s);
            }
        }
        let mut creates: Vec<TableMeta> = Vec::new();
        let mut created: HashMap<&str, usize> = HashMap::new();
        let mut rows = Vec::with_capacity(batch.tables.len());
        let mut next_uid = meta.next_uid;
        for tw in &batch.tables {
            self.check_hash(&tw.table)?;
            let schema = match updates.get(tw.stable.as_str()) {
                Some(s) => *s,
                None => meta
                    .stables
                    .get(&tw.stable)
                    .ok_or_else(|| VnodeError::StableNotFound {
                        stable: tw.stable.clone(),
                        table: tw.table.clone(),
                    })?,
            };
            let existing = match meta.tables.get(&tw.table) {
                Some(t) => Some((t.uid, t.stable.as_str())),
                None => created
                    .get(tw.table.as_str())
                    .and_then(|i| creates.get(*i))
                    .map(|t| (t.uid, t.stable.as_str())),
            };
            let uid = match existing {
                Some((uid, stable)) => {
                    if stable != tw.stable {
                        return Err(VnodeError::SchemaMismatch {
                            table: tw.table.clone(),
                            reason: format!(
                                "the table belongs to STABLE '{stable}', the write names '{}'",
                                tw.stable
                            ),
                        });
                    }
                    uid
                }
                None => {
                    let Some(tags) = &tw.tags else {
                        return Err(VnodeError::TableNotFound {
                            table: tw.table.clone(),
                        });
                    };
                    let tags = schema.coerce_tags(tags.clone()).map_err(|reason| {
                        VnodeError::InvalidTags {
                            table: tw.table.clone(),
                            reason,
                        }
                    })?;
                    let uid = TableUid(next_uid);
                    next_uid += 1;
                    created.insert(tw.table.as_str(), creates.len());
                    creates.push(TableMeta {
                        uid,
                        name: tw.table.clone(),
                        stable: tw.stable.clone(),
                        tags,
                    });
                    uid
                }
            };
            check_columns(&tw.table, schema, &tw.columns)?;
            if tw.num_rows() > 0 {
                rows.push((uid, tw.columns.as_slice()));
            }
        }
        let mut schemas: Vec<&'a StableSchema> = updates.into_values().collect();
        schemas.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(ApplyRef {
            schemas,
            creates,
            rows,
        })
    }

    /// Logs and applies one validated operation; returns its WAL seq and whether the memtable
    /// is over budget. Caller holds the commit lock.
    fn commit_apply(&self, plan: &ApplyRef<'_>) -> Result<(u64, bool)> {
        let payload = op::encode_apply(plan);
        if payload.len() > wal::MAX_RECORD_BYTES as usize {
            return Err(VnodeError::InvalidArgument(format!(
                "the batch encodes to {} bytes, more than the {} bytes one WAL record may hold; split it",
                payload.len(),
                wal::MAX_RECORD_BYTES
            )));
        }
        let seq = self.wal.append(&payload);
        let mut st = self.state.write();
        st.apply(plan);
        Ok((seq, st.mem.bytes() > self.buffer_bytes_max))
    }

    /// Validates every table of the batch, appends one WAL record, applies it, waits for the
    /// group commit. All-or-nothing.
    pub fn write(&self, batch: &WriteBatch) -> Result<WriteOutcome, VnodeError> {
        if batch.db != self.cfg.db {
            return Err(VnodeError::WrongDatabase {
                expected: self.cfg.db.clone(),
                got: batch.db.clone(),
            });
        }
        let guard = self.commit.lock();
        self.wal.check_poisoned()?;
        // Safety cap: if earlier back-pressure flushes failed (e.g. disk full), refuse to
        // grow the memtable past twice its budget; the flush error is returned to the writer.
        if self.state.read().mem.bytes() > self.buffer_bytes_max.saturating_mul(2) {
            self.flush_locked()?;
        }
        let plan = {
            let st = self.state.read();
            self.plan_write(&st.meta, batch)?
        };
        let outcome = WriteOutcome {
            rows: plan
                .rows
                .iter()
                .map(|(_, c)| c.first().map(Column::len).unwrap_or(0) as u64)
                .sum(),
            tables_created: plan.creates.len() as u32,
        };
        if plan.schemas.is_empty() && plan.creates.is_empty() && plan.rows.is_empty() {
            return Ok(outcome);
        }
        let (seq, over) = self.commit_apply(&plan)?;
        drop(guard);
        self.wal.wait_durable(seq)?;
        self.rows_written.fetch_add(outcome.rows, Ordering::Relaxed);
        if over {
            // Back-pressure: the writer that crosses the budget flushes before returning.
            if let Err(e) = self.flush_if_over_budget() {
                tracing::warn!(error = %e, "flush after write failed; the data stays in the WAL");
            }
        }
        Ok(outcome)
    }

    /// CREATE TABLE ... USING `schema` TAGS (...), durably. Existing tables are an error
    /// (TableExists) unless `if_not_exists`. Returns the number of tables created.
    pub fn create_tables(
        &self,
        schema: &StableSchema,
        tables: &[(String, Vec<Value>)],
        if_not_exists: bool,
    ) -> Result<u32, VnodeError> {
        schema.validate().map_err(VnodeError::InvalidArgument)?;
        let guard = self.commit.lock();
        self.wal.check_poisoned()?;
        let plan = {
            let st = self.state.read();
            let meta = &st.meta;
            let update = meta.schema_is_news(schema);
            let eff = match meta.stables.get(&schema.name) {
                Some(s) if !update => s,
                _ => schema,
            };
            let mut creates: Vec<TableMeta> = Vec::new();
            let mut seen: HashSet<&str> = HashSet::new();
            let mut next_uid = meta.next_uid;
            for (name, tags) in tables {
                self.check_hash(name)?;
                if meta.tables.contains_key(name) || seen.contains(name.as_str()) {
                    if if_not_exists {
                        continue;
                    }
                    return Err(VnodeError::TableExists {
                        table: name.clone(),
                    });
                }
                let tags =
                    eff.coerce_tags(tags.clone())
                        .map_err(|reason| VnodeError::InvalidTags {
                            table: name.clone(),
                            reason,
                        })?;
                seen.insert(name.as_str());
                creates.push(TableMeta {
                    uid: TableUid(next_uid),
                    name: name.clone(),
                    stable: schema.name.clone(),
                    tags,
                });
                next_uid += 1;
            }
            ApplyRef {
                schemas: if update { vec![schema] } else { Vec::new() },
                creates,
                rows: Vec::new(),
            }
        };
        let n = plan.creates.len() as u32;
        if plan.schemas.is_empty() && plan.creates.is_empty() {
            return Ok(0);
        }
        let (seq, _) = self.commit_apply(&plan)?;
        drop(guard);
        self.wal.wait_durable(seq)?;
        Ok(n)
    }

    /// DROP TABLE: removes the table and (logically, at once; physically at the next merge)
    /// all its data, durably. `Ok(false)` if the table does not exist.
    pub fn drop_table(&self, name: &str) -> Result<bool, VnodeError> {
        let guard = self.commit.lock();
        self.wal.check_poisoned()?;
        if !self.state.read().meta.tables.contains_key(name) {
            return Ok(false);
        }
        let seq = self.wal.append(&op::encode_drop_table(name));
        self.state.write().drop_table(name);
        drop(guard);
        self.wal.wait_durable(seq)?;
        Ok(true)
    }

    /// DROP STABLE: removes all its subtables and its schema, durably. Returns the number of
    /// subtables dropped (0 if this vnode never saw the STABLE).
    pub fn drop_stable(&self, stable: &str) -> Result<u32, VnodeError> {
        let guard = self.commit.lock();
        self.wal.check_poisoned()?;
        {
            let st = self.state.read();
            if !st.meta.stables.contains_key(stable) && st.meta.tables_of(stable).is_empty() {
                return Ok(0);
            }
        }
        let seq = self.wal.append(&op::encode_drop_stable(stable));
        let n = self.state.write().drop_stable(stable);
        drop(guard);
        self.wal.wait_durable(seq)?;
        Ok(n)
    }

    pub fn table(&self, name: &str) -> Option<TableMeta> {
        self.state.read().meta.tables.get(name).cloned()
    }

    pub fn stable_schema(&self, stable: &str) -> Option<StableSchema> {
        self.state.read().meta.stables.get(stable).cloned()
    }

    /// All subtables, or those of one STABLE; sorted by name.
    pub fn tables(&self, stable: Option<&str>) -> Vec<TableMeta> {
        self.state
            .read()
            .meta
            .tables
            .values()
            .filter(|t| stable.is_none_or(|s| t.stable == s))
            .cloned()
            .collect()
    }

    /// Rows of one subtable with `ts_min <= ts <= ts_max`, ordered by ts, de-duplicated (the
    /// newest write of a ts wins, across data files and memtable), projected to `columns`
    /// (indices into the STABLE's columns, 0 = ts). Returns one Column per requested index.
    pub fn scan(
        &self,
        uid: TableUid,
        ts_min: i64,
        ts_max: i64,
        columns: &[usize],
    ) -> Result<Vec<Column>, VnodeError> {
        let (types, files, mem_rows) = {
            let st = self.state.read();
            let t = st
                .meta
                .table_by_uid(uid)
                .ok_or(VnodeError::TableUidNotFound { uid: uid.0 })?;
            let schema =
                st.meta
                    .stables
                    .get(&t.stable)
                    .ok_or_else(|| VnodeError::StableNotFound {
                        stable: t.stable.clone(),
                        table: t.name.clone(),
                    })?;
            let mut types = Vec::with_capacity(columns.len());
            for &i in columns {
                match schema.columns.get(i) {
                    Some(d) => types.push(d.data_type),
                    None => {
                        return Err(VnodeError::ColumnIndexOutOfRange {
                            stable: schema.name.clone(),
                            index: i,
                            columns: schema.columns.len(),
                        })
                    }
                }
            }
            (types, st.files.clone(), st.mem.range(uid, ts_min, ts_max))
        };
        enum Src {
            File(usize, usize),
            Mem(usize),
        }
        let mut blocks: Vec<Vec<Column>> = Vec::new();
        let mut merged: BTreeMap<i64, Src> = BTreeMap::new();
        if ts_min <= ts_max {
            for f in &files {
                let Some(b) = f.block_ref(uid) else { continue };
                if b.ts_max < ts_min || b.ts_min > ts_max {
                    continue;
                }
                let Some(cols) = f.read_block(uid)? else {
                    continue;
                };
                if let Some(ts) = cols.first() {
                    for i in 0..ts.len() {
                        match ts_at(ts, i) {
                            Some(t) if t >= ts_min && t <= ts_max => {
                                merged.insert(t, Src::File(blocks.len(), i));
                            }
                            _ => {}
                        }
                    }
                }
                blocks.push(cols);
            }
        }
        for (k, (ts, _)) in mem_rows.iter().enumerate() {
            merged.insert(*ts, Src::Mem(k));
        }
        let mut out = Vec::with_capacity(columns.len());
        for (&ci, t) in columns.iter().zip(types) {
            let mut col = Column::empty(t, merged.len());
            for (ts, src) in &merged {
                let v = if ci == 0 {
                    Value::Timestamp(*ts)
                } else {
                    match src {
                        Src::File(b, i) => blocks
                            .get(*b)
                            .and_then(|cols| cols.get(ci))
                            .map(|c| c.get(*i))
                            .unwrap_or(Value::Null),
                        Src::Mem(k) => mem_rows
                            .get(*k)
                            .and_then(|(_, r)| r.get(ci).cloned())
                            .unwrap_or(Value::Null),
                    }
                };
                col.push(&v);
            }
            out.push(col);
        }
        Ok(out)
    }

    /// Persists the memtable to a new data file (or merges all files into one when there are
    /// too many), commits a new manifest, then trims the WAL.
    pub fn flush(&self) -> Result<(), VnodeError> {
        let _guard = self.commit.lock();
        self.flush_locked()
    }

    fn flush_if_over_budget(&self) -> Result<()> {
        let _guard = self.commit.lock();
        if self.state.read().mem.bytes() <= self.buffer_bytes_max {
            return Ok(()); // another writer flushed already
        }
        self.flush_locked()
    }

    /// Caller holds the commit lock, so no mutation runs concurrently; readers continue.
    fn flush_locked(&self) -> Result<()> {
        self.wal.check_poisoned()?;
        let upto = self.wal.last_seq();
        self.wal.wait_durable(upto)?;
        if upto == self.state.read().flushed_seq {
            return Ok(());
        }
        // New mutations go to a new WAL file; the older ones become deletable once the
        // manifest below is committed.
        self.wal.rotate()?;
        let tsdb = self.dir.join("tsdb");
        let st = self.state.read();
        let id = st.next_file_id;
        let types_of = |uid: TableUid| -> Option<Vec<DataType>> {
            let t = st.meta.table_by_uid(uid)?;
            let s = st.meta.stables.get(&t.stable)?;
            Some(s.columns.iter().map(|c| c.data_type).collect())
        };
        let mut removed = Vec::new();
        let new_files: Vec<Arc<DataFile>> = if st.files.len() >= MAX_DATA_FILES {
            let mut w = DataFileWriter::create(&tsdb, id)?;
            let mut uids: Vec<TableUid> = st.meta.by_uid.keys().copied().collect();
            uids.sort();
            for uid in uids {
                let Some(types) = types_of(uid) else { continue };
                let mut rows: BTreeMap<i64, Row> = BTreeMap::new();
                for f in &st.files {
                    if let Some(cols) = f.read_block(uid)? {
                        rows.extend(block_rows(&cols));
                    }
                }
                if let Some(t) = st.mem.table(uid) {
                    rows.extend(t.iter().map(|(k, v)| (*k, v.clone())));
                }
                if rows.is_empty() {
                    continue;
                }
                let cols = rows_to_columns(&types, rows.iter().map(|(k, v)| (*k, v)));
                w.add_block(uid, &cols)?;
            }
            removed.clone_from(&st.files);
            vec![Arc::new(w.finish()?)]
        } else if !st.mem.is_empty() {
            let mut w = DataFileWriter::create(&tsdb, id)?;
            for uid in st.mem.uids() {
                let (Some(types), Some(t)) = (types_of(uid), st.mem.table(uid)) else {
                    continue;
                };
                let cols = rows_to_columns(&types, t.iter().map(|(k, v)| (*k, v)));
                w.add_block(uid, &cols)?;
            }
            let mut v = st.files.clone();
            v.push(Arc::new(w.finish()?));
            v
        } else {
            st.files.clone()
        };
        let ids: Vec<u64> = new_files.iter().map(|f| f.id).collect();
        let bytes = manifest::encode(upto, id + 1, &ids, &st.meta);
        manifest::write(&self.dir.join("meta").join(MANIFEST_FILE), &bytes)?;
        drop(st);
        {
            let mut st = self.state.write();
            st.files = new_files;
            st.mem.clear();
            st.flushed_seq = upto;
            st.next_file_id = id + 1;
        }
        self.wal.trim();
        for f in removed {
            // Readers holding the Arc keep reading the unlinked file.
            if let Err(e) = std::fs::remove_file(&f.path) {
                tracing::warn!(file = %f.path.display(), error = %e, "could not delete merged data file");
            }
        }
        Ok(())
    }

    pub fn stats(&self) -> VnodeStats {
        let st = self.state.read();
        let manifest_bytes = std::fs::metadata(self.dir.join("meta").join(MANIFEST_FILE))
            .map(|m| m.len())
            .unwrap_or(0);
        VnodeStats {
            tables: st.meta.tables.len() as u64,
            rows_written: self.rows_written.load(Ordering::Relaxed),
            mem_bytes: st.mem.bytes(),
            wal_bytes: self.wal.bytes(),
            disk_bytes: st.files.iter().map(|f| f.bytes).sum::<u64>() + manifest_bytes,
        }
    }

    /// Deletes all files of the vnode (DROP DATABASE).
    pub fn destroy(self) -> Result<(), VnodeError> {
        let dir = self.dir.clone();
        drop(self);
        std::fs::remove_dir_all(&dir).map_err(|e| VnodeError::io(&dir, "remove", e))
    }
}
