//! Dashboard users and their sessions: the rows behind "authenticated by
//! another mechanism than a key" (the API's 403) and behind dashboard login.
//!
//! Passwords arrive already hashed (Argon2id, by the binary) and session
//! tokens as their SHA-256: neither a password nor a token is ever stored.
//!
//! Not for: verifying passwords or minting tokens (the binary does that).

use crate::error::StorageError;
use dialproof_engine::time::UnixMillis;
use dialproof_engine::CompanyId;
use rusqlite::{params, Connection, OptionalExtension};

/// The most sessions one user keeps; older ones are dropped at login.
pub const SESSIONS_PER_USER_MAX: i64 = 20;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserRow {
    pub id: i64,
    pub company_id: CompanyId,
    pub email: String,
    pub password_hash: String,
    pub created_at: UnixMillis,
}

/// A live session and whose it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionUser {
    pub user_id: i64,
    pub company_id: CompanyId,
    pub email: String,
    pub expires_at: UnixMillis,
}

/// A session to store at login.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewSession {
    pub token_hash: String,
    pub user_id: i64,
    pub created_at: UnixMillis,
    pub expires_at: UnixMillis,
}

pub(crate) fn user_by_email(
    conn: &Connection,
    email: &str,
) -> Result<Option<UserRow>, StorageError> {
    conn.prepare_cached(
        "SELECT id, company_id, email, password_hash, created_at FROM users WHERE email = ?1",
    )?
    .query_row(params![email], |r| {
        Ok(UserRow {
            id: r.get(0)?,
            company_id: r.get(1)?,
            email: r.get(2)?,
            password_hash: r.get(3)?,
            created_at: UnixMillis(r.get(4)?),
        })
    })
    .optional()
    .map_err(Into::into)
}

pub(crate) fn session_user(
    conn: &Connection,
    token_hash: &str,
    now: UnixMillis,
) -> Result<Option<SessionUser>, StorageError> {
    conn.prepare_cached(
        "SELECT u.id, u.company_id, u.email, s.expires_at FROM sessions s \
         JOIN users u ON u.id = s.user_id WHERE s.token_hash = ?1 AND s.expires_at > ?2",
    )?
    .query_row(params![token_hash, now.0], |r| {
        Ok(SessionUser {
            user_id: r.get(0)?,
            company_id: r.get(1)?,
            email: r.get(2)?,
            expires_at: UnixMillis(r.get(3)?),
        })
    })
    .optional()
    .map_err(Into::into)
}

/// Stores a session and drops the user's expired ones and any beyond
/// [`SESSIONS_PER_USER_MAX`], so the table cannot grow without bound.
pub(crate) fn insert_session(conn: &Connection, s: &NewSession) -> Result<(), StorageError> {
    conn.prepare_cached(
        "INSERT INTO sessions (token_hash, user_id, created_at, expires_at) VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![s.token_hash, s.user_id, s.created_at.0, s.expires_at.0])?;
    conn.prepare_cached(
        "DELETE FROM sessions WHERE user_id = ?1 AND (expires_at <= ?2 OR token_hash NOT IN \
         (SELECT token_hash FROM sessions WHERE user_id = ?1 ORDER BY created_at DESC LIMIT ?3))",
    )?
    .execute(params![s.user_id, s.created_at.0, SESSIONS_PER_USER_MAX])?;
    Ok(())
}
