//! What makes two creates "the same request" for an idempotency key: a
//! SHA-256 over the parsed, validated fields, so whitespace, field order,
//! an omitted field against its default sent explicitly, and JSON escapes
//! do not matter, while any change of a value does.
//!
//! The TTL taken is the one the client asked for, not the clamped one: a
//! client that sends `ttl_seconds: 10` and then `20` sent two different
//! requests, even though both run for 30 seconds.
//!
//! Not for: keys or their lifecycle (see [`super::key`], [`super::table`]).

use crate::validate::CreateRequest;
use sha2::{Digest, Sha256};

/// The fingerprint's bytes. Stored with the key; compared byte for byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fingerprint(pub [u8; 32]);

/// Bumped if the encoding below ever changes, so an old stored fingerprint
/// can never equal a new one by accident (it would then be a conflict).
const ENCODING_VERSION: &[u8] = b"dialproof-create-v1";

impl Fingerprint {
    /// The fingerprint of a validated create request.
    pub fn of(request: &CreateRequest) -> Fingerprint {
        let mut h = Sha256::new();
        h.update(ENCODING_VERSION);
        // Each field length-prefixed, so `("ab", "c")` and `("a", "bc")`
        // differ.
        for field in [
            request.phone.as_bytes(),
            request.webhook_url.as_bytes(),
            request.client_ref.as_bytes(),
            request.info.as_bytes(),
        ] {
            h.update((field.len() as u64).to_be_bytes());
            h.update(field);
        }
        h.update(request.ttl_seconds_requested.to_be_bytes());
        Fingerprint(h.finalize().into())
    }

    /// From stored bytes; `None` unless exactly 32 of them.
    pub fn from_slice(bytes: &[u8]) -> Option<Fingerprint> {
        <[u8; 32]>::try_from(bytes).ok().map(Fingerprint)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::parse_create;

    fn of(body: &str) -> Fingerprint {
        Fingerprint::of(&parse_create(body.as_bytes()).unwrap())
    }

    #[test]
    fn order_whitespace_escapes_and_defaults_do_not_matter() {
        let a = of(r#"{"phone":"+79161234567","webhook_url":"https://example.com/h"}"#);
        let b = of(r#"{ "webhook_url" : "https://example.com/h",
                       "phone":"+79161234567", "client_ref": "", "info": "",
                       "ttl_seconds": 60 }"#);
        let c = of(r#"{"phone":"\u002b79161234567","webhook_url":"https://example.com/h"}"#);
        assert_eq!(a, b);
        assert_eq!(a, c);
    }

    #[test]
    fn any_changed_value_changes_it() {
        let base =
            r#"{"phone":"+79161234567","webhook_url":"https://example.com/h","ttl_seconds":10}"#;
        let others = [
            r#"{"phone":"+79161234568","webhook_url":"https://example.com/h","ttl_seconds":10}"#,
            r#"{"phone":"+79161234567","webhook_url":"https://example.com/i","ttl_seconds":10}"#,
            r#"{"phone":"+79161234567","webhook_url":"https://example.com/h","ttl_seconds":20}"#,
            r#"{"phone":"+79161234567","webhook_url":"https://example.com/h","ttl_seconds":10,"info":"x"}"#,
            r#"{"phone":"+79161234567","webhook_url":"https://example.com/h","ttl_seconds":10,"client_ref":"x"}"#,
        ];
        for other in others {
            assert_ne!(of(base), of(other), "{other}");
        }
    }

    #[test]
    fn field_boundaries_are_kept() {
        let a = of(
            r#"{"phone":"+79161234567","webhook_url":"https://example.com/h","client_ref":"ab","info":"c"}"#,
        );
        let b = of(
            r#"{"phone":"+79161234567","webhook_url":"https://example.com/h","client_ref":"a","info":"bc"}"#,
        );
        assert_ne!(a, b);
    }

    #[test]
    fn stored_bytes_round_trip() {
        let f = of(r#"{"phone":"+79161234567","webhook_url":"https://example.com/h"}"#);
        assert_eq!(Fingerprint::from_slice(&f.0), Some(f));
        assert_eq!(Fingerprint::from_slice(&f.0[..31]), None);
    }
}
