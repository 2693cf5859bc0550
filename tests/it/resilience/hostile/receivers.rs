//! Webhook receivers that misbehave, against the real binary: one that
//! resets the connection, one that answers bytes that are not HTTP, and one
//! that answers `200` with a gigabyte body. The first two are failed
//! attempts retried on the schedule (here at once, +1 s, +2 s) until a
//! good answer; the gigabyte is read only up to the logged 4 KiB, so the
//! attempt ends at once, delivered, and the service's memory stays flat.
//! Each verification is completed by a real call (sipp), so its webhook
//! leaves at once.
//!
//! Not for: hanging, slow, 500 and redirecting receivers
//! (`webhooks::delivery`).

use crate::support::sip::*;
use crate::support::webhooks::*;
use crate::support::*;
use serde_json::{json, Value};
use std::time::Duration;

/// A call's commit and the first attempt.
const FIRST_WEBHOOK_WAIT: Duration = Duration::from_secs(10);
/// `dialproof_storage::RESPONSE_BODY_LOG_BYTES_MAX`.
const LOGGED_BODY_MAX: usize = 4096;

fn delivery(s: &Server, verification_id: &str) -> Option<Value> {
    let v = s.cli(&["delivery", "list", "--verification", verification_id]);
    v.as_array().and_then(|l| l.first().cloned())
}

fn wait_delivered(s: &Server, id: &str) -> Value {
    poll(Duration::from_secs(30), || {
        delivery(s, id).filter(|d| d["state"] == "delivered")
    })
    .unwrap_or_else(|| panic!("{id} never delivered: {:?}\n{}", delivery(s, id), s.logs()))
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[test]
fn reset_garbage_and_gigabyte_answers_are_bounded_and_retried() {
    let rx = Receiver::recording(Answer::Status(200));
    rx.script(
        "/reset",
        &[Answer::Reset, Answer::Reset, Answer::Status(200)],
    );
    rx.script("/garbage", &[Answer::Garbage, Answer::Status(200)]);
    rx.script("/huge", &[Answer::Huge(1 << 30)]);
    let s = Server::start(&format!(
        "{FAST_RETRIES}{}",
        sip_config(&trusted_line(5, 603))
    ));
    let company = s.create_company("acme");
    s.cli(&["company", "dev-urls", &company.to_string(), &rx.base_url()]);
    let token = s.create_key(company);
    let create = |path: &str| -> (String, String) {
        let v = s.create_ok(
            &token,
            &json!({"phone": RU_PHONE, "webhook_url": rx.url(path), "ttl_seconds": 30}),
        );
        let dial = v["dial_number"].as_str().unwrap().to_owned();
        (v["verification_id"].as_str().unwrap().to_owned(), dial)
    };
    let (reset, reset_dial) = create("/reset");
    let (garbage, garbage_dial) = create("/garbage");
    let (huge, huge_dial) = create("/huge");
    let rss_before = rss_kib(s.pid());
    call_once(&s, &huge_dial);

    // The gigabyte: one attempt, delivered, quickly, its logged body cut.
    rx.wait_for("/huge", 1, FIRST_WEBHOOK_WAIT);
    let d = wait_delivered(&s, &huge);
    assert_eq!(d["attempts_made"], 1, "{d}");
    let a = &d["attempts"][0];
    assert_eq!(a["http_status"], 200, "{a}");
    let logged = a["response_body"].as_str().unwrap();
    assert!(
        logged.len() <= LOGGED_BODY_MAX,
        "{} bytes logged",
        logged.len()
    );
    assert!(logged.starts_with("xxxx"), "{logged:.40}");
    assert!(a["latency_ms"].as_i64().unwrap() < 10_000, "{a}");
    let rss_after = rss_kib(s.pid());
    assert!(
        rss_after < rss_before + 64 * 1024,
        "RSS grew from {rss_before} KiB to {rss_after} KiB"
    );

    // Reset twice, then 200: three attempts on the schedule.
    call_once(&s, &reset_dial);
    let hits = rx.wait_for("/reset", 3, Duration::from_secs(20));
    assert_eq!(hits.len(), 3);
    let d = wait_delivered(&s, &reset);
    assert_eq!(d["attempts_made"], 3, "{d}");
    for a in &d["attempts"].as_array().unwrap()[..2] {
        assert!(a["http_status"].is_null(), "{a}");
        assert!(a["error"].as_str().is_some_and(|e| !e.is_empty()), "{a}");
    }
    let gap = hits[1].at_ms - hits[0].at_ms;
    assert!(
        (900..2500).contains(&gap),
        "retry after {gap} ms, schedule says 1 s"
    );

    // Not HTTP, then 200.
    call_once(&s, &garbage_dial);
    let hits = rx.wait_for("/garbage", 2, Duration::from_secs(20));
    assert_eq!(hits[1].body, hits[0].body, "a retry sends the same bytes");
    let d = wait_delivered(&s, &garbage);
    assert_eq!(d["attempts_made"], 2, "{d}");
    assert!(d["attempts"][0]["http_status"].is_null(), "{d}");

    let logs = s.logs();
    assert!(!logs.contains("panicked"), "{logs}");
}
