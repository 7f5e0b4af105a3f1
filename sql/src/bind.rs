//! Binding INSERT items and CREATE TABLE ... USING against resolved schemas.

use crate::ast::{CreateSubtable, InsertItem, InsertValue, TagAssignment};
use crate::error::SqlError;
use tidal_common::{Column, DataType, Precision, StableSchema, TableWrite, Value};

/// Fills a full tag vector from an optional partial tag-name list (unnamed tags are NULL) and
/// coerces it against the STABLE's tag template.
fn bind_tags(
    table: &str,
    tag_names: Option<&Vec<String>>,
    tags: &[Value],
    schema: &StableSchema,
) -> Result<Vec<Value>, SqlError> {
    let full = match tag_names {
        None => {
            if tags.len() != schema.tags.len() {
                return Err(SqlError::InvalidArgument(format!(
                    "table {table}: STABLE {} has {} tags but {} tag values were given",
                    schema.name,
                    schema.tags.len(),
                    tags.len()
                )));
            }
            tags.to_vec()
        }
        Some(names) => {
            if names.len() != tags.len() {
                return Err(SqlError::InvalidArgument(format!(
                    "table {table}: {} tag names but {} tag values were given",
                    names.len(),
                    tags.len()
                )));
            }
            let mut full = vec![Value::Null; schema.tags.len()];
            let mut seen = vec![false; schema.tags.len()];
            for (n, v) in names.iter().zip(tags.iter()) {
                let i = schema.tag_index(n).ok_or_else(|| {
                    SqlError::ColumnNotFound(format!("unknown tag '{n}' in STABLE {}", schema.name))
                })?;
                if seen[i] {
                    return Err(SqlError::InvalidArgument(format!(
                        "tag '{n}' is given twice"
                    )));
                }
                seen[i] = true;
                full[i] = v.clone();
            }
            full
        }
    };
    let full = full
        .into_iter()
        .zip(schema.tags.iter())
        .map(|(v, def)| timestamp_tag(v, def.data_type))
        .collect();
    schema
        .coerce_tags(full)
        .map_err(|e| SqlError::TypeMismatch(format!("table {table}: {e}")))
}

/// Time strings for TIMESTAMP tags are parsed in milliseconds; anything else is left to the
/// type's coercion (which names what does not fit).
fn timestamp_tag(v: Value, ty: DataType) -> Value {
    match (&v, ty) {
        (Value::Str(s), DataType::Timestamp) => Precision::Millis
            .parse_timestamp(s)
            .map(Value::Timestamp)
            .unwrap_or(v),
        _ => v,
    }
}

/// Coerces the values of `ALTER TABLE table SET TAG t = v, ...` against the STABLE of the
/// subtable, as `TAGS (..)` of a CREATE would be; returns the tags by their names in `schema`.
/// An unknown tag is named with the STABLE and where it stood.
pub fn bind_set_tags(
    table: &str,
    tags: &[TagAssignment],
    schema: &StableSchema,
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
        let v = def
            .data_type
            .coerce(timestamp_tag(a.value.clone(), def.data_type))
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
) -> Result<Vec<Value>, SqlError> {
    check_stable(&t.name.name, &t.stable, schema)?;
    bind_tags(&t.name.name, t.tag_names.as_ref(), &t.tags, schema)
}

/// Converts one INSERT value for a column of type `ty`.
fn insert_value(v: &InsertValue, ty: DataType, precision: Precision) -> Result<Value, String> {
    let v = match v {
        InsertValue::Now { offset_ns } => {
            let off = precision.from_nanos(*offset_ns);
            Value::Timestamp(precision.now().saturating_add(off))
        }
        InsertValue::Value(Value::Str(s)) if ty == DataType::Timestamp => {
            match precision.parse_timestamp(s) {
                Some(t) => Value::Timestamp(t),
                None => return Err(format!("'{s}' is not a timestamp")),
            }
        }
        InsertValue::Value(Value::Timestamp(t)) if ty != DataType::Timestamp => Value::Int(*t),
        InsertValue::Value(v) => v.clone(),
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
    for (r, row) in item.rows.iter().enumerate() {
        if row.len() != targets.len() {
            return Err(SqlError::InvalidArgument(format!(
                "table {table} expects {} values per row, got {} in row {}",
                targets.len(),
                row.len(),
                r + 1
            )));
        }
        let mut vals: Vec<Value> = vec![Value::Null; schema.columns.len()];
        for (v, &ci) in row.iter().zip(targets.iter()) {
            let def = &schema.columns[ci];
            vals[ci] = insert_value(v, def.data_type, precision).map_err(|e| {
                SqlError::TypeMismatch(format!(
                    "table {table}, column '{}', row {}: {e}",
                    def.name,
                    r + 1
                ))
            })?;
        }
        if vals[0].is_null() {
            return Err(SqlError::InvalidArgument(format!(
                "table {table}, row {}: the timestamp must not be NULL",
                r + 1
            )));
        }
        for (c, v) in columns.iter_mut().zip(vals.iter()) {
            c.push(v);
        }
    }
    let tags = match &item.using {
        Some(u) => {
            check_stable(table, &u.stable, schema)?;
            Some(bind_tags(table, u.tag_names.as_ref(), &u.tags, schema)?)
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
