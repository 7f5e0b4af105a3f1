//! Per-column codec choice, TDengine 3.3 style: `ENCODE`, `COMPRESS` and `LEVEL` column options
//! plus the database option `COMP` (0 = no stage 2, 1 = LZ4, 2 = zstd) as the default.
//!
//! Invariants: [`ColumnCodec::parse`] only returns combinations valid for the column's type, and
//! `parse(t, names())` gives back the same codec, so SHOW CREATE output can be replayed.
//! Name mapping (case-insensitive; surrounding quotes are ignored):
//! - ENCODE: `auto` (default), `disabled`, `delta-i`, `delta-d`, `simple8b`, `bit-packing` for
//!   integer and timestamp columns; `auto`, `disabled`, `delta-d` (= `decimal`), `decimal`,
//!   `gorilla` (= `tsz`), `byte-split` for FLOAT/DOUBLE; `auto`, `disabled`, `bit-packing` for
//!   BOOL; `auto`, `disabled` for VARCHAR/NCHAR.
//! - COMPRESS: `disabled`/`none`, `lz4`, `zstd`; `xz` and `gzip`/`zlib` are not built in and map to
//!   zstd (`xz` with LEVEL `high` unless a level is given); `tsz` (FLOAT/DOUBLE only) selects the
//!   Gorilla XOR encoding with no stage 2, as TDengine's `tsz` is itself a float codec.
//! - LEVEL: `low`, `medium` (default), `high` (zstd levels 1, 3, 9; LZ4 has a single level).

use tidal_common::types::{DataType, PhysicalType};

/// Stage-1 encoding requested for a column. Requests that cannot apply to a block fall back
/// per block (simple-8b with a delta over 60 bits → delta-i; decimal on non-decimal floats →
/// Gorilla), and the block header records what was actually used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// Per block, the smallest of the type's encodings (the default): integers and timestamps
    /// try FOR, delta-i, delta-d, simple-8b and run-length; floats use decimal when exact, else
    /// Gorilla or (under stage 2) byte split; BOOL a bitmap; strings a dictionary when smaller.
    Auto,
    /// Plain fixed-width values (length-prefixed for strings, one byte per BOOL).
    Disabled,
    /// Delta + frame-of-reference bit-packing (integers, timestamps).
    DeltaI,
    /// Delta-of-delta + FOR bit-packing (integers, timestamps).
    DeltaD,
    /// Zigzag delta + simple-8b words (integers, timestamps).
    Simple8b,
    /// FOR bit-packing of the values themselves (integers); bitmap (BOOL).
    BitPacking,
    /// Exact k-decimal scaling to integers, then the best integer encoding (FLOAT/DOUBLE).
    Decimal,
    /// Gorilla XOR (FLOAT/DOUBLE).
    Gorilla,
    /// Byte-stream split: one byte plane per value byte, for stage 2 to compress (FLOAT/DOUBLE).
    ByteSplit,
}

/// Stage-2 compressor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Compression {
    None,
    Lz4,
    Zstd,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Level {
    Low,
    Medium,
    High,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ColumnCodec {
    pub encoding: Encoding,
    pub compression: Compression,
    pub level: Level,
}

/// Tidal's default database `COMP` (chosen from docs/bench/codecs.md).
pub const DEFAULT_COMP: u8 = 2;

fn clean(s: &str) -> String {
    s.trim()
        .trim_matches(|c| c == '\'' || c == '"')
        .trim()
        .to_ascii_lowercase()
}

fn type_name(t: DataType) -> &'static str {
    t.sql_name()
}

/// ENCODE names accepted for a physical type, in the order error messages list them.
fn encodings_for(p: PhysicalType) -> &'static [(&'static str, Encoding)] {
    match p {
        PhysicalType::Int | PhysicalType::UInt | PhysicalType::Timestamp => &[
            ("auto", Encoding::Auto),
            ("disabled", Encoding::Disabled),
            ("delta-i", Encoding::DeltaI),
            ("delta-d", Encoding::DeltaD),
            ("simple8b", Encoding::Simple8b),
            ("bit-packing", Encoding::BitPacking),
        ],
        PhysicalType::Float => &[
            ("auto", Encoding::Auto),
            ("disabled", Encoding::Disabled),
            ("delta-d", Encoding::Decimal),
            ("decimal", Encoding::Decimal),
            ("gorilla", Encoding::Gorilla),
            ("tsz", Encoding::Gorilla),
            ("byte-split", Encoding::ByteSplit),
        ],
        PhysicalType::Bool => &[
            ("auto", Encoding::Auto),
            ("disabled", Encoding::Disabled),
            ("bit-packing", Encoding::BitPacking),
        ],
        PhysicalType::Str => &[("auto", Encoding::Auto), ("disabled", Encoding::Disabled)],
    }
}

fn list(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("'{n}'"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl ColumnCodec {
    /// The default for a column type under database option COMP (0, 1 or 2; larger values are
    /// treated as 2).
    pub fn default_for(t: DataType, comp: u8) -> ColumnCodec {
        let compression = match comp {
            0 => Compression::None,
            1 => Compression::Lz4,
            _ => Compression::Zstd,
        };
        // Under zstd, delta-i timestamps are as small as Auto's best (docs/bench/codecs.md) and
        // encode 5-8x faster; without zstd Auto's run-length of deltas is 10-25% smaller.
        let encoding =
            if t.physical() == PhysicalType::Timestamp && compression == Compression::Zstd {
                Encoding::DeltaI
            } else {
                Encoding::Auto
            };
        ColumnCodec {
            encoding,
            compression,
            level: Level::Medium,
        }
    }

    /// From CREATE STABLE's ENCODE/COMPRESS/LEVEL strings (any may be None = default).
    pub fn parse(
        t: DataType,
        encode: Option<&str>,
        compress: Option<&str>,
        level: Option<&str>,
        comp: u8,
    ) -> Result<ColumnCodec, String> {
        if comp > 2 {
            return Err(format!("invalid COMP {comp}: allowed values are 0, 1, 2"));
        }
        let mut c = ColumnCodec::default_for(t, comp);
        let p = t.physical();
        if let Some(e) = encode {
            let e = clean(e);
            let allowed = encodings_for(p);
            c.encoding = allowed
                .iter()
                .find(|(n, _)| *n == e)
                .map(|(_, x)| *x)
                .ok_or_else(|| {
                    let names: Vec<&str> = allowed.iter().map(|(n, _)| *n).collect();
                    format!(
                        "invalid ENCODE '{e}' for {} column: allowed values are {}",
                        type_name(t),
                        list(&names)
                    )
                })?;
        }
        let mut level_default = Level::Medium;
        if let Some(s) = compress {
            let s = clean(s);
            c.compression = match s.as_str() {
                "disabled" | "none" => Compression::None,
                "lz4" => Compression::Lz4,
                "zstd" | "gzip" | "zlib" => Compression::Zstd,
                "xz" => {
                    level_default = Level::High;
                    Compression::Zstd
                }
                "tsz" if p == PhysicalType::Float => {
                    if encode.is_none() {
                        c.encoding = Encoding::Gorilla;
                    }
                    Compression::None
                }
                "tsz" => {
                    return Err(format!(
                    "invalid COMPRESS 'tsz' for {} column: 'tsz' applies to FLOAT and DOUBLE only",
                    type_name(t)
                ))
                }
                _ => {
                    return Err(format!(
                        "invalid COMPRESS '{s}' for {} column: allowed values are {}",
                        type_name(t),
                        list(&["disabled", "lz4", "zstd", "xz", "gzip", "tsz"])
                    ))
                }
            };
        }
        c.level = match level.map(clean).as_deref() {
            None => level_default,
            Some("low") | Some("l") => Level::Low,
            Some("medium") | Some("m") => Level::Medium,
            Some("high") | Some("h") => Level::High,
            Some(other) => {
                return Err(format!(
                    "invalid LEVEL '{other}': allowed values are 'low', 'medium', 'high'"
                ))
            }
        };
        Ok(c)
    }

    /// The names back (for SHOW CREATE / DESCRIBE): (encode, compress, level).
    pub fn names(&self) -> (&'static str, &'static str, &'static str) {
        let e = match self.encoding {
            Encoding::Auto => "auto",
            Encoding::Disabled => "disabled",
            Encoding::DeltaI => "delta-i",
            Encoding::DeltaD => "delta-d",
            Encoding::Simple8b => "simple8b",
            Encoding::BitPacking => "bit-packing",
            Encoding::Decimal => "decimal",
            Encoding::Gorilla => "gorilla",
            Encoding::ByteSplit => "byte-split",
        };
        let c = match self.compression {
            Compression::None => "disabled",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        };
        let l = match self.level {
            Level::Low => "low",
            Level::Medium => "medium",
            Level::High => "high",
        };
        (e, c, l)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TYPES: [DataType; 14] = [
        DataType::Timestamp,
        DataType::Bool,
        DataType::TinyInt,
        DataType::SmallInt,
        DataType::Int,
        DataType::BigInt,
        DataType::UTinyInt,
        DataType::USmallInt,
        DataType::UInt,
        DataType::UBigInt,
        DataType::Float,
        DataType::Double,
        DataType::VarChar(10),
        DataType::NChar(10),
    ];

    #[test]
    fn names_roundtrip() {
        for t in TYPES {
            for (name, _) in encodings_for(t.physical()) {
                for comp in ["disabled", "lz4", "zstd"] {
                    for level in ["low", "medium", "high"] {
                        let c =
                            ColumnCodec::parse(t, Some(name), Some(comp), Some(level), 2).unwrap();
                        let (e, cc, l) = c.names();
                        let back = ColumnCodec::parse(t, Some(e), Some(cc), Some(l), 0).unwrap();
                        assert_eq!(c, back);
                    }
                }
            }
            let d = ColumnCodec::default_for(t, 2);
            let (e, c, l) = d.names();
            assert_eq!(
                ColumnCodec::parse(t, Some(e), Some(c), Some(l), 2).unwrap(),
                d
            );
        }
    }

    #[test]
    fn tdengine_names() {
        let c = ColumnCodec::parse(DataType::Double, None, Some("tsz"), None, 2).unwrap();
        assert_eq!(c.encoding, Encoding::Gorilla);
        assert_eq!(c.compression, Compression::None);
        let c = ColumnCodec::parse(DataType::Int, Some("'Simple8B'"), Some("XZ"), None, 1).unwrap();
        assert_eq!(
            (c.encoding, c.compression, c.level),
            (Encoding::Simple8b, Compression::Zstd, Level::High)
        );
        let c = ColumnCodec::parse(DataType::Double, Some("delta-d"), None, None, 1).unwrap();
        assert_eq!(c.encoding, Encoding::Decimal);
        assert_eq!(c.compression, Compression::Lz4);
        assert_eq!(
            ColumnCodec::default_for(DataType::Int, 0).compression,
            Compression::None
        );
    }

    #[test]
    fn errors_name_the_value() {
        let e = ColumnCodec::parse(DataType::Double, Some("simple8b"), None, None, 2).unwrap_err();
        assert!(e.contains("'simple8b'") && e.contains("'delta-d'"), "{e}");
        let e = ColumnCodec::parse(DataType::Int, None, Some("tsz"), None, 2).unwrap_err();
        assert!(e.contains("tsz"), "{e}");
        let e = ColumnCodec::parse(DataType::Int, None, Some("brotli"), None, 2).unwrap_err();
        assert!(e.contains("'brotli'") && e.contains("'lz4'"), "{e}");
        let e = ColumnCodec::parse(DataType::Int, None, None, Some("max"), 2).unwrap_err();
        assert!(e.contains("'max'"), "{e}");
        assert!(ColumnCodec::parse(DataType::Int, None, None, None, 3).is_err());
    }
}
