//! HTTP/1.1 on the client's side, as bytes: the request a client sends and
//! the response read back from the front of a buffer (httparse for the
//! head, RFC 9112 section 6 for the body's length). The blocking client
//! ([`crate::client`]) and the load generator's event loop read with the
//! same function; they differ only in what they accept ([`Reading`]).
//!
//! Not for: sockets or TLS (the callers own those), or chunked bodies: the
//! service never sends one, so `Transfer-Encoding` in a response is
//! [`Malformed`].

use serde_json::Value;
use std::fmt;

/// Header fields parsed in one response head.
const HEADERS_COUNT_MAX: usize = 128;

/// The bytes of a request. Adds `Host: localhost` unless `headers` has a
/// `Host`, `Content-Length` for a body (or any POST, PUT or PATCH) unless
/// given (or `Transfer-Encoding` is), and `Connection: close` unless
/// `keep_alive` or given. Header fields go out in the order given.
pub fn build_request(
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    keep_alive: bool,
) -> Vec<u8> {
    let has = |n: &str| headers.iter().any(|(h, _)| h.eq_ignore_ascii_case(n));
    let mut out = format!("{method} {path} HTTP/1.1\r\n");
    if !has("host") {
        out.push_str("Host: localhost\r\n");
    }
    for (n, v) in headers {
        out.push_str(&format!("{n}: {v}\r\n"));
    }
    let wants_length = !body.is_empty() || matches!(method, "POST" | "PUT" | "PATCH");
    if wants_length && !has("content-length") && !has("transfer-encoding") {
        out.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    if !keep_alive && !has("connection") {
        out.push_str("Connection: close\r\n");
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

/// One response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    /// The server asked to close (`Connection: close`, or HTTP/1.0).
    pub close: bool,
    /// Names lowercased, values trimmed, in order (empty unless
    /// [`Reading::keep_headers`]).
    pub headers: Vec<(String, String)>,
    /// Empty unless [`Reading::keep_body`].
    pub body: Vec<u8>,
    /// `Idempotent-Replayed: true`: the service answered a create with an
    /// Idempotency-Key's stored 201. Read even when the fields are not
    /// kept, for the load generator's and the crash harness's hot paths.
    pub replayed: bool,
}

impl Response {
    /// The first field of that name (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.header_all(name).into_iter().next()
    }

    /// Every field of that name (any case), in order.
    pub fn header_all(&self, name: &str) -> Vec<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .filter(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// The body as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON.
    pub fn parse_json(&self) -> serde_json::Result<Value> {
        serde_json::from_slice(&self.body)
    }
}

/// What a reader accepts and keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    /// The request was HEAD: the response has no body whatever its head
    /// says (RFC 9110 section 9.3.2).
    pub head_request: bool,
    pub keep_headers: bool,
    /// Keep the body (else it is framed and skipped).
    pub keep_body: bool,
    /// A response with no `Content-Length` runs to the connection's end
    /// (else it is [`Malformed`]).
    pub body_until_close: bool,
    pub head_bytes_max: usize,
    pub body_bytes_max: usize,
}

impl Reading {
    /// Everything kept, any framing HTTP/1.1 allows but chunked, bounded
    /// only against a runaway peer.
    pub const ALL: Reading = Reading {
        head_request: false,
        keep_headers: true,
        keep_body: true,
        body_until_close: true,
        head_bytes_max: 64 * 1024,
        body_bytes_max: 64 * 1024 * 1024,
    };
}

/// A response the reader cannot take, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed(pub &'static str);

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for Malformed {}

/// How long a body is, by its head.
enum Length {
    Known(usize),
    UntilClose,
}

/// What a parsed head says.
struct Head {
    status: u16,
    close: bool,
    content_length: Option<usize>,
    replayed: bool,
    headers: Vec<(String, String)>,
}

/// Reads one response from the front of `buf`: `Ok(None)` until it is all
/// there (`eof`: the peer has closed, so what is there is all there will
/// be), else the response and how many bytes of `buf` it took.
pub fn parse_response(
    buf: &[u8],
    reading: &Reading,
    eof: bool,
) -> Result<Option<(Response, usize)>, Malformed> {
    if buf.is_empty() {
        return Ok(None);
    }
    let mut storage = [httparse::EMPTY_HEADER; HEADERS_COUNT_MAX];
    let mut parsed = httparse::Response::new(&mut storage);
    let head_len = match parsed.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() <= reading.head_bytes_max => return Ok(None),
        Ok(httparse::Status::Partial) => return Err(Malformed("response head too large")),
        Err(_) => return Err(Malformed("not an HTTP/1.x response head")),
    };
    let head = read_head(&parsed, reading)?;
    let no_body =
        reading.head_request || head.status < 200 || head.status == 204 || head.status == 304;
    let length = match head.content_length {
        _ if no_body => Length::Known(0),
        Some(n) if n > reading.body_bytes_max => return Err(Malformed("response body too large")),
        Some(n) => Length::Known(n),
        None if reading.body_until_close => Length::UntilClose,
        None => return Err(Malformed("no Content-Length")),
    };
    let end = match length {
        Length::Known(n) if buf.len() < head_len + n => return Ok(None),
        Length::Known(n) => head_len + n,
        Length::UntilClose if buf.len() - head_len > reading.body_bytes_max => {
            return Err(Malformed("response body too large"))
        }
        Length::UntilClose if !eof => return Ok(None),
        Length::UntilClose => buf.len(),
    };
    let body = if reading.keep_body {
        buf[head_len..end].to_vec()
    } else {
        Vec::new()
    };
    let response = Response {
        status: head.status,
        close: head.close,
        headers: head.headers,
        body,
        replayed: head.replayed,
    };
    Ok(Some((response, end)))
}

/// The status, the framing fields and (if kept) all the fields.
fn read_head(parsed: &httparse::Response<'_, '_>, reading: &Reading) -> Result<Head, Malformed> {
    let status = parsed.code.ok_or(Malformed("no status code"))?;
    let mut close = parsed.version == Some(0);
    let mut content_length = None;
    let mut replayed = false;
    let mut headers = Vec::new();
    for h in parsed.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let n = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse::<usize>().ok())
                .ok_or(Malformed("Content-Length is not a number"))?;
            if content_length.is_some_and(|l| l != n) {
                return Err(Malformed("two different Content-Length values"));
            }
            content_length = Some(n);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(Malformed("Transfer-Encoding is not read here"));
        } else if h.name.eq_ignore_ascii_case("connection") {
            close |= h
                .value
                .split(|b| *b == b',')
                .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"close"));
        } else if h.name.eq_ignore_ascii_case("idempotent-replayed") {
            replayed = h.value.trim_ascii().eq_ignore_ascii_case(b"true");
        }
        if reading.keep_headers {
            headers.push((
                h.name.to_ascii_lowercase(),
                String::from_utf8_lossy(h.value).trim().to_owned(),
            ));
        }
    }
    Ok(Head {
        status,
        close,
        content_length,
        replayed,
        headers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strict(keep_body: bool) -> Reading {
        Reading {
            keep_headers: false,
            keep_body,
            body_until_close: false,
            ..Reading::ALL
        }
    }

    #[test]
    fn complete_partial_and_pipelined_responses() {
        let two = b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\n{}HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        let (r, used) = parse_response(two, &strict(true), false).unwrap().unwrap();
        assert_eq!(
            (r.status, r.close, r.body.as_slice()),
            (404, false, &b"{}"[..])
        );
        assert!(r.headers.is_empty());
        assert!(!r.replayed);
        let (r, rest) = parse_response(&two[used..], &strict(false), false)
            .unwrap()
            .unwrap();
        assert_eq!((r.status, r.close, rest), (200, true, two.len() - used));
        for cut in 1..used {
            assert_eq!(
                parse_response(&two[..cut], &strict(true), false),
                Ok(None),
                "{cut}"
            );
        }
    }

    #[test]
    fn framing_that_is_not_read_is_an_error() {
        for bad in [
            &b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            b"SSH-2.0-OpenSSH\r\n\r\n",
        ] {
            assert!(
                parse_response(bad, &strict(true), false).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let replay =
            b"HTTP/1.1 201 Created\r\nIdempotent-Replayed: true\r\nContent-Length: 0\r\n\r\n";
        let (r, _) = parse_response(replay, &strict(false), false)
            .unwrap()
            .unwrap();
        assert!(r.replayed && r.headers.is_empty());
        let http10 = b"HTTP/1.0 204 No Content\r\n\r\n";
        let (r, _) = parse_response(http10, &strict(false), false)
            .unwrap()
            .unwrap();
        assert!(r.close);
    }

    #[test]
    fn a_body_without_length_runs_to_the_close_when_allowed() {
        let text = b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\nX-A: 1\r\n\r\nbad";
        assert_eq!(parse_response(text, &Reading::ALL, false), Ok(None));
        let (r, used) = parse_response(text, &Reading::ALL, true).unwrap().unwrap();
        assert_eq!(
            (r.status, r.text().as_str(), used),
            (400, "bad", text.len())
        );
        assert_eq!(r.header("x-a"), Some("1"));
        assert_eq!(r.header("Connection"), Some("close"));
    }

    #[test]
    fn head_interim_and_no_content_answers_have_no_body() {
        let head = Reading {
            head_request: true,
            ..Reading::ALL
        };
        let text = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nHTTP/1.1 100 Continue\r\n\r\n";
        let (r, used) = parse_response(text, &head, false).unwrap().unwrap();
        assert_eq!((r.status, r.body.len()), (200, 0));
        let (r, _) = parse_response(&text[used..], &Reading::ALL, false)
            .unwrap()
            .unwrap();
        assert_eq!(r.status, 100);
    }

    #[test]
    fn requests_get_their_defaults() {
        let r = build_request(
            "POST",
            "/x/",
            &[("Authorization", "Bearer t")],
            b"{}",
            false,
        );
        assert_eq!(
            String::from_utf8(r).unwrap(),
            "POST /x/ HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer t\r\n\
             Content-Length: 2\r\nConnection: close\r\n\r\n{}"
        );
        let r = build_request("GET", "/", &[("Host", "h:1")], b"", true);
        assert_eq!(r, b"GET / HTTP/1.1\r\nHost: h:1\r\n\r\n");
    }
}
