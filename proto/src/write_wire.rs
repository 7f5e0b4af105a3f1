//! A `WriteRequest` encoded straight from [`RowBlock`]s: the very bytes prost gives for
//! `WriteRequest { db, vgroup_id, schemas, blocks: [row_block_to_wire(b), ..] }`, without
//! building those messages first.
//!
//! Why: a write batch's columns were copied three times on their way out (into the wire
//! messages' byte fields, by prost into tonic's buffer, and again each time that buffer
//! grew), which with the rest of the encoding was about a sixth of `tidal load`'s CPU. Here
//! the request's size is computed first and each value is written once, into a buffer of
//! exactly that size; [`EncodedWrite`] hands the bytes to tonic's prost codec as a message.
//!
//! Invariant: the output decodes as the `WriteRequest` it stands for, byte for byte the same
//! as prost's encoding of it (the tests compare them), so the server is unchanged.

use crate::convert::{tags_sent, wire_kind};
use crate::v1;
use prost::bytes::{Buf, BufMut};
use prost::encoding::{encode_key, encode_varint, encoded_len_varint, key_len, WireType};
use prost::Message;
use tidal_common::{Column, ColumnData, RowBlock, Value};

/// A `WriteRequest` already encoded ([`encode_write_request`]), sent as a message.
#[derive(Debug, Default, Clone)]
pub struct EncodedWrite(pub prost::bytes::Bytes);

impl Message for EncodedWrite {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        buf.put_slice(&self.0);
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: prost::encoding::DecodeContext,
    ) -> Result<(), prost::DecodeError> {
        // Only ever sent; a decoder would get a `WriteRequest`.
        prost::encoding::skip_field(wire_type, tag, buf, ctx)
    }

    fn encoded_len(&self) -> usize {
        self.0.len()
    }

    fn clear(&mut self) {
        self.0 = prost::bytes::Bytes::new();
    }
}

/// The encoded `WriteRequest` of `blocks` for vgroup `vgroup_id` of `db`, with `schemas`;
/// `send_tags` is asked once for each subtable a block has tags for, in block order, whether
/// to send them (as [`crate::convert::row_block_to_wire`] asks).
pub fn encode_write_request(
    db: &str,
    vgroup_id: u32,
    schemas: &[v1::StableSchema],
    blocks: &[&RowBlock],
    mut send_tags: impl FnMut(&str) -> bool,
) -> Vec<u8> {
    let blocks: Vec<Block<'_>> = blocks
        .iter()
        .map(|b| Block::new(b, &mut send_tags))
        .collect();
    let mut len = string_len(1, db) + uint32_len(2, vgroup_id);
    len += schemas
        .iter()
        .map(|s| prost::encoding::message::encoded_len(3, s))
        .sum::<usize>();
    len += blocks
        .iter()
        .map(|b| delimited_len(5, b.len))
        .sum::<usize>();
    let mut out = Vec::with_capacity(len);
    put_string(&mut out, 1, db);
    put_uint32(&mut out, 2, vgroup_id);
    for s in schemas {
        prost::encoding::message::encode(3, s, &mut out);
    }
    for b in &blocks {
        encode_key(5, WireType::LengthDelimited, &mut out);
        encode_varint(b.len as u64, &mut out);
        b.encode(&mut out);
    }
    debug_assert_eq!(out.len(), len);
    out
}

/// A block with the tags it sends and its encoded size.
struct Block<'a> {
    b: &'a RowBlock,
    /// The subtables whose tags are sent, with the encoded size of each one's tag list.
    tagged: Vec<u32>,
    tags: Vec<(&'a [Value], usize)>,
    /// [`value_len`] of each tag value sent, in order: computed once, as the sizes are, and
    /// read again by [`Block::encode`] (a subtable's tags are cold by then, and at 100,000s of
    /// new subtables sizing each value twice was a third of encoding them).
    tag_lens: Vec<u32>,
    columns: Vec<usize>,
    len: usize,
}

impl<'a> Block<'a> {
    fn new(b: &'a RowBlock, send_tags: &mut impl FnMut(&str) -> bool) -> Block<'a> {
        let sent = tags_sent(b, send_tags);
        let tagged: Vec<u32> = sent.iter().map(|(i, _)| *i).collect();
        let mut tag_lens = Vec::with_capacity(sent.iter().map(|(_, t)| t.len()).sum());
        let tags: Vec<(&[Value], usize)> = sent
            .into_iter()
            .map(|(_, t)| {
                let n = t
                    .iter()
                    .map(|v| {
                        let n = value_len(v);
                        tag_lens.push(n as u32);
                        delimited_len(1, n)
                    })
                    .sum();
                (t, n)
            })
            .collect();
        let columns: Vec<usize> = b.columns().iter().map(column_len).collect();
        let (names, ends) = b.names();
        let runs = b.runs();
        let len = string_len(1, b.stable())
            + bytes_len(2, names.len())
            + packed_len(3, ends.iter().copied())
            + packed_len(4, tagged.iter().copied())
            + tags
                .iter()
                .map(|(_, n)| delimited_len(5, *n))
                .sum::<usize>()
            + packed_len(6, runs.iter().map(|r| r.0))
            + packed_len(7, runs.iter().map(|r| r.1))
            + columns.iter().map(|&n| delimited_len(8, n)).sum::<usize>();
        Block {
            b,
            tagged,
            tags,
            tag_lens,
            columns,
            len,
        }
    }

    fn encode(&self, out: &mut Vec<u8>) {
        let b = self.b;
        let (names, ends) = b.names();
        let runs = b.runs();
        put_string(out, 1, b.stable());
        put_bytes(out, 2, names.as_bytes());
        put_packed(out, 3, ends.iter().copied());
        put_packed(out, 4, self.tagged.iter().copied());
        let mut lens = self.tag_lens.iter();
        for (values, n) in &self.tags {
            // A `TagValues` message: each value a `Value` message in field 1.
            encode_key(5, WireType::LengthDelimited, out);
            encode_varint(*n as u64, out);
            for v in *values {
                encode_key(1, WireType::LengthDelimited, out);
                let n = lens.next().map_or_else(|| value_len(v), |&n| n as usize);
                encode_varint(n as u64, out);
                put_value(out, v);
            }
        }
        put_packed(out, 6, runs.iter().map(|r| r.0));
        put_packed(out, 7, runs.iter().map(|r| r.1));
        for (c, &n) in b.columns().iter().zip(&self.columns) {
            encode_key(8, WireType::LengthDelimited, out);
            encode_varint(n as u64, out);
            put_column(out, c);
        }
    }
}

/// The encoded size of `value_to_wire(v)`: its one `oneof` field, present even when zero.
fn value_len(v: &Value) -> usize {
    use prost::encoding::{bool, double, sint64, string, uint64};
    match v {
        Value::Null => bool::encoded_len(1, &true),
        Value::Bool(b) => bool::encoded_len(2, b),
        Value::Int(i) => sint64::encoded_len(3, i),
        Value::UInt(u) => uint64::encoded_len(4, u),
        Value::Float(f) => double::encoded_len(5, f),
        Value::Str(s) => string::encoded_len(6, s),
        Value::Timestamp(t) => sint64::encoded_len(7, t),
    }
}

/// `value_to_wire(v)` encoded.
fn put_value(out: &mut Vec<u8>, v: &Value) {
    use prost::encoding::{bool, double, sint64, string, uint64};
    match v {
        Value::Null => bool::encode(1, &true, out),
        Value::Bool(b) => bool::encode(2, b, out),
        Value::Int(i) => sint64::encode(3, i, out),
        Value::UInt(u) => uint64::encode(4, u, out),
        Value::Float(f) => double::encode(5, f, out),
        Value::Str(s) => string::encode(6, s, out),
        Value::Timestamp(t) => sint64::encode(7, t, out),
    }
}

/// Bytes of the NULL bitmap `column_to_wire` sends: none without a NULL.
fn nulls_bytes(c: &Column) -> usize {
    if c.nulls.iter().any(|n| *n) {
        c.nulls.len().div_ceil(8)
    } else {
        0
    }
}

/// The encoded size of `column_to_wire(c)`.
fn column_len(c: &Column) -> usize {
    let mut n = uint32_len(1, wire_kind(c));
    match &c.data {
        ColumnData::Bool(v) if !v.is_empty() => n += delimited_len(2, v.len()),
        ColumnData::Str(v) => n += v.iter().map(|s| string_field_len(6, s)).sum::<usize>(),
        ColumnData::Int(v) | ColumnData::Timestamp(v) => n += bytes_len(9, v.len() * 8),
        ColumnData::UInt(v) => n += bytes_len(9, v.len() * 8),
        ColumnData::Float(v) => n += bytes_len(9, v.len() * 8),
        ColumnData::Bool(_) => {}
    }
    n + bytes_len(7, nulls_bytes(c)) + uint32_len(8, c.len() as u32)
}

/// `column_to_wire(c)` encoded, in prost's field order.
fn put_column(out: &mut Vec<u8>, c: &Column) {
    put_uint32(out, 1, wire_kind(c));
    match &c.data {
        ColumnData::Bool(v) if !v.is_empty() => {
            encode_key(2, WireType::LengthDelimited, out);
            encode_varint(v.len() as u64, out);
            out.extend(v.iter().map(|b| u8::from(*b)));
        }
        ColumnData::Str(v) => {
            for s in v {
                encode_key(6, WireType::LengthDelimited, out);
                encode_varint(s.len() as u64, out);
                out.extend_from_slice(s.as_bytes());
            }
        }
        _ => {}
    }
    let nulls = nulls_bytes(c);
    if nulls > 0 {
        encode_key(7, WireType::LengthDelimited, out);
        encode_varint(nulls as u64, out);
        let start = out.len();
        out.resize(start + nulls, 0);
        for (i, n) in c.nulls.iter().enumerate() {
            if *n {
                if let Some(b) = out.get_mut(start + i / 8) {
                    *b |= 1 << (i % 8);
                }
            }
        }
    }
    put_uint32(out, 8, c.len() as u32);
    let fixed = |out: &mut Vec<u8>, n: usize| {
        encode_key(9, WireType::LengthDelimited, out);
        encode_varint((n * 8) as u64, out);
    };
    match &c.data {
        ColumnData::Int(v) | ColumnData::Timestamp(v) if !v.is_empty() => {
            fixed(out, v.len());
            put_fixed(out, v, |x| x.to_le_bytes());
        }
        ColumnData::UInt(v) if !v.is_empty() => {
            fixed(out, v.len());
            put_fixed(out, v, |x| x.to_le_bytes());
        }
        ColumnData::Float(v) if !v.is_empty() => {
            fixed(out, v.len());
            put_fixed(out, v, |x| x.to_le_bytes());
        }
        _ => {}
    }
}

/// Appends `v`'s values as 8 little-endian bytes each. Into room made once, 8 bytes at a
/// time: an `extend_from_slice` per value (a capacity check and a length update each) was
/// most of a write's encoding, and this loop compiles to plain moves.
fn put_fixed<T: Copy>(out: &mut Vec<u8>, v: &[T], le: impl Fn(T) -> [u8; 8]) {
    let start = out.len();
    out.resize(start + v.len() * 8, 0);
    if let Some(room) = out.get_mut(start..) {
        for (dst, x) in room.chunks_exact_mut(8).zip(v) {
            dst.copy_from_slice(&le(*x));
        }
    }
}

fn delimited_len(tag: u32, n: usize) -> usize {
    key_len(tag) + encoded_len_varint(n as u64) + n
}

/// A bytes field of `n` bytes (absent when empty, as proto3 has it).
fn bytes_len(tag: u32, n: usize) -> usize {
    if n == 0 {
        0
    } else {
        delimited_len(tag, n)
    }
}

fn string_len(tag: u32, s: &str) -> usize {
    bytes_len(tag, s.len())
}

/// One element of a repeated string field (present even when empty).
fn string_field_len(tag: u32, s: &str) -> usize {
    delimited_len(tag, s.len())
}

fn uint32_len(tag: u32, v: u32) -> usize {
    if v == 0 {
        0
    } else {
        key_len(tag) + encoded_len_varint(u64::from(v))
    }
}

fn packed_len(tag: u32, values: impl Iterator<Item = u32>) -> usize {
    let body: usize = values.map(|v| encoded_len_varint(u64::from(v))).sum();
    bytes_len(tag, body)
}

fn put_bytes(out: &mut Vec<u8>, tag: u32, b: &[u8]) {
    if !b.is_empty() {
        encode_key(tag, WireType::LengthDelimited, out);
        encode_varint(b.len() as u64, out);
        out.extend_from_slice(b);
    }
}

fn put_string(out: &mut Vec<u8>, tag: u32, s: &str) {
    put_bytes(out, tag, s.as_bytes());
}

fn put_uint32(out: &mut Vec<u8>, tag: u32, v: u32) {
    if v != 0 {
        encode_key(tag, WireType::Varint, out);
        encode_varint(u64::from(v), out);
    }
}

fn put_packed(out: &mut Vec<u8>, tag: u32, values: impl Iterator<Item = u32> + Clone) {
    let body: usize = values
        .clone()
        .map(|v| encoded_len_varint(u64::from(v)))
        .sum();
    if body > 0 {
        encode_key(tag, WireType::LengthDelimited, out);
        encode_varint(body as u64, out);
        values.for_each(|v| encode_varint(u64::from(v), out));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::{row_block_to_wire, schema_to_wire};
    use tidal_common::{DataType, Value};

    /// Random blocks of every column type, NULLs, strings (empty ones too), tags and runs
    /// encode to exactly prost's bytes for the same request, whichever tags are sent.
    #[test]
    fn encodes_as_prost_does() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let types = [
            DataType::Timestamp,
            DataType::Double,
            DataType::BigInt,
            DataType::UBigInt,
            DataType::Bool,
            DataType::VarChar(16),
        ];
        let schema = tidal_common::StableSchema {
            db: "db".into(),
            name: "st".into(),
            version: tidal_common::SchemaVersion(3),
            columns: types
                .iter()
                .enumerate()
                .map(|(i, t)| tidal_common::ColumnDef::new(&format!("c{i}"), *t))
                .collect(),
            tags: vec![tidal_common::ColumnDef::new("t", DataType::VarChar(8))],
        };
        let (mut rows, mut nulls, mut tagged) = (0, 0, 0);
        for round in 0..300 {
            let ncols = 1 + next(types.len() as u64) as usize;
            let cols = &types[..ncols];
            let nblocks = next(4) as usize;
            let blocks: Vec<RowBlock> = (0..nblocks)
                .map(|k| {
                    let mut b = RowBlock::new(format!("st{k}"), cols);
                    for t in 0..next(6) {
                        let tags = match next(3) {
                            0 => None,
                            // Every kind of value, zeros and empty strings too.
                            _ => Some(
                                (0..next(4))
                                    .map(|_| match next(8) {
                                        0 => Value::Null,
                                        1 => Value::Bool(next(2) == 0),
                                        2 => Value::Int(next(2000) as i64 - 1000),
                                        3 => Value::UInt(next(1 << 40)),
                                        4 => Value::Float(next(100) as f64 / 3.0 - 10.0),
                                        5 => Value::Timestamp(next(2000) as i64 - 1000),
                                        6 => Value::Str(String::new()),
                                        _ => Value::Str(format!("tag{t}")),
                                    })
                                    .collect(),
                            ),
                        };
                        let name = if next(9) == 0 {
                            String::new()
                        } else {
                            format!("d_{t}_{}", next(1000))
                        };
                        let i = b.add_table(&name, tags);
                        let rows: Vec<Vec<Value>> = (0..next(5))
                            .map(|r| {
                                cols.iter()
                                    .map(|ty| match (next(5), ty) {
                                        (0, _) => Value::Null,
                                        (_, DataType::Timestamp) => Value::Timestamp(r as i64 - 2),
                                        (_, DataType::Double) => {
                                            Value::Float(next(1000) as f64 / 7.0 - 50.0)
                                        }
                                        (_, DataType::BigInt) => Value::Int(next(300) as i64 - 150),
                                        (_, DataType::UBigInt) => Value::UInt(next(1 << 40)),
                                        (_, DataType::Bool) => Value::Bool(next(2) == 0),
                                        _ => Value::Str("x".repeat(next(3) as usize)),
                                    })
                                    .collect()
                            })
                            .collect();
                        for row in rows {
                            assert!(b.push_row(i, &row), "a row of the block's types");
                        }
                    }
                    b
                })
                .collect();
            let refs: Vec<&RowBlock> = blocks.iter().collect();
            for b in &blocks {
                rows += b.num_rows();
                nulls += b.columns().iter().filter(|c| nulls_bytes(c) > 0).count();
                tagged += (0..b.num_tables()).filter(|i| b.tags(*i).is_some()).count();
            }
            let schemas = if round % 2 == 0 {
                vec![schema_to_wire(&schema)]
            } else {
                vec![]
            };
            let send = |t: &str| t.len() % 2 == 0;
            let mut asked = Vec::new();
            let got = encode_write_request("db1", round, &schemas, &refs, |t| {
                asked.push(t.to_string());
                send(t)
            });
            let mut asked_prost = Vec::new();
            let want = v1::WriteRequest {
                db: "db1".into(),
                vgroup_id: round,
                schemas: schemas.clone(),
                tables: vec![],
                blocks: blocks
                    .iter()
                    .map(|b| {
                        row_block_to_wire(b, |t| {
                            asked_prost.push(t.to_string());
                            send(t)
                        })
                    })
                    .collect(),
            }
            .encode_to_vec();
            assert_eq!(got, want, "round {round}");
            assert_eq!(asked, asked_prost);
            let w = EncodedWrite(got.into());
            assert_eq!(w.encode_to_vec(), want);
        }
        assert!(
            rows > 2_000 && nulls > 200 && tagged > 500,
            "{rows} {nulls} {tagged}"
        );
    }
}
