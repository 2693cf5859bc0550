//! Migration 5: telephony evidence. A completed verification keeps the
//! header its caller was read from and how far the network vouched for it
//! (`caller_id_source`, `caller_id_trust`; NULL until a call completes it,
//! and for every row completed before this migration). Each number's
//! health counters and the quarantined numbers get a table each (see
//! `number_health`).
//!
//! Kept apart from `schema` so that its number can change at a merge
//! without touching the statements.
//!
//! Not for: deciding the values (`dialproof_engine::caller_evidence`).

/// The statements, run in order in the migration's transaction.
pub(crate) const MIGRATION: &[&str] = &[
    "ALTER TABLE verifications ADD COLUMN caller_id_source TEXT NULL",
    "ALTER TABLE verifications ADD COLUMN caller_id_trust TEXT NULL",
    "CREATE TABLE number_health (
        number TEXT PRIMARY KEY,
        leases INTEGER NOT NULL,
        completed INTEGER NOT NULL,
        expired_uncalled INTEGER NOT NULL,
        stray_calls INTEGER NOT NULL,
        last_completion_at INTEGER NULL,
        uncalled_in_a_row INTEGER NOT NULL
    ) WITHOUT ROWID",
    "CREATE TABLE number_quarantine (
        number TEXT PRIMARY KEY,
        pool TEXT NOT NULL,
        since INTEGER NOT NULL
    ) WITHOUT ROWID",
];
