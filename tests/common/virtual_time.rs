//! The service inside the test process, on a virtual clock.
//!
//! Tests of timeouts, retries and expiry (a TTL, the one-minute rate window,
//! the 300 s temporary block) should not sleep through them. The service
//! takes every moment a decision uses from one injected clock
//! (`dialproof::shared::clock::Clock`); here that clock reads a
//! [`VirtualClock`] the test moves forward, and the service runs in a thread
//! of the test process, spoken to over HTTPS like the binary. Threads that
//! wait for a moment (the expiry thread, the webhook driver) look at the
//! clock at least every half second, so a jump is acted on within about
//! that.
//!
//! The operator CLI still runs as the real binary against the same
//! database; the service sees its changes through its control loop.

use super::Server;
use dialproof::runtime::service;
use dialproof::shared::clock::Clock;
use dialproof_engine::time::UnixMillis;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// A clock that stands still until the test moves it.
#[derive(Clone)]
pub struct VirtualClock {
    ms: Arc<AtomicI64>,
}

impl VirtualClock {
    /// Starts at the real time now, so stored moments look ordinary.
    pub fn new() -> VirtualClock {
        VirtualClock {
            ms: Arc::new(AtomicI64::new(super::now_millis())),
        }
    }

    pub fn now_millis(&self) -> i64 {
        self.ms.load(Ordering::SeqCst)
    }

    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        let ms = i64::try_from(d.as_millis()).expect("a test's step fits");
        self.ms.fetch_add(ms, Ordering::SeqCst);
    }

    fn clock(&self) -> Clock {
        let ms = self.ms.clone();
        Clock::from_fn(move || UnixMillis(ms.load(Ordering::SeqCst)))
    }
}

/// A service running in a thread of the test process.
pub struct InProcess {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Result<(), String>>,
}

impl InProcess {
    /// A graceful stop, as SIGTERM would do it; panics if serving failed.
    pub fn stop(self) {
        self.stop.store(true, Ordering::Release);
        match self.thread.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => panic!("in-process service failed: {e}"),
            Err(_) if std::thread::panicking() => {}
            Err(_) => panic!("in-process service panicked"),
        }
    }
}

impl Server {
    /// A [`Server::prepare`]d server started in this process on `clock`.
    pub fn launch_in_process(&mut self, clock: &VirtualClock) {
        assert!(self.in_process.is_none(), "already running in process");
        let running = service::start(
            Some(self.config_path.clone()),
            clock.clock(),
            &Default::default(),
        )
        .unwrap_or_else(|e| panic!("in-process start failed: {e:#}"));
        self.https = running.https_addr();
        self.tls = super::client_config(&self.data_dir.join("tls").join("cert.pem"));
        let stop = running.stop_flag();
        let thread = std::thread::Builder::new()
            .name("in-process-service".into())
            .spawn(move || running.serve().map_err(|e| format!("{e:#}")))
            .expect("spawning the service thread");
        self.in_process = Some(InProcess { stop, thread });
    }

    /// A graceful stop of the in-process service, then a start on the
    /// same configuration, data and clock (recovery runs as after any
    /// restart).
    pub fn restart_in_process(&mut self, clock: &VirtualClock) {
        if let Some(running) = self.in_process.take() {
            running.stop();
        }
        self.launch_in_process(clock);
    }

    /// Stops the in-process service gracefully.
    pub fn stop_in_process(&mut self) {
        self.in_process.take().expect("running in process").stop();
    }

    /// Like [`Server::start`], in this process, on a new virtual clock.
    pub fn start_virtual(config_extra: &str) -> (Server, VirtualClock) {
        let clock = VirtualClock::new();
        let mut server = Server::prepare(config_extra);
        server.launch_in_process(&clock);
        (server, clock)
    }
}
