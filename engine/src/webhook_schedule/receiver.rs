//! What "one receiver" means for the per-receiver limit.
//!
//! Not for: checking or normalising URLs for sending (`crate::ssrf` and the
//! sender do that); a key only groups deliveries.

use std::sync::Arc;

/// One receiver for the per-receiver limit: scheme, host and port of the
/// webhook URL, so `https://a.example/x` and `https://a.example:443/y` are
/// the same receiver and `http://127.0.0.1:9000` and `:9001` are two.
/// Shared text: the scheduler copies a key into its lanes, its run queue
/// and its in-flight map for every delivery, and a copy is a count.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReceiverKey(Arc<str>);

impl ReceiverKey {
    /// The receiver of `url`. A URL that does not parse (it would fail at
    /// sending anyway) is its own receiver.
    pub fn of_url(url: &str) -> ReceiverKey {
        ReceiverKey(match url::Url::parse(url) {
            Ok(u) => format!(
                "{}://{}:{}",
                u.scheme(),
                u.host_str().unwrap_or(""),
                u.port_or_known_default().unwrap_or(0)
            )
            .into(),
            Err(_) => url.into(),
        })
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}
