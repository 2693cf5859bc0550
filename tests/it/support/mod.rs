//! The harness every test module uses, on top of the shared kit
//! (`dialproof_kit`: spawning the binary and reading its READY line, the
//! HTTP/1.1 and HTTPS client, the webhook receiver):
//!
//! - [`server`]: the real `dialproof` binary on ephemeral ports in a
//!   temporary directory (or, with [`virtual_time`], the service in this
//!   process on a clock the test moves);
//! - [`requests`]: HTTPS and plain HTTP to it, byte for byte, and the API's
//!   three operations;
//! - [`operator`]: the operator CLI against the server's configuration;
//! - [`ops`]: the server with its operators' listener, and `/metrics`;
//! - [`fixtures`] and [`checks`]: phone numbers, number ranges, the DRF
//!   texts, and the shape of a Verification;
//! - [`sip`] (sipp), [`kamailio`], [`webhooks`], [`dashboard`],
//!   [`browser`] (chromium), [`netns`] (a test in a network namespace of its
//!   own) and [`tools`] (the bundled tools' binaries, the Python venv) for
//!   the modules that need them.
//!
//! `use crate::support::*;` brings the core (the first six); the others
//! are named where used.
//!
//! Not for: assertions about a feature (those live with its tests).

pub mod browser;
pub mod checks;
pub mod dashboard;
pub mod fixtures;
pub mod kamailio;
pub mod netns;
pub mod operator;
pub mod ops;
pub mod requests;
pub mod server;
pub mod sip;
pub mod tools;
pub mod virtual_time;
pub mod webhooks;

pub use checks::*;
pub use fixtures::*;
pub use operator::*;
pub use ops::*;
pub use requests::*;
pub use server::*;
