//! Counters at every stage of the flow, read by logs now and by the
//! Prometheus endpoint later.
//!
//! Plain relaxed atomics: a counter increment must never cost a lock on the
//! request path. Not for: exposition formats.

use dialproof_engine::verification::Status;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Default)]
pub struct Metrics {
    pub http_requests: AtomicU64,
    pub creates_ok: AtomicU64,
    pub creates_rejected_no_number: AtomicU64,
    pub creates_invalid: AtomicU64,
    pub auth_failures: AtomicU64,
    pub throttled: AtomicU64,
    pub completed: AtomicU64,
    pub expired: AtomicU64,
    pub failed: AtomicU64,
    pub storage_errors: AtomicU64,
}

impl Metrics {
    pub fn inc(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub fn transition(&self, to: Status) {
        match to {
            Status::Completed => Self::inc(&self.completed),
            Status::Expired => Self::inc(&self.expired),
            Status::Failed => Self::inc(&self.failed),
            Status::Pending => {}
        }
    }

    /// `name value` lines, for the shutdown log and the ops listener.
    pub fn render(&self) -> String {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        format!(
            "http_requests {}\ncreates_ok {}\ncreates_rejected_no_number {}\n\
             creates_invalid {}\nauth_failures {}\nthrottled {}\ncompleted {}\n\
             expired {}\nfailed {}\nstorage_errors {}\n",
            get(&self.http_requests),
            get(&self.creates_ok),
            get(&self.creates_rejected_no_number),
            get(&self.creates_invalid),
            get(&self.auth_failures),
            get(&self.throttled),
            get(&self.completed),
            get(&self.expired),
            get(&self.failed),
            get(&self.storage_errors),
        )
    }
}
