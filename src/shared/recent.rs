//! The rendered rows of recently created verifications, so that a GET of a
//! live verification is answered from memory instead of a hop to a SQLite
//! reader thread and back (the card's shape: live state in memory, SQLite
//! behind it).
//!
//! Who writes: the commit consumer, in commit order, adds a row when its
//! create commits and replaces it when its status changes; the cancel
//! handler replaces it before it answers, so the canceller's next GET sees
//! what the cancel returned. A terminal row is final (a terminal status
//! never changes), so it is never replaced by a pending one: whichever of
//! the two writers comes last, the entry is never older than what either
//! saw committed. What is not here (never created since the start,
//! evicted, another company's) is read from SQLite as before.
//!
//! Test-mode rows are not held: the purge deletes them after their
//! retention, and a held copy would outlive its row; SQLite answers for
//! them (exactly as fresh, a reader hop slower).
//!
//! Bounded: at most [`RECENT_ROWS_MAX`] entries, the oldest insertions
//! evicted first (a few MB, whatever the number of pending verifications).
//!
//! Not for: lists or anything but a GET by id (the dashboard reads
//! SQLite), nor deciding anything.

use dialproof_storage::Owner;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;

/// Most rows held, over all shards.
pub const RECENT_ROWS_MAX: usize = 16_384;
/// Shards, so that concurrent workers rarely meet on one lock (each holds
/// it for a map operation, never across a wait).
const SHARDS: usize = 16;

/// One verification's rendered JSON body.
struct Entry {
    owner: Owner,
    body: Arc<str>,
    terminal: bool,
}

#[derive(Default)]
struct Shard {
    map: HashMap<Box<str>, Entry>,
    /// Insertion order, for eviction.
    order: VecDeque<Box<str>>,
}

pub struct RecentRows {
    shards: [Mutex<Shard>; SHARDS],
    hasher: RandomState,
}

impl Default for RecentRows {
    fn default() -> Self {
        RecentRows {
            shards: std::array::from_fn(|_| Mutex::default()),
            hasher: RandomState::new(),
        }
    }
}

impl RecentRows {
    fn shard(&self, id: &str) -> &Mutex<Shard> {
        // The modulo keeps the index in range.
        &self.shards[(self.hasher.hash_one(id) as usize) % SHARDS]
    }

    /// The body of verification `id` if it is held and belongs to
    /// `owner` (a company, in one mode).
    pub fn get(&self, id: &str, owner: impl Into<Owner>) -> Option<Arc<str>> {
        let shard = self.shard(id).lock();
        let entry = shard.map.get(id)?;
        (entry.owner == owner.into()).then(|| entry.body.clone())
    }

    /// A committed create: held unless a row for `id` is already there (a
    /// terminal one written first by a cancel that overtook the consumer).
    pub fn created(&self, id: &str, owner: impl Into<Owner>, body: String) {
        self.put(id, owner.into(), body, false);
    }

    /// A committed change to a terminal status: replaces whatever is held,
    /// or holds it.
    pub fn ended(&self, id: &str, owner: impl Into<Owner>, body: String) {
        self.put(id, owner.into(), body, true);
    }

    fn put(&self, id: &str, owner: Owner, body: String, terminal: bool) {
        if !owner.livemode {
            return;
        }
        let mut shard = self.shard(id).lock();
        if let Some(entry) = shard.map.get_mut(id) {
            if terminal || !entry.terminal {
                entry.body = body.into();
                entry.terminal |= terminal;
            }
            return;
        }
        if shard.order.len() >= RECENT_ROWS_MAX / SHARDS {
            if let Some(oldest) = shard.order.pop_front() {
                shard.map.remove(&oldest);
            }
        }
        shard.order.push_back(id.into());
        let entry = Entry {
            owner,
            body: body.into(),
            terminal,
        };
        shard.map.insert(id.into(), entry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_terminal_row_is_never_replaced_by_a_pending_one() {
        let rows = RecentRows::default();
        rows.ended("ver_a", 1, "expired".into());
        rows.created("ver_a", 1, "pending".into());
        assert_eq!(rows.get("ver_a", 1).as_deref(), Some("expired"));
        rows.created("ver_b", 1, "pending".into());
        rows.ended("ver_b", 1, "completed".into());
        assert_eq!(rows.get("ver_b", 1).as_deref(), Some("completed"));
    }

    #[test]
    fn another_companys_row_is_not_found() {
        let rows = RecentRows::default();
        rows.created("ver_a", 1, "pending".into());
        assert_eq!(rows.get("ver_a", 2), None);
        assert_eq!(rows.get("ver_z", 1), None);
    }

    #[test]
    fn test_mode_rows_are_never_held() {
        let rows = RecentRows::default();
        let test = Owner {
            company_id: 1,
            livemode: false,
        };
        rows.created("ver_t", test, "pending".into());
        rows.ended("ver_t", test, "expired".into());
        assert_eq!(
            rows.get("ver_t", test),
            None,
            "the purge would leave a copy"
        );
    }

    #[test]
    fn the_oldest_rows_go_first_past_the_bound() {
        let rows = RecentRows::default();
        let n = RECENT_ROWS_MAX * 2;
        for i in 0..n {
            rows.created(&format!("ver_{i}"), 1, i.to_string());
        }
        let held: usize = rows.shards.iter().map(|s| s.lock().map.len()).sum();
        assert!(held <= RECENT_ROWS_MAX, "{held}");
        assert!(held >= RECENT_ROWS_MAX - SHARDS * 64, "{held}");
        assert_eq!(
            rows.get(&format!("ver_{}", n - 1), 1).as_deref(),
            Some(&*(n - 1).to_string())
        );
        assert_eq!(rows.get("ver_0", 1), None);
    }
}
