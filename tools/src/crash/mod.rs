//! The crash harness behind `dialproof-crash-loop`: the real service under
//! mixed load (creates, reads, cancels over HTTPS; SIP calls from
//! [`crate::sip_caller`]; webhooks to the bundled [`dialproof_kit::webhook`]
//! registered as a development URL), SIGKILLed at random moments and
//! restarted, with the invariants of [`ledger`] checked after every restart
//! and at the end, and every acknowledged 503 rejection looked up in the
//! database while the service is down.
//!
//! Everything is on loopback and bounded in time (`--max-seconds`).
//!
//! Not for: measuring speed (`crate::load`).

pub mod client;
pub mod ledger;
pub mod load;
pub mod service;

use anyhow::{Context, Result};
use client::Client;
use ledger::Ledger;
use load::{LoadContext, Rng};
use serde_json::Value;
use service::Service;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The harness's settings (the command line of `dialproof-crash-loop`).
#[derive(Debug, Clone)]
pub struct Settings {
    /// The service binary.
    pub bin: PathBuf,
    /// Where the service's data, config and log go (kept afterwards).
    pub dir: PathBuf,
    pub kills: u32,
    pub seed: u64,
    /// Numbers on the service's one line (few, so 503s and reuse happen).
    pub numbers: u32,
    /// How long the service runs under load before each kill, at random
    /// within this range.
    pub up_ms: (u64, u64),
    pub load_threads: usize,
    /// The whole run stops after this, kills done or not.
    pub max_duration: Duration,
}

/// What a run came to.
#[derive(Debug)]
pub struct Outcome {
    pub kills: u32,
    pub violations: Vec<String>,
    pub report: String,
}

/// The verification TTL the load asks for (the service's minimum), so
/// expiries happen within a short run.
const TTL_SECONDS: u32 = 30;
/// How long the end waits for pending verifications to expire and for
/// their webhooks (TTL, the expiry's rounding, a retry or two).
const FINAL_WAIT: Duration = Duration::from_secs(TTL_SECONDS as u64 + 15);
/// What the final read of every verification may take on top.
const CHECKS_SLACK: Duration = Duration::from_secs(60);

pub fn run(settings: &Settings) -> Result<Outcome> {
    let started = Instant::now();
    let mut rng = Rng::new(settings.seed);
    let mut svc = Service::prepare(&settings.bin, &settings.dir, settings.numbers)?;
    svc.start()?;
    let ledger = Arc::new(Ledger::default());
    let (receiver, token, company) = setup(&svc, &ledger)?;
    let caller = crate::sip_caller::SipCaller::start(
        crate::sip_caller::CallerSettings {
            target: svc.sip,
            caller: "+79161234567".into(),
            bind: "127.0.0.1:0".parse()?,
        },
        |_, _| {},
    )?;
    let (https, cert) = (svc.https, svc.cert());
    let make_client = || Client::new(https, &cert, &token);
    let ctx = Arc::new(LoadContext {
        ledger: ledger.clone(),
        calls: caller.handle(),
        hook_url: receiver.hook_url(),
        ttl_seconds: TTL_SECONDS,
        key_prefix: format!("crash-{:x}", settings.seed),
        paused: Arc::new(AtomicBool::new(false)),
        idle: AtomicUsize::new(0),
        stop: Arc::new(AtomicBool::new(false)),
    });
    let threads = load::start(
        ctx.clone(),
        settings.load_threads,
        make_client,
        rng.next_u64(),
    )?;
    let checker = Checker {
        client: make_client()?,
        // Every check ends by then, whatever the service does.
        until: started + settings.max_duration + FINAL_WAIT + CHECKS_SLACK,
        gave_up: false,
    };
    let mut harness = Harness {
        svc,
        ctx,
        ledger,
        checker,
        rng,
        company,
    };
    let kills = harness.kill_rounds(settings, started)?;
    harness.ctx.stop.store(true, Ordering::Release);
    for t in threads {
        let _ = t.join();
    }
    let calls = caller.finish();
    harness.wind_down()?;
    drop(receiver);
    let Harness { svc, ledger, .. } = harness;
    let report = report(&ledger, kills, &calls, started.elapsed(), &svc);
    Ok(Outcome {
        kills,
        violations: ledger.violations(),
        report,
    })
}

/// The service under load and what checks it, between start and report.
struct Harness {
    svc: Service,
    ctx: Arc<LoadContext>,
    ledger: Arc<Ledger>,
    checker: Checker,
    rng: Rng,
    company: i64,
}

impl Harness {
    /// Kills and restarts the service until the kills or the time run
    /// out, with the checks after every restart; returns the kills done.
    fn kill_rounds(&mut self, settings: &Settings, started: Instant) -> Result<u32> {
        let mut kills = 0;
        while kills < settings.kills && started.elapsed() < settings.max_duration {
            let up = self.rng.range(settings.up_ms.0, settings.up_ms.1);
            std::thread::sleep(Duration::from_millis(up));
            if !self.svc.is_running() {
                let msg = format!("the service died on its own before kill {}", kills + 1);
                self.ledger.violation(msg);
            }
            self.svc.kill();
            kills += 1;
            self.ctx.paused.store(true, Ordering::Release);
            check_rejections(&self.svc, &self.ledger, self.company);
            self.svc
                .start()
                .with_context(|| format!("restart after kill {kills}"))?;
            // No request of the load may race the checks' reads.
            self.ctx
                .wait_idle(settings.load_threads, Duration::from_secs(15));
            check_round(&mut self.checker, &self.ledger, &mut self.rng, 40);
            self.ctx.paused.store(false, Ordering::Release);
            if kills % 10 == 0 {
                let violations = self.ledger.violations().len();
                println!(
                    "{kills} kills, {:.0?}: {violations} violations",
                    started.elapsed()
                );
            }
        }
        Ok(kills)
    }

    /// The final checks (the load stopped), then the service's stop and
    /// the rejection rows it left.
    fn wind_down(&mut self) -> Result<()> {
        if self.svc.is_running() {
            finish(&mut self.checker, &self.ledger, &mut self.rng);
        } else {
            let msg = "the service died on its own (not killed) before the final checks";
            self.ledger.violation(msg.into());
        }
        self.svc.stop()?;
        check_rejections(&self.svc, &self.ledger, self.company);
        Ok(())
    }
}

/// A company with a key at the highest limit, and the receiver (with the
/// company's secret) as its development URL.
fn setup(
    svc: &Service,
    ledger: &Arc<Ledger>,
) -> Result<(dialproof_kit::webhook::Receiver, String, i64)> {
    let company = svc.cli(&["company", "create", "--name", "crash-loop"])?;
    let id = company["id"].as_i64().context("company id")?;
    let secret = company["webhook_secret"]
        .as_str()
        .context("webhook secret")?
        .to_owned();
    let key = svc.cli(&[
        "key",
        "create",
        "--company",
        &id.to_string(),
        "--label",
        "crash",
    ])?;
    let token = key["token"].as_str().context("token")?.to_owned();
    let prefix = key["prefix"].as_str().context("prefix")?;
    svc.cli(&["key", "set-limit", prefix, "100000"])?;
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let settings = dialproof_kit::webhook::Settings {
        secrets: vec![secret],
        tolerance_seconds: 0,
    };
    let sink = ledger.clone();
    let receiver = dialproof_kit::webhook::Receiver::start(listener, settings, move |e| {
        sink.webhook(&e.verification_id, &e.event_type, e.verdict.is_valid());
    })?;
    svc.cli(&["company", "dev-urls", &id.to_string(), &receiver.base_url()])?;
    Ok((receiver, token, id))
}

/// While the service is down: every 503 the load was answered is stored,
/// and no idempotency key was used by two stored verifications.
fn check_rejections(svc: &Service, ledger: &Ledger, company: i64) {
    let several = dialproof_storage::Admin::open(&svc.database())
        .and_then(|a| a.keys_with_several_verifications(company));
    match several {
        Ok(keys) => {
            for (key, n) in keys {
                ledger.violation(format!("idempotency key {key}: {n} verifications stored"));
            }
        }
        Err(e) => ledger.violation(format!("reading the idempotency keys: {e}")),
    }
    check_rejection_rows(svc, ledger, company);
}

fn check_rejection_rows(svc: &Service, ledger: &Ledger, company: i64) {
    let acked = ledger.counts().get("rejected (503)").copied().unwrap_or(0);
    let stored =
        dialproof_storage::Admin::open(&svc.database()).and_then(|a| a.rejection_count(company));
    match stored {
        Ok(n) if (n as u64) >= acked => {}
        Ok(n) => ledger.violation(format!("{acked} rejections answered 503, {n} stored")),
        Err(e) => ledger.violation(format!("reading the rejections: {e}")),
    }
}

/// The checks' client and their time bound.
struct Checker {
    client: Client,
    until: Instant,
    gave_up: bool,
}

impl Checker {
    /// False (and a violation, once) when the checks are out of time: the
    /// service stopped answering them.
    fn in_time(&mut self, ledger: &Ledger) -> bool {
        if Instant::now() < self.until {
            return true;
        }
        if !self.gave_up {
            self.gave_up = true;
            ledger.violation("the checks ran out of time: the service stopped answering".into());
        }
        false
    }
}

/// Reads a verification (retrying while the service settles) and checks
/// it against the ledger.
fn read_back(checker: &mut Checker, ledger: &Ledger, id: &str) -> Option<Value> {
    for _ in 0..20 {
        if !checker.in_time(ledger) {
            return None;
        }
        let sent = Instant::now();
        match checker.client.read(id) {
            Ok(r) if r.status == 200 => {
                let v = r.json()?;
                ledger.observe(&v, sent);
                return Some(v);
            }
            Ok(r) if r.status == 404 => {
                ledger.violation(format!("{id}: answered 201, missing after a restart"));
                return None;
            }
            _ => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    ledger.violation(format!("{id}: unreadable after a restart"));
    None
}

/// After a restart: every verification not yet seen terminal and `sample`
/// random terminal ones are read back and checked.
fn check_round(checker: &mut Checker, ledger: &Ledger, rng: &mut Rng, sample: usize) {
    let mut ids = ledger.open_ids();
    let all = ledger.ids();
    if !all.is_empty() {
        for _ in 0..sample.min(all.len()) {
            ids.push(all[rng.range(0, all.len() as u64 - 1) as usize].clone());
        }
    }
    ids.sort_unstable();
    ids.dedup();
    let read: Vec<Value> = ids
        .iter()
        .filter_map(|id| read_back(checker, ledger, id))
        .collect();
    ledger.check_pending_numbers(&read);
    ledger.check_webhook_kinds();
    check_replays(checker, ledger, rng, sample);
}

/// After a restart: `sample` acknowledged keys, sent again with their
/// bodies, replay their own verification.
fn check_replays(checker: &mut Checker, ledger: &Ledger, rng: &mut Rng, sample: usize) {
    let keys = ledger.acknowledged_keys();
    if keys.is_empty() || sample == 0 {
        return;
    }
    for _ in 0..sample.min(keys.len()) {
        let (key, body, id) = &keys[rng.range(0, keys.len() as u64 - 1) as usize];
        if !checker.in_time(ledger) {
            return;
        }
        match checker.client.create_keyed(body, key) {
            Ok(r) if r.status == 201 && r.replayed => {
                let got = r
                    .json()
                    .and_then(|v| v["verification_id"].as_str().map(str::to_owned));
                if got.as_deref() != Some(id.as_str()) {
                    ledger.violation(format!("idempotency key {key}: replayed {got:?}, not {id}"));
                }
                ledger.count("replays checked after a restart");
            }
            Ok(r) => ledger.violation(format!(
                "idempotency key {key} of {id}: retried after a restart, answered {}{}",
                r.status,
                if r.replayed { " (replayed)" } else { "" }
            )),
            Err(e) => ledger.violation(format!("idempotency key {key}: no answer ({e})")),
        }
    }
}

/// The end: wait for every pending verification to end and for every
/// webhook, then read everything once more.
fn finish(checker: &mut Checker, ledger: &Ledger, rng: &mut Rng) {
    let deadline = Instant::now() + FINAL_WAIT;
    while Instant::now() < deadline {
        check_round(checker, ledger, rng, 0);
        if ledger.open_ids().is_empty() && ledger.undelivered().is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    for id in ledger.ids() {
        read_back(checker, ledger, &id);
    }
    let keys = ledger.acknowledged_keys().len();
    check_replays(checker, ledger, rng, keys);
    ledger.check_webhook_kinds();
    let undelivered = ledger.undelivered();
    if !undelivered.is_empty() {
        ledger.violation(format!(
            "{} terminal verifications without their webhook after {FINAL_WAIT:?}: {:?}",
            undelivered.len(),
            &undelivered[..undelivered.len().min(10)]
        ));
    }
}

fn report(
    ledger: &Ledger,
    kills: u32,
    calls: &crate::sip_caller::CallTotals,
    took: Duration,
    svc: &Service,
) -> String {
    let violations = ledger.violations();
    let mut out = format!("kills survived: {kills} in {took:.1?}\n");
    for (what, n) in ledger.counts() {
        out.push_str(&format!("  {what}: {n}\n"));
    }
    out.push_str(&format!(
        "  final states: {:?}\n  calls placed: {}, finals {:?}, timeouts {}\n",
        ledger.terminal_counts(),
        calls.placed,
        calls.finals,
        calls.timeouts
    ));
    out.push_str(&format!("invariant violations: {}\n", violations.len()));
    for v in violations.iter().take(20) {
        out.push_str(&format!("  {v}\n"));
    }
    out.push_str(&format!("service log: {}\n", svc.log_path().display()));
    out
}
