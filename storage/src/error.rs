//! The one error type of the crate.
//!
//! Variants are grouped by whose fault they are: the database or the disk
//! (`Sqlite`, `Corrupt`), back-pressure and lifecycle of the store
//! (`QueueFull`, `Closed`), the caller's request (`NotFound`, `Conflict`,
//! `Invalid`) and the reliability harness (`Injected`). Not for: HTTP status
//! mapping, which belongs to the binary.

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StorageError {
    /// SQLite or the file system failed (I/O, lock timeout, full disk...).
    Sqlite(String),
    /// The write or read queue is at its capacity; the caller should shed load.
    QueueFull,
    /// The store was shut down (or its thread is gone).
    Closed,
    /// A fail point fired; the name says which one.
    Injected(&'static str),
    /// A stored value cannot be mapped back to a row (unknown status, a
    /// negative TTL, a schema newer than this build...).
    Corrupt(String),
    /// The thing an operation refers to does not exist.
    NotFound(String),
    /// The operation would break a uniqueness or ownership rule.
    Conflict(String),
    /// The caller passed a value the store refuses (bad option, bad URL list).
    Invalid(String),
}

impl fmt::Display for StorageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StorageError::Sqlite(m) => write!(f, "sqlite error: {m}"),
            StorageError::QueueFull => f.write_str("storage queue is full"),
            StorageError::Closed => f.write_str("storage is shut down"),
            StorageError::Injected(name) => write!(f, "injected failure at fail point {name}"),
            StorageError::Corrupt(m) => write!(f, "corrupt or incompatible data: {m}"),
            StorageError::NotFound(m) => write!(f, "not found: {m}"),
            StorageError::Conflict(m) => write!(f, "conflict: {m}"),
            StorageError::Invalid(m) => write!(f, "invalid: {m}"),
        }
    }
}

impl std::error::Error for StorageError {}

impl From<rusqlite::Error> for StorageError {
    fn from(e: rusqlite::Error) -> Self {
        // A constraint failure is the caller's conflict (duplicate id, unknown
        // company), not a broken database; keep SQLite's text, which names
        // the constraint.
        if let rusqlite::Error::SqliteFailure(code, _) = &e {
            if code.code == rusqlite::ErrorCode::ConstraintViolation {
                return StorageError::Conflict(e.to_string());
            }
        }
        StorageError::Sqlite(e.to_string())
    }
}

impl From<std::io::Error> for StorageError {
    fn from(e: std::io::Error) -> Self {
        StorageError::Sqlite(format!("i/o: {e}"))
    }
}

/// The crate's result type.
pub(crate) type Result<T, E = StorageError> = std::result::Result<T, E>;
