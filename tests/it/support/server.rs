//! The server under test: the real `dialproof` binary on ephemeral ports
//! (`127.0.0.1:0`) with its data in a fresh temporary directory, started
//! through the kit ([`dialproof_kit::process`]) and found again from its
//! READY line. Its stdout (`[stdout] ...`) and stderr lines, and the
//! harness's own notes (`[harness] ...`), are kept in one log that
//! survives restarts and is printed when a test fails.
//!
//! Not for: talking to it (see [`super::requests`] and
//! [`super::operator`]), or running it in the test's own process (see
//! [`super::virtual_time`]).

use super::virtual_time;
use dialproof_kit::process::{Log, Running, Stderr};
use dialproof_kit::ready::Ready;
use dialproof_kit::tls::{self, Trust};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::Arc;
use std::time::Duration;

pub const BIN: &str = env!("CARGO_BIN_EXE_dialproof");

/// How long a server may take to print its READY line.
pub const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a server may take to exit after SIGTERM.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(20);

pub struct Server {
    pub dir: tempfile::TempDir,
    pub config_path: PathBuf,
    pub data_dir: PathBuf,
    pub https: SocketAddr,
    pub http: Option<SocketAddr>,
    process: Option<Running>,
    pub(super) log: Log,
    pub(super) tls: Arc<rustls::ClientConfig>,
    /// Extra environment of the server process (e.g. fail points).
    env: Vec<(String, String)>,
    /// The service running inside this test process instead of a child
    /// (see `virtual_time`).
    pub(super) in_process: Option<virtual_time::InProcess>,
    /// Extra arguments after `serve` (e.g. `--promoted`).
    serve_args: Vec<String>,
    /// A supervisor that runs the service as its child, given the service's
    /// command line as its last argument (`litestream replicate -exec`).
    supervisor: Option<Vec<String>>,
}

impl Server {
    /// Starts a server whose config is the test header (ephemeral ports,
    /// data under a fresh temp dir) followed by `config_extra` (e.g.
    /// [`super::pools`]).
    pub fn start(config_extra: &str) -> Server {
        let mut server = Server::prepare(config_extra);
        server.launch();
        server
    }

    /// A server with one always-up line of `domestic` + `international`
    /// numbers.
    pub fn with_pools(domestic: u64, international: u64) -> Server {
        Server::start(&super::pools(domestic, international))
    }

    /// Like [`Server::start`] but does not start the process, so a test can
    /// run operator commands first; then call [`Server::launch`].
    pub fn prepare(config_extra: &str) -> Server {
        let dir = tempfile::Builder::new()
            .prefix("dialproof-test-")
            .tempdir()
            .expect("temp dir");
        let data_dir = dir.path().join("data");
        let config_path = dir.path().join("dialproof.toml");
        let config = format!(
            "[server]\nhttps_listen = \"127.0.0.1:0\"\nhttp_listen = \"127.0.0.1:0\"\nworkers = 2\n\n\
             [storage]\ndata_dir = {:?}\n\n{config_extra}",
            data_dir.to_str().expect("utf-8 temp path")
        );
        std::fs::write(&config_path, config).expect("writing config");
        Server {
            dir,
            config_path,
            data_dir,
            https: "127.0.0.1:0".parse().expect("an address"),
            http: None,
            process: None,
            log: Log::new(),
            // Trusts nothing until the server has made its certificate.
            tls: tls::client_config(Trust::Roots(&[])).expect("TLS settings"),
            env: Vec::new(),
            in_process: None,
            serve_args: Vec::new(),
            supervisor: None,
        }
    }

    /// Sets an environment variable of the server process from its next
    /// start on (`DIALPROOF_FAILPOINTS`, for one).
    pub fn set_env(&mut self, key: &str, value: &str) {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.to_owned(), value.to_owned()));
    }

    /// Extra arguments after `serve` from the next start on.
    pub fn set_serve_args(&mut self, args: &[&str]) {
        self.serve_args = args.iter().map(|a| a.to_string()).collect();
    }

    /// Runs the service under `program args... "<service command line>"`
    /// from the next start on. Killing the server then kills the supervisor
    /// and its children, supervisor first.
    pub fn set_supervisor(&mut self, program_and_args: &[&str]) {
        self.supervisor = Some(program_and_args.iter().map(|a| a.to_string()).collect());
    }

    /// Starts the process of a [`Server::prepare`]d server.
    pub fn launch(&mut self) {
        self.spawn();
    }

    /// `dialproof --config F serve ARGS`, or the supervisor with that
    /// command line as its last argument.
    fn command(&self) -> Command {
        let Some(supervisor) = &self.supervisor else {
            let mut c = Command::new(BIN);
            c.arg("--config")
                .arg(&self.config_path)
                .arg("serve")
                .args(&self.serve_args);
            return c;
        };
        let mut line = format!(
            "{BIN} --config {} serve",
            self.config_path.to_str().expect("utf-8 temp path")
        );
        for a in &self.serve_args {
            line.push(' ');
            line.push_str(a);
        }
        let mut c = Command::new(&supervisor[0]);
        c.args(&supervisor[1..]).arg(line);
        c
    }

    fn spawn(&mut self) {
        assert!(self.process.is_none(), "server already running");
        self.log.push("[harness] starting server");
        let mut command = self.command();
        command
            .env("NO_COLOR", "1")
            .env("DIALPROOF_LOG", "info,may=warn")
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        let process = Running::spawn(&mut command, &self.log, Stderr::Log, READY_TIMEOUT)
            .unwrap_or_else(|e| {
                // The last stderr lines may still be on their way.
                std::thread::sleep(Duration::from_millis(100));
                panic!("server did not start: {e}; logs:\n{}", self.logs())
            });
        let ready = process.ready();
        self.https = ready
            .https()
            .unwrap_or_else(|| panic!("no https= in {:?}", ready.line));
        self.http = ready.http();
        self.process = Some(process);
        self.tls = trust_certificate(&self.data_dir);
    }

    /// Reloads the configuration file: SIGHUP to the child, or the same
    /// flag set in process.
    pub fn reload(&self) {
        if let Some(p) = &self.in_process {
            p.reload.store(true, std::sync::atomic::Ordering::Release);
            return;
        }
        self.running().signal("HUP").expect("sending SIGHUP");
    }

    /// The server process's id.
    pub fn pid(&self) -> u32 {
        self.running().pid()
    }

    fn running(&self) -> &Running {
        self.process.as_ref().expect("server is running")
    }

    /// SIGKILL: no shutdown of any kind (and the same to a supervisor's
    /// children).
    pub fn kill(&mut self) {
        self.log.push("[harness] SIGKILL");
        let mut process = self.process.take().expect("server was not running");
        process.kill().expect("killing the server");
    }

    /// SIGTERM, then waits (bounded) for the exit; returns the exit status.
    pub fn stop(&mut self) -> ExitStatus {
        let mut process = self.process.take().expect("server was not running");
        self.log.push("[harness] SIGTERM");
        process
            .terminate(STOP_TIMEOUT)
            .unwrap_or_else(|e| panic!("server did not stop: {e}; logs:\n{}", self.logs()))
    }

    /// Starts the server again on the same config and data directory (after
    /// [`Server::kill`] or [`Server::stop`]; stops it first if running).
    pub fn restart(&mut self) {
        if self.process.is_some() {
            self.stop();
        }
        self.spawn();
    }

    pub fn is_running(&mut self) -> bool {
        match &mut self.process {
            Some(p) => p.try_wait().expect("try_wait").is_none(),
            None => false,
        }
    }

    /// Everything the server printed so far (stdout lines prefixed
    /// `[stdout] `, stderr with ANSI escapes removed).
    pub fn logs(&self) -> String {
        self.log.text()
    }

    /// Polls the log until a line satisfies `pred` or `timeout` ends.
    pub fn wait_for_log(&self, timeout: Duration, pred: impl Fn(&str) -> bool) -> Option<String> {
        self.log.wait_for(timeout, pred)
    }

    /// The READY lines of every start so far, oldest first (a restart on
    /// port 0 binds new ports, and the harness learns of each start only
    /// through its line).
    pub fn ready_lines(&self) -> Vec<Ready> {
        self.log.ready_lines()
    }

    /// The `ops=` address of the `nth` start's READY line (the first is 1).
    pub fn ops_addr(&self, nth: usize) -> SocketAddr {
        let lines = self.ready_lines();
        let ready = lines
            .get(nth - 1)
            .unwrap_or_else(|| panic!("no READY line {nth}:\n{}", self.logs()));
        ready
            .ops()
            .unwrap_or_else(|| panic!("no ops= in {:?}", ready.line))
    }

    /// The READY line of the latest start.
    pub fn ready(&self) -> Ready {
        let lines = self.ready_lines();
        lines
            .last()
            .cloned()
            .unwrap_or_else(|| panic!("no READY line in:\n{}", self.logs()))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Dropping the process kills it (and a supervisor's children).
        drop(self.process.take());
        if let Some(running) = self.in_process.take() {
            running.stop();
        }
        if std::thread::panicking() {
            eprintln!("---- server logs ----\n{}---- end ----", self.logs());
        }
    }
}

/// Client settings that trust the certificate the server generated in
/// `data_dir` (and nothing else).
pub fn trust_certificate(data_dir: &Path) -> Arc<rustls::ClientConfig> {
    let cert = data_dir.join("tls").join("cert.pem");
    tls::client_config(Trust::CaFile(&cert))
        .unwrap_or_else(|e| panic!("trusting {}: {e}", cert.display()))
}

/// A [`Server::prepare`]d server with one domestic number whose `[server]`
/// table also has `extra` (a setting the harness's header does not write).
pub fn prepare_with_server_setting(extra: &str) -> Server {
    let s = Server::prepare(&super::pools(1, 0));
    let config = std::fs::read_to_string(&s.config_path).expect("reading config");
    let patched = config.replacen("workers = 2\n", &format!("workers = 2\n{extra}\n"), 1);
    assert_ne!(
        config, patched,
        "the harness header has no `workers = 2` line"
    );
    std::fs::write(&s.config_path, patched).expect("writing config");
    s
}

/// Like [`prepare_with_server_setting`], started.
pub fn start_with_server_setting(extra: &str) -> Server {
    let mut s = prepare_with_server_setting(extra);
    s.launch();
    s
}

// Automatic failover's nodes (tests/it/ha/): `dialproof ha` as a child.
impl Server {
    /// Starts `dialproof --config F ha` in a process group of its own
    /// (so a test can kill the whole node, as when its machine dies) and
    /// returns at once: a standby prints a READY line only once promoted.
    /// Its output goes to this server's log; see [`Server::follow_ready`].
    pub fn launch_ha(&mut self) -> std::process::Child {
        use std::io::BufRead;
        use std::os::unix::process::CommandExt;
        use std::process::Stdio;
        self.log.push("[harness] starting dialproof ha");
        let mut child = Command::new(BIN)
            .arg("--config")
            .arg(&self.config_path)
            .arg("ha")
            .env("NO_COLOR", "1")
            .env("DIALPROOF_LOG", "info,may=warn")
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting dialproof ha");
        let out = child.stdout.take().expect("stdout piped");
        let err = child.stderr.take().expect("stderr piped");
        let log = self.log.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                log.push(&format!("{}{line}", dialproof_kit::process::STDOUT_MARK));
            }
        });
        let log = self.log.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
                log.push(&dialproof_kit::process::strip_ansi(&line));
            }
        });
        child
    }

    /// Points the requests at the newest READY line's addresses (a
    /// promoted node's service) and trusts its certificate; false if
    /// there is no READY line yet.
    pub fn follow_ready(&mut self) -> bool {
        let Some(ready) = self.ready_lines().pop() else {
            return false;
        };
        let Some(https) = ready.https() else {
            return false;
        };
        self.https = https;
        self.http = ready.http();
        self.tls = trust_certificate(&self.data_dir);
        true
    }
}
