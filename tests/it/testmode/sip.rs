//! A real call cannot reach a test number: the provider simulator's INVITE
//! to a test verification's `dial_number` is refused as no line's number
//! (404) and changes nothing; only `simulate-call` completes it.
//!
//! Not for: calls to live numbers (`sip::calls`).

use super::*;
use crate::support::sip::*;
use serde_json::json;

#[test]
fn an_invite_to_a_test_number_is_no_lines_number_and_changes_nothing() {
    let s = Server::start(&sip_config(&trusted_line(2, 603)));
    let token = test_key(&s, s.create_company("acme"));
    let created = s.create_ok(&token, &body(RU_PHONE));
    let dial = created["dial_number"].as_str().unwrap().to_owned();
    let out = sim_call(&s, &dial, "+79161234567");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        !out.status.success(),
        "a real call must not complete it: {stdout}"
    );
    assert!(stdout.contains("404"), "no line has the number: {stdout}");
    let id = id_of(&created);
    assert_eq!(s.get(&token, &id).json()["status"], "pending");
    let v = simulate(&s, &token, &id, &json!({"caller_id": "+79161234567"})).json();
    assert_eq!(v["outcome"], "completed", "{v}");
}
