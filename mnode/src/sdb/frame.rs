//! Byte framing shared by the log and the snapshot: the 16-byte file header and the
//! checksummed record `[len u32 LE | crc32c u32 LE | seq u64 LE | payload]`.
//!
//! Decoding never panics and never trusts a length before checking it against the buffer.

/// Magic of the log file (`mnode.log`).
pub const LOG_MAGIC: [u8; 8] = *b"TIDALMNL";
/// Magic of the snapshot file (`mnode.snap`).
pub const SNAP_MAGIC: [u8; 8] = *b"TIDALMNS";
/// Format version written into both file headers.
pub const FORMAT_VERSION: u32 = 1;
/// `magic (8) | version u32 LE | reserved u32 LE (0)`.
pub const FILE_HEADER_LEN: usize = 16;
/// `len u32 | crc u32 | seq u64`.
pub const RECORD_HEADER_LEN: usize = 16;
/// Upper bound of one payload; larger length fields are treated as damage.
pub const MAX_PAYLOAD: usize = 64 << 20;

pub fn encode_file_header(magic: &[u8; 8]) -> [u8; FILE_HEADER_LEN] {
    let mut h = [0u8; FILE_HEADER_LEN];
    h[..8].copy_from_slice(magic);
    h[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    h
}

/// Checks a file header. `Err` carries the reason.
pub fn check_file_header(buf: &[u8], magic: &[u8; 8]) -> Result<(), String> {
    if buf.len() < FILE_HEADER_LEN {
        return Err(format!(
            "file is {} bytes, shorter than its {FILE_HEADER_LEN}-byte header",
            buf.len()
        ));
    }
    if &buf[..8] != magic {
        return Err("bad magic (not a Tidal mnode file of this kind)".to_string());
    }
    let version = u32::from_le_bytes([buf[8], buf[9], buf[10], buf[11]]);
    if version != FORMAT_VERSION {
        return Err(format!(
            "unsupported format version {version} (this build reads {FORMAT_VERSION})"
        ));
    }
    if buf[12..16] != [0, 0, 0, 0] {
        return Err("reserved header bytes are not zero".to_string());
    }
    Ok(())
}

fn checksum(len: u32, seq: u64, payload: &[u8]) -> u32 {
    let c = crc32c::crc32c(&len.to_le_bytes());
    let c = crc32c::crc32c_append(c, &seq.to_le_bytes());
    crc32c::crc32c_append(c, payload)
}

/// Encodes one record. The caller checks `payload.len() <= MAX_PAYLOAD`.
pub fn encode_record(seq: u64, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut out = Vec::with_capacity(RECORD_HEADER_LEN + payload.len());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&checksum(len, seq, payload).to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// A record decoded from a buffer.
#[derive(Debug, PartialEq)]
pub struct Frame<'a> {
    pub seq: u64,
    pub payload: &'a [u8],
    /// Offset just past the record.
    pub end: usize,
}

/// Decodes the record starting at `off`. `Err` says why there is no valid record there
/// (incomplete header, length past the end, bad checksum).
pub fn decode_record(buf: &[u8], off: usize) -> Result<Frame<'_>, String> {
    let rest = buf.get(off..).unwrap_or(&[]);
    if rest.len() < RECORD_HEADER_LEN {
        return Err(format!(
            "incomplete record header ({} of {RECORD_HEADER_LEN} bytes)",
            rest.len()
        ));
    }
    let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
    let crc = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]);
    let mut seq_bytes = [0u8; 8];
    seq_bytes.copy_from_slice(&rest[8..16]);
    let seq = u64::from_le_bytes(seq_bytes);
    let n = len as usize;
    if n > MAX_PAYLOAD {
        return Err(format!(
            "record length {len} exceeds the {MAX_PAYLOAD}-byte limit"
        ));
    }
    if rest.len() - RECORD_HEADER_LEN < n {
        return Err(format!(
            "incomplete record: length {len}, only {} payload bytes present",
            rest.len() - RECORD_HEADER_LEN
        ));
    }
    let payload = &rest[RECORD_HEADER_LEN..RECORD_HEADER_LEN + n];
    let actual = checksum(len, seq, payload);
    if actual != crc {
        return Err(format!(
            "checksum mismatch (stored {crc:#010x}, computed {actual:#010x})"
        ));
    }
    Ok(Frame {
        seq,
        payload,
        end: off + RECORD_HEADER_LEN + n,
    })
}

/// The first offset at or after `from` where a valid record with `seq >= min_seq` starts.
/// Used to tell a torn tail (nothing valid after the damage) from damage in the middle of the
/// log. `min_seq` keeps stale bytes of an older log (lower seqs), which a filesystem may
/// expose past the end of a file after a crash, from counting as evidence.
pub fn valid_record_after(buf: &[u8], from: usize, min_seq: u64) -> Option<usize> {
    let last = buf.len().checked_sub(RECORD_HEADER_LEN)?;
    (from..=last).find(|&p| decode_record(buf, p).is_ok_and(|f| f.seq >= min_seq))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        let mut buf = encode_record(7, b"hello");
        buf.extend_from_slice(&encode_record(8, b""));
        let f = decode_record(&buf, 0).unwrap();
        assert_eq!((f.seq, f.payload), (7, &b"hello"[..]));
        let g = decode_record(&buf, f.end).unwrap();
        assert_eq!((g.seq, g.payload, g.end), (8, &b""[..], buf.len()));
        assert!(decode_record(&buf, buf.len()).is_err());
        assert!(decode_record(&buf[..10], 0).is_err());
        assert!(decode_record(&buf[..20], 0).is_err());
        let mut bad = buf.clone();
        bad[17] ^= 1;
        assert!(decode_record(&bad, 0).unwrap_err().contains("checksum"));
        assert_eq!(valid_record_after(&bad, 1, 0), Some(f.end));
        assert_eq!(valid_record_after(&bad, 1, 9), None);
        assert_eq!(valid_record_after(&bad[..f.end], 1, 0), None);
        // Never panics on arbitrary bytes at any offset.
        let junk: Vec<u8> = (0..200u32).map(|i| (i * 37 % 251) as u8).collect();
        for p in 0..junk.len() + 2 {
            let _ = decode_record(&junk, p);
        }
        assert!(check_file_header(&encode_file_header(&LOG_MAGIC), &LOG_MAGIC).is_ok());
        assert!(check_file_header(&encode_file_header(&LOG_MAGIC), &SNAP_MAGIC).is_err());
        assert!(check_file_header(b"TIDAL", &LOG_MAGIC).is_err());
    }
}
