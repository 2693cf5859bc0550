//! Failover to a standby (README, "Automatic failover", the manual standby;
//! tools/deploy/README.md, "Standby with Litestream"): the
//! primary runs under `litestream replicate -exec` and replicates to a
//! directory; under a steady create load with a few real calls it is
//! SIGKILLed (Litestream first, then the service, as when the machine
//! dies); the standby restores the replica and starts `--promoted`.
//!
//! Checked: the standby serves within 60 s of the kill; every
//! verification acknowledged more than the replication interval before
//! the kill is there with the same fields; no number is leased to two
//! pending verifications across both histories (the lost tail's
//! verifications still count as pending: their users may still call);
//! every completion the replica kept has its webhook delivered after the
//! promotion, byte for byte what any earlier delivery sent. The hold's
//! gauges, its survival of a reload and its end are in
//! `standby::promotion`.
//!
//! Needs Litestream 0.5.17 (`tools/test.sh` installs it into its Python
//! virtualenv; `DIALPROOF_PYENV` points there). The load's rate and length
//! can be raised for a longer run (`tools/failover-soak.sh`) with
//! `FAILOVER_RATE` (creates a second) and `FAILOVER_SECONDS`.
//!
//! Not for: the promoted start's hold in detail (`standby::promotion`).

use crate::support::sip::*;
use crate::support::tools::pyenv_bin;
use crate::support::webhooks::*;
use crate::support::*;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Numbers of the one line, at least: enough for the short run's load,
/// hold and standby creates (a longer run gets more, see `numbers_for`).
const NUMBERS_MIN: u64 = 2000;
/// Litestream's monitor and sync intervals (its defaults), plus a second
/// of slack: what was acknowledged longer ago than this is replicated.
pub(crate) const REPLICATION_INTERVAL: Duration = Duration::from_secs(3);
const SERVE_WITHIN: Duration = Duration::from_secs(60);
const CALLS: usize = 3;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Numbers for a run of `creates`: the load's, a hold of up to twice as
/// many, and the standby's creates (a quarter of the line).
pub(crate) fn numbers_for(creates: u64) -> u64 {
    (4 * creates + 1000).max(NUMBERS_MIN)
}

pub(crate) fn litestream() -> PathBuf {
    pyenv_bin("litestream")
}

/// Litestream's configuration: the primary's database to a directory.
pub(crate) fn litestream_config(dir: &Path, db: &Path, replica: &Path) -> PathBuf {
    let path = dir.join("litestream.yml");
    let text = format!(
        "dbs:\n  - path: {}\n    monitor-interval: 1s\n    replica:\n      type: file\n      \
         path: {}\n      sync-interval: 1s\n",
        db.display(),
        replica.display()
    );
    std::fs::write(&path, text).expect("litestream config");
    path
}

pub(crate) struct Acked {
    pub(crate) body: Value,
    at: Instant,
}

/// Creates at `rate` a second until `stop`; every 201 with its moment.
pub(crate) fn create_load(
    s: &Server,
    token: &str,
    url: &str,
    rate: u64,
    stop: &AtomicBool,
) -> Vec<Acked> {
    let mut acked = Vec::new();
    let start = Instant::now();
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let due = start + Duration::from_micros(n * 1_000_000 / rate);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let r = s.create(
            token,
            &json!({"phone": RU_PHONE, "webhook_url": url, "client_ref": format!("load-{n}"),
                    "info": "failover", "ttl_seconds": 600}),
        );
        assert_eq!(r.status, 201, "create {n}: {}", r.text());
        acked.push(Acked {
            body: r.json(),
            at: Instant::now(),
        });
        n += 1;
    }
    acked
}

/// One real call to `dial` (sipp as the provider), answered 603.
pub(crate) fn call(s: &Server, dial: &str) {
    let dir = workdir();
    let sf = scenario(
        dir.path(),
        "call.xml",
        &[
            ("FROM_HEADER", &from_user("89161234567")),
            ("HEADERS", "X-Test: failover"),
            ("CODE", "603"),
        ],
    );
    let out = run_uac(dir.path(), &sf, sip_addr(s), dial, "127.0.0.1", 1);
    assert_sipp_ok(&out, dir.path(), s);
}

pub(crate) fn id(v: &Value) -> &str {
    v["verification_id"].as_str().expect("verification_id")
}

/// The primary, prepared and started under `litestream replicate -exec`.
struct Primary {
    server: Server,
    token: String,
    replica: PathBuf,
}

fn start_primary(rx: &Receiver, lines: &str) -> Primary {
    let mut server = Server::prepare(&format!(
        "replication = \"litestream\"\n\n{FAST_RETRIES}{lines}"
    ));
    let company = server.create_company("acme");
    server.cli(&["company", "dev-urls", &company.to_string(), &rx.base_url()]);
    let token = server.create_key(company);
    let prefix = token.split('_').nth(2).expect("prefix").to_owned();
    // Set before the start: the default per-key limit would throttle the
    // load.
    server.cli(&["key", "set-limit", &prefix, "100000"]);
    let replica = server.dir.path().join("replica");
    let ls_config = litestream_config(
        server.dir.path(),
        &server.data_dir.join("dialproof.db"),
        &replica,
    );
    let ls = litestream();
    let ls = ls.to_str().expect("utf-8 path");
    let cfg = ls_config.to_str().expect("utf-8 path");
    server.set_supervisor(&[ls, "replicate", "-config", cfg, "-exec"]);
    server.launch();
    Primary {
        server,
        token,
        replica,
    }
}

/// What the primary acknowledged: the load's 201s, and the verifications
/// completed by a call with the moment the call was answered.
pub(crate) struct Acknowledged {
    pub(crate) creates: Vec<Acked>,
    pub(crate) calls: Vec<(String, Instant)>,
}

/// The create load for `load`, with [`CALLS`] calls made meanwhile (each
/// to a verification of its own, so the load's creates keep their fields).
pub(crate) fn run_load(
    s: &Server,
    token: &str,
    url: &str,
    rate: u64,
    load: Duration,
) -> Acknowledged {
    let stop = AtomicBool::new(false);
    let mut calls = Vec::new();
    let creates = std::thread::scope(|scope| {
        let load_thread = scope.spawn(|| create_load(s, token, url, rate, &stop));
        let started = Instant::now();
        for n in 0..CALLS {
            std::thread::sleep(load / (CALLS as u32 + 1));
            let v = s.create_ok(
                token,
                &json!({"phone": RU_PHONE, "webhook_url": url, "client_ref": format!("call-{n}"),
                        "ttl_seconds": 600}),
            );
            call(s, v["dial_number"].as_str().expect("dial"));
            calls.push((id(&v).to_owned(), Instant::now()));
        }
        if let Some(rest) = load.checked_sub(started.elapsed()) {
            std::thread::sleep(rest);
        }
        stop.store(true, Ordering::Relaxed);
        load_thread.join().expect("load thread")
    });
    Acknowledged { creates, calls }
}

/// Restores the newest replica into a new data directory and starts it
/// promoted; returns the server and how long the restore took.
fn restore_and_promote(replica: &Path, lines: &str) -> (Server, Duration) {
    let mut standby = Server::prepare(&format!("{FAST_RETRIES}{lines}"));
    std::fs::create_dir_all(&standby.data_dir).expect("data dir");
    let started = Instant::now();
    let out = Command::new(litestream())
        .arg("restore")
        .arg("-o")
        .arg(standby.data_dir.join("dialproof.db"))
        .arg(format!("file://{}", replica.display()))
        .output()
        .expect("litestream restore");
    assert!(
        out.status.success(),
        "restore failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let took = started.elapsed();
    standby.set_serve_args(&["--promoted"]);
    standby.launch();
    (standby, took)
}

/// What the standby holds of the primary's verifications.
pub(crate) struct Restored {
    pub(crate) rows: HashMap<String, Value>,
    pub(crate) lost: usize,
    pub(crate) newest_ack: Option<Instant>,
}

/// Every 201 older than the replication interval is there with the same
/// fields, every call older than that completed it; the rest is there as
/// acknowledged or unknown (404).
pub(crate) fn check_restored(
    standby: &Server,
    token: &str,
    acked: &Acknowledged,
    killed: Instant,
) -> Restored {
    let mut r = Restored {
        rows: HashMap::new(),
        lost: 0,
        newest_ack: None,
    };
    for a in &acked.creates {
        let got = standby.get(token, id(&a.body));
        match got.status {
            200 => {
                assert_eq!(got.json(), a.body, "restored with other fields");
                r.newest_ack = Some(r.newest_ack.map_or(a.at, |t| t.max(a.at)));
                r.rows.insert(id(&a.body).to_owned(), a.body.clone());
            }
            404 => {
                let age = killed.duration_since(a.at);
                assert!(
                    age <= REPLICATION_INTERVAL,
                    "{} acknowledged {age:?} before the kill is lost",
                    id(&a.body)
                );
                r.lost += 1;
            }
            other => panic!("GET {}: {other} {}", id(&a.body), got.text()),
        }
    }
    for (call_id, at) in &acked.calls {
        let got = standby.get(token, call_id);
        if killed.duration_since(*at) > REPLICATION_INTERVAL {
            assert_eq!(got.status, 200, "{call_id}: {}", got.text());
            let g = got.json();
            assert_eq!(g["status"], "completed", "{g}");
            assert_eq!(g["caller_id_received"], "+79161234567", "{g}");
        }
        if got.status == 200 {
            r.rows.insert(call_id.clone(), got.json());
        }
    }
    r
}

/// No double lease: `creates` new verifications on the standby never get
/// a number of a primary verification that may still be pending — lost
/// (unknown here, but its user may call) or restored pending.
pub(crate) fn check_no_double_lease(
    standby: &Server,
    token: &str,
    url: &str,
    acked: &Acknowledged,
    restored: &Restored,
    creates: usize,
) {
    let completed: HashSet<&str> = acked.calls.iter().map(|(id, _)| id.as_str()).collect();
    let mut may_be_pending: HashMap<String, String> = HashMap::new();
    for a in &acked.creates {
        let v_id = id(&a.body);
        let done = restored
            .rows
            .get(v_id)
            .is_some_and(|g| g["status"] != "pending");
        if !done && !completed.contains(v_id) {
            let dial = a.body["dial_number"].as_str().expect("dial").to_owned();
            may_be_pending.insert(dial, v_id.to_owned());
        }
    }
    let mut issued = HashSet::new();
    for n in 0..creates {
        let v = standby.create_ok(
            token,
            &json!({"phone": RU_PHONE, "webhook_url": url, "client_ref": format!("standby-{n}")}),
        );
        let dial = v["dial_number"].as_str().expect("dial").to_owned();
        assert!(
            !may_be_pending.contains_key(&dial),
            "{dial} issued to {} on the standby while {} may be pending on the primary",
            id(&v),
            may_be_pending[&dial]
        );
        assert!(issued.insert(dial), "issued twice on the standby");
    }
}

/// Every restored completion's webhook arrives; all deliveries of one
/// event carry the same bytes, and nothing contradicts a completion.
/// Returns how many restored completions there were.
pub(crate) fn check_webhooks(rx: &Receiver, restored: &Restored) -> usize {
    let completions: Vec<&String> = restored
        .rows
        .iter()
        .filter(|(_, g)| g["status"] == "completed")
        .map(|(id, _)| id)
        .collect();
    rx.wait_until(
        "every restored completion delivered",
        Duration::from_secs(30),
        |r| {
            let seen: HashSet<String> = r
                .hits_to("/hook")
                .iter()
                .map(|h| {
                    h.json()["verification_id"]
                        .as_str()
                        .unwrap_or("")
                        .to_owned()
                })
                .collect();
            completions.iter().all(|id| seen.contains(id.as_str()))
        },
    );
    let mut bodies: HashMap<String, Vec<u8>> = HashMap::new();
    for hit in rx.hits_to("/hook") {
        let p = hit.json();
        let v_id = p["verification_id"].as_str().expect("id").to_owned();
        assert_eq!(p["type"], "verification.completed", "{p}");
        if let Some(before) = bodies.insert(v_id.clone(), hit.body.clone()) {
            assert_eq!(before, hit.body, "{v_id}: two different bodies");
        }
    }
    completions.len()
}

/// README, "Automatic failover" (the manual standby, the lost tail): the
/// standby serves within 60 s of the
/// primary's death, loses nothing acknowledged before the replication
/// interval, never leases one number twice and delivers what the replica
/// kept.
#[test]
fn a_promoted_standby_takes_over_without_double_leases() {
    let rate = env_or("FAILOVER_RATE", 40);
    let load = Duration::from_secs(env_or("FAILOVER_SECONDS", 4));
    let rx = Receiver::recording(Answer::Status(200));
    let numbers = numbers_for(rate * load.as_secs());
    let lines = sip_config(&trusted_line(numbers, 603));
    let mut primary = start_primary(&rx, &lines);
    let url = rx.url("/hook");
    // The kill follows the load's last 201 within milliseconds.
    let acked = run_load(&primary.server, &primary.token, &url, rate, load);
    primary.server.kill();
    let killed = Instant::now();

    let (standby, restore_took) = restore_and_promote(&primary.replica, &lines);
    assert_eq!(
        standby
            .get(&primary.token, id(&acked.creates[0].body))
            .status,
        200
    );
    let serving_after = killed.elapsed();
    assert!(
        serving_after < SERVE_WITHIN,
        "serving {serving_after:?} after the kill"
    );

    let restored = check_restored(&standby, &primary.token, &acked, killed);
    let creates = (acked.creates.len() + 50).min(numbers as usize / 4);
    check_no_double_lease(&standby, &primary.token, &url, &acked, &restored, creates);
    let held = standby
        .wait_for_log(Duration::from_secs(5), |l| {
            l.contains("promotion: holding back")
        })
        .expect("the promotion's log line");
    let completions = check_webhooks(&rx, &restored);

    let lost_window = restored.newest_ack.map(|t| killed.duration_since(t));
    eprintln!(
        "failover: {} creates at {rate}/s over {load:?}, {} calls; {} lost \
         (newest restored ack {lost_window:?} before the kill); restore took {restore_took:?}; \
         serving {serving_after:?} after the kill; {held}; {} webhooks ({completions} restored \
         completions)",
        acked.creates.len(),
        acked.calls.len(),
        restored.lost,
        rx.hits_to("/hook").len(),
    );
}
