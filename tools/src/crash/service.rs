//! The service under test for the crash harness: its configuration (fixed
//! loopback ports, so clients find it again after each restart), starting
//! it and waiting for READY, SIGKILL, and a graceful stop at the end.
//!
//! Not for: what is sent to it (`super::load`) or checked (`super::ledger`).

use anyhow::{bail, Context, Result};
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a start may take to print READY.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// First number of the line's range.
const NUMBERS_START: u64 = 74_950_000_000;

pub struct Service {
    bin: PathBuf,
    pub config: PathBuf,
    pub data: PathBuf,
    pub https: SocketAddr,
    pub sip: SocketAddr,
    log: PathBuf,
    child: Option<Child>,
}

/// A free loopback port for TCP and one for UDP (bound and let go: the
/// service binds them again at each start).
fn free_ports() -> Result<(u16, u16)> {
    let tcp = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let udp = UdpSocket::bind("127.0.0.1:0")?.local_addr()?.port();
    Ok((tcp, udp))
}

impl Service {
    /// Writes the configuration under `dir`: `numbers` domestic numbers on
    /// one always-up line taking INVITEs from loopback, and a fast webhook
    /// retry schedule so deliveries interrupted by a kill come again within
    /// seconds.
    pub fn prepare(bin: &Path, dir: &Path, numbers: u32) -> Result<Service> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let data = dir.join("data");
        let (https_port, sip_port) = free_ports()?;
        let config = format!(
            "[server]\nhttps_listen = \"127.0.0.1:{https_port}\"\nworkers = 2\nshutdown_timeout_seconds = 5\n\n\
             [storage]\ndata_dir = {data:?}\n\n\
             [sip]\nlisten = \"127.0.0.1:{sip_port}\"\n\n\
             [webhooks]\nretry_schedule_seconds = [0, 1, 1, 2, 2, 2, 2, 2]\njitter_percent = 0\n\n\
             [[lines]]\nname = \"crash\"\nmode = \"always_up\"\nprovider_addresses = [\"127.0.0.1\"]\n\
             numbers = [ {{ range_start = \"+{NUMBERS_START}\", count = {numbers}, pool = \"domestic\" }} ]\n"
        );
        let path = dir.join("dialproof.toml");
        std::fs::write(&path, config).context("writing the config")?;
        Ok(Service {
            bin: bin.to_path_buf(),
            config: path,
            https: SocketAddr::from(([127, 0, 0, 1], https_port)),
            sip: SocketAddr::from(([127, 0, 0, 1], sip_port)),
            log: dir.join("service.log"),
            data,
            child: None,
        })
    }

    /// The certificate the service generated on its first start.
    pub fn cert(&self) -> PathBuf {
        self.data.join("tls").join("cert.pem")
    }

    pub fn database(&self) -> PathBuf {
        self.data.join("dialproof.db")
    }

    /// The service's stderr of every start so far.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// Starts `serve` and waits for READY; returns how long that took.
    pub fn start(&mut self) -> Result<Duration> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .context("opening the service log")?;
        let started = Instant::now();
        let mut child = Command::new(&self.bin)
            .arg("--config")
            .arg(&self.config)
            .arg("serve")
            .env("NO_COLOR", "1")
            .env("DIALPROOF_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .with_context(|| format!("spawning {}", self.bin.display()))?;
        let stdout = child.stdout.take().context("no stdout")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            // Read to the end so the service never blocks on a full pipe.
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.starts_with("READY ") {
                    let _ = tx.send(());
                }
            }
        });
        self.child = Some(child);
        if rx.recv_timeout(READY_TIMEOUT).is_err() {
            self.kill();
            bail!(
                "no READY within {READY_TIMEOUT:?}; see {}",
                self.log.display()
            );
        }
        Ok(started.elapsed())
    }

    /// The operator CLI: `dialproof --config F --json ARGS`.
    pub fn cli(&self, args: &[&str]) -> Result<serde_json::Value> {
        let out = Command::new(&self.bin)
            .arg("--config")
            .arg(&self.config)
            .arg("--json")
            .args(args)
            .stdin(Stdio::null())
            .output()
            .context("running the dialproof CLI")?;
        if !out.status.success() {
            bail!(
                "dialproof {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines()
            .rev()
            .find_map(|l| serde_json::from_str(l.trim()).ok())
            .with_context(|| format!("dialproof {args:?} printed no JSON: {text}"))
    }

    /// SIGKILL: no shutdown of any kind.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM and a bounded wait for the exit.
    pub fn stop(&mut self) -> Result<()> {
        let Some(mut c) = self.child.take() else {
            return Ok(());
        };
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(c.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if c.try_wait()?.is_some() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = c.kill();
        let _ = c.wait();
        bail!("the service did not stop within 20 s of SIGTERM")
    }

    /// Whether the process is still alive (it should be while up).
    pub fn is_running(&mut self) -> bool {
        match &mut self.child {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.kill();
    }
}
