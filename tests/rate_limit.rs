//! The per-key sliding window: 120 requests per minute over all three
//! endpoints (error answers count), the 121st is 429 with `Retry-After`,
//! keys are independent, and waiting `Retry-After` seconds is enough. The
//! window test runs on virtual time (`common::virtual_time`), so the
//! `Retry-After` values are exact and nobody waits a minute.

mod common;

use common::*;
use std::time::{Duration, Instant};

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
