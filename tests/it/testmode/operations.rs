//! Test mode on the operator's side: a pending test verification's number
//! survives a restart (recovery restores test leases like live ones, so
//! the simulated call still completes it and the pool stays counted), and
//! `dialproof check` refuses a live number in the test range and a
//! retention out of bounds, with the lines `serve` would print.
//!
//! Not for: the range itself (`engine/src/test_pool.rs`).

use super::*;
use crate::support::BIN;
use serde_json::json;
use std::process::Command;

#[test]
fn a_pending_test_verification_keeps_its_number_across_a_restart() {
    let mut s = Server::with_pools(1, 1);
    let company = s.create_company("acme");
    let token = test_key(&s, company);
    s.cli(&["company", "test-pool-size", &company.to_string(), "1"]);
    let mut created = None;
    eventually("the pool size", || {
        let r = s.create(&token, &body(RU_PHONE));
        if r.status == 201 {
            created = Some(r.json());
        }
        created.is_some() && s.create(&token, &body(RU_PHONE)).status == 503
    });
    let created = created.unwrap();
    s.restart();
    let r = s.create(&token, &body(RU_PHONE));
    assert_eq!(
        r.status,
        503,
        "the restored lease still fills the pool of 1: {}",
        r.text()
    );
    let v = simulate(
        &s,
        &token,
        &id_of(&created),
        &json!({"caller_id": "+79161234567"}),
    )
    .json();
    assert_eq!(v["outcome"], "completed", "{v}");
    // Completion released the number: the pool of 1 issues it again.
    let again = s.create_ok(&token, &body(RU_PHONE));
    assert_eq!(again["dial_number"], created["dial_number"]);
}

#[test]
fn check_refuses_a_live_number_in_the_test_range_and_a_bad_retention() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("dialproof.toml");
    std::fs::write(
        &file,
        "[server]\nhttps_listen = \"127.0.0.1:0\"\nworkers = 1\n\n\
         [storage]\ndata_dir = \"data\"\n\n[api]\ntest_mode_retention_days = 0\n\n\
         [[lines]]\nname = \"a\"\nmode = \"always_up\"\n\
         numbers = [{ number = \"+72000001000\", pool = \"domestic\" }]\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .arg("--config")
        .arg(&file)
        .arg("check")
        .env("NO_COLOR", "1")
        .env("DIALPROOF_LOG", "warn")
        .output()
        .expect("running dialproof check");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines,
        [
            "error: api.test_mode_retention_days must be 1..=365, got 0",
            "error: number +72000001000 is in test mode's reserved range (+72 and nine digits); \
             live numbers must not use it",
        ],
        "{stderr}"
    );
}
