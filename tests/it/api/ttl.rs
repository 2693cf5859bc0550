//! TTL expiry: a pending verification (created, or restored by a restart)
//! becomes `expired` once its TTL passes and its number is issued again; one
//! whose TTL passed while the service was down is `expired` right after
//! restart. On virtual time (`crate::support::virtual_time`): no test sleeps
//! through a TTL.
//!
//! Not for: webhooks sent at expiry (`webhooks::delivery`).

use crate::support::virtual_time::VirtualClock;
use crate::support::*;
use serde_json::{json, Value};
use std::time::Duration;

/// Moves the clock to just before `v`'s expiry (still pending after the
/// expiry thread had time to look), then past it, and polls GET until the
/// verification is expired; checks the fields did not change.
fn wait_expired(s: &Server, clock: &VirtualClock, token: &str, v: &Value) -> Value {
    let id = v["verification_id"].as_str().unwrap();
    let expires_at = parse_utc(v["expires_at"].as_str().unwrap());
    let before = expires_at - 1000 - clock.now_millis();
    if before > 0 {
        clock.advance(Duration::from_millis(before as u64));
        // The expiry thread looks at the clock at least every 0.5 s.
        std::thread::sleep(Duration::from_millis(1200));
        let g = s.get(token, id).json();
        assert_eq!(g["status"], "pending", "expired a second early: {g}");
    }
    clock.advance(Duration::from_millis(1001));
    let g = poll(Duration::from_secs(10), || {
        let g = s.get(token, id).json();
        (g["status"] != "pending").then_some(g)
    })
    .unwrap_or_else(|| panic!("{id} not expired 10 s after its expires_at"));
    assert_eq!(g["status"], "expired", "{g}");
    assert_verification(&g);
    assert_eq!(g["completed_at"], Value::Null);
    for f in [
        "verification_id",
        "phone",
        "dial_number",
        "created_at",
        "expires_at",
    ] {
        assert_eq!(g[f], v[f], "{f}");
    }
    g
}

/// Creates until a 201 (the release follows the expiry's commit closely).
fn create_soon(s: &Server, token: &str, phone: &str) -> Value {
    poll(Duration::from_secs(3), || {
        let r = s.create(token, &body(phone));
        (r.status == 201).then(|| r.json())
    })
    .unwrap_or_else(|| panic!("no number issued for {phone} after expiry"))
}

#[test]
fn ttl_expiry_releases_the_number() {
    // One number per pool. The international verification is restored by a
    // restart (its timer comes from recovery); the domestic one is created
    // after the restart (its timer comes from the create path).
    let (mut s, clock) = Server::start_virtual(&pools(1, 1));
    let token = s.new_client("acme");
    let restored = s.create_ok(
        &token,
        &json!({"phone": UK_PHONE, "webhook_url": WEBHOOK, "ttl_seconds": 30}),
    );
    s.restart_in_process(&clock);
    assert_eq!(
        s.get(&token, restored["verification_id"].as_str().unwrap())
            .json(),
        restored
    );

    // ttl 1 is clamped to the minimum, 30 s.
    let v = s.create_ok(
        &token,
        &json!({"phone": RU_PHONE, "webhook_url": WEBHOOK, "ttl_seconds": 1}),
    );
    assert_eq!(v["ttl_seconds"], 30);
    assert_eq!(s.create(&token, &body(RU_PHONE)).status, 503);
    assert_eq!(s.create(&token, &body(UK_PHONE)).status, 503);

    let restored_expired = wait_expired(&s, &clock, &token, &restored);
    let again = create_soon(&s, &token, UK_PHONE);
    assert_eq!(again["dial_number"], restored["dial_number"]);

    let expired = wait_expired(&s, &clock, &token, &v);
    let again = create_soon(&s, &token, RU_PHONE);
    assert_eq!(again["dial_number"], v["dial_number"]);

    // A terminal status never changes: cancel returns it as it is, and
    // does not release the new holders' numbers.
    for (old, expired) in [(&v, &expired), (&restored, &restored_expired)] {
        let c = s.cancel(&token, old["verification_id"].as_str().unwrap());
        assert_eq!(c.status, 200);
        assert_eq!(&c.json(), expired);
    }
    assert_eq!(s.create(&token, &body(RU_PHONE)).status, 503);
    assert_eq!(s.create(&token, &body(UK_PHONE)).status, 503);
}

#[test]
fn ttl_elapsed_while_down_is_expired_after_restart() {
    let (mut s, clock) = Server::start_virtual(&pools(1, 0));
    let token = s.new_client("acme");
    let v = s.create_ok(
        &token,
        &json!({"phone": RU_PHONE, "webhook_url": WEBHOOK, "ttl_seconds": 30}),
    );
    let id = v["verification_id"].as_str().unwrap();
    let expires_at = parse_utc(v["expires_at"].as_str().unwrap());
    s.stop_in_process();
    clock.advance_to(expires_at + 1000);
    s.restart_in_process(&clock);
    // Recovery runs before the listeners open: no polling needed.
    let g = s.get(&token, id);
    assert_eq!(g.status, 200, "{}", g.text());
    let g = g.json();
    assert_eq!(g["status"], "expired", "{g}");
    assert_verification(&g);
    for f in [
        "verification_id",
        "phone",
        "dial_number",
        "created_at",
        "expires_at",
    ] {
        assert_eq!(g[f], v[f], "{f}");
    }
    let again = s.create_ok(&token, &body(RU_PHONE));
    assert_eq!(again["dial_number"], v["dial_number"]);
}
