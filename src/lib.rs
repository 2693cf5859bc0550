//! Dialproof: phone-ownership verification by inbound call (the service as
//! a library: `main.rs` is its command line; tests start it in process on
//! a virtual clock through [`runtime::service::start`]).
//!
//! The binary is glue: it reads the configuration, opens storage, starts the
//! listeners and threads, and runs the operator commands. Decisions live in
//! `dialproof-engine`, persistence in `dialproof-storage`.
//!
//! Its folders are the runtime's parts:
//! - `runtime/`: start, recovery, stop, and the threads that are nobody
//!   else's (commit consumer, expiry, control loop); it builds each part's
//!   context and no part imports it;
//! - `shared/`: the handles the runtime hands to the parts (clock,
//!   configuration, lease table, expiry schedule, metrics, resolver, key
//!   cache, request windows, operator connection, thread pool);
//! - `coroutine`: spawning may coroutines (below everything, HTTP included);
//! - `http/`: listeners, TLS, the HTTP/1.1 layer, the port-80 redirect; it
//!   imports no other part;
//! - `site`: the HTTPS router above the API, the explorer and the dashboard;
//! - `api/`: the public API's endpoints and authentication;
//! - `dashboard/`: the dashboard's pages and its login endpoints;
//! - `accounts/`: account and operator rules (keys and labels, webhook
//!   secrets, passwords, sessions, login limits, development URLs), called
//!   by the dashboard and the CLI alike;
//! - `openapi/`: the schema and the explorer;
//! - `ops/`: the operators' listener (metrics, health, readiness);
//! - `sip/`: the SIP socket, lines, calls;
//! - `webhooks/`: the outbox driver and the HTTP senders;
//! - `cli/`: the operator commands.

pub mod accounts;
pub mod api;
pub mod cli;
pub mod coroutine;
pub mod dashboard;
pub mod http;
pub mod openapi;
pub mod ops;
pub mod runtime;
pub mod shared;
pub mod sip;
pub mod site;
pub mod webhooks;
