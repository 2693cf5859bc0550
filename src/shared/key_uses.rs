//! Keys' last-use times on their way to the database: requests note a
//! key's use here, and the control loop writes every key noted since its
//! last write in one go, once per [`KEY_USES_FLUSH_EVERY_MS`] (and once more
//! at a graceful stop).
//!
//! Why not a write per use: every commit, however small, empties the page
//! cache of every SQLite connection that reads (in WAL mode a connection
//! that finds a commit it has not seen drops its cached pages), and the
//! workers' own connections serve every GET of a verification that is not
//! held in memory. Twenty busy keys each touched once a second were twenty
//! commits a second, so a client polling many verifications read its pages
//! from the kernel again almost every time (`tools/read-ab.sh`: 0.32 of the
//! cheapest route's rate before, 0.44 after, over 150,000 verifications).
//! A last-use time to the minute is what the dashboard and `key list` show
//! it for.
//!
//! Bounded: one entry per key used since the last write; a key noted again
//! only moves its time forward.
//!
//! Not for: rate limits (`crate::shared::rate_limiters`, which also rations
//! how often a key is noted) or anything that must be written: a last-use
//! time lost in a crash or a full writer queue is the next use's.

use dialproof_engine::time::UnixMillis;
use dialproof_storage::{Store, WriteOp};
use parking_lot::Mutex;
use std::collections::HashMap;

/// How often the noted uses are written.
pub const KEY_USES_FLUSH_EVERY_MS: i64 = 60_000;

#[derive(Default)]
pub struct KeyUses {
    /// Key id to its latest noted use.
    noted: Mutex<HashMap<i64, UnixMillis>>,
}

impl KeyUses {
    /// Notes that key `key_id` was used at `at`.
    pub fn note(&self, key_id: i64, at: UnixMillis) {
        let mut noted = self.noted.lock();
        let latest = noted.entry(key_id).or_insert(at);
        *latest = (*latest).max(at);
    }

    /// Writes the noted uses if `last_flush` (when the caller last wrote
    /// them; 0 before the first) is [`KEY_USES_FLUSH_EVERY_MS`] old at
    /// `now`, and moves it to `now`. The control loop is the only caller,
    /// so it keeps that time itself. Returns how many keys were handed to
    /// the writer.
    pub fn flush_if_due(
        &self,
        store: &Store,
        now: UnixMillis,
        last_flush: &mut UnixMillis,
    ) -> usize {
        if now.0.saturating_sub(last_flush.0) < KEY_USES_FLUSH_EVERY_MS {
            return 0;
        }
        *last_flush = now;
        self.flush(store)
    }

    /// Writes the noted uses now: one fire-and-forget op per key, queued
    /// back to back, so the writer takes them in one batch and one commit.
    /// A use the writer's queue refuses is noted again for the next write.
    pub fn flush(&self, store: &Store) -> usize {
        let taken = std::mem::take(&mut *self.noted.lock());
        let mut handed = 0;
        for (key_id, at) in taken {
            match store.submit(WriteOp::TouchKey { key_id, at }) {
                Ok(()) => handed += 1,
                Err(e) => {
                    tracing::debug!(key_id, error = %e, "key last-use write deferred");
                    self.note(key_id, at);
                }
            }
        }
        handed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_noted_twice_keeps_its_latest_use() {
        let uses = KeyUses::default();
        uses.note(7, UnixMillis(2_000));
        uses.note(7, UnixMillis(1_000));
        uses.note(8, UnixMillis(1_500));
        let noted = uses.noted.lock();
        assert_eq!(noted.get(&7), Some(&UnixMillis(2_000)));
        assert_eq!(noted.len(), 2);
    }
}
