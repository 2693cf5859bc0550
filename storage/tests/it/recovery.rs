//! Restart and crash: what a reopened store finds, and fail points.
//!
//! Not for: kills of the whole service (the root package's
//! `tests/it/resilience/crash`).

use crate::support::*;
use dialproof_engine::verification::Event;
use dialproof_storage::{FailPoints, Options, Reader, StorageError, Store, WriteOp};
use std::collections::BTreeSet;
use std::process::Command;
use std::sync::mpsc;

fn failing(spec: &str) -> Options {
    Options {
        failpoints: FailPoints::from_spec(spec).expect("spec"),
        ..Options::default()
    }
}

#[test]
fn reopen_finds_exactly_the_committed_pending_rows() {
    let db = db();
    let store = db.store();
    let rows: Vec<_> = (0..10).map(|n| db.row(n)).collect();
    for row in &rows {
        insert(&store, row.clone()).expect("insert");
    }
    for row in &rows[0..3] {
        transition(&store, &row.id, None, call(T0.plus_seconds(1), "+1")).expect("call");
    }
    for row in &rows[3..5] {
        transition(&store, &row.id, None, Event::Cancel { at: T0 }).expect("cancel");
    }
    store.shutdown();

    let store = db.store();
    let pending = read(&store, |r| r.pending_verifications())
        .expect("read")
        .expect("rows");
    assert_eq!(pending, rows[5..].to_vec());
    store.shutdown();
}

/// Recovery's compact read visits exactly the pending rows, in insertion
/// order, with their lease and expiry.
#[test]
fn pending_leases_are_the_pending_rows_in_insertion_order() {
    let db = db();
    let store = db.store();
    // Inserted in reverse id order, so insertion order is not id order.
    let rows: Vec<_> = (0..6).rev().map(|n| db.row(n)).collect();
    for row in &rows {
        insert(&store, row.clone()).expect("insert");
    }
    transition(&store, &rows[1].id, None, Event::Cancel { at: T0 }).expect("cancel");
    store.shutdown();

    let reader = db.reader();
    let mut seen = Vec::new();
    let count = reader
        .for_each_pending_lease(|l| {
            seen.push((
                l.id.to_owned(),
                l.dial_number.to_owned(),
                l.lease_generation,
                l.expires_at,
            ))
        })
        .expect("pending leases");
    let expected: Vec<_> = rows
        .iter()
        .filter(|r| r.id != rows[1].id)
        .map(|r| {
            (
                r.id.clone(),
                r.dial_number.clone(),
                r.lease_generation,
                r.expires_at,
            )
        })
        .collect();
    assert_eq!(count, expected.len());
    assert_eq!(seen, expected);
}

#[test]
fn before_commit_error_stores_nothing_and_fails_every_reply() {
    let db = db();
    let store = db.store_with(failing("writer.before_commit=error"));
    assert_eq!(
        insert(&store, db.row(1)),
        Err(StorageError::Injected("writer.before_commit"))
    );
    let (tx, rx) = mpsc::channel();
    for n in 2..20 {
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
    for _ in 2..20 {
        let r = rx.recv_timeout(REPLY_WAIT).expect("reply");
        assert_eq!(r, Err(StorageError::Injected("writer.before_commit")));
    }
    store.shutdown();
    assert_eq!(db.count("SELECT count(*) FROM verifications"), 0);
    let stats = store.stats();
    assert_eq!(stats.batches_committed, 0);
    assert!(stats.batches_failed >= 1);
}

#[test]
fn counted_fail_points_stop_firing() {
    let db = db();
    let store = db.store_with(failing("writer.before_commit=1*error,writer.op=1*error"));
    // The op fails (writer.op), then its whole batch (before_commit): a
    // batch failure replaces every reply of the batch...
    assert_eq!(
        insert(&store, db.row(1)),
        Err(StorageError::Injected("writer.before_commit"))
    );
    // ...both points are spent now.
    assert_eq!(insert(&store, db.row(2)), Ok(()));
    assert_eq!(insert(&store, db.row(3)), Ok(()));
    store.shutdown();
    assert_eq!(db.count("SELECT count(*) FROM verifications"), 2);
}

#[test]
fn begin_failure_answers_every_op_of_the_batch() {
    let db = db();
    let store = db.store_with(failing("writer.begin=1*error"));
    let (tx, rx) = mpsc::channel();
    // However the five are batched, the first batch fails at BEGIN and
    // every op in it is answered; the later ones commit.
    for n in 0..5 {
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
    let replies: Vec<_> = (0..5)
        .map(|_| rx.recv_timeout(REPLY_WAIT).expect("every op is answered"))
        .collect();
    let failed = replies
        .iter()
        .filter(|r| **r == Err(StorageError::Injected("writer.begin")))
        .count();
    assert!(failed >= 1, "{replies:?}");
    assert_eq!(replies.iter().filter(|r| r.is_ok()).count(), 5 - failed);
    store.shutdown();
    assert_eq!(
        db.count("SELECT count(*) FROM verifications"),
        (5 - failed) as i64
    );
}

#[test]
fn begin_failing_always_answers_everything_and_stores_nothing() {
    let db = db();
    let store = db.store_with(failing("writer.begin=error"));
    for n in 0..5 {
        assert_eq!(
            insert(&store, db.row(n)),
            Err(StorageError::Injected("writer.begin"))
        );
    }
    store.shutdown();
    assert_eq!(db.count("SELECT count(*) FROM verifications"), 0);
}

#[test]
fn writer_op_error_fails_only_that_op() {
    let db = db();
    let store = db.store_with(failing("writer.op=1*error"));
    assert_eq!(
        insert(&store, db.row(1)),
        Err(StorageError::Injected("writer.op"))
    );
    assert_eq!(insert(&store, db.row(2)), Ok(()));
    store.shutdown();
    assert_eq!(db.count("SELECT count(*) FROM verifications"), 1);
}

#[test]
fn after_commit_error_reports_failure_of_a_stored_row() {
    let db = db();
    let store = db.store_with(failing("writer.after_commit=1*error"));
    let row = db.row(1);
    assert_eq!(
        insert(&store, row.clone()),
        Err(StorageError::Injected("writer.after_commit"))
    );
    store.shutdown();
    assert!(db
        .reader()
        .verification(&row.id, db.company)
        .expect("get")
        .is_some());
}

#[test]
fn reader_query_error_reaches_the_reply() {
    let db = db();
    let store = db.store_with(failing("reader.query=2*error"));
    for _ in 0..2 {
        assert_eq!(
            read(&store, |r| r.change_version()),
            Err(StorageError::Injected("reader.query"))
        );
    }
    assert!(matches!(read(&store, |r| r.change_version()), Ok(Ok(_))));
    store.shutdown();
}

/// Set in the child process of `abort_after_commit_keeps_the_row`.
const CRASH_DB_ENV: &str = "DIALPROOF_STORAGE_CRASH_DB";

/// `crash_child`'s name as the test harness knows it: its module path
/// without the crate's name.
fn crash_child_name() -> String {
    let path = module_path!();
    let module = path.split_once("::").map_or(path, |(_crate, m)| m);
    format!("{module}::crash_child")
}

/// In the child: open a store that aborts right after its first COMMIT and
/// submit one row. Outside that child, does nothing.
#[test]
fn crash_child() {
    let Some(path) = std::env::var_os(CRASH_DB_ENV) else {
        return;
    };
    let store = Store::open(
        std::path::Path::new(&path),
        failing("writer.after_commit=abort"),
    )
    .expect("open");
    let key: i64 = std::env::var("DIALPROOF_STORAGE_CRASH_KEY")
        .expect("key")
        .parse()
        .expect("int");
    let company: i64 = std::env::var("DIALPROOF_STORAGE_CRASH_COMPANY")
        .expect("company")
        .parse()
        .expect("int");
    let row = pending_row("ver_crash00000000000000000000001", company, key, 1);
    let _ = insert(&store, row);
    unreachable!("the writer should have aborted the process");
}

#[test]
fn abort_after_commit_keeps_the_row() {
    let db = db();
    let exe = std::env::current_exe().expect("test binary");
    let status = Command::new(exe)
        .args([
            "--exact",
            &crash_child_name(),
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CRASH_DB_ENV, &db.path)
        .env("DIALPROOF_STORAGE_CRASH_KEY", db.key.to_string())
        .env("DIALPROOF_STORAGE_CRASH_COMPANY", db.company.to_string())
        .status()
        .expect("run child");
    assert!(!status.success(), "the child should have crashed");
    // Reopening recovers from the WAL the crash left behind.
    let store = db.store();
    let pending = read(&store, |r| r.pending_verifications())
        .expect("read")
        .expect("rows");
    let ids: BTreeSet<_> = pending.into_iter().map(|r| r.id).collect();
    assert!(ids.contains("ver_crash00000000000000000000001"), "{ids:?}");
    store.shutdown();
}

#[test]
fn a_reader_refuses_an_unmigrated_or_missing_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert!(Reader::open(&dir.path().join("missing.db")).is_err());
    let empty = dir.path().join("empty.db");
    rusqlite::Connection::open(&empty).expect("create");
    assert!(matches!(
        Reader::open(&empty),
        Err(StorageError::Corrupt(_))
    ));
}

#[test]
fn a_newer_schema_is_refused() {
    let db = db();
    db.sql()
        .pragma_update(None, "user_version", 999)
        .expect("bump");
    assert!(matches!(
        Store::open(&db.path, Options::default()),
        Err(StorageError::Corrupt(_))
    ));
}
