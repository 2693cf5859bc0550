//! A registrar that falls silent in the middle of a registration, against
//! the real binary: a `register` line holds a 4 s grant from a fake
//! registrar on loopback, which then stops answering its refreshes. When
//! the grant passes the line goes down (its pending verification fails,
//! creates get 503), the line keeps retrying with backoff, and when the
//! registrar answers again the line is up and issues numbers without a
//! restart.

use crate::support::sip::*;
use crate::support::*;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The grant the registrar gives (the refresh goes at half of it).
const GRANT_SECONDS: u32 = 4;

fn header<'a>(msg: &'a str, name: &str) -> &'a str {
    msg.lines()
        .find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.trim().eq_ignore_ascii_case(name).then_some(v.trim())
        })
        .unwrap_or("")
}

/// Answers every REGISTER with 200 and the grant while `answering`.
fn registrar(
    sock: UdpSocket,
    answering: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    seen: Arc<AtomicUsize>,
) {
    sock.set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let mut buf = vec![0u8; 65_536];
    while !stop.load(Ordering::Acquire) {
        let Ok((n, from)) = sock.recv_from(&mut buf) else {
            continue;
        };
        let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
        if !msg.starts_with("REGISTER ") {
            continue;
        }
        seen.fetch_add(1, Ordering::AcqRel);
        if !answering.load(Ordering::Acquire) {
            continue;
        }
        let vias: String = msg
            .lines()
            .filter(|l| l.to_ascii_lowercase().starts_with("via:"))
            .map(|l| format!("{l}\r\n"))
            .collect();
        let reply = format!(
            "SIP/2.0 200 OK\r\n{vias}From: {}\r\nTo: {};tag=reg\r\nCall-ID: {}\r\nCSeq: {}\r\n\
             Contact: {};expires={GRANT_SECONDS}\r\nContent-Length: 0\r\n\r\n",
            header(&msg, "from"),
            header(&msg, "to"),
            header(&msg, "call-id"),
            header(&msg, "cseq"),
            header(&msg, "contact"),
        );
        let _ = sock.send_to(reply.as_bytes(), from);
    }
}

#[test]
fn a_registrar_silent_mid_registration_takes_the_line_down_until_it_answers() {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = sock.local_addr().unwrap();
    let answering = Arc::new(AtomicBool::new(true));
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(AtomicUsize::new(0));
    let thread = {
        let (a, s, n) = (answering.clone(), stop.clone(), seen.clone());
        std::thread::spawn(move || registrar(sock, a, s, n))
    };
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
    stop.store(true, Ordering::Release);
    thread.join().unwrap();
    let logs = s.logs();
    assert!(!logs.contains("panicked"), "{logs}");
}
