//! The webhooks page over HTTPS: development URLs added and removed one at
//! a time, the `verification.failed` switch, secret rotation (shown once,
//! the previous secret kept for 24 h), and the delivery log of a failing
//! receiver with a Retry button that sends a new attempt at once. Another
//! company can neither see nor retry the delivery.
//!
//! Not for: delivery itself (`webhooks`).

use crate::support::dashboard::*;
use crate::support::sip::*;
use crate::support::webhooks::{Answer, Receiver};
use crate::support::*;
use serde_json::json;
use std::time::{Duration, Instant};

const PAGE: &str = "/dashboard/webhooks/";
/// Two attempts a second apart, then the delivery is dead.
const TWO_ATTEMPTS: &str = "[webhooks]\nretry_schedule_seconds = [0, 1]\njitter_percent = 0\n\n";

fn company_json(server: &Server, id: i64) -> serde_json::Value {
    let all = server.cli(&["company", "list"]);
    all.as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .cloned()
        .expect("company")
}

#[test]
fn settings_rotation_and_retry_of_a_failing_delivery() {
    let rx = Receiver::recording(Answer::Status(500));
    let server = Server::start(&format!(
        "{TWO_ATTEMPTS}{}",
        sip_config(&trusted_line(2, 603))
    ));
    let acme = server.create_company("Acme");
    let other = server.create_company("Other");
    create_user(&server, acme, "ann@acme.test");
    create_user(&server, other, "bob@other.test");
    let token = server.create_key(acme);
    let ann = Dash::login(&server, "ann@acme.test");
    let csrf = ann.csrf();

    // Development URLs one at a time; a non-http one is refused.
    let spare = "http://127.0.0.1:9/";
    for url in [rx.base_url(), spare.to_owned()] {
        let r = ann.post(
            &format!("{PAGE}dev-url/add/"),
            &[("csrf", &csrf), ("url", &url)],
        );
        assert_eq!(r.status, 303, "{}", r.text());
    }
    let bad = ann.post(
        &format!("{PAGE}dev-url/add/"),
        &[("csrf", &csrf), ("url", "ftp://x/")],
    );
    assert_eq!(bad.status, 400);
    let r = ann.post(
        &format!("{PAGE}dev-url/remove/"),
        &[("csrf", &csrf), ("url", spare)],
    );
    assert_eq!(r.status, 303);
    assert_eq!(
        company_json(&server, acme)["dev_webhook_urls"],
        json!([rx.base_url()])
    );

    // The failed-webhooks switch.
    assert_eq!(company_json(&server, acme)["send_failed_webhooks"], false);
    let r = ann.post(
        &format!("{PAGE}failed/"),
        &[("csrf", &csrf), ("state", "on")],
    );
    assert_eq!(r.status, 303);
    assert_eq!(company_json(&server, acme)["send_failed_webhooks"], true);
    assert!(ann.get(PAGE).text().contains("отправляются"));

    // Rotation: the new secret once, the previous one kept for 24 h.
    let rotated = ann.post(&format!("{PAGE}rotate/"), &[("csrf", &csrf)]);
    assert_eq!(rotated.status, 200);
    let html = rotated.text();
    let at = html.find("id=\"secret\">").expect("new secret shown") + 12;
    let new_secret = html[at..at + html[at..].find('<').unwrap()].to_owned();
    assert!(new_secret.starts_with("whsec_"), "{new_secret}");
    let grace = company_json(&server, acme)["secret_rotated_grace_until"].clone();
    let until = parse_utc(grace.as_str().expect("grace time"));
    assert!(
        (until - now_millis() - 86_400_000).abs() < 60_000,
        "{grace}"
    );
    assert!(!ann.get(PAGE).text().contains("whsec_"), "shown once");

    // A completed verification whose receiver answers 500: two attempts.
    let v = server.create_ok(
        &token,
        &json!({"phone": RU_PHONE, "webhook_url": rx.url("/hook")}),
    );
    let out = sim_call(&server, v["dial_number"].as_str().unwrap(), "+79161234567");
    assert!(out.status.success(), "{out:?}");
    let hits = rx.wait_for("/hook", 2, Duration::from_secs(20));
    // Signed with the new secret (and, for 24 h, the previous one too).
    let sig = hits[0].header("X-Service-Signature").expect("signature");
    let t: i64 = sig
        .split(',')
        .next()
        .unwrap()
        .strip_prefix("t=")
        .unwrap()
        .parse()
        .unwrap();
    let v1: Vec<&str> = sig
        .split(',')
        .filter_map(|p| p.strip_prefix("v1="))
        .collect();
    assert_eq!(v1.len(), 2, "{sig}");
    let expected = dialproof_engine::webhook::sign(t, &hits[0].body, &new_secret);
    assert!(
        v1.contains(&expected.as_str()),
        "not signed with the new secret: {sig}"
    );
    let page = wait_page(&ann, |html| {
        html.contains("— dead") && html.matches("class=\"attempt\"").count() == 2
    });
    assert!(page.contains("<td>500</td>"), "HTTP code per attempt");
    assert!(page.contains("answer 500"), "response body");
    assert!(page.contains("verification.completed"));
    let delivery = hidden(&page, "delivery").expect("retry form");

    // Another company cannot retry it, nor see it.
    let bob = Dash::login(&server, "bob@other.test");
    let r = bob.post(
        &format!("{PAGE}retry/"),
        &[("csrf", &bob.csrf()), ("delivery", &delivery)],
    );
    assert_eq!(r.status, 404);
    assert!(!bob
        .get(PAGE)
        .text()
        .contains(v["verification_id"].as_str().unwrap()));
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(rx.hits_to("/hook").len(), 2);

    // Retry: a third attempt at once.
    let r = ann.post(
        &format!("{PAGE}retry/"),
        &[("csrf", &csrf), ("delivery", &delivery)],
    );
    assert_eq!(r.status, 303, "{}", r.text());
    rx.wait_for("/hook", 3, Duration::from_secs(10));
    wait_page(&ann, |html| html.matches("class=\"attempt\"").count() == 3);
}

fn wait_page(dash: &Dash<'_>, done: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let html = dash.get(PAGE).text();
        if done(&html) {
            return html;
        }
        assert!(Instant::now() < deadline, "page never got there:\n{html}");
        std::thread::sleep(Duration::from_millis(200));
    }
}
