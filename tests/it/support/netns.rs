//! Running one test in a network namespace of its own, for the tests that
//! need host names with chosen addresses: a public-looking address for the
//! SSRF guard to accept, and DNS rebinding between a create and a delivery.
//!
//! The service resolves names with the system resolver (`getaddrinfo`), as
//! in production; it has no test switch for that. So the test changes the
//! system instead. [`Netns::enter`] re-runs the calling test (this test
//! binary, `--exact` the test's name) under `unshare --net --mount`, after a
//! shell prologue that brings loopback up and bind-mounts a hosts file of
//! the test's over `/etc/hosts`. Everything the re-run test starts runs in
//! that namespace: the server, its CLI runs, the test's own receivers and
//! clients. Only loopback exists there, so nothing can leave the machine
//! whatever address a name is given, and the mount is private to the
//! namespace. Rewriting the file ([`Netns::set_hosts`], in place, so the
//! bind mount keeps showing it) changes the answer to the next lookup, as a
//! rebinding DNS server would.
//!
//! It needs root (`CAP_SYS_ADMIN`), util-linux `unshare` and iproute2 `ip`,
//! as CI has (it runs as root). Where they are missing the test fails and
//! says so; it never skips.
//!
//! Not for: tests that can use IP literals or `localhost`; they need no
//! namespace.

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Set for the re-run test process only, to the hosts file's path. Read by
/// this harness; the service never reads it.
const INSIDE_ENV: &str = "DIALPROOF_TESTS_NETNS_HOSTS";

/// Runs as root in the new namespaces: `$1` is the hosts file, the rest the
/// command to run there.
const PROLOGUE: &str = "set -eu
ip link set lo up
mount --bind \"$1\" /etc/hosts
shift
exec \"$@\"";

/// An address outside the namespace (TEST-NET-1, routed nowhere): a
/// connection to it must fail at once for want of a route.
const OUTSIDE: &str = "192.0.2.1:443";

/// The namespace the current test runs in.
pub struct Netns {
    hosts: PathBuf,
}

impl Netns {
    /// Runs the calling test in a network namespace whose `/etc/hosts` is
    /// `hosts` (lines of `address name...`). `test` is its path as
    /// `concat!(module_path!(), "::", "<fn name>")` gives it (the crate's
    /// name first, which the test harness leaves out).
    ///
    /// In the test process `cargo test` started, this re-runs the test in
    /// the namespace, waits, passes its output on, panics unless it passed,
    /// and returns `None`: the caller then returns. In the re-run process it
    /// checks the namespace and returns `Some`: the caller runs the test.
    pub fn enter(test: &str, hosts: &str) -> Option<Netns> {
        match std::env::var_os(INSIDE_ENV) {
            Some(path) => Some(Netns::inside(PathBuf::from(path))),
            None => {
                let (_crate, name) = test
                    .split_once("::")
                    .unwrap_or_else(|| panic!("{test:?} is not a module path and a name"));
                run_in_namespace(name, hosts);
                None
            }
        }
    }

    /// Replaces the namespace's `/etc/hosts` (from the next lookup on).
    pub fn set_hosts(&self, hosts: &str) {
        // In place: a new file (write and rename) would leave the bind
        // mount on the old one.
        std::fs::write(&self.hosts, hosts).expect("rewriting the namespace's hosts file");
        assert_eq!(read_etc_hosts(), hosts, "/etc/hosts did not follow");
    }

    fn inside(hosts: PathBuf) -> Netns {
        let text = std::fs::read_to_string(&hosts).expect("reading the hosts file");
        assert_eq!(read_etc_hosts(), text, "/etc/hosts is not the test's file");
        let outside: SocketAddr = OUTSIDE.parse().unwrap();
        match TcpStream::connect_timeout(&outside, Duration::from_secs(2)) {
            Err(e) if e.kind() == io::ErrorKind::NetworkUnreachable => {}
            other => {
                panic!("the namespace is not isolated: connecting to {OUTSIDE} gave {other:?}")
            }
        }
        Netns { hosts }
    }
}

fn read_etc_hosts() -> String {
    std::fs::read_to_string("/etc/hosts").expect("reading /etc/hosts")
}

/// The outer half of [`Netns::enter`].
fn run_in_namespace(test: &str, hosts: &str) {
    let dir = tempfile::Builder::new()
        .prefix("dialproof-netns-")
        .tempdir()
        .expect("temp dir");
    let path = dir.path().join("hosts");
    std::fs::write(&path, hosts).expect("writing the hosts file");
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = Command::new("unshare")
        .args([
            "--net",
            "--mount",
            "--",
            "sh",
            "-c",
            PROLOGUE,
            "netns-prologue",
        ])
        .arg(&path)
        .arg(&exe)
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(INSIDE_ENV, &path)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running `unshare` (util-linux), which this test needs: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !stdout.contains("running 1 test") {
        panic!(
            "could not set up the network namespace {test} runs in (it needs root with \
             CAP_SYS_ADMIN, util-linux `unshare` and iproute2 `ip`; CI runs as root): {}\n\
             stderr:\n{stderr}\nstdout:\n{stdout}",
            out.status
        );
    }
    // Captured by the test harness like the test's own output: shown when
    // it fails, or with --nocapture.
    print!("{stdout}");
    eprint!("{stderr}");
    assert!(
        out.status.success(),
        "{test} failed in its network namespace ({}); its output is above",
        out.status
    );
    // Not `test {test} ... ok`: a service started in process (virtual
    // time) prints its READY line between the name and the verdict.
    assert!(
        stdout.contains(&format!("test {test} ... "))
            && stdout.contains("test result: ok. 1 passed"),
        "{test} did not run in the namespace (is the name right?)"
    );
}
