//! The SSRF guard's pure part: what a webhook URL may point at.
//!
//! At creation the binary calls [`precheck`] (scheme, credentials, and the
//! host as the HTTP client will see it), resolves a domain host itself, and
//! refuses the URL if any resolved address is in a [`blocked_range`]. The
//! messages are the spec's English ones.
//!
//! Hosts are read with the `url` crate, i.e. the WHATWG URL parser that HTTP
//! clients use, so every spelling of an IP literal is caught as the address
//! it really denotes: `http://2130706433/`, `http://0177.0.0.1/`,
//! `http://0x7f.1/` and `http://127.1/` are all 127.0.0.1, and an IPv6
//! literal that embeds an IPv4 address (mapped `::ffff:a.b.c.d`, NAT64
//! `64:ff9b::/96`, 6to4 `2002::/16`, compatible `::a.b.c.d`) is judged by
//! that IPv4 address where the spec-level meaning is "reaches it".
//!
//! Not for: DNS resolution, connecting, or re-checking at delivery time
//! (the binary does all IO); URL syntax as the API reports it (that is
//! [`crate::validate`], which follows Django and runs first).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use url::Url;

/// A webhook URL's host, as the HTTP client will use it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    /// A DNS name, lower-case ASCII (IDNA already applied).
    Domain(String),
    /// An IP literal, in whatever spelling the URL used.
    Ip(IpAddr),
}

/// Where a webhook would be sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// `http` or `https`.
    pub scheme: String,
    pub host: Host,
    /// The explicit port, else 80 or 443.
    pub port: u16,
}

/// The field message when the URL does not even parse (the API's syntax
/// check normally catches such URLs first, with this same text).
const UNPARSABLE_URL: &str = "Введите правильный URL.";

/// Check the parts of `url` that need no DNS: it must parse, use http or
/// https, and carry no user name or password. Returns the host to resolve
/// (or the IP literal to check) and the port.
pub fn precheck(url: &str) -> Result<Target, String> {
    let parsed = Url::parse(url).map_err(|_| UNPARSABLE_URL.to_owned())?;
    let scheme = parsed.scheme();
    if scheme != "http" && scheme != "https" {
        return Err(format!(
            "webhook_url scheme must be http or https, got '{scheme}'"
        ));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err("webhook_url must not contain embedded credentials".to_owned());
    }
    let host = match parsed.host() {
        Some(url::Host::Domain(name)) => Host::Domain(name.to_ascii_lowercase()),
        Some(url::Host::Ipv4(ip)) => Host::Ip(IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => Host::Ip(IpAddr::V6(ip)),
        None => return Err(UNPARSABLE_URL.to_owned()),
    };
    let port = parsed
        .port_or_known_default()
        .ok_or_else(|| UNPARSABLE_URL.to_owned())?;
    Ok(Target {
        scheme: scheme.to_owned(),
        host,
        port,
    })
}

/// IPv4 special-purpose ranges no webhook may reach (RFC 6890 and its
/// updates): `(network, prefix length, name)`. The broadcast address comes
/// before 240/4 so it gets its own name.
const BLOCKED_V4: [(Ipv4Addr, u8, &str); 16] = [
    (Ipv4Addr::new(0, 0, 0, 0), 8, "0.0.0.0/8 (this network)"),
    (Ipv4Addr::new(10, 0, 0, 0), 8, "10.0.0.0/8 (private)"),
    (
        Ipv4Addr::new(100, 64, 0, 0),
        10,
        "100.64.0.0/10 (shared address space)",
    ),
    (Ipv4Addr::new(127, 0, 0, 0), 8, "127.0.0.0/8 (loopback)"),
    (
        Ipv4Addr::new(169, 254, 0, 0),
        16,
        "169.254.0.0/16 (link-local)",
    ),
    (Ipv4Addr::new(172, 16, 0, 0), 12, "172.16.0.0/12 (private)"),
    (
        Ipv4Addr::new(192, 0, 0, 0),
        24,
        "192.0.0.0/24 (IETF protocol assignments)",
    ),
    (
        Ipv4Addr::new(192, 0, 2, 0),
        24,
        "192.0.2.0/24 (documentation)",
    ),
    (
        Ipv4Addr::new(192, 88, 99, 0),
        24,
        "192.88.99.0/24 (6to4 relay anycast)",
    ),
    (
        Ipv4Addr::new(192, 168, 0, 0),
        16,
        "192.168.0.0/16 (private)",
    ),
    (
        Ipv4Addr::new(198, 18, 0, 0),
        15,
        "198.18.0.0/15 (benchmarking)",
    ),
    (
        Ipv4Addr::new(198, 51, 100, 0),
        24,
        "198.51.100.0/24 (documentation)",
    ),
    (
        Ipv4Addr::new(203, 0, 113, 0),
        24,
        "203.0.113.0/24 (documentation)",
    ),
    (Ipv4Addr::new(224, 0, 0, 0), 4, "224.0.0.0/4 (multicast)"),
    (
        Ipv4Addr::new(255, 255, 255, 255),
        32,
        "255.255.255.255/32 (limited broadcast)",
    ),
    (Ipv4Addr::new(240, 0, 0, 0), 4, "240.0.0.0/4 (reserved)"),
];

/// IPv6 ranges blocked outright, most specific first.
const BLOCKED_V6: [(Ipv6Addr, u8, &str); 13] = [
    (Ipv6Addr::UNSPECIFIED, 128, "::/128 (unspecified)"),
    (Ipv6Addr::LOCALHOST, 128, "::1/128 (loopback)"),
    (
        Ipv6Addr::new(0x64, 0xff9b, 1, 0, 0, 0, 0, 0),
        48,
        "64:ff9b:1::/48 (local-use NAT64)",
    ),
    (
        Ipv6Addr::new(0x100, 0, 0, 0, 0, 0, 0, 0),
        64,
        "100::/64 (discard-only)",
    ),
    (
        Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0),
        32,
        "2001::/32 (Teredo)",
    ),
    (
        Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0),
        23,
        "2001::/23 (IETF protocol assignments)",
    ),
    (
        Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0),
        32,
        "2001:db8::/32 (documentation)",
    ),
    // RFC 9637 (2024) added a second documentation prefix.
    (
        Ipv6Addr::new(0x3fff, 0, 0, 0, 0, 0, 0, 0),
        20,
        "3fff::/20 (documentation)",
    ),
    (
        Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 0),
        7,
        "fc00::/7 (unique local)",
    ),
    (
        Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0),
        10,
        "fe80::/10 (link-local)",
    ),
    (
        Ipv6Addr::new(0xfec0, 0, 0, 0, 0, 0, 0, 0),
        10,
        "fec0::/10 (site-local, deprecated)",
    ),
    (
        Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 0),
        8,
        "ff00::/8 (multicast)",
    ),
    (
        Ipv6Addr::new(0, 0, 0, 0, 0, 0, 0, 0),
        96,
        "::/96 (IPv4-compatible, deprecated)",
    ),
];

/// Global unicast space; anything outside it (and not handled above) is
/// reserved by IANA and never a legitimate webhook receiver.
const GLOBAL_UNICAST_V6: (Ipv6Addr, u8) = (Ipv6Addr::new(0x2000, 0, 0, 0, 0, 0, 0, 0), 3);
const OUTSIDE_GLOBAL_UNICAST: &str = "outside 2000::/3 (reserved)";

fn v4_in(ip: Ipv4Addr, net: Ipv4Addr, prefix: u8) -> bool {
    let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
    u32::from(ip) & mask == u32::from(net) & mask
}

fn v6_in(ip: Ipv6Addr, net: Ipv6Addr, prefix: u8) -> bool {
    let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
    u128::from(ip) & mask == u128::from(net) & mask
}

fn blocked_v4(ip: Ipv4Addr) -> Option<&'static str> {
    BLOCKED_V4
        .iter()
        .find(|(net, prefix, _)| v4_in(ip, *net, *prefix))
        .map(|(_, _, name)| *name)
}

/// The name of the special-purpose range `ip` falls in, `None` if it is a
/// public address a webhook may go to.
///
/// IPv6 forms that carry an IPv4 address a packet would really reach
/// (`::ffff:0:0/96` mapped, `64:ff9b::/96` NAT64, `2002::/16` 6to4) are
/// judged by that IPv4 address, so `::ffff:127.0.0.1` is loopback and
/// `::ffff:8.8.8.8` is public.
pub fn blocked_range(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => blocked_v4(v4),
        IpAddr::V6(v6) => blocked_v6(v6),
    }
}

fn blocked_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let bits = u128::from(ip);
    let low32 = Ipv4Addr::from((bits & 0xffff_ffff) as u32);
    if let Some(mapped) = ip.to_ipv4_mapped() {
        return blocked_v4(mapped);
    }
    if v6_in(ip, Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0, 0), 96) {
        return blocked_v4(low32);
    }
    if v6_in(ip, Ipv6Addr::new(0x2002, 0, 0, 0, 0, 0, 0, 0), 16) {
        // 2002:AABB:CCDD::/48 is the 6to4 site of A.B.C.D.
        let embedded = Ipv4Addr::from(((bits >> 80) & 0xffff_ffff) as u32);
        return blocked_v4(embedded);
    }
    if let Some((_, _, name)) = BLOCKED_V6
        .iter()
        .find(|(net, prefix, _)| v6_in(ip, *net, *prefix))
    {
        return Some(name);
    }
    if !v6_in(ip, GLOBAL_UNICAST_V6.0, GLOBAL_UNICAST_V6.1) {
        return Some(OUTSIDE_GLOBAL_UNICAST);
    }
    None
}

/// The spec's 400 message for a URL whose host resolves to a blocked address.
pub fn private_address_message(ip: IpAddr) -> String {
    format!("webhook_url resolves to a private/internal address ({ip})")
}

/// The spec's 400 message for a host that does not resolve.
pub fn unresolvable_message(detail: &str) -> String {
    format!("webhook_url host cannot be resolved: {detail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        match s.parse() {
            Ok(ip) => ip,
            Err(e) => panic!("{s}: {e}"),
        }
    }

    fn target(url: &str) -> Target {
        match precheck(url) {
            Ok(t) => t,
            Err(e) => panic!("{url}: {e}"),
        }
    }

    #[test]
    fn every_ipv4_range_is_blocked_at_both_ends() {
        let cases = [
            ("0.0.0.0", "0.255.255.255", "0.0.0.0/8 (this network)"),
            ("10.0.0.0", "10.255.255.255", "10.0.0.0/8 (private)"),
            (
                "100.64.0.0",
                "100.127.255.255",
                "100.64.0.0/10 (shared address space)",
            ),
            ("127.0.0.0", "127.255.255.255", "127.0.0.0/8 (loopback)"),
            (
                "169.254.0.0",
                "169.254.255.255",
                "169.254.0.0/16 (link-local)",
            ),
            ("172.16.0.0", "172.31.255.255", "172.16.0.0/12 (private)"),
            (
                "192.0.0.0",
                "192.0.0.255",
                "192.0.0.0/24 (IETF protocol assignments)",
            ),
            ("192.0.2.0", "192.0.2.255", "192.0.2.0/24 (documentation)"),
            (
                "192.88.99.0",
                "192.88.99.255",
                "192.88.99.0/24 (6to4 relay anycast)",
            ),
            ("192.168.0.0", "192.168.255.255", "192.168.0.0/16 (private)"),
            (
                "198.18.0.0",
                "198.19.255.255",
                "198.18.0.0/15 (benchmarking)",
            ),
            (
                "198.51.100.0",
                "198.51.100.255",
                "198.51.100.0/24 (documentation)",
            ),
            (
                "203.0.113.0",
                "203.0.113.255",
                "203.0.113.0/24 (documentation)",
            ),
            ("224.0.0.0", "239.255.255.255", "224.0.0.0/4 (multicast)"),
            ("240.0.0.0", "255.255.255.254", "240.0.0.0/4 (reserved)"),
            (
                "255.255.255.255",
                "255.255.255.255",
                "255.255.255.255/32 (limited broadcast)",
            ),
        ];
        for (first, last, name) in cases {
            assert_eq!(blocked_range(ip(first)), Some(name), "{first}");
            assert_eq!(blocked_range(ip(last)), Some(name), "{last}");
        }
        // Just outside the ranges.
        for public in [
            "1.0.0.0",
            "9.255.255.255",
            "11.0.0.0",
            "100.63.255.255",
            "100.128.0.0",
            "126.255.255.255",
            "128.0.0.0",
            "169.253.255.255",
            "169.255.0.0",
            "172.15.255.255",
            "172.32.0.0",
            "192.0.1.0",
            "192.0.3.0",
            "192.88.98.255",
            "192.88.100.0",
            "192.167.255.255",
            "192.169.0.0",
            "198.17.255.255",
            "198.20.0.0",
            "198.51.99.255",
            "198.51.101.0",
            "203.0.112.255",
            "203.0.114.0",
            "223.255.255.255",
            "8.8.8.8",
            "1.1.1.1",
            "77.88.55.242",
        ] {
            assert_eq!(blocked_range(ip(public)), None, "{public}");
        }
    }

    #[test]
    fn every_ipv6_range_is_blocked() {
        let cases = [
            ("::", "::/128 (unspecified)"),
            ("::1", "::1/128 (loopback)"),
            ("::2", "::/96 (IPv4-compatible, deprecated)"),
            ("::8.8.8.8", "::/96 (IPv4-compatible, deprecated)"),
            ("::127.0.0.1", "::/96 (IPv4-compatible, deprecated)"),
            ("64:ff9b:1::1", "64:ff9b:1::/48 (local-use NAT64)"),
            (
                "64:ff9b:1:ffff:ffff:ffff:ffff:ffff",
                "64:ff9b:1::/48 (local-use NAT64)",
            ),
            ("100::", "100::/64 (discard-only)"),
            ("100::ffff:ffff:ffff:ffff", "100::/64 (discard-only)"),
            ("2001::1", "2001::/32 (Teredo)"),
            ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "2001::/32 (Teredo)"),
            ("2001:1::1", "2001::/23 (IETF protocol assignments)"),
            ("2001:1ff:ffff::", "2001::/23 (IETF protocol assignments)"),
            ("2001:db8::1", "2001:db8::/32 (documentation)"),
            (
                "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff",
                "2001:db8::/32 (documentation)",
            ),
            ("3fff::1", "3fff::/20 (documentation)"),
            ("fc00::1", "fc00::/7 (unique local)"),
            ("fdff:ffff::1", "fc00::/7 (unique local)"),
            ("fe80::1", "fe80::/10 (link-local)"),
            ("febf:ffff::1", "fe80::/10 (link-local)"),
            ("fec0::1", "fec0::/10 (site-local, deprecated)"),
            ("ff02::1", "ff00::/8 (multicast)"),
            ("::1:2:3:4:5", "outside 2000::/3 (reserved)"),
            ("4000::1", "outside 2000::/3 (reserved)"),
        ];
        for (addr, name) in cases {
            assert_eq!(blocked_range(ip(addr)), Some(name), "{addr}");
        }
        for public in [
            "2606:4700::1111",
            "2001:4860:4860::8888",
            "2a00:1450:4010:c0e::71",
            "2001:200::1",
            "2001:db7:ffff::1",
            "2001:db9::1",
            "3fff:1000::1",
            "2000::1",
            "3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        ] {
            assert_eq!(blocked_range(ip(public)), None, "{public}");
        }
    }

    #[test]
    fn embedded_ipv4_is_judged_by_the_ipv4_address() {
        // IPv4-mapped, in both spellings.
        assert_eq!(
            blocked_range(ip("::ffff:127.0.0.1")),
            Some("127.0.0.0/8 (loopback)")
        );
        assert_eq!(
            blocked_range(ip("::ffff:7f00:1")),
            Some("127.0.0.0/8 (loopback)")
        );
        assert_eq!(
            blocked_range(ip("::ffff:10.1.2.3")),
            Some("10.0.0.0/8 (private)")
        );
        assert_eq!(
            blocked_range(ip("::ffff:169.254.169.254")),
            Some("169.254.0.0/16 (link-local)")
        );
        assert_eq!(blocked_range(ip("::ffff:8.8.8.8")), None);
        // NAT64 well-known prefix.
        assert_eq!(
            blocked_range(ip("64:ff9b::7f00:1")),
            Some("127.0.0.0/8 (loopback)")
        );
        assert_eq!(
            blocked_range(ip("64:ff9b::192.168.1.1")),
            Some("192.168.0.0/16 (private)")
        );
        assert_eq!(blocked_range(ip("64:ff9b::8.8.8.8")), None);
        // 6to4: 2002:AABB:CCDD:: embeds A.B.C.D.
        assert_eq!(
            blocked_range(ip("2002:7f00:1::1")),
            Some("127.0.0.0/8 (loopback)")
        );
        assert_eq!(
            blocked_range(ip("2002:c0a8:101::")),
            Some("192.168.0.0/16 (private)")
        );
        assert_eq!(blocked_range(ip("2002:808:808::1")), None);
    }

    #[test]
    fn precheck_reads_every_ip_spelling_as_the_real_address() {
        let loopback = Host::Ip(ip("127.0.0.1"));
        for url in [
            "http://127.0.0.1/",
            "http://2130706433/",
            "http://0177.0.0.1/",
            "http://0x7f.1/",
            "http://0x7f000001/",
            "http://127.1/",
            "http://017700000001/",
            "http://127.0.0.1.:8080/",
        ] {
            assert_eq!(target(url).host, loopback, "{url}");
        }
        let t = target("https://[::ffff:127.0.0.1]/");
        assert_eq!(t.host, Host::Ip(ip("::ffff:7f00:1")));
        assert_eq!(
            blocked_range(ip("::ffff:7f00:1")),
            Some("127.0.0.0/8 (loopback)")
        );
        assert_eq!(target("http://[::1]:8443/x").host, Host::Ip(ip("::1")));
        assert_eq!(
            target("http://[0:0:0:0:0:0:0:1]/").host,
            Host::Ip(ip("::1"))
        );
    }

    #[test]
    fn precheck_domains_ports_and_schemes() {
        assert_eq!(
            target("https://Example.COM/hook"),
            Target {
                scheme: "https".into(),
                host: Host::Domain("example.com".into()),
                port: 443,
            }
        );
        assert_eq!(target("http://example.com/").port, 80);
        assert_eq!(target("HTTP://example.com:8080/").port, 8080);
        assert_eq!(target("http://example.com:8080/").scheme, "http");
        assert_eq!(
            target("http://пример.рф/").host,
            Host::Domain("xn--e1afmkfd.xn--p1ai".into())
        );
        assert_eq!(
            target("http://localhost/").host,
            Host::Domain("localhost".into())
        );
        for (url, scheme) in [
            ("ftp://example.com/", "ftp"),
            ("ftps://example.com/", "ftps"),
            ("gopher://example.com/", "gopher"),
            ("file:///etc/passwd", "file"),
            ("FTP://example.com/", "ftp"),
        ] {
            assert_eq!(
                precheck(url),
                Err(format!(
                    "webhook_url scheme must be http or https, got '{scheme}'"
                ))
            );
        }
        let credentials = Err("webhook_url must not contain embedded credentials".to_owned());
        assert_eq!(precheck("https://user:pass@example.com/"), credentials);
        assert_eq!(precheck("https://user@example.com/"), credentials);
        assert_eq!(precheck("https://:pass@example.com/"), credentials);
        for bad in ["", "not a url", "https://example.com:99999/", "http://"] {
            assert_eq!(precheck(bad), Err(UNPARSABLE_URL.to_owned()), "{bad:?}");
        }
    }

    #[test]
    fn messages_are_the_specs() {
        assert_eq!(
            private_address_message(ip("10.0.0.1")),
            "webhook_url resolves to a private/internal address (10.0.0.1)"
        );
        assert_eq!(
            private_address_message(ip("::ffff:127.0.0.1")),
            "webhook_url resolves to a private/internal address (::ffff:127.0.0.1)"
        );
        assert_eq!(
            unresolvable_message("no such host"),
            "webhook_url host cannot be resolved: no such host"
        );
    }
}
