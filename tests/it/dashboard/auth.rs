//! Dashboard sign-in over HTTPS: the login form, the session cookie's
//! attributes, logout revoking the session on the server, session expiry,
//! and the CSRF checks on every form (403 HTML page, nothing changed).
//!
//! Not for: sessions against the API and the login limit
//! (`dashboard::sessions`).

use crate::support::dashboard::*;
use crate::support::*;

fn server_with_user() -> Server {
    let server = Server::with_pools(2, 0);
    let company = server.create_company("Acme");
    create_user(&server, company, "ann@acme.test");
    server
}

#[test]
fn pages_redirect_to_login_until_signed_in() {
    let server = server_with_user();
    for path in ["/dashboard/keys/", "/dashboard/verifications/"] {
        let r = server.request("GET", path, &[], b"");
        assert_eq!(r.status, 303, "{path}");
        assert_eq!(r.header("location"), Some("/dashboard/login/"));
    }
    let page = server.request("GET", "/dashboard/login/", &[], b"");
    assert_eq!(page.status, 200);
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    let html = page.text();
    for text in [
        "<html lang=\"ru\">",
        "<label for=\"email\">Email</label>",
        "<label for=\"password\">Пароль</label>",
        "Войти",
        "name=\"viewport\"",
    ] {
        assert!(html.contains(text), "login page lacks {text}");
    }
    let form_cookie = page.header_all("set-cookie").join("\n");
    assert!(
        form_cookie.contains("HttpOnly") && form_cookie.contains("SameSite=Strict"),
        "{form_cookie}"
    );
}

#[test]
fn login_sets_a_secure_expiring_cookie_and_logout_revokes_the_session() {
    let server = server_with_user();
    let wrong = post_login(&server, "ann@acme.test", "not the password");
    assert_eq!(wrong.status, 401);
    assert!(wrong.text().contains("Неверный email или пароль."));
    assert!(set_cookie(&wrong, "dialproof_session").is_none());

    let ok = post_login(&server, "ANN@acme.test", PASSWORD);
    assert_eq!(ok.status, 303, "{}", ok.text());
    assert_eq!(ok.header("location"), Some("/dashboard/verifications/"));
    let set = ok
        .header_all("set-cookie")
        .into_iter()
        .find(|c| c.starts_with("dialproof_session="))
        .expect("session cookie")
        .to_owned();
    for attr in [
        "HttpOnly",
        "Secure",
        "SameSite=Lax",
        "Path=/",
        "Max-Age=43200",
    ] {
        assert!(set.contains(attr), "{set} lacks {attr}");
    }
    let dash = Dash {
        server: &server,
        cookie: set.split(';').next().unwrap().to_owned(),
    };
    let page = dash.get("/dashboard/verifications/");
    assert_eq!(page.status, 200, "{}", page.text());
    assert!(page.text().contains("ann@acme.test"));
    assert_eq!(page.header("cache-control"), Some("no-store"));

    // Logout without the form token is refused and changes nothing.
    let refused = dash.post("/dashboard/logout/", &[("csrf", "0".repeat(64).as_str())]);
    assert_eq!(refused.status, 403);
    assert!(refused.text().contains("CSRF"));
    assert_eq!(dash.get("/dashboard/keys/").status, 200);

    let csrf = dash.csrf();
    let out = dash.post("/dashboard/logout/", &[("csrf", &csrf)]);
    assert_eq!(out.status, 303);
    assert_eq!(out.header("location"), Some("/dashboard/login/"));
    let cleared = out.header_all("set-cookie").join("\n");
    assert!(
        cleared.contains("dialproof_session=;") && cleared.contains("Max-Age=0"),
        "{cleared}"
    );
    // The old cookie, replayed, no longer works anywhere.
    assert_eq!(dash.get("/dashboard/keys/").status, 303);
    let schema = dash.get("/api/schema/");
    assert_eq!(schema.status, 401, "{}", schema.text());
}

#[test]
fn an_expired_session_is_sent_to_the_login_form() {
    let server = server_with_user();
    let dash = Dash::login(&server, "ann@acme.test");
    assert_eq!(dash.get("/dashboard/keys/").status, 200);
    let db = rusqlite::Connection::open(server.data_dir.join("dialproof.db")).expect("db");
    let n = db
        .execute("UPDATE sessions SET expires_at = 1", [])
        .expect("expire");
    assert_eq!(n, 1);
    let r = dash.get("/dashboard/keys/");
    assert_eq!(r.status, 303);
    assert_eq!(r.header("location"), Some("/dashboard/login/"));
}

#[test]
fn forms_without_the_sessions_token_get_403_and_change_nothing() {
    let server = Server::with_pools(2, 0);
    let acme = server.create_company("Acme");
    let other = server.create_company("Other");
    create_user(&server, acme, "ann@acme.test");
    create_user(&server, other, "bob@other.test");
    let ann = Dash::login(&server, "ann@acme.test");
    let bob = Dash::login(&server, "bob@other.test");
    let bobs_token = bob.csrf();
    assert_ne!(bobs_token, ann.csrf());
    for token in ["", "abc", bobs_token.as_str()] {
        let r = ann.post(
            "/api/dashboard/keys",
            &[("csrf", token), ("label", "sneaky")],
        );
        assert_eq!(r.status, 403, "token {token:?}: {}", r.text());
        assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    }
    let keys = server.cli(&["key", "list"]);
    assert_eq!(keys.as_array().unwrap().len(), 0, "{keys}");
    // The login form itself: a token that is not the form cookie's.
    let r = server.request(
        "POST",
        "/dashboard/login/",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        &form(&[
            ("csrf", &"a".repeat(64)),
            ("email", "ann@acme.test"),
            ("password", PASSWORD),
        ]),
    );
    assert_eq!(r.status, 403);
    assert!(set_cookie(&r, "dialproof_session").is_none());
}

#[test]
fn the_explorer_opens_for_a_session_or_a_key_and_is_401_otherwise() {
    let server = Server::with_pools(1, 0);
    let company = server.create_company("Acme");
    create_user(&server, company, "ann@acme.test");
    let token = server.create_key(company);
    for path in ["/api/docs/", "/api/docs/swagger-ui.css"] {
        let r = server.request("GET", path, &[], b"");
        assert_eq!(r.status, 401, "{path}");
        assert_eq!(r.detail(), "Учетные данные не были предоставлены.");
        let bad = server.request(
            "GET",
            path,
            &[("Authorization", "Bearer svc_live_nope")],
            b"",
        );
        assert_eq!(bad.status, 401, "{path}");
    }
    let auth = format!("Bearer {token}");
    let with_key = server.request("GET", "/api/docs/", &[("Authorization", &auth)], b"");
    assert_eq!(with_key.status, 200);
    let dash = Dash::login(&server, "ann@acme.test");
    let page = dash.get("/api/docs/");
    assert_eq!(page.status, 200);
    assert!(page.text().contains("swagger-ui"));
    assert_eq!(dash.get("/api/docs/swagger-ui.css").status, 200);
    // After logout the same cookie no longer opens it.
    let csrf = dash.csrf();
    assert_eq!(
        dash.post("/dashboard/logout/", &[("csrf", &csrf)]).status,
        303
    );
    assert_eq!(dash.get("/api/docs/").status, 401);
}
