//! REGISTER answered with hostile digest challenges, against the real
//! binary: a fake registrar on loopback answers each line's REGISTER with
//! one kind of broken `WWW-Authenticate` (no nonce, a 60 000-byte nonce, an
//! unknown algorithm, only `auth-int`, an unterminated quote, Basic, fifty
//! challenges, an empty header, and `stale=true` forever). Those lines stay
//! down (their numbers are never issued) and retry with backoff rather
//! than in a loop, the service never panics, and a line whose registrar
//! answers properly registers beside them and serves creates.
//!
//! Not for: a registrar that only falls silent
//! (`resilience::fault::registrar`).

use crate::support::sip::*;
use crate::support::*;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One line per hostile challenge (the user name picks it), and `good`.
const CHALLENGES: [(&str, &str); 9] = [
    ("nononce", "Digest realm=\"test\""),
    ("hugenonce", ""),
    (
        "algo",
        "Digest realm=\"test\", nonce=\"n1\", algorithm=SHA-999",
    ),
    (
        "authint",
        "Digest realm=\"test\", nonce=\"n1\", qop=\"auth-int\"",
    ),
    ("quote", "Digest realm=\"test, nonce=\"n1"),
    ("basic", "Basic realm=\"test\""),
    ("many", ""),
    ("empty", ""),
    ("stale", ""),
];
const NUMBERS_PER_LINE: u64 = 2;

/// The `WWW-Authenticate` header lines for `user`'s `n`th REGISTER.
fn challenge(user: &str, n: usize) -> String {
    let h = |v: &str| format!("WWW-Authenticate: {v}\r\n");
    match user {
        "hugenonce" => h(&format!(
            "Digest realm=\"test\", nonce=\"{}\"",
            "n".repeat(60_000)
        )),
        "many" => (0..50)
            .map(|i| {
                h(&format!(
                    "Digest realm=\"r{i}\", nonce=\"n{i}\", algorithm=X-{i}"
                ))
            })
            .collect(),
        "empty" => h(""),
        "stale" => h(&format!(
            "Digest realm=\"test\", nonce=\"fresh{n}\", stale=true, algorithm=MD5"
        )),
        "good" => h("Digest realm=\"test\", nonce=\"goodnonce\", algorithm=MD5"),
        other => h(CHALLENGES
            .iter()
            .find(|(u, _)| *u == other)
            .map_or("", |(_, c)| c)),
    }
}

/// A registrar that answers each REGISTER (200 to `good` with credentials,
/// else its user's challenge); counts them per user.
fn registrar(seen: Arc<Mutex<HashMap<String, usize>>>) -> FakePeer {
    FakePeer::start("REGISTER", move |msg| {
        let from_h = header(msg, "from");
        let user = from_h
            .split("sip:")
            .nth(1)
            .and_then(|r| r.split('@').next())
            .unwrap_or("")
            .to_owned();
        let count = {
            let mut s = seen.lock().unwrap();
            let c = s.entry(user.clone()).or_default();
            *c += 1;
            *c
        };
        let authorized = !header(msg, "authorization").is_empty();
        let (status, extra) = if user == "good" && authorized {
            let contact = header(msg, "contact");
            (
                "200 OK",
                format!("Contact: {contact};expires=60\r\nExpires: 60\r\n"),
            )
        } else {
            ("401 Unauthorized", challenge(&user, count))
        };
        Some(format!(
            "SIP/2.0 {status}\r\n{}From: {from_h}\r\nTo: {};tag=reg\r\nCall-ID: {}\r\nCSeq: {}\r\n{extra}Content-Length: 0\r\n\r\n",
            copied_headers(msg, &["via:"]),
            header(msg, "to"),
            header(msg, "call-id"),
            header(msg, "cseq"),
        ))
    })
}

#[test]
fn hostile_digest_challenges_keep_their_lines_down_without_a_loop() {
    let seen = Arc::new(Mutex::new(HashMap::new()));
    let peer = registrar(seen.clone());
    let registrar_addr = peer.addr;
    let users: Vec<&str> = CHALLENGES
        .iter()
        .map(|(u, _)| *u)
        .chain(std::iter::once("good"))
        .collect();
    let lines: String = users
        .iter()
        .enumerate()
        .map(|(i, u)| {
            format!(
                "[[lines]]\nname = \"{u}\"\nmode = \"register\"\nprovider = \"{registrar_addr}\"\n\
                 username = \"{u}\"\npassword = \"secret\"\nregister_expires_seconds = 60\n\
                 numbers = [ {{ range_start = \"+{}\", count = {NUMBERS_PER_LINE}, pool = \"domestic\" }} ]\n\n",
                LINE_START + i as u64 * 10
            )
        })
        .collect();
    let s = Server::start(&sip_config(&lines));
    let token = s.new_client("acme");
    // The good line registers; its two numbers are the only ones issued.
    let good_start = LINE_START + (users.len() as u64 - 1) * 10;
    let first = poll(Duration::from_secs(15), || {
        let r = s.create(&token, &body(RU_PHONE));
        (r.status == 201).then(|| r.json())
    })
    .unwrap_or_else(|| panic!("the good line never registered:\n{}", s.logs()));
    let second = s.create_ok(&token, &body(RU_PHONE));
    let mut issued = vec![
        first["dial_number"].as_str().unwrap().to_owned(),
        second["dial_number"].as_str().unwrap().to_owned(),
    ];
    issued.sort();
    assert_eq!(
        issued,
        [format!("+{good_start}"), format!("+{}", good_start + 1)]
    );
    let r = s.create(&token, &body(RU_PHONE));
    assert_eq!(
        r.status,
        503,
        "a hostile line's number was issued: {}",
        r.text()
    );

    // Let the hostile lines retry for a while: backoff, not a loop.
    std::thread::sleep(Duration::from_secs(6));
    drop(peer);
    let seen = seen.lock().unwrap().clone();
    eprintln!("REGISTERs per line: {seen:?}");
    for (user, _) in CHALLENGES {
        let n = seen.get(user).copied().unwrap_or(0);
        assert!(n >= 1, "{user}: no REGISTER at all ({seen:?})");
        // Within ~8 s: a first attempt with at most two auth rounds, then
        // retries at 2 s and 4 s (with jitter), each up to two rounds.
        assert!(
            n <= 12,
            "{user}: {n} REGISTERs in ~8 s: a retry loop ({seen:?})"
        );
    }
    let logs = s.logs();
    assert!(!logs.contains("panicked"), "{logs}");
}
