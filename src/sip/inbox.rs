//! How the SIP thread waits: on its socket and on the writer's decisions
//! at once, without a second thread in between.
//!
//! A call's decision (its commit) is made on the storage writer's thread
//! and sent here on an unbounded channel, so the send never refuses while
//! the SIP thread lives. When the SIP thread has nothing to do it sleeps in
//! `poll(2)` on the socket and on an eventfd; a decision rings the eventfd
//! only when the thread has said it is about to sleep, so under load a
//! decision costs a channel push and no system call.
//!
//! Why not a may coroutine reading the socket and another driving the
//! engine: each datagram then crossed from one to the other, and when the
//! two ran on different workers every hand-off parked one thread and woke
//! the other (tens of thousands of context switches a second at
//! saturation, for no work).
//!
//! Not for: what the SIP thread does with an input (`driver`).

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The eventfd that wakes the SIP thread, and whether it sleeps.
struct Bell {
    fd: OwnedFd,
    /// Set by the SIP thread just before it sleeps, cleared when it wakes
    /// or by the first ring.
    sleeping: AtomicBool,
}

impl Bell {
    fn new() -> std::io::Result<Bell> {
        // SAFETY: eventfd takes no pointers; a negative result is an error.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Bell {
            // SAFETY: `fd` was just opened and nothing else owns it.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            sleeping: AtomicBool::new(false),
        })
    }

    /// Wakes the SIP thread if it sleeps (or is about to).
    fn ring(&self) {
        // Pairs with the fence in `Inbox::wait`: either this sees the
        // flag set, or the SIP thread sees the decision queued before it
        // sleeps.
        fence(Ordering::SeqCst);
        if self.sleeping.swap(false, Ordering::SeqCst) {
            let one: u64 = 1;
            // SAFETY: writes 8 bytes from a live u64 to our own eventfd. It
            // only fails when the counter would overflow, and then it is
            // readable anyway, which is all a ring is for.
            unsafe { libc::write(self.fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
        }
    }

    /// Resets the eventfd's counter after a wake.
    fn drain(&self) {
        let mut count: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64; EAGAIN (not rung) is fine.
        unsafe { libc::read(self.fd.as_raw_fd(), (&mut count as *mut u64).cast(), 8) };
    }
}

/// Where the writer sends a call's decision (`T`). Cloned into each
/// call's decision callback.
pub(super) struct Decisions<T> {
    tx: crossbeam_channel::Sender<T>,
    bell: Arc<Bell>,
}

// Not derived: a derive would ask `T: Clone`, which a decision is not.
impl<T> Clone for Decisions<T> {
    fn clone(&self) -> Self {
        Decisions {
            tx: self.tx.clone(),
            bell: self.bell.clone(),
        }
    }
}

impl<T> Decisions<T> {
    /// Queues a decision and wakes the SIP thread; gives it back when the
    /// SIP thread has ended.
    pub(super) fn send(&self, decision: T) -> Result<(), T> {
        match self.tx.send(decision) {
            Ok(()) => {
                self.bell.ring();
                Ok(())
            }
            Err(crossbeam_channel::SendError(decision)) => Err(decision),
        }
    }
}

/// The SIP thread's side: the decisions queued for it and its sleep.
pub(super) struct Inbox<T> {
    rx: crossbeam_channel::Receiver<T>,
    bell: Arc<Bell>,
}

/// What woke a wait.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Woken {
    /// Something is ready (a datagram or a decision), or a signal
    /// interrupted the sleep.
    Input,
    /// The wait ran out.
    Timeout,
}

impl<T> Inbox<T> {
    /// An inbox and the sender that feeds it.
    pub(super) fn new() -> std::io::Result<(Inbox<T>, Decisions<T>)> {
        let bell = Arc::new(Bell::new()?);
        let (tx, rx) = crossbeam_channel::unbounded();
        let decisions = Decisions {
            tx,
            bell: bell.clone(),
        };
        Ok((Inbox { rx, bell }, decisions))
    }

    /// The next queued decision, without waiting.
    pub(super) fn try_decision(&self) -> Option<T> {
        self.rx.try_recv().ok()
    }

    /// Sleeps until a datagram is ready on `socket` or a decision is
    /// queued, or `timeout`.
    pub(super) fn wait(&self, socket: impl AsFd, timeout: Duration) -> Woken {
        self.bell.sleeping.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if !self.rx.is_empty() {
            self.bell.sleeping.store(false, Ordering::SeqCst);
            return Woken::Input;
        }
        let mut fds = [
            libc::pollfd {
                fd: socket.as_fd().as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: self.bell.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let ready = poll(&mut fds, timeout);
        self.bell.sleeping.store(false, Ordering::SeqCst);
        if fds[1].revents != 0 {
            self.bell.drain();
        }
        if ready == 0 {
            Woken::Timeout
        } else {
            Woken::Input
        }
    }
}

/// Waits up to `timeout` for `socket` to take another datagram (its
/// kernel buffer was full).
pub(super) fn wait_writable(socket: impl AsFd, timeout: Duration) {
    let mut fds = [libc::pollfd {
        fd: socket.as_fd().as_raw_fd(),
        events: libc::POLLOUT,
        revents: 0,
    }];
    poll(&mut fds, timeout);
}

/// `poll(2)` on `fds` for up to `timeout`; how many are ready (0 when the
/// time ran out, negative on an error such as EINTR, which the callers
/// treat as a wake: they look at their inputs again either way).
fn poll(fds: &mut [libc::pollfd], timeout: Duration) -> libc::c_int {
    // Rounded up, so a timer due in 0.4 ms is not polled for 0 ms over and
    // over; capped far beyond any wait the driver asks for.
    let ms = timeout.as_micros().div_ceil(1000).min(60_000) as libc::c_int;
    // SAFETY: `fds` is a live slice of pollfd for the call, and its length
    // is the count passed.
    unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::time::Instant;

    fn socket() -> UdpSocket {
        UdpSocket::bind("127.0.0.1:0").unwrap()
    }

    #[test]
    fn a_wait_runs_out_without_input() {
        let sock = socket();
        let (inbox, _decisions) = Inbox::<u32>::new().unwrap();
        let started = Instant::now();
        assert_eq!(inbox.wait(&sock, Duration::from_millis(20)), Woken::Timeout);
        assert!(started.elapsed() >= Duration::from_millis(20));
    }

    #[test]
    fn a_datagram_wakes_the_wait() {
        let sock = socket();
        let (inbox, _decisions) = Inbox::<u32>::new().unwrap();
        socket().send_to(b"x", sock.local_addr().unwrap()).unwrap();
        assert_eq!(inbox.wait(&sock, Duration::from_secs(10)), Woken::Input);
    }

    #[test]
    fn a_decision_queued_before_the_wait_is_seen_without_sleeping() {
        let sock = socket();
        let (inbox, decisions) = Inbox::new().unwrap();
        decisions.send(7u32).unwrap();
        assert_eq!(inbox.wait(&sock, Duration::from_secs(10)), Woken::Input);
        assert_eq!(inbox.try_decision(), Some(7));
        assert_eq!(inbox.try_decision(), None);
    }

    #[test]
    fn a_decision_sent_from_another_thread_wakes_a_sleeping_wait() {
        let sock = socket();
        let (inbox, decisions) = Inbox::new().unwrap();
        let bell = decisions.bell.clone();
        let sender = std::thread::spawn(move || {
            // Send only once the wait has said it sleeps, so this checks
            // the eventfd and not the wait's first look at the queue.
            while !bell.sleeping.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            decisions.send(9u32).unwrap();
        });
        // Without the ring the wait would run its whole 10 s, and the
        // ringing thread would have ended long before.
        assert_eq!(inbox.wait(&sock, Duration::from_secs(10)), Woken::Input);
        sender.join().unwrap();
        assert_eq!(inbox.try_decision(), Some(9));
        // The ring was drained: the next wait sleeps its whole time.
        assert_eq!(inbox.wait(&sock, Duration::from_millis(10)), Woken::Timeout);
    }

    #[test]
    fn a_send_after_the_sip_thread_ended_gives_the_decision_back() {
        let (inbox, decisions) = Inbox::new().unwrap();
        drop(inbox);
        assert_eq!(decisions.send(3u32), Err(3));
    }
}
