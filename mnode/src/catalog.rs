//! The catalog state machine: the in-memory catalog and the operations ([`Op`]) that change
//! it. The log stores `Op`s, the snapshot stores a [`PersistedState`]; both are replayed
//! through [`CatalogState::apply`], so the live path and recovery run the same code.
//!
//! Invariants (checked by `apply`, which rejects an op that would break them):
//! - Names of databases and STABLEs are stored lower-case; map keys equal the stored names.
//! - Every STABLE's database exists; dropping a database drops its STABLEs.
//! - Every vgroup's dnode is registered; vgroup ids are unique cluster-wide and below
//!   `next_vgroup_id`; dnode ids are below `next_dnode_id`. The counters only grow, so an id
//!   is never handed out twice, even after the object that held it was dropped.
//! - `apply` is deterministic: all inputs (ids, timestamps, placement) are inside the op.

use crate::types::DatabaseInfo;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tidal_common::{DbOptions, DnodeId, StableSchema, VgroupId};

/// A registered data node as persisted (liveness is not persisted).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DnodeRecord {
    pub id: DnodeId,
    pub addr: String,
    pub created_ms: i64,
}

/// One logged mutation. Carries every value that `apply` needs, so replay is deterministic.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Op {
    RegisterDnode {
        id: DnodeId,
        addr: String,
        created_ms: i64,
    },
    UpdateDnodeAddr {
        id: DnodeId,
        addr: String,
    },
    CreateDatabase {
        db: DatabaseInfo,
    },
    DropDatabase {
        name: String,
    },
    /// ALTER DATABASE: the database's options become `options` (only the alterable ones differ).
    AlterDatabase {
        name: String,
        options: DbOptions,
    },
    CreateStable {
        schema: StableSchema,
    },
    DropStable {
        db: String,
        name: String,
    },
    /// Replaces a STABLE's schema with a newer version (ALTER STABLE ADD COLUMN/TAG). The
    /// new schema extends the old one: same leading columns and tags, version + 1.
    AlterStable {
        schema: StableSchema,
    },
}

/// The snapshot payload: the whole catalog in a map-free, order-stable form.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PersistedState {
    pub next_dnode_id: u32,
    pub next_vgroup_id: u32,
    pub dnodes: Vec<DnodeRecord>,
    pub databases: Vec<DatabaseInfo>,
    pub stables: Vec<StableSchema>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct CatalogState {
    pub next_dnode_id: u32,
    pub next_vgroup_id: u32,
    pub dnodes: BTreeMap<DnodeId, DnodeRecord>,
    pub databases: BTreeMap<String, DatabaseInfo>,
    /// db name -> stable name -> schema.
    pub stables: BTreeMap<String, BTreeMap<String, StableSchema>>,
}

impl CatalogState {
    pub fn new() -> CatalogState {
        CatalogState {
            next_dnode_id: 1,
            next_vgroup_id: 1,
            ..Default::default()
        }
    }

    /// Applies one op; an `Err` means the op does not fit the state (a bug or corruption) and
    /// leaves the state unchanged.
    pub fn apply(&mut self, op: &Op) -> Result<(), String> {
        match op {
            Op::RegisterDnode {
                id,
                addr,
                created_ms,
            } => {
                if self.dnodes.contains_key(id) {
                    return Err(format!("dnode {id} is already registered"));
                }
                if id.0 < self.next_dnode_id || id.0 == u32::MAX {
                    return Err(format!("dnode id {id} would be reused"));
                }
                self.dnodes.insert(
                    *id,
                    DnodeRecord {
                        id: *id,
                        addr: addr.clone(),
                        created_ms: *created_ms,
                    },
                );
                self.next_dnode_id = id.0 + 1;
            }
            Op::UpdateDnodeAddr { id, addr } => match self.dnodes.get_mut(id) {
                Some(d) => d.addr = addr.clone(),
                None => return Err(format!("dnode {id} is not registered")),
            },
            Op::CreateDatabase { db } => {
                if self.databases.contains_key(&db.name) {
                    return Err(format!("database '{}' already exists", db.name));
                }
                let mut next = self.next_vgroup_id;
                for vg in &db.vgroups {
                    if vg.id.0 < next || vg.id.0 == u32::MAX {
                        return Err(format!("vgroup id {} would be reused", vg.id));
                    }
                    if !self.dnodes.contains_key(&vg.dnode) {
                        return Err(format!(
                            "vgroup {} placed on unregistered dnode {}",
                            vg.id, vg.dnode
                        ));
                    }
                    next = vg.id.0 + 1;
                }
                self.next_vgroup_id = next;
                self.databases.insert(db.name.clone(), db.clone());
            }
            Op::DropDatabase { name } => {
                if self.databases.remove(name).is_none() {
                    return Err(format!("database '{name}' not found"));
                }
                self.stables.remove(name);
            }
            Op::AlterDatabase { name, options } => match self.databases.get_mut(name) {
                Some(db) => db.options = options.clone(),
                None => return Err(format!("database '{name}' not found")),
            },
            Op::CreateStable { schema } => {
                if !self.databases.contains_key(&schema.db) {
                    return Err(format!("database '{}' not found", schema.db));
                }
                let m = self.stables.entry(schema.db.clone()).or_default();
                if m.contains_key(&schema.name) {
                    return Err(format!(
                        "STABLE '{}.{}' already exists",
                        schema.db, schema.name
                    ));
                }
                m.insert(schema.name.clone(), schema.clone());
            }
            Op::AlterStable { schema } => {
                let Some(old) = self
                    .stables
                    .get_mut(&schema.db)
                    .and_then(|m| m.get_mut(&schema.name))
                else {
                    return Err(format!("STABLE '{}.{}' not found", schema.db, schema.name));
                };
                let extends = schema.version.0 == old.version.0 + 1
                    && schema.columns.starts_with(&old.columns)
                    && schema.tags.starts_with(&old.tags);
                if !extends {
                    return Err(format!(
                        "schema version {} of STABLE '{}.{}' does not extend version {}",
                        schema.version, schema.db, schema.name, old.version
                    ));
                }
                *old = schema.clone();
            }
            Op::DropStable { db, name } => {
                let removed = self.stables.get_mut(db).and_then(|m| m.remove(name));
                if removed.is_none() {
                    return Err(format!("STABLE '{db}.{name}' not found"));
                }
                if self.stables.get(db).is_some_and(|m| m.is_empty()) {
                    self.stables.remove(db);
                }
            }
        }
        Ok(())
    }

    pub fn to_persisted(&self) -> PersistedState {
        PersistedState {
            next_dnode_id: self.next_dnode_id,
            next_vgroup_id: self.next_vgroup_id,
            dnodes: self.dnodes.values().cloned().collect(),
            databases: self.databases.values().cloned().collect(),
            stables: self
                .stables
                .values()
                .flat_map(|m| m.values().cloned())
                .collect(),
        }
    }

    /// Rebuilds a state from a snapshot, checking the same invariants `apply` keeps.
    pub fn from_persisted(p: PersistedState) -> Result<CatalogState, String> {
        let mut s = CatalogState::new();
        for d in p.dnodes {
            s.apply(&Op::RegisterDnode {
                id: d.id,
                addr: d.addr,
                created_ms: d.created_ms,
            })?;
        }
        // Vgroup ids must be applied in increasing order; databases are stored by name.
        let mut dbs = p.databases;
        dbs.sort_by_key(|d| d.vgroups.first().map(|v| v.id).unwrap_or(VgroupId(0)));
        for db in dbs {
            s.apply(&Op::CreateDatabase { db })?;
        }
        for schema in p.stables {
            s.apply(&Op::CreateStable { schema })?;
        }
        if p.next_dnode_id < s.next_dnode_id || p.next_vgroup_id < s.next_vgroup_id {
            return Err("id counters are below ids in use".to_string());
        }
        s.next_dnode_id = p.next_dnode_id;
        s.next_vgroup_id = p.next_vgroup_id;
        Ok(s)
    }

    /// Number of vnodes placed on each dnode.
    pub fn vnode_count(&self, id: DnodeId) -> u32 {
        self.databases
            .values()
            .flat_map(|d| d.vgroups.iter())
            .filter(|v| v.dnode == id)
            .count() as u32
    }
}
