//! The processes one node of `dialproof ha` runs while it holds the key:
//! the service (`serve --promoted --ha-child`, its stdin the lease's
//! channel) and `litestream replicate`; and the restore before them.
//!
//! Both are started from the supervisor's main thread under `setpriv
//! --pdeathsig`, so they end with the supervisor (the kernel signals on
//! the death of the thread that started them): the service gets SIGTERM
//! (and has already fenced itself on its closed stdin), Litestream
//! SIGKILL, so a dead supervisor's Litestream never writes to the replica
//! beside the next primary's.
//!
//! Not for: when to start or fence (`dialproof_engine::ha`) or etcd
//! (`super::etcd`).

use anyhow::{bail, Context, Result};
use parking_lot::Mutex;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a stopped service may take before it is killed.
const STOP_WAIT: Duration = Duration::from_secs(15);

/// What a node needs to start its processes.
#[derive(Debug, Clone)]
pub struct Paths {
    pub exe: PathBuf,
    pub config: Option<PathBuf>,
    pub log_format: &'static str,
    pub db: PathBuf,
    pub litestream: PathBuf,
    pub litestream_config: PathBuf,
}

#[derive(Default)]
struct Procs {
    service: Option<Child>,
    stdin: Option<ChildStdin>,
    litestream: Option<Child>,
}

pub struct Node {
    paths: Paths,
    procs: Mutex<Procs>,
    /// One restore at a time: a restore abandoned by a fence may still
    /// run when the next win starts another over the same file.
    restoring: Mutex<()>,
}

impl Node {
    pub fn new(paths: Paths) -> Node {
        Node {
            paths,
            procs: Mutex::default(),
            restoring: Mutex::new(()),
        }
    }

    /// Stops a service left from an earlier term (a fenced one, still
    /// answering 503), moves this node's own database aside and restores
    /// the newest replica in its place. Runs on a thread of its own.
    pub fn restore(&self) -> Result<()> {
        let _one = self.restoring.lock();
        let old = {
            let mut p = self.procs.lock();
            p.stdin = None;
            p.service.take()
        };
        if let Some(child) = old {
            stop(child, "the fenced service");
        }
        let db = &self.paths.db;
        move_aside(db)?;
        let started = Instant::now();
        let out = Command::new(&self.paths.litestream)
            .arg("restore")
            .arg("-config")
            .arg(&self.paths.litestream_config)
            // A new cluster has no replica yet: its first primary starts
            // on an empty database.
            .arg("-if-replica-exists")
            .arg(db)
            .output()
            .with_context(|| format!("running {}", self.paths.litestream.display()))?;
        if !out.status.success() {
            bail!(
                "litestream restore failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        tracing::info!(
            took_ms = started.elapsed().as_millis() as u64,
            restored = db.exists(),
            "ha: replica restored"
        );
        Ok(())
    }

    /// Starts the service promoted; returns its stdout (the READY line).
    /// Call on the main thread (see the module's doc).
    pub fn start_service(&self) -> Result<ChildStdout> {
        let p = &self.paths;
        let mut cmd = Command::new("setpriv");
        cmd.args(["--pdeathsig", "TERM"]).arg(&p.exe);
        if let Some(c) = &p.config {
            cmd.arg("--config").arg(c);
        }
        cmd.args([
            "--log-format",
            p.log_format,
            "serve",
            "--promoted",
            "--ha-child",
        ]);
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("starting the service")?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            bail!("the service's pipes were not set up");
        };
        let mut procs = self.procs.lock();
        procs.service = Some(child);
        procs.stdin = Some(stdin);
        Ok(stdout)
    }

    /// Starts `litestream replicate`. Call on the main thread.
    pub fn start_litestream(&self) -> Result<()> {
        let p = &self.paths;
        let child = Command::new("setpriv")
            .args(["--pdeathsig", "KILL"])
            .arg(&p.litestream)
            .arg("replicate")
            .arg("-config")
            .arg(&p.litestream_config)
            .stdin(Stdio::null())
            .spawn()
            .context("starting litestream replicate")?;
        self.procs.lock().litestream = Some(child);
        Ok(())
    }

    /// Tells the service how long the lease is still good for.
    pub fn tell_lease(&self, valid: Duration) {
        let mut procs = self.procs.lock();
        if let Some(stdin) = procs.stdin.as_mut() {
            if writeln!(stdin, "lease {}", valid.as_millis()).is_err() {
                procs.stdin = None;
            }
        }
    }

    /// The fence: the service's word (and its closed stdin, should the
    /// word be lost), and Litestream killed at once, so nothing more of
    /// this node reaches the replica. The service keeps running fenced.
    pub fn fence(&self) {
        let mut procs = self.procs.lock();
        if let Some(mut stdin) = procs.stdin.take() {
            let _ = writeln!(stdin, "fence");
        }
        if let Some(mut ls) = procs.litestream.take() {
            let _ = ls.kill();
            let _ = ls.wait();
        }
    }

    /// Which process of a serving node exited on its own, if one did.
    pub fn exited(&self) -> Option<&'static str> {
        let mut procs = self.procs.lock();
        let gone = |c: &mut Option<Child>| {
            c.as_mut()
                .is_some_and(|c| !matches!(c.try_wait(), Ok(None)))
        };
        if gone(&mut procs.service) {
            procs.service = None;
            procs.stdin = None;
            return Some("the service");
        }
        if gone(&mut procs.litestream) {
            procs.litestream = None;
            return Some("litestream replicate");
        }
        None
    }

    /// A planned stop: the service drains, then Litestream syncs a last
    /// time and exits.
    pub fn shutdown(&self) {
        let (service, litestream) = {
            let mut p = self.procs.lock();
            if let Some(mut stdin) = p.stdin.take() {
                let _ = writeln!(stdin, "fence");
            }
            (p.service.take(), p.litestream.take())
        };
        if let Some(c) = service {
            stop(c, "the service");
        }
        if let Some(c) = litestream {
            stop(c, "litestream");
        }
    }
}

/// SIGTERM, a bounded wait, then SIGKILL.
fn stop(mut child: Child, what: &str) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let started = Instant::now();
    while started.elapsed() < STOP_WAIT {
        if !matches!(child.try_wait(), Ok(None)) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    tracing::warn!(what, "did not stop in time; killed");
    let _ = child.kill();
    let _ = child.wait();
}

/// Moves the database, its WAL and Litestream's local state aside (kept
/// once, for inspection), so the restore starts from nothing of ours.
fn move_aside(db: &Path) -> Result<()> {
    let name = db
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .context("the database path has no file name")?;
    let dir = db.parent().unwrap_or(Path::new("."));
    for part in [
        name.clone(),
        format!("{name}-wal"),
        format!("{name}-shm"),
        format!(".{name}-litestream"),
    ] {
        let from = dir.join(&part);
        if !from.exists() {
            continue;
        }
        let to = dir.join(format!("{part}.before-restore"));
        if to.is_dir() {
            std::fs::remove_dir_all(&to).with_context(|| format!("removing {}", to.display()))?;
        }
        std::fs::rename(&from, &to).with_context(|| format!("moving {} aside", from.display()))?;
    }
    Ok(())
}
