//! SIP on the service's side: the UDP socket, the registration and ping
//! clients of the lines, and what an inbound call does to a verification.
//!
//! Files in the order a call travels: `driver` (the socket, the SIP thread
//! and the engine's state machines), `calls` (from an INVITE to a writer
//! transition and a final response), `lines` (each line's resolved SIP
//! settings, its up/down state and what going down does).
//!
//! The protocol itself lives in `dialproof_engine::sip` (sans-IO); this
//! module only moves bytes, reads the clock and turns decisions into
//! effects. Not for: parsing SIP, timers' arithmetic, or deciding a
//! verification's state (the engine's state machine does, in the writer).

mod calls;
mod driver;
mod inbox;
mod line_info;
mod lines;
mod start;
pub mod state;

pub use driver::SipHandle;
pub use start::spawn;
pub use state::SipStats;

use crate::shared::clock::Clock;
use crate::shared::config::LiveConfig;
use crate::shared::leases::Leases;
use dialproof_engine::time::UnixMillis;
use dialproof_storage::Store;
use state::LineStates;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What the SIP side may touch, handed over at start-up: the store (call
/// transitions, a line's failed verifications), the lease table, the live
/// configuration (lines), the lines' up/down state and the SIP counters,
/// the clock and the stop flag.
pub struct Sip {
    pub store: Store,
    pub leases: Arc<Leases>,
    pub config: Arc<LiveConfig>,
    /// Each line's up/down state and resolved settings.
    pub lines: Arc<LineStates>,
    pub stats: Arc<SipStats>,
    pub clock: Clock,
    pub stop: Arc<AtomicBool>,
    /// Told of every INVITE to one of our numbers (it proves the number
    /// rings).
    pub health: Arc<crate::shared::number_health::NumberHealth>,
    /// Set once this node may no longer act as the primary: INVITEs get a
    /// 503 and the registered lines un-register.
    pub fence: Arc<crate::shared::fence::Fence>,
}

impl Sip {
    /// Now, on the service's one clock.
    pub fn now(&self) -> UnixMillis {
        self.clock.now()
    }

    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }
}

/// After the control loop swapped in a rebuilt lease table and the new
/// configuration: re-resolves the lines and re-applies their up/down state
/// (a change that raced the rebuild is applied again here). Registration
/// and ping clients keep the settings they started with until a restart.
pub fn on_table_rebuilt(ctx: &Sip) {
    let config = ctx.config.read().clone();
    match line_info::resolve_lines(&config) {
        Ok(resolved) => ctx.lines.set_lines(resolved),
        Err(e) => tracing::error!(error = %e, "sip lines not re-resolved; keeping the old ones"),
    }
    ctx.lines.reapply(&ctx.leases, &config);
}
