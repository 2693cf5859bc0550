//! `dialproof-webhook-receiver`: a loopback HTTP receiver for Dialproof's
//! webhooks, for trying the service on one machine. It verifies each
//! webhook's `X-Service-Signature` with the company's secret(s) and prints
//! one line per webhook: event type, verification id, and whether the
//! signature is valid. Register its URL as the company's development URL
//! (`dialproof company dev-urls ID http://127.0.0.1:PORT`) and create
//! verifications with `webhook_url` = `http://127.0.0.1:PORT/hook`.
//!
//! The first line on stdout is `READY http://ADDR` once it listens.
//! `--events N` exits 0 after N webhooks; `--timeout S` exits after S
//! seconds (status 1 if fewer than `--events` came). A webhook with a bad
//! signature is answered 400 (so the service retries it) and printed as
//! `invalid (<reason>)`.
//!
//! Not for: production receiving (no TLS, no deduplication, no storage).

use anyhow::{bail, Context, Result};
use clap::Parser;
use dialproof_kit::signature::TOLERANCE_SECONDS_DEFAULT;
use dialproof_kit::webhook::{Hit, Receiver, Settings};
use dialproof_tools::load::target::check_loopback;
use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[derive(Debug, Parser)]
#[command(
    name = "dialproof-webhook-receiver",
    version,
    about = "Receive Dialproof webhooks on loopback, verify their signatures, print one line each"
)]
struct Args {
    /// Address to listen on (port 0 picks a free port; see the READY line).
    #[arg(long, default_value = "127.0.0.1:9000")]
    listen: SocketAddr,
    /// The company's webhook secret (`whsec_...`); repeat during a rotation.
    /// Also read from DIALPROOF_WEBHOOK_SECRET.
    #[arg(long = "secret", value_name = "WHSEC")]
    secrets: Vec<String>,
    /// A file with one secret per line (keeps secrets off the command line).
    #[arg(long, value_name = "FILE")]
    secret_file: Option<PathBuf>,
    /// Exit 0 after this many webhooks.
    #[arg(long)]
    events: Option<u64>,
    /// Exit after this many seconds (1 if --events were not all received).
    #[arg(long)]
    timeout: Option<f64>,
    /// Allowed distance between the signature's timestamp and this clock,
    /// in seconds (0: no check).
    #[arg(long, default_value_t = TOLERANCE_SECONDS_DEFAULT)]
    tolerance: i64,
    /// Allow listening on a non-loopback address.
    #[arg(long)]
    allow_remote: bool,
}

fn main() {
    match run() {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("dialproof-webhook-receiver: {e:#}");
            std::process::exit(2);
        }
    }
}

fn secrets(args: &Args) -> Result<Vec<String>> {
    let mut secrets = args.secrets.clone();
    if let Some(path) = &args.secret_file {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        secrets.extend(
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_owned),
        );
    }
    secrets.extend(
        std::env::var(dialproof_tools::load::SECRET_ENV)
            .ok()
            .filter(|s| !s.is_empty()),
    );
    if secrets.is_empty() {
        bail!("give the company's webhook secret: --secret, --secret-file or DIALPROOF_WEBHOOK_SECRET");
    }
    Ok(secrets)
}

fn line(e: &Hit) -> String {
    let verdict = if e.verdict.is_valid() {
        "valid".to_owned()
    } else {
        format!("invalid ({})", e.verdict.as_str())
    };
    let kind = if e.event_type.is_empty() {
        "(not a webhook body)"
    } else {
        &e.event_type
    };
    let id = if e.verification_id.is_empty() {
        "-"
    } else {
        &e.verification_id
    };
    format!("{kind} {id} {verdict}")
}

fn run() -> Result<i32> {
    let args = Args::parse();
    check_loopback(&[args.listen], "--listen", args.allow_remote)?;
    if args.timeout.is_some_and(|t| !(t > 0.0 && t <= 86_400.0)) {
        bail!("--timeout must be in (0, 86400] seconds");
    }
    let settings = Settings {
        secrets: secrets(&args)?,
        tolerance_seconds: args.tolerance,
    };
    let listener =
        TcpListener::bind(args.listen).with_context(|| format!("binding {}", args.listen))?;
    let (tx, rx) = mpsc::channel::<Hit>();
    let tx = std::sync::Mutex::new(tx);
    let receiver = Receiver::start(listener, settings, move |e| {
        if let Ok(tx) = tx.lock() {
            let _ = tx.send(e);
        }
    })?;
    println!("READY {}", receiver.base_url());
    std::io::stdout().flush()?;
    let deadline = args
        .timeout
        .map(|t| Instant::now() + Duration::from_secs_f64(t));
    let mut received = 0u64;
    loop {
        if args.events.is_some_and(|n| received >= n) {
            return Ok(0);
        }
        let event = match deadline {
            Some(d) => match rx.recv_timeout(d.saturating_duration_since(Instant::now())) {
                Ok(e) => e,
                Err(_) => break,
            },
            None => match rx.recv() {
                Ok(e) => e,
                Err(_) => break,
            },
        };
        received += 1;
        println!("{}", line(&event));
        std::io::stdout().flush()?;
    }
    match args.events {
        Some(n) if received < n => {
            eprintln!("timed out after {received} of {n} webhooks");
            Ok(1)
        }
        _ => Ok(0),
    }
}
