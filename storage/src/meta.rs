//! The `meta` table's change counter: how the service learns that the
//! operator changed companies, keys or dedicated numbers.
//!
//! Every operator change that changed something bumps it in its own
//! transaction (see `Admin`); the service polls it through
//! `Reader::change_version` and reloads its in-memory copies when it moved.
//!
//! Not for: the schema version (that is `PRAGMA user_version`, see
//! `schema`) or the service's heartbeat row in the same table (see
//! `replica`).

use crate::error::{Result, StorageError};
use rusqlite::Connection;

/// The current change counter.
pub(crate) fn change_version(conn: &Connection) -> Result<i64> {
    let mut stmt = conn.prepare_cached("SELECT value FROM meta WHERE key = 'change_version'")?;
    let mut rows = stmt.query([])?;
    match rows.next()? {
        Some(r) => Ok(r.get(0)?),
        None => Err(StorageError::Corrupt(
            "meta.change_version is missing".into(),
        )),
    }
}

/// Moves the counter on by one, in the caller's transaction.
pub(crate) fn bump_change_version(conn: &Connection) -> Result<()> {
    conn.prepare_cached("UPDATE meta SET value = value + 1 WHERE key = 'change_version'")?
        .execute([])?;
    Ok(())
}
