//! A scripted webhook receiver for the webhook tests: a plain HTTP/1.1
//! server on loopback (std `TcpListener`, a thread per connection) that
//! records every request it gets and answers from a script (200, 500, a
//! slow answer, a redirect, a request held open until the test releases
//! it...). It counts the requests it holds at once, for the per-receiver
//! limit. Also the independent signature check: the
//! Stripe scheme computed by Python's `hmac` module in a subprocess, so a
//! bug shared by our signer and a Rust re-implementation cannot hide.
//!
//! Used with `tests/common` (`mod common; mod common_webhook;`).
#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Most request bytes the receiver reads (headers and body together).
const REQUEST_BYTES_MAX: usize = 1 << 20;

/// How the receiver answers one request.
#[derive(Clone, Debug)]
pub enum Answer {
    /// This status, with a short body naming it.
    Status(u16),
    /// Wait, then answer with the status (a slow receiver).
    Slow(Duration, u16),
    /// `301 Moved Permanently` to this location.
    Redirect(String),
    /// Hold the request open until [`Receiver::release_held`], then answer
    /// 200; at most this long, so a failing test cannot hang its receiver
    /// (keep it under the sender's 10 s timeout, or the attempt fails).
    Hold(Duration),
    /// Close the connection with a TCP reset, no answer.
    Reset,
    /// Bytes that are not HTTP, then close.
    Garbage,
    /// `200` with a body of this many bytes, streamed until the peer stops
    /// reading (a receiver answering gigabytes).
    Huge(u64),
}

/// Requests being answered, and the gate [`Answer::Hold`] waits at.
#[derive(Default)]
struct Concurrency {
    /// Requests received and not yet answered.
    open: AtomicUsize,
    /// The most that were ever open at once.
    open_max: AtomicUsize,
    /// Requests answered (or whose answer was decided) so far.
    answered: AtomicUsize,
    /// Bumped by each release; a held request waits for it to change.
    release: Mutex<u64>,
    released: Condvar,
}

impl Concurrency {
    fn opened(&self) {
        let now_open = self.open.fetch_add(1, Ordering::AcqRel) + 1;
        self.open_max.fetch_max(now_open, Ordering::AcqRel);
    }

    /// Waits for the next release, or `limit`.
    fn hold(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        let mut release = self.release.lock().unwrap();
        let seen = *release;
        while *release == seen {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            release = self.released.wait_timeout(release, left).unwrap().0;
        }
    }
}

/// One request as received.
#[derive(Clone, Debug)]
pub struct Hit {
    /// Unix milliseconds when the whole request had arrived.
    pub at_ms: i64,
    /// The same moment in microseconds (for latency measurements).
    pub at_us: i64,
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Hit {
    /// The first header of that name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("webhook body is JSON")
    }
}

pub struct Receiver {
    pub addr: SocketAddr,
    hits: Arc<Mutex<Vec<Hit>>>,
    script: Arc<Mutex<Script>>,
    default: Arc<Mutex<Answer>>,
    stop: Arc<AtomicBool>,
    connections: Arc<AtomicUsize>,
    concurrency: Arc<Concurrency>,
}

/// Scripted answers per request path.
type Script = HashMap<String, VecDeque<Answer>>;

pub fn now_ms() -> i64 {
    now_us() / 1000
}

pub fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as i64
}

/// A loopback port that was free a moment ago (for a receiver that starts
/// later, at a URL known in advance).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Receiver {
    /// A receiver on an ephemeral loopback port answering `default` unless
    /// the script says otherwise.
    pub fn start(default: Answer) -> Receiver {
        Receiver::start_on(0, default)
    }

    pub fn start_on(port: u16, default: Answer) -> Receiver {
        let listener = TcpListener::bind(("127.0.0.1", port)).expect("binding the receiver");
        let addr = listener.local_addr().unwrap();
        let r = Receiver {
            addr,
            hits: Arc::default(),
            script: Arc::default(),
            default: Arc::new(Mutex::new(default)),
            stop: Arc::default(),
            connections: Arc::default(),
            concurrency: Arc::default(),
        };
        let (hits, script, default, stop, connections, concurrency) = (
            r.hits.clone(),
            r.script.clone(),
            r.default.clone(),
            r.stop.clone(),
            r.connections.clone(),
            r.concurrency.clone(),
        );
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stop.load(Ordering::Acquire) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                connections.fetch_add(1, Ordering::AcqRel);
                let (hits, script, default, concurrency) = (
                    hits.clone(),
                    script.clone(),
                    default.clone(),
                    concurrency.clone(),
                );
                std::thread::spawn(move || serve(conn, hits, script, default, concurrency));
            }
        });
        r
    }

    /// `http://127.0.0.1:<port>`: the development URL to register.
    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `<base>/<path>`.
    pub fn url(&self, path: &str) -> String {
        format!("{}/{}", self.base(), path.trim_start_matches('/'))
    }

    /// Answers for the next requests to `path`, in order; then the default
    /// again.
    pub fn script(&self, path: &str, answers: &[Answer]) {
        self.script
            .lock()
            .unwrap()
            .entry(path.to_owned())
            .or_default()
            .extend(answers.iter().cloned());
    }

    /// TCP connections accepted so far (whatever was sent on them).
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::Acquire)
    }

    /// Requests received and not yet answered, now.
    pub fn open_requests(&self) -> usize {
        self.concurrency.open.load(Ordering::Acquire)
    }

    /// The most requests that were open at once so far.
    pub fn open_requests_max(&self) -> usize {
        self.concurrency.open_max.load(Ordering::Acquire)
    }

    /// Requests answered so far.
    pub fn answered_requests(&self) -> usize {
        self.concurrency.answered.load(Ordering::Acquire)
    }

    /// Answers every request held by [`Answer::Hold`] now; later ones are
    /// held until the next release.
    pub fn release_held(&self) {
        *self.concurrency.release.lock().unwrap() += 1;
        self.concurrency.released.notify_all();
    }

    /// Waits until `pred` holds (polling every 5 ms); panics after
    /// `timeout` with `what`.
    pub fn wait_until(&self, what: &str, timeout: Duration, pred: impl Fn(&Receiver) -> bool) {
        let deadline = Instant::now() + timeout;
        while !pred(self) {
            assert!(
                Instant::now() < deadline,
                "{what} within {timeout:?}; open now {}, at most {}, hits {}",
                self.open_requests(),
                self.open_requests_max(),
                self.hits().len()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    pub fn set_default(&self, a: Answer) {
        *self.default.lock().unwrap() = a;
    }

    pub fn hits(&self) -> Vec<Hit> {
        self.hits.lock().unwrap().clone()
    }

    /// Requests to `path` so far.
    pub fn hits_to(&self, path: &str) -> Vec<Hit> {
        self.hits().into_iter().filter(|h| h.path == path).collect()
    }

    /// Waits until `n` requests reached `path`; returns them (panics on
    /// timeout with what did arrive).
    pub fn wait_for(&self, path: &str, n: usize, timeout: Duration) -> Vec<Hit> {
        let deadline = Instant::now() + timeout;
        loop {
            let hits = self.hits_to(path);
            if hits.len() >= n {
                return hits;
            }
            if Instant::now() > deadline {
                panic!(
                    "{} of {n} requests to {path} within {timeout:?}; all hits: {:?}",
                    hits.len(),
                    self.hits()
                        .iter()
                        .map(|h| h.path.clone())
                        .collect::<Vec<_>>()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Unblock `accept` so the thread sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

fn serve(
    conn: TcpStream,
    hits: Arc<Mutex<Vec<Hit>>>,
    script: Arc<Mutex<Script>>,
    default: Arc<Mutex<Answer>>,
    concurrency: Arc<Concurrency>,
) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
    let Ok(mut writer) = conn.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(conn);
    // Keep-alive: requests until the peer closes.
    loop {
        let mut request_line = String::new();
        match reader.read_line(&mut request_line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let mut parts = request_line.split_whitespace();
        let method = parts.next().unwrap_or("").to_owned();
        let path = parts.next().unwrap_or("").to_owned();
        let mut headers = Vec::new();
        let mut total = request_line.len();
        loop {
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(n) => total += n,
            }
            if total > REQUEST_BYTES_MAX {
                return;
            }
            let line = line.trim_end_matches(['\r', '\n']);
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                headers.push((k.trim().to_owned(), v.trim().to_owned()));
            }
        }
        let length: usize = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0);
        if length > REQUEST_BYTES_MAX {
            return;
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let answer = script
            .lock()
            .unwrap()
            .get_mut(&path)
            .and_then(VecDeque::pop_front)
            .unwrap_or_else(|| default.lock().unwrap().clone());
        let at_us = now_us();
        concurrency.opened();
        hits.lock().unwrap().push(Hit {
            at_ms: at_us / 1000,
            at_us,
            method,
            path,
            headers,
            body,
        });
        if answer_abnormally(&mut writer, &answer, &concurrency) {
            return;
        }
        let (status, extra) = match answer {
            // Answered above.
            Answer::Reset | Answer::Garbage | Answer::Huge(_) => return,
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
        };
        // No longer open once the answer is decided: counting until after
        // the write could overlap the sender's next request, which may go
        // out as soon as it has read this answer.
        concurrency.open.fetch_sub(1, Ordering::AcqRel);
        concurrency.answered.fetch_add(1, Ordering::AcqRel);
        let body = format!("answer {status}");
        let response = format!(
            "HTTP/1.1 {status} X\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n{extra}\r\n{body}",
            body.len()
        );
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

/// Answers [`Answer::Reset`], [`Answer::Garbage`] and [`Answer::Huge`]
/// and closes the connection (true); false for the other answers.
fn answer_abnormally(writer: &mut TcpStream, answer: &Answer, concurrency: &Concurrency) -> bool {
    if !matches!(answer, Answer::Reset | Answer::Garbage | Answer::Huge(_)) {
        return false;
    }
    concurrency.open.fetch_sub(1, Ordering::AcqRel);
    concurrency.answered.fetch_add(1, Ordering::AcqRel);
    match answer {
        Answer::Reset => {
            // SO_LINGER 0: the close sends RST instead of FIN.
            let _ = socket2::SockRef::from(&*writer).set_linger(Some(Duration::ZERO));
        }
        Answer::Garbage => {
            let _ = writer.write_all(b"SSH-2.0-OpenSSH_9.6\r\n\x00\xff\xfe not http\r\n\r\n");
        }
        Answer::Huge(n) => {
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {n}\r\n\r\n");
            let chunk = vec![b'x'; 64 * 1024];
            let mut left = *n;
            let ok = writer.write_all(head.as_bytes()).is_ok();
            while ok && left > 0 {
                let take = left.min(chunk.len() as u64) as usize;
                if writer.write_all(&chunk[..take]).is_err() {
                    break;
                }
                left -= take as u64;
            }
        }
        _ => {}
    }
    if !matches!(answer, Answer::Reset) {
        let _ = writer.shutdown(std::net::Shutdown::Both);
    }
    true
}

/// The Stripe scheme, verified by Python's standard library: `t=` within
/// 300 s of now and at least one `v1=` equal to HMAC-SHA256(secret,
/// "<t>.<raw body>") in lowercase hex.
const PYTHON_VERIFY: &str = r#"
import hashlib, hmac, sys, time
header, secret = sys.argv[1], sys.argv[2]
body = sys.stdin.buffer.read()
pairs = [p.split("=", 1) for p in header.split(",")]
ts = [v for k, v in pairs if k == "t"]
sigs = [v for k, v in pairs if k == "v1"]
if len(ts) != 1 or not sigs:
    print("malformed"); sys.exit(0)
expected = hmac.new(secret.encode(), ts[0].encode() + b"." + body, hashlib.sha256).hexdigest()
fresh = abs(time.time() - int(ts[0])) <= 300
print("valid" if fresh and any(hmac.compare_digest(expected, s) for s in sigs) else "invalid")
"#;

/// Whether `secret` verifies `header` over `body`, per Python.
pub fn python_verifies(header: &str, body: &[u8], secret: &str) -> bool {
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(PYTHON_VERIFY)
        .arg(header)
        .arg(secret)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 is needed for the independent signature check");
    child.stdin.take().unwrap().write_all(body).unwrap();
    let out = child.wait_with_output().unwrap();
    let verdict = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(
        verdict == "valid" || verdict == "invalid",
        "python said {verdict:?}"
    );
    verdict == "valid"
}

/// The `[webhooks]` section for fast tests: attempts at once, +1 s, +2 s,
/// no jitter.
pub const FAST_RETRIES: &str =
    "[webhooks]\nretry_schedule_seconds = [0, 1, 2]\njitter_percent = 0\n\n";
