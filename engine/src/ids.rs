//! Verification ids: `ver_` followed by a 26-character ULID.
//!
//! The engine takes the time and the 80 random bits as arguments, so id
//! generation is deterministic under test. [`VerificationKey`] is the same
//! id in 16 bytes, for structures that hold one per pending verification
//! (the expiry schedule). Not for: API key tokens (see [`crate::apikey`]).

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
        VerificationKey::new(now, random).id()
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

    pub fn into_string(self) -> String {
        self.0
    }
}

/// A verification id as its 128-bit ULID: 16 bytes instead of a 30-byte
/// string on the heap behind a 24-byte `String`.
///
/// Two `u64` halves rather than a `u128`: a `u128` is 16-byte aligned, which
/// would pad `(UnixMillis, VerificationKey)` to 32 bytes; the halves keep it
/// at 24. The order is the ULID's (high half first), so keys sort by time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VerificationKey {
    high: u64,
    low: u64,
}

impl VerificationKey {
    /// The key of a new verification created at `now`; `random` supplies the
    /// ULID's 80 random bits (the upper 48 bits are ignored).
    pub fn new(now: UnixMillis, random: u128) -> Self {
        let ms = u64::try_from(now.0).unwrap_or(0);
        let (high, low) = ulid::Ulid::from_parts(ms, random).into();
        VerificationKey { high, low }
    }

    /// The key of `id` when it is `ver_` + a ULID in its canonical form (as
    /// every id this service issues is); `None` for anything else, such as
    /// a lower-case spelling, which would not map back to the same text.
    pub fn parse(id: &str) -> Option<Self> {
        let text = id.strip_prefix(VERIFICATION_ID_PREFIX)?;
        let ulid = ulid::Ulid::from_string(text).ok()?;
        let mut buf = [0u8; ulid::ULID_LEN];
        if *ulid.array_to_str(&mut buf) != *text {
            return None;
        }
        let (high, low) = ulid.into();
        Some(VerificationKey { high, low })
    }

    /// The moment the id was issued at: its ULID's milliseconds (a
    /// verification's `created_at` is the same moment).
    pub fn issued_at(self) -> UnixMillis {
        let ulid = ulid::Ulid::from((self.high, self.low));
        // 48 bits of milliseconds always fit an i64.
        UnixMillis(ulid.timestamp_ms() as i64)
    }

    /// The ULID's high half: its 48 bits of milliseconds, then 16 random
    /// bits. Keys issued at a steady rate spread evenly over it, so a
    /// search among sorted keys can guess where one is.
    pub fn high_bits(self) -> u64 {
        self.high
    }

    /// 64 of the ULID's random bits: spreads keys over shards evenly.
    pub fn random_bits(self) -> u64 {
        self.low
    }

    /// The id's text, written into `buf` without allocating.
    pub fn write_id(self, buf: &mut [u8; VERIFICATION_ID_LEN]) -> &str {
        let ulid = ulid::Ulid::from((self.high, self.low));
        let (prefix, rest) = buf.split_at_mut(VERIFICATION_ID_PREFIX.len());
        prefix.copy_from_slice(VERIFICATION_ID_PREFIX.as_bytes());
        let mut text = [0u8; ulid::ULID_LEN];
        rest.copy_from_slice(ulid.array_to_str(&mut text).as_bytes());
        // Both parts are ASCII.
        std::str::from_utf8(buf).unwrap_or_default()
    }

    /// The id's text form, `ver_` + 26 characters.
    pub fn id(self) -> VerificationId {
        let ulid = ulid::Ulid::from((self.high, self.low));
        VerificationId(format!("{VERIFICATION_ID_PREFIX}{ulid}"))
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
    fn a_key_writes_its_id_and_knows_when_it_was_issued() {
        let at = UnixMillis(1_700_000_000_123);
        let key = VerificationKey::new(at, 0x1234_5678_9abc_def0_1234);
        let mut buf = [0u8; VERIFICATION_ID_LEN];
        assert_eq!(key.write_id(&mut buf), key.id().as_str());
        assert_eq!(key.issued_at(), at);
    }

    #[test]
    fn keys_map_to_the_same_ids_and_keep_their_order() {
        let a = VerificationKey::new(UnixMillis(1_700_000_000_000), 42);
        let b = VerificationKey::new(UnixMillis(1_700_000_000_001), 1);
        assert_eq!(
            a.id(),
            VerificationId::new(UnixMillis(1_700_000_000_000), 42)
        );
        assert_eq!(VerificationKey::parse(a.id().as_str()), Some(a));
        assert!(a < b && a.id() < b.id());
        assert_eq!(std::mem::size_of::<(UnixMillis, VerificationKey)>(), 24);
    }

    #[test]
    fn keys_exist_only_for_canonical_ulids() {
        let id = VerificationId::new(UnixMillis(1_700_000_000_000), 42);
        let lower = format!("ver_{}", id.as_str()[4..].to_ascii_lowercase());
        // A valid id for the API, but not a spelling this service issues.
        assert!(VerificationId::parse(&lower).is_some());
        assert_eq!(VerificationKey::parse(&lower), None);
        // 26 alphanumerics, yet above the largest ULID (first digit > 7).
        assert_eq!(
            VerificationKey::parse("ver_8ZZZZZZZZZZZZZZZZZZZZZZZZZ"),
            None
        );
        assert_eq!(VerificationKey::parse(&id.as_str()[4..]), None);
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
