//! The error type of the SQL layer. Every message names the problem and, where the input has
//! one, the position (`line:col`, 1-based).

use tidal_common::StatusCode;

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SqlError {
    #[error("syntax error at {line}:{col}: {msg}")]
    Syntax { line: u32, col: u32, msg: String },
    #[error("{0}")]
    Plan(String),
    #[error("{0}")]
    Execution(String),
    #[error("{0}")]
    TableNotFound(String),
    #[error("{0}")]
    StableNotFound(String),
    #[error("{0}")]
    ColumnNotFound(String),
    #[error("{0}")]
    DatabaseNotFound(String),
    #[error("no database selected: write `db.table` or run USE db first")]
    NoDatabaseSelected,
    #[error("{0}")]
    TypeMismatch(String),
    #[error("{0}")]
    InvalidArgument(String),
    #[error("{0}")]
    Unsupported(String),
    /// A query needs more memory than its limit allows (see `memory`).
    #[error("{0}")]
    ResourceExhausted(String),
    /// The plan names a subtable as a member of a STABLE it no longer belongs to (the
    /// coordinator's metadata was older than the subtable): plan again.
    #[error("{0}")]
    StalePlan(String),
}

impl SqlError {
    pub fn status_code(&self) -> StatusCode {
        match self {
            SqlError::Syntax { .. } => StatusCode::SyntaxError,
            SqlError::Plan(_) => StatusCode::PlanError,
            SqlError::Execution(_) => StatusCode::ExecutionError,
            SqlError::TableNotFound(_) => StatusCode::TableNotFound,
            SqlError::StableNotFound(_) => StatusCode::StableNotFound,
            SqlError::ColumnNotFound(_) => StatusCode::ColumnNotFound,
            SqlError::DatabaseNotFound(_) => StatusCode::DatabaseNotFound,
            SqlError::NoDatabaseSelected => StatusCode::NoDatabaseSelected,
            SqlError::TypeMismatch(_) => StatusCode::TypeMismatch,
            SqlError::InvalidArgument(_) => StatusCode::InvalidArgument,
            SqlError::Unsupported(_) => StatusCode::Unimplemented,
            SqlError::ResourceExhausted(_) => StatusCode::ResourceExhausted,
            SqlError::StalePlan(_) => StatusCode::SchemaMismatch,
        }
    }
}

/// A position in the SQL text (1-based line and column).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Pos {
    pub line: u32,
    pub col: u32,
}

impl std::fmt::Display for Pos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

pub(crate) fn syntax(pos: Pos, msg: impl Into<String>) -> SqlError {
    SqlError::Syntax {
        line: pos.line,
        col: pos.col,
        msg: msg.into(),
    }
}
