//! The in-memory write buffer: per subtable, its rows sorted by timestamp, as a list of
//! pieces of columns.
//!
//! Owns: rows written since the last freeze. Invariants: per subtable the pieces hold unique,
//! ascending timestamps (column 0), piece after piece (a piece's rows all come after the
//! previous piece's); a later insert of a ts replaces the whole row (inserts are applied in WAL
//! order, so "later" == higher WAL sequence); within a piece all columns have the same length.
//! `bytes` estimates the heap used and is what the freeze trigger compares against `BUFFER`.
//!
//! Why pieces in chunks: a write batch of row blocks (the Writer's form) holds a few rows of
//! each of thousands of subtables. A block is appended whole, column by column, to a chunk
//! (large column vectors allocated once, shared by all subtables of a column layout), and each
//! subtable's run in it becomes a piece naming its rows in the chunk: no vector per subtable
//! grows and reallocates, and memory stays dense. A large block its write gives up, whose runs
//! name each subtable once, is a chunk itself (its vectors kept, not copied). A block whose
//! runs interleave subtables (a loader sends rows in file order, one run per row) is gathered
//! into the chunk subtable by subtable, so that each subtable still gets one piece per block. A
//! piece that comes after everything its subtable holds (nearly every one) is not pushed onto
//! the subtable's list but appended to one log shared by all subtables, linked to the
//! subtable's previous one ([`Appended`]); any other change first moves them into the list.
//! Rows written as per-subtable columns go to an owned piece, which in-order writes extend.
//! Rows overtaken by a batch or two of later ones (a client's concurrent requests, sent on in
//! another order) that fall between two of the subtable's newest appended pieces, or between
//! two rows of one, are linked into its chain there ([`TableMem::link_into_gap`]), the piece
//! cut in two; late rows that interleave with those newest pieces' rows are merged with them
//! into one owned piece linked in their place ([`TableMem::merge_into_chain`]). Other late rows
//! settle the chain into the list and are merged, in one linear pass (`merge::merge_runs`),
//! with the held rows in their ts range only; flushes and scans copy the pieces of the range
//! they read.

use crate::block::ts_slice;
use crate::cache::Entry;
use crate::merge::{merge_runs, Run};
use std::borrow::Cow;
use std::collections::HashMap;
use tidal_common::{Column, ColumnData, DataType, TableUid, UidHash, Value};

/// `$body` with `$a` and `$b` the value vectors of `$dst` and `$src` when rows of `$src` may
/// be copied into `$dst` (one physical type; BIGINT-family and TIMESTAMP values are both
/// i64), else `None`: the one rule for appending rows ([`extend_rows`]) and for placing them
/// ([`put_rows`]).
macro_rules! same_physical {
    ($dst:expr, $src:expr, |$a:ident, $b:ident| $body:expr) => {
        match ($dst, $src) {
            (ColumnData::Bool($a), ColumnData::Bool($b)) => $body,
            (ColumnData::Int($a), ColumnData::Int($b))
            | (ColumnData::Timestamp($a), ColumnData::Timestamp($b))
            | (ColumnData::Int($a), ColumnData::Timestamp($b))
            | (ColumnData::Timestamp($a), ColumnData::Int($b)) => $body,
            (ColumnData::UInt($a), ColumnData::UInt($b)) => $body,
            (ColumnData::Float($a), ColumnData::Float($b)) => $body,
            (ColumnData::Str($a), ColumnData::Str($b)) => $body,
            _ => None,
        }
    };
}

/// Estimated heap bytes of a chunk piece's bookkeeping (its rows are counted in the chunk):
/// as an appended piece ([`Linked`]), the larger form.
const PIECE_BYTES: u64 = std::mem::size_of::<Linked>() as u64;
/// How far back from a subtable's newest appended piece late rows are linked in where they
/// fall ([`TableMem::link_into_gap`]).
const GAP_LINKS_MAX: usize = 8;
/// Most rows, held and late together, that [`TableMem::merge_into_chain`] merges.
const CHAIN_MERGE_ROWS_MAX: usize = 256;
/// Subtables whose appended chains [`Memtable::tables_by_uid`] walks side by side.
const CHAIN_LANES: usize = 16;
/// Pieces per segment of [`Appended`] (40 bytes each).
const SEGMENT_PIECES: usize = 1 << 14;
/// Rows of the first chunk of a column layout; each later one doubles, up to
/// [`CHUNK_ROWS_MAX`] (a bigger block gets a chunk of its own size).
const CHUNK_ROWS_MIN: usize = 4096;
const CHUNK_ROWS_MAX: usize = 65_536;
/// Rows from which a block given up by its write becomes a chunk of its own
/// ([`Memtable::insert_block_owned`]); smaller ones are copied into a shared chunk, so that
/// a feed of small writes does not leave a vector per column per write.
const ADOPT_ROWS_MIN: usize = if cfg!(test) { 4 } else { 1024 };

#[derive(Default)]
pub struct Memtable {
    /// Probed once per subtable run of every write, in the batch's order: [`UidHash`] keeps
    /// that walk in uid order when the batch lists subtables in creation order.
    tables: HashMap<TableUid, TableMem, UidHash>,
    chunks: Vec<Chunk>,
    appended: Appended,
    /// Chunks still taking rows, at most one per column layout (indices into `chunks`).
    open: Vec<usize>,
    bytes: u64,
}

/// Column vectors with a fixed capacity that whole row blocks are appended to.
struct Chunk {
    cols: Vec<Column>,
    rows: usize,
    capacity: usize,
}

impl Chunk {
    fn accepts(&self, cols: &[Column]) -> bool {
        cols.len() == self.cols.len()
            && cols
                .iter()
                .zip(&self.cols)
                .all(|(a, b)| std::mem::discriminant(&a.data) == std::mem::discriminant(&b.data))
    }
}

/// Chunk pieces that came after everything their subtable held (nearly every piece of a
/// feed), in the order they came, across subtables, and the few late rows linked or merged
/// into a subtable's newest pieces; each names the piece its subtable has before it. With
/// 100,000s of subtables a batch brings a row or two of each: pushing each piece onto its
/// subtable's own list wrote to memory last touched a batch earlier (a cache miss per piece)
/// and grew thousands of small lists by reallocation, a seventh of a data node's write CPU.
/// Here a piece is written where the previous one of any subtable was. Segments of a fixed
/// size, so growing never copies the pieces already held.
#[derive(Default)]
struct Appended {
    segments: Vec<Vec<Linked>>,
}

struct Linked {
    piece: Piece,
    /// The subtable's previous appended piece.
    prev: Option<u32>,
}

impl Appended {
    fn len(&self) -> usize {
        match self.segments.last() {
            Some(last) => (self.segments.len() - 1) * SEGMENT_PIECES + last.len(),
            None => 0,
        }
    }

    /// Appends `piece`, whose subtable's previous appended piece is `prev`; `None` when the
    /// log is full (4G pieces: the caller keeps the piece in its own list).
    fn push(&mut self, piece: Piece, prev: Option<u32>) -> Result<u32, Piece> {
        let Ok(at) = u32::try_from(self.len()) else {
            return Err(piece);
        };
        if at == u32::MAX {
            return Err(piece);
        }
        match self.segments.last_mut() {
            Some(seg) if seg.len() < SEGMENT_PIECES => seg.push(Linked { piece, prev }),
            _ => {
                let mut seg = Vec::with_capacity(SEGMENT_PIECES);
                seg.push(Linked { piece, prev });
                self.segments.push(seg);
            }
        }
        Ok(at)
    }

    fn get(&self, i: u32) -> Option<&Linked> {
        let i = i as usize;
        self.segments
            .get(i / SEGMENT_PIECES)?
            .get(i % SEGMENT_PIECES)
    }

    fn get_mut(&mut self, i: u32) -> Option<&mut Linked> {
        let i = i as usize;
        self.segments
            .get_mut(i / SEGMENT_PIECES)?
            .get_mut(i % SEGMENT_PIECES)
    }

    /// The pieces of the chain ending at `newest`, oldest first.
    fn chain(&self, newest: Option<u32>) -> Vec<&Piece> {
        let mut out = Vec::new();
        let mut at = newest;
        while let Some(l) = at.and_then(|i| self.get(i)) {
            out.push(&l.piece);
            at = l.prev;
        }
        out.reverse();
        out
    }
}

/// A subtable's pieces as readers see them: its own list, then those appended since.
struct Pieces<'m> {
    held: &'m [Piece],
    newer: Vec<&'m Piece>,
}

impl<'m> Pieces<'m> {
    #[cfg(test)]
    fn len(&self) -> usize {
        self.held.len() + self.newer.len()
    }

    fn iter(&self) -> impl DoubleEndedIterator<Item = &'m Piece> + '_ {
        self.held.iter().chain(self.newer.iter().copied())
    }

    /// How many leading pieces `pred` holds for (which it must for a prefix).
    fn partition_point(&self, pred: impl Fn(&Piece) -> bool) -> usize {
        let k = self.held.partition_point(&pred);
        if k < self.held.len() {
            return k;
        }
        k + self.newer.partition_point(|p| pred(p))
    }
}

/// One subtable's rows in a memtable, its pieces gathered once
/// ([`Memtable::tables_by_uid`]).
pub struct TableRows<'m> {
    mem: &'m Memtable,
    pieces: Pieces<'m>,
}

impl TableRows<'_> {
    /// As [`Memtable::ts_bounds`].
    pub fn ts_bounds(&self) -> Option<(i64, i64)> {
        self.mem.ts_bounds_in(&self.pieces)
    }

    /// As [`Memtable::next_ts`].
    #[cfg(test)]
    pub fn next_ts(&self, from: i64) -> Option<i64> {
        self.mem.next_ts_in(&self.pieces, from)
    }

    /// As [`Memtable::range_columns`].
    #[cfg(test)]
    pub fn range_columns(&self, lo: i64, hi: i64, wanted: &[(usize, DataType)]) -> Vec<Column> {
        self.mem.range_columns_in(&self.pieces, lo, hi, wanted)
    }

    /// How many rows the subtable has here.
    pub fn row_count(&self) -> usize {
        let chunks = &self.mem.chunks;
        self.pieces
            .iter()
            .map(|p| {
                let (_, s, e) = p.view(chunks);
                e.saturating_sub(s)
            })
            .sum()
    }
}

/// A chunk piece of one of the subtables [`Memtable::gather_all`] gathers: where its rows
/// are, and where they go in that subtable's columns.
struct Slot {
    chunk: u32,
    start: u32,
    end: u32,
    table: u32,
    at: u32,
}

/// Copies rows `s..e` of `src` (`None`: a column the rows lack, NULL) into `dst` from row
/// `at` on; `dst` already has its full length, and NULL flags only once a row needed them.
/// As [`extend_rows`] appends them, but in place: rows arrive in memory order, not in order.
fn put_rows(dst: &mut Column, at: usize, src: Option<&Column>, s: usize, e: usize) {
    fn copy_at<T: Clone>(a: &mut [T], at: usize, b: &[T], s: usize, e: usize) -> Option<()> {
        match b.get(s..e)? {
            // Most pieces of a feed of many subtables are a row or two: a call to copy one
            // value was most of the copy.
            [one] => *a.get_mut(at)? = one.clone(),
            from => a.get_mut(at..at + from.len())?.clone_from_slice(from),
        }
        Some(())
    }
    let n = e.saturating_sub(s);
    let len = dst.len();
    let copied = src
        .and_then(|src| same_physical!(&mut dst.data, &src.data, |a, b| copy_at(a, at, b, s, e)));
    // The rows' NULL flags: theirs if they have any (a column without flags has no NULL,
    // nor do rows past the end of a shorter flag list), all set if they were not copied.
    let flags = match (copied, src) {
        (Some(()), Some(src)) => match src.nulls.get(s..e) {
            Some(f) if f.contains(&true) => Some(f),
            _ => None,
        },
        _ => {
            if dst.nulls.is_empty() {
                dst.nulls = vec![false; len];
            }
            if let Some(d) = dst.nulls.get_mut(at..at + n) {
                d.fill(true);
            }
            None
        }
    };
    if let Some(f) = flags {
        if dst.nulls.is_empty() {
            dst.nulls = vec![false; len];
        }
        if let Some(d) = dst.nulls.get_mut(at..at + f.len()) {
            d.copy_from_slice(f);
        }
    }
}

/// `c` (empty) lengthened to `n` rows of its type's zero value, the value a NULL row holds.
fn zeroed(mut c: Column, n: usize) -> Column {
    match &mut c.data {
        ColumnData::Bool(v) => v.resize(n, false),
        ColumnData::Int(v) | ColumnData::Timestamp(v) => v.resize(n, 0),
        ColumnData::UInt(v) => v.resize(n, 0),
        ColumnData::Float(v) => v.resize(n, 0.0),
        ColumnData::Str(v) => v.resize(n, String::new()),
    }
    c
}

/// Rows of one subtable: pieces in ascending, disjoint ts order: `pieces`, then the chain of
/// [`Appended`] pieces ending at `newest`.
#[derive(Default)]
struct TableMem {
    pieces: Vec<Piece>,
    /// The newest of the pieces appended after `pieces` ([`Appended`]).
    newest: Option<u32>,
    bytes: u64,
    /// The last piece's last ts and, when it is a chunk piece, its (chunk, end): copies kept
    /// beside the map entry, so that an in-order run (nearly every write) is placed without
    /// reading the piece list, which is cold by the time the subtable's next rows come.
    last: Option<i64>,
    tail: Option<(u32, u32)>,
    /// The least ts of its rows (none but a whole subtable ever leaves a memtable, so it
    /// only falls): a flush asks the bounds of each subtable it folds into the cache, and the
    /// first piece of a chain is at its far end, a dependent load per piece away.
    first: Option<i64>,
}

impl TableMem {
    fn note_first(&mut self, ts: &[i64]) {
        if let Some(&m) = ts.iter().min() {
            self.first = Some(self.first.map_or(m, |f| f.min(m)));
        }
    }
}

/// Consecutive rows of one subtable.
#[derive(Clone)]
enum Piece {
    /// Columns owned by the piece.
    Owned(Vec<Column>),
    /// Rows `start..end` of chunk `chunk`, whose first and last ts are `first` and `last`
    /// (kept here so that finding where rows go reads only the piece list: a chunk's rows
    /// are cold by the time a subtable's next rows come).
    Chunk {
        chunk: u32,
        start: u32,
        end: u32,
        first: i64,
        last: i64,
    },
}

impl Piece {
    /// The piece's columns and the rows of them it holds.
    fn view<'m>(&'m self, chunks: &'m [Chunk]) -> (&'m [Column], usize, usize) {
        match self {
            Piece::Owned(c) => (c, 0, c.first().map(Column::len).unwrap_or(0)),
            Piece::Chunk {
                chunk, start, end, ..
            } => match chunks.get(*chunk as usize) {
                Some(c) => (&c.cols, *start as usize, *end as usize),
                None => (&[], 0, 0),
            },
        }
    }

    fn ts<'m>(&'m self, chunks: &'m [Chunk]) -> &'m [i64] {
        let (cols, s, e) = self.view(chunks);
        cols.first()
            .and_then(|c| ts_slice(c).get(s..e))
            .unwrap_or(&[])
    }

    fn first_ts(&self, chunks: &[Chunk]) -> Option<i64> {
        match self {
            Piece::Chunk {
                start, end, first, ..
            } => (end > start).then_some(*first),
            Piece::Owned(_) => self.ts(chunks).first().copied(),
        }
    }

    fn last_ts(&self, chunks: &[Chunk]) -> Option<i64> {
        match self {
            Piece::Chunk {
                start, end, last, ..
            } => (end > start).then_some(*last),
            Piece::Owned(_) => self.ts(chunks).last().copied(),
        }
    }

    fn bytes(&self) -> u64 {
        match self {
            Piece::Owned(c) => c.iter().map(col_bytes).sum(),
            Piece::Chunk { .. } => PIECE_BYTES,
        }
    }

    /// The piece's rows as owned columns.
    fn into_owned(self, chunks: &[Chunk]) -> Vec<Column> {
        match self {
            Piece::Owned(c) => c,
            p => {
                let (cols, s, e) = p.view(chunks);
                cols.iter().map(|c| c.slice(s, e)).collect()
            }
        }
    }

    /// Cuts off the rows with ts >= `from` as a new piece, keeping the earlier ones; `None`
    /// (nothing cut) when no row is earlier than `from`.
    fn split_off_from(&mut self, from: i64, chunks: &[Chunk]) -> Option<Piece> {
        let ts = self.ts(chunks);
        let p = ts.partition_point(|t| *t < from);
        if p == 0 {
            return None;
        }
        let (head_last, tail_first) = (ts[p - 1], ts.get(p).copied());
        match self {
            Piece::Owned(cols) => {
                let n = cols.first().map(Column::len).unwrap_or(0);
                let tail: Vec<Column> = cols.iter().map(|c| c.slice(p, n)).collect();
                for c in cols.iter_mut() {
                    c.truncate(p);
                }
                Some(Piece::Owned(tail))
            }
            Piece::Chunk {
                chunk,
                start,
                end,
                last,
                ..
            } => {
                let cut = *start + p as u32;
                let tail = Piece::Chunk {
                    chunk: *chunk,
                    start: cut,
                    end: *end,
                    // An empty tail's bounds are never read.
                    first: tail_first.unwrap_or(*last),
                    last: *last,
                };
                *end = cut;
                *last = head_last;
                Some(tail)
            }
        }
    }
}

fn col_bytes(c: &Column) -> u64 {
    let data = match &c.data {
        ColumnData::Bool(v) => v.len() as u64,
        ColumnData::Str(v) => v.iter().map(|s| 24 + s.len() as u64).sum(),
        d => 8 * d.len() as u64,
    };
    data + c.nulls.len() as u64
}

/// Rows of a column to append: a range, copied whole, or an order to gather them in.
#[derive(Clone, Copy)]
enum Rows<'o> {
    Range(usize, usize),
    Gather(&'o [u32]),
}

impl Rows<'_> {
    fn len(self) -> usize {
        match self {
            Rows::Range(s, e) => e.saturating_sub(s),
            Rows::Gather(order) => order.len(),
        }
    }

    /// Appends these rows of `b` to `a`: all of them, or none and `None` when `b` lacks one.
    fn append<T: Clone>(self, a: &mut Vec<T>, b: &[T]) -> Option<()> {
        match self {
            Rows::Range(s, e) => b.get(s..e).map(|x| a.extend_from_slice(x)),
            Rows::Gather(order) => {
                if order.iter().any(|&i| i as usize >= b.len()) {
                    return None;
                }
                a.extend(order.iter().map(|&i| b[i as usize].clone()));
                Some(())
            }
        }
    }
}

/// Appends `rows` of `src` (same physical type, validated by the write path) to `dst`.
fn extend_rows(dst: &mut Column, src: &Column, rows: Rows<'_>) {
    let len = dst.len();
    let ok = same_physical!(&mut dst.data, &src.data, |a, b| rows.append(a, b));
    if ok.is_none() {
        // Not reachable after validation; keep the columns aligned rather than panic.
        push_nulls(dst, rows.len());
        return;
    }
    if !src.nulls.is_empty() || !dst.nulls.is_empty() {
        if dst.nulls.is_empty() {
            dst.start_nulls(len);
        }
        // A column without NULLs has no flags to append.
        if rows.append(&mut dst.nulls, &src.nulls).is_none() {
            dst.nulls.resize(len + rows.len(), false);
        }
    }
}

/// The row order to gather a block in, and the runs over that order.
type Regrouped = (Vec<u32>, Vec<(u32, u32)>);

/// A block whose runs interleave subtables, regrouped subtable by subtable: the order to
/// gather its rows in and the runs over that order, each subtable's rows kept in block order
/// (so a later row of a ts still wins). `None` when no subtable has two runs: the block is
/// appended as it is.
///
/// Why: a loader reading a time-ordered file (TSBS's, any log) sends a block whose every run
/// is one row, as its rows arrive. Kept so, each row would become a piece of its own, and
/// the piece lists grew (and were reallocated and copied) row by row; regrouped, a subtable
/// gets one piece per block. Runs of table indices that name the same subtable are grouped
/// as one.
fn grouped(
    runs: &[(u32, u32)],
    rows: usize,
    uid_of: &impl Fn(u32) -> Option<TableUid>,
) -> Option<Regrouped> {
    let tables = runs.iter().map(|r| r.0 as usize).max()? + 1;
    // A table list far longer than the runs (not what writers send) is left as it is
    // rather than sized for.
    if runs.len() < 2 || tables > runs.len().saturating_mul(4) || u32::try_from(rows).is_err() {
        return None;
    }
    // Most blocks name each table once (a batch of many subtables with a row or a run each):
    // they are appended as they are, found without hashing.
    let mut seen = vec![false; tables];
    if !runs
        .iter()
        .any(|(t, _)| std::mem::replace(&mut seen[*t as usize], true))
    {
        return None;
    }
    // The table index each run's rows are grouped under: the first index of its subtable.
    // (A table index named twice, found above, means some subtable has two runs to merge.)
    let mut canon = vec![u32::MAX; tables];
    let mut first: HashMap<TableUid, u32, UidHash> = HashMap::default();
    let mut total = 0usize;
    for (t, n) in runs {
        let ti = *t as usize;
        if canon[ti] == u32::MAX {
            canon[ti] = match uid_of(*t) {
                Some(uid) => *first.entry(uid).or_insert(*t),
                None => *t,
            };
        }
        total += *n as usize;
    }
    if total != rows {
        return None;
    }
    Some(tidal_common::group_runs(runs, tables, |t| {
        canon.get(t as usize).copied().unwrap_or(u32::MAX)
    }))
}

fn push_nulls(c: &mut Column, n: usize) {
    for _ in 0..n {
        c.push(&Value::Null);
    }
}

/// An all-NULL column of `c`'s physical type and `n` rows.
fn null_like(c: &Column, n: usize) -> Column {
    let t = match &c.data {
        ColumnData::Bool(_) => DataType::Bool,
        ColumnData::Int(_) => DataType::BigInt,
        ColumnData::UInt(_) => DataType::UBigInt,
        ColumnData::Float(_) => DataType::Double,
        ColumnData::Str(_) => DataType::VarChar(1),
        ColumnData::Timestamp(_) => DataType::Timestamp,
    };
    Column::all_null(t, n)
}

/// Pads the narrower of two column sets with NULL columns (a newer schema version added
/// columns), so both have the same width.
fn align(a: &mut Vec<Column>, b: &mut Vec<Column>) {
    let (n, m) = (
        a.first().map(Column::len).unwrap_or(0),
        b.first().map(Column::len).unwrap_or(0),
    );
    while a.len() < b.len() {
        let c = null_like(&b[a.len()], n);
        a.push(c);
    }
    while b.len() < a.len() {
        let c = null_like(&a[b.len()], m);
        b.push(c);
    }
}

/// Consecutive parts of one subtable's rows (ascending, disjoint) as one set of columns, the
/// narrower ones padded with NULL columns.
fn concat_columns(parts: impl IntoIterator<Item = Vec<Column>>) -> Vec<Column> {
    let mut out: Vec<Column> = Vec::new();
    for mut cols in parts {
        if out.is_empty() {
            out = cols;
        } else {
            align(&mut out, &mut cols);
            for (a, b) in out.iter_mut().zip(cols) {
                a.extend_owned(b);
            }
        }
    }
    out
}

/// `older` and `newer` rows of one subtable (each sorted, unique ts) merged in ts order; of a
/// ts in both, `newer`'s row (the later write) is kept.
fn later_wins(mut older: Vec<Column>, mut newer: Vec<Column>) -> Vec<Column> {
    if older.first().is_none_or(|c| c.is_empty()) {
        return newer;
    }
    align(&mut older, &mut newer);
    merge_runs(
        vec![
            Run {
                prio: 0,
                cols: older,
            },
            Run {
                prio: 1,
                cols: newer,
            },
        ],
        Vec::new,
    )
}

/// Sorts a batch by ts, keeping the last copy of a repeated ts.
fn sort_batch(cols: Vec<Column>) -> Vec<Column> {
    let ts = cols.first().map(ts_slice).unwrap_or(&[]);
    if ts.windows(2).all(|w| w[0] < w[1]) {
        return cols;
    }
    let mut idx: Vec<usize> = (0..ts.len()).collect();
    // Stable: equal timestamps keep arrival order, and the last of each run wins below.
    idx.sort_by_key(|i| ts[*i]);
    let mut keep: Vec<usize> = Vec::with_capacity(idx.len());
    for i in idx {
        match keep.last_mut() {
            Some(last) if ts[*last] == ts[i] => *last = i,
            _ => keep.push(i),
        }
    }
    cols.iter().map(|c| c.take(&keep)).collect()
}

fn strictly_ascending(ts: &[i64]) -> bool {
    ts.windows(2).all(|w| w[0] < w[1])
}

impl TableMem {
    fn last_ts(&self) -> Option<i64> {
        self.last
    }

    /// Recomputes [`TableMem::last`] and [`TableMem::tail`] after the pieces changed other
    /// than by an in-order append.
    fn refresh_tail(&mut self, chunks: &[Chunk]) {
        let p = self.pieces.last();
        self.last = p.and_then(|p| p.last_ts(chunks));
        self.tail = match p {
            Some(Piece::Chunk { chunk, end, .. }) => Some((*chunk, *end)),
            _ => None,
        };
    }

    /// How many leading pieces end before `t` (`partition_point`), searched from the end:
    /// late rows are almost always late by a batch or two, so the answer is a few pieces from
    /// the end, and probing there touches a cache line or two instead of a binary search's
    /// dozen misses over a subtable with thousands of pieces.
    fn pieces_ending_before(&self, chunks: &[Chunk], t: i64) -> usize {
        let before = |p: &Piece| p.last_ts(chunks).is_some_and(|l| l < t);
        let pieces = &self.pieces;
        // pieces[hi..] do not end before t; pieces[..lo] do.
        let mut hi = pieces.len();
        let mut step = 1;
        let lo = loop {
            if hi == 0 {
                break 0;
            }
            let i = hi.saturating_sub(step);
            if before(&pieces[i]) {
                break i + 1;
            }
            hi = i;
            step *= 2;
        };
        lo + pieces[lo..hi].partition_point(before)
    }

    /// Whether the held list's rows (none: trivially) all come before `t`: what a piece linked
    /// before the oldest appended one must follow.
    fn held_end_before(&self, chunks: &[Chunk], t: i64) -> bool {
        let held_last = self.pieces.last().map(|p| p.last_ts(chunks));
        held_last.is_none_or(|l| l.is_some_and(|l| l < t))
    }

    /// Moves the appended pieces into `pieces`: every change but an in-order append works on
    /// the list. Their entries in the log stay until the memtable is dropped, so the copies
    /// are counted as more bytes held (a feed with many late rows settles often).
    fn settle(&mut self, appended: &Appended) {
        if self.newest.is_none() {
            return;
        }
        let chain = appended.chain(self.newest.take());
        self.bytes += chain.len() as u64 * PIECE_BYTES;
        // Nearly all appended pieces are chunk pieces, whose clones copy a few numbers; an
        // owned one (merged in the chain) is a few rows.
        self.pieces.extend(chain.into_iter().cloned());
    }

    /// Inserts rows `s..e` of chunk `chunk` (just appended there).
    fn insert_chunk(
        &mut self,
        chunks: &[Chunk],
        appended: &mut Appended,
        chunk: usize,
        s: usize,
        e: usize,
    ) {
        let ts = chunks
            .get(chunk)
            .and_then(|c| c.cols.first())
            .and_then(|c| ts_slice(c).get(s..e))
            .unwrap_or(&[]);
        if ts.is_empty() {
            return;
        }
        let (first, last) = (ts[0], ts[ts.len() - 1]);
        let piece = || Piece::Chunk {
            chunk: chunk as u32,
            start: s as u32,
            end: e as u32,
            first,
            last,
        };
        if self.last_ts().is_none_or(|l| first > l) && strictly_ascending(ts) {
            // The common case: rows after everything held; name them, copy nothing.
            // The last piece is read only when the cached tail says these rows continue it:
            // it is cold otherwise, and reading it was most of this function's time.
            let extend = self.tail == Some((chunk as u32, s as u32));
            let tail = match self.newest {
                Some(i) => appended.get_mut(i).map(|l| &mut l.piece),
                None => self.pieces.last_mut(),
            };
            match tail.filter(|_| extend) {
                // Consecutive runs of one block extend the piece.
                Some(Piece::Chunk {
                    end: pe, last: pl, ..
                }) => {
                    *pe = e as u32;
                    *pl = last;
                }
                _ => {
                    match appended.push(piece(), self.newest) {
                        Ok(at) => self.newest = Some(at),
                        Err(piece) => {
                            self.settle(appended);
                            self.pieces.push(piece);
                        }
                    }
                    self.bytes += PIECE_BYTES;
                }
            }
            self.last = Some(last);
            self.tail = Some((chunk as u32, e as u32));
            return;
        }
        let ascending = strictly_ascending(ts);
        if ascending && self.link_into_gap(chunks, appended, piece()) {
            self.bytes += PIECE_BYTES;
            return;
        }
        if self.merge_into_chain(chunks, appended, &piece()) {
            return;
        }
        self.settle(appended);
        if ascending {
            if let Some(k) = self.gap_for(chunks, ts[0], ts[ts.len() - 1]) {
                // Rows of a batch that was overtaken by a later one: they fall between pieces.
                self.pieces.insert(k, piece());
                self.bytes += PIECE_BYTES;
                self.refresh_tail(chunks);
                return;
            }
        }
        let rows = chunks
            .get(chunk)
            .map(|c| c.cols.iter().map(|col| col.slice(s, e)).collect())
            .unwrap_or_default();
        self.merge_late(chunks, rows);
    }

    /// Links chunk piece `piece` into the subtable's appended chain where its rows fall,
    /// if that is among the newest [`GAP_LINKS_MAX`] appended pieces: between two pieces, or
    /// between two rows of one (which is cut in two there); false (nothing changed)
    /// otherwise. Rows overtaken by a batch or two of later ones (a client's concurrent
    /// requests, parsed and sent in another order than they were written) land there:
    /// linking them in costs a piece or two, where settling the chain into the list first
    /// read every piece appended since the last late rows (cold by then), held them twice,
    /// and merged the rows of a piece they fell inside into a copy.
    fn link_into_gap(&mut self, chunks: &[Chunk], appended: &mut Appended, piece: Piece) -> bool {
        let (Some(first), Some(last)) = (piece.first_ts(chunks), piece.last_ts(chunks)) else {
            return false;
        };
        // `cur`, walking back from the newest piece, and the piece after it (`succ`).
        let Some(mut cur) = self.newest else {
            return false;
        };
        let mut succ: Option<u32> = None;
        for _ in 0..GAP_LINKS_MAX {
            let Some(c) = appended.get(cur) else {
                return false;
            };
            let (Some(cf), Some(cl)) = (c.piece.first_ts(chunks), c.piece.last_ts(chunks)) else {
                return false;
            };
            let prev = c.prev;
            if first > cl {
                // Between `cur` and `succ` (before which the step before found the rows).
                let Some(s) = succ else {
                    return false; // after the newest: an in-order append, not here
                };
                let Ok(at) = appended.push(piece, Some(cur)) else {
                    return false;
                };
                if let Some(n) = appended.get_mut(s) {
                    n.prev = Some(at);
                }
                return true;
            }
            if last >= cf {
                // Within `cur`'s span.
                return self.split_around(chunks, appended, (cur, succ), piece);
            }
            match prev {
                Some(p) => {
                    succ = Some(cur);
                    cur = p;
                }
                None => {
                    // Before the oldest appended piece: after the held list, if its rows end
                    // before these.
                    if !self.held_end_before(chunks, first) {
                        return false;
                    }
                    let Ok(at) = appended.push(piece, None) else {
                        return false;
                    };
                    if let Some(n) = appended.get_mut(cur) {
                        n.prev = Some(at);
                    }
                    return true;
                }
            }
        }
        false
    }

    /// Cuts appended chunk piece `cur` (followed by `succ`, or the newest) in two where the
    /// rows of `piece` fall strictly between two of its rows, and links `piece` between the
    /// halves; false (nothing changed) if they do not.
    fn split_around(
        &mut self,
        chunks: &[Chunk],
        appended: &mut Appended,
        (cur, succ): (u32, Option<u32>),
        piece: Piece,
    ) -> bool {
        let (Some(first), Some(last)) = (piece.first_ts(chunks), piece.last_ts(chunks)) else {
            return false;
        };
        let Some(l) = appended.get(cur) else {
            return false;
        };
        let Piece::Chunk {
            chunk,
            start,
            end,
            first: cf,
            last: cl,
        } = l.piece
        else {
            return false;
        };
        let ts = l.piece.ts(chunks);
        let k = ts.partition_point(|&t| t < first);
        let (Some(&below), Some(&above)) = (k.checked_sub(1).and_then(|i| ts.get(i)), ts.get(k))
        else {
            return false;
        };
        if above <= last {
            return false; // the rows interleave with (or repeat) this piece's
        }
        let split = start + k as u32;
        let Ok(at) = appended.push(piece, Some(cur)) else {
            return false;
        };
        let upper = Piece::Chunk {
            chunk,
            start: split,
            end,
            first: above,
            last: cl,
        };
        let Ok(up) = appended.push(upper, Some(at)) else {
            return false; // `piece` stays in the log, linked from nowhere
        };
        if let Some(c) = appended.get_mut(cur) {
            c.piece = Piece::Chunk {
                chunk,
                start,
                end: split,
                first: cf,
                last: below,
            };
        }
        match succ {
            Some(s) => {
                if let Some(n) = appended.get_mut(s) {
                    n.prev = Some(up);
                }
            }
            // The upper half is the newest now; it ends where `cur` did (`tail` holds).
            None => self.newest = Some(up),
        }
        self.bytes += PIECE_BYTES;
        true
    }

    /// Merges late rows (`run`, just appended to a chunk) that interleave with or repeat the
    /// rows of the subtable's newest appended pieces with those pieces, back to the first
    /// one that ends before them, and links the merged rows, as one owned piece, where those
    /// pieces were: the subtable's newest. False (nothing changed) when that reaches further
    /// back than [`GAP_LINKS_MAX`] pieces or [`CHAIN_MERGE_ROWS_MAX`] rows, or into the held
    /// list.
    ///
    /// Why: concurrent requests reach a data node in another order than they were written,
    /// and the frontend merges several into one block, so a subtable's run often interleaves
    /// with its newest piece (rows of bodies i and i + 2 came first, then i + 1's). Settling
    /// the chain into the list for them read every piece appended since the last late rows
    /// (cold by then) and held each piece twice: at 4,000 trucks through the line protocol,
    /// nearly every appended piece was copied so, a sixth of the memtable's bytes. Here a
    /// merge copies the few rows involved; the replaced entries stay in the log, linked from
    /// nowhere (40 bytes each; an owned one, an earlier merge, gives its rows back).
    fn merge_into_chain(&mut self, chunks: &[Chunk], appended: &mut Appended, run: &Piece) -> bool {
        let Some(&first) = run.ts(chunks).iter().min() else {
            return false;
        };
        // The appended pieces to merge with (newest first), and the one the merged piece
        // follows (`keep`; `None`: the held list, whose rows must end before `first`).
        let mut taken: Vec<u32> = Vec::new();
        let mut rows = run.ts(chunks).len();
        let mut at = self.newest;
        let keep = loop {
            let Some(i) = at else {
                if !self.held_end_before(chunks, first) {
                    return false;
                }
                break None;
            };
            let Some(l) = appended.get(i) else {
                return false;
            };
            if l.piece.last_ts(chunks).is_some_and(|cl| cl < first) {
                break Some(i);
            }
            rows += l.piece.ts(chunks).len();
            if taken.len() == GAP_LINKS_MAX || rows > CHAIN_MERGE_ROWS_MAX {
                return false;
            }
            taken.push(i);
            at = l.prev;
        };
        if taken.is_empty() {
            return false; // after every appended piece: not late
        }
        let mut older = Vec::with_capacity(taken.len());
        for i in taken.iter().rev() {
            let Some(l) = appended.get(*i) else {
                return false;
            };
            older.push(l.piece.clone().into_owned(chunks));
        }
        let merged = later_wins(
            concat_columns(older),
            sort_batch(run.clone().into_owned(chunks)),
        );
        let piece = Piece::Owned(merged);
        let (last, added) = (piece.last_ts(chunks), piece.bytes() + PIECE_BYTES);
        let Ok(at) = appended.push(piece, keep) else {
            return false;
        };
        self.newest = Some(at);
        self.last = last;
        self.tail = None;
        self.bytes += added;
        // The replaced pieces are reachable from no chain now: an owned one (an earlier merge,
        // when late rows keep coming) gives its rows back rather than holding them till the
        // flush.
        for i in taken {
            if let Some(Linked {
                piece: Piece::Owned(cols),
                ..
            }) = appended.get_mut(i)
            {
                let freed: u64 = cols.iter().map(col_bytes).sum();
                *cols = Vec::new();
                self.bytes = self.bytes.saturating_sub(freed);
            }
        }
        true
    }

    /// Where rows spanning `first..=last` fit between the held pieces without overlapping
    /// any (the index to insert a piece at), if they do.
    fn gap_for(&self, chunks: &[Chunk], first: i64, last: i64) -> Option<usize> {
        let k = self.pieces_ending_before(chunks, first);
        match self.pieces.get(k).and_then(|p| p.first_ts(chunks)) {
            Some(next) if last < next => Some(k),
            Some(_) => None,
            None => Some(k),
        }
    }

    /// Inserts rows given as this subtable's own columns (copied).
    fn insert_owned(&mut self, chunks: &[Chunk], appended: &Appended, cols: &[Column]) {
        let ts = cols.first().map(ts_slice).unwrap_or(&[]);
        if ts.is_empty() {
            return;
        }
        self.settle(appended);
        if self.last_ts().is_none_or(|l| ts[0] > l) && strictly_ascending(ts) {
            let added: u64 = cols.iter().map(col_bytes).sum();
            match self.pieces.last_mut() {
                // In-order rows of the same width extend the last owned piece.
                Some(Piece::Owned(last)) if last.len() == cols.len() => {
                    for (a, b) in last.iter_mut().zip(cols) {
                        a.extend(b);
                    }
                }
                _ => self.pieces.push(Piece::Owned(cols.to_vec())),
            }
            self.bytes += added;
            self.refresh_tail(chunks);
            return;
        }
        if strictly_ascending(ts) {
            if let Some(k) = self.gap_for(chunks, ts[0], ts[ts.len() - 1]) {
                self.pieces.insert(k, Piece::Owned(cols.to_vec()));
                self.bytes += cols.iter().map(col_bytes).sum::<u64>();
                self.refresh_tail(chunks);
                return;
            }
        }
        self.merge_late(chunks, cols.to_vec());
    }

    /// Merges rows that are not all after the held ones with the held rows they overlap:
    /// only the pieces within the batch's ts range take part (their rows before the batch's
    /// first ts and after its last are cut off and stay as pieces), so rewriting a few rows
    /// of a subtable with thousands in the memtable costs the batch, not the subtable. The
    /// held rows in range and the batch become one owned piece in their place.
    fn merge_late(&mut self, chunks: &[Chunk], batch: Vec<Column>) {
        let batch = sort_batch(batch);
        let bounds = batch
            .first()
            .map(ts_slice)
            .and_then(|ts| Some((*ts.first()?, *ts.last()?)));
        let Some((first, last)) = bounds else {
            return;
        };
        // pieces[k..m]: every piece holding a row in first..=last (pieces are ascending and
        // disjoint, so those are consecutive).
        let k = self.pieces_ending_before(chunks, first);
        let m =
            k + self.pieces[k..].partition_point(|p| p.first_ts(chunks).is_none_or(|f| f <= last));
        // Bytes are recounted over the pieces this merge replaces only: a subtable may hold
        // thousands of pieces, and late rows are common when batches overtake each other.
        let before: u64 = self.pieces[k..m].iter().map(Piece::bytes).sum();
        let mut middle: Vec<Piece> = self.pieces.drain(k..m).collect();
        let mut front = None;
        if let Some(p) = middle.first_mut() {
            if let Some(rest) = p.split_off_from(first, chunks) {
                front = Some(std::mem::replace(p, rest));
            }
        }
        let back = match (middle.last_mut(), last.checked_add(1)) {
            (Some(p), Some(after)) => p.split_off_from(after, chunks),
            _ => None,
        };
        let tail = concat_columns(middle.into_iter().map(|p| p.into_owned(chunks)));
        let merged = later_wins(tail, batch);
        let placed: Vec<Piece> = front
            .into_iter()
            .chain(std::iter::once(Piece::Owned(merged)))
            .chain(back)
            .filter(|p| !p.ts(chunks).is_empty())
            .collect();
        let after: u64 = placed.iter().map(Piece::bytes).sum();
        self.pieces.splice(k..k, placed);
        self.bytes = (self.bytes + after).saturating_sub(before);
        self.refresh_tail(chunks);
    }
}

/// An empty column of the physical type of `c`, with room for `capacity` rows.
fn empty_like(c: &Column, capacity: usize) -> Column {
    Column::new(match &c.data {
        ColumnData::Bool(_) => ColumnData::Bool(Vec::with_capacity(capacity)),
        ColumnData::Int(_) => ColumnData::Int(Vec::with_capacity(capacity)),
        ColumnData::UInt(_) => ColumnData::UInt(Vec::with_capacity(capacity)),
        ColumnData::Float(_) => ColumnData::Float(Vec::with_capacity(capacity)),
        ColumnData::Str(_) => ColumnData::Str(Vec::with_capacity(capacity)),
        ColumnData::Timestamp(_) => ColumnData::Timestamp(Vec::with_capacity(capacity)),
    })
}

impl Memtable {
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    fn pieces_of<'m>(&'m self, t: &'m TableMem) -> Pieces<'m> {
        Pieces {
            held: &t.pieces,
            newer: self.appended.chain(t.newest),
        }
    }

    /// `t`'s pieces from the newest back, walked as they are read (see [`Memtable::pieces_of`]).
    fn pieces_newest_first<'m>(&'m self, t: &'m TableMem) -> impl Iterator<Item = &'m Piece> + 'm {
        let mut at = t.newest;
        let appended = std::iter::from_fn(move || {
            let l = at.and_then(|i| self.appended.get(i))?;
            at = l.prev;
            Some(&l.piece)
        });
        appended.chain(t.pieces.iter().rev())
    }

    fn rows(&self, t: &TableMem) -> usize {
        let pieces = self.pieces_of(t);
        pieces.iter().map(|p| p.ts(&self.chunks).len()).sum()
    }

    /// Whether no subtable has rows here (a dropped subtable's entry is removed).
    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }

    /// Inserts validated columns (equal lengths, column 0 = non-null timestamps), in WAL order.
    pub fn insert(&mut self, uid: TableUid, cols: &[Column]) {
        let t = self.tables.entry(uid).or_default();
        let before = t.bytes;
        t.note_first(cols.first().map_or(&[][..], ts_slice));
        t.insert_owned(&self.chunks, &self.appended, cols);
        self.bytes = self.bytes - before + t.bytes;
    }

    /// [`Memtable::insert_block_owned`] of a block the caller keeps: its rows are always
    /// copied (the write path gives its blocks up; tests compare the two).
    #[cfg(test)]
    pub fn insert_block(
        &mut self,
        runs: &[(u32, u32)],
        cols: &[Column],
        uid_of: impl Fn(u32) -> Option<TableUid>,
    ) {
        self.insert_block_in(runs, Cow::Borrowed(cols), uid_of);
    }

    /// Inserts a validated row block the caller gives up, in WAL order: run `(i, n)` = the next
    /// `n` rows belong to subtable `uid_of(i)` (`None`: a subtable that is gone; its rows are
    /// skipped). When its runs name each subtable once (as the Writer and `tidal load` send
    /// their blocks) and it is not small, its column vectors become a chunk of their own as
    /// they are. Copying them into a shared chunk was 8.6% of a data node's CPU in `tidal load`
    /// at 100,000 trucks, for nothing: the block's vectors are as dense, and no other block is
    /// appended to them.
    pub fn insert_block_owned(
        &mut self,
        runs: &[(u32, u32)],
        cols: Vec<Column>,
        uid_of: impl Fn(u32) -> Option<TableUid>,
    ) {
        self.insert_block_in(runs, Cow::Owned(cols), uid_of);
    }

    fn insert_block_in(
        &mut self,
        runs: &[(u32, u32)],
        cols: Cow<'_, [Column]>,
        uid_of: impl Fn(u32) -> Option<TableUid>,
    ) {
        let rows = cols.first().map(Column::len).unwrap_or(0);
        if rows == 0 {
            return;
        }
        let regrouped = grouped(runs, rows, &uid_of);
        let runs = regrouped.as_ref().map_or(runs, |(_, r)| r.as_slice());
        self.bytes += cols.iter().map(col_bytes).sum::<u64>();
        let adopt = regrouped.is_none()
            && rows >= ADOPT_ROWS_MIN
            && cols
                .iter()
                .all(|c| c.len() == rows && (c.nulls.is_empty() || c.nulls.len() == rows));
        let (chunk, base) = match cols {
            Cow::Owned(cols) if adopt => {
                // Full from the start: never open, so no other block is appended to it.
                self.chunks.push(Chunk {
                    cols,
                    rows,
                    capacity: rows,
                });
                (self.chunks.len() - 1, 0)
            }
            cols => {
                let chunk = self.chunk_for(&cols, rows);
                let c = &mut self.chunks[chunk];
                let base = c.rows;
                let which = match &regrouped {
                    Some((order, _)) => Rows::Gather(order),
                    None => Rows::Range(0, rows),
                };
                for (d, s) in c.cols.iter_mut().zip(cols.iter()) {
                    extend_rows(d, s, which);
                }
                c.rows += rows;
                (chunk, base)
            }
        };
        let mut row = base;
        for (t, n) in runs {
            let (s, e) = (row, row + *n as usize);
            row = e;
            let Some(uid) = uid_of(*t) else {
                continue;
            };
            let tm = self.tables.entry(uid).or_default();
            let before = tm.bytes;
            let ts = self.chunks[chunk].cols.first().map_or(&[][..], ts_slice);
            tm.note_first(ts.get(s..e).unwrap_or(&[]));
            tm.insert_chunk(&self.chunks, &mut self.appended, chunk, s, e);
            self.bytes = self.bytes - before + tm.bytes;
        }
    }

    /// The open chunk of `cols`' layout with room for `rows` more rows, or a new one.
    fn chunk_for(&mut self, cols: &[Column], rows: usize) -> usize {
        let mut grown = CHUNK_ROWS_MIN;
        if let Some(k) = self
            .open
            .iter()
            .position(|i| self.chunks.get(*i).is_some_and(|c| c.accepts(cols)))
        {
            let i = self.open[k];
            let c = &self.chunks[i];
            if c.capacity - c.rows >= rows {
                return i;
            }
            grown = (c.capacity * 2).min(CHUNK_ROWS_MAX);
            self.open.swap_remove(k);
        }
        let capacity = grown.max(rows);
        self.chunks.push(Chunk {
            cols: cols.iter().map(|c| empty_like(c, capacity)).collect(),
            rows: 0,
            capacity,
        });
        self.open.push(self.chunks.len() - 1);
        self.chunks.len() - 1
    }

    pub fn remove_table(&mut self, uid: TableUid) {
        if let Some(t) = self.tables.remove(&uid) {
            self.bytes = self.bytes.saturating_sub(t.bytes);
        }
    }

    /// The rows of `uid` with `lo <= ts <= hi` as columns `wanted` (column index, type); index
    /// 0 is the ts. Columns a row lacks (written before a column was added) are NULL.
    /// [`Memtable::range_columns`], or `None` when subtable `uid` has no rows here (no empty
    /// columns are built: a scan over many subtables asks this of each one).
    pub fn range_columns_if_any(
        &self,
        uid: TableUid,
        lo: i64,
        hi: i64,
        wanted: &[(usize, DataType)],
    ) -> Option<Vec<Column>> {
        self.tables
            .contains_key(&uid)
            .then(|| self.range_columns(uid, lo, hi, wanted))
    }

    pub fn range_columns(
        &self,
        uid: TableUid,
        lo: i64,
        hi: i64,
        wanted: &[(usize, DataType)],
    ) -> Vec<Column> {
        match self.tables.get(&uid) {
            Some(t) => self.range_columns_in(&self.pieces_of(t), lo, hi, wanted),
            None => wanted.iter().map(|(_, t)| Column::empty(*t, 0)).collect(),
        }
    }

    /// [`Memtable::range_columns`] of a subtable's `pieces`.
    fn range_columns_in(
        &self,
        pieces: &Pieces<'_>,
        lo: i64,
        hi: i64,
        wanted: &[(usize, DataType)],
    ) -> Vec<Column> {
        let empty = || wanted.iter().map(|(_, t)| Column::empty(*t, 0)).collect();
        if lo > hi {
            return empty();
        }
        let chunks = &self.chunks;
        // Pieces are disjoint and ascending: those overlapping [lo, hi] are consecutive.
        let first = pieces.partition_point(|p| p.last_ts(chunks).is_some_and(|l| l < lo));
        let mut hits: Vec<(&[Column], usize, usize)> = Vec::new();
        for p in pieces.iter().skip(first) {
            let ts = p.ts(chunks);
            if ts.first().is_some_and(|f| *f > hi) {
                break;
            }
            let (cols, base, _) = p.view(chunks);
            let s = base + ts.partition_point(|x| *x < lo);
            let e = base + ts.partition_point(|x| *x <= hi);
            if s < e {
                hits.push((cols, s, e));
            }
        }
        if hits.is_empty() {
            return empty();
        }
        let n: usize = hits.iter().map(|(_, s, e)| e - s).sum();
        if let [(cols, s, e)] = hits.as_slice() {
            return wanted
                .iter()
                .map(|(i, ty)| match cols.get(*i) {
                    Some(c) if *s == 0 && *e == c.len() => c.clone(),
                    Some(c) => c.slice(*s, *e),
                    None => Column::all_null(*ty, e - s),
                })
                .collect();
        }
        wanted
            .iter()
            .map(|(i, ty)| {
                let mut out = match hits.first().and_then(|(cols, _, _)| cols.get(*i)) {
                    // The output takes the physical type the rows have.
                    Some(c) => empty_like(c, n),
                    None => Column::empty(*ty, n),
                };
                for (cols, s, e) in &hits {
                    match cols.get(*i) {
                        Some(c) => extend_rows(&mut out, c, Rows::Range(*s, *e)),
                        None => push_nulls(&mut out, e - s),
                    }
                }
                if out.nulls.iter().all(|x| !*x) {
                    out.nulls = Vec::new();
                }
                out
            })
            .collect()
    }

    /// The last row of `uid` here: its ts, and the columns and index holding it (columns may
    /// be fewer than the STABLE's: written before a column was added).
    pub fn last_row_view(&self, uid: TableUid) -> Option<(i64, &[Column], usize)> {
        let t = self.tables.get(&uid)?;
        let ts = t.last_ts()?;
        let last = match t.newest {
            Some(i) => self.appended.get(i).map(|l| &l.piece),
            None => t.pieces.last(),
        };
        let (cols, s, e) = last?.view(&self.chunks);
        (e > s).then(|| (ts, cols, e - 1))
    }

    /// Folds the rows of `uid` here into a last-row cache entry (see [`Entry::update_range`]),
    /// newest piece first; with `row_only`, only the last row (the caller then must not trust
    /// the entry's LAST values). Pieces are disjoint in ts, so the order changes nothing but
    /// where the fold may stop: once the row and every column's value are newer than all the
    /// older pieces hold, those cannot change the entry.
    pub fn fold_into(&self, uid: TableUid, entry: &mut Entry, row_only: bool) {
        let Some(t) = self.tables.get(&uid) else {
            return;
        };
        let chunks = &self.chunks;
        // From the newest piece back, and usually only the newest: a flush folds every
        // subtable it wrote, and gathering each one's whole chain of pieces first was a
        // tenth of a flush of 100,000s of subtables.
        let mut pieces = self.pieces_newest_first(t).peekable();
        while let Some(p) = pieces.next() {
            let (cols, s, e) = p.view(chunks);
            if e <= s {
                continue;
            }
            if row_only {
                entry.update_range(cols, e - 1, e);
                return;
            }
            entry.update_range(cols, s, e);
            let older = pieces.peek().and_then(|q| q.last_ts(chunks));
            let Some(older) = older else { return };
            let settled = entry.row.as_ref().is_some_and(|(ts, _)| *ts > older)
                && (!entry.values_loaded
                    || entry
                        .values
                        .iter()
                        .skip(1)
                        .all(|v| v.as_ref().is_some_and(|(ts, _)| *ts > older)));
            if settled {
                return;
            }
        }
    }

    /// The rows of `uid` held here.
    pub fn rows_of(&self, uid: TableUid) -> u64 {
        self.tables.get(&uid).map_or(0, |t| self.rows(t) as u64)
    }

    /// The subtables held here (with or without rows).
    pub fn table_uids(&self) -> impl Iterator<Item = TableUid> + '_ {
        self.tables.keys().copied()
    }

    /// First and last ts of `uid`.
    pub fn ts_bounds(&self, uid: TableUid) -> Option<(i64, i64)> {
        let t = self.tables.get(&uid)?;
        // Both kept beside the entry (the last as the write path keeps it for LAST_ROW).
        match (t.first, t.last_ts()) {
            (Some(first), Some(last)) => Some((first, last)),
            // No rows, or bounds not kept (not expected): read every piece.
            _ => self.ts_bounds_in(&self.pieces_of(t)),
        }
    }

    fn ts_bounds_in(&self, pieces: &Pieces<'_>) -> Option<(i64, i64)> {
        let chunks = &self.chunks;
        let first = pieces.iter().find_map(|p| p.first_ts(chunks))?;
        let last = pieces.iter().rev().find_map(|p| p.last_ts(chunks))?;
        Some((first, last))
    }

    /// The first ts of `uid` at or after `from`.
    #[cfg(test)]
    pub fn next_ts(&self, uid: TableUid, from: i64) -> Option<i64> {
        let t = self.tables.get(&uid)?;
        self.next_ts_in(&self.pieces_of(t), from)
    }

    #[cfg(test)]
    fn next_ts_in(&self, pieces: &Pieces<'_>, from: i64) -> Option<i64> {
        let chunks = &self.chunks;
        let k = pieces.partition_point(|p| p.last_ts(chunks).is_some_and(|l| l < from));
        let next = pieces.iter().skip(k).find_map(|p| {
            let ts = p.ts(chunks);
            ts.get(ts.partition_point(|x| *x < from)).copied()
        });
        next
    }

    /// Every subtable with rows, by ascending uid, each with its pieces gathered once: a
    /// flush reads each one's bounds, windows and columns, and gathering its chain of
    /// appended pieces (a walk through memory last touched when its rows came) for each of
    /// those was a fifth of a flush of 100,000s of subtables with a few rows each.
    pub fn tables_by_uid(&self) -> impl Iterator<Item = (TableUid, TableRows<'_>)> + '_ {
        let mut uids: Vec<TableUid> = self.tables.keys().copied().collect();
        uids.sort_unstable();
        let newer = self.appended_by_table(&uids);
        uids.into_iter().zip(newer).filter_map(move |(uid, newer)| {
            let t = self.tables.get(&uid)?;
            let pieces = Pieces {
                held: &t.pieces,
                newer,
            };
            let rows = TableRows { mem: self, pieces };
            rows.ts_bounds().map(|_| (uid, rows))
        })
    }

    /// The appended pieces of each of `uids`, oldest first (what [`Appended::chain`] gives
    /// each). A chain is walked by a dependent load per piece, with 1,000s of subtables of a
    /// row or two per write a cache miss each (a tenth of a flush's CPU at 4,000 trucks);
    /// here [`CHAIN_LANES`] chains are walked side by side, a step of each in turn, so that
    /// their misses overlap instead of following one another.
    fn appended_by_table(&self, uids: &[TableUid]) -> Vec<Vec<&Piece>> {
        let mut out: Vec<Vec<&Piece>> = Vec::with_capacity(uids.len());
        for group in uids.chunks(CHAIN_LANES) {
            let mut at = [None; CHAIN_LANES];
            for (a, uid) in at.iter_mut().zip(group) {
                *a = self.tables.get(uid).and_then(|t| t.newest);
            }
            let mut lists: [Vec<&Piece>; CHAIN_LANES] = Default::default();
            loop {
                let mut walking = false;
                for (a, list) in at.iter_mut().zip(lists.iter_mut()) {
                    let Some(l) = a.and_then(|i| self.appended.get(i)) else {
                        *a = None;
                        continue;
                    };
                    list.push(&l.piece);
                    *a = l.prev;
                    walking = true;
                }
                if !walking {
                    break;
                }
            }
            for mut list in lists.into_iter().take(group.len()) {
                list.reverse();
                out.push(list);
            }
        }
        out
    }

    /// Every row of each of `tables` (from [`Memtable::tables_by_uid`]) as its columns
    /// `wanted` (index 0 the ts): what [`TableRows::range_columns`] over all its rows gives
    /// (but for the values of NULL rows, which no reader looks at), for many subtables at once.
    ///
    /// Why: a subtable written by a time-ordered feed is hundreds of pieces of a row or two,
    /// each in a different block of a chunk, and gathering them subtable by subtable read a
    /// cold cache line per column per row, jumping from chunk to chunk: half of a flush's CPU
    /// at 4,000 trucks. Here the pieces of all of `tables` are copied in the order they lie in
    /// the chunks (ascending addresses, which the hardware prefetches, and a line read once
    /// for every wanted row in it); each row lands at its place in its subtable's columns,
    /// which are sized first. Measured: a flush's CPU 14% lower at 4,000 trucks (4 + 4 runs),
    /// the same at 100,000 (a subtable's 16 rows).
    pub fn gather_all(
        &self,
        tables: &[(&TableRows<'_>, &[(usize, DataType)])],
    ) -> Vec<Vec<Column>> {
        let chunks = &self.chunks;
        let mut slots: Vec<Slot> = Vec::new();
        let mut owned: Vec<(usize, usize, &Piece)> = Vec::new();
        let mut outs: Vec<Vec<Column>> = Vec::with_capacity(tables.len());
        for (ti, (rows, wanted)) in tables.iter().enumerate() {
            let mut n = 0usize;
            let mut first: Option<&[Column]> = None;
            for p in rows.pieces.iter() {
                let (cols, s, e) = p.view(chunks);
                if e <= s {
                    continue;
                }
                first.get_or_insert(cols);
                match p {
                    Piece::Chunk { chunk, .. } => slots.push(Slot {
                        chunk: *chunk,
                        start: s as u32,
                        end: e as u32,
                        table: ti as u32,
                        at: n as u32,
                    }),
                    Piece::Owned(_) => owned.push((ti, n, p)),
                }
                n += e - s;
            }
            outs.push(
                wanted
                    .iter()
                    .map(|(i, ty)| match first.and_then(|cols| cols.get(*i)) {
                        // The output takes the physical type the rows have.
                        Some(c) => zeroed(empty_like(c, n), n),
                        None => zeroed(Column::empty(*ty, n), n),
                    })
                    .collect(),
            );
        }
        slots.sort_unstable_by_key(|s| (s.chunk, s.start));
        let places = slots
            .iter()
            .filter_map(|s| {
                let c = chunks.get(s.chunk as usize)?;
                Some((
                    s.table as usize,
                    s.at as usize,
                    &c.cols[..],
                    s.start as usize,
                    s.end as usize,
                ))
            })
            .chain(owned.iter().map(|&(ti, at, p)| {
                let (cols, s, e) = p.view(chunks);
                (ti, at, cols, s, e)
            }));
        for (ti, at, cols, s, e) in places {
            let (Some(out), Some((_, wanted))) = (outs.get_mut(ti), tables.get(ti)) else {
                continue;
            };
            for ((i, _), dst) in wanted.iter().zip(out.iter_mut()) {
                put_rows(dst, at, cols.get(*i), s, e);
            }
        }
        outs
    }

    /// The subtables with rows, sorted by uid.
    #[cfg(test)]
    pub fn uids(&self) -> Vec<TableUid> {
        let mut v: Vec<TableUid> = self
            .tables
            .iter()
            .filter(|(_, t)| self.rows(t) > 0)
            .map(|(k, _)| *k)
            .collect();
        v.sort();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tidal_common::Value;

    fn cols(rows: &[(i64, i64)]) -> Vec<Column> {
        vec![
            Column::new(ColumnData::Timestamp(rows.iter().map(|r| r.0).collect())),
            Column::new(ColumnData::Int(rows.iter().map(|r| r.1).collect())),
        ]
    }

    fn all(m: &Memtable) -> Vec<(i64, Value)> {
        let c = m.range_columns(
            TableUid(1),
            i64::MIN,
            i64::MAX,
            &[
                (0, DataType::Timestamp),
                (1, DataType::BigInt),
                (2, DataType::Double),
            ],
        );
        assert!((0..c[2].len()).all(|i| c[2].get(i) == Value::Null));
        (0..c[0].len())
            .map(|i| (ts_slice(&c[0])[i], c[1].get(i)))
            .collect()
    }

    #[test]
    fn appends_merges_and_last_write_wins() {
        let mut m = Memtable::default();
        m.insert(TableUid(1), &cols(&[(1, 10), (3, 30)]));
        m.insert(TableUid(1), &cols(&[(5, 50), (4, 40), (5, 55)])); // unsorted, repeated ts
        m.insert(TableUid(1), &cols(&[(0, 0), (3, 33)])); // out of order, replaces 3
        assert_eq!(
            all(&m),
            [(0, 0), (1, 10), (3, 33), (4, 40), (5, 55)]
                .map(|(t, v)| (t, Value::Int(v)))
                .to_vec()
        );
        assert_eq!(m.ts_bounds(TableUid(1)), Some((0, 5)));
        assert_eq!(m.next_ts(TableUid(1), 2), Some(3));
        assert!(m.bytes() > 0);
        m.remove_table(TableUid(1));
        assert_eq!(m.bytes(), 0);
    }

    #[test]
    fn overtaken_rows_fit_between_pieces_without_a_merge() {
        let mut m = Memtable::default();
        let t = TableUid(1);
        m.insert_block(&[(0, 2)], &cols(&[(50, 5), (60, 6)]), |_| Some(t));
        m.insert_block(&[(0, 2)], &cols(&[(10, 1), (20, 2)]), |_| Some(t));
        m.insert_block(&[(0, 1)], &cols(&[(30, 3)]), |_| Some(t));
        m.insert(t, &cols(&[(40, 4)]));
        m.insert(t, &cols(&[(5, 0)]));
        let pieces = m.tables.get(&t).map(|x| m.pieces_of(x).len());
        assert_eq!(pieces, Some(5), "no piece was merged");
        assert_eq!(
            all(&m),
            [(5, 0), (10, 1), (20, 2), (30, 3), (40, 4), (50, 5), (60, 6)]
                .map(|(t, v)| (t, Value::Int(v)))
                .to_vec()
        );
        // Overlapping rows are merged (and the later write wins).
        m.insert_block(&[(0, 2)], &cols(&[(20, 22), (25, 25)]), |_| Some(t));
        assert_eq!(all(&m)[2..4], [(20, Value::Int(22)), (25, Value::Int(25))]);
        assert_eq!(m.ts_bounds(t), Some((5, 60)));
    }

    /// Writes `rows` of `uid` in a block with one row of another subtable after them (at the
    /// next `filler` ts), so that each call's rows of `uid` are a piece of their own.
    fn put_alone(m: &mut Memtable, uid: TableUid, rows: &[(i64, i64)], filler: &mut i64) {
        let mut r = rows.to_vec();
        *filler += 1;
        r.push((*filler, 0));
        let n = rows.len() as u32;
        m.insert_block(&[(0, n), (1, 1)], &cols(&r), |i| {
            Some(if i == 0 { uid } else { TableUid(9) })
        });
    }

    /// Rows that fall between two of the newest appended pieces (overtaken by a batch or
    /// two) are linked in there: nothing is settled into the list, and each costs one piece.
    #[test]
    fn rows_overtaken_by_a_batch_or_two_are_linked_in_without_settling() {
        let mut m = Memtable::default();
        let t = TableUid(1);
        let mut filler = 1000i64;
        let mut put = |m: &mut Memtable, uid: TableUid, rows: &[(i64, i64)]| {
            put_alone(m, uid, rows, &mut filler)
        };
        for ts in [10i64, 20, 30, 40, 50] {
            put(&mut m, t, &[(ts, ts)]);
        }
        let held = |m: &Memtable| m.tables.get(&t).map(|x| x.pieces.len());
        // Just before the newest, and four pieces back.
        for ts in [45i64, 25] {
            put(&mut m, t, &[(ts, ts)]);
        }
        assert_eq!(held(&m), Some(0), "nothing settled");
        assert_eq!(m.appended.len(), 14, "a piece each");
        let want = |v: &[i64]| v.iter().map(|&x| (x, Value::Int(x))).collect::<Vec<_>>();
        assert_eq!(all(&m), want(&[10, 20, 25, 30, 40, 45, 50]));
        assert_eq!(m.ts_bounds(t), Some((10, 50)));
        assert_eq!(m.last_row_view(t).map(|(ts, _, _)| ts), Some(50));
        // A ts held already (at the end of the piece before a gap) replaces the row.
        put(&mut m, t, &[(40, 400)]);
        let mut w = want(&[10, 20, 25, 30, 40, 45, 50]);
        w[4].1 = Value::Int(400);
        assert_eq!(all(&m), w);
        put(&mut m, t, &[(40, 40)]);
        // Before every piece, when those are the newest few.
        let u = TableUid(2);
        for ts in [20i64, 30, 10] {
            put(&mut m, u, &[(ts, ts)]);
        }
        assert_eq!(m.tables.get(&u).map(|x| x.pieces.len()), Some(0));
        assert_eq!(m.ts_bounds(u), Some((10, 30)));
        m.remove_table(u);
        // The newest still takes in-order rows; two rows spanning a piece are merged.
        put(&mut m, t, &[(60, 60)]);
        put(&mut m, t, &[(42, 42), (47, 47)]);
        assert_eq!(all(&m), want(&[10, 20, 25, 30, 40, 42, 45, 47, 50, 60]));
        // Too far back (beyond the newest few pieces): settled, then placed in the list.
        put(&mut m, t, &[(15, 15)]);
        assert_eq!(all(&m), want(&[10, 15, 20, 25, 30, 40, 42, 45, 47, 50, 60]));
        // Overlapping the piece before the gap: merged, the later write winning.
        put(&mut m, t, &[(60, 6), (65, 65)]);
        put(&mut m, t, &[(25, 2), (62, 62)]);
        let mut w = want(&[10, 15, 20, 25, 30, 40, 42, 45, 47, 50, 60, 62, 65]);
        w[3].1 = Value::Int(2);
        w[10].1 = Value::Int(6);
        assert_eq!(all(&m), w);
        // Rows that fall between two rows of one piece cut it in two.
        put(&mut m, t, &[(100, 100), (110, 110), (120, 120)]);
        let settled = held(&m);
        let pieces = m.appended.len();
        put(&mut m, t, &[(105, 105)]);
        put(&mut m, t, &[(115, 115), (117, 117)]);
        assert_eq!(held(&m), settled, "nothing settled");
        assert_eq!(
            m.appended.len(),
            pieces + 2 * 3,
            "each: the rows, the upper half, a filler"
        );
        let tail = &all(&m)[w.len()..];
        assert_eq!(tail, want(&[100, 105, 110, 115, 117, 120]));
        assert_eq!(m.last_row_view(t).map(|(ts, _, _)| ts), Some(120));
        assert_eq!(m.ts_bounds(t), Some((10, 120)));
        // The newest (an upper half) still takes in-order rows at the end of its chunk rows.
        put(&mut m, t, &[(130, 130)]);
        // Rows that interleave with a piece's are merged.
        put(&mut m, t, &[(113, 113), (116, 116)]);
        let tail = &all(&m)[w.len()..];
        assert_eq!(tail, want(&[100, 105, 110, 113, 115, 116, 117, 120, 130]));
    }

    /// Rows that interleave with (or repeat) the rows of the newest few appended pieces are
    /// merged with those pieces into one, linked where they were: nothing is settled.
    #[test]
    fn rows_interleaving_the_newest_pieces_are_merged_in_the_chain() {
        let mut m = Memtable::default();
        let t = TableUid(1);
        let mut filler = 100_000i64;
        let mut put = |m: &mut Memtable, rows: &[(i64, i64)]| put_alone(m, t, rows, &mut filler);
        for ts in [10i64, 20, 30] {
            put(&mut m, &[(ts, ts)]);
        }
        let held = |m: &Memtable| m.tables.get(&t).map(|x| x.pieces.len());
        let want = |v: &[i64]| v.iter().map(|&x| (x, Value::Int(x))).collect::<Vec<_>>();
        // 15 and 25 around 20, before 30: neither a gap nor within two rows of one piece.
        let pieces = m.appended.len();
        put(&mut m, &[(15, 15), (25, 25)]);
        assert_eq!(held(&m), Some(0), "nothing settled");
        assert_eq!(
            m.appended.len(),
            pieces + 2,
            "the merged piece and the filler"
        );
        assert_eq!(all(&m), want(&[10, 15, 20, 25, 30]));
        assert_eq!(m.ts_bounds(t), Some((10, 30)));
        assert_eq!(m.last_row_view(t).map(|(ts, _, _)| ts), Some(30));
        // A repeated ts: the later write wins; rows after the newest one extend it.
        put(&mut m, &[(20, 200), (35, 35)]);
        let mut w = want(&[10, 15, 20, 25, 30, 35]);
        w[2].1 = Value::Int(200);
        assert_eq!(all(&m), w);
        assert_eq!(m.last_row_view(t).map(|(ts, _, _)| ts), Some(35));
        // The merged piece is the newest: in-order rows follow it, late ones merge again.
        put(&mut m, &[(40, 40)]);
        put(&mut m, &[(33, 33), (37, 37), (36, 36)]);
        assert_eq!(held(&m), Some(0), "nothing settled");
        let mut w = want(&[10, 15, 20, 25, 30, 33, 35, 36, 37, 40]);
        w[2].1 = Value::Int(200);
        assert_eq!(all(&m), w);
        assert_eq!(m.ts_bounds(t), Some((10, 40)));
        // Only the newest merged piece holds rows: the ones it replaced gave theirs back.
        let owned_with_rows = |m: &Memtable| {
            (0..m.appended.len() as u32)
                .filter_map(|i| m.appended.get(i))
                .filter(|l| matches!(&l.piece, Piece::Owned(c) if c.first().is_some_and(|c| !c.is_empty())))
                .count()
        };
        assert_eq!(owned_with_rows(&m), 1);
        // More rows than a chain merge takes: settled into the list, then merged there.
        let many: Vec<(i64, i64)> = (0..300).map(|i| (1000 + 2 * i, i)).collect();
        put(&mut m, &many);
        put(&mut m, &[(1001, -1), (1003, -3)]);
        assert!(held(&m).is_some_and(|h| h > 0), "settled");
        let got = all(&m);
        assert_eq!(got.len(), w.len() + 302);
        assert_eq!(got[w.len() + 1], (1001, Value::Int(-1)));
        assert_eq!(got[w.len() + 3], (1003, Value::Int(-3)));
        assert!(got.windows(2).all(|p| p[0].0 < p[1].0), "ascending, unique");
    }

    /// Pieces moved from the log into a subtable's list by a late row stay in the log too,
    /// and the bytes held count both.
    #[test]
    fn settled_pieces_count_twice() {
        let mut m = Memtable::default();
        let t = TableUid(1);
        // Two subtables a row each per block: every row is a piece of its own.
        for b in 0..10i64 {
            let rows = cols(&[(b * 10, b), (b * 10, b)]);
            m.insert_block(&[(0, 1), (1, 1)], &rows, |i| {
                Some(TableUid(u64::from(i) + 1))
            });
        }
        assert_eq!(m.appended.len(), 20);
        let before = m.bytes();
        m.insert_block(&[(0, 1)], &cols(&[(5, 0)]), |_| Some(t));
        assert_eq!(m.appended.len(), 20, "the log keeps its entries");
        assert!(
            m.bytes() >= before + 11 * PIECE_BYTES,
            "{} after {before}",
            m.bytes()
        );
    }

    #[test]
    fn late_rows_merge_into_the_tail_only() {
        let mut m = Memtable::default();
        m.insert(TableUid(1), &cols(&[(1, 10), (3, 30), (5, 50), (7, 70)]));
        m.insert(TableUid(1), &cols(&[(5, 55), (4, 40)]));
        m.insert(TableUid(1), &cols(&[(8, 80)]));
        m.insert(TableUid(1), &cols(&[(2, 20), (9, 90)]));
        assert_eq!(
            all(&m),
            [
                (1, 10),
                (2, 20),
                (3, 30),
                (4, 40),
                (5, 55),
                (7, 70),
                (8, 80),
                (9, 90)
            ]
            .map(|(t, v)| (t, Value::Int(v)))
            .to_vec()
        );
    }

    #[test]
    fn ranges_insert_like_whole_batches() {
        let src = cols(&[
            (7, 70),
            (1, 10),
            (2, 20),
            (3, 30),
            (2, 22),
            (9, 90),
            (10, 100),
        ]);
        let mut a = Memtable::default();
        let mut b = Memtable::default();
        // One block: runs of table 1 between rows of table 2 and of a table that is gone.
        let mut block: Vec<Column> = src.iter().map(|c| c.slice(0, 0)).collect();
        let mut runs = Vec::new();
        for (k, (s, e)) in [(1, 3), (3, 4), (0, 1), (4, 6), (6, 7)]
            .into_iter()
            .enumerate()
        {
            for (d, c) in block.iter_mut().zip(&src) {
                d.extend(&c.slice(s, e));
            }
            runs.push((0, (e - s) as u32));
            let other = cols(&[(100 + k as i64, 0)]);
            for (d, c) in block.iter_mut().zip(&other) {
                d.extend(c);
            }
            runs.push((1 + (k % 2) as u32, 1));
            let part: Vec<Column> = src.iter().map(|c| c.slice(s, e)).collect();
            b.insert(TableUid(1), &part);
        }
        a.insert_block(&runs, &block, |i| match i {
            0 => Some(TableUid(1)),
            1 => Some(TableUid(2)),
            _ => None,
        });
        assert_eq!(all(&a), all(&b));
        assert_eq!(
            all(&a),
            [(1, 10), (2, 22), (3, 30), (7, 70), (9, 90), (10, 100)]
                .map(|(t, v)| (t, Value::Int(v)))
                .to_vec()
        );
        assert!(a.bytes() > 0 && b.bytes() > 0);
        // Ranges across chunk and owned pieces, bounds and next ts.
        let c = a.range_columns(
            TableUid(1),
            3,
            9,
            &[(0, DataType::Timestamp), (1, DataType::BigInt)],
        );
        assert_eq!(ts_slice(&c[0]), &[3, 7, 9]);
        assert_eq!(a.ts_bounds(TableUid(1)), Some((1, 10)));
        assert_eq!(a.next_ts(TableUid(1), 8), Some(9));
        assert_eq!(a.next_ts(TableUid(1), 11), None);
        assert_eq!(a.uids(), vec![TableUid(1), TableUid(2)]);
        assert_eq!(a.ts_bounds(TableUid(2)), Some((100, 104)));
        // A second block lands in the same chunk; a huge one gets a chunk of its own.
        let before = a.chunks.len();
        a.insert_block(&[(0, 1)], &cols(&[(11, 110)]), |_| Some(TableUid(1)));
        assert_eq!(a.chunks.len(), before);
        assert_eq!(a.ts_bounds(TableUid(1)), Some((1, 11)));
        let big: Vec<(i64, i64)> = (0..CHUNK_ROWS_MAX as i64 + 1)
            .map(|i| (1000 + i, i))
            .collect();
        a.insert_block(&[(0, big.len() as u32)], &cols(&big), |_| Some(TableUid(3)));
        assert_eq!(a.chunks.len(), before + 1);
        assert_eq!(
            a.ts_bounds(TableUid(3)),
            Some((1000, 1000 + CHUNK_ROWS_MAX as i64))
        );
    }

    /// A block whose runs are single rows of alternating subtables (a time-ordered file, as
    /// a loader reads it) gives each subtable one piece, holding its rows in order.
    #[test]
    fn interleaved_runs_make_one_piece_per_subtable() {
        let rows: Vec<(i64, i64)> = (0..300).map(|i| (i / 3, i)).collect();
        let runs: Vec<(u32, u32)> = (0..300).map(|i| (i % 3, 1)).collect();
        let mut m = Memtable::default();
        m.insert_block(&runs, &cols(&rows), |t| Some(TableUid(u64::from(t))));
        for t in 0..3u64 {
            let tm = &m.tables[&TableUid(t)];
            assert_eq!(m.pieces_of(tm).len(), 1, "subtable {t}");
            let c = m.range_columns(
                TableUid(t),
                i64::MIN,
                i64::MAX,
                &[(0, DataType::Timestamp), (1, DataType::BigInt)],
            );
            assert_eq!(ts_slice(&c[0]), (0..100).collect::<Vec<i64>>().as_slice());
            let want: Vec<Value> = (0..100).map(|i| Value::Int(3 * i + t as i64)).collect();
            assert_eq!((0..100).map(|i| c[1].get(i)).collect::<Vec<_>>(), want);
        }
    }

    /// A block given up by its write whose runs name each subtable once becomes a chunk as
    /// it is (its vectors are not copied), full, so the next block goes elsewhere; one whose
    /// runs interleave subtables is gathered into a shared chunk as before.
    #[test]
    fn a_given_up_block_becomes_its_own_chunk_unless_it_must_be_regrouped() {
        let mut m = Memtable::default();
        let rows: Vec<(i64, i64)> = (0..40).map(|i| (i % 10, i)).collect();
        let runs = [(0u32, 10u32), (1, 10), (2, 10), (3, 10)];
        let block = cols(&rows);
        let at = match &block[0].data {
            ColumnData::Timestamp(v) => v.as_ptr(),
            _ => unreachable!(),
        };
        m.insert_block_owned(&runs, block, |t| Some(TableUid(u64::from(t))));
        assert_eq!(m.chunks.len(), 1);
        assert!(m.open.is_empty(), "an adopted chunk takes no other block");
        assert_eq!(ts_slice(&m.chunks[0].cols[0]).as_ptr(), at, "not copied");
        // Interleaved runs: gathered into a new shared chunk.
        let later: Vec<(i64, i64)> = (0..8).map(|i| (10 + i / 2, 100 + i)).collect();
        let interleaved: Vec<(u32, u32)> = (0..8).map(|i| (i % 2, 1)).collect();
        m.insert_block_owned(&interleaved, cols(&later), |t| Some(TableUid(u64::from(t))));
        assert_eq!((m.chunks.len(), m.open.len()), (2, 1));
        for t in 0..4u64 {
            let c = m.range_columns(
                TableUid(t),
                i64::MIN,
                i64::MAX,
                &[(0, DataType::Timestamp), (1, DataType::BigInt)],
            );
            let mut want: Vec<(i64, i64)> = (0..10).map(|i| (i, 10 * t as i64 + i)).collect();
            if t < 2 {
                want.extend((0..4).map(|i| (10 + i, 100 + 2 * i + t as i64)));
            }
            let got: Vec<(i64, i64)> = (0..c[0].len())
                .map(|i| (ts_slice(&c[0])[i], c[1].get(i).as_i64().unwrap_or(-1)))
                .collect();
            assert_eq!(got, want, "subtable {t}");
        }
        // Counted as the same rows copied are.
        let mut copied = Memtable::default();
        copied.insert_block(&runs, &cols(&rows), |t| Some(TableUid(u64::from(t))));
        copied.insert_block(&interleaved, &cols(&later), |t| {
            Some(TableUid(u64::from(t)))
        });
        assert_eq!(m.bytes(), copied.bytes());
    }

    /// Random blocks (runs of several subtables, in order, overtaking, overlapping, repeated
    /// ts; some as per-subtable columns) against a model where a later write of a (subtable, ts) wins: every subtable's rows,
    /// bounds, next ts and random ranges agree after every block.
    #[test]
    fn a_rewrite_in_the_middle_merges_only_the_rows_it_overlaps() {
        let mut m = Memtable::default();
        let uid = TableUid(1);
        // 100 in-order blocks of 10 rows: 100 chunk pieces
        for b in 0..100i64 {
            let rows: Vec<(i64, i64)> = (0..10).map(|i| (b * 10 + i, 0)).collect();
            m.insert_block(&[(0, 10)], &cols(&rows), |_| Some(uid));
        }
        let pieces = m.pieces_of(&m.tables[&uid]).len();
        // rows 503..507 written again: pieces before and after stay chunk pieces
        m.insert_block(
            &[(0, 4)],
            &cols(&[(503, 1), (504, 1), (505, 1), (506, 1)]),
            |_| Some(uid),
        );
        let tm = m.pieces_of(&m.tables[&uid]);
        let owned: Vec<usize> = tm
            .iter()
            .map(|p| match p {
                Piece::Owned(c) => c[0].len(),
                Piece::Chunk { .. } => 0,
            })
            .filter(|n| *n > 0)
            .collect();
        assert_eq!(
            owned,
            vec![4],
            "only the 4 rewritten rows were merged and copied"
        );
        // piece 50 (rows 500..510) became: 500..503, the merged 503..507, 507..510
        assert_eq!(tm.len(), pieces + 2);
        let all = all(&m);
        assert_eq!(all.len(), 1000);
        for (i, (ts, v)) in all.iter().enumerate() {
            assert_eq!(*ts, i as i64);
            let want = if (503..507).contains(ts) { 1 } else { 0 };
            assert_eq!(*v, Value::Int(want), "ts {ts}");
        }
    }

    #[test]
    fn random_blocks_match_a_model() {
        use rand::{Rng, SeedableRng};
        use std::collections::BTreeMap;
        for seed in 0..40u64 {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let mut m = Memtable::default();
            let mut model: BTreeMap<u64, BTreeMap<i64, i64>> = BTreeMap::new();
            let mut next = [0i64; 4];
            for step in 0..60 {
                let mut rows = Vec::new();
                let mut runs = Vec::new();
                for _ in 0..rng.random_range(1..8) {
                    // Table indices 0 and 3 name one subtable, as two names of a block may.
                    let t = rng.random_range(0..4usize);
                    let u = t % 3;
                    let n = rng.random_range(1..6);
                    let mut ts = match rng.random_range(0..4) {
                        // Mostly after what the subtable holds; else anywhere before it.
                        0 => rng.random_range(0..next[u].max(1)),
                        _ => next[u] + rng.random_range(0..3),
                    };
                    for _ in 0..n {
                        let v = step * 1000 + rows.len() as i64;
                        rows.push((ts, v));
                        model.entry(u as u64).or_default().insert(ts, v);
                        next[u] = next[u].max(ts + 1);
                        ts += if rng.random_range(0..6) == 0 {
                            0
                        } else {
                            rng.random_range(1..3)
                        };
                    }
                    runs.push((t as u32, n as u32));
                }
                let block = cols(&rows);
                if rng.random_range(0..5) == 0 {
                    // Some writes come as per-subtable columns (owned pieces).
                    let mut at = 0;
                    for (t, n) in &runs {
                        let part: Vec<Column> = block
                            .iter()
                            .map(|c| c.slice(at, at + *n as usize))
                            .collect();
                        m.insert(TableUid(u64::from(*t % 3)), &part);
                        at += *n as usize;
                    }
                } else if rng.random_range(0..2) == 0 {
                    m.insert_block(&runs, &block, |t| Some(TableUid(u64::from(t % 3))));
                } else {
                    // A block given up by its write: kept as a chunk of its own when its
                    // runs name each table index once (tests adopt from 4 rows on).
                    m.insert_block_owned(&runs, block, |t| Some(TableUid(u64::from(t % 3))));
                }
                // The bounds a chunk piece keeps are its rows' own, as are the copies of the
                // last piece's; the search from the end agrees with a binary search.
                for tm in m.tables.values() {
                    let pieces = m.pieces_of(tm);
                    let lp = pieces.iter().last();
                    assert_eq!(
                        tm.last,
                        lp.and_then(|p| p.last_ts(&m.chunks)),
                        "seed {seed}"
                    );
                    let tail = match lp {
                        Some(Piece::Chunk { chunk, end, .. }) => Some((*chunk, *end)),
                        _ => None,
                    };
                    assert_eq!(tm.tail, tail, "seed {seed}");
                    // The search a change makes, over the pieces settled into one list.
                    let settled = TableMem {
                        pieces: pieces.iter().cloned().collect(),
                        ..TableMem::default()
                    };
                    for t in [i64::MIN, -1, 0, 1, 5, 50, 100, 400, i64::MAX] {
                        let t = if t == 5 { rng.random_range(0..500) } else { t };
                        assert_eq!(
                            settled.pieces_ending_before(&m.chunks, t),
                            pieces.partition_point(|p| p.last_ts(&m.chunks).is_some_and(|l| l < t)),
                            "seed {seed} t {t}"
                        );
                    }
                    let all: Vec<&Piece> = pieces.iter().collect();
                    for p in &all {
                        let ts = p.ts(&m.chunks);
                        assert!(!ts.is_empty(), "seed {seed}: an empty piece");
                        assert_eq!(p.first_ts(&m.chunks), ts.first().copied(), "seed {seed}");
                        assert_eq!(p.last_ts(&m.chunks), ts.last().copied(), "seed {seed}");
                    }
                    for w in all.windows(2) {
                        assert!(
                            w[0].last_ts(&m.chunks) < w[1].first_ts(&m.chunks),
                            "seed {seed} step {step}: pieces overlap or are out of order"
                        );
                    }
                }
                for (t, want) in &model {
                    let uid = TableUid(*t);
                    let c = m.range_columns(
                        uid,
                        i64::MIN,
                        i64::MAX,
                        &[(0, DataType::Timestamp), (1, DataType::BigInt)],
                    );
                    let got: Vec<(i64, i64)> = (0..c[0].len())
                        .map(|i| match c[1].get(i) {
                            Value::Int(v) => (ts_slice(&c[0])[i], v),
                            other => panic!("seed {seed}: value {other:?}"),
                        })
                        .collect();
                    let exp: Vec<(i64, i64)> = want.iter().map(|(a, b)| (*a, *b)).collect();
                    assert_eq!(got, exp, "seed {seed} step {step} table {t}");
                    let (lo, hi) = (*want.keys().next().unwrap(), *want.keys().last().unwrap());
                    assert_eq!(m.ts_bounds(uid), Some((lo, hi)), "seed {seed} step {step}");
                    let from = rng.random_range(lo - 1..hi + 2);
                    assert_eq!(
                        m.next_ts(uid, from),
                        want.range(from..).next().map(|(k, _)| *k),
                        "seed {seed} step {step} next_ts({from})"
                    );
                    let a = rng.random_range(lo - 1..hi + 2);
                    let b = rng.random_range(a..hi + 3);
                    let r = m.range_columns(uid, a, b, &[(0, DataType::Timestamp)]);
                    let exp: Vec<i64> = want.range(a..=b).map(|(k, _)| *k).collect();
                    assert_eq!(ts_slice(&r[0]), exp.as_slice(), "seed {seed} [{a}, {b}]");
                }
                // The flush's view: every subtable with rows, by uid, reading as above.
                let views: Vec<(TableUid, TableRows<'_>)> = m.tables_by_uid().collect();
                let uids: Vec<TableUid> = views.iter().map(|(u, _)| *u).collect();
                assert_eq!(uids, m.uids(), "seed {seed} step {step}");
                let expected: Vec<TableUid> = model
                    .iter()
                    .filter(|(_, rows)| !rows.is_empty())
                    .map(|(t, _)| TableUid(*t))
                    .collect();
                assert_eq!(uids, expected, "seed {seed} step {step}");
                for (uid, rows) in &views {
                    assert_eq!(rows.ts_bounds(), m.ts_bounds(*uid), "seed {seed}");
                    let from = rng.random_range(-2..502);
                    assert_eq!(rows.next_ts(from), m.next_ts(*uid, from), "seed {seed}");
                    let a = rng.random_range(-2..502);
                    let b = rng.random_range(a..504);
                    let wanted = [(0, DataType::Timestamp), (1, DataType::BigInt)];
                    let (x, y) = (
                        rows.range_columns(a, b, &wanted),
                        m.range_columns(*uid, a, b, &wanted),
                    );
                    assert_eq!(format!("{x:?}"), format!("{y:?}"), "seed {seed} [{a}, {b}]");
                }
                // The flush's gather of every subtable at once reads as each one's own, a
                // column the rows lack (2) as NULL.
                let wanted = [
                    (0, DataType::Timestamp),
                    (1, DataType::BigInt),
                    (2, DataType::Double),
                ];
                let asks: Vec<(&TableRows<'_>, &[(usize, DataType)])> =
                    views.iter().map(|(_, r)| (r, &wanted[..])).collect();
                let all = m.gather_all(&asks);
                assert_eq!(all.len(), views.len());
                for ((uid, rows), got) in views.iter().zip(&all) {
                    let one = m.range_columns(*uid, i64::MIN, i64::MAX, &wanted);
                    assert_same_rows(got, &one, &format!("seed {seed} step {step} {uid:?}"));
                    assert_eq!(rows.row_count(), one[0].len(), "seed {seed} step {step}");
                }
            }
        }
    }

    /// `a` and `b` hold the same rows (the values of NULL rows aside, which no reader sees).
    fn assert_same_rows(a: &[Column], b: &[Column], what: &str) {
        assert_eq!(a.len(), b.len(), "{what}: columns");
        for (x, y) in a.iter().zip(b) {
            assert_eq!(x.len(), y.len(), "{what}: rows");
            assert_eq!(
                std::mem::discriminant(&x.data),
                std::mem::discriminant(&y.data),
                "{what}: physical type"
            );
            for i in 0..x.len() {
                assert_eq!(x.get(i), y.get(i), "{what}: row {i}");
            }
        }
    }

    #[test]
    fn the_flush_gather_keeps_nulls_and_missing_columns() {
        // Subtables 1 and 2 interleaved in blocks, some values NULL, then a narrower block
        // (a column not yet added), an owned write and a late row merged into the pieces.
        let mut m = Memtable::default();
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for b in 0..30i64 {
            let ts: Vec<i64> = vec![b * 10, b * 10, b * 10 + 1];
            let mut v = Column::new(ColumnData::Float(vec![b as f64, -(b as f64), 0.5]));
            v.nulls = (0..3).map(|_| next() % 4 == 0).collect();
            let mut k = Column::new(ColumnData::Int(vec![b, b + 1, b + 2]));
            if next() % 2 == 0 {
                k.nulls = vec![false, true, false];
            }
            let block = vec![Column::new(ColumnData::Timestamp(ts)), v, k];
            m.insert_block(&[(0, 1), (1, 1), (0, 1)], &block, |t| {
                Some(TableUid(u64::from(t) + 1))
            });
        }
        let narrow = vec![Column::new(ColumnData::Timestamp(vec![400, 401]))];
        m.insert_block(&[(0, 2)], &narrow, |_| Some(TableUid(1)));
        m.insert(TableUid(2), &cols(&[(500, 5)]));
        m.insert(TableUid(1), &cols(&[(105, 7)]));
        let wanted = [
            (0, DataType::Timestamp),
            (1, DataType::Double),
            (2, DataType::BigInt),
            (3, DataType::VarChar(8)),
        ];
        let views: Vec<(TableUid, TableRows<'_>)> = m.tables_by_uid().collect();
        let asks: Vec<(&TableRows<'_>, &[(usize, DataType)])> =
            views.iter().map(|(_, r)| (r, &wanted[..])).collect();
        let all = m.gather_all(&asks);
        let mut nulls_seen = 0;
        for ((uid, _), got) in views.iter().zip(&all) {
            let one = m.range_columns(*uid, i64::MIN, i64::MAX, &wanted);
            assert_same_rows(got, &one, &format!("{uid:?}"));
            nulls_seen += got[1].null_count();
        }
        assert!(nulls_seen > 5, "the test writes NULLs: {nulls_seen}");
        assert_eq!(all[0][0].len(), 63, "60 in blocks, 2 narrow, 1 late");
        assert!(
            all[0][3].nulls.iter().all(|n| *n),
            "a column no row has reads NULL"
        );
    }

    #[test]
    fn pieces_of_a_narrower_schema_read_missing_columns_as_null() {
        // A block of an older, narrower schema version, then a wider owned write.
        let narrow = vec![Column::new(ColumnData::Timestamp(vec![1, 2]))];
        let mut m = Memtable::default();
        m.insert_block(&[(0, 2)], &narrow, |_| Some(TableUid(1)));
        m.insert(TableUid(1), &cols(&[(3, 30)]));
        let c = m.range_columns(
            TableUid(1),
            i64::MIN,
            i64::MAX,
            &[(0, DataType::Timestamp), (1, DataType::BigInt)],
        );
        assert_eq!(ts_slice(&c[0]), &[1, 2, 3]);
        assert_eq!(
            (0..3).map(|i| c[1].get(i)).collect::<Vec<_>>(),
            vec![Value::Null, Value::Null, Value::Int(30)]
        );
        // A late row overlapping the narrow piece is merged into one wide piece.
        m.insert(TableUid(1), &cols(&[(2, 20)]));
        let c = m.range_columns(
            TableUid(1),
            0,
            10,
            &[(0, DataType::Timestamp), (1, DataType::BigInt)],
        );
        assert_eq!(
            (0..3).map(|i| c[1].get(i)).collect::<Vec<_>>(),
            vec![Value::Null, Value::Int(20), Value::Int(30)]
        );
    }
}
