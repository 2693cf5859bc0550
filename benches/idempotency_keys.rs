//! Idempotency keys under constant load: the stored table's size over
//! simulated hours, with the service's own purge, stays flat at about
//! rate × retention instead of growing.
//!
//! Time is simulated (every row carries its moment; the purge is given
//! the moment keys expire before), so four hours of a constant create rate
//! run in seconds through the real writer: every create is a keyed
//! `InsertVerification` (key, fingerprint and 201 body in the same
//! transaction), and the purge is the control loop's, each simulated
//! second: `PurgeIdempotencyKeys` repeated while it deletes a full batch.
//!
//! Run: `cargo bench --bench idempotency_keys` (optionally
//! `-- RATE_PER_SECOND HOURS`). It prints the table's size every ten
//! simulated minutes and fails if, after the first retention, the size
//! leaves rate × retention by more than a minute's creates.

use dialproof_engine::idempotency::Fingerprint;
use dialproof_engine::ids::VerificationId;
use dialproof_engine::pool::Pool;
use dialproof_engine::time::UnixMillis;
use dialproof_engine::verification::Status;
use dialproof_storage::{
    Inserted, KeyedCreate, Options, Store, VerificationRow, WriteOp, PURGE_BATCH_MAX,
};
use std::sync::mpsc;

/// The shortest retention the service accepts: the plateau comes soonest.
const RETENTION_MS: i64 = 3_600_000;
const T0: i64 = 1_800_000_000_000;
/// A typical 201 body's size.
const BODY_BYTES: usize = 420;

fn row(n: u64, at: UnixMillis, company_id: i64, api_key_id: i64) -> VerificationRow {
    VerificationRow {
        id: VerificationId::new(at, u128::from(n)).into_string(),
        company_id,
        api_key_id,
        phone: "+79123456789".into(),
        dial_number: format!("+7495{:07}", n % 10_000_000),
        pool: Pool::Domestic,
        client_ref: format!("order-{n}"),
        info: String::new(),
        webhook_url: "https://hooks.example.com/dialproof".into(),
        ttl_seconds: 60,
        // Ended: the bench is about the keys, not the lease index.
        status: Status::Expired,
        created_at: at,
        expires_at: at.plus_seconds(60),
        completed_at: None,
        caller_id: String::new(),
        lease_generation: 1,
        failure_reason: None,
        idempotency_key: Some(format!("bench-{n}")),
        livemode: true,
        caller_evidence: None,
    }
}

/// One simulated second of creates, submitted together and waited for.
fn create_second(store: &Store, first: u64, rate: u64, at: UnixMillis, ids: (i64, i64)) {
    let (tx, rx) = mpsc::channel();
    for n in first..first + rate {
        let tx = tx.clone();
        let keyed = KeyedCreate {
            fingerprint: Fingerprint([7; 32]),
            response_body: "x".repeat(BODY_BYTES),
            expired_before: UnixMillis(at.0 - RETENTION_MS),
        };
        store
            .submit(WriteOp::InsertVerification {
                row: row(n, at, ids.0, ids.1),
                keyed: Some(Box::new(keyed)),
                reply: Box::new(move |r| {
                    let _ = tx.send(r);
                }),
            })
            .expect("queue has room");
    }
    drop(tx);
    for r in rx {
        assert_eq!(r.expect("commit"), Inserted::Created);
    }
}

/// The control loop's purge at `at`: batches until one is not full.
fn purge(store: &Store, at: UnixMillis) -> usize {
    let mut purged = 0;
    loop {
        let (tx, rx) = mpsc::channel();
        store
            .submit(WriteOp::PurgeIdempotencyKeys {
                expired_before: UnixMillis(at.0 - RETENTION_MS),
                reply: Box::new(move |r| {
                    let _ = tx.send(r);
                }),
            })
            .expect("queue has room");
        let n = rx.recv().expect("reply").expect("purge");
        purged += n;
        if n < PURGE_BATCH_MAX {
            return purged;
        }
    }
}

fn stored(store: &Store) -> u64 {
    let (tx, rx) = mpsc::channel();
    store.read(
        |r| r.idempotency_key_count(),
        Box::new(move |v| {
            let _ = tx.send(v);
        }),
    );
    rx.recv().expect("reply").expect("read").expect("count")
}

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let rate = args.first().copied().unwrap_or(50).clamp(1, 5_000);
    let hours = args.get(1).copied().unwrap_or(4).clamp(2, 48);
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("bench.db");
    let ids = {
        let admin = dialproof_storage::Admin::open(&db).expect("admin");
        let c = admin
            .create_company("bench", "whsec_bench", UnixMillis(T0))
            .expect("company");
        let k = admin
            .create_key(c.id, "bench", "BenchKey", "00", UnixMillis(T0))
            .expect("key");
        (c.id, k.id)
    };
    let store = Store::open(&db, Options::default()).expect("store");
    let plateau = rate * (RETENTION_MS as u64 / 1000);
    println!("{rate} keyed creates per simulated second, retention 1 h: plateau {plateau}");
    println!("{:>8} {:>10} {:>10}", "minute", "stored", "purged");
    let started = std::time::Instant::now();
    let mut worst = 0u64;
    let mut purged_total = 0;
    for second in 0..hours * 3600 {
        let at = UnixMillis(T0 + second as i64 * 1000);
        create_second(&store, second * rate, rate, at, ids);
        purged_total += purge(&store, at);
        if second % 600 == 599 {
            let size = stored(&store);
            println!("{:>8} {size:>10} {purged_total:>10}", (second + 1) / 60);
            if second >= RETENTION_MS as u64 / 1000 {
                worst = worst.max(size.abs_diff(plateau));
            }
        }
    }
    store.shutdown();
    println!(
        "after the first hour the size stayed within {worst} of {plateau} \
         ({:.1?} for {} creates)",
        started.elapsed(),
        hours * 3600 * rate
    );
    assert!(
        worst <= rate * 60,
        "the table did not stay flat: {worst} away from {plateau}"
    );
}
