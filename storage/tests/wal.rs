//! The WAL stays bounded while readers never pause.
//!
//! Two threads keep read transactions open back to back, overlapping each
//! other, so there is never a moment without a reader. Under SQLite's
//! default automatic checkpoint the WAL then only grows; the writer's
//! RESTART checkpoints (the store's checkpoint thread) must keep it bounded.

mod common;

use common::*;
use dialproof_storage::WriteOp;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// Rows written: each carries ~1.5 KiB, so ~150 MiB go through the WAL.
const ROWS: usize = 100_000;
/// The bound asserted: the forced-checkpoint size (16 MiB) plus one batch,
/// plus one more step in case a RESTART had to be retried.
const WAL_BYTES_MAX: u64 = 36 * 1024 * 1024;

#[test]
fn wal_does_not_grow_without_bound_under_constant_readers() {
    let db = db();
    let store = db.store();
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|n| {
            let (stop, path) = (Arc::clone(&stop), db.path.clone());
            std::thread::spawn(move || {
                let conn = rusqlite::Connection::open(path).expect("open");
                conn.busy_timeout(Duration::from_secs(5)).expect("timeout");
                std::thread::sleep(Duration::from_millis(n * 2));
                let mut reads = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    conn.execute_batch("BEGIN").expect("begin");
                    let _: i64 = conn
                        .query_row("SELECT count(*) FROM meta", [], |r| r.get(0))
                        .expect("read");
                    std::thread::sleep(Duration::from_millis(4));
                    conn.execute_batch("COMMIT").expect("end");
                    reads += 1;
                }
                reads
            })
        })
        .collect();

    let wal = db.path.with_extension("db-wal");
    let mut wal_max = 0u64;
    let info = "x".repeat(1500);
    let (tx, rx) = mpsc::channel();
    const WINDOW: usize = 2_000;
    for n in 0..ROWS {
        let mut row = db.row(n);
        row.info = info.clone();
        let tx = tx.clone();
        store
            .submit(WriteOp::InsertVerification {
                keyed: None,
                row,
                reply: Box::new(move |r| {
                    let _ = tx.send(r);
                }),
            })
            .expect("submit");
        // Keep at most WINDOW in flight so the writer commits steadily.
        if n >= WINDOW {
            rx.recv_timeout(REPLY_WAIT).expect("reply").expect("insert");
        }
        if n % 1_000 == 0 {
            wal_max = wal_max.max(std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0));
        }
    }
    for _ in 0..WINDOW {
        rx.recv_timeout(REPLY_WAIT).expect("reply").expect("insert");
    }
    wal_max = wal_max.max(std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0));
    stop.store(true, Ordering::Relaxed);
    let reads: u64 = readers.into_iter().map(|h| h.join().expect("reader")).sum();
    let stats = store.stats();
    store.shutdown();
    eprintln!("wal max {wal_max} bytes, {reads} reads, {stats:?}");
    assert!(reads > 0);
    assert!(wal_max <= WAL_BYTES_MAX, "WAL grew to {wal_max} bytes");
    assert_eq!(db.count("SELECT count(*) FROM verifications"), ROWS as i64);
}
