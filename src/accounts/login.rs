//! Signing in, one rule for both login doors (the JSON endpoint
//! `POST /api/dashboard/auth/login` and the dashboard's login form): every
//! attempt counts toward [`LOGIN_PER_MINUTE`] per client address per
//! sliding minute, the two doors sharing one window (the spec's Limits
//! table); a client that keeps trying while refused is blocked like a key.
//! The password check costs the same Argon2 verification for an unknown
//! email as for a wrong password, so timing does not tell which emails
//! exist.
//!
//! Not for: the answers (each door words its own), or the session that a
//! successful login starts (`super::sessions`).

use super::passwords;
use super::users::normalise_email;
use crate::shared::offload::Offload;
use crate::shared::rate_limiters::RateLimiters;
use crate::shared::wait::{Committing, Outcome};
use dialproof_engine::time::UnixMillis;
use dialproof_storage::{Store, UserRow};
use std::net::IpAddr;
use std::time::Duration;

/// Login attempts per client address per sliding minute.
pub const LOGIN_PER_MINUTE: u32 = 10;
/// How long a login waits for the hashing threads.
const HASH_WAIT: Duration = Duration::from_secs(10);

/// Counts one login attempt from `peer` toward [`LOGIN_PER_MINUTE`];
/// over it, `Err` with the seconds to wait.
pub fn count_attempt(limiters: &RateLimiters, peer: IpAddr, now: UnixMillis) -> Result<(), u64> {
    super::allowed(limiters.check(&format!("login:{peer}"), now, LOGIN_PER_MINUTE))
}

/// Why a login found no user.
#[derive(Debug)]
pub enum Refused {
    /// No such email, or a wrong password (the caller cannot tell which).
    Credentials,
    /// The hashing threads gave no answer in time (the caller answers 503).
    Busy,
    /// The user lookup failed; the text is for a log line.
    Storage(String),
}

/// The user `email` (normalised here) whose password is `password`, looked
/// up with a wait of up to `storage_wait`.
pub fn check(
    store: &Store,
    offload: &Offload,
    email: &str,
    password: String,
    storage_wait: Duration,
) -> Result<UserRow, Refused> {
    let email = normalise_email(email);
    let user = match store.read_within(storage_wait, move |r| r.user_by_email(&email)) {
        Outcome::Done(u) => u,
        other => return Err(Refused::Storage(other.to_string())),
    };
    let phc = user
        .as_ref()
        .map(|u| u.password_hash.clone())
        .unwrap_or_else(|| passwords::dummy_hash().to_owned());
    let matched = offload.run(HASH_WAIT, move || passwords::verify(&password, &phc));
    match (matched, user) {
        (Some(true), Some(user)) => Ok(user),
        (None, _) => Err(Refused::Busy),
        _ => Err(Refused::Credentials),
    }
}
