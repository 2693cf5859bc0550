//! The idempotency table (`dialproof_engine::idempotency::Table`) behind
//! its lock, shared by the API (which begins a keyed create, abandons it or
//! fills in an answer read back from the database), the commit consumer
//! (which records each committed keyed create) and the control loop (which
//! expires answers past the retention).
//!
//! A create that claims a key holds a [`Claim`]: dropping it abandons the
//! claim, so a create that ends in any way other than a commit (an error,
//! a panic, a write the writer refused) frees its key, and the claim can
//! travel inside a storage reply so that a commit whose requester stopped
//! waiting still ends it when the writer answers.
//!
//! Not for: deciding (the engine's table does) or storing (storage's
//! `idempotency_keys`, written with the verification).

use dialproof_engine::idempotency::{
    Answer, Begin, Fingerprint, IdempotencyKey, Limits, Space, Table,
};
use dialproof_engine::time::UnixMillis;
use parking_lot::Mutex;
use std::sync::Arc;

/// See the module docs. Every method holds the lock for a hash-map
/// operation only, never across IO.
pub struct IdempotencyKeys {
    table: Mutex<Table>,
}

/// What the metrics show of the table.
#[derive(Clone, Copy, Debug, Default)]
pub struct TableStats {
    pub answers: usize,
    pub answer_bytes: usize,
    pub in_flight: usize,
}

impl IdempotencyKeys {
    pub fn new(retention_hours: u32) -> Arc<IdempotencyKeys> {
        Arc::new(IdempotencyKeys {
            table: Mutex::new(Table::new(retention_hours, Limits::default())),
        })
    }

    /// What a create with `key` and `fingerprint` gets; with `Claimed`, a
    /// [`Claim`] the create must keep until it ends.
    pub fn begin(
        self: &Arc<Self>,
        company: Space,
        key: &IdempotencyKey,
        fingerprint: Fingerprint,
        now: UnixMillis,
    ) -> Result<Claim, Begin> {
        match self.table.lock().begin(company, key, fingerprint, now) {
            Begin::Claimed => Ok(Claim {
                keys: Arc::clone(self),
                company,
                key: key.clone(),
                fingerprint,
                armed: true,
            }),
            other => Err(other),
        }
    }

    /// A keyed create committed, or a stored one was read back.
    pub fn record(&self, company: Space, key: &IdempotencyKey, answer: Answer) {
        self.table.lock().record(company, key, answer);
    }

    /// Keys created at or before this moment are past the retention.
    pub fn expired_before(&self, now: UnixMillis) -> UnixMillis {
        self.table.lock().expired_before(now)
    }

    /// Drops answers past the retention from memory.
    pub fn expire(&self, now: UnixMillis) {
        self.table.lock().expire(now);
    }

    /// A configuration reload's new retention; answers already held keep
    /// their place and are judged by the new one.
    pub fn set_retention_hours(&self, hours: u32) {
        self.table.lock().set_retention_hours(hours);
    }

    pub fn stats(&self) -> TableStats {
        let table = self.table.lock();
        TableStats {
            answers: table.answers(),
            answer_bytes: table.answer_bytes(),
            in_flight: table.in_flight(),
        }
    }
}

/// One create's hold on its key; see the module docs.
pub struct Claim {
    keys: Arc<IdempotencyKeys>,
    company: Space,
    key: IdempotencyKey,
    fingerprint: Fingerprint,
    armed: bool,
}

impl Claim {
    pub fn key(&self) -> &IdempotencyKey {
        &self.key
    }

    /// The company and mode the key belongs to.
    pub fn company(&self) -> Space {
        self.company
    }

    pub fn fingerprint(&self) -> Fingerprint {
        self.fingerprint
    }

    /// The create committed: the commit consumer records its answer, which
    /// replaces the claim. (Abandoning it here could free the key for a
    /// moment before that.)
    pub fn committed(mut self) {
        self.armed = false;
    }

    /// The key was found stored already: its answer replaces the claim.
    pub fn found(mut self, answer: Answer) {
        self.keys.record(self.company, &self.key, answer);
        self.armed = false;
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if self.armed {
            self.keys.table.lock().abandon(self.company, &self.key);
        }
    }
}
