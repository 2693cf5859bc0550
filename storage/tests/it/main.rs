//! The storage crate's integration tests, one binary with a module per
//! part of the store: operator changes through `Admin` ([`admin`]), the
//! writer's group commit ([`group_commit`]) and its commit consumer
//! ([`committed`]), verification transitions ([`transitions`]) and those by
//! dial number ([`by_number`]), point reads on the calling thread
//! ([`local_reads`]), the webhook outbox ([`deliveries`]),
//! restarts, crashes and fail points ([`recovery`]), the page size of new
//! and existing files ([`pages`]), the WAL under
//! never-pausing readers ([`wal`]) and how commits reach it
//! ([`wal_writes`]), what Litestream replication asks of
//! the store ([`replication`]), and a throughput figure ([`throughput`],
//! ignored by default).
//!
//! Each test runs on a fresh SQLite file ([`support`]).
//!
//! Not for: the service over its interfaces (the root package's
//! `tests/it`), or unit tests (next to the code).

mod support;

mod admin;
mod by_number;
mod committed;
mod deliveries;
mod group_commit;
mod local_reads;
mod migrations;
mod pages;
mod recovery;
mod replication;
mod test_mode;
mod throughput;
mod transitions;
mod wal;
mod wal_writes;
