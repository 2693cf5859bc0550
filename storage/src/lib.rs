//! SQLite persistence for Dialproof: schema and migrations, one writer
//! thread that batches (group commit), reader threads, recovery queries, and
//! the operator's changes.
//!
//! How it fits: the binary opens a [`Store`] and talks to it only by
//! queueing — [`Store::submit`] a [`WriteOp`] or [`Store::read`] a job — and
//! gets results through reply callbacks called on the storage threads, after
//! COMMIT for writes. What must follow a commit (a released number, a new
//! outbox row, a log line) comes out once, as [`Committed`] events, on the
//! [`CommitReceiver`] of the one consumer the binary runs (see
//! [`Store::open_with_commit_sink`]). The operator CLI uses [`Admin`] from
//! another process against the same file.
//!
//! Files, in the order a write travels: `store` (handle, queues, shutdown),
//! `ops` (what is queued, and the reply type), `writer` (the group-commit
//! thread; its `batch`, `op`, `replies`, `transition` and `inserts`),
//! `idempotency` (a create's key, stored with its row), `committed` (the
//! events after COMMIT), `checkpoint` (WAL policy),
//! `stats` (counters); then `reader` (queries and reader threads),
//! `local_reader` (point reads on the calling thread), `admin`
//! (the operator's changes), `companies` (the queries both share), `meta`
//! (the change counter), `replica` (the heartbeat and what a promoted
//! standby reads), `deliveries` (webhook attempts and log), `rejections`
//! (the 503 rows), `users` (dashboard users and sessions), `dashboard_ops`
//! (a company's keys, logout), `verification_list` (the dashboard's list
//! and totals), `rows` (row types and mapping), `schema`
//! (migrations), `conn` (connection settings), `wal_vfs` (the writer's
//! WAL file, written one commit at a time), `failpoints` (crash and
//! error injection), `error`. [`handoff`] is the blocking queue the
//! store's own two queues (the writer's intake, the commit queue) and the
//! binary's webhook senders take their work from.
//!
//! Replication: under Litestream (`Replication::Litestream`, the
//! configuration's `replication = "litestream"`) the writer leaves the
//! WAL's reset to Litestream (see `checkpoint`) and commits a heartbeat
//! every second (`meta.heartbeat_at`), so a replica knows how recent it is
//! without traffic; `replica` reads what a promoted standby needs from a
//! restored file. `tests/it/replication.rs` checks that in this mode the WAL
//! header never changes and the file never shrinks while 20 MiB go through
//! it under a Litestream-like reader, and that without it shutdown
//! truncates the WAL. The bundled SQLite (3.54.1, rusqlite 0.43) is recent
//! enough for two processes that write and checkpoint one WAL database
//! (3.51.3 or later).
//!
//! Not for: HTTP (storage knows rows, not status codes), clocks (every time
//! is passed in as `now`/`at`), decisions (the engine's state machine
//! decides; the writer persists its decision atomically with the outbox),
//! or acting on a commit (the binary's consumer does).
// Unsafe code only in `wal_vfs`, the writer's WAL file through SQLite's C
// VFS interface; everything else goes through rusqlite's safe API.
#![deny(unsafe_code)]

mod admin;
mod checkpoint;
mod committed;
mod companies;
mod conn;
mod dashboard_ops;
mod deliveries;
mod error;
mod failpoints;
pub mod handoff;
mod idempotency;
mod local_reader;
mod meta;
mod migration_delivery_mode;
mod migration_evidence;
mod migration_status_checks;
mod migration_testmode;
mod number_health;
mod ops;
mod reader;
mod rejections;
mod replica;
mod rows;
mod schema;
mod stats;
mod store;
mod test_rows;
mod users;
mod verification_list;
mod wal_vfs;
mod writer;

pub use admin::{Admin, DEV_WEBHOOK_URLS_MAX, DEV_WEBHOOK_URL_LEN_MAX};
pub use checkpoint::Replication;
pub use committed::{
    CommitProgress, CommitReceiver, CommitSink, Committed, CommittedBatch, Transitioned,
};
pub use deliveries::{
    truncate_utf8, AttemptRow, DeliveryFilter, DeliveryLogEntry, NewAttempt, ATTEMPTS_LISTED_MAX,
    DELIVERY_LOG_LIMIT_MAX, ERROR_TEXT_BYTES_MAX, RESPONSE_BODY_LOG_BYTES_MAX,
};
pub use error::StorageError;
pub use failpoints::{FailPoints, FAIL_POINT_NAMES};
pub use idempotency::{Inserted, KeyedCreate, StoredKey, PURGE_BATCH_MAX};
pub use number_health::{NumberHealthChange, NumberHealthRow, NumberRun, Quarantine};
pub use ops::{Reply, WriteOp};
pub use reader::{PendingLease, Reader, Undelivered, DUE_DELIVERIES_LIMIT_MAX};
pub use rejections::{RejectionRow, REJECTIONS_LISTED_MAX};
pub use rows::{
    CompanyRow, DeliveryRow, DeliveryState, KeyRow, NewRejection, Owner, ReleasedLease,
    TransitionResult, VerificationRow, VerificationView,
};
pub use schema::{
    current_version as schema_version, newer_message as schema_newer_message,
    version_of as schema_version_of,
};
pub use stats::{StoreStats, BATCH_OPS_BUCKETS, COMMIT_SECONDS_BUCKETS};
pub use store::{
    Options, Store, BATCH_MAX_DEFAULT, QUEUE_CAPACITY_DEFAULT, READERS_DEFAULT, READERS_MAX,
};
pub use test_rows::TEST_PURGE_BATCH_MAX;
pub use users::{NewSession, SessionUser, UserRow, SESSIONS_PER_USER_MAX};
pub use verification_list::{
    Counts, ListCursor, ListFilter, ListPage, ListedRow, Totals, LIST_PAGE_MAX,
};
