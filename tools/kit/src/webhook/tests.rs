//! The receiver against a hand-written client: signature verdicts and
//! their answers, the script, and the limits.
//!
//! Not for: the receiver against the service (the root package's
//! `tests/it/webhooks`).

use super::*;
use crate::signature;
use dialproof_engine::webhook::signature_header;
use std::io::{Read, Write};
use std::sync::mpsc;

fn post(addr: SocketAddr, path: &str, body: &str, signature: Option<&str>) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let sig = signature
        .map(|h| format!("X-Service-Signature: {h}\r\n"))
        .unwrap_or_default();
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\n{sig}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

#[test]
fn verifies_and_reports_each_webhook() {
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let settings = Settings {
        secrets: vec!["whsec_k".into()],
        tolerance_seconds: 300,
    };
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let r = Receiver::start(listener, settings, move |e| {
        let _ = tx.lock().unwrap().send(e);
    })
    .unwrap();
    let body = r#"{"type":"verification.completed","verification_id":"ver_1","completed_at":"2024-01-01T00:00:00.000Z"}"#;
    let good = signature_header(signature::now_unix_seconds(), body.as_bytes(), &["whsec_k"]);
    assert!(post(r.addr(), "/hook", body, Some(&good)).starts_with("HTTP/1.1 200"));
    let e = rx.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(e.event_type, "verification.completed");
    assert_eq!(e.verification_id, "ver_1");
    assert_eq!(e.verdict, Verdict::Valid);

    let bad = signature_header(signature::now_unix_seconds(), body.as_bytes(), &["whsec_x"]);
    assert!(post(r.addr(), "/hook", body, Some(&bad)).starts_with("HTTP/1.1 400"));
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(5)).unwrap().verdict,
        Verdict::Mismatch
    );
    assert!(post(r.addr(), "/hook", "not json", None).starts_with("HTTP/1.1 400"));
    let e = rx.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!((e.verdict, e.event_type.as_str()), (Verdict::Missing, ""));
    assert!(r.hits().is_empty(), "the tools' receiver keeps nothing");
}

#[test]
fn a_recording_receiver_answers_from_its_script_and_keeps_every_hit() {
    let r = Receiver::recording(Answer::Status(200));
    r.script("/a", &[Answer::Status(500), Answer::Redirect("/b".into())]);
    assert!(post(r.addr(), "/a", "{}", None).starts_with("HTTP/1.1 500"));
    let moved = post(r.addr(), "/a", "{}", None);
    assert!(
        moved.starts_with("HTTP/1.1 301") && moved.contains("Location: /b\r\n"),
        "{moved}"
    );
    assert!(post(r.addr(), "/a", "{}", None).starts_with("HTTP/1.1 200"));
    let hits = r.wait_for("/a", 3, Duration::from_secs(5));
    assert_eq!(hits[0].verdict, Verdict::Unchecked);
    assert_eq!(hits[0].header("content-length"), Some("2"));
    assert_eq!((r.open_requests(), r.answered_requests()), (0, 3));
}

#[test]
fn requests_past_the_limits_are_refused_and_not_hits() {
    let r = Receiver::recording(Answer::Status(200));
    let mut s = TcpStream::connect(r.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let big = format!(
        "POST /a HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
        BODY_BYTES_MAX + 1
    );
    s.write_all(big.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    assert!(out.starts_with("HTTP/1.1 413"), "{out}");
    assert!(r.hits().is_empty());
}
