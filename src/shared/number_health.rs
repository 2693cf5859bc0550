//! Number health in the running service: the engine's state machine
//! (`dialproof_engine::number_health`) behind a lock, fed by the commit
//! consumer (leases issued and ended) and the SIP path (INVITEs), and kept
//! in step with the database by the control loop ([`NumberHealth::sync`]):
//! the counts changed since the last write are added to the stored ones,
//! new quarantines are written, and a quarantine the operator released
//! there (`dialproof number release`) is ended here.
//!
//! Each change is stored exactly once: a write's changes are held by an
//! [`Unsaved`] inside the write's reply, which gives them back to the
//! engine unless the writer answers that it committed, wherever the
//! answer ends up (a refused op, an error, an answer after the control
//! loop stopped waiting).
//!
//! Not for: the rule (the engine's) or withholding a quarantined number
//! (the control loop rebuilds the lease table without the numbers
//! [`NumberHealth::withheld`] names, as for an inactive number).

use crate::shared::reply_slot::{self, Ended};
use crate::shared::wait::{Committing, Outcome};
use dialproof_engine::e164::PackedNumber;
use dialproof_engine::number_health::{Change, Ending, NumberHealth as Engine, Quarantined};
use dialproof_engine::pool::Pool;
use dialproof_engine::time::UnixMillis;
use dialproof_storage::{NumberHealthChange, NumberRun, Quarantine, StorageError, Store, WriteOp};
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How long a sync waits for its read or each of its commits.
const SYNC_WAIT: Duration = Duration::from_secs(10);

/// Most changed numbers one write of a sync carries. The storage writer
/// runs one op at a time and a call's commit waits behind the op before
/// it: at thousands of leases a second, one write of every number changed
/// in the last second held the writer for 20-30 ms once a second, and the
/// calls that came meanwhile waited that long for their final response
/// (benches/README.md, "Background threads at a lower priority"). 256 rows
/// take about a millisecond.
const SAVE_CHUNK_ROWS: usize = 256;

#[derive(Default)]
struct State {
    engine: Engine,
    /// Every quarantine and its pool, as decided or restored here.
    quarantined: HashMap<String, (Pool, UnixMillis)>,
    /// The quarantines the database held after our last sync.
    stored: HashSet<String>,
}

#[derive(Default)]
pub struct NumberHealth {
    /// Shared with the replies of writes in flight ([`Unsaved`]).
    state: Arc<Mutex<State>>,
    /// INVITEs to one of our numbers while it was not leased.
    pub stray_calls: AtomicU64,
}

impl NumberHealth {
    /// The state stored before a restart: the numbers with a run of
    /// uncalled leases or a quarantine (the counts stay in the database).
    pub fn restored(runs: Vec<NumberRun>, quarantines: Vec<Quarantine>) -> NumberHealth {
        let engine = Engine::restored(
            runs.into_iter()
                .map(|r| (r.number, r.uncalled_in_a_row, r.quarantined)),
        );
        let mut s = State {
            engine,
            ..State::default()
        };
        for q in quarantines {
            s.stored.insert(q.number.clone());
            s.quarantined.insert(q.number, (q.pool, q.since));
        }
        NumberHealth {
            state: Arc::new(Mutex::new(s)),
            stray_calls: AtomicU64::new(0),
        }
    }

    pub fn on_lease(&self, number: &str, pool: Pool, now: UnixMillis) {
        self.state.lock().engine.on_lease(number, pool, now);
    }

    pub fn on_invite(&self, number: &str, leased: bool) {
        if !leased {
            self.stray_calls.fetch_add(1, Ordering::Relaxed);
        }
        self.state.lock().engine.on_invite(number, leased);
    }

    /// A lease ended; a quarantine it decides is logged at WARN here and
    /// withheld at the control loop's next tick.
    pub fn on_end(&self, number: &str, pool: Pool, ending: Ending, now: UnixMillis) {
        let mut s = self.state.lock();
        if let Some(q) = s.engine.on_end(number, pool, ending, now) {
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
    /// What a failed write held is written at the next tick.
    pub fn sync(&self, store: &Store) {
        let in_db = match store.read_within(SYNC_WAIT, |r| r.number_quarantines()) {
            Outcome::Done(rows) => rows,
            other => {
                tracing::warn!(error = %other, "reading number quarantines failed");
                return;
            }
        };
        let in_db: HashSet<String> = in_db.into_iter().map(|q| q.number).collect();
        let (changes, new) = self.take_changes(&in_db);
        if !changes.is_empty() || !new.is_empty() {
            self.save(store, changes, new);
        }
    }

    /// Ends the quarantines released in the database (`in_db` is what it
    /// holds now) and takes what changed since the last write: each
    /// changed number with its counts, and the quarantines not stored.
    fn take_changes(
        &self,
        in_db: &HashSet<String>,
    ) -> (Vec<(PackedNumber, Change)>, Vec<Quarantine>) {
        let mut s = self.state.lock();
        let released: Vec<String> = s.stored.difference(in_db).cloned().collect();
        for number in &released {
            s.engine.release(number);
            s.quarantined.remove(number);
            s.stored.remove(number);
            tracing::info!(dial_number = %number, "number released from quarantine");
        }
        let changes = s.engine.take_changes();
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
        (changes, new)
    }

    /// Writes `changes` [`SAVE_CHUNK_ROWS`] at a time, `new` quarantines
    /// with the first write, each write answered before the next is
    /// submitted, so that calls' commits go in between. Not under the
    /// lock: the commit consumer takes it for every lease. When a write
    /// is not answered as committed, the changes not yet submitted go
    /// back to the engine here, and the write's own through its
    /// [`Unsaved`].
    fn save(&self, store: &Store, changes: Vec<(PackedNumber, Change)>, new: Vec<Quarantine>) {
        let mut changes = changes.into_iter();
        let mut quarantines = new;
        loop {
            let chunk: Vec<(PackedNumber, Change)> =
                changes.by_ref().take(SAVE_CHUNK_ROWS).collect();
            if chunk.is_empty() && quarantines.is_empty() {
                return;
            }
            let unsaved = Unsaved {
                state: self.state.clone(),
                changes: chunk,
                quarantines: std::mem::take(&mut quarantines),
            };
            if let Err(why) = unsaved.write(store) {
                tracing::warn!(error = %why, "saving number health did not finish; what it did not store is written at the next tick");
                self.state.lock().engine.put_back(changes.collect());
                return;
            }
        }
    }
}

/// One write's changes and quarantines until the writer answers. Dropped
/// without [`Unsaved::committed`] (an error, a refused op, a reply never
/// called), it gives the changes back to the engine. This rests on the
/// writer answering an error only for a write it did not commit; the
/// `writer.after_commit=error` fault drill, which reports an error after
/// COMMIT, would count that write's changes twice. It takes the lock
/// when dropped or committed, so neither may happen on a thread that
/// holds it: it lives in the write's reply, which the storage side calls
/// or drops without it.
struct Unsaved {
    state: Arc<Mutex<State>>,
    changes: Vec<(PackedNumber, Change)>,
    quarantines: Vec<Quarantine>,
}

impl Unsaved {
    /// Submits the write and waits up to [`SYNC_WAIT`] for its answer;
    /// why it was not answered as committed otherwise.
    fn write(self, store: &Store) -> Result<(), String> {
        let changes = self
            .changes
            .iter()
            .map(|(n, c)| stored_change(*n, c))
            .collect();
        let quarantines = self.quarantines.clone();
        let (answer, wait) = reply_slot::slot();
        let reply = Box::new(move |result: Result<(), StorageError>| {
            match &result {
                Ok(()) => self.committed(),
                // Given back as `self` drops here.
                Err(_) => drop(self),
            }
            // The control loop may have stopped waiting; nothing to do then.
            let _ = answer.send(result);
        });
        store
            .submit(WriteOp::SaveNumberHealth {
                changes,
                quarantines,
                reply,
            })
            .map_err(|e| e.to_string())?;
        match wait.wait(SYNC_WAIT) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(Ended::TimedOut) => {
                Err("no answer in time (the write may still commit)".to_owned())
            }
            Err(Ended::Dropped) => Err("the write was dropped unanswered".to_owned()),
        }
    }

    /// The write committed: its quarantines are stored, its changes are.
    fn committed(mut self) {
        self.changes.clear();
        let stored = std::mem::take(&mut self.quarantines);
        self.state
            .lock()
            .stored
            .extend(stored.into_iter().map(|q| q.number));
    }
}

impl Drop for Unsaved {
    fn drop(&mut self) {
        if !self.changes.is_empty() {
            let changes = std::mem::take(&mut self.changes);
            self.state.lock().engine.put_back(changes);
        }
    }
}

/// A change as the storage writer adds it to the number's row.
fn stored_change(packed: PackedNumber, c: &Change) -> NumberHealthChange {
    NumberHealthChange {
        number: packed.to_string(),
        leases: c.leases,
        completed: c.completed,
        expired_uncalled: c.expired_uncalled,
        stray_calls: c.stray_calls,
        last_completion_at: c.last_completion,
        uncalled_in_a_row: c.uncalled_in_a_row,
    }
}

fn log_quarantine(q: &Quarantined) {
    tracing::warn!(dial_number = %q.number, pool = q.pool.as_str(),
        uncalled_in_a_row = q.uncalled_in_a_row, k = q.threshold.k.unwrap_or(0),
        pool_completion_share = q.threshold.p, pool_leases_per_day = q.threshold.leases_per_day,
        "number quarantined: its last leases all expired without a single INVITE; \
         withheld from leasing until `dialproof number release`");
}

#[cfg(test)]
mod tests {
    use super::*;
    use dialproof_storage::{Admin, FailPoints, NumberHealthRow, Options};

    const NUMBER: &str = "+74950000001";
    const T0: UnixMillis = UnixMillis(1_800_000_000_000);

    fn store(dir: &std::path::Path, failpoints: &str) -> Store {
        let opts = Options {
            failpoints: FailPoints::from_spec(failpoints).expect("a spec"),
            ..Options::default()
        };
        Store::open(&dir.join("dialproof.db"), opts).expect("store")
    }

    fn stored(dir: &std::path::Path) -> NumberHealthRow {
        let admin = Admin::open(&dir.join("dialproof.db")).expect("admin");
        let rows = admin.number_health().expect("rows");
        rows.into_iter()
            .find(|r| r.number == NUMBER)
            .expect("the number's row")
    }

    /// One lease of NUMBER that expired uncalled.
    fn uncalled_lease(health: &NumberHealth, at: UnixMillis) {
        health.on_lease(NUMBER, Pool::Domestic, at);
        health.on_end(NUMBER, Pool::Domestic, Ending::Expired, at);
    }

    /// A write the writer rolled back gives its counts back; the next
    /// tick stores them, once.
    #[test]
    fn a_failed_write_gives_its_counts_back_and_the_next_stores_them_once() {
        let dir = tempfile::tempdir().expect("dir");
        let store = store(dir.path(), "writer.before_commit=1*error");
        let health = NumberHealth::default();
        uncalled_lease(&health, T0);
        health.sync(&store);
        let admin = Admin::open(&dir.path().join("dialproof.db")).expect("admin");
        assert!(
            admin.number_health().expect("rows").is_empty(),
            "rolled back"
        );
        health.sync(&store);
        let row = stored(dir.path());
        assert_eq!(
            (row.leases, row.expired_uncalled, row.uncalled_in_a_row),
            (1, 1, 1)
        );
        health.sync(&store);
        assert_eq!(stored(dir.path()).leases, 1, "stored once");
        store.shutdown();
    }

    /// After a restart the counts go on from the stored ones, and the run
    /// from the stored run.
    #[test]
    fn counts_after_a_restart_add_to_the_stored_ones() {
        let dir = tempfile::tempdir().expect("dir");
        let store = store(dir.path(), "");
        let health = NumberHealth::default();
        uncalled_lease(&health, T0);
        health.on_lease(NUMBER, Pool::Domestic, T0);
        health.on_invite(NUMBER, true);
        health.on_end(NUMBER, Pool::Domestic, Ending::Completed, T0);
        uncalled_lease(&health, T0);
        health.sync(&store);
        let runs = store
            .read_within(SYNC_WAIT, |r| r.number_runs())
            .into_result()
            .expect("runs");
        assert_eq!(runs.len(), 1, "{runs:?}");
        let restarted = NumberHealth::restored(runs, Vec::new());
        let later = UnixMillis(T0.0 + 1_000);
        uncalled_lease(&restarted, later);
        restarted.sync(&store);
        let row = stored(dir.path());
        assert_eq!((row.leases, row.completed, row.expired_uncalled), (4, 1, 3));
        assert_eq!(row.uncalled_in_a_row, 2, "the stored run went on");
        assert_eq!(row.last_completion_at, Some(T0), "an expiry keeps it");
        let completed_at = UnixMillis(T0.0 + 2_000);
        restarted.on_lease(NUMBER, Pool::Domestic, completed_at);
        restarted.on_end(NUMBER, Pool::Domestic, Ending::Completed, completed_at);
        restarted.sync(&store);
        let row = stored(dir.path());
        assert_eq!(
            (row.leases, row.completed, row.uncalled_in_a_row),
            (5, 2, 0)
        );
        assert_eq!(row.last_completion_at, Some(completed_at), "the later one");
        store.shutdown();
    }
}
