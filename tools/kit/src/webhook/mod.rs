//! A loopback HTTP/1.1 receiver of Dialproof's webhooks, for the tests and
//! the bundled tools alike: it checks each webhook's `X-Service-Signature`
//! with [`crate::signature`] when it knows the company's secrets, reads the
//! event's type and verification id from the JSON body, and answers.
//!
//! - The tools ([`Receiver::start`]) hand every webhook to a callback and
//!   keep nothing, so a long load run holds no memory for them; a valid
//!   (or, with no secret given, unchecked) webhook is answered `200`, a
//!   signature that fails `400`, as a real receiver should (the service
//!   then retries).
//! - The tests ([`Receiver::recording`]) keep every request ([`Hit`]) and
//!   answer from a script per path ([`Answer`]: a status, a slow answer, a
//!   redirect, a request held open until the test releases it, a reset,
//!   bytes that are not HTTP, a huge body). The receiver counts the
//!   requests it holds at once, for the service's per-receiver limit.
//!
//! One thread accepts; each connection gets a thread of its own (at most
//! [`CONNECTIONS_MAX`] at once), with keep-alive and hard limits on what a
//! peer may send (see [`serve`]).
//!
//! Not for: anything but loopback development, tests and measurement. It
//! has no TLS, and it does not deduplicate events (the service may deliver
//! one event more than once; each delivery is a hit).

mod serve;

use crate::signature::Verdict;
use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Request line plus headers, in bytes.
pub const HEAD_BYTES_MAX: usize = 16 * 1024;
/// Request body bytes (a webhook is well under 2 KiB).
pub const BODY_BYTES_MAX: usize = 256 * 1024;
/// Connections served at once; more are closed at accept.
pub const CONNECTIONS_MAX: usize = 256;
/// An idle keep-alive connection or a slow request is dropped after this
/// (longer than the service's sender keeps an idle connection, so the
/// sender, not the receiver, ends one).
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);

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

/// What the receiver checks signatures with.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// The company's webhook secrets (`whsec_...`); none means unchecked.
    pub secrets: Vec<String>,
    /// Allowed distance of `t` from this machine's clock (0: no check).
    pub tolerance_seconds: i64,
}

/// One request as received.
#[derive(Clone, Debug)]
pub struct Hit {
    /// When the whole request had arrived (monotonic clock).
    pub received: Instant,
    /// The same moment in Unix milliseconds.
    pub at_ms: i64,
    /// The same moment in Unix microseconds (for latency measurements).
    pub at_us: i64,
    pub method: String,
    pub path: String,
    /// As received (names as the sender wrote them).
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub verdict: Verdict,
    /// The body's `type`, or empty when the body is not a webhook's JSON.
    pub event_type: String,
    /// The body's `verification_id`, or empty.
    pub verification_id: String,
    /// The body's `completed_at` (the event's moment), if present.
    pub completed_at: Option<String>,
}

impl Hit {
    /// The first header of that name (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON.
    pub fn parse_json(&self) -> serde_json::Result<serde_json::Value> {
        serde_json::from_slice(&self.body)
    }
}

/// Scripted answers per request path.
type Script = HashMap<String, VecDeque<Answer>>;
type Callback = Box<dyn Fn(Hit) + Send + Sync>;

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

/// What the accepting thread and the connection threads share.
struct Shared {
    settings: Settings,
    /// Keep every hit (tests); off for the tools.
    record: bool,
    hits: Mutex<Vec<Hit>>,
    script: Mutex<Script>,
    default: Mutex<Answer>,
    on_hit: Option<Callback>,
    stop: AtomicBool,
    /// Connections accepted so far (whatever was sent on them).
    accepted: AtomicUsize,
    /// Connection threads now.
    active: AtomicUsize,
    concurrency: Concurrency,
}

/// A running receiver; dropping it stops accepting.
pub struct Receiver {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl Receiver {
    /// The tools' receiver on `listener` (bound by the caller, so it can
    /// learn the port before the secrets are known): checks signatures
    /// with `settings` and hands each webhook to `on_hit`, on connection
    /// threads; keeps none of them.
    pub fn start(
        listener: TcpListener,
        settings: Settings,
        on_hit: impl Fn(Hit) + Send + Sync + 'static,
    ) -> io::Result<Receiver> {
        Receiver::launch(listener, settings, false, Some(Box::new(on_hit)))
    }

    /// The tests' receiver on an ephemeral loopback port: keeps every
    /// request and answers `default` unless the script says otherwise.
    pub fn recording(default: Answer) -> Receiver {
        Receiver::recording_on(0, default)
    }

    /// Like [`Receiver::recording`] on a given loopback port (one the test
    /// named in a URL before the receiver started).
    pub fn recording_on(port: u16, default: Answer) -> Receiver {
        let listener = TcpListener::bind(("127.0.0.1", port)).expect("binding the receiver");
        let r = Receiver::launch(listener, Settings::default(), true, None)
            .expect("starting the receiver");
        r.set_default(default);
        r
    }

    fn launch(
        listener: TcpListener,
        settings: Settings,
        record: bool,
        on_hit: Option<Callback>,
    ) -> io::Result<Receiver> {
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            settings,
            record,
            hits: Mutex::default(),
            script: Mutex::default(),
            default: Mutex::new(Answer::Status(200)),
            on_hit,
            stop: AtomicBool::new(false),
            accepted: AtomicUsize::new(0),
            active: AtomicUsize::new(0),
            concurrency: Concurrency::default(),
        });
        let accept = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("webhook-accept".into())
                .spawn(move || serve::accept_loop(listener, shared))?
        };
        Ok(Receiver {
            addr,
            shared,
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

    /// `<base>/<path>`.
    pub fn url(&self, path: &str) -> String {
        format!("{}/{}", self.base_url(), path.trim_start_matches('/'))
    }

    /// `http://<addr>/hook`: the `webhook_url` to create verifications with.
    pub fn hook_url(&self) -> String {
        self.url("hook")
    }

    /// Answers for the next requests to `path`, in order; then the default
    /// again.
    pub fn script(&self, path: &str, answers: &[Answer]) {
        lock(&self.shared.script)
            .entry(path.to_owned())
            .or_default()
            .extend(answers.iter().cloned());
    }

    pub fn set_default(&self, a: Answer) {
        *lock(&self.shared.default) = a;
    }

    /// TCP connections accepted so far (whatever was sent on them).
    pub fn connections(&self) -> usize {
        self.shared.accepted.load(Ordering::Acquire)
    }

    /// Requests received and not yet answered, now.
    pub fn open_requests(&self) -> usize {
        self.shared.concurrency.open.load(Ordering::Acquire)
    }

    /// The most requests that were open at once so far.
    pub fn open_requests_max(&self) -> usize {
        self.shared.concurrency.open_max.load(Ordering::Acquire)
    }

    /// Requests answered so far.
    pub fn answered_requests(&self) -> usize {
        self.shared.concurrency.answered.load(Ordering::Acquire)
    }

    /// Answers every request held by [`Answer::Hold`] now; later ones are
    /// held until the next release.
    pub fn release_held(&self) {
        *lock(&self.shared.concurrency.release) += 1;
        self.shared.concurrency.released.notify_all();
    }

    /// Every request so far (a recording receiver's; none otherwise).
    pub fn hits(&self) -> Vec<Hit> {
        lock(&self.shared.hits).clone()
    }

    /// Requests to `path` so far.
    pub fn hits_to(&self, path: &str) -> Vec<Hit> {
        self.hits().into_iter().filter(|h| h.path == path).collect()
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
                let paths: Vec<String> = self.hits().into_iter().map(|h| h.path).collect();
                panic!(
                    "{} of {n} requests to {path} within {timeout:?}; all hits: {paths:?}",
                    hits.len()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        // Wake the blocking accept so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

/// Locks a mutex whose holder may have panicked (a failing test's thread):
/// the data is a list or a counter, whole at every moment.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests;
