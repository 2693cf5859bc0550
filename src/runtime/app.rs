//! The running service's shared state, and the glue between its parts.
//!
//! One [`App`] is shared by every coroutine and thread: the store handle, the
//! lease table, the key cache, the per-key windows, the resolver and the
//! expiry schedule, the clock. What a commit means (a number released, a
//! webhook woken) is not done here but by the one commit consumer
//! (`super::commits`).
//!
//! Not for: HTTP (see `crate::api`) or deciding anything (the engine does).

use crate::api::key_cache::KeyCache;
use crate::api::rate_limiters::RateLimiters;
use crate::runtime::config::Config;
use crate::runtime::leases::Leases;
use crate::runtime::metrics::Metrics;
use crate::runtime::resolve::Resolver;
use dialproof_engine::time::UnixMillis;
use dialproof_storage::Store;
use parking_lot::RwLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Readiness beyond storage, set by the start sequence (`/readyz`).
#[derive(Default)]
pub struct Readiness {
    pub recovered: AtomicBool,
    pub listening: AtomicBool,
}

pub struct App {
    pub store: Store,
    pub leases: Leases,
    pub keys: KeyCache,
    pub limiters: RateLimiters,
    pub resolver: Resolver,
    /// Threads for CPU-heavy work (password hashing).
    pub offload: crate::runtime::offload::Offload,
    /// Every pending verification's expiry (see `super::expiries`).
    pub expiries: super::expiries::Expiries,
    /// The one clock decisions read (see `super::clock`).
    pub clock: super::clock::Clock,
    pub metrics: Metrics,
    pub config: RwLock<Arc<Config>>,
    pub stop: Arc<AtomicBool>,
    /// Wakes the webhook driver when an outbox row commits.
    pub webhooks: crate::webhooks::waker::Waker,
    /// Each SIP line's up/down state and resolved settings.
    pub sip_lines: crate::sip::state::LineStates,
    pub sip_stats: crate::sip::state::SipStats,
    pub readiness: Readiness,
}

impl App {
    /// Now, on the service's one clock.
    pub fn now(&self) -> UnixMillis {
        self.clock.now()
    }

    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }
}
