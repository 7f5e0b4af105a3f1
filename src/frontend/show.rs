//! SHOW and DESCRIBE: catalog views assembled from the mnode and the data nodes, the
//! `SHOW CREATE` statements that recreate an object, and SHOW QUERIES over this node's
//! registry of running statements. Output columns follow TDengine 3.x names where it has them.

use super::catalog::{self, Named};
use super::queries::Running;
use super::{ExecError, ExecResult, Outcome, SqlService};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use tidal_common::{
    Batch, DataType, DbOptions, Field, Precision, StableSchema, StatusCode, TableMeta, Value,
};
use tidal_proto::convert::{
    batch_from_wire, options_from_wire, schema_from_wire, table_meta_from_wire,
};
use tidal_proto::v1;
use tidal_sql::ObjectRef;

/// A SHOW statement's answer: `rows` under `fields` (times in milliseconds).
fn listing(db: &str, fields: Vec<Field>, rows: &[Vec<Value>]) -> Outcome {
    Outcome::rows(db, Batch::from_rows(fields, rows), Precision::Millis)
}

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

/// The statistics of vgroup `vgroup_id` of `db` on the data node `addr`; `None` when it does
/// not answer.
async fn vnode_stats(
    svc: &SqlService,
    db: &str,
    vgroup_id: u32,
    addr: &str,
) -> Option<v1::VnodeStatsResponse> {
    let mut d = svc.client.dnode(addr).ok()?;
    d.vnode_stats(v1::VnodeStatsRequest {
        db: db.to_string(),
        vgroup_id,
        distribution_of: None,
    })
    .await
    .ok()
    .map(|r| r.into_inner())
}

/// Every database, as the mnode lists them.
async fn database_list(svc: &SqlService) -> ExecResult<Vec<v1::DatabaseInfo>> {
    Ok(svc
        .client
        .mnode()?
        .list_databases(v1::Empty {})
        .await?
        .into_inner()
        .databases)
}

/// Every data node, as the mnode lists them.
async fn dnode_list(svc: &SqlService) -> ExecResult<Vec<v1::DnodeInfo>> {
    Ok(svc
        .client
        .mnode()?
        .list_dnodes(v1::Empty {})
        .await?
        .into_inner()
        .dnodes)
}

pub async fn databases(svc: &SqlService, db: &str) -> ExecResult<Outcome> {
    let list = database_list(svc).await?;
    let fields = vec![
        varchar("name"),
        ts("create_time"),
        int("vgroups"),
        int("ntables"),
        int("replica"),
        varchar("duration"),
        varchar("keep"),
        int("buffer"),
        int("minrows"),
        int("maxrows"),
        int("comp"),
        varchar("precision"),
        varchar("status"),
        varchar("cachemodel"),
        int("cachesize"),
        int("wal_level"),
        int("wal_fsync_period"),
        int("stt_trigger"),
    ];
    // Table counts come from every vgroup of every database, asked in parallel.
    let stats = futures::future::join_all(list.iter().map(|d| {
        futures::future::join_all(
            d.vgroups
                .iter()
                .map(|vg| vnode_stats(svc, &d.name, vg.id, &vg.dnode_addr)),
        )
    }))
    .await;
    let mut rows = Vec::new();
    for (d, stats) in list.into_iter().zip(stats) {
        let o = options_from_wire(d.options.as_ref())?;
        let offline = stats.iter().filter(|st| st.is_none()).count();
        let ntables: u64 = stats.iter().flatten().map(|st| st.tables).sum();
        rows.push(vec![
            s(d.name),
            Value::Timestamp(d.created_ms),
            i(o.vgroups),
            if offline == 0 {
                i(ntables)
            } else {
                Value::Null
            },
            i(o.replica),
            s(minutes(o.duration_minutes)),
            s(minutes(o.keep_minutes)),
            i(o.buffer_mb),
            i(o.minrows),
            i(o.maxrows),
            i(o.comp),
            s(o.precision.as_str()),
            s(if offline == 0 {
                "ready".to_string()
            } else {
                format!("{offline} of {} vgroups offline", stats.len())
            }),
            s(o.cache_model),
            i(o.cache_size_mb),
            i(o.wal_level),
            i(o.wal_fsync_period_ms),
            i(o.stt_trigger),
        ]);
    }
    Ok(listing(db, fields, &rows))
}

pub async fn stables(
    svc: &SqlService,
    db: &str,
    sdb: &str,
    pattern: Option<&str>,
) -> ExecResult<Outcome> {
    let list = svc
        .client
        .mnode()?
        .list_stables(v1::ListStablesRequest {
            db: sdb.to_string(),
        })
        .await?
        .into_inner()
        .stables;
    let fields = stables_fields();
    let rows: Vec<Vec<Value>> = list
        .into_iter()
        .filter(|st| pattern.is_none_or(|p| like(p, &st.name)))
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
    Ok(listing(db, fields, &rows))
}

fn stables_fields() -> Vec<Field> {
    vec![
        varchar("stable_name"),
        varchar("db_name"),
        int("columns"),
        int("tags"),
        int("version"),
    ]
}

fn tables_fields() -> Vec<Field> {
    vec![
        varchar("table_name"),
        varchar("db_name"),
        varchar("stable_name"),
        int("vgroup_id"),
        int("uid"),
    ]
}

/// The tables of `information_schema`, as TDengine names them.
pub const SYSTEM_TABLES: [&str; 12] = [
    "ins_databases",
    "ins_stables",
    "ins_tables",
    "ins_tags",
    "ins_columns",
    "ins_vgroups",
    "ins_dnodes",
    "ins_mnodes",
    "ins_users",
    "ins_vnodes",
    "ins_cluster",
    "ins_grants",
];

/// The rows of `information_schema.<name>` (the SHOW statement's rows, over every database
/// for STABLEs, tables, tags, columns and vgroups); `None` for a name that is not one of
/// [`SYSTEM_TABLES`].
pub async fn system_table(svc: &SqlService, name: &str) -> ExecResult<Option<Batch>> {
    let one = |o: Outcome| o.batch.unwrap_or_else(|| Batch::from_rows(Vec::new(), &[]));
    let name = name.to_ascii_lowercase();
    Ok(Some(match name.as_str() {
        "ins_databases" => one(databases(svc, "").await?),
        "ins_dnodes" => one(dnodes(svc, "").await?),
        "ins_mnodes" => one(mnodes(svc, "").await?),
        "ins_users" => super::users::users_batch(svc).await?,
        "ins_vnodes" => one(vnodes(svc, "", None).await?),
        "ins_cluster" => one(cluster(svc, "").await?),
        "ins_grants" => one(grants("")?),
        "ins_stables" | "ins_tables" | "ins_vgroups" => {
            let mut out = Batch::from_rows(
                match name.as_str() {
                    "ins_stables" => stables_fields(),
                    "ins_tables" => tables_fields(),
                    _ => vgroups_fields(),
                },
                &[],
            );
            for d in database_list(svc).await? {
                let o = match name.as_str() {
                    "ins_stables" => stables(svc, "", &d.name, None).await?,
                    "ins_tables" => self::tables(svc, "", &d.name, None).await?,
                    // Boxed: SHOW VGROUPS plans a COUNT(*) (`rows_per_vgroup`), and loading
                    // a plan's catalog is what brought us here.
                    _ => Box::pin(vgroups(svc, "", &d.name)).await?,
                };
                if let Some(b) = o.batch {
                    out.append_owned(b);
                }
            }
            out
        }
        "ins_tags" | "ins_columns" => {
            let tags = name == "ins_tags";
            let mut rows = Vec::new();
            for d in database_list(svc).await? {
                let precision = options_from_wire(d.options.as_ref())?.precision;
                let (schemas, metas) = catalog_of(svc, &d.name).await?;
                if !tags {
                    for schema in schemas.values() {
                        rows.extend(column_rows(&schema.name, &d.name, "SUPER_TABLE", schema));
                    }
                }
                for m in &metas {
                    // A subtable whose STABLE is being dropped has no schema left to show.
                    let Some(schema) = schemas.get(&m.stable) else {
                        continue;
                    };
                    if tags {
                        rows.extend(tag_rows(m, schema, &d.name, precision));
                    } else {
                        rows.extend(column_rows(&m.name, &d.name, "CHILD_TABLE", schema));
                    }
                }
            }
            Batch::from_rows(
                if tags {
                    tags_fields()
                } else {
                    columns_fields()
                },
                &rows,
            )
        }
        _ => return Ok(None),
    }))
}

/// The STABLEs of `tdb` by name, and its subtables (of every vgroup, asked in parallel) by
/// name.
async fn catalog_of(
    svc: &SqlService,
    tdb: &str,
) -> ExecResult<(BTreeMap<String, StableSchema>, Vec<TableMeta>)> {
    let list = svc
        .client
        .mnode()?
        .list_stables(v1::ListStablesRequest {
            db: tdb.to_string(),
        })
        .await?
        .into_inner()
        .stables;
    let mut schemas = BTreeMap::new();
    for st in &list {
        let schema = schema_from_wire(st)?;
        schemas.insert(schema.name.clone(), schema);
    }
    let metas = subtables_of(svc, tdb, None).await?;
    Ok((schemas, metas))
}

fn tags_fields() -> Vec<Field> {
    vec![
        varchar("table_name"),
        varchar("db_name"),
        varchar("stable_name"),
        varchar("tag_name"),
        varchar("tag_type"),
        Field::new("tag_value", DataType::VarChar(16_384)),
    ]
}

/// One row per tag of subtable `meta` ([`tags_fields`]): its value as text, a timestamp in
/// the database's precision; NULL for a tag added after the subtable was created.
fn tag_rows(
    meta: &TableMeta,
    schema: &StableSchema,
    tdb: &str,
    precision: Precision,
) -> Vec<Vec<Value>> {
    schema
        .tags
        .iter()
        .enumerate()
        .map(|(k, t)| {
            let text = match meta.tags.get(k).cloned().unwrap_or(Value::Null) {
                Value::Null => Value::Null,
                Value::Timestamp(ts) => s(precision.format_timestamp(ts)),
                v => s(v.to_string()),
            };
            vec![
                s(meta.name.clone()),
                s(tdb),
                s(schema.name.clone()),
                s(t.name.clone()),
                s(t.data_type.to_string()),
                text,
            ]
        })
        .collect()
}

fn columns_fields() -> Vec<Field> {
    vec![
        varchar("table_name"),
        varchar("db_name"),
        varchar("table_type"),
        varchar("col_name"),
        varchar("col_type"),
        int("col_length"),
        int("col_precision"),
        int("col_scale"),
        int("col_nullable"),
    ]
}

/// One row per column (not tag: those are `ins_tags`) of table `table` of type `kind`
/// ([`columns_fields`]). Tidal has no DECIMAL, so precision and scale are 0 as TDengine
/// reports them for other types; the first column, the timestamp, is never NULL.
fn column_rows(table: &str, tdb: &str, kind: &str, schema: &StableSchema) -> Vec<Vec<Value>> {
    schema
        .columns
        .iter()
        .enumerate()
        .map(|(k, c)| {
            vec![
                s(table),
                s(tdb),
                s(kind),
                s(c.name.clone()),
                s(c.data_type.to_string()),
                i(c.data_type.byte_len()),
                i(0),
                i(0),
                i(u8::from(k > 0)),
            ]
        })
        .collect()
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
    let fields = tables_fields();
    Ok(listing(db, fields, &rows))
}

/// Backquotes a name so that any name survives a round trip through the parser.
fn quote_ident(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// A single-quoted SQL string literal.
fn quote_str(v: &str) -> String {
    format!("'{}'", v.replace('\\', "\\\\").replace('\'', "''"))
}

/// The rows each vgroup of `sdb` holds, by vgroup id: a `COUNT(*)` of every STABLE, run on
/// each vgroup separately (block statistics answer most of it without reading rows). A
/// vgroup that fails to answer is missing from the map.
async fn rows_per_vgroup(
    svc: &SqlService,
    sdb: &str,
    vgroups: &[v1::VgroupInfo],
) -> ExecResult<HashMap<u32, u64>> {
    let stables = svc
        .client
        .mnode()?
        .list_stables(v1::ListStablesRequest {
            db: sdb.to_string(),
        })
        .await?
        .into_inner()
        .stables;
    let mut plans = Vec::with_capacity(stables.len());
    for st in &stables {
        let sql = format!(
            "SELECT COUNT(*) FROM {}.{}",
            quote_ident(sdb),
            quote_ident(&st.name)
        );
        let Some(tidal_sql::Statement::Select(q)) = tidal_sql::parse(&sql)?.pop() else {
            return Err(ExecError::new(
                StatusCode::Internal,
                format!("row count query did not parse as a query: {sql}"),
            ));
        };
        let snapshot = catalog::snapshot(svc, sdb, &q).await?;
        let plan = tidal_sql::plan_query(&q, Some(sdb), &snapshot)?;
        let [spec] = plan.fragments.as_slice() else {
            return Err(ExecError::new(
                StatusCode::Internal,
                format!("{sql} planned into {} fragments", plan.fragments.len()),
            ));
        };
        let bytes = spec.fragment.to_bytes();
        let id = spec.id;
        plans.push((plan, id, bytes));
    }
    let per_vgroup = vgroups.iter().map(|vg| {
        let plans = &plans;
        async move {
            let mut total = 0u64;
            for (plan, id, bytes) in plans {
                let mut d = svc.client.dnode(&vg.dnode_addr).ok()?;
                let batch = d
                    .exec_fragment(v1::FragmentRequest {
                        vnode: Some(v1::VnodeRef {
                            db: sdb.to_string(),
                            vgroup_id: vg.id,
                        }),
                        fragment: bytes.clone(),
                        memory_max_bytes: 0,
                    })
                    .await
                    .ok()?
                    .into_inner();
                let partial = batch_from_wire(batch).ok()?;
                let out = tidal_sql::finish(plan, vec![(*id, vec![partial])]).ok()?;
                let n = match out.columns.first().map(|c| c.get(0)) {
                    Some(Value::Int(n)) => u64::try_from(n).ok()?,
                    Some(Value::UInt(n)) => n,
                    _ => 0,
                };
                total += n;
            }
            Some((vg.id, total))
        }
    });
    Ok(futures::future::join_all(per_vgroup)
        .await
        .into_iter()
        .flatten()
        .collect())
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
    let stats = futures::future::join_all(
        info.vgroups
            .iter()
            .map(|vg| vnode_stats(svc, sdb, vg.id, &vg.dnode_addr)),
    )
    .await;
    let counts = rows_per_vgroup(svc, sdb, &info.vgroups).await?;
    let mut rows = Vec::new();
    for (vg, stats) in info.vgroups.iter().zip(stats) {
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
            counts.get(&vg.id).map(|n| i(*n)).unwrap_or(Value::Null),
            stat(|st| st.disk_bytes),
            stat(|st| st.wal_bytes),
            stat(|st| st.mem_bytes),
        ]);
    }
    let fields = vgroups_fields();
    Ok(listing(db, fields, &rows))
}

fn vgroups_fields() -> Vec<Field> {
    vec![
        int("vgroup_id"),
        varchar("db_name"),
        int("hash_begin"),
        int("hash_end"),
        int("dnode_id"),
        varchar("dnode_endpoint"),
        varchar("status"),
        int("tables"),
        int("rows"),
        int("disk_bytes"),
        int("wal_bytes"),
        int("mem_bytes"),
    ]
}

pub async fn dnodes(svc: &SqlService, db: &str) -> ExecResult<Outcome> {
    let list = dnode_list(svc).await?;
    let fields = vec![
        int("id"),
        varchar("endpoint"),
        int("vnodes"),
        varchar("status"),
        ts("create_time"),
        ts("last_heartbeat"),
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
                if d.last_heartbeat_ms > 0 {
                    Value::Timestamp(d.last_heartbeat_ms)
                } else {
                    Value::Null
                },
            ]
        })
        .collect();
    Ok(listing(db, fields, &rows))
}

/// The cluster has one mnode (REPLICA 1 catalog): the one this node's client talks to.
pub async fn mnodes(svc: &SqlService, db: &str) -> ExecResult<Outcome> {
    let status = match svc.client.mnode()?.list_dnodes(v1::Empty {}).await {
        Ok(_) => "ready",
        Err(_) => "offline",
    };
    let fields = vec![
        int("id"),
        varchar("endpoint"),
        varchar("role"),
        varchar("status"),
    ];
    let rows = vec![vec![
        i(1),
        s(svc.client.mnode_addr()),
        s("leader"),
        s(status),
    ]];
    Ok(listing(db, fields, &rows))
}

async fn lookup(svc: &SqlService, db: &str, table: &ObjectRef) -> ExecResult<(String, Named)> {
    let tdb = svc.db_of(&table.db, db)?.to_string();
    match svc.table(&tdb, &table.name).await? {
        Some(named) => Ok((tdb, named)),
        None => Err(ExecError::new(
            StatusCode::TableNotFound,
            format!("table '{}' does not exist in database '{tdb}'", table.name),
        )),
    }
}

/// The subtables of `stable` (`None`: of every STABLE) on every vgroup of `tdb`, sorted by
/// name.
async fn subtables_of(
    svc: &SqlService,
    tdb: &str,
    stable: Option<&str>,
) -> ExecResult<Vec<TableMeta>> {
    let route = svc.client.refresh_route(tdb).await?;
    let calls = route.vgroups.iter().map(|vg| {
        let d = svc.client.dnode(&vg.addr);
        let req = v1::ListTablesRequest {
            vnode: Some(v1::VnodeRef {
                db: tdb.to_string(),
                vgroup_id: vg.id.0,
            }),
            stable: stable.map(str::to_string),
        };
        async move { d?.list_tables(req).await.map_err(ExecError::from) }
    });
    let mut out = Vec::new();
    for r in futures::future::join_all(calls).await {
        out.extend(r?.into_inner().tables.iter().map(table_meta_from_wire));
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// `SHOW TABLE TAGS FROM t`: `tbname` and one column per tag, one row per subtable.
pub async fn table_tags(svc: &SqlService, db: &str, table: &ObjectRef) -> ExecResult<Outcome> {
    let (tdb, named) = lookup(svc, db, table).await?;
    let (schema, metas) = match named {
        Named::Stable(schema) => {
            let metas = subtables_of(svc, &tdb, Some(&schema.name)).await?;
            (schema, metas)
        }
        Named::Subtable(meta, schema) => (schema, vec![meta]),
    };
    let mut fields = vec![Field::new("tbname", DataType::VarChar(192))];
    fields.extend(
        schema
            .tags
            .iter()
            .map(|t| Field::new(t.name.clone(), t.data_type)),
    );
    let rows: Vec<Vec<Value>> = metas
        .into_iter()
        .map(|m| {
            let mut row = vec![s(m.name)];
            // A tag added after the subtable was created has no value yet.
            row.extend(
                (0..schema.tags.len()).map(|k| m.tags.get(k).cloned().unwrap_or(Value::Null)),
            );
            row
        })
        .collect();
    let precision = svc.precision(&tdb).await?;
    Ok(Outcome::rows(
        db,
        Batch::from_rows(fields, &rows),
        precision,
    ))
}

/// SHOW TABLE DISTRIBUTED: where the rows of a STABLE (every vgroup holding any of its
/// subtables) or of a subtable (its vgroup) are stored, one row per vgroup as its vnode counts
/// them from its block indexes and memtables, and with several vgroups a last row (vgroup_id
/// NULL) over them all. Columns follow TDengine's `ins_table_fixed_distributed`:
/// `total_size` is the bytes of the data blocks (with their SMA records) and
/// `compression_ratio` that size per 100 bytes of the same rows at the declared column widths
/// (`row_size`). Rows count per layer as stored (data blocks, STT files, memtables), before
/// newest-wins merging: a timestamp written again counts once per layer holding it until a
/// merge; COUNT(*) is exact.
pub async fn table_distributed(
    svc: &SqlService,
    db: &str,
    table: &ObjectRef,
) -> ExecResult<Outcome> {
    let (tdb, named) = lookup(svc, db, table).await?;
    let (name, stable, schema) = match named {
        Named::Stable(schema) => (schema.name.clone(), true, schema),
        Named::Subtable(meta, schema) => (meta.name, false, schema),
    };
    let route = svc.client.refresh_route(&tdb).await?;
    let targets = if stable {
        route.vgroups.clone()
    } else {
        vec![route.vgroup_of(&tdb, &name).clone()]
    };
    let calls = targets.iter().map(|vg| {
        let req = v1::VnodeStatsRequest {
            db: tdb.clone(),
            vgroup_id: vg.id.0,
            distribution_of: Some(v1::DistributionOf {
                table: name.clone(),
                stable,
            }),
        };
        async move {
            let who = || format!("vgroup {} on data node {}", vg.id, vg.addr);
            let r = svc
                .client
                .dnode(&vg.addr)?
                .vnode_stats(req)
                .await
                .map_err(|e| older_node(e, &who(), "SHOW TABLE DISTRIBUTED"))?
                .into_inner();
            let d = r.distribution.ok_or_else(|| {
                ExecError::new(
                    StatusCode::Unimplemented,
                    format!(
                        "{} runs an older Tidal that cannot answer SHOW TABLE DISTRIBUTED; upgrade it",
                        who()
                    ),
                )
            })?;
            Ok::<_, ExecError>((vg.id.0, d))
        }
    });
    let mut parts = Vec::new();
    for r in futures::future::join_all(calls).await {
        let (vg, d) = r?;
        if d.tables > 0 {
            parts.push((Some(vg), d));
        }
    }
    parts.sort_by_key(|(vg, _)| *vg);
    let vgroups = parts.len();
    if vgroups > 1 {
        let mut total = v1::TableDistribution::default();
        let mut min_rows = None::<u32>;
        for (_, d) in &parts {
            total.tables += d.tables;
            total.windows += d.windows;
            total.damaged_windows += d.damaged_windows;
            total.blocks += d.blocks;
            total.block_rows += d.block_rows;
            total.block_bytes += d.block_bytes;
            total.stt_blocks += d.stt_blocks;
            total.stt_rows += d.stt_rows;
            total.stt_bytes += d.stt_bytes;
            total.mem_rows += d.mem_rows;
            total.max_block_rows = total.max_block_rows.max(d.max_block_rows);
            if d.blocks > 0 {
                min_rows = Some(min_rows.map_or(d.min_block_rows, |m| m.min(d.min_block_rows)));
            }
        }
        total.min_block_rows = min_rows.unwrap_or(0);
        parts.push((None, total));
    }
    let row_size: u64 = schema
        .columns
        .iter()
        .map(|c| u64::from(c.data_type.byte_len()))
        .sum();
    let ratio = |num: u64, den: u64, scale: f64| {
        if den == 0 {
            Value::Null
        } else {
            Value::Float(num as f64 * scale / den as f64)
        }
    };
    let rows: Vec<Vec<Value>> = parts
        .iter()
        .map(|(vg, d)| {
            vec![
                s(tdb.clone()),
                s(name.clone()),
                vg.map_or(Value::Null, i),
                i(vgroups),
                i(d.tables),
                i(d.windows),
                i(d.blocks),
                i(d.block_bytes),
                ratio(d.block_bytes, d.blocks, 1.0),
                ratio(d.block_bytes, d.block_rows.saturating_mul(row_size), 100.0),
                i(d.block_rows),
                i(d.min_block_rows),
                i(d.max_block_rows),
                ratio(d.block_rows, d.blocks, 1.0),
                i(d.stt_rows),
                i(d.stt_bytes),
                i(d.mem_rows),
                i(row_size),
                i(d.damaged_windows),
            ]
        })
        .collect();
    let double = |n: &str| Field::new(n, DataType::Double);
    let fields = vec![
        varchar("db_name"),
        varchar("table_name"),
        int("vgroup_id"),
        int("total_vgroups"),
        int("total_tables"),
        int("total_filesets"),
        int("total_blocks"),
        int("total_size"),
        double("average_size"),
        double("compression_ratio"),
        int("block_rows"),
        int("min_rows"),
        int("max_rows"),
        double("avg_rows"),
        int("stt_rows"),
        int("stt_size"),
        int("in_mem_rows"),
        int("row_size"),
        int("damaged_filesets"),
    ];
    Ok(listing(db, fields, &rows))
}

/// `SHOW TAGS FROM subtable`: one row per tag with its type and value.
pub async fn tags(svc: &SqlService, db: &str, table: &ObjectRef) -> ExecResult<Outcome> {
    let (tdb, named) = lookup(svc, db, table).await?;
    let (meta, schema) = match named {
        Named::Subtable(meta, schema) => (meta, schema),
        Named::Stable(schema) => {
            return Err(ExecError::new(
                StatusCode::InvalidArgument,
                format!(
                    "'{}' is a STABLE; SHOW TAGS reads one subtable (SHOW TABLE TAGS FROM {} lists them all)",
                    schema.name, schema.name
                ),
            ))
        }
    };
    let precision = svc.precision(&tdb).await?;
    let rows = tag_rows(&meta, &schema, &tdb, precision);
    Ok(Outcome::rows(
        db,
        Batch::from_rows(tags_fields(), &rows),
        Precision::Millis,
    ))
}

/// The CREATE DATABASE statement that recreates `name` with all its options.
pub fn create_database_sql(name: &str, o: &DbOptions) -> String {
    format!(
        "CREATE DATABASE {} VGROUPS {} REPLICA {} PRECISION '{}' DURATION {} KEEP {} BUFFER {} \
         WAL_LEVEL {} WAL_FSYNC_PERIOD {} CACHEMODEL {} CACHESIZE {} STT_TRIGGER {} MINROWS {} \
         MAXROWS {} COMP {}",
        quote_ident(name),
        o.vgroups,
        o.replica,
        o.precision.as_str(),
        minutes(o.duration_minutes),
        minutes(o.keep_minutes),
        o.buffer_mb,
        o.wal_level,
        o.wal_fsync_period_ms,
        quote_str(&o.cache_model),
        o.cache_size_mb,
        o.stt_trigger,
        o.minrows,
        o.maxrows,
        o.comp
    )
}

/// The CREATE STABLE statement of `schema` (unqualified: it recreates the STABLE in the
/// current database), with each column's ENCODE/COMPRESS/LEVEL as it was given.
pub fn create_stable_sql(schema: &StableSchema) -> String {
    let defs = |cols: &[tidal_common::ColumnDef]| {
        cols.iter()
            .map(|c| {
                let mut d = format!("{} {}", quote_ident(&c.name), c.data_type);
                if let Some(spec) = &c.codec {
                    for (kw, v) in [
                        ("ENCODE", &spec.encode),
                        ("COMPRESS", &spec.compress),
                        ("LEVEL", &spec.level),
                    ] {
                        if let Some(v) = v {
                            d.push_str(&format!(" {kw} {}", quote_str(v)));
                        }
                    }
                }
                d
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "CREATE STABLE {} ({}) TAGS ({})",
        quote_ident(&schema.name),
        defs(&schema.columns),
        defs(&schema.tags)
    )
}

/// A tag value as a SQL literal that binds back to the same value.
fn literal(tag: &str, v: &Value) -> ExecResult<String> {
    Ok(match v {
        Value::Null => "NULL".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Int(n) | Value::Timestamp(n) => n.to_string(),
        Value::UInt(n) => n.to_string(),
        // `{:?}` prints the shortest text that parses back to the same double (1.5, 1e300).
        Value::Float(x) if x.is_finite() => format!("{x:?}"),
        Value::Float(x) => {
            return Err(ExecError::new(
                StatusCode::InvalidArgument,
                format!("tag '{tag}' holds {x}, which SQL cannot write as a literal"),
            ))
        }
        Value::Str(v) => quote_str(v),
    })
}

/// The CREATE TABLE ... USING statement of a subtable.
pub fn create_subtable_sql(meta: &TableMeta, schema: &StableSchema) -> ExecResult<String> {
    let names: Vec<String> = schema.tags.iter().map(|t| quote_ident(&t.name)).collect();
    let mut values = Vec::with_capacity(schema.tags.len());
    for (k, t) in schema.tags.iter().enumerate() {
        values.push(literal(&t.name, meta.tags.get(k).unwrap_or(&Value::Null))?);
    }
    Ok(format!(
        "CREATE TABLE {} USING {} ({}) TAGS ({})",
        quote_ident(&meta.name),
        quote_ident(&schema.name),
        names.join(", "),
        values.join(", ")
    ))
}

pub async fn create_database(svc: &SqlService, db: &str, name: &str) -> ExecResult<Outcome> {
    let info = svc
        .client
        .mnode()?
        .get_database(v1::GetDatabaseRequest {
            name: name.to_string(),
        })
        .await?
        .into_inner();
    let o = options_from_wire(info.options.as_ref())?;
    let fields = vec![
        varchar("Database"),
        Field::new("Create Database", DataType::VarChar(4096)),
    ];
    let rows = vec![vec![
        s(info.name.clone()),
        s(create_database_sql(&info.name, &o)),
    ]];
    Ok(listing(db, fields, &rows))
}

/// SHOW CREATE STABLE (`stable`: the name must be a STABLE) or SHOW CREATE TABLE (either).
pub async fn create_table(
    svc: &SqlService,
    db: &str,
    table: &ObjectRef,
    stable: bool,
) -> ExecResult<Outcome> {
    let (_, named) = lookup(svc, db, table).await?;
    let (name, sql) = match named {
        Named::Stable(schema) => (schema.name.clone(), create_stable_sql(&schema)),
        Named::Subtable(meta, _) if stable => {
            return Err(ExecError::new(
                StatusCode::InvalidArgument,
                format!(
                    "'{}' is a subtable of STABLE '{}', not a STABLE: use SHOW CREATE TABLE {}",
                    meta.name, meta.stable, meta.name
                ),
            ))
        }
        Named::Subtable(meta, schema) => (meta.name.clone(), create_subtable_sql(&meta, &schema)?),
    };
    // As TDengine, for a STABLE too.
    let fields = vec![
        varchar("Table"),
        Field::new("Create Table", DataType::VarChar(65_535)),
    ];
    Ok(Outcome::rows(
        db,
        Batch::from_rows(fields, &[vec![s(name), s(sql)]]),
        Precision::Millis,
    ))
}

/// SHOW QUERIES: the statements this node coordinates right now, oldest first.
pub fn queries(db: &str, running: &[Arc<Running>]) -> ExecResult<Outcome> {
    let fields = vec![
        varchar("kill_id"),
        varchar("user"),
        varchar("client"),
        varchar("end_point"),
        ts("create_time"),
        int("exec_usec"),
        varchar("state"),
        int("sub_num"),
        int("timeout_ms"),
        varchar("kind"),
        Field::new(
            "sql",
            DataType::VarChar((super::queries::SQL_TEXT_MAX_CHARS * 4 + 3) as u32),
        ),
    ];
    let rows: Vec<Vec<Value>> = running
        .iter()
        .map(|r| {
            vec![
                s(r.id.clone()),
                s(r.user.clone()),
                s(r.client.clone()),
                s(r.endpoint.clone()),
                Value::Timestamp(r.started_ms),
                i(r.elapsed().as_micros()),
                s(r.state()),
                i(r.fragments_in_flight()),
                if r.killable {
                    i(r.timeout_ms)
                } else {
                    Value::Null
                },
                s(if r.killable { "query" } else { "write/ddl" }),
                s(r.sql.clone()),
            ]
        })
        .collect();
    Ok(listing(db, fields, &rows))
}

/// SHOW CLUSTER: the cluster as the mnode knows it (see `MnodeService::cluster_info`). No
/// licence expires, so `expire_time` is NULL.
pub async fn cluster(svc: &SqlService, db: &str) -> ExecResult<Outcome> {
    let c = svc
        .client
        .mnode()?
        .get_cluster(v1::Empty {})
        .await
        .map_err(|e| older_node(e, "the mnode", "SHOW CLUSTER"))?
        .into_inner();
    let fields = vec![
        int("id"),
        varchar("name"),
        int("uptime"),
        ts("create_time"),
        varchar("version"),
        ts("expire_time"),
    ];
    let row = vec![
        i(c.id),
        s(c.name),
        i(c.uptime_seconds),
        if c.created_ms > 0 {
            Value::Timestamp(c.created_ms)
        } else {
            Value::Null
        },
        s(c.version),
        Value::Null,
    ];
    Ok(Outcome::rows(
        db,
        Batch::from_rows(fields, &[row]),
        Precision::Millis,
    ))
}

/// The error of a call to `who`: an UNIMPLEMENTED answer means a node of an older version
/// that lacks the call `what` needs.
fn older_node(e: tonic::Status, who: &str, what: &str) -> ExecError {
    if e.code() == tonic::Code::Unimplemented {
        ExecError::new(
            StatusCode::Unimplemented,
            format!("{who} runs an older Tidal that cannot answer {what}; upgrade it"),
        )
    } else {
        e.into()
    }
}

fn variables_fields() -> Vec<Field> {
    vec![
        varchar("name"),
        Field::new("value", DataType::VarChar(4096)),
        varchar("scope"),
        Field::new("source", DataType::VarChar(4096)),
        Field::new("info", DataType::VarChar(1024)),
    ]
}

/// Reading a node's configuration (paths, addresses) takes a superuser, as TDengine's
/// SYSINFO does; a statement run outside a session (none registered) is internal.
fn require_superuser(what: &str) -> ExecResult<()> {
    match super::queries::current() {
        Some(r) if !r.superuser => Err(ExecError::new(
            StatusCode::PermissionDenied,
            format!("{what} needs a superuser: user '{}' is not one", r.user),
        )),
        _ => Ok(()),
    }
}

/// The keys SHOW VARIABLES lists to every user: the limits their own statements run under
/// (a client that plans its queries itself applies them too).
const SESSION_VARIABLES: [&str; 2] = ["query_timeout_ms", "query_memory_max_bytes"];

/// SHOW VARIABLES: the configuration keys of the process running the statement, with the
/// values it resolved at start (flag > environment > file > default) and where each came
/// from. A user who is not a superuser sees only [`SESSION_VARIABLES`].
pub fn variables(
    db: &str,
    vars: &[crate::config::Variable],
    pattern: Option<&str>,
) -> ExecResult<Outcome> {
    let every = require_superuser("SHOW VARIABLES").is_ok();
    let rows: Vec<Vec<Value>> = vars
        .iter()
        .filter(|v| every || SESSION_VARIABLES.contains(&v.name.as_str()))
        .filter(|v| pattern.is_none_or(|p| like(p, &v.name)))
        .map(|v| {
            vec![
                s(v.name.clone()),
                v.value.clone().map_or(Value::Null, s),
                s(crate::config::VARIABLE_SCOPE),
                s(v.source.clone()),
                s(v.info.clone()),
            ]
        })
        .collect();
    Ok(Outcome::rows(
        db,
        Batch::from_rows(variables_fields(), &rows),
        Precision::Millis,
    ))
}

/// SHOW DNODE n VARIABLES: data node `id`'s configuration, asked of it.
pub async fn dnode_variables(
    svc: &SqlService,
    db: &str,
    id: u32,
    pattern: Option<&str>,
) -> ExecResult<Outcome> {
    require_superuser("SHOW DNODE VARIABLES")?;
    let addr = dnode_addr(svc, id).await?;
    let r = svc
        .client
        .dnode(&addr)?
        .variables(v1::Empty {})
        .await
        .map_err(|e| {
            older_node(
                e,
                &format!("data node {id} ({addr})"),
                "SHOW DNODE VARIABLES",
            )
        })?
        .into_inner();
    let mut fields = vec![int("dnode_id")];
    fields.extend(variables_fields());
    let rows: Vec<Vec<Value>> = r
        .variables
        .into_iter()
        .filter(|v| pattern.is_none_or(|p| like(p, &v.name)))
        .map(|v| {
            vec![
                i(r.dnode_id),
                s(v.name),
                v.value.map_or(Value::Null, s),
                s(v.scope),
                s(v.source),
                s(v.info),
            ]
        })
        .collect();
    Ok(listing(db, fields, &rows))
}

fn vnodes_fields() -> Vec<Field> {
    vec![
        int("dnode_id"),
        int("vgroup_id"),
        varchar("db_name"),
        varchar("status"),
        varchar("dnode_endpoint"),
    ]
}

/// SHOW VNODES: the vgroups each data node (or the one `on` names) hosts, as the mnode
/// assigned them and as the data node reports them open (`Dnode.DnodeStats`). Status: `leader`
/// for an assigned vgroup the node has open (every vgroup has one replica, which leads it),
/// `opening` for one it has not opened yet, `offline` when the node does not answer, and
/// `unassigned` for a vnode a node still has open that the mnode no longer places there
/// (the node removes it at its next heartbeat).
pub async fn vnodes(
    svc: &SqlService,
    db: &str,
    on: Option<&tidal_sql::DnodeRef>,
) -> ExecResult<Outcome> {
    let mut dnodes = dnode_list(svc).await?;
    if let Some(on) = on {
        dnodes.retain(|d| match on {
            tidal_sql::DnodeRef::Id(id) => d.id == *id,
            tidal_sql::DnodeRef::Endpoint(ep) => d.addr == *ep,
        });
        if dnodes.is_empty() {
            let which = match on {
                tidal_sql::DnodeRef::Id(id) => format!("data node {id}"),
                tidal_sql::DnodeRef::Endpoint(ep) => format!("a data node at '{ep}'"),
            };
            return Err(ExecError::new(
                StatusCode::InvalidArgument,
                format!("{which} does not exist (SHOW DNODES lists the data nodes)"),
            ));
        }
    }
    // Only the databases the caller may see (a superuser sees all): a vnode of another
    // database is left out, not shown as unassigned.
    let dbs = database_list(svc).await?;
    let superuser = super::queries::current().is_none_or(|r| r.superuser);
    let hosted = futures::future::join_all(dnodes.iter().map(|d| async move {
        let mut c = svc.client.dnode(&d.addr).ok()?;
        c.dnode_stats(v1::Empty {})
            .await
            .ok()
            .map(|r| r.into_inner().vnodes)
    }))
    .await;
    let mut rows = Vec::new();
    for (d, hosted) in dnodes.iter().zip(hosted) {
        let open: Vec<(String, u32)> = hosted
            .iter()
            .flatten()
            .map(|v| (v.db.clone(), v.vgroup_id))
            .collect();
        let mut assigned = Vec::new();
        for info in &dbs {
            for vg in info.vgroups.iter().filter(|vg| vg.dnode_id == d.id) {
                assigned.push((info.name.clone(), vg.id));
            }
        }
        for (name, vg) in &assigned {
            let status = match &hosted {
                None => "offline",
                Some(_) if open.contains(&(name.clone(), *vg)) => "leader",
                Some(_) => "opening",
            };
            rows.push((d.id, *vg, name.clone(), status, d.addr.clone()));
        }
        for (name, vg) in open {
            let visible = superuser || dbs.iter().any(|i| i.name == name);
            if visible && !assigned.contains(&(name.clone(), vg)) {
                rows.push((d.id, vg, name, "unassigned", d.addr.clone()));
            }
        }
    }
    rows.sort_by(|a, b| (a.0, a.1, &a.2).cmp(&(b.0, b.1, &b.2)));
    let rows: Vec<Vec<Value>> = rows
        .into_iter()
        .map(|(dnode, vg, name, status, addr)| vec![i(dnode), i(vg), s(name), s(status), s(addr)])
        .collect();
    Ok(Outcome::rows(
        db,
        Batch::from_rows(vnodes_fields(), &rows),
        Precision::Millis,
    ))
}

/// The address of data node `id`, as the mnode lists it.
async fn dnode_addr(svc: &SqlService, id: u32) -> ExecResult<String> {
    let dnodes = dnode_list(svc).await?;
    match dnodes.into_iter().find(|d| d.id == id) {
        Some(d) => Ok(d.addr),
        None => Err(ExecError::new(
            StatusCode::InvalidArgument,
            format!("data node {id} does not exist (SHOW DNODES lists the data nodes)"),
        )),
    }
}

/// SHOW GRANTS / SHOW LICENCES: TDengine's licence row, in its column shape. Tidal has no
/// licensing, so nothing is licensed and nothing expires: every limit reads "unlimited" and
/// the edition "community", the word TDengine itself uses for an installation without a
/// licence (tools that show licence details skip them for it).
pub fn grants(db: &str) -> ExecResult<Outcome> {
    let names = [
        "version",
        "expire_time",
        "service_time",
        "expired",
        "state",
        "timeseries",
        "dnodes",
        "cpu_cores",
        "vnodes",
        "storage_size",
    ];
    let fields = names.iter().map(|n| varchar(n)).collect();
    let mut row = vec![s("community"), s("unlimited"), s("unlimited"), s("false")];
    row.extend(names[4..].iter().map(|_| s("unlimited")));
    Ok(Outcome::rows(
        db,
        Batch::from_rows(fields, &[row]),
        Precision::Millis,
    ))
}

pub async fn describe(svc: &SqlService, db: &str, table: &ObjectRef) -> ExecResult<Outcome> {
    let tdb = svc.db_of(&table.db, db)?.to_string();
    let schema = match svc.table(&tdb, &table.name).await? {
        Some(Named::Stable(schema) | Named::Subtable(_, schema)) => schema,
        None => {
            return Err(ExecError::new(
                StatusCode::TableNotFound,
                format!("table '{}' does not exist in database '{tdb}'", table.name),
            ))
        }
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
    Ok(listing(db, fields, &rows))
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

    /// The generated CREATE TABLE parses back to the same tag values.
    #[test]
    fn subtable_sql_parses_back_to_the_same_tags() {
        use tidal_common::{ColumnDef, SchemaVersion, TableUid};
        let tags = vec![
            ColumnDef::new("s", DataType::VarChar(40)),
            ColumnDef::new("f", DataType::Double),
            ColumnDef::new("g", DataType::Double),
            ColumnDef::new("i", DataType::BigInt),
            ColumnDef::new("u", DataType::UBigInt),
            ColumnDef::new("b", DataType::Bool),
            ColumnDef::new("t", DataType::Timestamp),
            ColumnDef::new("n", DataType::Int),
        ];
        let schema = StableSchema {
            db: "d".into(),
            name: "we`ird".into(),
            version: SchemaVersion(1),
            columns: vec![ColumnDef::new("ts", DataType::Timestamp)],
            tags,
        };
        let values = vec![
            Value::Str("it's a \\ \"test\", ☃".into()),
            Value::Float(0.1),
            Value::Float(-1e300),
            Value::Int(i64::MIN + 1),
            Value::UInt(u64::MAX),
            Value::Bool(false),
            Value::Timestamp(1_700_000_000_000),
            Value::Null,
        ];
        let meta = TableMeta {
            uid: TableUid(1),
            name: "t`1".into(),
            stable: schema.name.clone(),
            tags: values.clone().into(),
        };
        let sql = create_subtable_sql(&meta, &schema).unwrap();
        let Some(tidal_sql::Statement::CreateTables { tables, .. }) =
            tidal_sql::parse(&sql).unwrap().pop()
        else {
            panic!("{sql}");
        };
        assert_eq!(tables[0].name.name, "t`1");
        assert_eq!(tables[0].stable.name, "we`ird");
        let bound =
            tidal_sql::bind_create_subtable(&tables[0], &schema, Precision::Millis).unwrap();
        assert_eq!(bound, values, "{sql}");
        // A value SQL cannot write is an error, not a wrong statement.
        let bad = TableMeta {
            tags: vec![Value::Null, Value::Float(f64::NAN)].into(),
            ..meta
        };
        let e = create_subtable_sql(&bad, &schema).unwrap_err();
        assert!(e.message.contains("tag 'f'"), "{}", e.message);
    }

    #[test]
    fn database_sql_parses_back_to_the_same_options() {
        let mut o = DbOptions {
            vgroups: 7,
            duration_minutes: 90,
            keep_minutes: 3 * 1440,
            cache_model: "last_value".into(),
            comp: 1,
            ..DbOptions::default()
        };
        o.precision = Precision::Nanos;
        let sql = create_database_sql("x", &o);
        let Some(tidal_sql::Statement::CreateDatabase { name, options, .. }) =
            tidal_sql::parse(&sql).unwrap().pop()
        else {
            panic!("{sql}");
        };
        assert_eq!(name, "x");
        assert_eq!(options, o, "{sql}");
    }
}
