//! One Via header value (RFC 3261 s20.42): parsed from a request, and
//! stamped with `received`/`rport` (RFC 3581) for the response's way back.
//!
//! Not for: splitting a header line into values (`super::message` does) or
//! choosing where a response goes (`super::server`).

use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};

/// One Via value: `SIP/2.0/UDP host[:port];params`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Via {
    pub transport: String,
    pub host: String,
    pub port: Option<u16>,
    pub params: Vec<(String, Option<String>)>,
}

/// RFC 3261's magic cookie: a branch starting with it is globally unique.
pub const BRANCH_COOKIE: &str = "z9hG4bK";

impl Via {
    pub fn parse(value: &str) -> Option<Via> {
        let (proto, rest) = value.trim().split_once(char::is_whitespace)?;
        let mut proto_parts = proto.split('/');
        let (name, version, transport) = (
            proto_parts.next()?,
            proto_parts.next()?,
            proto_parts.next()?,
        );
        if !name.trim().eq_ignore_ascii_case("SIP") || version.trim() != "2.0" {
            return None;
        }
        let rest = rest.trim();
        let (sent_by, params) = match rest.find(';') {
            Some(i) => (&rest[..i], parse_params(&rest[i + 1..])),
            None => (rest, Vec::new()),
        };
        let (host, port) = split_host_port(sent_by.trim())?;
        Some(Via {
            transport: transport.trim().to_ascii_uppercase(),
            host,
            port,
            params,
        })
    }

    pub fn param(&self, name: &str) -> Option<Option<&str>> {
        self.params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_deref())
    }

    pub fn branch(&self) -> Option<&str> {
        self.param("branch").flatten()
    }

    /// `host[:port]` as written, for transaction matching.
    pub fn sent_by(&self) -> String {
        match self.port {
            Some(p) => format!("{}:{p}", self.host),
            None => self.host.clone(),
        }
    }

    /// Where a response to a request that arrived from `src` with this top
    /// Via goes (RFC 3261 s18.2.2 with RFC 3581 `rport`): with `rport`, back
    /// to the source address and port; else to `received` (or the sent-by
    /// host if it is an IP literal) at the sent-by port. A sent-by host name
    /// would need DNS, which the response path must not wait for: the source
    /// address answers instead.
    pub fn response_target(&self, src: SocketAddr) -> SocketAddr {
        if self.param("rport").is_some() {
            return src;
        }
        let port = self.port.unwrap_or(5060);
        if let Some(Some(received)) = self.param("received") {
            if let Ok(ip) = received.parse::<IpAddr>() {
                return SocketAddr::new(ip, port);
            }
        }
        match self.host.trim_matches(['[', ']']).parse::<IpAddr>() {
            Ok(ip) => SocketAddr::new(ip, port),
            Err(_) => SocketAddr::new(src.ip(), port),
        }
    }

    /// The value with `received` (when the source differs from sent-by)
    /// and a filled-in `rport` (when the client asked for it) added, as a
    /// server must before copying the Via into its responses.
    pub fn stamped(&self, src: SocketAddr) -> String {
        let mut out = format!("SIP/2.0/{} {}", self.transport, self.sent_by());
        let host_is_src = self
            .host
            .trim_matches(['[', ']'])
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip == src.ip());
        for (k, v) in &self.params {
            match (k.as_str(), v) {
                ("received", _) => {}
                ("rport", _) => {
                    let _ = write!(out, ";rport={}", src.port());
                }
                (k, Some(v)) => {
                    let _ = write!(out, ";{k}={v}");
                }
                (k, None) => {
                    let _ = write!(out, ";{k}");
                }
            }
        }
        if !host_is_src || self.param("rport").is_some() {
            let _ = write!(out, ";received={}", src.ip());
        }
        out
    }
}

/// `host[:port]`, with IPv6 literals in brackets.
pub fn split_host_port(s: &str) -> Option<(String, Option<u16>)> {
    if s.is_empty() {
        return None;
    }
    if let Some(rest) = s.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p.parse().ok()?),
            None if after.is_empty() => None,
            None => return None,
        };
        return Some((format!("[{host}]"), port));
    }
    match s.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() && !h.contains(':') => {
            Some((h.to_owned(), Some(p.parse().ok()?)))
        }
        Some(_) => None,
        None => Some((s.to_owned(), None)),
    }
}

/// Parameters as `name[=value]`, split at `;` outside quotes.
pub fn parse_params(s: &str) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    let mut quoted = false;
    let mut start = 0;
    let mut push = |part: &str| {
        let part = part.trim();
        if part.is_empty() {
            return;
        }
        match part.split_once('=') {
            Some((k, v)) => out.push((
                k.trim().to_ascii_lowercase(),
                Some(v.trim().trim_matches('"').to_owned()),
            )),
            None => out.push((part.to_ascii_lowercase(), None)),
        }
    };
    for (i, c) in s.char_indices() {
        match c {
            '"' => quoted = !quoted,
            ';' if !quoted => {
                push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    push(&s[start..]);
    out
}
