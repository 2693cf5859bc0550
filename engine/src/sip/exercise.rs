//! One entry point that pushes arbitrary bytes through every parser on the
//! SIP edge, for the fuzz target (`engine/fuzz`, `sip_parse`) and the
//! deterministic never-panics test (`engine/tests/it/sip.rs`).
//!
//! Not for: production paths (nothing calls it outside those two).

use super::digest::{verify, Challenge};
use super::identity::caller;
use super::message::{Message, Via};
use super::number::{to_e164, Region};
use super::register::{Registration, RegistrationConfig};
use super::route::{route_invite, CalledFrom, LineRoute};
use super::server::{Endpoint, Event, TRYING_DELAY};
use super::uri::NameAddr;
use super::Instant;
use std::net::SocketAddr;

/// Parses `bytes` as a datagram and, when it parses, reads every field the
/// service reads from it; also feeds it to a server endpoint and a
/// registration client and runs their timers. Must never panic.
pub fn exercise(bytes: &[u8]) {
    let src = SocketAddr::from(([192, 0, 2, 7], 5060));
    let now = Instant(1_000);
    through_endpoints(bytes, src, now);
    let Ok(msg) = Message::parse(bytes) else {
        return;
    };
    read_fields(&msg, src);
    through_registration(&msg, src, now);
}

/// The bytes through a server endpoint (stateful and stateless answers,
/// a retransmission, the timers).
fn through_endpoints(bytes: &[u8], src: SocketAddr, now: Instant) {
    let mut endpoint = Endpoint::new(1);
    if let Ok(Event::Invite { id, .. }) = endpoint.handle_datagram(now, src, bytes) {
        // The 100 is built only once TRYING_DELAY passes without a final.
        endpoint.trying(now, id);
        endpoint.handle_timeout(now.plus(TRYING_DELAY));
        endpoint.respond(now, id, 603);
    }
    // The stateless answer, on a fresh endpoint.
    let mut stateless = Endpoint::new(2);
    if let Ok(Event::Invite { id, .. }) = stateless.handle_datagram(now, src, bytes) {
        stateless.respond_stateless(id, 403);
    }
    while stateless.poll_transmit().is_some() {}
    // The same bytes again: the retransmission paths.
    let _ = endpoint.handle_datagram(now, src, bytes);
    let _ = endpoint.poll_timeout();
    endpoint.handle_timeout(Instant(100_000));
    while endpoint.poll_transmit().is_some() {}
}

/// Every field the service reads from a parsed message, in every region
/// and with every way of reading the dialled number.
fn read_fields(msg: &Message, src: SocketAddr) {
    let regions = [
        Region::parse("RU"),
        Region::parse("GB"),
        Region::parse("US"),
    ];
    for region in regions.into_iter().flatten() {
        for called_from in [
            CalledFrom::Auto,
            CalledFrom::RequestUri,
            CalledFrom::To,
            CalledFrom::PCalledPartyId,
        ] {
            let line = LineRoute {
                line: 0u8,
                region,
                called_from,
                contact_user: "dp-000000000000",
                aor_user: Some("74950000001"),
            };
            let _ = route_invite(msg, &[line], |n| n.ends_with('1').then_some(0u8));
        }
        let _ = caller(msg, region, true);
        let _ = caller(msg, region, false);
        for (_, value) in msg.fields() {
            let _ = to_e164(value, region);
        }
    }
    for (_, value) in msg.fields() {
        let _ = NameAddr::parse(value);
        let _ = Via::parse(value);
        let _ = Challenge::parse(value);
        let _ = verify(value, "p", "REGISTER", "n");
    }
    if let Some(via) = msg.top_via() {
        let _ = via.stamped(src);
        let _ = via.response_target(src);
    }
}

/// The message as a registrar's answer to a registration client.
fn through_registration(msg: &Message, src: SocketAddr, now: Instant) {
    let mut reg = Registration::new(
        RegistrationConfig {
            registrar: src,
            domain: "example.invalid".into(),
            username: "u".into(),
            auth_username: None,
            password: "p".into(),
            expires_seconds: 60,
            local: SocketAddr::from(([192, 0, 2, 8], 5060)),
            contact_user: "dp-000000000000".into(),
        },
        1,
    );
    reg.start(now);
    let _ = reg.handle_response(now, msg);
    let _ = reg.handle_timeout(Instant(50_000));
    while reg.poll_transmit().is_some() {}
}
