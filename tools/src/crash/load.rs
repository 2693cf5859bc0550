//! The mixed load of the crash harness: threads that create, read and
//! cancel verifications over HTTPS and have the SIP caller call some dial
//! numbers, recording in the [`Ledger`] what the service acknowledged.
//! They run while the service is up and keep trying (reconnecting) while
//! it is down; an answer lost to a kill is only counted, never assumed.
//! Every create carries an `Idempotency-Key`, and a create whose answer was
//! lost is retried with the same key and body until it gets one, as a
//! client following the README would: so a kill between a create's commit
//! and its 201 is exercised on every run.
//!
//! Not for: the checks (`super::ledger`) or the kills (`super::run`).

use super::client::Client;
use super::ledger::Ledger;
use crate::sip_caller::CallQueue;
use serde_json::json;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A small xorshift generator: the harness needs varied choices, not
/// cryptographic ones, and a seed that reproduces a run's choices.
#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }
}

/// What every load thread shares.
pub struct LoadContext {
    pub ledger: Arc<Ledger>,
    pub calls: CallQueue,
    pub hook_url: String,
    pub ttl_seconds: u32,
    /// Tells this run's keys from another's (a fresh directory per run, but
    /// the keys read well in a log).
    pub key_prefix: String,
    /// Set while the harness checks: the threads pause.
    pub paused: Arc<AtomicBool>,
    /// Threads parked by `paused` (none has a request in flight).
    pub idle: AtomicUsize,
    pub stop: Arc<AtomicBool>,
}

/// Starts `threads` load threads, each with its own connection.
impl LoadContext {
    /// Waits until all `threads` are parked (at most `limit`; a request
    /// in flight ends within the client's timeout).
    pub fn wait_idle(&self, threads: usize, limit: Duration) {
        let deadline = std::time::Instant::now() + limit;
        while self.idle.load(Ordering::Acquire) < threads && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

pub fn start(
    ctx: Arc<LoadContext>,
    threads: usize,
    make_client: impl Fn() -> anyhow::Result<Client>,
    seed: u64,
) -> anyhow::Result<Vec<JoinHandle<()>>> {
    let mut handles = Vec::with_capacity(threads);
    for i in 0..threads {
        let client = make_client()?;
        let ctx = ctx.clone();
        let rng = Rng::new(seed.wrapping_add(i as u64 * 0x9e37_79b9));
        handles.push(
            std::thread::Builder::new()
                .name(format!("crash-load-{i}"))
                .spawn(move || run(&ctx, client, rng))?,
        );
    }
    Ok(handles)
}

/// A create whose answer was lost: retried, with its key and body, before
/// anything else.
struct Unanswered {
    key: String,
    body: serde_json::Value,
}

fn run(ctx: &LoadContext, mut client: Client, mut rng: Rng) {
    let mut unanswered: Option<Unanswered> = None;
    let thread = rng.next_u64() % 1_000_000;
    let mut seq = 0u64;
    while !ctx.stop.load(Ordering::Acquire) {
        if ctx.paused.load(Ordering::Acquire) {
            ctx.idle.fetch_add(1, Ordering::AcqRel);
            while ctx.paused.load(Ordering::Acquire) && !ctx.stop.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(2));
            }
            ctx.idle.fetch_sub(1, Ordering::AcqRel);
            continue;
        }
        let ok = match (unanswered.take(), rng.range(0, 9)) {
            (Some(retry), _) => create(ctx, &mut client, (retry, &mut rng), &mut unanswered),
            (None, 0..=3) => {
                seq += 1;
                let key = format!("{}-{thread}-{seq}", ctx.key_prefix);
                let fresh = new_create(ctx, &mut rng, key);
                create(ctx, &mut client, (fresh, &mut rng), &mut unanswered)
            }
            (None, 4..=7) => read(ctx, &mut client, &mut rng),
            (None, _) => cancel(ctx, &mut client, &mut rng),
        };
        if !ok {
            // Down (killed, restarting): do not spin.
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

fn new_create(ctx: &LoadContext, rng: &mut Rng, key: String) -> Unanswered {
    let phone = format!("+7912{:07}", rng.range(0, 9_999_999));
    let body = json!({
        "phone": phone,
        "webhook_url": ctx.hook_url,
        "ttl_seconds": ctx.ttl_seconds,
        "client_ref": format!("crash-{}", rng.next_u64() % 1_000_000),
    });
    Unanswered { key, body }
}

/// Sends a keyed create; with no answer it goes back into `unanswered`
/// for the next turn. A 409 `conflict` (the first attempt still in
/// flight) is retried as well.
fn create(
    ctx: &LoadContext,
    client: &mut Client,
    (c, rng): (Unanswered, &mut Rng),
    unanswered: &mut Option<Unanswered>,
) -> bool {
    match client.create_keyed(&c.body, &c.key) {
        Ok(r) if r.status == 201 => {
            let Some(v) = r.json() else {
                ctx.ledger.violation("a 201 whose body is not JSON".into());
                return true;
            };
            let id = v["verification_id"].as_str().unwrap_or("").to_owned();
            let number = v["dial_number"].as_str().unwrap_or("").to_owned();
            let fresh = !ctx.ledger.knows_key(&c.key);
            ctx.ledger.created_keyed(&c.key, &c.body, v, r.replayed);
            // Half are called; the rest expire or are cancelled.
            if fresh && rng.next_u64().is_multiple_of(2) && !ctx.calls.call(id, number) {
                ctx.ledger.count("calls not queued");
            }
            true
        }
        Ok(r) if r.status == 503 => {
            ctx.ledger.count("rejected (503)");
            true
        }
        Ok(r) if r.status == 409 => {
            ctx.ledger.count("answered 409 (retried)");
            *unanswered = Some(c);
            true
        }
        Ok(r) => {
            ctx.ledger.count(status_name(r.status));
            true
        }
        Err(_) => {
            ctx.ledger.count("creates without an answer (retried)");
            *unanswered = Some(c);
            false
        }
    }
}

fn read(ctx: &LoadContext, client: &mut Client, rng: &mut Rng) -> bool {
    let ids = ctx.ledger.ids();
    if ids.is_empty() {
        return true;
    }
    let id = &ids[rng.range(0, ids.len() as u64 - 1) as usize];
    let sent = Instant::now();
    match client.read(id) {
        Ok(r) if r.status == 200 => {
            ctx.ledger.count("reads (200)");
            match r.json() {
                Some(v) => ctx.ledger.observe(&v, sent),
                None => ctx
                    .ledger
                    .violation(format!("{id}: a 200 read that is not JSON")),
            }
            true
        }
        Ok(r) if r.status == 404 => {
            ctx.ledger
                .violation(format!("{id}: answered 201, then read 404"));
            true
        }
        Ok(r) => {
            ctx.ledger.count(status_name(r.status));
            true
        }
        Err(_) => false,
    }
}

fn cancel(ctx: &LoadContext, client: &mut Client, rng: &mut Rng) -> bool {
    let open = ctx.ledger.open_ids();
    if open.is_empty() {
        return true;
    }
    let id = &open[rng.range(0, open.len() as u64 - 1) as usize];
    ctx.ledger.cancelling(id);
    let sent = Instant::now();
    match client.cancel(id) {
        Ok(r) if r.status == 200 => {
            ctx.ledger.count("cancels (200)");
            if let Some(v) = r.json() {
                ctx.ledger.observe(&v, sent);
            }
            true
        }
        Ok(r) => {
            ctx.ledger.count(status_name(r.status));
            true
        }
        Err(_) => false,
    }
}

/// A counter name for an answer the harness does not check further.
fn status_name(status: u16) -> &'static str {
    match status {
        400 => "answered 400",
        409 => "answered 409",
        429 => "answered 429",
        500 => "answered 500",
        _ => "answered other",
    }
}
