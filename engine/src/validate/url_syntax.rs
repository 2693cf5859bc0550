//! URL syntax exactly as Django 5.2's `URLValidator` judges it.
//!
//! The original runs DRF's URLField, i.e. Django's URLValidator: a regex
//! (scheme, optional `user:pass@`, a host that is a dotted-quad IPv4, a
//! bracketed IPv6, `localhost` or a domain with a letter TLD, an optional
//! port of 1-5 digits, then a path without whitespace), plus what Python's
//! `urllib.parse.urlsplit` refuses and a 253-character hostname cap. The
//! `url` crate alone is far more permissive (it accepts `http://2130706433/`
//! and `http://a_b/`), so this module restates the regex by hand; Rust's
//! `regex` has no look-around and is not a dependency here anyway.
//!
//! Not for: deciding whether a URL is safe to call. That is the SSRF guard
//! ([`crate::ssrf`]), which also narrows the schemes to http and https.

use super::pytext;
use std::net::Ipv6Addr;

/// Django's `URLValidator.max_length` (MAX_URL_LENGTH), checked on its own
/// besides the field's 500-character limit.
pub const URL_CHARS_MAX: usize = 2048;
/// RFC 1034: a full host name of at most 253 characters.
const HOSTNAME_CHARS_MAX: usize = 253;
/// RFC 1034: a label of at most 63 characters.
const LABEL_CHARS_MAX: usize = 63;
/// Digits of a port in Django's regex (`:[0-9]{1,5}`; the value itself is
/// not range-checked there).
const PORT_DIGITS_MAX: usize = 5;
/// Django's `MAX_IPV6_ADDRESS_LENGTH` for the bracketed host.
const IPV6_CHARS_MAX: usize = 39;
/// `xn--[a-z0-9]{1,59}` in Django's TLD pattern.
const PUNYCODE_TLD_BODY_MAX: usize = 59;

/// Schemes URLValidator accepts by default.
const SCHEMES: [&str; 4] = ["http", "https", "ftp", "ftps"];

/// Characters whose NFKC form contains one of `/?#@:`. Python's `urlsplit`
/// refuses a non-ASCII netloc holding any of them (CVE-2019-9636), and
/// Django turns that ValueError into "invalid URL". Listed from CPython
/// 3.11's `unicodedata` (Unicode 14).
const NFKC_NETLOC_TRAPS: [char; 19] = [
    '\u{2047}', '\u{2048}', '\u{2049}', '\u{2100}', '\u{2101}', '\u{2105}', '\u{2106}', '\u{2a74}',
    '\u{fe13}', '\u{fe16}', '\u{fe55}', '\u{fe56}', '\u{fe5f}', '\u{fe6b}', '\u{ff03}', '\u{ff0f}',
    '\u{ff1a}', '\u{ff1f}', '\u{ff20}',
];

/// Whether Django's URLValidator accepts `value` (already stripped of
/// surrounding whitespace by the CharField).
pub(crate) fn is_valid_url(value: &str) -> bool {
    if pytext::char_len(value) > URL_CHARS_MAX {
        return false;
    }
    if value.contains(['\t', '\r', '\n']) {
        return false;
    }
    // `value.split("://")[0].lower() in schemes`; the regex then requires
    // the string to start with exactly that scheme and "://".
    let Some((scheme, rest)) = value.split_once("://") else {
        return false;
    };
    if !SCHEMES.iter().any(|s| s.eq_ignore_ascii_case(scheme)) {
        return false;
    }
    urlsplit_accepts(rest) && regex_accepts(rest) && netloc_host_ok(rest)
}

/// The netloc as `urlsplit` cuts it: up to the first '/', '?' or '#'.
fn netloc(after_scheme: &str) -> &str {
    let end = after_scheme
        .find(['/', '?', '#'])
        .unwrap_or(after_scheme.len());
    &after_scheme[..end]
}

/// The ValueErrors of Python 3.11's `urlsplit` for this netloc.
fn urlsplit_accepts(after_scheme: &str) -> bool {
    let netloc = netloc(after_scheme);
    let open = netloc.contains('[');
    let close = netloc.contains(']');
    if open != close {
        return false; // "Invalid IPv6 URL"
    }
    if open {
        // `netloc.partition('[')[2].partition(']')[0]` must be an IPv6
        // address (IPvFuture `v1.x` too), never an IPv4 one.
        let after_open = netloc.split_once('[').map_or("", |(_, r)| r);
        let bracketed = after_open.split_once(']').map_or(after_open, |(h, _)| h);
        if !python_bracketed_host_ok(bracketed) {
            return false;
        }
    }
    if !netloc.is_ascii() && netloc.contains(NFKC_NETLOC_TRAPS) {
        return false;
    }
    true
}

/// `urllib.parse._check_bracketed_host`.
fn python_bracketed_host_ok(host: &str) -> bool {
    if let Some(future) = host.strip_prefix('v') {
        // \Av[a-fA-F0-9]+\..+\Z
        let hex_len = future.bytes().take_while(u8::is_ascii_hexdigit).count();
        let tail = &future[hex_len..];
        return hex_len > 0 && tail.starts_with('.') && tail.len() > 1 && !tail.contains('\n');
    }
    python_ipv6_ok(host, usize::MAX)
}

/// `ipaddress.IPv6Address(s)` (with an optional `%scope`), and at most
/// `max_chars` characters.
fn python_ipv6_ok(s: &str, max_chars: usize) -> bool {
    if pytext::char_len(s) > max_chars {
        return false;
    }
    let addr = match s.split_once('%') {
        Some((addr, scope)) => {
            if scope.is_empty() || scope.contains('%') {
                return false;
            }
            addr
        }
        None => s,
    };
    addr.parse::<Ipv6Addr>().is_ok()
}

/// Django's check after the regex: a netloc that is `[...]` (plus a port)
/// must hold a valid IPv6 address of at most 39 characters, and the
/// hostname `urlsplit` sees must exist and be at most 253 characters.
fn netloc_host_ok(after_scheme: &str) -> bool {
    let netloc = netloc(after_scheme);
    // re.search(r"^\[(.+)\](?::[0-9]{1,5})?$", netloc)
    if let Some(inner_and_rest) = netloc.strip_prefix('[') {
        let candidate = inner_and_rest.rmatch_indices(']').find_map(|(i, _)| {
            let rest = &inner_and_rest[i + 1..];
            let port_ok = rest.is_empty()
                || rest.strip_prefix(':').is_some_and(|p| {
                    (1..=PORT_DIGITS_MAX).contains(&p.len())
                        && p.bytes().all(|b| b.is_ascii_digit())
                });
            (port_ok && i > 0).then(|| &inner_and_rest[..i])
        });
        if let Some(inner) = candidate {
            if !python_ipv6_ok(inner, IPV6_CHARS_MAX) {
                return false;
            }
        }
    }
    // SplitResult.hostname: after the last '@'; inside brackets, or before
    // the first ':'; lower-cased up to a '%'.
    let hostinfo = netloc.rsplit_once('@').map_or(netloc, |(_, h)| h);
    let hostname = match hostinfo.split_once('[') {
        Some((_, bracketed)) => bracketed.split_once(']').map_or(bracketed, |(h, _)| h),
        None => hostinfo.split_once(':').map_or(hostinfo, |(h, _)| h),
    };
    if hostname.is_empty() {
        return false;
    }
    let (name, zone) = hostname
        .split_once('%')
        .map_or((hostname, None), |(n, z)| (n, Some(z)));
    let lowered_len =
        pytext::char_len(&name.to_lowercase()) + zone.map_or(0, |z| 1 + pytext::char_len(z));
    lowered_len <= HOSTNAME_CHARS_MAX
}

/// The URLValidator regex on what follows `scheme://`:
/// `(?:[^\s:@/]+(?::[^\s:@/]*)?@)?(?:ipv4|ipv6|host)(?::[0-9]{1,5})?(?:[/?#][^\s]*)?\Z`.
///
/// The user-info part cannot contain '@', so if present it ends at the first
/// '@'; the host cannot contain ':', '/', '?' or '#', so it ends at the
/// first of those. That leaves two parses to try, with and without
/// user-info, and each is then forced.
fn regex_accepts(rest: &str) -> bool {
    if let Some((userinfo, after)) = rest.split_once('@') {
        if userinfo_ok(userinfo) && host_port_path_ok(after) {
            return true;
        }
    }
    host_port_path_ok(rest)
}

/// `[^\s:@/]+(?::[^\s:@/]*)?` (the '@' is already excluded).
fn userinfo_ok(userinfo: &str) -> bool {
    let plain = |s: &str| {
        !s.chars()
            .any(|c| pytext::is_space(c) || c == ':' || c == '/')
    };
    let (user, password) = match userinfo.split_once(':') {
        Some((u, p)) => (u, p),
        None => (userinfo, ""),
    };
    !user.is_empty() && plain(user) && plain(password)
}

fn host_port_path_ok(s: &str) -> bool {
    let (host_ok, tail) = if let Some(inner_and_rest) = s.strip_prefix('[') {
        // \[[0-9a-f:.]+\] (case-insensitive)
        match inner_and_rest.split_once(']') {
            Some((inner, tail)) => (
                !inner.is_empty()
                    && inner
                        .bytes()
                        .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.'),
                tail,
            ),
            None => (false, ""),
        }
    } else {
        let end = s.find([':', '/', '?', '#']).unwrap_or(s.len());
        let host = &s[..end];
        (
            host.eq_ignore_ascii_case("localhost") || is_dotted_quad(host) || is_domain(host),
            &s[end..],
        )
    };
    host_ok && port_path_ok(tail)
}

/// `(?::[0-9]{1,5})?(?:[/?#][^\s]*)?\Z`
fn port_path_ok(tail: &str) -> bool {
    let path = match tail.strip_prefix(':') {
        Some(after_colon) => {
            let digits = after_colon.bytes().take_while(u8::is_ascii_digit).count();
            if !(1..=PORT_DIGITS_MAX).contains(&digits) {
                return false;
            }
            &after_colon[digits..]
        }
        None => tail,
    };
    path.is_empty() || (path.starts_with(['/', '?', '#']) && !path.chars().any(pytext::is_space))
}

/// Django's ipv4_re: four decimal octets 0-255 without leading zeros.
fn is_dotted_quad(host: &str) -> bool {
    let parts: Vec<&str> = host.split('.').collect();
    parts.len() == 4
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.len() <= 3
                && p.bytes().all(|b| b.is_ascii_digit())
                && (p.len() == 1 || !p.starts_with('0'))
                && p.parse::<u16>().is_ok_and(|v| v <= 255)
        })
}

/// A character of Django's `[a-z\u00a1-\uffff0-9]` under re.IGNORECASE:
/// ASCII letters and digits, and every BMP character from U+00A1 up (so
/// no astral characters, whatever their category).
fn is_label_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || ('\u{a1}'..='\u{ffff}').contains(&c)
}

/// `hostname_re + domain_re + tld_re`: labels of 1-63 label characters or
/// '-', not starting or ending with '-', at least two of them, the last (the
/// TLD) being letters only (2-63) or `xn--` punycode, then an optional '.'.
fn is_domain(host: &str) -> bool {
    let host = host.strip_suffix('.').unwrap_or(host);
    let mut labels: Vec<&str> = host.split('.').collect();
    let Some(tld) = labels.pop() else {
        return false;
    };
    if labels.is_empty() || !is_tld(tld) {
        return false;
    }
    labels.iter().all(|label| {
        let len = pytext::char_len(label);
        (1..=LABEL_CHARS_MAX).contains(&len)
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label.chars().all(|c| c == '-' || is_label_char(c))
    })
}

/// `(?!-)(?:[a-z\u00a1-\uffff-]{2,63}|xn--[a-z0-9]{1,59})(?<!-)`
fn is_tld(tld: &str) -> bool {
    if tld.starts_with('-') || tld.ends_with('-') {
        return false;
    }
    let len = pytext::char_len(tld);
    let letters = (2..=LABEL_CHARS_MAX).contains(&len)
        && tld
            .chars()
            .all(|c| c == '-' || c.is_ascii_alphabetic() || ('\u{a1}'..='\u{ffff}').contains(&c));
    if letters {
        return true;
    }
    // Under IGNORECASE, [a-z] also matches these four non-ASCII letters
    // (their simple case mappings are ASCII).
    let punycode_char = |c: char| {
        c.is_ascii_alphanumeric() || matches!(c, '\u{130}' | '\u{131}' | '\u{17f}' | '\u{212a}')
    };
    match tld.get(..4) {
        Some(prefix) if prefix.eq_ignore_ascii_case("xn--") => {
            let body = &tld[4..];
            let body_len = pytext::char_len(body);
            (1..=PUNYCODE_TLD_BODY_MAX).contains(&body_len) && body.chars().all(punycode_char)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Verdicts of Django 5.2's URLValidator (through DRF's URLField, run
    /// under CPython 3.11) for each URL.
    #[test]
    fn verdicts_match_django() {
        let valid = [
            "https://example.com/hook",
            "http://user:pass@localhost:8080/ab?x#y",
            "http://[::1]:80/",
            "http://xn--d1acpjx3f.xn--p1ai/",
            "http://пример.рф/",
            "https://example.com:99999/",
            "https://example.com:0/",
            "https://us?er@example.com/",
            "https://example.com./",
            "https://[::ffff:1.2.3.4]/",
            "https://u@[0000:0000:0000:0000:0000:ffff:192.168.100.200]/",
            "https://[1:2:3:4:5:6:7::]/",
            "https://[::1.2.3.4]/",
            "HTTPS://EXAMPLE.COM/",
            "https://exa\u{3000}mple.com/",
            "https://example.xn--p1ai/",
            "ftp://example.com/",
            "ftps://example.com/",
            "https://localhost/",
            "https://LOCALHOST:8000",
            "https://1.2.3.4.com/",
            "https://0.0.0.0/",
            "https://255.255.255.255/",
            "https://example.com#frag",
            "https://example.com?q",
            "https://example.com/a@b",
            "https://u@[::1]:99/",
            "https://example.com/\u{fffd}",
            "https://a.b-c/",
            "https://xn--80ak6aa92e.com/",
            "https://a:@example.com/",
            "http://1.2.3.4/",
        ];
        for url in valid {
            assert!(is_valid_url(url), "Django accepts {url:?}");
        }
        let invalid = [
            "http://2130706433/",
            "http://0177.0.0.1/",
            "http://0x7f.1/",
            "http://user:pass@localhost:8080/a b",
            "gopher://x.com/",
            "https://?x@example.com/",
            "https://a:b:c@example.com/",
            "https://exa_mple.com/",
            "https://[0000:0000:0000:0000:0000:ffff:192.168.100.200]/",
            "https://[1.2.3.4]/",
            "https://example.com/\u{3000}x",
            "https://a\u{ff0f}b.com/",
            "https://example.com/a\u{b}b",
            "https://example.com/a\u{1c}b",
            "https://ex\u{e4}mple.co1/",
            "https:/example.com/",
            "https://-a.com/",
            "https://a-.com/",
            "https://a.-b.com/",
            "https://a.com-/",
            "https://a.c/",
            "https://256.1.1.1/",
            "https://1.2.3.04/",
            "https://example.com:/",
            "https://example.com:123456/",
            "https://http://x.com",
            "https://a@b@example.com/",
            "://example.com/",
            "https://[::1]x/",
            "https://[::g]/",
            "https://[::1%25eth0]/",
            "https://u@[1.2.3.4]:99/",
            "https://ex\u{1f600}ample.com/",
            "https://example",
            "https://example.com..",
            "https://a..com/",
            "https://example.com/\tx",
            "https://a[b]@example.com/",
            "https://[@example.com/",
            "example.com",
            "https://",
            "https://@example.com/",
            "mailto:a@example.com",
            "https://example.1com/",
        ];
        for url in invalid {
            assert!(!is_valid_url(url), "Django refuses {url:?}");
        }
    }

    #[test]
    fn length_limits() {
        let label = "a".repeat(63);
        assert!(is_valid_url(&format!("https://{label}.com/")));
        assert!(!is_valid_url(&format!("https://a{label}.com/")));
        // 253-character hostname accepted, 254 refused.
        // Three 63-character labels, a 57-character one and ".com".
        let host253 = format!("{0}.{0}.{0}.{1}.com", label, "b".repeat(57));
        assert_eq!(host253.chars().count(), 253);
        assert!(is_valid_url(&format!("https://{host253}/")));
        let host254 = format!("x{host253}");
        assert!(!is_valid_url(&format!("https://{host254}/")));
        // URLValidator's own 2048 cap.
        let base = "https://example.com/";
        let url2048 = format!("{base}{}", "p".repeat(URL_CHARS_MAX - base.len()));
        assert!(is_valid_url(&url2048));
        assert!(!is_valid_url(&format!("{url2048}p")));
    }

    #[test]
    fn dotted_quad_agrees_with_std_strict_parser() {
        for host in [
            "0.0.0.0",
            "1.2.3.4",
            "255.255.255.255",
            "256.0.0.0",
            "01.2.3.4",
            "1.2.3",
            "1.2.3.4.5",
            "1..3.4",
            "+1.2.3.4",
        ] {
            let std_strict = host.parse::<std::net::Ipv4Addr>().is_ok();
            assert_eq!(is_dotted_quad(host), std_strict, "{host}");
        }
    }
}
