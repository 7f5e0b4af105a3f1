//! The HTTP API, InfluxDB-compatible so that Telegraf and the InfluxDB client libraries write
//! unchanged. Any server role started with `--http ADDR` serves it; `tidal local` serves it on
//! 127.0.0.1:6041 by default.
//!
//! - `POST /write?db=NAME&precision=ns|u|us|ms|s|m|h` (InfluxDB 1.x) and
//!   `POST /api/v2/write?bucket=NAME&precision=..` (2.x; `org` is ignored, `bucket` may be
//!   `db/retention_policy` and the policy is ignored): line protocol, plain or
//!   `Content-Encoding: gzip`, written schemaless ([`crate::frontend::schemaless`]).
//!   204 when every line was written; 400 with `{"error": ...}` listing the rejected lines when
//!   some were not (the good lines are written); 404 with InfluxDB's "database not found"
//!   for an unknown database; 413 when the body (before or after decompression) exceeds
//!   [`HttpLimits::body_bytes_max`].
//! - `GET|POST /query?q=..` (InfluxDB 1.x): `CREATE DATABASE`, `DROP DATABASE` and
//!   `SHOW DATABASES` in InfluxQL, answered in InfluxDB's JSON shape ([`influxql`]).
//! - `GET|HEAD /ping` → 204, `GET /health` → 200 with a JSON status, as InfluxDB answers.
//! - `POST /rest/sql[/{db}]`: one SQL statement, answered as TDengine's REST API ([`rest`]).
//! - `GET /metrics`: the cluster's counters in Prometheus text format ([`metrics`]).
//!
//! Invariants: no handler panics on request data (every failure is an HTTP status with a JSON
//! message); request bodies and the number of writes in progress are bounded, and a write
//! that cannot start within [`WRITE_QUEUE_WAIT_MS`] gets 503 instead of queueing forever.

pub mod auth;
mod influxql;
pub mod metrics;
pub mod rest;

use crate::frontend::schemaless::{Schemaless, SchemalessOptions, SchemalessOutcome};
use crate::frontend::ExecError;
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use std::collections::HashMap;
use std::io::Read;
use std::sync::Arc;
use std::time::Duration;
use tidal_client::Client;
use tidal_lineproto::Precision;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// Default largest request body, compressed and decompressed (InfluxDB's default
/// `max-body-size` is 25 MB; Telegraf and client-library batches are far smaller).
pub const BODY_BYTES_MAX: usize = 32 << 20;
/// Default number of writes processed at once; more wait (see [`WRITE_QUEUE_WAIT_MS`]).
/// With [`BODY_BYTES_MAX`] this bounds request memory to about 16 × (32 MiB raw + 32 MiB
/// decompressed + the parsed rows), which a server can afford, while 16 parallel bodies
/// already keep every vgroup busy.
pub const WRITES_IN_FLIGHT_MAX: usize = 16;
/// How long a write waits for a slot before it is refused with 503.
pub const WRITE_QUEUE_WAIT_MS: u64 = 10_000;
/// How many rejected lines a 400 response lists in its message.
const ERRORS_LISTED_MAX: usize = 20;

/// Bounds of the HTTP API.
#[derive(Clone, Copy, Debug)]
pub struct HttpLimits {
    pub body_bytes_max: usize,
    pub writes_in_flight_max: usize,
    /// Longest statement `POST /rest/sql` accepts.
    pub sql_bytes_max: usize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            body_bytes_max: BODY_BYTES_MAX,
            writes_in_flight_max: WRITES_IN_FLIGHT_MAX,
            sql_bytes_max: rest::SQL_BYTES_MAX,
        }
    }
}

struct AppState {
    client: Client,
    schemaless: Schemaless,
    limits: HttpLimits,
    writes: Semaphore,
}

/// An HTTP error response: status plus a JSON body `{"error": message}` (with `code` and
/// `message` too, which the InfluxDB 2.x clients read).
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
    lines: Vec<serde_json::Value>,
}

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            lines: Vec::new(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = match self.status {
            StatusCode::NOT_FOUND => "not found",
            StatusCode::PAYLOAD_TOO_LARGE => "request too large",
            StatusCode::SERVICE_UNAVAILABLE => "unavailable",
            s if s.is_server_error() => "internal error",
            _ => "invalid",
        };
        let mut body = serde_json::json!({
            "error": self.message,
            "code": code,
            "message": self.message,
        });
        if !self.lines.is_empty() {
            body["line_errors"] = serde_json::Value::Array(self.lines);
        }
        let mut resp = (self.status, axum::Json(body)).into_response();
        resp.headers_mut().insert(
            header::HeaderName::from_static("x-influxdb-error"),
            HeaderValue::from_str(&self.message.replace(['\n', '\r'], " "))
                .unwrap_or_else(|_| HeaderValue::from_static("error")),
        );
        resp
    }
}

impl From<ExecError> for ApiError {
    fn from(e: ExecError) -> ApiError {
        use tidal_common::StatusCode as C;
        let status = match e.code {
            C::DatabaseNotFound => StatusCode::NOT_FOUND,
            C::Unauthenticated | C::TokenExpired => StatusCode::UNAUTHORIZED,
            C::PermissionDenied => StatusCode::FORBIDDEN,
            C::Unavailable | C::Timeout | C::NoDnodes | C::VnodeNotFound | C::WrongVgroup => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            C::InvalidArgument
            | C::SchemaMismatch
            | C::TypeMismatch
            | C::StableNotFound
            | C::TableNotFound
            | C::ColumnNotFound => StatusCode::BAD_REQUEST,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError::new(status, e.message)
    }
}

/// The router (exposed for in-process tests).
pub fn router(client: Client, limits: HttpLimits) -> Router {
    let state = Arc::new(AppState {
        client: client.clone(),
        schemaless: Schemaless::new(client.clone()),
        limits,
        writes: Semaphore::new(limits.writes_in_flight_max.max(1)),
    });
    Router::new()
        .route("/write", post(write_v1))
        .route("/api/v2/write", post(write_v2))
        .route("/query", get(influxql::query).post(influxql::query))
        .route("/ping", get(ping).head(ping))
        .route("/health", get(health))
        .route("/rest/sql", post(rest::sql))
        .route("/rest/sql/{db}", post(rest::sql_in_db))
        .route("/metrics", get(metrics::metrics))
        .fallback(not_found)
        .with_state(state)
        // Outermost: every route (but /ping and /health) needs credentials; see auth.rs.
        .layer(axum::middleware::from_fn_with_state(
            auth::HttpAuth::new(client),
            auth::require_auth,
        ))
}

/// Binds `addr` and returns the listener and the bound address (so `:0` works).
pub async fn bind(addr: &str) -> Result<(TcpListener, String), crate::server::BoxError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| {
            format!("cannot listen for HTTP on {addr}: {e} (choose another with --http ADDR, or --http off)")
        })?;
    let bound = listener.local_addr()?.to_string();
    Ok((listener, bound))
}

/// Serves the API on `listener` until `shutdown` resolves (TLS and connection limit from
/// `security`). `client` must be a forwarding client: each request's calls carry its user's
/// token (see auth.rs).
pub async fn serve(
    listener: TcpListener,
    client: Client,
    limits: HttpLimits,
    security: auth::HttpSecurity,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    crate::server::net::serve_http(
        listener,
        router(client, limits),
        security.tls,
        security.limit,
        shutdown,
    )
    .await
}

/// Binds `addr`, prints `ready http <addr>`, and serves in a background task until the
/// process receives SIGINT/SIGTERM.
pub async fn start(
    addr: &str,
    client: Client,
    security: auth::HttpSecurity,
) -> Result<String, crate::server::BoxError> {
    let (listener, bound) = bind(addr).await?;
    crate::server::announce("http", &bound);
    tokio::spawn(async move {
        if let Err(e) = serve(
            listener,
            client,
            HttpLimits::default(),
            security,
            crate::server::shutdown_signal(),
        )
        .await
        {
            tracing::error!(%e, "HTTP server failed");
        }
    });
    Ok(bound)
}

async fn ping() -> Response {
    let mut resp = StatusCode::NO_CONTENT.into_response();
    let h = resp.headers_mut();
    h.insert("x-influxdb-version", HeaderValue::from_static("1.8.10"));
    h.insert("x-influxdb-build", HeaderValue::from_static("OSS"));
    h.insert(
        "x-tidal-version",
        HeaderValue::from_static(env!("CARGO_PKG_VERSION")),
    );
    resp
}

async fn health() -> Response {
    axum::Json(serde_json::json!({
        "name": "tidal",
        "message": "ready for queries and writes",
        "status": "pass",
        "checks": [],
        "version": env!("CARGO_PKG_VERSION"),
    }))
    .into_response()
}

async fn not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not found: the API has POST /write, POST /api/v2/write, GET|POST /query, POST /rest/sql[/DB], GET /metrics, GET /ping and GET /health",
    )
}

async fn write_v1(
    State(st): State<Arc<AppState>>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let db = q
        .get("db")
        .filter(|d| !d.is_empty())
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "database is required: add ?db=NAME",
            )
        })?
        .clone();
    write(st, &db, &q, &headers, body).await
}

async fn write_v2(
    State(st): State<Arc<AppState>>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let bucket = q.get("bucket").filter(|d| !d.is_empty()).ok_or_else(|| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bucket is required: add ?bucket=NAME",
        )
    })?;
    // `db/rp` (the 1.x compatibility form): the retention policy is not a Tidal concept.
    let db = bucket.split('/').next().unwrap_or(bucket).to_string();
    write(st, &db, &q, &headers, body).await
}

async fn write(
    st: Arc<AppState>,
    db: &str,
    q: &HashMap<String, String>,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let precision = match q.get("precision").map(String::as_str) {
        None | Some("") => Precision::Nanos,
        Some(p) => Precision::parse(p).ok_or_else(|| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("invalid precision '{p}': use ns, u, us, ms, s, m or h"),
            )
        })?,
    };
    let limit = st.limits.body_bytes_max;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > limit as u64) {
        return Err(too_large(limit));
    }
    let _permit = tokio::time::timeout(
        Duration::from_millis(WRITE_QUEUE_WAIT_MS),
        st.writes.acquire(),
    )
    .await
    .map_err(|_| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "too many writes in progress ({}); retry later",
                st.limits.writes_in_flight_max
            ),
        )
    })?
    .map_err(|_| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "server is shutting down"))?;
    let encoding = headers
        .get(header::CONTENT_ENCODING)
        .map(|v| v.to_str().unwrap_or("?").trim().to_ascii_lowercase());
    // A plain body is parsed where it was received (no copy of up to `limit` bytes).
    let body = match encoding.as_deref() {
        None | Some("") | Some("identity") => read_body(body, declared, limit, false).await?,
        Some("gzip") => {
            let raw = read_body(body, declared, limit, true).await?;
            let raw = raw.0.into_iter().next().unwrap_or_default();
            let plain = tokio::task::spawn_blocking(move || gunzip(&raw, limit))
                .await
                .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))??;
            BodyParts(vec![plain.into()])
        }
        Some(other) => {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!("Content-Encoding '{other}' is not supported: send gzip or identity"),
            ))
        }
    };
    let opts = SchemalessOptions {
        precision,
        child_table_tag: q.get("child_table_tag").cloned().filter(|s| !s.is_empty()),
    };
    let outcome = st
        .schemaless
        .write(db, &body.slices(), &opts)
        .await
        .map_err(|e| write_error(db, e))?;
    if outcome.rejected == 0 {
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    Err(partial(outcome))
}

/// A failed write's answer. A missing database is said in InfluxDB's words, which Telegraf
/// looks for to create the database (through `/query`) and write again.
fn write_error(db: &str, e: ExecError) -> ApiError {
    if e.code == tidal_common::StatusCode::DatabaseNotFound {
        return ApiError::new(
            StatusCode::NOT_FOUND,
            format!(
                "database not found: {db:?} (create it with CREATE DATABASE, at POST /query \
                 or POST /rest/sql)"
            ),
        );
    }
    e.into()
}

/// A request body as the parts [`tidal_lineproto::parse_parts`] reads: a plain body left in
/// the frames it arrived in (their whole lines; a line split between frames, or everything
/// from a frame with a `"` on, gathered: see [`tidal_lineproto::BodyCutter`]), a gzip body
/// decompressed into one part.
#[derive(Debug)]
struct BodyParts(Vec<axum::body::Bytes>);

impl BodyParts {
    fn slices(&self) -> Vec<&[u8]> {
        self.0.iter().map(|b| &b[..]).collect()
    }
}

/// Reads a body of at most `limit` bytes: cut into parts (for a plain body), or, for
/// `gather`, the whole body as one part, gathered into a buffer sized by its Content-Length
/// (`declared`, already checked against the limit) when it has one, so that a large body is
/// copied once rather than regrown as its chunks arrive; a body that arrives as one chunk is
/// not copied at all.
async fn read_body(
    mut body: Body,
    declared: Option<u64>,
    limit: usize,
    gather: bool,
) -> Result<BodyParts, ApiError> {
    use http_body_util::BodyExt;
    let unreadable = |e: axum::Error| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("cannot read the request body: {e}"),
        )
    };
    let mut parts: Vec<axum::body::Bytes> = Vec::new();
    let mut cutter = tidal_lineproto::BodyCutter::default();
    let mut first: Option<axum::body::Bytes> = None;
    let mut whole = bytes::BytesMut::new();
    let mut len = 0usize;
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.map_err(unreadable)?.into_data() else {
            continue; // trailers
        };
        len = len.saturating_add(data.len());
        if len > limit {
            return Err(too_large(limit));
        }
        if gather {
            match first.take() {
                None if whole.is_empty() => first = Some(data),
                held => {
                    if let Some(held) = held {
                        whole.reserve(declared.map_or(0, |n| n as usize).max(len));
                        whole.extend_from_slice(&held);
                    }
                    whole.extend_from_slice(&data);
                }
            }
            continue;
        }
        cutter.push(&data, &mut |c| {
            parts.push(match c {
                tidal_lineproto::Cut::Piece(r) => data.slice(r),
                tidal_lineproto::Cut::Gathered(v) => v.into(),
            })
        });
    }
    if gather {
        parts.push(first.unwrap_or_else(|| whole.freeze()));
    } else {
        parts.extend(cutter.finish().map(axum::body::Bytes::from));
    }
    Ok(BodyParts(parts))
}

fn too_large(limit: usize) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("request body is larger than the limit of {limit} bytes: split the write"),
    )
}

/// Decompresses a gzip body, refusing to produce more than `limit` bytes (a small body can
/// expand enormously).
fn gunzip(raw: &[u8], limit: usize) -> Result<Vec<u8>, ApiError> {
    let mut out = Vec::with_capacity(raw.len().saturating_mul(4).min(limit));
    let mut dec = flate2::read::MultiGzDecoder::new(raw).take(limit as u64 + 1);
    dec.read_to_end(&mut out).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("cannot decompress the gzip body: {e}"),
        )
    })?;
    if out.len() > limit {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the decompressed body is larger than the limit of {limit} bytes: split the write"
            ),
        ));
    }
    Ok(out)
}

/// The 400 answer to a partly written body, in InfluxDB's words ("partial write").
fn partial(o: SchemalessOutcome) -> ApiError {
    let mut msg = format!(
        "partial write: {} line(s) rejected, {} row(s) written",
        o.rejected, o.rows
    );
    for e in o.errors.iter().take(ERRORS_LISTED_MAX) {
        msg.push_str(&format!("\n{e}"));
    }
    if o.rejected > ERRORS_LISTED_MAX {
        msg.push_str(&format!(
            "\n... and {} more",
            o.rejected - ERRORS_LISTED_MAX
        ));
    }
    ApiError {
        status: StatusCode::BAD_REQUEST,
        message: msg,
        lines: o
            .errors
            .iter()
            .map(|e| serde_json::json!({"line": e.line, "error": e.message}))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frontend::schemaless::LineError;
    use std::io::Write;

    fn gz(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn chunked(chunks: &[&'static [u8]]) -> Body {
        let parts: Vec<Result<axum::body::Bytes, std::io::Error>> = chunks
            .iter()
            .map(|c| Ok(axum::body::Bytes::from_static(c)))
            .collect();
        Body::from_stream(futures::stream::iter(parts))
    }

    /// A body read in parts or gathered is the bytes sent, and is held to the limit either
    /// way; in parts, a frame's whole lines stay in the frame (the same bytes, not a copy).
    #[test]
    fn bodies_are_read_whole_and_held_to_the_limit() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let cases: [(&[&'static [u8]], Option<u64>); 6] = [
                (&[b"m f=1\n"], Some(6)),
                (&[b"m f=1\n", b"m f=2\n", b"m f=3"], Some(17)),
                (&[b"m f=1\n", b"", b"m f=2"], None),
                // A Content-Length that lies either way changes nothing but the reservation.
                (&[b"m f=1\n", b"m f=2"], Some(2)),
                (&[b"", b"m f=1"], Some(50)),
                (&[b"m f=1\nm f", b"=2\nm f=\"a\n", b"b\" 3\n"], None),
            ];
            for (chunks, declared) in cases {
                let whole: Vec<u8> = chunks.concat();
                for gather in [false, true] {
                    let got = read_body(chunked(chunks), declared, 64, gather)
                        .await
                        .expect("read");
                    assert_eq!(got.slices().concat(), whole, "{chunks:?} {gather}");
                    if gather {
                        assert_eq!(got.0.len(), 1);
                    }
                }
            }
            let two = [b"m f=1\nm f=2\nm".as_slice(), b" f=3\nm f=4\n"];
            let got = read_body(chunked(&two), None, 64, false)
                .await
                .expect("read");
            let parts = got.slices();
            assert_eq!(parts, [&b"m f=1\nm f=2\n"[..], b"m f=3\n", b"m f=4\n"]);
            assert_eq!(parts[0].as_ptr(), two[0].as_ptr(), "left in its frame");
            let one = [b"m f=1\n".as_slice()];
            let got = read_body(chunked(&one), None, 64, true)
                .await
                .expect("read");
            assert_eq!(
                got.0[0].as_ptr(),
                one[0].as_ptr(),
                "one frame is not copied"
            );
            // Over the limit, whether the excess comes in the first chunk or a later one.
            for chunks in [
                &[b"0123456789abc".as_slice()][..],
                &[b"01234", b"56789", b"abc"],
            ] {
                for gather in [false, true] {
                    let e = read_body(chunked(chunks), None, 12, gather)
                        .await
                        .expect_err("too large");
                    assert_eq!(e.status, StatusCode::PAYLOAD_TOO_LARGE);
                    assert!(e.message.contains("limit of 12 bytes"), "{}", e.message);
                }
            }
            let exact = read_body(chunked(&[b"012345", b"789abc"]), None, 12, false).await;
            assert_eq!(
                exact.expect("at the limit").slices().concat(),
                b"012345789abc"
            );
        });
    }

    #[test]
    fn gunzip_is_bounded() {
        assert_eq!(gunzip(&gz(b"m f=1\n"), 100).unwrap(), b"m f=1\n");
        // A small body that expands past the limit is refused, not decompressed in full.
        let bomb = gz(&vec![0u8; 1 << 20]);
        assert!(bomb.len() < 16 << 10, "{}", bomb.len());
        let e = gunzip(&bomb, 1000).unwrap_err();
        assert_eq!(e.status, StatusCode::PAYLOAD_TOO_LARGE);
        assert!(
            e.message.contains("decompressed body is larger"),
            "{}",
            e.message
        );
        assert_eq!(gunzip(&bomb, 1 << 20).unwrap().len(), 1 << 20);
        let e = gunzip(b"plain text", 1000).unwrap_err();
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
    }

    #[test]
    fn partial_write_lists_lines_and_bounds_the_message() {
        let errors: Vec<LineError> = (1..=30)
            .map(|i| LineError {
                line: i,
                message: format!("bad {i}"),
            })
            .collect();
        let e = partial(SchemalessOutcome {
            rows: 5,
            rejected: 30,
            errors,
            fields: 0,
        });
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert!(e
            .message
            .starts_with("partial write: 30 line(s) rejected, 5 row(s) written\nline 1: bad 1\n"));
        assert!(
            e.message.ends_with("line 20: bad 20\n... and 10 more"),
            "{}",
            e.message
        );
        assert_eq!(e.lines.len(), 30);
    }

    #[test]
    fn cluster_errors_map_to_http_statuses() {
        use tidal_common::StatusCode as C;
        for (code, status) in [
            (C::DatabaseNotFound, StatusCode::NOT_FOUND),
            (C::Unavailable, StatusCode::SERVICE_UNAVAILABLE),
            (C::InvalidArgument, StatusCode::BAD_REQUEST),
            (C::StorageIo, StatusCode::INTERNAL_SERVER_ERROR),
        ] {
            assert_eq!(ApiError::from(ExecError::new(code, "x")).status, status);
        }
    }
}
