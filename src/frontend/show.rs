//! SHOW and DESCRIBE: catalog views assembled from the mnode and the data nodes.

use super::{ExecError, ExecResult, Outcome, SqlService};
use tidal_common::{Batch, DataType, Field, Precision, StatusCode, Value};
use tidal_proto::convert::{options_from_wire, table_meta_from_wire};
use tidal_proto::v1;
use tidal_sql::ObjectRef;

fn varchar(name: &str) -> Field {
    Field::new(name, DataType::VarChar(256))
}

fn int(name: &str) -> Field {
    Field::new(name, DataType::BigInt)
}

fn ts(name: &str) -> Field {
    Field::new(name, DataType::Timestamp)
}

fn s(v: impl Into<String>) -> Value {
    Value::Str(v.into())
}

fn i(v: impl TryInto<i64>) -> Value {
    v.try_into().map(Value::Int).unwrap_or(Value::Null)
}

/// Minutes as TDengine prints durations: `10d`, `2h`, `90m`.
fn minutes(m: u64) -> String {
    if m % 1440 == 0 {
        format!("{}d", m / 1440)
    } else if m % 60 == 0 {
        format!("{}h", m / 60)
    } else {
        format!("{m}m")
    }
}

pub async fn databases(svc: &SqlService, db: &str) -> ExecResult<Outcome> {
    let list = svc
        .client
        .mnode()?
        .list_databases(v1::Empty {})
        .await?
        .into_inner()
        .databases;
    let fields = vec![
        varchar("name"),
        ts("create_time"),
        int("vgroups"),
        int("replica"),
        varchar("duration"),
        varchar("keep"),
        int("buffer"),
        int("minrows"),
        int("maxrows"),
        varchar("precision"),
        varchar("cachemodel"),
        int("cachesize"),
        int("wal_level"),
        int("wal_fsync_period"),
        int("stt_trigger"),
    ];
    let mut rows = Vec::new();
    for d in list {
        let o = options_from_wire(d.options.as_ref())?;
        rows.push(vec![
            s(d.name),
            Value::Timestamp(d.created_ms),
            i(o.vgroups),
            i(o.replica),
            s(minutes(o.duration_minutes)),
            s(minutes(o.keep_minutes)),
            i(o.buffer_mb),
            i(o.minrows),
            i(o.maxrows),
            s(o.precision.as_str()),
            s(o.cache_model),
            i(o.cache_size_mb),
            i(o.wal_level),
            i(o.wal_fsync_period_ms),
            i(o.stt_trigger),
        ]);
    }
    Ok(Outcome::rows(
        db,
        Batch::from_rows(fields, &rows),
        Precision::Millis,
    ))
}

pub async fn stables(svc: &SqlService, db: &str, sdb: &str) -> ExecResult<Outcome> {
    let list = svc
        .client
        .mnode()?
        .list_stables(v1::ListStablesRequest {
            db: sdb.to_string(),
        })
        .await?
        .into_inner()
        .stables;
    let fields = vec![
        varchar("stable_name"),
        varchar("db_name"),
        int("columns"),
        int("tags"),
        int("version"),
    ];
    let rows: Vec<Vec<Value>> = list
        .into_iter()
        .map(|st| {
            vec![
                s(st.name),
                s(st.db),
                i(st.columns.len()),
                i(st.tags.len()),
                i(st.version),
            ]
        })
        .collect();
    Ok(Outcome::rows(
        db,
        Batch::from_rows(fields, &rows),
        Precision::Millis,
    ))
}

/// A simple SQL LIKE matcher: `%` any run, `_` one character, case-sensitive.
fn like(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0usize, 0usize);
    let (mut star, mut mark) = (None::<usize>, 0usize);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '_' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '%' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(sp) = star {
            pi = sp + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '%' {
        pi += 1;
    }
    pi == p.len()
}

pub async fn tables(
    svc: &SqlService,
    db: &str,
    sdb: &str,
    pattern: Option<&str>,
) -> ExecResult<Outcome> {
    let route = svc.client.refresh_route(sdb).await?;
    let mut rows = Vec::new();
    for vg in &route.vgroups {
        let list = svc
            .client
            .dnode(&vg.addr)?
            .list_tables(v1::ListTablesRequest {
                vnode: Some(v1::VnodeRef {
                    db: sdb.to_string(),
                    vgroup_id: vg.id.0,
                }),
                stable: None,
            })
            .await?
            .into_inner()
            .tables;
        for t in list {
            let m = table_meta_from_wire(&t);
            if pattern.is_some_and(|p| !like(p, &m.name)) {
                continue;
            }
            rows.push(vec![s(m.name), s(sdb), s(m.stable), i(vg.id.0), i(m.uid.0)]);
        }
    }
    rows.sort_by(|a, b| a[0].total_cmp(&b[0]));
    let fields = vec![
        varchar("table_name"),
        varchar("db_name"),
        varchar("stable_name"),
        int("vgroup_id"),
        int("uid"),
    ];
    Ok(Outcome::rows(
        db,
        Batch::from_rows(fields, &rows),
        Precision::Millis,
    ))
}

pub async fn vgroups(svc: &SqlService, db: &str, sdb: &str) -> ExecResult<Outcome> {
    let info = svc
        .client
        .mnode()?
        .get_database(v1::GetDatabaseRequest {
            name: sdb.to_string(),
        })
        .await?
        .into_inner();
    let mut rows = Vec::new();
    for vg in &info.vgroups {
        let stats = match svc
            .client
            .dnode(&vg.dnode_addr)?
            .vnode_stats(v1::VnodeRef {
                db: sdb.to_string(),
                vgroup_id: vg.id,
            })
            .await
        {
            Ok(r) => Some(r.into_inner()),
            Err(_) => None,
        };
        let stat = |f: fn(&v1::VnodeStatsResponse) -> u64| {
            stats.as_ref().map(|st| i(f(st))).unwrap_or(Value::Null)
        };
        rows.push(vec![
            i(vg.id),
            s(sdb),
            i(vg.hash_begin),
            i(vg.hash_end),
            i(vg.dnode_id),
            s(vg.dnode_addr.clone()),
            s(if stats.is_some() { "ready" } else { "offline" }),
            stat(|st| st.tables),
            stat(|st| st.rows_written),
            stat(|st| st.mem_bytes),
            stat(|st| st.wal_bytes),
            stat(|st| st.disk_bytes),
        ]);
    }
    let fields = vec![
        int("vgroup_id"),
        varchar("db_name"),
        int("hash_begin"),
        int("hash_end"),
        int("dnode_id"),
        varchar("dnode_endpoint"),
        varchar("status"),
        int("tables"),
        int("rows_written"),
        int("mem_bytes"),
        int("wal_bytes"),
        int("disk_bytes"),
    ];
    Ok(Outcome::rows(
        db,
        Batch::from_rows(fields, &rows),
        Precision::Millis,
    ))
}

pub async fn dnodes(svc: &SqlService, db: &str) -> ExecResult<Outcome> {
    let list = svc
        .client
        .mnode()?
        .list_dnodes(v1::Empty {})
        .await?
        .into_inner()
        .dnodes;
    let fields = vec![
        int("id"),
        varchar("endpoint"),
        int("vnodes"),
        varchar("status"),
        ts("create_time"),
    ];
    let rows: Vec<Vec<Value>> = list
        .into_iter()
        .map(|d| {
            vec![
                i(d.id),
                s(d.addr),
                i(d.vnodes),
                s(if d.alive { "ready" } else { "offline" }),
                Value::Timestamp(d.created_ms),
            ]
        })
        .collect();
    Ok(Outcome::rows(
        db,
        Batch::from_rows(fields, &rows),
        Precision::Millis,
    ))
}

pub async fn describe(svc: &SqlService, db: &str, table: &ObjectRef) -> ExecResult<Outcome> {
    let tdb = svc.db_of(&table.db, db)?.to_string();
    let schema = match svc.client.stable(&tdb, &table.name).await {
        Ok(schema) => schema,
        Err(e) if e.code == StatusCode::DatabaseNotFound => return Err(e.into()),
        Err(_) => match svc.subtable(&tdb, &table.name).await? {
            Some((_, schema)) => schema,
            None => {
                return Err(ExecError::new(
                    StatusCode::TableNotFound,
                    format!("table '{}' does not exist in database '{tdb}'", table.name),
                ))
            }
        },
    };
    let comp = match svc
        .client
        .mnode()?
        .get_database(v1::GetDatabaseRequest { name: tdb.clone() })
        .await
    {
        Ok(r) => options_from_wire(r.into_inner().options.as_ref())
            .map(|o| o.comp)
            .unwrap_or(2),
        Err(_) => 2,
    };
    // As TDengine 3.3: the column's encoding, compression and level (tags have none).
    let fields = vec![
        varchar("field"),
        varchar("type"),
        int("length"),
        varchar("note"),
        varchar("encode"),
        varchar("compress"),
        varchar("level"),
    ];
    let mut rows = Vec::new();
    for c in &schema.columns {
        let spec = c.codec.clone().unwrap_or_default();
        let codec = tidal_codec::ColumnCodec::parse(
            c.data_type,
            spec.encode.as_deref(),
            spec.compress.as_deref(),
            spec.level.as_deref(),
            comp,
        )
        .unwrap_or_else(|_| tidal_codec::ColumnCodec::default_for(c.data_type, comp));
        let (e, z, l) = codec.names();
        rows.push(vec![
            s(c.name.clone()),
            s(c.data_type.sql_name()),
            i(c.data_type.byte_len()),
            s(""),
            s(e),
            s(z),
            s(l),
        ]);
    }
    for c in &schema.tags {
        rows.push(vec![
            s(c.name.clone()),
            s(c.data_type.sql_name()),
            i(c.data_type.byte_len()),
            s("TAG"),
            s("disabled"),
            s("disabled"),
            s("disabled"),
        ]);
    }
    Ok(Outcome::rows(
        db,
        Batch::from_rows(fields, &rows),
        Precision::Millis,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_patterns() {
        assert!(like("r_%", "r_truck_1"));
        assert!(!like("d_%", "r_truck_1"));
        assert!(like("r_truck___", "r_truck_12"));
        assert!(!like("r_truck__", "r_truck_12"));
        assert!(like("%", ""));
        assert!(!like("_", ""));
    }
}
