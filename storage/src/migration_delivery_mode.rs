//! Migration 7: an outbox row carries its verification's mode
//! (`webhook_deliveries.livemode`, 1 for live, 0 for test), written with
//! the row in the transition's transaction. Before, every read of a
//! delivery (the webhook driver's due rows and wakes, the delivery log)
//! looked the mode up in `verifications` by the row's id, one index probe
//! per row on the webhook path. Rows written before this migration take
//! their verification's mode here (live if the verification is gone).
//!
//! Kept apart from `schema` so that its number can change at a merge
//! without touching the statements.
//!
//! Not for: what the mode changes for a delivery (the binary's metrics and
//! the dashboard's delivery log).

/// The statements, run in order in the migration's transaction.
pub(crate) const MIGRATION: &[&str] = &[
    "ALTER TABLE webhook_deliveries ADD COLUMN livemode INTEGER NOT NULL DEFAULT 1 \
     CHECK (livemode IN (0, 1))",
    // Test verifications are few: the subquery walks migration 6's partial
    // index of test rows, and each finds its outbox row by the unique
    // `verification_id` index, so the backfill does not walk live history.
    "UPDATE webhook_deliveries SET livemode = 0 WHERE verification_id IN \
     (SELECT id FROM verifications WHERE livemode = 0)",
];
