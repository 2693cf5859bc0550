//! The subscriber phone check: strict E.164 text, then libphonenumber.
//!
//! The spec admits only `+` and 8-15 digits (no spaces, hyphens or
//! parentheses, which django-phonenumber-field alone would accept), and the
//! original then asks libphonenumber whether the number exists in its
//! country's numbering plan. We use `rlibphonenumber`, whose metadata and
//! parser follow Google's library; the `phonenumber` crate drops a leading 8
//! of a Russian national number (`+78121234567`), which would be fatal here.
//!
//! Not for: choosing the number pool (see [`crate::pool::Pool::for_phone`]),
//! or reading caller numbers from SIP headers (those are not E.164-strict).

use rlibphonenumber::{PhoneNumber, PhoneNumberFormat, PHONE_NUMBER_UTIL};

/// Fewest digits after the `+` (spec: "8 to 15 digits after the plus").
pub const PHONE_DIGITS_MIN: usize = 8;
/// Most digits after the `+`; E.164 itself caps numbers at 15 digits.
pub const PHONE_DIGITS_MAX: usize = 15;

/// Load libphonenumber's metadata now rather than inside the first create
/// request: the first use parses all of it (tens of milliseconds).
pub fn warm_up() {
    std::sync::LazyLock::force(&PHONE_NUMBER_UTIL);
    // Parsing and validating once also builds the lazily compiled
    // per-region patterns that the hot path uses.
    if let Ok(number) = PhoneNumber::parse("+79123456789", None) {
        let _ = number.is_valid();
    }
}

/// The E.164 form of `text` if it is a valid subscriber number, else `None`.
/// `text` is the already-trimmed field value.
pub(crate) fn normalize(text: &str) -> Option<String> {
    let digits = text.strip_prefix('+')?;
    let shape_ok = (PHONE_DIGITS_MIN..=PHONE_DIGITS_MAX).contains(&digits.len())
        && digits.bytes().all(|b| b.is_ascii_digit());
    if !shape_ok {
        return None;
    }
    let number = PhoneNumber::parse(text, None).ok()?;
    if !number.is_valid() {
        return None;
    }
    // Echo what libphonenumber understood, like the original: for a few
    // plans it strips a national prefix written after the country code
    // (`+4401234567890` is `+441234567890`).
    Some(number.format_as(PhoneNumberFormat::E164).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Expected answers are those of Python's `phonenumbers` 9.0.43 (the
    /// library under django-phonenumber-field) for the same inputs.
    #[test]
    fn real_numbers_agree_with_libphonenumber() {
        warm_up();
        let valid = [
            ("+79123456789", "+79123456789"), // RU mobile
            ("+78121234567", "+78121234567"), // St Petersburg: national part starts with 8
            ("+78612345678", "+78612345678"), // Krasnodar, also 8..
            ("+78312345678", "+78312345678"), // Nizhny Novgorod
            ("+78001234567", "+78001234567"), // RU toll-free 800
            ("+74951234567", "+74951234567"), // Moscow
            ("+79991234567", "+79991234567"),
            ("+77011234567", "+77011234567"),   // Kazakhstan mobile
            ("+447911123456", "+447911123456"), // UK mobile
            ("+12025550123", "+12025550123"),   // US, Washington DC
            ("+12125551234", "+12125551234"),
            ("+16502530000", "+16502530000"),
            ("+4930123456", "+4930123456"), // Berlin, short
            ("+380441234567", "+380441234567"),
            ("+375291234567", "+375291234567"),
            ("+998901234567", "+998901234567"),
            ("+8613812345678", "+8613812345678"),
            ("+33612345678", "+33612345678"),
            ("+390612345678", "+390612345678"), // Italy keeps its leading 0
            ("+37491234567", "+37491234567"),
            ("+996555123456", "+996555123456"),
            ("+992917123456", "+992917123456"),
            ("+995555123456", "+995555123456"),
            ("+61412345678", "+61412345678"),
            ("+5511912345678", "+5511912345678"),
            ("+80012345678", "+80012345678"), // international freephone
            ("+4401234567890", "+441234567890"), // national prefix dropped
        ];
        for (input, e164) in valid {
            assert_eq!(normalize(input).as_deref(), Some(e164), "{input}");
        }
        let invalid = [
            "+7912345678",       // one digit short for RU
            "+0123456789",       // no country code 0
            "+99912345678",      // unassigned country code
            "+12345678",         // too short for NANP
            "+1234567890123456", // 16 digits
            "+882123456789",
            "+87012345678",
            "+76001234567",
            "+7 912 345 67 89",
            "+7(912)3456789",
            "+7-912-345-67-89",
            "79123456789",
            "89123456789",
            "+7912345678a",
            "++79123456789",
            "+",
            "",
            "+７９１２３４５６７８９", // fullwidth digits
        ];
        for input in invalid {
            assert_eq!(normalize(input), None, "{input}");
        }
    }
}
