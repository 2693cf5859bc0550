//! A primary cut off from etcd but not from its clients (its etcd traffic
//! goes through proxies the test closes): it refuses writes within the
//! lease TTL, before the standby is promoted (the order shown from both
//! nodes' metrics and logs), and it stays a standby when etcd comes back.
//! And a primary whose supervisor dies: its service fences itself at once.
//!
//! Not for: the fence deadline's arithmetic (the engine's unit tests).

use super::cluster::{etcd_installed, http_get, metric, Etcd, Proxy, TTL};
use super::*;
use crate::support::sip::*;
use crate::support::webhooks::*;
use serde_json::json;

/// README, "Automatic failover": a cut-off primary fences itself first.
#[test]
fn a_cut_off_primary_refuses_writes_before_the_standby_is_promoted_and_stays_a_standby() {
    if !etcd_installed() {
        return;
    }
    let etcd = Etcd::start();
    let proxies: Vec<Proxy> = etcd.client_addrs().into_iter().map(Proxy::start).collect();
    let through: Vec<String> = proxies
        .iter()
        .map(|p| format!("http://{}", p.addr))
        .collect();
    let rx = Receiver::recording(Answer::Status(200));
    let lines = sip_config(&trusted_line(NUMBERS, 603));
    let (a, mut b, token) = pair(&etcd, &through, &lines, &rx);
    let body = json!({"phone": PHONE, "webhook_url": rx.url("/hook")});
    let pending = a.server.create_ok(&token, &body);

    for p in &proxies {
        p.cut();
    }
    let cut = Instant::now();
    let mut refused = None;
    let refused_after = within(cut, TTL, || {
        let r = a.server.create(&token, &body);
        if r.status != 201 {
            refused = Some(r);
            return true;
        }
        false
    })
    .unwrap_or_else(|| panic!("the cut-off primary still took creates {TTL:?} after the cut"));
    let r = refused.expect("the refusal");
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(
        r.json()["error"]["code"],
        "service_unavailable",
        "{}",
        r.text()
    );
    assert!(
        r.header("retry-after").is_some(),
        "a fenced 503 says when to retry"
    );
    // A call to the fenced node completes nothing: SIP 503.
    let dial = pending["dial_number"].as_str().expect("dial");
    let dir = workdir();
    let sf = scenario(
        dir.path(),
        "call.xml",
        &[
            ("FROM_HEADER", &from_user("89161234567")),
            ("HEADERS", ""),
            ("CODE", "503"),
        ],
    );
    let out = run_uac(dir.path(), &sf, sip_addr(&a.server), dial, "127.0.0.1", 1);
    assert_sipp_ok(&out, dir.path(), &a.server);
    let still = a
        .server
        .get(&token, pending["verification_id"].as_str().expect("id"))
        .json();
    assert_eq!(
        still["status"], "pending",
        "a fenced node recorded a call: {still}"
    );
    let ready = http_get(a.ops(), "/readyz").unwrap_or_default();
    assert!(
        ready.contains("fenced"),
        "/readyz of a fenced node: {ready:?}"
    );

    assert!(
        b.wait_serving(1, Duration::from_secs(20)),
        "the standby was not promoted:\n{}",
        b.logs()
    );
    b.server.create_ok(&token, &body);
    let a_metrics = http_get(a.ops(), "/metrics").unwrap_or_default();
    let fenced_at = metric(&a_metrics, "dialproof_fenced_timestamp_seconds")
        .expect("the fenced node's dialproof_fenced_timestamp_seconds");
    let a_fence_logged = logged_at_ms(&a, "ha: FENCED").expect("the primary's FENCED line");
    let b_won = logged_at_ms(&b, "ha: election won").expect("the standby's election line");
    let b_promoted = logged_at_ms(&b, "ha: PROMOTED").expect("the standby's PROMOTED line");
    let fenced_ms = (fenced_at * 1000.0) as i64;
    eprintln!(
        "cut at +0; a refused writes after {refused_after:?}; a's service fenced at {fenced_ms} \
         (metric), a's supervisor FENCED at {a_fence_logged} (log); b won at {b_won} (+{} ms \
         after the fence), b serving at {b_promoted}",
        b_won - fenced_ms
    );
    assert!(
        fenced_ms < b_won && a_fence_logged < b_won,
        "the design fences the old primary before anyone else can win: fenced at {fenced_ms} \
         / {a_fence_logged}, the standby won at {b_won}"
    );

    for p in &proxies {
        p.open();
    }
    // A few lease periods with etcd back: the old primary campaigns, loses
    // to the holder, and neither serves nor wins again.
    std::thread::sleep(3 * TTL);
    let ha = a.ha_metrics();
    assert_eq!(
        metric(&ha, "dialproof_ha_role{role=\"standby\"}"),
        Some(1.0),
        "{ha}"
    );
    assert_eq!(
        metric(&ha, "dialproof_ha_elections_won_total"),
        Some(1.0),
        "{ha}"
    );
    assert!(
        metric(&ha, "dialproof_ha_elections_lost_total").is_some_and(|n| n >= 1.0),
        "{ha}"
    );
    assert_eq!(metric(&ha, "dialproof_ha_fences_total"), Some(1.0), "{ha}");
    assert_eq!(count_logged(&a, "ha: election won"), 1, "{}", a.logs());
    assert_eq!(a.server.create(&token, &body).status, 503);
    b.server.create_ok(&token, &body);
}

/// The service fences itself when its supervisor dies (its stdin closes),
/// well before the lease could run out, and the standby takes over.
#[test]
fn a_primary_whose_supervisor_dies_stops_taking_writes_at_once() {
    if !etcd_installed() {
        return;
    }
    let etcd = Etcd::start();
    let rx = Receiver::recording(Answer::Status(200));
    let lines = sip_config(&trusted_line(NUMBERS, 603));
    let (mut a, mut b, token) = pair(&etcd, &etcd.endpoints(), &lines, &rx);
    let body = json!({"phone": PHONE, "webhook_url": rx.url("/hook")});
    a.server.create_ok(&token, &body);
    a.kill_supervisor();
    let killed = Instant::now();
    // Refused: a 503 while it fences, or no connection once it stopped
    // (the parent-death signal drains it); the helper panics on the
    // latter, which counts as refused here.
    let refused = within(killed, TTL, || {
        let tried = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            a.server.create(&token, &body).status
        }));
        tried.map_or(true, |status| status != 201)
    })
    .unwrap_or_else(|| {
        panic!(
            "the orphaned service took creates {TTL:?} on:\n{}",
            a.logs()
        )
    });
    a.server
        .wait_for_log(Duration::from_secs(5), |l| {
            l.contains("the supervisor is gone (stdin closed)")
        })
        .unwrap_or_else(|| panic!("no fence of its own:\n{}", a.logs()));
    assert!(
        b.wait_serving(1, Duration::from_secs(15)),
        "no takeover:\n{}",
        b.logs()
    );
    b.server.create_ok(&token, &body);
    eprintln!("supervisor killed: its service refused writes after {refused:?}");
}

/// README, "Automatic failover": a fenced node refuses every write, and a
/// test mode's simulated call is one (it completes a verification as a
/// call does). No etcd is needed: the test speaks the supervisor's words
/// (`lease <ms>`, `fence`) on the service's stdin through a FIFO, as
/// `dialproof ha` does through a pipe.
#[test]
fn a_fenced_service_refuses_simulated_calls_too() {
    use std::io::Write;
    let mut s = Server::prepare("");
    let fifo = s.dir.path().join("supervisor-words");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.is_ok_and(|st| st.success()), "mkfifo failed");
    // Opening a FIFO blocks until both ends are open: the writer's open
    // waits on its own thread for the service's shell to open the reader.
    let path = fifo.clone();
    let writer = std::thread::spawn(move || {
        std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .expect("open the FIFO")
    });
    let redirect = format!("exec $0 < {}", fifo.display());
    s.set_serve_args(&["--ha-child"]);
    s.set_supervisor(&["sh", "-c", &redirect]);
    s.launch();
    let mut words = writer.join().expect("FIFO writer");
    writeln!(words, "lease 600000").expect("lease word");

    let company = s.create_company("acme");
    let token = crate::testmode::test_key(&s, company);
    let created = s.create_ok(&token, &body(RU_PHONE));
    let id = created["verification_id"]
        .as_str()
        .expect("an id")
        .to_owned();
    writeln!(words, "fence").expect("fence word");
    let fenced = within(Instant::now(), Duration::from_secs(5), || {
        s.create(&token, &body(RU_PHONE)).status == 503
    });
    assert!(
        fenced.is_some(),
        "creates not refused after `fence`:\n{}",
        s.logs()
    );

    let r = crate::testmode::simulate(&s, &token, &id, &json!({"caller_id": "+79161234567"}));
    assert_eq!(
        r.status,
        503,
        "a fenced node took a simulated call: {}",
        r.text()
    );
    assert_eq!(
        r.json()["error"]["code"],
        "service_unavailable",
        "{}",
        r.text()
    );
    assert!(r.header("retry-after").is_some(), "503 without Retry-After");
    assert_eq!(s.get(&token, &id).json()["status"], "pending");
}
