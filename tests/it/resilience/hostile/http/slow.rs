//! Peers that are slow on purpose, against the real binary: a head
//! trickled a byte a second (slowloris), a body trickled likewise, a TLS
//! handshake that never starts and one trickled a byte at a time. Each
//! connection is answered 408 or closed within its timeout plus slack,
//! never held open by the trickle; a request head that stops arriving gets
//! the 408 at the request timeout.
//!
//! Not for: connections that are idle between requests (see `super::idle`).

use super::{watch, Seen};
use crate::support::*;
use serde_json::json;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `request_read_timeout` and `TLS_HANDSHAKE_TIMEOUT` of `src/http/`.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// What the server may take beyond a timeout (its watchdog's slack is 2 s).
const SLACK: Duration = Duration::from_secs(4);

fn assert_no_panic(s: &Server) {
    let logs = s.logs();
    assert!(!logs.contains("panicked"), "the server panicked:\n{logs}");
}

/// Writes `bytes` one a second on `w` (through `send`) until they run out,
/// `stop` is set or a write fails.
fn trickle(bytes: Vec<u8>, stop: Arc<AtomicBool>, mut send: impl FnMut(&[u8]) -> bool) {
    for b in bytes {
        if stop.load(Ordering::Acquire) || !send(&[b]) {
            return;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// Sends `bytes` on `c` one a second, looking for an answer after each
/// (the TLS stream cannot be shared with a writer thread, so the trickle
/// runs here and peeks); stops at the answer, a failed write, or twice the
/// timeout and its slack. The answer, if any, and the time since the first
/// byte.
fn trickle_until_answered(c: &mut Conn<TlsStream>, bytes: &[u8]) -> (Option<Resp>, Duration) {
    let started = Instant::now();
    for b in bytes {
        if c.send(&[*b]).is_err() || started.elapsed() > REQUEST_TIMEOUT + SLACK * 2 {
            break;
        }
        std::thread::sleep(Duration::from_secs(1));
        c.stream
            .sock
            .set_read_timeout(Some(Duration::from_millis(1)))
            .unwrap();
        let mut peek = [0u8; 1];
        if c.stream
            .sock
            .peek(&mut peek)
            .map(|n| n > 0)
            .unwrap_or(false)
        {
            c.stream.sock.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
            let answer = c.read_response().expect("an answer after the peek");
            return (Some(answer), started.elapsed());
        }
    }
    (None, started.elapsed())
}

/// Reads a TCP socket until EOF or an error; the bytes and when it ended.
fn read_until_closed(tcp: &mut TcpStream, limit: Duration) -> (Vec<u8>, Duration) {
    let start = Instant::now();
    tcp.set_read_timeout(Some(limit)).unwrap();
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match tcp.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&chunk[..n]),
        }
    }
    (got, start.elapsed())
}

#[test]
fn slowloris_head_a_byte_a_second_gets_408_and_is_closed() {
    let s = Server::with_pools(1, 0);
    let token = s.new_client("acme");
    let mut c = s.connect();
    let head = format!(
        "GET {COLLECTION} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\nX-Padding: {}\r\n\r\n",
        "p".repeat(100)
    );
    let (answer, waited) = trickle_until_answered(&mut c, head.as_bytes());
    let r = answer.unwrap_or_else(|| panic!("no answer after {waited:?} of trickling"));
    assert_eq!(r.status, 408, "{}", r.text());
    assert!(
        waited >= REQUEST_TIMEOUT && waited <= REQUEST_TIMEOUT + SLACK,
        "408 after {waited:?}"
    );
    assert!(c.is_closed_within(Duration::from_secs(5)));
    s.create_ok(&token, &body(RU_PHONE));
    assert_no_panic(&s);
}

#[test]
fn slow_body_a_byte_a_second_gets_408_and_is_closed() {
    slow_body_gets_408_and_is_closed(false);
}

/// A chunked body gets the same deadline as a sized one.
#[test]
fn slow_chunked_body_a_byte_a_second_gets_408_and_is_closed() {
    slow_body_gets_408_and_is_closed(true);
}

fn slow_body_gets_408_and_is_closed(chunked: bool) {
    let s = Server::with_pools(1, 0);
    let token = s.new_client("acme");
    let b = body(RU_PHONE).to_string();
    let auth = format!("Bearer {token}");
    let mut headers = vec![
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
    ];
    let payload = if chunked {
        headers.push(("Transfer-Encoding", "chunked"));
        format!("{:x}\r\n{b}\r\n0\r\n\r\n", b.len())
    } else {
        b
    };
    let req = build_request("POST", COLLECTION, &headers, payload.as_bytes(), true);
    let head_end = req.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let mut c = s.connect();
    c.send(&req[..head_end]).unwrap();
    let (answer, waited) = trickle_until_answered(&mut c, &req[head_end..]);
    let r = answer.unwrap_or_else(|| panic!("no answer after {waited:?} of trickling the body"));
    assert_eq!(r.status, 408, "{}", r.text());
    assert!(waited <= REQUEST_TIMEOUT + SLACK, "408 after {waited:?}");
    assert!(c.is_closed_within(Duration::from_secs(5)));
    // The one number was not leased by the half-sent create.
    s.create_ok(&token, &body(RU_PHONE));
    assert_no_panic(&s);
}

/// The first flight of a real TLS client (a ClientHello), as bytes.
fn client_hello() -> Vec<u8> {
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(rustls::RootCertStore::empty())
    .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let mut out = Vec::new();
    while conn.wants_write() {
        conn.write_tls(&mut out).unwrap();
    }
    out
}

#[test]
fn a_tls_handshake_that_never_starts_is_closed_after_the_timeout() {
    let s = Server::with_pools(1, 0);
    let mut tcp = TcpStream::connect(s.https).unwrap();
    let (got, after) = read_until_closed(&mut tcp, REQUEST_TIMEOUT + SLACK * 2);
    assert!(got.is_empty(), "{got:?}");
    assert!(
        after >= REQUEST_TIMEOUT / 2 && after <= REQUEST_TIMEOUT + SLACK,
        "closed after {after:?}"
    );
    assert_no_panic(&s);
}

#[test]
fn a_tls_handshake_trickled_a_byte_a_second_is_closed_after_the_timeout() {
    let s = Server::with_pools(1, 0);
    let hello = client_hello();
    assert!(hello.len() > 30, "{} bytes", hello.len());
    let tcp = TcpStream::connect(s.https).unwrap();
    let mut writer = tcp.try_clone().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let sender = std::thread::spawn(move || {
        trickle(hello, stop2, |b| writer.write_all(b).is_ok());
    });
    let mut reader = tcp;
    // Each byte arrives well within the per-read timeout, so only a
    // deadline for the whole handshake closes this connection.
    let (got, after) = read_until_closed(&mut reader, REQUEST_TIMEOUT + SLACK * 3);
    stop.store(true, Ordering::Release);
    sender.join().unwrap();
    assert!(got.is_empty() || got[0] == 0x15, "{got:?}");
    assert!(
        after <= REQUEST_TIMEOUT + SLACK,
        "the trickled handshake was held {after:?}"
    );
    assert_no_panic(&s);
}

/// `request_read_timeout` of `src/http/conn.rs` (the README's "a whole
/// request within 10 s").
const REQUEST_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// README, "The API" (HTTP limits): a request that has not
/// arrived whole within 10 s is answered 408 and its connection closed.
#[test]
fn slow_request_head_gets_408_and_the_connection_is_closed() {
    let s = Server::with_pools(1, 0);
    let mut c = s.connect();
    // A request line and one header, then nothing: the head never ends.
    c.send(b"GET /api/v1/verifications/ HTTP/1.1\r\nHost: localhost\r\n")
        .expect("sending a partial head");
    let sent = Instant::now();
    // A server without the read timeout never answers: the client's read
    // timeout (30 s) then fails this.
    let r = c
        .read_response()
        .expect("a response to the partial request");
    let waited = sent.elapsed();
    assert_eq!(r.status, 408, "{}", r.text());
    assert_json_type(&r);
    assert_eq!(r.json(), json!({"detail": "Request timeout."}));
    // Not an early answer: the server waited for the rest of the request.
    assert!(
        waited >= REQUEST_READ_TIMEOUT / 2,
        "408 after only {waited:?}"
    );
    assert_eq!(r.header("connection"), Some("close"), "{:?}", r.headers);
    // The connection is reclaimed: the server closes it.
    assert_eq!(
        watch(&mut c, Duration::from_secs(5)),
        Seen::Closed,
        "connection still open after the 408"
    );
}
