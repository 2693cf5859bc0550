//! The bundled tools (binaries of the `dialproof-tools` package) against
//! the real service: the load generator and the webhook receiver
//! ([`load`]), and the provider simulator ([`sim`]).
//!
//! Not for: the crash harness (`resilience::crash::harness`), or the
//! tools' command lines alone (`tools/tests`).

mod load;
mod sim;
