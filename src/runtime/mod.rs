//! The running service: how it starts, recovers, runs and stops, and the
//! threads that are nobody else's (the commit consumer, the expiry thread,
//! the control loop). It builds the shared handles (`crate::shared`) and
//! each part's context, and is the only module that sees them all.
//!
//! Not for: protocols (`crate::http`, `crate::api`, `crate::sip`,
//! `crate::webhooks`) or decisions (`dialproof_engine`). No part imports
//! this module.

pub mod app;
pub mod commits;
pub mod control;
pub mod expiry;
pub mod ha_child;
pub mod heartbeat;
pub mod log_sink;
pub mod malloc;
pub mod preflight;
pub mod promotion;
pub mod recovery;
pub mod service;
