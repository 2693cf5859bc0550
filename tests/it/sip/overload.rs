//! The SIP edge under more than it can handle, from a provider it trusts:
//! answers keep going out while a flood lasts, and an INVITE that waited
//! in the inbound queue past its caller's first retransmission is dropped
//! unhandled and counted.
//!
//! Not for: floods from sources no line trusts, malformed or oversized
//! datagrams (`resilience::hostile::sip`).

use crate::support::ops::{add_ops_listen, metric};
use crate::support::sip::*;
use crate::support::virtual_time::VirtualClock;
use crate::support::*;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

/// An INVITE to `dial` from the provider's address with a Call-ID and
/// branch of its own, padded with the headers a carrier's gateway adds, so
/// that the service parses more than the flood's sender formats.
fn invite(to: SocketAddr, local: SocketAddr, dial: u64, n: u64) -> String {
    let padding: String = (0..16)
        .map(|i| format!("X-Carrier-Info-{i}: route=trunk-{i};zone=eu-central;hop={n}\r\n"))
        .collect();
    format!(
        "INVITE sip:+{dial}@{to} SIP/2.0\r\n\
         Via: SIP/2.0/UDP {local};branch=z9hG4bKflood{n};rport\r\n\
         From: <sip:79161234567@{local}>;tag=f{n}\r\nTo: <sip:+{dial}@{to}>\r\n\
         Call-ID: flood-{n}\r\nCSeq: 1 INVITE\r\nMax-Forwards: 70\r\n{padding}Content-Length: 0\r\n\r\n"
    )
}

/// The service answers an INVITE to a number no verification holds at
/// once (603), so every INVITE of the flood has an answer of its own. The
/// driver sends what it answered after each batch of at most 64 inputs
/// (`BATCH_MAX` in `src/sip/driver.rs`); a driver that sent only once its
/// queue was empty sent nothing until a flood the queue never emptied in
/// had ended, and its callers retransmitted INVITEs it had answered.
#[test]
fn answers_keep_going_out_while_a_flood_lasts() {
    let server = Server::start(&sip_config(&trusted_line(2, 603)));
    let sip = sip_addr(&server);
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_nonblocking(true).unwrap();
    let local = sock.local_addr().unwrap();
    let flood = Duration::from_secs(3);
    let started = Instant::now();
    let (mut sent, mut answers, mut in_last_second) = (0u64, 0u64, 0u64);
    let mut buf = vec![0u8; 65_536];
    while started.elapsed() < flood {
        for _ in 0..64 {
            let m = invite(sip, local, LINE_START + 1, sent);
            let _ = sock.send_to(m.as_bytes(), sip);
            sent += 1;
        }
        while let Ok((n, _)) = sock.recv_from(&mut buf) {
            if buf[..n].starts_with(b"SIP/2.0 603 ") {
                answers += 1;
                if started.elapsed() >= flood - Duration::from_secs(1) {
                    in_last_second += 1;
                }
            }
        }
    }
    eprintln!("{sent} INVITEs sent in {flood:?}; {answers} answered during the flood, {in_last_second} in its last second");
    assert!(
        in_last_second >= 100,
        "{in_last_second} of the flood's answers came in its last second ({answers} in all, \
         {sent} INVITEs sent): the SIP driver holds its answers while its inbound queue is not \
         empty. The design choice this checks: it sends after each batch of BATCH_MAX inputs."
    );
    assert!(!server.logs().contains("panicked"), "{}", server.logs());
}

/// The moment the SIP thread read a datagram from the socket and the
/// moment it handles it come from the service's one clock. On a clock that
/// moves a second at every reading, every datagram has waited longer than
/// the engine's `overload::INVITE_WAIT_MAX` (250 ms): an INVITE is
/// dropped unanswered and counted as stale, and an OPTIONS, which is never
/// shed, is still answered.
#[test]
fn an_invite_that_waited_past_the_bound_is_dropped_and_counted() {
    let clock = VirtualClock::ticking(Duration::from_secs(1));
    let mut server = Server::prepare(&sip_config(&trusted_line(2, 603)));
    add_ops_listen(&server, |c| c);
    server.launch_in_process(&clock);
    let sip = sip_addr(&server);
    let ops = server.ops_addr(1);
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let local = sock.local_addr().unwrap();
    sock.send_to(invite(sip, local, LINE_START + 1, 1).as_bytes(), sip)
        .unwrap();
    let options = format!(
        "OPTIONS sip:{sip} SIP/2.0\r\nVia: SIP/2.0/UDP {local};branch=z9hG4bKopt;rport\r\n\
         From: <sip:probe@{local}>;tag=1\r\nTo: <sip:{sip}>\r\nCall-ID: opt-1\r\n\
         CSeq: 1 OPTIONS\r\nContent-Length: 0\r\n\r\n"
    );
    sock.send_to(options.as_bytes(), sip).unwrap();
    // Sent after the INVITE on the same path, the OPTIONS' answer comes
    // after anything the INVITE got; then nothing else comes.
    sock.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let mut buf = vec![0u8; 65_536];
    let (n, _) = sock.recv_from(&mut buf).expect("an answer to the OPTIONS");
    let first = String::from_utf8_lossy(&buf[..n]).into_owned();
    assert!(
        first.starts_with("SIP/2.0 200 OK\r\n") && first.contains("CSeq: 1 OPTIONS"),
        "the INVITE, which waited past the 250 ms bound, was answered instead of dropped \
         (the design choice this checks: stale INVITEs are shed, other requests never):\n{first}"
    );
    assert_nothing_more(
        &sock,
        Duration::from_millis(500),
        "an answer to the stale INVITE",
    );
    let stale = r#"dialproof_sip_datagrams_dropped_total{reason="stale"}"#;
    assert_eq!(metric(ops, stale), Some(1.0), "{stale}");
    let invites = "dialproof_sip_invites_total";
    assert_eq!(
        metric(ops, invites),
        Some(0.0),
        "the stale INVITE started a transaction"
    );
    server.stop_in_process();
}
