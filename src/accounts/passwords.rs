//! Dashboard passwords: the length rule, Argon2id hashing into PHC strings,
//! and the hash of a password nobody knows, which a login checks against
//! when the email is unknown (the same work as a wrong password, so the
//! answer's timing does not tell which emails exist).
//!
//! A hash costs ~25 ms of CPU: the service runs hashing on the offload pool
//! (`crate::shared::offload`), never on a worker thread that serves other
//! connections.
//!
//! Not for: sessions (`super::sessions`) or who may log in (`super::login`).

use argon2::password_hash::{rand_core::OsRng, PasswordHash, PasswordHasher, SaltString};
use argon2::{Argon2, PasswordVerifier};
use rand::RngCore;
use std::fmt;
use std::sync::OnceLock;

/// Passwords shorter than this are refused when a user is created.
pub const PASSWORD_CHARS_MIN: usize = 10;
/// Longer inputs are refused before hashing (Argon2 would take them, but a
/// megabyte "password" is only a way to burn CPU).
pub const PASSWORD_BYTES_MAX: usize = 1024;

/// A new password outside [`PASSWORD_CHARS_MIN`] characters ..
/// [`PASSWORD_BYTES_MAX`] bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PasswordLength;

impl fmt::Display for PasswordLength {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the password must have at least {PASSWORD_CHARS_MIN} characters \
             (and at most {PASSWORD_BYTES_MAX} bytes)"
        )
    }
}

impl std::error::Error for PasswordLength {}

/// Whether `password` may be given to a new user.
pub fn check_new(password: &str) -> Result<(), PasswordLength> {
    if password.chars().count() < PASSWORD_CHARS_MIN || password.len() > PASSWORD_BYTES_MAX {
        return Err(PasswordLength);
    }
    Ok(())
}

/// An Argon2id PHC string for `password`.
pub fn hash(password: &str) -> Result<String, String> {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| e.to_string())
}

/// Whether `password` matches the stored PHC string; a malformed stored hash
/// never matches.
pub fn verify(password: &str, phc: &str) -> bool {
    PasswordHash::new(phc)
        .map(|h| {
            Argon2::default()
                .verify_password(password.as_bytes(), &h)
                .is_ok()
        })
        .unwrap_or(false)
}

/// The hash of a random password nobody knows (made once per process).
pub fn dummy_hash() -> &'static str {
    static HASH: OnceLock<String> = OnceLock::new();
    HASH.get_or_init(|| {
        let mut random = [0u8; 32];
        rand::thread_rng().fill_bytes(&mut random);
        hash(&hex::encode(random)).unwrap_or_default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_round_trip_and_bad_hashes_never_match() {
        let h = hash("correct horse battery").unwrap();
        assert!(h.starts_with("$argon2id$"));
        assert!(verify("correct horse battery", &h));
        assert!(!verify("wrong", &h));
        assert!(!verify("x", "not a phc string"));
        assert!(!verify("", dummy_hash()));
    }

    #[test]
    fn new_passwords_keep_the_length_rule() {
        assert_eq!(check_new("123456789"), Err(PasswordLength));
        assert_eq!(check_new("ёёёёёёёёёё"), Ok(()));
        assert_eq!(check_new(&"x".repeat(PASSWORD_BYTES_MAX)), Ok(()));
        assert_eq!(
            check_new(&"x".repeat(PASSWORD_BYTES_MAX + 1)),
            Err(PasswordLength)
        );
    }
}
