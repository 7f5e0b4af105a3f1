//! Writers of generated points: one submodule per target format. Text writers take any
//! `std::io::Write` (wrap it in a compressor or a `BufWriter` as needed); the Tidal adapter
//! builds the client library's columnar `TableWrite`s.

pub mod influx;
pub mod sql;
pub mod tdengine;
pub mod tidal;

use std::io::Write;

/// Appends `v` as Go's `strconv.FormatFloat(v, 'f', -1, 64)` does: the shortest digits that
/// read back to `v`, never an exponent (`25`, `36.3`, `0.0001`). Rust's `Display` for f64 has
/// exactly this contract.
#[inline]
pub(crate) fn push_f64(buf: &mut Vec<u8>, v: f64) {
    let _ = write!(buf, "{v}");
}

#[inline]
pub(crate) fn push_i64(buf: &mut Vec<u8>, v: i64) {
    let _ = write!(buf, "{v}");
}
