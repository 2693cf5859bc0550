//! The lock-free lease table against a mutex baseline, in the same run:
//! - `single_thread`: one lease + release pair on a 10k-number pool held 50%
//!   leased (a seeded random half, the same half for both);
//! - `two_threads`: the same pair on both threads at once on one table; the
//!   time is per iteration, in which each thread does one pair;
//! - `no_dedicated_fast_path`: the table only, for a company without
//!   dedicated numbers, on a table without dedications vs one where 20 other
//!   companies have dedicated numbers (must not be slower).
//!
//! The baseline ([`MutexTable`]) has the same semantics: issuable and leased
//! flags in `Vec<bool>`, a generation per slot, the same next-fit cursor, all
//! under one `parking_lot::Mutex`.
//!
//! Run: `cargo bench --bench lease_table` (about 30 s). Figures go in
//! benches/README.md. On a loaded or 2-core machine the two-thread case is noisy.

use criterion::{criterion_group, criterion_main, Criterion};
use dialproof_engine::lease::{Lease, LeaseTable, LineSpec, NumberSpec, Slot};
use dialproof_engine::pool::Pool;
use dialproof_engine::CompanyId;
use parking_lot::Mutex;
use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

const POOL_NUMBERS_COUNT: usize = 10_000;
const OCCUPANCY_SEED: u64 = 0x9E37_79B9_7F4A_7C15;
const COMPANY: CompanyId = 21;
/// Companies 2, 4, .., 40 get dedicated numbers; [`COMPANY`] sits among
/// them so its lookup is a real (failing) binary search.
const DEDICATED_COMPANIES_COUNT: i64 = 20;
const DEDICATED_PER_COMPANY_COUNT: usize = 10;

/// The baseline: the table's semantics under one lock.
struct MutexTable {
    inner: Mutex<MutexInner>,
}

struct MutexInner {
    issuable: Vec<bool>,
    leased: Vec<bool>,
    generations: Vec<u32>,
    cursor: usize,
}

impl MutexTable {
    fn new(numbers_count: usize) -> MutexTable {
        MutexTable {
            inner: Mutex::new(MutexInner {
                issuable: vec![true; numbers_count],
                leased: vec![false; numbers_count],
                generations: vec![0; numbers_count],
                cursor: 0,
            }),
        }
    }

    /// Next-fit from the cursor, wrapping around, like the table.
    fn lease(&self) -> Option<Lease> {
        let mut inner = self.inner.lock();
        let count = inner.leased.len();
        if count == 0 {
            return None;
        }
        let start = inner.cursor % count;
        let index = (start..count)
            .chain(0..start)
            .find(|&i| inner.issuable[i] && !inner.leased[i])?;
        inner.leased[index] = true;
        inner.generations[index] = inner.generations[index].wrapping_add(1);
        inner.cursor = index + 1;
        Some(Lease {
            slot: Slot(index as u32),
            generation: inner.generations[index],
        })
    }

    fn release(&self, lease: Lease) -> bool {
        let mut inner = self.inner.lock();
        let index = lease.slot.0 as usize;
        if inner.leased.get(index) == Some(&true) && inner.generations[index] == lease.generation {
            inner.leased[index] = false;
            true
        } else {
            false
        }
    }
}

/// The operations both contenders offer to the measured loops.
trait Leasing: Sync {
    fn lease_one(&self) -> Option<Lease>;
    fn release_one(&self, lease: Lease) -> bool;
}

impl Leasing for LeaseTable {
    fn lease_one(&self) -> Option<Lease> {
        self.lease(Pool::Domestic, COMPANY)
    }
    fn release_one(&self, lease: Lease) -> bool {
        self.release(lease)
    }
}

impl Leasing for MutexTable {
    fn lease_one(&self) -> Option<Lease> {
        self.lease()
    }
    fn release_one(&self, lease: Lease) -> bool {
        self.release(lease)
    }
}

fn shared_numbers() -> Vec<NumberSpec> {
    (0..POOL_NUMBERS_COUNT)
        .map(|i| NumberSpec {
            number: format!("+7900{i:07}"),
            pool: Pool::Domestic,
            line: 0,
            active: true,
            dedicated_to: None,
        })
        .collect()
}

fn lease_table(with_dedications: bool) -> LeaseTable {
    let mut numbers = shared_numbers();
    if with_dedications {
        for company in 1..=DEDICATED_COMPANIES_COUNT {
            for i in 0..DEDICATED_PER_COMPANY_COUNT {
                for pool in Pool::ALL {
                    numbers.push(NumberSpec {
                        number: format!("+{}{company:03}{i:05}", pool.index() + 1),
                        pool,
                        line: 0,
                        active: true,
                        dedicated_to: Some(company * 2),
                    });
                }
            }
        }
    }
    let lines = vec![LineSpec {
        active: true,
        up: true,
    }];
    LeaseTable::new(lines, numbers).expect("valid bench table")
}

/// Leases the whole pool, then releases a seeded random half: the same
/// slots for every contender, so they search the same gaps. Returns the
/// contender with its held leases (kept to the end of the benchmark).
fn half_full<T: Leasing>(table: T) -> (T, Vec<Lease>) {
    let mut leases: Vec<Lease> = std::iter::from_fn(|| table.lease_one()).collect();
    assert_eq!(
        leases.len(),
        POOL_NUMBERS_COUNT,
        "only the shared pool issues"
    );
    let mut state = OCCUPANCY_SEED;
    leases.retain(|lease| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        if state & 1 == 0 {
            assert!(table.release_one(*lease));
            false
        } else {
            true
        }
    });
    (table, leases)
}

fn lease_release_pair<T: Leasing>(table: &T) {
    let lease = table.lease_one().expect("half the pool is free");
    assert!(table.release_one(black_box(lease)));
}

fn single_thread(c: &mut Criterion) {
    let (table, _held_table) = half_full(lease_table(false));
    let (mutex, _held_mutex) = half_full(MutexTable::new(POOL_NUMBERS_COUNT));
    let mut group = c.benchmark_group("single_thread_lease_release_10k_50pct");
    group.bench_function("lease_table", |b| b.iter(|| lease_release_pair(&table)));
    group.bench_function("mutex_baseline", |b| b.iter(|| lease_release_pair(&mutex)));
    group.finish();
}

/// Each iteration: both threads do one pair. The calling thread is one of
/// the two, so the clock covers only the work after both are ready.
fn two_threads_time<T: Leasing>(table: &T, iters: u64) -> Duration {
    let ready = Barrier::new(2);
    std::thread::scope(|scope| {
        let helper = scope.spawn(|| {
            ready.wait();
            for _ in 0..iters {
                lease_release_pair(table);
            }
        });
        ready.wait();
        let start = Instant::now();
        for _ in 0..iters {
            lease_release_pair(table);
        }
        helper.join().expect("bench thread");
        start.elapsed()
    })
}

fn two_threads(c: &mut Criterion) {
    let (table, _held_table) = half_full(lease_table(false));
    let (mutex, _held_mutex) = half_full(MutexTable::new(POOL_NUMBERS_COUNT));
    let mut group = c.benchmark_group("two_threads_lease_release_10k_50pct");
    group.bench_function("lease_table", |b| {
        b.iter_custom(|iters| two_threads_time(&table, iters))
    });
    group.bench_function("mutex_baseline", |b| {
        b.iter_custom(|iters| two_threads_time(&mutex, iters))
    });
    group.finish();
}

fn no_dedicated_fast_path(c: &mut Criterion) {
    let (plain, _held_plain) = half_full(lease_table(false));
    let (dedicated, _held_dedicated) = half_full(lease_table(true));
    let mut group = c.benchmark_group("no_dedicated_company_lease_release_10k_50pct");
    group.bench_function("table_without_dedications", |b| {
        b.iter(|| lease_release_pair(&plain))
    });
    group.bench_function("table_with_others_dedications", |b| {
        b.iter(|| lease_release_pair(&dedicated))
    });
    group.finish();
}

fn config() -> Criterion {
    // 6 benchmarks of ~3.5 s each (warm-up, measurement, analysis).
    Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_millis(700))
        .measurement_time(Duration::from_secs(2))
}

criterion_group! {
    name = benches;
    config = config();
    targets = single_thread, two_threads, no_dedicated_fast_path
}
criterion_main!(benches);
