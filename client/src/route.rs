//! A database's routing map as the client caches it.

use crate::ClientError;
use tidal_common::{hash_table_name, vgroup_index, HashRange, Precision, StatusCode, VgroupId};
use tidal_proto::convert::{options_from_wire, range_of};
use tidal_proto::v1;

#[derive(Debug, Clone)]
pub struct VgroupRoute {
    pub id: VgroupId,
    pub range: HashRange,
    /// gRPC address of the data node hosting the vgroup's vnode.
    pub addr: String,
}

/// Vgroups of one database in hash-range order.
#[derive(Debug, Clone)]
pub struct RouteTable {
    pub db: String,
    pub precision: Precision,
    pub vgroups: Vec<VgroupRoute>,
}

impl RouteTable {
    pub fn from_wire(info: &v1::DatabaseInfo) -> Result<RouteTable, ClientError> {
        let options = options_from_wire(info.options.as_ref())
            .map_err(|e| ClientError::new(StatusCode::Internal, e.to_string()))?;
        let mut vgroups: Vec<VgroupRoute> = info
            .vgroups
            .iter()
            .map(|v| VgroupRoute {
                id: VgroupId(v.id),
                range: range_of(v),
                addr: v.dnode_addr.clone(),
            })
            .collect();
        vgroups.sort_by_key(|v| v.range.begin);
        if vgroups.is_empty() {
            return Err(ClientError::new(
                StatusCode::Internal,
                format!("database {} has no vgroups", info.name),
            ));
        }
        Ok(RouteTable {
            db: info.name.clone(),
            precision: options.precision,
            vgroups,
        })
    }

    /// Index into `vgroups` of the vgroup owning `table`.
    pub fn index_of(&self, db: &str, table: &str) -> usize {
        let h = hash_table_name(db, table);
        let i = vgroup_index(h, self.vgroups.len() as u32);
        debug_assert!(self.vgroups[i].range.contains(h));
        i
    }

    pub fn vgroup_of(&self, db: &str, table: &str) -> &VgroupRoute {
        &self.vgroups[self.index_of(db, table)]
    }
}
