//! A seeded simulation of everything around the scheduler: the database,
//! the driver's turns, a bounded job queue, sender threads and the writer,
//! with every bound shrunk so the edges are hit all the time: wakes lost,
//! wakes with the committed row arriving late (after a poll has read and
//! sent the row), the job queue full, the waiting room full, no timer
//! left, fetches dropped, attempts failing, records failing, companies
//! unreadable.
//!
//! At every dispatch it checks the scheduler's promises (never a delivery
//! twice in flight, never more than the per-receiver and total bounds,
//! only pending and due rows), and at the end that every committed delivery
//! finished (delivered or dead) on its own: nothing was lost on the way.
//! A failing seed replays exactly.

use super::*;
use crate::sip::rng::SplitMix64;
use std::collections::BTreeMap;

const SEEDS: u64 = 40;
const DELIVERIES: i64 = 150;
const RECEIVERS: u64 = 4;
const SENDERS: usize = 5;
const JOB_QUEUE_MAX: usize = 3;
const ATTEMPTS: u32 = 4;
const POLL_BATCH_MAX: usize = 6;
/// Far more than the run needs; reaching it means something was lost.
const VIRTUAL_TIME_MAX_MS: i64 = 60 * 60 * 1000;

const LIMITS: Limits = Limits {
    per_receiver_in_flight_max: 2,
    in_flight_max: 5,
    timers_max: 4,
    waiting_per_receiver_max: 2,
    waiting_max: 3,
    fetches_max: 3,
    poll_interval_ms: 500,
    poll_gap_min_ms: 50,
    record_failure_backoff_ms: 1000,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Pending,
    Delivered,
    Dead,
}

#[derive(Debug)]
struct DbRow {
    port: u16,
    state: State,
    due: UnixMillis,
    attempts: u32,
}

struct World {
    rng: SplitMix64,
    now: UnixMillis,
    db: BTreeMap<DeliveryId, DbRow>,
    committed: i64,
    /// Dispatched and not yet reported back: queued, sending or recording.
    in_flight: HashMap<DeliveryId, ReceiverKey>,
    queue: VecDeque<DeliveryId>,
    /// (done at, id) of the attempts being made.
    sending: Vec<(UnixMillis, DeliveryId)>,
    /// Wakes with their row as committed, held back until the moment given
    /// (a commit consumer that lags behind the writer).
    late_wakes: Vec<(UnixMillis, Row<DeliveryId>)>,
}

fn receiver(port: u16) -> ReceiverKey {
    ReceiverKey::of_url(&format!("https://receiver.example:{port}/"))
}

impl World {
    fn new(seed: u64) -> World {
        World {
            rng: SplitMix64::new(seed),
            now: UnixMillis(1_800_000_000_000),
            db: BTreeMap::new(),
            committed: 0,
            in_flight: HashMap::new(),
            queue: VecDeque::new(),
            sending: Vec::new(),
            late_wakes: Vec::new(),
        }
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.rng.below(100) < percent
    }

    fn row(&self, id: DeliveryId) -> Option<Row<DeliveryId>> {
        self.db.get(&id).map(|r| Row {
            id,
            pending: r.state == State::Pending,
            next_attempt_at: (r.state == State::Pending).then_some(r.due),
            receiver: receiver(r.port),
            data: id,
        })
    }

    /// What the database answers to `read`: pending due rows in (due, id)
    /// order, from its place on.
    fn due_rows(&self, read: PollRead) -> Vec<Row<DeliveryId>> {
        let mut due: Vec<(UnixMillis, DeliveryId)> = self
            .db
            .iter()
            .filter(|(_, r)| r.state == State::Pending && r.due <= self.now)
            .map(|(&id, r)| (r.due, id))
            .filter(|&(due, id)| read.from.is_none_or(|from| Mark { due, id } >= from))
            .collect();
        due.sort_unstable();
        due.iter()
            .take(read.limit)
            .filter_map(|&(_, id)| self.row(id))
            .collect()
    }

    fn done(&self) -> bool {
        self.committed == DELIVERIES && self.db.values().all(|r| r.state != State::Pending)
    }

    /// A transition commits an outbox row; its wake may be lost (a full
    /// wake queue), which only the poll can make up for.
    fn commit(&mut self, s: &mut Scheduler<DeliveryId>) {
        if self.committed == DELIVERIES || !self.chance(30) {
            return;
        }
        self.committed += 1;
        let id = self.committed;
        let port = 9000 + self.rng.below(RECEIVERS) as u16;
        let due = self.now.plus_millis(self.rng.below(3) as i64 * 400);
        self.db.insert(
            id,
            DbRow {
                port,
                state: State::Pending,
                due,
                attempts: 0,
            },
        );
        // A wake by id, with the row at once or late, or lost.
        match self.rng.below(10) {
            0..=2 => s.handle_committed(id),
            3..=5 => {
                let row = self.row(id).expect("just committed");
                s.handle_committed_row(row, self.now);
            }
            6 | 7 => {
                let row = self.row(id).expect("just committed");
                let at = self.now.plus_millis(self.rng.below(3000) as i64);
                self.late_wakes.push((at, row));
            }
            _ => {}
        }
    }

    /// The late wakes whose moment came, with their rows as committed.
    fn wake_late(&mut self, s: &mut Scheduler<DeliveryId>) {
        let now = self.now;
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.late_wakes)
            .into_iter()
            .partition(|(at, _)| *at <= now);
        self.late_wakes = later;
        for (_, row) in due {
            s.handle_committed_row(row, now);
        }
    }

    /// Attempts that ended are recorded (or the write fails).
    fn record(&mut self, s: &mut Scheduler<DeliveryId>) {
        let now = self.now;
        let (ended, going): (Vec<_>, Vec<_>) = self.sending.iter().partition(|(t, _)| *t <= now);
        self.sending = going;
        for (_, id) in ended {
            self.in_flight.remove(&id);
            let roll = self.rng.below(10);
            let delay = self.rng.below(2500) as i64;
            let row = self.db.get_mut(&id).expect("a dispatched row exists");
            let recorded = if roll == 9 {
                // The write failed: the row stays as it was.
                Recorded::NotCommitted
            } else {
                row.attempts += 1;
                if roll < 6 {
                    row.state = State::Delivered;
                    Recorded::Committed(Next::Delivered)
                } else if row.attempts >= ATTEMPTS {
                    row.state = State::Dead;
                    Recorded::Committed(Next::Dead)
                } else {
                    row.due = now.plus_millis(delay);
                    Recorded::Committed(Next::RetryAt(row.due))
                }
            };
            s.handle_recorded(id, recorded, now);
        }
    }

    fn dispatch(&mut self, s: &mut Scheduler<DeliveryId>) {
        while self.queue.len() < JOB_QUEUE_MAX {
            let Some(d) = s.poll_dispatch() else { break };
            self.check(&d);
            if self.chance(3) {
                // The company could not be read: dropped, left to the poll.
                s.handle_abandoned(d.id);
                continue;
            }
            if self.chance(10) {
                // try_send found the queue full after all.
                s.handle_unsent(d);
                break;
            }
            self.in_flight.insert(d.id, d.receiver);
            self.queue.push_back(d.id);
        }
    }

    /// The scheduler's promises, at the moment of a dispatch.
    fn check(&self, d: &Dispatch<DeliveryId>) {
        assert_eq!(d.id, d.data);
        assert!(
            !self.in_flight.contains_key(&d.id),
            "{} dispatched while in flight",
            d.id
        );
        let row = &self.db[&d.id];
        assert_eq!(row.state, State::Pending, "{} is not pending", d.id);
        assert!(row.due <= self.now, "{} is not due", d.id);
        assert_eq!(d.receiver, receiver(row.port));
        let to_receiver = self
            .in_flight
            .values()
            .filter(|r| **r == d.receiver)
            .count();
        assert!(to_receiver < LIMITS.per_receiver_in_flight_max);
        assert!(self.in_flight.len() < LIMITS.in_flight_max);
    }

    fn send(&mut self) {
        while self.sending.len() < SENDERS {
            let Some(id) = self.queue.pop_front() else {
                break;
            };
            let done = self.now.plus_millis(1 + self.rng.below(1500) as i64);
            self.sending.push((done, id));
        }
    }

    /// The driver's next turn: woken by a timer, the poll, a sender's
    /// report or a commit, whichever comes first.
    fn advance(&mut self, s: &mut Scheduler<DeliveryId>) {
        let mut next = s
            .poll_timeout()
            .min(self.now.plus_millis(1 + self.rng.below(400) as i64));
        if let Some(&(t, _)) = self.sending.iter().min() {
            next = next.min(t);
        }
        self.now = next.max(self.now.plus_millis(1));
    }
}

fn run(seed: u64) {
    let mut w = World::new(seed);
    let mut s = Scheduler::new(LIMITS);
    let start = w.now;
    while !w.done() {
        assert!(
            w.now.0 - start.0 < VIRTUAL_TIME_MAX_MS,
            "seed {seed}: deliveries never finished: {:?}",
            w.db.iter()
                .filter(|(_, r)| r.state == State::Pending)
                .collect::<Vec<_>>()
        );
        w.commit(&mut s);
        w.wake_late(&mut s);
        w.record(&mut s);
        s.handle_timeout(w.now);
        if s.wants_poll(w.now) {
            let read = s.poll_read(w.now, POLL_BATCH_MAX);
            let rows = w.due_rows(read);
            s.handle_polled(rows, w.now);
        }
        while let Some(id) = s.poll_fetch() {
            let row = w.row(id);
            s.handle_rows(row, w.now);
        }
        w.dispatch(&mut s);
        w.send();
        assert_eq!(s.in_flight(), w.in_flight.len(), "seed {seed}");
        assert!(s.waiting() <= LIMITS.waiting_max + LIMITS.in_flight_max);
        assert!(s.timers() <= LIMITS.timers_max);
        w.advance(&mut s);
    }
    assert!(w.in_flight.is_empty() && w.queue.is_empty() && w.sending.is_empty());
}

#[test]
fn every_committed_delivery_finishes_and_the_bounds_hold() {
    for seed in 0..SEEDS {
        run(seed);
    }
}
