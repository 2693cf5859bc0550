//! What the SIP edge sheds when it falls behind: an INVITE that waited in
//! the inbound queue so long that its sender has already sent it again.
//!
//! Why: over UDP a caller's INVITE client transaction sends the request
//! again after T1 (500 ms), 2*T1, 4*T1... until it hears anything (a 100
//! or a final). When the service is saturated and its inbound queue holds
//! more than T1 of work, every INVITE it takes from the queue has already
//! been retransmitted, and the copy is further back in the same queue.
//! Handling the old one answers it late, and the copy then costs a second
//! parse, a transaction lookup and a repeated final (which the caller
//! discards), and the caller's retransmissions cost its own CPU: a
//! saturated server that handled every copy (measured: 34,000
//! retransmissions for 40,000 calls) answers fewer calls the more it is
//! offered (congestion collapse). Dropping such an INVITE unparsed costs
//! the driver a few nanoseconds, and the
//! queue's wait stays below [`INVITE_WAIT_MAX`], so what is handled is
//! answered (or given its 100) before the caller retransmits. A dropped
//! INVITE is not a lost call: its caller's retransmission, which comes
//! anyway, is handled as the first copy.
//!
//! Only INVITEs are shed. An ACK stops our final's retransmissions, a
//! CANCEL ends a call, a response belongs to our own registration or
//! ping, and an OPTIONS is answered at once from the datagram: shedding
//! any of them would add work or lose state, not save it.
//!
//! Not for: the queue's memory bound (the driver's count of datagrams
//! held) or the transaction table's (`server::INVITE_TRANSACTIONS_MAX`).

use super::message::after_leading_crlfs;
use std::time::Duration;

/// The longest an INVITE may wait in the inbound queue and still be
/// handled. Half of T1: what is taken within it is answered, or given its
/// `100 Trying` (at most `server::TRYING_DELAY` later), before the
/// caller's first retransmission at T1, with room for the kernel's socket
/// buffer and the caller's own scheduling.
pub const INVITE_WAIT_MAX: Duration = Duration::from_millis(250);
const _: () = assert!(
    INVITE_WAIT_MAX.as_millis() + super::server::TRYING_DELAY.as_millis() < super::T1.as_millis(),
    "what waited up to the bound gets its 100 before the caller's first retransmission"
);

/// Whether a datagram that waited `waited` in the inbound queue is an
/// INVITE to drop unhandled (see the module doc). Looks at the start line
/// only, where the parser finds it ([`after_leading_crlfs`]): the method
/// token, which is case-sensitive, and a space.
pub fn is_stale_invite(waited: Duration, datagram: &[u8]) -> bool {
    waited > INVITE_WAIT_MAX && after_leading_crlfs(datagram).starts_with(b"INVITE ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const INVITE: &[u8] =
        b"INVITE sip:+74950000000@127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP h\r\n\r\n";
    const LATE: Duration = Duration::from_millis(251);

    #[test]
    fn an_invite_is_shed_only_once_it_waited_longer_than_the_bound() {
        assert!(!is_stale_invite(Duration::ZERO, INVITE));
        assert!(!is_stale_invite(INVITE_WAIT_MAX, INVITE));
        assert!(is_stale_invite(LATE, INVITE));
        assert!(is_stale_invite(Duration::from_secs(30), INVITE));
    }

    #[test]
    fn leading_crlfs_are_skipped_as_the_parser_skips_them() {
        let mut with_crlfs = b"\r\n\r\n".to_vec();
        with_crlfs.extend_from_slice(INVITE);
        assert!(is_stale_invite(LATE, &with_crlfs));
    }

    #[test]
    fn nothing_but_an_invite_is_shed_however_long_it_waited() {
        for other in [
            &b"ACK sip:x SIP/2.0\r\n\r\n"[..],
            b"CANCEL sip:x SIP/2.0\r\n\r\n",
            b"OPTIONS sip:x SIP/2.0\r\n\r\n",
            b"BYE sip:x SIP/2.0\r\n\r\n",
            b"SIP/2.0 200 OK\r\nCSeq: 1 INVITE\r\n\r\n",
            // Methods are case-sensitive: this is not an INVITE.
            b"invite sip:x SIP/2.0\r\n\r\n",
            // A token that only begins with INVITE.
            b"INVITEX sip:x SIP/2.0\r\n\r\n",
            b"\r\n\r\n",
            b"",
        ] {
            assert!(
                !is_stale_invite(Duration::from_secs(30), other),
                "{}",
                String::from_utf8_lossy(other)
            );
        }
    }
}
