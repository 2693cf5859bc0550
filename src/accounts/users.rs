//! Dashboard users: the email rule and creating a user.
//!
//! An email is compared trimmed and lowercased, at creation and at every
//! login (through [`normalise_email`]), so `Ann@Acme.test ` signs in as the
//! user created as `ann@acme.test`. A new user's email must also look like
//! one (`local@domain.tld`) and fit RFC 5321's [`EMAIL_CHARS_MAX`]; the
//! password keeps `super::passwords`' rule and only its hash is stored.
//!
//! Not for: reading the password (the CLI takes it from standard input),
//! sessions (`super::sessions`) or logging in (`super::login`).

use super::passwords::{self, PasswordLength};
use dialproof_engine::time::UnixMillis;
use dialproof_engine::CompanyId;
use dialproof_storage::{Admin, StorageError, UserRow};
use std::fmt;

/// Longest email accepted (RFC 5321's path limit).
pub const EMAIL_CHARS_MAX: usize = 254;

/// An email as users are looked up by: trimmed and lowercased.
pub fn normalise_email(raw: &str) -> String {
    raw.trim().to_lowercase()
}

/// A new user's email that keeps the rule (normalised).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Email(String);

/// A new user's email that does not look like one (as normalised).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotAnEmail(pub String);

impl fmt::Display for NotAnEmail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} is not an email address", self.0)
    }
}

impl std::error::Error for NotAnEmail {}

impl Email {
    pub fn parse(raw: &str) -> Result<Email, NotAnEmail> {
        let email = normalise_email(raw);
        let plausible = email.len() <= EMAIL_CHARS_MAX
            && email
                .split_once('@')
                .is_some_and(|(local, domain)| !local.is_empty() && domain.contains('.'));
        if plausible {
            Ok(Email(email))
        } else {
            Err(NotAnEmail(email))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Why a user was not created.
#[derive(Debug)]
pub enum UserError {
    Password(PasswordLength),
    Hash(String),
    Storage(StorageError),
}

impl fmt::Display for UserError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UserError::Password(e) => write!(f, "{e}"),
            UserError::Hash(e) => write!(f, "{e}"),
            UserError::Storage(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for UserError {}

/// Creates a dashboard user of `company` with `password`, stored hashed.
pub fn create(
    admin: &Admin,
    company: CompanyId,
    email: &Email,
    password: &str,
    now: UnixMillis,
) -> Result<UserRow, UserError> {
    passwords::check_new(password).map_err(UserError::Password)?;
    let hash = passwords::hash(password).map_err(UserError::Hash)?;
    admin
        .create_user(company, email.as_str(), &hash, now)
        .map_err(UserError::Storage)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails_are_normalised_and_must_look_like_one() {
        assert_eq!(
            Email::parse(" Ann@Acme.Test ").unwrap().as_str(),
            "ann@acme.test"
        );
        for bad in ["ann", "@acme.test", "ann@localhost", ""] {
            assert!(Email::parse(bad).is_err(), "{bad:?}");
        }
        let long = format!("{}@acme.test", "a".repeat(EMAIL_CHARS_MAX));
        assert!(Email::parse(&long).is_err());
    }
}
