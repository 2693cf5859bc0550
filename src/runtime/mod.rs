//! The running service: how it starts, recovers, runs and stops, the state
//! its parts share, and the threads that are nobody else's (the commit
//! consumer, the expiry thread, the control loop).
//!
//! Not for: protocols (`crate::http`, `crate::api`, `crate::sip`,
//! `crate::webhooks`) or decisions (`dialproof_engine`).

pub mod app;
pub mod clock;
pub mod commits;
pub mod config;
pub mod expiries;
pub mod expiry;
pub mod heartbeat;
pub mod leases;
pub mod metrics;
pub mod offload;
pub mod promotion;
pub mod resolve;
pub mod service;
pub mod thread_pool;
pub mod wait;
pub mod webhook_settings;
