//! The commit consumer's events: one per op with consequences, after
//! COMMIT and before the replies, none for a rolled-back batch, and a queue
//! that ends only after the writer's last batch.
//!
//! Not for: the batching itself (`crate::group_commit`).

use crate::support::*;
use dialproof_engine::verification::{Event, Status};
use dialproof_storage::{
    CommitReceiver, CommitSink, Committed, DeliveryState, FailPoints, NewAttempt, NewRejection,
    Options, ReleasedLease, StorageError, Store, Transitioned, WriteOp,
};
use std::time::Duration;

fn store_with_sink(db: &Db, opts: Options) -> (Store, CommitReceiver) {
    let (sink, commits) = CommitSink::channel();
    let store = Store::open_with_commit_sink(&db.path, opts, sink).expect("store open");
    (store, commits)
}

/// Every event queued so far, in order, flattened over batches.
fn queued(commits: &CommitReceiver) -> Vec<Committed> {
    commits.try_iter().flatten().collect()
}

#[test]
fn creates_and_changes_are_reported_before_their_replies() {
    let db = db();
    let (store, commits) = store_with_sink(&db, Options::default());
    let row = db.row(1);
    insert(&store, row.clone()).expect("insert");
    // The reply came, so the event is already queued.
    assert_eq!(
        queued(&commits),
        vec![Committed::Created(row.clone(), None)]
    );

    let at = T0.plus_seconds(20);
    let t = transition(&store, &row.id, None, call(at, "+79990001122")).expect("call");
    let delivery = db
        .reader()
        .delivery(t.delivery_id.expect("outbox row"))
        .expect("read")
        .expect("delivery");
    let done = db
        .reader()
        .verification(&row.id, db.company)
        .expect("read")
        .expect("row");
    assert_eq!(done.status, Status::Completed);
    assert_eq!(
        queued(&commits),
        vec![Committed::Transitioned(Transitioned {
            row: done,
            released: Some(ReleasedLease {
                dial_number: row.dial_number.clone(),
                generation: row.lease_generation,
            }),
            delivery: Some(Box::new(delivery)),
        })]
    );
    store.shutdown();
    assert_eq!(commits.recv(), None);
}

#[test]
fn ops_without_consequences_have_no_event() {
    let db = db();
    let (store, commits) = store_with_sink(&db, Options::default());
    let row = db.row(1);
    insert(&store, row.clone()).expect("insert");
    assert_eq!(queued(&commits).len(), 1);
    // A cancel of a cancelled verification, an unknown id, a rejection row
    // and a key touch change nothing outside their own rows.
    transition(&store, &row.id, None, Event::Cancel { at: T0 }).expect("cancel");
    assert_eq!(queued(&commits).len(), 1);
    let again = transition(&store, &row.id, None, Event::Cancel { at: T0 }).expect("again");
    assert!(!again.changed);
    transition(&store, "ver_nope", None, Event::Cancel { at: T0 }).expect("unknown");
    insert_rejection(
        &store,
        NewRejection {
            company_id: db.company,
            api_key_id: db.key,
            phone: "+79123456789".into(),
            pool: row.pool,
            reason: "all lines busy".into(),
            at: T0,
            livemode: true,
        },
    )
    .expect("rejection");
    store
        .submit(WriteOp::TouchKey {
            key_id: db.key,
            at: T0,
        })
        .expect("touch");
    store.shutdown();
    assert_eq!(queued(&commits), Vec::<Committed>::new());
    assert_eq!(commits.recv(), None);
}

#[test]
fn a_recorded_attempt_reports_the_delivery_as_stored() {
    let db = db();
    let (store, commits) = store_with_sink(&db, Options::default());
    let row = db.row(1);
    insert(&store, row.clone()).expect("insert");
    let expired = T0.plus_seconds(60);
    let t = transition(&store, &row.id, None, Event::Expire { at: expired }).expect("expire");
    let id = t.delivery_id.expect("outbox row");
    let _ = queued(&commits);

    let (tx, rx) = std::sync::mpsc::channel();
    store
        .submit(WriteOp::RecordAttempt {
            attempt: NewAttempt {
                delivery_id: id,
                attempt_no: 1,
                started_at: expired,
                latency_ms: 5,
                http_status: Some(200),
                error: None,
                request_body: "{}".into(),
                response_body: "ok".into(),
                state: DeliveryState::Delivered,
                next_attempt_at: None,
                finished_at: expired.plus_millis(5),
            },
            reply: Box::new(move |r| {
                let _ = tx.send(r);
            }),
        })
        .expect("submit");
    assert_eq!(rx.recv_timeout(REPLY_WAIT).expect("reply"), Ok(()));
    let stored = db.reader().delivery(id).expect("read").expect("delivery");
    assert_eq!(stored.state, DeliveryState::Delivered);
    assert_eq!(queued(&commits), vec![Committed::AttemptRecorded(stored)]);
    store.shutdown();
}

#[test]
fn a_rolled_back_batch_has_no_events() {
    let db = db();
    let opts = Options {
        failpoints: FailPoints::from_spec("writer.before_commit=error").expect("spec"),
        ..Options::default()
    };
    let (store, commits) = store_with_sink(&db, opts);
    assert_eq!(
        insert(&store, db.row(1)),
        Err(StorageError::Injected("writer.before_commit"))
    );
    store.shutdown();
    assert_eq!(commits.recv(), None);
}

#[test]
fn a_lost_acknowledgement_still_reports_the_commit() {
    let db = db();
    let opts = Options {
        failpoints: FailPoints::from_spec("writer.after_commit=error").expect("spec"),
        ..Options::default()
    };
    let (store, commits) = store_with_sink(&db, opts);
    let row = db.row(1);
    // The requester hears of a failure, but the row is stored: whoever
    // owns the consequences must still learn of it.
    assert_eq!(
        insert(&store, row.clone()),
        Err(StorageError::Injected("writer.after_commit"))
    );
    assert_eq!(queued(&commits), vec![Committed::Created(row, None)]);
    store.shutdown();
}

#[test]
fn the_queue_ends_after_every_batch_the_writer_committed() {
    let db = db();
    let opts = Options {
        batch_max: 4,
        ..Options::default()
    };
    let (store, commits) = store_with_sink(&db, opts);
    let rows: Vec<_> = (0..50).map(|n| db.row(n)).collect();
    for row in &rows {
        store
            .submit(WriteOp::InsertVerification {
                keyed: None,
                row: row.clone(),
                reply: Box::new(|_| {}),
            })
            .expect("submit");
    }
    // Nobody waited for a reply: shutdown drains the queue, and the
    // consumer sees every commit, in order, before its queue ends.
    store.shutdown();
    let mut created = Vec::new();
    while let Some(batch) = commits.recv() {
        assert!(!batch.is_empty() && batch.len() <= 4);
        created.extend(batch);
    }
    let expected: Vec<_> = rows
        .into_iter()
        .map(|r| Committed::Created(r, None))
        .collect();
    assert_eq!(created, expected);
}

#[test]
fn a_store_without_a_consumer_reports_through_replies_only() {
    let db = db();
    let store = db.store();
    insert(&store, db.row(1)).expect("insert");
    assert_eq!(store.stats().committed_batches_queued, 0);
    store.shutdown();
}

#[test]
fn a_consumer_that_is_gone_does_not_stop_the_writer() {
    let db = db();
    let (store, commits) = store_with_sink(&db, Options::default());
    drop(commits);
    // The writer logs the events it could not hand over and goes on.
    insert(&store, db.row(1)).expect("insert");
    insert(&store, db.row(2)).expect("insert");
    store.shutdown();
    assert_eq!(db.count("SELECT count(*) FROM verifications"), 2);
}

#[test]
fn the_backlog_counts_batches_the_consumer_has_not_taken() {
    let db = db();
    let (store, commits) = store_with_sink(&db, Options::default());
    insert(&store, db.row(1)).expect("insert");
    insert(&store, db.row(2)).expect("insert");
    assert_eq!(store.stats().committed_batches_queued, 2);
    assert!(commits.recv_timeout(Duration::from_secs(5)).is_ok());
    store.shutdown();
}
