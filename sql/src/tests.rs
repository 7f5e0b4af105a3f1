//! Unit and end-to-end tests: an in-memory catalog and ScanSource with several "vnodes".

use crate::*;
use tidal_common::{
    Batch, Column, ColumnDef, DataType, Precision, StableSchema, StatusCode, TableMeta, TableUid,
    Value,
};

const T0: i64 = 1451606400000; // 2016-01-01 00:00:00.000

/// Tag or row values that are all literals, as the parser gives them.
fn lits<const N: usize>(values: [Value; N]) -> Vec<InsertValue> {
    values.into_iter().map(InsertValue::Value).collect()
}

fn readings_schema() -> StableSchema {
    StableSchema {
        db: "iot".into(),
        name: "readings".into(),
        version: tidal_common::SchemaVersion(1),
        columns: vec![
            ColumnDef::new("ts", DataType::Timestamp),
            ColumnDef::new("latitude", DataType::Double),
            ColumnDef::new("velocity", DataType::Double),
            ColumnDef::new("status", DataType::BigInt),
        ],
        tags: vec![
            ColumnDef::new("name", DataType::VarChar(30)),
            ColumnDef::new("fleet", DataType::VarChar(30)),
            ColumnDef::new("driver", DataType::VarChar(30)),
            ColumnDef::new("nominal_fuel_consumption", DataType::Double),
        ],
    }
}

const FLEETS: [&str; 3] = ["South", "North", "East"];
const DRIVERS: [&str; 2] = ["Derek", "Andy"];
const NOMINAL: [f64; 3] = [15.0, 19.0, 12.0];
const TRUCKS: usize = 6;
const ROWS: i64 = 10;

struct Table {
    meta: TableMeta,
    rows: Vec<Vec<Value>>,
}

fn tables() -> Vec<Table> {
    (0..TRUCKS)
        .map(|t| {
            let name = if t == 5 {
                Value::Null
            } else {
                Value::Str(format!("truck_{t}"))
            };
            let meta = TableMeta {
                uid: TableUid(t as u64 + 1),
                name: format!("r_truck_{t}"),
                stable: "readings".into(),
                tags: vec![
                    name,
                    Value::Str(FLEETS[t % 3].into()),
                    Value::Str(DRIVERS[t % 2].into()),
                    Value::Float(NOMINAL[t % 3]),
                ]
                .into(),
            };
            let rows = (0..ROWS)
                .map(|r| {
                    let ti = t as i64;
                    let vel = if (ti + r) % 7 == 0 {
                        Value::Null
                    } else {
                        Value::Float(((ti * 7 + r * 3) % 20) as f64 + 0.5)
                    };
                    vec![
                        Value::Timestamp(T0 + r * 10_000 + ti),
                        Value::Float(ti as f64 * 10.0 + r as f64 / 4.0),
                        vel,
                        Value::Int((ti + r) % 3),
                    ]
                })
                .collect();
            Table { meta, rows }
        })
        .collect()
}

struct Vnode {
    tables: Vec<Table>,
    /// When set, `scan_pieces` answers whole blocks of this many rows with summaries, like a
    /// storage engine with SMA.
    sma_block: Option<usize>,
    /// Whether the source offers its subtables as columns (`stable_tables`), as a vnode does;
    /// without, the executor works from catalog entries.
    columnar: bool,
}

impl ScanSource for Vnode {
    fn schema(&self, stable: &str) -> Option<std::sync::Arc<StableSchema>> {
        (stable == "readings").then(|| std::sync::Arc::new(readings_schema()))
    }
    fn tables(&self, stable: &str) -> Vec<std::sync::Arc<TableMeta>> {
        self.tables
            .iter()
            .filter(|t| t.meta.stable == stable)
            .map(|t| std::sync::Arc::new(t.meta.clone()))
            .collect()
    }
    fn stable_tables(&self, stable: &str) -> Option<std::sync::Arc<tidal_common::StableTables>> {
        if !self.columnar {
            return None;
        }
        let schema = self.schema(stable)?;
        Some(std::sync::Arc::new(tidal_common::StableTables::build(
            &schema,
            0,
            self.tables(stable),
        )))
    }
    fn table(&self, name: &str) -> Option<std::sync::Arc<TableMeta>> {
        self.tables
            .iter()
            .find(|t| t.meta.name == name)
            .map(|t| std::sync::Arc::new(t.meta.clone()))
    }
    fn scan(
        &self,
        uid: TableUid,
        lo: i64,
        hi: i64,
        columns: &[usize],
    ) -> Result<Vec<Column>, String> {
        let t = self
            .tables
            .iter()
            .find(|t| t.meta.uid == uid)
            .ok_or("no such uid")?;
        let schema = readings_schema();
        let mut out: Vec<Column> = columns
            .iter()
            .map(|c| Column::empty(schema.columns[*c].data_type, 0))
            .collect();
        for r in &t.rows {
            let ts = r[0].as_i64().unwrap_or(0);
            if ts < lo || ts > hi {
                continue;
            }
            for (o, c) in out.iter_mut().zip(columns) {
                o.push(&r[*c]);
            }
        }
        Ok(out)
    }

    fn scan_pieces(
        &self,
        uid: TableUid,
        lo: i64,
        hi: i64,
        columns: &[usize],
    ) -> Result<Vec<ScanPiece>, String> {
        let Some(k) = self.sma_block else {
            return Ok(vec![ScanPiece::Rows(self.scan(uid, lo, hi, columns)?)]);
        };
        let t = self
            .tables
            .iter()
            .find(|t| t.meta.uid == uid)
            .ok_or("no such uid")?;
        let mut pieces = Vec::new();
        for block in t.rows.chunks(k) {
            let first = block[0][0].as_i64().unwrap_or(0);
            let last = block[block.len() - 1][0].as_i64().unwrap_or(0);
            if last < lo || first > hi {
                continue;
            }
            if first < lo || last > hi {
                // partly inside: rows
                pieces.push(ScanPiece::Rows(self.scan(
                    uid,
                    lo.max(first),
                    hi.min(last),
                    columns,
                )?));
                continue;
            }
            let cols = columns
                .iter()
                .map(|c| {
                    let vals: Vec<&Value> = block
                        .iter()
                        .map(|r| &r[*c])
                        .filter(|v| !v.is_null())
                        .collect();
                    let min = vals
                        .iter()
                        .min_by(|a, b| a.total_cmp(b))
                        .map(|v| (*v).clone());
                    let max = vals
                        .iter()
                        .max_by(|a, b| a.total_cmp(b))
                        .map(|v| (*v).clone());
                    let sum = match vals.first() {
                        Some(Value::Float(_)) => {
                            Value::Float(vals.iter().filter_map(|v| v.as_f64()).sum())
                        }
                        Some(Value::Int(_)) => {
                            Value::Int(vals.iter().filter_map(|v| v.as_i64()).sum())
                        }
                        _ => Value::Null,
                    };
                    ColSummary {
                        count: vals.len() as u64,
                        min: min.unwrap_or(Value::Null),
                        max: max.unwrap_or(Value::Null),
                        sum,
                    }
                })
                .collect();
            pieces.push(ScanPiece::Summary {
                rows: block.len() as u64,
                ts_min: first,
                ts_max: last,
                cols,
            });
        }
        Ok(pieces)
    }
}

struct Cat;

impl Catalog for Cat {
    fn stable(&self, db: &str, name: &str) -> Option<StableSchema> {
        (db == "iot" && name == "readings").then(readings_schema)
    }
    fn subtable(&self, db: &str, name: &str) -> Option<(TableMeta, StableSchema)> {
        if db != "iot" {
            return None;
        }
        tables()
            .into_iter()
            .find(|t| t.meta.name == name)
            .map(|t| (t.meta, readings_schema()))
    }
    fn precision(&self, db: &str) -> Option<Precision> {
        (db == "iot").then_some(Precision::Millis)
    }
}

fn cluster(k: usize) -> Vec<Vnode> {
    let mut v: Vec<Vnode> = (0..k)
        .map(|_| Vnode {
            tables: vec![],
            sma_block: None,
            // 3 vnodes read tags from columns, 1 and 2 from catalog entries: `run` checks
            // that both give the same answers.
            columnar: k == 3,
        })
        .collect();
    for (i, t) in tables().into_iter().enumerate() {
        v[(i * 7 + 3) % k].tables.push(t);
    }
    v
}

fn query(sql: &str) -> Query {
    match parse(sql).expect("parse").remove(0) {
        Statement::Select(q) => *q,
        s => panic!("not a select: {s:?}"),
    }
}

fn run_on(sql: &str, vnodes: &[Vnode]) -> Result<Batch, SqlError> {
    let q = query(sql);
    let plan = plan_query(&q, Some("iot"), &Cat)?;
    let mut results = Vec::new();
    for f in &plan.fragments {
        // fragments travel as bytes
        let frag = Fragment::from_bytes(&f.fragment.to_bytes())?;
        let mut batches = Vec::new();
        for v in vnodes {
            match &f.target {
                FragmentTarget::AllVgroups => batches.push(execute_fragment(&frag, v)?),
                FragmentTarget::Table(t) => {
                    if v.table(t).is_some() {
                        batches.push(execute_fragment(&frag, v)?);
                    }
                }
            }
        }
        results.push((f.id, batches));
    }
    finish(&plan, results)
}

/// Runs on 3 vnodes, checks the result equals the 1-vnode (and 2-vnode) layout.
fn run(sql: &str) -> Batch {
    let b3 = run_on(sql, &cluster(3)).unwrap_or_else(|e| panic!("{sql}: {e}"));
    for k in [1, 2] {
        let b = run_on(sql, &cluster(k)).expect("run");
        assert_eq!(b.fields, b3.fields, "{sql}");
        let mut r1 = rows(&b);
        let mut r3 = rows(&b3);
        if !sql.to_lowercase().contains("order by") {
            r1.sort_by(|a, b| cmp_rows(a, b));
            r3.sort_by(|a, b| cmp_rows(a, b));
        }
        assert!(
            same_rows(&r1, &r3),
            "{sql}: {k}-vnode result differs from 3-vnode result:\n{r1:?}\n{r3:?}"
        );
    }
    b3
}

/// Equal rows, doubles within a relative 1e-12: merging partials in another order (STDDEV's
/// means) may move the last bit, and nothing more.
fn same_rows(a: &[Vec<Value>], b: &[Vec<Value>]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.len() == y.len()
                && x.iter().zip(y).all(|(p, q)| match (p, q) {
                    (Value::Float(p), Value::Float(q)) => {
                        p == q || (p - q).abs() <= 1e-12 * p.abs().max(q.abs())
                    }
                    _ => p == q,
                })
        })
}

fn cmp_rows(a: &[Value], b: &[Value]) -> std::cmp::Ordering {
    for (x, y) in a.iter().zip(b.iter()) {
        let o = x.total_cmp(y);
        if o != std::cmp::Ordering::Equal {
            return o;
        }
    }
    std::cmp::Ordering::Equal
}

fn rows(b: &Batch) -> Vec<Vec<Value>> {
    (0..b.num_rows()).map(|i| b.row(i)).collect()
}

fn names(b: &Batch) -> Vec<String> {
    b.fields.iter().map(|f| f.name.clone()).collect()
}

fn err(sql: &str) -> SqlError {
    match parse(sql) {
        Err(e) => e,
        Ok(mut s) => match s.remove(0) {
            Statement::Select(q) => match run_on(sql, &cluster(2)) {
                Err(e) => e,
                Ok(_) => panic!(
                    "expected an error for {sql}, plan {:?}",
                    plan_query(&q, Some("iot"), &Cat)
                ),
            },
            other => panic!("expected an error for {sql}, got {other:?}"),
        },
    }
}

/// Reference data: every row with its tags, flattened.
fn all_rows() -> Vec<(TableMeta, Vec<Value>)> {
    tables()
        .into_iter()
        .flat_map(|t| {
            let m = t.meta.clone();
            t.rows.into_iter().map(move |r| (m.clone(), r))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// parsing

#[test]
fn parse_ddl_forms() {
    let s = parse(" CREATE DATABASE IF NOT EXISTS iot VGROUPS 4 PRECISION 'us' KEEP 3650d DURATION 10d BUFFER 64 REPLICA 1 WAL_LEVEL 1 WAL_FSYNC_PERIOD 3000 CACHEMODEL 'last_row' CACHESIZE 4 STT_TRIGGER 1 MINROWS 50 MAXROWS 2000;").unwrap();
    match &s[0] {
        Statement::CreateDatabase {
            name,
            if_not_exists,
            options,
        } => {
            assert_eq!(name, "iot");
            assert!(if_not_exists);
            assert_eq!(options.vgroups, 4);
            assert_eq!(options.precision, Precision::Micros);
            assert_eq!(options.keep_minutes, 3650 * 24 * 60);
            assert_eq!(options.duration_minutes, 10 * 24 * 60);
            assert_eq!(options.buffer_mb, 64);
            assert_eq!(options.wal_level, 1);
            assert_eq!(options.wal_fsync_period_ms, 3000);
            assert_eq!(options.cache_model, "last_row");
            assert_eq!(options.cache_size_mb, 4);
            assert_eq!(options.stt_trigger, 1);
            assert_eq!((options.minrows, options.maxrows), (50, 2000));
        }
        o => panic!("{o:?}"),
    }
    let e = parse("create database d vgroups 2 bogus 3").unwrap_err();
    assert!(
        e.to_string().contains("unknown database option 'BOGUS'"),
        "{e}"
    );
    assert!(e.to_string().contains("1:29"), "{e}");
    assert_eq!(e.status_code(), StatusCode::SyntaxError);
    let e = parse("create database d vgroups 0").unwrap_err();
    assert!(e.to_string().contains("VGROUPS"), "{e}");

    let s = parse("CREATE STABLE iot.readings (ts TIMESTAMP, velocity DOUBLE, status BIGINT UNSIGNED, note BINARY(20)) TAGS (name VARCHAR(30), `Fleet` NCHAR(10))").unwrap();
    match &s[0] {
        Statement::CreateStable {
            db,
            name,
            columns,
            tags,
            if_not_exists,
        } => {
            assert_eq!(db.as_deref(), Some("iot"));
            assert_eq!(name, "readings");
            assert!(!if_not_exists);
            assert_eq!(columns[2].data_type, DataType::UBigInt);
            assert_eq!(columns[3].data_type, DataType::VarChar(20));
            assert_eq!(tags[1], ColumnDef::new("Fleet", DataType::NChar(10)));
        }
        o => panic!("{o:?}"),
    }
    // CREATE TABLE with TAGS is a stable
    let s = parse("create table if not exists Diag (ts timestamp, x int) tags (t int)").unwrap();
    assert!(
        matches!(&s[0], Statement::CreateStable { name, if_not_exists: true, .. } if name == "diag")
    );
    let s = parse("CREATE TABLE IF NOT EXISTS r_1 USING readings TAGS ('truck_1', 'South', NULL, 1.5) r_2 USING iot.readings (name, fleet) TAGS ('t2', 'North')").unwrap();
    match &s[0] {
        Statement::CreateTables {
            if_not_exists,
            tables,
        } => {
            assert!(if_not_exists);
            assert_eq!(tables.len(), 2);
            assert_eq!(
                tables[0].tags,
                lits([
                    Value::Str("truck_1".into()),
                    Value::Str("South".into()),
                    Value::Null,
                    Value::Float(1.5)
                ])
            );
            assert_eq!(tables[1].stable, ObjectRef::new(Some("iot"), "readings"));
            assert_eq!(
                tables[1].tag_names,
                Some(vec!["name".to_string(), "fleet".to_string()])
            );
        }
        o => panic!("{o:?}"),
    }
    let s = parse(
        "drop table if exists a, iot.b; drop stable readings; drop database if exists iot; use iot",
    )
    .unwrap();
    assert_eq!(s.len(), 4);
    assert_eq!(
        s[0],
        Statement::DropTable {
            if_exists: true,
            tables: vec![ObjectRef::new(None, "a"), ObjectRef::new(Some("iot"), "b")]
        }
    );
    assert_eq!(
        s[1],
        Statement::DropStable {
            if_exists: false,
            name: ObjectRef::new(None, "readings")
        }
    );
    assert_eq!(
        s[2],
        Statement::DropDatabase {
            if_exists: true,
            name: "iot".into()
        }
    );
    assert_eq!(s[3], Statement::Use { db: "iot".into() });
    let s = parse("show databases; show iot.stables; show tables like 'r_%'; show vgroups; show dnodes; describe iot.readings; desc r_1; flush database iot; compact database iot").unwrap();
    assert_eq!(s[0], Statement::ShowDatabases);
    assert_eq!(
        s[1],
        Statement::ShowStables {
            db: Some("iot".into()),
            like: None
        }
    );
    assert_eq!(
        s[2],
        Statement::ShowTables {
            db: None,
            like: Some("r_%".into())
        }
    );
    assert_eq!(s[3], Statement::ShowVgroups { db: None });
    assert_eq!(s[4], Statement::ShowDnodes);
    assert_eq!(
        s[5],
        Statement::Describe {
            table: ObjectRef::new(Some("iot"), "readings")
        }
    );
    assert_eq!(
        s[6],
        Statement::Describe {
            table: ObjectRef::new(None, "r_1")
        }
    );
    assert_eq!(s[7], Statement::FlushDatabase { name: "iot".into() });
    assert_eq!(s[8], Statement::CompactDatabase { name: "iot".into() });
}

#[test]
fn show_kill_statements() {
    let s = parse(
        "show mnodes; show queries; show iot.stables like 'r%'; show create database iot; \
         show create stable iot.readings; show create table r_1; show table tags from readings; \
         show table tags from r_1 from iot; show tags from iot.r_1; kill query '1a:7'",
    )
    .unwrap();
    assert_eq!(s[0], Statement::ShowMnodes);
    assert_eq!(s[1], Statement::ShowQueries);
    assert_eq!(
        s[2],
        Statement::ShowStables {
            db: Some("iot".into()),
            like: Some("r%".into())
        }
    );
    assert_eq!(s[3], Statement::ShowCreateDatabase { name: "iot".into() });
    assert_eq!(
        s[4],
        Statement::ShowCreateTable {
            table: ObjectRef::new(Some("iot"), "readings"),
            stable: true
        }
    );
    assert_eq!(
        s[5],
        Statement::ShowCreateTable {
            table: ObjectRef::new(None, "r_1"),
            stable: false
        }
    );
    assert_eq!(
        s[6],
        Statement::ShowTableTags {
            table: ObjectRef::new(None, "readings")
        }
    );
    assert_eq!(
        s[7],
        Statement::ShowTableTags {
            table: ObjectRef::new(Some("iot"), "r_1")
        }
    );
    assert_eq!(
        s[8],
        Statement::ShowTags {
            table: ObjectRef::new(Some("iot"), "r_1")
        }
    );
    assert_eq!(s[9], Statement::KillQuery { id: "1a:7".into() });
    for (bad, want) in [
        ("kill query 7", "expected a quoted query id"),
        ("show tags from a.b from a", "already names its database"),
        ("show create view v", "expected DATABASE, STABLE or TABLE"),
        ("show tables like x", "expected a quoted pattern"),
        ("show nothing", "expected DATABASES"),
    ] {
        let e = parse(bad).unwrap_err().to_string();
        assert!(e.contains(want), "{bad}: {e}");
    }
}

#[test]
fn show_cluster_statements() {
    let s = parse("show grants; SHOW LICENCES; show licenses").unwrap();
    assert_eq!(s, vec![Statement::ShowGrants; 3]);
    assert_eq!(parse("show cluster").unwrap(), vec![Statement::ShowCluster]);
    let s = parse(
        "show variables; show cluster variables like 'query%'; SHOW DNODE 2 VARIABLES; \
         show dnode 7 variables like '%ms'",
    )
    .unwrap();
    let vars = |dnode: Option<u32>, like: Option<&str>| Statement::ShowVariables {
        dnode,
        like: like.map(str::to_string),
    };
    assert_eq!(
        s,
        vec![
            vars(None, None),
            vars(None, Some("query%")),
            vars(Some(2), None),
            vars(Some(7), Some("%ms")),
        ]
    );
    let s = parse(
        "show vnodes; show vnodes on dnode 3; SHOW VNODES 2; show vnodes 'h:6030'; show 4 vnodes",
    )
    .unwrap();
    let on = |d: Option<DnodeRef>| Statement::ShowVnodes { dnode: d };
    assert_eq!(
        s,
        vec![
            on(None),
            on(Some(DnodeRef::Id(3))),
            on(Some(DnodeRef::Id(2))),
            on(Some(DnodeRef::Endpoint("h:6030".into()))),
            on(Some(DnodeRef::Id(4))),
        ]
    );
    assert_eq!(
        parse("show table distributed iot.readings; SHOW TABLE DISTRIBUTED r_1").unwrap(),
        vec![
            Statement::ShowTableDistributed {
                table: ObjectRef::new(Some("iot"), "readings")
            },
            Statement::ShowTableDistributed {
                table: ObjectRef::new(None, "r_1")
            },
        ]
    );
    for (bad, want) in [
        ("show grant", "syntax error at 1:6: expected DATABASES"),
        (
            "show table distributed",
            "1:23: expected a table name, found end of input",
        ),
        ("show table distributed 'x'", "1:24: expected a table name"),
        (
            "show table distribute t",
            "1:12: expected TAGS or DISTRIBUTED, found 'distribute'",
        ),
        (
            "show vnodes on 3",
            "syntax error at 1:16: expected DNODE, found '3'",
        ),
        (
            "show vnodes on dnode",
            "1:21: expected a data node id, found end of input",
        ),
        (
            "show vnodes x",
            "1:13: expected ';' or end of input, found 'x'",
        ),
        ("show 4 vnode", "syntax error at 1:6: expected DATABASES"),
        ("show grants x", "expected ';' or end of input, found 'x'"),
        ("show variable", "syntax error at 1:6: expected DATABASES"),
        (
            "show variables like x",
            "syntax error at 1:21: expected a quoted pattern",
        ),
        (
            "show dnode x variables",
            "syntax error at 1:12: expected a data node id",
        ),
        (
            "show dnode 1 variable",
            "syntax error at 1:14: expected VARIABLES",
        ),
        (
            "show dnode 4294967296 variables",
            "1:12: data node id 4294967296 is too large",
        ),
        (
            "show local variables",
            "1:6: SHOW LOCAL VARIABLES lists a client's settings",
        ),
    ] {
        let e = parse(bad).unwrap_err().to_string();
        assert!(e.contains(want), "{bad}: {e}");
    }
}

#[test]
fn parse_splits_statements_outside_quotes_and_comments() {
    let s = parse("  ;; insert into t values (now, 'a;b') -- c; x\n ; /* ; */ select * from t ;")
        .unwrap();
    assert_eq!(s.len(), 2);
    match &s[0] {
        Statement::Insert { items } => {
            assert_eq!(
                items[0].rows[0][1],
                InsertValue::Value(Value::Str("a;b".into()))
            );
            assert_eq!(
                items[0].rows[0][0],
                InsertValue::Now {
                    offset_ns: 0,
                    midnight: false
                }
            );
        }
        o => panic!("{o:?}"),
    }
    assert!(matches!(s[1], Statement::Select(_)));
    assert!(parse("   ").unwrap().is_empty());
}

#[test]
fn parse_insert_forms() {
    let s = parse("INSERT INTO r_truck_1 USING readings (name, fleet) TAGS ('truck_1', \"South\") (ts, velocity) VALUES ('2016-01-01 00:00:00.000', 1.5) (NOW - 10m, -3) r_truck_2 VALUES (1451606400000, 1, 2, NULL)").unwrap();
    let Statement::Insert { items } = &s[0] else {
        panic!()
    };
    assert_eq!(items.len(), 2);
    let u = items[0].using.as_ref().unwrap();
    assert_eq!(u.stable.name, "readings");
    assert_eq!(
        u.tags,
        lits([Value::Str("truck_1".into()), Value::Str("South".into())])
    );
    assert_eq!(
        items[0].columns,
        Some(vec!["ts".to_string(), "velocity".to_string()])
    );
    assert_eq!(
        items[0].rows[1],
        vec![
            InsertValue::Now {
                offset_ns: -600_000_000_000,
                midnight: false
            },
            InsertValue::Value(Value::Int(-3))
        ]
    );
    assert_eq!(items[1].rows[0].len(), 4);
    assert_eq!(items[1].rows[0][3], InsertValue::Value(Value::Null));
}

#[test]
fn parse_errors_are_positioned() {
    let e = parse("SELECT FROM readings").unwrap_err();
    assert_eq!(
        e.to_string(),
        "syntax error at 1:8: expected an expression, found 'FROM'"
    );
    let e = parse("select a from t where").unwrap_err();
    assert!(e.to_string().starts_with("syntax error at 1:22"), "{e}");
    let e = parse("select a,\n  b from t limit x").unwrap_err();
    assert!(e.to_string().contains("2:18"), "{e}");
    let e = parse("insert into t values (1, 'abc").unwrap_err();
    assert!(e.to_string().contains("unterminated"), "{e}");
    let e = parse("create stable s (ts timestamp, v varchar) tags (t int)").unwrap_err();
    assert!(e.to_string().contains("needs a length"), "{e}");
    let e = parse("create stable s (ts timestamp, v blob) tags (t int)").unwrap_err();
    assert!(e.to_string().contains("unknown data type 'blob'"), "{e}");
    assert!(parse("select * from t t2 t3").is_err());
    assert!(parse("frobnicate")
        .unwrap_err()
        .to_string()
        .contains("unknown statement"));
}

#[test]
fn parser_never_panics_on_garbage() {
    let samples = [
        "select",
        "select (",
        "select ((((",
        "'",
        "`",
        "\"",
        "select * from (select",
        "insert into",
        "insert into t values",
        "insert into t values (",
        "create",
        "create table t using",
        "select 1e",
        "select .5",
        "select 5e+",
        "select ' \\",
        "é",
        "select é from ü",
        "select * from t interval(",
        "select * from t interval(10x)",
        "show",
        "drop",
        "/*",
        "select count(*) from t where ts > now - ",
        "select -",
        "select cast(x as",
        "create database d keep",
    ];
    for s in samples {
        let _ = parse(s);
    }
    let deep = format!("select {}1{} from t", "(".repeat(500), ")".repeat(500));
    assert!(parse(&deep).is_err());
    // every prefix of a long statement
    let long = "SELECT last_row(ts),name,driver FROM iot.readings WHERE fleet='South' and name IS NOT NULL and ts between '2016-01-01' and now partition BY name,driver order by 1 desc limit 5 offset 2";
    for i in 0..long.len() {
        let _ = parse(&long[..i]);
    }
}

#[test]
fn parse_query_clauses() {
    let q = query("select name,driver from (SELECT name,driver,avg(velocity) as mean_velocity FROM readings WHERE ts > 1 AND ts <= 2 and fleet = 'x' partition BY name,driver interval(10m) LIMIT 1) WHERE mean_velocity < 1;");
    let FromItem::Subquery { query: inner, .. } = &q.from else {
        panic!()
    };
    assert_eq!(inner.partition_by.len(), 2);
    assert!(matches!(
        inner.window,
        Some(WindowClause::Interval {
            interval_ns: 600_000_000_000,
            ..
        })
    ));
    assert_eq!(
        inner.limit,
        Some(Limit {
            limit: 1,
            offset: 0
        })
    );
    assert_eq!(
        referenced_tables(&q),
        vec![ObjectRef::new(None, "readings")]
    );
    let q = query("select a from t where x not in (1,2) and y not between 1 and 2 and z not like 'a%' and not w is null group by a having count(*) > 2 order by a desc, 2 limit 3, 4");
    assert_eq!(
        q.limit,
        Some(Limit {
            limit: 4,
            offset: 3
        })
    );
    assert_eq!(q.order_by.len(), 2);
    assert!(!q.order_by[0].asc);
}

#[test]
fn select_without_from_is_one_row_of_constants() {
    let q = query("SELECT 1 + 1 AS two, database(), concat('v', server_version())");
    assert!(matches!(q.from, FromItem::None { .. }));
    assert!(referenced_tables(&q).is_empty());
    let plan = plan_query(&q, Some("iot"), &Cat).expect("plan");
    assert!(plan.fragments.is_empty(), "nothing runs on a vnode");
    let b = run("SELECT 1 + 1 AS two, database(), concat('v', server_version())");
    assert_eq!(
        names(&b),
        ["two", "database()", "concat('v',server_version())"]
    );
    assert_eq!(
        rows(&b),
        vec![vec![
            // arithmetic is DOUBLE, as in TDengine
            Value::Float(2.0),
            Value::Str("iot".into()),
            Value::Str(format!("v{}", env!("CARGO_PKG_VERSION"))),
        ]]
    );
    // as a subquery, filtered by the outer query
    let b = run("SELECT x * 2 FROM (SELECT 3 AS x, today() AS d) WHERE d <= now()");
    assert_eq!(rows(&b), vec![vec![Value::Float(6.0)]]);
    let b = run("SELECT x FROM (SELECT 3 AS x) WHERE x > 3");
    assert_eq!(b.num_rows(), 0);
    // TODAY() is midnight UTC in the session database's precision (ms here)
    let b = run("SELECT cast(today() as bigint) % 86400000, now() - today() < 1d");
    assert_eq!(rows(&b), vec![vec![Value::Float(0.0), Value::Bool(true)]]);
}

#[test]
fn null_literal_arguments_give_null_of_the_result_type() {
    let b = run(
        "SELECT LENGTH(NULL), CONCAT('a', NULL), UPPER(NULL), ABS(NULL), POSITION(NULL IN 'x'), \
         POSITION('x' IN NULL), SUBSTR(NULL, 2), REPLACE('ab', NULL, 'c'), TO_CHAR(NULL, 'yyyy'), \
         TO_CHAR(now(), NULL), TO_TIMESTAMP(NULL, 'yyyy'), SQRT(NULL), CHAR(84, NULL, 105)",
    );
    let want_types = [
        DataType::BigInt,
        DataType::VarChar(2),
        DataType::VarChar(1),
        DataType::Double,
        DataType::BigInt,
        DataType::BigInt,
        DataType::VarChar(1),
        DataType::VarChar(4),
        DataType::VarChar(64),
        DataType::VarChar(64),
        DataType::Timestamp,
        DataType::Double,
    ];
    for (f, t) in b.fields.iter().zip(want_types) {
        assert_eq!(f.data_type, t, "{}", f.name);
    }
    let row = &rows(&b)[0];
    assert!(row[..12].iter().all(Value::is_null), "{row:?}");
    // CHAR skips NULL code points, as TDengine does
    assert_eq!(row[12], Value::Str("Ti".into()));
    // CONCAT_WS skips NULL values but not a NULL literal
    let b =
        run("SELECT CONCAT_WS('-', 'a', NULL), CONCAT_WS('-', name, 'b') FROM r_truck_5 LIMIT 1");
    assert_eq!(rows(&b)[0], vec![Value::Null, Value::Str("b".into())]);
    // on columns and tags too, per row
    let b = run("SELECT LOWER(NULL), CONCAT(name, NULL), LENGTH(name) FROM r_truck_1 LIMIT 2");
    assert!(rows(&b).iter().all(|r| r[0].is_null() && r[1].is_null()));
    assert!(rows(&b).iter().all(|r| r[2] == Value::Int(7)));
    // a number where a string belongs is still refused
    assert!(err("SELECT LOWER(1)")
        .to_string()
        .contains("needs a string argument"));
}

/// [`Cat`] with the session user known, as the frontend and the client library plan.
struct UserCat(&'static str);

impl Catalog for UserCat {
    fn stable(&self, db: &str, name: &str) -> Option<StableSchema> {
        Cat.stable(db, name)
    }
    fn subtable(&self, db: &str, name: &str) -> Option<(TableMeta, StableSchema)> {
        Cat.subtable(db, name)
    }
    fn precision(&self, db: &str) -> Option<Precision> {
        Cat.precision(db)
    }
    fn session_user(&self) -> Option<String> {
        Some(self.0.to_string())
    }
}

#[test]
fn current_user_is_the_session_user_and_needs_one() {
    let b = finish(
        &plan_query(
            &query("SELECT CURRENT_USER(), USER(), DATABASE()"),
            Some("iot"),
            &UserCat("alice"),
        )
        .expect("plan"),
        vec![],
    )
    .expect("finish");
    assert_eq!(names(&b), ["current_user()", "user()", "database()"]);
    assert_eq!(
        rows(&b),
        vec![vec![
            Value::Str("alice".into()),
            Value::Str("alice".into()),
            Value::Str("iot".into())
        ]]
    );
    // next to an aggregate over a table: a constant of the plan, like DATABASE()
    let q = query("SELECT CURRENT_USER(), COUNT(*) FROM readings");
    let plan = plan_query(&q, Some("iot"), &UserCat("bob")).expect("plan");
    let text = format!("{:?}", plan.root);
    assert!(text.contains("Str(\"bob\")"), "{text}");
    // a planner that was not told the user refuses, with the place
    let e = plan_query(&query("SELECT 1, USER()"), Some("iot"), &Cat).expect_err("no user");
    assert_eq!(
        e.to_string(),
        "function 'user' needs the session's user, which this planner was not given at 1:11"
    );
    let e =
        plan_query(&query("SELECT CURRENT_USER(1)"), Some("iot"), &UserCat("a")).expect_err("args");
    assert!(
        e.to_string().contains("takes no arguments, got 1 at 1:8"),
        "{e}"
    );
}

#[test]
fn qstart_qend_are_the_where_time_range() {
    let ts = |t: i64| Value::Timestamp(t);
    // a closed range: `<` ends one unit before, `>` starts one after
    let b = run(&format!(
        "SELECT _qstart, _qend, COUNT(*) FROM readings WHERE ts > {} AND ts < {} AND velocity > 0",
        T0,
        T0 + 50_000
    ));
    assert_eq!(names(&b), ["_qstart", "_qend", "count(*)"]);
    let r = &rows(&b)[0];
    assert_eq!((&r[0], &r[1]), (&ts(T0 + 1), &ts(T0 + 49_999)));
    // the narrowest of several bounds; BETWEEN is closed
    let b = run(&format!(
        "SELECT _qend - _qstart, MAX(velocity) FROM readings WHERE ts BETWEEN {T0} AND {} AND ts <= {}",
        T0 + 90_000,
        T0 + 30_000
    ));
    assert_eq!(rows(&b)[0][0], Value::Float(30_000.0));
    // the same on every INTERVAL window and partition, next to _wstart
    let b = run(&format!(
        "SELECT _wstart, _qstart, _qend, COUNT(*) FROM readings WHERE ts >= {T0} AND ts < {} \
         PARTITION BY fleet INTERVAL(20s)",
        T0 + 60_000
    ));
    assert!(b.num_rows() >= 3);
    for r in rows(&b) {
        assert_eq!((&r[1], &r[2]), (&ts(T0), &ts(T0 + 59_999)), "{r:?}");
    }
    // no bound: the whole timestamp range
    let b = run("SELECT _qstart, _qend, COUNT(*) FROM r_truck_1");
    assert_eq!(rows(&b)[0][..2], [ts(i64::MIN), ts(i64::MAX)]);
    // a bound on another column, or one side only
    let b = run(&format!(
        "SELECT _qstart, _qend FROM readings WHERE velocity > 1 AND ts <= {} LIMIT 1",
        T0 + 5
    ));
    assert_eq!(rows(&b)[0], [ts(i64::MIN), ts(T0 + 5)]);
    // known only once the WHERE clause of a table's level is planned
    for (sql, at) in [
        ("SELECT COUNT(*) FROM readings WHERE ts > _qstart", "1:42"),
        (
            "SELECT _qstart FROM (SELECT ts, velocity FROM readings)",
            "1:8",
        ),
        ("SELECT _qend", "1:8"),
    ] {
        let e = err(sql).to_string();
        assert!(
            e.contains("'_q") && e.ends_with(&format!("is not known here at {at}")),
            "{sql}: {e}"
        );
    }
}

#[test]
fn group_concat_joins_values_in_time_order_across_vnodes() {
    // `run` checks the same answer on 1, 2 and 3 vnodes: the order does not depend on where
    // the rows are
    let first_rows = format!("ts < {}", T0 + 10_000);
    let b = run(&format!(
        "SELECT GROUP_CONCAT(tbname, ',') FROM readings WHERE {first_rows}"
    ));
    assert_eq!(names(&b), ["group_concat(tbname,',')"]);
    assert_eq!(
        rows(&b),
        [[Value::Str(
            "r_truck_0,r_truck_1,r_truck_2,r_truck_3,r_truck_4,r_truck_5".into()
        )]]
    );
    // several values per row are concatenated first; a row with a NULL one is skipped
    // (truck_5 has no name), a group of none is NULL
    let b = run(&format!(
        "SELECT fleet, GROUP_CONCAT(name, '@', driver, ' / '), COUNT(*) FROM readings \
         WHERE {first_rows} GROUP BY fleet ORDER BY fleet"
    ));
    assert_eq!(
        rows(&b),
        [
            vec![
                Value::Str("East".into()),
                Value::Str("truck_2@Derek".into()),
                Value::Int(2)
            ],
            vec![
                Value::Str("North".into()),
                Value::Str("truck_1@Andy / truck_4@Derek".into()),
                Value::Int(2)
            ],
            vec![
                Value::Str("South".into()),
                Value::Str("truck_0@Derek / truck_3@Andy".into()),
                Value::Int(2)
            ],
        ]
    );
    let b = run("SELECT GROUP_CONCAT(name, ',') FROM r_truck_5");
    assert_eq!(rows(&b), [[Value::Null]]);
    // per partition and window, in time order within each
    let b = run(&format!(
        "SELECT tbname, _wstart, GROUP_CONCAT(driver, '') FROM readings \
         WHERE ts < {} PARTITION BY tbname INTERVAL(20s) ORDER BY tbname, _wstart",
        T0 + 40_000
    ));
    assert_eq!(b.num_rows(), 12);
    let r = rows(&b);
    assert_eq!(r[0][2], Value::Str("DerekDerek".into()));
    assert_eq!(r[3][2], Value::Str("AndyAndy".into()));
    // errors name the problem and the place
    for (sql, want) in [
        (
            "SELECT GROUP_CONCAT(tbname) FROM readings",
            "function 'group_concat' takes the values and a separator, got 1 argument at 1:8",
        ),
        (
            "SELECT GROUP_CONCAT(velocity, ',') FROM readings",
            "function 'group_concat' needs string values, 'velocity' is DOUBLE at 1:8",
        ),
        (
            "SELECT GROUP_CONCAT(tbname, fleet) FROM readings",
            "group_concat: argument 'fleet' must be a constant at 1:8",
        ),
        (
            "SELECT GROUP_CONCAT(tbname, 1) FROM readings",
            "the separator of 'group_concat' must be a string, '1' is not one at 1:8",
        ),
    ] {
        let e = err(sql).to_string();
        assert!(e.ends_with(want), "{sql}: {e}");
    }
}

#[test]
fn lag_carries_the_last_non_null_value_forward() {
    // truck 0 has NULL velocity at rows 0 and 7
    let b = run("SELECT ts, velocity, LAG(velocity), LAG(velocity) * 2 FROM r_truck_0");
    let r = rows(&b);
    assert_eq!(r.len(), ROWS as usize, "one row out per row in");
    assert_eq!(b.fields[2].data_type, DataType::Double);
    assert_eq!(
        (&r[0][1], &r[0][2], &r[0][3]),
        (&Value::Null, &Value::Null, &Value::Null)
    );
    assert_eq!(r[6][2], r[6][1]);
    assert!(r[7][1].is_null());
    assert_eq!(r[7][2], r[6][1], "the value before the NULL");
    let Value::Float(x) = r[7][2] else { panic!() };
    assert_eq!(r[7][3], Value::Float(x * 2.0));
    // per partition: a partition starts without a value; strings too
    let b = run(
        "SELECT tbname, LAG(velocity), LAG(name) FROM readings PARTITION BY tbname ORDER BY tbname",
    );
    assert_eq!(b.num_rows(), TRUCKS * ROWS as usize);
    let r = rows(&b);
    assert!(
        r[0][1].is_null(),
        "truck 0's first row has no earlier value"
    );
    assert_eq!(r[0][2], Value::Str("truck_0".into()));
    // truck 5 has no name: NULL on every row, not truck 4's
    assert!(r[5 * ROWS as usize..].iter().all(|x| x[2].is_null()));
    let e = err("SELECT LAG(velocity, 1) FROM readings").to_string();
    assert!(
        e.starts_with("lag() takes 1 argument(s)") && e.ends_with("at 1:8"),
        "{e}"
    );
}

#[test]
fn select_without_from_rejects_what_needs_a_table() {
    for (sql, want) in [
        ("SELECT *", "SELECT * needs a FROM clause at 1:8"),
        (
            "SELECT last_row(*)",
            "last_row(*) needs a FROM clause at 1:8",
        ),
        (
            "SELECT velocity",
            "unknown column 'velocity' in a SELECT without FROM at 1:8",
        ),
        (
            "SELECT velocity FORM readings",
            "expected FROM, found 'readings'",
        ),
        ("SELECT 1 WHERE 1 = 1", "expected FROM, found 'WHERE'"),
        (
            "SELECT database(1)",
            "function 'database' takes no arguments, got 1 at 1:8",
        ),
        (
            "SELECT cast('soon' as timestamp)",
            "'soon' is not a valid timestamp",
        ),
    ] {
        let e = err(sql).to_string();
        assert!(e.contains(want), "{sql}: {e}");
    }
    // The hidden column of the one row cannot be reached by any name.
    let e = err("SELECT `\u{0}dual`").to_string();
    assert!(e.contains("unknown column"), "{e}");
}

#[test]
fn match_patterns_are_checked_when_planned() {
    let long = format!(
        "SELECT 'a' MATCH '{}'",
        "a".repeat(crate::expr::REGEX_PATTERN_BYTES_MAX + 1)
    );
    let e = err(&long).to_string();
    assert!(e.contains("at most 4096"), "{e}");
    let e = err("SELECT 'a' MATCH 'x{1000}{1000}'").to_string();
    assert!(
        e.contains("more than 1 MiB") && e.contains("at 1:12"),
        "{e}"
    );
    let e = err("SELECT 'a' NMATCH '[z-a]'").to_string();
    assert!(
        e.contains("invalid regular expression '[z-a]'") && !e.contains('\n'),
        "{e}"
    );
    let b = run("SELECT 'truck_12' MATCH '^truck_1[0-9]$', 'truck_12' NMATCH 'ck_1', 'x' MATCH ''");
    assert_eq!(
        rows(&b),
        vec![vec![
            Value::Bool(true),
            Value::Bool(false),
            Value::Bool(true)
        ]]
    );
}

// ---------------------------------------------------------------------------------------------
// binding inserts

fn item(sql: &str) -> InsertItem {
    match parse(sql).unwrap().remove(0) {
        Statement::Insert { mut items } => items.remove(0),
        o => panic!("{o:?}"),
    }
}

/// An INSERT into a STABLE with a tbname column becomes one item per subtable, in the order
/// the names first appear, each with its first row's tags and the statement's row numbers;
/// the errors of its rows then name those numbers.
#[test]
fn stable_insert_splits_per_subtable() {
    let s = readings_schema();
    let it = item("insert into readings (velocity, tbname, name, ts) values (1, 'b', 'x', 10) (2, 'a', NULL, 20) (3, 'b', 'y', 30)");
    let subs = split_stable_insert(&it, &s).unwrap().expect("split");
    assert_eq!(subs.len(), 2);
    assert_eq!(subs[0].table.name, "b");
    assert_eq!(subs[1].table.name, "a");
    assert_eq!(subs[0].row_numbers, vec![1, 3]);
    assert_eq!(subs[1].row_numbers, vec![2]);
    let using = subs[0].using.as_ref().expect("using");
    assert_eq!(using.stable.name, "readings");
    assert_eq!(using.tag_names, Some(vec!["name".to_string()]));
    assert_eq!(using.tags, lits([Value::Str("x".into())]));
    assert_eq!(
        subs[1].using.as_ref().map(|u| u.tags.clone()),
        Some(lits([Value::Null]))
    );
    assert_eq!(
        subs[0].columns,
        Some(vec!["velocity".to_string(), "ts".to_string()])
    );
    let w = bind_insert(&subs[0], &s, Precision::Millis).unwrap();
    assert_eq!(w.table, "b");
    assert_eq!(w.columns[0].get(1), Value::Timestamp(30));
    assert_eq!(w.columns[2].get(1), Value::Float(3.0));
    assert_eq!(
        w.tags.as_ref().map(|t| t[0].clone()),
        Some(Value::Str("x".into()))
    );
    // A bad value is reported at its row in the statement.
    let it = item("insert into readings (tbname, ts, velocity) values ('b', 10, 1) ('a', 20, 2) ('b', 30, 'fast')");
    let subs = split_stable_insert(&it, &s).unwrap().expect("split");
    let e = bind_insert(&subs[0], &s, Precision::Millis)
        .unwrap_err()
        .to_string();
    assert!(e.contains("table b, column 'velocity', row 3"), "{e}");
    // Items without tbname, or with their own USING, are not split.
    assert_eq!(
        split_stable_insert(&item("insert into t values (1, 2, 3, 4)"), &s).unwrap(),
        None
    );
    assert_eq!(
        split_stable_insert(&item("insert into t (ts, status) values (1, 2)"), &s).unwrap(),
        None
    );
}

#[test]
fn bind_insert_column_list_nulls_and_time_strings() {
    let s = readings_schema();
    let w = bind_insert(
        &item("insert into r_truck_1 (velocity, ts) values (1.5, '2016-01-01 00:00:00.000') (NULL, 1451606410000) (3, '2016-01-01T00:00:20Z')"),
        &s,
        Precision::Millis,
    )
    .unwrap();
    assert_eq!(w.table, "r_truck_1");
    assert_eq!(w.stable, "readings");
    assert_eq!(w.tags, None);
    assert_eq!(w.columns.len(), 4);
    assert_eq!(w.num_rows(), 3);
    assert_eq!(w.columns[0].get(0), Value::Timestamp(T0));
    assert_eq!(w.columns[0].get(2), Value::Timestamp(T0 + 20_000));
    assert_eq!(w.columns[2].get(0), Value::Float(1.5));
    assert_eq!(w.columns[2].get(1), Value::Null);
    assert_eq!(w.columns[2].get(2), Value::Float(3.0));
    assert_eq!(w.columns[1].get(0), Value::Null); // latitude not listed
    assert_eq!(w.columns[3].get(2), Value::Null);
    // microsecond precision
    let w = bind_insert(
        &item("insert into t values ('2016-01-01 00:00:00.000001', 1, 2, 3)"),
        &s,
        Precision::Micros,
    )
    .unwrap();
    assert_eq!(w.columns[0].get(0), Value::Timestamp(T0 * 1000 + 1));
    // NOW
    let before = Precision::Millis.now();
    let w = bind_insert(
        &item("insert into t values (now + 1s, 1, 2, 3)"),
        &s,
        Precision::Millis,
    )
    .unwrap();
    let ts = w.columns[0].get(0).as_i64().unwrap();
    assert!(ts >= before + 1000 && ts < before + 60_000);
}

#[test]
fn bind_insert_errors() {
    let s = readings_schema();
    let e = bind_insert(
        &item("insert into r_truck_1 values (1, 2, 3, 4) (2, 3, 4)"),
        &s,
        Precision::Millis,
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "table r_truck_1 expects 4 values per row, got 3 in row 2"
    );
    let e = bind_insert(
        &item("insert into r_truck_1 values (1, 2, 'fast', 4)"),
        &s,
        Precision::Millis,
    )
    .unwrap_err();
    assert!(e.to_string().contains("column 'velocity', row 1"), "{e}");
    assert_eq!(e.status_code(), StatusCode::TypeMismatch);
    let e = bind_insert(
        &item("insert into r_truck_1 values ('yesterday', 2, 3, 4)"),
        &s,
        Precision::Millis,
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("'yesterday' is not a timestamp"),
        "{e}"
    );
    let e = bind_insert(
        &item("insert into r_truck_1 (velocity) values (1)"),
        &s,
        Precision::Millis,
    )
    .unwrap_err();
    assert!(e.to_string().contains("must include the timestamp"), "{e}");
    let e = bind_insert(
        &item("insert into r_truck_1 (ts, velocty) values (1, 2)"),
        &s,
        Precision::Millis,
    )
    .unwrap_err();
    assert_eq!(e.status_code(), StatusCode::ColumnNotFound);
    assert!(e.to_string().contains("velocty"), "{e}");
    // out-of-range integers
    let mut small = readings_schema();
    small.columns[3].data_type = DataType::TinyInt;
    let e = bind_insert(
        &item("insert into r values (1, 2, 3, 300)"),
        &small,
        Precision::Millis,
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("column 'status', row 1: value 300 out of range for TINYINT"),
        "{e}"
    );
    small.columns[3].data_type = DataType::UInt;
    assert!(bind_insert(
        &item("insert into r values (1, 2, 3, -1)"),
        &small,
        Precision::Millis
    )
    .is_err());
    small.columns[3].data_type = DataType::BigInt;
    assert!(bind_insert(
        &item("insert into r values (1, 2, 3, 18446744073709551615)"),
        &small,
        Precision::Millis
    )
    .is_err());
    let e = bind_insert(
        &item("insert into r values (NULL, 2, 3, 4)"),
        &small,
        Precision::Millis,
    )
    .unwrap_err();
    assert!(e.to_string().contains("timestamp must not be NULL"), "{e}");
}

#[test]
fn bind_tags_partial_and_mismatch() {
    let s = readings_schema();
    let w = bind_insert(&item("insert into r_x using readings (fleet, name) tags ('South', 'truck_9') values (1, 2, 3, 4)"), &s, Precision::Millis).unwrap();
    assert_eq!(
        w.tags,
        Some(vec![
            Value::Str("truck_9".into()),
            Value::Str("South".into()),
            Value::Null,
            Value::Null
        ])
    );
    let e = bind_insert(
        &item("insert into r_x using readings tags ('a', 'b') values (1, 2, 3, 4)"),
        &s,
        Precision::Millis,
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("has 4 tags but 2 tag values were given"),
        "{e}"
    );
    let Statement::CreateTables { tables, .. } =
        parse("create table r_y using readings tags ('t', 'f', 'd', 15)")
            .unwrap()
            .remove(0)
    else {
        panic!()
    };
    assert_eq!(
        bind_create_subtable(&tables[0], &s, Precision::Millis).unwrap()[3],
        Value::Float(15.0)
    );
    let Statement::CreateTables { tables, .. } =
        parse("create table r_y using readings tags ('t', 'f', 'd', 'x')")
            .unwrap()
            .remove(0)
    else {
        panic!()
    };
    let e = bind_create_subtable(&tables[0], &s, Precision::Millis).unwrap_err();
    assert!(e.to_string().contains("nominal_fuel_consumption"), "{e}");
    let Statement::CreateTables { tables, .. } =
        parse("create table r_y using readings (nme) tags ('t')")
            .unwrap()
            .remove(0)
    else {
        panic!()
    };
    assert_eq!(
        bind_create_subtable(&tables[0], &s, Precision::Millis)
            .unwrap_err()
            .status_code(),
        StatusCode::ColumnNotFound
    );
}

// ---------------------------------------------------------------------------------------------
// end to end: plan -> fragments on each vnode -> finish

fn plan(sql: &str) -> QueryPlan {
    plan_query(&query(sql), Some("iot"), &Cat).unwrap()
}

#[test]
fn select_star_from_subtable_with_ts_range() {
    let sql = "SELECT * FROM r_truck_1 WHERE ts >= 1451606400000 AND ts < 1451606450000";
    let p = plan(sql);
    assert_eq!(p.fragments.len(), 1);
    assert_eq!(
        p.fragments[0].target,
        FragmentTarget::Table("r_truck_1".into())
    );
    assert_eq!(p.fragments[0].db, "iot");
    assert_eq!(p.fragments[0].fragment.ts_min, T0);
    assert_eq!(p.fragments[0].fragment.ts_max, T0 + 50_000 - 1);
    let b = run(sql);
    assert_eq!(names(&b), vec!["ts", "latitude", "velocity", "status"]);
    assert_eq!(b.fields[0].data_type, DataType::Timestamp);
    let r = rows(&b);
    assert_eq!(r.len(), 5);
    assert_eq!(
        r[0],
        vec![
            Value::Timestamp(T0 + 1),
            Value::Float(10.0),
            Value::Float(7.5),
            Value::Int(1)
        ]
    );
    assert_eq!(r[4][0], Value::Timestamp(T0 + 40_001));
    // time strings, converted with the db precision
    let b2 = run("select * from r_truck_1 where ts >= '2016-01-01 00:00:00.000' and ts < '2016-01-01 00:00:50.000'");
    assert_eq!(rows(&b2), r);
    let b3 =
        run("select * from iot.r_truck_1 where ts between '2016-01-01 00:00:00' and 1451606440001");
    assert_eq!(rows(&b3), r);
}

#[test]
fn select_star_from_stable_has_tags() {
    let b = run("select * from readings where ts < '2016-01-01 00:00:10.000' order by ts");
    assert_eq!(
        names(&b),
        vec![
            "ts",
            "latitude",
            "velocity",
            "status",
            "name",
            "fleet",
            "driver",
            "nominal_fuel_consumption"
        ]
    );
    let r = rows(&b);
    assert_eq!(r.len(), TRUCKS);
    assert_eq!(r[2][0], Value::Timestamp(T0 + 2));
    assert_eq!(r[2][4], Value::Str("truck_2".into()));
    assert_eq!(r[2][5], Value::Str("East".into()));
    assert_eq!(r[5][4], Value::Null);
}

#[test]
fn aggregates_merge_partials_across_vnodes() {
    let sql = "SELECT COUNT(*), AVG(velocity), MAX(velocity), MIN(ts), SUM(velocity), count(velocity), min(velocity) FROM readings WHERE fleet = 'South'";
    let p = plan(sql);
    assert!(p.fragments[0].fragment.tag_filter.is_some());
    assert!(p.fragments[0].fragment.filter.is_none());
    let b = run(sql);
    assert_eq!(
        names(&b),
        vec![
            "count(*)",
            "avg(velocity)",
            "max(velocity)",
            "min(ts)",
            "sum(velocity)",
            "count(velocity)",
            "min(velocity)"
        ]
    );
    let south: Vec<_> = all_rows()
        .into_iter()
        .filter(|(m, _)| m.tags[1] == Value::Str("South".into()))
        .collect();
    let vels: Vec<f64> = south.iter().filter_map(|(_, r)| r[2].as_f64()).collect();
    let sum: f64 = vels.iter().sum();
    let r = rows(&b);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0][0], Value::Int(south.len() as i64));
    assert_eq!(r[0][1], Value::Float(sum / vels.len() as f64));
    assert_eq!(
        r[0][2],
        Value::Float(vels.iter().cloned().fold(f64::MIN, f64::max))
    );
    assert_eq!(r[0][3], Value::Timestamp(T0));
    assert_eq!(r[0][4], Value::Float(sum));
    assert_eq!(r[0][5], Value::Int(vels.len() as i64));
    assert_eq!(
        r[0][6],
        Value::Float(vels.iter().cloned().fold(f64::MAX, f64::min))
    );
    // AVG is sum/count, not the average of per-vnode averages: check on a skewed layout too
    let skew = vec![
        Vnode {
            tables: tables().into_iter().take(1).collect(),
            sma_block: None,
            columnar: true,
        },
        Vnode {
            tables: tables().into_iter().skip(1).collect(),
            sma_block: None,
            columnar: true,
        },
    ];
    let b2 = run_on(sql, &skew).unwrap();
    assert_eq!(rows(&b2), r);
    // empty input: count 0, others NULL
    let b = run("select count(*), avg(velocity) from readings where fleet = 'Nowhere'");
    assert_eq!(rows(&b), vec![vec![Value::Int(0), Value::Null]]);
}

#[test]
fn last_row_star_partition_by_tbname() {
    let b = run("SELECT LAST_ROW(*) FROM readings PARTITION BY tbname");
    assert_eq!(
        names(&b),
        vec![
            "last_row(ts)",
            "last_row(latitude)",
            "last_row(velocity)",
            "last_row(status)"
        ]
    );
    let mut r = rows(&b);
    r.sort_by(|a, b| cmp_rows(a, b));
    assert_eq!(r.len(), TRUCKS);
    for (t, row) in r.iter().enumerate() {
        let last = &tables()[t].rows[ROWS as usize - 1];
        assert_eq!(row, last, "truck {t}");
    }
    // truck 4, row 9: (4+9)%7 != 0; truck 5 row 9: 14%7==0 -> last_row keeps the NULL
    assert_eq!(r[5][2], Value::Null);
    // LAST skips NULLs, FIRST too
    let b = run("select tbname, last(velocity), first(velocity), last_row(velocity) from readings group by tbname order by tbname");
    let r = rows(&b);
    assert_eq!(r[5][0], Value::Str("r_truck_5".into()));
    assert_eq!(r[5][1], tables()[5].rows[8][2]);
    assert_eq!(r[5][3], Value::Null);
    // truck 0 row 0 velocity is NULL ((0+0)%7==0): first() takes row 1
    assert_eq!(r[0][2], tables()[0].rows[1][2]);
}

#[test]
fn last_loc_single_selector_rule() {
    let sql = "SELECT last_row(ts),name,driver,latitude FROM readings WHERE fleet='South' and name IS NOT NULL partition BY name,driver";
    let b = run(sql);
    assert_eq!(
        names(&b),
        vec!["last_row(ts)", "name", "driver", "latitude"]
    );
    let mut r = rows(&b);
    r.sort_by(|a, b| cmp_rows(a, b));
    // South = trucks 0 and 3
    assert_eq!(
        r,
        vec![
            vec![
                Value::Timestamp(T0 + 90_000),
                Value::Str("truck_0".into()),
                Value::Str("Derek".into()),
                Value::Float(2.25)
            ],
            vec![
                Value::Timestamp(T0 + 90_003),
                Value::Str("truck_3".into()),
                Value::Str("Andy".into()),
                Value::Float(32.25)
            ],
        ]
    );
    // without partition: one row, the globally last one, with its own columns
    let b = run("select last_row(ts), tbname, latitude from readings");
    assert_eq!(
        rows(&b),
        vec![vec![
            Value::Timestamp(T0 + 90_005),
            Value::Str("r_truck_5".into()),
            Value::Float(52.25)
        ]]
    );
    // max() as the selector
    let b = run("select max(latitude), tbname from readings where fleet = \"North\"");
    assert_eq!(
        rows(&b),
        vec![vec![Value::Float(42.25), Value::Str("r_truck_4".into())]]
    );
    // single-last-loc
    let b = run("SELECT last_row(ts),last_row(latitude) FROM readings WHERE name IN ('truck_3') GROUP BY name");
    assert_eq!(
        rows(&b),
        vec![vec![Value::Timestamp(T0 + 90_003), Value::Float(32.25)]]
    );
}

#[test]
fn group_by_tbname_order_by() {
    let b = run("SELECT tbname, COUNT(*) FROM readings GROUP BY tbname ORDER BY tbname");
    assert_eq!(names(&b), vec!["tbname", "count(*)"]);
    let r = rows(&b);
    assert_eq!(r.len(), TRUCKS);
    for (t, row) in r.iter().enumerate() {
        assert_eq!(
            row,
            &vec![Value::Str(format!("r_truck_{t}")), Value::Int(ROWS)]
        );
    }
    let b = run("SELECT tbname AS t, COUNT(*) c FROM readings WHERE ts >= 1451606450000 GROUP BY tbname ORDER BY t DESC LIMIT 2 OFFSET 1");
    assert_eq!(names(&b), vec!["t", "c"]);
    assert_eq!(
        rows(&b),
        vec![
            vec![Value::Str("r_truck_4".into()), Value::Int(5)],
            vec![Value::Str("r_truck_3".into()), Value::Int(5)]
        ]
    );
    let b = run("select tbname, count(*) from readings group by tbname order by 1 desc limit 1");
    assert_eq!(rows(&b)[0][0], Value::Str("r_truck_5".into()));
    // tags next to tbname keys, order by a hidden expression
    let b = run(
        "select tbname, fleet from readings group by tbname order by avg(latitude) desc limit 2",
    );
    assert_eq!(
        rows(&b),
        vec![
            vec![Value::Str("r_truck_5".into()), Value::Str("East".into())],
            vec![Value::Str("r_truck_4".into()), Value::Str("North".into())]
        ]
    );
}

#[test]
fn group_by_tags_aggregate_over_tags_and_having() {
    let sql = "select fleet, avg(velocity) as avg_v, avg(nominal_fuel_consumption) as nominal, sum(velocity)/count(velocity) as ratio, count(*) from readings where velocity > 1 group by fleet having count(*) > 0 order by fleet";
    let b = run(sql);
    assert_eq!(
        names(&b),
        vec!["fleet", "avg_v", "nominal", "ratio", "count(*)"]
    );
    let r = rows(&b);
    assert_eq!(r.len(), 3);
    for row in &r {
        let fleet = row[0].clone();
        let sel: Vec<_> = all_rows()
            .into_iter()
            .filter(|(m, r)| m.tags[1] == fleet && r[2].as_f64().is_some_and(|v| v > 1.0))
            .collect();
        let vs: Vec<f64> = sel.iter().map(|(_, r)| r[2].as_f64().unwrap()).collect();
        let avg = vs.iter().sum::<f64>() / vs.len() as f64;
        assert_eq!(row[1], Value::Float(avg));
        let nominal = sel
            .iter()
            .map(|(m, _)| m.tags[3].as_f64().unwrap())
            .sum::<f64>()
            / sel.len() as f64;
        assert_eq!(row[2], Value::Float(nominal));
        assert_eq!(row[3], Value::Float(avg));
        assert_eq!(row[4], Value::Int(sel.len() as i64));
    }
    let b = run("select fleet, count(*) from readings group by fleet having count(*) > 10 and fleet != 'East' order by 2 desc, fleet");
    assert_eq!(
        rows(&b),
        vec![
            vec![Value::Str("North".into()), Value::Int(20)],
            vec![Value::Str("South".into()), Value::Int(20)]
        ]
    );
    // group by a column
    let b = run("select status, count(*) from readings group by status order by status");
    assert_eq!(
        rows(&b).iter().map(|r| r[1].clone()).collect::<Vec<_>>(),
        vec![Value::Int(20), Value::Int(20), Value::Int(20)]
    );
    // partition by several tags
    let b = run("select fleet, driver, count(*) from readings partition by fleet, driver order by fleet, driver");
    assert_eq!(rows(&b).len(), 6);
}

#[test]
fn expressions_and_predicates() {
    let b = run("select tbname, ts, velocity * 2 + 1, latitude % 10, -status from readings where tbname = 'r_truck_2' and (velocity between 5 and 12 or velocity is null) order by ts");
    let r = rows(&b);
    let expect: Vec<_> = tables()[2]
        .rows
        .iter()
        .filter(|r| r[2].as_f64().is_none_or(|v| (5.0..=12.0).contains(&v)))
        .cloned()
        .collect();
    assert_eq!(r.len(), expect.len());
    for (got, e) in r.iter().zip(expect.iter()) {
        assert_eq!(got[1], e[0]);
        match e[2].as_f64() {
            Some(v) => assert_eq!(got[2], Value::Float(v * 2.0 + 1.0)),
            None => assert_eq!(got[2], Value::Null),
        }
        assert_eq!(got[3], Value::Float(e[1].as_f64().unwrap() % 10.0));
        assert_eq!(got[4], Value::Int(-e[3].as_i64().unwrap()));
    }
    assert_eq!(names(&b)[2], "velocity*2+1");
    let count = |w: &str| -> i64 {
        let b = run(&format!("select count(*) from readings where {w}"));
        rows(&b)[0][0].as_i64().unwrap()
    };
    assert_eq!(count("name in ('truck_1', 'truck_2')"), 20);
    assert_eq!(count("name not in ('truck_1', 'truck_2')"), 30); // NULL name excluded
    assert_eq!(count("name is null"), 10);
    assert_eq!(count("name like 'truck\\_%'"), 50);
    assert_eq!(count("tbname like '%_5'"), 10);
    assert_eq!(count("not (fleet = 'South') and name is not null"), 30);
    let expect = all_rows()
        .iter()
        .filter(|(m, r)| m.tags[1] == Value::Str("South".into()) || r[3] == Value::Int(0))
        .count() as i64;
    assert_eq!(count("fleet = \"South\" or status = 0"), expect);
    assert_eq!(
        count("velocity is null"),
        all_rows().iter().filter(|(_, r)| r[2].is_null()).count() as i64
    );
    assert_eq!(count("ts > now - 1h"), 0);
    assert_eq!(
        count("ts >= '2016-01-01 00:01:00' and ts <= 1451606480005"),
        18
    );
    let expect = all_rows()
        .iter()
        .filter(|(_, r)| r[3] != Value::Int(1) && r[1].as_f64().unwrap() / 2.0 >= 10.0)
        .count() as i64;
    assert_eq!(count("status != 1 and latitude / 2 >= 10"), expect);
    assert_eq!(count("1 = 0"), 0);
}

#[test]
fn subquery_in_from_runs_on_coordinator() {
    // high-load shape (no interval)
    let sql = "SELECT ts,name,driver,velocity,nominal_fuel_consumption FROM (SELECT last_row(ts) as ts,name,driver,velocity,nominal_fuel_consumption FROM readings WHERE fleet = 'South' partition by name,driver) WHERE velocity >= (0.5 * nominal_fuel_consumption)";
    let p = plan(sql);
    assert_eq!(p.fragments.len(), 1);
    let b = run(sql);
    assert_eq!(
        names(&b),
        vec![
            "ts",
            "name",
            "driver",
            "velocity",
            "nominal_fuel_consumption"
        ]
    );
    let r = rows(&b);
    // truck_0 last velocity 7+... compute: row 9: (0*7+27)%20 = 7 -> 7.5 ; truck_3: (21+27)%20=8 -> 8.5; nominal 15 -> threshold 7.5
    assert_eq!(r.len(), 2);
    // avg-load shape: nested aggregation
    let sql = "select fleet, avg(ml) from (SELECT fleet, tbname, avg(latitude) AS ml FROM readings where name is not null partition BY fleet, tbname) partition BY fleet order by fleet";
    let b = run(sql);
    let r = rows(&b);
    assert_eq!(names(&b), vec!["fleet", "avg(ml)"]);
    // East: truck 2 only (truck 5 has NULL name): avg latitude = 20 + 1.125
    assert_eq!(r[0], vec![Value::Str("East".into()), Value::Float(21.125)]);
    // North: trucks 1, 4 -> (11.125 + 41.125)/2
    assert_eq!(r[1], vec![Value::Str("North".into()), Value::Float(26.125)]);
    // group by + having over a subquery
    let b = run("select name, count(*) from (select ts, name, velocity from readings where name is not null) where velocity > 10 group by name having count(*) > 3 order by name");
    for row in rows(&b) {
        assert!(row[1].as_i64().unwrap() > 3);
    }
    let b = run("select * from (select tbname as tb, count(*) as c from readings group by tbname) where c = 10 order by tb limit 2");
    assert_eq!(
        rows(&b),
        vec![
            vec![Value::Str("r_truck_0".into()), Value::Int(10)],
            vec![Value::Str("r_truck_1".into()), Value::Int(10)]
        ]
    );
}

#[test]
fn planning_errors_name_the_problem() {
    let e = err("SELECT velocty FROM readings");
    assert_eq!(e.to_string(), "unknown column 'velocty' in readings at 1:8");
    assert_eq!(e.status_code(), StatusCode::ColumnNotFound);
    let e = err("select count(*) from readings where\n  velocty > 1");
    assert_eq!(e.to_string(), "unknown column 'velocty' in readings at 2:3");
    let e = err("select * from nosuch");
    assert_eq!(e.status_code(), StatusCode::TableNotFound);
    assert!(e.to_string().contains("'nosuch'"), "{e}");
    let e = err("select * from other.readings");
    assert_eq!(e.status_code(), StatusCode::DatabaseNotFound);
    let e = plan_query(&query("select * from readings"), None, &Cat).unwrap_err();
    assert_eq!(e.status_code(), StatusCode::NoDatabaseSelected);
    let e = err("select latitude, count(*) from readings group by fleet");
    assert!(
        e.to_string().contains("'latitude' must appear in GROUP BY"),
        "{e}"
    );
    let e = err("select * from readings where count(*) > 1");
    assert!(e.to_string().contains("not allowed in WHERE"), "{e}");
    let e = err("select median(velocity) from readings");
    assert!(
        e.to_string()
            .contains("function 'median' is not supported yet at 1:8"),
        "{e}"
    );
    let e = err("select avg(name) from readings");
    assert_eq!(e.status_code(), StatusCode::TypeMismatch);
    let e = err("select * from readings where ts > 'yesterday'");
    assert_eq!(e.status_code(), StatusCode::TypeMismatch);
    let e = err("select * from readings order by 9");
    assert!(e.to_string().contains("out of range"), "{e}");
    assert!(Fragment::from_bytes(b"garbage").is_err());
}

#[test]
fn interval_windows_per_partition() {
    // 30 s windows: rows at +0,10,20 s | 30,40,50 | 60,70,80 | 90 (plus the truck offset in ms)
    let sql = "select _wstart, _wend, tbname, count(*), avg(latitude) from readings where fleet = 'South' partition by tbname interval(30s)";
    let b = run(sql);
    assert_eq!(
        names(&b),
        vec!["_wstart", "_wend", "tbname", "count(*)", "avg(latitude)"]
    );
    let r = rows(&b);
    assert_eq!(r.len(), 8);
    // sorted by partition, then window start
    assert_eq!(
        r[0],
        vec![
            Value::Timestamp(T0),
            Value::Timestamp(T0 + 30_000),
            Value::Str("r_truck_0".into()),
            Value::Int(3),
            Value::Float(0.25)
        ]
    );
    assert_eq!(r[3][0], Value::Timestamp(T0 + 90_000));
    assert_eq!(r[3][3], Value::Int(1));
    assert_eq!(r[4][2], Value::Str("r_truck_3".into()));
    // offset: windows start 5 s later
    let b = run("select _wstart, count(*) from r_truck_1 interval(30s, 5s)");
    let r = rows(&b);
    assert_eq!(r[0], vec![Value::Timestamp(T0 - 25_000), Value::Int(1)]);
    assert_eq!(r[1], vec![Value::Timestamp(T0 + 5_000), Value::Int(3)]);
    // per-partition LIMIT keeps the first window of each partition (stationary-trucks shape)
    let sql = "select name,driver from (SELECT name,driver,avg(velocity) as mean_velocity FROM readings WHERE ts > 1451606400000 AND ts <= 1451606600000 and fleet = 'South' partition BY name,driver interval(1m) LIMIT 1) WHERE mean_velocity < 100;";
    let b = run(sql);
    assert_eq!(names(&b), vec!["name", "driver"]);
    let mut r = rows(&b);
    r.sort_by(|a, b| cmp_rows(a, b));
    assert_eq!(
        r,
        vec![
            vec![Value::Str("truck_0".into()), Value::Str("Derek".into())],
            vec![Value::Str("truck_3".into()), Value::Str("Andy".into())]
        ]
    );
    // long-driving-sessions shape: windows counted per truck over a subquery
    let sql = "SELECT name,driver FROM(SELECT name,driver,avg(velocity) as mean_velocity FROM readings WHERE fleet =\"South\" AND ts > 1451606300000 AND ts <= 1451606500000 partition BY name,driver interval(20s)) WHERE mean_velocity > 1 GROUP BY name,driver having count(*) > 4";
    let b = run(sql);
    assert_eq!(rows(&b).len(), 2);
    // avg-daily-driving-duration shape: three levels, interval over a subquery's _wstart
    let sql = "select fleet,name,driver,avg(hours_driven) as avg_daily_hours from( select _wstart as ts,fleet,name,driver,count(mv)/6 as hours_driven from ( select _wstart as ts,fleet,tbname,name,driver,avg(velocity) as mv from readings where ts > 1451606300000 and ts < 1451606500000  partition by fleet,tbname,name,driver interval(10s)  ) where  mv >1  partition by fleet,name,driver interval(1d) )partition by fleet,name,driver ;";
    let b = run(sql);
    assert_eq!(
        names(&b),
        vec!["fleet", "name", "driver", "avg_daily_hours"]
    );
    let r = rows(&b);
    assert_eq!(r.len(), 6);
    for row in &r {
        // one day; count of 10 s windows with mean velocity > 1 (non-null velocity) / 6
        let t = tables()
            .into_iter()
            .find(|t| t.meta.tags[0] == row[1] && t.meta.tags[1] == row[0])
            .unwrap();
        let moving = t
            .rows
            .iter()
            .filter(|r| r[2].as_f64().is_some_and(|v| v > 1.0))
            .count();
        assert_eq!(row[3], Value::Float(moving as f64 / 6.0), "{row:?}");
    }
    // daily-activity shape: interval(1d) over a subquery with _wstart as ts1
    let sql = "SELECT _wstart as ts,fleet,count(ms1)/144 FROM (SELECT _wstart as ts1, fleet,avg(status) AS ms1 FROM readings WHERE ts >= 1451606400000 AND ts < 1451692800000 partition by fleet, tbname interval(10s)) WHERE ms1<1 partition by fleet interval(1d) order by fleet";
    let b = run(sql);
    let r = rows(&b);
    assert_eq!(r.len(), 3);
    assert_eq!(r[0][0], Value::Timestamp(T0));
    let east0 = all_rows()
        .iter()
        .filter(|(m, r)| m.tags[1] == Value::Str("East".into()) && r[3] == Value::Int(0))
        .count();
    assert_eq!(r[0][2], Value::Float(east0 as f64 / 144.0));
    // errors
    assert!(
        err("select count(*) from readings interval(10m) sliding(20m)")
            .to_string()
            .contains("SLIDING must be positive and at most the INTERVAL at 1:31")
    );
    assert!(err("select _wstart, count(*) from readings")
        .to_string()
        .contains("needs an INTERVAL"));
    assert_eq!(
        err("select count(*) from readings state_window(velocity)").status_code(),
        StatusCode::TypeMismatch
    );
}

#[test]
fn tsbs_last_value_templates_run() {
    // 5.1 last-loc, 5.2 single-last-loc, 5.3 low-fuel (shape), 5.4 high-load (shape),
    // 5.8 avg-vs-projected, 5.11 avg-load (shape)
    let b = run("SELECT last_row(ts),name,driver,latitude,velocity FROM readings WHERE fleet='North' and name IS NOT NULL partition BY name,driver");
    assert_eq!(rows(&b).len(), 2);
    let b = run("SELECT last_row(ts),last_row(latitude),last_row(velocity) FROM readings WHERE name IN ('truck_4') GROUP BY name");
    assert_eq!(rows(&b)[0][0], Value::Timestamp(T0 + 90_004));
    let b = run("SELECT last_row(ts),name,driver,velocity FROM readings WHERE velocity <= 5 AND fleet = 'South' and name IS NOT NULL GROUP BY name,driver");
    for row in rows(&b) {
        assert!(row[3].as_f64().unwrap() <= 5.0);
    }
    let b = run("select avg(velocity) as avg_fuel_consumption,avg(nominal_fuel_consumption) as nominal_fuel_consumption from readings where velocity > 1 group by fleet");
    assert_eq!(
        names(&b),
        vec!["avg_fuel_consumption", "nominal_fuel_consumption"]
    );
    assert_eq!(rows(&b).len(), 3);
    let b = run("select fleet,driver,nominal_fuel_consumption,avg(ml/nominal_fuel_consumption)  from(SELECT fleet, driver,tbname,nominal_fuel_consumption ,avg(velocity) AS ml FROM readings where name is not null   partition BY  fleet, driver,tbname,nominal_fuel_consumption) partition BY fleet, driver,nominal_fuel_consumption");
    assert_eq!(names(&b)[3], "avg(ml/nominal_fuel_consumption)");
    assert_eq!(rows(&b).len(), 5);
}

#[test]
fn random_token_soup_never_panics() {
    let vocab = [
        "select",
        "*",
        "from",
        "readings",
        "r_truck_1",
        "(",
        ")",
        ",",
        "where",
        "ts",
        ">",
        "<=",
        "=",
        "!=",
        "and",
        "or",
        "not",
        "velocity",
        "latitude",
        "fleet",
        "name",
        "tbname",
        "'South'",
        "\"x\"",
        "1451606400000",
        "0.5",
        "-",
        "+",
        "/",
        "%",
        "count(*)",
        "avg(velocity)",
        "last_row(ts)",
        "last_row(*)",
        "max(latitude)",
        "first(velocity)",
        "sum(status)",
        "partition",
        "by",
        "group",
        "order",
        "desc",
        "limit",
        "1",
        "offset",
        "having",
        "interval(10s)",
        "interval(1d)",
        "_wstart",
        "_wend",
        "as",
        "x",
        "in",
        "is",
        "null",
        "between",
        "like",
        "'%a'",
        "cast(",
        "bool)",
        "floor(",
        "now",
        "10m",
        "'2016-01-01'",
        ";",
        "insert",
        "into",
        "values",
        "using",
        "tags",
        "create",
        "stable",
        "table",
        "database",
        "show",
        "drop",
        // the dialect's windows, functions and clauses
        "sliding(5s)",
        "fill(prev)",
        "fill(linear)",
        "fill(value, 1)",
        "state_window(status)",
        "session(ts, 10s)",
        "event_window start with status = 1 end with status = 2",
        "count_window(3)",
        "count_window(3, 1)",
        "range('2016-01-01')",
        "every(5s)",
        "interp(latitude)",
        "_irowts",
        "case when status = 1 then 'a' else 'b' end",
        "distinct",
        "slimit 1",
        "explain",
        "spread(latitude)",
        "stddev(velocity)",
        "percentile(velocity, 50)",
        "twa(velocity)",
        "mode(status)",
        "csum(status)",
        "derivative(velocity, 1s, 0)",
        "mavg(velocity, 2)",
        "top(velocity, 2)",
        "statecount(status, 'GT', 0)",
        "histogram(velocity, 'user_input', '[1, 5]', 0)",
        "concat(fleet, name)",
        "substr(fleet, 2)",
    ];
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let vn = cluster(2);
    for _ in 0..3000 {
        let len = 1 + (next() % 24) as usize;
        let mut sql = String::from(if next() % 2 == 0 { "select " } else { "" });
        for _ in 0..len {
            sql.push_str(vocab[(next() % vocab.len() as u64) as usize]);
            sql.push(' ');
        }
        if let Ok(stmts) = parse(&sql) {
            for s in stmts {
                if let Statement::Select(q) = s {
                    if plan_query(&q, Some("iot"), &Cat).is_ok() {
                        let _ = run_on(&sql, &vn);
                    }
                }
            }
        }
    }
    // and some valid-looking queries built from the same parts
    let parts = [
        "count(*)",
        "avg(velocity)",
        "tbname",
        "fleet",
        "last_row(ts)",
        "latitude*2",
        "_wstart",
        "_wend",
        "spread(velocity)",
        "percentile(latitude, 10)",
        "csum(latitude)",
        "top(velocity, 2)",
        "interp(latitude)",
        "histogram(latitude, 'user_input', '[0, 10]', 1)",
        "case when status > 0 then fleet end",
        "status",
    ];
    let tails = [
        "",
        " partition by tbname",
        " group by fleet",
        " interval(20s)",
        " partition by fleet interval(30s) limit 1",
        " order by 1 desc limit 2",
        " interval(20s) sliding(10s) fill(linear)",
        " partition by tbname state_window(status) slimit 2",
        " session(ts, 10s)",
        " partition by tbname event_window start with status = 0 end with status = 2",
        " count_window(3, 2)",
        " range('2016-01-01 00:00:00', '2016-01-01 00:01:00') every(7s) fill(prev)",
        " partition by tbname range('2016-01-01 00:00:10') fill(next)",
        " and ts >= 1451606400000 and ts < 1451606500000 interval(15s) fill(value, 0, 1)",
    ];
    for a in parts {
        for b in parts {
            for t in tails {
                let sql = format!("select {a}, {b} from readings where velocity > 1{t}");
                let _ = run_on(&sql, &vn);
                if !t.starts_with(" and") {
                    let sql = format!("select distinct {a}, {b} from (select * from readings){t}");
                    let _ = run_on(&sql, &vn);
                }
            }
        }
    }
}

#[test]
fn diff_per_partition_in_time_order() {
    let b = run("select ts, diff(latitude), diff(status) as ds, latitude from r_truck_1");
    assert_eq!(names(&b), vec!["ts", "diff(latitude)", "ds", "latitude"]);
    let r = rows(&b);
    assert_eq!(r.len(), ROWS as usize - 1);
    let src = &tables()[1].rows;
    for (i, row) in r.iter().enumerate() {
        assert_eq!(row[0], src[i + 1][0]);
        assert_eq!(row[1], Value::Float(0.25));
        assert_eq!(
            row[2],
            Value::Int(src[i + 1][3].as_i64().unwrap() - src[i][3].as_i64().unwrap())
        );
        assert_eq!(row[3], src[i + 1][1]);
    }
    // partition by tbname on the stable: first row of each partition dropped
    let b = run("select tbname, diff(cast(ts as bigint)) as dt from readings partition by tbname");
    let r = rows(&b);
    assert_eq!(r.len(), TRUCKS * (ROWS as usize - 1));
    assert!(r.iter().all(|row| row[1] == Value::Int(10_000)));
    // NULL inputs give NULL differences
    let b = run("select diff(velocity) from r_truck_0");
    assert_eq!(rows(&b)[0][0], Value::Null); // row 0 velocity is NULL
}

#[test]
fn tsbs_nested_diff_templates_run() {
    // 5.10 avg-daily-driving-session, on 10 s buckets
    let sql = " select _wstart as ts,name,avg(ela) from (select ts,name,ela from (SELECT ts,name, diff(difka) as dif, diff(cast(ts as bigint)) as ela FROM (SELECT ts,name,difka FROM (SELECT ts,name,diff(mv) AS difka FROM (SELECT _wstart as ts,name,cast(cast(floor(avg(velocity)/5) as bool) as int) AS mv FROM readings   WHERE name is not null  AND ts > 1451606300000 AND ts < 1451606500000   partition by name interval(10s))partition BY name ) WHERE difka!=0   order by ts) partition BY name order by ts ) WHERE dif = -2   partition BY name order by ts )  partition BY name  interval(1d);";
    let b = run(sql);
    assert_eq!(names(&b), vec!["ts", "name", "avg(ela)"]);
    for row in rows(&b) {
        assert_eq!(row[0], Value::Timestamp(T0));
        assert!(row[2].as_f64().unwrap() > 0.0);
    }
    // 5.13 breakdown-frequency, with fleet in place of model
    let sql = "SELECT fleet,count(state_changed) FROM (SELECT _rowts,fleet,diff(broken_down) AS state_changed FROM (SELECT ts,fleet,tb,cast(cast(floor(2*(nzs)) as bool) as int) AS broken_down FROM (SELECT _wstart as ts,fleet,tbname as tb, sum(cast(cast(status as bool) as int))/count(cast(cast(status as bool) as int)) AS nzs FROM readings WHERE ts >= 1451606400000 AND ts < 1451692800000 partition BY tbname,fleet interval(20s)) order by ts) partition BY tb,fleet) WHERE state_changed = 1 partition BY fleet";
    let b = run(sql);
    assert_eq!(names(&b), vec!["fleet", "count(state_changed)"]);
    // reference: per truck, 20 s buckets of status != 0 share >= 1/2 -> broken; count 0->1 transitions
    let mut expect: std::collections::BTreeMap<String, i64> = Default::default();
    for t in tables() {
        let mut buckets: std::collections::BTreeMap<i64, (i64, i64)> = Default::default();
        for r in &t.rows {
            let ts = r[0].as_i64().unwrap();
            let e = buckets.entry(ts - (ts % 20_000)).or_default();
            e.0 += (r[3].as_i64().unwrap() != 0) as i64;
            e.1 += 1;
        }
        let states: Vec<i64> = buckets
            .values()
            .map(|(nz, c)| ((2.0 * (*nz as f64 / *c as f64)).floor() != 0.0) as i64)
            .collect();
        let ups = states.windows(2).filter(|w| w[1] - w[0] == 1).count() as i64;
        let fleet = t.meta.tags[1].to_string();
        *expect.entry(fleet).or_default() += ups;
    }
    let mut got: std::collections::BTreeMap<String, i64> = Default::default();
    for row in rows(&b) {
        got.insert(row[0].to_string(), row[1].as_i64().unwrap());
    }
    expect.retain(|_, v| *v > 0);
    assert_eq!(got, expect);
}

#[test]
fn limit_is_pushed_to_vnodes_without_order_by() {
    let p = plan("select * from readings limit 3 offset 1");
    assert_eq!(p.fragments[0].fragment.limit, Some(4));
    let b = run_on("select * from readings limit 3 offset 1", &cluster(3)).unwrap();
    assert_eq!(b.num_rows(), 3);
    assert_eq!(
        plan("select * from readings order by ts limit 3").fragments[0]
            .fragment
            .limit,
        None
    );
}

/// The 13 TSBS IoT templates of tsbs-iot.md §5, verbatim, over both STABLEs.
mod tsbs {
    use super::*;

    fn tags() -> Vec<ColumnDef> {
        let mut v: Vec<ColumnDef> = ["name", "fleet", "driver", "model", "device_version"]
            .iter()
            .map(|n| ColumnDef::new(*n, DataType::VarChar(30)))
            .collect();
        for n in ["load_capacity", "fuel_capacity", "nominal_fuel_consumption"] {
            v.push(ColumnDef::new(n, DataType::Double));
        }
        v
    }

    fn schema(name: &str) -> StableSchema {
        let mut columns = vec![ColumnDef::new("ts", DataType::Timestamp)];
        let fields: &[&str] = if name == "readings" {
            &[
                "latitude",
                "longitude",
                "elevation",
                "velocity",
                "heading",
                "grade",
                "fuel_consumption",
            ]
        } else {
            &["fuel_state", "current_load"]
        };
        for f in fields {
            columns.push(ColumnDef::new(*f, DataType::Double));
        }
        if name == "diagnostics" {
            columns.push(ColumnDef::new("status", DataType::BigInt));
        }
        StableSchema {
            db: "iot".into(),
            name: name.into(),
            version: tidal_common::SchemaVersion(1),
            columns,
            tags: tags(),
        }
    }

    struct Tbl {
        meta: TableMeta,
        rows: Vec<Vec<Value>>,
    }

    struct Node {
        tables: Vec<Tbl>,
    }

    impl ScanSource for Node {
        fn schema(&self, stable: &str) -> Option<std::sync::Arc<StableSchema>> {
            matches!(stable, "readings" | "diagnostics")
                .then(|| std::sync::Arc::new(schema(stable)))
        }
        fn tables(&self, stable: &str) -> Vec<std::sync::Arc<TableMeta>> {
            self.tables
                .iter()
                .filter(|t| t.meta.stable == stable)
                .map(|t| std::sync::Arc::new(t.meta.clone()))
                .collect()
        }
        fn table(&self, name: &str) -> Option<std::sync::Arc<TableMeta>> {
            self.tables
                .iter()
                .find(|t| t.meta.name == name)
                .map(|t| std::sync::Arc::new(t.meta.clone()))
        }
        fn scan(
            &self,
            uid: TableUid,
            lo: i64,
            hi: i64,
            cols: &[usize],
        ) -> Result<Vec<Column>, String> {
            let t = self
                .tables
                .iter()
                .find(|t| t.meta.uid == uid)
                .ok_or("uid")?;
            let s = schema(&t.meta.stable);
            let mut out: Vec<Column> = cols
                .iter()
                .map(|c| Column::empty(s.columns[*c].data_type, 0))
                .collect();
            for r in t
                .rows
                .iter()
                .filter(|r| (lo..=hi).contains(&r[0].as_i64().unwrap_or(0)))
            {
                for (o, c) in out.iter_mut().zip(cols) {
                    o.push(&r[*c]);
                }
            }
            Ok(out)
        }
    }

    struct TCat;
    impl Catalog for TCat {
        fn stable(&self, db: &str, name: &str) -> Option<StableSchema> {
            (db == "iot" && matches!(name, "readings" | "diagnostics")).then(|| schema(name))
        }
        fn subtable(&self, _: &str, _: &str) -> Option<(TableMeta, StableSchema)> {
            None
        }
        fn precision(&self, db: &str) -> Option<Precision> {
            (db == "iot").then_some(Precision::Millis)
        }
    }

    fn data(k: usize) -> Vec<Node> {
        let mut nodes: Vec<Node> = (0..k).map(|_| Node { tables: vec![] }).collect();
        let mut uid = 0;
        let mut x: u64 = 42;
        let mut rnd = move |m: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % m
        };
        for truck in 0..8usize {
            let model = ["F-150", "G-2000", "H-2"][truck % 3];
            let cap = [2000.0, 5000.0, 1500.0][truck % 3];
            let tagv = vec![
                Value::Str(format!("truck_{truck}")),
                Value::Str(["South", "North", "East", "West"][truck % 4].into()),
                Value::Str(["Derek", "Rodney", "Albert"][truck % 3].into()),
                Value::Str(model.into()),
                Value::Str("v1.0".into()),
                Value::Float(cap),
                Value::Float(200.0),
                Value::Float([15.0, 19.0, 12.0][truck % 3]),
            ];
            for st in ["readings", "diagnostics"] {
                uid += 1;
                let mut rows = Vec::new();
                for i in 0..(6 * 24 * 2) {
                    let ts = Value::Timestamp(T0 + i * 300_000);
                    let row = if st == "readings" {
                        let mut r = vec![ts];
                        for _ in 0..7 {
                            r.push(Value::Float(rnd(100) as f64));
                        }
                        r
                    } else {
                        vec![
                            ts,
                            Value::Float(rnd(11) as f64 / 10.0),
                            Value::Float(rnd(5000) as f64),
                            Value::Int(rnd(3) as i64),
                        ]
                    };
                    rows.push(row);
                }
                let meta = TableMeta {
                    uid: TableUid(uid),
                    name: format!("{}_truck_{truck}", &st[..1]),
                    stable: st.into(),
                    tags: tagv.clone().into(),
                };
                nodes[(uid as usize) % k].tables.push(Tbl { meta, rows });
            }
        }
        nodes
    }

    fn exec(sql: &str, nodes: &[Node]) -> Batch {
        let stmts = parse(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        let Some(Statement::Select(q)) = stmts.into_iter().next() else {
            panic!("{sql}")
        };
        let p = plan_query(&q, Some("iot"), &TCat).unwrap_or_else(|e| panic!("{sql}: {e}"));
        let results = p
            .fragments
            .iter()
            .map(|f| {
                let frag = Fragment::from_bytes(&f.fragment.to_bytes()).unwrap();
                (
                    f.id,
                    nodes
                        .iter()
                        .map(|n| execute_fragment(&frag, n).unwrap())
                        .collect(),
                )
            })
            .collect();
        finish(&p, results).unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    #[test]
    fn all_thirteen_templates_plan_and_run() {
        let (s, e) = (T0 + 3_600_000 + 1234, T0 + 3_600_000 + 1234 + 600_000);
        let (s4, e4) = (T0 + 1000, T0 + 1000 + 4 * 3_600_000);
        let (big_s, big_e) = (T0, T0 + 86_400_000 + 1000);
        let f = "South";
        let queries = vec![
            format!("SELECT last_row(ts),name,driver,latitude,longitude FROM readings WHERE fleet='{f}' and name IS NOT NULL partition BY name,driver"),
            "SELECT last_row(ts),last_row(latitude),last_row(longitude) FROM readings WHERE name IN ('truck_5') GROUP BY name".to_string(),
            format!("SELECT last_row(ts),name,driver,fuel_state FROM diagnostics WHERE fuel_state <= 0.1 AND fleet = '{f}' and name IS NOT NULL GROUP BY name,driver"),
            format!("SELECT ts,name,driver,current_load,load_capacity FROM (SELECT last_row(ts) as ts,name,driver, current_load,load_capacity FROM diagnostics WHERE fleet = '{f}' partition by name,driver) WHERE current_load>= (0.9 * load_capacity)"),
            format!("select name,driver from (SELECT name,driver,avg(velocity) as mean_velocity FROM readings WHERE ts > {s} AND ts <= {e} and fleet = '{f}' partition BY name,driver interval(10m) LIMIT 1) WHERE mean_velocity < 1;"),
            format!("SELECT name,driver FROM(SELECT name,driver,avg(velocity) as mean_velocity FROM readings WHERE fleet =\"{f}\" AND ts > {s4} AND ts <= {e4} partition BY name,driver interval(10m)) WHERE mean_velocity > 1 GROUP BY name,driver having count(*) > 22"),
            format!("SELECT name,driver FROM(SELECT name,driver,avg(velocity) as mean_velocity FROM readings WHERE fleet ='{f}' AND ts > {big_s} AND ts <= {big_e} partition BY name,driver interval(10m) ) WHERE mean_velocity > 1 GROUP BY name,driver having count(*) > 60"),
            "select avg(fuel_consumption) as avg_fuel_consumption,avg(nominal_fuel_consumption) as nominal_fuel_consumption from readings where velocity > 1 group by fleet".to_string(),
            format!("select fleet,name,driver,avg(hours_driven) as avg_daily_hours  from( select _wstart as ts,fleet,name,driver,count(mv)/6 as hours_driven from ( select _wstart as ts,fleet,tbname,name,driver,avg(velocity) as mv from readings where ts > {big_s} and ts < {big_e}  partition by fleet,tbname,name,driver interval(10m)  ) where  mv >1  partition by fleet,name,driver interval(1d) )partition by fleet,name,driver ;"),
            format!(" select _wstart as ts,name,avg(ela) from (select ts,name,ela from (SELECT ts,name, diff(difka) as dif, diff(cast(ts as bigint)) as ela FROM (SELECT ts,name,difka FROM (SELECT ts,name,diff(mv) AS difka FROM (SELECT _wstart as ts,name,cast(cast(floor(avg(velocity)/5) as bool) as int) AS mv FROM readings   WHERE name is not null  AND ts > {big_s} AND ts < {big_e}   partition by name interval(10m))partition BY name ) WHERE difka!=0   order by ts) partition BY name order by ts ) WHERE dif = -2   partition BY name order by ts )  partition BY name  interval(1d);"),
            "select fleet,model,load_capacity,avg(ml/load_capacity)  from(SELECT fleet, model,tbname,load_capacity ,avg(current_load) AS ml FROM diagnostics where name is not null   partition BY  fleet, model,tbname,load_capacity) partition BY fleet, model,load_capacity".to_string(),
            format!("SELECT _wstart as ts,model,fleet,count(ms1)/144 FROM (SELECT _wstart as ts1,model, fleet,avg(status) AS ms1 FROM diagnostics WHERE ts >= {big_s} AND ts < {big_e} partition by model, fleet, tbname interval(10m)) WHERE ms1<1 partition by model, fleet interval(1d)"),
            format!("SELECT model,count(state_changed) FROM (SELECT _rowts,model,diff(broken_down) AS state_changed FROM (SELECT ts,model,tb,cast(cast(floor(2*(nzs)) as bool) as int) AS broken_down FROM (SELECT _wstart as ts,model,tbname as tb, sum(cast(cast(status as bool) as int))/count(cast(cast(status as bool) as int)) AS nzs FROM diagnostics WHERE ts >= {big_s} AND ts < {big_e} partition BY tbname,model interval(10m)) order by ts) partition BY tb,model) WHERE state_changed = 1 partition BY model"),
        ];
        let one = data(1);
        let four = data(4);
        let expected_rows = [2usize, 1, 2, 2, 2, 2, 2, 4, 8, 8, 8, 12, 3];
        for (i, q) in queries.iter().enumerate() {
            let a = exec(q, &one);
            let b = exec(q, &four);
            let mut ra = rows(&a);
            let mut rb = rows(&b);
            ra.sort_by(|x, y| cmp_rows(x, y));
            rb.sort_by(|x, y| cmp_rows(x, y));
            assert_eq!(ra, rb, "template {i}: 1 vs 4 vnodes");
            eprintln!("template {i}: {} rows, first {:?}", ra.len(), ra.first());
            assert!(
                ra.len() <= expected_rows[i],
                "template {i}: {} rows: {ra:?}",
                ra.len()
            );
        }
    }
}

#[test]
fn partition_by_limit_applies_per_partition() {
    let b = run("select tbname, ts from readings where fleet = 'South' partition by tbname limit 2 offset 1");
    let mut r = rows(&b);
    r.sort_by(|a, b| cmp_rows(a, b));
    assert_eq!(
        r,
        vec![
            vec![
                Value::Str("r_truck_0".into()),
                Value::Timestamp(T0 + 10_000)
            ],
            vec![
                Value::Str("r_truck_0".into()),
                Value::Timestamp(T0 + 20_000)
            ],
            vec![
                Value::Str("r_truck_3".into()),
                Value::Timestamp(T0 + 10_003)
            ],
            vec![
                Value::Str("r_truck_3".into()),
                Value::Timestamp(T0 + 20_003)
            ],
        ]
    );
    assert_eq!(names(&b), vec!["tbname", "ts"]);
}

/// `cargo test -p tidal-sql --release -- --ignored --nocapture perf_smoke`
#[test]
#[ignore]
fn perf_smoke() {
    let mut v = Vnode {
        tables: vec![],
        sma_block: None,
        columnar: true,
    };
    for t in 0..200usize {
        let meta = TableMeta {
            uid: TableUid(t as u64 + 1),
            name: format!("r_truck_{t}"),
            stable: "readings".into(),
            tags: vec![
                Value::Str(format!("truck_{t}")),
                Value::Str(FLEETS[t % 3].into()),
                Value::Str(DRIVERS[t % 2].into()),
                Value::Float(NOMINAL[t % 3]),
            ]
            .into(),
        };
        let rows = (0..5000i64)
            .map(|r| {
                vec![
                    Value::Timestamp(T0 + r * 10_000),
                    Value::Float(r as f64),
                    Value::Float((r % 100) as f64),
                    Value::Int(r % 3),
                ]
            })
            .collect();
        v.tables.push(Table { meta, rows });
    }
    let vn = vec![v];
    for sql in [
        "select count(*), avg(velocity), max(latitude) from readings",
        "select fleet, avg(velocity) from readings where velocity > 1 group by fleet",
        "select tbname, avg(velocity) from readings partition by tbname interval(10m)",
        "SELECT last_row(ts),name,driver,latitude FROM readings WHERE fleet='South' partition BY name,driver",
        "select tbname, count(*), avg(velocity) from readings partition by tbname interval(10m) sliding(5m)",
        "select tbname, count(*) from readings partition by tbname state_window(status)",
        "select tbname, count(*) from readings partition by tbname session(ts, 1m)",
        "select tbname, percentile(velocity, 90), twa(velocity) from readings partition by tbname",
        "select tbname, ts, csum(velocity) from readings partition by tbname",
        "select _wstart, avg(velocity) from readings where ts >= 1451606400000 and ts < 1451656400000 interval(1m) fill(linear)",
    ] {
        let t = std::time::Instant::now();
        let b = run_on(sql, &vn).unwrap();
        eprintln!("{:>8.1} ms  {} rows  {sql}", t.elapsed().as_secs_f64() * 1e3, b.num_rows());
    }
}

#[test]
fn block_summaries_give_the_same_answers_as_rows() {
    let queries = [
        "SELECT COUNT(*), COUNT(velocity), SUM(velocity), AVG(velocity), MIN(velocity), MAX(velocity), SUM(status), MIN(ts), MAX(ts) FROM readings",
        "SELECT tbname, COUNT(*), MAX(latitude), MIN(status) FROM readings PARTITION BY tbname",
        "SELECT fleet, AVG(velocity), COUNT(status) FROM readings GROUP BY fleet",
        "SELECT _wstart, COUNT(*), SUM(latitude), MAX(velocity) FROM readings INTERVAL(20s)",
        "SELECT _wstart, COUNT(*) FROM readings WHERE ts >= '2016-01-01 00:00:15.000' INTERVAL(30s)",
        "SELECT name, MAX(velocity), MIN(latitude) FROM readings PARTITION BY name",
        // grouping without aggregates: each group once, from block statistics
        "SELECT fleet FROM readings GROUP BY fleet",
        "SELECT DISTINCT fleet, driver FROM readings",
        "SELECT DISTINCT tbname FROM readings WHERE ts >= '2016-01-01 00:00:15.000'",
    ];
    for q in queries {
        let plain = run(q);
        let before = crate::exec::SUMMARY_HITS.load(std::sync::atomic::Ordering::Relaxed);
        for k in [1, 2, 3, 4] {
            let mut vs = cluster(3);
            for v in &mut vs {
                v.sma_block = Some(k);
            }
            let b = run_on(q, &vs).unwrap_or_else(|e| panic!("{q}: {e}"));
            let mut a = rows(&plain);
            let mut c = rows(&b);
            a.sort_by(|p, q| cmp_rows(p, q));
            c.sort_by(|p, q| cmp_rows(p, q));
            assert_eq!(a.len(), c.len(), "{q} (blocks of {k})");
            for (x, y) in a.iter().zip(&c) {
                for (u, w) in x.iter().zip(y) {
                    match (u, w) {
                        (Value::Float(p), Value::Float(q2)) => {
                            assert!((p - q2).abs() < 1e-9, "{q} (blocks of {k}): {x:?} vs {y:?}")
                        }
                        _ => assert_eq!(u, w, "{q} (blocks of {k})"),
                    }
                }
            }
        }
        let after = crate::exec::SUMMARY_HITS.load(std::sync::atomic::Ordering::Relaxed);
        assert!(
            after > before,
            "{q}: no block was answered from its summary"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// windows, FILL, aggregates and row functions of the TDengine dialect

fn ts(ms: i64) -> Value {
    Value::Timestamp(T0 + ms)
}

fn col(b: &Batch, c: usize) -> Vec<Value> {
    rows(b).into_iter().map(|r| r[c].clone()).collect()
}

#[test]
fn sliding_interval_windows() {
    // rows every 10 s; 20 s windows every 10 s: the first starts 10 s before the first row
    let b = run("select _wstart, _wend, count(*) from r_truck_0 interval(20s) sliding(10s)");
    let r = rows(&b);
    assert_eq!(r.len(), 11);
    assert_eq!(r[0], vec![ts(-10_000), ts(10_000), Value::Int(1)]);
    assert_eq!(r[1], vec![ts(0), ts(20_000), Value::Int(2)]);
    assert_eq!(r[10], vec![ts(90_000), ts(110_000), Value::Int(1)]);
    // per partition on the STABLE, with a time range
    let b = run("select _wstart, tbname, count(*), max(latitude) from readings where ts >= 1451606400000 and ts < 1451606430000 partition by tbname interval(20s) sliding(10s)");
    let r = rows(&b);
    assert_eq!(r.len(), 6 * 4);
    assert_eq!(r[0][1], Value::Str("r_truck_0".into()));
    assert_eq!(
        col(&b, 2)[..4].to_vec(),
        vec![Value::Int(1), Value::Int(2), Value::Int(2), Value::Int(1)]
    );
    // truck 1 rows at +1 ms: window starting at 10 s holds rows 1 and 2
    assert_eq!(
        r[6],
        vec![
            ts(10_000),
            Value::Str("r_truck_1".into()),
            Value::Int(2),
            Value::Float(10.5)
        ]
    );
}

#[test]
fn fill_modes_over_the_query_range() {
    let q = |mode: &str| {
        run(&format!("select _wstart, avg(latitude), count(*) from r_truck_0 where ts >= 1451606390000 and ts < 1451606430000 interval(5s) fill({mode})"))
    };
    // windows -10 s .. 25 s: data at 0, 10, 20 s (latitude r/4)
    let b = q("null");
    assert_eq!(
        col(&b, 0),
        (-2..6).map(|k| ts(k * 5_000)).collect::<Vec<_>>()
    );
    let n = Value::Null;
    let f = Value::Float;
    assert_eq!(
        col(&b, 1),
        vec![
            n.clone(),
            n.clone(),
            f(0.0),
            n.clone(),
            f(0.25),
            n.clone(),
            f(0.5),
            n.clone()
        ]
    );
    let b = q("prev");
    assert_eq!(
        col(&b, 1),
        vec![
            n.clone(),
            n.clone(),
            f(0.0),
            f(0.0),
            f(0.25),
            f(0.25),
            f(0.5),
            f(0.5)
        ]
    );
    assert_eq!(col(&b, 2)[3], Value::Int(1));
    let b = q("next");
    assert_eq!(
        col(&b, 1),
        vec![
            f(0.0),
            f(0.0),
            f(0.0),
            f(0.25),
            f(0.25),
            f(0.5),
            f(0.5),
            n.clone()
        ]
    );
    let b = q("linear");
    assert_eq!(
        col(&b, 1),
        vec![
            n.clone(),
            n.clone(),
            f(0.0),
            f(0.125),
            f(0.25),
            f(0.375),
            f(0.5),
            n.clone()
        ]
    );
    let b = q("value, -1, 0");
    assert_eq!(col(&b, 1)[0], f(-1.0));
    assert_eq!(col(&b, 2)[0], Value::Int(0));
    assert_eq!(col(&b, 2)[2], Value::Int(1));
    // no time range: between each partition's first and last window; tags stay per partition
    let b = run("select _wstart, tbname, count(*) from readings where fleet = 'South' partition by tbname interval(5s) fill(value, 0)");
    let r = rows(&b);
    assert_eq!(r.len(), 2 * 19);
    assert_eq!(
        r[1],
        vec![ts(5_000), Value::Str("r_truck_0".into()), Value::Int(0)]
    );
    assert_eq!(r[19][1], Value::Str("r_truck_3".into()));
}

#[test]
fn state_session_event_and_count_windows() {
    // truck 0: status = r % 3 -> status > 0: F T T F T T F T T F
    let b = run("select _wstart, _wend, _wduration, count(*), status > 0 from r_truck_0 state_window(status > 0)");
    let r = rows(&b);
    assert_eq!(r.len(), 7);
    assert_eq!(
        r[1],
        vec![
            ts(10_000),
            ts(20_000),
            Value::Int(10_000),
            Value::Int(2),
            Value::Bool(true)
        ]
    );
    assert_eq!(col(&b, 3), [1, 2, 1, 2, 1, 2, 1].map(Value::Int).to_vec());
    // the same per truck on the STABLE equals each subtable's answer
    let b = run("select tbname, count(*) from readings partition by tbname state_window(status)");
    assert_eq!(rows(&b).len(), 60); // status changes on every row
                                    // session: rows with status != 1 of truck 0 are at 0,20,30,50,60,80,90 s
    let b = run("select _wstart, count(*) from r_truck_0 where status != 1 session(ts, 15s)");
    assert_eq!(
        rows(&b),
        vec![
            vec![ts(0), Value::Int(1)],
            vec![ts(20_000), Value::Int(2)],
            vec![ts(50_000), Value::Int(2)],
            vec![ts(80_000), Value::Int(2)],
        ]
    );
    let b = run("select tbname, count(*) from readings partition by tbname session(ts, 10s)");
    assert_eq!(col(&b, 1), vec![Value::Int(10); 6]);
    // event: opens at status = 2 (r = 2, 5, 8), closes at the next status = 0
    let b = run("select _wstart, _wend, count(*) from r_truck_0 event_window start with status = 2 end with status = 0");
    assert_eq!(
        rows(&b),
        vec![
            vec![ts(20_000), ts(30_000), Value::Int(2)],
            vec![ts(50_000), ts(60_000), Value::Int(2)],
            vec![ts(80_000), ts(90_000), Value::Int(2)],
        ]
    );
    // count windows
    let b = run("select _wstart, count(*), sum(status) from r_truck_0 count_window(4)");
    assert_eq!(col(&b, 1), [4, 4, 2].map(Value::Int).to_vec());
    assert_eq!(col(&b, 0), vec![ts(0), ts(40_000), ts(80_000)]);
    let b = run("select count(*) from r_truck_0 count_window(4, 2)");
    assert_eq!(col(&b, 0), [4, 4, 4, 4].map(Value::Int).to_vec());
    let b =
        run("select tbname, count(*) from readings partition by tbname count_window(3) limit 2");
    assert_eq!(rows(&b).len(), 12);
    // windows over a subquery's output (its first timestamp column)
    let b = run(
        "select _wstart, count(*) from (select ts, status from r_truck_0) state_window(status)",
    );
    assert_eq!(rows(&b).len(), 10);
    let b = run("select _wstart, sum(c) from (select _wstart as w, count(*) as c from readings interval(10s)) session(w, 10s)");
    assert_eq!(rows(&b), vec![vec![ts(0), Value::Int(60)]]);
    // errors
    assert!(err("select count(*) from readings session(velocity, 10s)")
        .to_string()
        .contains("SESSION needs the timestamp column"));
    assert!(err("select count(*) from readings count_window(2, 3)")
        .to_string()
        .contains("COUNT_WINDOW needs 0 < step <= count at 1:31"));
}

/// Non-NULL (ts, velocity) of one truck.
fn velocities(t: usize) -> Vec<(i64, f64)> {
    tables()[t]
        .rows
        .iter()
        .filter_map(|r| Some((r[0].as_i64()?, r[2].as_f64()?)))
        .collect()
}

fn close(a: &Value, b: f64) -> bool {
    a.as_f64().is_some_and(|x| (x - b).abs() < 1e-9)
}

#[test]
fn statistical_aggregates() {
    let b = run("select tbname, spread(velocity), stddev(velocity), elapsed(ts), elapsed(ts, 1s), twa(velocity), percentile(velocity, 50), apercentile(velocity, 90), mode(status), irate(velocity), leastsquares(velocity, 1, 1) from readings partition by tbname order by tbname");
    let r = rows(&b);
    assert_eq!(r.len(), 6);
    for (t, row) in r.iter().enumerate() {
        let v = velocities(t);
        let xs: Vec<f64> = v.iter().map(|p| p.1).collect();
        let n = xs.len() as f64;
        let max = xs.iter().cloned().fold(f64::MIN, f64::max);
        let min = xs.iter().cloned().fold(f64::MAX, f64::min);
        assert!(close(&row[1], max - min), "{row:?}");
        let mean = xs.iter().sum::<f64>() / n;
        let sd = (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt();
        assert!(close(&row[2], sd), "{row:?} {sd}");
        assert_eq!(row[3], Value::Float(90_000.0));
        assert_eq!(row[4], Value::Float(90.0));
        let area: f64 = v
            .windows(2)
            .map(|w| (w[1].0 - w[0].0) as f64 * (w[0].1 + w[1].1) / 2.0)
            .sum();
        let span = (v[v.len() - 1].0 - v[0].0) as f64;
        assert!(close(&row[5], area / span), "{row:?}");
        let mut s = xs.clone();
        s.sort_by(|a, b| a.total_cmp(b));
        let pct = |p: f64| {
            let pos = p * (s.len() - 1) as f64;
            let lo = pos.floor() as usize;
            s[lo] + (s[pos.ceil() as usize] - s[lo]) * (pos - lo as f64)
        };
        assert!(close(&row[6], pct(0.5)), "{row:?}");
        assert!(close(&row[7], pct(0.9)), "{row:?}");
        // status = (t + r) % 3 over 10 rows: the value that occurs 4 times
        assert_eq!(row[8], Value::Int((t % 3) as i64), "{row:?}");
        let (a, z) = (v[v.len() - 2], v[v.len() - 1]);
        let rate = if z.1 < a.1 { z.1 } else { z.1 - a.1 } / ((z.0 - a.0) as f64 / 1000.0);
        assert!(close(&row[9], rate), "{row:?}");
        assert!(
            matches!(&row[10], Value::Str(s) if s.starts_with("{slop:")),
            "{row:?}"
        );
    }
    // spread and stddev merge partials across vnodes (run() compares 1, 2 and 3 vnodes)
    let b = run("select fleet, spread(latitude), stddev(latitude) from readings group by fleet order by fleet");
    assert_eq!(rows(&b).len(), 3);
    // least squares of an exact line: latitude = 10 t + r / 4 on truck 1
    let b = run("select leastsquares(latitude, 0, 1) from r_truck_1");
    assert_eq!(
        rows(&b)[0][0],
        Value::Str("{slop:0.250000, intercept:10.000000}".into())
    );
    // windows + coordinator-only aggregates
    let b = run("select _wstart, percentile(latitude, 100), count(*) from r_truck_2 interval(30s)");
    assert_eq!(col(&b, 1)[0], Value::Float(20.5));
    assert!(err("select percentile(velocity, 101) from r_truck_0")
        .to_string()
        .contains("between 0 and 100"));
    assert!(err("select percentile(velocity) from r_truck_0")
        .to_string()
        .contains("takes 2 arguments at 1:8"));
}

#[test]
fn row_functions_per_partition() {
    // truck 1: latitude = 10 + r / 4, one row every 10 s
    let b = run(
        "select ts, csum(latitude), derivative(latitude, 1s, 0), mavg(latitude, 2) from r_truck_1",
    );
    let r = rows(&b);
    assert_eq!(r.len(), 9);
    assert!(close(&r[0][1], 10.0 + 10.25));
    assert!(close(&r[0][2], 0.025));
    assert!(close(&r[0][3], 10.125));
    let b = run("select ts, status, statecount(status, 'GT', 0), stateduration(status, 'GT', 0, 1s) from r_truck_0");
    assert_eq!(
        col(&b, 2),
        [-1, 1, 2, -1, 1, 2, -1, 1, 2, -1].map(Value::Int).to_vec()
    );
    assert_eq!(
        col(&b, 3),
        [-1, 0, 10, -1, 0, 10, -1, 0, 10, -1]
            .map(Value::Int)
            .to_vec()
    );
    let b = run("select tbname, csum(status) from readings partition by tbname");
    assert_eq!(rows(&b).len(), 60);
    // top / bottom / sample: k rows per partition, in time order
    let b = run("select ts, top(latitude, 2) from readings partition by tbname");
    assert_eq!(rows(&b).len(), 12);
    assert_eq!(rows(&b)[0], vec![ts(80_000), Value::Float(2.0)]);
    let b = run("select ts, bottom(latitude, 3), tbname from r_truck_2");
    assert_eq!(
        col(&b, 1),
        vec![Value::Float(20.0), Value::Float(20.25), Value::Float(20.5)]
    );
    let b = run("select sample(latitude, 4) from readings partition by tbname");
    assert_eq!(rows(&b).len(), 24);
    // unique: each value's first row, NULL one value of its own; across subtables by time
    let b = run("select ts, unique(status) from r_truck_0");
    assert_eq!(
        rows(&b),
        [0, 1, 2]
            .map(|r| vec![ts(r * 10_000), Value::Int(r)])
            .to_vec()
    );
    let b = run("select unique(velocity) from r_truck_0");
    assert_eq!(rows(&b).len(), 9);
    assert_eq!(col(&b, 0)[0], Value::Null);
    let b = run("select ts, unique(status) from readings");
    assert_eq!(col(&b, 0), [0, 1, 2].map(ts).to_vec());
    let b = run("select tbname, unique(status) from readings partition by tbname");
    assert_eq!(rows(&b).len(), 18);
    // tail: the last k rows after skipping `offset`, NULLs kept
    let b = run("select ts, tail(velocity, 3) from r_truck_0");
    assert_eq!(
        col(&b, 1),
        vec![Value::Null, Value::Float(4.5), Value::Float(7.5)]
    );
    let b = run("select tail(velocity, 2, 1) from r_truck_0");
    assert_eq!(col(&b, 0), vec![Value::Null, Value::Float(4.5)]);
    let b = run("select tail(velocity, 5, 8) from r_truck_0");
    assert_eq!(col(&b, 0), vec![Value::Null, Value::Float(3.5)]);
    let b = run("select tbname, tail(status, 2) from readings partition by tbname");
    assert_eq!(rows(&b).len(), 12);
    let b = run("select _wstart, tail(latitude, 1) from r_truck_0 interval(30s)");
    assert_eq!(
        col(&b, 1),
        [0.5, 1.25, 2.0, 2.25].map(Value::Float).to_vec()
    );
    for (sql, msg) in [
        (
            "select tail(velocity, 0) from r_truck_0",
            "k must be a positive integer",
        ),
        (
            "select tail(velocity, 101) from r_truck_0",
            "k must be between 1 and 100",
        ),
        (
            "select tail(velocity, 1, 101) from r_truck_0",
            "offset must be an integer between 0 and 100",
        ),
        (
            "select tail(velocity, 1, -1) from r_truck_0",
            "offset must be an integer between 0 and 100",
        ),
        (
            "select tail(velocity) from r_truck_0",
            "takes 2 to 3 argument(s)",
        ),
        (
            "select unique(velocity, 2) from r_truck_0",
            "takes 1 argument(s)",
        ),
        (
            "select unique(velocity), top(status, 1) from r_truck_0",
            "only one of top/bottom/sample/unique/tail",
        ),
        (
            "select unique(velocity), count(*) from r_truck_0",
            "cannot be combined with aggregates",
        ),
    ] {
        let e = err(sql).to_string();
        assert!(e.contains(msg), "{sql}: {e}");
    }
    assert!(err("select statecount(status, 'XX', 1) from r_truck_0")
        .to_string()
        .contains("the operator must be one of"));
    assert!(err("select mavg(status, 0) from r_truck_0")
        .to_string()
        .contains("positive integer"));
    assert!(
        err("select top(velocity, 2), count(*) from readings interval(10s)")
            .to_string()
            .contains("cannot be combined with aggregates, GROUP BY or windows yet at 1:8")
    );
    // per tumbling window: truck 0 latitude r / 4, windows of 3 rows (the last of 1)
    let b = run("select _wstart, ts, top(latitude, 2) from r_truck_0 interval(30s)");
    assert_eq!(
        col(&b, 2),
        [0.25, 0.5, 1.0, 1.25, 1.75, 2.0, 2.25]
            .map(Value::Float)
            .to_vec()
    );
    assert_eq!(col(&b, 0)[2], ts(30_000));
    let b = run("select tbname, _wstart, histogram(latitude, 'user_input', '[0, 100]', 0) from readings partition by tbname interval(1m)");
    assert_eq!(rows(&b).len(), 12);
    assert!(err("select * from readings where csum(status) > 1")
        .to_string()
        .contains("row function 'csum' is not allowed here at 1:30"));
    assert!(err("select interp(velocity) from readings")
        .to_string()
        .contains("interp() needs RANGE"));
}

#[test]
fn distinct_slimit_case_and_string_functions() {
    let b = run("select distinct fleet from readings order by fleet");
    assert_eq!(
        col(&b, 0),
        ["East", "North", "South"]
            .map(|s| Value::Str(s.into()))
            .to_vec()
    );
    let b = run("select distinct fleet, driver from readings");
    assert_eq!(rows(&b).len(), 6);
    assert!(err("select distinct fleet from readings order by ts")
        .to_string()
        .contains("with DISTINCT, ORDER BY 'ts' must be one of the selected columns at 1:46"));
    let b = run("select distinct status from r_truck_0 limit 2");
    assert_eq!(rows(&b).len(), 2);
    // SLIMIT: partitions 1..3 in partition order
    let b = run("select tbname, count(*) from readings partition by tbname slimit 2 soffset 1");
    assert_eq!(
        col(&b, 0),
        vec![
            Value::Str("r_truck_1".into()),
            Value::Str("r_truck_2".into())
        ]
    );
    let b = run("select tbname, _wstart, count(*) from readings partition by tbname interval(30s) slimit 1 limit 2");
    assert_eq!(rows(&b).len(), 2);
    let b = run("select tbname, ts from readings partition by tbname slimit 1");
    assert_eq!(rows(&b).len(), 10);
    assert!(err("select count(*) from readings slimit 1")
        .to_string()
        .contains("PARTITION BY"));
    // CASE in both forms, with NULL and ELSE
    let b = run("select case when status = 0 then 'idle' when status = 1 then 'slow' else 'fast' end as s, case status when 2 then 20 end from r_truck_0 limit 3");
    assert_eq!(names(&b)[0], "s");
    assert_eq!(
        rows(&b),
        vec![
            vec![Value::Str("idle".into()), Value::Null],
            vec![Value::Str("slow".into()), Value::Null],
            vec![Value::Str("fast".into()), Value::Int(20)],
        ]
    );
    let b = run("select fleet, sum(case when velocity > 10 then 1 else 0 end) from readings group by fleet order by fleet");
    assert_eq!(rows(&b).len(), 3);
    // string functions
    let b = run("select concat(fleet, '-', driver), lower(fleet), upper(driver), length(fleet), substr(fleet, 2, 3), substr(fleet, -2), trim('  x '), concat_ws('/', fleet, name) from r_truck_4");
    assert_eq!(
        rows(&b)[0],
        vec![
            Value::Str("North-Derek".into()),
            Value::Str("north".into()),
            Value::Str("DEREK".into()),
            Value::Int(5),
            Value::Str("ort".into()),
            Value::Str("th".into()),
            Value::Str("x".into()),
            Value::Str("North/truck_4".into()),
        ]
    );
    // truck 5 has a NULL name: CONCAT gives NULL, CONCAT_WS skips it
    let b = run("select concat(name, 'x'), concat_ws('-', fleet, name), sqrt(16), pow(2, 10), greatest(1, 5, 3) from r_truck_5 limit 1");
    assert_eq!(
        rows(&b)[0],
        vec![
            Value::Null,
            Value::Str("East".into()),
            Value::Float(4.0),
            Value::Float(1024.0),
            Value::Int(5)
        ]
    );
    assert!(err("select lower(velocity) from readings")
        .to_string()
        .contains("needs a string argument"));
    // NOW arithmetic in a time range: the data is in 2016
    let b = run("select count(*) from readings where ts > now - 3650d");
    assert_eq!(rows(&b)[0][0], Value::Int(0));
    let b =
        run("select count(*) from readings where ts < now() - 1h and ts >= '2016-01-01 00:00:30'");
    assert_eq!(rows(&b)[0][0], Value::Int(42));
}

#[test]
fn explain_shows_vnode_and_coordinator_parts() {
    let sql = "select fleet, avg(velocity) from readings where ts >= 1451606400000 and fleet = 'South' partition by fleet interval(30s) fill(prev)";
    let plan = plan_query(&query(sql), Some("iot"), &Cat).expect("plan");
    let text: Vec<String> = rows(&explain(&plan))
        .into_iter()
        .map(|r| r[0].to_string())
        .collect();
    let all = text.join("\n");
    assert!(all.contains("Coordinator:"), "{all}");
    assert!(all.contains("Fill PREV"), "{all}");
    assert!(all.contains("Merge partial aggregate"), "{all}");
    assert!(
        all.contains("Vnode fragment 0 on every vgroup of database iot"),
        "{all}"
    );
    assert!(all.contains("Tag filter"), "{all}");
    assert!(
        all.contains("Partial aggregate: 2 group keys; Avg"),
        "{all}"
    );
    // ANALYZE: every coordinator operator reports its rows and time
    let mut results = Vec::new();
    for f in &plan.fragments {
        let b: Vec<Batch> = cluster(2)
            .iter()
            .map(|v| execute_fragment(&f.fragment, v).expect("fragment"))
            .collect();
        results.push((f.id, b));
    }
    let stats = vec![FragmentStats {
        fragment: 0,
        vgroups: 2,
        rows: 8,
        max_time: std::time::Duration::from_millis(1),
    }];
    let b = finish_analyze(&plan, results, &stats).expect("analyze");
    let all: Vec<String> = rows(&b).into_iter().map(|r| r[0].to_string()).collect();
    assert!(all[0].starts_with("Result: 4 rows"), "{all:?}");
    assert!(
        all.iter().any(|l| l.contains("Fill PREV  (rows=4")),
        "{all:?}"
    );
    assert!(
        all.iter()
            .any(|l| l.contains("(vgroups=2 rows=8 slowest=1.000 ms)")),
        "{all:?}"
    );
    match parse("explain analyze select count(*) from readings")
        .expect("parse")
        .remove(0)
    {
        Statement::Explain { analyze, .. } => assert!(analyze),
        s => panic!("{s:?}"),
    }
}

#[test]
fn interp_range_every_fill() {
    let q = |fill: &str| {
        run(&format!("select _irowts, interp(latitude) from r_truck_0 range('2016-01-01 00:00:00', '2016-01-01 00:00:20') every(5s) {fill}"))
    };
    let f = Value::Float;
    let n = Value::Null;
    let b = q("fill(linear)");
    assert_eq!(names(&b), vec!["_irowts", "interp(latitude)"]);
    assert_eq!(
        col(&b, 0),
        (0..5).map(|k| ts(k * 5_000)).collect::<Vec<_>>()
    );
    assert_eq!(
        col(&b, 1),
        vec![f(0.0), f(0.125), f(0.25), f(0.375), f(0.5)]
    );
    assert_eq!(col(&b, 1), col(&q("fill(linear)"), 1), "repeatable");
    assert_eq!(
        col(&q("fill(prev)"), 1),
        vec![f(0.0), f(0.0), f(0.25), f(0.25), f(0.5)]
    );
    assert_eq!(
        col(&q("fill(next)"), 1),
        vec![f(0.0), f(0.25), f(0.25), f(0.5), f(0.5)]
    );
    assert_eq!(
        col(&q("fill(null)"), 1),
        vec![f(0.0), n.clone(), f(0.25), n, f(0.5)]
    );
    assert_eq!(col(&q("fill(value, 9)"), 1)[1], f(9.0));
    assert_eq!(col(&q(""), 1), vec![f(0.0), f(0.25), f(0.5)]);
    // per partition; a single point without EVERY
    let b = run("select _irowts, tbname, interp(latitude) from readings where fleet = 'South' partition by tbname range('2016-01-01 00:00:05') fill(prev)");
    assert_eq!(
        rows(&b),
        vec![
            vec![ts(5_000), Value::Str("r_truck_0".into()), f(0.0)],
            vec![ts(5_000), Value::Str("r_truck_3".into()), f(30.0)],
        ]
    );
    assert!(
        err("select interp(latitude) from r_truck_0 range('2016-01-01', '2016-01-02')")
            .to_string()
            .contains("needs EVERY")
    );
    assert!(
        err("select interp(latitude), fleet from readings range('2016-01-01') fill(prev)")
            .to_string()
            .contains("must be a PARTITION BY key")
    );
}

#[test]
fn histogram_bins_per_partition() {
    // truck 0: latitude = r / 4 for r in 0..10 (0 .. 2.25); bins are (lower, upper]
    let b = run("select histogram(latitude, 'user_input', '[0, 1, 2]', 0) from r_truck_0");
    assert_eq!(
        col(&b, 0),
        vec![
            Value::Str("{\"lower_bin\":0, \"upper_bin\":1, \"count\":4}".into()),
            Value::Str("{\"lower_bin\":1, \"upper_bin\":2, \"count\":4}".into()),
        ]
    );
    let b = run("select tbname, histogram(latitude, 'linear_bin', '{\"start\": 0, \"width\": 1, \"count\": 2, \"infinity\": true}', 1) from readings where fleet = 'South' partition by tbname");
    let r = rows(&b);
    assert_eq!(r.len(), 8);
    assert_eq!(
        r[0][1],
        Value::Str("{\"lower_bin\":-inf, \"upper_bin\":0, \"count\":0.1}".into())
    );
    assert_eq!(
        r[3][1],
        Value::Str("{\"lower_bin\":2, \"upper_bin\":inf, \"count\":0.1}".into())
    );
    assert_eq!(r[4][0], Value::Str("r_truck_3".into()));
    let b = run("select histogram(latitude, 'log_bin', '{\"start\": 1, \"factor\": 2, \"count\": 1, \"infinity\": false}', 0) from r_truck_0");
    assert_eq!(
        col(&b, 0),
        vec![Value::Str(
            "{\"lower_bin\":1, \"upper_bin\":2, \"count\":4}".into()
        )]
    );
    assert!(
        err("select histogram(latitude, 'user_input', '[2, 1]', 0) from r_truck_0")
            .to_string()
            .contains("increasing")
    );
    assert!(
        err("select histogram(latitude, 'nope', '[1, 2]', 0) from r_truck_0")
            .to_string()
            .contains("unknown bin type 'nope'")
    );
}

#[test]
fn window_sizes_are_bounded() {
    assert!(
        err("select count(*) from readings interval(1d) sliding(1a)")
            .to_string()
            .contains("INTERVAL / SLIDING may be at most 10000")
    );
    assert!(err("select count(*) from readings count_window(100000, 1)")
        .to_string()
        .contains("at most 10000"));
    let e = err("select _wstart, count(*) from readings where ts >= 0 and ts < 1451606500000 interval(1a) fill(null)");
    assert!(
        e.to_string().contains("FILL would produce more than"),
        "{e}"
    );
}

#[test]
fn parse_insert_select() {
    match parse("insert into r_a using rollup tags ('a') (ts, c) select _wstart, count(*) from readings interval(1m)")
        .expect("parse")
        .remove(0)
    {
        Statement::InsertSelect { target, query } => {
            assert_eq!(target.table.name, "r_a");
            assert!(target.using.is_some());
            assert_eq!(target.columns, Some(vec!["ts".to_string(), "c".to_string()]));
            assert!(query.window.is_some());
        }
        s => panic!("{s:?}"),
    }
    assert!(matches!(
        parse("insert into t (select ts from x)")
            .expect("parse")
            .remove(0),
        Statement::InsertSelect { .. }
    ));
    assert!(parse("insert into t (ts) values (1)").is_ok());
}

#[test]
fn sliding_panes_on_vnodes_match_rows_on_the_coordinator() {
    let a = "select _wstart, _wend, tbname, count(*), sum(latitude), min(velocity), first(status) from readings partition by tbname interval(30s) sliding(10s)";
    let b = "select _wstart, _wend, tbname, count(*), sum(latitude), min(velocity), first(status), percentile(latitude, 50) from readings partition by tbname interval(30s) sliding(10s)";
    let pa = format!("{:?}", plan(a).root);
    assert!(pa.contains("SlidePanes"), "{pa}");
    assert!(!pa.contains("Window {"), "{pa}");
    let pb = format!("{:?}", plan(b).root);
    assert!(
        pb.contains("Window {") && !pb.contains("SlidePanes"),
        "{pb}"
    );
    let ra = rows(&run(a));
    let rb: Vec<Vec<Value>> = rows(&run(b)).into_iter().map(|r| r[..7].to_vec()).collect();
    assert_eq!(ra, rb);
    // 6 trucks x (10 rows at 10 s, 30 s windows every 10 s: 12 windows)
    assert_eq!(ra.len(), 72);
    // over a subquery the rows are assigned on the coordinator too
    let c = "select _wstart, count(*) from (select ts, latitude from r_truck_0) interval(30s) sliding(10s)";
    assert_eq!(
        col(&run(c), 1),
        [1, 2, 3, 3, 3, 3, 3, 3, 3, 3, 2, 1]
            .map(Value::Int)
            .to_vec()
    );
}

#[test]
fn rowts_and_selected_row_columns() {
    // _rowts next to a single selector is the selected row's timestamp
    let b = run("select _rowts, max(latitude), status from r_truck_2");
    assert_eq!(
        rows(&b),
        vec![vec![ts(90_002), Value::Float(22.25), Value::Int(2)]]
    );
    let b = run("select _rowts, latitude from r_truck_2 where latitude > 22");
    assert_eq!(col(&b, 0), vec![ts(90_002)]);
}

#[test]
fn time_and_math_functions() {
    let b = run("select timetruncate(ts, 1m), timediff(ts, '2016-01-01 00:00:00'), timediff(ts, '2016-01-01 00:00:00', 1s), to_iso8601(ts), to_unixtimestamp('2016-01-01 00:00:10'), replace(fleet, 'th', 'TH'), sign(-2), exp(0), ln(1) from r_truck_0 where ts = 1451606470000");
    assert_eq!(
        rows(&b)[0],
        vec![
            ts(60_000),
            Value::Int(70_000),
            Value::Int(70),
            Value::Str("2016-01-01T00:01:10.000+00:00".into()),
            Value::Int(1451606410000),
            Value::Str("SouTH".into()),
            Value::Int(-1),
            Value::Float(1.0),
            Value::Float(0.0),
        ]
    );
    // group by a truncated timestamp
    let b = run("select timetruncate(ts, 1m) as m, count(*) from readings group by timetruncate(ts, 1m) order by m");
    assert_eq!(col(&b, 1), vec![Value::Int(36), Value::Int(24)]);
    assert!(err("select timetruncate(fleet, 1m) from readings")
        .to_string()
        .contains("needs a timestamp"));
}

#[test]
fn last_row_over_many_subtables_matches_a_row_scan() {
    // The batched LAST_ROW path (all subtables' last rows at once) must pick, per subtable, the
    // row a plain scan ends with, including when the newest row fails the filter or the range.
    let cut = T0 + 50_000;
    for cond in [
        String::new(),
        "WHERE velocity <= 5".to_string(),
        // the first trucks' last rows qualify, later ones' not: the cache is read for all
        "WHERE velocity > 5".to_string(),
        format!("WHERE ts <= {cut}"),
        "WHERE velocity > 3 AND fleet = 'South'".to_string(),
        format!("WHERE velocity IS NULL OR ts < {cut}"),
    ] {
        let fast = run(&format!(
            "SELECT last_row(ts), tbname, last_row(velocity) FROM readings {cond} PARTITION BY tbname ORDER BY tbname"
        ));
        let all = run(&format!(
            "SELECT ts, tbname, velocity FROM readings {cond} ORDER BY tbname, ts"
        ));
        let mut want: Vec<Vec<Value>> = Vec::new();
        for r in rows(&all) {
            match want.last_mut() {
                Some(last) if last[1] == r[1] => *last = r.clone(),
                _ => want.push(r.clone()),
            }
        }
        assert!(!want.is_empty(), "{cond}: no rows");
        assert_eq!(rows(&fast), want, "{cond}");
    }
}

/// One vnode holding one subtable of `rows` rows (velocity = row index).
fn big_vnode(rows: i64) -> Vnode {
    let mut t = tables().remove(0);
    t.rows = (0..rows)
        .map(|r| {
            vec![
                Value::Timestamp(T0 + r),
                Value::Float(1.0),
                Value::Float(r as f64),
                Value::Int(r % 3),
            ]
        })
        .collect();
    Vnode {
        tables: vec![t],
        sma_block: None,
        columnar: true,
    }
}

#[test]
fn long_scans_are_processed_in_chunks_that_stop_when_cancelled() {
    use std::sync::atomic::AtomicBool;
    const ROWS: i64 = 50_000; // several CANCEL_CHECK_ROWS chunks
    let v = big_vnode(ROWS);
    let q = query(
        "SELECT COUNT(*), SUM(velocity), MIN(velocity), MAX(velocity) FROM readings \
         WHERE velocity >= 0 INTERVAL(10s)",
    );
    let plan = plan_query(&q, Some("iot"), &Cat).unwrap();
    let frag = &plan.fragments[0].fragment;
    // Chunked processing gives the exact answer...
    let partial = crate::exec::execute_fragment_until(frag, &v, &AtomicBool::new(false)).unwrap();
    let out = finish(&plan, vec![(plan.fragments[0].id, vec![partial])]).unwrap();
    assert_eq!(out.num_rows(), 5);
    let (mut count, mut sum) = (0, 0.0);
    for r in 0..out.num_rows() {
        let row = out.row(r);
        count += row[0].as_i64().unwrap();
        sum += row[1].as_f64().unwrap();
        let (lo, hi) = (r as f64 * 10_000.0, r as f64 * 10_000.0 + 9_999.0);
        assert_eq!(row[2], Value::Float(lo), "window {r}");
        assert_eq!(row[3], Value::Float(hi), "window {r}");
    }
    assert_eq!(count, ROWS);
    assert_eq!(sum, (ROWS * (ROWS - 1) / 2) as f64);
    // ...and a cancelled fragment stops with an error instead of finishing.
    let e = crate::exec::execute_fragment_until(frag, &v, &AtomicBool::new(true)).unwrap_err();
    assert!(e.to_string().contains("fragment cancelled"), "{e}");
}

#[test]
fn aggregates_over_no_rows_give_one_row() {
    // As TDengine 3: COUNT of nothing is 0 (one row), the other aggregates NULL, at the top
    // level and over an empty subquery; with GROUP BY/PARTITION BY there are no groups.
    for sql in [
        "select count(*), avg(velocity), max(velocity) from readings where ts < 0",
        "select count(*), avg(m), max(m) from (select tbname, avg(velocity) as m from readings partition by tbname) where m > 1000000",
    ] {
        let b = run(sql);
        assert_eq!(
            rows(&b),
            vec![vec![Value::Int(0), Value::Null, Value::Null]],
            "{sql}"
        );
    }
    let b = run("select fleet, count(*) from readings where ts < 0 group by fleet");
    assert!(rows(&b).is_empty());
}

/// Runs `sql` through the streaming path: each vnode's fragment result in batches (as the
/// data nodes send them), fed in vnode order through the plan's [`RowPipeline`].
fn run_streaming(sql: &str, vnodes: &[Vnode]) -> Option<Batch> {
    use std::sync::atomic::AtomicBool;
    let q = query(sql);
    let plan = plan_query(&q, Some("iot"), &Cat).unwrap();
    let budget = MemoryBudget::unlimited();
    let mut p = crate::stream::pipeline(&plan, &budget).unwrap()?;
    let frag = &plan.fragments[0].fragment;
    let mut out = Batch::empty(p.fields().to_vec());
    'vnodes: for v in vnodes {
        if let FragmentTarget::Table(t) = &plan.fragments[0].target {
            if v.table(t).is_none() {
                continue;
            }
        }
        let mut batches = Vec::new();
        crate::exec::execute_fragment_stream(frag, v, &AtomicBool::new(false), &budget, &mut |b| {
            assert!(b.num_rows() <= crate::STREAM_BATCH_ROWS);
            batches.push(b);
            Ok(())
        })
        .unwrap();
        for b in batches {
            if let Some(o) = p.push(b).unwrap() {
                out.append(&o);
            }
            if p.done() {
                break 'vnodes;
            }
        }
    }
    for o in p.finish().unwrap() {
        out.append(&o);
    }
    Some(out)
}

#[test]
fn streamed_results_equal_collected_ones() {
    for sql in [
        "select * from readings",
        "select ts, velocity * 2 as v2, name from readings where velocity > 5",
        "select * from readings limit 7 offset 3",
        "select ts, velocity from readings where status = 1 limit 4",
        "select ts, velocity from readings order by velocity desc, ts limit 5 offset 2",
        "select ts, latitude from r_truck_1 order by ts desc limit 3",
        "select * from (select ts, velocity from readings where velocity > 1) where velocity < 10",
    ] {
        for k in [1, 3] {
            let vnodes = cluster(k);
            let want = run_on(sql, &vnodes).unwrap();
            let got = run_streaming(sql, &vnodes).unwrap_or_else(|| panic!("{sql}: not streamed"));
            assert_eq!(got.fields, want.fields, "{sql}");
            assert_eq!(rows(&got), rows(&want), "{sql} on {k} vnodes");
        }
    }
    // Plans that need the whole result do not stream.
    for sql in [
        "select count(*) from readings",
        "select * from readings order by velocity",
        "select distinct fleet from readings",
        "select diff(velocity) from r_truck_1",
    ] {
        assert!(run_streaming(sql, &cluster(2)).is_none(), "{sql}");
    }
}

#[test]
fn a_large_projection_streams_in_bounded_batches_and_stops_at_its_limit() {
    use std::sync::atomic::AtomicBool;
    const ROWS: i64 = 50_000;
    let v = big_vnode(ROWS);
    let plan = plan_query(
        &query("select ts, velocity from readings"),
        Some("iot"),
        &Cat,
    )
    .unwrap();
    let budget = MemoryBudget::new(4 << 20, "query_memory_max_bytes");
    let (mut batches, mut total) = (0, 0);
    crate::exec::execute_fragment_stream(
        &plan.fragments[0].fragment,
        &v,
        &AtomicBool::new(false),
        &budget,
        &mut |b| {
            assert!(b.num_rows() <= crate::STREAM_BATCH_ROWS);
            batches += 1;
            total += b.num_rows();
            Ok(())
        },
    )
    .unwrap();
    assert_eq!(total as i64, ROWS);
    assert!(
        batches >= ROWS as usize / crate::STREAM_BATCH_ROWS,
        "{batches}"
    );
    // Collecting the same result holds it all: past a small budget, a clear error.
    let small = MemoryBudget::new(100_000, "query_memory_max_bytes");
    let e = crate::exec::execute_fragment_with(
        &plan.fragments[0].fragment,
        &v,
        &AtomicBool::new(false),
        &small,
    )
    .unwrap_err();
    assert_eq!(e.status_code(), StatusCode::ResourceExhausted);
    assert!(
        e.to_string().starts_with("query memory limit exceeded: "),
        "{e}"
    );
    // A sink that fails (its receiver went away) stops the scan.
    let mut calls = 0;
    let e = crate::exec::execute_fragment_stream(
        &plan.fragments[0].fragment,
        &v,
        &AtomicBool::new(false),
        &budget,
        &mut |_| {
            calls += 1;
            Err(SqlError::Execution("receiver gone".into()))
        },
    )
    .unwrap_err();
    assert_eq!(calls, 1);
    assert_eq!(e.to_string(), "receiver gone");
}

#[test]
fn group_state_and_sorts_past_the_memory_limit_fail_clearly() {
    use std::sync::atomic::AtomicBool;
    let v = big_vnode(50_000);
    // Every row is its own group on the vnode.
    let plan = plan_query(
        &query("select ts, count(*) from readings group by ts"),
        Some("iot"),
        &Cat,
    )
    .unwrap();
    // (The scan of the subtable, 800 KB, fits; its 50,000 groups do not.)
    let budget = MemoryBudget::new(1_500_000, "query_memory_max_bytes");
    let e = crate::exec::execute_fragment_with(
        &plan.fragments[0].fragment,
        &v,
        &AtomicBool::new(false),
        &budget,
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "query memory limit exceeded: GROUP BY state needs more than 1500000 bytes \
         (query_memory_max_bytes); add a filter or raise the limit"
    );
    assert_eq!(budget.used_bytes(), 0, "everything is given back");
    // The same fragment within a large budget; then the coordinator's sort is refused.
    let plan = plan_query(
        &query("select ts, velocity from readings order by velocity desc"),
        Some("iot"),
        &Cat,
    )
    .unwrap();
    let partial = crate::exec::execute_fragment_until(
        &plan.fragments[0].fragment,
        &v,
        &AtomicBool::new(false),
    )
    .unwrap();
    let e = crate::finish_with(
        &plan,
        vec![(plan.fragments[0].id, vec![partial.clone()])],
        &MemoryBudget::new(1_000_000, "query_memory_max_bytes"),
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("query memory limit exceeded: the sort buffer needs more"),
        "{e}"
    );
    let big = MemoryBudget::new(64 << 20, "query_memory_max_bytes");
    let out = crate::finish_with(&plan, vec![(plan.fragments[0].id, vec![partial])], &big).unwrap();
    assert_eq!(out.num_rows(), 50_000);
    assert!(big.peak_bytes() > 1_000_000, "{}", big.peak_bytes());
    assert_eq!(big.used_bytes(), 0);
}

/// Subtables with enough rows each (600) that partial aggregations take the path that
/// evaluates tag and name keys once per subtable.
fn long_cluster(k: usize) -> Vec<Vnode> {
    let mut v = cluster(k);
    for vn in &mut v {
        for t in &mut vn.tables {
            let ti = t.meta.uid.0 as i64;
            t.rows = (0..600i64)
                .map(|r| {
                    let vel = if (ti + r) % 11 == 0 {
                        Value::Null
                    } else {
                        Value::Float(((ti * 13 + r * 7) % 40) as f64 - 0.5)
                    };
                    vec![
                        Value::Timestamp(T0 + r * 1_000 + ti),
                        Value::Float(r as f64 / 8.0),
                        vel,
                        Value::Int((ti + r) % 4),
                    ]
                })
                .collect();
        }
    }
    v
}

#[test]
fn constant_tag_keys_give_the_answers_of_per_row_keys() {
    // The second form's row filter reads a tag (built per row then); both must agree, with NULL tags (truck 5 has no name) as keys too.
    // Tags read per row (an aggregate over a tag, a tag in the filter) are built as columns.
    for (fast, slow) in [
        (
            "SELECT fleet, avg(velocity), avg(nominal_fuel_consumption), max(latitude) FROM readings WHERE velocity > 1 GROUP BY fleet",
            "SELECT fleet, avg(velocity), avg(nominal_fuel_consumption), max(latitude) FROM readings WHERE velocity > 1 OR tbname = 'nothing' GROUP BY fleet",
        ),
        (
            "SELECT _wstart, fleet, tbname, name, avg(velocity), count(*), max(status), last(velocity) FROM readings WHERE velocity > 3 PARTITION BY fleet, tbname, name INTERVAL(1m)",
            "SELECT _wstart, fleet, tbname, name, avg(velocity), count(*), max(status), last(velocity) FROM readings WHERE velocity > 3 OR fleet = 'nowhere' PARTITION BY fleet, tbname, name INTERVAL(1m)",
        ),
        (
            "SELECT fleet, driver, sum(velocity), spread(latitude), count(velocity) FROM readings WHERE status < 3 GROUP BY fleet, driver",
            "SELECT fleet, driver, sum(velocity), spread(latitude), count(velocity) FROM readings WHERE status < 3 OR driver = 'nobody' GROUP BY fleet, driver",
        ),
        (
            "SELECT name, status, avg(latitude) FROM readings WHERE velocity IS NOT NULL GROUP BY name, status",
            "SELECT name, status, avg(latitude) FROM readings WHERE velocity IS NOT NULL OR name = 'nobody' GROUP BY name, status",
        ),
    ] {
        for k in [1, 3] {
            let v = long_cluster(k);
            let runs = || crate::exec::CONSTANT_KEY_RUNS.with(|c| c.get());
            let before = runs();
            let mut a = rows(&run_on(fast, &v).unwrap_or_else(|e| panic!("{fast}: {e}")));
            let mid = runs();
            let mut b = rows(&run_on(slow, &v).unwrap_or_else(|e| panic!("{slow}: {e}")));
            assert!(mid > before, "{fast}: keys were not evaluated once per subtable");
            a.sort_by(|x, y| cmp_rows(x, y));
            b.sort_by(|x, y| cmp_rows(x, y));
            assert!(a.len() >= 3, "{fast}: only {} rows", a.len());
            assert_eq!(a, b, "{fast} ({k} vnodes)");
        }
    }
}

#[test]
fn last_row_of_one_subtable_with_a_filter_matches_a_row_scan() {
    // One subtable whose newest row fails the filter or range: the search for the latest row
    // that passes (shared with the many-subtable path) must find what a scan ends with.
    let cut = T0 + 50_000;
    let mut found = 0;
    for t in 0..TRUCKS {
        for cond in [
            "WHERE velocity <= 5".to_string(),
            format!("WHERE ts <= {cut}"),
            "WHERE velocity IS NULL".to_string(),
            format!("WHERE velocity > 3 AND ts < {cut}"),
        ] {
            let fast = run(&format!(
                "SELECT last_row(ts), last_row(velocity) FROM r_truck_{t} {cond}"
            ));
            let all = run(&format!(
                "SELECT ts, velocity FROM r_truck_{t} {cond} ORDER BY ts"
            ));
            let want: Vec<Vec<Value>> = rows(&all).last().cloned().into_iter().collect();
            found += want.len();
            assert_eq!(rows(&fast), want, "r_truck_{t} {cond}");
        }
    }
    assert!(
        found > TRUCKS,
        "only {found} subtables had a qualifying row"
    );
}

#[test]
fn an_exact_tag_index_match_drops_only_its_own_conjunct() {
    // `run` checks the columnar layout (tag index, conjunct dropped when exact) against the
    // catalog path; the counts check the answers themselves. Trucks 0..6: fleet t % 3,
    // driver t % 2, nominal 15/19/12 by t % 3, truck 5's name NULL.
    for (sql, trucks) in [
        ("fleet = 'South'", 2),
        ("fleet = 'East' AND name IS NOT NULL", 1),
        ("name IS NOT NULL AND fleet IN ('South', 'East')", 3),
        ("fleet IN ('South', 'North') AND driver = 'Andy'", 2),
        // the second equality on the same tag is still tested
        ("fleet = 'South' AND fleet = 'North'", 0),
        ("fleet IN ('South', NULL)", 2),
        ("fleet = 'Nowhere' AND driver = 'Andy'", 0),
        // a literal the tag's type would change is compared as written
        ("nominal_fuel_consumption = 15", 2),
        ("nominal_fuel_consumption = 15.0 AND driver = 'Derek'", 1),
        ("nominal_fuel_consumption IN (15.5, 19)", 2),
        ("NOT (fleet = 'South')", 4),
        ("fleet = 'South' OR driver = 'Andy'", 4),
        ("(fleet = 'South' AND driver = 'Derek') OR name IS NULL", 2),
    ] {
        let q = format!("SELECT COUNT(*) FROM (SELECT LAST_ROW(ts) FROM readings WHERE {sql} PARTITION BY tbname)");
        let b = run(&q);
        assert_eq!(rows(&b), vec![vec![Value::Int(trucks)]], "{sql}");
        let q = format!("SELECT COUNT(*) FROM readings WHERE {sql}");
        let b = run(&q);
        assert_eq!(rows(&b), vec![vec![Value::Int(trucks * ROWS)]], "{sql}");
    }
}

#[test]
fn group_by_without_aggregates_lists_each_group_once() {
    let b = run("SELECT fleet FROM readings GROUP BY fleet ORDER BY fleet");
    assert_eq!(
        rows(&b),
        vec![
            vec![Value::Str("East".into())],
            vec![Value::Str("North".into())],
            vec![Value::Str("South".into())],
        ]
    );
}

#[test]
fn select_tags_is_one_row_per_subtable_from_its_tags() {
    let s = |x: &str| Value::Str(x.to_string());
    let b = run("select tags tbname, fleet from readings order by tbname");
    assert_eq!(names(&b), ["tbname", "fleet"]);
    assert_eq!(
        rows(&b),
        (0..TRUCKS)
            .map(|t| vec![s(&format!("r_truck_{t}")), s(FLEETS[t % 3])])
            .collect::<Vec<_>>()
    );
    let b = run("select tags tbname as t, upper(driver) from readings where fleet = 'South' and tbname != 'r_truck_0'");
    assert_eq!(rows(&b), vec![vec![s("r_truck_3"), s("ANDY")]]);
    let b = run("select distinct tags fleet from readings order by fleet desc");
    assert_eq!(col(&b, 0), vec![s("South"), s("North"), s("East")]);
    let b = run("select tags name, fleet from r_truck_5");
    assert_eq!(rows(&b), vec![vec![Value::Null, s("East")]]);
    let b = run("select tags tbname from readings order by nominal_fuel_consumption, tbname desc limit 2 offset 1");
    assert_eq!(col(&b, 0), vec![s("r_truck_2"), s("r_truck_3")]);
    assert_eq!(names(&b), ["tbname"]);
    let b = run(
        "select count(*) from (select tags tbname from readings where fleet in ('North', 'East'))",
    );
    assert_eq!(col(&b, 0), vec![Value::Int(4)]);
    for (sql, msg) in [
        (
            "select tags velocity from readings",
            "SELECT TAGS selects tags and tbname only, not 'velocity' at 1:13",
        ),
        (
            "select tags count(*) from readings",
            "not 'count()' at 1:13",
        ),
        ("select tags * from readings", "not * at 1:13"),
        (
            "select tags fleet from readings where velocity > 1",
            "filters on tags and tbname only, not 'velocity' at 1:39",
        ),
        ("select tags fleet from readings where ts > 0", "not 'ts'"),
        (
            "select tags fleet from readings interval(1m)",
            "cannot have a window",
        ),
        (
            "select tags fleet from readings partition by fleet",
            "cannot have PARTITION BY",
        ),
        (
            "select tags fleet from (select fleet from readings)",
            "reads a STABLE or a subtable",
        ),
        (
            "select tags fleet from readings order by velocity",
            "orders by tags and tbname only",
        ),
    ] {
        let e = err(sql).to_string();
        assert!(e.contains(msg), "{sql}: {e}");
    }
}

#[test]
fn hyperloglog_counts_distinct_values_across_vnodes() {
    // velocity: ((7t + 3r) mod 20) + 0.5 over 6 trucks x 10 rows, NULL every 7th
    let mut exact = std::collections::BTreeSet::new();
    for t in 0..TRUCKS as i64 {
        for r in 0..ROWS {
            if (t + r) % 7 != 0 {
                exact.insert((t * 7 + r * 3) % 20);
            }
        }
    }
    let b =
        run("select hyperloglog(velocity), hyperloglog(status), hyperloglog(tbname) from readings");
    assert_eq!(
        rows(&b),
        vec![vec![
            Value::Int(exact.len() as i64),
            Value::Int(3),
            Value::Int(TRUCKS as i64)
        ]]
    );
    let b = run("select fleet, hyperloglog(tbname), hyperloglog(name) from readings group by fleet order by fleet");
    assert_eq!(
        col(&b, 1),
        vec![Value::Int(2), Value::Int(2), Value::Int(2)]
    );
    // truck 5's name is NULL: East counts one name
    assert_eq!(
        col(&b, 2),
        vec![Value::Int(1), Value::Int(2), Value::Int(2)]
    );
    let b = run("select _wstart, hyperloglog(status) from r_truck_0 interval(20s)");
    assert_eq!(col(&b, 1), [2, 2, 2, 2, 2].map(Value::Int).to_vec());
    let b = run("select hyperloglog(status) from readings where ts < 0");
    assert_eq!(rows(&b), vec![vec![Value::Int(0)]]);
}

#[test]
fn count_distinct_counts_each_value_once() {
    // status is (t + r) mod 3: three values in all, in every truck and every fleet
    let b = run("select count(distinct status), count(status), count(distinct fleet), count(distinct velocity) from readings");
    assert_eq!(names(&b)[0], "count(distinct status)");
    let mut exact = std::collections::BTreeSet::new();
    for t in 0..TRUCKS as i64 {
        for r in 0..ROWS {
            if (t + r) % 7 != 0 {
                exact.insert((t * 7 + r * 3) % 20);
            }
        }
    }
    assert_eq!(
        rows(&b),
        vec![vec![
            Value::Int(3),
            Value::Int(TRUCKS as i64 * ROWS),
            Value::Int(3),
            Value::Int(exact.len() as i64)
        ]]
    );
    let b = run("select fleet, count(distinct tbname) from readings group by fleet order by fleet");
    assert_eq!(col(&b, 1), [2, 2, 2].map(Value::Int).to_vec());
    let b = run("select count(distinct status) from readings where ts < 0");
    assert_eq!(rows(&b), vec![vec![Value::Int(0)]]);
    for (sql, msg) in [
        (
            "select sum(distinct status) from readings",
            "COUNT(DISTINCT expr) only, not in 'sum(distinct status)' at 1:8",
        ),
        ("select count(distinct *) from readings", "syntax error"),
        (
            "select upper(distinct fleet) from readings",
            "DISTINCT is not allowed inside 'upper()'",
        ),
    ] {
        let e = err(sql).to_string();
        assert!(e.contains(msg), "{sql}: {e}");
    }
}

#[test]
fn union_all_concatenates_and_union_removes_duplicates() {
    let s = |x: &str| Value::Str(x.to_string());
    let b = run("select tbname, status from r_truck_0 where ts < 1451606420000 union all select tbname, status from r_truck_1 where ts < 1451606420000 order by tbname, status");
    assert_eq!(names(&b), ["tbname", "status"]);
    assert_eq!(
        rows(&b),
        vec![
            vec![s("r_truck_0"), Value::Int(0)],
            vec![s("r_truck_0"), Value::Int(1)],
            vec![s("r_truck_1"), Value::Int(1)],
            vec![s("r_truck_1"), Value::Int(2)],
        ]
    );
    // UNION without ALL: distinct rows of the whole
    let b = run("select status from r_truck_0 union select status from r_truck_1 order by status");
    assert_eq!(col(&b, 0), [0, 1, 2].map(Value::Int).to_vec());
    // (a UNION b) UNION ALL c keeps c's duplicates
    let b = run("select fleet from r_truck_0 union select fleet from r_truck_3 union all select fleet from r_truck_3");
    assert_eq!(rows(&b).len(), 1 + ROWS as usize);
    let b = run("select distinct fleet from r_truck_0 union select distinct fleet from r_truck_3 union all select distinct fleet from r_truck_3");
    assert_eq!(col(&b, 0), vec![s("South"), s("South")]);
    // aggregates per member, types brought together (BIGINT and DOUBLE give DOUBLE), LIMIT
    // applies to the whole, a parenthesized member keeps its own
    let b = run("select count(*) as n from readings union all select avg(latitude) from r_truck_1 order by n desc limit 1");
    assert_eq!(b.fields[0].data_type, DataType::Double);
    assert_eq!(rows(&b), vec![vec![Value::Float(60.0)]]);
    let b = run("(select ts from r_truck_0 order by ts limit 1) union all (select ts from r_truck_1 order by ts desc limit 1)");
    assert_eq!(col(&b, 0), vec![ts(0), ts(90_001)]);
    // a union in FROM, filtered and aggregated outside
    let b = run("select count(*) from (select tbname from r_truck_0 union all select tbname from r_truck_1) where tbname = 'r_truck_1'");
    assert_eq!(col(&b, 0), vec![Value::Int(ROWS)]);
    for (sql, msg) in [
        (
            "select ts, status from r_truck_0 union all select ts from r_truck_1",
            "the first has 2, SELECT 2 has 1 (UNION at 1:34)",
        ),
        (
            "select ts from r_truck_0 union all select velocty from r_truck_1",
            "unknown column 'velocty'",
        ),
        ("select ts from r_truck_0 union", "syntax error"),
    ] {
        let e = err(sql).to_string();
        assert!(e.contains(msg), "{sql}: {e}");
    }
}

#[test]
fn parse_alter_table_set_tag() {
    let s = parse("ALTER TABLE iot.truck_1 SET TAG driver = 'Ann', fleet='North' , nominal_fuel_consumption = -1.5, name = NULL").unwrap();
    let Statement::AlterTableSetTags {
        table,
        table_pos,
        tags,
    } = &s[0]
    else {
        panic!("{s:?}")
    };
    assert_eq!(*table, ObjectRef::new(Some("iot"), "truck_1"));
    assert_eq!(table_pos.col, 13);
    let got: Vec<(&str, &InsertValue)> = tags.iter().map(|t| (t.tag.as_str(), &t.value)).collect();
    let want = lits([
        Value::Str("Ann".into()),
        Value::Str("North".into()),
        Value::Float(-1.5),
        Value::Null,
    ]);
    assert_eq!(
        got,
        [
            ("driver", &want[0]),
            ("fleet", &want[1]),
            ("nominal_fuel_consumption", &want[2]),
            ("name", &want[3]),
        ]
    );
    assert_eq!(tags[1].pos.col, 49);
    // The one-tag form, and a tag named like a keyword.
    let s = parse("alter table t set tag `tag` = true").unwrap();
    assert!(matches!(&s[0], Statement::AlterTableSetTags { tags, .. }
        if tags.len() == 1 && tags[0].tag == "tag" && tags[0].value == InsertValue::Value(Value::Bool(true))));

    for (sql, want) in [
        (
            "ALTER TABLE t SET TAG",
            "syntax error at 1:22: expected a tag name, found end of input",
        ),
        (
            "ALTER TABLE t SET TAG driver",
            "syntax error at 1:29: expected '=', found end of input",
        ),
        (
            "ALTER TABLE t SET TAG driver =",
            "syntax error at 1:31: expected a value",
        ),
        (
            "ALTER TABLE t SET TAG driver = 'a',",
            "syntax error at 1:36: expected a tag name",
        ),
        (
            "ALTER TABLE t SET TAG driver = 'a', DRIVER = 'b'",
            "syntax error at 1:37: tag 'driver' is set twice",
        ),
        (
            "ALTER TABLE t SET driver = 'a'",
            "syntax error at 1:19: expected TAG after SET",
        ),
        (
            "ALTER TABLE t ADD COLUMN c INT",
            "syntax error at 1:15: expected SET TAG",
        ),
        (
            "ALTER TABLE SET TAG a = 1",
            "syntax error at 1:17: expected SET TAG",
        ),
        (
            "ALTER TABLE t SET TAG a = 1 b = 2",
            "syntax error at 1:29: expected ';' or end of input",
        ),
        (
            "ALTER VIEW v",
            "syntax error at 1:7: expected DATABASE, STABLE, TABLE or USER",
        ),
    ] {
        let e = parse(sql).unwrap_err().to_string();
        assert!(e.starts_with(want), "{sql}: {e}");
    }
}

#[test]
fn bind_set_tags_coerces_like_create() {
    let s = readings_schema();
    let tags = |sql: &str| match parse(sql).unwrap().remove(0) {
        Statement::AlterTableSetTags { tags, .. } => tags,
        o => panic!("{o:?}"),
    };
    assert_eq!(
        bind_set_tags(
            "t",
            &tags("alter table t set tag DRIVER = 'x', nominal_fuel_consumption = 2"),
            &s,
            Precision::Millis
        )
        .unwrap(),
        [
            ("driver".to_string(), Value::Str("x".into())),
            ("nominal_fuel_consumption".to_string(), Value::Float(2.0)),
        ]
    );
    let e = bind_set_tags(
        "t",
        &tags("alter table t set tag drivr = 'x'"),
        &s,
        Precision::Millis,
    )
    .unwrap_err();
    assert_eq!(e.status_code(), StatusCode::ColumnNotFound);
    assert_eq!(
        e.to_string(),
        "unknown tag 'drivr' in STABLE readings (of table t) at 1:23"
    );
    let e = bind_set_tags(
        "t",
        &tags("alter table t set tag nominal_fuel_consumption = 'lots'"),
        &s,
        Precision::Millis,
    )
    .unwrap_err();
    assert_eq!(e.status_code(), StatusCode::TypeMismatch, "{e}");
    let e = bind_set_tags(
        "t",
        &tags(&format!(
            "alter table t set tag driver = '{}'",
            "x".repeat(31)
        )),
        &s,
        Precision::Millis,
    )
    .unwrap_err();
    assert_eq!(e.status_code(), StatusCode::TypeMismatch, "{e}");
}

/// Many subtables of a few rows each (100,000 trucks over minutes): an aggregation over rows
/// reads them many at a time, one storage call for a run of them, and answers as reading
/// them one by one does.
#[test]
fn an_aggregation_over_rows_reads_small_subtables_many_at_a_time() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    struct Counting {
        inner: Vnode,
        calls: AtomicUsize,
        widest: AtomicUsize,
    }
    impl ScanSource for Counting {
        fn schema(&self, stable: &str) -> Option<std::sync::Arc<StableSchema>> {
            self.inner.schema(stable)
        }
        fn tables(&self, stable: &str) -> Vec<std::sync::Arc<TableMeta>> {
            self.inner.tables(stable)
        }
        fn table(&self, name: &str) -> Option<std::sync::Arc<TableMeta>> {
            self.inner.table(name)
        }
        fn scan(
            &self,
            uid: TableUid,
            lo: i64,
            hi: i64,
            columns: &[usize],
        ) -> Result<Vec<Column>, String> {
            self.inner.scan(uid, lo, hi, columns)
        }
        fn rows_upper_bound(
            &self,
            uids: &[TableUid],
            lo: i64,
            hi: i64,
        ) -> Result<Option<Vec<u64>>, String> {
            let rows = |uid: &TableUid| {
                self.inner
                    .tables
                    .iter()
                    .find(|t| t.meta.uid == *uid)
                    .map_or(0, |t| {
                        t.rows
                            .iter()
                            .filter(|r| r[0].as_i64().is_some_and(|ts| lo <= ts && ts <= hi))
                            .count() as u64
                    })
            };
            Ok(Some(uids.iter().map(rows).collect()))
        }
        fn scan_many(
            &self,
            uids: &[TableUid],
            lo: i64,
            hi: i64,
            columns: &[usize],
            prune: Option<&crate::prune::BlockPred>,
        ) -> Result<(Vec<usize>, Vec<Column>), String> {
            self.calls.fetch_add(1, Ordering::Relaxed);
            self.widest.fetch_max(uids.len(), Ordering::Relaxed);
            self.inner.scan_many(uids, lo, hi, columns, prune)
        }
    }
    const SUBTABLES: usize = 3000;
    let template = tables().remove(0);
    let tables: Vec<Table> = (0..SUBTABLES)
        .map(|t| {
            let mut meta = template.meta.clone();
            meta.uid = TableUid(t as u64 + 1);
            meta.name = format!("r_small_{t}");
            let rows = (0..3)
                .map(|r| {
                    let vel = if (t + r) % 5 == 0 {
                        Value::Null
                    } else {
                        Value::Float(((t * 3 + r) % 20) as f64)
                    };
                    vec![
                        Value::Timestamp(T0 + r as i64 * 10_000),
                        Value::Float(1.0),
                        vel,
                        Value::Int((t % 4) as i64),
                    ]
                })
                .collect();
            Table { meta, rows }
        })
        .collect();
    let all: Vec<Vec<Value>> = tables.iter().flat_map(|t| t.rows.clone()).collect();
    let src = Counting {
        inner: Vnode {
            tables,
            sma_block: None,
            columnar: true,
        },
        calls: AtomicUsize::new(0),
        widest: AtomicUsize::new(0),
    };
    let q = query(
        "SELECT _wstart, COUNT(*), SUM(status), MAX(velocity) FROM readings \
         WHERE velocity > 12.5 INTERVAL(10s)",
    );
    let plan = plan_query(&q, Some("iot"), &Cat).unwrap();
    let frag = &plan.fragments[0].fragment;
    let partial = execute_fragment(frag, &src).unwrap();
    let out = finish(&plan, vec![(plan.fragments[0].id, vec![partial])]).unwrap();
    let mut want: Vec<Vec<Value>> = Vec::new();
    for r in 0..3i64 {
        let passing: Vec<&Vec<Value>> = all
            .iter()
            .filter(|x| x[0] == Value::Timestamp(T0 + r * 10_000))
            .filter(|x| x[2].as_f64().is_some_and(|v| v > 12.5))
            .collect();
        let max = passing
            .iter()
            .filter_map(|x| x[2].as_f64())
            .fold(f64::MIN, f64::max);
        let sum: i64 = passing.iter().filter_map(|x| x[3].as_i64()).sum();
        want.push(vec![
            Value::Timestamp(T0 + r * 10_000),
            Value::Int(passing.len() as i64),
            Value::Int(sum),
            Value::Float(max),
        ]);
    }
    assert_eq!(rows(&out), want);
    // 3,000 subtables of 3 rows: read 1,024 at a time (3,072 rows, under the bound).
    assert_eq!(src.calls.load(Ordering::Relaxed), 3);
    assert_eq!(src.widest.load(Ordering::Relaxed), 1024);
    // A time range of 2 rows per subtable: the bounds count only the rows in it.
    let q = query(&format!(
        "SELECT COUNT(*) FROM readings WHERE velocity > 12.5 AND ts >= {}",
        T0 + 10_000
    ));
    let plan = plan_query(&q, Some("iot"), &Cat).unwrap();
    let frag = &plan.fragments[0].fragment;
    src.calls.store(0, Ordering::Relaxed);
    let partial = execute_fragment(frag, &src).unwrap();
    let out = finish(&plan, vec![(plan.fragments[0].id, vec![partial])]).unwrap();
    let n: i64 = want[1..].iter().filter_map(|w| w[1].as_i64()).sum();
    assert_eq!(rows(&out), vec![vec![Value::Int(n)]]);
    assert_eq!(src.calls.load(Ordering::Relaxed), 3);
    // Subtables of more rows than the bound are read one at a time, without it.
    let big = Counting {
        inner: big_vnode(20_000),
        calls: AtomicUsize::new(0),
        widest: AtomicUsize::new(0),
    };
    let partial = execute_fragment(frag, &big).unwrap();
    let out = finish(&plan, vec![(plan.fragments[0].id, vec![partial])]).unwrap();
    assert_eq!(out.num_rows(), 1);
    assert_eq!(big.calls.load(Ordering::Relaxed), 0);
}
