//! The OpenAPI document at /api/schema/ against independent tools.
//!
//! - the document requires a key like the API and is OpenAPI 3.0.x;
//! - `openapi-spec-validator` (Python, independent of utoipa) accepts it;
//! - schemathesis drives the running service from the document with a fixed
//!   seed and checks that no answer is a 5xx and that every status code,
//!   content type, header and body is documented and matches.
//!
//! The Python tools live in a virtualenv that `tools/test.sh` creates
//! (`target/pyenv`, or `DIALPROOF_PYENV`); without it these tests fail with
//! a message saying so, rather than pass vacuously.
//!
//! Not for: the explorer page in a browser (`api::explorer`).

use crate::support::tools::{pyenv_bin, run_schemathesis};
use crate::support::*;
use std::process::Command;

fn fetch_schema(server: &Server, token: &str) -> (Resp, serde_json::Value) {
    let auth = format!("Bearer {token}");
    let r = server.request("GET", "/api/schema/", &[("Authorization", &auth)], b"");
    assert_eq!(r.status, 200, "{}", r.text());
    let doc = r.json();
    (r, doc)
}

#[test]
fn schema_requires_a_key_and_is_openapi_3_0() {
    let server = Server::with_pools(2, 2);
    let r = server.request("GET", "/api/schema/", &[], b"");
    assert_eq!(r.status, 401);
    assert_eq!(r.header("www-authenticate"), Some("Bearer"));
    let token = server.new_client("schema");
    let (r, doc) = fetch_schema(&server, &token);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert!(
        doc["openapi"].as_str().unwrap().starts_with("3.0."),
        "{}",
        doc["openapi"]
    );
    for path in [
        "/api/v1/verifications/",
        "/api/v1/verifications/{id}/",
        "/api/v1/verifications/{id}/cancel/",
    ] {
        assert!(doc["paths"][path].is_object(), "{path} documented");
    }
    assert_eq!(
        doc["components"]["securitySchemes"]["bearerAuth"]["scheme"],
        "bearer"
    );
    let auth = format!("Bearer {token}");
    let r = server.request("POST", "/api/schema/", &[("Authorization", &auth)], b"");
    assert_eq!(r.status, 405);
}

#[test]
fn an_independent_validator_accepts_the_document() {
    let server = Server::with_pools(1, 1);
    let token = server.new_client("validator");
    let (r, _) = fetch_schema(&server, &token);
    let file = server.dir.path().join("schema.json");
    std::fs::write(&file, &r.body).unwrap();
    let out = Command::new(pyenv_bin("openapi-spec-validator"))
        .arg(&file)
        .output()
        .expect("running openapi-spec-validator");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "validator rejected the schema:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("OK"), "{stdout}");
}

#[test]
fn schemathesis_finds_no_undocumented_or_failing_answer() {
    let server = Server::with_pools(40, 40);
    let company = server.create_company("schemathesis");
    let token = server.create_key(company);
    let prefix = &token["svc_live_".len().."svc_live_".len() + 8];
    // The run sends far more than the default 120 requests a minute.
    server.cli(&["key", "set-limit", prefix, "100000"]);
    let (r, _) = fetch_schema(&server, &token);
    let stdout = run_schemathesis(&server, &r.body, &token, "20261121", &[]);
    // Make sure it really exercised all four operations, including read
    // and cancel of verifications it created (through the schema's links);
    // with this live key, test mode's simulate-call is always the
    // documented 404.
    assert!(stdout.contains("4 selected / 4 total"), "{stdout}");
    assert!(stdout.contains("Tested: 4"), "{stdout}");
    assert!(stdout.contains("Stateful"), "{stdout}");
    assert!(
        !stdout.contains("API Links:    0 covered"),
        "no create -> read/cancel link was followed:\n{stdout}"
    );
    assert!(!stdout.contains(" failed"), "{stdout}");
}
