//! The create path, stage by stage, in one run:
//! - `validate`: parsing and validating a typical create body (phone through
//!   libphonenumber, URL syntax, lengths, TTL);
//! - `decide`: validate + lease a number + mint the id + render the 201 body
//!   + release (everything a create does in memory);
//! - `commit`: the storage writer's group commit as the API uses it: N
//!   threads each submit an insert and wait for its commit, so the figure is
//!   the committed-creates-per-second ceiling of the SQLite path.
//!
//! Run: `cargo bench --bench create_path`. Figures go in benches/README.md.

mod support;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use dialproof_engine::ids::VerificationId;
use dialproof_engine::lease::{LeaseTable, LineSpec, NumberSpec};
use dialproof_engine::pool::Pool;
use dialproof_engine::time::UnixMillis;
use dialproof_engine::validate::parse_create;
use dialproof_storage::{Options, Store, WriteOp};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::{company_and_key, pending_row, BODY};

fn table(numbers: usize) -> LeaseTable {
    let specs = (0..numbers)
        .map(|i| NumberSpec {
            number: format!("+7495{i:07}"),
            pool: Pool::Domestic,
            line: 0,
            active: true,
            dedicated_to: None,
        })
        .collect();
    LeaseTable::new(
        vec![LineSpec {
            active: true,
            up: true,
        }],
        specs,
    )
    .expect("bench numbers are unique")
}

fn bench_memory(c: &mut Criterion) {
    dialproof_engine::validate::warm_up();
    let mut g = c.benchmark_group("create_path");
    g.throughput(Throughput::Elements(1));
    g.bench_function("validate", |b| {
        b.iter(|| black_box(parse_create(black_box(BODY))).is_ok())
    });
    let t = table(10_000);
    let mut i = 0u128;
    g.bench_function("decide", |b| {
        b.iter(|| {
            let req = parse_create(BODY).expect("bench body is valid");
            let lease = t.lease(req.pool, 1).expect("pool has free numbers");
            i += 1;
            let id = VerificationId::new(UnixMillis(1_800_000_000_000), i);
            let body = serde_json::json!({
                "verification_id": id.as_str(),
                "phone": req.phone,
                "dial_number": t.number(lease.slot),
                "client_ref": req.client_ref,
                "info": req.info,
                "status": "pending",
                "ttl_seconds": req.ttl_seconds,
            })
            .to_string();
            t.release(lease);
            black_box(body)
        })
    });
    g.finish();
}

fn bench_commit(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("bench.db");
    let (company_id, api_key_id) = company_and_key(&db);
    let store = Store::open(&db, Options::default()).expect("store");
    let seq = Arc::new(AtomicU64::new(0));
    let mut g = c.benchmark_group("create_commit");
    g.measurement_time(Duration::from_secs(8));
    g.sample_size(20);
    for threads in [1usize, 16] {
        let per_iter = 64u64;
        g.throughput(Throughput::Elements(per_iter * threads as u64));
        g.bench_function(format!("{threads}_waiting_creators"), |b| {
            b.iter_batched(
                || (),
                |_| {
                    std::thread::scope(|s| {
                        for _ in 0..threads {
                            let store = store.clone();
                            let seq = seq.clone();
                            s.spawn(move || {
                                for _ in 0..per_iter {
                                    let i = seq.fetch_add(1, Ordering::Relaxed);
                                    let (tx, rx) = std::sync::mpsc::channel();
                                    store
                                        .submit(WriteOp::InsertVerification {
                                            keyed: None,
                                            row: pending_row(i, company_id, api_key_id),
                                            reply: Box::new(move |r| {
                                                let _ = tx.send(r);
                                            }),
                                        })
                                        .expect("queue has room");
                                    rx.recv().expect("writer replies").expect("commit ok");
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
    targets = bench_memory, bench_commit
}
criterion_main!(benches);
