//! Faults under the real binary, each survived without a restart: a full
//! disk ([`disk_full`]), a storage writer that fails and the durable 503
//! rows ([`storage`]), a provider that falls silent ([`provider`]) and a
//! registrar that does ([`registrar`]).
//!
//! Not for: peers that misbehave on purpose (`super::hostile`), or kills
//! (`super::crash`).

mod disk_full;
mod provider;
mod registrar;
mod storage;
