//! The test pools are apart from the live ones, and per company: a full
//! live pool leaves test creates working and the reverse, one company's
//! full test pool leaves another's working, the size is the company's
//! setting, the same 503 answers a full test pool, and the magic phone
//! always gets it.
//!
//! Not for: which numbers a test pool holds (`engine/src/test_pool.rs`).

use super::*;
use serde_json::json;

#[track_caller]
fn assert_no_number(r: &Resp, what: &str) {
    assert_eq!(r.status, 503, "{what}: {}", r.text());
    assert_eq!(r.header("retry-after"), Some("60"), "{what}");
    let v = r.json();
    assert_eq!(v["error"], "no_dial_number_available", "{what}: {v}");
    assert_eq!(v["retry_after"], json!(60), "{what}");
}

#[test]
fn a_full_live_pool_leaves_test_creates_working() {
    let s = Server::with_pools(1, 0);
    let company = s.create_company("acme");
    let live = s.create_key(company);
    let test = test_key(&s, company);
    let live_number = s.create_ok(&live, &body(RU_PHONE))["dial_number"].clone();
    assert_eq!(live_number, domestic_numbers(1)[0].as_str());
    assert_no_number(&s.create(&live, &body(RU_PHONE)), "the live pool is full");
    assert_no_number(
        &s.create(&live, &body(UK_PHONE)),
        "no live international numbers",
    );
    let mut dials = std::collections::HashSet::new();
    for phone in [RU_PHONE, RU_PHONE, UK_PHONE, KZ_PHONE] {
        let v = s.create_ok(&test, &body(phone));
        let dial = v["dial_number"].as_str().unwrap().to_owned();
        assert_ne!(dial, live_number.as_str().unwrap());
        assert!(dials.insert(dial.clone()), "{dial} issued twice");
    }
}

#[test]
fn a_full_test_pool_leaves_live_creates_and_other_companies_working() {
    let s = Server::with_pools(2, 1);
    let acme = s.create_company("acme");
    let live = s.create_key(acme);
    let test = test_key(&s, acme);
    let other = test_key(&s, s.create_company("other"));
    let v = s.cli(&["company", "test-pool-size", &acme.to_string(), "2"]);
    assert_eq!(v["test_pool_size"], 2);
    let mut ids = Vec::new();
    eventually("the company's test pool size", || {
        let r = s.create(&test, &body(RU_PHONE));
        if r.status == 201 {
            ids.push(id_of(&r.json()));
        }
        ids.len() >= 2 && s.create(&test, &body(RU_PHONE)).status == 503
    });
    assert_no_number(
        &s.create(&test, &body(RU_PHONE)),
        "acme's domestic test pool",
    );
    s.create_ok(&test, &body(UK_PHONE));
    // Live numbers are untouched by the full test pool.
    for phone in [RU_PHONE, RU_PHONE, UK_PHONE] {
        let v = s.create_ok(&live, &body(phone));
        assert_eq!(v["livemode"], true);
    }
    // Another company's test pool is its own (100 by default).
    for _ in 0..5 {
        s.create_ok(&other, &body(RU_PHONE));
    }
    // A cancel frees a test number like a live one.
    assert_eq!(s.cancel(&test, &ids[0]).status, 200);
    s.create_ok(&test, &body(RU_PHONE));
}

#[test]
fn the_magic_phone_always_gets_the_503_in_test_mode_only() {
    let s = Server::with_pools(1, 1);
    let company = s.create_company("acme");
    let test = test_key(&s, company);
    let live = s.create_key(company);
    let magic = "+442079460503";
    for _ in 0..2 {
        assert_no_number(&s.create(&test, &body(magic)), "the magic phone");
    }
    s.create_ok(&test, &body(UK_PHONE));
    // Validation still comes first: a bad field is the 400, not the 503.
    let r = s.create(&test, &json!({"phone": magic, "webhook_url": "nope"}));
    assert_eq!(r.status, 400, "{}", r.text());
    // A live key gets a real number for it (it is a valid phone).
    s.create_ok(&live, &body(magic));
}

/// The operator's "pool exhausted" alert reads the live 503s only: test
/// mode's creates and 503s (the magic phone) count in a family of their
/// own, and log no WARNING.
#[test]
fn test_mode_creates_and_503s_are_counted_apart_from_live_ones() {
    use crate::support::ops::{metric, start_with_ops};
    let (s, ops) = start_with_ops(&pools(1, 1));
    let test = test_key(&s, s.create_company("acme"));
    s.create_ok(&test, &body(RU_PHONE));
    assert_no_number(&s.create(&test, &body("+442079460503")), "magic");
    let live_503 = |pool: &str| {
        metric(
            ops,
            &format!("dialproof_creates_total{{outcome=\"no_number\",pool=\"{pool}\"}}"),
        )
    };
    assert_eq!(live_503("domestic"), Some(0.0));
    assert_eq!(live_503("international"), Some(0.0));
    assert_eq!(
        metric(ops, "dialproof_creates_total{outcome=\"created\"}"),
        Some(0.0)
    );
    assert_eq!(
        metric(
            ops,
            "dialproof_test_mode_creates_total{outcome=\"created\"}"
        ),
        Some(1.0)
    );
    assert_eq!(
        metric(
            ops,
            "dialproof_test_mode_creates_total{outcome=\"no_number\"}"
        ),
        Some(1.0)
    );
    assert!(
        !s.logs()
            .lines()
            .any(|l| l.contains("WARN") && l.contains("no dial number")),
        "a test 503 is not a live shortage"
    );
}
