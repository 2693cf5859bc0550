//! The handle that wakes the webhook driver when an outbox row commits.
//!
//! A wake carries the row as the writer committed it (the transition's
//! event has it already), so the driver sends it without reading it back.
//! It is a hint, not the work: the row is committed and pending, and the
//! driver's database poll finds it anyway. So the queue is bounded and a
//! wake lost to a full queue only delays that delivery until the next poll
//! (never loses it).
//!
//! Not for: deciding what to send (the driver does, with its scheduler).

use crossbeam_channel::{bounded, Receiver, Sender, TrySendError};
use dialproof_storage::DeliveryRow;

/// Commit wakes queued to the driver. Each holds its row (well under 1 KB
/// with its payload), so a driver that stalls while calls complete holds at
/// most a few megabytes of them; past that the poll, every half second,
/// picks the rows up.
pub const WAKE_QUEUE_MAX: usize = 8_192;

/// A wake: the committed outbox row.
pub type Wake = Box<DeliveryRow>;

/// The handle `Webhooks` holds to wake the driver.
pub struct Waker {
    tx: Sender<Wake>,
}

impl Waker {
    /// A transition committed with outbox row `delivery`. Never blocks (the
    /// commit consumer must keep up with the writer).
    pub fn committed(&self, delivery: Wake) {
        match self.tx.try_send(delivery) {
            Ok(()) => {}
            Err(TrySendError::Full(delivery)) => {
                tracing::warn!(
                    delivery_id = delivery.id,
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
pub fn channel() -> (Waker, Receiver<Wake>) {
    let (tx, rx) = bounded(WAKE_QUEUE_MAX);
    (Waker { tx }, rx)
}
