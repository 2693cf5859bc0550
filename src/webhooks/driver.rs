//! The webhook driver thread: the IO around the engine's
//! [`Scheduler`](dialproof_engine::webhook_schedule::Scheduler).
//!
//! Each turn reads the clock once, feeds the scheduler what arrived since
//! the last turn (commit wakes from the commit consumer, the senders'
//! recorded attempts), reads from the database what it asks for (the due
//! rows at the poll's cadence, single rows for retry timers and late
//! wakes; a wake brings its committed row along),
//! hands the deliveries it releases to the sender threads, and sleeps until
//! its next timeout or the next message.
//!
//! Every decision (what is due, the per-receiver limit, no second dispatch
//! while in flight, holds after a failed record, when to poll) is the
//! scheduler's; read its module doc for them. What stays here is what
//! needs IO: the rows and the company (read once per turn at dispatch, so
//! secrets and development URLs are as they are now), and the bounded job
//! queue, which is only offered as much as it can take. A delivery the
//! queue cannot take goes back to the scheduler, never away.
//!
//! Not for: HTTP (the senders), the retry decision (the engine, applied by
//! the senders), or writing (the storage writer records attempts).

use super::sender::Job;
use super::waker::Wake;
use super::Webhooks;
use super::{Internal, SEND_QUEUE_MAX};
use crossbeam_channel::{select, Receiver};
use dialproof_engine::time::UnixMillis;
use dialproof_engine::webhook_schedule::{
    Dispatch, Limits, ReceiverKey, Recorded, Row, Scheduler, POLL_INTERVAL_MS,
};
use dialproof_engine::CompanyId;
use dialproof_storage::handoff::{self, Refused};
use dialproof_storage::{CompanyRow, DeliveryRow, DeliveryState, Reader};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Most due rows read per poll.
pub const POLL_BATCH_MAX: usize = 2000;
/// Wakes and reports taken per turn before the turn runs: a burst is
/// handled in batches, with the clock read once for each.
const MESSAGES_PER_TURN_MAX: usize = 1024;
/// Attempts dispatched and not yet recorded, in all: queued, being sent, or
/// waiting for the writer. This also bounds the senders' report channel.
pub const IN_FLIGHT_MAX: usize = 4 * SEND_QUEUE_MAX;
/// How often the driver counts the pending outbox rows for the metrics
/// (the count walks them, so not every turn).
const UNDELIVERED_REFRESH_MS: i64 = 5_000;
/// The longest sleep between turns (also the stop latency).
const TURN_WAIT_MAX: Duration = Duration::from_millis(POLL_INTERVAL_MS as u64);
/// Distinct webhook URLs whose receiver is remembered; past the bound the
/// map starts over (one parse per URL again, never a wrong key).
const RECEIVERS_MAX: usize = 1024;

pub struct Driver {
    ctx: Arc<Webhooks>,
    reader: Reader,
    jobs: handoff::Sender<Job>,
    scheduler: Scheduler<DeliveryRow>,
    /// Messages received since the last turn, handled at its start.
    wakes: Vec<Wake>,
    reports: Vec<Internal>,
    /// When the pending rows were last counted for the metrics.
    undelivered_counted_at: Option<UnixMillis>,
    /// The receiver of each webhook URL seen: every row read (a poll reads
    /// up to [`POLL_BATCH_MAX`]) needs its key, and working it out parses
    /// the URL (with IDNA), while a service has few distinct URLs.
    receivers: HashMap<String, ReceiverKey>,
}

impl Driver {
    pub fn new(ctx: Arc<Webhooks>, reader: Reader, jobs: handoff::Sender<Job>) -> Driver {
        let limits = Limits {
            in_flight_max: IN_FLIGHT_MAX,
            ..Limits::default()
        };
        Driver {
            ctx,
            reader,
            jobs,
            scheduler: Scheduler::new(limits),
            wakes: Vec::new(),
            reports: Vec::new(),
            undelivered_counted_at: None,
            receivers: HashMap::new(),
        }
    }

    pub fn run(mut self, wakes: Receiver<Wake>, internal: Receiver<Internal>) {
        while !self.ctx.stopping() {
            self.turn(self.ctx.now());
            let wait = self.wait();
            select! {
                recv(wakes) -> msg => match msg {
                    Ok(row) => self.wakes.push(row),
                    Err(_) => return,
                },
                recv(internal) -> msg => match msg {
                    Ok(m) => self.reports.push(m),
                    Err(_) => return,
                },
                default(wait) => {}
            }
            // Whatever else is waiting joins this batch, up to a bound.
            self.wakes
                .extend(wakes.try_iter().take(MESSAGES_PER_TURN_MAX));
            self.reports
                .extend(internal.try_iter().take(MESSAGES_PER_TURN_MAX));
        }
    }

    /// One turn at `now`: inputs first, then reads, then dispatches.
    fn turn(&mut self, now: UnixMillis) {
        for report in std::mem::take(&mut self.reports) {
            self.recorded(report, now);
        }
        for row in std::mem::take(&mut self.wakes) {
            let row = self.schedule_row(*row);
            self.scheduler.handle_committed_row(row, now);
        }
        self.scheduler.handle_timeout(now);
        if self.scheduler.wants_poll(now) {
            self.poll(now);
        }
        while let Some(id) = self.scheduler.poll_fetch() {
            self.fetch(id, now);
        }
        self.dispatch();
        self.gauges(now);
    }

    /// The metrics' view of the pipeline: the queue and in-flight counts
    /// every turn, the pending rows every [`UNDELIVERED_REFRESH_MS`].
    fn gauges(&mut self, now: UnixMillis) {
        let m = &self.ctx.metrics.webhooks;
        m.queued.store(self.jobs.len() as u64, Ordering::Relaxed);
        m.in_flight
            .store(self.scheduler.in_flight() as u64, Ordering::Relaxed);
        let due = self
            .undelivered_counted_at
            .is_none_or(|at| now.0 - at.0 >= UNDELIVERED_REFRESH_MS);
        if !due {
            return;
        }
        self.undelivered_counted_at = Some(now);
        match self.reader.undelivered() {
            Ok(u) => {
                m.undelivered.store(u.count, Ordering::Relaxed);
                m.test_undelivered.store(u.test_count, Ordering::Relaxed);
                let oldest = u.oldest_created_at.map_or(0, |t| t.0.max(0) as u64);
                m.oldest_undelivered_at_ms.store(oldest, Ordering::Relaxed);
            }
            Err(e) => tracing::warn!(error = %e, "counting pending webhook deliveries failed"),
        }
    }

    /// Until the scheduler's next timeout, at most [`TURN_WAIT_MAX`]. The
    /// clock is read again here, not taken from the turn: a turn that read
    /// many rows would otherwise oversleep a timer by its own length. The
    /// decisions all used the turn's one reading.
    fn wait(&mut self) -> Duration {
        let ms = (self.scheduler.poll_timeout().0 - self.ctx.now().0).max(0);
        Duration::from_millis(u64::try_from(ms).unwrap_or(0)).min(TURN_WAIT_MAX)
    }

    fn poll(&mut self, now: UnixMillis) {
        // A whole batch at the poll's cadence, a refill when brought forward.
        let read = self.scheduler.poll_read(now, POLL_BATCH_MAX);
        let from = read.from.map(|m| (m.due, m.id));
        let rows = match self.reader.due_deliveries(now, from, read.limit) {
            Ok(rows) => rows,
            Err(e) => {
                // No rows: the next poll, at the usual cadence, tries again.
                tracing::error!(error = %e, "reading due webhook deliveries failed");
                Vec::new()
            }
        };
        let rows: Vec<_> = rows.into_iter().map(|r| self.schedule_row(r)).collect();
        self.scheduler.handle_polled(rows, now);
    }

    /// The scheduler asked for one row (a timer, or a wake it would not
    /// take as committed).
    fn fetch(&mut self, id: i64, now: UnixMillis) {
        match self.reader.delivery(id) {
            Ok(Some(row)) => {
                let row = self.schedule_row(row);
                self.scheduler.handle_rows([row], now);
            }
            Ok(None) => tracing::warn!(delivery_id = id, "woken for an unknown delivery"),
            // The row stays pending in the database: the poll finds it.
            Err(e) => tracing::error!(delivery_id = id, error = %e, "reading a delivery failed"),
        }
    }

    /// Hands out what the scheduler releases, while the job queue has room.
    /// The driver is the queue's only producer, so room seen here is still
    /// there at `try_send`; the `Full` arm is for safety, not expected.
    fn dispatch(&mut self) {
        // Each company read once per turn: every job of the turn gets it as
        // it is at this moment, as fresh as a read per job.
        let mut companies = HashMap::new();
        while self.jobs.len() < SEND_QUEUE_MAX {
            let Some(d) = self.scheduler.poll_dispatch() else {
                return;
            };
            let Dispatch { id, receiver, data } = d;
            let Some(company) = self.company(id, &data, &mut companies) else {
                self.scheduler.handle_abandoned(id);
                continue;
            };
            let job = Job {
                attempt_no: data.attempts.saturating_add(1),
                delivery: data,
                company,
            };
            match self.jobs.try_send(job) {
                Ok(_) => {}
                Err(Refused::Full(job)) => {
                    self.unsent(id, receiver, job);
                    return;
                }
                Err(Refused::Closed(job)) => {
                    // The driver never closes the queue while it runs, so
                    // every sender is gone: they only stop when the service
                    // does. The row stays pending and goes out after the
                    // restart.
                    tracing::error!("webhook senders are gone");
                    self.unsent(id, receiver, job);
                    return;
                }
            }
        }
    }

    fn unsent(&mut self, id: i64, receiver: ReceiverKey, job: Job) {
        self.scheduler.handle_unsent(Dispatch {
            id,
            receiver,
            data: job.delivery,
        });
    }

    /// The company of `row` as it is now (read once per turn, see
    /// `dispatch`); `None` (logged) if it cannot be read. The row then stays
    /// pending, so the poll brings it back.
    fn company(
        &self,
        id: i64,
        row: &DeliveryRow,
        turn: &mut HashMap<CompanyId, Arc<CompanyRow>>,
    ) -> Option<Arc<CompanyRow>> {
        if let Some(company) = turn.get(&row.company_id) {
            return Some(company.clone());
        }
        match self.reader.company(row.company_id) {
            Ok(Some(c)) => {
                let c = Arc::new(c);
                turn.insert(row.company_id, c.clone());
                Some(c)
            }
            Ok(None) => {
                tracing::error!(
                    delivery_id = id,
                    company_id = row.company_id,
                    "webhook delivery of an unknown company; not sent"
                );
                None
            }
            Err(e) => {
                tracing::error!(delivery_id = id, error = %e, "reading a company failed");
                None
            }
        }
    }

    fn recorded(&mut self, msg: Internal, now: UnixMillis) {
        let Internal::Recorded {
            delivery_id,
            next,
            result,
        } = msg;
        let recorded = match result {
            Ok(()) => Recorded::Committed(next),
            Err(e) => {
                tracing::error!(delivery_id, error = %e,
                    "recording a webhook attempt failed; will send again");
                Recorded::NotCommitted
            }
        };
        self.scheduler.handle_recorded(delivery_id, recorded, now);
    }
}

impl Driver {
    /// What the scheduler needs of a row, with the row to hand back.
    fn schedule_row(&mut self, row: DeliveryRow) -> Row<DeliveryRow> {
        Row {
            id: row.id,
            pending: row.state == DeliveryState::Pending,
            next_attempt_at: row.next_attempt_at,
            receiver: self.receiver(&row.url),
            data: row,
        }
    }

    /// `url`'s receiver key, worked out once per URL.
    fn receiver(&mut self, url: &str) -> ReceiverKey {
        if let Some(key) = self.receivers.get(url) {
            return key.clone();
        }
        if self.receivers.len() >= RECEIVERS_MAX {
            self.receivers.clear();
        }
        let key = ReceiverKey::of_url(url);
        self.receivers.insert(url.to_owned(), key.clone());
        key
    }
}
