//! Automatic failover with etcd (README, "Automatic failover"): three
//! etcd members on loopback, two `dialproof ha` nodes replicating to one
//! directory replica. The primary's death ([`failover`]), a primary cut
//! off from etcd but not from its clients ([`fence`]), and etcd without
//! quorum ([`quorum`]). Skipped, with the package named, where `etcd` is
//! not installed.
//!
//! Not for: the election's rules (the engine's unit tests) or the manual
//! promotion (`standby`).

mod cluster;
mod config;
mod failover;
mod fence;
mod quorum;
mod registrar;

use crate::support::webhooks::Receiver;
use crate::support::*;
use cluster::{Etcd, Node};
use std::time::{Duration, Instant};

/// The number every test's creates verify.
const PHONE: &str = "+79161234567";
/// The line's numbers in the fence and quorum tests: they create every
/// 50 ms until refused, and a promotion then holds twice the busiest
/// stretch of the lost window's length, so a small line would run out.
const NUMBERS: u64 = 2000;

/// Starts node "a" (through `endpoints_a`) and waits until it serves,
/// sets up a company whose webhooks go to `rx` with an unthrottled key,
/// then starts node "b" as its standby. Returns both and the key.
fn pair(etcd: &Etcd, endpoints_a: &[String], lines: &str, rx: &Receiver) -> (Node, Node, String) {
    let replica = cluster::replica_dir(etcd);
    let mut a = Node::prepare("a", endpoints_a, &replica, lines);
    a.launch();
    assert!(
        a.wait_serving(1, Duration::from_secs(20)),
        "the first node did not win and serve:\n{}",
        a.logs()
    );
    let company = a.server.create_company("acme");
    a.server
        .cli(&["company", "dev-urls", &company.to_string(), &rx.base_url()]);
    let token = a.server.create_key(company);
    let prefix = token.split('_').nth(2).expect("prefix").to_owned();
    a.server.cli(&["key", "set-limit", &prefix, "100000"]);
    let mut b = Node::prepare("b", &etcd.endpoints(), &replica, lines);
    b.launch();
    b.server
        .wait_for_log(Duration::from_secs(10), |l| {
            l.contains("ha: node started as a standby")
        })
        .expect("node b started");
    // The operator's changes reach the service within a second, and the
    // replica within Litestream's interval.
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        b.server.ready_lines().is_empty(),
        "the standby serves beside the primary:\n{}",
        b.logs()
    );
    (a, b, token)
}

/// The `at_ms=` of the first log line containing `what`.
fn logged_at_ms(node: &Node, what: &str) -> Option<i64> {
    let line = node
        .server
        .wait_for_log(Duration::from_secs(5), |l| l.contains(what))?;
    line.split("at_ms=")
        .nth(1)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// How many log lines contain `what`.
fn count_logged(node: &Node, what: &str) -> usize {
    node.logs().lines().filter(|l| l.contains(what)).count()
}

/// Polls `f` every 50 ms until it is true or `within` has passed since
/// `from`; how long after `from` it became true.
fn within(from: Instant, within: Duration, mut f: impl FnMut() -> bool) -> Option<Duration> {
    loop {
        if f() {
            return Some(from.elapsed());
        }
        if from.elapsed() > within {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
