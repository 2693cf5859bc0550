//! The expiry schedule's work per create and per recovery, at the size of
//! the memory targets (300,000 pending verifications, TTL 3600 s, created
//! at 10,000 a second with a random key each):
//! - `steady_300k`: what a create costs the queue in a steady state: one
//!   key scheduled (the commit consumer) and one due taken and answered
//!   (the expiry thread), so the queue keeps its size;
//! - `backlog_300k`: recovery's whole backlog scheduled in one batch, then
//!   drained as the expiry thread does, a batch at a time.
//!
//! Run: `cargo bench --bench expiry_queue` (about 20 s). Figures go in
//! benches/README.md.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use dialproof_engine::expiry::ExpiryQueue;
use dialproof_engine::ids::VerificationKey;
use dialproof_engine::sip::rng::SplitMix64;
use dialproof_engine::time::UnixMillis;
use std::hint::black_box;

const PENDING: i64 = 300_000;
const TTL_MS: i64 = 3_600_000;
/// Creates a second: a key every 100 us, so 10 share a millisecond.
const PER_MS: i64 = 10;
const T0: i64 = 1_790_000_000_000;

/// The `i`th create's expiry: its key (issued at its moment) and due time.
fn entry(rng: &mut SplitMix64, i: i64) -> (UnixMillis, VerificationKey) {
    let issued = UnixMillis(T0 + i / PER_MS);
    let random = u128::from(rng.next_u64()) << 16 | u128::from(rng.next_u64() & 0xffff);
    (
        issued.plus_millis(TTL_MS),
        VerificationKey::new(issued, random),
    )
}

fn bench(c: &mut Criterion) {
    let mut rng = SplitMix64::new(0x5EED);
    let backlog: Vec<_> = (0..PENDING).map(|i| entry(&mut rng, i)).collect();

    let mut queue = ExpiryQueue::new();
    queue.schedule(backlog.iter().copied());
    let mut next = PENDING;
    c.bench_function("expiry_queue/steady_300k", |b| {
        b.iter(|| {
            let (at, key) = entry(&mut rng, next);
            next += 1;
            queue.schedule([(at, key)]);
            // The entry made PENDING creates ago is due now.
            let now = UnixMillis(T0 + (next - PENDING) / PER_MS + TTL_MS);
            for key in queue.poll_due(now) {
                black_box(key);
                queue.handle_done();
            }
        })
    });

    let mut group = c.benchmark_group("expiry_queue");
    group.sample_size(10);
    group.bench_function("backlog_300k", |b| {
        b.iter_batched(
            || backlog.clone(),
            |entries| {
                let mut queue = ExpiryQueue::new();
                queue.schedule(entries);
                let now = UnixMillis(T0 + PENDING / PER_MS + TTL_MS);
                while !queue.is_settled(now) {
                    for key in queue.poll_due(now) {
                        black_box(key);
                        queue.handle_done();
                    }
                }
            },
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
