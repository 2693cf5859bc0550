//! Number health in the running service: the engine's state machine
//! (`dialproof_engine::number_health`) behind a lock, fed by the commit
//! consumer (leases issued and ended) and the SIP path (INVITEs), and kept
//! in step with the database by the control loop ([`NumberHealth::sync`]):
//! counters and new quarantines are written there, and a quarantine the
//! operator released there (`dialproof number release`) is ended here.
//!
//! Not for: the rule (the engine's) or withholding a quarantined number
//! (the control loop rebuilds the lease table without the numbers
//! [`NumberHealth::withheld`] names, as for an inactive number).

use crate::shared::wait::{Committing, Outcome};
use dialproof_engine::e164::PackedNumber;
use dialproof_engine::number_health::{Counters, Ending, NumberHealth as Engine, Quarantined};
use dialproof_engine::pool::Pool;
use dialproof_engine::time::UnixMillis;
use dialproof_storage::{NumberHealthRow, Quarantine, Store, WriteOp};
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How long a sync waits for its read or each of its commits.
const SYNC_WAIT: Duration = Duration::from_secs(10);

/// Most counter rows one write of a sync carries. The storage writer runs
/// one op at a time and a call's commit waits behind the op before it: at
/// thousands of leases a second, one write of every number changed in the
/// last second held the writer for 20-30 ms once a second, and the calls
/// that came meanwhile waited that long for their final response
/// (benches/README.md, "Background threads at a lower priority"). 256 rows
/// take about a millisecond.
const SAVE_CHUNK_ROWS: usize = 256;

#[derive(Default)]
struct State {
    engine: Engine,
    /// Numbers whose counters changed since the last write (packed: at a
    /// high lease rate this holds every number leased since the last tick).
    dirty: HashSet<PackedNumber>,
    /// Every quarantine and its pool, as decided or restored here.
    quarantined: HashMap<String, (Pool, UnixMillis)>,
    /// The quarantines the database held after our last sync.
    stored: HashSet<String>,
}

#[derive(Default)]
pub struct NumberHealth {
    state: Mutex<State>,
    /// INVITEs to one of our numbers while it was not leased.
    pub stray_calls: AtomicU64,
}

impl NumberHealth {
    /// The health stored before a restart.
    pub fn restored(rows: Vec<NumberHealthRow>, quarantines: Vec<Quarantine>) -> NumberHealth {
        let mut s = State::default();
        for r in rows {
            let counters = Counters {
                leases: r.leases,
                completed: r.completed,
                expired_uncalled: r.expired_uncalled,
                stray_calls: r.stray_calls,
                last_completion: r.last_completion_at,
                uncalled_in_a_row: r.uncalled_in_a_row,
                quarantined_since: r.quarantined_since,
            };
            s.engine.restore(&r.number, counters);
        }
        for q in quarantines {
            s.stored.insert(q.number.clone());
            s.quarantined.insert(q.number, (q.pool, q.since));
        }
        NumberHealth {
            state: Mutex::new(s),
            stray_calls: AtomicU64::new(0),
        }
    }

    pub fn on_lease(&self, number: &str, pool: Pool, now: UnixMillis) {
        let mut s = self.state.lock();
        s.engine.on_lease(number, pool, now);
        mark_dirty(&mut s.dirty, number);
    }

    pub fn on_invite(&self, number: &str, leased: bool) {
        if !leased {
            self.stray_calls.fetch_add(1, Ordering::Relaxed);
        }
        let mut s = self.state.lock();
        s.engine.on_invite(number, leased);
        mark_dirty(&mut s.dirty, number);
    }

    /// A lease ended; a quarantine it decides is logged at WARN here and
    /// withheld at the control loop's next tick.
    pub fn on_end(&self, number: &str, pool: Pool, ending: Ending, now: UnixMillis) {
        let mut s = self.state.lock();
        let decided = s.engine.on_end(number, pool, ending, now);
        mark_dirty(&mut s.dirty, number);
        if let Some(q) = decided {
            log_quarantine(&q);
            s.quarantined.insert(q.number, (pool, now));
        }
    }

    /// The numbers the lease table must withhold.
    pub fn withheld(&self) -> HashSet<String> {
        self.state.lock().quarantined.keys().cloned().collect()
    }

    /// Quarantined numbers per pool, for the metrics.
    pub fn quarantined_per_pool(&self) -> HashMap<Pool, u64> {
        let mut out = HashMap::new();
        for (pool, _) in self.state.lock().quarantined.values() {
            *out.entry(*pool).or_insert(0) += 1;
        }
        out
    }

    /// The control loop's tick: ends the quarantines the operator released
    /// in the database, then writes changed counters and new quarantines.
    /// A failed write is retried at the next tick.
    pub fn sync(&self, store: &Store) {
        let in_db = match store.read_within(SYNC_WAIT, |r| r.number_quarantines()) {
            Outcome::Done(rows) => rows,
            other => {
                tracing::warn!(error = %other, "reading number quarantines failed");
                return;
            }
        };
        let in_db: HashSet<String> = in_db.into_iter().map(|q| q.number).collect();
        let (rows, new) = self.take_changes(&in_db);
        if !rows.is_empty() || !new.is_empty() {
            self.save(store, rows, new);
        }
    }

    /// Ends the quarantines released in the database (`in_db` is what it
    /// holds now) and takes what changed since the last write: each
    /// changed number with its counters, and the quarantines not stored.
    fn take_changes(
        &self,
        in_db: &HashSet<String>,
    ) -> (Vec<(PackedNumber, NumberHealthRow)>, Vec<Quarantine>) {
        let mut s = self.state.lock();
        let released: Vec<String> = s.stored.difference(in_db).cloned().collect();
        for number in &released {
            s.engine.release(number);
            s.quarantined.remove(number);
            s.stored.remove(number);
            mark_dirty(&mut s.dirty, number);
            tracing::info!(dial_number = %number, "number released from quarantine");
        }
        // Taken, not drained: a drained set keeps its peak's buckets, and a
        // burst of leases between two ticks would keep them for good.
        let dirty = std::mem::take(&mut s.dirty);
        let rows = dirty
            .into_iter()
            .filter_map(|n| Some((n, row(&s.engine, n)?)))
            .collect();
        let new = s
            .quarantined
            .iter()
            .filter(|(n, _)| !s.stored.contains(*n))
            .map(|(n, (pool, since))| Quarantine {
                number: n.clone(),
                pool: *pool,
                since: *since,
            })
            .collect();
        (rows, new)
    }

    /// Writes `rows` [`SAVE_CHUNK_ROWS`] at a time, `new` quarantines with
    /// the first write, each write committed before the next is submitted,
    /// so that calls' commits go in between. Not under the lock: the commit
    /// consumer takes it for every lease. What a failed write held, and
    /// every row after it, is marked changed again for the next tick.
    fn save(
        &self,
        store: &Store,
        rows: Vec<(PackedNumber, NumberHealthRow)>,
        new: Vec<Quarantine>,
    ) {
        let mut rows = rows.into_iter();
        let mut quarantines = new;
        loop {
            let (numbers, chunk): (Vec<PackedNumber>, Vec<NumberHealthRow>) =
                rows.by_ref().take(SAVE_CHUNK_ROWS).unzip();
            if chunk.is_empty() && quarantines.is_empty() {
                return;
            }
            let first = std::mem::take(&mut quarantines);
            let saved = store.commit(SYNC_WAIT, |reply| WriteOp::SaveNumberHealth {
                rows: chunk,
                quarantines: first.clone(),
                reply,
            });
            let mut s = self.state.lock();
            match saved {
                Outcome::Done(()) => s.stored.extend(first.into_iter().map(|q| q.number)),
                failed => {
                    // Written again at the next tick.
                    s.dirty.extend(numbers);
                    s.dirty.extend(rows.map(|(n, _)| n));
                    tracing::warn!(error = %failed, "saving number health failed");
                    return;
                }
            }
        }
    }
}

/// Notes `number` as changed. The engine keeps nothing for a text that is
/// not `+` and digits, so there is nothing to write for one.
fn mark_dirty(dirty: &mut HashSet<PackedNumber>, number: &str) {
    if let Some(packed) = PackedNumber::parse(number) {
        dirty.insert(packed);
    }
}

fn row(engine: &Engine, packed: PackedNumber) -> Option<NumberHealthRow> {
    let number = packed.to_string();
    let c = engine.counters(&number)?;
    Some(NumberHealthRow {
        number,
        leases: c.leases,
        completed: c.completed,
        expired_uncalled: c.expired_uncalled,
        stray_calls: c.stray_calls,
        last_completion_at: c.last_completion,
        uncalled_in_a_row: c.uncalled_in_a_row,
        quarantined_since: c.quarantined_since,
    })
}

fn log_quarantine(q: &Quarantined) {
    tracing::warn!(dial_number = %q.number, pool = q.pool.as_str(),
        uncalled_in_a_row = q.uncalled_in_a_row, k = q.threshold.k.unwrap_or(0),
        pool_completion_share = q.threshold.p, pool_leases_per_day = q.threshold.leases_per_day,
        "number quarantined: its last leases all expired without a single INVITE; \
         withheld from leasing until `dialproof number release`");
}
