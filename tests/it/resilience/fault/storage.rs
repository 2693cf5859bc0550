//! The storage writer failing under the real binary, and the rejection
//! rows a 503 promises:
//!
//! - a write that fails answers DRF's 500 body, leaves nothing half-written
//!   (the number is released) and the service recovers;
//! - a 503 is an acknowledged rejection: it is answered only after its row
//!   committed through the writer (readable with `dialproof rejection list
//!   --json`); a rejection whose row cannot be written answers the DRF 500
//!   instead (nothing stored, nothing created). Before this, the row was
//!   written after the answer, fire-and-forget, and a kill could lose
//!   answered rejections (the crash harness, `resilience::crash::harness`,
//!   found 2 of 3 348).
//!
//! Failures come from the writer's fail points (`DIALPROOF_FAILPOINTS`).
//!
//! Not for: a disk that is really full (`super::disk_full`).

use crate::support::*;
use serde_json::{json, Value};

fn rejection_rows(s: &Server) -> i64 {
    rusqlite::Connection::open(s.data_dir.join("dialproof.db"))
        .expect("opening the db")
        .query_row("SELECT count(*) FROM rejections", [], |r| r.get(0))
        .expect("counting rejections")
}

fn rejections(server: &Server, company: Option<i64>) -> Vec<Value> {
    let company = company.map(|c| c.to_string());
    let mut args = vec!["rejection", "list", "--limit", "1000"];
    if let Some(c) = &company {
        args.extend(["--company", c.as_str()]);
    }
    let out = server.cli_output(&args);
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON array");
    v.as_array().expect("array").clone()
}

/// README, "The API" (Durability): a storage failure
/// answers the DRF 500 body, leaves nothing half-written and releases the
/// number; the service recovers without a restart.
#[test]
fn storage_failure_answers_500_releases_the_number_and_recovers() {
    let mut s = Server::prepare(&pools(2, 0));
    let token = s.new_client("Acme");
    // The next two write operations fail; with no pending rows there are no
    // writes before the listeners open, so they are the first two creates.
    s.set_env("DIALPROOF_FAILPOINTS", "writer.op=2*error");
    s.launch();

    for _ in 0..2 {
        let r = s.create(&token, &body(RU_PHONE));
        assert_eq!(r.status, 500, "{}", r.text());
        assert_json_type(&r);
        assert_eq!(r.json(), json!({ "detail": SERVER_ERROR }));
    }

    // Nothing half-written: no verification row exists...
    let db = s.data_dir.join("dialproof.db");
    let pending = || {
        dialproof_storage::Reader::open(&db)
            .expect("reader")
            .pending_verifications()
            .expect("pending rows")
            .len()
    };
    assert_eq!(pending(), 0, "a failed create left a pending row");

    // ...and both numbers the failed creates took are free again: a pool of
    // exactly two still gives two creates (a leaked lease would make one of
    // them 503).
    let a = s.create_ok(&token, &body(RU_PHONE));
    let b = s.create_ok(&token, &body(KZ_PHONE));
    assert_verification(&a);
    assert_verification(&b);
    let mut issued = vec![
        a["dial_number"].as_str().unwrap().to_owned(),
        b["dial_number"].as_str().unwrap().to_owned(),
    ];
    issued.sort();
    assert_eq!(issued, domestic_numbers(2));
    assert_eq!(pending(), 2);
    // The service stays healthy: the created rows read back, and the pool
    // is now really empty.
    for v in [&a, &b] {
        let id = v["verification_id"].as_str().unwrap();
        let g = s.get(&token, id);
        assert_eq!(g.status, 200, "{}", g.text());
        assert_eq!(g.json()["status"], "pending");
    }
    assert_eq!(s.create(&token, &body(RU_PHONE)).status, 503);
}

#[test]
fn a_503_waits_for_its_rejection_row_and_is_a_500_without_it() {
    // International numbers only: a Russian phone finds no number at once.
    let mut s = Server::prepare(&pools(0, 1));
    let token = s.new_client("acme");
    s.set_env("DIALPROOF_FAILPOINTS", "writer.op=1*error");
    s.launch();

    let r = s.create(&token, &body(RU_PHONE));
    assert_eq!(r.status, 500, "{}", r.text());
    assert_eq!(r.json(), json!({ "detail": SERVER_ERROR }));
    assert_eq!(rejection_rows(&s), 0);

    let r = s.create(&token, &body(RU_PHONE));
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(r.header("retry-after"), Some("60"));
    assert_eq!(r.json()["error"], "no_dial_number_available");
    // Committed before the answer: there now, not eventually.
    assert_eq!(rejection_rows(&s), 1);
}

#[test]
fn every_503_is_a_stored_row_listed_by_the_cli() {
    let server = Server::with_pools(1, 0);
    let acme = server.create_company("Acme");
    let token = server.create_key(acme);
    let other = server.new_client("Other");
    assert_eq!(server.create(&token, &body("+79123456789")).status, 201);
    for phone in ["+79123456780", "+79123456781", "+79123456782"] {
        let r = server.create(&token, &body(phone));
        assert_eq!(r.status, 503, "{}", r.text());
    }
    assert_eq!(server.create(&other, &body("+79990000000")).status, 503);
    // Read at once, without polling: each 503 was sent after its COMMIT.
    let rows = rejections(&server, Some(acme));
    assert_eq!(rows.len(), 3, "{rows:?}");
    let phones: Vec<&str> = rows.iter().map(|r| r["phone"].as_str().unwrap()).collect();
    assert_eq!(phones, ["+79123456782", "+79123456781", "+79123456780"]);
    for r in &rows {
        assert_eq!(r["status"], "failed");
        assert_eq!(r["reason"], "all lines busy");
        assert_eq!(r["pool"], "domestic");
        assert_eq!(r["company_id"], acme);
        assert!(parse_utc(r["created_at"].as_str().unwrap()) > 0);
    }
    assert_eq!(rejections(&server, None).len(), 4);
    let bad = server.cli_output(&["rejection", "list", "--limit", "0"]);
    assert!(!bad.status.success());
}

#[test]
fn a_rejection_that_cannot_be_stored_answers_500_not_503() {
    let mut server = Server::prepare(&pools(0, 1));
    let token = server.new_client("Acme");
    server.set_env("DIALPROOF_FAILPOINTS", "writer.op=error");
    server.launch();
    let r = server.create(&token, &body("+79123456789"));
    assert_eq!(r.status, 500, "{}", r.text());
    assert_eq!(r.detail(), "Произошла ошибка сервера.");
    server.stop();
    assert!(rejections(&server, None).is_empty());
}
