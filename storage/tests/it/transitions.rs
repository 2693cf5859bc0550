//! Verification transitions in the writer: state changes, lease release,
//! the transactional outbox, company scoping and the call-versus-cancel race.
//!
//! Not for: transitions found by dial number (`crate::by_number`).

use crate::support::*;
use dialproof_engine::verification::{Event, EventType, Status};
use dialproof_storage::{DeliveryState, ReleasedLease, Store, TransitionResult};
use std::sync::{Arc, Barrier};

fn deliveries(db: &Db, id: &str) -> Vec<dialproof_storage::DeliveryRow> {
    db.reader()
        .deliveries_for_verification(id)
        .expect("deliveries")
}

#[test]
fn a_call_completes_releases_and_writes_the_outbox_row() {
    let db = db();
    let store = db.store();
    let row = db.row(1);
    insert(&store, row.clone()).expect("insert");
    let at = T0.plus_seconds(20);
    let r = transition(&store, &row.id, Some(db.company), call(at, "+79990001122")).expect("ok");
    assert!(r.changed);
    assert_eq!(
        r.released,
        Some(ReleasedLease {
            dial_number: row.dial_number.clone(),
            generation: row.lease_generation
        })
    );
    let updated = r.row.expect("row");
    assert_eq!(updated.status, Status::Completed);
    assert_eq!(updated.completed_at, Some(at));
    assert_eq!(updated.caller_id, "+79990001122");
    assert_eq!(
        db.reader().verification(&row.id, db.company).expect("get"),
        Some(updated)
    );

    let d = deliveries(&db, &row.id);
    assert_eq!(d.len(), 1);
    assert_eq!(Some(d[0].id), r.delivery_id);
    assert_eq!(d[0].event_type, EventType::Completed);
    assert_eq!(d[0].state, DeliveryState::Pending);
    assert_eq!(d[0].attempts, 0);
    assert_eq!(d[0].next_attempt_at, Some(at));
    assert_eq!(d[0].url, row.webhook_url);
    let payload: serde_json::Value = serde_json::from_str(&d[0].payload).expect("json");
    assert_eq!(payload["type"], "verification.completed");
    assert_eq!(payload["caller_id"], "+79990001122");
    assert_eq!(payload["client_ref"], "order-1");
    assert_eq!(payload["completed_at"], at.to_rfc3339());
    assert_eq!(
        db.reader().due_deliveries(at, None, 10).expect("due").len(),
        1
    );
    assert_eq!(
        db.reader()
            .due_deliveries(at.plus_millis(-1), None, 10)
            .expect("due")
            .len(),
        0
    );

    // A second call changes nothing and writes no second delivery.
    let again = transition(&store, &row.id, None, call(at.plus_seconds(1), "+1")).expect("ok");
    assert!(!again.changed && again.released.is_none() && again.delivery_id.is_none());
    assert_eq!(again.row.expect("row").caller_id, "+79990001122");
    assert_eq!(deliveries(&db, &row.id).len(), 1);
    store.shutdown();
}

#[test]
fn cancel_expires_without_webhook() {
    let db = db();
    let store = db.store();
    let row = db.row(1);
    insert(&store, row.clone()).expect("insert");
    let r = transition(&store, &row.id, Some(db.company), Event::Cancel { at: T0 }).expect("ok");
    assert!(r.changed);
    assert_eq!(r.row.as_ref().map(|r| r.status), Some(Status::Expired));
    assert_eq!(r.row.as_ref().and_then(|r| r.completed_at), None);
    assert!(r.released.is_some());
    assert_eq!(r.delivery_id, None);
    let again = transition(&store, &row.id, Some(db.company), Event::Cancel { at: T0 }).unwrap();
    assert!(!again.changed && again.released.is_none());
    assert!(deliveries(&db, &row.id).is_empty());
    store.shutdown();
}

#[test]
fn expiry_applies_only_when_due_and_reports_expires_at() {
    let db = db();
    let store = db.store();
    let row = db.row(1);
    insert(&store, row.clone()).expect("insert");
    let early = transition(
        &store,
        &row.id,
        None,
        Event::Expire {
            at: T0.plus_seconds(59),
        },
    );
    assert!(!early.expect("ok").changed);
    let processed_at = T0.plus_seconds(3600); // e.g. after a restart
    let r = transition(&store, &row.id, None, Event::Expire { at: processed_at }).expect("ok");
    assert!(r.changed && r.released.is_some());
    assert_eq!(r.row.as_ref().map(|r| r.status), Some(Status::Expired));
    let d = deliveries(&db, &row.id);
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].event_type, EventType::Expired);
    assert_eq!(d[0].next_attempt_at, Some(processed_at));
    let payload: serde_json::Value = serde_json::from_str(&d[0].payload).expect("json");
    assert_eq!(payload["type"], "verification.expired");
    assert_eq!(payload["completed_at"], row.expires_at.to_rfc3339());
    assert!(payload.get("caller_id").is_none());
    store.shutdown();
}

#[test]
fn failed_webhooks_only_when_the_company_enabled_them() {
    let db = db();
    let store = db.store();
    let fail = || Event::Fail {
        at: T0.plus_seconds(3),
        reason: "trunk down".into(),
    };

    let quiet = db.row(1);
    insert(&store, quiet.clone()).expect("insert");
    let r = transition(&store, &quiet.id, None, fail()).expect("ok");
    assert!(r.changed && r.released.is_some() && r.delivery_id.is_none());
    let failed = r.row.expect("row");
    assert_eq!(failed.status, Status::Failed);
    assert_eq!(failed.failure_reason.as_deref(), Some("trunk down"));
    assert!(deliveries(&db, &quiet.id).is_empty());

    db.admin()
        .set_send_failed_webhooks(db.company, true)
        .expect("enable");
    let loud = db.row(2);
    insert(&store, loud.clone()).expect("insert");
    let r = transition(&store, &loud.id, None, fail()).expect("ok");
    assert!(r.delivery_id.is_some());
    let d = deliveries(&db, &loud.id);
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].event_type, EventType::Failed);
    store.shutdown();
}

#[test]
fn another_companys_verification_is_not_found() {
    let db = db();
    let store = db.store();
    let row = db.row(1);
    insert(&store, row.clone()).expect("insert");
    let r = transition(
        &store,
        &row.id,
        Some(db.other_company),
        Event::Cancel { at: T0 },
    );
    assert_eq!(
        r.expect("ok"),
        TransitionResult {
            row: None,
            changed: false,
            released: None,
            delivery_id: None
        }
    );
    let unknown = transition(&store, "ver_nope", None, Event::Cancel { at: T0 }).expect("ok");
    assert!(unknown.row.is_none());
    assert_eq!(
        db.reader()
            .verification(&row.id, db.other_company)
            .expect("get"),
        None
    );
    let (id, other) = (row.id.clone(), db.other_company);
    assert_eq!(
        read(&store, move |r| r.verification(&id, other)).expect("read"),
        Ok(None)
    );
    let still = db.reader().verification(&row.id, db.company).expect("get");
    assert_eq!(still.map(|r| r.status), Some(Status::Pending));
    store.shutdown();
}

/// Races event `a` against event `b` from two threads on fresh rows
/// (ids from `first`);
/// returns the final rows' statuses and their delivery counts.
fn race(
    db: &Db,
    store: &Store,
    first: usize,
    rounds: usize,
    a: Event,
    b: Event,
) -> Vec<(Status, usize)> {
    let mut out = Vec::new();
    for n in 0..rounds {
        let row = db.row(first + n);
        insert(store, row.clone()).expect("insert");
        let barrier = Arc::new(Barrier::new(2));
        let threads: Vec<_> = [a.clone(), b.clone()]
            .into_iter()
            .map(|event| {
                let (store, barrier, id) = (store.clone(), Arc::clone(&barrier), row.id.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    transition(&store, &id, None, event).expect("transition")
                })
            })
            .collect();
        let results: Vec<TransitionResult> = threads
            .into_iter()
            .map(|t| t.join().expect("join"))
            .collect();
        assert_eq!(
            results.iter().filter(|r| r.changed).count(),
            1,
            "exactly one wins"
        );
        assert_eq!(results.iter().filter(|r| r.released.is_some()).count(), 1);
        let final_row = db.reader().verification(&row.id, db.company).expect("get");
        let status = final_row.expect("row").status;
        // The winner reports the final status; the other saw either the
        // winner's status or, if it was a no-op applied first (a late
        // call), the untouched pending row.
        for r in &results {
            let seen = r.row.as_ref().map(|r| r.status);
            if r.changed {
                assert_eq!(seen, Some(status));
            } else {
                assert!(seen == Some(status) || seen == Some(Status::Pending));
            }
        }
        out.push((status, deliveries(db, &row.id).len()));
    }
    out
}

#[test]
fn call_versus_cancel_exactly_one_wins() {
    let db = db();
    let store = db.store();
    let outcomes = race(
        &db,
        &store,
        0,
        100,
        call(T0.plus_seconds(10), "+79123456789"),
        Event::Cancel {
            at: T0.plus_seconds(10),
        },
    );
    for (status, delivered) in &outcomes {
        match status {
            Status::Completed => assert_eq!(*delivered, 1),
            Status::Expired => assert_eq!(*delivered, 0),
            other => panic!("unexpected {other:?}"),
        }
    }
    store.shutdown();
}

#[test]
fn call_versus_expiry_never_emits_both() {
    let db = db();
    let store = db.store();
    // The call is late (at expires_at), so it must lose whatever the order.
    let late = race(
        &db,
        &store,
        0,
        20,
        call(T0.plus_seconds(60), "+1"),
        Event::Expire {
            at: T0.plus_seconds(60),
        },
    );
    assert!(late.iter().all(|o| *o == (Status::Expired, 1)));
    let in_time = race(
        &db,
        &store,
        1_000,
        50,
        call(T0.plus_seconds(59), "+1"),
        Event::Expire {
            at: T0.plus_seconds(61),
        },
    );
    assert!(in_time.iter().all(|(_, d)| *d == 1));
    store.shutdown();
}

#[test]
fn a_transition_without_reply_still_commits() {
    let db = db();
    let store = db.store();
    let row = db.row(1);
    insert(&store, row.clone()).expect("insert");
    store
        .submit(dialproof_storage::WriteOp::Transition {
            id: row.id.clone(),
            owner: None,
            event: Event::Cancel { at: T0 },
            reply: None,
        })
        .expect("submit");
    store.shutdown();
    let r = db.reader().verification(&row.id, db.company).expect("get");
    assert_eq!(r.map(|r| r.status), Some(Status::Expired));
}
