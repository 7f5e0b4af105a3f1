//! InfluxDB line protocol parser: pure (no I/O, no allocation unless a token needs unescaping),
//! zero-panic on any input, one error per bad line.
//!
//! ```text
//! measurement[,tag_key=tag_value...] field_key=field_value[,field_key=field_value...] [timestamp]
//! ```
//!
//! What this module owns, following InfluxDB's line protocol reference:
//! - **Escapes.** In the measurement, `\,` and `\ ` (comma, space); in tag keys, tag values and
//!   field keys, `\,`, `\=` and `\ `; in string field values `\"` and `\\`. Everywhere `\\` is
//!   one backslash, and a backslash before any other character is a literal backslash.
//! - **Field values.** Float (`1`, `-1.5`, `1e3`), integer (`1i`), unsigned (`1u`), string
//!   (`"text"`, may span newlines), boolean (`t`, `T`, `true`, `True`, `TRUE`, `f`, `F`, `false`,
//!   `False`, `FALSE`).
//! - **Lines.** Blank lines and lines whose first non-blank byte is `#` are skipped. A `\r`
//!   before the newline is ignored. The timestamp is optional and is returned exactly as
//!   written; [`Precision::convert`] changes its unit.
//!
//! Invariants:
//! - Parsing never panics and never indexes out of bounds: every access is through `get` or a
//!   checked slice; the fuzz target calls [`parse_lines`] on arbitrary bytes.
//! - A bad line yields exactly one [`ParseError`] (line number, 1-based byte column, what was
//!   wrong), and parsing resumes at the next line, so one bad line never hides the others.
//! - Duplicate tag keys are an error (the series key would be ambiguous); a repeated field
//!   key keeps its last value, as InfluxDB does.
//! - Asking for a point's tags to be skipped or its fields read by a [`Shape`]
//!   (`next_into_known`, `next_into_shaped`) changes no result: a point the shape does not
//!   fit is parsed in full, and one it fits gives the values the full parse would.
//!   The tests and the fuzz target compare the ways line by line.

use std::borrow::Cow;
use std::fmt;

/// Largest string field value in bytes, as InfluxDB limits it (64 KiB).
pub const STRING_FIELD_BYTES_MAX: usize = 64 * 1024;
/// Longest excerpt of a bad line kept in its error, so an error stays printable.
const SNIPPET_BYTES_MAX: usize = 80;

/// A field value as written in the line.
#[derive(Clone, Debug, PartialEq)]
pub enum FieldValue<'a> {
    Float(f64),
    Int(i64),
    UInt(u64),
    Str(Cow<'a, str>),
    Bool(bool),
}

impl FieldValue<'_> {
    /// The line protocol name of the type, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            FieldValue::Float(_) => "float",
            FieldValue::Int(_) => "integer",
            FieldValue::UInt(_) => "unsigned",
            FieldValue::Str(_) => "string",
            FieldValue::Bool(_) => "boolean",
        }
    }
}

/// One parsed point. Strings borrow from the input unless they contained escapes.
#[derive(Clone, Debug, PartialEq)]
pub struct Line<'a> {
    /// 1-based line number in the body.
    pub line_no: usize,
    pub measurement: Cow<'a, str>,
    /// Tags in the order written (duplicates rejected).
    pub tags: Vec<(Cow<'a, str>, Cow<'a, str>)>,
    /// Fields in the order of first appearance; a repeated key holds its last value.
    pub fields: Vec<(Cow<'a, str>, FieldValue<'a>)>,
    /// The timestamp as written, in the request's precision; `None` means "now".
    pub timestamp: Option<i64>,
}

impl Line<'_> {
    /// The line in line protocol, escaped so that parsing it gives this line back (the
    /// inverse of [`parse_line`], up to `line_no`). Floats use Rust's shortest round-trip
    /// form.
    pub fn to_line_protocol(&self) -> String {
        let mut out = String::with_capacity(64);
        escape_into(&mut out, &self.measurement, |c| {
            matches!(c, ',' | ' ' | '\\')
        });
        for (k, v) in &self.tags {
            out.push(',');
            escape_into(&mut out, k, is_key_special);
            out.push('=');
            escape_into(&mut out, v, is_key_special);
        }
        for (i, (k, v)) in self.fields.iter().enumerate() {
            out.push(if i == 0 { ' ' } else { ',' });
            escape_into(&mut out, k, is_key_special);
            out.push('=');
            match v {
                FieldValue::Float(f) => out.push_str(&format!("{f:?}")),
                FieldValue::Int(i) => out.push_str(&format!("{i}i")),
                FieldValue::UInt(u) => out.push_str(&format!("{u}u")),
                FieldValue::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
                FieldValue::Str(s) => {
                    out.push('"');
                    escape_into(&mut out, s, |c| matches!(c, '"' | '\\'));
                    out.push('"');
                }
            }
        }
        if let Some(ts) = self.timestamp {
            out.push_str(&format!(" {ts}"));
        }
        out
    }
}

fn is_key_special(c: char) -> bool {
    matches!(c, ',' | '=' | ' ' | '\\')
}

fn escape_into(out: &mut String, s: &str, special: impl Fn(char) -> bool) {
    for c in s.chars() {
        if special(c) {
            out.push('\\');
        }
        out.push(c);
    }
}

/// What was wrong with a line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ErrorKind {
    #[error("line is not valid UTF-8")]
    InvalidUtf8,
    #[error("missing measurement name")]
    MissingMeasurement,
    #[error("missing tag key")]
    MissingTagKey,
    #[error("missing '=' after tag key '{0}'")]
    MissingTagEquals(String),
    #[error("missing value for tag '{0}'")]
    MissingTagValue(String),
    #[error("value of tag '{0}' contains an unescaped '=' (write it as '\\=')")]
    UnescapedEquals(String),
    #[error("duplicate tag key '{0}'")]
    DuplicateTag(String),
    #[error("missing fields: a point needs at least one field after the measurement and tags")]
    MissingFields,
    #[error("missing field key")]
    MissingFieldKey,
    #[error("missing '=' after field key '{0}'")]
    MissingFieldEquals(String),
    #[error("missing value for field '{0}'")]
    MissingFieldValue(String),
    #[error("invalid value '{value}' for field '{field}': expected a float (1.5), an integer (1i), an unsigned integer (1u), a double-quoted string or a boolean (true/false)")]
    InvalidFieldValue { field: String, value: String },
    #[error("integer value '{value}' of field '{field}' is out of range")]
    IntegerOutOfRange { field: String, value: String },
    #[error("unterminated string value of field '{0}': missing closing '\"'")]
    UnterminatedString(String),
    #[error("string value of field '{field}' is {len} bytes, above the limit of {STRING_FIELD_BYTES_MAX}")]
    StringTooLong { field: String, len: usize },
    #[error("invalid timestamp '{0}': expected an integer")]
    InvalidTimestamp(String),
    #[error("unexpected text '{0}' after the timestamp")]
    TrailingText(String),
}

/// A bad line: where and what.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}: {kind} (in '{snippet}')")]
pub struct ParseError {
    /// 1-based line number in the body.
    pub line: usize,
    /// 1-based byte column in the line.
    pub column: usize,
    pub kind: ErrorKind,
    /// The start of the bad line (at most 80 bytes), for the user to find it.
    pub snippet: String,
}

/// Timestamp precision of a write request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Precision {
    Nanos,
    Micros,
    Millis,
    Seconds,
    Minutes,
    Hours,
}

impl Precision {
    /// Parses the `precision` query parameter: `ns`/`n`, `us`/`u`/`µ`, `ms`, `s`, and InfluxDB
    /// 1.x's `m` (minutes) and `h` (hours), which its client libraries may send.
    pub fn parse(s: &str) -> Option<Precision> {
        match s {
            "ns" | "n" => Some(Precision::Nanos),
            "us" | "u" | "µ" | "µs" => Some(Precision::Micros),
            "ms" => Some(Precision::Millis),
            "s" => Some(Precision::Seconds),
            "m" => Some(Precision::Minutes),
            "h" => Some(Precision::Hours),
            _ => None,
        }
    }

    /// Nanoseconds per unit.
    pub fn nanos_per_unit(self) -> i64 {
        match self {
            Precision::Nanos => 1,
            Precision::Micros => 1_000,
            Precision::Millis => 1_000_000,
            Precision::Seconds => 1_000_000_000,
            Precision::Minutes => 60_000_000_000,
            Precision::Hours => 3_600_000_000_000,
        }
    }

    /// Converts `ts` from this precision to `to`. A finer target multiplies (checked: `None`
    /// on overflow); a coarser target rounds toward negative infinity, so a timestamp always
    /// maps to the unit that contains it.
    pub fn convert(self, ts: i64, to: Precision) -> Option<i64> {
        let (from, to) = (self.nanos_per_unit(), to.nanos_per_unit());
        if from >= to {
            ts.checked_mul(from / to)
        } else {
            Some(ts.div_euclid(to / from))
        }
    }
}

impl From<tidal_common::Precision> for Precision {
    fn from(p: tidal_common::Precision) -> Precision {
        match p {
            tidal_common::Precision::Millis => Precision::Millis,
            tidal_common::Precision::Micros => Precision::Micros,
            tidal_common::Precision::Nanos => Precision::Nanos,
        }
    }
}

/// Iterates over the points of a body: one `Ok(Line)` per point, one `Err` per bad line.
/// Blank and comment lines yield nothing.
pub fn parse_lines(body: &[u8]) -> Lines<'_> {
    Lines {
        buf: body,
        rest: &[],
        pos: 0,
        line_no: 0,
        tags_hint: 0,
        fields_hint: 0,
        keys_memo: Vec::new(),
    }
}

/// [`parse_lines`] of a body held in parts, as it arrived (an HTTP body comes in frames):
/// the parts are read in order, as if they were one buffer, without being copied into one.
/// The end of a part ends its last line, so a body must be cut only just after a newline
/// that ends a line, i.e. not one inside a quoted string value (which may span lines):
/// then the points, errors and line numbers are those of the whole body.
pub fn parse_parts<'a>(parts: &'a [&'a [u8]]) -> Lines<'a> {
    let (first, rest) = parts
        .split_first()
        .map_or((&[][..], &[][..]), |(f, r)| (*f, r));
    Lines {
        rest,
        ..parse_lines(first)
    }
}

/// Cuts a body that arrives in pieces (an HTTP body's frames) into parts for
/// [`parse_parts`], without copying the body into one buffer: a piece's whole lines are a
/// part where they are ([`Cut::Piece`]), and a line split between pieces is gathered into a
/// part of its own ([`Cut::Gathered`]). Only a string value can hold a newline that does not
/// end a line, so from the first piece with a `"` in it the rest of the body is gathered
/// into one part. Copying a body of 10,000 lines out of its frames was 7% of the line
/// protocol's CPU in the process serving it.
#[derive(Default)]
pub struct BodyCutter {
    pending: Vec<u8>,
    gathering: bool,
}

/// A part of a body ([`BodyCutter`]).
#[derive(Debug, PartialEq, Eq)]
pub enum Cut {
    /// These bytes of the piece just pushed.
    Piece(std::ops::Range<usize>),
    /// Bytes of this piece and of those before it, gathered.
    Gathered(Vec<u8>),
}

impl BodyCutter {
    /// Takes the next piece of the body, giving `out` the parts it completes, in order.
    pub fn push(&mut self, piece: &[u8], out: &mut impl FnMut(Cut)) {
        if self.gathering || memchr::memchr(b'"', piece).is_some() {
            self.gathering = true;
            self.pending.extend_from_slice(piece);
            return;
        }
        let Some(last) = memchr::memrchr(b'\n', piece) else {
            self.pending.extend_from_slice(piece);
            return;
        };
        let mut from = 0;
        if !self.pending.is_empty() {
            // The line begun in the pieces before ends at this piece's first newline.
            let first = memchr::memchr(b'\n', piece).unwrap_or(last);
            self.pending
                .extend_from_slice(piece.get(..=first).unwrap_or_default());
            out(Cut::Gathered(std::mem::take(&mut self.pending)));
            from = first + 1;
        }
        if from <= last {
            out(Cut::Piece(from..last + 1));
        }
        self.pending
            .extend_from_slice(piece.get(last + 1..).unwrap_or_default());
    }

    /// The body's last part, if its end was not yet given: what follows its last newline
    /// (or everything since the first `"`).
    pub fn finish(self) -> Option<Vec<u8>> {
        (!self.pending.is_empty()).then_some(self.pending)
    }
}

/// Parses one line (no newline expected; a trailing `\r` or whitespace is ignored). Returns
/// `Ok(None)` for a blank or comment line.
pub fn parse_line(line: &[u8]) -> Result<Option<Line<'_>>, ParseError> {
    let mut it = parse_lines(line);
    it.next().transpose()
}

/// What a caller of [`Lines::next_into_shaped`] says of a point's series key (its
/// measurement and tags as written).
#[derive(Clone, Copy, Debug)]
pub enum Ask<'s> {
    /// Unknown: parse the measurement and tags.
    Parse,
    /// Known: skip them (as [`Lines::next_into_known`] when told true).
    Skip,
    /// Known, and its points usually carry these fields: skip the measurement and tags, and
    /// read the fields by the shape if they have it.
    Shaped(&'s Shape),
}

/// A point from [`Lines::next_into_shaped`]: its series key as written and, when it was read
/// by its shape, the shape's keys it has (bit `i` for key `i`).
pub type Shaped<'a> = (&'a [u8], Option<u64>);

/// The `known` question of a parse and, for [`Lines::next_into_shaped`], where shaped values go.
type Asker<'a, 'k, 's, 'r> = (
    &'r mut (dyn FnMut(&'a [u8]) -> Ask<'s> + 'k),
    Option<&'r mut Vec<u64>>,
);

/// The kind of number a [`Shape`]'s field holds: a float as [`FieldValue::Float`] reads it,
/// or an integer written with the `i` suffix ([`FieldValue::Int`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Number {
    Float,
    Int,
}

/// A field set as lines of one measurement usually write it: its keys in order, each with
/// the kind of number it holds (see [`Lines::next_into_shaped`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Each key with the `=` after it, one after the other: one comparison per field.
    text: Vec<u8>,
    /// Where each key's bytes end in `text`.
    ends: Vec<usize>,
    /// Per key: whether its value is an integer (`i` suffix) rather than a float.
    ints: Vec<bool>,
}

impl Shape {
    /// Most keys of a shape (the keys a line has are bits of a `u64`).
    pub const KEYS_MAX: usize = 64;

    /// The shape of these fields in this order; `None` if there are none or more than
    /// [`Shape::KEYS_MAX`], a key is empty, repeats another or holds a byte that ends or
    /// escapes a key where it is written (`,` `=` space tab `\\` `\r` `\n`): keys that
    /// read back as themselves only.
    pub fn new<'k>(fields: impl IntoIterator<Item = (&'k str, Number)>) -> Option<Shape> {
        let mut shape = Shape {
            text: Vec::new(),
            ends: Vec::new(),
            ints: Vec::new(),
        };
        let mut keys: Vec<&str> = Vec::new();
        for (key, number) in fields {
            let plain = !key.is_empty()
                && key
                    .bytes()
                    .all(|b| !KEY_STOPS[usize::from(b)] && b != b'\t');
            if !plain || keys.contains(&key) || keys.len() == Self::KEYS_MAX {
                return None;
            }
            keys.push(key);
            shape.text.extend_from_slice(key.as_bytes());
            shape.text.push(b'=');
            shape.ends.push(shape.text.len());
            shape.ints.push(number == Number::Int);
        }
        (!shape.ends.is_empty()).then_some(shape)
    }

    /// Fields in the shape.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Never true: a shape has a field at least.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Key `j` with its `=`.
    fn key(&self, j: usize) -> Option<&[u8]> {
        let from = match j.checked_sub(1) {
            Some(i) => *self.ends.get(i)?,
            None => 0,
        };
        self.text.get(from..*self.ends.get(j)?)
    }
}

/// Iterator returned by [`parse_lines`].
pub struct Lines<'a> {
    /// The part being read, and the parts after it ([`parse_parts`]).
    buf: &'a [u8],
    rest: &'a [&'a [u8]],
    pos: usize,
    /// Number of the line that starts at `pos`, minus one.
    line_no: usize,
    /// Tags and fields of the previous line: the next line's vectors are allocated at that
    /// size, as lines of a body tend to look alike.
    tags_hint: usize,
    fields_hint: usize,
    /// Field keys of the lines before, by position (see [`Parser::fields_into`]).
    keys_memo: Vec<&'a str>,
}

impl Default for Line<'_> {
    fn default() -> Self {
        Line {
            line_no: 0,
            measurement: Cow::Borrowed(""),
            tags: Vec::new(),
            fields: Vec::new(),
            timestamp: None,
        }
    }
}

impl<'a> Lines<'a> {
    /// Parses the next point into `line`, reusing its vectors (no allocation per line once
    /// they are large enough). Returns the point's series key as written (the measurement
    /// and the tag set, escapes included: equal bytes mean the same measurement and tags in
    /// the same order), or the line's error (then `line` holds no meaningful point). `None`
    /// at the end of the body.
    pub fn next_into(&mut self, line: &mut Line<'a>) -> Option<Result<&'a [u8], ParseError>> {
        self.next_line_into(line, None).map(|r| r.map(|(k, _)| k))
    }

    /// [`Lines::next_into`] that first asks `known` about the point's series key as written
    /// (found by a scan for its end, without splitting it): when `known` says true, the
    /// measurement and tags are not parsed, and `line.measurement` and `line.tags` are left
    /// empty. A caller that has parsed a line with the same series key before (same bytes,
    /// so the same measurement and tags, and no error in them) saves a third of the parse.
    /// Errors are the same as `next_into`'s.
    pub fn next_into_known(
        &mut self,
        line: &mut Line<'a>,
        known: &mut dyn FnMut(&'a [u8]) -> bool,
    ) -> Option<Result<&'a [u8], ParseError>> {
        let mut ask = |k: &'a [u8]| if known(k) { Ask::Skip } else { Ask::Parse };
        self.next_line_into(line, Some((&mut ask, None)))
            .map(|r| r.map(|(k, _)| k))
    }

    /// [`Lines::next_into_known`] where `known` may also answer with the [`Shape`] the
    /// point's fields are expected to have: when the field set fits that shape (some of its
    /// keys, in its order, each value a number of its kind) and a plain timestamp ends the
    /// line, the values go to `values` (one slot per key of the shape, in its order: an
    /// f64's bits or an i64; 0 for a key left out), `line.fields` is left empty, and the
    /// point comes back with the keys it has as bits (bit `i` for the shape's key `i`).
    /// Otherwise the line is parsed as `next_into_known` would (`None`): the same key,
    /// fields, timestamp or error either way. A feed's lines of one measurement repeat one
    /// field set, and this spares them the general parse's field list.
    pub fn next_into_shaped<'s>(
        &mut self,
        line: &mut Line<'a>,
        values: &mut Vec<u64>,
        known: &mut dyn FnMut(&'a [u8]) -> Ask<'s>,
    ) -> Option<Result<Shaped<'a>, ParseError>> {
        self.next_line_into(line, Some((known, Some(values))))
    }

    /// Forgets the field keys of the lines before: the next line is parsed as if it were
    /// the first of the body. For tests and the fuzz target, which check that remembering
    /// them changes no result.
    #[doc(hidden)]
    pub fn forget_field_keys(&mut self) {
        self.keys_memo.clear();
    }

    fn next_line_into<'k, 's>(
        &mut self,
        line: &mut Line<'a>,
        mut known: Option<Asker<'a, 'k, 's, '_>>,
    ) -> Option<Result<Shaped<'a>, ParseError>> {
        loop {
            if self.pos >= self.buf.len() {
                let (next, rest) = self.rest.split_first()?;
                (self.buf, self.rest, self.pos) = (*next, rest, 0);
                continue;
            }
            let start = self.pos;
            self.line_no += 1;
            let line_no = self.line_no;
            let mut p = Parser {
                buf: self.buf,
                text: LineText::Unread,
                pos: start,
                line_start: start,
                line_no,
                extra_newlines: 0,
            };
            // Leading blanks; then a blank or comment line is skipped whole.
            p.skip_blanks();
            match p.peek() {
                None => {
                    // Blanks end the part: the next part (if any) starts a line.
                    self.pos = self.buf.len();
                    continue;
                }
                Some(b'\n') => {
                    self.pos = p.pos + 1;
                    continue;
                }
                Some(b'\r') if p.peek_at(1).is_none_or(|b| b == b'\n') => {
                    self.pos = (p.pos + 2).min(self.buf.len());
                    continue;
                }
                Some(b'#') => {
                    self.pos = next_line(self.buf, p.pos);
                    continue;
                }
                _ => {}
            }
            let series_start = p.pos;
            let asker = known
                .as_mut()
                .map(|(ask, values)| (&mut **ask, values.as_deref_mut()));
            let result = p.line_into(line, asker, &mut self.keys_memo);
            // Strings may span newlines; keep the line count in step with the body.
            self.line_no += p.extra_newlines;
            match result {
                Ok((series_end, shaped)) => {
                    self.pos = p.pos;
                    let series = self.buf.get(series_start..series_end).unwrap_or(&[]);
                    return Some(Ok((series, shaped)));
                }
                Err((column_pos, kind)) => {
                    // After an error the quoting state is unknown: resume at the next newline
                    // after the error position (not before it, so progress is guaranteed).
                    let err_pos = column_pos.max(start).min(self.buf.len());
                    let end = next_line(self.buf, err_pos.max(p.pos.min(self.buf.len())));
                    let newlines = self
                        .buf
                        .get(start..end)
                        .map_or(0, |r| r.iter().filter(|&&b| b == b'\n').count());
                    let line_start = p.line_start;
                    let line_end = next_line(self.buf, line_start);
                    let raw = self.buf.get(line_start..line_end).unwrap_or(&[]);
                    let raw = trim_newline(raw);
                    let cut = raw.len().min(SNIPPET_BYTES_MAX);
                    let snippet =
                        String::from_utf8_lossy(raw.get(..cut).unwrap_or(&[])).into_owned();
                    let err = ParseError {
                        line: line_no,
                        column: err_pos.saturating_sub(line_start) + 1,
                        kind,
                        snippet,
                    };
                    self.pos = end;
                    self.line_no = line_no + newlines.saturating_sub(1);
                    return Some(Err(err));
                }
            }
        }
    }
}

impl<'a> Iterator for Lines<'a> {
    type Item = Result<Line<'a>, ParseError>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut line = Line {
            tags: Vec::with_capacity(self.tags_hint),
            fields: Vec::with_capacity(self.fields_hint),
            ..Line::default()
        };
        match self.next_into(&mut line)? {
            Ok(_) => {
                self.tags_hint = line.tags.len();
                self.fields_hint = line.fields.len();
                Some(Ok(line))
            }
            Err(e) => Some(Err(e)),
        }
    }
}

/// Index just past the next `\n` at or after `from` (or the end of the buffer).
fn next_line(buf: &[u8], from: usize) -> usize {
    match buf
        .get(from..)
        .and_then(|rest| rest.iter().position(|&b| b == b'\n'))
    {
        Some(i) => from + i + 1,
        None => buf.len(),
    }
}

fn trim_newline(mut s: &[u8]) -> &[u8] {
    while let Some((&last, rest)) = s.split_last() {
        if last == b'\n' || last == b'\r' {
            s = rest;
        } else {
            break;
        }
    }
    s
}

/// Which escapes apply to a token.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Section {
    /// Ends at an unescaped `,` or space; escapes `\,` `\ ` `\\`.
    Measurement,
    /// Tag keys, tag values, field keys: end at `,` `=` or space; escapes `\,` `\=` `\ ` `\\`.
    Key,
}

type PResult<T> = Result<T, (usize, ErrorKind)>;

/// A line's bytes as text ([`Parser::text`]).
#[derive(Clone, Copy)]
enum LineText<'a> {
    /// Not looked at yet.
    Unread,
    /// From where it starts in the body to its first newline, all valid UTF-8.
    Valid(usize, &'a str),
    /// Not valid UTF-8: each token is checked on its own, so that the error names the first
    /// bad byte of the token that has it.
    Invalid,
}

struct Parser<'a> {
    buf: &'a [u8],
    /// The line as text, once a token of it was asked for ([`Parser::text`]).
    text: LineText<'a>,
    pos: usize,
    /// Start of the current logical line (for columns).
    line_start: usize,
    line_no: usize,
    /// Newlines consumed inside string values of this line.
    extra_newlines: usize,
}

fn is_line_end(b: Option<u8>) -> bool {
    matches!(b, None | Some(b'\n'))
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<u8> {
        self.buf.get(self.pos).copied()
    }

    fn peek_at(&self, off: usize) -> Option<u8> {
        self.buf.get(self.pos + off).copied()
    }

    fn skip_blanks(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.pos += 1;
        }
    }

    /// True at the end of the line, treating a `\r` before `\n` (or the end) as the end.
    fn at_line_end(&self) -> bool {
        match self.peek() {
            None | Some(b'\n') => true,
            Some(b'\r') => is_line_end(self.peek_at(1)),
            _ => false,
        }
    }

    /// Consumes the end of the line (`\r`, `\n`).
    fn finish_line(&mut self) {
        if self.peek() == Some(b'\r') {
            self.pos += 1;
        }
        if self.peek() == Some(b'\n') {
            self.pos += 1;
        }
    }

    /// Parses a line into `out` (its vectors cleared and reused); returns where the series
    /// key (measurement and tags) ends and, for a line read by the shape `known` asked for
    /// ([`Parser::shaped_fields`]), the shape's keys it has.
    fn line_into<'k, 's>(
        &mut self,
        out: &mut Line<'a>,
        known: Option<Asker<'a, 'k, 's, '_>>,
        keys_memo: &mut Vec<&'a str>,
    ) -> PResult<(usize, Option<u64>)> {
        out.line_no = self.line_no;
        out.timestamp = None;
        out.tags.clear();
        let (ask, values) = match known {
            Some((known, values)) => {
                let end = self.series_end();
                let ask = known(self.buf.get(self.pos..end).unwrap_or(&[]));
                if !matches!(ask, Ask::Parse) {
                    self.pos = end;
                }
                (ask, values)
            }
            None => (Ask::Parse, None),
        };
        if matches!(ask, Ask::Parse) {
            self.series_into(out)?;
        } else {
            out.measurement = Cow::Borrowed("");
        }
        if let (Ask::Shaped(shape), Some(values)) = (ask, values) {
            let series_end = self.pos;
            if let Some((present, ts)) = self.shaped_fields(shape, values) {
                out.fields.clear();
                out.timestamp = Some(ts);
                return Ok((series_end, Some(present)));
            }
        }
        self.fields_into(out, keys_memo).map(|end| (end, None))
    }

    /// The field set and timestamp of a line when they fit `shape` (see
    /// [`Lines::next_into_shaped`]): the values into `values` (one slot per key of the
    /// shape), the keys present returned as bits with the timestamp, and the line consumed.
    /// `None`, with nothing consumed, for anything else, which the general path then
    /// parses. What it takes, the general path reads the same way: a key without the bytes
    /// a key ends or is escaped at reads as itself; a value is what [`plain_number`] reads
    /// (of the kind the shape says), ended by the `,` before the next key or by the space
    /// before the timestamp; the timestamp is [`Parser::plain_timestamp`]'s.
    fn shaped_fields(&mut self, shape: &Shape, values: &mut Vec<u64>) -> Option<(u64, i64)> {
        let start = self.pos;
        values.clear();
        values.resize(shape.len(), 0);
        // The one space the field set starts after.
        if self.peek() != Some(b' ') {
            return None;
        }
        let mut pos = start + 1;
        let mut present = 0u64;
        // The next key of the shape a field may have: keys come in the shape's order, some
        // left out (a feed leaves out the fields it has no value for).
        let mut next = 0usize;
        loop {
            let rest = self.buf.get(pos..)?;
            let (j, key) = (next..shape.len()).find_map(|j| {
                let key = shape.key(j)?;
                rest.starts_with(key).then_some((j, key))
            })?;
            next = j + 1;
            pos += key.len();
            let rest = self.buf.get(pos..)?;
            let d = Decimal::prefix(rest)?;
            let int = shape.ints.get(j).copied()?;
            if (rest.get(d.len) == Some(&b'i')) != int {
                return None;
            }
            let (v, len) = if int {
                // At most 15 digits: within i64 either way.
                d.frac.is_none().then_some(())?;
                let v = d.mantissa as i64;
                ((if d.neg { -v } else { v }) as u64, d.len + 1)
            } else {
                (d.to_f64()?.to_bits(), d.len)
            };
            *values.get_mut(j)? = v;
            present |= 1 << j;
            pos += len;
            match self.buf.get(pos) {
                Some(b',') => pos += 1,
                _ => break,
            }
        }
        self.pos = pos;
        match self.plain_timestamp() {
            Some(ts) => Some((present, ts)),
            None => {
                self.pos = start;
                None
            }
        }
    }

    /// Where the series key starting here ends in a well-formed line: the first unescaped
    /// space, or the line end. The same escapes as [`Parser::token`]'s: a backslash keeps
    /// the byte after it in the token unless that byte ends the line (a backslash before a
    /// byte it does not escape is a plain byte, and so is that byte, which is no delimiter
    /// of the key's end either way).
    ///
    /// A `\r` is part of the key except as the line end (one before `\n` or the body's
    /// end), as in [`Parser::token`]: the key `a\r` of `a\r b=1` is not the key of a line
    /// `a\r\r\n`, whose general parse stops at its second `\r`, and so neither is the span.
    fn series_end(&self) -> usize {
        let mut i = self.pos;
        loop {
            let rest = self.buf.get(i..).unwrap_or(&[]);
            // SIMD: series keys are most of a line's bytes.
            i += memchr::memchr3(b' ', b'\\', b'\n', rest).unwrap_or(rest.len());
            match self.buf.get(i) {
                Some(b'\\') => match self.buf.get(i + 1) {
                    None | Some(b'\n' | b'\r') => i += 1,
                    Some(_) => i += 2,
                },
                Some(b' ') => return i,
                _ => {
                    let end = i.min(self.buf.len());
                    // An escape never takes a `\r` (above), so one before the end is the end.
                    return match end.checked_sub(1) {
                        Some(r) if r >= self.pos && self.buf.get(r) == Some(&b'\r') => r,
                        _ => end,
                    };
                }
            }
        }
    }

    /// The measurement and the tags of a line into `out`.
    fn series_into(&mut self, out: &mut Line<'a>) -> PResult<()> {
        let tags = &mut out.tags;
        let m_pos = self.pos;
        let measurement = self.token(Section::Measurement)?;
        if measurement.is_empty() {
            return Err((m_pos, ErrorKind::MissingMeasurement));
        }
        out.measurement = measurement;
        // Keys seen in this line as a 64-bit filter: a key whose bit is clear cannot repeat
        // one before it, which spares the pairwise comparisons for nearly every key.
        let mut tag_keys = 0u64;
        while self.peek() == Some(b',') {
            self.pos += 1;
            let k_pos = self.pos;
            let key = self.token(Section::Key)?;
            if key.is_empty() {
                return Err((k_pos, ErrorKind::MissingTagKey));
            }
            if self.peek() != Some(b'=') {
                return Err((self.pos, ErrorKind::MissingTagEquals(key.into_owned())));
            }
            self.pos += 1;
            let v_pos = self.pos;
            let value = self.token(Section::Key)?;
            if value.is_empty() {
                return Err((v_pos, ErrorKind::MissingTagValue(key.into_owned())));
            }
            if self.peek() == Some(b'=') {
                return Err((self.pos, ErrorKind::UnescapedEquals(key.into_owned())));
            }
            let bit = key_bit(&key);
            if tag_keys & bit != 0 && tags.iter().any(|(k, _)| *k == key) {
                return Err((k_pos, ErrorKind::DuplicateTag(key.into_owned())));
            }
            tag_keys |= bit;
            tags.push((key, value));
        }
        Ok(())
    }

    /// The field set and timestamp of a line into `out`, from the end of its series key;
    /// returns where that key ended.
    ///
    /// `keys_memo` holds pairwise distinct field keys, each at the position it had in a line
    /// before, that were written without escapes: lines of a feed repeat their keys in one
    /// order, so a key is usually the memo's at its position, which one comparison of its
    /// bytes tells (the bytes of a key without escapes followed by `=` are scanned as that
    /// key in any line). While every key of a line so far was the memo's, the next one that
    /// is cannot repeat any of them either. A key that is not the memo's replaces the memo
    /// from its position on.
    fn fields_into(&mut self, out: &mut Line<'a>, keys_memo: &mut Vec<&'a str>) -> PResult<usize> {
        let fields = &mut out.fields;
        let series_end = self.pos;
        // The field set starts after one or more spaces.
        // Tokens end only at ',' ' ' '=' or the line end, and ',' '=' were consumed above.
        if self.peek() != Some(b' ') {
            return Err((self.pos, ErrorKind::MissingFields));
        }
        self.skip_blanks();
        if self.at_line_end() {
            return Err((self.pos, ErrorKind::MissingFields));
        }
        let mut field_keys = 0u64;
        // Every key so far was the memo's at its position.
        let mut as_memo = true;
        let mut at = 0usize;
        // Fields of this line (`fields` beyond them are the line before's, overwritten).
        let mut n = 0usize;
        loop {
            let memo = keys_memo.get(at).filter(|_| as_memo);
            let key = match memo.and_then(|&m| self.memo_key(m)) {
                Some(m) => Cow::Borrowed(m),
                None => {
                    as_memo = false;
                    let k_pos = self.pos;
                    let key = self.token(Section::Key)?;
                    if key.is_empty() {
                        return Err((k_pos, ErrorKind::MissingFieldKey));
                    }
                    if self.peek() != Some(b'=') {
                        return Err((self.pos, ErrorKind::MissingFieldEquals(key.into_owned())));
                    }
                    key
                }
            };
            self.pos += 1;
            let value = self.field_value(&key)?;
            let bit = key_bit(&key);
            let repeated = if field_keys & bit != 0 && !as_memo {
                fields
                    .get_mut(..n)
                    .and_then(|f| f.iter_mut().find(|(k, _)| *k == key))
            } else {
                None
            };
            field_keys |= bit;
            if !as_memo {
                // The memo from here on is this line's keys, while they are memorable.
                keys_memo.truncate(at);
                if let (Cow::Borrowed(k), None, true) = (&key, &repeated, keys_memo.len() == at) {
                    keys_memo.push(k);
                }
            }
            match repeated {
                Some(slot) => slot.1 = value,
                // Over the previous line's field in place: a push built the pair on the stack
                // and copied it in wider loads than its stores (a stall per field).
                None => {
                    match fields.get_mut(n) {
                        Some(slot) => {
                            slot.0 = key;
                            slot.1 = value;
                        }
                        None => fields.push((key, value)),
                    }
                    n += 1;
                }
            }
            at += 1;
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                }
                _ => break,
            }
        }
        keys_memo.truncate(at);
        fields.truncate(n);
        // The usual timestamp: digits and the end of the line, in one pass.
        if let Some(ts) = self.plain_timestamp() {
            out.timestamp = Some(ts);
            return Ok(series_end);
        }
        let timestamp = if self.at_line_end() {
            None
        } else if self.peek() == Some(b' ') || self.peek() == Some(b'\t') {
            self.skip_blanks();
            if self.at_line_end() {
                None
            } else {
                let t_pos = self.pos;
                let raw = self.bare();
                let ts = parse_int(raw).ok_or_else(|| {
                    (
                        t_pos,
                        ErrorKind::InvalidTimestamp(String::from_utf8_lossy(raw).into_owned()),
                    )
                })?;
                self.skip_blanks();
                if !self.at_line_end() {
                    let rest_pos = self.pos;
                    let rest = self.bare();
                    return Err((
                        rest_pos,
                        ErrorKind::TrailingText(String::from_utf8_lossy(rest).into_owned()),
                    ));
                }
                Some(ts)
            }
        } else {
            // A field value followed directly by something other than ',' or ' ', which
            // only happens after a closing quote (`f="a"x`).
            let rest_pos = self.pos;
            let rest = self.bare();
            return Err((
                rest_pos,
                ErrorKind::InvalidFieldValue {
                    field: fields
                        .last()
                        .map(|(k, _)| k.to_string())
                        .unwrap_or_default(),
                    value: String::from_utf8_lossy(rest).into_owned(),
                },
            ));
        };
        self.finish_line();
        out.timestamp = timestamp;
        Ok(series_end)
    }

    /// `m` if it is the key here (its bytes, then `=`), leaving `pos` at the `=`.
    fn memo_key(&mut self, m: &'a str) -> Option<&'a str> {
        let end = self.pos + m.len();
        let here = self.buf.get(self.pos..end)?;
        if self.buf.get(end) == Some(&b'=') && same_bytes(here, m.as_bytes()) {
            self.pos = end;
            Some(m)
        } else {
            None
        }
    }

    /// A timestamp of plain digits (a `-` before them at most) that ends the line, taken
    /// with its newline; `None` (nothing consumed) for any other rest of the line, which
    /// the general path then parses.
    fn plain_timestamp(&mut self) -> Option<i64> {
        if self.peek() != Some(b' ') {
            return None;
        }
        let start = self.pos + 1;
        let rest = self.buf.get(start..)?;
        let (neg, digits) = match rest.split_first() {
            Some((b'-', r)) => (true, r),
            _ => (false, rest),
        };
        let (v, n) = leading_digits(digits)?;
        if !matches!(digits.get(n), None | Some(b'\n')) {
            return None;
        }
        let ts = if neg {
            0i64.checked_sub_unsigned(v)?
        } else {
            i64::try_from(v).ok()?
        };
        self.pos = start + usize::from(neg) + n + usize::from(digits.get(n).is_some());
        Some(ts)
    }

    /// `buf[start..end]` as text: a slice of the line, validated whole the first time one
    /// of its tokens is asked for (tokens end at ASCII delimiters, so each is a char-boundary
    /// slice of it), else validated here (the error at the first bad byte). Only lines that
    /// take the general path pay for it: a line read by its series key and shape is bytes
    /// compared with ones read before, digits and delimiters, and one SIMD pass over every
    /// body was 4% of the conversion of a TSBS body.
    fn text(&mut self, start: usize, end: usize) -> PResult<&'a str> {
        if let LineText::Unread = self.text {
            let from = self.line_start;
            let rest = self.buf.get(from..).unwrap_or(&[]);
            let line = rest
                .get(..memchr::memchr(b'\n', rest).unwrap_or(rest.len()))
                .unwrap_or(&[]);
            self.text = match simdutf8::basic::from_utf8(line) {
                Ok(t) => LineText::Valid(from, t),
                Err(_) => LineText::Invalid,
            };
        }
        if let LineText::Valid(from, t) = self.text {
            if let Some(s) = start
                .checked_sub(from)
                .zip(end.checked_sub(from))
                .and_then(|(s, e)| t.get(s..e))
            {
                return Ok(s);
            }
        }
        let raw = self.buf.get(start..end).unwrap_or(&[]);
        std::str::from_utf8(raw).map_err(|e| (start + e.valid_up_to(), ErrorKind::InvalidUtf8))
    }

    /// A token up to an unescaped delimiter of `section` or the end of the line, unescaped.
    fn token(&mut self, section: Section) -> PResult<Cow<'a, str>> {
        let start = self.pos;
        let mut has_escape = false;
        let stops = match section {
            Section::Measurement => &MEASUREMENT_STOPS,
            Section::Key => &KEY_STOPS,
        };
        loop {
            self.skip_to(stops);
            match self.peek() {
                Some(b'\\') => {
                    // An escape consumes the next byte only if it is one this section knows.
                    if let Some(n) = self.peek_at(1) {
                        if is_escapable(section, n) {
                            has_escape = true;
                            self.pos += 2;
                            continue;
                        }
                    }
                    self.pos += 1;
                }
                // A `\r` inside a line is text; only before the line end does it end one.
                Some(b'\r') if !is_line_end(self.peek_at(1)) => self.pos += 1,
                _ => break,
            }
        }
        let s = self.text(start, self.pos)?;
        if !has_escape {
            return Ok(Cow::Borrowed(s));
        }
        Ok(Cow::Owned(unescape(s, |c| is_escapable(section, c))))
    }

    /// Moves to the next byte that `stops` marks (or the end of the buffer). One table
    /// lookup per byte instead of a chain of comparisons: tokens are most of a body.
    fn skip_to(&mut self, stops: &[bool; 256]) {
        let rest = self.buf.get(self.pos..).unwrap_or(&[]);
        // Indexing a 256-entry table by a byte cannot go out of bounds.
        self.pos += rest
            .iter()
            .position(|&b| stops[usize::from(b)])
            .unwrap_or(rest.len());
    }

    /// A bare run of bytes up to `,`, space, tab or the end of the line (no escapes).
    fn bare(&mut self) -> &'a [u8] {
        let start = self.pos;
        loop {
            self.skip_to(&BARE_STOPS);
            match self.peek() {
                Some(b'\r') if !is_line_end(self.peek_at(1)) => self.pos += 1,
                _ => break,
            }
        }
        self.buf.get(start..self.pos).unwrap_or(&[])
    }

    fn field_value(&mut self, key: &str) -> PResult<FieldValue<'a>> {
        let v_pos = self.pos;
        if self.peek() == Some(b'"') {
            return self.string_value(key);
        }
        if let Some((v, len)) = plain_number(self.buf.get(self.pos..).unwrap_or(&[])) {
            self.pos += len;
            return Ok(v);
        }
        let raw = self.bare();
        if raw.is_empty() {
            return Err((v_pos, ErrorKind::MissingFieldValue(key.to_string())));
        }
        // The usual value first: plain decimal text is neither a boolean nor suffixed.
        if let Some(f) = simple_float(raw) {
            return Ok(FieldValue::Float(f));
        }
        let invalid = || {
            (
                v_pos,
                ErrorKind::InvalidFieldValue {
                    field: key.to_string(),
                    value: String::from_utf8_lossy(raw).into_owned(),
                },
            )
        };
        let out_of_range = || {
            (
                v_pos,
                ErrorKind::IntegerOutOfRange {
                    field: key.to_string(),
                    value: String::from_utf8_lossy(raw).into_owned(),
                },
            )
        };
        match raw {
            b"t" | b"T" | b"true" | b"True" | b"TRUE" => return Ok(FieldValue::Bool(true)),
            b"f" | b"F" | b"false" | b"False" | b"FALSE" => return Ok(FieldValue::Bool(false)),
            _ => {}
        }
        match raw.split_last() {
            Some((b'i', digits)) => {
                if !is_integer_text(digits, true) {
                    return Err(invalid());
                }
                parse_int(digits)
                    .map(FieldValue::Int)
                    .ok_or_else(out_of_range)
            }
            Some((b'u', digits)) => {
                if !is_integer_text(digits, false) {
                    return Err(invalid());
                }
                parse_u64(digits)
                    .map(FieldValue::UInt)
                    .ok_or_else(out_of_range)
            }
            _ => {
                if !is_float_text(raw) {
                    return Err(invalid());
                }
                std::str::from_utf8(raw)
                    .ok()
                    .and_then(|s| s.parse::<f64>().ok())
                    .filter(|f| f.is_finite())
                    .map(FieldValue::Float)
                    .ok_or_else(invalid)
            }
        }
    }

    /// A double-quoted string; `\"` and `\\` are escapes, newlines are allowed inside.
    fn string_value(&mut self, key: &str) -> PResult<FieldValue<'a>> {
        let open = self.pos;
        self.pos += 1;
        let start = self.pos;
        let mut has_escape = false;
        loop {
            match self.peek() {
                None => {
                    return Err((open, ErrorKind::UnterminatedString(key.to_string())));
                }
                Some(b'\\') if matches!(self.peek_at(1), Some(b'"' | b'\\')) => {
                    has_escape = true;
                    self.pos += 2;
                }
                Some(b'"') => break,
                Some(b'\n') => {
                    self.extra_newlines += 1;
                    self.pos += 1;
                }
                Some(_) => self.pos += 1,
            }
        }
        let end = self.pos;
        self.pos += 1; // closing quote
        if end - start > STRING_FIELD_BYTES_MAX {
            return Err((
                open,
                ErrorKind::StringTooLong {
                    field: key.to_string(),
                    len: end - start,
                },
            ));
        }
        let s = self.text(start, end)?;
        if !has_escape {
            return Ok(FieldValue::Str(Cow::Borrowed(s)));
        }
        Ok(FieldValue::Str(Cow::Owned(unescape(s, |c| {
            c == b'"' || c == b'\\'
        }))))
    }
}

/// One of 64 bits for a key, from its length and end bytes: equal keys have equal bits, so
/// a clear bit proves a key is new (see `line_into`).
fn key_bit(k: &str) -> u64 {
    let b = k.as_bytes();
    let first = b.first().copied().map_or(0, u64::from);
    let last = b.last().copied().map_or(0, u64::from);
    let h = (b.len() as u64).wrapping_mul(7) ^ first.wrapping_mul(3) ^ last.rotate_left(3);
    1u64 << (h & 63)
}

/// A 256-entry table marking `bytes`.
const fn byte_set(bytes: &[u8]) -> [bool; 256] {
    let mut t = [false; 256];
    let mut i = 0;
    while i < bytes.len() {
        t[bytes[i] as usize] = true;
        i += 1;
    }
    t
}

/// Bytes that may end a measurement (`\r` only before the line end; `\\` may escape).
static MEASUREMENT_STOPS: [bool; 256] = byte_set(b"\\\n\r, ");
/// Bytes that may end a tag key, tag value or field key.
static KEY_STOPS: [bool; 256] = byte_set(b"\\\n\r, =");
/// Bytes that may end a bare value (a number, a boolean, the timestamp).
static BARE_STOPS: [bool; 256] = byte_set(b", \t\n\r");

fn is_escapable(section: Section, c: u8) -> bool {
    match section {
        Section::Measurement => matches!(c, b',' | b' ' | b'\\'),
        Section::Key => matches!(c, b',' | b'=' | b' ' | b'\\'),
    }
}

/// Removes the backslash of each escape that `escapable` accepts; other backslashes stay.
fn unescape(s: &str, escapable: impl Fn(u8) -> bool) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.char_indices().peekable();
    while let Some((_, c)) = chars.next() {
        if c == '\\' {
            if let Some(&(_, n)) = chars.peek() {
                if n.is_ascii() && escapable(n as u8) {
                    out.push(n);
                    chars.next();
                    continue;
                }
            }
        }
        out.push(c);
    }
    out
}

/// `-?[0-9]+` (the sign only if `signed`).
fn is_integer_text(s: &[u8], signed: bool) -> bool {
    let digits = match s.split_first() {
        Some((b'-', rest)) if signed => rest,
        _ => s,
    };
    !digits.is_empty() && digits.iter().all(u8::is_ascii_digit)
}

/// `-?(digits[.digits]|.digits)([eE][+-]?digits)?`: what InfluxDB accepts as a float. Rejects
/// `inf`, `NaN`, a leading `+` and hex, which Rust's float parser would otherwise take.
fn is_float_text(s: &[u8]) -> bool {
    let s = match s.split_first() {
        Some((b'-', rest)) => rest,
        _ => s,
    };
    let (mantissa, exponent) = match s.iter().position(|&b| b == b'e' || b == b'E') {
        Some(i) => (
            s.get(..i).unwrap_or(&[]),
            Some(s.get(i + 1..).unwrap_or(&[])),
        ),
        None => (s, None),
    };
    let mut digits = 0;
    let mut dots = 0;
    for &b in mantissa {
        match b {
            b'0'..=b'9' => digits += 1,
            b'.' => dots += 1,
            _ => return false,
        }
    }
    if digits == 0 || dots > 1 {
        return false;
    }
    match exponent {
        None => true,
        Some(e) => {
            let e = match e.split_first() {
                Some((b'+' | b'-', rest)) => rest,
                _ => e,
            };
            !e.is_empty() && e.iter().all(u8::is_ascii_digit)
        }
    }
}

/// A signed decimal integer without suffix (`-?[0-9]+`); `None` if malformed or out of
/// range.
fn parse_int(s: &[u8]) -> Option<i64> {
    match s.split_first() {
        Some((b'-', digits)) => 0i64.checked_sub_unsigned(parse_u64(digits)?),
        _ => i64::try_from(parse_u64(s)?).ok(),
    }
}

/// An unsigned decimal integer (`[0-9]+`); `None` if malformed or out of range.
fn parse_u64(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    // Up to 19 digits cannot overflow (10^19 - 1 < 2^64): no check per digit (a
    // nanosecond timestamp has 19).
    if digits.len() <= 19 {
        let mut v: u64 = 0;
        let mut bad = false;
        for &b in digits {
            let d = b.wrapping_sub(b'0');
            bad |= d > 9;
            v = v.wrapping_mul(10).wrapping_add(u64::from(d));
        }
        return (!bad).then_some(v);
    }
    let mut v: u64 = 0;
    for &b in digits {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d))?;
    }
    Some(v)
}

/// Powers of ten that f64 holds exactly.
const EXACT_POWERS_OF_TEN: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// The number written by the 1 to 19 decimal digits at the start of `s` and how many there
/// are; `None` if there are none or more than 19. Eight digits at a time while there are
/// (a nanosecond timestamp is 19): a digit at a time was a tenth of the parse of a line.
fn leading_digits(s: &[u8]) -> Option<(u64, usize)> {
    let mut v: u64 = 0;
    let mut n = 0usize;
    while let Some(eight) = s.get(n..).and_then(|r| r.first_chunk::<8>()) {
        let Some(d) = eight_digits(*eight) else {
            break;
        };
        if n + 8 > 19 {
            return None;
        }
        v = v * 100_000_000 + d;
        n += 8;
    }
    while let Some(&b) = s.get(n) {
        if !b.is_ascii_digit() {
            break;
        }
        if n == 19 {
            return None;
        }
        v = v * 10 + u64::from(b - b'0');
        n += 1;
    }
    (n > 0).then_some((v, n))
}

/// Eight ASCII digits (the first the most significant) as their number, or `None` if any
/// byte is not a digit: the digits' nibbles combined in pairs, fours and eights by three
/// multiplications instead of eight dependent steps.
fn eight_digits(b: [u8; 8]) -> Option<u64> {
    let v = u64::from_le_bytes(b);
    // Every byte 0x30..=0x39: its high nibble is 3, and adding 6 keeps it 3.
    let high = v & 0xf0f0_f0f0_f0f0_f0f0;
    let carried = v.wrapping_add(0x0606_0606_0606_0606) & 0xf0f0_f0f0_f0f0_f0f0;
    if high | (carried >> 4) != 0x3333_3333_3333_3333 {
        return None;
    }
    let v = v - 0x3030_3030_3030_3030;
    // Pairs: byte i becomes 10 * digit i + digit i + 1 (in the even bytes).
    let v = v.wrapping_mul(10).wrapping_add(v >> 8);
    // Then fours and the eight, in the top half.
    let mask = 0x0000_00ff_0000_00ff;
    let v = (v & mask)
        .wrapping_mul(100 + (1_000_000 << 32))
        .wrapping_add(((v >> 16) & mask).wrapping_mul(1 + (10_000 << 32)))
        >> 32;
    Some(v)
}

/// `a == b` for the short keys of line protocol without a call to `memcmp`: for 4 to 16
/// bytes, two overlapping word comparisons.
pub fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    if a.len() <= 16 {
        if let Some(same) = ends_equal::<8>(a, b).or_else(|| ends_equal::<4>(a, b)) {
            return same;
        }
    }
    a == b
}

/// Whether the first and the last `N` bytes of `a` and `b` are equal; `None` if they are
/// shorter than `N`. For equal lengths of at most `2N` bytes, that is whether they are equal.
fn ends_equal<const N: usize>(a: &[u8], b: &[u8]) -> Option<bool> {
    Some(
        a.first_chunk::<N>()? == b.first_chunk::<N>()?
            && a.last_chunk::<N>()? == b.last_chunk::<N>()?,
    )
}

/// The decimal text at the start of a value: `-?digits[.digits]` with 1 to 15 digits (at
/// most one `.`), scanned up to the first byte that does not continue it.
struct Decimal {
    neg: bool,
    /// The digits as an integer (below 10^15 < 2^53, so exact in f64).
    mantissa: u64,
    /// Digits after the `.`, if there is one.
    frac: Option<usize>,
    /// Bytes scanned.
    len: usize,
}

impl Decimal {
    /// `None` if `s` starts with no digit (after a `-`) or with more than 15 of them.
    fn prefix(s: &[u8]) -> Option<Decimal> {
        let neg = s.first() == Some(&b'-');
        let mut i = usize::from(neg);
        let mut mantissa: u64 = 0;
        let mut digits = 0usize;
        let mut dot: Option<usize> = None;
        loop {
            match s.get(i) {
                Some(&b) if b.is_ascii_digit() => {
                    digits += 1;
                    if digits > 15 {
                        return None;
                    }
                    mantissa = mantissa * 10 + u64::from(b - b'0');
                }
                Some(b'.') if dot.is_none() => dot = Some(digits),
                _ => break,
            }
            i += 1;
        }
        (digits > 0).then_some(Decimal {
            neg,
            mantissa,
            frac: dot.map(|d| digits - d),
            len: i,
        })
    }

    /// The value: the digits and the power of ten are both exact in f64, so their one IEEE
    /// division is the correctly rounded value, the same as `str::parse` gives (Clinger's
    /// fast path).
    fn to_f64(&self) -> Option<f64> {
        let v = match self.frac {
            None | Some(0) => self.mantissa as f64,
            Some(frac) => self.mantissa as f64 / EXACT_POWERS_OF_TEN.get(frac)?,
        };
        Some(if self.neg { -v } else { v })
    }
}

/// A field value at the start of `s` that [`simple_float`] takes, or such digits (no `.`)
/// with an `i`, ending at a byte that ends a value in every case (`,`, space, tab, newline
/// or the end): the value and its length, read in one pass instead of finding the value's
/// end first. Gives what the general path would for those bytes; `None` for anything else.
#[inline(always)]
fn plain_number(s: &[u8]) -> Option<(FieldValue<'static>, usize)> {
    let d = Decimal::prefix(s)?;
    let int = d.frac.is_none() && s.get(d.len) == Some(&b'i');
    let len = d.len + usize::from(int);
    if !matches!(s.get(len), None | Some(b',' | b' ' | b'\t' | b'\n')) {
        return None;
    }
    if int {
        // 15 digits fit an i64 either way.
        let v = d.mantissa as i64;
        return Some((FieldValue::Int(if d.neg { -v } else { v }), len));
    }
    Some((FieldValue::Float(d.to_f64()?), len))
}

/// The decimal number at the start of `s` (`-?digits[.digits]`, 1 to 15 digits, no exponent)
/// and how many bytes it takes: the value `str::parse::<f64>` gives for those bytes. `None` if
/// `s` does not start with one; the caller checks what follows it.
pub fn decimal_prefix(s: &[u8]) -> Option<(f64, usize)> {
    let d = Decimal::prefix(s)?;
    Some((d.to_f64()?, d.len))
}

/// The integer at the start of `s` (`-?digits`, 1 to 19 digits, within i64) and how many
/// bytes it takes: the value `str::parse::<i64>` gives for those bytes. `None` if `s` does not
/// start with one; the caller checks what follows it.
pub fn integer_prefix(s: &[u8]) -> Option<(i64, usize)> {
    let neg = s.first() == Some(&b'-');
    let (v, n) = leading_digits(s.get(usize::from(neg)..)?)?;
    let v = i64::try_from(v).ok()?;
    Some((if neg { -v } else { v }, n + usize::from(neg)))
}

/// The usual float text (`-?digits[.digits]`, no exponent, at most 15 significant digits)
/// without the general parser ([`Decimal`]). `None` for anything else, which then takes the
/// general path.
fn simple_float(s: &[u8]) -> Option<f64> {
    let d = Decimal::prefix(s)?;
    if d.len != s.len() {
        return None;
    }
    d.to_f64()
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Precision::Nanos => "ns",
            Precision::Micros => "us",
            Precision::Millis => "ms",
            Precision::Seconds => "s",
            Precision::Minutes => "m",
            Precision::Hours => "h",
        })
    }
}

#[cfg(test)]
mod tests;
