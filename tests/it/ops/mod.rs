//! What an operator runs and reads: the CLI's `--json` output ([`cli`]),
//! reloading the configuration on SIGHUP ([`reload`]), metrics, health and
//! readiness ([`metrics`]), the process's log format and TLS certificate
//! ([`process`]), a graceful stop on SIGTERM ([`shutdown`]), and what the
//! database and logs hold of the secrets ([`secrets`]).
//!
//! Not for: the bundled tools (`tools`), standby and failover (`standby`),
//! or crashes (`resilience::crash`).

mod alerts;
mod cli;
mod config_check;
mod metrics;
mod process;
mod reload;
mod secrets;
mod shutdown;
mod upgrade;
mod version;
