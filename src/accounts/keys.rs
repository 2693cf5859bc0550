//! API keys as operators and a company's people make them: the label rule,
//! minting (the full token shown once, only its hash stored), a key's own
//! limit, and how many keys a dashboard user may create in an hour.
//!
//! The label rule, the same for `dialproof key create` and the dashboard's
//! form: white space around the label is trimmed; what remains must be 1 to
//! [`LABEL_CHARS_MAX`] characters, none of them a control character. A
//! label is shown in one cell of the operator's `key list` table and of the
//! keys page; a line break would break the table, and a terminal escape
//! typed into the dashboard would reach the operator's terminal.
//!
//! Not for: the token format and secret hashing (`dialproof_engine::apikey`),
//! checking a key on a request (`crate::api`), or revoking and deleting
//! (plain storage calls, `dialproof_storage::Admin`).

use crate::shared::rate_limiters::RateLimiters;
use dialproof_engine::apikey::{self, KeyKind};
use dialproof_engine::time::UnixMillis;
use dialproof_engine::CompanyId;
use dialproof_storage::{Admin, KeyRow, StorageError};
use rand::RngCore;
use std::fmt;

/// Key labels are for people; keep them short.
pub const LABEL_CHARS_MAX: usize = 100;
/// The highest limit of its own a key may get (requests per minute).
pub const KEY_LIMIT_PER_MINUTE_MAX: u32 = 100_000;
/// Key creations per dashboard user per sliding hour (the spec's Limits
/// table).
pub const CREATES_PER_HOUR: u32 = 10;
const HOUR_MS: i64 = 3_600_000;

/// A label that keeps the rule (trimmed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label(String);

/// Why a label was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabelError {
    /// Nothing but white space, or its length over [`LABEL_CHARS_MAX`].
    Length,
    /// A line break, a tab, an escape or another control character.
    ControlCharacter,
}

impl fmt::Display for LabelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LabelError::Length => write!(f, "label must be 1..={LABEL_CHARS_MAX} characters"),
            LabelError::ControlCharacter => write!(
                f,
                "label must not contain control characters (line breaks, tabs, escapes)"
            ),
        }
    }
}

impl std::error::Error for LabelError {}

impl Label {
    /// The label in `raw`, trimmed, if it keeps the rule.
    pub fn parse(raw: &str) -> Result<Label, LabelError> {
        let label = raw.trim();
        if label.is_empty() || label.chars().count() > LABEL_CHARS_MAX {
            return Err(LabelError::Length);
        }
        if label.chars().any(char::is_control) {
            return Err(LabelError::ControlCharacter);
        }
        Ok(Label(label.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A key just created: its stored row and the full token, which exists
/// nowhere else (only its secret's hash is stored).
pub struct NewKey {
    pub row: KeyRow,
    pub token: String,
}

/// Mints a key of `kind` (live, or test: `svc_test_`, which works only
/// in test mode) for `company` labelled `label` and stores it.
pub fn create(
    admin: &Admin,
    company: CompanyId,
    label: &Label,
    kind: KeyKind,
    now: UnixMillis,
) -> Result<NewKey, StorageError> {
    let mut random = [0u8; apikey::KEY_PREFIX_LEN + apikey::SECRET_LEN];
    rand::thread_rng().fill_bytes(&mut random);
    let minted = apikey::mint(kind, &random);
    let row = admin.create_key_in_mode(
        company,
        label.as_str(),
        (&minted.prefix, &minted.secret_hash),
        kind.is_live(),
        now,
    )?;
    Ok(NewKey {
        row,
        token: minted.token,
    })
}

/// A key's own limit as an operator writes it: `default` (`None`: the
/// service's default) or a whole number of requests per minute in
/// 1..=[`KEY_LIMIT_PER_MINUTE_MAX`]; `Err` names the accepted values.
pub fn parse_limit(text: &str) -> Result<Option<u32>, String> {
    if text == "default" {
        return Ok(None);
    }
    match text.parse::<u32>() {
        Ok(n) if (1..=KEY_LIMIT_PER_MINUTE_MAX).contains(&n) => Ok(Some(n)),
        _ => Err(format!(
            "limit must be 1..={KEY_LIMIT_PER_MINUTE_MAX} or `default`, got {text:?}"
        )),
    }
}

/// Counts one key creation by dashboard user `user_id` toward
/// [`CREATES_PER_HOUR`]; over it, `Err` with the seconds to wait.
pub fn count_creation(limiters: &RateLimiters, user_id: i64, now: UnixMillis) -> Result<(), u64> {
    let bucket = format!("dashboard-key-create:{user_id}");
    super::allowed(limiters.check_window(&bucket, now, CREATES_PER_HOUR, HOUR_MS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_trimmed_and_bounded_and_hold_no_control_characters() {
        assert_eq!(
            Label::parse("  backend <prod> ").unwrap().as_str(),
            "backend <prod>"
        );
        assert_eq!(Label::parse(" \t "), Err(LabelError::Length));
        let longest = "й".repeat(LABEL_CHARS_MAX);
        assert_eq!(Label::parse(&longest).unwrap().as_str(), longest);
        assert_eq!(
            Label::parse(&format!("{longest}x")),
            Err(LabelError::Length)
        );
        assert_eq!(Label::parse("a\nb"), Err(LabelError::ControlCharacter));
        assert_eq!(
            Label::parse("a\u{1b}[2Jb"),
            Err(LabelError::ControlCharacter)
        );
        assert_eq!(Label::parse("a\tb"), Err(LabelError::ControlCharacter));
    }

    #[test]
    fn limits_are_default_or_in_range() {
        assert_eq!(parse_limit("default"), Ok(None));
        assert_eq!(parse_limit("1"), Ok(Some(1)));
        assert_eq!(
            parse_limit(&KEY_LIMIT_PER_MINUTE_MAX.to_string()),
            Ok(Some(KEY_LIMIT_PER_MINUTE_MAX))
        );
        for bad in ["0", "100001", "-1", "ten", ""] {
            assert!(parse_limit(bad).is_err(), "{bad:?}");
        }
    }
}
