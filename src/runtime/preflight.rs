//! The checks `serve` makes before it starts anything, shared with
//! `dialproof check` so that the two accept and refuse the same
//! configurations with the same messages: the file's syntax and settings
//! (`crate::shared::config`), overlapping number ranges, the listen
//! addresses, the TLS certificate and key, the data directory and the
//! schema version of an existing database.
//!
//! On success it returns the configuration and the plan: one line for each
//! thing `serve` would start. On failure, every problem found, one line
//! each. It changes nothing on disk beyond a probe file it removes again:
//! no directory is created, no database opened for writing, no port taken
//! (addresses are tried on port 0).
//!
//! Not for: starting anything (`super::service`) or a reload's rules
//! (`crate::shared::leases::check_reload`).

use crate::http::tls;
use crate::shared::config::{Config, Problems};
use crate::shared::leases::build_table;
use dialproof_engine::pool::Pool;
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::path::{Path, PathBuf};

/// What `serve` would start, one line each, for `dialproof check`.
#[derive(Debug, Clone, Default)]
pub struct Plan(pub Vec<String>);

/// Reads the configuration at `path` (the built-in default when None) and
/// checks everything `serve` depends on.
pub fn preflight(path: Option<&Path>) -> Result<(Config, Plan), Problems> {
    let config = Config::read(path)?;
    let mut found = Found::default();
    found.plan.push(match path {
        Some(p) => format!("configuration {}", p.display()),
        None => "configuration: the built-in default (no file given)".to_owned(),
    });
    numbers(&config, &mut found);
    listeners(&config, &mut found);
    certificate(&config, &mut found);
    data_dir(&config, &mut found);
    database(&config, &mut found);
    ha(&config, &mut found);
    if found.problems.is_empty() {
        Ok((config, Plan(found.plan)))
    } else {
        Err(Problems(found.problems))
    }
}

/// `dialproof check`: prints the plan on stdout, or every problem on
/// stderr; the exit code (0 or 1).
pub fn check(path: Option<&Path>) -> i32 {
    match preflight(path) {
        Ok((_, plan)) => {
            for line in &plan.0 {
                println!("{line}");
            }
            println!("configuration OK");
            0
        }
        Err(problems) => {
            print_problems(&problems);
            1
        }
    }
}

/// One `error:` line per problem on stderr: `check` and a refused `serve`
/// print the same lines.
pub fn print_problems(problems: &Problems) {
    for p in &problems.0 {
        eprintln!("error: {p}");
    }
}

#[derive(Default)]
struct Found {
    plan: Vec<String>,
    problems: Vec<String>,
}

/// The lease table built as `serve` builds it (without dedications, which
/// live in the database): a number listed twice, within a line or across
/// two lines' ranges, is refused here.
fn numbers(config: &Config, found: &mut Found) {
    // No dedications or quarantines: they live in the database, which a
    // check does not open for writing, and change no number's uniqueness.
    let table = match build_table(config, &[], &Default::default(), &Default::default()) {
        Ok(t) => t,
        Err(e) => {
            found.problems.push(format!("numbers: {e:#}"));
            return;
        }
    };
    let stats = table.stats();
    let in_pool = |pool: Pool| -> usize {
        stats
            .iter()
            .filter(|s| s.pool == pool)
            .map(|s| s.total)
            .sum()
    };
    for s in table.line_stats() {
        if let Some(line) = config.lines.get(s.line as usize) {
            let state = if line.active { "" } else { ", inactive" };
            found.plan.push(format!(
                "sip line {:?} ({}{state}): {} numbers",
                line.name,
                line.mode.as_str(),
                s.total
            ));
        }
    }
    found.plan.push(format!(
        "numbers: {} domestic, {} international",
        in_pool(Pool::Domestic),
        in_pool(Pool::International)
    ));
}

/// Every listener's address: no two TCP listeners on one port, and each
/// address one this machine can listen on (tried on port 0, so a running
/// service's ports do not make a check fail).
fn listeners(config: &Config, found: &mut Found) {
    let s = &config.server;
    let tcp: Vec<(&str, SocketAddr)> = [
        ("server.https_listen", Some(s.https_listen)),
        ("server.http_listen", s.http_listen),
        ("server.ops_listen", s.ops_listen),
    ]
    .into_iter()
    .filter_map(|(name, addr)| addr.map(|a| (name, a)))
    .collect();
    for (i, (name, addr)) in tcp.iter().enumerate() {
        for (other, other_addr) in &tcp[..i] {
            if clash(*addr, *other_addr) {
                found.problems.push(format!(
                    "{name} {addr} and {other} {other_addr} use the same port"
                ));
            }
        }
        match TcpListener::bind(SocketAddr::new(addr.ip(), 0)) {
            Ok(_) => found.plan.push(format!("{name}: {addr} (tcp)")),
            Err(e) => found.problems.push(format!(
                "{name} {addr}: this machine cannot listen on that address: {e}"
            )),
        }
    }
    if let Some(sip) = &config.sip {
        match UdpSocket::bind(SocketAddr::new(sip.listen.ip(), 0)) {
            Ok(_) => found.plan.push(format!("sip.listen: {} (udp)", sip.listen)),
            Err(e) => found.problems.push(format!(
                "sip.listen {}: this machine cannot listen on that address: {e}",
                sip.listen
            )),
        }
    } else {
        found.plan.push("sip: off (no [sip] section)".to_owned());
    }
}

/// Two TCP listeners clash on the same non-zero port when their addresses
/// are equal or either is the unspecified address of the same family.
fn clash(a: SocketAddr, b: SocketAddr) -> bool {
    a.port() != 0
        && a.port() == b.port()
        && a.is_ipv4() == b.is_ipv4()
        && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
}

/// The configured certificate and key must be readable and match; without
/// them the self-signed pair in the data directory (if made before) must.
fn certificate(config: &Config, found: &mut Found) {
    let configured = config
        .tls
        .cert
        .as_ref()
        .map(|c| config.resolve(c))
        .zip(config.tls.key.as_ref().map(|k| config.resolve(k)));
    let (cert, key, what) = match configured {
        Some((cert, key)) => (cert, key, "tls"),
        None => {
            let (cert, key) = tls::self_signed_paths(&config.data_dir());
            if !cert.exists() || !key.exists() {
                found.plan.push(format!(
                    "tls: a self-signed certificate, generated on first start in {}",
                    cert.parent().unwrap_or(&cert).display()
                ));
                return;
            }
            (cert, key, "tls (self-signed, generated earlier)")
        }
    };
    match tls::server_config(&cert, &key) {
        Ok(_) => found.plan.push(format!(
            "{what}: certificate {} with key {}",
            cert.display(),
            key.display()
        )),
        Err(e) => found.problems.push(format!("{what}: {e:#}")),
    }
}

/// The data directory must be a directory this process can write in (or,
/// if missing, one it can create: its nearest existing parent must be).
fn data_dir(config: &Config, found: &mut Found) {
    let dir = config.data_dir();
    let existing = nearest_existing(&dir);
    let problem = match &existing {
        None => Some("no part of the path exists".to_owned()),
        Some(d) if !d.is_dir() => Some(format!("{} is not a directory", d.display())),
        Some(d) => probe_write(d)
            .err()
            .map(|e| format!("cannot write in {}: {e}", d.display())),
    };
    match problem {
        Some(p) => found
            .problems
            .push(format!("storage.data_dir {}: {p}", dir.display())),
        None if existing.as_deref() == Some(dir.as_path()) => found
            .plan
            .push(format!("storage.data_dir: {} (writable)", dir.display())),
        None => found.plan.push(format!(
            "storage.data_dir: {} (created on start)",
            dir.display()
        )),
    }
}

fn nearest_existing(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|a| std::fs::symlink_metadata(a).is_ok())
        .map(Path::to_path_buf)
}

/// Creates and removes a file: the only sure test of writing (permission
/// bits say nothing about a read-only mount or a systemd sandbox).
fn probe_write(dir: &Path) -> std::io::Result<()> {
    let probe = dir.join(format!(".dialproof-check-{}", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)?;
    std::fs::remove_file(&probe)
}

/// An existing database's schema version: older ones are migrated on
/// start, a newer release's is refused.
fn database(config: &Config, found: &mut Found) {
    let path = config.database_path();
    let current = dialproof_storage::schema_version();
    match dialproof_storage::schema_version_of(&path) {
        Ok(None) => found.plan.push(format!(
            "database {}: new, created at schema version {current}",
            path.display()
        )),
        Ok(Some(v)) if v > current => found.problems.push(format!(
            "database {}: {}",
            path.display(),
            dialproof_storage::schema_newer_message(v, current)
        )),
        Ok(Some(v)) if v < current => found.plan.push(format!(
            "database {}: schema version {v}, migrated to {current} on start (one transaction)",
            path.display()
        )),
        Ok(Some(_)) => found.plan.push(format!(
            "database {}: schema version {current} (current)",
            path.display()
        )),
        Err(e) => found.problems.push(format!(
            "database {}: cannot read its schema version: {e}",
            path.display()
        )),
    }
}

/// `[ha]`: what `dialproof ha` would campaign with, and Litestream's
/// configuration, which a promotion restores with.
fn ha(config: &Config, found: &mut Found) {
    let Some(ha) = &config.ha else { return };
    let ls = config.resolve(&ha.litestream_config);
    if !ls.is_file() {
        found.problems.push(format!(
            "ha.litestream_config {}: no such file",
            ls.display()
        ));
    }
    found.plan.push(format!(
        "ha: node {:?} of cluster {:?}, key {}, lease TTL {} s, etcd {}",
        ha.node,
        ha.cluster,
        ha.primary_key(),
        ha.lease_ttl_seconds,
        ha.endpoints.join(" ")
    ));
}
