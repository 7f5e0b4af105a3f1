//! Conversions between the wire types (`v1::*`) and the internal types of `tidal-common`.
//! Decoding never panics: a malformed message becomes a [`WireError`] naming the field, which
//! servers answer with `InvalidArgument`.

use crate::v1;
use crate::STATUS_CODE_KEY;
use tidal_common::{
    Batch, Column, ColumnData, ColumnDef, DataType, DbOptions, Field, HashRange, Precision,
    RowBlock, RowBlockParts, SchemaVersion, StableSchema, StatusCode, TableMeta, TableUid,
    TableWrite, Value, VgroupId, WriteBatch,
};

/// A message that does not decode into a valid internal value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError(pub String);

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed request: {}", self.0)
    }
}

impl std::error::Error for WireError {}

impl From<WireError> for tonic::Status {
    fn from(e: WireError) -> tonic::Status {
        status_error(StatusCode::InvalidArgument, e.to_string())
    }
}

type R<T> = Result<T, WireError>;

fn err<T>(msg: impl Into<String>) -> R<T> {
    Err(WireError(msg.into()))
}

/// Builds a gRPC error status carrying a Tidal status code.
pub fn status_error(code: StatusCode, message: impl Into<String>) -> tonic::Status {
    let grpc = match code {
        StatusCode::Ok => tonic::Code::Ok,
        StatusCode::InvalidArgument
        | StatusCode::SyntaxError
        | StatusCode::PlanError
        | StatusCode::TypeMismatch
        | StatusCode::SchemaMismatch
        | StatusCode::NoDatabaseSelected => tonic::Code::InvalidArgument,
        StatusCode::Unauthenticated | StatusCode::TokenExpired => tonic::Code::Unauthenticated,
        StatusCode::PermissionDenied => tonic::Code::PermissionDenied,
        StatusCode::UserExists => tonic::Code::AlreadyExists,
        StatusCode::UserNotFound => tonic::Code::NotFound,
        StatusCode::DatabaseNotFound
        | StatusCode::StableNotFound
        | StatusCode::TableNotFound
        | StatusCode::ColumnNotFound
        | StatusCode::VnodeNotFound => tonic::Code::NotFound,
        StatusCode::DatabaseExists | StatusCode::StableExists | StatusCode::TableExists => {
            tonic::Code::AlreadyExists
        }
        StatusCode::WrongVgroup | StatusCode::WireVersionMismatch => {
            tonic::Code::FailedPrecondition
        }
        StatusCode::Unavailable | StatusCode::NoDnodes | StatusCode::ShuttingDown => {
            tonic::Code::Unavailable
        }
        StatusCode::Timeout => tonic::Code::DeadlineExceeded,
        StatusCode::Unimplemented => tonic::Code::Unimplemented,
        StatusCode::ResourceExhausted => tonic::Code::ResourceExhausted,
        StatusCode::Corruption => tonic::Code::DataLoss,
        _ => tonic::Code::Internal,
    };
    let mut s = tonic::Status::new(grpc, message.into());
    if let Ok(v) = code.as_u32().to_string().parse() {
        s.metadata_mut().insert(STATUS_CODE_KEY, v);
    }
    s
}

/// The Tidal status code of a gRPC error: the carried code if present, else one derived from
/// the gRPC code (a transport failure is `Unavailable`).
pub fn code_of(s: &tonic::Status) -> StatusCode {
    if let Some(v) = s.metadata().get(STATUS_CODE_KEY) {
        if let Some(n) = v.to_str().ok().and_then(|t| t.parse::<u32>().ok()) {
            return StatusCode::from_u32(n);
        }
    }
    match s.code() {
        tonic::Code::Unavailable | tonic::Code::Cancelled | tonic::Code::Unknown => {
            StatusCode::Unavailable
        }
        tonic::Code::DeadlineExceeded => StatusCode::Timeout,
        tonic::Code::InvalidArgument => StatusCode::InvalidArgument,
        tonic::Code::NotFound => StatusCode::TableNotFound,
        tonic::Code::Unimplemented => StatusCode::Unimplemented,
        tonic::Code::Unauthenticated => StatusCode::Unauthenticated,
        tonic::Code::PermissionDenied => StatusCode::PermissionDenied,
        tonic::Code::ResourceExhausted => StatusCode::ResourceExhausted,
        tonic::Code::OutOfRange => StatusCode::ResourceExhausted,
        _ => StatusCode::Internal,
    }
}

// ---------- data types ----------

pub fn data_type_to_wire(t: DataType) -> v1::DataType {
    let (code, len) = t.code();
    v1::DataType {
        code: code as u32,
        len,
    }
}

pub fn data_type_from_wire(t: Option<&v1::DataType>) -> R<DataType> {
    let Some(t) = t else {
        return err("missing data type");
    };
    match DataType::from_code(t.code, t.len) {
        Some(d) => Ok(d),
        None => err(format!("unknown data type code {}", t.code)),
    }
}

pub fn value_to_wire(v: &Value) -> v1::Value {
    use v1::value::V;
    let v = match v {
        Value::Null => V::Null(true),
        Value::Bool(b) => V::B(*b),
        Value::Int(i) => V::I(*i),
        Value::UInt(u) => V::U(*u),
        Value::Float(f) => V::F(*f),
        Value::Str(s) => V::S(s.clone()),
        Value::Timestamp(t) => V::Ts(*t),
    };
    v1::Value { v: Some(v) }
}

/// [`value_from_wire`] of a message the caller owns: a string moves, not copied (tag lists
/// of a large load's first batches are 100,000s of them).
pub fn value_from_wire_owned(v: v1::Value) -> Value {
    match v.v {
        Some(v1::value::V::S(s)) => Value::Str(s),
        other => value_from_wire(&v1::Value { v: other }),
    }
}

pub fn value_from_wire(v: &v1::Value) -> Value {
    use v1::value::V;
    match &v.v {
        None | Some(V::Null(_)) => Value::Null,
        Some(V::B(b)) => Value::Bool(*b),
        Some(V::I(i)) => Value::Int(*i),
        Some(V::U(u)) => Value::UInt(*u),
        Some(V::F(f)) => Value::Float(*f),
        Some(V::S(s)) => Value::Str(s.clone()),
        Some(V::Ts(t)) => Value::Timestamp(*t),
    }
}

// ---------- columns and batches ----------

/// `Column.kind` of a column's data.
pub(crate) fn wire_kind(c: &Column) -> u32 {
    match &c.data {
        ColumnData::Bool(_) => 0,
        ColumnData::Int(_) => 1,
        ColumnData::UInt(_) => 2,
        ColumnData::Float(_) => 3,
        ColumnData::Str(_) => 4,
        ColumnData::Timestamp(_) => 5,
    }
}

pub fn column_to_wire(c: &Column) -> v1::Column {
    let mut w = v1::Column {
        kind: wire_kind(c),
        len: c.len() as u32,
        ..Default::default()
    };
    match &c.data {
        ColumnData::Bool(v) => w.bools = v.clone(),
        ColumnData::Int(v) | ColumnData::Timestamp(v) => {
            w.fixed = fixed_bytes(v, |x| x.to_le_bytes())
        }
        ColumnData::UInt(v) => w.fixed = fixed_bytes(v, |x| x.to_le_bytes()),
        ColumnData::Float(v) => w.fixed = fixed_bytes(v, |x| x.to_le_bytes()),
        ColumnData::Str(v) => w.strs = v.clone(),
    }
    if c.nulls.iter().any(|n| *n) {
        let mut bits = vec![0u8; c.nulls.len().div_ceil(8)];
        for (i, n) in c.nulls.iter().enumerate() {
            if *n {
                if let Some(b) = bits.get_mut(i / 8) {
                    *b |= 1 << (i % 8);
                }
            }
        }
        w.nulls = bits;
    }
    w
}

/// `Column.fixed` of `values`: 8 little-endian bytes each.
fn fixed_bytes<T: Copy>(values: &[T], le: impl Fn(T) -> [u8; 8]) -> prost::bytes::Bytes {
    let mut out = Vec::with_capacity(values.len() * 8);
    for v in values {
        out.extend_from_slice(&le(*v));
    }
    out.into()
}

/// The values of a numeric column: from `fixed` when it is used, else the repeated field.
fn fixed_or<T>(
    kind: u32,
    len: usize,
    fixed: &[u8],
    repeated: Vec<T>,
    from_le: impl Fn([u8; 8]) -> T,
) -> R<Vec<T>> {
    if fixed.is_empty() {
        return Ok(repeated);
    }
    if !repeated.is_empty() {
        return err(format!(
            "column of kind {kind} carries its values twice (fixed and repeated)"
        ));
    }
    if fixed.len() != len.saturating_mul(8) {
        return err(format!(
            "column declares {len} values but carries {} fixed bytes (8 per value)",
            fixed.len()
        ));
    }
    Ok(fixed
        .chunks_exact(8)
        .map(|c| {
            let mut b = [0u8; 8];
            b.copy_from_slice(c);
            from_le(b)
        })
        .collect())
}

pub fn column_from_wire(w: v1::Column) -> R<Column> {
    let (kind, len) = (w.kind, w.len as usize);
    if !w.fixed.is_empty() && !matches!(kind, 1 | 2 | 3 | 5) {
        return err(format!(
            "column of kind {kind} carries fixed-width bytes (only kinds 1, 2, 3 and 5 may)"
        ));
    }
    let data = match kind {
        0 => ColumnData::Bool(w.bools),
        1 => ColumnData::Int(fixed_or(kind, len, &w.fixed, w.ints, i64::from_le_bytes)?),
        2 => ColumnData::UInt(fixed_or(kind, len, &w.fixed, w.uints, u64::from_le_bytes)?),
        3 => ColumnData::Float(fixed_or(kind, len, &w.fixed, w.floats, f64::from_le_bytes)?),
        4 => ColumnData::Str(w.strs),
        5 => ColumnData::Timestamp(fixed_or(kind, len, &w.fixed, w.ints, i64::from_le_bytes)?),
        k => return err(format!("unknown column kind {k}")),
    };
    let len = data.len();
    if len != w.len as usize {
        return err(format!(
            "column declares {} values but carries {len}",
            w.len
        ));
    }
    let nulls = if w.nulls.is_empty() {
        Vec::new()
    } else {
        if w.nulls.len() != len.div_ceil(8) {
            return err(format!(
                "null bitmap of {} bytes for {len} values",
                w.nulls.len()
            ));
        }
        (0..len)
            .map(|i| w.nulls.get(i / 8).is_some_and(|b| b & (1 << (i % 8)) != 0))
            .collect()
    };
    Ok(Column { data, nulls })
}

pub fn batch_to_wire(b: &Batch) -> v1::Batch {
    v1::Batch {
        fields: b
            .fields
            .iter()
            .map(|f| v1::Field {
                name: f.name.clone(),
                r#type: Some(data_type_to_wire(f.data_type)),
            })
            .collect(),
        columns: b.columns.iter().map(column_to_wire).collect(),
    }
}

pub fn batch_from_wire(b: v1::Batch) -> R<Batch> {
    if b.fields.len() != b.columns.len() {
        return err(format!(
            "batch has {} fields but {} columns",
            b.fields.len(),
            b.columns.len()
        ));
    }
    let fields = b
        .fields
        .iter()
        .map(|f| {
            Ok(Field::new(
                f.name.clone(),
                data_type_from_wire(f.r#type.as_ref())?,
            ))
        })
        .collect::<R<Vec<_>>>()?;
    let columns = b
        .columns
        .into_iter()
        .map(column_from_wire)
        .collect::<R<Vec<_>>>()?;
    if columns.windows(2).any(|w| w[0].len() != w[1].len()) {
        return err("batch columns differ in length");
    }
    Ok(Batch { fields, columns })
}

// ---------- schemas and options ----------

pub fn column_defs_to_wire(c: &[ColumnDef]) -> Vec<v1::ColumnDef> {
    c.iter()
        .map(|c| {
            let spec = c.codec.clone().unwrap_or_default();
            v1::ColumnDef {
                name: c.name.clone(),
                r#type: Some(data_type_to_wire(c.data_type)),
                encode: spec.encode.unwrap_or_default(),
                compress: spec.compress.unwrap_or_default(),
                level: spec.level.unwrap_or_default(),
            }
        })
        .collect()
}

pub fn column_defs_from_wire(c: &[v1::ColumnDef]) -> R<Vec<ColumnDef>> {
    c.iter()
        .map(|c| {
            let mut d = ColumnDef::new(c.name.clone(), data_type_from_wire(c.r#type.as_ref())?);
            let part = |s: &str| (!s.is_empty()).then(|| s.to_string());
            if !(c.encode.is_empty() && c.compress.is_empty() && c.level.is_empty()) {
                d.codec = Some(tidal_common::ColumnCodecSpec {
                    encode: part(&c.encode),
                    compress: part(&c.compress),
                    level: part(&c.level),
                });
            }
            Ok(d)
        })
        .collect()
}

pub fn schema_to_wire(s: &StableSchema) -> v1::StableSchema {
    v1::StableSchema {
        db: s.db.clone(),
        name: s.name.clone(),
        version: s.version.0,
        columns: column_defs_to_wire(&s.columns),
        tags: column_defs_to_wire(&s.tags),
    }
}

pub fn schema_from_wire(s: &v1::StableSchema) -> R<StableSchema> {
    Ok(StableSchema {
        db: s.db.clone(),
        name: s.name.clone(),
        version: SchemaVersion(s.version),
        columns: column_defs_from_wire(&s.columns)?,
        tags: column_defs_from_wire(&s.tags)?,
    })
}

pub fn options_to_wire(o: &DbOptions) -> v1::DbOptions {
    v1::DbOptions {
        vgroups: o.vgroups,
        replica: o.replica,
        precision: o.precision.as_str().to_string(),
        duration_minutes: o.duration_minutes,
        keep_minutes: o.keep_minutes,
        buffer_mb: o.buffer_mb,
        wal_level: o.wal_level as u32,
        wal_fsync_period_ms: o.wal_fsync_period_ms,
        cache_model: o.cache_model.clone(),
        cache_size_mb: o.cache_size_mb,
        stt_trigger: o.stt_trigger,
        minrows: o.minrows,
        maxrows: o.maxrows,
        comp: o.comp as u32,
    }
}

pub fn options_from_wire(o: Option<&v1::DbOptions>) -> R<DbOptions> {
    let Some(o) = o else {
        return err("missing database options");
    };
    let Some(precision) = Precision::parse(&o.precision) else {
        return err(format!("unknown precision '{}'", o.precision));
    };
    Ok(DbOptions {
        vgroups: o.vgroups,
        replica: o.replica,
        precision,
        duration_minutes: o.duration_minutes,
        keep_minutes: o.keep_minutes,
        buffer_mb: o.buffer_mb,
        wal_level: u8::try_from(o.wal_level)
            .map_err(|_| WireError(format!("wal_level {} out of range", o.wal_level)))?,
        wal_fsync_period_ms: o.wal_fsync_period_ms,
        cache_model: o.cache_model.clone(),
        cache_size_mb: o.cache_size_mb,
        stt_trigger: o.stt_trigger,
        minrows: o.minrows,
        maxrows: o.maxrows,
        comp: u8::try_from(o.comp)
            .map_err(|_| WireError(format!("comp {} out of range", o.comp)))?,
    })
}

pub fn range_of(v: &v1::VgroupInfo) -> HashRange {
    HashRange {
        begin: v.hash_begin,
        end: v.hash_end,
    }
}

pub fn table_meta_to_wire(m: &TableMeta) -> v1::TableMeta {
    v1::TableMeta {
        uid: m.uid.0,
        name: m.name.clone(),
        stable: m.stable.clone(),
        tags: m.tags.iter().map(value_to_wire).collect(),
    }
}

pub fn table_meta_from_wire(m: &v1::TableMeta) -> TableMeta {
    TableMeta {
        uid: TableUid(m.uid),
        name: m.name.clone(),
        stable: m.stable.clone(),
        tags: m.tags.iter().map(value_from_wire).collect(),
    }
}

// ---------- writes ----------

pub fn write_to_wire(b: &WriteBatch) -> v1::WriteRequest {
    v1::WriteRequest {
        db: b.db.clone(),
        vgroup_id: b.vgroup.0,
        schemas: b.schemas.iter().map(schema_to_wire).collect(),
        tables: b
            .tables
            .iter()
            .map(|t| v1::TableWrite {
                table: t.table.clone(),
                stable: t.stable.clone(),
                has_tags: t.tags.is_some(),
                tags: t
                    .tags
                    .as_ref()
                    .map(|v| v.iter().map(value_to_wire).collect())
                    .unwrap_or_default(),
                columns: t.columns.iter().map(column_to_wire).collect(),
            })
            .collect(),
        blocks: b
            .blocks
            .iter()
            .map(|x| row_block_to_wire(x, |_| true))
            .collect(),
    }
}

/// A [`RowBlock`] on the wire; subtable i's tags are sent only when `send_tags(name)` (a
/// sender that knows a subtable exists leaves its tags out).
pub fn row_block_to_wire(b: &RowBlock, send_tags: impl FnMut(&str) -> bool) -> v1::RowBlock {
    let (names, ends) = b.names();
    let sent = tags_sent(b, send_tags);
    v1::RowBlock {
        stable: b.stable().to_string(),
        names: names.as_bytes().to_vec(),
        name_ends: ends.to_vec(),
        tagged: sent.iter().map(|(i, _)| *i).collect(),
        tags: sent
            .iter()
            .map(|(_, t)| v1::TagValues {
                values: t.iter().map(value_to_wire).collect(),
            })
            .collect(),
        run_tables: b.runs().iter().map(|r| r.0).collect(),
        run_rows: b.runs().iter().map(|r| r.1).collect(),
        columns: b.columns().iter().map(column_to_wire).collect(),
    }
}

/// The subtables of `b` with tags that `send_tags` says to send (`RowBlock.tagged`), with
/// their tags, asked once each in order.
pub(crate) fn tags_sent<'a>(
    b: &'a RowBlock,
    mut send_tags: impl FnMut(&str) -> bool,
) -> Vec<(u32, &'a [Value])> {
    (0..b.num_tables())
        .filter_map(|i| Some((i, b.tags(i)?)))
        .filter(|(i, _)| send_tags(b.table(*i)))
        .map(|(i, t)| (i as u32, t))
        .collect()
}

pub fn row_block_from_wire(w: v1::RowBlock) -> R<RowBlock> {
    let stable = w.stable;
    let fail = |what: String| WireError(format!("rows of STABLE {stable}: {what}"));
    let names =
        String::from_utf8(w.names).map_err(|_| fail("the subtable names are not UTF-8".into()))?;
    if w.tagged.len() != w.tags.len() {
        return Err(fail(format!(
            "{} tagged subtables but {} tag lists",
            w.tagged.len(),
            w.tags.len()
        )));
    }
    if w.run_tables.len() != w.run_rows.len() {
        return Err(fail(format!(
            "{} run subtables but {} run lengths",
            w.run_tables.len(),
            w.run_rows.len()
        )));
    }
    let mut tags: Vec<Option<tidal_common::Tags>> = vec![None; w.name_ends.len()];
    let mut prev: Option<u32> = None;
    for (i, t) in w.tagged.iter().zip(w.tags) {
        if prev.is_some_and(|p| p >= *i) {
            return Err(fail(format!("tagged subtable {i} is out of order")));
        }
        prev = Some(*i);
        let Some(slot) = tags.get_mut(*i as usize) else {
            return Err(fail(format!(
                "tags for subtable {i} of {}",
                w.name_ends.len()
            )));
        };
        *slot = Some(t.values.into_iter().map(value_from_wire_owned).collect());
    }
    let columns = w
        .columns
        .into_iter()
        .map(column_from_wire)
        .collect::<R<Vec<_>>>()
        .map_err(|e| fail(e.0))?;
    let runs = w.run_tables.into_iter().zip(w.run_rows).collect();
    RowBlock::from_parts(RowBlockParts {
        stable: stable.clone(),
        names,
        ends: w.name_ends,
        tags,
        runs,
        columns,
    })
    .map_err(fail)
}

pub fn write_from_wire(r: v1::WriteRequest) -> R<WriteBatch> {
    let schemas = r
        .schemas
        .iter()
        .map(schema_from_wire)
        .collect::<R<Vec<_>>>()?;
    let tables = r
        .tables
        .into_iter()
        .map(|t| {
            let columns = t
                .columns
                .into_iter()
                .map(column_from_wire)
                .collect::<R<Vec<_>>>()
                .map_err(|e| WireError(format!("table {}: {}", t.table, e.0)))?;
            Ok(TableWrite {
                table: t.table,
                stable: t.stable,
                tags: t
                    .has_tags
                    .then(|| t.tags.into_iter().map(value_from_wire_owned).collect()),
                columns,
            })
        })
        .collect::<R<Vec<_>>>()?;
    let blocks = r
        .blocks
        .into_iter()
        .map(row_block_from_wire)
        .collect::<R<Vec<_>>>()?;
    Ok(WriteBatch {
        db: r.db,
        vgroup: VgroupId(r.vgroup_id),
        schemas,
        tables,
        blocks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// VnodeStats took a VnodeRef before it took a VnodeStatsRequest: each decodes as the
    /// other, so frontends and data nodes of either version keep talking.
    #[test]
    fn vnode_stats_request_is_wire_compatible_with_vnode_ref() {
        use prost::Message;
        let old = v1::VnodeRef {
            db: "iot".into(),
            vgroup_id: 7,
        };
        let new = v1::VnodeStatsRequest::decode(old.encode_to_vec().as_slice()).unwrap();
        assert_eq!((new.db.as_str(), new.vgroup_id), ("iot", 7));
        assert_eq!(new.distribution_of, None);
        let asked = v1::VnodeStatsRequest {
            distribution_of: Some(v1::DistributionOf {
                table: "readings".into(),
                stable: true,
            }),
            ..new
        };
        let seen_by_old = v1::VnodeRef::decode(asked.encode_to_vec().as_slice()).unwrap();
        assert_eq!(seen_by_old, old);
    }

    /// Every kind of value comes back from the wire as it went, borrowed or owned.
    #[test]
    fn values_round_trip_borrowed_and_owned() {
        for v in [
            Value::Null,
            Value::Bool(false),
            Value::Bool(true),
            Value::Int(-7),
            Value::UInt(u64::MAX),
            Value::Float(-0.5),
            Value::Str(String::new()),
            Value::Str("truck_7".into()),
            Value::Timestamp(1_451_606_400_000),
        ] {
            assert_eq!(value_from_wire(&value_to_wire(&v)), v);
            assert_eq!(value_from_wire_owned(value_to_wire(&v)), v);
        }
        assert_eq!(value_from_wire_owned(v1::Value { v: None }), Value::Null);
    }

    #[test]
    fn column_round_trip_with_nulls() {
        let mut c = Column::empty(DataType::Double, 10);
        for i in 0..10 {
            if i % 3 == 0 {
                c.push(&Value::Null);
            } else {
                c.push(&Value::Float(i as f64));
            }
        }
        let back = column_from_wire(column_to_wire(&c)).expect("decodes");
        assert_eq!(back, c);
    }

    fn column_of(t: DataType, values: &[Value]) -> Column {
        let mut c = Column::empty(t, values.len());
        for v in values {
            c.push(v);
        }
        c
    }

    #[test]
    fn numeric_columns_go_fixed_width_and_both_forms_decode() {
        let f = column_of(
            DataType::Double,
            &[Value::Float(-0.5), Value::Null, Value::Float(f64::MAX)],
        );
        let i = column_of(DataType::BigInt, &[Value::Int(i64::MIN), Value::Int(7)]);
        let u = column_of(DataType::UBigInt, &[Value::UInt(u64::MAX)]);
        let t = column_of(DataType::Timestamp, &[Value::Timestamp(-1)]);
        for c in [&f, &i, &u, &t] {
            let w = column_to_wire(c);
            assert_eq!(w.fixed.len(), c.len() * 8);
            assert!(w.ints.is_empty() && w.uints.is_empty() && w.floats.is_empty());
            assert_eq!(&column_from_wire(w).expect("decodes"), c);
        }
        // The varint form (older writers) still decodes.
        let w = v1::Column {
            kind: 5,
            ints: vec![3, -4],
            len: 2,
            ..Default::default()
        };
        let back = column_from_wire(w).expect("decodes");
        assert_eq!(back.data, ColumnData::Timestamp(vec![3, -4]));
    }

    #[test]
    fn malformed_fixed_columns_are_errors() {
        let good = column_to_wire(&column_of(
            DataType::Double,
            &[Value::Float(1.0), Value::Float(2.0)],
        ));
        let short = v1::Column {
            fixed: good.fixed.slice(..15),
            ..good.clone()
        };
        let e = column_from_wire(short).expect_err("15 bytes for 2 values");
        assert!(e.0.contains("2 values but carries 15 fixed bytes"), "{e}");
        let twice = v1::Column {
            floats: vec![1.0, 2.0],
            ..good.clone()
        };
        assert!(column_from_wire(twice)
            .expect_err("both forms")
            .0
            .contains("twice"));
        let strs = v1::Column {
            kind: 4,
            strs: vec!["a".into(), "b".into()],
            ..good.clone()
        };
        assert!(column_from_wire(strs)
            .expect_err("fixed on strings")
            .0
            .contains("kind 4"));
        let huge = v1::Column {
            len: u32::MAX,
            ..good
        };
        assert!(column_from_wire(huge).is_err());
    }

    #[test]
    fn malformed_column_is_an_error() {
        let w = v1::Column {
            kind: 3,
            floats: vec![1.0],
            len: 2,
            ..Default::default()
        };
        assert!(column_from_wire(w).is_err());
        let w = v1::Column {
            kind: 99,
            ..Default::default()
        };
        assert!(column_from_wire(w).is_err());
    }

    #[test]
    fn row_block_round_trip_and_tag_omission() {
        let mut b = RowBlock::new("st", &[DataType::Timestamp, DataType::Double]);
        let t0 = b.add_table("t0", Some(vec![Value::Str("x".into())]));
        let t1 = b.add_table("t1", Some(vec![Value::Null]));
        b.push_row(t0, &[Value::Timestamp(1), Value::Null]);
        b.push_row(t1, &[Value::Timestamp(2), Value::Float(2.0)]);
        b.push_row(t0, &[Value::Timestamp(3), Value::Float(3.0)]);
        let back = row_block_from_wire(row_block_to_wire(&b, |_| true)).expect("decodes");
        assert_eq!(back, b);
        let w = row_block_to_wire(&b, |n| n != "t0");
        assert_eq!(w.tagged, vec![1]);
        let back = row_block_from_wire(w).expect("decodes");
        assert_eq!(back.tags(0), None);
        assert_eq!(back.tags(1), Some(&[Value::Null][..]));
    }

    #[test]
    fn malformed_row_blocks_are_errors() {
        let mut b = RowBlock::new("st", &[DataType::Timestamp]);
        let t = b.add_table("t", None);
        b.push_row(t, &[Value::Timestamp(1)]);
        let good = row_block_to_wire(&b, |_| true);
        let cases = [
            v1::RowBlock {
                names: vec![0xff],
                ..good.clone()
            },
            v1::RowBlock {
                run_rows: vec![2],
                ..good.clone()
            },
            v1::RowBlock {
                run_rows: vec![],
                ..good.clone()
            },
            v1::RowBlock {
                run_tables: vec![1],
                ..good.clone()
            },
            v1::RowBlock {
                name_ends: vec![5],
                ..good.clone()
            },
            v1::RowBlock {
                tagged: vec![3],
                tags: vec![v1::TagValues::default()],
                ..good.clone()
            },
        ];
        for c in cases {
            let e = row_block_from_wire(c.clone()).expect_err("malformed");
            assert!(e.0.contains("STABLE st"), "{e}");
        }
    }

    #[test]
    fn status_carries_code() {
        let s = status_error(StatusCode::WrongVgroup, "table t is not in vgroup 3");
        assert_eq!(code_of(&s), StatusCode::WrongVgroup);
        assert!(code_of(&s).is_stale_route());
    }
}
