//! README "Temporary block": a key that keeps sending after being refused is
//! blocked for 300 s once its refusals within 60 s reach its limit (at least
//! 20); while blocked every request gets 429 with `Retry-After` = the rest
//! of the block, and requests during the block do not extend it.
//!
//! The key's limit is lowered to 20 with the operator CLI so the block
//! starts after 20 allowed requests and 20 refusals. On virtual time
//! (`common::virtual_time`): the `Retry-After` values are exact.

mod common;

use common::virtual_time::VirtualClock;
use common::*;
use std::time::Duration;

const UNKNOWN: &str = "ver_00000000000000000000000000";

fn retry_after(r: &Resp) -> u64 {
    r.header("retry-after")
        .unwrap_or_else(|| panic!("no Retry-After on {}: {}", r.status, r.text()))
        .parse()
        .expect("integer Retry-After")
}

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
