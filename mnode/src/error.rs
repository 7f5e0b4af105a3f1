//! The mnode's error type. Every variant names the object it is about, and maps to one
//! wire [`StatusCode`] through [`MnodeError::status_code`].

use std::path::PathBuf;
use std::sync::Arc;
use tidal_common::{DnodeId, StatusCode};

/// Errors of catalog operations and of the durable store.
#[derive(Clone, Debug, thiserror::Error)]
pub enum MnodeError {
    #[error("database '{0}' not found")]
    DatabaseNotFound(String),
    #[error("database '{0}' already exists")]
    DatabaseExists(String),
    #[error("STABLE '{db}.{name}' not found")]
    StableNotFound { db: String, name: String },
    #[error("STABLE '{db}.{name}' already exists")]
    StableExists { db: String, name: String },
    /// A heartbeat from an id this mnode never assigned (or the mnode lost its catalog):
    /// the data node should register again.
    #[error("dnode {0} is not registered; register again")]
    UnknownDnode(DnodeId),
    #[error("no alive data node to place the {vgroups} vgroup(s) of database '{db}'")]
    NoDnodes { db: String, vgroups: u32 },
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// Wrong user name or password. The message does not say which (no user enumeration).
    #[error("Unauthenticated: {0}")]
    Unauthenticated(String),
    #[error("PermissionDenied: {0}")]
    PermissionDenied(String),
    #[error("user '{0}' does not exist")]
    UserNotFound(String),
    #[error("user '{0}' already exists")]
    UserExists(String),
    #[error("mnode storage I/O error: {context} ({path}): {source}")]
    StorageIo {
        context: String,
        path: PathBuf,
        #[source]
        source: Arc<std::io::Error>,
    },
    #[error("mnode storage is unusable after an earlier failure ({0}); restart the mnode")]
    Poisoned(String),
    #[error("mnode catalog corrupted: {path} at offset {offset}: {reason}")]
    Corruption {
        path: PathBuf,
        offset: u64,
        reason: String,
    },
}

impl MnodeError {
    pub fn status_code(&self) -> StatusCode {
        match self {
            MnodeError::DatabaseNotFound(_) => StatusCode::DatabaseNotFound,
            MnodeError::DatabaseExists(_) => StatusCode::DatabaseExists,
            MnodeError::StableNotFound { .. } => StatusCode::StableNotFound,
            MnodeError::StableExists { .. } => StatusCode::StableExists,
            MnodeError::UnknownDnode(_) => StatusCode::InvalidArgument,
            MnodeError::NoDnodes { .. } => StatusCode::NoDnodes,
            MnodeError::InvalidArgument(_) => StatusCode::InvalidArgument,
            MnodeError::Unauthenticated(_) => StatusCode::Unauthenticated,
            MnodeError::PermissionDenied(_) => StatusCode::PermissionDenied,
            MnodeError::UserNotFound(_) => StatusCode::UserNotFound,
            MnodeError::UserExists(_) => StatusCode::UserExists,
            MnodeError::StorageIo { .. } | MnodeError::Poisoned(_) => StatusCode::StorageIo,
            MnodeError::Corruption { .. } => StatusCode::Corruption,
        }
    }

    pub(crate) fn io(
        context: impl Into<String>,
        path: impl Into<PathBuf>,
        e: std::io::Error,
    ) -> Self {
        MnodeError::StorageIo {
            context: context.into(),
            path: path.into(),
            source: Arc::new(e),
        }
    }

    pub(crate) fn corruption(
        path: impl Into<PathBuf>,
        offset: u64,
        reason: impl Into<String>,
    ) -> Self {
        MnodeError::Corruption {
            path: path.into(),
            offset,
            reason: reason.into(),
        }
    }
}
