//! Schemathesis drives the running service from the served document with a
//! test key, so `simulate-call` is reached with real test verifications
//! (through the schema's links from the create) and with generated bodies:
//! every answer must be documented (status, content type, headers, body)
//! and none a 5xx.
//!
//! Not for: the live key's run and the document's validity (`api::schema`).

use super::*;
use crate::support::tools::run_schemathesis;

#[test]
fn schemathesis_with_a_test_key_finds_no_undocumented_or_failing_answer() {
    let server = Server::with_pools(1, 1);
    let company = server.create_company("schemathesis");
    let token = test_key(&server, company);
    let prefix = &token["svc_test_".len().."svc_test_".len() + 8];
    // The run sends far more than the default 120 requests a minute, and
    // leases far more than 100 test numbers.
    server.cli(&["key", "set-limit", prefix, "100000"]);
    server.cli(&["company", "test-pool-size", &company.to_string(), "1000"]);
    let auth = format!("Bearer {token}");
    let r = server.request("GET", "/api/schema/", &[("Authorization", &auth)], b"");
    assert_eq!(r.status, 200, "{}", r.text());
    let stdout = run_schemathesis(
        &server,
        &r.body,
        &token,
        "20261126",
        &[
            "--include-path-regex",
            "simulate-call|/api/v1/verifications/$",
        ],
    );
    assert!(stdout.contains("Tested: 2"), "{stdout}");
    assert!(
        server
            .logs()
            .contains("simulated call completed a verification"),
        "no generated simulate-call reached a pending test verification:\n{stdout}"
    );
    assert!(!stdout.contains(" failed"), "{stdout}");
}
