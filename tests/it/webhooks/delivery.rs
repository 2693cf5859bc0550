//! Webhooks end to end, against a real HTTP receiver on loopback: the
//! payload and headers, the signature (checked by Python's `hmac`, an
//! independent implementation), signing with both secrets after a rotation,
//! no webhook for a cancel, the development-URL rule at delivery, retries
//! after 500s and 3xx (never followed) with the same body bytes, a timeout,
//! a slow receiver that does not delay another, the delivery log and the
//! manual retry.
//!
//! Completions are driven by TTL expiry (`verification.expired`, 30 s, the
//! shortest TTL): the webhook path after the commit is the same for every
//! event type. The service runs in process on a clock that flows with real
//! time (`crate::support::virtual_time`), and the test moves it to the TTL's end
//! instead of waiting 30 s; retry gaps and HTTP timeouts are real time.
//! The retry schedule is shortened by configuration to at once, +1 s,
//! +2 s, without jitter.
//!
//! Not for: receivers that reset, answer garbage or gigabytes
//! (`resilience::hostile::receivers`).

use crate::support::virtual_time::VirtualClock;
use crate::support::webhooks::*;
use crate::support::*;
use serde_json::{json, Value};
use std::time::Duration;

/// The expiry thread's look at the clock and the first attempt.
const FIRST_WEBHOOK_WAIT: Duration = Duration::from_secs(10);

/// Moves `clock` to 100 ms past the latest expiry of `created`.
fn past_expiry(clock: &VirtualClock, created: &[&Value]) {
    let last = created
        .iter()
        .map(|v| parse_utc(v["expires_at"].as_str().unwrap()))
        .max()
        .unwrap();
    clock.advance_to(last + 100);
}

fn company_with_secret(s: &Server, name: &str) -> (i64, String) {
    let v = s.cli(&["company", "create", "--name", name]);
    (
        v["id"].as_i64().unwrap(),
        v["webhook_secret"].as_str().unwrap().to_owned(),
    )
}

fn create(s: &Server, token: &str, url: &str, client_ref: &str) -> Value {
    s.create_ok(
        token,
        &json!({"phone": RU_PHONE, "webhook_url": url, "client_ref": client_ref,
                "info": format!("info of {client_ref}"), "ttl_seconds": 30}),
    )
}

/// The delivery log entry of one verification (at most one delivery each).
fn delivery(s: &Server, verification_id: &str) -> Option<Value> {
    let v = s.cli(&["delivery", "list", "--verification", verification_id]);
    let list = v.as_array().expect("delivery list is an array");
    assert!(list.len() <= 1, "one delivery per verification: {v}");
    list.first().cloned()
}

fn wait_delivery(s: &Server, verification_id: &str, pred: impl Fn(&Value) -> bool) -> Value {
    poll(Duration::from_secs(30), || {
        delivery(s, verification_id).filter(|d| pred(d))
    })
    .unwrap_or_else(|| {
        panic!(
            "delivery of {verification_id} never matched; last: {:?}\nlogs:\n{}",
            delivery(s, verification_id),
            s.logs()
        )
    })
}

fn check_payload(hit: &Hit, v: &Value) {
    assert_eq!(hit.method, "POST");
    assert_eq!(hit.header("Content-Type"), Some("application/json"));
    assert_eq!(hit.header("User-Agent"), Some("Dialproof/1.0"));
    let p = hit.json();
    let obj = p.as_object().unwrap();
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "client_ref",
            "completed_at",
            "dial_number",
            "info",
            "livemode",
            "phone",
            "type",
            "verification_id"
        ],
        "expired carries no caller_id: {p}"
    );
    assert_eq!(p["type"], "verification.expired");
    for f in [
        "verification_id",
        "phone",
        "dial_number",
        "client_ref",
        "info",
    ] {
        assert_eq!(p[f], v[f], "{f}");
    }
    // completed_at of an expiry is the TTL moment, not when it was noticed.
    assert_eq!(
        parse_utc(p["completed_at"].as_str().unwrap()),
        parse_utc(v["expires_at"].as_str().unwrap())
    );
}

fn signature_entries(header: &str) -> (i64, Vec<String>) {
    let mut t = None;
    let mut v1 = Vec::new();
    for part in header.split(',') {
        match part.split_once('=') {
            Some(("t", x)) => t = Some(x.parse().unwrap()),
            Some(("v1", x)) => v1.push(x.to_owned()),
            _ => panic!("unexpected signature part {part:?} in {header:?}"),
        }
    }
    (t.expect("t="), v1)
}

#[test]
fn payload_headers_signatures_rotation_cancel_and_dev_url_rule() {
    let rx = Receiver::recording(Answer::Status(200));
    let (s, clock) = Server::start_flowing(&format!("{FAST_RETRIES}{}", pools(10, 0)));

    // A: rotated, so it signs with both secrets.
    let (a, old_secret) = company_with_secret(&s, "rotated");
    let rot = s.cli(&["company", "rotate-secret", &a.to_string()]);
    let new_secret = rot["webhook_secret"].as_str().unwrap().to_owned();
    assert_ne!(new_secret, old_secret);
    // B: one secret.
    let (b, secret_b) = company_with_secret(&s, "plain");
    // C: a development URL at creation, no longer one at delivery.
    let (c, _) = company_with_secret(&s, "revoked-dev");
    for id in [a, b, c] {
        s.cli(&["company", "dev-urls", &id.to_string(), &rx.base_url()]);
    }
    let (ta, tb, tc) = (s.create_key(a), s.create_key(b), s.create_key(c));

    let va = create(&s, &ta, &rx.url("/a"), "ref-a");
    let vb = create(&s, &tb, &rx.url("/b"), "ref-b");
    let vx = create(&s, &tb, &rx.url("/cancelled"), "ref-x");
    let vc = create(&s, &tc, &rx.url("/c"), "ref-c");
    let id = |v: &Value| v["verification_id"].as_str().unwrap().to_owned();
    assert_eq!(s.cancel(&tb, &id(&vx)).json()["status"], "expired");
    s.cli(&["company", "dev-urls", &c.to_string(), "--clear"]);

    past_expiry(&clock, &[&va, &vb, &vx, &vc]);
    let ha = rx.wait_for("/a", 1, FIRST_WEBHOOK_WAIT).remove(0);
    let hb = rx.wait_for("/b", 1, Duration::from_secs(5)).remove(0);
    check_payload(&ha, &va);
    check_payload(&hb, &vb);
    for (hit, v) in [(&ha, &va), (&hb, &vb)] {
        let late = hit.at_ms + clock.ahead_ms() - parse_utc(v["expires_at"].as_str().unwrap());
        eprintln!("{} received {late} ms after its expiry moment", id(v));
        assert!(late < 3000, "webhook {late} ms after the event");
    }

    // Signatures, checked by Python's hmac: A carries two v1 entries, and
    // each secret alone verifies it; B carries one.
    let sig_a = ha.header("X-Service-Signature").expect("signature header");
    let (t, entries) = signature_entries(sig_a);
    assert_eq!(entries.len(), 2, "{sig_a}");
    let sent = ha.at_ms + clock.ahead_ms();
    assert!((t * 1000 - sent).abs() < 5000, "t is the send time");
    assert!(entries.iter().all(|e| e.len() == 64
        && e.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))));
    assert!(python_verifies(sig_a, &ha.body, &new_secret));
    assert!(python_verifies(sig_a, &ha.body, &old_secret));
    assert!(!python_verifies(sig_a, &ha.body, &secret_b));
    let mut tampered = ha.body.clone();
    tampered.push(b' ');
    assert!(!python_verifies(sig_a, &tampered, &new_secret));
    let sig_b = hb.header("X-Service-Signature").unwrap();
    assert_eq!(signature_entries(sig_b).1.len(), 1, "{sig_b}");
    assert!(python_verifies(sig_b, &hb.body, &secret_b));

    // The log of a delivered webhook.
    let da = wait_delivery(&s, &id(&va), |d| d["state"] == "delivered");
    assert_eq!(da["type"], "verification.expired");
    assert_eq!(da["attempts_made"], 1);
    let attempt = &da["attempts"][0];
    assert_eq!(attempt["attempt"], 1);
    assert_eq!(attempt["http_status"], 200);
    assert_eq!(
        attempt["request_body"].as_str().unwrap().as_bytes(),
        &ha.body[..]
    );
    assert_eq!(attempt["response_body"], "answer 200");
    assert!(attempt["error"].is_null() && attempt["next_attempt_at"].is_null());

    // C: refused at delivery (plain http is for development URLs only),
    // retried per schedule, then dead; the receiver never saw it.
    let dc = wait_delivery(&s, &id(&vc), |d| d["state"] == "dead");
    let attempts = dc["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 3, "{dc}");
    for a in attempts {
        assert!(a["http_status"].is_null(), "{a}");
        assert!(a["error"].as_str().unwrap().contains("https"), "{a}");
    }
    // No webhook for a cancel: not sent, not even logged.
    assert_eq!(delivery(&s, &id(&vx)), None);
    // Delivered ones are not sent again.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(rx.hits_to("/c").is_empty());
    assert!(rx.hits_to("/cancelled").is_empty());
    assert_eq!(rx.hits_to("/a").len(), 1);
    assert_eq!(rx.hits_to("/b").len(), 1);
    // The per-company listing shows A's delivery only.
    let list_a = s.cli(&["delivery", "list", "--company", &a.to_string()]);
    assert_eq!(list_a.as_array().unwrap().len(), 1, "{list_a}");
    assert_eq!(list_a[0]["verification_id"], id(&va).as_str());
}

#[test]
fn retries_after_500_and_3xx_timeouts_slow_receivers_and_manual_retry() {
    let rx = Receiver::recording(Answer::Status(200));
    let elsewhere = Receiver::recording(Answer::Status(200));
    rx.script(
        "/flaky",
        &[
            Answer::Status(500),
            Answer::Redirect(elsewhere.url("/moved")),
            Answer::Status(500),
        ],
    );
    rx.script("/slow", &[Answer::Slow(Duration::from_secs(12), 200)]);
    let (s, clock) = Server::start_flowing(&format!("{FAST_RETRIES}{}", pools(10, 0)));
    let company = s.create_company("acme");
    s.cli(&["company", "dev-urls", &company.to_string(), &rx.base_url()]);
    let token = s.create_key(company);
    let flaky = create(&s, &token, &rx.url("/flaky"), "flaky");
    let slow = create(&s, &token, &rx.url("/slow"), "slow");
    let fast = create(&s, &token, &rx.url("/fast"), "fast");
    let id = |v: &Value| v["verification_id"].as_str().unwrap().to_owned();

    // The fast receiver is served on time while the slow one hangs.
    past_expiry(&clock, &[&flaky, &slow, &fast]);
    let hf = rx.wait_for("/fast", 1, FIRST_WEBHOOK_WAIT).remove(0);
    let late = hf.at_ms + clock.ahead_ms() - parse_utc(fast["expires_at"].as_str().unwrap());
    assert!(late < 3000, "fast receiver waited {late} ms");

    // 500, 301, 500: three attempts with the very same body, then dead.
    let hits = rx.wait_for("/flaky", 3, Duration::from_secs(15));
    assert_eq!(hits.len(), 3);
    for h in &hits[1..] {
        assert_eq!(h.body, hits[0].body, "retries send the same bytes");
    }
    let p = hits[0].json();
    assert_eq!(p["verification_id"], id(&flaky).as_str());
    assert_eq!(p["type"], "verification.expired");
    // The schedule: +1 s after attempt 1, +2 s after attempt 2.
    let gap1 = hits[1].at_ms - hits[0].at_ms;
    let gap2 = hits[2].at_ms - hits[1].at_ms;
    assert!((900..2500).contains(&gap1), "gap {gap1} ms");
    assert!((1900..3500).contains(&gap2), "gap {gap2} ms");
    let d = wait_delivery(&s, &id(&flaky), |d| d["state"] == "dead");
    let codes: Vec<Value> = d["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["http_status"].clone())
        .collect();
    assert_eq!(codes, [json!(500), json!(301), json!(500)]);
    assert!(d["attempts"][1]["error"]
        .as_str()
        .unwrap()
        .contains("not a 2xx"));
    assert!(d["attempts"][0]["next_attempt_at"].is_string());
    assert!(d["attempts"][1]["next_attempt_at"].is_string());
    assert!(d["attempts"][2]["next_attempt_at"].is_null());
    assert_eq!(d["attempts"][0]["response_body"], "answer 500");
    // The redirect was not followed.
    assert_eq!(elsewhere.hits().len(), 0);

    // Manual retry of the dead delivery: sent again at once, same bytes.
    // A dead delivery is never attempted again on its own: a 4th hit within
    // the wait can only be the manual retry.
    let r = s.cli(&["delivery", "retry", &d["id"].to_string()]);
    assert_eq!(r["state"], "pending");
    let hits = rx.wait_for("/flaky", 4, Duration::from_secs(5));
    assert_eq!(hits[3].body, hits[0].body);
    let d = wait_delivery(&s, &id(&flaky), |d| d["state"] == "delivered");
    assert_eq!(d["attempts_made"], 4);
    assert_eq!(d["attempts"][3]["http_status"], 200);

    // The slow receiver: attempt 1 times out at 10 s, attempt 2 (1 s after)
    // succeeds.
    let hits = rx.wait_for("/slow", 2, Duration::from_secs(20));
    let gap = hits[1].at_ms - hits[0].at_ms;
    // The first attempt ran to the 10 s timeout before the retry was sent
    // (the retry then follows by the 1 s of the schedule).
    assert!(gap >= 10_000, "retried before the timeout: {gap} ms");
    let d = wait_delivery(&s, &id(&slow), |d| d["state"] == "delivered");
    let first = &d["attempts"][0];
    assert!(first["http_status"].is_null(), "{first}");
    assert!(
        first["error"].as_str().unwrap().contains("timed out"),
        "{first}"
    );
    assert!(first["latency_ms"].as_i64().unwrap() >= 9_900, "{first}");
    assert_eq!(d["attempts"][1]["http_status"], 200);
}
