//! Retry-safe creates: the `Idempotency-Key` header over HTTPS against the
//! binary. A retry with the same key and body gets the stored 201 again,
//! byte for byte, with `Idempotent-Replayed: true`, and never a second
//! number; another body is a 409 `idempotency_conflict`; keys are per
//! company; a bad header is a 400 in the envelope that takes nothing;
//! answers that took no number are not stored; a replay survives SIGTERM
//! and SIGKILL; the retention ends on the clock.
//!
//! Not for: the create itself without a key (`super::create`), or the
//! crash harness's keyed retries (`resilience::crash`).

use crate::support::*;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::time::Duration;

/// A create with `Idempotency-Key: key` (and the body as given, bytes).
fn create_keyed_raw(s: &Server, token: &str, key: &str, body: &[u8]) -> Resp {
    s.create_keyed(token, key, body)
}

fn create_keyed(s: &Server, token: &str, key: &str, body: &Value) -> Resp {
    create_keyed_raw(s, token, key, body.to_string().as_bytes())
}

/// The envelope's `error.code`, after checking the body's shape.
#[track_caller]
fn error_code(r: &Resp) -> String {
    assert_json_type(r);
    let v = r.json();
    let error = v["error"]
        .as_object()
        .unwrap_or_else(|| panic!("not the envelope: {v}"));
    assert!(
        error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{v}"
    );
    error["code"].as_str().unwrap().to_owned()
}

/// Every number of a pool of `n` is free: `n` creates succeed, one more is
/// 503 (so nothing before took or kept a number).
#[track_caller]
fn assert_free_domestic(s: &Server, token: &str, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for _ in 0..n {
        ids.push(
            s.create_ok(token, &body(RU_PHONE))["verification_id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    assert_eq!(
        s.create(token, &body(RU_PHONE)).status,
        503,
        "more than {n} free"
    );
    ids
}

#[test]
fn a_replay_is_the_first_201_byte_for_byte_and_takes_no_number() {
    let s = Server::with_pools(2, 0);
    let token = s.new_client("acme");
    let first = create_keyed_raw(
        &s,
        &token,
        "order-42",
        br#"{"phone":"+79123456789","webhook_url":"https://93.184.216.34/hook","info":"tariff A"}"#,
    );
    assert_eq!(first.status, 201, "{}", first.text());
    assert_eq!(first.header("idempotent-replayed"), None);
    // The same request with other whitespace, another field order, an
    // escape and a default sent explicitly: the same fingerprint.
    let again = create_keyed_raw(
        &s,
        &token,
        "order-42",
        br#"{ "info": "tariff \u0041",  "client_ref": "", "webhook_url": "https://93.184.216.34/hook",
             "phone": "+79123456789" }"#,
    );
    assert_eq!(again.status, 201, "{}", again.text());
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(
        again.body, first.body,
        "a replay must repeat the body byte for byte"
    );
    assert_eq!(again.header("location"), first.header("location"));
    // The key's form in quotes (a Structured Field string) is the same key.
    let quoted = create_keyed_raw(&s, &token, "\"order-42\"", &first_body_request());
    assert_eq!(quoted.status, 201);
    assert_eq!(quoted.body, first.body);
    // The replay shows the verification as it was created, whatever it
    // became since; GET shows its state.
    let id = first.json()["verification_id"].as_str().unwrap().to_owned();
    assert_eq!(s.cancel(&token, &id).status, 200);
    let after_cancel = create_keyed_raw(&s, &token, "order-42", &first_body_request());
    assert_eq!(after_cancel.body, first.body);
    assert_eq!(s.get(&token, &id).json()["status"], "expired");
    // Both numbers are free again (the cancel released the only one
    // taken): the replays took none.
    assert_free_domestic(&s, &token, 2);
}

fn first_body_request() -> Vec<u8> {
    br#"{"phone":"+79123456789","webhook_url":"https://93.184.216.34/hook","info":"tariff A"}"#
        .to_vec()
}

#[test]
fn the_same_key_with_another_body_is_a_409_idempotency_conflict() {
    let s = Server::with_pools(2, 0);
    let token = s.new_client("acme");
    assert_eq!(create_keyed(&s, &token, "k1", &body(RU_PHONE)).status, 201);
    for other in [
        body("+79123456780"),
        json!({"phone": RU_PHONE, "webhook_url": WEBHOOK, "ttl_seconds": 61}),
        json!({"phone": RU_PHONE, "webhook_url": WEBHOOK, "client_ref": "x"}),
    ] {
        let r = create_keyed(&s, &token, "k1", &other);
        assert_eq!(r.status, 409, "{other}: {}", r.text());
        assert_eq!(error_code(&r), "idempotency_conflict");
        assert_eq!(r.header("idempotent-replayed"), None);
    }
    // Only the first create's number is taken.
    assert_free_domestic(&s, &token, 1);
}

#[test]
fn keys_are_scoped_per_company() {
    let s = Server::with_pools(2, 0);
    let a = s.new_client("a");
    let b = s.new_client("b");
    let ra = create_keyed(&s, &a, "shared-key", &body(RU_PHONE));
    let rb = create_keyed(&s, &b, "shared-key", &body(RU_PHONE));
    assert_eq!(
        (ra.status, rb.status),
        (201, 201),
        "{} {}",
        ra.text(),
        rb.text()
    );
    assert_ne!(ra.json()["verification_id"], rb.json()["verification_id"]);
    assert_eq!(rb.header("idempotent-replayed"), None);
    // And each company's retry replays its own.
    let again = create_keyed(&s, &b, "shared-key", &body(RU_PHONE));
    assert_eq!(again.body, rb.body);
}

#[test]
fn a_bad_header_is_a_400_in_the_envelope_after_authentication_and_takes_nothing() {
    let s = Server::with_pools(1, 0);
    let token = s.new_client("acme");
    let auth = format!("Bearer {token}");
    let json_type = ("Content-Type", "application/json");
    let payload = body(RU_PHONE).to_string();
    let long = "k".repeat(256);
    let cases: Vec<(Vec<(&str, &str)>, &str)> = vec![
        (
            vec![("Idempotency-Key", "")],
            "Idempotency-Key must not be empty.",
        ),
        (
            vec![("Idempotency-Key", &long)],
            "Idempotency-Key must be at most 255 characters.",
        ),
        (
            vec![("Idempotency-Key", "two words")],
            "Idempotency-Key may contain only visible ASCII characters (0x21 to 0x7E).",
        ),
        (
            vec![("Idempotency-Key", "ключ")],
            "Idempotency-Key may contain only visible ASCII characters (0x21 to 0x7E).",
        ),
        (
            vec![("Idempotency-Key", "a"), ("Idempotency-Key", "a")],
            "Idempotency-Key must be sent once.",
        ),
        (
            vec![("Idempotency-Key", "\"open")],
            "Idempotency-Key in double quotes must be one well-formed quoted string.",
        ),
    ];
    for (extra, message) in cases {
        let mut headers = vec![("Authorization", auth.as_str()), json_type];
        headers.extend(extra.iter().copied());
        let r = s.request("POST", COLLECTION, &headers, payload.as_bytes());
        assert_eq!(r.status, 400, "{extra:?}: {}", r.text());
        assert_eq!(
            r.json(),
            json!({"error": {
                "code": "invalid_request",
                "message": "The Idempotency-Key header is not valid.",
                "fields": {"Idempotency-Key": [message]},
            }}),
            "{extra:?}"
        );
    }
    // Authentication comes first: a bad token with a bad key is the 401.
    let r = s.request(
        "POST",
        COLLECTION,
        &[
            ("Authorization", "Bearer nope"),
            json_type,
            ("Idempotency-Key", ""),
        ],
        payload.as_bytes(),
    );
    assert_eq!(r.status, 401);
    // Nothing was taken: the one number is free.
    assert_free_domestic(&s, &token, 1);
}

#[test]
fn answers_that_took_no_number_are_not_stored_so_a_retry_runs_again() {
    let s = Server::with_pools(1, 0);
    let token = s.new_client("acme");
    // A 400 for the body is not stored: the same key then works.
    let bad = create_keyed(&s, &token, "retry-me", &json!({"phone": "123"}));
    assert_eq!(bad.status, 400);
    let holder = s.create_ok(&token, &body(RU_PHONE));
    // No number: 503, not stored.
    let r = create_keyed(&s, &token, "retry-me", &body(RU_PHONE));
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(r.json()["error"], "no_dial_number_available");
    // Once a number frees, the same key creates.
    let id = holder["verification_id"].as_str().unwrap();
    assert_eq!(s.cancel(&token, id).status, 200);
    let created = create_keyed(&s, &token, "retry-me", &body(RU_PHONE));
    assert_eq!(created.status, 201, "{}", created.text());
    assert_eq!(created.header("idempotent-replayed"), None);
    let replay = create_keyed(&s, &token, "retry-me", &body(RU_PHONE));
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    assert_eq!(replay.body, created.body);
}

#[test]
fn sixteen_concurrent_retries_of_one_key_take_exactly_one_number() {
    let s = Server::with_pools(3, 0);
    let token = s.new_client("acme");
    let answers: Vec<Resp> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..16)
            .map(|_| scope.spawn(|| create_keyed(&s, &token, "burst", &body(RU_PHONE))))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut ids = HashSet::new();
    let mut created = 0;
    for r in &answers {
        match r.status {
            201 => {
                if r.header("idempotent-replayed").is_none() {
                    created += 1;
                }
                ids.insert(r.json()["verification_id"].as_str().unwrap().to_owned());
            }
            409 => {
                assert_eq!(error_code(r), "conflict");
                assert_eq!(r.header("retry-after"), Some("1"));
            }
            other => panic!("unexpected {other}: {}", r.text()),
        }
    }
    assert_eq!(created, 1, "exactly one of the burst creates");
    // Those told to retry get the one verification.
    let retried = poll(Duration::from_secs(10), || {
        let r = create_keyed(&s, &token, "burst", &body(RU_PHONE));
        (r.status == 201).then(|| r.json()["verification_id"].as_str().unwrap().to_owned())
    })
    .expect("the retry replays");
    ids.insert(retried);
    assert_eq!(ids.len(), 1, "one verification for one key: {ids:?}");
    // Two of the three numbers are still free.
    assert_free_domestic(&s, &token, 2);
}

#[test]
fn get_and_cancel_ignore_the_header() {
    let s = Server::with_pools(1, 0);
    let token = s.new_client("acme");
    let id = s.create_ok(&token, &body(RU_PHONE))["verification_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let auth = format!("Bearer {token}");
    let headers = [("Authorization", auth.as_str()), ("Idempotency-Key", "")];
    let r = s.request("GET", &format!("{COLLECTION}{id}/"), &headers, b"");
    assert_eq!(r.status, 200, "{}", r.text());
    let r = s.request("POST", &format!("{COLLECTION}{id}/cancel/"), &headers, b"");
    assert_eq!(r.status, 200, "{}", r.text());
}

/// A replay after a restart is read from the database: through the 503
/// path when the verification still holds the only number, through the
/// insert's own transaction when a number is free.
#[track_caller]
fn assert_replays_after_restart(s: &mut Server, token: &str, restart: impl Fn(&mut Server)) {
    let only = create_keyed(s, token, "survivor", &body(RU_PHONE));
    assert_eq!(only.status, 201, "{}", only.text());
    restart(s);
    let again = create_keyed(s, token, "survivor", &body(RU_PHONE));
    assert_eq!(again.status, 201, "{}", again.text());
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(again.body, only.body);
    let conflict = create_keyed(s, token, "survivor", &body(UK_PHONE));
    assert_eq!(conflict.status, 409);
    assert_eq!(error_code(&conflict), "idempotency_conflict");
}

#[test]
fn a_replay_survives_sigterm_and_sigkill() {
    // One domestic number: after the restart the verification still holds
    // it, so the retry finds no number and must read the key.
    let mut s = Server::with_pools(1, 1);
    let token = s.new_client("acme");
    assert_replays_after_restart(&mut s, &token, |s| {
        s.stop();
        s.restart();
    });
    let mut s = Server::with_pools(1, 1);
    let token = s.new_client("acme");
    assert_replays_after_restart(&mut s, &token, |s| {
        s.kill();
        s.restart();
    });
    // Three numbers: a free one is leased for the retry, the insert finds
    // the key stored and gives the number back.
    let mut s = Server::with_pools(3, 1);
    let token = s.new_client("acme");
    assert_replays_after_restart(&mut s, &token, |s| {
        s.kill();
        s.restart();
    });
    assert_free_domestic(&s, &token, 2);
}

#[test]
fn a_create_whose_commit_is_unknown_resolves_to_that_verification() {
    // The writer stores every batch but reports a failure, as when an
    // acknowledgement is lost: the client sees a 500 and retries.
    let mut s = Server::prepare(&pools(3, 0));
    s.set_env("DIALPROOF_FAILPOINTS", "writer.after_commit=error");
    s.launch();
    let token = s.new_client("acme");
    let lost = create_keyed(&s, &token, "lost-ack", &body(RU_PHONE));
    assert_eq!(lost.status, 500, "{}", lost.text());
    // The retry gets the verification that was stored, never a second one.
    let retry = poll(Duration::from_secs(5), || {
        let r = create_keyed(&s, &token, "lost-ack", &body(RU_PHONE));
        (r.status == 201).then_some(r)
    })
    .expect("the retry is answered with the stored verification");
    assert_eq!(retry.header("idempotent-replayed"), Some("true"));
    let id = retry.json()["verification_id"].as_str().unwrap().to_owned();
    // And after a restart without the fault, from the database.
    s.set_env("DIALPROOF_FAILPOINTS", "");
    s.kill();
    s.restart();
    let again = create_keyed(&s, &token, "lost-ack", &body(RU_PHONE));
    assert_eq!(again.status, 201, "{}", again.text());
    assert_eq!(again.json()["verification_id"], id.as_str());
    assert_eq!(s.get(&token, &id).json()["status"], "pending");
}

#[test]
fn the_retention_ends_on_the_clock_and_expired_keys_are_purged() {
    let (s, clock) = Server::start_virtual(&format!(
        "[api]\nidempotency_key_hours = 1\n\n{}",
        pools(2, 0)
    ));
    let token = s.new_client("acme");
    let first = create_keyed(&s, &token, "hourly", &body(RU_PHONE));
    assert_eq!(first.status, 201);
    let other = create_keyed(&s, &token, "never-retried", &body(RU_PHONE));
    assert_eq!(other.status, 201);
    clock.advance(Duration::from_secs(59 * 60));
    let replay = create_keyed(&s, &token, "hourly", &body(RU_PHONE));
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    // Past the hour the key is unknown again: a new verification (the old
    // ones expired long ago and gave their numbers back; the expiry thread
    // acts on the jump within about half a second).
    clock.advance(Duration::from_secs(61));
    let first_id = first.json()["verification_id"].as_str().unwrap().to_owned();
    let ended = poll(Duration::from_secs(10), || {
        (s.get(&token, &first_id).json()["status"] == "expired").then_some(())
    });
    assert!(ended.is_some(), "the first verification did not expire");
    let fresh = create_keyed(&s, &token, "hourly", &body(RU_PHONE));
    assert_eq!(fresh.status, 201, "{}", fresh.text());
    assert_eq!(fresh.header("idempotent-replayed"), None);
    assert_ne!(
        fresh.json()["verification_id"],
        first.json()["verification_id"]
    );
    // The control loop purges the stored key that was never retried.
    let db = s.data_dir.join("dialproof.db");
    let stored = |key: &str| -> i64 {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.query_row(
            "SELECT count(*) FROM idempotency_keys WHERE key = ?1",
            [key],
            |r| r.get(0),
        )
        .unwrap()
    };
    let purged = poll(Duration::from_secs(10), || {
        (stored("never-retried") == 0).then_some(())
    });
    assert!(purged.is_some(), "the expired key was not purged");
    assert_eq!(stored("hourly"), 1, "the re-created key is stored again");
}
