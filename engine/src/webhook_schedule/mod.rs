//! The webhook driver's decisions, as a sans-IO state machine: which
//! committed delivery goes to which receiver next, when to wake for a
//! retry, and when to read the database.
//!
//! The binary's driver thread owns one [`Scheduler`] and feeds it what
//! happened, each time with `now` read once for its turn:
//!
//! - [`Scheduler::handle_committed_row`]: a transition committed an outbox
//!   row;
//! - [`Scheduler::handle_timeout`]: time passed (retry timers, holds);
//! - [`Scheduler::handle_polled`] / [`Scheduler::handle_rows`]: rows read
//!   from the database, by the periodic poll or on the scheduler's request;
//! - [`Scheduler::handle_recorded`]: a sender's attempt was written (or
//!   could not be), so the delivery is no longer in flight.
//!
//! and does what it asks:
//!
//! - [`Scheduler::poll_fetch`]: read this delivery's row and hand it back;
//! - [`Scheduler::wants_poll`]: read the due rows now, as
//!   [`Scheduler::poll_read`] says (how many, and from where);
//! - [`Scheduler::poll_dispatch`]: give this delivery to a sender (or hand
//!   it back with [`Scheduler::handle_unsent`] when the queue is full, or
//!   drop it with [`Scheduler::handle_abandoned`] when it cannot be sent);
//! - [`Scheduler::poll_timeout`]: wake no later than this.
//!
//! The database is the truth of the schedule: a timer only makes the
//! driver read the row, and a row is sent only if it is still pending and
//! due. A wake brings the row as committed, which is the database's as long
//! as no attempt of it has happened; every attempt starts here from a row
//! taken in, so a committed row newer than every row taken in so far is
//! taken as it is, and an older one (its wake came late, after a poll had
//! read the row) is read again. What the scheduler keeps in memory is
//! bounded (see [`Limits`]); whatever does not fit is left to the poll,
//! which finds every pending and due row. That is why a committed delivery
//! is never lost: it is either in flight, waiting here for a slot, timed
//! here, or in the database where the next poll reads it. A full job queue
//! does not drop anything either: the delivery goes back to the head of its
//! receiver's line.
//!
//! Two promises hold at every step (checked by `debug_assert` and by the
//! tests): a delivery is never dispatched again while it is in flight (from
//! dispatch until its attempt is recorded), and at most
//! [`Limits::per_receiver_in_flight_max`] attempts go to one receiver at
//! once, so a slow receiver with a backlog cannot occupy every sender.
//! Receivers with free slots are served round robin.
//!
//! Not for: reading the clock or the database, HTTP, the retry schedule
//! itself ([`crate::webhook_retry`] decides when the next attempt is due;
//! this module only wakes at that moment), or writing anything.

use crate::time::UnixMillis;
use crate::webhook_retry::Next;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};

mod limits;
mod receiver;
#[cfg(test)]
mod sim_tests;
#[cfg(test)]
mod tests;

pub use limits::*;
pub use receiver::ReceiverKey;

/// An outbox row's id.
pub type DeliveryId = i64;

/// A place in the order the due rows are read in: by due moment, then id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Mark {
    pub due: UnixMillis,
    pub id: DeliveryId,
}

/// What the next read of due rows should be: at most `limit` rows, in
/// [`Mark`] order, starting at `from` (at the first due row when `None`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PollRead {
    pub limit: usize,
    pub from: Option<Mark>,
}

/// What the scheduler needs of a delivery row, and the row itself (`data`,
/// opaque here) to hand back in the [`Dispatch`].
#[derive(Clone, Debug)]
pub struct Row<T> {
    pub id: DeliveryId,
    /// Still pending (neither delivered nor dead).
    pub pending: bool,
    /// When the next attempt is due; `None` for a finished delivery.
    pub next_attempt_at: Option<UnixMillis>,
    pub receiver: ReceiverKey,
    pub data: T,
}

/// A delivery to give to a sender now. It is in flight from here until
/// [`Scheduler::handle_recorded`] (or [`Scheduler::handle_unsent`] or
/// [`Scheduler::handle_abandoned`]) names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dispatch<T> {
    pub id: DeliveryId,
    pub receiver: ReceiverKey,
    pub data: T,
}

/// How an attempt ended for the schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recorded {
    /// The attempt and the delivery's next state were committed.
    Committed(Next),
    /// The write failed: the row is still pending and due in the database,
    /// so the delivery is held for [`Limits::record_failure_backoff_ms`]
    /// and then sent again (at least once, never lost).
    NotCommitted,
}

/// One receiver's line: its attempts in flight and the due rows waiting for
/// one of its slots, oldest first.
struct Lane<T> {
    in_flight: usize,
    waiting: VecDeque<(DeliveryId, T)>,
    /// In `Scheduler::runnable` now (each lane at most once).
    queued: bool,
}

impl<T> Lane<T> {
    fn new() -> Self {
        Lane {
            in_flight: 0,
            waiting: VecDeque::new(),
            queued: false,
        }
    }
}

/// The webhook schedule of one driver; `T` is the row the driver read,
/// carried from [`Row`] to [`Dispatch`] untouched.
pub struct Scheduler<T> {
    limits: Limits,
    lanes: HashMap<ReceiverKey, Lane<T>>,
    /// Lanes with a waiting row and a free slot, served round robin.
    runnable: VecDeque<ReceiverKey>,
    /// Every delivery in flight, with its receiver.
    in_flight: HashMap<DeliveryId, ReceiverKey>,
    /// Every delivery waiting in a lane.
    waiting: HashSet<DeliveryId>,
    /// The highest id of any row taken in (polled, fetched or committed):
    /// a committed row above it cannot have had an attempt yet.
    newest_taken: DeliveryId,
    /// Wake-ups as (due, id), and the latest due per id: an earlier entry
    /// for the same id is superseded and ignored when it comes up.
    timers: BinaryHeap<Reverse<(UnixMillis, DeliveryId)>>,
    timer_at: HashMap<DeliveryId, UnixMillis>,
    /// Deliveries whose last attempt was not recorded, held until then.
    held: HashMap<DeliveryId, UnixMillis>,
    /// Rows to read for [`Scheduler::poll_fetch`], each once.
    fetches: VecDeque<DeliveryId>,
    fetching: HashSet<DeliveryId>,
    /// A due row was left to the poll for lack of room: poll early once a
    /// slot frees.
    left_to_poll: bool,
    next_poll: UnixMillis,
    last_poll: Option<UnixMillis>,
    /// When a poll next reads a whole batch (the poll's cadence); a poll
    /// brought forward before then only refills (see `poll_read`).
    full_poll_at: UnixMillis,
    /// The read under way, if the driver asked for one.
    poll_asked: Option<PollRead>,
    /// Where an early poll starts reading: the first row left for lack of
    /// room since the last read, or just after the last row of a read that
    /// stopped at its limit; `None` when no row is known to be left.
    /// Every due row before it was read since the last whole read and
    /// taken in (waiting, in flight, timed or held), so a refill that read
    /// from the start, as it did, read those again only to skip them.
    refill_from: Option<Mark>,
}

impl<T> Default for Scheduler<T> {
    fn default() -> Self {
        Scheduler::new(Limits::default())
    }
}

impl<T> Scheduler<T> {
    /// A scheduler that wants its first poll at once: that poll seeds the
    /// schedule (deliveries due during downtime resume).
    pub fn new(limits: Limits) -> Scheduler<T> {
        assert!(limits.per_receiver_in_flight_max > 0 && limits.in_flight_max > 0);
        assert!(limits.poll_interval_ms > 0 && limits.poll_gap_min_ms >= 0);
        Scheduler {
            limits,
            lanes: HashMap::new(),
            runnable: VecDeque::new(),
            in_flight: HashMap::new(),
            waiting: HashSet::new(),
            newest_taken: DeliveryId::MIN,
            timers: BinaryHeap::new(),
            timer_at: HashMap::new(),
            held: HashMap::new(),
            fetches: VecDeque::new(),
            fetching: HashSet::new(),
            left_to_poll: false,
            next_poll: UnixMillis(i64::MIN),
            last_poll: None,
            full_poll_at: UnixMillis(i64::MIN),
            poll_asked: None,
            refill_from: None,
        }
    }

    /// Deliveries in flight (for metrics and tests).
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Deliveries in flight to `receiver`.
    pub fn in_flight_to(&self, receiver: &ReceiverKey) -> usize {
        self.lanes.get(receiver).map_or(0, |l| l.in_flight)
    }

    /// Due deliveries waiting for a slot.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// Timers in the heap, superseded ones included (they count against
    /// [`Limits::timers_max`] until they come up).
    pub fn timers(&self) -> usize {
        self.timers.len()
    }

    // ----- inputs -------------------------------------------------------

    /// A wake for committed outbox row `id` whose row cannot be taken as
    /// it came: the row is read next ([`Scheduler::poll_fetch`]), so the
    /// attempt leaves within the driver's turn rather than at the next poll.
    /// (The tests and the simulation also wake by id alone.)
    fn handle_committed(&mut self, id: DeliveryId) {
        self.fetch(id);
    }

    /// A transition committed outbox row `row`, handed over as committed,
    /// so the driver need not read it. Taken as it is when it is newer than
    /// every row taken in so far (no attempt of it can have happened);
    /// otherwise its wake came after a poll had read it, perhaps after its
    /// attempt was recorded, and it is read again as a wake without its
    /// row would be.
    pub fn handle_committed_row(&mut self, row: Row<T>, now: UnixMillis) {
        if row.id <= self.newest_taken {
            self.handle_committed(row.id);
            return;
        }
        self.admit(row, now);
    }

    /// Time passed: timers that came due ask for their row to be read.
    pub fn handle_timeout(&mut self, now: UnixMillis) {
        while let Some(Reverse((at, id))) = self.timers.peek().copied() {
            if at > now {
                break;
            }
            self.timers.pop();
            if self.timer_at.get(&id) == Some(&at) {
                self.timer_at.remove(&id);
                // A hold ends with its timer: the row is read and sent.
                self.held.remove(&id);
                self.fetch(id);
            }
        }
    }

    /// The periodic read of due rows happened (with `rows`, or none if the
    /// read failed: the next poll simply tries again).
    pub fn handle_polled(&mut self, rows: impl IntoIterator<Item = Row<T>>, now: UnixMillis) {
        if self.full_poll_due(now) {
            self.full_poll_at = now.plus_millis(self.limits.poll_interval_ms);
        }
        self.last_poll = Some(now);
        self.next_poll = now.plus_millis(self.limits.poll_interval_ms);
        // A hold outlives its moment only if its timer was not kept; the
        // poll is then what ends it, so the map cannot grow for ever.
        self.held.retain(|_, until| *until > now);
        // The read covered every due row from where it started (all rows
        // left before were at or after that place) to its last row, or to
        // the end: what it leaves, or its end, is where a refill starts, and
        // a row left before was either taken in by it or left again.
        self.refill_from = None;
        self.left_to_poll = false;
        let (mut read, mut last) = (0, None);
        let rows = rows.into_iter().inspect(|row| {
            read += 1;
            last = row.next_attempt_at.map(|due| Mark { due, id: row.id });
        });
        self.handle_rows(rows, now);
        if self
            .poll_asked
            .take()
            .is_some_and(|asked| read >= asked.limit)
        {
            // The read stopped at its limit, so more due rows may wait in
            // the database after its last: the next freed slot brings the
            // poll forward, and it starts there.
            if let Some(last) = last {
                self.note_left(Mark {
                    due: last.due,
                    id: last.id.saturating_add(1),
                });
            }
            self.left_to_poll = true;
        }
    }

    /// Rows read from the database (fetched or polled). A row is taken if
    /// it is pending and due, not in flight, not already waiting and not
    /// held; a pending row not yet due gets a timer for its moment.
    pub fn handle_rows(&mut self, rows: impl IntoIterator<Item = Row<T>>, now: UnixMillis) {
        for row in rows {
            self.admit(row, now);
        }
    }

    /// The attempt of `id` was recorded (or could not be): it is no longer
    /// in flight, its receiver's slot is free, and what the retry schedule
    /// said is timed.
    pub fn handle_recorded(&mut self, id: DeliveryId, recorded: Recorded, now: UnixMillis) {
        let Some(receiver) = self.release(id) else {
            // Not ours (a report after a restart of the scheduler): the
            // database still has the row, so nothing is lost by ignoring it.
            return;
        };
        match recorded {
            Recorded::Committed(Next::RetryAt(at)) => self.set_timer(id, at),
            Recorded::Committed(Next::Delivered | Next::Dead) => {}
            Recorded::NotCommitted => {
                let until = now.plus_millis(self.limits.record_failure_backoff_ms);
                self.held.insert(id, until);
                self.set_timer(id, until);
            }
        }
        self.slot_freed(&receiver);
    }

    /// The dispatch could not be handed to a sender (the job queue is full,
    /// or the senders are gone): it goes back to the head of its
    /// receiver's line, ahead of the bounds, since it already had a place.
    pub fn handle_unsent(&mut self, dispatch: Dispatch<T>) {
        let Some(receiver) = self.release(dispatch.id) else {
            return;
        };
        let lane = self.lanes.entry(receiver.clone()).or_insert_with(Lane::new);
        lane.waiting.push_front((dispatch.id, dispatch.data));
        self.waiting.insert(dispatch.id);
        self.refresh(&receiver);
    }

    /// The dispatch was dropped without an attempt (its company could not
    /// be read, say): the slot frees and the row, still pending and due in
    /// the database, comes back with the next poll.
    pub fn handle_abandoned(&mut self, id: DeliveryId) {
        if let Some(receiver) = self.release(id) {
            self.slot_freed(&receiver);
        }
    }

    // ----- outputs ------------------------------------------------------

    /// A row to read (by id) and hand back with [`Scheduler::handle_rows`].
    pub fn poll_fetch(&mut self) -> Option<DeliveryId> {
        while let Some(id) = self.fetches.pop_front() {
            self.fetching.remove(&id);
            // Already in flight or waiting: reading it again changes nothing.
            if !self.in_flight.contains_key(&id) && !self.waiting.contains(&id) {
                return Some(id);
            }
        }
        None
    }

    /// Whether the due rows should be read now: at the poll's cadence, and
    /// at once if the clock went back past the last poll (the cadence is
    /// counted on the wall clock the caller passes in, and a step back must
    /// not stall the safety net for as long as the step).
    pub fn wants_poll(&self, now: UnixMillis) -> bool {
        now >= self.next_poll || self.last_poll.is_some_and(|last| now < last)
    }

    /// What the poll at `now` should read, given the driver's own batch
    /// bound `max`. At the poll's cadence (and after the clock stepped
    /// back), all `max` from the first due row: that poll is the safety
    /// net, and finds every due row a refill would not (a row whose record
    /// failed and whose timer was not kept, a dispatch abandoned, a fetch
    /// over its bound). A poll brought forward in between only refills the
    /// lines a freed slot opened: it reads from where the last read left
    /// rows for lack of room (or stopped at its limit), as many as the
    /// roomiest line can take. Under one receiver's backlog, reading from
    /// the first due row again read the rows already here first (most of
    /// the oldest due rows are these), about four rows read for each one
    /// taken in. The answer holds for the next [`Scheduler::handle_polled`]:
    /// if that poll comes back with as many rows as asked, more may be due,
    /// and the next freed slot brings a poll forward again.
    pub fn poll_read(&mut self, now: UnixMillis, max: usize) -> PollRead {
        let read = if self.full_poll_due(now) {
            PollRead {
                limit: max,
                from: None,
            }
        } else {
            // A poll is brought forward with a place to start from; without
            // one (a read that stopped at its limit on rows with no due
            // moment) the refill starts at the first due row.
            PollRead {
                limit: max.min(self.refill_room()),
                from: self.refill_from,
            }
        };
        self.poll_asked = Some(read);
        read
    }

    /// The rows a refill may take in: the free waiting room of the roomiest
    /// line here (a whole room if none is), and never less than one
    /// receiver's slots, so a refill always reads something.
    fn refill_room(&self) -> usize {
        let per = self.limits.waiting_per_receiver_max;
        let roomiest = self
            .lanes
            .values()
            .map(|lane| per.saturating_sub(lane.waiting.len()))
            .max();
        roomiest
            .unwrap_or(per)
            .max(self.limits.per_receiver_in_flight_max)
    }

    fn full_poll_due(&self, now: UnixMillis) -> bool {
        now >= self.full_poll_at || self.last_poll.is_some_and(|last| now < last)
    }

    /// The next delivery to give a sender, if any may go: receivers with a
    /// free slot take turns, each sending its oldest waiting row.
    pub fn poll_dispatch(&mut self) -> Option<Dispatch<T>> {
        if self.in_flight.len() >= self.limits.in_flight_max {
            return None;
        }
        let cap = self.limits.per_receiver_in_flight_max;
        while let Some(receiver) = self.runnable.pop_front() {
            let Some(lane) = self.lanes.get_mut(&receiver) else {
                continue;
            };
            lane.queued = false;
            // A lane is put in line only when it can send, and nothing but
            // this function takes a slot or a waiting row, so this holds;
            // if it did not, the lane is tidied up rather than served.
            let next = if lane.in_flight < cap {
                lane.waiting.pop_front()
            } else {
                None
            };
            let Some((id, data)) = next else {
                self.refresh(&receiver);
                continue;
            };
            lane.in_flight += 1;
            debug_assert!(lane.in_flight <= cap);
            self.waiting.remove(&id);
            let fresh = self.in_flight.insert(id, receiver.clone()).is_none();
            debug_assert!(fresh, "delivery {id} dispatched twice");
            // Sent now: an older timer for it must not ask for it again.
            self.timer_at.remove(&id);
            self.refresh(&receiver);
            return Some(Dispatch { id, receiver, data });
        }
        None
    }

    /// The latest moment the driver should call in again: the next timer
    /// or the next poll, whichever is first. There is always a next poll,
    /// so there is always an answer.
    pub fn poll_timeout(&mut self) -> UnixMillis {
        // Drop superseded timers from the top so the answer is exact.
        while let Some(Reverse((at, id))) = self.timers.peek().copied() {
            if self.timer_at.get(&id) == Some(&at) {
                return at.min(self.next_poll);
            }
            self.timers.pop();
        }
        self.next_poll
    }

    // ----- internals ----------------------------------------------------

    fn admit(&mut self, row: Row<T>, now: UnixMillis) {
        let id = row.id;
        self.newest_taken = self.newest_taken.max(id);
        if !row.pending || self.in_flight.contains_key(&id) || self.waiting.contains(&id) {
            return;
        }
        if let Some(until) = self.held.get(&id) {
            if *until > now {
                return;
            }
            self.held.remove(&id);
        }
        let due = match row.next_attempt_at {
            None => return,
            Some(at) if at > now => {
                // Read early (a wake for a schedule whose first delay is
                // not 0): wake at its moment rather than at a later poll.
                self.set_timer(id, at);
                return;
            }
            Some(at) => at,
        };
        let full = self.waiting.len() >= self.limits.waiting_max;
        let lane = self
            .lanes
            .entry(row.receiver.clone())
            .or_insert_with(Lane::new);
        if full || lane.waiting.len() >= self.limits.waiting_per_receiver_max {
            // No room: the row stays pending and due in the database, and
            // the poll brings it back (early, once a slot frees).
            if lane.in_flight == 0 && lane.waiting.is_empty() {
                self.lanes.remove(&row.receiver);
            }
            self.note_left(Mark { due, id });
            return;
        }
        // Kept as read, not read again at dispatch: a pending row changes
        // only through its own attempt (and it has none in flight while it
        // waits) or an operator's retry, which only makes it due.
        lane.waiting.push_back((id, row.data));
        self.waiting.insert(id);
        self.timer_at.remove(&id);
        self.refresh(&row.receiver);
    }

    /// A due row at `mark` is left in the database for the poll: the next
    /// freed slot brings the poll forward, and its refill starts no later.
    fn note_left(&mut self, mark: Mark) {
        self.left_to_poll = true;
        self.refill_from = Some(self.refill_from.map_or(mark, |from| from.min(mark)));
    }

    fn fetch(&mut self, id: DeliveryId) {
        if self.fetches.len() >= self.limits.fetches_max {
            // Left to the poll, which finds the row when it is due.
            return;
        }
        if self.fetching.insert(id) {
            self.fetches.push_back(id);
        }
    }

    fn set_timer(&mut self, id: DeliveryId, at: UnixMillis) {
        if self.timer_at.get(&id) == Some(&at) {
            // Already set (the same row read again): one entry is enough.
            return;
        }
        if self.timers.len() >= self.limits.timers_max {
            // The poll finds it when it is due. An older timer of the same
            // delivery must not fire for it meanwhile.
            self.timer_at.remove(&id);
            return;
        }
        self.timer_at.insert(id, at);
        self.timers.push(Reverse((at, id)));
    }

    /// Takes `id` out of flight; its receiver, if it was in flight.
    fn release(&mut self, id: DeliveryId) -> Option<ReceiverKey> {
        let receiver = self.in_flight.remove(&id)?;
        if let Some(lane) = self.lanes.get_mut(&receiver) {
            debug_assert!(lane.in_flight > 0);
            lane.in_flight = lane.in_flight.saturating_sub(1);
        }
        Some(receiver)
    }

    fn slot_freed(&mut self, receiver: &ReceiverKey) {
        if self.left_to_poll {
            self.left_to_poll = false;
            let soonest = match self.last_poll {
                Some(last) => last.plus_millis(self.limits.poll_gap_min_ms),
                None => self.next_poll,
            };
            self.next_poll = self.next_poll.min(soonest);
        }
        self.refresh(receiver);
    }

    /// Puts the lane in line if it can send, or forgets it if it is idle.
    fn refresh(&mut self, receiver: &ReceiverKey) {
        let cap = self.limits.per_receiver_in_flight_max;
        let Some(lane) = self.lanes.get_mut(receiver) else {
            return;
        };
        if lane.in_flight == 0 && lane.waiting.is_empty() {
            if !lane.queued {
                self.lanes.remove(receiver);
            }
            return;
        }
        if !lane.queued && lane.in_flight < cap && !lane.waiting.is_empty() {
            lane.queued = true;
            self.runnable.push_back(receiver.clone());
        }
    }
}
