//! SQL data types and scalar values.

use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::fmt;

/// A column or tag type, as in TDengine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DataType {
    Timestamp,
    Bool,
    TinyInt,
    SmallInt,
    Int,
    BigInt,
    UTinyInt,
    USmallInt,
    UInt,
    UBigInt,
    Float,
    Double,
    /// VARCHAR(n) / BINARY(n): n is the maximum length in bytes.
    VarChar(u32),
    /// NCHAR(n): n is the maximum length in characters.
    NChar(u32),
}

/// The physical representation a type is stored and computed in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PhysicalType {
    Bool,
    Int,
    UInt,
    Float,
    Str,
    Timestamp,
}

impl DataType {
    pub fn physical(self) -> PhysicalType {
        match self {
            DataType::Timestamp => PhysicalType::Timestamp,
            DataType::Bool => PhysicalType::Bool,
            DataType::TinyInt | DataType::SmallInt | DataType::Int | DataType::BigInt => {
                PhysicalType::Int
            }
            DataType::UTinyInt | DataType::USmallInt | DataType::UInt | DataType::UBigInt => {
                PhysicalType::UInt
            }
            DataType::Float | DataType::Double => PhysicalType::Float,
            DataType::VarChar(_) | DataType::NChar(_) => PhysicalType::Str,
        }
    }

    pub fn is_numeric(self) -> bool {
        matches!(
            self.physical(),
            PhysicalType::Int | PhysicalType::UInt | PhysicalType::Float
        )
    }

    /// Parses a type name as written in DDL (`DOUBLE`, `BINARY(30)`, `int unsigned`, ...).
    /// `len` is the parenthesised length, if any.
    pub fn from_sql(name: &str, len: Option<u32>) -> Option<DataType> {
        let n = name.to_ascii_uppercase();
        let n = n.split_whitespace().collect::<Vec<_>>().join(" ");
        Some(match n.as_str() {
            "TIMESTAMP" => DataType::Timestamp,
            "BOOL" | "BOOLEAN" => DataType::Bool,
            "TINYINT" => DataType::TinyInt,
            "SMALLINT" => DataType::SmallInt,
            "INT" | "INTEGER" => DataType::Int,
            "BIGINT" => DataType::BigInt,
            "TINYINT UNSIGNED" => DataType::UTinyInt,
            "SMALLINT UNSIGNED" => DataType::USmallInt,
            "INT UNSIGNED" | "INTEGER UNSIGNED" => DataType::UInt,
            "BIGINT UNSIGNED" => DataType::UBigInt,
            "FLOAT" => DataType::Float,
            "DOUBLE" => DataType::Double,
            "VARCHAR" | "BINARY" => DataType::VarChar(len?),
            "NCHAR" => DataType::NChar(len?),
            _ => return None,
        })
    }

    /// The stable numeric code of this type and its length (VARCHAR/NCHAR, else 0). The wire
    /// protocol and every on-disk format use these codes: never renumber them.
    pub fn code(self) -> (u8, u32) {
        match self {
            DataType::Timestamp => (0, 0),
            DataType::Bool => (1, 0),
            DataType::TinyInt => (2, 0),
            DataType::SmallInt => (3, 0),
            DataType::Int => (4, 0),
            DataType::BigInt => (5, 0),
            DataType::UTinyInt => (6, 0),
            DataType::USmallInt => (7, 0),
            DataType::UInt => (8, 0),
            DataType::UBigInt => (9, 0),
            DataType::Float => (10, 0),
            DataType::Double => (11, 0),
            DataType::VarChar(n) => (12, n),
            DataType::NChar(n) => (13, n),
        }
    }

    /// The inverse of [`DataType::code`]; `None` for an unknown code.
    pub fn from_code(code: u32, len: u32) -> Option<DataType> {
        Some(match code {
            0 => DataType::Timestamp,
            1 => DataType::Bool,
            2 => DataType::TinyInt,
            3 => DataType::SmallInt,
            4 => DataType::Int,
            5 => DataType::BigInt,
            6 => DataType::UTinyInt,
            7 => DataType::USmallInt,
            8 => DataType::UInt,
            9 => DataType::UBigInt,
            10 => DataType::Float,
            11 => DataType::Double,
            12 => DataType::VarChar(len),
            13 => DataType::NChar(len),
            _ => return None,
        })
    }

    /// The type name as `DESCRIBE` shows it.
    pub fn sql_name(self) -> &'static str {
        match self {
            DataType::Timestamp => "TIMESTAMP",
            DataType::Bool => "BOOL",
            DataType::TinyInt => "TINYINT",
            DataType::SmallInt => "SMALLINT",
            DataType::Int => "INT",
            DataType::BigInt => "BIGINT",
            DataType::UTinyInt => "TINYINT UNSIGNED",
            DataType::USmallInt => "SMALLINT UNSIGNED",
            DataType::UInt => "INT UNSIGNED",
            DataType::UBigInt => "BIGINT UNSIGNED",
            DataType::Float => "FLOAT",
            DataType::Double => "DOUBLE",
            DataType::VarChar(_) => "VARCHAR",
            DataType::NChar(_) => "NCHAR",
        }
    }

    /// The storage length as `DESCRIBE` shows it.
    pub fn byte_len(self) -> u32 {
        match self {
            DataType::Timestamp | DataType::BigInt | DataType::UBigInt | DataType::Double => 8,
            DataType::Bool | DataType::TinyInt | DataType::UTinyInt => 1,
            DataType::SmallInt | DataType::USmallInt => 2,
            DataType::Int | DataType::UInt | DataType::Float => 4,
            DataType::VarChar(n) | DataType::NChar(n) => n,
        }
    }

    /// Checks that `v` fits this type and converts it to the canonical value for the type
    /// (integers range-checked, floats widened, timestamps as `Value::Timestamp`).
    /// Returns a message naming the problem on failure.
    pub fn coerce(self, v: Value) -> Result<Value, String> {
        if v.is_null() {
            return Ok(Value::Null);
        }
        let range_check = |x: i128, lo: i128, hi: i128| -> Result<(), String> {
            if x < lo || x > hi {
                Err(format!("value {x} out of range for {}", self.sql_name()))
            } else {
                Ok(())
            }
        };
        match (self, v) {
            (DataType::Bool, Value::Bool(b)) => Ok(Value::Bool(b)),
            (DataType::Bool, Value::Int(i)) => Ok(Value::Bool(i != 0)),
            (DataType::Bool, Value::Str(s)) => match s.to_ascii_lowercase().as_str() {
                "true" => Ok(Value::Bool(true)),
                "false" => Ok(Value::Bool(false)),
                _ => Err(format!("cannot convert '{s}' to BOOL")),
            },
            (DataType::Timestamp, Value::Int(i)) => Ok(Value::Timestamp(i)),
            (DataType::Timestamp, Value::Timestamp(i)) => Ok(Value::Timestamp(i)),
            (t, Value::Int(i)) if t.physical() == PhysicalType::Int => {
                let (lo, hi) = match t {
                    DataType::TinyInt => (i8::MIN as i128, i8::MAX as i128),
                    DataType::SmallInt => (i16::MIN as i128, i16::MAX as i128),
                    DataType::Int => (i32::MIN as i128, i32::MAX as i128),
                    _ => (i64::MIN as i128, i64::MAX as i128),
                };
                range_check(i as i128, lo, hi)?;
                Ok(Value::Int(i))
            }
            (t, Value::UInt(u)) if t.physical() == PhysicalType::Int => t
                .coerce(Value::Int(i64::try_from(u).map_err(|_| {
                    format!("value {u} out of range for {}", t.sql_name())
                })?)),
            (t, Value::Int(i)) if t.physical() == PhysicalType::UInt => {
                if i < 0 {
                    return Err(format!("value {i} out of range for {}", t.sql_name()));
                }
                t.coerce(Value::UInt(i as u64))
            }
            (t, Value::UInt(u)) if t.physical() == PhysicalType::UInt => {
                let hi = match t {
                    DataType::UTinyInt => u8::MAX as i128,
                    DataType::USmallInt => u16::MAX as i128,
                    DataType::UInt => u32::MAX as i128,
                    _ => u64::MAX as i128,
                };
                range_check(u as i128, 0, hi)?;
                Ok(Value::UInt(u))
            }
            (t, Value::Float(f)) if t.physical() == PhysicalType::Float => Ok(Value::Float(f)),
            (t, Value::Int(i)) if t.physical() == PhysicalType::Float => Ok(Value::Float(i as f64)),
            (t, Value::UInt(u)) if t.physical() == PhysicalType::Float => {
                Ok(Value::Float(u as f64))
            }
            (t, Value::Bool(b)) if t.is_numeric() => t.coerce(Value::Int(b as i64)),
            (DataType::VarChar(n), Value::Str(s)) => {
                if s.len() > n as usize {
                    Err(format!(
                        "string of {} bytes is longer than VARCHAR({n})",
                        s.len()
                    ))
                } else {
                    Ok(Value::Str(s))
                }
            }
            (DataType::NChar(n), Value::Str(s)) => {
                if s.chars().count() > n as usize {
                    Err(format!(
                        "string of {} characters is longer than NCHAR({n})",
                        s.chars().count()
                    ))
                } else {
                    Ok(Value::Str(s))
                }
            }
            (t, v) => Err(format!(
                "cannot convert {} {} to {}",
                v.type_name(),
                v,
                t.sql_name()
            )),
        }
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DataType::VarChar(n) => write!(f, "VARCHAR({n})"),
            DataType::NChar(n) => write!(f, "NCHAR({n})"),
            t => f.write_str(t.sql_name()),
        }
    }
}

/// A scalar value. Integers of every width are `Int`/`UInt`; FLOAT and DOUBLE are `Float`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str(String),
    /// Epoch time in the database's precision.
    Timestamp(i64),
}

impl Value {
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "NULL",
            Value::Bool(_) => "bool",
            Value::Int(_) => "integer",
            Value::UInt(_) => "unsigned integer",
            Value::Float(_) => "float",
            Value::Str(_) => "string",
            Value::Timestamp(_) => "timestamp",
        }
    }

    /// Numeric view (bools as 0/1, timestamps as their integer); `None` for NULL and strings.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Bool(b) => Some(*b as i64 as f64),
            Value::Int(i) | Value::Timestamp(i) => Some(*i as f64),
            Value::UInt(u) => Some(*u as f64),
            Value::Float(f) => Some(*f),
            Value::Null | Value::Str(_) => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Bool(b) => Some(*b as i64),
            Value::Int(i) | Value::Timestamp(i) => Some(*i),
            Value::UInt(u) => i64::try_from(*u).ok(),
            Value::Float(f) => Some(*f as i64),
            Value::Null | Value::Str(_) => None,
        }
    }

    /// A total order used for sorting and MIN/MAX: NULL first, numbers compared numerically
    /// across Int/UInt/Float/Timestamp, strings bytewise.
    pub fn total_cmp(&self, other: &Value) -> Ordering {
        use Value::*;
        match (self, other) {
            (Null, Null) => Ordering::Equal,
            (Null, _) => Ordering::Less,
            (_, Null) => Ordering::Greater,
            (Str(a), Str(b)) => a.cmp(b),
            (Str(_), _) => Ordering::Greater,
            (_, Str(_)) => Ordering::Less,
            (Int(a), Int(b))
            | (Timestamp(a), Timestamp(b))
            | (Int(a), Timestamp(b))
            | (Timestamp(a), Int(b)) => a.cmp(b),
            (UInt(a), UInt(b)) => a.cmp(b),
            (a, b) => {
                let (x, y) = (a.as_f64().unwrap_or(0.0), b.as_f64().unwrap_or(0.0));
                x.total_cmp(&y)
            }
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("NULL"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(i) => write!(f, "{i}"),
            Value::UInt(u) => write!(f, "{u}"),
            Value::Float(x) => write!(f, "{x}"),
            Value::Str(s) => f.write_str(s),
            Value::Timestamp(t) => write!(f, "{t}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_codes_round_trip() {
        for t in [
            DataType::Timestamp,
            DataType::UBigInt,
            DataType::Double,
            DataType::VarChar(30),
            DataType::NChar(7),
        ] {
            let (c, l) = t.code();
            assert_eq!(DataType::from_code(u32::from(c), l), Some(t));
        }
        assert_eq!(DataType::from_code(14, 0), None);
    }
}
