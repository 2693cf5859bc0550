//! Dashboard sessions: passwords, session tokens and the session cookie.
//!
//! A session is the "other mechanism" of the spec's 403: a request that
//! carries a live session cookie but no bearer key is authenticated, yet not
//! allowed on the key-only endpoints. Passwords are Argon2id (PHC strings);
//! hashing costs ~25 ms of CPU, so it runs on the [`crate::shared::offload`] pool,
//! never on a worker thread that serves other connections. Session tokens
//! are 256 random bits; only their SHA-256 is stored.
//!
//! Not for: the login endpoint's HTTP handling (`crate::api::login`).

use super::Api;
use crate::http::Request;
use crate::shared::wait::wait_for;
use argon2::password_hash::{rand_core::OsRng, PasswordHash, PasswordHasher, SaltString};
use argon2::{Argon2, PasswordVerifier};
use dialproof_engine::time::UnixMillis;
use dialproof_storage::SessionUser;
use rand::RngCore;
use sha2::{Digest, Sha256};
use std::time::Duration;

pub const COOKIE_NAME: &str = "dialproof_session";
/// How long a session lasts after login.
pub const SESSION_SECONDS: u32 = 12 * 3600;
/// Passwords shorter than this are refused when a user is created.
pub const PASSWORD_CHARS_MIN: usize = 10;
/// Longer inputs are refused before hashing (Argon2 would take them, but a
/// megabyte "password" is only a way to burn CPU).
pub const PASSWORD_BYTES_MAX: usize = 1024;
const SESSION_LOOKUP_WAIT: Duration = Duration::from_secs(10);

/// An Argon2id PHC string for `password`.
pub fn hash_password(password: &str) -> Result<String, String> {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| e.to_string())
}

/// Whether `password` matches the stored PHC string; a malformed stored hash
/// never matches.
pub fn verify_password(password: &str, phc: &str) -> bool {
    PasswordHash::new(phc)
        .map(|h| {
            Argon2::default()
                .verify_password(password.as_bytes(), &h)
                .is_ok()
        })
        .unwrap_or(false)
}

/// A new session token (shown to the browser once, in the cookie) and its
/// stored hash.
pub fn mint_token() -> (String, String) {
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    let token = hex::encode(bytes);
    let hash = token_hash(&token);
    (token, hash)
}

pub fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// The `Set-Cookie` value for a new session.
pub fn cookie(token: &str) -> String {
    format!(
        "{COOKIE_NAME}={token}; Path=/; Max-Age={SESSION_SECONDS}; HttpOnly; Secure; SameSite=Lax"
    )
}

/// The session token in the request's `Cookie` header(s), if any: 64 hex
/// characters, anything else is ignored.
pub fn token_from(req: &Request) -> Option<&str> {
    req.headers
        .iter()
        .filter(|(n, _)| n == "cookie")
        .flat_map(|(_, v)| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE_NAME)
        .map(|(_, value)| value.trim())
        .filter(|v| v.len() == 64 && v.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The user of the request's live session, if it has one.
pub fn session_user(ctx: &Api, req: &Request, now: UnixMillis) -> Option<SessionUser> {
    let hash = token_hash(token_from(req)?);
    let found = wait_for(SESSION_LOOKUP_WAIT, |reply| {
        ctx.store.read(move |r| r.session_user(&hash, now), reply)
    });
    match found {
        Some(Ok(Ok(user))) => user,
        other => {
            let error = crate::shared::wait::read_failure_text(other);
            tracing::warn!(%error, "session lookup failed");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_round_trip_and_bad_hashes_never_match() {
        let h = hash_password("correct horse battery").unwrap();
        assert!(h.starts_with("$argon2id$"));
        assert!(verify_password("correct horse battery", &h));
        assert!(!verify_password("wrong", &h));
        assert!(!verify_password("x", "not a phc string"));
    }

    #[test]
    fn tokens_are_read_from_cookies_strictly() {
        let (token, hash) = mint_token();
        assert_eq!(token_hash(&token), hash);
        let req = |cookie: &str| Request {
            method: "GET".into(),
            path: "/".into(),
            query: None,
            headers: vec![("cookie".into(), cookie.into())],
            body: vec![],
            peer: "127.0.0.1:1".parse().unwrap(),
        };
        let good = format!("a=b; {COOKIE_NAME}={token}; c=d");
        assert_eq!(token_from(&req(&good)), Some(token.as_str()));
        assert_eq!(token_from(&req(&format!("{COOKIE_NAME}=short"))), None);
        assert_eq!(token_from(&req("other=1")), None);
        assert!(cookie(&token).contains("HttpOnly; Secure"));
    }
}
