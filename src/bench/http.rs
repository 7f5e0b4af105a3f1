//! A minimal blocking HTTP/1.1 client over `TcpStream` for the HTTP APIs the benchmark loads
//! and queries (InfluxDB, ClickHouse, VictoriaMetrics, Tidal's line protocol). A loader holds
//! a [`Conn`] per worker and keeps it open across requests, as TSBS's loaders (fasthttp),
//! Telegraf and the InfluxDB client libraries do, rather than opening a connection per
//! request. Responses are framed by `Content-Length` or chunked encoding (read to EOF only
//! when the server gives neither). Enough for loopback benchmarking without pulling an HTTP
//! client crate into the build.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Response {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// Sends `method path` with `body` to `addr` (`host:port`) on a connection of its own and
/// reads the whole response.
pub fn request(
    addr: &str,
    method: &str,
    path: &str,
    body: &[u8],
    timeout: Duration,
) -> Result<Response, String> {
    Conn::new(addr, timeout).request(method, path, body, false)
}

/// A keep-alive connection to one server, opened on first use and again whenever the server
/// closed it. One per loader thread (it is not shared).
pub struct Conn {
    addr: String,
    timeout: Duration,
    stream: Option<TcpStream>,
    /// Bytes read from the stream: the response being read.
    buf: Vec<u8>,
}

/// Why one attempt at a request failed.
enum Failure {
    /// The server closed the connection before a byte of the response: on a reused
    /// connection that is the server having dropped it while idle, and the request may not
    /// have been seen at all.
    ClosedEarly(String),
    Other(String),
}

/// How a response's body ends.
enum BodyEnd {
    None,
    Length(usize),
    Chunked,
    Eof,
}

/// The head of a response: status, where the body starts in the buffer, how it ends, and
/// whether the server closes the connection after it.
struct Head {
    status: u16,
    body_at: usize,
    end: BodyEnd,
    close: bool,
}

impl Conn {
    pub fn new(addr: &str, timeout: Duration) -> Conn {
        Conn {
            addr: addr.to_string(),
            timeout,
            stream: None,
            buf: Vec::new(),
        }
    }

    /// Sends `method path` with `body` and reads the whole response. `replayable`: the
    /// request may be sent again, once, on a new connection when a reused one turns out to
    /// be closed before any byte of the response (a line-protocol write is: the same points
    /// again replace themselves; an INSERT of rows is not).
    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        body: &[u8],
        replayable: bool,
    ) -> Result<Response, String> {
        let reused = self.stream.is_some();
        let first = self.attempt(method, path, body);
        let outcome = match first {
            Err(Failure::ClosedEarly(_)) if reused && replayable => {
                self.attempt(method, path, body)
            }
            other => other,
        };
        match outcome {
            Ok(r) => Ok(r),
            Err(Failure::ClosedEarly(e) | Failure::Other(e)) => {
                self.stream = None;
                Err(format!(
                    "HTTP {method} http://{}{}: {e}",
                    self.addr,
                    short(path)
                ))
            }
        }
    }

    fn attempt(&mut self, method: &str, path: &str, body: &[u8]) -> Result<Response, Failure> {
        let other = |e: std::io::Error| Failure::Other(e.to_string());
        let mut stream = match self.stream.take() {
            Some(s) => s,
            None => {
                let s = TcpStream::connect(&self.addr).map_err(other)?;
                s.set_read_timeout(Some(self.timeout)).map_err(other)?;
                s.set_write_timeout(Some(self.timeout)).map_err(other)?;
                let _ = s.set_nodelay(true);
                s
            }
        };
        let request_head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\nContent-Type: text/plain\r\n\r\n",
            self.addr,
            body.len()
        );
        // A write to a connection the server has closed may fail or may succeed (into the
        // socket's buffer); either way nothing of the response has come yet.
        let closed = |e| io_failure(e, true);
        stream.write_all(request_head.as_bytes()).map_err(closed)?;
        stream.write_all(body).map_err(closed)?;
        self.buf.clear();
        let head = loop {
            let h = loop {
                if let Some(h) = parse_head(&self.buf, method)? {
                    break h;
                }
                if read_some(&mut stream, &mut self.buf)? == 0 {
                    return Err(if self.buf.is_empty() {
                        Failure::ClosedEarly("connection closed before the response".into())
                    } else {
                        Failure::Other(format!(
                            "connection closed in the response's head ({} bytes)",
                            self.buf.len()
                        ))
                    });
                }
            };
            // An interim response (100 Continue) precedes the real one.
            if (100..200).contains(&h.status) {
                self.buf.drain(..h.body_at);
                continue;
            }
            break h;
        };
        let body = match head.end {
            BodyEnd::None => Vec::new(),
            BodyEnd::Length(n) => {
                let want = head.body_at + n;
                while self.buf.len() < want {
                    if read_some(&mut stream, &mut self.buf)? == 0 {
                        return Err(Failure::Other(format!(
                            "connection closed {} bytes into a body of {n}",
                            self.buf.len() - head.body_at
                        )));
                    }
                }
                self.buf[head.body_at..want].to_vec()
            }
            BodyEnd::Chunked => {
                let mut chunks = Chunked::new(head.body_at);
                loop {
                    if chunks.advance(&self.buf).map_err(Failure::Other)? {
                        break chunks.body;
                    }
                    if read_some(&mut stream, &mut self.buf)? == 0 {
                        return Err(Failure::Other("connection closed in a chunked body".into()));
                    }
                }
            }
            BodyEnd::Eof => {
                while read_some(&mut stream, &mut self.buf)? > 0 {}
                self.buf[head.body_at..].to_vec()
            }
        };
        if !head.close && !matches!(head.end, BodyEnd::Eof) {
            self.stream = Some(stream);
        }
        Ok(Response {
            status: head.status,
            body,
        })
    }
}

/// Reads what the stream has into `buf` (0 at EOF).
fn read_some(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Result<usize, Failure> {
    const READ_BYTES: usize = 64 << 10;
    let len = buf.len();
    buf.resize(len + READ_BYTES, 0);
    let n = loop {
        match stream.read(&mut buf[len..]) {
            Ok(n) => break n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                buf.truncate(len);
                return Err(io_failure(e, len == 0));
            }
        }
    };
    buf.truncate(len + n);
    Ok(n)
}

/// `e` as a failure of the attempt: the connection closed early when nothing of the response
/// was read and `e` says the server closed it (a timeout does not: the server may still be
/// working on the request).
fn io_failure(e: std::io::Error, nothing_read: bool) -> Failure {
    let reset = matches!(
        e.kind(),
        std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::BrokenPipe
            | std::io::ErrorKind::UnexpectedEof
    );
    if nothing_read && reset {
        Failure::ClosedEarly(e.to_string())
    } else {
        Failure::Other(e.to_string())
    }
}

fn short(path: &str) -> String {
    path.chars().take(120).collect()
}

/// The response head at the start of `raw`, once it is all there (`None` before).
fn parse_head(raw: &[u8], method: &str) -> Result<Option<Head>, Failure> {
    let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Ok(None);
    };
    let bad = || Failure::Other(format!("malformed response head ({} bytes)", end));
    let head = std::str::from_utf8(&raw[..end]).map_err(|_| bad())?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().ok_or_else(bad)?;
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(bad)?;
    let (mut length, mut chunked, mut close) = (None, false, status_line.starts_with("HTTP/1.0"));
    for l in lines {
        let Some((name, value)) = l.split_once(':') else {
            continue;
        };
        let (name, value) = (
            name.trim().to_ascii_lowercase(),
            value.trim().to_ascii_lowercase(),
        );
        match name.as_str() {
            "content-length" => length = Some(value.parse::<usize>().map_err(|_| bad())?),
            "transfer-encoding" => chunked |= value.contains("chunked"),
            "connection" => {
                if value.contains("close") {
                    close = true;
                } else if value.contains("keep-alive") {
                    close = false;
                }
            }
            _ => {}
        }
    }
    let body_end =
        if method == "HEAD" || status == 204 || status == 304 || (100..200).contains(&status) {
            BodyEnd::None
        } else if chunked {
            BodyEnd::Chunked
        } else if let Some(n) = length {
            BodyEnd::Length(n)
        } else {
            BodyEnd::Eof
        };
    Ok(Some(Head {
        status,
        body_at: end + 4,
        end: body_end,
        close,
    }))
}

/// A chunked body decoded as it arrives: `at` is where the next chunk's size line starts.
struct Chunked {
    at: usize,
    body: Vec<u8>,
}

impl Chunked {
    fn new(at: usize) -> Chunked {
        Chunked {
            at,
            body: Vec::new(),
        }
    }

    /// Takes the whole chunks `raw` holds past `at`; true once the last chunk (and the
    /// trailers) are in.
    fn advance(&mut self, raw: &[u8]) -> Result<bool, String> {
        loop {
            let rest = raw.get(self.at..).unwrap_or_default();
            let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") else {
                return Ok(false);
            };
            let size_text = std::str::from_utf8(&rest[..eol])
                .map_err(|_| "malformed chunk size".to_string())?;
            let size_text = size_text.split(';').next().unwrap_or_default().trim();
            let size = usize::from_str_radix(size_text, 16)
                .map_err(|_| format!("malformed chunk size '{size_text}'"))?;
            let data = eol + 2;
            if size == 0 {
                // Trailers, if any, end with an empty line.
                let trailers = &rest[data..];
                if trailers.starts_with(b"\r\n") {
                    return Ok(true);
                }
                return Ok(trailers.windows(4).any(|w| w == b"\r\n\r\n"));
            }
            let Some(chunk) = rest.get(data..data + size) else {
                return Ok(false);
            };
            match rest.get(data + size..data + size + 2) {
                None => return Ok(false),
                Some(b"\r\n") => {}
                Some(_) => return Err("chunk not followed by CRLF".into()),
            }
            self.body.extend_from_slice(chunk);
            self.at += data + size + 2;
        }
    }
}

/// Percent-encodes a query-string value.
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::net::TcpListener;

    fn head(raw: &[u8]) -> Option<(u16, usize, bool)> {
        match parse_head(raw, "POST") {
            Ok(Some(h)) => Some((h.status, h.body_at, h.close)),
            _ => None,
        }
    }

    #[test]
    fn parses_heads_and_chunked_bodies() {
        assert_eq!(
            head(b"HTTP/1.1 204 No Content\r\nX: y\r\n\r\n"),
            Some((204, 33, false))
        );
        assert_eq!(
            head(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nab"),
            Some((200, 38, true))
        );
        assert_eq!(head(b"HTTP/1.1 200 OK\r\nContent-Le"), None);
        assert!(parse_head(b"garbage\r\n\r\n", "GET").is_err());
        let raw = b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        let mut c = Chunked::new(0);
        // Fed a byte at a time, it finishes exactly at the end.
        for n in 1..raw.len() {
            assert_eq!(c.advance(&raw[..n]), Ok(false), "after {n} bytes");
        }
        assert_eq!(c.advance(raw), Ok(true));
        assert_eq!(c.body, b"abcde");
        assert!(Chunked::new(0).advance(b"zz\r\n").is_err());
        assert_eq!(encode("a b='x'"), "a%20b%3D%27x%27");
    }

    /// A server that answers `answers` requests on each connection it accepts, then closes
    /// it; returns its address and how many connections it accepted.
    fn serve(
        answers: usize,
        response: &'static [u8],
    ) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = accepted.clone();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { return };
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                std::thread::spawn(move || {
                    let mut buf = Vec::new();
                    for _ in 0..answers {
                        // Read one request: head, then Content-Length bytes.
                        let body_at = loop {
                            if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                                break p + 4;
                            }
                            let mut b = [0u8; 4096];
                            match s.read(&mut b) {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&b[..n]),
                            }
                        };
                        let head = String::from_utf8_lossy(&buf[..body_at]).to_ascii_lowercase();
                        let len: usize = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse().ok())
                            .unwrap_or(0);
                        while buf.len() < body_at + len {
                            let mut b = [0u8; 4096];
                            match s.read(&mut b) {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&b[..n]),
                            }
                        }
                        buf.drain(..body_at + len);
                        if s.write_all(response).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (addr, accepted)
    }

    #[test]
    fn a_connection_is_kept_across_requests_and_reopened_when_the_server_closes_it() {
        let (addr, accepted) = serve(2, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
        let mut c = Conn::new(&addr, Duration::from_secs(10));
        for i in 0..5 {
            let r = c
                .request("POST", "/write", format!("body {i}").as_bytes(), true)
                .unwrap();
            assert_eq!((r.status, r.text()), (200, "ok".to_string()));
        }
        // Two requests per connection: the third and fifth found theirs closed and were sent
        // again on a new one.
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 3);
        // Not replayable: the closed connection is an error, and the next request reconnects.
        let mut c = Conn::new(&addr, Duration::from_secs(10));
        for _ in 0..2 {
            c.request("POST", "/x", b"a", false).unwrap();
        }
        let e = c.request("POST", "/x", b"a", false).unwrap_err();
        assert!(e.contains("/x"), "{e}");
        assert_eq!(c.request("POST", "/x", b"a", false).unwrap().text(), "ok");
    }

    #[test]
    fn chunked_and_close_delimited_responses_are_read_whole() {
        let (addr, _) = serve(
            3,
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
        );
        let mut c = Conn::new(&addr, Duration::from_secs(10));
        for _ in 0..3 {
            assert_eq!(c.request("GET", "/q", b"", false).unwrap().text(), "abcde");
        }
        let (addr, _) = serve(1, b"HTTP/1.1 200 OK\r\n\r\nuntil eof");
        let r = request(&addr, "GET", "/q", b"", Duration::from_secs(10)).unwrap();
        assert_eq!(r.text(), "until eof");
    }
}
