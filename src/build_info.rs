//! What this binary is: the release version (the workspace's) and the git
//! commit it was built from (recorded by `src/build.rs`; `unknown` when built
//! outside a git checkout), for `dialproof --version` and the
//! `dialproof_build_info` metric.
//!
//! Not for: the database schema's version (`dialproof_storage`).

/// The release, from the workspace's `Cargo.toml`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The git commit (12 hex digits), or `unknown`.
pub const COMMIT: &str = env!("DIALPROOF_COMMIT");
/// What `dialproof --version` prints after the program's name.
pub const VERSION_LINE: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("DIALPROOF_COMMIT"),
    ")"
);
