//! Kamailio (Debian's `kamailio`, installed by `tools/test.sh`) as a
//! provider's registrar and proxy for the SIP tests: it authenticates the
//! line's REGISTER with digest (`qop=auth`), keeps the binding in memory and
//! relays the test caller's INVITEs to the registered Contact, the way a
//! provider that routes by registration does. The configuration is
//! `tests/kamailio/registrar.cfg` (routing modes in its header).
//!
//! Not for: sipp's scripted registrar (see [`super::sip`]).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where Debian's package puts the modules.
const MODULES: &str = "/usr/lib/x86_64-linux-gnu/kamailio/modules/";
/// How long Kamailio may take to bind its socket.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// A running Kamailio; stopped (its whole process group) on drop.
pub struct Kamailio {
    pub addr: SocketAddr,
    child: Child,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Kamailio {
    /// Starts Kamailio on a free loopback UDP port, accepting REGISTERs of
    /// `auth_user` with `password` and routing every INVITE to the binding
    /// of `aor_user`.
    pub fn start(auth_user: &str, aor_user: &str, password: &str) -> Kamailio {
        let dir = tempfile::Builder::new()
            .prefix("dialproof-kamailio-")
            .tempdir()
            .expect("temp dir");
        let port = super::sip::free_udp_port();
        let cfg = write_config(dir.path(), port, auth_user, aor_user, password);
        let log = dir.path().join("kamailio.log");
        let log_file = std::fs::File::create(&log).expect("kamailio log");
        let child = {
            use std::os::unix::process::CommandExt;
            Command::new("kamailio")
                .args(["-f"])
                .arg(&cfg)
                // Foreground, logs on stderr, small shared memory, runtime
                // files in the temp dir (parallel tests must not share them).
                .args(["-DD", "-E", "-m", "32", "-M", "8", "-Y"])
                .arg(dir.path())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log_file)
                .process_group(0)
                .spawn()
                .expect("spawning kamailio (is the kamailio package installed?)")
        };
        let mut k = Kamailio {
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            child,
            log,
            _dir: dir,
        };
        k.wait_listening();
        k
    }

    /// What Kamailio logged so far.
    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the log contains `needle`; panics after `timeout`.
    pub fn wait_log(&self, needle: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while !self.logs().contains(needle) {
            assert!(
                Instant::now() < deadline,
                "kamailio never logged {needle:?}:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn wait_listening(&mut self) {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("kamailio exited ({status}):\n{}", self.logs());
            }
            // The UDP port is taken once Kamailio has bound it.
            if std::net::UdpSocket::bind(self.addr).is_err() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "kamailio did not bind {}:\n{}",
                self.addr,
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Kamailio {
    fn drop(&mut self) {
        // Kamailio forks workers; TERM the group, then make sure.
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-TERM", "--", &group]).status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.child.wait();
    }
}

fn write_config(dir: &Path, port: u16, auth_user: &str, aor_user: &str, password: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kamailio/registrar.cfg");
    let text = std::fs::read_to_string(&src).expect("reading registrar.cfg");
    let text = text
        .replace("{{PORT}}", &port.to_string())
        .replace("{{PASSWORD}}", password)
        .replace("{{AUTH_USER}}", auth_user)
        .replace("{{AOR_USER}}", aor_user)
        .replace("{{MODULES}}", MODULES)
        .replace("{{LOG_PREFIX}}", "kamailio");
    assert!(
        !text.contains("{{"),
        "unfilled placeholder in registrar.cfg"
    );
    let out = dir.join("kamailio.cfg");
    std::fs::write(&out, text).expect("writing kamailio.cfg");
    out
}
