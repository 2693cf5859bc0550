//! The connection watchdog: a second line behind may's socket timeouts.
//!
//! Every blocking read or write on a client connection has a deadline (the
//! read timeout the HTTP layer set, or [`WRITE_TIMEOUT`]). may enforces it
//! with a timer in its event loop; under heavy load on two cores we saw one
//! such timer not fire, and an idle keep-alive connection outlived its idle
//! timeout by more than 20 s. A connection that can outlive every timeout
//! is a slot a slow or hostile client keeps for ever, so this module
//! watches the deadlines itself: one thread looks at every watched socket
//! each [`SCAN_INTERVAL`] and shuts down (both directions) any that is still
//! blocked [`SLACK`] past its deadline. The shutdown wakes the blocked read
//! or write with an end of stream, and the connection ends as if the peer
//! had gone.
//!
//! Not for: choosing the timeouts (`crate::http::conn`) or counting
//! connections (`crate::http::listener`).

use parking_lot::Mutex;
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// How often the watchdog looks at the deadlines.
pub const SCAN_INTERVAL: Duration = Duration::from_millis(500);
/// How long past its own deadline a blocked operation may stay before the
/// watchdog ends it (may's timer normally ends it at the deadline).
pub const SLACK: Duration = Duration::from_secs(2);
/// Longest time one write to a client may block (a client that does not
/// read its answers must not hold a connection for ever).
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections ended by a watchdog since the process started (all
/// listeners; `dialproof_http_connections_reaped_total`).
pub static REAPED: AtomicU64 = AtomicU64::new(0);

/// A deadline value meaning "not blocked in IO now".
const UNWATCHED: u64 = u64::MAX;

/// The sockets being watched and the thread that watches them.
pub struct Watchdog {
    epoch: Instant,
    next_key: AtomicU64,
    watched: Mutex<HashMap<u64, Entry>>,
    name: String,
}

struct Entry {
    fd: RawFd,
    /// Milliseconds since `epoch` after which the socket is shut down.
    deadline: Arc<AtomicU64>,
}

impl Watchdog {
    /// Starts the watching thread for the listener `name`; it ends when the
    /// last handle to the watchdog is gone.
    pub fn start(name: &str) -> io::Result<Arc<Watchdog>> {
        let dog = Arc::new(Watchdog {
            epoch: Instant::now(),
            next_key: AtomicU64::new(0),
            watched: Mutex::new(HashMap::new()),
            name: name.to_owned(),
        });
        let weak = Arc::downgrade(&dog);
        std::thread::Builder::new()
            .name(format!("watchdog-{name}"))
            .spawn(move || watch(weak))?;
        Ok(dog)
    }

    /// Puts `tcp` under watch for as long as the returned stream lives.
    pub fn watch(self: &Arc<Self>, tcp: may::net::TcpStream) -> Watched {
        let key = self.next_key.fetch_add(1, Ordering::Relaxed);
        let deadline = Arc::new(AtomicU64::new(UNWATCHED));
        self.watched.lock().insert(
            key,
            Entry {
                fd: tcp.as_raw_fd(),
                deadline: deadline.clone(),
            },
        );
        Watched {
            registration: Registration {
                dog: self.clone(),
                key,
            },
            deadline,
            read_timeout: None,
            tcp,
        }
    }

    fn millis(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_millis()).unwrap_or(UNWATCHED)
    }

    /// Shuts down every socket blocked past its deadline; returns how many.
    fn scan(&self, now: Instant) -> usize {
        let now = self.millis(now);
        let watched = self.watched.lock();
        let mut reaped = 0;
        for entry in watched.values() {
            let deadline = entry.deadline.load(Ordering::Acquire);
            if deadline >= now {
                continue;
            }
            // Only once: the connection's own code ends it from here.
            entry.deadline.store(UNWATCHED, Ordering::Release);
            // SAFETY: the fd is open. The entry is removed (under this same
            // lock) before the stream that owns the fd is closed, see
            // `Watched`'s field order, so the fd cannot have been reused.
            let fd = unsafe { BorrowedFd::borrow_raw(entry.fd) };
            let _ = socket2::SockRef::from(&fd).shutdown(Shutdown::Both);
            reaped += 1;
        }
        reaped
    }
}

fn watch(dog: Weak<Watchdog>) {
    loop {
        std::thread::sleep(SCAN_INTERVAL);
        let Some(dog) = dog.upgrade() else { return };
        let reaped = dog.scan(Instant::now());
        if reaped > 0 {
            REAPED.fetch_add(reaped as u64, Ordering::Relaxed);
            tracing::warn!(
                listener = %dog.name,
                connections = reaped,
                "connections blocked past their timeout were closed by the watchdog"
            );
        }
    }
}

/// Removes its entry when dropped.
struct Registration {
    dog: Arc<Watchdog>,
    key: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.dog.watched.lock().remove(&self.key);
    }
}

/// A client socket under watch: each read or write carries a deadline.
pub struct Watched {
    // Field order matters: `registration` is dropped (the entry removed)
    // before `tcp` closes the fd, so the watchdog never shuts down a reused
    // descriptor.
    registration: Registration,
    deadline: Arc<AtomicU64>,
    read_timeout: Option<Duration>,
    tcp: may::net::TcpStream,
}

impl Watched {
    /// The socket itself (for socket options).
    pub fn tcp(&self) -> &may::net::TcpStream {
        &self.tcp
    }

    /// Sets may's read timeout and the watchdog's deadline for the reads.
    /// Setting the value it already has does nothing: may also sets it on
    /// the socket (a `setsockopt`), and the HTTP layer sets the same idle
    /// slice before every request on a keep-alive connection, so that was
    /// a system call per request for nothing. Only this type sets the
    /// socket's timeout, so the value held here is the socket's.
    pub fn set_read_timeout(&mut self, dur: Option<Duration>) -> io::Result<()> {
        if dur == self.read_timeout {
            return Ok(());
        }
        self.tcp.set_read_timeout(dur)?;
        self.read_timeout = dur;
        Ok(())
    }

    fn arm(&self, timeout: Option<Duration>) {
        let at = match timeout {
            Some(t) => self.registration.dog.millis(Instant::now() + t + SLACK),
            None => UNWATCHED,
        };
        self.deadline.store(at, Ordering::Release);
    }

    fn disarm(&self) {
        self.deadline.store(UNWATCHED, Ordering::Release);
    }
}

impl Read for Watched {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.arm(self.read_timeout);
        let r = self.tcp.read(buf);
        self.disarm();
        r
    }
}

impl Write for Watched {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.arm(Some(WRITE_TIMEOUT));
        let r = self.tcp.write(buf);
        self.disarm();
        r
    }

    fn flush(&mut self) -> io::Result<()> {
        self.tcp.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (may::net::TcpStream, std::net::TcpStream) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let watched = may::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (peer, _) = l.accept().unwrap();
        (watched, peer)
    }

    #[test]
    fn only_sockets_blocked_past_their_deadline_are_shut_down() {
        let dog = Watchdog::start("test").unwrap();
        let (a, mut a_peer) = pair();
        let (b, mut b_peer) = pair();
        let a = dog.watch(a);
        let b = dog.watch(b);
        // `a` is "blocked" with a deadline in the past, `b` is idle between
        // operations (unwatched).
        a.deadline.store(0, Ordering::Release);
        b.disarm();
        assert_eq!(dog.scan(Instant::now() + Duration::from_millis(5)), 1);
        a_peer
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut byte = [0u8; 1];
        // The shut-down socket ends the peer's stream.
        assert_eq!(a_peer.read(&mut byte).unwrap(), 0);
        // Once only, and the other socket is untouched.
        assert_eq!(dog.scan(Instant::now() + Duration::from_millis(5)), 0);
        b_peer
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        assert!(b_peer.read(&mut byte).is_err(), "b was closed");
        drop(b);
        drop(a);
        assert!(dog.watched.lock().is_empty(), "entries left after drop");
    }

    #[test]
    fn setting_the_same_read_timeout_again_leaves_the_socket_alone() {
        let dog = Watchdog::start("test").unwrap();
        let (s, _peer) = pair();
        // The same socket through a second descriptor, to see its option.
        let fd = s.as_raw_fd();
        // The descriptor is open while `s` lives (it is moved into `w`).
        let beside = std::net::TcpStream::from(
            unsafe { BorrowedFd::borrow_raw(fd) }
                .try_clone_to_owned()
                .unwrap(),
        );
        let mut w = dog.watch(s);
        w.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        assert_eq!(beside.read_timeout().unwrap(), Some(Duration::from_secs(1)));
        beside
            .set_read_timeout(Some(Duration::from_secs(3)))
            .unwrap();
        w.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        assert_eq!(
            beside.read_timeout().unwrap(),
            Some(Duration::from_secs(3)),
            "design choice: an unchanged read timeout is not set again (one setsockopt per request saved)"
        );
        w.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        assert_eq!(beside.read_timeout().unwrap(), Some(Duration::from_secs(2)));
    }

    #[test]
    fn a_read_is_watched_only_while_it_blocks() {
        let dog = Watchdog::start("test").unwrap();
        let (s, mut peer) = pair();
        let mut w = dog.watch(s);
        w.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
        peer.write_all(b"x").unwrap();
        let mut byte = [0u8; 1];
        assert_eq!(w.read(&mut byte).unwrap(), 1);
        assert_eq!(w.deadline.load(Ordering::Acquire), UNWATCHED);
        assert_eq!(dog.scan(Instant::now() + Duration::from_secs(60)), 0);
    }
}
