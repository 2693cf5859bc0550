//! The fixture of the failover tests: three etcd members on loopback, TCP
//! proxies a test can close, and `dialproof ha` nodes replicating to one
//! directory replica.
//!
//! Not for: the checks (the test files), the standby's own helpers
//! (`standby::failover`, reused).

use crate::standby::failover::litestream_config;
use crate::support::ops::add_ops_listen;
use crate::support::webhooks::{free_port, FAST_RETRIES};
use crate::support::*;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The lease TTL the nodes run with (the default).
pub const TTL: Duration = Duration::from_secs(5);

/// Whether `etcd` is installed; if not, says which package is missing.
pub fn etcd_installed() -> bool {
    let found = Command::new("etcd")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        eprintln!("skipped: `etcd` is not installed (Debian package etcd-server; tools/test.sh installs it)");
    }
    found
}

/// Three etcd members on loopback.
pub struct Etcd {
    pub dir: tempfile::TempDir,
    clients: Vec<u16>,
    peers: Vec<u16>,
    members: Vec<Option<Child>>,
}

/// Cluster starts tried before a test gives up: a port picked free can be
/// taken by a parallel test before etcd binds it (the suite shares one
/// network namespace), which leaves a member dead and no quorum.
const START_TRIES: usize = 3;
/// How long a start may take to elect a leader on a loaded machine.
const START_WAIT: Duration = Duration::from_secs(20);

impl Etcd {
    pub fn start() -> Etcd {
        let mut failures = Vec::new();
        for _ in 0..START_TRIES {
            let etcd = Etcd::start_once();
            match etcd.healthy_within(START_WAIT) {
                Ok(()) => return etcd,
                // Dropping it kills the members before the next try.
                Err(e) => failures.push(format!("{e}\n{}", etcd.logs_tail())),
            }
        }
        panic!(
            "etcd (three members on loopback) not healthy after {START_TRIES} starts:\n{}",
            failures.join("\n---\n")
        );
    }

    fn start_once() -> Etcd {
        let dir = tempfile::tempdir().expect("temp dir");
        let clients: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let peers: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let mut etcd = Etcd {
            dir,
            clients,
            peers,
            members: vec![None, None, None],
        };
        for i in 0..3 {
            etcd.start_member(i);
        }
        etcd
    }

    /// The last lines of each member's log, for a failure's message.
    fn logs_tail(&self) -> String {
        (0..3)
            .map(|i| {
                let log = std::fs::read_to_string(self.dir.path().join(format!("m{i}.log")))
                    .unwrap_or_default();
                let lines: Vec<&str> = log.lines().collect();
                let tail = lines[lines.len().saturating_sub(5)..].join("\n");
                format!("m{i} log:\n{tail}")
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    pub fn endpoints(&self) -> Vec<String> {
        self.clients
            .iter()
            .map(|p| format!("http://127.0.0.1:{p}"))
            .collect()
    }

    pub fn client_addrs(&self) -> Vec<SocketAddr> {
        self.clients
            .iter()
            .map(|p| SocketAddr::from(([127, 0, 0, 1], *p)))
            .collect()
    }

    /// Starts member `i` (again: it rejoins with its data directory).
    pub fn start_member(&mut self, i: usize) {
        let cluster: Vec<String> = (0..3)
            .map(|j| format!("m{j}=http://127.0.0.1:{}", self.peers[j]))
            .collect();
        let log = std::fs::File::create(self.dir.path().join(format!("m{i}.log"))).expect("log");
        let child = Command::new("etcd")
            .args(["--name", &format!("m{i}")])
            .arg("--data-dir")
            .arg(self.dir.path().join(format!("m{i}")))
            .arg(format!(
                "--listen-client-urls=http://127.0.0.1:{}",
                self.clients[i]
            ))
            .arg(format!(
                "--advertise-client-urls=http://127.0.0.1:{}",
                self.clients[i]
            ))
            .arg(format!(
                "--listen-peer-urls=http://127.0.0.1:{}",
                self.peers[i]
            ))
            .arg(format!(
                "--initial-advertise-peer-urls=http://127.0.0.1:{}",
                self.peers[i]
            ))
            .arg(format!("--initial-cluster={}", cluster.join(",")))
            .args(["--heartbeat-interval", "100", "--election-timeout", "1000"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("starting etcd");
        self.members[i] = Some(child);
    }

    /// SIGKILL to member `i`.
    pub fn kill_member(&mut self, i: usize) {
        if let Some(mut c) = self.members[i].take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Waits until every member reports itself healthy (a leader exists).
    fn healthy_within(&self, timeout: Duration) -> Result<(), String> {
        let started = Instant::now();
        for addr in self.client_addrs() {
            while !http_get(addr, "/health").is_some_and(|b| b.contains("\"health\":\"true\"")) {
                if started.elapsed() >= timeout {
                    return Err(format!("etcd {addr} not healthy in {timeout:?}"));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        Ok(())
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        for i in 0..3 {
            self.kill_member(i);
        }
    }
}

/// One plain HTTP GET; the body, or None.
pub fn http_get(addr: SocketAddr, path: &str) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    // One write: a server that answers after its first read must see
    // the whole request.
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    s.write_all(request.as_bytes()).ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned())
}

/// A TCP proxy to `upstream` that a test can cut (every connection
/// closed, new ones refused) and open again on the same port.
pub struct Proxy {
    pub addr: SocketAddr,
    upstream: SocketAddr,
    open: Arc<AtomicBool>,
    conns: Arc<Mutex<Vec<TcpStream>>>,
}

impl Proxy {
    pub fn start(upstream: SocketAddr) -> Proxy {
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let p = Proxy {
            addr,
            upstream,
            open: Arc::new(AtomicBool::new(false)),
            conns: Arc::default(),
        };
        p.open();
        p
    }

    pub fn open(&self) {
        self.open.store(true, Ordering::SeqCst);
        let listener = TcpListener::bind(self.addr).expect("proxy bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let (open, conns, upstream) = (self.open.clone(), self.conns.clone(), self.upstream);
        std::thread::spawn(move || {
            while open.load(Ordering::SeqCst) {
                let Ok((down, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                let _ = down.set_nonblocking(false);
                let Ok(up) = TcpStream::connect(upstream) else {
                    continue;
                };
                let mut c = conns.lock().expect("conns");
                for (from, to) in [(&down, &up), (&up, &down)] {
                    let (mut r, mut w) = (
                        from.try_clone().expect("clone"),
                        to.try_clone().expect("clone"),
                    );
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut r, &mut w);
                        let _ = w.shutdown(std::net::Shutdown::Both);
                    });
                }
                c.push(down);
                c.push(up);
            }
            // The listener drops here: new connections are refused.
        });
    }

    /// Closes every connection and refuses new ones.
    pub fn cut(&self) {
        self.open.store(false, Ordering::SeqCst);
        for c in self.conns.lock().expect("conns").drain(..) {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
        // The accept loop looks at the flag every 5 ms.
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One `dialproof ha` node: its server (config, data, requests) and its
/// process group.
pub struct Node {
    pub server: Server,
    pub name: String,
    group: Option<Child>,
}

impl Node {
    /// A node named `name` of cluster "t", talking to `endpoints`,
    /// replicating to `replica`.
    pub fn prepare(name: &str, endpoints: &[String], replica: &Path, lines: &str) -> Node {
        let server = Server::prepare(&format!(
            "replication = \"litestream\"\n\n{FAST_RETRIES}{lines}"
        ));
        let ls = litestream_config(
            server.dir.path(),
            &server.data_dir.join("dialproof.db"),
            replica,
        );
        let endpoints: Vec<String> = endpoints.iter().map(|e| format!("{e:?}")).collect();
        add_ops_listen(&server, |config| {
            format!(
                "{config}\n[ha]\nendpoints = [{}]\ncluster = \"t\"\nnode = {name:?}\nlitestream = {:?}\n\
                 litestream_config = {:?}\nmetrics_listen = \"127.0.0.1:0\"\n",
                endpoints.join(", "),
                crate::standby::failover::litestream().to_str().expect("utf-8"),
                ls.to_str().expect("utf-8"),
            )
        });
        Node {
            server,
            name: name.to_owned(),
            group: None,
        }
    }

    pub fn launch(&mut self) {
        self.group = Some(self.server.launch_ha());
    }

    /// SIGKILL to the whole node (supervisor, service, Litestream), as
    /// when its machine dies.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.group.take() {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", c.id())])
                // The group may be gone already (its supervisor killed).
                .stderr(Stdio::null())
                .status();
            let _ = c.wait();
        }
    }

    /// SIGKILL to the supervisor alone: its children learn of it from
    /// the kernel (a closed stdin, the parent-death signal).
    pub fn kill_supervisor(&mut self) {
        if let Some(c) = self.group.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Waits for the `n`th READY line (the `n`th promotion's service) and
    /// points the requests at it; false if it did not come in `timeout`.
    pub fn wait_serving(&mut self, n: usize, timeout: Duration) -> bool {
        let started = Instant::now();
        while self.server.ready_lines().len() < n {
            if started.elapsed() > timeout {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.server.follow_ready()
    }

    /// The newest service's ops listener.
    pub fn ops(&self) -> SocketAddr {
        self.server.ready().ops().expect("ops= in the READY line")
    }

    /// The supervisor's metrics listener, from its log.
    pub fn ha_metrics(&self) -> String {
        let line = self
            .server
            .wait_for_log(Duration::from_secs(10), |l| {
                l.contains("ha: metrics listening")
            })
            .expect("the metrics line");
        let addr: SocketAddr = line
            .split("bound=")
            .nth(1)
            .and_then(|a| a.split_whitespace().next())
            .and_then(|a| a.parse().ok())
            .expect("bound=ADDR");
        http_get(addr, "/metrics").expect("ha metrics")
    }

    pub fn logs(&self) -> String {
        self.server.logs()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The value of metric `name` (no labels, or the exact labels) in `text`.
pub fn metric(text: &str, name_and_labels: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix(name_and_labels)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// The replica's directory for a test.
pub fn replica_dir(etcd: &Etcd) -> PathBuf {
    etcd.dir.path().join("replica")
}
