//! Name-addresses and the URIs inside them, as far as a caller number goes:
//! `"Display" <sip:user@host;params>;tag=x`, `<tel:+7-912-...>`, a bare
//! `sip:user@host;tag=x` (whose `;` params belong to the header, RFC 3261
//! s20.10), for the `sip:`, `sips:` and `tel:` schemes.
//!
//! Not for: deciding which header to trust or normalising the number (see
//! [`super::identity`] and [`super::number`]), or any other URI scheme
//! (kept as [`Uri::Other`] and never yields a number).

use super::message::parse_params;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Uri {
    /// `sip:` or `sips:`; `user` is percent-decoded, without password or
    /// user parameters.
    Sip {
        secure: bool,
        user: Option<String>,
        host: String,
        params: Vec<(String, Option<String>)>,
    },
    /// `tel:` (RFC 3966): the number as written, and its parameters
    /// (`phone-context`, `verstat`, ...).
    Tel {
        number: String,
        params: Vec<(String, Option<String>)>,
    },
    Other(String),
}

impl Uri {
    pub fn parse(text: &str) -> Option<Uri> {
        let text = text.trim();
        let (scheme, rest) = text.split_once(':')?;
        let scheme = scheme.to_ascii_lowercase();
        match scheme.as_str() {
            "sip" | "sips" => {
                // Headers (`?x=y`) are never part of the number.
                let rest = rest.split_once('?').map_or(rest, |(a, _)| a);
                let (user, hostpart) = match rest.rfind('@') {
                    Some(i) => (Some(&rest[..i]), &rest[i + 1..]),
                    None => (None, rest),
                };
                let (host, params) = match hostpart.split_once(';') {
                    Some((h, p)) => (h, parse_params(p)),
                    None => (hostpart, Vec::new()),
                };
                if host.is_empty() {
                    return None;
                }
                let user = match user {
                    Some(u) => {
                        // `user:password` and `user;isub=...` both end the
                        // user name proper.
                        let u = u.split([':', ';']).next().unwrap_or("");
                        Some(percent_decode(u)?)
                    }
                    None => None,
                };
                Some(Uri::Sip {
                    secure: scheme == "sips",
                    user,
                    host: host.to_owned(),
                    params,
                })
            }
            "tel" => {
                let (number, params) = match rest.split_once(';') {
                    Some((n, p)) => (n.trim(), parse_params(p)),
                    None => (rest.trim(), Vec::new()),
                };
                if number.is_empty() {
                    return None;
                }
                Some(Uri::Tel {
                    number: percent_decode(number)?,
                    params,
                })
            }
            _ => Some(Uri::Other(text.to_owned())),
        }
    }

    /// The telephone-number-ish part: the user of a sip/sips URI, the number
    /// of a tel URI.
    pub fn user(&self) -> Option<&str> {
        match self {
            Uri::Sip { user, .. } => user.as_deref(),
            Uri::Tel { number, .. } => Some(number),
            Uri::Other(_) => None,
        }
    }

    /// A URI parameter of a sip/sips or tel URI (`;name=value`), by
    /// case-insensitive name.
    pub fn param(&self, name: &str) -> Option<Option<&str>> {
        let params = match self {
            Uri::Sip { params, .. } | Uri::Tel { params, .. } => params,
            Uri::Other(_) => return None,
        };
        params
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_deref())
    }

    /// The host of a sip/sips URI.
    pub fn host(&self) -> Option<&str> {
        match self {
            Uri::Sip { host, .. } => Some(host),
            _ => None,
        }
    }
}

/// A From/To/PAI/Remote-Party-ID value: optional display name, URI and the
/// header parameters after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NameAddr {
    pub display: Option<String>,
    pub uri: Uri,
    pub params: Vec<(String, Option<String>)>,
}

impl NameAddr {
    pub fn parse(value: &str) -> Option<NameAddr> {
        let value = value.trim();
        if let Some(open) = find_unquoted(value, '<') {
            let display = value[..open].trim().trim_matches('"').trim();
            let after = &value[open + 1..];
            let close = after.find('>')?;
            let uri = Uri::parse(&after[..close])?;
            let params = parse_params(after[close + 1..].trim().trim_start_matches(';'));
            return Some(NameAddr {
                display: (!display.is_empty()).then(|| display.to_owned()),
                uri,
                params,
            });
        }
        // addr-spec: everything after the first `;` is a header parameter.
        let (uri, params) = match value.split_once(';') {
            Some((u, p)) => (u, parse_params(p)),
            None => (value, Vec::new()),
        };
        Some(NameAddr {
            display: None,
            uri: Uri::parse(uri)?,
            params,
        })
    }

    pub fn param(&self, name: &str) -> Option<Option<&str>> {
        self.params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_deref())
    }
}

fn find_unquoted(s: &str, needle: char) -> Option<usize> {
    let mut quoted = false;
    for (i, c) in s.char_indices() {
        match c {
            '"' => quoted = !quoted,
            c if c == needle && !quoted => return Some(i),
            _ => {}
        }
    }
    None
}

/// `%2B7912` is `+7912`. `None` on a broken escape or non-UTF-8 result.
fn percent_decode(s: &str) -> Option<String> {
    if !s.contains('%') {
        return Some(s.to_owned());
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sip_sips_and_tel_uris() {
        let u = Uri::parse("sip:+79123456789;npdi@gw.example:5060;user=phone").unwrap();
        assert_eq!(u.user(), Some("+79123456789"));
        assert_eq!(u.host(), Some("gw.example:5060"));
        let s = Uri::parse("SIPS:89123456789:secret@h").unwrap();
        assert_eq!(s.user(), Some("89123456789"));
        assert!(matches!(s, Uri::Sip { secure: true, .. }));
        let t = Uri::parse("tel:+7-912-345-67-89;phone-context=+7").unwrap();
        assert_eq!(t.user(), Some("+7-912-345-67-89"));
        assert_eq!(t.param("Phone-Context"), Some(Some("+7")));
        let v = Uri::parse("sip:+79123456789@h;user=phone;verstat=TN-Validation-Passed").unwrap();
        assert_eq!(v.param("verstat"), Some(Some("TN-Validation-Passed")));
        assert_eq!(
            Uri::parse("sip:%2B79123456789@h").unwrap().user(),
            Some("+79123456789")
        );
        assert_eq!(Uri::parse("sip:h.example").unwrap().user(), None);
        assert!(matches!(Uri::parse("mailto:a@b"), Some(Uri::Other(_))));
        assert!(Uri::parse("nocolon").is_none());
        assert!(Uri::parse("sip:%zz@h").is_none());
        assert!(Uri::parse("tel:").is_none());
        assert!(Uri::parse("sip:user@").is_none());
    }

    #[test]
    fn name_addr_forms() {
        let a = NameAddr::parse(r#""Doe, <J>" <sip:100@h;user=phone>;tag=x;privacy=full"#).unwrap();
        assert_eq!(a.display.as_deref(), Some("Doe, <J>"));
        assert_eq!(a.uri.user(), Some("100"));
        assert_eq!(a.param("tag"), Some(Some("x")));
        assert_eq!(a.param("privacy"), Some(Some("full")));
        let b = NameAddr::parse("sip:200@h;tag=y").unwrap();
        assert_eq!(b.uri.user(), Some("200"));
        assert_eq!(b.param("tag"), Some(Some("y")));
        let c = NameAddr::parse("<tel:+79123456789>").unwrap();
        assert_eq!(c.uri.user(), Some("+79123456789"));
        assert!(NameAddr::parse("<sip:unclosed@h").is_none());
        assert!(NameAddr::parse("").is_none());
    }
}
