//! Crash safety of webhooks: deliveries that were due while the service was
//! down (a retry whose time came, a verification that expired meanwhile)
//! go out right after a restart that follows a SIGKILL; nothing committed
//! is lost and nothing is sent twice once delivered.
//!
//! The first verification is completed by a real call (sipp), so its first
//! attempt comes at once; the downtime is skipped on a virtual clock.
//!
//! Not for: verifications across a restart (`resilience::crash::restart`).

use crate::support::sip::*;
use crate::support::virtual_time::VirtualClock;
use crate::support::webhooks::*;
use crate::support::*;
use serde_json::{json, Value};
use std::time::Duration;

/// At once, then 5 s, then an hour: the second attempt falls in the
/// downtime, the third never comes during the test.
const SCHEDULE: &str = "[webhooks]\nretry_schedule_seconds = [0, 5, 3600]\njitter_percent = 0\n\n";

fn delivery(s: &Server, verification_id: &str) -> Option<Value> {
    let v = s.cli(&["delivery", "list", "--verification", verification_id]);
    v.as_array().unwrap().first().cloned()
}

#[test]
fn due_deliveries_resume_after_sigkill_and_restart() {
    // The receiver's port is known, but nothing listens yet: attempts fail
    // with "connection refused".
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut s = Server::start(&format!("{SCHEDULE}{}", sip_config(&trusted_line(10, 603))));
    let company = s.create_company("acme");
    s.cli(&["company", "dev-urls", &company.to_string(), &base]);
    let token = s.create_key(company);
    let create = |path: &str| {
        s.create_ok(
            &token,
            &json!({"phone": RU_PHONE, "webhook_url": format!("{base}{path}"), "ttl_seconds": 30}),
        )["verification_id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let first = create("/first");
    let dial = s.get(&token, &first).json()["dial_number"]
        .as_str()
        .unwrap()
        .to_owned();
    call_once(&s, &dial);

    // The first attempt fails while the service is up...
    let d = poll(Duration::from_secs(10), || {
        delivery(&s, &first).filter(|d| d["attempts_made"] == 1)
    })
    .unwrap_or_else(|| panic!("no first attempt; logs:\n{}", s.logs()));
    assert_eq!(d["state"], "pending");
    assert!(
        d["attempts"][0]["error"]
            .as_str()
            .unwrap()
            .contains("network error"),
        "{d}"
    );
    // ...and a second verification is created that will expire while down.
    let second = create("/second");
    s.kill();

    // Down past the first's retry time and the second's expiry: the
    // service comes back in this process on a clock 32 s ahead (virtual
    // time, `crate::support::virtual_time`), on the same database.
    let clock = VirtualClock::new();
    clock.advance(Duration::from_secs(32));
    let rx = Receiver::recording_on(port, Answer::Status(200));
    s.launch_in_process(&clock);
    let restarted = now_millis();

    // Without resumption the first delivery's next attempt would be an hour
    // away (SCHEDULE) and the expired one would never be sent: arriving
    // within the wait proves both were picked up at restart.
    let h1 = rx.wait_for("/first", 1, Duration::from_secs(10)).remove(0);
    let h2 = rx.wait_for("/second", 1, Duration::from_secs(10)).remove(0);
    eprintln!(
        "after restart: first in {} ms, second in {} ms",
        h1.at_ms - restarted,
        h2.at_ms - restarted
    );
    assert_eq!(h1.json()["verification_id"], first.as_str());
    assert_eq!(h2.json()["verification_id"], second.as_str());
    assert_eq!(h2.json()["type"], "verification.expired");
    let d1 = poll(Duration::from_secs(10), || {
        delivery(&s, &first).filter(|d| d["state"] == "delivered")
    })
    .expect("first delivered");
    assert_eq!(d1["attempts_made"], 2);
    assert_eq!(d1["attempts"][1]["http_status"], 200);
    // Delivered is final: no duplicate after another poll round.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(rx.hits().len(), 2, "{:?}", rx.hits());
}
