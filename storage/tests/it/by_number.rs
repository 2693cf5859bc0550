//! `WriteOp::TransitionByNumber`: an inbound call (or a line going down)
//! finds the pending verification by its dial number and lease generation.
//!
//! Not for: transitions by verification id (`crate::transitions`).

use crate::support::*;
use dialproof_engine::verification::{Event, Status};
use dialproof_storage::{ReleasedLease, Store, TransitionResult, WriteOp};
use std::sync::mpsc;

fn by_number(
    store: &Store,
    number: &str,
    generation: Option<u32>,
    event: Event,
) -> TransitionResult {
    let (tx, rx) = mpsc::channel();
    store
        .submit(WriteOp::TransitionByNumber {
            dial_number: number.to_owned(),
            generation,
            event,
            reply: Some(Box::new(move |r| {
                let _ = tx.send(r);
            })),
        })
        .expect("queued");
    rx.recv_timeout(REPLY_WAIT)
        .expect("reply")
        .expect("transition")
}

#[test]
fn a_call_completes_the_pending_verification_of_its_number_once() {
    let db = db();
    let store = db.store();
    let row = db.row(1);
    insert(&store, row.clone()).expect("insert");
    let at = T0.plus_seconds(5);
    let r = by_number(&store, &row.dial_number, Some(7), call(at, "+79990001122"));
    assert!(r.changed);
    assert_eq!(
        r.released,
        Some(ReleasedLease {
            dial_number: row.dial_number.clone(),
            generation: 7
        })
    );
    let done = r.row.expect("row");
    assert_eq!(done.id, row.id);
    assert_eq!(done.status, Status::Completed);
    assert_eq!(done.completed_at, Some(at));
    assert_eq!(done.caller_id, "+79990001122");
    // A second call (a retransmission that slipped through, a redial) finds
    // nothing pending and changes nothing.
    let again = by_number(&store, &row.dial_number, Some(7), call(at, "+79990000000"));
    assert!(!again.changed && again.row.is_none());
    assert!(db.count("SELECT count(*) FROM webhook_deliveries") == 1);
}

#[test]
fn a_stale_generation_or_unknown_number_changes_nothing() {
    let db = db();
    let store = db.store();
    let row = db.row(2);
    insert(&store, row.clone()).expect("insert");
    let r = by_number(&store, &row.dial_number, Some(6), call(T0, "+79990001122"));
    assert!(!r.changed && r.row.is_none());
    let r = by_number(&store, "+70000000000", None, call(T0, "+79990001122"));
    assert!(!r.changed && r.row.is_none());
    // Without a generation (a line going down) the pending row is failed.
    let r = by_number(
        &store,
        &row.dial_number,
        None,
        Event::Fail {
            at: T0,
            reason: "sip line down".into(),
        },
    );
    assert!(r.changed);
    let failed = r.row.expect("row");
    assert_eq!(failed.status, Status::Failed);
    assert_eq!(failed.failure_reason.as_deref(), Some("sip line down"));
}

#[test]
fn the_lookup_uses_the_partial_index() {
    let db = db();
    drop(db.store());
    let plan = db.query_plan(
        "SELECT id FROM verifications WHERE dial_number = ?1 \
         AND status = 'pending' AND (?2 IS NULL OR lease_generation = ?2) \
         ORDER BY created_at DESC LIMIT 1",
        rusqlite::params!["+74950000001", 7],
    );
    assert!(plan.contains("verifications_pending_dial"), "{plan}");
}

/// The lease invariant, held by the database itself (migration 4): no dial
/// number is held by two pending verifications. A second pending row on a
/// number is refused (and the batch's other ops still commit); once the
/// first has ended, the number may be held again.
#[test]
fn no_dial_number_is_ever_stored_for_two_pending_verifications() {
    let db = db();
    let store = db.store();
    let first = db.row(1);
    insert(&store, first.clone()).expect("insert");
    let mut second = pending_row("ver_00000000000000000000000002", db.company, db.key, 1);
    assert_eq!(second.dial_number, first.dial_number);
    let refused = insert(&store, second.clone()).expect_err("a second pending on the number");
    assert!(
        refused.to_string().contains("UNIQUE"),
        "the unique index refused it: {refused}"
    );
    assert_eq!(db.count("SELECT count(*) FROM verifications"), 1);
    // Ended, the number is free for a new pending row.
    by_number(
        &store,
        &first.dial_number,
        Some(7),
        call(T0.plus_seconds(1), "+79990001122"),
    );
    second.lease_generation = 8;
    insert(&store, second).expect("the number's next lease");
    assert_eq!(
        db.count("SELECT count(*) FROM verifications WHERE status = 'pending'"),
        1
    );
}
