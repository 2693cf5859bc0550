//! The listeners: HTTPS for the API, plain HTTP that redirects to HTTPS.
//!
//! Each listener runs an accept loop in a may coroutine and one coroutine per
//! connection, on may's worker threads (one per core). Handlers may block
//! their coroutine (waiting for a commit), never the thread: anything that
//! blocks a thread (SQLite, DNS) runs elsewhere and answers through a may
//! channel.
//!
//! Not for: HTTP parsing (`crate::http`) or the API (`crate::api`).

use crate::coroutine;
use crate::http::watchdog::{Watchdog, Watched};
use crate::http::{self, Limits, Request, Response};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Connections per listener kept open. Beyond it the listener is crowded:
/// connections idle between requests are closed (each at its next look,
/// within a second: `IDLE_SLICE` in `conn.rs`) until it is not, so new
/// clients are still served under a flood of idle ones.
pub const CONNECTIONS_MAX: usize = 10_000;
/// Connections per listener at all; beyond it new ones are closed at once
/// rather than queued, so a flood cannot exhaust memory (about 30 KiB each
/// when idle, tests/README.md "Reliability").
pub const CONNECTIONS_HARD_MAX: usize = CONNECTIONS_MAX + CONNECTIONS_MAX / 5;
/// Time allowed for the TLS handshake.
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

pub type Handler = Arc<dyn Fn(&Request) -> Response + Send + Sync>;

/// A bound listener: its address, and its open connections (for the drain
/// at shutdown).
#[derive(Clone)]
pub struct Listening {
    pub addr: SocketAddr,
    open: Arc<AtomicUsize>,
}

impl Listening {
    /// Connections being served now.
    pub fn open_connections(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }

    /// After the stop flag is set: wakes the accept loop (blocked until the
    /// next connection) with one connection of our own, so it sees the flag,
    /// closes the listening socket and new clients are refused at once.
    pub fn stop_accepting(&self) {
        let mut to = self.addr;
        if to.ip().is_unspecified() {
            to.set_ip(match to {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        let _ = std::net::TcpStream::connect_timeout(&to, Duration::from_secs(1));
    }
}

/// A TLS stream over a watched may socket: its read timeout is the socket's.
type TlsStream = rustls::StreamOwned<rustls::ServerConnection, Watched>;

impl http::TimedStreamImpl for TlsStream {
    fn set_read_timeout(&mut self, dur: Option<Duration>) -> io::Result<()> {
        self.sock.set_read_timeout(dur)
    }
}

impl http::TimedStreamImpl for Watched {
    fn set_read_timeout(&mut self, dur: Option<Duration>) -> io::Result<()> {
        Watched::set_read_timeout(self, dur)
    }
}

/// Binds now (so the caller learns the real port at once) and serves in
/// coroutines until `stop` is set.
pub fn spawn_https(
    addr: SocketAddr,
    tls: Arc<rustls::ServerConfig>,
    limits: Limits,
    handler: Handler,
    stop: Arc<AtomicBool>,
) -> io::Result<Listening> {
    let draining = stop.clone();
    spawn_listener(addr, stop, move |tcp, peer, crowded| {
        let _ = tcp.tcp().set_nodelay(true);
        let conn = match rustls::ServerConnection::new(tls.clone()) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "TLS session setup failed");
                return;
            }
        };
        let mut stream: TlsStream = rustls::StreamOwned::new(conn, tcp);
        if !handshake(&mut stream) {
            return;
        }
        http::serve(&mut stream, peer, &limits, &*handler, &draining, crowded);
        stream.conn.send_close_notify();
        let _ = stream.conn.complete_io(&mut stream.sock);
    })
}

/// Drives the TLS handshake before the first request: false when it failed
/// or did not finish within [`TLS_HANDSHAKE_TIMEOUT`]. The timeout is for
/// the whole handshake, not each read, so a peer trickling its ClientHello
/// a byte at a time is dropped too (`tests/it/resilience/hostile/http/slow.rs`).
fn handshake(stream: &mut TlsStream) -> bool {
    // Not `complete_io`: it loops inside until the handshake is done, so a
    // deadline checked around it is never reached while bytes trickle in.
    let deadline = std::time::Instant::now() + TLS_HANDSHAKE_TIMEOUT;
    let (conn, sock) = (&mut stream.conn, &mut stream.sock);
    while conn.is_handshaking() {
        while conn.wants_write() {
            if conn.write_tls(sock).is_err() {
                return false;
            }
        }
        if !conn.is_handshaking() {
            break;
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() || sock.set_read_timeout(Some(left)).is_err() {
            return false;
        }
        match conn.read_tls(sock) {
            Ok(0) | Err(_) => return false,
            Ok(_) => {}
        }
        if conn.process_new_packets().is_err() {
            // Tell the peer why (an alert) before the close.
            let _ = conn.write_tls(sock);
            return false;
        }
    }
    // What follows the handshake (TLS 1.3 session tickets).
    while conn.wants_write() {
        if conn.write_tls(sock).is_err() {
            return false;
        }
    }
    true
}

/// The plain-HTTP listener: every request is answered by `handler` (the
/// redirect), with the same limits as HTTPS.
pub fn spawn_plain(
    addr: SocketAddr,
    limits: Limits,
    handler: Handler,
    stop: Arc<AtomicBool>,
) -> io::Result<Listening> {
    let draining = stop.clone();
    spawn_listener(addr, stop, move |tcp, peer, crowded| {
        let mut stream = tcp;
        http::serve(&mut stream, peer, &limits, &*handler, &draining, crowded);
    })
}

fn spawn_listener<F>(addr: SocketAddr, stop: Arc<AtomicBool>, serve: F) -> io::Result<Listening>
where
    F: Fn(Watched, SocketAddr, &AtomicBool) + Send + Sync + 'static,
{
    let listener = may::net::TcpListener::bind(addr)?;
    let local = listener.local_addr()?;
    let watchdog = Watchdog::start(&local.to_string())?;
    let serve = Arc::new(serve);
    let open = Arc::new(AtomicUsize::new(0));
    let crowded = Arc::new(AtomicBool::new(false));
    let listening = Listening {
        addr: local,
        open: open.clone(),
    };
    coroutine::spawn(move || {
        for conn in listener.incoming() {
            if stop.load(Ordering::Acquire) {
                break;
            }
            let tcp = match conn {
                Ok(t) => t,
                Err(e) => {
                    tracing::warn!(error = %e, listener = %local, "accept failed");
                    continue;
                }
            };
            let peer = match tcp.peer_addr() {
                Ok(p) => p,
                Err(_) => continue,
            };
            let now_open = open.fetch_add(1, Ordering::AcqRel) + 1;
            if now_open > CONNECTIONS_HARD_MAX {
                open.fetch_sub(1, Ordering::AcqRel);
                tracing::warn!(%peer, "connection limit reached; closing new connection");
                continue;
            }
            crowded.store(now_open > CONNECTIONS_MAX, Ordering::Release);
            let serve = serve.clone();
            let (open, crowded) = (open.clone(), crowded.clone());
            let tcp = watchdog.watch(tcp);
            coroutine::spawn(move || {
                serve(tcp, peer, &crowded);
                let left = open.fetch_sub(1, Ordering::AcqRel) - 1;
                crowded.store(left > CONNECTIONS_MAX, Ordering::Release);
            });
        }
        // `listener` is dropped here: new connections are refused.
        tracing::info!(listener = %local, "stopped accepting");
    });
    Ok(listening)
}
