//! Test mode end to end, over HTTPS with the bundled webhook receiver:
//! a test key's whole flow with a simulated call ([`flow`]), what a
//! simulated call answers in each state and for each bad body
//! ([`simulate`]), test and live never seeing each other's data
//! ([`isolation`]), the test pools apart from the live ones and the magic
//! 503 ([`pools`]), the purge after the retention ([`purge`]), the
//! dashboard's test key and test/live switch in a browser ([`dashboard`]),
//! a generated Python client ([`client`]), schemathesis with a test key
//! ([`schema`]), a restart and `dialproof check` ([`operations`]), and a
//! real INVITE to a test number ([`sip`]).
//!
//! Not for: the number range and the decision order themselves (unit tests
//! in `engine/src/test_pool.rs` and `engine/src/simulated_call.rs`).

mod client;
mod dashboard;
mod flow;
mod isolation;
mod operations;
mod pools;
mod purge;
mod schema;
mod simulate;
mod sip;

use crate::support::*;
use serde_json::Value;

/// Creates a test key (`key create --test`) for `company`; returns the
/// full token.
pub fn test_key(s: &Server, company: i64) -> String {
    let company = company.to_string();
    let v = s.cli(&[
        "key",
        "create",
        "--company",
        &company,
        "--label",
        "ci",
        "--test",
    ]);
    assert_eq!(v["livemode"], false, "{v}");
    let token = v["token"].as_str().expect("a token").to_owned();
    assert!(token.starts_with("svc_test_"), "{token}");
    token
}

/// `POST .../{id}/simulate-call/` with `body` as JSON.
pub fn simulate(s: &Server, token: &str, id: &str, body: &Value) -> Resp {
    simulate_raw(
        s,
        token,
        id,
        body.to_string().as_bytes(),
        "application/json",
    )
}

/// `POST .../{id}/simulate-call/` with raw bytes of `content_type`.
pub fn simulate_raw(s: &Server, token: &str, id: &str, body: &[u8], content_type: &str) -> Resp {
    let auth = format!("Bearer {token}");
    s.request(
        "POST",
        &format!("{COLLECTION}{id}/simulate-call/"),
        &[("Authorization", &auth), ("Content-Type", content_type)],
        body,
    )
}

/// The `id` of a Verification object.
pub fn id_of(v: &Value) -> String {
    v["verification_id"].as_str().expect("an id").to_owned()
}
