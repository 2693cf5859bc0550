//! The primary dies (SIGKILL of its whole node, as when the machine dies)
//! under creates and real calls: the standby wins the election, restores
//! the replica, starts promoted and serves within 15 s of the kill; every
//! create acknowledged more than the replication interval before the kill
//! is there, no number is leased twice across both histories, and every
//! restored completion's webhook is delivered with the same bytes.
//!
//! Not for: the checks' details (`standby::failover`, shared).

use super::cluster::{etcd_installed, Etcd};
use super::*;
use crate::standby::failover::*;
use crate::support::sip::*;
use crate::support::webhooks::*;

const SERVE_WITHIN: Duration = Duration::from_secs(15);

/// README, "Automatic failover".
#[test]
fn the_standby_serves_within_15_s_of_the_primarys_death_without_double_leases() {
    if !etcd_installed() {
        return;
    }
    let etcd = Etcd::start();
    let rx = Receiver::recording(Answer::Status(200));
    let (rate, load) = (40, Duration::from_secs(4));
    let numbers = numbers_for(rate * load.as_secs());
    let lines = sip_config(&trusted_line(numbers, 603));
    let (mut a, mut b, token) = pair(&etcd, &etcd.endpoints(), &lines, &rx);
    let url = rx.url("/hook");
    let acked = run_load(&a.server, &token, &url, rate, load);
    a.kill();
    let killed = Instant::now();

    assert!(
        b.wait_serving(1, SERVE_WITHIN),
        "the standby did not start serving within {SERVE_WITHIN:?}:\n{}",
        b.logs()
    );
    let first = id(&acked.creates[0].body);
    let serving = within(killed, SERVE_WITHIN, || {
        b.server.get(&token, first).status == 200
    })
    .unwrap_or_else(|| panic!("no read answered within {SERVE_WITHIN:?} of the kill"));
    let restored = check_restored(&b.server, &token, &acked, killed);
    let creates = (acked.creates.len() + 50).min(numbers as usize / 4);
    check_no_double_lease(&b.server, &token, &url, &acked, &restored, creates);
    let completions = check_webhooks(&rx, &restored);
    let promote_ms = super::cluster::metric(&b.ha_metrics(), "dialproof_ha_promote_seconds");
    eprintln!(
        "ha failover: {} creates, {} calls; {} lost; serving {serving:?} after the kill \
         (promotion {promote_ms:?} s after the win); {completions} restored completions delivered",
        acked.creates.len(),
        acked.calls.len(),
        restored.lost,
    );
}
