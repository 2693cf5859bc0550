//! The runtime's own view of the running service: every shared handle, in
//! one place, and the narrow context each part is given.
//!
//! Only the runtime (start, recovery, the commit consumer, the expiry
//! thread, the control loop) holds an [`App`]. The parts get a context of
//! their own (`crate::site::Site` with the API's and the dashboard's,
//! `crate::sip::Sip`, `crate::webhooks::Webhooks`, `crate::ops::Ops`) with
//! the handles they use and nothing more, built here from the same shared
//! values.
//!
//! Not for: HTTP (see `crate::site`) or deciding anything (the engine does).
//! What a commit means (a number released, a webhook woken) is done by the
//! one commit consumer (`super::commits`).

use crate::shared::admin::AdminConn;
use crate::shared::clock::Clock;
use crate::shared::config::LiveConfig;
use crate::shared::expiries::Expiries;
use crate::shared::health::Readiness;
use crate::shared::held_rows::HeldRows;
use crate::shared::idempotency::IdempotencyKeys;
use crate::shared::key_cache::KeyCache;
use crate::shared::key_uses::KeyUses;
use crate::shared::leases::Leases;
use crate::shared::metrics::Metrics;
use crate::shared::offload::Offload;
use crate::shared::rate_limiters::RateLimiters;
use crate::shared::resolve::Resolver;
use crate::sip::state::LineStates;
use crate::sip::SipStats;
use dialproof_engine::time::UnixMillis;
use dialproof_storage::{CommitProgress, Store};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub struct App {
    pub store: Store,
    pub leases: Arc<Leases>,
    pub keys: Arc<KeyCache>,
    pub limiters: Arc<RateLimiters>,
    /// Keys' last uses waiting for the control loop's write.
    pub key_uses: Arc<KeyUses>,
    pub resolver: Resolver,
    /// Threads for CPU-heavy work (password hashing) and the operator
    /// connection's changes.
    pub offload: Offload,
    /// The one operator connection, opened at start (the dashboard's
    /// changes).
    pub admin: AdminConn,
    /// Every pending verification's expiry (see `crate::shared::expiries`).
    pub expiries: Expiries,
    /// The one clock decisions read (see `crate::shared::clock`).
    pub clock: Clock,
    pub metrics: Arc<Metrics>,
    pub config: Arc<LiveConfig>,
    pub stop: Arc<AtomicBool>,
    /// Wakes the webhook driver when an outbox row commits.
    pub webhook_waker: crate::webhooks::waker::Waker,
    /// Each SIP line's up/down state and resolved settings.
    pub sip_lines: Arc<LineStates>,
    pub sip_stats: Arc<SipStats>,
    pub readiness: Arc<Readiness>,
    /// Recently created verifications' rendered rows (GET by id).
    pub held: Arc<HeldRows>,
    /// How far the commit consumer has got.
    pub commits: Arc<CommitProgress>,
    /// Creates' idempotency keys (recorded by the commit consumer, expired
    /// and purged by the control loop).
    pub idempotency: Arc<IdempotencyKeys>,
    /// Every number's health and the quarantines (see
    /// `crate::shared::number_health`).
    pub health: Arc<crate::shared::number_health::NumberHealth>,
    /// Set when this node may no longer act as the primary (`dialproof ha`).
    pub fence: Arc<crate::shared::fence::Fence>,
}

impl App {
    /// Now, on the service's one clock.
    pub fn now(&self) -> UnixMillis {
        self.clock.now()
    }

    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// The site's handles: the public API's and the dashboard's.
    pub fn site(&self) -> crate::site::Site {
        crate::site::Site {
            api: self.api(),
            dashboard: self.dashboard(),
        }
    }

    fn api(&self) -> crate::api::Api {
        crate::api::Api {
            store: self.store.clone(),
            leases: self.leases.clone(),
            keys: self.keys.clone(),
            limiters: self.limiters.clone(),
            key_uses: self.key_uses.clone(),
            resolver: self.resolver.clone(),
            clock: self.clock.clone(),
            metrics: self.metrics.clone(),
            held: self.held.clone(),
            commits: self.commits.clone(),
            idempotency: self.idempotency.clone(),
            fence: self.fence.clone(),
            test_regions: crate::shared::config::test_regions(&self.config.read()),
        }
    }

    fn dashboard(&self) -> crate::dashboard::Dashboard {
        crate::dashboard::Dashboard {
            store: self.store.clone(),
            keys: self.keys.clone(),
            limiters: self.limiters.clone(),
            clock: self.clock.clone(),
            offload: self.offload.clone(),
            admin: self.admin.clone(),
        }
    }

    /// The SIP side's handles.
    pub fn sip(&self) -> crate::sip::Sip {
        crate::sip::Sip {
            store: self.store.clone(),
            leases: self.leases.clone(),
            config: self.config.clone(),
            lines: self.sip_lines.clone(),
            stats: self.sip_stats.clone(),
            clock: self.clock.clone(),
            stop: self.stop.clone(),
            health: self.health.clone(),
            fence: self.fence.clone(),
        }
    }

    /// The webhook pipeline's handles.
    pub fn webhooks(&self) -> crate::webhooks::Webhooks {
        crate::webhooks::Webhooks {
            store: self.store.clone(),
            resolver: self.resolver.clone(),
            config: self.config.clone(),
            metrics: self.metrics.clone(),
            clock: self.clock.clone(),
            stop: self.stop.clone(),
            fence: self.fence.clone(),
        }
    }

    /// The operators' listener's handles.
    pub fn ops(&self) -> crate::ops::Ops {
        crate::ops::Ops {
            store: self.store.clone(),
            leases: self.leases.clone(),
            config: self.config.clone(),
            expiries: self.expiries.clone(),
            metrics: self.metrics.clone(),
            sip_lines: self.sip_lines.clone(),
            sip_stats: self.sip_stats.clone(),
            readiness: self.readiness.clone(),
            clock: self.clock.clone(),
            stop: self.stop.clone(),
            idempotency: self.idempotency.clone(),
            held: self.held.clone(),
            health: self.health.clone(),
            fence: self.fence.clone(),
        }
    }
}
