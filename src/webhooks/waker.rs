//! The handle that wakes the webhook driver when an outbox row commits.
//!
//! A wake is a hint, not the work: the row is committed and pending, and the
//! driver's database poll finds it anyway. So the queue is bounded and a
//! wake lost to a full queue only delays that delivery until the next poll
//! (never loses it).
//!
//! Not for: deciding what to send (the driver does, from the database).

use crossbeam_channel::{bounded, Receiver, Sender, TrySendError};

/// Commit wakes queued to the driver.
pub const WAKE_QUEUE_MAX: usize = 65_536;

/// The handle `Webhooks` holds to wake the driver.
pub struct Waker {
    tx: Sender<i64>,
}

impl Waker {
    /// A transition committed with outbox row `delivery_id`. Never blocks
    /// (the commit consumer must keep up with the writer).
    pub fn committed(&self, delivery_id: i64) {
        match self.tx.try_send(delivery_id) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                tracing::warn!(
                    delivery_id,
                    "webhook wake queue full; the poll will send it"
                );
            }
            // The driver is gone: the service is stopping; the row stays
            // pending and goes out after the restart.
            Err(TrySendError::Disconnected(_)) => {}
        }
    }
}

/// The waker for `Webhooks`, and the receiving end for [`super::spawn`].
pub fn channel() -> (Waker, Receiver<i64>) {
    let (tx, rx) = bounded(WAKE_QUEUE_MAX);
    (Waker { tx }, rx)
}
