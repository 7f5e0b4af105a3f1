//! The vnode's catalog: STABLE schemas it has seen, its subtables with their tags, and the
//! next subtable uid.
//!
//! Owns: name -> table, uid -> name, stable -> schema. Invariants: `by_uid` is exactly the
//! inverse of `tables`; every table's stable is in `stables`; `next_uid` is greater than every
//! uid ever handed out (also of dropped tables), so uids are never reused. The catalog is made
//! durable by the WAL (creates/drops/schema records) and by the snapshot in the manifest.

use crate::codec::{DResult, Reader, Writer};
use std::collections::{BTreeMap, HashMap};
use tidal_common::{StableSchema, TableMeta, TableUid};

#[derive(Default, Clone)]
pub struct Meta {
    pub stables: BTreeMap<String, StableSchema>,
    pub tables: BTreeMap<String, TableMeta>,
    pub by_uid: HashMap<TableUid, String>,
    pub next_uid: u64,
}

impl Meta {
    pub fn new() -> Meta {
        Meta {
            next_uid: 1,
            ..Meta::default()
        }
    }

    /// Stores `s` unless a schema of the same or a newer version is already stored.
    pub fn put_schema(&mut self, s: &StableSchema) {
        match self.stables.get(&s.name) {
            Some(old) if old.version >= s.version => {}
            _ => {
                self.stables.insert(s.name.clone(), s.clone());
            }
        }
    }

    /// Whether `s` would change the stored schemas.
    pub fn schema_is_news(&self, s: &StableSchema) -> bool {
        self.stables
            .get(&s.name)
            .is_none_or(|old| old.version < s.version)
    }

    pub fn insert_table(&mut self, t: TableMeta) {
        self.next_uid = self.next_uid.max(t.uid.0 + 1);
        if let Some(old) = self.tables.get(&t.name) {
            self.by_uid.remove(&old.uid);
        }
        self.by_uid.insert(t.uid, t.name.clone());
        self.tables.insert(t.name.clone(), t);
    }

    pub fn remove_table(&mut self, name: &str) -> Option<TableMeta> {
        let t = self.tables.remove(name)?;
        self.by_uid.remove(&t.uid);
        Some(t)
    }

    pub fn table_by_uid(&self, uid: TableUid) -> Option<&TableMeta> {
        self.by_uid.get(&uid).and_then(|n| self.tables.get(n))
    }

    pub fn tables_of(&self, stable: &str) -> Vec<String> {
        self.tables
            .values()
            .filter(|t| t.stable == stable)
            .map(|t| t.name.clone())
            .collect()
    }

    pub fn encode(&self, w: &mut Writer) {
        w.u64(self.next_uid);
        w.len_u32(self.stables.len());
        for s in self.stables.values() {
            w.schema(s);
        }
        w.len_u32(self.tables.len());
        for t in self.tables.values() {
            w.table_meta(t);
        }
    }

    pub fn decode(r: &mut Reader<'_>) -> DResult<Meta> {
        let mut m = Meta::new();
        let next_uid = r.u64()?;
        let n = r.count(1)?;
        for _ in 0..n {
            let s = r.schema()?;
            m.stables.insert(s.name.clone(), s);
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
