//! The dashboard over HTTPS, as a company's user meets it: signing in and
//! the session cookie and CSRF checks ([`auth`]), sessions against the API
//! and the login limit ([`sessions`]), the keys page ([`keys`]), the
//! verifications page ([`verifications`]), the webhooks page ([`webhooks`]),
//! and all of it in a real browser ([`browser`]).
//!
//! Not for: the operator CLI (`ops`), or the public API (`api`).

mod auth;
mod browser;
mod keys;
mod sessions;
mod verifications;
mod webhooks;
