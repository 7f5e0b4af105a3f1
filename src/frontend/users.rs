//! CREATE/ALTER/DROP USER, SHOW USERS, GRANT and REVOKE: sent to the mnode's Auth service,
//! which checks that the caller may (docs/SECURITY.md). The password travels to the mnode
//! only; no log line or answer carries it.

use super::{ExecResult, Outcome, SqlService};
use tidal_common::{Batch, DataType, Field, Precision, Value};
use tidal_proto::v1;
use tidal_sql::UserStatement;

pub async fn execute(svc: &SqlService, stmt: UserStatement, db: &str) -> ExecResult<Outcome> {
    let mut auth = svc.client.auth()?;
    match stmt {
        UserStatement::Create { name, password } => {
            auth.create_user(v1::CreateUserRequest { name, password })
                .await?;
        }
        UserStatement::AlterPassword { name, password } => {
            auth.alter_user(v1::AlterUserRequest { name, password })
                .await?;
        }
        UserStatement::Drop { name } => {
            auth.drop_user(v1::DropUserRequest { name }).await?;
        }
        UserStatement::Grant {
            read,
            write,
            db: on,
            user,
            revoke,
        } => {
            auth.grant(v1::GrantRequest {
                user,
                db: on,
                read,
                write,
                revoke,
            })
            .await?;
        }
        UserStatement::Show => {
            let batch = users_batch(svc).await?;
            return Ok(Outcome {
                affected_rows: batch.num_rows() as u64,
                batch: Some(batch),
                precision: Precision::Millis,
                db: db.to_string(),
            });
        }
    }
    Ok(Outcome {
        batch: None,
        affected_rows: 0,
        precision: Precision::Millis,
        db: db.to_string(),
    })
}

/// The rows of SHOW USERS and `information_schema.ins_users`: name, superuser flag, creation
/// time and privileges, as the mnode lists them (a user who is not a superuser sees only
/// itself); never a password or its hash, which the mnode does not send.
pub async fn users_batch(svc: &SqlService) -> ExecResult<Batch> {
    let users = svc
        .client
        .auth()?
        .list_users(v1::Empty {})
        .await?
        .into_inner()
        .users;
    let fields = vec![
        Field::new("name", DataType::VarChar(24)),
        Field::new("super", DataType::TinyInt),
        Field::new("create_time", DataType::Timestamp),
        Field::new("privileges", DataType::VarChar(4096)),
    ];
    let rows: Vec<Vec<Value>> = users
        .into_iter()
        .map(|u| {
            let privileges = if u.superuser {
                "ALL on every database".to_string()
            } else {
                u.privileges
                    .iter()
                    .map(|p| {
                        let kind = match (p.read, p.write) {
                            (true, true) => "ALL",
                            (true, false) => "READ",
                            _ => "WRITE",
                        };
                        format!("{kind} on {}", p.db)
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            vec![
                Value::Str(u.name),
                Value::Int(u.superuser as i64),
                Value::Timestamp(u.created_ms),
                Value::Str(privileges),
            ]
        })
        .collect();
    Ok(Batch::from_rows(fields, &rows))
}
