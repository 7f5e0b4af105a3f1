//! Byte-level primitives shared by every encoding: LEB128 varints, zigzag, and a bounds-checked
//! [`Reader`] cursor.
//!
//! Invariants: every read goes through [`Reader`], which never indexes out of bounds and reports
//! the absolute byte offset (its `base` plus the cursor) of the first byte it could not use, so a
//! decoder built on it cannot panic on truncated or garbled input.

use crate::CodecError;

/// Longest LEB128 encoding of a u64: 64 bits / 7 bits per byte, rounded up.
const VARINT_BYTES_MAX: usize = 10;

pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Zigzag maps small negative and positive numbers to small unsigned ones (0,-1,1,-2 → 0,1,2,3),
/// so that varints and bit widths stay short for values around zero.
#[inline]
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[inline]
pub fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// A cursor over untrusted bytes. `base` is the offset of `bytes[0]` in the caller's buffer so
/// that errors name a position the operator can find in the file.
pub struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    base: usize,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8], base: usize) -> Reader<'a> {
        Reader {
            bytes,
            pos: 0,
            base,
        }
    }

    /// Absolute offset of the cursor.
    pub fn offset(&self) -> usize {
        self.base + self.pos
    }

    pub fn remaining(&self) -> usize {
        self.bytes.len().saturating_sub(self.pos)
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    pub fn corrupt(&self, reason: impl Into<String>) -> CodecError {
        CodecError::Corrupt {
            offset: self.offset(),
            reason: reason.into(),
        }
    }

    pub fn u8(&mut self, what: &str) -> Result<u8, CodecError> {
        match self.bytes.get(self.pos) {
            Some(b) => {
                self.pos += 1;
                Ok(*b)
            }
            None => Err(self.corrupt(format!("truncated: expected {what}"))),
        }
    }

    pub fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], CodecError> {
        let end = self.pos.checked_add(n);
        match end.and_then(|e| self.bytes.get(self.pos..e)) {
            Some(s) => {
                self.pos += n;
                Ok(s)
            }
            None => Err(self.corrupt(format!(
                "truncated: expected {n} bytes of {what}, {} left",
                self.remaining()
            ))),
        }
    }

    /// The rest of the buffer, left unread.
    pub fn peek_rest(&self) -> &'a [u8] {
        self.bytes.get(self.pos..).unwrap_or(&[])
    }

    /// The rest of the buffer.
    pub fn rest(&mut self) -> &'a [u8] {
        let s = self.bytes.get(self.pos..).unwrap_or(&[]);
        self.pos = self.bytes.len();
        s
    }

    pub fn varint(&mut self, what: &str) -> Result<u64, CodecError> {
        let start = self.offset();
        let mut v: u64 = 0;
        for i in 0..VARINT_BYTES_MAX {
            let b = self.u8(what)?;
            let payload = u64::from(b & 0x7f);
            // The 10th byte may only carry the top bit of a u64.
            if i == VARINT_BYTES_MAX - 1 && payload > 1 {
                break;
            }
            v |= payload << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(CodecError::Corrupt {
            offset: start,
            reason: format!("varint for {what} overflows 64 bits"),
        })
    }

    /// A varint that must be at most `max` (a count or a length that sizes an allocation).
    pub fn varint_max(&mut self, max: u64, what: &str) -> Result<u64, CodecError> {
        let start = self.offset();
        let v = self.varint(what)?;
        if v > max {
            return Err(CodecError::Corrupt {
                offset: start,
                reason: format!("{what} {v} exceeds the limit {max}"),
            });
        }
        Ok(v)
    }

    pub fn zigzag_varint(&mut self, what: &str) -> Result<i64, CodecError> {
        Ok(unzigzag(self.varint(what)?))
    }

    /// Fails unless every byte has been consumed: trailing bytes mean the block is not what the
    /// encoder wrote.
    pub fn finish(&self, what: &str) -> Result<(), CodecError> {
        if self.remaining() != 0 {
            return Err(self.corrupt(format!("{} trailing bytes after {what}", self.remaining())));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_roundtrip_and_overflow() {
        for v in [
            0u64,
            1,
            127,
            128,
            300,
            u32::MAX as u64,
            u64::MAX - 1,
            u64::MAX,
        ] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            assert_eq!(b.len(), varint_len(v));
            let mut r = Reader::new(&b, 0);
            assert_eq!(r.varint("v").unwrap(), v);
            r.finish("v").unwrap();
            for cut in 0..b.len() {
                assert!(Reader::new(&b[..cut], 0).varint("v").is_err());
            }
        }
        let over = [0xffu8; 11];
        assert!(Reader::new(&over, 0).varint("v").is_err());
        let mut top = vec![0xffu8; 9];
        top.push(0x02);
        assert!(Reader::new(&top, 0).varint("v").is_err());
    }

    #[test]
    fn zigzag_edges() {
        for v in [0i64, -1, 1, i64::MIN, i64::MAX, -1234567, 1234567] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
        assert_eq!(zigzag(-1), 1);
        assert_eq!(zigzag(1), 2);
    }
}
