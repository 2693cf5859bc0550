//! SIP test harness: the real `dialproof` binary (through [`super::Server`])
//! with a `[sip]` listener on an ephemeral loopback port, and sipp
//! (Debian's `sip-tester`) as the provider's registrar and as the caller.
//!
//! Scenario files live in `tests/sipp/`; they are templates whose
//! `{{NAME}}` placeholders this module fills in before sipp reads them
//! (sipp's own `[keyword]`s are left alone).
//!
//! [`FakePeer`] is a hand-written provider or registrar on loopback, for
//! what sipp's scenarios cannot script (falling silent and coming back,
//! hostile challenges).
//!
//! Not for: a real provider's registrar (see [`super::kamailio`]).

use super::Server;
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The sipp binary (Debian package `sip-tester`; `tools/test.sh` installs it).
pub const SIPP: &str = "sipp";
/// The longest one sipp run may take.
pub const SIPP_TIMEOUT: Duration = Duration::from_secs(30);
/// A line's numbers in these tests (domestic pool).
pub const LINE_START: u64 = 74_950_000_000;

/// `[sip]` on an ephemeral loopback port, then `lines`.
pub fn sip_config(lines: &str) -> String {
    format!("[sip]\nlisten = \"127.0.0.1:0\"\n\n{lines}")
}

/// An always-up line of `count` domestic numbers that trusts INVITEs from
/// 127.0.0.1 only, rejecting with `reject_code`.
pub fn trusted_line(count: u64, reject_code: u16) -> String {
    format!(
        "[[lines]]\nname = \"gw\"\nmode = \"always_up\"\nprovider_addresses = [\"127.0.0.1\"]\n\
         reject_code = {reject_code}\nnumbers = [ {{ range_start = \"+{LINE_START}\", count = {count}, pool = \"domestic\" }} ]\n"
    )
}

/// A registering line of `count` domestic numbers at `registrar`.
pub fn register_line(registrar: SocketAddr, count: u64, user: &str, password: &str) -> String {
    format!(
        "[[lines]]\nname = \"reg\"\nmode = \"register\"\nprovider = \"{registrar}\"\n\
         username = \"{user}\"\npassword = \"{password}\"\nregister_expires_seconds = 60\n\
         numbers = [ {{ range_start = \"+{LINE_START}\", count = {count}, pool = \"domestic\" }} ]\n"
    )
}

/// The `sip=` address of the server's latest READY line (a restart on
/// port 0 binds new ports).
pub fn sip_addr(server: &Server) -> SocketAddr {
    let ready = server.ready();
    ready
        .sip()
        .unwrap_or_else(|| panic!("no sip= in {:?}", ready.line))
}

/// A UDP port free on 127.0.0.1 right now (for sipp's registrar, whose
/// port the server's config must name before it starts).
pub fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("binding an ephemeral UDP port")
        .port()
}

/// `tests/sipp/<name>` with every `{{KEY}}` replaced, written into `dir`.
pub fn scenario(dir: &Path, name: &str, vars: &[(&str, &str)]) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/sipp")
        .join(name);
    let mut text =
        std::fs::read_to_string(&src).unwrap_or_else(|e| panic!("reading {}: {e}", src.display()));
    for (k, v) in vars {
        text = text.replace(&format!("{{{{{k}}}}}"), v);
    }
    assert!(
        !text.contains("{{"),
        "unfilled placeholder in {name}:\n{text}"
    );
    let out = dir.join(name);
    std::fs::write(&out, text).expect("writing scenario");
    out
}

/// The From header of a caller with user part `user`.
pub fn from_user(user: &str) -> String {
    format!("<sip:{user}@[local_ip]:[local_port]>")
}

/// Common sipp arguments: quiet, no stdin, bounded in time, errors traced
/// into the working directory.
fn base_args(cmd: &mut Command, dir: &Path) {
    cmd.current_dir(dir)
        .args(["-nostdin", "-trace_err", "-trace_msg"])
        .args(["-timeout", "25s", "-timeout_error"])
        .args(["-recv_timeout", "10000"])
        .stdin(Stdio::null());
}

/// One sipp caller run: `calls` calls of `scenario` to `service` at
/// `target`, sent from `local_ip`. Returns sipp's output (exit code 0 when
/// every call followed the scenario).
pub fn run_uac(
    dir: &Path,
    scenario: &Path,
    target: SocketAddr,
    service: &str,
    local_ip: &str,
    calls: u32,
) -> Output {
    let mut cmd = Command::new(SIPP);
    cmd.arg(target.to_string())
        .arg("-sf")
        .arg(scenario)
        .args(["-s", service, "-i", local_ip, "-m", &calls.to_string()])
        // sipp's own default is 5060, which parallel runs would share.
        .args(["-p", &free_udp_port().to_string()]);
    base_args(&mut cmd, dir);
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning sipp (is sip-tester installed?)");
    wait_output(child, SIPP_TIMEOUT)
}

/// Starts sipp as a server (the registrar) on 127.0.0.1:`port`.
pub fn spawn_uas(dir: &Path, scenario: &Path, port: u16) -> Child {
    let mut cmd = Command::new(SIPP);
    cmd.arg("-sf")
        .arg(scenario)
        .args(["-i", "127.0.0.1", "-p", &port.to_string(), "-m", "1"]);
    base_args(&mut cmd, dir);
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning sipp (is sip-tester installed?)")
}

/// Waits for `child` up to `timeout` (then kills it) and collects output.
pub fn wait_output(mut child: Child, timeout: Duration) -> Output {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait().expect("try_wait") {
            Some(_) => break,
            None if Instant::now() > deadline => {
                let _ = child.kill();
                break;
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    child.wait_with_output().expect("sipp output")
}

/// Panics with sipp's output and message trace unless it exited 0.
pub fn assert_sipp_ok(out: &Output, dir: &Path, server: &Server) {
    if out.status.success() {
        return;
    }
    let mut traces = String::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "log") {
                traces.push_str(&format!(
                    "--- {}\n{}\n",
                    p.display(),
                    std::fs::read_to_string(&p).unwrap_or_default()
                ));
            }
        }
    }
    panic!(
        "sipp failed ({}):\nstdout: {}\nstderr: {}\n{traces}\nserver logs:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        server.logs()
    );
}

/// How many received messages in sipp's `-trace_msg` files of `dir` start
/// with `start_line` (sipp itself hides repeated responses).
pub fn received_in_trace(dir: &Path, start_line: &str) -> usize {
    let mut count = 0;
    for e in std::fs::read_dir(dir).expect("sipp dir").flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.ends_with("_messages.log") {
            continue;
        }
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        let mut after_received = false;
        for line in text.lines() {
            if line.contains("message received") {
                after_received = true;
                continue;
            }
            if after_received && !line.trim().is_empty() {
                if line.starts_with(start_line) {
                    count += 1;
                }
                after_received = false;
            }
        }
    }
    count
}

/// A fresh working directory for sipp's files.
pub fn workdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("dialproof-sipp-")
        .tempdir()
        .expect("temp dir")
}

/// How long the count of a log line must stay the same before
/// [`count_logs`] takes it: the service writes its lines from a buffer on
/// a thread of its own within milliseconds, and the harness reads them
/// from a pipe, so a line about what a peer has just been answered can
/// land just after the peer's own report.
const LOG_SETTLE: Duration = Duration::from_millis(150);
/// The longest [`count_logs`] waits for the log to settle.
const LOG_CATCH_UP: Duration = Duration::from_secs(3);

/// How many log lines contain `needle`, once that count has stayed the
/// same for [`LOG_SETTLE`] (at most [`LOG_CATCH_UP`]).
pub fn count_logs(server: &Server, needle: &str) -> usize {
    let count = || server.logs().lines().filter(|l| l.contains(needle)).count();
    let started = Instant::now();
    let (mut last, mut since) = (count(), Instant::now());
    while since.elapsed() < LOG_SETTLE && started.elapsed() < LOG_CATCH_UP {
        std::thread::sleep(Duration::from_millis(10));
        let now = count();
        if now != last {
            (last, since) = (now, Instant::now());
        }
    }
    last
}

/// Waits (up to `timeout`) for a log line containing `needle` and returns
/// it; panics with the log if none comes. For a line the service writes
/// as it answers a peer, which may land after the peer has its answer.
pub fn wait_log_line(server: &Server, needle: &str, timeout: Duration) -> String {
    server
        .wait_for_log(timeout, |l| l.contains(needle))
        .unwrap_or_else(|| {
            panic!(
                "no log line with {needle:?} within {timeout:?}:\n{}",
                server.logs()
            )
        })
}

/// One call from sipp (caller 89161234567, expecting the service's 603) to
/// `dial`, asserted to have run its scenario: it completes the
/// verification that leased `dial` at once.
pub fn call_once(server: &Server, dial: &str) {
    let dir = workdir();
    let from = from_user("89161234567");
    let vars = [
        ("FROM_HEADER", from.as_str()),
        ("HEADERS", "X-Test: call"),
        ("CODE", "603"),
    ];
    let sf = scenario(dir.path(), "call.xml", &vars);
    let out = run_uac(dir.path(), &sf, sip_addr(server), dial, "127.0.0.1", 1);
    assert_sipp_ok(&out, dir.path(), server);
}

/// A fake SIP peer on a loopback UDP port (a provider that answers pings,
/// a registrar): a thread hands each request of one method to `answer` and
/// sends back what it returns (nothing: silence). Stopped when dropped.
pub struct FakePeer {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl FakePeer {
    pub fn start(
        method: &'static str,
        mut answer: impl FnMut(&str) -> Option<String> + Send + 'static,
    ) -> FakePeer {
        let sock = UdpSocket::bind("127.0.0.1:0").expect("binding the fake peer");
        let addr = sock.local_addr().expect("its address");
        // Short reads, so the thread sees the stop flag soon.
        sock.set_read_timeout(Some(Duration::from_millis(50)))
            .expect("a read timeout");
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let request_line = format!("{method} ");
        let thread = std::thread::spawn(move || {
            let mut buf = vec![0u8; 65_536];
            while !stopped.load(Ordering::Acquire) {
                let Ok((n, from)) = sock.recv_from(&mut buf) else {
                    continue;
                };
                let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
                if !msg.starts_with(&request_line) {
                    continue;
                }
                if let Some(reply) = answer(&msg) {
                    let _ = sock.send_to(reply.as_bytes(), from);
                }
            }
        });
        FakePeer {
            addr,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for FakePeer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The value of a SIP message's first `name:` header (any case), or "".
pub fn header<'a>(msg: &'a str, name: &str) -> &'a str {
    msg.lines()
        .find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.trim().eq_ignore_ascii_case(name).then_some(v.trim())
        })
        .unwrap_or("")
}

/// The message's lines whose header is one of `names` (lowercase, with the
/// colon: `"via:"`), each with its CRLF: what a response copies.
pub fn copied_headers(msg: &str, names: &[&str]) -> String {
    msg.lines()
        .filter(|l| {
            let l = l.to_ascii_lowercase();
            names.iter().any(|p| l.starts_with(p))
        })
        .map(|l| format!("{l}\r\n"))
        .collect()
}

/// `dialproof-sim call --to DIAL --from FROM` at the server's SIP address
/// (the bundled provider simulator, as the README's first verification
/// uses it); its output, whatever its exit status.
pub fn sim_call(server: &Server, dial: &str, from: &str) -> Output {
    sim_call_with(server, &["--to", dial, "--from", from])
}

/// `dialproof-sim call ARGS` at the server's SIP address; its output,
/// whatever its exit status.
pub fn sim_call_with(server: &Server, args: &[&str]) -> Output {
    Command::new(super::tools::tool("dialproof-sim"))
        .arg("call")
        .args(args)
        .args(["--target", &sip_addr(server).to_string()])
        .stdin(Stdio::null())
        .output()
        .expect("running dialproof-sim")
}

/// Fails if `sock` receives anything within `wait`: `what` names the
/// datagram that must not come.
pub fn assert_nothing_more(sock: &UdpSocket, wait: Duration, what: &str) {
    sock.set_read_timeout(Some(wait)).expect("read timeout");
    let mut buf = vec![0u8; 65_536];
    if let Ok((n, _)) = sock.recv_from(&mut buf) {
        panic!("{what}: {}", String::from_utf8_lossy(&buf[..n]));
    }
}
