//! The vnode's error type. Every variant names what was wrong and where (table, column, file
//! and byte offset); [`VnodeError::status_code`] maps it to the wire status code.

use std::path::PathBuf;
use tidal_common::{HashRange, StatusCode};

#[derive(Debug, thiserror::Error)]
pub enum VnodeError {
    #[error("I/O error while trying to {op} {}: {source}", path.display())]
    Io {
        path: PathBuf,
        op: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("corrupt file {} at byte offset {offset}: {reason}", file.display())]
    Corruption {
        file: PathBuf,
        offset: u64,
        reason: String,
    },
    #[error("table '{table}' (hash {hash:#010x}) is not in this vnode's hash range {}..={}: refresh the route map", range.begin, range.end)]
    WrongVgroup {
        table: String,
        hash: u32,
        range: HashRange,
    },
    #[error("batch is for database '{got}' but this vnode belongs to database '{expected}'")]
    WrongDatabase { expected: String, got: String },
    #[error("table '{table}' does not exist (and no tags were given to create it)")]
    TableNotFound { table: String },
    #[error("subtable '{table}' does not exist")]
    SubtableNotFound { table: String },
    #[error("unknown tag '{tag}' of table '{table}': STABLE '{stable}' has no such tag")]
    TagNotFound {
        table: String,
        stable: String,
        tag: String,
    },
    #[error("no table with uid {uid} in this vnode")]
    TableUidNotFound { uid: u64 },
    #[error("table '{table}' already exists")]
    TableExists { table: String },
    #[error("STABLE '{stable}' is not known to this vnode (table '{table}')")]
    StableNotFound { stable: String, table: String },
    #[error("schema mismatch for table '{table}': {reason}")]
    SchemaMismatch { table: String, reason: String },
    #[error("type mismatch for table '{table}' column '{column}': expected {expected}, got {got}")]
    TypeMismatch {
        table: String,
        column: String,
        expected: String,
        got: String,
    },
    #[error("invalid tags for table '{table}': {reason}")]
    InvalidTags { table: String, reason: String },
    #[error("column index {index} is out of range: STABLE '{stable}' has {columns} columns")]
    ColumnIndexOutOfRange {
        stable: String,
        index: usize,
        columns: usize,
    },
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("the background flush failed, so the write cannot be buffered: {reason}")]
    Background { reason: String },
    #[error("timestamp {ts} of table '{table}' is older than the database's KEEP of {keep_minutes} minutes allows")]
    TimestampOutOfRange {
        table: String,
        ts: i64,
        keep_minutes: u64,
    },
    #[error("vnode {dir} is unusable after an earlier storage failure: {reason}; reopen it", dir = dir.display())]
    Poisoned { dir: PathBuf, reason: String },
}

impl VnodeError {
    pub fn status_code(&self) -> StatusCode {
        match self {
            VnodeError::Io { .. } => StatusCode::StorageIo,
            VnodeError::Corruption { .. } => StatusCode::Corruption,
            VnodeError::WrongVgroup { .. } => StatusCode::WrongVgroup,
            VnodeError::WrongDatabase { .. } => StatusCode::InvalidArgument,
            VnodeError::TableNotFound { .. }
            | VnodeError::TableUidNotFound { .. }
            | VnodeError::SubtableNotFound { .. } => StatusCode::TableNotFound,
            VnodeError::TagNotFound { .. } => StatusCode::ColumnNotFound,
            VnodeError::TableExists { .. } => StatusCode::TableExists,
            VnodeError::StableNotFound { .. } => StatusCode::StableNotFound,
            VnodeError::SchemaMismatch { .. } => StatusCode::SchemaMismatch,
            VnodeError::TypeMismatch { .. } | VnodeError::InvalidTags { .. } => {
                StatusCode::TypeMismatch
            }
            VnodeError::ColumnIndexOutOfRange { .. } => StatusCode::ColumnNotFound,
            VnodeError::InvalidArgument(_) => StatusCode::InvalidArgument,
            VnodeError::Poisoned { .. } | VnodeError::Background { .. } => StatusCode::StorageIo,
            VnodeError::TimestampOutOfRange { .. } => StatusCode::InvalidArgument,
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, op: &'static str, source: std::io::Error) -> Self {
        VnodeError::Io {
            path: path.into(),
            op,
            source,
        }
    }
}

pub type Result<T, E = VnodeError> = std::result::Result<T, E>;
