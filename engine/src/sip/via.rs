//! One Via header value (RFC 3261 s20.42): parsed from a request, and
//! stamped with `received`/`rport` (RFC 3581) for the response's way back.
//!
//! Not for: splitting a header line into values (`super::message` does) or
//! choosing where a response goes (`super::server`).

use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};

/// One Via value: `SIP/2.0/UDP host[:port];params`, borrowed from the
/// header value it was parsed from (a request's Via is read twice a call,
/// INVITE and ACK, so it allocates nothing until it is stamped).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Via<'a> {
    /// As written (`UDP`, `udp`...); [`Via::stamped`] writes it upper-case.
    pub transport: &'a str,
    /// IPv6 literals keep their brackets.
    pub host: &'a str,
    pub port: Option<u16>,
    /// The parameters after the first `;`, as written; [`Via::param`]
    /// reads them.
    params: &'a str,
}

/// RFC 3261's magic cookie: a branch starting with it is globally unique.
pub const BRANCH_COOKIE: &str = "z9hG4bK";

impl<'a> Via<'a> {
    pub fn parse(value: &'a str) -> Option<Via<'a>> {
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
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, ""),
        };
        let (host, port) = split_host_port_borrowed(sent_by.trim())?;
        Some(Via {
            transport: transport.trim(),
            host,
            port,
            params,
        })
    }

    /// Parameter `name` (case-insensitive): `Some(None)` when present
    /// without a value, `Some(Some(v))` with `v` unquoted.
    pub fn param(&self, name: &str) -> Option<Option<&'a str>> {
        params_of(self.params)
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    pub fn branch(&self) -> Option<&'a str> {
        self.param("branch").flatten()
    }

    /// `host[:port]` as written, for transaction matching.
    pub fn sent_by(&self) -> String {
        match self.port {
            Some(p) => format!("{}:{p}", self.host),
            None => self.host.to_owned(),
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
        // Room for what is added (`;rport=` and a port, `;received=` and an
        // IPv6 address), so the text is written without growing.
        let mut out = String::with_capacity(96 + self.host.len() + self.params.len());
        out.push_str("SIP/2.0/");
        for c in self.transport.chars() {
            out.push(c.to_ascii_uppercase());
        }
        out.push(' ');
        out.push_str(self.host);
        if let Some(p) = self.port {
            out.push(':');
            push_decimal(&mut out, p);
        }
        let host_is_src = self
            .host
            .trim_matches(['[', ']'])
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip == src.ip());
        let mut asked_rport = false;
        for part in raw_params(self.params) {
            let name = part.split_once('=').map_or(part, |(k, _)| k).trim();
            if name.eq_ignore_ascii_case("received") {
                continue;
            }
            out.push(';');
            if name.eq_ignore_ascii_case("rport") {
                asked_rport = true;
                out.push_str(name);
                out.push('=');
                push_decimal(&mut out, src.port());
            } else {
                // As written: a quoted value keeps its quotes.
                out.push_str(part);
            }
        }
        if !host_is_src || asked_rport {
            let _ = write!(out, ";received={}", src.ip());
        }
        out
    }
}

/// `n` in decimal, without the formatting machinery (a Via is stamped and
/// a response built per call).
pub(super) fn push_decimal(out: &mut String, n: impl Into<u32>) {
    let mut n: u32 = n.into();
    let mut digits = [0u8; 10];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for d in &digits[i..] {
        out.push(char::from(*d));
    }
}

/// The `name[=value]` parameters of `s`, split at `;` outside quotes,
/// trimmed, values unquoted, empty ones skipped: borrowed, in order.
pub fn params_of(s: &str) -> impl Iterator<Item = (&str, Option<&str>)> {
    raw_params(s).map(|part| match part.split_once('=') {
        Some((k, v)) => (k.trim(), Some(v.trim().trim_matches('"'))),
        None => (part, None),
    })
}

/// The parameters of `s` as written (split at `;` outside quotes,
/// trimmed, empty ones skipped).
fn raw_params(s: &str) -> impl Iterator<Item = &str> {
    let mut rest = Some(s);
    std::iter::from_fn(move || loop {
        let (part, after) = split_param(rest?);
        rest = after;
        let part = part.trim();
        if !part.is_empty() {
            return Some(part);
        }
    })
}

/// The first parameter of `s` and what follows its `;` (none at the end).
fn split_param(s: &str) -> (&str, Option<&str>) {
    let mut quoted = false;
    for (i, c) in s.char_indices() {
        match c {
            '"' => quoted = !quoted,
            ';' if !quoted => return (&s[..i], Some(&s[i + 1..])),
            _ => {}
        }
    }
    (s, None)
}

/// `host[:port]`, with IPv6 literals in brackets.
pub fn split_host_port(s: &str) -> Option<(String, Option<u16>)> {
    split_host_port_borrowed(s).map(|(host, port)| (host.to_owned(), port))
}

/// [`split_host_port`] without a copy: the host is a slice of `s`, its
/// brackets kept.
fn split_host_port_borrowed(s: &str) -> Option<(&str, Option<u16>)> {
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
        // The host with its brackets: `[`, the address, `]`.
        return Some((&s[..host.len() + 2], port));
    }
    match s.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() && !h.contains(':') => Some((h, Some(p.parse().ok()?))),
        Some(_) => None,
        None => Some((s, None)),
    }
}

/// Parameters as `name[=value]`, split at `;` outside quotes, names
/// lower-cased, values unquoted: owned, for callers that keep them.
pub fn parse_params(s: &str) -> Vec<(String, Option<String>)> {
    params_of(s)
        .map(|(k, v)| (k.to_ascii_lowercase(), v.map(str::to_owned)))
        .collect()
}
