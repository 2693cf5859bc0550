//! The plain-HTTP listener answers every request with 301 to the same path
//! and query on the HTTPS port, keeping the host the client sent, and
//! writes `[server] public_https_port` into the `Location` unless it is 443.
//!
//! Not for: the API listener's own rules (`resilience::hostile::http`).

use crate::support::*;

#[test]
fn plain_http_redirects_to_https() {
    let s = Server::with_pools(1, 0);
    let http = s.http.expect("http listener");
    let https_port = s.https.port();
    let host = format!("127.0.0.1:{}", http.port());

    let cases: [(&str, &str, &[u8]); 5] = [
        ("GET", "/api/v1/verifications/?a=1&b=two", b""),
        ("GET", "/", b""),
        (
            "POST",
            "/api/v1/verifications/",
            b"{\"phone\": \"+79123456789\"}",
        ),
        (
            "POST",
            "/api/v1/verifications/ver_01ARZ3NDEKTSV4RRFFQ69G5FAV/cancel/",
            b"",
        ),
        ("DELETE", "/some/other/path?x", b""),
    ];
    for (method, target, body) in cases {
        let r = s.raw_plain(&build_request(
            method,
            target,
            &[("Host", &host), ("Content-Type", "application/json")],
            body,
            false,
        ));
        assert_eq!(r.status, 301, "{method} {target}: {}", r.text());
        assert_eq!(
            r.header("location"),
            Some(format!("https://127.0.0.1:{https_port}{target}").as_str()),
            "{method} {target}"
        );
    }

    // The host name as sent (its port replaced by the HTTPS one).
    for (sent, want_host) in [
        ("localhost", "localhost"),
        ("localhost:8080", "localhost"),
        ("api.example.com", "api.example.com"),
        ("[::1]:80", "[::1]"),
    ] {
        let r = s.raw_plain(&build_request(
            "GET",
            "/x/?q=1",
            &[("Host", sent)],
            b"",
            false,
        ));
        assert_eq!(r.status, 301, "{sent}");
        assert_eq!(
            r.header("location"),
            Some(format!("https://{want_host}:{https_port}/x/?q=1").as_str()),
            "Host {sent}"
        );
    }

    // Two requests on one keep-alive plain connection.
    let mut c = s.connect_plain();
    for path in ["/a/", "/b/?c=d"] {
        let r = c.request("GET", path, &[("Host", &host)], b"");
        assert_eq!(r.status, 301);
        assert_eq!(
            r.header("location"),
            Some(format!("https://127.0.0.1:{https_port}{path}").as_str())
        );
    }

    // The redirect target actually serves the API.
    let r = s.request("GET", "/api/v1/verifications/", &[], b"");
    assert_eq!(r.status, 401);
}

fn redirect_location(s: &Server, target: &str) -> String {
    let r = s.raw_plain(&build_request(
        "GET",
        target,
        &[("Host", "example.com:8080")],
        b"",
        false,
    ));
    assert_eq!(r.status, 301, "{}", r.text());
    r.header("location")
        .unwrap_or_else(|| panic!("no Location in {:?}", r.headers))
        .to_owned()
}

/// README, "Configuration" (`[server] public_https_port`): port 443 is left
/// out of the redirect's `Location`.
#[test]
fn public_https_port_443_is_left_out_of_redirects() {
    let s = start_with_server_setting("public_https_port = 443");
    assert_ne!(s.https.port(), 443);
    assert_eq!(
        redirect_location(&s, "/api/v1/verifications/?a=1"),
        "https://example.com/api/v1/verifications/?a=1"
    );
    assert_eq!(redirect_location(&s, "/"), "https://example.com/");
}

/// README, "Configuration" (`[server] public_https_port`): any other port
/// is written into the redirect's `Location`.
#[test]
fn public_https_port_other_than_443_is_written_in_redirects() {
    let s = start_with_server_setting("public_https_port = 8443");
    assert_ne!(s.https.port(), 8443);
    assert_eq!(
        redirect_location(&s, "/api/v1/verifications/?a=1"),
        "https://example.com:8443/api/v1/verifications/?a=1"
    );
    assert_eq!(redirect_location(&s, "/x"), "https://example.com:8443/x");
}
