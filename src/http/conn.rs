//! Serving one connection: read a request within limits, call the handler,
//! write the response, repeat while the connection is kept alive.

use super::{Request, Response};
use dialproof_engine::http_chunked::Chunked;
use dialproof_engine::http_head::{self, Body, HeadLimits, Reject};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// While idle between requests a connection looks at the drain flag this
/// often (so a drain closes idle connections within it).
pub const IDLE_SLICE: Duration = Duration::from_secs(1);
/// Draining, an idle connection still waits this long for a request the
/// client may have sent just as the drain began (its response then says
/// `Connection: close`), so no request already on the wire is cut off.
pub const DRAIN_GRACE: Duration = Duration::from_millis(300);

/// Hard limits on what a peer may send. Every one has a named default.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Request line plus headers, in bytes (431 beyond).
    pub header_bytes_max: usize,
    /// Number of header fields (431 beyond).
    pub header_count_max: usize,
    /// Body bytes (413 beyond).
    pub body_bytes_max: usize,
    /// Time to receive a whole request once its first byte arrived (408).
    pub request_read_timeout: Duration,
    /// How long an idle keep-alive connection is kept.
    pub idle_timeout: Duration,
    /// Requests served on one connection before it is closed, so a client
    /// cannot pin a worker's connection slot forever.
    pub requests_per_connection_max: usize,
}

impl Limits {
    /// The limits the engine's head parser checks.
    pub(crate) fn head(&self) -> HeadLimits {
        HeadLimits {
            header_bytes_max: self.header_bytes_max,
            header_count_max: self.header_count_max,
            body_bytes_max: self.body_bytes_max,
        }
    }
}

/// The engine's refusal as this layer's answer.
fn reject(r: Reject) -> ReadError {
    ReadError::Reject(r.status, r.text)
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_bytes_max: 16 * 1024,
            header_count_max: 64,
            body_bytes_max: 64 * 1024,
            request_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            requests_per_connection_max: 100_000,
        }
    }
}

/// What went wrong reading a request, and how to answer it.
enum ReadError {
    /// The peer closed (or idled out) between requests: nothing to answer.
    Gone,
    /// Answer with this status and close.
    Reject(u16, &'static str),
}

/// Bytes read from one connection: the request (or requests, when
/// pipelined) not yet consumed. It derefs to them.
struct Inbox {
    bytes: Vec<u8>,
    /// Where each read lands before it is appended: zeroed once per
    /// connection, not per read (a stack array here was an 8 KiB `memset`
    /// before every request).
    chunk: Box<[u8; READ_CHUNK]>,
}

/// The most one read takes from the stream.
const READ_CHUNK: usize = 8192;

impl Inbox {
    fn new() -> Inbox {
        Inbox {
            bytes: Vec::with_capacity(4096),
            chunk: Box::new([0; READ_CHUNK]),
        }
    }
}

impl std::ops::Deref for Inbox {
    type Target = Vec<u8>;
    fn deref(&self) -> &Vec<u8> {
        &self.bytes
    }
}

impl std::ops::DerefMut for Inbox {
    fn deref_mut(&mut self) -> &mut Vec<u8> {
        &mut self.bytes
    }
}

/// A stream whose read timeout can be adjusted as deadlines approach.
pub trait TimedStream: Read + Write {
    fn set_read_timeout(&mut self, dur: Option<Duration>) -> io::Result<()>;
}

/// Serves requests on `stream` until the peer closes, asks to close, breaks a
/// limit, `requests_per_connection_max` is reached, or `draining` is set
/// (then the request in progress is answered with `Connection: close`).
/// While `crowded` is set (the listener holds more connections than it
/// keeps), a connection idle between requests is closed at its next look.
pub fn serve<S: TimedStream>(
    stream: &mut S,
    peer: SocketAddr,
    limits: &Limits,
    handler: &dyn Fn(&Request) -> Response,
    draining: &AtomicBool,
    crowded: &AtomicBool,
) {
    let mut buf = Inbox::new();
    for served in 0..limits.requests_per_connection_max {
        if buf.is_empty() && !wait_for_request(stream, &mut buf, limits, draining, crowded) {
            return;
        }
        let (req, keep_alive) = match read_request(stream, &mut buf, peer, limits) {
            Ok(r) => r,
            Err(ReadError::Gone) => return,
            Err(ReadError::Reject(status, text)) => {
                let _ = Response::detail(status, text).write_to(stream, true, false);
                return;
            }
        };
        let resp = handler(&req);
        let last = served + 1 == limits.requests_per_connection_max;
        let close = !keep_alive || last || draining.load(Ordering::Acquire);
        let head_only = req.method() == "HEAD";
        if resp.write_to(stream, close, head_only).is_err() || close {
            return;
        }
    }
}

/// Waits, idle, for the first bytes of the next request: true when some
/// arrived. Gives up after the idle timeout, when the peer closes, when
/// draining (after [`DRAIN_GRACE`]), or when crowded (after one slice).
fn wait_for_request<S: TimedStream>(
    stream: &mut S,
    buf: &mut Inbox,
    limits: &Limits,
    draining: &AtomicBool,
    crowded: &AtomicBool,
) -> bool {
    let idle_until = Instant::now() + limits.idle_timeout;
    let mut drain_until: Option<Instant> = None;
    let mut first = true;
    loop {
        let now = Instant::now();
        // Shed under crowding, but not before one look at the socket: a
        // request already sent is served.
        if !first && crowded.load(Ordering::Acquire) {
            return false;
        }
        first = false;
        if draining.load(Ordering::Acquire) && drain_until.is_none() {
            drain_until = Some(now + DRAIN_GRACE);
        }
        let until = drain_until.map_or(idle_until, |d| d.min(idle_until));
        let slice = until.saturating_duration_since(now).min(IDLE_SLICE);
        if slice.is_zero() || stream.set_read_timeout(Some(slice)).is_err() {
            return false;
        }
        match fill(stream, buf) {
            Ok(0) => return false,
            Ok(_) => return true,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return false,
        }
    }
}

/// Reads one request. `buf` carries bytes already received past the previous
/// request (pipelining) and keeps what is left past this one.
fn read_request<S: TimedStream>(
    stream: &mut S,
    buf: &mut Inbox,
    peer: SocketAddr,
    limits: &Limits,
) -> Result<(Request, bool), ReadError> {
    // The first bytes are in (`wait_for_request`); the whole request gets
    // `request_read_timeout` (a slow-loris peer cannot hold a connection by
    // trickling bytes).
    let deadline = Instant::now() + limits.request_read_timeout;
    let head_len = loop {
        if let Some(pos) = http_head::find_head_end(buf) {
            break pos;
        }
        if buf.len() > limits.header_bytes_max {
            return Err(ReadError::Reject(431, "Request header fields too large."));
        }
        http_head::reject_garbage_early(buf, &limits.head()).map_err(reject)?;
        read_more(stream, buf, deadline)?;
    };
    if head_len > limits.header_bytes_max {
        return Err(ReadError::Reject(431, "Request header fields too large."));
    }
    let head = http_head::parse_head(&buf[..head_len], &limits.head()).map_err(reject)?;
    let framing = http_head::framing(&head, &limits.head()).map_err(reject)?;

    buf.drain(..head_len);
    let body = match framing.body {
        Body::Length(len) => read_sized(stream, buf, len, framing.expect_continue, deadline)?,
        Body::Chunked => read_chunked(stream, buf, limits, framing.expect_continue, deadline)?,
    };
    Ok((Request::new(head, body, peer), framing.keep_alive))
}

/// RFC 9110 10.1.1: a client that sent `Expect: 100-continue` waits for
/// this before its body; the head passed every check, so invite it.
fn send_continue<S: TimedStream>(stream: &mut S) -> Result<(), ReadError> {
    stream
        .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
        .and_then(|()| stream.flush())
        .map_err(|_| ReadError::Gone)
}

/// A `Content-Length` body: exactly `len` bytes after the head.
fn read_sized<S: TimedStream>(
    stream: &mut S,
    buf: &mut Inbox,
    len: usize,
    expect_continue: bool,
    deadline: Instant,
) -> Result<Vec<u8>, ReadError> {
    if expect_continue && buf.len() < len {
        send_continue(stream)?;
    }
    while buf.len() < len {
        read_more(stream, buf, deadline)?;
    }
    Ok(buf.drain(..len).collect())
}

/// A chunked body, decoded as it arrives, within the same body limit and
/// deadline as a sized one; bytes after its end stay in `buf` for the next
/// request.
fn read_chunked<S: TimedStream>(
    stream: &mut S,
    buf: &mut Inbox,
    limits: &Limits,
    expect_continue: bool,
    deadline: Instant,
) -> Result<Vec<u8>, ReadError> {
    let mut decoder = Chunked::new(limits.body_bytes_max, limits.header_bytes_max);
    let used = decoder.feed(buf).map_err(reject)?;
    buf.drain(..used);
    if expect_continue && !decoder.is_done() {
        send_continue(stream)?;
    }
    while !decoder.is_done() {
        read_more(stream, buf, deadline)?;
        let used = decoder.feed(buf).map_err(reject)?;
        buf.drain(..used);
    }
    Ok(decoder.into_body())
}

fn read_more<S: TimedStream>(
    stream: &mut S,
    buf: &mut Inbox,
    deadline: Instant,
) -> Result<(), ReadError> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(ReadError::Reject(408, "Request timeout."));
    }
    stream
        .set_read_timeout(Some(left))
        .map_err(|_| ReadError::Gone)?;
    match fill(stream, buf) {
        Ok(0) => Err(ReadError::Gone),
        Ok(_) => Ok(()),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) =>
        {
            Err(ReadError::Reject(408, "Request timeout."))
        }
        Err(_) => Err(ReadError::Gone),
    }
}

fn fill<S: Read>(stream: &mut S, buf: &mut Inbox) -> io::Result<usize> {
    loop {
        match stream.read(&mut buf.chunk[..]) {
            Ok(n) => {
                let Inbox { bytes, chunk } = buf;
                bytes.extend_from_slice(&chunk[..n]);
                return Ok(n);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    /// An in-memory stream: reads from `input`, collects writes.
    struct Mem {
        input: Cursor<Vec<u8>>,
        output: Vec<u8>,
    }

    impl Read for Mem {
        fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
            self.input.read(b)
        }
    }
    impl Write for Mem {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.output.write(b)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    impl TimedStream for Mem {
        fn set_read_timeout(&mut self, _: Option<Duration>) -> io::Result<()> {
            Ok(())
        }
    }

    fn run(input: &[u8]) -> String {
        let mut m = Mem {
            input: Cursor::new(input.to_vec()),
            output: Vec::new(),
        };
        let peer: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let handler = |r: &Request| {
            Response::json(
                200,
                format!("{{\"m\":\"{}\",\"len\":{}}}", r.method(), r.body.len()),
            )
        };
        serve(
            &mut m,
            peer,
            &Limits::default(),
            &handler,
            &AtomicBool::new(false),
            &AtomicBool::new(false),
        );
        String::from_utf8(m.output).unwrap()
    }

    #[test]
    fn pipelined_requests_with_bodies_are_separated() {
        let out = run(b"POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabcGET /b HTTP/1.1\r\nHost: h\r\n\r\n");
        assert_eq!(out.matches("HTTP/1.1 200 OK").count(), 2);
        assert!(out.contains("{\"m\":\"POST\",\"len\":3}"));
        assert!(out.contains("{\"m\":\"GET\",\"len\":0}"));
    }

    #[test]
    fn bad_content_length_is_a_400_not_a_panic() {
        for cl in ["abc", "-1", "+5", "1 1", "99999999999999999999"] {
            let out = run(
                format!("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: {cl}\r\n\r\n").as_bytes(),
            );
            assert!(out.starts_with("HTTP/1.1 400"), "{cl}: {out}");
        }
    }

    #[test]
    fn limits_give_413_431_411() {
        let big = format!(
            "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: {}\r\n\r\n",
            1 << 20
        );
        assert!(run(big.as_bytes()).starts_with("HTTP/1.1 413"));
        let many: String = (0..100).map(|i| format!("X-{i}: v\r\n")).collect();
        assert!(
            run(format!("GET / HTTP/1.1\r\nHost: h\r\n{many}\r\n").as_bytes())
                .starts_with("HTTP/1.1 431")
        );
        let long = format!(
            "GET / HTTP/1.1\r\nHost: h\r\nX: {}\r\n\r\n",
            "a".repeat(20_000)
        );
        assert!(run(long.as_bytes()).starts_with("HTTP/1.1 431"));
    }

    #[test]
    fn chunked_bodies_are_read_and_smuggling_pairs_refused() {
        let out = run(b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n");
        assert!(out.contains("{\"m\":\"POST\",\"len\":5}"), "{out}");
        assert!(out.contains("{\"m\":\"GET\",\"len\":0}"), "{out}");
        for (head, status) in [
            ("Transfer-Encoding: chunked\r\nContent-Length: 5", "400"),
            ("Transfer-Encoding: gzip, chunked", "501"),
            (
                "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked",
                "501",
            ),
            ("Transfer-Encoding: identity", "501"),
        ] {
            let out = run(format!("POST / HTTP/1.1\r\nHost: h\r\n{head}\r\n\r\n0\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n").as_bytes());
            assert!(
                out.starts_with(&format!("HTTP/1.1 {status}")),
                "{head}: {out}"
            );
            // Refused and closed: the bytes after it are never a request.
            assert_eq!(out.matches("HTTP/1.1 ").count(), 1, "{head}: {out}");
        }
        let big = format!(
            "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n",
            64 * 1024 + 1
        );
        assert!(run(big.as_bytes()).starts_with("HTTP/1.1 413"));
    }

    #[test]
    fn connection_close_and_http10_end_the_connection() {
        let out = run(b"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n");
        assert_eq!(out.matches("HTTP/1.1 200").count(), 1);
        assert!(out.contains("Connection: close"));
        let out = run(b"GET / HTTP/1.0\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n");
        assert_eq!(out.matches("HTTP/1.1 200").count(), 1);
    }

    #[test]
    fn head_gets_headers_without_a_body() {
        let out = run(b"HEAD / HTTP/1.1\r\nHost: h\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n");
        let first_end = out.find("\r\n\r\n").unwrap() + 4;
        assert!(out[..first_end].contains("Content-Length: 20"), "{out}");
        assert!(out[first_end..].starts_with("HTTP/1.1 200 OK"), "{out}");
    }

    #[test]
    fn http11_needs_exactly_one_host() {
        assert!(run(b"GET / HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 400"));
        assert!(run(b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n").starts_with("HTTP/1.1 400"));
        assert!(run(b"GET / HTTP/1.0\r\n\r\n").starts_with("HTTP/1.1 200"));
    }

    #[test]
    fn expect_100_continue_is_answered_before_the_body_and_others_are_417() {
        let out = run(
            b"POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nab",
        );
        // The body came with the head (one read here): no 100 is needed.
        // The interim answer itself is shown over TLS in
        // tests/it/resilience/hostile/http/framing.rs.
        assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
        let out = run(b"POST / HTTP/1.1\r\nHost: h\r\nExpect: x\r\nContent-Length: 2\r\n\r\nab");
        assert!(out.starts_with("HTTP/1.1 417"), "{out}");
    }

    #[test]
    fn an_incomplete_head_that_is_not_http_is_a_400_at_once() {
        // No CRLF CRLF: without the early parse this waits for the timeout
        // (here the in-memory stream ends, so nothing would be written).
        assert!(run(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03").starts_with("HTTP/1.1 400"));
        assert_eq!(run(b"GET / HTTP/1.1\r\nHost: h\r\n"), "");
    }

    #[test]
    fn garbage_is_a_400() {
        assert!(run(b"\x00\x01\x02 garbage\r\n\r\n").starts_with("HTTP/1.1 400"));
        assert!(run(b"GET nopath HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 400"));
    }
}
