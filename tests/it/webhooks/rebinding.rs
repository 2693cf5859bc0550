//! The SSRF guard at delivery time: a webhook host that resolved to a public
//! address when the verification was created but resolves to a private one
//! when the webhook is due (DNS rebinding) is refused, and nothing connects
//! to the private address.
//!
//! The service resolves names with the system resolver, as in production.
//! The test runs in a network namespace of its own (`crate::support::netns`) and
//! rewrites that namespace's `/etc/hosts` between the create and the
//! delivery, as a rebinding DNS server would. Only loopback exists there,
//! so the public address the name has at first is never reachable.
//!
//! Not for: the guard at creation (`api::create`).

use crate::support::netns::Netns;
use crate::support::webhooks::*;
use crate::support::*;
use serde_json::json;

/// The test's name, for [`Netns::enter`].
const TEST: &str = concat!(
    module_path!(),
    "::",
    "a_host_rebound_to_a_private_address_is_refused_at_delivery"
);

/// `/etc/hosts` at creation: `rebind.test` public, `mixed.test` public and
/// private.
const HOSTS_AT_CREATION: &str = "127.0.0.1 localhost
93.184.216.34 rebind.test
93.184.216.34 mixed.test
127.0.0.1 mixed.test
";

/// `/etc/hosts` at delivery: `rebind.test` rebound to loopback.
const HOSTS_AT_DELIVERY: &str = "127.0.0.1 localhost
127.0.0.1 rebind.test
";

#[test]
fn a_host_rebound_to_a_private_address_is_refused_at_delivery() {
    let Some(netns) = Netns::enter(TEST, HOSTS_AT_CREATION) else {
        return;
    };

    // A listener where the rebound name points: it must see no connection.
    let trap = Receiver::recording(Answer::Status(200));
    let port = trap.addr().port();
    let (s, clock) = Server::start_virtual(&format!("{FAST_RETRIES}{}", pools(10, 0)));
    let token = s.new_client("acme");

    // At creation every address is checked: one private address among
    // public ones refuses the URL.
    let r = s.create(
        &token,
        &json!({"phone": RU_PHONE, "webhook_url": format!("https://mixed.test:{port}/hook")}),
    );
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(
        r.text().contains("private/internal address (127.0.0.1)"),
        "{}",
        r.text()
    );

    // Public now: accepted.
    let v = s.create_ok(
        &token,
        &json!({"phone": RU_PHONE, "webhook_url": format!("https://rebind.test:{port}/hook"),
                "ttl_seconds": 30}),
    );
    let id = v["verification_id"].as_str().unwrap().to_owned();
    // ... and private by the time the webhook is due.
    netns.set_hosts(HOSTS_AT_DELIVERY);

    let d = expire_until_dead(&s, &clock, &id);
    let attempts = d["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 3, "{d}");
    for a in attempts {
        assert!(a["http_status"].is_null(), "{a}");
        assert_eq!(
            a["error"], "webhook_url resolves to a private/internal address (127.0.0.1)",
            "{a}"
        );
    }
    assert_eq!(
        trap.connections(),
        0,
        "nothing may connect to the rebound address"
    );
}
