//! The receiver's connections: accepting (at most
//! [`super::CONNECTIONS_MAX`] at once), reading requests with hard limits
//! (head [`super::HEAD_BYTES_MAX`], body [`super::BODY_BYTES_MAX`], no
//! chunked bodies, [`super::READ_TIMEOUT`] per read), recording each one
//! and answering it.
//!
//! A request that breaks the limits is refused with its status (431, 413,
//! 411, 400) and the connection closed; it is not a hit. A request that is
//! not a POST is a hit answered 405; a webhook whose signature fails (when
//! secrets are known) is a hit answered 400; any other is answered as
//! scripted.
//!
//! Not for: the receiver's public face (see the parent module).

use super::{
    lock, Answer, Hit, Shared, BODY_BYTES_MAX, CONNECTIONS_MAX, HEAD_BYTES_MAX, READ_TIMEOUT,
};
use crate::signature::{self, Verdict};
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Header fields parsed in one request.
const HEADERS_COUNT_MAX: usize = 64;

pub(super) fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    for stream in listener.incoming() {
        if shared.stop.load(Ordering::Acquire) {
            return;
        }
        let Ok(stream) = stream else { continue };
        shared.accepted.fetch_add(1, Ordering::AcqRel);
        if shared.active.fetch_add(1, Ordering::AcqRel) >= CONNECTIONS_MAX {
            shared.active.fetch_sub(1, Ordering::AcqRel);
            let _ = stream.shutdown(Shutdown::Both);
            continue;
        }
        let conn_shared = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("webhook-conn".into())
            .spawn(move || {
                let _ = serve(stream, &conn_shared);
                conn_shared.active.fetch_sub(1, Ordering::AcqRel);
            });
        if spawned.is_err() {
            shared.active.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// One parsed request.
struct Request {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    close: bool,
    body: Vec<u8>,
}

/// Requests on one connection until the peer closes (keep-alive).
fn serve(mut stream: TcpStream, shared: &Shared) -> io::Result<()> {
    stream.set_read_timeout(Some(READ_TIMEOUT))?;
    stream.set_write_timeout(Some(READ_TIMEOUT))?;
    let _ = stream.set_nodelay(true);
    let mut buf = Vec::with_capacity(4096);
    loop {
        let req = match read_request(&mut stream, &mut buf)? {
            Ok(Some(r)) => r,
            Ok(None) => return Ok(()),
            Err(status) => return respond(&mut stream, status, "", true),
        };
        let close = req.close;
        let hit = hit_of(req, &shared.settings);
        let answer = match (hit.method.as_str(), hit.verdict) {
            ("POST", Verdict::Valid | Verdict::Unchecked) => next_answer(shared, &hit.path),
            ("POST", _) => Answer::Status(400),
            _ => Answer::Status(405),
        };
        shared.concurrency.opened();
        if shared.record {
            lock(&shared.hits).push(hit.clone());
        }
        // The tools count webhooks, and the service sends only POSTs.
        if let (Some(on_hit), "POST") = (&shared.on_hit, hit.method.as_str()) {
            on_hit(hit);
        }
        if !answer_with(&mut stream, answer, shared, close)? || close {
            return Ok(());
        }
    }
}

fn next_answer(shared: &Shared, path: &str) -> Answer {
    lock(&shared.script)
        .get_mut(path)
        .and_then(VecDeque::pop_front)
        .unwrap_or_else(|| lock(&shared.default).clone())
}

/// Answers one request; false when the connection is done with.
fn answer_with(
    stream: &mut TcpStream,
    answer: Answer,
    shared: &Shared,
    close: bool,
) -> io::Result<bool> {
    let concurrency = &shared.concurrency;
    let (status, extra) = match answer {
        Answer::Status(s) => (s, String::new()),
        Answer::Slow(d, s) => {
            std::thread::sleep(d);
            (s, String::new())
        }
        Answer::Redirect(to) => (301, format!("Location: {to}\r\n")),
        Answer::Hold(limit) => {
            concurrency.hold(limit);
            (200, String::new())
        }
        abnormal => {
            concurrency.answered();
            answer_abnormally(stream, &abnormal);
            return Ok(false);
        }
    };
    // No longer open once the answer is decided: counting until after the
    // write could overlap the sender's next request, which may go out as
    // soon as it has read this answer.
    concurrency.answered();
    respond(stream, status, &extra, close)?;
    Ok(true)
}

fn respond(stream: &mut TcpStream, status: u16, extra: &str, close: bool) -> io::Result<()> {
    let reason = match status {
        200 => "OK",
        301 => "Moved Permanently",
        400 => "Bad Request",
        405 => "Method Not Allowed",
        411 => "Length Required",
        413 => "Payload Too Large",
        431 => "Request Header Fields Too Large",
        _ => "Answer",
    };
    let body = format!("answer {status}");
    let connection = if close { "Connection: close\r\n" } else { "" };
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n{extra}{connection}\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes())
}

/// Answers [`Answer::Reset`], [`Answer::Garbage`] and [`Answer::Huge`],
/// then closes the connection.
fn answer_abnormally(stream: &mut TcpStream, answer: &Answer) {
    match answer {
        Answer::Reset => {
            // SO_LINGER 0: the close sends RST instead of FIN.
            let _ = socket2::SockRef::from(&*stream).set_linger(Some(Duration::ZERO));
            return;
        }
        Answer::Garbage => {
            let _ = stream.write_all(b"SSH-2.0-OpenSSH_9.6\r\n\x00\xff\xfe not http\r\n\r\n");
        }
        Answer::Huge(n) => {
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {n}\r\n\r\n");
            let chunk = vec![b'x'; 64 * 1024];
            let mut left = *n;
            let ok = stream.write_all(head.as_bytes()).is_ok();
            while ok && left > 0 {
                let take = left.min(chunk.len() as u64) as usize;
                if stream.write_all(&chunk[..take]).is_err() {
                    break;
                }
                left -= take as u64;
            }
        }
        _ => {}
    }
    let _ = stream.shutdown(Shutdown::Both);
}

/// Reads one request: `Ok(Ok(None))` when the peer closed between
/// requests, `Ok(Err(status))` for a request to refuse with `status`.
fn read_request(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
) -> io::Result<Result<Option<Request>, u16>> {
    let head_len = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        if buf.len() > HEAD_BYTES_MAX {
            return Ok(Err(431));
        }
        if fill(stream, buf)? == 0 {
            return Ok(Ok(None));
        }
    };
    let mut storage = [httparse::EMPTY_HEADER; HEADERS_COUNT_MAX];
    let mut parsed = httparse::Request::new(&mut storage);
    if !matches!(
        parsed.parse(&buf[..head_len]),
        Ok(httparse::Status::Complete(_))
    ) {
        return Ok(Err(400));
    }
    let headers: Vec<(String, String)> = parsed
        .headers
        .iter()
        .map(|h| {
            let value = String::from_utf8_lossy(h.value).trim().to_owned();
            (h.name.to_owned(), value)
        })
        .collect();
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    };
    if header("transfer-encoding").is_some() {
        return Ok(Err(411));
    }
    let length = match header("content-length").map(str::parse::<usize>) {
        None => 0,
        Some(Ok(n)) if n <= BODY_BYTES_MAX => n,
        Some(Ok(_)) => return Ok(Err(413)),
        Some(Err(_)) => return Ok(Err(400)),
    };
    let close = header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close"))
        || parsed.version == Some(0);
    let method = parsed.method.unwrap_or("").to_owned();
    let path = parsed.path.unwrap_or("").to_owned();
    buf.drain(..head_len);
    while buf.len() < length {
        if fill(stream, buf)? == 0 {
            return Ok(Ok(None));
        }
    }
    let body = buf.drain(..length).collect();
    Ok(Ok(Some(Request {
        method,
        path,
        headers,
        close,
        body,
    })))
}

fn fill(stream: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<usize> {
    let mut chunk = [0u8; 8192];
    loop {
        match stream.read(&mut chunk) {
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                return Ok(n);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// The request as a hit: when it came, its signature's verdict and the
/// webhook's fields.
fn hit_of(req: Request, settings: &super::Settings) -> Hit {
    let received = Instant::now();
    let at_us = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    let at_ms = at_us / 1000;
    let signature = req
        .headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(signature::HEADER))
        .map(|(_, v)| v.as_str());
    let verdict = signature::verify(
        signature,
        &req.body,
        &settings.secrets,
        at_ms / 1000,
        settings.tolerance_seconds,
    );
    let json: serde_json::Value = serde_json::from_slice(&req.body).unwrap_or_default();
    let text = |field: &str| json[field].as_str().unwrap_or("").to_owned();
    Hit {
        received,
        at_ms,
        at_us,
        event_type: text("type"),
        verification_id: text("verification_id"),
        completed_at: json["completed_at"].as_str().map(str::to_owned),
        verdict,
        method: req.method,
        path: req.path,
        headers: req.headers,
        body: req.body,
    }
}

impl super::Concurrency {
    fn opened(&self) {
        let now_open = self.open.fetch_add(1, Ordering::AcqRel) + 1;
        self.open_max.fetch_max(now_open, Ordering::AcqRel);
    }

    fn answered(&self) {
        self.open.fetch_sub(1, Ordering::AcqRel);
        self.answered.fetch_add(1, Ordering::AcqRel);
    }

    /// Waits for the next release, or `limit`.
    fn hold(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        let mut release = lock(&self.release);
        let seen = *release;
        while *release == seen {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            release = self
                .released
                .wait_timeout(release, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}
