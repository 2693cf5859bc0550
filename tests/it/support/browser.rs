//! Debian's chromium, headless, for the tests that drive pages in a real
//! browser (`api::explorer`, `dashboard::browser`).
//!
//! Not for: pages read as HTML without a browser (see [`super::dashboard`]).

use headless_chrome::{Browser, LaunchOptions};
use std::ffi::OsStr;
use std::path::Path;
use std::time::Duration;

pub const CHROMIUM: &str = "/usr/bin/chromium";

/// A headless chromium with its own profile in `profile` and a window of
/// `size` pixels; it trusts the service's self-signed certificate.
pub fn browser(profile: &Path, size: (u32, u32)) -> Browser {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: run tools/test.sh (it installs Debian's chromium)"
    );
    // Without the background-networking switches chromium keeps trying to
    // reach outside hosts, which the tests' closed network refuses.
    let args: Vec<&OsStr> = [
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
    ]
    .iter()
    .map(OsStr::new)
    .collect();
    let options = LaunchOptions::default_builder()
        .path(Some(CHROMIUM.into()))
        .headless(true)
        .sandbox(false)
        .ignore_certificate_errors(true)
        .user_data_dir(Some(profile.to_path_buf()))
        .window_size(Some(size))
        .idle_browser_timeout(Duration::from_secs(120))
        .args(args)
        .build()
        .expect("launch options");
    Browser::new(options).expect("starting chromium")
}
