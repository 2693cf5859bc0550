//! The rows the operator manages, as both the operator (`Admin`) and the
//! service (`Reader`) read them: companies, API keys and dedicated numbers.
//! One query each, so the operator's listing and the service's cache load
//! can never disagree about what is stored.
//!
//! Not for: changing these rows (only `Admin` does, inside its change
//! transaction) or caching them (the binary keeps the in-memory copies).

use crate::error::Result;
use crate::rows::{
    collect_rows, company_from_row, first_row, key_from_row, CompanyRow, KeyRow, COMPANY_COLUMNS,
    KEY_COLUMNS,
};
use dialproof_engine::CompanyId;
use rusqlite::{Connection, OptionalExtension};

/// One company by id.
pub(crate) fn company(conn: &Connection, id: CompanyId) -> Result<Option<CompanyRow>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {COMPANY_COLUMNS} FROM companies WHERE id = ?1"
    ))?;
    first_row(&mut stmt, [id], company_from_row)
}

/// Every company, by id.
pub(crate) fn companies(conn: &Connection) -> Result<Vec<CompanyRow>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {COMPANY_COLUMNS} FROM companies ORDER BY id"
    ))?;
    collect_rows(&mut stmt, [], company_from_row)
}

/// Every API key (revoked ones included), or those of one company, by id.
pub(crate) fn keys(conn: &Connection, company_id: Option<CompanyId>) -> Result<Vec<KeyRow>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {KEY_COLUMNS} FROM api_keys \
         WHERE ?1 IS NULL OR company_id = ?1 ORDER BY id"
    ))?;
    collect_rows(&mut stmt, [company_id], key_from_row)
}

/// The key with `prefix`, if any.
pub(crate) fn key_by_prefix(conn: &Connection, prefix: &str) -> Result<Option<KeyRow>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {KEY_COLUMNS} FROM api_keys WHERE prefix = ?1"
    ))?;
    first_row(&mut stmt, [prefix], key_from_row)
}

/// `(number, company_id)` for every number reserved to one company, by
/// number.
pub(crate) fn dedicated_numbers(conn: &Connection) -> Result<Vec<(String, CompanyId)>> {
    let mut stmt =
        conn.prepare_cached("SELECT number, company_id FROM dedicated_numbers ORDER BY number")?;
    let mut rows = stmt.query([])?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        out.push((r.get(0)?, r.get(1)?));
    }
    Ok(out)
}

/// The company `number` is dedicated to, if any.
pub(crate) fn dedicated_number_owner(conn: &Connection, number: &str) -> Result<Option<CompanyId>> {
    Ok(conn
        .prepare_cached("SELECT company_id FROM dedicated_numbers WHERE number = ?1")?
        .query_row([number], |r| r.get(0))
        .optional()?)
}
