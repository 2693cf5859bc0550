//! A process under test: spawned with its output collected, waited for
//! until it prints its `READY` line, signalled and stopped. The service's
//! binary is started this way by the tests, the crash harness and the
//! restart bench; the tools that announce themselves the same way (the
//! webhook receiver) by the tests that drive them.
//!
//! Output goes into a [`Log`]: every stdout line as `[stdout] LINE`, and
//! stderr's lines (or stderr goes to a file, for long runs). Readers drain
//! both pipes to the end, so the process never blocks on a full pipe.
//! Signals go through `/bin/kill` (procps): no `unsafe` and no libc here.
//!
//! Not for: what the process is configured with (each caller writes its
//! own configuration) or what is sent to it.

use crate::ready::Ready;
use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How a stdout line is marked in the [`Log`].
pub const STDOUT_MARK: &str = "[stdout] ";

/// Everything a process printed, shared between the reader threads and
/// whoever looks (cloning shares the same buffer, also across restarts).
#[derive(Clone, Default)]
pub struct Log(Arc<Mutex<String>>);

impl Log {
    pub fn new() -> Log {
        Log::default()
    }

    /// Appends one line.
    pub fn push(&self, line: &str) {
        let mut text = self.lock();
        text.push_str(line);
        text.push('\n');
    }

    /// Appends text as it comes (a log writer's chunks, lines or not).
    pub fn append(&self, text: &str) {
        self.lock().push_str(text);
    }

    /// All of it so far.
    pub fn text(&self) -> String {
        self.lock().clone()
    }

    /// Every `READY` line printed on stdout so far, oldest first (a
    /// restarted process prints one more).
    pub fn ready_lines(&self) -> Vec<Ready> {
        self.text()
            .lines()
            .filter_map(|l| Ready::parse(l.strip_prefix(STDOUT_MARK)?))
            .collect()
    }

    /// The stdout lines so far, without their mark.
    pub fn stdout_lines(&self) -> Vec<String> {
        self.text()
            .lines()
            .filter_map(|l| l.strip_prefix(STDOUT_MARK).map(str::to_owned))
            .collect()
    }

    /// Polls until a line satisfies `pred` (returned) or `timeout` passes.
    pub fn wait_for(&self, timeout: Duration, pred: impl Fn(&str) -> bool) -> Option<String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(l) = self.text().lines().find(|l| pred(l)) {
                return Some(l.to_owned());
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, String> {
        // A reader thread that panicked mid-push left whole lines behind.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Where a process's stderr goes.
pub enum Stderr {
    /// Into the [`Log`], line by line, with ANSI escapes removed.
    Log,
    /// Into the [`Log`] byte for byte (for tests of the output's format).
    LogVerbatim,
    /// Into a file (long runs whose log would not fit in memory).
    File(File),
}

/// A process that printed its `READY` line.
pub struct Running {
    child: Child,
    ready: Ready,
    started: Instant,
    ready_after: Duration,
    /// One message from each output reader as it reaches the end (in a
    /// mutex so that a `Running` may be shared between threads).
    ended: Mutex<mpsc::Receiver<()>>,
    readers: usize,
}

impl Running {
    /// Spawns `command` (stdin closed, stdout read here) and waits up to
    /// `timeout` for its first `READY` line. A process that exits or stays
    /// silent is killed and reported as an error; its output is in `log`.
    pub fn spawn(
        command: &mut Command,
        log: &Log,
        stderr: Stderr,
        timeout: Duration,
    ) -> io::Result<Running> {
        let started = Instant::now();
        let (stderr_to, stderr_mode) = match stderr {
            Stderr::File(f) => (Stdio::from(f), None),
            Stderr::Log => (Stdio::piped(), Some(true)),
            Stderr::LogVerbatim => (Stdio::piped(), Some(false)),
        };
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr_to)
            .spawn()?;
        let (ended_tx, ended) = mpsc::channel();
        let (ready_tx, ready_rx) = mpsc::channel();
        let mut readers = 1;
        if let Some(stdout) = child.stdout.take() {
            read_stdout(stdout, log.clone(), ready_tx, ended_tx.clone());
        }
        if let (Some(strip), Some(err)) = (stderr_mode, child.stderr.take()) {
            read_stderr(err, log.clone(), strip, ended_tx);
            readers += 1;
        }
        let ready = match ready_rx.recv_timeout(timeout) {
            Ok(ready) => ready,
            Err(e) => {
                let _ = child.kill();
                let status = child.wait();
                let why = match e {
                    mpsc::RecvTimeoutError::Timeout => format!("no READY line within {timeout:?}"),
                    mpsc::RecvTimeoutError::Disconnected => {
                        format!("the process ended its output before READY ({status:?})")
                    }
                };
                return Err(io::Error::new(io::ErrorKind::TimedOut, why));
            }
        };
        Ok(Running {
            child,
            ready,
            started,
            ready_after: started.elapsed(),
            ended: Mutex::new(ended),
            readers,
        })
    }

    /// The `READY` line it printed.
    pub fn ready(&self) -> &Ready {
        &self.ready
    }

    /// When it was spawned.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// From the spawn to the `READY` line.
    pub fn ready_after(&self) -> Duration {
        self.ready_after
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends a signal by name (`HUP`, `TERM`, `KILL`...).
    pub fn signal(&self, name: &str) -> io::Result<()> {
        signal(self.pid(), name)
    }

    /// Its exit status, if it has exited.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        self.child.try_wait()
    }

    /// Waits up to `timeout` for it to exit by itself; `None` if it has not.
    pub fn wait_timeout(&mut self, timeout: Duration) -> io::Result<Option<ExitStatus>> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(Some(status));
            }
            if Instant::now() > deadline {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL, then SIGKILL to each of its children (a supervisor's
    /// service dies after the supervisor, as when a machine dies: the
    /// supervisor cannot act on its exit). Returns the exit status.
    pub fn kill(&mut self) -> io::Result<ExitStatus> {
        let children = child_pids(self.pid());
        let _ = self.child.kill();
        for pid in children {
            let _ = signal(pid, "KILL");
        }
        self.child.wait()
    }

    /// SIGTERM and a wait of at most `timeout`; past it, SIGKILL and an
    /// error (a stop that hangs is a failure, not something to wait out).
    pub fn terminate(&mut self, timeout: Duration) -> io::Result<ExitStatus> {
        if let Some(status) = self.child.try_wait()? {
            return Ok(status);
        }
        self.signal("TERM")?;
        match self.wait_timeout(timeout)? {
            Some(status) => Ok(status),
            None => {
                let _ = self.kill();
                Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("no exit within {timeout:?} of SIGTERM"),
                ))
            }
        }
    }

    /// Waits up to `timeout` for its output to end (after an exit, once the
    /// readers have put every line into the log); false if it did not.
    pub fn wait_output_end(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let ended = self.ended.get_mut().unwrap_or_else(|e| e.into_inner());
        while self.readers > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if ended.recv_timeout(left).is_err() {
                return false;
            }
            self.readers -= 1;
        }
        true
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.kill();
        }
    }
}

fn read_stdout(
    stdout: impl io::Read + Send + 'static,
    log: Log,
    ready: mpsc::Sender<Ready>,
    ended: mpsc::Sender<()>,
) {
    std::thread::spawn(move || {
        let mut ready = Some(ready);
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            // Into the log first: whoever hears of READY finds it there.
            log.push(&format!("{STDOUT_MARK}{line}"));
            if let Some(r) = Ready::parse(&line) {
                if let Some(tx) = ready.take() {
                    let _ = tx.send(r);
                }
            }
        }
        let _ = ended.send(());
    });
}

fn read_stderr(
    stderr: impl io::Read + Send + 'static,
    log: Log,
    strip: bool,
    ended: mpsc::Sender<()>,
) {
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if strip {
                log.push(&strip_ansi(&line));
            } else {
                log.push(&line);
            }
        }
        let _ = ended.send(());
    });
}

/// `kill -NAME pid`.
pub fn signal(pid: u32, name: &str) -> io::Result<()> {
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .stdin(Stdio::null())
        .status()?;
    if status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!("kill -{name} {pid}: {status}")))
    }
}

/// The direct children of process `pid` (from /proc; empty if gone).
pub fn child_pids(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut pids = Vec::new();
    for task in tasks.flatten() {
        let text = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        pids.extend(
            text.split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok()),
        );
    }
    pids
}

/// Removes `ESC [ ... letter` sequences.
pub fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.args(["-c", script]);
        c
    }

    #[test]
    fn waits_for_ready_and_keeps_every_line() {
        let log = Log::new();
        // `exec`: the sleep is the process terminated; a sleep left behind
        // as the shell's child would hold the output pipes open for its 5 s
        // and race the wait for their end.
        let script = "echo first; echo 'READY https=127.0.0.1:1' ; printf '\\033[1mbold\\033[0m\\n' >&2; echo after; exec sleep 5";
        let mut p = Running::spawn(&mut sh(script), &log, Stderr::Log, Duration::from_secs(10))
            .expect("ready");
        assert_eq!(p.ready().https(), Some("127.0.0.1:1".parse().unwrap()));
        assert!(log
            .wait_for(Duration::from_secs(5), |l| l == "bold")
            .is_some());
        assert!(log
            .wait_for(Duration::from_secs(5), |l| l == "[stdout] after")
            .is_some());
        assert_eq!(log.ready_lines().len(), 1);
        let status = p.terminate(Duration::from_secs(5)).expect("stops");
        assert!(!status.success());
        assert!(p.wait_output_end(Duration::from_secs(5)));
        assert_eq!(log.stdout_lines()[0], "first");
    }

    #[test]
    fn a_process_that_ends_without_ready_is_an_error_at_once() {
        let log = Log::new();
        let err = Running::spawn(
            &mut sh("echo nope"),
            &log,
            Stderr::Log,
            Duration::from_secs(30),
        )
        .err()
        .expect("no READY");
        // Not the timeout's message: the end of its output ended the wait.
        assert!(err.to_string().contains("before READY"), "{err}");
        assert_eq!(log.text(), "[stdout] nope\n");
    }

    #[test]
    fn strips_colour_escapes() {
        assert_eq!(strip_ansi("\u{1b}[2mINFO\u{1b}[0m x"), "INFO x");
    }
}
