//! Issue 6: support arrangements applied to a running service over HTTPS:
//! per-key rate limits set by the operator CLI, and numbers dedicated to one
//! company.

mod common;

use common::*;
use std::time::{Duration, Instant};

fn prefix(token: &str) -> &str {
    &token["svc_live_".len().."svc_live_".len() + 8]
}

/// Sends GETs of an unknown id on one keep-alive connection until the first
/// non-404; returns how many were answered 404 (each uses quota) and the
/// refusal.
fn count_until_refused(server: &Server, token: &str, max: usize) -> (usize, Resp) {
    let auth = format!("Bearer {token}");
    let path = format!("{COLLECTION}ver_00000000000000000000000000/");
    let mut conn = server.connect();
    for n in 0..max {
        let r = conn.request("GET", &path, &[("Authorization", &auth)], b"");
        if r.status != 404 {
            return (n, r);
        }
    }
    panic!("no refusal within {max} requests");
}

/// Waits (bounded) until the running service applies an operator change:
/// `probe` returns true once it does.
fn eventually(what: &str, mut probe: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if probe() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the running service did not apply: {what}");
}

#[test]
fn raised_key_is_refused_at_its_1001st_request_and_not_before() {
    let server = Server::with_pools(1, 1);
    let token = server.new_client("raised");
    let listed = server.cli(&["key", "set-limit", prefix(&token), "1000"]);
    assert_eq!(listed["rate_limit_per_minute"], 1000);
    // The service polls for operator changes every second; give it time to
    // apply this one without spending any of the key's quota on probes.
    std::thread::sleep(Duration::from_millis(2500));
    let (allowed, refusal) = count_until_refused(&server, &token, 1100);
    assert_eq!(allowed, 1000, "exactly the raised limit is allowed");
    assert_eq!(refusal.status, 429);
    let retry: u64 = refusal.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    assert_eq!(refusal.detail(), throttled(retry));
    let keys = server.cli(&["key", "list"]);
    let row = keys
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["prefix"] == prefix(&token))
        .unwrap()
        .clone();
    assert_eq!(row["rate_limit_per_minute"], 1000);
    assert_eq!(row["rate_limit_is_default"], false);
}

#[test]
fn lowered_key_is_refused_at_its_own_limit_and_default_restores_120() {
    let server = Server::with_pools(1, 1);
    let token = server.new_client("lowered");
    server.cli(&["key", "set-limit", prefix(&token), "5"]);
    std::thread::sleep(Duration::from_millis(2500));
    let (allowed, refusal) = count_until_refused(&server, &token, 50);
    assert_eq!(allowed, 5);
    assert_eq!(refusal.status, 429);

    // Back to the default while running: the 5 counted requests stay in
    // the window, so 115 more are allowed before the 121st is refused.
    let v = server.cli(&["key", "set-limit", prefix(&token), "default"]);
    assert_eq!(v["rate_limit_per_minute"], 120);
    assert_eq!(v["rate_limit_is_default"], true);
    // Probe until the running service applies it; refused probes are not
    // counted, the first allowed one is (5 + 1 in the window).
    eventually("limit back to default", || {
        server.get(&token, "ver_00000000000000000000000000").status == 404
    });
    let (allowed, refusal) = count_until_refused(&server, &token, 200);
    assert_eq!(allowed + 1 + 5, 120, "the window holds 5 + 1 + {allowed}");
    assert_eq!(refusal.status, 429);
}

#[test]
fn limit_settings_survive_a_restart() {
    let mut server = Server::with_pools(1, 1);
    let token = server.new_client("persisted");
    server.cli(&["key", "set-limit", prefix(&token), "3"]);
    server.restart();
    let (allowed, refusal) = count_until_refused(&server, &token, 20);
    assert_eq!(allowed, 3);
    assert_eq!(refusal.status, 429);
}

#[test]
fn dedicated_numbers_go_to_their_company_first_then_the_shared_pool() {
    // Three domestic numbers: the first dedicated to company A.
    let server = Server::with_pools(3, 1);
    let a = server.create_company("A");
    let b = server.create_company("B");
    let token_a = server.create_key(a);
    let token_b = server.create_key(b);
    let numbers = domestic_numbers(3);
    let dedicated = numbers[0].clone();
    server.cli(&[
        "number",
        "dedicate",
        &dedicated,
        "--company",
        &a.to_string(),
    ]);
    let listed = server.cli(&["number", "list"]);
    let row = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["number"] == dedicated.as_str())
        .unwrap()
        .clone();
    assert_eq!(row["dedicated_to"], a);

    // The running service rebuilds its lease table when it sees the change.
    server
        .wait_for_log(Duration::from_secs(5), |l| {
            l.contains("lease table rebuilt")
        })
        .expect("dedication applied to the running service");

    // B never sees the dedicated number: it gets the two shared ones, then
    // 503 although a number is free (it is A's).
    let mut b_ids = Vec::new();
    let v = server.create_ok(&token_b, &body(RU_PHONE));
    assert_ne!(v["dial_number"], dedicated.as_str(), "B got A's number");
    b_ids.push(v["verification_id"].as_str().unwrap().to_owned());
    let v = server.create_ok(&token_b, &body(RU_PHONE));
    assert_ne!(v["dial_number"], dedicated.as_str());
    b_ids.push(v["verification_id"].as_str().unwrap().to_owned());
    let r = server.create(&token_b, &body(RU_PHONE));
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(r.json()["error"], "no_dial_number_available");

    // A takes its dedicated number first.
    let v = server.create_ok(&token_a, &body(RU_PHONE));
    assert_eq!(v["dial_number"], dedicated.as_str());
    // A's dedicated number is busy; A falls back to the shared pool once B
    // frees a number there.
    assert_eq!(server.create(&token_a, &body(RU_PHONE)).status, 503);
    assert_eq!(server.cancel(&token_b, &b_ids[0]).status, 200);
    let v = server.create_ok(&token_a, &body(RU_PHONE));
    assert_ne!(v["dial_number"], dedicated.as_str());
    assert!(numbers.contains(&v["dial_number"].as_str().unwrap().to_owned()));
    // Both A's dedicated and the shared pool are exhausted now.
    let r = server.create(&token_a, &body(RU_PHONE));
    assert_eq!(r.status, 503);
    assert_eq!(r.header("retry-after"), Some("60"));
    // The international pool is unaffected.
    server.create_ok(&token_a, &body(UK_PHONE));
}

#[test]
fn dedications_survive_a_restart_and_can_be_undone() {
    let mut server = Server::with_pools(1, 0);
    let a = server.create_company("A");
    let b = server.create_company("B");
    let token_b = server.create_key(b);
    let only = domestic_numbers(1).remove(0);
    server.cli(&["number", "dedicate", &only, "--company", &a.to_string()]);
    server.restart();
    assert_eq!(server.create(&token_b, &body(RU_PHONE)).status, 503);
    server.cli(&["number", "undedicate", &only]);
    eventually("undedication applied", || {
        let r = server.create(&token_b, &body(RU_PHONE));
        r.status == 201 && r.json()["dial_number"] == only.as_str()
    });
}
