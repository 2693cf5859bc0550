//! `dialproof-load`: an HTTPS load generator for the verification API.
//!
//! A run: check the options (loopback only unless `--allow-remote`), bind
//! the embedded webhook receiver, get keys (a file, or `--setup-local`
//! through the operator CLI, which also registers the receiver as the
//! company's development URL), start the SIP caller if `--calls`, open
//! every connection on every event-loop thread, then send the mix for the
//! duration with a progress line each second, wait for what is in flight,
//! wait (bounded) for the webhooks of calls, and report.
//!
//! Not for: HTTP/2, pipelining, or any server but Dialproof (the requests
//! are its API's).

pub mod args;
pub mod conn;
pub mod ops;
pub mod report;
pub mod setup;
pub mod stats;
pub mod target;
pub mod worker;

use crate::sip_caller::{new_histogram, CallTotals, CallerSettings, SipCaller};
use anyhow::{Context, Result};
use args::{Args, Mode};
use dialproof_kit::signature::{Verdict, TOLERANCE_SECONDS_DEFAULT};
use dialproof_kit::webhook::{self, Hit, Receiver};
use hdrhistogram::Histogram;
use ops::{Op, Shared};
use report::{CallsReport, Latency, Report, RunInfo, WebhooksReport};
use stats::{Counters, Stats};
use std::collections::{BTreeMap, HashMap};
use std::io::Write as _;
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};
use target::{check_loopback, resolve, Target, Trust};

/// Environment variable with one more webhook secret to verify with.
pub const SECRET_ENV: &str = "DIALPROOF_WEBHOOK_SECRET";

/// What the embedded webhook receiver saw.
struct Hooks {
    /// First INVITE of each call still waiting for its webhook.
    call_sent: HashMap<String, Instant>,
    received: u64,
    by_type: BTreeMap<String, u64>,
    verdicts: BTreeMap<String, u64>,
    call_to_webhook_us: Histogram<u64>,
}

impl Hooks {
    fn on_event(&mut self, e: &Hit) {
        self.received += 1;
        *self.by_type.entry(e.event_type.clone()).or_default() += 1;
        *self
            .verdicts
            .entry(e.verdict.as_str().to_owned())
            .or_default() += 1;
        // A webhook whose signature fails does not count as the call's
        // (the service will retry it; a valid one may still come).
        let accepted = matches!(e.verdict, Verdict::Valid | Verdict::Unchecked);
        if e.event_type == "verification.completed" && accepted {
            if let Some(sent) = self.call_sent.remove(&e.verification_id) {
                let us = e.received.saturating_duration_since(sent).as_micros();
                let _ = self
                    .call_to_webhook_us
                    .record(u64::try_from(us).unwrap_or(u64::MAX).max(1));
            }
        }
    }
}

/// Runs the load as `args` say and returns the report (also written as
/// JSON with `--json`).
pub fn run(args: &Args) -> Result<Report> {
    let (mode, mix) = args.validate()?;
    let target = target_of(args)?;
    let listener = webhook_listener(args)?;
    let base_url = format!("http://{}", listener.local_addr()?);
    let (tokens, secrets) = keys_and_secrets(args, &base_url)?;
    let hooks = Arc::new(Mutex::new(Hooks {
        call_sent: HashMap::new(),
        received: 0,
        by_type: BTreeMap::new(),
        verdicts: BTreeMap::new(),
        call_to_webhook_us: new_histogram(),
    }));
    let receiver = start_receiver(listener, secrets, &hooks)?;
    let caller = args.calls.then(|| start_caller(args, &hooks)).transpose()?;

    let threads = args.thread_count(mode.connections());
    let info = run_info(args, mode, &mix, threads, tokens.len());
    let plan = Arc::new(worker::Plan {
        mode,
        shared: Arc::new(Shared {
            mix: mix.clone(),
            host: target.host_header.clone(),
            tokens,
            phone: args.phone.clone(),
            webhook_url: format!("{base_url}/hook"),
            ttl_seconds: args.ttl,
            get_path: args.path.clone(),
            idempotency_keys: args.idempotency_keys.then(run_key_prefix),
            replay_share: args.replay_share,
            working_set: args.working_set,
            zipf: args.zipf,
        }),
        target,
        duration: Duration::from_secs_f64(args.duration),
        timeout: Duration::from_millis(args.timeout_ms),
        threads,
        calls: caller.as_ref().map(SipCaller::handle),
        call_share: args.call_share,
        start: Arc::new(Barrier::new(threads + 1)),
        prefill: args.prefill,
    });
    if args.prefill > 0 && !args.quiet {
        eprintln!(
            "prefill: creating {} verifications before the run",
            args.prefill
        );
    }
    let cpu = args.server_pid.map(ServerCpu::new).transpose()?;
    let (stats, elapsed, cpu_seconds) = drive(&plan, args.quiet, cpu.as_ref())?;
    drop(plan);

    let mut report = Report::new(info, &stats, elapsed.as_secs_f64());
    report.server_cpu = cpu_seconds.map(|seconds| report::ServerCpu {
        seconds,
        per_answer_us: seconds * 1e6 / (stats.answered_total().max(1) as f64),
    });
    if let Some(caller) = caller {
        let totals = caller.finish();
        wait_for_webhooks(&hooks, &totals, args.drain_seconds);
        report.calls = Some(calls_report(&totals, stats.calls_not_queued));
        report.webhooks = Some(webhooks_report(&hooks, &totals));
    } else if mix.has_create() {
        report.webhooks = Some(webhooks_report(&hooks, &CallTotals::none()));
    }
    drop(receiver);
    write_json(args, &report)?;
    Ok(report)
}

/// The HTTPS target, refused unless on loopback (or `--allow-remote`).
fn target_of(args: &Args) -> Result<Target> {
    let trust = match &args.cacert {
        Some(path) => Trust::CaFile(path),
        None => Trust::Insecure,
    };
    Target::new(
        &args.target,
        args.server_name.as_deref(),
        trust,
        args.allow_remote,
    )
}

/// The webhook receiver's socket, on loopback unless `--allow-remote`.
fn webhook_listener(args: &Args) -> Result<TcpListener> {
    check_loopback(
        &[args.webhook_listen],
        "--webhook-listen",
        args.allow_remote,
    )?;
    TcpListener::bind(args.webhook_listen)
        .with_context(|| format!("binding the webhook receiver on {}", args.webhook_listen))
}

/// The report as JSON to `--json`, when asked.
fn write_json(args: &Args, report: &Report) -> Result<()> {
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(report)?;
        std::fs::write(path, json).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// The tokens to use and the webhook secrets to verify with: from
/// `--setup-local` (which registers `base_url` as a development URL) or
/// `--keys`, plus `--webhook-secret` and the environment.
fn keys_and_secrets(args: &Args, base_url: &str) -> Result<(Vec<String>, Vec<String>)> {
    let mut secrets = args.webhook_secrets.clone();
    secrets.extend(std::env::var(SECRET_ENV).ok().filter(|s| !s.is_empty()));
    let tokens = if let Some(n) = args.setup_local {
        let op = setup::Operator::new(args.dialproof_bin.as_deref(), args.config.as_deref());
        let keys = op.setup(n, args.key_limit, base_url)?;
        secrets.extend(keys.webhook_secrets);
        std::thread::sleep(setup::PICKUP_DELAY);
        keys.tokens
    } else if let Some(path) = &args.keys {
        setup::read_keys_file(path)?
    } else {
        Vec::new()
    };
    Ok((tokens, secrets))
}

/// The prefix that makes this run's idempotency keys its own.
fn run_key_prefix() -> ops::KeyPrefix {
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    ops::KeyPrefix(format!("load-{started:x}"))
}

fn run_info(args: &Args, mode: Mode, mix: &ops::Mix, threads: usize, keys: usize) -> RunInfo {
    RunInfo {
        target: args.target.clone(),
        mode: match mode {
            Mode::Open { .. } => "open",
            Mode::Closed { .. } => "closed",
        },
        rate_requested: args.rate,
        connections: mode.connections(),
        threads,
        keys,
        mix: Op::ALL
            .iter()
            .filter(|o| mix.weight(**o) > 0)
            .map(|o| (o.as_str().to_owned(), mix.weight(*o)))
            .collect(),
        latency_from: match mode {
            Mode::Open { .. } => "intended send time (open loop)",
            Mode::Closed { .. } => "send time (closed loop)",
        },
    }
}

fn start_receiver(
    listener: TcpListener,
    secrets: Vec<String>,
    hooks: &Arc<Mutex<Hooks>>,
) -> Result<Receiver> {
    let settings = webhook::Settings {
        secrets,
        tolerance_seconds: TOLERANCE_SECONDS_DEFAULT,
    };
    let hooks = hooks.clone();
    let r = Receiver::start(listener, settings, move |e| {
        if let Ok(mut h) = hooks.lock() {
            h.on_event(&e);
        }
    })
    .context("starting the webhook receiver")?;
    Ok(r)
}

fn start_caller(args: &Args, hooks: &Arc<Mutex<Hooks>>) -> Result<SipCaller> {
    let sip = resolve(&args.sip, "--sip", args.allow_remote)?;
    let bind: SocketAddr = match (sip.ip().is_loopback(), sip.is_ipv4()) {
        (true, true) => "127.0.0.1:0",
        (true, false) => "[::1]:0",
        (false, true) => "0.0.0.0:0",
        (false, false) => "[::]:0",
    }
    .parse()?;
    let settings = CallerSettings {
        target: sip,
        caller: args.caller.clone(),
        bind,
    };
    let hooks = hooks.clone();
    SipCaller::start(settings, move |id, at| {
        if let Ok(mut h) = hooks.lock() {
            h.call_sent.insert(id.to_owned(), at);
        }
    })
    .context("starting the SIP caller")
}

/// Starts the workers, prints progress each second while they run, and
/// returns their merged statistics and the time from start to the last
/// answer.
fn drive(
    plan: &Arc<worker::Plan>,
    quiet: bool,
    cpu: Option<&ServerCpu>,
) -> Result<(Stats, Duration, Option<f64>)> {
    let counters: Vec<Arc<Counters>> = (0..plan.threads)
        .map(|_| Arc::new(Counters::default()))
        .collect();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1);
    let mut handles = Vec::with_capacity(plan.threads);
    for (i, c) in counters.iter().enumerate() {
        let (plan, c) = (plan.clone(), c.clone());
        let seed = seed.wrapping_add((i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        handles.push(
            std::thread::Builder::new()
                .name(format!("load-{i}"))
                .spawn(move || worker::run(&plan, i, c, seed))
                .context("starting a load thread")?,
        );
    }
    plan.start.wait();
    let start = Instant::now();
    let cpu_at_start = cpu.map(ServerCpu::seconds).transpose()?;
    let mut last = (0u64, start);
    let mut tick = start + Duration::from_secs(1);
    while handles.iter().any(|h| !h.is_finished()) {
        std::thread::sleep(Duration::from_millis(20));
        let now = Instant::now();
        if now >= tick && !quiet {
            let (sent, ok, errors) = stats::totals(&counters);
            let rate = (ok + errors - last.0) as f64 / (now - last.1).as_secs_f64();
            eprintln!(
                "[{:6.1}s] sent {sent}  ok {ok}  errors {errors}  rate {rate:.0}/s",
                (now - start).as_secs_f64()
            );
            let _ = std::io::stderr().flush();
            last = (ok + errors, now);
            tick += Duration::from_secs(1);
        }
    }
    let elapsed = start.elapsed();
    let cpu_seconds = match (cpu, cpu_at_start) {
        (Some(cpu), Some(before)) => Some(cpu.seconds()? - before),
        _ => None,
    };
    let mut total = Stats::default();
    for h in handles {
        let s = h
            .join()
            .map_err(|_| anyhow::anyhow!("a load thread panicked"))?;
        total.merge(&s);
    }
    Ok((total, elapsed, cpu_seconds))
}

/// The server process's CPU time (user and system, every thread), from
/// `/proc/PID/stat` (Linux).
struct ServerCpu {
    stat: std::path::PathBuf,
}

/// Linux reports process times in USER_HZ ticks, 100 a second on every
/// architecture the kernel's ABI fixes it for (`getconf CLK_TCK`).
const TICKS_PER_SECOND: f64 = 100.0;

impl ServerCpu {
    fn new(pid: u32) -> Result<ServerCpu> {
        let cpu = ServerCpu {
            stat: format!("/proc/{pid}/stat").into(),
        };
        cpu.seconds()
            .with_context(|| format!("--server-pid {pid}: no such process to measure"))?;
        Ok(cpu)
    }

    fn seconds(&self) -> Result<f64> {
        let text = std::fs::read_to_string(&self.stat)
            .with_context(|| format!("reading {}", self.stat.display()))?;
        // The command name (field 2) may hold spaces: count after its ')'.
        let rest = text
            .rsplit_once(')')
            .map(|(_, rest)| rest)
            .context("unexpected /proc stat format")?;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks = |i: usize| -> Result<f64> {
            let v: u64 = fields
                .get(i)
                .and_then(|f| f.parse().ok())
                .context("unexpected /proc stat format")?;
            Ok(v as f64)
        };
        // utime and stime: fields 14 and 15, i.e. 11 and 12 after ')'.
        Ok((ticks(11)? + ticks(12)?) / TICKS_PER_SECOND)
    }
}

/// Waits until every call answered with a final response has had its
/// webhook, or `drain_seconds` pass.
fn wait_for_webhooks(hooks: &Mutex<Hooks>, totals: &CallTotals, drain_seconds: f64) {
    let answered: u64 = totals.finals.values().sum();
    let deadline = Instant::now() + Duration::from_secs_f64(drain_seconds);
    while Instant::now() < deadline {
        let matched = hooks.lock().map_or(0, |h| h.call_to_webhook_us.len());
        if matched >= answered {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn calls_report(t: &CallTotals, not_queued: u64) -> CallsReport {
    CallsReport {
        placed: t.placed,
        finals: t.finals.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        timeouts: t.timeouts,
        not_queued,
        invite_to_final_ms: Latency::of(&t.latency_us),
    }
}

fn webhooks_report(hooks: &Mutex<Hooks>, t: &CallTotals) -> WebhooksReport {
    let answered: u64 = t.finals.values().sum();
    match hooks.lock() {
        Ok(h) => WebhooksReport {
            received: h.received,
            by_type: h.by_type.clone(),
            signatures: h.verdicts.clone(),
            call_to_webhook_ms: Latency::of(&h.call_to_webhook_us),
            calls_without_webhook: answered.saturating_sub(h.call_to_webhook_us.len()),
        },
        Err(_) => WebhooksReport {
            received: 0,
            by_type: BTreeMap::new(),
            signatures: BTreeMap::new(),
            call_to_webhook_ms: Latency::of(&new_histogram()),
            calls_without_webhook: answered,
        },
    }
}
