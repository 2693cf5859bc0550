//! `dialproof-load`: HTTPS load for Dialproof's API (create / read /
//! cancel in chosen proportions, open loop at a rate or closed loop at a
//! concurrency, optional SIP calls and webhook timing). Loopback targets
//! only unless `--allow-remote`. See `dialproof-load --help` and
//! tools/README.md.
//!
//! Not for: anything beyond parsing the command line and printing the
//! report; the work is in `dialproof_tools::load`.

use clap::Parser;
use dialproof_tools::load::{self, args::Args};

fn main() {
    let args = Args::parse();
    match load::run(&args) {
        Ok(report) => print!("{}", report.render()),
        Err(e) => {
            eprintln!("dialproof-load: {e:#}");
            std::process::exit(2);
        }
    }
}
