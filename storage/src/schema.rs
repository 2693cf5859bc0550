//! The schema, as an ordered list of migrations keyed by `PRAGMA user_version`.
//!
//! Migration N (1-based) is applied when `user_version < N`, in one
//! `BEGIN IMMEDIATE` transaction that also sets `user_version = N`, so two
//! processes opening a fresh file at once (the service and the operator CLI)
//! cannot both apply it. Never edit a released migration; append a new one.
//!
//! Not for: queries. Times are INTEGER Unix milliseconds everywhere.

use crate::error::{Result, StorageError};
use rusqlite::Connection;

/// One migration's work, inside the upgrade's transaction.
pub(crate) enum Migration {
    /// Statements, run in order.
    Sql(&'static [&'static str]),
    /// A step that reads the file before it writes (see its module).
    Code(fn(&Connection) -> Result<()>),
}

/// The migrations, oldest first.
pub(crate) const MIGRATIONS: &[Migration] = &[Migration::Sql(&[
    "CREATE TABLE companies (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        webhook_secret TEXT NOT NULL,
        previous_webhook_secret TEXT NULL,
        previous_secret_valid_until INTEGER NULL,
        send_failed_webhooks INTEGER NOT NULL DEFAULT 0 CHECK (send_failed_webhooks IN (0, 1)),
        dev_webhook_urls TEXT NOT NULL DEFAULT ''
    )",
    "CREATE TABLE users (
        id INTEGER PRIMARY KEY,
        company_id INTEGER NOT NULL REFERENCES companies(id),
        email TEXT NOT NULL UNIQUE,
        password_hash TEXT NOT NULL,
        created_at INTEGER NOT NULL
    )",
    "CREATE INDEX users_company ON users(company_id)",
    "CREATE TABLE sessions (
        token_hash TEXT PRIMARY KEY,
        user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL
    )",
    "CREATE INDEX sessions_user ON sessions(user_id)",
    "CREATE TABLE api_keys (
        id INTEGER PRIMARY KEY,
        company_id INTEGER NOT NULL REFERENCES companies(id),
        label TEXT NOT NULL,
        prefix TEXT NOT NULL UNIQUE,
        secret_hash TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        last_used_at INTEGER NULL,
        revoked_at INTEGER NULL,
        rate_limit_per_minute INTEGER NULL CHECK (rate_limit_per_minute >= 0)
    )",
    "CREATE INDEX api_keys_company ON api_keys(company_id)",
    "CREATE TABLE verifications (
        id TEXT PRIMARY KEY,
        company_id INTEGER NOT NULL REFERENCES companies(id),
        api_key_id INTEGER NOT NULL REFERENCES api_keys(id),
        phone TEXT NOT NULL,
        dial_number TEXT NOT NULL,
        pool TEXT NOT NULL CHECK (pool IN ('domestic', 'international')),
        client_ref TEXT NOT NULL DEFAULT '',
        info TEXT NOT NULL DEFAULT '',
        webhook_url TEXT NOT NULL,
        ttl_seconds INTEGER NOT NULL CHECK (ttl_seconds >= 0),
        status TEXT NOT NULL CHECK (status IN ('pending', 'completed', 'expired', 'failed')),
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        completed_at INTEGER NULL,
        caller_id TEXT NOT NULL DEFAULT '',
        lease_generation INTEGER NOT NULL CHECK (lease_generation >= 0),
        failure_reason TEXT NULL
    )",
    // Recovery reads only pending rows; a partial index stays as small as
    // the number of live leases however long the history grows.
    "CREATE INDEX verifications_pending ON verifications(status) WHERE status = 'pending'",
    "CREATE INDEX verifications_company_created ON verifications(company_id, created_at)",
    "CREATE TABLE rejections (
        id INTEGER PRIMARY KEY,
        company_id INTEGER NOT NULL REFERENCES companies(id),
        api_key_id INTEGER NOT NULL REFERENCES api_keys(id),
        phone TEXT NOT NULL,
        pool TEXT NOT NULL CHECK (pool IN ('domestic', 'international')),
        reason TEXT NOT NULL,
        created_at INTEGER NOT NULL
    )",
    "CREATE INDEX rejections_company_created ON rejections(company_id, created_at)",
    "CREATE TABLE webhook_deliveries (
        id INTEGER PRIMARY KEY,
        verification_id TEXT NOT NULL REFERENCES verifications(id),
        company_id INTEGER NOT NULL REFERENCES companies(id),
        event_type TEXT NOT NULL,
        url TEXT NOT NULL,
        payload TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'dead')),
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at INTEGER NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
    )",
    "CREATE INDEX webhook_deliveries_due ON webhook_deliveries(state, next_attempt_at)",
    // A verification emits at most one event (its terminal status never
    // changes); retries are attempts of that one delivery. The unique index
    // makes 'completed and later expired' impossible even for a buggy writer.
    "CREATE UNIQUE INDEX webhook_deliveries_verification ON webhook_deliveries(verification_id)",
    "CREATE INDEX webhook_deliveries_company_created ON webhook_deliveries(company_id, created_at)",
    "CREATE TABLE webhook_attempts (
        id INTEGER PRIMARY KEY,
        delivery_id INTEGER NOT NULL REFERENCES webhook_deliveries(id),
        attempt_no INTEGER NOT NULL,
        started_at INTEGER NOT NULL,
        latency_ms INTEGER NOT NULL,
        http_status INTEGER NULL,
        error TEXT NULL,
        request_body TEXT NOT NULL,
        response_body TEXT NOT NULL DEFAULT '',
        next_attempt_at INTEGER NULL
    )",
    "CREATE INDEX webhook_attempts_delivery ON webhook_attempts(delivery_id, attempt_no)",
    "CREATE TABLE dedicated_numbers (
        number TEXT PRIMARY KEY,
        company_id INTEGER NOT NULL REFERENCES companies(id),
        created_at INTEGER NOT NULL
    )",
    "CREATE INDEX dedicated_numbers_company ON dedicated_numbers(company_id)",
    "CREATE TABLE meta (
        key TEXT PRIMARY KEY,
        value INTEGER NOT NULL
    ) WITHOUT ROWID",
    "INSERT INTO meta (key, value) VALUES ('change_version', 0)",
]),
// 2: an inbound call finds its verification by the dialled number. Partial,
// like `verifications_pending`: it holds only live leases.
Migration::Sql(&[
    "CREATE INDEX verifications_pending_dial ON verifications(dial_number) \
     WHERE status = 'pending'",
]),
// 3: the dashboard. Its verification list pages by (created_at, id) within
// one company, optionally narrowed to one status, phone or client_ref: one
// index per filter, so a page at a million rows reads only its own rows (no
// OFFSET). The status column rides in the company index, so the period's
// totals are counted from the index alone. A deleted key keeps its row
// (verifications reference it) but leaves the dashboard's list.
Migration::Sql(&[
    "DROP INDEX verifications_company_created",
    "CREATE INDEX verifications_company_created ON verifications(company_id, created_at, status)",
    "CREATE INDEX verifications_company_status ON verifications(company_id, status, created_at)",
    "CREATE INDEX verifications_company_phone ON verifications(company_id, phone, created_at)",
    "CREATE INDEX verifications_company_client_ref \
     ON verifications(company_id, client_ref, created_at) WHERE client_ref != ''",
    "CREATE INDEX rejections_company_phone ON rejections(company_id, phone, created_at)",
    "ALTER TABLE api_keys ADD COLUMN deleted_at INTEGER NULL",
]),
// 4: retry-safe creates, and the lease invariant in the database itself.
// A create's Idempotency-Key is stored with its verification, in the same
// transaction: the key, the request's fingerprint and the exact 201 body,
// unique per company, purged after the retention (by `created_at`). The
// verification keeps the key it was created with for the dashboard, after
// the key's own row is purged. And no dial number is ever held by two
// pending verifications: the partial index that finds a call's
// verification becomes unique, so a write that would break the invariant
// fails instead of being stored.
Migration::Sql(&[
    "CREATE TABLE idempotency_keys (
        id INTEGER PRIMARY KEY,
        company_id INTEGER NOT NULL,
        key TEXT NOT NULL,
        fingerprint BLOB NOT NULL,
        verification_id TEXT NOT NULL,
        response_body TEXT NOT NULL,
        created_at INTEGER NOT NULL
    )",
    "CREATE UNIQUE INDEX idempotency_keys_company_key ON idempotency_keys(company_id, key)",
    "CREATE INDEX idempotency_keys_created ON idempotency_keys(created_at)",
    "ALTER TABLE verifications ADD COLUMN idempotency_key TEXT NULL",
    "DROP INDEX verifications_pending_dial",
    "CREATE UNIQUE INDEX verifications_pending_dial ON verifications(dial_number) \
     WHERE status = 'pending'",
]),
// 5: telephony evidence on a completed verification (see the module).
Migration::Sql(crate::migration_evidence::MIGRATION),
// 6: test mode (see the module).
Migration::Sql(crate::migration_testmode::MIGRATION),
// 7: an outbox row's mode in its own column (see the module).
Migration::Sql(crate::migration_delivery_mode::MIGRATION),
// 8: the status CHECKs as equalities, which SQLite checks without building
// a temporary b-tree per statement (see the module).
Migration::Code(crate::migration_status_checks::apply),
];

/// The `user_version` of a fully migrated database.
pub(crate) fn latest_version() -> i64 {
    // The list is a compile-time constant of a handful of entries.
    MIGRATIONS.len() as i64
}

fn user_version(conn: &Connection) -> Result<i64> {
    Ok(conn.pragma_query_value(None, "user_version", |row| row.get(0))?)
}

/// Brings the file up to [`latest_version`], every missing migration in
/// one `BEGIN IMMEDIATE` transaction: an upgrade that fails halfway (a
/// full disk, a kill) leaves the file exactly at the version it had, never
/// between two releases. Refuses a file written by a newer build rather
/// than run against a schema it does not know.
pub(crate) fn migrate(conn: &Connection) -> Result<()> {
    if user_version(conn)? >= latest_version() {
        return check_version(conn);
    }
    conn.execute_batch("BEGIN IMMEDIATE")?;
    match apply_missing(conn) {
        Ok(()) => conn.execute_batch("COMMIT")?,
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            return Err(e);
        }
    }
    check_version(conn)
}

/// Inside the transaction: the version is read again, since another
/// process may have migrated between our first look and our lock.
fn apply_missing(conn: &Connection) -> Result<()> {
    let from = user_version(conn)?;
    for (index, migration) in MIGRATIONS.iter().enumerate() {
        let target = index as i64 + 1;
        if from >= target {
            continue;
        }
        let failed = |e: &dyn std::fmt::Display| {
            StorageError::Sqlite(format!("migration {target} failed: {e}"))
        };
        match migration {
            Migration::Sql(statements) => {
                for sql in *statements {
                    conn.execute_batch(sql).map_err(|e| failed(&e))?;
                }
            }
            Migration::Code(step) => step(conn).map_err(|e| failed(&e))?,
        }
        conn.pragma_update(None, "user_version", target)?;
    }
    Ok(())
}

/// The schema version of the database at `path` without changing it:
/// `None` when there is no file yet (the first start creates it). For the
/// configuration check, which must not migrate.
pub fn version_of(path: &std::path::Path) -> Result<Option<i64>> {
    if !path.exists() {
        return Ok(None);
    }
    let conn = Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    Ok(Some(user_version(&conn)?))
}

/// The schema version this build writes (the number of migrations).
pub fn current_version() -> i64 {
    latest_version()
}

/// The refusal of a database written by a newer release, one line, the
/// same from `dialproof check`, `serve` and the operator commands.
pub fn newer_message(found: i64, known: i64) -> String {
    format!(
        "database schema version {found} is newer than this release knows ({known}): it was \
         written by a newer Dialproof; run that release, or restore the backup taken before it"
    )
}

/// Fails unless the file is at exactly the version this build knows.
pub(crate) fn check_version(conn: &Connection) -> Result<()> {
    let found = user_version(conn)?;
    let want = latest_version();
    if found > want {
        return Err(StorageError::Corrupt(newer_message(found, want)));
    }
    if found < want {
        return Err(StorageError::Corrupt(format!(
            "database schema version {found} is older than this build ({want}); open it with \
             Store::open or Admin::open to migrate"
        )));
    }
    Ok(())
}
