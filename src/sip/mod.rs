//! SIP on the service's side: the UDP socket, the registration and ping
//! clients of the lines, and what an inbound call does to a verification.
//!
//! Files in the order a call travels: `driver` (the socket, the coroutines
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
mod lines;

pub use driver::spawn;
pub use lines::{validate_line, LineStates};

use std::sync::atomic::{AtomicU64, Ordering};

/// SIP counters, logged at shutdown and readable by tests in the logs.
#[derive(Default)]
pub struct SipStats {
    pub invites: AtomicU64,
    pub completed: AtomicU64,
    pub rejected_untrusted_source: AtomicU64,
    pub rejected_unknown_number: AtomicU64,
    pub rejected_no_lease: AtomicU64,
    pub rejected_withheld: AtomicU64,
    pub cancelled: AtomicU64,
    pub malformed: AtomicU64,
    pub overloaded: AtomicU64,
}

impl SipStats {
    pub fn inc(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    pub fn render(&self) -> String {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        format!(
            "sip_invites={} sip_completed={} sip_rejected_untrusted_source={} \
             sip_rejected_unknown_number={} sip_rejected_no_lease={} sip_rejected_withheld={} \
             sip_cancelled={} sip_malformed={} sip_overloaded={}",
            g(&self.invites),
            g(&self.completed),
            g(&self.rejected_untrusted_source),
            g(&self.rejected_unknown_number),
            g(&self.rejected_no_lease),
            g(&self.rejected_withheld),
            g(&self.cancelled),
            g(&self.malformed),
            g(&self.overloaded),
        )
    }
}

/// After the control loop swapped in a rebuilt lease table and the new
/// configuration: re-resolves the lines and re-applies their up/down state
/// (a change that raced the rebuild is applied again here). Registration
/// and ping clients keep the settings they started with until a restart.
pub fn on_table_rebuilt(app: &crate::runtime::app::App) {
    match lines::resolve_lines(&app.config.read()) {
        Ok(resolved) => app.sip_lines.set_lines(resolved),
        Err(e) => tracing::error!(error = %e, "sip lines not re-resolved; keeping the old ones"),
    }
    app.sip_lines.reapply(app);
}
