//! A client's CI run in test mode: a test key creates a verification, the
//! "user calls" through `simulate-call`, the signed webhook arrives with
//! `livemode: false`, and GET shows it completed; no SIP anywhere (the
//! README's "A first verification, in test mode").
//!
//! Not for: the other outcomes of a simulated call (`super::simulate`).

use super::*;
use crate::support::webhooks::*;
use serde_json::json;
use std::time::Duration;

#[test]
fn a_test_key_completes_a_verification_by_a_simulated_call_and_gets_the_signed_webhook() {
    let rx = Receiver::recording(Answer::Status(200));
    let (s, _clock) = Server::start_flowing(&format!("{FAST_RETRIES}{}", pools(1, 1)));
    let v = s.cli(&["company", "create", "--name", "acme"]);
    let company = v["id"].as_i64().unwrap();
    let secret = v["webhook_secret"].as_str().unwrap().to_owned();
    s.cli(&["company", "dev-urls", &company.to_string(), &rx.base_url()]);
    let token = test_key(&s, company);

    let created = s.create_ok(
        &token,
        &json!({"phone": RU_PHONE, "webhook_url": rx.url("/hook"), "client_ref": "order-7",
                "ttl_seconds": 30}),
    );
    assert_eq!(created["livemode"], false, "{created}");
    assert_eq!(created["status"], "pending");
    let dial = created["dial_number"].as_str().unwrap().to_owned();
    assert!(
        dial.starts_with(&format!("+720{company:05}")),
        "a domestic test number of the company's own range: {dial}"
    );
    assert!(
        !domestic_numbers(1).contains(&dial),
        "never a live number: {dial}"
    );
    let id = id_of(&created);

    // The user "calls" with a national number, as a domestic line would
    // receive it.
    let r = simulate(&s, &token, &id, &json!({"caller_id": "89161234567"}));
    assert_eq!(r.status, 200, "{}", r.text());
    let answer = r.json();
    assert_eq!(answer["outcome"], "completed", "{answer}");
    let after = &answer["verification"];
    assert_eq!(after["status"], "completed");
    assert_eq!(after["caller_id_received"], "+79161234567");
    assert_eq!(after["caller_id_source"], "simulated");
    assert_eq!(after["caller_id_trust"], "simulated");
    assert_eq!(after["livemode"], false);

    let hit = rx.wait_for("/hook", 1, Duration::from_secs(10)).remove(0);
    let p = hit.json();
    assert_eq!(p["type"], "verification.completed");
    assert_eq!(p["verification_id"], id.as_str());
    assert_eq!(p["caller_id"], "+79161234567");
    assert_eq!(p["dial_number"], dial.as_str());
    assert_eq!(p["client_ref"], "order-7");
    assert_eq!(p["caller_id_source"], "simulated");
    assert_eq!(p["caller_id_trust"], "simulated");
    assert_eq!(p["livemode"], false, "{p}");
    let signature = hit.header("X-Service-Signature").unwrap();
    assert!(
        python_verifies(signature, &hit.body, &secret),
        "signed with the company's own secret, like a live webhook"
    );

    let g = s.get(&token, &id).json();
    assert_eq!(g["status"], "completed");
    assert_eq!(g["caller_id_received"], "+79161234567");
    assert_eq!(g["livemode"], false);

    // A second call changes nothing and sends nothing.
    let again = simulate(&s, &token, &id, &json!({"caller_id": "+79990000000"})).json();
    assert_eq!(again["outcome"], "no_pending_verification", "{again}");
    assert_eq!(again["verification"]["caller_id_received"], "+79161234567");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(rx.hits_to("/hook").len(), 1);
}

#[test]
fn a_live_verification_says_livemode_true_in_the_object_and_the_webhook() {
    let rx = Receiver::recording(Answer::Status(200));
    let (s, clock) = Server::start_flowing(&format!("{FAST_RETRIES}{}", pools(1, 1)));
    let company = s.create_company("acme");
    s.cli(&["company", "dev-urls", &company.to_string(), &rx.base_url()]);
    let token = s.create_key(company);
    let created = s.create_ok(
        &token,
        &json!({"phone": RU_PHONE, "webhook_url": rx.url("/live"), "ttl_seconds": 30}),
    );
    assert_eq!(created["livemode"], true, "{created}");
    assert_eq!(s.get(&token, &id_of(&created)).json()["livemode"], true);
    clock.advance(Duration::from_secs(31));
    let hit = rx.wait_for("/live", 1, Duration::from_secs(10)).remove(0);
    assert_eq!(hit.json()["type"], "verification.expired");
    assert_eq!(hit.json()["livemode"], true);
}

#[test]
fn a_test_verification_expires_by_its_ttl_and_a_late_call_changes_nothing() {
    let rx = Receiver::recording(Answer::Status(200));
    let (s, clock) = Server::start_flowing(&format!("{FAST_RETRIES}{}", pools(1, 1)));
    let company = s.create_company("acme");
    s.cli(&["company", "dev-urls", &company.to_string(), &rx.base_url()]);
    let token = test_key(&s, company);
    let created = s.create_ok(
        &token,
        &json!({"phone": UK_PHONE, "webhook_url": rx.url("/expiring"), "ttl_seconds": 30}),
    );
    assert!(
        created["dial_number"]
            .as_str()
            .unwrap()
            .starts_with(&format!("+721{company:05}")),
        "an international test number: {created}"
    );
    let id = id_of(&created);
    clock.advance(Duration::from_secs(31));
    // Past expires_at, whether or not the expiry has run yet: a real call
    // to the number would find nothing pending, and so does this one.
    let late = simulate(&s, &token, &id, &json!({"caller_id": "+447911123456"})).json();
    assert_eq!(late["outcome"], "no_pending_verification", "{late}");
    let hit = rx
        .wait_for("/expiring", 1, Duration::from_secs(10))
        .remove(0);
    assert_eq!(hit.json()["type"], "verification.expired");
    assert_eq!(hit.json()["livemode"], false);
    assert_eq!(s.get(&token, &id).json()["status"], "expired");
    let after = simulate(&s, &token, &id, &json!({"caller_id": "+447911123456"})).json();
    assert_eq!(after["outcome"], "no_pending_verification");
    assert_eq!(after["verification"]["status"], "expired");
}
