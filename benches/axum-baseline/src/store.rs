//! SQLite through sqlx: the schema (the columns Dialproof stores, with its
//! indexes), the pool, and the setup command's keys.
//!
//! One pool of sqlx's default size (10) for reads and writes, the usual
//! axum + sqlx setup. (Tried on the 2-core development machine: a separate
//! one-connection write pool, the common advice for SQLite, with four read
//! connections made roughly 7 000 creates/s and 24 000 GETs/s; this pool
//! roughly 10 000 and 37 000, so the baseline keeps it.)

use anyhow::Result;
use rand::Rng;
use sha2::{Digest, Sha256};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::SqlitePool;
use std::path::Path;
use std::time::Duration;

const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS companies (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL,
        dev_webhook_urls TEXT NOT NULL DEFAULT ''
    )",
    "CREATE TABLE IF NOT EXISTS api_keys (
        id INTEGER PRIMARY KEY,
        company_id INTEGER NOT NULL REFERENCES companies(id),
        label TEXT NOT NULL,
        prefix TEXT NOT NULL UNIQUE,
        secret_hash TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        last_used_at INTEGER NULL,
        revoked_at INTEGER NULL,
        rate_limit_per_minute INTEGER NULL
    )",
    "CREATE TABLE IF NOT EXISTS verifications (
        id TEXT PRIMARY KEY,
        company_id INTEGER NOT NULL REFERENCES companies(id),
        api_key_id INTEGER NOT NULL REFERENCES api_keys(id),
        phone TEXT NOT NULL,
        dial_number TEXT NOT NULL,
        pool TEXT NOT NULL,
        client_ref TEXT NOT NULL DEFAULT '',
        info TEXT NOT NULL DEFAULT '',
        webhook_url TEXT NOT NULL,
        ttl_seconds INTEGER NOT NULL,
        status TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        completed_at INTEGER NULL,
        caller_id TEXT NOT NULL DEFAULT ''
    )",
    "CREATE INDEX IF NOT EXISTS verifications_pending ON verifications(status) WHERE status = 'pending'",
    "CREATE INDEX IF NOT EXISTS verifications_company_created ON verifications(company_id, created_at)",
    "CREATE TABLE IF NOT EXISTS rejections (
        id INTEGER PRIMARY KEY,
        company_id INTEGER NOT NULL REFERENCES companies(id),
        api_key_id INTEGER NOT NULL REFERENCES api_keys(id),
        phone TEXT NOT NULL,
        pool TEXT NOT NULL,
        reason TEXT NOT NULL,
        created_at INTEGER NOT NULL
    )",
];

/// Opens (creating if missing) the database with Dialproof's settings: WAL,
/// `synchronous=NORMAL`, foreign keys, a 5 s busy timeout.
pub async fn open(path: &Path) -> Result<SqlitePool> {
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .foreign_keys(true)
        .busy_timeout(Duration::from_secs(5));
    let pool = SqlitePoolOptions::new().connect_with(options).await?;
    for statement in SCHEMA {
        sqlx::query(statement).execute(&pool).await?;
    }
    Ok(pool)
}

pub fn now_millis() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

pub fn hash_secret(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

fn random_alphanumeric(n: usize) -> String {
    rand::thread_rng()
        .sample_iter(rand::distributions::Alphanumeric)
        .take(n)
        .map(char::from)
        .collect()
}

/// One company with `dev_urls`, and `keys` keys at `rate_limit` requests
/// per minute; returns their tokens (only the secrets' hashes are stored).
pub async fn setup(
    db: &SqlitePool,
    keys: usize,
    rate_limit: u32,
    dev_urls: &[String],
) -> Result<Vec<String>> {
    let mut tx = db.begin().await?;
    let company: i64 = sqlx::query_scalar(
        "INSERT INTO companies (name, dev_webhook_urls) VALUES ('bench', ?) RETURNING id",
    )
    .bind(dev_urls.join("\n"))
    .fetch_one(&mut *tx)
    .await?;
    let mut tokens = Vec::with_capacity(keys);
    for i in 0..keys {
        let (prefix, secret) = (random_alphanumeric(8), random_alphanumeric(32));
        sqlx::query(
            "INSERT INTO api_keys (company_id, label, prefix, secret_hash, created_at, \
             rate_limit_per_minute) VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(company)
        .bind(format!("bench-{i}"))
        .bind(&prefix)
        .bind(hash_secret(&secret))
        .bind(now_millis())
        .bind(rate_limit)
        .execute(&mut *tx)
        .await?;
        tokens.push(format!("svc_live_{prefix}_{secret}"));
    }
    tx.commit().await?;
    Ok(tokens)
}
