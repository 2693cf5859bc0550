//! Debian's chromium, headless, for the tests that drive pages in a real
//! browser (`api::explorer`, `dashboard::browser`, `testmode::dashboard`),
//! and the steps they share: signing in, reading an element's text,
//! submitting a form and waiting for the next page.
//!
//! Not for: pages read as HTML without a browser (see [`super::dashboard`]).

use headless_chrome::{Browser, LaunchOptions, Tab};
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

/// The visible text of the first element matching `selector` (waiting for
/// it).
pub fn text(tab: &Tab, selector: &str) -> String {
    tab.wait_for_element(selector)
        .unwrap_or_else(|e| panic!("{selector}: {e}"))
        .get_inner_text()
        .expect("inner text")
}

/// Clicks `selector` (a submit button or a link) and waits until the next
/// page shows `then`.
pub fn submit(tab: &Tab, selector: &str, then: &str) {
    tab.wait_for_element(selector)
        .expect(selector)
        .click()
        .expect("click");
    if tab.wait_for_element(then).is_err() {
        let html = tab.get_content().unwrap_or_default();
        panic!(
            "no {then} after clicking {selector} at {}:\n{html}",
            tab.get_url()
        );
    }
}

/// Signs `email` in through the dashboard's login form at `origin` (the
/// support's one password), ending on the verifications page.
pub fn sign_in(tab: &Tab, origin: &str, email: &str) {
    tab.navigate_to(&format!("{origin}/dashboard/login/"))
        .expect("navigate")
        .wait_until_navigated()
        .expect("login page loads");
    tab.wait_for_element("#email").unwrap().click().unwrap();
    tab.send_character(email).unwrap();
    tab.wait_for_element("#password").unwrap().click().unwrap();
    tab.send_character(super::dashboard::PASSWORD).unwrap();
    submit(tab, "button[type=submit]", "#total");
}
