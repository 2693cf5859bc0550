//! CSRF tokens for the dashboard's forms.
//!
//! A form token is derived from the session's secret token (which the
//! browser holds only in an HttpOnly cookie): HMAC-SHA256 keyed by the
//! session token over a fixed label. So every session has its own form
//! token, nothing extra is stored, a token from another session never
//! matches, and a page of another site can neither read the cookie nor
//! compute the token. The login form, which has no session yet, uses a
//! random value held in a short-lived cookie and repeated in the form
//! (double submit); [`matches()`] compares either kind.
//!
//! Not for: reading cookies or form fields (the binary does that).

use hmac::{Hmac, Mac};
use sha2::Sha256;

const LABEL: &[u8] = b"dialproof dashboard form token v1";

/// The form token of the session whose secret token is `session_token`.
pub fn form_token(session_token: &str) -> String {
    // HMAC accepts keys of any length.
    let mut mac = Hmac::<Sha256>::new_from_slice(session_token.as_bytes())
        .expect("HMAC takes a key of any length");
    mac.update(LABEL);
    hex::encode(mac.finalize().into_bytes())
}

/// Whether `presented` equals `expected`, in time independent of where
/// they differ. An empty expected value never matches.
pub fn matches(expected: &str, presented: &str) -> bool {
    let (a, b) = (expected.as_bytes(), presented.as_bytes());
    if a.is_empty() || a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_per_session_and_compared_exactly() {
        let a = form_token("aaaa");
        let b = form_token("bbbb");
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
        assert_eq!(a, form_token("aaaa"));
        assert!(matches(&a, &a));
        assert!(!matches(&a, &b));
        assert!(!matches(&a, &a[..63]));
        assert!(!matches("", ""));
    }
}
