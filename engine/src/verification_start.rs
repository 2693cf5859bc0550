//! A new verification as a create starts it: the decisions about a new
//! row (pending, expiring its effective TTL after its creation, no call
//! recorded) from a validated request, its leased number and the moment.
//!
//! Not for: who owns the row or how it is stored (`dialproof_storage`'s
//! `VerificationRow::new`), or what happens to it later
//! ([`crate::verification::apply`]).

use crate::time::UnixMillis;
use crate::validate::CreateRequest;
use crate::verification::Status;

/// A verification as a create starts it: what is decided about a new row
/// (pending, expiring `ttl_seconds` after its creation, no call recorded),
/// apart from who owns it and where it is stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Started {
    pub request: CreateRequest,
    pub dial_number: String,
    pub lease_generation: u32,
    pub status: Status,
    pub created_at: UnixMillis,
    pub expires_at: UnixMillis,
}

/// Starts a verification for a validated request on the number it leased
/// (`(number, lease generation)`), at `now`.
pub fn start(request: CreateRequest, lease: (String, u32), now: UnixMillis) -> Started {
    let expires_at = now.plus_seconds(request.ttl_seconds);
    Started {
        request,
        dial_number: lease.0,
        lease_generation: lease.1,
        status: Status::Pending,
        created_at: now,
        expires_at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verification::effective_ttl_seconds;

    #[test]
    fn a_started_verification_is_pending_and_expires_after_its_effective_ttl() {
        let request = CreateRequest {
            phone: "+79991234567".into(),
            pool: crate::pool::Pool::Domestic,
            webhook_url: "https://example.com/h".into(),
            client_ref: "r".into(),
            info: String::new(),
            ttl_seconds_requested: 5,
            ttl_seconds: effective_ttl_seconds(5),
        };
        let started = start(request, ("+74950000001".into(), 7), UnixMillis(1_000));
        assert_eq!(started.status, Status::Pending);
        assert_eq!(started.created_at, UnixMillis(1_000));
        assert_eq!(started.expires_at, UnixMillis(1_000 + 30_000));
        assert_eq!(
            (started.dial_number.as_str(), started.lease_generation),
            ("+74950000001", 7)
        );
    }
}
