//! The webhook outbox after its row is written: attempts, the delivery log
//! and the operator's manual retry.
//!
//! A transition writes its `webhook_deliveries` row in its own transaction
//! (see `writer`). From then on the row moves only through here: each
//! attempt is one [`NewAttempt`], recorded by the writer as one
//! `webhook_attempts` row plus the update of the delivery (attempt count,
//! state, next attempt time) in the same transaction, so the log and the
//! schedule never disagree. A verification has at most one delivery row
//! (unique index on `verification_id`); retries, automatic or manual, are
//! more attempts of that row, never new rows.
//!
//! Not for: deciding when to retry or what counts as delivered (the
//! engine's `webhook_retry`), sending (the binary), or the outbox insert
//! itself (the writer's transition).

use crate::error::{Result, StorageError};
use crate::rows::{
    collect_rows, delivery_columns, delivery_from_row, first_row, DeliveryRow, DeliveryState,
    DELIVERY_COLUMNS,
};
use dialproof_engine::time::UnixMillis;
use dialproof_engine::CompanyId;
use rusqlite::{params, Connection, Row};

/// Most bytes of a receiver's response body kept in the log; the sender
/// reads no more than this either. Bodies are for a person to read an error
/// message, not for archiving.
pub const RESPONSE_BODY_LOG_BYTES_MAX: usize = 4096;
/// Most bytes of an attempt's error text kept in the log.
pub const ERROR_TEXT_BYTES_MAX: usize = 1024;
/// Most deliveries one log listing returns.
pub const DELIVERY_LOG_LIMIT_MAX: usize = 1000;
/// Most attempts listed per delivery (the newest ones). A delivery retried
/// by hand many times keeps every attempt in the table, the listing shows
/// the recent ones.
pub const ATTEMPTS_LISTED_MAX: usize = 100;

/// One finished attempt, to record together with what follows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewAttempt {
    pub delivery_id: i64,
    /// 1-based; one more than the delivery's `attempts` when it started.
    pub attempt_no: u32,
    pub started_at: UnixMillis,
    pub latency_ms: i64,
    /// The receiver's status, if it answered at all.
    pub http_status: Option<u16>,
    /// Why the attempt failed without (or despite) a status, if it did.
    pub error: Option<String>,
    /// The exact body sent.
    pub request_body: String,
    /// The start of the receiver's answer (truncated to
    /// [`RESPONSE_BODY_LOG_BYTES_MAX`] here if the sender did not).
    pub response_body: String,
    /// The delivery's state after this attempt.
    pub state: DeliveryState,
    /// When the next automatic attempt is due (`None` once delivered or dead).
    pub next_attempt_at: Option<UnixMillis>,
    /// When the attempt ended.
    pub finished_at: UnixMillis,
}

/// One logged attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttemptRow {
    pub id: i64,
    pub delivery_id: i64,
    pub attempt_no: u32,
    pub started_at: UnixMillis,
    pub latency_ms: i64,
    pub http_status: Option<u16>,
    pub error: Option<String>,
    pub request_body: String,
    pub response_body: String,
    pub next_attempt_at: Option<UnixMillis>,
}

/// A delivery with its attempts (oldest first), for the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeliveryLogEntry {
    pub delivery: DeliveryRow,
    pub attempts: Vec<AttemptRow>,
}

/// Which deliveries a log listing shows: newest first, optionally of one
/// company, one verification and/or one mode (live or test, by their
/// verification's), at most `limit` (capped at [`DELIVERY_LOG_LIMIT_MAX`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeliveryFilter {
    pub company_id: Option<CompanyId>,
    pub verification_id: Option<String>,
    /// `Some(true)`: live deliveries only; `Some(false)`: test mode's.
    pub livemode: Option<bool>,
    pub limit: usize,
}

/// Cuts `s` to at most `max` bytes on a character boundary.
pub fn truncate_utf8(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Inserts the attempt and moves the delivery on, in the caller's
/// transaction (the writer's batch). `NotFound` if the delivery is gone.
pub(crate) fn record_attempt(conn: &Connection, a: &NewAttempt) -> Result<()> {
    // A manual retry that landed while this attempt was in flight shows as
    // `updated_at` later than the attempt's start (nothing else touches the
    // row meanwhile). Unless this attempt delivered, the operator's "send
    // it again now" wins over the schedule's answer, so it is not lost.
    // `max()` keeps the attempt count from moving backwards. (SET
    // expressions all read the row as it was before the UPDATE.)
    let updated = conn
        .prepare_cached(
            "UPDATE webhook_deliveries SET attempts = max(attempts, ?2), \
             state = CASE WHEN ?3 <> 'delivered' AND updated_at > ?6 THEN state ELSE ?3 END, \
             next_attempt_at = CASE WHEN ?3 <> 'delivered' AND updated_at > ?6 \
                 THEN next_attempt_at ELSE ?4 END, \
             updated_at = ?5 WHERE id = ?1",
        )?
        .execute(params![
            a.delivery_id,
            a.attempt_no,
            a.state.as_str(),
            a.next_attempt_at.map(|t| t.0),
            a.finished_at.0,
            a.started_at.0,
        ])?;
    if updated == 0 {
        return Err(StorageError::NotFound(format!(
            "webhook delivery {} does not exist",
            a.delivery_id
        )));
    }
    conn.prepare_cached(
        "INSERT INTO webhook_attempts (delivery_id, attempt_no, started_at, latency_ms, \
         http_status, error, request_body, response_body, next_attempt_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?
    .execute(params![
        a.delivery_id,
        a.attempt_no,
        a.started_at.0,
        a.latency_ms.max(0),
        a.http_status,
        a.error
            .as_deref()
            .map(|e| truncate_utf8(e, ERROR_TEXT_BYTES_MAX)),
        a.request_body,
        truncate_utf8(&a.response_body, RESPONSE_BODY_LOG_BYTES_MAX),
        a.next_attempt_at.map(|t| t.0),
    ])?;
    Ok(())
}

pub(crate) fn delivery(conn: &Connection, id: i64) -> Result<Option<DeliveryRow>> {
    let mut stmt = conn.prepare_cached(concat!(
        "SELECT ",
        delivery_columns!(),
        " FROM webhook_deliveries WHERE id = ?1"
    ))?;
    first_row(&mut stmt, [id], delivery_from_row)
}

const ATTEMPT_COLUMNS: &str = "id, delivery_id, attempt_no, started_at, latency_ms, http_status, \
     error, request_body, response_body, next_attempt_at";

fn attempt_from_row(r: &Row<'_>) -> Result<AttemptRow> {
    let attempt_no: i64 = r.get(2)?;
    let status: Option<i64> = r.get(5)?;
    Ok(AttemptRow {
        id: r.get(0)?,
        delivery_id: r.get(1)?,
        attempt_no: u32::try_from(attempt_no).map_err(|_| {
            StorageError::Corrupt(format!("webhook_attempts.attempt_no = {attempt_no}"))
        })?,
        started_at: UnixMillis(r.get(3)?),
        latency_ms: r.get(4)?,
        http_status: status
            .map(|s| {
                u16::try_from(s).map_err(|_| {
                    StorageError::Corrupt(format!("webhook_attempts.http_status = {s}"))
                })
            })
            .transpose()?,
        error: r.get(6)?,
        request_body: r.get(7)?,
        response_body: r.get(8)?,
        next_attempt_at: r.get::<_, Option<i64>>(9)?.map(UnixMillis),
    })
}

/// The attempts of one delivery, oldest first (the newest
/// [`ATTEMPTS_LISTED_MAX`]).
pub(crate) fn attempts(conn: &Connection, delivery_id: i64) -> Result<Vec<AttemptRow>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {ATTEMPT_COLUMNS} FROM (SELECT {ATTEMPT_COLUMNS} FROM webhook_attempts \
         WHERE delivery_id = ?1 ORDER BY attempt_no DESC, id DESC LIMIT ?2) \
         ORDER BY attempt_no, id"
    ))?;
    collect_rows(
        &mut stmt,
        params![delivery_id, ATTEMPTS_LISTED_MAX as i64],
        attempt_from_row,
    )
}

/// The delivery log: deliveries matching `filter`, newest first, each with
/// its attempts.
pub(crate) fn log(conn: &Connection, filter: &DeliveryFilter) -> Result<Vec<DeliveryLogEntry>> {
    let limit = filter.limit.clamp(1, DELIVERY_LOG_LIMIT_MAX) as i64;
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries \
         WHERE (?1 IS NULL OR company_id = ?1) AND (?2 IS NULL OR verification_id = ?2) \
         AND (?4 IS NULL OR livemode = ?4) \
         ORDER BY created_at DESC, id DESC LIMIT ?3"
    ))?;
    let deliveries = collect_rows(
        &mut stmt,
        params![
            filter.company_id,
            filter.verification_id,
            limit,
            filter.livemode
        ],
        delivery_from_row,
    )?;
    deliveries
        .into_iter()
        .map(|d| {
            Ok(DeliveryLogEntry {
                attempts: attempts(conn, d.id)?,
                delivery: d,
            })
        })
        .collect()
}

/// The operator's "send it again now": whatever its state, the delivery is
/// pending and due at `now`. `None` if there is no such delivery. The
/// caller (Admin) bumps the change version in the same transaction.
pub(crate) fn retry(conn: &Connection, id: i64, now: UnixMillis) -> Result<Option<DeliveryRow>> {
    let n = conn
        .prepare_cached(
            "UPDATE webhook_deliveries SET state = 'pending', next_attempt_at = ?2, \
             updated_at = ?2 WHERE id = ?1",
        )?
        .execute(params![id, now.0])?;
    if n == 0 {
        return Ok(None);
    }
    delivery(conn, id)
}

#[cfg(test)]
mod tests {
    use super::truncate_utf8;

    #[test]
    fn truncation_keeps_whole_characters() {
        assert_eq!(truncate_utf8("abc", 5), "abc");
        assert_eq!(truncate_utf8("abcdef", 3), "abc");
        // "й" is two bytes: cutting in its middle drops it whole.
        assert_eq!(truncate_utf8("aй", 2), "a");
        assert_eq!(truncate_utf8("", 0), "");
    }
}
