//! Retry-safe creates: the `Idempotency-Key` header ([`key`]), what makes
//! two creates the same request ([`fingerprint`]), and the decisions for a
//! create that carries a key ([`table`]).
//!
//! The rules, as a client sees them: the first create with a key runs as
//! any create; once its verification is stored, a create with the same key
//! and the same fields gets the same 201 again (`Idempotent-Replayed:
//! true`) and leases nothing; the same key with other fields is a 409
//! `idempotency_conflict`; the same key while the first is still being
//! created is a 409 `conflict` to retry in a second. Keys are scoped per
//! company and honoured for a retention (24 hours unless configured).
//! Answers that took no number (400, 401, 403, 415, 429, 503) and failures
//! are not stored, so a retry runs again.
//!
//! Not for: IO or storage. The binary holds the [`table::Table`] behind a
//! lock, and storage keeps each key in the same transaction as its
//! verification.

pub mod fingerprint;
pub mod key;
pub mod table;

pub use fingerprint::Fingerprint;
pub use key::{parse_header, IdempotencyKey, KeyError, HEADER, KEY_LEN_MAX};
pub use table::{Answer, Begin, Limits, Space, Table};
