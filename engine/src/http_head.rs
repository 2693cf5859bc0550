//! The HTTP/1.1 request head, parsed and checked without IO: where a head
//! ends, whether the bytes so far can start a request at all, the request
//! line and header fields (bounded by [`HeadLimits`]), and HTTP/1.1's
//! message rules for framing (RFC 9112/9110: exactly one `Host`, either
//! one numeric `Content-Length` within the limit or `Transfer-Encoding:
//! chunked` alone, `Expect`, `Connection`). Each refusal is the status and text to answer.
//! The binary's connection loop (`src/http/conn.rs`) does the reading and
//! the timing; the fuzz target `http_request` and
//! `engine/tests/it/edges.rs` drive [`exercise`] (through
//! `http_exercise`, which adds the chunked body decoder).
//!
//! Not for: reading sockets, timeouts, bodies or routing.

/// What a peer may send in a head, and the body size it may announce.
#[derive(Debug, Clone, Copy)]
pub struct HeadLimits {
    /// Request line plus headers, in bytes (431 beyond).
    pub header_bytes_max: usize,
    /// Number of header fields (431 beyond); at most
    /// [`HEADER_COUNT_CEILING`], which applies above it.
    pub header_count_max: usize,
    /// Body bytes (413 beyond).
    pub body_bytes_max: usize,
}

/// A refusal: answer `status` with `text` and close.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reject {
    pub status: u16,
    pub text: &'static str,
}

impl Reject {
    const fn new(status: u16, text: &'static str) -> Reject {
        Reject { status, text }
    }
}

/// How much of the start of a head is parsed before it is complete: enough
/// for the request line, so bytes that cannot start an HTTP request (a TLS
/// ClientHello on the plain port, binary garbage) get their 400 at once
/// instead of after the read timeout. Only the start, so a peer trickling
/// a long head does not make every read re-parse kilobytes.
const EARLY_PARSE_BYTES: usize = 1024;

/// A 400 for an incomplete head whose start is already not HTTP.
pub fn reject_garbage_early(buf: &[u8], limits: &HeadLimits) -> Result<(), Reject> {
    if buf.is_empty() || buf.len() > EARLY_PARSE_BYTES {
        return Ok(());
    }
    let mut storage = [httparse::EMPTY_HEADER; HEADER_COUNT_CEILING];
    let count_max = limits.header_count_max.min(HEADER_COUNT_CEILING);
    match httparse::Request::new(&mut storage[..count_max]).parse(buf) {
        Ok(_) | Err(httparse::Error::TooManyHeaders) => Ok(()),
        Err(_) => Err(Reject::new(400, "Malformed request.")),
    }
}

/// Header fields one head may carry at most, whatever the limits say: the
/// parser's field table lives on the stack (2 KiB), not in an allocation
/// per request.
pub const HEADER_COUNT_CEILING: usize = 64;

/// A request head, parsed into one owned text: the method, the target's
/// path and query, then each header's name (lowercased) and value (trimmed;
/// bytes that are not UTF-8 replaced), back to back, with the spans of each.
/// Why one text: owning each part on its own was two allocations per header
/// and three more for the request line, on every request.
#[derive(Debug, Clone)]
pub struct Head {
    text: String,
    method: Span,
    path: Span,
    query: Option<Span>,
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub version: u8,
    headers: Vec<(Span, Span)>,
}

/// A part of [`Head`]'s text, by byte offsets.
type Span = (u32, u32);

impl Head {
    fn part(&self, (start, end): Span) -> &str {
        // Spans are made by `push` below, on char boundaries of `text`.
        &self.text[start as usize..end as usize]
    }

    pub fn method(&self) -> &str {
        self.part(self.method)
    }

    /// The path without the query string, as sent (percent-encoding kept).
    pub fn path(&self) -> &str {
        self.part(self.path)
    }

    /// The query string without `?`, if any.
    pub fn query(&self) -> Option<&str> {
        self.query.map(|q| self.part(q))
    }

    /// Every header as (lowercase name, value), in the order sent.
    pub fn headers(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        self.headers
            .iter()
            .map(|&(name, value)| (self.part(name), self.part(value)))
    }

    /// The values of header `name` (lowercase), in the order sent.
    pub fn values<'a, 'n>(&'a self, name: &'n str) -> impl Iterator<Item = &'a str> + use<'a, 'n> {
        self.headers()
            .filter(move |(n, _)| *n == name)
            .map(|(_, v)| v)
    }
}

/// Appends `part` to `text` and returns its span. A head is at most the
/// limits' bytes (kilobytes), so offsets fit in `u32`.
fn push(text: &mut String, part: &str) -> Span {
    let start = text.len() as u32;
    text.push_str(part);
    (start, text.len() as u32)
}

pub fn parse_head(raw: &[u8], limits: &HeadLimits) -> Result<Head, Reject> {
    let mut header_storage = [httparse::EMPTY_HEADER; HEADER_COUNT_CEILING];
    let count_max = limits.header_count_max.min(HEADER_COUNT_CEILING);
    let mut parsed = httparse::Request::new(&mut header_storage[..count_max]);
    match parsed.parse(raw) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Err(Reject::new(400, "Malformed request.")),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(Reject::new(431, "Too many header fields."))
        }
        Err(_) => return Err(Reject::new(400, "Malformed request.")),
    }
    let target = parsed.path.unwrap_or("");
    if !target.starts_with('/') {
        return Err(Reject::new(400, "Malformed request target."));
    }
    // The parts are at most the head's bytes (more only where a byte that
    // is not UTF-8 becomes a three-byte replacement).
    let mut text = String::with_capacity(raw.len());
    let method = push(&mut text, parsed.method.unwrap_or(""));
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (push(&mut text, p), Some(push(&mut text, q))),
        None => (push(&mut text, target), None),
    };
    let mut headers = Vec::with_capacity(parsed.headers.len());
    for h in parsed.headers.iter() {
        let name = push(&mut text, h.name);
        text[name.0 as usize..].make_ascii_lowercase();
        let value = push(&mut text, String::from_utf8_lossy(h.value).trim());
        headers.push((name, value));
    }
    Ok(Head {
        text,
        method,
        path,
        query,
        version: parsed.version.unwrap_or(1),
        headers,
    })
}

/// How the request's body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// `Content-Length` bytes (0 without the header).
    Length(usize),
    /// `Transfer-Encoding: chunked` (decoded by the `http_chunked` module).
    Chunked,
}

/// What the head says about the message's framing and the connection.
pub struct Framing {
    pub body: Body,
    pub keep_alive: bool,
    /// `Expect: 100-continue` on HTTP/1.1.
    pub expect_continue: bool,
}

/// Checks the head against HTTP/1.1's message rules and our limits.
pub fn framing(head: &Head, limits: &HeadLimits) -> Result<Framing, Reject> {
    let version = head.version;
    let all = |name: &'static str| head.values(name);
    // RFC 9112 3.2: exactly one Host in HTTP/1.1, or 400.
    if version == 1 && all("host").count() != 1 {
        return Err(Reject::new(400, "Missing or repeated Host header."));
    }
    let body = body_framing(
        &all("transfer-encoding").collect::<Vec<_>>(),
        &mut all("content-length"),
        version,
    )?;
    if matches!(body, Body::Length(n) if n > limits.body_bytes_max) {
        return Err(Reject::new(413, "Request body too large."));
    }
    // RFC 9110 10.1.1: 100-continue is the only expectation defined; any
    // other is 417. An HTTP/1.0 client cannot take a 100, so it is ignored.
    let expect_continue = match all("expect").collect::<Vec<_>>().as_slice() {
        [] => false,
        _ if version == 0 => false,
        [v] if v.eq_ignore_ascii_case("100-continue") => true,
        _ => return Err(Reject::new(417, "Expectation failed.")),
    };
    let conn = all("connection")
        .map(str::to_ascii_lowercase)
        .collect::<Vec<_>>()
        .join(",");
    let has = |t: &str| conn.split(',').any(|x| x.trim() == t);
    let keep_alive = if version == 0 {
        has("keep-alive")
    } else {
        !has("close")
    };
    Ok(Framing {
        body,
        keep_alive,
        expect_continue,
    })
}

/// The body's framing from its `Transfer-Encoding` and `Content-Length`
/// fields. Only the plain chunked coding is read; both fields together,
/// any other coding (or `chunked` twice, or not last), and a transfer
/// coding on HTTP/1.0 are refused, so no message two parsers could split
/// differently (request smuggling) gets past this point (RFC 9112 6.1,
/// 6.3). Each refusal closes the connection.
fn body_framing<'a>(
    codings: &[&str],
    lengths: &mut impl Iterator<Item = &'a str>,
    version: u8,
) -> Result<Body, Reject> {
    let length = match (lengths.next(), lengths.next()) {
        (None, _) => None,
        (Some(v), None) => {
            Some(parse_content_length(v).ok_or(Reject::new(400, "Invalid Content-Length."))?)
        }
        (Some(_), Some(_)) => return Err(Reject::new(400, "Repeated Content-Length.")),
    };
    if codings.is_empty() {
        return Ok(Body::Length(length.unwrap_or(0)));
    }
    if length.is_some() {
        return Err(Reject::new(
            400,
            "Both Transfer-Encoding and Content-Length.",
        ));
    }
    if version == 0 {
        return Err(Reject::new(400, "Transfer-Encoding in HTTP/1.0."));
    }
    let mut listed = codings.iter().flat_map(|v| v.split(',')).map(str::trim);
    match (listed.next(), listed.next()) {
        (Some(c), None) if c.eq_ignore_ascii_case("chunked") => Ok(Body::Chunked),
        _ => Err(Reject::new(501, "Transfer coding not implemented.")),
    }
}

/// Strictly digits (httparse leaves the value raw; `+5` or `5 5` are refused).
pub fn parse_content_length(v: &str) -> Option<usize> {
    if v.is_empty() || v.len() > 12 || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse().ok()
}

pub fn find_head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4)
}

/// Everything above on arbitrary bytes, as the connection loop would use it
/// (for fuzzing: any panic is a bug).
pub fn exercise(data: &[u8]) {
    let limits = HeadLimits {
        header_bytes_max: 16 * 1024,
        header_count_max: 64,
        body_bytes_max: 64 * 1024,
    };
    let _ = reject_garbage_early(data, &limits);
    if let Some(end) = find_head_end(data) {
        if let Ok(head) = parse_head(&data[..end], &limits) {
            let _ = framing(&head, &limits);
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = parse_content_length(text);
    }
}
