//! API key tokens: `svc_live_<prefix>_<secret>` and, for test mode,
//! `svc_test_<prefix>_<secret>` ([`KeyKind`]). The kind is part of the
//! token so a client (and a secret scanner) can tell a test key at a glance;
//! the service still trusts only the stored key's own mode, and refuses a
//! token whose kind differs from it.
//!
//! The prefix (8 characters) names the key in logs, listings and the rate
//! limiter; the secret is shown once at creation and only its SHA-256 is
//! stored. A plain hash (not a password hash) is right here: the secret is
//! 192 random bits, so there is nothing to brute-force, and every API request
//! verifies it, so it must cost nanoseconds, not the ~25 ms of Argon2.
//!
//! Not for: looking keys up or revoking them (storage and the binary do that).

use sha2::{Digest, Sha256};

pub const TOKEN_PREFIX: &str = "svc_live_";
/// The start of a test-mode token.
pub const TEST_TOKEN_PREFIX: &str = "svc_test_";

/// Which mode a key works in: live (real numbers, real calls) or test
/// (the test pools and simulated calls; never sees live data).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyKind {
    Live,
    Test,
}

impl KeyKind {
    /// The token's leading text for this kind.
    pub fn token_prefix(self) -> &'static str {
        match self {
            KeyKind::Live => TOKEN_PREFIX,
            KeyKind::Test => TEST_TOKEN_PREFIX,
        }
    }

    /// Whether this is live mode (the API's `livemode`).
    pub fn is_live(self) -> bool {
        self == KeyKind::Live
    }
}
pub const KEY_PREFIX_LEN: usize = 8;
pub const SECRET_LEN: usize = 32;
/// A token longer than this is rejected before any parsing (a header can be
/// up to the HTTP layer's limit; nothing legitimate is near it).
pub const TOKEN_LEN_MAX: usize = 128;

const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// A token split into its parts; the secret is borrowed, never stored.
#[derive(Debug, PartialEq, Eq)]
pub struct ParsedToken<'a> {
    pub kind: KeyKind,
    pub prefix: &'a str,
    pub secret: &'a str,
}

/// Splits `svc_live_<prefix>_<secret>` or `svc_test_<prefix>_<secret>`;
/// `None` for any other shape (all three parts must be present, the prefix
/// exactly 8 alphanumerics, the secret non-empty alphanumerics).
pub fn parse_token(token: &str) -> Option<ParsedToken<'_>> {
    if token.len() > TOKEN_LEN_MAX {
        return None;
    }
    let (kind, rest) = match token.strip_prefix(TOKEN_PREFIX) {
        Some(rest) => (KeyKind::Live, rest),
        None => (KeyKind::Test, token.strip_prefix(TEST_TOKEN_PREFIX)?),
    };
    let prefix = rest.get(..KEY_PREFIX_LEN)?;
    let secret = rest.get(KEY_PREFIX_LEN..)?.strip_prefix('_')?;
    let alnum = |s: &str| s.bytes().all(|b| b.is_ascii_alphanumeric());
    if !alnum(prefix) || secret.is_empty() || !alnum(secret) {
        return None;
    }
    Some(ParsedToken {
        kind,
        prefix,
        secret,
    })
}

/// The stored form of a secret: lowercase hex SHA-256.
pub fn hash_secret(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// Compares a presented secret with a stored hash in time independent of
/// where they differ.
pub fn verify_secret(secret: &str, stored_hash: &str) -> bool {
    // Hex on the stack: every API request checks its key, and a `String`
    // per check was an allocation per request.
    let mut presented = [0u8; 64];
    if hex::encode_to_slice(Sha256::digest(secret.as_bytes()), &mut presented).is_err() {
        return false; // unreachable: a SHA-256 digest is 32 bytes, 64 in hex
    }
    let (a, b) = (&presented[..], stored_hash.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A newly minted key: the full token (shown once) and what is stored.
#[derive(Debug, Clone)]
pub struct NewKey {
    pub token: String,
    pub prefix: String,
    pub secret_hash: String,
}

/// Mints a key of `kind` from caller-supplied random bytes (one byte per
/// character).
pub fn mint(kind: KeyKind, random: &[u8; KEY_PREFIX_LEN + SECRET_LEN]) -> NewKey {
    let chars: String = random
        .iter()
        .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char)
        .collect();
    let (prefix, secret) = chars.split_at(KEY_PREFIX_LEN);
    NewKey {
        token: format!("{}{prefix}_{secret}", kind.token_prefix()),
        prefix: prefix.to_owned(),
        secret_hash: hash_secret(secret),
    }
}

/// A webhook secret, `whsec_` + 32 alphanumerics, from caller randomness.
pub fn mint_webhook_secret(random: &[u8; 32]) -> String {
    let body: String = random
        .iter()
        .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char)
        .collect();
    format!("whsec_{body}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_tokens_parse_and_verify() {
        for kind in [KeyKind::Live, KeyKind::Test] {
            let k = mint(kind, &[7u8; 40]);
            assert!(k.token.starts_with(kind.token_prefix()));
            let p = parse_token(&k.token).expect("minted token parses");
            assert_eq!(p.kind, kind);
            assert_eq!(p.prefix, k.prefix);
            assert!(verify_secret(p.secret, &k.secret_hash));
            assert!(!verify_secret("wrong", &k.secret_hash));
        }
    }

    #[test]
    fn malformed_tokens_are_refused() {
        for t in [
            "",
            "svc_live_",
            "svc_live_ABCDEFGH",
            "svc_live_ABCDEFGH_",
            "svc_live_ABCDEFG_secret",
            "svc_test_ABCDEFGH_",
            "svc_test_ABCDEFG_secret",
            "svc_tost_ABCDEFGH_secret",
            "svc_live_ABCDEFGHsecret",
            "svc_live_ABCD-FGH_secret",
            "svc_live_ABCDEFGH_sec ret",
            "svc_live_ЖABCDEFG_secret",
        ] {
            assert!(parse_token(t).is_none(), "{t:?} must not parse");
        }
        let long = format!("svc_live_ABCDEFGH_{}", "a".repeat(200));
        assert!(parse_token(&long).is_none());
    }

    #[test]
    fn webhook_secret_shape() {
        let s = mint_webhook_secret(&[1u8; 32]);
        assert!(s.starts_with("whsec_"));
        assert_eq!(s.len(), 6 + 32);
    }
}
