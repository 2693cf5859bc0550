//! Registered lines follow the primary through a real registrar
//! (Kamailio): the primary registers its line; cut off from etcd it fences
//! and un-registers it (`Expires: 0`); the promoted standby registers the
//! same line, and a call routed by the registrar completes a verification
//! on it, with nothing forked to the fenced node.
//!
//! Not for: the registrar's own routing modes (`sip::kamailio`).

use super::cluster::{etcd_installed, Etcd, Proxy};
use super::*;
use crate::sip::kamailio::{FIRST, PASSWORD};
use crate::support::kamailio::Kamailio;
use crate::support::sip::*;
use crate::support::webhooks::*;
use serde_json::json;

/// The registered line: enough numbers that the promotion's hold (a
/// margin of 8 in the sub-pool) leaves some to issue.
fn line(provider: std::net::SocketAddr) -> String {
    format!(
        "[[lines]]\nname = \"kam\"\nmode = \"register\"\nprovider = \"{provider}\"\n\
         username = \"{FIRST}\"\npassword = \"{PASSWORD}\"\nregister_expires_seconds = 60\n\
         numbers = [ {{ range_start = \"+{FIRST}\", count = 40, pool = \"domestic\" }} ]\n"
    )
}

/// README, "Automatic failover": registrar-routed providers follow.
#[test]
fn a_fenced_primary_unregisters_its_line_and_the_new_primary_registers_it() {
    if !etcd_installed() {
        return;
    }
    let kamailio = Kamailio::start(FIRST, FIRST, PASSWORD);
    let etcd = Etcd::start();
    let proxies: Vec<Proxy> = etcd.client_addrs().into_iter().map(Proxy::start).collect();
    let through: Vec<String> = proxies
        .iter()
        .map(|p| format!("http://{}", p.addr))
        .collect();
    let rx = Receiver::recording(Answer::Status(200));
    let lines = sip_config(&line(kamailio.addr));
    let (a, mut b, token) = pair(&etcd, &through, &lines, &rx);
    let registered = |n: &Node| {
        n.server
            .wait_for_log(Duration::from_secs(15), |l| {
                l.contains("sip line registered")
            })
            .is_some()
    };
    assert!(registered(&a), "the primary's line:\n{}", a.logs());

    for p in &proxies {
        p.cut();
    }
    a.server
        .wait_for_log(Duration::from_secs(10), |l| {
            l.contains("fenced: un-registering the line")
        })
        .unwrap_or_else(|| panic!("the fenced node kept its line:\n{}", a.logs()));
    assert!(
        b.wait_serving(1, Duration::from_secs(20)),
        "no promotion:\n{}",
        b.logs()
    );
    assert!(registered(&b), "the new primary's line:\n{}", b.logs());

    let v = b.server.create_ok(
        &token,
        &json!({"phone": PHONE, "webhook_url": rx.url("/hook")}),
    );
    let dial = v["dial_number"]
        .as_str()
        .expect("dial")
        .trim_start_matches('+');
    let dir = workdir();
    let sf = scenario(
        dir.path(),
        "call.xml",
        &[
            ("FROM_HEADER", &from_user("89161234567")),
            ("HEADERS", ""),
            ("CODE", "603"),
        ],
    );
    let out = run_uac(dir.path(), &sf, kamailio.addr, dial, "127.0.0.1", 1);
    if !out.status.success() {
        eprintln!("kamailio:\n{}", kamailio.logs());
    }
    assert_sipp_ok(&out, dir.path(), &b.server);
    let got = b
        .server
        .get(&token, v["verification_id"].as_str().expect("id"))
        .json();
    assert_eq!(got["status"], "completed", "{got}");
    assert_eq!(
        count_logged(&a, "INVITE to a fenced node"),
        0,
        "the registrar still routed to the fenced node:\n{}",
        kamailio.logs()
    );
}
