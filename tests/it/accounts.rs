//! The account rules, one for both front doors: a key's label, a webhook
//! secret's rotation and its grace, development URLs, a user's email and
//! password, the session a login starts and the login window. Each is
//! driven through the `dialproof` binary's operator commands and through
//! the dashboard over HTTPS, and must come out the same. Also: the
//! dashboard writes through the one operator connection the service opens
//! at start, never one per request.
//!
//! Not for: the dashboard's pages as such (`dashboard`), or the operator
//! commands that are not account rules (`ops::cli`).

use crate::support::dashboard::*;
use crate::support::*;
use serde_json::{json, Value};
use std::process::Output;

/// The label rule the CLI and the dashboard share.
const LABEL_RULE: &str =
    "one label rule for the CLI and the dashboard: trimmed, then 1..=100 characters, \
     no control character";
const DAY_MS: i64 = 86_400_000;
const SESSION_SECONDS: i64 = 12 * 3600;

/// Every label of `company`'s keys, as `key list` prints them.
fn labels(server: &Server, company: i64) -> Vec<Value> {
    let list = server.cli(&["key", "list", "--company", &company.to_string()]);
    let rows = list.as_array().expect("key list is an array");
    rows.iter().map(|k| k["label"].clone()).collect()
}

/// `dialproof user create` with `password` on standard input.
fn user_create(server: &Server, company: i64, email: &str, password: &str) -> Output {
    let company = company.to_string();
    let args = ["user", "create", "--company", &company, "--email", email];
    server.cli_output_with_input(&args, &format!("{password}\n"))
}

fn json_login(server: &Server, email: &str, password: &str) -> Resp {
    let body = json!({ "email": email, "password": password }).to_string();
    server.request(
        "POST",
        "/api/dashboard/auth/login",
        &[("Content-Type", "application/json")],
        body.as_bytes(),
    )
}

/// The company's development URLs, as `company dev-url list` prints them.
fn dev_urls(server: &Server, company: &str) -> Value {
    server.cli(&["company", "dev-url", "list", company])["dev_webhook_urls"].clone()
}

#[test]
fn a_key_label_keeps_one_rule_on_the_command_line_and_in_the_dashboard() {
    let server = Server::with_pools(1, 0);
    let company = server.create_company("Acme");
    let id = company.to_string();
    create_user(&server, company, "ann@acme.test");
    let dash = Dash::login(&server, "ann@acme.test");

    let longest = "й".repeat(100);
    for (raw, stored) in [("  backend  ", "backend"), (&longest[..], &longest[..])] {
        let v = server.cli(&["key", "create", "--company", &id, "--label", raw]);
        assert_eq!(v["label"], stored, "{LABEL_RULE}: the CLI stored {raw:?}");
        let r = dash.create_key(raw);
        assert_eq!(r.status, 201, "{LABEL_RULE}: the dashboard refused {raw:?}");
        assert!(
            r.text().contains(&format!("Ключ «{stored}» создан")),
            "{LABEL_RULE}: the dashboard stored {raw:?} otherwise: {}",
            r.text()
        );
    }
    let kept = labels(&server, company);
    assert_eq!(kept.len(), 4);

    let too_long = "й".repeat(101);
    let cases = [
        ("   ", "label must be 1..=100 characters"),
        (&too_long[..], "label must be 1..=100 characters"),
        ("line\nbreak", "control characters"),
        ("tab\there", "control characters"),
        ("esc\u{1b}[2Jape", "control characters"),
    ];
    for (raw, cli_text) in cases {
        let out = server.cli_output(&["key", "create", "--company", &id, "--label", raw]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains(cli_text),
            "{LABEL_RULE}: the CLI took {raw:?}: {stderr}"
        );
        let r = dash.create_key(raw);
        assert_eq!(
            r.status,
            400,
            "{LABEL_RULE}: the dashboard took {raw:?}: {}",
            r.text()
        );
        assert!(r.text().contains("Название ключа"), "{}", r.text());
    }
    assert_eq!(labels(&server, company), kept, "a refused label made a key");
}

#[test]
fn a_secret_rotation_keeps_the_previous_secret_a_day_from_either_door() {
    let server = Server::with_pools(1, 0);
    let created = server.cli(&["company", "create", "--name", "  Acme  "]);
    assert_eq!(created["name"], "Acme", "company names are trimmed");
    let company = created["id"].as_i64().expect("company id");
    let id = company.to_string();
    let first = created["webhook_secret"]
        .as_str()
        .expect("secret")
        .to_owned();
    let grace = || {
        let all = server.cli(&["company", "list"]);
        let c = &all.as_array().expect("company list")[0];
        parse_utc(c["secret_rotated_grace_until"].as_str().expect("a grace"))
    };

    let v = server.cli(&["company", "rotate-secret", &id]);
    let second = v["webhook_secret"].as_str().expect("new secret");
    assert!(second.starts_with("whsec_") && second != first, "{v}");
    let until = parse_utc(v["previous_valid_until"].as_str().expect("until"));
    assert!(
        (until - now_millis() - DAY_MS).abs() < 60_000,
        "CLI grace: {v}"
    );
    assert_eq!(grace(), until);

    create_user(&server, company, "ann@acme.test");
    let dash = Dash::login(&server, "ann@acme.test");
    let csrf = dash.csrf();
    let rotated = dash.post("/dashboard/webhooks/rotate/", &[("csrf", &csrf)]);
    assert_eq!(rotated.status, 200, "{}", rotated.text());
    let html = rotated.text();
    assert!(html.contains("whsec_") && !html.contains(second), "{html}");
    assert!(
        (grace() - now_millis() - DAY_MS).abs() < 60_000,
        "the dashboard's rotation keeps the CLI's grace of a day"
    );
}

#[test]
fn development_urls_keep_one_rule_on_the_command_line_and_in_the_dashboard() {
    let server = Server::with_pools(1, 0);
    let company = server.create_company("Acme");
    let id = company.to_string();
    create_user(&server, company, "ann@acme.test");
    let dash = Dash::login(&server, "ann@acme.test");
    let csrf = dash.csrf();
    let add = |url: &str| {
        dash.post(
            "/dashboard/webhooks/dev-url/add/",
            &[("csrf", &csrf), ("url", url)],
        )
    };

    // Trimmed at both doors, as storage keeps them.
    server.cli(&["company", "dev-url", "add", &id, " http://127.0.0.1:9000/ "]);
    assert_eq!(add(" https://dev.acme.test/hook ").status, 303);
    let kept = json!(["http://127.0.0.1:9000/", "https://dev.acme.test/hook"]);
    assert_eq!(dev_urls(&server, &id), kept);

    for bad in ["ftp://127.0.0.1/", "127.0.0.1:9000", "   "] {
        let out = server.cli_output(&["company", "dev-url", "add", &id, bad]);
        assert!(!out.status.success(), "the CLI took {bad:?}");
        let r = add(bad);
        assert_eq!(r.status, 400, "the dashboard took {bad:?}: {}", r.text());
    }
    assert_eq!(dev_urls(&server, &id), kept, "a refused URL was stored");
}

#[test]
fn a_user_signs_in_at_both_doors_with_one_session_rule_and_one_login_window() {
    let server = Server::with_pools(1, 0);
    let company = server.create_company("Acme");
    for (email, password, why) in [
        ("ann", PASSWORD, "is not an email address"),
        ("ann@acme.test", "too short", "at least 10 characters"),
    ] {
        let out = user_create(&server, company, email, password);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains(why), "{stderr}");
    }
    let out = user_create(&server, company, " Ann@Acme.Test ", PASSWORD);
    assert!(out.status.success(), "{out:?}");
    let made: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(made["email"], "ann@acme.test");

    // Both doors look the email up the same way and start the same session.
    let r = json_login(&server, "ANN@acme.test ", PASSWORD);
    assert_eq!(r.status, 200, "{}", r.text());
    let cookie = r.header("set-cookie").expect("a session cookie").to_owned();
    assert!(
        cookie.contains(&format!("Max-Age={SESSION_SECONDS}")),
        "{cookie}"
    );
    let ends = parse_utc(r.json()["expires_at"].as_str().expect("expires_at"));
    assert!((ends - now_millis() - SESSION_SECONDS * 1000).abs() < 60_000);
    let r = post_login(&server, " ann@ACME.test", PASSWORD);
    assert_eq!(r.status, 303, "{}", r.text());
    let cookie = r
        .header_all("set-cookie")
        .into_iter()
        .find(|c| c.starts_with("dialproof_session="))
        .expect("a session cookie")
        .to_owned();
    assert!(
        cookie.contains(&format!("Max-Age={SESSION_SECONDS}")),
        "{cookie}"
    );

    // Ten attempts a minute per address, the two doors counting together:
    // two above, eight wrong ones here, then both doors refuse.
    for i in 0..4 {
        let r = json_login(&server, "ann@acme.test", "not the password");
        assert_eq!(r.status, 401, "JSON attempt {i}: {}", r.text());
        let r = post_login(&server, "ann@acme.test", "not the password");
        assert_eq!(r.status, 401, "form attempt {i}: {}", r.text());
    }
    let r = json_login(&server, "ann@acme.test", PASSWORD);
    assert_eq!(
        r.status,
        429,
        "one login window for both doors: {}",
        r.text()
    );
    let r = post_login(&server, "ann@acme.test", PASSWORD);
    assert_eq!(
        r.status,
        429,
        "one login window for both doors: {}",
        r.text()
    );
    assert!(r.header("retry-after").is_some());
}

#[test]
fn the_dashboard_writes_through_the_one_operator_connection_opened_at_start() {
    let mut server = Server::prepare(&pools(1, 0));
    // The storage crate logs every operator connection it opens at DEBUG.
    server.set_env("DIALPROOF_LOG", "info,may=warn,dialproof_storage=debug");
    let company = server.create_company("Acme");
    create_user(&server, company, "ann@acme.test");
    server.launch();
    let dash = Dash::login(&server, "ann@acme.test");
    let csrf = dash.csrf();

    // One of each change the dashboard makes.
    let token = shown_token(&dash.create_key("backend"));
    let prefix = &token["svc_live_".len().."svc_live_".len() + 8];
    let post = |path: &str, field: Option<(&str, &str)>, status: u16| {
        let mut fields = vec![("csrf", csrf.as_str())];
        fields.extend(field);
        let r = dash.post(path, &fields);
        assert_eq!(r.status, status, "{path}: {}", r.text());
    };
    post("/dashboard/keys/revoke/", Some(("prefix", prefix)), 303);
    post("/dashboard/webhooks/rotate/", None, 200);
    let url = ("url", "http://127.0.0.1:9/");
    post("/dashboard/webhooks/dev-url/add/", Some(url), 303);
    post("/dashboard/webhooks/failed/", Some(("state", "on")), 303);
    post("/dashboard/logout/", None, 303);
    let opened = server
        .logs()
        .lines()
        .filter(|l| l.contains("operator connection opened"))
        .count();
    assert_eq!(
        opened,
        1,
        "the dashboard writes through the one operator connection opened at start \
         (each open migrates the schema, so never one per request); logs:\n{}",
        server.logs()
    );
}
