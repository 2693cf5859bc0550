//! Every bound of the webhook scheduler, named, with the production values.
//!
//! Not for: the limits of the HTTP exchange itself (the sender's timeouts,
//! `crate::webhook_retry::RESPONSE_TIMEOUT_MS`) or of the job queue (the
//! binary sizes its channels and passes its own
//! [`Limits::in_flight_max`]).

/// Attempts to one receiver (scheme, host and port) at once.
pub const PER_RECEIVER_IN_FLIGHT_MAX: usize = 8;
/// Attempts dispatched and not yet recorded, in all, unless the binary sets
/// its own (it ties this to its queue sizes).
pub const IN_FLIGHT_MAX: usize = 4096;
/// Most retry timers kept; beyond, the poll finds the delivery when due.
pub const TIMERS_MAX: usize = 100_000;
/// Most due rows waiting for a slot of one receiver. More than the
/// receiver's slots, so freed slots refill at once; few enough that one
/// slow receiver's backlog cannot fill [`WAITING_MAX`] alone. Under a
/// backlog the line is refilled by the early poll, at most once every
/// [`POLL_GAP_MIN_MS`], so this over that gap caps one receiver's rate
/// while it has one: 64 held a fast receiver to 1,280 webhooks a second
/// (a loopback receiver took a 20,000-call burst's webhooks in 16 s; with
/// 512 in 2 s).
pub const WAITING_PER_RECEIVER_MAX: usize = 512;
/// Most due rows waiting for a slot, in all.
pub const WAITING_MAX: usize = 8192;
/// Most row reads asked for and not yet answered (wakes and fired timers).
pub const FETCHES_MAX: usize = 65_536;
/// How often the database is read for due deliveries.
pub const POLL_INTERVAL_MS: i64 = 500;
/// The soonest a poll follows another: one is brought forward when a slot
/// frees while due rows were left to the poll for lack of room.
pub const POLL_GAP_MIN_MS: i64 = 50;
/// After an attempt could not be recorded (storage busy or failing), the
/// delivery waits this long before it is sent again, rather than hammering
/// the receiver while the database is unwell.
pub const RECORD_FAILURE_BACKOFF_MS: i64 = 5000;

/// Every bound of a [`super::Scheduler`]; [`Limits::default`] has the constants
/// above. Tests shrink them to reach the edges quickly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub per_receiver_in_flight_max: usize,
    pub in_flight_max: usize,
    pub timers_max: usize,
    pub waiting_per_receiver_max: usize,
    pub waiting_max: usize,
    pub fetches_max: usize,
    pub poll_interval_ms: i64,
    pub poll_gap_min_ms: i64,
    pub record_failure_backoff_ms: i64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            per_receiver_in_flight_max: PER_RECEIVER_IN_FLIGHT_MAX,
            in_flight_max: IN_FLIGHT_MAX,
            timers_max: TIMERS_MAX,
            waiting_per_receiver_max: WAITING_PER_RECEIVER_MAX,
            waiting_max: WAITING_MAX,
            fetches_max: FETCHES_MAX,
            poll_interval_ms: POLL_INTERVAL_MS,
            poll_gap_min_ms: POLL_GAP_MIN_MS,
            record_failure_backoff_ms: RECORD_FAILURE_BACKOFF_MS,
        }
    }
}
