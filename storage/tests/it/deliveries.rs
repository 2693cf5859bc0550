//! The webhook outbox after its row: recording attempts (attempt row and
//! delivery update in one write), due reads, the delivery log and the
//! operator's manual retry from another connection.
//!
//! Not for: sending webhooks (the service's `webhooks`, and the root
//! package's `tests/it/webhooks`).

use crate::support::*;
use dialproof_engine::time::UnixMillis;
use dialproof_engine::verification::Event;
use dialproof_storage::{
    DeliveryFilter, DeliveryState, NewAttempt, StorageError, Store, WriteOp,
    RESPONSE_BODY_LOG_BYTES_MAX,
};
use std::sync::mpsc;

fn record(store: &Store, a: NewAttempt) -> Result<(), StorageError> {
    let (tx, rx) = mpsc::channel();
    store.submit(WriteOp::RecordAttempt {
        attempt: a,
        reply: Box::new(move |r| {
            let _ = tx.send(r);
        }),
    })?;
    rx.recv_timeout(REPLY_WAIT).expect("record reply")
}

/// Inserts `row` and expires it at T0 + 60 s; returns its outbox row's id.
fn insert_expired(store: &Store, row: &dialproof_storage::VerificationRow) -> i64 {
    insert(store, row.clone()).unwrap();
    let at = T0.plus_seconds(60);
    let t = transition(store, &row.id, None, Event::Expire { at }).unwrap();
    t.delivery_id.expect("outbox row")
}

fn attempt(delivery_id: i64, n: u32, status: Option<u16>, state: DeliveryState) -> NewAttempt {
    let started = T0.plus_seconds(100 + n);
    NewAttempt {
        delivery_id,
        attempt_no: n,
        started_at: started,
        latency_ms: 12,
        http_status: status,
        error: status
            .is_none()
            .then(|| "network error: refused".to_owned()),
        request_body: "{\"type\":\"verification.expired\"}".into(),
        response_body: "x".repeat(RESPONSE_BODY_LOG_BYTES_MAX + 10),
        state,
        next_attempt_at: (state == DeliveryState::Pending).then(|| started.plus_seconds(5)),
        finished_at: started.plus_millis(12),
    }
}

/// Design choice: test mode's pending deliveries are counted apart from
/// live ones, so the operators' backlog alert (which reads the live count
/// and age) never fires for a client's CI receiver that went away.
#[test]
fn a_test_mode_delivery_is_pending_apart_from_live_ones() {
    let db = db();
    let store = db.store();
    let live = db.row(1);
    let test = dialproof_storage::VerificationRow {
        livemode: false,
        ..db.row(2)
    };
    let test_delivery = insert_expired(&store, &test);
    let only_test = db.reader().undelivered().unwrap();
    assert_eq!(
        (
            only_test.count,
            only_test.oldest_created_at,
            only_test.test_count
        ),
        (0, None, 1),
        "a test-mode delivery counted as a live backlog"
    );
    let d = db.reader().delivery(test_delivery).unwrap().unwrap();
    assert!(!d.livemode, "the test delivery reads as live");
    insert_expired(&store, &live);
    let both = db.reader().undelivered().unwrap();
    assert_eq!((both.count, both.test_count), (1, 1));
    assert!(both.oldest_created_at.is_some());
    // The delivery log of one mode (the dashboard's switch) and of both.
    let log_of = |livemode: Option<bool>| -> Vec<String> {
        let filter = DeliveryFilter {
            livemode,
            limit: 10,
            ..Default::default()
        };
        let log = db.admin().delivery_log(&filter).unwrap();
        log.into_iter()
            .map(|e| e.delivery.verification_id)
            .collect()
    };
    assert_eq!(log_of(Some(true)), vec![live.id.clone()]);
    assert_eq!(log_of(Some(false)), vec![test.id.clone()]);
    assert_eq!(log_of(None).len(), 2);
}

#[test]
fn attempts_move_the_delivery_and_fill_the_log() {
    let db = db();
    let store = db.store();
    let row = db.row(1);
    let id = insert_expired(&store, &row);
    let due = db
        .reader()
        .due_deliveries(T0.plus_seconds(61), None, 10)
        .unwrap();
    assert_eq!(due.len(), 1);
    let undelivered = db.reader().undelivered().unwrap();
    assert_eq!(undelivered.count, 1);
    assert_eq!(undelivered.oldest_created_at, Some(due[0].created_at));

    record(&store, attempt(id, 1, None, DeliveryState::Pending)).unwrap();
    let d = db.reader().delivery(id).unwrap().unwrap();
    assert_eq!((d.attempts, d.state), (1, DeliveryState::Pending));
    assert_eq!(d.next_attempt_at, Some(T0.plus_seconds(106)));
    // Not due before its next attempt time.
    assert!(db
        .reader()
        .due_deliveries(T0.plus_seconds(105), None, 10)
        .unwrap()
        .is_empty());
    assert_eq!(
        db.reader()
            .due_deliveries(T0.plus_seconds(106), None, 10)
            .unwrap()
            .len(),
        1
    );

    record(&store, attempt(id, 2, Some(500), DeliveryState::Pending)).unwrap();
    record(&store, attempt(id, 3, Some(200), DeliveryState::Delivered)).unwrap();
    assert_eq!(
        db.reader().undelivered().unwrap(),
        dialproof_storage::Undelivered {
            count: 0,
            oldest_created_at: None,
            test_count: 0,
        }
    );
    let d = db.reader().delivery(id).unwrap().unwrap();
    assert_eq!(
        (d.attempts, d.state, d.next_attempt_at),
        (3, DeliveryState::Delivered, None)
    );
    assert!(db
        .reader()
        .due_deliveries(T0.plus_seconds(999_999), None, 10)
        .unwrap()
        .is_empty());

    let log = db
        .admin()
        .delivery_log(&DeliveryFilter {
            verification_id: Some(row.id.clone()),
            limit: 10,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(log.len(), 1);
    let attempts = &log[0].attempts;
    assert_eq!(
        attempts.iter().map(|a| a.attempt_no).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert_eq!(attempts[0].http_status, None);
    assert_eq!(attempts[0].error.as_deref(), Some("network error: refused"));
    assert_eq!(attempts[1].http_status, Some(500));
    // The response body is kept up to its named limit.
    assert_eq!(attempts[1].response_body.len(), RESPONSE_BODY_LOG_BYTES_MAX);
    assert_eq!(attempts[0].next_attempt_at, Some(T0.plus_seconds(106)));
    assert_eq!(attempts[2].next_attempt_at, None);
    // Per company: the other company sees nothing.
    let other = db
        .admin()
        .delivery_log(&DeliveryFilter {
            company_id: Some(db.other_company),
            limit: 10,
            ..Default::default()
        })
        .unwrap();
    assert!(other.is_empty());
}

#[test]
fn manual_retry_makes_it_due_now_and_bumps_the_change_version() {
    let db = db();
    let store = db.store();
    let row = db.row(2);
    let id = insert_expired(&store, &row);
    record(&store, attempt(id, 1, Some(500), DeliveryState::Dead)).unwrap();
    assert!(db
        .reader()
        .due_deliveries(T0.plus_seconds(999), None, 10)
        .unwrap()
        .is_empty());

    let admin = db.admin();
    let version = admin.change_version().unwrap();
    let now = T0.plus_seconds(500);
    let d = admin.retry_delivery(id, now).unwrap();
    assert_eq!(
        (d.state, d.next_attempt_at, d.attempts),
        (DeliveryState::Pending, Some(now), 1)
    );
    assert_eq!(admin.change_version().unwrap(), version + 1);
    assert_eq!(db.reader().due_deliveries(now, None, 10).unwrap()[0].id, id);
    // The retry is another attempt of the same row, never a second row.
    assert_eq!(db.count("SELECT count(*) FROM webhook_deliveries"), 1);
    assert!(matches!(
        admin.retry_delivery(9999, now),
        Err(StorageError::NotFound(_))
    ));
    // An attempt for a delivery that does not exist fails alone.
    assert!(matches!(
        record(
            &store,
            attempt(9999, 1, Some(200), DeliveryState::Delivered)
        ),
        Err(StorageError::NotFound(_))
    ));
}

#[test]
fn a_manual_retry_during_an_attempt_is_not_lost() {
    let db = db();
    let store = db.store();
    let row = db.row(3);
    let id = insert_expired(&store, &row);
    // Attempt 1 starts at T0+101 s; the operator retries at T0+101.005 s,
    // before the attempt (a failure, next try in 5 s) is recorded.
    let retried_at = T0.plus_seconds(101).plus_millis(5);
    db.admin().retry_delivery(id, retried_at).unwrap();
    record(&store, attempt(id, 1, Some(500), DeliveryState::Pending)).unwrap();
    let d = db.reader().delivery(id).unwrap().unwrap();
    assert_eq!(
        (d.state, d.next_attempt_at, d.attempts),
        (DeliveryState::Pending, Some(retried_at), 1)
    );
    // Attempt 2 (started after the retry) fails for good: the schedule
    // decides again.
    record(&store, attempt(id, 2, Some(500), DeliveryState::Dead)).unwrap();
    let d = db.reader().delivery(id).unwrap().unwrap();
    assert_eq!(
        (d.state, d.next_attempt_at, d.attempts),
        (DeliveryState::Dead, None, 2)
    );
    // A delivered attempt always ends it, retry or not.
    db.admin().retry_delivery(id, T0.plus_seconds(102)).unwrap();
    record(&store, attempt(id, 3, Some(200), DeliveryState::Delivered)).unwrap();
    let d = db.reader().delivery(id).unwrap().unwrap();
    assert_eq!(
        (d.state, d.next_attempt_at),
        (DeliveryState::Delivered, None)
    );
}

/// The webhook driver's refill reads from a place in the due order (due
/// moment, then id): rows before it are skipped, ties on the moment are
/// broken by id, and the limit counts from the place.
#[test]
fn due_deliveries_from_a_place_continue_the_order() {
    let db = db();
    let store = db.store();
    let expire = |n: usize, at: UnixMillis| -> i64 {
        let row = db.row(n);
        insert(&store, row.clone()).unwrap();
        let t = transition(&store, &row.id, None, Event::Expire { at }).unwrap();
        t.delivery_id.expect("outbox row")
    };
    let same: Vec<i64> = (1..=4).map(|n| expire(n, T0.plus_seconds(70))).collect();
    let earlier = expire(5, T0.plus_seconds(65));
    let now = T0.plus_seconds(71);
    let ids = |from: Option<(UnixMillis, i64)>, limit: usize| -> Vec<i64> {
        let rows = db.reader().due_deliveries(now, from, limit).unwrap();
        rows.into_iter().map(|d| d.id).collect()
    };
    let mut all = vec![earlier];
    all.extend(&same);
    assert_eq!(ids(None, 10), all, "by due moment, then id");
    let at70 = T0.plus_seconds(70);
    assert_eq!(ids(Some((at70, same[1])), 10), same[1..].to_vec());
    assert_eq!(ids(Some((at70, same[1])), 2), same[1..3].to_vec());
    assert_eq!(ids(Some((T0.plus_seconds(66), 0)), 10), same);
    assert!(ids(Some((at70, same[3] + 1)), 10).is_empty());
    assert!(
        ids(Some((T0.plus_seconds(72), 0)), 10).is_empty(),
        "rows at or after the place are still only the due ones"
    );
}

/// A design choice: the refill's place is a row value (the WHERE of
/// `Reader::due_deliveries`, whose place is the lowest one when none is
/// given), so that SQLite seeks
/// the due index to it rather than reading the due rows before it and
/// dropping them. If this fails, the refill reads from the first due row
/// again, which is what the place is there to avoid.
#[test]
fn the_refill_from_a_place_seeks_the_due_index() {
    let db = db();
    drop(db.store());
    let plan = db.query_plan(
        "SELECT id FROM webhook_deliveries \
         WHERE state = 'pending' AND next_attempt_at <= ?1 \
         AND (next_attempt_at, id) >= (?3, ?4) \
         ORDER BY next_attempt_at, id LIMIT ?2",
        rusqlite::params![100, 10, 50, 7],
    );
    assert!(
        plan.contains("webhook_deliveries_due") && plan.contains("next_attempt_at>"),
        "the refill's row value does not seek the due index: {plan}"
    );
}
