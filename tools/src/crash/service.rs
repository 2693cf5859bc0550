//! The service under test for the crash harness: its configuration (fixed
//! loopback ports, so clients find it again after each restart), starting
//! it and waiting for READY, SIGKILL, and a graceful stop at the end.
//!
//! Not for: what is sent to it (`super::load`) or checked (`super::ledger`).

use anyhow::{Context, Result};
use dialproof_kit::cli;
use dialproof_kit::process::{Log, Running, Stderr};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

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
    running: Option<Running>,
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
            running: None,
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
        let mut command = Command::new(&self.bin);
        command
            .arg("--config")
            .arg(&self.config)
            .arg("serve")
            .env("NO_COLOR", "1")
            .env("DIALPROOF_LOG", "warn");
        // Its stdout is only the READY line: kept in memory, nowhere else.
        let running = Running::spawn(&mut command, &Log::new(), Stderr::File(log), READY_TIMEOUT)
            .with_context(|| {
            format!(
                "starting {}; see {}",
                self.bin.display(),
                self.log.display()
            )
        })?;
        let took = running.ready_after();
        self.running = Some(running);
        Ok(took)
    }

    /// The operator CLI: `dialproof --config F --json ARGS`.
    pub fn cli(&self, args: &[&str]) -> Result<serde_json::Value> {
        Ok(cli::run(&self.bin, Some(&self.config), args)?)
    }

    /// SIGKILL: no shutdown of any kind.
    pub fn kill(&mut self) {
        if let Some(mut r) = self.running.take() {
            let _ = r.kill();
        }
    }

    /// SIGTERM and a bounded wait for the exit.
    pub fn stop(&mut self) -> Result<()> {
        let Some(mut r) = self.running.take() else {
            return Ok(());
        };
        r.terminate(Duration::from_secs(20))
            .context("the service did not stop")?;
        Ok(())
    }

    /// Whether the process is still alive (it should be while up).
    pub fn is_running(&mut self) -> bool {
        match &mut self.running {
            Some(r) => matches!(r.try_wait(), Ok(None)),
            None => false,
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.kill();
    }
}
