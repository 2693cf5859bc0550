//! What a replica must tell a promoted standby: the newest moment it holds
//! a commit of, and the leases it committed, newest first.
//!
//! Litestream's restore reports a transaction id that groups many commits
//! and carries no time, so the service writes its own: every row carries
//! the service's timestamps, and under replication a heartbeat in `meta`
//! (`heartbeat_at`, Unix ms) moves forward every second even without
//! traffic. The newest of those is the replica's newest committed moment.
//!
//! Not for: deciding what to hold back after a promotion (the engine's
//! `promotion`) or when to write the heartbeat (the binary).

use crate::error::{Result, StorageError};
use dialproof_engine::time::UnixMillis;
use rusqlite::{Connection, OptionalExtension};

/// Moves the heartbeat to `at`, never backward, in the writer's open
/// transaction.
pub(crate) fn write_heartbeat(conn: &Connection, at: UnixMillis) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO meta (key, value) VALUES ('heartbeat_at', ?1) \
         ON CONFLICT (key) DO UPDATE SET value = max(value, excluded.value)",
    )?
    .execute([at.0])?;
    Ok(())
}

/// The newest moment of a commit the database holds: the heartbeat, the
/// newest verification's creation, the newest outbox row, the newest
/// webhook attempt. Each is the newest row by rowid (insertion order), so
/// this reads four rows, not four tables. `None` for an empty database.
pub(crate) fn newest_committed_moment(conn: &Connection) -> Result<Option<UnixMillis>> {
    const QUERIES: [&str; 4] = [
        "SELECT value FROM meta WHERE key = 'heartbeat_at'",
        "SELECT created_at FROM verifications ORDER BY rowid DESC LIMIT 1",
        "SELECT updated_at FROM webhook_deliveries ORDER BY rowid DESC LIMIT 1",
        "SELECT started_at FROM webhook_attempts ORDER BY rowid DESC LIMIT 1",
    ];
    let mut newest: Option<i64> = None;
    for sql in QUERIES {
        let moment: Option<i64> = conn
            .prepare_cached(sql)?
            .query_row([], |r| r.get(0))
            .optional()?;
        newest = newest.max(moment);
    }
    Ok(newest.map(UnixMillis))
}

/// Calls `f(dial_number, created_at)` for every verification, newest
/// first (by rowid: the order the writer committed them), until `f`
/// returns false. Returns how many rows `f` saw.
pub(crate) fn for_each_lease_newest_first(
    conn: &Connection,
    mut f: impl FnMut(&str, UnixMillis) -> bool,
) -> Result<usize> {
    let mut stmt = conn
        .prepare_cached("SELECT dial_number, created_at FROM verifications ORDER BY rowid DESC")?;
    let mut rows = stmt.query([])?;
    let mut seen = 0;
    while let Some(r) = rows.next()? {
        let number = r
            .get_ref(0)?
            .as_str()
            .map_err(|e| StorageError::Corrupt(format!("verifications.dial_number: {e}")))?;
        seen += 1;
        if !f(number, UnixMillis(r.get(1)?)) {
            break;
        }
    }
    Ok(seen)
}
