//! The `[ha]` section: automatic failover's settings (README, "Automatic
//! failover"). Only `dialproof ha` reads it; `serve` and `check` validate
//! it like every other section.
//!
//! Not for: the election's rules (`dialproof_engine::ha`) or talking to
//! etcd (`crate::ha`).

use anyhow::{bail, Result};
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// The default of `lease_ttl_seconds`.
pub const LEASE_TTL_SECONDS_DEFAULT: u64 = 5;
/// The accepted TTLs: under 2 s a keep-alive and a fence no longer fit
/// between etcd's heartbeats; over 60 s a dead primary blocks for minutes.
pub const LEASE_TTL_SECONDS: std::ops::RangeInclusive<u64> = 2..=60;
/// The longest cluster or node name.
pub const NAME_LEN_MAX: usize = 64;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HaConfig {
    /// etcd's client URLs (`http://host:2379`), every member's.
    pub endpoints: Vec<String>,
    /// The cluster's name: the primary's key is `/dialproof/<cluster>/primary`.
    pub cluster: String,
    /// This node's name, unique in the cluster (the key's value).
    pub node: String,
    #[serde(default = "ttl_default")]
    pub lease_ttl_seconds: u64,
    /// The Litestream binary (default: `litestream` on PATH).
    #[serde(default = "litestream_default")]
    pub litestream: PathBuf,
    /// Litestream's configuration naming this node's database and the
    /// shared replica.
    pub litestream_config: PathBuf,
    /// Where `dialproof ha` answers `GET /metrics` (off unless set).
    pub metrics_listen: Option<SocketAddr>,
}

fn ttl_default() -> u64 {
    LEASE_TTL_SECONDS_DEFAULT
}

fn litestream_default() -> PathBuf {
    PathBuf::from("litestream")
}

impl HaConfig {
    pub(super) fn validate(&self) -> Result<()> {
        if self.endpoints.is_empty() {
            bail!("ha.endpoints must name at least one etcd client URL");
        }
        for e in &self.endpoints {
            let ok = url::Url::parse(e)
                .is_ok_and(|u| u.scheme() == "http" && u.host().is_some() && u.path() == "/");
            if !ok {
                bail!("ha.endpoints: {e:?} is not an http://host:port URL of an etcd member");
            }
        }
        for (what, name) in [("ha.cluster", &self.cluster), ("ha.node", &self.node)] {
            let ok = !name.is_empty()
                && name.len() <= NAME_LEN_MAX
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
            if !ok {
                bail!("{what} must be 1..={NAME_LEN_MAX} of A-Z a-z 0-9 - _ ., got {name:?}");
            }
        }
        if !LEASE_TTL_SECONDS.contains(&self.lease_ttl_seconds) {
            bail!(
                "ha.lease_ttl_seconds must be {}..={}, got {}",
                LEASE_TTL_SECONDS.start(),
                LEASE_TTL_SECONDS.end(),
                self.lease_ttl_seconds
            );
        }
        Ok(())
    }

    pub fn lease_ttl(&self) -> Duration {
        Duration::from_secs(self.lease_ttl_seconds)
    }

    /// The key whose holder is the primary.
    pub fn primary_key(&self) -> String {
        format!("/dialproof/{}/primary", self.cluster)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(extra: &str) -> Result<HaConfig> {
        let text = format!(
            "endpoints = [\"http://127.0.0.1:2379\"]\ncluster = \"c1\"\nnode = \"a\"\n\
             litestream_config = \"ls.yml\"\n{extra}"
        );
        let c: HaConfig = toml::from_str(&text)?;
        c.validate()?;
        Ok(c)
    }

    #[test]
    fn defaults_and_the_key() {
        let c = parse("").unwrap();
        assert_eq!(c.lease_ttl(), Duration::from_secs(5));
        assert_eq!(c.litestream, PathBuf::from("litestream"));
        assert_eq!(c.primary_key(), "/dialproof/c1/primary");
    }

    #[test]
    fn bad_settings_are_named() {
        let e = parse("lease_ttl_seconds = 1").unwrap_err().to_string();
        assert_eq!(e, "ha.lease_ttl_seconds must be 2..=60, got 1");
        let problem = |endpoints: &str, cluster: &str| -> String {
            let text = format!(
                "endpoints = [{endpoints}]\ncluster = {cluster:?}\nnode = \"a\"\n\
                 litestream_config = \"x\""
            );
            let c: HaConfig = toml::from_str(&text).unwrap();
            c.validate().unwrap_err().to_string()
        };
        assert!(problem("", "c").contains("at least one"));
        assert!(problem("\"https://e:2379/v3\"", "c").contains("https://e:2379/v3"));
        assert!(problem("\"http://e:2379\"", "c/x").starts_with("ha.cluster must be"));
    }
}
