//! Dashboard sessions: how one starts, how a request shows it, how long it
//! lasts and how it ends.
//!
//! A session is the "other mechanism" of the spec's 403: a request that
//! carries a live session cookie but no bearer key is authenticated, yet not
//! allowed on the key-only endpoints. Its token is 256 random bits, handed
//! to the browser once in an `HttpOnly; Secure; SameSite=Lax` cookie; only
//! its SHA-256 is stored. It lasts [`SESSION_SECONDS`] from login; logout
//! deletes its row, so a copied cookie stops working at once.
//!
//! Not for: checking the password (`super::login`), or the form token the
//! dashboard derives from the session (`dialproof_engine::csrf`).

use crate::http::Request;
use crate::shared::wait::{Committing, Outcome};
use dialproof_engine::time::UnixMillis;
use dialproof_storage::{Admin, NewSession, SessionUser, StorageError, Store, WriteOp};
use rand::RngCore;
use sha2::{Digest, Sha256};
use std::time::Duration;

pub const COOKIE_NAME: &str = "dialproof_session";
/// How long a session lasts after login.
pub const SESSION_SECONDS: u32 = 12 * 3600;

/// A new random token (64 hex characters) and its stored hash.
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

/// The `Set-Cookie` value that removes the session cookie (logout).
pub fn removed_cookie() -> String {
    format!("{COOKIE_NAME}=; Path=/; Max-Age=0; HttpOnly; Secure; SameSite=Lax")
}

/// The value of cookie `name` if it has the form of a token (64 hex
/// characters); anything else is ignored.
pub fn token_cookie<'r>(req: &'r Request, name: &str) -> Option<&'r str> {
    req.cookie(name)
        .filter(|v| v.len() == 64 && v.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The session token the request carries, if any.
pub fn token_from(req: &Request) -> Option<&str> {
    token_cookie(req, COOKIE_NAME)
}

/// A session just stored: the token for the cookie, and its end.
pub struct Started {
    pub token: String,
    pub expires_at: UnixMillis,
}

/// Stores a new session for `user_id`, waiting up to `wait` for its COMMIT
/// (the cookie is handed out only once the session exists); `Err` says why
/// not, for a log line.
pub fn start(
    store: &Store,
    user_id: i64,
    now: UnixMillis,
    wait: Duration,
) -> Result<Started, String> {
    let (token, token_hash) = mint_token();
    let expires_at = now.plus_seconds(SESSION_SECONDS);
    let session = NewSession {
        token_hash,
        user_id,
        created_at: now,
        expires_at,
    };
    match store.commit(wait, |reply| WriteOp::InsertSession { session, reply }) {
        Outcome::Done(()) => Ok(Started { token, expires_at }),
        other => Err(other.to_string()),
    }
}

/// The user of the live session whose token hashes to `token_hash`
/// (`None`: no such session, or it has expired); `Err` says why the
/// lookup failed.
pub fn user(
    store: &Store,
    token_hash: String,
    now: UnixMillis,
    wait: Duration,
) -> Result<Option<SessionUser>, String> {
    match store.read_within(wait, move |r| r.session_user(&token_hash, now)) {
        Outcome::Done(user) => Ok(user),
        other => Err(other.to_string()),
    }
}

/// Ends the session whose token hashes to `token_hash`; whether it existed.
pub fn end(admin: &Admin, token_hash: &str) -> Result<bool, StorageError> {
    admin.delete_session(token_hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_read_from_cookies_strictly() {
        let (token, hash) = mint_token();
        assert_eq!(token_hash(&token), hash);
        let req = |cookie: &str| Request::parsed("GET", "/", &[("Cookie", cookie)]);
        let good = format!("a=b; {COOKIE_NAME}={token}; c=d");
        assert_eq!(token_from(&req(&good)), Some(token.as_str()));
        assert_eq!(token_from(&req(&format!("{COOKIE_NAME}=short"))), None);
        assert_eq!(token_from(&req("other=1")), None);
        assert!(cookie(&token).contains("HttpOnly; Secure"));
        assert!(removed_cookie().contains("Max-Age=0"));
    }
}
