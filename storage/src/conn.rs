//! Opening a SQLite connection with the settings every Dialproof connection
//! needs: WAL, `synchronous=NORMAL`, foreign keys, a busy timeout, and
//! the page size of a file it creates.
//!
//! Why these: WAL lets the service's readers, its single writer and the
//! operator CLI (another process) work on one file at once; NORMAL syncs only
//! at checkpoints, which survives any process crash and may lose the last
//! commits only on power loss.
//!
//! Not for: schema (see `schema`), or the writer's WAL settings and deciding
//! when to checkpoint (see `checkpoint`, which owns both, so that the
//! settings and the policy that relies on them live in one file).

use crate::error::{Result, StorageError};
use crate::wal_vfs;
use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags};
use std::path::Path;
use std::time::Duration;

/// How long a statement waits for another connection's lock before failing
/// with SQLITE_BUSY. The operator CLI's transactions are tiny, so waiting is
/// better than failing a create.
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_millis(5000);

/// Prepared statements kept per connection; each role uses fewer than this.
const STATEMENT_CACHE_CAPACITY: usize = 64;

/// The page size of a database this build creates (SQLite's default is
/// 4096). A create adds one entry to each of the verification table's
/// indexes, and two of them (the phone's, the pending dial number's) are
/// ordered by values that arrive at random, so every create dirties a page
/// of its own in each: the WAL then carries whole pages for a few dozen
/// bytes of change, and the checkpoint copies them back. With 1 KiB pages a
/// batch writes about a quarter of the bytes; measured on two cores
/// (benches/README.md, "Smaller pages for new databases"), creates at 8
/// connections went 1.13x faster with half the p99. The price is in range
/// scans, which read four times as many pages: the dashboard's list at a
/// million rows is about 1.5x slower (under 50 ms a week's page). A
/// verification row (a few hundred bytes) still fits one page; longer ones
/// spill to overflow pages, which SQLite reads as one row. An existing
/// file keeps the page size it was created with (changing it needs a
/// VACUUM, which WAL mode forbids).
pub(crate) const NEW_DATABASE_PAGE_BYTES: u32 = 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// The store's single writer. Its WAL settings (no automatic
    /// checkpoint, a journal size limit) are applied by
    /// `checkpoint::Checkpointer::new`, which the store creates right after
    /// opening this connection. Its WAL file is written one commit at a
    /// time (`wal_vfs`), which needs a page cache that never spills
    /// frames before a commit (below).
    Writer,
    /// The store's other writing connections: the migration at open and
    /// the checkpoint thread. SQLite's own VFS: a migration's transaction
    /// may be large enough to spill its page cache.
    Upkeep,
    /// A reader thread or a standalone `Reader`: `query_only`.
    Reader,
    /// The operator CLI: small transactions, SQLite's default checkpointing.
    Admin,
}

pub(crate) fn open(path: &Path, role: Role) -> Result<Connection> {
    let flags = match role {
        // A reader must not create an empty database where none was migrated.
        Role::Reader => OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        Role::Writer | Role::Upkeep | Role::Admin => {
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX
        }
    };
    let conn = if role == Role::Writer {
        wal_vfs::register().map_err(StorageError::Sqlite)?;
        Connection::open_with_flags_and_vfs(path, flags, wal_vfs::NAME)?
    } else {
        Connection::open_with_flags(path, flags)?
    };
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE_CAPACITY);
    if role != Role::Reader {
        // Only a file with no page yet takes it, and only before the
        // switch to WAL below writes the first page.
        conn.pragma_update(None, "page_size", NEW_DATABASE_PAGE_BYTES)?;
    }
    // The journal mode is stored in the file; asking again is a no-op that
    // also proves the file really is in WAL mode.
    let mode: String =
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StorageError::Sqlite(format!(
            "could not switch {} to WAL (journal_mode is '{mode}')",
            path.display()
        )));
    }
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    if role == Role::Reader {
        conn.pragma_update(None, "query_only", "ON")?;
    }
    if role == Role::Writer {
        prepare_for_batches(&conn)?;
    }
    Ok(conn)
}

/// Settings for the writer's group commit, where the same few cached
/// statements run for every op, and a batch runs again with a savepoint
/// per op when one op failed after writing (see the writer's `batch`).
fn prepare_for_batches(conn: &Connection) -> Result<()> {
    // A savepoint, and a statement that may fail half-way, keeps a journal
    // of the pages it changed. On disk (SQLite's default once it passes 64
    // KiB) that is a `pwrite` to a temporary file for every first change of
    // a page: when every op had a savepoint, a tenth of the writer's time in
    // a saturated leased SIP run. The journal is emptied at each RELEASE or
    // statement end, so memory holds one op's pages at most.
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    // Without the query planner stability guarantee, SQLite marks a
    // parameter compared in a WHERE term (`livemode = ?4`, `lease_generation
    // = ?2`) so that binding it a new value, or rebinding 0 or 1, re-prepares
    // the statement on its next step, to re-plan for that value: parsing
    // and planning on every call of a cached statement. The writer's
    // statements find their rows by key, so one plan fits every value.
    // (Readers keep it off: a read that binds `livemode` can use the
    // partial indexes for test rows only through that re-planning.)
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    // A transaction whose dirty pages outgrow the page cache would write
    // some of them to the WAL before its commit ("spill"); `wal_vfs` holds
    // WAL frames until a commit frame comes, so the writer must never write
    // frames that no commit follows. Its transactions are bounded (a batch
    // of ops, 256 number health rows, 2,000 purged test rows), so the
    // cache outgrows its 2 MiB by a few MiB at most instead.
    conn.pragma_update(None, "cache_spill", "OFF")?;
    Ok(())
}

/// Creates the directory that will hold the database file, if it is missing.
pub(crate) fn create_parent_dir(path: &Path) -> Result<()> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => std::fs::create_dir_all(dir).map_err(|e| {
            StorageError::Sqlite(format!("cannot create directory {}: {e}", dir.display()))
        }),
        _ => Ok(()),
    }
}
