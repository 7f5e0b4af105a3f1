//! ALTER STABLE: maps the statement to the mnode's AlterStable call, then publishes the new
//! schema to every vnode of the database, so that readers there (which scan with the vnode's
//! schema) see the change before the statement returns.
//!
//! Supported: ADD COLUMN, ADD TAG, MODIFY COLUMN / MODIFY TAG (a VARCHAR or NCHAR gets a larger
//! width), RENAME TAG. DROP COLUMN / DROP TAG are refused with the reason: vnodes store columns
//! and tags by position, and every schema version must stay a prefix of the next.

use super::{ExecError, ExecResult, Outcome, SqlService};
use tidal_common::StatusCode;
use tidal_proto::convert::column_defs_to_wire;
use tidal_proto::v1;
use tidal_sql::AlterStable;

pub async fn alter_stable(
    svc: &SqlService,
    session_db: &str,
    db: &str,
    name: &str,
    change: AlterStable,
) -> ExecResult<Outcome> {
    let mut req = v1::AlterStableRequest {
        db: db.to_string(),
        name: name.to_string(),
        ..Default::default()
    };
    let dropped = |what: &str, n: &str| {
        Err(ExecError::new(
            StatusCode::Unimplemented,
            format!(
                "ALTER STABLE {name} DROP {what} {n} is not supported: columns and tags are stored by position, so a schema can only grow (ADD, MODIFY a width, RENAME TAG)"
            ),
        ))
    };
    match change {
        AlterStable::AddColumn(c) => req.add_columns = column_defs_to_wire(&[c]),
        AlterStable::AddTag(c) => req.add_tags = column_defs_to_wire(&[c]),
        AlterStable::ModifyColumn(c) => req.modify_columns = column_defs_to_wire(&[c]),
        AlterStable::ModifyTag(c) => req.modify_tags = column_defs_to_wire(&[c]),
        AlterStable::RenameTag { from, to } => {
            req.rename_tags = vec![v1::TagRename { from, to }];
        }
        AlterStable::DropColumn(c) => return dropped("COLUMN", &c),
        AlterStable::DropTag(t) => return dropped("TAG", &t),
    }
    let schema = svc.client.alter_stable_request(req).await?;
    svc.client.publish_schema(db, &schema).await?;
    Ok(Outcome::none(session_db))
}
