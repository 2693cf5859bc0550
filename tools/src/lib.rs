//! The library behind the bundled tools (`tools/src/bin/`).
//!
//! - [`signature`]: verifying `X-Service-Signature` (Stripe's scheme), shared
//!   by the webhook receiver and the load generator.
//! - [`webhook_receiver`]: a loopback HTTP/1.1 receiver of webhooks that
//!   verifies each one and hands it to a callback.
//! - [`crash`]: the crash harness (`dialproof-crash-loop`): SIGKILLs under
//!   mixed load and the invariants checked after each restart.
//! - [`load`]: the HTTPS load generator (`dialproof-load`).
//! - [`sip_caller`]: a small UDP INVITE/ACK client that places calls the way
//!   a provider's gateway would (used by the load generator).
//!
//! Not for: anything the service itself runs. These are clients of the
//! service and depend on it only through its wire protocols (the engine is
//! used for SIP message parsing alone).
#![forbid(unsafe_code)]

pub mod crash;
pub mod load;
pub mod signature;
pub mod sip_caller;
pub mod webhook_receiver;
