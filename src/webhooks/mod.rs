//! Webhook delivery: the driver thread, the sender pool and the SSRF check
//! at delivery time.
//!
//! How a webhook leaves: a transition commits its outbox row (storage, in
//! the same transaction as the state change); the commit consumer wakes
//! the driver with the committed row; the driver queues it to a sender;
//! the sender signs the stored bytes, vets the receiver's addresses,
//! POSTs, and records the attempt with the delivery's next state in one
//! write. A crash at any point leaves the row pending and due, and the
//! driver's first poll after the restart sends it: at least once, never
//! lost, and never both `completed` and `expired` (one row per
//! verification).
//!
//! Limits: [`SEND_QUEUE_MAX`] queued attempts, `webhooks.sender_threads`
//! senders (default 32),
//! `dialproof_engine::webhook_schedule::PER_RECEIVER_IN_FLIGHT_MAX` (8)
//! attempts per receiver and `driver::IN_FLIGHT_MAX` in all, response
//! bodies read up to `dialproof_storage::RESPONSE_BODY_LOG_BYTES_MAX`, 10 s
//! per attempt. The driver and the senders run below the rest of the
//! service in CPU priority (`crate::shared::priority`): a webhook can wait
//! a few milliseconds for a call's answer, not the other way round.
//!
//! Not for: deciding anything: building payloads or signatures
//! (`dialproof_engine::webhook`), the retry schedule
//! (`dialproof_engine::webhook_retry`), what is sent next and when
//! (`dialproof_engine::webhook_schedule`), which URLs are development URLs
//! (`dialproof_engine::dev_urls`); nor the delivery log (the operator CLI
//! reads it from storage).

mod driver;
mod sender;
mod targets;
mod vetting;
pub mod waker;

use crate::shared::clock::Clock;
use crate::shared::config::LiveConfig;
use crate::shared::metrics::Metrics;
use crate::shared::priority;
use crate::shared::resolve::Resolver;
use anyhow::{Context, Result};
use crossbeam_channel::{unbounded, Receiver};
use dialproof_engine::time::UnixMillis;
use dialproof_engine::webhook_retry::Next;
use dialproof_storage::{handoff, Store};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What the webhook pipeline may touch, handed over at start-up: the store
/// (outbox reads, attempt records), the resolver for the SSRF check at
/// delivery, the live configuration (companies' settings), the counters,
/// the clock and the stop flag.
pub struct Webhooks {
    pub store: Store,
    pub resolver: Resolver,
    pub config: Arc<LiveConfig>,
    pub metrics: Arc<Metrics>,
    pub clock: Clock,
    pub stop: Arc<AtomicBool>,
    /// Set once this node may no longer act as the primary.
    pub fence: Arc<crate::shared::fence::Fence>,
}

impl Webhooks {
    /// Now, on the service's one clock.
    pub fn now(&self) -> UnixMillis {
        self.clock.now()
    }

    /// Stopping, or fenced: a fenced node delivers nothing more (the new
    /// primary owns the deliveries, from the replica; an expiry this node
    /// still made must not contradict a completion made there).
    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire) || self.fence.is_fenced()
    }
}

/// Attempts queued for the senders beyond those running.
pub const SEND_QUEUE_MAX: usize = 1024;

/// What the senders tell the driver.
pub enum Internal {
    /// An attempt was recorded (or could not be): the delivery is no longer
    /// in flight, and `next` says what the schedule wants.
    Recorded {
        delivery_id: i64,
        next: Next,
        result: Result<(), String>,
    },
}

/// Starts the sender threads and the driver thread. The settings are read
/// once: changing `[webhooks]` needs a restart.
pub fn spawn(ctx: Arc<Webhooks>, wakes: Receiver<waker::Wake>) -> Result<()> {
    let config = ctx.config.read().clone();
    let schedule = config.webhooks.schedule()?;
    let senders = config.webhooks.sender_threads()?;
    let db = config.database_path();
    // The driver's own read connection: it blocks only its own thread, and
    // does not queue behind API reads.
    let reader = dialproof_storage::Reader::open(&db)
        .map_err(|e| anyhow::anyhow!("opening {} for the webhook driver: {e}", db.display()))?;
    let (jobs_tx, jobs_rx) = handoff::queue(SEND_QUEUE_MAX);
    let (internal_tx, internal_rx) = unbounded();
    let agents = sender::Agents::new(&ctx.resolver);
    for i in 0..senders {
        let (ctx, agents, schedule) = (ctx.clone(), agents.clone(), schedule.clone());
        let (jobs, done) = (jobs_rx.clone(), internal_tx.clone());
        std::thread::Builder::new()
            .name(format!("webhook-sender-{i}"))
            .spawn(move || {
                priority::lower_this_thread();
                sender::run(ctx, agents, schedule, jobs, done)
            })
            .context("starting a webhook sender thread")?;
    }
    let driver = driver::Driver::new(ctx, reader, jobs_tx);
    std::thread::Builder::new()
        .name("webhook-driver".into())
        .spawn(move || {
            priority::lower_this_thread();
            driver.run(wakes, internal_rx)
        })
        .context("starting the webhook driver thread")?;
    tracing::info!(
        senders,
        attempts = schedule.attempts(),
        "webhook sender started"
    );
    Ok(())
}
