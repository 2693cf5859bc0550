//! etcd without quorum (two of three members killed): the primary cannot
//! renew and fences, the standby cannot win, so no node takes writes;
//! when the members come back, an election is held again and a node
//! restores the replica and serves.
//!
//! Not for: a partition of one node (`fence`).

use super::cluster::{etcd_installed, Etcd, TTL};
use super::*;
use crate::support::sip::*;
use crate::support::webhooks::*;
use serde_json::json;

/// How long etcd's leader may go on granting renewals after losing
/// quorum: its election timeout (1 s in the fixture) and a renewal period.
const STEP_DOWN: Duration = Duration::from_secs(2);

#[test]
fn without_quorum_no_node_takes_writes_and_service_resumes_with_it() {
    if !etcd_installed() {
        return;
    }
    let mut etcd = Etcd::start();
    let rx = Receiver::recording(Answer::Status(200));
    let lines = sip_config(&trusted_line(NUMBERS, 603));
    let (mut a, mut b, token) = pair(&etcd, &etcd.endpoints(), &lines, &rx);
    let body = json!({"phone": PHONE, "webhook_url": rx.url("/hook")});
    let before = a.server.create_ok(&token, &body);

    etcd.kill_member(1);
    etcd.kill_member(2);
    let lost = Instant::now();
    // The old leader still renews until it notices the lost quorum (its
    // election timeout, 1 s here); the fence comes TTL minus the margin
    // after the last renewal etcd granted.
    let bound = TTL + STEP_DOWN;
    let refused = within(lost, bound, || a.server.create(&token, &body).status == 503)
        .unwrap_or_else(|| panic!("the primary took creates {bound:?} into the loss of quorum"));
    std::thread::sleep(TTL);
    assert!(
        b.server.ready_lines().is_empty(),
        "the standby serves without quorum:\n{}",
        b.logs()
    );
    assert_eq!(a.server.create(&token, &body).status, 503);
    assert_eq!(
        a.server.ready_lines().len(),
        1,
        "a restarted without quorum"
    );

    etcd.start_member(1);
    etcd.start_member(2);
    let back = Instant::now();
    let resumed = within(back, Duration::from_secs(40), || {
        a.server.ready_lines().len() > 1 || !b.server.ready_lines().is_empty()
    })
    .unwrap_or_else(|| {
        panic!(
            "no node serves 40 s after quorum returned:\n{}\n{}",
            a.logs(),
            b.logs()
        )
    });
    let serving = if b.server.ready_lines().is_empty() {
        &mut a
    } else {
        &mut b
    };
    assert!(serving.wait_serving(serving.server.ready_lines().len(), Duration::from_secs(1)));
    let got = serving
        .server
        .get(&token, before["verification_id"].as_str().expect("id"));
    assert_eq!(
        got.status,
        200,
        "the create before the loss was restored: {}",
        got.text()
    );
    serving.server.create_ok(&token, &body);
    eprintln!(
        "quorum lost: writes refused after {refused:?}; quorum back: node {} serving after \
         {resumed:?}",
        serving.name
    );
}
