//! When the writer copies the WAL back into the database file, and the
//! writer connection's WAL settings that this policy relies on.
//!
//! SQLite's automatic checkpoint is off on the writer connection
//! ([`Checkpointer::new`] turns it off): it is a
//! PASSIVE checkpoint, and under readers that never pause it can never reach
//! the end of the WAL, so the WAL is never reused and grows without bound.
//! Instead the writer, after its commits:
//!
//! - runs `wal_checkpoint(PASSIVE)` every [`CHECKPOINT_EVERY_BATCHES`]
//!   batches, and when the queue has been idle for [`CHECKPOINT_WHEN_IDLE`];
//! - checks the `-wal` file's length (one `stat`) and, once it passes
//!   [`WAL_BYTES_FORCE`], checkpoints at once and, if the WAL still holds
//!   that much, runs `wal_checkpoint(RESTART)`, which waits (at most
//!   [`RESTART_WAIT`]) for readers of old snapshots so that the next commit
//!   writes the WAL from its start again. If readers still block it, the
//!   next try waits for another [`WAL_BYTES_FORCE`] of growth, so one long
//!   reader cannot stall every batch;
//! - on shutdown runs `wal_checkpoint(TRUNCATE)`, leaving an empty WAL.
//!
//! With [`Replication::Litestream`] another process (Litestream) reads the
//! WAL and owns its reset: it holds a read transaction between its own
//! checkpoints, so a RESTART or TRUNCATE from the writer would wait out the
//! busy timeout holding the write lock and then fail, and a reset it did
//! win would make Litestream ship a full snapshot. In that mode the writer
//! runs PASSIVE checkpoints only (at the same moments, shutdown included),
//! takes "busy" as the normal answer, and leaves `journal_size_limit` alone;
//! the WAL's size is then governed by Litestream's settings
//! (`min-checkpoint-page-count`, `checkpoint-interval`, `truncate-page-n`).
//!
//! `journal_size_limit` ([`JOURNAL_SIZE_LIMIT_BYTES`]) makes SQLite shrink
//! the file when the WAL restarts, so the file length is a fair measure of
//! how far the WAL has grown since.
//!
//! Not for: reader or admin connections (readers never commit; the operator
//! CLI keeps SQLite's default), or the settings every connection shares
//! (see `conn`).

use crate::conn::BUSY_TIMEOUT;
use crate::error::Result;
use rusqlite::Connection;
use std::path::PathBuf;
use std::time::Duration;

/// Batches between two PASSIVE checkpoints while the writer is busy.
pub(crate) const CHECKPOINT_EVERY_BATCHES: u32 = 64;
/// Queue idle time after which pending WAL frames are checkpointed.
pub(crate) const CHECKPOINT_WHEN_IDLE: Duration = Duration::from_millis(500);
/// WAL size that forces a checkpoint (and a RESTART if readers kept the
/// WAL from being reused).
pub(crate) const WAL_BYTES_FORCE: u64 = 16 * 1024 * 1024;
/// The longest the writer waits for readers during a RESTART checkpoint.
/// Reader jobs are single queries, so this is ample; if it is not, the
/// checkpoint tries again after more growth.
pub(crate) const RESTART_WAIT: Duration = Duration::from_millis(200);
/// Size SQLite truncates the WAL file to when it restarts it.
const JOURNAL_SIZE_LIMIT_BYTES: i64 = WAL_BYTES_FORCE as i64;

/// Who else works on the WAL, which decides how far the writer's
/// checkpoints may go (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Replication {
    /// The service alone: PASSIVE, RESTART when the WAL grew, TRUNCATE on
    /// shutdown.
    #[default]
    Off,
    /// Litestream replicates the file and resets the WAL itself: PASSIVE
    /// only.
    Litestream,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Passive,
    Restart,
    Truncate,
}

impl Mode {
    fn sql(self) -> &'static str {
        match self {
            Mode::Passive => "PRAGMA wal_checkpoint(PASSIVE)",
            Mode::Restart => "PRAGMA wal_checkpoint(RESTART)",
            Mode::Truncate => "PRAGMA wal_checkpoint(TRUNCATE)",
        }
    }
}

/// What `PRAGMA wal_checkpoint` reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Outcome {
    /// The checkpoint could not finish because of another connection.
    busy: bool,
    /// Frames in the WAL.
    log_frames: i64,
    /// Frames already copied into the database file.
    checkpointed_frames: i64,
}

/// The writer's checkpoint bookkeeping.
#[derive(Debug)]
pub(crate) struct Checkpointer {
    replication: Replication,
    wal_path: PathBuf,
    page_bytes: u64,
    batches_since: u32,
    /// The `-wal` length that forces the next checkpoint.
    force_at_bytes: u64,
    /// Checkpoints run (all modes), for `Store::stats`.
    pub(crate) runs: u64,
}

impl Checkpointer {
    /// Takes over checkpointing on the writer connection `conn` of the
    /// database at `db_path`. Call it before the first write on `conn`, so
    /// that no commit triggers SQLite's own checkpoint.
    pub(crate) fn new(
        conn: &Connection,
        db_path: &std::path::Path,
        replication: Replication,
    ) -> Result<Checkpointer> {
        // 0 turns off SQLite's automatic checkpoint after commits; the
        // writer runs them itself (see the module docs).
        conn.pragma_update(None, "wal_autocheckpoint", 0)?;
        if replication == Replication::Off {
            conn.pragma_update(None, "journal_size_limit", JOURNAL_SIZE_LIMIT_BYTES)?;
        }
        let mut wal_path = db_path.as_os_str().to_owned();
        wal_path.push("-wal");
        let page_bytes = conn
            .pragma_query_value(None, "page_size", |r| r.get::<_, i64>(0))
            .ok()
            .and_then(|p| u64::try_from(p).ok())
            .filter(|p| *p > 0)
            .unwrap_or(4096);
        Ok(Checkpointer {
            replication,
            wal_path: wal_path.into(),
            page_bytes,
            batches_since: 0,
            force_at_bytes: WAL_BYTES_FORCE,
            runs: 0,
        })
    }

    /// Whether there are commits since the last checkpoint (so an idle
    /// period is worth waking up for).
    pub(crate) fn dirty(&self) -> bool {
        self.batches_since > 0
    }

    pub(crate) fn after_commit(&mut self, conn: &Connection) {
        self.batches_since = self.batches_since.saturating_add(1);
        if self.wal_bytes() > self.force_at_bytes || self.batches_since >= CHECKPOINT_EVERY_BATCHES
        {
            self.checkpoint(conn);
        }
    }

    pub(crate) fn when_idle(&mut self, conn: &Connection) {
        if self.dirty() {
            self.checkpoint(conn);
        }
    }

    pub(crate) fn on_shutdown(&mut self, conn: &Connection) {
        let mode = match self.replication {
            Replication::Off => Mode::Truncate,
            Replication::Litestream => Mode::Passive,
        };
        if let Some(o) = run(conn, mode) {
            self.runs += 1;
            if o.busy && mode == Mode::Truncate {
                tracing::warn!(
                    log_frames = o.log_frames,
                    checkpointed_frames = o.checkpointed_frames,
                    "final WAL checkpoint was blocked by another connection"
                );
            }
        }
        self.batches_since = 0;
    }

    fn wal_bytes(&self) -> u64 {
        std::fs::metadata(&self.wal_path)
            .map(|m| m.len())
            .unwrap_or(0)
    }

    fn checkpoint(&mut self, conn: &Connection) {
        self.batches_since = 0;
        let Some(passive) = run(conn, Mode::Passive) else {
            return;
        };
        self.runs += 1;
        let log_bytes = u64::try_from(passive.log_frames).unwrap_or(0) * self.page_bytes;
        if self.replication == Replication::Litestream {
            // PASSIVE is all the writer does; a busy or partial checkpoint
            // is expected (Litestream's read point holds it back), and the
            // file only shrinks when Litestream truncates it, so the next
            // forced checkpoint waits for another step of growth.
            self.force_at_bytes = self.wal_bytes().max(log_bytes) + WAL_BYTES_FORCE;
            return;
        }
        if log_bytes < WAL_BYTES_FORCE {
            // Small enough: SQLite reuses the WAL from its start once a
            // checkpoint has caught up and no reader is behind.
            self.force_at_bytes = WAL_BYTES_FORCE;
            return;
        }
        if self.restart(conn) {
            self.force_at_bytes = WAL_BYTES_FORCE;
        } else {
            // Readers held on; try again after another step of growth
            // rather than stall every batch by RESTART_WAIT.
            self.force_at_bytes = self.wal_bytes().saturating_add(WAL_BYTES_FORCE);
            tracing::warn!(
                wal_bytes = self.wal_bytes(),
                "WAL RESTART checkpoint blocked by readers; will retry"
            );
        }
    }

    /// A RESTART checkpoint with a short busy wait; true if it finished.
    fn restart(&mut self, conn: &Connection) -> bool {
        if conn.busy_timeout(RESTART_WAIT).is_err() {
            return false;
        }
        let outcome = run(conn, Mode::Restart);
        if let Err(e) = conn.busy_timeout(BUSY_TIMEOUT) {
            tracing::warn!(error = %e, "could not restore the writer's busy timeout");
        }
        match outcome {
            Some(o) => {
                self.runs += 1;
                !o.busy
            }
            None => false,
        }
    }
}

/// Runs one checkpoint; a failure is logged, not fatal: the data is safe in
/// the WAL and the next checkpoint tries again.
fn run(conn: &Connection, mode: Mode) -> Option<Outcome> {
    let result = conn.query_row(mode.sql(), [], |row| {
        Ok(Outcome {
            busy: row.get::<_, i64>(0)? != 0,
            log_frames: row.get(1)?,
            checkpointed_frames: row.get(2)?,
        })
    });
    match result {
        Ok(o) => {
            tracing::trace!(?mode, ?o, "wal checkpoint");
            Some(o)
        }
        Err(e) => {
            tracing::warn!(?mode, error = %e, "wal checkpoint failed");
            None
        }
    }
}
