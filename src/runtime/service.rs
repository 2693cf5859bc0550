//! Starting, running and stopping the service.
//!
//! Order matters: storage opens and recovers before any listener exists, so
//! the first request already sees every committed lease; verifications that
//! expired while the service was down are expired (and their webhooks
//! queued) before new numbers are issued. On SIGTERM or SIGINT the listeners
//! stop taking connections and the writer drains its queue before exit.
//!
//! Not for: request handling (`crate::api`).

use crate::api::key_cache::KeyCache;
use crate::api::rate_limiters::RateLimiters;
use crate::http::listener::{self, COROUTINE_STACK_BYTES};
use crate::http::{redirect, tls};
use crate::runtime::app::App;
use crate::runtime::config::{Config, ReplicationMode};
use crate::runtime::expiry;
use crate::runtime::heartbeat;
use crate::runtime::leases::{build_table, check_reload, Leases};
use crate::runtime::metrics::Metrics;
use crate::runtime::promotion::{self, Held};
use crate::runtime::resolve::{self, Resolver};
use crate::runtime::wait::wait_for;
use crate::{api, http};
use anyhow::{Context, Result};
use dialproof_engine::ids::VerificationKey;
use dialproof_engine::time::UnixMillis;
use dialproof_storage::{CommitSink, Options, Reader, Store};
use parking_lot::RwLock;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How often the control thread looks for operator changes in the database.
const CONTROL_POLL: Duration = Duration::from_secs(1);
const RECOVERY_WAIT: Duration = Duration::from_secs(60);

pub fn run(config_path: Option<PathBuf>, serve: &crate::cli::ServeArgs) -> Result<()> {
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
    let (commit_sink, commits) = CommitSink::channel();
    let store = Store::open_with_commit_sink(
        &config.database_path(),
        Options {
            failpoints,
            replication: config.storage.replication.storage(),
            ..Options::default()
        },
        commit_sink,
    )
    .map_err(|e| anyhow::anyhow!("opening {}: {e}", config.database_path().display()))?;

    let keys = KeyCache::new(store.clone());
    keys.reload()
        .map_err(|e| anyhow::anyhow!("loading keys: {e}"))?;
    // No SIP line state is known yet: each line starts as its mode says.
    let table = build_table(&config, &keys.dedicated_numbers(), &Default::default())?;
    // From the table, not `config.numbers()`: expanding a million numbers a
    // second time only to count them costs ~80 MB of short-lived strings,
    // which the allocator keeps resident.
    let numbers_total: usize = table.stats().iter().map(|s| s.total).sum();
    let (webhook_waker, webhook_wakes) = crate::webhooks::waker::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let app = Arc::new(App {
        store: store.clone(),
        leases: Leases::new(table),
        keys,
        limiters: RateLimiters::default(),
        // The system resolver; an in-process test would hand in its own.
        resolver: Resolver::start(Arc::new(resolve::System))?,
        offload: crate::runtime::offload::Offload::start()?,
        expiries: Default::default(),
        clock: crate::runtime::clock::Clock::system(),
        metrics: Metrics::default(),
        config: RwLock::new(Arc::new(config.clone())),
        stop: stop.clone(),
        webhooks: webhook_waker,
        sip_lines: Default::default(),
        sip_stats: Default::default(),
        readiness: Default::default(),
    });
    // First, so /healthz answers and /readyz says why not during a long
    // recovery.
    let ops_addr = match config.server.ops_listen {
        Some(addr) => {
            let ops_app = app.clone();
            Some(
                listener::spawn_plain(
                    addr,
                    http::Limits::default(),
                    Arc::new(move |req| crate::ops::handle(&ops_app, req)),
                    stop.clone(),
                )
                .with_context(|| format!("binding the ops listener on {addr}"))?
                .addr,
            )
        }
        None => None,
    };
    // Before recovery: its expiries' commits release numbers and wake the
    // webhook driver through the consumer like any other commit.
    let consumer = crate::runtime::commits::spawn(app.clone(), commits)?;
    // Also starts the expiry thread, and returns once what expired while
    // the service was down is expired.
    recover(&app)?;
    // Before any listener or SIP socket: no number the lost tail may have
    // leased is issued from the first create on.
    let mut held = match serve.promoted {
        true => Some(promote(&app, &config, serve.lost_until)?),
        false => None,
    };
    if config.storage.replication == ReplicationMode::Litestream {
        let r = app.metrics.replication.clone();
        heartbeat::spawn(store.clone(), app.clock.clone(), stop.clone(), r)?;
    }
    app.readiness.recovered.store(true, Ordering::Release);
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
    let limits = http::Limits {
        idle_timeout: config.server.idle_timeout(),
        ..http::Limits::default()
    };
    let api_app = app.clone();
    let https = listener::spawn_https(
        config.server.https_listen,
        tls_config,
        limits,
        Arc::new(move |req| api::handle(&api_app, req)),
        stop.clone(),
    )
    .with_context(|| format!("binding HTTPS on {}", config.server.https_listen))?;
    let public_port = config.server.public_https_port.unwrap_or(https.addr.port());
    let http = match config.server.http_listen {
        Some(addr) => Some(
            listener::spawn_plain(
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

    let http_addr = http.as_ref().map(|l| l.addr);
    let http_shown = http_addr.map_or_else(|| "off".to_owned(), |a| a.to_string());
    tracing::info!(https = %https.addr, http = %http_shown, workers, numbers = numbers_total,
        database = %config.database_path().display(), "dialproof ready");
    // Machine-readable readiness line on stdout (tests and scripts wait for
    // it; with port 0 in the config it is the only way to learn the ports).
    let mut ready = format!("READY https={}", https.addr);
    if let Some(h) = http_addr {
        ready.push_str(&format!(" http={h}"));
    }
    if let Some(s) = &sip {
        ready.push_str(&format!(" sip={}", s.addr));
    }
    if let Some(o) = ops_addr {
        ready.push_str(&format!(" ops={o}"));
    }
    app.readiness.listening.store(true, Ordering::Release);
    let mut out = std::io::stdout().lock();
    writeln!(out, "{ready}")?;
    out.flush()?;
    drop(out);

    control_loop(&app, config_path.as_deref(), &hup, &mut held);
    let listeners: Vec<_> = std::iter::once(https).chain(http).collect();
    drain(&listeners, config.server.shutdown_timeout());
    if let Some(sip) = &sip {
        tracing::info!("stopping: unregistering sip lines");
        sip.join();
    }

    tracing::info!("stopping: draining the writer");
    store.shutdown();
    // The consumer ends after the writer's last batch.
    if consumer.join().is_err() {
        tracing::error!("the commit consumer panicked");
    }
    tracing::info!(counters = %app.metrics.render().replace('\n', " "), "stopped");
    Ok(())
}

/// The first step of a graceful stop: no new connections, and every request
/// in progress answered (its connection closed after it), waiting at most
/// `timeout`; what is still open then is cut when the process exits.
fn drain(listeners: &[crate::http::listener::Listening], timeout: Duration) {
    let started = std::time::Instant::now();
    for l in listeners {
        l.stop_accepting();
    }
    let open = |ls: &[crate::http::listener::Listening]| {
        ls.iter().map(|l| l.open_connections()).sum::<usize>()
    };
    tracing::info!(
        connections = open(listeners),
        "stopping: finishing requests in progress"
    );
    while open(listeners) > 0 && started.elapsed() < timeout {
        std::thread::sleep(Duration::from_millis(20));
    }
    match open(listeners) {
        0 => tracing::info!(
            took_ms = started.elapsed().as_millis() as u64,
            "connections drained"
        ),
        left => tracing::warn!(left, "drain timed out; closing the remaining connections"),
    }
}

/// Rebuilds the lease table from pending rows, schedules every pending
/// verification's expiry, starts the expiry thread, and waits (bounded)
/// until the ones that ran out while the service was down are expired: the
/// first request then reads them as expired and finds their numbers free.
fn recover(app: &Arc<App>) -> Result<()> {
    let recovered_at = app.now();
    let restorer = app.clone();
    let Recovered {
        expiries,
        restored,
        not_restored,
    } = wait_for(RECOVERY_WAIT, |reply| {
        app.store.read(move |r| restore_leases(&restorer, r), reply)
    })
    .context("reading pending verifications timed out")?
    .map_err(|e| anyhow::anyhow!("{e}"))??;
    let pending = expiries.len();
    let overdue = expiries
        .iter()
        .filter(|(at, _)| *at <= recovered_at)
        .count();
    app.expiries.schedule(expiries);
    expiry::spawn(app.clone())?;
    if !app.expiries.wait_settled(recovered_at, RECOVERY_WAIT) {
        // Serving is safe meanwhile: their numbers stay leased until each
        // expiry commits. Only a read may still show one as pending.
        let (queued, in_flight) = app.expiries.counts();
        tracing::warn!(
            overdue,
            queued,
            in_flight,
            "overdue verifications still expiring; serving meanwhile"
        );
    }
    tracing::info!(pending, restored, not_restored, overdue, "recovery done");
    Ok(())
}

/// What recovery read: every pending verification's expiry, and how many
/// leases went back into the table.
struct Recovered {
    expiries: Vec<(UnixMillis, VerificationKey)>,
    restored: usize,
    not_restored: usize,
}

/// On a reader thread: re-marks each pending verification's number leased
/// and collects its expiry, 24 bytes a row (no `VerificationRow` is built).
/// Overdue ones keep their lease too, until their expiry commits, so their
/// numbers are never issued while the rows are still pending.
fn restore_leases(app: &App, reader: &Reader) -> Result<Recovered> {
    let mut recovered = Recovered {
        expiries: Vec::new(),
        restored: 0,
        not_restored: 0,
    };
    let mut foreign_id = None;
    reader
        .for_each_pending_lease(|lease| {
            let Some(key) = VerificationKey::parse(lease.id) else {
                foreign_id.get_or_insert_with(|| lease.id.to_owned());
                return;
            };
            recovered.expiries.push((lease.expires_at, key));
            match app
                .leases
                .restore(lease.dial_number, lease.lease_generation)
            {
                Ok(()) => recovered.restored += 1,
                Err(e) => {
                    // The number left the configuration or is held twice:
                    // keep the verification (it still expires and can still
                    // be read) but do not issue the number to anyone else.
                    tracing::error!(verification_id = lease.id, error = %e, "lease not restored");
                    recovered.not_restored += 1;
                }
            }
        })
        .map_err(|e| anyhow::anyhow!("reading pending verifications: {e}"))?;
    if let Some(id) = foreign_id {
        // Every id this service writes is a canonical ULID; anything else
        // is a corrupt row, refused like any other corrupt row.
        anyhow::bail!("pending verification {id:?} does not have an id this service issues");
    }
    Ok(recovered)
}

/// A promoted start: holds back what the lost tail may have leased (see
/// `promotion`), for the control loop to release when due.
fn promote(app: &App, config: &Config, lost_until: Option<i64>) -> Result<Held> {
    let end = match lost_until {
        Some(seconds) => UnixMillis::from_secs(seconds),
        None => app.now(),
    };
    let held = promotion::hold(&config.database_path(), &app.leases, end)?;
    let r = &app.metrics.replication;
    r.held_numbers.store(held.count() as u64, Ordering::Relaxed);
    r.hold_until_ms
        .store(u64::try_from(held.until.0).unwrap_or(0), Ordering::Relaxed);
    Ok(held)
}

/// Runs until a stop signal: applies operator changes from the database and
/// configuration reloads (SIGHUP).
fn control_loop(
    app: &Arc<App>,
    config_path: Option<&std::path::Path>,
    hup: &AtomicBool,
    held: &mut Option<Held>,
) {
    let mut dedicated = app.keys.dedicated_numbers();
    let mut last_poll = std::time::Instant::now();
    while !app.stopping() {
        std::thread::sleep(Duration::from_millis(100));
        if app.stopping() {
            break;
        }
        if held
            .as_mut()
            .is_some_and(|h| h.release_if_due(&app.leases, app.now()))
        {
            *held = None;
            app.metrics
                .replication
                .held_numbers
                .store(0, Ordering::Relaxed);
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
