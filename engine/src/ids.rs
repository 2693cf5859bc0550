//! Verification ids: `ver_` followed by a 26-character ULID.
//!
//! The engine takes the time and the 80 random bits as arguments, so id
//! generation is deterministic under test. Not for: API key tokens (see
//! [`crate::apikey`]).

use crate::time::UnixMillis;
use std::fmt;

pub const VERIFICATION_ID_PREFIX: &str = "ver_";
/// `ver_` plus 26 Crockford base32 characters.
pub const VERIFICATION_ID_LEN: usize = 4 + 26;

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VerificationId(String);

impl VerificationId {
    /// A new id for a verification created at `now`; `random` supplies the
    /// ULID's 80 random bits (the upper 48 bits are ignored).
    pub fn new(now: UnixMillis, random: u128) -> Self {
        let ms = u64::try_from(now.0).unwrap_or(0);
        let ulid = ulid::Ulid::from_parts(ms, random);
        VerificationId(format!("{VERIFICATION_ID_PREFIX}{ulid}"))
    }

    /// Accepts exactly `ver_` + 26 ASCII alphanumerics (the spec's format).
    /// Anything else is not an id and, on the API, is simply not found.
    pub fn parse(s: &str) -> Option<Self> {
        let rest = s.strip_prefix(VERIFICATION_ID_PREFIX)?;
        if rest.len() == 26 && rest.bytes().all(|b| b.is_ascii_alphanumeric()) {
            Some(VerificationId(s.to_owned()))
        } else {
            None
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for VerificationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_ids_have_the_spec_format_and_sort_by_time() {
        let a = VerificationId::new(UnixMillis(1_700_000_000_000), 42);
        let b = VerificationId::new(UnixMillis(1_700_000_000_001), 1);
        assert_eq!(a.as_str().len(), VERIFICATION_ID_LEN);
        assert!(a.as_str().starts_with("ver_"));
        assert_eq!(VerificationId::parse(a.as_str()), Some(a.clone()));
        assert!(a < b);
    }

    #[test]
    fn parse_rejects_wrong_shapes() {
        assert!(VerificationId::parse("ver_").is_none());
        assert!(VerificationId::parse("ver_01ARZ3NDEKTSV4RRFFQ69G5FA").is_none());
        assert!(VerificationId::parse("ver_01ARZ3NDEKTSV4RRFFQ69G5FAVV").is_none());
        assert!(VerificationId::parse("ver_01ARZ3NDEKTSV4RRFFQ69G5FA-").is_none());
        assert!(VerificationId::parse("vex_01ARZ3NDEKTSV4RRFFQ69G5FAV").is_none());
        assert!(VerificationId::parse("ver_01ARZ3NDEKTSV4RRFFQ69G5FAV").is_some());
    }
}
