//! Process-level behaviour the README promises: a storage failure answers
//! the DRF 500 body and leaves nothing half-written, `--log-format json`
//! writes only JSON lines to stderr, a configured `[tls]` certificate is
//! the one served, and `serve` starts with every example configuration
//! under `tools/examples/` as it is written.

mod common;

use common::netns::Netns;
use common::*;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// The body of every 500 (`src/api/texts.rs` `SERVER_ERROR`, DRF's text).
const SERVER_ERROR: &str = "Произошла ошибка сервера.";

#[test]
fn storage_failure_answers_500_releases_the_number_and_recovers() {
    let mut s = Server::prepare(&pools(2, 0));
    let token = s.new_client("Acme");
    // The next two write operations fail; with no pending rows there are no
    // writes before the listeners open, so they are the first two creates.
    s.set_env("DIALPROOF_FAILPOINTS", "writer.op=2*error");
    s.launch();

    for _ in 0..2 {
        let r = s.create(&token, &body(RU_PHONE));
        assert_eq!(r.status, 500, "{}", r.text());
        assert_json_type(&r);
        assert_eq!(r.json(), json!({ "detail": SERVER_ERROR }));
    }

    // Nothing half-written: no verification row exists...
    let db = s.data_dir.join("dialproof.db");
    let pending = || {
        dialproof_storage::Reader::open(&db)
            .expect("reader")
            .pending_verifications()
            .expect("pending rows")
            .len()
    };
    assert_eq!(pending(), 0, "a failed create left a pending row");

    // ...and both numbers the failed creates took are free again: a pool of
    // exactly two still gives two creates (a leaked lease would make one of
    // them 503).
    let a = s.create_ok(&token, &body(RU_PHONE));
    let b = s.create_ok(&token, &body(KZ_PHONE));
    assert_verification(&a);
    assert_verification(&b);
    let mut issued = vec![
        a["dial_number"].as_str().unwrap().to_owned(),
        b["dial_number"].as_str().unwrap().to_owned(),
    ];
    issued.sort();
    assert_eq!(issued, domestic_numbers(2));
    assert_eq!(pending(), 2);
    // The service stays healthy: the created rows read back, and the pool
    // is now really empty.
    for v in [&a, &b] {
        let id = v["verification_id"].as_str().unwrap();
        let g = s.get(&token, id);
        assert_eq!(g.status, 200, "{}", g.text());
        assert_eq!(g.json()["status"], "pending");
    }
    assert_eq!(s.create(&token, &body(RU_PHONE)).status, 503);
}

// ---------------------------------------------------------------------------
// A server started directly (the harness passes no extra arguments and
// trusts only the generated certificate).

struct Proc {
    child: Child,
    /// The READY line.
    ready: String,
    https: SocketAddr,
    stderr: Arc<Mutex<Vec<String>>>,
    stderr_done: mpsc::Receiver<()>,
}

impl Proc {
    fn start(config: &Path, extra_args: &[&str]) -> Proc {
        let mut child = Command::new(BIN)
            .args(extra_args)
            .arg("--config")
            .arg(config)
            .arg("serve")
            .env("NO_COLOR", "1")
            .env("DIALPROOF_LOG", "info,may=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawning dialproof");
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        let (ready_tx, ready_rx) = mpsc::channel::<String>();
        std::thread::spawn(move || {
            let mut ready_tx = Some(ready_tx);
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.starts_with("READY ") {
                    if let Some(tx) = ready_tx.take() {
                        let _ = tx.send(line);
                    }
                }
            }
        });
        let lines = Arc::new(Mutex::new(Vec::new()));
        let (done_tx, stderr_done) = mpsc::channel();
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap().push(line);
            }
            let _ = done_tx.send(());
        });
        let ready = match ready_rx.recv_timeout(READY_TIMEOUT) {
            Ok(l) => l,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "no READY line ({e:?}); stderr:\n{}",
                    lines.lock().unwrap().join("\n")
                );
            }
        };
        let https = ready
            .split_whitespace()
            .find_map(|p| p.strip_prefix("https="))
            .unwrap_or_else(|| panic!("no https= in {ready:?}"))
            .parse()
            .expect("https address");
        Proc {
            child,
            ready,
            https,
            stderr: lines,
            stderr_done,
        }
    }

    /// A TLS connection trusting only `root`, with SNI `localhost`.
    fn connect(&self, root: CertificateDer<'static>) -> Conn<TlsStream> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(root).expect("adding the root");
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        let tcp = TcpStream::connect(self.https).expect("connecting");
        tcp.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        tcp.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
        let name = ServerName::try_from("localhost").unwrap();
        let conn = rustls::ClientConnection::new(Arc::new(config), name).expect("tls client");
        Conn::new(rustls::StreamOwned::new(conn, tcp))
    }

    /// SIGTERM; waits (bounded) for the exit and for stderr to end.
    fn stop(&mut self) {
        let ok = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status()
            .expect("running kill")
            .success();
        assert!(ok, "kill -TERM failed");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(st) = self.child.try_wait().expect("try_wait") {
                assert!(st.success(), "exit status {st}");
                break;
            }
            assert!(Instant::now() < deadline, "no exit within 20 s of SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        }
        self.stderr_done
            .recv_timeout(Duration::from_secs(10))
            .expect("stderr did not end");
    }

    fn stderr_lines(&self) -> Vec<String> {
        self.stderr.lock().unwrap().clone()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("---- stderr ----\n{}", self.stderr_lines().join("\n"));
        }
    }
}

fn pem_certs(path: &Path) -> Vec<CertificateDer<'static>> {
    let pem = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    rustls_pemfile::certs(&mut pem.as_slice())
        .collect::<Result<_, _>>()
        .expect("parsing PEM")
}

#[test]
fn log_format_json_writes_only_json_objects_to_stderr() {
    let s = Server::prepare(&pools(1, 0));
    let token = s.new_client("Acme");
    let mut p = Proc::start(&s.config_path, &["--log-format", "json"]);
    let root = pem_certs(&s.data_dir.join("tls").join("cert.pem")).remove(0);
    // Traffic that logs: a 201, then a 503 (logged at WARN).
    let auth = format!("Bearer {token}");
    let headers = [
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
    ];
    let create = |p: &Proc| {
        let mut c = p.connect(root.clone());
        c.send(&build_request(
            "POST",
            COLLECTION,
            &headers,
            body(RU_PHONE).to_string().as_bytes(),
            false,
        ))
        .expect("sending");
        c.read_response().expect("response").status
    };
    assert_eq!(create(&p), 201);
    assert_eq!(create(&p), 503);
    p.stop();

    let lines = p.stderr_lines();
    assert!(lines.len() >= 3, "too few log lines: {lines:#?}");
    let mut messages = Vec::new();
    let mut levels = Vec::new();
    for line in &lines {
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line:?}"));
        let obj = v
            .as_object()
            .unwrap_or_else(|| panic!("not an object: {line}"));
        let level = obj
            .get("level")
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("no level in {line}"));
        assert!(
            ["TRACE", "DEBUG", "INFO", "WARN", "ERROR"].contains(&level),
            "level {level:?} in {line}"
        );
        assert!(obj.get("timestamp").is_some_and(Value::is_string), "{line}");
        let fields = obj
            .get("fields")
            .and_then(Value::as_object)
            .unwrap_or_else(|| panic!("no fields object in {line}"));
        if let Some(m) = fields.get("message") {
            messages.push(m.as_str().expect("message is a string").to_owned());
        }
        levels.push(level.to_owned());
    }
    // The lines are the service's real events, with their fields.
    assert!(
        messages.iter().any(|m| m == "dialproof ready"),
        "{messages:?}"
    );
    assert!(
        messages
            .iter()
            .any(|m| m == "no dial number available; create rejected with 503"),
        "{messages:?}"
    );
    assert!(messages.iter().any(|m| m == "stopped"), "{messages:?}");
    assert!(levels.iter().any(|l| l == "WARN"), "{levels:?}");
    let ready: Value = serde_json::from_str(
        lines
            .iter()
            .find(|l| l.contains("\"dialproof ready\""))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        ready["fields"]["https"].as_str(),
        Some(p.https.to_string().as_str()),
        "{ready}"
    );
}

#[test]
fn configured_tls_certificate_is_the_one_served() {
    let s = Server::prepare(&pools(1, 0));
    let generated = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])
        .expect("generating a certificate");
    let cert_path = s.dir.path().join("mine-cert.pem");
    let key_path = s.dir.path().join("mine-key.pem");
    std::fs::write(&cert_path, generated.cert.pem()).unwrap();
    std::fs::write(&key_path, generated.key_pair.serialize_pem()).unwrap();
    let mut config = std::fs::read_to_string(&s.config_path).unwrap();
    config.push_str(&format!(
        "\n[tls]\ncert = {:?}\nkey = {:?}\n",
        cert_path.to_str().unwrap(),
        key_path.to_str().unwrap()
    ));
    std::fs::write(&s.config_path, config).unwrap();

    let p = Proc::start(&s.config_path, &[]);
    let mine = CertificateDer::from(generated.cert.der().to_vec());
    let mut c = p.connect(mine.clone());
    // A request completes the handshake (verified against our certificate
    // as the only root) and shows the service behind it.
    c.send(&build_request("GET", COLLECTION, &[], b"", false))
        .expect("sending");
    let r = c.read_response().expect("response");
    assert_eq!(r.status, 401, "{}", r.text());
    let served = c
        .stream
        .conn
        .peer_certificates()
        .expect("peer certificates")
        .to_vec();
    assert_eq!(served.len(), 1, "chain of {} certificates", served.len());
    assert_eq!(
        served[0].as_ref(),
        mine.as_ref(),
        "another certificate served"
    );
    // No self-signed certificate was generated in its place.
    assert!(
        !s.data_dir.join("tls").join("cert.pem").exists(),
        "a self-signed certificate was generated although [tls] is configured"
    );
}

// ---------------------------------------------------------------------------
// README "Configuration": the example files under tools/examples/ start the
// service as they are written, fixed ports included, so each runs in a
// network namespace of its own (only loopback; root, as CI has).

/// Copies `tools/examples/<name>` into a fresh directory (its relative
/// `data_dir` then lands there), starts `serve` on it and checks that the
/// listeners the file names are the ones bound, that the operators'
/// listener reports ready, and that SIGTERM stops it cleanly.
fn serve_starts_with_example(name: &str, ready_parts: &[&str]) {
    let example = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tools/examples")
        .join(name);
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join(name);
    std::fs::copy(&example, &config)
        .unwrap_or_else(|e| panic!("copying {}: {e}", example.display()));
    let mut p = Proc::start(&config, &[]);
    for part in ready_parts {
        assert!(
            p.ready.split_whitespace().any(|w| w == *part),
            "{name}: READY line {:?} lacks {part}",
            p.ready
        );
    }
    let ops = p
        .ready
        .split_whitespace()
        .find_map(|w| w.strip_prefix("ops="))
        .unwrap_or_else(|| panic!("{name}: no ops= in {:?}", p.ready))
        .parse()
        .expect("ops address");
    let ready = poll(Duration::from_secs(10), || {
        let r = plain_get(ops, "/readyz");
        (r.status == 200).then_some(r)
    });
    assert!(ready.is_some(), "{name}: /readyz never answered 200");
    assert!(
        dir.path().join("data/dialproof.db").is_file(),
        "{name}: no database under the file's own directory"
    );
    p.stop();
}

/// One GET over plain HTTP (the operators' listener).
fn plain_get(addr: SocketAddr, path: &str) -> Resp {
    let tcp = TcpStream::connect(addr).expect("connecting to the ops listener");
    tcp.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let mut c = Conn::new(tcp);
    c.send(&build_request("GET", path, &[], b"", false))
        .expect("sending");
    c.read_response().expect("response")
}

#[test]
fn serve_starts_with_the_loopback_example() {
    const TEST: &str = "serve_starts_with_the_loopback_example";
    let Some(_ns) = Netns::enter(TEST, "127.0.0.1 localhost\n") else {
        return;
    };
    serve_starts_with_example(
        "loopback.toml",
        &[
            "https=127.0.0.1:8443",
            "http=127.0.0.1:8080",
            "sip=127.0.0.1:5060",
            "ops=127.0.0.1:9100",
        ],
    );
}

#[test]
fn serve_starts_with_the_registrar_example() {
    const TEST: &str = "serve_starts_with_the_registrar_example";
    let Some(_ns) = Netns::enter(TEST, "127.0.0.1 localhost\n") else {
        return;
    };
    serve_starts_with_example(
        "registrar.toml",
        &[
            "https=127.0.0.1:8443",
            "sip=127.0.0.1:5060",
            "ops=127.0.0.1:9100",
        ],
    );
}

#[test]
fn serve_starts_with_the_production_example() {
    const TEST: &str = "serve_starts_with_the_production_example";
    // The example's provider host name, at an address routed nowhere in
    // the namespace (its registration then fails and is retried, as with
    // a provider that is down).
    let hosts = "127.0.0.1 localhost\n192.0.2.50 sip.provider.example\n";
    let Some(_ns) = Netns::enter(TEST, hosts) else {
        return;
    };
    serve_starts_with_example(
        "production.toml",
        &[
            "https=0.0.0.0:8443",
            "sip=0.0.0.0:5060",
            "ops=127.0.0.1:9100",
        ],
    );
}
