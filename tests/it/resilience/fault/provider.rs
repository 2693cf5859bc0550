//! A provider that stops answering and comes back, against the real binary:
//! an IP-authenticated line pinged by OPTIONS every second goes down when a
//! fake provider on loopback falls silent (its numbers are withheld: a
//! create gets 503, a pending verification on it fails), and is issued
//! from again as soon as the provider answers again, without a restart.
//! (A refused registration refresh: `sip::register`.)

use crate::support::sip::*;
use crate::support::*;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Answers OPTIONS with 200 while `answering`; counts the pings.
fn provider(
    sock: UdpSocket,
    answering: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    pings: Arc<AtomicUsize>,
) {
    sock.set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let mut buf = vec![0u8; 65_536];
    while !stop.load(Ordering::Acquire) {
        let Ok((n, from)) = sock.recv_from(&mut buf) else {
            continue;
        };
        let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
        if !msg.starts_with("OPTIONS ") {
            continue;
        }
        pings.fetch_add(1, Ordering::AcqRel);
        if !answering.load(Ordering::Acquire) {
            continue;
        }
        // Echo the headers a response needs.
        let keep: String = msg
            .lines()
            .filter(|l| {
                let l = l.to_ascii_lowercase();
                ["via:", "from:", "to:", "call-id:", "cseq:"]
                    .iter()
                    .any(|p| l.starts_with(p))
            })
            .map(|l| format!("{l}\r\n"))
            .collect();
        let reply = format!("SIP/2.0 200 OK\r\n{keep}Content-Length: 0\r\n\r\n");
        let _ = sock.send_to(reply.as_bytes(), from);
    }
}

#[test]
fn a_silent_provider_takes_its_line_down_and_its_return_brings_it_back() {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = sock.local_addr().unwrap();
    let answering = Arc::new(AtomicBool::new(true));
    let stop = Arc::new(AtomicBool::new(false));
    let pings = Arc::new(AtomicUsize::new(0));
    let thread = {
        let (a, s, p) = (answering.clone(), stop.clone(), pings.clone());
        std::thread::spawn(move || provider(sock, a, s, p))
    };
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
    stop.store(true, Ordering::Release);
    thread.join().unwrap();
    let logs = s.logs();
    assert!(!logs.contains("panicked"), "{logs}");
}
