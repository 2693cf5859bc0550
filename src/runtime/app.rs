//! The running service's shared state, and the glue between its parts.
//!
//! One [`App`] is shared by every coroutine and thread: the store handle, the
//! lease table, the key cache, the per-key windows, the resolver and the
//! expiry schedule. Its methods are the seams where a decision
//! turns into effects, e.g. [`App::after_transition`] releases a lease only
//! once the transition that ended it is committed.
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

pub struct App {
    pub store: Store,
    pub leases: Leases,
    pub keys: KeyCache,
    pub limiters: RateLimiters,
    pub resolver: Resolver,
    /// Threads for CPU-heavy work (password hashing).
    pub offload: crate::runtime::offload::Offload,
    /// Every pending verification's expiry (see `crate::runtime::expiry`).
    pub expiries: crate::runtime::expiry::Expiries,
    pub metrics: Metrics,
    pub config: RwLock<Arc<Config>>,
    pub stop: Arc<AtomicBool>,
    /// Wakes the webhook driver when an outbox row commits.
    pub webhooks: crate::webhooks::Waker,
    /// Each SIP line's up/down state and resolved settings.
    pub sip_lines: crate::sip::LineStates,
    pub sip_stats: crate::sip::SipStats,
}

impl App {
    /// The wall clock. The only place the service reads it for decisions.
    pub fn now(&self) -> UnixMillis {
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        UnixMillis(i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    }

    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }
}
