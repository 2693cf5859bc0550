//! The heartbeat under replication: every [`HEARTBEAT_EVERY`] the writer
//! moves `meta.heartbeat_at` to now, so a replica restored without recent
//! traffic still knows how recent it is (the start of a promoted standby's
//! lost window; see storage's `replica`). The newest committed one is a
//! gauge on the ops listener.
//!
//! Not for: liveness of the service itself (`/healthz`) or anything that
//! must happen: a heartbeat refused by a full queue is simply the next
//! second's.

use crate::shared::clock::Clock;
use crate::shared::metrics::ReplicationMetrics;
use crate::shared::wait::{Committing, Outcome};
use dialproof_storage::{Store, WriteOp};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(1);

/// Starts the heartbeat thread; it ends when `stop` is set. Each committed
/// heartbeat's moment goes to `metrics`.
pub fn spawn(
    store: Store,
    clock: Clock,
    stop: Arc<AtomicBool>,
    metrics: Arc<ReplicationMetrics>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("dialproof-heartbeat".into())
        .spawn(move || {
            while !stop.load(Ordering::Acquire) {
                let at = clock.now();
                let committed = store.commit(HEARTBEAT_EVERY * 5, |reply| WriteOp::Heartbeat {
                    at,
                    reply,
                });
                match committed {
                    Outcome::Done(()) => {
                        let ms = u64::try_from(at.0).unwrap_or(0);
                        metrics
                            .heartbeat_committed_ms
                            .fetch_max(ms, Ordering::Relaxed);
                    }
                    // The replication lag metric shows the gap; the next
                    // heartbeat is a second away.
                    other => tracing::debug!(error = %other, "heartbeat not committed"),
                }
                std::thread::sleep(HEARTBEAT_EVERY);
            }
        })
}
