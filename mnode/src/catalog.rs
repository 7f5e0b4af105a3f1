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
//! - Users: names are lower-case and unique; a user's `version` is unique cluster-wide and
//!   below `next_user_version` (a re-created user never matches an old token); privileges
//!   name existing databases or `*`; DROP DATABASE removes the privileges on it. Every op
//!   that changes what a token may do bumps `auth_epoch` (data nodes refetch the table).
//! - The cluster secret is set once (`InitAuth`) and never changes.

use crate::types::{DatabaseInfo, Privilege};
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

/// A user as persisted. `password_hash` is an Argon2id PHC string (salt included); the
/// password itself is never stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UserRecord {
    pub name: String,
    pub password_hash: String,
    pub superuser: bool,
    /// Changes whenever the password changes; tokens carry it, so a password change ends
    /// every session of the user.
    pub version: u64,
    pub created_ms: i64,
    /// Database (or `*`) -> privilege; never holds an empty privilege.
    pub privileges: BTreeMap<String, Privilege>,
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
    /// First start: the cluster secret (signs every token) and the superuser `root`.
    InitAuth {
        secret_hex: String,
        root: UserRecord,
    },
    CreateUser {
        user: UserRecord,
    },
    /// ALTER USER ... PASS: a new hash and a new version.
    SetPassword {
        name: String,
        password_hash: String,
        version: u64,
    },
    DropUser {
        name: String,
    },
    /// GRANT (adds the flagged privileges) or REVOKE (removes them) on `db` (or `*`).
    Grant {
        user: String,
        db: String,
        privilege: Privilege,
        revoke: bool,
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
    /// Catalogs written before users existed have none of the fields below.
    #[serde(default)]
    pub cluster_secret_hex: String,
    #[serde(default)]
    pub users: Vec<UserRecord>,
    #[serde(default)]
    pub next_user_version: u64,
    #[serde(default)]
    pub auth_epoch: u64,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct CatalogState {
    pub next_dnode_id: u32,
    pub next_vgroup_id: u32,
    pub dnodes: BTreeMap<DnodeId, DnodeRecord>,
    pub databases: BTreeMap<String, DatabaseInfo>,
    /// db name -> stable name -> schema.
    pub stables: BTreeMap<String, BTreeMap<String, StableSchema>>,
    /// Hex of the cluster secret; empty until `InitAuth`.
    pub cluster_secret_hex: String,
    pub users: BTreeMap<String, UserRecord>,
    pub next_user_version: u64,
    /// Bumped by every op that changes users or privileges.
    pub auth_epoch: u64,
}

impl CatalogState {
    pub fn new() -> CatalogState {
        CatalogState {
            next_dnode_id: 1,
            next_vgroup_id: 1,
            next_user_version: 1,
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
                let mut revoked = false;
                for u in self.users.values_mut() {
                    revoked |= u.privileges.remove(name).is_some();
                }
                if revoked {
                    self.auth_epoch += 1;
                }
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
                if !extends(old, schema) {
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
            Op::InitAuth { secret_hex, root } => {
                if !self.cluster_secret_hex.is_empty() {
                    return Err("the cluster secret is already set".to_string());
                }
                if secret_hex.len() < 32 || !secret_hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err("the cluster secret is not a hex string of 16+ bytes".to_string());
                }
                if !root.superuser {
                    return Err(format!("initial user '{}' is not a superuser", root.name));
                }
                self.insert_user(root)?;
                self.cluster_secret_hex = secret_hex.clone();
            }
            Op::CreateUser { user } => self.insert_user(user)?,
            Op::SetPassword {
                name,
                password_hash,
                version,
            } => {
                if *version < self.next_user_version {
                    return Err(format!("user version {version} would be reused"));
                }
                let Some(u) = self.users.get_mut(name) else {
                    return Err(format!("user '{name}' not found"));
                };
                u.password_hash = password_hash.clone();
                u.version = *version;
                self.next_user_version = version + 1;
                self.auth_epoch += 1;
            }
            Op::DropUser { name } => {
                match self.users.get(name) {
                    None => return Err(format!("user '{name}' not found")),
                    Some(u) if u.superuser => {
                        return Err(format!("superuser '{name}' cannot be dropped"))
                    }
                    Some(_) => {}
                }
                self.users.remove(name);
                self.auth_epoch += 1;
            }
            Op::Grant {
                user,
                db,
                privilege,
                revoke,
            } => {
                if db != "*" && !self.databases.contains_key(db) {
                    return Err(format!("database '{db}' not found"));
                }
                let Some(u) = self.users.get_mut(user) else {
                    return Err(format!("user '{user}' not found"));
                };
                let cur = u.privileges.get(db).copied().unwrap_or_default();
                let new = if *revoke {
                    cur.without(*privilege)
                } else {
                    cur.with(*privilege)
                };
                if new.is_empty() {
                    u.privileges.remove(db);
                } else {
                    u.privileges.insert(db.clone(), new);
                }
                self.auth_epoch += 1;
            }
        }
        Ok(())
    }

    fn insert_user(&mut self, user: &UserRecord) -> Result<(), String> {
        if self.users.contains_key(&user.name) {
            return Err(format!("user '{}' already exists", user.name));
        }
        if user.version < self.next_user_version {
            return Err(format!("user version {} would be reused", user.version));
        }
        if let Some(db) = user
            .privileges
            .keys()
            .find(|db| *db != "*" && !self.databases.contains_key(*db))
        {
            return Err(format!(
                "user '{}' has a privilege on missing database '{db}'",
                user.name
            ));
        }
        self.next_user_version = user.version + 1;
        self.users.insert(user.name.clone(), user.clone());
        self.auth_epoch += 1;
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
            cluster_secret_hex: self.cluster_secret_hex.clone(),
            users: self.users.values().cloned().collect(),
            next_user_version: self.next_user_version,
            auth_epoch: self.auth_epoch,
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
        // Users in version order, so each passes the "never reused" check.
        let mut users = p.users;
        users.sort_by_key(|u| u.version);
        for u in &users {
            s.insert_user(u)?;
        }
        if !p.cluster_secret_hex.is_empty() {
            if users.is_empty() {
                return Err("a cluster secret without users".to_string());
            }
            s.cluster_secret_hex = p.cluster_secret_hex;
        }
        if p.next_user_version < s.next_user_version {
            return Err("the user version counter is below versions in use".to_string());
        }
        s.next_user_version = p.next_user_version.max(1);
        s.auth_epoch = p.auth_epoch.max(s.auth_epoch);
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

/// Whether schema `new` may follow `old` (ALTER STABLE): the next version, whose columns and
/// tags start with the old ones at the same positions and of the same physical type: a column
/// keeps its name, type and codec except that a VARCHAR or NCHAR may widen; a tag may also be
/// renamed. New columns and tags are appended. (Vnodes and readers mix versions by position.)
pub fn extends(old: &StableSchema, new: &StableSchema) -> bool {
    use tidal_common::DataType as T;
    fn follows(a: T, b: T) -> bool {
        match (a, b) {
            (T::VarChar(x), T::VarChar(y)) | (T::NChar(x), T::NChar(y)) => y >= x,
            (a, b) => a == b,
        }
    }
    new.version.0 == old.version.0 + 1
        && new.columns.len() >= old.columns.len()
        && new.tags.len() >= old.tags.len()
        && old.columns.iter().zip(&new.columns).all(|(o, n)| {
            o.name == n.name && o.codec == n.codec && follows(o.data_type, n.data_type)
        })
        && old
            .tags
            .iter()
            .zip(&new.tags)
            .all(|(o, n)| o.codec == n.codec && follows(o.data_type, n.data_type))
}
