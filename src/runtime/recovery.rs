//! Recovery at start: the lease table rebuilt from the pending rows, every
//! pending verification's expiry scheduled, and what ran out while the
//! service was down expired before new numbers are issued.
//!
//! Not for: deciding what is due (`dialproof_engine::expiry`) or applying
//! an expiry (the writer runs the state machine).

use crate::runtime::app::App;
use crate::runtime::expiry;
use crate::shared::wait::{Committing, Outcome};
use anyhow::Result;
use dialproof_engine::ids::VerificationKey;
use dialproof_engine::time::UnixMillis;
use dialproof_storage::Reader;
use std::sync::Arc;
use std::time::Duration;

/// The longest recovery waits for its read and for the overdue expiries.
const RECOVERY_WAIT: Duration = Duration::from_secs(60);

/// Rebuilds the lease table from pending rows, schedules every pending
/// verification's expiry, starts the expiry thread, and waits (bounded)
/// until the ones that ran out while the service was down are expired: the
/// first request then reads them as expired and finds their numbers free.
pub fn recover(app: &Arc<App>) -> Result<()> {
    let recovered_at = app.now();
    let restorer = app.clone();
    let Recovered {
        expiries,
        restored,
        not_restored,
    } = match app
        .store
        .read_within(RECOVERY_WAIT, move |r| Ok(restore_leases(&restorer, r)))
    {
        Outcome::Done(recovered) => recovered?,
        Outcome::TimedOut => anyhow::bail!("reading pending verifications timed out"),
        Outcome::Failed(e) => anyhow::bail!("reading pending verifications failed: {e}"),
    };
    let pending = expiries.len();
    let overdue = expiries
        .iter()
        .filter(|(at, _)| *at <= recovered_at)
        .count();
    app.expiries.schedule(expiries);
    expiry::spawn(app.clone())?;
    if !app.expiries.wait_settled(recovered_at, RECOVERY_WAIT) {
        // Serving is safe meanwhile: their numbers stay leased until each
        // expiry commits. Only a read may still show one as pending.
        let (queued, in_flight) = app.expiries.counts();
        tracing::warn!(
            overdue,
            queued,
            in_flight,
            "overdue verifications still expiring; serving meanwhile"
        );
    }
    tracing::info!(pending, restored, not_restored, overdue, "recovery done");
    Ok(())
}

/// What recovery read: every pending verification's expiry, and how many
/// leases went back into the table.
struct Recovered {
    expiries: Vec<(UnixMillis, VerificationKey)>,
    restored: usize,
    not_restored: usize,
}

/// On a reader thread: re-marks each pending verification's number leased
/// and collects its expiry, 24 bytes a row until the schedule keeps its key
/// (no `VerificationRow` is built).
/// Overdue ones keep their lease too, until their expiry commits, so their
/// numbers are never issued while the rows are still pending.
fn restore_leases(app: &App, reader: &Reader) -> Result<Recovered> {
    let mut recovered = Recovered {
        expiries: Vec::new(),
        restored: 0,
        not_restored: 0,
    };
    let mut foreign_id = None;
    reader
        .for_each_pending_lease(|lease| {
            let Some(key) = VerificationKey::parse(lease.id) else {
                foreign_id.get_or_insert_with(|| lease.id.to_owned());
                return;
            };
            recovered.expiries.push((lease.expires_at, key));
            match app
                .leases
                .restore(lease.dial_number, lease.lease_generation)
            {
                Ok(()) => recovered.restored += 1,
                Err(e) => {
                    // The number left the configuration or is held twice:
                    // keep the verification (it still expires and can still
                    // be read) but do not issue the number to anyone else.
                    tracing::error!(verification_id = lease.id, error = %e, "lease not restored");
                    recovered.not_restored += 1;
                }
            }
        })
        .map_err(|e| anyhow::anyhow!("reading pending verifications: {e}"))?;
    if let Some(id) = foreign_id {
        // Every id this service writes is a canonical ULID; anything else
        // is a corrupt row, refused like any other corrupt row.
        anyhow::bail!("pending verification {id:?} does not have an id this service issues");
    }
    Ok(recovered)
}
