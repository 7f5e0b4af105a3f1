//! BOOL encodings: a bitmap (`bit-packing`, the default; LSB-first, bit i of byte i/8) or one
//! byte per value (`disabled`).
//!
//! Invariants: the decoder accepts only 0/1 bytes in the byte form, and ignores the padding bits
//! of the last bitmap byte (the encoder writes them as zero).

use crate::buf::Reader;
use crate::CodecError;

pub const ID_BYTES: u8 = 0;
pub const ID_BITMAP: u8 = 1;

pub fn put_bitmap(bits: impl Iterator<Item = bool>, out: &mut Vec<u8>) {
    let mut byte = 0u8;
    let mut k = 0;
    for b in bits {
        byte |= u8::from(b) << k;
        k += 1;
        if k == 8 {
            out.push(byte);
            byte = 0;
            k = 0;
        }
    }
    if k > 0 {
        out.push(byte);
    }
}

/// Reads a bitmap of `n` bits.
pub fn get_bitmap(r: &mut Reader, n: usize, out: &mut Vec<bool>) -> Result<(), CodecError> {
    let bytes = r.take(n.div_ceil(8), "bitmap")?;
    out.reserve(n);
    out.extend(
        bytes
            .iter()
            .flat_map(|&b| (0..8).map(move |k| b & (1 << k) != 0))
            .take(n),
    );
    Ok(())
}

pub fn encode(values: &[bool], bitmap: bool, out: &mut Vec<u8>) -> u8 {
    if bitmap {
        put_bitmap(values.iter().copied(), out);
        ID_BITMAP
    } else {
        out.extend(values.iter().map(|&b| u8::from(b)));
        ID_BYTES
    }
}

pub fn decode(r: &mut Reader, id: u8, n: usize, out: &mut Vec<bool>) -> Result<(), CodecError> {
    match id {
        ID_BITMAP => get_bitmap(r, n, out),
        ID_BYTES => {
            let start = r.offset();
            let bytes = r.take(n, "bool bytes")?;
            out.reserve(n);
            for (i, &b) in bytes.iter().enumerate() {
                match b {
                    0 => out.push(false),
                    1 => out.push(true),
                    _ => {
                        return Err(CodecError::Corrupt {
                            offset: start + i,
                            reason: format!("bool byte {b} is not 0 or 1"),
                        })
                    }
                }
            }
            Ok(())
        }
        other => Err(r.corrupt(format!("unknown bool encoding {other}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip() {
        for n in [0usize, 1, 7, 8, 9, 100] {
            let v: Vec<bool> = (0..n).map(|i| i % 3 == 0).collect();
            for bm in [false, true] {
                let mut b = Vec::new();
                let id = encode(&v, bm, &mut b);
                let mut out = Vec::new();
                let mut r = Reader::new(&b, 0);
                decode(&mut r, id, n, &mut out).unwrap();
                r.finish("t").unwrap();
                assert_eq!(out, v);
                for cut in 0..b.len() {
                    assert!(
                        decode(&mut Reader::new(&b[..cut], 0), id, n, &mut Vec::new()).is_err()
                    );
                }
            }
        }
        assert!(decode(&mut Reader::new(&[2], 0), ID_BYTES, 1, &mut Vec::new()).is_err());
    }
}
