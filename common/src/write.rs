//! Write batches: rows for many subtables of one vgroup, columnar per subtable.

use crate::batch::Column;
use crate::ids::VgroupId;
use crate::schema::StableSchema;
use crate::types::Value;
use serde::{Deserialize, Serialize};

/// Rows for one subtable. `columns` follows the STABLE's column template exactly
/// (`columns[0]` is the TIMESTAMP key and has no NULLs); values are already coerced to the
/// column types. Rows need not be ordered; a repeated ts means the later row wins.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TableWrite {
    pub table: String,
    pub stable: String,
    /// Tag values for auto-creation (`INSERT ... USING st TAGS (...)`, line protocol). Ignored
    /// when the table already exists, as TDengine does.
    pub tags: Option<Vec<Value>>,
    pub columns: Vec<Column>,
}

impl TableWrite {
    pub fn num_rows(&self) -> usize {
        self.columns.first().map(Column::len).unwrap_or(0)
    }
}

/// One write request to one vgroup. `schemas` carries the schema of every STABLE that the
/// tables reference so that the vnode can validate without calling the mnode.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WriteBatch {
    pub db: String,
    pub vgroup: VgroupId,
    pub schemas: Vec<StableSchema>,
    pub tables: Vec<TableWrite>,
}

impl WriteBatch {
    pub fn num_rows(&self) -> usize {
        self.tables.iter().map(TableWrite::num_rows).sum()
    }
}
