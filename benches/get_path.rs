//! A GET of one verification and its 200 body, over a working set of
//! 150,000 pending verifications read in random order (as clients poll the
//! many they created, not one hot id):
//! - `held_rendered`: what the API's GET does for a pending verification:
//!   its packed record found among the held rows and rendered
//!   (`dialproof::shared::held_rows`);
//! - `held_found`: the same record found and unpacked, without the JSON:
//!   what finding one among 150,000 costs (mostly cache misses);
//! - `copy_rendered`: the same for a verification older than the held
//!   records, whose copy a first GET read from SQLite and kept (the
//!   copies' hash maps instead of the records' sorted array);
//! - `view_rendered`: what it does for one not held (ended, or created
//!   before a restart): the point read on the calling thread's own
//!   connection, the row's shown columns
//!   borrowed from SQLite's buffers, rendered straight into the body;
//! - `row_decoded_then_rendered`: the same row decoded into an owned
//!   `VerificationRow` first (thirteen strings), then rendered, as a cancel
//!   answers: the cost the GET avoids;
//! - `render_completed`: rendering alone, of a completed verification (every
//!   field set, three moments), without SQLite.
//!
//! The ids are spread as the service issues them under load (about 7.5 a
//! millisecond at uneven gaps, 80 random bits each: [`IssuedIds`]), so a
//! search guided by an id's time finds them no more easily than it would
//! in the service.
//!
//! The connection's page cache is warm after the first pass, so this is the
//! CPU of a read that does not go to the kernel; HTTP and TLS are not in it.
//!
//! Run: `cargo bench --bench get_path`. Figures go in benches/README.md.

mod support;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use dialproof::api::render;
use dialproof::shared::held_rows::{HeldCopy, HeldRows, HELD_BYTES_MAX};
use dialproof_engine::caller_evidence::{CallerEvidence, CallerIdSource, CallerIdTrust};
use dialproof_engine::ids::{VerificationId, VerificationKey};
use dialproof_engine::sip::rng::SplitMix64;
use dialproof_engine::time::UnixMillis;
use dialproof_engine::verification::Status;
use dialproof_storage::{Options, Owner, Store, VerificationRow, WriteOp};
use std::hint::black_box;
use std::sync::mpsc;
use std::time::Duration;
use support::{company_and_key, pending_row};

/// Verifications in the working set.
const ROWS: u64 = 150_000;
/// Inserts queued before waiting for the last one's commit (well under the
/// writer's queue bound).
const INSERT_CHUNK: u64 = 1_000;

/// Creates per second the ids are spread over (the order of what two cores
/// commit).
const CREATES_PER_SECOND: f64 = 7_500.0;

/// Ids and moments as the service issues them under load: gaps drawn from
/// an exponential distribution (arrivals at random), so the rate wanders
/// from one stretch to the next as it does in the service; 80 random bits
/// each. Seeded, so every run reads the same set.
struct IssuedIds {
    rng: SplitMix64,
    at_micros: f64,
}

impl IssuedIds {
    fn new() -> Self {
        IssuedIds {
            rng: SplitMix64::new(0x5EED),
            at_micros: 1.8e15,
        }
    }

    /// The `i`th pending row of [`pending_row`], with the next id.
    fn row(&mut self, i: u64, company_id: i64, api_key_id: i64) -> VerificationRow {
        // Uniform in (0, 1], so its logarithm is finite.
        let uniform = 1.0 - self.rng.unit();
        self.at_micros += -uniform.ln() * 1e6 / CREATES_PER_SECOND;
        let at = UnixMillis((self.at_micros / 1e3) as i64);
        let random = u128::from(self.rng.next_u64()) << 64 | u128::from(self.rng.next_u64());
        let mut row = pending_row(i, company_id, api_key_id);
        row.id = VerificationId::new(at, random).as_str().to_owned();
        row.created_at = at;
        row.expires_at = at.plus_seconds(row.ttl_seconds);
        row
    }
}

/// A store holding [`ROWS`] verifications of one company's live key, each
/// also held in `held` as the commit consumer would hold it, and their ids.
fn working_set(db: &std::path::Path, held: &HeldRows) -> (Store, Owner, Vec<String>) {
    let (company_id, key_id) = company_and_key(db);
    let store = Store::open(db, Options::default()).expect("store");
    let mut ids = Vec::with_capacity(ROWS as usize);
    let mut issued = IssuedIds::new();
    for chunk in 0..ROWS / INSERT_CHUNK {
        let (tx, rx) = mpsc::channel();
        for i in chunk * INSERT_CHUNK..(chunk + 1) * INSERT_CHUNK {
            let row = issued.row(i, company_id, key_id);
            held.created(VerificationKey::parse(&row.id).expect("an issued id"), &row);
            ids.push(row.id.clone());
            let tx = tx.clone();
            let reply = Box::new(move |r: Result<_, _>| {
                let _ = tx.send(r.is_ok());
            });
            store
                .submit(WriteOp::InsertVerification {
                    keyed: None,
                    row,
                    reply,
                })
                .expect("queue has room");
        }
        drop(tx);
        assert!(rx.iter().all(|ok| ok), "every insert commits");
    }
    let owner = Owner {
        company_id,
        livemode: true,
    };
    (store, owner, ids)
}

/// Indexes into the ids in a fixed pseudo-random order (xorshift), so every
/// run reads the same sequence.
struct Order(u64);

impl Order {
    fn next(&mut self, len: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % len as u64) as usize
    }
}

fn bench_get(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    // Twice the service's bound, so that all 150,000 are held: the service
    // holds about 95,000 of this shape, so this search is over more
    // records than any it makes, and the figures compare with those
    // measured before the bound was halved.
    let held = HeldRows::with_bytes(2 * HELD_BYTES_MAX);
    let (store, owner, ids) = working_set(&dir.path().join("bench.db"), &held);
    let mut g = c.benchmark_group("get_by_id_of_150k");
    g.throughput(Throughput::Elements(1));
    g.measurement_time(Duration::from_secs(5));
    let mut order = Order(0x9E37_79B9_7F4A_7C15);
    assert_eq!(
        held.count(),
        ROWS as usize,
        "the held rows hold the working set"
    );
    let keys: Vec<VerificationKey> = ids
        .iter()
        .map(|id| VerificationKey::parse(id).expect("an issued id"))
        .collect();
    g.bench_function("held_rendered", |b| {
        b.iter(|| {
            let key = keys[order.next(keys.len())];
            black_box(held.render(key, owner, render).expect("held"))
        })
    });
    g.bench_function("held_found", |b| {
        b.iter(|| {
            let key = keys[order.next(keys.len())];
            black_box(held.render(key, owner, |v| v.ttl_seconds).expect("held"))
        })
    });
    let copies = copies_read_once(&store, owner, &keys, &ids);
    g.bench_function("copy_rendered", |b| {
        b.iter(|| {
            let key = keys[order.next(keys.len())];
            black_box(copies.render(key, owner, render).expect("a copy"))
        })
    });
    g.bench_function("view_rendered", |b| {
        b.iter(|| {
            let id = &ids[order.next(ids.len())];
            let body = store.read_here(|r| r.owned_verification_view(id, owner, render));
            black_box(body.expect("read").expect("found"))
        })
    });
    g.bench_function("row_decoded_then_rendered", |b| {
        b.iter(|| {
            let id = &ids[order.next(ids.len())];
            let row = store.read_here(|r| r.owned_verification(id, owner));
            black_box(render(row.expect("read").expect("found").view()))
        })
    });
    let completed = completed_row();
    g.bench_function("render_completed", |b| {
        b.iter(|| black_box(render(black_box(&completed).view())))
    });
    g.finish();
    store.shutdown();
}

/// Held rows with no records but a copy of each verification, read once
/// from SQLite and kept as the API's GET keeps it: what answers a client
/// polling verifications older than the held records.
fn copies_read_once(
    store: &Store,
    owner: Owner,
    keys: &[VerificationKey],
    ids: &[String],
) -> HeldRows {
    let copies = HeldRows::default();
    for (key, id) in keys.iter().zip(ids) {
        let mark = copies.read_mark(*key);
        let copy = store.read_here(|r| {
            r.owned_verification_view(id, owner, |view| HeldCopy::of(*key, owner, &view))
        });
        let copy = copy
            .expect("read")
            .expect("found")
            .expect("pending and plain");
        copies.keep_read(copy, mark);
    }
    assert_eq!(copies.count(), keys.len(), "a copy of each verification");
    copies
}

/// A verification a call completed, with every field the body shows set.
fn completed_row() -> VerificationRow {
    let mut row = pending_row(7, 1, 1);
    row.status = Status::Completed;
    row.completed_at = Some(row.created_at.plus_seconds(9));
    row.caller_id = "+79161234567".into();
    row.caller_evidence = Some(CallerEvidence {
        source: CallerIdSource::PAssertedIdentity,
        trust: CallerIdTrust::Asserted,
    });
    row
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .measurement_time(Duration::from_secs(5))
        .warm_up_time(Duration::from_secs(2));
    targets = bench_get
}
criterion_main!(benches);
