//! A registrar that falls silent in the middle of a registration, against
//! the real binary: a `register` line holds a 4 s grant from a fake
//! registrar on loopback, which then stops answering its refreshes. When
//! the grant passes the line goes down (its pending verification fails,
//! creates get 503), the line keeps retrying with backoff, and when the
//! registrar answers again the line is up and issues numbers without a
//! restart.
//!
//! Not for: hostile challenges (`resilience::hostile::sip_register`).

use crate::support::sip::*;
use crate::support::*;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The grant the registrar gives (the refresh goes at half of it).
const GRANT_SECONDS: u32 = 4;

/// A registrar that answers every REGISTER with 200 and the grant while
/// `answering`, and counts them.
fn registrar(answering: Arc<AtomicBool>, seen: Arc<AtomicUsize>) -> FakePeer {
    FakePeer::start("REGISTER", move |msg| {
        seen.fetch_add(1, Ordering::AcqRel);
        if !answering.load(Ordering::Acquire) {
            return None;
        }
        Some(format!(
            "SIP/2.0 200 OK\r\n{}From: {}\r\nTo: {};tag=reg\r\nCall-ID: {}\r\nCSeq: {}\r\n\
             Contact: {};expires={GRANT_SECONDS}\r\nContent-Length: 0\r\n\r\n",
            copied_headers(msg, &["via:"]),
            header(msg, "from"),
            header(msg, "to"),
            header(msg, "call-id"),
            header(msg, "cseq"),
            header(msg, "contact"),
        ))
    })
}

#[test]
fn a_registrar_silent_mid_registration_takes_the_line_down_until_it_answers() {
    let answering = Arc::new(AtomicBool::new(true));
    let seen = Arc::new(AtomicUsize::new(0));
    let peer = registrar(answering.clone(), seen.clone());
    let addr = peer.addr;
    let s = Server::start(&sip_config(&register_line(addr, 2, "line1", "secret")));
    let token = s.new_client("acme");
    let v = poll(Duration::from_secs(10), || {
        let r = s.create(&token, &body(RU_PHONE));
        (r.status == 201).then(|| r.json())
    })
    .unwrap_or_else(|| panic!("the line never registered:\n{}", s.logs()));
    let id = v["verification_id"].as_str().unwrap().to_owned();

    // Silent from now on: the refresh goes unanswered, the grant passes.
    answering.store(false, Ordering::Release);
    let failed = poll(Duration::from_secs(20), || {
        let v = s.get(&token, &id).json();
        (v["status"] == "failed").then_some(v)
    })
    .unwrap_or_else(|| panic!("not failed after the registrar fell silent:\n{}", s.logs()));
    assert_eq!(failed["status"], "failed");
    let r = s.create(&token, &body(RU_PHONE));
    assert_eq!(r.status, 503, "{}", r.text());
    let while_down = seen.load(Ordering::Acquire);
    std::thread::sleep(Duration::from_secs(5));
    let retries = seen.load(Ordering::Acquire) - while_down;
    // Retransmissions and backoff retries, but no tight loop.
    assert!(retries >= 1, "no REGISTER while down");
    assert!(retries <= 30, "{retries} REGISTERs in 5 s while down");

    // The registrar answers again: the line comes back by itself.
    answering.store(true, Ordering::Release);
    let back = poll(Duration::from_secs(30), || {
        let r = s.create(&token, &body(RU_PHONE));
        (r.status == 201).then(|| r.json())
    })
    .unwrap_or_else(|| panic!("the line never came back:\n{}", s.logs()));
    assert_eq!(back["status"], "pending");
    let logs = s.logs();
    assert!(!logs.contains("panicked"), "{logs}");
}
