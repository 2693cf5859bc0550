//! The binary as a process, started directly (the harness adds no
//! arguments and trusts only the certificate given): `--log-format json`
//! writes only JSON lines to stderr, a configured `[tls]` certificate is
//! the one served, and `serve` starts with every example configuration
//! under `tools/examples/` as it is written.
//!
//! Not for: stopping it (`super::shutdown`) or reloading it
//! (`super::reload`).

use crate::support::netns::Netns;
use crate::support::*;
use dialproof_kit::process::{Log, Running, Stderr, STDOUT_MARK};
use dialproof_kit::tls::{self, Trust};
use rustls::pki_types::CertificateDer;
use serde_json::Value;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// A server started directly (the harness passes no extra arguments and
/// trusts only the generated certificate): `dialproof EXTRA --config F
/// serve`, its stderr kept byte for byte, for the tests of its format.
struct Proc {
    process: Running,
    log: Log,
    https: SocketAddr,
}

impl Proc {
    fn start(config: &Path, extra_args: &[&str]) -> Proc {
        let mut command = Command::new(BIN);
        command
            .args(extra_args)
            .arg("--config")
            .arg(config)
            .arg("serve")
            .env("NO_COLOR", "1")
            .env("DIALPROOF_LOG", "info,may=warn");
        let log = Log::new();
        let process = Running::spawn(&mut command, &log, Stderr::LogVerbatim, READY_TIMEOUT)
            .unwrap_or_else(|e| panic!("{e}; output:\n{}", log.text()));
        let https = process
            .ready()
            .https()
            .unwrap_or_else(|| panic!("no https= in {:?}", process.ready().line));
        Proc {
            process,
            log,
            https,
        }
    }

    /// A TLS connection trusting only `root`, with SNI `localhost`.
    fn connect(&self, root: CertificateDer<'static>) -> Conn<TlsStream> {
        let config = tls::client_config(Trust::Roots(&[root])).expect("TLS settings");
        Conn::new(tls::connect(self.https, &config, "localhost", IO_TIMEOUT).expect("connecting"))
    }

    /// SIGTERM; waits (bounded) for a clean exit and for stderr to end.
    fn stop(&mut self) {
        let status = self.process.terminate(STOP_TIMEOUT).expect("stopping");
        assert!(status.success(), "exit status {status}");
        assert!(
            self.process.wait_output_end(Duration::from_secs(10)),
            "stderr did not end"
        );
    }

    fn stderr_lines(&self) -> Vec<String> {
        self.log
            .text()
            .lines()
            .filter(|l| !l.starts_with(STDOUT_MARK))
            .map(str::to_owned)
            .collect()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("---- stderr ----\n{}", self.stderr_lines().join("\n"));
        }
    }
}

fn pem_certs(path: &Path) -> Vec<CertificateDer<'static>> {
    tls::certificates_in(path).unwrap_or_else(|e| panic!("{e}"))
}

/// README, "Configuration": `--log-format json` writes only JSON lines to
/// stderr, each a real event with its level, timestamp and fields.
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

/// README, "Configuration" (`[tls]`): a configured certificate is the one
/// served, and none is generated in its place.
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
    let ready = p.process.ready().clone();
    for part in ready_parts {
        assert!(
            ready.line.split_whitespace().any(|w| w == *part),
            "{name}: READY line {:?} lacks {part}",
            ready.line
        );
    }
    let ops = ready
        .ops()
        .unwrap_or_else(|| panic!("{name}: no ops= in {:?}", ready.line));
    let answered = poll(Duration::from_secs(10), || {
        let r = plain_get(ops, "/readyz");
        (r.status == 200).then_some(r)
    });
    assert!(answered.is_some(), "{name}: /readyz never answered 200");
    assert!(
        dir.path().join("data/dialproof.db").is_file(),
        "{name}: no database under the file's own directory"
    );
    p.stop();
}

#[test]
fn serve_starts_with_the_loopback_example() {
    const TEST: &str = concat!(module_path!(), "::serve_starts_with_the_loopback_example");
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
    const TEST: &str = concat!(module_path!(), "::serve_starts_with_the_registrar_example");
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
    const TEST: &str = concat!(module_path!(), "::serve_starts_with_the_production_example");
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
