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
//! database; the service sees its changes through its control loop. The
//! service's log lines (and any panic in the process) go into the server's
//! log buffer, as a child's stderr does; [`Server::reload`] stands for
//! SIGHUP.
//!
//! Not for: what only the binary shows (signals, exit statuses, its stdout
//! and stderr as a process): those tests start it ([`super::server`]).

use super::Server;
use dialproof::runtime::service;
use dialproof::shared::clock::Clock;
use dialproof_engine::time::UnixMillis;
use dialproof_kit::process::{Log, STDOUT_MARK};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Once};
use std::thread::JoinHandle;
use std::time::Duration;

/// A clock the test moves forward: one that stands still in between
/// ([`VirtualClock::new`]), or one that runs with real time and jumps
/// ([`VirtualClock::flowing`]: a retry 1 s later still comes 1 s later,
/// but a 30 s TTL is skipped).
#[derive(Clone)]
pub struct VirtualClock {
    /// Standing: the time. Flowing: how far it is ahead of real time.
    ms: Arc<AtomicI64>,
    flows: bool,
    /// Milliseconds a standing clock moves at each reading
    /// ([`VirtualClock::ticking`]); 0 for the others.
    tick: i64,
}

impl VirtualClock {
    /// Starts at the real time now, so stored moments look ordinary, and
    /// stands still until [`VirtualClock::advance`].
    pub fn new() -> VirtualClock {
        VirtualClock {
            ms: Arc::new(AtomicI64::new(super::now_millis())),
            flows: false,
            tick: 0,
        }
    }

    /// Starts at the real time now and moves `step` at every reading: two
    /// readings of any part of the service are at least `step` apart (an
    /// inbound datagram's wait in the SIP queue, for one). Other moments
    /// race ahead with it, so a test on it asks only what no TTL or
    /// window decides.
    pub fn ticking(step: Duration) -> VirtualClock {
        VirtualClock {
            ms: Arc::new(AtomicI64::new(super::now_millis())),
            flows: false,
            tick: i64::try_from(step.as_millis()).expect("a test's step fits"),
        }
    }

    /// Runs with real time, and [`VirtualClock::advance`] jumps ahead.
    pub fn flowing() -> VirtualClock {
        VirtualClock {
            ms: Arc::new(AtomicI64::new(0)),
            flows: true,
            tick: 0,
        }
    }

    pub fn now_millis(&self) -> i64 {
        read(&self.ms, self.flows, self.tick)
    }

    /// How far this clock is ahead of real time: add it to a moment taken
    /// on the real clock (a receiver's arrival) to compare it with the
    /// service's moments.
    pub fn ahead_ms(&self) -> i64 {
        self.now_millis() - super::now_millis()
    }

    /// Moves the clock forward to `ms` (Unix milliseconds); never back.
    pub fn advance_to(&self, ms: i64) {
        let step = u64::try_from(ms - self.now_millis()).unwrap_or(0);
        self.advance(Duration::from_millis(step));
    }

    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        let ms = i64::try_from(d.as_millis()).expect("a test's step fits");
        self.ms.fetch_add(ms, Ordering::SeqCst);
    }

    fn clock(&self) -> Clock {
        let (ms, flows, tick) = (self.ms.clone(), self.flows, self.tick);
        Clock::from_fn(move || UnixMillis(read(&ms, flows, tick)))
    }
}

fn read(ms: &AtomicI64, flows: bool, tick: i64) -> i64 {
    let v = if tick == 0 {
        ms.load(Ordering::SeqCst)
    } else {
        ms.fetch_add(tick, Ordering::SeqCst)
    };
    if flows {
        super::now_millis() + v
    } else {
        v
    }
}

/// A service running in a thread of the test process.
pub struct InProcess {
    stop: Arc<AtomicBool>,
    pub(super) reload: Arc<AtomicBool>,
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
        // What `serve` prints on stdout, where a child's READY line would
        // be (`sip=` and `ops=` are read from it).
        let ready = running.ready_line();
        self.log.push(&format!("{STDOUT_MARK}{ready}"));
        self.tls = super::trust_certificate(&self.data_dir);
        let stop = running.stop_flag();
        let reload = running.reload_flag();
        capture_logs(self.log.clone());
        let thread = std::thread::Builder::new()
            .name("in-process-service".into())
            .spawn(move || running.serve().map_err(|e| format!("{e:#}")))
            .expect("spawning the service thread");
        self.in_process = Some(InProcess {
            stop,
            reload,
            thread,
        });
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

    /// Like [`Server::start`], in this process, on a clock that runs with
    /// real time and that the test can move ahead ([`VirtualClock::flowing`]).
    pub fn start_flowing(config_extra: &str) -> (Server, VirtualClock) {
        let clock = VirtualClock::flowing();
        let mut server = Server::prepare(config_extra);
        server.launch_in_process(&clock);
        (server, clock)
    }
}

/// Where the in-process service's log lines go: the buffer of the first
/// server launched in this process (nextest runs every test in a process
/// of its own). Panics of any thread are recorded there too.
fn capture_logs(logs: Log) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let writer = LogWriter(logs.clone());
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new("info,may=warn"))
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .with_target(false)
            .try_init();
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let thread = std::thread::current().name().unwrap_or("?").to_owned();
            logs.push(&format!("thread '{thread}' panicked: {info}"));
            previous(info);
        }));
    });
}

#[derive(Clone)]
struct LogWriter(Log);

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.append(&String::from_utf8_lossy(buf));
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
