//! What `/readyz` reports beyond storage: set by the start sequence, read by
//! the operators' listener.
//!
//! Not for: the storage check (`dialproof_storage::Store`) or answering the
//! probe (`crate::ops`).

use std::sync::atomic::AtomicBool;

/// Readiness beyond storage, set by the start sequence (`/readyz`).
#[derive(Default)]
pub struct Readiness {
    /// Recovery has rebuilt the lease table and expired what ran out.
    pub recovered: AtomicBool,
    /// Every configured listener is bound.
    pub listening: AtomicBool,
}
