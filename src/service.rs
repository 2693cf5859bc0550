//! Starting, running and stopping the service.
//!
//! Order matters: storage opens and recovers before any listener exists, so
//! the first request already sees every committed lease; verifications that
//! expired while the service was down are expired (and their webhooks
//! queued) before new numbers are issued. On SIGTERM or SIGINT the listeners
//! stop taking connections and the writer drains its queue before exit.
//!
//! Not for: request handling (`crate::api`).

use crate::app::App;
use crate::config::Config;
use crate::keys::KeyCache;
use crate::leases::{build_table, check_reload, Leases};
use crate::limits::RateLimiters;
use crate::metrics::Metrics;
use crate::resolve::{self, Resolver};
use crate::server::{self, COROUTINE_STACK_BYTES};
use crate::wait::wait_for;
use crate::{api, http, redirect, timers, tls};
use anyhow::{Context, Result};
use dialproof_engine::verification::Event;
use dialproof_storage::{Options, Store, WriteOp};
use parking_lot::RwLock;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How often the control thread looks for operator changes in the database.
const CONTROL_POLL: Duration = Duration::from_secs(1);
const RECOVERY_WAIT: Duration = Duration::from_secs(60);

pub fn run(config_path: Option<PathBuf>) -> Result<()> {
    let config = Config::load(config_path.as_deref())?;
    let workers = config
        .server
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    may::config()
        .set_workers(workers)
        .set_stack_size(COROUTINE_STACK_BYTES);
    may::config().set_worker_pin(true);

    // The phone metadata takes ~70 ms to load: pay it now, not on the first
    // create.
    dialproof_engine::validate::warm_up();

    let data_dir = config.data_dir();
    std::fs::create_dir_all(&data_dir)
        .with_context(|| format!("creating data directory {}", data_dir.display()))?;
    let failpoints = match std::env::var("DIALPROOF_FAILPOINTS") {
        Ok(spec) => dialproof_storage::FailPoints::from_spec(&spec)
            .map_err(|e| anyhow::anyhow!("DIALPROOF_FAILPOINTS: {e}"))?,
        Err(_) => Default::default(),
    };
    let store = Store::open(
        &config.database_path(),
        Options {
            failpoints,
            ..Options::default()
        },
    )
    .map_err(|e| anyhow::anyhow!("opening {}: {e}", config.database_path().display()))?;

    let keys = KeyCache::new(store.clone());
    keys.reload()
        .map_err(|e| anyhow::anyhow!("loading keys: {e}"))?;
    // No SIP line state is known yet: each line starts as its mode says.
    let table = build_table(&config, &keys.dedicated_numbers(), &Default::default())?;
    let numbers_total = config.numbers()?.len();
    let (expiry_tx, expiry_rx) = timers::channel();
    let (webhook_waker, webhook_wakes) = crate::webhooks::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let app = Arc::new(App {
        store: store.clone(),
        leases: Leases::new(table),
        keys,
        limiters: RateLimiters::default(),
        // The system resolver; an in-process test would hand in its own.
        resolver: Resolver::start(Arc::new(resolve::System))?,
        offload: crate::offload::Offload::start()?,
        expiry: expiry_tx,
        metrics: Metrics::default(),
        config: RwLock::new(Arc::new(config.clone())),
        stop: stop.clone(),
        webhooks: webhook_waker,
        sip_lines: Default::default(),
        sip_stats: Default::default(),
    });
    recover(&app)?;
    timers::spawn(app.clone(), expiry_rx)?;
    // After recovery, whose expiries queued their wakes: the driver's first
    // poll also finds every delivery that was due while the service was down.
    crate::webhooks::spawn(app.clone(), webhook_wakes)?;
    // After recovery too: a call must find its restored lease.
    let sip = crate::sip::spawn(&app, &config)?;

    let (cert, key) = tls::ensure_certificate(
        config
            .tls
            .cert
            .as_ref()
            .map(|c| config.resolve(c))
            .zip(config.tls.key.as_ref().map(|k| config.resolve(k))),
        &data_dir,
    )?;
    let tls_config = tls::server_config(&cert, &key)?;
    let limits = http::Limits::default();
    let api_app = app.clone();
    let https = server::spawn_https(
        config.server.https_listen,
        tls_config,
        limits,
        Arc::new(move |req| api::handle(&api_app, req)),
        stop.clone(),
    )
    .with_context(|| format!("binding HTTPS on {}", config.server.https_listen))?;
    let public_port = config.server.public_https_port.unwrap_or(https.port());
    let http_addr = match config.server.http_listen {
        Some(addr) => Some(
            server::spawn_plain(
                addr,
                limits,
                Arc::new(move |req| redirect::redirect(req, public_port)),
                stop.clone(),
            )
            .with_context(|| format!("binding HTTP on {addr}"))?,
        ),
        None => None,
    };

    let hup = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGHUP, hup.clone())?;
    signal_hook::flag::register(signal_hook::consts::SIGTERM, stop.clone())?;
    signal_hook::flag::register(signal_hook::consts::SIGINT, stop.clone())?;

    tracing::info!(%https, http = ?http_addr, workers, numbers = numbers_total,
        database = %config.database_path().display(), "dialproof ready");
    // Machine-readable readiness line on stdout (tests and scripts wait for
    // it; with port 0 in the config it is the only way to learn the ports).
    let mut ready = format!("READY https={https}");
    if let Some(h) = http_addr {
        ready.push_str(&format!(" http={h}"));
    }
    if let Some(s) = &sip {
        ready.push_str(&format!(" sip={}", s.addr));
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "{ready}")?;
    out.flush()?;
    drop(out);

    control_loop(&app, config_path.as_deref(), &hup);
    if let Some(sip) = &sip {
        tracing::info!("stopping: unregistering sip lines");
        sip.join();
    }

    tracing::info!("stopping: draining the writer");
    store.shutdown();
    tracing::info!(counters = %app.metrics.render().replace('\n', " "), "stopped");
    Ok(())
}

/// Rebuilds the lease table from pending rows and expires what ran out while
/// the service was down.
fn recover(app: &Arc<App>) -> Result<()> {
    let store = app.store.clone();
    let pending = wait_for(RECOVERY_WAIT, |reply| {
        store.read(|r| r.pending_verifications(), reply)
    })
    .context("reading pending verifications timed out")?
    .map_err(|e| anyhow::anyhow!("{e}"))?
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let now = app.now();
    let (mut restored, mut expired) = (0usize, 0usize);
    for row in pending {
        if row.expires_at <= now {
            let app2 = app.clone();
            let done = wait_for(RECOVERY_WAIT, |reply| {
                let _ = app.store.submit(WriteOp::Transition {
                    id: row.id.clone(),
                    company_id: None,
                    event: Event::Expire { at: now },
                    reply: Some(reply),
                });
            });
            match done {
                Some(r) => app2.after_transition(r),
                None => anyhow::bail!("expiring {} at start timed out", row.id),
            }
            expired += 1;
            continue;
        }
        if let Err(e) = app.leases.restore(&row.dial_number, row.lease_generation) {
            // The number left the configuration or is held twice: keep the
            // verification (it still expires and can still be read) but do
            // not issue the number to anyone else meanwhile.
            tracing::error!(verification_id = %row.id, error = %e, "lease not restored");
        } else {
            restored += 1;
        }
        if app
            .expiry
            .try_send((row.expires_at, row.id.clone()))
            .is_err()
        {
            anyhow::bail!("expiry queue overflow during recovery");
        }
    }
    tracing::info!(restored, expired, "recovery done");
    Ok(())
}

/// Runs until a stop signal: applies operator changes from the database and
/// configuration reloads (SIGHUP).
fn control_loop(app: &Arc<App>, config_path: Option<&std::path::Path>, hup: &AtomicBool) {
    let mut dedicated = app.keys.dedicated_numbers();
    let mut last_poll = std::time::Instant::now();
    while !app.stopping() {
        std::thread::sleep(Duration::from_millis(100));
        if app.stopping() {
            break;
        }
        let reload_config = hup.swap(false, Ordering::AcqRel);
        if last_poll.elapsed() < CONTROL_POLL && !reload_config {
            continue;
        }
        last_poll = std::time::Instant::now();
        if let Err(e) = app.keys.refresh_if_changed() {
            tracing::warn!(error = %e, "refreshing keys failed");
        }
        let now_dedicated = app.keys.dedicated_numbers();
        if !reload_config && now_dedicated == dedicated {
            continue;
        }
        let config = if reload_config {
            match Config::load(config_path) {
                Ok(new) => {
                    let old = app.config.read().clone();
                    if let Err(e) = check_reload(&old, &new) {
                        tracing::error!(error = %e, "configuration reload refused");
                        continue;
                    }
                    Arc::new(new)
                }
                Err(e) => {
                    tracing::error!(error = %e, "configuration reload failed; keeping the old one");
                    continue;
                }
            }
        } else {
            app.config.read().clone()
        };
        let line_up = app.sip_lines.snapshot();
        match build_table(&config, &now_dedicated, &line_up).and_then(|t| app.leases.replace(t)) {
            Ok(carried) => {
                *app.config.write() = config;
                crate::sip::on_table_rebuilt(app);
                dedicated = now_dedicated;
                tracing::info!(carried, reload_config, "lease table rebuilt");
            }
            Err(e) => tracing::error!(error = %e, "lease table rebuild failed"),
        }
    }
}
