//! A `WriteRequest` of row blocks read straight into a [`WriteBatch`]: the mirror of
//! [`crate::write_wire`], for the data node's side of a write.
//!
//! Why: decoding a batch with prost builds its wire messages first (a `TagValues` message and
//! a `Value` message per tag, vectors of varints) and [`write_from_wire`] then converts them
//! into row blocks; profiled during a load of 100,000 trucks, the two were a fifth of the data
//! nodes' CPU. Here the per-subtable parts of a block (names, name ends, tags, runs) go
//! straight from the bytes into the block's parts; the few columns of a block and the
//! schemas, one message each, are still decoded by prost (columns from a slice of the same
//! buffer, so their fixed-width values are copied once, into the column).
//!
//! Invariant: [`read_write_request`] answers only for a message it reads exactly as prost and
//! [`write_from_wire`] would: every field the contract defines, in field order, with the wire
//! type prost writes (packed repeated scalars), each singular field at most once, and every
//! part valid. For anything else (unknown or repeated singular fields, unpacked scalars, a
//! `TableWrite`, bad UTF-8, an invalid block, a truncated message) it answers `None`, and
//! the caller decodes the message with prost and converts it, which gives the same batch or
//! the error the caller would have given anyway. The tests and the `write_request` fuzz
//! target check that whenever this answers, prost and the conversion give the same batch.

use crate::convert::{column_from_wire, schema_from_wire, write_from_wire};
use crate::v1;
use prost::bytes::Bytes;
use prost::Message;
use tidal_common::{RowBlock, RowBlockParts, Tags, Value, VgroupId, WriteBatch};

/// Wire types (the protobuf encoding's).
const VARINT: u8 = 0;
const I64: u8 = 1;
const LEN: u8 = 2;

/// The batch `msg` (a whole encoded `WriteRequest`) stands for, or `None` when it is not one
/// this reader takes (see the module doc): then decode it with prost.
pub fn read_write_request(msg: &Bytes) -> Option<WriteBatch> {
    let mut r = Reader::new(msg);
    let mut order = FieldOrder::new(&[3, 5]);
    let mut batch = WriteBatch {
        db: String::new(),
        vgroup: VgroupId(0),
        schemas: Vec::new(),
        tables: Vec::new(),
        blocks: Vec::new(),
    };
    while !r.done() {
        let (field, wire) = r.key()?;
        order.next(field)?;
        match (field, wire) {
            (1, LEN) => batch.db = r.string()?,
            (2, VARINT) => batch.vgroup = VgroupId(r.varint()? as u32),
            (3, LEN) => {
                let part = r.bytes()?;
                let s = v1::StableSchema::decode(part).ok()?;
                batch.schemas.push(schema_from_wire(&s).ok()?);
            }
            (5, LEN) => {
                let (start, end) = r.span()?;
                batch.blocks.push(read_block(msg, start, end)?);
            }
            // `tables` (field 4, SQL inserts) and anything unknown: prost's way.
            _ => return None,
        }
    }
    Some(batch)
}

/// The `RowBlock` message at `msg[start..end]`.
fn read_block(msg: &Bytes, start: usize, end: usize) -> Option<RowBlock> {
    let mut r = Reader {
        buf: msg.get(..end)?,
        pos: start,
    };
    let mut order = FieldOrder::new(&[5, 8]);
    let mut stable = String::new();
    let mut names = String::new();
    let mut ends: Vec<u32> = Vec::new();
    let mut tagged: Vec<u32> = Vec::new();
    let mut tag_lists: Vec<Tags> = Vec::new();
    let mut run_tables: Vec<u32> = Vec::new();
    let mut run_rows: Vec<u32> = Vec::new();
    let mut columns = Vec::new();
    while !r.done() {
        let (field, wire) = r.key()?;
        order.next(field)?;
        match (field, wire) {
            (1, LEN) => stable = r.string()?,
            (2, LEN) => names = r.string()?,
            (3, LEN) => r.packed_u32(&mut ends)?,
            (4, LEN) => r.packed_u32(&mut tagged)?,
            (5, LEN) => {
                let part = r.bytes()?;
                tag_lists.push(read_tag_values(part)?);
            }
            (6, LEN) => r.packed_u32(&mut run_tables)?,
            (7, LEN) => r.packed_u32(&mut run_rows)?,
            (8, LEN) => {
                let (s, e) = r.span()?;
                let c = v1::Column::decode(msg.slice(s..e)).ok()?;
                columns.push(column_from_wire(c).ok()?);
            }
            _ => return None,
        }
    }
    if tagged.len() != tag_lists.len() || run_tables.len() != run_rows.len() {
        return None;
    }
    let mut tags: Vec<Option<Tags>> = vec![None; ends.len()];
    let mut prev: Option<u32> = None;
    for (i, t) in tagged.iter().zip(tag_lists) {
        if prev.is_some_and(|p| p >= *i) {
            return None;
        }
        prev = Some(*i);
        *tags.get_mut(*i as usize)? = Some(t);
    }
    let runs = run_tables.into_iter().zip(run_rows).collect();
    RowBlock::from_parts(RowBlockParts {
        stable,
        names,
        ends,
        tags,
        runs,
        columns,
    })
    .ok()
}

/// A `TagValues` message: its `Value`s.
fn read_tag_values(buf: &[u8]) -> Option<Tags> {
    // Counted first, so that the values go straight into their shared slice: one
    // allocation, where a `Vec` grown value by value and then copied into the slice took
    // three (a tenth of a data node's decoding at 100,000s of new subtables).
    let mut r = Reader::new(buf);
    let mut n = 0usize;
    while !r.done() {
        match r.key()? {
            (1, LEN) => r.bytes()?,
            _ => return None,
        };
        n += 1;
    }
    let mut r = Reader::new(buf);
    let mut bad = false;
    let tags: Tags = (0..n)
        .map(|_| {
            let v = match r.key() {
                Some((1, LEN)) => r.bytes().and_then(read_value),
                _ => None,
            };
            v.unwrap_or_else(|| {
                bad = true;
                Value::Null
            })
        })
        .collect();
    (!bad).then_some(tags)
}

/// A `Value` message as [`crate::convert::value_from_wire_owned`] converts it: no field is
/// NULL; two fields (a oneof prost would settle by the last) are left to prost.
fn read_value(buf: &[u8]) -> Option<Value> {
    let mut r = Reader::new(buf);
    if r.done() {
        return Some(Value::Null);
    }
    let v = match r.key()? {
        (1, VARINT) => {
            r.varint()?;
            Value::Null
        }
        (2, VARINT) => Value::Bool(r.varint()? != 0),
        (3, VARINT) => Value::Int(zigzag(r.varint()?)),
        (4, VARINT) => Value::UInt(r.varint()?),
        (5, I64) => Value::Float(f64::from_le_bytes(r.fixed8()?)),
        (6, LEN) => Value::Str(r.string()?),
        (7, VARINT) => Value::Timestamp(zigzag(r.varint()?)),
        _ => return None,
    };
    r.done().then_some(v)
}

fn zigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Checks that fields come in field order, each singular one at most once.
struct FieldOrder {
    last: u32,
    repeated: &'static [u32],
}

impl FieldOrder {
    fn new(repeated: &'static [u32]) -> FieldOrder {
        FieldOrder { last: 0, repeated }
    }

    fn next(&mut self, field: u32) -> Option<()> {
        let again = field == self.last && self.repeated.contains(&field);
        if field <= self.last && !again {
            return None;
        }
        self.last = field;
        Some(())
    }
}

/// Reads protobuf's encoding from a slice; every read is bounds-checked and `None` at the
/// first byte that is not what prost would accept there.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    fn done(&self) -> bool {
        self.pos >= self.buf.len()
    }

    /// A varint as prost decodes one: at most ten bytes, the tenth at most 1.
    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for i in 0..10 {
            let b = *self.buf.get(self.pos)?;
            self.pos += 1;
            if i == 9 && b > 1 {
                return None;
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                return Some(v);
            }
        }
        None
    }

    /// A field key: (field number, wire type).
    fn key(&mut self) -> Option<(u32, u8)> {
        let k = u32::try_from(self.varint()?).ok()?;
        let field = k >> 3;
        (field > 0).then_some((field, (k & 7) as u8))
    }

    /// A length-delimited field's bounds in `buf`.
    fn span(&mut self) -> Option<(usize, usize)> {
        let len = usize::try_from(self.varint()?).ok()?;
        let start = self.pos;
        let end = start.checked_add(len).filter(|e| *e <= self.buf.len())?;
        self.pos = end;
        Some((start, end))
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let (s, e) = self.span()?;
        self.buf.get(s..e)
    }

    fn string(&mut self) -> Option<String> {
        std::str::from_utf8(self.bytes()?).ok().map(str::to_string)
    }

    fn fixed8(&mut self) -> Option<[u8; 8]> {
        let b = self.buf.get(self.pos..self.pos + 8)?;
        self.pos += 8;
        b.try_into().ok()
    }

    /// A packed repeated `uint32` (each varint truncated to 32 bits, as prost does), appended.
    fn packed_u32(&mut self, out: &mut Vec<u32>) -> Option<()> {
        let (s, e) = self.span()?;
        let mut r = Reader {
            buf: self.buf.get(..e)?,
            pos: s,
        };
        // A varint ends at each byte below 0x80: the count, without decoding.
        let n = r
            .buf
            .get(s..)
            .map_or(0, |b| b.iter().filter(|&&x| x < 0x80).count());
        out.reserve(n);
        // Varints of up to three bytes (a block's table indexes, row counts and name ends)
        // are read without the general loop's per-byte checks: these lists hold three values
        // a row, and decoding them was 4% of a data node's CPU under `tidal load`.
        let body = r.buf.get(s..).unwrap_or_default();
        let mut i = 0;
        while let Some(&b0) = body.get(i) {
            let v = match (b0, body.get(i + 1), body.get(i + 2)) {
                (0..=0x7f, _, _) => Some((u32::from(b0), 1)),
                (_, Some(&b1 @ 0..=0x7f), _) => {
                    Some((u32::from(b0 & 0x7f) | u32::from(b1) << 7, 2))
                }
                (_, Some(&b1), Some(&b2 @ 0..=0x7f)) => Some((
                    u32::from(b0 & 0x7f) | u32::from(b1 & 0x7f) << 7 | u32::from(b2) << 14,
                    3,
                )),
                _ => None,
            };
            match v {
                Some((v, len)) => {
                    out.push(v);
                    i += len;
                }
                None => {
                    r.pos = s + i;
                    out.push(r.varint()? as u32);
                    i = r.pos - s;
                }
            }
        }
        Some(())
    }
}

/// The batch prost and [`write_from_wire`] make of `msg`, for tests and the fuzz target.
#[doc(hidden)]
pub fn read_with_prost(msg: &[u8]) -> Option<WriteBatch> {
    let r = v1::WriteRequest::decode(msg).ok()?;
    write_from_wire(r).ok()
}

/// The fuzz target's check (`fuzz/fuzz_targets/write_request.rs`): whatever the bytes, no
/// panic, and an answer is the batch prost and the conversion give.
#[doc(hidden)]
pub fn fuzz_input(data: &[u8]) {
    if let Some(got) = read_write_request(&Bytes::copy_from_slice(data)) {
        // Compared as text: a NaN is not equal to itself, and the text tells every other
        // value apart.
        let want = read_with_prost(data);
        assert_eq!(format!("{:?}", Some(got)), format!("{want:?}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::schema_to_wire;
    use crate::write_wire::encode_write_request;
    use tidal_common::{ColumnDef, DataType, StableSchema};

    fn schema() -> StableSchema {
        StableSchema {
            db: "db".into(),
            name: "m".into(),
            columns: vec![
                ColumnDef::new("ts", DataType::Timestamp),
                ColumnDef::new("v", DataType::Double),
                ColumnDef::new("n", DataType::BigInt),
                ColumnDef::new("s", DataType::VarChar(20)),
            ],
            tags: vec![
                ColumnDef::new("a", DataType::VarChar(20)),
                ColumnDef::new("b", DataType::BigInt),
            ],
            version: tidal_common::SchemaVersion(2),
        }
    }

    /// A block of `tables` subtables with every kind of tag value and NULLs in the columns;
    /// `seed` varies it.
    fn block(tables: u32, seed: u64) -> RowBlock {
        let types = [
            DataType::Timestamp,
            DataType::Double,
            DataType::BigInt,
            DataType::VarChar(20),
        ];
        let mut b = RowBlock::new("m", &types);
        let mut x = seed;
        let mut next = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            x >> 33
        };
        for t in 0..tables {
            let tags = match next() % 4 {
                0 => None,
                1 => Some(vec![Value::Str(format!("é{t}")), Value::Int(-(t as i64))]),
                2 => Some(vec![Value::Null, Value::UInt(u64::MAX - t as u64)]),
                _ => Some(vec![
                    Value::Bool(t % 2 == 0),
                    Value::Float(t as f64 / 3.0),
                    Value::Timestamp(-5),
                    Value::Str(String::new()),
                ]),
            };
            let i = b.add_table(&format!("t_{t}"), tags);
            for r in 0..(next() % 3 + 1) as i64 {
                let row = [
                    Value::Timestamp(1_000 * r - 7),
                    if next() % 5 == 0 {
                        Value::Null
                    } else {
                        Value::Float(r as f64)
                    },
                    Value::Int(r - 3),
                    if next() % 4 == 0 {
                        Value::Null
                    } else {
                        Value::Str(format!("s{r}"))
                    },
                ];
                assert!(b.push_row(i, &row));
            }
        }
        b
    }

    #[test]
    fn reads_what_prost_and_the_conversion_read() {
        let schemas = [schema_to_wire(&schema())];
        for seed in 0..40u64 {
            let blocks = [block(seed as u32 % 17, seed), block(3, seed + 100)];
            let refs: Vec<&RowBlock> = blocks.iter().collect();
            let msg =
                encode_write_request("db", seed as u32, &schemas, &refs, |t| !t.ends_with('3'));
            let want = read_with_prost(&msg).expect("prost reads it");
            let got = read_write_request(&Bytes::from(msg)).expect("read directly");
            assert_eq!(got, want, "seed {seed}");
        }
        // prost's own encoding of a request reads the same too.
        let b = block(9, 7);
        let req = v1::WriteRequest {
            db: "db".into(),
            vgroup_id: 4,
            schemas: schemas.to_vec(),
            tables: vec![],
            blocks: vec![crate::convert::row_block_to_wire(&b, |_| true)],
        };
        let msg = req.encode_to_vec();
        assert_eq!(
            read_write_request(&Bytes::from(msg.clone())),
            read_with_prost(&msg)
        );
    }

    /// Whatever the bytes, an answer is prost's answer: truncations, flipped bytes and the
    /// encodings this reader leaves to prost (a repeated singular field, a `TableWrite`).
    #[test]
    fn answers_only_as_prost_does() {
        let b = block(12, 3);
        let msg = encode_write_request("db", 2, &[schema_to_wire(&schema())], &[&b], |_| true);
        let mut answered = 0;
        let mut check = |m: Vec<u8>| {
            if let Some(got) = read_write_request(&Bytes::from(m.clone())) {
                answered += 1;
                let want = read_with_prost(&m);
                assert_eq!(format!("{:?}", Some(got)), format!("{want:?}"), "{m:?}");
            }
        };
        for cut in 0..msg.len() {
            check(msg[..cut].to_vec());
        }
        for at in 0..msg.len() {
            for x in [0x01u8, 0x80, 0xff] {
                let mut m = msg.clone();
                m[at] ^= x;
                check(m);
            }
        }
        // `db` twice (prost keeps the last): left to prost.
        let mut m = msg.clone();
        m.extend_from_slice(&[0x0a, 0x01, b'x']);
        assert_eq!(read_write_request(&Bytes::from(m.clone())), None);
        assert_eq!(read_with_prost(&m).map(|b| b.db), Some("x".to_string()));
        // A TableWrite: left to prost.
        let req = v1::WriteRequest {
            tables: vec![v1::TableWrite::default()],
            ..v1::WriteRequest::default()
        };
        assert_eq!(read_write_request(&Bytes::from(req.encode_to_vec())), None);
        // Many of the mutations still answer (a flipped value byte is still a valid batch).
        assert!(answered > 100, "{answered}");
    }

    #[test]
    fn varints_and_keys_as_prost() {
        for v in [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX] {
            let mut buf = Vec::new();
            prost::encoding::encode_varint(v, &mut buf);
            assert_eq!(Reader::new(&buf).varint(), Some(v));
        }
        // Eleven bytes, or a tenth byte above 1: not a varint.
        assert_eq!(Reader::new(&[0xff; 11]).varint(), None);
        let mut ten = [0xffu8; 10];
        ten[9] = 0x02;
        assert_eq!(Reader::new(&ten).varint(), None);
        assert_eq!(Reader::new(&[0x80]).varint(), None);
        // Field 0 is no field.
        assert_eq!(Reader::new(&[0x02]).key(), None);
        // Values: each kind, a bool above 1, an empty message, a Value prost would settle
        // (two fields) and an unknown field (both left to prost).
        let cases: [&[u8]; 10] = [
            &[0x08, 0x01],
            &[0x10, 0x02],
            &[0x10, 0x00],
            &[0x18, 0x03],
            &[0x20, 0xff, 0x01],
            &[0x29, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f],
            &[0x32, 0x02, b'h', b'i'],
            &[0x38, 0x04],
            &[],
            &[0x10, 0x01, 0x18, 0x02],
        ];
        for c in cases {
            let want = v1::Value::decode(c).map(crate::convert::value_from_wire_owned);
            match read_value(c) {
                Some(v) => assert_eq!(Ok(v), want, "{c:?}"),
                None => assert_eq!(c, &[0x10, 0x01, 0x18, 0x02]),
            }
        }
        assert_eq!(read_value(&[0x48, 0x01]), None);
        assert_eq!(zigzag(1), -1);
        assert_eq!(zigzag(4), 2);
        assert_eq!(zigzag(u64::MAX), i64::MIN);
    }
}
