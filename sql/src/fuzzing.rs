//! The SQL fuzz target's work (fuzz/fuzz_targets/sql_statement.rs) and its corpus replay
//! test, so both treat an input the same way. Not part of the SQL API.
//!
//! Invariant: [`check_sql`] never panics for any input. It parses the bytes as statements
//! and, for every SELECT and EXPLAIN, plans it against a small fixed catalog, runs its
//! fragments (sent through their byte form, as to a vnode) on two in-memory vnodes, merges
//! them and renders the plan: the whole path a query takes, minus the network.

use crate::*;
use std::sync::Arc;
use tidal_common::{
    Batch, Column, ColumnDef, DataType, Precision, SchemaVersion, StableSchema, TableMeta,
    TableUid, Value,
};

/// Longest input tried, in bytes (a statement's text is capped by the server as well).
pub const INPUT_BYTES_MAX: usize = 4096;

const DB: &str = "iot";
const T0: i64 = 1_451_606_400_000; // 2016-01-01 00:00:00.000

fn schema() -> StableSchema {
    StableSchema {
        db: DB.into(),
        name: "readings".into(),
        version: SchemaVersion(1),
        columns: vec![
            ColumnDef::new("ts", DataType::Timestamp),
            ColumnDef::new("velocity", DataType::Double),
            ColumnDef::new("status", DataType::BigInt),
            ColumnDef::new("note", DataType::VarChar(16)),
            ColumnDef::new("ok", DataType::Bool),
        ],
        tags: vec![
            ColumnDef::new("name", DataType::VarChar(16)),
            ColumnDef::new("fleet", DataType::VarChar(16)),
            ColumnDef::new("load", DataType::Double),
        ],
    }
}

/// Subtable `i`: its catalog entry and rows (every fourth value NULL, a gap in time).
fn table(i: u64) -> (TableMeta, Vec<Vec<Value>>) {
    let meta = TableMeta {
        uid: TableUid(i + 1),
        name: format!("r_{i}"),
        stable: "readings".into(),
        tags: vec![
            Value::Str(format!("truck_{i}")),
            if i == 2 {
                Value::Null
            } else {
                Value::Str(["South", "North"][i as usize % 2].into())
            },
            Value::Float(1000.0 + i as f64),
        ]
        .into(),
    };
    let rows = (0..12i64)
        .filter(|r| r % 5 != 3)
        .map(|r| {
            let null = (r + i as i64) % 4 == 0;
            vec![
                Value::Timestamp(T0 + r * 10_000 + i as i64),
                if null {
                    Value::Null
                } else {
                    Value::Float((r * 7 % 11) as f64 - 2.5)
                },
                Value::Int(r % 3),
                if null {
                    Value::Null
                } else {
                    Value::Str(format!("n{r}"))
                },
                Value::Bool(r % 2 == 0),
            ]
        })
        .collect();
    (meta, rows)
}

struct Catalog;

impl crate::Catalog for Catalog {
    fn stable(&self, db: &str, name: &str) -> Option<StableSchema> {
        (db == DB && name == "readings").then(schema)
    }
    fn subtable(&self, db: &str, name: &str) -> Option<(TableMeta, StableSchema)> {
        if db != DB {
            return None;
        }
        (0..3)
            .map(table)
            .find(|(m, _)| m.name == name)
            .map(|(m, _)| (m, schema()))
    }
    fn precision(&self, db: &str) -> Option<Precision> {
        (db == DB).then_some(Precision::Millis)
    }
}

/// One in-memory vnode holding some of the subtables.
struct Vnode {
    tables: Vec<(TableMeta, Vec<Vec<Value>>)>,
}

impl ScanSource for Vnode {
    fn schema(&self, stable: &str) -> Option<Arc<StableSchema>> {
        (stable == "readings").then(|| Arc::new(schema()))
    }
    fn tables(&self, stable: &str) -> Vec<Arc<TableMeta>> {
        self.tables
            .iter()
            .filter(|(m, _)| m.stable == stable)
            .map(|(m, _)| Arc::new(m.clone()))
            .collect()
    }
    fn table(&self, name: &str) -> Option<Arc<TableMeta>> {
        self.tables
            .iter()
            .find(|(m, _)| m.name == name)
            .map(|(m, _)| Arc::new(m.clone()))
    }
    fn scan(
        &self,
        uid: TableUid,
        lo: i64,
        hi: i64,
        columns: &[usize],
    ) -> Result<Vec<Column>, String> {
        let (_, rows) = self
            .tables
            .iter()
            .find(|(m, _)| m.uid == uid)
            .ok_or("no such subtable")?;
        let s = schema();
        let mut out = Vec::with_capacity(columns.len());
        for c in columns {
            let d = s.columns.get(*c).ok_or("no such column")?;
            out.push(Column::empty(d.data_type, 0));
        }
        for r in rows {
            let ts = r.first().and_then(Value::as_i64).unwrap_or(0);
            if ts < lo || ts > hi {
                continue;
            }
            for (o, c) in out.iter_mut().zip(columns) {
                o.push(r.get(*c).unwrap_or(&Value::Null));
            }
        }
        Ok(out)
    }
}

/// Parses `data` as SQL and runs every query in it as described in the module doc; returns
/// how many queries ran to a result. Errors are expected (most inputs are not valid SQL);
/// panics are bugs.
pub fn check_sql(data: &[u8]) -> usize {
    let data = &data[..data.len().min(INPUT_BYTES_MAX)];
    let sql = String::from_utf8_lossy(data);
    let Ok(stmts) = parse(&sql) else {
        return 0;
    };
    let mut answered = 0;
    let vnodes = [
        Vnode {
            tables: vec![table(0), table(2)],
        },
        Vnode {
            tables: vec![table(1)],
        },
    ];
    for s in stmts {
        let q = match s {
            Statement::Select(q) => q,
            Statement::Explain { query, .. } => query,
            _ => continue,
        };
        let _ = referenced_tables(&q);
        let Ok(plan) = plan_query(&q, Some(DB), &Catalog) else {
            continue;
        };
        let _ = explain(&plan);
        let budget = MemoryBudget::new(64 << 20, "query_memory_max_bytes");
        let cancel = std::sync::atomic::AtomicBool::new(false);
        let mut results: Vec<(u32, Vec<Batch>)> = Vec::new();
        let mut failed = false;
        for spec in &plan.fragments {
            let Ok(frag) = Fragment::from_bytes(&spec.fragment.to_bytes()) else {
                failed = true;
                break;
            };
            let mut batches = Vec::new();
            for v in &vnodes {
                if let FragmentTarget::Table(t) = &spec.target {
                    if v.table(t).is_none() {
                        continue;
                    }
                }
                let r = execute_fragment_stream(&frag, v, &cancel, &budget, &mut |b| {
                    batches.push(b);
                    Ok(())
                });
                failed |= r.is_err();
            }
            results.push((spec.id, batches));
        }
        if !failed && finish_with(&plan, results, &budget).is_ok() {
            answered += 1;
        }
    }
    answered
}
