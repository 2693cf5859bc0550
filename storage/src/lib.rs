//! SQLite persistence for Dialproof: schema and migrations, one writer
//! thread that batches (group commit), reader threads, recovery queries, and
//! the operator's changes.
//!
//! How it fits: the binary opens a [`Store`] and talks to it only by
//! queueing — [`Store::submit`] a [`WriteOp`] or [`Store::read`] a job — and
//! gets results through reply callbacks called on the storage threads, after
//! COMMIT for writes. The operator CLI uses [`Admin`] from another process
//! against the same file. Files, in the order a write travels: `store`
//! (handle, queues, shutdown), `writer` (group commit, transitions, outbox),
//! `checkpoint` (WAL policy), `reader` (queries), `admin`, `rows` (row
//! types and mapping), `schema` (migrations), `conn` (connection settings),
//! `failpoints` (crash and error injection).
//!
//! Not for: HTTP (storage knows rows, not status codes), clocks (every time
//! is passed in as `now`/`at`), or decisions (the engine's state machine
//! decides; the writer persists its decision atomically with the outbox).
#![forbid(unsafe_code)]

mod admin;
mod checkpoint;
mod conn;
mod deliveries;
mod error;
mod failpoints;
mod reader;
mod rows;
mod schema;
mod store;
mod users;
mod writer;

pub use admin::{Admin, DEV_WEBHOOK_URLS_MAX, DEV_WEBHOOK_URL_LEN_MAX};
pub use deliveries::{
    truncate_utf8, AttemptRow, DeliveryFilter, DeliveryLogEntry, NewAttempt, ATTEMPTS_LISTED_MAX,
    DELIVERY_LOG_LIMIT_MAX, ERROR_TEXT_BYTES_MAX, RESPONSE_BODY_LOG_BYTES_MAX,
};
pub use error::StorageError;
pub use failpoints::{FailPoints, FAIL_POINT_NAMES};
pub use reader::{PendingLease, Reader, DUE_DELIVERIES_LIMIT_MAX};
pub use rows::{
    CompanyRow, DeliveryRow, DeliveryState, KeyRow, NewRejection, TransitionResult, VerificationRow,
};
pub use store::{Options, Store, StoreStats, READERS_MAX};
pub use users::{NewSession, SessionUser, UserRow, SESSIONS_PER_USER_MAX};
pub use writer::{Reply, WriteOp};
