//! The handles the runtime builds at start-up and hands to the parts that
//! use them: the clock, the configuration, the lease table, the expiry
//! schedule, the metrics, the resolver, the key cache, the request windows,
//! the operator connection, the thread pool for blocking work, the
//! background threads' CPU priority, the pending verifications held for
//! GETs and the creates' idempotency keys. Each part
//! (`crate::api`, `crate::dashboard`, `crate::sip`, `crate::webhooks`,
//! `crate::ops`) receives only the ones it names in its own context type.
//!
//! Not for: starting or stopping anything (`crate::runtime`), protocols, or
//! decisions (`dialproof_engine`). Nothing here imports a part or the
//! runtime, so the parts never import the runtime back.

pub mod admin;
pub mod clock;
pub mod config;
pub mod expiries;
pub mod fence;
pub mod health;
pub mod held_rows;
pub mod idempotency;
pub mod key_cache;
pub mod key_uses;
pub mod leases;
pub mod metrics;
pub mod number_health;
pub mod offload;
pub mod priority;
pub mod rate_limiters;
pub mod reply_slot;
pub mod resolve;
pub mod thread_pool;
pub mod wait;
pub mod webhook_settings;
