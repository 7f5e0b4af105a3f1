//! Stable numeric status codes, carried over gRPC so that a client sees the same code the
//! server produced. Ranges: 0 ok; 1xxx generic; 2xxx catalog; 3xxx write/storage; 4xxx SQL.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[repr(u32)]
pub enum StatusCode {
    Ok = 0,
    Internal = 1000,
    InvalidArgument = 1001,
    Unavailable = 1002,
    Timeout = 1003,
    Unimplemented = 1004,
    ResourceExhausted = 1005,
    /// The server is stopping (graceful shutdown): retry later or on another node.
    ShuttingDown = 1006,
    /// No credentials, bad credentials, or a token that does not verify.
    Unauthenticated = 1007,
    /// Authenticated, but the user lacks the privilege the request needs.
    PermissionDenied = 1008,
    /// A session token that was valid has expired or was invalidated (password changed):
    /// a client holding the password logs in again and retries.
    TokenExpired = 1009,
    /// The peer speaks a wire version this process does not (`tidal-wire-version`).
    WireVersionMismatch = 1010,
    DatabaseNotFound = 2001,
    DatabaseExists = 2002,
    StableNotFound = 2003,
    StableExists = 2004,
    TableNotFound = 2005,
    TableExists = 2006,
    ColumnNotFound = 2007,
    NoDnodes = 2008,
    UserNotFound = 2009,
    UserExists = 2010,
    /// The table does not hash into this vnode's range: refresh the route map and retry.
    WrongVgroup = 3001,
    /// This data node does not host the addressed vnode (yet or any more): refresh and retry.
    VnodeNotFound = 3002,
    SchemaMismatch = 3003,
    TypeMismatch = 3004,
    Corruption = 3005,
    StorageIo = 3006,
    SyntaxError = 4001,
    PlanError = 4002,
    ExecutionError = 4003,
    NoDatabaseSelected = 4004,
}

impl StatusCode {
    pub fn as_u32(self) -> u32 {
        self as u32
    }

    pub fn from_u32(v: u32) -> StatusCode {
        use StatusCode::*;
        const ALL: &[StatusCode] = &[
            Ok,
            Internal,
            InvalidArgument,
            Unavailable,
            Timeout,
            Unimplemented,
            ResourceExhausted,
            ShuttingDown,
            Unauthenticated,
            PermissionDenied,
            TokenExpired,
            WireVersionMismatch,
            DatabaseNotFound,
            DatabaseExists,
            StableNotFound,
            StableExists,
            TableNotFound,
            TableExists,
            ColumnNotFound,
            NoDnodes,
            UserNotFound,
            UserExists,
            WrongVgroup,
            VnodeNotFound,
            SchemaMismatch,
            TypeMismatch,
            Corruption,
            StorageIo,
            SyntaxError,
            PlanError,
            ExecutionError,
            NoDatabaseSelected,
        ];
        ALL.iter()
            .copied()
            .find(|c| c.as_u32() == v)
            .unwrap_or(Internal)
    }

    /// Whether a client should refresh its route map and retry the same request.
    pub fn is_stale_route(self) -> bool {
        matches!(self, StatusCode::WrongVgroup | StatusCode::VnodeNotFound)
    }

    /// Whether the same request may succeed if simply sent again later.
    pub fn is_retryable(self) -> bool {
        self.is_stale_route()
            || matches!(
                self,
                StatusCode::Unavailable | StatusCode::Timeout | StatusCode::ShuttingDown
            )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for c in [
            StatusCode::WrongVgroup,
            StatusCode::ShuttingDown,
            StatusCode::Unauthenticated,
            StatusCode::PermissionDenied,
            StatusCode::TokenExpired,
            StatusCode::WireVersionMismatch,
            StatusCode::UserExists,
            StatusCode::SyntaxError,
            StatusCode::Ok,
        ] {
            assert_eq!(StatusCode::from_u32(c.as_u32()), c);
        }
        assert_eq!(StatusCode::from_u32(9999), StatusCode::Internal);
    }
}
