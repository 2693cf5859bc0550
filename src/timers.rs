//! The expiry thread: expires pending verifications when their TTL runs out.
//!
//! New leases arrive on a bounded channel; the thread keeps them in the
//! engine's [`ExpiryQueue`] and sleeps until the next one is due or a new one
//! arrives. A due entry becomes an `Expire` transition on the writer; the
//! state machine ignores entries whose verification already ended, so a
//! completion or cancel never has to find and remove its timer.
//!
//! Not for: the decision itself (the writer applies the state machine).

use crate::app::App;
use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender};
use dialproof_engine::expiry::ExpiryQueue;
use dialproof_engine::time::UnixMillis;
use dialproof_engine::verification::Event;
use dialproof_storage::WriteOp;
use std::sync::Arc;
use std::time::Duration;

/// Expiries queued to the timer thread but not yet taken in.
pub const EXPIRY_CHANNEL_MAX: usize = 65_536;
/// Expiries handed to the writer per wake-up.
pub const EXPIRY_BATCH_MAX: usize = 4096;
/// The longest the thread sleeps without looking (also its stop latency).
const IDLE_WAKE: Duration = Duration::from_millis(500);
/// Delay before re-queueing an expiry the writer could not take.
const RETRY_DELAY_MS: i64 = 1000;

/// A pending verification's expiry moment and id.
pub type Expiry = (UnixMillis, String);

pub fn channel() -> (Sender<Expiry>, Receiver<Expiry>) {
    bounded(EXPIRY_CHANNEL_MAX)
}

pub fn spawn(app: Arc<App>, rx: Receiver<Expiry>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("expiry".into())
        .spawn(move || run(app, rx))
        .map(|_| ())
}

fn run(app: Arc<App>, rx: Receiver<Expiry>) {
    let mut queue: ExpiryQueue<String> = ExpiryQueue::new();
    loop {
        if app.stopping() {
            return;
        }
        let now = app.now();
        let wait = queue
            .next_due()
            .map(|at| Duration::from_millis(u64::try_from((at.0 - now.0).max(0)).unwrap_or(0)))
            .unwrap_or(IDLE_WAKE)
            .min(IDLE_WAKE);
        match rx.recv_timeout(wait) {
            Ok((at, id)) => {
                queue.push(at, id);
                for (at, id) in rx.try_iter().take(EXPIRY_CHANNEL_MAX) {
                    queue.push(at, id);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        let now = app.now();
        for (_, id) in queue.pop_due(now, EXPIRY_BATCH_MAX) {
            let app2 = app.clone();
            let op = WriteOp::Transition {
                id: id.clone(),
                company_id: None,
                event: Event::Expire { at: now },
                reply: Some(Box::new(move |r| app2.after_transition(r))),
            };
            if let Err(e) = app.store.submit(op) {
                // The writer is saturated or stopping: try again shortly
                // rather than lose the expiry until the next restart.
                tracing::warn!(error = %e, verification_id = %id, "expiry not queued; retrying");
                queue.push(now.plus_millis(RETRY_DELAY_MS), id);
            }
        }
    }
}
