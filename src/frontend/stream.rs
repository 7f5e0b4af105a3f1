//! Query results as streams. A query whose coordinator part works batch by batch (a scan or
//! projection with filters and LIMIT, ORDER BY + LIMIT as a top-k: `tidal_sql::pipeline`)
//! runs as a producer task that reads each vgroup's fragment stream (`Dnode.ExecFragmentStream`)
//! in vgroup order — the order a gathered result has — pushes the batches through the plan's
//! pipeline and hands the results to a bounded channel. Nothing waits for the whole result:
//! the coordinator holds a few batches per vgroup (the channel, each fragment stream's HTTP/2
//! window) and a slow reader stops the producer, whose unread fragment streams stop their
//! data nodes in turn. Every result batch counts against the statement's memory budget from
//! when the producer queues it until it has been handed to the transport ([`HeldBatch`]), so a
//! stream's memory shows in its budget and stays within `query_memory_max_bytes`. Other plans
//! gather every fragment result and finish on this node, against the same budget; their result
//! is then sent in batches too.
//!
//! `Sql.ExecuteStream` sends [`messages`] of a [`Reply`]; `Sql.Execute` collects it.

use super::metrics::StatementTimer;
use super::queries::{self, AbortOnDrop, FragmentGuard, Registration, Running};
use super::{catalog, ExecError, ExecResult, Outcome, SqlService};
use std::pin::Pin;
use std::sync::Arc;
use tidal_common::{Batch, Field, Precision, StatusCode};
use tidal_proto::convert::{batch_from_wire, batch_to_wire};
use tidal_proto::status_error;
use tidal_proto::v1;
use tidal_sql::{FragmentTarget, MemoryBudget, Reservation};
use tonic::{Request, Status};

/// Result batches a streaming query buffers ahead of its reader.
const RESULT_STREAM_BUFFER: usize = 2;
/// What a non-streaming Execute's collected result is called in a memory-limit error.
const COLLECTED: &str =
    "the result of a non-streaming Execute (read large results with ExecuteStream)";
/// What a stream's queued result batches are called in a memory-limit error.
const BUFFERED: &str = "the result batches buffered for the reader";

/// A result batch on its way to the reader, held against the statement's memory budget from
/// when it is queued until it is dropped: after the transport took its last piece (or the
/// collecting Execute appended it to the result it accounts for itself).
pub struct HeldBatch {
    batch: Batch,
    held: Reservation,
}

impl HeldBatch {
    /// Reserves `batch`'s bytes in `budget`; fails with RESOURCE_EXHAUSTED past the limit.
    pub fn hold(batch: Batch, budget: &MemoryBudget) -> ExecResult<HeldBatch> {
        let held = budget.reserve(tidal_sql::memory::batch_bytes(&batch), BUFFERED)?;
        Ok(HeldBatch { batch, held })
    }

    /// The batch and its reservation, to release them separately.
    fn into_parts(self) -> (Batch, Reservation) {
        (self.batch, self.held)
    }
}

/// What a request produced: a finished outcome, or the rows of its last statement, a query,
/// still streaming.
pub enum Reply {
    Done(Outcome),
    Stream(RowStream),
}

impl Reply {
    /// The session's database after the request.
    pub fn db(&self) -> &str {
        match self {
            Reply::Done(o) => &o.db,
            Reply::Stream(s) => &s.db,
        }
    }

    /// Keeps the request registered (SHOW QUERIES, KILL QUERY) until its rows are read or
    /// dropped.
    pub fn held_by(self, reg: Registration) -> Reply {
        match self {
            Reply::Done(o) => Reply::Done(o),
            Reply::Stream(mut s) => {
                s.registration = Some(reg);
                Reply::Stream(s)
            }
        }
    }

    /// The whole result as one outcome; collected rows count against the statement's memory
    /// budget.
    pub async fn collect(self) -> ExecResult<Outcome> {
        let mut s = match self {
            Reply::Done(o) => return Ok(o),
            Reply::Stream(s) => s,
        };
        let budget = match &s.registration {
            Some(r) => r.running.memory.clone(),
            None => tidal_sql::MemoryBudget::unlimited(),
        };
        let mut all = Batch::empty(s.fields.clone());
        let mut held = budget.reserve(0, COLLECTED)?;
        while let Some(h) = s.next().await? {
            let (b, queued) = h.into_parts();
            // The batch becomes part of the collected result: its bytes move to `held`
            // (released first, so that they are never counted twice).
            drop(queued);
            held.resize(held.bytes() + tidal_sql::memory::batch_bytes(&b), COLLECTED)?;
            all.append_owned(b);
        }
        Ok(Outcome::rows(&s.db, all, s.precision))
    }
}

/// A query's rows as the coordinator produces them.
pub struct RowStream {
    pub fields: Vec<Field>,
    pub precision: Precision,
    pub db: String,
    /// `Ok(None)` marks the end: a channel that closes without it lost its producer.
    rx: tokio::sync::mpsc::Receiver<ExecResult<Option<HeldBatch>>>,
    ended: bool,
    _producer: AbortOnDrop<()>,
    registration: Option<Registration>,
    /// Records the statement's metrics at the stream's end; dropped with an unfinished
    /// stream (its reader went away), it records a failure.
    timer: Option<StatementTimer>,
}

impl RowStream {
    /// The stream with its statement's metrics recorded by `timer` when it ends.
    pub fn timed(mut self, timer: StatementTimer) -> RowStream {
        self.timer = Some(timer);
        self
    }

    /// The next batch of rows, still counted in the statement's memory budget until it is
    /// dropped; `None` at the end.
    pub async fn next(&mut self) -> ExecResult<Option<HeldBatch>> {
        if self.ended {
            return Ok(None);
        }
        let r = match self.rx.recv().await {
            Some(Ok(Some(b))) => return Ok(Some(b)),
            Some(Ok(None)) => Ok(None),
            Some(Err(e)) => Err(e),
            None => Err(ExecError::new(
                StatusCode::Internal,
                "the query stopped without finishing its result",
            )),
        };
        // Done: the statement's metrics are recorded (before the end reaches the client) and
        // it leaves SHOW QUERIES.
        self.ended = true;
        if let Some(t) = self.timer.take() {
            t.finish(r.is_ok());
        }
        self.registration = None;
        r
    }
}

/// One vgroup's fragment result, arriving.
pub(super) struct FragmentStream {
    inner: tonic::Streaming<v1::Batch>,
    in_flight: Option<FragmentGuard>,
}

impl FragmentStream {
    /// The next batch; `None` at the end.
    pub async fn next(&mut self) -> ExecResult<Option<Batch>> {
        match self.inner.message().await? {
            Some(b) => Ok(Some(batch_from_wire(b)?)),
            None => {
                self.in_flight = None;
                Ok(None)
            }
        }
    }
}

/// The gRPC messages of a reply: its header, its rows in batches of at most
/// `tidal_sql::batch_rows` rows, the end.
pub type ResultMessages =
    Pin<Box<dyn futures::Stream<Item = Result<v1::ResultBatch, Status>> + Send + 'static>>;

enum Source {
    Batch(Option<Batch>),
    Stream(RowStream),
}

struct Messages {
    header: Option<v1::ResultHeader>,
    source: Option<Source>,
    /// A batch being cut into messages, and the next row to send.
    pending: Option<(Batch, usize)>,
    /// The memory budget share of the batch in `pending`, or of the one whose last piece went
    /// out last: given back when the transport asks for the next message, so after it took
    /// that piece.
    pending_held: Option<Reservation>,
    cap: usize,
    rows: u64,
    /// The affected rows of a finished statement (a stream reports its rows).
    affected: Option<u64>,
}

impl Messages {
    /// The next rows message; `None` after the last.
    async fn next_rows(&mut self) -> ExecResult<Option<Batch>> {
        loop {
            if let Some((b, at)) = self.pending.take() {
                let n = b.num_rows();
                if at < n {
                    let end = (at + self.cap).min(n);
                    let piece = if at == 0 && end == n {
                        b
                    } else {
                        let piece = tidal_sql::slice_batch(&b, at, end);
                        self.pending = Some((b, end));
                        piece
                    };
                    return Ok(Some(piece));
                }
            }
            // Every piece of the last batch has been taken.
            self.pending_held = None;
            let next = match &mut self.source {
                None => None,
                Some(Source::Batch(b)) => b.take().map(|b| (b, None)),
                Some(Source::Stream(s)) => s.next().await?.map(|h| {
                    let (b, held) = h.into_parts();
                    (b, Some(held))
                }),
            };
            match next {
                Some((b, held)) => {
                    self.pending = Some((b, 0));
                    self.pending_held = held;
                }
                None => {
                    self.source = None;
                    return Ok(None);
                }
            }
        }
    }
}

fn part(p: v1::result_batch::Part) -> v1::ResultBatch {
    v1::ResultBatch { part: Some(p) }
}

/// The ExecuteStream response of `reply`.
pub fn messages(reply: Reply) -> ResultMessages {
    let fields_of = |b: &Batch| {
        b.fields
            .iter()
            .map(|f| v1::Field {
                name: f.name.clone(),
                r#type: Some(tidal_proto::convert::data_type_to_wire(f.data_type)),
            })
            .collect::<Vec<_>>()
    };
    let (header, source, affected, fields) = match reply {
        Reply::Done(o) => {
            let header = v1::ResultHeader {
                has_rows: o.batch.is_some(),
                fields: o.batch.as_ref().map(fields_of).unwrap_or_default(),
                precision: o.precision.as_str().to_string(),
                db: o.db.clone(),
            };
            let fields = o
                .batch
                .as_ref()
                .map(|b| b.fields.clone())
                .unwrap_or_default();
            (
                header,
                Source::Batch(o.batch),
                Some(o.affected_rows),
                fields,
            )
        }
        Reply::Stream(s) => {
            let header = v1::ResultHeader {
                has_rows: true,
                fields: fields_of(&Batch::empty(s.fields.clone())),
                precision: s.precision.as_str().to_string(),
                db: s.db.clone(),
            };
            let fields = s.fields.clone();
            (header, Source::Stream(s), None, fields)
        }
    };
    let state = Messages {
        header: Some(header),
        source: Some(source),
        pending: None,
        pending_held: None,
        cap: tidal_sql::batch_rows(&fields),
        rows: 0,
        affected,
    };
    Box::pin(futures::stream::unfold(Some(state), |st| async move {
        let mut st = st?;
        if let Some(h) = st.header.take() {
            return Some((Ok(part(v1::result_batch::Part::Header(h))), Some(st)));
        }
        match st.next_rows().await {
            Ok(Some(b)) => {
                st.rows += b.num_rows() as u64;
                let mut w = batch_to_wire(&b);
                w.fields.clear(); // the header's
                Some((Ok(part(v1::result_batch::Part::Rows(w))), Some(st)))
            }
            Ok(None) => {
                let end = v1::ResultEnd {
                    affected_rows: st.affected.unwrap_or(st.rows),
                };
                Some((Ok(part(v1::result_batch::Part::End(end))), None))
            }
            Err(e) => Some((Err(status_error(e.code, e.message)), None)),
        }
    }))
}

impl SqlService {
    /// A SELECT as the last statement of a request: streamed when its plan allows, gathered
    /// otherwise. Failures before any row (a data node restarted, the vgroup map changed)
    /// refresh the routes and run it again, as [`SqlService::select`] does.
    pub(super) async fn select_stream(&self, db: &str, q: &tidal_sql::Query) -> ExecResult<Reply> {
        self.client
            .with_route_retries(db, q, || self.select_stream_once(db, q))
            .await
    }

    async fn select_stream_once(&self, db: &str, q: &tidal_sql::Query) -> ExecResult<Reply> {
        let snapshot = catalog::snapshot(self, db, q).await?;
        let default_db = (!db.is_empty()).then_some(db);
        let plan = tidal_sql::plan_query(q, default_db, &snapshot)?;
        let budget = self.budget();
        let Some(pipe) = tidal_sql::pipeline(&plan, &budget)? else {
            return Ok(Reply::Done(self.select_gathered(db, plan).await?));
        };
        let precision = match plan.fragments.first() {
            Some(spec) => self.precision(&spec.db).await?,
            None => Precision::Millis,
        };
        let streams = self.open_fragments(&plan, &budget).await?;
        let (tx, rx) = tokio::sync::mpsc::channel(RESULT_STREAM_BUFFER);
        let fields = pipe.fields().to_vec();
        let producer = tokio::spawn(produce(pipe, streams, tx, budget, queries::current()));
        Ok(Reply::Stream(RowStream {
            fields,
            precision,
            db: db.to_string(),
            rx,
            ended: false,
            _producer: AbortOnDrop(vec![producer]),
            registration: None,
            timer: None,
        }))
    }

    /// Starts every fragment of `plan` on its vgroups (in parallel) and returns their streams,
    /// fragment by fragment in vgroup order. A vgroup's data node refusing the call (it does
    /// not host the vgroup, it is down) fails here, before any row was produced.
    pub(super) async fn open_fragments(
        &self,
        plan: &tidal_sql::QueryPlan,
        budget: &tidal_sql::MemoryBudget,
    ) -> ExecResult<Vec<FragmentStream>> {
        let running = queries::current();
        let timeout = queries::fragment_timeout();
        let mut calls = Vec::new();
        for spec in &plan.fragments {
            let route = self.client.route(&spec.db).await?;
            let targets: Vec<_> = match &spec.target {
                FragmentTarget::AllVgroups => route.vgroups.clone(),
                FragmentTarget::Table(t) => vec![route.vgroup_of(&spec.db, t).clone()],
            };
            let bytes = spec.fragment.to_bytes();
            for vg in targets {
                let mut d = self.client.dnode(&vg.addr)?;
                let mut req = Request::new(v1::FragmentRequest {
                    vnode: Some(v1::VnodeRef {
                        db: spec.db.clone(),
                        vgroup_id: vg.id.0,
                    }),
                    fragment: bytes.clone(),
                    memory_max_bytes: budget.limit_bytes(),
                });
                if let Some(t) = timeout {
                    // The data node's own deadline, in case this node vanishes mid-query.
                    req.set_timeout(t);
                }
                let in_flight = running.as_ref().map(Running::fragment_started);
                calls.push(async move {
                    let inner = d.exec_fragment_stream(req).await?.into_inner();
                    Ok::<_, ExecError>(FragmentStream { inner, in_flight })
                });
            }
        }
        futures::future::try_join_all(calls).await
    }
}

/// Feeds the fragment streams, in order, through the pipeline into `tx` until the result is
/// complete, the reader goes away, or the statement is killed or times out; then sends the
/// end marker or the error. Each result batch is held against `budget` from before it waits
/// in `tx` until it is sent, so the budget shows what the stream buffers and a query whose
/// buffered batches would take it past its limit fails instead.
async fn produce(
    mut pipe: tidal_sql::RowPipeline,
    streams: Vec<FragmentStream>,
    tx: tokio::sync::mpsc::Sender<ExecResult<Option<HeldBatch>>>,
    budget: MemoryBudget,
    running: Option<Arc<Running>>,
) {
    let gone = || ExecError::new(StatusCode::ExecutionError, "the result's reader went away");
    let work = async {
        // Streams not reached yet stay open: their data nodes work ahead until their buffers
        // fill. Returning early (LIMIT reached) drops them, which stops those data nodes.
        for mut f in streams {
            while let Some(b) = f.next().await? {
                if let Some(out) = pipe.push(b)? {
                    let out = HeldBatch::hold(out, &budget)?;
                    tx.send(Ok(Some(out))).await.map_err(|_| gone())?;
                }
                if pipe.done() {
                    return Ok(());
                }
            }
        }
        for out in pipe.finish()? {
            let out = HeldBatch::hold(out, &budget)?;
            tx.send(Ok(Some(out))).await.map_err(|_| gone())?;
        }
        Ok(())
    };
    let r = match &running {
        Some(r) => r.until_stopped(work).await,
        None => work.await,
    };
    let _ = tx.send(r.map(|()| None)).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use tidal_common::{Column, ColumnData, DataType};
    use v1::result_batch::Part;

    #[tokio::test]
    async fn a_result_goes_out_as_header_bounded_batches_and_end() {
        let n = 10_000;
        let batch = Batch::new(
            vec![Field::new("v", DataType::BigInt)],
            vec![Column::new(ColumnData::Int((0..n).collect()))],
        );
        let reply = Reply::Done(Outcome::rows("db1", batch, Precision::Micros));
        let msgs: Vec<v1::ResultBatch> = messages(reply)
            .map(|m| m.unwrap())
            .collect::<Vec<_>>()
            .await;
        let Some(Part::Header(h)) = &msgs[0].part else {
            panic!("first {:?}", msgs[0]);
        };
        assert!(h.has_rows);
        assert_eq!((h.db.as_str(), h.precision.as_str()), ("db1", "us"));
        assert_eq!(h.fields.len(), 1);
        let mut next = 0;
        for m in &msgs[1..msgs.len() - 1] {
            let Some(Part::Rows(b)) = &m.part else {
                panic!("rows {m:?}");
            };
            assert!(b.fields.is_empty(), "fields travel in the header");
            let col = tidal_proto::convert::column_from_wire(b.columns[0].clone()).unwrap();
            assert_eq!(col.get(0), tidal_common::Value::Int(next));
            let rows = col.len();
            assert!(rows <= tidal_sql::STREAM_BATCH_ROWS);
            next += rows as i64;
        }
        assert_eq!(next, n);
        let Some(Part::End(e)) = &msgs[msgs.len() - 1].part else {
            panic!("last {:?}", msgs.last());
        };
        assert_eq!(e.affected_rows, n as u64);

        // A statement without rows: header, end.
        let msgs: Vec<_> = messages(Reply::Done(Outcome::affected("db1", 3)))
            .collect::<Vec<_>>()
            .await;
        assert_eq!(msgs.len(), 2);
        assert!(matches!(&msgs[0].as_ref().unwrap().part, Some(Part::Header(h)) if !h.has_rows));
        assert!(
            matches!(&msgs[1].as_ref().unwrap().part, Some(Part::End(e)) if e.affected_rows == 3)
        );
    }

    fn ints(from: i64, n: i64) -> Batch {
        Batch::new(
            vec![Field::new("v", DataType::BigInt)],
            vec![Column::new(ColumnData::Int((from..from + n).collect()))],
        )
    }

    /// A stream fed by the test instead of a producer task.
    fn test_stream(
        capacity: usize,
    ) -> (
        tokio::sync::mpsc::Sender<ExecResult<Option<HeldBatch>>>,
        RowStream,
    ) {
        let (tx, rx) = tokio::sync::mpsc::channel(capacity);
        let rows = RowStream {
            fields: vec![Field::new("v", DataType::BigInt)],
            precision: Precision::Millis,
            db: "db1".into(),
            rx,
            ended: false,
            _producer: AbortOnDrop(Vec::new()),
            registration: None,
            timer: None,
        };
        (tx, rows)
    }

    #[tokio::test]
    async fn buffered_batches_count_in_the_budget_until_they_are_sent() {
        // Two batches of 10,000 rows: each goes out as 3 messages of at most 4096 rows.
        let budget = MemoryBudget::new(1 << 20, "query_memory_max_bytes");
        let one = tidal_sql::memory::batch_bytes(&ints(0, 10_000));
        let (tx, rows) = test_stream(4);
        for from in [0, 10_000] {
            let held = HeldBatch::hold(ints(from, 10_000), &budget).unwrap();
            tx.send(Ok(Some(held))).await.unwrap();
        }
        tx.send(Ok(None)).await.unwrap();
        assert_eq!(budget.used_bytes(), 2 * one, "queued batches are counted");

        let mut msgs = messages(Reply::Stream(rows));
        assert!(matches!(
            msgs.next().await.unwrap().unwrap().part,
            Some(Part::Header(_))
        ));
        let mut sent_rows = 0;
        let mut used_per_message = Vec::new();
        loop {
            match msgs.next().await.unwrap().unwrap().part {
                Some(Part::Rows(b)) => {
                    sent_rows += b.columns[0].len as usize;
                    used_per_message.push(budget.used_bytes());
                }
                Some(Part::End(e)) => {
                    assert_eq!(e.affected_rows, 20_000);
                    break;
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(sent_rows, 20_000);
        // The first batch is held while its 3 pieces go out, given back when the transport
        // asks for the message after its last piece; the second one then until the end.
        assert_eq!(
            used_per_message,
            [2 * one, 2 * one, 2 * one, one, one, one],
            "budget use after each rows message"
        );
        assert_eq!(budget.used_bytes(), 0, "all given back at the end");
        assert!(budget.peak_bytes() >= 2 * one);

        // Past the limit, queueing one more batch fails the query with the limit error.
        let small = MemoryBudget::new(one + one / 2, "query_memory_max_bytes");
        let first = HeldBatch::hold(ints(0, 10_000), &small).unwrap();
        let e = HeldBatch::hold(ints(0, 10_000), &small)
            .err()
            .expect("a second batch does not fit");
        assert_eq!(e.code, StatusCode::ResourceExhausted, "{}", e.message);
        assert!(e.message.contains(BUFFERED), "{}", e.message);
        drop(first);
        assert_eq!(small.used_bytes(), 0);
    }

    #[tokio::test]
    async fn a_dropped_or_collected_stream_gives_its_batches_back() {
        let budget = MemoryBudget::new(0, "query_memory_max_bytes");
        let (tx, rows) = test_stream(4);
        for from in [0, 10_000] {
            let held = HeldBatch::hold(ints(from, 10_000), &budget).unwrap();
            tx.send(Ok(Some(held))).await.unwrap();
        }
        let mut msgs = messages(Reply::Stream(rows));
        msgs.next().await.unwrap().unwrap(); // header
        msgs.next().await.unwrap().unwrap(); // first rows
        assert!(budget.used_bytes() > 0);
        drop(msgs);
        assert_eq!(budget.used_bytes(), 0, "the reader went away");

        // Collecting: every batch moves from the stream's share to the collected result's.
        let (tx, rows) = test_stream(4);
        for from in [0, 10_000] {
            let held = HeldBatch::hold(ints(from, 10_000), &budget).unwrap();
            tx.send(Ok(Some(held))).await.unwrap();
        }
        tx.send(Ok(None)).await.unwrap();
        let o = Reply::Stream(rows).collect().await.unwrap();
        assert_eq!(o.batch.map(|b| b.num_rows()), Some(20_000));
        assert_eq!(budget.used_bytes(), 0);
    }
}
