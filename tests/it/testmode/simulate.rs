//! What `simulate-call` answers: a withheld caller leaves the verification
//! pending; a cancelled one is not pending for a call; a live key, an
//! unknown id and another company's test verification are the same 404;
//! a bad body is a 400 in the error envelope (or a 415 for another media
//! type) and changes nothing.
//!
//! Not for: the completed flow and its webhook (`super::flow`).

use super::*;
use serde_json::json;

#[test]
fn a_withheld_caller_leaves_it_pending_and_a_cancelled_one_takes_no_call() {
    let s = Server::with_pools(1, 1);
    let company = s.create_company("acme");
    let token = test_key(&s, company);
    let id = id_of(&s.create_ok(&token, &body(RU_PHONE)));

    let r = simulate(&s, &token, &id, &json!({"caller_id": null}));
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["outcome"], "caller_withheld", "{v}");
    assert_eq!(v["verification"]["status"], "pending");
    assert_eq!(s.get(&token, &id).json()["status"], "pending");

    assert_eq!(s.cancel(&token, &id).json()["status"], "expired");
    let v = simulate(&s, &token, &id, &json!({"caller_id": "+79161234567"})).json();
    assert_eq!(v["outcome"], "no_pending_verification", "{v}");
    assert_eq!(v["verification"]["status"], "expired");
    assert_eq!(v["verification"]["caller_id_received"], "");
}

#[test]
fn a_live_key_an_unknown_id_and_another_companys_verification_are_404() {
    let s = Server::with_pools(1, 1);
    let company = s.create_company("acme");
    let live = s.create_key(company);
    let test = test_key(&s, company);
    let live_id = id_of(&s.create_ok(&live, &body(RU_PHONE)));
    let test_id = id_of(&s.create_ok(&test, &body(RU_PHONE)));
    let other = test_key(&s, s.create_company("other"));
    let call = json!({"caller_id": "+79161234567"});
    for (token, id, what) in [
        (&live, &live_id, "a live key on its own live verification"),
        (
            &live,
            &test_id,
            "a live key on its company's test verification",
        ),
        (&test, &live_id, "a test key on a live verification"),
        (&other, &test_id, "another company's test key"),
        (
            &test,
            &"ver_01ARZ3NDEKTSV4RRFFQ69G5FAV".to_owned(),
            "an unknown id",
        ),
        (&test, &"nope".to_owned(), "not an id"),
    ] {
        let r = simulate(&s, token, id, &call);
        assert_eq!(r.status, 404, "{what}: {}", r.text());
        assert_eq!(r.json(), json!({"detail": NOT_FOUND}), "{what}");
    }
    // Even with a body that would be a 400: the endpoint does not exist
    // for a live key.
    assert_eq!(
        simulate_raw(&s, &live, &live_id, b"{", "application/json").status,
        404
    );
    assert_eq!(s.get(&live, &live_id).json()["status"], "pending");
    assert_eq!(s.get(&test, &test_id).json()["status"], "pending");
}

#[test]
fn a_bad_body_is_a_400_in_the_envelope_and_changes_nothing() {
    let s = Server::with_pools(1, 1);
    let token = test_key(&s, s.create_company("acme"));
    let id = id_of(&s.create_ok(&token, &body(RU_PHONE)));
    for (raw, field) in [
        (&b"{"[..], false),
        (b"[]", false),
        (b"", false),
        (b"{}", true),
        (br#"{"caller_id": 79161234567}"#, true),
        (br#"{"caller_id": "anonymous"}"#, true),
        (br#"{"caller_id": "123"}"#, true),
    ] {
        let what = String::from_utf8_lossy(raw).into_owned();
        let r = simulate_raw(&s, &token, &id, raw, "application/json");
        assert_eq!(r.status, 400, "{what}: {}", r.text());
        let v = r.json();
        assert_eq!(v["error"]["code"], "invalid_request", "{what}: {v}");
        assert!(v["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()));
        assert_eq!(
            v["error"]["fields"]["caller_id"].is_array(),
            field,
            "{what}: a caller_id problem names the field: {v}"
        );
    }
    let r = simulate_raw(&s, &token, &id, br#"{"caller_id": null}"#, "text/plain");
    assert_eq!(r.status, 415, "{}", r.text());
    assert_eq!(s.get(&token, &id).json()["status"], "pending");
}
