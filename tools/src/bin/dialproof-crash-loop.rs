//! `dialproof-crash-loop`: runs the service under mixed load on loopback,
//! SIGKILLs it at random moments `--kills` times (default 200), restarts
//! it, and checks the durability invariants after every restart and at the
//! end (tests/README.md, "Reliability"). Prints the kills survived and every
//! invariant violation; exits 1 when there was any, 2 when the run itself
//! failed.
//!
//! Not for: anything beyond the command line; the work is in
//! `dialproof_tools::crash`.

use clap::Parser;
use dialproof_tools::crash::{self, Settings};
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[derive(Parser, Debug)]
#[command(
    name = "dialproof-crash-loop",
    about = "SIGKILL the service under load, restart, check invariants"
)]
struct Args {
    /// The service binary (default: `dialproof` next to this executable).
    #[arg(long)]
    bin: Option<PathBuf>,
    /// Directory for the service's config, data and log (default: a new
    /// directory under the system's temporary directory; kept afterwards).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// How many SIGKILLs.
    #[arg(long, default_value_t = 200)]
    kills: u32,
    /// Seed of the random choices (default: from the clock; printed).
    #[arg(long)]
    seed: Option<u64>,
    /// Numbers on the service's one line.
    #[arg(long, default_value_t = 20)]
    numbers: u32,
    /// Shortest time under load before a kill, in milliseconds.
    #[arg(long, default_value_t = 200)]
    min_up_ms: u64,
    /// Longest time under load before a kill, in milliseconds.
    #[arg(long, default_value_t = 1500)]
    max_up_ms: u64,
    /// Load threads (each one HTTPS connection).
    #[arg(long, default_value_t = 3)]
    threads: usize,
    /// Stop after this many seconds whatever the kills done.
    #[arg(long, default_value_t = 1200)]
    max_seconds: u64,
}

fn main() {
    let args = Args::parse();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1);
    let seed = args.seed.unwrap_or(now);
    let bin = args.bin.unwrap_or_else(|| {
        std::env::current_exe()
            .ok()
            .and_then(|exe| Some(exe.parent()?.join("dialproof")))
            .unwrap_or_else(|| PathBuf::from("dialproof"))
    });
    let dir = args
        .dir
        .unwrap_or_else(|| std::env::temp_dir().join(format!("dialproof-crash-{seed}")));
    if args.min_up_ms > args.max_up_ms || args.threads == 0 {
        eprintln!("dialproof-crash-loop: need --min-up-ms <= --max-up-ms and --threads >= 1");
        std::process::exit(2);
    }
    println!(
        "crash loop: {} kills, seed {seed}, {} numbers, up {}..{} ms, dir {}",
        args.kills,
        args.numbers,
        args.min_up_ms,
        args.max_up_ms,
        dir.display()
    );
    let settings = Settings {
        bin,
        dir,
        kills: args.kills,
        seed,
        numbers: args.numbers,
        up_ms: (args.min_up_ms, args.max_up_ms),
        load_threads: args.threads,
        max_duration: Duration::from_secs(args.max_seconds),
    };
    match crash::run(&settings) {
        Ok(outcome) => {
            print!("{}", outcome.report);
            if !outcome.violations.is_empty() || outcome.kills < args.kills {
                std::process::exit(1);
            }
        }
        Err(e) => {
            eprintln!("dialproof-crash-loop: {e:#}");
            std::process::exit(2);
        }
    }
}
