//! ALTER TABLE .. SET TAG: binds the values against the subtable's STABLE (as CREATE TABLE ..
//! TAGS does) and sends them to the vnode that owns the subtable, which logs and applies them.
//!
//! ALTER STABLE: maps the statement to the mnode's AlterStable call, then publishes the new
//! schema to every vnode of the database, so that readers there (which scan with the vnode's
//! schema) see the change before the statement returns.
//!
//! Supported: ADD COLUMN, ADD TAG, MODIFY COLUMN / MODIFY TAG (a VARCHAR or NCHAR gets a larger
//! width), RENAME TAG. DROP COLUMN / DROP TAG are refused with the reason: vnodes store columns
//! and tags by position, and every schema version must stay a prefix of the next.

use super::{ExecError, ExecResult, Outcome, SqlService};
use tidal_common::StatusCode;
use tidal_proto::convert::{column_defs_to_wire, value_to_wire};
use tidal_proto::v1;
use tidal_sql::{AlterStable, ObjectRef, Pos, TagAssignment};

/// ALTER TABLE `table` SET TAG ...: the subtable's new tag values, durable on its vnode before
/// the statement returns.
pub async fn set_tags(
    svc: &SqlService,
    session_db: &str,
    table: &ObjectRef,
    table_pos: Pos,
    tags: &[TagAssignment],
) -> ExecResult<Outcome> {
    let tdb = svc.db_of(&table.db, session_db)?.to_string();
    let name = table.name.as_str();
    match svc.client.stable(&tdb, name).await {
        Ok(_) => {
            return Err(ExecError::new(
                StatusCode::InvalidArgument,
                format!(
                    "'{name}' at {table_pos} is a STABLE: SET TAG changes the tags of one subtable (ALTER STABLE changes the schema)"
                ),
            ))
        }
        Err(e) if e.code == StatusCode::DatabaseNotFound => return Err(e.into()),
        Err(_) => {}
    }
    let Some((meta, schema)) = svc.client.subtable(&tdb, name).await? else {
        return Err(ExecError::new(
            StatusCode::TableNotFound,
            format!("table '{name}' at {table_pos} does not exist in database '{tdb}'"),
        ));
    };
    let precision = svc.precision(&tdb).await?;
    let values = match tidal_sql::bind_set_tags(name, tags, &schema, precision) {
        Ok(v) => v,
        // The schema may be cached from before another node's ALTER STABLE .. ADD TAG: ask
        // the mnode once more before calling a tag unknown.
        Err(e) if e.status_code() == StatusCode::ColumnNotFound => {
            let fresh = svc.client.refresh_stable(&tdb, &meta.stable).await?;
            tidal_sql::bind_set_tags(name, tags, &fresh, precision)?
        }
        Err(e) => return Err(e.into()),
    };
    let req = v1::SetTagsRequest {
        vnode: None,
        name: name.to_string(),
        tags: values
            .iter()
            .map(|(tag, v)| v1::TagAssignment {
                tag: tag.clone(),
                value: Some(value_to_wire(v)),
            })
            .collect(),
    };
    // The change sets values rather than adding to them, so sending it again after the route
    // map moved on is safe.
    let mut route = svc.client.route(&tdb).await?;
    let mut retried = false;
    let result = loop {
        let vg = route.vgroup_of(&tdb, name).clone();
        let mut req = req.clone();
        req.vnode = Some(v1::VnodeRef {
            db: tdb.clone(),
            vgroup_id: vg.id.0,
        });
        let r: ExecResult<_> = match svc.client.dnode(&vg.addr) {
            Ok(mut d) => d.set_tags(req).await.map_err(ExecError::from),
            Err(e) => Err(e.into()),
        };
        match r {
            Err(e)
                if !retried
                    && matches!(e.code, StatusCode::WrongVgroup | StatusCode::VnodeNotFound) =>
            {
                retried = true;
                route = svc.client.refresh_route(&tdb).await?;
            }
            r => break r,
        }
    };
    // Whatever the outcome, this node's planning cache must not keep the old tags.
    svc.client.forget_table(&tdb, name);
    result?;
    Ok(Outcome::none(session_db))
}

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
