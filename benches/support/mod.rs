//! What several benches build their data from.
//!
//! Not for: measuring anything (each bench file says what it measures).

use dialproof_engine::ids::VerificationId;
use dialproof_engine::time::UnixMillis;
use dialproof_engine::validate::{parse_create, CreateRequest};
use dialproof_engine::verification_start;
use dialproof_storage::{Admin, VerificationRow};
use std::path::Path;
use std::sync::OnceLock;

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

/// A typical create body. Its webhook URL is only checked for syntax (the
/// benches resolve nothing and run no webhook driver, so nothing is sent
/// to it).
pub const BODY: &[u8] = br#"{"phone":"+79123456789","webhook_url":"https://hooks.example.com/dialproof","client_ref":"order-42","info":"tariff basic","ttl_seconds":120}"#;

/// The `i`th pending verification of [`BODY`], for the company and key
/// given (rows reference both), with an id and number of its own: the row
/// the service's own create builds (`verification_start::start`, then
/// `VerificationRow::new`). The body is parsed once, not per row, so a
/// bench that builds rows in its loop does not time the parse.
pub fn pending_row(i: u64, company_id: i64, api_key_id: i64) -> VerificationRow {
    static REQUEST: OnceLock<CreateRequest> = OnceLock::new();
    let request = REQUEST.get_or_init(|| parse_create(BODY).expect("the bench body is valid"));
    let now = UnixMillis(1_800_000_000_000 + i as i64);
    let lease = (format!("+7495{:07}", i % 10_000_000), 1);
    let started = verification_start::start(request.clone(), lease, now);
    let id = VerificationId::new(now, u128::from(i)).as_str().to_owned();
    VerificationRow::new(id, company_id, api_key_id, started)
}
