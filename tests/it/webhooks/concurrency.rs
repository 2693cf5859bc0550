//! The per-receiver limit, end to end: the README promises at most 8
//! attempts to one receiver at a time. Twenty verifications end together
//! for one receiver that holds every request open until the test releases
//! it; the receiver never has more than 8 open at once, it does have 8
//! (the limit is what stops it, not a lack of work), and all twenty arrive
//! and are delivered once each.
//!
//! The verifications end by TTL expiry (30 s, the shortest TTL); the path
//! after the commit is the same for every event type.
//!
//! Not for: one receiver's timeouts and retries (`webhooks::delivery`).

use crate::support::webhooks::*;
use crate::support::*;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::time::Duration;

/// `dialproof_engine::webhook_schedule::PER_RECEIVER_IN_FLIGHT_MAX`, as the
/// README states it.
const PER_RECEIVER_MAX: usize = 8;
const VERIFICATIONS: usize = 20;
/// A held request is answered after this at the latest: under the sender's
/// 10 s timeout, so no attempt fails because the test was slow.
const HOLD_MAX: Duration = Duration::from_secs(8);
/// Long enough for a 30 s TTL and the expiry timer.
const EXPIRY_WAIT: Duration = Duration::from_secs(50);
const WAVE_WAIT: Duration = Duration::from_secs(10);
/// Once every delivery is committed and the receiver holds the limit, the
/// driver gets this long to break it: without the limit, the rest would go
/// out within milliseconds of their commit. A window for a violation to
/// show, not a bound on anyone's speed.
const SETTLE: Duration = Duration::from_secs(1);

/// README, "Webhooks": at most 8 attempts to one receiver at a time.
#[test]
fn one_receiver_gets_at_most_eight_at_once_and_all_twenty_in_the_end() {
    let rx = Receiver::recording(Answer::Hold(HOLD_MAX));
    let (s, clock) =
        Server::start_virtual(&format!("{FAST_RETRIES}{}", pools(VERIFICATIONS as u64, 0)));
    let company = s.create_company("acme");
    s.cli(&["company", "dev-urls", &company.to_string(), &rx.base_url()]);
    let token = s.create_key(company);
    let mut ids = HashSet::new();
    for i in 0..VERIFICATIONS {
        let v = s.create_ok(
            &token,
            &json!({"phone": RU_PHONE, "webhook_url": rx.url("/hook"),
                    "client_ref": format!("ref-{i}"), "ttl_seconds": 30}),
        );
        ids.insert(v["verification_id"].as_str().unwrap().to_owned());
    }

    // Past the TTL on the virtual clock (`crate::support::virtual_time`): the
    // expiry, and its webhook, come at once instead of in 30 s.
    clock.advance(Duration::from_secs(31));
    // Every delivery committed (its outbox row is in the log): from here
    // on the driver knows all twenty, and only the limit holds any back.
    let deliveries = |s: &Server| {
        let log = s.cli(&["delivery", "list", "--company", &company.to_string()]);
        log.as_array().map_or(0, Vec::len)
    };
    poll(EXPIRY_WAIT, || {
        (deliveries(&s) == VERIFICATIONS).then_some(())
    })
    .unwrap_or_else(|| panic!("not every verification expired; logs:\n{}", s.logs()));

    // Waves: wait until the receiver holds as many requests as the limit
    // allows (or as remain), give the driver a moment to send more, then
    // answer them all and wait until they are answered. Without the limit
    // the first wave alone would hold all twenty.
    while rx.answered_requests() < VERIFICATIONS {
        let expected = PER_RECEIVER_MAX.min(VERIFICATIONS - rx.answered_requests());
        rx.wait_until(
            &format!("{expected} requests held at once"),
            WAVE_WAIT,
            |r| r.open_requests() >= expected,
        );
        std::thread::sleep(SETTLE);
        assert!(
            rx.open_requests_max() <= PER_RECEIVER_MAX,
            "{} requests were open at once; logs:\n{}",
            rx.open_requests_max(),
            s.logs()
        );
        let target = rx.answered_requests() + rx.open_requests();
        rx.release_held();
        rx.wait_until("the held requests answered", WAVE_WAIT, |r| {
            r.answered_requests() >= target
        });
    }
    assert_eq!(rx.open_requests_max(), PER_RECEIVER_MAX);

    // Every verification's webhook arrived, once, and is logged delivered
    // at its first attempt.
    let hits = rx.hits_to("/hook");
    let sent: HashSet<String> = hits
        .iter()
        .map(|h| h.json()["verification_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(sent, ids);
    assert_eq!(hits.len(), VERIFICATIONS, "no webhook twice");
    let log = poll(Duration::from_secs(10), || {
        let log = s.cli(&["delivery", "list", "--company", &company.to_string()]);
        let all = log.as_array()?;
        let done = all.len() == VERIFICATIONS && all.iter().all(|d| d["state"] == "delivered");
        done.then_some(log)
    })
    .unwrap_or_else(|| panic!("not all delivered; logs:\n{}", s.logs()));
    for d in log.as_array().unwrap() {
        assert_eq!(d["attempts_made"], Value::from(1), "{d}");
    }
}
