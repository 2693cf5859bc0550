//! `dialproof-restart-bench`: how long Dialproof takes to serve again after
//! a SIGKILL with a large database, and how much memory it keeps per
//! configured number and per pending verification.
//!
//! It runs the real binary (`--bin`, build it with `cargo build --release`)
//! on loopback in a fresh directory under the system temp dir, in three
//! configurations:
//!
//! 1. 20 numbers, no verifications: the baseline resident size;
//! 2. `--numbers` numbers, no verifications, each with a stored number
//!    health row (a service that has run a while has leased every number,
//!    and restores each one's health at its start; `--without-health`
//!    leaves them out): the difference to 1, divided by the extra numbers,
//!    is the resident cost of a configured number;
//! 3. the same numbers with `--stored` verifications in the database, of
//!    which `--pending` are pending (`--overdue` of those with their TTL run
//!    out while the service was down, the rest due over the next ten
//!    minutes): the difference to 2, divided by `--pending`, is the resident
//!    cost of a pending verification. It is started once on the freshly
//!    written database, killed with SIGKILL, and started again; both starts
//!    are timed from spawn to the READY line and to the first `200` of a
//!    GET (through `curl`) of a pending verification.
//!
//! Rows are written through the storage crate's writer, as the service
//! writes them. Webhook URLs are loopback addresses, which the service's
//! guard refuses, so nothing leaves the machine.
//!
//! Not for: a pass/fail test (figures depend on the machine; benches/README.md's
//! "Restart after SIGKILL, and memory" has this machine's), or cold-cache
//! timings (the database was just written and sits in the page cache).

use anyhow::{bail, Context, Result};
use clap::Parser;
use dialproof_engine::ids::VerificationId;
use dialproof_engine::pool::Pool;
use dialproof_engine::time::UnixMillis;
use dialproof_engine::verification::Status;
use dialproof_kit::cli;
use dialproof_kit::process::{Log, Running, Stderr};
use dialproof_storage::{
    Admin, NumberHealthChange, Options, StorageError, Store, VerificationRow, WriteOp,
};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long a start may take to print READY before the run is abandoned.
const READY_TIMEOUT: Duration = Duration::from_secs(300);
/// How long a started service runs before its resident size is read: the
/// webhook driver and the expiry thread have done their first work by then.
const SETTLE: Duration = Duration::from_secs(3);
/// Numbers of the baseline configuration.
const BASELINE_NUMBERS: u64 = 20;
/// First numbers of the two pools' ranges.
const DOMESTIC_START: u64 = 74_950_000_000;
const INTERNATIONAL_START: u64 = 442_030_000_000;
/// TTL of every seeded verification.
const TTL_SECONDS: u32 = 600;

#[derive(Debug, Parser)]
#[command(
    name = "dialproof-restart-bench",
    version,
    about = "Time Dialproof's restart after SIGKILL with a large database, and its memory per number and per pending verification"
)]
struct Args {
    /// The service binary to run (build it with `cargo build --release`).
    #[arg(long)]
    bin: PathBuf,
    /// Configured numbers (two ranges; 40..=2000000).
    #[arg(long, default_value_t = 1_000_000)]
    numbers: u64,
    /// Verifications written to the database.
    #[arg(long, default_value_t = 1_000_000)]
    stored: u64,
    /// Of those, pending (at most --numbers and --stored).
    #[arg(long, default_value_t = 300_000)]
    pending: u64,
    /// Of the pending, already past their TTL at the first start.
    #[arg(long, default_value_t = 3_000)]
    overdue: u64,
    /// Keep the run's directory (printed) instead of removing it.
    #[arg(long)]
    keep: bool,
    /// Measure numbers without number health rows, as a service holds
    /// them before its first lease of each (the figure before 2026-11-28).
    #[arg(long)]
    without_health: bool,
}

fn main() {
    if let Err(e) = run() {
        eprintln!("dialproof-restart-bench: {e:#}");
        std::process::exit(2);
    }
}

fn run() -> Result<()> {
    let args = Args::parse();
    check_args(&args)?;
    let root = std::env::temp_dir().join(format!("dialproof-restart-bench-{}", std::process::id()));
    let result = bench(&args, &root);
    if args.keep {
        println!("kept {}", root.display());
    } else {
        let _ = std::fs::remove_dir_all(&root);
    }
    result
}

fn check_args(args: &Args) -> Result<()> {
    if args.pending > args.numbers || args.pending > args.stored || args.overdue > args.pending {
        bail!("need overdue <= pending <= numbers and pending <= stored");
    }
    if args.numbers < 2 * BASELINE_NUMBERS || args.numbers > 2_000_000 {
        bail!("--numbers must be in 40..=2000000 (two ranges of at most a million)");
    }
    Ok(())
}

fn bench(args: &Args, root: &Path) -> Result<()> {
    let baseline = Instance::new(&root.join("baseline"), BASELINE_NUMBERS)?;
    let idle_baseline = baseline.start(&args.bin)?.settle_and_stop()?;

    let big = Instance::new(&root.join("big"), args.numbers)?;
    let (token, company_id, key_id) = big.client(&args.bin)?;
    if !args.without_health {
        seed_health(&big.db, args.numbers)?;
    }
    let idle_numbers = big.start(&args.bin)?.settle_and_stop()?;

    let now = UnixMillis(unix_millis_now());
    let seeded_at = Instant::now();
    let probe = seed(&big.db, args, company_id, key_id, now)?;
    let seed_time = seeded_at.elapsed();

    let first = big.start(&args.bin)?;
    let first_get = first.get_ok(&big, &token, &probe)?;
    let first_ready = first.process.ready_after();
    let mut first = first;
    std::thread::sleep(SETTLE);
    first.kill()?;
    let again = big.start(&args.bin)?;
    let again_get = again.get_ok(&big, &token, &probe)?;
    let again_ready = again.process.ready_after();
    let loaded = again.settle_and_stop()?;

    let per_number = per_item(
        idle_numbers.rss_kib,
        idle_baseline.rss_kib,
        args.numbers - BASELINE_NUMBERS,
    );
    let per_pending = per_item(loaded.rss_kib, idle_numbers.rss_kib, args.pending);
    println!(
        "numbers {} stored {} pending {} overdue {} (seeded in {:.1} s)",
        args.numbers,
        args.stored,
        args.pending,
        args.overdue,
        seed_time.as_secs_f64()
    );
    println!("first start on the seeded database: READY {first_ready:.2?}, first GET 200 {first_get:.2?}");
    println!("start after SIGKILL:                READY {again_ready:.2?}, first GET 200 {again_get:.2?}");
    println!(
        "resident: baseline {} KiB; {} numbers idle {} KiB; with {} pending {} KiB (peak {} KiB)",
        idle_baseline.rss_kib,
        args.numbers,
        idle_numbers.rss_kib,
        args.pending,
        loaded.rss_kib,
        loaded.hwm_kib
    );
    println!(
        "per configured number: {per_number:.1} B; per pending verification: {per_pending:.1} B"
    );
    Ok(())
}

/// Bytes per item of the difference between two resident sizes in KiB.
fn per_item(with_kib: u64, without_kib: u64, items: u64) -> f64 {
    (with_kib as f64 - without_kib as f64) * 1024.0 / items.max(1) as f64
}

/// A data directory and configuration with `numbers` always-up numbers.
struct Instance {
    config: PathBuf,
    data: PathBuf,
    db: PathBuf,
}

impl Instance {
    fn new(dir: &Path, numbers: u64) -> Result<Instance> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let data = dir.join("data");
        let domestic = numbers / 2;
        let config = format!(
            "[server]\nhttps_listen = \"127.0.0.1:0\"\nworkers = 2\n\n\
             [storage]\ndata_dir = {data:?}\n\n\
             [[lines]]\nname = \"bench\"\nmode = \"always_up\"\nnumbers = [\n  \
             {{ range_start = \"+{DOMESTIC_START}\", count = {domestic}, pool = \"domestic\" }},\n  \
             {{ range_start = \"+{INTERNATIONAL_START}\", count = {}, pool = \"international\" }},\n]\n",
            numbers - domestic
        );
        let path = dir.join("dialproof.toml");
        std::fs::write(&path, config).context("writing the config")?;
        Ok(Instance {
            config: path,
            db: data.join("dialproof.db"),
            data,
        })
    }

    /// Creates a company and an API key with the operator CLI; returns the
    /// token, the company id and the key id.
    fn client(&self, bin: &Path) -> Result<(String, i64, i64)> {
        let company = self.cli(bin, &["company", "create", "--name", "bench"])?;
        let company_id = company["id"].as_i64().context("company id")?;
        let id = company_id.to_string();
        let key = self.cli(
            bin,
            &["key", "create", "--company", &id, "--label", "bench"],
        )?;
        let token = key["token"].as_str().context("token")?.to_owned();
        let keys = Admin::open(&self.db)
            .map_err(|e| anyhow::anyhow!("{e}"))?
            .list_keys(Some(company_id))
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let key_id = keys.first().context("no key listed")?.id;
        Ok((token, company_id, key_id))
    }

    fn cli(&self, bin: &Path, args: &[&str]) -> Result<serde_json::Value> {
        Ok(cli::run(bin, Some(&self.config), args)?)
    }

    /// Spawns `serve` and waits for its READY line.
    fn start(&self, bin: &Path) -> Result<Started> {
        let log = std::fs::File::create(self.data.with_extension("log")).context("log file")?;
        let mut command = Command::new(bin);
        command
            .arg("--config")
            .arg(&self.config)
            .arg("serve")
            .env("DIALPROOF_LOG", "warn");
        let process = Running::spawn(&mut command, &Log::new(), Stderr::File(log), READY_TIMEOUT)
            .with_context(|| {
            format!(
                "starting dialproof; see {}",
                self.data.with_extension("log").display()
            )
        })?;
        let https = process
            .ready()
            .field("https")
            .context("no https= in READY")?
            .to_owned();
        Ok(Started { process, https })
    }
}

/// A started service.
struct Started {
    process: Running,
    https: String,
}

struct Memory {
    rss_kib: u64,
    hwm_kib: u64,
}

impl Started {
    /// GETs verification `id` until a 200; returns the time since spawn.
    fn get_ok(&self, instance: &Instance, token: &str, id: &str) -> Result<Duration> {
        let port = self.https.rsplit(':').next().context("https port")?;
        let cert = instance.data.join("tls").join("cert.pem");
        for _ in 0..100 {
            let out = Command::new("curl")
                .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "--resolve"])
                .arg(format!("localhost:{port}:127.0.0.1"))
                .arg("--cacert")
                .arg(&cert)
                .arg("-H")
                .arg(format!("Authorization: Bearer {token}"))
                .arg(format!(
                    "https://localhost:{port}/api/v1/verifications/{id}/"
                ))
                .output()
                .context("running curl")?;
            if out.stdout == b"200" {
                return Ok(self.process.started().elapsed());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        bail!("GET {id} never answered 200");
    }

    /// Lets the service run for [`SETTLE`], reads its memory, stops it.
    fn settle_and_stop(mut self) -> Result<Memory> {
        std::thread::sleep(SETTLE);
        let memory = memory(self.process.pid())?;
        // A large database may take long to close: bounded like a start.
        self.process
            .terminate(READY_TIMEOUT)
            .context("stopping dialproof")?;
        Ok(memory)
    }

    /// SIGKILL: no shutdown of any kind.
    fn kill(&mut self) -> Result<()> {
        self.process.kill().context("SIGKILL")?;
        Ok(())
    }
}

/// VmRSS and VmHWM of process `pid`, in KiB.
fn memory(pid: u32) -> Result<Memory> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).context("reading /proc")?;
    let field = |name: &str| -> Result<u64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .with_context(|| format!("no {name} in /proc/{pid}/status"))
    };
    Ok(Memory {
        rss_kib: field("VmRSS:")?,
        hwm_kib: field("VmHWM:")?,
    })
}

fn unix_millis_now() -> i64 {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Writes `args.stored` verifications through the storage crate's writer:
/// the terminal ones first (older), then the pending ones. Returns the id of
/// a pending one to GET.
fn seed(db: &Path, args: &Args, company_id: i64, key_id: i64, now: UnixMillis) -> Result<String> {
    let store = Store::open(db, Options::default()).map_err(|e| anyhow::anyhow!("{e}"))?;
    let (tx, rx) = mpsc::channel();
    let mut probe = String::new();
    for n in 0..args.stored {
        let mut row = seeded_row(n, args, now);
        row.company_id = company_id;
        row.api_key_id = key_id;
        probe.clone_from(&row.id);
        loop {
            let tx = tx.clone();
            let op = WriteOp::InsertVerification {
                keyed: None,
                row: row.clone(),
                reply: Box::new(move |r| {
                    let _ = tx.send(r);
                }),
            };
            match store.submit(op) {
                Ok(()) => break,
                // Back-pressure: the writer's queue is full; let it drain.
                Err(StorageError::QueueFull) => std::thread::sleep(Duration::from_millis(2)),
                Err(e) => bail!("seeding: {e}"),
            }
        }
    }
    for _ in 0..args.stored {
        rx.recv_timeout(READY_TIMEOUT)
            .context("insert reply")?
            .map_err(|e| anyhow::anyhow!("insert: {e}"))?;
    }
    store.shutdown();
    Ok(probe)
}

/// Writes a number health row for each of the `numbers` configured
/// numbers through the storage crate's writer, in chunks of a thousand.
fn seed_health(db: &Path, numbers: u64) -> Result<()> {
    let store = Store::open(db, Options::default()).map_err(|e| anyhow::anyhow!("{e}"))?;
    for first in (0..numbers).step_by(1000) {
        let rows = (first..numbers.min(first + 1000))
            .map(|i| NumberHealthChange {
                number: number_at(i, numbers).0,
                leases: 40 + (i % 7) as u32,
                completed: 30 + (i % 5) as u32,
                expired_uncalled: 5,
                stray_calls: (i % 2) as u32,
                last_completion_at: Some(UnixMillis(unix_millis_now() - 60_000)),
                // Two numbers of three with a run: more than a pool with a
                // completion share of 0.6 has at any moment.
                uncalled_in_a_row: (i % 3) as u32,
            })
            .collect();
        let (tx, rx) = mpsc::channel();
        store
            .submit(WriteOp::SaveNumberHealth {
                changes: rows,
                quarantines: Vec::new(),
                reply: Box::new(move |r| {
                    let _ = tx.send(r);
                }),
            })
            .map_err(|e| anyhow::anyhow!("seeding health: {e}"))?;
        rx.recv_timeout(READY_TIMEOUT)
            .context("health reply")?
            .map_err(|e| anyhow::anyhow!("health: {e}"))?;
    }
    store.shutdown();
    Ok(())
}

/// The configured number at `index` of `numbers` (two pools' ranges),
/// with its pool.
fn number_at(index: u64, numbers: u64) -> (String, Pool) {
    let domestic = numbers / 2;
    if index < domestic {
        (format!("+{}", DOMESTIC_START + index), Pool::Domestic)
    } else {
        let i = index - domestic;
        (format!("+{}", INTERNATIONAL_START + i), Pool::International)
    }
}

/// Row `n` of the seeded database (company and key ids left at 0). Pending
/// rows hold distinct numbers; `--overdue` of them expired 10 minutes ago,
/// the rest expire over the next ten minutes.
fn seeded_row(n: u64, args: &Args, now: UnixMillis) -> VerificationRow {
    let terminal = args.stored - args.pending;
    let (number_index, created_at, status) = if n < terminal {
        let created_at = now.plus_millis(-86_400_000 + (n % 80_000_000) as i64);
        (n % args.numbers, created_at, Status::Expired)
    } else {
        let j = n - terminal;
        let age_ms = if j < args.overdue {
            1_200_000
        } else {
            (j % 590) as i64 * 1000
        };
        (j, now.plus_millis(-age_ms), Status::Pending)
    };
    let (dial_number, pool) = number_at(number_index, args.numbers);
    VerificationRow {
        id: VerificationId::new(created_at, u128::from(n)).into_string(),
        company_id: 0,
        api_key_id: 0,
        phone: "+79123456789".to_owned(),
        dial_number,
        pool,
        client_ref: format!("bench-{n}"),
        info: String::new(),
        // Loopback: the service's guard refuses it; nothing leaves the host.
        webhook_url: "https://127.0.0.1:9/hook".to_owned(),
        ttl_seconds: TTL_SECONDS,
        status,
        created_at,
        expires_at: created_at.plus_seconds(TTL_SECONDS),
        completed_at: None,
        caller_id: String::new(),
        lease_generation: 1,
        failure_reason: None,
        idempotency_key: None,
        livemode: true,
        caller_evidence: None,
    }
}
