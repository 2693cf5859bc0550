//! The HTTP/1.1 layer against clients that break its rules or its limits
//! on purpose, and the limits themselves: framing and message rules
//! ([`framing`]), size limits ([`limits`]), peers that are slow on purpose
//! and the request timeout ([`slow`]), and idle connections, one or
//! thousands ([`idle`]). Each case gets a clear status or a closed
//! connection, changes nothing, and never makes the server panic.
//!
//! Not for: the redirect listener (`api::redirect`), or hostile webhook
//! receivers (`super::receivers`).

mod framing;
mod idle;
mod limits;
mod slow;

use crate::support::*;
use std::io::{ErrorKind, Read};
use std::time::Duration;

/// What reading an idle connection for up to `wait` shows.
#[derive(Debug, PartialEq)]
pub(super) enum Seen {
    /// The server closed it (EOF or reset).
    Closed,
    /// Nothing arrived and it is still open.
    Open,
}

/// Reads `c` for up to `wait`. Unlike [`Conn::is_closed_within`], a timeout
/// is not taken for a close. Bytes from the server are a failure.
pub(super) fn watch(c: &mut Conn<TlsStream>, wait: Duration) -> Seen {
    c.stream.sock.set_read_timeout(Some(wait)).unwrap();
    let mut b = [0u8; 256];
    let seen = match c.stream.read(&mut b) {
        Ok(0) => Seen::Closed,
        Ok(n) => panic!(
            "unexpected bytes on an idle connection: {:?}",
            String::from_utf8_lossy(&b[..n])
        ),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => Seen::Open,
        Err(_) => Seen::Closed,
    };
    c.stream.sock.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    seen
}
