//! Group commit: batching, reply timing, per-op failure isolation, queue
//! limits and shutdown.
//!
//! Not for: what a committed batch sets off (`crate::committed`).

use crate::support::*;
use dialproof_engine::idempotency::Fingerprint;
use dialproof_engine::time::UnixMillis;
use dialproof_storage::{Inserted, KeyedCreate, NewRejection, Options, StorageError, WriteOp};
use std::sync::mpsc;
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

#[test]
fn concurrent_submitters_share_transactions() {
    const THREADS: usize = 8;
    const PER_THREAD: usize = 500;
    let db = db();
    let store = db.store();
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let store = store.clone();
            let barrier = Arc::clone(&barrier);
            let (company, key) = (db.company, db.key);
            std::thread::spawn(move || {
                let (tx, rx) = mpsc::channel();
                barrier.wait();
                for i in 0..PER_THREAD {
                    let n = t * PER_THREAD + i;
                    let tx = tx.clone();
                    store
                        .submit(WriteOp::InsertVerification {
                            keyed: None,
                            row: pending_row(&format!("ver_{n:026}"), company, key, n),
                            reply: Box::new(move |r| {
                                let _ = tx.send(r);
                            }),
                        })
                        .expect("submit");
                }
                (0..PER_THREAD)
                    .map(|_| rx.recv_timeout(REPLY_WAIT).expect("reply"))
                    .filter(|r| r.is_ok())
                    .count()
            })
        })
        .collect();
    let ok: usize = handles.into_iter().map(|h| h.join().expect("thread")).sum();
    let ops = THREADS * PER_THREAD;
    assert_eq!(ok, ops);
    assert_eq!(db.count("SELECT count(*) FROM verifications"), ops as i64);
    let stats = store.stats();
    assert_eq!(stats.ops_committed, ops as u64);
    assert!(
        stats.batches_committed < ops as u64,
        "expected batching, got {stats:?}"
    );
    store.shutdown();
}

#[test]
fn replies_come_after_commit() {
    const OPS: usize = 200;
    let db = db();
    let store = db.store();
    // A separate connection: it sees a row only once it is committed.
    let outside = Arc::new(Mutex::new(db.reader()));
    let (tx, rx) = mpsc::channel();
    for n in 0..OPS {
        let row = db.row(n);
        let (id, company) = (row.id.clone(), row.company_id);
        let outside = Arc::clone(&outside);
        let tx = tx.clone();
        store
            .submit(WriteOp::InsertVerification {
                keyed: None,
                row,
                reply: Box::new(move |r| {
                    let seen = outside
                        .lock()
                        .expect("lock")
                        .verification(&id, company)
                        .expect("read");
                    let _ = tx.send((r, seen.is_some()));
                }),
            })
            .expect("submit");
    }
    for _ in 0..OPS {
        let (result, visible) = rx.recv_timeout(REPLY_WAIT).expect("reply");
        assert_eq!(result, Ok(Inserted::Created));
        assert!(visible, "reply ran before the row was visible to others");
    }
    store.shutdown();
}

/// Holds the writer inside a reply until released, so that everything
/// submitted meanwhile lands in one batch.
fn block_writer(store: &dialproof_storage::Store, db: &Db, n: usize) -> mpsc::Sender<()> {
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let (entered_tx, entered_rx) = mpsc::channel::<()>();
    store
        .submit(WriteOp::InsertVerification {
            keyed: None,
            row: db.row(n),
            reply: Box::new(move |_| {
                let _ = entered_tx.send(());
                let _ = release_rx.recv_timeout(REPLY_WAIT);
            }),
        })
        .expect("submit");
    entered_rx.recv_timeout(REPLY_WAIT).expect("writer blocked");
    release_tx
}

#[test]
fn a_failing_op_does_not_fail_its_batch() {
    let db = db();
    let store = db.store();
    let release = block_writer(&store, &db, 0);
    let (tx, rx) = mpsc::channel();
    let mut rows = vec![db.row(1), db.row(0), db.row(2)]; // row 0 is a duplicate
    let mut unknown_company = db.row(3);
    unknown_company.company_id = 999;
    rows.push(unknown_company);
    rows.push(db.row(4));
    for (i, row) in rows.into_iter().enumerate() {
        let tx = tx.clone();
        store
            .submit(WriteOp::InsertVerification {
                keyed: None,
                row,
                reply: Box::new(move |r| {
                    let _ = tx.send((i, r));
                }),
            })
            .expect("submit");
    }
    release.send(()).expect("release");
    let mut results: Vec<_> = (0..5)
        .map(|_| rx.recv_timeout(REPLY_WAIT).expect("reply"))
        .collect();
    results.sort_by_key(|(i, _)| *i);
    assert!(results[0].1.is_ok());
    assert!(
        matches!(results[1].1, Err(StorageError::Conflict(_))),
        "{:?}",
        results[1]
    );
    assert!(results[2].1.is_ok());
    assert!(
        matches!(results[3].1, Err(StorageError::Conflict(_))),
        "{:?}",
        results[3]
    );
    assert!(results[4].1.is_ok());
    assert_eq!(db.count("SELECT count(*) FROM verifications"), 4);
    let stats = store.stats();
    assert_eq!(stats.batches_committed, 2, "{stats:?}");
    assert_eq!(stats.ops_failed, 2);
    store.shutdown();
}

/// A stored outbox row for `id`, so that a transition of it that emits a
/// webhook does its status UPDATE, then has its outbox INSERT refused by
/// the one-delivery-per-verification index: an op that fails after writing.
fn occupy_outbox(db: &Db, id: &str) {
    db.sql()
        .execute(
            "INSERT INTO webhook_deliveries (verification_id, company_id, event_type, url, \
             payload, state, attempts, next_attempt_at, created_at, updated_at, livemode) \
             VALUES (?1, ?2, 'verification.completed', 'https://example.com/hook', '{}', \
             'pending', 0, 0, 0, 0, 1)",
            rusqlite::params![id, db.company],
        )
        .expect("outbox row");
}

/// Submits a create and a call into the batch the writer is held before;
/// the replies go to `tx` tagged by position.
fn submit_create_call_create(
    store: &dialproof_storage::Store,
    db: &Db,
    id: &str,
    tx: &mpsc::Sender<(usize, bool, String)>,
) {
    for (i, n) in [(0, 2), (2, 3)] {
        let created = tx.clone();
        store
            .submit(WriteOp::InsertVerification {
                keyed: None,
                row: db.row(n),
                reply: Box::new(move |r| {
                    let _ = created.send((i, r.is_ok(), format!("{r:?}")));
                }),
            })
            .expect("submit create");
        if i == 0 {
            let called = tx.clone();
            store
                .submit(WriteOp::Transition {
                    id: id.to_owned(),
                    owner: None,
                    event: call(T0.plus_seconds(5), "+79990001122"),
                    reply: Some(Box::new(move |r| {
                        let _ = called.send((1, r.is_ok(), format!("{r:?}")));
                    })),
                })
                .expect("submit call");
        }
    }
}

fn three_replies(rx: &mpsc::Receiver<(usize, bool, String)>) -> Vec<(usize, bool, String)> {
    let mut replies: Vec<_> = (0..3)
        .map(|_| rx.recv_timeout(REPLY_WAIT).expect("reply"))
        .collect();
    replies.sort_by_key(|r| r.0);
    replies
}

/// The writer runs a batch's ops without savepoints and, when one fails
/// after one of its statements wrote, runs the batch again with one per op:
/// the failed op leaves nothing, the others commit once.
#[test]
fn an_op_failing_after_writing_leaves_nothing_and_its_batch_commits() {
    let db = db();
    let store = db.store();
    let target = db.row(1);
    insert(&store, target.clone()).expect("insert");
    occupy_outbox(&db, &target.id);
    let release = block_writer(&store, &db, 0);
    let (tx, rx) = mpsc::channel();
    submit_create_call_create(&store, &db, &target.id, &tx);
    release.send(()).expect("release");
    let replies = three_replies(&rx);
    assert!(replies[0].1 && replies[2].1, "{replies:?}");
    assert!(
        replies[1].2.contains("Conflict"),
        "the call's outbox INSERT is refused: {replies:?}"
    );
    // Its status UPDATE, done before the refused INSERT, is not kept.
    assert_eq!(
        db.count(&format!(
            "SELECT count(*) FROM verifications WHERE id = '{}' AND status = 'pending' \
             AND completed_at IS NULL AND caller_id = ''",
            target.id
        )),
        1,
        "a half-done transition was committed"
    );
    assert_eq!(db.count("SELECT count(*) FROM verifications"), 4);
    assert_eq!(db.count("SELECT count(*) FROM webhook_deliveries"), 1);
    let stats = store.stats();
    assert_eq!(stats.batches_rerun, 1, "{stats:?}");
    assert_eq!(
        (stats.ops_failed, stats.batches_failed),
        (1, 0),
        "{stats:?}"
    );
    store.shutdown();
}

/// A rerun batch fires the `writer.op` fail point once per op: an op the
/// first run failed there keeps that failure, not a second check.
#[test]
fn a_rerun_batch_fires_the_op_fail_point_once_per_op() {
    let db = db();
    let target = db.row(1);
    let store = db.store();
    insert(&store, target.clone()).expect("insert");
    store.shutdown();
    occupy_outbox(&db, &target.id);
    // Two firings: the op that holds the writer, then the batch's first
    // create; the call and the second create pass it.
    let store = db.store_with(Options {
        failpoints: dialproof_storage::FailPoints::from_spec("writer.op=2*error").expect("spec"),
        ..Options::default()
    });
    let release = block_writer(&store, &db, 0);
    let (tx, rx) = mpsc::channel();
    submit_create_call_create(&store, &db, &target.id, &tx);
    release.send(()).expect("release");
    let replies = three_replies(&rx);
    assert!(
        !replies[0].1 && replies[0].2.contains("writer.op"),
        "{replies:?}"
    );
    assert!(!replies[1].1 && replies[2].1, "{replies:?}");
    assert_eq!(store.stats().batches_rerun, 1);
    // Rows 0 and 2 failed at the fail point; 1 and 3 are stored.
    assert_eq!(db.count("SELECT count(*) FROM verifications"), 2);
    store.shutdown();
}

/// A keyed create whose row is refused after its key was claimed (the id
/// is taken) leaves no key behind, so a retry with that key is not
/// answered with a verification that was never stored.
#[test]
fn a_keyed_create_whose_row_fails_leaves_no_key() {
    let db = db();
    let store = db.store();
    let taken = db.row(1);
    insert(&store, taken.clone()).expect("insert");
    let mut row = db.row(2);
    row.id = taken.id.clone();
    row.idempotency_key = Some("retry-me".into());
    let (tx, rx) = mpsc::channel();
    store
        .submit(WriteOp::InsertVerification {
            keyed: Some(Box::new(KeyedCreate {
                fingerprint: Fingerprint([7; 32]),
                response_body: "{}".into(),
                expired_before: UnixMillis(0),
            })),
            row,
            reply: Box::new(move |r| {
                let _ = tx.send(r);
            }),
        })
        .expect("submit");
    let r = rx.recv_timeout(REPLY_WAIT).expect("reply");
    assert!(matches!(r, Err(StorageError::Conflict(_))), "{r:?}");
    assert_eq!(
        db.count("SELECT count(*) FROM idempotency_keys"),
        0,
        "the key outlived its refused row"
    );
    assert_eq!(store.stats().batches_rerun, 1);
    store.shutdown();
}

#[test]
fn full_queue_and_closed_store_are_refused() {
    let db = db();
    let store = db.store_with(Options {
        queue_capacity: 2,
        ..Options::default()
    });
    let release = block_writer(&store, &db, 0);
    let touch = || WriteOp::TouchKey {
        key_id: db.key,
        at: T0,
    };
    store.submit(touch()).expect("first fits");
    store.submit(touch()).expect("second fits");
    assert_eq!(store.submit(touch()), Err(StorageError::QueueFull));
    release.send(()).expect("release");
    store.shutdown();
    store.shutdown(); // idempotent
    assert_eq!(store.submit(touch()), Err(StorageError::Closed));
    assert_eq!(
        read(&store, |r| r.change_version()),
        Err(StorageError::Closed)
    );
}

#[test]
fn shutdown_commits_and_answers_everything_queued() {
    const OPS: usize = 2_000;
    let db = db();
    let store = db.store_with(Options {
        batch_max: 16,
        ..Options::default()
    });
    let (tx, rx) = mpsc::channel();
    for n in 0..OPS {
        let tx = tx.clone();
        store
            .submit(WriteOp::InsertVerification {
                keyed: None,
                row: db.row(n),
                reply: Box::new(move |r| {
                    let _ = tx.send(r);
                }),
            })
            .expect("submit");
    }
    store.shutdown();
    drop(tx);
    let replies: Vec<_> = rx.iter().collect();
    assert_eq!(replies.len(), OPS);
    assert!(replies.iter().all(|r| r.is_ok()));
    assert_eq!(db.count("SELECT count(*) FROM verifications"), OPS as i64);
    // The final checkpoint leaves an empty WAL.
    let wal = db.path.with_extension("db-wal");
    let wal_len = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
    assert_eq!(wal_len, 0, "WAL not truncated on shutdown");
}

#[test]
fn batch_max_bounds_a_transaction() {
    let db = db();
    let store = db.store_with(Options {
        batch_max: 3,
        ..Options::default()
    });
    let release = block_writer(&store, &db, 0);
    for n in 1..=9 {
        store
            .submit(WriteOp::InsertVerification {
                keyed: None,
                row: db.row(n),
                reply: Box::new(|_| {}),
            })
            .expect("submit");
    }
    release.send(()).expect("release");
    store.shutdown();
    assert_eq!(store.stats().batches_committed, 1 + 3);
}

#[test]
fn touches_coalesce_and_never_go_back() {
    let db = db();
    let store = db.store();
    let release = block_writer(&store, &db, 0);
    for at in [T0.plus_seconds(5), T0.plus_seconds(9), T0.plus_seconds(7)] {
        store
            .submit(WriteOp::TouchKey { key_id: db.key, at })
            .expect("touch");
    }
    release.send(()).expect("release");
    insert(&store, db.row(1)).expect("insert"); // a later batch: the touches are done
    let last_used = |store: &dialproof_storage::Store| {
        let key = db.key;
        read(store, move |r| r.load_keys())
            .expect("read")
            .expect("keys")
            .into_iter()
            .find(|k| k.id == key)
            .and_then(|k| k.last_used_at)
    };
    assert_eq!(last_used(&store), Some(T0.plus_seconds(9)));
    store
        .submit(WriteOp::TouchKey {
            key_id: db.key,
            at: T0,
        })
        .expect("touch");
    insert(&store, db.row(2)).expect("insert");
    assert_eq!(last_used(&store), Some(T0.plus_seconds(9)));
    store.shutdown();
}

#[test]
fn rejections_are_recorded() {
    let db = db();
    let store = db.store();
    insert_rejection(
        &store,
        NewRejection {
            company_id: db.company,
            api_key_id: db.key,
            phone: "+447911123456".into(),
            pool: dialproof_engine::pool::Pool::International,
            reason: "all lines busy".into(),
            at: UnixMillis(T0.0 + 5),
            livemode: true,
        },
    )
    .expect("committed");
    store.shutdown();
    let (pool, reason, at): (String, String, i64) = db
        .sql()
        .query_row("SELECT pool, reason, created_at FROM rejections", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .expect("row");
    assert_eq!(
        (pool.as_str(), reason.as_str(), at),
        ("international", "all lines busy", T0.0 + 5)
    );
}

#[test]
fn a_panicking_reply_does_not_stop_the_writer() {
    let db = db();
    let store = db.store();
    store
        .submit(WriteOp::InsertVerification {
            keyed: None,
            row: db.row(0),
            reply: Box::new(|_| panic!("reply bug")),
        })
        .expect("submit");
    assert_eq!(insert(&store, db.row(1)), Ok(()));
    store.shutdown();
}

#[test]
fn bad_options_are_refused() {
    let db = db();
    for opts in [
        Options {
            readers: 0,
            ..Options::default()
        },
        Options {
            batch_max: 0,
            ..Options::default()
        },
        Options {
            queue_capacity: 0,
            ..Options::default()
        },
    ] {
        assert!(matches!(
            dialproof_storage::Store::open(&db.path, opts),
            Err(StorageError::Invalid(_))
        ));
    }
}

#[test]
fn dropping_every_handle_stops_the_threads_after_the_queue() {
    let db = db();
    let store = db.store();
    let (tx, rx) = mpsc::channel();
    store
        .submit(WriteOp::InsertVerification {
            keyed: None,
            row: db.row(0),
            reply: Box::new(move |r| {
                let _ = tx.send(r);
            }),
        })
        .expect("submit");
    drop(store);
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(10)),
        Ok(Ok(Inserted::Created))
    );
}

#[test]
fn store_is_a_shareable_handle() {
    fn assert_send_sync<T: Send + Sync + Clone + 'static>() {}
    assert_send_sync::<dialproof_storage::Store>();
}

#[test]
fn open_creates_the_directory_and_schema() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("a").join("b").join("fresh.db");
    let store = dialproof_storage::Store::open(&path, Options::default()).expect("open");
    assert_eq!(read(&store, |r| r.change_version()), Ok(Ok(0)));
    assert_eq!(
        read(&store, |r| r.pending_verifications().map(|v| v.len())),
        Ok(Ok(0))
    );
    store.shutdown();
    // A second open (a restart) finds the schema in place.
    let again = dialproof_storage::Store::open(&path, Options::default()).expect("reopen");
    again.shutdown();
}
