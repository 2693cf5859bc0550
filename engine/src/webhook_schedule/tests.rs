//! The scheduler on virtual time: each test plays the driver's part with a
//! tiny in-memory "database" of rows and a clock that moves only when told.

use super::*;
use std::collections::BTreeMap;

const T0: UnixMillis = UnixMillis(1_800_000_000_000);

fn at(ms: i64) -> UnixMillis {
    T0.plus_millis(ms)
}

fn receiver(port: u16) -> ReceiverKey {
    ReceiverKey::of_url(&format!("http://127.0.0.1:{port}/hook"))
}

/// The rows as the database has them: pending ones with their due time.
#[derive(Default)]
struct Db {
    rows: BTreeMap<DeliveryId, (u16, Option<UnixMillis>)>,
}

impl Db {
    fn insert(&mut self, id: DeliveryId, port: u16, due: UnixMillis) {
        self.rows.insert(id, (port, Some(due)));
    }

    fn finish(&mut self, id: DeliveryId) {
        if let Some(r) = self.rows.get_mut(&id) {
            r.1 = None;
        }
    }

    fn row(&self, id: DeliveryId) -> Option<Row<DeliveryId>> {
        self.rows.get(&id).map(|&(port, due)| Row {
            id,
            pending: due.is_some(),
            next_attempt_at: due,
            receiver: receiver(port),
            data: id,
        })
    }

    /// What the poll's query returns: pending and due, oldest first.
    fn due(&self, now: UnixMillis) -> Vec<Row<DeliveryId>> {
        let mut rows: Vec<_> = self
            .rows
            .keys()
            .filter_map(|&id| self.row(id))
            .filter(|r| r.next_attempt_at.is_some_and(|t| t <= now))
            .collect();
        rows.sort_by_key(|r| (r.next_attempt_at, r.id));
        rows
    }
}

/// One driver turn at `now`: timers, the poll if wanted, the fetches, then
/// every dispatch the scheduler allows.
fn turn(s: &mut Scheduler<DeliveryId>, db: &Db, now: UnixMillis) -> Vec<Dispatch<DeliveryId>> {
    s.handle_timeout(now);
    if s.wants_poll(now) {
        s.handle_polled(db.due(now), now);
    }
    while let Some(id) = s.poll_fetch() {
        s.handle_rows(db.row(id), now);
    }
    std::iter::from_fn(|| s.poll_dispatch()).collect()
}

/// Runs turns at every moment the scheduler asks for, until `until`;
/// returns each dispatch with its moment.
fn run_until(
    s: &mut Scheduler<DeliveryId>,
    db: &Db,
    from: UnixMillis,
    until: UnixMillis,
) -> Vec<(UnixMillis, DeliveryId)> {
    let mut now = from;
    let mut sent = Vec::new();
    while now <= until {
        for d in turn(s, db, now) {
            sent.push((now, d.id));
        }
        let next = s.poll_timeout();
        assert!(next > now, "the scheduler asked to be woken in the past");
        now = next;
    }
    sent
}

fn ids(ds: &[Dispatch<DeliveryId>]) -> Vec<DeliveryId> {
    ds.iter().map(|d| d.id).collect()
}

#[test]
fn receivers_are_scheme_host_and_port() {
    assert_eq!(
        ReceiverKey::of_url("https://A.example/x?y").as_str(),
        "https://a.example:443"
    );
    assert_eq!(
        ReceiverKey::of_url("https://a.example:443/other"),
        ReceiverKey::of_url("https://a.example/x")
    );
    assert_eq!(
        ReceiverKey::of_url("http://127.0.0.1:9000/h").as_str(),
        "http://127.0.0.1:9000"
    );
    assert_ne!(receiver(9000), receiver(9001));
    assert_eq!(ReceiverKey::of_url("not a url").as_str(), "not a url");
}

#[test]
fn the_first_poll_is_at_once_then_at_the_interval() {
    let mut s = Scheduler::<DeliveryId>::default();
    assert!(s.wants_poll(T0));
    s.handle_polled(Vec::new(), T0);
    assert!(!s.wants_poll(at(POLL_INTERVAL_MS - 1)));
    assert!(s.wants_poll(at(POLL_INTERVAL_MS)));
    assert_eq!(s.poll_timeout(), at(POLL_INTERVAL_MS));
}

#[test]
fn a_clock_stepping_back_does_not_stall_the_poll() {
    let mut s = Scheduler::<DeliveryId>::default();
    s.handle_polled(Vec::new(), T0);
    assert!(s.wants_poll(at(-3_600_000)));
}

#[test]
fn a_committed_delivery_is_read_and_dispatched_once() {
    let mut s = Scheduler::default();
    let mut db = Db::default();
    s.handle_polled(Vec::new(), T0);
    db.insert(1, 9000, at(10));
    s.handle_committed(1);
    s.handle_committed(1);
    assert_eq!(s.poll_fetch(), Some(1));
    assert_eq!(s.poll_fetch(), None, "one read per wake burst");
    s.handle_rows(db.row(1), at(10));
    assert_eq!(
        ids(&std::iter::from_fn(|| s.poll_dispatch()).collect::<Vec<_>>()),
        [1]
    );

    // In flight: a wake, a poll and a fetch all see it pending and due in
    // the database, and none sends it again.
    s.handle_committed(1);
    assert_eq!(s.poll_fetch(), None, "no read for a delivery in flight");
    assert!(turn(&mut s, &db, at(POLL_INTERVAL_MS)).is_empty());
    s.handle_rows(db.row(1), at(600));
    assert_eq!(s.poll_dispatch(), None);
    assert_eq!(s.in_flight(), 1);

    db.finish(1);
    s.handle_recorded(1, Recorded::Committed(Next::Delivered), at(700));
    assert_eq!(s.in_flight(), 0);
    assert!(run_until(&mut s, &db, at(700), at(10_000)).is_empty());
}

#[test]
fn a_committed_row_is_dispatched_without_a_read() {
    let mut s = Scheduler::default();
    let mut db = Db::default();
    s.handle_polled(Vec::new(), T0);
    db.insert(1, 9000, at(10));
    s.handle_committed_row(db.row(1).expect("committed"), at(10));
    assert_eq!(s.poll_fetch(), None, "the wake brought the row");
    assert_eq!(
        ids(&std::iter::from_fn(|| s.poll_dispatch()).collect::<Vec<_>>()),
        [1]
    );
}

#[test]
fn a_committed_row_whose_wake_comes_after_its_attempt_is_read_again() {
    // The commit consumer lagged: the poll read row 1, its attempt went out
    // and was recorded, and only then does its wake arrive with the row as
    // committed (pending, due). Taken as it is, it would be sent again.
    let mut s = Scheduler::default();
    let mut db = Db::default();
    db.insert(1, 9000, T0);
    let as_committed = db.row(1).expect("committed");
    assert_eq!(ids(&turn(&mut s, &db, T0)), [1]);
    db.finish(1);
    s.handle_recorded(1, Recorded::Committed(Next::Delivered), at(5));
    s.handle_committed_row(as_committed, at(6));
    assert_eq!(s.poll_dispatch(), None, "not sent from the stale row");
    assert_eq!(s.poll_fetch(), Some(1), "read again instead");
    s.handle_rows(db.row(1), at(6));
    assert_eq!(s.poll_dispatch(), None, "delivered in the database");
}

#[test]
fn finished_rows_and_rows_without_a_due_time_are_not_sent() {
    let mut s = Scheduler::default();
    let finished = Row {
        id: 1,
        pending: false,
        next_attempt_at: Some(T0),
        receiver: receiver(9000),
        data: 1,
    };
    let undated = Row {
        id: 2,
        pending: true,
        next_attempt_at: None,
        receiver: receiver(9000),
        data: 2,
    };
    s.handle_polled([finished, undated], T0);
    assert_eq!(s.poll_dispatch(), None);
    assert_eq!(s.waiting(), 0);
}

#[test]
fn a_retry_is_sent_at_its_scheduled_moment_not_at_the_next_poll() {
    let mut s = Scheduler::default();
    let mut db = Db::default();
    db.insert(1, 9000, T0);
    assert_eq!(ids(&turn(&mut s, &db, T0)), [1]);
    // The attempt failed; the schedule says 5.123 s later (off the poll's
    // 500 ms grid, so only the timer can hit it exactly).
    let retry = at(5_123);
    db.insert(1, 9000, retry);
    s.handle_recorded(1, Recorded::Committed(Next::RetryAt(retry)), at(40));
    s.handle_timeout(at(5_122));
    assert_eq!(s.poll_fetch(), None, "not before its moment");
    let sent = run_until(&mut s, &db, at(40), at(6_000));
    assert_eq!(sent, [(retry, 1)]);
}

#[test]
fn a_row_read_before_it_is_due_is_timed_for_its_moment() {
    // A schedule whose first delay is not 0: the wake reads a row due later.
    let mut s = Scheduler::default();
    let mut db = Db::default();
    s.handle_polled(Vec::new(), T0);
    db.insert(1, 9000, at(3_210));
    s.handle_committed(1);
    assert!(turn(&mut s, &db, at(1)).is_empty());
    let sent = run_until(&mut s, &db, at(1), at(4_000));
    assert_eq!(sent, [(at(3_210), 1)]);
}

#[test]
fn a_receiver_gets_at_most_eight_at_once_and_others_are_not_held_up() {
    let mut s = Scheduler::default();
    let mut db = Db::default();
    for id in 1..=20 {
        db.insert(id, 9000, T0);
    }
    for id in 101..=103 {
        db.insert(id, 9001, T0);
    }
    let first = ids(&turn(&mut s, &db, T0));
    // Receivers take turns: the second one is not queued behind the first.
    assert_eq!(&first[..6], [1, 101, 2, 102, 3, 103]);
    assert_eq!(first.len(), PER_RECEIVER_IN_FLIGHT_MAX + 3);
    assert_eq!(s.in_flight_to(&receiver(9000)), PER_RECEIVER_IN_FLIGHT_MAX);
    assert_eq!(s.poll_dispatch(), None);

    // Each recorded attempt frees one slot, taken by the oldest waiting.
    let mut sent: Vec<DeliveryId> = first.into_iter().filter(|id| *id <= 20).collect();
    let mut now = T0;
    while sent.len() < 20 {
        now = now.plus_millis(7);
        let done = sent[sent.len() - PER_RECEIVER_IN_FLIGHT_MAX];
        db.finish(done);
        s.handle_recorded(done, Recorded::Committed(Next::Delivered), now);
        let next = ids(&turn(&mut s, &db, now));
        assert_eq!(next.len(), 1, "one slot freed, one sent: {next:?}");
        sent.extend(next);
        assert!(s.in_flight_to(&receiver(9000)) <= PER_RECEIVER_IN_FLIGHT_MAX);
    }
    assert_eq!(sent, (1..=20).collect::<Vec<_>>());
}

#[test]
fn the_total_in_flight_is_bounded_too() {
    let limits = Limits {
        in_flight_max: 3,
        ..Limits::default()
    };
    let mut s = Scheduler::new(limits);
    let mut db = Db::default();
    for id in 1..=5 {
        db.insert(id, 9000 + id as u16, T0);
    }
    assert_eq!(ids(&turn(&mut s, &db, T0)), [1, 2, 3]);
    s.handle_recorded(2, Recorded::Committed(Next::Delivered), at(5));
    db.finish(2);
    assert_eq!(ids(&turn(&mut s, &db, at(5))), [4]);
}

#[test]
fn a_failed_record_holds_the_delivery_then_sends_it_again() {
    let mut s = Scheduler::default();
    let mut db = Db::default();
    db.insert(1, 9000, T0);
    assert_eq!(ids(&turn(&mut s, &db, T0)), [1]);
    // The write failed: the database still says pending and due, so every
    // poll returns it; it must wait out the backoff all the same.
    s.handle_recorded(1, Recorded::NotCommitted, at(100));
    let sent = run_until(&mut s, &db, at(100), at(10_000));
    assert_eq!(sent, [(at(100 + RECORD_FAILURE_BACKOFF_MS), 1)]);
}

#[test]
fn a_hold_without_a_timer_ends_at_the_first_poll_after_it() {
    let limits = Limits {
        timers_max: 0,
        ..Limits::default()
    };
    let mut s = Scheduler::new(limits);
    let mut db = Db::default();
    db.insert(1, 9000, T0);
    assert_eq!(ids(&turn(&mut s, &db, T0)), [1]);
    s.handle_recorded(1, Recorded::NotCommitted, at(100));
    assert_eq!(s.timers(), 0);
    let sent = run_until(&mut s, &db, at(100), at(10_000));
    // Held until 5.1 s; the poll at 5.5 s is the first to see it free.
    assert_eq!(sent, [(at(5_500), 1)]);
}

#[test]
fn past_the_timer_bound_retries_fall_back_to_the_poll() {
    let limits = Limits {
        timers_max: 2,
        ..Limits::default()
    };
    let mut s = Scheduler::new(limits);
    let mut db = Db::default();
    for id in 1..=3 {
        db.insert(id, 9000, T0);
    }
    assert_eq!(ids(&turn(&mut s, &db, T0)), [1, 2, 3]);
    let retry = at(1_234);
    for id in 1..=3 {
        db.insert(id, 9000, retry);
        s.handle_recorded(id, Recorded::Committed(Next::RetryAt(retry)), at(10));
    }
    assert_eq!(s.timers(), 2, "the third retry found no timer");
    let sent = run_until(&mut s, &db, at(10), at(3_000));
    // Two on their timers at 1.234 s; the third at the next poll (1.5 s).
    assert_eq!(sent, [(retry, 1), (retry, 2), (at(1_500), 3)]);
}

#[test]
fn the_real_timer_bound_is_enforced() {
    // Every other bound out of the way, so only the timers' bound speaks.
    let limits = Limits {
        per_receiver_in_flight_max: usize::MAX,
        in_flight_max: usize::MAX,
        waiting_per_receiver_max: usize::MAX,
        waiting_max: usize::MAX,
        ..Limits::default()
    };
    let mut s = Scheduler::new(limits);
    let mut db = Db::default();
    let n = TIMERS_MAX as i64 + 10;
    for id in 0..n {
        db.insert(id, 9000, T0);
    }
    s.handle_polled(db.due(T0), T0);
    while s.poll_dispatch().is_some() {}
    for id in 0..n {
        s.handle_recorded(id, Recorded::Committed(Next::RetryAt(at(60_000))), at(1));
    }
    assert_eq!(s.timers(), TIMERS_MAX);
}

#[test]
fn a_full_job_queue_keeps_the_delivery_scheduled() {
    let mut s = Scheduler::default();
    let mut db = Db::default();
    for id in 1..=3 {
        db.insert(id, 9000, T0);
    }
    let first = turn(&mut s, &db, T0);
    assert_eq!(ids(&first), [1, 2, 3]);
    // The driver could not queue 2 and 3: they go back, in order, ahead of
    // anything that arrives meanwhile, and nothing depends on a poll.
    for d in first.into_iter().skip(1).rev() {
        s.handle_unsent(d);
    }
    assert_eq!(s.in_flight(), 1);
    db.insert(4, 9000, at(1));
    s.handle_committed(4);
    assert!(!s.wants_poll(at(1)));
    let again = turn(&mut s, &db, at(1));
    assert_eq!(ids(&again), [2, 3, 4]);
    assert_eq!(again[0].data, 2, "the row itself comes back");
}

#[test]
fn rows_beyond_the_waiting_room_come_back_with_an_early_poll() {
    let limits = Limits {
        per_receiver_in_flight_max: 1,
        waiting_per_receiver_max: 2,
        ..Limits::default()
    };
    let mut s = Scheduler::new(limits);
    let mut db = Db::default();
    for id in 1..=5 {
        db.insert(id, 9000, T0);
    }
    assert_eq!(ids(&turn(&mut s, &db, T0)), [1]);
    assert_eq!(s.waiting(), 1, "2 waits; 3, 4 and 5 were left to the poll");
    // A slot frees: the waiting row goes at once, and the poll that finds
    // the rows left to it is brought forward.
    db.finish(1);
    s.handle_recorded(1, Recorded::Committed(Next::Delivered), at(20));
    assert!(s.wants_poll(at(POLL_GAP_MIN_MS)));
    let mut sent = vec![ids(&turn(&mut s, &db, at(20)))];
    let mut now = at(20);
    for _ in 0..10 {
        if let Some(&last) = sent.last().and_then(|v| v.last()) {
            db.finish(last);
            s.handle_recorded(last, Recorded::Committed(Next::Delivered), now);
        }
        now = now.plus_millis(POLL_GAP_MIN_MS);
        sent.push(ids(&turn(&mut s, &db, now)));
    }
    let all: Vec<DeliveryId> = sent.into_iter().flatten().collect();
    assert_eq!(all, [2, 3, 4, 5], "every row once, in order");
}

#[test]
fn wakes_beyond_the_fetch_bound_are_left_to_the_poll() {
    let limits = Limits {
        fetches_max: 2,
        ..Limits::default()
    };
    let mut s = Scheduler::new(limits);
    let mut db = Db::default();
    s.handle_polled(Vec::new(), T0);
    for id in 1..=3 {
        db.insert(id, 9000, at(1));
        s.handle_committed(id);
    }
    assert_eq!(ids(&turn(&mut s, &db, at(1))), [1, 2]);
    assert_eq!(ids(&turn(&mut s, &db, at(POLL_INTERVAL_MS))), [3]);
}

#[test]
fn an_abandoned_dispatch_frees_its_slot_and_returns_with_the_poll() {
    let mut s = Scheduler::default();
    let mut db = Db::default();
    db.insert(1, 9000, T0);
    assert_eq!(ids(&turn(&mut s, &db, T0)), [1]);
    s.handle_abandoned(1);
    assert_eq!(s.in_flight_to(&receiver(9000)), 0);
    assert!(turn(&mut s, &db, at(1)).is_empty());
    assert_eq!(ids(&turn(&mut s, &db, at(POLL_INTERVAL_MS))), [1]);
}

#[test]
fn a_delivery_sent_early_does_not_come_back_on_its_old_timer() {
    let mut s = Scheduler::default();
    let mut db = Db::default();
    db.insert(1, 9000, T0);
    assert_eq!(ids(&turn(&mut s, &db, T0)), [1]);
    db.insert(1, 9000, at(2_000));
    s.handle_recorded(1, Recorded::Committed(Next::RetryAt(at(2_000))), at(10));
    // The operator's manual retry makes it due now; the poll sends it.
    db.insert(1, 9000, at(600));
    assert_eq!(ids(&turn(&mut s, &db, at(1_000))), [1]);
    db.finish(1);
    s.handle_recorded(1, Recorded::Committed(Next::Delivered), at(1_100));
    s.handle_timeout(at(2_000));
    assert_eq!(s.poll_fetch(), None, "the old timer was superseded");
    assert_ne!(s.poll_timeout(), at(2_000));
}

#[test]
fn reports_for_unknown_deliveries_change_nothing() {
    let mut s = Scheduler::<DeliveryId>::default();
    s.handle_recorded(42, Recorded::NotCommitted, T0);
    s.handle_abandoned(42);
    assert_eq!((s.in_flight(), s.waiting(), s.timers()), (0, 0, 0));
}

/// A design choice: a poll brought forward between the cadence's polls
/// only refills, so under one receiver's backlog the driver reads a few
/// rows per early poll rather than a whole batch each time; a refill that
/// came back with all it asked for keeps the early polls coming, so the
/// backlog still drains at their pace, every row once and in order.
#[test]
fn early_polls_read_a_refill_and_still_drain_a_backlog() {
    let (asked, _) = drain_a_backlog(30, 2, 20);
    assert_eq!(
        asked[0].limit, 20,
        "the first poll is the cadence's: a whole batch"
    );
    let early: Vec<PollRead> = asked.iter().copied().filter(|r| r.limit < 20).collect();
    assert!(
        early.iter().all(|r| r.limit <= 2),
        "an early poll asks for at most one waiting room: {asked:?}"
    );
    assert!(
        early.len() >= 10,
        "most polls were early refills: {asked:?}"
    );
}

/// A design choice: an early poll starts where the last read left rows
/// for lack of room, not at the first due row, so it does not read again
/// the rows waiting or in flight here (under one receiver's backlog those
/// are the oldest due rows, and reading them first was most of what a
/// refill read). A refill that starts at the first due row fails here.
#[test]
fn early_polls_do_not_read_again_the_rows_already_here() {
    let (asked, reread) = drain_a_backlog(60, 4, 20);
    assert_eq!(
        reread, 0,
        "early polls read rows that were waiting or in flight: {asked:?}"
    );
    assert!(
        asked.iter().filter(|r| r.from.is_some()).count() >= 10,
        "most polls were refills from a place: {asked:?}"
    );
}

/// One receiver (2 slots, a waiting room of `room`) and `rows` due rows;
/// each turn sends what its slots take and records it 50 ms later. Asserts
/// that every row was sent once, in order; returns every read asked for,
/// and how many rows early polls read that were already waiting or in
/// flight.
fn drain_a_backlog(rows: i64, room: usize, batch: usize) -> (Vec<PollRead>, usize) {
    let limits = Limits {
        per_receiver_in_flight_max: 2,
        waiting_per_receiver_max: room,
        ..Limits::default()
    };
    let mut s = Scheduler::new(limits);
    let mut db = Db::default();
    for id in 1..=rows {
        db.insert(id, 9000, T0);
    }
    let (mut now, mut sent, mut asked, mut reread) = (T0, Vec::new(), Vec::new(), 0);
    for _ in 0..4 * rows {
        s.handle_timeout(now);
        if s.wants_poll(now) {
            let read = s.poll_read(now, batch);
            asked.push(read);
            let due: Vec<_> = db
                .due(now)
                .into_iter()
                .filter(|r| read.from.is_none_or(|from| mark(r) >= from))
                .take(read.limit)
                .collect();
            if read.limit < batch {
                let here = |r: &Row<DeliveryId>| {
                    s.waiting.contains(&r.id) || s.in_flight.contains_key(&r.id)
                };
                reread += due.iter().filter(|r| here(r)).count();
            }
            s.handle_polled(due, now);
        }
        while let Some(id) = s.poll_fetch() {
            s.handle_rows(db.row(id), now);
        }
        let dispatched: Vec<_> = std::iter::from_fn(|| s.poll_dispatch()).collect();
        now = now.plus_millis(POLL_GAP_MIN_MS);
        for d in dispatched {
            sent.push(d.id);
            db.finish(d.id);
            s.handle_recorded(d.id, Recorded::Committed(Next::Delivered), now);
        }
    }
    assert_eq!(
        sent,
        (1..=rows).collect::<Vec<_>>(),
        "every row once, in order"
    );
    (asked, reread)
}

fn mark(row: &Row<DeliveryId>) -> Mark {
    Mark {
        due: row.next_attempt_at.expect("a due row"),
        id: row.id,
    }
}
