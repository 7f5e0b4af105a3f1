//! Binding INSERT items and CREATE TABLE ... USING against resolved schemas.

use crate::ast::{CreateSubtable, InsertItem, InsertUsing, InsertValue, ObjectRef, TagAssignment};
use crate::error::SqlError;
use std::collections::HashMap;
use tidal_common::types::PhysicalType;
use tidal_common::{Column, DataType, Precision, StableSchema, TableWrite, Value};

/// Fills a full tag vector from an optional partial tag-name list (unnamed tags are NULL) and
/// coerces it against the STABLE's tag template; a TIMESTAMP tag is in the database's
/// `precision`, as its rows' timestamps are.
fn bind_tags(
    table: &str,
    tag_names: Option<&Vec<String>>,
    tags: &[InsertValue],
    schema: &StableSchema,
    precision: Precision,
) -> Result<Vec<Value>, SqlError> {
    // The tags by their place in the STABLE, borrowed (`None`: not named, so NULL).
    let full: Vec<Option<&InsertValue>> = match tag_names {
        None => {
            if tags.len() != schema.tags.len() {
                return Err(SqlError::InvalidArgument(format!(
                    "table {table}: STABLE {} has {} tags but {} tag values were given",
                    schema.name,
                    schema.tags.len(),
                    tags.len()
                )));
            }
            tags.iter().map(Some).collect()
        }
        Some(names) => {
            if names.len() != tags.len() {
                return Err(SqlError::InvalidArgument(format!(
                    "table {table}: {} tag names but {} tag values were given",
                    names.len(),
                    tags.len()
                )));
            }
            let mut full = vec![None; schema.tags.len()];
            for (n, v) in names.iter().zip(tags.iter()) {
                let i = schema.tag_index(n).ok_or_else(|| {
                    SqlError::ColumnNotFound(format!("unknown tag '{n}' in STABLE {}", schema.name))
                })?;
                if full[i].replace(v).is_some() {
                    return Err(SqlError::InvalidArgument(format!(
                        "tag '{n}' is given twice"
                    )));
                }
            }
            full
        }
    };
    let full = full
        .into_iter()
        .zip(schema.tags.iter())
        .map(|(v, def)| {
            let Some(v) = v else {
                return Ok(Value::Null);
            };
            tag_literal(v, def.data_type, precision).map_err(|e| {
                SqlError::TypeMismatch(format!("table {table}: tag '{}': {e}", def.name))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    schema
        .coerce_tags(full)
        .map_err(|e| SqlError::TypeMismatch(format!("table {table}: {e}")))
}

/// Time strings for TIMESTAMP tags are parsed in the database's `precision` (which every
/// reader of the tag assumes) and quoted numbers for numeric tags read as numbers
/// ([`quoted_number`]); `NOW` and `TODAY()` are read as a row's value would be (so in the
/// database's precision, at binding); anything else is left to the type's coercion (which
/// names what does not fit).
fn tag_literal(v: &InsertValue, ty: DataType, precision: Precision) -> Result<Value, String> {
    let v = match v {
        InsertValue::Value(v) => v.clone(),
        now @ InsertValue::Now { .. } => return insert_value(now, ty, precision),
    };
    match (&v, ty) {
        (Value::Str(s), DataType::Timestamp) => Ok(precision
            .parse_timestamp(s)
            .map(Value::Timestamp)
            .unwrap_or(v)),
        _ => quoted_number(v, ty),
    }
}

/// A quoted value for a numeric column or tag is the number it spells, as TDengine reads
/// `'12'` for an INT (it strips the quotes): clients that quote every value write unchanged.
/// The number is range-checked by the type's coercion afterwards; text that is no number of
/// the type (`'12a'`, `'1.5'` for an integer, an empty string) is an error naming it.
fn quoted_number(v: Value, ty: DataType) -> Result<Value, String> {
    let Value::Str(s) = &v else {
        return Ok(v);
    };
    let n = match ty.physical() {
        PhysicalType::Int | PhysicalType::UInt => {
            s.parse::<i128>().ok().and_then(|n| match i64::try_from(n) {
                Ok(i) => Some(Value::Int(i)),
                Err(_) => u64::try_from(n).ok().map(Value::UInt),
            })
        }
        PhysicalType::Float => s
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .map(Value::Float),
        _ => return Ok(v),
    };
    n.ok_or_else(|| {
        let what = if ty.physical() == PhysicalType::Float {
            "a number"
        } else if s.parse::<i128>().is_ok() {
            "in range"
        } else {
            "an integer"
        };
        format!("'{s}' is not {what} for {}", ty.sql_name())
    })
}

/// Coerces the values of `ALTER TABLE table SET TAG t = v, ...` against the STABLE of the
/// subtable, as `TAGS (..)` of a CREATE would be; returns the tags by their names in `schema`.
/// An unknown tag is named with the STABLE and where it stood.
pub fn bind_set_tags(
    table: &str,
    tags: &[TagAssignment],
    schema: &StableSchema,
    precision: Precision,
) -> Result<Vec<(String, Value)>, SqlError> {
    let mut out: Vec<(String, Value)> = Vec::with_capacity(tags.len());
    for a in tags {
        let i = schema.tag_index(&a.tag).ok_or_else(|| {
            SqlError::ColumnNotFound(format!(
                "unknown tag '{}' in STABLE {} (of table {table}) at {}",
                a.tag, schema.name, a.pos
            ))
        })?;
        let def = &schema.tags[i];
        if out.iter().any(|(n, _)| *n == def.name) {
            return Err(SqlError::InvalidArgument(format!(
                "table {table}: tag '{}' is set twice",
                def.name
            )));
        }
        let v = tag_literal(&a.value, def.data_type, precision)
            .and_then(|v| def.data_type.coerce(v))
            .map_err(|e| {
                SqlError::TypeMismatch(format!("table {table}, tag '{}': {e}", def.name))
            })?;
        out.push((def.name.clone(), v));
    }
    Ok(out)
}

fn check_stable(
    table: &str,
    stable: &crate::ast::ObjectRef,
    schema: &StableSchema,
) -> Result<(), SqlError> {
    if !stable.name.eq_ignore_ascii_case(&schema.name) {
        return Err(SqlError::InvalidArgument(format!(
            "table {table}: USING {} does not match the resolved STABLE {}",
            stable.name, schema.name
        )));
    }
    Ok(())
}

/// Coerces the tag values of `CREATE TABLE t USING st [(names)] TAGS (...)`.
pub fn bind_create_subtable(
    t: &CreateSubtable,
    schema: &StableSchema,
    precision: Precision,
) -> Result<Vec<Value>, SqlError> {
    check_stable(&t.name.name, &t.stable, schema)?;
    bind_tags(
        &t.name.name,
        t.tag_names.as_ref(),
        &t.tags,
        schema,
        precision,
    )
}

/// Converts one INSERT value for a column of type `ty`.
fn insert_value(v: &InsertValue, ty: DataType, precision: Precision) -> Result<Value, String> {
    let v = match v {
        now @ InsertValue::Now { .. } if ty != DataType::Timestamp && !ty.is_numeric() => {
            // A time read as its epoch number would be a surprising string or BOOL.
            return Err(format!(
                "{} is a time, not a value for {}",
                now.time_function().unwrap_or("NOW"),
                ty.sql_name()
            ));
        }
        InsertValue::Now {
            offset_ns,
            midnight,
        } => {
            let off = precision.from_nanos(*offset_ns);
            let base = if *midnight {
                precision.today()
            } else {
                precision.now()
            };
            Value::Timestamp(base.saturating_add(off))
        }
        InsertValue::Value(Value::Str(s)) if ty == DataType::Timestamp => {
            match precision.parse_timestamp(s) {
                Some(t) => Value::Timestamp(t),
                None => return Err(format!("'{s}' is not a timestamp")),
            }
        }
        InsertValue::Value(Value::Timestamp(t)) if ty != DataType::Timestamp => Value::Int(*t),
        InsertValue::Value(v) => quoted_number(v.clone(), ty)?,
    };
    let v = match (ty, v) {
        (DataType::Timestamp, Value::Float(f)) if f.fract() == 0.0 && f.abs() < 9.2e18 => {
            Value::Int(f as i64)
        }
        (t, Value::Timestamp(x)) if t != DataType::Timestamp => Value::Int(x),
        (_, v) => v,
    };
    ty.coerce(v)
}

/// Whether `name` is the pseudo-column that names a row's subtable.
fn is_tbname(name: &str) -> bool {
    name.eq_ignore_ascii_case("tbname")
}

/// Whether `item` names each row's subtable in a `tbname` column (and has no USING of its
/// own): the items [`split_stable_insert`] splits.
pub fn names_tbname(item: &InsertItem) -> bool {
    item.using.is_none()
        && item
            .columns
            .as_ref()
            .is_some_and(|c| c.iter().any(|n| is_tbname(n)))
}

/// `INSERT INTO stable (tbname, columns and tags ...) VALUES ...` (TDengine 3): the rows of
/// each subtable the `tbname` column names, as the items `INSERT INTO name USING stable
/// (tags) TAGS (...) (columns) VALUES ...` would give, in the order the names first appear.
/// `None` when the item lists no `tbname` column (or has its own USING). A name is taken as
/// written, as a backquoted one. The tags listed (NULL for the others) create a subtable that
/// does not exist yet, from its first row's values; an existing subtable keeps its own, as
/// with USING ... TAGS.
pub fn split_stable_insert(
    item: &InsertItem,
    schema: &StableSchema,
) -> Result<Option<Vec<InsertItem>>, SqlError> {
    let Some(names) = item.columns.as_ref().filter(|_| names_tbname(item)) else {
        return Ok(None);
    };
    let stable = &schema.name;
    // Where each listed name goes: the subtable's name, a column, or a tag.
    enum To {
        Name,
        Column,
        Tag,
    }
    let mut to = Vec::with_capacity(names.len());
    let (mut columns, mut tag_names) = (Vec::new(), Vec::new());
    for n in names {
        if is_tbname(n) {
            if to.iter().any(|t| matches!(t, To::Name)) {
                return Err(SqlError::InvalidArgument(format!(
                    "tbname is listed twice for STABLE {stable}"
                )));
            }
            to.push(To::Name);
        } else if schema.column_index(n).is_some() {
            to.push(To::Column);
            columns.push(n.clone());
        } else if schema.tag_index(n).is_some() {
            to.push(To::Tag);
            tag_names.push(n.clone());
        } else {
            return Err(SqlError::ColumnNotFound(format!(
                "unknown column or tag '{n}' in STABLE {stable}"
            )));
        }
    }
    let mut out: Vec<InsertItem> = Vec::new();
    let mut at: HashMap<String, usize> = HashMap::new();
    for (r, row) in item.rows.iter().enumerate() {
        if row.len() != names.len() {
            return Err(SqlError::InvalidArgument(format!(
                "STABLE {stable} expects {} values per row, got {} in row {}",
                names.len(),
                row.len(),
                r + 1
            )));
        }
        let mut name = None;
        let mut values = Vec::with_capacity(columns.len());
        let mut tags = Vec::with_capacity(tag_names.len());
        for (v, t) in row.iter().zip(&to) {
            match t {
                To::Column => values.push(v.clone()),
                To::Name => match v {
                    InsertValue::Value(Value::Str(s)) if !s.is_empty() => name = Some(s.clone()),
                    _ => {
                        return Err(SqlError::InvalidArgument(format!(
                            "STABLE {stable}, row {}: tbname must be a string naming the \
                             subtable, not {}",
                            r + 1,
                            describe_insert_value(v)
                        )))
                    }
                },
                To::Tag => tags.push(v.clone()),
            }
        }
        let Some(name) = name else {
            continue; // unreachable: `to` holds one Name
        };
        let i = *at.entry(name.clone()).or_insert_with(|| {
            out.push(InsertItem {
                table: ObjectRef {
                    db: item.table.db.clone(),
                    name,
                },
                using: Some(InsertUsing {
                    stable: item.table.clone(),
                    tag_names: Some(tag_names.clone()),
                    tags,
                }),
                columns: Some(columns.clone()),
                rows: Vec::new(),
                row_numbers: Vec::new(),
            });
            out.len() - 1
        });
        if let Some(sub) = out.get_mut(i) {
            sub.rows.push(values);
            sub.row_numbers.push(r + 1);
        }
    }
    Ok(Some(out))
}

fn describe_insert_value(v: &InsertValue) -> String {
    match v {
        now @ InsertValue::Now { .. } => now.time_function().unwrap_or("NOW").to_string(),
        InsertValue::Value(Value::Null) => "NULL".to_string(),
        InsertValue::Value(Value::Str(_)) => "an empty string".to_string(),
        InsertValue::Value(v) => v.to_string(),
    }
}

/// Turns one INSERT item into a [`TableWrite`] for the resolved schema.
pub fn bind_insert(
    item: &InsertItem,
    schema: &StableSchema,
    precision: Precision,
) -> Result<TableWrite, SqlError> {
    let table = &item.table.name;
    // target column index for each position of a row
    let targets: Vec<usize> = match &item.columns {
        None => (0..schema.columns.len()).collect(),
        Some(names) => {
            let mut seen = vec![false; schema.columns.len()];
            let mut out = Vec::with_capacity(names.len());
            for n in names {
                let i = schema.column_index(n).ok_or_else(|| {
                    SqlError::ColumnNotFound(format!("unknown column '{n}' in table {table}"))
                })?;
                if seen[i] {
                    return Err(SqlError::InvalidArgument(format!(
                        "column '{n}' is listed twice for table {table}"
                    )));
                }
                seen[i] = true;
                out.push(i);
            }
            if !seen.first().copied().unwrap_or(false) {
                return Err(SqlError::InvalidArgument(format!(
                    "the column list for table {table} must include the timestamp column '{}'",
                    schema
                        .columns
                        .first()
                        .map(|c| c.name.as_str())
                        .unwrap_or("ts")
                )));
            }
            out
        }
    };
    let mut columns: Vec<Column> = schema
        .columns
        .iter()
        .map(|c| Column::empty(c.data_type, item.rows.len()))
        .collect();
    let row_no = |r: usize| item.row_numbers.get(r).copied().unwrap_or(r + 1);
    for (r, row) in item.rows.iter().enumerate() {
        if row.len() != targets.len() {
            return Err(SqlError::InvalidArgument(format!(
                "table {table} expects {} values per row, got {} in row {}",
                targets.len(),
                row.len(),
                row_no(r)
            )));
        }
        let mut vals: Vec<Value> = vec![Value::Null; schema.columns.len()];
        for (v, &ci) in row.iter().zip(targets.iter()) {
            let def = &schema.columns[ci];
            vals[ci] = insert_value(v, def.data_type, precision).map_err(|e| {
                SqlError::TypeMismatch(format!(
                    "table {table}, column '{}', row {}: {e}",
                    def.name,
                    row_no(r)
                ))
            })?;
        }
        if vals[0].is_null() {
            return Err(SqlError::InvalidArgument(format!(
                "table {table}, row {}: the timestamp must not be NULL",
                row_no(r)
            )));
        }
        for (c, v) in columns.iter_mut().zip(vals.iter()) {
            c.push(v);
        }
    }
    let tags = match &item.using {
        Some(u) => {
            check_stable(table, &u.stable, schema)?;
            Some(bind_tags(
                table,
                u.tag_names.as_ref(),
                &u.tags,
                schema,
                precision,
            )?)
        }
        None => None,
    };
    Ok(TableWrite {
        table: table.clone(),
        stable: schema.name.clone(),
        tags,
        columns,
    })
}
