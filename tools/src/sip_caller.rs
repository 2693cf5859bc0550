//! A small SIP caller over UDP for load runs: it places calls the way a
//! provider's gateway does (INVITE to the service's SIP address, the final
//! response ACKed), many at once from one socket and one thread, and
//! measures each call from its first INVITE to the final response. The
//! service rejects every call (603 by default) without answering it.
//!
//! INVITEs are retransmitted on RFC 3261's timer A (T1 doubling) until a
//! provisional or final response arrives; a call without a final response
//! within [`CALL_TIMEOUT`] counts as timed out.
//!
//! Not for: dialogs, media, CANCEL or authentication; a single call by hand
//! is `dialproof-sim call`.

use dialproof_engine::sip::message::Message;
use hdrhistogram::Histogram;
use std::collections::{BTreeMap, HashMap};
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Calls waiting to be placed or in progress at once; more are refused.
pub const CALLS_PENDING_MAX: usize = 16_384;
/// How long a call may wait for its final response.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(8);
/// RFC 3261 T1: the first INVITE retransmission interval.
const T1: Duration = Duration::from_millis(500);
/// Longest the thread blocks in one receive, so new calls go out promptly.
const POLL: Duration = Duration::from_millis(2);
/// How often pending calls are scanned for retransmission and timeout.
const TIMER_SCAN: Duration = Duration::from_millis(10);

/// Where calls go and who calls.
#[derive(Debug, Clone)]
pub struct CallerSettings {
    pub target: SocketAddr,
    /// The calling number as the From user part (any provider format).
    pub caller: String,
    /// Local address to bind (loopback, port 0 for any).
    pub bind: SocketAddr,
}

/// What the calls came to.
#[derive(Debug, Clone)]
pub struct CallTotals {
    pub placed: u64,
    /// Final response codes and how often each came.
    pub finals: BTreeMap<u16, u64>,
    pub timeouts: u64,
    /// INVITE to final response, microseconds.
    pub latency_us: Histogram<u64>,
}

/// Runs the caller thread; [`CallQueue::call`] queues calls.
pub struct SipCaller {
    tx: SyncSender<(String, String)>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<CallTotals>>,
}

type OnInvite = Box<dyn Fn(&str, Instant) + Send>;

struct Pending {
    invite: Vec<u8>,
    to: String,
    from_header: String,
    branch: String,
    first_sent: Instant,
    next_send: Option<Instant>,
    interval: Duration,
}

impl SipCaller {
    /// Binds the socket and starts the thread. `on_invite(verification id,
    /// when)` runs as each call's first INVITE leaves.
    pub fn start(
        settings: CallerSettings,
        on_invite: impl Fn(&str, Instant) + Send + 'static,
    ) -> io::Result<SipCaller> {
        let socket = UdpSocket::bind(settings.bind)?;
        socket.set_read_timeout(Some(POLL))?;
        let (tx, rx) = mpsc::sync_channel(CALLS_PENDING_MAX);
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            let on_invite: OnInvite = Box::new(on_invite);
            std::thread::Builder::new()
                .name("sip-caller".into())
                .spawn(move || Worker::new(socket, settings, on_invite).run(&rx, &stop))?
        };
        Ok(SipCaller {
            tx,
            stop,
            thread: Some(thread),
        })
    }

    /// A handle other threads queue calls through.
    pub fn handle(&self) -> CallQueue {
        CallQueue {
            tx: self.tx.clone(),
        }
    }

    /// Stops taking calls, waits for the pending ones (each bounded by
    /// [`CALL_TIMEOUT`]) and returns the totals.
    pub fn finish(mut self) -> CallTotals {
        self.stop.store(true, Ordering::SeqCst);
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(t)) => t,
            _ => CallTotals::none(),
        }
    }
}

/// A cloneable way to queue calls from other threads.
#[derive(Clone)]
pub struct CallQueue {
    tx: SyncSender<(String, String)>,
}

impl CallQueue {
    /// Queues a call to `dial_number` for `verification_id`; false when
    /// [`CALLS_PENDING_MAX`] calls are already queued.
    pub fn call(&self, verification_id: String, dial_number: String) -> bool {
        self.tx.try_send((verification_id, dial_number)).is_ok()
    }
}

impl CallTotals {
    /// No call placed.
    pub fn none() -> CallTotals {
        CallTotals {
            placed: 0,
            finals: BTreeMap::new(),
            timeouts: 0,
            latency_us: new_histogram(),
        }
    }
}

/// Microseconds from 1 to 60 s at three significant digits.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).unwrap_or_else(|_| {
        // The bounds above are constants that hdrhistogram accepts.
        Histogram::new(3).unwrap_or_else(|_| unreachable!("3 significant digits are valid"))
    })
}

struct Worker {
    socket: UdpSocket,
    settings: CallerSettings,
    local: SocketAddr,
    on_invite: OnInvite,
    pending: HashMap<String, Pending>,
    totals: CallTotals,
    seq: u64,
    timers_checked: Instant,
}

impl Worker {
    fn new(socket: UdpSocket, settings: CallerSettings, on_invite: OnInvite) -> Worker {
        let local = socket.local_addr().unwrap_or(settings.bind);
        Worker {
            socket,
            settings,
            local,
            on_invite,
            pending: HashMap::new(),
            totals: CallTotals::none(),
            seq: 0,
            timers_checked: Instant::now(),
        }
    }

    fn run(mut self, rx: &Receiver<(String, String)>, stop: &AtomicBool) -> CallTotals {
        let mut buf = vec![0u8; 65_536];
        loop {
            let stopping = stop.load(Ordering::SeqCst);
            while self.pending.len() < CALLS_PENDING_MAX {
                match rx.try_recv() {
                    Ok((id, number)) => self.place(id, number),
                    Err(_) => break,
                }
            }
            // The queue was drained above unless calls are at their bound,
            // and nobody queues after the stop.
            if stopping && self.pending.is_empty() {
                return self.totals;
            }
            match self.socket.recv_from(&mut buf) {
                Ok((n, _)) => self.on_datagram(&buf[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => {}
            }
            self.timers(Instant::now());
        }
    }

    fn place(&mut self, verification_id: String, to: String) {
        self.seq += 1;
        let unique = format!("{:x}-{:x}-{:x}", std::process::id(), self.seq, nanos());
        let (target, local, caller) = (self.settings.target, self.local, &self.settings.caller);
        let branch = format!("z9hG4bK{unique}");
        let call_id = format!("{unique}@dialproof-load");
        let from_header = format!("<sip:{caller}@{local}>;tag={unique}");
        let invite = format!(
            "INVITE sip:{to}@{target} SIP/2.0\r\n\
             Via: SIP/2.0/UDP {local};branch={branch};rport\r\n\
             Max-Forwards: 70\r\n\
             From: {from_header}\r\n\
             To: <sip:{to}@{target}>\r\n\
             Call-ID: {call_id}\r\n\
             CSeq: 1 INVITE\r\n\
             Contact: <sip:{caller}@{local}>\r\n\
             User-Agent: dialproof-load\r\n\
             Content-Length: 0\r\n\r\n"
        )
        .into_bytes();
        let now = Instant::now();
        (self.on_invite)(&verification_id, now);
        let _ = self.socket.send_to(&invite, target);
        self.totals.placed += 1;
        self.pending.insert(
            call_id,
            Pending {
                invite,
                to,
                from_header,
                branch,
                first_sent: now,
                next_send: Some(now + T1),
                interval: T1,
            },
        );
    }

    fn on_datagram(&mut self, bytes: &[u8]) {
        let Ok(resp) = Message::parse(bytes) else {
            return;
        };
        let Some(code) = resp.status() else { return };
        let Some(call) = self.pending.get_mut(resp.call_id()) else {
            return;
        };
        if code < 200 {
            call.next_send = None;
            return;
        }
        let Some(call) = self.pending.remove(resp.call_id()) else {
            return;
        };
        let elapsed = call.first_sent.elapsed();
        let _ = self.totals.latency_us.record(
            u64::try_from(elapsed.as_micros())
                .unwrap_or(u64::MAX)
                .max(1),
        );
        *self.totals.finals.entry(code).or_default() += 1;
        let target = self.settings.target;
        let ack = format!(
            "ACK sip:{}@{target} SIP/2.0\r\n\
             Via: SIP/2.0/UDP {};branch={};rport\r\n\
             Max-Forwards: 70\r\n\
             From: {}\r\n\
             To: {}\r\n\
             Call-ID: {}\r\n\
             CSeq: 1 ACK\r\n\
             Content-Length: 0\r\n\r\n",
            call.to,
            self.local,
            call.branch,
            call.from_header,
            resp.header("To").unwrap_or(""),
            resp.call_id(),
        );
        let _ = self.socket.send_to(ack.as_bytes(), target);
    }

    /// Retransmissions and timeouts; a scan of every pending call, so at
    /// most every [`TIMER_SCAN`].
    fn timers(&mut self, now: Instant) {
        if now < self.timers_checked + TIMER_SCAN {
            return;
        }
        self.timers_checked = now;
        let mut expired = Vec::new();
        for (call_id, call) in &mut self.pending {
            if now >= call.first_sent + CALL_TIMEOUT {
                expired.push(call_id.clone());
                continue;
            }
            if let Some(at) = call.next_send {
                if now >= at {
                    let _ = self.socket.send_to(&call.invite, self.settings.target);
                    call.interval *= 2;
                    call.next_send = Some(now + call.interval);
                }
            }
        }
        for call_id in expired {
            self.pending.remove(&call_id);
            self.totals.timeouts += 1;
        }
    }
}

fn nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}
