//! A restart with more pending verifications than any fixed queue holds
//! (issue 12): the service must come up, serve, and expire what ran out
//! while it was down, however many verifications are pending; and an expiry
//! the writer fails is tried again, never dropped.
//!
//! The backlog is written straight into the binary's database through the
//! storage crate (creating 70,000 verifications over HTTPS would take far
//! longer and hit the rate limits), while the service is stopped.
//!
//! Not for: one SIGKILL's guarantees (`super::restart`).

use crate::support::*;
use dialproof_engine::ids::VerificationId;
use dialproof_engine::pool::Pool;
use dialproof_engine::time::UnixMillis;
use dialproof_engine::verification::Status;
use dialproof_storage::{Admin, KeyRow, Options, StorageError, Store, VerificationRow, WriteOp};
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

/// More than the 65,536 expiries the old bounded channel took: the size that
/// kept the service from starting.
const FUTURE_PENDING: u64 = 70_000;
/// Pending verifications whose TTL ran out while the service was down.
const PAST_PENDING: u64 = 1_000;
/// Numbers per pool: enough for every seeded lease plus some to spare.
const NUMBERS_PER_POOL: u64 = (FUTURE_PENDING + PAST_PENDING) / 2 + 1_000;
/// How long the expiries of the past-due verifications may take once the
/// service is up (they are due at once; this only bounds a slow machine).
const EXPIRED_WAIT: Duration = Duration::from_secs(30);
/// The longest the seeding waits for one commit reply.
const REPLY_WAIT: Duration = Duration::from_secs(30);

/// One pending verification of a seeded backlog, on the `n`th dial number
/// of the pools (domestic first) with its first lease; `past`: its TTL ran
/// out while the service was down.
fn seeded_row(n: u64, key: &KeyRow, now: UnixMillis, past: bool) -> VerificationRow {
    let ttl_seconds = 600;
    // Past-due rows were created 20 minutes ago; the others a moment ago.
    let created_at = if past {
        now.plus_millis(-1_200_000)
    } else {
        now.plus_millis(-1_000)
    };
    let (dial_number, pool) = if n < NUMBERS_PER_POOL {
        (format!("+{}", DOMESTIC_START + n), Pool::Domestic)
    } else {
        let i = n - NUMBERS_PER_POOL;
        (format!("+{}", INTERNATIONAL_START + i), Pool::International)
    };
    VerificationRow {
        id: VerificationId::new(created_at, u128::from(n) << 16 | 0xbeef)
            .as_str()
            .to_owned(),
        company_id: key.company_id,
        api_key_id: key.id,
        phone: RU_PHONE.to_owned(),
        dial_number,
        pool,
        client_ref: format!("backlog-{n}"),
        info: String::new(),
        // A loopback address: the webhook guard refuses it, so the expired
        // webhooks of this test never leave the machine.
        webhook_url: "https://127.0.0.1:9/hook".to_owned(),
        ttl_seconds,
        status: Status::Pending,
        created_at,
        expires_at: created_at.plus_seconds(ttl_seconds),
        completed_at: None,
        caller_id: String::new(),
        lease_generation: 1,
        failure_reason: None,
        idempotency_key: None,
        livemode: true,
        caller_evidence: None,
    }
}

/// Stops `s` and returns its database and its one API key.
fn stop_for_seeding(s: &mut Server) -> (PathBuf, KeyRow) {
    assert!(s.stop().success());
    let db = s.data_dir.join("dialproof.db");
    let key = Admin::open(&db)
        .expect("admin")
        .list_keys(None)
        .expect("keys")
        .remove(0);
    (db, key)
}

/// Inserts `rows` through the storage crate's writer (group commit), waiting
/// when its queue is full, and returns once every one is committed.
fn seed(db: &std::path::Path, rows: Vec<VerificationRow>) {
    let store = Store::open(db, Options::default()).expect("opening the store");
    let (tx, rx) = mpsc::channel();
    let count = rows.len();
    for row in rows {
        let mut op = Some(row);
        while let Some(row) = op.take() {
            let tx = tx.clone();
            let submitted = store.submit(WriteOp::InsertVerification {
                keyed: None,
                row: row.clone(),
                reply: Box::new(move |r| {
                    let _ = tx.send(r);
                }),
            });
            match submitted {
                Ok(()) => {}
                Err(StorageError::QueueFull) => {
                    op = Some(row);
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => panic!("seeding: {e}"),
            }
        }
    }
    for _ in 0..count {
        rx.recv_timeout(REPLY_WAIT)
            .expect("insert reply")
            .expect("insert committed");
    }
    store.shutdown();
}

#[test]
fn restart_with_more_pending_than_any_queue_serves_and_expires_the_overdue() {
    let mut s = Server::with_pools(NUMBERS_PER_POOL, NUMBERS_PER_POOL);
    let token = s.new_client("acme");
    let (db, key) = stop_for_seeding(&mut s);
    let now = UnixMillis(now_millis());
    let rows: Vec<VerificationRow> = (0..FUTURE_PENDING + PAST_PENDING)
        .map(|n| seeded_row(n, &key, now, n < PAST_PENDING))
        .collect();
    let overdue: Vec<String> = rows[..3].iter().map(|r| r.id.clone()).collect();
    let live = rows.last().expect("rows").clone();
    seed(&db, rows);

    // Before the fix this start failed: recovery overflowed the expiry
    // channel and the process exited without printing READY.
    s.restart();

    let r = s.get(&token, &live.id);
    assert_eq!(r.status, 200, "{}", r.text());
    let g = r.json();
    assert_eq!(g["status"], "pending", "{g}");
    assert_eq!(g["dial_number"], live.dial_number.as_str(), "{g}");

    // Every overdue verification expires, and only those: the store's count
    // of pending rows comes down to exactly the live backlog. (Polled in the
    // database, not over HTTPS, to stay clear of the per-key rate limit.)
    let pending = poll(EXPIRED_WAIT, || {
        let n = pending_count(&db);
        (n == FUTURE_PENDING as usize).then_some(n)
    });
    assert_eq!(
        pending,
        Some(FUTURE_PENDING as usize),
        "pending rows now: {}; logs:\n{}",
        pending_count(&db),
        s.logs()
    );
    for id in &overdue {
        let g = s.get(&token, id).json();
        assert_eq!(g["status"], "expired", "{g}");
    }
}

#[test]
fn an_expiry_the_writer_fails_is_tried_again_not_dropped() {
    let mut s = Server::with_pools(10, 10);
    let token = s.new_client("acme");
    let (db, key) = stop_for_seeding(&mut s);
    let now = UnixMillis(now_millis());
    let rows: Vec<VerificationRow> = (0..3).map(|n| seeded_row(n, &key, now, true)).collect();
    let ids: Vec<String> = rows.iter().map(|r| r.id.clone()).collect();
    seed(&db, rows);

    // The first three writes fail: recovery's three expiries, the only
    // writes before the listeners open. Before the fix each failure was
    // only logged, and the verification stayed pending with its number
    // leased until the next restart.
    s.set_env("DIALPROOF_FAILPOINTS", "writer.op=3*error");
    s.restart();
    let pending = poll(EXPIRED_WAIT, || {
        let n = pending_count(&db);
        (n == 0).then_some(n)
    });
    assert_eq!(pending, Some(0), "logs:\n{}", s.logs());
    assert!(s.logs().contains("expiry failed; retrying"), "{}", s.logs());
    for id in &ids {
        let g = s.get(&token, id).json();
        assert_eq!(g["status"], "expired", "{g}");
    }
}

/// Pending rows as a fresh reader sees them.
fn pending_count(db: &std::path::Path) -> usize {
    dialproof_storage::Reader::open(db)
        .expect("reader")
        .pending_verifications()
        .expect("pending rows")
        .len()
}
