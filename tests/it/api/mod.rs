//! The public API over HTTPS, as a client company uses it: creating a
//! verification ([`create`]) and retrying it safely ([`idempotency`]),
//! reading and cancelling it ([`read_cancel`]),
//! authentication and the routes' rules ([`auth`]), the per-key rate limit
//! and the temporary block ([`rate_limit`]), a key's last use
//! ([`key_last_use`]), the number pools and dedicated
//! numbers ([`pools`]), expiry at the TTL ([`ttl`]), the OpenAPI schema
//! ([`schema`]) and the explorer in a browser ([`explorer`]), and the
//! plain-HTTP redirect listener ([`redirect`]).
//!
//! Not for: the HTTP layer's limits and hostile clients
//! (`resilience::hostile::http`), webhooks (`webhooks`), or the dashboard's
//! pages (`dashboard`).

mod auth;
mod create;
mod explorer;
mod idempotency;
mod key_last_use;
mod pools;
mod rate_limit;
mod read_cancel;
mod redirect;
mod schema;
mod ttl;
