//! TTL expiry: a pending verification becomes `expired` once its TTL
//! passes and its number is issued again; one whose TTL passed while the
//! service was down is `expired` right after restart.

mod common;

use common::*;
use serde_json::json;
use std::time::Duration;

#[test]
fn ttl_expiry_releases_the_number() {
    let s = Server::with_pools(1, 0);
    let token = s.new_client("acme");
    // ttl 1 is clamped to the minimum, 30 s.
    let v = s.create_ok(
        &token,
        &json!({"phone": RU_PHONE, "webhook_url": WEBHOOK, "ttl_seconds": 1}),
    );
    assert_eq!(v["ttl_seconds"], 30);
    let id = v["verification_id"].as_str().unwrap();
    let expires_at = parse_utc(v["expires_at"].as_str().unwrap());
    assert_eq!(s.create(&token, &body(RU_PHONE)).status, 503);

    // Poll (about every 2 s, well under the rate limit) until expired.
    let mut polls = 0;
    let expired = loop {
        let r = s.get(&token, id);
        assert_eq!(r.status, 200, "{}", r.text());
        let g = r.json();
        let now = now_millis();
        match g["status"].as_str().unwrap() {
            "pending" => {
                assert!(
                    now < expires_at + 20_000,
                    "still pending 20 s after expires_at: {g}"
                );
            }
            "expired" => {
                assert!(
                    now >= expires_at - 1000,
                    "expired {} ms before expires_at: {g}",
                    expires_at - now
                );
                break g;
            }
            other => panic!("unexpected status {other}: {g}"),
        }
        polls += 1;
        assert!(polls < 40, "too many polls");
        let wait = (expires_at - now_millis()).clamp(200, 2000);
        std::thread::sleep(Duration::from_millis(wait as u64));
    };
    assert_verification(&expired);
    assert_eq!(expired["completed_at"], serde_json::Value::Null);
    for f in [
        "verification_id",
        "phone",
        "dial_number",
        "created_at",
        "expires_at",
    ] {
        assert_eq!(expired[f], v[f], "{f}");
    }

    // The number is issued again (the release follows the commit closely).
    let again = poll(Duration::from_secs(3), || {
        let r = s.create(&token, &body(RU_PHONE));
        (r.status == 201).then(|| r.json())
    })
    .expect("number not issued again after expiry");
    assert_eq!(again["dial_number"], v["dial_number"]);

    // A terminal status never changes: cancel returns it as it is.
    let c = s.cancel(&token, id);
    assert_eq!(c.status, 200);
    assert_eq!(c.json(), expired);
    // ...and does not release the new holder's number.
    assert_eq!(s.create(&token, &body(RU_PHONE)).status, 503);
}

#[test]
fn ttl_elapsed_while_down_is_expired_after_restart() {
    let mut s = Server::with_pools(1, 0);
    let token = s.new_client("acme");
    let v = s.create_ok(
        &token,
        &json!({"phone": RU_PHONE, "webhook_url": WEBHOOK, "ttl_seconds": 30}),
    );
    let id = v["verification_id"].as_str().unwrap();
    let expires_at = parse_utc(v["expires_at"].as_str().unwrap());
    s.kill();
    let left = expires_at + 1000 - now_millis();
    if left > 0 {
        std::thread::sleep(Duration::from_millis(left as u64));
    }
    s.restart();
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
