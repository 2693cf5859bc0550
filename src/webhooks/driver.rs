//! The webhook driver thread: knows what is committed and due, and hands it
//! to the senders.
//!
//! Inputs, in order of speed:
//! - a wake with a delivery id from `App::after_transition`, called on the
//!   storage writer right after the COMMIT that wrote the outbox row: the
//!   first attempt leaves within milliseconds of the event;
//! - its own timers for retries it scheduled (from the senders' recorded
//!   attempts), so a 5 s retry happens at 5 s, not at the next poll;
//! - a poll of the database every [`POLL_INTERVAL`]: the safety net that
//!   seeds the schedule at start (deliveries due during downtime resume),
//!   picks up the operator's manual retries (another process), and anything
//!   a full queue made the driver drop.
//!
//! The database is the schedule's truth: a timer or a wake only makes the
//! driver read the row and send it if it is still pending and due. A
//! delivery is in flight from dispatch until its attempt is committed, and
//! is never dispatched twice meanwhile. At most
//! [`PER_RECEIVER_IN_FLIGHT_MAX`] attempts go to one receiver at once, so a
//! slow receiver with a backlog cannot occupy every sender.
//!
//! Not for: HTTP (the senders), the retry decision (the engine, applied by
//! the senders), or writing (the storage writer records attempts).

use super::sender::Job;
use super::{Internal, SEND_QUEUE_MAX};
use crate::runtime::app::App;
use crossbeam_channel::{select, Receiver, Sender, TrySendError};
use dialproof_engine::time::UnixMillis;
use dialproof_engine::webhook_retry::Next;
use dialproof_storage::{DeliveryRow, DeliveryState, Reader};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the database is asked for due deliveries.
pub const POLL_INTERVAL: Duration = Duration::from_millis(500);
/// The soonest a poll follows another (one is asked for when a receiver's
/// slot frees while deliveries waited for it).
const POLL_GAP_MIN: Duration = Duration::from_millis(50);
/// Most due rows read per poll.
pub const POLL_BATCH_MAX: usize = 2000;
/// Most retries the driver times itself; beyond, the poll finds them.
pub const TIMERS_MAX: usize = 100_000;
/// Wakes handled per loop turn before the other inputs get a look.
const WAKE_BATCH_MAX: usize = 1024;
/// Attempts to one receiver (scheme, host and port) at once.
pub const PER_RECEIVER_IN_FLIGHT_MAX: usize = 8;
/// Attempts dispatched and not yet recorded, in all: queued, being sent, or
/// waiting for the writer. This also bounds the senders' report channel.
pub const IN_FLIGHT_MAX: usize = 4 * SEND_QUEUE_MAX;
/// After an attempt could not be recorded (storage busy or failing), the
/// delivery waits this long before it is sent again, rather than hammering
/// the receiver while the database is unwell.
const RECORD_FAILURE_BACKOFF_MS: i64 = 5000;

pub struct Driver {
    app: Arc<App>,
    reader: Reader,
    jobs: Sender<Job>,
    /// Ids dispatched and not yet recorded.
    in_flight: HashSet<i64>,
    per_receiver: HashMap<String, usize>,
    /// Retry timers: (due, id), and the latest due per id.
    timers: BinaryHeap<Reverse<(UnixMillis, i64)>>,
    waiting: HashMap<i64, UnixMillis>,
    /// Deliveries whose last attempt was not recorded, held until then.
    held: HashMap<i64, UnixMillis>,
    /// Something due was skipped for lack of a slot: poll when one frees.
    skipped_for_capacity: bool,
    next_poll: Instant,
    last_poll: Instant,
}

impl Driver {
    pub fn new(app: Arc<App>, reader: Reader, jobs: Sender<Job>) -> Driver {
        let now = Instant::now();
        Driver {
            app,
            reader,
            jobs,
            in_flight: HashSet::new(),
            per_receiver: HashMap::new(),
            timers: BinaryHeap::new(),
            waiting: HashMap::new(),
            held: HashMap::new(),
            skipped_for_capacity: false,
            // The first poll runs at once: it seeds the schedule.
            next_poll: now,
            last_poll: now.checked_sub(POLL_INTERVAL).unwrap_or(now),
        }
    }

    pub fn run(mut self, wakes: Receiver<i64>, internal: Receiver<Internal>) {
        loop {
            if self.app.stopping() {
                return;
            }
            if Instant::now() >= self.next_poll {
                self.poll();
            }
            self.fire_timers();
            let wait = self.next_wait();
            select! {
                recv(wakes) -> msg => match msg {
                    Ok(id) => {
                        self.wake(id);
                        for id in wakes.try_iter().take(WAKE_BATCH_MAX) {
                            self.wake(id);
                        }
                    }
                    Err(_) => return,
                },
                recv(internal) -> msg => match msg {
                    Ok(m) => self.internal(m),
                    Err(_) => return,
                },
                default(wait) => {}
            }
        }
    }

    /// Until the next poll or timer, at most one poll interval (also the
    /// stop latency).
    fn next_wait(&self) -> Duration {
        let mut wait = self.next_poll.saturating_duration_since(Instant::now());
        if let Some(Reverse((at, _))) = self.timers.peek() {
            let ms = u64::try_from((at.0 - self.app.now().0).max(0)).unwrap_or(0);
            wait = wait.min(Duration::from_millis(ms));
        }
        wait.min(POLL_INTERVAL)
    }

    fn poll(&mut self) {
        let now = self.app.now();
        self.last_poll = Instant::now();
        self.next_poll = self.last_poll + POLL_INTERVAL;
        match self.reader.due_deliveries(now, POLL_BATCH_MAX) {
            Ok(rows) => {
                for row in rows {
                    self.dispatch(row, now);
                }
            }
            Err(e) => tracing::error!(error = %e, "reading due webhook deliveries failed"),
        }
    }

    /// A transition committed with an outbox row: send it now.
    fn wake(&mut self, id: i64) {
        let now = self.app.now();
        match self.reader.delivery(id) {
            Ok(Some(row)) => self.dispatch(row, now),
            Ok(None) => tracing::warn!(delivery_id = id, "woken for an unknown delivery"),
            Err(e) => tracing::error!(delivery_id = id, error = %e, "reading a delivery failed"),
        }
    }

    fn fire_timers(&mut self) {
        let now = self.app.now();
        while let Some(Reverse((at, id))) = self.timers.peek().copied() {
            if at > now {
                break;
            }
            self.timers.pop();
            // A later timer for the same id supersedes this one.
            if self.waiting.get(&id) == Some(&at) {
                self.waiting.remove(&id);
                self.held.remove(&id);
                self.wake(id);
            }
        }
    }

    fn set_timer(&mut self, id: i64, at: UnixMillis) {
        if self.timers.len() >= TIMERS_MAX {
            // The poll finds it when it is due.
            return;
        }
        self.waiting.insert(id, at);
        self.timers.push(Reverse((at, id)));
    }

    /// Sends `row` if it is pending, due, not in flight and its receiver has
    /// a free slot.
    fn dispatch(&mut self, row: DeliveryRow, now: UnixMillis) {
        let due = row.next_attempt_at.is_some_and(|t| t <= now);
        if row.state != DeliveryState::Pending || !due || self.in_flight.contains(&row.id) {
            return;
        }
        if let Some(until) = self.held.get(&row.id) {
            if *until > now {
                return;
            }
            self.held.remove(&row.id);
        }
        let host_key = receiver_key(&row.url);
        let busy = self.per_receiver.get(&host_key).copied().unwrap_or(0);
        if busy >= PER_RECEIVER_IN_FLIGHT_MAX
            || self.jobs.len() >= SEND_QUEUE_MAX
            || self.in_flight.len() >= IN_FLIGHT_MAX
        {
            self.skipped_for_capacity = true;
            return;
        }
        let company = match self.reader.company(row.company_id) {
            Ok(Some(c)) => c,
            Ok(None) => {
                tracing::error!(
                    delivery_id = row.id,
                    company_id = row.company_id,
                    "webhook delivery of an unknown company; not sent"
                );
                return;
            }
            Err(e) => {
                tracing::error!(delivery_id = row.id, error = %e, "reading a company failed");
                return;
            }
        };
        let id = row.id;
        let job = Job {
            attempt_no: row.attempts.saturating_add(1),
            delivery: row,
            company,
            host_key: host_key.clone(),
        };
        match self.jobs.try_send(job) {
            Ok(()) => {
                self.in_flight.insert(id);
                *self.per_receiver.entry(host_key).or_insert(0) += 1;
                self.waiting.remove(&id);
            }
            Err(TrySendError::Full(_)) => self.skipped_for_capacity = true,
            Err(TrySendError::Disconnected(_)) => {
                tracing::error!("webhook senders are gone");
            }
        }
    }

    fn internal(&mut self, msg: Internal) {
        match msg {
            Internal::Recorded {
                delivery_id,
                host_key,
                next,
                result,
            } => {
                self.in_flight.remove(&delivery_id);
                if let Some(n) = self.per_receiver.get_mut(&host_key) {
                    *n = n.saturating_sub(1);
                    if *n == 0 {
                        self.per_receiver.remove(&host_key);
                    }
                }
                match result {
                    Ok(()) => {
                        if let Next::RetryAt(at) = next {
                            self.set_timer(delivery_id, at);
                        }
                    }
                    Err(e) => {
                        // Still pending and due in the database: send it
                        // again after a pause (at least once, never lost).
                        tracing::error!(delivery_id, error = %e,
                            "recording a webhook attempt failed; will send again");
                        let at = self.app.now().plus_millis(RECORD_FAILURE_BACKOFF_MS);
                        self.held.insert(delivery_id, at);
                        self.set_timer(delivery_id, at);
                    }
                }
                if self.skipped_for_capacity {
                    self.skipped_for_capacity = false;
                    self.next_poll = self.next_poll.min(self.last_poll + POLL_GAP_MIN);
                }
            }
        }
    }
}

/// Scheme, host and port of a webhook URL: what "one receiver" means for
/// the per-receiver limit.
fn receiver_key(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(u) => format!(
            "{}://{}:{}",
            u.scheme(),
            u.host_str().unwrap_or(""),
            u.port_or_known_default().unwrap_or(0)
        ),
        Err(_) => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::receiver_key;

    #[test]
    fn receivers_are_scheme_host_and_port() {
        assert_eq!(
            receiver_key("https://A.example/x?y"),
            "https://a.example:443"
        );
        assert_eq!(
            receiver_key("http://127.0.0.1:9000/h"),
            "http://127.0.0.1:9000"
        );
        assert_eq!(receiver_key("not a url"), "not a url");
    }
}
