//! The dashboard end to end in a real headless browser (Debian's chromium
//! over the DevTools protocol), as a person uses it: sign in through the
//! form, create a key and use it on the public API, revoke it with its
//! button and get 401, then see a verification completed by a simulated
//! call and a 503 rejection row with the right totals and success share,
//! and press Retry on a failing receiver's delivery to see a new attempt.
//!
//! With `DIALPROOF_SCREENSHOTS=DIR` the test also saves PNG screenshots of
//! the login, keys, verifications and webhooks pages there (the README's come from
//! `DIALPROOF_SCREENSHOTS=tools/screenshots`).
//!
//! Not for: each page's rules in detail (the other `dashboard` modules, read
//! as HTML).

use crate::support::browser::{submit, text};
use crate::support::dashboard::{create_user, PASSWORD};
use crate::support::sip::*;
use crate::support::webhooks::{Answer, Receiver};
use crate::support::*;
use headless_chrome::protocol::cdp::Page::CaptureScreenshotFormatOption;
use headless_chrome::{Browser, Tab};
use std::time::Duration;

fn browser(profile: &std::path::Path) -> Browser {
    crate::support::browser::browser(profile, (1100, 900))
}

fn screenshot(tab: &Tab, name: &str) {
    let Some(dir) = std::env::var_os("DIALPROOF_SCREENSHOTS") else {
        return;
    };
    let png = tab
        .capture_screenshot(CaptureScreenshotFormatOption::Png, None, None, true)
        .expect("screenshot");
    std::fs::create_dir_all(&dir).expect("screenshot dir");
    std::fs::write(std::path::Path::new(&dir).join(format!("{name}.png")), png).expect("write");
}

#[test]
fn sign_in_create_use_revoke_and_read_the_totals_in_a_browser() {
    let rx = Receiver::recording(Answer::Status(500));
    // One attempt, then the delivery is dead until someone presses Retry.
    let server = Server::start(&format!(
        "[webhooks]\nretry_schedule_seconds = [0]\njitter_percent = 0\n\n{}",
        sip_config(&trusted_line(1, 603))
    ));
    let company = server.create_company("Acme");
    create_user(&server, company, "ann@acme.test");
    let profile = tempfile::tempdir().unwrap();
    let browser = browser(profile.path());
    let tab = browser.new_tab().expect("tab");
    tab.set_default_timeout(Duration::from_secs(30));
    let origin = format!("https://127.0.0.1:{}", server.https.port());

    tab.navigate_to(&format!("{origin}/dashboard/keys/"))
        .unwrap();
    tab.wait_until_navigated().unwrap();
    assert!(
        tab.get_url().ends_with("/dashboard/login/"),
        "{}",
        tab.get_url()
    );
    tab.wait_for_element("#email").unwrap().click().unwrap();
    tab.send_character("ann@acme.test").unwrap();
    tab.wait_for_element("#password").unwrap().click().unwrap();
    tab.send_character(PASSWORD).unwrap();
    screenshot(&tab, "login");
    submit(&tab, "button[type=submit].main", "#total");
    assert!(
        tab.get_url().ends_with("/dashboard/verifications/"),
        "{}",
        tab.get_url()
    );

    tab.navigate_to(&format!("{origin}/dashboard/keys/"))
        .unwrap();
    tab.wait_until_navigated().unwrap();
    tab.wait_for_element("#label").unwrap().click().unwrap();
    tab.send_character("backend").unwrap();
    submit(&tab, "form[action='/api/dashboard/keys'] button", "#token");
    let token = text(&tab, "#token");
    assert!(token.starts_with("svc_live_"), "{token}");
    // The copy button is shown by its script (hidden without JavaScript).
    assert!(tab.wait_for_element("#copy").is_ok());
    screenshot(&tab, "keys");

    tab.navigate_to(&format!("{origin}/dashboard/webhooks/"))
        .unwrap();
    tab.wait_for_element("#url").unwrap().click().unwrap();
    tab.send_character(&rx.base_url()).unwrap();
    submit(
        &tab,
        "form[action='/dashboard/webhooks/dev-url/add/'] button",
        "li code",
    );
    let hook = serde_json::json!({"phone": RU_PHONE, "webhook_url": rx.url("/hook")});
    let v = server.create_ok(&token, &hook);
    assert_eq!(server.create(&token, &body("+79123456700")).status, 503);
    let out = sim_call(&server, v["dial_number"].as_str().unwrap(), "+79161234567");
    assert!(out.status.success(), "{out:?}");

    tab.navigate_to(&format!("{origin}/dashboard/keys/"))
        .unwrap();
    tab.wait_until_navigated().unwrap();
    submit(
        &tab,
        "form[action='/dashboard/keys/revoke/'] button",
        "#label",
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !text(&tab, "table").contains("отозван") {
        assert!(
            std::time::Instant::now() < deadline,
            "key not shown revoked"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(server.create(&token, &body(RU_PHONE)).status, 401);

    tab.navigate_to(&format!("{origin}/dashboard/verifications/"))
        .unwrap();
    tab.wait_until_navigated().unwrap();
    assert_eq!(text(&tab, "#total"), "2");
    assert_eq!(text(&tab, "#completed"), "1");
    assert_eq!(text(&tab, "#share"), "50.0 %");
    let table = text(&tab, "table");
    assert!(table.contains("all lines busy"), "{table}");
    assert!(table.contains("+79161234567"), "{table}");
    screenshot(&tab, "verifications");

    // The receiver answered 500 once; Retry sends a second attempt.
    rx.wait_for("/hook", 1, Duration::from_secs(20));
    let attempts = |n: usize| {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            tab.navigate_to(&format!("{origin}/dashboard/webhooks/"))
                .unwrap();
            tab.wait_until_navigated().unwrap();
            let seen = tab
                .find_elements("tr.attempt")
                .map(|e| e.len())
                .unwrap_or(0);
            if seen == n {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{seen} attempts shown, not {n}"
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    };
    attempts(1);
    submit(
        &tab,
        "form[action='/dashboard/webhooks/retry/'] button",
        "#url",
    );
    rx.wait_for("/hook", 2, Duration::from_secs(20));
    attempts(2);
    assert!(text(&tab, ".delivery").contains("500"));
    screenshot(&tab, "webhooks");
    // The log is below the settings: scroll to it for its own picture.
    tab.wait_for_element(".delivery")
        .expect("delivery log")
        .scroll_into_view()
        .expect("scroll");
    screenshot(&tab, "webhooks-log");
}
