//! One event-loop thread of the load generator: its share of the
//! connections, its share of the schedule, and its own statistics.
//!
//! Open loop: the thread's requests are tickets on a fixed schedule (ticket
//! `k` of thread `i` of `T` is due at `start + (k*T + i) / rate`). A due
//! ticket goes out on the first free connection; its latency runs from the
//! moment it was due, not from when it left, so when the server stalls, the
//! queueing it causes is measured instead of hidden (no coordinated
//! omission). Closed loop: each connection sends its next request as soon
//! as the previous one is answered; latency runs from the send.
//!
//! Before the clock starts every connection is opened and its TLS
//! handshake finished, so the run measures requests, not handshakes.
//!
//! Not for: choosing requests (see [`super::ops`]) or reading bytes (see
//! [`super::conn`]).

use super::args::Mode;
use super::conn::{Conn, Failure, Progress, Response};
use super::ops::{Op, Planner, Shared};
use super::stats::{Counters, Stats};
use super::target::Target;
use crate::sip_caller::CallQueue;
use mio::{Events, Poll, Token};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Longest wait for all connections to be open before the start.
pub const WARMUP_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause before reopening a connection that failed to connect.
const RECONNECT_DELAY: Duration = Duration::from_millis(100);
/// The longest a `--prefill` may take before the run starts without the
/// rest (counted as failed).
const PREFILL_TIME_MAX: Duration = Duration::from_secs(1800);
/// How often in-flight requests are checked against their deadline.
const DEADLINE_SCAN: Duration = Duration::from_millis(5);
/// Longest single wait in poll (keeps the end of the run prompt).
const POLL_MAX: Duration = Duration::from_millis(50);
/// Readiness events taken per poll.
const EVENTS_MAX: usize = 1024;
/// Open loop, next ticket under a millisecond away: sleep this long at
/// most between non-blocking polls (mio's timeouts are whole milliseconds,
/// rounded up, which would make every send up to 1 ms late).
const FINE_SLEEP: Duration = Duration::from_micros(100);

/// What every thread of a run shares.
pub struct Plan {
    pub mode: Mode,
    pub target: Target,
    pub shared: Arc<Shared>,
    pub duration: Duration,
    pub timeout: Duration,
    pub threads: usize,
    /// Where created verifications are queued for a call (`--calls`).
    pub calls: Option<CallQueue>,
    /// The share of created verifications that get a call.
    pub call_share: f64,
    /// Every worker and the main thread meet here once connections are up.
    pub start: Arc<Barrier>,
    /// `--prefill`: creates sent before the start, over all threads.
    pub prefill: u64,
}

impl Plan {
    /// Thread `index`'s share of the prefill's creates.
    fn prefill_share(&self, index: usize) -> u64 {
        let t = self.threads as u64;
        self.prefill / t + u64::from((index as u64) < self.prefill % t)
    }
}

struct InFlight {
    op: Op,
    key: usize,
    /// A keyed create's bytes, kept for later replays.
    request: Option<Vec<u8>>,
    /// A replay: the id its first create got.
    replay_of: Option<String>,
    /// When the request was due (open loop) or sent (closed loop).
    intended: Instant,
    deadline: Instant,
}

#[derive(Default)]
struct Slot {
    conn: Option<Conn>,
    inflight: Option<InFlight>,
    reopen_at: Option<Instant>,
}

struct Worker<'a> {
    plan: &'a Plan,
    index: usize,
    poll: Poll,
    slots: Vec<Slot>,
    planner: Planner,
    stats: Stats,
    counters: Arc<Counters>,
    /// Slots with a request in flight (so a full thread skips the scan).
    busy: usize,
}

/// Runs thread `index` of the plan; returns its statistics.
pub fn run(plan: &Plan, index: usize, counters: Arc<Counters>, seed: u64) -> Stats {
    let Ok(poll) = Poll::new() else {
        plan.start.wait();
        let mut stats = Stats::default();
        stats.idle_failures.insert(Failure::Io, 1);
        return stats;
    };
    let total = plan.mode.connections();
    let mine = total / plan.threads + usize::from(index < total % plan.threads);
    let mut w = Worker {
        plan,
        index,
        poll,
        slots: (0..mine).map(|_| Slot::default()).collect(),
        planner: Planner::new(plan.shared.clone(), index, seed),
        stats: Stats::default(),
        counters,
        busy: 0,
    };
    w.warm_up();
    w.prefill(plan.prefill_share(index));
    plan.start.wait();
    w.load(Instant::now());
    w.finish();
    w.stats
}

impl Worker<'_> {
    fn warm_up(&mut self) {
        let now = Instant::now();
        for i in 0..self.slots.len() {
            self.open(i, now);
        }
        let deadline = now + WARMUP_TIMEOUT;
        let mut events = Events::with_capacity(EVENTS_MAX);
        while Instant::now() < deadline && !self.all_ready() {
            let _ = self.poll.poll(&mut events, Some(POLL_MAX));
            for e in events.iter() {
                self.on_event(e.token().0, e.is_readable(), e.is_writable());
            }
        }
    }

    /// `--prefill`: sends this thread's `count` creates, closed loop on its
    /// connections, before the start, and waits for every answer; their ids
    /// become the reads' working set. Not part of the run's figures (only
    /// how many were created or failed); bounded by [`PREFILL_TIME_MAX`].
    fn prefill(&mut self, count: u64) {
        if count == 0 {
            return;
        }
        self.planner.set_prefilling(true);
        let give_up = Instant::now() + PREFILL_TIME_MAX;
        let mut sent = 0;
        let mut events = Events::with_capacity(EVENTS_MAX);
        loop {
            let now = Instant::now();
            while sent < count && now < give_up {
                let Some(i) = self.free_slot(now) else { break };
                self.send(i, now, now);
                sent += 1;
            }
            if (sent >= count || now >= give_up) && self.busy == 0 {
                break;
            }
            self.expire(now);
            self.poll_once(&mut events, DEADLINE_SCAN);
        }
        self.planner.set_prefilling(false);
        let done = std::mem::take(&mut self.stats);
        let created = done.ops[Op::Create.index()].ok;
        self.stats.prefill_created = created;
        self.stats.prefill_failed = count - created;
    }

    fn all_ready(&self) -> bool {
        self.slots
            .iter()
            .all(|s| s.conn.as_ref().is_none_or(|c| c.is_ready()))
    }

    fn load(&mut self, start: Instant) {
        let end = start + self.plan.duration;
        let (interval, offset) = match self.plan.mode {
            Mode::Open { rate, .. } => {
                let t = self.plan.threads as f64;
                (Duration::from_secs_f64(t / rate), self.index as f64 / rate)
            }
            Mode::Closed { .. } => (Duration::ZERO, 0.0),
        };
        let first = start + Duration::from_secs_f64(offset);
        let due_at = |k: u64| first + interval.mul_f64(k as f64);
        let mut next_ticket: u64 = 0;
        let mut events = Events::with_capacity(EVENTS_MAX);
        let mut next_scan = start;
        loop {
            let now = Instant::now();
            match self.plan.mode {
                Mode::Closed { .. } if now < end => {
                    while let Some(i) = self.free_slot(now) {
                        self.send(i, now, now);
                    }
                }
                Mode::Closed { .. } => {}
                Mode::Open { .. } => {
                    // Every ticket due before the end goes out, even one
                    // this loop only sees after the end (late, as measured).
                    while due_at(next_ticket) <= now && due_at(next_ticket) < end {
                        let Some(i) = self.free_slot(now) else { break };
                        self.send(i, due_at(next_ticket), now);
                        next_ticket += 1;
                    }
                }
            }
            if now >= end {
                break;
            }
            if now >= next_scan {
                self.expire(now);
                next_scan = now + DEADLINE_SCAN;
            }
            let wake = match self.plan.mode {
                Mode::Open { .. } => due_at(next_ticket).min(next_scan).min(end),
                Mode::Closed { .. } => next_scan.min(end),
            };
            let wait = wake.saturating_duration_since(Instant::now()).min(POLL_MAX);
            if wait >= Duration::from_millis(1) {
                // Whole milliseconds, rounded down, so the wake is not late.
                let ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
                self.poll_once(&mut events, Duration::from_millis(ms));
            } else if !self.poll_once(&mut events, Duration::ZERO) && !wait.is_zero() {
                std::thread::sleep(wait.min(FINE_SLEEP));
            }
        }
        if let Mode::Open { .. } = self.plan.mode {
            // Tickets due before the end that never found a connection.
            let span = end.saturating_duration_since(first).as_secs_f64();
            let due = (span / interval.as_secs_f64()).ceil() as u64;
            self.stats.unsent_at_end = due.saturating_sub(next_ticket);
        }
    }

    /// After the end: waits for the requests in flight (each bounded by its
    /// deadline), then closes everything.
    fn finish(&mut self) {
        let mut events = Events::with_capacity(EVENTS_MAX);
        while self.slots.iter().any(|s| s.inflight.is_some()) {
            self.expire(Instant::now());
            let _ = self.poll_once(&mut events, DEADLINE_SCAN);
        }
        for slot in &mut self.slots {
            if let Some(c) = slot.conn.take() {
                c.close(self.poll.registry());
            }
        }
    }

    /// One poll; true when it brought events.
    fn poll_once(&mut self, events: &mut Events, wait: Duration) -> bool {
        if self.poll.poll(events, Some(wait)).is_err() {
            return false;
        }
        for e in events.iter() {
            self.on_event(e.token().0, e.is_readable(), e.is_writable());
        }
        !events.is_empty()
    }

    /// A slot whose connection is free, opening one where needed.
    fn free_slot(&mut self, now: Instant) -> Option<usize> {
        if self.busy == self.slots.len() {
            return None;
        }
        for i in 0..self.slots.len() {
            let s = &self.slots[i];
            if s.inflight.is_some() {
                continue;
            }
            if s.conn.is_some() {
                return Some(i);
            }
            if s.reopen_at.is_none_or(|t| t <= now) && self.open(i, now) {
                return Some(i);
            }
        }
        None
    }

    fn open(&mut self, i: usize, now: Instant) -> bool {
        let t = &self.plan.target;
        match Conn::open(
            t.addr,
            &t.tls,
            &t.server_name,
            self.poll.registry(),
            Token(i),
        ) {
            Ok(c) => {
                self.slots[i].conn = Some(c);
                self.slots[i].reopen_at = None;
                true
            }
            Err(f) => {
                self.idle_failure(f);
                self.slots[i].reopen_at = Some(now + RECONNECT_DELAY);
                false
            }
        }
    }

    fn send(&mut self, i: usize, intended: Instant, now: Instant) {
        if let Mode::Open { .. } = self.plan.mode {
            self.stats.lag(now.saturating_duration_since(intended));
        }
        let planned = self.planner.next_request();
        self.stats.substituted += u64::from(planned.substituted);
        self.stats.op(planned.op).sent += 1;
        self.counters.add_sent();
        let keep_body = matches!(planned.op, Op::Create | Op::Replay);
        let request =
            (planned.op == Op::Create && self.planner.keyed()).then(|| planned.bytes.clone());
        self.busy += 1;
        self.slots[i].inflight = Some(InFlight {
            op: planned.op,
            key: planned.key,
            request,
            replay_of: planned.replay_of,
            intended,
            deadline: now + self.plan.timeout,
        });
        let sent = match self.slots[i].conn.as_mut() {
            Some(c) => c.send(&planned.bytes, keep_body),
            None => Err(Failure::Io),
        };
        if let Err(f) = sent {
            self.fail(i, f, now);
        }
    }

    fn on_event(&mut self, i: usize, readable: bool, writable: bool) {
        let Some(conn) = self.slots.get_mut(i).and_then(|s| s.conn.as_mut()) else {
            return;
        };
        let now = Instant::now();
        match conn.on_event(readable, writable) {
            Ok(Progress::Nothing) => {}
            Ok(Progress::Response(r)) => self.answered(i, r, now),
            Ok(Progress::Closed) => self.fail(i, Failure::Io, now),
            Err(f) => self.fail(i, f, now),
        }
    }

    fn answered(&mut self, i: usize, r: Response, now: Instant) {
        let Some(f) = self.take_inflight(i) else {
            // An answer nobody asked for: the connection is out of step.
            self.fail(i, Failure::Protocol, now);
            return;
        };
        let mut ok = f.op.is_success(r.status);
        if ok && f.op == Op::Create {
            // A fresh key must never be answered as a replay.
            ok = !r.replayed && self.created(f.key, &r.body, f.request);
        }
        if ok && f.op == Op::Replay {
            ok = r.replayed && created_id(&r.body).as_deref() == f.replay_of.as_deref();
        }
        if !ok && matches!(f.op, Op::Create | Op::Replay) && f.op.is_success(r.status) {
            self.stats.op(f.op).bad_bodies += 1;
        }
        let latency = now.saturating_duration_since(f.intended);
        self.stats.answered(f.op, r.status, ok, latency);
        self.counters.add_done(ok);
        if r.close {
            self.reset(i, now, false);
        }
    }

    /// Reads a created Verification; false when its body is not one.
    /// A keyed create's `request` is remembered for replays.
    fn created(&mut self, key: usize, body: &[u8], request: Option<Vec<u8>>) -> bool {
        #[derive(serde::Deserialize)]
        struct Created {
            verification_id: String,
            dial_number: String,
        }
        let Ok(v) = serde_json::from_slice::<Created>(body) else {
            return false;
        };
        if let Some(request) = request {
            self.planner
                .created_keyed(key, v.verification_id.clone(), request);
        }
        // Prefilled verifications are the reads' working set: no calls.
        let call = self
            .plan
            .calls
            .as_ref()
            .filter(|_| !self.planner.is_prefilling())
            .filter(|_| self.planner.chance(self.plan.call_share));
        let called = match call {
            Some(q) => {
                let queued = q.call(v.verification_id.clone(), v.dial_number);
                self.stats.calls_not_queued += u64::from(!queued);
                queued
            }
            None => false,
        };
        self.planner.created(key, v.verification_id, !called);
        true
    }

    /// A failure on slot `i`: charged to its request if one is in flight,
    /// else counted as an idle failure; the connection is dropped.
    fn fail(&mut self, i: usize, failure: Failure, now: Instant) {
        match self.take_inflight(i) {
            Some(f) => {
                self.stats.failed(f.op, failure);
                self.counters.add_done(false);
            }
            // A server closing an idle keep-alive connection is no error.
            None if failure == Failure::Io => {}
            None => self.idle_failure(failure),
        }
        self.reset(i, now, failure == Failure::Connect);
    }

    fn take_inflight(&mut self, i: usize) -> Option<InFlight> {
        let f = self.slots[i].inflight.take();
        self.busy -= usize::from(f.is_some());
        f
    }

    fn idle_failure(&mut self, f: Failure) {
        *self.stats.idle_failures.entry(f).or_default() += 1;
        self.counters.add_done(false);
    }

    fn reset(&mut self, i: usize, now: Instant, delay: bool) {
        if let Some(c) = self.slots[i].conn.take() {
            c.close(self.poll.registry());
        }
        self.slots[i].reopen_at = Some(if delay { now + RECONNECT_DELAY } else { now });
    }

    fn expire(&mut self, now: Instant) {
        for i in 0..self.slots.len() {
            if self.slots[i]
                .inflight
                .as_ref()
                .is_some_and(|f| f.deadline <= now)
            {
                self.fail(i, Failure::Timeout, now);
            }
        }
    }
}

/// The `verification_id` of a Verification body.
fn created_id(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Created {
        verification_id: String,
    }
    serde_json::from_slice::<Created>(body)
        .ok()
        .map(|c| c.verification_id)
}
