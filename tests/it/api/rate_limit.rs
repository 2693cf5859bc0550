//! The per-key rate limit: one sliding window of 60 s per key (120 requests
//! by default, over all three endpoints, error answers counting), the 429
//! with `Retry-After` past it, limits an operator sets per key (raised,
//! lowered, back to the default, kept across a restart), and the temporary
//! block of a key that keeps sending after being refused.
//!
//! The window and block tests run on virtual time
//! (`crate::support::virtual_time`), so the `Retry-After` values are exact
//! and nobody waits a minute or five.
//!
//! Not for: the dashboard's login limit (`dashboard::sessions`) or its
//! key-creation limit (`dashboard::keys`).

use crate::support::virtual_time::VirtualClock;
use crate::support::*;
use std::time::{Duration, Instant};

const UNKNOWN: &str = "ver_00000000000000000000000000";

fn retry_after(r: &Resp) -> u64 {
    r.header("retry-after")
        .unwrap_or_else(|| panic!("no Retry-After on {}: {}", r.status, r.text()))
        .parse()
        .expect("integer Retry-After")
}

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

#[test]
fn sliding_window_of_120_per_key() {
    let (s, clock) = Server::start_virtual(&pools(2, 2));
    let company = s.create_company("acme");
    let token = s.create_key(company);
    let other = s.create_key(company);
    let auth = format!("Bearer {token}");
    let unknown = format!("{COLLECTION}ver_00000000000000000000000000/");
    let unknown_cancel = format!("{COLLECTION}ver_00000000000000000000000000/cancel/");
    let create = body(RU_PHONE).to_string();
    let bad_create = serde_json::json!({"phone": "1", "webhook_url": WEBHOOK}).to_string();

    let mut conn = s.connect();
    let mut statuses = std::collections::BTreeMap::<u16, u32>::new();
    for i in 0..120 {
        let headers = [
            ("Authorization", auth.as_str()),
            ("Content-Type", "application/json"),
        ];
        let r = match i % 6 {
            // 2 creates succeed, the rest are 503s: they count too.
            0 => conn.request("POST", COLLECTION, &headers, create.as_bytes()),
            1 => conn.request("GET", &unknown, &headers, b""),
            2 => conn.request("POST", &unknown_cancel, &headers, b""),
            3 => conn.request("PUT", COLLECTION, &headers, b"{}"),
            4 => conn.request("POST", COLLECTION, &headers, bad_create.as_bytes()),
            _ => conn.request("POST", COLLECTION, &headers, b"{"),
        };
        assert_ne!(r.status, 429, "request {} throttled: {}", i + 1, r.text());
        *statuses.entry(r.status).or_default() += 1;
    }
    assert_eq!(
        statuses,
        [(201, 2), (400, 40), (404, 40), (405, 20), (503, 18)]
            .into_iter()
            .collect(),
        "answers to the 120 requests"
    );

    // The 121st, on the same connection and on a new one.
    let r = conn.request("GET", &unknown, &[("Authorization", auth.as_str())], b"");
    assert_eq!(r.status, 429, "121st: {}", r.text());
    assert_json_type(&r);
    let retry: u64 = r
        .header("retry-after")
        .expect("Retry-After on 429")
        .parse()
        .expect("integer Retry-After");
    // All 120 came at one virtual moment: the window frees a place exactly
    // a minute later.
    assert_eq!(retry, 60, "Retry-After");
    assert_eq!(r.json(), serde_json::json!({ "detail": throttled(retry) }));
    drop(conn);
    clock.advance(Duration::from_secs(59));
    let r2 = s.get(&token, "ver_00000000000000000000000000");
    assert_eq!(r2.status, 429, "{}", r2.text());
    let retry2: u64 = r2.header("retry-after").unwrap().parse().unwrap();
    assert_eq!(retry2, 1, "59 s later");
    assert_eq!(r2.detail(), throttled(retry2));

    // Another key (same company) has its own window.
    let o = s.get(&other, "ver_00000000000000000000000000");
    assert_eq!(o.status, 404, "other key: {}", o.text());
    let oc = s.create(&other, &body(UK_PHONE));
    assert_eq!(oc.status, 201, "other key create: {}", oc.text());

    // After Retry-After the key is let through again. Only one request:
    // hammering a throttled key may get it blocked.
    clock.advance(Duration::from_secs(retry2));
    let after = s.get(&token, "ver_00000000000000000000000000");
    assert_eq!(after.status, 404, "after Retry-After: {}", after.text());
}

#[test]
fn operator_set_key_limit_applies() {
    let mut s = Server::prepare(&pools(1, 0));
    let token = s.new_client("acme");
    let prefix = token[9..17].to_owned();
    let out = s.cli(&["key", "set-limit", &prefix, "3"]);
    assert_eq!(out["rate_limit_per_minute"], 3, "{out}");
    s.launch();

    let other = s.new_client("beta");
    let started = Instant::now();
    for i in 0..3 {
        let r = s.get(&token, "ver_00000000000000000000000000");
        assert_eq!(r.status, 404, "request {}: {}", i + 1, r.text());
    }
    let r = s.get(&token, "ver_00000000000000000000000000");
    assert_eq!(r.status, 429, "4th: {}", r.text());
    let retry: u64 = r.header("retry-after").unwrap().parse().unwrap();
    let lower = 60u64.saturating_sub(started.elapsed().as_secs() + 1);
    assert!((lower..=60).contains(&retry), "Retry-After {retry}");
    assert_eq!(r.detail(), throttled(retry));
    // Other keys keep the default.
    for _ in 0..5 {
        assert_eq!(s.get(&other, "ver_00000000000000000000000000").status, 404);
    }
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

/// README, "The API" (Temporary block): a key that keeps
/// sending after being refused is blocked for 300 s once its refusals within
/// 60 s reach its limit (at least 20); while blocked every request gets 429
/// with `Retry-After` = the rest of the block, and requests during the block
/// do not extend it. The key's limit is lowered to 20 with the operator CLI
/// so the block starts after 20 allowed requests and 20 refusals.
#[test]
fn a_key_that_keeps_sending_is_blocked_for_300_seconds_and_the_block_is_not_extended() {
    let mut s = Server::prepare(&pools(1, 0));
    let token = s.new_client("hammer");
    let prefix = token[9..17].to_owned();
    let out = s.cli(&["key", "set-limit", &prefix, "20"]);
    assert_eq!(out["rate_limit_per_minute"], 20, "{out}");
    let clock = VirtualClock::new();
    s.launch_in_process(&clock);
    let other = s.new_client("bystander");

    let auth = format!("Bearer {token}");
    let path = format!("{COLLECTION}{UNKNOWN}/");
    let mut conn = s.connect();
    let mut send = || conn.request("GET", &path, &[("Authorization", auth.as_str())], b"");

    // The limit: 20 requests within the minute are answered.
    for i in 0..20 {
        let r = send();
        assert_eq!(r.status, 404, "request {}: {}", i + 1, r.text());
    }
    // Refusals 1..19 are window refusals: Retry-After within the window.
    for i in 0..19 {
        let r = send();
        assert_eq!(r.status, 429, "refusal {}: {}", i + 1, r.text());
        let retry = retry_after(&r);
        assert!(
            (1..=60).contains(&retry),
            "refusal {} is not a window refusal: Retry-After {retry}",
            i + 1
        );
    }
    // The 20th refusal within 60 s starts the block (all 40 requests came
    // at one virtual moment).
    let r = send();
    assert_eq!(r.status, 429, "20th refusal: {}", r.text());
    let first = retry_after(&r);
    assert_eq!(first, 300, "the block's Retry-After");
    assert_eq!(r.detail(), throttled(first));

    // Keep sending during the block: every answer is 429 with the rest of
    // the block, and none of them pushes its end back.
    let mut last = first;
    for _ in 0..30 {
        let r = send();
        assert_eq!(r.status, 429, "{}", r.text());
        let retry = retry_after(&r);
        assert!(retry <= last, "Retry-After grew from {last} to {retry}");
        assert!(retry >= 240, "Retry-After {retry} during the block");
        last = retry;
    }
    clock.advance(Duration::from_secs(10));
    let r = send();
    assert_eq!(r.status, 429, "{}", r.text());
    assert_eq!(
        retry_after(&r),
        290,
        "10 s into the block: the requests during it extended it"
    );

    // Another key is not affected.
    assert_eq!(s.get(&other, UNKNOWN).status, 404);

    // After the window has passed (every allowed and refused request is
    // older than 60 s) the key is still refused: it is the block, not the
    // window, that refuses it. One request only.
    clock.advance(Duration::from_secs(52));
    let r = s.get(&token, UNKNOWN);
    assert_eq!(r.status, 429, "after the window: {}", r.text());
    assert_eq!(retry_after(&r), 238, "62 s into a 300 s block");
    assert_eq!(r.detail(), throttled(238));

    // The block ends at its 300th second, and the key is served again.
    clock.advance(Duration::from_secs(237));
    assert_eq!(retry_after(&s.get(&token, UNKNOWN)), 1, "299 s in");
    clock.advance(Duration::from_secs(1));
    let r = s.get(&token, UNKNOWN);
    assert_eq!(r.status, 404, "after the block: {}", r.text());
}
