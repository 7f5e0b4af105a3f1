//! Row blocks (many subtables of one STABLE in one set of columns) through the write path:
//! they must store exactly what the same rows as per-subtable `TableWrite`s store, survive a
//! WAL replay and a flush, and fail validation as a whole.

use super::*;
use tidal_common::{ColumnDef, RowBlock, SchemaVersion, StatusCode, TableWrite};

const DB: &str = "db";

fn schema() -> StableSchema {
    StableSchema {
        db: DB.into(),
        name: "meters".into(),
        version: SchemaVersion(1),
        columns: vec![
            ColumnDef::new("ts", DataType::Timestamp),
            ColumnDef::new("v", DataType::Double),
            ColumnDef::new("s", DataType::VarChar(16)),
        ],
        tags: vec![ColumnDef::new("loc", DataType::VarChar(16))],
    }
}

fn open(dir: &Path, range: HashRange) -> Vnode {
    Vnode::open(
        dir,
        VnodeConfig {
            vgroup: VgroupId(3),
            db: DB.into(),
            range,
            options: DbOptions {
                wal_level: 2,
                buffer_mb: 1,
                ..DbOptions::default()
            },
        },
    )
    .unwrap()
}

fn full() -> HashRange {
    HashRange {
        begin: 0,
        end: u32::MAX,
    }
}

/// (table, ts, v, s) rows in write order.
type Row = (&'static str, i64, Option<f64>, Option<&'static str>);

fn values(r: &Row) -> [Value; 3] {
    [
        Value::Timestamp(r.1),
        r.2.map(Value::Float).unwrap_or(Value::Null),
        r.3.map(|s| Value::Str(s.into())).unwrap_or(Value::Null),
    ]
}

fn tags(t: &str) -> Vec<Value> {
    vec![Value::Str(format!("at_{t}"))]
}

/// The rows as one block (each table's tags on its first row; `tagless` get none).
fn block(rows: &[Row], tagless: &[&str]) -> RowBlock {
    let mut b = RowBlock::new(
        "meters",
        &[DataType::Timestamp, DataType::Double, DataType::VarChar(16)],
    );
    let mut index: HashMap<&str, u32> = HashMap::new();
    for r in rows {
        let i = *index
            .entry(r.0)
            .or_insert_with(|| b.add_table(r.0, (!tagless.contains(&r.0)).then(|| tags(r.0))));
        assert!(b.push_row(i, &values(r)));
    }
    b
}

/// The same rows as one `TableWrite` per run of consecutive rows of a table.
fn table_writes(rows: &[Row]) -> Vec<TableWrite> {
    let mut out: Vec<TableWrite> = Vec::new();
    for r in rows {
        if out.last().is_none_or(|t| t.table != r.0) {
            out.push(TableWrite {
                table: r.0.into(),
                stable: "meters".into(),
                tags: Some(tags(r.0)),
                columns: schema()
                    .columns
                    .iter()
                    .map(|c| Column::empty(c.data_type, 0))
                    .collect(),
            });
        }
        if let Some(t) = out.last_mut() {
            for (c, v) in t.columns.iter_mut().zip(values(r).iter()) {
                c.push(v);
            }
        }
    }
    out
}

fn batch(tables: Vec<TableWrite>, blocks: Vec<RowBlock>) -> WriteBatch {
    WriteBatch {
        db: DB.into(),
        vgroup: VgroupId(3),
        schemas: vec![schema()],
        tables,
        blocks,
    }
}

/// Every table's rows (ts, v, s) and tags.
fn dump(v: &Vnode) -> Vec<(String, Vec<Value>, Vec<Vec<Value>>)> {
    v.tables(None)
        .iter()
        .map(|t| {
            let c = v.scan(t.uid, i64::MIN, i64::MAX, &[0, 1, 2]).unwrap();
            let rows = (0..c[0].len())
                .map(|i| c.iter().map(|col| col.get(i)).collect())
                .collect();
            (t.name.clone(), t.tags.to_vec(), rows)
        })
        .collect()
}

const ROWS: &[Row] = &[
    ("a", 10, Some(1.0), Some("x")),
    ("b", 10, None, Some("y")),
    ("a", 11, Some(2.0), None),
    ("c", 5, Some(3.0), Some("z")),
    ("a", 9, Some(0.5), Some("early")), // out of order within the table
    ("b", 10, Some(7.0), None),         // repeated ts in a later run: replaces the row
    ("a", 11, None, Some("again")),
    ("c", 6, Some(4.0), None),
];

#[test]
fn blocks_store_what_table_writes_store_and_survive_replay_and_flush() {
    let da = tempfile::tempdir().unwrap();
    let db = tempfile::tempdir().unwrap();
    let a = open(da.path(), full());
    let b = open(db.path(), full());
    let oa = a.write(&batch(table_writes(ROWS), Vec::new())).unwrap();
    let ob = b.write(&batch(Vec::new(), vec![block(ROWS, &[])])).unwrap();
    assert_eq!(oa, ob);
    assert_eq!(ob.rows, ROWS.len() as u64);
    assert_eq!(ob.tables_created, 3);
    let expect = dump(&a);
    assert_eq!(dump(&b), expect);
    // A block the vnode owns (as one read off the wire): the new subtables' tags move into
    // the catalog instead of being copied, and the same tables, tags and rows result.
    let dc = tempfile::tempdir().unwrap();
    let c = open(dc.path(), full());
    let oc = c
        .write_owned(batch(Vec::new(), vec![block(ROWS, &[])]))
        .unwrap();
    assert_eq!(oc, ob);
    assert_eq!(dump(&c), expect);
    drop(c);
    assert_eq!(dump(&open(dc.path(), full())), expect);
    let b_rows = expect.iter().find(|t| t.0 == "b").unwrap();
    assert_eq!(
        b_rows.2,
        vec![vec![Value::Timestamp(10), Value::Float(7.0), Value::Null]]
    );

    // Existing tables need no tags; a second block appends to the memtable.
    let more: &[Row] = &[("c", 7, Some(5.0), None), ("a", 12, Some(6.0), None)];
    a.write(&batch(table_writes(more), Vec::new())).unwrap();
    let o = b
        .write(&batch(Vec::new(), vec![block(more, &["a", "c"])]))
        .unwrap();
    assert_eq!(o.tables_created, 0);
    let expect = dump(&a);
    assert_eq!(dump(&b), expect);

    // WAL replay.
    drop(b);
    let b = open(db.path(), full());
    assert_eq!(dump(&b), expect);
    // Flushed to files, then replayed again with a block after the flush.
    b.flush().unwrap();
    assert_eq!(dump(&b), expect);
    let last: &[Row] = &[("d", 1, Some(1.0), None), ("a", 12, Some(60.0), None)];
    a.write(&batch(table_writes(last), Vec::new())).unwrap();
    b.write(&batch(Vec::new(), vec![block(last, &["a"])]))
        .unwrap();
    drop(b);
    let b = open(db.path(), full());
    assert_eq!(dump(&b), dump(&a));
}

#[test]
fn a_bad_block_fails_the_whole_batch() {
    let d = tempfile::tempdir().unwrap();
    let range = HashRange {
        begin: 0,
        end: u32::MAX / 2,
    };
    let v = open(d.path(), range);
    let pick = |prefix: &str, inside: bool| -> &'static str {
        let n = (0..1000)
            .map(|i| format!("{prefix}{i}"))
            .find(|n| range.contains(hash_table_name(DB, n)) == inside)
            .unwrap();
        Box::leak(n.into_boxed_str())
    };
    let (t1, t2, out) = (pick("in", true), pick("more", true), pick("out", false));
    let good = || batch(Vec::new(), vec![block(&[(t1, 1, Some(1.0), None)], &[])]);

    let e = v
        .write(&batch(
            Vec::new(),
            vec![block(&[(t1, 1, None, None), (out, 1, None, None)], &[])],
        ))
        .unwrap_err();
    assert!(
        matches!(&e, VnodeError::WrongVgroup { table, .. } if table == out),
        "{e}"
    );

    let e = v
        .write(&batch(
            Vec::new(),
            vec![block(&[(t1, 1, None, None), (t2, 1, None, None)], &[t2])],
        ))
        .unwrap_err();
    assert!(
        matches!(&e, VnodeError::TableNotFound { table } if table == t2),
        "{e}"
    );

    let mut wrong_type = RowBlock::new(
        "meters",
        &[DataType::Timestamp, DataType::BigInt, DataType::VarChar(4)],
    );
    let i = wrong_type.add_table(t1, Some(tags(t1)));
    wrong_type.push_row(i, &[Value::Timestamp(1), Value::Int(1), Value::Null]);
    let e = v.write(&batch(Vec::new(), vec![wrong_type])).unwrap_err();
    assert!(
        matches!(&e, VnodeError::TypeMismatch { column, .. } if column == "v"),
        "{e}"
    );

    let mut narrow = RowBlock::new("meters", &[DataType::Timestamp, DataType::Double]);
    let i = narrow.add_table(t1, Some(tags(t1)));
    narrow.push_row(i, &[Value::Timestamp(1), Value::Float(1.0)]);
    let e = v.write(&batch(Vec::new(), vec![narrow])).unwrap_err();
    assert_eq!(e.status_code(), StatusCode::SchemaMismatch, "{e}");

    let mut bad_tags = block(&[(t1, 1, None, None)], &[t1]);
    bad_tags.offer_tags(0, Some(vec![Value::Int(1), Value::Int(2)].into()));
    let e = v.write(&batch(Vec::new(), vec![bad_tags])).unwrap_err();
    assert!(matches!(&e, VnodeError::InvalidTags { .. }), "{e}");

    let mut unknown_stable = batch(Vec::new(), vec![]);
    let mut b = RowBlock::new("nope", &[DataType::Timestamp]);
    let i = b.add_table(t1, Some(Vec::new()));
    b.push_row(i, &[Value::Timestamp(1)]);
    unknown_stable.blocks.push(b);
    let e = v.write(&unknown_stable).unwrap_err();
    assert_eq!(e.status_code(), StatusCode::StableNotFound, "{e}");

    // Nothing of the failed batches was applied; a good one still is.
    assert!(v.tables(None).is_empty());
    assert_eq!(v.write(&good()).unwrap().rows, 1);
    // A table of one STABLE written as another's.
    let mut other = StableSchema {
        name: "other".into(),
        ..schema()
    };
    other.version = SchemaVersion(1);
    let mut b = RowBlock::new(
        "other",
        &[DataType::Timestamp, DataType::Double, DataType::VarChar(16)],
    );
    let i = b.add_table(t1, Some(tags(t1)));
    b.push_row(i, &[Value::Timestamp(2), Value::Null, Value::Null]);
    let mut wb = batch(Vec::new(), vec![b]);
    wb.schemas.push(other);
    let e = v.write(&wb).unwrap_err();
    assert_eq!(e.status_code(), StatusCode::SchemaMismatch, "{e}");
    drop(v);
    let v = open(d.path(), range);
    assert_eq!(dump(&v).len(), 1);
}

/// A new subtable's tags in a block the data node owns are coerced where they are and kept
/// (no copy); they must come out as the same write through a borrowed batch stores them,
/// and a value that does not fit fails the whole batch with nothing created.
#[test]
fn owned_tags_are_coerced_as_borrowed_ones_are() {
    let typed = StableSchema {
        name: "typed".into(),
        tags: vec![
            ColumnDef::new("loc", DataType::VarChar(4)),
            ColumnDef::new("cap", DataType::Double),
            ColumnDef::new("since", DataType::Timestamp),
            ColumnDef::new("on", DataType::Bool),
        ],
        ..schema()
    };
    let cols = [DataType::Timestamp, DataType::Double, DataType::VarChar(16)];
    let block = |tags: Vec<Value>| {
        let mut b = RowBlock::new("typed", &cols);
        let i = b.add_table("t", Some(tags));
        assert!(b.push_row(i, &[Value::Timestamp(5), Value::Float(1.0), Value::Null]));
        b
    };
    let write = |tags: Vec<Value>| WriteBatch {
        schemas: vec![typed.clone()],
        ..batch(Vec::new(), vec![block(tags)])
    };
    let sent = vec![
        Value::Str("west".into()),
        Value::Int(7),
        Value::Int(1_000),
        Value::Int(1),
    ];
    let want = vec![
        Value::Str("west".into()),
        Value::Float(7.0),
        Value::Timestamp(1_000),
        Value::Bool(true),
    ];
    let too_long = vec![
        Value::Str("north".into()),
        Value::Int(7),
        Value::Int(1_000),
        Value::Int(1),
    ];
    let (dir_owned, dir_borrowed) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let owned = open(dir_owned.path(), full());
    let borrowed = open(dir_borrowed.path(), full());
    for v in [&owned, &borrowed] {
        let e = if std::ptr::eq(v, &owned) {
            v.write_owned(write(too_long.clone())).unwrap_err()
        } else {
            v.write(&write(too_long.clone())).unwrap_err()
        };
        assert!(
            matches!(&e, VnodeError::InvalidTags { table, reason } if table == "t" && reason.contains("tag 'loc'")),
            "{e}"
        );
        assert!(v.tables(None).is_empty(), "nothing created");
    }
    assert_eq!(
        owned
            .write_owned(write(sent.clone()))
            .unwrap()
            .tables_created,
        1
    );
    assert_eq!(borrowed.write(&write(sent)).unwrap().tables_created, 1);
    for v in [&owned, &borrowed] {
        assert_eq!(v.table("t").unwrap().tags.to_vec(), want);
    }
    drop(owned);
    let owned = open(dir_owned.path(), full());
    assert_eq!(
        owned.table("t").unwrap().tags.to_vec(),
        want,
        "after a replay"
    );
}

#[test]
fn combined_stats_keep_only_what_both_blocks_know() {
    let s = |count, nulls, min, max| ColStats {
        count,
        nulls,
        min,
        max,
        sum: SmaVal::Int(1),
    };
    let a = s(3, 1, SmaVal::Float(-1.0), SmaVal::Float(5.0));
    let b = s(2, 0, SmaVal::Float(0.5), SmaVal::Float(9.0));
    let c = a.combine(&b).unwrap();
    assert_eq!((c.count, c.nulls), (5, 1));
    assert_eq!(
        (c.min, c.max, c.sum),
        (SmaVal::Float(-1.0), SmaVal::Float(9.0), SmaVal::None)
    );
    // A block without values adds its NULLs and nothing else.
    let empty = ColStats::all_null(4);
    let c = a.combine(&empty).unwrap();
    assert_eq!((c.count, c.nulls, c.min, c.max), (3, 5, a.min, a.max));
    // One block with values but no known minimum: nothing is known of the minimum.
    let unknown = s(2, 0, SmaVal::None, SmaVal::Float(1.0));
    assert_eq!(a.combine(&unknown).unwrap().min, SmaVal::None);
    assert_eq!(a.combine(&unknown).unwrap().max, SmaVal::Float(5.0));
    let nan = s(1, 0, SmaVal::Float(f64::NAN), SmaVal::Float(f64::NAN));
    assert_eq!(a.combine(&nan).unwrap().min, SmaVal::None);
    let ints = s(1, 0, SmaVal::Int(-3), SmaVal::Int(7));
    let c = ints
        .combine(&s(1, 0, SmaVal::Int(2), SmaVal::Int(10)))
        .unwrap();
    assert_eq!((c.min, c.max), (SmaVal::Int(-3), SmaVal::Int(10)));
    assert!(s(u32::MAX, 0, SmaVal::None, SmaVal::None)
        .combine(&ints)
        .is_none());
}
