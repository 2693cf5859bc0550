//! A small HTTP/1.1 server layer with hard limits, shared by the HTTPS API
//! listener and the plain-HTTP redirect listener.
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
mod request;
mod response;

pub use conn::{serve, Limits, TimedStream as TimedStreamImpl};
pub use request::Request;
pub use response::Response;
