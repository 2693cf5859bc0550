//! A client generated from the served OpenAPI document by
//! `openapi-python-client` (PyPI, independent of utoipa) drives test mode
//! end to end: create with a test key, simulate the call (a national
//! caller number), read it back completed, and a withheld second call; the
//! signed webhook of the test verification arrives at the receiver. What a
//! client's engineers would write in their own CI, from the schema alone.
//!
//! The generator lives in the virtualenv `tools/test.sh` creates
//! (`target/pyenv`, or `DIALPROOF_PYENV`); without it the test fails with a
//! message saying so.
//!
//! Not for: the document's validity or its conformance under fuzzing
//! (`api::schema`).

use super::*;
use crate::support::tools::{pyenv_bin, wait_bounded};
use crate::support::webhooks::*;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The script a client would write against the generated package.
const SCRIPT: &str = r#"
import sys
from dialproof_client import AuthenticatedClient
from dialproof_client.api.verifications import create_verification, read_verification, simulate_call
from dialproof_client.models import CreateVerificationRequest, SimulateCallRequest, SimulatedCall, Verification

base, token, hook = sys.argv[1:4]
client = AuthenticatedClient(base_url=base, token=token, verify_ssl=False)
created = create_verification.sync(client=client, body=CreateVerificationRequest(
    phone="+79123456789", webhook_url=hook, client_ref="ci-1"))
assert isinstance(created, Verification), created
assert created.livemode is False, created
assert created.status == "pending", created
called = simulate_call.sync(client=client, id=created.verification_id,
                            body=SimulateCallRequest(caller_id="89161234567"))
assert isinstance(called, SimulatedCall), called
assert called.outcome == "completed", called
assert called.verification.caller_id_received == "+79161234567", called
assert called.verification.caller_id_source == "simulated", called
got = read_verification.sync(client=client, id=created.verification_id)
assert got.status == "completed" and got.livemode is False, got
again = simulate_call.sync(client=client, id=created.verification_id,
                           body=SimulateCallRequest(caller_id=None))
assert again.outcome == "no_pending_verification", again
print("OK", created.verification_id)
"#;

#[test]
fn a_generated_python_client_drives_the_test_mode_flow() {
    let rx = Receiver::recording(Answer::Status(200));
    let s = Server::with_pools(1, 1);
    let company = s.create_company("ci");
    s.cli(&["company", "dev-urls", &company.to_string(), &rx.base_url()]);
    let token = test_key(&s, company);
    let auth = format!("Bearer {token}");
    let schema = s.request("GET", "/api/schema/", &[("Authorization", &auth)], b"");
    assert_eq!(schema.status, 200, "{}", schema.text());
    let dir = s.dir.path().join("client");
    std::fs::create_dir_all(&dir).unwrap();
    let schema_file = dir.join("schema.json");
    std::fs::write(&schema_file, &schema.body).unwrap();

    let generate = Command::new(pyenv_bin("openapi-python-client"))
        .current_dir(&dir)
        .args(["generate", "--path", schema_file.to_str().unwrap()])
        .args(["--meta", "none", "--output-path", "dialproof_client"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running openapi-python-client");
    let out = wait_bounded(generate, "openapi-python-client", Duration::from_secs(120));
    assert!(
        out.status.success(),
        "generation failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    let base = format!("https://127.0.0.1:{}", s.https.port());
    let run = Command::new(pyenv_bin("python"))
        .current_dir(&dir)
        .env("PYTHONPATH", &dir)
        .args(["-c", SCRIPT, &base, &token, &rx.url("/hook")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running the generated client");
    let out = wait_bounded(run, "the generated client", Duration::from_secs(60));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.starts_with("OK "),
        "the generated client's flow failed:\n{stdout}\n{}\nserver logs:\n{}",
        String::from_utf8_lossy(&out.stderr),
        s.logs()
    );
    let id = stdout.trim().trim_start_matches("OK ").to_owned();
    let hit = rx.wait_for("/hook", 1, Duration::from_secs(10)).remove(0);
    let p = hit.json();
    assert_eq!(p["verification_id"], id.as_str());
    assert_eq!(p["type"], "verification.completed");
    assert_eq!(p["livemode"], false);
}
