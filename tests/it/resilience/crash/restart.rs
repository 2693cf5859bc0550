//! Durability: every acknowledged create survives SIGKILL; after restart
//! the leases are restored (no number issued twice) and released normally.
//!
//! Not for: a graceful stop under load (`ops::shutdown`), or webhooks due
//! across a restart (`webhooks::restart`).

use crate::support::*;
use serde_json::json;
use std::collections::HashSet;

#[test]
fn acknowledged_creates_survive_sigkill() {
    let mut s = Server::with_pools(5, 5);
    let token = s.new_client("acme");
    let mut created = Vec::new();
    for i in 0..10 {
        let phone = if i % 2 == 0 { RU_PHONE } else { UK_PHONE };
        created.push(s.create_ok(
            &token,
            &json!({"phone": phone, "webhook_url": WEBHOOK, "client_ref": format!("ref-{i}"),
                    "info": format!("заказ {i}"), "ttl_seconds": 600}),
        ));
    }
    // Kill at once after the last 201: no graceful shutdown.
    s.kill();
    s.restart();

    let mut held = HashSet::new();
    for v in &created {
        let id = v["verification_id"].as_str().unwrap();
        let r = s.get(&token, id);
        assert_eq!(r.status, 200, "{id} after restart: {}", r.text());
        let g = r.json();
        assert_eq!(&g, v, "{id} after restart");
        assert_eq!(g["status"], "pending");
        assert!(held.insert(g["dial_number"].as_str().unwrap().to_owned()));
    }
    assert_eq!(held.len(), 10);

    // Every number is still leased: no create gets one.
    for phone in [RU_PHONE, UK_PHONE, KZ_PHONE] {
        let r = s.create(&token, &body(phone));
        assert_eq!(r.status, 503, "{phone} after restart: {}", r.text());
    }

    // A cancel frees its number, which is then issued again (and only it).
    for v in [&created[2], &created[3]] {
        let id = v["verification_id"].as_str().unwrap();
        let c = s.cancel(&token, id);
        assert_eq!(c.status, 200, "{}", c.text());
        assert_eq!(c.json()["status"], "expired");
        let phone = v["phone"].as_str().unwrap();
        let n = s.create_ok(&token, &body(phone));
        assert_eq!(n["dial_number"], v["dial_number"], "{phone}");
        assert_eq!(s.create(&token, &body(phone)).status, 503, "{phone}");
    }

    // A second kill/restart keeps the new state too.
    s.kill();
    s.restart();
    let c = s.get(&token, created[2]["verification_id"].as_str().unwrap());
    assert_eq!(c.json()["status"], "expired");
    assert_eq!(s.create(&token, &body(RU_PHONE)).status, 503);
    assert_eq!(s.create(&token, &body(UK_PHONE)).status, 503);
}

#[test]
fn sigterm_stops_cleanly_and_state_survives() {
    let mut s = Server::with_pools(1, 1);
    let token = s.new_client("acme");
    let v = s.create_ok(&token, &body(RU_PHONE));
    let status = s.stop();
    assert!(status.success(), "exit status after SIGTERM: {status}");
    s.restart();
    let id = v["verification_id"].as_str().unwrap();
    assert_eq!(s.get(&token, id).json(), v);
    assert_eq!(s.create(&token, &body(RU_PHONE)).status, 503);
    s.create_ok(&token, &body(UK_PHONE));
}
