//! The operators' listener: plain HTTP on its own address (`[server]
//! ops_listen`, off unless configured; keep it on loopback or a private
//! network), serving
//! - `GET /metrics`: Prometheus text exposition (`exposition`);
//! - `GET /healthz`: 200 while the process runs;
//! - `GET /readyz`: 200 when recovery is done, the listeners are bound and
//!   storage takes writes; else 503 naming the check that failed.
//!
//! It uses the service's own hardened HTTP/1.1 layer (`crate::http`), not
//! may_minihttp: that one (0.1.11, when this was written) panics on
//! `Content-Length: abc` and has no header-size limit, and this port is
//! reachable by whatever can reach the host's internal network.
//!
//! Not for: the public API (`crate::api`) or anything that changes state.

mod exposition;

use crate::http::{Request, Response};
use crate::shared::clock::Clock;
use crate::shared::config::LiveConfig;
use crate::shared::expiries::Expiries;
use crate::shared::health::Readiness;
use crate::shared::leases::Leases;
use crate::shared::metrics::Metrics;
use crate::sip::state::LineStates;
use crate::sip::SipStats;
use dialproof_engine::time::UnixMillis;
use dialproof_storage::Store;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// What the operators' listener reads (it changes nothing): every counter
/// and gauge source, readiness and the stop flag.
pub struct Ops {
    pub store: Store,
    pub leases: Arc<Leases>,
    pub config: Arc<LiveConfig>,
    pub expiries: Expiries,
    pub metrics: Arc<Metrics>,
    pub sip_lines: Arc<LineStates>,
    pub sip_stats: Arc<SipStats>,
    pub readiness: Arc<Readiness>,
    pub clock: Clock,
    pub stop: Arc<AtomicBool>,
    /// Creates' idempotency keys (what memory holds, for the metrics).
    pub idempotency: Arc<crate::shared::idempotency::IdempotencyKeys>,
    /// Pending verifications held for GETs (how many, for the metrics).
    pub held: Arc<crate::shared::held_rows::HeldRows>,
    /// Quarantined numbers and stray calls, for the metrics.
    pub health: Arc<crate::shared::number_health::NumberHealth>,
    /// Set once this node may no longer act as the primary.
    pub fence: Arc<crate::shared::fence::Fence>,
}

impl Ops {
    /// Now, on the service's one clock.
    pub fn now(&self) -> UnixMillis {
        self.clock.now()
    }

    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }
}

/// One request on the ops listener.
pub fn handle(ctx: &Ops, req: &Request) -> Response {
    if req.method() != "GET" && req.method() != "HEAD" {
        return text(405, "method not allowed\n");
    }
    match req.path() {
        "/metrics" => Response::new(200)
            .with_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            .with_body(exposition::render(ctx).into_bytes()),
        "/healthz" => text(200, "ok\n"),
        "/readyz" => match not_ready(ctx) {
            None => text(200, "ready\n"),
            Some(why) => text(503, &format!("not ready: {why}\n")),
        },
        _ => text(404, "not found\n"),
    }
}

/// The first readiness check that fails, in the order a start passes them.
fn not_ready(ctx: &Ops) -> Option<&'static str> {
    if !ctx.readiness.recovered.load(Ordering::Acquire) {
        return Some("recovery not done");
    }
    if !ctx.readiness.listening.load(Ordering::Acquire) {
        return Some("listeners not bound");
    }
    if ctx.stopping() {
        return Some("stopping");
    }
    if ctx.fence.is_fenced() {
        return Some("fenced: no longer the primary");
    }
    if ctx.store.stats().last_batch_failed {
        return Some("storage is failing writes");
    }
    None
}

fn text(status: u16, body: &str) -> Response {
    Response::new(status)
        .with_header("Content-Type", "text/plain; charset=utf-8")
        .with_body(body.as_bytes().to_vec())
}
