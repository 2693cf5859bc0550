//! Hostile SIP against the real binary over UDP: a flood from a source no
//! line trusts (answered cheaply, calls from the provider still served),
//! malformed and truncated datagrams, datagrams at the 64 KiB limit, an
//! INVITE storm to one number (one completion), and a spoofed
//! P-Asserted-Identity from an untrusted source (ignored). The server must
//! never panic and must keep serving.
//!
//! REGISTER responses with hostile digest challenges: `super::sip_register`.
//!
//! Not for: calls that follow the rules (`sip::calls`).

use crate::support::sip::*;
use crate::support::*;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

struct Setup {
    server: Server,
    token: String,
    sip: SocketAddr,
}

fn setup(numbers: u64) -> Setup {
    setup_on(Server::start(&sip_config(&trusted_line(numbers, 603))))
}

/// A client key and the SIP address of a started `server`.
fn setup_on(server: Server) -> Setup {
    let token = server.new_client("Acme");
    let sip = sip_addr(&server);
    Setup { server, token, sip }
}

impl Setup {
    fn pending(&self) -> (String, String) {
        let v = self.server.create_ok(&self.token, &body(RU_PHONE));
        (
            v["verification_id"].as_str().unwrap().to_owned(),
            v["dial_number"].as_str().unwrap().to_owned(),
        )
    }

    fn status(&self, id: &str) -> serde_json::Value {
        let r = self.server.get(&self.token, id);
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()
    }

    fn assert_no_panic(&self) {
        let logs = self.server.logs();
        assert!(!logs.contains("panicked"), "the server panicked:\n{logs}");
    }
}

fn invite(
    to: SocketAddr,
    local: SocketAddr,
    dial: &str,
    caller: &str,
    call_id: &str,
    extra: &str,
) -> String {
    format!(
        "INVITE sip:{dial}@{to} SIP/2.0\r\n\
         Via: SIP/2.0/UDP {local};branch=z9hG4bK{call_id};rport\r\n\
         From: <sip:{caller}@{local}>;tag=t{call_id}\r\nTo: <sip:{dial}@{to}>\r\n\
         Call-ID: {call_id}\r\nCSeq: 1 INVITE\r\nMax-Forwards: 70\r\n{extra}Content-Length: 0\r\n\r\n"
    )
}

/// Final responses (status >= 200) to `sock` within `wait`, by first line.
fn finals(sock: &UdpSocket, wait: Duration) -> Vec<String> {
    finals_up_to(sock, wait, usize::MAX)
}

/// Like [`finals`], returning as soon as `most` have come.
fn finals_up_to(sock: &UdpSocket, wait: Duration, most: usize) -> Vec<String> {
    let deadline = Instant::now() + wait;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 65_536];
    while out.len() < most {
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            break;
        };
        sock.set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .unwrap();
        let Ok((n, _)) = sock.recv_from(&mut buf) else {
            break;
        };
        let text = String::from_utf8_lossy(&buf[..n]);
        let first = text.lines().next().unwrap_or("").to_owned();
        if !first.starts_with("SIP/2.0 1") {
            out.push(first);
        }
    }
    out
}

/// One call from the provider's address: its final response.
fn provider_call(s: &Setup, dial: &str, call_id: &str) -> Vec<String> {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let local = sock.local_addr().unwrap();
    let msg = invite(s.sip, local, dial, "79161234567", call_id, "");
    // Retransmitted on Timer A (T1 = 500 ms, doubling) as a provider's
    // gateway does, for up to 8 s: UDP under a flood may lose one.
    let started = Instant::now();
    let mut interval = Duration::from_millis(500);
    let mut got = Vec::new();
    while got.is_empty() && started.elapsed() < Duration::from_secs(8) {
        sock.send_to(msg.as_bytes(), s.sip).unwrap();
        got = finals_up_to(&sock, interval, 1);
        interval = (interval * 2).min(Duration::from_secs(4));
    }
    let ack = format!(
        "ACK sip:{dial}@{} SIP/2.0\r\nVia: SIP/2.0/UDP {local};branch=z9hG4bK{call_id};rport\r\n\
         From: <sip:79161234567@{local}>;tag=t{call_id}\r\nTo: <sip:{dial}@{}>\r\n\
         Call-ID: {call_id}\r\nCSeq: 1 ACK\r\nContent-Length: 0\r\n\r\n",
        s.sip, s.sip
    );
    let _ = sock.send_to(ack.as_bytes(), s.sip);
    got
}

#[test]
fn a_flood_from_an_unknown_source_does_not_stop_provider_calls() {
    let s = setup(3);
    let (id, dial) = s.pending();
    // 127.0.0.2 is no line's provider: 20 000 INVITEs with fresh Call-IDs.
    let flooder = UdpSocket::bind("127.0.0.2:0").unwrap();
    let local = flooder.local_addr().unwrap();
    let sip = s.sip;
    let dial2 = dial.clone();
    let flood = std::thread::spawn(move || {
        for i in 0..20_000 {
            let m = invite(sip, local, &dial2, "79990000000", &format!("flood-{i}"), "");
            let _ = flooder.send_to(m.as_bytes(), sip);
        }
        flooder
    });
    // Meanwhile the provider's call completes the verification.
    std::thread::sleep(Duration::from_millis(50));
    let started = Instant::now();
    let got = provider_call(&s, &dial, "real-1");
    assert_eq!(
        got.first().map(String::as_str),
        Some("SIP/2.0 603 Decline"),
        "{got:?}"
    );
    let took = started.elapsed();
    eprintln!("the provider's call under the flood took {took:?}");
    // Within its first retransmissions (at 0.5 s, 1.5 s, 3.5 s).
    assert!(
        took < Duration::from_secs(4),
        "the provider's call took {took:?} under the flood"
    );
    let flooder = flood.join().unwrap();
    let v = s.status(&id);
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(v["caller_id_received"], "+79161234567", "{v}");
    // What the flood got back: 403s at most, one per INVITE, never more.
    let answers = finals(&flooder, Duration::from_millis(500));
    assert!(
        answers.iter().all(|a| a.starts_with("SIP/2.0 403")),
        "{:?}",
        &answers[..answers.len().min(3)]
    );
    assert!(answers.len() <= 20_000);
    // The service still serves HTTPS and another call.
    let (id2, dial2) = s.pending();
    assert_eq!(
        provider_call(&s, &dial2, "real-2")
            .first()
            .map(String::as_str),
        Some("SIP/2.0 603 Decline")
    );
    assert_eq!(s.status(&id2)["status"], "completed");
    s.assert_no_panic();
}

#[test]
fn malformed_truncated_and_64k_datagrams_are_dropped_and_calls_go_on() {
    let s = setup(3);
    let (id, dial) = s.pending();
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let local = sock.local_addr().unwrap();
    let good = invite(s.sip, local, &dial, "79161234567", "trunc", "");
    // Every prefix of a valid INVITE (cut at each line and mid-line), with
    // no Call-ID the provider's real call will use.
    let mut sent = 0;
    for cut in (1..good.len()).step_by(7) {
        sock.send_to(&good.as_bytes()[..cut], s.sip).unwrap();
        sent += 1;
    }
    // Hostile values: huge Content-Length, negative CSeq, a NUL, non-UTF-8,
    // a Via without a branch, 300 Vias, a header without a colon.
    let mut hostile: Vec<Vec<u8>> = vec![
        good.replace("Content-Length: 0", "Content-Length: 99999999999999999999")
            .into_bytes(),
        good.replace("CSeq: 1 INVITE", "CSeq: -1 INVITE")
            .into_bytes(),
        good.replace("Max-Forwards: 70", "Max-Forwards: 7\u{0}0")
            .into_bytes(),
        good.replace(";branch=z9hG4bKtrunc", "").into_bytes(),
        good.replace("Max-Forwards: 70\r\n", "Max-Forwards 70\r\n")
            .into_bytes(),
        good.replace(
            "Via:",
            &format!(
                "{}Via:",
                "Via: SIP/2.0/UDP 10.0.0.1;branch=z9hG4bKv\r\n".repeat(300)
            ),
        )
        .into_bytes(),
    ];
    let mut binary = good.clone().into_bytes();
    binary[10] = 0xff;
    binary[11] = 0xfe;
    hostile.push(binary);
    // At the limit: a datagram of 65 507 bytes (the most UDP over IPv4
    // carries), a valid INVITE padded with one enormous header.
    let pad = 65_507 - good.len() - "X-Pad: \r\n".len();
    let big = good.replace(
        "Content-Length: 0",
        &format!("X-Pad: {}\r\nContent-Length: 0", "p".repeat(pad)),
    );
    assert_eq!(big.len(), 65_507);
    hostile.push(big.into_bytes());
    for h in &hostile {
        sock.send_to(h, s.sip).unwrap();
        sent += 1;
    }
    // Whatever came back, the service is alive and a real call works.
    let _ = finals(&sock, Duration::from_millis(500));
    let got = provider_call(&s, &dial, "after-garbage");
    assert_eq!(
        got.first().map(String::as_str),
        Some("SIP/2.0 603 Decline"),
        "{got:?}"
    );
    assert_eq!(s.status(&id)["status"], "completed");
    assert!(sent > 40, "{sent}");
    s.assert_no_panic();
}

#[test]
fn an_invite_storm_to_one_number_completes_it_once() {
    let s = setup(3);
    let (id, dial) = s.pending();
    // 200 distinct calls to the same number from the provider's address,
    // from 8 sockets at once.
    let sip = s.sip;
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let dial = dial.clone();
            std::thread::spawn(move || {
                let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
                let local = sock.local_addr().unwrap();
                for i in 0..25 {
                    let m = invite(
                        sip,
                        local,
                        &dial,
                        &format!("7916123{t:02}{i:02}"),
                        &format!("storm-{t}-{i}"),
                        "",
                    );
                    sock.send_to(m.as_bytes(), sip).unwrap();
                }
                finals(&sock, Duration::from_secs(3))
            })
        })
        .collect();
    let all: Vec<String> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    // Every call got its final answer (the one that completed and the rest:
    // the number is no longer leased once it completed).
    assert!(all.len() >= 200, "{} finals", all.len());
    let v = s.status(&id);
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(count_logs(&s.server, "call completed a verification"), 1);
    assert_eq!(count_logs(&s.server, "verification ended"), 1);
    s.assert_no_panic();
}

#[test]
fn a_spoofed_asserted_identity_from_an_untrusted_source_is_ignored() {
    let s = setup(3);
    let (id, dial) = s.pending();
    let sock = UdpSocket::bind("127.0.0.2:0").unwrap();
    let local = sock.local_addr().unwrap();
    let m = invite(
        s.sip,
        local,
        &dial,
        "79990001122",
        "spoof-1",
        "P-Asserted-Identity: <sip:+79161234567@provider.example>\r\n",
    );
    sock.send_to(m.as_bytes(), s.sip).unwrap();
    let got = finals(&sock, Duration::from_millis(1200));
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].starts_with("SIP/2.0 403"), "{got:?}");
    let v = s.status(&id);
    assert_eq!(v["status"], "pending", "{v}");
    // The real provider's call still completes it, with its own caller.
    let got = provider_call(&s, &dial, "real-after-spoof");
    assert_eq!(got.first().map(String::as_str), Some("SIP/2.0 603 Decline"));
    assert_eq!(s.status(&id)["caller_id_received"], "+79161234567");
    s.assert_no_panic();
}

#[test]
fn a_provider_gone_mid_call_gets_the_final_on_timer_g_until_timer_h() {
    // In process, on a clock that flows with real time: Timer G's
    // retransmissions come in real time, and the clock then jumps to
    // Timer H instead of the test waiting 32 s.
    let (server, clock) = Server::start_flowing(&sip_config(&trusted_line(3, 603)));
    let s = setup_on(server);
    let (id, dial) = s.pending();
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let local = sock.local_addr().unwrap();
    let m = invite(s.sip, local, &dial, "79161234567", "gone-1", "");
    sock.send_to(m.as_bytes(), s.sip).unwrap();
    // Never ACKed: RFC 3261 17.2.1 has the 603 repeated on Timer G (T1
    // doubling to T2 = 4 s) until Timer H (64*T1 = 32 s), then the
    // transaction ends.
    let finals = |window: Duration| {
        let mut n = 0;
        let mut buf = vec![0u8; 4096];
        let started = Instant::now();
        while started.elapsed() < window {
            sock.set_read_timeout(Some(Duration::from_millis(100)))
                .unwrap();
            if let Ok((k, _)) = sock.recv_from(&mut buf) {
                n += usize::from(buf[..k].starts_with(b"SIP/2.0 603"));
            }
        }
        n
    };
    // 0, 0.5, 1.5, 3.5 s: the final and its retransmissions on Timer G.
    let before = finals(Duration::from_millis(4000));
    assert!((3..=5).contains(&before), "603 sent {before} times in 4 s");
    // Past Timer H (the INVITE came in ~4 s ago). At most one last
    // retransmission may race the end; then nothing for longer than T2.
    clock.advance(Duration::from_secs(29));
    let settling = finals(Duration::from_millis(700));
    assert!(settling <= 1, "{settling} 603s after Timer H");
    let after = finals(Duration::from_millis(4500));
    assert_eq!(after, 0, "603 retransmitted after Timer H");
    // Completed once; the next call on another number goes through.
    assert_eq!(s.status(&id)["status"], "completed");
    assert_eq!(count_logs(&s.server, "call completed a verification"), 1);
    let (id2, dial2) = s.pending();
    let got = provider_call(&s, &dial2, "after-gone");
    assert_eq!(got.first().map(String::as_str), Some("SIP/2.0 603 Decline"));
    assert_eq!(s.status(&id2)["status"], "completed");
    s.assert_no_panic();
}

#[test]
fn a_get_right_after_the_final_shows_the_call() {
    // The final response leaves once the completion is committed; a GET
    // sent the moment the caller hears it must show `completed`, although
    // GETs are served from rows the commit consumer holds in memory (it
    // trails the writer by microseconds). Busy threads compete for the
    // cores, as a loaded machine's would, so that the consumer is late
    // now and then; 50 rounds (the key allows 120 requests a minute).
    let s = setup(2);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let spinners: Vec<_> = (0..4)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    for round in 0..50 {
        let (id, dial) = s.pending();
        let got = provider_call(&s, &dial, &format!("read-after-{round}"));
        assert_eq!(got.first().map(String::as_str), Some("SIP/2.0 603 Decline"));
        let v = s.status(&id);
        assert_eq!(v["status"], "completed", "round {round}: {v}");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    spinners.into_iter().for_each(|t| t.join().unwrap());
    s.assert_no_panic();
}
