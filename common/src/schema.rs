//! Schemas: STABLE definitions, subtable metadata and database options.

use crate::ids::{SchemaVersion, TableUid};
use crate::time::Precision;
use crate::types::{DataType, Value};
use serde::{Deserialize, Serialize};

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
    pub fn coerce_tags(&self, tags: Vec<Value>) -> Result<Vec<Value>, String> {
        if tags.len() != self.tags.len() {
            return Err(format!(
                "STABLE {} has {} tags but {} tag values were given",
                self.name,
                self.tags.len(),
                tags.len()
            ));
        }
        tags.into_iter()
            .zip(self.tags.iter())
            .map(|(v, def)| {
                def.data_type
                    .coerce(v)
                    .map_err(|e| format!("tag '{}': {e}", def.name))
            })
            .collect()
    }
}

/// A subtable as its vnode knows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TableMeta {
    pub uid: TableUid,
    pub name: String,
    pub stable: String,
    pub tags: Vec<Value>,
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
