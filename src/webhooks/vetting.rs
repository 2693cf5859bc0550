//! The SSRF guard at delivery time, as ureq's name resolver.
//!
//! A webhook URL was checked when the verification was created, but DNS can
//! change between then and delivery (DNS rebinding: public at creation,
//! `127.0.0.1` at delivery). So every attempt resolves the host again, checks
//! EVERY address against the blocked ranges, and hands ureq only addresses
//! that passed: the connection can only go to a vetted IP, while the `Host`
//! header and TLS SNI stay the URL's host name. Doing this inside ureq's
//! resolver hook (rather than resolving first and then letting ureq resolve
//! again) leaves no second lookup for an attacker to answer differently.
//!
//! [`VettingResolver::strict`] refuses a host if any of its addresses is in a
//! blocked range; [`VettingResolver::development`] (for a company's
//! development URLs) allows loopback and private addresses.
//!
//! Not for: the range tables (`dialproof_engine::ssrf`), the https-only rule
//! (the sender checks the scheme before any lookup) or caching lookups.

use dialproof_engine::ssrf;
use std::net::{IpAddr, SocketAddr};
use ureq::http::Uri;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::NextTimeout;

/// Why an address was refused: shown in the delivery log as the attempt's
/// error, in the spec's wording for the same refusal at creation.
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
    system: DefaultResolver,
}

impl VettingResolver {
    /// For ordinary webhook URLs: public addresses only.
    pub fn strict() -> Self {
        VettingResolver {
            allow_private: false,
            system: DefaultResolver::default(),
        }
    }

    /// For a company's development URLs: any address.
    pub fn development() -> Self {
        VettingResolver {
            allow_private: true,
            system: DefaultResolver::default(),
        }
    }
}

impl Resolver for VettingResolver {
    fn resolve(
        &self,
        uri: &Uri,
        config: &ureq::config::Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
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
        let addrs: Vec<SocketAddr> = if let Ok(ip) = bare.parse::<IpAddr>() {
            vec![SocketAddr::new(ip, port)]
        } else if let Some(ips) = crate::runtime::resolve::test_hosts_override(bare) {
            ips.into_iter()
                .map(|ip| SocketAddr::new(ip, port))
                .collect()
        } else {
            // The system resolver, with ureq's own timeout handling.
            self.system.resolve(uri, config, timeout)?.to_vec()
        };
        if addrs.is_empty() {
            return Err(ureq::Error::HostNotFound);
        }
        if !self.allow_private {
            // Every address must pass: a name with one public and one
            // private address is refused whole, as at creation.
            if let Some(bad) = addrs.iter().find(|a| ssrf::blocked_range(a.ip()).is_some()) {
                return Err(ureq::Error::Other(Box::new(Refused(
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
