//! [`Mnode`]: the catalog service object. Validates requests, turns each accepted mutation into
//! one [`Op`], makes it durable through the [`Sdb`] and only then applies it to the in-memory
//! [`CatalogState`].
//!
//! Concurrency: `sdb` (a mutex) serializes mutations end to end — validate, log, apply — so the
//! state a mutation validated against is the state it applies to. Readers take only the
//! `state` read lock, which a mutation holds for writing just while applying an op (never
//! across an fsync). Liveness (`last_seen`) lives in its own mutex and is never logged.
//! Lock order: `sdb` -> `state` -> `last_seen`.
//!
//! Liveness after a restart: the mnode does not persist heartbeats; on open every registered
//! dnode is treated as if it had just heartbeated, so it counts as alive for one
//! `dnode_timeout_ms` and then only if it keeps heartbeating. CREATE DATABASE right after a
//! restart may therefore place vgroups on a dnode that is actually down; the vgroup is
//! served as soon as that dnode comes back and heartbeats (REPLICA 1 has no failover).

use crate::catalog::{CatalogState, Op, PersistedState};
use crate::error::MnodeError;
use crate::sdb::Sdb;
use crate::types::{DatabaseInfo, DnodeInfo, MnodeConfig, VgroupAssignment, VgroupInfo};
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};
use tidal_common::{
    split_hash_space, ColumnDef, DbOptions, DnodeId, SchemaVersion, StableSchema, VgroupId,
};

/// Longest database name.
pub const MAX_DB_NAME: usize = 64;
/// Longest STABLE name (TDengine allows 192 for table names).
pub const MAX_STABLE_NAME: usize = 192;
/// Longest column or tag name.
pub const MAX_COLUMN_NAME: usize = 64;
/// Longest dnode address.
pub const MAX_ADDR: usize = 255;

pub struct Mnode {
    config: MnodeConfig,
    pub(crate) sdb: Mutex<Sdb>,
    pub(crate) state: RwLock<CatalogState>,
    /// Per data node: when it was last seen (for liveness) and the wall-clock ms of its last
    /// real heartbeat or registration (0 = none since this mnode opened).
    last_seen: Mutex<HashMap<DnodeId, (Instant, i64)>>,
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Lower-cases `name` and checks it is `[a-z_][a-z0-9_]*` of at most `max` bytes.
pub(crate) fn normalize_name(kind: &str, name: &str, max: usize) -> Result<String, MnodeError> {
    let n = name.to_ascii_lowercase();
    let mut chars = n.chars();
    let ok_first = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_');
    let ok_rest = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !ok_first || !ok_rest {
        return Err(MnodeError::InvalidArgument(format!(
            "invalid {kind} name '{name}': use letters, digits and '_', not starting with a digit"
        )));
    }
    if n.len() > max {
        return Err(MnodeError::InvalidArgument(format!(
            "{kind} name '{name}' is longer than {max} characters"
        )));
    }
    Ok(n)
}

/// Normalizes a name for lookup; `None` if it cannot be a valid name.
pub(crate) fn lookup_name(name: &str, max: usize) -> Option<String> {
    normalize_name("", name, max).ok()
}

impl Mnode {
    /// Opens (creating or recovering) the catalog in `dir` with the default configuration.
    pub fn open(dir: &Path) -> Result<Mnode, MnodeError> {
        Mnode::open_with(dir, MnodeConfig::default())
    }

    pub fn open_with(dir: &Path, config: MnodeConfig) -> Result<Mnode, MnodeError> {
        let (mut sdb, rec) = Sdb::open(dir)?;
        let mut state = match rec.snapshot {
            None => CatalogState::new(),
            Some((_, payload)) => {
                let p: PersistedState = serde_json::from_slice(&payload).map_err(|e| {
                    MnodeError::corruption(sdb.snapshot_path(), 16, format!("bad snapshot: {e}"))
                })?;
                CatalogState::from_persisted(p).map_err(|e| {
                    MnodeError::corruption(sdb.snapshot_path(), 16, format!("bad snapshot: {e}"))
                })?
            }
        };
        for r in &rec.records {
            let op: Op = serde_json::from_slice(&r.payload).map_err(|e| {
                MnodeError::corruption(
                    sdb.log_path(),
                    r.offset,
                    format!("undecodable op (seq {}): {e}", r.seq),
                )
            })?;
            state.apply(&op).map_err(|e| {
                MnodeError::corruption(
                    sdb.log_path(),
                    r.offset,
                    format!("op (seq {}) does not apply: {e}", r.seq),
                )
            })?;
        }
        if sdb.log_records() >= config.snapshot_every.max(1) {
            let bytes = serde_json::to_vec(&state.to_persisted())
                .map_err(|e| MnodeError::InvalidArgument(e.to_string()))?;
            // Best effort: on failure the log simply stays long (see `commit`).
            let _ = sdb.write_snapshot(&bytes);
        }
        let now = Instant::now();
        let last_seen = state.dnodes.keys().map(|id| (*id, (now, 0))).collect();
        Ok(Mnode {
            config,
            sdb: Mutex::new(sdb),
            state: RwLock::new(state),
            last_seen: Mutex::new(last_seen),
        })
    }

    /// Logs `op`, applies it, and snapshots when the log is long. Caller holds `sdb`.
    pub(crate) fn commit(&self, sdb: &mut Sdb, op: Op) -> Result<(), MnodeError> {
        let payload = serde_json::to_vec(&op)
            .map_err(|e| MnodeError::InvalidArgument(format!("cannot encode op: {e}")))?;
        sdb.append(&payload)?;
        {
            let mut st = self.state.write();
            if let Err(e) = st.apply(&op) {
                // Cannot happen: the op was validated under the same `sdb` lock. Recovery
                // would refuse this log, so stop accepting mutations rather than diverge.
                let reason = format!("logged op does not apply: {e}");
                sdb.poison(reason.clone());
                return Err(MnodeError::corruption(sdb.log_path(), 0, reason));
            }
        }
        if sdb.log_records() >= self.config.snapshot_every.max(1) {
            let bytes = serde_json::to_vec(&self.state.read().to_persisted());
            // The op is durable; a failed snapshot only means the log keeps growing (or, if
            // the store is poisoned by it, that the next mutation reports the failure).
            if let Ok(bytes) = bytes {
                let _ = sdb.write_snapshot(&bytes);
            }
        }
        Ok(())
    }

    /// A data node announces itself. `known_id` is the id it persisted from an earlier
    /// registration (`None` on first start). A known id keeps its id (its address is updated
    /// if it changed); an unknown id or `None` gets a new id. Counts as a heartbeat.
    pub fn register_dnode(
        &self,
        addr: &str,
        known_id: Option<DnodeId>,
    ) -> Result<DnodeId, MnodeError> {
        let addr = addr.trim();
        if addr.is_empty() || addr.len() > MAX_ADDR || addr.chars().any(|c| c.is_control()) {
            return Err(MnodeError::InvalidArgument(format!(
                "invalid dnode address '{addr}'"
            )));
        }
        let mut sdb = self.sdb.lock();
        let (op, id) = {
            let st = self.state.read();
            match known_id.and_then(|id| st.dnodes.get(&id)) {
                Some(d) if d.addr == addr => (None, d.id),
                Some(d) => (
                    Some(Op::UpdateDnodeAddr {
                        id: d.id,
                        addr: addr.to_string(),
                    }),
                    d.id,
                ),
                None => {
                    if st.next_dnode_id == u32::MAX {
                        return Err(MnodeError::InvalidArgument(
                            "dnode ids exhausted".to_string(),
                        ));
                    }
                    let id = DnodeId(st.next_dnode_id);
                    (
                        Some(Op::RegisterDnode {
                            id,
                            addr: addr.to_string(),
                            created_ms: now_ms(),
                        }),
                        id,
                    )
                }
            }
        };
        if let Some(op) = op {
            self.commit(&mut sdb, op)?;
        }
        self.last_seen.lock().insert(id, (Instant::now(), now_ms()));
        Ok(id)
    }

    /// Records liveness (in memory only) and returns the vgroups this dnode must host,
    /// ordered by database name and hash range.
    pub fn heartbeat(&self, id: DnodeId) -> Result<Vec<VgroupAssignment>, MnodeError> {
        let st = self.state.read();
        if !st.dnodes.contains_key(&id) {
            return Err(MnodeError::UnknownDnode(id));
        }
        self.last_seen.lock().insert(id, (Instant::now(), now_ms()));
        Ok(st
            .databases
            .values()
            .flat_map(|db| {
                db.vgroups
                    .iter()
                    .filter(|v| v.dnode == id)
                    .map(|v| VgroupAssignment {
                        db: db.name.clone(),
                        options: db.options.clone(),
                        vgroup: v.clone(),
                    })
            })
            .collect())
    }

    fn alive_set(&self, st: &CatalogState) -> HashMap<DnodeId, bool> {
        let timeout = Duration::from_millis(self.config.dnode_timeout_ms);
        let seen = self.last_seen.lock();
        st.dnodes
            .keys()
            .map(|id| {
                let alive = seen.get(id).is_some_and(|(t, _)| t.elapsed() <= timeout);
                (*id, alive)
            })
            .collect()
    }

    /// All registered data nodes, by id.
    pub fn dnodes(&self) -> Vec<DnodeInfo> {
        let st = self.state.read();
        let alive = self.alive_set(&st);
        let seen = self.last_seen.lock();
        st.dnodes
            .values()
            .map(|d| DnodeInfo {
                id: d.id,
                addr: d.addr.clone(),
                vnodes: st.vnode_count(d.id),
                alive: alive.get(&d.id).copied().unwrap_or(false),
                created_ms: d.created_ms,
                last_heartbeat_ms: seen.get(&d.id).map(|(_, ms)| *ms).unwrap_or(0),
            })
            .collect()
    }

    /// One data node, if registered.
    pub fn dnode(&self, id: DnodeId) -> Option<DnodeInfo> {
        self.dnodes().into_iter().find(|d| d.id == id)
    }

    /// Creates a database and places its `options.vgroups` vgroups over the alive dnodes,
    /// each on the one with the fewest vnodes (ties: lowest id), which is round-robin when
    /// the dnodes start even.
    pub fn create_database(
        &self,
        name: &str,
        options: DbOptions,
        if_not_exists: bool,
    ) -> Result<DatabaseInfo, MnodeError> {
        let name = normalize_name("database", name, MAX_DB_NAME)?;
        let mut sdb = self.sdb.lock();
        let db = {
            let st = self.state.read();
            if let Some(db) = st.databases.get(&name) {
                return if if_not_exists {
                    Ok(db.clone())
                } else {
                    Err(MnodeError::DatabaseExists(name))
                };
            }
            options
                .validate()
                .map_err(|e| MnodeError::InvalidArgument(format!("database '{name}': {e}")))?;
            let alive = self.alive_set(&st);
            let mut load: Vec<(u32, DnodeId)> = st
                .dnodes
                .keys()
                .filter(|id| alive.get(id).copied().unwrap_or(false))
                .map(|id| (st.vnode_count(*id), *id))
                .collect();
            if load.is_empty() {
                return Err(MnodeError::NoDnodes {
                    db: name,
                    vgroups: options.vgroups,
                });
            }
            let first = st.next_vgroup_id;
            if (u32::MAX - first) < options.vgroups {
                return Err(MnodeError::InvalidArgument(
                    "vgroup ids exhausted".to_string(),
                ));
            }
            let vgroups = split_hash_space(options.vgroups)
                .into_iter()
                .enumerate()
                .map(|(i, range)| {
                    let slot = load.iter_mut().min().expect("load is not empty");
                    slot.0 += 1;
                    VgroupInfo {
                        id: VgroupId(first + i as u32),
                        range,
                        dnode: slot.1,
                    }
                })
                .collect();
            DatabaseInfo {
                name: name.clone(),
                options,
                created_ms: now_ms(),
                vgroups,
            }
        };
        self.commit(&mut sdb, Op::CreateDatabase { db: db.clone() })?;
        Ok(db)
    }

    /// Drops a database and its STABLEs. Returns what was dropped (`None` only with
    /// `if_exists` and no such database).
    pub fn drop_database(
        &self,
        name: &str,
        if_exists: bool,
    ) -> Result<Option<DatabaseInfo>, MnodeError> {
        let key = lookup_name(name, MAX_DB_NAME);
        let mut sdb = self.sdb.lock();
        let found = key.and_then(|k| self.state.read().databases.get(&k).cloned());
        match found {
            None if if_exists => Ok(None),
            None => Err(MnodeError::DatabaseNotFound(name.to_ascii_lowercase())),
            Some(db) => {
                self.commit(
                    &mut sdb,
                    Op::DropDatabase {
                        name: db.name.clone(),
                    },
                )?;
                Ok(Some(db))
            }
        }
    }

    /// ALTER DATABASE: replaces the options of a database. Only CACHEMODEL, CACHESIZE, KEEP,
    /// BUFFER, STT_TRIGGER and MINROWS may differ from the current ones.
    pub fn alter_database(
        &self,
        name: &str,
        options: DbOptions,
    ) -> Result<DatabaseInfo, MnodeError> {
        let key = lookup_name(name, MAX_DB_NAME)
            .ok_or_else(|| MnodeError::DatabaseNotFound(name.to_ascii_lowercase()))?;
        let mut sdb = self.sdb.lock();
        let mut db = self
            .state
            .read()
            .databases
            .get(&key)
            .cloned()
            .ok_or_else(|| MnodeError::DatabaseNotFound(key.clone()))?;
        let fixed = |o: &DbOptions| {
            (
                o.vgroups,
                o.replica,
                o.precision,
                o.duration_minutes,
                o.maxrows,
                o.comp,
                o.wal_level,
                o.wal_fsync_period_ms,
            )
        };
        if fixed(&options) != fixed(&db.options) {
            return Err(MnodeError::InvalidArgument(format!(
                "database '{key}': only CACHEMODEL, CACHESIZE, KEEP, BUFFER, STT_TRIGGER and MINROWS can be altered"
            )));
        }
        options
            .validate()
            .map_err(|e| MnodeError::InvalidArgument(format!("database '{key}': {e}")))?;
        self.commit(
            &mut sdb,
            Op::AlterDatabase {
                name: key,
                options: options.clone(),
            },
        )?;
        db.options = options;
        Ok(db)
    }

    pub fn database(&self, name: &str) -> Option<DatabaseInfo> {
        let key = lookup_name(name, MAX_DB_NAME)?;
        self.state.read().databases.get(&key).cloned()
    }

    /// All databases, sorted by name.
    pub fn databases(&self) -> Vec<DatabaseInfo> {
        self.state.read().databases.values().cloned().collect()
    }

    /// Creates a STABLE. Database and STABLE names are lower-cased; column and tag names are
    /// kept as given. The stored schema has version 1.
    pub fn create_stable(
        &self,
        schema: StableSchema,
        if_not_exists: bool,
    ) -> Result<StableSchema, MnodeError> {
        let db = normalize_name("database", &schema.db, MAX_DB_NAME)?;
        let name = normalize_name("STABLE", &schema.name, MAX_STABLE_NAME)?;
        let schema = StableSchema {
            db,
            name,
            version: SchemaVersion(1),
            ..schema
        };
        for c in schema.columns.iter().chain(schema.tags.iter()) {
            if c.name.is_empty()
                || c.name.len() > MAX_COLUMN_NAME
                || c.name.chars().any(|ch| ch.is_control())
            {
                return Err(MnodeError::InvalidArgument(format!(
                    "invalid column or tag name '{}' in STABLE '{}.{}'",
                    c.name, schema.db, schema.name
                )));
            }
        }
        schema.validate().map_err(MnodeError::InvalidArgument)?;
        let mut sdb = self.sdb.lock();
        {
            let st = self.state.read();
            if !st.databases.contains_key(&schema.db) {
                return Err(MnodeError::DatabaseNotFound(schema.db));
            }
            if let Some(existing) = st.stables.get(&schema.db).and_then(|m| m.get(&schema.name)) {
                return if if_not_exists {
                    Ok(existing.clone())
                } else {
                    Err(MnodeError::StableExists {
                        db: schema.db,
                        name: schema.name,
                    })
                };
            }
        }
        self.commit(
            &mut sdb,
            Op::CreateStable {
                schema: schema.clone(),
            },
        )?;
        Ok(schema)
    }

    /// Drops a STABLE. The database must exist even with `if_exists`.
    pub fn drop_stable(
        &self,
        db: &str,
        name: &str,
        if_exists: bool,
    ) -> Result<Option<StableSchema>, MnodeError> {
        let db_key = lookup_name(db, MAX_DB_NAME);
        let name_key = lookup_name(name, MAX_STABLE_NAME);
        let mut sdb = self.sdb.lock();
        let found = {
            let st = self.state.read();
            let db_key = match db_key.filter(|k| st.databases.contains_key(k)) {
                Some(k) => k,
                None => return Err(MnodeError::DatabaseNotFound(db.to_ascii_lowercase())),
            };
            name_key.and_then(|n| st.stables.get(&db_key).and_then(|m| m.get(&n)).cloned())
        };
        match found {
            None if if_exists => Ok(None),
            None => Err(MnodeError::StableNotFound {
                db: db.to_ascii_lowercase(),
                name: name.to_ascii_lowercase(),
            }),
            Some(s) => {
                self.commit(
                    &mut sdb,
                    Op::DropStable {
                        db: s.db.clone(),
                        name: s.name.clone(),
                    },
                )?;
                Ok(Some(s))
            }
        }
    }

    /// ALTER STABLE ADD COLUMN / ADD TAG: appends `add_columns` and `add_tags` (names kept as
    /// given, checked like CREATE STABLE's) and bumps the version. Existing subtables see the
    /// new columns as NULL and the new tags as NULL. Appending keeps every earlier version a
    /// prefix of the new one, which is what lets vnodes and readers mix versions.
    pub fn alter_stable(
        &self,
        db: &str,
        name: &str,
        add_columns: Vec<ColumnDef>,
        add_tags: Vec<ColumnDef>,
    ) -> Result<StableSchema, MnodeError> {
        self.alter_stable_with(
            db,
            name,
            StableAlteration {
                add_columns,
                add_tags,
                ..StableAlteration::default()
            },
        )
    }

    /// ALTER STABLE with every change it supports: ADD COLUMN/TAG (appended, as
    /// [`Mnode::alter_stable`]), MODIFY COLUMN/TAG (a VARCHAR or NCHAR gets a larger width)
    /// and RENAME TAG. None of them moves or retypes a stored column or tag, so every earlier
    /// version stays a prefix of the new one by position and physical type (what vnodes and
    /// readers rely on); DROP COLUMN/TAG would not, and is refused by the SQL layer.
    pub fn alter_stable_with(
        &self,
        db: &str,
        name: &str,
        change: StableAlteration,
    ) -> Result<StableSchema, MnodeError> {
        let db_key = lookup_name(db, MAX_DB_NAME)
            .ok_or_else(|| MnodeError::DatabaseNotFound(db.to_ascii_lowercase()))?;
        let name_key =
            lookup_name(name, MAX_STABLE_NAME).ok_or_else(|| MnodeError::StableNotFound {
                db: db_key.clone(),
                name: name.to_ascii_lowercase(),
            })?;
        if change.is_empty() {
            return Err(MnodeError::InvalidArgument(format!(
                "ALTER STABLE '{db_key}.{name_key}' adds nothing"
            )));
        }
        let mut sdb = self.sdb.lock();
        let schema = {
            let st = self.state.read();
            if !st.databases.contains_key(&db_key) {
                return Err(MnodeError::DatabaseNotFound(db_key));
            }
            let Some(old) = st.stables.get(&db_key).and_then(|m| m.get(&name_key)) else {
                return Err(MnodeError::StableNotFound {
                    db: db_key,
                    name: name_key,
                });
            };
            let what = format!("STABLE '{db_key}.{name_key}'");
            let mut schema = old.clone();
            let new_names = change
                .add_columns
                .iter()
                .chain(change.add_tags.iter())
                .map(|c| c.name.as_str())
                .chain(change.rename_tags.iter().map(|(_, to)| to.as_str()));
            for n in new_names {
                if n.is_empty() || n.len() > MAX_COLUMN_NAME || n.chars().any(|ch| ch.is_control())
                {
                    return Err(MnodeError::InvalidArgument(format!(
                        "invalid column or tag name '{n}' in {what}"
                    )));
                }
            }
            for c in change.add_columns.iter().chain(change.add_tags.iter()) {
                if c.data_type == tidal_common::DataType::Timestamp {
                    return Err(MnodeError::InvalidArgument(format!(
                        "cannot add TIMESTAMP column or tag '{}' to {what}: only the first column is a timestamp",
                        c.name
                    )));
                }
            }
            for (defs, new, kind) in [
                (&mut schema.columns, &change.modify_columns, "column"),
                (&mut schema.tags, &change.modify_tags, "tag"),
            ] {
                for m in new {
                    let Some(cur) = defs
                        .iter_mut()
                        .find(|c| c.name.eq_ignore_ascii_case(&m.name))
                    else {
                        return Err(MnodeError::InvalidArgument(format!(
                            "{what} has no {kind} '{}' to modify",
                            m.name
                        )));
                    };
                    widen(cur, m.data_type).map_err(|why| {
                        MnodeError::InvalidArgument(format!(
                            "cannot modify {kind} '{}' of {what} from {} to {}: {why}",
                            cur.name, cur.data_type, m.data_type
                        ))
                    })?;
                }
            }
            for (from, to) in &change.rename_tags {
                let Some(t) = schema
                    .tags
                    .iter_mut()
                    .find(|c| c.name.eq_ignore_ascii_case(from))
                else {
                    return Err(MnodeError::InvalidArgument(format!(
                        "{what} has no tag '{from}' to rename"
                    )));
                };
                t.name = to.clone();
            }
            schema.columns.extend(change.add_columns);
            schema.tags.extend(change.add_tags);
            schema.version = SchemaVersion(old.version.0.saturating_add(1));
            // `validate` reports duplicate names (case-insensitive), including a name already
            // used by an existing column or tag (an added one or a tag's new name).
            schema.validate().map_err(MnodeError::InvalidArgument)?;
            // The rule the catalog applies to the logged op: checked here so that a change it
            // would refuse is an error for this caller, never a log record that cannot apply.
            if !crate::catalog::extends(old, &schema) {
                return Err(MnodeError::InvalidArgument(format!(
                    "the change would not keep {what}'s columns and tags in place"
                )));
            }
            schema
        };
        self.commit(
            &mut sdb,
            Op::AlterStable {
                schema: schema.clone(),
            },
        )?;
        Ok(schema)
    }

    pub fn stable(&self, db: &str, name: &str) -> Option<StableSchema> {
        let db = lookup_name(db, MAX_DB_NAME)?;
        let name = lookup_name(name, MAX_STABLE_NAME)?;
        self.state.read().stables.get(&db)?.get(&name).cloned()
    }

    /// The STABLEs of a database, sorted by name (empty if the database does not exist).
    pub fn stables(&self, db: &str) -> Vec<StableSchema> {
        let Some(db) = lookup_name(db, MAX_DB_NAME) else {
            return Vec::new();
        };
        self.state
            .read()
            .stables
            .get(&db)
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    /// The database and placement of a vgroup.
    pub fn vgroup(&self, id: VgroupId) -> Option<(String, VgroupInfo)> {
        let st = self.state.read();
        st.databases.values().find_map(|db| {
            db.vgroups
                .iter()
                .find(|v| v.id == id)
                .map(|v| (db.name.clone(), v.clone()))
        })
    }

    pub fn config(&self) -> &MnodeConfig {
        &self.config
    }

    /// Seq of the last durable catalog op (0 for an empty catalog). Useful as a catalog
    /// version for caches.
    pub fn last_seq(&self) -> u64 {
        self.sdb.lock().last_seq()
    }

    /// Writes a snapshot of the catalog and empties the log, so that the next open replays
    /// nothing (graceful shutdown). Returns the number of log records the snapshot absorbed.
    pub fn checkpoint(&self) -> Result<u64, MnodeError> {
        let mut sdb = self.sdb.lock();
        let records = sdb.log_records();
        if records == 0 {
            return Ok(0);
        }
        let bytes = serde_json::to_vec(&self.state.read().to_persisted())
            .map_err(|e| MnodeError::InvalidArgument(format!("cannot encode snapshot: {e}")))?;
        sdb.write_snapshot(&bytes)?;
        Ok(records)
    }
}

/// The changes of one ALTER STABLE (see [`Mnode::alter_stable_with`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StableAlteration {
    pub add_columns: Vec<ColumnDef>,
    pub add_tags: Vec<ColumnDef>,
    /// Columns by name with their new (wider) type.
    pub modify_columns: Vec<ColumnDef>,
    pub modify_tags: Vec<ColumnDef>,
    /// (tag, new name).
    pub rename_tags: Vec<(String, String)>,
}

impl StableAlteration {
    pub fn is_empty(&self) -> bool {
        self.add_columns.is_empty()
            && self.add_tags.is_empty()
            && self.modify_columns.is_empty()
            && self.modify_tags.is_empty()
            && self.rename_tags.is_empty()
    }
}

/// Gives `def` the type `to` when that only widens a VARCHAR or NCHAR (stored values keep
/// their bytes; a narrower width could make stored values invalid).
fn widen(def: &mut ColumnDef, to: tidal_common::DataType) -> Result<(), &'static str> {
    use tidal_common::DataType as T;
    match (def.data_type, to) {
        (T::VarChar(a), T::VarChar(b)) | (T::NChar(a), T::NChar(b)) if b > a => {
            def.data_type = to;
            Ok(())
        }
        (T::VarChar(_), T::VarChar(_)) | (T::NChar(_), T::NChar(_)) => {
            Err("the width can only grow")
        }
        _ => Err("only the width of a VARCHAR or NCHAR can change"),
    }
}
