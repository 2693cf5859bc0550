//! Starting, running and stopping the service.
//!
//! Order matters: storage opens and recovers before any listener exists, so
//! the first request already sees every committed lease; verifications that
//! expired while the service was down are expired (and their webhooks
//! queued) before new numbers are issued. On SIGTERM or SIGINT the listeners
//! stop taking connections, requests in progress are answered, SIP lines
//! unregister and the writer drains its queue before exit.
//!
//! Not for: request handling (`crate::site`), recovery's details
//! (`super::recovery`) or the control loop (`super::control`).

use crate::cli::ServeArgs;
use crate::http::listener::{self, Listening};
use crate::http::{redirect, tls};
use crate::runtime::app::App;
use crate::runtime::control::control_loop;
use crate::runtime::heartbeat;
use crate::runtime::promotion::{promote, Held};
use crate::runtime::recovery::recover;
use crate::shared::admin::AdminConn;
use crate::shared::clock::Clock;
use crate::shared::config::{Config, ReplicationMode};
use crate::shared::idempotency::IdempotencyKeys;
use crate::shared::key_cache::KeyCache;
use crate::shared::leases::{build_table, Leases};
use crate::shared::number_health::NumberHealth;
use crate::shared::offload::Offload;
use crate::shared::resolve::{self, Resolver};
use crate::shared::wait::{Committing, Outcome};
use crate::sip::SipHandle;
use crate::{http, site};
use anyhow::{Context, Result};
use dialproof_storage::{CommitProgress, CommitReceiver, CommitSink, Options, Store};
use parking_lot::RwLock;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The listeners a running service holds, for the READY line and the stop.
struct Listeners {
    https: Listening,
    http: Option<Listening>,
    ops: Option<SocketAddr>,
    sip: Option<SipHandle>,
}

/// A started service: storage open and recovered, every thread and
/// listener running. [`Running::serve`] runs it until its stop flag is set.
pub struct Running {
    app: Arc<App>,
    store: Store,
    consumer: JoinHandle<()>,
    listeners: Listeners,
    config: Config,
    config_path: Option<PathBuf>,
    /// Set to reload the configuration (SIGHUP).
    hup: Arc<AtomicBool>,
    workers: usize,
    numbers_total: usize,
    /// After a promoted start: the numbers held back, until released.
    held: Option<Held>,
}

/// The service as the operator starts it: the system clock, stopped by
/// SIGTERM or SIGINT, reloaded by SIGHUP.
pub fn run(config_path: Option<PathBuf>, serve: &ServeArgs) -> Result<()> {
    crate::runtime::malloc::tune();
    let running = start(config_path, Clock::system(), serve)?;
    // Before the READY line: whoever waits for it may signal at once.
    signal_hook::flag::register(signal_hook::consts::SIGHUP, running.hup.clone())?;
    signal_hook::flag::register(signal_hook::consts::SIGTERM, running.stop_flag())?;
    signal_hook::flag::register(signal_hook::consts::SIGINT, running.stop_flag())?;
    if serve.ha_child {
        let app = &running.app;
        crate::runtime::ha_child::spawn(app.fence.clone(), app.clock.clone())?;
    }
    running.serve()
}

/// Sets the coroutine runtime's workers (pinned) and stack size, and loads
/// what the first request would otherwise wait for; returns the workers.
fn configure_runtime(config: &Config) -> usize {
    let workers = config
        .server
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    may::config()
        .set_workers(workers)
        .set_stack_size(crate::coroutine::STACK_BYTES);
    may::config().set_worker_pin(true);
    // The phone metadata takes ~70 ms to load: pay it now, not on the first
    // create.
    dialproof_engine::validate::warm_up();
    workers
}

/// Starts the service with `clock` as its one clock (the system clock in
/// production; a test's virtual time in process) and returns once it
/// takes requests.
pub fn start(config_path: Option<PathBuf>, clock: Clock, serve: &ServeArgs) -> Result<Running> {
    // The checks `dialproof check` makes, with the same messages.
    let (config, _plan) = crate::runtime::preflight::preflight(config_path.as_deref())?;
    let workers = configure_runtime(&config);
    let (store, commits) = open_store(&config)?;
    let (app, webhook_wakes, numbers_total) =
        build_app(&config, store.clone(), clock, commits.progress())?;
    // First, so /healthz answers and /readyz says why not during a long
    // recovery.
    let ops = spawn_ops(&app, &config)?;
    // Before recovery: its expiries' commits release numbers and wake the
    // webhook driver through the consumer like any other commit.
    let consumer = crate::runtime::commits::spawn(app.clone(), commits)?;
    // Also starts the expiry thread, and returns once what expired while
    // the service was down is expired.
    recover(&app)?;
    // Before any listener or SIP socket: no number the lost tail may have
    // leased is issued from the first create on.
    let held = match serve.promoted {
        true => Some(promote(&app, &config, serve.lost_until)?),
        false => None,
    };
    if config.storage.replication == ReplicationMode::Litestream {
        let r = app.metrics.replication.clone();
        heartbeat::spawn(store.clone(), app.clock.clone(), app.stop.clone(), r)?;
    }
    app.readiness.recovered.store(true, Ordering::Release);
    // After recovery, whose expiries queued their wakes: the driver's first
    // poll also finds every delivery that was due while the service was down.
    crate::webhooks::spawn(Arc::new(app.webhooks()), webhook_wakes)?;
    // After recovery too: a call must find its restored lease.
    let sip = crate::sip::spawn(&Arc::new(app.sip()), &config)?;
    let (https, http) = spawn_web(&app, &config)?;
    Ok(Running {
        app,
        store,
        consumer,
        listeners: Listeners {
            https,
            http,
            ops,
            sip,
        },
        config,
        config_path,
        hup: Arc::new(AtomicBool::new(false)),
        workers,
        numbers_total,
        held,
    })
}

impl Running {
    /// The bound HTTPS address (the configured port may be 0).
    pub fn https_addr(&self) -> SocketAddr {
        self.listeners.https.addr
    }

    /// The line `serve` prints on stdout once it takes requests.
    pub fn ready_line(&self) -> String {
        ready_line(&self.listeners)
    }

    /// Setting it stops the service gracefully.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.app.stop.clone()
    }

    /// Setting it reloads the configuration file, as SIGHUP does.
    pub fn reload_flag(&self) -> Arc<AtomicBool> {
        self.hup.clone()
    }

    /// Announces readiness, runs the control loop until the stop flag is
    /// set, then stops gracefully.
    pub fn serve(self) -> Result<()> {
        let Running {
            app,
            store,
            consumer,
            listeners,
            config,
            config_path,
            hup,
            workers,
            numbers_total,
            mut held,
        } = self;
        announce_ready(&app, &config, &listeners, workers, numbers_total)?;
        control_loop(&app, config_path.as_deref(), &hup, &mut held);
        stop(&config, listeners, &store, &app);
        if consumer.join().is_err() {
            tracing::error!("the commit consumer panicked");
        }
        tracing::info!(counters = %app.metrics.render().replace('\n', " "), "stopped");
        Ok(())
    }
}

/// Opens the database with its commit events going to the one consumer.
/// Fail points come from `DIALPROOF_FAILPOINTS`, an operator's fault
/// injection switch (tools/deploy/README.md, "Fault drills"), not a test hook.
fn open_store(config: &Config) -> Result<(Store, CommitReceiver)> {
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
    Ok((store, commits))
}

/// Number health as stored: the numbers' runs and the quarantines, which
/// the lease table withholds from the start.
fn restored_health(store: &Store) -> Result<NumberHealth> {
    let read = store.read_within(Duration::from_secs(30), |r| {
        Ok((r.number_runs()?, r.number_quarantines()?))
    });
    match read {
        Outcome::Done((rows, quarantines)) => Ok(NumberHealth::restored(rows, quarantines)),
        other => anyhow::bail!("loading number health: {other}"),
    }
}

/// Every shared handle, with the lease table built from the configuration
/// and the dedicated numbers; also the webhook driver's wake queue and the
/// count of configured numbers (for the READY log line).
fn build_app(
    config: &Config,
    store: Store,
    clock: Clock,
    commits: Arc<CommitProgress>,
) -> Result<(
    Arc<App>,
    crossbeam_channel::Receiver<crate::webhooks::waker::Wake>,
    usize,
)> {
    let keys = KeyCache::new(store.clone());
    keys.reload()
        .map_err(|e| anyhow::anyhow!("loading keys: {e}"))?;
    // No SIP line state is known yet: each line starts as its mode says.
    let health = restored_health(&store)?;
    let table = build_table(
        config,
        &keys.dedicated_numbers(),
        &Default::default(),
        &health.withheld(),
    )?;
    // From the table, not `config.numbers()`: expanding a million numbers a
    // second time only to count them costs ~80 MB of short-lived strings,
    // which the allocator keeps resident.
    let numbers_total: usize = table.stats().iter().map(|s| s.total).sum();
    let (webhook_waker, webhook_wakes) = crate::webhooks::waker::channel();
    let offload = Offload::start()?;
    // Once, here: opening one migrates the schema, so never per request.
    let admin = AdminConn::open(&config.database_path(), offload.clone())
        .map_err(|e| anyhow::anyhow!("opening the operator connection: {e}"))?;
    let app = Arc::new(App {
        store,
        leases: Arc::new(Leases::new(table)),
        keys: Arc::new(keys),
        limiters: Default::default(),
        key_uses: Default::default(),
        // The system resolver; an in-process test would hand in its own.
        resolver: Resolver::start(Arc::new(resolve::System))?,
        offload,
        admin,
        expiries: Default::default(),
        clock,
        metrics: Default::default(),
        config: Arc::new(RwLock::new(Arc::new(config.clone()))),
        stop: Arc::new(AtomicBool::new(false)),
        webhook_waker,
        sip_lines: Default::default(),
        sip_stats: Default::default(),
        readiness: Default::default(),
        fence: Default::default(),
        held: Default::default(),
        commits,
        idempotency: IdempotencyKeys::new(config.api.idempotency_key_hours()),
        health: Arc::new(health),
    });
    Ok((app, webhook_wakes, numbers_total))
}

/// The operators' listener, when `[server] ops_listen` is set.
fn spawn_ops(app: &App, config: &Config) -> Result<Option<SocketAddr>> {
    let Some(addr) = config.server.ops_listen else {
        return Ok(None);
    };
    let ops = app.ops();
    let listening = listener::spawn_plain(
        addr,
        http::Limits::default(),
        Arc::new(move |req| crate::ops::handle(&ops, req)),
        app.stop.clone(),
    )
    .with_context(|| format!("binding the ops listener on {addr}"))?;
    Ok(Some(listening.addr))
}

/// The HTTPS listener with the site, and the plain-HTTP redirect listener
/// when `[server] http_listen` is set.
fn spawn_web(app: &App, config: &Config) -> Result<(Listening, Option<Listening>)> {
    let (cert, key) = tls::ensure_certificate(
        config
            .tls
            .cert
            .as_ref()
            .map(|c| config.resolve(c))
            .zip(config.tls.key.as_ref().map(|k| config.resolve(k))),
        &config.data_dir(),
    )?;
    let tls_config = tls::server_config(&cert, &key)?;
    let limits = http::Limits {
        idle_timeout: config.server.idle_timeout(),
        ..http::Limits::default()
    };
    let site = app.site();
    let https = listener::spawn_https(
        config.server.https_listen,
        tls_config,
        limits,
        Arc::new(move |req| site::handle(&site, req)),
        app.stop.clone(),
    )
    .with_context(|| format!("binding HTTPS on {}", config.server.https_listen))?;
    let public_port = config.server.public_https_port.unwrap_or(https.addr.port());
    let http = match config.server.http_listen {
        Some(addr) => Some(
            listener::spawn_plain(
                addr,
                limits,
                Arc::new(move |req| redirect::redirect(req, public_port)),
                app.stop.clone(),
            )
            .with_context(|| format!("binding HTTP on {addr}"))?,
        ),
        None => None,
    };
    Ok((https, http))
}

/// `READY https=... [http=...] [sip=...] [ops=...]`: the bound addresses.
fn ready_line(l: &Listeners) -> String {
    let mut ready = format!("READY https={}", l.https.addr);
    if let Some(h) = l.http.as_ref().map(|h| h.addr) {
        ready.push_str(&format!(" http={h}"));
    }
    if let Some(s) = &l.sip {
        ready.push_str(&format!(" sip={}", s.addr));
    }
    if let Some(o) = l.ops {
        ready.push_str(&format!(" ops={o}"));
    }
    ready
}

/// Logs the start and prints the machine-readable READY line on stdout
/// (tests and scripts wait for it; with port 0 in the configuration it is
/// the only way to learn the ports).
fn announce_ready(
    app: &App,
    config: &Config,
    l: &Listeners,
    workers: usize,
    numbers: usize,
) -> Result<()> {
    let http_addr = l.http.as_ref().map(|h| h.addr);
    let http_shown = http_addr.map_or_else(|| "off".to_owned(), |a| a.to_string());
    tracing::info!(https = %l.https.addr, http = %http_shown, workers, numbers,
        database = %config.database_path().display(), "dialproof ready");
    let ready = ready_line(l);
    app.readiness.listening.store(true, Ordering::Release);
    let mut out = std::io::stdout().lock();
    writeln!(out, "{ready}")?;
    out.flush()?;
    Ok(())
}

/// A graceful stop, in order: the web listeners drain, the SIP lines
/// unregister, keys' last uses and number health's counts since the last
/// tick are written, the writer commits what it holds. The commit consumer
/// ends after the writer's last batch.
fn stop(config: &Config, listeners: Listeners, store: &Store, app: &App) {
    let web: Vec<_> = std::iter::once(listeners.https)
        .chain(listeners.http)
        .collect();
    drain(&web, config.server.shutdown_timeout());
    if let Some(sip) = &listeners.sip {
        tracing::info!("stopping: unregistering sip lines");
        sip.join();
    }
    // After the last request: every use it noted goes with the final write.
    let keys = app.key_uses.flush(store);
    app.health.sync(store);
    tracing::info!(keys_last_used = keys, "stopping: draining the writer");
    store.shutdown();
}

/// The first step of a graceful stop: no new connections, and every request
/// in progress answered (its connection closed after it), waiting at most
/// `timeout`; what is still open then is cut when the process exits.
fn drain(listeners: &[Listening], timeout: Duration) {
    let started = std::time::Instant::now();
    for l in listeners {
        l.stop_accepting();
    }
    let open = |ls: &[Listening]| ls.iter().map(|l| l.open_connections()).sum::<usize>();
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
