//! The UDP server side of SIP: INVITE server transactions (RFC 3261
//! s17.2.1) and the stateless-enough answers to everything else.
//!
//! One [`Endpoint`] per socket. The driver feeds it datagrams with
//! [`Endpoint::handle_datagram`] and wakes it at [`Endpoint::poll_timeout`]
//! with [`Endpoint::handle_timeout`]; it sends what
//! [`Endpoint::poll_transmit`] yields. A new INVITE comes out as
//! [`Event::Invite`]; the application decides and either answers at once
//! or calls [`Endpoint::trying`] and [`Endpoint::respond`] later, after a
//! database commit. `trying` does not send `100 Trying` at once: it arms a
//! timer, and the 100 goes out only if the final has not gone out within
//! [`TRYING_DELAY`]. RFC 3261 s17.2.1 asks for the 100 only when the final
//! takes longer than 200 ms, and a call's commit takes milliseconds, so a
//! call normally costs one datagram back (the final) instead of two, on
//! both sides of the wire. From then on the endpoint owns the transaction:
//!
//! - the final response is retransmitted on Timer G (T1, doubling, capped
//!   at T2) until the ACK or Timer H (64*T1);
//! - a retransmitted INVITE is answered with the latest response (a 100,
//!   sent then at the latest, while undecided) and never surfaces as a
//!   second [`Event::Invite`], so a call completes once;
//! - the ACK is absorbed (Timer I = T4 then ends the transaction);
//! - a CANCEL is answered 200, and if no final response went out yet the
//!   INVITE gets 487 and the application's later `respond` is ignored;
//! - OPTIONS gets 200; a BYE (we never establish a dialog) 481; other
//!   methods 405. Non-INVITE answers are cached for Timer J (64*T1) so a
//!   retransmission gets the same bytes.
//!
//! [`Endpoint::respond_stateless`] answers once and forgets the
//! transaction: for INVITEs from addresses we do not trust, which may be
//! spoofed. Retransmitting a 403 on Timer G to a forged source would make
//! us an amplifier (eleven datagrams for one), and keeping their state
//! would let a flood fill the transaction table.
//!
//! Responses go where RFC 3261 s18.2.2 and RFC 3581 say (the Via
//! `received`/`rport` address, see [`Via::response_target`]).
//!
//! Not for: deciding which calls to accept (the application does, from the
//! [`Event::Invite`]), client transactions (see [`super::register`] and
//! [`super::ping`], whose responses come out as [`Event::Response`]), or
//! answering a call: this endpoint can only reject.
//!
//! Longer than the project's ~500 lines on purpose: the transaction table,
//! its timers and the answer to each method share the table's invariants
//! (one entry per branch, a timer per entry), and split apart each half
//! would have to re-check them.

use super::message::{Message, Method, ParseError, Via, BRANCH_COOKIE};
use super::response::{build_response, tag_of};
use super::rng::SplitMix64;
use super::{Instant, T1, T2, T4};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::hash::{BuildHasher, Hash, Hasher, RandomState};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Most INVITE transactions alive at once; beyond it new INVITEs get a
/// stateless 503. An acknowledged call lives T4 (5 s) after its ACK and an
/// unacknowledged one 64*T1 (32 s), so this sustains 50 000 calls a second
/// that are ACKed, or 8 000 that are not; a confirmed transaction keeps
/// only its key (~200 bytes), so the table stays under ~100 MiB full.
pub const INVITE_TRANSACTIONS_MAX: usize = 262_144;
/// Most cached non-INVITE answers (for retransmissions).
pub const NON_INVITE_CACHE_MAX: usize = 65_536;
/// Datagrams queued for sending before the oldest are dropped (UDP may
/// drop them anyway; retransmission timers repair it).
pub const TRANSMIT_QUEUE_MAX: usize = 65_536;
/// Timer H and Timer J: 64*T1.
pub const TIMER_H: Duration = Duration::from_millis(64 * 500);
/// How long the application may take to decide on an INVITE before the
/// endpoint answers 500 itself, so no transaction waits forever.
pub const DECISION_TIMEOUT: Duration = Duration::from_millis(64 * 500);
/// How long a final may take, after [`Endpoint::trying`], before the
/// caller gets `100 Trying`: half the 200 ms of RFC 3261 s17.2.1, and well
/// inside the caller's first retransmission (Timer A, T1 = 500 ms).
pub const TRYING_DELAY: Duration = Duration::from_millis(100);

/// A transaction's id, stable for its life; never reused.
pub type TxId = u64;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    pub to: SocketAddr,
    pub bytes: Vec<u8>,
}

#[derive(Debug)]
pub enum Event {
    /// A new INVITE, nothing sent yet. Answer it with [`Endpoint::respond`]
    /// or [`Endpoint::respond_stateless`]; call [`Endpoint::trying`] first
    /// if the answer will not be immediate. The message is shared with the
    /// transaction, which builds the final from it (no copy per call).
    Invite {
        id: TxId,
        src: SocketAddr,
        message: Arc<Message>,
    },
    /// The caller cancelled before a final response; 487 went out.
    Cancelled { id: TxId },
    /// A response (to one of our REGISTERs or OPTIONS).
    Response {
        src: SocketAddr,
        message: Box<Message>,
    },
}

/// Why a datagram produced nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dropped {
    /// CRLF keep-alive: ignored by design.
    KeepAlive,
    Malformed(ParseError),
    /// A request whose top Via is unreadable: there is nowhere to answer.
    BadVia,
    /// Absorbed by a transaction (a retransmission, an ACK): not an error.
    Absorbed,
    /// Answered without involving the application (OPTIONS, CANCEL...).
    Answered,
    /// Too many live transactions: answered 503 statelessly.
    Overloaded,
}

/// A transaction's key: its branch and sent-by, and their hash, computed
/// once with the endpoint's keyed hasher (the branch is the peer's
/// choice, so the hash stays keyed). Why keep the hash: the transactions'
/// map doubles as it grows (75,000 live at 15,000 calls a second), and a
/// doubling rehashes every key; with the hash kept it hashes one word per
/// key instead of two strings, inside the SIP driver that answers nothing
/// meanwhile.
#[derive(Clone, Debug)]
struct Key {
    branch: String,
    sent_by: String,
    hash: u64,
}

impl Key {
    fn new(hasher: &RandomState, branch: String, sent_by: String) -> Key {
        let hash = hasher.hash_one((&branch, &sent_by));
        Key {
            branch,
            sent_by,
            hash,
        }
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        self.hash == other.hash && self.branch == other.branch && self.sent_by == other.sent_by
    }
}

impl Eq for Key {}

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // Equal keys have equal hashes: both come from the same hasher.
        state.write_u64(self.hash);
    }
}

#[derive(Debug)]
enum State {
    /// Waiting for the application. `100 Trying` is built only when it is
    /// sent: [`TRYING_DELAY`] after [`Endpoint::trying`], or for a
    /// retransmitted INVITE.
    Proceeding {
        request: Arc<Message>,
        /// When the endpoint answers 500 itself ([`DECISION_TIMEOUT`]).
        decide_by: Instant,
    },
    /// Final sent; waiting for the ACK.
    Completed {
        response: Vec<u8>,
        interval: Duration,
        give_up: Instant,
    },
    /// ACK received; absorbing retransmissions until Timer I.
    Confirmed,
}

#[derive(Debug)]
struct InviteTx {
    key: Key,
    target: SocketAddr,
    vias: Vec<String>,
    to_tag: String,
    state: State,
    /// The one pending timer of this transaction.
    deadline: Instant,
}

const _: () = assert!(
    std::mem::size_of::<(TxId, Box<InviteTx>)>() == 16,
    "the transaction map's entries stay small, so its doublings move little (see `invites`)"
);

pub struct Endpoint {
    next_id: TxId,
    by_key: HashMap<Key, TxId>,
    /// Boxed: a transaction lives on for Timer I (5 s) after its ACK, so
    /// at 15,000 calls a second this map holds 75,000, and each doubling
    /// of its table moved every entry. Inline (about 200 bytes each) the
    /// doubling at 57,344 moved 12 MB and faulted in a 27 MB table inside
    /// the SIP driver, which answered nothing for about 40 ms (every call
    /// in that window over 20 ms); boxed, the table moves 16-byte entries.
    invites: HashMap<TxId, Box<InviteTx>>,
    timers: BinaryHeap<Reverse<(Instant, TxId)>>,
    /// Non-INVITE answers by (key, method), expiring in insertion order.
    answered: HashMap<(Key, String), Transmit>,
    answered_order: VecDeque<(Instant, (Key, String))>,
    transmits: VecDeque<Transmit>,
    rng: SplitMix64,
    /// Hashes each [`Key`] once, keyed at random for this endpoint.
    key_hasher: RandomState,
}

impl Endpoint {
    pub fn new(seed: u64) -> Endpoint {
        Endpoint {
            next_id: 1,
            by_key: HashMap::new(),
            invites: HashMap::new(),
            timers: BinaryHeap::new(),
            answered: HashMap::new(),
            answered_order: VecDeque::new(),
            transmits: VecDeque::new(),
            rng: SplitMix64::new(seed),
            key_hasher: RandomState::new(),
        }
    }

    /// Live INVITE transactions (for metrics and tests).
    pub fn invite_transactions(&self) -> usize {
        self.invites.len()
    }

    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmits.pop_front()
    }

    /// The next moment [`Endpoint::handle_timeout`] has work, if any.
    pub fn poll_timeout(&mut self) -> Option<Instant> {
        // Drop superseded timers from the top so the answer is exact.
        while let Some(Reverse((at, id))) = self.timers.peek().copied() {
            if self.invites.get(&id).is_some_and(|tx| tx.deadline == at) {
                break;
            }
            self.timers.pop();
        }
        let invite = self.timers.peek().map(|Reverse((at, _))| *at);
        let cache = self.answered_order.front().map(|(at, _)| *at);
        match (invite, cache) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    pub fn handle_datagram(
        &mut self,
        now: Instant,
        src: SocketAddr,
        bytes: &[u8],
    ) -> Result<Event, Dropped> {
        if super::message::is_keepalive(bytes) {
            return Err(Dropped::KeepAlive);
        }
        let message = Message::parse(bytes).map_err(Dropped::Malformed)?;
        let Some(method) = message.method().cloned() else {
            return Ok(Event::Response {
                src,
                message: Box::new(message),
            });
        };
        let via = message.top_via().ok_or(Dropped::BadVia)?;
        let key = key_of(&self.key_hasher, &message, &via);
        match method {
            Method::Invite => {
                if self.repeat_latest(&key) {
                    return Err(Dropped::Absorbed);
                }
                // Everything the transaction keeps of the Via, read before
                // the message moves into it (the Via borrows from it).
                let vias = stamped_vias(&message, &via, src);
                let target = via.response_target(src);
                self.on_invite(now, src, message, (vias, target), key)
            }
            Method::Ack => {
                self.on_ack(now, &key);
                Err(Dropped::Absorbed)
            }
            Method::Cancel => self.on_cancel(now, src, &message, &via, key),
            _ => {
                self.on_other(now, src, &message, &via, key, &method);
                Err(Dropped::Answered)
            }
        }
    }

    /// For a retransmitted INVITE (its key is known): sends our latest
    /// response again, never a new event, and says so.
    fn repeat_latest(&mut self, key: &Key) -> bool {
        let Some(id) = self.by_key.get(key) else {
            return false;
        };
        if let Some(tx) = self.invites.get_mut(id) {
            let bytes = match &tx.state {
                // The caller is retransmitting: it is time for the 100,
                // and its timer (if armed) has nothing left to do.
                State::Proceeding { request, decide_by } => {
                    tx.deadline = *decide_by;
                    Some(build_response(request, &tx.vias, 100, None, &[]))
                }
                State::Completed { response, .. } => Some(response.clone()),
                State::Confirmed => None,
            };
            if let Some(bytes) = bytes {
                let to = tx.target;
                self.send(to, bytes);
            }
        }
        true
    }

    /// A new INVITE transaction, its Vias stamped and its answers' target
    /// chosen (`way_back`).
    fn on_invite(
        &mut self,
        now: Instant,
        src: SocketAddr,
        message: Message,
        way_back: (Vec<String>, SocketAddr),
        key: Key,
    ) -> Result<Event, Dropped> {
        let (vias, target) = way_back;
        if self.invites.len() >= INVITE_TRANSACTIONS_MAX {
            let bytes = build_response(
                &message,
                &vias,
                503,
                Some(&self.rng.hex()),
                &[("Retry-After", "5")],
            );
            self.send(target, bytes);
            return Err(Dropped::Overloaded);
        }
        let to_tag = self.rng.hex();
        let id = self.next_id;
        self.next_id += 1;
        let message = Arc::new(message);
        let deadline = now.plus(DECISION_TIMEOUT);
        self.invites.insert(
            id,
            Box::new(InviteTx {
                key: key.clone(),
                target,
                vias,
                to_tag,
                state: State::Proceeding {
                    request: Arc::clone(&message),
                    decide_by: deadline,
                },
                deadline,
            }),
        );
        self.by_key.insert(key, id);
        self.timers.push(Reverse((deadline, id)));
        Ok(Event::Invite { id, src, message })
    }

    /// The application will take a while (a commit) to answer INVITE
    /// `id`: `100 Trying` goes out at `now` + [`TRYING_DELAY`] unless the
    /// final (or a retransmission's 100) has gone out by then.
    pub fn trying(&mut self, now: Instant, id: TxId) {
        if let Some(tx) = self.invites.get_mut(&id) {
            if let State::Proceeding { decide_by, .. } = tx.state {
                tx.deadline = now.plus(TRYING_DELAY).min(decide_by);
                self.timers.push(Reverse((tx.deadline, id)));
            }
        }
    }

    /// Sends the final response `code` for INVITE `id` once and forgets the
    /// transaction (no Timer G, no state): for sources that may be forged.
    /// A retransmitted INVITE comes out as a new [`Event::Invite`] and is
    /// answered again, one datagram for one.
    pub fn respond_stateless(&mut self, id: TxId, code: u16) -> bool {
        let code = if (300..=699).contains(&code) {
            code
        } else {
            500
        };
        let Some(tx) = self.invites.get(&id) else {
            return false;
        };
        let State::Proceeding { request, .. } = &tx.state else {
            return false;
        };
        let bytes = build_response(request, &tx.vias, code, Some(&tx.to_tag), &[]);
        let to = tx.target;
        self.remove(id);
        self.send(to, bytes);
        true
    }

    /// Sends the final response `code` (300..=699) for INVITE `id`. Returns
    /// false, doing nothing, when the transaction is gone or already has a
    /// final response (e.g. it was cancelled meanwhile).
    pub fn respond(&mut self, now: Instant, id: TxId, code: u16) -> bool {
        self.respond_with_warning(now, id, code, None)
    }

    /// [`Endpoint::respond`] with a `Warning` header value (see
    /// [`super::outcome::CallOutcome::warning`]) in the final response and
    /// its retransmissions.
    pub fn respond_with_warning(
        &mut self,
        now: Instant,
        id: TxId,
        code: u16,
        warning: Option<&str>,
    ) -> bool {
        let code = if (300..=699).contains(&code) {
            code
        } else {
            500
        };
        let extra: &[(&str, &str)] = match &warning {
            Some(w) => &[("Warning", w)],
            None => &[],
        };
        self.finalize(now, id, code, extra)
    }

    fn finalize(&mut self, now: Instant, id: TxId, code: u16, extra: &[(&str, &str)]) -> bool {
        let Some(tx) = self.invites.get_mut(&id) else {
            return false;
        };
        let State::Proceeding { request, .. } = &tx.state else {
            return false;
        };
        let response = build_response(request, &tx.vias, code, Some(&tx.to_tag), extra);
        tx.state = State::Completed {
            response: response.clone(),
            interval: T1,
            give_up: now.plus(TIMER_H),
        };
        tx.deadline = now.plus(T1);
        let (to, deadline) = (tx.target, tx.deadline);
        self.timers.push(Reverse((deadline, id)));
        self.send(to, response);
        true
    }

    fn on_ack(&mut self, now: Instant, key: &Key) {
        let Some(id) = self.by_key.get(key).copied() else {
            return;
        };
        if let Some(tx) = self.invites.get_mut(&id) {
            if matches!(tx.state, State::Completed { .. }) {
                tx.state = State::Confirmed;
                // Only the key matters now (to absorb retransmissions).
                tx.vias = Vec::new();
                tx.to_tag = String::new();
                tx.deadline = now.plus(T4);
                self.timers.push(Reverse((tx.deadline, id)));
            }
        }
    }

    fn on_cancel(
        &mut self,
        now: Instant,
        src: SocketAddr,
        message: &Message,
        via: &Via,
        key: Key,
    ) -> Result<Event, Dropped> {
        let cache_key = (key.clone(), "CANCEL".to_owned());
        if let Some(t) = self.answered.get(&cache_key).cloned() {
            self.send(t.to, t.bytes);
            return Err(Dropped::Absorbed);
        }
        let invite = self.by_key.get(&key).copied();
        let code = if invite.is_some() { 200 } else { 481 };
        let vias = stamped_vias(message, via, src);
        let to_tag = invite
            .and_then(|id| self.invites.get(&id))
            .map(|tx| tx.to_tag.clone())
            .filter(|tag| !tag.is_empty()) // A confirmed tx kept no tag.
            .unwrap_or_else(|| self.rng.hex());
        let bytes = build_response(message, &vias, code, Some(&to_tag), &[]);
        let target = via.response_target(src);
        self.send_and_remember(now, cache_key, target, bytes);
        match invite {
            Some(id) if self.finalize(now, id, 487, &[]) => Ok(Event::Cancelled { id }),
            _ => Err(Dropped::Answered),
        }
    }

    fn on_other(
        &mut self,
        now: Instant,
        src: SocketAddr,
        message: &Message,
        via: &Via,
        key: Key,
        method: &Method,
    ) {
        let cache_key = (key, method.as_str().to_owned());
        if let Some(t) = self.answered.get(&cache_key).cloned() {
            self.send(t.to, t.bytes);
            return;
        }
        let code = match method {
            Method::Options => 200,
            Method::Bye => 481,
            _ => 405,
        };
        let vias = stamped_vias(message, via, src);
        let tag = match message.header("To").and_then(tag_of) {
            Some(_) => None,
            None => Some(self.rng.hex()),
        };
        let bytes = build_response(
            message,
            &vias,
            code,
            tag.as_deref(),
            &[("Allow", "INVITE, ACK, CANCEL, OPTIONS")],
        );
        let target = via.response_target(src);
        self.send_and_remember(now, cache_key, target, bytes);
    }

    /// Sends a final response to a non-INVITE request and keeps it, so a
    /// retransmission of the request gets the very same bytes again.
    fn send_and_remember(
        &mut self,
        now: Instant,
        key: (Key, String),
        to: SocketAddr,
        bytes: Vec<u8>,
    ) {
        self.remember(
            now,
            key,
            Transmit {
                to,
                bytes: bytes.clone(),
            },
        );
        self.send(to, bytes);
    }

    fn remember(&mut self, now: Instant, key: (Key, String), t: Transmit) {
        if self.answered.len() >= NON_INVITE_CACHE_MAX {
            // Full: forget the oldest early rather than grow.
            if let Some((_, old)) = self.answered_order.pop_front() {
                self.answered.remove(&old);
            }
        }
        self.answered_order
            .push_back((now.plus(TIMER_H), key.clone()));
        self.answered.insert(key, t);
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some((at, _)) = self.answered_order.front() {
            if *at > now {
                break;
            }
            if let Some((_, key)) = self.answered_order.pop_front() {
                self.answered.remove(&key);
            }
        }
        while let Some(Reverse((at, id))) = self.timers.peek().copied() {
            if at > now {
                break;
            }
            self.timers.pop();
            let Some(tx) = self.invites.get_mut(&id) else {
                continue;
            };
            if tx.deadline != at {
                continue; // Superseded by a later timer of the same tx.
            }
            match &mut tx.state {
                State::Proceeding { decide_by, .. } if now >= *decide_by => {
                    // The application never decided: fail safe.
                    self.finalize(now, id, 500, &[]);
                }
                State::Proceeding { request, decide_by } => {
                    // TRYING_DELAY passed without a final: tell the caller
                    // we have the call, then wait for the decision again.
                    // (The decision's timer from the INVITE is still queued.)
                    let bytes = build_response(request, &tx.vias, 100, None, &[]);
                    tx.deadline = *decide_by;
                    let to = tx.target;
                    self.send(to, bytes);
                }
                State::Completed {
                    response,
                    interval,
                    give_up,
                } => {
                    if now >= *give_up {
                        self.remove(id); // Timer H: the ACK never came.
                        continue;
                    }
                    let bytes = response.clone();
                    *interval = (*interval * 2).min(T2);
                    tx.deadline = now.plus(*interval).min(*give_up);
                    let (to, deadline) = (tx.target, tx.deadline);
                    self.timers.push(Reverse((deadline, id)));
                    self.send(to, bytes);
                }
                State::Confirmed => self.remove(id), // Timer I.
            }
        }
    }

    fn remove(&mut self, id: TxId) {
        if let Some(tx) = self.invites.remove(&id) {
            self.by_key.remove(&tx.key);
        }
    }

    fn send(&mut self, to: SocketAddr, bytes: Vec<u8>) {
        if self.transmits.len() >= TRANSMIT_QUEUE_MAX {
            self.transmits.pop_front();
        }
        self.transmits.push_back(Transmit { to, bytes });
    }
}

/// The transaction key of RFC 3261 s17.2.3: the branch and sent-by of the
/// top Via; for pre-3261 clients (no magic cookie), Call-ID, CSeq number,
/// From tag and the whole top Via instead.
fn key_of(hasher: &RandomState, message: &Message, via: &Via) -> Key {
    let branch = match via.branch() {
        Some(b) if b.starts_with(BRANCH_COOKIE) => b.to_owned(),
        _ => format!(
            "2543|{}|{}|{}",
            message.call_id(),
            message.cseq.0,
            message.header("From").and_then(tag_of).unwrap_or_default()
        ),
    };
    Key::new(hasher, branch, via.sent_by())
}

/// Every Via of `message`, the top one stamped with `received`/`rport`.
fn stamped_vias(message: &Message, top: &Via, src: SocketAddr) -> Vec<String> {
    // Most requests come with one Via: the list holds just the stamped one.
    let mut vias = vec![top.stamped(src)];
    vias.extend(message.headers_named("Via").skip(1).map(str::to_owned));
    vias
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "192.0.2.10:5070";

    fn src() -> SocketAddr {
        SRC.parse().unwrap()
    }

    fn request(method: &str, branch: &str) -> Vec<u8> {
        format!(
            "{method} sip:+74950000001@127.0.0.1 SIP/2.0\r\n\
             Via: SIP/2.0/UDP 192.0.2.10:5070;branch={branch};rport\r\n\
             From: <sip:89123456789@192.0.2.10>;tag=f\r\n\
             To: <sip:+74950000001@127.0.0.1>\r\n\
             Call-ID: call-1\r\nCSeq: 1 {method}\r\nMax-Forwards: 70\r\n\
             Content-Length: 0\r\n\r\n"
        )
        .into_bytes()
    }

    fn drain(ep: &mut Endpoint) -> Vec<(SocketAddr, Message)> {
        std::iter::from_fn(|| ep.poll_transmit())
            .map(|t| (t.to, Message::parse(&t.bytes).unwrap()))
            .collect()
    }

    fn codes(ep: &mut Endpoint) -> Vec<(u16, Method)> {
        drain(ep)
            .into_iter()
            .map(|(_, m)| (m.status().unwrap(), m.cseq.1))
            .collect()
    }

    /// A new INVITE the application will answer later (so it calls
    /// `trying`, which arms the 100's timer).
    fn invite(ep: &mut Endpoint, now: Instant) -> TxId {
        match ep.handle_datagram(now, src(), &request("INVITE", "z9hG4bKa")) {
            Ok(Event::Invite { id, .. }) => {
                ep.trying(now, id);
                id
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_final_within_the_trying_delay_goes_alone() {
        let mut ep = Endpoint::new(1);
        let t0 = Instant(1_000);
        let id = invite(&mut ep, t0);
        assert!(
            drain(&mut ep).is_empty(),
            "design choice: `trying` defers the 100 by TRYING_DELAY, it does not send it"
        );
        assert_eq!(ep.poll_timeout(), Some(t0.plus(TRYING_DELAY)));
        let just_before = t0.plus(TRYING_DELAY - Duration::from_millis(1));
        ep.handle_timeout(just_before);
        assert!(drain(&mut ep).is_empty());
        assert!(ep.respond(just_before, id, 603));
        assert_eq!(codes(&mut ep), vec![(603, Method::Invite)], "no 100 at all");
        // The 100's timer is gone with the decision; Timer G is next.
        assert_eq!(ep.poll_timeout(), Some(just_before.plus(T1)));
    }

    #[test]
    fn a_slow_final_gets_the_100_first_and_the_decision_timeout_still_holds() {
        let mut ep = Endpoint::new(1);
        let t0 = Instant(1_000);
        let id = invite(&mut ep, t0);
        ep.handle_timeout(t0.plus(TRYING_DELAY));
        let sent = drain(&mut ep);
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].0, src());
        assert_eq!(sent[0].1.status(), Some(100));
        assert!(sent[0].1.header("Via").unwrap().contains("rport=5070"));
        assert_eq!(tag_of(sent[0].1.header("To").unwrap()), None);
        // Once only; then the undecided INVITE waits for its deadline.
        assert_eq!(ep.poll_timeout(), Some(t0.plus(DECISION_TIMEOUT)));
        ep.handle_timeout(t0.plus(DECISION_TIMEOUT));
        assert_eq!(codes(&mut ep), vec![(500, Method::Invite)]);
        assert!(!ep.respond(t0.plus(DECISION_TIMEOUT), id, 603));
    }

    #[test]
    fn invite_gets_trying_then_the_final_which_repeats_on_timer_g_until_ack() {
        let mut ep = Endpoint::new(1);
        let t0 = Instant(1_000);
        let id = invite(&mut ep, t0);
        ep.handle_timeout(t0.plus(TRYING_DELAY));
        assert_eq!(codes(&mut ep), vec![(100, Method::Invite)]);
        let t0 = t0.plus(TRYING_DELAY);

        assert!(ep.respond(t0.plus(Duration::from_millis(3)), id, 603));
        let sent = drain(&mut ep);
        assert_eq!(sent[0].1.status(), Some(603));
        let to_tag = tag_of(sent[0].1.header("To").unwrap()).unwrap();
        assert!(!ep.respond(t0, id, 486), "a second final is refused");

        // Timer G: 500 ms, 1 s, 2 s, 4 s, 4 s... (relative to each send).
        let mut now = t0.plus(Duration::from_millis(3));
        let mut gaps = Vec::new();
        for _ in 0..5 {
            let next = ep.poll_timeout().unwrap();
            gaps.push(next.since(now).as_millis());
            now = next;
            ep.handle_timeout(now);
            let again = drain(&mut ep);
            assert_eq!(again.len(), 1);
            assert_eq!(again[0].1.status(), Some(603));
            assert_eq!(tag_of(again[0].1.header("To").unwrap()).unwrap(), to_tag);
        }
        assert_eq!(gaps, vec![500, 1000, 2000, 4000, 4000]);

        // The ACK stops retransmission; Timer I then ends the transaction.
        assert_eq!(
            ep.handle_datagram(now, src(), &request("ACK", "z9hG4bKa"))
                .unwrap_err(),
            Dropped::Absorbed
        );
        let later = ep.poll_timeout().unwrap();
        assert_eq!(later.since(now), T4);
        ep.handle_timeout(later);
        assert!(drain(&mut ep).is_empty());
        assert_eq!(ep.invite_transactions(), 0);
        assert_eq!(ep.poll_timeout(), None);
    }

    #[test]
    fn a_final_with_a_warning_carries_it_in_every_retransmission() {
        let mut ep = Endpoint::new(1);
        let t0 = Instant(1_000);
        let id = invite(&mut ep, t0);
        drain(&mut ep);
        let warning = crate::sip::outcome::CallOutcome::Completed.warning();
        assert!(ep.respond_with_warning(t0, id, 603, Some(warning)));
        let first = drain(&mut ep);
        let next = ep.poll_timeout().unwrap();
        ep.handle_timeout(next);
        let again = drain(&mut ep);
        for (_, m) in first.iter().chain(&again) {
            assert_eq!(m.status(), Some(603));
            assert_eq!(m.header("Warning"), Some(warning));
        }
        assert_eq!(again.len(), 1, "the retransmission on Timer G");
    }

    #[test]
    fn timer_h_ends_an_unacknowledged_transaction() {
        let mut ep = Endpoint::new(1);
        let t0 = Instant(0);
        let id = invite(&mut ep, t0);
        ep.respond(t0, id, 603);
        assert_eq!(codes(&mut ep), vec![(603, Method::Invite)], "the first 603");
        let mut now = t0;
        let mut sends = 0;
        while let Some(next) = ep.poll_timeout() {
            now = next;
            ep.handle_timeout(now);
            sends += drain(&mut ep).len();
        }
        assert_eq!(now.since(t0), TIMER_H);
        assert_eq!(ep.invite_transactions(), 0);
        // 0.5+1+2+4*7 = 31.5 s of retransmissions before 32 s.
        assert_eq!(sends, 10);
    }

    #[test]
    fn retransmitted_invites_get_the_latest_response_and_no_second_event() {
        let mut ep = Endpoint::new(1);
        let t0 = Instant(0);
        let id = invite(&mut ep, t0);
        drain(&mut ep);
        let again = ep.handle_datagram(t0, src(), &request("INVITE", "z9hG4bKa"));
        assert_eq!(again.unwrap_err(), Dropped::Absorbed);
        assert_eq!(codes(&mut ep), vec![(100, Method::Invite)]);
        // That 100 stands for the deferred one: its timer sends no second.
        assert_eq!(ep.poll_timeout(), Some(t0.plus(DECISION_TIMEOUT)));
        ep.respond(t0, id, 486);
        drain(&mut ep);
        let again = ep.handle_datagram(t0, src(), &request("INVITE", "z9hG4bKa"));
        assert_eq!(again.unwrap_err(), Dropped::Absorbed);
        assert_eq!(codes(&mut ep), vec![(486, Method::Invite)]);
        // After the ACK, retransmissions are absorbed silently.
        let _ = ep.handle_datagram(t0, src(), &request("ACK", "z9hG4bKa"));
        let _ = ep.handle_datagram(t0, src(), &request("INVITE", "z9hG4bKa"));
        assert!(drain(&mut ep).is_empty());
        // Another branch is another call.
        assert!(matches!(
            ep.handle_datagram(t0, src(), &request("INVITE", "z9hG4bKb")),
            Ok(Event::Invite { .. })
        ));
    }

    #[test]
    fn cancel_before_the_final_gets_200_and_487() {
        let mut ep = Endpoint::new(1);
        let t0 = Instant(0);
        let id = invite(&mut ep, t0);
        drain(&mut ep);
        match ep.handle_datagram(t0, src(), &request("CANCEL", "z9hG4bKa")) {
            Ok(Event::Cancelled { id: c }) => assert_eq!(c, id),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            codes(&mut ep),
            vec![(200, Method::Cancel), (487, Method::Invite)]
        );
        assert!(!ep.respond(t0, id, 603), "the 487 was the final");
        // A retransmitted CANCEL gets the same 200 only.
        let _ = ep.handle_datagram(t0, src(), &request("CANCEL", "z9hG4bKa"));
        assert_eq!(codes(&mut ep), vec![(200, Method::Cancel)]);
    }

    #[test]
    fn cancel_after_the_final_gets_200_only_and_unknown_cancel_481() {
        let mut ep = Endpoint::new(1);
        let t0 = Instant(0);
        let id = invite(&mut ep, t0);
        ep.respond(t0, id, 603);
        drain(&mut ep);
        assert_eq!(
            ep.handle_datagram(t0, src(), &request("CANCEL", "z9hG4bKa"))
                .unwrap_err(),
            Dropped::Answered
        );
        assert_eq!(codes(&mut ep), vec![(200, Method::Cancel)]);
        let _ = ep.handle_datagram(t0, src(), &request("CANCEL", "z9hG4bKzzz"));
        assert_eq!(codes(&mut ep), vec![(481, Method::Cancel)]);
    }

    #[test]
    fn options_bye_and_others() {
        let mut ep = Endpoint::new(1);
        let t0 = Instant(0);
        let _ = ep.handle_datagram(t0, src(), &request("OPTIONS", "z9hG4bKo"));
        let _ = ep.handle_datagram(t0, src(), &request("BYE", "z9hG4bKy"));
        let _ = ep.handle_datagram(t0, src(), &request("REGISTER", "z9hG4bKr"));
        assert_eq!(
            codes(&mut ep),
            vec![
                (200, Method::Options),
                (481, Method::Bye),
                (405, Method::Register)
            ]
        );
        // The cache answers a retransmission, then expires on Timer J.
        let _ = ep.handle_datagram(t0, src(), &request("OPTIONS", "z9hG4bKo"));
        assert_eq!(codes(&mut ep), vec![(200, Method::Options)]);
        ep.handle_timeout(t0.plus(TIMER_H));
        assert_eq!(ep.poll_timeout(), None);
    }

    #[test]
    fn an_immediate_answer_needs_no_100_and_a_stateless_one_no_state() {
        let mut ep = Endpoint::new(1);
        let t0 = Instant(0);
        let Ok(Event::Invite { id, .. }) =
            ep.handle_datagram(t0, src(), &request("INVITE", "z9hG4bKs"))
        else {
            panic!()
        };
        assert!(ep.respond_stateless(id, 403));
        assert_eq!(codes(&mut ep), vec![(403, Method::Invite)]);
        assert_eq!(ep.invite_transactions(), 0);
        assert_eq!(ep.poll_timeout(), None, "no Timer G for a forged source");
        assert!(!ep.respond(t0, id, 603));
        // A retransmission is a new event, answered one for one.
        assert!(matches!(
            ep.handle_datagram(t0, src(), &request("INVITE", "z9hG4bKs")),
            Ok(Event::Invite { .. })
        ));
        // Before any answer, a retransmitted INVITE gets a 100.
        assert_eq!(
            ep.handle_datagram(t0, src(), &request("INVITE", "z9hG4bKs"))
                .unwrap_err(),
            Dropped::Absorbed
        );
        assert_eq!(codes(&mut ep), vec![(100, Method::Invite)]);
    }

    #[test]
    fn an_undecided_invite_is_failed_safe_with_500() {
        let mut ep = Endpoint::new(1);
        let _ = invite(&mut ep, Instant(0));
        drain(&mut ep);
        ep.handle_timeout(Instant(0).plus(DECISION_TIMEOUT));
        assert_eq!(codes(&mut ep), vec![(500, Method::Invite)]);
    }

    #[test]
    fn responses_and_garbage() {
        let mut ep = Endpoint::new(1);
        let resp =
            b"SIP/2.0 200 OK\r\nVia: SIP/2.0/UDP a;branch=z9hG4bK1\r\nFrom: <sip:a@b>;tag=1\r\n\
                     To: <sip:a@b>;tag=2\r\nCall-ID: r\r\nCSeq: 1 REGISTER\r\n\r\n";
        assert!(matches!(
            ep.handle_datagram(Instant(0), src(), resp),
            Ok(Event::Response { .. })
        ));
        assert!(matches!(
            ep.handle_datagram(Instant(0), src(), b"hello"),
            Err(Dropped::Malformed(_))
        ));
        assert_eq!(
            ep.handle_datagram(Instant(0), src(), b"\r\n\r\n")
                .unwrap_err(),
            Dropped::KeepAlive
        );
        let bad_via = String::from_utf8(request("INVITE", "z9hG4bKa"))
            .unwrap()
            .replace("SIP/2.0/UDP 192.0.2.10:5070", "garbage");
        assert_eq!(
            ep.handle_datagram(Instant(0), src(), bad_via.as_bytes())
                .unwrap_err(),
            Dropped::BadVia
        );
        assert!(drain(&mut ep).is_empty());
    }

    #[test]
    fn rfc2543_clients_are_matched_without_a_cookie() {
        let mut ep = Endpoint::new(1);
        let old = |m: &str| String::from_utf8(request(m, "old1")).unwrap().into_bytes();
        let Ok(Event::Invite { id, .. }) = ep.handle_datagram(Instant(0), src(), &old("INVITE"))
        else {
            panic!()
        };
        drain(&mut ep);
        assert!(matches!(
            ep.handle_datagram(Instant(0), src(), &old("CANCEL")),
            Ok(Event::Cancelled { id: c }) if c == id
        ));
    }
}
