//! The `[webhooks]` section of the configuration file.
//!
//! Everything is optional; the defaults are the production values. The retry
//! schedule is configurable so that tests (and a cautious operator) can run
//! the whole schedule in seconds, e.g. `retry_schedule_seconds = [0, 1, 2]`.
//!
//! Not for: the schedule's logic (`dialproof_engine::webhook_retry`).

use anyhow::{bail, Result};
use dialproof_engine::webhook_retry::{Schedule, DELAYS_SECONDS_DEFAULT, JITTER_PERCENT_DEFAULT};
use serde::Deserialize;

/// Sender threads by default. Senders mostly wait on the network, so this
/// is far more than the cores; it bounds how many receivers are being talked
/// to at once.
pub const SENDER_THREADS_DEFAULT: usize = 32;
/// The most sender threads accepted.
pub const SENDER_THREADS_MAX: usize = 256;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhooksConfig {
    /// The delay before each attempt in seconds (the first from the event,
    /// each later one from the end of the attempt before); its length is the
    /// number of automatic attempts. Default: 0, 5, 300, 1800, 7200, 18000,
    /// 36000, 36000.
    pub retry_schedule_seconds: Option<Vec<u32>>,
    /// Each delay varies by up to this many percent either way (default 10).
    pub jitter_percent: Option<u8>,
    /// Sender threads (default [`SENDER_THREADS_DEFAULT`]).
    pub sender_threads: Option<usize>,
}

impl WebhooksConfig {
    pub fn schedule(&self) -> Result<Schedule> {
        let delays = self
            .retry_schedule_seconds
            .as_deref()
            .unwrap_or(&DELAYS_SECONDS_DEFAULT);
        Schedule::new(
            delays,
            self.jitter_percent.unwrap_or(JITTER_PERCENT_DEFAULT),
        )
        .map_err(|e| anyhow::anyhow!("webhooks.retry_schedule_seconds: {e}"))
    }

    pub fn sender_threads(&self) -> Result<usize> {
        let n = self.sender_threads.unwrap_or(SENDER_THREADS_DEFAULT);
        if n == 0 || n > SENDER_THREADS_MAX {
            bail!("webhooks.sender_threads must be 1..={SENDER_THREADS_MAX}, got {n}");
        }
        Ok(n)
    }

    /// Checks every setting (called when the configuration is loaded).
    pub fn validate(&self) -> Result<()> {
        self.schedule()?;
        self.sender_threads()?;
        Ok(())
    }
}
