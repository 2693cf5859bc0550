//! Test and live data never mix: a test key never sees, cancels or replays
//! a live verification, a live key never a test one (the same 404 as an
//! unknown id), an `Idempotency-Key` is a key per mode, and a token whose
//! kind is not its key's mode is not that key.
//!
//! Not for: the pools (`super::pools`).

use super::*;
use serde_json::json;

#[test]
fn test_and_live_keys_never_see_each_others_verifications() {
    let s = Server::with_pools(2, 2);
    let company = s.create_company("acme");
    let live = s.create_key(company);
    let test = test_key(&s, company);
    let live_id = id_of(&s.create_ok(&live, &body(RU_PHONE)));
    let test_id = id_of(&s.create_ok(&test, &body(RU_PHONE)));

    for (token, id, what) in [
        (&test, &live_id, "a test key reading a live verification"),
        (&live, &test_id, "a live key reading a test verification"),
    ] {
        let r = s.get(token, id);
        assert_eq!(r.status, 404, "{what}: {}", r.text());
        assert_eq!(r.json(), json!({"detail": NOT_FOUND}), "{what}");
        let r = s.cancel(token, id);
        assert_eq!(r.status, 404, "{what} (cancel): {}", r.text());
    }
    // Nothing was cancelled across modes.
    assert_eq!(s.get(&live, &live_id).json()["status"], "pending");
    assert_eq!(s.get(&test, &test_id).json()["status"], "pending");
    assert_eq!(s.get(&live, &live_id).json()["livemode"], true);
    assert_eq!(s.get(&test, &test_id).json()["livemode"], false);
}

#[test]
fn an_idempotency_key_is_a_key_per_mode() {
    let s = Server::with_pools(2, 2);
    let company = s.create_company("acme");
    let live = s.create_key(company);
    let test = test_key(&s, company);
    let create =
        |token: &str| s.create_keyed(token, "signup-42", body(RU_PHONE).to_string().as_bytes());
    let first_live = create(&live);
    let first_test = create(&test);
    assert_eq!(first_live.status, 201, "{}", first_live.text());
    assert_eq!(
        first_test.status,
        201,
        "the test key's first use of the key creates: {}",
        first_test.text()
    );
    assert_eq!(first_test.header("idempotent-replayed"), None);
    assert_ne!(id_of(&first_live.json()), id_of(&first_test.json()));
    assert_eq!(first_test.json()["livemode"], false);
    // Each mode replays its own answer.
    let again = create(&test);
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(id_of(&again.json()), id_of(&first_test.json()));
    let again = create(&live);
    assert_eq!(id_of(&again.json()), id_of(&first_live.json()));
}

#[test]
fn a_token_of_the_other_kind_is_not_the_key() {
    let s = Server::with_pools(1, 1);
    let company = s.create_company("acme");
    let test = test_key(&s, company);
    let live = s.create_key(company);
    let forged_live = test.replacen("svc_test_", "svc_live_", 1);
    let forged_test = live.replacen("svc_live_", "svc_test_", 1);
    for token in [&forged_live, &forged_test] {
        let r = s.create(token, &body(RU_PHONE));
        assert_eq!(r.status, 401, "{token}: {}", r.text());
        assert_eq!(r.json(), json!({"detail": INVALID_KEY}));
    }
    let listed = s.cli(&["key", "list", "--company", &company.to_string()]);
    let modes: Vec<bool> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["livemode"].as_bool().unwrap())
        .collect();
    assert_eq!(modes, [false, true], "{listed}");
    // Revoked like a live key.
    let prefix = &test["svc_test_".len().."svc_test_".len() + 8];
    s.cli(&["key", "revoke", prefix]);
    eventually("the test key's revocation", || {
        s.create(&test, &body(RU_PHONE)).status == 401
    });
}
