//! The load generator's command line, and the checks between its options
//! that clap cannot express (one of `--rate`/`--concurrency`, keys when the
//! mix needs them, bounds on every number).
//!
//! Not for: acting on the options (see [`super::run`]).

use super::ops::Mix;
use anyhow::{bail, Result};
use clap::Parser;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Longest run accepted, in seconds.
pub const DURATION_SECONDS_MAX: f64 = 3600.0;
/// Highest open-loop rate accepted, requests per second.
pub const RATE_MAX: f64 = 1_000_000.0;
/// Most connections (or requests in flight) accepted.
pub const CONNECTIONS_MAX: usize = 10_000;
/// Most keys `--setup-local` creates.
pub const SETUP_KEYS_MAX: usize = 1000;
/// Most event-loop threads.
pub const THREADS_MAX: usize = 64;

#[derive(Debug, Clone, Parser)]
#[command(
    name = "dialproof-load",
    version,
    about = "HTTPS load generator for Dialproof's API: a create/read/cancel mix, \
             open-loop at a fixed rate or closed-loop at a concurrency, with optional \
             SIP calls and a signature-checking webhook receiver"
)]
pub struct Args {
    /// The service's HTTPS origin.
    #[arg(long, default_value = "https://127.0.0.1:8443")]
    pub target: String,
    /// Accept any server certificate (the service's is self-signed).
    #[arg(long)]
    pub insecure: bool,
    /// Trust this PEM certificate (e.g. the service's data/tls/cert.pem).
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// Name the certificate is checked against (default: the target's host).
    #[arg(long)]
    pub server_name: Option<String>,
    /// Allow a target, SIP address or webhook listener that is not loopback.
    #[arg(long)]
    pub allow_remote: bool,

    /// Operation weights: create, read, cancel and get (a plain GET of
    /// --path without a key), e.g. `create=1,read=8,cancel=1`.
    #[arg(long, default_value = "create=1,read=8,cancel=1")]
    pub mix: String,
    /// Open loop: requests per second in all, sent on schedule whatever the
    /// answers; latency runs from each request's intended send time.
    #[arg(long, conflicts_with = "concurrency")]
    pub rate: Option<f64>,
    /// Closed loop: this many requests in flight (one per connection), each
    /// sent when the previous one on its connection is answered.
    #[arg(long)]
    pub concurrency: Option<usize>,
    /// Open loop: connections to spread the schedule over.
    #[arg(long, default_value_t = 64)]
    pub connections: usize,
    /// How long to send, in seconds.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Event-loop threads (default: the number of cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// A request without an answer after this many milliseconds is a timeout.
    #[arg(long, default_value_t = 5000)]
    pub timeout_ms: u64,
    /// Path of the `get` operation.
    #[arg(long, default_value = "/")]
    pub path: String,

    /// API tokens, one per line (`#` comments allowed).
    #[arg(long, value_name = "FILE", conflicts_with = "setup_local")]
    pub keys: Option<PathBuf>,
    /// Create a company and this many keys with the operator CLI (a local
    /// service), raise their limits and register the webhook receiver as the
    /// company's development URL.
    #[arg(long, value_name = "N")]
    pub setup_local: Option<usize>,
    /// The `dialproof` binary for --setup-local (default: next to this one,
    /// else on PATH).
    #[arg(long, value_name = "PATH")]
    pub dialproof_bin: Option<PathBuf>,
    /// The service's configuration file, passed to the operator CLI.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Requests per minute set on each key by --setup-local.
    #[arg(long, default_value_t = 100_000)]
    pub key_limit: u32,

    /// `phone` of created verifications (its country picks the pool).
    #[arg(long, default_value = "+79123456789")]
    pub phone: String,
    /// `ttl_seconds` of created verifications.
    #[arg(long, default_value_t = 60)]
    pub ttl: u32,
    /// Send a fresh `Idempotency-Key` with every create (unique per create
    /// and per run), as a client that retries safely does.
    #[arg(long)]
    pub idempotency_keys: bool,
    /// With --idempotency-keys: this share of creates (0..=1) instead
    /// repeats an earlier create of the run with its key and body, byte for
    /// byte; each must be answered with that create's 201, replayed.
    #[arg(long, default_value_t = 0.0, value_name = "SHARE")]
    pub replay_share: f64,
    /// Before the timed run, create this many verifications (spread over
    /// the keys and threads, not counted in the run's figures) whose ids
    /// become the reads' working set: clients poll many verifications,
    /// not one. The pool must hold that many numbers, and --ttl must
    /// outlast the prefill and the run.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub prefill: u64,
    /// Ids each thread remembers per key for reads (the newest win): the
    /// working set reads pick from.
    #[arg(long, default_value_t = crate::load::ops::KNOWN_IDS_DEFAULT, value_name = "IDS")]
    pub working_set: usize,
    /// Reads favour recent ids with this exponent (0: uniform over the
    /// working set; 1: Zipf, the newest polled most).
    #[arg(long, default_value_t = 0.0, value_name = "S")]
    pub zipf: f64,

    /// Place a SIP call to the dial number of every created verification
    /// and time call-to-webhook.
    #[arg(long)]
    pub calls: bool,
    /// With --calls: the share of created verifications that get a call
    /// (the others stay pending for cancels, or expire).
    #[arg(long, default_value_t = 1.0)]
    pub call_share: f64,
    /// The service's SIP address (UDP).
    #[arg(long, default_value = "127.0.0.1:5060")]
    pub sip: String,
    /// Calling number (From) of the calls.
    #[arg(long, default_value = "+79161234567")]
    pub caller: String,
    /// Address of the embedded webhook receiver (with --keys, register
    /// `http://ADDR` as the company's development URL first).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub webhook_listen: SocketAddr,
    /// Webhook secret(s) to verify signatures with (--setup-local knows its
    /// own); also read from DIALPROOF_WEBHOOK_SECRET.
    #[arg(long = "webhook-secret", value_name = "WHSEC")]
    pub webhook_secrets: Vec<String>,
    /// After sending stops, how long to wait for the webhooks of calls.
    #[arg(long, default_value_t = 5.0)]
    pub drain_seconds: f64,

    /// Also write the report as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// The server's process id (Linux): its CPU time during the timed run
    /// is reported, in all and per answer, a figure that other load on
    /// the machine disturbs far less than a rate.
    #[arg(long, value_name = "PID")]
    pub server_pid: Option<u32>,
    /// No progress line.
    #[arg(long)]
    pub quiet: bool,
}

/// Open or closed loop, with its one number.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    Open { rate: f64, connections: usize },
    Closed { concurrency: usize },
}

impl Mode {
    pub fn connections(self) -> usize {
        match self {
            Mode::Open { connections, .. } => connections,
            Mode::Closed { concurrency } => concurrency,
        }
    }
}

impl Args {
    /// The checked mode and mix.
    /// `--prefill`, `--working-set` and `--zipf` within their bounds.
    fn validate_working_set(&self, mix: &Mix) -> Result<()> {
        use crate::load::ops::{WORKING_SET_MAX, ZIPF_MAX};
        if !(1..=WORKING_SET_MAX).contains(&self.working_set) {
            bail!("--working-set must be 1..={WORKING_SET_MAX} ids");
        }
        if !(0.0..=ZIPF_MAX).contains(&self.zipf) {
            bail!("--zipf must be 0..={ZIPF_MAX}, got {}", self.zipf);
        }
        if self.prefill > WORKING_SET_MAX as u64 {
            bail!("--prefill must be at most {WORKING_SET_MAX}");
        }
        if self.prefill > 0 && !mix.needs_keys() {
            bail!("--prefill creates verifications: the mix must use the API");
        }
        Ok(())
    }

    pub fn validate(&self) -> Result<(Mode, Mix)> {
        let mix = Mix::parse(&self.mix)?;
        let mode = match (self.rate, self.concurrency) {
            (Some(rate), None) => {
                if !(rate > 0.0 && rate <= RATE_MAX) {
                    bail!("--rate must be in (0, {RATE_MAX}]");
                }
                Mode::Open {
                    rate,
                    connections: self.connections,
                }
            }
            (None, Some(concurrency)) => Mode::Closed { concurrency },
            _ => bail!("give exactly one of --rate (open loop) or --concurrency (closed loop)"),
        };
        if !(1..=CONNECTIONS_MAX).contains(&mode.connections()) {
            bail!("connections/concurrency must be 1..={CONNECTIONS_MAX}");
        }
        if !(self.duration > 0.0 && self.duration <= DURATION_SECONDS_MAX) {
            bail!("--duration must be in (0, {DURATION_SECONDS_MAX}] seconds");
        }
        if !(0.0..=600.0).contains(&self.drain_seconds) {
            bail!("--drain-seconds must be 0..=600");
        }
        if !(1..=600_000).contains(&self.timeout_ms) {
            bail!("--timeout-ms must be 1..=600000");
        }
        if self
            .threads
            .is_some_and(|t| !(1..=THREADS_MAX).contains(&t))
        {
            bail!("--threads must be 1..={THREADS_MAX}");
        }
        if self.insecure == self.cacert.is_some() {
            bail!("give one of --cacert FILE (e.g. the service's data/tls/cert.pem) or --insecure");
        }
        if self
            .setup_local
            .is_some_and(|n| !(1..=SETUP_KEYS_MAX).contains(&n))
        {
            bail!("--setup-local must be 1..={SETUP_KEYS_MAX} keys");
        }
        if mix.needs_keys() && self.keys.is_none() && self.setup_local.is_none() {
            bail!("the mix uses the API: give --keys FILE or --setup-local N");
        }
        if !(0.0..=1.0).contains(&self.call_share) {
            bail!("--call-share must be 0..=1");
        }
        if !(0.0..=1.0).contains(&self.replay_share) {
            bail!("--replay-share must be 0..=1, got {}", self.replay_share);
        }
        self.validate_working_set(&mix)?;
        if self.replay_share > 0.0 && !self.idempotency_keys {
            bail!("--replay-share needs --idempotency-keys (a replay repeats a keyed create)");
        }
        if self.calls && !mix.has_create() {
            bail!("--calls needs creates in the mix");
        }
        if !self.path.starts_with('/') || self.path.bytes().any(|b| b <= b' ' || b == 0x7f) {
            bail!("--path must start with / and have no spaces or control characters");
        }
        Ok((mode, mix))
    }

    /// Event-loop threads: `--threads`, else one per core, never more than
    /// connections.
    pub fn thread_count(&self, connections: usize) -> usize {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        self.threads.unwrap_or(cores).clamp(1, connections.max(1))
    }
}
