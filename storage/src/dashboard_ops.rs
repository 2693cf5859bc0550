//! The dashboard's own storage calls: a company's keys as its people see
//! them (list, revoke, delete, always scoped to their company, so one
//! company can never touch another's key even by guessing a prefix), and
//! ending a session at logout, and which company a webhook delivery
//! belongs to (before the dashboard's Retry).
//!
//! Key changes go through [`Admin::change`], so they bump the change
//! version the service's key cache follows. A deleted key keeps its row
//! (its verifications reference it) with `deleted_at` set and is revoked
//! with it; it is gone from the list and its token is refused.
//!
//! Not for: creating keys (`Admin::create_key`, shared with the CLI) or the
//! verification list (`verification_list`).

use crate::admin::{changed, unchanged, Admin};
use crate::error::{Result, StorageError};
use crate::reader::Reader;
use crate::rows::{collect_rows, key_from_row, KeyRow, KEY_COLUMNS};
use dialproof_engine::time::UnixMillis;
use dialproof_engine::CompanyId;
use rusqlite::{params, Connection};

/// A company's keys that are not deleted, newest first.
pub(crate) fn company_keys(conn: &Connection, company_id: CompanyId) -> Result<Vec<KeyRow>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {KEY_COLUMNS} FROM api_keys WHERE company_id = ?1 AND deleted_at IS NULL \
         ORDER BY created_at DESC, id DESC"
    ))?;
    collect_rows(&mut stmt, [company_id], key_from_row)
}

impl Reader {
    /// The company's keys that are not deleted, newest first.
    pub fn company_keys(&self, company_id: CompanyId) -> Result<Vec<KeyRow>, StorageError> {
        company_keys(self.conn(), company_id)
    }
}

impl Admin {
    /// Revokes the company's key `prefix`; false if the company has no such
    /// live key (unknown, another company's, already revoked or deleted).
    pub fn revoke_company_key(
        &self,
        company_id: CompanyId,
        prefix: &str,
        now: UnixMillis,
    ) -> Result<bool, StorageError> {
        self.change(|c| {
            let n = c
                .prepare_cached(
                    "UPDATE api_keys SET revoked_at = ?3 WHERE company_id = ?1 AND prefix = ?2 \
                     AND revoked_at IS NULL AND deleted_at IS NULL",
                )?
                .execute(params![company_id, prefix, now.0])?;
            if n > 0 {
                changed(true)
            } else {
                unchanged(false)
            }
        })
    }

    /// Deletes (and so revokes) the company's key `prefix`; false if the
    /// company has no such key or it is already deleted.
    pub fn delete_company_key(
        &self,
        company_id: CompanyId,
        prefix: &str,
        now: UnixMillis,
    ) -> Result<bool, StorageError> {
        self.change(|c| {
            let n = c
                .prepare_cached(
                    "UPDATE api_keys SET deleted_at = ?3, revoked_at = COALESCE(revoked_at, ?3) \
                     WHERE company_id = ?1 AND prefix = ?2 AND deleted_at IS NULL",
                )?
                .execute(params![company_id, prefix, now.0])?;
            if n > 0 {
                changed(true)
            } else {
                unchanged(false)
            }
        })
    }

    /// The company a webhook delivery belongs to, if it exists (the
    /// dashboard's Retry acts only on its own company's deliveries).
    pub fn delivery_company(&self, id: i64) -> Result<Option<CompanyId>, StorageError> {
        let mut stmt = self
            .conn()
            .prepare_cached("SELECT company_id FROM webhook_deliveries WHERE id = ?1")?;
        let mut rows = stmt.query([id])?;
        match rows.next()? {
            Some(r) => Ok(Some(r.get(0)?)),
            None => Ok(None),
        }
    }

    /// Ends a session (logout): its token no longer authenticates.
    pub fn delete_session(&self, token_hash: &str) -> Result<bool, StorageError> {
        let n = self
            .conn()
            .prepare_cached("DELETE FROM sessions WHERE token_hash = ?1")?
            .execute([token_hash])?;
        Ok(n > 0)
    }
}
