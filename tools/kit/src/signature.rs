//! Verifying a webhook's `X-Service-Signature` header.
//!
//! The scheme is Stripe's (README, "Webhooks"):
//! `t=<unix seconds>,v1=<lowercase hex>[,v1=<hex>...]`, where each `v1` is
//! the HMAC-SHA256 of `"<t>.<raw body>"` keyed with one of the company's
//! `whsec_...` secrets (two entries during the grace period after a
//! rotation). A signature is valid when any `v1` entry matches any secret
//! the receiver knows and `t` is within the tolerance of the receiver's
//! clock.
//!
//! This is written from the scheme, not from the service's signer
//! (`dialproof_engine::webhook`), so that a bug in the signer shows up here
//! as an invalid signature instead of being shared. The comparison is the
//! `hmac` crate's constant-time one.
//!
//! Not for: signing, or parsing the webhook's JSON body.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The header the service signs with.
pub const HEADER: &str = "X-Service-Signature";
/// Stripe's default tolerance between `t` and the receiver's clock.
pub const TOLERANCE_SECONDS_DEFAULT: i64 = 300;
/// Most `v1` entries considered in one header (two are sent at most; the
/// bound keeps a hostile header from costing many HMACs).
pub const SIGNATURES_MAX: usize = 8;

/// The outcome of checking one webhook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// A `v1` entry matches a known secret and `t` is within tolerance.
    Valid,
    /// No secret was configured, so nothing was checked.
    Unchecked,
    /// The request has no signature header.
    Missing,
    /// The header is not `t=<int>,v1=<hex>...`.
    Malformed,
    /// No `v1` entry matches any known secret.
    Mismatch,
    /// A signature matches but `t` is outside the tolerance.
    Stale,
}

impl Verdict {
    pub fn is_valid(self) -> bool {
        self == Verdict::Valid
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Valid => "valid",
            Verdict::Unchecked => "unchecked",
            Verdict::Missing => "missing",
            Verdict::Malformed => "malformed",
            Verdict::Mismatch => "mismatch",
            Verdict::Stale => "stale",
        }
    }
}

/// A parsed header: the timestamp and the decoded `v1` signatures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed {
    pub timestamp: i64,
    pub signatures: Vec<Vec<u8>>,
}

/// Parses `t=<int>,v1=<hex>...`. Entries of other schemes are ignored (as
/// Stripe's libraries do); exactly one `t` and at least one well-formed
/// `v1` are required.
pub fn parse_header(header: &str) -> Option<Signed> {
    let mut timestamp = None;
    let mut signatures = Vec::new();
    for item in header.split(',') {
        let (key, value) = item.split_once('=')?;
        match key {
            "t" => {
                if timestamp.is_some() || value.is_empty() {
                    return None;
                }
                timestamp = Some(value.parse::<i64>().ok()?);
            }
            "v1" if signatures.len() < SIGNATURES_MAX => {
                let is_lower_hex = value.len() == 64
                    && value
                        .bytes()
                        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
                if !is_lower_hex {
                    return None;
                }
                signatures.push(hex::decode(value).ok()?);
            }
            _ => {}
        }
    }
    let timestamp = timestamp?;
    (!signatures.is_empty()).then_some(Signed {
        timestamp,
        signatures,
    })
}

/// Checks a webhook: `header` as received (None when absent), the raw body
/// bytes, the secrets to try, the receiver's clock and the tolerance in
/// seconds (0 turns the clock check off).
pub fn verify(
    header: Option<&str>,
    body: &[u8],
    secrets: &[String],
    now_unix_seconds: i64,
    tolerance_seconds: i64,
) -> Verdict {
    if secrets.is_empty() {
        return Verdict::Unchecked;
    }
    let Some(header) = header else {
        return Verdict::Missing;
    };
    let Some(signed) = parse_header(header.trim()) else {
        return Verdict::Malformed;
    };
    let matches = secrets.iter().any(|secret| {
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
            return false;
        };
        mac.update(signed.timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        signed
            .signatures
            .iter()
            .any(|sig| mac.clone().verify_slice(sig).is_ok())
    });
    if !matches {
        return Verdict::Mismatch;
    }
    let skew = now_unix_seconds.saturating_sub(signed.timestamp).abs();
    if tolerance_seconds > 0 && skew > tolerance_seconds {
        return Verdict::Stale;
    }
    Verdict::Valid
}

/// The receiver's clock in unix seconds.
pub fn now_unix_seconds() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dialproof_engine::webhook::signature_header;

    const BODY: &[u8] = br#"{"type":"verification.completed","verification_id":"ver_x"}"#;
    const NOW: i64 = 1_700_000_000;

    fn secrets(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn accepts_the_services_signature() {
        let h = signature_header(NOW, BODY, &["whsec_a"]);
        assert_eq!(
            verify(Some(&h), BODY, &secrets(&["whsec_a"]), NOW, 300),
            Verdict::Valid
        );
    }

    #[test]
    fn a_known_vector_from_the_scheme() {
        // HMAC-SHA256 keyed "whsec_test" of "1.{}", computed with Python's
        // hmac module.
        let h = "t=1,v1=7500d5d4be4b3ef07af1fe56f7d522d135cdaa7530de557e67cc1049c52de094";
        let s = secrets(&["whsec_test"]);
        assert_eq!(verify(Some(h), b"{}", &s, 1, 0), Verdict::Valid);
        assert_eq!(verify(Some(h), b"{ }", &s, 1, 0), Verdict::Mismatch);
    }

    #[test]
    fn either_secret_during_rotation() {
        let h = signature_header(NOW, BODY, &["whsec_new", "whsec_old"]);
        for s in ["whsec_new", "whsec_old"] {
            assert_eq!(
                verify(Some(&h), BODY, &secrets(&[s]), NOW, 300),
                Verdict::Valid
            );
        }
        assert_eq!(
            verify(Some(&h), BODY, &secrets(&["whsec_other"]), NOW, 300),
            Verdict::Mismatch
        );
    }

    #[test]
    fn a_changed_body_or_timestamp_fails() {
        let h = signature_header(NOW, BODY, &["whsec_a"]);
        let s = secrets(&["whsec_a"]);
        assert_eq!(verify(Some(&h), b"{}", &s, NOW, 300), Verdict::Mismatch);
        let moved = h.replace(&format!("t={NOW}"), &format!("t={}", NOW + 1));
        assert_eq!(verify(Some(&moved), BODY, &s, NOW, 300), Verdict::Mismatch);
    }

    #[test]
    fn stale_outside_tolerance() {
        let h = signature_header(NOW, BODY, &["whsec_a"]);
        let s = secrets(&["whsec_a"]);
        assert_eq!(verify(Some(&h), BODY, &s, NOW + 301, 300), Verdict::Stale);
        assert_eq!(verify(Some(&h), BODY, &s, NOW + 300, 300), Verdict::Valid);
        assert_eq!(verify(Some(&h), BODY, &s, NOW + 9999, 0), Verdict::Valid);
    }

    #[test]
    fn malformed_and_missing_headers() {
        let s = secrets(&["whsec_a"]);
        assert_eq!(verify(None, BODY, &s, NOW, 300), Verdict::Missing);
        for h in [
            "",
            "t=1",
            "v1=00",
            "t=x,v1=ab",
            "t=1,t=2,v1=ab",
            "t=1, v1=ab",
            &format!("t=1,v1={}", "A".repeat(64)),
            &format!("t=1,v1={}", "g".repeat(64)),
        ] {
            assert_eq!(
                verify(Some(h), BODY, &s, NOW, 300),
                Verdict::Malformed,
                "{h}"
            );
        }
        assert_eq!(
            verify(Some("t=1,v1=ab"), BODY, &[], NOW, 300),
            Verdict::Unchecked
        );
    }

    #[test]
    fn other_schemes_are_ignored() {
        let h = signature_header(NOW, BODY, &["whsec_a"]);
        let with_v0 = format!("{h},v0=abc");
        assert_eq!(
            verify(Some(&with_v0), BODY, &secrets(&["whsec_a"]), NOW, 300),
            Verdict::Valid
        );
    }
}
