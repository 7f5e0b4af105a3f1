//! Behaviour tests of the whole crate: API semantics, placement, recovery and damage.

use crate::sdb::{LOG_FILE, SNAP_FILE};
use crate::{Mnode, MnodeConfig, MnodeError};
use std::fs;
use std::path::Path;
use tidal_common::{
    split_hash_space, ColumnDef, DataType, DbOptions, DnodeId, SchemaVersion, StableSchema,
    StatusCode, VgroupId,
};

fn opts(vgroups: u32) -> DbOptions {
    DbOptions {
        vgroups,
        ..DbOptions::default()
    }
}

fn schema(db: &str, name: &str) -> StableSchema {
    StableSchema {
        db: db.to_string(),
        name: name.to_string(),
        version: SchemaVersion(0),
        columns: vec![
            ColumnDef::new("ts", DataType::Timestamp),
            ColumnDef::new("v", DataType::Double),
        ],
        tags: vec![ColumnDef::new("name", DataType::VarChar(30))],
    }
}

fn no_snapshots() -> MnodeConfig {
    MnodeConfig {
        snapshot_every: u64::MAX,
        ..MnodeConfig::default()
    }
}

/// A catalog with 2 dnodes, database `iot` (4 vgroups) and STABLE `iot.readings`.
fn populate(m: &Mnode) {
    assert_eq!(m.register_dnode("h1:6030", None).unwrap(), DnodeId(1));
    assert_eq!(m.register_dnode("h2:6030", None).unwrap(), DnodeId(2));
    m.create_database("iot", opts(4), false).unwrap();
    m.create_stable(schema("iot", "readings"), false).unwrap();
}

fn snapshot(m: &Mnode) -> String {
    format!(
        "{:?}\n{:?}\n{:?}",
        m.databases(),
        m.dnodes()
            .into_iter()
            .map(|d| (d.id, d.addr, d.vnodes, d.created_ms))
            .collect::<Vec<_>>(),
        m.databases()
            .iter()
            .map(|d| m.stables(&d.name))
            .collect::<Vec<_>>()
    )
}

#[test]
fn create_and_drop_database_and_stables() {
    let dir = tempfile::tempdir().unwrap();
    let m = Mnode::open(dir.path()).unwrap();
    m.register_dnode("h1:6030", None).unwrap();
    let db = m.create_database("IoT", opts(2), false).unwrap();
    assert_eq!(db.name, "iot");
    assert_eq!(db.vgroups.len(), 2);
    assert!(m.database("IOT").is_some());
    let s = m.create_stable(schema("iot", "Readings"), false).unwrap();
    assert_eq!((s.db.as_str(), s.name.as_str()), ("iot", "readings"));
    assert_eq!(s.version, SchemaVersion(1));
    m.create_stable(schema("IOT", "diag"), false).unwrap();
    let names: Vec<_> = m.stables("iot").into_iter().map(|s| s.name).collect();
    assert_eq!(names, vec!["diag", "readings"]);
    assert_eq!(m.stable("iot", "READINGS").unwrap(), s);

    let dropped = m.drop_stable("iot", "diag", false).unwrap().unwrap();
    assert_eq!(dropped.name, "diag");
    assert!(m.stable("iot", "diag").is_none());
    assert_eq!(m.drop_stable("iot", "diag", true).unwrap(), None);

    m.create_database("b_db", opts(1), false).unwrap();
    let names: Vec<_> = m.databases().into_iter().map(|d| d.name).collect();
    assert_eq!(names, vec!["b_db", "iot"]);

    let dropped = m.drop_database("iot", false).unwrap().unwrap();
    assert_eq!(dropped.name, "iot");
    assert!(m.database("iot").is_none());
    assert!(m.stables("iot").is_empty());
    assert!(m.stable("iot", "readings").is_none());
    assert_eq!(m.drop_database("iot", true).unwrap(), None);
    // Re-created database has no leftover stables.
    m.create_database("iot", opts(1), false).unwrap();
    assert!(m.stables("iot").is_empty());
}

#[test]
fn errors_have_the_right_codes() {
    let dir = tempfile::tempdir().unwrap();
    let m = Mnode::open(dir.path()).unwrap();
    let e = m.create_database("iot", opts(2), false).unwrap_err();
    assert!(matches!(e, MnodeError::NoDnodes { .. }), "{e}");
    assert_eq!(e.status_code(), StatusCode::NoDnodes);
    m.register_dnode("h1:6030", None).unwrap();
    let db = m.create_database("iot", opts(2), false).unwrap();

    let e = m.create_database("IOT", opts(3), false).unwrap_err();
    assert_eq!(e.status_code(), StatusCode::DatabaseExists);
    assert_eq!(e.to_string(), "database 'iot' already exists");
    assert_eq!(m.create_database("iot", opts(3), true).unwrap(), db);

    for bad in ["", "1db", "a-b", "a b", "ü", &"x".repeat(65)] {
        let e = m.create_database(bad, opts(1), false).unwrap_err();
        assert_eq!(e.status_code(), StatusCode::InvalidArgument, "{bad}: {e}");
    }
    assert!(m.create_database(&"x".repeat(64), opts(1), false).is_ok());
    let e = m.create_database("z", opts(0), false).unwrap_err();
    assert_eq!(e.status_code(), StatusCode::InvalidArgument);
    assert!(e.to_string().contains("VGROUPS"), "{e}");

    let e = m.drop_database("nope", false).unwrap_err();
    assert_eq!(e.status_code(), StatusCode::DatabaseNotFound);
    assert_eq!(e.to_string(), "database 'nope' not found");
    assert_eq!(
        m.drop_database("Not A Name", false)
            .unwrap_err()
            .status_code(),
        StatusCode::DatabaseNotFound
    );

    let e = m.create_stable(schema("nope", "st"), false).unwrap_err();
    assert_eq!(e.status_code(), StatusCode::DatabaseNotFound);
    let s = m.create_stable(schema("iot", "st"), false).unwrap();
    let e = m.create_stable(schema("iot", "ST"), false).unwrap_err();
    assert_eq!(e.status_code(), StatusCode::StableExists);
    assert_eq!(e.to_string(), "STABLE 'iot.st' already exists");
    assert_eq!(m.create_stable(schema("iot", "st"), true).unwrap(), s);

    let mut bad = schema("iot", "bad");
    bad.columns[0].data_type = DataType::Int;
    assert_eq!(
        m.create_stable(bad, false).unwrap_err().status_code(),
        StatusCode::InvalidArgument
    );
    let mut bad = schema("iot", "bad");
    bad.tags.clear();
    assert_eq!(
        m.create_stable(bad, false).unwrap_err().status_code(),
        StatusCode::InvalidArgument
    );
    let mut bad = schema("iot", "bad");
    bad.tags[0].name = String::new();
    assert_eq!(
        m.create_stable(bad, false).unwrap_err().status_code(),
        StatusCode::InvalidArgument
    );
    assert_eq!(
        m.create_stable(schema("iot", "9x"), false)
            .unwrap_err()
            .status_code(),
        StatusCode::InvalidArgument
    );

    let e = m.drop_stable("iot", "nope", false).unwrap_err();
    assert_eq!(e.status_code(), StatusCode::StableNotFound);
    assert_eq!(e.to_string(), "STABLE 'iot.nope' not found");
    let e = m.drop_stable("nope", "st", true).unwrap_err();
    assert_eq!(e.status_code(), StatusCode::DatabaseNotFound);

    let e = m.heartbeat(DnodeId(99)).unwrap_err();
    assert!(matches!(e, MnodeError::UnknownDnode(DnodeId(99))));
    assert!(m.register_dnode("  ", None).is_err());
}

#[test]
fn placement_is_round_robin_and_covers_the_hash_space() {
    let dir = tempfile::tempdir().unwrap();
    let m = Mnode::open(dir.path()).unwrap();
    for i in 1..=3 {
        m.register_dnode(&format!("h{i}:6030"), None).unwrap();
    }
    let db = m.create_database("iot", opts(6), false).unwrap();
    let ranges: Vec<_> = db.vgroups.iter().map(|v| v.range).collect();
    assert_eq!(ranges, split_hash_space(6));
    assert_eq!(ranges.first().unwrap().begin, 0);
    assert_eq!(ranges.last().unwrap().end, u32::MAX);
    for w in ranges.windows(2) {
        assert_eq!(w[0].end as u64 + 1, w[1].begin as u64);
    }
    let placed: Vec<_> = db.vgroups.iter().map(|v| v.dnode.0).collect();
    assert_eq!(placed, vec![1, 2, 3, 1, 2, 3]);
    let ids: Vec<_> = db.vgroups.iter().map(|v| v.id.0).collect();
    assert_eq!(ids, vec![1, 2, 3, 4, 5, 6]);

    // Fewest vnodes first: a 2-vgroup db after a 1-vgroup db (on dnode 1) avoids dnode 1.
    let a = m.create_database("a", opts(1), false).unwrap();
    assert_eq!(a.vgroups[0].dnode, DnodeId(1));
    let b = m.create_database("b", opts(2), false).unwrap();
    let placed: Vec<_> = b.vgroups.iter().map(|v| v.dnode.0).collect();
    assert_eq!(placed, vec![2, 3]);

    let counts: Vec<_> = m
        .dnodes()
        .iter()
        .map(|d| (d.id.0, d.vnodes, d.alive))
        .collect();
    assert_eq!(counts, vec![(1, 3, true), (2, 3, true), (3, 3, true)]);
    assert_eq!(m.dnode(DnodeId(3)).unwrap().addr, "h3:6030");
    assert!(m.dnode(DnodeId(4)).is_none());

    let hb = m.heartbeat(DnodeId(2)).unwrap();
    let got: Vec<_> = hb.iter().map(|a| (a.db.as_str(), a.vgroup.id.0)).collect();
    assert_eq!(got, vec![("b", 8), ("iot", 2), ("iot", 5)]);
    assert_eq!(hb[1].options.vgroups, 6);

    let (dbname, vg) = m.vgroup(VgroupId(5)).unwrap();
    assert_eq!((dbname.as_str(), vg.dnode), ("iot", DnodeId(2)));
    assert!(m.vgroup(VgroupId(100)).is_none());
}

#[test]
fn placement_skips_dead_dnodes() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = MnodeConfig {
        dnode_timeout_ms: 200,
        ..MnodeConfig::default()
    };
    let m = Mnode::open_with(dir.path(), cfg).unwrap();
    let d1 = m.register_dnode("h1:6030", None).unwrap();
    let d2 = m.register_dnode("h2:6030", None).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let e = m.create_database("iot", opts(2), false).unwrap_err();
    assert_eq!(e.status_code(), StatusCode::NoDnodes);
    m.heartbeat(d2).unwrap();
    let db = m.create_database("iot", opts(2), false).unwrap();
    assert!(db.vgroups.iter().all(|v| v.dnode == d2));
    let alive: Vec<_> = m.dnodes().iter().map(|d| (d.id, d.alive)).collect();
    assert_eq!(alive, vec![(d1, false), (d2, true)]);
}

#[test]
fn last_heartbeat_is_wall_clock_and_unknown_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
    };
    {
        let m = Mnode::open(dir.path()).unwrap();
        let before = now();
        let d = m.register_dnode("h1:6030", None).unwrap();
        let first = m.dnodes()[0].last_heartbeat_ms;
        assert!(first >= before && first <= now(), "{first}");
        std::thread::sleep(std::time::Duration::from_millis(20));
        m.heartbeat(d).unwrap();
        assert!(m.dnodes()[0].last_heartbeat_ms > first);
    }
    // A reopened mnode counts the data node alive for a while but has heard nothing yet.
    let m = Mnode::open(dir.path()).unwrap();
    assert!(m.dnodes()[0].alive);
    assert_eq!(m.dnodes()[0].last_heartbeat_ms, 0);
}

#[test]
fn dnode_reregistration_keeps_its_id() {
    let dir = tempfile::tempdir().unwrap();
    {
        let m = Mnode::open(dir.path()).unwrap();
        let id = m.register_dnode("h1:6030", None).unwrap();
        assert_eq!(m.register_dnode("h1:6030", Some(id)).unwrap(), id);
        assert_eq!(m.register_dnode("h1b:6030", Some(id)).unwrap(), id);
        assert_eq!(m.dnodes().len(), 1);
        assert_eq!(m.dnodes()[0].addr, "h1b:6030");
        // An id the mnode does not know gets a fresh one.
        let other = m.register_dnode("h2:6030", Some(DnodeId(42))).unwrap();
        assert_eq!(other, DnodeId(2));
    }
    let m = Mnode::open(dir.path()).unwrap();
    assert_eq!(
        m.register_dnode("h1c:6030", Some(DnodeId(1))).unwrap(),
        DnodeId(1)
    );
    let d: Vec<_> = m
        .dnodes()
        .into_iter()
        .map(|d| (d.id.0, d.addr, d.alive))
        .collect();
    assert_eq!(
        d,
        vec![
            (1, "h1c:6030".to_string(), true),
            (2, "h2:6030".to_string(), true)
        ]
    );
    assert_eq!(m.register_dnode("h3:6030", None).unwrap(), DnodeId(3));
}

#[test]
fn ids_are_never_reused_after_drop_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let first_ids;
    {
        let m = Mnode::open_with(dir.path(), no_snapshots()).unwrap();
        m.register_dnode("h1:6030", None).unwrap();
        let db = m.create_database("a", opts(3), false).unwrap();
        first_ids = db.vgroups.iter().map(|v| v.id).collect::<Vec<_>>();
        m.drop_database("a", false).unwrap();
        let db = m.create_database("a", opts(2), false).unwrap();
        assert_eq!(db.vgroups[0].id, VgroupId(4));
        m.drop_database("a", false).unwrap();
    }
    for cfg in [
        no_snapshots(),
        MnodeConfig {
            snapshot_every: 1,
            ..MnodeConfig::default()
        },
    ] {
        let m = Mnode::open_with(dir.path(), cfg).unwrap();
        assert!(m.databases().is_empty());
        let db = m.create_database("c", opts(1), false).unwrap();
        assert!(db.vgroups[0].id.0 > 5, "{:?}", db.vgroups);
        assert!(!first_ids.contains(&db.vgroups[0].id));
        m.drop_database("c", false).unwrap();
    }
    // After a snapshot was taken (last pass) the counter still survives.
    let m = Mnode::open(dir.path()).unwrap();
    assert_eq!(
        m.create_database("d", opts(1), false).unwrap().vgroups[0].id,
        VgroupId(8)
    );
}

#[test]
fn reopen_recovers_everything_without_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let before = {
        let m = Mnode::open_with(dir.path(), no_snapshots()).unwrap();
        populate(&m);
        m.create_database("tmp", opts(1), false).unwrap();
        m.create_stable(schema("tmp", "s"), false).unwrap();
        m.drop_database("tmp", false).unwrap();
        m.create_stable(schema("iot", "gone"), false).unwrap();
        m.drop_stable("iot", "gone", false).unwrap();
        snapshot(&m)
    };
    assert!(!dir.path().join(SNAP_FILE).exists());
    let m = Mnode::open_with(dir.path(), no_snapshots()).unwrap();
    assert_eq!(snapshot(&m), before);
    assert_eq!(m.last_seq(), 9);
    // Dnodes count as alive for one timeout after a restart.
    assert!(m.dnodes().iter().all(|d| d.alive));
    assert_eq!(m.heartbeat(DnodeId(1)).unwrap().len(), 2);
}

#[test]
fn checkpoint_empties_the_log_and_reopen_matches() {
    let dir = tempfile::tempdir().unwrap();
    let before = {
        let m = Mnode::open_with(dir.path(), no_snapshots()).unwrap();
        populate(&m);
        let records = m.checkpoint().unwrap();
        assert!(
            records >= 4,
            "the log's records went into the snapshot: {records}"
        );
        assert_eq!(m.checkpoint().unwrap(), 0, "nothing new to absorb");
        snapshot(&m)
    };
    assert!(dir.path().join(SNAP_FILE).exists());
    assert_eq!(
        fs::metadata(dir.path().join(LOG_FILE)).unwrap().len(),
        crate::sdb::frame::FILE_HEADER_LEN as u64,
        "the log holds only its header"
    );
    let m = Mnode::open_with(dir.path(), no_snapshots()).unwrap();
    assert_eq!(snapshot(&m), before);
}

#[test]
fn reopen_recovers_everything_with_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = MnodeConfig {
        snapshot_every: 3,
        ..MnodeConfig::default()
    };
    let before = {
        let m = Mnode::open_with(dir.path(), cfg.clone()).unwrap();
        populate(&m); // 11 ops in all: snapshots after ops 3, 6, 9; 10 and 11 in the log
        for i in 0..6 {
            m.create_stable(schema("iot", &format!("s{i}")), false)
                .unwrap();
        }
        m.drop_stable("iot", "s3", false).unwrap();
        snapshot(&m)
    };
    assert!(dir.path().join(SNAP_FILE).exists());
    let log_len = fs::metadata(dir.path().join(LOG_FILE)).unwrap().len();
    assert!(
        log_len > 16,
        "the tail after the last snapshot is in the log"
    );
    let m = Mnode::open_with(dir.path(), cfg).unwrap();
    assert_eq!(snapshot(&m), before);
    assert_eq!(m.last_seq(), 11);
    assert_eq!(m.stables("iot").len(), 6);
    drop(m);
    // Also with the default threshold (no compaction on open).
    let m = Mnode::open(dir.path()).unwrap();
    assert_eq!(snapshot(&m), before);
}

#[test]
fn old_log_left_behind_a_snapshot_is_skipped() {
    // Simulates a crash after the snapshot rename but before the log switch: the snapshot
    // covers every record of the (old) log.
    let dir = tempfile::tempdir().unwrap();
    let before = {
        let m = Mnode::open_with(dir.path(), no_snapshots()).unwrap();
        populate(&m);
        snapshot(&m)
    };
    let old_log = fs::read(dir.path().join(LOG_FILE)).unwrap();
    {
        // Compact on open (threshold 1), which replaces the log by an empty one.
        let m = Mnode::open_with(
            dir.path(),
            MnodeConfig {
                snapshot_every: 1,
                ..MnodeConfig::default()
            },
        )
        .unwrap();
        assert_eq!(snapshot(&m), before);
    }
    assert_eq!(fs::metadata(dir.path().join(LOG_FILE)).unwrap().len(), 16);
    fs::write(dir.path().join(LOG_FILE), &old_log).unwrap();
    let m = Mnode::open_with(dir.path(), no_snapshots()).unwrap();
    assert_eq!(snapshot(&m), before);
    // New ops continue the sequence after the skipped records.
    m.create_database("more", opts(1), false).unwrap();
    drop(m);
    let m = Mnode::open_with(dir.path(), no_snapshots()).unwrap();
    assert!(m.database("more").is_some());
    assert_eq!(m.last_seq(), 5);
}

#[test]
fn torn_tail_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join(LOG_FILE);
    let (full, before_last) = {
        let m = Mnode::open_with(dir.path(), no_snapshots()).unwrap();
        populate(&m);
        let before_last = fs::read(&log).unwrap();
        let b = snapshot(&m);
        m.create_database("last", opts(1), false).unwrap();
        (fs::read(&log).unwrap(), (before_last, b))
    };
    let (prefix, state_before_last) = before_last;
    // Every cut inside the last record drops exactly that record.
    for cut in prefix.len()..full.len() {
        fs::write(&log, &full[..cut]).unwrap();
        let m = Mnode::open_with(dir.path(), no_snapshots()).unwrap();
        assert_eq!(snapshot(&m), state_before_last, "cut at {cut}");
        drop(m);
        assert_eq!(
            fs::read(&log).unwrap(),
            prefix,
            "torn tail truncated (cut {cut})"
        );
    }
    // A bad checksum on the last record (flipped payload byte) is also a torn tail.
    let mut bad = full.clone();
    let n = bad.len();
    bad[n - 3] ^= 0x40;
    fs::write(&log, &bad).unwrap();
    let m = Mnode::open_with(dir.path(), no_snapshots()).unwrap();
    assert!(m.database("last").is_none());
    // Garbage zeros after the last record (preallocated blocks) are dropped too.
    m.create_database("last", opts(1), false).unwrap();
    drop(m);
    let mut z = fs::read(&log).unwrap();
    let good_len = z.len();
    z.extend_from_slice(&[0u8; 100]);
    fs::write(&log, &z).unwrap();
    let m = Mnode::open_with(dir.path(), no_snapshots()).unwrap();
    assert!(m.database("last").is_some());
    drop(m);
    assert_eq!(fs::metadata(&log).unwrap().len() as usize, good_len);
    // Stale bytes of an older log (a valid record with an old seq) after a torn record are
    // still a torn tail, not evidence of mid-log damage.
    let mut stale = fs::read(&log).unwrap();
    stale.extend_from_slice(&[0xAB; 7]);
    stale.extend_from_slice(&full[16..]);
    fs::write(&log, &stale).unwrap();
    let m = Mnode::open_with(dir.path(), no_snapshots()).unwrap();
    assert!(m.database("last").is_some());
    drop(m);
    assert_eq!(fs::metadata(&log).unwrap().len() as usize, good_len);
}

fn assert_corruption(dir: &Path, file: &str) -> String {
    let e = match Mnode::open_with(dir, no_snapshots()) {
        Ok(m) => panic!("open must fail for {file}; state {}", snapshot(&m)),
        Err(e) => e,
    };
    assert_eq!(e.status_code(), StatusCode::Corruption, "{e}");
    let msg = e.to_string();
    assert!(msg.contains(file), "{msg}");
    assert!(msg.contains("offset"), "{msg}");
    msg
}

#[test]
fn flipped_byte_mid_log_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join(LOG_FILE);
    {
        let m = Mnode::open_with(dir.path(), no_snapshots()).unwrap();
        populate(&m);
    }
    let good = fs::read(&log).unwrap();
    // Flip each byte of the first three records in turn (header, length, crc, seq, payload):
    // valid records follow, so none of them is a torn tail. Never panics.
    let second_record_end = {
        let f1 = crate::sdb::frame::decode_record(&good, 16).unwrap();
        let f2 = crate::sdb::frame::decode_record(&good, f1.end).unwrap();
        let f3 = crate::sdb::frame::decode_record(&good, f2.end).unwrap();
        f3.end
    };
    for i in 0..second_record_end {
        for bit in [0x01u8, 0x80] {
            let mut bad = good.clone();
            bad[i] ^= bit;
            fs::write(&log, &bad).unwrap();
            let msg = assert_corruption(dir.path(), LOG_FILE);
            if i >= 16 {
                assert!(!msg.contains("offset 0:"), "byte {i}: {msg}");
            }
        }
    }
    // The files are left alone on corruption: fixing the byte makes it open again.
    fs::write(&log, &good).unwrap();
    let m = Mnode::open_with(dir.path(), no_snapshots()).unwrap();
    assert_eq!(m.stables("iot").len(), 1);
}

#[test]
fn damaged_snapshot_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    {
        let m = Mnode::open_with(
            dir.path(),
            MnodeConfig {
                snapshot_every: 1,
                ..MnodeConfig::default()
            },
        )
        .unwrap();
        populate(&m);
    }
    let snap = dir.path().join(SNAP_FILE);
    let good = fs::read(&snap).unwrap();
    for i in (0..good.len()).step_by(7) {
        let mut bad = good.clone();
        bad[i] ^= 0x10;
        fs::write(&snap, &bad).unwrap();
        assert_corruption(dir.path(), SNAP_FILE);
    }
    fs::write(&snap, &good[..good.len() - 1]).unwrap();
    assert_corruption(dir.path(), SNAP_FILE);
    let mut longer = good.clone();
    longer.push(0);
    fs::write(&snap, &longer).unwrap();
    assert_corruption(dir.path(), SNAP_FILE);
    fs::write(&snap, &good).unwrap();
    assert_eq!(Mnode::open(dir.path()).unwrap().stables("iot").len(), 1);
}

#[test]
fn arbitrary_file_contents_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join(LOG_FILE);
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for round in 0..200 {
        let len = (next() % 300) as usize;
        let mut bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if round % 2 == 0 && bytes.len() >= 16 {
            bytes[..16].copy_from_slice(&crate::sdb::frame::encode_file_header(
                &crate::sdb::frame::LOG_MAGIC,
            ));
        }
        fs::write(&log, &bytes).unwrap();
        let _ = Mnode::open_with(dir.path(), no_snapshots());
        let _ = fs::remove_file(dir.path().join(SNAP_FILE));
    }
    // A record with a valid frame but a payload that is not an op.
    let mut bytes = crate::sdb::frame::encode_file_header(&crate::sdb::frame::LOG_MAGIC).to_vec();
    bytes.extend_from_slice(&crate::sdb::frame::encode_record(1, b"{\"Nope\":1}"));
    fs::write(&log, &bytes).unwrap();
    assert_corruption(dir.path(), LOG_FILE);
    // A valid op that does not apply (stable in a missing database).
    let op = crate::catalog::Op::CreateStable {
        schema: schema("nodb", "s"),
    };
    let mut bytes = crate::sdb::frame::encode_file_header(&crate::sdb::frame::LOG_MAGIC).to_vec();
    bytes.extend_from_slice(&crate::sdb::frame::encode_record(
        1,
        &serde_json::to_vec(&op).unwrap(),
    ));
    fs::write(&log, &bytes).unwrap();
    let msg = assert_corruption(dir.path(), LOG_FILE);
    assert!(msg.contains("does not apply"), "{msg}");
    // Gap in the sequence.
    let mut bytes = crate::sdb::frame::encode_file_header(&crate::sdb::frame::LOG_MAGIC).to_vec();
    let op = crate::catalog::Op::RegisterDnode {
        id: DnodeId(1),
        addr: "h".into(),
        created_ms: 0,
    };
    bytes.extend_from_slice(&crate::sdb::frame::encode_record(
        2,
        &serde_json::to_vec(&op).unwrap(),
    ));
    fs::write(&log, &bytes).unwrap();
    assert!(assert_corruption(dir.path(), LOG_FILE).contains("gap"));
    // Wrong version.
    let mut bytes = crate::sdb::frame::encode_file_header(&crate::sdb::frame::LOG_MAGIC).to_vec();
    bytes[8] = 9;
    fs::write(&log, &bytes).unwrap();
    assert!(assert_corruption(dir.path(), LOG_FILE).contains("version"));
}

#[test]
fn second_open_of_the_same_directory_fails() {
    let dir = tempfile::tempdir().unwrap();
    let m = Mnode::open(dir.path()).unwrap();
    let e = Mnode::open(dir.path()).err().unwrap();
    assert_eq!(e.status_code(), StatusCode::StorageIo);
    drop(m);
    Mnode::open(dir.path()).unwrap();
}

#[test]
fn concurrent_mutations_and_reads() {
    let dir = tempfile::tempdir().unwrap();
    let m = std::sync::Arc::new(
        Mnode::open_with(
            dir.path(),
            MnodeConfig {
                snapshot_every: 10,
                ..MnodeConfig::default()
            },
        )
        .unwrap(),
    );
    m.register_dnode("h1:6030", None).unwrap();
    m.register_dnode("h2:6030", None).unwrap();
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let m = m.clone();
            std::thread::spawn(move || {
                for i in 0..10 {
                    let name = format!("db_{t}_{i}");
                    m.create_database(&name, opts(2), false).unwrap();
                    m.create_stable(schema(&name, "s"), false).unwrap();
                    m.heartbeat(DnodeId(1)).unwrap();
                    assert!(m.database(&name).is_some());
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let before = snapshot(&m);
    let mut ids: Vec<_> = m
        .databases()
        .iter()
        .flat_map(|d| d.vgroups.iter().map(|v| v.id))
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 80);
    let vnodes: Vec<_> = m.dnodes().iter().map(|d| d.vnodes).collect();
    assert_eq!(vnodes, vec![40, 40]);
    drop(m);
    let m = Mnode::open(dir.path()).unwrap();
    assert_eq!(snapshot(&m), before);
}

#[test]
fn mnode_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Mnode>();
    check::<MnodeError>();
}

#[test]
fn alter_stable_adds_columns_and_tags_and_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let m = Mnode::open_with(dir.path(), no_snapshots()).unwrap();
        populate(&m);
        let s = m
            .alter_stable(
                "iot",
                "READINGS",
                vec![ColumnDef::new("speed", DataType::BigInt)],
                vec![ColumnDef::new("fleet", DataType::VarChar(64))],
            )
            .unwrap();
        assert_eq!(s.version, SchemaVersion(2));
        assert_eq!(s.columns.len(), 3);
        assert_eq!(s.columns[2].name, "speed");
        assert_eq!(s.tags[1].name, "fleet");
        let s = m
            .alter_stable(
                "iot",
                "readings",
                Vec::new(),
                vec![ColumnDef::new("x", DataType::Bool)],
            )
            .unwrap();
        assert_eq!(s.version, SchemaVersion(3));
        // Errors: duplicates (also against existing names, case-insensitive), nothing to add,
        // a TIMESTAMP column, unknown STABLE or database.
        let e = m
            .alter_stable(
                "iot",
                "readings",
                vec![ColumnDef::new("V", DataType::Double)],
                vec![],
            )
            .unwrap_err();
        assert_eq!(e.status_code(), StatusCode::InvalidArgument);
        assert!(e.to_string().contains("duplicate"), "{e}");
        let e = m
            .alter_stable("iot", "readings", vec![], vec![])
            .unwrap_err();
        assert!(e.to_string().contains("adds nothing"), "{e}");
        let e = m
            .alter_stable(
                "iot",
                "readings",
                vec![ColumnDef::new("t2", DataType::Timestamp)],
                vec![],
            )
            .unwrap_err();
        assert!(e.to_string().contains("TIMESTAMP"), "{e}");
        let e = m
            .alter_stable(
                "iot",
                "nope",
                vec![ColumnDef::new("a", DataType::Double)],
                vec![],
            )
            .unwrap_err();
        assert_eq!(e.status_code(), StatusCode::StableNotFound);
        let e = m
            .alter_stable(
                "nodb",
                "readings",
                vec![ColumnDef::new("a", DataType::Double)],
                vec![],
            )
            .unwrap_err();
        assert_eq!(e.status_code(), StatusCode::DatabaseNotFound);
    }
    // Replayed from the log, and then from a snapshot.
    let m = Mnode::open_with(dir.path(), no_snapshots()).unwrap();
    let s = m.stable("iot", "readings").unwrap();
    assert_eq!(s.version, SchemaVersion(3));
    assert_eq!(s.tags.len(), 3);
    drop(m);
    let m = Mnode::open_with(
        dir.path(),
        MnodeConfig {
            snapshot_every: 1,
            ..MnodeConfig::default()
        },
    )
    .unwrap();
    drop(m);
    let m = Mnode::open_with(dir.path(), no_snapshots()).unwrap();
    assert_eq!(m.stable("iot", "readings").unwrap().columns.len(), 3);
}

#[test]
fn alter_stable_widens_and_renames_and_survives_reopen() {
    use crate::StableAlteration;
    let dir = tempfile::tempdir().unwrap();
    {
        let m = Mnode::open_with(dir.path(), no_snapshots()).unwrap();
        populate(&m);
        m.alter_stable(
            "iot",
            "readings",
            vec![ColumnDef::new("note", DataType::VarChar(4))],
            vec![],
        )
        .unwrap();
        let change = |f: fn(&mut StableAlteration)| {
            let mut c = StableAlteration::default();
            f(&mut c);
            c
        };
        let s = m
            .alter_stable_with(
                "iot",
                "readings",
                change(|c| c.modify_columns = vec![ColumnDef::new("NOTE", DataType::VarChar(16))]),
            )
            .unwrap();
        assert_eq!(s.columns[2].data_type, DataType::VarChar(16));
        assert_eq!(s.columns[2].name, "note");
        let s = m
            .alter_stable_with(
                "iot",
                "readings",
                change(|c| {
                    c.modify_tags = vec![ColumnDef::new("name", DataType::VarChar(64))];
                    c.rename_tags = vec![("name".into(), "truck".into())];
                }),
            )
            .unwrap();
        assert_eq!(s.tags[0].name, "truck");
        assert_eq!(s.tags[0].data_type, DataType::VarChar(64));
        // Refused, and nothing logged: narrowing, another type, unknown names, a clash.
        for (c, why) in [
            (
                change(|c| c.modify_columns = vec![ColumnDef::new("note", DataType::VarChar(8))]),
                "only grow",
            ),
            (
                change(|c| c.modify_columns = vec![ColumnDef::new("v", DataType::Float)]),
                "only the width",
            ),
            (
                change(|c| c.modify_tags = vec![ColumnDef::new("x", DataType::VarChar(8))]),
                "no tag 'x'",
            ),
            (
                change(|c| c.rename_tags = vec![("x".into(), "y".into())]),
                "no tag 'x' to rename",
            ),
            (
                change(|c| c.rename_tags = vec![("truck".into(), "V".into())]),
                "duplicate",
            ),
        ] {
            let e = m.alter_stable_with("iot", "readings", c).unwrap_err();
            assert_eq!(e.status_code(), StatusCode::InvalidArgument);
            assert!(e.to_string().contains(why), "{e}");
        }
        // The mnode still works after the refusals.
        m.alter_stable(
            "iot",
            "readings",
            vec![],
            vec![ColumnDef::new("fleet", DataType::NChar(8))],
        )
        .unwrap();
    }
    let m = Mnode::open_with(dir.path(), no_snapshots()).unwrap();
    let s = m.stable("iot", "readings").unwrap();
    assert_eq!(s.version, SchemaVersion(5));
    assert_eq!(
        (
            s.tags[0].name.as_str(),
            s.columns[2].data_type,
            s.tags.len()
        ),
        ("truck", DataType::VarChar(16), 2)
    );
}
