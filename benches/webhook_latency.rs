//! Call-to-webhook latency, end to end, on the real binary.
//!
//! Starts `dialproof serve` (the release build under `cargo bench`) with a
//! loopback webhook receiver as the company's development URL, and measures
//! for every webhook the time until the receiver had the whole request:
//!
//! - `BENCH_MODE=call` (the default): `BENCH_WEBHOOKS` verifications
//!   (default 200), each completed by a real SIP call from sipp (one sipp
//!   run per call, sequential). "call" is the payload's `completed_at`, the
//!   moment the service received the INVITE.
//! - `BENCH_MODE=expiry`: `BENCH_WEBHOOKS` verifications (default 400)
//!   created at `BENCH_RATE` per second (default 40) and left to expire
//!   (30 s TTL). "event" is the TTL moment; it adds the expiry timer's
//!   wake-up and the writer's group commit.
//!
//! Both modes also report "commit": from the service's `verification ended`
//! log line (`App::after_transition`, microseconds after the COMMIT of the
//! status change and its outbox row, just after the driver was woken) to
//! the receiver.
//!
//! Run: `cargo bench --bench webhook_latency` (under a minute), or
//! `BENCH_MODE=expiry cargo bench --bench webhook_latency`.

// The integration tests' harness, included by path: the bench drives the
// service as the webhook tests do, and uses only part of the harness.
#[allow(dead_code, unused_imports)]
#[path = "../tests/it/support/mod.rs"]
mod support;

use serde_json::json;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use support::webhooks::*;
use support::*;

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
    // `cargo bench` passes `--bench`; the settings come from the environment.
    let mode = std::env::var("BENCH_MODE").unwrap_or_else(|_| "call".into());
    let rx = Receiver::recording(Answer::Status(200));
    let (s, hits, event_name) = match mode.as_str() {
        "call" => calls(&rx, env_usize("BENCH_WEBHOOKS", 200)),
        "expiry" => expiries(
            &rx,
            env_usize("BENCH_WEBHOOKS", 400),
            env_usize("BENCH_RATE", 40).max(1),
        ),
        other => panic!("BENCH_MODE must be call or expiry, got {other:?}"),
    };

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
    println!(
        "webhook latency ({mode} mode), {} webhooks, receiver on loopback:",
        hits.len()
    );
    report(&format!("{event_name} -> received"), event_to_received);
    report("commit -> received", commit_to_received);
}

/// A company whose development URL is the receiver, and its token with a
/// limit high enough for the run.
fn client(s: &Server, rx: &Receiver) -> String {
    let company = s.create_company("bench");
    s.cli(&["company", "dev-urls", &company.to_string(), &rx.base_url()]);
    let token = s.create_key(company);
    let prefix = token.split('_').nth(2).expect("token prefix").to_owned();
    s.cli(&["key", "set-limit", &prefix, "100000"]);
    token
}

fn calls(rx: &Receiver, n: usize) -> (Server, Vec<Hit>, &'static str) {
    let s = Server::start(&support::sip::sip_config(&support::sip::trusted_line(
        n as u64 + 10,
        603,
    )));
    let token = client(&s, rx);
    let dir = support::sip::workdir();
    let sf = support::sip::scenario(
        dir.path(),
        "call.xml",
        &[
            ("FROM_HEADER", &support::sip::from_user("89161234567")),
            ("HEADERS", "X-Bench: webhook"),
            ("CODE", "603"),
        ],
    );
    let sip = support::sip::sip_addr(&s);
    println!("{n} verifications, each completed by a sipp call...");
    for i in 0..n {
        let v = s.create_ok(
            &token,
            &json!({"phone": RU_PHONE, "webhook_url": rx.url("/hook"), "ttl_seconds": 600}),
        );
        let dial = v["dial_number"].as_str().unwrap();
        let out = support::sip::run_uac(dir.path(), &sf, sip, dial, "127.0.0.1", 1);
        support::sip::assert_sipp_ok(&out, dir.path(), &s);
        // Every call's webhook before the next call: one at a time.
        rx.wait_for("/hook", i + 1, Duration::from_secs(10));
    }
    let hits = rx.wait_for("/hook", n, Duration::from_secs(10));
    assert_eq!(hits.len(), n, "every webhook arrives once");
    (s, hits, "call")
}

fn expiries(rx: &Receiver, n: usize, rate: usize) -> (Server, Vec<Hit>, &'static str) {
    let s = Server::start(&pools(n as u64 + 10, 0));
    let token = client(&s, rx);
    println!("creating {n} verifications at {rate}/s (ttl 30 s)...");
    let start = Instant::now();
    for i in 0..n {
        let due = start + Duration::from_secs_f64(i as f64 / rate as f64);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        s.create_ok(
            &token,
            &json!({"phone": RU_PHONE, "webhook_url": rx.url("/hook"), "ttl_seconds": 30}),
        );
    }
    println!("waiting for the {n} webhooks...");
    let hits = rx.wait_for("/hook", n, Duration::from_secs(40 + (n / rate) as u64));
    assert_eq!(hits.len(), n, "every webhook arrives once");
    (s, hits, "event")
}
