//! The two number pools: exhaustion gives the exact 503, the other pool
//! keeps issuing, numbers are never issued twice, the pool is shared by
//! companies, each 503 is logged at WARN, and numbers an operator dedicates
//! to one company go to it first (kept across a restart, and undone).
//!
//! Not for: a number's lease across a reload of the configuration
//! (`ops::reload`) or a restart (`resilience::crash::restart`).

use crate::support::*;
use serde_json::json;
use std::collections::HashSet;
use std::time::Duration;

#[track_caller]
fn assert_503(r: &Resp, what: &str) {
    assert_eq!(r.status, 503, "{what}: {}", r.text());
    assert_json_type(r);
    assert_eq!(r.header("retry-after"), Some("60"), "{what}");
    let v = r.json();
    let obj = v.as_object().unwrap();
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["error", "message", "retry_after"], "{what}: {v}");
    assert_eq!(v["error"], "no_dial_number_available", "{what}");
    assert!(
        v["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{what}: {v}"
    );
    assert_eq!(v["retry_after"], json!(60), "{what}");
}

#[test]
fn exhausted_pool_gives_503_while_the_other_pool_issues() {
    let s = Server::with_pools(2, 2);
    let token = s.new_client("acme");
    let domestic = domestic_numbers(2);
    let international = international_numbers(2);
    let mut issued = HashSet::new();

    for phone in [RU_PHONE, KZ_PHONE] {
        let v = s.create_ok(&token, &body(phone));
        let dial = v["dial_number"].as_str().unwrap().to_owned();
        assert!(domestic.contains(&dial), "{dial} not domestic");
        assert!(issued.insert(dial.clone()), "{dial} issued twice");
    }
    for phone in [RU_PHONE, KZ_PHONE, RU_PHONE] {
        assert_503(
            &s.create(&token, &body(phone)),
            &format!("domestic {phone}"),
        );
    }
    // The WARN line of the rejection.
    let warn = s.wait_for_log(Duration::from_secs(5), |l| {
        l.contains("WARN") && (l.contains("503") || l.to_lowercase().contains("no dial number"))
    });
    assert!(warn.is_some(), "no WARN log line for the 503");

    // International numbers still issue.
    let mut intl_ids = Vec::new();
    for phone in [UK_PHONE, "+12025550123"] {
        let v = s.create_ok(&token, &body(phone));
        let dial = v["dial_number"].as_str().unwrap().to_owned();
        assert!(international.contains(&dial), "{dial} not international");
        assert!(issued.insert(dial.clone()), "{dial} issued twice");
        intl_ids.push(v["verification_id"].as_str().unwrap().to_owned());
    }
    assert_503(&s.create(&token, &body(UK_PHONE)), "international");
    // Cancelling an international one frees an international number only.
    let c = s.cancel(&token, &intl_ids[0]);
    assert_eq!(c.status, 200, "{}", c.text());
    assert_503(
        &s.create(&token, &body(RU_PHONE)),
        "domestic after intl cancel",
    );
    let again = s.create_ok(&token, &body(UK_PHONE));
    assert_eq!(again["dial_number"], c.json()["dial_number"]);
}

#[test]
fn pending_verifications_never_share_a_number() {
    let s = Server::with_pools(6, 0);
    let token = s.new_client("acme");
    let mut seen = HashSet::new();
    let mut ids = Vec::new();
    for _ in 0..6 {
        let v = s.create_ok(&token, &body(RU_PHONE));
        assert!(seen.insert(v["dial_number"].as_str().unwrap().to_owned()));
        ids.push(v["verification_id"].as_str().unwrap().to_owned());
    }
    assert_eq!(
        seen,
        domestic_numbers(6).into_iter().collect::<HashSet<_>>()
    );
    assert_503(&s.create(&token, &body(RU_PHONE)), "7th");
    // Free two, take two: the new ones get exactly the freed numbers.
    let mut freed = HashSet::new();
    for id in &ids[2..4] {
        let c = s.cancel(&token, id).json();
        freed.insert(c["dial_number"].as_str().unwrap().to_owned());
    }
    let mut got = HashSet::new();
    for _ in 0..2 {
        let v = s.create_ok(&token, &body(RU_PHONE));
        got.insert(v["dial_number"].as_str().unwrap().to_owned());
    }
    assert_eq!(got, freed);
    assert_503(&s.create(&token, &body(RU_PHONE)), "after refill");
}

#[test]
fn the_pool_is_shared_by_companies() {
    let s = Server::with_pools(1, 0);
    let a = s.new_client("alpha");
    let b = s.new_client("beta");
    let v = s.create_ok(&a, &body(RU_PHONE));
    assert_503(&s.create(&b, &body(RU_PHONE)), "company b");
    let id = v["verification_id"].as_str().unwrap();
    assert_eq!(s.cancel(&a, id).status, 200);
    let w = s.create_ok(&b, &body(RU_PHONE));
    assert_eq!(w["dial_number"], v["dial_number"]);
    assert_503(&s.create(&a, &body(RU_PHONE)), "company a");
}

#[test]
fn concurrent_creates_never_share_a_number() {
    let s = Server::with_pools(5, 0);
    let token = s.new_client("acme");
    // One request first, so the key is in the service's cache before the
    // burst (concurrent first use of a key is covered in `api::auth`).
    assert_eq!(s.get(&token, "ver_00000000000000000000000000").status, 404);
    for round in 0..3 {
        let results: Vec<Resp> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..16)
                .map(|_| scope.spawn(|| s.create(&token, &body(RU_PHONE))))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut numbers = HashSet::new();
        let mut ids = Vec::new();
        for r in &results {
            match r.status {
                201 => {
                    let v = r.json();
                    assert!(
                        numbers.insert(v["dial_number"].as_str().unwrap().to_owned()),
                        "round {round}: {} issued twice",
                        v["dial_number"]
                    );
                    ids.push(v["verification_id"].as_str().unwrap().to_owned());
                }
                503 => assert_503(r, "concurrent"),
                other => panic!("round {round}: status {other}: {}", r.text()),
            }
        }
        assert_eq!(numbers.len(), 5, "round {round}: successes");
        // Release everything concurrently for the next round.
        std::thread::scope(|scope| {
            for id in &ids {
                let (s, token) = (&s, &token);
                scope.spawn(move || assert_eq!(s.cancel(token, id).status, 200));
            }
        });
    }
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
