//! The writer's plain row writes: a new verification, a 503 rejection, a
//! key's last-use time. Each runs inside the batch's open transaction.
//!
//! Not for: status changes (see `transition`), webhook attempts (see
//! `deliveries`) or sessions (see `users`).

use crate::error::{Result, StorageError};
use crate::idempotency::{self, Inserted, KeyedCreate};
use crate::rows::{NewRejection, VerificationRow};
use dialproof_engine::time::UnixMillis;
use rusqlite::{params, Connection};

/// A new verification, with its idempotency key if it has one: the key
/// first, so that a key already stored leaves the row unwritten.
pub(super) fn insert_created(
    conn: &Connection,
    r: &VerificationRow,
    keyed: Option<&KeyedCreate>,
) -> Result<Inserted> {
    match (r.idempotency_key.as_deref(), keyed) {
        (None, None) => {}
        (Some(key), Some(keyed)) => {
            if let Some(taken) = idempotency::claim(conn, r, key, keyed)? {
                return Ok(Inserted::KeyTaken(taken));
            }
        }
        _ => {
            return Err(StorageError::Invalid(
                "a verification's idempotency key and its answer go together".into(),
            ))
        }
    }
    insert_verification(conn, r)?;
    Ok(Inserted::Created)
}

fn insert_verification(conn: &Connection, r: &VerificationRow) -> Result<()> {
    let mut stmt = conn.prepare_cached(
        "INSERT INTO verifications (id, company_id, api_key_id, phone, dial_number, pool, \
         client_ref, info, webhook_url, ttl_seconds, status, created_at, expires_at, \
         completed_at, caller_id, lease_generation, failure_reason, idempotency_key, \
         caller_id_source, caller_id_trust, livemode) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, \
         ?19, ?20, ?21)",
    )?;
    stmt.execute(params![
        r.id,
        r.company_id,
        r.api_key_id,
        r.phone,
        r.dial_number,
        r.pool.as_str(),
        r.client_ref,
        r.info,
        r.webhook_url,
        r.ttl_seconds,
        r.status.as_str(),
        r.created_at.0,
        r.expires_at.0,
        r.completed_at.map(|t| t.0),
        r.caller_id,
        r.lease_generation,
        r.failure_reason,
        r.idempotency_key,
        r.caller_evidence.map(|e| e.source.as_str()),
        r.caller_evidence.map(|e| e.trust.as_str()),
        r.livemode,
    ])?;
    Ok(())
}

pub(super) fn insert_rejection(conn: &Connection, r: &NewRejection) -> Result<()> {
    let mut stmt = conn.prepare_cached(
        "INSERT INTO rejections (company_id, api_key_id, phone, pool, reason, created_at, \
         livemode) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?;
    stmt.execute(params![
        r.company_id,
        r.api_key_id,
        r.phone,
        r.pool.as_str(),
        r.reason,
        r.at.0,
        r.livemode
    ])?;
    Ok(())
}

pub(super) fn touch_key(conn: &Connection, key_id: i64, at: UnixMillis) -> Result<()> {
    // max(NULL, x) is NULL in SQLite, hence the coalesce.
    let mut stmt = conn.prepare_cached(
        "UPDATE api_keys SET last_used_at = max(coalesce(last_used_at, ?2), ?2) WHERE id = ?1",
    )?;
    stmt.execute(params![key_id, at.0])?;
    Ok(())
}
