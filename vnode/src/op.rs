//! The logical operations a WAL record carries, and their binary encoding (see
//! `wal/FORMAT.md`). Owns: the payload layout. Invariant: an `Apply` record is self-contained
//! (schemas it needs, tables it creates with their uids, rows by uid), so replay never needs
//! validation or uid allocation and reproduces exactly the state the live write produced.

use crate::codec::{DResult, Reader, Writer};
use tidal_common::{Column, StableSchema, TableMeta, TableUid, Value};

const KIND_APPLY: u8 = 1;
const KIND_DROP_TABLE: u8 = 2;
const KIND_DROP_STABLE: u8 = 3;
/// An Apply that also carries row blocks (written only when a batch has blocks, so a WAL
/// without them reads exactly as before).
const KIND_APPLY_BLOCKS: u8 = 4;
/// ALTER TABLE .. SET TAG: new values for some tags of one subtable (added after kinds 1-4,
/// whose decoding it leaves as it was).
const KIND_SET_TAGS: u8 = 5;

/// Rows of many subtables of one STABLE as one set of columns (a request's `RowBlock` with its
/// subtables resolved to uids): run `(i, n)` = the next `n` rows belong to `uids[i]`.
pub struct BlockRef<'a> {
    pub uids: Vec<TableUid>,
    pub runs: &'a [(u32, u32)],
    /// Given up by the write that logs them: the memtable may keep the vectors themselves.
    pub columns: Vec<Column>,
}

/// A decoded [`BlockRef`].
pub struct Block {
    pub uids: Vec<TableUid>,
    pub runs: Vec<(u32, u32)>,
    pub columns: Vec<Column>,
}

/// An apply operation as the live write path holds it: names, runs and rows borrowed from
/// the request (encoded straight from it), the blocks' columns handed over for the memtable.
pub struct ApplyRef<'a> {
    pub schemas: Vec<&'a StableSchema>,
    pub creates: Vec<TableMeta>,
    pub rows: Vec<(TableUid, &'a [Column])>,
    pub blocks: Vec<BlockRef<'a>>,
}

/// A decoded WAL record.
pub enum Op {
    Apply {
        schemas: Vec<StableSchema>,
        creates: Vec<TableMeta>,
        rows: Vec<(TableUid, Vec<Column>)>,
        blocks: Vec<Block>,
    },
    DropTable {
        name: String,
    },
    DropStable {
        name: String,
    },
    /// Subtable `name`'s tag at each position takes the value beside it (values already
    /// coerced to the tag's type when the record was written).
    SetTags {
        name: String,
        tags: Vec<(usize, Value)>,
    },
}

/// The WAL record of `a`, written into `buf` (cleared first; a buffer the WAL gave back,
/// [`crate::wal::Wal::buffer`], so that its pages are already mapped).
pub fn encode_apply_into(a: &ApplyRef<'_>, buf: Vec<u8>) -> Vec<u8> {
    let mut w = Writer::from_buf(buf, apply_bytes(a));
    encode_apply_with(a, &mut w);
    w.buf
}

#[cfg(test)]
pub fn encode_apply(a: &ApplyRef<'_>) -> Vec<u8> {
    encode_apply_into(a, Vec::new())
}

/// About the bytes of `a`'s record, so that it is written without growing its buffer
/// (doubling a record of a large batch copied it about twice over).
fn apply_bytes(a: &ApplyRef<'_>) -> usize {
    // Schemas are small and rare; creates come with a batch's new subtables (a tenth of the
    // rows of a first load of 100,000s of devices), the columns are most of a record.
    let creates: usize = a
        .creates
        .iter()
        .map(|t| {
            20 + t.name.len()
                + t.stable.len()
                + t.tags
                    .iter()
                    .map(|v| match v {
                        Value::Str(s) => 5 + s.len(),
                        _ => 9,
                    })
                    .sum::<usize>()
        })
        .sum();
    let columns: usize = a
        .rows
        .iter()
        .map(|(_, cols)| 12 + cols.iter().map(Writer::column_bytes).sum::<usize>())
        .chain(a.blocks.iter().map(|b| {
            12 + 8 * b.uids.len()
                + 8 * b.runs.len()
                + b.columns.iter().map(Writer::column_bytes).sum::<usize>()
        }))
        .sum();
    64 + creates + columns
}

fn encode_apply_with(a: &ApplyRef<'_>, w: &mut Writer) {
    w.u8(if a.blocks.is_empty() {
        KIND_APPLY
    } else {
        KIND_APPLY_BLOCKS
    });
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
    if !a.blocks.is_empty() {
        w.len_u32(a.blocks.len());
        for b in &a.blocks {
            w.len_u32(b.uids.len());
            for u in &b.uids {
                w.u64(u.0);
            }
            w.len_u32(b.runs.len());
            for (t, n) in b.runs {
                w.u32(*t);
                w.u32(*n);
            }
            w.len_u32(b.columns.len());
            for c in b.columns.iter() {
                w.column(c);
            }
        }
    }
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

pub fn encode_set_tags(name: &str, tags: &[(usize, Value)]) -> Vec<u8> {
    let mut w = Writer::new();
    w.u8(KIND_SET_TAGS);
    w.str(name);
    w.len_u32(tags.len());
    for (k, v) in tags {
        // A tag position is below the number of tags a schema may have, far under u32::MAX.
        w.u32(u32::try_from(*k).unwrap_or(u32::MAX));
        w.value(v);
    }
    w.buf
}

pub fn decode(payload: &[u8]) -> DResult<Op> {
    let mut r = Reader::new(payload);
    let op = match r.u8()? {
        kind @ (KIND_APPLY | KIND_APPLY_BLOCKS) => {
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
            let mut blocks = Vec::new();
            if kind == KIND_APPLY_BLOCKS {
                let n = r.count(12)?;
                blocks.reserve(n);
                for _ in 0..n {
                    blocks.push(decode_block(&mut r)?);
                }
            }
            Op::Apply {
                schemas,
                creates,
                rows,
                blocks,
            }
        }
        KIND_DROP_TABLE => Op::DropTable { name: r.str()? },
        KIND_DROP_STABLE => Op::DropStable { name: r.str()? },
        KIND_SET_TAGS => {
            let name = r.str()?;
            // position u32 + at least the value's kind byte
            let n = r.count(5)?;
            let mut tags = Vec::with_capacity(n);
            for _ in 0..n {
                let k = r.u32()? as usize;
                tags.push((k, r.value()?));
            }
            Op::SetTags { name, tags }
        }
        k => return r.err(format!("unknown WAL record kind {k}")),
    };
    if !r.is_empty() {
        return r.err(format!("{} trailing bytes after the record", r.remaining()));
    }
    Ok(op)
}

/// One block of a `KIND_APPLY_BLOCKS` record; its runs must name its uids and cover its
/// columns exactly (replay inserts by them).
fn decode_block(r: &mut Reader<'_>) -> DResult<Block> {
    let n = r.count(8)?;
    let mut uids = Vec::with_capacity(n);
    for _ in 0..n {
        uids.push(TableUid(r.u64()?));
    }
    let n = r.count(8)?;
    let mut runs = Vec::with_capacity(n);
    let mut rows = 0usize;
    for _ in 0..n {
        let (t, k) = (r.u32()?, r.u32()?);
        if t as usize >= uids.len() || k == 0 {
            return r.err(format!(
                "a run of {k} rows of subtable {t} in a block of {} subtables",
                uids.len()
            ));
        }
        rows += k as usize;
        runs.push((t, k));
    }
    let n = r.count(6)?;
    let mut columns = Vec::with_capacity(n);
    for _ in 0..n {
        let c = r.column()?;
        if c.len() != rows {
            return r.err(format!(
                "a block column of {} rows where the runs hold {rows}",
                c.len()
            ));
        }
        columns.push(c);
    }
    if columns.is_empty() && rows > 0 {
        return r.err(format!("a block of {rows} rows without columns"));
    }
    Ok(Block {
        uids,
        runs,
        columns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_tags_round_trips_and_a_cut_record_is_an_error() {
        let tags = vec![
            (0usize, Value::Str("new".into())),
            (2, Value::Null),
            (3, Value::Float(1.5)),
        ];
        let buf = encode_set_tags("truck_1", &tags);
        let Ok(Op::SetTags { name, tags: got }) = decode(&buf) else {
            panic!("not a SetTags record")
        };
        assert_eq!(name, "truck_1");
        assert_eq!(got, tags);
        for cut in 1..buf.len() {
            assert!(decode(&buf[..cut]).is_err(), "cut at {cut}");
        }
        let mut long = buf.clone();
        long.push(0);
        assert!(decode(&long).is_err(), "trailing bytes");
    }

    #[test]
    fn older_record_kinds_decode_as_before() {
        let Ok(Op::DropTable { name }) = decode(&encode_drop_table("t")) else {
            panic!("not a DropTable record")
        };
        assert_eq!(name, "t");
        let Ok(Op::Apply { creates, .. }) = decode(&encode_apply(&ApplyRef {
            schemas: Vec::new(),
            creates: Vec::new(),
            rows: Vec::new(),
            blocks: Vec::new(),
        })) else {
            panic!("not an Apply record")
        };
        assert!(creates.is_empty());
    }
}
