//! Streaming query results ([`ResultStream`], from [`Client::query_stream`]): the rows of a
//! statement arrive in batches over `Sql.ExecuteStream` while the cluster produces them. The
//! server holds a bounded number of batches for a scan or projection, so reading slowly holds
//! the query back instead of making any node buffer the result.

use crate::{Client, ClientError, StatementResult};
use tidal_common::{Batch, Field, Precision, StatusCode};
use tidal_proto::convert::{batch_from_wire, data_type_from_wire};
use tidal_proto::v1::{self, result_batch::Part};

/// The result of one statement as a stream of row batches (at most 4096 rows and about 1 MiB
/// each). Dropping it before the end stops the query on the server.
///
/// ```no_run
/// # async fn demo() -> Result<(), tidal_client::ClientError> {
/// let client = tidal_client::Client::connect("127.0.0.1:6030").await?;
/// let mut rows = client.query_stream("SELECT * FROM readings", "iot").await?;
/// let names: Vec<&str> = rows.fields().iter().map(|f| f.name.as_str()).collect();
/// println!("{}", names.join(","));
/// let mut total = 0;
/// while let Some(batch) = rows.next_batch().await? {
///     total += batch.num_rows();
/// }
/// println!("{total} rows");
/// # Ok(()) }
/// ```
pub struct ResultStream {
    fields: Vec<Field>,
    wire_fields: Vec<v1::Field>,
    has_rows: bool,
    precision: Precision,
    db: String,
    inner: tonic::Streaming<v1::ResultBatch>,
    rows: u64,
    /// `Some` once the server's end message arrived.
    affected_rows: Option<u64>,
}

fn protocol(msg: impl Into<String>) -> ClientError {
    ClientError::new(StatusCode::Internal, msg)
}

impl ResultStream {
    /// Reads the header the server sends first.
    pub(crate) async fn open(
        mut inner: tonic::Streaming<v1::ResultBatch>,
    ) -> Result<ResultStream, ClientError> {
        let header = match inner.message().await? {
            Some(v1::ResultBatch {
                part: Some(Part::Header(h)),
            }) => h,
            Some(_) => return Err(protocol("result stream did not start with its header")),
            None => return Err(protocol("result stream ended before its header")),
        };
        let fields = header
            .fields
            .iter()
            .map(|f| {
                data_type_from_wire(f.r#type.as_ref())
                    .map(|t| Field::new(f.name.clone(), t))
                    .map_err(|e| protocol(format!("result column '{}': {e}", f.name)))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ResultStream {
            fields,
            wire_fields: header.fields,
            has_rows: header.has_rows,
            precision: Precision::parse(&header.precision).unwrap_or(Precision::Millis),
            db: header.db,
            inner,
            rows: 0,
            affected_rows: None,
        })
    }

    /// The result columns (empty for a statement without rows).
    pub fn fields(&self) -> &[Field] {
        &self.fields
    }

    /// Whether the statement returns rows (a query or SHOW), even if there are none.
    pub fn has_rows(&self) -> bool {
        self.has_rows
    }

    /// The precision of TIMESTAMP columns.
    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// The session's current database after the statement.
    pub fn db(&self) -> &str {
        &self.db
    }

    /// Rows received so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// The statement's affected rows (rows returned, inserted or deleted), once the stream
    /// has ended.
    pub fn affected_rows(&self) -> Option<u64> {
        self.affected_rows
    }

    /// The next batch of rows; `None` once the result is complete. An error means the query
    /// failed (killed, timed out, past its memory limit...) after the rows before it.
    pub async fn next_batch(&mut self) -> Result<Option<Batch>, ClientError> {
        if self.affected_rows.is_some() {
            return Ok(None);
        }
        loop {
            let Some(msg) = self.inner.message().await? else {
                return Err(protocol("result stream ended without its end message"));
            };
            match msg.part {
                Some(Part::Rows(mut b)) => {
                    b.fields = self.wire_fields.clone();
                    let b = batch_from_wire(b).map_err(|e| protocol(e.to_string()))?;
                    if b.num_rows() == 0 {
                        continue;
                    }
                    self.rows += b.num_rows() as u64;
                    return Ok(Some(b));
                }
                Some(Part::End(e)) => {
                    self.affected_rows = Some(e.affected_rows);
                    return Ok(None);
                }
                Some(Part::Header(_)) | None => {
                    return Err(protocol("unexpected message in a result stream"))
                }
            }
        }
    }

    /// Reads the rest of the stream into one result (what [`Client::execute`] returns).
    pub async fn collect(mut self) -> Result<StatementResult, ClientError> {
        let mut all = self.has_rows.then(|| Batch::empty(self.fields.clone()));
        while let Some(b) = self.next_batch().await? {
            if let Some(a) = all.as_mut() {
                a.append(&b);
            }
        }
        Ok(StatementResult {
            batch: all,
            affected_rows: self.affected_rows.unwrap_or(self.rows),
            precision: self.precision,
            db: self.db,
        })
    }
}

impl Client {
    /// Runs one SQL statement with `db` as the session's current database ("" for none) and
    /// returns its result as a stream of row batches (see [`ResultStream`]), for results too
    /// large to hold at once. The session uses the server's default query timeout.
    pub async fn query_stream(&self, sql: &str, db: &str) -> Result<ResultStream, ClientError> {
        self.query_stream_with_timeout(sql, db, None).await
    }

    /// [`Client::query_stream`] with the session's query timeout (`None` = the server's
    /// default, `Some(0)` = none); the timeout covers the whole stream, reading included.
    pub async fn query_stream_with_timeout(
        &self,
        sql: &str,
        db: &str,
        timeout_ms: Option<u64>,
    ) -> Result<ResultStream, ClientError> {
        self.authenticate().await?;
        let run = || async {
            self.sql()?
                .execute_stream(v1::ExecuteRequest {
                    sql: sql.to_string(),
                    db: db.to_string(),
                    timeout_ms,
                })
                .await
                .map_err(ClientError::from)
        };
        let inner = match run().await {
            Err(e) if self.can_relogin(&e) => {
                self.relogin().await?;
                run().await
            }
            r => r,
        }?
        .into_inner();
        ResultStream::open(inner).await
    }
}
