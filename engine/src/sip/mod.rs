//! SIP for Dialproof, sans-IO: the parsing edge, caller and dialled-number
//! extraction, the server INVITE transaction, the registration client and
//! the OPTIONS pinger.
//!
//! Everything here is a pure function or a state machine driven by the
//! caller in the quinn-proto style: bytes and `now` go in through
//! `handle_*`, datagrams to send come out of the return value or `poll_*`,
//! and [`server::Endpoint::poll_timeout`] / `handle_timeout(now)` drive the
//! timers. Randomness (branch, tag and Call-ID values, backoff jitter) comes
//! from a seed the caller passes in ([`rng::SplitMix64`]), so a test replays a
//! run exactly over virtual time.
//!
//! Why our own parser and not `rsip` 0.4: tried against the messages our
//! providers send, rsip 0.4.0 rejected a folded header line and a `tel:`
//! Request-URI outright (the whole INVITE is lost, not just the header),
//! kept only the first of two Via values written on one line, and has no
//! typed P-Asserted-Identity or Remote-Party-ID; its compact names parse but
//! come out as untyped headers. An edge in front of it would have had to
//! re-parse every header we read anyway, so [`message`] is a small strict
//! parser of exactly what a UAS needs (RFC 3261 s7 and s20), with named
//! limits, that never panics on peer bytes (see `engine/fuzz` and
//! `engine/tests/it/sip.rs`).
//!
//! Not for: sockets, clocks or threads (the binary's `src/sip` drives these
//! machines), dialogs beyond the INVITE transaction (we never answer a
//! call, so there is no dialog, no SDP and no media), TCP/TLS framing, or
//! proxying.

mod client_tx;
pub mod digest;
pub mod exercise;
pub mod identity;
pub mod message;
pub mod number;
pub mod outcome;
pub mod overload;
pub mod ping;
pub mod register;
pub mod response;
pub mod rng;
pub mod route;
pub mod server;
pub mod uri;
pub mod via;

use std::time::Duration;

/// RFC 3261 timer T1: the round-trip estimate (s17.1.1.1).
pub const T1: Duration = Duration::from_millis(500);
/// RFC 3261 timer T2: the cap on non-INVITE and response retransmit intervals.
pub const T2: Duration = Duration::from_secs(4);
/// RFC 3261 timer T4: how long a message may stay in the network; the time a
/// UDP server transaction lingers after the ACK (Timer I).
pub const T4: Duration = Duration::from_secs(5);

/// Milliseconds on a monotonic clock the caller owns. The SIP machines only
/// compare and add these; they never read a clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(pub u64);

impl Instant {
    pub fn plus(self, d: Duration) -> Instant {
        Instant(
            self.0
                .saturating_add(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        )
    }

    /// Time from `earlier` to `self` (zero if `earlier` is later).
    pub fn since(self, earlier: Instant) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }
}
