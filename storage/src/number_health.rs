//! Number health as stored: each number's counters (the service adds what
//! it counted since its last write, about once a second, so `dialproof
//! number health` can show them and they survive a restart) and the
//! quarantined numbers. The service adds quarantines; the operator's
//! `number release` deletes them, and the service notices within a tick
//! (it compares the rows with the ones it wrote).
//!
//! Not for: deciding (`dialproof_engine::number_health`) or withholding a
//! number (the lease table).

use crate::admin::{changed, unchanged, Admin};
use crate::error::{Result, StorageError};
use crate::reader::Reader;
use dialproof_engine::e164::PackedNumber;
use dialproof_engine::pool::Pool;
use dialproof_engine::time::UnixMillis;
use rusqlite::{params, Connection};

/// One number's stored health.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NumberHealthRow {
    pub number: String,
    pub leases: u64,
    pub completed: u64,
    pub expired_uncalled: u64,
    pub stray_calls: u64,
    pub last_completion_at: Option<UnixMillis>,
    pub uncalled_in_a_row: u32,
    /// Set when the number is quarantined (from `number_quarantine`).
    pub quarantined_since: Option<UnixMillis>,
}

/// What the service counted for one number since its last write: the
/// counts are added to the stored ones, the later completion kept, and the
/// run replaces the stored one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NumberHealthChange {
    pub number: String,
    pub leases: u32,
    pub completed: u32,
    pub expired_uncalled: u32,
    pub stray_calls: u32,
    pub last_completion_at: Option<UnixMillis>,
    pub uncalled_in_a_row: u32,
}

/// What a restarted service keeps of a stored number: its run and whether
/// it is quarantined (see [`Reader::number_runs`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NumberRun {
    pub number: PackedNumber,
    pub uncalled_in_a_row: u32,
    pub quarantined: bool,
}

/// A quarantined number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Quarantine {
    pub number: String,
    pub pool: Pool,
    pub since: UnixMillis,
}

/// Adds changes to the stored counters (a number's first change makes its
/// row) and adds quarantines (an existing quarantine row is kept as it
/// is). The later of the two last completions stays: `max` of two values
/// is NULL when either is, hence the COALESCE.
pub(crate) fn save(
    conn: &Connection,
    changes: &[NumberHealthChange],
    quarantines: &[Quarantine],
) -> Result<()> {
    let mut upsert = conn.prepare_cached(
        "INSERT INTO number_health (number, leases, completed, expired_uncalled, stray_calls, \
         last_completion_at, uncalled_in_a_row) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) \
         ON CONFLICT(number) DO UPDATE SET leases = leases + excluded.leases, \
         completed = completed + excluded.completed, \
         expired_uncalled = expired_uncalled + excluded.expired_uncalled, \
         stray_calls = stray_calls + excluded.stray_calls, \
         last_completion_at = COALESCE(max(last_completion_at, excluded.last_completion_at), \
         last_completion_at, excluded.last_completion_at), \
         uncalled_in_a_row = excluded.uncalled_in_a_row",
    )?;
    for c in changes {
        upsert.execute(params![
            c.number,
            c.leases,
            c.completed,
            c.expired_uncalled,
            c.stray_calls,
            c.last_completion_at.map(|t| t.0),
            c.uncalled_in_a_row,
        ])?;
    }
    let mut insert = conn.prepare_cached(
        "INSERT OR IGNORE INTO number_quarantine (number, pool, since) VALUES (?1, ?2, ?3)",
    )?;
    for q in quarantines {
        insert.execute(params![q.number, q.pool.as_str(), q.since.0])?;
    }
    Ok(())
}

fn quarantines(conn: &Connection) -> Result<Vec<Quarantine>> {
    let mut stmt =
        conn.prepare_cached("SELECT number, pool, since FROM number_quarantine ORDER BY number")?;
    let rows = stmt.query_map([], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get(2)?))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (number, pool, since) = row?;
        let pool = Pool::parse(&pool)
            .ok_or_else(|| StorageError::Corrupt(format!("unknown pool '{pool}'")))?;
        out.push(Quarantine {
            number,
            pool,
            since: UnixMillis(since),
        });
    }
    Ok(out)
}

fn health_rows(conn: &Connection) -> Result<Vec<NumberHealthRow>> {
    let mut stmt = conn.prepare_cached(
        "SELECT n.number, COALESCE(h.leases, 0), COALESCE(h.completed, 0), \
         COALESCE(h.expired_uncalled, 0), COALESCE(h.stray_calls, 0), h.last_completion_at, \
         COALESCE(h.uncalled_in_a_row, 0), q.since \
         FROM (SELECT number FROM number_health UNION SELECT number FROM number_quarantine) n \
         LEFT JOIN number_health h ON h.number = n.number \
         LEFT JOIN number_quarantine q ON q.number = n.number ORDER BY n.number",
    )?;
    let rows = stmt.query_map([], |r| {
        let count = |i: usize| -> rusqlite::Result<u64> { Ok(r.get::<_, i64>(i)?.max(0) as u64) };
        Ok(NumberHealthRow {
            number: r.get(0)?,
            leases: count(1)?,
            completed: count(2)?,
            expired_uncalled: count(3)?,
            stray_calls: count(4)?,
            last_completion_at: r.get::<_, Option<i64>>(5)?.map(UnixMillis),
            uncalled_in_a_row: r.get(6)?,
            quarantined_since: r.get::<_, Option<i64>>(7)?.map(UnixMillis),
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// The stored numbers with a run of uncalled leases or a quarantine, the
/// only state a restarted service needs in memory (the counts stay here).
/// A stored number that is not `+` and digits has no state to restore.
fn runs(conn: &Connection) -> Result<Vec<NumberRun>> {
    let mut stmt = conn.prepare_cached(
        "SELECT n.number, COALESCE(h.uncalled_in_a_row, 0), q.number IS NOT NULL \
         FROM (SELECT number FROM number_health WHERE uncalled_in_a_row > 0 \
               UNION SELECT number FROM number_quarantine) n \
         LEFT JOIN number_health h ON h.number = n.number \
         LEFT JOIN number_quarantine q ON q.number = n.number",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?, r.get(2)?))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (number, run, quarantined) = row?;
        if let Some(number) = PackedNumber::parse(&number) {
            out.push(NumberRun {
                number,
                uncalled_in_a_row: u32::try_from(run.max(0)).unwrap_or(u32::MAX),
                quarantined,
            });
        }
    }
    Ok(out)
}

impl Reader {
    /// The numbers whose run or quarantine a restarted service restores.
    pub fn number_runs(&self) -> Result<Vec<NumberRun>, StorageError> {
        runs(self.conn())
    }

    /// The quarantined numbers and since when, by number.
    pub fn number_quarantines(&self) -> Result<Vec<Quarantine>, StorageError> {
        quarantines(self.conn())
    }
}

impl Admin {
    /// Every stored number's health, by number (`dialproof number health`).
    pub fn number_health(&self) -> Result<Vec<NumberHealthRow>, StorageError> {
        health_rows(self.conn())
    }

    /// Ends `number`'s quarantine; false if it was not quarantined.
    pub fn release_number(&self, number: &str) -> Result<bool, StorageError> {
        self.change(|c| {
            let n = c
                .prepare_cached("DELETE FROM number_quarantine WHERE number = ?1")?
                .execute([number])?;
            c.prepare_cached("UPDATE number_health SET uncalled_in_a_row = 0 WHERE number = ?1")?
                .execute([number])?;
            if n > 0 {
                changed(true)
            } else {
                unchanged(false)
            }
        })
    }
}
