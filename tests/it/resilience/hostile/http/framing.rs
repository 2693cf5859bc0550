//! Framing and message rules (RFC 9112/9110) and hostile bodies against
//! the real binary. Each case must get a clear status or a closed
//! connection, change nothing, and never make the server panic; the server
//! keeps serving afterwards.
//!
//! Not for: timing attacks (slow heads and bodies, stalled TLS handshakes:
//! `super::slow`) or connection floods (`super::idle`).

use crate::support::*;
use serde_json::json;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The server printed no panic, and still creates.
fn assert_healthy(s: &Server, token: &str) {
    s.create_ok(token, &body(RU_PHONE));
    let logs = s.logs();
    assert!(!logs.contains("panicked"), "the server panicked:\n{logs}");
}

/// How many verifications the company behind `token` can see as created:
/// each create leases one of the pool's numbers, so a pool of one number
/// that still accepts a create had nothing leased by the hostile request.
fn server_one_number() -> (Server, String) {
    let s = Server::with_pools(1, 0);
    let token = s.new_client("acme");
    (s, token)
}

/// Sends `bytes` on a fresh TLS connection and reads one response.
fn exchange(s: &Server, bytes: &[u8]) -> Resp {
    let mut c = s.connect();
    let _ = c.send_best_effort(bytes);
    c.read_response()
        .unwrap_or_else(|e| panic!("no response to {:?}: {e}", String::from_utf8_lossy(bytes)))
}

fn json_headers(auth: &str) -> Vec<(&str, &str)> {
    vec![
        ("Authorization", auth),
        ("Content-Type", "application/json"),
    ]
}

#[test]
fn oversized_request_line_and_header_are_431_and_close() {
    let (s, token) = server_one_number();
    let long_path = format!("/api/v1/verifications/{}/", "a".repeat(20_000));
    let long_header = "v".repeat(20_000);
    let cases: Vec<Vec<u8>> = vec![
        build_request("GET", &long_path, &[], b"", true),
        build_request("GET", COLLECTION, &[("X-Big", &long_header)], b"", true),
        // Many small headers adding up past 16 KiB.
        {
            let names: Vec<String> = (0..60).map(|i| format!("X-F{i}")).collect();
            let value = "w".repeat(400);
            let headers: Vec<(&str, &str)> =
                names.iter().map(|n| (n.as_str(), value.as_str())).collect();
            build_request("GET", COLLECTION, &headers, b"", true)
        },
    ];
    for req in cases {
        let mut c = s.connect();
        let _ = c.send_best_effort(&req);
        let r = c.read_response().expect("a 431");
        assert_eq!(r.status, 431, "{}", r.text());
        assert_json_type(&r);
        assert_eq!(r.header("connection"), Some("close"));
        assert!(c.is_closed_within(Duration::from_secs(5)));
    }
    assert_healthy(&s, &token);
}

#[test]
fn a_declared_body_over_the_limit_is_413_before_it_is_sent() {
    let (s, token) = server_one_number();
    let auth = format!("Bearer {token}");
    let mut headers = json_headers(&auth);
    headers.push(("Content-Length", "1000000000"));
    let head = build_request("POST", COLLECTION, &headers, b"", true);
    // Only the head: the 413 must not wait for a gigabyte.
    let r = exchange(&s, &head);
    assert_eq!(r.status, 413, "{}", r.text());
    assert_eq!(r.header("connection"), Some("close"));
    assert_healthy(&s, &token);
}

#[test]
fn invalid_utf8_and_nul_bytes_get_400_or_401_never_a_panic() {
    let (s, token) = server_one_number();
    let auth = format!("Bearer {token}");
    // In the body: not UTF-8, and a NUL inside a JSON string.
    for body in [
        &b"{\"phone\": \"\xff\xfe\"}"[..],
        b"{\"phone\": \"+7912\x00345\"}",
        b"\x00\x00\x00\x00",
        b"\xef\xbb\xbf{}",
    ] {
        let r = s.request("POST", COLLECTION, &json_headers(&auth), body);
        assert_eq!(r.status, 400, "{:?}: {}", body, r.text());
        assert_json_type(&r);
    }
    // A key that is not UTF-8 is no key.
    let mut raw = b"GET /api/v1/verifications/ver_00000000000000000000000000/ HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer svc_live_\xff\xfe\xfd\r\nConnection: close\r\n\r\n".to_vec();
    let r = exchange(&s, &raw);
    assert_eq!(r.status, 401, "{}", r.text());
    // NUL in a header value, in the request target, in a header name.
    for bad in [
        &b"GET / HTTP/1.1\r\nHost: localhost\r\nX-A: a\x00b\r\n\r\n"[..],
        b"GET /api/\x00/ HTTP/1.1\r\nHost: localhost\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: localhost\r\nX-\x00: a\r\n\r\n",
        b"\x00\x01\x02\x03\r\n\r\n",
    ] {
        let r = exchange(&s, bad);
        assert_eq!(r.status, 400, "{:?}: {}", bad, r.text());
        assert_eq!(r.header("connection"), Some("close"));
    }
    raw.clear();
    assert_healthy(&s, &token);
}

#[test]
fn nested_huge_and_non_object_json_get_400_and_create_nothing() {
    let (s, token) = server_one_number();
    let auth = format!("Bearer {token}");
    let deep_arrays = format!("{}{}", "[".repeat(30_000), "]".repeat(30_000));
    let deep_objects = format!("{}1{}", "{\"a\":".repeat(10_000), "}".repeat(10_000));
    let deep_in_field = format!(
        "{{\"phone\": \"{RU_PHONE}\", \"webhook_url\": \"{WEBHOOK}\", \"info\": {}1{}}}",
        "[".repeat(20_000),
        "]".repeat(20_000)
    );
    let huge_array = format!("[{}0]", "0,".repeat(30_000));
    let huge_string = format!("\"{}\"", "x".repeat(60_000));
    let many_keys = format!(
        "{{{}\"phone\": \"{RU_PHONE}\"}}",
        (0..4000)
            .map(|i| format!("\"k{i}\":1,"))
            .collect::<String>()
    );
    for b in [
        &deep_arrays,
        &deep_objects,
        &deep_in_field,
        &huge_array,
        &huge_string,
    ] {
        let r = s.request("POST", COLLECTION, &json_headers(&auth), b.as_bytes());
        assert_eq!(r.status, 400, "{}: {}", &b[..20], r.text());
        assert_json_type(&r);
        r.json();
    }
    // Unknown keys are ignored, as DRF does; the create is then a normal
    // one with no webhook_url: 400 for that field.
    let r = s.request(
        "POST",
        COLLECTION,
        &json_headers(&auth),
        many_keys.as_bytes(),
    );
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(r.json(), json!({"webhook_url": [REQUIRED]}));
    // An array, a string, a number instead of the object.
    for (b, t) in [
        ("[]", "list"),
        ("\"x\"", "str"),
        ("5", "int"),
        ("[{}]", "list"),
    ] {
        let r = s.request("POST", COLLECTION, &json_headers(&auth), b.as_bytes());
        assert_eq!(r.status, 400, "{b}: {}", r.text());
        assert_eq!(
            r.json(),
            json!({"non_field_errors": [format!("Недопустимые данные. Ожидался dictionary, но был получен {t}.")]})
        );
    }
    // The one number is still free: nothing above leased it.
    assert_healthy(&s, &token);
}

#[test]
fn wrong_or_missing_content_type_is_415_in_russian() {
    let (s, token) = server_one_number();
    let auth = format!("Bearer {token}");
    let json_body = body(RU_PHONE).to_string();
    for (ct, quoted) in [
        (Some("text/plain"), "text/plain"),
        (
            Some("application/x-www-form-urlencoded"),
            "application/x-www-form-urlencoded",
        ),
        (Some("application/jsonp"), "application/jsonp"),
        (None, ""),
    ] {
        let mut headers = vec![("Authorization", auth.as_str())];
        if let Some(ct) = ct {
            headers.push(("Content-Type", ct));
        }
        let r = s.request("POST", COLLECTION, &headers, json_body.as_bytes());
        assert_eq!(r.status, 415, "{ct:?}: {}", r.text());
        assert_eq!(
            r.json(),
            json!({"detail": format!("Неподдерживаемый тип данных \"{quoted}\" в запросе.")})
        );
    }
    assert_healthy(&s, &token);
}

#[test]
fn http_1_0_is_answered_and_closed_unless_kept_alive() {
    let (s, token) = server_one_number();
    let auth = format!("Bearer {token}");
    let req = format!(
        "GET {COLLECTION}ver_00000000000000000000000000/ HTTP/1.0\r\nAuthorization: {auth}\r\n\r\n"
    );
    let mut c = s.connect();
    c.send(req.as_bytes()).unwrap();
    let r = c.read_response().expect("an answer to HTTP/1.0");
    assert_eq!(r.status, 404, "{}", r.text());
    assert!(c.is_closed_within(Duration::from_secs(5)));
    // With keep-alive the connection serves a second request.
    let ka = format!(
        "GET {COLLECTION}ver_00000000000000000000000000/ HTTP/1.0\r\nAuthorization: {auth}\r\nConnection: keep-alive\r\n\r\n"
    );
    let mut c = s.connect();
    c.send(ka.as_bytes()).unwrap();
    assert_eq!(c.read_response().unwrap().status, 404);
    c.send(ka.as_bytes()).unwrap();
    assert_eq!(c.read_response().unwrap().status, 404);
    // HTTP/2 prior knowledge and made-up versions are not HTTP/1.x.
    for bad in [
        &b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"[..],
        b"GET / HTTP/3.7\r\nHost: x\r\n\r\n",
    ] {
        let r = exchange(&s, bad);
        assert_eq!(r.status, 400, "{}", r.text());
    }
    assert_healthy(&s, &token);
}

#[test]
fn pipelined_requests_are_answered_in_order_with_an_error_between() {
    let (s, token) = server_one_number();
    let auth = format!("Bearer {token}");
    let path = format!("{COLLECTION}ver_00000000000000000000000000/");
    let get = build_request("GET", &path, &[("Authorization", &auth)], b"", true);
    let bad = build_request("POST", COLLECTION, &json_headers(&auth), b"[]", true);
    let mut all = Vec::new();
    for _ in 0..10 {
        all.extend_from_slice(&get);
        all.extend_from_slice(&bad);
    }
    let mut c = s.connect();
    c.send(&all).unwrap();
    for _ in 0..10 {
        assert_eq!(c.read_response().unwrap().status, 404);
        assert_eq!(c.read_response().unwrap().status, 400);
    }
    assert_healthy(&s, &token);
}

#[test]
fn smuggling_pairs_and_unknown_codings_are_refused_and_the_connection_closed() {
    let (s, token) = server_one_number();
    let auth = format!("Bearer {token}");
    let smuggled = format!("GET {COLLECTION} HTTP/1.1\r\nHost: localhost\r\n\r\n");
    // (Transfer-Encoding, with a Content-Length beside it): every pair a
    // front end might frame differently from us. Plain `chunked` alone is
    // read (tests/create.rs); beside a Content-Length it is refused too.
    let refused = [
        ("chunked", true),
        ("Chunked", true),
        ("gzip, chunked", false),
        ("gzip, chunked", true),
        ("chunked, identity", false),
        ("chunked, chunked", false),
        ("identity", false),
        ("xchunked", false),
    ];
    for (te, with_length) in refused {
        let mut headers = vec![("Authorization", auth.as_str()), ("Transfer-Encoding", te)];
        if with_length {
            headers.push(("Content-Length", "5"));
        }
        let chunks = format!("0\r\n\r\n{smuggled}");
        let req = build_request("POST", COLLECTION, &headers, chunks.as_bytes(), true);
        let mut c = s.connect();
        let _ = c.send_best_effort(&req);
        let r = c.read_response().expect("an answer");
        assert!(matches!(r.status, 400 | 501), "{te}: {}", r.status);
        assert_eq!(r.header("connection"), Some("close"));
        // The smuggled GET is never answered: the connection is gone.
        assert!(c.is_closed_within(Duration::from_secs(5)), "{te}");
    }
    // Chunk sizes that overflow or are not hex never reach a parser.
    for sizes in [
        "fffffffffffffffffffff\r\n",
        "-1\r\n",
        "zz\r\n",
        "5;\x00\r\n",
    ] {
        let req = format!(
            "POST {COLLECTION} HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n{sizes}"
        );
        let r = exchange(&s, req.as_bytes());
        assert!(matches!(r.status, 400 | 413), "{sizes:?}: {}", r.status);
        assert_eq!(r.header("connection"), Some("close"));
    }
    // Obfuscated Transfer-Encoding names are malformed, not ignored.
    for head in [
        "Transfer-Encoding : chunked",
        "Transfer-Encoding\t: chunked",
        " Transfer-Encoding: chunked",
    ] {
        let req = format!(
            "POST {COLLECTION} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n{head}\r\n\r\n0\r\n\r\n"
        );
        let r = exchange(&s, req.as_bytes());
        assert_eq!(r.status, 400, "{head:?}");
        assert_eq!(r.header("connection"), Some("close"));
    }
    assert_healthy(&s, &token);
}

#[test]
fn duplicate_or_malformed_content_length_is_400_and_closes() {
    let (s, token) = server_one_number();
    let auth = format!("Bearer {token}");
    for lengths in [
        vec!["5", "5"],
        vec!["5", "6"],
        vec!["5, 5"],
        vec!["0x5"],
        vec![" "],
        vec!["5 "],
    ] {
        let mut head = format!("POST {COLLECTION} HTTP/1.1\r\nHost: localhost\r\nAuthorization: {auth}\r\nContent-Type: application/json\r\n");
        for l in &lengths {
            head.push_str(&format!("Content-Length: {l}\r\n"));
        }
        head.push_str("\r\n{}   ");
        let mut c = s.connect();
        let _ = c.send_best_effort(head.as_bytes());
        let r = c.read_response().expect("an answer");
        // `5 ` is trimmed as optional whitespace (RFC 9110 5.5): a valid 5.
        if lengths == ["5 "] {
            assert_eq!(r.status, 400, "{}", r.text());
            assert_eq!(
                r.json(),
                json!({"webhook_url": [REQUIRED], "phone": [REQUIRED]})
            );
            continue;
        }
        assert_eq!(r.status, 400, "{lengths:?}: {}", r.text());
        assert_eq!(r.header("connection"), Some("close"), "{lengths:?}");
        assert!(c.is_closed_within(Duration::from_secs(5)), "{lengths:?}");
    }
    assert_healthy(&s, &token);
}

#[test]
fn http_1_1_without_exactly_one_host_is_400() {
    let (s, token) = server_one_number();
    let auth = format!("Bearer {token}");
    let path = format!("{COLLECTION}ver_00000000000000000000000000/");
    // RFC 9112 3.2: a server MUST answer 400 to an HTTP/1.1 request without
    // a Host header, or with more than one.
    let no_host = format!("GET {path} HTTP/1.1\r\nAuthorization: {auth}\r\n\r\n");
    let two_hosts =
        format!("GET {path} HTTP/1.1\r\nHost: a\r\nHost: b\r\nAuthorization: {auth}\r\n\r\n");
    for req in [no_host, two_hosts] {
        let mut c = s.connect();
        c.send(req.as_bytes()).unwrap();
        let r = c.read_response().expect("an answer");
        assert_eq!(r.status, 400, "{req:?}: {}", r.text());
        assert_json_type(&r);
        assert_eq!(r.header("connection"), Some("close"));
    }
    // An empty Host is allowed (no authority in the target), and HTTP/1.0
    // needs none.
    let empty = format!(
        "GET {path} HTTP/1.1\r\nHost:\r\nAuthorization: {auth}\r\nConnection: close\r\n\r\n"
    );
    assert_eq!(exchange(&s, empty.as_bytes()).status, 404);
    let old = format!("GET {path} HTTP/1.0\r\nAuthorization: {auth}\r\n\r\n");
    assert_eq!(exchange(&s, old.as_bytes()).status, 404);
    assert_healthy(&s, &token);
}

#[test]
fn expect_100_continue_gets_a_100_before_the_body_is_sent() {
    let (s, token) = server_one_number();
    let auth = format!("Bearer {token}");
    let json_body = body(RU_PHONE).to_string();
    let mut headers = json_headers(&auth);
    headers.push(("Expect", "100-continue"));
    let req = build_request("POST", COLLECTION, &headers, json_body.as_bytes(), true);
    let head_end = req.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let mut c = s.connect();
    c.send(&req[..head_end]).unwrap();
    // A client waits for the 100 before it sends the body (curl gives up
    // after 1 s; a server that never says 100 costs every such client that
    // second). Within 5 s: only the interim response, nothing else.
    c.stream
        .sock
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let interim = c.read_response().expect("an interim 100 Continue");
    c.stream.sock.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    assert_eq!(interim.status, 100);
    c.send(&req[head_end..]).unwrap();
    let r = c.read_response().unwrap();
    assert_eq!(r.status, 201, "{}", r.text());

    // A request refused on its head alone gets the final answer, no 100.
    let mut big = headers.clone();
    big.push(("Content-Length", "10000000"));
    let req = build_request("POST", COLLECTION, &big, b"", true);
    let r = exchange(&s, &req);
    assert_eq!(r.status, 413);

    // An expectation we cannot meet is 417 (RFC 9110 10.1.1).
    let mut odd = json_headers(&auth);
    odd.push(("Expect", "teapot"));
    let r = s.request("POST", COLLECTION, &odd, json_body.as_bytes());
    assert_eq!(r.status, 417, "{}", r.text());
    assert_json_type(&r);
    let logs = s.logs();
    assert!(!logs.contains("panicked"), "{logs}");
}

#[test]
fn unknown_and_malformed_methods_are_405_or_400() {
    let (s, token) = server_one_number();
    let auth = format!("Bearer {token}");
    for m in ["BREW", "PROPFIND", "get", "TRACE", "CONNECT"] {
        let r = s.request(m, COLLECTION, &[("Authorization", &auth)], b"");
        assert_eq!(r.status, 405, "{m}: {}", r.text());
        assert_eq!(r.detail(), method_not_allowed(m));
    }
    for raw in [
        &b"G@T / HTTP/1.1\r\nHost: x\r\n\r\n"[..],
        b"GET\x7f / HTTP/1.1\r\nHost: x\r\n\r\n",
        b" GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET  / HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET http://evil.example/ HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET * HTTP/1.1\r\nHost: x\r\n\r\n",
    ] {
        let r = exchange(&s, raw);
        assert_eq!(
            r.status,
            400,
            "{:?}: {}",
            String::from_utf8_lossy(raw),
            r.text()
        );
    }
    assert_healthy(&s, &token);
}

/// The first flight of a real TLS client (a ClientHello), as bytes.
fn client_hello() -> Vec<u8> {
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(rustls::RootCertStore::empty())
    .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let mut out = Vec::new();
    while conn.wants_write() {
        conn.write_tls(&mut out).unwrap();
    }
    out
}

#[test]
fn tls_on_the_plain_port_is_400_at_once() {
    let (s, token) = server_one_number();
    let mut c = s.connect_plain();
    let hello = client_hello();
    assert_eq!(hello[0], 0x16, "a TLS handshake record");
    c.send(&hello).unwrap();
    let sent = Instant::now();
    // A ClientHello has no CRLF CRLF: a server that waits for the end of a
    // head answers only at its 10 s read timeout.
    c.stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let r = c.read_response().expect("an answer within 5 s");
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(sent.elapsed() < Duration::from_secs(5));
    assert!(c.is_closed_within(Duration::from_secs(5)));
    assert_healthy(&s, &token);
}

#[test]
fn plain_http_on_the_tls_port_is_closed_at_once() {
    let (s, token) = server_one_number();
    let mut tcp = TcpStream::connect(s.https).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    tcp.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let sent = Instant::now();
    let mut got = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        match tcp.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&chunk[..n]),
        }
    }
    assert!(
        sent.elapsed() < Duration::from_secs(5),
        "not closed within 5 s"
    );
    // At most a TLS alert record; never an HTTP answer in the clear.
    assert!(got.is_empty() || got[0] == 0x15, "{got:?}");
    assert_healthy(&s, &token);
}
