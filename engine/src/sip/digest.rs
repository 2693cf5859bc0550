//! HTTP Digest authentication as SIP uses it (RFC 3261 s22, RFC 2617):
//! parsing a provider's `WWW-Authenticate`/`Proxy-Authenticate` challenge
//! and writing the `Authorization` answer, MD5 with and without
//! `qop=auth`. Also the server side (`verify`), which the loopback
//! provider simulator uses.
//!
//! Not for: `auth-int` (no provider asks it of a REGISTER without a body),
//! SHA-256 digests (RFC 8760; our providers offer MD5), or storing
//! credentials.

use md5::{Digest, Md5};
use std::fmt::Write as _;

/// Longest challenge value we read; a real one is ~200 bytes.
pub const CHALLENGE_BYTES_MAX: usize = 2048;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Challenge {
    pub realm: String,
    pub nonce: String,
    pub opaque: Option<String>,
    /// The server offered `qop=auth` (we then always use it, s22.4).
    pub qop_auth: bool,
    /// `stale=true`: the nonce expired but our credentials were right.
    pub stale: bool,
}

impl Challenge {
    /// Reads a `Digest ...` challenge; `None` for another scheme, another
    /// algorithm than MD5, or a challenge without realm or nonce.
    pub fn parse(value: &str) -> Option<Challenge> {
        if value.len() > CHALLENGE_BYTES_MAX {
            return None;
        }
        let params = digest_params(value)?;
        let get = |k: &str| {
            params
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(k))
                .map(|(_, v)| v.as_str())
        };
        if let Some(alg) = get("algorithm") {
            if !alg.eq_ignore_ascii_case("MD5") {
                return None;
            }
        }
        let qop_auth =
            get("qop").is_some_and(|q| q.split(',').any(|t| t.trim().eq_ignore_ascii_case("auth")));
        // A server that lists only qop values we cannot do is not answerable.
        if get("qop").is_some() && !qop_auth {
            return None;
        }
        Some(Challenge {
            realm: get("realm")?.to_owned(),
            nonce: get("nonce")?.to_owned(),
            opaque: get("opaque").map(str::to_owned),
            qop_auth,
            stale: get("stale").is_some_and(|s| s.eq_ignore_ascii_case("true")),
        })
    }
}

/// `name=value` pairs of a `Digest` header value (values unquoted).
fn digest_params(value: &str) -> Option<Vec<(String, String)>> {
    let value = value.trim();
    let (scheme, rest) = value.split_once(char::is_whitespace)?;
    if !scheme.eq_ignore_ascii_case("Digest") {
        return None;
    }
    let mut out = Vec::new();
    let mut rest = rest.trim_start();
    while !rest.is_empty() {
        let (name, after) = rest.split_once('=')?;
        let name = name.trim().trim_start_matches(',').trim().to_owned();
        let after = after.trim_start();
        let (val, remaining) = if let Some(q) = after.strip_prefix('"') {
            let end = q.find('"')?;
            (q[..end].to_owned(), &q[end + 1..])
        } else {
            let end = after.find(',').unwrap_or(after.len());
            (after[..end].trim().to_owned(), &after[end..])
        };
        out.push((name, val));
        rest = remaining.trim_start().trim_start_matches(',').trim_start();
    }
    Some(out)
}

fn md5_hex(s: &str) -> String {
    let digest = Md5::digest(s.as_bytes());
    let mut out = String::with_capacity(32);
    for b in digest {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// The digest `response` value.
#[allow(clippy::too_many_arguments)]
pub fn response(
    username: &str,
    realm: &str,
    password: &str,
    method: &str,
    uri: &str,
    nonce: &str,
    qop: Option<(&str, &str)>,
) -> String {
    let ha1 = md5_hex(&format!("{username}:{realm}:{password}"));
    let ha2 = md5_hex(&format!("{method}:{uri}"));
    match qop {
        Some((nc, cnonce)) => md5_hex(&format!("{ha1}:{nonce}:{nc}:{cnonce}:auth:{ha2}")),
        None => md5_hex(&format!("{ha1}:{nonce}:{ha2}")),
    }
}

/// The `Authorization` (or `Proxy-Authorization`) value answering `ch` for
/// a request `method uri`. `nc` counts the uses of this nonce (from 1);
/// `cnonce` is our random value.
pub fn authorization(
    ch: &Challenge,
    username: &str,
    password: &str,
    method: &str,
    uri: &str,
    nc: u32,
    cnonce: &str,
) -> String {
    let nc = format!("{nc:08x}");
    let qop = ch.qop_auth.then_some((nc.as_str(), cnonce));
    let resp = response(username, &ch.realm, password, method, uri, &ch.nonce, qop);
    let mut out = format!(
        "Digest username=\"{username}\", realm=\"{}\", nonce=\"{}\", uri=\"{uri}\", \
         response=\"{resp}\", algorithm=MD5",
        ch.realm, ch.nonce
    );
    if let Some(opaque) = &ch.opaque {
        let _ = write!(out, ", opaque=\"{opaque}\"");
    }
    if ch.qop_auth {
        let _ = write!(out, ", qop=auth, nc={nc}, cnonce=\"{cnonce}\"");
    }
    out
}

/// Server side: whether `authorization` (a header value) proves knowledge of
/// `password` for `method` with the nonce we issued.
pub fn verify(authorization: &str, password: &str, method: &str, nonce: &str) -> bool {
    let Some(params) = digest_params(authorization) else {
        return false;
    };
    let get = |k: &str| {
        params
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(k))
            .map(|(_, v)| v.as_str())
    };
    let (Some(user), Some(realm), Some(uri), Some(got), Some(their_nonce)) = (
        get("username"),
        get("realm"),
        get("uri"),
        get("response"),
        get("nonce"),
    ) else {
        return false;
    };
    if their_nonce != nonce {
        return false;
    }
    let qop = match (get("qop"), get("nc"), get("cnonce")) {
        (Some(q), Some(nc), Some(cnonce)) if q.eq_ignore_ascii_case("auth") => Some((nc, cnonce)),
        (None, _, _) => None,
        _ => return false,
    };
    response(user, realm, password, method, uri, nonce, qop).eq_ignore_ascii_case(got)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc2617_example_with_qop() {
        // RFC 2617 s3.5.
        let r = response(
            "Mufasa",
            "testrealm@host.com",
            "Circle Of Life",
            "GET",
            "/dir/index.html",
            "dcd98b7102dd2f0e8b11d0f600bfb0c093",
            Some(("00000001", "0a4f113b")),
        );
        assert_eq!(r, "6629fae49393a05397450978507c4ef1");
    }

    #[test]
    fn challenge_parsing_and_round_trip() {
        let ch = Challenge::parse(
            "Digest realm=\"sip.example\", nonce=\"abc,def\", opaque=\"o\", qop=\"auth,auth-int\", algorithm=MD5",
        )
        .unwrap();
        assert_eq!(ch.realm, "sip.example");
        assert_eq!(ch.nonce, "abc,def");
        assert!(ch.qop_auth && !ch.stale);
        let auth = authorization(&ch, "u", "p", "REGISTER", "sip:sip.example", 1, "cn");
        assert!(auth.contains("qop=auth, nc=00000001, cnonce=\"cn\""));
        assert!(auth.contains("opaque=\"o\""));
        assert!(verify(&auth, "p", "REGISTER", "abc,def"));
        assert!(!verify(&auth, "wrong", "REGISTER", "abc,def"));
        assert!(!verify(&auth, "p", "REGISTER", "other-nonce"));

        let plain = Challenge::parse("digest realm=r,nonce=n,stale=TRUE").unwrap();
        assert!(!plain.qop_auth && plain.stale);
        let auth = authorization(&plain, "u", "p", "REGISTER", "sip:r", 1, "cn");
        assert!(!auth.contains("qop"));
        assert!(verify(&auth, "p", "REGISTER", "n"));
    }

    #[test]
    fn unusable_challenges() {
        assert!(Challenge::parse("Basic realm=\"x\"").is_none());
        assert!(Challenge::parse("Digest realm=\"x\", nonce=\"n\", algorithm=SHA-256").is_none());
        assert!(Challenge::parse("Digest realm=\"x\", nonce=\"n\", qop=\"auth-int\"").is_none());
        assert!(Challenge::parse("Digest realm=\"x\"").is_none());
        assert!(Challenge::parse("Digest realm=\"unterminated").is_none());
        assert!(Challenge::parse("Digest").is_none());
        assert!(!verify("garbage", "p", "REGISTER", "n"));
    }
}
