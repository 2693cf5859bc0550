//! Host names to addresses for the SSRF guard: behind a seam, and off the
//! coroutine workers.
//!
//! [`Resolve`] is the seam. The service builds one at start-up ([`System`],
//! the operating system's resolver, in production) and hands it to
//! [`Resolver::start`]; both checks of a webhook host use that one resolver:
//! the check at creation (`crate::api::webhook_guard`) and the one at every
//! delivery attempt (`crate::webhooks::vetting`). An in-process test passes
//! its own `Resolve`. Black-box tests change what the system resolver
//! answers from outside: they run the service in a network namespace with a
//! hosts file of their own (`tests/it/support/netns.rs`). Nothing in this module
//! reads a test switch.
//!
//! `getaddrinfo` blocks its thread for as long as the lookup takes, so
//! lookups run on a small [`ThreadPool`] and the caller parks until the
//! answer or its timeout: a resolver that hangs costs a request a clear
//! error, not a stuck worker.
//!
//! Not for: deciding whether an address is allowed (`dialproof_engine::ssrf`)
//! or caching answers (each check must see what DNS says now).

use crate::shared::thread_pool::{PoolError, ThreadPool};
use std::net::{IpAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

/// Resolver threads; lookups are rare (one per create or delivery attempt)
/// and short.
pub const RESOLVER_THREADS: usize = 4;
/// Lookups queued beyond the ones running.
pub const RESOLVER_QUEUE_MAX: usize = 1024;
/// How long a lookup may take, at most.
pub const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

/// How host names become addresses.
pub trait Resolve: Send + Sync {
    /// Every address `host` has, for a connection to `port`, or why none.
    /// May block: it runs on the resolver pool.
    fn lookup(&self, host: &str, port: u16) -> Result<Vec<IpAddr>, String>;
}

/// The operating system's resolver (`getaddrinfo` through std): the hosts
/// file, DNS and whatever else `nsswitch.conf` names.
pub struct System;

impl Resolve for System {
    fn lookup(&self, host: &str, port: u16) -> Result<Vec<IpAddr>, String> {
        let addrs = (host, port).to_socket_addrs().map_err(|e| e.to_string())?;
        let mut ips: Vec<IpAddr> = addrs.map(|a| a.ip()).collect();
        ips.sort();
        ips.dedup();
        Ok(ips)
    }
}

/// Why a lookup gave no address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LookupError {
    /// The resolver answered that the name has no address (its words).
    NotFound(String),
    /// Too many lookups queued: refused without asking.
    Busy,
    /// No answer in time.
    TimedOut,
    /// The lookup panicked or the pool is gone.
    Failed,
}

impl std::fmt::Display for LookupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LookupError::NotFound(why) => f.write_str(why),
            LookupError::Busy => f.write_str("resolver busy"),
            LookupError::TimedOut => f.write_str("timed out"),
            LookupError::Failed => f.write_str("resolver failed"),
        }
    }
}

/// The service's resolver: a [`Resolve`] run on the resolver pool. Clones
/// share both.
#[derive(Clone)]
pub struct Resolver {
    pool: ThreadPool,
    names: Arc<dyn Resolve>,
}

impl std::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolver").finish_non_exhaustive()
    }
}

impl Resolver {
    /// Starts the pool that runs `names`' lookups.
    pub fn start(names: Arc<dyn Resolve>) -> std::io::Result<Resolver> {
        Ok(Resolver {
            pool: ThreadPool::start("resolver", RESOLVER_THREADS, RESOLVER_QUEUE_MAX)?,
            names,
        })
    }

    /// Every address `host` resolves to (never none), waiting up to
    /// [`RESOLVE_TIMEOUT`].
    pub fn resolve(&self, host: &str, port: u16) -> Result<Vec<IpAddr>, LookupError> {
        self.resolve_within(host, port, RESOLVE_TIMEOUT)
    }

    /// Like [`Resolver::resolve`], waiting up to `timeout`.
    pub fn resolve_within(
        &self,
        host: &str,
        port: u16,
        timeout: Duration,
    ) -> Result<Vec<IpAddr>, LookupError> {
        let names = self.names.clone();
        let host = host.to_owned();
        match self.pool.run(timeout, move || names.lookup(&host, port)) {
            Ok(Ok(ips)) if ips.is_empty() => Err(LookupError::NotFound("no addresses".into())),
            Ok(Ok(ips)) => Ok(ips),
            Ok(Err(why)) => Err(LookupError::NotFound(why)),
            Err(PoolError::Busy) => Err(LookupError::Busy),
            Err(PoolError::TimedOut) => Err(LookupError::TimedOut),
            Err(PoolError::Failed) => Err(LookupError::Failed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{LookupError, Resolve, Resolver, System};
    use std::net::IpAddr;
    use std::sync::Arc;
    use std::time::Duration;

    /// A resolver that knows one name, slowly if asked.
    struct OneName {
        ips: Vec<IpAddr>,
        delay: Duration,
    }

    impl Resolve for OneName {
        fn lookup(&self, host: &str, _port: u16) -> Result<Vec<IpAddr>, String> {
            std::thread::sleep(self.delay);
            match host {
                "known.test" => Ok(self.ips.clone()),
                _ => Err("unknown name".into()),
            }
        }
    }

    fn resolver(ips: &[&str], delay: Duration) -> Resolver {
        let ips = ips.iter().map(|ip| ip.parse().unwrap()).collect();
        Resolver::start(Arc::new(OneName { ips, delay })).unwrap()
    }

    #[test]
    fn an_injected_resolver_answers_and_its_refusals_say_why() {
        let r = resolver(&["93.184.216.34", "127.0.0.1"], Duration::ZERO);
        let ips = r.resolve("known.test", 443).unwrap();
        assert_eq!(ips, [[93, 184, 216, 34], [127, 0, 0, 1]].map(IpAddr::from));
        let e = r.resolve("other.test", 443).unwrap_err();
        assert_eq!(e, LookupError::NotFound("unknown name".into()));
        // An empty answer is an error, never an empty list.
        let empty = resolver(&[], Duration::ZERO);
        let e = empty.resolve("known.test", 443).unwrap_err();
        assert_eq!(e.to_string(), "no addresses");
    }

    #[test]
    fn a_slow_lookup_times_out() {
        let r = resolver(&["93.184.216.34"], Duration::from_secs(2));
        let e = r
            .resolve_within("known.test", 443, Duration::from_millis(50))
            .unwrap_err();
        assert_eq!(e.to_string(), "timed out");
    }

    #[test]
    fn the_system_resolver_reads_the_hosts_file_and_literals() {
        let r = Resolver::start(Arc::new(System)).unwrap();
        let ips = r.resolve("localhost", 443).unwrap();
        assert!(ips.iter().all(|ip| ip.is_loopback()), "{ips:?}");
        assert_eq!(
            r.resolve("192.0.2.7", 443).unwrap(),
            [IpAddr::from([192, 0, 2, 7])]
        );
    }
}
