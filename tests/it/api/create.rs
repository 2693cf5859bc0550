//! POST /api/v1/verifications/: the 201 body and headers, TTL clamping, and
//! every 400 (field texts, JSON errors, the SSRF guard in every spelling of
//! an internal address: IPv4-mapped, decimal, hex, octal, NAT64 and
//! IPv4-compatible) creating nothing.
//!
//! Not for: the SSRF guard at delivery time (`webhooks::rebinding`), or
//! running out of numbers (`api::pools`).

use crate::support::*;
use serde_json::{json, Value};

/// Asserts a 400 whose JSON body equals `want` exactly.
#[track_caller]
fn assert_400(r: &Resp, want: &Value, what: &str) {
    assert_eq!(r.status, 400, "{what}: {}", r.text());
    assert_json_type(r);
    assert_eq!(&r.json(), want, "{what}");
}

/// The one message of `field` in a 400 body that has only that field.
#[track_caller]
fn only_message(r: &Resp, field: &str, what: &str) -> String {
    assert_eq!(r.status, 400, "{what}: {}", r.text());
    assert_json_type(r);
    let v = r.json();
    let obj = v.as_object().unwrap_or_else(|| panic!("{what}: {v}"));
    assert_eq!(
        obj.keys().collect::<Vec<_>>(),
        vec![field],
        "{what}: keys of {v}"
    );
    let msgs = v[field].as_array().unwrap_or_else(|| panic!("{what}: {v}"));
    assert_eq!(msgs.len(), 1, "{what}: {v}");
    msgs[0].as_str().unwrap().to_owned()
}

/// With a 1 + 1 pool: both numbers are still free, i.e. none of the
/// preceding requests leased one.
#[track_caller]
fn assert_pools_untouched(s: &Server, token: &str) {
    let d = s.create_ok(token, &body(RU_PHONE));
    assert_eq!(d["dial_number"], domestic_numbers(1)[0]);
    let i = s.create_ok(token, &body(UK_PHONE));
    assert_eq!(i["dial_number"], international_numbers(1)[0]);
}

#[test]
fn created_verification_has_every_field_and_defaults() {
    let s = Server::with_pools(2, 1);
    let token = s.new_client("acme");
    let before = now_millis();
    let r = s.create(&token, &body(RU_PHONE));
    let after = now_millis();
    assert_eq!(r.status, 201, "{}", r.text());
    assert_json_type(&r);
    let v = r.json();
    assert_verification(&v);
    let id = v["verification_id"].as_str().unwrap();
    assert_eq!(
        r.header("location"),
        Some(format!("/api/v1/verifications/{id}/").as_str())
    );
    assert_eq!(v["phone"], RU_PHONE);
    assert_eq!(v["client_ref"], "");
    assert_eq!(v["info"], "");
    assert_eq!(v["status"], "pending");
    assert_eq!(v["ttl_seconds"], 60);
    assert_eq!(v["completed_at"], Value::Null);
    assert_eq!(v["caller_id_received"], "");
    assert!(domestic_numbers(2).contains(&v["dial_number"].as_str().unwrap().to_owned()));
    let created = parse_utc(v["created_at"].as_str().unwrap());
    assert!(
        created >= before - 2000 && created <= after + 2000,
        "created_at {created} not within [{before}, {after}]"
    );
    assert_eq!(
        parse_utc(v["expires_at"].as_str().unwrap()) - created,
        60_000
    );

    // The same object is readable.
    let g = s.get(&token, id);
    assert_eq!(g.status, 200, "{}", g.text());
    assert_json_type(&g);
    assert_eq!(g.json(), v);

    // Kazakhstan (+7) is domestic; echoes of client_ref and info.
    let kz = s.create_ok(
        &token,
        &json!({"phone": KZ_PHONE, "webhook_url": WEBHOOK, "client_ref": "order-42",
                "info": "тариф «Базовый»", "ttl_seconds": 120}),
    );
    assert_verification(&kz);
    assert_eq!(kz["phone"], KZ_PHONE);
    assert_eq!(kz["client_ref"], "order-42");
    assert_eq!(kz["info"], "тариф «Базовый»");
    assert_eq!(kz["ttl_seconds"], 120);
    assert!(domestic_numbers(2).contains(&kz["dial_number"].as_str().unwrap().to_owned()));
    assert_ne!(kz["dial_number"], v["dial_number"]);
    assert_ne!(kz["verification_id"], v["verification_id"]);

    // UK is international.
    let uk = s.create_ok(&token, &body(UK_PHONE));
    assert_verification(&uk);
    assert_eq!(uk["phone"], UK_PHONE);
    assert_eq!(uk["dial_number"], international_numbers(1)[0]);
}

#[test]
fn ttl_is_clamped_into_30_600() {
    let s = Server::with_pools(4, 4);
    let token = s.new_client("acme");
    let cases = [
        (1, 30),
        (29, 30),
        (30, 30),
        (600, 600),
        (601, 600),
        (3600, 600),
        (45, 45),
    ];
    for (i, (given, effective)) in cases.into_iter().enumerate() {
        let phone = if i % 2 == 0 { RU_PHONE } else { UK_PHONE };
        let v = s.create_ok(
            &token,
            &json!({"phone": phone, "webhook_url": WEBHOOK, "ttl_seconds": given}),
        );
        assert_verification(&v);
        assert_eq!(v["ttl_seconds"], effective, "ttl {given}");
        let created = parse_utc(v["created_at"].as_str().unwrap());
        let expires = parse_utc(v["expires_at"].as_str().unwrap());
        assert_eq!(expires - created, effective * 1000, "ttl {given}");
    }
}

#[test]
fn ttl_out_of_range_or_not_an_integer() {
    let s = Server::with_pools(1, 1);
    let token = s.new_client("acme");
    let cases: [(Value, String); 6] = [
        (json!(0), min_value(1)),
        (json!(-5), min_value(1)),
        (json!(3601), max_value(3600)),
        (json!(100000), max_value(3600)),
        (json!("abc"), INVALID_INTEGER.to_owned()),
        (json!(true), INVALID_INTEGER.to_owned()),
    ];
    for (ttl, msg) in cases {
        let r = s.create(
            &token,
            &json!({"phone": RU_PHONE, "webhook_url": WEBHOOK, "ttl_seconds": ttl}),
        );
        assert_400(&r, &json!({ "ttl_seconds": [msg] }), &format!("ttl {ttl}"));
    }
    assert_pools_untouched(&s, &token);
}

#[test]
fn phone_forms() {
    let s = Server::with_pools(1, 1);
    let token = s.new_client("acme");
    let invalid = [
        "+7 912 345 67 89",
        "+7-912-345-67-89",
        "+7(912)3456789",
        "+7 (912) 345-67-89",
        "79123456789",
        "89123456789",
        "+7912345",          // too short
        "+791234",           // too short
        "+7912345678",       // one digit short for Russia
        "+7912345678901234", // 16 digits
        "+79123456789a",
        "+",
        "phone",
        "++79123456789",
    ];
    for phone in invalid {
        let r = s.create(&token, &body(phone));
        assert_400(&r, &json!({ "phone": [INVALID_PHONE] }), phone);
    }
    // Over 32 characters: the normalized phone text or the length text.
    let long = format!("+7912345678{}", "9".repeat(30));
    assert!(long.chars().count() > 32);
    let msg = only_message(&s.create(&token, &body(&long)), "phone", "33+ chars");
    assert!(
        msg == INVALID_PHONE || msg == max_length(32),
        "over-long phone message: {msg:?}"
    );
    // Not a string.
    for phone in [json!(79123456789u64), json!(["+79123456789"])] {
        let r = s.create(&token, &json!({"phone": phone, "webhook_url": WEBHOOK}));
        assert_eq!(r.status, 400, "{phone}: {}", r.text());
        assert!(r.json()["phone"].is_array(), "{phone}: {}", r.text());
    }
    assert_pools_untouched(&s, &token);
}

#[test]
fn missing_fields_and_bad_bodies() {
    let s = Server::with_pools(1, 1);
    let token = s.new_client("acme");
    let both_required = json!({"phone": [REQUIRED], "webhook_url": [REQUIRED]});
    // An empty body counts as {}.
    assert_400(&s.create_raw(&token, b""), &both_required, "empty body");
    assert_400(&s.create_raw(&token, b"{}"), &both_required, "{}");
    assert_400(
        &s.create(&token, &json!({"client_ref": "x", "ttl_seconds": 60})),
        &both_required,
        "only optional fields",
    );
    assert_400(
        &s.create(&token, &json!({"phone": RU_PHONE})),
        &json!({"webhook_url": [REQUIRED]}),
        "no webhook_url",
    );
    assert_400(
        &s.create(&token, &json!({"webhook_url": WEBHOOK})),
        &json!({"phone": [REQUIRED]}),
        "no phone",
    );
    // Blank and null (DRF texts).
    assert_400(
        &s.create(&token, &json!({"phone": "", "webhook_url": WEBHOOK})),
        &json!({"phone": ["Это поле не может быть пустым."]}),
        "blank phone",
    );
    assert_400(
        &s.create(&token, &json!({"phone": null, "webhook_url": WEBHOOK})),
        &json!({"phone": ["Это поле не может быть пустым."]}),
        "null phone",
    );
    // All field errors together, one key each.
    assert_400(
        &s.create(
            &token,
            &json!({"phone": "12", "webhook_url": "nope", "ttl_seconds": 0}),
        ),
        &json!({"phone": [INVALID_PHONE], "webhook_url": [INVALID_URL],
                "ttl_seconds": [min_value(1)]}),
        "three bad fields",
    );

    // Malformed JSON: {"detail": "JSON parse error - <Python's message>"}.
    assert_400(
        &s.create_raw(&token, b"{"),
        &json!({"detail":
            "JSON parse error - Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"}),
        "{",
    );
    for bad in [
        &b"{\"phone\": \"+79123456789\","[..],
        b"not json",
        b"{'phone': '+79123456789'}",
        b"{\"phone\": \"+79123456789\"} trailing",
        b"\xff\xfe",
    ] {
        let r = s.create_raw(&token, bad);
        assert_eq!(
            r.status,
            400,
            "{:?}: {}",
            String::from_utf8_lossy(bad),
            r.text()
        );
        assert_json_type(&r);
        let v = r.json();
        assert_eq!(v.as_object().unwrap().len(), 1, "{v}");
        let d = v["detail"].as_str().unwrap_or_else(|| panic!("{v}"));
        assert!(d.starts_with("JSON parse error - "), "{d:?}");
        assert!(d.len() > "JSON parse error - ".len(), "{d:?}");
    }

    // JSON that is not an object.
    assert_400(
        &s.create_raw(&token, b"[]"),
        &json!({ "non_field_errors": [NOT_A_DICT_LIST] }),
        "[]",
    );
    assert_400(
        &s.create(
            &token,
            &json!([{"phone": RU_PHONE, "webhook_url": WEBHOOK}]),
        ),
        &json!({ "non_field_errors": [NOT_A_DICT_LIST] }),
        "[{...}]",
    );
    assert_pools_untouched(&s, &token);
}

#[test]
fn length_limits() {
    // Exactly as many numbers as successes below: a 400 that leased a
    // number would turn a later 201 into a 503.
    let s = Server::with_pools(2, 1);
    let token = s.new_client("acme");
    let url_of = |n: usize| {
        let base = "https://93.184.216.34/";
        format!("{base}{}", "a".repeat(n - base.len()))
    };
    assert_400(
        &s.create(
            &token,
            &json!({"phone": RU_PHONE, "webhook_url": WEBHOOK, "client_ref": "я".repeat(121)}),
        ),
        &json!({"client_ref": [max_length(120)]}),
        "client_ref 121",
    );
    assert_400(
        &s.create(
            &token,
            &json!({"phone": RU_PHONE, "webhook_url": WEBHOOK, "info": "ж".repeat(501)}),
        ),
        &json!({"info": [max_length(500)]}),
        "info 501",
    );
    assert_400(
        &s.create(
            &token,
            &json!({"phone": RU_PHONE, "webhook_url": url_of(501)}),
        ),
        &json!({"webhook_url": [max_length(500)]}),
        "webhook_url 501",
    );

    // At the limits: accepted (lengths are in characters, not bytes).
    let v = s.create_ok(
        &token,
        &json!({"phone": RU_PHONE, "webhook_url": WEBHOOK, "client_ref": "я".repeat(120)}),
    );
    assert_eq!(v["client_ref"], "я".repeat(120));
    let v = s.create_ok(
        &token,
        &json!({"phone": UK_PHONE, "webhook_url": WEBHOOK, "info": "ж".repeat(500)}),
    );
    assert_eq!(v["info"], "ж".repeat(500));
    let v = s.create_ok(
        &token,
        &json!({"phone": KZ_PHONE, "webhook_url": url_of(500)}),
    );
    assert_verification(&v);
}

#[test]
fn webhook_url_syntax_and_ssrf_guard() {
    let s = Server::with_pools(1, 1);
    let token = s.new_client("acme");
    let with_url = |url: &str| json!({"phone": RU_PHONE, "webhook_url": url});
    let msg_of = |url: &str| only_message(&s.create(&token, &with_url(url)), "webhook_url", url);

    for url in [
        "not a url",
        "93.184.216.34/hook",
        "https://",
        "https://exa mple.com/",
        "http:///path",
        "https://93.184.216.34:abc/",
    ] {
        assert_eq!(msg_of(url), INVALID_URL, "{url}");
    }
    assert_eq!(
        msg_of("ftp://93.184.216.34/hook"),
        "webhook_url scheme must be http or https, got 'ftp'"
    );
    assert_eq!(
        msg_of("http://user:pass@8.8.8.8/"),
        "webhook_url must not contain embedded credentials"
    );
    let private = |ip: &str| format!("webhook_url resolves to a private/internal address ({ip})");
    for (url, ip) in [
        ("http://127.0.0.1/", "127.0.0.1"),
        ("https://127.0.0.1:8443/hook", "127.0.0.1"),
        ("http://10.0.0.1/", "10.0.0.1"),
        ("https://192.168.1.10/x", "192.168.1.10"),
        ("https://172.16.5.4/", "172.16.5.4"),
        (
            "http://169.254.169.254/latest/meta-data/",
            "169.254.169.254",
        ),
        ("http://[::1]/", "::1"),
    ] {
        assert_eq!(msg_of(url), private(ip), "{url}");
    }
    // An IPv4-mapped IPv6 loopback: either spelling of the address.
    let m = msg_of("http://[::ffff:127.0.0.1]/");
    assert!(
        m == private("::ffff:127.0.0.1") || m == private("127.0.0.1"),
        "mapped loopback: {m:?}"
    );
    // localhost resolves (via /etc/hosts) to loopback.
    let m = msg_of("http://localhost/");
    assert!(
        m == private("127.0.0.1") || m == private("::1"),
        "localhost: {m:?}"
    );
    // Decimal, hex and octal spellings of 127.0.0.1: refused either as bad
    // syntax or as a private address.
    for url in [
        "http://2130706433/",
        "http://0x7f000001/",
        "http://017700000001/",
        "http://0177.0.0.1/",
    ] {
        let m = msg_of(url);
        assert!(
            m == INVALID_URL
                || m.starts_with("webhook_url resolves to a private/internal address ("),
            "{url}: {m:?}"
        );
    }
    let m = msg_of("https://nonexistent.invalid/");
    assert!(
        m.starts_with("webhook_url host cannot be resolved: "),
        "unresolvable: {m:?}"
    );

    // A bad phone and a private URL: both reported together.
    assert_400(
        &s.create(
            &token,
            &json!({"phone": "123", "webhook_url": "http://10.1.2.3/"}),
        ),
        &json!({"phone": [INVALID_PHONE], "webhook_url": [private("10.1.2.3")]}),
        "phone + ssrf",
    );

    // Public literals pass (http is allowed at creation).
    assert_pools_untouched(&s, &token);
    let s2 = Server::with_pools(0, 1);
    let t2 = s2.new_client("acme");
    let v = s2.create_ok(
        &t2,
        &json!({"phone": UK_PHONE, "webhook_url": "http://8.8.8.8:8080/hooks?x=1"}),
    );
    assert_verification(&v);
}

#[test]
fn development_urls_skip_the_address_check() {
    let mut s = Server::prepare(&pools(3, 0));
    let dev = s.create_company("dev");
    s.cli(&[
        "company",
        "dev-urls",
        &dev.to_string(),
        "http://127.0.0.1:9000",
    ]);
    let dev_token = s.create_key(dev);
    s.launch();
    let other = s.create_company("other");
    let other_token = s.create_key(other);
    let with_url = |url: &str| json!({"phone": RU_PHONE, "webhook_url": url});
    let private = "webhook_url resolves to a private/internal address (127.0.0.1)";

    for url in ["http://127.0.0.1:9000/hook", "http://127.0.0.1:9000"] {
        let v = s.create_ok(&dev_token, &with_url(url));
        assert_verification(&v);
    }
    // Not below the development URL, or another company: guarded as usual.
    for url in [
        "http://127.0.0.1:900/hook",
        "http://127.0.0.1:90001/",
        "http://10.0.0.1:9000/",
    ] {
        let m = only_message(&s.create(&dev_token, &with_url(url)), "webhook_url", url);
        assert!(
            m == INVALID_URL || m.starts_with("webhook_url "),
            "{url}: {m}"
        );
    }
    assert_eq!(
        only_message(
            &s.create(&other_token, &with_url("http://127.0.0.1:9000/hook")),
            "webhook_url",
            "other company"
        ),
        private
    );
    // Development URLs are http(s) only.
    let refused = s.cli_output(&["company", "dev-urls", &dev.to_string(), "ftp://127.0.0.1/"]);
    assert!(!refused.status.success(), "ftp development URL accepted");

    // An operator change reaches the running service within seconds.
    s.cli(&[
        "company",
        "dev-urls",
        &other.to_string(),
        "http://127.0.0.1:9000/",
    ]);
    let v = poll(std::time::Duration::from_secs(3), || {
        let r = s.create(&other_token, &with_url("http://127.0.0.1:9000/hook"));
        (r.status == 201).then(|| r.json())
    })
    .expect("dev URL set on a running service not applied within 3 s");
    assert_verification(&v);
}

#[test]
fn a_body_that_is_not_json_by_its_content_type_gets_415_and_creates_nothing() {
    let s = Server::with_pools(1, 1);
    let token = s.new_client("acme");
    let auth = format!("Bearer {token}");
    let valid = body(RU_PHONE).to_string();
    for (content_type, quoted) in [
        (Some("text/plain"), "text/plain"),
        (
            Some("text/plain; charset=utf-8"),
            "text/plain; charset=utf-8",
        ),
        (
            Some("application/x-www-form-urlencoded"),
            "application/x-www-form-urlencoded",
        ),
        (Some("text/json"), "text/json"),
        (None, ""),
    ] {
        let mut headers = vec![("Authorization", auth.as_str())];
        headers.extend(content_type.map(|ct| ("Content-Type", ct)));
        let r = s.request("POST", COLLECTION, &headers, valid.as_bytes());
        assert_eq!(r.status, 415, "{content_type:?}: {}", r.text());
        assert_json_type(&r);
        assert_eq!(
            r.json(),
            json!({ "detail": format!("Неподдерживаемый тип данных \"{quoted}\" в запросе.") }),
            "{content_type:?}"
        );
    }
    // An empty body is not parsed at all, whatever its type: the missing
    // fields are reported (DRF treats it as `{}`).
    let r = s.request(
        "POST",
        COLLECTION,
        &[("Authorization", &auth), ("Content-Type", "text/plain")],
        b"",
    );
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.json().get("phone").is_some(), "{}", r.text());
    // JSON in any case, with parameters, is parsed.
    let r = s.request(
        "POST",
        COLLECTION,
        &[
            ("Authorization", &auth),
            ("Content-Type", "Application/JSON; charset=utf-8"),
        ],
        valid.as_bytes(),
    );
    assert_eq!(r.status, 201, "{}", r.text());
    // Nothing was taken by the refused bodies: the pool's one number went
    // to the JSON create, and the next one finds none.
    assert_eq!(s.create(&token, &body(RU_PHONE)).status, 503);
}

#[test]
fn nat64_and_ipv4_compatible_spellings_of_internal_addresses_are_refused() {
    let s = Server::with_pools(2, 0);
    let token = s.new_client("acme");
    for url in [
        "http://[64:ff9b::7f00:1]/hook",
        "http://[64:ff9b::a00:1]/hook",
        "http://[64:ff9b::c0a8:101]/hook",
        "http://[64:ff9b:1::1]/hook",
        "http://[::7f00:1]/hook",
        "http://[::ffff:a9fe:a9fe]/hook",
        "http://[2002:7f00:1::]/hook",
    ] {
        let r = s.create(&token, &json!({"phone": RU_PHONE, "webhook_url": url}));
        assert_eq!(r.status, 400, "{url}: {}", r.text());
        let m = r.json()["webhook_url"][0].as_str().unwrap_or("").to_owned();
        assert!(
            m.starts_with("webhook_url resolves to a private/internal address (")
                || m == INVALID_URL,
            "{url}: {m:?}"
        );
    }
    // A public address in NAT64 form is no internal one.
    let ok = s.create(
        &token,
        &json!({"phone": RU_PHONE, "webhook_url": "http://[64:ff9b::5db8:d822]/hook"}),
    );
    assert_eq!(ok.status, 201, "{}", ok.text());
}

/// RFC 9112 7.1: a recipient must parse the chunked coding, and clients
/// that stream a body (Go, `curl -T -`, Python's requests with a
/// generator) send it. Read within the same 64 KiB body limit.
#[test]
fn a_chunked_body_is_read_like_a_sized_one() {
    let s = Server::with_pools(1, 0);
    let token = s.new_client("acme");
    let auth = format!("Bearer {token}");
    let headers = [
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
        ("Transfer-Encoding", "chunked"),
    ];
    let payload = body(RU_PHONE).to_string();
    let (a, b) = payload.split_at(10);
    let chunked = format!(
        "{:x}\r\n{a}\r\n{:X};note=1\r\n{b}\r\n0\r\nX-Trailer: ignored\r\n\r\n",
        a.len(),
        b.len()
    );
    let r = s.request("POST", COLLECTION, &headers, chunked.as_bytes());
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["phone"], RU_PHONE);
    // Over the body limit once decoded: 413, and the connection closed.
    let big = 64 * 1024 + 1;
    let over = format!("{big:x}\r\n{}\r\n0\r\n\r\n", "x".repeat(big));
    // The answer comes as soon as the chunk's size is read, so the rest
    // may meet a closed connection.
    let mut c = s.connect();
    let _ = c.send_best_effort(&build_request(
        "POST",
        COLLECTION,
        &headers,
        over.as_bytes(),
        false,
    ));
    let r = c.read_response().expect("an answer");
    assert_eq!(r.status, 413, "{}", r.text());
    assert_eq!(r.header("connection"), Some("close"));
}
