//! DNS resolution off the worker threads, for the SSRF guard.
//!
//! `getaddrinfo` blocks its thread for as long as the resolver takes, so it
//! runs on a small pool of plain threads and answers the waiting coroutine
//! through a may channel. The queue and the wait are bounded: a resolver
//! that hangs costs the request a clear error, not a stuck worker.
//!
//! Not for: deciding whether an address is allowed (`dialproof_engine::ssrf`).

use crate::runtime::wait::wait_for;
use crossbeam_channel::{bounded, Sender, TrySendError};
use dialproof_storage::Reply;
use std::net::{IpAddr, ToSocketAddrs};
use std::time::Duration;

/// Resolver threads; lookups are rare (one per create) and short.
pub const RESOLVER_THREADS: usize = 4;
/// Lookups queued beyond the ones running.
pub const RESOLVER_QUEUE_MAX: usize = 1024;
/// How long a create waits for its lookup.
pub const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

type Job = (String, u16, Reply<Result<Vec<IpAddr>, String>>);

#[derive(Clone)]
pub struct Resolver {
    jobs: Sender<Job>,
}

impl Resolver {
    pub fn start() -> std::io::Result<Resolver> {
        let (tx, rx) = bounded::<Job>(RESOLVER_QUEUE_MAX);
        for i in 0..RESOLVER_THREADS {
            let rx = rx.clone();
            std::thread::Builder::new()
                .name(format!("resolver-{i}"))
                .spawn(move || {
                    for (host, port, reply) in rx {
                        reply(lookup(&host, port));
                    }
                })?;
        }
        Ok(Resolver { jobs: tx })
    }

    /// Every address `host` resolves to, or a message saying why none.
    pub fn resolve(&self, host: &str, port: u16) -> Result<Vec<IpAddr>, String> {
        let jobs = self.jobs.clone();
        let host = host.to_owned();
        wait_for(RESOLVE_TIMEOUT, move |reply| {
            if let Err(e) = jobs.try_send((host, port, reply)) {
                let (_, _, reply) = match e {
                    TrySendError::Full(j) | TrySendError::Disconnected(j) => j,
                };
                reply(Err("resolver busy".to_owned()));
            }
        })
        .unwrap_or_else(|| Err("timed out".to_owned()))
    }
}

/// For tests only: a file of `name address...` lines that answers lookups
/// of the names it lists before DNS is asked (read at every lookup, so a test
/// can change an answer between a create and a delivery, as a DNS-rebinding
/// attacker would). Unset in production.
pub const TEST_HOSTS_FILE_ENV: &str = "DIALPROOF_TEST_HOSTS_FILE";
/// Lines read from the test hosts file, at most.
const TEST_HOSTS_LINES_MAX: usize = 1000;

/// The addresses the test hosts file gives `host`, if the file is set and
/// names it.
pub fn test_hosts_override(host: &str) -> Option<Vec<IpAddr>> {
    let path = std::env::var_os(TEST_HOSTS_FILE_ENV)?;
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().take(TEST_HOSTS_LINES_MAX).find_map(|line| {
        let mut words = line.split_whitespace();
        if !words.next()?.eq_ignore_ascii_case(host) {
            return None;
        }
        Some(words.filter_map(|w| w.parse().ok()).collect())
    })
}

fn lookup(host: &str, port: u16) -> Result<Vec<IpAddr>, String> {
    if let Some(ips) = test_hosts_override(host) {
        return if ips.is_empty() {
            Err("no addresses".to_owned())
        } else {
            Ok(ips)
        };
    }
    match (host, port).to_socket_addrs() {
        Ok(addrs) => {
            let mut ips: Vec<IpAddr> = addrs.map(|a| a.ip()).collect();
            ips.sort();
            ips.dedup();
            if ips.is_empty() {
                Err("no addresses".to_owned())
            } else {
                Ok(ips)
            }
        }
        Err(e) => Err(e.to_string()),
    }
}
