//! A company as operators and its people set it up: its name, its webhook
//! signing secret (minted at creation and at each rotation, shown once),
//! the rotation's grace period, and the development URL rule.
//!
//! Rotation: the new secret signs at once, and the previous one keeps
//! signing beside it (a second `v1=` entry) for
//! [`SECRET_ROTATION_GRACE_MS`], so a receiver can roll over without
//! refusing a delivery. `dialproof company rotate-secret` and the webhooks
//! page rotate through [`rotate_secret`] alike.
//!
//! Not for: the secret's format (`dialproof_engine::apikey`), signing
//! (`crate::webhooks`), which URLs count as development URLs when a webhook
//! is checked (`dialproof_engine::dev_urls`), or the list's storage limits
//! (`dialproof_storage::Admin`).

use dialproof_engine::apikey;
use dialproof_engine::time::UnixMillis;
use dialproof_engine::CompanyId;
use dialproof_storage::{Admin, CompanyRow, StorageError};
use rand::RngCore;
use std::fmt;

/// After a rotation the previous secret keeps signing this long.
pub const SECRET_ROTATION_GRACE_MS: i64 = 24 * 3600 * 1000;
/// The longest company name (trimmed), in characters.
pub const COMPANY_NAME_CHARS_MAX: usize = 200;

fn new_webhook_secret() -> String {
    let mut random = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut random);
    apikey::mint_webhook_secret(&random)
}

/// Why a company was not created.
#[derive(Debug)]
pub enum CompanyError {
    /// The trimmed name is empty or longer than [`COMPANY_NAME_CHARS_MAX`].
    Name,
    Storage(StorageError),
}

impl fmt::Display for CompanyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompanyError::Name => write!(
                f,
                "company name must be 1..={COMPANY_NAME_CHARS_MAX} characters"
            ),
            CompanyError::Storage(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for CompanyError {}

/// A company just created and its first webhook secret (shown once).
pub struct NewCompany {
    pub row: CompanyRow,
    pub webhook_secret: String,
}

/// Creates a company named `name` (trimmed) with a fresh webhook secret.
pub fn create(admin: &Admin, name: &str, now: UnixMillis) -> Result<NewCompany, CompanyError> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > COMPANY_NAME_CHARS_MAX {
        return Err(CompanyError::Name);
    }
    let webhook_secret = new_webhook_secret();
    let row = admin
        .create_company(name, &webhook_secret, now)
        .map_err(CompanyError::Storage)?;
    Ok(NewCompany {
        row,
        webhook_secret,
    })
}

/// A rotation's outcome: the new secret (shown once) and until when the
/// previous one still signs.
pub struct Rotated {
    pub secret: String,
    pub previous_valid_until: UnixMillis,
}

/// Gives `company` a new webhook secret; the current one keeps signing for
/// [`SECRET_ROTATION_GRACE_MS`] from `now`.
pub fn rotate_secret(
    admin: &Admin,
    company: CompanyId,
    now: UnixMillis,
) -> Result<Rotated, StorageError> {
    let secret = new_webhook_secret();
    let previous_valid_until = now.plus_millis(SECRET_ROTATION_GRACE_MS);
    admin.rotate_webhook_secret(company, &secret, previous_valid_until)?;
    Ok(Rotated {
        secret,
        previous_valid_until,
    })
}

/// A development URL prefix that does not start with `http://` or
/// `https://`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotHttpUrl(pub String);

impl fmt::Display for NotHttpUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "development URL {:?} must start with http:// or https://",
            self.0
        )
    }
}

impl std::error::Error for NotHttpUrl {}

/// A company's test pool size as an operator writes it: `default` (`None`:
/// the service's default, `dialproof_engine::test_pool::POOL_SIZE_DEFAULT`)
/// or a whole number 0..=`POOL_SIZE_MAX` (0: every test create is a 503);
/// `Err` names the accepted values.
pub fn parse_test_pool_size(text: &str) -> Result<Option<u32>, String> {
    use dialproof_engine::test_pool::POOL_SIZE_MAX;
    if text == "default" {
        return Ok(None);
    }
    match text.parse::<u32>() {
        Ok(n) if n <= POOL_SIZE_MAX => Ok(Some(n)),
        _ => Err(format!(
            "test pool size must be 0..={POOL_SIZE_MAX} or `default`, got {text:?}"
        )),
    }
}

/// The development URL prefix in `raw`, trimmed (as storage keeps it), if
/// it starts with `http://` or `https://` (plain `http` is allowed: a
/// development receiver is often a laptop).
pub fn dev_url(raw: &str) -> Result<&str, NotHttpUrl> {
    let url = raw.trim();
    if url.starts_with("http://") || url.starts_with("https://") {
        Ok(url)
    } else {
        Err(NotHttpUrl(raw.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dev_urls_are_http_or_https_prefixes() {
        assert_eq!(
            dev_url(" http://127.0.0.1:9000/ "),
            Ok("http://127.0.0.1:9000/")
        );
        assert_eq!(
            dev_url("https://dev.example/hook"),
            Ok("https://dev.example/hook")
        );
        for bad in ["ftp://x", "", "  ", "127.0.0.1", "HTTP:/x"] {
            assert!(dev_url(bad).is_err(), "{bad:?}");
        }
    }
}
