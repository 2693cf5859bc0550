//! The listeners (HTTPS with rustls, plain HTTP for the redirect) and the
//! small HTTP/1.1 layer with hard limits that both use.
//!
//! may_minihttp (0.1.11, when this layer was written) has no TLS hook and
//! trusts its peer too much: it reads an unread body as the next request,
//! panics on `Content-Length: abc`, has no header-size limit and ignores
//! `Connection: close`. So this layer reads requests itself with
//! `httparse`: header bytes, header count, body size and read time are all
//! bounded; a body is always drained before the next request on the
//! connection; `Connection: close` and HTTP/1.0 are honoured. It knows
//! nothing about the site: a handler gets a parsed [`Request`] and returns a
//! [`Response`]. It imports nothing else of this crate but the coroutine
//! spawner (`crate::coroutine`).
//!
//! Not for: routing (`crate::site`), authentication or the API's bodies
//! (`crate::api`).

mod conn;
pub mod listener;
pub mod redirect;
mod request;
mod response;
pub mod tls;
pub mod watchdog;

pub use conn::{serve, Limits, TimedStream as TimedStreamImpl};
pub use request::Request;
pub use response::{ErrorDetail, Response};
