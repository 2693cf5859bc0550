//! Event-to-webhook latency, end to end, on the real binary.
//!
//! Starts `dialproof serve` (release build when run by `cargo bench`) with a
//! loopback webhook receiver as the company's development URL, creates
//! `BENCH_WEBHOOKS` verifications (default 400) at `BENCH_RATE` per second
//! (default 40) with the shortest TTL (30 s), and lets them expire: each
//! expiry is a transition that commits its outbox row, exactly like a call's
//! completion. For each webhook it reports two latencies:
//!
//! - commit to received: from the service's `verification ended` log line
//!   (written by `App::after_transition`, right after the COMMIT that wrote
//!   the outbox row) to the moment the receiver had the whole request;
//! - event to received: from the event moment in the payload (`completed_at`,
//!   the TTL moment) to the same; this adds the expiry timer's wake-up and the
//!   writer's group commit.
//!
//! SIP calls are not wired to the webhook path yet, so the call itself is
//! not in the measurement; the path after the commit is the same.
//!
//! Run: `cargo bench --bench webhook_latency` (about a minute).

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/common_webhook/mod.rs"]
mod common_webhook;

use common::*;
use common_webhook::*;
use serde_json::json;
use std::collections::HashMap;
use std::time::{Duration, Instant};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Microseconds since the epoch of a log line's leading timestamp
/// (`2026-11-21T21:30:00.123456Z ...`).
fn log_time_us(line: &str) -> Option<i64> {
    let ts = line.split_whitespace().next()?;
    let (whole, frac) = ts.strip_suffix('Z')?.split_once('.')?;
    let ms = parse_utc(&format!("{whole}Z"));
    let digits: String = frac.chars().chain("000000".chars()).take(6).collect();
    Some(ms * 1000 + digits.parse::<i64>().ok()?)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn report(name: &str, mut ms: Vec<f64>) {
    ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "{name:<22} n={:<5} p50={:>7.2} ms  p90={:>7.2} ms  p99={:>7.2} ms  max={:>7.2} ms",
        ms.len(),
        percentile(&ms, 0.50),
        percentile(&ms, 0.90),
        percentile(&ms, 0.99),
        ms[ms.len() - 1]
    );
}

fn main() {
    // `cargo bench` passes `--bench`; nothing to parse.
    let n = env_usize("BENCH_WEBHOOKS", 400);
    let rate = env_usize("BENCH_RATE", 40).max(1);
    let rx = Receiver::start(Answer::Status(200));
    let s = Server::start(&pools(n as u64 + 10, 0));
    let company = s.create_company("bench");
    s.cli(&["company", "dev-urls", &company.to_string(), &rx.base()]);
    let token = s.create_key(company);
    let prefix = token.split('_').nth(2).expect("token prefix").to_owned();
    s.cli(&["key", "set-limit", &prefix, "100000"]);

    println!("creating {n} verifications at {rate}/s (ttl 30 s)...");
    let start = Instant::now();
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        let due = start + Duration::from_secs_f64(i as f64 / rate as f64);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let v = s.create_ok(
            &token,
            &json!({"phone": RU_PHONE, "webhook_url": rx.url("/hook"), "ttl_seconds": 30}),
        );
        ids.push(v["verification_id"].as_str().unwrap().to_owned());
    }
    println!("waiting for the {n} webhooks...");
    let hits = rx.wait_for("/hook", n, Duration::from_secs(40 + (n / rate) as u64));

    // Commit moments from the service's log.
    let mut committed: HashMap<String, i64> = HashMap::new();
    for line in s.logs().lines() {
        if !line.contains("verification ended") {
            continue;
        }
        let id = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("verification_id="));
        if let (Some(id), Some(t)) = (id, log_time_us(line)) {
            committed.insert(id.to_owned(), t);
        }
    }
    let mut commit_to_received = Vec::new();
    let mut event_to_received = Vec::new();
    for h in &hits {
        let p = h.json();
        let id = p["verification_id"].as_str().unwrap();
        let event_us = parse_utc(p["completed_at"].as_str().unwrap()) * 1000;
        event_to_received.push((h.at_us - event_us) as f64 / 1000.0);
        if let Some(c) = committed.get(id) {
            commit_to_received.push((h.at_us - c) as f64 / 1000.0);
        }
    }
    assert_eq!(hits.len(), n, "every webhook arrives once");
    println!("webhook latency, {n} webhooks, expiries spread at {rate}/s, receiver on loopback:");
    report("commit -> received", commit_to_received);
    report("event -> received", event_to_received);
}
