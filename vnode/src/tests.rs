//! Crate tests: real files in temp dirs, reopen after simulated crashes (drop without flush),
//! torn and corrupted files, validation, concurrency.

use super::*;
use std::collections::HashSet;
use std::fs::OpenOptions;
use tidal_common::{ColumnDef, SchemaVersion, StatusCode, TableWrite};

const DB: &str = "db";

fn schema(version: u32) -> StableSchema {
    let mut columns = vec![
        ColumnDef::new("ts", DataType::Timestamp),
        ColumnDef::new("v", DataType::Double),
        ColumnDef::new("s", DataType::VarChar(16)),
        ColumnDef::new("n", DataType::Int),
    ];
    if version >= 2 {
        columns.push(ColumnDef::new("extra", DataType::BigInt));
    }
    StableSchema {
        db: DB.into(),
        name: "meters".into(),
        version: SchemaVersion(version),
        columns,
        tags: vec![
            ColumnDef::new("loc", DataType::VarChar(16)),
            ColumnDef::new("gid", DataType::Int),
        ],
    }
}

fn cfg_with(range: HashRange, wal_level: u8) -> VnodeConfig {
    VnodeConfig {
        vgroup: VgroupId(7),
        db: DB.into(),
        range,
        options: DbOptions {
            wal_level,
            buffer_mb: 1,
            ..DbOptions::default()
        },
    }
}

fn full() -> HashRange {
    HashRange {
        begin: 0,
        end: u32::MAX,
    }
}

fn open(dir: &Path) -> Vnode {
    Vnode::open(dir, cfg_with(full(), 2)).unwrap()
}

type R = (i64, Option<f64>, Option<&'static str>, Option<i64>);

fn tags(loc: &str) -> Option<Vec<Value>> {
    Some(vec![Value::Str(loc.into()), Value::Int(1)])
}

fn tw(table: &str, tags: Option<Vec<Value>>, rows: &[R]) -> TableWrite {
    let s = schema(1);
    let mut cols: Vec<Column> = s
        .columns
        .iter()
        .map(|c| Column::empty(c.data_type, 0))
        .collect();
    for (ts, v, st, n) in rows {
        cols[0].push(&Value::Timestamp(*ts));
        cols[1].push(&v.map(Value::Float).unwrap_or(Value::Null));
        cols[2].push(&st.map(|x| Value::Str(x.into())).unwrap_or(Value::Null));
        cols[3].push(&n.map(Value::Int).unwrap_or(Value::Null));
    }
    TableWrite {
        table: table.into(),
        stable: "meters".into(),
        tags,
        columns: cols,
    }
}

fn batch(tables: Vec<TableWrite>) -> WriteBatch {
    WriteBatch {
        db: DB.into(),
        vgroup: VgroupId(7),
        schemas: vec![schema(1)],
        tables,
        blocks: Vec::new(),
    }
}

fn rows(v: &Vnode, table: &str) -> Vec<(i64, Value, Value, Value)> {
    let uid = v.table(table).unwrap().uid;
    let cols = v.scan(uid, i64::MIN, i64::MAX, &[0, 1, 2, 3]).unwrap();
    (0..cols[0].len())
        .map(|i| {
            let Value::Timestamp(ts) = cols[0].get(i) else {
                panic!("ts")
            };
            (ts, cols[1].get(i), cols[2].get(i), cols[3].get(i))
        })
        .collect()
}

/// Writes one row (`ts`, v = ts as a double, extra = `extra`) to `table` under schema version 2
/// (which adds the column `extra`).
fn write_with_schema_2(v: &Vnode, table: &str, ts: i64, extra: i64) {
    let mut t = tw(table, None, &[(ts, Some(ts as f64), None, None)]);
    let mut col = Column::empty(DataType::BigInt, 1);
    col.push(&Value::Int(extra));
    t.columns.push(col);
    let mut b = batch(vec![t]);
    b.schemas = vec![schema(2)];
    v.write(&b).unwrap();
}

fn f(x: f64) -> Value {
    Value::Float(x)
}

fn wal_file(dir: &Path) -> PathBuf {
    let files = wal::list_files(&dir.join("wal")).unwrap();
    files.last().unwrap().path.clone()
}

#[test]
fn round_trip_nulls_out_of_order_upserts_across_memtable_and_file() {
    let d = tempfile::tempdir().unwrap();
    let v = open(d.path());
    let out = v
        .write(&batch(vec![tw(
            "t1",
            tags("a"),
            &[
                (5, Some(5.0), Some("five"), Some(5)),
                (1, None, Some("one"), None),
                (3, Some(3.0), None, Some(3)),
                (3, Some(33.0), Some("3b"), None), // same ts later in the batch wins
            ],
        )]))
        .unwrap();
    assert_eq!(
        out,
        WriteOutcome {
            rows: 4,
            tables_created: 1
        }
    );
    let expect = vec![
        (1, Value::Null, Value::Str("one".into()), Value::Null),
        (3, f(33.0), Value::Str("3b".into()), Value::Null),
        (5, f(5.0), Value::Str("five".into()), Value::Int(5)),
    ];
    assert_eq!(rows(&v, "t1"), expect);
    v.flush().unwrap();
    assert_eq!(rows(&v, "t1"), expect);
    assert_eq!(v.stats().mem_bytes, 0);
    // Newer writes in the memtable replace flushed rows entirely.
    v.write(&batch(vec![tw(
        "t1",
        None,
        &[(3, None, Some("new"), Some(9)), (7, Some(7.0), None, None)],
    )]))
    .unwrap();
    let expect2 = vec![
        (1, Value::Null, Value::Str("one".into()), Value::Null),
        (3, Value::Null, Value::Str("new".into()), Value::Int(9)),
        (5, f(5.0), Value::Str("five".into()), Value::Int(5)),
        (7, f(7.0), Value::Null, Value::Null),
    ];
    assert_eq!(rows(&v, "t1"), expect2);
    // Time range and projection.
    let uid = v.table("t1").unwrap().uid;
    let cols = v.scan(uid, 2, 5, &[3, 0]).unwrap();
    assert_eq!(cols.len(), 2);
    assert_eq!(cols[1].data, ColumnData::Timestamp(vec![3, 5]));
    assert_eq!(cols[0].get(0), Value::Int(9));
    assert_eq!(cols[0].get(1), Value::Int(5));
    assert!(v.scan(uid, 10, 0, &[0]).unwrap()[0].is_empty());
    let e = v.scan(uid, 0, 1, &[4]).unwrap_err();
    assert_eq!(e.status_code(), StatusCode::ColumnNotFound);
    let e = v.scan(TableUid(999), 0, 1, &[0]).unwrap_err();
    assert_eq!(e.status_code(), StatusCode::TableNotFound);
    // Survives reopen (flushed file + WAL after the flush).
    drop(v);
    let v = open(d.path());
    assert_eq!(rows(&v, "t1"), expect2);
    assert_eq!(
        v.table("t1").unwrap().tags.to_vec(),
        vec![Value::Str("a".into()), Value::Int(1)]
    );
}

#[test]
fn reopen_without_flush_recovers_everything_from_the_wal() {
    let d = tempfile::tempdir().unwrap();
    {
        let v = open(d.path());
        v.write(&batch(vec![
            tw("t1", tags("a"), &[(1, Some(1.0), None, None)]),
            tw("t2", tags("b"), &[(2, Some(2.0), Some("x"), Some(2))]),
        ]))
        .unwrap();
        assert_eq!(
            v.create_tables(
                &schema(1),
                &[("t3".into(), vec![Value::Str("c".into()), Value::Int(3)])],
                false
            )
            .unwrap(),
            1
        );
        v.write(&batch(vec![tw("t1", None, &[(1, Some(10.0), None, None)])]))
            .unwrap();
        // dropped without flush: simulates kill -9 after acknowledgement
    }
    let v = open(d.path());
    assert_eq!(rows(&v, "t1"), vec![(1, f(10.0), Value::Null, Value::Null)]);
    assert_eq!(rows(&v, "t2").len(), 1);
    assert_eq!(
        v.tables(None)
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>(),
        ["t1", "t2", "t3"]
    );
    assert_eq!(v.tables(Some("meters")).len(), 3);
    assert!(v.tables(Some("other")).is_empty());
    assert_eq!(v.stable_schema("meters").as_deref(), Some(&schema(1)));
    assert_eq!(v.table("t3").unwrap().tags[1], Value::Int(3));
    assert_eq!(v.stats().tables, 3);
}

#[test]
fn flush_then_more_writes_then_reopen_twice() {
    let d = tempfile::tempdir().unwrap();
    {
        let v = open(d.path());
        v.write(&batch(vec![tw(
            "t1",
            tags("a"),
            &[(1, Some(1.0), None, None)],
        )]))
        .unwrap();
        v.flush().unwrap();
        v.flush().unwrap(); // nothing new: no-op
        v.write(&batch(vec![tw("t1", None, &[(2, Some(2.0), None, None)])]))
            .unwrap();
        v.write(&batch(vec![tw(
            "t9",
            tags("z"),
            &[(3, Some(3.0), None, None)],
        )]))
        .unwrap();
        let s = v.stats();
        assert!(
            s.wal_bytes > 0 && s.disk_bytes > 0 && s.rows_written == 3,
            "{s:?}"
        );
    }
    {
        let v = open(d.path());
        assert_eq!(rows(&v, "t1").len(), 2);
        assert_eq!(rows(&v, "t9").len(), 1);
        v.flush().unwrap();
        // The WAL is trimmed to the (empty) current file after a flush.
        assert_eq!(wal::list_files(&d.path().join("wal")).unwrap().len(), 1);
    }
    let v = open(d.path());
    assert_eq!(rows(&v, "t1").len(), 2);
    assert_eq!(rows(&v, "t9").len(), 1);
    // uids are never reused: a new table after reopen gets a fresh one.
    v.write(&batch(vec![tw("t10", tags("q"), &[(1, None, None, None)])]))
        .unwrap();
    let uids: HashSet<u64> = v.tables(None).iter().map(|t| t.uid.0).collect();
    assert_eq!(uids.len(), 3);
}

#[test]
fn torn_wal_tail_is_cut_off() {
    let d = tempfile::tempdir().unwrap();
    {
        let v = open(d.path());
        for ts in 0..3 {
            v.write(&batch(vec![tw(
                "t1",
                tags("a"),
                &[(ts, Some(ts as f64), None, None)],
            )]))
            .unwrap();
        }
    }
    let path = wal_file(d.path());
    let len = std::fs::metadata(&path).unwrap().len();
    OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len - 5)
        .unwrap();
    {
        let v = open(d.path());
        assert_eq!(
            rows(&v, "t1").iter().map(|r| r.0).collect::<Vec<_>>(),
            [0, 1]
        );
        v.write(&batch(vec![tw("t1", None, &[(9, None, None, None)])]))
            .unwrap();
    }
    let v = open(d.path());
    assert_eq!(
        rows(&v, "t1").iter().map(|r| r.0).collect::<Vec<_>>(),
        [0, 1, 9]
    );

    // A tail of zeros (file extended but the data never reached the disk) is torn too.
    drop(v);
    let path = wal_file(d.path());
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(&[0u8; 100]);
    std::fs::write(&path, &bytes).unwrap();
    let v = open(d.path());
    assert_eq!(rows(&v, "t1").len(), 3);
}

#[test]
fn bit_flip_in_a_middle_wal_record_is_a_typed_corruption_error() {
    let d = tempfile::tempdir().unwrap();
    {
        let v = open(d.path());
        for ts in 0..3 {
            v.write(&batch(vec![tw(
                "t1",
                tags("a"),
                &[(ts, Some(1.0), Some("abc"), None)],
            )]))
            .unwrap();
        }
    }
    let path = wal_file(d.path());
    let mut bytes = std::fs::read(&path).unwrap();
    // Find the second record and flip a bit in its payload.
    let first_len = u32::from_le_bytes(bytes[24..28].try_into().unwrap()) as usize;
    let second = 24 + 16 + first_len;
    bytes[second + 16 + 5] ^= 0x10;
    std::fs::write(&path, &bytes).unwrap();
    let err = Vnode::open(d.path(), cfg_with(full(), 2)).err().unwrap();
    match &err {
        VnodeError::Corruption { file, offset, .. } => {
            assert_eq!(file, &path);
            assert_eq!(*offset, second as u64);
        }
        e => panic!("expected corruption, got {e}"),
    }
    assert_eq!(err.status_code(), StatusCode::Corruption);
    assert!(err.to_string().contains(".log"), "{err}");
}

#[test]
fn corrupted_manifest_is_a_typed_error() {
    let d = tempfile::tempdir().unwrap();
    {
        let v = open(d.path());
        v.write(&batch(vec![tw(
            "t1",
            tags("a"),
            &[(1, Some(1.0), Some("abc"), None)],
        )]))
        .unwrap();
        v.flush().unwrap();
    }
    let man = d.path().join("meta").join(MANIFEST_FILE);
    let mut m = std::fs::read(&man).unwrap();
    let k = m.len() - 2;
    m[k] ^= 4;
    std::fs::write(&man, &m).unwrap();
    let e = Vnode::open(d.path(), cfg_with(full(), 2)).err().unwrap();
    assert!(
        matches!(&e, VnodeError::Corruption { file, .. } if file == &man),
        "{e}"
    );
}

#[test]
fn the_manifest_is_written_compressed_and_a_version_2_manifest_is_still_read() {
    let d = tempfile::tempdir().unwrap();
    let rows: Vec<R> = (0..5)
        .map(|i| (i, Some(i as f64), Some("x"), None))
        .collect();
    {
        let v = open(d.path());
        v.write(&batch(vec![tw("t1", tags("a"), &rows)])).unwrap();
        v.flush().unwrap();
    }
    let man = d.path().join("meta").join(MANIFEST_FILE);
    let v3 = std::fs::read(&man).unwrap();
    assert_eq!(v3[8..12], 3u32.to_le_bytes());
    // The same state as version 2 wrote it: the payload as it is, uncompressed.
    let raw_len = u64::from_le_bytes(v3[24..32].try_into().unwrap());
    let raw = zstd::stream::decode_all(&v3[32..]).unwrap();
    assert_eq!(raw.len() as u64, raw_len);
    let mut v2 = b"TIDALMAN".to_vec();
    v2.extend_from_slice(&2u32.to_le_bytes());
    v2.extend_from_slice(&crc32c::crc32c(&raw).to_le_bytes());
    v2.extend_from_slice(&(raw.len() as u64).to_le_bytes());
    v2.extend_from_slice(&raw);
    std::fs::write(&man, &v2).unwrap();
    let v = open(d.path());
    let uid = v.table("t1").unwrap().uid;
    assert_eq!(v.scan(uid, 0, 10, &[1]).unwrap()[0].len(), 5);
    drop(v);
    // A version 3 payload whose length disagrees with what it decompresses to (checksum
    // made to match) is a corruption error, not a short catalog.
    // A length far past what the frame could hold is refused before anything is allocated.
    for (claim, says) in [
        (raw_len + 1, "decompresses to"),
        (u64::MAX, "claims to decompress"),
    ] {
        let mut bad = v3.clone();
        bad[24..32].copy_from_slice(&claim.to_le_bytes());
        let crc = crc32c::crc32c(&bad[24..]);
        bad[12..16].copy_from_slice(&crc.to_le_bytes());
        std::fs::write(&man, &bad).unwrap();
        let e = Vnode::open(d.path(), cfg_with(full(), 2)).err().unwrap();
        assert!(
            matches!(&e, VnodeError::Corruption { reason, .. } if reason.contains(says)),
            "{e}"
        );
    }
}

#[test]
fn validation_errors_write_nothing() {
    let d = tempfile::tempdir().unwrap();
    // A range holding about half the hash space.
    let range = HashRange {
        begin: 0,
        end: u32::MAX / 2,
    };
    let v = Vnode::open(d.path(), cfg_with(range, 2)).unwrap();
    let inside = (0..100)
        .map(|i| format!("in{i}"))
        .find(|n| range.contains(hash_table_name(DB, n)))
        .unwrap();
    let outside = (0..100)
        .map(|i| format!("out{i}"))
        .find(|n| !range.contains(hash_table_name(DB, n)))
        .unwrap();
    let good = tw(&inside, tags("a"), &[(1, Some(1.0), None, None)]);

    let e = v
        .write(&batch(vec![
            good.clone(),
            tw(&outside, tags("a"), &[(1, None, None, None)]),
        ]))
        .unwrap_err();
    assert!(matches!(&e, VnodeError::WrongVgroup { table, .. } if table == &outside));
    assert_eq!(e.status_code(), StatusCode::WrongVgroup);

    let e = v
        .write(&batch(vec![
            good.clone(),
            tw(&inside.to_string(), None, &[]),
        ]))
        .err();
    assert!(e.is_none(), "a repeated table in one batch is fine");
    assert!(v.drop_table(&inside).unwrap());

    let unknown = (0..100)
        .map(|i| format!("u{i}"))
        .find(|n| range.contains(hash_table_name(DB, n)))
        .unwrap();
    let e = v
        .write(&batch(vec![
            good.clone(),
            tw(&unknown, None, &[(1, None, None, None)]),
        ]))
        .unwrap_err();
    assert!(
        matches!(&e, VnodeError::TableNotFound { table } if table == &unknown),
        "{e}"
    );
    assert_eq!(e.status_code(), StatusCode::TableNotFound);

    let mut wrong_count = tw(&unknown, tags("a"), &[(1, None, None, None)]);
    wrong_count.columns.pop();
    let e = v
        .write(&batch(vec![good.clone(), wrong_count]))
        .unwrap_err();
    assert_eq!(e.status_code(), StatusCode::SchemaMismatch, "{e}");

    let mut wrong_type = tw(&unknown, tags("a"), &[(1, None, None, None)]);
    wrong_type.columns[3] = Column::new(ColumnData::Str(vec!["x".into()]));
    let e = v.write(&batch(vec![good.clone(), wrong_type])).unwrap_err();
    assert!(
        matches!(&e, VnodeError::TypeMismatch { column, .. } if column == "n"),
        "{e}"
    );

    let mut ragged = tw(&unknown, tags("a"), &[(1, None, None, None)]);
    ragged.columns[1].push(&Value::Float(2.0));
    let e = v.write(&batch(vec![good.clone(), ragged])).unwrap_err();
    assert!(e.to_string().contains("'v'"), "{e}");

    let mut null_ts = tw(&unknown, tags("a"), &[(1, None, None, None)]);
    null_ts.columns[0] = Column::empty(DataType::Timestamp, 1);
    null_ts.columns[0].push(&Value::Null);
    assert!(v.write(&batch(vec![good.clone(), null_ts])).is_err());

    let bad_tags = tw(
        &unknown,
        Some(vec![Value::Str("a".into()), Value::Str("x".into())]),
        &[],
    );
    let e = v.write(&batch(vec![good.clone(), bad_tags])).unwrap_err();
    assert!(e.to_string().contains("gid"), "{e}");

    let mut other_stable = tw(&unknown, tags("a"), &[]);
    other_stable.stable = "nope".into();
    let e = v
        .write(&batch(vec![good.clone(), other_stable]))
        .unwrap_err();
    assert_eq!(e.status_code(), StatusCode::StableNotFound);

    let mut wrong_db = batch(vec![good.clone()]);
    wrong_db.db = "other".into();
    assert!(v.write(&wrong_db).is_err());

    // Nothing of the failed batches was applied (the good table was dropped above).
    assert!(v.tables(None).is_empty());
    assert_eq!(v.stats().rows_written, 1);
    drop(v);
    let v = Vnode::open(d.path(), cfg_with(range, 2)).unwrap();
    assert!(v.tables(None).is_empty());
}

#[test]
fn concurrent_writers_share_group_commits_and_every_row_survives_once() {
    // 200 bytes per row: 6000 rows cross the 1 MiB buffer.
    const PAD: &str = "padding-padding-padding-padding-padding-padding-padding-padding-padding-padding-padding-padding-padding-padding-padding-padding-padding-padding-padding-padding-padding-padding-padding-padding-padding-";
    let d = tempfile::tempdir().unwrap();
    const THREADS: i64 = 4;
    const BATCHES: i64 = 60;
    const ROWS: i64 = 25;
    {
        let v = Arc::new(open(d.path()));
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let v = v.clone();
                std::thread::spawn(move || {
                    for b in 0..BATCHES {
                        let rows: Vec<R> = (0..ROWS)
                            .map(|r| {
                                (
                                    b * ROWS + r,
                                    Some((t * 1000 + b) as f64),
                                    Some(PAD),
                                    Some(r),
                                )
                            })
                            .collect();
                        let table = format!("dev{t}");
                        v.write(&batch(vec![tw(&table, tags("x"), &rows)])).unwrap();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        // The 1 MiB budget was crossed at least once: the worker writes some data to files.
        let t0 = std::time::Instant::now();
        while v.stats().disk_bytes == 0 && t0.elapsed().as_secs() < 10 {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(v.stats().disk_bytes > 0);
        assert_eq!(v.stats().rows_written, (THREADS * BATCHES * ROWS) as u64);
    }
    let v = open(d.path());
    for t in 0..THREADS {
        let r = rows(&v, &format!("dev{t}"));
        assert_eq!(r.len(), (BATCHES * ROWS) as usize);
        for (i, row) in r.iter().enumerate() {
            assert_eq!(row.0, i as i64);
            assert_eq!(row.1, f((t * 1000 + i as i64 / ROWS) as f64));
        }
    }
}

#[test]
fn drops_and_creates_are_durable() {
    let d = tempfile::tempdir().unwrap();
    let (uid_a, uid_b);
    {
        let v = open(d.path());
        let s = schema(1);
        let t = |n: &str| (n.to_string(), vec![Value::Str(n.into()), Value::Int(1)]);
        assert_eq!(
            v.create_tables(&s, &[t("a"), t("b"), t("c")], false)
                .unwrap(),
            3
        );
        let e = v.create_tables(&s, &[t("d"), t("a")], false).unwrap_err();
        assert!(matches!(&e, VnodeError::TableExists { table } if table == "a"));
        assert_eq!(e.status_code(), StatusCode::TableExists);
        assert!(v.table("d").is_none(), "all-or-nothing");
        assert_eq!(v.create_tables(&s, &[t("d"), t("a")], true).unwrap(), 1);
        let e = v
            .create_tables(&s, &[("e".into(), vec![Value::Int(1)])], false)
            .unwrap_err();
        assert_eq!(e.status_code(), StatusCode::TypeMismatch);
        uid_a = v.table("a").unwrap().uid;
        uid_b = v.table("b").unwrap().uid;
        v.write(&batch(vec![tw("a", None, &[(1, Some(1.0), None, None)])]))
            .unwrap();
        v.flush().unwrap();
        assert!(v.drop_table("a").unwrap());
        assert!(!v.drop_table("a").unwrap());
        assert!(v.scan(uid_a, 0, 10, &[0]).is_err());
        // other stable
        let mut s2 = schema(1);
        s2.name = "other".into();
        v.create_tables(&s2, &[t("x")], false).unwrap();
    }
    {
        let v = open(d.path());
        assert!(v.table("a").is_none());
        assert_eq!(v.table("b").unwrap().uid, uid_b);
        // Re-creating a dropped name gets a new uid and none of the old data.
        v.write(&batch(vec![tw("a", tags("new"), &[(5, None, None, None)])]))
            .unwrap();
        let a = v.table("a").unwrap();
        assert_ne!(a.uid, uid_a);
        assert_eq!(rows(&v, "a").len(), 1);
        assert_eq!(v.drop_stable("meters").unwrap(), 4);
        assert_eq!(v.drop_stable("meters").unwrap(), 0);
        assert!(v.stable_schema("meters").is_none());
    }
    let v = open(d.path());
    assert_eq!(
        v.tables(None)
            .iter()
            .map(|t| t.name.clone())
            .collect::<Vec<_>>(),
        ["x"]
    );
    assert!(v.stable_schema("meters").is_none());
    assert!(v.stable_schema("other").is_some());
    v.destroy().unwrap();
    assert!(!d.path().exists());
}

#[test]
fn newer_schema_in_a_batch_replaces_the_stored_one() {
    let d = tempfile::tempdir().unwrap();
    let v = open(d.path());
    v.write(&batch(vec![tw(
        "t1",
        tags("a"),
        &[(1, Some(1.0), None, None)],
    )]))
    .unwrap();
    v.flush().unwrap();
    write_with_schema_2(&v, "t1", 2, 42);
    // An old client with version 1 and 4 columns now mismatches.
    let e = v
        .write(&batch(vec![tw("t1", None, &[(3, None, None, None)])]))
        .unwrap_err();
    assert_eq!(e.status_code(), StatusCode::SchemaMismatch);
    drop(v);
    let v = open(d.path());
    assert_eq!(v.stable_schema("meters").unwrap().version, SchemaVersion(2));
    let uid = v.table("t1").unwrap().uid;
    let cols = v.scan(uid, 0, 10, &[0, 4]).unwrap();
    assert_eq!(cols[1].get(0), Value::Null); // written before the column existed
    assert_eq!(cols[1].get(1), Value::Int(42));
}

#[test]
fn many_flushes_merge_files_and_drop_dead_data() {
    let d = tempfile::tempdir().unwrap();
    let v = open(d.path());
    let n = 11i64;
    for i in 0..n {
        v.write(&batch(vec![
            tw(
                "keep",
                tags("a"),
                &[
                    (i, Some(i as f64), None, None),
                    (0, Some(100.0 + i as f64), None, None),
                ],
            ),
            tw("gone", tags("b"), &[(i, None, None, None)]),
        ]))
        .unwrap();
        if i == 2 {
            v.drop_table("gone").unwrap();
        }
        v.flush().unwrap();
    }
    v.compact().unwrap();
    let st = v.stats();
    assert_eq!(st.stt_files, 0, "{st:?}");
    assert_eq!(st.windows, 1, "{st:?}");
    let r = rows(&v, "keep");
    assert_eq!(r.len(), n as usize);
    assert_eq!(r[0].1, f(100.0 + (n - 1) as f64));
    assert_eq!(rows(&v, "gone").len(), n as usize - 3);
    drop(v);
    let v = open(d.path());
    assert_eq!(rows(&v, "keep").len(), n as usize);
    // Exactly the committed files remain: one window = data + sma + head.
    let files = std::fs::read_dir(d.path().join("tsdb")).unwrap().count();
    assert_eq!(files, 3);
}

#[test]
fn wal_level_1_is_recovered_after_reopen() {
    let d = tempfile::tempdir().unwrap();
    {
        let v = Vnode::open(d.path(), cfg_with(full(), 1)).unwrap();
        v.write(&batch(vec![tw(
            "t1",
            tags("a"),
            &[(1, Some(1.0), None, None)],
        )]))
        .unwrap();
    }
    {
        let mut cfg = cfg_with(full(), 1);
        cfg.options.wal_fsync_period_ms = 5;
        let d2 = tempfile::tempdir().unwrap();
        let v = Vnode::open(d2.path(), cfg).unwrap();
        v.write(&batch(vec![tw("t1", tags("a"), &[(1, None, None, None)])]))
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        drop(v); // stops the syncer thread
        assert_eq!(rows(&open(d2.path()), "t1").len(), 1);
    }
    // The persisted config wins over the one passed at reopen.
    let v = Vnode::open(d.path(), cfg_with(full(), 2)).unwrap();
    assert_eq!(v.config().options.wal_level, 1);
    assert_eq!(rows(&v, "t1").len(), 1);
}

/// Child half of the kill -9 test: writes until killed, printing every acknowledged ts.
#[test]
fn kill9_child_process() {
    use std::io::Write;
    let Ok(dir) = std::env::var("TIDAL_VNODE_KILL9_DIR") else {
        return; // only runs when spawned by `acknowledged_writes_survive_kill_9`
    };
    let v = open(Path::new(&dir));
    let mut out = std::io::stdout();
    for ts in 0i64.. {
        let table = format!("k{}", ts % 4);
        v.write(&batch(vec![tw(
            &table,
            tags("k"),
            &[(ts, Some(ts as f64), Some("payload"), Some(ts))],
        )]))
        .unwrap();
        writeln!(out, "ack {ts}").unwrap();
        out.flush().unwrap();
        if ts % 97 == 0 {
            v.flush().unwrap();
        }
    }
}

#[test]
fn acknowledged_writes_survive_kill_9() {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    let d = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "tests::kill9_child_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("TIDAL_VNODE_KILL9_DIR", d.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut acked = Vec::new();
    for line in std::io::BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        if let Some(ts) = line.strip_prefix("ack ") {
            acked.push(ts.parse::<i64>().unwrap());
            if acked.len() >= 400 {
                break;
            }
        }
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert_eq!(acked.len(), 400, "child stopped early");
    let v = open(d.path());
    let mut seen = HashSet::new();
    for k in 0..4 {
        for r in rows(&v, &format!("k{k}")) {
            assert!(seen.insert(r.0), "ts {} twice", r.0);
            assert_eq!(r.1, f(r.0 as f64));
        }
    }
    for ts in acked {
        assert!(seen.contains(&ts), "acknowledged ts {ts} lost");
    }
}

/// Rough throughput check: `cargo test --release -p tidal-vnode throughput -- --ignored --nocapture`.
#[test]
#[ignore]
fn throughput_smoke() {
    let d = tempfile::tempdir().unwrap();
    let v = Arc::new(open(d.path()));
    let start = std::time::Instant::now();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let v = v.clone();
            std::thread::spawn(move || {
                for b in 0..50i64 {
                    let tables = (0..50)
                        .map(|k| {
                            let rows: Vec<R> = (0..100)
                                .map(|r| (b * 100 + r, Some(r as f64), Some("abc"), Some(r)))
                                .collect();
                            tw(&format!("t{t}_{k}"), tags("x"), &rows)
                        })
                        .collect();
                    v.write(&batch(tables)).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let el = start.elapsed();
    let n = 4 * 50 * 50 * 100;
    println!(
        "{n} rows in {el:?}: {:.0} rows/s, {:?}",
        n as f64 / el.as_secs_f64(),
        v.stats()
    );
    let start = std::time::Instant::now();
    let uid = v.table("t0_0").unwrap().uid;
    for _ in 0..100 {
        v.scan(uid, 0, i64::MAX, &[0, 1]).unwrap();
    }
    println!("100 scans of 5000 rows: {:?}", start.elapsed());
}

#[test]
fn vnode_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Vnode>();
    check::<VnodeError>();
}

#[test]
fn stable_tables_follow_creates_drops_and_schema_changes() {
    let d = tempfile::tempdir().unwrap();
    let v = open(d.path());
    let s = schema(1);
    let t = |n: &str, loc: &str| (n.to_string(), vec![Value::Str(loc.into()), Value::Int(1)]);
    v.create_tables(
        &s,
        &[t("c", "north"), t("a", "south"), t("b", "north")],
        false,
    )
    .unwrap();
    let mut s2 = schema(1);
    s2.name = "other".into();
    v.create_tables(&s2, &[t("x", "west")], false).unwrap();
    let names = |st: &StableTables| (0..st.len()).map(|i| st.names.get(i)).collect::<Vec<_>>();
    let st = v.stable_tables("meters").unwrap();
    assert_eq!(names(&st), ["a", "b", "c"].map(|n| Value::Str(n.into())));
    assert_eq!(st.tags[0].get(0), Value::Str("south".into()));
    assert_eq!(
        st.candidates_eq(0, &[Value::Str("north".into())]),
        Some(vec![1, 2])
    );
    // Unchanged: the same snapshot.
    assert!(Arc::ptr_eq(&st, &v.stable_tables("meters").unwrap()));
    // A new subtable of another STABLE leaves this one's snapshot current.
    v.create_tables(&s2, &[t("y", "west")], false).unwrap();
    assert!(Arc::ptr_eq(&st, &v.stable_tables("meters").unwrap()));

    v.create_tables(&s, &[t("d", "east")], false).unwrap();
    let st2 = v.stable_tables("meters").unwrap();
    assert_eq!(
        names(&st2),
        ["a", "b", "c", "d"].map(|n| Value::Str(n.into()))
    );
    assert!(v.drop_table("b").unwrap());
    let st3 = v.stable_tables("meters").unwrap();
    assert_eq!(names(&st3), ["a", "c", "d"].map(|n| Value::Str(n.into())));
    assert_eq!(
        st3.candidates_eq(0, &[Value::Str("north".into())]),
        Some(vec![1])
    );

    // With the snapshot current, LAST_ROW over the STABLE still refuses another STABLE's
    // subtable and skips a dropped one.
    v.write(&batch(vec![tw("a", None, &[(1, Some(1.0), None, None)])]))
        .unwrap();
    let a = v.table("a").unwrap().uid;
    let x = v.table("x").unwrap().uid;
    let (pos, cols) = v
        .last_rows_columns("meters", &[a, TableUid(9999)], &[0, 1])
        .unwrap();
    assert_eq!(pos, [0]);
    assert_eq!(cols[1].get(0), Value::Float(1.0));
    assert!(v.last_rows_columns("meters", &[a, x], &[0]).is_err());

    // A newer schema (a column added) makes a new snapshot.
    write_with_schema_2(&v, "a", 2, 42);
    let st4 = v.stable_tables("meters").unwrap();
    assert_ne!(st4.version, st3.version);
    assert_eq!(names(&st4), names(&st3));
    drop(v);
    let v = open(d.path());
    assert_eq!(names(&v.stable_tables("meters").unwrap()), names(&st3));
    assert_eq!(v.drop_stable("meters").unwrap(), 3);
    assert!(v.stable_tables("meters").is_none());
    assert_eq!(v.stable_tables("other").unwrap().len(), 2);
}

/// The distribution finds each row in the layer that holds it: memtable, then STT files after
/// a flush, then data blocks of at most MAXROWS rows after a compaction; other subtables' rows
/// are not counted.
#[test]
fn distribution_follows_rows_through_the_layers() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = cfg_with(full(), 2);
    cfg.options.minrows = 10;
    cfg.options.maxrows = 100;
    let v = Vnode::open(dir.path(), cfg).unwrap();
    let rows_of = |n: i64, from: i64| -> Vec<R> {
        (0..n)
            .map(|i| (from + i * 1000, Some(1.0), None, None))
            .collect()
    };
    v.write(&batch(vec![
        tw("a", tags("x"), &rows_of(250, 1_700_000_000_000)),
        tw("b", tags("y"), &rows_of(7, 1_700_000_000_000)),
    ]))
    .unwrap();
    let a = v.table("a").unwrap().uid;
    let b = v.table("b").unwrap().uid;
    let d = v.distribution(&[a]);
    assert_eq!(
        (d.tables, d.mem_rows, d.stt_rows, d.block_rows),
        (1, 250, 0, 0)
    );
    assert_eq!((d.blocks, d.min_block_rows, d.max_block_rows), (0, 0, 0));
    v.flush().unwrap();
    let d = v.distribution(&[a]);
    assert_eq!((d.mem_rows, d.stt_rows, d.block_rows), (0, 250, 0));
    assert!(
        d.stt_blocks > 0 && d.stt_bytes > 0 && d.windows > 0,
        "{d:?}"
    );
    v.compact().unwrap();
    let d = v.distribution(&[a]);
    assert_eq!((d.mem_rows, d.stt_rows, d.block_rows), (0, 0, 250), "{d:?}");
    assert!(d.blocks >= 3, "at most 100 rows a block: {d:?}");
    assert!(d.max_block_rows <= 100 && d.min_block_rows >= 1, "{d:?}");
    assert!(d.block_bytes > 0);
    let both = v.distribution(&[a, b]);
    assert_eq!((both.tables, both.block_rows), (2, 257));
    // More rows of `a` in the memtable only.
    v.write(&batch(vec![tw("a", None, &rows_of(3, 1_800_000_000_000))]))
        .unwrap();
    let d = v.distribution(&[a]);
    assert_eq!((d.mem_rows, d.block_rows), (3, 250));
    assert_eq!(v.distribution(&[TableUid(u64::MAX)]).block_rows, 0);
}

/// ALTER TABLE .. SET TAG: the subtable keeps its uid and rows, the tag indexes and the
/// STABLE's snapshot see the new values at once, and they survive a WAL replay and a flush
/// (after which the WAL is gone and the manifest's catalog carries them).
#[test]
fn set_tags_moves_a_subtable_between_tag_values_durably() {
    let d = tempfile::tempdir().unwrap();
    let s = schema(1);
    let t = |n: &str, loc: &str| (n.to_string(), vec![Value::Str(loc.into()), Value::Int(1)]);
    let names_of = |ts: Vec<Arc<TableMeta>>| ts.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
    let loc = |x: &str| vec![Value::Str(x.into())];
    let uid_a;
    {
        let v = open(d.path());
        v.create_tables(
            &s,
            &[t("a", "north"), t("b", "north"), t("c", "south")],
            false,
        )
        .unwrap();
        v.write(&batch(vec![tw("a", None, &[(1, Some(1.0), None, None)])]))
            .unwrap();
        uid_a = v.table("a").unwrap().uid;
        // An index on `gid` exists before the change, so it must be kept in step too.
        assert_eq!(
            names_of(v.tables_by_tag("meters", 1, &[Value::Int(1)])),
            ["a", "b", "c"]
        );
        let before = v.stable_tables("meters").unwrap();
        assert_eq!(
            before.candidates_eq(0, &[Value::Str("north".into())]),
            Some(vec![0, 1])
        );

        let a = v
            .set_tags(
                "a",
                &[
                    ("loc".into(), Value::Str("south".into())),
                    // tag names are matched without regard to case; an integer literal is
                    // coerced to the tag's INT
                    ("GID".into(), Value::UInt(2)),
                ],
            )
            .unwrap();
        assert_eq!(a.uid, uid_a);
        assert_eq!(
            a.tags.to_vec(),
            vec![Value::Str("south".into()), Value::Int(2)]
        );
        assert_eq!(names_of(v.tables_by_tag("meters", 0, &loc("north"))), ["b"]);
        assert_eq!(
            names_of(v.tables_by_tag("meters", 0, &loc("south"))),
            ["a", "c"]
        );
        assert_eq!(
            names_of(v.tables_by_tag("meters", 1, &[Value::Int(2)])),
            ["a"]
        );
        let after = v.stable_tables("meters").unwrap();
        assert_ne!(after.version, before.version, "the snapshot is rebuilt");
        assert_eq!(after.tags[0].get(0), Value::Str("south".into()));
        assert_eq!(
            after.candidates_eq(0, &[Value::Str("north".into())]),
            Some(vec![1])
        );
        assert_eq!(rows(&v, "a").len(), 1, "the rows stay with the subtable");
        v.set_tags("b", &[("gid".into(), Value::Null)]).unwrap();

        // Errors change nothing.
        let e = v
            .set_tags("nosuch", &[("loc".into(), Value::Str("x".into()))])
            .unwrap_err();
        assert!(matches!(&e, VnodeError::SubtableNotFound { table } if table == "nosuch"));
        assert_eq!(e.status_code(), StatusCode::TableNotFound);
        let e = v
            .set_tags("a", &[("driver".into(), Value::Str("x".into()))])
            .unwrap_err();
        assert_eq!(e.status_code(), StatusCode::ColumnNotFound);
        let msg = e.to_string();
        assert!(
            msg.contains("'driver'") && msg.contains("'meters'"),
            "{msg}"
        );
        let e = v
            .set_tags(
                "a",
                &[
                    ("loc".into(), Value::Str("east".into())),
                    ("gid".into(), Value::Str("two".into())),
                ],
            )
            .unwrap_err();
        assert_eq!(e.status_code(), StatusCode::TypeMismatch, "{e}");
        let e = v
            .set_tags("a", &[("loc".into(), Value::Str("x".repeat(17)))])
            .unwrap_err();
        assert_eq!(e.status_code(), StatusCode::TypeMismatch, "{e}");
        let e = v
            .set_tags(
                "a",
                &[
                    ("loc".into(), Value::Str("x".into())),
                    ("LOC".into(), Value::Str("y".into())),
                ],
            )
            .unwrap_err();
        assert_eq!(e.status_code(), StatusCode::InvalidArgument, "{e}");
        let e = v.set_tags("a", &[]).unwrap_err();
        assert_eq!(e.status_code(), StatusCode::InvalidArgument, "{e}");
        assert_eq!(
            v.table("a").unwrap().tags.to_vec(),
            vec![Value::Str("south".into()), Value::Int(2)]
        );
    }
    // Replayed from the WAL.
    {
        let v = open(d.path());
        let a = v.table("a").unwrap();
        assert_eq!(a.uid, uid_a);
        assert_eq!(
            a.tags.to_vec(),
            vec![Value::Str("south".into()), Value::Int(2)]
        );
        assert_eq!(
            v.table("b").unwrap().tags.to_vec(),
            vec![Value::Str("north".into()), Value::Null]
        );
        assert_eq!(
            names_of(v.tables_by_tag("meters", 0, &loc("south"))),
            ["a", "c"]
        );
        assert_eq!(rows(&v, "a").len(), 1);
        v.set_tags("c", &[("loc".into(), Value::Str("east".into()))])
            .unwrap();
        v.flush().unwrap();
    }
    // After a flush the WAL records are gone: the manifest's catalog snapshot carries them.
    let v = open(d.path());
    assert_eq!(names_of(v.tables_by_tag("meters", 0, &loc("east"))), ["c"]);
    assert_eq!(names_of(v.tables_by_tag("meters", 0, &loc("south"))), ["a"]);
    let st = v.stable_tables("meters").unwrap();
    assert_eq!(
        (0..st.len()).map(|i| st.tags[0].get(i)).collect::<Vec<_>>(),
        ["south", "north", "east"].map(|x| Value::Str(x.into()))
    );
    assert_eq!(
        st.candidates_eq(1, &[Value::Int(2)]),
        Some(vec![0]),
        "the second tag's equality index sees the new value"
    );
    assert_eq!(rows(&v, "a").len(), 1);
}

/// A subtable outside the vnode's hash range is a stale route, told as such, not "not found".
#[test]
fn set_tags_outside_the_hash_range_is_a_wrong_vgroup() {
    let d = tempfile::tempdir().unwrap();
    let name = "a";
    let h = hash_table_name(DB, name);
    let range = if h == 0 {
        HashRange {
            begin: 1,
            end: u32::MAX,
        }
    } else {
        HashRange {
            begin: 0,
            end: h - 1,
        }
    };
    let v = Vnode::open(d.path(), cfg_with(range, 2)).unwrap();
    let e = v
        .set_tags(name, &[("loc".into(), Value::Str("x".into()))])
        .unwrap_err();
    assert_eq!(e.status_code(), StatusCode::WrongVgroup, "{e}");
}

/// A window dense with a subtable's rows is searched newest first in ranges that cover it
/// without gap or overlap, the newest ones short; scanning range by range gives every row once.
/// A sparse subtable's window stays whole.
#[test]
fn a_dense_window_is_searched_newest_first_in_ranges_that_cover_it() {
    let d = tempfile::tempdir().unwrap();
    let v = open(d.path());
    let dense: Vec<R> = (0..3000)
        .map(|i| (i * 1000, Some(i as f64), None, None))
        .collect();
    v.write(&batch(vec![
        tw("dense", tags("a"), &dense),
        tw("sparse", tags("b"), &[(5, Some(1.0), None, None)]),
    ]))
    .unwrap();
    v.flush().unwrap();
    // A memtable row newer than the files belongs to the newest range.
    v.write(&batch(vec![tw(
        "dense",
        None,
        &[(3_000_000, Some(-1.0), None, None)],
    )]))
    .unwrap();
    let uid = v.table("dense").unwrap().uid;
    let ranges = v.ranges_desc(uid).unwrap();
    assert!(ranges.len() > 2, "{ranges:?}");
    for w in ranges.windows(2) {
        assert_eq!(w[1].1 + 1, w[0].0, "contiguous, newest first: {ranges:?}");
    }
    let (newest, oldest) = (ranges[0], ranges[ranges.len() - 1]);
    assert!(
        newest.0 > 2_000_000,
        "the newest range is short: {ranges:?}"
    );
    let whole = v.ranges_desc(v.table("sparse").unwrap().uid).unwrap();
    assert_eq!(whole.len(), 1, "{whole:?}");
    assert_eq!((oldest.0, newest.1), whole[0], "the same window, split");
    let mut ts = Vec::new();
    for (lo, hi) in ranges.iter().rev() {
        let cols = v.scan(uid, *lo, *hi, &[0, 1]).unwrap();
        ts.extend((0..cols[0].len()).map(|i| cols[0].get(i)));
    }
    let want: Vec<Value> = (0..=3000).map(|i| Value::Timestamp(i * 1000)).collect();
    assert_eq!(ts, want);
}
