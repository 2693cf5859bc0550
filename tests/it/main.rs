//! Dialproof's integration tests: one test binary for the whole service,
//! with a module per feature. Each test drives the built `dialproof` binary
//! (or, for timeouts and expiry, the service in this process on a virtual
//! clock) through the interfaces a user has: HTTPS, SIP over UDP with sipp
//! or Kamailio, a real webhook receiver, the operator CLI, a real browser.
//!
//! - [`api`]: the public API (create, read, cancel, keys, Idempotency-Key,
//!   rate limits, pools, TTL, the schema and the explorer, the redirect
//!   listener);
//! - [`accounts`]: the account rules the CLI and the dashboard share
//!   (labels, secret rotation, development URLs, users, sessions, the
//!   login window);
//! - [`sip`]: inbound calls, CANCEL, registration, a real registrar;
//! - [`webhooks`]: delivery, signatures, retries, limits, the SSRF guard at
//!   delivery, TLS;
//! - [`dashboard`]: sign-in, sessions, keys, verifications, webhooks, the
//!   pages in a browser;
//! - [`ops`]: the operator's side (CLI output, reload, metrics, process,
//!   shutdown, secrets at rest and in logs);
//! - [`tools`]: the bundled tools against the service;
//! - [`standby`]: failover to a standby and the promoted start;
//! - [`ha`]: automatic failover with etcd (election, fence, promotion);
//! - [`testmode`]: test keys, test pools, simulated calls, isolation from
//!   live data, the purge;
//! - [`resilience`]: faults (disk, storage, provider, registrar), hostile
//!   peers (HTTP, SIP, webhook receivers) and crashes (SIGKILL, restarts).
//!
//! A test that pins a promise of the README names the README's section in
//! its doc comment. The harness is [`support`]; what it shares with the
//! bundled tools is the kit, `dialproof_kit` (`tools/kit`). `tests/README.md`
//! describes the strategy and how to run one test.
//!
//! Not for: unit tests (next to the code), the storage and engine crates'
//! own integration tests (`storage/tests`, `engine/tests`), or benchmarks.

mod support;

mod accounts;
mod api;
mod dashboard;
mod ha;
mod ops;
mod resilience;
mod sip;
mod standby;
mod testmode;
mod tools;
mod webhooks;
