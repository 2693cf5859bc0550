//! The operator's changes: companies, API keys, dedicated numbers, webhook
//! settings. The operator CLI runs in another process against the same file
//! while the service runs; WAL lets both work.
//!
//! Every change is one `BEGIN IMMEDIATE` transaction that also increments
//! `meta.change_version` when it changed something; the service polls
//! `Reader::change_version` and reloads its in-memory copies when it moved.
//! Calls that change nothing (revoking an unknown key) leave the version
//! alone.
//!
//! Not for: the service's hot path (see `Store`), minting secrets or hashing
//! them (the engine does that; this stores what it is given), checking
//! number formats (the CLI parses them first), or the read queries it
//! shares with the service (see `companies`).

use crate::companies;
use crate::conn::{self, Role};
use crate::deliveries::{self, DeliveryFilter, DeliveryLogEntry};
use crate::error::{Result, StorageError};
use crate::meta;
use crate::rows::{join_urls, CompanyRow, DeliveryRow, KeyRow};
use crate::schema;
use crate::users::{self, UserRow};
use dialproof_engine::time::UnixMillis;
use dialproof_engine::CompanyId;
use rusqlite::{params, Connection};
use std::path::Path;

/// Longest development webhook URL the store accepts (the API's limit).
pub const DEV_WEBHOOK_URL_LEN_MAX: usize = 500;
/// Most development webhook URLs per company.
pub const DEV_WEBHOOK_URLS_MAX: usize = 32;

/// The operator's connection. Not `Sync`: use it from one thread.
pub struct Admin {
    conn: Connection,
}

/// What a change did, for [`Admin::change`].
pub(crate) struct Changed<T> {
    value: T,
    changed: bool,
}

pub(crate) fn changed<T>(value: T) -> Result<Changed<T>> {
    Ok(Changed {
        value,
        changed: true,
    })
}

pub(crate) fn unchanged<T>(value: T) -> Result<Changed<T>> {
    Ok(Changed {
        value,
        changed: false,
    })
}

impl Admin {
    /// Opens the database at `path`, creating and migrating it if needed.
    /// Logged at DEBUG, so a test can count the opens (the service opens
    /// one for all its operator changes).
    pub fn open(path: &Path) -> Result<Admin, StorageError> {
        conn::create_parent_dir(path)?;
        let conn = conn::open(path, Role::Admin)?;
        schema::migrate(&conn)?;
        tracing::debug!(path = %path.display(), "operator connection opened");
        Ok(Admin { conn })
    }

    /// Runs `f` in one IMMEDIATE transaction and bumps `change_version`
    /// if it reports a change.
    pub(crate) fn change<T>(&self, f: impl FnOnce(&Connection) -> Result<Changed<T>>) -> Result<T> {
        self.conn.execute_batch("BEGIN IMMEDIATE")?;
        let result = f(&self.conn).and_then(|c| {
            if c.changed {
                meta::bump_change_version(&self.conn)?;
            }
            Ok(c.value)
        });
        match result {
            Ok(v) => {
                if let Err(e) = self.conn.execute_batch("COMMIT") {
                    self.rollback();
                    return Err(e.into());
                }
                Ok(v)
            }
            Err(e) => {
                self.rollback();
                Err(e)
            }
        }
    }

    fn rollback(&self) {
        if !self.conn.is_autocommit() {
            if let Err(e) = self.conn.execute_batch("ROLLBACK") {
                tracing::error!(error = %e, "admin ROLLBACK failed");
            }
        }
    }

    /// The connection, for the operator queries kept in files of their own
    /// (`rejections`, `dashboard`).
    pub(crate) fn conn(&self) -> &Connection {
        &self.conn
    }

    /// The current change counter.
    pub fn change_version(&self) -> Result<i64, StorageError> {
        meta::change_version(&self.conn)
    }

    pub fn create_company(
        &self,
        name: &str,
        webhook_secret: &str,
        now: UnixMillis,
    ) -> Result<CompanyRow, StorageError> {
        if name.trim().is_empty() {
            return Err(StorageError::Invalid(
                "company name must not be empty".into(),
            ));
        }
        self.change(|c| {
            c.prepare_cached(
                "INSERT INTO companies (name, created_at, webhook_secret) VALUES (?1, ?2, ?3)",
            )?
            .execute(params![name, now.0, webhook_secret])?;
            let id = c.last_insert_rowid();
            changed(require_company(c, id)?)
        })
    }

    /// Every company, by id.
    pub fn list_companies(&self) -> Result<Vec<CompanyRow>, StorageError> {
        companies::companies(&self.conn)
    }

    /// How many 503 rejections of `company_id` are stored (the crash
    /// harness checks that none it was answered is missing).
    pub fn rejection_count(&self, company_id: CompanyId) -> Result<i64, StorageError> {
        Ok(self
            .conn
            .prepare_cached("SELECT count(*) FROM rejections WHERE company_id = ?1")?
            .query_row(params![company_id], |r| r.get(0))?)
    }

    /// Idempotency keys of `company_id` that more than one verification
    /// was created with, with their counts (the crash harness checks there
    /// are none: one key, at most one verification).
    pub fn keys_with_several_verifications(
        &self,
        company_id: CompanyId,
    ) -> Result<Vec<(String, i64)>, StorageError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT idempotency_key, count(*) FROM verifications \
             WHERE company_id = ?1 AND idempotency_key IS NOT NULL \
             GROUP BY idempotency_key HAVING count(*) > 1",
        )?;
        let rows = stmt.query_map(params![company_id], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// One company by id.
    pub fn company(&self, id: CompanyId) -> Result<Option<CompanyRow>, StorageError> {
        companies::company(&self.conn, id)
    }

    /// Stores a dashboard user of `company_id`. `password_hash` is already
    /// an Argon2id PHC string; the password itself never reaches storage.
    pub fn create_user(
        &self,
        company_id: CompanyId,
        email: &str,
        password_hash: &str,
        now: UnixMillis,
    ) -> Result<UserRow, StorageError> {
        self.change(|c| {
            require_company(c, company_id)?;
            if users::user_by_email(c, email)?.is_some() {
                return Err(StorageError::Conflict(format!(
                    "a user with email '{email}' already exists"
                )));
            }
            c.prepare_cached(
                "INSERT INTO users (company_id, email, password_hash, created_at) \
                 VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(params![company_id, email, password_hash, now.0])?;
            let user = users::user_by_email(c, email)?.ok_or_else(|| {
                StorageError::Corrupt(format!("user '{email}' vanished after insert"))
            })?;
            changed(user)
        })
    }

    /// Stores a new key. `secret_hash` is the engine's hash of the secret;
    /// the secret itself is never stored.
    pub fn create_key(
        &self,
        company_id: CompanyId,
        label: &str,
        prefix: &str,
        secret_hash: &str,
        now: UnixMillis,
    ) -> Result<KeyRow, StorageError> {
        self.create_key_in_mode(company_id, label, (prefix, secret_hash), true, now)
    }

    /// [`Admin::create_key`] for a live (`livemode`) or test key.
    pub fn create_key_in_mode(
        &self,
        company_id: CompanyId,
        label: &str,
        (prefix, secret_hash): (&str, &str),
        livemode: bool,
        now: UnixMillis,
    ) -> Result<KeyRow, StorageError> {
        self.change(|c| {
            require_company(c, company_id)?;
            if companies::key_by_prefix(c, prefix)?.is_some() {
                return Err(StorageError::Conflict(format!(
                    "an API key with prefix '{prefix}' already exists"
                )));
            }
            c.prepare_cached(
                "INSERT INTO api_keys (company_id, label, prefix, secret_hash, created_at, \
                 livemode) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?
            .execute(params![
                company_id,
                label,
                prefix,
                secret_hash,
                now.0,
                livemode
            ])?;
            let key = companies::key_by_prefix(c, prefix)?.ok_or_else(|| {
                StorageError::Corrupt(format!("key '{prefix}' vanished after insert"))
            })?;
            changed(key)
        })
    }

    /// Every key, or those of one company.
    pub fn list_keys(&self, company_id: Option<CompanyId>) -> Result<Vec<KeyRow>, StorageError> {
        companies::keys(&self.conn, company_id)
    }

    /// Revokes the key with `prefix`; false if unknown or already revoked.
    pub fn revoke_key(&self, prefix: &str, now: UnixMillis) -> Result<bool, StorageError> {
        self.change(|c| {
            let n = c
                .prepare_cached(
                    "UPDATE api_keys SET revoked_at = ?2 WHERE prefix = ?1 AND revoked_at IS NULL",
                )?
                .execute(params![prefix, now.0])?;
            if n > 0 {
                changed(true)
            } else {
                unchanged(false)
            }
        })
    }

    /// Sets (or with `None` clears) a key's own requests-per-minute limit;
    /// false if no key has `prefix`.
    pub fn set_key_limit(
        &self,
        prefix: &str,
        per_minute: Option<u32>,
    ) -> Result<bool, StorageError> {
        self.change(|c| {
            let n = c
                .prepare_cached("UPDATE api_keys SET rate_limit_per_minute = ?2 WHERE prefix = ?1")?
                .execute(params![prefix, per_minute])?;
            if n > 0 {
                changed(true)
            } else {
                unchanged(false)
            }
        })
    }

    /// Reserves `number` to `company_id`. True if newly dedicated, false if
    /// it already was to this company; `Conflict` if to another one (undedicate
    /// it first), `NotFound` for an unknown company.
    pub fn dedicate_number(
        &self,
        number: &str,
        company_id: CompanyId,
        now: UnixMillis,
    ) -> Result<bool, StorageError> {
        self.change(|c| {
            require_company(c, company_id)?;
            match companies::dedicated_number_owner(c, number)? {
                Some(owner) if owner == company_id => unchanged(false),
                Some(owner) => Err(StorageError::Conflict(format!(
                    "number {number} is already dedicated to company {owner}"
                ))),
                None => {
                    c.prepare_cached(
                        "INSERT INTO dedicated_numbers (number, company_id, created_at) \
                         VALUES (?1, ?2, ?3)",
                    )?
                    .execute(params![number, company_id, now.0])?;
                    changed(true)
                }
            }
        })
    }

    /// Returns `number` to the shared pool; false if it was not dedicated.
    pub fn undedicate_number(&self, number: &str) -> Result<bool, StorageError> {
        self.change(|c| {
            let n = c
                .prepare_cached("DELETE FROM dedicated_numbers WHERE number = ?1")?
                .execute([number])?;
            if n > 0 {
                changed(true)
            } else {
                unchanged(false)
            }
        })
    }

    /// `(number, company_id)` for every dedicated number, by number.
    pub fn list_dedicated_numbers(&self) -> Result<Vec<(String, CompanyId)>, StorageError> {
        companies::dedicated_numbers(&self.conn)
    }

    /// Whether `verification.failed` webhooks are sent to this company.
    pub fn set_send_failed_webhooks(
        &self,
        company_id: CompanyId,
        enabled: bool,
    ) -> Result<(), StorageError> {
        self.change(|c| {
            let n = c
                .prepare_cached("UPDATE companies SET send_failed_webhooks = ?2 WHERE id = ?1")?
                .execute(params![company_id, i64::from(enabled)])?;
            if n == 0 {
                return Err(company_not_found(company_id));
            }
            changed(())
        })
    }

    /// The size of each of the company's test pools (`None`: the service's
    /// default). Changes the `change_version`, so the key cache (which
    /// holds the companies) picks it up.
    pub fn set_test_pool_size(
        &self,
        company_id: CompanyId,
        size: Option<u32>,
    ) -> Result<(), StorageError> {
        self.change(|c| {
            let n = c
                .prepare_cached("UPDATE companies SET test_pool_size = ?2 WHERE id = ?1")?
                .execute(params![company_id, size])?;
            if n == 0 {
                return Err(company_not_found(company_id));
            }
            changed(())
        })
    }

    /// Makes `new_secret` the signing secret; the current one stays valid
    /// (signed alongside) until `previous_valid_until`.
    pub fn rotate_webhook_secret(
        &self,
        company_id: CompanyId,
        new_secret: &str,
        previous_valid_until: UnixMillis,
    ) -> Result<CompanyRow, StorageError> {
        self.change(|c| {
            let n = c
                .prepare_cached(
                    "UPDATE companies SET previous_webhook_secret = webhook_secret, \
                     previous_secret_valid_until = ?3, webhook_secret = ?2 WHERE id = ?1",
                )?
                .execute(params![company_id, new_secret, previous_valid_until.0])?;
            if n == 0 {
                return Err(company_not_found(company_id));
            }
            changed(require_company(c, company_id)?)
        })
    }

    /// Replaces the company's development webhook URLs (plain `http`
    /// allowed). Blank entries are dropped; see `check_dev_urls` for what
    /// is `Invalid`.
    pub fn set_dev_webhook_urls(
        &self,
        company_id: CompanyId,
        urls: Vec<String>,
    ) -> Result<(), StorageError> {
        let urls: Vec<String> = urls
            .into_iter()
            .map(|u| u.trim().to_owned())
            .filter(|u| !u.is_empty())
            .collect();
        check_dev_urls(&urls)?;
        self.change(|c| {
            write_dev_urls(c, company_id, &urls)?;
            changed(())
        })
    }

    /// Adds one development webhook URL (kept once; adding it again changes
    /// nothing). Returns the whole list after the change.
    pub fn add_dev_webhook_url(
        &self,
        company_id: CompanyId,
        url: &str,
    ) -> Result<Vec<String>, StorageError> {
        let url = url.trim().to_owned();
        if url.is_empty() {
            return Err(StorageError::Invalid("empty development URL".into()));
        }
        self.change(|c| {
            let mut urls = require_company(c, company_id)?.dev_webhook_urls;
            if !urls.contains(&url) {
                urls.push(url);
                check_dev_urls(&urls)?;
                write_dev_urls(c, company_id, &urls)?;
            }
            changed(urls)
        })
    }

    /// Removes one development webhook URL; `NotFound` when it is not in the
    /// list. Returns the whole list after the change.
    pub fn remove_dev_webhook_url(
        &self,
        company_id: CompanyId,
        url: &str,
    ) -> Result<Vec<String>, StorageError> {
        let url = url.trim();
        self.change(|c| {
            let mut urls = require_company(c, company_id)?.dev_webhook_urls;
            let before = urls.len();
            urls.retain(|u| u != url);
            if urls.len() == before {
                return Err(StorageError::NotFound(format!(
                    "company {company_id} has no development URL {url:?}"
                )));
            }
            write_dev_urls(c, company_id, &urls)?;
            changed(urls)
        })
    }
}

/// At most [`DEV_WEBHOOK_URLS_MAX`] URLs, none with a line break or longer
/// than [`DEV_WEBHOOK_URL_LEN_MAX`].
fn check_dev_urls(urls: &[String]) -> Result<(), StorageError> {
    if urls.len() > DEV_WEBHOOK_URLS_MAX {
        return Err(StorageError::Invalid(format!(
            "at most {DEV_WEBHOOK_URLS_MAX} development webhook URLs, got {}",
            urls.len()
        )));
    }
    if let Some(bad) = urls.iter().find(|u| u.contains(['\n', '\r'])) {
        return Err(StorageError::Invalid(format!(
            "webhook URL contains a line break: {bad:?}"
        )));
    }
    if let Some(long) = urls.iter().find(|u| u.len() > DEV_WEBHOOK_URL_LEN_MAX) {
        return Err(StorageError::Invalid(format!(
            "webhook URL longer than {DEV_WEBHOOK_URL_LEN_MAX} characters: {long:?}"
        )));
    }
    Ok(())
}

fn write_dev_urls(c: &Connection, company_id: CompanyId, urls: &[String]) -> Result<()> {
    let n = c
        .prepare_cached("UPDATE companies SET dev_webhook_urls = ?2 WHERE id = ?1")?
        .execute(params![company_id, join_urls(urls)])?;
    if n == 0 {
        return Err(company_not_found(company_id));
    }
    Ok(())
}

/// The webhook delivery log and the manual retry (see `deliveries`).
impl Admin {
    /// Deliveries matching `filter`, newest first, each with its attempts.
    pub fn delivery_log(
        &self,
        filter: &DeliveryFilter,
    ) -> Result<Vec<DeliveryLogEntry>, StorageError> {
        deliveries::log(&self.conn, filter)
    }

    /// Makes delivery `id` pending and due at `now`, whatever its state;
    /// the service sees the change version move and sends it at once.
    pub fn retry_delivery(&self, id: i64, now: UnixMillis) -> Result<DeliveryRow, StorageError> {
        self.change(|c| match deliveries::retry(c, id, now)? {
            Some(row) => changed(row),
            None => Err(StorageError::NotFound(format!(
                "webhook delivery {id} does not exist"
            ))),
        })
    }
}

fn company_not_found(id: CompanyId) -> StorageError {
    StorageError::NotFound(format!("company {id} does not exist"))
}

fn require_company(conn: &Connection, id: CompanyId) -> Result<CompanyRow> {
    companies::company(conn, id)?.ok_or_else(|| company_not_found(id))
}
