//! What the rest of the service shares with SIP: each line's up/down state
//! and resolved settings ([`LineStates`], so that a lease table rebuilt
//! after a configuration reload starts from the lines' real state instead
//! of "every line up"), and the SIP counters ([`SipStats`]).
//!
//! Not for: changing a line's state and what that does (`super::lines`).

use super::line_info::LineInfo;
use crate::shared::config::Config;
use crate::shared::leases::Leases;
use dialproof_engine::lease::LineId;
use dialproof_engine::time::UnixMillis;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Each line's up/down state by name, plus the resolved lines, shared by the
/// driver, the call path and the control loop.
#[derive(Default)]
pub struct LineStates {
    /// Taken around every change and every re-application to a rebuilt
    /// table, so a change racing a rebuild is never lost.
    pub(super) up: Mutex<HashMap<String, bool>>,
    /// When each line's state last changed (or was first set), for the
    /// operators' metrics.
    pub(super) changed_at: Mutex<HashMap<String, UnixMillis>>,
    lines: parking_lot::RwLock<Arc<Vec<LineInfo>>>,
}

impl LineStates {
    /// The state of every line whose state is known (for `build_table`).
    pub fn snapshot(&self) -> HashMap<String, bool> {
        self.up.lock().clone()
    }

    /// When each line's state last changed, by name.
    pub fn changed_at(&self) -> HashMap<String, UnixMillis> {
        self.changed_at.lock().clone()
    }

    pub fn lines(&self) -> Arc<Vec<LineInfo>> {
        self.lines.read().clone()
    }

    /// Replaces the resolved lines (start and reload).
    pub fn set_lines(&self, lines: Vec<LineInfo>) {
        *self.lines.write() = Arc::new(lines);
    }

    /// After the lease table was rebuilt: applies every known state to it.
    pub fn reapply(&self, leases: &Leases, config: &Config) {
        let up = self.up.lock();
        leases.with_table(|table| {
            for (name, state) in up.iter() {
                if let Some(i) = config.lines.iter().position(|l| &l.name == name) {
                    if let Ok(id) = LineId::try_from(i) {
                        table.set_line_up(id, *state);
                    }
                }
            }
        });
    }
}

/// SIP counters, logged at shutdown and readable by tests in the logs.
#[derive(Default)]
pub struct SipStats {
    pub invites: AtomicU64,
    pub completed: AtomicU64,
    pub rejected_untrusted_source: AtomicU64,
    pub rejected_unknown_number: AtomicU64,
    pub rejected_no_lease: AtomicU64,
    pub rejected_withheld: AtomicU64,
    /// Calls whose caller ID trust was below the line's minimum.
    pub rejected_untrusted_caller_id: AtomicU64,
    /// INVITEs answered 503 by a fenced node.
    pub rejected_fenced: AtomicU64,
    pub cancelled: AtomicU64,
    pub malformed: AtomicU64,
    pub overloaded: AtomicU64,
    /// INVITEs dropped unhandled because they waited in the inbound queue
    /// longer than the engine's `overload::INVITE_WAIT_MAX`.
    pub stale: AtomicU64,
    /// Gauge: INVITE server transactions held now (answered ones wait for
    /// their ACK and then T4).
    pub invite_transactions: AtomicU64,
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
             sip_rejected_untrusted_caller_id={} sip_cancelled={} sip_malformed={} sip_overloaded={} sip_stale={}",
            g(&self.invites),
            g(&self.completed),
            g(&self.rejected_untrusted_source),
            g(&self.rejected_unknown_number),
            g(&self.rejected_no_lease),
            g(&self.rejected_withheld),
            g(&self.rejected_untrusted_caller_id),
            g(&self.cancelled),
            g(&self.malformed),
            g(&self.overloaded),
            g(&self.stale),
        )
    }
}
