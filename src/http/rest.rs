//! `POST /rest/sql` and `POST /rest/sql/{db}`: one SQL statement per request (the body), run
//! through the client library as the shell runs it, answered in the shape of TDengine's REST
//! API 3.x so that its connectors and tools read it:
//!
//! - rows: `{"code":0,"column_meta":[["ts","TIMESTAMP",8],...],"data":[[...],...],"rows":N}`,
//!   TIMESTAMP values as RFC 3339 strings in UTC with the database's precision
//!   (`2016-01-01T00:00:00.000Z`), NULL as `null`;
//! - statements without rows: `{"code":0,"column_meta":[["affected_rows","INT",4]],
//!   "data":[[n]],"rows":1}`;
//! - failures: `{"code":<Tidal status code>,"desc":"<message>"}` with an HTTP status that says
//!   whose fault it is (400 bad statement, 404 unknown database or table, 413 too long,
//!   503 cluster unavailable, 500 otherwise).

use super::AppState;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use tidal_client::StatementResult;
use tidal_common::{Batch, DataType, Precision, StatusCode as Code, Value};

/// Default longest statement accepted, in bytes (TDengine's maximum SQL length is 1 MB).
pub const SQL_BYTES_MAX: usize = 1 << 20;

/// A failed statement in TDengine's error shape.
#[derive(Debug)]
pub struct RestError {
    pub status: StatusCode,
    pub code: Code,
    pub desc: String,
}

impl RestError {
    fn new(status: StatusCode, code: Code, desc: impl Into<String>) -> RestError {
        RestError {
            status,
            code,
            desc: desc.into(),
        }
    }

    fn bad_request(desc: impl Into<String>) -> RestError {
        RestError::new(StatusCode::BAD_REQUEST, Code::InvalidArgument, desc)
    }
}

impl IntoResponse for RestError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({"code": self.code.as_u32(), "desc": self.desc});
        (self.status, axum::Json(body)).into_response()
    }
}

impl From<tidal_client::ClientError> for RestError {
    fn from(e: tidal_client::ClientError) -> RestError {
        RestError::new(http_status(e.code), e.code, e.message)
    }
}

/// The HTTP status for a statement that failed with `code`.
fn http_status(code: Code) -> StatusCode {
    match code {
        Code::DatabaseNotFound | Code::StableNotFound | Code::TableNotFound => {
            StatusCode::NOT_FOUND
        }
        Code::Unavailable | Code::Timeout | Code::NoDnodes | Code::VnodeNotFound => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
        Code::Unauthenticated | Code::TokenExpired => StatusCode::UNAUTHORIZED,
        Code::PermissionDenied => StatusCode::FORBIDDEN,
        Code::Internal | Code::Corruption | Code::StorageIo | Code::Ok => {
            StatusCode::INTERNAL_SERVER_ERROR
        }
        // Everything else is about the statement: syntax, names, types, options.
        _ => StatusCode::BAD_REQUEST,
    }
}

/// `POST /rest/sql`: the statement runs with no current database.
pub(super) async fn sql(
    State(st): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    run(&st, "", &headers, body).await
}

/// `POST /rest/sql/{db}`: `db` is the statement's current database, as after `USE db`.
pub(super) async fn sql_in_db(
    State(st): State<Arc<AppState>>,
    Path(db): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    run(&st, &db, &headers, body).await
}

async fn run(st: &AppState, db: &str, headers: &HeaderMap, body: Body) -> Response {
    match execute(st, db, headers, body).await {
        Ok(r) => axum::Json(to_json(&r)).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn execute(
    st: &AppState,
    db: &str,
    headers: &HeaderMap,
    body: Body,
) -> Result<StatementResult, RestError> {
    let limit = st.limits.sql_bytes_max;
    let too_long = || {
        RestError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            Code::InvalidArgument,
            format!("the statement is longer than the limit of {limit} bytes"),
        )
    };
    if let Some(len) = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
    {
        if len > limit as u64 {
            return Err(too_long());
        }
    }
    let raw = axum::body::to_bytes(body, limit).await.map_err(|e| {
        let is_limit = std::error::Error::source(&e)
            .is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
        if is_limit {
            too_long()
        } else {
            RestError::bad_request(format!("cannot read the request body: {e}"))
        }
    })?;
    let text = std::str::from_utf8(&raw).map_err(|e| {
        RestError::bad_request(format!(
            "the statement is not valid UTF-8 (at byte {})",
            e.valid_up_to()
        ))
    })?;
    let stmts = crate::shell::split_statements(text);
    let sql = match stmts.as_slice() {
        [] => {
            return Err(RestError::bad_request(
                "the request body is empty: send one SQL statement",
            ))
        }
        [one] => one.sql.as_str(),
        many => {
            return Err(RestError::bad_request(format!(
                "the request body holds {} statements: send one per request",
                many.len()
            )))
        }
    };
    Ok(st.client.execute(sql, db).await?)
}

/// TDengine's name and byte length of a column type.
fn type_meta(t: DataType) -> (&'static str, u32) {
    (t.sql_name(), t.byte_len())
}

/// An epoch value as RFC 3339 in UTC with as many fraction digits as `precision` has.
pub fn rfc3339(t: i64, precision: Precision) -> String {
    // `format_timestamp` is `YYYY-MM-DD HH:MM:SS.fff`: only the separator and zone differ.
    format!("{}Z", precision.format_timestamp(t).replacen(' ', "T", 1))
}

fn json_value(v: &Value, precision: Precision) -> serde_json::Value {
    use serde_json::Value as J;
    match v {
        Value::Null => J::Null,
        Value::Bool(b) => J::Bool(*b),
        Value::Int(i) => J::from(*i),
        Value::UInt(u) => J::from(*u),
        // JSON has no NaN or infinity: those are sent as null.
        Value::Float(f) => serde_json::Number::from_f64(*f).map_or(J::Null, J::Number),
        Value::Str(s) => J::String(s.clone()),
        Value::Timestamp(t) => J::String(rfc3339(*t, precision)),
    }
}

/// The body of a successful answer.
pub fn to_json(r: &StatementResult) -> serde_json::Value {
    match &r.batch {
        Some(b) => rows_json(b, r.precision),
        None => serde_json::json!({
            "code": 0,
            "column_meta": [["affected_rows", "INT", 4]],
            "data": [[r.affected_rows]],
            "rows": 1,
        }),
    }
}

fn rows_json(b: &Batch, precision: Precision) -> serde_json::Value {
    let meta: Vec<serde_json::Value> = b
        .fields
        .iter()
        .map(|f| {
            let (name, len) = type_meta(f.data_type);
            serde_json::json!([f.name, name, len])
        })
        .collect();
    let data: Vec<serde_json::Value> = (0..b.num_rows())
        .map(|i| {
            serde_json::Value::Array(b.row(i).iter().map(|v| json_value(v, precision)).collect())
        })
        .collect();
    serde_json::json!({
        "code": 0,
        "column_meta": meta,
        "data": data,
        "rows": b.num_rows(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tidal_common::Field;

    #[test]
    fn timestamps_are_rfc3339_in_the_precision() {
        assert_eq!(
            rfc3339(1_451_606_400_123, Precision::Millis),
            "2016-01-01T00:00:00.123Z"
        );
        assert_eq!(
            rfc3339(1_451_606_400_000_001, Precision::Micros),
            "2016-01-01T00:00:00.000001Z"
        );
        assert_eq!(
            rfc3339(-1, Precision::Nanos),
            "1969-12-31T23:59:59.999999999Z"
        );
    }

    #[test]
    fn rows_and_affected_rows_have_tdengine_shape() {
        let fields = vec![
            Field::new("ts", DataType::Timestamp),
            Field::new("v", DataType::Double),
            Field::new("name", DataType::VarChar(16)),
        ];
        let batch = Batch::from_rows(
            fields,
            &[
                vec![
                    Value::Timestamp(0),
                    Value::Float(1.5),
                    Value::Str("a".into()),
                ],
                vec![Value::Timestamp(1), Value::Null, Value::Str("b".into())],
                vec![Value::Timestamp(2), Value::Float(f64::NAN), Value::Null],
            ],
        );
        let r = StatementResult {
            batch: Some(batch),
            affected_rows: 2,
            precision: Precision::Millis,
            db: String::new(),
        };
        let j = to_json(&r);
        assert_eq!(
            j["column_meta"],
            serde_json::json!([
                ["ts", "TIMESTAMP", 8],
                ["v", "DOUBLE", 8],
                ["name", "VARCHAR", 16]
            ])
        );
        assert_eq!(j["rows"], 3);
        assert_eq!(
            j["data"][0],
            serde_json::json!(["1970-01-01T00:00:00.000Z", 1.5, "a"])
        );
        assert_eq!(j["data"][1][1], serde_json::Value::Null);
        assert_eq!(
            j["data"][2],
            serde_json::json!(["1970-01-01T00:00:00.002Z", null, null])
        );
        let none = StatementResult {
            batch: None,
            affected_rows: 3,
            ..r
        };
        assert_eq!(
            to_json(&none),
            serde_json::json!({"code":0,"column_meta":[["affected_rows","INT",4]],"data":[[3]],"rows":1})
        );
    }

    /// A state whose client is never reached (every request here fails before it runs).
    fn state(sql_bytes_max: usize) -> AppState {
        let client = tidal_client::Client::new_lazy("127.0.0.1:1", Default::default()).unwrap();
        AppState {
            client: client.clone(),
            schemaless: crate::frontend::schemaless::Schemaless::new(client),
            limits: super::super::HttpLimits {
                sql_bytes_max,
                ..Default::default()
            },
            writes: tokio::sync::Semaphore::new(1),
        }
    }

    #[tokio::test]
    async fn bodies_are_bounded_even_without_a_length() {
        let st = state(16);
        // Streamed in pieces, no Content-Length: the limit applies while reading.
        let chunks: Vec<Result<axum::body::Bytes, std::io::Error>> = (0..5)
            .map(|_| Ok(axum::body::Bytes::from_static(b"SELECT ")))
            .collect();
        let body = Body::from_stream(futures::stream::iter(chunks));
        let e = execute(&st, "", &HeaderMap::new(), body).await.unwrap_err();
        assert_eq!(e.status, StatusCode::PAYLOAD_TOO_LARGE);
        assert!(e.desc.contains("limit of 16 bytes"), "{}", e.desc);
        // A declared length over the limit is refused before reading.
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_LENGTH, "17".parse().unwrap());
        let e = execute(&st, "", &h, Body::empty()).await.unwrap_err();
        assert_eq!(e.status, StatusCode::PAYLOAD_TOO_LARGE);
        // Not one statement.
        for (text, want) in [(" ;; ", "empty"), ("a; b", "2 statements")] {
            let e = execute(&st, "", &HeaderMap::new(), Body::from(text))
                .await
                .unwrap_err();
            assert_eq!(e.status, StatusCode::BAD_REQUEST);
            assert!(e.desc.contains(want), "{}", e.desc);
        }
    }

    #[test]
    fn errors_map_to_statuses() {
        assert_eq!(http_status(Code::SyntaxError), StatusCode::BAD_REQUEST);
        assert_eq!(http_status(Code::TableNotFound), StatusCode::NOT_FOUND);
        assert_eq!(
            http_status(Code::Unavailable),
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(
            http_status(Code::StorageIo),
            StatusCode::INTERNAL_SERVER_ERROR
        );
    }
}
