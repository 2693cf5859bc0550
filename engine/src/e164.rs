//! E.164 numbers packed in one word: what the lease table, number health
//! and the held rows keep for each number instead of a heap string.
//!
//! Why: a service may hold a million numbers and hundreds of thousands of
//! pending verifications; a `String` is 24 bytes plus a heap block of 32,
//! and a hash map keyed by one pays both again per entry. An E.164 number
//! has at most 15 digits, so its digits fit in 50 bits.
//!
//! Not for: validating that a number is dialable (config checks the E.164
//! shape, `crate::sip` the region rules); this only stores and prints back
//! exactly the text it was given.

use std::fmt;

/// Most digits of an E.164 number (ITU-T E.164, section 6).
const DIGITS_MAX: usize = 15;
/// Bits holding the digits' value: 10^15 - 1 < 2^50.
const VALUE_BITS: u32 = 50;
const VALUE_MASK: u64 = (1 << VALUE_BITS) - 1;

/// `+` and 1 to 15 ASCII digits, in one word.
///
/// Invariant: the low [`VALUE_BITS`] bits hold the digits read as a decimal
/// value, the bits above them the count of digits, 1..=15, and the value is
/// below 10^count. The count keeps leading zeros (`+0012` and `+12` differ),
/// so rendering gives back exactly the text that was parsed. Only
/// [`PackedNumber::parse`] builds one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PackedNumber(u64);

impl PackedNumber {
    /// `None` unless `text` is `+` followed by 1 to 15 ASCII digits.
    pub fn parse(text: &str) -> Option<PackedNumber> {
        let digits = text.strip_prefix('+')?.as_bytes();
        if digits.is_empty() || digits.len() > DIGITS_MAX {
            return None;
        }
        let mut value = 0u64;
        for &byte in digits {
            if !byte.is_ascii_digit() {
                return None;
            }
            // At most 15 digits: below 10^15, no overflow.
            value = value * 10 + u64::from(byte - b'0');
        }
        let count = digits.len() as u64; // At most 15.
        Some(PackedNumber(count << VALUE_BITS | value))
    }

    /// A value that grows with the numbers' order (`Ord`): what a search
    /// over sorted numbers guesses from.
    pub fn ordinal(self) -> u64 {
        self.0
    }

    fn digits_count(self) -> usize {
        // At most 15 by the invariant.
        (self.0 >> VALUE_BITS) as usize
    }

    fn value(self) -> u64 {
        self.0 & VALUE_MASK
    }
}

impl fmt::Display for PackedNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.write(&mut [0; 16]))
    }
}

impl PackedNumber {
    /// The number's text (`+` and its digits) written into `buf`, without
    /// allocating.
    pub fn write(self, buf: &mut [u8; 16]) -> &str {
        let count = self.digits_count();
        let mut value = self.value();
        for at in (1..=count).rev() {
            buf[at] = b'0' + (value % 10) as u8;
            value /= 10;
        }
        buf[0] = b'+';
        // `+` and ASCII digits only.
        std::str::from_utf8(&buf[..=count]).unwrap_or_default()
    }
}

// 10^15 - 1, the largest 15-digit value, fits the value bits; the count
// (at most 15) fits the 14 bits above them.
const _: () = assert!(10u64.pow(DIGITS_MAX as u32) - 1 <= VALUE_MASK);

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn packs_and_renders_exactly_what_was_parsed() {
        for text in [
            "+1",
            "+74950000001",
            "+442030000001",
            "+999999999999999",
            "+000000000000000",
            "+0012",
            "+12",
        ] {
            let packed = PackedNumber::parse(text).expect(text);
            assert_eq!(packed.to_string(), text);
            assert_eq!(packed.write(&mut [0; 16]), text);
        }
        assert_ne!(PackedNumber::parse("+0012"), PackedNumber::parse("+12"));
    }

    #[test]
    fn refuses_what_is_not_plus_and_one_to_fifteen_digits() {
        for text in [
            "",
            "+",
            "74950000001",
            "+1234567890123456",
            "+7495000000a",
            "+7 495",
            "++7495",
            "+-7495",
            "+٣", // An Arabic-Indic digit: not ASCII.
        ] {
            assert_eq!(PackedNumber::parse(text), None, "{text:?}");
        }
    }
}
