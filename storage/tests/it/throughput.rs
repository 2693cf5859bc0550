//! A quick throughput figure for the group-commit writer. Ignored by
//! default; run with
//! `cargo test --release -p dialproof-storage --test it -- --ignored --nocapture throughput`.
//!
//! Not for: a pass/fail bound (figures come from benchmarks, never from
//! timed assertions).

use crate::support::*;
use dialproof_engine::verification::Event;
use dialproof_storage::WriteOp;
use std::sync::mpsc;
use std::time::Instant;

/// Submitter threads, like the binary's worker threads.
const THREADS: usize = 4;
const OPS_PER_THREAD: usize = 50_000;
/// Requests in flight per submitter (concurrent connections it serves).
const IN_FLIGHT: usize = 256;

fn run(db: &Db, store: &dialproof_storage::Store, make: fn(&Db, usize) -> WriteOp) -> f64 {
    let started = Instant::now();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            s.spawn(move || {
                let (tx, rx) = mpsc::channel::<()>();
                for i in 0..OPS_PER_THREAD {
                    let n = t * OPS_PER_THREAD + i;
                    let op = match make(db, n) {
                        WriteOp::InsertVerification { row, .. } => {
                            let tx = tx.clone();
                            WriteOp::InsertVerification {
                                keyed: None,
                                row,
                                reply: Box::new(move |r| {
                                    r.expect("insert");
                                    let _ = tx.send(());
                                }),
                            }
                        }
                        WriteOp::Transition {
                            id, owner, event, ..
                        } => {
                            let tx = tx.clone();
                            WriteOp::Transition {
                                id,
                                owner,
                                event,
                                reply: Some(Box::new(move |r| {
                                    assert!(r.expect("transition").changed);
                                    let _ = tx.send(());
                                })),
                            }
                        }
                        other => other,
                    };
                    store.submit(op).expect("submit");
                    if i >= IN_FLIGHT {
                        rx.recv_timeout(REPLY_WAIT).expect("reply");
                    }
                }
                for _ in 0..IN_FLIGHT.min(OPS_PER_THREAD) {
                    rx.recv_timeout(REPLY_WAIT).expect("reply");
                }
            });
        }
    });
    (THREADS * OPS_PER_THREAD) as f64 / started.elapsed().as_secs_f64()
}

#[test]
#[ignore = "measurement; run in release"]
fn group_commit_throughput() {
    let db = db();
    let store = db.store();
    let inserts = run(&db, &store, |db, n| WriteOp::InsertVerification {
        keyed: None,
        row: db.row(n),
        reply: Box::new(|_| {}),
    });
    let after_inserts = store.stats();
    let calls = run(&db, &store, |_, n| WriteOp::Transition {
        id: format!("ver_{n:026}"),
        owner: None,
        event: Event::Call {
            at: T0.plus_seconds(10),
            caller: "+79123456789".into(),
            evidence: dialproof_engine::caller_evidence::CallerEvidence {
                source: dialproof_engine::caller_evidence::CallerIdSource::From,
                trust: dialproof_engine::caller_evidence::CallerIdTrust::Unverified,
            },
        },
        reply: None,
    });
    let stats = store.stats();
    store.shutdown();
    let ops = (THREADS * OPS_PER_THREAD) as f64;
    eprintln!(
        "inserts: {inserts:.0}/s ({:.1} ops/batch); completing transitions with outbox rows: \
         {calls:.0}/s ({:.1} ops/batch); {stats:?}",
        ops / after_inserts.batches_committed as f64,
        ops / (stats.batches_committed - after_inserts.batches_committed) as f64,
    );
}
