//! README "Webhooks": for 24 hours after `company rotate-secret` a second
//! `v1=` entry is signed with the previous secret; after that only the new
//! secret signs.
//!
//! The 24 h are not waited for: the test moves the company's
//! `previous_secret_valid_until` into the past in the SQLite database while
//! the server runs (bumping `meta.change_version`, as the operator commands
//! do, so the service re-reads its company settings), then sends the
//! delivery again with `delivery retry` and reads the signature header.
//!
//! Not for: rotating from the dashboard (`dashboard::webhooks`).

use crate::support::sip::*;
use crate::support::webhooks::*;
use crate::support::*;
use serde_json::{json, Value};
use std::net::UdpSocket;
use std::time::{Duration, Instant};

/// A call from 127.0.0.1 (the line's provider) to `dial`; returns the
/// final status line.
fn call(server: &Server, dial: &str) -> String {
    let addr = sip_addr(server);
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let local = sock.local_addr().unwrap();
    let invite = format!(
        "INVITE sip:{dial}@{addr} SIP/2.0\r\n\
         Via: SIP/2.0/UDP {local};branch=z9hG4bKcutoff1;rport\r\n\
         From: <sip:+79161234567@{local}>;tag=c1\r\nTo: <sip:{dial}@{addr}>\r\n\
         Call-ID: cutoff-1\r\nCSeq: 1 INVITE\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n"
    );
    sock.send_to(invite.as_bytes(), addr).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        let (n, _) = sock.recv_from(&mut buf).expect("a final response");
        let text = String::from_utf8_lossy(&buf[..n]).into_owned();
        let status = text.lines().next().unwrap_or("").to_owned();
        if !status.starts_with("SIP/2.0 1") {
            return status;
        }
    }
}

/// The `v1=` entries of an `X-Service-Signature` header.
fn v1_entries(header: &str) -> Vec<&str> {
    header
        .split(',')
        .filter_map(|p| p.strip_prefix("v1="))
        .collect()
}

fn signature(hit: &Hit) -> &str {
    hit.header("X-Service-Signature")
        .expect("X-Service-Signature header")
}

/// README, "Webhooks": for 24 hours after `company rotate-secret` a second
/// `v1=` entry is signed with the previous secret; after that only the new
/// secret signs.
#[test]
fn the_previous_secret_stops_signing_once_its_validity_has_passed() {
    let rx = Receiver::recording(Answer::Status(200));
    let s = Server::start(&format!(
        "{FAST_RETRIES}{}",
        sip_config(&trusted_line(2, 603))
    ));
    let created = s.cli(&["company", "create", "--name", "rotating"]);
    let company = created["id"].as_i64().unwrap();
    let old_secret = created["webhook_secret"].as_str().unwrap().to_owned();
    s.cli(&["company", "dev-urls", &company.to_string(), &rx.base_url()]);
    let rotated = s.cli(&["company", "rotate-secret", &company.to_string()]);
    let new_secret = rotated["webhook_secret"].as_str().unwrap().to_owned();
    assert_ne!(old_secret, new_secret);
    let token = s.create_key(company);

    let v = s.create_ok(
        &token,
        &json!({"phone": RU_PHONE, "webhook_url": rx.url("/hook")}),
    );
    let id = v["verification_id"].as_str().unwrap().to_owned();
    let status = call(&s, v["dial_number"].as_str().unwrap());
    assert!(status.starts_with("SIP/2.0 603"), "{status}");

    // Within the 24 h: both secrets sign.
    let first = rx.wait_for("/hook", 1, Duration::from_secs(10)).remove(0);
    assert_eq!(first.json()["type"], "verification.completed");
    let sig = signature(&first);
    assert_eq!(v1_entries(sig).len(), 2, "{sig}");
    assert!(python_verifies(sig, &first.body, &new_secret));
    assert!(python_verifies(sig, &first.body, &old_secret));

    // The delivery, to retry it later.
    let list = s.cli(&["delivery", "list", "--verification", &id]);
    let delivery: Value = list.as_array().expect("an array")[0].clone();
    let delivery_id = delivery["id"].to_string();

    // The 24 h are over: the previous secret's validity ended a minute ago.
    let db = rusqlite::Connection::open(s.data_dir.join("dialproof.db")).expect("opening the db");
    db.busy_timeout(Duration::from_secs(10)).unwrap();
    let stored: Option<i64> = db
        .query_row(
            "SELECT previous_secret_valid_until FROM companies WHERE id = ?1",
            [company],
            |r| r.get(0),
        )
        .unwrap();
    let stored = stored.expect("a rotated company has previous_secret_valid_until");
    let day = 24 * 3600 * 1000;
    assert!(
        (stored - now_millis() - day).abs() < 120_000,
        "previous_secret_valid_until {stored} is not 24 h from now"
    );
    let past = now_millis() - 60_000;
    db.execute_batch(&format!(
        "BEGIN IMMEDIATE;\
         UPDATE companies SET previous_secret_valid_until = {past} WHERE id = {company};\
         UPDATE meta SET value = value + 1 WHERE key = 'change_version';\
         COMMIT;"
    ))
    .unwrap();
    drop(db);

    // A new delivery of the same webhook carries only the new secret's
    // signature. The service re-reads company settings within about a
    // second, so retry until it has (bounded).
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut seen = 1;
    let last = loop {
        let r = s.cli(&["delivery", "retry", &delivery_id]);
        assert_eq!(r["state"], "pending", "{r}");
        seen += 1;
        let hit = rx
            .wait_for("/hook", seen, Duration::from_secs(10))
            .remove(seen - 1);
        if v1_entries(signature(&hit)).len() == 1 || Instant::now() > deadline {
            break hit;
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    let sig = signature(&last);
    assert_eq!(
        v1_entries(sig).len(),
        1,
        "still two signatures after the previous secret's validity: {sig}"
    );
    assert_eq!(last.body, first.body, "a retry sends the same bytes");
    assert!(python_verifies(sig, &last.body, &new_secret));
    assert!(!python_verifies(sig, &last.body, &old_secret));
}
