//! The SIP thread: the socket and the engine's machines, driven by one
//! OS thread of its own.
//!
//! It reads every datagram the socket holds into the inbound queue, each
//! stamped with the moment it was read, handles the writer's decisions (a
//! call's commit) and then at most a batch of datagrams, runs due timers,
//! sends what the machines queued, and sleeps in `poll(2)` on the socket
//! and the decisions' eventfd (`inbox`) until the next input or timer. It
//! alone owns the server endpoint, the lines' registration clients and
//! pingers, so none of them needs a lock, and a datagram and its answer
//! never cross threads.
//!
//! When it falls behind, the inbound queue drops in two places: at the
//! read once [`INBOUND_QUEUE_MAX`] datagrams wait (the memory bound; what
//! the kernel's socket buffer cannot hold beyond it the kernel drops), and
//! at the handling an INVITE that waited longer than the engine's
//! `overload::INVITE_WAIT_MAX` (its caller has sent it again, see that
//! module). Both are counted in `dialproof_sip_datagrams_dropped_total`.
//!
//! Not for: starting it (`start`), waiting (`inbox`), protocol decisions
//! (engine) or call decisions (`calls`).

use super::calls::{on_invite, Decided, Verdict};
use super::inbox::{wait_writable, Decisions, Inbox};
use super::lines::set_line_up;
use super::Sip;
use super::SipStats;
use dialproof_engine::sip::message::{Message, DATAGRAM_BYTES_MAX};
use dialproof_engine::sip::outcome::CallOutcome;
use dialproof_engine::sip::overload::is_stale_invite;
use dialproof_engine::sip::ping::{Change, Pinger};
use dialproof_engine::sip::register::{Outcome, Registration};
use dialproof_engine::sip::server::{Dropped, Endpoint, Event, Transmit, TxId};
use dialproof_engine::sip::Instant;
use dialproof_engine::time::UnixMillis;
use std::cell::Cell;
use std::collections::VecDeque;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Datagrams received but not yet handled by the driver. Beyond it new
/// ones are dropped (UDP senders retransmit) instead of growing memory.
pub const INBOUND_QUEUE_MAX: usize = 16_384;
/// Most inputs the driver handles between two sends of what the machines
/// queued (and two runs of the timers). Under a flood the queue does not
/// empty: a driver that drained it first held every final and `100 Trying`
/// until it did, up to the whole queue's wait, so callers retransmitted
/// INVITEs that had been answered and the duplicates became the flood.
/// A batch of 64 is about a millisecond of work, and sends as many
/// datagrams as draining would.
const BATCH_MAX: usize = 64;
/// The longest the driver sleeps without looking at the stop flag.
const IDLE_WAKE: Duration = Duration::from_millis(200);
/// Requested kernel buffer of the SIP socket, each way. The default
/// (~200 KiB) overflows in bursts of a few thousand INVITEs a second; the
/// kernel caps the request at `net.core.rmem_max`/`wmem_max`.
pub const SOCKET_BUFFER_BYTES: usize = 4 * 1024 * 1024;
/// Buffers of handled datagrams kept for the next ones read, so a datagram
/// costs no allocation (malloc and free were about 10 % of the SIP side's
/// samples at 15,000 calls a second); 256 of 2 KiB bound the spares to
/// half a MiB.
const SPARE_BUFFERS: usize = 256;
/// The largest buffer kept as a spare (a spare grows to the datagrams it
/// carries): a typical INVITE fits. A larger one is freed.
const SPARE_BUFFER_BYTES: usize = 2048;
/// The longest a send waits for room in a full kernel send buffer.
const SEND_WAIT: Duration = Duration::from_millis(50);
/// How long shutdown waits for the registrars to answer `Expires: 0`.
const UNREGISTER_WAIT: Duration = Duration::from_secs(2);

/// A call's decision, for its INVITE transaction.
pub(super) type Decision = (TxId, Decided);

/// A datagram waiting in the inbound queue: its source, its bytes, and
/// when the SIP thread took it from the socket (on the service's clock),
/// for its wait in the queue.
pub(super) struct Inbound {
    src: SocketAddr,
    bytes: Vec<u8>,
    received: UnixMillis,
}

/// A running SIP driver.
pub struct SipHandle {
    pub addr: SocketAddr,
    pub(super) done: may::sync::mpsc::Receiver<()>,
}

impl SipHandle {
    /// Waits (bounded) for the driver to unregister and stop; call after
    /// the stop flag is set.
    pub fn join(&self) {
        let _ = self
            .done
            .recv_timeout(UNREGISTER_WAIT + Duration::from_secs(1));
    }
}

pub(super) struct Client {
    pub(super) line: String,
    pub(super) kind: ClientKind,
    pub(super) up: bool,
}

pub(super) enum ClientKind {
    Register(Box<Registration>),
    Ping(Box<Pinger>),
}

impl Client {
    fn call_id(&self) -> &str {
        match &self.kind {
            ClientKind::Register(r) => r.call_id(),
            ClientKind::Ping(p) => p.call_id(),
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        match &self.kind {
            ClientKind::Register(r) => r.poll_timeout(),
            ClientKind::Ping(p) => p.poll_timeout(),
        }
    }

    fn poll_transmit(&mut self) -> Option<Transmit> {
        match &mut self.kind {
            ClientKind::Register(r) => r.poll_transmit(),
            ClientKind::Ping(p) => p.poll_transmit(),
        }
    }
}

/// Milliseconds since the driver started, on the service's one clock, for
/// the engine's machines (their timers: retransmissions, Timer H, the
/// registration refresh). It adds up the clock's forward steps only: a
/// wall clock stepped back costs the timers nothing but that one step
/// (they neither fire again nor stand still until it catches up).
pub(super) struct Clock {
    source: crate::shared::clock::Clock,
    /// The source's last reading and the milliseconds counted so far.
    /// Read and counted on the SIP thread alone, so no lock.
    state: Cell<(i64, u64)>,
}

impl Clock {
    pub(super) fn new(source: crate::shared::clock::Clock) -> Clock {
        let start = source.now().0;
        Clock {
            source,
            state: Cell::new((start, 0)),
        }
    }

    pub(super) fn now(&self) -> Instant {
        self.read().0
    }

    /// Now, counted, and the source's reading it was counted from: one
    /// reading for both.
    fn read(&self) -> (Instant, UnixMillis) {
        let wall = self.source.now();
        let (last, counted) = self.state.get();
        let step = u64::try_from(wall.0 - last).unwrap_or(0);
        let counted = counted.saturating_add(step);
        self.state.set((wall.0, counted));
        (Instant(counted), wall)
    }
}

pub(super) struct Driver {
    pub(super) ctx: Arc<Sip>,
    /// Non-blocking; the SIP thread alone reads and writes it.
    pub(super) socket: UdpSocket,
    pub(super) endpoint: Endpoint,
    pub(super) clients: Vec<Client>,
    pub(super) clock: Clock,
    pub(super) inbox: Inbox<Decision>,
    /// Handed to each call's decision callback.
    pub(super) decisions: Decisions<Decision>,
    /// Datagrams read from the socket, not yet handled.
    pub(super) inbound: VecDeque<Inbound>,
    /// Buffers of handled datagrams, for the next ones read.
    pub(super) spares: Vec<Vec<u8>>,
    /// The lines were un-registered because the node is fenced.
    pub(super) fence_unregistered: bool,
}

impl Driver {
    pub(super) fn run(mut self) {
        let mut buf = vec![0u8; DATAGRAM_BYTES_MAX + 1];
        while !self.ctx.stopping() {
            // First, so what `spawn` queued (the first REGISTERs) leaves now.
            self.flush();
            self.read_available(&mut buf);
            let handled = self.handle_batch();
            self.run_timers();
            if !self.fence_unregistered && self.ctx.fence.is_fenced() {
                self.unregister_fenced();
            }
            let held = self.endpoint.invite_transactions() as u64;
            self.ctx
                .stats
                .invite_transactions
                .store(held, Ordering::Relaxed);
            if handled == 0 {
                // What the timers queued leaves before the sleep.
                self.flush();
                let wait = self.until_next_timer();
                self.inbox.wait(&self.socket, wait);
            }
        }
        self.shutdown(&mut buf);
    }

    /// How long the driver may sleep: until its next timer, at most
    /// [`IDLE_WAKE`].
    fn until_next_timer(&mut self) -> Duration {
        let now = self.clock.now();
        let next = self
            .clients
            .iter()
            .filter_map(Client::poll_timeout)
            .chain(self.endpoint.poll_timeout())
            .min();
        next.map_or(IDLE_WAKE, |at| at.since(now).min(IDLE_WAKE))
    }

    /// Moves what the socket holds into the inbound queue, each datagram
    /// stamped with the moment it was read. With the queue full it reads
    /// and drops (counted) at most a batch, so the drops show in the
    /// metrics, and leaves the rest to the kernel's buffer, which drops
    /// what does not fit for free; reading all of a flood only to drop it
    /// would leave the driver no time to answer.
    fn read_available(&mut self, buf: &mut [u8]) {
        // Reads that queued nothing (a drop or an error), bounded.
        let mut idle_reads = 0;
        while idle_reads < BATCH_MAX {
            let (n, src) = match self.socket.recv_from(buf) {
                Ok(r) => r,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    // ICMP port unreachable from an earlier send shows up
                    // here on Linux; it says nothing about this socket.
                    tracing::debug!(error = %e, "sip recv error");
                    idle_reads += 1;
                    continue;
                }
            };
            if self.inbound.len() >= INBOUND_QUEUE_MAX {
                SipStats::inc(&self.ctx.stats.overloaded);
                idle_reads += 1;
                continue;
            }
            // A new buffer is the datagram's size, so a full queue holds
            // no more than the datagrams (a 2 KiB buffer each would
            // triple it).
            let mut bytes = self.spares.pop().unwrap_or_else(|| Vec::with_capacity(n));
            bytes.clear();
            bytes.extend_from_slice(&buf[..n]);
            let received = self.ctx.now();
            self.inbound.push_back(Inbound {
                src,
                bytes,
                received,
            });
        }
    }

    /// Handles at most [`BATCH_MAX`] decisions and then at most as many
    /// datagrams, so the answers go out, the timers run and the socket is
    /// read again (its kernel buffer may hold only a few milliseconds of
    /// a burst) while a flood lasts; returns how many inputs it handled.
    fn handle_batch(&mut self) -> usize {
        let mut handled = 0;
        // Decisions first: each ends a call the driver holds, so a flood
        // of new INVITEs never delays the answers to calls already
        // decided.
        for _ in 0..BATCH_MAX {
            let Some((id, decided)) = self.inbox.try_decision() else {
                break;
            };
            self.decide(id, decided);
            handled += 1;
        }
        for _ in 0..BATCH_MAX {
            let Some(datagram) = self.inbound.pop_front() else {
                break;
            };
            self.handle(datagram);
            handled += 1;
        }
        handled
    }

    fn decide(&mut self, id: TxId, decided: Decided) {
        let now = self.clock.now();
        let warning = Some(decided.outcome().warning());
        self.endpoint
            .respond_with_warning(now, id, decided.code, warning);
        decided.log();
    }

    fn handle(&mut self, datagram: Inbound) {
        // The service's clock, as it was read when the datagram was taken
        // (`received`), and the driver's count of it (`now`), from one
        // reading.
        let (now, wall) = self.clock.read();
        let Inbound {
            src,
            bytes,
            received,
        } = datagram;
        // A wall clock stepped back reads as no wait; one stepped forward
        // may shed the INVITEs queued then, once, and their callers'
        // retransmissions are handled instead.
        let waited = u64::try_from(wall.0 - received.0).unwrap_or(0);
        if is_stale_invite(Duration::from_millis(waited), &bytes) {
            SipStats::inc(&self.ctx.stats.stale);
        } else {
            self.on_datagram(now, src, &bytes);
        }
        // Nothing of it is kept (the parsed message is a copy): the buffer
        // is kept for the next datagram, unless it grew past a spare's
        // size or the spares are full.
        if bytes.capacity() <= SPARE_BUFFER_BYTES && self.spares.len() < SPARE_BUFFERS {
            self.spares.push(bytes);
        }
    }

    fn on_datagram(&mut self, now: Instant, src: SocketAddr, bytes: &[u8]) {
        let event = match self.endpoint.handle_datagram(now, src, bytes) {
            Ok(e) => e,
            Err(Dropped::Malformed(e)) => {
                SipStats::inc(&self.ctx.stats.malformed);
                tracing::debug!(%src, error = %e, bytes = bytes.len(), "malformed sip datagram dropped");
                return;
            }
            Err(Dropped::BadVia) => {
                SipStats::inc(&self.ctx.stats.malformed);
                return;
            }
            Err(Dropped::Overloaded) => {
                SipStats::inc(&self.ctx.stats.overloaded);
                return;
            }
            Err(_) => return,
        };
        match event {
            Event::Invite { id, src, message } => {
                // The moment of the call is when its INVITE arrived.
                let at = self.ctx.now();
                let decisions = self.decisions.clone();
                let decide = Box::new(move |decided: Decided| {
                    // A driver that has stopped sends no final any more,
                    // but the call's log line is still written, here.
                    if let Err((_, decided)) = decisions.send((id, decided)) {
                        decided.log();
                    }
                });
                match on_invite(&self.ctx, src, &message, at, decide) {
                    Verdict::Untrusted(code) => {
                        self.endpoint.respond_stateless(id, code);
                    }
                    Verdict::Reject(code, outcome) => {
                        let warning = outcome.map(CallOutcome::warning);
                        self.endpoint.respond_with_warning(now, id, code, warning);
                    }
                    // The final waits for a commit: a 100 follows if the
                    // commit takes longer than the engine's TRYING_DELAY.
                    Verdict::Pending => self.endpoint.trying(now, id),
                }
            }
            Event::Cancelled { id } => {
                SipStats::inc(&self.ctx.stats.cancelled);
                tracing::info!(tx = id, %src, "call cancelled before the final response; 487 sent");
            }
            Event::Response { src, message } => self.on_response(now, src, &message),
        }
    }

    fn on_response(&mut self, now: Instant, src: SocketAddr, message: &Message) {
        let Some(i) = self
            .clients
            .iter()
            .position(|c| c.call_id() == message.call_id())
        else {
            tracing::debug!(%src, call_id = message.call_id(), "response to nothing of ours");
            return;
        };
        let client = &mut self.clients[i];
        match &mut client.kind {
            ClientKind::Register(r) => {
                if let Some(outcome) = r.handle_response(now, message) {
                    log_outcome(&client.line, &outcome, now);
                }
            }
            ClientKind::Ping(p) => {
                if let Some(change) = p.handle_response(now, message) {
                    let state = if change == Change::Down { "down" } else { "up" };
                    tracing::info!(line = %client.line, state, "ping state changed");
                }
            }
        }
        self.sync_line_states(now);
    }

    fn run_timers(&mut self) {
        let now = self.clock.now();
        self.endpoint.handle_timeout(now);
        for client in &mut self.clients {
            if client.poll_timeout().is_none_or(|at| at > now) {
                continue;
            }
            match &mut client.kind {
                ClientKind::Register(r) => {
                    if let Some(outcome) = r.handle_timeout(now) {
                        log_outcome(&client.line, &outcome, now);
                    }
                }
                ClientKind::Ping(p) => {
                    if let Some(change) = p.handle_timeout(now) {
                        if change == Change::Down {
                            tracing::warn!(line = %client.line, "provider stopped answering pings");
                        }
                    }
                }
            }
        }
        self.sync_line_states(now);
    }

    /// Pushes every client's up/down change to the lease table.
    fn sync_line_states(&mut self, now: Instant) {
        for client in &mut self.clients {
            let up = match &client.kind {
                ClientKind::Register(r) => r.is_up(now),
                ClientKind::Ping(p) => p.is_up(),
            };
            if up != client.up {
                client.up = up;
                set_line_up(&self.ctx, &client.line, up, true);
            }
        }
    }

    fn flush(&mut self) {
        while let Some(t) = self.endpoint.poll_transmit() {
            send(&self.socket, &t);
        }
        for client in &mut self.clients {
            while let Some(t) = client.poll_transmit() {
                send(&self.socket, &t);
            }
        }
    }

    /// A fenced node's lines un-register (`Expires: 0`) at once, so the
    /// registrar routes calls to the new primary; the driver keeps running
    /// and answers what still arrives with 503 (`calls::on_invite`).
    fn unregister_fenced(&mut self) {
        self.fence_unregistered = true;
        let now = self.clock.now();
        for client in &mut self.clients {
            if let ClientKind::Register(r) = &mut client.kind {
                r.shutdown(now);
                tracing::warn!(line = %client.line, "fenced: un-registering the line");
            }
        }
        self.flush();
    }

    /// Unregisters every registered line (`Expires: 0`) and waits a little
    /// for the answers, so the provider stops routing to us at once.
    fn shutdown(mut self, buf: &mut [u8]) {
        let now = self.clock.now();
        for client in &mut self.clients {
            if let ClientKind::Register(r) = &mut client.kind {
                r.shutdown(now);
            }
        }
        self.flush();
        let deadline = now.plus(UNREGISTER_WAIT);
        loop {
            let now = self.clock.now();
            let pending = self.clients.iter().any(|c| match &c.kind {
                ClientKind::Register(r) => !r.is_finished(),
                ClientKind::Ping(_) => false,
            });
            if !pending || now >= deadline {
                break;
            }
            self.inbox.wait(&self.socket, Duration::from_millis(50));
            self.read_available(buf);
            self.handle_batch();
            for client in &mut self.clients {
                if let ClientKind::Register(r) = &mut client.kind {
                    r.handle_timeout(now);
                }
            }
            self.flush();
        }
        tracing::info!(stats = %self.ctx.stats.render(), "sip stopped");
    }
}

fn log_outcome(line: &str, outcome: &Outcome, now: Instant) {
    match outcome {
        Outcome::Registered { expires_seconds } => {
            tracing::info!(line, expires_seconds, "sip line registered");
        }
        Outcome::Unregistered => tracing::warn!(line, "sip line registration ended"),
        Outcome::Failed { reason, retry_at } => {
            tracing::warn!(line, reason = %reason, retry_in_ms = retry_at.since(now).as_millis() as u64,
                "sip registration failed");
        }
    }
}

fn send(socket: &UdpSocket, t: &Transmit) {
    let mut sent = socket.send_to(&t.bytes, t.to);
    if matches!(&sent, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock) {
        // The kernel's send buffer is full: wait for room once, bounded,
        // as a blocking socket would (a final that is lost anyway is sent
        // again by its transaction's timer).
        wait_writable(socket, SEND_WAIT);
        sent = socket.send_to(&t.bytes, t.to);
    }
    if let Err(e) = sent {
        tracing::debug!(to = %t.to, error = %e, "sip send failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicI64;

    #[test]
    fn the_sip_clock_counts_forward_steps_only() {
        let wall = Arc::new(AtomicI64::new(1_000_000));
        let source = wall.clone();
        let clock = Clock::new(crate::shared::clock::Clock::from_fn(move || {
            UnixMillis(source.load(Ordering::SeqCst))
        }));
        assert_eq!(clock.now(), Instant(0));
        wall.fetch_add(500, Ordering::SeqCst);
        assert_eq!(clock.now(), Instant(500));
        // Stepped back an hour: no rewind...
        wall.fetch_sub(3_600_000, Ordering::SeqCst);
        assert_eq!(clock.now(), Instant(500));
        // ...and no standing still until the wall clock catches up.
        wall.fetch_add(200, Ordering::SeqCst);
        assert_eq!(clock.now(), Instant(700));
    }
}
