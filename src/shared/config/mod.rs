//! The service's configuration file (TOML) and its defaults.
//!
//! One file names the listen addresses, the TLS certificate, the data
//! directory and the SIP lines with their numbers. Relative paths are taken
//! from the file's own directory, so a config can be moved with its data.
//! With no file at all the service runs on [`CONFIG_DEFAULT`]: SQLite under
//! `./data`, a self-signed certificate and one always-up loopback line, so the
//! whole flow works on one machine.
//!
//! Not for: runtime state (leases, keys), which lives in SQLite and memory.

mod ha;
mod lines;
mod testmode;

pub use ha::HaConfig;

pub use lines::validate_line;
use lines::{check_e164, expand_range};
pub use testmode::test_regions;

use anyhow::{bail, Context, Result};
use dialproof_engine::caller_evidence::CallerIdTrust;
use dialproof_engine::idempotency::table as idempotency;
use dialproof_engine::pool::Pool;
use dialproof_engine::sip::route::CalledFrom;
use dialproof_engine::CompanyId;
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The configuration used when no file is given and `dialproof.toml` does not
/// exist: everything on loopback, one always-up line with ten numbers in each
/// pool.
pub const CONFIG_DEFAULT: &str = r#"
[server]
https_listen = "127.0.0.1:8443"
http_listen = "127.0.0.1:8080"

[storage]
data_dir = "data"

# SIP over UDP. The loopback line below takes INVITEs from 127.0.0.1, so
# `dialproof-sim call` (tools/) can place a simulated call on one machine.
[sip]
listen = "127.0.0.1:5060"

[[lines]]
name = "loopback"
mode = "always_up"
provider_addresses = ["127.0.0.1"]
numbers = [
  { range_start = "+74950000000", count = 10, pool = "domestic" },
  { range_start = "+442030000000", count = 10, pool = "international" },
]
"#;

/// A range may name at most this many numbers; a typo such as an extra zero
/// in `count` should fail loudly, not allocate a million-number pool.
pub const RANGE_COUNT_MAX: u64 = 1_000_000;
/// The largest number of worker threads accepted.
pub const WORKERS_MAX: usize = 256;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub server: ServerConfig,
    #[serde(default)]
    pub tls: TlsConfig,
    #[serde(default)]
    pub storage: StorageConfig,
    #[serde(default)]
    pub lines: Vec<LineConfig>,
    /// The SIP listener; without it no SIP socket is opened.
    #[serde(default)]
    pub sip: Option<SipConfig>,
    /// Webhook delivery settings (retry schedule, sender threads).
    #[serde(default)]
    pub webhooks: crate::shared::webhook_settings::WebhooksConfig,
    /// Public API settings.
    #[serde(default)]
    pub api: ApiConfig,
    /// Automatic failover with etcd (`dialproof ha`); off unless set.
    #[serde(default)]
    pub ha: Option<HaConfig>,
    /// Where relative paths are resolved from (the file's directory).
    #[serde(skip)]
    pub base_dir: PathBuf,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    pub https_listen: SocketAddr,
    /// Plain HTTP listener that answers everything with 301 to HTTPS.
    pub http_listen: Option<SocketAddr>,
    /// The HTTPS port written into redirect locations (defaults to the port
    /// of `https_listen`; set it when a proxy or NAT maps 443 to it).
    pub public_https_port: Option<u16>,
    /// Worker threads for the HTTP coroutines (default: one per core); SIP
    /// runs on a thread of its own.
    pub workers: Option<usize>,
    /// The operators' listener (plain HTTP: `/metrics`, `/healthz`,
    /// `/readyz`); off unless set. Keep it on loopback or a private network.
    pub ops_listen: Option<SocketAddr>,
    /// How long a stop (SIGTERM) waits for requests in progress before it
    /// closes what is left (default [`SHUTDOWN_TIMEOUT_SECONDS_DEFAULT`]).
    pub shutdown_timeout_seconds: Option<u64>,
    /// How long an idle keep-alive connection is kept between requests
    /// (default [`IDLE_TIMEOUT_SECONDS_DEFAULT`], 1..=[`IDLE_TIMEOUT_SECONDS_MAX`]).
    pub idle_timeout_seconds: Option<u64>,
}

/// The default of `[server] idle_timeout_seconds`.
pub const IDLE_TIMEOUT_SECONDS_DEFAULT: u64 = 60;
/// The longest `idle_timeout_seconds` accepted.
pub const IDLE_TIMEOUT_SECONDS_MAX: u64 = 3600;

/// The default of `[server] shutdown_timeout_seconds`.
pub const SHUTDOWN_TIMEOUT_SECONDS_DEFAULT: u64 = 10;
/// The longest `shutdown_timeout_seconds` accepted.
pub const SHUTDOWN_TIMEOUT_SECONDS_MAX: u64 = 600;

impl ServerConfig {
    fn validate(&self) -> Result<()> {
        if let Some(w) = self.workers {
            if w == 0 || w > WORKERS_MAX {
                bail!("server.workers must be 1..={WORKERS_MAX}, got {w}");
            }
        }
        if let Some(s) = self.idle_timeout_seconds {
            if !(1..=IDLE_TIMEOUT_SECONDS_MAX).contains(&s) {
                bail!(
                    "server.idle_timeout_seconds must be 1..={IDLE_TIMEOUT_SECONDS_MAX}, got {s}"
                );
            }
        }
        Ok(())
    }

    /// The drain bound of a stop.
    pub fn shutdown_timeout(&self) -> Duration {
        let s = self
            .shutdown_timeout_seconds
            .unwrap_or(SHUTDOWN_TIMEOUT_SECONDS_DEFAULT)
            .min(SHUTDOWN_TIMEOUT_SECONDS_MAX);
        Duration::from_secs(s)
    }

    /// How long an idle keep-alive connection is kept (validated on load).
    pub fn idle_timeout(&self) -> Duration {
        Duration::from_secs(
            self.idle_timeout_seconds
                .unwrap_or(IDLE_TIMEOUT_SECONDS_DEFAULT),
        )
    }
}

/// `[api]`: the public API's settings.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiConfig {
    /// How long a create's `Idempotency-Key` is honoured, in hours
    /// (default 24, 1..=168): within it a retry with the key gets the
    /// stored answer; after it the key is purged and may be used again.
    pub idempotency_key_hours: Option<u32>,
    /// Test mode: days a test verification (or rejection) is kept after
    /// its creation (default 7, 1..=365); see `testmode`.
    pub test_mode_retention_days: Option<u32>,
}

impl ApiConfig {
    pub fn idempotency_key_hours(&self) -> u32 {
        self.idempotency_key_hours
            .unwrap_or(idempotency::RETENTION_HOURS_DEFAULT)
    }

    fn validate(&self) -> Result<()> {
        let (min, max) = (
            idempotency::RETENTION_HOURS_MIN,
            idempotency::RETENTION_HOURS_MAX,
        );
        if let Some(h) = self.idempotency_key_hours {
            if !(min..=max).contains(&h) {
                bail!("api.idempotency_key_hours must be {min}..={max}, got {h}");
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageConfig {
    #[serde(default = "default_data_dir")]
    pub data_dir: PathBuf,
    /// `litestream` when Litestream replicates the database: the writer
    /// then leaves WAL resets to it (see storage's `checkpoint`).
    #[serde(default)]
    pub replication: ReplicationMode,
}

/// `[storage] replication`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplicationMode {
    #[default]
    None,
    Litestream,
}

impl ReplicationMode {
    pub fn storage(self) -> dialproof_storage::Replication {
        match self {
            ReplicationMode::None => dialproof_storage::Replication::Off,
            ReplicationMode::Litestream => dialproof_storage::Replication::Litestream,
        }
    }
}

impl Default for StorageConfig {
    fn default() -> Self {
        StorageConfig {
            data_dir: default_data_dir(),
            replication: ReplicationMode::None,
        }
    }
}

fn default_data_dir() -> PathBuf {
    PathBuf::from("data")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LineMode {
    /// An IP-authenticated trunk treated as always registered.
    AlwaysUp,
    /// Registers with its provider; up while registered.
    Register,
    /// IP-authenticated, watched with OPTIONS pings; down after
    /// `ping_failures_max` unanswered pings in a row.
    IpAuth,
}

impl LineMode {
    /// The configuration spelling, for logs.
    pub fn as_str(self) -> &'static str {
        match self {
            LineMode::AlwaysUp => "always_up",
            LineMode::Register => "register",
            LineMode::IpAuth => "ip_auth",
        }
    }
}

/// `[sip]`: where the UDP socket listens.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SipConfig {
    /// Port 0 lets the OS choose (printed as `sip=` on the READY line).
    pub listen: SocketAddr,
    /// The address providers reach us at, for Via and Contact, when it is
    /// not the listen address (NAT, or listening on 0.0.0.0).
    pub public_address: Option<std::net::IpAddr>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LineConfig {
    pub name: String,
    pub mode: LineMode,
    #[serde(default = "yes")]
    pub active: bool,
    #[serde(default)]
    pub numbers: Vec<NumberEntry>,
    /// The provider's SIP address, `host:port` (required for `register`
    /// and `ip_auth`). Its resolved address may send us INVITEs.
    pub provider: Option<String>,
    /// Further source addresses allowed to send INVITEs for this line (a
    /// provider's media gateways; for `always_up` lines, the only ones).
    #[serde(default)]
    pub provider_addresses: Vec<std::net::IpAddr>,
    /// The registrar domain (default: the provider's host).
    pub domain: Option<String>,
    pub username: Option<String>,
    /// The digest user name when it differs from `username`.
    pub auth_username: Option<String>,
    pub password: Option<String>,
    /// The final response that rejects calls: 603 (default), 486 or 480.
    #[serde(default = "default_reject_code")]
    pub reject_code: u16,
    /// ISO region for numbers written without `+` (default "RU").
    #[serde(default = "default_country")]
    pub default_country: String,
    /// Where an INVITE's dialled number is read: `auto` (default),
    /// `request_uri`, `to` or `p_called_party_id` (see
    /// tools/deploy/README.md, "SIP lines", "The dialled number").
    #[serde(default = "default_dialled_number_from")]
    pub dialled_number_from: String,
    /// The registration expiry we ask for (default 3600).
    #[serde(default = "default_register_expires")]
    pub register_expires_seconds: u32,
    /// Read the caller from P-Asserted-Identity (the provider asserts it).
    #[serde(default = "yes")]
    pub trust_asserted_identity: bool,
    /// The least `caller_id_trust` a call needs to complete a verification:
    /// `unverified` (default: every caller), `asserted` or `verified`.
    #[serde(default = "default_min_caller_id_trust")]
    pub min_caller_id_trust: String,
    /// `ip_auth`: seconds between OPTIONS pings (default 30).
    #[serde(default = "default_ping_interval")]
    pub ping_interval_seconds: u32,
    /// `ip_auth`: unanswered pings in a row that take the line down.
    #[serde(default = "default_ping_failures")]
    pub ping_failures_max: u32,
}

fn default_reject_code() -> u16 {
    603
}

fn default_country() -> String {
    "RU".to_owned()
}

fn default_dialled_number_from() -> String {
    CalledFrom::Auto.as_str().to_owned()
}

fn default_min_caller_id_trust() -> String {
    CallerIdTrust::Unverified.as_str().to_owned()
}

fn default_register_expires() -> u32 {
    3600
}

fn default_ping_interval() -> u32 {
    30
}

fn default_ping_failures() -> u32 {
    3
}

fn yes() -> bool {
    true
}

/// One number, or a run of consecutive numbers, of a line.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NumberEntry {
    pub number: Option<String>,
    pub range_start: Option<String>,
    pub count: Option<u64>,
    pub pool: String,
    #[serde(default = "yes")]
    pub active: bool,
    pub dedicated_to: Option<CompanyId>,
}

/// A number as the lease table wants it, expanded from the entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfiguredNumber {
    pub number: String,
    pub pool: Pool,
    pub line: u32,
    pub active: bool,
    pub dedicated_to: Option<CompanyId>,
}

/// The configuration in force: replaced whole by a SIGHUP reload (the
/// control loop), read by whoever needs a setting now.
pub type LiveConfig = parking_lot::RwLock<std::sync::Arc<Config>>;

/// Everything wrong with a configuration, one line per problem: what
/// `dialproof check` prints and `serve` refuses to start with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problems(pub Vec<String>);

impl std::fmt::Display for Problems {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.join("\n"))
    }
}

impl std::error::Error for Problems {}

impl Config {
    /// Reads `path`, or the built-in default when `path` is None; every
    /// problem of the file in the error (see [`Config::read`]).
    pub fn load(path: Option<&Path>) -> Result<Config> {
        Ok(Config::read(path)?)
    }

    /// Reads and checks the file: a syntax error alone (nothing after it
    /// can be read), else every setting's problem, each on its own line.
    pub fn read(path: Option<&Path>) -> Result<Config, Problems> {
        let one = |s: String| Problems(vec![s]);
        let (text, base_dir) = match path {
            Some(p) => (
                std::fs::read_to_string(p)
                    .map_err(|e| one(format!("reading config file {}: {e}", p.display())))?,
                p.parent()
                    .map(Path::to_path_buf)
                    .unwrap_or_else(|| PathBuf::from(".")),
            ),
            None => (CONFIG_DEFAULT.to_owned(), PathBuf::from(".")),
        };
        let mut config: Config = toml::from_str(&text).map_err(|e| {
            let what = match path {
                Some(p) => format!("config file {}", p.display()),
                None => "the built-in default config".to_owned(),
            };
            one(syntax_problem(&what, &text, &e))
        })?;
        config.base_dir = if base_dir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            base_dir
        };
        match config.problems() {
            problems if problems.is_empty() => Ok(config),
            problems => Err(Problems(problems)),
        }
    }

    /// Each setting's problem, in the file's order of sections.
    fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut note = |r: Result<()>| {
            if let Err(e) = r {
                out.push(format!("{e:#}"));
            }
        };
        note(self.server.validate());
        if self.tls.cert.is_some() != self.tls.key.is_some() {
            note(Err(anyhow::anyhow!(
                "tls.cert and tls.key must be given together"
            )));
        }
        let mut names = std::collections::HashSet::new();
        for line in &self.lines {
            if !names.insert(line.name.as_str()) {
                note(Err(anyhow::anyhow!(
                    "line name {:?} appears twice",
                    line.name
                )));
            }
        }
        note(self.webhooks.validate());
        note(self.api.validate());
        if let Some(ha) = &self.ha {
            note(ha.validate());
            if self.storage.replication != ReplicationMode::Litestream {
                note(Err(anyhow::anyhow!(
                    "[ha] needs storage.replication = \"litestream\" (a promotion restores \
                     the replica and holds numbers from its heartbeat)"
                )));
            }
        }
        note(self.api.validate_test_mode());
        for (index, line) in self.lines.iter().enumerate() {
            note(validate_line(line));
            note(each_line_number(index, line, |_| ()));
        }
        note(testmode::check_numbers(self));
        out
    }

    pub fn resolve(&self, p: &Path) -> PathBuf {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.base_dir.join(p)
        }
    }

    pub fn data_dir(&self) -> PathBuf {
        self.resolve(&self.storage.data_dir)
    }

    pub fn database_path(&self) -> PathBuf {
        self.data_dir().join("dialproof.db")
    }

    /// Every configured number, ranges expanded, checked for E.164 shape.
    pub fn numbers(&self) -> Result<Vec<ConfiguredNumber>> {
        let mut out = Vec::new();
        self.each_number(|number| out.push(number))?;
        Ok(out)
    }

    /// [`Config::numbers`] one at a time, in the same order, without
    /// holding them all: a million-number range then never has a million
    /// strings alive at once (see `dialproof_engine::lease::TableBuilder`).
    pub fn each_number(&self, mut f: impl FnMut(ConfiguredNumber)) -> Result<()> {
        for (index, line) in self.lines.iter().enumerate() {
            each_line_number(index, line, &mut f)?;
        }
        Ok(())
    }
}

/// One line's numbers for [`Config::each_number`]; the first malformed
/// entry of the line is its error.
fn each_line_number(
    index: usize,
    line: &LineConfig,
    mut f: impl FnMut(ConfiguredNumber),
) -> Result<()> {
    let line_id = u32::try_from(index).context("too many lines")?;
    for entry in &line.numbers {
        let pool = Pool::parse(&entry.pool).with_context(|| {
            format!(
                "line {:?}: pool must be \"domestic\" or \"international\", got {:?}",
                line.name, entry.pool
            )
        })?;
        let mut push = |number: String| {
            f(ConfiguredNumber {
                number,
                pool,
                line: line_id,
                active: entry.active,
                dedicated_to: entry.dedicated_to,
            })
        };
        match (&entry.number, &entry.range_start, entry.count) {
            (Some(n), None, None) => push(check_e164(n, &line.name)?),
            (None, Some(start), Some(count)) => expand_range(start, count, &line.name, &mut push)?,
            _ => bail!(
                "line {:?}: each numbers entry has either `number` or \
                 `range_start` with `count`",
                line.name
            ),
        }
    }
    Ok(())
}

/// A TOML error on one line: where (line and column, 1-based) and what,
/// without the multi-line excerpt the parser's own text draws.
fn syntax_problem(what: &str, text: &str, e: &toml::de::Error) -> String {
    let message = e.message().trim().replace('\n', " ");
    match e.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
            format!("parsing {what}: line {line}, column {column}: {message}")
        }
        None => format!("parsing {what}: {message}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_config_parses_and_expands() {
        let c = Config::load(None).unwrap();
        let numbers = c.numbers().unwrap();
        assert_eq!(numbers.len(), 20);
        assert_eq!(numbers[0].number, "+74950000000");
        assert_eq!(numbers[9].number, "+74950000009");
        assert_eq!(numbers[10].pool, Pool::International);
    }

    fn expanded(start: &str, count: u64) -> Result<Vec<String>> {
        let mut out = Vec::new();
        expand_range(start, count, "l", |n| out.push(n)).map(|()| out)
    }

    #[test]
    fn ranges_keep_width_and_refuse_overflow() {
        assert_eq!(
            expanded("+70000000098", 3).unwrap(),
            vec!["+70000000098", "+70000000099", "+70000000100"]
        );
        assert!(expanded("+99999999", 2).is_err());
        assert!(expanded("+99999998", 2).is_ok());
        assert!(expanded("+7000", 2).is_err());
        assert!(expanded("+70000000000", 0).is_err());
    }

    #[test]
    fn storage_replication_is_none_or_litestream() {
        let parse = |v: &str| {
            toml::from_str::<StorageConfig>(&format!("data_dir = \"d\"\nreplication = \"{v}\""))
        };
        assert_eq!(
            parse("litestream").unwrap().replication,
            ReplicationMode::Litestream
        );
        assert_eq!(parse("none").unwrap().replication, ReplicationMode::None);
        assert!(parse("rsync").is_err());
        let default: StorageConfig = toml::from_str("data_dir = \"d\"").unwrap();
        assert_eq!(default.replication, ReplicationMode::None);
        assert_eq!(
            ReplicationMode::Litestream.storage(),
            dialproof_storage::Replication::Litestream
        );
    }
}
