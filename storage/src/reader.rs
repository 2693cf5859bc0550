//! Read-only queries, and the reader threads that run them for the service.
//!
//! The service reads SQLite on a coroutine's thread only for point reads
//! (`Store::read_here`, see `local_reader`); everything else goes through
//! `Store::read`, which queues a job to one of `Options::readers` threads,
//! each with its own `query_only` connection, and the reply carries the
//! result back. Hot
//! lookups (keys, companies) are served from memory by the binary, which
//! reloads them when [`Reader::change_version`] moves; readers serve GETs,
//! recovery and those reloads.
//!
//! Not for: writes of any kind (the connection refuses them), holding a
//! read transaction open across jobs (each query is its own snapshot, which
//! lets WAL checkpoints make progress), or queries the operator shares
//! (those live in `companies`, `deliveries` and `users`; the methods here
//! only call them).

use crate::companies;
use crate::conn::{self, Role};
use crate::deliveries::{self, DeliveryFilter, DeliveryLogEntry};
use crate::error::{Result, StorageError};
use crate::failpoints::{FailPoints, Point};
use crate::meta;
use crate::rows::{
    collect_rows, delivery_from_row, first_row, verification_from_row, verification_view_from_row,
    CompanyRow, DeliveryRow, KeyRow, VerificationRow, VerificationView, DELIVERY_COLUMNS,
    VERIFICATION_COLUMNS, VERIFICATION_VIEW_BY_OWNER,
};
use crate::schema;
use crate::users::{self, SessionUser, UserRow};
use crossbeam_channel::Receiver;
use dialproof_engine::time::UnixMillis;
use dialproof_engine::CompanyId;
use rusqlite::Connection;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

/// Most rows [`Reader::due_deliveries`] returns at once.
pub const DUE_DELIVERIES_LIMIT_MAX: usize = 10_000;

/// One pending verification's lease, as [`Reader::for_each_pending_lease`]
/// lends it: borrowed from the row being read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PendingLease<'a> {
    pub id: &'a str,
    pub dial_number: &'a str,
    pub lease_generation: u32,
    pub expires_at: UnixMillis,
}

/// A read-only connection with Dialproof's queries.
pub struct Reader {
    conn: Connection,
}

impl Reader {
    /// Opens a standalone reader on an existing, migrated database (tests,
    /// tools). The service gets its readers through `Store::read` instead.
    pub fn open(path: &Path) -> Result<Reader> {
        let conn = conn::open(path, Role::Reader)?;
        schema::check_version(&conn)?;
        Ok(Reader { conn })
    }

    pub(crate) fn from_connection(conn: Connection) -> Reader {
        Reader { conn }
    }

    /// The connection, for the queries kept in files of their own
    /// (`dashboard_ops`, `verification_list`).
    pub(crate) fn conn(&self) -> &Connection {
        &self.conn
    }

    /// The verification `id` if it belongs to `company_id`; another
    /// company's id is `None`, exactly like an unknown one.
    /// The stored idempotency key `key` of `company` in mode `livemode`, if
    /// created after `expired_before` (a retry whose key is not in the
    /// binary's memory).
    pub fn idempotency_key(
        &self,
        (company_id, livemode): (CompanyId, bool),
        key: &str,
        expired_before: UnixMillis,
    ) -> Result<Option<crate::StoredKey>, StorageError> {
        crate::idempotency::lookup(&self.conn, (company_id, livemode), key, expired_before)
    }

    /// How many idempotency keys are stored.
    pub fn idempotency_key_count(&self) -> Result<u64, StorageError> {
        crate::idempotency::count(&self.conn)
    }

    pub fn verification(
        &self,
        id: &str,
        company_id: CompanyId,
    ) -> Result<Option<VerificationRow>, StorageError> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {VERIFICATION_COLUMNS} FROM verifications WHERE id = ?1 AND company_id = ?2"
        ))?;
        first_row(
            &mut stmt,
            rusqlite::params![id, company_id],
            verification_from_row,
        )
    }

    /// The verification `id` if `owner` (a company's key of one mode) may
    /// see it: the API's reads. Another company's or mode's is `None`.
    pub fn owned_verification(
        &self,
        id: &str,
        owner: crate::rows::Owner,
    ) -> Result<Option<VerificationRow>, StorageError> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {VERIFICATION_COLUMNS} FROM verifications \
             WHERE id = ?1 AND company_id = ?2 AND livemode = ?3"
        ))?;
        first_row(
            &mut stmt,
            rusqlite::params![id, owner.company_id, owner.livemode],
            verification_from_row,
        )
    }

    /// `show` applied to the view of verification `id`, if `owner` may see
    /// it (as [`Self::owned_verification`]): the API's GET, which renders
    /// the view straight from SQLite's buffers without decoding the row.
    pub fn owned_verification_view<T>(
        &self,
        id: &str,
        owner: crate::rows::Owner,
        show: impl FnOnce(VerificationView<'_>) -> T,
    ) -> Result<Option<T>, StorageError> {
        let mut stmt = self.conn.prepare_cached(VERIFICATION_VIEW_BY_OWNER)?;
        let mut rows = stmt.query(rusqlite::params![id, owner.company_id, owner.livemode])?;
        match rows.next()? {
            Some(r) => Ok(Some(show(verification_view_from_row(r)?))),
            None => Ok(None),
        }
    }

    /// The dashboard user with this email, if any.
    pub fn user_by_email(&self, email: &str) -> Result<Option<UserRow>, StorageError> {
        users::user_by_email(&self.conn, email)
    }

    /// The user of a live (unexpired at `now`) session.
    pub fn session_user(
        &self,
        token_hash: &str,
        now: UnixMillis,
    ) -> Result<Option<SessionUser>, StorageError> {
        users::session_user(&self.conn, token_hash, now)
    }

    /// Every API key, revoked ones included (the binary decides what a
    /// revoked key means).
    pub fn load_keys(&self) -> Result<Vec<KeyRow>, StorageError> {
        companies::keys(&self.conn, None)
    }

    /// Every company, by id.
    pub fn load_companies(&self) -> Result<Vec<CompanyRow>, StorageError> {
        companies::companies(&self.conn)
    }

    /// `(number, company_id)` for every number reserved to one company.
    pub fn load_dedicated_numbers(&self) -> Result<Vec<(String, CompanyId)>, StorageError> {
        companies::dedicated_numbers(&self.conn)
    }

    /// A counter every operator change increments; poll it and reload keys,
    /// companies and dedications when it moved.
    pub fn change_version(&self) -> Result<i64, StorageError> {
        meta::change_version(&self.conn)
    }

    /// Every verification still `pending`, oldest first: what recovery
    /// rebuilds the lease table from (and expires, if its TTL ran out).
    pub fn pending_verifications(&self) -> Result<Vec<VerificationRow>, StorageError> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {VERIFICATION_COLUMNS} FROM verifications \
             WHERE status = 'pending' ORDER BY created_at, id"
        ))?;
        collect_rows(&mut stmt, [], verification_from_row)
    }

    /// Calls `f` with the lease and expiry of every pending verification, in
    /// insertion order, and returns how many there were. What recovery
    /// needs, without a `VerificationRow` per row: restarting with a million
    /// pending verifications then holds only what `f` keeps, not every
    /// phone, URL and note (and reads four columns instead of seventeen).
    /// `rowid` order comes straight from the partial index on pending rows
    /// (its entries sort by rowid under the one status), so SQLite does not
    /// sort.
    pub fn for_each_pending_lease(
        &self,
        mut f: impl FnMut(PendingLease<'_>),
    ) -> Result<usize, StorageError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, dial_number, lease_generation, expires_at FROM verifications \
             WHERE status = 'pending' ORDER BY rowid",
        )?;
        let mut rows = stmt.query([])?;
        let mut count = 0;
        while let Some(r) = rows.next()? {
            let generation: i64 = r.get(2)?;
            f(PendingLease {
                id: text_ref(r, 0, "verifications.id")?,
                dial_number: text_ref(r, 1, "verifications.dial_number")?,
                lease_generation: u32::try_from(generation).map_err(|_| {
                    StorageError::Corrupt(format!(
                        "verifications.lease_generation = {generation} is out of range"
                    ))
                })?,
                expires_at: UnixMillis(r.get(3)?),
            });
            count += 1;
        }
        Ok(count)
    }

    /// The newest moment the database holds a commit of (see `replica`):
    /// what a promoted standby takes as the start of the lost window.
    pub fn newest_committed_moment(&self) -> Result<Option<UnixMillis>, StorageError> {
        crate::replica::newest_committed_moment(&self.conn)
    }

    /// Every verification's `(dial_number, created_at)`, newest first,
    /// until `f` returns false; returns how many `f` saw.
    pub fn for_each_lease_newest_first(
        &self,
        f: impl FnMut(&str, UnixMillis) -> bool,
    ) -> Result<usize, StorageError> {
        crate::replica::for_each_lease_newest_first(&self.conn, f)
    }

    /// The outbox rows of one verification (at most one today), for the
    /// dashboard and tests.
    pub fn deliveries_for_verification(
        &self,
        verification_id: &str,
    ) -> Result<Vec<DeliveryRow>, StorageError> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries \
             WHERE verification_id = ?1 ORDER BY id"
        ))?;
        collect_rows(&mut stmt, [verification_id], delivery_from_row)
    }

    /// Pending outbox rows whose next attempt is due at `now`, earliest
    /// first (by due moment, then id), at most `limit` (capped at
    /// [`DUE_DELIVERIES_LIMIT_MAX`]). With `from` (a due moment and an id),
    /// only the rows at or after that place in the order: the webhook
    /// driver's refill, which continues where its last read left rows.
    pub fn due_deliveries(
        &self,
        now: UnixMillis,
        from: Option<(UnixMillis, i64)>,
        limit: usize,
    ) -> Result<Vec<DeliveryRow>, StorageError> {
        let limit = limit.min(DUE_DELIVERIES_LIMIT_MAX) as i64;
        // No place: the lowest one, so every due row is at or after it. A
        // row value, so SQLite seeks the due index to the place.
        let (from_due, from_id) = from.map_or((i64::MIN, i64::MIN), |(due, id)| (due.0, id));
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries \
             WHERE state = 'pending' AND next_attempt_at <= ?1 \
             AND (next_attempt_at, id) >= (?3, ?4) \
             ORDER BY next_attempt_at, id LIMIT ?2"
        ))?;
        collect_rows(
            &mut stmt,
            rusqlite::params![now.0, limit, from_due, from_id],
            delivery_from_row,
        )
    }
}

/// How many outbox rows are still pending, and when the oldest was
/// committed (`None` when there is none), for live verifications; test
/// mode's pending rows are counted apart (a client's CI receiver that went
/// away must not look like a live backlog). For the operators' metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Undelivered {
    pub count: u64,
    pub oldest_created_at: Option<UnixMillis>,
    /// Pending rows of test-mode verifications.
    pub test_count: u64,
}

impl Reader {
    /// The pending outbox rows (see [`Undelivered`]). Walks the pending
    /// rows (the `state` index finds them; each carries its mode), so
    /// callers run it at a slow cadence.
    pub fn undelivered(&self) -> Result<Undelivered, StorageError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT livemode, COUNT(*), MIN(created_at) FROM webhook_deliveries \
             WHERE state = 'pending' GROUP BY livemode",
        )?;
        let mut found = Undelivered {
            count: 0,
            oldest_created_at: None,
            test_count: 0,
        };
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, Option<i64>>(2)?,
            ))
        })?;
        for row in rows {
            let (live, count, oldest) = row?;
            let count = u64::try_from(count).unwrap_or(0);
            if live != 0 {
                found.count = count;
                found.oldest_created_at = oldest.map(UnixMillis);
            } else {
                found.test_count = count;
            }
        }
        Ok(found)
    }
}

/// The webhook sender's lookups (see `deliveries`).
impl Reader {
    /// One outbox row by id.
    pub fn delivery(&self, id: i64) -> Result<Option<DeliveryRow>, StorageError> {
        deliveries::delivery(&self.conn, id)
    }

    /// One company by id, read fresh (secrets and development URLs as they
    /// are now, not as a cache last saw them).
    pub fn company(&self, id: CompanyId) -> Result<Option<CompanyRow>, StorageError> {
        companies::company(&self.conn, id)
    }

    /// The delivery log (see `Admin::delivery_log`).
    pub fn delivery_log(
        &self,
        filter: &DeliveryFilter,
    ) -> Result<Vec<DeliveryLogEntry>, StorageError> {
        deliveries::log(&self.conn, filter)
    }
}

/// Column `index` of `r` as text borrowed from the row (no allocation).
fn text_ref<'r>(r: &'r rusqlite::Row<'_>, index: usize, column: &str) -> Result<&'r str> {
    r.get_ref(index)?
        .as_str()
        .map_err(|e| StorageError::Corrupt(format!("{column}: {e}")))
}

/// A queued read: called with the thread's reader, or with the error that
/// kept the job from running (full queue, shutdown, fail point).
pub(crate) type ReadTask = Box<dyn FnOnce(Result<&Reader, StorageError>) + Send + 'static>;

pub(crate) enum ReaderMsg {
    Task(ReadTask),
    /// One per reader thread, sent by `Store::shutdown` after the last job.
    Stop,
}

/// A reader thread's body: runs jobs until `Stop` or until every sender is
/// gone.
pub(crate) fn run(reader: Reader, rx: Receiver<ReaderMsg>, failpoints: FailPoints) {
    while let Ok(msg) = rx.recv() {
        let task = match msg {
            ReaderMsg::Task(task) => task,
            ReaderMsg::Stop => break,
        };
        let input = match failpoints.check(Point::ReaderQuery) {
            Ok(()) => Ok(&reader),
            Err(e) => Err(e),
        };
        // A panicking job loses its own reply but must not take the thread
        // (and every later read) with it.
        if catch_unwind(AssertUnwindSafe(|| task(input))).is_err() {
            tracing::error!("a storage read job panicked");
        }
    }
}
