//! The in-memory view of API keys and companies, refreshed from SQLite.
//!
//! Every request authenticates against this cache, never against the
//! database. The control thread reloads it when the database's change
//! version moves (an operator created, revoked or re-limited a key), so a
//! revocation takes effect within one poll interval. A token with an unknown
//! prefix triggers one immediate version check, so a key created a moment
//! ago works at once; those checks are rationed so a flood of made-up tokens
//! cannot turn into a flood of database reads.
//!
//! Not for: verifying rate limits (see `crate::shared::rate_limiters`) or persisting keys.

use crate::shared::wait::Committing;
use dialproof_engine::time::UnixMillis;
use dialproof_engine::CompanyId;
use dialproof_storage::{CompanyRow, KeyRow, StorageError, Store};
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// How long a cache reload may wait for the reader threads.
const RELOAD_TIMEOUT: Duration = Duration::from_secs(5);
/// At most this many miss-triggered version checks per second.
const MISS_CHECKS_PER_SECOND_MAX: u32 = 50;

/// Rows behind `Arc`s: every API request takes its key from here, and
/// every create its company, so a look-up is a reference count, not a copy
/// of the row's strings (a key's label, prefix and hash; a company's
/// secrets and development URLs).
#[derive(Default)]
struct Snapshot {
    version: i64,
    keys: HashMap<String, Arc<KeyRow>>,
    companies: HashMap<CompanyId, Arc<CompanyRow>>,
    dedicated: Vec<(String, CompanyId)>,
}

pub struct KeyCache {
    store: Store,
    snapshot: RwLock<Arc<Snapshot>>,
    /// (second, checks in that second) for the miss-check ration.
    miss_checks: Mutex<(i64, u32)>,
    /// Serialises reloads so two threads never race to install snapshots.
    /// A may mutex, not a thread mutex: the holder parks its coroutine
    /// waiting for the reader threads, and a thread mutex would then block
    /// the worker threads of every other coroutine that wants it, possibly
    /// including the one the holder needs to resume on (a deadlock).
    reload_lock: may::sync::Mutex<()>,
}

impl KeyCache {
    pub fn new(store: Store) -> Self {
        KeyCache {
            store,
            snapshot: RwLock::new(Arc::new(Snapshot {
                version: -1,
                ..Snapshot::default()
            })),
            miss_checks: Mutex::new((0, 0)),
            reload_lock: may::sync::Mutex::new(()),
        }
    }

    pub fn key(&self, prefix: &str) -> Option<Arc<KeyRow>> {
        self.snapshot.read().keys.get(prefix).cloned()
    }

    pub fn company(&self, id: CompanyId) -> Option<Arc<CompanyRow>> {
        self.snapshot.read().companies.get(&id).cloned()
    }

    pub fn dedicated_numbers(&self) -> Vec<(String, CompanyId)> {
        self.snapshot.read().dedicated.clone()
    }

    pub fn version(&self) -> i64 {
        self.snapshot.read().version
    }

    /// Looks a key up; on a miss, checks (rationed) whether the database
    /// changed and looks again. Single flight: concurrent misses queue on
    /// the reload lock, and each looks at the cache again once it holds it,
    /// so a burst of first requests with a new key costs one reload.
    pub fn key_or_refresh(&self, prefix: &str, now: UnixMillis) -> Option<Arc<KeyRow>> {
        if let Some(k) = self.key(prefix) {
            return Some(k);
        }
        let _serial = self.lock_reload();
        if let Some(k) = self.key(prefix) {
            return Some(k);
        }
        if !self.take_miss_check(now) {
            return None;
        }
        match self.refresh_locked() {
            Ok(_) => self.key(prefix),
            Err(e) => {
                tracing::warn!(error = %e, "key cache refresh failed");
                None
            }
        }
    }

    fn take_miss_check(&self, now: UnixMillis) -> bool {
        let mut g = self.miss_checks.lock();
        let second = now.unix_seconds();
        if g.0 != second {
            *g = (second, 0);
        }
        if g.1 >= MISS_CHECKS_PER_SECOND_MAX {
            return false;
        }
        g.1 += 1;
        true
    }

    /// Reloads everything when the database's change version differs from
    /// the cached one. Returns whether a reload happened.
    pub fn refresh_if_changed(&self) -> Result<bool, StorageError> {
        let _serial = self.lock_reload();
        self.refresh_locked()
    }

    fn refresh_locked(&self) -> Result<bool, StorageError> {
        let version = self
            .store
            .read_within(RELOAD_TIMEOUT, |r| r.change_version())
            .into_result()?;
        if version == self.version() {
            return Ok(false);
        }
        self.reload_locked()?;
        Ok(true)
    }

    fn lock_reload(&self) -> may::sync::MutexGuard<'_, ()> {
        // A poisoned lock only means a reload panicked; the snapshot it
        // guards is replaced whole, so carrying on is safe.
        self.reload_lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Loads keys, companies and dedicated numbers in one read job.
    pub fn reload(&self) -> Result<(), StorageError> {
        let _serial = self.lock_reload();
        self.reload_locked()
    }

    fn reload_locked(&self) -> Result<(), StorageError> {
        let snapshot = self
            .store
            .read_within(RELOAD_TIMEOUT, |r| {
                // Read the version first: a change that lands during the
                // reload then shows as a newer version on the next poll.
                let version = r.change_version()?;
                Ok(Snapshot {
                    version,
                    keys: r
                        .load_keys()?
                        .into_iter()
                        .map(|k| (k.prefix.clone(), Arc::new(k)))
                        .collect(),
                    companies: r
                        .load_companies()?
                        .into_iter()
                        .map(|c| (c.id, Arc::new(c)))
                        .collect(),
                    dedicated: r.load_dedicated_numbers()?,
                })
            })
            .into_result()?;
        *self.snapshot.write() = Arc::new(snapshot);
        Ok(())
    }
}
