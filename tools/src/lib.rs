//! The library behind the bundled tools (`tools/src/bin/`).
//!
//! - [`crash`]: the crash harness (`dialproof-crash-loop`): SIGKILLs under
//!   mixed load and the invariants checked after each restart.
//! - [`load`]: the HTTPS load generator (`dialproof-load`).
//! - [`sip_caller`]: a small UDP INVITE/ACK client that places calls the way
//!   a provider's gateway would (used by the load generator).
//!
//! What they share with the tests (starting the service and reading its
//! READY line, the HTTP/1.1 client, the webhook receiver and its signature
//! check) is the kit, `dialproof_kit` (`tools/kit`).
//!
//! Not for: anything the service itself runs. These are clients of the
//! service and depend on it only through its wire protocols (the engine is
//! used for SIP message parsing alone).
#![forbid(unsafe_code)]

pub mod crash;
pub mod load;
pub mod sip_caller;
