//! A promoted start: a standby restored from the replica holds back the
//! numbers the old primary's lost tail may have leased, and lets them go
//! once no lost verification can still be alive.
//!
//! The rule (which numbers, how many, until when) is the engine's
//! (`dialproof_engine::promotion`); this file reads the replica's rows for
//! it, claims the numbers in the live table and releases them when due.
//! The release is polled by the control loop, so it cannot be dropped;
//! the holds survive table rebuilds because a rebuild carries every live
//! lease over by number and generation.
//!
//! Not for: restoring the database (Litestream's `restore` does that) or
//! the ordinary recovery of pending verifications (`super::recovery`).

use crate::runtime::app::App;
use crate::shared::config::Config;
use crate::shared::leases::Leases;
use anyhow::{Context, Result};
use dialproof_engine::promotion::{HoldPlanner, LostWindow};
use dialproof_engine::time::UnixMillis;
use dialproof_storage::Reader;
use std::path::Path;
use std::sync::atomic::Ordering;

/// Numbers held back after a promotion, until `until`.
#[derive(Debug)]
pub struct Held {
    pub until: UnixMillis,
    /// (number, generation) of each hold.
    numbers: Vec<(String, u32)>,
}

impl Held {
    pub fn count(&self) -> usize {
        self.numbers.len()
    }

    /// Releases every hold once `now` reaches `until`; true when done.
    pub fn release_if_due(&mut self, leases: &Leases, now: UnixMillis) -> bool {
        if now < self.until {
            return false;
        }
        let released = self
            .numbers
            .drain(..)
            .filter(|(number, generation)| leases.release(number, *generation))
            .count();
        tracing::info!(released, "promotion: held numbers released");
        true
    }
}

/// Plans the hold from the database at `db_path` and claims it in
/// `leases`. `end` is the end of the lost window (the operator's word, or
/// the start moment). Runs before any listener opens, on the start thread.
pub fn hold(db_path: &Path, leases: &Leases, end: UnixMillis) -> Result<Held> {
    let reader = Reader::open(db_path).context("opening the restored database")?;
    let last_committed = reader
        .newest_committed_moment()
        .map_err(|e| anyhow::anyhow!("reading the newest committed moment: {e}"))?
        .unwrap_or(end);
    let window = LostWindow {
        last_committed,
        end,
    };
    let mut planner = HoldPlanner::new(window, &leases.with_table(|t| t.sub_pool_sizes()));
    let rows = reader
        .for_each_lease_newest_first(|number, created_at| {
            leases.with_table(|t| match t.slot_of(number) {
                Some(slot) => match t.sub_pool_of(slot) {
                    Some(pool) => planner.visit(pool, slot, created_at),
                    None => true,
                },
                // A number no longer configured cannot be issued anyway.
                None => true,
            })
        })
        .map_err(|e| anyhow::anyhow!("reading committed leases: {e}"))?;
    let plan = planner.plan();
    let numbers: Vec<(String, u32)> = leases.with_table(|t| {
        plan.iter()
            .flat_map(|h| t.hold_following(h.sub_pool, h.after, h.count))
            .map(|l| (t.number(l.slot).to_owned(), l.generation))
            .collect()
    });
    let held = Held {
        until: window.hold_until(),
        numbers,
    };
    tracing::info!(
        last_committed = %last_committed.to_rfc3339(),
        lost_window_end = %end.to_rfc3339(),
        lost_window_ms = window.length_ms(),
        rows_read = rows,
        held = held.count(),
        until = %held.until.to_rfc3339(),
        "promotion: holding back the numbers the lost tail may have leased"
    );
    Ok(held)
}

/// A promoted start: holds back what the lost tail may have leased (see
/// [`hold`]), for the control loop to release when due. `lost_until` is the
/// end of the lost window in Unix seconds (default: now).
pub fn promote(app: &App, config: &Config, lost_until: Option<i64>) -> Result<Held> {
    let end = match lost_until {
        Some(seconds) => UnixMillis::from_secs(seconds),
        None => app.now(),
    };
    let held = hold(&config.database_path(), &app.leases, end)?;
    let r = &app.metrics.replication;
    r.held_numbers.store(held.count() as u64, Ordering::Relaxed);
    r.hold_until_ms
        .store(u64::try_from(held.until.0).unwrap_or(0), Ordering::Relaxed);
    Ok(held)
}
