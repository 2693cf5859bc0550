//! Stored idempotency keys: each create's `Idempotency-Key`, written in the
//! same transaction as its verification, read back when a retry's key is
//! not in the binary's memory, and purged after the retention.
//!
//! The unique index on `(company_id, livemode, key)` is what keeps a second
//! verification out: a create whose key is already stored (and not past
//! its retention) stores nothing and reports the stored answer instead
//! ([`Inserted::KeyTaken`]), so the binary answers the retry with it and
//! gives its number back.
//!
//! Not for: deciding what a retry gets (the engine's
//! `dialproof_engine::idempotency`), or the retention's length (passed in
//! as the moment keys expire before).

use crate::error::{Result, StorageError};
use crate::rows::VerificationRow;
use dialproof_engine::idempotency::Fingerprint;
use dialproof_engine::time::UnixMillis;
use dialproof_engine::CompanyId;
use rusqlite::{params, Connection, OptionalExtension, Row};

/// What a create with a key stores besides its row (the key itself is the
/// row's `idempotency_key`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyedCreate {
    pub fingerprint: Fingerprint,
    /// The exact 201 body a replay answers with.
    pub response_body: String,
    /// Keys created at or before this moment are past their retention: a
    /// stored one is replaced rather than honoured.
    pub expired_before: UnixMillis,
}

/// A stored key and its answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredKey {
    pub company_id: CompanyId,
    /// The mode of the key's create: keys are unique per company and mode.
    pub livemode: bool,
    pub key: String,
    pub fingerprint: Fingerprint,
    pub verification_id: String,
    pub response_body: String,
    pub created_at: UnixMillis,
}

/// What an `InsertVerification` did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Inserted {
    /// The row (and its key, if any) is stored.
    Created,
    /// The row's key was already stored for its company within the
    /// retention: nothing was written; this is the stored answer.
    KeyTaken(StoredKey),
}

/// The longest purge one op runs: a bounded transaction, so a day's keys
/// expiring at once never hold the writer for long.
pub const PURGE_BATCH_MAX: usize = 5_000;

const COLUMNS: &str =
    "company_id, key, fingerprint, verification_id, response_body, created_at, livemode";

type Raw = (CompanyId, String, Vec<u8>, String, String, i64, bool);

fn from_row(r: &Row<'_>) -> rusqlite::Result<Raw> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
    ))
}

fn stored(raw: Raw) -> Result<StoredKey> {
    let (company_id, key, fingerprint, verification_id, response_body, created_at, livemode) = raw;
    let fingerprint = Fingerprint::from_slice(&fingerprint).ok_or_else(|| {
        StorageError::Corrupt(format!(
            "idempotency key of company {company_id} has a {}-byte fingerprint",
            fingerprint.len()
        ))
    })?;
    Ok(StoredKey {
        company_id,
        livemode,
        key,
        fingerprint,
        verification_id,
        response_body,
        created_at: UnixMillis(created_at),
    })
}

/// The key `key` of `company` in mode `livemode`, if stored and created
/// after `expired_before`.
pub(crate) fn lookup(
    conn: &Connection,
    (company, livemode): (CompanyId, bool),
    key: &str,
    expired_before: UnixMillis,
) -> Result<Option<StoredKey>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM idempotency_keys \
         WHERE company_id = ?1 AND key = ?2 AND created_at > ?3 AND livemode = ?4"
    ))?;
    let raw = stmt
        .query_row(params![company, key, expired_before.0, livemode], from_row)
        .optional()?;
    raw.map(stored).transpose()
}

/// Stores `row`'s key with its answer, unless the key is already stored
/// within the retention: then that answer (and nothing is written). Runs
/// in the insert's op, before the row; should the row then fail, the
/// writer's batch leaves neither (see its `batch`).
pub(crate) fn claim(
    conn: &Connection,
    row: &VerificationRow,
    key: &str,
    keyed: &KeyedCreate,
) -> Result<Option<StoredKey>> {
    // A key past its retention but not purged yet is free again.
    conn.prepare_cached(
        "DELETE FROM idempotency_keys WHERE company_id = ?1 AND key = ?2 AND created_at <= ?3 \
         AND livemode = ?4",
    )?
    .execute(params![
        row.company_id,
        key,
        keyed.expired_before.0,
        row.livemode
    ])?;
    let inserted = conn
        .prepare_cached(&format!(
            "INSERT INTO idempotency_keys ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) \
             ON CONFLICT (company_id, livemode, key) DO NOTHING"
        ))?
        .execute(params![
            row.company_id,
            key,
            &keyed.fingerprint.0[..],
            row.id,
            keyed.response_body,
            row.created_at.0,
            row.livemode
        ])?;
    if inserted == 1 {
        return Ok(None);
    }
    lookup(
        conn,
        (row.company_id, row.livemode),
        key,
        keyed.expired_before,
    )?
    .map(Some)
    .ok_or_else(|| StorageError::Corrupt(format!("idempotency key {key:?} vanished")))
}

/// Deletes up to `limit` keys created at or before `expired_before`, oldest
/// first; returns how many.
pub(crate) fn purge(conn: &Connection, expired_before: UnixMillis, limit: usize) -> Result<usize> {
    let limit = i64::try_from(limit.min(PURGE_BATCH_MAX)).unwrap_or(0);
    let deleted = conn
        .prepare_cached(
            "DELETE FROM idempotency_keys WHERE id IN (SELECT id FROM idempotency_keys \
             WHERE created_at <= ?1 ORDER BY created_at LIMIT ?2)",
        )?
        .execute(params![expired_before.0, limit])?;
    Ok(deleted)
}

/// How many keys are stored (for a bench and the operator).
pub(crate) fn count(conn: &Connection) -> Result<u64> {
    let n: i64 = conn
        .prepare_cached("SELECT count(*) FROM idempotency_keys")?
        .query_row([], |r| r.get(0))?;
    Ok(u64::try_from(n).unwrap_or(0))
}
