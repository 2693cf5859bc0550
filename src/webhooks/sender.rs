//! The sender threads: one webhook attempt each, over ureq.
//!
//! A sender takes a [`Job`] (a committed, due delivery with its company as
//! it is now), checks the URL (https unless it is one of the company's
//! development URLs), signs the stored payload bytes with the company's
//! secret(s), POSTs them through a ureq agent whose resolver vets every
//! address (see `vetting`), classifies the answer with the engine's rule,
//! asks the engine's schedule what follows, and records the attempt and the
//! delivery's new state in one write. The driver hears back only after that
//! write committed, so nothing it schedules is ahead of the database.
//!
//! Each attempt blocks its thread for at most the 10 s response timeout; a
//! pool of such threads means one slow receiver holds one thread, not the
//! others' deliveries.
//!
//! Not for: choosing what to send or when (the engine's scheduler, run by
//! the driver), deciding outcomes (the engine), or following redirects
//! (never: a 3xx is a failed attempt).

use super::targets::Targets;
use super::vetting::VettingResolver;
use super::Internal;
use super::Webhooks;
use crate::shared::metrics::Metrics;
use crate::shared::resolve::Resolver;
use crossbeam_channel::Sender;
use dialproof_engine::dev_urls::Policy;
use dialproof_engine::ssrf;
use dialproof_engine::time::UnixMillis;
use dialproof_engine::webhook::signature_header;
use dialproof_engine::webhook_retry::{
    classify, AttemptOutcome, Next, Schedule, Verdict, RESPONSE_TIMEOUT_MS,
};
use dialproof_engine::webhook_schedule::PER_RECEIVER_IN_FLIGHT_MAX;
use dialproof_storage::handoff;
use dialproof_storage::{
    CompanyRow, DeliveryRow, DeliveryState, NewAttempt, WriteOp, RESPONSE_BODY_LOG_BYTES_MAX,
};
use std::io::Read;
use std::sync::Arc;
use std::time::{Duration, Instant};
use ureq::Agent;

/// The `User-Agent` of every webhook (spec: `<Service>/1.0`).
pub const USER_AGENT: &str = "Dialproof/1.0";
/// The signature header's name.
pub const SIGNATURE_HEADER: &str = "X-Service-Signature";
/// Idle keep-alive connections kept, in all and per receiver: a busy
/// receiver gets its next webhook without a new TLS handshake. Per
/// receiver as many as the scheduler lets run to it at once, or a busy
/// receiver's connections beyond the kept ones were closed after each
/// attempt and opened again for the next (a connect, and for https a
/// handshake, per webhook: about a tenth of the senders' CPU on loopback).
const IDLE_CONNECTIONS_MAX: usize = 128;
const IDLE_CONNECTIONS_PER_HOST_MAX: usize = PER_RECEIVER_IN_FLIGHT_MAX;
/// A stalled TCP connect gives up before the whole budget is gone, so the
/// error says "connect" rather than a generic timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// One attempt to make.
#[derive(Debug)]
pub struct Job {
    pub delivery: DeliveryRow,
    /// As read for the driver's turn; shared by that turn's jobs.
    pub company: std::sync::Arc<CompanyRow>,
    /// 1-based.
    pub attempt_no: u32,
}

/// The two agents every sender shares: ureq agents are thread-safe and
/// share their connection pool.
#[derive(Clone)]
pub struct Agents {
    strict: Agent,
    development: Agent,
}

impl Agents {
    /// Agents whose lookups go through the service's `resolver`.
    pub fn new(resolver: &Resolver) -> Agents {
        Agents {
            strict: agent(VettingResolver::strict(resolver.clone())),
            development: agent(VettingResolver::development(resolver.clone())),
        }
    }
}

fn agent(resolver: VettingResolver) -> Agent {
    let config = Agent::config_builder()
        // Every status is an answer to record, not an error.
        .http_status_as_error(false)
        // Never follow a redirect: a 3xx is a failed attempt (spec), and a
        // redirect could point anywhere, past the address check.
        .max_redirects(0)
        // A proxy from the environment would resolve the host itself,
        // behind the address check's back.
        .proxy(None)
        .timeout_global(Some(Duration::from_millis(RESPONSE_TIMEOUT_MS as u64)))
        .timeout_connect(Some(CONNECT_TIMEOUT))
        .user_agent(USER_AGENT)
        // The body is logged as text: ask for it uncompressed.
        .accept_encoding("")
        .max_idle_connections(IDLE_CONNECTIONS_MAX)
        .max_idle_connections_per_host(IDLE_CONNECTIONS_PER_HOST_MAX)
        .build();
    Agent::with_parts(
        config,
        ureq::unversioned::transport::DefaultConnector::new(),
        resolver,
    )
}

/// What one HTTP exchange gave.
struct Exchange {
    status: Option<u16>,
    error: Option<String>,
    response_body: String,
    /// Until the status line and headers arrived (or the failure).
    elapsed_ms: i64,
}

pub fn run(
    ctx: Arc<Webhooks>,
    agents: Agents,
    schedule: Schedule,
    jobs: handoff::Receiver<Job>,
    done: Sender<Internal>,
) {
    let mut targets = Targets::default();
    while let Some(job) = jobs.recv() {
        if ctx.stopping() {
            return;
        }
        attempt(&ctx, &agents, &mut targets, &schedule, job, &done);
    }
}

fn attempt(
    ctx: &Webhooks,
    agents: &Agents,
    targets: &mut Targets,
    schedule: &Schedule,
    job: Job,
    done: &Sender<Internal>,
) {
    let started_at = ctx.now();
    let exchange = exchange(agents, targets, &job, started_at);
    let finished_at = ctx.now();
    let outcome = match exchange.status {
        Some(status) => AttemptOutcome::Response {
            status,
            elapsed_ms: exchange.elapsed_ms,
        },
        None => AttemptOutcome::Error,
    };
    let verdict = classify(&outcome);
    let next = schedule.after_attempt(job.attempt_no, verdict, finished_at, rand::random());
    count(ctx, &job, &exchange, verdict, next, started_at, finished_at);
    let (state, next_attempt_at) = match next {
        Next::Delivered => (DeliveryState::Delivered, None),
        Next::RetryAt(at) => (DeliveryState::Pending, Some(at)),
        Next::Dead => (DeliveryState::Dead, None),
    };
    let error = exchange.error.or_else(|| failure_reason(&outcome, verdict));
    tracing::info!(
        delivery_id = job.delivery.id,
        verification_id = %job.delivery.verification_id,
        attempt = job.attempt_no,
        status = exchange.status,
        latency_ms = exchange.elapsed_ms,
        error = error.as_deref().unwrap_or(""),
        state = state.as_str(),
        next_attempt_at = %next_attempt_at.map(|t| t.to_rfc3339()).unwrap_or_default(),
        "webhook attempt"
    );
    let record = NewAttempt {
        delivery_id: job.delivery.id,
        attempt_no: job.attempt_no,
        started_at,
        latency_ms: (finished_at.0 - started_at.0).max(0),
        http_status: exchange.status,
        error,
        // The job ends here: its payload moves into the log, uncopied.
        request_body: job.delivery.payload,
        response_body: exchange.response_body,
        state,
        next_attempt_at,
        finished_at,
    };
    record_attempt(ctx, record, next, done);
}

/// Why an answered attempt is not a delivery (a 3xx or a late 2xx is an
/// answer, but not a delivery); `None` for a delivery or no answer.
fn failure_reason(outcome: &AttemptOutcome, verdict: Verdict) -> Option<String> {
    match (outcome, verdict) {
        (AttemptOutcome::Response { status, elapsed_ms }, Verdict::Failed)
            if (200..300).contains(status) =>
        {
            Some(format!(
                "answered after {elapsed_ms} ms, over the {RESPONSE_TIMEOUT_MS} ms limit"
            ))
        }
        (AttemptOutcome::Response { status, .. }, Verdict::Failed) => Some(format!(
            "HTTP {status} is not a 2xx (redirects are not followed)"
        )),
        _ => None,
    }
}

/// Hands the attempt and the delivery's next state to the writer; the
/// driver hears of it (recorded or not) once the writer answered.
fn record_attempt(ctx: &Webhooks, record: NewAttempt, next: Next, done: &Sender<Internal>) {
    let report = {
        let done = done.clone();
        let delivery_id = record.delivery_id;
        move |result: Result<(), String>| {
            // Unbounded channel: the writer thread never waits here. Its
            // length is bounded by the attempts in flight (IN_FLIGHT_MAX).
            let _ = done.send(Internal::Recorded {
                delivery_id,
                next,
                result,
            });
        }
    };
    let reply_report = report.clone();
    let submitted = ctx.store.submit(WriteOp::RecordAttempt {
        attempt: record,
        reply: Box::new(move |r| reply_report(r.map_err(|e| e.to_string()))),
    });
    if let Err(e) = submitted {
        report(Err(e.to_string()));
    }
}

/// The attempt in the operators' metrics.
fn count(
    ctx: &Webhooks,
    job: &Job,
    exchange: &Exchange,
    verdict: Verdict,
    next: Next,
    started_at: UnixMillis,
    finished_at: UnixMillis,
) {
    let m = &ctx.metrics.webhooks;
    let outcome = match (exchange.status, verdict) {
        (None, _) => 2,
        (Some(_), Verdict::Failed) => 1,
        (Some(_), Verdict::Delivered) => 0,
    };
    m.attempt(outcome, millis(finished_at.0 - started_at.0));
    match next {
        Next::Delivered => m
            .delivery_latency
            .observe(millis(finished_at.0 - job.delivery.created_at.0)),
        Next::Dead if job.delivery.livemode => Metrics::inc(&m.dead),
        Next::Dead => Metrics::inc(&m.test_dead),
        Next::RetryAt(_) => {}
    }
}

fn millis(ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// The secrets that sign now: the current one, and the previous one while
/// its grace period after a rotation lasts.
fn signing_secrets(company: &CompanyRow, now: UnixMillis) -> Vec<&str> {
    let mut secrets = vec![company.webhook_secret.as_str()];
    if let (Some(previous), Some(until)) = (
        company.previous_webhook_secret.as_deref(),
        company.previous_secret_valid_until,
    ) {
        if until > now {
            secrets.push(previous);
        }
    }
    secrets
}

fn refused(error: String) -> Exchange {
    Exchange {
        status: None,
        error: Some(error),
        response_body: String::new(),
        elapsed_ms: 0,
    }
}

fn exchange(agents: &Agents, targets: &mut Targets, job: &Job, now: UnixMillis) -> Exchange {
    let url = job.delivery.url.as_str();
    // Judged at delivery, with the company's list as it is now: removing a
    // development URL stops plain-http and private deliveries at once.
    let policy = Policy::for_url(&job.company.dev_webhook_urls, url);
    // The URL's own checks and its normalised form, once per URL.
    let target = match targets.get(url) {
        Ok(t) => t,
        Err(message) => return refused(message),
    };
    if let Err(message) = policy.check_scheme(target.scheme, url) {
        return refused(message);
    }
    let uri = match target.uri {
        Ok(uri) => uri,
        Err(message) => return refused(message),
    };
    let agent = if policy.checks_addresses() {
        &agents.strict
    } else {
        &agents.development
    };
    let body = job.delivery.payload.as_bytes();
    let signature = signature_header(
        now.unix_seconds(),
        body,
        &signing_secrets(&job.company, now),
    );
    let started = Instant::now();
    let sent = agent
        .post(uri)
        .header("Content-Type", "application/json")
        .header("User-Agent", USER_AGENT)
        .header(SIGNATURE_HEADER, &signature)
        .send(body);
    let elapsed_ms = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
    answered(sent, elapsed_ms)
}

/// What an attempt's HTTP exchange came to, its response body cut to the
/// logged size.
fn answered(
    sent: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    elapsed_ms: i64,
) -> Exchange {
    match sent {
        Ok(mut response) => {
            let status = response.status().as_u16();
            let response_body = body_for_log(response.body_mut().as_reader());
            Exchange {
                status: Some(status),
                error: None,
                response_body,
                elapsed_ms,
            }
        }
        Err(e) => Exchange {
            status: None,
            error: Some(describe(e)),
            response_body: String::new(),
            elapsed_ms,
        },
    }
}

/// The first [`RESPONSE_BODY_LOG_BYTES_MAX`] bytes of a response body, as
/// text for the attempt's log; the rest is left unread (the connection is
/// then not reused, which is fine). A read error ends the text where it
/// came: the status is the answer, the body only a clue.
///
/// Read into the stack and copied out at its length: a receiver's answer
/// is usually a few bytes or none, and a heap buffer of a kilobyte or more
/// per attempt cost a tenth of a sender's CPU under load. glibc's malloc
/// merges all its small free chunks on every request of 1,024 bytes or
/// more that the thread's own cache cannot serve, and it never can here:
/// the text is freed on the storage writer's thread, which stores it.
fn body_for_log(mut body: impl Read) -> String {
    let mut buf = [0u8; RESPONSE_BODY_LOG_BYTES_MAX];
    let mut len = 0;
    while len < buf.len() {
        match body.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    String::from_utf8_lossy(&buf[..len]).into_owned()
}

/// The log's text for a failed exchange.
fn describe(e: ureq::Error) -> String {
    match e {
        ureq::Error::Timeout(which) => {
            format!("timed out ({which}); the limit is {RESPONSE_TIMEOUT_MS} ms")
        }
        // The vetting resolver's refusal, in the spec's words.
        ureq::Error::Other(inner) => inner.to_string(),
        ureq::Error::HostNotFound => ssrf::unresolvable_message("no addresses"),
        ureq::Error::Io(io) => format!("network error: {io}"),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;
    use std::io::{Error, ErrorKind};

    /// A body that arrives in the given pieces, each `Err` once as that
    /// kind of error.
    struct Pieces(VecDeque<Result<Vec<u8>, ErrorKind>>);

    fn pieces(list: Vec<Result<Vec<u8>, ErrorKind>>) -> Pieces {
        Pieces(list.into())
    }

    impl Read for Pieces {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            match self.0.pop_front() {
                None => Ok(0),
                Some(Err(kind)) => Err(Error::from(kind)),
                Some(Ok(mut bytes)) => {
                    let n = bytes.len().min(out.len());
                    out[..n].copy_from_slice(&bytes[..n]);
                    bytes.drain(..n);
                    if !bytes.is_empty() {
                        self.0.push_front(Ok(bytes));
                    }
                    Ok(n)
                }
            }
        }
    }

    #[test]
    fn a_body_is_logged_whole_across_pieces_and_interruptions() {
        let body = pieces(vec![
            Ok(b"ans".to_vec()),
            Err(ErrorKind::Interrupted),
            Ok(b"wer 200".to_vec()),
        ]);
        assert_eq!(body_for_log(body), "answer 200");
        assert_eq!(body_for_log(pieces(vec![])), "");
    }

    #[test]
    fn a_long_body_is_cut_at_the_logged_size() {
        let body = pieces(vec![Ok(vec![b'x'; 3000]), Ok(vec![b'y'; 3000])]);
        let logged = body_for_log(body);
        assert_eq!(logged.len(), RESPONSE_BODY_LOG_BYTES_MAX);
        assert!(
            logged.starts_with('x') && logged.ends_with('y'),
            "{logged:.20}"
        );
    }

    #[test]
    fn a_read_error_ends_the_text_and_bad_bytes_are_replaced() {
        let body = pieces(vec![
            Ok(b"ok \xff".to_vec()),
            Err(ErrorKind::ConnectionReset),
            Ok(b"never read".to_vec()),
        ]);
        assert_eq!(body_for_log(body), "ok \u{fffd}");
    }
}
