//! When the WAL is copied back into the database file (by the store's
//! checkpoint thread), and the writer connection's WAL settings that this
//! policy relies on.
//!
//! SQLite's automatic checkpoint is off on the writer connection
//! ([`prepare_writer`] turns it off): it is a
//! PASSIVE checkpoint, and under readers that never pause it can never reach
//! the end of the WAL, so the WAL is never reused and grows without bound.
//! It would also run inside the committing request's time. Instead a
//! checkpoint thread of the store, with a connection of its own, is rung
//! by the writer every [`CHECKPOINT_EVERY_BATCHES`] commits (a doorbell that
//! never blocks it; ringing it after every commit woke that thread for
//! nothing 63 times in 64), and together they:
//!
//! - runs `wal_checkpoint(PASSIVE)` every [`CHECKPOINT_EVERY_BATCHES`]
//!   batches, and when no batch has committed for [`CHECKPOINT_WHEN_IDLE`];
//! - checks the `-wal` file's length (one `stat`) and, once it passes
//!   [`WAL_BYTES_FORCE`], checkpoints at once and, if the WAL still holds
//!   that much, runs `wal_checkpoint(RESTART)`, which waits (at most
//!   [`RESTART_WAIT`]) for readers of old snapshots so that the next commit
//!   writes the WAL from its start again. This forced step is the
//!   writer's own, between two batches: a RESTART (or TRUNCATE) from
//!   another connection waits for every reader, the writer's own
//!   transaction included, while the writer waits for it, so beside a
//!   busy writer it never succeeds, and a RESTART only lets a transaction
//!   that begins after it reset the WAL. If readers still block it, the
//!   next try waits for another [`WAL_BYTES_FORCE`] of growth, so one long
//!   reader cannot stall every batch;
//! - on shutdown, after the writer's last commit, runs
//!   `wal_checkpoint(TRUNCATE)`, leaving an empty WAL.
//!
//! Why a thread of its own: a PASSIVE checkpoint copies pages into the
//! database file and syncs it, milliseconds that the writer used to spend
//! between two batches, so every 64th create of a client creating one at a
//! time waited for it (`tools/lone-create-ab.sh`: p99 3.1 ms against a p50
//! of 0.27 ms; 0.8 ms since). PASSIVE does not block writers, so it runs
//! beside the commits instead.
//!
//! With [`Replication::Litestream`] another process (Litestream) reads the
//! WAL and owns its reset: it holds a read transaction between its own
//! checkpoints, so a RESTART or TRUNCATE of ours would wait out the busy
//! timeout holding the write lock and then fail, and a reset it did
//! win would make Litestream ship a full snapshot. In that mode the
//! checkpoint thread runs PASSIVE checkpoints only (at the same moments,
//! shutdown included), takes "busy" as the normal answer, and leaves `journal_size_limit` alone;
//! the WAL's size is then governed by Litestream's settings
//! (`min-checkpoint-page-count`, `checkpoint-interval`, `truncate-page-n`).
//!
//! The database file is synced by the checkpoint thread after each of its
//! checkpoints (`fdatasync` through a read-only handle of its own). SQLite
//! syncs it only when a checkpoint reaches the end of the WAL, and beside a
//! busy writer only the writer's forced checkpoint does: it then flushed
//! every page the thread's partial checkpoints had copied since the last
//! forced one, about 20 ms inside the writer each time the WAL wrapped
//! (every 0.7-0.85 s at 4,800 leased calls a second), while every call
//! waited for its commit (benches/README.md, "Background threads at a lower
//! priority"). Synced as they are copied, those pages are on disk by then.
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
use crate::stats::Counters;
use crossbeam_channel::{Receiver, RecvTimeoutError};
use rusqlite::Connection;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
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

/// Who else works on the WAL, which decides how far the store's
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

/// The checkpoint thread's bookkeeping.
#[derive(Debug)]
pub(crate) struct Checkpointer {
    replication: Replication,
    wal_path: PathBuf,
    page_bytes: u64,
    /// The writer's committed batches when the last checkpoint started.
    checkpointed_at_batch: u64,
    /// The writer's committed batches, as last read.
    batches: u64,
    /// The `-wal` length that forces the next checkpoint.
    force_at_bytes: u64,
    /// Checkpoints run (all modes), for `Store::stats`.
    pub(crate) runs: u64,
    /// How many of `runs` were added to the store's counters.
    published: u64,
    /// The database file, read-only, for the checkpoint thread's syncs
    /// (`None` for the writer's own checkpointer, or if it could not be
    /// opened: SQLite's own syncs still run).
    db_file: Option<std::fs::File>,
}

/// Sets up the writer connection `conn` for this policy. Call it before
/// the first write on `conn`, so that no commit runs SQLite's own
/// checkpoint.
pub(crate) fn prepare_writer(conn: &Connection, replication: Replication) -> Result<()> {
    // 0 turns off SQLite's automatic checkpoint after commits; the
    // checkpoint thread runs them (see the module docs).
    conn.pragma_update(None, "wal_autocheckpoint", 0)?;
    if replication == Replication::Off {
        // The writer restarts the WAL after a complete checkpoint; this
        // is the length it truncates the file to then.
        conn.pragma_update(None, "journal_size_limit", JOURNAL_SIZE_LIMIT_BYTES)?;
    }
    Ok(())
}

impl Checkpointer {
    /// Checkpoints through `conn` (the checkpoint thread's own connection)
    /// for the database at `db_path`.
    pub(crate) fn new(
        conn: &Connection,
        db_path: &std::path::Path,
        replication: Replication,
    ) -> Result<Checkpointer> {
        prepare_writer(conn, replication)?;
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
            checkpointed_at_batch: 0,
            batches: 0,
            force_at_bytes: WAL_BYTES_FORCE,
            runs: 0,
            published: 0,
            db_file: None,
        })
    }

    /// The checkpoint thread's checkpointer: it also syncs the database
    /// file at `db_path` after each of its checkpoints (module docs).
    pub(crate) fn syncing_database_file(mut self, db_path: &std::path::Path) -> Checkpointer {
        self.db_file = std::fs::File::open(db_path).ok();
        self
    }

    /// The checkpoint thread's step: the writer has committed `batches`
    /// batches in all; checkpoints if [`CHECKPOINT_EVERY_BATCHES`] came
    /// since the last one.
    pub(crate) fn after_commits(&mut self, conn: &Connection, batches: u64) {
        self.batches = batches;
        let since = batches.saturating_sub(self.checkpointed_at_batch);
        if since >= u64::from(CHECKPOINT_EVERY_BATCHES) {
            self.checkpoint(conn);
            self.sync_database_file();
        }
    }

    /// Flushes the pages this thread's checkpoints copied into the
    /// database file, so that the writer's next complete checkpoint, whose
    /// own sync waits for all of them, finds them written (module docs).
    /// A failure is logged: SQLite's own sync at that checkpoint reports
    /// it to the writer again, which is where it counts.
    fn sync_database_file(&self) {
        if let Some(file) = &self.db_file {
            if let Err(e) = file.sync_data() {
                tracing::warn!(error = %e, "syncing the database file after a checkpoint failed");
            }
        }
    }

    /// The writer's step after each commit, on its own connection between
    /// two batches: once the WAL passed its forcing size, a checkpoint
    /// and, if it is still that long, a RESTART (see the module docs).
    pub(crate) fn force_if_grown(&mut self, conn: &Connection) {
        if self.wal_bytes() > self.force_at_bytes {
            self.checkpoint(conn);
        }
    }

    /// Adds the checkpoints run since the last call to `counters`.
    pub(crate) fn publish(&mut self, counters: &Counters) {
        let new = self.runs - self.published;
        if new > 0 {
            counters.checkpoints.fetch_add(new, Ordering::Relaxed);
            self.published = self.runs;
        }
    }

    /// No commit for [`CHECKPOINT_WHEN_IDLE`]: checkpoints if any of the
    /// writer's `batches` came since the last checkpoint.
    pub(crate) fn when_idle(&mut self, conn: &Connection, batches: u64) {
        self.batches = batches;
        if batches > self.checkpointed_at_batch {
            self.checkpoint(conn);
            self.sync_database_file();
        }
    }

    /// After the writer's last commit (`batches` in all).
    pub(crate) fn on_shutdown(&mut self, conn: &Connection, batches: u64) {
        self.batches = batches;
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
        self.checkpointed_at_batch = self.batches;
    }

    fn wal_bytes(&self) -> u64 {
        std::fs::metadata(&self.wal_path)
            .map(|m| m.len())
            .unwrap_or(0)
    }

    fn checkpoint(&mut self, conn: &Connection) {
        self.checkpointed_at_batch = self.batches;
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

/// The checkpoint thread: checkpoints as the policy says each time the
/// writer rings `doorbell` (every [`CHECKPOINT_EVERY_BATCHES`] commits) and
/// when no commit came for [`CHECKPOINT_WHEN_IDLE`]; once the writer is gone (the doorbell's sender
/// dropped after its last batch), the shutdown checkpoint, then it ends.
pub(crate) fn run_thread(
    conn: Connection,
    mut checkpointer: Checkpointer,
    doorbell: Receiver<()>,
    counters: Arc<Counters>,
) {
    let batches = || counters.batches_committed.load(Ordering::Acquire);
    // The writer rings only every CHECKPOINT_EVERY_BATCHES commits, so a
    // quiet doorbell does not mean a quiet writer: idle is a wait in which
    // the count of commits did not move.
    let mut seen = batches();
    loop {
        match doorbell.recv_timeout(CHECKPOINT_WHEN_IDLE) {
            Ok(()) => checkpointer.after_commits(&conn, batches()),
            Err(RecvTimeoutError::Timeout) => {
                let now = batches();
                if now == seen {
                    checkpointer.when_idle(&conn, now);
                }
            }
            Err(RecvTimeoutError::Disconnected) => break,
        }
        seen = batches();
        checkpointer.publish(&counters);
    }
    checkpointer.on_shutdown(&conn, batches());
    checkpointer.publish(&counters);
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
