//! The plain-HTTP listener answers every request with 301 to the same path
//! and query on the HTTPS port, keeping the host the client sent.

mod common;

use common::*;

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
