//! The kit the tests (`tests/`) and the bundled tools (`tools/`) share to
//! drive Dialproof from outside, through the interfaces a user has:
//!
//! - [`process`]: spawning the built binary (or any tool that announces
//!   itself the same way), collecting its output into a [`process::Log`],
//!   waiting for its `READY` line, and stopping it (SIGTERM, SIGKILL);
//! - [`ready`]: the `READY` line itself (`READY https=... sip=...`, or
//!   `READY http://...` from the webhook receiver);
//! - [`cli`]: the operator commands (`dialproof --config F --json ...`);
//! - [`http`]: HTTP/1.1 request bytes and response parsing, for the
//!   blocking client here and the load generator's event loop alike;
//! - [`client`]: a blocking HTTP/1.1 connection over plain TCP or TLS;
//! - [`tls`]: rustls client settings (trust one certificate, or any) and a
//!   blocking TLS connect;
//! - [`signature`]: verifying `X-Service-Signature`, written from the scheme
//!   and not from the service's signer;
//! - [`webhook`]: a loopback webhook receiver that checks signatures,
//!   answers from a script, records what came and counts what is open.
//!
//! Not for: anything the service runs. The kit depends on no crate of the
//! service (only on the wire protocols), so a bug the service and the kit
//! shared could not hide; and it sends to loopback unless its caller says
//! otherwise. Test fixtures (configurations, DRF texts, assertions) live
//! with the tests, load shaping with the load generator.
#![forbid(unsafe_code)]

pub mod cli;
pub mod client;
pub mod http;
pub mod process;
pub mod ready;
pub mod signature;
pub mod tls;
pub mod webhook;
