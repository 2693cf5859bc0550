//! What several benches build their data from.
//!
//! Not for: measuring anything (each bench file says what it measures).

use dialproof_engine::ids::VerificationId;
use dialproof_engine::pool::Pool;
use dialproof_engine::time::UnixMillis;
use dialproof_engine::verification::Status;
use dialproof_storage::{Admin, VerificationRow};
use std::path::Path;

/// Creates a company and a live key of it in the database at `db` (a
/// verification references both), returning their ids.
pub fn company_and_key(db: &Path) -> (i64, i64) {
    let admin = Admin::open(db).expect("admin");
    let now = UnixMillis(1_800_000_000_000);
    let company = admin
        .create_company("bench", "whsec_bench", now)
        .expect("company");
    let key = admin
        .create_key(company.id, "bench", "BenchKey", "00", now)
        .expect("key");
    (company.id, key.id)
}

/// The `i`th pending verification of a typical create, for the company and
/// key given (rows reference both), with an id and number of its own.
pub fn pending_row(i: u64, company_id: i64, api_key_id: i64) -> VerificationRow {
    let now = UnixMillis(1_800_000_000_000 + i as i64);
    VerificationRow {
        id: VerificationId::new(now, u128::from(i)).as_str().to_owned(),
        company_id,
        api_key_id,
        phone: "+79123456789".into(),
        dial_number: format!("+7495{:07}", i % 10_000_000),
        pool: Pool::Domestic,
        client_ref: "order-42".into(),
        info: "tariff basic".into(),
        webhook_url: "https://hooks.example.com/dialproof".into(),
        ttl_seconds: 120,
        status: Status::Pending,
        created_at: now,
        expires_at: now.plus_seconds(120),
        completed_at: None,
        caller_id: String::new(),
        lease_generation: 1,
        failure_reason: None,
        idempotency_key: None,
        livemode: true,
        caller_evidence: None,
    }
}
