//! Storage-engine tests: a randomized model test across flushes, merges, compactions and
//! restarts; corruption of every file type; SMA answers; retention; back-pressure.

use super::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use tidal_common::{ColumnDef, SchemaVersion, TableWrite};

const DB: &str = "db";
const MINUTE_MS: i64 = 60_000;

fn schema() -> StableSchema {
    StableSchema {
        db: DB.into(),
        name: "m".into(),
        version: SchemaVersion(1),
        columns: vec![
            ColumnDef::new("ts", DataType::Timestamp),
            ColumnDef::new("v", DataType::Double),
            ColumnDef::new("s", DataType::VarChar(16)),
            ColumnDef::new("n", DataType::BigInt),
        ],
        tags: vec![ColumnDef::new("loc", DataType::VarChar(16))],
    }
}

/// Small windows (1 minute), small blocks and an STT trigger of 2 so that a few hundred rows
/// exercise every layer.
fn cfg(buffer_mb: u32) -> VnodeConfig {
    VnodeConfig {
        vgroup: VgroupId(1),
        db: DB.into(),
        range: HashRange {
            begin: 0,
            end: u32::MAX,
        },
        options: DbOptions {
            buffer_mb,
            duration_minutes: 1,
            stt_trigger: 2,
            minrows: 10,
            maxrows: 50,
            ..DbOptions::default()
        },
    }
}

type Row = (Option<f64>, Option<String>, Option<i64>);

/// `rows` as the columns of [`schema`].
fn columns_of(rows: &[(i64, Row)]) -> Vec<Column> {
    let mut cols: Vec<Column> = schema()
        .columns
        .iter()
        .map(|c| Column::empty(c.data_type, 0))
        .collect();
    for (ts, (a, b, c)) in rows {
        cols[0].push(&Value::Timestamp(*ts));
        cols[1].push(&a.map(Value::Float).unwrap_or(Value::Null));
        cols[2].push(&b.clone().map(Value::Str).unwrap_or(Value::Null));
        cols[3].push(&c.map(Value::Int).unwrap_or(Value::Null));
    }
    cols
}

fn write(v: &Vnode, table: &str, rows: &[(i64, Row)]) {
    let s = schema();
    let cols = columns_of(rows);
    v.write(&WriteBatch {
        db: DB.into(),
        vgroup: VgroupId(1),
        schemas: vec![s],
        tables: vec![TableWrite {
            table: table.into(),
            stable: "m".into(),
            tags: Some(vec![Value::Str("x".into())]),
            columns: cols,
        }],
        blocks: Vec::new(),
    })
    .unwrap();
}

fn value_row(cols: &[Column], i: usize) -> Row {
    let a = match cols[1].get(i) {
        Value::Float(x) => Some(x),
        _ => None,
    };
    let b = match cols[2].get(i) {
        Value::Str(x) => Some(x),
        _ => None,
    };
    let c = match cols[3].get(i) {
        Value::Int(x) => Some(x),
        _ => None,
    };
    (a, b, c)
}

fn scan_all(v: &Vnode, table: &str, lo: i64, hi: i64) -> Vec<(i64, Row)> {
    let Some(t) = v.table(table) else {
        return Vec::new();
    };
    let cols = v.scan(t.uid, lo, hi, &[0, 1, 2, 3]).unwrap();
    (0..cols[0].len())
        .map(|i| {
            let Value::Timestamp(ts) = cols[0].get(i) else {
                panic!("ts column")
            };
            (ts, value_row(&cols, i))
        })
        .collect()
}

type Model = BTreeMap<String, BTreeMap<i64, Row>>;

fn check(v: &Vnode, model: &Model, rng: &mut StdRng, step: usize) {
    for (t, rows) in model {
        let got = scan_all(v, t, i64::MIN, i64::MAX);
        let want: Vec<(i64, Row)> = rows.iter().map(|(k, r)| (*k, r.clone())).collect();
        assert_eq!(got, want, "table {t} after step {step}");
        let lo = rng.random_range(0..6 * MINUTE_MS);
        let hi = lo + rng.random_range(0..3 * MINUTE_MS);
        let got = scan_all(v, t, lo, hi);
        let want: Vec<(i64, Row)> = rows.range(lo..=hi).map(|(k, r)| (*k, r.clone())).collect();
        assert_eq!(got, want, "table {t} range {lo}..={hi} after step {step}");
        // Aggregates from SMA pieces agree with the rows.
        let uid = v.table(t).unwrap().uid;
        let pieces = v.scan_pieces(uid, lo, hi, &[1, 3]).unwrap();
        let (mut count, mut sum) = (0u64, 0i64);
        for p in pieces {
            match p {
                ScanPiece::Rows(c) => {
                    for i in 0..c[1].len() {
                        if let Value::Int(x) = c[1].get(i) {
                            count += 1;
                            sum += x;
                        }
                    }
                }
                ScanPiece::Sma { stats, .. } => {
                    count += stats[1].count as u64;
                    if let SmaVal::Int(x) = stats[1].sum {
                        sum += x;
                    } else {
                        assert_eq!(stats[1].count, 0, "int sum missing");
                    }
                }
            }
        }
        let want_n: Vec<i64> = rows.range(lo..=hi).filter_map(|(_, r)| r.2).collect();
        assert_eq!(
            count,
            want_n.len() as u64,
            "count(n) {t} {lo}..={hi} step {step}"
        );
        assert_eq!(sum, want_n.iter().sum::<i64>(), "sum(n) {t} step {step}");
        // A filtered scan (v > x, blocks pruned by their max of v) keeps every passing row.
        let x = rng.random_range(-120.0..120.0f64);
        let skipped = std::cell::Cell::new(0u32);
        let may_match = |_rows: u32, stats: &[ColStats]| {
            let m = stats[0].count > 0 && matches!(stats[0].max, SmaVal::Float(m) if m > x);
            skipped.set(skipped.get() + u32::from(!m));
            m
        };
        let cols = v
            .scan_filtered(uid, lo, hi, &[0, 1, 2, 3], &[1], &may_match)
            .unwrap();
        let got: Vec<(i64, Row)> = (0..cols[0].len())
            .map(|i| (cols[0].get(i).as_i64().unwrap(), value_row(&cols, i)))
            .filter(|(_, r)| r.0.is_some_and(|a| a > x))
            .collect();
        let want: Vec<(i64, Row)> = rows
            .range(lo..=hi)
            .filter(|(_, r)| r.0.is_some_and(|a| a > x))
            .map(|(k, r)| (*k, r.clone()))
            .collect();
        assert_eq!(got, want, "{t} v > {x} in {lo}..={hi} step {step}");
        PRUNED_BLOCKS.fetch_add(
            u64::from(skipped.get()),
            std::sync::atomic::Ordering::Relaxed,
        );
    }
    // Many subtables in one call: each one's rows, as its own (filtered) scan gives them.
    let uids: Vec<TableUid> = model
        .keys()
        .filter_map(|t| v.table(t))
        .map(|t| t.uid)
        .collect();
    let lo = rng.random_range(0..6 * MINUTE_MS);
    let hi = lo + rng.random_range(0..4 * MINUTE_MS);
    let x = rng.random_range(-120.0..120.0f64);
    let may_match = |_rows: u32, stats: &[ColStats]| {
        stats[0].count > 0 && matches!(stats[0].max, SmaVal::Float(m) if m > x)
    };
    let wanted_rows = |cols: &[Column], filtered: bool| -> Vec<(i64, Row)> {
        (0..cols[0].len())
            .map(|i| (cols[0].get(i).as_i64().unwrap(), value_row(cols, i)))
            .filter(|(_, r)| !filtered || r.0.is_some_and(|a| a > x))
            .collect()
    };
    for filtered in [false, true] {
        let m: Option<&MayMatch<'_>> = filtered.then_some(&may_match);
        let (counts, all) = v.scan_many(&uids, lo, hi, &[0, 1, 2, 3], &[1], m).unwrap();
        assert_eq!(counts.len(), uids.len());
        let mut at = 0;
        for (uid, c) in uids.iter().zip(&counts) {
            let one: Vec<Column> = all.iter().map(|col| col.slice(at, at + c)).collect();
            at += c;
            let alone = v.scan(*uid, lo, hi, &[0, 1, 2, 3]).unwrap();
            assert_eq!(
                wanted_rows(&one, filtered),
                wanted_rows(&alone, filtered),
                "scan_many (filtered {filtered}) of uid {} in {lo}..={hi} step {step}",
                uid.0
            );
        }
        assert_eq!(at, all.first().map(Column::len).unwrap_or(0));
    }
}

/// Data blocks the filtered scans in [`check`] left out (the model test asserts some were).
static PRUNED_BLOCKS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// DELETE of a random range from one or two random tables, applied to the model too; checks
/// the row count the vnode reports.
fn random_delete(v: &Vnode, model: &mut Model, rng: &mut StdRng) -> u64 {
    let names: Vec<String> = (0..rng.random_range(1..3))
        .map(|_| format!("t{}", rng.random_range(0..5)))
        .collect();
    let lo = rng.random_range(0..6 * MINUTE_MS);
    let hi = lo + rng.random_range(0..2 * MINUTE_MS);
    let uids: Vec<TableUid> = names
        .iter()
        .filter_map(|n| v.table(n).map(|t| t.uid))
        .collect();
    let mut want = 0;
    let mut seen = std::collections::HashSet::new();
    for n in &names {
        if !seen.insert(n.clone()) {
            continue;
        }
        if let Some(m) = model.get_mut(n) {
            let gone: Vec<i64> = m.range(lo..=hi).map(|(k, _)| *k).collect();
            want += gone.len() as u64;
            for k in gone {
                m.remove(&k);
            }
        }
    }
    assert_eq!(
        v.delete(&uids, lo, hi).unwrap(),
        want,
        "DELETE {names:?} {lo}..={hi}"
    );
    want
}

/// A row's values, each non-NULL with its probability in `present`.
fn random_values(rng: &mut StdRng, present: [f64; 3]) -> Row {
    let a = rng
        .random_bool(present[0])
        .then(|| rng.random_range(-100.0..100.0f64));
    let b = rng
        .random_bool(present[1])
        .then(|| format!("s{}", rng.random_range(0..5)));
    let c = rng
        .random_bool(present[2])
        .then(|| rng.random_range(-1000..1000i64));
    (a, b, c)
}

fn random_rows(rng: &mut StdRng) -> Vec<(i64, Row)> {
    let n = rng.random_range(1..80);
    let base = rng.random_range(0..6 * MINUTE_MS);
    let mut out = Vec::new();
    for i in 0..n {
        // Mostly ascending near `base`, sometimes anywhere (out of order), with repeats.
        let ts = if rng.random_bool(0.8) {
            base + i * rng.random_range(1..2000)
        } else {
            rng.random_range(0..6 * MINUTE_MS)
        };
        out.push((ts, random_values(rng, [0.85, 0.8, 0.9])));
    }
    out
}

#[test]
fn random_writes_flushes_merges_and_restarts_match_a_model() {
    for seed in 0..4u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let d = tempfile::tempdir().unwrap();
        let mut v = Vnode::open(d.path(), cfg(1)).unwrap();
        let mut model: Model = BTreeMap::new();
        let mut flushes = 0;
        let mut deleted = 0;
        for step in 0..120 {
            match rng.random_range(0..100) {
                0..=63 => {
                    let t = format!("t{}", rng.random_range(0..5));
                    let rows = random_rows(&mut rng);
                    // Within one batch the later copy of a ts wins, as across batches.
                    write(&v, &t, &rows);
                    let m = model.entry(t).or_default();
                    for (ts, r) in rows {
                        m.insert(ts, r);
                    }
                }
                64..=69 => deleted += random_delete(&v, &mut model, &mut rng),
                70..=81 => v.flush().unwrap(),
                82..=87 => v.compact().unwrap(),
                88..=93 => {
                    flushes += v.stats().flushes;
                    drop(v);
                    v = Vnode::open(d.path(), cfg(1)).unwrap();
                }
                _ => {
                    let t = format!("t{}", rng.random_range(0..5));
                    v.drop_table(&t).unwrap();
                    model.remove(&t);
                }
            }
            check(&v, &model, &mut rng, step);
        }
        flushes += v.stats().flushes;
        assert!(flushes > 0);
        assert!(deleted > 0, "seed {seed}: no DELETE removed a row");
        drop(v);
        let v = Vnode::open(d.path(), cfg(1)).unwrap();
        check(&v, &model, &mut rng, usize::MAX);
    }
    let pruned = PRUNED_BLOCKS.load(std::sync::atomic::Ordering::Relaxed);
    assert!(pruned > 10, "filtered scans left out only {pruned} blocks");
    let whole = crate::tsdb::WHOLE_DATA_SETS_PRUNED.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        whole > 0,
        "no scan of many subtables left out a whole data set"
    );
    let short = crate::SCAN_MANY_SHORT_CIRCUITS.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        short > 0,
        "no scan of many subtables was answered without reading a subtable"
    );
}

#[test]
fn background_flush_and_merge_keep_every_row_under_a_small_buffer() {
    let d = tempfile::tempdir().unwrap();
    let v = Vnode::open(d.path(), cfg(1)).unwrap();
    let mut model: Model = BTreeMap::new();
    let big = "x".repeat(200);
    for b in 0..300i64 {
        let rows: Vec<(i64, Row)> = (0..50)
            .map(|i| {
                let ts = (b * 50 + i) * 100;
                (ts, (Some(ts as f64), Some(big.clone()), Some(ts)))
            })
            .collect();
        let t = format!("t{}", b % 3);
        write(&v, &t, &rows);
        model.entry(t).or_default().extend(rows);
    }
    // Let the worker finish what it was handed.
    v.flush().unwrap();
    let st = v.stats();
    assert!(st.flushes >= 2, "{st:?}");
    assert!(st.merges >= 1, "{st:?}");
    let mut rng = StdRng::seed_from_u64(1);
    check(&v, &model, &mut rng, 0);
}

/// Writes data in three windows and returns the directory.
fn three_windows() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let v = Vnode::open(d.path(), cfg(1)).unwrap();
    for w in 0..3i64 {
        let rows: Vec<(i64, Row)> = (0..30)
            .map(|i| {
                (
                    w * MINUTE_MS + i,
                    (Some(i as f64), Some("a".into()), Some(i)),
                )
            })
            .collect();
        write(&v, "t", &rows);
        v.flush().unwrap();
    }
    v.compact().unwrap(); // windows 0..3 now have data/sma/head files
    let rows: Vec<(i64, Row)> = (0..30)
        .map(|i| (3 * MINUTE_MS + i, (None, None, Some(i))))
        .collect();
    write(&v, "t", &rows);
    v.flush().unwrap(); // window 3 has an STT file
    d
}

fn files_named(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir.join("tsdb"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    v.sort();
    v
}

fn fid_of_path(p: &Path) -> i64 {
    let name = p.file_name().unwrap().to_string_lossy().to_string();
    name[1..name.find('.').unwrap()].parse().unwrap()
}

#[test]
fn damage_to_any_file_type_is_a_typed_error_and_other_windows_keep_serving() {
    for suffix in [".data", ".sma", ".head", ".stt"] {
        for mode in ["flip", "truncate"] {
            let d = three_windows();
            let victim = files_named(d.path(), suffix).into_iter().next().unwrap();
            let fid = fid_of_path(&victim);
            let mut bytes = std::fs::read(&victim).unwrap();
            match mode {
                "flip" => {
                    // Flip a bit in every 7th byte: some land in checksummed regions.
                    let n = bytes.len();
                    for i in (n / 3..n).step_by(7) {
                        bytes[i] ^= 0x10;
                    }
                }
                _ => bytes.truncate(bytes.len() / 2),
            }
            std::fs::write(&victim, &bytes).unwrap();
            let v = Vnode::open(d.path(), cfg(1)).unwrap();
            let uid = v.table("t").unwrap().uid;
            let (lo, hi) = (fid * MINUTE_MS, fid * MINUTE_MS + MINUTE_MS - 1);
            let hit = if suffix == ".sma" {
                v.scan_pieces(uid, lo, hi, &[1, 3]).map(|_| ())
            } else {
                v.scan(uid, lo, hi, &[0, 1, 2, 3]).map(|_| ())
            };
            match hit {
                Err(VnodeError::Corruption { .. }) => {}
                other => panic!("{suffix} {mode}: expected a corruption error, got {other:?}"),
            }
            // Every other window still answers.
            for w in (0..4).filter(|w| *w != fid) {
                let rows = scan_all(&v, "t", w * MINUTE_MS, w * MINUTE_MS + MINUTE_MS - 1);
                assert_eq!(rows.len(), 30, "{suffix} {mode}: window {w}");
            }
        }
    }
}

#[test]
fn sma_answers_whole_blocks_and_rows_answer_the_rest() {
    let d = three_windows();
    let v = Vnode::open(d.path(), cfg(1)).unwrap();
    let uid = v.table("t").unwrap().uid;
    let pieces = v.scan_pieces(uid, 0, 4 * MINUTE_MS, &[1, 3]).unwrap();
    let sma: Vec<_> = pieces
        .iter()
        .filter_map(|p| match p {
            ScanPiece::Sma { rows, stats, .. } => Some((*rows, stats.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(sma.len(), 3, "three compacted windows answer from SMA");
    for (rows, stats) in &sma {
        assert_eq!(*rows, 30);
        assert_eq!(stats[0].count, 30);
        assert_eq!(stats[0].min, SmaVal::Float(0.0));
        assert_eq!(stats[0].max, SmaVal::Float(29.0));
        assert_eq!(stats[1].sum, SmaVal::Int((0..30).sum()));
    }
    // A range that cuts a block falls back to rows for it.
    let pieces = v.scan_pieces(uid, 5, MINUTE_MS - 1, &[3]).unwrap();
    assert!(matches!(pieces.as_slice(), [ScanPiece::Rows(c)] if c[0].len() == 25));
    // A newer row overlapping a block turns the block into rows too.
    write(&v, "t", &[(10, (Some(1000.0), None, Some(1000)))]);
    let pieces = v.scan_pieces(uid, 0, MINUTE_MS - 1, &[3]).unwrap();
    let total: i64 = pieces
        .iter()
        .map(|p| match p {
            ScanPiece::Rows(c) => (0..c[0].len())
                .map(|i| match c[0].get(i) {
                    Value::Int(x) => x,
                    _ => 0,
                })
                .sum(),
            ScanPiece::Sma { stats, .. } => match stats[0].sum {
                SmaVal::Int(x) => x,
                _ => 0,
            },
        })
        .sum();
    assert_eq!(total, (0..30).sum::<i64>() - 10 + 1000);
}

#[test]
fn keep_drops_whole_windows_and_refuses_older_writes() {
    let d = three_windows();
    // Shorten KEEP as ALTER DATABASE would: every window (1970) is now past retention.
    let path = d.path().join(CONFIG_FILE);
    let mut c: VnodeConfig = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    c.options.keep_minutes = 24 * 60;
    std::fs::write(&path, serde_json::to_vec(&c).unwrap()).unwrap();
    let v = Vnode::open(d.path(), c).unwrap();
    assert_eq!(scan_all(&v, "t", i64::MIN, i64::MAX).len(), 120);
    v.compact().unwrap();
    assert_eq!(scan_all(&v, "t", i64::MIN, i64::MAX).len(), 0);
    assert_eq!(v.stats().windows, 0);
    assert!(files_named(d.path(), "").is_empty());
    let s = schema();
    let cols = vec![
        Column::new(ColumnData::Timestamp(vec![5])),
        Column::new(ColumnData::Float(vec![1.0])),
        Column::new(ColumnData::Str(vec!["a".into()])),
        Column::new(ColumnData::Int(vec![1])),
    ];
    let e = v
        .write(&WriteBatch {
            db: DB.into(),
            vgroup: VgroupId(1),
            schemas: vec![s],
            tables: vec![TableWrite {
                table: "t".into(),
                stable: "m".into(),
                tags: None,
                columns: cols,
            }],
            blocks: Vec::new(),
        })
        .unwrap_err();
    assert!(matches!(e, VnodeError::TimestampOutOfRange { .. }), "{e}");
}

/// Writes seed corpora for the vnode fuzz targets from real files:
/// `cargo test -p tidal-vnode write_fuzz_seeds -- --ignored`.
#[test]
#[ignore]
fn write_fuzz_seeds() {
    let d = three_windows();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus");
    let put = |target: &str, name: &str, bytes: &[u8]| {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(name), bytes).unwrap();
    };
    for (i, p) in files_named(d.path(), ".stt").iter().enumerate() {
        put(
            "vnode_stt_file",
            &format!("seed{i}"),
            &std::fs::read(p).unwrap(),
        );
    }
    // Small subtables sharing blocks (STT version 3 views).
    let shared = tempfile::tempdir().unwrap();
    let v = Vnode::open(shared.path(), cfg(1)).unwrap();
    for k in 0..12i64 {
        write(&v, &format!("t{k}"), &rows_from(k, 1 + k % 5));
    }
    v.flush().unwrap();
    drop(v);
    for (i, p) in files_named(shared.path(), ".stt").iter().enumerate() {
        put(
            "vnode_stt_file",
            &format!("shared-seed{i}"),
            &std::fs::read(p).unwrap(),
        );
    }
    for (i, p) in files_named(d.path(), ".head").iter().enumerate() {
        let b = std::fs::read(p).unwrap();
        put("vnode_head", &format!("seed{i}"), &b);
    }
    for (i, p) in files_named(d.path(), ".sma").iter().enumerate() {
        let b = std::fs::read(p).unwrap();
        let n = block::sma_bytes(4);
        put("vnode_sma", &format!("seed{i}"), &b[..n.min(b.len())]);
    }
    for (i, p) in files_named(d.path(), ".data").iter().enumerate() {
        let b = std::fs::read(p).unwrap();
        let mut seed = vec![30u8];
        seed.extend_from_slice(&b);
        put("vnode_data_block", &format!("seed{i}"), &seed);
    }
    // Segmented blocks (more than 512 rows) and ranges inside them.
    let cols = columns_of(&segmented_rows());
    let s = schema();
    let types: Vec<DataType> = s.columns.iter().map(|c| c.data_type).collect();
    let codecs: Vec<block::ColumnCodec> = types
        .iter()
        .map(|t| block::ColumnCodec::default_for(*t, 2))
        .collect();
    for (i, n) in [600usize, 1500, 4096].into_iter().enumerate() {
        let part: Vec<Column> = cols.iter().map(|c| c.slice(0, n)).collect();
        let mut b = Vec::new();
        block::encode_block(&part, &types, &codecs, block::Effort::Best, &mut b).unwrap();
        for (j, (lo, hi)) in [(1000, 6000), (5000, 12_000), (20_000, 20_000)]
            .into_iter()
            .enumerate()
        {
            let seed = fuzzing::block_range_input(n as u16, lo, hi, &b);
            put("vnode_block_range", &format!("seed{i}-{j}"), &seed);
        }
    }
    put(
        "vnode_manifest",
        "seed0",
        &std::fs::read(d.path().join("meta").join(MANIFEST_FILE)).unwrap(),
    );
    // A WAL with a few records, and one record's payload.
    let w = tempfile::tempdir().unwrap();
    let v = Vnode::open(w.path(), cfg(64)).unwrap();
    write(&v, "t", &[(1, (Some(1.0), Some("a".into()), Some(1)))]);
    write(&v, "u", &[(2, (None, None, None))]);
    drop(v);
    let files = crate::wal::list_files(&w.path().join("wal")).unwrap();
    let wal = std::fs::read(&files[0].path).unwrap();
    put("vnode_wal_file", "seed0", &wal);
    let mut first = None;
    crate::wal::replay(&files, |_, payload, _, _| {
        first.get_or_insert_with(|| payload.to_vec());
        Ok(())
    })
    .unwrap();
    put("vnode_wal_record", "seed0", &first.unwrap());
}

/// Every fuzz corpus and crash artifact of the vnode targets replays without a panic.
#[test]
fn fuzz_corpora_replay_without_panics() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    type Target = (&'static str, fn(&[u8]));
    let targets: [Target; 8] = [
        ("vnode_wal_record", fuzzing::wal_record),
        ("vnode_block_range", fuzzing::block_range),
        ("vnode_wal_file", fuzzing::wal_file),
        ("vnode_stt_file", fuzzing::stt_file),
        ("vnode_data_block", fuzzing::data_block),
        ("vnode_head", fuzzing::head),
        ("vnode_sma", fuzzing::sma),
        ("vnode_manifest", fuzzing::manifest),
    ];
    let mut n = 0;
    for (t, f) in targets {
        n += fuzzing::replay_dir(&root.join("corpus").join(t), f);
        n += fuzzing::replay_dir(&root.join("artifacts").join(t), f);
    }
    assert!(n > 0, "no fuzz corpus found under {}", root.display());
}

fn cfg_cache(model: &str) -> VnodeConfig {
    let mut c = cfg(1);
    c.options.cache_model = model.into();
    c
}

fn check_last(v: &Vnode, model: &Model, step: usize) {
    // All subtables at once, in columns: the same last rows, in the order asked.
    let mut metas = v.tables(Some("m"));
    metas.reverse();
    let uids: Vec<TableUid> = metas.iter().map(|m| m.uid).collect();
    let (pos, cols) = match v.stable_schema("m") {
        Some(_) => v.last_rows_columns("m", &uids, &[0, 1, 2, 3]).unwrap(),
        None => (Vec::new(), Vec::new()),
    };
    let want: Vec<(usize, i64, Row)> = metas
        .iter()
        .enumerate()
        .filter_map(|(k, m)| {
            let (ts, r) = model.get(&m.name)?.iter().next_back()?;
            Some((k, *ts, r.clone()))
        })
        .collect();
    assert_eq!(
        pos,
        want.iter().map(|w| w.0).collect::<Vec<_>>(),
        "step {step}"
    );
    for (j, (_, ts, r)) in want.iter().enumerate() {
        assert_eq!(cols[0].get(j), Value::Timestamp(*ts), "step {step}");
        assert_eq!(
            value_row(&cols, j),
            r.clone(),
            "step {step} columnar last row"
        );
    }
    for t in ["t0", "t1", "t2", "t3", "t4"] {
        let Some(meta) = v.table(t) else {
            assert!(model.get(t).is_none_or(|m| m.is_empty()), "{t} missing");
            continue;
        };
        let rows = model.get(t).cloned().unwrap_or_default();
        let got = v.last_row(meta.uid, &[0, 1, 2, 3]).unwrap();
        match rows.iter().next_back() {
            None => assert!(got.is_none(), "{t} step {step}: rows from nowhere"),
            Some((ts, r)) => {
                let g = got.unwrap_or_else(|| panic!("{t} step {step}: no last row"));
                assert_eq!(g[0].get(0), Value::Timestamp(*ts), "{t} step {step}");
                assert_eq!(value_row(&g, 0), r.clone(), "{t} step {step} last row");
            }
        }
        let lv = v.last_values(meta.uid, &[1, 2, 3]).unwrap();
        let want_v = rows
            .iter()
            .rev()
            .find_map(|(k, r)| r.0.map(|x| (*k, Value::Float(x))));
        let want_s = rows
            .iter()
            .rev()
            .find_map(|(k, r)| r.1.clone().map(|x| (*k, Value::Str(x))));
        let want_n = rows
            .iter()
            .rev()
            .find_map(|(k, r)| r.2.map(|x| (*k, Value::Int(x))));
        assert_eq!(lv, vec![want_v, want_s, want_n], "{t} step {step} LAST()");
    }
}

#[test]
fn a_fleet_lookup_counts_each_miss_once() {
    let d = tempfile::tempdir().unwrap();
    let v = Vnode::open(d.path(), cfg_cache("both")).unwrap();
    for (t, ts) in [("t0", 5), ("t1", 7), ("t2", 9)] {
        write(&v, t, &[(ts, (Some(1.5), None, Some(3)))]);
    }
    // Reopened after a flush, the cache is empty and no replayed write fills it.
    v.flush().unwrap();
    drop(v);
    let v = Vnode::open(d.path(), cfg_cache("both")).unwrap();
    assert_eq!(v.stats().cache_entries, 0);
    let uids: Vec<TableUid> = v.tables(Some("m")).iter().map(|m| m.uid).collect();
    let (pos, first) = v.last_rows_columns("m", &uids, &[0, 1]).unwrap();
    assert_eq!(pos, vec![0, 1, 2]);
    let st = v.stats();
    assert_eq!(
        (st.cache_entries, st.cache_hits, st.cache_misses),
        (3, 0, 3),
        "{st:?}"
    );
    let (_, again) = v.last_rows_columns("m", &uids, &[0, 1]).unwrap();
    assert_eq!(again, first);
    let st = v.stats();
    assert_eq!((st.cache_hits, st.cache_misses), (3, 3), "{st:?}");
}

#[test]
fn last_row_and_last_match_a_model_through_writes_drops_restarts_and_evictions() {
    for (seed, model_name) in [(1u64, "both"), (2, "last_row"), (3, "none"), (4, "both")] {
        let mut rng = StdRng::seed_from_u64(seed);
        let d = tempfile::tempdir().unwrap();
        let open = || Vnode::open(d.path(), cfg_cache(model_name)).unwrap();
        let mut v = open();
        let mut model: Model = BTreeMap::new();
        for step in 0..150 {
            match rng.random_range(0..100) {
                0..=69 => {
                    let t = format!("t{}", rng.random_range(0..5));
                    let mut rows = random_rows(&mut rng);
                    // Often rewrite the newest rows with NULLs: the cached LAST values of
                    // those rows must not survive.
                    if rng.random_bool(0.4) {
                        let newest: Vec<i64> = model
                            .get(&t)
                            .map(|m| m.keys().rev().take(3).copied().collect())
                            .unwrap_or_default();
                        for ts in newest {
                            rows.push((ts, (None, None, rng.random_bool(0.5).then_some(7))));
                        }
                    }
                    write(&v, &t, &rows);
                    let m = model.entry(t).or_default();
                    for (ts, r) in rows {
                        m.insert(ts, r);
                    }
                }
                70..=77 => v.flush().unwrap(),
                78..=81 => v.compact().unwrap(),
                82..=87 => {
                    drop(v);
                    v = open();
                }
                88..=90 => {
                    random_delete(&v, &mut model, &mut rng);
                }
                91..=93 => {
                    // Evict: a tiny budget keeps at most an entry or two.
                    v.state.write().cache.bytes_max = rng.random_range(0..1500);
                }
                _ => {
                    let t = format!("t{}", rng.random_range(0..5));
                    v.drop_table(&t).unwrap();
                    model.remove(&t);
                }
            }
            // Ask twice: the second answer comes from the cache when the model keeps it.
            check_last(&v, &model, step);
            check_last(&v, &model, step);
        }
        let st = v.stats();
        if model_name == "both" {
            assert!(st.cache_hits > 0, "{st:?}");
        } else if model_name == "none" {
            assert_eq!(st.cache_entries, 0, "{st:?}");
        }
    }
}

/// Writes rows of several subtables as one row block, interleaved in the order given (so a
/// subtable has several runs); with `twice`, the first subtable is listed under two indices.
fn write_block(v: &Vnode, rows: &[(String, i64, Row)], twice: bool) {
    let s = schema();
    let types: Vec<DataType> = s.columns.iter().map(|c| c.data_type).collect();
    let mut block = RowBlock::new("m", &types);
    let mut index: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for (k, (t, ts, (a, b, c))) in rows.iter().enumerate() {
        let at = index.entry(t.clone()).or_default();
        if at.is_empty() || (twice && k > 0 && at.len() == 1 && t == &rows[0].0) {
            at.push(block.add_table(t, Some(vec![Value::Str("x".into())])));
        }
        let i = at[k % at.len()];
        let values = [
            Value::Timestamp(*ts),
            a.map(Value::Float).unwrap_or(Value::Null),
            b.clone().map(Value::Str).unwrap_or(Value::Null),
            c.map(Value::Int).unwrap_or(Value::Null),
        ];
        assert!(block.push_row(i, &values));
    }
    v.write(&WriteBatch {
        db: DB.into(),
        vgroup: VgroupId(1),
        schemas: vec![s],
        tables: Vec::new(),
        blocks: vec![block],
    })
    .unwrap();
}

/// Every cached entry, with the memtables folded in as a read does, equals what a load from
/// the data gives (its LAST values only when it says they are still known).
fn check_entries_match_the_data(v: &Vnode, step: usize, what: &str) -> usize {
    let effective: Vec<(TableUid, Entry)> = {
        let st = v.state.read();
        st.cache
            .entries()
            .into_iter()
            .map(|(uid, mut e)| {
                st.fold_memtables(uid, &mut e, false);
                (uid, e)
            })
            .collect()
    };
    for (uid, e) in &effective {
        let loaded = v.load_entry(*uid, e.values_loaded).unwrap();
        assert_eq!(e.row, loaded.row, "step {step} ({what}): {uid:?} LAST_ROW");
        if e.values_loaded {
            assert_eq!(
                e.values, loaded.values,
                "step {step} ({what}): {uid:?} LAST"
            );
        }
    }
    effective.len()
}

#[test]
fn a_flush_fills_a_missing_entry_only_when_it_holds_the_newest_row() {
    let d = tempfile::tempdir().unwrap();
    let v = Vnode::open(d.path(), cfg_cache("both")).unwrap();
    let full = |x: i64| (Some(x as f64), Some(format!("s{x}")), Some(x));
    let entries = |v: &Vnode| v.state.read().cache.entries();
    // Writes leave the cache alone; the flush of a new subtable's rows (all it has) fills it,
    // LAST included even where it is NULL.
    write(
        &v,
        "t0",
        &[(10, full(1)), (20, (None, Some("a".into()), None))],
    );
    assert!(entries(&v).is_empty());
    v.flush().unwrap();
    let e = entries(&v);
    assert_eq!(e.len(), 1);
    assert!(e[0].1.values_loaded);
    assert_eq!(e[0].1.row.as_ref().map(|r| r.0), Some(20));
    assert_eq!(e[0].1.values[1], Some((10, Value::Float(1.0))));
    check_entries_match_the_data(&v, 0, "new subtable");

    drop(v);
    let v = Vnode::open(d.path(), cfg_cache("both")).unwrap();
    // Older than the files' rows: no entry.
    write(&v, "t0", &[(15, full(2))]);
    v.flush().unwrap();
    assert!(entries(&v).is_empty());
    // A late row beside a newer one: the newest row is known, LAST is left to the data.
    write(&v, "t0", &[(12, full(6)), (25, (Some(7.0), None, Some(7)))]);
    v.flush().unwrap();
    let e = entries(&v);
    assert_eq!(e.len(), 1);
    assert!(!e[0].1.values_loaded);
    assert_eq!(e[0].1.row.as_ref().map(|r| r.0), Some(25));
    check_entries_match_the_data(&v, 1, "late rows");
    // Newer, with a NULL: the row is known, LAST is left to the data.
    write(&v, "t0", &[(30, (Some(3.0), None, Some(3)))]);
    v.flush().unwrap();
    let e = entries(&v);
    assert_eq!(e.len(), 1);
    assert!(!e[0].1.values_loaded);
    assert_eq!(e[0].1.row.as_ref().map(|r| r.0), Some(30));
    check_entries_match_the_data(&v, 1, "after a restart");
    let t0 = v.table("t0").unwrap().uid;
    assert_eq!(
        v.last_values(t0, &[2]).unwrap(),
        vec![Some((20, Value::Str("a".into())))]
    );
    // Rows still in the memtable answer through the entry without touching it.
    write(&v, "t0", &[(35, full(5))]);
    let row = v.last_row(t0, &[0, 1]).unwrap().unwrap();
    assert_eq!(row[0].get(0), Value::Timestamp(35));
    assert_eq!(entries(&v)[0].1.row.as_ref().map(|r| r.0), Some(30));

    // A flush never evicts to make room.
    let used = v.state.read().cache.bytes();
    v.state.write().cache.bytes_max = used;
    write(&v, "t1", &[(40, full(4))]);
    v.flush().unwrap();
    assert_eq!(entries(&v).len(), 1);
    // ... but folds the flushed rows into the entries it has.
    assert_eq!(entries(&v)[0].1.row.as_ref().map(|r| r.0), Some(35));
    check_entries_match_the_data(&v, 2, "budget");
}

#[test]
fn a_warm_up_after_reopening_loads_last_rows_as_misses_would_and_never_evicts() {
    let d = tempfile::tempdir().unwrap();
    let full = |x: i64| (Some(x as f64), Some(format!("s{x}")), Some(x));
    let v = Vnode::open(d.path(), cfg_cache("both")).unwrap();
    for t in 0..4i64 {
        write(
            &v,
            &format!("t{t}"),
            &[(10 + t, full(t)), (20 + t, full(t + 1))],
        );
    }
    v.flush().unwrap();
    // Rows only in the WAL (the memtable after the reopen), one of them with NULLs.
    write(&v, "t1", &[(40, (None, Some("x".into()), None))]);
    write(&v, "t4", &[(50, full(9))]);
    drop(v);

    let v = Vnode::open(d.path(), cfg_cache("both")).unwrap();
    let entries = |v: &Vnode| v.state.read().cache.len();
    assert_eq!(
        entries(&v),
        0,
        "a reopened vnode starts with an empty cache"
    );
    let uids = v.table_uids();
    assert_eq!(uids.len(), 5);
    assert_eq!(v.warm_last_rows(&uids).unwrap(), Some(5));
    assert_eq!(check_entries_match_the_data(&v, 0, "warmed"), 5);
    {
        let st = v.state.read();
        assert_eq!(
            (st.cache.hits, st.cache.misses),
            (0, 0),
            "a warm-up is not a read"
        );
    }
    let t1 = v.table("t1").unwrap().uid;
    let row = v.last_row(t1, &[0, 1, 2]).unwrap().unwrap();
    assert_eq!(row[0].get(0), Value::Timestamp(40));
    assert_eq!(row[1].get(0), Value::Null);
    assert_eq!(v.state.read().cache.misses, 0);
    // Nothing left to do.
    assert_eq!(v.warm_last_rows(&uids).unwrap(), Some(0));
    drop(v);

    // Room for two entries: the warm-up stops at the third, and what reads cached stays.
    let v = Vnode::open(d.path(), cfg_cache("both")).unwrap();
    let t3 = v.table("t3").unwrap().uid;
    v.last_row(t3, &[0]).unwrap();
    let one = v.state.read().cache.bytes();
    v.state.write().cache.bytes_max = 2 * one;
    assert_eq!(v.warm_last_rows(&uids).unwrap(), None);
    assert_eq!(entries(&v), 2);
    assert!(v.state.read().cache.contains(t3));
    check_entries_match_the_data(&v, 1, "bounded");
}

/// A few rows after everything written before step `step` (as a live feed writes), often
/// with NULLs, so that a flush can fill an entry over older rows that hold other values.
fn appended(rng: &mut StdRng, step: usize) -> Vec<(i64, Row)> {
    let base = 6 * MINUTE_MS + step as i64 * 1000;
    (0..rng.random_range(1..4))
        .map(|i| (base + i * 100, random_values(rng, [0.5; 3])))
        .collect()
}

#[test]
fn entries_made_by_writes_equal_what_the_data_gives() {
    for (seed, model_name) in [
        (11u64, "both"),
        (12, "last_row"),
        (13, "last_value"),
        (14, "both"),
    ] {
        let mut rng = StdRng::seed_from_u64(seed);
        let d = tempfile::tempdir().unwrap();
        let open = || Vnode::open(d.path(), cfg_cache(model_name)).unwrap();
        let mut v = open();
        let mut filled = 0;
        for step in 0..250 {
            let before = v.state.read().cache.len();
            let what = match rng.random_range(0..100) {
                0..=29 => {
                    let t = format!("t{}", rng.random_range(0..5));
                    let rows = if rng.random_bool(0.5) {
                        appended(&mut rng, step)
                    } else {
                        random_rows(&mut rng)
                    };
                    write(&v, &t, &rows);
                    "rows"
                }
                30..=64 => {
                    // Several subtables in one block, in order or not, with repeats and NULLs.
                    let mut rows = Vec::new();
                    for _ in 0..rng.random_range(1..4) {
                        let t = format!("t{}", rng.random_range(0..5));
                        let part = if rng.random_bool(0.5) {
                            appended(&mut rng, step)
                        } else {
                            random_rows(&mut rng)
                        };
                        rows.extend(part.into_iter().map(|(ts, r)| (t.clone(), ts, r)));
                    }
                    if rng.random_bool(0.5) {
                        rows.sort_by_key(|r| r.1);
                    }
                    write_block(&v, &rows, rng.random_bool(0.1));
                    "block"
                }
                65..=71 => {
                    v.flush().unwrap();
                    "flush"
                }
                72..=75 => {
                    v.compact().unwrap();
                    "compact"
                }
                76..=81 => {
                    drop(v);
                    v = open();
                    "reopen"
                }
                82..=85 => {
                    let t = format!("t{}", rng.random_range(0..5));
                    let lo = rng.random_range(0..6 * MINUTE_MS);
                    let hi = lo + rng.random_range(0..2 * MINUTE_MS);
                    if let Some(meta) = v.table(&t) {
                        v.delete(&[meta.uid], lo, hi).unwrap();
                    }
                    "delete"
                }
                86..=90 => {
                    let b = if rng.random_bool(0.5) {
                        rng.random_range(0..3000)
                    } else {
                        1 << 20
                    };
                    v.state.write().cache.bytes_max = b;
                    "budget"
                }
                91..=93 => {
                    let t = format!("t{}", rng.random_range(0..5));
                    v.drop_table(&t).unwrap();
                    "drop"
                }
                _ => {
                    // A lookup loads missing entries the way a query does.
                    let uids: Vec<TableUid> = v.tables(Some("m")).iter().map(|m| m.uid).collect();
                    if v.stable_schema("m").is_some() {
                        v.last_rows_columns("m", &uids, &[0, 1]).unwrap();
                    }
                    "lookup"
                }
            };
            let n = check_entries_match_the_data(&v, step, what);
            if what == "flush" && n > before {
                filled += 1;
            }
        }
        if model_name != "none" {
            assert!(filled > 0, "{model_name}: no flush filled the cache");
        }
    }
}

/// Flushes fold their rows into the cache a few subtables per hold of the state lock, while
/// reads go on: no read sees a row older than one already acknowledged, before, during or
/// after a flush, and every entry left equals what the data gives.
#[test]
fn reads_during_a_flush_fold_never_go_back() {
    let d = tempfile::tempdir().unwrap();
    let v = std::sync::Arc::new(Vnode::open(d.path(), cfg_cache("both")).unwrap());
    let tables: Vec<String> = (0..5 * FLUSH_FOLD_TABLES)
        .map(|i| format!("t{i}"))
        .collect();
    let acked = std::sync::Arc::new(std::sync::atomic::AtomicI64::new(0));
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let write_round = |r: i64| {
        let rows: Vec<(String, i64, Row)> = tables
            .iter()
            .map(|t| (t.clone(), r * 10, (Some(r as f64), None, Some(r))))
            .collect();
        write_block(&v, &rows, false);
    };
    write_round(1);
    acked.store(1, std::sync::atomic::Ordering::SeqCst);
    let uids: Vec<TableUid> = v.tables(Some("m")).iter().map(|m| m.uid).collect();
    assert_eq!(uids.len(), tables.len());
    let reader = {
        let (v, acked, done) = (v.clone(), acked.clone(), done.clone());
        let uids = uids.clone();
        std::thread::spawn(move || {
            let mut reads = 0u64;
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                let a = acked.load(std::sync::atomic::Ordering::SeqCst);
                let (pos, cols) = v.last_rows_columns("m", &uids, &[0, 1]).unwrap();
                assert_eq!(pos.len(), uids.len());
                for (k, uid) in uids.iter().enumerate() {
                    let Value::Timestamp(ts) = cols[0].get(k) else {
                        panic!("no ts")
                    };
                    assert!(
                        ts >= a * 10,
                        "fleet read of {uid:?}: {ts} < acked {}",
                        a * 10
                    );
                    assert_eq!(cols[1].get(k), Value::Float((ts / 10) as f64));
                    let one = v.last_row(*uid, &[0]).unwrap().unwrap();
                    let one = crate::block::ts_slice(&one[0]).first().copied();
                    assert!(one >= Some(a * 10), "{uid:?}: {one:?} < acked {}", a * 10);
                }
                reads += 1;
            }
            reads
        })
    };
    for r in 2..=12 {
        write_round(r);
        acked.store(r, std::sync::atomic::Ordering::SeqCst);
        if r % 3 == 0 {
            v.flush().unwrap();
        }
        if r == 7 {
            // Entries come and go: the next flushes fill some and fold into the others.
            for uid in uids.iter().step_by(3) {
                v.state.write().cache.remove(*uid);
            }
        }
    }
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(reader.join().unwrap() > 0);
    v.flush().unwrap();
    assert_eq!(
        check_entries_match_the_data(&v, 0, "after the flushes"),
        uids.len()
    );
}

/// A vnode whose blocks hold up to 4,096 rows, for [`cached_block_rows`].
fn cached_block_cfg() -> VnodeConfig {
    let mut c = cfg(1);
    c.options.maxrows = 4096;
    c
}

/// Generation `k` of one subtable's rows: one block long enough for the decoded-column cache
/// (`column_cache::BLOCK_ROWS_MIN` rows and more), every value naming its generation.
fn cached_block_rows(k: i64) -> Vec<(i64, Row)> {
    let n = i64::from(crate::column_cache::BLOCK_ROWS_MIN) + 100;
    (0..n)
        .map(|i| {
            (
                1000 + i * 10,
                (Some((k * 100 + i) as f64), Some(format!("v{k}")), Some(k)),
            )
        })
        .collect()
}

/// Queries read data blocks through the process-wide decoded-column cache. Its entries name
/// the open file, not its path: a vnode dropped and created again in the same folder writes
/// files of the same names with blocks at the same offsets, and reads only its own rows.
#[test]
fn the_column_cache_never_answers_for_a_file_written_again_under_the_same_name() {
    let d = tempfile::tempdir().unwrap();
    let (c, rows) = (cached_block_cfg(), cached_block_rows);
    let before = crate::column_cache::global().stats();
    for k in 0..3 {
        let _ = std::fs::remove_dir_all(d.path());
        std::fs::create_dir_all(d.path()).unwrap();
        let v = Vnode::open(d.path(), c.clone()).unwrap();
        write(&v, "t0", &rows(k));
        v.compact().unwrap();
        // Twice: the second reads come from the cache, and a range inside a block is cut
        // from the cached chunk.
        for _ in 0..2 {
            assert_eq!(scan_all(&v, "t0", 0, i64::MAX), rows(k), "generation {k}");
            assert_eq!(scan_all(&v, "t0", 1095, 1205), rows(k)[10..21].to_vec());
        }
        // A restart reopens the same files: new names for them in the cache, same answers.
        drop(v);
        let v = Vnode::open(d.path(), cfg(1)).unwrap();
        assert_eq!(
            scan_all(&v, "t0", 0, i64::MAX),
            rows(k),
            "generation {k} reopened"
        );
    }
    let after = crate::column_cache::global().stats();
    assert!(after.hits > before.hits, "{before:?} -> {after:?}");
}

/// Queries read STT blocks through the decoded-column cache too (recent data waits there
/// until compaction): a repeated or narrower range comes from the cached chunks, a newer STT
/// file's rows still replace older ones, and a reopened file is a new name in the cache.
#[test]
fn stt_blocks_are_read_through_the_column_cache() {
    let d = tempfile::tempdir().unwrap();
    let (c, rows) = (cached_block_cfg(), cached_block_rows);
    let before = crate::column_cache::global().stats();
    let v = Vnode::open(d.path(), c.clone()).unwrap();
    write(&v, "t0", &rows(0));
    v.flush().unwrap();
    for _ in 0..2 {
        assert_eq!(scan_all(&v, "t0", 0, i64::MAX), rows(0));
        assert_eq!(scan_all(&v, "t0", 1095, 1205), rows(0)[10..21].to_vec());
    }
    // A second STT file over the same range: its rows win, whatever the cache holds.
    write(&v, "t0", &rows(1));
    v.flush().unwrap();
    for _ in 0..2 {
        assert_eq!(scan_all(&v, "t0", 0, i64::MAX), rows(1));
    }
    drop(v);
    let v = Vnode::open(d.path(), c).unwrap();
    assert_eq!(scan_all(&v, "t0", 0, i64::MAX), rows(1), "reopened");
    let after = crate::column_cache::global().stats();
    assert!(after.hits > before.hits, "{before:?} -> {after:?}");
}

/// 4,096 rows of one subtable (a 10 ms clock from 1,000), NULLs placed so that some segments
/// of a column have them and others do not.
fn segmented_rows() -> Vec<(i64, Row)> {
    (0..4096i64)
        .map(|i| {
            let v = (!(600..700).contains(&i) || i % 3 != 0).then_some(i as f64 / 4.0);
            let s = (i % 1000 != 7).then(|| format!("s{}", i % 5));
            (1000 + i * 10, (v, s, Some(i * i)))
        })
        .collect()
}

/// A range inside a long block decodes only the segments that hold it (codec FORMAT.md,
/// "Segments"); whatever the range (segment edges, one row, between rows, across many
/// segments) and whether the rows come from the cache, a data file or an STT file, a scan
/// gives exactly the rows of the range, and aggregation pieces the same rows.
#[test]
fn narrow_ranges_of_long_blocks_give_exactly_their_rows() {
    let rows = segmented_rows();
    let seg_ms = 10 * tidal_codec::SEGMENT_ROWS as i64;
    let mut ranges: Vec<(i64, i64)> = vec![(1000, 1000), (999, 1009), (1005, 1009)];
    for k in 1..8 {
        let edge = 1000 + k * seg_ms;
        ranges.extend([
            (edge - 10, edge),
            (edge, edge),
            (edge - 1, edge + 1),
            (edge - 600, edge + 590),
        ]);
    }
    ranges.extend([
        (6000, 7000),
        (1000 + 4095 * 10, i64::MAX),
        (2000, 30_000),
        (7001, 7009),
    ]);
    let mut rng = StdRng::seed_from_u64(17);
    for _ in 0..60 {
        let lo = 900 + rng.random_range(0..41_000);
        ranges.push((lo, lo + rng.random_range(0..3_000)));
    }
    let want = |lo: i64, hi: i64| -> Vec<(i64, Row)> {
        rows.iter()
            .filter(|(t, _)| *t >= lo && *t <= hi)
            .cloned()
            .collect()
    };
    for compact in [false, true] {
        let d = tempfile::tempdir().unwrap();
        let v = Vnode::open(d.path(), cached_block_cfg()).unwrap();
        write(&v, "t0", &rows);
        if compact {
            v.compact().unwrap();
        } else {
            v.flush().unwrap();
        }
        let uid = v.table("t0").unwrap().uid;
        // Twice: the second pass reads the segments the first one cached.
        for pass in 0..2 {
            for &(lo, hi) in &ranges {
                let what = format!("compact {compact} pass {pass} range {lo}..={hi}");
                assert_eq!(scan_all(&v, "t0", lo, hi), want(lo, hi), "{what}");
                let pieces = v.scan_pieces(uid, lo, hi, &[1, 3]).unwrap();
                let mut got = Vec::new();
                for p in pieces {
                    match p {
                        ScanPiece::Rows(c) => {
                            got.extend((0..c[0].len()).map(|i| (c[0].get(i), c[1].get(i))));
                        }
                        ScanPiece::Sma { rows: n, .. } => {
                            assert!(lo <= 1000 && hi >= 1000 + 4095 * 10, "{what}: SMA of {n}");
                            got.clear();
                            break;
                        }
                    }
                }
                if !got.is_empty() {
                    let w: Vec<(Value, Value)> = want(lo, hi)
                        .iter()
                        .map(|(_, r)| {
                            (
                                r.0.map(Value::Float).unwrap_or(Value::Null),
                                r.2.map(Value::Int).unwrap_or(Value::Null),
                            )
                        })
                        .collect();
                    assert_eq!(got, w, "{what}: pieces");
                }
            }
        }
    }
}

/// With a catalog of thousands of subtables, whatever the order of a write — the creation
/// order with skips and late rows, a shuffle, subtables dropped and created again under new
/// uids — every row lands in its own subtable.
#[test]
fn every_row_lands_in_its_own_subtable_in_any_order() {
    let d = tempfile::tempdir().unwrap();
    let v = Vnode::open(d.path(), cfg(64)).unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    let filler: Vec<(String, i64, Row)> = (0..8192)
        .map(|i| (format!("f{i}"), 0, (None, None, Some(i as i64))))
        .collect();
    write_block(&v, &filler, false);
    let names: Vec<String> = (0..40).map(|i| format!("t{i}")).collect();
    let mut model: Model = BTreeMap::new();
    let mut ts = 0i64;
    for round in 0..60 {
        let mut order: Vec<usize> = (0..names.len()).filter(|_| rng.random_bool(0.9)).collect();
        match round % 4 {
            0 => {}
            1 => {
                // a few rows a place or two late
                for _ in 0..5 {
                    let n = order.len();
                    let i = rng.random_range(0..n.saturating_sub(2).max(1));
                    order.swap(i, (i + rng.random_range(1..3)).min(n - 1));
                }
            }
            2 => order.reverse(),
            _ => {
                for i in (1..order.len()).rev() {
                    order.swap(i, rng.random_range(0..=i));
                }
            }
        }
        if round % 7 == 6 {
            let t = &names[rng.random_range(0..names.len())];
            v.drop_table(t).unwrap();
            model.remove(t);
        }
        ts += MINUTE_MS / 10;
        let rows: Vec<(String, i64, Row)> = order
            .iter()
            .map(|i| {
                let row = (Some((round * 100 + i) as f64), None, Some(*i as i64));
                model
                    .entry(names[*i].clone())
                    .or_default()
                    .insert(ts, row.clone());
                (names[*i].clone(), ts, row)
            })
            .collect();
        write_block(&v, &rows, false);
        for t in &names {
            let want: Vec<(i64, Row)> = model
                .get(t)
                .map(|m| m.iter().map(|(k, r)| (*k, r.clone())).collect())
                .unwrap_or_default();
            assert_eq!(
                scan_all(&v, t, i64::MIN, i64::MAX),
                want,
                "round {round}: {t}"
            );
        }
    }
}

/// A write that names an existing subtable under another STABLE is refused with the
/// subtable's own STABLE, whether the write's STABLE has subtables here or is new, and
/// through both write forms; the subtable keeps its rows and takes more under its own name.
#[test]
fn a_subtable_takes_rows_only_under_its_own_stable() {
    let d = tempfile::tempdir().unwrap();
    let v = Vnode::open(d.path(), cfg(64)).unwrap();
    let row = |ts: i64| (ts, (Some(ts as f64), None, Some(ts)));
    write(&v, "t1", &[row(1)]);
    let other = |name: &str| StableSchema {
        name: name.into(),
        ..schema()
    };
    let refused = |stable: &str, block: bool| {
        let s = other(stable);
        let cols = columns_of(&[row(2)]);
        let (tables, blocks) = if block {
            let types: Vec<DataType> = s.columns.iter().map(|c| c.data_type).collect();
            let mut b = RowBlock::new(stable, &types);
            let i = b.add_table("t1", Some(vec![Value::Str("x".into())]));
            assert!(b.push_rows(i, &cols, 0, 1));
            (Vec::new(), vec![b])
        } else {
            let tw = TableWrite {
                table: "t1".into(),
                stable: stable.into(),
                tags: Some(vec![Value::Str("x".into())]),
                columns: cols,
            };
            (vec![tw], Vec::new())
        };
        let err = v
            .write(&WriteBatch {
                db: DB.into(),
                vgroup: VgroupId(1),
                schemas: vec![s],
                tables,
                blocks,
            })
            .unwrap_err();
        assert!(
            matches!(&err, VnodeError::SchemaMismatch { table, reason }
                if table == "t1" && reason.contains("belongs to STABLE 'm'")
                    && reason.contains(&format!("names '{stable}'"))),
            "{stable} (block {block}): {err:?}"
        );
    };
    // "n" has no subtable yet; then it gets one, so it has an id of its own.
    refused("n", false);
    refused("n", true);
    let s = other("n");
    v.write(&WriteBatch {
        db: DB.into(),
        vgroup: VgroupId(1),
        schemas: vec![s],
        tables: vec![TableWrite {
            table: "u1".into(),
            stable: "n".into(),
            tags: Some(vec![Value::Str("y".into())]),
            columns: columns_of(&[row(3)]),
        }],
        blocks: Vec::new(),
    })
    .unwrap();
    refused("n", false);
    refused("n", true);
    write(&v, "t1", &[row(4)]);
    assert_eq!(scan_all(&v, "t1", i64::MIN, i64::MAX), vec![row(1), row(4)]);
    assert_eq!(scan_all(&v, "u1", i64::MIN, i64::MAX), vec![row(3)]);
}

/// Rows of each data block of `table` in the window holding `ts`, once the background
/// worker (or this call) has merged every window due.
fn data_block_rows(v: &Vnode, table: &str, ts: i64) -> Vec<u32> {
    {
        let _bg = v.bg.lock();
        v.merge_due_locked().unwrap();
    }
    let uid = v.table(table).unwrap().uid;
    let st = v.state.read();
    let w = &st.files.windows[&tsdb::fid_of(ts, v.window_units)];
    assert!(w.stts.is_empty(), "the window was merged");
    let data = w.data.as_ref().expect("a data file");
    data.blocks(uid).iter().map(|e| e.loc.rows).collect()
}

/// `n` rows 1 s apart from `first` (ms), with values.
fn rows_from(first: i64, n: i64) -> Vec<(i64, Row)> {
    (0..n)
        .map(|i| {
            let ts = first + i * 1000;
            (ts, (Some(ts as f64), Some(format!("s{i}")), Some(ts)))
        })
        .collect()
}

#[test]
fn a_flushs_few_newer_rows_merge_after_the_full_block_before_them_which_moves_as_it_is() {
    let d = tempfile::tempdir().unwrap();
    let v = Vnode::open(d.path(), cfg(1)).unwrap();
    // A full block (MINROWS 10 <= 30 <= MAXROWS 50) in one STT file, 3 newer rows in the next.
    let full = rows_from(0, 30);
    let newer = rows_from(30_000, 3);
    write(&v, "t", &full);
    v.flush().unwrap();
    write(&v, "t", &newer);
    v.flush().unwrap();
    // Merged alone, the 3 rows make a block of their own; the full block was not rewritten
    // (merged with them, it would have become one block of 33 rows).
    assert_eq!(data_block_rows(&v, "t", 0), vec![30, 3]);
    let want: Vec<(i64, Row)> = full.iter().chain(&newer).cloned().collect();
    assert_eq!(scan_all(&v, "t", i64::MIN, i64::MAX), want);
    // The next flush's rows fold the small block: it does not stay behind.
    let more = rows_from(33_000, 20);
    write(&v, "t", &more);
    v.flush().unwrap();
    write(&v, "t", &rows_from(53_000, 1));
    v.flush().unwrap();
    let blocks = data_block_rows(&v, "t", 0);
    assert_eq!(blocks.iter().sum::<u32>(), 54);
    assert_eq!(blocks.first(), Some(&30), "{blocks:?}");
    assert!(blocks.iter().skip(1).all(|r| *r != 3), "{blocks:?}");
    drop(v);
    let v = Vnode::open(d.path(), cfg(1)).unwrap();
    assert_eq!(scan_all(&v, "t", i64::MIN, i64::MAX).len(), 54);
}

#[test]
fn a_data_block_under_minrows_has_no_sma_record_and_is_read_for_aggregates_and_filters() {
    let d = tempfile::tempdir().unwrap();
    let v = Vnode::open(d.path(), cfg(1)).unwrap();
    // "small": 6 rows, under MINROWS (10); "big": 30 rows.
    write(&v, "small", &rows_from(0, 6));
    write(&v, "big", &rows_from(0, 30));
    v.flush().unwrap();
    v.compact().unwrap();
    let (small, big) = (v.table("small").unwrap().uid, v.table("big").unwrap().uid);
    {
        let st = v.state.read();
        let data = st.files.windows[&0].data.as_ref().expect("a data file");
        let (s, b) = (data.blocks(small), data.blocks(big));
        assert!(s.len() == 1 && !s[0].has_sma(), "{s:?}");
        assert!(!b.is_empty() && b.iter().all(|e| e.has_sma()), "{b:?}");
        // The .sma file holds the big subtable's records only.
        let records: u64 = b.iter().map(|e| u64::from(e.sma_len)).sum();
        assert_eq!(data.sma_len, records);
        // The STABLE's statistics count the small block too, from its rows.
        let g = data
            .group_stats("m", &[small, big], &[1, 3])
            .unwrap()
            .expect("statistics");
        assert_eq!(g.rows, 36);
        assert_eq!(g.cols[0].count, 36);
        assert_eq!(g.cols[0].min, SmaVal::Float(0.0));
        assert_eq!(g.cols[0].max, SmaVal::Float(29_000.0));
        assert_eq!(g.cols[1].max, SmaVal::Int(29_000));
    }
    // Aggregates: the big block from its SMA, the small one from its rows.
    let pieces = v.scan_pieces(small, i64::MIN, i64::MAX, &[3]).unwrap();
    assert!(
        matches!(pieces.as_slice(), [ScanPiece::Rows(c)] if c[0].len() == 6),
        "{pieces:?}"
    );
    let pieces = v.scan_pieces(big, i64::MIN, i64::MAX, &[3]).unwrap();
    assert!(
        matches!(pieces.as_slice(), [ScanPiece::Sma { rows: 30, .. }]),
        "{pieces:?}"
    );
    // A filter `n > x`: the big block is left out by its SMA, the small one by the rows read
    // of it (n = ts: 0..=5,000 and 0..=29,000).
    let rows = |uid, x: i64| {
        let above: &MayMatch<'_> =
            &|_, s| s[0].count > 0 && matches!(s[0].max, SmaVal::Int(m) if m > x);
        v.scan_filtered(uid, i64::MIN, i64::MAX, &[3], &[3], above)
            .unwrap()[0]
            .len()
    };
    assert_eq!((rows(small, 4_000), rows(big, 4_000)), (6, 30));
    assert_eq!((rows(small, 5_000), rows(big, 5_000)), (0, 30));
    assert_eq!((rows(small, 30_000), rows(big, 30_000)), (0, 0));
    // Row bounds for sizing a read of many subtables: whole overlapping blocks and every
    // memtable row, from the indexes alone.
    assert_eq!(
        v.rows_upper_bound(&[small, big], i64::MIN, i64::MAX),
        vec![6, 30]
    );
    assert_eq!(v.rows_upper_bound(&[small, big], 1_000, 1_999), vec![6, 30]);
    assert_eq!(
        v.rows_upper_bound(&[small, big], 60_000, 70_000),
        vec![0, 0]
    );
    write(&v, "small", &rows_from(100_000, 2));
    assert_eq!(v.rows_upper_bound(&[small], 60_000, 70_000), vec![2]);
    drop(v);
    let v = Vnode::open(d.path(), cfg(1)).unwrap();
    assert_eq!(
        scan_all(&v, "small", i64::MIN, i64::MAX),
        rows_from(0, 6)
            .into_iter()
            .chain(rows_from(100_000, 2))
            .collect::<Vec<_>>()
    );
    assert_eq!(scan_all(&v, "big", i64::MIN, i64::MAX), rows_from(0, 30));
}

/// The stage-1 encoding of column `n` (3) in each data block of `table` (window of ts 0).
fn data_block_n_encodings(v: &Vnode, table: &str) -> Vec<u8> {
    data_block_rows(v, table, 0);
    let uid = v.table(table).unwrap().uid;
    let st = v.state.read();
    let data = st.files.windows[&0].data.as_ref().expect("a data file");
    data.blocks(uid)
        .iter()
        .map(|e| block::stage1_id_of(&data.raw_block(e).unwrap(), 3))
        .collect()
}

#[test]
fn a_merge_encodes_a_small_last_block_quickly_and_a_full_rewrite_encodes_it_fully() {
    let d = tempfile::tempdir().unwrap();
    let v = Vnode::open(d.path(), cfg(1)).unwrap();
    // A constant: delta-i (codec id 2) stores it and then zero deltas, which the full search
    // never picks over frame of reference (one value and no bits) or run-length.
    let rows = |first: i64, n: i64| -> Vec<(i64, Row)> {
        (0..n)
            .map(|i| {
                let ts = first + i * 1000;
                (ts, (Some(ts as f64), Some(format!("s{i}")), Some(7)))
            })
            .collect()
    };
    // 6 + 2 rows, under MINROWS (10): the merge's one block is the subtable's last and small.
    let (a, b) = (rows(0, 6), rows(6_000, 2));
    write(&v, "t", &a);
    v.flush().unwrap();
    write(&v, "t", &b);
    v.flush().unwrap();
    assert_eq!(data_block_rows(&v, "t", 0), vec![8]);
    assert_eq!(data_block_n_encodings(&v, "t"), vec![2]);
    let want: Vec<(i64, Row)> = a.iter().chain(&b).cloned().collect();
    assert_eq!(scan_all(&v, "t", i64::MIN, i64::MAX), want);
    // A full rewrite (COMPACT of a window with an STT file) encodes with the full search.
    let c = rows(8_000, 1);
    write(&v, "t", &c);
    v.flush().unwrap();
    v.compact().unwrap();
    assert_eq!(data_block_rows(&v, "t", 0), vec![9]);
    let full = data_block_n_encodings(&v, "t");
    assert!(full.len() == 1 && full[0] != 2, "{full:?}");
    let want: Vec<(i64, Row)> = want.into_iter().chain(c).collect();
    assert_eq!(scan_all(&v, "t", i64::MIN, i64::MAX), want);
}

#[test]
fn an_stt_block_that_overlaps_a_later_one_is_merged_with_it_not_moved() {
    let d = tempfile::tempdir().unwrap();
    let v = Vnode::open(d.path(), cfg(1)).unwrap();
    let full = rows_from(0, 30);
    write(&v, "t", &full);
    v.flush().unwrap();
    // A newer row and a later copy of ts 5 s, which must win.
    let late: Vec<(i64, Row)> = vec![
        (30_000, (Some(1.0), None, Some(1))),
        (5_000, (Some(-5.0), Some("late".into()), None)),
    ];
    write(&v, "t", &late);
    v.flush().unwrap();
    assert_eq!(data_block_rows(&v, "t", 0), vec![31]);
    let mut want: BTreeMap<i64, Row> = full.into_iter().collect();
    want.extend(late);
    let want: Vec<(i64, Row)> = want.into_iter().collect();
    assert_eq!(scan_all(&v, "t", i64::MIN, i64::MAX), want);
}

#[test]
fn small_subtables_of_a_flush_share_stt_blocks_and_read_merge_and_reopen_as_their_own() {
    let d = tempfile::tempdir().unwrap();
    let v = Vnode::open(d.path(), cfg(1)).unwrap();
    // 40 subtables of 3 rows (MINROWS 10, MAXROWS 50): 120 rows in shared blocks of up to 50.
    let name = |k: i64| format!("t{k}");
    let rows = |k: i64| rows_from(k, 3);
    for k in 0..40 {
        write(&v, &name(k), &rows(k));
    }
    v.flush().unwrap();
    let offsets = {
        let st = v.state.read();
        let w = &st.files.windows[&0];
        assert_eq!(w.stts.len(), 1);
        let s = &w.stts[0];
        let mut offsets = std::collections::BTreeSet::new();
        for k in 0..40 {
            let b = s.blocks(v.table(&name(k)).unwrap().uid);
            assert!(
                b.len() == 1 && b[0].rows == 3 && b[0].view.is_some(),
                "{b:?}"
            );
            offsets.insert(b[0].offset);
        }
        offsets
    };
    assert_eq!(offsets.len(), 3, "120 rows in blocks of up to 50");
    let d0 = v.distribution(&[v.table("t0").unwrap().uid, v.table("t1").unwrap().uid]);
    assert_eq!(
        (d0.stt_blocks, d0.stt_rows),
        (1, 6),
        "two views of one block count once"
    );
    for k in 0..40 {
        assert_eq!(scan_all(&v, &name(k), i64::MIN, i64::MAX), rows(k), "t{k}");
        assert_eq!(
            scan_all(&v, &name(k), k + 1000, k + 1000),
            rows(k)[1..2].to_vec(),
            "t{k}, one row"
        );
    }
    // Newer copies of some rows, in a second STT file: they win, in reads and in the merge.
    let newer = |k: i64| -> Vec<(i64, Row)> {
        vec![
            (k + 1000, (Some(-1.0), None, Some(k))),
            (k + 5000, (None, None, None)),
        ]
    };
    for k in (0..40).step_by(3) {
        write(&v, &name(k), &newer(k));
    }
    v.flush().unwrap();
    let want = |k: i64| -> Vec<(i64, Row)> {
        let mut m: BTreeMap<i64, Row> = rows(k).into_iter().collect();
        if k % 3 == 0 {
            m.extend(newer(k));
        }
        m.into_iter().collect()
    };
    let check_all = |v: &Vnode, what: &str| {
        for k in 0..40 {
            assert_eq!(
                scan_all(v, &name(k), i64::MIN, i64::MAX),
                want(k),
                "t{k} {what}"
            );
        }
    };
    check_all(&v, "over two STT files");
    {
        let _bg = v.bg.lock();
        v.merge_due_locked().unwrap();
    }
    assert!(v.state.read().files.windows[&0].stts.is_empty(), "merged");
    check_all(&v, "merged");
    drop(v);
    let v = Vnode::open(d.path(), cfg(1)).unwrap();
    check_all(&v, "reopened");
    v.compact().unwrap();
    check_all(&v, "compacted");
}
