//! Build script: records the git commit the binary is built from, for
//! `dialproof --version` and the `dialproof_build_info` metric
//! (`src/build_info.rs`).
//!
//! It runs `git rev-parse` on the checkout and never fails the build: from
//! a source tarball, or where git is missing, the commit is `unknown`.
//! Nothing is downloaded. Not for: anything else the build needs.

use std::path::Path;
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

fn main() {
    let dir = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| ".".into()),
    );
    let dir = dir.as_path();
    let commit = git(dir, &["rev-parse", "--short=12", "HEAD"])
        .filter(|c| c.bytes().all(|b| b.is_ascii_hexdigit()))
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=DIALPROOF_COMMIT={commit}");
    println!("cargo:rerun-if-changed=src/build.rs");
    // A new commit or checkout moves HEAD and appends to its reflog (a
    // worktree has its own of both): rebuild then, and only then.
    for name in ["HEAD", "logs/HEAD"] {
        if let Some(path) = git(
            dir,
            &["rev-parse", "--path-format=absolute", "--git-path", name],
        ) {
            if Path::new(&path).exists() {
                println!("cargo:rerun-if-changed={path}");
            }
        }
    }
}
