//! Black-box test harness: runs the real `dialproof` binary on ephemeral
//! ports in a temporary directory and talks HTTPS (rustls over std TCP) and
//! plain HTTP to it, byte for byte.
//!
//! Every test file does `mod common;` and uses the parts it needs.
#![allow(dead_code)]

pub mod netns;
pub mod virtual_time;

use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{json, Value};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub const BIN: &str = env!("CARGO_BIN_EXE_dialproof");

/// How long a server may take to print its READY line.
pub const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// Socket read/write timeout of the test clients.
pub const IO_TIMEOUT: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------
// Fixtures and texts

/// A valid Russian mobile number (domestic pool).
pub const RU_PHONE: &str = "+79123456789";
/// A valid Kazakh mobile number (domestic pool, +7 too).
pub const KZ_PHONE: &str = "+77011234567";
/// A valid UK mobile number (international pool).
pub const UK_PHONE: &str = "+447911123456";
/// A public IP literal: passes the SSRF guard without any DNS.
pub const WEBHOOK: &str = "https://93.184.216.34/hook";

/// First number of the domestic range built by [`pools`].
pub const DOMESTIC_START: u64 = 74_950_000_000;
/// First number of the international range built by [`pools`].
pub const INTERNATIONAL_START: u64 = 442_030_000_000;

pub const COLLECTION: &str = "/api/v1/verifications/";

pub const REQUIRED: &str = "Обязательное поле.";
pub const INVALID_PHONE: &str = "Введите корректный номер телефона.";
pub const INVALID_URL: &str = "Введите правильный URL.";
pub const INVALID_INTEGER: &str = "Введите правильное число.";
pub const NOT_FOUND: &str = "Страница не найдена.";
pub const NOT_AUTHENTICATED: &str = "Учетные данные не были предоставлены.";
pub const INVALID_KEY: &str = "Недействительный API-ключ.";
pub const NOT_A_DICT_LIST: &str = "Недопустимые данные. Ожидался dictionary, но был получен list.";

pub fn max_length(n: usize) -> String {
    format!("Убедитесь, что это значение содержит не более {n} символов.")
}
pub fn min_value(n: i64) -> String {
    format!("Убедитесь, что это значение больше либо равно {n}.")
}
pub fn max_value(n: i64) -> String {
    format!("Убедитесь, что это значение меньше либо равно {n}.")
}
pub fn method_not_allowed(m: &str) -> String {
    format!("Метод \"{m}\" не разрешен.")
}
/// DRF's throttle text ("1 second." in the singular).
pub fn throttled(n: u64) -> String {
    let unit = if n == 1 { "second" } else { "seconds" };
    format!("Запрос был проигнорирован. Expected available in {n} {unit}.")
}

/// The domestic numbers of a [`pools`] configuration with `n` of them.
pub fn domestic_numbers(n: u64) -> Vec<String> {
    (0..n).map(|i| format!("+{}", DOMESTIC_START + i)).collect()
}
/// The international numbers of a [`pools`] configuration with `n` of them.
pub fn international_numbers(n: u64) -> Vec<String> {
    (0..n)
        .map(|i| format!("+{}", INTERNATIONAL_START + i))
        .collect()
}

/// `[[lines]]` TOML: one always-up line with `domestic` + `international`
/// numbers (either may be 0).
pub fn pools(domestic: u64, international: u64) -> String {
    let mut entries = Vec::new();
    if domestic > 0 {
        entries.push(format!(
            "  {{ range_start = \"+{DOMESTIC_START}\", count = {domestic}, pool = \"domestic\" }},"
        ));
    }
    if international > 0 {
        entries.push(format!(
            "  {{ range_start = \"+{INTERNATIONAL_START}\", count = {international}, pool = \"international\" }},"
        ));
    }
    format!(
        "[[lines]]\nname = \"test\"\nmode = \"always_up\"\nnumbers = [\n{}\n]\n",
        entries.join("\n")
    )
}

/// `{"phone": phone, "webhook_url": WEBHOOK}`.
pub fn body(phone: &str) -> Value {
    json!({ "phone": phone, "webhook_url": WEBHOOK })
}

// ---------------------------------------------------------------------------
// The server process

pub struct Server {
    pub dir: tempfile::TempDir,
    pub config_path: PathBuf,
    pub data_dir: PathBuf,
    pub https: SocketAddr,
    pub http: Option<SocketAddr>,
    child: Option<Child>,
    logs: Arc<Mutex<String>>,
    tls: Arc<rustls::ClientConfig>,
    /// Extra environment of the server process (e.g. fail points).
    env: Vec<(String, String)>,
    /// The service running inside this test process instead of a child
    /// (see `virtual_time`).
    in_process: Option<virtual_time::InProcess>,
    /// Extra arguments after `serve` (e.g. `--promoted`).
    serve_args: Vec<String>,
    /// A supervisor that runs the service as its child, given the service's
    /// command line as its last argument (`litestream replicate -exec`).
    supervisor: Option<Vec<String>>,
}

impl Server {
    /// Starts a server whose config is the test header (ephemeral ports,
    /// data under a fresh temp dir) followed by `config_extra` (e.g.
    /// [`pools`]).
    pub fn start(config_extra: &str) -> Server {
        let mut server = Server::prepare(config_extra);
        server.launch();
        server
    }

    /// Like [`Server::start`] but does not start the process, so a test can
    /// run operator commands first; then call [`Server::launch`].
    pub fn prepare(config_extra: &str) -> Server {
        let dir = tempfile::Builder::new()
            .prefix("dialproof-test-")
            .tempdir()
            .expect("temp dir");
        let data_dir = dir.path().join("data");
        let config_path = dir.path().join("dialproof.toml");
        let config = format!(
            "[server]\nhttps_listen = \"127.0.0.1:0\"\nhttp_listen = \"127.0.0.1:0\"\nworkers = 2\n\n\
             [storage]\ndata_dir = {:?}\n\n{config_extra}",
            data_dir.to_str().expect("utf-8 temp path")
        );
        std::fs::write(&config_path, config).expect("writing config");
        Server {
            dir,
            config_path,
            data_dir,
            https: "127.0.0.1:0".parse().unwrap(),
            http: None,
            child: None,
            env: Vec::new(),
            in_process: None,
            serve_args: Vec::new(),
            supervisor: None,
            logs: Arc::new(Mutex::new(String::new())),
            tls: Arc::new(
                rustls::ClientConfig::builder_with_provider(provider())
                    .with_safe_default_protocol_versions()
                    .unwrap()
                    .with_root_certificates(rustls::RootCertStore::empty())
                    .with_no_client_auth(),
            ),
        }
    }

    /// Sets an environment variable of the server process from its next
    /// start on (`DIALPROOF_FAILPOINTS`, for one).
    pub fn set_env(&mut self, key: &str, value: &str) {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.to_owned(), value.to_owned()));
    }

    /// Extra arguments after `serve` from the next start on.
    pub fn set_serve_args(&mut self, args: &[&str]) {
        self.serve_args = args.iter().map(|a| a.to_string()).collect();
    }

    /// Runs the service under `program args... "<service command line>"`
    /// from the next start on. Killing the server then kills the supervisor
    /// and its children, supervisor first.
    pub fn set_supervisor(&mut self, program_and_args: &[&str]) {
        self.supervisor = Some(program_and_args.iter().map(|a| a.to_string()).collect());
    }

    /// Starts the process of a [`Server::prepare`]d server.
    pub fn launch(&mut self) {
        self.spawn();
    }

    /// A server with one always-up line of `domestic` + `international`
    /// numbers.
    pub fn with_pools(domestic: u64, international: u64) -> Server {
        Server::start(&pools(domestic, international))
    }

    fn spawn(&mut self) {
        assert!(self.child.is_none(), "server already running");
        self.log_line("[harness] starting server");
        let mut command = match &self.supervisor {
            None => {
                let mut c = Command::new(BIN);
                c.arg("--config")
                    .arg(&self.config_path)
                    .arg("serve")
                    .args(&self.serve_args);
                c
            }
            Some(supervisor) => {
                let mut line = format!(
                    "{BIN} --config {} serve",
                    self.config_path.to_str().expect("utf-8 temp path")
                );
                for a in &self.serve_args {
                    line.push(' ');
                    line.push_str(a);
                }
                let mut c = Command::new(&supervisor[0]);
                c.args(&supervisor[1..]).arg(line);
                c
            }
        };
        let mut child = command
            .env("NO_COLOR", "1")
            .env("DIALPROOF_LOG", "info,may=warn")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawning dialproof");
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        let (ready_tx, ready_rx) = mpsc::channel::<String>();
        let logs = self.logs.clone();
        std::thread::spawn(move || {
            let mut ready_tx = Some(ready_tx);
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.starts_with("READY ") {
                    if let Some(tx) = ready_tx.take() {
                        let _ = tx.send(line.clone());
                    }
                }
                push_log(&logs, &format!("[stdout] {line}"));
            }
        });
        let logs = self.logs.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                push_log(&logs, &strip_ansi(&line));
            }
        });
        self.child = Some(child);
        let line = match ready_rx.recv_timeout(READY_TIMEOUT) {
            Ok(l) => l,
            Err(e) => {
                let _ = self.kill_child();
                std::thread::sleep(Duration::from_millis(100));
                panic!("server did not print READY ({e:?}); logs:\n{}", self.logs());
            }
        };
        let mut https = None;
        let mut http = None;
        for part in line.split_whitespace().skip(1) {
            if let Some(a) = part.strip_prefix("https=") {
                https = Some(a.parse().expect("https address"));
            } else if let Some(a) = part.strip_prefix("http=") {
                http = Some(a.parse().expect("http address"));
            }
        }
        self.https = https.unwrap_or_else(|| panic!("no https= in {line:?}"));
        self.http = http;
        self.tls = client_config(&self.data_dir.join("tls").join("cert.pem"));
    }

    fn log_line(&self, line: &str) {
        push_log(&self.logs, line);
    }

    fn kill_child(&mut self) -> Option<ExitStatus> {
        let mut child = self.child.take()?;
        let children = child_pids(child.id());
        let _ = child.kill();
        // A supervisor's children (the service) after the supervisor, as
        // when a machine dies: the supervisor cannot act on their exit.
        for pid in children {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
        child.wait().ok()
    }

    /// The server process's id (for signals such as SIGHUP).
    /// Reloads the configuration file: SIGHUP to the child, or the same
    /// flag set in process.
    pub fn reload(&self) {
        if let Some(p) = &self.in_process {
            p.reload.store(true, std::sync::atomic::Ordering::Release);
            return;
        }
        let status = Command::new("kill")
            .args(["-HUP", &self.pid().to_string()])
            .status()
            .expect("running kill");
        assert!(status.success());
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("server is running").id()
    }

    /// SIGKILL: no shutdown of any kind.
    pub fn kill(&mut self) {
        self.log_line("[harness] SIGKILL");
        self.kill_child().expect("server was not running");
    }

    /// SIGTERM, then waits (bounded) for the exit; returns the exit status.
    pub fn stop(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("server was not running");
        self.log_line("[harness] SIGTERM");
        let ok = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status()
            .expect("running kill")
            .success();
        assert!(ok, "kill -TERM failed");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "server did not exit within 20 s of SIGTERM; logs:\n{}",
                    self.logs()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Starts the server again on the same config and data directory (after
    /// [`Server::kill`] or [`Server::stop`]; stops it first if running).
    pub fn restart(&mut self) {
        if self.child.is_some() {
            self.stop();
        }
        self.spawn();
    }

    pub fn is_running(&mut self) -> bool {
        match &mut self.child {
            Some(c) => c.try_wait().expect("try_wait").is_none(),
            None => false,
        }
    }

    /// Everything the server printed so far (stdout lines prefixed
    /// `[stdout] `, stderr with ANSI escapes removed).
    pub fn logs(&self) -> String {
        self.logs.lock().unwrap().clone()
    }

    /// Polls the log buffer until a line satisfies `pred` or `timeout` ends.
    pub fn wait_for_log(&self, timeout: Duration, pred: impl Fn(&str) -> bool) -> Option<String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(l) = self.logs().lines().find(|l| pred(l)) {
                return Some(l.to_owned());
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    // -- operator CLI ------------------------------------------------------

    /// Runs `dialproof --config <file> --json <args>`; panics unless it
    /// succeeds; returns its JSON answer.
    pub fn cli(&self, args: &[&str]) -> Value {
        let out = self.cli_output(args);
        assert!(
            out.status.success(),
            "dialproof {args:?} failed: {}\nstdout: {}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        stdout
            .lines()
            .rev()
            .find_map(|l| serde_json::from_str(l.trim()).ok())
            .unwrap_or_else(|| panic!("dialproof {args:?} printed no JSON: {stdout}"))
    }

    pub fn cli_output(&self, args: &[&str]) -> std::process::Output {
        Command::new(BIN)
            .arg("--config")
            .arg(&self.config_path)
            .arg("--json")
            .args(args)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .output()
            .expect("running dialproof CLI")
    }

    /// Creates a company; returns its id.
    pub fn create_company(&self, name: &str) -> i64 {
        let v = self.cli(&["company", "create", "--name", name]);
        v["id"]
            .as_i64()
            .unwrap_or_else(|| panic!("no company id in {v}"))
    }

    /// Creates a key for `company`; returns the full token.
    pub fn create_key(&self, company: i64) -> String {
        let v = self.cli(&[
            "key",
            "create",
            "--company",
            &company.to_string(),
            "--label",
            "test",
        ]);
        let token = v["token"]
            .as_str()
            .unwrap_or_else(|| panic!("no token in {v}"))
            .to_owned();
        assert!(token.starts_with("svc_live_"), "{token}");
        token
    }

    /// A new company with one key; returns the token.
    pub fn new_client(&self, name: &str) -> String {
        let company = self.create_company(name);
        self.create_key(company)
    }

    // -- HTTPS -------------------------------------------------------------

    /// A fresh TLS connection to the API listener (SNI `localhost`, the
    /// server's self-signed certificate as the only root).
    pub fn connect(&self) -> Conn<TlsStream> {
        let tcp = TcpStream::connect(self.https).expect("connecting to https listener");
        tcp.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        tcp.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
        tcp.set_nodelay(true).unwrap();
        let name = ServerName::try_from("localhost").unwrap();
        let conn = rustls::ClientConnection::new(self.tls.clone(), name).expect("tls client");
        Conn::new(rustls::StreamOwned::new(conn, tcp))
    }

    /// Like [`Server::connect`], offering these ALPN protocols.
    pub fn connect_alpn(&self, protocols: &[&[u8]]) -> Conn<TlsStream> {
        let mut config = (*self.tls).clone();
        config.alpn_protocols = protocols.iter().map(|p| p.to_vec()).collect();
        let tcp = TcpStream::connect(self.https).expect("connecting to https listener");
        tcp.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        tcp.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
        let name = ServerName::try_from("localhost").unwrap();
        let conn = rustls::ClientConnection::new(Arc::new(config), name).expect("tls client");
        Conn::new(rustls::StreamOwned::new(conn, tcp))
    }

    /// A fresh plain TCP connection to the redirect listener.
    pub fn connect_plain(&self) -> Conn<TcpStream> {
        let addr = self.http.expect("no http listener");
        let tcp = TcpStream::connect(addr).expect("connecting to http listener");
        tcp.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        tcp.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
        Conn::new(tcp)
    }

    /// Sends exactly `bytes` on a new TLS connection; reads one response.
    pub fn raw(&self, bytes: &[u8]) -> Resp {
        let mut c = self.connect();
        c.send(bytes).expect("sending request");
        c.read_response().expect("reading response")
    }

    /// Sends exactly `bytes` on a new plain connection; reads one response.
    pub fn raw_plain(&self, bytes: &[u8]) -> Resp {
        let mut c = self.connect_plain();
        c.send(bytes).expect("sending request");
        c.read_response().expect("reading response")
    }

    /// One request on its own connection (`Connection: close`). `Host` and
    /// `Content-Length` are added unless `headers` has them.
    pub fn request(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Resp {
        self.raw(&build_request(method, path, headers, body, false))
    }

    pub fn create(&self, token: &str, body: &Value) -> Resp {
        self.create_raw(token, body.to_string().as_bytes())
    }

    pub fn create_raw(&self, token: &str, body: &[u8]) -> Resp {
        let auth = format!("Bearer {token}");
        self.request(
            "POST",
            COLLECTION,
            &[
                ("Authorization", &auth),
                ("Content-Type", "application/json; charset=utf-8"),
            ],
            body,
        )
    }

    /// Creates and asserts 201; returns the Verification.
    pub fn create_ok(&self, token: &str, body: &Value) -> Value {
        let r = self.create(token, body);
        assert_eq!(r.status, 201, "create {body} -> {}", r.text());
        r.json()
    }

    pub fn get(&self, token: &str, id: &str) -> Resp {
        let auth = format!("Bearer {token}");
        self.request(
            "GET",
            &format!("{COLLECTION}{id}/"),
            &[("Authorization", &auth)],
            b"",
        )
    }

    pub fn cancel(&self, token: &str, id: &str) -> Resp {
        let auth = format!("Bearer {token}");
        self.request(
            "POST",
            &format!("{COLLECTION}{id}/cancel/"),
            &[("Authorization", &auth)],
            b"",
        )
    }
}

/// `dialproof --config <server's file> --json <args>`, parsed.
pub fn cli(server: &Server, args: &[&str]) -> Value {
    server.cli(args)
}

/// A company created through the CLI; returns its id.
pub fn create_company(server: &Server, name: &str) -> i64 {
    server.create_company(name)
}

/// A key for `company` created through the CLI; returns the full token.
pub fn create_key(server: &Server, company: i64) -> String {
    server.create_key(company)
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.kill_child();
        if let Some(running) = self.in_process.take() {
            running.stop();
        }
        if std::thread::panicking() {
            eprintln!("---- server logs ----\n{}---- end ----", self.logs());
        }
    }
}

/// Starts a [`Server::prepare`]d server with `ops_listen` on an ephemeral
/// loopback port added to `[server]`, after `edit` has changed the rest of
/// its configuration text; returns the server and the ops address.
pub fn start_with_ops_edited(extra: &str, edit: impl FnOnce(String) -> String) -> (Server, String) {
    let mut server = Server::prepare(extra);
    let config = std::fs::read_to_string(&server.config_path).expect("config");
    let config = config.replacen(
        "workers = 2\n",
        "workers = 2\nops_listen = \"127.0.0.1:0\"\n",
        1,
    );
    std::fs::write(&server.config_path, edit(config)).expect("config");
    server.launch();
    let ops = server
        .wait_for_log(Duration::from_secs(5), |l| l.contains(" ops="))
        .and_then(|l| {
            l.split_whitespace()
                .find_map(|p| p.strip_prefix("ops=").map(str::to_owned))
        })
        .expect("ops= on the READY line");
    (server, ops)
}

/// The body of `GET /metrics` from the ops listener at `addr`.
pub fn scrape_metrics(addr: &str) -> String {
    let mut s = TcpStream::connect(addr).expect("connect to ops");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: ops\r\nConnection: close\r\n\r\n")
        .expect("send");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("read");
    text.split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned()
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

fn push_log(logs: &Mutex<String>, line: &str) {
    let mut l = logs.lock().unwrap_or_else(|e| e.into_inner());
    l.push_str(line);
    l.push('\n');
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

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn client_config(cert_path: &Path) -> Arc<rustls::ClientConfig> {
    let pem =
        std::fs::read(cert_path).unwrap_or_else(|e| panic!("reading {}: {e}", cert_path.display()));
    let certs: Vec<CertificateDer<'static>> = rustls_pemfile::certs(&mut pem.as_slice())
        .collect::<Result<_, _>>()
        .expect("parsing the server certificate");
    assert!(
        !certs.is_empty(),
        "no certificate in {}",
        cert_path.display()
    );
    let mut roots = rustls::RootCertStore::empty();
    for c in certs {
        roots
            .add(c)
            .expect("adding the server certificate as a root");
    }
    Arc::new(
        rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

// ---------------------------------------------------------------------------
// HTTP/1.1 over any stream

pub type TlsStream = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// The bytes of a request. Adds `Host` and `Content-Length` (for a body, or
/// any POST/PUT/PATCH) unless given, and `Connection: close` unless
/// `keep_alive` or given.
pub fn build_request(
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    keep_alive: bool,
) -> Vec<u8> {
    let has = |n: &str| headers.iter().any(|(h, _)| h.eq_ignore_ascii_case(n));
    let mut out = format!("{method} {path} HTTP/1.1\r\n");
    if !has("host") {
        out.push_str("Host: localhost\r\n");
    }
    for (n, v) in headers {
        out.push_str(&format!("{n}: {v}\r\n"));
    }
    let wants_length = !body.is_empty() || matches!(method, "POST" | "PUT" | "PATCH");
    if wants_length && !has("content-length") && !has("transfer-encoding") {
        out.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    if !keep_alive && !has("connection") {
        out.push_str("Connection: close\r\n");
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

#[derive(Debug, Clone)]
pub struct Resp {
    pub status: u16,
    /// Names lowercased, in order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == &name.to_ascii_lowercase())
            .map(|(_, v)| v.as_str())
    }

    pub fn header_all(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n == &name.to_ascii_lowercase())
            .map(|(_, v)| v.as_str())
            .collect()
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "status {} body is not JSON ({e}): {:?}",
                self.status,
                self.text()
            )
        })
    }

    /// `body["detail"]` as a string.
    pub fn detail(&self) -> String {
        let v = self.json();
        v["detail"]
            .as_str()
            .unwrap_or_else(|| panic!("no detail in {v}"))
            .to_owned()
    }
}

/// One HTTP/1.1 connection: send bytes, read responses (keeps bytes read
/// past a response for the next one).
pub struct Conn<S: Read + Write + SetTimeout> {
    pub stream: S,
    buf: Vec<u8>,
    /// Read with [`SetTimeout::read_no_write`] (after a failed write).
    read_only: bool,
}

impl<S: Read + Write + SetTimeout> Conn<S> {
    pub fn new(stream: S) -> Self {
        Conn {
            stream,
            buf: Vec::new(),
            read_only: false,
        }
    }

    /// Sends `bytes` as far as the peer takes them; a write error (the peer
    /// answered early and closed) is returned but later reads still see
    /// what the peer sent.
    pub fn send_best_effort(&mut self, bytes: &[u8]) -> io::Result<()> {
        let r = self.send(bytes);
        if r.is_err() {
            self.read_only = true;
        }
        r
    }

    pub fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)?;
        self.stream.flush()
    }

    /// Sends a request built by [`build_request`] with keep-alive and reads
    /// its response.
    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Resp {
        self.send(&build_request(method, path, headers, body, true))
            .expect("sending request");
        self.read_response().expect("reading response")
    }

    fn fill(&mut self) -> io::Result<usize> {
        let mut chunk = [0u8; 16 * 1024];
        loop {
            let read = if self.read_only {
                self.stream.read_no_write(&mut chunk)
            } else {
                self.stream.read(&mut chunk)
            };
            match read {
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // rustls reports a close without close_notify this way.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
        }
    }

    pub fn read_response(&mut self) -> io::Result<Resp> {
        self.read_response_to("GET")
    }

    /// Reads the response to a `method` request: to HEAD, a response has
    /// no body whatever its headers say (RFC 9110 section 9.3.2).
    pub fn read_response_to(&mut self, method: &str) -> io::Result<Resp> {
        let head_len = loop {
            if let Some(p) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break p + 4;
            }
            if self.fill()? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "connection closed before a full response head ({} bytes: {:?})",
                        self.buf.len(),
                        String::from_utf8_lossy(&self.buf)
                    ),
                ));
            }
        };
        let mut storage = [httparse::EMPTY_HEADER; 128];
        let mut parsed = httparse::Response::new(&mut storage);
        match parsed.parse(&self.buf[..head_len]) {
            Ok(httparse::Status::Complete(_)) => {}
            other => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "bad response head {other:?}: {:?}",
                        String::from_utf8_lossy(&self.buf[..head_len])
                    ),
                ))
            }
        }
        let status = parsed.code.unwrap_or(0);
        let headers: Vec<(String, String)> = parsed
            .headers
            .iter()
            .map(|h| {
                (
                    h.name.to_ascii_lowercase(),
                    String::from_utf8_lossy(h.value).trim().to_owned(),
                )
            })
            .collect();
        let length = headers
            .iter()
            .find(|(n, _)| n == "content-length")
            .map(|(_, v)| v.parse::<usize>().expect("numeric Content-Length"));
        self.buf.drain(..head_len);
        let body = match length {
            _ if method == "HEAD" => Vec::new(),
            Some(n) => {
                while self.buf.len() < n {
                    if self.fill()? == 0 {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "connection closed inside the body",
                        ));
                    }
                }
                self.buf.drain(..n).collect()
            }
            None if status == 204 || status == 304 || status < 200 => Vec::new(),
            None => {
                while self.fill()? != 0 {}
                std::mem::take(&mut self.buf)
            }
        };
        Ok(Resp {
            status,
            headers,
            body,
        })
    }

    /// True when the peer has closed the connection (reads EOF within
    /// `timeout`).
    pub fn is_closed_within(&mut self, timeout: Duration) -> bool {
        self.stream.set_timeout(Some(timeout));
        // A read that times out means the connection is still open; only
        // an end of stream or a reset is a close.
        let closed = match self.fill() {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => !matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ),
        };
        self.stream.set_timeout(Some(IO_TIMEOUT));
        closed
    }
}

/// What [`Conn`] needs of a stream beyond Read + Write.
pub trait SetTimeout {
    fn set_timeout(&mut self, t: Option<Duration>);
    /// Reads without writing anything first. rustls' `StreamOwned::read`
    /// flushes pending ciphertext before reading, which fails after the
    /// peer stopped reading (EPIPE) even though its answer is waiting.
    fn read_no_write(&mut self, buf: &mut [u8]) -> io::Result<usize>;
}
impl SetTimeout for TcpStream {
    fn set_timeout(&mut self, t: Option<Duration>) {
        let _ = self.set_read_timeout(t);
    }
    fn read_no_write(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read(buf)
    }
}
impl SetTimeout for TlsStream {
    fn set_timeout(&mut self, t: Option<Duration>) {
        let _ = self.sock.set_read_timeout(t);
    }
    fn read_no_write(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.conn.reader().read(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                other => return other,
            }
            let n = self.conn.read_tls(&mut self.sock)?;
            self.conn
                .process_new_packets()
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            if n == 0 {
                return match self.conn.reader().read(buf) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
                    other => other,
                };
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Verification checks

/// `ver_` + 26 ASCII alphanumerics.
pub fn is_verification_id(s: &str) -> bool {
    s.strip_prefix("ver_")
        .is_some_and(|r| r.len() == 26 && r.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// Milliseconds since the epoch of an ISO 8601 UTC timestamp
/// (`YYYY-MM-DDTHH:MM:SS[.frac](Z|+00:00)`); panics on anything else,
/// including a non-UTC offset.
pub fn parse_utc(s: &str) -> i64 {
    let bad = || -> ! { panic!("not an ISO 8601 UTC timestamp: {s:?}") };
    let rest = if let Some(r) = s.strip_suffix('Z') {
        r
    } else if let Some(r) = s.strip_suffix("+00:00") {
        r
    } else {
        bad()
    };
    let (date, time) = rest.split_once('T').unwrap_or_else(|| bad());
    let d: Vec<&str> = date.split('-').collect();
    if d.len() != 3 || d[0].len() != 4 || d[1].len() != 2 || d[2].len() != 2 {
        bad()
    }
    let num = |x: &str| -> i64 {
        if x.is_empty() || !x.bytes().all(|b| b.is_ascii_digit()) {
            bad()
        }
        x.parse().unwrap()
    };
    let (y, m, day) = (num(d[0]), num(d[1]), num(d[2]));
    let (hms, frac) = match time.split_once('.') {
        Some((a, b)) => (a, Some(b)),
        None => (time, None),
    };
    let t: Vec<&str> = hms.split(':').collect();
    if t.len() != 3 || t.iter().any(|x| x.len() != 2) {
        bad()
    }
    let (hh, mm, ss) = (num(t[0]), num(t[1]), num(t[2]));
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) || hh > 23 || mm > 59 || ss > 60 {
        bad()
    }
    let millis = match frac {
        Some(f) => {
            num(f);
            let f3: String = f.chars().chain("000".chars()).take(3).collect();
            f3.parse::<i64>().unwrap()
        }
        None => 0,
    };
    // Howard Hinnant's days_from_civil.
    let y2 = if m <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    ((days * 86_400) + hh * 3600 + mm * 60 + ss) * 1000 + millis
}

pub fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// The Verification fields, in the spec's order, then the additive ones.
pub const VERIFICATION_FIELDS: [&str; 13] = [
    "verification_id",
    "phone",
    "dial_number",
    "client_ref",
    "info",
    "status",
    "ttl_seconds",
    "created_at",
    "expires_at",
    "completed_at",
    "caller_id_received",
    "caller_id_source",
    "caller_id_trust",
];

/// Checks a Verification object's shape: exactly the spec's fields with
/// their types, a well-formed id, UTC timestamps and
/// `expires_at - created_at == ttl_seconds`.
pub fn assert_verification(v: &Value) {
    let obj = v
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"));
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort_unstable();
    let mut want = VERIFICATION_FIELDS.to_vec();
    want.sort_unstable();
    assert_eq!(keys, want, "fields of {v}");
    let id = v["verification_id"]
        .as_str()
        .expect("verification_id string");
    assert!(is_verification_id(id), "bad id {id:?}");
    for f in [
        "phone",
        "dial_number",
        "client_ref",
        "info",
        "caller_id_received",
    ] {
        assert!(v[f].is_string(), "{f} is not a string in {v}");
    }
    let dial = v["dial_number"].as_str().unwrap();
    assert!(
        dial.starts_with('+') && dial[1..].bytes().all(|b| b.is_ascii_digit()),
        "dial_number {dial:?} is not E.164"
    );
    let status = v["status"].as_str().expect("status string");
    assert!(
        ["pending", "completed", "expired", "failed"].contains(&status),
        "status {status:?}"
    );
    let ttl = v["ttl_seconds"].as_i64().expect("ttl_seconds integer");
    assert!((30..=600).contains(&ttl), "ttl_seconds {ttl}");
    let created = parse_utc(v["created_at"].as_str().expect("created_at string"));
    let expires = parse_utc(v["expires_at"].as_str().expect("expires_at string"));
    assert_eq!(
        expires - created,
        ttl * 1000,
        "expires_at - created_at in {v}"
    );
    if status == "completed" {
        parse_utc(v["completed_at"].as_str().expect("completed_at string"));
        let source = v["caller_id_source"].as_str().unwrap_or("");
        let trust = v["caller_id_trust"].as_str().unwrap_or("");
        assert!(
            ["p_asserted_identity", "remote_party_id", "from"].contains(&source),
            "caller_id_source in {v}"
        );
        assert!(
            ["verified", "failed", "asserted", "unverified"].contains(&trust),
            "caller_id_trust in {v}"
        );
    } else {
        assert!(v["completed_at"].is_null(), "completed_at in {v}");
        assert_eq!(v["caller_id_received"], "", "caller_id_received in {v}");
        assert!(v["caller_id_source"].is_null(), "caller_id_source in {v}");
        assert!(v["caller_id_trust"].is_null(), "caller_id_trust in {v}");
    }
}

/// Polls `f` every 200 ms until it returns `Some` or `timeout` passes.
pub fn poll<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Asserts `Content-Type: application/json` on a response.
pub fn assert_json_type(r: &Resp) {
    assert_eq!(
        r.header("content-type"),
        Some("application/json"),
        "Content-Type of {} {}",
        r.status,
        r.text()
    );
}

/// Like [`Server::start`] with `ops_listen` on an ephemeral loopback port;
/// returns the server and that port's address (from the READY line).
pub fn start_with_ops(config_extra: &str) -> (Server, SocketAddr) {
    let mut server = Server::prepare(config_extra);
    let config = std::fs::read_to_string(&server.config_path).expect("config");
    let config = config.replacen(
        "workers = 2\n",
        "workers = 2\nops_listen = \"127.0.0.1:0\"\n",
        1,
    );
    std::fs::write(&server.config_path, config).expect("config");
    server.launch();
    // The harness may learn of the READY line before it is in the logs.
    let ready = poll(Duration::from_secs(5), || {
        let logs = server.logs();
        let line = logs.lines().rfind(|l| l.starts_with("[stdout] READY "))?;
        Some(line.to_owned())
    })
    .unwrap_or_else(|| panic!("no READY line in:\n{}", server.logs()));
    let ops = ready
        .split_whitespace()
        .find_map(|p| p.strip_prefix("ops="))
        .unwrap_or_else(|| panic!("no ops= in {ready}"))
        .parse()
        .expect("ops address");
    (server, ops)
}

/// The value of one Prometheus sample, `series` written exactly as the
/// exposition writes it (`name{label="value"}`), from `GET /metrics` at
/// `ops`; `None` when the series is absent.
pub fn metric(ops: SocketAddr, series: &str) -> Option<f64> {
    let mut s = TcpStream::connect(ops).expect("connect to ops listener");
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: ops\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("read /metrics");
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}
