//! Crashes and restarts of the real binary: every acknowledged create
//! survives SIGKILL and leases come back ([`restart`]), a restart with a
//! backlog larger than any queue ([`backlog`]), and the crash harness's
//! kills under mixed load ([`harness`]).
//!
//! Not for: a graceful stop (`ops::shutdown`), or failover to another
//! machine (`standby`).

mod backlog;
mod harness;
mod restart;
