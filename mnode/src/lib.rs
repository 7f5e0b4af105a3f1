//! `tidal-mnode`: the mnode's catalog — databases, STABLE schemas (versioned), data nodes and
//! the vgroup map of each database — as a durable state machine. The gRPC service in the
//! `tidal` binary wraps [`Mnode`]; this crate has no networking and no async runtime.
//!
//! Modules and what they own:
//! - [`mnode`]: the [`Mnode`] API: validation, placement, liveness, locking.
//! - [`catalog`]: the in-memory state and the logged operations; all invariants of the
//!   catalog (id uniqueness, stables belong to existing databases) are enforced by
//!   [`catalog::CatalogState::apply`].
//! - [`sdb`]: the files — a checksummed op log plus an atomic snapshot (see `sdb/FORMAT.md`).
//! - [`users`]: users, password hashes, privileges and the cluster secret (docs/SECURITY.md).
//! - [`types`], [`error`]: the public data and error types.
//!
//! Every mutation is fsynced to the log before it is applied in memory and before the call
//! returns; reads never wait for disk I/O.

pub mod catalog;
pub mod error;
pub mod mnode;
pub mod sdb;
pub mod types;
pub mod users;

pub use error::MnodeError;
pub use mnode::{Mnode, StableAlteration};
pub use types::{
    AuthTable, DatabaseInfo, DnodeInfo, MnodeConfig, Privilege, UserAuth, UserInfo,
    VgroupAssignment, VgroupInfo,
};
pub use users::{AuthInit, DEFAULT_ROOT_PASSWORD, ROOT_USER};

#[cfg(test)]
mod tests;
