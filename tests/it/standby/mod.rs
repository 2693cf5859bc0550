//! A standby that takes over: failover under load with Litestream
//! ([`failover`]), and a promoted start's hold, gauges and end
//! ([`promotion`]).
//!
//! Not for: restarts of one service on its own data
//! (`resilience::crash`).

pub(crate) mod failover;
mod promotion;
