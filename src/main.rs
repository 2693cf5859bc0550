//! Dialproof: phone-ownership verification by inbound call.
//!
//! The binary is glue: it reads the configuration, opens storage, starts the
//! listeners and threads, and runs the operator commands. Decisions live in
//! `dialproof-engine`, persistence in `dialproof-storage`.
//!
//! Its folders are the runtime's parts:
//! - `runtime/`: start, recovery, stop, the shared state and its threads
//!   (commit consumer, expiry, control loop), configuration, lease table;
//! - `http/`: listeners, TLS, the HTTP/1.1 layer, the port-80 redirect;
//! - `api/`: the public API's routes, authentication, key cache, rate
//!   limiters, dashboard sessions;
//! - `openapi/`: the schema and the explorer;
//! - `ops/`: the operators' listener (metrics, health, readiness);
//! - `sip/`: the SIP socket, lines, calls;
//! - `webhooks/`: the outbox driver and the HTTP senders;
//! - `cli/`: the operator commands.

mod api;
mod cli;
mod dashboard;
mod http;
mod openapi;
mod ops;
mod runtime;
mod sip;
mod webhooks;

use clap::Parser;

fn main() {
    let args = cli::Args::parse();
    init_logging(args.log_format);
    if let Err(e) = cli::run(args) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn init_logging(format: cli::LogFormat) {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    // may logs every socket registration at INFO; that is noise to an
    // operator, so its default level is WARN.
    let filter = EnvFilter::try_from_env("DIALPROOF_LOG")
        .unwrap_or_else(|_| EnvFilter::new("info,may=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false);
    match format {
        cli::LogFormat::Text => builder.init(),
        cli::LogFormat::Json => builder.json().init(),
    }
}
