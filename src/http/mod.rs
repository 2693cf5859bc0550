//! The listeners (HTTPS with rustls, plain HTTP for the redirect) and the
//! small HTTP/1.1 layer with hard limits that both use.
//!
//! may_minihttp has no TLS hook and trusts its peer too much (DESIGN.md), so
//! this layer reads requests itself with `httparse`: header bytes, header
//! count, body size and read time are all bounded; a body is always drained
//! before the next request on the connection; `Connection: close` and
//! HTTP/1.0 are honoured. It knows nothing about the API: a handler gets a
//! parsed [`Request`] and returns a [`Response`].
//!
//! Not for: routing, authentication or JSON (see `crate::api`).

mod conn;
pub mod listener;
pub mod redirect;
mod request;
mod response;
pub mod tls;
pub mod watchdog;

pub use conn::{serve, Limits, TimedStream as TimedStreamImpl};
pub use request::Request;
pub use response::Response;
