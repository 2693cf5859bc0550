//! The 503 rejection rows are durable: the 503 is answered only after its
//! row committed through the writer, the row is readable with
//! `dialproof rejection list --json`, and a rejection whose row cannot be
//! written answers the DRF 500 instead of a 503 (nothing was stored, and
//! nothing was created).

mod common;

use common::*;
use serde_json::Value;

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
