//! The logical operations a WAL record carries, and their binary encoding (see
//! `wal/FORMAT.md`). Owns: the payload layout. Invariant: an `Apply` record is self-contained
//! (schemas it needs, tables it creates with their uids, rows by uid), so replay never needs
//! validation or uid allocation and reproduces exactly the state the live write produced.

use crate::codec::{DResult, Reader, Writer};
use tidal_common::{Column, StableSchema, TableMeta, TableUid};

const KIND_APPLY: u8 = 1;
const KIND_DROP_TABLE: u8 = 2;
const KIND_DROP_STABLE: u8 = 3;

/// A borrowed apply operation (the live write path encodes straight from the request).
pub struct ApplyRef<'a> {
    pub schemas: Vec<&'a StableSchema>,
    pub creates: Vec<TableMeta>,
    pub rows: Vec<(TableUid, &'a [Column])>,
}

/// A decoded WAL record.
pub enum Op {
    Apply {
        schemas: Vec<StableSchema>,
        creates: Vec<TableMeta>,
        rows: Vec<(TableUid, Vec<Column>)>,
    },
    DropTable {
        name: String,
    },
    DropStable {
        name: String,
    },
}

pub fn encode_apply(a: &ApplyRef<'_>) -> Vec<u8> {
    let mut w = Writer::new();
    w.u8(KIND_APPLY);
    w.len_u32(a.schemas.len());
    for s in &a.schemas {
        w.schema(s);
    }
    w.len_u32(a.creates.len());
    for t in &a.creates {
        w.table_meta(t);
    }
    w.len_u32(a.rows.len());
    for (uid, cols) in &a.rows {
        w.u64(uid.0);
        w.len_u32(cols.len());
        for c in cols.iter() {
            w.column(c);
        }
    }
    w.buf
}

pub fn encode_drop_table(name: &str) -> Vec<u8> {
    let mut w = Writer::new();
    w.u8(KIND_DROP_TABLE);
    w.str(name);
    w.buf
}

pub fn encode_drop_stable(name: &str) -> Vec<u8> {
    let mut w = Writer::new();
    w.u8(KIND_DROP_STABLE);
    w.str(name);
    w.buf
}

pub fn decode(payload: &[u8]) -> DResult<Op> {
    let mut r = Reader::new(payload);
    let op = match r.u8()? {
        KIND_APPLY => {
            let n = r.count(1)?;
            let mut schemas = Vec::with_capacity(n);
            for _ in 0..n {
                schemas.push(r.schema()?);
            }
            let n = r.count(1)?;
            let mut creates = Vec::with_capacity(n);
            for _ in 0..n {
                creates.push(r.table_meta()?);
            }
            let n = r.count(12)?;
            let mut rows = Vec::with_capacity(n);
            for _ in 0..n {
                let uid = TableUid(r.u64()?);
                let nc = r.count(6)?;
                let mut cols = Vec::with_capacity(nc);
                for _ in 0..nc {
                    cols.push(r.column()?);
                }
                rows.push((uid, cols));
            }
            Op::Apply {
                schemas,
                creates,
                rows,
            }
        }
        KIND_DROP_TABLE => Op::DropTable { name: r.str()? },
        KIND_DROP_STABLE => Op::DropStable { name: r.str()? },
        k => return r.err(format!("unknown WAL record kind {k}")),
    };
    if !r.is_empty() {
        return r.err(format!("{} trailing bytes after the record", r.remaining()));
    }
    Ok(op)
}
