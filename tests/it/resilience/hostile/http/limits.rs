//! HTTP limits on the API listener, and what stays allowed inside them:
//! 413 for an oversized body, 431 for too many header fields; keep-alive
//! serving several requests on one TLS connection, HEAD answered without a
//! body, and an HTTP/1.0 client offering ALPN `http/1.0` served.
//!
//! Not for: malformed framing (`super::framing`).

use crate::support::*;

#[test]
fn oversized_body_is_413() {
    let s = Server::with_pools(1, 0);
    let token = s.new_client("acme");
    let auth = format!("Bearer {token}");
    let big = format!(
        "{{\"phone\": \"{RU_PHONE}\", \"webhook_url\": \"{WEBHOOK}\", \"info\": \"{}\"}}",
        "x".repeat(100 * 1024)
    );
    let req = build_request(
        "POST",
        COLLECTION,
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
        ],
        big.as_bytes(),
        false,
    );
    let mut c = s.connect();
    // The server may answer and close before taking the whole body, so a
    // failed write is fine; the answer is what counts.
    let head_end = req.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    c.send(&req[..head_end]).expect("sending the head");
    let _ = c.send_best_effort(&req[head_end..]);
    let r = c.read_response().expect("reading the 413");
    assert_eq!(r.status, 413, "{}", r.text());

    // Nothing was created, and the service is fine.
    s.create_ok(&token, &body(RU_PHONE));
}

#[test]
fn too_many_header_fields_is_431() {
    let s = Server::with_pools(1, 0);
    let token = s.new_client("acme");
    let auth = format!("Bearer {token}");
    let names: Vec<String> = (0..100).map(|i| format!("X-Test-{i}")).collect();
    let mut headers: Vec<(&str, &str)> = vec![("Authorization", &auth)];
    headers.extend(names.iter().map(|n| (n.as_str(), "v")));
    let r = s.request(
        "GET",
        &format!("{COLLECTION}ver_00000000000000000000000000/"),
        &headers,
        b"",
    );
    assert_eq!(r.status, 431, "{}", r.text());

    // A normal number of headers is fine.
    let r = s.request(
        "GET",
        &format!("{COLLECTION}ver_00000000000000000000000000/"),
        &headers[..20],
        b"",
    );
    assert_eq!(r.status, 404, "{}", r.text());
}

#[test]
fn keep_alive_serves_several_requests_on_one_tls_connection() {
    let s = Server::with_pools(1, 0);
    let token = s.new_client("acme");
    let auth = format!("Bearer {token}");
    let mut c = s.connect();
    let r = c.request(
        "POST",
        COLLECTION,
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
        ],
        body(RU_PHONE).to_string().as_bytes(),
    );
    assert_eq!(r.status, 201, "{}", r.text());
    assert_ne!(
        r.header("connection")
            .map(str::to_ascii_lowercase)
            .as_deref(),
        Some("close")
    );
    let v = r.json();
    let id = v["verification_id"].as_str().unwrap();
    let path = format!("{COLLECTION}{id}/");
    for _ in 0..3 {
        let g = c.request("GET", &path, &[("Authorization", &auth)], b"");
        assert_eq!(g.status, 200, "{}", g.text());
        assert_eq!(g.json(), v);
    }
    // An error answer keeps the connection too.
    let json = [
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
    ];
    let e = c.request("POST", COLLECTION, &json, b"{");
    assert_eq!(e.status, 400);
    let g = c.request("GET", &path, &[("Authorization", &auth)], b"");
    assert_eq!(g.status, 200);
    // Pipelined: two requests in one write, two answers in order.
    let mut both = build_request("GET", &path, &[("Authorization", &auth)], b"", true);
    both.extend(build_request("POST", COLLECTION, &json, b"[]", true));
    c.send(&both).unwrap();
    let first = c.read_response().unwrap();
    assert_eq!(first.status, 200, "{}", first.text());
    assert_eq!(first.json(), v);
    let second = c.read_response().unwrap();
    assert_eq!(second.status, 400, "{}", second.text());
    assert_eq!(
        second.json(),
        serde_json::json!({ "non_field_errors": [NOT_A_DICT_LIST] })
    );
    // `Connection: close` is honoured.
    let last = c.request(
        "GET",
        &path,
        &[("Authorization", &auth), ("Connection", "close")],
        b"",
    );
    assert_eq!(last.status, 200);
    assert_eq!(last.header("connection"), Some("close"));
    assert!(c.is_closed_within(std::time::Duration::from_secs(5)));
}

#[test]
fn head_response_has_no_body() {
    let s = Server::with_pools(1, 0);
    let token = s.new_client("acme");
    let auth = format!("Bearer {token}");
    let path = format!("{COLLECTION}ver_00000000000000000000000000/");
    let mut c = s.connect();
    let mut both = build_request("HEAD", &path, &[("Authorization", &auth)], b"", true);
    both.extend(build_request(
        "GET",
        &path,
        &[("Authorization", &auth)],
        b"",
        true,
    ));
    c.send(&both).unwrap();
    let head = c.read_response_to("HEAD").unwrap();
    assert_eq!(head.status, 405, "{head:?}");
    // Had the HEAD answer carried a body, it would precede this status line.
    let next = c.read_response().expect("response after HEAD");
    assert_eq!(next.status, 404, "{}", next.text());
    assert_eq!(next.detail(), NOT_FOUND);
}

#[test]
fn http10_client_offering_alpn_http10_is_served() {
    let s = Server::with_pools(1, 0);
    let mut c = s.connect_alpn(&[b"http/1.0"]);
    c.send(b"GET /api/v1/verifications/ HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .expect("TLS handshake with ALPN http/1.0");
    let r = c.read_response().expect("response over ALPN http/1.0");
    assert_eq!(r.status, 401, "{}", r.text());
}
