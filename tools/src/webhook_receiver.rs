//! A loopback HTTP/1.1 receiver of Dialproof webhooks: accepts POSTs, checks
//! each one's `X-Service-Signature` with [`crate::signature`], reads the
//! event's type and verification id from the JSON body, and hands an
//! [`Event`] to the caller's callback. It answers `200` to a valid (or, with
//! no secret configured, unchecked) webhook and `400` to one whose
//! signature fails, as a real receiver should (the service then retries).
//!
//! One thread accepts; each connection gets a thread of its own (at most
//! [`CONNECTIONS_MAX`] at once), with keep-alive and hard limits on what a
//! peer may send.
//!
//! Not for: anything but loopback development and measurement. It has no
//! TLS, and it does not deduplicate events (the service may deliver the same
//! event more than once; the callback sees each delivery).

use crate::signature::{self, Verdict};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Request line plus headers, in bytes.
pub const HEAD_BYTES_MAX: usize = 16 * 1024;
/// Request body bytes (a webhook is well under 2 KiB).
pub const BODY_BYTES_MAX: usize = 256 * 1024;
/// Connections served at once; more are closed at accept.
pub const CONNECTIONS_MAX: usize = 256;
/// An idle keep-alive connection or a slow request is dropped after this.
pub const READ_TIMEOUT: Duration = Duration::from_secs(15);
/// Header fields parsed in one request.
const HEADERS_COUNT_MAX: usize = 64;

/// One webhook as received.
#[derive(Debug, Clone)]
pub struct Event {
    /// When the whole request had arrived (monotonic clock).
    pub received: Instant,
    /// The same moment in unix milliseconds.
    pub received_unix_ms: i64,
    pub path: String,
    /// The body's `type`, or empty when the body is not the expected JSON.
    pub event_type: String,
    /// The body's `verification_id`, or empty.
    pub verification_id: String,
    /// The body's `completed_at` (the event's moment), if present.
    pub completed_at: Option<String>,
    pub verdict: Verdict,
}

/// What the receiver checks signatures with.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// The company's webhook secrets (`whsec_...`); none means unchecked.
    pub secrets: Vec<String>,
    /// Allowed distance of `t` from this machine's clock (0: no check).
    pub tolerance_seconds: i64,
}

/// A running receiver; dropping it stops accepting.
pub struct Receiver {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

type Callback = Arc<dyn Fn(Event) + Send + Sync>;

impl Receiver {
    /// Starts accepting on `listener` (bound by the caller, so it can
    /// learn the port before the secrets are known); `on_event` runs on
    /// connection threads, once per webhook received.
    pub fn start(
        listener: TcpListener,
        settings: Settings,
        on_event: impl Fn(Event) + Send + Sync + 'static,
    ) -> io::Result<Receiver> {
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let ctx = Arc::new(Context {
            settings,
            on_event: Arc::new(on_event),
            active: AtomicUsize::new(0),
        });
        let accept = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("webhook-accept".into())
                .spawn(move || accept_loop(listener, stop, ctx))?
        };
        Ok(Receiver {
            addr,
            stop,
            accept: Some(accept),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://<addr>`: the prefix to register as a development URL.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://<addr>/hook`: the `webhook_url` to create verifications with.
    pub fn hook_url(&self) -> String {
        format!("{}/hook", self.base_url())
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

struct Context {
    settings: Settings,
    on_event: Callback,
    active: AtomicUsize,
}

fn accept_loop(listener: TcpListener, stop: Arc<AtomicBool>, ctx: Arc<Context>) {
    for stream in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = stream else { continue };
        if ctx.active.fetch_add(1, Ordering::SeqCst) >= CONNECTIONS_MAX {
            ctx.active.fetch_sub(1, Ordering::SeqCst);
            let _ = stream.shutdown(Shutdown::Both);
            continue;
        }
        let ctx2 = ctx.clone();
        let spawned = std::thread::Builder::new()
            .name("webhook-conn".into())
            .spawn(move || {
                let _ = serve(stream, &ctx2);
                ctx2.active.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            ctx.active.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// One parsed request.
struct Request {
    method: String,
    path: String,
    signature: Option<String>,
    close: bool,
    body: Vec<u8>,
}

fn serve(mut stream: TcpStream, ctx: &Context) -> io::Result<()> {
    stream.set_read_timeout(Some(READ_TIMEOUT))?;
    stream.set_write_timeout(Some(READ_TIMEOUT))?;
    let _ = stream.set_nodelay(true);
    let mut buf = Vec::with_capacity(4096);
    loop {
        let req = match read_request(&mut stream, &mut buf)? {
            Ok(Some(r)) => r,
            Ok(None) => return Ok(()),
            Err(status) => {
                respond(&mut stream, status, true)?;
                return Ok(());
            }
        };
        let status = if req.method != "POST" {
            405
        } else {
            let event = event_of(&req, &ctx.settings);
            let ok = matches!(event.verdict, Verdict::Valid | Verdict::Unchecked);
            (ctx.on_event)(event);
            if ok {
                200
            } else {
                400
            }
        };
        respond(&mut stream, status, req.close)?;
        if req.close {
            return Ok(());
        }
    }
}

fn respond(stream: &mut TcpStream, status: u16, close: bool) -> io::Result<()> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        405 => "Method Not Allowed",
        411 => "Length Required",
        413 => "Payload Too Large",
        _ => "Request Header Fields Too Large",
    };
    let connection = if close { "Connection: close\r\n" } else { "" };
    let head = format!("HTTP/1.1 {status} {reason}\r\nContent-Length: 0\r\n{connection}\r\n");
    stream.write_all(head.as_bytes())
}

/// Reads one request: `Ok(Ok(None))` when the peer closed between requests,
/// `Ok(Err(status))` for a request to refuse with `status`.
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
    let mut headers = [httparse::EMPTY_HEADER; HEADERS_COUNT_MAX];
    let mut parsed = httparse::Request::new(&mut headers);
    if !matches!(
        parsed.parse(&buf[..head_len]),
        Ok(httparse::Status::Complete(_))
    ) {
        return Ok(Err(400));
    }
    let header = |name: &str| {
        parsed
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .and_then(|h| std::str::from_utf8(h.value).ok())
            .map(|v| v.trim().to_owned())
    };
    if header("transfer-encoding").is_some() {
        return Ok(Err(411));
    }
    let length = match header("content-length").map(|v| v.parse::<usize>()) {
        None => 0,
        Some(Ok(n)) if n <= BODY_BYTES_MAX => n,
        Some(Ok(_)) => return Ok(Err(413)),
        Some(Err(_)) => return Ok(Err(400)),
    };
    let close = header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close"))
        || parsed.version == Some(0);
    let method = parsed.method.unwrap_or("").to_owned();
    let path = parsed.path.unwrap_or("").to_owned();
    let signature = header(signature::HEADER);
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
        signature,
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

fn event_of(req: &Request, settings: &Settings) -> Event {
    let received = Instant::now();
    let received_unix_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    let verdict = signature::verify(
        req.signature.as_deref(),
        &req.body,
        &settings.secrets,
        received_unix_ms / 1000,
        settings.tolerance_seconds,
    );
    let json: serde_json::Value = serde_json::from_slice(&req.body).unwrap_or_default();
    let text = |field: &str| json[field].as_str().unwrap_or("").to_owned();
    Event {
        received,
        received_unix_ms,
        path: req.path.clone(),
        event_type: text("type"),
        verification_id: text("verification_id"),
        completed_at: json["completed_at"].as_str().map(str::to_owned),
        verdict,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dialproof_engine::webhook::signature_header;
    use std::sync::mpsc;

    fn post(addr: SocketAddr, body: &str, signature: Option<&str>) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let sig = signature
            .map(|h| format!("X-Service-Signature: {h}\r\n"))
            .unwrap_or_default();
        let req = format!(
            "POST /hook HTTP/1.1\r\nHost: x\r\n{sig}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        s.write_all(req.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn verifies_and_reports_each_webhook() {
        let (tx, rx) = mpsc::channel();
        let tx = std::sync::Mutex::new(tx);
        let settings = Settings {
            secrets: vec!["whsec_k".into()],
            tolerance_seconds: 300,
        };
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let r = Receiver::start(listener, settings, move |e| {
            let _ = tx.lock().unwrap().send(e);
        })
        .unwrap();
        let body = r#"{"type":"verification.completed","verification_id":"ver_1","completed_at":"2024-01-01T00:00:00.000Z"}"#;
        let good = signature_header(signature::now_unix_seconds(), body.as_bytes(), &["whsec_k"]);
        assert!(post(r.addr(), body, Some(&good)).starts_with("HTTP/1.1 200"));
        let e = rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(e.event_type, "verification.completed");
        assert_eq!(e.verification_id, "ver_1");
        assert_eq!(e.verdict, Verdict::Valid);

        let bad = signature_header(signature::now_unix_seconds(), body.as_bytes(), &["whsec_x"]);
        assert!(post(r.addr(), body, Some(&bad)).starts_with("HTTP/1.1 400"));
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(5)).unwrap().verdict,
            Verdict::Mismatch
        );
        assert!(post(r.addr(), "not json", None).starts_with("HTTP/1.1 400"));
        let e = rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!((e.verdict, e.event_type.as_str()), (Verdict::Missing, ""));
    }
}
