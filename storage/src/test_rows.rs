//! Test-mode rows past their retention: test verifications that ended
//! (with their outbox rows and attempts, and their idempotency keys) and
//! test 503 rejections, deleted in bounded batches.
//!
//! Test rows exist for a client's CI runs; they are worth nothing after a
//! few days and would otherwise grow the file without bound. Live rows are
//! never touched here (every statement names `livemode = 0`), and a
//! pending test verification is kept whatever its age (its number is still
//! leased until it ends).
//!
//! Not for: the retention's length (passed in as the moment before which
//! rows go), or the idempotency keys' own retention (see `idempotency`).

use crate::error::Result;
use dialproof_engine::time::UnixMillis;
use rusqlite::{params, Connection};

/// The most verifications one purge deletes: a bounded transaction, like
/// the idempotency purge's.
pub const TEST_PURGE_BATCH_MAX: usize = 2_000;

/// Deletes up to `limit` ended test verifications created before `before`,
/// their outbox rows, attempts and idempotency keys, and as many test
/// rejections; returns how many rows of `verifications` and `rejections`
/// went.
pub(crate) fn purge(conn: &Connection, before: UnixMillis, limit: usize) -> Result<usize> {
    let limit = i64::try_from(limit.min(TEST_PURGE_BATCH_MAX)).unwrap_or(0);
    conn.execute_batch(
        "CREATE TEMP TABLE IF NOT EXISTS purged_test (id TEXT PRIMARY KEY); \
         DELETE FROM temp.purged_test;",
    )?;
    conn.prepare_cached(
        "INSERT INTO temp.purged_test (id) SELECT id FROM verifications \
         WHERE livemode = 0 AND created_at < ?1 AND status != 'pending' \
         ORDER BY created_at LIMIT ?2",
    )?
    .execute(params![before.0, limit])?;
    conn.execute_batch(
        "DELETE FROM webhook_attempts WHERE delivery_id IN (SELECT id FROM webhook_deliveries \
           WHERE verification_id IN (SELECT id FROM temp.purged_test)); \
         DELETE FROM webhook_deliveries WHERE verification_id IN (SELECT id FROM temp.purged_test); \
         DELETE FROM idempotency_keys WHERE livemode = 0 \
           AND verification_id IN (SELECT id FROM temp.purged_test);",
    )?;
    let verifications = conn
        .prepare_cached("DELETE FROM verifications WHERE id IN (SELECT id FROM temp.purged_test)")?
        .execute([])?;
    conn.execute_batch("DELETE FROM temp.purged_test")?;
    let rejections = conn
        .prepare_cached(
            "DELETE FROM rejections WHERE id IN (SELECT id FROM rejections \
             WHERE livemode = 0 AND created_at < ?1 ORDER BY created_at LIMIT ?2)",
        )?
        .execute(params![before.0, limit])?;
    Ok(verifications + rejections)
}
