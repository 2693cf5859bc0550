//! The 503 rejection rows ('all lines busy'): create requests refused for
//! want of a free dial number. They are no verifications (no id, no dial
//! number, no webhook), but the spec shows each one in the client's
//! dashboard as a failed row that counts toward the totals.
//!
//! Not for: writing them (the writer's `inserts`, through the same queue as
//! creates) or merging them into the verification list (`verification_list`).

use crate::admin::Admin;
use crate::error::{Result, StorageError};
use crate::rows::collect_rows;
use dialproof_engine::pool::Pool;
use dialproof_engine::time::UnixMillis;
use dialproof_engine::CompanyId;
use rusqlite::{params, Connection, Row};

/// Most rows one listing returns.
pub const REJECTIONS_LISTED_MAX: usize = 1000;

/// One stored rejection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RejectionRow {
    pub id: i64,
    pub company_id: CompanyId,
    pub api_key_id: i64,
    pub phone: String,
    pub pool: Pool,
    pub reason: String,
    pub created_at: UnixMillis,
}

fn from_row(row: &Row<'_>) -> Result<RejectionRow> {
    let pool: String = row.get(4)?;
    Ok(RejectionRow {
        id: row.get(0)?,
        company_id: row.get(1)?,
        api_key_id: row.get(2)?,
        phone: row.get(3)?,
        pool: Pool::parse(&pool)
            .ok_or_else(|| StorageError::Corrupt(format!("unknown pool '{pool}'")))?,
        reason: row.get(5)?,
        created_at: UnixMillis(row.get(6)?),
    })
}

/// The newest `limit` rejections (at most [`REJECTIONS_LISTED_MAX`]), of
/// one company or of all, newest first.
pub(crate) fn list(
    conn: &Connection,
    company_id: Option<CompanyId>,
    limit: usize,
) -> Result<Vec<RejectionRow>> {
    let limit = limit.clamp(1, REJECTIONS_LISTED_MAX) as i64;
    let mut stmt = conn.prepare_cached(
        "SELECT id, company_id, api_key_id, phone, pool, reason, created_at FROM rejections \
         WHERE ?1 IS NULL OR company_id = ?1 ORDER BY created_at DESC, id DESC LIMIT ?2",
    )?;
    collect_rows(&mut stmt, params![company_id, limit], from_row)
}

impl Admin {
    /// The newest rejections, of one company or of all (see the module's `list`).
    pub fn list_rejections(
        &self,
        company_id: Option<CompanyId>,
        limit: usize,
    ) -> Result<Vec<RejectionRow>, StorageError> {
        list(self.conn(), company_id, limit)
    }
}
