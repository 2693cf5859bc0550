//! Migration 6: test mode. A key, a verification, a 503 rejection and a
//! stored idempotency key each carry their mode (`livemode`, 1 for live,
//! 0 for test; every row written before this migration is live), a company
//! may size its test pools (`test_pool_size`, NULL for the service's
//! default), and an idempotency key is unique per company *and mode*, so a
//! test create can never replay a live one's answer or the reverse.
//!
//! Kept apart from `schema` so that its number can change at a merge
//! without touching the statements.
//!
//! Not for: what a test key may do (the binary's API) or which numbers the
//! test pools hold (`dialproof_engine::test_pool`).

/// The statements, run in order in the migration's transaction.
pub(crate) const MIGRATION: &[&str] = &[
    "ALTER TABLE api_keys ADD COLUMN livemode INTEGER NOT NULL DEFAULT 1 \
     CHECK (livemode IN (0, 1))",
    "ALTER TABLE verifications ADD COLUMN livemode INTEGER NOT NULL DEFAULT 1 \
     CHECK (livemode IN (0, 1))",
    "ALTER TABLE rejections ADD COLUMN livemode INTEGER NOT NULL DEFAULT 1 \
     CHECK (livemode IN (0, 1))",
    "ALTER TABLE idempotency_keys ADD COLUMN livemode INTEGER NOT NULL DEFAULT 1 \
     CHECK (livemode IN (0, 1))",
    "DROP INDEX idempotency_keys_company_key",
    "CREATE UNIQUE INDEX idempotency_keys_company_key \
     ON idempotency_keys(company_id, livemode, key)",
    "ALTER TABLE companies ADD COLUMN test_pool_size INTEGER NULL \
     CHECK (test_pool_size >= 0)",
    // The retention purge finds old test rows without scanning live ones;
    // partial, so it costs live traffic nothing.
    "CREATE INDEX verifications_test_created ON verifications(created_at) WHERE livemode = 0",
    "CREATE INDEX rejections_test_created ON rejections(created_at) WHERE livemode = 0",
    // The dashboard's totals of one mode, still from indexes alone: the
    // test rows' own counts come from these partial indexes (holding only
    // test rows, so live writes do not maintain them), the live ones are
    // all rows (migration 3's indexes) less the test rows. `livemode` is a
    // column too, or SQLite would read each row to check the partial
    // index's own condition.
    "CREATE INDEX verifications_test_company \
     ON verifications(company_id, created_at, status, livemode) WHERE livemode = 0",
    "CREATE INDEX verifications_test_company_status \
     ON verifications(company_id, status, created_at, livemode) WHERE livemode = 0",
    "CREATE INDEX rejections_test_company ON rejections(company_id, created_at, livemode) \
     WHERE livemode = 0",
];
