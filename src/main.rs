//! The `dialproof` command: `serve` runs the service (`dialproof::runtime`),
//! every other subcommand is an operator command (`dialproof::cli`).

use clap::Parser;
use dialproof::shared::config::Problems;
use dialproof::{cli, runtime};

fn main() {
    let args = cli::Args::parse();
    init_logging(args.log_format);
    let result = match &args.command {
        cli::Command::Serve(serve) => runtime::service::run(cli::config_path(&args), serve),
        cli::Command::Ha => dialproof::ha::run(cli::config_path(&args), args.log_format),
        cli::Command::Check => {
            let path = cli::config_path(&args);
            let code = runtime::preflight::check(path.as_deref());
            runtime::log_sink::flush();
            std::process::exit(code)
        }
        _ => cli::run(args),
    };
    // Lines still buffered leave before the process does.
    runtime::log_sink::flush();
    if let Err(e) = result {
        // A refused configuration: the lines `dialproof check` prints.
        match e.downcast_ref::<Problems>() {
            Some(problems) => runtime::preflight::print_problems(problems),
            None => eprintln!("error: {e:#}"),
        }
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
    runtime::log_sink::install_panic_flush();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(runtime::log_sink::LogSinkHandle(runtime::log_sink::stderr()))
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false);
    match format {
        cli::LogFormat::Text => builder.init(),
        cli::LogFormat::Json => builder.json().init(),
    }
}
