//! The API explorer at /api/docs/ in a real headless browser
//! (Debian's chromium, driven over the DevTools protocol).
//!
//! The page is loaded from the service alone: the test asserts that every
//! resource the page fetched came from the service's own origin, so the
//! explorer works with no internet. After the key is entered, Swagger UI
//! loads /api/schema/ with it and must render the four operations, test
//! mode's `simulate-call` marked as test mode only.
//!
//! Not for: the document itself (`api::schema`).

use crate::support::dashboard::create_user;
use crate::support::*;
use headless_chrome::Browser;
use std::time::{Duration, Instant};

fn browser(profile: &std::path::Path) -> Browser {
    crate::support::browser::browser(profile, (1280, 2000))
}

#[test]
fn explorer_renders_the_four_operations_offline() {
    let server = Server::with_pools(1, 1);
    let company = server.create_company("explorer");
    let token = server.create_key(company);
    create_user(&server, company, "dev@explorer.test");
    let profile = tempfile::tempdir().unwrap();
    let browser = browser(profile.path());
    let tab = browser.new_tab().expect("tab");
    tab.set_default_timeout(Duration::from_secs(30));
    let origin = format!("https://127.0.0.1:{}", server.https.port());
    // The explorer opens for a signed-in dashboard user (a browser cannot
    // send the bearer header when it opens a page).
    crate::support::browser::sign_in(&tab, &origin, "dev@explorer.test");
    tab.navigate_to(&format!("{origin}/api/docs/"))
        .expect("navigate")
        .wait_until_navigated()
        .expect("page loads");

    tab.wait_for_element("#api-key")
        .expect("key field")
        .click()
        .unwrap();
    // One call for the whole string (Input.insertText): typing it key by
    // key costs two protocol calls a character, ~0.2 s each here.
    tab.send_character(&token).expect("typing the key");
    tab.wait_for_element("#load")
        .expect("load button")
        .click()
        .unwrap();

    let deadline = Instant::now() + Duration::from_secs(30);
    let paths = loop {
        let found: Vec<String> = tab
            .find_elements(".opblock-summary-path")
            .map(|els| els.iter().filter_map(|e| e.get_inner_text().ok()).collect())
            .unwrap_or_default();
        if found.len() >= 4 || Instant::now() > deadline {
            break found;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let joined = paths.join(" | ").replace('\u{200b}', "");
    for p in [
        "/api/v1/verifications/",
        "/api/v1/verifications/{id}/",
        "/api/v1/verifications/{id}/cancel/",
        "/api/v1/verifications/{id}/simulate-call/",
    ] {
        assert!(
            joined.split(" | ").any(|x| x == p),
            "operation {p} not rendered; rendered: {joined}\nserver logs:\n{}",
            server.logs()
        );
    }
    let methods: Vec<String> = tab
        .find_elements(".opblock-summary-method")
        .unwrap()
        .iter()
        .filter_map(|e| e.get_inner_text().ok())
        .collect();
    assert_eq!(methods, ["POST", "GET", "POST", "POST"], "methods in order");
    let summaries: Vec<String> = tab
        .find_elements(".opblock-summary-description")
        .unwrap()
        .iter()
        .filter_map(|e| e.get_inner_text().ok())
        .collect();
    assert!(
        summaries.iter().any(|s| s.starts_with("Test mode only")),
        "simulate-call is shown as test mode only: {summaries:?}"
    );

    // Everything the page loaded came from the service itself.
    let origins = tab
        .evaluate(
            "JSON.stringify(performance.getEntriesByType('resource').map(e => new URL(e.name).origin))",
            false,
        )
        .expect("reading resource timing")
        .value
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    let origins: Vec<String> = serde_json::from_str(&origins).unwrap();
    assert!(!origins.is_empty(), "resource timing saw the page's assets");
    for o in &origins {
        assert_eq!(
            o, &origin,
            "the explorer fetched from elsewhere: {origins:?}"
        );
    }
    // The operations could only render if the schema request carried the
    // key: /api/schema/ answers 401 without one (see `api::schema`).

    try_a_keyed_create_twice(&tab, &server);
}

/// "Try it out" on create with an `Idempotency-Key`: the explorer sends
/// the header (the schema documents it), the first answer is a 201, and
/// the second, with the same key and body, is that 201 replayed.
fn try_a_keyed_create_twice(tab: &headless_chrome::Tab, server: &Server) {
    tab.wait_for_element("#operations-verifications-create_verification .opblock-summary")
        .expect("create operation")
        .click()
        .unwrap();
    tab.wait_for_element("#operations-verifications-create_verification .try-out__btn")
        .expect("Try it out")
        .click()
        .unwrap();
    tab.wait_for_element(
        "#operations-verifications-create_verification tr[data-param-name=\"Idempotency-Key\"] input",
    )
    .expect("an Idempotency-Key field, from the schema")
    .click()
    .unwrap();
    tab.send_character("explorer-order-1").unwrap();
    // The example body (phone, a public webhook IP literal) is valid as is.
    let responses = |tab: &headless_chrome::Tab| -> String {
        tab.find_elements("#operations-verifications-create_verification .live-responses-table")
            .map(|els| els.iter().filter_map(|e| e.get_inner_text().ok()).collect())
            .unwrap_or_default()
    };
    let execute = |tab: &headless_chrome::Tab, want: &str| -> String {
        tab.wait_for_element("#operations-verifications-create_verification button.execute")
            .expect("Execute")
            .click()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let text = responses(tab);
            if text.contains(want) || Instant::now() > deadline {
                return text;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    let first = execute(tab, "201");
    assert!(
        first.contains("201") && !first.contains("idempotent-replayed"),
        "first create: {first}\nserver logs:\n{}",
        server.logs()
    );
    let second = execute(tab, "idempotent-replayed");
    assert!(
        second.contains("idempotent-replayed: true"),
        "second create with the same key was not replayed: {second}"
    );
}
