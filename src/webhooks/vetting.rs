//! The SSRF guard at delivery time, as ureq's name resolver.
//!
//! A webhook URL was checked when the verification was created, but DNS can
//! change between then and delivery (DNS rebinding: public at creation,
//! `127.0.0.1` at delivery). So every attempt resolves the host again
//! (through the service's `crate::shared::resolve::Resolver`, the seam the check at
//! creation uses too), checks EVERY address against the blocked ranges, and
//! hands ureq only addresses that passed: the connection can only go to a
//! vetted IP, while the `Host` header and TLS SNI stay the URL's host name. Doing this inside ureq's
//! resolver hook (rather than resolving first and then letting ureq resolve
//! again) leaves no second lookup for an attacker to answer differently.
//!
//! [`VettingResolver::strict`] refuses a host if any of its addresses is in a
//! blocked range; [`VettingResolver::development`] (for a company's
//! development URLs) allows loopback and private addresses.
//!
//! Not for: the range tables (`dialproof_engine::ssrf`), the https-only rule
//! (the sender checks the scheme before any lookup) or caching lookups.

use crate::shared::resolve::{LookupError, Resolver, RESOLVE_TIMEOUT};
use dialproof_engine::ssrf;
use std::net::{IpAddr, SocketAddr};
use ureq::http::Uri;
use ureq::unversioned::resolver::ResolvedSocketAddrs;
use ureq::unversioned::transport::NextTimeout;
use ureq::Error;

/// Why a host was refused (a blocked address, or none): shown in the
/// delivery log as the attempt's error, in the spec's wording for the same
/// refusal at creation.
#[derive(Debug)]
pub struct Refused(pub String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

#[derive(Debug)]
pub struct VettingResolver {
    allow_private: bool,
    /// The service's resolver (the same one the check at creation uses).
    names: Resolver,
}

impl VettingResolver {
    /// For ordinary webhook URLs: public addresses only.
    pub fn strict(names: Resolver) -> Self {
        VettingResolver {
            allow_private: false,
            names,
        }
    }

    /// For a company's development URLs: any address.
    pub fn development(names: Resolver) -> Self {
        VettingResolver {
            allow_private: true,
            names,
        }
    }

    /// The host's addresses, within what is left of ureq's time budget.
    fn lookup(&self, host: &str, port: u16, timeout: NextTimeout) -> Result<Vec<IpAddr>, Error> {
        let budget = timeout
            .not_zero()
            .map_or(RESOLVE_TIMEOUT, |left| (*left).min(RESOLVE_TIMEOUT));
        match self.names.resolve_within(host, port, budget) {
            Ok(ips) => Ok(ips),
            Err(LookupError::TimedOut) => Err(Error::Timeout(timeout.reason)),
            Err(e) => Err(Error::Other(Box::new(Refused(ssrf::unresolvable_message(
                &e.to_string(),
            ))))),
        }
    }
}

impl ureq::unversioned::resolver::Resolver for VettingResolver {
    fn resolve(
        &self,
        uri: &Uri,
        _config: &ureq::config::Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, Error> {
        let host = uri.host().unwrap_or("");
        // http::Uri keeps an IPv6 literal in brackets.
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let port = uri
            .port_u16()
            .unwrap_or(if uri.scheme_str() == Some("https") {
                443
            } else {
                80
            });
        let ips = match bare.parse::<IpAddr>() {
            Ok(ip) => vec![ip],
            Err(_) => self.lookup(bare, port, timeout)?,
        };
        let addrs: Vec<SocketAddr> = ips
            .into_iter()
            .map(|ip| SocketAddr::new(ip, port))
            .collect();
        if addrs.is_empty() {
            return Err(Error::HostNotFound);
        }
        if !self.allow_private {
            // Every address must pass: a name with one public and one
            // private address is refused whole, as at creation.
            if let Some(bad) = addrs.iter().find(|a| ssrf::blocked_range(a.ip()).is_some()) {
                return Err(Error::Other(Box::new(Refused(
                    ssrf::private_address_message(bad.ip()),
                ))));
            }
        }
        let mut out = self.empty();
        for a in addrs {
            // ureq keeps at most 16 addresses; the rest are not needed to
            // connect (and were vetted all the same).
            if out.try_push(a).is_err() {
                break;
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::VettingResolver;
    use crate::shared::resolve::{Resolve, Resolver};
    use std::net::{IpAddr, SocketAddr};
    use std::sync::Arc;
    use ureq::unversioned::resolver::Resolver as _;
    use ureq::unversioned::transport::NextTimeout;

    /// Fixed answers, as an in-process test injects them.
    struct Names;

    impl Resolve for Names {
        fn lookup(&self, host: &str, _port: u16) -> Result<Vec<IpAddr>, String> {
            let ips: &[[u8; 4]] = match host {
                "public.test" => &[[93, 184, 216, 34]],
                "mixed.test" => &[[93, 184, 216, 34], [127, 0, 0, 1]],
                _ => return Err("unknown name".into()),
            };
            Ok(ips.iter().map(|ip| IpAddr::from(*ip)).collect())
        }
    }

    fn vet(vetting: &VettingResolver, url: &str) -> Result<Vec<SocketAddr>, String> {
        let uri = url.parse().unwrap();
        let config = ureq::config::Config::default();
        vetting
            .resolve(&uri, &config, NextTimeout::default())
            .map(|addrs| addrs.to_vec())
            .map_err(|e| match e {
                // As the sender logs it: the refusal's own words.
                ureq::Error::Other(inner) => inner.to_string(),
                other => format!("{other:?}"),
            })
    }

    #[test]
    fn every_address_is_vetted_and_only_vetted_ones_are_returned() {
        let names = Resolver::start(Arc::new(Names)).unwrap();
        let strict = VettingResolver::strict(names.clone());
        let public: SocketAddr = "93.184.216.34:8443".parse().unwrap();
        assert_eq!(vet(&strict, "https://public.test:8443/h"), Ok(vec![public]));
        assert_eq!(
            vet(&strict, "https://mixed.test/h"),
            Err("webhook_url resolves to a private/internal address (127.0.0.1)".into())
        );
        assert_eq!(
            vet(&strict, "https://other.test/h"),
            Err("webhook_url host cannot be resolved: unknown name".into())
        );
        assert!(vet(&strict, "https://127.0.0.1/h").is_err());
        let development = VettingResolver::development(names);
        assert_eq!(
            vet(&development, "http://mixed.test/h").map(|a| a.len()),
            Ok(2)
        );
    }
}
