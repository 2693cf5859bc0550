//! The release a running binary is (README, "Operations", "Version"):
//! `dialproof --version` and the `dialproof_build_info` metric carry the
//! workspace version and the git commit the binary was built from.

use crate::support::*;
use std::process::Command;

/// The commit as git names it now (the test runs in the checkout the
/// binary was built from), or `unknown` outside a git checkout, as the
/// build script falls back.
fn expected_commit() -> String {
    Command::new("git")
        .args([
            "-C",
            env!("CARGO_MANIFEST_DIR"),
            "rev-parse",
            "--short=12",
            "HEAD",
        ])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".to_owned())
}

#[test]
fn version_names_the_release_and_the_commit() {
    let out = Command::new(BIN)
        .arg("--version")
        .output()
        .expect("dialproof");
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim_end(),
        format!(
            "dialproof {} (commit {})",
            env!("CARGO_PKG_VERSION"),
            expected_commit()
        )
    );
}

#[test]
fn build_info_metric_carries_version_and_commit() {
    let (_server, ops) = start_with_ops_edited(&pools(1, 0), |c| c);
    let text = scrape_metrics(&ops);
    let line = format!(
        "dialproof_build_info{{version=\"{}\",commit=\"{}\"}} 1",
        env!("CARGO_PKG_VERSION"),
        expected_commit()
    );
    assert!(
        text.lines().any(|l| l == line),
        "no {line:?} in the exposition:\n{text}"
    );
}
