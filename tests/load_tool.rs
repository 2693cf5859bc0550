//! The bundled tools against the real service: `dialproof-load` runs a
//! small closed-loop create/read/cancel mix with SIP calls (keys made by
//! its own `--setup-local` through the operator CLI) and its JSON report
//! must show every operation succeeding, every call answered 603 and every
//! webhook's signature valid; then a short open-loop run at a fixed rate;
//! and `dialproof-webhook-receiver` must verify a real signed webhook sent
//! after `dialproof-sim call`, and flag one signed with another secret.
//!
//! The tools are binaries of the `dialproof-tools` package, run from the
//! same target directory as the service's binary. `cargo test --workspace`
//! (and `tools/test.sh`) build them, since that package has integration
//! tests of its own; `cargo test --test load_tool` alone does not rebuild
//! them, so after changing the tools run `cargo build -p dialproof-tools`.

mod common;
mod common_sip;

use common::*;
use common_sip::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The longest any tool run here may take.
const TOOL_TIMEOUT: Duration = Duration::from_secs(90);

/// A tools binary next to the service's binary.
fn tool(name: &str) -> PathBuf {
    let path = PathBuf::from(BIN).with_file_name(name);
    assert!(
        path.is_file(),
        "{} is missing: build the tools first (cargo build -p dialproof-tools, \
         or cargo test --workspace, which builds them)",
        path.display()
    );
    path
}

/// The server's SIP address, once its READY line is in the log buffer
/// (the harness records it just after it returns from the start).
fn sip_of(s: &Server) -> String {
    s.wait_for_log(Duration::from_secs(10), |l| {
        l.starts_with("[stdout] READY ")
    })
    .expect("READY line in the log");
    sip_addr(s).to_string()
}

/// Waits for `child` (bounded) and returns its output.
fn wait_bounded(mut child: Child, what: &str) -> Output {
    let deadline = Instant::now() + TOOL_TIMEOUT;
    while child.try_wait().expect("try_wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{what} did not finish within {TOOL_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("tool output")
}

fn run_load(s: &Server, extra: &[&str]) -> Value {
    let report = s.dir.path().join(format!("report-{}.json", now_millis()));
    let cert = s.data_dir.join("tls").join("cert.pem");
    let target = format!("https://{}", s.https);
    let mut cmd = Command::new(tool("dialproof-load"));
    cmd.args(["--target", &target, "--cacert"])
        .arg(&cert)
        .arg("--config")
        .arg(&s.config_path)
        .args([
            "--dialproof-bin",
            BIN,
            "--quiet",
            "--timeout-ms",
            "30000",
            "--json",
        ])
        .arg(&report)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = wait_bounded(
        cmd.spawn().expect("spawning dialproof-load"),
        "dialproof-load",
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "dialproof-load failed ({}): {text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{text}");
    let json = std::fs::read(&report).expect("the JSON report");
    serde_json::from_slice(&json).expect("the report is JSON")
}

fn count(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

#[test]
fn the_load_tool_drives_a_mix_with_calls_and_reports_no_errors() {
    let s = Server::start(&sip_config(&trusted_line(2000, 603)));
    let sip = sip_of(&s);
    let r = run_load(
        &s,
        &[
            "--setup-local",
            "3",
            "--concurrency",
            "4",
            "--duration",
            "3",
            "--mix",
            "create=1,read=2,cancel=1",
            "--calls",
            "--call-share",
            "0.5",
            "--sip",
            &sip,
            "--drain-seconds",
            "20",
        ],
    );
    assert_eq!(r["run"]["mode"], "closed");
    assert_eq!(count(&r["run"]["keys"]), 3);
    for op in ["create", "read", "cancel"] {
        let o = &r["operations"][op];
        assert!(count(&o["ok"]) > 0, "no successful {op}: {r:#}");
        assert_eq!(count(&o["errors"]), 0, "{op} errors: {r:#}");
        assert_eq!(count(&o["ok"]), count(&o["latency_ms"]["count"]), "{op}");
    }
    assert_eq!(count(&r["errors"]), 0, "{r:#}");
    assert_eq!(r["errors_by_kind"], json!({}), "{r:#}");
    assert_eq!(count(&r["sent"]), count(&r["answered"]));
    assert!(r["throughput_per_second"].as_f64().unwrap() > 0.0);

    let calls = &r["calls"];
    let placed = count(&calls["placed"]);
    assert!(placed > 0, "{r:#}");
    assert_eq!(calls["finals"], json!({ "603": placed }), "{r:#}");
    let hooks = &r["webhooks"];
    assert_eq!(count(&hooks["calls_without_webhook"]), 0, "{r:#}");
    assert_eq!(count(&hooks["call_to_webhook_ms"]["count"]), placed);
    let received = count(&hooks["received"]);
    assert_eq!(hooks["signatures"], json!({ "valid": received }), "{r:#}");
    assert_eq!(count(&hooks["by_type"]["verification.completed"]), placed);

    // Open loop at a fixed rate: every request due is sent and answered.
    let r = run_load(
        &s,
        &[
            "--setup-local",
            "2",
            "--rate",
            "200",
            "--connections",
            "8",
            "--duration",
            "2",
            "--mix",
            "create=1,read=4,cancel=1",
        ],
    );
    assert_eq!(r["run"]["mode"], "open");
    assert_eq!(count(&r["errors"]), 0, "{r:#}");
    // 400 requests are due; on a machine busy with other tests a few may
    // still wait for a connection at the end, and are reported as such.
    let (sent, unsent) = (count(&r["sent"]), count(&r["unsent_at_end"]));
    assert!((399..=401).contains(&(sent + unsent)), "{r:#}");
    assert!(sent >= 300, "{r:#}");
    assert_eq!(count(&r["answered"]), sent, "{r:#}");
}

/// Keyed creates with deliberate replays: every create carries a fresh
/// `Idempotency-Key`, a share repeat an earlier one byte for byte, and
/// each replay must come back as its create's 201, marked replayed (the
/// tool counts one that does not as an error). An open loop at a fixed
/// rate: 400 requests at most, so the creates can never empty the
/// 2,000-number pool however fast the machine (a closed loop once did on
/// a fast CI machine and counted the 503s as errors).
#[test]
fn the_load_tool_sends_idempotency_keys_and_checks_replays() {
    let s = Server::with_pools(2000, 0);
    let r = run_load(
        &s,
        &[
            "--setup-local",
            "2",
            "--rate",
            "200",
            "--connections",
            "4",
            "--duration",
            "2",
            "--mix",
            "create=1,read=1",
            "--idempotency-keys",
            "--replay-share",
            "0.4",
        ],
    );
    for op in ["create", "replay"] {
        let o = &r["operations"][op];
        assert!(count(&o["ok"]) > 0, "no successful {op}: {r:#}");
        assert_eq!(count(&o["errors"]), 0, "{op} errors: {r:#}");
    }
    assert_eq!(count(&r["errors"]), 0, "{r:#}");
    // A replay takes no number: the pool used is the creates' alone.
    let creates = count(&r["operations"]["create"]["ok"]);
    let db = s.data_dir.join("dialproof.db");
    let conn = rusqlite::Connection::open(db).unwrap();
    let stored: i64 = conn
        .query_row(
            "SELECT count(*) FROM verifications WHERE idempotency_key LIKE 'load-%'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(stored as u64, creates, "{r:#}");
}

/// Reads over a working set: `--prefill` creates 600 verifications before
/// the run (not counted in its figures), and the reads of the run pick
/// among all of them, Zipf-skewed: every read finds its verification
/// (no 404, no read sent as a create for want of an id). The README's GET
/// figure is measured this way (benches/README.md, "Reads over a working
/// set").
#[test]
fn the_load_tool_prefills_a_working_set_and_reads_across_it() {
    let s = Server::with_pools(2000, 0);
    let r = run_load(
        &s,
        &[
            "--setup-local",
            "2",
            "--concurrency",
            "4",
            "--duration",
            "1",
            "--mix",
            "read=1",
            "--prefill",
            "600",
            "--working-set",
            "100000",
            "--zipf",
            "1",
            "--ttl",
            "600",
        ],
    );
    assert_eq!(r["prefill"]["created"], 600, "{r:#}");
    assert_eq!(r["prefill"]["failed"], 0, "{r:#}");
    let reads = &r["operations"]["read"];
    assert!(count(&reads["ok"]) > 0, "{r:#}");
    assert_eq!(count(&reads["errors"]), 0, "{r:#}");
    assert_eq!(
        reads["statuses"],
        json!({ "200": count(&reads["ok"]) }),
        "{r:#}"
    );
    assert_eq!(count(&r["substituted_creates"]), 0, "{r:#}");
    // The prefill is not part of the run's figures: no creates counted.
    assert!(r["operations"].get("create").is_none(), "{r:#}");
    let db = s.data_dir.join("dialproof.db");
    let conn = rusqlite::Connection::open(db).unwrap();
    let stored: i64 = conn
        .query_row("SELECT count(*) FROM verifications", [], |row| row.get(0))
        .unwrap();
    assert_eq!(stored, 600, "{r:#}");
}

/// A running `dialproof-webhook-receiver` and its base URL.
struct ReceiverProcess {
    child: Child,
    url: String,
    /// Everything printed after the READY line, once the process exits.
    rest: std::thread::JoinHandle<String>,
}

/// Starts the receiver binary for one event; reads its READY line.
fn start_receiver(secret_file: &std::path::Path) -> ReceiverProcess {
    let mut child = Command::new(tool("dialproof-webhook-receiver"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--events",
            "1",
            "--timeout",
            "60",
        ])
        .arg("--secret-file")
        .arg(secret_file)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawning dialproof-webhook-receiver");
    let mut lines = BufReader::new(child.stdout.take().expect("receiver stdout"));
    let mut ready = String::new();
    lines.read_line(&mut ready).expect("reading READY");
    let url = ready
        .trim()
        .strip_prefix("READY ")
        .unwrap_or_else(|| panic!("no READY line: {ready:?}"))
        .to_owned();
    let rest = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut lines, &mut rest);
        rest
    });
    ReceiverProcess { child, url, rest }
}

/// Waits for the receiver to exit successfully; returns what it printed.
fn receiver_output(r: ReceiverProcess) -> String {
    let out = wait_bounded(r.child, "the webhook receiver");
    let printed = r.rest.join().expect("receiver reader");
    assert!(
        out.status.success(),
        "receiver exited {}: {printed}",
        out.status
    );
    printed
}

#[test]
fn the_webhook_receiver_verifies_a_real_webhook_after_a_simulated_call() {
    let s = Server::start(&sip_config(&trusted_line(5, 603)));
    let v = s.cli(&["company", "create", "--name", "acme"]);
    let company = v["id"].as_i64().unwrap();
    let secret = v["webhook_secret"].as_str().unwrap().to_owned();
    let right = s.dir.path().join("right.secret");
    let wrong = s.dir.path().join("wrong.secret");
    std::fs::write(&right, format!("{secret}\n")).unwrap();
    std::fs::write(&wrong, "whsec_not_the_companys\n").unwrap();
    let good = start_receiver(&right);
    let bad = start_receiver(&wrong);
    s.cli(&[
        "company",
        "dev-urls",
        &company.to_string(),
        &good.url,
        &bad.url,
    ]);
    let token = s.create_key(company);

    let mut ids = Vec::new();
    for url in [&good.url, &bad.url] {
        let created = s.create_ok(
            &token,
            &json!({"phone": RU_PHONE, "webhook_url": format!("{url}/hook"), "ttl_seconds": 120}),
        );
        let dial = created["dial_number"].as_str().unwrap();
        let out = Command::new(tool("dialproof-sim"))
            .args(["call", "--to", dial, "--from", "+79161234567", "--target"])
            .arg(sip_of(&s))
            .output()
            .expect("running dialproof-sim");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success() && text.contains("<- 603"), "{text}");
        ids.push(created["verification_id"].as_str().unwrap().to_owned());
    }

    let printed = receiver_output(good);
    assert_eq!(
        printed.trim(),
        format!("verification.completed {} valid", ids[0])
    );
    let printed = receiver_output(bad);
    assert_eq!(
        printed.trim(),
        format!("verification.completed {} invalid (mismatch)", ids[1])
    );
}
