//! The retransmission clock of a non-INVITE client transaction over UDP
//! (RFC 3261 s17.1.2.2): the request goes out again on Timer E, starting at
//! T1 and doubling up to T2 (T2 at once after a provisional answer), until
//! the transaction times out (Timer F, or the caller's own limit).
//!
//! Shared by the registration client and the OPTIONS pinger, which differ in
//! what a timeout or an answer means, not in when to retransmit.
//!
//! Not for: the server side (see [`super::server`]) or matching responses.

use super::{Instant, T1, T2};
use std::time::Duration;

pub(crate) struct ClientRetransmit {
    bytes: Vec<u8>,
    interval: Duration,
    next: Instant,
    give_up: Instant,
}

impl ClientRetransmit {
    /// A request just sent at `now` that times out after `timeout`.
    pub(crate) fn new(now: Instant, bytes: Vec<u8>, timeout: Duration) -> Self {
        ClientRetransmit {
            bytes,
            interval: T1,
            next: now.plus(T1),
            give_up: now.plus(timeout),
        }
    }

    /// The next moment something is due (a retransmission or the timeout).
    pub(crate) fn deadline(&self) -> Instant {
        self.next.min(self.give_up)
    }

    pub(crate) fn timed_out(&self, now: Instant) -> bool {
        now >= self.give_up
    }

    /// The bytes to send again if a retransmission is due at `now`.
    pub(crate) fn due(&mut self, now: Instant) -> Option<Vec<u8>> {
        if now < self.next {
            return None;
        }
        self.interval = (self.interval * 2).min(T2);
        self.next = now.plus(self.interval);
        Some(self.bytes.clone())
    }

    /// A provisional answer arrived: the server has the request, so only
    /// retransmit every T2 from now on.
    pub(crate) fn provisional(&mut self, now: Instant) {
        self.interval = T2;
        self.next = now.plus(T2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_to_t2_then_times_out() {
        let t0 = Instant(0);
        let mut r = ClientRetransmit::new(t0, b"REGISTER".to_vec(), Duration::from_secs(32));
        assert!(r.due(Instant(499)).is_none());
        let mut sent_at = Vec::new();
        let mut now = t0;
        while !r.timed_out(now) {
            now = r.deadline();
            if r.due(now).is_some() {
                sent_at.push(now.0);
            }
        }
        // T1 = 500 ms: 0.5, 1.5, 3.5, 7.5 s, then every T2 = 4 s.
        assert_eq!(&sent_at[..6], &[500, 1500, 3500, 7500, 11_500, 15_500]);
        assert_eq!(now, Instant(32_000));
    }

    #[test]
    fn a_provisional_answer_slows_it_to_t2() {
        let mut r = ClientRetransmit::new(Instant(0), vec![], Duration::from_secs(32));
        r.provisional(Instant(100));
        assert!(r.due(Instant(4099)).is_none());
        assert!(r.due(Instant(4100)).is_some());
    }
}
