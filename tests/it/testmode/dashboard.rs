//! The dashboard's test/live switch in a real headless browser (Debian's
//! chromium): a "test key" is created from the keys page, used on the API
//! with a simulated call and the magic 503, and the verifications page
//! counts one mode at a time: live by default, test after the switch; the
//! webhooks page's delivery log likewise.
//!
//! Not for: the page's other rules (`dashboard::verifications`).

use super::*;
use crate::support::browser::{sign_in, submit as click, text};
use crate::support::dashboard::create_user;
use headless_chrome::Browser;
use serde_json::json;
use std::time::Duration;

fn browser(profile: &std::path::Path) -> Browser {
    crate::support::browser::browser(profile, (1100, 900))
}

#[test]
fn a_test_key_from_the_dashboard_and_totals_of_one_mode_at_a_time() {
    let server = Server::with_pools(1, 1);
    let company = server.create_company("Acme");
    create_user(&server, company, "ann@acme.test");
    let live = server.create_key(company);
    server.create_ok(&live, &body(RU_PHONE));

    let profile = tempfile::tempdir().unwrap();
    let browser = browser(profile.path());
    let tab = browser.new_tab().expect("tab");
    tab.set_default_timeout(Duration::from_secs(30));
    let origin = format!("https://127.0.0.1:{}", server.https.port());
    sign_in(&tab, &origin, "ann@acme.test");

    tab.navigate_to(&format!("{origin}/dashboard/keys/"))
        .unwrap();
    tab.wait_until_navigated().unwrap();
    tab.wait_for_element("#label").unwrap().click().unwrap();
    tab.send_character("ci").unwrap();
    tab.wait_for_element("#test").unwrap().click().unwrap();
    click(&tab, "form[action='/api/dashboard/keys'] button", "#token");
    let token = text(&tab, "#token");
    assert!(token.starts_with("svc_test_"), "the test key box: {token}");
    let modes = text(&tab, "table");
    assert!(modes.contains("test") && modes.contains("live"), "{modes}");

    // Test traffic: one completed by a simulated call, one pending, one
    // magic 503.
    let first = server.create_ok(&token, &body(RU_PHONE));
    server.create_ok(&token, &body(UK_PHONE));
    let called = simulate(
        &server,
        &token,
        &id_of(&first),
        &json!({"caller_id": "+79161234567"}),
    );
    assert_eq!(called.json()["outcome"], "completed", "{}", called.text());
    assert_eq!(server.create(&token, &body("+442079460503")).status, 503);

    tab.navigate_to(&format!("{origin}/dashboard/verifications/"))
        .unwrap();
    tab.wait_until_navigated().unwrap();
    assert_eq!(text(&tab, "#mode-current"), "Боевой режим");
    assert_eq!(
        text(&tab, "#total"),
        "1",
        "live only: the one live verification"
    );
    assert_eq!(text(&tab, "#completed"), "0");
    assert_eq!(tab.find_elements("tr.row").unwrap().len(), 1);

    click(&tab, "#mode-test", "#mode-live");
    assert_eq!(text(&tab, "#mode-current"), "Тестовый режим");
    assert_eq!(
        text(&tab, "#total"),
        "3",
        "test only: two verifications and the 503"
    );
    assert_eq!(text(&tab, "#completed"), "1");
    assert_eq!(tab.find_elements("tr.row").unwrap().len(), 3);
    // The filter form keeps the mode.
    click(&tab, "form.filters button", "#mode-live");
    assert_eq!(text(&tab, "#total"), "3");

    // The delivery log too: the simulated call's webhook is test mode's,
    // so the live log (the default) does not list it.
    let test_id = id_of(&first);
    tab.navigate_to(&format!("{origin}/dashboard/webhooks/"))
        .unwrap();
    tab.wait_until_navigated().unwrap();
    assert_eq!(text(&tab, "#mode-current"), "Боевой режим");
    let live_log = text(&tab, "section.wide");
    assert!(
        !live_log.contains(&test_id),
        "the live delivery log lists a test-mode delivery: {live_log}"
    );
    click(&tab, "#mode-test", "#mode-live");
    assert_eq!(text(&tab, "#mode-current"), "Тестовый режим");
    let test_log = text(&tab, "section.wide");
    assert!(
        test_log.contains(&test_id),
        "the test delivery log lacks the simulated call's webhook: {test_log}"
    );
}
