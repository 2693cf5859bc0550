//! The storage writer's part of a leased call: each verification is found
//! by its number and completed (`TransitionByNumber` with a call: the
//! status UPDATE and the webhook's outbox row in one transaction), and the
//! caller waits for the commit, as the SIP driver does before it answers
//! the INVITE. N threads do so at once, so the figure is the committed
//! completions-per-second ceiling of the SQLite path with group commit.
//! The pending rows are inserted before each timed iteration (not timed).
//!
//! Run: `cargo bench --bench call_commit`. Figures go in benches/README.md.

mod support;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use dialproof_engine::caller_evidence::{CallerEvidence, CallerIdSource, CallerIdTrust};
use dialproof_engine::time::UnixMillis;
use dialproof_engine::verification::Event;
use dialproof_storage::{Options, Store, VerificationRow, WriteOp};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;
use support::{company_and_key, pending_row};

/// Completions each thread waits for per iteration.
const PER_THREAD: u64 = 64;

/// Stores `rows` as pending verifications, all submitted before the first
/// reply is awaited (so they share a few commits).
fn insert_all(store: &Store, rows: Vec<VerificationRow>) {
    let (tx, rx) = mpsc::channel();
    let n = rows.len();
    for row in rows {
        let tx = tx.clone();
        store
            .submit(WriteOp::InsertVerification {
                keyed: None,
                row,
                reply: Box::new(move |r| {
                    let _ = tx.send(r);
                }),
            })
            .expect("queue has room");
    }
    for _ in 0..n {
        rx.recv().expect("writer replies").expect("insert ok");
    }
}

/// Completes the verification pending on `dial_number` and waits for the
/// commit.
fn complete(store: &Store, dial_number: String) {
    let (tx, rx) = mpsc::channel();
    store
        .submit(WriteOp::TransitionByNumber {
            dial_number,
            generation: None,
            event: Event::Call {
                at: UnixMillis(1_800_000_060_000),
                caller: "+79123456789".into(),
                evidence: CallerEvidence {
                    source: CallerIdSource::From,
                    trust: CallerIdTrust::Unverified,
                },
            },
            reply: Some(Box::new(move |r| {
                let _ = tx.send(r);
            })),
        })
        .expect("queue has room");
    let done = rx.recv().expect("writer replies").expect("commit ok");
    assert!(done.changed, "each number has a pending verification");
}

fn bench_calls(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("bench.db");
    let (company_id, api_key_id) = company_and_key(&db);
    let store = Store::open(&db, Options::default()).expect("store");
    let seq = Arc::new(AtomicU64::new(0));
    let mut g = c.benchmark_group("call_commit");
    g.measurement_time(Duration::from_secs(8));
    g.sample_size(20);
    for threads in [1u64, 16] {
        g.throughput(Throughput::Elements(PER_THREAD * threads));
        g.bench_function(format!("{threads}_waiting_calls"), |b| {
            b.iter_batched(
                || {
                    // One slice of fresh pending rows per thread.
                    let first = seq.fetch_add(PER_THREAD * threads, Ordering::Relaxed);
                    let rows: Vec<VerificationRow> = (first..first + PER_THREAD * threads)
                        .map(|i| pending_row(i, company_id, api_key_id))
                        .collect();
                    let numbers: Vec<String> = rows.iter().map(|r| r.dial_number.clone()).collect();
                    insert_all(&store, rows);
                    numbers
                },
                |numbers| {
                    std::thread::scope(|s| {
                        for slice in numbers.chunks(PER_THREAD as usize) {
                            let store = store.clone();
                            s.spawn(move || {
                                for number in slice {
                                    complete(&store, number.clone());
                                }
                            });
                        }
                    })
                },
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();
    store.shutdown();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1));
    targets = bench_calls
}
criterion_main!(benches);
