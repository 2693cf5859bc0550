//! Inbound calls over real UDP: sipp plays the provider's gateway against
//! the real binary. A call to a leased number completes its verification
//! with the caller's number and is rejected (never answered); everything
//! else is rejected without changing anything.
//!
//! Not for: hostile SIP (`resilience::hostile::sip`).

use crate::support::sip::*;
use crate::support::*;
use std::net::UdpSocket;
use std::time::Duration;

struct Setup {
    server: Server,
    token: String,
    dir: tempfile::TempDir,
}

fn setup(reject_code: u16) -> Setup {
    let server = Server::start(&sip_config(&trusted_line(5, reject_code)));
    let token = server.new_client("Acme");
    Setup {
        server,
        token,
        dir: workdir(),
    }
}

impl Setup {
    fn pending(&self) -> (String, String) {
        let v = self.server.create_ok(&self.token, &body(RU_PHONE));
        (
            v["verification_id"].as_str().unwrap().to_owned(),
            v["dial_number"].as_str().unwrap().to_owned(),
        )
    }

    fn call(&self, dial: &str, from_header: &str, headers: &str, code: u16, local_ip: &str) {
        let code = code.to_string();
        let sf = scenario(
            self.dir.path(),
            "call.xml",
            &[
                ("FROM_HEADER", from_header),
                ("HEADERS", headers),
                ("CODE", &code),
            ],
        );
        let out = run_uac(
            self.dir.path(),
            &sf,
            sip_addr(&self.server),
            dial,
            local_ip,
            1,
        );
        assert_sipp_ok(&out, self.dir.path(), &self.server);
    }

    fn get(&self, id: &str) -> serde_json::Value {
        let r = self.server.get(&self.token, id);
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()
    }
}

#[test]
fn a_call_to_a_leased_number_completes_with_the_callers_number_and_gets_603() {
    let s = setup(603);
    let (id, dial) = s.pending();
    let before = now_millis();
    // A national-format caller on a Russian line: 8XXXXXXXXXX.
    s.call(
        &dial,
        &from_user("89161234567"),
        "X-Test: plain",
        603,
        "127.0.0.1",
    );
    let after = now_millis();
    let v = s.get(&id);
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(v["caller_id_received"], "+79161234567");
    let completed_at = parse_utc(v["completed_at"].as_str().unwrap());
    assert!(
        (before - 5..=after + 5).contains(&completed_at),
        "completed_at {completed_at} outside the call [{before}, {after}]"
    );
    assert_eq!(count_logs(&s.server, "call completed a verification"), 1);
}

#[test]
fn the_line_reject_code_and_asserted_identity_are_used() {
    let s = setup(486);
    let (id, dial) = s.pending();
    // The provider asserts the caller in P-Asserted-Identity (a tel: URI);
    // From says something else.
    s.call(
        &dial,
        &from_user("gateway"),
        "P-Asserted-Identity: \"Ivan\" <tel:+7-903-555-01-02>",
        486,
        "127.0.0.1",
    );
    let v = s.get(&id);
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(v["caller_id_received"], "+79035550102");
}

#[test]
fn retransmissions_get_the_same_final_and_complete_once() {
    let s = setup(603);
    let (id, dial) = s.pending();
    let sf = scenario(
        s.dir.path(),
        "retransmit.xml",
        &[("FROM_HEADER", &from_user("79161112233")), ("CODE", "603")],
    );
    let out = run_uac(
        s.dir.path(),
        &sf,
        sip_addr(&s.server),
        &dial,
        "127.0.0.1",
        1,
    );
    assert_sipp_ok(&out, s.dir.path(), &s.server);
    // The first 603 and two Timer G retransmissions (0.5 s and 1.5 s
    // later); none after the ACK.
    let finals = received_in_trace(s.dir.path(), "SIP/2.0 603 ");
    assert_eq!(finals, 3, "603s received");
    let v = s.get(&id);
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(v["caller_id_received"], "+79161112233");
    assert_eq!(count_logs(&s.server, "call completed a verification"), 1);
    assert_eq!(count_logs(&s.server, "verification ended"), 1);
}

/// Sends `bytes` to `to` and reads responses, as (status line, To header),
/// until `expect` arrived or `wait` passed.
fn exchange(
    sock: &UdpSocket,
    to: std::net::SocketAddr,
    bytes: &str,
    expect: usize,
    wait: Duration,
) -> Vec<(String, String)> {
    sock.send_to(bytes.as_bytes(), to).unwrap();
    receive(sock, expect, wait)
}

/// The status and To lines of each datagram `sock` receives until `expect`
/// arrived or `wait` passed.
fn receive(sock: &UdpSocket, expect: usize, wait: Duration) -> Vec<(String, String)> {
    let deadline = std::time::Instant::now() + wait;
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while out.len() < expect || expect == 0 {
        let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) else {
            break;
        };
        sock.set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .unwrap();
        let Ok((n, _)) = sock.recv_from(&mut buf) else {
            break;
        };
        let text = String::from_utf8_lossy(&buf[..n]).into_owned();
        let status = text.lines().next().unwrap_or("").to_owned();
        let to = text
            .lines()
            .find(|l| l.starts_with("To:"))
            .unwrap_or("")
            .to_owned();
        out.push((status, to));
    }
    out
}

/// A request as a provider's gateway at `local` would send it for `dial`.
fn raw_request(
    method: &str,
    dial: &str,
    (addr, local): (std::net::SocketAddr, std::net::SocketAddr),
    branch: &str,
    call_id: &str,
) -> String {
    format!(
        "{method} sip:{dial}@{addr} SIP/2.0\r\n\
         Via: SIP/2.0/UDP {local};branch={branch};rport\r\n\
         From: <sip:89161234567@{local}>;tag=c1\r\nTo: <sip:{dial}@{addr}>\r\n\
         Call-ID: {call_id}\r\nCSeq: 1 {method}\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n"
    )
}

#[test]
fn a_retransmitted_invite_gets_the_same_final_and_the_ack_is_absorbed() {
    let s = setup(603);
    let (id, dial) = s.pending();
    let addr = sip_addr(&s.server);
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let local = sock.local_addr().unwrap();
    let request =
        |method: &str| raw_request(method, &dial, (addr, local), "z9hG4bKretx1", "retx-1");
    let mut first = exchange(&sock, addr, &request("INVITE"), 1, Duration::from_secs(5));
    // Design choice (the engine's TRYING_DELAY, 100 ms): a final that
    // follows its commit within the delay goes without a `100 Trying`. On a
    // machine too busy for that, the 100 comes first and the final after.
    if first.len() == 1 && first[0].0.starts_with("SIP/2.0 100") {
        first.extend(receive(&sock, 1, Duration::from_secs(5)));
    }
    let last = first.last().cloned();
    assert!(
        last.as_ref()
            .is_some_and(|(s, _)| s.starts_with("SIP/2.0 603")),
        "expected the 603 (after a 100 only if the commit took over 100 ms): {first:?}"
    );
    // The same INVITE again: the same 603, with the same To tag.
    let again = exchange(&sock, addr, &request("INVITE"), 1, Duration::from_secs(5));
    assert_eq!(again, Vec::from_iter(last));
    // The ACK is absorbed; afterwards a retransmitted INVITE gets nothing.
    let after_ack = exchange(&sock, addr, &request("ACK"), 0, Duration::from_millis(100));
    assert!(after_ack.is_empty(), "{after_ack:?}");
    let late = exchange(
        &sock,
        addr,
        &request("INVITE"),
        0,
        Duration::from_millis(700),
    );
    assert!(late.is_empty(), "{late:?}");
    assert_eq!(s.get(&id)["status"], "completed");
    assert_eq!(count_logs(&s.server, "call completed a verification"), 1);
}

#[test]
fn a_withheld_caller_is_rejected_and_the_verification_stays_pending() {
    let s = setup(603);
    let (id, dial) = s.pending();
    s.call(
        &dial,
        "\"Anonymous\" <sip:anonymous@anonymous.invalid>",
        "Privacy: id",
        603,
        "127.0.0.1",
    );
    // A From with no number at all is withheld too.
    s.call(
        &dial,
        &from_user("unknown"),
        "X-Test: no-number",
        603,
        "127.0.0.1",
    );
    assert_eq!(s.get(&id)["status"], "pending");
    assert_eq!(count_logs(&s.server, "withheld caller"), 2);
    // The number is still leased to it: a call showing a number completes.
    s.call(
        &dial,
        &from_user("+79161234567"),
        "X-Test: shown",
        603,
        "127.0.0.1",
    );
    assert_eq!(s.get(&id)["status"], "completed");
}

#[test]
fn a_call_from_a_non_provider_address_gets_403_and_changes_nothing() {
    let s = setup(603);
    let (id, dial) = s.pending();
    // 127.0.0.2 is loopback too, but not in the line's provider addresses.
    s.call(
        &dial,
        &from_user("89161234567"),
        "X-Test: spoof",
        403,
        "127.0.0.2",
    );
    assert_eq!(s.get(&id)["status"], "pending");
    assert_eq!(count_logs(&s.server, "no line's provider"), 1);
}

#[test]
fn calls_to_unleased_or_unknown_numbers_change_nothing() {
    let s = setup(603);
    let (id, dial) = s.pending();
    // Another number of the line, not leased now: the line's reject code.
    let other = if dial == format!("+{LINE_START}") {
        format!("+{}", LINE_START + 1)
    } else {
        format!("+{LINE_START}")
    };
    s.call(
        &other,
        &from_user("89161234567"),
        "X-Test: unleased",
        603,
        "127.0.0.1",
    );
    // The log is read from the server's stderr by another thread: wait.
    let logged = poll(std::time::Duration::from_secs(5), || {
        (count_logs(&s.server, "no active lease") == 1).then_some(())
    });
    assert!(logged.is_some(), "{}", s.server.logs());
    // Not one of our numbers at all.
    s.call(
        "+74990000000",
        &from_user("89161234567"),
        "X-Test: unknown",
        404,
        "127.0.0.1",
    );
    assert_eq!(s.get(&id)["status"], "pending");
}

#[test]
fn options_get_200_and_garbage_is_dropped() {
    let s = setup(603);
    let addr = sip_addr(&s.server);
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let local = sock.local_addr().unwrap();
    for garbage in [
        &b"\x00\xff garbage"[..],
        b"INVITE sip:x SIP/2.0\r\n\r\n",
        b"OPTIONS sip:x SIP/2.0\r\nVia: SIP/2.0/UDP h;branch=z9hG4bKa\r\nContent-Length: 99\r\n\r\n",
    ] {
        sock.send_to(garbage, addr).unwrap();
    }
    // Compact names, folded From, two Vias on one line.
    let options = format!(
        "OPTIONS sip:{addr} SIP/2.0\r\n\
         v: SIP/2.0/UDP {local};branch=z9hG4bKopt1;rport, SIP/2.0/UDP 192.0.2.1;branch=z9hG4bKx\r\n\
         f:\r\n <sip:probe@{local}>;tag=1\r\nt: <sip:{addr}>\r\ni: opt-1\r\nCSeq: 7 OPTIONS\r\nl: 0\r\n\r\n"
    );
    sock.send_to(options.as_bytes(), addr).unwrap();
    let mut buf = [0u8; 4096];
    let (n, from) = sock.recv_from(&mut buf).expect("an answer to OPTIONS");
    let text = String::from_utf8_lossy(&buf[..n]);
    assert_eq!(from, addr);
    assert!(text.starts_with("SIP/2.0 200 OK\r\n"), "{text}");
    assert!(text.contains("CSeq: 7 OPTIONS"), "{text}");
    assert!(text.contains(&format!("rport={}", local.port())), "{text}");
    assert!(
        text.contains("Via: SIP/2.0/UDP 192.0.2.1;branch=z9hG4bKx"),
        "{text}"
    );
    // Nothing else comes back: no answer to any of the garbage.
    assert_nothing_more(
        &sock,
        Duration::from_millis(500),
        "an answer besides the OPTIONS 200",
    );
    // Dropped and counted: the SIP counters logged at shutdown show the
    // three malformed datagrams (and no INVITE).
    let mut server = s.server;
    assert!(server.stop().success());
    let stats = server
        .wait_for_log(Duration::from_secs(5), |l| l.contains("sip stopped"))
        .unwrap_or_else(|| panic!("no SIP counters at shutdown:\n{}", server.logs()));
    assert!(stats.contains("sip_malformed=3 "), "{stats}");
    assert!(stats.contains("sip_invites=0 "), "{stats}");
}

#[test]
fn a_possibly_forged_source_gets_exactly_one_403() {
    let s = setup(603);
    let (id, dial) = s.pending();
    let addr = sip_addr(&s.server);
    let sock = UdpSocket::bind("127.0.0.2:0").unwrap();
    let local = sock.local_addr().unwrap();
    let invite = raw_request("INVITE", &dial, (addr, local), "z9hG4bKforged1", "forged-1");
    // No 100 and no Timer G: one datagram back for one (Timer G would
    // have repeated the 403 at 0.5 s).
    let got = exchange(&sock, addr, &invite, 0, Duration::from_millis(1200));
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].0.starts_with("SIP/2.0 403"), "{got:?}");
    assert_eq!(s.get(&id)["status"], "pending");
}

#[test]
fn a_call_whose_commit_fails_gets_the_lines_code_saying_not_recorded_and_stays_pending() {
    let mut s = setup(603);
    let (id, dial) = s.pending();
    // Every batch now fails before COMMIT, as on a full disk.
    s.server
        .set_env("DIALPROOF_FAILPOINTS", "writer.before_commit=error");
    s.server.kill();
    s.server.restart();
    let addr = sip_addr(&s.server);
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let local = sock.local_addr().unwrap();
    let invite = raw_request("INVITE", &dial, (addr, local), "z9hG4bKfail1", "fail-1");
    sock.send_to(invite.as_bytes(), addr).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 4096];
    let final_ = std::iter::from_fn(|| {
        let (n, _) = sock.recv_from(&mut buf).ok()?;
        Some(String::from_utf8_lossy(&buf[..n]).into_owned())
    })
    .find(|text| !text.starts_with("SIP/2.0 100"))
    .expect("a final response");
    assert!(final_.starts_with("SIP/2.0 603"), "{final_}");
    assert!(
        final_.contains("Warning: 399 dialproof \"call not recorded\""),
        "{final_}"
    );
    // The driver logs the failure once it has answered.
    let logged = poll(Duration::from_secs(5), || {
        (count_logs(&s.server, "call transition failed") == 1).then_some(())
    });
    assert!(logged.is_some(), "logs:\n{}", s.server.logs());
    assert_eq!(count_logs(&s.server, "call completed a verification"), 0);
    s.server.set_env("DIALPROOF_FAILPOINTS", "");
    s.server.kill();
    s.server.restart();
    assert_eq!(s.get(&id)["status"], "pending");
}
