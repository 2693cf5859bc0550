//! Test-mode rows leave the database after the retention (7 days by
//! default): a test verification older than that is gone (404), a live one
//! of the same age stays.
//!
//! Not for: the idempotency keys' own retention (`api::idempotency`).

use super::*;
use std::time::Duration;

#[test]
fn test_rows_are_purged_after_the_retention_and_live_rows_stay() {
    let (s, clock) = Server::start_virtual(&pools(1, 1));
    let company = s.create_company("acme");
    let live = s.create_key(company);
    let test = test_key(&s, company);
    let live_id = id_of(&s.create_ok(&live, &body(RU_PHONE)));
    let test_id = id_of(&s.create_ok(&test, &body(RU_PHONE)));
    assert_eq!(s.cancel(&live, &live_id).status, 200);
    assert_eq!(s.cancel(&test, &test_id).status, 200);

    clock.advance(Duration::from_secs(6 * 86_400));
    std::thread::sleep(Duration::from_millis(2_500));
    assert_eq!(s.get(&test, &test_id).status, 200, "kept within the 7 days");

    clock.advance(Duration::from_secs(2 * 86_400));
    eventually("the test row's purge", || {
        s.get(&test, &test_id).status == 404
    });
    assert_eq!(
        s.get(&live, &live_id).status,
        200,
        "live rows are never purged"
    );
}
