//! Dialproof's sans-IO core.
//!
//! Everything that decides something lives here: which number to lease, how a
//! verification moves between states, whether a key is over its rate limit,
//! whether a create request is valid, how a webhook is signed, when it is
//! retried and which delivery goes out next ([`webhook_schedule`]), which
//! webhook URLs are development URLs ([`dev_urls`]), and the SIP edge:
//! parsing, caller numbers, the server INVITE transaction and the
//! registration client ([`sip`]). Nothing here reads a clock, touches a
//! socket, a file or SQLite: time comes in as an argument
//! ([`time::UnixMillis`]) and randomness as bytes, so tests can run a day of
//! TTLs in a millisecond and replay a seeded run exactly.
//!
//! Where each rule lives: [`lease`] (the lock-free table of numbers, its
//! cyclic cursors per sub-pool and the holds of [`promotion`]),
//! [`verification`] (the state machine) and [`verification_start`] (a new
//! row and its expiry), [`expiry`], [`ratelimit`] (the sliding window and
//! the temporary block), [`validate`] (the create body, with the Django
//! REST Framework texts), [`http_head`] (the HTTP request head's parsing
//! and framing rules) and [`http_chunked`] (a chunked body, decoded within
//! limits), [`idempotency`] (retry-safe creates: the `Idempotency-Key`
//! header, the fingerprint, the claims), [`ssrf`] (the special-purpose
//! address ranges),
//! [`caller_evidence`] (how far the network vouches for a caller ID),
//! [`test_pool`] and [`simulated_call`] (test mode's numbers and its
//! simulated calls),
//! [`number_health`] (numbers that stopped ringing, and their quarantine)
//! and [`number_map`] (what it keeps per number, packed),
//! [`ha`] (automatic failover: campaign, lease renewal, fence, promotion),
//! [`e164`] (a number in one word), [`guided_search`] (searching sorted
//! keys that are spread evenly), [`word_hash`] (hashing the service's own
//! numbers and ids), [`ids`], [`apikey`] and [`csrf`]
//! (tokens), [`webhook`], [`webhook_retry`] and [`webhook_schedule`] (payload, signature, retries,
//! which delivery goes to which receiver next), [`dev_urls`], and [`sip`].
//! The cargo-fuzz targets of the SIP edge, the HTTP head and the create body
//! are in `engine/fuzz/` (a workspace of its own; see its README).
//!
//! What this crate is not for: persistence (see `dialproof-storage`), and any
//! network or thread handling (the `dialproof` binary is the only IO layer).
#![forbid(unsafe_code)]

pub mod apikey;
pub mod caller_evidence;
pub mod csrf;
pub mod dev_urls;
pub mod e164;
pub mod expiry;
pub mod guided_search;
pub mod ha;
pub mod http_chunked;
pub mod http_exercise;
pub mod http_head;
pub mod idempotency;
pub mod ids;
pub mod lease;
pub mod number_health;
pub mod number_map;
pub mod pool;
pub mod promotion;
pub mod ratelimit;
pub mod simulated_call;
pub mod sip;
pub mod ssrf;
pub mod test_pool;
pub mod time;
pub mod validate;
pub mod verification;
pub mod verification_start;
pub mod webhook;
pub mod webhook_retry;
pub mod webhook_schedule;
pub mod word_hash;

/// A company's row id. Every resource is scoped to one company.
pub type CompanyId = i64;
