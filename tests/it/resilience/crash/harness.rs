//! The crash harness in CI: `dialproof-crash-loop` with 20 SIGKILLs of the
//! real binary under mixed load (creates, reads, cancels, SIP calls,
//! webhooks to the bundled receiver), which must survive every kill with no
//! invariant violation (tests/README.md, "Reliability"; the full run is 200 kills).
//!
//! The tool is a binary of the `dialproof-tools` package next to the
//! service's binary (`crate::support::tools::tool`).
//!
//! Not for: what one SIGKILL must keep (`super::restart`), shown in detail.

use crate::support::tools::tool;
use crate::support::BIN;
use std::process::Command;

/// tests/README.md, "Reliability": the crash harness's kills break no invariant
/// (20 here; the full run is 200).
#[test]
fn twenty_kills_under_load_break_no_invariant() {
    let tool = tool("dialproof-crash-loop");
    let dir = tempfile::Builder::new()
        .prefix("dialproof-crash-")
        .tempdir()
        .expect("temp dir");
    let out = Command::new(&tool)
        .args(["--bin", BIN, "--kills", "20", "--min-up-ms", "150"])
        .args(["--max-up-ms", "700", "--max-seconds", "80", "--dir"])
        .arg(dir.path())
        .output()
        .expect("running dialproof-crash-loop");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let log = std::fs::read_to_string(dir.path().join("service.log")).unwrap_or_default();
    assert!(
        out.status.success(),
        "{}\n{stdout}\n{stderr}\n--- service log (tail) ---\n{}",
        out.status,
        &log[log.len().saturating_sub(4000)..]
    );
    assert!(stdout.contains("kills survived: 20 "), "{stdout}");
    assert!(stdout.contains("invariant violations: 0\n"), "{stdout}");
    eprintln!("{stdout}");
    // The load did what it is for: verifications created, completed by a
    // call and expired, 503s acknowledged, webhooks received, and every
    // acknowledged Idempotency-Key sampled after a restart replayed its
    // own verification.
    for needle in [
        "created (201)",
        "replays checked after a restart",
        "rejected (503)",
        "webhooks received",
        "\"completed\"",
        "\"expired\"",
    ] {
        assert!(stdout.contains(needle), "no {needle} in:\n{stdout}");
    }
    assert!(!log.contains("panicked"), "{log}");
}
