//! Schemathesis drives the running service from the served document with a
//! test key, so `simulate-call` is reached with real test verifications
//! (through the schema's links from the create) and with generated bodies:
//! every answer must be documented (status, content type, headers, body)
//! and none a 5xx.
//!
//! Not for: the live key's run and the document's validity (`api::schema`).

use super::*;
use crate::support::tools::pyenv_bin;
use std::process::Command;

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
    let file = server.dir.path().join("schema.json");
    std::fs::write(&file, &r.body).unwrap();
    let base = format!("https://127.0.0.1:{}", server.https.port());
    let out = Command::new(pyenv_bin("schemathesis"))
        .current_dir(server.dir.path())
        .args(["run", file.to_str().unwrap()])
        .args(["--url", &base])
        .args(["--header", &format!("Authorization: Bearer {token}")])
        .args(["--tls-verify", "false"])
        .args(["--seed", "20261126"])
        .args(["--max-examples", "40"])
        .args([
            "--include-path-regex",
            "simulate-call|/api/v1/verifications/$",
        ])
        .args([
            "--checks",
            "not_a_server_error,status_code_conformance,content_type_conformance,\
             response_headers_conformance,response_schema_conformance",
        ])
        .args(["--mode", "all"])
        .args(["--no-color"])
        .env("SCHEMATHESIS_HOOKS", "")
        .output()
        .expect("running schemathesis");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "schemathesis found failures:\n{stdout}\n{}\nserver logs:\n{}",
        String::from_utf8_lossy(&out.stderr),
        server.logs()
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
