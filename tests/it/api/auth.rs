//! Authentication (401 texts and `WWW-Authenticate`), revocation, the order
//! of checks (401 before 405), 405 texts, trailing-slash redirects and 404s
//! for unknown paths.
//!
//! Not for: dashboard sessions (`dashboard::sessions`), or rate limits
//! (`api::rate_limit`).

use crate::support::*;
use std::time::Duration;

const SOME_ID: &str = "ver_01ARZ3NDEKTSV4RRFFQ69G5FAV";

#[track_caller]
fn assert_401(r: &Resp, text: &str, what: &str) {
    assert_eq!(r.status, 401, "{what}: {}", r.text());
    assert_eq!(r.header("www-authenticate"), Some("Bearer"), "{what}");
    assert_json_type(r);
    assert_eq!(r.json(), serde_json::json!({ "detail": text }), "{what}");
}

/// The three endpoints, each with a valid request apart from auth.
fn endpoints() -> Vec<(&'static str, String, Vec<u8>)> {
    vec![
        (
            "POST",
            COLLECTION.to_owned(),
            body(RU_PHONE).to_string().into_bytes(),
        ),
        ("GET", format!("{COLLECTION}{SOME_ID}/"), Vec::new()),
        ("POST", format!("{COLLECTION}{SOME_ID}/cancel/"), Vec::new()),
    ]
}

#[test]
fn missing_header_or_other_scheme_is_not_authenticated() {
    let s = Server::with_pools(1, 1);
    let token = s.new_client("acme");
    for (method, path, body) in endpoints() {
        let what = format!("{method} {path}");
        assert_401(
            &s.request(
                method,
                &path,
                &[("Content-Type", "application/json")],
                &body,
            ),
            NOT_AUTHENTICATED,
            &format!("{what} without Authorization"),
        );
        for value in [
            "Basic dXNlcjpwYXNz".to_owned(),
            format!("Token {token}"),
            format!("Bearer{token}"),
        ] {
            assert_401(
                &s.request(method, &path, &[("Authorization", &value)], &body),
                NOT_AUTHENTICATED,
                &format!("{what} with {value:?}"),
            );
        }
    }
    // Nothing was created by any of them.
    s.create_ok(&token, &body(RU_PHONE));
}

#[test]
fn malformed_unknown_and_wrong_secret_tokens_are_invalid() {
    let s = Server::with_pools(1, 1);
    let token = s.new_client("acme");
    let prefix = &token[9..17];
    let secret = &token[18..];
    let bad_tokens = [
        "".to_owned(),
        "svc_live_".to_owned(),
        format!("svc_live_{prefix}"),
        format!("svc_live_{prefix}_"),
        format!("svc_live_{prefix}{secret}"),
        format!("svc_live_{}_{secret}", &prefix[..7]),
        format!("svc_live_{prefix}X_{secret}"),
        format!("svc_test_{prefix}_{secret}"),
        format!("svc_live_{prefix}_{secret}x"),
        format!("svc_live_{prefix}_wrongsecret"),
        format!("svc_live_ZZZZ9999_{secret}"),
        "svc_live_ABCDEFGH_0123456789abcdefghijABCDEFGHIJ12".to_owned(),
        format!("\"{token}\""),
        format!("{token}{}", "a".repeat(200)),
    ];
    for (method, path, body) in endpoints() {
        assert_401(
            &s.request(method, &path, &[("Authorization", "Bearer")], &body),
            INVALID_KEY,
            &format!("{method} {path} with bare Bearer"),
        );
        for t in &bad_tokens {
            let value = format!("Bearer {t}");
            assert_401(
                &s.request(method, &path, &[("Authorization", &value)], &body),
                INVALID_KEY,
                &format!("{method} {path} with {value:?}"),
            );
        }
    }
    // The real token works, with the scheme in any case.
    for scheme in ["Bearer", "bearer", "BEARER"] {
        let value = format!("{scheme} {token}");
        let r = s.request(
            "GET",
            &format!("{COLLECTION}{SOME_ID}/"),
            &[("Authorization", &value)],
            b"",
        );
        assert_eq!(r.status, 404, "{scheme}: {}", r.text());
    }
    s.create_ok(&token, &body(RU_PHONE));
    s.create_ok(&token, &body(UK_PHONE));
}

#[test]
fn revoked_key_is_refused_within_seconds() {
    let s = Server::with_pools(2, 0);
    let company = s.create_company("acme");
    let token = s.create_key(company);
    let other = s.create_key(company);
    let v = s.create_ok(&token, &body(RU_PHONE));
    let id = v["verification_id"].as_str().unwrap().to_owned();

    let prefix = token[9..17].to_owned();
    let out = s.cli(&["key", "revoke", &prefix]);
    assert_eq!(out["revoked"], true, "{out}");

    let refused = poll(Duration::from_secs(3), || {
        let r = s.get(&token, &id);
        (r.status == 401).then_some(r)
    })
    .expect("revoked key still accepted 3 s after revocation");
    assert_401(&refused, INVALID_KEY, "revoked key");
    assert_401(
        &s.create(&token, &body(RU_PHONE)),
        INVALID_KEY,
        "revoked create",
    );
    assert_401(&s.cancel(&token, &id), INVALID_KEY, "revoked cancel");

    // The company's other key still works and sees the verification.
    let g = s.get(&other, &id);
    assert_eq!(g.status, 200, "{}", g.text());
    assert_eq!(g.json(), v);
    // Revoking twice is an operator error.
    assert!(!s.cli_output(&["key", "revoke", &prefix]).status.success());
}

#[test]
fn authentication_comes_before_the_method_check() {
    let s = Server::with_pools(1, 0);
    for (method, path) in [
        ("PUT", COLLECTION.to_owned()),
        ("DELETE", COLLECTION.to_owned()),
        ("GET", COLLECTION.to_owned()),
        ("POST", format!("{COLLECTION}{SOME_ID}/")),
        ("GET", format!("{COLLECTION}{SOME_ID}/cancel/")),
    ] {
        assert_401(
            &s.request(method, &path, &[], b""),
            NOT_AUTHENTICATED,
            &format!("{method} {path}"),
        );
        assert_401(
            &s.request(
                method,
                &path,
                &[("Authorization", "Bearer svc_live_nope")],
                b"",
            ),
            INVALID_KEY,
            &format!("{method} {path}"),
        );
    }
}

#[test]
fn other_methods_get_405() {
    let s = Server::with_pools(1, 0);
    let token = s.new_client("acme");
    let auth = format!("Bearer {token}");
    let v = s.create_ok(&token, &body(RU_PHONE));
    let id = v["verification_id"].as_str().unwrap();
    let item = format!("{COLLECTION}{id}/");
    let cancel = format!("{COLLECTION}{id}/cancel/");
    let cases = [
        ("PUT", COLLECTION, "{}"),
        ("DELETE", COLLECTION, ""),
        ("PATCH", COLLECTION, "{}"),
        ("GET", COLLECTION, ""),
        ("GET", cancel.as_str(), ""),
        ("PUT", cancel.as_str(), ""),
        ("DELETE", cancel.as_str(), ""),
        ("POST", item.as_str(), ""),
        ("PUT", item.as_str(), "{}"),
        ("DELETE", item.as_str(), ""),
        ("PATCH", item.as_str(), "{}"),
    ];
    for (method, path, body) in cases {
        let r = s.request(
            method,
            path,
            &[
                ("Authorization", &auth),
                ("Content-Type", "application/json"),
            ],
            body.as_bytes(),
        );
        assert_eq!(r.status, 405, "{method} {path}: {}", r.text());
        assert_json_type(&r);
        assert_eq!(
            r.json(),
            serde_json::json!({ "detail": method_not_allowed(method) }),
            "{method} {path}"
        );
    }
    // None of that touched the verification.
    let g = s.get(&token, id);
    assert_eq!(g.status, 200);
    assert_eq!(g.json(), v);
}

#[test]
fn missing_trailing_slash_redirects_and_unknown_paths_404() {
    let s = Server::with_pools(1, 0);
    let token = s.new_client("acme");
    let auth = format!("Bearer {token}");
    for headers in [vec![], vec![("Authorization", auth.as_str())]] {
        for (path, location) in [
            ("/api/v1/verifications", "/api/v1/verifications/".to_owned()),
            (
                &*format!("/api/v1/verifications/{SOME_ID}"),
                format!("/api/v1/verifications/{SOME_ID}/"),
            ),
            (
                &*format!("/api/v1/verifications/{SOME_ID}/cancel?x=1"),
                format!("/api/v1/verifications/{SOME_ID}/cancel/?x=1"),
            ),
        ] {
            let r = s.request("GET", path, &headers, b"");
            assert_eq!(r.status, 301, "{path}: {}", r.text());
            assert_eq!(r.header("location"), Some(location.as_str()), "{path}");
        }
        for path in [
            "/",
            "/api/",
            "/api/v1/",
            "/api/v1/verification/",
            "/api/v2/verifications/",
            "/api/v1/verifications//",
            "/api/v1/verifications/a/b/",
            &*format!("/api/v1/verifications/{SOME_ID}/cancel/x/"),
            "/nope",
        ] {
            let r = s.request("GET", path, &headers, b"");
            assert_eq!(r.status, 404, "{path}: {}", r.text());
            assert_json_type(&r);
            assert_eq!(
                r.json(),
                serde_json::json!({ "detail": NOT_FOUND }),
                "{path}"
            );
        }
    }
}

#[test]
fn concurrent_first_use_of_a_new_key_is_served() {
    let s = Server::with_pools(1, 0);
    let company = s.create_company("acme");
    let path = format!("{COLLECTION}{SOME_ID}/");
    // Each round: a brand-new key, 16 requests at once with it. A deadlock
    // (a thread lock held across a coroutine wait, as once in the key cache)
    // hangs forever, so a generous per-request bound still catches it while
    // a loaded CI machine's slow handshakes do not trip it.
    for round in 0..8 {
        let token = s.create_key(company);
        let auth = format!("Bearer {token}");
        let statuses: Vec<Result<u16, String>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..16)
                .map(|_| {
                    scope.spawn(|| {
                        let mut c = s.connect();
                        c.stream.set_timeout(Some(Duration::from_secs(20)));
                        c.send(&build_request(
                            "GET",
                            &path,
                            &[("Authorization", &auth)],
                            b"",
                            false,
                        ))
                        .map_err(|e| e.to_string())?;
                        c.read_response()
                            .map(|r| r.status)
                            .map_err(|e| e.to_string())
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let failed: Vec<_> = statuses.iter().filter(|s| **s != Ok(404)).collect();
        assert!(
            failed.is_empty(),
            "round {round}: {} of 16 requests with a new key got no 404 within 20 s: {:?}",
            failed.len(),
            failed[0]
        );
    }
}
