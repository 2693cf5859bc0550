//! The control loop: the main thread's work while the service runs. It
//! applies operator changes made in the database (keys, dedicated numbers,
//! released quarantines) and configuration reloads (SIGHUP), rebuilding the
//! lease table when the numbers change or a number's quarantine begins or
//! ends, stores number health and keys' last uses, and purges idempotency keys past their
//! retention and test-mode rows past theirs.
//!
//! Not for: serving anything, or the reload's rules (`crate::shared::leases`
//! checks what a reload may change).

use crate::runtime::app::App;
use crate::runtime::promotion::Held;
use crate::shared::config::Config;
use crate::shared::leases::{build_table, check_reload};
use crate::shared::wait::{Committing, Outcome};
use dialproof_storage::{WriteOp, PURGE_BATCH_MAX, TEST_PURGE_BATCH_MAX};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How often the control thread looks for operator changes in the database.
const CONTROL_POLL: Duration = Duration::from_secs(1);

/// Runs until a stop signal: applies operator changes from the database and
/// configuration reloads (SIGHUP).
pub fn control_loop(
    app: &Arc<App>,
    config_path: Option<&std::path::Path>,
    hup: &AtomicBool,
    held: &mut Option<Held>,
) {
    let mut dedicated = app.keys.dedicated_numbers();
    // What the current table withholds (it was built with this at start).
    let mut withheld_in_table = app.health.withheld();
    let mut last_poll = std::time::Instant::now();
    // When keys' last uses were last written (on the injected clock).
    let mut key_uses_flushed = dialproof_engine::time::UnixMillis(0);
    while !app.stopping() {
        std::thread::sleep(Duration::from_millis(100));
        if app.stopping() {
            break;
        }
        release_held_if_due(app, held);
        let reload_config = hup.swap(false, Ordering::AcqRel);
        if last_poll.elapsed() < CONTROL_POLL && !reload_config {
            continue;
        }
        last_poll = std::time::Instant::now();
        purge_idempotency_keys(app);
        purge_test_rows(app);
        app.key_uses
            .flush_if_due(&app.store, app.now(), &mut key_uses_flushed);
        if let Err(e) = app.keys.refresh_if_changed() {
            tracing::warn!(error = %e, "refreshing keys failed");
        }
        let now_dedicated = app.keys.dedicated_numbers();
        app.health.sync(&app.store);
        let withheld = app.health.withheld();
        if !reload_config && now_dedicated == dedicated && withheld == withheld_in_table {
            continue;
        }
        let config = if reload_config {
            match Config::load(config_path) {
                Ok(new) => {
                    let old = app.config.read().clone();
                    if let Err(e) = check_reload(&old, &new) {
                        tracing::error!(error = %e, "configuration reload refused");
                        continue;
                    }
                    Arc::new(new)
                }
                Err(e) => {
                    tracing::error!(error = %e, "configuration reload failed; keeping the old one");
                    continue;
                }
            }
        } else {
            app.config.read().clone()
        };
        let line_up = app.sip_lines.snapshot();
        let table = build_table(&config, &now_dedicated, &line_up, &withheld);
        match table.and_then(|t| app.leases.replace(t)) {
            Ok(carried) => {
                app.idempotency
                    .set_retention_hours(config.api.idempotency_key_hours());
                *app.config.write() = config;
                crate::sip::on_table_rebuilt(&app.sip());
                dedicated = now_dedicated;
                withheld_in_table = withheld;
                tracing::info!(
                    carried,
                    reload_config,
                    quarantined = withheld_in_table.len(),
                    "lease table rebuilt"
                );
            }
            Err(e) => tracing::error!(error = %e, "lease table rebuild failed"),
        }
    }
}

/// Purges of stored idempotency keys per control tick, at most: each
/// deletes up to `PURGE_BATCH_MAX` keys in one short transaction, so this
/// keeps up with 100,000 keyed creates a second and never holds the writer
/// for long.
const PURGE_ROUNDS_PER_TICK: usize = 20;
/// How long the control loop waits for one purge's commit.
const PURGE_WAIT: Duration = Duration::from_secs(10);

/// Idempotency keys past their retention leave memory and the database.
/// A purge that fails is the next tick's: an expired key is never honoured
/// anyway (reads and inserts compare its age), it only takes space.
fn purge_idempotency_keys(app: &App) {
    let now = app.now();
    app.idempotency.expire(now);
    let expired_before = app.idempotency.expired_before(now);
    for _ in 0..PURGE_ROUNDS_PER_TICK {
        let purged = app
            .store
            .commit(PURGE_WAIT, |reply| WriteOp::PurgeIdempotencyKeys {
                expired_before,
                reply,
            });
        match purged {
            Outcome::Done(n) => {
                app.metrics
                    .idempotency_keys_purged
                    .fetch_add(n as u64, Ordering::Relaxed);
                if n < PURGE_BATCH_MAX {
                    return;
                }
            }
            other => {
                tracing::warn!(error = %other, "purging idempotency keys failed");
                return;
            }
        }
    }
}

/// Ended test-mode verifications (and test rejections) older than the
/// retention (`[api] test_mode_retention_days`) leave the database, in
/// bounded batches like the idempotency keys. A purge that fails is the
/// next tick's: the rows only take space.
fn purge_test_rows(app: &App) {
    let days = app.config.read().api.test_mode_retention_days();
    let now = app.now();
    let before = dialproof_engine::time::UnixMillis(now.0 - i64::from(days) * 86_400_000);
    for _ in 0..PURGE_ROUNDS_PER_TICK {
        let purged = app
            .store
            .commit(PURGE_WAIT, |reply| WriteOp::PurgeTestRows { before, reply });
        match purged {
            Outcome::Done(n) => {
                if n > 0 {
                    tracing::info!(rows = n, days, "test-mode rows past their retention purged");
                }
                if n < TEST_PURGE_BATCH_MAX {
                    return;
                }
            }
            other => {
                tracing::warn!(error = %other, "purging test-mode rows failed");
                return;
            }
        }
    }
}

/// After a promoted start: lets the held numbers go once no verification of
/// the lost tail can still be alive (polled here, so it cannot be dropped).
fn release_held_if_due(app: &App, held: &mut Option<Held>) {
    if held
        .as_mut()
        .is_some_and(|h| h.release_if_due(&app.leases, app.now()))
    {
        *held = None;
        app.metrics
            .replication
            .held_numbers
            .store(0, Ordering::Relaxed);
    }
}
