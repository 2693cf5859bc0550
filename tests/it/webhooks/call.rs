//! The whole flow with a real call: sipp plays the provider's gateway and
//! calls the leased number; the client's receiver gets
//! `verification.completed` with the caller's number within milliseconds,
//! signed; the TTL passing afterwards sends nothing more (never both
//! `completed` and `expired`), and a cancel after the call changes nothing.
//! The service runs in process on a clock that flows with real time and
//! jumps past the TTL (`crate::support::virtual_time`), so nothing waits 30 s.
//!
//! Not for: retries and the delivery log (`webhooks::delivery`).

use crate::support::sip::*;
use crate::support::webhooks::*;
use crate::support::*;
use serde_json::json;
use std::time::Duration;

#[test]
fn a_call_sends_one_signed_completed_webhook_and_nothing_after() {
    let rx = Receiver::recording(Answer::Status(200));
    let (s, clock) = Server::start_flowing(&format!(
        "{FAST_RETRIES}{}",
        sip_config(&trusted_line(5, 603))
    ));
    let v = s.cli(&["company", "create", "--name", "acme"]);
    let company = v["id"].as_i64().unwrap();
    let secret = v["webhook_secret"].as_str().unwrap().to_owned();
    s.cli(&["company", "dev-urls", &company.to_string(), &rx.base_url()]);
    let token = s.create_key(company);
    let created = s.create_ok(
        &token,
        &json!({"phone": RU_PHONE, "webhook_url": rx.url("/hook"), "client_ref": "order-7",
                "info": "тариф A", "ttl_seconds": 30}),
    );
    let id = created["verification_id"].as_str().unwrap().to_owned();
    s.create_ok(
        &token,
        &json!({"phone": RU_PHONE, "webhook_url": rx.url("/uncalled"), "ttl_seconds": 30}),
    );
    let dial = created["dial_number"].as_str().unwrap().to_owned();

    call_once(&s, &dial);

    let hit = rx.wait_for("/hook", 1, Duration::from_secs(10)).remove(0);
    let p = hit.json();
    assert_eq!(p["type"], "verification.completed");
    assert_eq!(p["verification_id"], id.as_str());
    assert_eq!(p["caller_id"], "+79161234567");
    assert_eq!(p["phone"], RU_PHONE);
    assert_eq!(p["dial_number"], dial.as_str());
    assert_eq!(p["client_ref"], "order-7");
    assert_eq!(p["info"], "тариф A");
    assert_eq!(p["caller_id_source"], "from");
    assert_eq!(p["caller_id_trust"], "unverified");
    assert_eq!(p["livemode"], true);
    assert_eq!(p.as_object().unwrap().len(), 11, "{p}");
    let call_ms = parse_utc(p["completed_at"].as_str().unwrap());
    let latency_ms = hit.at_ms + clock.ahead_ms() - call_ms;
    eprintln!("call to webhook received: {latency_ms} ms");
    assert!(
        latency_ms < 1000,
        "the spec allows 1-3 s; we aim far lower: {latency_ms} ms"
    );
    let signature = hit.header("X-Service-Signature").unwrap();
    assert!(python_verifies(signature, &hit.body, &secret));

    // The same as GET shows.
    let g = s.get(&token, &id).json();
    assert_eq!(g["status"], "completed");
    assert_eq!(parse_utc(g["completed_at"].as_str().unwrap()), call_ms);
    // A cancel after the call: still completed, no webhook.
    assert_eq!(s.cancel(&token, &id).json()["status"], "completed");

    // Past the TTL: no `expired`, no second anything. The clock jumps
    // beyond the expiry; the expiry thread and the webhook driver look at
    // it at least every half second.
    let expires_at = parse_utc(created["expires_at"].as_str().unwrap());
    clock.advance_to(expires_at + 1000);
    assert!(clock.now_millis() > expires_at);
    // A verification nobody called, created with the first, expires now:
    // its webhook shows the jump was acted on.
    let other = rx
        .wait_for("/uncalled", 1, Duration::from_secs(10))
        .remove(0);
    assert_eq!(other.json()["type"], "verification.expired");
    std::thread::sleep(Duration::from_millis(1000));
    let hits = rx.hits_to("/hook");
    assert_eq!(hits.len(), 1, "{hits:?}");
    let log = s.cli(&["delivery", "list", "--verification", &id]);
    assert_eq!(log.as_array().unwrap().len(), 1, "{log}");
    assert_eq!(log[0]["type"], "verification.completed");
    assert_eq!(log[0]["state"], "delivered");
}
