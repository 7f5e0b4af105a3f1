//! A 100,000-element IN list on a tag parses, plans and runs in linear time: the statement is
//! close to the 1 MiB limit, and every stage (tokens and their positions, the parser, the
//! planner's tag/row split, the vnode's tag index and tag filter) must stay linear in it.

use std::sync::Arc;
use std::time::{Duration, Instant};
use tidal_common::{
    Column, ColumnData, ColumnDef, DataType, Precision, StableSchema, TableMeta, TableUid, Value,
};
use tidal_sql::{Catalog, ScanSource, Statement};

const ELEMENTS: usize = 100_000;
const SUBTABLES: usize = 100_000;
/// Generous for a debug build on a loaded machine; the quadratic code took minutes.
const BOUND: Duration = Duration::from_secs(20);

fn schema() -> StableSchema {
    StableSchema {
        db: "iot".into(),
        name: "readings".into(),
        version: tidal_common::SchemaVersion(1),
        columns: vec![
            ColumnDef::new("ts", DataType::Timestamp),
            ColumnDef::new("v", DataType::Double),
        ],
        tags: vec![ColumnDef::new("name", DataType::VarChar(16))],
    }
}

struct Cat;

impl Catalog for Cat {
    fn stable(&self, db: &str, name: &str) -> Option<StableSchema> {
        (db == "iot" && name == "readings").then(schema)
    }
    fn subtable(&self, _db: &str, _name: &str) -> Option<(TableMeta, StableSchema)> {
        None
    }
    fn precision(&self, db: &str) -> Option<Precision> {
        (db == "iot").then_some(Precision::Millis)
    }
}

/// Subtables `r_i` tagged `name = 't_i'`, one row each; no tag index (the fragment's tag
/// filter then runs over every subtable).
struct Source {
    tables: Vec<Arc<TableMeta>>,
}

impl ScanSource for Source {
    fn schema(&self, stable: &str) -> Option<Arc<StableSchema>> {
        (stable == "readings").then(|| Arc::new(schema()))
    }
    fn tables(&self, _stable: &str) -> Vec<Arc<TableMeta>> {
        self.tables.clone()
    }
    fn table(&self, _name: &str) -> Option<Arc<TableMeta>> {
        None
    }
    fn scan(
        &self,
        uid: TableUid,
        _lo: i64,
        _hi: i64,
        columns: &[usize],
    ) -> Result<Vec<Column>, String> {
        Ok(columns
            .iter()
            .map(|c| match c {
                0 => Column::new(ColumnData::Timestamp(vec![uid.0 as i64])),
                _ => Column::new(ColumnData::Float(vec![1.0])),
            })
            .collect())
    }
}

#[test]
fn in_list_of_100k_tags_plans_and_runs_in_linear_time() {
    // Every other listed name exists: the answer counts exactly the listed subtables.
    let list: Vec<String> = (0..ELEMENTS).map(|i| format!("'t_{}'", i * 2)).collect();
    let sql = format!(
        "SELECT COUNT(*) FROM readings WHERE name IN ({})",
        list.join(",")
    );
    assert!(sql.len() <= tidal_sql::SQL_BYTES_MAX, "{} bytes", sql.len());
    let src = Source {
        tables: (0..SUBTABLES)
            .map(|i| {
                Arc::new(TableMeta {
                    uid: TableUid(i as u64 + 1),
                    name: format!("r_{i}"),
                    stable: "readings".into(),
                    tags: vec![Value::Str(format!("t_{i}"))].into(),
                })
            })
            .collect(),
    };

    let start = Instant::now();
    let Statement::Select(q) = tidal_sql::parse(&sql).unwrap().remove(0) else {
        panic!("not a SELECT");
    };
    let parsed = start.elapsed();
    let plan = tidal_sql::plan_query(&q, Some("iot"), &Cat).unwrap();
    let planned = start.elapsed();
    let mut results = Vec::new();
    for f in &plan.fragments {
        let frag = tidal_sql::Fragment::from_bytes(&f.fragment.to_bytes()).unwrap();
        results.push((
            f.id,
            vec![tidal_sql::execute_fragment(&frag, &src).unwrap()],
        ));
    }
    let executed = start.elapsed();
    let out = tidal_sql::finish(&plan, results).unwrap();
    let took = start.elapsed();
    eprintln!(
        "{} bytes: parse {parsed:?}, plan {:?}, execute {:?}, total {took:?}",
        sql.len(),
        planned - parsed,
        executed - planned
    );
    assert_eq!(out.row(0)[0], Value::Int((SUBTABLES / 2) as i64));
    assert!(took < BOUND, "a {ELEMENTS}-element IN list took {took:?}");
}
