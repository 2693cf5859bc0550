//! The operator CLI against the server's configuration file, as an
//! operator runs it (`dialproof --config F --json ...`, through the kit's
//! [`dialproof_kit::cli`]): companies, keys, users.
//!
//! Not for: the service's process (see [`super::server`]).

use super::{Server, BIN};
use dialproof_kit::cli;
use serde_json::Value;
use std::path::Path;
use std::process::Output;

impl Server {
    /// Runs `dialproof --config <file> --json <args>`; panics unless it
    /// succeeds; returns its JSON answer.
    pub fn cli(&self, args: &[&str]) -> Value {
        cli::answer(args, &self.cli_output(args)).unwrap_or_else(|e| panic!("{e}"))
    }

    /// The whole output of `dialproof --config <file> --json <args>`,
    /// whatever its exit status.
    pub fn cli_output(&self, args: &[&str]) -> Output {
        cli::command(Path::new(BIN), Some(&self.config_path))
            .args(args)
            .output()
            .expect("running dialproof CLI")
    }

    /// Like [`Server::cli_output`], with `input` on standard input.
    pub fn cli_output_with_input(&self, args: &[&str], input: &str) -> Output {
        let mut command = cli::command(Path::new(BIN), Some(&self.config_path));
        command.args(args);
        cli::output_with_input(command, input).expect("running dialproof CLI")
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
        let company = company.to_string();
        let v = self.cli(&["key", "create", "--company", &company, "--label", "test"]);
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
}

/// Waits (bounded) until the running service applies an operator change
/// (it looks for them every second): `probe` returns true once it does.
pub fn eventually(what: &str, mut probe: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while std::time::Instant::now() < deadline {
        if probe() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("the running service did not apply: {what}");
}
