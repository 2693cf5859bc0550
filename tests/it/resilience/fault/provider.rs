//! A provider that stops answering and comes back, against the real binary:
//! an IP-authenticated line pinged by OPTIONS every second goes down when a
//! fake provider on loopback falls silent (its numbers are withheld: a
//! create gets 503, a pending verification on it fails), and is issued
//! from again as soon as the provider answers again, without a restart.
//! (A refused registration refresh: `sip::register`.)
//!
//! Not for: registering lines (`super::registrar`).

use crate::support::sip::*;
use crate::support::*;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A provider that answers OPTIONS with 200 while `answering`, and counts
/// the pings.
fn provider(answering: Arc<AtomicBool>, pings: Arc<AtomicUsize>) -> FakePeer {
    FakePeer::start("OPTIONS", move |msg| {
        pings.fetch_add(1, Ordering::AcqRel);
        if !answering.load(Ordering::Acquire) {
            return None;
        }
        // Echo the headers a response needs.
        let keep = copied_headers(msg, &["via:", "from:", "to:", "call-id:", "cseq:"]);
        Some(format!("SIP/2.0 200 OK\r\n{keep}Content-Length: 0\r\n\r\n"))
    })
}

#[test]
fn a_silent_provider_takes_its_line_down_and_its_return_brings_it_back() {
    let answering = Arc::new(AtomicBool::new(true));
    let pings = Arc::new(AtomicUsize::new(0));
    let peer = provider(answering.clone(), pings.clone());
    let addr = peer.addr;
    let line = format!(
        "[[lines]]\nname = \"ip\"\nmode = \"ip_auth\"\nprovider = \"{addr}\"\n\
         ping_interval_seconds = 1\nping_failures_max = 2\n\
         numbers = [ {{ range_start = \"+{LINE_START}\", count = 2, pool = \"domestic\" }} ]\n"
    );
    let s = Server::start(&sip_config(&line));
    let token = s.new_client("acme");
    let v = s.create_ok(&token, &body(RU_PHONE));
    let id = v["verification_id"].as_str().unwrap().to_owned();

    // Silence: the line goes down, the pending verification fails and no
    // number is issued.
    answering.store(false, Ordering::Release);
    let failed = poll(Duration::from_secs(40), || {
        let v = s.get(&token, &id).json();
        (v["status"] == "failed").then_some(v)
    })
    .unwrap_or_else(|| panic!("not failed after the provider fell silent:\n{}", s.logs()));
    assert_eq!(failed["status"], "failed");
    let r = s.create(&token, &body(RU_PHONE));
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(r.header("retry-after"), Some("60"));
    // Pings go on while it is down (that is how it notices the return).
    let before = pings.load(Ordering::Acquire);
    std::thread::sleep(Duration::from_millis(2500));
    assert!(
        pings.load(Ordering::Acquire) > before,
        "no pings while down"
    );

    // The provider answers again: the line is back, without a restart.
    answering.store(true, Ordering::Release);
    let back = poll(Duration::from_secs(40), || {
        let r = s.create(&token, &body(RU_PHONE));
        (r.status == 201).then(|| r.json())
    })
    .unwrap_or_else(|| panic!("the line never came back:\n{}", s.logs()));
    assert_eq!(back["status"], "pending");
    let logs = s.logs();
    assert!(!logs.contains("panicked"), "{logs}");
}
