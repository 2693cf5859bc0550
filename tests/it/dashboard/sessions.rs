//! Dashboard sessions over HTTPS: login, the API's 403 for a request
//! authenticated by a session instead of a key, the schema readable by a
//! logged-in user, and the login limit of 10 per minute per address.
//!
//! Not for: the sign-in form and CSRF (`dashboard::auth`).

use crate::support::*;
use serde_json::json;
use std::io::Write;
use std::process::{Command, Stdio};

const PASSWORD: &str = "correct horse battery staple";
const KEY_REQUIRED: &str = "Требуется API-ключ.";
const LOGIN: &str = "/api/dashboard/auth/login";

/// `dialproof user create`, with the password on standard input.
fn create_user(server: &Server, company: i64, email: &str, password: &str) -> std::process::Output {
    let mut child = Command::new(BIN)
        .arg("--config")
        .arg(&server.config_path)
        .args([
            "--json",
            "user",
            "create",
            "--company",
            &company.to_string(),
            "--email",
            email,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running the CLI");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{password}\n").as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn login(server: &Server, email: &str, password: &str) -> Resp {
    let body = json!({ "email": email, "password": password }).to_string();
    server.request(
        "POST",
        LOGIN,
        &[("Content-Type", "application/json")],
        body.as_bytes(),
    )
}

/// Logs in and returns the `name=value` part of the session cookie.
fn session_cookie(server: &Server, email: &str) -> String {
    let r = login(server, email, PASSWORD);
    assert_eq!(r.status, 200, "{}", r.text());
    let set = r.header("set-cookie").expect("Set-Cookie").to_owned();
    for attr in ["HttpOnly", "Secure", "SameSite=Lax", "Path=/"] {
        assert!(set.contains(attr), "{set} lacks {attr}");
    }
    set.split(';').next().unwrap().to_owned()
}

#[test]
fn a_session_gets_403_on_the_api_and_may_read_the_schema() {
    let server = Server::with_pools(1, 0);
    let company = server.create_company("acme");
    let out = create_user(&server, company, "Ops@Example.com", PASSWORD);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let r = login(&server, "ops@example.com", PASSWORD);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["company_id"], company);
    let cookie = session_cookie(&server, "OPS@example.com");

    let with_cookie = [
        ("Cookie", cookie.as_str()),
        ("Content-Type", "application/json"),
    ];
    let create = server.request(
        "POST",
        COLLECTION,
        &with_cookie,
        body(RU_PHONE).to_string().as_bytes(),
    );
    assert_eq!(create.status, 403, "{}", create.text());
    assert_eq!(create.json(), json!({ "detail": KEY_REQUIRED }));
    let id_path = format!("{COLLECTION}ver_00000000000000000000000000/");
    assert_eq!(
        server.request("GET", &id_path, &with_cookie, b"").status,
        403
    );
    let cancel = format!("{id_path}cancel/");
    assert_eq!(
        server.request("POST", &cancel, &with_cookie, b"").status,
        403
    );

    let schema = server.request("GET", "/api/schema/", &with_cookie, b"");
    assert_eq!(schema.status, 200);
    assert!(schema.json()["openapi"]
        .as_str()
        .unwrap()
        .starts_with("3.0."));

    // A bearer header wins over the cookie, good or bad.
    let token = server.create_key(company);
    let auth = format!("Bearer {token}");
    let both = [
        ("Cookie", cookie.as_str()),
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
    ];
    assert_eq!(
        server
            .request(
                "POST",
                COLLECTION,
                &both,
                body(RU_PHONE).to_string().as_bytes()
            )
            .status,
        201
    );
    let bad = [
        ("Cookie", cookie.as_str()),
        ("Authorization", "Bearer nope"),
    ];
    assert_eq!(server.request("GET", &id_path, &bad, b"").status, 401);

    // A made-up or malformed session is not authenticated.
    let fake = format!("dialproof_session={}", "ab".repeat(32));
    for c in [fake.as_str(), "dialproof_session=xyz"] {
        let r = server.request("GET", &id_path, &[("Cookie", c)], b"");
        assert_eq!(r.status, 401, "{c}");
        assert_eq!(r.header("www-authenticate"), Some("Bearer"));
    }
}

#[test]
fn login_refuses_wrong_credentials_in_the_envelope() {
    let server = Server::with_pools(1, 0);
    let company = server.create_company("acme");
    assert!(create_user(&server, company, "a@example.com", PASSWORD)
        .status
        .success());
    // Too short a password is refused at creation.
    let short = create_user(&server, company, "b@example.com", "short");
    assert!(!short.status.success());

    for (email, password) in [
        ("a@example.com", "wrong password!"),
        ("nobody@example.com", PASSWORD),
    ] {
        let r = login(&server, email, password);
        assert_eq!(r.status, 401, "{}", r.text());
        assert_eq!(r.json()["error"]["code"], "authentication_failed");
        assert!(r.header("set-cookie").is_none());
    }
    let r = server.request("POST", LOGIN, &[], b"{}");
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["code"], "invalid_request");
    assert!(r.json()["error"]["fields"]["email"].is_array());
    let r = server.request("GET", LOGIN, &[], b"");
    assert_eq!(r.status, 405);
    assert_eq!(r.json()["error"]["code"], "method_not_allowed");
}

#[test]
fn login_allows_ten_attempts_a_minute_per_address() {
    let server = Server::with_pools(1, 0);
    let company = server.create_company("acme");
    assert!(create_user(&server, company, "a@example.com", PASSWORD)
        .status
        .success());
    for i in 0..10 {
        let r = login(&server, "a@example.com", "not the password");
        assert_eq!(r.status, 401, "attempt {i}: {}", r.text());
    }
    // The 11th is refused even with the right password.
    let r = login(&server, "a@example.com", PASSWORD);
    assert_eq!(r.status, 429, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], "rate_limited");
    let retry: u64 = r.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry));
}
