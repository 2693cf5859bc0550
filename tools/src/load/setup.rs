//! Where the API keys come from: a file of tokens, or `--setup-local`,
//! which makes a company and its keys on a local service with the operator
//! CLI (`dialproof --json company create`, `key create`, `key set-limit`,
//! `company dev-urls`), exactly as an operator would.
//!
//! Not for: anything that needs the service's database directly; the CLI
//! is the only way in, so what is set up is what an operator gets.

use anyhow::{bail, Context, Result};
use dialproof_kit::cli;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Most tokens read from a keys file.
pub const KEYS_FILE_MAX: usize = 100_000;
/// How long the running service takes to see operator changes (it
/// reloads keys and companies within a second).
pub const PICKUP_DELAY: Duration = Duration::from_millis(1500);

/// Keys and what the run knows about their company.
#[derive(Debug, Clone)]
pub struct Keys {
    pub tokens: Vec<String>,
    /// Webhook secrets of the company (known after --setup-local).
    pub webhook_secrets: Vec<String>,
}

/// Reads tokens, one per line; blank lines and `#` comments are skipped.
pub fn read_keys_file(path: &Path) -> Result<Vec<String>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let tokens: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect();
    if tokens.is_empty() {
        bail!("no token in {}", path.display());
    }
    if tokens.len() > KEYS_FILE_MAX {
        bail!("more than {KEYS_FILE_MAX} tokens in {}", path.display());
    }
    if let Some(bad) = tokens.iter().find(|t| !is_token_shaped(t)) {
        let shown: String = bad.chars().take(12).collect();
        bail!(
            "{shown:?}... in {} is not a svc_live_<prefix>_<secret> token",
            path.display()
        );
    }
    Ok(tokens)
}

fn is_token_shaped(t: &str) -> bool {
    t.strip_prefix("svc_live_")
        .and_then(|r| r.split_once('_'))
        .is_some_and(|(prefix, secret)| {
            prefix.len() == 8 && !secret.is_empty() && t.bytes().all(|b| b.is_ascii_graphic())
        })
}

/// The operator CLI of a local service.
pub struct Operator {
    bin: PathBuf,
    config: Option<PathBuf>,
}

impl Operator {
    /// `bin` if given, else `dialproof` next to this executable, else on PATH.
    pub fn new(bin: Option<&Path>, config: Option<&Path>) -> Operator {
        let bin = bin.map(Path::to_path_buf).unwrap_or_else(|| {
            std::env::current_exe()
                .ok()
                .and_then(|exe| Some(exe.parent()?.join("dialproof")))
                .filter(|p| p.is_file())
                .unwrap_or_else(|| PathBuf::from("dialproof"))
        });
        Operator {
            bin,
            config: config.map(Path::to_path_buf),
        }
    }

    /// Runs `dialproof [--config F] --json ARGS`; returns its JSON answer.
    fn run(&self, args: &[&str]) -> Result<Value> {
        cli::run(&self.bin, self.config.as_deref(), args)
            .with_context(|| format!("running {}", self.bin.display()))
    }

    /// A new company with `n` keys at `limit` requests per minute, and
    /// `dev_url` as its development URL (where its webhooks may go).
    pub fn setup(&self, n: usize, limit: u32, dev_url: &str) -> Result<Keys> {
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let company = self.run(&["company", "create", "--name", &format!("load-{stamp}")])?;
        let id = company["id"]
            .as_i64()
            .context("no id in `company create` output")?
            .to_string();
        let secret = company["webhook_secret"]
            .as_str()
            .context("no webhook_secret in `company create` output")?
            .to_owned();
        self.run(&["company", "dev-urls", &id, dev_url])?;
        let mut tokens = Vec::with_capacity(n);
        for i in 0..n {
            let key = self.run(&[
                "key",
                "create",
                "--company",
                &id,
                "--label",
                &format!("load-{i}"),
            ])?;
            let token = key["token"].as_str().context("no token in `key create`")?;
            let prefix = key["prefix"]
                .as_str()
                .context("no prefix in `key create`")?;
            self.run(&["key", "set-limit", prefix, &limit.to_string()])?;
            tokens.push(token.to_owned());
        }
        Ok(Keys {
            tokens,
            webhook_secrets: vec![secret],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_shapes() {
        assert!(is_token_shaped("svc_live_AbCdEfGh_secret"));
        for bad in [
            "svc_live_short_x",
            "svc_test_AbCdEfGh_x",
            "svc_live_AbCdEfGh_",
            "svc_live_AbCdEfGh",
            "svc_live_AbCdEfGh_a b",
        ] {
            assert!(!is_token_shaped(bad), "{bad}");
        }
    }
}
