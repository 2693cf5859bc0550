//! Number health's per-lease work, at the size of the memory targets
//! (600,000 numbers, every one already seen), with a hash map as the
//! baseline in the same run:
//! - `map_lookup` and `hash_map_lookup`: finding one number's 4-byte
//!   state among 600,000, in `engine/src/number_map.rs`'s sorted arrays
//!   and in a `HashMap` of the same entries (what number health held
//!   before 2026-11-27, then with 40-byte counters: 86 B a number against
//!   48; 12 B a number in the arrays since 2026-11-28);
//! - `lease_and_end`: what the commit consumer does for a lease and its
//!   completion (`NumberHealth::on_lease` and `on_end`), text parsing
//!   included, with the changes taken every [`TAKE_EVERY`] leases as the
//!   control loop takes them about once a second;
//! - `fill_600k` and `hash_map_fill_600k`: 600,000 numbers seen for the
//!   first time, in random order (the array's merges included: what a
//!   service pays once, as its numbers are first leased).
//!
//! The numbers are picked at random (a seeded generator), as leases
//! rotate over a pool, not one hot number.
//!
//! Run: `cargo bench --bench number_health` (about 20 s). Figures go in
//! benches/README.md.

use criterion::{criterion_group, criterion_main, Criterion};
use dialproof_engine::e164::PackedNumber;
use dialproof_engine::number_health::{Ending, NumberHealth};
use dialproof_engine::number_map::NumberMap;
use dialproof_engine::pool::Pool;
use dialproof_engine::sip::rng::SplitMix64;
use dialproof_engine::time::UnixMillis;
use std::collections::HashMap;
use std::hint::black_box;

const NUMBERS_COUNT: u64 = 600_000;
const PICKS_COUNT: usize = 1 << 20;
/// Leases between two takes of the changes: a second at 10,000 leases a
/// second.
const TAKE_EVERY: i64 = 10_000;

fn text(i: u64) -> String {
    format!("+7495{:07}", 1_000_000 + i)
}

fn bench(c: &mut Criterion) {
    let texts: Vec<String> = (0..NUMBERS_COUNT).map(text).collect();
    let packed: Vec<PackedNumber> = texts
        .iter()
        .map(|t| PackedNumber::parse(t).expect("a number"))
        .collect();
    let mut rng = SplitMix64::new(0x5EED);
    let picks: Vec<usize> = (0..PICKS_COUNT)
        .map(|_| rng.below(NUMBERS_COUNT) as usize)
        .collect();
    let mut map: NumberMap<u32> = NumberMap::default();
    let mut hash: HashMap<PackedNumber, u32> = HashMap::new();
    for n in &packed {
        *map.entry(*n) = 1;
        hash.insert(*n, 1);
    }
    let mut health = NumberHealth::new();
    for t in &texts {
        health.on_lease(t, Pool::Domestic, UnixMillis(0));
    }
    health.take_changes();

    // Every number once, in random order (Fisher-Yates).
    let mut shuffled = packed.clone();
    for i in (1..shuffled.len()).rev() {
        shuffled.swap(i, rng.below(i as u64 + 1) as usize);
    }

    let mut g = c.benchmark_group("number_health");
    let mut at = 0;
    let mut next = move || {
        at = (at + 1) % PICKS_COUNT;
        picks[at]
    };
    g.bench_function("map_lookup", |b| {
        b.iter(|| black_box(map.get_mut(packed[next()]).map(|v| *v += 1)))
    });
    g.bench_function("hash_map_lookup", |b| {
        b.iter(|| black_box(hash.get_mut(&packed[next()]).map(|v| *v += 1)))
    });
    let mut now = 0;
    g.bench_function("lease_and_end", |b| {
        b.iter(|| {
            let number = &texts[next()];
            now += 1;
            if now % TAKE_EVERY == 0 {
                black_box(health.take_changes());
            }
            health.on_lease(number, Pool::Domestic, UnixMillis(now));
            black_box(health.on_end(number, Pool::Domestic, Ending::Completed, UnixMillis(now)))
        })
    });
    g.finish();

    let mut g = c.benchmark_group("number_health");
    g.sample_size(10);
    g.bench_function("fill_600k", |b| {
        b.iter(|| {
            let mut map: NumberMap<u32> = NumberMap::default();
            for n in &shuffled {
                *map.entry(*n) += 1;
            }
            black_box(map.len())
        })
    });
    g.bench_function("hash_map_fill_600k", |b| {
        b.iter(|| {
            let mut hash: HashMap<PackedNumber, u32> = HashMap::new();
            for n in &shuffled {
                *hash.entry(*n).or_default() += 1;
            }
            black_box(hash.len())
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
