//! `dialproof ha`: one node of an automatic-failover cluster. etcd elects
//! the primary (the holder of `/dialproof/<cluster>/primary` under a
//! lease), Litestream carries the data (README, "Automatic failover").
//!
//! The supervisor runs the engine's machine (`dialproof_engine::ha`) on
//! the system clock and does what it asks: etcd calls on short-lived
//! threads (the loop never waits on the network, so a fence is never late
//! behind a hanging call), the restore on a thread, the service and
//! Litestream started from this thread (`node`). The service learns the
//! lease's validity on its stdin and fences itself in-process on the
//! word, on the lease running out, or on the supervisor's death
//! (`crate::runtime::ha_child`).
//!
//! Not for: the rules (the engine), the etcd protocol (`etcd`), the
//! processes (`node`), the counters (`metrics`).

mod etcd;
mod metrics;
mod node;

pub use etcd::{deletions, Acquired, Etcd, EtcdError};
pub use metrics::HaMetrics;

use crate::cli::LogFormat;
use crate::shared::clock::Clock;
use crate::shared::config::HaConfig;
use anyhow::{Context, Result};
use crossbeam_channel::{unbounded, Receiver, Sender};
use dialproof_engine::ha::{Action, Event, Ha, HaTiming, Input, LeaseId, Role};
use dialproof_engine::time::UnixMillis;
use node::{Node, Paths};
use std::io::BufRead;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The longest the loop sleeps without looking at the processes.
const LOOP_WAKE: Duration = Duration::from_millis(100);

/// What the loop hears; the promotion's steps carry their term, so a step
/// of an abandoned promotion changes nothing.
enum Msg {
    Ha(Input),
    /// A deletion of the key at this revision.
    Deleted(i64),
    Won(i64),
    Restored(u64, Result<(), String>),
    ServiceReady(u64),
    ServiceFailed(u64, String),
    /// A call whose answer nothing waits for.
    Done,
}

struct Supervisor {
    ha: Ha,
    etcd: Arc<Etcd>,
    node: Arc<Node>,
    tx: Sender<Msg>,
    metrics: Arc<HaMetrics>,
    clock: Clock,
    key: String,
    name: String,
    ttl_seconds: u64,
    /// The promotion under way (or last), for its steps' messages.
    term: u64,
    /// The revision our key was put at: older deletions are not ours.
    won_revision: i64,
    /// The fence deadline the service was last told.
    told: Option<UnixMillis>,
}

/// `dialproof ha` until SIGTERM or SIGINT.
pub fn run(config_path: Option<PathBuf>, log_format: LogFormat) -> Result<()> {
    let (config, _plan) = crate::runtime::preflight::preflight(config_path.as_deref())?;
    let ha: HaConfig = config
        .ha
        .clone()
        .context("`dialproof ha` needs an [ha] section (README, \"Automatic failover\")")?;
    let timing = HaTiming::new(ha.lease_ttl_seconds as i64 * 1000);
    // Half a renewal period: a failed call leaves time for a retry on
    // another member before the fence.
    let call_timeout = Duration::from_millis((timing.renew_every_ms / 2).max(200) as u64);
    let etcd = Arc::new(Etcd::new(&ha.endpoints, call_timeout));
    let metrics = Arc::new(HaMetrics::default());
    if let Some(addr) = ha.metrics_listen {
        let bound = metrics::serve(addr, metrics.clone())
            .with_context(|| format!("binding ha.metrics_listen {addr}"))?;
        tracing::info!(%bound, "ha: metrics listening");
    }
    let litestream = match ha.litestream.components().count() {
        1 => ha.litestream.clone(),
        _ => config.resolve(&ha.litestream),
    };
    let node = Arc::new(Node::new(Paths {
        exe: std::env::current_exe().context("locating this binary")?,
        config: config_path.map(|p| std::fs::canonicalize(&p).unwrap_or(p)),
        log_format: match log_format {
            LogFormat::Text => "text",
            LogFormat::Json => "json",
        },
        db: config.database_path(),
        litestream,
        litestream_config: config.resolve(&ha.litestream_config),
    }));
    let (tx, rx) = unbounded();
    let key = ha.primary_key();
    spawn_watch(etcd.clone(), key.clone(), tx.clone(), timing.retry_ms)?;
    let stop = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGTERM, stop.clone())?;
    signal_hook::flag::register(signal_hook::consts::SIGINT, stop.clone())?;
    let clock = Clock::system();
    tracing::info!(node = %ha.node, cluster = %ha.cluster, key = %key, ttl_ms = timing.ttl_ms,
        margin_ms = timing.margin_ms, "ha: node started as a standby");
    let mut s = Supervisor {
        ha: Ha::new(timing, clock.now()),
        etcd,
        node,
        tx,
        metrics,
        clock,
        key,
        name: ha.node.clone(),
        ttl_seconds: ha.lease_ttl_seconds,
        term: 0,
        won_revision: 0,
        told: None,
    };
    while !stop.load(Ordering::Acquire) {
        s.step();
        s.wait(&rx);
    }
    s.shutdown();
    Ok(())
}

/// Watches the key for good, reconnecting after `retry_ms` when the
/// stream ends.
fn spawn_watch(etcd: Arc<Etcd>, key: String, tx: Sender<Msg>, retry_ms: i64) -> Result<()> {
    std::thread::Builder::new()
        .name("ha-watch".into())
        .spawn(move || loop {
            let why = etcd.watch(&key, |revision| {
                let _ = tx.send(Msg::Deleted(revision));
            });
            tracing::debug!(%why, "ha: watch ended; reconnecting");
            std::thread::sleep(Duration::from_millis(retry_ms as u64));
        })?;
    Ok(())
}

impl Supervisor {
    /// Runs what is due: the processes' health, the machine's actions, its
    /// events, the lease's word to the service and the gauges.
    fn step(&mut self) {
        let now = self.clock.now();
        if self.ha.role() == Role::Primary {
            if let Some(what) = self.node.exited() {
                tracing::error!(
                    what,
                    "ha: a process of the primary exited; handing the key back"
                );
                self.ha.handle(now, Input::ServiceDied);
            }
        }
        while let Some(action) = self.ha.poll(now) {
            self.execute(now, action);
        }
        self.events(now);
        match self.ha.fence_deadline() {
            Some(deadline) if self.told != Some(deadline) => {
                let valid = u64::try_from(deadline.0 - now.0).unwrap_or(0);
                self.node.tell_lease(Duration::from_millis(valid));
                self.told = Some(deadline);
            }
            _ => {}
        }
        self.metrics.set(self.ha.role(), self.ha.lease_age_ms(now));
    }

    /// Sleeps until the machine's next moment or a message, and handles
    /// every message queued.
    fn wait(&mut self, rx: &Receiver<Msg>) {
        let now = self.clock.now();
        let wait = self.ha.next_wakeup().map_or(LOOP_WAKE, |at| {
            Duration::from_millis(u64::try_from(at.0 - now.0).unwrap_or(0)).min(LOOP_WAKE)
        });
        if let Ok(msg) = rx.recv_timeout(wait) {
            self.on(msg);
            while let Ok(msg) = rx.try_recv() {
                self.on(msg);
            }
        }
    }

    fn on(&mut self, msg: Msg) {
        let now = self.clock.now();
        let promoting = self.ha.role() == Role::Promoting;
        match msg {
            Msg::Ha(input) => self.ha.handle(now, input),
            Msg::Deleted(revision) if revision > self.won_revision => {
                self.ha.handle(now, Input::KeyDeleted)
            }
            Msg::Deleted(_) => {}
            Msg::Won(revision) => {
                self.won_revision = revision;
                self.ha.handle(now, Input::ElectionWon);
            }
            Msg::Restored(term, Ok(())) if term == self.term && promoting => self.start_service(),
            Msg::ServiceReady(term) if term == self.term && promoting => {
                match self.node.start_litestream() {
                    Ok(()) => self.ha.handle(now, Input::PromotionFinished),
                    Err(e) => self.promotion_failed(&format!("{e:#}")),
                }
            }
            Msg::Restored(term, Err(e)) | Msg::ServiceFailed(term, e) if term == self.term => {
                self.promotion_failed(&e)
            }
            _ => {}
        }
    }

    fn promotion_failed(&mut self, why: &str) {
        tracing::error!(why, "ha: promotion failed; handing the key back");
        self.ha.handle(self.clock.now(), Input::PromotionFailed);
    }

    /// Starts the restored service and a reader of its stdout that waits
    /// for its READY line (and passes its lines on).
    fn start_service(&mut self) {
        let stdout = match self.node.start_service() {
            Ok(s) => s,
            Err(e) => return self.promotion_failed(&format!("{e:#}")),
        };
        self.told = None;
        let (tx, term) = (self.tx.clone(), self.term);
        let spawned = std::thread::Builder::new()
            .name("ha-service-out".into())
            .spawn(move || {
                let mut ready = false;
                for line in std::io::BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    println!("{line}");
                    if !ready && line.starts_with("READY ") {
                        ready = true;
                        let _ = tx.send(Msg::ServiceReady(term));
                    }
                }
                if !ready {
                    let why = "the service exited before it was ready".to_owned();
                    let _ = tx.send(Msg::ServiceFailed(term, why));
                }
            });
        if let Err(e) = spawned {
            self.promotion_failed(&format!("starting the output reader: {e}"));
        }
    }

    fn execute(&mut self, now: UnixMillis, action: Action) {
        match action {
            Action::GrantLease => {
                let ttl = self.ttl_seconds;
                self.call(move |etcd| match etcd.grant(ttl) {
                    Ok(id) => Msg::Ha(Input::LeaseGranted { id, sent_at: now }),
                    Err(e) => failed("lease grant", e, Input::CallFailed),
                });
            }
            Action::TryAcquire { lease } => {
                let (key, name) = (self.key.clone(), self.name.clone());
                self.call(move |etcd| match etcd.acquire(&key, &name, lease) {
                    Ok(Acquired::Won(revision)) => Msg::Won(revision),
                    Ok(Acquired::HeldBy(holder)) => {
                        tracing::debug!(holder = ?holder, "ha: the key is held; standing by");
                        Msg::Ha(Input::ElectionLost)
                    }
                    Err(e) => failed("campaign", e, Input::CallFailed),
                });
            }
            Action::KeepAlive { lease } => {
                let sent_at = self.clock.now();
                self.call(move |etcd| match etcd.keep_alive(lease) {
                    Ok(Some(_)) => Msg::Ha(Input::Renewed { sent_at }),
                    Ok(None) => Msg::Ha(Input::LeaseGone),
                    Err(e) => failed("keep-alive", e, Input::RenewFailed),
                });
            }
            Action::StartPromotion => self.start_promotion(),
            Action::Fence => {
                self.node.fence();
                tracing::warn!(at = %now.to_rfc3339(), at_ms = now.0, "ha: FENCED: the service refuses writes and \
                    un-registers its lines; Litestream stopped; rejoining as a standby");
            }
            Action::Stop { revoke } => {
                if let Some(lease) = revoke {
                    self.revoke(lease);
                }
                self.ha.handle(now, Input::Stopped);
            }
        }
    }

    fn start_promotion(&mut self) {
        self.term += 1;
        let (node, tx, term) = (self.node.clone(), self.tx.clone(), self.term);
        tracing::info!(term, "ha: restoring the newest replica to promote");
        let spawned = std::thread::Builder::new()
            .name("ha-restore".into())
            .spawn(move || {
                let result = node.restore().map_err(|e| format!("{e:#}"));
                let _ = tx.send(Msg::Restored(term, result));
            });
        if let Err(e) = spawned {
            self.promotion_failed(&format!("starting the restore: {e}"));
        }
    }

    /// One etcd call on a thread of its own; its answer comes back as a
    /// message (every call has a timeout, so one always does).
    fn call(&self, f: impl FnOnce(&Etcd) -> Msg + Send + 'static) {
        let (etcd, tx) = (self.etcd.clone(), self.tx.clone());
        let spawned = std::thread::Builder::new()
            .name("ha-etcd".into())
            .spawn(move || {
                let _ = tx.send(f(&etcd));
            });
        if let Err(e) = spawned {
            // No thread, no call: the machine hears a failure and retries.
            tracing::error!(error = %e, "ha: could not start an etcd call");
            let _ = self.tx.send(Msg::Ha(Input::CallFailed));
            let _ = self.tx.send(Msg::Ha(Input::RenewFailed));
        }
    }

    fn revoke(&self, lease: LeaseId) {
        self.call(move |etcd| {
            if let Err(e) = etcd.revoke(lease) {
                tracing::info!(error = %e, "ha: lease not revoked (it expires by itself)");
            }
            Msg::Done
        });
    }

    fn events(&mut self, now: UnixMillis) {
        let m = &self.metrics;
        for event in self.ha.take_events() {
            match event {
                Event::ElectionWon => {
                    m.elections_won.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(at = %now.to_rfc3339(), at_ms = now.0, "ha: election won");
                }
                Event::ElectionLost => {
                    m.elections_lost.fetch_add(1, Ordering::Relaxed);
                }
                Event::Promoted { took_ms } => {
                    m.promotions.fetch_add(1, Ordering::Relaxed);
                    m.promote_ms_last.store(took_ms, Ordering::Relaxed);
                    tracing::info!(at = %now.to_rfc3339(), at_ms = now.0, took_ms, "ha: PROMOTED: serving as the primary");
                }
                Event::Fenced { lease_age_ms } => {
                    m.fences.fetch_add(1, Ordering::Relaxed);
                    m.fenced_at_ms.store(now.0, Ordering::Relaxed);
                    tracing::warn!(lease_age_ms, "ha: the lease is in doubt; fencing");
                }
            }
        }
    }

    /// A planned stop: the service refuses writes and drains, Litestream
    /// syncs a last time, and the key is handed back.
    fn shutdown(&self) {
        tracing::info!(role = metrics::role_name(self.ha.role()), "ha: stopping");
        self.node.shutdown();
        if let Some(lease) = self.ha.held_lease() {
            if let Err(e) = self.etcd.revoke(lease) {
                tracing::info!(error = %e, "ha: lease not revoked (it expires by itself)");
            }
        }
    }
}

fn failed(what: &str, e: EtcdError, input: Input) -> Msg {
    tracing::warn!(what, error = %e, "ha: etcd call failed");
    Msg::Ha(input)
}
