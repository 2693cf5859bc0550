//! The dashboard's verification list: one company's verifications and 503
//! rejections merged newest first, filtered, paged by a keyset cursor, and
//! the period's totals by time bucket.
//!
//! Paging never uses OFFSET: a page asks for rows strictly older than the
//! last row shown, by `(created_at, sort_id)`, and each table answers from
//! an index that starts with the company and the filtered column (see
//! migration 3), so a page costs the same at the first row and at the
//! millionth. A verification's `sort_id` is its id; a rejection's is `r`
//! and its row id zero-padded, so the two never collide and the order is
//! total.
//!
//! Every list and total is of one mode (`ListFilter::livemode`): the
//! dashboard shows live and test rows apart, never summed. The mode is
//! written into the SQL as a literal (it is a bool, never user text), so
//! SQLite can use migration 6's partial indexes of test rows.
//!
//! Not for: deciding the period, bucket size or what a filter means for
//! the user (the dashboard parses its query string into [`ListFilter`]).

use crate::error::{Result, StorageError};
use crate::reader::Reader;
use crate::rows::{evidence_from_columns, optional_text};
use dialproof_engine::caller_evidence::CallerEvidence;
use dialproof_engine::time::UnixMillis;
use dialproof_engine::verification::Status;
use dialproof_engine::CompanyId;
use rusqlite::types::Value as Sql;
use rusqlite::{params_from_iter, Connection, Row};

/// Most rows one page holds.
pub const LIST_PAGE_MAX: usize = 200;

/// Where a page starts: rows strictly older than this one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListCursor {
    pub created_at: UnixMillis,
    pub sort_id: String,
}

/// What to list: one company's rows created in `[from, to)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListFilter {
    pub company_id: CompanyId,
    /// Live rows, or test-mode rows.
    pub livemode: bool,
    pub from: UnixMillis,
    pub to: UnixMillis,
    pub status: Option<Status>,
    pub phone: Option<String>,
    pub client_ref: Option<String>,
    pub after: Option<ListCursor>,
    pub limit: usize,
}

/// One row of the list: a verification, or a rejection (no id, no dial
/// number, status `failed`, with its reason).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedRow {
    pub sort_id: String,
    pub verification_id: Option<String>,
    pub status: Status,
    pub phone: String,
    pub dial_number: Option<String>,
    pub client_ref: String,
    pub created_at: UnixMillis,
    pub completed_at: Option<UnixMillis>,
    pub expires_at: Option<UnixMillis>,
    pub caller_id: String,
    pub reason: Option<String>,
    /// The `Idempotency-Key` a verification was created with.
    pub idempotency_key: Option<String>,
    /// How a completed verification's caller was read.
    pub caller_evidence: Option<CallerEvidence>,
}

/// One page and where the next one starts (`None`: this was the last).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListPage {
    pub rows: Vec<ListedRow>,
    pub next: Option<ListCursor>,
}

/// Counts of one time bucket (or of the whole period).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Every row, rejections included.
    pub all: u64,
    pub completed: u64,
}

/// The period's totals and its buckets of `bucket_ms` from `from` on
/// (index i covers `[from + i*bucket_ms, from + (i+1)*bucket_ms)`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub total: Counts,
    pub buckets: Vec<Counts>,
}

const VERIFICATION_SELECT: &str = "SELECT id AS sort_id, id, status, phone, dial_number, \
     client_ref, created_at, completed_at, expires_at, caller_id, NULL AS reason, \
     idempotency_key, caller_id_source, caller_id_trust FROM verifications WHERE company_id = ? AND created_at >= ? AND created_at < ?";
const REJECTION_SELECT: &str = "SELECT printf('r%015d', id) AS sort_id, NULL, 'failed', phone, \
     NULL, '', created_at, NULL, NULL, '', reason, NULL, NULL, NULL \
     FROM rejections WHERE company_id = ? AND created_at >= ? AND created_at < ?";

/// One table's half of the query, with its own filters and ORDER/LIMIT so
/// each half walks its index and stops at the page size.
fn half(select: &str, f: &ListFilter, rejections: bool, args: &mut Vec<Sql>) -> String {
    let mut sql = select.to_owned();
    sql.push_str(if f.livemode {
        " AND livemode = 1"
    } else {
        " AND livemode = 0"
    });
    args.extend([
        Sql::Integer(f.company_id),
        Sql::Integer(f.from.0),
        Sql::Integer(f.to.0),
    ]);
    if let (Some(s), false) = (f.status, rejections) {
        sql.push_str(" AND status = ?");
        args.push(Sql::Text(s.as_str().to_owned()));
    }
    if let Some(p) = &f.phone {
        sql.push_str(" AND phone = ?");
        args.push(Sql::Text(p.clone()));
    }
    if let (Some(r), false) = (&f.client_ref, rejections) {
        sql.push_str(" AND client_ref = ? AND client_ref != ''");
        args.push(Sql::Text(r.clone()));
    }
    if let Some(c) = &f.after {
        let key = if rejections {
            "printf('r%015d', id)"
        } else {
            "id"
        };
        sql.push_str(&format!(
            " AND created_at <= ? AND (created_at < ? OR {key} < ?)"
        ));
        args.extend([
            Sql::Integer(c.created_at.0),
            Sql::Integer(c.created_at.0),
            Sql::Text(c.sort_id.clone()),
        ]);
    }
    sql.push_str(" ORDER BY created_at DESC, sort_id DESC LIMIT ?");
    args.push(Sql::Integer(f.limit as i64 + 1));
    sql
}

fn listed_from_row(r: &Row<'_>) -> Result<ListedRow> {
    let status: String = r.get(2)?;
    Ok(ListedRow {
        sort_id: r.get(0)?,
        verification_id: r.get(1)?,
        status: Status::parse(&status)
            .ok_or_else(|| StorageError::Corrupt(format!("unknown status '{status}'")))?,
        phone: r.get(3)?,
        dial_number: r.get(4)?,
        client_ref: r.get(5)?,
        created_at: UnixMillis(r.get(6)?),
        completed_at: r.get::<_, Option<i64>>(7)?.map(UnixMillis),
        expires_at: r.get::<_, Option<i64>>(8)?.map(UnixMillis),
        caller_id: r.get(9)?,
        reason: r.get(10)?,
        idempotency_key: r.get(11)?,
        caller_evidence: evidence_from_columns(optional_text(r, 12)?, optional_text(r, 13)?)?,
    })
}

/// One page of rows matching `f`, newest first.
pub(crate) fn list(conn: &Connection, f: &ListFilter) -> Result<ListPage> {
    let f = ListFilter {
        limit: f.limit.clamp(1, LIST_PAGE_MAX),
        ..f.clone()
    };
    let mut args = Vec::new();
    let with_rejections = f.client_ref.is_none() && matches!(f.status, None | Some(Status::Failed));
    let mut sql = format!(
        "SELECT * FROM ({})",
        half(VERIFICATION_SELECT, &f, false, &mut args)
    );
    if with_rejections {
        sql.push_str(&format!(
            " UNION ALL SELECT * FROM ({})",
            half(REJECTION_SELECT, &f, true, &mut args)
        ));
    }
    sql.push_str(" ORDER BY created_at DESC, sort_id DESC LIMIT ?");
    args.push(Sql::Integer(f.limit as i64 + 1));
    let mut stmt = conn.prepare_cached(&sql)?;
    let mut rows = stmt.query(params_from_iter(args))?;
    let mut out = Vec::with_capacity(f.limit + 1);
    while let Some(r) = rows.next()? {
        out.push(listed_from_row(r)?);
    }
    let next = if out.len() > f.limit {
        out.truncate(f.limit);
        out.last().map(|r| ListCursor {
            created_at: r.created_at,
            sort_id: r.sort_id.clone(),
        })
    } else {
        None
    };
    Ok(ListPage { rows: out, next })
}

/// The company's totals of one mode in `[from, to)`, rejections included,
/// in buckets of `bucket_ms` (at least 1 ms; the caller keeps their number
/// small).
///
/// Each bucket is range counts answered from indexes alone (all rows by
/// company and time, completed ones by company, status and time,
/// rejections by company and time, and the test rows' own by migration 6's
/// partial indexes): no row is read and no expression is evaluated per
/// row, which a single `GROUP BY` over the period would do. Live counts are
/// all rows less the test rows.
pub(crate) fn totals(
    conn: &Connection,
    (company_id, livemode): (CompanyId, bool),
    from: UnixMillis,
    to: UnixMillis,
    bucket_ms: i64,
) -> Result<Totals> {
    let bucket_ms = bucket_ms.max(1);
    let mut t = Totals::default();
    let mut all = conn.prepare_cached(
        "SELECT (SELECT COUNT(*) FROM verifications \
           WHERE company_id = ?1 AND created_at >= ?2 AND created_at < ?3) \
         + (SELECT COUNT(*) FROM rejections \
           WHERE company_id = ?1 AND created_at >= ?2 AND created_at < ?3)",
    )?;
    let mut completed = conn.prepare_cached(
        "SELECT COUNT(*) FROM verifications \
         WHERE company_id = ?1 AND status = 'completed' AND created_at >= ?2 AND created_at < ?3",
    )?;
    let mut test_all = conn.prepare_cached(
        "SELECT (SELECT COUNT(*) FROM verifications \
           WHERE company_id = ?1 AND livemode = 0 AND created_at >= ?2 AND created_at < ?3) \
         + (SELECT COUNT(*) FROM rejections \
           WHERE company_id = ?1 AND livemode = 0 AND created_at >= ?2 AND created_at < ?3)",
    )?;
    let mut test_completed = conn.prepare_cached(
        "SELECT COUNT(*) FROM verifications WHERE company_id = ?1 AND livemode = 0 \
         AND status = 'completed' AND created_at >= ?2 AND created_at < ?3",
    )?;
    let mut lo = from.0;
    while lo < to.0 {
        let hi = lo.saturating_add(bucket_ms).min(to.0);
        let count = |stmt: &mut rusqlite::Statement<'_>| -> Result<u64> {
            let n: i64 = stmt.query_row(rusqlite::params![company_id, lo, hi], |r| r.get(0))?;
            Ok(u64::try_from(n).unwrap_or(0))
        };
        let test = Counts {
            all: count(&mut test_all)?,
            completed: count(&mut test_completed)?,
        };
        let b = if livemode {
            Counts {
                all: count(&mut all)?.saturating_sub(test.all),
                completed: count(&mut completed)?.saturating_sub(test.completed),
            }
        } else {
            test
        };
        t.total.all += b.all;
        t.total.completed += b.completed;
        t.buckets.push(b);
        lo = hi;
    }
    Ok(t)
}

impl Reader {
    /// One page of the dashboard's verification list (see the module's `list`).
    pub fn verification_list(&self, filter: &ListFilter) -> Result<ListPage, StorageError> {
        list(self.conn(), filter)
    }

    /// The period's totals and buckets of one mode (see the module's
    /// `totals`).
    pub fn verification_totals(
        &self,
        (company_id, livemode): (CompanyId, bool),
        from: UnixMillis,
        to: UnixMillis,
        bucket_ms: i64,
    ) -> Result<Totals, StorageError> {
        totals(self.conn(), (company_id, livemode), from, to, bucket_ms)
    }
}
