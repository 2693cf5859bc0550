//! Caller and dialled numbers from SIP to E.164.
//!
//! Providers write numbers every which way: `+79123456789`, `79123456789`,
//! `89123456789`, `9123456789`, `810441234567890`, `tel:+7-912-...`. A line
//! has a default country ([`Region`]); numbers without `+` are read in it.
//! For Russia the rules are written out here and exact, because they are
//! the bulk of our traffic and libphonenumber's national-prefix handling
//! must not decide them: `8` + 10 digits, `7` + 10 digits and 10 bare
//! digits are `+7` + the 10 digits; `810` is the international prefix
//! (`810` + country code + number is `+` + country code + number). Every
//! other country goes through `rlibphonenumber` with the line's region.
//!
//! Not for: deciding whether a number is withheld (see
//! [`super::identity`]), or validating a subscriber `phone` of the API
//! (see `crate::validate`, which is stricter and E.164-only).

use rlibphonenumber::{PhoneNumber, PhoneNumberFormat, PHONE_NUMBER_UTIL};
use std::fmt;

/// Fewest digits of an E.164 number we accept from SIP (country code
/// included). Shorter strings are extensions or service codes, not a phone.
pub const E164_DIGITS_MIN: usize = 8;
/// E.164 caps a number at 15 digits.
pub const E164_DIGITS_MAX: usize = 15;
/// Longest raw user part we look at; longer is garbage, not a number.
pub const RAW_NUMBER_CHARS_MAX: usize = 64;

/// A line's default country: an ISO 3166 alpha-2 code libphonenumber knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    inner: rlibphonenumber::Region,
    /// The upper-case ISO code, ASCII by construction.
    code: [u8; 2],
}

impl Region {
    pub fn parse(code: &str) -> Option<Region> {
        let upper = code.to_ascii_uppercase();
        let bytes: [u8; 2] = upper.as_bytes().try_into().ok()?;
        let inner = rlibphonenumber::Region::from_code(&upper).ok()?;
        // The enum also names placeholder regions ("ZZ" and the like) that
        // have no numbering plan; only a region with a country code reads
        // national numbers.
        PHONE_NUMBER_UTIL.get_country_code_for_region(inner)?;
        Some(Region { inner, code: bytes })
    }

    pub fn is_russia(self) -> bool {
        &self.code == b"RU"
    }

    pub fn code(&self) -> &str {
        std::str::from_utf8(&self.code).unwrap_or("??")
    }
}

impl fmt::Display for Region {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// The E.164 form of `raw` read on a line of `region`, or `None` if it is
/// not a phone number.
pub fn to_e164(raw: &str, region: Region) -> Option<String> {
    if raw.len() > RAW_NUMBER_CHARS_MAX {
        return None;
    }
    // RFC 3966 visual separators, and the spaces some gateways leave in.
    let compact: String = raw
        .chars()
        .filter(|c| !matches!(c, '-' | '.' | '(' | ')' | ' '))
        .collect();
    let (plus, digits) = match compact.strip_prefix('+') {
        Some(d) => (true, d),
        None => (false, compact.as_str()),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if plus {
        return e164_shape(digits);
    }
    if region.is_russia() {
        return russian(digits);
    }
    let number = PhoneNumber::parse(digits, Some(region.inner)).ok()?;
    let e164 = number.format_as(PhoneNumberFormat::E164).into_owned();
    e164_shape(e164.strip_prefix('+')?)
}

fn e164_shape(digits: &str) -> Option<String> {
    let ok = (E164_DIGITS_MIN..=E164_DIGITS_MAX).contains(&digits.len())
        && !digits.starts_with('0')
        && digits.bytes().all(|b| b.is_ascii_digit());
    ok.then(|| format!("+{digits}"))
}

/// The Russian dialling rules, digits only (no `+`).
fn russian(digits: &str) -> Option<String> {
    if let Some(international) = digits.strip_prefix("810") {
        return e164_shape(international);
    }
    match digits.len() {
        11 if digits.starts_with('8') || digits.starts_with('7') => {
            Some(format!("+7{}", &digits[1..]))
        }
        10 => Some(format!("+7{digits}")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ru() -> Region {
        Region::parse("RU").unwrap()
    }

    #[test]
    fn russian_rules_are_exact() {
        let cases = [
            ("89123456789", "+79123456789"),
            ("79123456789", "+79123456789"),
            ("9123456789", "+79123456789"),
            ("+79123456789", "+79123456789"),
            // A St Petersburg number keeps its own 8 after the country code
            // (the `phonenumber` crate drops it, `+78121234567` becoming
            // `+7121234567`: its upstream issue #76, and why `rlibphonenumber`
            // is used).
            ("88121234567", "+78121234567"),
            ("78121234567", "+78121234567"),
            ("8121234567", "+78121234567"),
            // Kazakhstan shares +7.
            ("87011234567", "+77011234567"),
            // 810: the international prefix dialled from Russia.
            ("810441234567890", "+441234567890"),
            ("8104915112345678", "+4915112345678"),
            ("810380441234567", "+380441234567"),
            // Visual separators of tel: URIs.
            ("8-912-345-67-89", "+79123456789"),
            ("+7 (912) 345-67-89", "+79123456789"),
            ("+7.912.345.67.89", "+79123456789"),
        ];
        for (raw, want) in cases {
            assert_eq!(to_e164(raw, ru()).as_deref(), Some(want), "{raw}");
        }
    }

    #[test]
    fn russian_rejects_other_shapes() {
        for raw in [
            "",
            "+",
            "anonymous",
            "Anonymous",
            "123",
            "912345678",           // 9 digits
            "691234567890",        // 12 digits not starting 810
            "59123456789",         // 11 digits starting 5
            "810",                 // prefix only
            "8101234",             // too short after 810
            "8101234567890123456", // too long after 810
            "+0123456789",
            "+1234567",          // 7 digits
            "+1234567890123456", // 16 digits
            "89123456789x",
            "8912345678;ext=1",
        ] {
            assert_eq!(to_e164(raw, ru()), None, "{raw:?}");
        }
        assert_eq!(to_e164(&"1".repeat(RAW_NUMBER_CHARS_MAX + 1), ru()), None);
    }

    #[test]
    fn other_countries_use_libphonenumber() {
        let gb = Region::parse("gb").unwrap();
        assert_eq!(to_e164("07911123456", gb).as_deref(), Some("+447911123456"));
        assert_eq!(
            to_e164("00447911123456", gb).as_deref(),
            Some("+447911123456")
        );
        assert_eq!(
            to_e164("+447911123456", gb).as_deref(),
            Some("+447911123456")
        );
        let us = Region::parse("US").unwrap();
        assert_eq!(to_e164("2025550123", us).as_deref(), Some("+12025550123"));
        assert_eq!(
            to_e164("(202) 555-0123", us).as_deref(),
            Some("+12025550123")
        );
        assert_eq!(
            to_e164("011447911123456", us).as_deref(),
            Some("+447911123456")
        );
        let de = Region::parse("DE").unwrap();
        assert_eq!(to_e164("030123456", de).as_deref(), Some("+4930123456"));
        let kz = Region::parse("KZ").unwrap();
        assert_eq!(to_e164("87011234567", kz).as_deref(), Some("+77011234567"));
        assert_eq!(to_e164("12", us), None);
        assert_eq!(to_e164("abc", us), None);
    }

    #[test]
    fn regions_parse_case_insensitively_and_refuse_unknown_codes() {
        assert!(Region::parse("ru").unwrap().is_russia());
        assert_eq!(Region::parse("GB").unwrap().code(), "GB");
        assert!(Region::parse("XX").is_none());
        assert!(Region::parse("RUS").is_none());
        assert!(Region::parse("").is_none());
    }
}
