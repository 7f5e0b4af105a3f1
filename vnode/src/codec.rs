//! Compact little-endian binary encoding shared by the WAL, the data files and the manifest.
//!
//! Owns: the encoding of integers, strings, [`Value`]s, [`Column`]s, [`DataType`]s,
//! [`StableSchema`]s and [`TableMeta`]s, and of zstd-compressed bodies with their length
//! ([`put_compressed`]: head files, the manifest). Invariant: every `get_*` on a [`Reader`] is
//! bounds checked and returns a [`DecodeError`] (offset relative to the start of the decoded
//! buffer) instead of panicking, whatever the input bytes are. Lengths read from bytes are checked
//! against the remaining input before anything is allocated.

use tidal_common::{
    Column, ColumnData, ColumnDef, DataType, SchemaVersion, StableSchema, TableMeta, TableUid,
    Value,
};

/// Appends `raw` as a compressed body: its length (`u64`) and a zstd frame of it at `level`;
/// the layout of a head file's body and of the manifest's payload.
pub fn put_compressed(out: &mut Vec<u8>, raw: &[u8], level: i32) {
    out.extend_from_slice(&(raw.len() as u64).to_le_bytes());
    // Writing into a Vec cannot fail; an error would leave the frame cut short, which
    // `get_compressed` reports.
    let _ = zstd::stream::copy_encode(raw, out, level);
}

/// The length a body written by [`put_compressed`] says it decompresses to (`None`: too short).
pub fn compressed_len(b: &[u8]) -> Option<u64> {
    b.get(..8)
        .and_then(|l| l.try_into().ok())
        .map(u64::from_le_bytes)
}

/// A body written by [`put_compressed`], decompressed; the caller has checked its
/// [`compressed_len`] against what its file can hold. Memory grows with what the frame really
/// holds, never past that length, and the frame must give exactly it.
pub fn get_compressed(b: &[u8]) -> Result<Vec<u8>, String> {
    let raw_len = compressed_len(b).ok_or_else(|| "too short for its length".to_string())?;
    let mut raw = Vec::new();
    zstd::stream::read::Decoder::new(b.get(8..).unwrap_or(&[]))
        .and_then(|d| {
            std::io::Read::read_to_end(
                &mut std::io::Read::take(d, raw_len.saturating_add(1)),
                &mut raw,
            )
        })
        .map_err(|e| format!("does not decompress: {e}"))?;
    if raw.len() as u64 != raw_len {
        return Err(format!(
            "decompresses to {} bytes, its header says {raw_len}",
            raw.len()
        ));
    }
    Ok(raw)
}

/// A decode failure at `offset` bytes into the decoded buffer.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodeError {
    pub offset: usize,
    pub reason: String,
}

pub type DResult<T> = std::result::Result<T, DecodeError>;

/// Appends encoded values to a byte vector.
#[derive(Default)]
pub struct Writer {
    pub buf: Vec<u8>,
}

impl Writer {
    pub fn new() -> Writer {
        Writer { buf: Vec::new() }
    }

    /// A writer into `buf` (cleared) with room for `bytes`: a record sized up front is
    /// written with no reallocation. A buffer too small is not grown (which would copy its
    /// old bytes) but replaced.
    pub fn from_buf(mut buf: Vec<u8>, bytes: usize) -> Writer {
        buf.clear();
        if buf.capacity() < bytes {
            buf = Vec::with_capacity(bytes);
        }
        Writer { buf }
    }

    /// The bytes [`Writer::column`] writes for `c`, or a little more.
    pub fn column_bytes(c: &Column) -> usize {
        let rows = c.len();
        let values = match &c.data {
            ColumnData::Bool(_) => rows,
            ColumnData::Str(v) => v.iter().map(|s| 4 + s.len()).sum(),
            _ => 8 * rows,
        };
        6 + rows.div_ceil(8) + values
    }
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn f64(&mut self, v: f64) {
        self.buf.extend_from_slice(&v.to_bits().to_le_bytes());
    }
    pub fn len_u32(&mut self, n: usize) {
        self.u32(u32::try_from(n).unwrap_or(u32::MAX));
    }
    pub fn str(&mut self, s: &str) {
        self.len_u32(s.len());
        self.buf.extend_from_slice(s.as_bytes());
    }

    pub fn value(&mut self, v: &Value) {
        match v {
            Value::Null => self.u8(0),
            Value::Bool(b) => {
                self.u8(1);
                self.u8(*b as u8);
            }
            Value::Int(i) => {
                self.u8(2);
                self.i64(*i);
            }
            Value::UInt(u) => {
                self.u8(3);
                self.u64(*u);
            }
            Value::Float(f) => {
                self.u8(4);
                self.f64(*f);
            }
            Value::Str(s) => {
                self.u8(5);
                self.str(s);
            }
            Value::Timestamp(t) => {
                self.u8(6);
                self.i64(*t);
            }
        }
    }

    pub fn data_type(&mut self, t: DataType) {
        let (code, len) = t.code();
        self.u8(code);
        self.u32(len);
    }

    /// Schema: db, name, version u32 (bit 31 set = a codec section follows), columns, tags,
    /// [per column: 3 optional strings ENCODE, COMPRESS, LEVEL]. Records written before codecs
    /// existed never set bit 31, so they still decode.
    pub fn schema(&mut self, s: &StableSchema) {
        self.str(&s.db);
        self.str(&s.name);
        let has_codecs = s.columns.iter().any(|c| c.codec.is_some());
        self.u32((s.version.0 & 0x7fff_ffff) | if has_codecs { 1 << 31 } else { 0 });
        for defs in [&s.columns, &s.tags] {
            self.len_u32(defs.len());
            for d in defs.iter() {
                self.str(&d.name);
                self.data_type(d.data_type);
            }
        }
        if has_codecs {
            for c in &s.columns {
                let spec = c.codec.clone().unwrap_or_default();
                for part in [&spec.encode, &spec.compress, &spec.level] {
                    match part {
                        Some(p) => {
                            self.u8(1);
                            self.str(p);
                        }
                        None => self.u8(0),
                    }
                }
            }
        }
    }

    pub fn table_meta(&mut self, t: &TableMeta) {
        self.u64(t.uid.0);
        self.str(&t.name);
        self.str(&t.stable);
        self.len_u32(t.tags.len());
        for v in t.tags.iter() {
            self.value(v);
        }
    }

    /// Column: kind u8, rows u32, has_nulls u8, [null bitmap], values.
    pub fn column(&mut self, c: &Column) {
        let rows = c.len();
        let kind = match &c.data {
            ColumnData::Bool(_) => 0,
            ColumnData::Int(_) => 1,
            ColumnData::UInt(_) => 2,
            ColumnData::Float(_) => 3,
            ColumnData::Str(_) => 4,
            ColumnData::Timestamp(_) => 5,
        };
        self.u8(kind);
        self.len_u32(rows);
        let has_nulls = c.nulls.iter().any(|n| *n);
        self.u8(has_nulls as u8);
        if has_nulls {
            let mut bits = vec![0u8; rows.div_ceil(8)];
            for (i, b) in bits.iter_mut().enumerate() {
                for j in 0..8 {
                    if c.is_null(i * 8 + j) {
                        *b |= 1 << j;
                    }
                }
            }
            self.buf.extend_from_slice(&bits);
        }
        // Fixed-width values: room reserved once, then one copy per value with no growth
        // check (value by value it was a twentieth of a data node's write CPU, in the WAL).
        match &c.data {
            ColumnData::Bool(v) => self.buf.extend(v.iter().map(|b| *b as u8)),
            ColumnData::Int(v) | ColumnData::Timestamp(v) => self.fixed(v, |x| x.to_le_bytes()),
            ColumnData::UInt(v) => self.fixed(v, |x| x.to_le_bytes()),
            ColumnData::Float(v) => self.fixed(v, |x| x.to_le_bytes()),
            ColumnData::Str(v) => v.iter().for_each(|s| self.str(s)),
        }
    }

    /// `values` as 8 little-endian bytes each.
    fn fixed<T: Copy>(&mut self, values: &[T], le: impl Fn(T) -> [u8; 8]) {
        let at = self.buf.len();
        self.buf.resize(at + values.len() * 8, 0);
        for (out, v) in self.buf[at..].chunks_exact_mut(8).zip(values) {
            out.copy_from_slice(&le(*v));
        }
    }
}

/// Reads encoded values from a byte slice; never panics.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }
    pub fn pos(&self) -> usize {
        self.pos
    }
    pub fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }
    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }
    pub fn err<T>(&self, reason: impl Into<String>) -> DResult<T> {
        Err(DecodeError {
            offset: self.pos,
            reason: reason.into(),
        })
    }
    pub fn bytes(&mut self, n: usize) -> DResult<&'a [u8]> {
        if n > self.remaining() {
            return self.err(format!(
                "needed {n} bytes but only {} remain",
                self.remaining()
            ));
        }
        let s = self.buf.get(self.pos..self.pos + n);
        match s {
            Some(s) => {
                self.pos += n;
                Ok(s)
            }
            None => self.err("out of bounds"),
        }
    }
    fn arr<const N: usize>(&mut self) -> DResult<[u8; N]> {
        let b = self.bytes(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(b);
        Ok(a)
    }
    pub fn u8(&mut self) -> DResult<u8> {
        Ok(self.arr::<1>()?[0])
    }
    pub fn u32(&mut self) -> DResult<u32> {
        Ok(u32::from_le_bytes(self.arr()?))
    }
    pub fn u64(&mut self) -> DResult<u64> {
        Ok(u64::from_le_bytes(self.arr()?))
    }
    pub fn i64(&mut self) -> DResult<i64> {
        Ok(i64::from_le_bytes(self.arr()?))
    }
    pub fn f64(&mut self) -> DResult<f64> {
        Ok(f64::from_bits(u64::from_le_bytes(self.arr()?)))
    }
    /// A count of items that each take at least `min_item_bytes`; checked against the input.
    pub fn count(&mut self, min_item_bytes: usize) -> DResult<usize> {
        let at = self.pos;
        let n = self.u32()? as usize;
        if n.saturating_mul(min_item_bytes.max(1)) > self.remaining() {
            return Err(DecodeError {
                offset: at,
                reason: format!("count {n} exceeds the remaining {} bytes", self.remaining()),
            });
        }
        Ok(n)
    }
    pub fn str(&mut self) -> DResult<String> {
        let at = self.pos;
        let n = self.u32()? as usize;
        let b = self.bytes(n)?;
        String::from_utf8(b.to_vec()).map_err(|_| DecodeError {
            offset: at,
            reason: "string is not valid UTF-8".into(),
        })
    }

    pub fn value(&mut self) -> DResult<Value> {
        let at = self.pos;
        Ok(match self.u8()? {
            0 => Value::Null,
            1 => Value::Bool(self.u8()? != 0),
            2 => Value::Int(self.i64()?),
            3 => Value::UInt(self.u64()?),
            4 => Value::Float(self.f64()?),
            5 => Value::Str(self.str()?),
            6 => Value::Timestamp(self.i64()?),
            k => {
                return Err(DecodeError {
                    offset: at,
                    reason: format!("unknown value kind {k}"),
                })
            }
        })
    }

    pub fn data_type(&mut self) -> DResult<DataType> {
        let at = self.pos;
        let code = self.u8()?;
        let n = self.u32()?;
        DataType::from_code(u32::from(code), n).ok_or_else(|| DecodeError {
            offset: at,
            reason: format!("unknown data type code {code}"),
        })
    }

    pub fn schema(&mut self) -> DResult<StableSchema> {
        let db = self.str()?;
        let name = self.str()?;
        let raw = self.u32()?;
        let version = SchemaVersion(raw & 0x7fff_ffff);
        let mut defs = [Vec::new(), Vec::new()];
        for d in defs.iter_mut() {
            let n = self.count(9)?;
            for _ in 0..n {
                let name = self.str()?;
                let t = self.data_type()?;
                d.push(ColumnDef::new(name, t));
            }
        }
        let [mut columns, tags] = defs;
        if raw & (1 << 31) != 0 {
            for c in columns.iter_mut() {
                let mut parts = [None, None, None];
                for p in parts.iter_mut() {
                    *p = match self.u8()? {
                        0 => None,
                        1 => Some(self.str()?),
                        k => return self.err(format!("invalid codec flag {k}")),
                    };
                }
                let [encode, compress, level] = parts;
                c.codec = Some(tidal_common::ColumnCodecSpec {
                    encode,
                    compress,
                    level,
                });
            }
        }
        Ok(StableSchema {
            db,
            name,
            version,
            columns,
            tags,
        })
    }

    pub fn table_meta(&mut self) -> DResult<TableMeta> {
        let uid = TableUid(self.u64()?);
        let name = self.str()?;
        let stable = self.str()?;
        let n = self.count(1)?;
        let mut tags = Vec::with_capacity(n);
        for _ in 0..n {
            tags.push(self.value()?);
        }
        Ok(TableMeta {
            uid,
            name,
            stable,
            tags: tags.into(),
        })
    }

    pub fn column(&mut self) -> DResult<Column> {
        let at = self.pos;
        let kind = self.u8()?;
        let rows = self.u32()? as usize;
        let has_nulls = self.u8()? != 0;
        let nulls = if has_nulls {
            let bits = self.bytes(rows.div_ceil(8))?;
            (0..rows)
                .map(|i| bits.get(i / 8).is_some_and(|b| b & (1 << (i % 8)) != 0))
                .collect()
        } else {
            Vec::new()
        };
        let width = match kind {
            0 => 1,
            4 => 4,
            _ => 8,
        };
        if rows.saturating_mul(width) > self.remaining() {
            return self.err(format!("column of {rows} rows exceeds the remaining bytes"));
        }
        let data = match kind {
            0 => ColumnData::Bool(self.bytes(rows)?.iter().map(|b| *b != 0).collect()),
            1 | 5 => {
                let mut v = Vec::with_capacity(rows);
                for _ in 0..rows {
                    v.push(self.i64()?);
                }
                if kind == 1 {
                    ColumnData::Int(v)
                } else {
                    ColumnData::Timestamp(v)
                }
            }
            2 => {
                let mut v = Vec::with_capacity(rows);
                for _ in 0..rows {
                    v.push(self.u64()?);
                }
                ColumnData::UInt(v)
            }
            3 => {
                let mut v = Vec::with_capacity(rows);
                for _ in 0..rows {
                    v.push(self.f64()?);
                }
                ColumnData::Float(v)
            }
            4 => {
                let mut v = Vec::with_capacity(rows);
                for _ in 0..rows {
                    v.push(self.str()?);
                }
                ColumnData::Str(v)
            }
            k => {
                return Err(DecodeError {
                    offset: at,
                    reason: format!("unknown column kind {k}"),
                })
            }
        };
        Ok(Column { data, nulls })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_garbage() {
        let mut c = Column::empty(DataType::VarChar(10), 3);
        c.push(&Value::Str("a".into()));
        c.push(&Value::Null);
        c.push(&Value::Str("ccc".into()));
        let mut w = Writer::new();
        w.column(&c);
        assert_eq!(w.buf.len(), Writer::column_bytes(&c));
        for (t, v) in [
            (DataType::Bool, Value::Bool(true)),
            (DataType::BigInt, Value::Int(-7)),
            (DataType::Double, Value::Float(0.5)),
            (DataType::Timestamp, Value::Timestamp(9)),
        ] {
            let mut d = Column::empty(t, 20);
            for i in 0..20 {
                d.push(if i % 7 == 3 { &Value::Null } else { &v });
            }
            let mut w = Writer::new();
            w.column(&d);
            assert_eq!(w.buf.len(), Writer::column_bytes(&d), "{t:?}");
        }
        w.value(&Value::Float(1.5));
        let mut r = Reader::new(&w.buf);
        assert_eq!(r.column().unwrap(), c);
        assert_eq!(r.value().unwrap(), Value::Float(1.5));
        assert!(r.is_empty());
        // Every truncation and a pile of garbage decodes to an error, never a panic.
        for n in 0..w.buf.len() {
            let mut r = Reader::new(&w.buf[..n]);
            let _ = r.column().and_then(|_| r.value());
        }
        let garbage: Vec<u8> = (0..500u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 7) as u8)
            .collect();
        for start in 0..garbage.len() {
            let mut r = Reader::new(&garbage[start..]);
            let _ = r.column();
            let mut r = Reader::new(&garbage[start..]);
            let _ = r.schema();
        }
    }
}
